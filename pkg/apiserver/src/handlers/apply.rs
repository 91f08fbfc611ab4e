//! Server-side apply: a PATCH with `application/apply-patch+yaml`.
//!
//! The body is an applied configuration (YAML, or JSON, which is YAML too) of the URL's kind
//! and API version. It is merged into the live object by the type model and recorded in
//! `metadata.managedFields` under the `fieldManager` (required) with operation `Apply`
//! ([`genplane_merge::managed::apply`]). Fields other managers own with other values are
//! conflicts (409 `Conflict`, one `FieldManagerConflict` cause per field) unless `force=true`,
//! which takes them over. A missing object is created from the configuration (201), with the
//! name and namespace of the URL.

use crate::body::RequestBody;
use genplane_apimachinery::errors::{ApiError, Status, StatusCause, StatusDetails, StatusReason};
use genplane_merge::managed::{self, ApplyError, Writer};
use genplane_registry::WriteOptions;
use genplane_registry::object::{meta_str, set_meta_str};
use genplane_storage::Storage;
use hyper::{Response, StatusCode};
use serde_json::Value;

use super::{Ctx, read_bytes, respond};
use crate::body::ResponseBody;
use crate::encode;
use crate::negotiation::Negotiated;
use crate::request_body::FieldValidation;
use genplane_apimachinery::yaml::Repeated;

/// How often an apply is computed again after losing a race with another write.
const ATTEMPTS: usize = 5;

/// The Status of apply conflicts, as upstream words it.
fn conflict_status(conflicts: &[managed::Conflict]) -> Status {
    let causes = conflicts
        .iter()
        .map(|c| StatusCause {
            reason: "FieldManagerConflict".to_owned(),
            message: format!("conflict with {}", c.manager),
            field: c.path.to_string(),
        })
        .collect();
    Status::failure(
        StatusReason::Conflict,
        managed::conflicts_message(conflicts),
    )
    .with_details(StatusDetails {
        causes,
        ..StatusDetails::default()
    })
}

/// The answer to a configuration that does not fit the kind's type, in upstream's words.
/// Upstream answers it with a 500; it is the client's mistake, so genplane answers 400.
fn untyped(
    namespace: &str,
    name: &str,
    api_version: &str,
    kind: &str,
    errors: impl std::fmt::Display,
) -> ApiError {
    Status::bad_request(format!(
        "failed to create typed patch object ({namespace}/{name}; {api_version}, Kind={kind}): {errors}"
    ))
    .into()
}

/// Reads the applied configuration (YAML, of which JSON is a form: JSON without repeated keys
/// is read as JSON, faster), and the keys it repeats (the last value kept), as upstream's YAML
/// decoding reads it.
fn read_config(bytes: &[u8]) -> Result<(Value, Vec<Repeated>), ApiError> {
    let (config, repeated) = match genplane_apimachinery::json::parse(bytes) {
        Ok((config, repeated)) if repeated.is_empty() => (config, Vec::new()),
        _ => {
            let text = std::str::from_utf8(bytes).map_err(|e| {
                ApiError::from(Status::bad_request(format!(
                    "the request body is not UTF-8: {e}"
                )))
            })?;
            genplane_apimachinery::yaml::from_str_repeating(text).map_err(|e| {
                ApiError::from(Status::bad_request(format!("error decoding YAML: {e}")))
            })?
        }
    };
    if !config.is_object() {
        return Err(Status::bad_request("the applied configuration must be an object").into());
    }
    Ok((config, repeated))
}

/// What `fieldValidation` makes of the keys an applied configuration repeats, in upstream's
/// words: Strict refuses them (400), Warn warns of each, Ignore keeps the last values.
fn repeated_keys(mode: FieldValidation, repeated: &[Repeated]) -> Result<Vec<String>, ApiError> {
    if repeated.is_empty() || mode == FieldValidation::Ignore {
        return Ok(Vec::new());
    }
    let lines: Vec<String> = repeated.iter().map(ToString::to_string).collect();
    if mode == FieldValidation::Strict {
        return Err(Status::bad_request(format!(
            "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n  {}",
            lines.join("\n  ")
        ))
        .into());
    }
    Ok(lines)
}

