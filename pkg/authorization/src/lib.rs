//! Authorization: may this user do this?
//!
//! The contract is upstream's `authorizer.Authorizer` and `authorizer.RuleResolver`, joined in
//! one trait, [`Authorizer`]: [`Authorizer::authorize`] decides one request described by its
//! [`Attributes`]; [`Authorizer::rules_for`] lists what a user may do in a namespace (for
//! SelfSubjectRulesReview, `kubectl auth can-i --list`).
//!
//! - [`AlwaysAllow`], [`AlwaysDeny`], [`PrivilegedGroups`] and [`Union`] (the chain: the first
//!   authorizer with an opinion decides) as upstream's authorizer factory and union.
//! - [`rbac`]: the RBAC authorizer over a policy snapshot fed from watch events.
//! - [`policy`]: the rbac.authorization.k8s.io/v1 rule, subject and role-reference types and
//!   upstream's rule matching.
//! - [`escalation`]: escalation prevention (`escalate`, `bind`) and the "covers" algorithm.
//! - [`aggregation`]: the rules of aggregated ClusterRoles, as the aggregation controller
//!   computes them.
//! - [`bootstrap`]: the bootstrap roles and bindings of the generic control plane.
//! - [`reconcile`]: upstream's reconciliation of a stored bootstrap object with the wanted one.
//! - [`review`]: the attributes and statuses of the access and rules review APIs.
//! - [`forbidden_reason`]: the explanation of a 403, as upstream writes it.
//!
//! Nothing here does I/O or is async; the apiserver feeds the RBAC snapshot and calls in:
//!
//! ```
//! use std::sync::Arc;
//! use genplane_authorization::rbac::RbacAuthorizer;
//! use genplane_authorization::{Attributes, Authorizer, Decision, PrivilegedGroups, Union, UserInfo};
//!
//! let rbac = Arc::new(RbacAuthorizer::new());
//! // At start: the stored RBAC objects (here the bootstrap policy); then each watch event
//! // with `rbac.apply(kind, &object)` or `rbac.remove(kind, namespace, name)`.
//! let bootstrap = genplane_authorization::bootstrap::objects();
//! rbac.replace_all(bootstrap.iter().map(|(kind, object)| (*kind, object))).unwrap();
//! let chain = Union::new(vec![
//!     Arc::new(PrivilegedGroups::new(["system:masters"])),
//!     rbac.clone(),
//! ]);
//! let anonymous = Attributes::non_resource(UserInfo::anonymous(), "get", "/version");
//! assert_eq!(chain.authorize(&anonymous).0, Decision::Allow);
//! let alice = UserInfo::authenticated("alice", vec![]);
//! let list = Attributes::resource(alice, "list", "", "configmaps", "default", "");
//! assert_eq!(chain.authorize(&list), (Decision::NoOpinion, String::new()));
//! ```

#![warn(missing_docs)]

pub mod aggregation;
pub mod bootstrap;
pub mod escalation;
pub mod policy;
pub mod rbac;
pub mod reconcile;
pub mod review;

use std::fmt::Debug;
use std::sync::Arc;

pub use genplane_authentication::UserInfo;
use serde::{Deserialize, Serialize};

/// What a request wants to do, as upstream's `authorizer.Attributes`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attributes {
    /// Who asks.
    pub user: UserInfo,
    /// The verb: `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection`, or a special verb (`bind`, `escalate`, `impersonate`, ...); for
    /// non-resource requests the lowercased HTTP method (`get`, `post`, ...).
    pub verb: String,
    /// The namespace of a namespaced resource request, empty otherwise.
    pub namespace: String,
    /// The API group (empty for the core group).
    pub api_group: String,
    /// The API version (`*` when the check is version-independent).
    pub api_version: String,
    /// The resource (plural, lowercase).
    pub resource: String,
    /// The subresource, empty when none.
    pub subresource: String,
    /// The object name, empty for list, watch-all and create-without-name.
    pub name: String,
    /// The request path (used for non-resource requests).
    pub path: String,
    /// Whether this is a resource request (else a non-resource URL request).
    pub resource_request: bool,
}

