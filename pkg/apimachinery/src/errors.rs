//! The `Status` object every failed request answers with, and its constructors; and how an
//! error reads in a message with its sources ([`chain`]).
//!
//! Clients branch on `reason` (kube-rs 5 looks at nothing else), so each constructor sets the
//! exact upstream reason and code, and a message in the upstream form, e.g.
//! `configmaps "settings" not found` or
//! `ConfigMap "x" is invalid: data[a b]: Invalid value: "a b": ...`.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::schema::{GroupKind, GroupResource};
use crate::validation::field::ErrorList;

/// Why a request failed, as the `reason` field of a Status spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StatusReason {
    /// No valid credentials (401).
    Unauthorized,
    /// Not allowed (403).
    Forbidden,
    /// The object does not exist (404).
    NotFound,
    /// A create found the object already there (409).
    AlreadyExists,
    /// A write lost a race or failed a precondition (409).
    Conflict,
    /// The resource is gone (410).
    Gone,
    /// The resource version asked for has expired (410).
    Expired,
    /// The object is invalid (422), with one cause per problem.
    Invalid,
    /// The server could not finish in time; retry (500).
    ServerTimeout,
    /// The request timed out (504).
    Timeout,
    /// Too many requests; retry after a while (429).
    TooManyRequests,
    /// The request is malformed (400).
    BadRequest,
    /// The verb is not supported on this resource (405).
    MethodNotAllowed,
    /// None of the accepted response types can be produced (406).
    NotAcceptable,
    /// The body is too large (413).
    RequestEntityTooLarge,
    /// The body's content type is not understood (415).
    UnsupportedMediaType,
    /// Something went wrong in the server (500).
    InternalError,
    /// The server is not ready to serve the request (503).
    ServiceUnavailable,
}

impl StatusReason {
    /// The reason as it appears on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            StatusReason::Unauthorized => "Unauthorized",
            StatusReason::Forbidden => "Forbidden",
            StatusReason::NotFound => "NotFound",
            StatusReason::AlreadyExists => "AlreadyExists",
            StatusReason::Conflict => "Conflict",
            StatusReason::Gone => "Gone",
            StatusReason::Expired => "Expired",
            StatusReason::Invalid => "Invalid",
            StatusReason::ServerTimeout => "ServerTimeout",
            StatusReason::Timeout => "Timeout",
            StatusReason::TooManyRequests => "TooManyRequests",
            StatusReason::BadRequest => "BadRequest",
            StatusReason::MethodNotAllowed => "MethodNotAllowed",
            StatusReason::NotAcceptable => "NotAcceptable",
            StatusReason::RequestEntityTooLarge => "RequestEntityTooLarge",
            StatusReason::UnsupportedMediaType => "UnsupportedMediaType",
            StatusReason::InternalError => "InternalError",
            StatusReason::ServiceUnavailable => "ServiceUnavailable",
        }
    }

    /// The HTTP status code that goes with the reason.
    pub fn code(self) -> u16 {
        match self {
            StatusReason::Unauthorized => 401,
            StatusReason::Forbidden => 403,
            StatusReason::NotFound => 404,
            StatusReason::AlreadyExists | StatusReason::Conflict => 409,
            StatusReason::Gone | StatusReason::Expired => 410,
            StatusReason::Invalid => 422,
            StatusReason::ServerTimeout | StatusReason::InternalError => 500,
            StatusReason::Timeout => 504,
            StatusReason::TooManyRequests => 429,
            StatusReason::BadRequest => 400,
            StatusReason::MethodNotAllowed => 405,
            StatusReason::NotAcceptable => 406,
            StatusReason::RequestEntityTooLarge => 413,
            StatusReason::UnsupportedMediaType => 415,
            StatusReason::ServiceUnavailable => 503,
        }
    }
}

