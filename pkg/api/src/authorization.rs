//! The access review kinds of `authorization.k8s.io/v1`: SubjectAccessReview,
//! LocalSubjectAccessReview (namespaced), SelfSubjectAccessReview and SelfSubjectRulesReview.
//! They are only created, never stored: the server answers each with its `status` filled in.
//!
//! Upstream rules (`pkg/apis/authorization/validation`, Kubernetes 1.33): exactly one of
//! `spec.resourceAttributes` and `spec.nonResourceAttributes`; a SubjectAccessReview names a
//! user or at least one group; the metadata of a review must be empty (its `managedFields`
//! aside); a LocalSubjectAccessReview's `spec.resourceAttributes.namespace` is its own
//! namespace and it takes no non-resource attributes.

use genplane_apimachinery::codec::decode::{self, Decoded};
use genplane_apimachinery::codec::schema::{Field, Struct, Type};
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::meta::schemas::{LABEL_SELECTOR_REQUIREMENT, OBJECT_META};
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use serde_json::Value;

use crate::resource::{Hooks, ResourceInfo, answered};

/// The API version.
pub const API_VERSION: &str = "authorization.k8s.io/v1";

static EXTRA_VALUE: Type = Type::Items(&Type::String);

static FIELD_SELECTOR_REQUIREMENT: Struct = Struct {
    name: "FieldSelectorRequirement",
    fields: &[
        Field::new("key", 1, Type::String),
        Field::new("operator", 2, Type::String),
        Field::new("values", 3, Type::List(&Type::String)),
    ],
};

static FIELD_SELECTOR_ATTRIBUTES: Struct = Struct {
    name: "FieldSelectorAttributes",
    fields: &[
        Field::new("rawSelector", 1, Type::String),
        Field::new(
            "requirements",
            2,
            Type::List(&Type::Struct(&FIELD_SELECTOR_REQUIREMENT)),
        ),
    ],
};

static LABEL_SELECTOR_ATTRIBUTES: Struct = Struct {
    name: "LabelSelectorAttributes",
    fields: &[
        Field::new("rawSelector", 1, Type::String),
        Field::new(
            "requirements",
            2,
            Type::List(&Type::Struct(&LABEL_SELECTOR_REQUIREMENT)),
        ),
    ],
};

static RESOURCE_ATTRIBUTES: Struct = Struct {
    name: "ResourceAttributes",
    fields: &[
        Field::new("namespace", 1, Type::String),
        Field::new("verb", 2, Type::String),
        Field::new("group", 3, Type::String),
        Field::new("version", 4, Type::String),
        Field::new("resource", 5, Type::String),
        Field::new("subresource", 6, Type::String),
        Field::new("name", 7, Type::String),
        Field::new("fieldSelector", 8, Type::Struct(&FIELD_SELECTOR_ATTRIBUTES)),
        Field::new("labelSelector", 9, Type::Struct(&LABEL_SELECTOR_ATTRIBUTES)),
    ],
};

static NON_RESOURCE_ATTRIBUTES: Struct = Struct {
    name: "NonResourceAttributes",
    fields: &[
        Field::new("path", 1, Type::String),
        Field::new("verb", 2, Type::String),
    ],
};

static SUBJECT_ACCESS_REVIEW_SPEC: Struct = Struct {
    name: "SubjectAccessReviewSpec",
    fields: &[
        Field::new("resourceAttributes", 1, Type::Struct(&RESOURCE_ATTRIBUTES)),
        Field::new(
            "nonResourceAttributes",
            2,
            Type::Struct(&NON_RESOURCE_ATTRIBUTES),
        ),
        Field::new("user", 3, Type::String),
        Field::new("groups", 4, Type::List(&Type::String)),
        Field::new("extra", 5, Type::Map(&EXTRA_VALUE)),
        Field::new("uid", 6, Type::String),
    ],
};

static SELF_SUBJECT_ACCESS_REVIEW_SPEC: Struct = Struct {
    name: "SelfSubjectAccessReviewSpec",
    fields: &[
        Field::new("resourceAttributes", 1, Type::Struct(&RESOURCE_ATTRIBUTES)),
        Field::new(
            "nonResourceAttributes",
            2,
            Type::Struct(&NON_RESOURCE_ATTRIBUTES),
        ),
    ],
};

static SUBJECT_ACCESS_REVIEW_STATUS: Struct = Struct {
    name: "SubjectAccessReviewStatus",
    fields: &[
        Field::new("allowed", 1, Type::Bool),
        Field::new("denied", 4, Type::Bool),
        Field::new("reason", 2, Type::String),
        Field::new("evaluationError", 3, Type::String),
    ],
};

