//! ValidatingAdmissionPolicies (`admissionregistration.k8s.io/v1`, cluster-scoped, with a
//! `status` subresource): CEL validations of writes, bound to resources by
//! ValidatingAdmissionPolicyBindings ([`super::validatingadmissionpolicybinding`]).
//!
//! Upstream's defaulting (`SetDefaults_ValidatingAdmissionPolicySpec`,
//! `SetDefaults_MatchResources`, `SetDefaults_NamedRuleWithOperations`): `failurePolicy`
//! `Fail`; in `matchConstraints` empty namespace and object selectors, `matchPolicy`
//! `Equivalent` and each rule's `scope` `*`.
//!
//! Upstream's rules (`ValidateValidatingAdmissionPolicy`, Kubernetes 1.33), as genplane checks
//! them:
//! - the name is a DNS-1123 subdomain;
//! - `paramKind`: `apiVersion` (a group/version) and `kind` are required;
//! - `matchConstraints` is required, with at least one `resourceRules` item; rules (included
//!   and excluded) as the webhooks' rules, `resourceNames` without duplicates; selectors valid;
//!   `matchPolicy` `Exact` or `Equivalent`;
//! - `validations` and `auditAnnotations` not both empty; a validation has an `expression`, a
//!   `message` without line breaks (required when the expression has them) and a `reason` of
//!   `Unauthorized`, `Forbidden`, `Invalid`, `RequestEntityTooLarge`;
//! - `auditAnnotations`: a unique qualified name as `key` and a `valueExpression`;
//! - `matchConditions` as the webhooks'; `variables`: a unique CEL identifier as `name` and an
//!   `expression`;
//! - `failurePolicy` `Fail` or `Ignore`.
//!
//! Expressions are compiled by the `ValidatingAdmissionPolicy` admission plugin, not here
//! (this crate does no CEL): an expression that does not compile is a configuration error of
//! the policy when a write matches it, subject to its `failurePolicy`, and is reported in
//! `status.typeChecking`.
//!
//! The `spec` is kept on status writes and the `status` on spec writes; `metadata.generation`
//! grows with each change of the spec.

use std::collections::{BTreeMap, BTreeSet};

use genplane_apimachinery::codec::decode::{self, Decoded};
use genplane_apimachinery::codec::schema::{Field, Struct, Type};
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::meta::schemas::{CONDITION, LABEL_SELECTOR, OBJECT_META};
use genplane_apimachinery::meta::{ObjectMeta, validate_object_meta, validate_object_meta_update};
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use genplane_apimachinery::validation::{is_qualified_name, name_is_dns_subdomain};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{
    API_VERSION, FAILURE_POLICIES, MATCH_CONDITION, MATCH_POLICIES, RULE_WITH_OPERATIONS,
    validate_match_conditions, validate_rule,
};
use crate::rbac::validate_label_selector;
use crate::schema::{Extensions, atomic_list, atomic_struct, keyed_list};
use crate::table::{self, ColumnDefinition};
use crate::util;

/// The kind.
pub const KIND: &str = "ValidatingAdmissionPolicy";

/// The reasons a validation may give.
pub const REASONS: &[&str] = &[
    "Unauthorized",
    "Forbidden",
    "Invalid",
    "RequestEntityTooLarge",
];

pub(super) static PARAM_KIND: Struct = Struct {
    name: "ParamKind",
    fields: &[
        Field::new("apiVersion", 1, Type::String),
        Field::new("kind", 2, Type::String),
    ],
};

pub(super) static NAMED_RULE_WITH_OPERATIONS: Struct = Struct {
    name: "NamedRuleWithOperations",
    fields: &[
        Field::new("resourceNames", 1, Type::List(&Type::String)),
        Field::inline(2, &RULE_WITH_OPERATIONS),
    ],
};

/// `admissionregistration/v1.MatchResources` (also the binding's `matchResources`).
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

static VALIDATION: Struct = Struct {
    name: "Validation",
    fields: &[
        Field::new("expression", 1, Type::String),
        Field::new("message", 2, Type::String),
        Field::pointer("reason", 3, Type::String),
        Field::new("messageExpression", 4, Type::String),
    ],
};