impl Attributes {
    /// A resource request: `verb` on `resource` (`resource/subresource` is split here) in
    /// `api_group`, in `namespace` (empty when cluster-wide), of the object `name` (empty when
    /// none).
    pub fn resource(
        user: UserInfo,
        verb: &str,
        api_group: &str,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> Self {
        let (resource, subresource) = match resource.split_once('/') {
            Some((r, s)) => (r, s),
            None => (resource, ""),
        };
        Self {
            user,
            verb: verb.to_owned(),
            namespace: namespace.to_owned(),
            api_group: api_group.to_owned(),
            api_version: "*".to_owned(),
            resource: resource.to_owned(),
            subresource: subresource.to_owned(),
            name: name.to_owned(),
            path: String::new(),
            resource_request: true,
        }
    }

    /// A non-resource request: `verb` (lowercased HTTP method) on `path`.
    pub fn non_resource(user: UserInfo, verb: &str, path: &str) -> Self {
        Self {
            user,
            verb: verb.to_owned(),
            path: path.to_owned(),
            ..Self::default()
        }
    }
}

/// An authorizer's decision, as upstream's `authorizer.Decision`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Decision {
    /// The request is allowed; later authorizers are not asked.
    Allow,
    /// The request is denied; later authorizers are not asked.
    Deny,
    /// This authorizer has no opinion; the next one in a [`Union`] decides.
    NoOpinion,
}

/// A rule over resources that a user holds, as upstream's `authorizer.ResourceRuleInfo`
/// (the shape of SelfSubjectRulesReview's `status.resourceRules[]`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRule {
    /// The verbs (`*` for all).
    pub verbs: Vec<String>,
    /// The API groups (`*` for all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_groups: Vec<String>,
    /// The resources (`*` for all, `*/sub` for a subresource of any resource).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    /// The object names (empty for all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<String>,
}

/// A rule over non-resource URLs that a user holds, as upstream's
/// `authorizer.NonResourceRuleInfo` (SelfSubjectRulesReview's `status.nonResourceRules[]`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NonResourceRule {
    /// The verbs (`*` for all).
    pub verbs: Vec<String>,
    /// The URL paths (`*` for all, a trailing `*` for a prefix).
    #[serde(
        rename = "nonResourceURLs",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub non_resource_urls: Vec<String>,
}

/// What a user may do in a namespace, as upstream's `RulesFor` answer: the SelfSubjectRulesReview
/// status.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RulesInfo {
    /// The rules over resources.
    pub resource_rules: Vec<ResourceRule>,
    /// The rules over non-resource URLs.
    pub non_resource_rules: Vec<NonResourceRule>,
    /// Whether the list may be incomplete (an authorizer that cannot enumerate its rules).
    pub incomplete: bool,
    /// Errors met while resolving the rules (e.g. a binding to a missing role); the rules found
    /// are still valid.
    pub evaluation_errors: Vec<String>,
}

impl RulesInfo {
    /// The errors as one string, as upstream's aggregate error (empty when none).
    pub fn evaluation_error(&self) -> String {
        aggregate(&self.evaluation_errors)
    }
}

/// A decision still being made (by another server, for a delegating authorizer).
pub type Pending<'a> = std::pin::Pin<Box<dyn Future<Output = (Decision, String)> + Send + 'a>>;

/// Decides requests, as upstream's `authorizer.Authorizer` together with
/// `authorizer.RuleResolver`.
///
/// Most authorizers decide at once ([`Authorizer::authorize`]). One that asks another server
/// (a SubjectAccessReview to the API server an extension server delegates to) says so with
/// [`Authorizer::delegates`] and decides in [`Authorizer::authorize_delegated`]; its
/// `authorize` answers what it knows without asking (a cached decision, else no opinion).
/// Request filters ask `authorize_delegated` of an authorizer that delegates.
pub trait Authorizer: Send + Sync + Debug {
    /// The decision for one request and its reason (may be empty). The reason of a
    /// [`Decision::NoOpinion`] explains what went wrong, when something did.
    fn authorize(&self, attributes: &Attributes) -> (Decision, String);

    /// What `user` may do in `namespace` (empty: cluster-wide rules only).
    fn rules_for(&self, user: &UserInfo, namespace: &str) -> RulesInfo;

    /// Whether a decision may need another server ([`Authorizer::authorize_delegated`]).
    fn delegates(&self) -> bool {
        false
    }

    /// The decision for one request, asking another server when needed; by default
    /// [`Authorizer::authorize`].
    fn authorize_delegated<'a>(&'a self, attributes: &'a Attributes) -> Pending<'a> {
        Box::pin(std::future::ready(self.authorize(attributes)))
    }
}

impl<T: Authorizer + ?Sized> Authorizer for Arc<T> {
    fn authorize(&self, attributes: &Attributes) -> (Decision, String) {
        (**self).authorize(attributes)
    }

