//! Escalation prevention, as upstream's RBAC registry (`ConfirmNoEscalation`,
//! `EscalationAllowed`, `RoleEscalationAuthorized`, `BindingAuthorized`) and the "covers"
//! algorithm of `component-helpers/auth/rbac/validation`.
//!
//! Nobody may grant rights they do not hold. Writing a Role or ClusterRole is allowed when the
//! writer is in `system:masters`, holds the `escalate` verb on the role resource, or already
//! holds every rule the role grants ([`confirm_no_escalation`]); setting a ClusterRole's
//! `aggregationRule` needs every right there is. Writing a binding is allowed when the writer is
//! in `system:masters`, holds `bind` on the referenced role, or holds all its rules.
//!
//! The apiserver calls [`check_role_write`] and [`check_binding_write`] on create, and on update
//! unless only garbage-collection fields changed ([`is_only_mutating_gc_fields`]).

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use crate::policy::{ALL, GROUP, Kind, PolicyRule, RoleRef};
use crate::rbac::RuleResolver;
use crate::{Attributes, Authorizer, Decision, UserInfo};
use genplane_apimachinery::gofmt::{quote, quote_list};

/// The group whose members may always escalate (the apiserver's loopback identity is in it).
pub const SYSTEM_MASTERS: &str = genplane_authentication::SYSTEM_MASTERS;

/// A write that would grant rights its author does not hold: upstream's Forbidden error of
/// the RBAC registry.
///
/// Its text is the Status message: `<resource>.rbac.authorization.k8s.io "<name>" is forbidden:
/// <reason>` (without the name when the object has none yet).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.message())]
pub struct EscalationError {
    /// The resource written (`roles`, `clusterroles`, `rolebindings`, `clusterrolebindings`).
    pub resource: &'static str,
    /// The object's name.
    pub name: String,
    /// Why: upstream's text (e.g. `user "bob" (groups=["system:authenticated"]) is attempting to
    /// grant RBAC permissions not currently held:\n{APIGroups:[""], ...}`).
    pub reason: String,
}

impl EscalationError {
    fn message(&self) -> String {
        if self.name.is_empty() {
            format!("{}.{GROUP} is forbidden: {}", self.resource, self.reason)
        } else {
            format!(
                "{}.{GROUP} {} is forbidden: {}",
                self.resource,
                quote(&self.name),
                self.reason
            )
        }
    }
}

/// Breaks a rule down into rules of one verb, group, resource and name each (or one verb and
/// one non-resource URL), as upstream's `BreakdownRule`.
pub fn breakdown_rule(rule: &PolicyRule) -> Vec<PolicyRule> {
    let mut out = Vec::new();
    for group in &rule.api_groups {
        for resource in &rule.resources {
            for verb in &rule.verbs {
                let one = PolicyRule {
                    verbs: vec![verb.clone()],
                    api_groups: vec![group.clone()],
                    resources: vec![resource.clone()],
                    ..PolicyRule::default()
                };
                if rule.resource_names.is_empty() {
                    out.push(one);
                } else {
                    for name in &rule.resource_names {
                        out.push(PolicyRule {
                            resource_names: vec![name.clone()],
                            ..one.clone()
                        });
                    }
                }
            }
        }
    }
    for url in &rule.non_resource_urls {
        for verb in &rule.verbs {
            out.push(PolicyRule {
                verbs: vec![verb.clone()],
                non_resource_urls: vec![url.clone()],
                ..PolicyRule::default()
            });
        }
    }
    out
}

fn has(set: &[String], item: &str) -> bool {
    set.iter().any(|s| s == item)
}

fn has_all(set: &[String], items: &[String]) -> bool {
    items.iter().all(|i| has(set, i))
}

fn resources_cover(owner: &[String], wanted: &[String]) -> bool {
    if has(owner, ALL) || has_all(owner, wanted) {
        return true;
    }
    wanted.iter().all(|path| {
        has(owner, path)
            || path
                .split_once('/')
                .is_some_and(|(_, sub)| has(owner, &format!("*/{sub}")))
    })
}

