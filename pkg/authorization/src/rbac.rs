//! The RBAC authorizer, as upstream's `rbac` authorizer and its default rule resolver.
//!
//! [`RbacAuthorizer`] holds a snapshot of the Roles, ClusterRoles, RoleBindings and
//! ClusterRoleBindings, fed by the apiserver from watch events ([`RbacAuthorizer::apply`],
//! [`RbacAuthorizer::remove`], [`RbacAuthorizer::replace_all`] after a relist). Bindings are
//! indexed by subject (user name, service-account user name, group), so a request only looks at
//! the bindings naming its user or one of its groups. Readers take a read lock just long
//! enough to clone an `Arc` of the snapshot; a writer builds the next snapshot outside the lock
//! and swaps it in; snapshots share their unchanged parts, so an event copies little.
//!
//! Decisions are upstream's: the ClusterRoleBindings apply in every namespace, the RoleBindings
//! of the request's namespace only in it; a RoleBinding may grant a Role of its namespace or a
//! ClusterRole (its rules then hold in that namespace only). An allowing rule gives the reason
//! `RBAC: allowed by ClusterRoleBinding "b" of ClusterRole "r" to Group "g"`; otherwise the
//! decision is no opinion, with the reason `RBAC: <errors>` when a binding names a missing role
//! (for example `RBAC: clusterrole.rbac.authorization.k8s.io "r" not found`) and an empty
//! reason when not.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use serde_json::Value;

use crate::policy::{
    BindingParts, Kind, PolicyError, PolicyRule, RoleRef, Subject, decode_binding, decode_role,
};
use crate::{
    Attributes, Authorizer, Decision, NonResourceRule, ResourceRule, RulesInfo, UserInfo, aggregate,
};
use genplane_apimachinery::gofmt::{QuotedJoin as Quoted, quote};

/// Resolves the rules a user holds, as upstream's `AuthorizationRuleResolver`; what escalation
/// prevention asks.
pub trait RuleResolver: Send + Sync + fmt::Debug {
    /// The rules `user` holds in `namespace` (empty: cluster-wide ones only), and the errors met
    /// (rules found despite errors are still held).
    fn policy_rules_for(&self, user: &UserInfo, namespace: &str) -> (Vec<PolicyRule>, Vec<String>);

    /// The rules of the role `role_ref` of a binding in `namespace` (empty for a
    /// ClusterRoleBinding), or upstream's error message.
    fn role_reference_rules(
        &self,
        role_ref: &RoleRef,
        namespace: &str,
    ) -> Result<Vec<PolicyRule>, String>;
}

#[derive(Debug)]
struct Binding {
    namespace: String,
    name: String,
    role_ref: RoleRef,
    subjects: Vec<Subject>,
}

impl Binding {
    fn from_parts(parts: BindingParts) -> Self {
        Self {
            namespace: parts.namespace,
            name: parts.name,
            role_ref: parts.role_ref,
            subjects: parts.subjects,
        }
    }

    /// The distinct index keys of this binding: (is a group, name).
    fn keys(&self) -> Vec<(bool, String)> {
        let mut keys: Vec<(bool, String)> = Vec::new();
        for s in &self.subjects {
            let key = if s.kind == "Group" {
                Some((true, s.name.clone()))
            } else {
                s.user_key(&self.namespace).map(|k| (false, k))
            };
            if let Some(key) = key
                && !keys.contains(&key)
            {
                keys.push(key);
            }
        }
        keys
    }
}

/// Where a rule came from, written as upstream describes it in reasons.
#[derive(Debug, Clone, Copy)]
struct Source<'a> {
    binding: &'a Binding,
    subject: &'a Subject,
}

impl fmt::Display for Source<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.binding;
        if b.namespace.is_empty() {
            write!(f, "ClusterRoleBinding {}", Quoted(&[&b.name]))?;
        } else {
            write!(f, "RoleBinding {}", Quoted(&[&b.name, "/", &b.namespace]))?;
        }
        write!(
            f,
            " of {} {} to {} ",
            b.role_ref.kind,
            Quoted(&[&b.role_ref.name]),
            self.subject.kind
        )?;
        let s = self.subject;
        if s.kind == "ServiceAccount" {
            let ns = if s.namespace.is_empty() {
                &b.namespace
            } else {
                &s.namespace
            };
            write!(f, "{}", Quoted(&[&s.name, "/", ns]))
        } else {
            write!(f, "{}", Quoted(&[&s.name]))
        }
    }
}