    fn rules_for(&self, user: &UserInfo, namespace: &str) -> RulesInfo {
        (**self).rules_for(user, namespace)
    }

    fn delegates(&self) -> bool {
        (**self).delegates()
    }

    fn authorize_delegated<'a>(&'a self, attributes: &'a Attributes) -> Pending<'a> {
        (**self).authorize_delegated(attributes)
    }
}

/// The decision of `authorizer` for `attributes`: asked of the other server it delegates to
/// when it does, at once otherwise (no allocation).
pub async fn decide(authorizer: &dyn Authorizer, attributes: &Attributes) -> (Decision, String) {
    if authorizer.delegates() {
        authorizer.authorize_delegated(attributes).await
    } else {
        authorizer.authorize(attributes)
    }
}

/// Allows everything (`--authorization-mode=AlwaysAllow`).
#[derive(Clone, Copy, Debug, Default)]
pub struct AlwaysAllow;

impl Authorizer for AlwaysAllow {
    fn authorize(&self, _attributes: &Attributes) -> (Decision, String) {
        (Decision::Allow, String::new())
    }

    fn rules_for(&self, _user: &UserInfo, _namespace: &str) -> RulesInfo {
        RulesInfo {
            resource_rules: vec![ResourceRule {
                verbs: vec!["*".to_owned()],
                api_groups: vec!["*".to_owned()],
                resources: vec!["*".to_owned()],
                resource_names: Vec::new(),
            }],
            non_resource_rules: vec![NonResourceRule {
                verbs: vec!["*".to_owned()],
                non_resource_urls: vec!["*".to_owned()],
            }],
            incomplete: false,
            evaluation_errors: Vec::new(),
        }
    }
}

/// Denies everything (`--authorization-mode=AlwaysDeny`): as upstream, it answers
/// [`Decision::NoOpinion`] (which the end of a chain turns into a denial) with the reason
/// [`ALWAYS_DENY_REASON`], so a later authorizer in a [`Union`] may still allow.
#[derive(Clone, Copy, Debug, Default)]
pub struct AlwaysDeny;

/// The reason [`AlwaysDeny`] gives.
pub const ALWAYS_DENY_REASON: &str = "Everything is forbidden.";

impl Authorizer for AlwaysDeny {
    fn authorize(&self, _attributes: &Attributes) -> (Decision, String) {
        (Decision::NoOpinion, ALWAYS_DENY_REASON.to_owned())
    }

    fn rules_for(&self, _user: &UserInfo, _namespace: &str) -> RulesInfo {
        RulesInfo::default()
    }
}

/// Allows every request of a member of one of its groups and has no opinion otherwise: the
/// authorizer upstream puts first in the chain for `system:masters`. Lists no rules (the RBAC
/// binding of `cluster-admin` to `system:masters` does).
#[derive(Clone, Debug, Default)]
pub struct PrivilegedGroups {
    groups: Vec<String>,
}

impl PrivilegedGroups {
    /// An authorizer allowing everything to members of `groups`.
    pub fn new(groups: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self {
            groups: groups.into_iter().map(Into::into).collect(),
        }
    }
}

impl Authorizer for PrivilegedGroups {
    fn authorize(&self, attributes: &Attributes) -> (Decision, String) {
        if attributes
            .user
            .groups
            .iter()
            .any(|g| self.groups.iter().any(|p| p == g))
        {
            (Decision::Allow, String::new())
        } else {
            (Decision::NoOpinion, String::new())
        }
    }

    fn rules_for(&self, _user: &UserInfo, _namespace: &str) -> RulesInfo {
        RulesInfo::default()
    }
}

/// A chain of authorizers, as upstream's union authorizer: the first [`Decision::Allow`] or
/// [`Decision::Deny`] decides; when all have no opinion, the reasons are joined by newlines.
/// Rules are the concatenation of every member's rules.
#[derive(Debug, Default)]
pub struct Union {
    members: Vec<Arc<dyn Authorizer>>,
    /// Whether a member delegates.
    delegates: bool,
}

impl Union {
    /// A chain asking `members` in order.
    pub fn new(members: Vec<Arc<dyn Authorizer>>) -> Self {
        let delegates = members.iter().any(|m| m.delegates());
        Self { members, delegates }
    }
}