/// One cause of a failure, usually one invalid field.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusCause {
    /// A machine-readable cause, e.g. `FieldValueInvalid`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// What is wrong, in words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The field, e.g. `metadata.name`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub field: String,
}

/// Which object a Status is about, and its causes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusDetails {
    /// The object's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The object's group.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// The object's kind (or resource, for not-found and conflict errors, as upstream).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// The object's uid.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// The causes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<StatusCause>,
    /// When to retry, for retryable failures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_seconds: Option<u32>,
}

/// The list metadata of a Status: empty, except for the continue token of a 410 that lets a
/// paginated list go on (see [`Status::with_continue`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusMeta {
    /// A continue token the client may list on with, as `metadata.continue`.
    #[serde(rename = "continue", default, skip_serializing_if = "String::is_empty")]
    pub continue_token: String,
}

/// A `meta.k8s.io/v1` Status: the body of every error answer, and of some successful deletes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// Always `Status`.
    pub kind: String,
    /// Always `v1`.
    pub api_version: String,
    /// Empty, except for a continue token (see [`Status::with_continue`]).
    pub metadata: StatusMeta,
    /// `Success` or `Failure`.
    pub status: String,
    /// What happened, in words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Why, as a [`StatusReason`] string; empty when there is none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Which object, and the causes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<StatusDetails>,
    /// The HTTP status code.
    pub code: u16,
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Status {}

/// A failed API request: a [`Status`], boxed so that `Result`s stay small. It dereferences to
/// the Status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError(pub Box<Status>);

impl ApiError {
    /// The Status to answer with.
    pub fn into_status(self) -> Status {
        *self.0
    }
}

impl From<Status> for ApiError {
    fn from(status: Status) -> Self {
        ApiError(Box::new(status))
    }
}

impl std::ops::Deref for ApiError {
    type Target = Status;

    fn deref(&self) -> &Status {
        &self.0
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.message)
    }
}

impl std::error::Error for ApiError {}

fn quoted_name(resource: &GroupResource, name: &str) -> String {
    if name.is_empty() {
        resource.to_string()
    } else {
        format!("{resource} {}", crate::gofmt::Quoted(name))
    }
}

fn resource_details(resource: &GroupResource, name: &str) -> StatusDetails {
    StatusDetails {
        name: name.to_owned(),
        group: resource.group.clone(),
        kind: resource.resource.clone(),
        ..StatusDetails::default()
    }
}

impl Status {
    /// A failure with `reason`, its code, and `message`.
    pub fn failure(reason: StatusReason, message: impl Into<String>) -> Self {
        Self {
            kind: "Status".to_owned(),
            api_version: "v1".to_owned(),
            metadata: StatusMeta::default(),
            status: "Failure".to_owned(),
            message: message.into(),
            reason: reason.as_str().to_owned(),
            details: None,
            code: reason.code(),
        }
    }

    /// A success, e.g. the answer to a delete that removed the object at once.
    pub fn success(details: Option<StatusDetails>) -> Self {
        Self {
            kind: "Status".to_owned(),
            api_version: "v1".to_owned(),
            metadata: StatusMeta::default(),
            status: "Success".to_owned(),
            message: String::new(),
            reason: String::new(),
            details,
            code: 200,
        }
    }

    /// Carries `token` in `metadata.continue`: the token of an expired paginated list that
    /// goes on from where it stopped, at the current state.
    #[must_use]
    pub fn with_continue(mut self, token: impl Into<String>) -> Self {
        self.metadata.continue_token = token.into();
        self
    }

    /// Adds details.
    #[must_use]
    pub fn with_details(mut self, details: StatusDetails) -> Self {
        self.details = Some(details);
        self
    }

    /// `<resource> "<name>" not found` (404 NotFound).
    pub fn not_found(resource: &GroupResource, name: &str) -> Self {
        Self::failure(
            StatusReason::NotFound,
            format!("{} not found", quoted_name(resource, name)),
        )
        .with_details(resource_details(resource, name))
    }

