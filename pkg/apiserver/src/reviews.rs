//! The review APIs: created, answered, never stored. SelfSubjectReview (`kubectl auth
//! whoami`) and TokenReview in authentication.k8s.io; SubjectAccessReview,
//! LocalSubjectAccessReview and SelfSubjectAccessReview (`kubectl auth can-i`) in
//! authorization.k8s.io, and SelfSubjectRulesReview (`kubectl auth can-i --list`). Each answer is the request with its `status` filled in, 201 Created,
//! as upstream.

use genplane_api::catalog::ResourceInfo;
use genplane_apimachinery::errors::{ApiError, Status};
use genplane_apimachinery::schema::GroupKind;
use genplane_apimachinery::validation::field::ErrorList;
use genplane_authentication::UserInfo;
use genplane_authorization::Attributes;
use hyper::header::{ACCEPT, CONTENT_TYPE};
use hyper::http::request::Parts;
use serde_json::{Value, json};

use crate::authz::{self, Security};
use crate::negotiation::{self, Capabilities, Negotiated};

/// The negotiated answer form of a review.
pub(crate) fn negotiate(parts: &Parts) -> Result<Negotiated, ApiError> {
    let accept = parts.headers.get(ACCEPT).and_then(|v| v.to_str().ok());
    negotiation::negotiate(
        accept,
        Capabilities {
            protobuf: true,
            ..Capabilities::default()
        },
    )
}

/// The review in `bytes` (any body format), decoded and validated.
pub(crate) fn read(
    info: &'static ResourceInfo,
    parts: &Parts,
    bytes: &[u8],
) -> Result<Value, ApiError> {
    let content_type = parts
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let query = crate::handlers::Query::parse(parts.uri.query());
    let (object, _) = crate::request_body::decode_object(
        &crate::kind::ServedKind::builtin(info),
        content_type,
        query.get("fieldValidation"),
        bytes,
    )?;
    let decoded = (info.hooks.decode)(&object)?;
    Ok(decoded.object)
}

fn invalid(info: &ResourceInfo, errors: &ErrorList) -> ApiError {
    Status::invalid(&GroupKind::new(info.group, info.kind), "", errors).into()
}

