//! The `ValidatingAdmissionPolicy` plugin, as Kubernetes 1.33's: every write is checked by the
//! CEL `validations` of the stored `admissionregistration.k8s.io/v1` ValidatingAdmissionPolicies
//! through the ValidatingAdmissionPolicyBindings that name them ([`Policies`]).
//!
//! For each policy (by name) and each of its bindings (by name):
//!
//! 1. the policy's `matchConstraints` must match the write, then the binding's
//!    `matchResources` (none: everything the policy matches): `namespaceSelector` and
//!    `objectSelector` as webhooks select ([`crate::webhook::selectors_match`]), no
//!    `excludeResourceRules` rule, and a `resourceRules` rule (operations, groups, versions,
//!    resources with `*` and subresources, scope, `resourceNames`; none: any resource) with
//!    `matchPolicy: Equivalent` matching any version of the same group and resource;
//! 2. the params: none without `paramKind` (or without `paramRef`); else the objects of that
//!    kind (any served kind, custom resources included) named by `paramRef.name` or selected by
//!    `paramRef.selector`, in `paramRef.namespace` or the request's namespace for a namespaced
//!    kind; none found is a refusal with `parameterNotFoundAction: Deny`, an admit with
//!    `Allow`;
//! 3. per param: `matchConditions` (all must hold), then `variables` in order (each seeing the
//!    ones before it as `variables.<name>`), then the `validations`, and the
//!    `auditAnnotations`, with `object`, `oldObject`, `request` (the `AdmissionReview` request
//!    without the objects), `params`, `namespaceObject` (the namespace's `metadata`, `spec` and
//!    `status`) and `variables`;
//! 4. a validation that is not `true` fails with its `messageExpression`'s result, else its
//!    `message`, else `failed expression: <expression>`, and its `reason` (`Invalid` when
//!    unset: 422; `Forbidden` 403, `Unauthorized` 401, `RequestEntityTooLarge` 413); the
//!    binding's `validationActions` decide: `Deny` refuses the write
//!    (`<resource> "<name>" is forbidden: ValidatingAdmissionPolicy '<policy>' with binding
//!    '<binding>' denied request: <message>`), `Warn` adds a `Warning` header
//!    (`Validation failed for ValidatingAdmissionPolicy '<policy>' with binding '<binding>':
//!    <message>`), `Audit` the audit annotation
//!    `validation.policy.admission.k8s.io/validation_failure`;
//! 5. an expression that does not compile or fails when it runs, params that cannot be read,
//!    and an audit annotation that is not a string: with `failurePolicy: Fail` (the default)
//!    a refusal (`failed to configure binding: ...` for the params), with `Ignore` nothing.
//!
//! Every expression of a policy is compiled once per generation of the policy (the compiled
//! programs are kept while the policy is stored), and the set of bound policies is kept while
//! the lists of policies and bindings keep their generation ([`Listed`]). Of the inputs, only
//! what the policy's expressions reach is converted to CEL ([`genplane_cel::Reach`]):
//! `request` and `namespaceObject` are not even built when no expression names them. Writes of
//! the policy kinds themselves and of the reviews nothing stores are never checked
//! ([`is_exempt`], upstream's list: a broken policy cannot lock out its own repair); webhook
//! configurations are, so a policy can guard them.
//!
//! Expressions may use `authorizer` ([`crate::authorizer`]: the server's authorizer asked about
//! the request's user, `authorizer.group(g).resource(r).namespace(ns).name(n).check(verb)`,
//! `authorizer.requestResource`).
//!
//! Not yet: `matchPolicy: Equivalent` sees the object in the version it was written in
//! (upstream converts it to the version the rule names).

use std::cell::RefCell;
use std::sync::Arc;

use genplane_api::admissionregistration::types::{
    BindingSpec, MatchResources, NamedRule, PolicySpec,
};
use genplane_apimachinery::errors::{ApiError, Status, StatusCause};
use genplane_apimachinery::schema::GroupResource;
use genplane_apimachinery::validation::field::Path;
use genplane_cel::{
    Activation, Budget, CelValue, Direct, DirectVars, Environment, Program, Reach, VarType,
};
use serde_json::{Value, json};

use crate::evaluation::{Halt, halt};
use crate::namespace::Namespaces;
pub use crate::params::{ParamSelection, Params};
use crate::webhook::{RuleMatching as _, conditions_hold, review_request, selectors_match};
use crate::{Attributes, BoxFuture, Listed, ValidatingPlugin};

/// Upstream's limit on the length of one audit annotation value.
const MAX_AUDIT_ANNOTATION_VALUE_LENGTH: usize = 10 * 1024;