static RESOURCE_RULE: Struct = Struct {
    name: "ResourceRule",
    fields: &[
        Field::new("verbs", 1, Type::List(&Type::String)).keep_empty(),
        Field::new("apiGroups", 2, Type::List(&Type::String)),
        Field::new("resources", 3, Type::List(&Type::String)),
        Field::new("resourceNames", 4, Type::List(&Type::String)),
    ],
};

static NON_RESOURCE_RULE: Struct = Struct {
    name: "NonResourceRule",
    fields: &[
        Field::new("verbs", 1, Type::List(&Type::String)).keep_empty(),
        Field::new("nonResourceURLs", 2, Type::List(&Type::String)),
    ],
};

static SUBJECT_RULES_REVIEW_STATUS: Struct = Struct {
    name: "SubjectRulesReviewStatus",
    fields: &[
        Field::new(
            "resourceRules",
            1,
            Type::List(&Type::Struct(&RESOURCE_RULE)),
        ),
        Field::new(
            "nonResourceRules",
            2,
            Type::List(&Type::Struct(&NON_RESOURCE_RULE)),
        ),
        Field::new("incomplete", 3, Type::Bool),
        Field::new("evaluationError", 4, Type::String),
    ],
};

static SELF_SUBJECT_RULES_REVIEW_SPEC: Struct = Struct {
    name: "SelfSubjectRulesReviewSpec",
    fields: &[Field::new("namespace", 1, Type::String)],
};

/// The shape of a SubjectAccessReview.
pub static SUBJECT_ACCESS_REVIEW: Struct = Struct {
    name: "SubjectAccessReview",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("spec", 2, Type::Struct(&SUBJECT_ACCESS_REVIEW_SPEC)),
        Field::new("status", 3, Type::Struct(&SUBJECT_ACCESS_REVIEW_STATUS)),
    ],
};

/// The shape of a LocalSubjectAccessReview.
pub static LOCAL_SUBJECT_ACCESS_REVIEW: Struct = Struct {
    name: "LocalSubjectAccessReview",
    fields: SUBJECT_ACCESS_REVIEW.fields,
};

/// The shape of a SelfSubjectAccessReview.
pub static SELF_SUBJECT_ACCESS_REVIEW: Struct = Struct {
    name: "SelfSubjectAccessReview",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("spec", 2, Type::Struct(&SELF_SUBJECT_ACCESS_REVIEW_SPEC)),
        Field::new("status", 3, Type::Struct(&SUBJECT_ACCESS_REVIEW_STATUS)),
    ],
};

/// The shape of a SelfSubjectRulesReview.
pub static SELF_SUBJECT_RULES_REVIEW: Struct = Struct {
    name: "SelfSubjectRulesReview",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("spec", 2, Type::Struct(&SELF_SUBJECT_RULES_REVIEW_SPEC)),
        Field::new("status", 3, Type::Struct(&SUBJECT_RULES_REVIEW_STATUS)),
    ],
};

/// Type-checks a SubjectAccessReview.
pub fn decode_subject_access_review(object: &Value) -> Result<Decoded, ApiError> {
    decode_as(object, &SUBJECT_ACCESS_REVIEW)
}

/// Type-checks a LocalSubjectAccessReview.
pub fn decode_local_subject_access_review(object: &Value) -> Result<Decoded, ApiError> {
    decode_as(object, &LOCAL_SUBJECT_ACCESS_REVIEW)
}

/// Type-checks a SelfSubjectAccessReview.
pub fn decode_self_subject_access_review(object: &Value) -> Result<Decoded, ApiError> {
    decode_as(object, &SELF_SUBJECT_ACCESS_REVIEW)
}

/// Type-checks a SelfSubjectRulesReview.
pub fn decode_self_subject_rules_review(object: &Value) -> Result<Decoded, ApiError> {
    decode_as(object, &SELF_SUBJECT_RULES_REVIEW)
}

fn decode_as(object: &Value, schema: &'static Struct) -> Result<Decoded, ApiError> {
    decode::decode(object, schema).map_err(|e| e.to_api_error(schema.name, API_VERSION))
}

