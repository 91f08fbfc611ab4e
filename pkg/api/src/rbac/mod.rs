//! rbac.authorization.k8s.io/v1 resources: [`role`], [`clusterrole`], [`rolebinding`],
//! [`clusterrolebinding`]. Storage only: evaluating the rules is the authorizer's job.
//!
//! What the four kinds share lives here: the schemas of `PolicyRule`, `Subject`, `RoleRef`,
//! `AggregationRule` and `metav1.LabelSelector` (protobuf numbers from upstream's
//! `generated.proto`), upstream's defaulting of bindings, and the rules of upstream's
//! `pkg/apis/rbac/validation` (Kubernetes 1.33):
//!
//! - names (and `generateName`) only have to be valid path segments (`ValidateRBACName`): not
//!   `.` or `..`, no `/` or `%`;
//! - every policy rule has verbs; a rule with `nonResourceURLs` may not name API groups,
//!   resources or resource names, and is not allowed in a (namespaced) Role; a rule without
//!   them needs at least one API group and one resource;
//! - a ClusterRole's `aggregationRule`, when present, has at least one selector, and each is a
//!   valid label selector;
//! - a binding's `roleRef` names a `Role` or `ClusterRole` (a ClusterRoleBinding only a
//!   `ClusterRole`) of group `rbac.authorization.k8s.io` with a valid name, and never changes;
//! - a subject is a `ServiceAccount` (a DNS-1123 subdomain name, API group `""`, and in a
//!   ClusterRoleBinding a namespace), a `User` or a `Group` (API group
//!   `rbac.authorization.k8s.io`), always with a name.
//!
//! On update upstream's strategies run the create validation and then the update validation,
//! which starts with the create validation again: every error of the new object is reported
//! twice, as kube-apiserver 1.33 reports it (its message lists each once).
//!
//! Go renders list and struct values in messages with `%#v` (`[]string{"/*"}`,
//! `rbac.RoleRef{...}`); here they are shown as JSON.

pub mod clusterrole;
pub mod clusterrolebinding;
pub mod role;
pub mod rolebinding;

use std::collections::BTreeMap;

use genplane_apimachinery::codec::decode;
use genplane_apimachinery::codec::schema::{Field, Struct, Type};
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::labels;
use genplane_apimachinery::meta::schemas::LABEL_SELECTOR;
use genplane_apimachinery::meta::{ObjectMeta, validate_object_meta, validate_object_meta_update};
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use genplane_apimachinery::validation::{
    is_qualified_name, is_valid_label_value, is_valid_path_segment_name, name_is_dns_subdomain,
    validate_labels,
};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::table::{self, ColumnDefinition};
use crate::util;

/// The API group.
pub const GROUP_NAME: &str = "rbac.authorization.k8s.io";
/// The API version of every kind here.
pub const API_VERSION: &str = "rbac.authorization.k8s.io/v1";
/// The subject kind of service accounts.
pub const SERVICE_ACCOUNT_KIND: &str = "ServiceAccount";
/// The subject kind of users.
pub const USER_KIND: &str = "User";
/// The subject kind of groups.
pub const GROUP_KIND: &str = "Group";

/// `rbac/v1.PolicyRule`.
pub static POLICY_RULE: Struct = Struct {
    name: "PolicyRule",
    fields: &[
        Field::new("verbs", 1, Type::List(&Type::String)).keep_empty(),
        Field::new("apiGroups", 2, Type::List(&Type::String)),
        Field::new("resources", 3, Type::List(&Type::String)),
        Field::new("resourceNames", 4, Type::List(&Type::String)),
        Field::new("nonResourceURLs", 5, Type::List(&Type::String)),
    ],
};

/// `rbac/v1.Subject`.
pub static SUBJECT: Struct = Struct {
    name: "Subject",
    fields: &[
        Field::new("kind", 1, Type::String),
        Field::new("apiGroup", 2, Type::String),
        Field::new("name", 3, Type::String),
        Field::new("namespace", 4, Type::String),
    ],
};