fn string_list(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The attributes an access review's spec asks about, for `user`.
fn review_attributes(spec: &Value, user: UserInfo) -> Result<Attributes, ApiError> {
    genplane_authorization::review::access_review_attributes(spec, user)
        .map_err(|e| Status::bad_request(e.to_string()).into())
}

/// The `status` of an access review: the authorizer's decision on `attributes`.
fn access_status(security: &Security, attributes: &Attributes) -> Value {
    let (decision, reason) = authz::decide(security.authorizer.as_ref(), attributes);
    genplane_authorization::review::access_review_status(decision, &reason)
}

/// The JSON of a user, as the review APIs write it.
pub(crate) fn user_json(user: &UserInfo) -> Value {
    serde_json::to_value(user).unwrap_or(Value::Null)
}

/// Answers the review `object` of kind `info` made by `user` in `namespace` (the URL's, for
/// a LocalSubjectAccessReview).
pub(crate) fn answer(
    info: &'static ResourceInfo,
    security: &Security,
    user: &UserInfo,
    namespace: &str,
    mut object: Value,
) -> Result<Value, ApiError> {
    use genplane_api::authorization as authz_api;
    let errors = match info.kind {
        "LocalSubjectAccessReview" => {
            if namespace.is_empty() {
                return Err(Status::bad_request("namespace is required on this type: ").into());
            }
            // The object's namespace is the URL's (filled in when missing), as upstream's
            // create handler has it.
            let given = object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("");
            if given.is_empty() {
                object["metadata"]["namespace"] = Value::from(namespace);
            } else if given != namespace {
                return Err(Status::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                )
                .into());
            }
            authz_api::validate_local_subject_access_review(&object, namespace)?
        }
        _ => (info.hooks.validate)(&object)?,
    };
    if !errors.is_empty() {
        return Err(invalid(info, &errors));
    }
    let spec = object.get("spec").cloned().unwrap_or(Value::Null);
    let status = match info.kind {
        "SelfSubjectReview" => json!({"userInfo": user_json(user)}),
        "TokenReview" => {
            let token = spec.get("token").and_then(Value::as_str).unwrap_or("");
            let audiences = string_list(spec.get("audiences"));
            let asked = (!audiences.is_empty()).then_some(audiences.as_slice());
            match security.authentication.authenticate_token(token, asked) {
                Ok((user, audiences)) => {
                    let mut status = json!({"authenticated": true, "user": user_json(&user)});
                    if !audiences.is_empty() {
                        status["audiences"] = json!(audiences);
                    }
                    status
                }
                Err(error) => json!({"user": {}, "error": error}),
            }
        }
        "SelfSubjectAccessReview" => {
            access_status(security, &review_attributes(&spec, user.clone())?)
        }
        "SelfSubjectRulesReview" => {
            let namespace = spec.get("namespace").and_then(Value::as_str).unwrap_or("");
            if namespace.is_empty() {
                return Err(Status::bad_request("no namespace on request").into());
            }
            let rules = security.authorizer.rules_for(user, namespace);
            genplane_authorization::review::rules_review_status(&rules)
        }
        "SubjectAccessReview" | "LocalSubjectAccessReview" => {
            let asker = genplane_authorization::review::access_review_user(&spec)
                .map_err(|e| ApiError::from(Status::bad_request(e.to_string())))?;
            access_status(security, &review_attributes(&spec, asker)?)
        }
        other => {
            return Err(Status::method_not_supported(
                &genplane_apimachinery::schema::GroupResource::new(info.group, info.resource),
                other,
            )
            .into());
        }
    };
    object["status"] = status;
    Ok(object)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use genplane_authorization::{Authorizer, Decision};

    use super::*;
    use crate::authn::Authentication;

    #[derive(Debug)]
    struct OnlyConfigMaps;

    impl Authorizer for OnlyConfigMaps {
        fn rules_for(&self, _: &UserInfo, _: &str) -> genplane_authorization::RulesInfo {
            genplane_authorization::RulesInfo::default()
        }

        fn authorize(&self, a: &Attributes) -> (Decision, String) {
            if a.resource == "configmaps" && a.user.username == "alice" {
                (Decision::Allow, "bound".into())
            } else {
                (Decision::NoOpinion, String::new())
            }
        }
    }

    fn kind(name: &str) -> &'static ResourceInfo {
        genplane_api::catalog::reviews()
            .iter()
            .find(|r| r.kind == name)
            .unwrap()
    }

    fn security() -> Security {
        Security::new(Authentication::default(), Arc::new(OnlyConfigMaps))
    }

    #[test]
    fn access_reviews_ask_the_authorizer() {
        let alice = UserInfo::authenticated("alice", vec![]);
        let ssar =
            json!({"spec": {"resourceAttributes": {"verb": "list", "resource": "configmaps"}}});
        let answered = answer(
            kind("SelfSubjectAccessReview"),
            &security(),
            &alice,
            "",
            ssar,
        )
        .unwrap();
        assert_eq!(
            answered["status"],
            json!({"allowed": true, "reason": "bound"})
        );
        let sar = json!({"spec": {"user": "bob", "resourceAttributes": {"verb": "list", "resource": "configmaps"}}});
        let answered = answer(kind("SubjectAccessReview"), &security(), &alice, "", sar).unwrap();
        assert_eq!(answered["status"], json!({"allowed": false}));
        let lsar = json!({"spec": {"user": "alice", "resourceAttributes": {"namespace": "other", "resource": "configmaps"}}});
        let error = answer(
            kind("LocalSubjectAccessReview"),
            &security(),
            &alice,
            "ns",
            lsar,
        )
        .unwrap_err();
        assert_eq!(error.code, 422);
    }

    #[test]
    fn self_subject_reviews_tell_who_asks() {
        let alice = UserInfo::authenticated("alice", vec!["devs".into()]);
        let answered = answer(
            kind("SelfSubjectReview"),
            &security(),
            &alice,
            "",
            json!({}),
        )
        .unwrap();
        assert_eq!(
            answered["status"],
            json!({"userInfo": {"username": "alice", "groups": ["devs", "system:authenticated"]}})
        );
    }
}
