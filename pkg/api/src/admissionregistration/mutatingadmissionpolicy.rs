//! MutatingAdmissionPolicies (`admissionregistration.k8s.io/v1alpha1`, cluster-scoped, alpha:
//! served only with the `MutatingAdmissionPolicy` feature gate on and the group version enabled
//! by `--runtime-config`): CEL mutations of writes, bound to resources by
//! MutatingAdmissionPolicyBindings ([`super::mutatingadmissionpolicybinding`]).
//!
//! Upstream's defaulting (Kubernetes 1.33): `failurePolicy` `Fail`; in `matchConstraints`
//! empty namespace and object selectors, `matchPolicy` `Equivalent` and each rule's `scope`
//! `*`.
//!
//! Upstream's rules (`ValidateMutatingAdmissionPolicy`), as genplane checks them:
//! - the name is a DNS-1123 subdomain;
//! - `paramKind`, `variables`, `matchConditions` and `failurePolicy` as a
//!   ValidatingAdmissionPolicy's;
//! - `matchConstraints` is required, with at least one `resourceRules` item, rules as the
//!   webhooks' but without the `DELETE` operation (a mutation has no object to change on a
//!   delete);
//! - `mutations`: at least one; each a `patchType` of `ApplyConfiguration` or `JSONPatch`,
//!   with the matching `applyConfiguration` or `jsonPatch` (and not the other) and its
//!   `expression`;
//! - `reinvocationPolicy` required, `Never` or `IfNeeded`.
//!
//! Expressions are compiled by the `MutatingAdmissionPolicy` admission plugin, not here: an
//! expression that does not compile is a configuration error of the policy when a write matches
//! it, subject to its `failurePolicy`.
//!
//! On create the generation is 1; an update that changes `spec` increments it.

use std::collections::BTreeMap;

use genplane_apimachinery::codec::decode::{self, Decoded};
use genplane_apimachinery::codec::schema::{Field, Struct, Type};
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::meta::schemas::{LABEL_SELECTOR, OBJECT_META};
use genplane_apimachinery::meta::{ObjectMeta, validate_object_meta, validate_object_meta_update};
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use genplane_apimachinery::validation::name_is_dns_subdomain;
use serde::Deserialize;
use serde_json::{Value, json};

use super::types::{MatchResources, MutatingPolicySpec as Spec};
use super::validatingadmissionpolicy::{
    PARAM_KIND, VARIABLE, default_match_resources, validate_failure_policy,
    validate_match_resources, validate_param_kind, validate_variables,
};
use super::{
    MATCH_CONDITION, REINVOCATION_POLICIES, RULE_WITH_OPERATIONS, validate_match_conditions,
};
use crate::schema::{Extensions, atomic_list, atomic_struct, keyed_list};
use crate::table::{self, ColumnDefinition};
use crate::util;

/// The kind.
pub const KIND: &str = "MutatingAdmissionPolicy";
/// The API version of the alpha kinds.
pub const API_VERSION: &str = "admissionregistration.k8s.io/v1alpha1";
/// The patch types of a mutation.
pub const PATCH_TYPES: &[&str] = &["ApplyConfiguration", "JSONPatch"];
/// The operations a MutatingAdmissionPolicy's rules may name (no `DELETE`).
pub const OPERATIONS: &[&str] = &["*", "CONNECT", "CREATE", "UPDATE"];

static NAMED_RULE_WITH_OPERATIONS: Struct = Struct {
    name: "NamedRuleWithOperations",
    fields: &[
        Field::new("resourceNames", 1, Type::List(&Type::String)),
        Field::inline(2, &RULE_WITH_OPERATIONS),
    ],
};