/// The rules a binding grants, resolved when the binding or its role changes: the role's
/// rules, or upstream's message for a missing role.
type Resolved = Result<Arc<[PolicyRule]>, Arc<str>>;

/// A binding in a subject index, with its role resolved.
#[derive(Clone, Debug)]
struct Entry {
    binding: Arc<Binding>,
    rules: Resolved,
}

/// Bindings by the subjects they name, each list sorted by binding name.
#[derive(Clone, Debug, Default)]
struct SubjectIndex {
    by_user: HashMap<String, Vec<Entry>>,
    by_group: HashMap<String, Vec<Entry>>,
}

impl SubjectIndex {
    fn insert(&mut self, binding: &Arc<Binding>, rules: &Resolved) {
        for (group, key) in binding.keys() {
            let map = if group {
                &mut self.by_group
            } else {
                &mut self.by_user
            };
            let list = map.entry(key).or_default();
            let at = list
                .binary_search_by(|e| e.binding.name.as_str().cmp(&binding.name))
                .unwrap_or_else(|at| at);
            list.insert(
                at,
                Entry {
                    binding: Arc::clone(binding),
                    rules: rules.clone(),
                },
            );
        }
    }

    fn remove(&mut self, binding: &Binding) {
        for (group, key) in binding.keys() {
            let map = if group {
                &mut self.by_group
            } else {
                &mut self.by_user
            };
            if let Some(list) = map.get_mut(&key) {
                list.retain(|e| e.binding.name != binding.name);
                if list.is_empty() {
                    map.remove(&key);
                }
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.by_user.is_empty() && self.by_group.is_empty()
    }

    /// Whether an entry's binding refers to a role of `kind` named `name`.
    fn refers_to(&self, kind: &str, name: &str) -> bool {
        self.by_user
            .values()
            .chain(self.by_group.values())
            .flatten()
            .any(|e| e.binding.role_ref.kind == kind && e.binding.role_ref.name == name)
    }

    /// Re-resolves the entries whose binding refers to a role of `kind` named `name`.
    fn refresh(&mut self, kind: &str, name: &str, rules: &Resolved) {
        for entry in self
            .by_user
            .values_mut()
            .chain(self.by_group.values_mut())
            .flatten()
        {
            let r = &entry.binding.role_ref;
            if r.kind == kind && r.name == name {
                entry.rules = rules.clone();
            }
        }
    }

    /// The bindings naming `user` or one of its groups (a binding may come twice).
    fn matching<'a, 'u>(
        &'a self,
        user: &'u UserInfo,
    ) -> impl Iterator<Item = &'a Entry> + use<'a, 'u> {
        self.by_user
            .get(&user.username)
            .into_iter()
            .flatten()
            .chain(
                user.groups
                    .iter()
                    .filter_map(|g| self.by_group.get(g))
                    .flatten(),
            )
    }

    /// The bindings naming `user` or one of its groups, by binding name, each once.
    fn candidates<'a>(&'a self, user: &UserInfo, out: &mut Vec<&'a Entry>) {
        let start = out.len();
        out.extend(self.matching(user));
        let found = &mut out[start..];
        if found.len() > 1 {
            found.sort_unstable_by(|a, b| a.binding.name.cmp(&b.binding.name));
        }
        let mut kept = start;
        for i in start..out.len() {
            if i == start || !Arc::ptr_eq(&out[i].binding, &out[kept - 1].binding) {
                out[kept] = out[i];
                kept += 1;
            }
        }
        out.truncate(kept);
    }
}

/// Role rules by role name.
type RulesByName = HashMap<String, Arc<[PolicyRule]>>;

/// The policy: every role and binding, and the subject indexes. The parts are shared between
/// snapshots: a copy of the policy copies only the per-namespace maps of pointers, and a change
/// copies only the parts it touches.
#[derive(Clone, Debug, Default)]
struct Policy {
    roles: HashMap<String, Arc<RulesByName>>,
    cluster_roles: Arc<RulesByName>,
    role_bindings: HashMap<String, Arc<HashMap<String, Arc<Binding>>>>,
    cluster_role_bindings: Arc<HashMap<String, Arc<Binding>>>,
    cluster_index: Arc<SubjectIndex>,
    namespace_index: HashMap<String, Arc<SubjectIndex>>,
}

enum Visit<'a> {
    Rule(Source<'a>, &'a PolicyRule),
    Error(&'a str),
}

