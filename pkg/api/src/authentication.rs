//! The kinds of `authentication.k8s.io/v1`: TokenReview and SelfSubjectReview (created, never
//! stored: the server answers with `status` filled in), and TokenRequest, the body of the
//! `serviceaccounts/<name>/token` subresource.
//!
//! Upstream rules (Kubernetes 1.33): a TokenReview needs `spec.token` ("token is required for
//! TokenReview in authentication", 400); neither review takes a namespace.

use genplane_apimachinery::codec::decode::{self, Decoded};
use genplane_apimachinery::codec::schema::{Field, Struct, Type};
use genplane_apimachinery::errors::{ApiError, Status};
use genplane_apimachinery::meta::schemas::OBJECT_META;
use genplane_apimachinery::validation::field::ErrorList;
use serde_json::Value;

use crate::resource::{Hooks, ResourceInfo, answered, no_validation};

/// The API version.
pub const API_VERSION: &str = "authentication.k8s.io/v1";

static EXTRA_VALUE: Type = Type::Items(&Type::String);

/// The shape of an authentication.k8s.io/v1 UserInfo.
pub static USER_INFO: Struct = Struct {
    name: "UserInfo",
    fields: &[
        Field::new("username", 1, Type::String),
        Field::new("uid", 2, Type::String),
        Field::new("groups", 3, Type::List(&Type::String)),
        Field::new("extra", 4, Type::Map(&EXTRA_VALUE)),
    ],
};

static TOKEN_REVIEW_SPEC: Struct = Struct {
    name: "TokenReviewSpec",
    fields: &[
        Field::new("token", 1, Type::String),
        Field::new("audiences", 2, Type::List(&Type::String)),
    ],
};

static TOKEN_REVIEW_STATUS: Struct = Struct {
    name: "TokenReviewStatus",
    fields: &[
        Field::new("authenticated", 1, Type::Bool),
        Field::new("user", 2, Type::Struct(&USER_INFO)),
        Field::new("audiences", 4, Type::List(&Type::String)),
        Field::new("error", 3, Type::String),
    ],
};

/// The shape of a TokenReview.
pub static TOKEN_REVIEW: Struct = Struct {
    name: "TokenReview",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("spec", 2, Type::Struct(&TOKEN_REVIEW_SPEC)),
        Field::new("status", 3, Type::Struct(&TOKEN_REVIEW_STATUS)),
    ],
};

static SELF_SUBJECT_REVIEW_STATUS: Struct = Struct {
    name: "SelfSubjectReviewStatus",
    fields: &[Field::new("userInfo", 1, Type::Struct(&USER_INFO))],
};

/// The shape of a SelfSubjectReview.
pub static SELF_SUBJECT_REVIEW: Struct = Struct {
    name: "SelfSubjectReview",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("status", 2, Type::Struct(&SELF_SUBJECT_REVIEW_STATUS)),
    ],
};

static BOUND_OBJECT_REFERENCE: Struct = Struct {
    name: "BoundObjectReference",
    fields: &[
        Field::new("kind", 1, Type::String),
        Field::new("apiVersion", 2, Type::String),
        Field::new("name", 3, Type::String),
        Field::new("uid", 4, Type::String),
    ],
};

static TOKEN_REQUEST_SPEC: Struct = Struct {
    name: "TokenRequestSpec",
    fields: &[
        Field::new("audiences", 1, Type::List(&Type::String)).keep_empty(),
        Field::pointer("expirationSeconds", 4, Type::Int64),
        Field::new("boundObjectRef", 3, Type::Struct(&BOUND_OBJECT_REFERENCE)),
    ],
};

static TOKEN_REQUEST_STATUS: Struct = Struct {
    name: "TokenRequestStatus",
    fields: &[
        Field::new("token", 1, Type::String),
        Field::new("expirationTimestamp", 2, Type::Time),
    ],
};