/// The resources (group, resource) whose writes no admission policy sees, validating or
/// mutating, as upstream 1.33's policy plugins exclude them (by resource, in any version,
/// through any subresource): the policy kinds themselves, so that a broken policy cannot lock
/// out its own repair (webhook configurations are not among them: a policy may guard them),
/// and the reviews nothing stores, whose interception could break the cluster
/// (kube-apiserver's excluded resources).
const EXEMPT: &[(&str, &str)] = &[
    (
        "admissionregistration.k8s.io",
        "validatingadmissionpolicies",
    ),
    (
        "admissionregistration.k8s.io",
        "validatingadmissionpolicybindings",
    ),
    ("admissionregistration.k8s.io", "mutatingadmissionpolicies"),
    (
        "admissionregistration.k8s.io",
        "mutatingadmissionpolicybindings",
    ),
    ("authentication.k8s.io", "selfsubjectreviews"),
    ("authentication.k8s.io", "tokenreviews"),
    ("authorization.k8s.io", "localsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectrulesreviews"),
    ("authorization.k8s.io", "subjectaccessreviews"),
];

/// Whether no admission policy sees writes of `resource`: the policy kinds themselves and the
/// reviews nothing stores, in any version, through any subresource (upstream 1.33's list).
pub fn is_exempt(resource: &genplane_apimachinery::schema::GroupVersionResource) -> bool {
    EXEMPT
        .iter()
        .any(|(group, name)| resource.group == *group && resource.resource == *name)
}

/// The stored policies, bindings and param objects, as the plugin reads them on every write
/// (from memory: a write should not cost storage reads).
/// (The params come from [`Params`], shared with MutatingAdmissionPolicy.)
pub trait Policies: Params {
    /// The stored ValidatingAdmissionPolicies.
    fn policies(&self) -> BoxFuture<'_, Result<Listed, ApiError>>;
    /// The stored ValidatingAdmissionPolicyBindings.
    fn bindings(&self) -> BoxFuture<'_, Result<Listed, ApiError>>;
}

/// Whether a policy's `matchConstraints` or a binding's `matchResources` match the write:
/// selectors, no exclusion, a rule.
pub async fn resources_match(
    resources: &MatchResources,
    attributes: &Attributes<'_>,
    object: Option<&Value>,
    namespaces: &dyn Namespaces,
) -> Result<bool, ApiError> {
    let equivalent = resources.match_policy.as_deref() != Some("Exact");
    let matching = |rules: &[NamedRule]| {
        rules.iter().any(|named| {
            named.rule.matches_with(attributes, equivalent)
                && (named.resource_names.is_empty()
                    || named.resource_names.iter().any(|n| n == attributes.name))
        })
    };
    if matching(&resources.exclude_resource_rules) {
        return Ok(false);
    }
    if !resources.resource_rules.is_empty() && !matching(&resources.resource_rules) {
        return Ok(false);
    }
    let namespace_selector = resources
        .namespace_selector
        .as_ref()
        .map(|s| s.to_apimachinery());
    let object_selector = resources
        .object_selector
        .as_ref()
        .map(|s| s.to_apimachinery());
    selectors_match(
        namespace_selector.as_ref(),
        object_selector.as_ref(),
        attributes,
        object,
        namespaces,
    )
    .await
}

/// A binding as read from storage.
type Binding = crate::bound::Binding<BindingSpec>;

impl crate::bound::BindingSpec for BindingSpec {
    fn policy_name(&self) -> &str {
        &self.policy_name
    }
}

/// An expression compiled, or why it does not compile (a failure when it is used).
pub(crate) type Compiled = Result<Program, String>;

/// The variables every policy expression may use.
pub const VARIABLES: &[&str] = &[
    "object",
    "oldObject",
    "request",
    "params",
    "namespaceObject",
    "variables",
    "authorizer",
];

/// The environment policy expressions compile in: every variable dynamic, or `object` and
/// `oldObject` typed by `object_type` (for the status type check).
pub fn environment(object_type: Option<&genplane_cel::ObjectType>) -> Environment<'_> {
    let mut environment = Environment::new();
    for name in VARIABLES {
        environment = environment.variable(*name, VarType::Dyn);
    }
    if let Some(object_type) = object_type {
        environment = environment
            .variable("object", VarType::Object(object_type))
            .variable("oldObject", VarType::Object(object_type));
    }
    environment
}

pub(crate) fn compile(environment: &Environment<'_>, expression: &str, path: Path) -> Compiled {
    environment
        .compile(expression, &path)
        .map_err(|error| match error {
            genplane_cel::Error::Compile { message, .. } => {
                format!("compilation error: compilation failed: {message}")
            }
            other => format!("compilation error: {other}"),
        })
}

