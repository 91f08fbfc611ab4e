//! Admission: what runs on every write between decoding and storage, as upstream's admission
//! chain.
//!
//! ```text
//! decode ─▶ default ─▶ mutating plugins ─▶ prepare ─▶ validation (the strategy, the schema)
//!        ─▶ validating plugins ─▶ storage
//! ```
//!
//! - [`Attributes`]: what a plugin sees of a write — who asks ([`Request`]: user, kind,
//!   resource, subresource, dry run), the [`Operation`], namespace, name, and the stored object
//!   for updates and deletes.
//! - [`MutatingPlugin`] may change the object; [`ValidatingPlugin`] may only refuse it.
//! - [`Chain`] runs the enabled plugins in upstream's order; the store calls it
//!   (`genplane-registry`'s `WriteOptions::admission`).
//! - [`plugins`]: every plugin by upstream's name, which are enabled by default, and
//!   `--enable-admission-plugins` / `--disable-admission-plugins` resolved into a [`Chain`].
//! - [`namespace`]: NamespaceLifecycle, NamespaceExists and NamespaceAutoProvision, over a
//!   [`namespace::Namespaces`] view of the stored namespaces.
//! - [`webhook`]: MutatingAdmissionWebhook and ValidatingAdmissionWebhook, over a
//!   [`webhook::Configurations`] view of the stored webhook configurations, and the HTTPS
//!   client of webhooks ([`webhook::client`], also used by CRD conversion webhooks).
//! - [`validating_policy`]: ValidatingAdmissionPolicy, evaluating the CEL validations of the stored
//!   policies through their bindings, over a [`validating_policy::Policies`] view of the stored policies,
//!   bindings and parameter objects.
//! - [`mutating_policy`]: MutatingAdmissionPolicy (alpha), changing objects by the CEL
//!   mutations (apply configurations and JSON patches) of the stored policies through their
//!   bindings, over a [`mutating_policy::MutatingPolicies`] view; [`params`]: the params both
//!   policy plugins read.
//! - [`component`]: ComponentRestriction, genplane's NodeRestriction: what each component's
//!   identity may write of Features, identity Leases and NetworkClaims, beyond what RBAC can
//!   say (its own uses, its own identity Leases, only the feature-controller moving states).
//! - [`quota`]: ResourceQuota, charging creates to the object-count quotas of their namespace
//!   over a [`quota::Quotas`] view of the stored quotas.
//! - [`authorizer`]: the `authorizer` variable of admission expressions (policies, webhook
//!   match conditions), the server's authorizer ([`Request::authorizer`]) asked about the
//!   request's user.
//! - [`config`]: `--admission-control-config-file`, the plugins' configuration (credentials
//!   for webhooks, resources limited by default for ResourceQuota).
//! - [`evaluation`]: where the CEL of admission runs: inline while cheap, off the runtime's
//!   workers once not, within upstream's cost budgets.
//! - [`reinvocation`]: `reinvocationPolicy: IfNeeded` of mutating webhooks and policies (a
//!   second pass of the mutating plugins when a later one changed the object).
//! - [`Warnings`]: what plugins tell the client besides admitting or refusing (`Warning`
//!   headers).

#![warn(missing_docs)]

pub mod authorizer;
mod bound;
pub mod certificates;
pub mod component;
pub mod config;
pub mod evaluation;
pub mod mutating_policy;
pub mod namespace;
pub mod params;
pub mod plugins;
pub mod quota;
pub mod reinvocation;
pub mod validating_policy;
pub mod webhook;

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::schema::{GroupVersionKind, GroupVersionResource};
use genplane_authentication::UserInfo;
use serde_json::Value;

/// A boxed future, as plugins return them (plugins are called through `dyn`).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Stored objects of one kind as listed at one moment (webhook configurations, policies,
/// bindings), for plugins that read them on every write.
#[derive(Clone, Debug, Default)]
pub struct Listed {
    /// Equal for two lists with equal objects, and different after any change: a plugin
    /// keeps what it derived from the objects while it stays the same. `None`: unknown, so
    /// nothing is kept from one list to the next.
    pub generation: Option<u64>,
    /// The objects, shared.
    pub items: Arc<Vec<Value>>,
}