/// `rbac/v1.RoleRef`.
pub static ROLE_REF: Struct = Struct {
    name: "RoleRef",
    fields: &[
        Field::new("apiGroup", 1, Type::String),
        Field::new("kind", 2, Type::String),
        Field::new("name", 3, Type::String),
    ],
};

/// `rbac/v1.AggregationRule`.
pub static AGGREGATION_RULE: Struct = Struct {
    name: "AggregationRule",
    fields: &[Field::new(
        "clusterRoleSelectors",
        1,
        Type::List(&Type::Struct(&LABEL_SELECTOR)),
    )],
};

/// A policy rule, as validation reads it.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct PolicyRule {
    verbs: Vec<String>,
    api_groups: Vec<String>,
    resources: Vec<String>,
    resource_names: Vec<String>,
    #[serde(rename = "nonResourceURLs")]
    non_resource_urls: Vec<String>,
}

/// A subject, as validation reads it.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Subject {
    kind: String,
    api_group: String,
    name: String,
    namespace: String,
}

/// A role reference, as validation reads it.
#[derive(Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct RoleRef {
    api_group: String,
    kind: String,
    name: String,
}

impl RoleRef {
    fn to_json(&self) -> Value {
        json!({"apiGroup": self.api_group, "kind": self.kind, "name": self.name})
    }
}

/// A label selector, as validation reads it (missing fields read as empty, as in Go).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LabelSelector {
    match_labels: BTreeMap<String, String>,
    match_expressions: Vec<LabelSelectorRequirement>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
struct LabelSelectorRequirement {
    key: String,
    operator: String,
    values: Vec<String>,
}

impl LabelSelector {
    /// The selector as objects carry it (to match labels with, once validated).
    pub fn to_apimachinery(&self) -> labels::LabelSelector {
        labels::LabelSelector {
            match_labels: self.match_labels.clone(),
            match_expressions: self
                .match_expressions
                .iter()
                .map(|e| labels::LabelSelectorRequirement {
                    key: e.key.clone(),
                    operator: e.operator.clone(),
                    values: e.values.clone(),
                })
                .collect(),
        }
    }
}

/// Upstream's `ValidateRBACName`: a name (or `generateName` prefix, checked the same way) only
/// has to be a valid path segment.
pub fn validate_rbac_name(name: &str, _prefix: bool) -> Vec<String> {
    is_valid_path_segment_name(name)
}

fn strings(values: &[String]) -> Value {
    Value::from(values.to_vec())
}

/// Upstream's `ValidatePolicyRule`: `namespaced` for a Role's rules.
pub(crate) fn validate_policy_rule(rule: &PolicyRule, namespaced: bool, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    if rule.verbs.is_empty() {
        errors.push(Error::required(
            &path.child("verbs"),
            "verbs must contain at least one value",
        ));
    }
    if !rule.non_resource_urls.is_empty() {
        let at = path.child("nonResourceURLs");
        if namespaced {
            errors.push(Error::invalid(
                &at,
                strings(&rule.non_resource_urls),
                "namespaced rules cannot apply to non-resource URLs",
            ));
        }
        if !rule.api_groups.is_empty()
            || !rule.resources.is_empty()
            || !rule.resource_names.is_empty()
        {
            errors.push(Error::invalid(
                &at,
                strings(&rule.non_resource_urls),
                "rules cannot apply to both regular resources and non-resource URLs",
            ));
        }
        return errors;
    }
    if rule.api_groups.is_empty() {
        errors.push(Error::required(
            &path.child("apiGroups"),
            "resource rules must supply at least one api group",
        ));
    }
    if rule.resources.is_empty() {
        errors.push(Error::required(
            &path.child("resources"),
            "resource rules must supply at least one resource",
        ));
    }
    errors
}