fn non_resource_url_covers(owner: &str, path: &str) -> bool {
    owner == path || (owner.ends_with('*') && path.starts_with(owner.trim_end_matches('*')))
}

fn non_resource_urls_cover(owner: &[String], wanted: &[String]) -> bool {
    wanted
        .iter()
        .all(|path| owner.iter().any(|o| non_resource_url_covers(o, path)))
}

/// Whether `owner` covers `sub`, a rule broken down by [`breakdown_rule`] (upstream's
/// `ruleCovers`).
fn rule_covers(owner: &PolicyRule, sub: &PolicyRule) -> bool {
    let verbs = has(&owner.verbs, ALL) || has_all(&owner.verbs, &sub.verbs);
    let groups = has(&owner.api_groups, ALL) || has_all(&owner.api_groups, &sub.api_groups);
    let resources = resources_cover(&owner.resources, &sub.resources);
    let urls = non_resource_urls_cover(&owner.non_resource_urls, &sub.non_resource_urls);
    let names = if sub.resource_names.is_empty() {
        owner.resource_names.is_empty()
    } else {
        owner.resource_names.is_empty() || has_all(&owner.resource_names, &sub.resource_names)
    };
    verbs && groups && resources && urls && names
}

/// Whether `owner` rules cover every one of `wanted`, and the broken-down rules they do not
/// cover (upstream's `Covers`).
pub fn covers(owner: &[PolicyRule], wanted: &[PolicyRule]) -> (bool, Vec<PolicyRule>) {
    let missing: Vec<PolicyRule> = wanted
        .iter()
        .flat_map(breakdown_rule)
        .filter(|sub| !owner.iter().any(|o| rule_covers(o, sub)))
        .collect();
    (missing.is_empty(), missing)
}

/// Joins rules of one group and resource (and at most one name) that differ only by verb
/// (upstream's `CompactRules`). The order of the joined rules is unspecified.
pub fn compact_rules(rules: &[PolicyRule]) -> Vec<PolicyRule> {
    let mut out: Vec<PolicyRule> = Vec::new();
    let mut simple: HashMap<(String, String, Option<String>), usize> = HashMap::new();
    let mut simple_rules: Vec<PolicyRule> = Vec::new();
    for rule in rules {
        let is_simple = rule.resource_names.len() <= 1
            && rule.non_resource_urls.is_empty()
            && rule.api_groups.len() == 1
            && rule.resources.len() == 1;
        if !is_simple {
            out.push(rule.clone());
            continue;
        }
        let key = (
            rule.api_groups[0].clone(),
            rule.resources[0].clone(),
            rule.resource_names.first().cloned(),
        );
        match simple.get(&key) {
            Some(&at) => {
                let existing = &mut simple_rules[at];
                for verb in &rule.verbs {
                    if !has(&existing.verbs, verb) {
                        existing.verbs.push(verb.clone());
                    }
                }
            }
            None => {
                simple.insert(key, simple_rules.len());
                simple_rules.push(rule.clone());
            }
        }
    }
    out.extend(simple_rules);
    out
}

/// A rule as upstream writes it in escalation messages (`CompactString`):
/// `{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}`.
pub fn compact_string(rule: &PolicyRule) -> String {
    let mut parts: Vec<String> = Vec::new();
    if !rule.api_groups.is_empty() {
        parts.push(format!("APIGroups:{}", quote_list(&rule.api_groups)));
    }
    if !rule.resources.is_empty() {
        parts.push(format!("Resources:{}", quote_list(&rule.resources)));
    }
    if !rule.non_resource_urls.is_empty() {
        parts.push(format!(
            "NonResourceURLs:{}",
            quote_list(&rule.non_resource_urls)
        ));
    }
    if !rule.resource_names.is_empty() {
        parts.push(format!(
            "ResourceNames:{}",
            quote_list(&rule.resource_names)
        ));
    }
    if !rule.verbs.is_empty() {
        parts.push(format!("Verbs:{}", quote_list(&rule.verbs)));
    }
    format!("{{{}}}", parts.join(", "))
}

