//! The built-in answers of the kinds that are created, never stored ([`crate::answer`]):
//! SelfSubjectReview (`kubectl auth whoami`) and TokenReview in authentication.k8s.io;
//! SubjectAccessReview, LocalSubjectAccessReview and SelfSubjectAccessReview (`kubectl auth
//! can-i`) and SelfSubjectRulesReview (`kubectl auth can-i --list`) in authorization.k8s.io;
//! TokenRequest (`serviceaccounts/<name>/token`, `kubectl create token`). A review's answer is
//! the request with its `status` filled in; a TokenRequest's carries the signed token. Both
//! are 201 Created, as upstream answers them.

use std::sync::Arc;

use genplane_admission::BoxFuture;
use genplane_api::catalog::ResourceInfo;
use genplane_apimachinery::errors::{ApiError, Status, StatusReason};
use genplane_authentication::UserInfo;
use genplane_authorization::Attributes;
use genplane_registry::Written;
use serde_json::{Value, json};

use crate::answer::{Answer, Creating, Unanswered};
use crate::security::Security;

/// The built-in answer of the catalog kind `info` (a review, TokenRequest); a kind without
/// one refuses every create.
pub(crate) fn builtin(info: &'static ResourceInfo) -> Arc<dyn Answer> {
    answer_of(info).unwrap_or_else(|| {
        Arc::new(Unanswered {
            resource: info.group_resource(),
        })
    })
}

/// The answer of the catalog kind `info`, when it is one of the kinds above.
fn answer_of(info: &'static ResourceInfo) -> Option<Arc<dyn Answer>> {
    match (info.group, info.kind) {
        ("authentication.k8s.io", "TokenRequest") => Some(Arc::new(TokenRequests)),
        ("authentication.k8s.io", "SelfSubjectReview" | "TokenReview")
        | (
            "authorization.k8s.io",
            "SubjectAccessReview"
            | "LocalSubjectAccessReview"
            | "SelfSubjectAccessReview"
            | "SelfSubjectRulesReview",
        ) => Some(Arc::new(Review { info })),
        _ => None,
    }
}

/// Answers a review of one kind: the authenticator's or the authorizer's decision.
#[derive(Debug)]
struct Review {
    info: &'static ResourceInfo,
}

impl Answer for Review {
    fn answer<'a>(
        &'a self,
        creating: &'a Creating<'a>,
        object: Value,
    ) -> BoxFuture<'a, Result<Written, ApiError>> {
        Box::pin(async move {
            let Some(security) = creating.security else {
                return Err(Status::failure(
                    StatusReason::MethodNotAllowed,
                    "this server authorizes no requests: reviews are not available",
                )
                .into());
            };
            Ok(Written {
                object: answer(self.info, security, creating.user, object).await?,
                created: true,
                warnings: Vec::new(),
                stored: None,
            })
        })
    }
}

/// Answers a TokenRequest for the ServiceAccount the URL names: a signed JWT.
#[derive(Debug)]
struct TokenRequests;

fn not_found() -> ApiError {
    Status::failure(
        StatusReason::NotFound,
        "the server could not find the requested resource",
    )
    .into()
}

impl Answer for TokenRequests {
    fn answer<'a>(
        &'a self,
        creating: &'a Creating<'a>,
        object: Value,
    ) -> BoxFuture<'a, Result<Written, ApiError>> {
        Box::pin(async move {
            let issuer = creating
                .security
                .and_then(|s| s.token_requests.clone())
                .ok_or_else(not_found)?;
            let (namespace, name) = (creating.namespace, creating.name);
            // The account (and a bound Secret) are read from the store, not the watch caches,
            // so that an account created just before is found; a missing one is the store's
            // 404.
            let mut read = crate::security::ReadObjects::default();
            if let Some(account) = creating
                .objects
                .get("", "serviceaccounts", namespace, name)
                .await
            {
                read.service_account = Some(account?);
            }
            let secret = object
                .pointer("/spec/boundObjectRef")
                .filter(|r| r.get("kind").and_then(Value::as_str) == Some("Secret"))
                .and_then(|r| r.get("name").and_then(Value::as_str));
            if let Some(secret) = secret {
                // A missing Secret is the issuer's to report, in upstream's words.
                read.secret = creating
                    .objects
                    .get("", "secrets", namespace, secret)
                    .await
                    .and_then(Result::ok);
            }
            let (object, warnings) =
                issuer.create(namespace, name, &object, creating.now, &read)?;
            Ok(Written {
                object,
                created: true,
                warnings,
                stored: None,
            })
        })
    }
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