/// Upstream's limit on the kinds a policy is type-checked against.
const MAX_TYPES_TO_CHECK: usize = 10;

/// The resources (group, version, resource) a policy's expressions are type-checked against:
/// those its `matchConstraints.resourceRules` name without wildcards (subresources left out),
/// sorted, at most ten, as upstream's policy status controller picks them.
pub fn resources_to_check(spec: &PolicySpec) -> Vec<(String, String, String)> {
    let mut found = std::collections::BTreeSet::new();
    let rules = spec
        .match_constraints
        .iter()
        .flat_map(|c| c.resource_rules.iter());
    for named in rules {
        let rule = &named.rule;
        let plain = |items: &[String]| {
            (!items.iter().any(|i| i.contains('*'))).then(|| {
                let mut items = items.to_vec();
                items.sort();
                items
            })
        };
        let (Some(groups), Some(versions)) = (plain(&rule.api_groups), plain(&rule.api_versions))
        else {
            continue;
        };
        let mut resources: Vec<&String> = rule
            .resources
            .iter()
            .filter(|r| !r.contains(['*', '/']))
            .collect();
        resources.sort();
        for group in &groups {
            for version in &versions {
                for resource in &resources {
                    found.insert((group.clone(), version.clone(), (*resource).clone()));
                    if found.len() == MAX_TYPES_TO_CHECK {
                        return found.into_iter().collect();
                    }
                }
            }
        }
    }
    found.into_iter().collect()
}

/// One kind a policy is type-checked against: upstream's name of it (`apps/v1,
/// Kind=Deployment`, `/v1, Kind=ConfigMap`) and its OpenAPI v3 schema.
#[derive(Debug)]
pub struct CheckedKind {
    /// `<group>/<version>, Kind=<kind>`.
    pub name: String,
    /// The kind's schema, references resolved.
    pub schema: Value,
}

/// The status type check of a policy (upstream's `status.typeChecking.expressionWarnings`):
/// each validation's `expression` and `messageExpression` compiled with `object` and
/// `oldObject` typed by each of `kinds`, and `params` by `params` (the param kind's schema);
/// the `(fieldRef, warning)` of each expression that does not compile against some kind,
/// the warning naming the kinds it fails for, one line each.
pub fn type_check(
    spec: &PolicySpec,
    kinds: &[CheckedKind],
    params: Option<&Value>,
) -> Vec<(String, String)> {
    let param_type = params.map(genplane_cel::ObjectType::from_schema);
    let typed: Vec<(&str, genplane_cel::ObjectType)> = kinds
        .iter()
        .map(|k| {
            (
                k.name.as_str(),
                genplane_cel::ObjectType::from_schema(&k.schema),
            )
        })
        .collect();
    let mut warnings = Vec::new();
    for (i, validation) in spec.validations.iter().enumerate() {
        let at = Path::new("spec").child("validations").index(i);
        let expressions = [
            ("expression", validation.expression.as_str()),
            ("messageExpression", validation.message_expression.as_str()),
        ];
        for (field, expression) in expressions {
            if expression.is_empty() {
                continue;
            }
            let mut issues = Vec::new();
            for (name, object_type) in &typed {
                let mut environment = environment(Some(object_type)).type_checking();
                if let Some(param_type) = &param_type {
                    environment = environment.variable("params", VarType::Object(param_type));
                }
                if let Err(genplane_cel::Error::Compile { message, .. }) =
                    environment.compile(expression, &at.child(field))
                {
                    issues.push(format!("{name}: {message}\n"));
                }
            }
            if !issues.is_empty() {
                warnings.push((at.child(field).to_string(), issues.join("\n")));
            }
        }
    }
    warnings
}

/// A policy with its expressions compiled.
#[derive(Debug)]
struct CompiledPolicy {
    name: String,
    generation: i64,
    spec: PolicySpec,
    /// The environment the programs were compiled in (their inputs are converted once per
    /// evaluation for all of them).
    environment: Environment<'static>,
    conditions: Vec<Compiled>,
    variables: Vec<Compiled>,
    validations: Vec<(Compiled, Option<Compiled>)>,
    annotations: Vec<Compiled>,
    /// What the programs can reach of their variables: only that is converted to CEL.
    reach: Reach,
}

