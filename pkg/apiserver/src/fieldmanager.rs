//! Field ownership on writes: who the field manager of a request is, and the tracker the store
//! calls to update `metadata.managedFields` on creates, updates and non-apply patches.
//!
//! The manager is the `fieldManager` query parameter, else the part of the `User-Agent` before
//! its first `/` (`kubectl/v1.33.0 (linux/amd64)` is `kubectl`), as upstream derives it.

use std::sync::Arc;

use genplane_api::catalog::ResourceDescription;
use genplane_apimachinery::errors::{ApiError, Status};
use genplane_apimachinery::schema::GroupKind;
use genplane_apimachinery::validation::field;
use genplane_merge::fieldpath::{Path, Set};
use genplane_merge::managed::{self, Writer};
use genplane_merge::{Schema, Type, TypeRef};
use genplane_registry::{FieldTracker, TrackFields};
use serde_json::Value;

/// The longest field manager name upstream accepts.
const MAX_MANAGER_BYTES: usize = 128;

/// The manager of a write: `fieldManager`, else the User-Agent's product name.
pub(crate) fn manager_name(field_manager: Option<&str>, user_agent: Option<&str>) -> String {
    match field_manager {
        Some(m) if !m.is_empty() => m.to_owned(),
        _ => user_agent
            .unwrap_or("")
            .split('/')
            .next()
            .unwrap_or("")
            .to_owned(),
    }
}

/// Checks `fieldManager` as upstream validates the options of a write (`options_kind` is
/// `CreateOptions`, `UpdateOptions` or `PatchOptions`): at most 128 bytes, printable, and
/// present for an apply patch.
pub(crate) fn validate(
    options_kind: &str,
    field_manager: Option<&str>,
    apply: bool,
) -> Result<(), ApiError> {
    let path = field::Path::new("fieldManager");
    let mut errors = field::ErrorList::default();
    match field_manager {
        None | Some("") if apply => {
            errors.push(field::Error::required(&path, "is required for apply patch"));
        }
        Some(m) if m.len() > MAX_MANAGER_BYTES => {
            errors.push(field::Error::too_long(&path, m, MAX_MANAGER_BYTES));
        }
        Some(m) if m.chars().any(char::is_control) => {
            errors.push(field::Error::invalid(
                &path,
                m,
                "may not contain non-printable characters",
            ));
        }
        _ => {}
    }
    if errors.is_empty() {
        return Ok(());
    }
    let kind = GroupKind {
        group: "meta.k8s.io".to_owned(),
        kind: options_kind.to_owned(),
    };
    Err(Status::invalid(&kind, "", &errors).into())
}

/// `force` on a patch that is not an apply (422, as upstream validates `PatchOptions`).
pub(crate) fn force_forbidden() -> ApiError {
    let mut errors = field::ErrorList::default();
    errors.push(field::Error::forbidden(
        &field::Path::new("force"),
        "may not be specified for non-apply patch",
    ));
    let kind = GroupKind {
        group: "meta.k8s.io".to_owned(),
        kind: "PatchOptions".to_owned(),
    };
    Status::invalid(&kind, "", &errors).into()
}

/// The type of the objects of a resource in the type model (untyped when it is not there).
pub(crate) fn object_type(types: &Schema, info: &ResourceDescription) -> TypeRef {
    types
        .kind(&info.group, &info.version, &info.kind)
        .unwrap_or_else(|| TypeRef::Inline(Box::new(Type::Untyped)))
}

/// The fields a write through `subresource` cannot change, because the strategy resets them:
/// `status` through the main resource of a resource with a status subresource, `spec` through
/// `status`, `spec` and `status.certificate` through a CertificateSigningRequest's `approval`.
pub(crate) fn ignored(info: &ResourceDescription, subresource: &str) -> Set {
    let paths: &[&[&str]] = match subresource {
        "" if info.subresources.iter().any(|s| s.name == "status") => &[&["status"]],
        "status" => &[&["spec"]],
        "approval" => &[&["spec"], &["status", "certificate"]],
        _ => return Set::new(),
    };
    Set::from_paths(&paths.iter().map(|p| Path::fields(p)).collect::<Vec<_>>())
}

/// Records `Update` operations of one manager.
struct Tracker {
    types: Arc<Schema>,
    ty: TypeRef,
    manager: String,
    api_version: String,
    subresource: String,
    time: String,
    ignored: Set,
}

impl TrackFields for Tracker {
    fn track(&self, old: Option<&Value>, new: &mut Value) {
        let writer = Writer {
            schema: &self.types,
            ty: self.ty.clone(),
            manager: self.manager.clone(),
            api_version: self.api_version.clone(),
            subresource: self.subresource.clone(),
            time: self.time.clone(),
            ignored: self.ignored.clone(),
        };
        // An object that does not fit the type model is still written (validation has the
        // last word), without ownership information rather than with a wrong one.
        if managed::update(&writer, old, new).is_err() {
            managed::remove(new);
        }
    }
}

/// The tracker of a write by `manager` through `subresource` at `now` (Unix seconds).
pub(crate) fn tracker(
    types: &Arc<Schema>,
    info: &ResourceDescription,
    manager: String,
    subresource: &str,
    now: i64,
) -> FieldTracker {
    FieldTracker(Arc::new(Tracker {
        types: Arc::clone(types),
        ty: object_type(types, info),
        manager,
        api_version: info.api_version(),
        subresource: subresource.to_owned(),
        time: genplane_apimachinery::meta::rfc3339(now),
        ignored: ignored(info, subresource),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manager_from_user_agent() {
        assert_eq!(
            manager_name(None, Some("kubectl/v1.33.0 (linux/amd64) kubernetes/abc")),
            "kubectl"
        );
        assert_eq!(
            manager_name(Some(""), Some("OpenAPI-Generator/37.0.2/python")),
            "OpenAPI-Generator"
        );
        assert_eq!(manager_name(Some("me"), Some("kubectl/v1")), "me");
        assert_eq!(manager_name(None, None), "");
    }

    #[test]
    fn apply_needs_a_manager() {
        let error = validate("PatchOptions", None, true).unwrap_err();
        assert_eq!(
            error.0.message,
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
        );
        assert!(validate("PatchOptions", None, false).is_ok());
        assert!(validate("CreateOptions", Some(&"x".repeat(129)), false).is_err());
    }
}
