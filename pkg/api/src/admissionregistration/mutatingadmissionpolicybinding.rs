//! MutatingAdmissionPolicyBindings (`admissionregistration.k8s.io/v1alpha1`, cluster-scoped,
//! alpha like [`super::mutatingadmissionpolicy`]): what a MutatingAdmissionPolicy applies to
//! and with which params.
//!
//! Upstream's defaulting: the defaults of `matchResources` when it is given (empty selectors,
//! `matchPolicy` `Equivalent`, each rule's `scope` `*`).
//!
//! Upstream's rules (`ValidateMutatingAdmissionPolicyBinding`, Kubernetes 1.33):
//! - the name is a DNS-1123 subdomain; `policyName` is required and a DNS-1123 subdomain;
//! - `paramRef` as a ValidatingAdmissionPolicyBinding's;
//! - `matchResources` as a policy's `matchConstraints` (no `DELETE`), `resourceRules` not
//!   required.
//!
//! On create the generation is 1; an update that changes `spec` increments it.

use std::collections::BTreeMap;

use genplane_apimachinery::codec::decode::{self, Decoded};
use genplane_apimachinery::codec::schema::{Field, Struct, Type};
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::meta::schemas::OBJECT_META;
use genplane_apimachinery::meta::{ObjectMeta, validate_object_meta, validate_object_meta_update};
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use genplane_apimachinery::validation::{is_dns1123_subdomain, name_is_dns_subdomain};
use serde::Deserialize;
use serde_json::Value;

use super::mutatingadmissionpolicy::{
    API_VERSION, MATCH_RESOURCES, MATCH_RESOURCES_EXTENSIONS, validate_mutating_match_resources,
};
use super::types::MutatingBindingSpec as Spec;
use super::validatingadmissionpolicy::default_match_resources;
use super::validatingadmissionpolicybinding::{PARAM_REF, validate_param_ref};
use crate::schema::{Extensions, atomic_struct};
use crate::table::ColumnDefinition;
use crate::util;

/// The kind.
pub const KIND: &str = "MutatingAdmissionPolicyBinding";

static SPEC: Struct = Struct {
    name: "MutatingAdmissionPolicyBindingSpec",
    fields: &[
        Field::new("policyName", 1, Type::String),
        Field::pointer("paramRef", 2, Type::Struct(&PARAM_REF)),
        Field::pointer("matchResources", 3, Type::Struct(&MATCH_RESOURCES)),
    ],
};

/// The shape of an admissionregistration/v1alpha1 MutatingAdmissionPolicyBinding.
pub static SCHEMA: Struct = Struct {
    name: "MutatingAdmissionPolicyBinding",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("spec", 2, Type::Struct(&SPEC)),
    ],
};

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Binding {
    spec: Spec,
}

/// Type-checks and normalizes a MutatingAdmissionPolicyBinding.
pub fn decode(object: &Value) -> Result<Decoded, ApiError> {
    decode::decode(object, &SCHEMA).map_err(|e| e.to_api_error(KIND, API_VERSION))
}

/// Upstream's defaulting of `matchResources`.
pub fn default(object: &mut Value) {
    if let Some(resources) = object.pointer_mut("/spec/matchResources") {
        default_match_resources(resources);
    }
}

fn validate_spec(spec: &Spec) -> ErrorList {
    let path = Path::new("spec");
    let mut errors = ErrorList::new();
    if spec.policy_name.is_empty() {
        errors.push(Error::required(&path.child("policyName"), ""));
    } else {
        for message in is_dns1123_subdomain(&spec.policy_name) {
            errors.push(Error::invalid(
                &path.child("policyName"),
                spec.policy_name.as_str(),
                message,
            ));
        }
    }
    if let Some(param_ref) = &spec.param_ref {
        errors.extend(validate_param_ref(param_ref, &path.child("paramRef")));
    }
    if let Some(resources) = &spec.match_resources {
        errors.extend(validate_mutating_match_resources(
            resources,
            false,
            &path.child("matchResources"),
        ));
    }
    errors
}

