//! The status of ValidatingAdmissionPolicies, written inside the API server: upstream runs
//! this type check in the controller-manager (the ValidatingAdmissionPolicy status
//! controller), genplane runs it where the OpenAPI schemas of every served kind are at hand.
//!
//! [`PolicyStatus::run`] follows the stored policies; for each one whose
//! `status.observedGeneration` is not its `metadata.generation`, it type-checks the
//! validations' `expression` and `messageExpression` against the schemas of the kinds the
//! policy's `matchConstraints` name (no wildcards, at most ten: upstream's choice) and of its
//! `paramKind` ([`genplane_admission::validating_policy::type_check`]), and writes
//! `status.typeChecking.expressionWarnings` (a reference to a field the kind does not have,
//! say) with `status.observedGeneration`. Kinds whose schema is unknown are not checked. The
//! check never changes what the policy does at admission.

use std::sync::Arc;

use genplane_admission::validating_policy::{CheckedKind, resources_to_check, type_check};
use genplane_api::admissionregistration::types::PolicySpec;
use genplane_apimachinery::errors::ApiError;
use genplane_apiserver::server::ApiServer;
use genplane_registry::{ListOptions, Store, WriteOptions};
use genplane_storage::Storage;
use serde_json::{Value, json};

/// The policies' store and status store, and the server whose schemas they are checked
/// against.
pub struct PolicyStatus<S: Storage> {
    api: Arc<ApiServer<S>>,
    policies: Store<S>,
    status: Store<S>,
}

impl<S: Storage> std::fmt::Debug for PolicyStatus<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PolicyStatus")
    }
}

impl<S: Storage> PolicyStatus<S> {
    /// The controller of `api`'s policies, when it serves them with their `status`.
    pub fn new(api: Arc<ApiServer<S>>) -> Option<Arc<Self>> {
        let resource = api.resources().into_iter().find(|r| {
            r.info
                .is(&genplane_api::admissionregistration::validatingadmissionpolicy::INFO)
        })?;
        let policies = resource.store()?.clone();
        let status = resource.subresource_store("status")?.clone();
        Some(Arc::new(Self {
            api,
            policies,
            status,
        }))
    }

    /// Follows the policies until `stop` completes (after a first pass over those stored).
    pub async fn run(
        self: Arc<Self>,
        stop: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<(), ApiError> {
        let policies = self.policies.clone();
        crate::store_follower::follow(
            policies,
            "ValidatingAdmissionPolicies",
            move || {
                let this = self.clone();
                async move { this.sync().await }
            },
            stop,
        )
        .await
    }

    /// One pass: the status of every policy not checked at its generation.
    async fn sync(&self) -> Result<String, ApiError> {
        let listed = self.policies.list("", &ListOptions::default()).await?;
        for mut policy in listed.items {
            let generation = policy.pointer("/metadata/generation").cloned();
            if policy.pointer("/status/observedGeneration") == generation.as_ref() {
                continue;
            }
            let spec: PolicySpec = policy
                .get("spec")
                .cloned()
                .and_then(|s| serde_json::from_value(s).ok())
                .unwrap_or_default();
            let warnings: Vec<Value> =
                type_check(&spec, &self.kinds(&spec), self.params(&spec).as_ref())
                    .into_iter()
                    .map(|(field_ref, warning)| json!({"fieldRef": field_ref, "warning": warning}))
                    .collect();
            let mut status = policy.get("status").cloned().unwrap_or(json!({}));
            status["observedGeneration"] = generation.unwrap_or(json!(0));
            status["typeChecking"] = if warnings.is_empty() {
                json!({})
            } else {
                json!({"expressionWarnings": warnings})
            };
            policy["status"] = status;
            let name = policy
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            match self
                .status
                .update("", &name, policy, &WriteOptions::default())
                .await
            {
                Ok(_) => {}
                // A newer write comes back through the watch.
                Err(error) if crate::store_follower::raced(&error) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(listed.resource_version)
    }

    /// The served kinds the policy's rules name, with their schemas.
    fn kinds(&self, spec: &PolicySpec) -> Vec<CheckedKind> {
        let served = self.api.resources();
        let mut kinds: Vec<CheckedKind> = Vec::new();
        for (group, version, resource) in resources_to_check(spec) {
            let Some(found) = served.iter().find(|r| {
                r.info.group == group && r.info.version == version && r.info.resource == resource
            }) else {
                continue;
            };
            let api_version = if group.is_empty() {
                version.clone()
            } else {
                format!("{group}/{version}")
            };
            let name = format!("{group}/{version}, Kind={}", found.info.kind);
            if kinds.iter().any(|k| k.name == name) {
                continue;
            }
            if let Some(schema) = self.api.kind_schema(&api_version, &found.info.kind) {
                kinds.push(CheckedKind { name, schema });
            }
        }
        kinds
    }

    /// The schema of the policy's param kind, when it has one and it is served.
    fn params(&self, spec: &PolicySpec) -> Option<Value> {
        let kind = spec.param_kind.as_ref()?;
        self.api.kind_schema(&kind.api_version, &kind.kind)
    }
}
