//! POST to a collection.

use crate::body::RequestBody;
use genplane_apimachinery::errors::ApiError;
use genplane_storage::Storage;
use hyper::{Response, StatusCode};

use super::{Ctx, respond};
use crate::body::ResponseBody;
use crate::encode;

/// Answers a create: 201 with the created object.
pub(crate) async fn create<S: Storage>(
    ctx: &Ctx<'_, S>,
    body: RequestBody,
) -> Result<Response<ResponseBody>, ApiError> {
    let negotiated = ctx.negotiate(false)?;
    let (object, mut warnings) = ctx.object_body(body).await?;
    let options = ctx.write_options("CreateOptions")?;
    let written = ctx
        .store
        .create(&ctx.request.namespace, object, &options)
        .await?;
    warnings.extend(written.warnings);
    warnings.extend(ctx.admission_warnings());
    let body = encode::object(ctx.info, written.object, &negotiated, ctx.now);
    Ok(respond(
        StatusCode::CREATED,
        &body,
        &negotiated,
        Some(ctx.info),
        &warnings,
    ))
}
