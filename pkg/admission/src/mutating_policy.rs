//! The `MutatingAdmissionPolicy` plugin, as Kubernetes 1.33's (alpha): creates and updates are
//! changed by the CEL `mutations` of the stored `admissionregistration.k8s.io/v1alpha1`
//! MutatingAdmissionPolicies through the MutatingAdmissionPolicyBindings that name them
//! ([`MutatingPolicies`]). It runs first among the mutating plugins that change objects
//! (upstream's order: before MutatingAdmissionWebhook), and the changed object then goes
//! through validation and the validating plugins as any other.
//!
//! For each policy (by name) and each of its bindings (by name), as ValidatingAdmissionPolicy
//! matches them ([`crate::validating_policy`]): `matchConstraints`, the binding's `matchResources`, the
//! params (`paramKind`, `paramRef`: [`crate::params`]), then per param the `matchConditions`
//! and, for each mutation in order, the `variables` and the mutation's expression over
//! `object` (the object as the mutations before changed it), `oldObject`, `request`,
//! `params`, `namespaceObject` and `variables`:
//!
//! - `patchType: ApplyConfiguration`: the expression builds an apply configuration with
//!   `Object{...}` and `Object.<field>{...}`; it is merged into the object as server-side apply
//!   merges (granular maps and structs key by key, list maps by key, sets by value; through
//!   [`MutatingPolicies::apply_configuration`], which has the kind's type model). Setting an
//!   atomic list, map or struct is refused, as upstream (it would replace the whole value);
//! - `patchType: JSONPatch`: the expression gives a list of `JSONPatch{op, path, from,
//!   value}` (RFC 6902; `jsonpatch.escapeKey` escapes keys), applied in order.
//!
//! A binding's mutations apply together: an expression that does not compile or fails, a
//! result of the wrong type, a patch that does not apply or params that cannot be read leave
//! the object as it was before the binding, and with `failurePolicy: Fail` (the default)
//! refuse the write (`<resource> "<name>" is forbidden: policy '<policy>' with binding
//! '<binding>' denied request: <why>`); with `Ignore` the write goes on.
//!
//! Every expression of a policy is compiled once per generation of the policy, and the bound
//! set is kept while the lists of policies and bindings keep their generation, as the
//! ValidatingAdmissionPolicy plugin does (`crate::bound`). The writes that plugin leaves alone
//! (`crate::validating_policy::is_exempt`: the policy kinds, the reviews) are never changed. A binding of a policy with
//! `reinvocationPolicy: IfNeeded` runs again when a later webhook or policy changed the object
//! ([`crate::reinvocation`]).

use std::cell::RefCell;
use std::sync::Arc;

use genplane_api::admissionregistration::types::{
    MatchResources, MutatingBindingSpec, MutatingPolicySpec,
};
use genplane_apimachinery::errors::{ApiError, Status};
use genplane_apimachinery::schema::{GroupResource, GroupVersionKind};
use genplane_apimachinery::validation::field::Path;
use genplane_cel::{Activation, Budget, CelValue, Environment};
use serde_json::Value;

use crate::evaluation::{Halt, halt};
use crate::namespace::Namespaces;
use crate::params::Params;
use crate::reinvocation::Reinvocation;
use crate::validating_policy::{
    Compiled, Inputs, WriteNamespace, compile, environment, evaluation_error, inputs_of, is_exempt,
    resources_match,
};
use crate::webhook::conditions_hold;
use crate::{Attributes, BoxFuture, Listed, MutatingPlugin};

/// The stored policies, bindings and param objects, and the kinds' type model, as the plugin
/// reads them on every write (from memory).
pub trait MutatingPolicies: Params {
    /// The stored MutatingAdmissionPolicies.
    fn policies(&self) -> BoxFuture<'_, Result<Listed, ApiError>>;
    /// The stored MutatingAdmissionPolicyBindings.
    fn bindings(&self) -> BoxFuture<'_, Result<Listed, ApiError>>;
    /// Merges the apply configuration `configuration` into `object` (of kind `kind`) as
    /// server-side apply merges, or says why it cannot (an unknown kind, a configuration that
    /// does not fit the kind or sets an atomic list, map or struct).
    fn apply_configuration(
        &self,
        kind: &GroupVersionKind,
        object: Value,
        configuration: &Value,
    ) -> Result<Value, String>;
}