/// Answers an apply patch: 200 with the object, 201 when it was created.
pub(crate) async fn apply<S: Storage>(
    ctx: &Ctx<'_, S>,
    negotiated: &Negotiated,
    body: RequestBody,
) -> Result<Response<ResponseBody>, ApiError> {
    let field_manager = ctx.query.get("fieldManager");
    crate::fieldmanager::validate("PatchOptions", field_manager, true)?;
    let force = ctx.query.flag("force");
    let dry_run = ctx.query.dry_run()?;
    let bytes = read_bytes(body).await?;
    let mode = FieldValidation::parse(ctx.query.get("fieldValidation"))?;
    let (mut config, repeated) = read_config(&bytes)?;

    let info = ctx.info;
    let expected = info.api_version();
    let given = config
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if given != expected {
        return Err(Status::bad_request(format!(
            "Incorrect version specified in apply patch. Specified patch version: {given}, expected: {expected}"
        ))
        .into());
    }
    let kind = config.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind != info.kind {
        return Err(Status::bad_request(format!(
            "the kind in the apply patch ({kind}) does not match the expected kind ({})",
            info.kind
        ))
        .into());
    }
    let (namespace, name) = (&ctx.request.namespace, &ctx.request.name);
    match meta_str(&config, "name") {
        "" => set_meta_str(&mut config, "name", name),
        given if given != name => {
            return Err(Status::bad_request(format!(
                "the name of the object ({given}) does not match the name on the URL ({name})"
            ))
            .into());
        }
        _ => {}
    }
    // Unknown fields are not a matter of fieldValidation for an apply: the configuration must
    // fit the kind's type, as upstream's typed patch must (repeated keys are).
    let unknown = info.unknown_fields(&config)?;
    if !unknown.is_empty() {
        let errors: Vec<String> = unknown
            .iter()
            .map(|path| format!(".{path}: field not declared in schema"))
            .collect();
        let errors = match errors.as_slice() {
            [one] => one.clone(),
            many => format!("errors:\n  {}", many.join("\n  ")),
        };
        return Err(untyped(namespace, name, &expected, &info.kind, &errors));
    }
    let warnings = repeated_keys(mode, &repeated)?;

    let writer = Writer {
        schema: ctx.types,
        ty: crate::fieldmanager::object_type(ctx.types, info),
        manager: field_manager.unwrap_or_default().to_owned(),
        api_version: expected.clone(),
        subresource: ctx.request.subresource.clone(),
        time: genplane_apimachinery::meta::rfc3339(ctx.now),
        ignored: crate::fieldmanager::ignored(info, &ctx.request.subresource),
    };
    let options = WriteOptions {
        dry_run,
        fields: None,
        escalation: ctx.escalation.clone(),
        admission: ctx.admission.clone(),
        user: Some(std::sync::Arc::new(ctx.user.clone())),
    };
    let mut last = None;
    for attempt in 0..ATTEMPTS {
        // The first attempt starts from the watch cache's copy (no storage read): the write
        // below is conditional on its resourceVersion, so a stale copy only costs a retry, and
        // any failure computed from it is computed again from a fresh read before it is
        // answered.
        let cached = attempt == 0;
        let current = match ctx
            .store()?
            .get(namespace, name, cached.then_some("0"))
            .await
        {
            Ok(object) => Some(object),
            Err(e) if e.is(StatusReason::NotFound) => None,
            Err(_) if cached => continue,
            Err(e) => return Err(e),
        };
        let computed = managed::apply(&writer, current.as_ref(), &config, force);
        if cached && (computed.is_err() || current.is_none()) {
            // Conflicts, refusals and creations are decided on a fresh read only.
            continue;
        }
        let (mut applied, _) = computed.map_err(|e| match e {
            ApplyError::Conflicts(conflicts) => ApiError::from(conflict_status(&conflicts)),
            ApplyError::BadRequest(message) => Status::bad_request(message).into(),
            ApplyError::Type(e) => untyped(namespace, name, &expected, &info.kind, e),
        })?;
        let result = match &current {
            None => {
                if !ctx.request.subresource.is_empty() {
                    return Err(Status::not_found(&info.group_resource(), name).into());
                }
                ctx.store()?
                    .create_named(namespace, name, applied, &options)
                    .await
            }
            Some(current) => {
                // The apply was computed from this version: write exactly over it.
                set_meta_str(
                    &mut applied,
                    "resourceVersion",
                    meta_str(current, "resourceVersion"),
                );
                ctx.store()?
                    .update(namespace, name, applied, &options)
                    .await
            }
        };
        match result {
            Ok(written) => {
                let code = if written.created {
                    StatusCode::CREATED
                } else {
                    StatusCode::OK
                };
                let body = encode::object(info, written.object, negotiated, ctx.now);
                return Ok(respond(
                    code,
                    &body,
                    negotiated,
                    Some(info),
                    &[warnings, written.warnings, ctx.admission_warnings()].concat(),
                ));
            }
            Err(e)
                if cached || e.is(StatusReason::Conflict) || e.is(StatusReason::AlreadyExists) =>
            {
                last = Some(e);
            }
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| Status::modified(&info.group_resource(), name).into()))
}
