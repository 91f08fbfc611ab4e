//! DELETE of one object or of a collection.

use crate::body::RequestBody;
use genplane_apimachinery::codec::protobuf;
use genplane_apimachinery::errors::{ApiError, Status};
use genplane_apimachinery::meta::schemas::DELETE_OPTIONS;
use genplane_apimachinery::schema::GroupKind;
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use genplane_registry::{DeleteOptions, Deletion, Propagation};
use genplane_storage::Storage;
use hyper::header::CONTENT_TYPE;
use hyper::{Response, StatusCode};
use serde_json::{Value, json};

use super::{Ctx, read_bytes, respond};
use crate::body::ResponseBody;
use crate::encode;
use crate::negotiation::{self, BodyFormat};

/// Reads a protobuf DeleteOptions body (typed clients send their options in the format they
/// send objects in); its kind, when set, must be DeleteOptions.
fn protobuf_delete_options(bytes: &[u8]) -> Result<Value, ApiError> {
    const KIND: &str = "DeleteOptions";
    let envelope = protobuf::read_envelope(bytes).map_err(|e| e.to_unrecognized_error(KIND))?;
    if !envelope.kind.is_empty() && envelope.kind != KIND {
        return Err(Status::bad_request(format!(
            "the kind in the data ({}) does not match the expected kind ({KIND})",
            envelope.kind
        ))
        .into());
    }
    protobuf::decode_object(&envelope, &DELETE_OPTIONS).map_err(|e| e.to_api_error(KIND, "v1"))
}

/// Reads DeleteOptions from the body (optional, kind and apiVersion optional) and the query.
async fn delete_options<S: Storage>(
    ctx: &Ctx<'_, S>,
    body: RequestBody,
) -> Result<DeleteOptions, ApiError> {
    let content_type = ctx.headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok());
    let bytes = read_bytes(body).await?;
    let body: Value = if bytes.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else if negotiation::body_format(content_type).ok() == Some(BodyFormat::Protobuf) {
        protobuf_delete_options(&bytes)?
    } else {
        serde_json::from_slice(&bytes).map_err(|e| {
            ApiError::from(Status::bad_request(format!(
                "the DeleteOptions are not valid JSON: {e}"
            )))
        })?
    };
    let text = |pointer: &str| {
        body.pointer(pointer)
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let propagation = text("/propagationPolicy")
        .or_else(|| ctx.query.get("propagationPolicy").map(str::to_owned));
    let orphan = body
        .get("orphanDependents")
        .and_then(Value::as_bool)
        .or_else(|| ctx.query.get("orphanDependents").map(|v| v == "true"));
    let dry_run = body
        .get("dryRun")
        .and_then(Value::as_array)
        .is_some_and(|values| values.iter().any(|v| v == "All"))
        || ctx.query.dry_run()?;
    let grace = match body.get("gracePeriodSeconds").and_then(Value::as_i64) {
        Some(g) => Some(g),
        None => ctx
            .query
            .get("gracePeriodSeconds")
            .and_then(|g| g.parse().ok()),
    };
    let mut errors = ErrorList::new();
    let policy = match propagation.as_deref() {
        None | Some("") => None,
        Some("Orphan") => Some(Propagation::Orphan),
        Some("Background") => Some(Propagation::Background),
        Some("Foreground") => Some(Propagation::Foreground),
        Some(other) => {
            errors.push(Error::not_supported(
                &Path::new("propagationPolicy"),
                other,
                &["Foreground", "Background", "Orphan"],
            ));
            None
        }
    };
    if orphan.is_some() && policy.is_some() {
        errors.push(Error::invalid(
            &Path::new("propagationPolicy"),
            propagation.clone().unwrap_or_default(),
            "orphanDependents and deletionPropagation cannot be both set",
        ));
    }
    if !errors.is_empty() {
        return Err(
            Status::invalid(&GroupKind::new("meta.k8s.io", "DeleteOptions"), "", &errors).into(),
        );
    }
    let policy = policy.or(match orphan {
        Some(true) => Some(Propagation::Orphan),
        Some(false) => Some(Propagation::Background),
        None => None,
    });
    Ok(DeleteOptions {
        uid: text("/preconditions/uid"),
        resource_version: text("/preconditions/resourceVersion"),
        propagation: policy,
        grace_period_seconds: grace,
        dry_run,
        admission: ctx.admission.clone(),
    })
}

/// Answers a delete: a Success Status when the object is gone, the object when it waits for
/// its finalizers.
pub(crate) async fn delete<S: Storage>(
    ctx: &Ctx<'_, S>,
    body: RequestBody,
) -> Result<Response<ResponseBody>, ApiError> {
    let negotiated = ctx.negotiate(false)?;
    let options = delete_options(ctx, body).await?;
    match ctx
        .store()?
        .delete(&ctx.request.namespace, &ctx.request.name, &options)
        .await?
    {
        Deletion::Gone(object) => {
            let status = Status::success(Some(ctx.store()?.deleted_details(&object)));
            Ok(respond(
                StatusCode::OK,
                &encode::status(&status),
                &negotiated,
                Some(ctx.info),
                &[],
            ))
        }
        Deletion::Pending(object) => {
            let body = encode::object(ctx.info, object, &negotiated, ctx.now);
            Ok(respond(
                StatusCode::OK,
                &body,
                &negotiated,
                Some(ctx.info),
                &[],
            ))
        }
    }
}

/// Answers a delete of a collection: the list of what was deleted or marked for deletion.
pub(crate) async fn delete_collection<S: Storage>(
    ctx: &Ctx<'_, S>,
    body: RequestBody,
) -> Result<Response<ResponseBody>, ApiError> {
    let negotiated = ctx.negotiate(true)?;
    let list_options = ctx.query.list_options(false)?;
    let options = delete_options(ctx, body).await?;
    let deleted = ctx
        .store()?
        .delete_collection(&ctx.request.namespace, &list_options, &options)
        .await?;
    let body = json!({"kind": ctx.info.list_kind, "apiVersion": ctx.info.api_version(), "metadata": {}, "items": deleted});
    Ok(respond(
        StatusCode::OK,
        &body,
        &negotiated,
        Some(ctx.info),
        &[],
    ))
}