/// `admissionregistration/v1alpha1.MatchResources` (also the binding's `matchResources`).
pub(super) static MATCH_RESOURCES: Struct = Struct {
    name: "MatchResources",
    fields: &[
        Field::pointer("namespaceSelector", 1, Type::Struct(&LABEL_SELECTOR)),
        Field::pointer("objectSelector", 2, Type::Struct(&LABEL_SELECTOR)),
        Field::new(
            "resourceRules",
            3,
            Type::List(&Type::Struct(&NAMED_RULE_WITH_OPERATIONS)),
        ),
        Field::new(
            "excludeResourceRules",
            4,
            Type::List(&Type::Struct(&NAMED_RULE_WITH_OPERATIONS)),
        ),
        Field::pointer("matchPolicy", 7, Type::String),
    ],
};

static EXPRESSION: Struct = Struct {
    name: "ApplyConfiguration",
    fields: &[Field::new("expression", 1, Type::String)],
};

static MUTATION: Struct = Struct {
    name: "Mutation",
    fields: &[
        Field::new("patchType", 2, Type::String),
        Field::pointer("applyConfiguration", 3, Type::Struct(&EXPRESSION)),
        Field::pointer("jsonPatch", 4, Type::Struct(&EXPRESSION)),
    ],
};

static SPEC: Struct = Struct {
    name: "MutatingAdmissionPolicySpec",
    fields: &[
        Field::pointer("paramKind", 1, Type::Struct(&PARAM_KIND)),
        Field::pointer("matchConstraints", 2, Type::Struct(&MATCH_RESOURCES)),
        Field::new("variables", 3, Type::List(&Type::Struct(&VARIABLE))),
        Field::new("mutations", 4, Type::List(&Type::Struct(&MUTATION))),
        Field::pointer("failurePolicy", 5, Type::String),
        Field::new(
            "matchConditions",
            6,
            Type::List(&Type::Struct(&MATCH_CONDITION)),
        ),
        Field::pointer("reinvocationPolicy", 7, Type::String),
    ],
};

/// The shape of an admissionregistration/v1alpha1 MutatingAdmissionPolicy.
pub static SCHEMA: Struct = Struct {
    name: "MutatingAdmissionPolicy",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("spec", 2, Type::Struct(&SPEC)),
    ],
};

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Policy {
    spec: Spec,
}

/// Type-checks and normalizes a MutatingAdmissionPolicy.
pub fn decode(object: &Value) -> Result<Decoded, ApiError> {
    decode::decode(object, &SCHEMA).map_err(|e| e.to_api_error(KIND, API_VERSION))
}

/// Upstream's defaulting: `failurePolicy` `Fail` and the defaults of `matchConstraints`.
pub fn default(object: &mut Value) {
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if spec.get("failurePolicy").is_none_or(Value::is_null) {
        spec.insert("failurePolicy".into(), json!("Fail"));
    }
    if let Some(constraints) = spec.get_mut("matchConstraints") {
        default_match_resources(constraints);
    }
}

/// Validates `matchConstraints` (`require_rules`) or a binding's `matchResources` as a
/// ValidatingAdmissionPolicy's, and refuses the `DELETE` operation in their rules.
pub(super) fn validate_mutating_match_resources(
    resources: &MatchResources,
    require_rules: bool,
    path: &Path,
) -> ErrorList {
    let mut errors = validate_match_resources(resources, require_rules, path);
    for (list, rules) in [
        ("resourceRules", &resources.resource_rules),
        ("excludeResourceRules", &resources.exclude_resource_rules),
    ] {
        for (i, named) in rules.iter().enumerate() {
            for (j, operation) in named.rule.operations.iter().enumerate() {
                if operation == "DELETE" {
                    errors.push(Error::not_supported(
                        &path.child(list).index(i).child("operations").index(j),
                        operation.as_str(),
                        OPERATIONS,
                    ));
                }
            }
        }
    }
    errors
}