impl crate::bound::BindingSpec for MutatingBindingSpec {
    fn policy_name(&self) -> &str {
        &self.policy_name
    }
}

/// A policy with its expressions compiled.
#[derive(Debug)]
struct CompiledPolicy {
    name: String,
    generation: i64,
    spec: MutatingPolicySpec,
    environment: Environment<'static>,
    conditions: Vec<Compiled>,
    variables: Vec<Compiled>,
    mutations: Vec<Compiled>,
}

impl CompiledPolicy {
    fn new(name: String, generation: i64, spec: MutatingPolicySpec) -> Self {
        let environment = environment(None).with_object_types();
        let at = Path::new("spec");
        let conditions = spec
            .match_conditions
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let path = at.child("matchConditions").index(i).child("expression");
                compile(&environment, &c.expression, path)
            })
            .collect();
        let variables = spec
            .variables
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let path = at.child("variables").index(i).child("expression");
                compile(&environment, &v.expression, path)
            })
            .collect();
        let mutations = spec
            .mutations
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let (field, expression) = match m.patch_type.as_str() {
                    "JSONPatch" => ("jsonPatch", m.json_patch.as_ref()),
                    _ => ("applyConfiguration", m.apply_configuration.as_ref()),
                };
                let expression = expression.map(|e| e.expression.as_str()).unwrap_or("");
                let path = at
                    .child("mutations")
                    .index(i)
                    .child(field)
                    .child("expression");
                compile(&environment, expression, path)
            })
            .collect();
        Self {
            name,
            generation,
            spec,
            environment,
            conditions,
            variables,
            mutations,
        }
    }

    fn ignores_failures(&self) -> bool {
        self.spec.failure_policy.as_deref() == Some("Ignore")
    }

    /// The activation of one evaluation, with `variables` computed over it in order (a failed
    /// one is left out, its error kept for the expressions that use it); the budget's errors
    /// stop it.
    fn variables(
        &self,
        prepared: &genplane_cel::Prepared<'_, '_>,
        budget: &mut Budget,
    ) -> Result<(CelValue, Vec<(String, String)>), Halt> {
        let mut values: Vec<(String, CelValue)> = Vec::new();
        let mut failed: Vec<(String, String)> = Vec::new();
        for (variable, program) in self.spec.variables.iter().zip(&self.variables) {
            let known = [("variables", genplane_cel::map_value(values.clone()))];
            match program {
                Ok(program) => match program.evaluate_prepared_within(prepared, &known, budget) {
                    Ok(value) => values.push((variable.name.clone(), value)),
                    Err(e) => {
                        halt(&e)?;
                        failed.push((
                            variable.name.clone(),
                            evaluation_error(&variable.expression, &e),
                        ));
                    }
                },
                Err(e) => failed.push((variable.name.clone(), e.clone())),
            }
        }
        Ok((genplane_cel::map_value(values), failed))
    }

    /// Runs the policy's mutations on `object` for one param, its budgets with the inline
    /// allowance `inline` ([`crate::evaluation`]): `Ok(None)` when a match condition is false,
    /// the changed object, or why the binding failed; `None` when an evaluation yielded.
    fn mutate(
        &self,
        policies: &dyn MutatingPolicies,
        kind: &GroupVersionKind,
        inputs: &Inputs<'_>,
        params: &Value,
        inline: Option<genplane_cel::Inline>,
    ) -> Option<Result<Option<Value>, String>> {
        match self.mutate_within(policies, kind, inputs, params, inline) {
            Ok(outcome) => Some(outcome),
            Err(Halt::Yield) => None,
            Err(Halt::OutOfBudget(message)) => Some(Err(message)),
        }
    }

    fn mutate_within(
        &self,
        policies: &dyn MutatingPolicies,
        kind: &GroupVersionKind,
        inputs: &Inputs<'_>,
        params: &Value,
        inline: Option<genplane_cel::Inline>,
    ) -> Result<Result<Option<Value>, String>, Halt> {
        let mut budget = Budget::new(crate::evaluation::POLICY_BUDGET).inline(inline);
        let mut conditions_budget =
            Budget::new(crate::evaluation::MATCH_CONDITIONS_BUDGET).inline(inline);
        let mut current = inputs.object.clone();
        for (index, program) in self.mutations.iter().enumerate() {
            let prepared = self.environment.prepare(
                Activation::new()
                    .bind("object", &current)
                    .bind("oldObject", inputs.old_object)
                    .bind("request", &inputs.request)
                    .bind("params", params)
                    .bind("namespaceObject", &inputs.namespace_object)
                    .bind_value("authorizer", inputs.authorizer.clone()),
            );
            let (variables, failed) = self.variables(&prepared, &mut budget)?;
            let variables = [("variables", variables)];
            let explain = |error: &genplane_cel::Error, expression: &str| -> String {
                if let genplane_cel::Error::Evaluation(message) = error
                    && let Some(key) = message.strip_prefix("no such key: ")
                    && let Some((name, why)) = failed.iter().find(|(name, _)| name == key)
                {
                    return format!("composited variable \"{name}\" fails to evaluate: {why}");
                }
                evaluation_error(expression, error)
            };
            if index == 0 {
                let conditions = &self.spec.match_conditions;
                let budget = RefCell::new(&mut conditions_budget);
                let stopped: RefCell<Option<Halt>> = RefCell::new(None);
                let hold = conditions_hold(conditions, &self.conditions, |i, program| {
                    if stopped.borrow().is_some() {
                        return Err(String::new());
                    }
                    program
                        .evaluate_prepared_within(&prepared, &variables, &mut budget.borrow_mut())
                        .map_err(|e| {
                            if let Err(stop) = halt(&e) {
                                *stopped.borrow_mut() = Some(stop);
                            }
                            explain(&e, &conditions[i].expression)
                        })
                });
                if let Some(stop) = stopped.into_inner() {
                    return Err(stop);
                }
                match hold {
                    Ok(true) => {}
                    Ok(false) => return Ok(Ok(None)),
                    Err(message) => return Ok(Err(message)),
                }
            }
            let mutation = &self.spec.mutations[index];
            let expression = match mutation.patch_type.as_str() {
                "JSONPatch" => mutation.json_patch.as_ref(),
                _ => mutation.apply_configuration.as_ref(),
            }
            .map(|e| e.expression.as_str())
            .unwrap_or("");
            let program = match program {
                Ok(program) => program,
                Err(e) => return Ok(Err(e.clone())),
            };
            let value = match program.evaluate_prepared_within(&prepared, &variables, &mut budget) {
                Ok(value) => value,
                Err(e) => {
                    halt(&e)?;
                    return Ok(Err(explain(&e, expression)));
                }
            };
            let applied = genplane_cel::to_json(&value)
                .map_err(|e| evaluation_error(expression, &e))
                .and_then(|value| match mutation.patch_type.as_str() {
                    "JSONPatch" => json_patch_of(current, &value),
                    _ => {
                        if !value.is_object() {
                            return Err(format!(
                                "apply configuration expression '{expression}' must evaluate to an Object, not {}",
                                json_type(&value)
                            ));
                        }
                        policies
                            .apply_configuration(kind, current, &value)
                            .map_err(|e| format!("error applying patch: {e}"))
                    }
                });
            current = match applied {
                Ok(changed) => changed,
                Err(message) => return Ok(Err(message)),
            };
        }
        Ok(Ok(Some(current)))
    }
}

