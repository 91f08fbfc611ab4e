//! ValidatingAdmissionPolicyBindings (`admissionregistration.k8s.io/v1`, cluster-scoped): what
//! a ValidatingAdmissionPolicy ([`super::validatingadmissionpolicy`]) applies to, with which
//! params, and what a failed validation does.
//!
//! Upstream's defaulting: the defaults of `matchResources` when it is given (empty selectors,
//! `matchPolicy` `Equivalent`, each rule's `scope` `*`).
//!
//! Upstream's rules (`ValidateValidatingAdmissionPolicyBinding`, Kubernetes 1.33):
//! - the name is a DNS-1123 subdomain; `policyName` is required and a DNS-1123 subdomain;
//! - `paramRef`: exactly one of `name` (a DNS-1123 subdomain) and `selector` (a valid label
//!   selector); `namespace` a DNS-1123 label; `parameterNotFoundAction` required, `Allow` or
//!   `Deny`;
//! - `matchResources` as a policy's `matchConstraints`, `resourceRules` not required;
//! - `validationActions`: required, each `Deny`, `Warn` or `Audit`, no duplicates, not both
//!   `Deny` and `Warn`.
//!
//! On create the generation is 1; an update that changes `spec` increments it.

use std::collections::{BTreeMap, BTreeSet};

use genplane_apimachinery::codec::decode::{self, Decoded};
use genplane_apimachinery::codec::schema::{Field, Struct, Type};
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::meta::schemas::{LABEL_SELECTOR, OBJECT_META};
use genplane_apimachinery::meta::{ObjectMeta, validate_object_meta, validate_object_meta_update};
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use genplane_apimachinery::validation::{
    is_dns1123_label, is_dns1123_subdomain, name_is_dns_subdomain,
};
use serde::Deserialize;
use serde_json::Value;

use super::API_VERSION;
use super::validatingadmissionpolicy::{
    MATCH_RESOURCES, MATCH_RESOURCES_EXTENSIONS, default_match_resources, validate_match_resources,
};
use crate::rbac::validate_label_selector;
use crate::schema::{Extensions, ListType, NONE, atomic_struct};
use crate::table::{self, ColumnDefinition};
use crate::util;

/// The kind.
pub const KIND: &str = "ValidatingAdmissionPolicyBinding";

/// The validation actions.
pub const VALIDATION_ACTIONS: &[&str] = &["Audit", "Deny", "Warn"];

/// The parameter-not-found actions.
pub const PARAMETER_NOT_FOUND_ACTIONS: &[&str] = &["Allow", "Deny"];

pub(super) static PARAM_REF: Struct = Struct {
    name: "ParamRef",
    fields: &[
        Field::new("name", 1, Type::String),
        Field::new("namespace", 2, Type::String),
        Field::pointer("selector", 3, Type::Struct(&LABEL_SELECTOR)),
        Field::pointer("parameterNotFoundAction", 4, Type::String),
    ],
};

static SPEC: Struct = Struct {
    name: "ValidatingAdmissionPolicyBindingSpec",
    fields: &[
        Field::new("policyName", 1, Type::String),
        Field::pointer("paramRef", 2, Type::Struct(&PARAM_REF)),
        Field::pointer("matchResources", 3, Type::Struct(&MATCH_RESOURCES)),
        Field::new("validationActions", 4, Type::List(&Type::String)),
    ],
};

/// The shape of an admissionregistration/v1 ValidatingAdmissionPolicyBinding.
pub static SCHEMA: Struct = Struct {
    name: "ValidatingAdmissionPolicyBinding",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("spec", 2, Type::Struct(&SPEC)),
    ],
};

use super::types::{BindingSpec as Spec, ParamRef};

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Binding {
    spec: Spec,
}

/// Type-checks and normalizes a ValidatingAdmissionPolicyBinding.
pub fn decode(object: &Value) -> Result<Decoded, ApiError> {
    decode::decode(object, &SCHEMA).map_err(|e| e.to_api_error(KIND, API_VERSION))
}

/// Upstream's defaulting of `matchResources`.
pub fn default(object: &mut Value) {
    if let Some(resources) = object.pointer_mut("/spec/matchResources") {
        default_match_resources(resources);
    }
}