/// The `status` of an access review: the authorizer's decision on `attributes` (asked of
/// the server it delegates to, when it does).
async fn access_status(security: &Security, attributes: &Attributes) -> Value {
    let (decision, reason) =
        genplane_authorization::decide(security.authorizer.as_ref(), attributes).await;
    genplane_authorization::review::access_review_status(decision, &reason)
}

/// The JSON of a user, as the review APIs write it.
pub(crate) fn user_json(user: &UserInfo) -> Value {
    serde_json::to_value(user).unwrap_or(Value::Null)
}

/// Answers the review `object` of kind `info` made by `user` (admitted and validated: a
/// LocalSubjectAccessReview is in the request's namespace).
async fn answer(
    info: &'static ResourceInfo,
    security: &Security,
    user: &UserInfo,
    mut object: Value,
) -> Result<Value, ApiError> {
    let spec = object.get("spec").cloned().unwrap_or(Value::Null);
    let status = match info.kind {
        "SelfSubjectReview" => json!({"userInfo": user_json(user)}),
        "TokenReview" => {
            let token = spec.get("token").and_then(Value::as_str).unwrap_or("");
            let audiences = string_list(spec.get("audiences"));
            let asked = (!audiences.is_empty()).then_some(audiences.as_slice());
            let found = security
                .authentication
                .authenticate_token_delegated(token, asked)
                .await;
            match found {
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
            access_status(security, &review_attributes(&spec, user.clone())?).await
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
            access_status(security, &review_attributes(&spec, asker)?).await
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
    use genplane_authentication::request::Authentication;

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
        genplane_api::catalog::all()
            .iter()
            .find(|r| r.kind == name && !r.stored())
            .unwrap()
    }

    fn security() -> Security {
        Security::new(Authentication::default(), Arc::new(OnlyConfigMaps))
    }

    #[tokio::test]
    async fn access_reviews_ask_the_authorizer() {
        let alice = UserInfo::authenticated("alice", vec![]);
        let ssar =
            json!({"spec": {"resourceAttributes": {"verb": "list", "resource": "configmaps"}}});
        let answered = answer(kind("SelfSubjectAccessReview"), &security(), &alice, ssar)
            .await
            .unwrap();
        assert_eq!(
            answered["status"],
            json!({"allowed": true, "reason": "bound"})
        );
        let sar = json!({"spec": {"user": "bob", "resourceAttributes": {"verb": "list", "resource": "configmaps"}}});
        let answered = answer(kind("SubjectAccessReview"), &security(), &alice, sar)
            .await
            .unwrap();
        assert_eq!(answered["status"], json!({"allowed": false}));
        let lsar = json!({"metadata": {"namespace": "ns"}, "spec": {"user": "alice", "resourceAttributes": {"namespace": "ns", "verb": "list", "resource": "configmaps"}}});
        let answered = answer(kind("LocalSubjectAccessReview"), &security(), &alice, lsar)
            .await
            .unwrap();
        assert_eq!(
            answered["status"],
            json!({"allowed": true, "reason": "bound"})
        );
    }

    #[tokio::test]
    async fn self_subject_reviews_tell_who_asks() {
        let alice = UserInfo::authenticated("alice", vec!["devs".into()]);
        let answered = answer(kind("SelfSubjectReview"), &security(), &alice, json!({}))
            .await
            .unwrap();
        assert_eq!(
            answered["status"],
            json!({"userInfo": {"username": "alice", "groups": ["devs", "system:authenticated"]}})
        );
    }
}