/// A review's metadata must be empty, its managedFields aside (upstream compares it with an
/// empty ObjectMeta after dropping them).
fn validate_empty_metadata(object: &Value) -> ErrorList {
    let mut errors = ErrorList::new();
    if let Some(Value::Object(meta)) = object.get("metadata") {
        let mut rest = meta.clone();
        rest.remove("managedFields");
        if !rest.is_empty() {
            errors.push(Error::invalid(
                &Path::new("metadata"),
                Value::Object(meta.clone()),
                "must be empty",
            ));
        }
    }
    errors
}

fn attributes_present(spec: &Value) -> (bool, bool) {
    let present = |key: &str| spec.get(key).is_some_and(|v| !v.is_null());
    (
        present("resourceAttributes"),
        present("nonResourceAttributes"),
    )
}

/// Exactly one of resource and non-resource attributes.
fn validate_attributes(spec: &Value, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    let (resource, non_resource) = attributes_present(spec);
    if resource && non_resource {
        errors.push(Error::invalid(
            &path.child("nonResourceAttributes"),
            spec["nonResourceAttributes"].clone(),
            "cannot be specified in combination with resourceAttributes",
        ));
    }
    if !resource && !non_resource {
        errors.push(Error::invalid(
            &path.child("resourceAttributes"),
            Value::Null,
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        ));
    }
    errors
}

/// Validates a SubjectAccessReview.
pub fn validate_subject_access_review(object: &Value) -> Result<ErrorList, ApiError> {
    let spec = object.get("spec").cloned().unwrap_or(Value::Null);
    let path = Path::new("spec");
    let mut errors = validate_attributes(&spec, &path);
    let user = spec.get("user").and_then(Value::as_str).unwrap_or("");
    let groups = spec
        .get("groups")
        .and_then(Value::as_array)
        .is_some_and(|g| !g.is_empty());
    if user.is_empty() && !groups {
        errors.push(Error::invalid(
            &path.child("user"),
            user,
            "at least one of user or group must be specified",
        ));
    }
    errors.extend(validate_empty_metadata(object));
    Ok(errors)
}

/// Validates a LocalSubjectAccessReview in its namespace (`metadata.namespace`: the request's).
pub fn validate_local_subject_access_review(object: &Value) -> Result<ErrorList, ApiError> {
    let namespace = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut without_namespace = object.clone();
    if let Some(Value::Object(meta)) = without_namespace.get_mut("metadata") {
        meta.remove("namespace");
    }
    let mut errors = validate_subject_access_review(&without_namespace)?;
    let spec = object.get("spec").cloned().unwrap_or(Value::Null);
    if attributes_present(&spec).1 {
        errors.push(Error::invalid(
            &Path::new("spec").child("nonResourceAttributes"),
            spec["nonResourceAttributes"].clone(),
            "disallowed on this kind of request",
        ));
    }
    let attributes_namespace = spec
        .pointer("/resourceAttributes/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    if attributes_present(&spec).0 && attributes_namespace != namespace {
        errors.push(Error::invalid(
            &Path::new("spec")
                .child("resourceAttributes")
                .child("namespace"),
            attributes_namespace,
            "must match metadata.namespace",
        ));
    }
    Ok(errors)
}

/// Validates a SelfSubjectAccessReview.
pub fn validate_self_subject_access_review(object: &Value) -> Result<ErrorList, ApiError> {
    let spec = object.get("spec").cloned().unwrap_or(Value::Null);
    let mut errors = validate_attributes(&spec, &Path::new("spec"));
    errors.extend(validate_empty_metadata(object));
    Ok(errors)
}

/// Validates a SelfSubjectRulesReview (any namespace may be asked about; upstream checks
/// nothing else).
pub fn validate_self_subject_rules_review(object: &Value) -> Result<ErrorList, ApiError> {
    Ok(validate_empty_metadata(object))
}

/// SubjectAccessReview in the catalog: created, answered, never stored.
pub const SUBJECT_ACCESS_REVIEW_INFO: ResourceInfo = answered(
    "authorization.k8s.io",
    "SubjectAccessReview",
    "SubjectAccessReviewList",
    "subjectaccessreviews",
    "subjectaccessreview",
    &SUBJECT_ACCESS_REVIEW,
    crate::schema::schema_of::<k8s_openapi::api::authorization::v1::SubjectAccessReview>,
    Hooks::create_only(decode_subject_access_review, validate_subject_access_review),
);

