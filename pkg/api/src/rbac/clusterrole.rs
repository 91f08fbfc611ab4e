//! ClusterRoles (`rbac.authorization.k8s.io/v1`, cluster-scoped).
//!
//! Upstream rules (`ValidateClusterRole`, `ValidateClusterRoleUpdate`, Kubernetes 1.33): the
//! name is a valid path segment; every rule is a valid policy rule (non-resource URLs allowed);
//! an `aggregationRule`, when present, has at least one `clusterRoleSelectors` entry and each
//! is a valid label selector. Label values in those selectors must be valid unless the old
//! object of an update already had an invalid selector (upstream's
//! `AllowInvalidLabelValueInSelector`). See [`super`] for why update errors come twice.

use std::collections::BTreeMap;

use genplane_apimachinery::codec::decode::{self, Decoded};
use genplane_apimachinery::codec::schema::{Field, Struct, Type};
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::meta::schemas::OBJECT_META;
use genplane_apimachinery::meta::{ObjectMeta, validate_object_meta, validate_object_meta_update};
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use serde::Deserialize;
use serde_json::Value;

use super::{
    AGGREGATION_RULE, API_VERSION, LabelSelector, POLICY_RULE, PolicyRule, validate_label_selector,
    validate_rbac_name, validate_rules,
};
use crate::table::ColumnDefinition;
use crate::util;

/// The kind.
pub const KIND: &str = "ClusterRole";

/// The shape of an rbac/v1 ClusterRole.
pub static SCHEMA: Struct = Struct {
    name: "ClusterRole",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("rules", 2, Type::List(&Type::Struct(&POLICY_RULE))).keep_empty(),
        Field::new("aggregationRule", 3, Type::Struct(&AGGREGATION_RULE)),
    ],
};

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct AggregationRule {
    cluster_role_selectors: Vec<LabelSelector>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct ClusterRole {
    rules: Vec<PolicyRule>,
    aggregation_rule: Option<AggregationRule>,
}

/// Type-checks and normalizes a ClusterRole.
pub fn decode(object: &Value) -> Result<Decoded, ApiError> {
    decode::decode(object, &SCHEMA).map_err(|e| e.to_api_error(KIND, API_VERSION))
}

fn validate_decoded(
    meta: &ObjectMeta,
    role: &ClusterRole,
    allow_invalid_label_values: bool,
) -> ErrorList {
    let mut errors = validate_object_meta(meta, false, validate_rbac_name, &Path::new("metadata"));
    errors.extend(validate_rules(&role.rules, false));
    if let Some(aggregation) = &role.aggregation_rule {
        let path = Path::new("aggregationRule").child("clusterRoleSelectors");
        if aggregation.cluster_role_selectors.is_empty() {
            errors.push(Error::required(
                &path,
                "at least one clusterRoleSelector required if aggregationRule is non-nil",
            ));
        }
        for (i, selector) in aggregation.cluster_role_selectors.iter().enumerate() {
            let at = path.index(i);
            errors.extend(validate_label_selector(
                selector,
                allow_invalid_label_values,
                &at,
            ));
            if selector.to_apimachinery().to_selector().is_err() {
                // Upstream shows the (nil) selector it failed to build.
                errors.push(Error::invalid(&at, "null", "invalid label selector."));
            }
        }
    }
    errors
}

/// Whether any aggregation selector of `role` is invalid (then an update may keep invalid
/// label values: upstream's `hasInvalidLabelValueInLabelSelector`).
fn has_invalid_selector(role: &ClusterRole) -> bool {
    role.aggregation_rule.as_ref().is_some_and(|aggregation| {
        aggregation
            .cluster_role_selectors
            .iter()
            .any(|s| !validate_label_selector(s, false, &Path::default()).is_empty())
    })
}

/// Validates a new ClusterRole.
pub fn validate(object: &Value) -> Result<ErrorList, ApiError> {
    let (meta, role) = util::decode_typed::<ClusterRole>(object, &SCHEMA, KIND, API_VERSION)?;
    Ok(validate_decoded(&meta, &role, false))
}

/// Validates an update of a ClusterRole: the create rules (twice, as upstream's strategy runs
/// them before `ValidateClusterRoleUpdate`, which runs them again) and the metadata update
/// rules.
pub fn validate_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let (new_meta, role) = util::decode_typed::<ClusterRole>(new, &SCHEMA, KIND, API_VERSION)?;
    let (old_meta, old_role) = util::decode_typed::<ClusterRole>(old, &SCHEMA, KIND, API_VERSION)?;
    let allow = has_invalid_selector(&old_role);
    let mut errors = validate_decoded(&new_meta, &role, allow);
    errors.extend(validate_decoded(&new_meta, &role, allow));
    errors.extend(validate_object_meta_update(
        &new_meta,
        &old_meta,
        &Path::new("metadata"),
    ));
    Ok(errors)
}

/// Field-selector labels: only the metadata ones.
pub const FIELD_SELECTORS: &[&str] = super::FIELD_SELECTORS;

/// Field-selector values (`metadata.namespace` is always empty).
pub fn field_values(object: &Value) -> BTreeMap<&'static str, String> {
    super::cluster_field_values(object)
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
    kind: "ClusterRole",
    list_kind: "ClusterRoleList",
    resource: "clusterroles",
    singular: "clusterrole",
    short_names: &[],
    namespaced: false,
    create_on_update: true,
    verbs: crate::resource::ALL_VERBS,
    subresources: &[],
    categories: &[],
    storage_prefix: "clusterroles",
    storage_api_version: "rbac.authorization.k8s.io/v1",
    schema: &SCHEMA,
    protobuf: true,
    feature_gate: None,
    extensions: crate::rbac::CLUSTER_ROLE_EXTENSIONS,
    openapi_schema: crate::schema::schema_of::<k8s_openapi::api::rbac::v1::ClusterRole>,
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