impl Listed {
    /// Objects without a generation.
    pub fn unversioned(items: Vec<Value>) -> Self {
        Self {
            generation: None,
            items: Arc::new(items),
        }
    }
}

/// What a write does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// A new object (a POST, an apply or update of a missing object).
    Create,
    /// A change of a stored object.
    Update,
    /// The deletion of a stored object.
    Delete,
}

impl Operation {
    /// The operation as upstream names it (`CREATE`, `UPDATE`, `DELETE`).
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }
}

/// What a request is, for every write it makes.
#[derive(Clone, Debug, Default)]
pub struct Request {
    /// Who asks.
    pub user: UserInfo,
    /// The kind written (the resource's, even through a subresource).
    pub kind: GroupVersionKind,
    /// The resource.
    pub resource: GroupVersionResource,
    /// The subresource (`status`, `finalize`, `scale`), empty for the resource itself.
    pub subresource: String,
    /// `dryRun=All`: plugins with side effects must not have them.
    pub dry_run: bool,
    /// The warnings plugins give the client, collected over the request's writes.
    pub warnings: Warnings,
    /// The audit annotations plugins add, for the request's audit record.
    pub audit_annotations: AuditAnnotations,
    /// The server's authorizer, which the `authorizer` variable of admission expressions asks
    /// about `user` (`None`: every check errs).
    pub authorizer: Option<Arc<dyn genplane_authorization::Authorizer>>,
}

/// What the mutating plugins did to an object ([`Chain::mutate`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use = "a changed object is decoded again"]
pub enum Mutated {
    /// A webhook or policy changed it.
    Changed,
    /// No webhook or policy changed it.
    Unchanged,
}

/// Annotations for the request's audit event, added by plugins while a request runs and
/// taken by the server, which records them. Clones share the same list.
#[derive(Clone, Debug, Default)]
pub struct AuditAnnotations(Arc<Mutex<Vec<AuditAnnotation>>>);

/// One annotation for the request's audit event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditAnnotation {
    /// Its key.
    pub key: String,
    /// Its value.
    pub value: String,
    /// Recorded only in events of level `Request` and above (what would show more than
    /// metadata, such as a webhook's patch), else at every level.
    pub request_level: bool,
}

impl AuditAnnotations {
    /// Adds the annotation `key` (a key already set keeps its first value, as upstream).
    pub fn add(&self, key: String, value: String) {
        self.push(key, value, false);
    }

    /// Adds the annotation `key`, to be recorded only at level `Request` and above.
    pub fn add_at_request_level(&self, key: String, value: String) {
        self.push(key, value, true);
    }

    fn push(&self, key: String, value: String, request_level: bool) {
        let mut list = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !list.iter().any(|a| a.key == key) {
            list.push(AuditAnnotation {
                key,
                value,
                request_level,
            });
        }
    }

    /// The annotations added so far, leaving none.
    pub fn take(&self) -> Vec<AuditAnnotation> {
        std::mem::take(
            &mut *self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }
}

/// Warnings for the client (`Warning: 299` headers), added by plugins while a request runs
/// and taken by the handler that answers it. Clones share the same list.
#[derive(Clone, Debug, Default)]
pub struct Warnings(Arc<Mutex<Vec<String>>>);

impl Warnings {
    /// Adds `warnings` (a warning already given is not repeated).
    pub fn extend(&self, warnings: impl IntoIterator<Item = String>) {
        let mut list = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for warning in warnings {
            if !list.contains(&warning) {
                list.push(warning);
            }
        }
    }

    /// The warnings given so far, leaving none.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(
            &mut *self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }
}

/// What a plugin sees of one write.
#[derive(Clone, Copy, Debug)]
pub struct Attributes<'a> {
    /// The request.
    pub request: &'a Request,
    /// What the write does.
    pub operation: Operation,
    /// The namespace of the object (empty for cluster-scoped resources).
    pub namespace: &'a str,
    /// The object's name (empty for a create with `generateName`).
    pub name: &'a str,
    /// The stored object, for updates and deletes.
    pub old_object: Option<&'a Value>,
}