impl Policy {
    fn apply(&mut self, kind: Kind, object: &Value) -> Result<(), PolicyError> {
        match kind {
            Kind::Role | Kind::ClusterRole => {
                let role = decode_role(kind, object)?;
                let rules: Arc<[PolicyRule]> = role.rules.into();
                self.refresh(kind, &role.namespace, &role.name, &Ok(Arc::clone(&rules)));
                if kind == Kind::Role {
                    Arc::make_mut(self.roles.entry(role.namespace).or_default())
                        .insert(role.name, rules);
                } else {
                    Arc::make_mut(&mut self.cluster_roles).insert(role.name, rules);
                }
            }
            Kind::RoleBinding | Kind::ClusterRoleBinding => {
                let mut parts = decode_binding(kind, object)?;
                if kind == Kind::ClusterRoleBinding {
                    parts.namespace.clear();
                }
                let binding = Arc::new(Binding::from_parts(parts));
                self.remove(kind, &binding.namespace, &binding.name);
                let rules: Resolved = self
                    .role_rules(&binding.role_ref, &binding.namespace)
                    .map(Arc::clone)
                    .map_err(Arc::from);
                if kind == Kind::ClusterRoleBinding {
                    Arc::make_mut(&mut self.cluster_index).insert(&binding, &rules);
                    Arc::make_mut(&mut self.cluster_role_bindings)
                        .insert(binding.name.clone(), binding);
                } else {
                    let ns = binding.namespace.clone();
                    Arc::make_mut(self.namespace_index.entry(ns.clone()).or_default())
                        .insert(&binding, &rules);
                    Arc::make_mut(self.role_bindings.entry(ns).or_default())
                        .insert(binding.name.clone(), binding);
                }
            }
        }
        Ok(())
    }

    /// Points the bindings of the role `kind` `namespace/name` at its new `rules`.
    fn refresh(&mut self, kind: Kind, namespace: &str, name: &str, rules: &Resolved) {
        fn one(index: &mut Arc<SubjectIndex>, kind: &str, name: &str, rules: &Resolved) {
            if index.refers_to(kind, name) {
                Arc::make_mut(index).refresh(kind, name, rules);
            }
        }
        if kind == Kind::Role {
            if let Some(index) = self.namespace_index.get_mut(namespace) {
                one(index, "Role", name, rules);
            }
        } else {
            one(&mut self.cluster_index, "ClusterRole", name, rules);
            for index in self.namespace_index.values_mut() {
                one(index, "ClusterRole", name, rules);
            }
        }
    }

    fn remove(&mut self, kind: Kind, namespace: &str, name: &str) -> bool {
        match kind {
            Kind::Role => {
                let Some(roles) = self.roles.get_mut(namespace) else {
                    return false;
                };
                if !roles.contains_key(name) {
                    return false;
                }
                Arc::make_mut(roles).remove(name);
                if roles.is_empty() {
                    self.roles.remove(namespace);
                }
                self.refresh(kind, namespace, name, &Err(not_found("role", name).into()));
                true
            }
            Kind::ClusterRole => {
                if !self.cluster_roles.contains_key(name) {
                    return false;
                }
                Arc::make_mut(&mut self.cluster_roles).remove(name);
                let missing = Err(not_found("clusterrole", name).into());
                self.refresh(kind, "", name, &missing);
                true
            }
            Kind::ClusterRoleBinding => {
                if !self.cluster_role_bindings.contains_key(name) {
                    return false;
                }
                if let Some(old) = Arc::make_mut(&mut self.cluster_role_bindings).remove(name) {
                    Arc::make_mut(&mut self.cluster_index).remove(&old);
                }
                true
            }
            Kind::RoleBinding => {
                let Some(bindings) = self.role_bindings.get_mut(namespace) else {
                    return false;
                };
                if !bindings.contains_key(name) {
                    return false;
                }
                let Some(old) = Arc::make_mut(bindings).remove(name) else {
                    return false;
                };
                if bindings.is_empty() {
                    self.role_bindings.remove(namespace);
                }
                if let Some(index) = self.namespace_index.get_mut(namespace) {
                    Arc::make_mut(index).remove(&old);
                    if index.is_empty() {
                        self.namespace_index.remove(namespace);
                    }
                }
                true
            }
        }
    }

    fn role_rules(
        &self,
        role_ref: &RoleRef,
        namespace: &str,
    ) -> Result<&Arc<[PolicyRule]>, String> {
        match role_ref.kind.as_str() {
            "Role" => self
                .roles
                .get(namespace)
                .and_then(|roles| roles.get(&role_ref.name))
                .ok_or_else(|| not_found("role", &role_ref.name)),
            "ClusterRole" => self
                .cluster_roles
                .get(&role_ref.name)
                .ok_or_else(|| not_found("clusterrole", &role_ref.name)),
            other => Err(format!("unsupported role reference kind: {}", quote(other))),
        }
    }