    /// `<resource> "<name>" already exists` (409 AlreadyExists).
    pub fn already_exists(resource: &GroupResource, name: &str) -> Self {
        Self::failure(
            StatusReason::AlreadyExists,
            format!("{} already exists", quoted_name(resource, name)),
        )
        .with_details(resource_details(resource, name))
    }

    /// `Operation cannot be fulfilled on <resource> "<name>": <detail>` (409 Conflict).
    pub fn conflict(resource: &GroupResource, name: &str, detail: &str) -> Self {
        Self::failure(
            StatusReason::Conflict,
            format!(
                "Operation cannot be fulfilled on {}: {detail}",
                quoted_name(resource, name)
            ),
        )
        .with_details(resource_details(resource, name))
    }

    /// The conflict of a write whose resourceVersion precondition failed.
    pub fn modified(resource: &GroupResource, name: &str) -> Self {
        Self::conflict(
            resource,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// `<Kind> "<name>" is invalid: <errors>` (422 Invalid), one cause per field error.
    pub fn invalid(kind: &GroupKind, name: &str, errors: &ErrorList) -> Self {
        let causes = errors
            .iter()
            .map(|e| StatusCause {
                reason: e.kind.reason().to_owned(),
                message: e.body(),
                field: e.field.to_string(),
            })
            .collect();
        Self::failure(
            StatusReason::Invalid,
            format!("{kind} {} is invalid: {errors}", crate::gofmt::Quoted(name)),
        )
        .with_details(StatusDetails {
            name: name.to_owned(),
            group: kind.group.clone(),
            kind: kind.kind.clone(),
            causes,
            ..StatusDetails::default()
        })
    }

    /// A malformed request (400 BadRequest).
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::failure(StatusReason::BadRequest, message)
    }

    /// `<resource> "<name>" is forbidden: <why>` (403 Forbidden).
    pub fn forbidden(resource: &GroupResource, name: &str, why: &str) -> Self {
        Self::failure(
            StatusReason::Forbidden,
            format!("{} is forbidden: {why}", quoted_name(resource, name)),
        )
        .with_details(resource_details(resource, name))
    }

    /// Missing or bad credentials (401 Unauthorized).
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::failure(StatusReason::Unauthorized, message)
    }

    /// `<verb> is not supported on resources of kind "<resource>"` (405 MethodNotAllowed).
    pub fn method_not_supported(resource: &GroupResource, verb: &str) -> Self {
        Self::failure(
            StatusReason::MethodNotAllowed,
            format!(
                "{verb} is not supported on resources of kind {}",
                crate::gofmt::quote(&resource.to_string())
            ),
        )
        .with_details(resource_details(resource, ""))
    }

    /// An expired resource version or continue token (410 Expired).
    pub fn expired(message: impl Into<String>) -> Self {
        Self::failure(StatusReason::Expired, message)
    }

    /// A watch started from a revision the server no longer has (410 Expired).
    pub fn too_old_resource_version(requested: i64, oldest: i64) -> Self {
        Self::expired(format!("too old resource version: {requested} ({oldest})"))
    }

    /// Gone (410 Gone).
    pub fn gone(message: impl Into<String>) -> Self {
        Self::failure(StatusReason::Gone, message)
    }

    /// Too many requests (429 TooManyRequests), with a retry hint.
    pub fn too_many_requests(message: impl Into<String>, retry_after_seconds: u32) -> Self {
        Self::failure(StatusReason::TooManyRequests, message).with_details(StatusDetails {
            retry_after_seconds: Some(retry_after_seconds),
            ..StatusDetails::default()
        })
    }

    /// A body over the limit (413 RequestEntityTooLarge).
    pub fn request_entity_too_large(limit: usize) -> Self {
        Self::failure(
            StatusReason::RequestEntityTooLarge,
            format!("Request entity too large: limit is {limit}"),
        )
    }