fn validate_mutations(spec: &Spec, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    if spec.mutations.is_empty() {
        errors.push(Error::required(
            path,
            "mutations must contain at least one item",
        ));
    }
    for (i, mutation) in spec.mutations.iter().enumerate() {
        let at = path.index(i);
        let expression = |field: &str, given: &Option<super::types::MutationExpression>| {
            let mut errors = ErrorList::new();
            match given {
                None => errors.push(Error::required(
                    &at.child(field),
                    format!(
                        "{field} field is required when patchType is {}",
                        mutation.patch_type
                    ),
                )),
                Some(e) if e.expression.trim().is_empty() => errors.push(Error::required(
                    &at.child(field).child("expression"),
                    "expression is not specified",
                )),
                Some(_) => {}
            }
            errors
        };
        let forbidden = |field: &str, given: bool| {
            let mut errors = ErrorList::new();
            if given {
                errors.push(Error::forbidden(
                    &at.child(field),
                    format!("must not be set when patchType is {}", mutation.patch_type),
                ));
            }
            errors
        };
        match mutation.patch_type.as_str() {
            "" => errors.push(Error::required(&at.child("patchType"), "")),
            "ApplyConfiguration" => {
                errors.extend(expression(
                    "applyConfiguration",
                    &mutation.apply_configuration,
                ));
                errors.extend(forbidden("jsonPatch", mutation.json_patch.is_some()));
            }
            "JSONPatch" => {
                errors.extend(expression("jsonPatch", &mutation.json_patch));
                errors.extend(forbidden(
                    "applyConfiguration",
                    mutation.apply_configuration.is_some(),
                ));
            }
            other => errors.push(Error::not_supported(
                &at.child("patchType"),
                other,
                PATCH_TYPES,
            )),
        }
    }
    errors
}

fn validate_spec(spec: &Spec) -> ErrorList {
    let path = Path::new("spec");
    let mut errors = ErrorList::new();
    if let Some(param_kind) = &spec.param_kind {
        errors.extend(validate_param_kind(param_kind, &path.child("paramKind")));
    }
    match &spec.match_constraints {
        None => errors.push(Error::required(&path.child("matchConstraints"), "")),
        Some(constraints) => errors.extend(validate_mutating_match_resources(
            constraints,
            true,
            &path.child("matchConstraints"),
        )),
    }
    errors.extend(validate_variables(
        &spec.variables,
        &path.child("variables"),
    ));
    errors.extend(validate_mutations(spec, &path.child("mutations")));
    errors.extend(validate_match_conditions(
        &spec.match_conditions,
        &path.child("matchConditions"),
    ));
    errors.extend(validate_failure_policy(
        spec.failure_policy.as_deref(),
        &path.child("failurePolicy"),
    ));
    match spec.reinvocation_policy.as_deref() {
        None | Some("") => errors.push(Error::required(&path.child("reinvocationPolicy"), "")),
        Some(policy) if !REINVOCATION_POLICIES.contains(&policy) => {
            errors.push(Error::not_supported(
                &path.child("reinvocationPolicy"),
                policy,
                REINVOCATION_POLICIES,
            ));
        }
        Some(_) => {}
    }
    errors
}

fn validate_meta_and_spec(meta: &ObjectMeta, policy: &Policy) -> ErrorList {
    let mut errors =
        validate_object_meta(meta, false, name_is_dns_subdomain, &Path::new("metadata"));
    errors.extend(validate_spec(&policy.spec));
    errors
}

/// Validates a new MutatingAdmissionPolicy.
pub fn validate(object: &Value) -> Result<ErrorList, ApiError> {
    let (meta, policy) = util::decode_typed::<Policy>(object, &SCHEMA, KIND, API_VERSION)?;
    Ok(validate_meta_and_spec(&meta, &policy))
}

/// Validates an update of a MutatingAdmissionPolicy.
pub fn validate_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let (meta, policy) = util::decode_typed::<Policy>(new, &SCHEMA, KIND, API_VERSION)?;
    let (old_meta, _) = util::decode_typed::<Policy>(old, &SCHEMA, KIND, API_VERSION)?;
    let mut errors = validate_object_meta_update(&meta, &old_meta, &Path::new("metadata"));
    errors.extend(validate_spec(&policy.spec));
    Ok(errors)
}

/// Field-selector values (`metadata.namespace` is always empty).
pub fn field_values(object: &Value) -> BTreeMap<&'static str, String> {
    crate::rbac::cluster_field_values(object)
}