    /// Visits every rule `user` holds in `namespace`, in upstream's order (cluster bindings,
    /// then the namespace's bindings), until `visitor` returns false. With `once`, each
    /// binding is visited once and in name order; without, a binding naming the user in two
    /// ways may be visited twice (harmless when looking for one allowing rule, and cheaper).
    fn visit<'a>(
        &'a self,
        user: &UserInfo,
        namespace: &str,
        once: bool,
        mut visitor: impl FnMut(Visit<'a>) -> bool,
    ) {
        let namespace_index = if namespace.is_empty() {
            None
        } else {
            self.namespace_index.get(namespace)
        };
        if once {
            let mut candidates: Vec<&'a Entry> = Vec::new();
            self.cluster_index.candidates(user, &mut candidates);
            let cluster_count = candidates.len();
            if let Some(index) = namespace_index {
                index.candidates(user, &mut candidates);
            }
            for (i, entry) in candidates.into_iter().enumerate() {
                let binding_namespace = if i < cluster_count { "" } else { namespace };
                if !visit_entry(entry, user, binding_namespace, &mut visitor) {
                    return;
                }
            }
            return;
        }
        for entry in self.cluster_index.matching(user) {
            if !visit_entry(entry, user, "", &mut visitor) {
                return;
            }
        }
        if let Some(index) = namespace_index {
            for entry in index.matching(user) {
                if !visit_entry(entry, user, namespace, &mut visitor) {
                    return;
                }
            }
        }
    }
}

/// Visits the rules `entry` grants `user` (if its binding names the user); false to stop.
fn visit_entry<'a>(
    entry: &'a Entry,
    user: &UserInfo,
    binding_namespace: &str,
    visitor: &mut impl FnMut(Visit<'a>) -> bool,
) -> bool {
    let binding = &*entry.binding;
    let Some(subject) = binding
        .subjects
        .iter()
        .find(|s| s.applies_to(user, binding_namespace))
    else {
        return true;
    };
    match &entry.rules {
        Ok(rules) => {
            let source = Source { binding, subject };
            rules.iter().all(|rule| visitor(Visit::Rule(source, rule)))
        }
        Err(e) => visitor(Visit::Error(e)),
    }
}

/// Upstream's lister NotFound message for `resource` (the singular used by the listers).
fn not_found(resource: &str, name: &str) -> String {
    format!(
        "{resource}.rbac.authorization.k8s.io {} not found",
        quote(name)
    )
}

/// The RBAC authorizer over an incrementally updated policy snapshot.
///
/// Readers hold the read lock only to clone an `Arc`; a writer builds the next snapshot
/// outside the lock (sharing the parts it does not change with the current one) and swaps it
/// in, so readers never wait for more than the swap. Writers are serialized.
#[derive(Debug, Default)]
pub struct RbacAuthorizer {
    snapshot: RwLock<Arc<Policy>>,
    writer: Mutex<()>,
}

impl RbacAuthorizer {
    /// An authorizer with an empty policy (which allows nothing).
    pub fn new() -> Self {
        Self::default()
    }

    /// An authorizer over `objects` (each of the given kind).
    pub fn from_objects<'a>(
        objects: impl IntoIterator<Item = (Kind, &'a Value)>,
    ) -> Result<Self, PolicyError> {
        let authorizer = Self::new();
        authorizer.replace_all(objects)?;
        Ok(authorizer)
    }

    fn current(&self) -> Arc<Policy> {
        Arc::clone(&self.snapshot.read().unwrap_or_else(PoisonError::into_inner))
    }

    fn update<T>(&self, change: impl FnOnce(&mut Policy) -> T) -> T {
        let _writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let mut next = Policy::clone(&self.current());
        let result = change(&mut next);
        self.swap(next);
        result
    }

    fn swap(&self, next: Policy) {
        let next = Arc::new(next);
        let old = std::mem::replace(
            &mut *self
                .snapshot
                .write()
                .unwrap_or_else(PoisonError::into_inner),
            next,
        );
        // The old snapshot is freed (when no reader holds it) outside the lock.
        drop(old);
    }

    /// Records an added or modified object of `kind` (a watch ADDED or MODIFIED event). A
    /// malformed object changes nothing.
    pub fn apply(&self, kind: Kind, object: &Value) -> Result<(), PolicyError> {
        self.update(|policy| policy.apply(kind, object))
    }

