//! PATCH of one object: JSON merge patch, JSON patch (RFC 6902, `test` included) and strategic
//! merge patch (for kinds the type model knows: see [`genplane_merge::strategic`]).
//!
//! Server-side apply is answered by `apply.rs`. A patch that sets `metadata.resourceVersion` is
//! a precondition (409 on a mismatch); otherwise the patch is applied to the current object and
//! retried if someone else wrote in between, as kube-apiserver does. A patched object whose name
//! or namespace differs from the URL's is a 400, one whose uid changed a 422 (the uid is
//! immutable), as upstream answers.

use crate::body::RequestBody;
use genplane_apimachinery::errors::{ApiError, Status, StatusReason};
use genplane_apimachinery::schema::GroupKind;
use genplane_apimachinery::validation::field;
use genplane_registry::object::meta_str;
use genplane_storage::Storage;
use hyper::header::CONTENT_TYPE;
use hyper::{Response, StatusCode};
use serde_json::Value;

use super::{Ctx, read_bytes, respond};
use crate::body::ResponseBody;
use crate::encode;
use crate::negotiation::{self, PatchType};

/// Applies a JSON patch as upstream's library does: operations in order, all or nothing, and a
/// `test` that a path holds `null` also passes when the path is absent (the object's JSON omits
/// empty fields; kube-runtime's finalizer helper tests `/metadata/finalizers` against `null`
/// before adding the first finalizer).
fn apply_json_patch(
    object: &mut Value,
    operations: &[json_patch::PatchOperation],
) -> Result<(), ApiError> {
    let mut patched = object.clone();
    for (index, operation) in operations.iter().enumerate() {
        if let json_patch::PatchOperation::Test(test) = operation
            && test.value.is_null()
            && patched
                .pointer(test.path.as_str())
                .is_none_or(Value::is_null)
        {
            continue;
        }
        json_patch::patch(&mut patched, std::slice::from_ref(operation)).map_err(|e| {
            ApiError::from(Status::failure(
                StatusReason::Invalid,
                format!(
                    "the JSON patch could not be applied: operation '/{index}' failed at path '{}': {}",
                    e.path, e.kind
                ),
            ))
        })?;
    }
    *object = patched;
    Ok(())
}

/// How often a patch is re-applied after losing a race.
const ATTEMPTS: usize = 5;

/// Answers a patch: 200 with the patched object.
pub(crate) async fn patch<S: Storage>(
    ctx: &Ctx<'_, S>,
    body: RequestBody,
) -> Result<Response<ResponseBody>, ApiError> {
    let negotiated = ctx.negotiate(false)?;
    let content_type = ctx.headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok());
    let patch_type = negotiation::patch_type(content_type)?;
    if patch_type == PatchType::Apply {
        // Server-side apply of a subresource of another kind (a custom resource's Scale) is
        // not supported here: refused rather than applied to the wrong shape.
        if ctx.body.gvk() != ctx.info.gvk() {
            return Err(Status::unsupported_media_type(
                content_type.unwrap_or(""),
                &[
                    "application/json-patch+json",
                    "application/merge-patch+json",
                    "application/strategic-merge-patch+json",
                ],
            )
            .into());
        }
        return super::apply::apply(ctx, &negotiated, body).await;
    }
    // Strategic merge patch needs a built-in kind's type model: custom resources answer 415,
    // as upstream's.
    let strategic = match patch_type {
        PatchType::StrategicMerge if ctx.body.takes_strategic_merge() => {
            ctx.types
                .kind(&ctx.body.group, &ctx.body.version, &ctx.body.kind)
        }
        _ => None,
    };
    if patch_type == PatchType::StrategicMerge && strategic.is_none() {
        return Err(Status::unsupported_media_type(
            content_type.unwrap_or(""),
            &[
                "application/json-patch+json",
                "application/merge-patch+json",
                "application/apply-patch+yaml",
            ],
        )
        .into());
    }
    let bytes = read_bytes(body).await?;
    let (patch, repeated) = genplane_apimachinery::json::parse(&bytes).map_err(|e| {
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
    if strategic.is_some() && !patch.is_object() {
        return Err(Status::bad_request(format!(
            "a strategic merge patch must be a JSON object, not {}",
            json_type(&patch)
        ))
        .into());
    }
    // A key repeated in a merge patch is reported as in a body (a JSON patch's repeats are
    // within its operations, which upstream reads leniently).
    let duplicates = match patch_type {
        PatchType::Merge | PatchType::StrategicMerge => repeated,
        _ => Vec::new(),
    };
    let options = ctx.write_options("PatchOptions")?;
    let (namespace, name) = (&ctx.request.namespace, &ctx.request.name);
    let mut last = None;
    for _ in 0..ATTEMPTS {
        let current = ctx.store()?.get_for_patch(namespace, name).await?;
        let mut patched = current.clone();
        match (&operations, &strategic) {
            (Some(operations), _) => apply_json_patch(&mut patched, operations)?,
            (None, Some(ty)) => {
                patched = genplane_merge::strategic::apply(&current, &patch, ctx.types, ty)
                    .map_err(strategic_error)?;
            }
            (None, None) => json_patch::merge(&mut patched, &patch),
        }
        check_identity(ctx, &current, &patched)?;
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
        match ctx
            .store()?
            .update(namespace, name, patched, &options)
            .await
        {
            Ok(written) => {
                let body = encode::object(ctx.body, written.object, &negotiated, ctx.now);
                return Ok(respond(
                    StatusCode::OK,
                    &body,
                    &negotiated,
                    Some(ctx.body),
                    &[warnings, written.warnings, ctx.admission_warnings()].concat(),
                ));
            }
            Err(e) if !pinned && e.is(StatusReason::Conflict) => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| Status::modified(&ctx.info.group_resource(), name).into()))
}

/// The Status of a strategic merge patch that cannot be applied: 400, or 422 where upstream
/// answers so.
fn strategic_error(e: genplane_merge::strategic::StrategicError) -> ApiError {
    if e.is_unprocessable() {
        Status::failure(StatusReason::Invalid, e.to_string()).into()
    } else {
        Status::bad_request(e.to_string()).into()
    }
}

/// The name and namespace must stay those of the URL (400, as upstream's check of the patched
/// object), the uid that of the stored object (422: the field is immutable).
fn check_identity<S: Storage>(
    ctx: &Ctx<'_, S>,
    current: &Value,
    patched: &Value,
) -> Result<(), ApiError> {
    let (url_namespace, url_name) = (&ctx.request.namespace, &ctx.request.name);
    let name = meta_str(patched, "name");
    if name != url_name.as_str() {
        return Err(Status::bad_request(format!(
            "the name of the object ({name}) does not match the name on the URL ({url_name})"
        ))
        .into());
    }
    let namespace = meta_str(patched, "namespace");
    if !url_namespace.is_empty() && !namespace.is_empty() && namespace != url_namespace.as_str() {
        return Err(Status::bad_request(format!(
            "the namespace of the object ({namespace}) does not match the namespace on the URL \
             ({url_namespace})"
        ))
        .into());
    }
    let uid = meta_str(patched, "uid");
    if uid != meta_str(current, "uid") {
        let path = field::Path::new("metadata").child("uid");
        let errors = field::ErrorList(vec![field::Error::invalid(
            &path,
            uid,
            "field is immutable",
        )]);
        return Err(Status::invalid(
            &GroupKind::new(&ctx.info.group, &ctx.info.kind),
            url_name,
            &errors,
        )
        .into());
    }
    Ok(())
}

/// The JSON type of a value, for messages.
fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}