pub(super) fn validate_param_ref(param_ref: &ParamRef, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    match (param_ref.name.is_empty(), &param_ref.selector) {
        (false, Some(_)) => errors.push(Error::forbidden(
            path,
            "name and selector are mutually exclusive",
        )),
        (true, None) => errors.push(Error::required(
            path,
            "one of name or selector must be specified",
        )),
        (false, None) => {
            for message in is_dns1123_subdomain(&param_ref.name) {
                errors.push(Error::invalid(
                    &path.child("name"),
                    param_ref.name.as_str(),
                    message,
                ));
            }
        }
        (true, Some(selector)) => {
            errors.extend(validate_label_selector(
                selector,
                false,
                &path.child("selector"),
            ));
        }
    }
    if !param_ref.namespace.is_empty() {
        for message in is_dns1123_label(&param_ref.namespace) {
            errors.push(Error::invalid(
                &path.child("namespace"),
                param_ref.namespace.as_str(),
                message,
            ));
        }
    }
    match param_ref.parameter_not_found_action.as_deref() {
        None => errors.push(Error::required(&path.child("parameterNotFoundAction"), "")),
        Some(action) if !PARAMETER_NOT_FOUND_ACTIONS.contains(&action) => {
            errors.push(Error::not_supported(
                &path.child("parameterNotFoundAction"),
                action,
                PARAMETER_NOT_FOUND_ACTIONS,
            ));
        }
        Some(_) => {}
    }
    errors
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
        errors.extend(validate_match_resources(
            resources,
            false,
            &path.child("matchResources"),
        ));
    }
    let actions_path = path.child("validationActions");
    if spec.validation_actions.is_empty() {
        errors.push(Error::required(
            &actions_path,
            "at least one validation action is required",
        ));
    }
    let mut seen = BTreeSet::new();
    for (i, action) in spec.validation_actions.iter().enumerate() {
        if !seen.insert(action.as_str()) {
            errors.push(Error::duplicate(&actions_path.index(i), action.as_str()));
        } else if !VALIDATION_ACTIONS.contains(&action.as_str()) {
            errors.push(Error::not_supported(
                &actions_path.index(i),
                action.as_str(),
                VALIDATION_ACTIONS,
            ));
        }
    }
    if seen.contains("Deny") && seen.contains("Warn") {
        errors.push(Error::invalid(
            &actions_path,
            Value::from(spec.validation_actions.clone()),
            "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
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

/// Validates a new ValidatingAdmissionPolicyBinding.
pub fn validate(object: &Value) -> Result<ErrorList, ApiError> {
    let (meta, binding) = util::decode_typed::<Binding>(object, &SCHEMA, KIND, API_VERSION)?;
    Ok(validate_meta_and_spec(&meta, &binding))
}

/// Validates an update of a ValidatingAdmissionPolicyBinding.
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

/// `NAME POLICYNAME PARAMREF AGE`.
pub const COLUMNS: &[ColumnDefinition] = &[
    table::NAME,
    ColumnDefinition {
        name: "PolicyName",
        type_: "string",
        format: "",
        description: "PolicyName indicates the policy definition which the policy binding binded to",
        priority: 0,
    },
    ColumnDefinition {
        name: "ParamRef",
        type_: "string",
        format: "",
        description: "ParamRef indicates the param resource which sets the configration param",
        priority: 0,
    },
    table::AGE,
];

/// What the `ParamRef` cell shows: `namespace/name`, `*/name` without a namespace, the
/// selector, or `<unset>`.
fn param_ref_cell(param_ref: Option<&Value>) -> String {
    let Some(param_ref) = param_ref.filter(|p| p.is_object()) else {
        return "<unset>".to_owned();
    };
    let name = param_ref["name"].as_str().unwrap_or_default();
    let namespace = param_ref["namespace"].as_str().unwrap_or_default();
    if !name.is_empty() {
        return if namespace.is_empty() {
            format!("*/{name}")
        } else {
            format!("{namespace}/{name}")
        };
    }
    param_ref
        .get("selector")
        .filter(|s| s.is_object())
        .and_then(|s| {
            serde_json::from_value::<genplane_apimachinery::labels::LabelSelector>(s.clone()).ok()
        })
        .and_then(|s| s.to_selector().ok())
        .map_or_else(|| "<unset>".to_owned(), |s| s.to_string())
}

/// The cells: name, policy name, the params, age.
pub fn row(object: &Value, now: i64) -> Vec<Value> {
    vec![
        util::name(object),
        Value::from(util::str_at(object, &["spec", "policyName"])),
        Value::from(param_ref_cell(object.pointer("/spec/paramRef"))),
        util::age(object, now),
    ]
}

/// The list and patch semantics of the kind.
pub static EXTENSIONS: &[Extensions] = &[
    Extensions {
        schema: "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyBindingSpec",
        property: "validationActions",
        list_type: Some(ListType::Set),
        ..NONE
    },
    atomic_struct("io.k8s.api.admissionregistration.v1.ParamRef"),
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
    version: "v1",
    kind: KIND,
    list_kind: "ValidatingAdmissionPolicyBindingList",
    resource: "validatingadmissionpolicybindings",
    singular: "validatingadmissionpolicybinding",
    short_names: &[],
    namespaced: false,
    create_on_update: false,
    verbs: crate::resource::ALL_VERBS,
    subresources: &[],
    categories: &["api-extensions"],
    storage_prefix: "validatingadmissionpolicybindings",
    storage_api_version: API_VERSION,
    schema: &SCHEMA,
    protobuf: true,
    feature_gate: None,
    extensions: EXTENSIONS,
    openapi_schema: crate::schema::schema_of::<
        k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding,
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