impl crate::bound::CompiledPolicy for CompiledPolicy {
    type Spec = MutatingPolicySpec;

    fn compile(name: String, generation: i64, spec: MutatingPolicySpec) -> Self {
        CompiledPolicy::new(name, generation, spec)
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn generation(&self) -> i64 {
        self.generation
    }
}

/// JSON's name of a value's type.
fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "map",
    }
}

/// `object` patched by the operations `patch` (a JSON list of `JSONPatch` values).
fn json_patch_of(mut object: Value, patch: &Value) -> Result<Value, String> {
    if !patch.is_array() {
        return Err(format!(
            "JSONPatch expression must evaluate to a list of JSONPatch, not {}",
            json_type(patch)
        ));
    }
    let operations: Vec<json_patch::PatchOperation> =
        serde_json::from_value(patch.clone()).map_err(|e| format!("invalid JSONPatch: {e}"))?;
    json_patch::patch(&mut object, &operations).map_err(|e| format!("JSON Patch: {e}"))?;
    Ok(object)
}

/// `MutatingAdmissionPolicy`: changes creates and updates as the stored policies' mutations
/// say.
#[derive(Debug)]
pub struct MutatingAdmissionPolicy {
    policies: Arc<dyn MutatingPolicies>,
    namespaces: Arc<dyn Namespaces>,
    bound: crate::bound::BoundCache<CompiledPolicy, MutatingBindingSpec>,
}