impl CompiledPolicy {
    fn new(name: String, generation: i64, spec: PolicySpec) -> Self {
        let environment = environment(None);
        let at = Path::new("spec");
        // every expression of the list `field`, at `spec.<field>[i].<key>`
        let each = |field: &str, key: &str, expressions: Vec<&str>| -> Vec<Compiled> {
            expressions
                .into_iter()
                .enumerate()
                .map(|(i, e)| compile(&environment, e, at.child(field).index(i).child(key)))
                .collect()
        };
        let conditions = each(
            "matchConditions",
            "expression",
            spec.match_conditions
                .iter()
                .map(|c| c.expression.as_str())
                .collect(),
        );
        let variables = each(
            "variables",
            "expression",
            spec.variables
                .iter()
                .map(|v| v.expression.as_str())
                .collect(),
        );
        let rules = each(
            "validations",
            "expression",
            spec.validations
                .iter()
                .map(|v| v.expression.as_str())
                .collect(),
        );
        let validations: Vec<(Compiled, Option<Compiled>)> = rules
            .into_iter()
            .zip(&spec.validations)
            .enumerate()
            .map(|(i, (rule, v))| {
                let message = (!v.message_expression.is_empty()).then(|| {
                    let path = at.child("validations").index(i).child("messageExpression");
                    compile(&environment, &v.message_expression, path)
                });
                (rule, message)
            })
            .collect();
        let annotations = each(
            "auditAnnotations",
            "valueExpression",
            spec.audit_annotations
                .iter()
                .map(|a| a.value_expression.as_str())
                .collect(),
        );
        let mut reach = Reach::new();
        let messages = validations.iter().filter_map(|(_, m)| m.as_ref());
        for program in conditions
            .iter()
            .chain(&variables)
            .chain(validations.iter().map(|(rule, _)| rule))
            .chain(messages)
            .chain(&annotations)
            .flatten()
        {
            reach.add(program);
        }
        Self {
            name,
            generation,
            spec,
            environment,
            conditions,
            variables,
            validations,
            annotations,
            reach,
        }
    }

    fn ignores_failures(&self) -> bool {
        self.spec.failure_policy.as_deref() == Some("Ignore")
    }
}

impl crate::bound::CompiledPolicy for CompiledPolicy {
    type Spec = PolicySpec;

    fn compile(name: String, generation: i64, spec: PolicySpec) -> Self {
        CompiledPolicy::new(name, generation, spec)
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn generation(&self) -> i64 {
        self.generation
    }
}

/// A failed validation, a failure, or a failed audit annotation, decided for one binding.
#[derive(Debug)]
struct Decision {
    /// The index of the validation (for the audit annotation of failures).
    index: usize,
    message: String,
    /// The reason of a failed validation; `None` for failures (`Invalid`).
    reason: Option<String>,
    /// A failure (evaluation error, configuration error): always a refusal, never a warning.
    error: bool,
}

/// What one evaluation of a policy gave: decisions and audit annotations.
#[derive(Debug, Default)]
struct Outcome {
    decisions: Vec<Decision>,
    annotations: Vec<(String, String)>,
}

/// What every evaluation of a write shares: the values of `object`, `oldObject`, `request`
/// and `namespaceObject` (the last two `null` when no policy of the write uses them).
pub(crate) struct Inputs<'a> {
    pub(crate) object: &'a Value,
    pub(crate) old_object: &'a Value,
    pub(crate) request: Value,
    pub(crate) namespace_object: Value,
    /// `authorizer` ([`crate::authorizer`]).
    pub(crate) authorizer: CelValue,
}

pub(crate) fn evaluation_error(expression: &str, error: &genplane_cel::Error) -> String {
    format!("expression '{expression}' resulted in error: {error}")
}

impl CompiledPolicy {
    /// Runs the policy for one param (`Value::Null`: none), its budgets with the inline
    /// allowance `inline` ([`crate::evaluation`]); `None` when an evaluation yielded.
    fn evaluate(
        &self,
        inputs: &Inputs<'_>,
        params: &Value,
        inline: Option<genplane_cel::Inline>,
    ) -> Option<Outcome> {
        match self.evaluate_within(inputs, params, inline) {
            Ok(outcome) => Some(outcome),
            Err(Halt::Yield) => None,
            Err(Halt::OutOfBudget(message)) => {
                let mut outcome = Outcome::default();
                if !self.ignores_failures() {
                    outcome.decisions.push(Decision {
                        index: 0,
                        message,
                        reason: None,
                        error: true,
                    });
                }
                Some(outcome)
            }
        }
    }