/// LocalSubjectAccessReview in the catalog (namespaced: the URL's namespace is the review's):
/// created, answered, never stored.
pub const LOCAL_SUBJECT_ACCESS_REVIEW_INFO: ResourceInfo = ResourceInfo {
    namespaced: true,
    ..answered(
        "authorization.k8s.io",
        "LocalSubjectAccessReview",
        "LocalSubjectAccessReviewList",
        "localsubjectaccessreviews",
        "localsubjectaccessreview",
        &LOCAL_SUBJECT_ACCESS_REVIEW,
        crate::schema::schema_of::<k8s_openapi::api::authorization::v1::LocalSubjectAccessReview>,
        Hooks::create_only(
            decode_local_subject_access_review,
            validate_local_subject_access_review,
        ),
    )
};

/// SelfSubjectAccessReview (`kubectl auth can-i`) in the catalog: created, answered, never
/// stored.
pub const SELF_SUBJECT_ACCESS_REVIEW_INFO: ResourceInfo = answered(
    "authorization.k8s.io",
    "SelfSubjectAccessReview",
    "SelfSubjectAccessReviewList",
    "selfsubjectaccessreviews",
    "selfsubjectaccessreview",
    &SELF_SUBJECT_ACCESS_REVIEW,
    crate::schema::schema_of::<k8s_openapi::api::authorization::v1::SelfSubjectAccessReview>,
    Hooks::create_only(
        decode_self_subject_access_review,
        validate_self_subject_access_review,
    ),
);

/// SelfSubjectRulesReview (`kubectl auth can-i --list`) in the catalog: created, answered,
/// never stored.
pub const SELF_SUBJECT_RULES_REVIEW_INFO: ResourceInfo = answered(
    "authorization.k8s.io",
    "SelfSubjectRulesReview",
    "SelfSubjectRulesReviewList",
    "selfsubjectrulesreviews",
    "selfsubjectrulesreview",
    &SELF_SUBJECT_RULES_REVIEW,
    crate::schema::schema_of::<k8s_openapi::api::authorization::v1::SelfSubjectRulesReview>,
    Hooks::create_only(
        decode_self_subject_rules_review,
        validate_self_subject_rules_review,
    ),
);

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn messages(errors: &ErrorList) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn subject_access_reviews_need_one_kind_of_attributes_and_a_subject() {
        let errors = validate_subject_access_review(&json!({"spec": {}})).unwrap();
        assert_eq!(
            messages(&errors),
            [
                "spec.resourceAttributes: Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified",
                "spec.user: Invalid value: \"\": at least one of user or group must be specified",
            ]
        );
        let both =
            json!({"spec": {"user": "me", "resourceAttributes": {}, "nonResourceAttributes": {}}});
        assert_eq!(
            messages(&validate_subject_access_review(&both).unwrap()),
            [
                "spec.nonResourceAttributes: Invalid value: {}: cannot be specified in combination with resourceAttributes"
            ]
        );
        let ok = json!({"spec": {"groups": ["g"], "resourceAttributes": {"verb": "get"}}});
        assert!(validate_subject_access_review(&ok).unwrap().is_empty());
        let named =
            json!({"metadata": {"name": "x"}, "spec": {"user": "u", "resourceAttributes": {}}});
        assert_eq!(
            messages(&validate_subject_access_review(&named).unwrap()),
            ["metadata: Invalid value: {\"name\":\"x\"}: must be empty"]
        );
    }

    #[test]
    fn local_reviews_stay_in_their_namespace() {
        let review = json!({"metadata": {"namespace": "a"}, "spec": {"user": "u", "resourceAttributes": {"namespace": "b"}}});
        assert_eq!(
            messages(&validate_local_subject_access_review(&review).unwrap()),
            [
                "spec.resourceAttributes.namespace: Invalid value: \"b\": must match metadata.namespace"
            ]
        );
        let review = json!({"metadata": {"namespace": "a"}, "spec": {"user": "u", "nonResourceAttributes": {"path": "/x"}}});
        assert_eq!(
            messages(&validate_local_subject_access_review(&review).unwrap()),
            [
                "spec.nonResourceAttributes: Invalid value: {\"path\":\"/x\"}: disallowed on this kind of request"
            ]
        );
    }

    #[test]
    fn extra_values_are_plain_lists_in_json() {
        let review =
            json!({"spec": {"user": "u", "extra": {"k": ["a", "b"]}, "resourceAttributes": {}}});
        let decoded = decode_subject_access_review(&review).unwrap();
        assert_eq!(decoded.object["spec"]["extra"]["k"], json!(["a", "b"]));
        let bad = json!({"spec": {"extra": {"k": "a"}}});
        assert!(decode_subject_access_review(&bad).is_err());
    }
}
