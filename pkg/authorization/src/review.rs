//! The pure parts of the review APIs (`authorization.k8s.io/v1`): the request attributes a
//! SubjectAccessReview, LocalSubjectAccessReview or SelfSubjectAccessReview spec asks about,
//! the user a SubjectAccessReview names, and the status of access and rules reviews, as
//! upstream's review registries build them. Validation of the specs is the registry's.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::policy::nullable;
use crate::{Attributes, Decision, RulesInfo, UserInfo};

/// Errors reading a review spec.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// The spec is not a well-formed review spec.
    #[error("invalid review spec: {0}")]
    Decode(#[from] serde_json::Error),
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ResourceAttributes {
    #[serde(deserialize_with = "nullable")]
    namespace: String,
    #[serde(deserialize_with = "nullable")]
    verb: String,
    #[serde(deserialize_with = "nullable")]
    group: String,
    #[serde(deserialize_with = "nullable")]
    version: String,
    #[serde(deserialize_with = "nullable")]
    resource: String,
    #[serde(deserialize_with = "nullable")]
    subresource: String,
    #[serde(deserialize_with = "nullable")]
    name: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct NonResourceAttributes {
    #[serde(deserialize_with = "nullable")]
    path: String,
    #[serde(deserialize_with = "nullable")]
    verb: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Spec {
    resource_attributes: Option<ResourceAttributes>,
    non_resource_attributes: Option<NonResourceAttributes>,
    #[serde(deserialize_with = "nullable")]
    user: String,
    #[serde(deserialize_with = "nullable")]
    groups: Vec<String>,
    #[serde(deserialize_with = "nullable")]
    extra: BTreeMap<String, Vec<String>>,
    #[serde(deserialize_with = "nullable")]
    uid: String,
}

/// The attributes an access review `spec` asks about for `user` (upstream's
/// `ResourceAttributesFrom` / `NonResourceAttributesFrom`): `resourceAttributes` when present
/// (an empty `version` means every version, `*`), else `nonResourceAttributes`.
pub fn access_review_attributes(spec: &Value, user: UserInfo) -> Result<Attributes, ReviewError> {
    let spec = Spec::deserialize(spec)?;
    if let Some(r) = spec.resource_attributes {
        return Ok(Attributes {
            user,
            verb: r.verb,
            namespace: r.namespace,
            api_group: r.group,
            api_version: if r.version.is_empty() {
                "*".to_owned()
            } else {
                r.version
            },
            resource: r.resource,
            subresource: r.subresource,
            name: r.name,
            path: String::new(),
            resource_request: true,
        });
    }
    let n = spec.non_resource_attributes.unwrap_or_default();
    Ok(Attributes::non_resource(user, &n.verb, &n.path))
}

/// The user a SubjectAccessReview `spec` names: its `user`, `uid`, `groups` and `extra`, as
/// given (no group is added).
pub fn access_review_user(spec: &Value) -> Result<UserInfo, ReviewError> {
    let spec = Spec::deserialize(spec)?;
    Ok(UserInfo {
        username: spec.user,
        uid: spec.uid,
        groups: spec.groups,
        extra: spec.extra,
    })
}

/// The `status` of an access review for a decision: `allowed`, `denied` (only an explicit
/// [`Decision::Deny`]) and `reason` (omitted when empty).
pub fn access_review_status(decision: Decision, reason: &str) -> Value {
    let mut status = json!({"allowed": decision == Decision::Allow});
    if decision == Decision::Deny {
        status["denied"] = json!(true);
    }
    if !reason.is_empty() {
        status["reason"] = json!(reason);
    }
    status
}

/// The `status` of a SelfSubjectRulesReview: `resourceRules`, `nonResourceRules`, `incomplete`
/// and `evaluationError` (omitted when there was none).
pub fn rules_review_status(info: &RulesInfo) -> Value {
    let mut status = json!({
        "resourceRules": info.resource_rules,
        "nonResourceRules": info.non_resource_rules,
        "incomplete": info.incomplete,
    });
    let error = info.evaluation_error();
    if !error.is_empty() {
        status["evaluationError"] = json!(error);
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{NonResourceRule, ResourceRule};

    #[test]
    fn resource_and_non_resource_specs() {
        let alice = UserInfo::authenticated("alice", vec![]);
        let spec = json!({"resourceAttributes": {"namespace": "a", "verb": "create",
            "group": "", "resource": "serviceaccounts", "subresource": "token", "name": "x"}});
        let attrs = access_review_attributes(&spec, alice.clone()).unwrap();
        assert_eq!(
            attrs,
            Attributes {
                api_version: "*".into(),
                ..Attributes::resource(
                    alice.clone(),
                    "create",
                    "",
                    "serviceaccounts/token",
                    "a",
                    "x"
                )
            }
        );
        let spec = json!({"resourceAttributes": {"verb": "list", "group": "apps", "version": "v1",
            "resource": "deployments"}});
        let attrs = access_review_attributes(&spec, alice.clone()).unwrap();
        assert_eq!(
            (attrs.api_version.as_str(), attrs.namespace.as_str()),
            ("v1", "")
        );
        let spec = json!({"nonResourceAttributes": {"path": "/metrics", "verb": "get"}});
        let attrs = access_review_attributes(&spec, alice.clone()).unwrap();
        assert!(!attrs.resource_request);
        assert_eq!(
            (attrs.verb.as_str(), attrs.path.as_str()),
            ("get", "/metrics")
        );
        assert!(access_review_attributes(&json!({"resourceAttributes": 1}), alice).is_err());
    }

    #[test]
    fn the_subject_of_a_subject_access_review_is_taken_as_given() {
        let spec = json!({"user": "bob", "groups": ["dev"], "uid": "42",
            "extra": {"scopes": ["a"]}, "resourceAttributes": {"verb": "get"}});
        let user = access_review_user(&spec).unwrap();
        assert_eq!(user.username, "bob");
        assert_eq!(user.groups, ["dev"]);
        assert_eq!(user.uid, "42");
        assert_eq!(user.extra["scopes"], ["a"]);
    }

    #[test]
    fn statuses_as_upstream() {
        assert_eq!(
            access_review_status(Decision::Allow, "RBAC: allowed by x"),
            json!({"allowed": true, "reason": "RBAC: allowed by x"})
        );
        assert_eq!(
            access_review_status(Decision::NoOpinion, ""),
            json!({"allowed": false})
        );
        assert_eq!(
            access_review_status(Decision::Deny, "no"),
            json!({"allowed": false, "denied": true, "reason": "no"})
        );
        let info = RulesInfo {
            resource_rules: vec![ResourceRule {
                verbs: vec!["get".into()],
                api_groups: vec!["".into()],
                resources: vec!["configmaps".into()],
                resource_names: vec![],
            }],
            non_resource_rules: vec![NonResourceRule {
                verbs: vec!["get".into()],
                non_resource_urls: vec!["/api".into()],
            }],
            incomplete: false,
            evaluation_errors: vec!["e1".into(), "e2".into()],
        };
        assert_eq!(
            rules_review_status(&info),
            json!({
                "resourceRules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]}],
                "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/api"]}],
                "incomplete": false,
                "evaluationError": "[e1, e2]"
            })
        );
        assert_eq!(
            rules_review_status(&RulesInfo::default()),
            json!({"resourceRules": [], "nonResourceRules": [], "incomplete": false})
        );
    }
}
