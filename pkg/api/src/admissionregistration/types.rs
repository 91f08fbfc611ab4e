//! The admission configuration kinds' fields as code reads them (validation here, the
//! admission plugins in `genplane-admission`): plain structs deserialized from the stored
//! JSON, every field optional (missing fields are their defaults).

use crate::rbac::LabelSelector;
use serde::Deserialize;

/// A rule of operations on resources (`RuleWithOperations`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Rule {
    /// `CREATE`, `UPDATE`, `DELETE`, `CONNECT` or `*`.
    pub operations: Vec<String>,
    /// API groups, or `*`.
    pub api_groups: Vec<String>,
    /// API versions, or `*`.
    pub api_versions: Vec<String>,
    /// `resource`, `resource/subresource`, with `*` wildcards.
    pub resources: Vec<String>,
    /// `Cluster`, `Namespaced` or `*` (the default).
    pub scope: Option<String>,
}

/// A named CEL condition (`matchConditions`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct MatchCondition {
    /// Its name.
    pub name: String,
    /// The expression, of type bool.
    pub expression: String,
}

/// A rule limited to some object names (`NamedRuleWithOperations`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NamedRule {
    /// The object names (none: any).
    pub resource_names: Vec<String>,
    /// The operations and resources.
    #[serde(flatten)]
    pub rule: Rule,
}

/// A policy's `matchConstraints`, a binding's `matchResources`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MatchResources {
    /// Selects namespaces by their labels.
    pub namespace_selector: Option<LabelSelector>,
    /// Selects objects by their labels.
    pub object_selector: Option<LabelSelector>,
    /// What is matched (none: everything).
    pub resource_rules: Vec<NamedRule>,
    /// What is never matched.
    pub exclude_resource_rules: Vec<NamedRule>,
    /// `Equivalent` (the default) or `Exact`.
    pub match_policy: Option<String>,
}

/// A policy's `paramKind`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ParamKind {
    /// `group/version` of the params.
    pub api_version: String,
    /// Their kind.
    pub kind: String,
}

/// One of a policy's `validations`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Validation {
    /// The CEL expression that must be true.
    pub expression: String,
    /// The message when it is not.
    pub message: String,
    /// The refusal's reason (`Invalid` when unset).
    pub reason: Option<String>,
    /// A CEL expression giving the message.
    pub message_expression: String,
}

/// One of a policy's `auditAnnotations`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AuditAnnotation {
    /// The key (prefixed with the policy's name in the audit event).
    pub key: String,
    /// A CEL expression giving the value (a string, or null for none).
    pub value_expression: String,
}

/// One of a policy's `variables`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Variable {
    /// Its name (`variables.<name>` in other expressions).
    pub name: String,
    /// The CEL expression giving its value.
    pub expression: String,
}

/// A ValidatingAdmissionPolicy's `spec`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PolicySpec {
    /// The kind of the params.
    pub param_kind: Option<ParamKind>,
    /// What the policy applies to.
    pub match_constraints: Option<MatchResources>,
    /// The checks.
    pub validations: Vec<Validation>,
    /// `Fail` (the default) or `Ignore`.
    pub failure_policy: Option<String>,
    /// Values recorded in the audit event.
    pub audit_annotations: Vec<AuditAnnotation>,
    /// Conditions that must all hold for the policy to apply.
    pub match_conditions: Vec<MatchCondition>,
    /// Values named for the other expressions.
    pub variables: Vec<Variable>,
}

/// A binding's `paramRef`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ParamRef {
    /// The param's name.
    pub name: String,
    /// Its namespace (the request's when empty, for a namespaced param kind).
    pub namespace: String,
    /// Selects the params by their labels (instead of a name).
    pub selector: Option<LabelSelector>,
    /// `Allow` or `Deny`, when no param is found.
    pub parameter_not_found_action: Option<String>,
}

/// A ValidatingAdmissionPolicyBinding's `spec`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BindingSpec {
    /// The policy bound.
    pub policy_name: String,
    /// Its params.
    pub param_ref: Option<ParamRef>,
    /// What the binding applies to, within what the policy matches.
    pub match_resources: Option<MatchResources>,
    /// `Deny`, `Warn` and `Audit`.
    pub validation_actions: Vec<String>,
}

/// The CEL expression of a mutation (`applyConfiguration`, `jsonPatch`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct MutationExpression {
    /// The expression.
    pub expression: String,
}

/// One of a MutatingAdmissionPolicy's `mutations`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Mutation {
    /// `ApplyConfiguration` or `JSONPatch`.
    pub patch_type: String,
    /// An expression giving an `Object{...}` merged as server-side apply merges.
    pub apply_configuration: Option<MutationExpression>,
    /// An expression giving a list of `JSONPatch{...}` operations.
    pub json_patch: Option<MutationExpression>,
}

/// A MutatingAdmissionPolicy's `spec` (`admissionregistration.k8s.io/v1alpha1`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MutatingPolicySpec {
    /// The kind of the params.
    pub param_kind: Option<ParamKind>,
    /// What the policy applies to.
    pub match_constraints: Option<MatchResources>,
    /// Values named for the other expressions.
    pub variables: Vec<Variable>,
    /// The changes, in order.
    pub mutations: Vec<Mutation>,
    /// `Fail` (the default) or `Ignore`.
    pub failure_policy: Option<String>,
    /// Conditions that must all hold for the policy to apply.
    pub match_conditions: Vec<MatchCondition>,
    /// `Never` or `IfNeeded`.
    pub reinvocation_policy: Option<String>,
}

/// A MutatingAdmissionPolicyBinding's `spec`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MutatingBindingSpec {
    /// The policy bound.
    pub policy_name: String,
    /// Its params.
    pub param_ref: Option<ParamRef>,
    /// What the binding applies to, within what the policy matches.
    pub match_resources: Option<MatchResources>,
}
