//! Roles (`rbac.authorization.k8s.io/v1`, namespaced).
//!
//! Upstream rules (`ValidateRole`, `ValidateRoleUpdate`, Kubernetes 1.33): the name is a valid
//! path segment; every rule is a valid policy rule, and none may name non-resource URLs (they
//! are not namespaced). See [`super`] for the rules and for why update errors come twice.

use std::collections::BTreeMap;

use genplane_apimachinery::codec::decode::{self, Decoded};
use genplane_apimachinery::codec::schema::{Field, Struct, Type};
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::meta::schemas::OBJECT_META;
use genplane_apimachinery::meta::{validate_object_meta, validate_object_meta_update};
use genplane_apimachinery::validation::field::{ErrorList, Path};
use serde::Deserialize;
use serde_json::Value;

use super::{API_VERSION, POLICY_RULE, PolicyRule, validate_rbac_name, validate_rules};
use crate::table::ColumnDefinition;
use crate::util;

/// The kind.
pub const KIND: &str = "Role";

/// The shape of an rbac/v1 Role.
pub static SCHEMA: Struct = Struct {
    name: "Role",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("rules", 2, Type::List(&Type::Struct(&POLICY_RULE))).keep_empty(),
    ],
};

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Role {
    rules: Vec<PolicyRule>,
}

/// Type-checks and normalizes a Role.
pub fn decode(object: &Value) -> Result<Decoded, ApiError> {
    decode::decode(object, &SCHEMA).map_err(|e| e.to_api_error(KIND, API_VERSION))
}

fn validate_decoded(meta: &genplane_apimachinery::meta::ObjectMeta, role: &Role) -> ErrorList {
    let mut errors = validate_object_meta(meta, true, validate_rbac_name, &Path::new("metadata"));
    errors.extend(validate_rules(&role.rules, true));
    errors
}

/// Validates a new Role.
pub fn validate(object: &Value) -> Result<ErrorList, ApiError> {
    let (meta, role) = util::decode_typed::<Role>(object, &SCHEMA, KIND, API_VERSION)?;
    Ok(validate_decoded(&meta, &role))
}

/// Validates an update of a Role: the create rules (twice, as upstream's strategy runs them
/// before `ValidateRoleUpdate`, which runs them again) and the metadata update rules.
pub fn validate_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let (new_meta, role) = util::decode_typed::<Role>(new, &SCHEMA, KIND, API_VERSION)?;
    let (old_meta, _) = util::decode_typed::<Role>(old, &SCHEMA, KIND, API_VERSION)?;
    let mut errors = validate_decoded(&new_meta, &role);
    errors.extend(validate_decoded(&new_meta, &role));
    errors.extend(validate_object_meta_update(
        &new_meta,
        &old_meta,
        &Path::new("metadata"),
    ));
    Ok(errors)
}

/// Field-selector labels: only the metadata ones.
pub const FIELD_SELECTORS: &[&str] = super::FIELD_SELECTORS;

/// Field-selector values.
pub fn field_values(object: &Value) -> BTreeMap<&'static str, String> {
    super::namespaced_field_values(object)
}

/// `NAME CREATED AT`.
pub const COLUMNS: &[ColumnDefinition] = super::ROLE_COLUMNS;

/// The cells: name, creation time.
pub fn row(object: &Value, now: i64) -> Vec<Value> {
    super::role_row(object, now)
}

/// This resource in the catalog: everything the server needs to serve it.
pub const INFO: crate::resource::ResourceInfo = crate::resource::ResourceInfo {
    group: "rbac.authorization.k8s.io",
    version: "v1",
    kind: "Role",
    list_kind: "RoleList",
    resource: "roles",
    singular: "role",
    short_names: &[],
    namespaced: true,
    create_on_update: true,
    verbs: crate::resource::ALL_VERBS,
    subresources: &[],
    categories: &[],
    storage_prefix: "roles",
    storage_api_version: "rbac.authorization.k8s.io/v1",
    schema: &SCHEMA,
    protobuf: true,
    feature_gate: None,
    extensions: crate::rbac::ROLE_EXTENSIONS,
    openapi_schema: crate::schema::schema_of::<k8s_openapi::api::rbac::v1::Role>,
    hooks: crate::resource::Hooks {
        decode,
        default: crate::resource::no_default,
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