/// Every rule of `rules` (at `rules[i]`).
pub(crate) fn validate_rules(rules: &[PolicyRule], namespaced: bool) -> ErrorList {
    let mut errors = ErrorList::new();
    for (i, rule) in rules.iter().enumerate() {
        errors.extend(validate_policy_rule(
            rule,
            namespaced,
            &Path::new("rules").index(i),
        ));
    }
    errors
}

/// Upstream's `ValidateLabelSelector` (metav1 validation) of one selector.
pub(crate) fn validate_label_selector(
    selector: &LabelSelector,
    allow_invalid_label_values: bool,
    path: &Path,
) -> ErrorList {
    let mut errors = validate_labels(&selector.match_labels, &path.child("matchLabels"));
    for (i, requirement) in selector.match_expressions.iter().enumerate() {
        let at = path.child("matchExpressions").index(i);
        match requirement.operator.as_str() {
            labels::LabelSelectorRequirement::IN | labels::LabelSelectorRequirement::NOT_IN => {
                if requirement.values.is_empty() {
                    errors.push(Error::required(
                        &at.child("values"),
                        "must be specified when `operator` is 'In' or 'NotIn'",
                    ));
                }
            }
            labels::LabelSelectorRequirement::EXISTS
            | labels::LabelSelectorRequirement::DOES_NOT_EXIST => {
                if !requirement.values.is_empty() {
                    errors.push(Error::forbidden(
                        &at.child("values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    ));
                }
            }
            other => errors.push(Error::invalid(
                &at.child("operator"),
                other,
                "not a valid selector operator",
            )),
        }
        for message in is_qualified_name(&requirement.key) {
            errors.push(Error::invalid(
                &at.child("key"),
                requirement.key.as_str(),
                message,
            ));
        }
        if !allow_invalid_label_values {
            for (j, value) in requirement.values.iter().enumerate() {
                for message in is_valid_label_value(value) {
                    errors.push(Error::invalid(
                        &at.child("values").index(j),
                        value.as_str(),
                        message,
                    ));
                }
            }
        }
    }
    errors
}

/// Upstream's checks of a binding's `roleRef`: `kinds` are the kinds it may name.
pub(crate) fn validate_role_ref(role_ref: &RoleRef, kinds: &[&str]) -> ErrorList {
    let path = Path::new("roleRef");
    let mut errors = ErrorList::new();
    if role_ref.api_group != GROUP_NAME {
        errors.push(Error::not_supported(
            &path.child("apiGroup"),
            role_ref.api_group.as_str(),
            &[GROUP_NAME],
        ));
    }
    if !kinds.contains(&role_ref.kind.as_str()) {
        errors.push(Error::not_supported(
            &path.child("kind"),
            role_ref.kind.as_str(),
            kinds,
        ));
    }
    if role_ref.name.is_empty() {
        errors.push(Error::required(&path.child("name"), ""));
    } else {
        for message in validate_rbac_name(&role_ref.name, false) {
            errors.push(Error::invalid(
                &path.child("name"),
                role_ref.name.as_str(),
                message,
            ));
        }
    }
    errors
}

/// Upstream's `ValidateRoleBindingSubject`: `namespaced` for a RoleBinding's subjects (a
/// ServiceAccount subject without a namespace is then in the binding's namespace).
pub(crate) fn validate_subject(subject: &Subject, namespaced: bool, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    if subject.name.is_empty() {
        errors.push(Error::required(&path.child("name"), ""));
    }
    match subject.kind.as_str() {
        SERVICE_ACCOUNT_KIND => {
            if !subject.name.is_empty() {
                for message in name_is_dns_subdomain(&subject.name, false) {
                    errors.push(Error::invalid(
                        &path.child("name"),
                        subject.name.as_str(),
                        message,
                    ));
                }
            }
            if !subject.api_group.is_empty() {
                errors.push(Error::not_supported(
                    &path.child("apiGroup"),
                    subject.api_group.as_str(),
                    &[""],
                ));
            }
            if !namespaced && subject.namespace.is_empty() {
                errors.push(Error::required(&path.child("namespace"), ""));
            }
        }
        USER_KIND | GROUP_KIND => {
            if subject.api_group != GROUP_NAME {
                errors.push(Error::not_supported(
                    &path.child("apiGroup"),
                    subject.api_group.as_str(),
                    &[GROUP_NAME],
                ));
            }
        }
        other => errors.push(Error::not_supported(
            &path.child("kind"),
            other,
            &[SERVICE_ACCOUNT_KIND, USER_KIND, GROUP_KIND],
        )),
    }
    errors
}

/// A binding (RoleBinding or ClusterRoleBinding), as validation reads it.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Binding {
    subjects: Vec<Subject>,
    role_ref: RoleRef,
}

/// The body of a binding's validation: `roleRef` (naming one of `kinds`) and the subjects.
fn validate_binding(binding: &Binding, kinds: &[&str], namespaced: bool) -> ErrorList {
    let mut errors = validate_role_ref(&binding.role_ref, kinds);
    for (i, subject) in binding.subjects.iter().enumerate() {
        errors.extend(validate_subject(
            subject,
            namespaced,
            &Path::new("subjects").index(i),
        ));
    }
    errors
}

/// What tells a RoleBinding from a ClusterRoleBinding: their kind, shape, scope and the kinds
/// their `roleRef` may name. Both kinds' hooks are this one's methods.
#[derive(Debug)]
pub(crate) struct BindingKind {
    /// `RoleBinding` or `ClusterRoleBinding`.
    pub(crate) kind: &'static str,
    /// Its shape.
    pub(crate) schema: &'static Struct,
    /// Whether it is namespaced.
    pub(crate) namespaced: bool,
    /// The kinds its `roleRef` may name.
    pub(crate) role_ref_kinds: &'static [&'static str],
}

impl BindingKind {
    /// Type-checks and normalizes a binding of this kind.
    pub(crate) fn decode(&self, object: &Value) -> Result<decode::Decoded, ApiError> {
        decode::decode(object, self.schema).map_err(|e| e.to_api_error(self.kind, API_VERSION))
    }

    fn read(&self, object: &Value) -> Result<(ObjectMeta, Binding), ApiError> {
        util::decode_typed::<Binding>(object, self.schema, self.kind, API_VERSION)
    }

    fn validate_read(&self, meta: &ObjectMeta, binding: &Binding) -> ErrorList {
        let mut errors = validate_object_meta(
            meta,
            self.namespaced,
            validate_rbac_name,
            &Path::new("metadata"),
        );
        errors.extend(validate_binding(
            binding,
            self.role_ref_kinds,
            self.namespaced,
        ));
        errors
    }

    /// Validates a new binding of this kind.
    pub(crate) fn validate(&self, object: &Value) -> Result<ErrorList, ApiError> {
        let (meta, binding) = self.read(object)?;
        Ok(self.validate_read(&meta, &binding))
    }

    /// Validates an update: the create rules (twice, as upstream's strategy runs them before
    /// `ValidateRoleBindingUpdate`/`ValidateClusterRoleBindingUpdate`, which run them again),
    /// the metadata update rules and `cannot change roleRef`.
    pub(crate) fn validate_update(&self, new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
        let (new_meta, binding) = self.read(new)?;
        let (old_meta, old_binding) = self.read(old)?;
        let mut errors = self.validate_read(&new_meta, &binding);
        errors.extend(self.validate_read(&new_meta, &binding));
        errors.extend(validate_object_meta_update(
            &new_meta,
            &old_meta,
            &Path::new("metadata"),
        ));
        errors.extend(validate_role_ref_unchanged(&binding, &old_binding));
        Ok(errors)
    }
}

/// `cannot change roleRef` when the new binding names another role than the old one.
fn validate_role_ref_unchanged(new: &Binding, old: &Binding) -> ErrorList {
    let mut errors = ErrorList::new();
    if new.role_ref != old.role_ref {
        errors.push(Error::invalid(
            &Path::new("roleRef"),
            new.role_ref.to_json(),
            "cannot change roleRef",
        ));
    }
    errors
}

fn is_blank(value: Option<&Value>) -> bool {
    value.is_none_or(|v| v.as_str().is_some_and(str::is_empty) || v.is_null())
}

/// Upstream's defaulting of a binding (`SetDefaults_RoleBinding`,
/// `SetDefaults_ClusterRoleBinding`, `SetDefaults_Subject`): an empty `roleRef.apiGroup` becomes
/// `rbac.authorization.k8s.io`; an empty subject `apiGroup` becomes `rbac.authorization.k8s.io`
/// for users and groups and stays empty (left out) for service accounts.
pub fn default_binding(object: &mut Value) {
    let Some(binding) = object.as_object_mut() else {
        return;
    };
    let role_ref = binding
        .entry("roleRef")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(role_ref) = role_ref.as_object_mut()
        && is_blank(role_ref.get("apiGroup"))
    {
        role_ref.insert("apiGroup".into(), Value::from(GROUP_NAME));
    }
    let Some(subjects) = binding.get_mut("subjects").and_then(Value::as_array_mut) else {
        return;
    };
    for subject in subjects.iter_mut().filter_map(Value::as_object_mut) {
        if !is_blank(subject.get("apiGroup")) {
            continue;
        }
        match subject.get("kind").and_then(Value::as_str) {
            Some(USER_KIND | GROUP_KIND) => {
                subject.insert("apiGroup".into(), Value::from(GROUP_NAME));
            }
            _ => {
                subject.remove("apiGroup");
            }
        }
    }
}

/// What the `Created At` column describes.
const CREATED_AT_DESCRIPTION: &str =
    "When the server created the object (its creationTimestamp), in UTC.";

/// `NAME CREATED AT`: upstream's default table of a kind without printer (Roles and
/// ClusterRoles).
pub const ROLE_COLUMNS: &[ColumnDefinition] = &[
    table::NAME,
    ColumnDefinition {
        name: "Created At",
        type_: "date",
        format: "",
        description: CREATED_AT_DESCRIPTION,
        priority: 0,
    },
];

/// The cells of a role: name and creation time (RFC 3339, UTC; Go's zero time when unset).
pub fn role_row(object: &Value, _now: i64) -> Vec<Value> {
    let created = util::str_at(object, &["metadata", "creationTimestamp"]);
    let created = match genplane_apimachinery::time::parse_time(created) {
        Some(t) => genplane_apimachinery::meta::rfc3339(t.seconds),
        None => "0001-01-01T00:00:00Z".to_owned(),
    };
    vec![util::name(object), Value::from(created)]
}

/// `NAME ROLE AGE` and, with `-o wide`, `USERS GROUPS SERVICEACCOUNTS` (upstream's printers of
/// RoleBindings and ClusterRoleBindings).
pub const BINDING_COLUMNS: &[ColumnDefinition] = &[
    table::NAME,
    table::column(
        "Role",
        "The role the binding grants, as kind/name (its roleRef).",
        0,
    ),
    table::AGE,
    table::column("Users", "The users the binding grants the role to.", 1),
    table::column("Groups", "The groups the binding grants the role to.", 1),
    table::column(
        "ServiceAccounts",
        "The service accounts the binding grants the role to, as namespace/name.",
        1,
    ),
];

/// The cells of a binding: name, `Kind/name` of the role, age, then the users, groups and
/// service accounts (`namespace/name`), each joined by `, `. Subjects of other kinds are not
/// shown.
pub fn binding_row(object: &Value, now: i64) -> Vec<Value> {
    let role = format!(
        "{}/{}",
        util::str_at(object, &["roleRef", "kind"]),
        util::str_at(object, &["roleRef", "name"])
    );
    let (mut users, mut groups, mut service_accounts) = (Vec::new(), Vec::new(), Vec::new());
    for subject in object
        .get("subjects")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = util::str_at(subject, &["name"]);
        match util::str_at(subject, &["kind"]) {
            USER_KIND => users.push(name.to_owned()),
            GROUP_KIND => groups.push(name.to_owned()),
            SERVICE_ACCOUNT_KIND => {
                service_accounts.push(format!("{}/{name}", util::str_at(subject, &["namespace"])))
            }
            _ => {}
        }
    }
    vec![
        util::name(object),
        Value::from(role),
        util::age(object, now),
        Value::from(users.join(", ")),
        Value::from(groups.join(", ")),
        Value::from(service_accounts.join(", ")),
    ]
}