/// Checks that `user` holds, in `namespace` (empty for cluster-wide), every one of `rules`
/// (upstream's `ConfirmNoEscalation`). The error is upstream's reason text, naming the missing
/// rules compacted and sorted, one a line, and any rule-resolution errors.
pub fn confirm_no_escalation(
    resolver: &dyn RuleResolver,
    user: &UserInfo,
    namespace: &str,
    rules: &[PolicyRule],
) -> Result<(), String> {
    let (owner, errors) = resolver.policy_rules_for(user, namespace);
    let (covered, missing) = covers(&owner, rules);
    if covered {
        return Ok(());
    }
    let descriptions: BTreeSet<String> =
        compact_rules(&missing).iter().map(compact_string).collect();
    let mut msg = format!(
        "user {} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
        quote(&user.username),
        quote_list(&user.groups),
        descriptions.into_iter().collect::<Vec<_>>().join("\n")
    );
    if !errors.is_empty() {
        msg.push_str(&format!(
            "; resolution errors: [{}]",
            crate::aggregate(&errors)
        ));
    }
    Err(msg)
}

/// Whether `user` may always escalate: a member of `system:masters` (upstream's
/// `EscalationAllowed`).
pub fn escalation_allowed(user: &UserInfo) -> bool {
    user.in_group(SYSTEM_MASTERS)
}

/// Whether `user` holds the `escalate` verb on the role written (upstream's
/// `RoleEscalationAuthorized`). `kind` is [`Kind::Role`] or [`Kind::ClusterRole`].
pub fn role_escalation_authorized(
    authorizer: &dyn Authorizer,
    user: &UserInfo,
    kind: Kind,
    namespace: &str,
    name: &str,
) -> bool {
    if !matches!(kind, Kind::Role | Kind::ClusterRole) {
        return false;
    }
    let attrs = Attributes::resource(
        user.clone(),
        "escalate",
        GROUP,
        kind.resource(),
        namespace,
        name,
    );
    authorizer.authorize(&attrs).0 == Decision::Allow
}

/// Whether `user` holds the `bind` verb on the role `role_ref` for a binding in
/// `binding_namespace` (empty for a ClusterRoleBinding) (upstream's `BindingAuthorized`).
pub fn binding_authorized(
    authorizer: &dyn Authorizer,
    user: &UserInfo,
    role_ref: &RoleRef,
    binding_namespace: &str,
) -> bool {
    let resource = match role_ref.kind.as_str() {
        "ClusterRole" => "clusterroles",
        "Role" => "roles",
        _ => return false,
    };
    let mut attrs = Attributes::resource(
        user.clone(),
        "bind",
        &role_ref.api_group,
        resource,
        binding_namespace,
        &role_ref.name,
    );
    attrs.api_version = String::new();
    authorizer.authorize(&attrs).0 == Decision::Allow
}

fn full_authority() -> [PolicyRule; 2] {
    [
        PolicyRule::new(&[ALL]).groups(&[ALL]).resources(&[ALL]),
        PolicyRule::new(&[ALL]).urls(&[ALL]),
    ]
}

/// Whether a ClusterRole has an aggregation rule with at least one selector (upstream's
/// `hasAggregationRule`).
pub fn has_aggregation_rule(cluster_role: &Value) -> bool {
    cluster_role
        .pointer("/aggregationRule/clusterRoleSelectors")
        .and_then(Value::as_array)
        .is_some_and(|s| !s.is_empty())
}

