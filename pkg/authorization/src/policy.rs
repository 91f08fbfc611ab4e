//! The rbac.authorization.k8s.io/v1 policy types and upstream's rule matching.
//!
//! Matching follows upstream's `RuleAllows` (Kubernetes 1.33): a verb, API group or resource of
//! `*` matches anything; a resource `*/sub` matches the subresource `sub` of any resource (a
//! resource `x/*` is not a wildcard: it only matches the literal subresource `*`); an empty
//! `resourceNames` matches every name, a non-empty one only requests naming one of them (so
//! never a list, a watch of all, or a create without a name); a non-resource URL matches
//! exactly, or by prefix when it ends in `*`, and `*` matches every path.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::Attributes;

/// The API group of RBAC.
pub const GROUP: &str = "rbac.authorization.k8s.io";
/// The API version of the objects this crate reads and writes.
pub const API_VERSION: &str = "rbac.authorization.k8s.io/v1";
/// The wildcard of verbs, groups, resources and non-resource URLs.
pub const ALL: &str = "*";
/// The prefix of service-account user names.
pub const SERVICE_ACCOUNT_USERNAME_PREFIX: &str = "system:serviceaccount:";

/// Errors reading RBAC objects.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The object is not a well-formed object of its kind.
    #[error("invalid {kind}: {source}")]
    Decode {
        /// The kind expected.
        kind: Kind,
        /// What was wrong.
        #[source]
        source: serde_json::Error,
    },
    /// The object has no `metadata.name`.
    #[error("invalid {kind}: metadata.name is required")]
    MissingName {
        /// The kind expected.
        kind: Kind,
    },
}

/// The four RBAC kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// A namespaced set of rules.
    Role,
    /// A cluster-wide set of rules.
    ClusterRole,
    /// Grants a Role or ClusterRole to subjects within a namespace.
    RoleBinding,
    /// Grants a ClusterRole to subjects in every namespace.
    ClusterRoleBinding,
}