    /// Forgets the object of `kind` named `name` in `namespace` (empty for cluster-scoped
    /// kinds): a watch DELETED event. Whether it was known.
    pub fn remove(&self, kind: Kind, namespace: &str, name: &str) -> bool {
        let namespace = if kind.namespaced() { namespace } else { "" };
        self.update(|policy| policy.remove(kind, namespace, name))
    }

    /// Replaces the whole policy with `objects` (after a list or relist). On a malformed
    /// object the policy is left as it was.
    pub fn replace_all<'a>(
        &self,
        objects: impl IntoIterator<Item = (Kind, &'a Value)>,
    ) -> Result<(), PolicyError> {
        let _writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let mut policy = Policy::default();
        for (kind, object) in objects {
            policy.apply(kind, object)?;
        }
        self.swap(policy);
        Ok(())
    }

    /// How many roles, cluster roles, role bindings and cluster role bindings are known.
    pub fn counts(&self) -> [usize; 4] {
        let p = self.current();
        [
            p.roles.values().map(|r| r.len()).sum(),
            p.cluster_roles.len(),
            p.role_bindings.values().map(|b| b.len()).sum(),
            p.cluster_role_bindings.len(),
        ]
    }
}

impl Authorizer for RbacAuthorizer {
    fn authorize(&self, attributes: &Attributes) -> (Decision, String) {
        let policy = self.current();
        let mut allowed_by: Option<String> = None;
        let mut errors: Vec<String> = Vec::new();
        policy.visit(
            &attributes.user,
            &attributes.namespace,
            false,
            |visit| match visit {
                Visit::Rule(source, rule) => {
                    if rule.allows(attributes) {
                        allowed_by = Some(format!("RBAC: allowed by {source}"));
                        false
                    } else {
                        true
                    }
                }
                Visit::Error(e) => {
                    errors.push(e.to_owned());
                    true
                }
            },
        );
        match allowed_by {
            Some(reason) => (Decision::Allow, reason),
            None if errors.is_empty() => (Decision::NoOpinion, String::new()),
            None => (Decision::NoOpinion, format!("RBAC: {}", aggregate(&errors))),
        }
    }

    fn rules_for(&self, user: &UserInfo, namespace: &str) -> RulesInfo {
        let (rules, errors) = self.policy_rules_for(user, namespace);
        let mut info = RulesInfo {
            evaluation_errors: errors,
            ..RulesInfo::default()
        };
        for rule in rules {
            if !rule.resources.is_empty() {
                info.resource_rules.push(ResourceRule {
                    verbs: rule.verbs.clone(),
                    api_groups: rule.api_groups.clone(),
                    resources: rule.resources.clone(),
                    resource_names: rule.resource_names.clone(),
                });
            }
            if !rule.non_resource_urls.is_empty() {
                info.non_resource_rules.push(NonResourceRule {
                    verbs: rule.verbs,
                    non_resource_urls: rule.non_resource_urls,
                });
            }
        }
        info
    }
}

impl RuleResolver for RbacAuthorizer {
    fn policy_rules_for(&self, user: &UserInfo, namespace: &str) -> (Vec<PolicyRule>, Vec<String>) {
        let policy = self.current();
        let mut rules = Vec::new();
        let mut errors = Vec::new();
        policy.visit(user, namespace, true, |visit| {
            match visit {
                Visit::Rule(_, rule) => rules.push(rule.clone()),
                Visit::Error(e) => errors.push(e.to_owned()),
            }
            true
        });
        (rules, errors)
    }