/// Field-selector labels of every kind here: only the metadata ones (upstream's conversion
/// accepts `metadata.namespace` for the cluster-scoped kinds too, where it is always empty).
pub const FIELD_SELECTORS: &[&str] = &["metadata.name", "metadata.namespace"];

/// Field-selector values of an object of a namespaced kind.
pub fn namespaced_field_values(object: &Value) -> BTreeMap<&'static str, String> {
    util::meta_fields(object, true)
}

/// Field-selector values of an object of a cluster-scoped kind.
pub fn cluster_field_values(object: &Value) -> BTreeMap<&'static str, String> {
    let mut fields = util::meta_fields(object, false);
    fields.insert("metadata.namespace", String::new());
    fields
}

/// What the rbac kinds share: every list of a `PolicyRule` is atomic, references are atomic.
const POLICY_RULE_EXTENSIONS: [crate::schema::Extensions; 5] = [
    crate::schema::atomic_list("io.k8s.api.rbac.v1.PolicyRule", "verbs"),
    crate::schema::atomic_list("io.k8s.api.rbac.v1.PolicyRule", "apiGroups"),
    crate::schema::atomic_list("io.k8s.api.rbac.v1.PolicyRule", "resources"),
    crate::schema::atomic_list("io.k8s.api.rbac.v1.PolicyRule", "resourceNames"),
    crate::schema::atomic_list("io.k8s.api.rbac.v1.PolicyRule", "nonResourceURLs"),
];