/// Adds one member's decision to a union's: `Some` when it decides.
fn union_step(
    (decision, reason): (Decision, String),
    reasons: &mut Vec<String>,
) -> Option<(Decision, String)> {
    match decision {
        Decision::Allow | Decision::Deny => Some((decision, reason)),
        Decision::NoOpinion => {
            if !reason.is_empty() {
                reasons.push(reason);
            }
            None
        }
    }
}

impl Authorizer for Union {
    fn authorize(&self, attributes: &Attributes) -> (Decision, String) {
        let mut reasons: Vec<String> = Vec::new();
        for member in &self.members {
            if let Some(decided) = union_step(member.authorize(attributes), &mut reasons) {
                return decided;
            }
        }
        (Decision::NoOpinion, reasons.join("\n"))
    }

    fn delegates(&self) -> bool {
        self.delegates
    }

    fn authorize_delegated<'a>(&'a self, attributes: &'a Attributes) -> Pending<'a> {
        Box::pin(async move {
            let mut reasons: Vec<String> = Vec::new();
            for member in &self.members {
                let decision = decide(member.as_ref(), attributes).await;
                if let Some(decided) = union_step(decision, &mut reasons) {
                    return decided;
                }
            }
            (Decision::NoOpinion, reasons.join("\n"))
        })
    }

    fn rules_for(&self, user: &UserInfo, namespace: &str) -> RulesInfo {
        let mut all = RulesInfo::default();
        for member in &self.members {
            let rules = member.rules_for(user, namespace);
            all.resource_rules.extend(rules.resource_rules);
            all.non_resource_rules.extend(rules.non_resource_rules);
            all.incomplete |= rules.incomplete;
            all.evaluation_errors.extend(rules.evaluation_errors);
        }
        all
    }
}

/// The explanation of a 403 for a request the chain did not allow, as upstream's
/// `responsewriters.Forbidden` writes it: `User "alice" cannot list resource "configmaps" in API
/// group "" in the namespace "a"` (or `at the cluster scope`, or `cannot get path "/metrics"`),
/// then `: <reason>` when the authorizer gave one; `&`, `<` and `>` are HTML-escaped as
/// upstream does. The Status message is `<resource>[.<group>] ["<name>"] is forbidden: ` and
/// this (`forbidden: ` and this for a non-resource request, which names no resource).
pub fn forbidden_reason(attributes: &Attributes, reason: &str) -> String {
    use genplane_apimachinery::gofmt::QuotedJoin as Quoted;
    let user = Quoted(&[&attributes.user.username]);
    let what = if !attributes.resource_request {
        format!(
            "User {user} cannot {} path {}",
            attributes.verb,
            Quoted(&[&attributes.path])
        )
    } else {
        let resource = if attributes.subresource.is_empty() {
            Quoted(&[&attributes.resource])
        } else {
            Quoted(&[&attributes.resource, "/", &attributes.subresource])
        };
        let group = Quoted(&[&attributes.api_group]);
        if attributes.namespace.is_empty() {
            format!(
                "User {user} cannot {} resource {resource} in API group {group} at the cluster scope",
                attributes.verb
            )
        } else {
            format!(
                "User {user} cannot {} resource {resource} in API group {group} in the namespace {}",
                attributes.verb,
                Quoted(&[&attributes.namespace])
            )
        }
    };
    let what = what
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    if reason.is_empty() {
        what
    } else {
        format!("{what}: {reason}")
    }
}

