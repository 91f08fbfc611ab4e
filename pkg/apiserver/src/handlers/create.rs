//! POST to a collection (or to a subresource that is created, `serviceaccounts/<name>/token`).

use crate::body::RequestBody;
use genplane_apimachinery::errors::ApiError;
use genplane_storage::Storage;
use hyper::{Response, StatusCode};

use super::{Ctx, respond, respond_stored};
use crate::answer::Creating;
use crate::backing::Backing;
use crate::body::ResponseBody;
use crate::encode;

/// Answers a create: 201 with the created object, or with the answer of a kind that is never
/// stored (a review, a TokenRequest), once its body was admitted and validated as a stored
/// one's is.
pub(crate) async fn create<S: Storage>(
    ctx: &Ctx<'_, S>,
    body: RequestBody,
) -> Result<Response<ResponseBody>, ApiError> {
    let negotiated = ctx.negotiate(false)?;
    let (object, mut warnings) = ctx.object_body(body).await?;
    let options = ctx.write_options("CreateOptions")?;
    let mut written = match ctx.backing {
        Backing::Stored(store) => {
            store
                .create(&ctx.request.namespace, object, &options)
                .await?
        }
        Backing::Computed { create, answer } => {
            let object = create
                .admit(&ctx.request.namespace, object, &options)
                .await?;
            let creating = Creating {
                user: ctx.user,
                namespace: &ctx.request.namespace,
                name: &ctx.request.name,
                dry_run: options.dry_run,
                now: ctx.now,
                security: ctx.security,
                objects: ctx.objects,
            };
            answer.answer(&creating, object).await?
        }
    };
    warnings.extend(std::mem::take(&mut written.warnings));
    warnings.extend(ctx.admission_warnings());
    if let Backing::Stored(store) = ctx.backing
        && let Some(response) =
            respond_stored(store, &written, StatusCode::CREATED, &negotiated, &warnings)
    {
        return Ok(response);
    }
    let body = encode::object(ctx.body, written.object, &negotiated, ctx.now);
    Ok(respond(
        StatusCode::CREATED,
        &body,
        &negotiated,
        Some(ctx.body),
        &warnings,
    ))
}
