//! GET of one object.

use genplane_apimachinery::errors::ApiError;
use genplane_storage::Storage;
use hyper::{Response, StatusCode};

use super::{Ctx, respond, respond_json};
use crate::body::ResponseBody;
use crate::encode;

/// Answers a get: the object in the negotiated form (JSON, YAML, Table, metadata only). A JSON
/// object is the store's JSON answer (for most resources the stored bytes with their
/// resourceVersion put in, never decoded).
pub(crate) async fn get<S: Storage>(ctx: &Ctx<'_, S>) -> Result<Response<ResponseBody>, ApiError> {
    let negotiated = ctx.negotiate(false)?;
    let store = ctx.store()?;
    let (namespace, name) = (&ctx.request.namespace, &ctx.request.name);
    let resource_version = ctx.query.get("resourceVersion");
    if negotiated.is_json_objects() {
        let mut json = store.get_json(namespace, name, resource_version).await?;
        // As every JSON answer, it ends with a newline.
        json.push(b'\n');
        return Ok(respond_json(
            StatusCode::OK,
            ResponseBody::full(json),
            &negotiated,
        ));
    }
    let object = store.get(namespace, name, resource_version).await?;
    let body = encode::object(ctx.body, object, &negotiated, ctx.now);
    Ok(respond(
        StatusCode::OK,
        &body,
        &negotiated,
        Some(ctx.body),
        &[],
    ))
}