    fn role_reference_rules(
        &self,
        role_ref: &RoleRef,
        namespace: &str,
    ) -> Result<Vec<PolicyRule>, String> {
        self.current()
            .role_rules(role_ref, namespace)
            .map(|rules| rules.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use serde_json::json;

    use super::*;
    use crate::AlwaysAllow;
    use crate::policy::GROUP;

    fn cluster_role(name: &str, rules: Value) -> Value {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": name}, "rules": rules})
    }

    fn role(ns: &str, name: &str, rules: Value) -> Value {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": name, "namespace": ns}, "rules": rules})
    }

    fn binding(ns: &str, name: &str, kind: &str, role: &str, subjects: Value) -> Value {
        let mut b = json!({"metadata": {"name": name},
            "roleRef": {"apiGroup": GROUP, "kind": kind, "name": role}, "subjects": subjects});
        if !ns.is_empty() {
            b["metadata"]["namespace"] = json!(ns);
        }
        b
    }

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo::authenticated(name, groups.iter().map(|g| (*g).to_owned()).collect())
    }

    fn can(a: &RbacAuthorizer, u: &UserInfo, verb: &str, resource: &str, ns: &str) -> bool {
        let attrs = Attributes::resource(u.clone(), verb, "", resource, ns, "");
        a.authorize(&attrs).0 == Decision::Allow
    }

    fn reader() -> Value {
        json!([{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"]}])
    }

    #[test]
    fn reasons_name_the_binding_role_and_subject_as_upstream() {
        let a = RbacAuthorizer::new();
        a.apply(Kind::ClusterRole, &cluster_role("reader", reader()))
            .unwrap();
        a.apply(
            Kind::ClusterRoleBinding,
            &binding(
                "",
                "readers",
                "ClusterRole",
                "reader",
                json!([{"kind": "Group", "apiGroup": GROUP, "name": "dev"}]),
            ),
        )
        .unwrap();
        a.apply(
            Kind::RoleBinding,
            &binding(
                "a",
                "sa-read",
                "ClusterRole",
                "reader",
                json!([{"kind": "ServiceAccount", "name": "bot"}]),
            ),
        )
        .unwrap();
        let alice = user("alice", &["dev"]);
        let attrs = Attributes::resource(alice, "list", "", "configmaps", "a", "");
        assert_eq!(
            a.authorize(&attrs),
            (
                Decision::Allow,
                "RBAC: allowed by ClusterRoleBinding \"readers\" of ClusterRole \"reader\" to Group \"dev\"".into()
            )
        );
        let bot = user("system:serviceaccount:a:bot", &["system:serviceaccounts"]);
        let attrs = Attributes::resource(bot.clone(), "get", "", "configmaps", "a", "x");
        assert_eq!(
            a.authorize(&attrs).1,
            "RBAC: allowed by RoleBinding \"sa-read/a\" of ClusterRole \"reader\" to ServiceAccount \"bot/a\""
        );
        // The RoleBinding's grant holds in its namespace only.
        assert!(!can(&a, &bot, "get", "configmaps", "b"));
        assert!(!can(&a, &bot, "get", "configmaps", ""));
        let attrs = Attributes::resource(bot, "delete", "", "configmaps", "a", "x");
        assert_eq!(a.authorize(&attrs), (Decision::NoOpinion, String::new()));
    }

    #[test]
    fn missing_roles_are_reported_in_the_reason() {
        let a = RbacAuthorizer::new();
        a.apply(
            Kind::ClusterRoleBinding,
            &binding(
                "",
                "b1",
                "ClusterRole",
                "gone",
                json!([{"kind": "User", "apiGroup": GROUP, "name": "alice"}]),
            ),
        )
        .unwrap();
        a.apply(
            Kind::RoleBinding,
            &binding(
                "a",
                "b2",
                "Role",
                "missing",
                json!([{"kind": "User", "apiGroup": GROUP, "name": "alice"}]),
            ),
        )
        .unwrap();
        let alice = user("alice", &[]);
        let attrs = Attributes::resource(alice.clone(), "get", "", "configmaps", "", "x");
        assert_eq!(
            a.authorize(&attrs),
            (
                Decision::NoOpinion,
                "RBAC: clusterrole.rbac.authorization.k8s.io \"gone\" not found".into()
            )
        );
        let attrs = Attributes::resource(alice.clone(), "get", "", "configmaps", "a", "x");
        assert_eq!(
            a.authorize(&attrs).1,
            "RBAC: [clusterrole.rbac.authorization.k8s.io \"gone\" not found, role.rbac.authorization.k8s.io \"missing\" not found]"
        );
        let rules = a.rules_for(&alice, "a");
        assert!(rules.resource_rules.is_empty());
        assert_eq!(rules.evaluation_errors.len(), 2);
        assert!(!rules.incomplete);
        // The role appearing after its binding takes effect, and its removal too.
        a.apply(Kind::ClusterRole, &cluster_role("gone", reader()))
            .unwrap();
        let attrs = Attributes::resource(alice.clone(), "get", "", "configmaps", "a", "x");
        assert_eq!(a.authorize(&attrs).0, Decision::Allow);
        assert!(a.remove(Kind::ClusterRole, "", "gone"));
        assert_eq!(
            a.authorize(&attrs).1,
            "RBAC: [clusterrole.rbac.authorization.k8s.io \"gone\" not found, role.rbac.authorization.k8s.io \"missing\" not found]"
        );
        a.apply(Kind::Role, &role("a", "missing", reader()))
            .unwrap();
        assert_eq!(
            a.authorize(&attrs).1,
            "RBAC: allowed by RoleBinding \"b2/a\" of Role \"missing\" to User \"alice\""
        );
    }

    #[test]
    fn updates_and_removals_take_effect() {
        let a = RbacAuthorizer::new();
        let alice = user("alice", &[]);
        a.apply(Kind::Role, &role("a", "r", reader())).unwrap();
        let b = binding(
            "a",
            "b",
            "Role",
            "r",
            json!([{"kind": "User", "apiGroup": GROUP, "name": "alice"}]),
        );
        a.apply(Kind::RoleBinding, &b).unwrap();
        assert!(can(&a, &alice, "list", "configmaps", "a"));
        // The role loses the verb.
        a.apply(
            Kind::Role,
            &role(
                "a",
                "r",
                json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]}]),
            ),
        )
        .unwrap();
        assert!(!can(&a, &alice, "list", "configmaps", "a"));
        assert!(can(&a, &alice, "get", "configmaps", "a"));
        // The binding moves to bob: alice's index entry goes.
        let b2 = binding(
            "a",
            "b",
            "Role",
            "r",
            json!([{"kind": "User", "apiGroup": GROUP, "name": "bob"}]),
        );
        a.apply(Kind::RoleBinding, &b2).unwrap();
        assert!(!can(&a, &alice, "get", "configmaps", "a"));
        assert!(can(&a, &user("bob", &[]), "get", "configmaps", "a"));
        assert!(a.remove(Kind::RoleBinding, "a", "b"));
        assert!(!a.remove(Kind::RoleBinding, "a", "b"));
        assert!(!can(&a, &user("bob", &[]), "get", "configmaps", "a"));
        assert_eq!(a.counts(), [1, 0, 0, 0]);
        assert!(a.remove(Kind::Role, "a", "r"));
        assert_eq!(a.counts(), [0, 0, 0, 0]);
        // A role in another namespace is not the binding's role.
        a.apply(Kind::Role, &role("b", "r", reader())).unwrap();
        a.apply(Kind::RoleBinding, &b).unwrap();
        assert!(!can(&a, &alice, "get", "configmaps", "a"));
        a.replace_all([]).unwrap();
        assert_eq!(a.counts(), [0, 0, 0, 0]);
        assert!(a.apply(Kind::Role, &json!({"metadata": {}})).is_err());
    }