impl Kind {
    /// The kind's name (`Role`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Role => "Role",
            Kind::ClusterRole => "ClusterRole",
            Kind::RoleBinding => "RoleBinding",
            Kind::ClusterRoleBinding => "ClusterRoleBinding",
        }
    }

    /// The kind named `kind`, if it is one of the four.
    pub fn parse(kind: &str) -> Option<Kind> {
        match kind {
            "Role" => Some(Kind::Role),
            "ClusterRole" => Some(Kind::ClusterRole),
            "RoleBinding" => Some(Kind::RoleBinding),
            "ClusterRoleBinding" => Some(Kind::ClusterRoleBinding),
            _ => None,
        }
    }

    /// The resource (`roles`, `clusterroles`, `rolebindings`, `clusterrolebindings`).
    pub fn resource(self) -> &'static str {
        match self {
            Kind::Role => "roles",
            Kind::ClusterRole => "clusterroles",
            Kind::RoleBinding => "rolebindings",
            Kind::ClusterRoleBinding => "clusterrolebindings",
        }
    }

    /// Whether objects of this kind live in a namespace.
    pub fn namespaced(self) -> bool {
        matches!(self, Kind::Role | Kind::RoleBinding)
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

pub(crate) fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// One rule of a Role or ClusterRole (`rbac.authorization.k8s.io/v1` PolicyRule).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRule {
    /// The verbs (`*` for all).
    #[serde(default, deserialize_with = "nullable")]
    pub verbs: Vec<String>,
    /// The API groups (`*` for all, `""` for the core group).
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub api_groups: Vec<String>,
    /// The resources (`*` for all, `x/y` for subresource y of x, `*/y` for subresource y of
    /// anything).
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub resources: Vec<String>,
    /// The object names (empty for all).
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub resource_names: Vec<String>,
    /// The non-resource URL paths (`*` for all, trailing `*` for a prefix).
    #[serde(
        rename = "nonResourceURLs",
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub non_resource_urls: Vec<String>,
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

impl PolicyRule {
    /// A rule granting `verbs` (builder start, as upstream's `NewRule`).
    pub fn new(verbs: &[&str]) -> Self {
        Self {
            verbs: strings(verbs),
            ..Self::default()
        }
    }

    /// With these API groups.
    pub fn groups(mut self, groups: &[&str]) -> Self {
        self.api_groups = strings(groups);
        self
    }

    /// With these resources.
    pub fn resources(mut self, resources: &[&str]) -> Self {
        self.resources = strings(resources);
        self
    }

    /// With these object names.
    pub fn names(mut self, names: &[&str]) -> Self {
        self.resource_names = strings(names);
        self
    }

    /// With these non-resource URLs.
    pub fn urls(mut self, urls: &[&str]) -> Self {
        self.non_resource_urls = strings(urls);
        self
    }

    /// Whether this rule allows the request (upstream's `RuleAllows`).
    pub fn allows(&self, request: &Attributes) -> bool {
        if request.resource_request {
            self.verb_matches(&request.verb)
                && self.api_group_matches(&request.api_group)
                && self.resource_matches(&request.resource, &request.subresource)
                && self.resource_name_matches(&request.name)
        } else {
            self.verb_matches(&request.verb) && self.non_resource_url_matches(&request.path)
        }
    }

    /// Whether the rule names `verb` or `*`.
    pub fn verb_matches(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == ALL || v == verb)
    }

    /// Whether the rule names `group` or `*`.
    pub fn api_group_matches(&self, group: &str) -> bool {
        self.api_groups.iter().any(|g| g == ALL || g == group)
    }

    /// Whether the rule covers `resource` with `subresource` (empty for none): `*`, the exact
    /// `resource` or `resource/subresource`, or `*/subresource`.
    pub fn resource_matches(&self, resource: &str, subresource: &str) -> bool {
        self.resources.iter().any(|r| {
            if r == ALL {
                return true;
            }
            if subresource.is_empty() {
                return r == resource;
            }
            if let Some((rule_resource, rule_sub)) = r.split_once('/') {
                rule_sub == subresource && (rule_resource == resource || rule_resource == ALL)
            } else {
                false
            }
        })
    }

    /// Whether the rule covers the object `name` (an empty list covers all names).
    pub fn resource_name_matches(&self, name: &str) -> bool {
        self.resource_names.is_empty() || self.resource_names.iter().any(|n| n == name)
    }

    /// Whether the rule covers the non-resource `path`.
    pub fn non_resource_url_matches(&self, path: &str) -> bool {
        self.non_resource_urls.iter().any(|u| {
            u == ALL || u == path || (u.ends_with('*') && path.starts_with(u.trim_end_matches('*')))
        })
    }
}

/// Whether any of `rules` allows the request (upstream's `RulesAllow`).
pub fn rules_allow(request: &Attributes, rules: &[PolicyRule]) -> bool {
    rules.iter().any(|r| r.allows(request))
}

/// Who a binding grants to (`rbac.authorization.k8s.io/v1` Subject).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Subject {
    /// `User`, `Group` or `ServiceAccount`.
    pub kind: String,
    /// `rbac.authorization.k8s.io` for users and groups, empty for service accounts.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub api_group: String,
    /// The user, group or service-account name.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// The namespace of a service account.
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub namespace: String,
}

impl Subject {
    /// The user `name`.
    pub fn user(name: &str) -> Self {
        Self {
            kind: "User".into(),
            api_group: GROUP.into(),
            name: name.into(),
            namespace: String::new(),
        }
    }

    /// The group `name`.
    pub fn group(name: &str) -> Self {
        Self {
            kind: "Group".into(),
            api_group: GROUP.into(),
            name: name.into(),
            namespace: String::new(),
        }
    }

    /// The service account `namespace/name`.
    pub fn service_account(namespace: &str, name: &str) -> Self {
        Self {
            kind: "ServiceAccount".into(),
            api_group: String::new(),
            name: name.into(),
            namespace: namespace.into(),
        }
    }

    /// Whether this subject names `user`, as upstream's `appliesToUser`. `namespace` is the
    /// namespace of a RoleBinding (empty for a ClusterRoleBinding): a service-account subject
    /// without a namespace means an account in it, and never matches when it is empty.
    pub fn applies_to(&self, user: &crate::UserInfo, namespace: &str) -> bool {
        match self.kind.as_str() {
            "User" => user.username == self.name,
            "Group" => user.groups.contains(&self.name),
            "ServiceAccount" => {
                let ns = if self.namespace.is_empty() {
                    namespace
                } else {
                    &self.namespace
                };
                !ns.is_empty() && service_account_matches(&user.username, ns, &self.name)
            }
            _ => false,
        }
    }