    fn evaluate_within(
        &self,
        inputs: &Inputs<'_>,
        params: &Value,
        inline: Option<genplane_cel::Inline>,
    ) -> Result<Outcome, Halt> {
        let mut outcome = Outcome::default();
        let fail = |outcome: &mut Outcome, index: usize, message: String| {
            if !self.ignores_failures() {
                outcome.decisions.push(Decision {
                    index,
                    message,
                    reason: None,
                    error: true,
                });
            }
        };
        // upstream's budgets: one for the match conditions, one for everything else
        let budget = RefCell::new(Budget::new(crate::evaluation::POLICY_BUDGET).inline(inline));
        let conditions_budget =
            RefCell::new(Budget::new(crate::evaluation::MATCH_CONDITIONS_BUDGET).inline(inline));
        // why an evaluation's result stops the policy's evaluation, if it does
        let stops = |result: &Result<CelValue, genplane_cel::Error>| match result {
            Err(error) => halt(error).err(),
            Ok(_) => None,
        };
        // Each expression is evaluated directly on the inputs when it can be (see
        // genplane_cel::Direct), else by the interpreter, on the inputs converted once, at the
        // first expression that needs them.
        let json = [
            ("object", inputs.object),
            ("oldObject", inputs.old_object),
            ("request", &inputs.request),
            ("params", params),
            ("namespaceObject", &inputs.namespace_object),
        ];
        let mut direct = json.iter().fold(DirectVars::new(), |vars, (name, value)| {
            vars.bind(name, value)
        });
        let base = std::cell::OnceCell::new();
        let prepare = || {
            let activation = json
                .iter()
                .fold(Activation::new(), |a, (name, value)| a.bind(*name, value));
            self.environment.prepare_reaching(
                activation.bind_value("authorizer", inputs.authorizer.clone()),
                &self.reach,
            )
        };
        let as_cel = |variables: &[(String, Direct<'_>)]| {
            genplane_cel::map_value(
                variables
                    .iter()
                    .map(|(name, value)| (name.clone(), value.to_cel()))
                    .collect::<Vec<_>>(),
            )
        };
        // variables, in order, each seeing the ones before it
        let mut failed: Vec<(String, String)> = Vec::new();
        for (variable, program) in self.spec.variables.iter().zip(&self.variables) {
            let program = match program {
                Ok(program) => program,
                Err(e) => {
                    failed.push((variable.name.clone(), e.clone()));
                    continue;
                }
            };
            let result = {
                let mut budget = budget.borrow_mut();
                match program.evaluate_direct(&direct, &mut budget) {
                    Some(value) => value,
                    None => {
                        let known = [("variables", as_cel(direct.variables()))];
                        program
                            .evaluate_prepared_within(
                                base.get_or_init(prepare),
                                &known,
                                &mut budget,
                            )
                            .map(Direct::Cel)
                    }
                }
            };
            match result {
                Ok(value) => direct.push_variable(variable.name.clone(), value),
                Err(error) => {
                    halt(&error)?;
                    failed.push((
                        variable.name.clone(),
                        evaluation_error(&variable.expression, &error),
                    ));
                }
            }
        }
        // the variables converted once for every expression below that the interpreter runs
        let extended = std::cell::OnceCell::new();
        let prepared = || {
            extended.get_or_init(|| {
                base.get_or_init(prepare)
                    .extend(&[("variables", as_cel(direct.variables()))])
            })
        };
        // a failed variable is an error of the expressions that use it
        let explain = |error: &genplane_cel::Error, expression: &str| -> String {
            if let genplane_cel::Error::Evaluation(message) = error
                && let Some(key) = message.strip_prefix("no such key: ")
                && let Some((name, why)) = failed.iter().find(|(name, _)| name == key)
            {
                return format!("composited variable \"{name}\" fails to evaluate: {why}");
            }
            evaluation_error(expression, error)
        };
        // an expression's value, directly or by the interpreter, charged to `budget`
        let value = |program: &genplane_cel::Program, budget: &RefCell<Budget>| {
            let mut budget = budget.borrow_mut();
            match program.evaluate_direct(&direct, &mut budget) {
                Some(value) => value.map(|v| v.to_cel()),
                None => program.evaluate_prepared_within(prepared(), &[], &mut budget),
            }
        };
        // an expression's value, or why it has none (or why the policy stops)
        let run =
            |program: &Compiled, expression: &str| -> Result<Result<CelValue, String>, Halt> {
                match program {
                    Ok(program) => {
                        let result = value(program, &budget);
                        match stops(&result) {
                            Some(stop) => Err(stop),
                            None => Ok(result.map_err(|e| explain(&e, expression))),
                        }
                    }
                    Err(e) => Ok(Err(e.clone())),
                }
            };
        // match conditions: any false skips the policy, an error is a failure
        let conditions = &self.spec.match_conditions;
        let stopped: RefCell<Option<Halt>> = RefCell::new(None);
        let held = conditions_hold(conditions, &self.conditions, |i, program| {
            if stopped.borrow().is_some() {
                return Err(String::new());
            }
            let result = value(program, &conditions_budget);
            if let Some(stop) = stops(&result) {
                *stopped.borrow_mut() = Some(stop);
                return Err(String::new());
            }
            result.map_err(|e| explain(&e, &conditions[i].expression))
        });
        if let Some(stop) = stopped.into_inner() {
            return Err(stop);
        }
        match held {
            Ok(true) => {}
            Ok(false) => return Ok(outcome),
            Err(message) => {
                fail(&mut outcome, 0, message);
                return Ok(outcome);
            }
        }
        for (index, (validation, (program, message_program))) in self
            .spec
            .validations
            .iter()
            .zip(&self.validations)
            .enumerate()
        {
            let verdict = run(program, &validation.expression)?;
            match verdict {
                Ok(CelValue::Bool(true)) => {}
                Ok(_) => {
                    let computed = match message_program.as_ref().and_then(|p| p.as_ref().ok()) {
                        Some(program) => {
                            let result = value(program, &budget);
                            if let Some(stop) = stops(&result) {
                                return Err(stop);
                            }
                            result.ok()
                        }
                        None => None,
                    };
                    let message = computed
                        .and_then(|v| match v {
                            CelValue::String(s) => Some(s.trim().to_owned()),
                            _ => None,
                        })
                        .filter(|m| {
                            !m.is_empty()
                                && m.len()
                                    <= genplane_cel::MAX_EVALUATED_MESSAGE_EXPRESSION_SIZE_BYTES
                                && !m.contains('\n')
                        })
                        .or_else(|| {
                            Some(validation.message.trim().to_owned()).filter(|m| !m.is_empty())
                        })
                        .unwrap_or_else(|| {
                            format!("failed expression: {}", validation.expression.trim())
                        });
                    outcome.decisions.push(Decision {
                        index,
                        message,
                        reason: validation.reason.clone(),
                        error: false,
                    });
                }
                Err(e) => fail(&mut outcome, index, e),
            }
        }
        for (annotation, program) in self.spec.audit_annotations.iter().zip(&self.annotations) {
            let value = run(program, &annotation.value_expression)?;
            match value {
                Ok(CelValue::String(s)) => {
                    let mut value = s.trim().to_owned();
                    if value.is_empty() {
                        continue;
                    }
                    if value.len() > MAX_AUDIT_ANNOTATION_VALUE_LENGTH {
                        let mut end = MAX_AUDIT_ANNOTATION_VALUE_LENGTH;
                        while !value.is_char_boundary(end) {
                            end -= 1;
                        }
                        value.truncate(end);
                    }
                    outcome.annotations.push((annotation.key.clone(), value));
                }
                Ok(CelValue::Null) => {}
                Ok(other) => fail(
                    &mut outcome,
                    0,
                    format!(
                        "valueExpression '{}' resulted in unsupported return type: {}. Return type must be either string or null.",
                        annotation.value_expression,
                        type_name(&other)
                    ),
                ),
                Err(e) => fail(&mut outcome, 0, e),
            }
        }
        Ok(outcome)
    }
}

/// CEL's name of a value's type.
fn type_name(value: &CelValue) -> &'static str {
    match value {
        CelValue::Bool(_) => "bool",
        CelValue::Int(_) => "int",
        CelValue::UInt(_) => "uint",
        CelValue::Float(_) => "double",
        CelValue::String(_) => "string",
        CelValue::Bytes(_) => "bytes",
        CelValue::List(_) => "list",
        CelValue::Map(_) => "map",
        CelValue::Null => "null_type",
        _ => "dyn",
    }
}