    #[test]
    fn a_cluster_binding_to_a_service_account_without_namespace_never_matches() {
        let a = RbacAuthorizer::new();
        a.apply(Kind::ClusterRole, &cluster_role("reader", reader()))
            .unwrap();
        a.apply(
            Kind::ClusterRoleBinding,
            &binding(
                "",
                "b",
                "ClusterRole",
                "reader",
                json!([{"kind": "ServiceAccount", "name": "bot"}]),
            ),
        )
        .unwrap();
        let bot = user("system:serviceaccount:a:bot", &[]);
        assert!(!can(&a, &bot, "get", "configmaps", "a"));
        a.apply(
            Kind::ClusterRoleBinding,
            &binding(
                "",
                "b",
                "ClusterRole",
                "reader",
                json!([{"kind": "ServiceAccount", "name": "bot", "namespace": "a"}]),
            ),
        )
        .unwrap();
        assert!(can(&a, &bot, "get", "configmaps", "b"));
        assert!(!can(
            &a,
            &user("system:serviceaccount:b:bot", &[]),
            "get",
            "configmaps",
            "b"
        ));
    }

    #[test]
    fn readers_see_whole_updates_while_a_writer_applies_events() {
        let a = Arc::new(RbacAuthorizer::new());
        a.apply(Kind::ClusterRole, &cluster_role("reader", reader()))
            .unwrap();
        let writer = {
            let a = Arc::clone(&a);
            std::thread::spawn(move || {
                for i in 0..200 {
                    let b = binding(
                        &format!("ns{}", i % 4),
                        &format!("b{i}"),
                        "ClusterRole",
                        "reader",
                        json!([{"kind": "User", "apiGroup": GROUP, "name": format!("u{i}")}]),
                    );
                    a.apply(Kind::RoleBinding, &b).unwrap();
                }
            })
        };
        // Meanwhile a reader keeps deciding; once u199 may read, so may every earlier user.
        loop {
            let done = can(&a, &user("u199", &[]), "get", "configmaps", "ns3");
            if done {
                break;
            }
            std::thread::yield_now();
        }
        writer.join().unwrap();
        for i in 0..200 {
            assert!(can(
                &a,
                &user(&format!("u{i}"), &[]),
                "get",
                "configmaps",
                &format!("ns{}", i % 4)
            ));
        }
        assert_eq!(a.counts(), [0, 1, 200, 0]);
    }

