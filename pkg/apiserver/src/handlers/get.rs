//! GET of one object.

use genplane_apimachinery::errors::ApiError;
use genplane_storage::Storage;
use hyper::{Response, StatusCode};

use super::{Ctx, respond};
use crate::body::ResponseBody;
use crate::encode;

/// Answers a get: the object in the negotiated form (JSON, YAML, Table, metadata only).
pub(crate) async fn get<S: Storage>(ctx: &Ctx<'_, S>) -> Result<Response<ResponseBody>, ApiError> {
    let negotiated = ctx.negotiate(false)?;
    let object = ctx
        .store()?
        .get(
            &ctx.request.namespace,
            &ctx.request.name,
            ctx.query.get("resourceVersion"),
        )
        .await?;
    let body = encode::object(ctx.body, object, &negotiated, ctx.now);
    Ok(respond(
        StatusCode::OK,
        &body,
        &negotiated,
        Some(ctx.body),
        &[],
    ))
}