impl MutatingAdmissionPolicy {
    /// The plugin over the stored `policies`, looking namespaces up in `namespaces`.
    pub fn new(policies: Arc<dyn MutatingPolicies>, namespaces: Arc<dyn Namespaces>) -> Self {
        Self {
            policies,
            namespaces,
            bound: Default::default(),
        }
    }

    async fn run(
        &self,
        attributes: Attributes<'_>,
        object: &mut Value,
        reinvocation: Option<&Reinvocation>,
    ) -> Result<(), ApiError> {
        let request = attributes.request;
        if is_exempt(&request.resource) {
            return Ok(());
        }
        let plugin = self.name();
        if reinvocation.is_some_and(|r| !r.begin(plugin, object)) {
            return Ok(());
        }
        let bindings = self.policies.bindings().await?;
        if bindings.items.is_empty() {
            return Ok(());
        }
        let bound = self
            .bound
            .bound(&self.policies.policies().await?, &bindings);
        let namespace = WriteNamespace {
            namespaces: self.namespaces.as_ref(),
            read: tokio::sync::OnceCell::new(),
        };
        for policy in &bound.policies {
            let everything = MatchResources::default();
            let constraints = policy
                .spec
                .match_constraints
                .as_ref()
                .unwrap_or(&everything);
            if !resources_match(constraints, &attributes, Some(object), &namespace).await? {
                continue;
            }
            for binding in bound.bindings.get(&policy.name).into_iter().flatten() {
                let key = format!("{}/{}", policy.name, binding.name);
                if reinvocation.is_some_and(|r| !r.should_run(plugin, &key)) {
                    continue;
                }
                if let Some(resources) = &binding.spec.match_resources
                    && !resources_match(resources, &attributes, Some(object), &namespace).await?
                {
                    continue;
                }
                let fail = |message: String| -> Result<(), ApiError> {
                    if policy.ignores_failures() {
                        Ok(())
                    } else {
                        Err(refusal(&attributes, &policy.name, &binding.name, &message))
                    }
                };
                let params = match crate::params::resolve(
                    self.policies.as_ref(),
                    policy.spec.param_kind.as_ref(),
                    binding.spec.param_ref.as_ref(),
                    attributes.namespace,
                )
                .await
                {
                    Ok(params) => params,
                    Err(message) => {
                        fail(format!("failed to configure binding: {message}"))?;
                        continue;
                    }
                };
                let mut changed = false;
                for param in &params {
                    let inputs =
                        inputs_of(&attributes, Some(object), &namespace, (true, true)).await?;
                    let outcome = crate::evaluation::run(|inline| {
                        policy.mutate(
                            self.policies.as_ref(),
                            &request.kind,
                            &inputs,
                            param,
                            inline,
                        )
                    });
                    match outcome {
                        Ok(Some(new)) => {
                            changed |= new != *object;
                            *object = new;
                        }
                        Ok(None) => {}
                        Err(message) => fail(message)?,
                    }
                }
                if let Some(reinvocation) = reinvocation {
                    let if_needed = policy.spec.reinvocation_policy.as_deref() == Some("IfNeeded");
                    reinvocation.invoked(plugin, &key, changed, if_needed);
                }
            }
        }
        if let Some(reinvocation) = reinvocation {
            reinvocation.end(plugin, object);
        }
        Ok(())
    }
}

/// The refusal of a write a failing binding of a `Fail` policy stops.
fn refusal(attributes: &Attributes<'_>, policy: &str, binding: &str, message: &str) -> ApiError {
    let resource = GroupResource::new(
        &attributes.request.resource.group,
        &attributes.request.resource.resource,
    );
    Status::forbidden(
        &resource,
        attributes.name,
        &format!("policy '{policy}' with binding '{binding}' denied request: {message}"),
    )
    .into()
}

impl MutatingPlugin for MutatingAdmissionPolicy {
    fn name(&self) -> &'static str {
        "MutatingAdmissionPolicy"
    }

    fn admit<'a>(
        &'a self,
        attributes: Attributes<'a>,
        object: &'a mut Value,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(self.run(attributes, object, None))
    }

    fn admit_in<'a>(
        &'a self,
        attributes: Attributes<'a>,
        object: &'a mut Value,
        reinvocation: &'a Reinvocation,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(self.run(attributes, object, Some(reinvocation)))
    }
}

#[cfg(test)]
mod tests;