    #[test]
    fn rules_for_splits_resource_and_non_resource_rules() {
        let a = RbacAuthorizer::new();
        a.apply(
            Kind::ClusterRole,
            &cluster_role("mixed", json!([
                {"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["x"]},
                {"verbs": ["get"], "nonResourceURLs": ["/healthz"]}])),
        )
        .unwrap();
        a.apply(
            Kind::ClusterRoleBinding,
            &binding(
                "",
                "b",
                "ClusterRole",
                "mixed",
                json!([{"kind": "User", "apiGroup": GROUP, "name": "alice"}]),
            ),
        )
        .unwrap();
        let rules = a.rules_for(&user("alice", &[]), "a");
        assert_eq!(
            rules.resource_rules,
            [ResourceRule {
                verbs: vec!["get".into()],
                api_groups: vec!["".into()],
                resources: vec!["configmaps".into()],
                resource_names: vec!["x".into()],
            }]
        );
        assert_eq!(rules.non_resource_rules[0].non_resource_urls, ["/healthz"]);
        assert!(
            a.rules_for(&user("bob", &[]), "a")
                .resource_rules
                .is_empty()
        );
    }

    /// 1,000 RoleBindings (each naming a user and one of 50 groups) plus the bootstrap policy;
    /// times one watch event, and authorize() of a GET by one of the users (allowed) and of a
    /// delete (no opinion, after every binding of the user's group) against AlwaysAllow. Run
    /// optimized with `cargo nextest run -p genplane-authorization --run-ignored only bench_
    /// --no-capture --config 'profile.dev.package.genplane-authorization.opt-level=3'`.
    #[test]
    #[ignore = "a micro benchmark: prints ns/op"]
    fn bench_authorize_with_1000_bindings() {
        let mut objects: Vec<(Kind, Value)> = crate::bootstrap::objects();
        objects.push((Kind::ClusterRole, cluster_role("reader", reader())));
        for i in 0..1000 {
            let ns = format!("ns{}", i % 10);
            objects.push((
                Kind::RoleBinding,
                binding(&ns, &format!("b{i}"), "ClusterRole", "reader",
                    json!([{"kind": "User", "apiGroup": GROUP, "name": format!("user-{i}")},
                           {"kind": "Group", "apiGroup": GROUP, "name": format!("team-{}", i % 50)}])),
            ));
        }
        let rbac = RbacAuthorizer::from_objects(objects.iter().map(|(k, v)| (*k, v))).unwrap();
        let attrs = Attributes::resource(
            user("user-517", &["team-17"]),
            "get",
            "",
            "configmaps",
            "ns7",
            "x",
        );
        let denied = Attributes::resource(
            user("user-517", &["team-17"]),
            "delete",
            "",
            "configmaps",
            "ns7",
            "x",
        );
        assert_eq!(rbac.authorize(&attrs).0, Decision::Allow);
        let time = |a: &dyn Authorizer, attrs: &Attributes| {
            let n = 200_000u32;
            let start = Instant::now();
            for _ in 0..n {
                std::hint::black_box(a.authorize(std::hint::black_box(attrs)));
            }
            start.elapsed().as_nanos() as f64 / f64::from(n)
        };
        let event = binding(
            "ns1",
            "extra",
            "ClusterRole",
            "reader",
            json!([{"kind": "User", "apiGroup": GROUP, "name": "late"}]),
        );
        let start = Instant::now();
        for _ in 0..100 {
            rbac.apply(Kind::RoleBinding, &event).unwrap();
        }
        println!(
            "apply of one RoleBinding event: {} µs/op (1,000 bindings)",
            start.elapsed().as_micros() / 100
        );
        for round in 0..3 {
            let allow = time(&AlwaysAllow, &attrs);
            let rbac_allow = time(&rbac, &attrs);
            let rbac_deny = time(&rbac, &denied);
            println!(
                "round {round}: AlwaysAllow {allow:.0} ns/op, RBAC allow {rbac_allow:.0} ns/op, RBAC no-opinion {rbac_deny:.0} ns/op (1,000 bindings)"
            );
        }
    }
}