/// The list semantics of Roles.
pub static ROLE_EXTENSIONS: &[crate::schema::Extensions] = &[
    POLICY_RULE_EXTENSIONS[0],
    POLICY_RULE_EXTENSIONS[1],
    POLICY_RULE_EXTENSIONS[2],
    POLICY_RULE_EXTENSIONS[3],
    POLICY_RULE_EXTENSIONS[4],
    crate::schema::atomic_list("io.k8s.api.rbac.v1.Role", "rules"),
];

/// The list semantics of ClusterRoles.
pub static CLUSTER_ROLE_EXTENSIONS: &[crate::schema::Extensions] = &[
    POLICY_RULE_EXTENSIONS[0],
    POLICY_RULE_EXTENSIONS[1],
    POLICY_RULE_EXTENSIONS[2],
    POLICY_RULE_EXTENSIONS[3],
    POLICY_RULE_EXTENSIONS[4],
    crate::schema::atomic_list("io.k8s.api.rbac.v1.ClusterRole", "rules"),
    crate::schema::atomic_list("io.k8s.api.rbac.v1.AggregationRule", "clusterRoleSelectors"),
];

/// The list semantics of RoleBindings.
pub static ROLE_BINDING_EXTENSIONS: &[crate::schema::Extensions] = &[
    crate::schema::atomic_list("io.k8s.api.rbac.v1.RoleBinding", "subjects"),
    crate::schema::atomic_struct("io.k8s.api.rbac.v1.RoleRef"),
    crate::schema::atomic_struct("io.k8s.api.rbac.v1.Subject"),
];

/// The list semantics of ClusterRoleBindings.
pub static CLUSTER_ROLE_BINDING_EXTENSIONS: &[crate::schema::Extensions] = &[
    crate::schema::atomic_list("io.k8s.api.rbac.v1.ClusterRoleBinding", "subjects"),
    crate::schema::atomic_struct("io.k8s.api.rbac.v1.RoleRef"),
    crate::schema::atomic_struct("io.k8s.api.rbac.v1.Subject"),
];

#[cfg(test)]
mod tests;
