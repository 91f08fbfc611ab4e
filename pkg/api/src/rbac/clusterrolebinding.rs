//! ClusterRoleBindings (`rbac.authorization.k8s.io/v1`, cluster-scoped).
//!
//! Upstream rules (`ValidateClusterRoleBinding`, `ValidateClusterRoleBindingUpdate`,
//! Kubernetes 1.33): the name is a valid path segment; `roleRef` names a `ClusterRole` of group
//! `rbac.authorization.k8s.io` and never changes; subjects are valid, and a ServiceAccount
//! subject needs a namespace. Defaulting fills the API groups ([`super::default_binding`]).
//! See [`super`] for why update errors come twice.

use std::collections::BTreeMap;

use genplane_apimachinery::codec::decode::Decoded;
use genplane_apimachinery::codec::schema::{Field, Struct, Type};
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::meta::schemas::OBJECT_META;
use genplane_apimachinery::validation::field::ErrorList;
use serde_json::Value;

use super::{BindingKind, ROLE_REF, SUBJECT};
use crate::table::ColumnDefinition;

/// The kind.
pub const KIND: &str = "ClusterRoleBinding";
/// The kinds `roleRef` may name.
pub const ROLE_REF_KINDS: &[&str] = &["ClusterRole"];

/// The shape of an rbac/v1 ClusterRoleBinding.
pub static SCHEMA: Struct = Struct {
    name: "ClusterRoleBinding",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("subjects", 2, Type::List(&Type::Struct(&SUBJECT))),
        Field::new("roleRef", 3, Type::Struct(&ROLE_REF)),
    ],
};

/// What this kind is among the bindings.
static BINDING: BindingKind = BindingKind {
    kind: KIND,
    schema: &SCHEMA,
    namespaced: false,
    role_ref_kinds: ROLE_REF_KINDS,
};

/// Type-checks and normalizes a ClusterRoleBinding.
pub fn decode(object: &Value) -> Result<Decoded, ApiError> {
    BINDING.decode(object)
}

/// Upstream's defaulting: see [`super::default_binding`].
pub fn default(object: &mut Value) {
    super::default_binding(object);
}

/// Validates a new ClusterRoleBinding.
pub fn validate(object: &Value) -> Result<ErrorList, ApiError> {
    BINDING.validate(object)
}

/// Validates an update of a ClusterRoleBinding: the create rules (twice, as upstream's strategy runs them
/// before its update validation, which runs them again), the metadata update rules and
/// `cannot change roleRef`.
pub fn validate_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    BINDING.validate_update(new, old)
}

/// Field-selector labels: only the metadata ones.
pub const FIELD_SELECTORS: &[&str] = super::FIELD_SELECTORS;

/// Field-selector values (`metadata.namespace` is always empty).
pub fn field_values(object: &Value) -> BTreeMap<&'static str, String> {
    super::cluster_field_values(object)
}

/// `NAME ROLE AGE USERS GROUPS SERVICEACCOUNTS` (the last three with `-o wide`).
pub const COLUMNS: &[ColumnDefinition] = super::BINDING_COLUMNS;

/// The cells: see [`super::binding_row`].
pub fn row(object: &Value, now: i64) -> Vec<Value> {
    super::binding_row(object, now)
}

/// This resource in the catalog: everything the server needs to serve it.
pub const INFO: crate::resource::ResourceInfo = crate::resource::ResourceInfo {
    group: "rbac.authorization.k8s.io",
    version: "v1",
    kind: "ClusterRoleBinding",
    list_kind: "ClusterRoleBindingList",
    resource: "clusterrolebindings",
    singular: "clusterrolebinding",
    short_names: &[],
    namespaced: false,
    create_on_update: true,
    verbs: crate::resource::ALL_VERBS,
    subresources: &[],
    categories: &[],
    storage_prefix: "clusterrolebindings",
    storage_api_version: "rbac.authorization.k8s.io/v1",
    schema: &SCHEMA,
    protobuf: true,
    feature_gate: None,
    extensions: crate::rbac::CLUSTER_ROLE_BINDING_EXTENSIONS,
    openapi_schema: crate::schema::schema_of::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>,
    hooks: crate::resource::Hooks {
        decode,
        default,
        prepare_for_create: crate::resource::no_prepare,
        prepare_for_update: crate::resource::no_prepare_update,
        validate,
        validate_update,
        to_storage: None,
        from_storage: None,
        field_selectors: FIELD_SELECTORS,
        field_values,
        columns: COLUMNS,
        row,
        pending_finalization: crate::resource::nothing_pending,
        mark_deleting: crate::resource::no_default,
        grace_period: crate::resource::not_graceful,
    },
};