static AUDIT_ANNOTATION: Struct = Struct {
    name: "AuditAnnotation",
    fields: &[
        Field::new("key", 1, Type::String),
        Field::new("valueExpression", 2, Type::String),
    ],
};

pub(super) static VARIABLE: Struct = Struct {
    name: "Variable",
    fields: &[
        Field::new("name", 1, Type::String),
        Field::new("expression", 2, Type::String),
    ],
};

static SPEC: Struct = Struct {
    name: "ValidatingAdmissionPolicySpec",
    fields: &[
        Field::pointer("paramKind", 1, Type::Struct(&PARAM_KIND)),
        Field::pointer("matchConstraints", 2, Type::Struct(&MATCH_RESOURCES)),
        Field::new("validations", 3, Type::List(&Type::Struct(&VALIDATION))),
        Field::pointer("failurePolicy", 4, Type::String),
        Field::new(
            "auditAnnotations",
            5,
            Type::List(&Type::Struct(&AUDIT_ANNOTATION)),
        ),
        Field::new(
            "matchConditions",
            6,
            Type::List(&Type::Struct(&MATCH_CONDITION)),
        ),
        Field::new("variables", 7, Type::List(&Type::Struct(&VARIABLE))),
    ],
};

static EXPRESSION_WARNING: Struct = Struct {
    name: "ExpressionWarning",
    fields: &[
        Field::new("fieldRef", 2, Type::String),
        Field::new("warning", 3, Type::String),
    ],
};

static TYPE_CHECKING: Struct = Struct {
    name: "TypeChecking",
    fields: &[Field::new(
        "expressionWarnings",
        1,
        Type::List(&Type::Struct(&EXPRESSION_WARNING)),
    )],
};

static STATUS: Struct = Struct {
    name: "ValidatingAdmissionPolicyStatus",
    fields: &[
        Field::new("observedGeneration", 1, Type::Int64),
        Field::pointer("typeChecking", 2, Type::Struct(&TYPE_CHECKING)),
        Field::new("conditions", 3, Type::List(&Type::Struct(&CONDITION))),
    ],
};

/// The shape of an admissionregistration/v1 ValidatingAdmissionPolicy.
pub static SCHEMA: Struct = Struct {
    name: "ValidatingAdmissionPolicy",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("spec", 2, Type::Struct(&SPEC)),
        Field::new("status", 3, Type::Struct(&STATUS)),
    ],
};

pub(super) use super::types::MatchResources;
use super::types::{NamedRule, PolicySpec as Spec};

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Policy {
    spec: Spec,
}

/// Type-checks and normalizes a ValidatingAdmissionPolicy.
pub fn decode(object: &Value) -> Result<Decoded, ApiError> {
    decode::decode(object, &SCHEMA).map_err(|e| e.to_api_error(KIND, API_VERSION))
}