    /// The user name this subject stands for when it is a user, or a service account whose
    /// namespace is known (its own, else `binding_namespace`).
    pub(crate) fn user_key(&self, binding_namespace: &str) -> Option<String> {
        match self.kind.as_str() {
            "User" => Some(self.name.clone()),
            "ServiceAccount" => {
                let ns = if self.namespace.is_empty() {
                    binding_namespace
                } else {
                    &self.namespace
                };
                (!ns.is_empty()).then(|| service_account_username(ns, &self.name))
            }
            _ => None,
        }
    }
}

/// The user name of the service account `namespace/name`.
pub fn service_account_username(namespace: &str, name: &str) -> String {
    format!("{SERVICE_ACCOUNT_USERNAME_PREFIX}{namespace}:{name}")
}

fn service_account_matches(username: &str, namespace: &str, name: &str) -> bool {
    username
        .strip_prefix(SERVICE_ACCOUNT_USERNAME_PREFIX)
        .and_then(|rest| rest.strip_prefix(namespace))
        .and_then(|rest| rest.strip_prefix(':'))
        == Some(name)
}

/// The role a binding grants (`rbac.authorization.k8s.io/v1` RoleRef).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoleRef {
    /// `rbac.authorization.k8s.io`.
    #[serde(default, deserialize_with = "nullable")]
    pub api_group: String,
    /// `Role` or `ClusterRole`.
    #[serde(default, deserialize_with = "nullable")]
    pub kind: String,
    /// The role's name.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
}

impl RoleRef {
    /// A reference to the ClusterRole `name`.
    pub fn cluster_role(name: &str) -> Self {
        Self {
            api_group: GROUP.into(),
            kind: "ClusterRole".into(),
            name: name.into(),
        }
    }