/// The code of a denial's reason, as upstream maps them.
fn reason_code(reason: &str) -> u16 {
    match reason {
        "Forbidden" => 403,
        "Unauthorized" => 401,
        "RequestEntityTooLarge" => 413,
        _ => 422,
    }
}

/// What the plugin keeps of the stored policies and bindings.
#[cfg(test)]
type Cache = crate::bound::Cache<CompiledPolicy, BindingSpec>;

/// The namespace of one write, read from the cache once however many policies look at it.
#[derive(Debug)]
pub(crate) struct WriteNamespace<'a> {
    pub(crate) namespaces: &'a dyn Namespaces,
    pub(crate) read: tokio::sync::OnceCell<Option<Arc<Value>>>,
}

impl Namespaces for WriteNamespace<'_> {
    fn get<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Value>, ApiError>> {
        self.namespaces.get(name)
    }

    fn get_cached<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Arc<Value>>, ApiError>> {
        Box::pin(async move {
            self.read
                .get_or_try_init(|| crate::namespace::cached_or_stored(self.namespaces, name))
                .await
                .cloned()
        })
    }

    fn create<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), ApiError>> {
        self.namespaces.create(name)
    }
}

/// `ValidatingAdmissionPolicy`: refuses, warns about or audits writes the stored policies'
/// validations fail.
#[derive(Debug)]
pub struct ValidatingAdmissionPolicy {
    policies: Arc<dyn Policies>,
    namespaces: Arc<dyn Namespaces>,
    bound: crate::bound::BoundCache<CompiledPolicy, BindingSpec>,
}