/// Upstream's defaulting of `matchConstraints` / `matchResources` (the selectors, the match
/// policy, each rule's scope).
pub(super) fn default_match_resources(resources: &mut Value) {
    let Some(resources) = resources.as_object_mut() else {
        return;
    };
    for (key, value) in [
        ("namespaceSelector", json!({})),
        ("objectSelector", json!({})),
        ("matchPolicy", json!("Equivalent")),
    ] {
        if resources.get(key).is_none_or(Value::is_null) {
            resources.insert(key.to_owned(), value);
        }
    }
    for list in ["resourceRules", "excludeResourceRules"] {
        if let Some(rules) = resources.get_mut(list).and_then(Value::as_array_mut) {
            for rule in rules.iter_mut().filter_map(Value::as_object_mut) {
                if rule.get("scope").is_none_or(Value::is_null) {
                    rule.insert("scope".into(), json!("*"));
                }
            }
        }
    }
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

fn validate_named_rules(rules: &[NamedRule], path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    for (i, named) in rules.iter().enumerate() {
        let at = path.index(i);
        let mut names = BTreeSet::new();
        for (j, name) in named.resource_names.iter().enumerate() {
            if !names.insert(name.as_str()) {
                errors.push(Error::duplicate(
                    &at.child("resourceNames").index(j),
                    name.as_str(),
                ));
            }
        }
        errors.extend(validate_rule(&named.rule, &at));
    }
    errors
}

/// Validates `matchConstraints` (`require_rules`: a policy's needs `resourceRules`) or a
/// binding's `matchResources`, at `path`.
pub(super) fn validate_match_resources(
    resources: &MatchResources,
    require_rules: bool,
    path: &Path,
) -> ErrorList {
    let mut errors = ErrorList::new();
    if require_rules && resources.resource_rules.is_empty() {
        errors.push(Error::required(&path.child("resourceRules"), ""));
    }
    errors.extend(validate_named_rules(
        &resources.resource_rules,
        &path.child("resourceRules"),
    ));
    errors.extend(validate_named_rules(
        &resources.exclude_resource_rules,
        &path.child("excludeResourceRules"),
    ));
    for (field, selector) in [
        ("namespaceSelector", &resources.namespace_selector),
        ("objectSelector", &resources.object_selector),
    ] {
        if let Some(selector) = selector {
            errors.extend(validate_label_selector(selector, false, &path.child(field)));
        }
    }
    if let Some(policy) = resources
        .match_policy
        .as_deref()
        .filter(|p| !MATCH_POLICIES.contains(p))
    {
        errors.push(Error::not_supported(
            &path.child("matchPolicy"),
            policy,
            MATCH_POLICIES,
        ));
    }
    errors
}

/// Whether `name` is a CEL identifier (`[a-zA-Z_][a-zA-Z0-9_]*`).
fn is_cel_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn validate_spec(spec: &Spec) -> ErrorList {
    let path = Path::new("spec");
    let mut errors = ErrorList::new();
    if let Some(param_kind) = &spec.param_kind {
        errors.extend(validate_param_kind(param_kind, &path.child("paramKind")));
    }
    match &spec.match_constraints {
        None => errors.push(Error::required(&path.child("matchConstraints"), "")),
        Some(constraints) => errors.extend(validate_match_resources(
            constraints,
            true,
            &path.child("matchConstraints"),
        )),
    }
    if spec.validations.is_empty() && spec.audit_annotations.is_empty() {
        errors.push(Error::required(
            &path.child("validations"),
            "validations or auditAnnotations must contain at least one item",
        ));
        errors.push(Error::required(
            &path.child("auditAnnotations"),
            "validations or auditAnnotations must contain at least one item",
        ));
    }
    for (i, validation) in spec.validations.iter().enumerate() {
        let at = path.child("validations").index(i);
        let expression = validation.expression.trim();
        if expression.is_empty() {
            errors.push(Error::required(
                &at.child("expression"),
                "expression is not specified",
            ));
        }
        if validation.message.contains('\n') {
            errors.push(Error::invalid(
                &at.child("message"),
                validation.message.as_str(),
                "message must not contain line breaks",
            ));
        } else if expression.contains('\n') && validation.message.trim().is_empty() {
            errors.push(Error::required(
                &at.child("message"),
                "message must be specified if expression contains line breaks",
            ));
        }
        if let Some(reason) = validation
            .reason
            .as_deref()
            .filter(|r| !REASONS.contains(r))
        {
            errors.push(Error::not_supported(&at.child("reason"), reason, REASONS));
        }
    }
    let mut keys = BTreeSet::new();
    for (i, annotation) in spec.audit_annotations.iter().enumerate() {
        let at = path.child("auditAnnotations").index(i);
        if annotation.key.is_empty() {
            errors.push(Error::required(&at.child("key"), ""));
        } else {
            for message in is_qualified_name(&annotation.key) {
                errors.push(Error::invalid(
                    &at.child("key"),
                    annotation.key.as_str(),
                    message,
                ));
            }
            if !keys.insert(annotation.key.as_str()) {
                errors.push(Error::duplicate(&at.child("key"), annotation.key.as_str()));
            }
        }
        if annotation.value_expression.trim().is_empty() {
            errors.push(Error::required(
                &at.child("valueExpression"),
                "valueExpression is not specified",
            ));
        }
    }
    errors.extend(validate_match_conditions(
        &spec.match_conditions,
        &path.child("matchConditions"),
    ));
    errors.extend(validate_variables(
        &spec.variables,
        &path.child("variables"),
    ));
    errors.extend(validate_failure_policy(
        spec.failure_policy.as_deref(),
        &path.child("failurePolicy"),
    ));
    errors
}

/// Validates a policy's `paramKind` at `at`: `apiVersion` a group/version, `kind` given.
pub(super) fn validate_param_kind(param_kind: &super::types::ParamKind, at: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    if param_kind.api_version.is_empty() {
        errors.push(Error::required(&at.child("apiVersion"), ""));
    } else if param_kind.api_version.split('/').count() > 2
        || param_kind.api_version.split('/').any(str::is_empty)
    {
        errors.push(Error::invalid(
            &at.child("apiVersion"),
            param_kind.api_version.as_str(),
            "must be a valid group/version",
        ));
    }
    if param_kind.kind.is_empty() {
        errors.push(Error::required(&at.child("kind"), ""));
    }
    errors
}

/// Validates a policy's `variables` at `path`: unique CEL identifiers with expressions.
pub(super) fn validate_variables(variables: &[super::types::Variable], path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    let mut names = BTreeSet::new();
    for (i, variable) in variables.iter().enumerate() {
        let at = path.index(i);
        if variable.name.is_empty() {
            errors.push(Error::required(&at.child("name"), ""));
        } else if !is_cel_identifier(&variable.name) {
            errors.push(Error::invalid(
                &at.child("name"),
                variable.name.as_str(),
                "name is not a valid CEL identifier",
            ));
        } else if !names.insert(variable.name.as_str()) {
            errors.push(Error::duplicate(&at.child("name"), variable.name.as_str()));
        }
        if variable.expression.trim().is_empty() {
            errors.push(Error::required(&at.child("expression"), ""));
        }
    }
    errors
}

/// Validates a policy's `failurePolicy` at `path`: `Fail` or `Ignore` when set.
pub(super) fn validate_failure_policy(policy: Option<&str>, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    if let Some(policy) = policy.filter(|p| !FAILURE_POLICIES.contains(p)) {
        errors.push(Error::not_supported(path, policy, FAILURE_POLICIES));
    }
    errors
}

fn validate_meta_and_spec(meta: &ObjectMeta, policy: &Policy) -> ErrorList {
    let mut errors =
        validate_object_meta(meta, false, name_is_dns_subdomain, &Path::new("metadata"));
    errors.extend(validate_spec(&policy.spec));
    errors
}

/// Validates a new ValidatingAdmissionPolicy.
pub fn validate(object: &Value) -> Result<ErrorList, ApiError> {
    let (meta, policy) = util::decode_typed::<Policy>(object, &SCHEMA, KIND, API_VERSION)?;
    Ok(validate_meta_and_spec(&meta, &policy))
}

/// Validates an update of a ValidatingAdmissionPolicy.
pub fn validate_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let (meta, policy) = util::decode_typed::<Policy>(new, &SCHEMA, KIND, API_VERSION)?;
    let (old_meta, _) = util::decode_typed::<Policy>(old, &SCHEMA, KIND, API_VERSION)?;
    let mut errors = validate_object_meta_update(&meta, &old_meta, &Path::new("metadata"));
    errors.extend(validate_spec(&policy.spec));
    Ok(errors)
}