/// Whether `user` may write the Role or ClusterRole `object` (`kind` says which) in
/// `namespace` (empty for a ClusterRole), as upstream's RBAC registry checks a create (`old`
/// is `None`) or an update from `old`:
///
/// - members of `system:masters` and holders of `escalate` on the resource may write anything
///   (`escalate` is checked against the request's object name: none on a create, as upstream);
/// - an update that changes only garbage-collection fields passes;
/// - otherwise the writer must hold every rule the role grants, and setting, changing or
///   removing a ClusterRole's `aggregationRule` needs every right there is.
pub fn check_role_write(
    authorizer: &dyn Authorizer,
    resolver: &dyn RuleResolver,
    user: &UserInfo,
    kind: Kind,
    namespace: &str,
    object: &Value,
    old: Option<&Value>,
) -> Result<(), EscalationError> {
    let role = crate::policy::decode_role_unnamed(kind, object).map_err(|e| EscalationError {
        resource: kind.resource(),
        name: String::new(),
        reason: e.to_string(),
    })?;
    let request_name = if old.is_some() {
        role.name.as_str()
    } else {
        ""
    };
    if escalation_allowed(user)
        || role_escalation_authorized(authorizer, user, kind, namespace, request_name)
    {
        return Ok(());
    }
    if old.is_some_and(|old| is_only_mutating_gc_fields(old, object)) {
        return Ok(());
    }
    let forbidden = |reason: String| EscalationError {
        resource: kind.resource(),
        name: role.name.clone(),
        reason,
    };
    confirm_no_escalation(resolver, user, namespace, &role.rules).map_err(forbidden)?;
    let aggregated = kind == Kind::ClusterRole
        && (has_aggregation_rule(object) || old.is_some_and(has_aggregation_rule));
    if aggregated && confirm_no_escalation(resolver, user, namespace, &full_authority()).is_err() {
        return Err(forbidden(
            "must have cluster-admin privileges to use the aggregationRule".to_owned(),
        ));
    }
    Ok(())
}

/// Whether `user` may write the RoleBinding or ClusterRoleBinding `object` (`kind` says which)
/// in `namespace` (empty for a ClusterRoleBinding), as upstream's RBAC registry checks a create
/// (`old` is `None`) or an update from `old`: allowed to `system:masters`, to updates changing
/// only garbage-collection fields, to holders of `bind` on the referenced role, and to users
/// who already hold all the role's rules.
pub fn check_binding_write(
    authorizer: &dyn Authorizer,
    resolver: &dyn RuleResolver,
    user: &UserInfo,
    kind: Kind,
    namespace: &str,
    object: &Value,
    old: Option<&Value>,
) -> Result<(), EscalationError> {
    let binding =
        crate::policy::decode_binding_unnamed(kind, object).map_err(|e| EscalationError {
            resource: kind.resource(),
            name: String::new(),
            reason: e.to_string(),
        })?;
    if escalation_allowed(user)
        || old.is_some_and(|old| is_only_mutating_gc_fields(old, object))
        || binding_authorized(authorizer, user, &binding.role_ref, namespace)
    {
        return Ok(());
    }
    let forbidden = |reason: String| EscalationError {
        resource: kind.resource(),
        name: binding.name.clone(),
        reason,
    };
    let rules = resolver
        .role_reference_rules(&binding.role_ref, namespace)
        .map_err(forbidden)?;
    confirm_no_escalation(resolver, user, namespace, &rules).map_err(forbidden)
}

