//! PATCH of one object: JSON merge patch and JSON patch (RFC 6902, `test` included).
//!
//! Server-side apply is answered by `apply.rs`; strategic merge patch comes with its own work
//! and answers 415 until then. A patch that sets `metadata.resourceVersion` is a precondition (409 on a mismatch);
//! otherwise the patch is applied to the current object and retried if someone else wrote in
//! between, as kube-apiserver does.

use genplane_apimachinery::errors::{ApiError, Status, StatusReason};
use genplane_registry::object::meta_str;
use genplane_storage::Storage;
use hyper::body::Incoming;
use hyper::header::CONTENT_TYPE;
use hyper::{Response, StatusCode};
use serde_json::Value;

use super::{Ctx, read_bytes, respond};
use crate::body::ResponseBody;
use crate::encode;
use crate::negotiation::{self, PatchType};

/// How often a patch is re-applied after losing a race.
const ATTEMPTS: usize = 5;

/// Answers a patch: 200 with the patched object.
pub(crate) async fn patch<S: Storage>(
    ctx: &Ctx<'_, S>,
    body: Incoming,
) -> Result<Response<ResponseBody>, ApiError> {
    let negotiated = ctx.negotiate(false)?;
    let content_type = ctx.headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok());
    let patch_type = negotiation::patch_type(content_type)?;
    if patch_type == PatchType::Apply {
        return super::apply::apply(ctx, &negotiated, body).await;
    }
    if matches!(patch_type, PatchType::StrategicMerge | PatchType::Apply) {
        return Err(Status::unsupported_media_type(
            content_type.unwrap_or(""),
            &[
                "application/json-patch+json",
                "application/merge-patch+json",
            ],
        )
        .into());
    }
    let bytes = read_bytes(body).await?;
    let patch: Value = serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::from(Status::bad_request(format!(
            "the patch is not valid JSON: {e}"
        )))
    })?;
    let operations: Option<Vec<json_patch::PatchOperation>> = match patch_type {
        PatchType::Json => Some(serde_json::from_value(patch.clone()).map_err(|e| {
            ApiError::from(Status::bad_request(format!(
                "the patch is not a valid JSON patch: {e}"
            )))
        })?),
        _ => None,
    };
    // A key repeated in a merge patch is reported as in a body (a JSON patch's repeats are
    // within its operations, which upstream reads leniently).
    let duplicates = match patch_type {
        PatchType::Merge => genplane_apimachinery::json::duplicate_fields(&bytes),
        _ => Vec::new(),
    };
    let options = ctx.write_options("PatchOptions")?;
    let (namespace, name) = (&ctx.request.namespace, &ctx.request.name);
    let mut last = None;
    for _ in 0..ATTEMPTS {
        let current = ctx.store.get(namespace, name, None).await?;
        let mut patched = current.clone();
        match &operations {
            Some(operations) => json_patch::patch(&mut patched, operations).map_err(|e| {
                ApiError::from(Status::failure(
                    StatusReason::Invalid,
                    format!("the JSON patch could not be applied: {e}"),
                ))
            })?,
            None => json_patch::merge(&mut patched, &patch),
        }
        // A patch that set a resourceVersion asked for exactly that version.
        let pinned = meta_str(&patched, "resourceVersion") != meta_str(&current, "resourceVersion");
        if meta_str(&patched, "resourceVersion").is_empty() {
            genplane_registry::object::set_meta_str(
                &mut patched,
                "resourceVersion",
                meta_str(&current, "resourceVersion"),
            );
        }
        let warnings = ctx.field_validation(&patched, &duplicates)?;
        match ctx.store.update(namespace, name, patched, &options).await {
            Ok(written) => {
                let body = encode::object(ctx.info, written.object, &negotiated, ctx.now);
                return Ok(respond(
                    StatusCode::OK,
                    &body,
                    &negotiated,
                    Some(ctx.info),
                    &[warnings, written.warnings].concat(),
                ));
            }
            Err(e) if !pinned && e.is(StatusReason::Conflict) => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| Status::modified(&ctx.info.group_resource(), name).into()))
}