/// Upstream's aggregate error text: nothing for none, the message for one, `[a, b]` for more
/// (duplicates dropped).
pub(crate) fn aggregate(errors: &[String]) -> String {
    match errors {
        [] => String::new(),
        [one] => one.clone(),
        many => {
            let mut seen: Vec<&str> = Vec::new();
            for e in many {
                if !seen.contains(&e.as_str()) {
                    seen.push(e);
                }
            }
            if seen.len() == 1 {
                seen[0].to_owned()
            } else {
                format!("[{}]", seen.join(", "))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alice() -> UserInfo {
        UserInfo::authenticated("alice", vec![])
    }

    #[derive(Debug)]
    struct Fixed(Decision, &'static str);

    impl Authorizer for Fixed {
        fn authorize(&self, _attributes: &Attributes) -> (Decision, String) {
            (self.0, self.1.to_owned())
        }
        fn rules_for(&self, _user: &UserInfo, _namespace: &str) -> RulesInfo {
            RulesInfo {
                incomplete: self.0 == Decision::Deny,
                evaluation_errors: vec![self.1.to_owned()],
                ..RulesInfo::default()
            }
        }
    }

    #[test]
    fn resource_attributes_split_the_subresource() {
        let a = Attributes::resource(alice(), "get", "", "serviceaccounts/token", "a", "x");
        assert_eq!(a.resource, "serviceaccounts");
        assert_eq!(a.subresource, "token");
        assert!(a.resource_request);
        let a = Attributes::non_resource(alice(), "get", "/version");
        assert!(!a.resource_request);
        assert_eq!(a.path, "/version");
    }

    #[test]
    fn always_allow_and_deny() {
        let attrs = Attributes::non_resource(alice(), "get", "/x");
        assert_eq!(AlwaysAllow.authorize(&attrs).0, Decision::Allow);
        assert_eq!(
            AlwaysDeny.authorize(&attrs),
            (Decision::NoOpinion, "Everything is forbidden.".to_owned())
        );
        let rules = AlwaysAllow.rules_for(&alice(), "a");
        assert_eq!(rules.resource_rules[0].resources, ["*"]);
        assert_eq!(rules.non_resource_rules[0].non_resource_urls, ["*"]);
        assert!(
            AlwaysDeny
                .rules_for(&alice(), "a")
                .resource_rules
                .is_empty()
        );
    }

    #[test]
    fn privileged_groups_allow_members_only() {
        let masters = PrivilegedGroups::new(["system:masters"]);
        let admin = UserInfo::authenticated("root", vec!["system:masters".into()]);
        let attrs = Attributes::resource(admin, "delete", "", "secrets", "a", "x");
        assert_eq!(masters.authorize(&attrs).0, Decision::Allow);
        let attrs = Attributes::resource(alice(), "delete", "", "secrets", "a", "x");
        assert_eq!(masters.authorize(&attrs).0, Decision::NoOpinion);
    }

    #[test]
    fn union_first_opinion_wins_and_no_opinions_join_reasons() {
        let attrs = Attributes::non_resource(alice(), "get", "/x");
        let chain = Union::new(vec![
            Arc::new(Fixed(Decision::NoOpinion, "first")),
            Arc::new(Fixed(Decision::Deny, "second")),
            Arc::new(AlwaysAllow),
        ]);
        assert_eq!(chain.authorize(&attrs), (Decision::Deny, "second".into()));
        let chain = Union::new(vec![
            Arc::new(Fixed(Decision::NoOpinion, "first")),
            Arc::new(Fixed(Decision::NoOpinion, "")),
            Arc::new(Fixed(Decision::NoOpinion, "third")),
        ]);
        assert_eq!(
            chain.authorize(&attrs),
            (Decision::NoOpinion, "first\nthird".into())
        );
        let chain = Union::new(vec![
            Arc::new(Fixed(Decision::NoOpinion, "e1")),
            Arc::new(Fixed(Decision::Deny, "e2")),
            Arc::new(AlwaysAllow),
        ]);
        let rules = chain.rules_for(&alice(), "");
        assert!(rules.incomplete);
        assert_eq!(rules.evaluation_error(), "[e1, e2]");
        assert_eq!(rules.resource_rules.len(), 1);
    }

    #[test]
    fn forbidden_reasons_read_as_upstream() {
        let list = Attributes::resource(alice(), "list", "", "configmaps", "a", "");
        assert_eq!(
            forbidden_reason(&list, ""),
            r#"User "alice" cannot list resource "configmaps" in API group "" in the namespace "a""#
        );
        let token = Attributes::resource(alice(), "create", "", "serviceaccounts/token", "", "x");
        assert_eq!(
            forbidden_reason(
                &token,
                "RBAC: role.rbac.authorization.k8s.io \"r\" not found"
            ),
            "User \"alice\" cannot create resource \"serviceaccounts/token\" in API group \"\" at the cluster scope: RBAC: role.rbac.authorization.k8s.io \"r\" not found"
        );
        let path = Attributes::non_resource(UserInfo::anonymous(), "get", "/<metrics>&");
        assert_eq!(
            forbidden_reason(&path, ""),
            r#"User "system:anonymous" cannot get path "/&lt;metrics&gt;&amp;""#
        );
    }

    #[test]
    fn aggregate_matches_upstream_formatting() {
        assert_eq!(aggregate(&[]), "");
        assert_eq!(aggregate(&["a".into()]), "a");
        assert_eq!(aggregate(&["a".into(), "a".into()]), "a");
        assert_eq!(aggregate(&["a".into(), "b".into(), "a".into()]), "[a, b]");
    }
}