/// `NAME MUTATIONS PARAMKIND AGE`.
pub const COLUMNS: &[ColumnDefinition] = &[
    table::NAME,
    ColumnDefinition {
        name: "Mutations",
        type_: "integer",
        format: "",
        description: "Mutation indicates the number of mutations rules defined in this configuration",
        priority: 0,
    },
    ColumnDefinition {
        name: "ParamKind",
        type_: "string",
        format: "",
        description: "ParamKind specifies the kind of resources used to parameterize this policy",
        priority: 0,
    },
    table::AGE,
];

/// The cells: name, the number of mutations, `apiVersion/kind` of the params (`<unset>`),
/// age.
pub fn row(object: &Value, now: i64) -> Vec<Value> {
    let spec = &object["spec"];
    vec![
        util::name(object),
        Value::from(spec["mutations"].as_array().map_or(0, Vec::len)),
        Value::from(super::validatingadmissionpolicy::param_kind_cell(spec)),
        util::age(object, now),
    ]
}

const MATCH: &str = "io.k8s.api.admissionregistration.v1alpha1.MatchResources";
const NAMED_RULE: &str = "io.k8s.api.admissionregistration.v1alpha1.NamedRuleWithOperations";

/// The list semantics of v1alpha1 `MatchResources` (shared with the binding).
pub(super) const MATCH_RESOURCES_EXTENSIONS: [Extensions; 8] = [
    atomic_struct(MATCH),
    atomic_list(MATCH, "resourceRules"),
    atomic_list(MATCH, "excludeResourceRules"),
    atomic_list(NAMED_RULE, "resourceNames"),
    atomic_list(NAMED_RULE, "operations"),
    atomic_list(NAMED_RULE, "apiGroups"),
    atomic_list(NAMED_RULE, "apiVersions"),
    atomic_list(NAMED_RULE, "resources"),
];

const SPEC_SCHEMA: &str = "io.k8s.api.admissionregistration.v1alpha1.MutatingAdmissionPolicySpec";

/// The list and patch semantics of the kind.
pub static EXTENSIONS: &[Extensions] = &[
    atomic_list(SPEC_SCHEMA, "mutations"),
    keyed_list(SPEC_SCHEMA, "matchConditions", &["name"]),
    atomic_list(SPEC_SCHEMA, "variables"),
    MATCH_RESOURCES_EXTENSIONS[0],
    MATCH_RESOURCES_EXTENSIONS[1],
    MATCH_RESOURCES_EXTENSIONS[2],
    MATCH_RESOURCES_EXTENSIONS[3],
    MATCH_RESOURCES_EXTENSIONS[4],
    MATCH_RESOURCES_EXTENSIONS[5],
    MATCH_RESOURCES_EXTENSIONS[6],
    MATCH_RESOURCES_EXTENSIONS[7],
    atomic_struct("io.k8s.api.admissionregistration.v1alpha1.ParamKind"),
];

/// This resource in the catalog: everything the server needs to serve it.
pub const INFO: crate::resource::ResourceInfo = crate::resource::ResourceInfo {
    group: super::GROUP_NAME,
    version: "v1alpha1",
    kind: KIND,
    list_kind: "MutatingAdmissionPolicyList",
    resource: "mutatingadmissionpolicies",
    singular: "mutatingadmissionpolicy",
    short_names: &[],
    namespaced: false,
    create_on_update: false,
    verbs: crate::resource::ALL_VERBS,
    subresources: &[],
    categories: &["api-extensions"],
    storage_prefix: "mutatingadmissionpolicies",
    storage_api_version: API_VERSION,
    schema: &SCHEMA,
    protobuf: true,
    feature_gate: Some(crate::features::MUTATING_ADMISSION_POLICY),
    extensions: EXTENSIONS,
    openapi_schema: crate::schema::schema_of::<
        k8s_openapi::api::admissionregistration::v1alpha1::MutatingAdmissionPolicy,
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
