//! MutatingWebhookConfigurations (`admissionregistration.k8s.io/v1`, cluster-scoped): the webhooks the
//! `MutatingAdmissionWebhook` plugin calls. The rules are upstream's
//! `ValidateMutatingWebhookConfiguration` and `ValidateMutatingWebhookConfigurationUpdate` (see [`super`]).

use std::collections::BTreeMap;

use genplane_apimachinery::codec::decode::{self, Decoded};
use genplane_apimachinery::codec::schema::{Field, Struct, Type};
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::meta::schemas::OBJECT_META;
use genplane_apimachinery::validation::field::ErrorList;
use serde_json::Value;

use super::{API_VERSION, Flavor, MUTATING_WEBHOOK};
use crate::schema::{Extensions, keyed_list};

/// The kind.
pub const KIND: &str = "MutatingWebhookConfiguration";

/// The shape of an admissionregistration/v1 MutatingWebhookConfiguration.
pub static SCHEMA: Struct = Struct {
    name: "MutatingWebhookConfiguration",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("webhooks", 2, Type::List(&Type::Struct(&MUTATING_WEBHOOK))),
    ],
};

/// Type-checks and normalizes a MutatingWebhookConfiguration.
pub fn decode(object: &Value) -> Result<Decoded, ApiError> {
    decode::decode(object, &SCHEMA).map_err(|e| e.to_api_error(KIND, API_VERSION))
}

/// Upstream's defaulting of every webhook (see [`super`]).
pub fn default(object: &mut Value) {
    super::default_webhooks(object, true);
}

/// Validates a new MutatingWebhookConfiguration.
pub fn validate(object: &Value) -> Result<ErrorList, ApiError> {
    super::validate_kind(object, &SCHEMA, KIND, Flavor::Mutating)
}

/// Validates an update of a MutatingWebhookConfiguration.
pub fn validate_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    super::validate_kind_update(new, old, &SCHEMA, KIND, Flavor::Mutating)
}

/// Field-selector values (`metadata.namespace` is always empty).
pub fn field_values(object: &Value) -> BTreeMap<&'static str, String> {
    crate::rbac::cluster_field_values(object)
}

const WEBHOOK: [Extensions; 3] =
    super::webhook_extensions("io.k8s.api.admissionregistration.v1.MutatingWebhook");

/// The list and patch semantics of the kind (`webhooks` keyed by name, atomic rule lists).
pub static EXTENSIONS: &[Extensions] = &[
    keyed_list(
        "io.k8s.api.admissionregistration.v1.MutatingWebhookConfiguration",
        "webhooks",
        &["name"],
    ),
    WEBHOOK[0],
    WEBHOOK[1],
    WEBHOOK[2],
    super::RULE_EXTENSIONS[0],
    super::RULE_EXTENSIONS[1],
    super::RULE_EXTENSIONS[2],
    super::RULE_EXTENSIONS[3],
];

/// This resource in the catalog: everything the server needs to serve it.
pub const INFO: crate::resource::ResourceInfo = crate::resource::ResourceInfo {
    group: super::GROUP_NAME,
    version: "v1",
    kind: KIND,
    list_kind: "MutatingWebhookConfigurationList",
    resource: "mutatingwebhookconfigurations",
    singular: "mutatingwebhookconfiguration",
    short_names: &[],
    namespaced: false,
    create_on_update: false,
    verbs: crate::resource::ALL_VERBS,
    subresources: &[],
    categories: &["api-extensions"],
    storage_prefix: "mutatingwebhookconfigurations",
    storage_api_version: API_VERSION,
    schema: &SCHEMA,
    protobuf: true,
    feature_gate: None,
    extensions: EXTENSIONS,
    openapi_schema: crate::schema::schema_of::<
        k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration,
    >,
    hooks: crate::resource::Hooks {
        decode,
        default,
        prepare_for_create: super::prepare_for_create,
        prepare_for_update: super::prepare_for_update,
        validate,
        validate_update,
        to_storage: None,
        from_storage: None,
        field_selectors: crate::rbac::FIELD_SELECTORS,
        field_values,
        columns: super::COLUMNS,
        row: super::row,
        pending_finalization: crate::resource::nothing_pending,
        mark_deleting: crate::resource::no_default,
        grace_period: crate::resource::not_graceful,
    },
};