    /// A body in a format the server does not read (415 UnsupportedMediaType).
    pub fn unsupported_media_type(content_type: &str, accepted: &[&str]) -> Self {
        Self::failure(
            StatusReason::UnsupportedMediaType,
            format!(
                "the body of the request was in an unknown format ({content_type}) - accepted media types include: {}",
                accepted.join(", ")
            ),
        )
    }

    /// No acceptable response type (406 NotAcceptable).
    pub fn not_acceptable(accepted: &[&str]) -> Self {
        Self::failure(
            StatusReason::NotAcceptable,
            format!(
                "only the following media types are accepted: {}",
                accepted.join(", ")
            ),
        )
    }

    /// The request timed out (504 Timeout), with a retry hint.
    pub fn timeout(message: impl Into<String>, retry_after_seconds: u32) -> Self {
        Self::failure(StatusReason::Timeout, message).with_details(StatusDetails {
            retry_after_seconds: Some(retry_after_seconds),
            ..StatusDetails::default()
        })
    }

    /// A read at a resource version the server has not reached yet (504 Timeout), as upstream
    /// answers after waiting: clients retry after a second.
    pub fn too_large_resource_version(requested: i64, current: i64) -> Self {
        let mut status = Self::timeout(
            format!("Too large resource version: {requested}, current: {current}"),
            1,
        );
        if let Some(details) = status.details.as_mut() {
            details.causes.push(StatusCause {
                reason: "ResourceVersionTooLarge".to_owned(),
                message: "Too large resource version".to_owned(),
                field: String::new(),
            });
        }
        status
    }

    /// The server could not complete the operation in time (500 ServerTimeout).
    pub fn server_timeout(
        resource: &GroupResource,
        operation: &str,
        retry_after_seconds: u32,
    ) -> Self {
        Self::failure(
            StatusReason::ServerTimeout,
            format!("The {operation} operation against {resource} could not be completed at this time, please try again."),
        )
        .with_details(StatusDetails {
            retry_after_seconds: Some(retry_after_seconds),
            ..resource_details(resource, "")
        })
    }

    /// A failure inside the server (500 InternalError).
    pub fn internal_error(message: impl fmt::Display) -> Self {
        Self::failure(
            StatusReason::InternalError,
            format!("Internal error occurred: {message}"),
        )
    }

    /// The server cannot serve now (503 ServiceUnavailable).
    pub fn service_unavailable(message: impl Into<String>) -> Self {
        Self::failure(StatusReason::ServiceUnavailable, message)
    }

    /// Whether the reason is `reason`.
    pub fn is(&self, reason: StatusReason) -> bool {
        self.reason == reason.as_str()
    }
}