impl ValidatingAdmissionPolicy {
    /// The plugin over the stored `policies`, looking namespaces up in `namespaces`.
    pub fn new(policies: Arc<dyn Policies>, namespaces: Arc<dyn Namespaces>) -> Self {
        Self {
            policies,
            namespaces,
            bound: Default::default(),
        }
    }

    #[cfg(test)]
    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.bound.cache()
    }

    /// The bound policies and their bindings, `None` without bindings.
    async fn bound(
        &self,
    ) -> Result<Option<Arc<crate::bound::Bound<CompiledPolicy, BindingSpec>>>, ApiError> {
        let bindings = self.policies.bindings().await?;
        if bindings.items.is_empty() {
            return Ok(None);
        }
        let policies = self.policies.policies().await?;
        Ok(Some(self.bound.bound(&policies, &bindings)))
    }

    /// The params of `binding` for a write in `namespace`: `Value::Null` alone when the
    /// policy has none.
    async fn params(
        &self,
        policy: &CompiledPolicy,
        binding: &Binding,
        namespace: &str,
    ) -> Result<Vec<Arc<Value>>, String> {
        crate::params::resolve(
            self.policies.as_ref(),
            policy.spec.param_kind.as_ref(),
            binding.spec.param_ref.as_ref(),
            namespace,
        )
        .await
    }

    async fn run(
        &self,
        attributes: Attributes<'_>,
        object: Option<&Value>,
    ) -> Result<(), ApiError> {
        let request = attributes.request;
        if is_exempt(&request.resource) {
            return Ok(());
        }
        let Some(bound) = self.bound().await? else {
            return Ok(());
        };
        let policies = &bound.policies;
        // every lookup of this write is of its own namespace (or of none)
        let namespace = WriteNamespace {
            namespaces: self.namespaces.as_ref(),
            read: tokio::sync::OnceCell::new(),
        };
        let mut inputs: Option<Inputs<'_>> = None;
        // (policy, binding name, decision): the first refusal wins
        let mut refusals: Vec<(String, String, Decision)> = Vec::new();
        for policy in policies {
            let everything = MatchResources::default();
            let constraints = policy
                .spec
                .match_constraints
                .as_ref()
                .unwrap_or(&everything);
            if !resources_match(constraints, &attributes, object, &namespace).await? {
                continue;
            }
            let mut annotations: Vec<(String, Vec<String>)> = Vec::new();
            for binding in bound.bindings.get(&policy.name).into_iter().flatten() {
                if let Some(resources) = &binding.spec.match_resources
                    && !resources_match(resources, &attributes, object, &namespace).await?
                {
                    continue;
                }
                let params = match self.params(policy, binding, attributes.namespace).await {
                    Ok(params) => params,
                    Err(message) => {
                        if !policy.ignores_failures() {
                            refusals.push((
                                policy.name.clone(),
                                binding.name.clone(),
                                Decision {
                                    index: 0,
                                    message: format!("failed to configure binding: {message}"),
                                    reason: None,
                                    error: true,
                                },
                            ));
                        }
                        continue;
                    }
                };
                if params.is_empty() {
                    continue;
                }
                if inputs.is_none() {
                    let uses = |name: &str| policies.iter().any(|p| p.reach.uses(name));
                    let needs = (uses("request"), uses("namespaceObject"));
                    inputs = Some(inputs_of(&attributes, object, &namespace, needs).await?);
                }
                let Some(inputs) = inputs.as_ref() else {
                    continue;
                };
                for param in &params {
                    let outcome =
                        crate::evaluation::run(|inline| policy.evaluate(inputs, param, inline));
                    for (key, value) in outcome.annotations {
                        match annotations.iter_mut().find(|(k, _)| *k == key) {
                            Some((_, values)) if !values.contains(&value) => values.push(value),
                            Some(_) => {}
                            None => annotations.push((key, vec![value])),
                        }
                    }
                    for decision in outcome.decisions {
                        self.act(&attributes, policy, binding, decision, &mut refusals);
                    }
                }
            }
            for (key, values) in annotations {
                request
                    .audit_annotations
                    .add(format!("{}/{key}", policy.name), values.join(", "));
            }
        }
        match refusals.into_iter().next() {
            None => Ok(()),
            Some((policy, binding, decision)) => Err(refusal(
                &attributes,
                &policy,
                &binding,
                &decision.message,
                decision.reason.as_deref(),
            )),
        }
    }

    /// Applies the binding's validation actions to one decision.
    fn act(
        &self,
        attributes: &Attributes<'_>,
        policy: &CompiledPolicy,
        binding: &Binding,
        decision: Decision,
        refusals: &mut Vec<(String, String, Decision)>,
    ) {
        if decision.error {
            refusals.push((policy.name.clone(), binding.name.clone(), decision));
            return;
        }
        let actions = &binding.spec.validation_actions;
        let request = attributes.request;
        if actions.iter().any(|a| a == "Warn") {
            request.warnings.extend([format!(
                "Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': {}",
                policy.name, binding.name, decision.message
            )]);
        }
        if actions.iter().any(|a| a == "Audit") {
            let failure = json!([{
                "message": decision.message,
                "policy": policy.name,
                "binding": binding.name,
                "expressionIndex": decision.index,
                "validationActions": actions,
            }]);
            request.audit_annotations.add(
                "validation.policy.admission.k8s.io/validation_failure".to_owned(),
                failure.to_string(),
            );
        }
        if actions.iter().any(|a| a == "Deny") {
            refusals.push((policy.name.clone(), binding.name.clone(), decision));
        }
    }
}