/// A plugin that may change what is written (and refuse it).
pub trait MutatingPlugin: Send + Sync + std::fmt::Debug {
    /// Its name, as `--enable-admission-plugins` spells it.
    fn name(&self) -> &'static str;
    /// Changes `object` (the new object; for a delete, there is none and this is not called),
    /// or refuses the write.
    fn admit<'a>(
        &'a self,
        attributes: Attributes<'a>,
        object: &'a mut Value,
    ) -> BoxFuture<'a, Result<(), ApiError>>;
    /// [`MutatingPlugin::admit`] in a pass of the chain, whose `reinvocation` state the
    /// plugins that reinvoke (webhooks, policies) keep; the others ignore it.
    fn admit_in<'a>(
        &'a self,
        attributes: Attributes<'a>,
        object: &'a mut Value,
        reinvocation: &'a reinvocation::Reinvocation,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        let _ = reinvocation;
        self.admit(attributes, object)
    }
    /// Refuses a delete, if it should (deletes have no object to change).
    fn admit_delete<'a>(
        &'a self,
        _attributes: Attributes<'a>,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async { Ok(()) })
    }
}

/// A plugin that may only refuse what is written.
pub trait ValidatingPlugin: Send + Sync + std::fmt::Debug {
    /// Its name, as `--enable-admission-plugins` spells it.
    fn name(&self) -> &'static str;
    /// Refuses the write of `object` (`None` for a delete), or lets it through.
    fn validate<'a>(
        &'a self,
        attributes: Attributes<'a>,
        object: Option<&'a Value>,
    ) -> BoxFuture<'a, Result<(), ApiError>>;
}

/// The enabled plugins, in the order they run.
#[derive(Clone, Debug, Default)]
pub struct Chain {
    mutating: Vec<Arc<dyn MutatingPlugin>>,
    validating: Vec<Arc<dyn ValidatingPlugin>>,
}

impl Chain {
    /// A chain of `mutating` then `validating` plugins, each in the order given.
    pub fn new(
        mutating: Vec<Arc<dyn MutatingPlugin>>,
        validating: Vec<Arc<dyn ValidatingPlugin>>,
    ) -> Self {
        Self {
            mutating,
            validating,
        }
    }

    /// The names of the plugins, mutating ones first, in the order they run.
    pub fn names(&self) -> Vec<&'static str> {
        self.mutating
            .iter()
            .map(|p| p.name())
            .chain(self.validating.iter().map(|p| p.name()))
            .collect()
    }

    /// Whether no plugin is enabled.
    pub fn is_empty(&self) -> bool {
        self.mutating.is_empty() && self.validating.is_empty()
    }

    /// Runs the mutating plugins on a create or update of `object`; the first refusal wins.
    /// When a webhook or policy changed the object after an `IfNeeded` one ran, the plugins
    /// run a second time ([`reinvocation`]). Answers whether a webhook or policy changed the
    /// object: the caller then decodes it again (unknown fields pruned, types checked), as
    /// upstream decodes what mutating admission returns.
    pub async fn mutate(
        &self,
        attributes: Attributes<'_>,
        object: &mut Value,
    ) -> Result<Mutated, ApiError> {
        let reinvocation = reinvocation::Reinvocation::default();
        for plugin in &self.mutating {
            plugin.admit_in(attributes, object, &reinvocation).await?;
        }
        if reinvocation.should_reinvoke() {
            reinvocation.start_second_pass();
            for plugin in &self.mutating {
                plugin.admit_in(attributes, object, &reinvocation).await?;
            }
        }
        Ok(if reinvocation.changed() {
            Mutated::Changed
        } else {
            Mutated::Unchanged
        })
    }

    /// Runs the mutating plugins' checks of a delete.
    pub async fn mutate_delete(&self, attributes: Attributes<'_>) -> Result<(), ApiError> {
        for plugin in &self.mutating {
            plugin.admit_delete(attributes).await?;
        }
        Ok(())
    }

    /// Runs the validating plugins on the final `object` (`None` for a delete).
    pub async fn validate(
        &self,
        attributes: Attributes<'_>,
        object: Option<&Value>,
    ) -> Result<(), ApiError> {
        for plugin in &self.validating {
            plugin.validate(attributes, object).await?;
        }
        Ok(())
    }
}