/// An error and its sources, joined by `: `: how a wrapped error reads in a message
/// (`creating Service lb: <the API server's message>`), as Go prints a wrapped error and
/// anyhow's `{:#}` prints a chain.
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validation::field::{Error, Path};
    use serde_json::json;

    fn configmaps() -> GroupResource {
        GroupResource::new("", "configmaps")
    }

    #[test]
    fn not_found_matches_the_upstream_wire_form() {
        let status = Status::not_found(&configmaps(), "settings");
        assert_eq!(
            serde_json::to_value(&status).unwrap(),
            json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "configmaps \"settings\" not found", "reason": "NotFound",
                "details": {"name": "settings", "kind": "configmaps"}, "code": 404
            })
        );
        let leases = Status::not_found(&GroupResource::new("coordination.k8s.io", "leases"), "x");
        assert_eq!(leases.message, "leases.coordination.k8s.io \"x\" not found");
        assert_eq!(leases.details.unwrap().group, "coordination.k8s.io");
    }

    #[test]
    fn invalid_lists_one_cause_per_field_error() {
        let mut errors = crate::validation::field::ErrorList::new();
        errors.push(Error::required(
            &Path::new("metadata").child("name"),
            "name or generateName is required",
        ));
        errors.push(Error::invalid(
            &Path::new("data").key("a b"),
            "a b",
            "bad key",
        ));
        let status = Status::invalid(&GroupKind::new("", "ConfigMap"), "", &errors);
        assert_eq!(status.code, 422);
        assert_eq!(status.reason, "Invalid");
        assert_eq!(
            status.message,
            "ConfigMap \"\" is invalid: [metadata.name: Required value: name or generateName is required, data[a b]: Invalid value: \"a b\": bad key]"
        );
        let details = status.details.unwrap();
        assert_eq!(details.kind, "ConfigMap");
        assert_eq!(
            details.causes,
            vec![
                StatusCause {
                    reason: "FieldValueRequired".into(),
                    message: "Required value: name or generateName is required".into(),
                    field: "metadata.name".into()
                },
                StatusCause {
                    reason: "FieldValueInvalid".into(),
                    message: "Invalid value: \"a b\": bad key".into(),
                    field: "data[a b]".into()
                },
            ]
        );
    }

    #[test]
    fn reasons_and_codes_pair_as_upstream() {
        let cases = [
            (
                Status::already_exists(&configmaps(), "a"),
                "AlreadyExists",
                409,
                "configmaps \"a\" already exists",
            ),
            (
                Status::modified(&configmaps(), "a"),
                "Conflict",
                409,
                "Operation cannot be fulfilled on configmaps \"a\": the object has been modified; please apply your changes to the latest version and try again",
            ),
            (
                Status::too_old_resource_version(5, 10),
                "Expired",
                410,
                "too old resource version: 5 (10)",
            ),
            (
                Status::method_not_supported(&configmaps(), "deletecollection"),
                "MethodNotAllowed",
                405,
                "deletecollection is not supported on resources of kind \"configmaps\"",
            ),
            (
                Status::request_entity_too_large(3 << 20),
                "RequestEntityTooLarge",
                413,
                "Request entity too large: limit is 3145728",
            ),
            (
                Status::too_large_resource_version(9, 7),
                "Timeout",
                504,
                "Too large resource version: 9, current: 7",
            ),
            (
                Status::forbidden(&configmaps(), "", "denied"),
                "Forbidden",
                403,
                "configmaps is forbidden: denied",
            ),
            (
                Status::internal_error("boom"),
                "InternalError",
                500,
                "Internal error occurred: boom",
            ),
        ];
        for (status, reason, code, message) in cases {
            assert_eq!(
                (status.reason.as_str(), status.code, status.message.as_str()),
                (reason, code, message)
            );
        }
        assert_eq!(
            Status::too_many_requests("slow down", 1)
                .details
                .unwrap()
                .retry_after_seconds,
            Some(1)
        );
        assert!(Status::not_found(&configmaps(), "a").is(StatusReason::NotFound));
    }

    #[test]
    fn success_has_no_reason_or_message() {
        let value = serde_json::to_value(Status::success(None)).unwrap();
        assert_eq!(
            value,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 200})
        );
        let back: Status = serde_json::from_value(value).unwrap();
        assert_eq!(back, Status::success(None));
    }

    /// An error with a message and, maybe, a source.
    #[derive(Debug, thiserror::Error)]
    #[error("{message}")]
    struct Layer {
        message: &'static str,
        #[source]
        source: Option<Box<Layer>>,
    }

    #[test]
    fn a_chain_reads_each_source_after_the_error() {
        let layer = |message, source: Option<Layer>| Layer {
            message,
            source: source.map(Box::new),
        };
        let refused = layer(
            "the API server refused",
            Some(layer("already exists", None)),
        );
        let error = layer("creating Service lb", Some(refused));
        assert_eq!(
            chain(&error),
            "creating Service lb: the API server refused: already exists"
        );
        assert_eq!(chain(&layer("alone", None)), "alone");
    }
}