    /// A reference to the Role `name` (in the binding's namespace).
    pub fn role(name: &str) -> Self {
        Self {
            api_group: GROUP.into(),
            kind: "Role".into(),
            name: name.into(),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Meta {
    #[serde(deserialize_with = "nullable")]
    name: String,
    #[serde(deserialize_with = "nullable")]
    namespace: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct RoleObject {
    metadata: Meta,
    #[serde(deserialize_with = "nullable")]
    rules: Vec<PolicyRule>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct BindingObject {
    metadata: Meta,
    role_ref: RoleRef,
    #[serde(deserialize_with = "nullable")]
    subjects: Vec<Subject>,
}

/// The parts of a Role or ClusterRole that authorization reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoleParts {
    /// `metadata.namespace` (empty for a ClusterRole).
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `rules`.
    pub rules: Vec<PolicyRule>,
}

/// The parts of a RoleBinding or ClusterRoleBinding that authorization reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BindingParts {
    /// `metadata.namespace` (empty for a ClusterRoleBinding).
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `roleRef`.
    pub role_ref: RoleRef,
    /// `subjects`.
    pub subjects: Vec<Subject>,
}

/// Reads a Role or ClusterRole (`kind` says which, for messages).
pub fn decode_role(kind: Kind, object: &Value) -> Result<RoleParts, PolicyError> {
    let role = decode_role_unnamed(kind, object)?;
    if role.name.is_empty() {
        return Err(PolicyError::MissingName { kind });
    }
    Ok(role)
}

/// Reads a Role or ClusterRole that may have no name yet (a create with `generateName`).
pub(crate) fn decode_role_unnamed(kind: Kind, object: &Value) -> Result<RoleParts, PolicyError> {
    let o =
        RoleObject::deserialize(object).map_err(|source| PolicyError::Decode { kind, source })?;
    Ok(RoleParts {
        namespace: o.metadata.namespace,
        name: o.metadata.name,
        rules: o.rules,
    })
}

/// Reads a RoleBinding or ClusterRoleBinding (`kind` says which, for messages).
pub fn decode_binding(kind: Kind, object: &Value) -> Result<BindingParts, PolicyError> {
    let binding = decode_binding_unnamed(kind, object)?;
    if binding.name.is_empty() {
        return Err(PolicyError::MissingName { kind });
    }
    Ok(binding)
}

/// Reads a binding that may have no name yet (a create with `generateName`).
pub(crate) fn decode_binding_unnamed(
    kind: Kind,
    object: &Value,
) -> Result<BindingParts, PolicyError> {
    let o = BindingObject::deserialize(object)
        .map_err(|source| PolicyError::Decode { kind, source })?;
    Ok(BindingParts {
        namespace: o.metadata.namespace,
        name: o.metadata.name,
        role_ref: o.role_ref,
        subjects: o.subjects,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::UserInfo;

    fn res(verb: &str, group: &str, resource: &str, name: &str) -> Attributes {
        Attributes::resource(UserInfo::default(), verb, group, resource, "ns", name)
    }

    #[test]
    fn verbs_groups_and_resources_match_exactly_or_by_star() {
        let rule = PolicyRule::new(&["get", "list"])
            .groups(&[""])
            .resources(&["configmaps"]);
        assert!(rule.allows(&res("get", "", "configmaps", "x")));
        assert!(rule.allows(&res("list", "", "configmaps", "")));
        assert!(!rule.allows(&res("delete", "", "configmaps", "x")));
        assert!(!rule.allows(&res("get", "apps", "configmaps", "x")));
        assert!(!rule.allows(&res("get", "", "secrets", "x")));
        assert!(!rule.allows(&res("get", "", "configmaps/status", "x")));
        let star = PolicyRule::new(&["*"]).groups(&["*"]).resources(&["*"]);
        assert!(star.allows(&res("escalate", "rbac.authorization.k8s.io", "roles", "")));
        assert!(star.allows(&res("get", "", "serviceaccounts/token", "x")));
        // A resource rule never allows a non-resource request.
        assert!(!star.allows(&Attributes::non_resource(
            UserInfo::default(),
            "get",
            "/api"
        )));
    }

    #[test]
    fn subresources_match_as_upstream() {
        let exact = PolicyRule::new(&["get"])
            .groups(&[""])
            .resources(&["namespaces/status"]);
        assert!(exact.allows(&res("get", "", "namespaces/status", "a")));
        assert!(!exact.allows(&res("get", "", "namespaces", "a")));
        assert!(!exact.allows(&res("get", "", "namespaces/finalize", "a")));
        let any_status = PolicyRule::new(&["get"])
            .groups(&[""])
            .resources(&["*/status"]);
        assert!(any_status.allows(&res("get", "", "namespaces/status", "a")));
        assert!(any_status.allows(&res("get", "", "resourcequotas/status", "a")));
        assert!(!any_status.allows(&res("get", "", "namespaces", "a")));
        assert!(!any_status.allows(&res("get", "", "namespaces/statuses", "a")));
        // `x/*` is no wildcard upstream: it only names the subresource "*".
        let x_star = PolicyRule::new(&["get"])
            .groups(&[""])
            .resources(&["namespaces/*"]);
        assert!(!x_star.allows(&res("get", "", "namespaces/status", "a")));
        assert!(!x_star.allows(&res("get", "", "namespaces", "a")));
        // A plain resource does not grant its subresources.
        let plain = PolicyRule::new(&["*"])
            .groups(&[""])
            .resources(&["serviceaccounts"]);
        assert!(!plain.allows(&res("create", "", "serviceaccounts/token", "x")));
    }

    #[test]
    fn resource_names_restrict_to_named_requests() {
        let rule = PolicyRule::new(&["get", "list", "watch", "update", "create"])
            .groups(&[""])
            .resources(&["configmaps"])
            .names(&["one", "two"]);
        assert!(rule.allows(&res("get", "", "configmaps", "one")));
        assert!(rule.allows(&res("update", "", "configmaps", "two")));
        assert!(!rule.allows(&res("get", "", "configmaps", "three")));
        assert!(!rule.allows(&res("list", "", "configmaps", "")));
        assert!(!rule.allows(&res("watch", "", "configmaps", "")));
        // A create names no object in its URL, so a named rule never allows it.
        assert!(!rule.allows(&res("create", "", "configmaps", "")));
        // A watch of one object (fieldSelector metadata.name) carries its name.
        assert!(rule.allows(&res("watch", "", "configmaps", "one")));
    }

    #[test]
    fn non_resource_urls_match_exactly_by_prefix_or_star() {
        let rule = PolicyRule::new(&["get"]).urls(&["/version", "/apis/*", "/healthz"]);
        let get = |path: &str| Attributes::non_resource(UserInfo::default(), "get", path);
        assert!(rule.allows(&get("/version")));
        assert!(!rule.allows(&get("/version/")));
        assert!(rule.allows(&get("/apis/")));
        assert!(rule.allows(&get("/apis/apps/v1")));
        assert!(!rule.allows(&get("/apis")));
        assert!(!rule.allows(&get("/healthz/etcd")));
        assert!(!rule.allows(&Attributes::non_resource(
            UserInfo::default(),
            "post",
            "/version"
        )));
        let all = PolicyRule::new(&["*"]).urls(&["*"]);
        assert!(all.allows(&get("/anything")));
        assert!(all.allows(&Attributes::non_resource(
            UserInfo::default(),
            "delete",
            "/x"
        )));
        // A non-resource rule never allows a resource request.
        assert!(!all.allows(&res("get", "", "configmaps", "")));
    }

    #[test]
    fn subjects_apply_as_upstream() {
        let user = UserInfo::authenticated("alice", vec!["dev".into()]);
        assert!(Subject::user("alice").applies_to(&user, ""));
        assert!(!Subject::user("bob").applies_to(&user, ""));
        assert!(Subject::group("dev").applies_to(&user, ""));
        assert!(Subject::group("system:authenticated").applies_to(&user, ""));
        assert!(!Subject::group("ops").applies_to(&user, ""));
        let sa = UserInfo::authenticated("system:serviceaccount:ns1:builder", vec![]);
        assert!(Subject::service_account("ns1", "builder").applies_to(&sa, ""));
        assert!(!Subject::service_account("ns2", "builder").applies_to(&sa, ""));
        assert!(!Subject::service_account("ns1", "build").applies_to(&sa, ""));
        // Without a namespace: the binding's namespace, never in a cluster binding.
        assert!(Subject::service_account("", "builder").applies_to(&sa, "ns1"));
        assert!(!Subject::service_account("", "builder").applies_to(&sa, "ns2"));
        assert!(!Subject::service_account("", "builder").applies_to(&sa, ""));
        let odd = Subject {
            kind: "Robot".into(),
            name: "alice".into(),
            ..Subject::default()
        };
        assert!(!odd.applies_to(&user, "ns1"));
    }

    #[test]
    fn decodes_objects_with_nulls() {
        let role = decode_role(
            Kind::ClusterRole,
            &json!({"metadata": {"name": "admin"}, "rules": null, "aggregationRule": {}}),
        )
        .unwrap();
        assert_eq!(role.name, "admin");
        assert!(role.rules.is_empty());
        let rule: PolicyRule = serde_json::from_value(
            json!({"verbs": ["get"], "apiGroups": null, "nonResourceURLs": ["/x"]}),
        )
        .unwrap();
        assert_eq!(rule, PolicyRule::new(&["get"]).urls(&["/x"]));
        assert_eq!(
            serde_json::to_value(&rule).unwrap(),
            json!({"verbs": ["get"], "nonResourceURLs": ["/x"]})
        );
        let binding = decode_binding(
            Kind::RoleBinding,
            &json!({"metadata": {"name": "b", "namespace": "a"},
                    "roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "r"},
                    "subjects": null}),
        )
        .unwrap();
        assert_eq!(binding.role_ref, RoleRef::role("r"));
        assert!(matches!(
            decode_binding(Kind::RoleBinding, &json!({"metadata": {}})),
            Err(PolicyError::MissingName { .. })
        ));
        assert!(matches!(
            decode_role(Kind::Role, &json!({"metadata": {"name": "x"}, "rules": 3})),
            Err(PolicyError::Decode { .. })
        ));
    }
}