/// The shape of a TokenRequest.
pub static TOKEN_REQUEST: Struct = Struct {
    name: "TokenRequest",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("spec", 2, Type::Struct(&TOKEN_REQUEST_SPEC)),
        Field::new("status", 3, Type::Struct(&TOKEN_REQUEST_STATUS)),
    ],
};

fn decode_as(object: &Value, schema: &'static Struct) -> Result<Decoded, ApiError> {
    decode::decode(object, schema).map_err(|e| e.to_api_error(schema.name, API_VERSION))
}

/// Type-checks a TokenReview.
pub fn decode_token_review(object: &Value) -> Result<Decoded, ApiError> {
    decode_as(object, &TOKEN_REVIEW)
}

/// Type-checks a SelfSubjectReview.
pub fn decode_self_subject_review(object: &Value) -> Result<Decoded, ApiError> {
    decode_as(object, &SELF_SUBJECT_REVIEW)
}

/// Type-checks a TokenRequest.
pub fn decode_token_request(object: &Value) -> Result<Decoded, ApiError> {
    decode_as(object, &TOKEN_REQUEST)
}

/// Validates a TokenReview: it must carry a token (400 otherwise, as upstream).
pub fn validate_token_review(object: &Value) -> Result<ErrorList, ApiError> {
    let token = object
        .pointer("/spec/token")
        .and_then(Value::as_str)
        .unwrap_or("");
    if token.is_empty() {
        return Err(
            Status::bad_request("token is required for TokenReview in authentication").into(),
        );
    }
    Ok(ErrorList::new())
}

/// Validates a SelfSubjectReview (nothing to check: the server fills in everything).
pub fn validate_self_subject_review(_: &Value) -> Result<ErrorList, ApiError> {
    Ok(ErrorList::new())
}

/// SelfSubjectReview (`kubectl auth whoami`) in the catalog: created, answered, never stored.
pub const SELF_SUBJECT_REVIEW_INFO: ResourceInfo = answered(
    "authentication.k8s.io",
    "SelfSubjectReview",
    "SelfSubjectReviewList",
    "selfsubjectreviews",
    "selfsubjectreview",
    &SELF_SUBJECT_REVIEW,
    crate::schema::schema_of::<k8s_openapi::api::authentication::v1::SelfSubjectReview>,
    Hooks::create_only(decode_self_subject_review, validate_self_subject_review),
);

/// TokenReview in the catalog: created, answered, never stored.
pub const TOKEN_REVIEW_INFO: ResourceInfo = answered(
    "authentication.k8s.io",
    "TokenReview",
    "TokenReviewList",
    "tokenreviews",
    "tokenreview",
    &TOKEN_REVIEW,
    crate::schema::schema_of::<k8s_openapi::api::authentication::v1::TokenReview>,
    Hooks::create_only(decode_token_review, validate_token_review),
);

/// TokenRequest, the body of `serviceaccounts/<name>/token` (the ServiceAccount entry's
/// `token` subresource names it): created, answered with a signed token, never stored. It is
/// not a resource of its own (not in the catalog's list); the namespace is the URL's.
pub const TOKEN_REQUEST_INFO: ResourceInfo = ResourceInfo {
    namespaced: true,
    ..answered(
        "authentication.k8s.io",
        "TokenRequest",
        "TokenRequestList",
        "tokenrequests",
        "tokenrequest",
        &TOKEN_REQUEST,
        crate::schema::schema_of::<k8s_openapi::api::authentication::v1::TokenRequest>,
        Hooks::create_only(decode_token_request, no_validation),
    )
};

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn token_reviews_need_a_token() {
        let error = validate_token_review(&json!({"spec": {}})).unwrap_err();
        assert_eq!(error.code, 400);
        assert!(
            validate_token_review(&json!({"spec": {"token": "t"}}))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn token_requests_decode() {
        let request = json!({"spec": {"audiences": ["a"], "expirationSeconds": 600}});
        let decoded = decode_token_request(&request).unwrap();
        assert_eq!(decoded.object["spec"]["expirationSeconds"], 600);
        assert!(decode_token_request(&json!({"spec": {"expirationSeconds": "x"}})).is_err());
    }
}