/// The values every evaluation of this write sees; `request` and `namespaceObject` only when
/// `needs` says some policy uses them.
pub(crate) async fn inputs_of<'v>(
    attributes: &Attributes<'v>,
    object: Option<&'v Value>,
    namespaces: &dyn Namespaces,
    (needs_request, needs_namespace): (bool, bool),
) -> Result<Inputs<'v>, ApiError> {
    let mut request = Value::Null;
    if needs_request {
        request = review_request(attributes, object);
        if let Some(fields) = request.as_object_mut() {
            fields.remove("object");
            fields.remove("oldObject");
            fields.remove("uid");
        }
    }
    let is_namespace =
        attributes.request.kind.group.is_empty() && attributes.request.kind.kind == "Namespace";
    let namespace_object = if !needs_namespace || attributes.namespace.is_empty() || is_namespace {
        Value::Null
    } else {
        namespaces
            .get_cached(attributes.namespace)
            .await?
            .map(|ns| namespace_object(&ns))
            .unwrap_or(Value::Null)
    };
    Ok(Inputs {
        object: object.unwrap_or(&Value::Null),
        old_object: attributes.old_object.unwrap_or(&Value::Null),
        request,
        namespace_object,
        authorizer: crate::authorizer::value(attributes),
    })
}

/// What policies see of a namespace: its metadata (without managed fields, owners and
/// finalizers), spec and status.
fn namespace_object(namespace: &Value) -> Value {
    let mut metadata = namespace.get("metadata").cloned().unwrap_or(json!({}));
    if let Some(fields) = metadata.as_object_mut() {
        for field in ["managedFields", "ownerReferences", "finalizers"] {
            fields.remove(field);
        }
    }
    json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": metadata,
        "spec": namespace.get("spec").cloned().unwrap_or(json!({})),
        "status": namespace.get("status").cloned().unwrap_or(json!({})),
    })
}

/// Upstream's refusal: a Forbidden naming the object, with the policy's reason and its code.
fn refusal(
    attributes: &Attributes<'_>,
    policy: &str,
    binding: &str,
    message: &str,
    reason: Option<&str>,
) -> ApiError {
    let message = format!(
        "ValidatingAdmissionPolicy '{policy}' with binding '{binding}' denied request: {message}"
    );
    let resource = GroupResource::new(
        &attributes.request.resource.group,
        &attributes.request.resource.resource,
    );
    let mut status = Status::forbidden(&resource, attributes.name, &message);
    let reason = reason.filter(|r| !r.is_empty()).unwrap_or("Invalid");
    status.reason = reason.to_owned();
    status.code = reason_code(reason);
    status
        .details
        .get_or_insert_with(Default::default)
        .causes
        .push(StatusCause {
            message,
            ..StatusCause::default()
        });
    status.into()
}

impl ValidatingPlugin for ValidatingAdmissionPolicy {
    fn name(&self) -> &'static str {
        "ValidatingAdmissionPolicy"
    }

    fn validate<'a>(
        &'a self,
        attributes: Attributes<'a>,
        object: Option<&'a Value>,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(self.run(attributes, object))
    }
}

#[cfg(test)]
mod tests;