fn validate_meta_and_spec(meta: &ObjectMeta, binding: &Binding) -> ErrorList {
    let mut errors =
        validate_object_meta(meta, false, name_is_dns_subdomain, &Path::new("metadata"));
    errors.extend(validate_spec(&binding.spec));
    errors
}

/// Validates a new MutatingAdmissionPolicyBinding.
pub fn validate(object: &Value) -> Result<ErrorList, ApiError> {
    let (meta, binding) = util::decode_typed::<Binding>(object, &SCHEMA, KIND, API_VERSION)?;
    Ok(validate_meta_and_spec(&meta, &binding))
}

/// Validates an update of a MutatingAdmissionPolicyBinding.
pub fn validate_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let (meta, binding) = util::decode_typed::<Binding>(new, &SCHEMA, KIND, API_VERSION)?;
    let (old_meta, _) = util::decode_typed::<Binding>(old, &SCHEMA, KIND, API_VERSION)?;
    let mut errors = validate_object_meta_update(&meta, &old_meta, &Path::new("metadata"));
    errors.extend(validate_spec(&binding.spec));
    Ok(errors)
}

/// Field-selector values (`metadata.namespace` is always empty).
pub fn field_values(object: &Value) -> BTreeMap<&'static str, String> {
    crate::rbac::cluster_field_values(object)
}

/// `NAME POLICYNAME PARAMREF AGE`, as a ValidatingAdmissionPolicyBinding's.
pub const COLUMNS: &[ColumnDefinition] = super::validatingadmissionpolicybinding::COLUMNS;

/// The cells: name, policy name, the params, age (as a ValidatingAdmissionPolicyBinding's).
pub use super::validatingadmissionpolicybinding::row;

/// The list and patch semantics of the kind.
pub static EXTENSIONS: &[Extensions] = &[
    atomic_struct("io.k8s.api.admissionregistration.v1alpha1.ParamRef"),
    MATCH_RESOURCES_EXTENSIONS[0],
    MATCH_RESOURCES_EXTENSIONS[1],
    MATCH_RESOURCES_EXTENSIONS[2],
    MATCH_RESOURCES_EXTENSIONS[3],
    MATCH_RESOURCES_EXTENSIONS[4],
    MATCH_RESOURCES_EXTENSIONS[5],
    MATCH_RESOURCES_EXTENSIONS[6],
    MATCH_RESOURCES_EXTENSIONS[7],
];

/// This resource in the catalog: everything the server needs to serve it.
pub const INFO: crate::resource::ResourceInfo = crate::resource::ResourceInfo {
    group: super::GROUP_NAME,
    version: "v1alpha1",
    kind: KIND,
    list_kind: "MutatingAdmissionPolicyBindingList",
    resource: "mutatingadmissionpolicybindings",
    singular: "mutatingadmissionpolicybinding",
    short_names: &[],
    namespaced: false,
    create_on_update: false,
    verbs: crate::resource::ALL_VERBS,
    subresources: &[],
    categories: &["api-extensions"],
    storage_prefix: "mutatingadmissionpolicybindings",
    storage_api_version: API_VERSION,
    schema: &SCHEMA,
    protobuf: true,
    feature_gate: Some(crate::features::MUTATING_ADMISSION_POLICY),
    extensions: EXTENSIONS,
    openapi_schema: crate::schema::schema_of::<
        k8s_openapi::api::admissionregistration::v1alpha1::MutatingAdmissionPolicyBinding,
    >,
    hooks: crate::resource::Hooks {
        decode,
        default,
        prepare_for_create: super::prepare_for_create,
        prepare_for_update: util::prepare_spec_update,
        validate,
        validate_update,
        to_storage: None,
        from_storage: None,
        field_selectors: crate::rbac::FIELD_SELECTORS,
        field_values,
        columns: COLUMNS,
        row,
        pending_finalization: crate::resource::nothing_pending,
        mark_deleting: crate::resource::no_default,
        grace_period: crate::resource::not_graceful,
    },
};