/// Whether an update from `old` to `new` changes only what the garbage collector changes
/// (owner references and finalizers; also selfLink and managedFields), upstream's
/// `IsOnlyMutatingGCFields`: such updates skip the escalation checks.
pub fn is_only_mutating_gc_fields(old: &Value, new: &Value) -> bool {
    const GC_FIELDS: [&str; 4] = ["ownerReferences", "finalizers", "selfLink", "managedFields"];
    fn strip(object: &Value) -> Value {
        let mut copy = object.clone();
        if let Some(meta) = copy.get_mut("metadata").and_then(Value::as_object_mut) {
            for field in GC_FIELDS {
                meta.remove(field);
            }
        }
        copy
    }
    strip(old) == strip(new)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::rbac::RbacAuthorizer;

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> PolicyRule {
        PolicyRule::new(verbs).groups(groups).resources(resources)
    }

    #[test]
    fn breakdown_splits_into_atoms() {
        let r = rule(&["get", "list"], &["", "apps"], &["a"]).names(&["x", "y"]);
        let parts = breakdown_rule(&r);
        assert_eq!(parts.len(), 8);
        assert!(parts.contains(&rule(&["list"], &["apps"], &["a"]).names(&["y"])));
        let urls = breakdown_rule(&PolicyRule::new(&["get", "post"]).urls(&["/a", "/b"]));
        assert_eq!(urls.len(), 4);
        assert!(urls.contains(&PolicyRule::new(&["post"]).urls(&["/b"])));
    }

    #[test]
    fn covers_as_upstream() {
        let owner = [
            rule(&["get", "list"], &[""], &["configmaps", "*/status"]),
            rule(&["*"], &["apps"], &["deployments"]).names(&["web"]),
            PolicyRule::new(&["get"]).urls(&["/apis/*", "/version"]),
        ];
        assert!(covers(&owner, &[rule(&["get"], &[""], &["configmaps"])]).0);
        assert!(covers(&owner, &[rule(&["get"], &[""], &["namespaces/status"])]).0);
        assert!(
            covers(
                &owner,
                &[rule(&["delete"], &["apps"], &["deployments"]).names(&["web"])]
            )
            .0
        );
        // Unnamed is more than named.
        assert!(!covers(&owner, &[rule(&["delete"], &["apps"], &["deployments"])]).0);
        assert!(
            covers(
                &owner,
                &[PolicyRule::new(&["get"]).urls(&["/apis/apps", "/version"])]
            )
            .0
        );
        assert!(!covers(&owner, &[PolicyRule::new(&["get"]).urls(&["/api"])]).0);
        let (ok, missing) = covers(
            &owner,
            &[rule(&["get", "watch"], &[""], &["configmaps", "secrets"])],
        );
        assert!(!ok);
        assert_eq!(
            missing,
            [
                rule(&["watch"], &[""], &["configmaps"]),
                rule(&["get"], &[""], &["secrets"]),
                rule(&["watch"], &[""], &["secrets"]),
            ]
        );
        // Stars cover everything; `*` as a wanted resource is only covered by `*`.
        let admin = [
            rule(&["*"], &["*"], &["*"]),
            PolicyRule::new(&["*"]).urls(&["*"]),
        ];
        assert!(covers(&admin, &full_authority()).0);
        assert!(!covers(&owner, &[rule(&["get"], &[""], &["*"])]).0);
    }

    #[test]
    fn compact_strings_match_upstream() {
        let r = PolicyRule {
            verbs: vec!["get".into(), "list".into()],
            api_groups: vec!["".into()],
            resources: vec!["secrets".into()],
            resource_names: vec!["a".into()],
            non_resource_urls: vec![],
        };
        assert_eq!(
            compact_string(&r),
            r#"{APIGroups:[""], Resources:["secrets"], ResourceNames:["a"], Verbs:["get" "list"]}"#
        );
        assert_eq!(
            compact_string(&PolicyRule::new(&["get"]).urls(&["/x"])),
            r#"{NonResourceURLs:["/x"], Verbs:["get"]}"#
        );
        let compacted = compact_rules(&[
            rule(&["get"], &[""], &["secrets"]),
            rule(&["list"], &[""], &["secrets"]),
            rule(&["get"], &[""], &["secrets"]).names(&["x"]),
            PolicyRule::new(&["get"]).urls(&["/x"]),
        ]);
        assert_eq!(compacted.len(), 3);
        assert!(compacted.contains(&rule(&["get", "list"], &[""], &["secrets"])));
    }

    fn policy() -> RbacAuthorizer {
        let objects = [
            (
                Kind::ClusterRole,
                json!({"metadata": {"name": "reader"}, "rules": [
                {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"]}]}),
            ),
            (
                Kind::ClusterRole,
                json!({"metadata": {"name": "secret-reader"}, "rules": [
                {"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]}]}),
            ),
            (
                Kind::ClusterRole,
                json!({"metadata": {"name": "binder"}, "rules": [
                {"verbs": ["bind"], "apiGroups": [GROUP], "resources": ["clusterroles"],
                 "resourceNames": ["secret-reader"]}]}),
            ),
            (
                Kind::ClusterRole,
                json!({"metadata": {"name": "escalator"}, "rules": [
                {"verbs": ["escalate"], "apiGroups": [GROUP], "resources": ["roles"]}]}),
            ),
            (
                Kind::RoleBinding,
                json!({"metadata": {"name": "bob-reads", "namespace": "a"},
                "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "reader"},
                "subjects": [{"kind": "User", "apiGroup": GROUP, "name": "bob"}]}),
            ),
            (
                Kind::RoleBinding,
                json!({"metadata": {"name": "carol-binds", "namespace": "a"},
                "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "binder"},
                "subjects": [{"kind": "User", "apiGroup": GROUP, "name": "carol"}]}),
            ),
            (
                Kind::RoleBinding,
                json!({"metadata": {"name": "dave-escalates", "namespace": "a"},
                "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "escalator"},
                "subjects": [{"kind": "User", "apiGroup": GROUP, "name": "dave"}]}),
            ),
        ];
        RbacAuthorizer::from_objects(objects.iter().map(|(k, v)| (*k, v))).unwrap()
    }

    fn role_with(rules: Value) -> Value {
        json!({"metadata": {"name": "r", "namespace": "a"}, "rules": rules})
    }

    #[test]
    fn a_role_cannot_grant_more_than_its_author_holds() {
        let p = policy();
        let bob = UserInfo::authenticated("bob", vec![]);
        let within =
            role_with(json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]}]));
        assert!(check_role_write(&p, &p, &bob, Kind::Role, "a", &within, None).is_ok());
        // Not in another namespace, where bob holds nothing.
        assert!(check_role_write(&p, &p, &bob, Kind::Role, "b", &within, None).is_err());
        let beyond = role_with(json!([
            {"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["configmaps", "secrets"]}]));
        let err = check_role_write(&p, &p, &bob, Kind::Role, "a", &beyond, None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "roles.rbac.authorization.k8s.io \"r\" is forbidden: user \"bob\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n\
             {APIGroups:[\"\"], Resources:[\"configmaps\"], Verbs:[\"watch\"]}\n\
             {APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"list\" \"watch\"]}"
        );
        // escalate on roles, or system:masters, lifts the check.
        let dave = UserInfo::authenticated("dave", vec![]);
        assert!(check_role_write(&p, &p, &dave, Kind::Role, "a", &beyond, None).is_ok());
        assert!(check_role_write(&p, &p, &dave, Kind::Role, "b", &beyond, None).is_err());
        let root = UserInfo::authenticated("root", vec![SYSTEM_MASTERS.into()]);
        assert!(check_role_write(&p, &p, &root, Kind::Role, "b", &beyond, None).is_ok());
    }

    #[test]
    fn aggregation_rules_need_full_authority() {
        let p = policy();
        let bob = UserInfo::authenticated("bob", vec![]);
        let aggregated = json!({"metadata": {"name": "agg"}, "rules": [],
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "true"}}]}});
        let err =
            check_role_write(&p, &p, &bob, Kind::ClusterRole, "", &aggregated, None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "clusterroles.rbac.authorization.k8s.io \"agg\" is forbidden: must have cluster-admin privileges to use the aggregationRule"
        );
    }

    #[test]
    fn binding_needs_bind_or_the_rights() {
        let p = policy();
        let binding = |role: &str| {
            json!({"metadata": {"name": "give", "namespace": "a"},
                "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": role},
                "subjects": [{"kind": "User", "apiGroup": GROUP, "name": "eve"}]})
        };
        let check = |user: &str, ns: &str, role: &str| {
            let user = UserInfo::authenticated(user, vec![]);
            check_binding_write(&p, &p, &user, Kind::RoleBinding, ns, &binding(role), None)
        };
        // bob holds reader's rules in a.
        assert!(check("bob", "a", "reader").is_ok());
        let err = check("bob", "a", "secret-reader").unwrap_err();
        assert_eq!(
            err.to_string(),
            "rolebindings.rbac.authorization.k8s.io \"give\" is forbidden: user \"bob\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n\
             {APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\"]}"
        );
        // carol may bind secret-reader (only) in a.
        assert!(check("carol", "a", "secret-reader").is_ok());
        assert!(check("carol", "a", "reader").is_err());
        assert!(check("carol", "b", "secret-reader").is_err());
        // A missing role is forbidden with the lookup error.
        let err = check("bob", "a", "nope").unwrap_err();
        assert_eq!(
            err.reason,
            "clusterrole.rbac.authorization.k8s.io \"nope\" not found"
        );
        // An update touching only finalizers passes; one changing the subjects does not.
        let eve = UserInfo::authenticated("eve", vec![]);
        let old = binding("secret-reader");
        let mut gc_only = old.clone();
        gc_only["metadata"]["finalizers"] = json!(["x"]);
        assert!(
            check_binding_write(&p, &p, &eve, Kind::RoleBinding, "a", &gc_only, Some(&old)).is_ok()
        );
        let mut more = old.clone();
        more["subjects"][0]["name"] = json!("mallory");
        assert!(
            check_binding_write(&p, &p, &eve, Kind::RoleBinding, "a", &more, Some(&old)).is_err()
        );
    }

    #[test]
    fn role_updates_are_checked_against_old_and_new() {
        let p = policy();
        let bob = UserInfo::authenticated("bob", vec![]);
        // Dropping the aggregation rule of a role needs full authority too.
        let old = json!({"metadata": {"name": "agg"}, "rules": [],
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "true"}}]}});
        let new = json!({"metadata": {"name": "agg"}, "rules": []});
        let err =
            check_role_write(&p, &p, &bob, Kind::ClusterRole, "", &new, Some(&old)).unwrap_err();
        assert_eq!(
            err.reason,
            "must have cluster-admin privileges to use the aggregationRule"
        );
        // A create with generateName has no name yet: checked all the same.
        let unnamed = json!({"metadata": {"generateName": "r-"}, "rules": [
            {"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]}]});
        let err =
            check_role_write(&p, &p, &bob, Kind::ClusterRole, "", &unnamed, None).unwrap_err();
        assert_eq!(err.name, "");
        assert!(
            err.to_string()
                .starts_with("clusterroles.rbac.authorization.k8s.io is forbidden: user \"bob\""),
            "{err}"
        );
        // An empty selector list is no aggregation rule.
        let empty = json!({"metadata": {"name": "agg"}, "rules": [],
            "aggregationRule": {"clusterRoleSelectors": []}});
        assert!(check_role_write(&p, &p, &bob, Kind::ClusterRole, "", &empty, None).is_ok());
        // Only finalizers change: no check.
        let mut gc_only = old.clone();
        gc_only["metadata"]["finalizers"] = json!(["x"]);
        assert!(
            check_role_write(&p, &p, &bob, Kind::ClusterRole, "", &gc_only, Some(&old)).is_ok()
        );
    }

    #[test]
    fn gc_only_updates_are_recognized() {
        let old = json!({"metadata": {"name": "r", "resourceVersion": "1"}, "rules": []});
        let mut new = old.clone();
        new["metadata"]["finalizers"] = json!(["x"]);
        new["metadata"]["ownerReferences"] = json!([{"name": "o"}]);
        assert!(is_only_mutating_gc_fields(&old, &new));
        new["rules"] = json!([{"verbs": ["get"]}]);
        assert!(!is_only_mutating_gc_fields(&old, &new));
    }
}