/// Validates a status update: the conditions are well formed.
pub fn validate_status_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let (meta, _) = util::decode_typed::<Policy>(new, &SCHEMA, KIND, API_VERSION)?;
    let (old_meta, _) = util::decode_typed::<Policy>(old, &SCHEMA, KIND, API_VERSION)?;
    let mut errors = validate_object_meta_update(&meta, &old_meta, &Path::new("metadata"));
    let conditions = new
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    util::validate_conditions(
        conditions.iter().map(|c| {
            (
                c["type"].as_str().unwrap_or_default(),
                c["status"].as_str().unwrap_or_default(),
            )
        }),
        &Path::new("status").child("conditions"),
        &mut errors,
    );
    Ok(errors)
}

/// Field-selector values (`metadata.namespace` is always empty).
pub fn field_values(object: &Value) -> BTreeMap<&'static str, String> {
    crate::rbac::cluster_field_values(object)
}

/// `NAME VALIDATIONS PARAMKIND AGE`.
pub const COLUMNS: &[ColumnDefinition] = &[
    table::NAME,
    ColumnDefinition {
        name: "Validations",
        type_: "integer",
        format: "",
        description: "Validations indicates the number of validation rules defined in this configuration",
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

/// The cells: name, the number of validations, `apiVersion/kind` of the params (`<unset>`),
/// age.
pub fn row(object: &Value, now: i64) -> Vec<Value> {
    let spec = &object["spec"];
    vec![
        util::name(object),
        Value::from(spec["validations"].as_array().map_or(0, Vec::len)),
        Value::from(param_kind_cell(spec)),
        util::age(object, now),
    ]
}

/// What the `ParamKind` cell of a policy (validating or mutating) shows: `apiVersion/kind`, or
/// `<unset>`.
pub(super) fn param_kind_cell(spec: &Value) -> String {
    match spec.get("paramKind").filter(|p| p.is_object()) {
        Some(kind) => format!(
            "{}/{}",
            kind["apiVersion"].as_str().unwrap_or_default(),
            kind["kind"].as_str().unwrap_or_default()
        ),
        None => "<unset>".to_owned(),
    }
}

const NAMED_RULE: &str = "io.k8s.api.admissionregistration.v1.NamedRuleWithOperations";

/// The list semantics of `MatchResources` (shared with the binding).
pub(super) const MATCH_RESOURCES_EXTENSIONS: [Extensions; 8] = [
    atomic_struct("io.k8s.api.admissionregistration.v1.MatchResources"),
    atomic_list(
        "io.k8s.api.admissionregistration.v1.MatchResources",
        "resourceRules",
    ),
    atomic_list(
        "io.k8s.api.admissionregistration.v1.MatchResources",
        "excludeResourceRules",
    ),
    atomic_list(NAMED_RULE, "resourceNames"),
    atomic_list(NAMED_RULE, "operations"),
    atomic_list(NAMED_RULE, "apiGroups"),
    atomic_list(NAMED_RULE, "apiVersions"),
    atomic_list(NAMED_RULE, "resources"),
];

const SPEC_SCHEMA: &str = "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicySpec";

/// The list and patch semantics of the kind.
pub static EXTENSIONS: &[Extensions] = &[
    atomic_list(SPEC_SCHEMA, "validations"),
    atomic_list(SPEC_SCHEMA, "auditAnnotations"),
    keyed_list(SPEC_SCHEMA, "matchConditions", &["name"]),
    keyed_list(SPEC_SCHEMA, "variables", &["name"]),
    atomic_list(
        "io.k8s.api.admissionregistration.v1.TypeChecking",
        "expressionWarnings",
    ),
    keyed_list(
        "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyStatus",
        "conditions",
        &["type"],
    ),
    MATCH_RESOURCES_EXTENSIONS[0],
    MATCH_RESOURCES_EXTENSIONS[1],
    MATCH_RESOURCES_EXTENSIONS[2],
    MATCH_RESOURCES_EXTENSIONS[3],
    MATCH_RESOURCES_EXTENSIONS[4],
    MATCH_RESOURCES_EXTENSIONS[5],
    MATCH_RESOURCES_EXTENSIONS[6],
    MATCH_RESOURCES_EXTENSIONS[7],
    atomic_struct("io.k8s.api.admissionregistration.v1.ParamKind"),
];

/// This resource in the catalog: everything the server needs to serve it.
pub const INFO: crate::resource::ResourceInfo = crate::resource::ResourceInfo {
    group: super::GROUP_NAME,
    version: "v1",
    kind: KIND,
    list_kind: "ValidatingAdmissionPolicyList",
    resource: "validatingadmissionpolicies",
    singular: "validatingadmissionpolicy",
    short_names: &[],
    namespaced: false,
    create_on_update: false,
    verbs: crate::resource::ALL_VERBS,
    subresources: &[crate::resource::Subresource {
        name: "status",
        kind: KIND,
        verbs: crate::resource::STATUS_VERBS,
        rules: Some(crate::resource::SubresourceRules {
            prepare_for_update: util::prepare_status_update,
            validate_update: validate_status_update,
        }),
        body: None,
    }],
    categories: &["api-extensions"],
    storage_prefix: "validatingadmissionpolicies",
    storage_api_version: API_VERSION,
    schema: &SCHEMA,
    protobuf: true,
    feature_gate: None,
    extensions: EXTENSIONS,
    openapi_schema: crate::schema::schema_of::<
        k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy,
    >,
    hooks: crate::resource::Hooks {
        decode,
        default,
        prepare_for_create: util::prepare_spec_create,
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
