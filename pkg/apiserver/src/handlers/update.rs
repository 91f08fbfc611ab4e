//! PUT of one object.

use crate::body::RequestBody;
use genplane_apimachinery::errors::ApiError;
use genplane_storage::Storage;
use hyper::{Response, StatusCode};

use super::{Ctx, respond, respond_stored};
use crate::body::ResponseBody;
use crate::encode;

/// Answers a replace: 200 with the stored object (201 when it was created).
pub(crate) async fn update<S: Storage>(
    ctx: &Ctx<'_, S>,
    body: RequestBody,
) -> Result<Response<ResponseBody>, ApiError> {
    let negotiated = ctx.negotiate(false)?;
    let (object, mut warnings) = ctx.object_body(body).await?;
    let options = ctx.write_options("UpdateOptions")?;
    let mut written = ctx
        .store()?
        .update(&ctx.request.namespace, &ctx.request.name, object, &options)
        .await?;
    warnings.extend(std::mem::take(&mut written.warnings));
    warnings.extend(ctx.admission_warnings());
    let code = if written.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    if let Some(response) = respond_stored(ctx.store()?, &written, code, &negotiated, &warnings) {
        return Ok(response);
    }
    let body = encode::object(ctx.body, written.object, &negotiated, ctx.now);
    Ok(respond(code, &body, &negotiated, Some(ctx.body), &warnings))
}
