//! The admission webhook plugins, `MutatingAdmissionWebhook` and `ValidatingAdmissionWebhook`,
//! as Kubernetes 1.33's: every write is offered to the webhooks of the stored
//! `admissionregistration.k8s.io/v1` configurations ([`Configurations`]) that match it, in an
//! `admission.k8s.io/v1` `AdmissionReview` (`v1beta1` when that is the first version of its
//! `admissionReviewVersions` the server speaks; its answer then is not checked for its kind and
//! uid, as upstream) POSTed to the webhook's `clientConfig.url` (verified with its `caBundle`,
//! [`client`]).
//!
//! Which webhooks are called ([`Webhook::matches`]):
//!
//! - never for writes of the admission configuration kinds ([`is_admission_configuration`]:
//!   webhook configurations, validating and mutating admission policies and their bindings, in
//!   any version, through any subresource, deletes included), so that a broken webhook cannot
//!   lock out its own repair or the policies' (upstream's list);
//! - a rule must match: the operation (or `*`), the group, the version and the resource
//!   (`*`, `*/*`, `resource/subresource`, `resource/*`, `*/subresource`), and the scope
//!   (`Cluster`: cluster-scoped resources and namespaces; `Namespaced`: the others);
//! - `namespaceSelector` against the labels of the object's namespace (a Namespace's own labels;
//!   cluster-scoped objects always match); `objectSelector` against the labels of the new or the
//!   old object;
//! - `matchConditions`: CEL expressions over `object`, `oldObject`, `request` and `authorizer`
//!   ([`crate::authorizer`]); any `false` skips the webhook, an error applies the failure
//!   policy.
//!
//! A `dryRun` request matched by a webhook whose `sideEffects` is not `None` or `NoneOnDryRun`
//! is refused (400, `admission webhook "<name>" does not support dry run`).
//!
//! What an answer does: `allowed: false` refuses the write with the webhook's `status`
//! (`admission webhook "<name>" denied the request: <message>`, its code when 400 or above,
//! else 400); `warnings` go to the client as `Warning` headers ([`crate::Warnings`]); a
//! mutating webhook's `patch` (`patchType: JSONPatch`, base64) is applied to the object;
//! `auditAnnotations` go to the request's audit event as `<webhook name>/<key>`.
//! A call that fails (unreachable, timeout after `timeoutSeconds`, not a 2xx, a malformed
//! review) refuses the write with a 500 `failed calling webhook "<name>": ...` when
//! `failurePolicy` is `Fail`, and is skipped when it is `Ignore`.
//!
//! Mutating webhooks run one after the other in the order of their configurations' names and
//! of the webhooks in each; validating webhooks run concurrently. Each configuration is read
//! (and its match conditions compiled) once per generation, not on every write. A mutating
//! webhook with `reinvocationPolicy: IfNeeded` runs again when a later webhook or policy
//! changed the object ([`crate::reinvocation`]).
//!
//! The audit event gets upstream's annotations of each call: for every mutating webhook
//! called, `mutation.webhook.admission.k8s.io/round_<r>_index_<i>` (its configuration, name
//! and whether it changed the object) and, at level `Request` and above, its applied patch
//! under `patch.webhook.admission.k8s.io/...`; for every failure ignored,
//! `failed-open.{mutation,validating}.webhook.admission.k8s.io/...` with the webhook's name
//! (`r` is 1 in the reinvocation pass, `i` the webhook's place among the webhooks of its kind).
//!
//! Not yet: `matchPolicy: Equivalent` beyond the exact version (a rule of another version of
//! the same resource matches, but the webhook is sent the object in the request's version,
//! not converted to the rule's).

pub mod client;
pub mod resolver;

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use genplane_apimachinery::errors::{self, ApiError, Status, StatusReason};
use genplane_apimachinery::labels::{LabelSelector, Selector};
use genplane_apimachinery::validation::field::Path;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::namespace::Namespaces;
use crate::reinvocation::Reinvocation;
use crate::{Attributes, BoxFuture, Listed, MutatingPlugin, Operation, ValidatingPlugin};

/// The group of the webhook configurations.
const GROUP: &str = "admissionregistration.k8s.io";

/// Which webhooks: the kind of configuration and the plugin that calls them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Flavor {
    /// `MutatingWebhookConfiguration`s, called by `MutatingAdmissionWebhook`.
    Mutating,
    /// `ValidatingWebhookConfiguration`s, called by `ValidatingAdmissionWebhook`.
    Validating,
}

impl Flavor {
    /// The configurations' resource name.
    pub fn resource(self) -> &'static str {
        match self {
            Flavor::Mutating => "mutatingwebhookconfigurations",
            Flavor::Validating => "validatingwebhookconfigurations",
        }
    }
}

/// Whether a write is of an admission configuration kind, which no webhook is called for
/// (upstream's `IsExemptAdmissionConfigurationResource`): by the kind written, in any version,
/// through any subresource.
pub fn is_admission_configuration(kind: &genplane_apimachinery::schema::GroupVersionKind) -> bool {
    kind.group == GROUP
        && matches!(
            kind.kind.as_str(),
            "ValidatingWebhookConfiguration"
                | "MutatingWebhookConfiguration"
                | "ValidatingAdmissionPolicy"
                | "ValidatingAdmissionPolicyBinding"
                | "MutatingAdmissionPolicy"
                | "MutatingAdmissionPolicyBinding"
        )
}

/// The stored webhook configurations, as the plugins read them on every write.
pub trait Configurations: Send + Sync + std::fmt::Debug {
    /// The stored configurations of `flavor` (from memory: a write should not cost a storage
    /// read per configuration kind).
    fn list(&self, flavor: Flavor) -> BoxFuture<'_, Result<Listed, ApiError>>;
}

/// Why a webhook call failed; subject to the webhook's failure policy.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The request could not be made or got no 2xx answer.
    #[error("failed to call webhook: {0}")]
    Call(String),
    /// The answer is not a valid `AdmissionReview` response to the request.
    #[error("received invalid webhook response: {0}")]
    InvalidResponse(String),
    /// The configuration cannot be called (no usable URL or CA bundle).
    #[error("{0}")]
    Configuration(String),
    /// A match condition did not evaluate to a bool.
    #[error("{0}")]
    MatchCondition(String),
}

/// One webhook of a configuration, as the plugins read it (defaulted by the API).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Webhook {
    /// Its name.
    pub name: String,
    /// Where it is called.
    pub client_config: ClientConfig,
    /// What it is called for.
    pub rules: Vec<Rule>,
    /// `Fail` (the default) or `Ignore`.
    pub failure_policy: Option<String>,
    /// Selects namespaces by their labels.
    pub namespace_selector: Option<LabelSelector>,
    /// Selects objects by their labels.
    pub object_selector: Option<LabelSelector>,
    /// `None`, `NoneOnDryRun`, `Some` or `Unknown`.
    pub side_effects: Option<String>,
    /// The call timeout (10 s by default).
    pub timeout_seconds: Option<i32>,
    /// The `AdmissionReview` versions it accepts.
    pub admission_review_versions: Vec<String>,
    /// CEL conditions that must all hold for a call.
    pub match_conditions: Vec<MatchCondition>,
    /// `Never` (the default) or `IfNeeded` (mutating webhooks).
    pub reinvocation_policy: Option<String>,
    /// The name of its configuration (with its own name, what identifies it).
    #[serde(skip)]
    configuration: String,
    /// The match conditions compiled (once per configuration generation, by the dispatcher).
    #[serde(skip)]
    conditions: Option<Arc<Conditions>>,
}

/// A match condition compiled, or why it does not compile.
pub(crate) type CompiledCondition = Result<genplane_cel::Program, String>;

/// A webhook's match conditions, compiled over `object`, `oldObject`, `request` and
/// `authorizer`.
#[derive(Debug)]
struct Conditions {
    environment: genplane_cel::Environment<'static>,
    programs: Vec<CompiledCondition>,
}

impl Conditions {
    fn compile(conditions: &[MatchCondition]) -> Self {
        let environment = genplane_cel::Environment::new()
            .variable("object", genplane_cel::VarType::Dyn)
            .variable("oldObject", genplane_cel::VarType::Dyn)
            .variable("request", genplane_cel::VarType::Dyn)
            .variable("authorizer", genplane_cel::VarType::Dyn);
        let programs = conditions
            .iter()
            .enumerate()
            .map(|(i, condition)| {
                let path = Path::new("matchConditions").index(i).child("expression");
                environment
                    .compile(&condition.expression, &path)
                    .map_err(|e| e.to_string())
            })
            .collect();
        Self {
            environment,
            programs,
        }
    }
}

/// Whether every match condition holds: `Ok(false)` at the first false one; else the error
/// of the first that failed or did not give a bool, if any. `run` evaluates the program of
/// condition `i`.
pub(crate) fn conditions_hold(
    conditions: &[MatchCondition],
    programs: &[CompiledCondition],
    run: impl Fn(usize, &genplane_cel::Program) -> Result<genplane_cel::CelValue, String>,
) -> Result<bool, String> {
    let mut error = None;
    for (i, (condition, program)) in conditions.iter().zip(programs).enumerate() {
        let verdict = match program {
            Ok(program) => run(i, program),
            Err(e) => Err(e.clone()),
        };
        match verdict {
            Ok(genplane_cel::CelValue::Bool(false)) => return Ok(false),
            Ok(genplane_cel::CelValue::Bool(true)) => {}
            Ok(other) => {
                error.get_or_insert(format!(
                    "matchCondition {:?} did not evaluate to a bool: {other:?}",
                    condition.name
                ));
            }
            Err(e) => {
                error.get_or_insert(format!(
                    "failed to evaluate matchCondition {:?}: {e}",
                    condition.name
                ));
            }
        }
    }
    error.map_or(Ok(true), Err)
}

/// `clientConfig`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClientConfig {
    /// The `https://` URL.
    pub url: Option<String>,
    /// The Service called when there is no `url` ([`resolver`]).
    pub service: Option<resolver::ServiceReference>,
    /// Base64 of PEM CA certificates; the system roots without it.
    pub ca_bundle: Option<String>,
}

pub use genplane_api::admissionregistration::types::{MatchCondition, Rule};

/// Whether a rule covers a write.
pub trait RuleMatching {
    /// Whether the rule covers the write `attributes` describes.
    fn matches(&self, attributes: &Attributes<'_>) -> bool {
        self.matches_with(attributes, false)
    }

    /// Whether the rule covers the write, of the request's version or, with `equivalent`
    /// (`matchPolicy: Equivalent`), of any version of the same group and resource.
    fn matches_with(&self, attributes: &Attributes<'_>, equivalent: bool) -> bool;
}

impl RuleMatching for Rule {
    fn matches_with(&self, attributes: &Attributes<'_>, equivalent: bool) -> bool {
        let request = attributes.request;
        let any = |items: &[String], value: &str| items.iter().any(|i| i == "*" || i == value);
        any(&self.operations, attributes.operation.as_str())
            && any(&self.api_groups, &request.resource.group)
            && (equivalent || any(&self.api_versions, &request.resource.version))
            && matches_resource(self, &request.resource.resource, &request.subresource)
            && matches_scope(self, attributes)
    }
}

fn matches_resource(rule: &Rule, resource: &str, subresource: &str) -> bool {
    rule.resources.iter().any(|item| {
        if item == "*/*" {
            return true;
        }
        let (res, sub) = item.split_once('/').unwrap_or((item, ""));
        if subresource.is_empty() {
            sub.is_empty() && (res == "*" || res == resource)
        } else {
            (res == "*" || res == resource) && (sub == "*" || sub == subresource)
        }
    })
}

fn matches_scope(rule: &Rule, attributes: &Attributes<'_>) -> bool {
    let request = attributes.request;
    let is_namespace =
        request.resource.group.is_empty() && request.resource.resource == "namespaces";
    match rule.scope.as_deref() {
        Some("Cluster") => is_namespace || attributes.namespace.is_empty(),
        Some("Namespaced") => !is_namespace && !attributes.namespace.is_empty(),
        _ => true,
    }
}

fn labels_of(object: Option<&Value>) -> Option<BTreeMap<String, String>> {
    let object = object?;
    Some(
        object
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .map(|labels| {
                labels
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                    .collect()
            })
            .unwrap_or_default(),
    )
}

fn selector_of(selector: Option<&LabelSelector>) -> Result<Selector, ApiError> {
    match selector {
        None => Ok(Selector::everything()),
        Some(selector) => selector
            .to_selector()
            .map_err(|e| Status::internal_error(format!("invalid label selector: {e}")).into()),
    }
}

/// Whether `object_selector` selects the new or the old object, and `namespace_selector` the
/// object's namespace (a Namespace's own labels; cluster-scoped objects always match), as
/// webhooks and admission policies select writes. Without selectors, everything matches.
pub async fn selectors_match(
    namespace_selector: Option<&LabelSelector>,
    object_selector: Option<&LabelSelector>,
    attributes: &Attributes<'_>,
    object: Option<&Value>,
    namespaces: &dyn Namespaces,
) -> Result<bool, ApiError> {
    let objects = [object, attributes.old_object];
    let object_selector = selector_of(object_selector)?;
    if !object_selector.is_empty()
        && !objects
            .iter()
            .filter_map(|o| labels_of(*o))
            .any(|labels| object_selector.matches(&labels))
    {
        return Ok(false);
    }
    let namespace_selector = selector_of(namespace_selector)?;
    if namespace_selector.is_empty() {
        return Ok(true);
    }
    let request = attributes.request;
    if request.resource.group.is_empty() && request.resource.resource == "namespaces" {
        let own = labels_of(object.or(attributes.old_object)).unwrap_or_default();
        return Ok(namespace_selector.matches(&own));
    }
    if attributes.namespace.is_empty() {
        return Ok(true);
    }
    let found = crate::namespace::cached_or_stored(namespaces, attributes.namespace).await?;
    let namespace = found.ok_or_else(|| {
        ApiError::from(Status::not_found(
            &genplane_apimachinery::schema::GroupResource::new("", "namespaces"),
            attributes.namespace,
        ))
    })?;
    Ok(namespace_selector.matches(&labels_of(Some(&namespace)).unwrap_or_default()))
}

impl Webhook {
    /// Whether the webhook is called for this write: a rule matches, and the namespace and
    /// object selectors select it (match conditions are checked apart, as they may fail).
    pub async fn matches(
        &self,
        attributes: &Attributes<'_>,
        object: Option<&Value>,
        namespaces: &dyn Namespaces,
    ) -> Result<bool, ApiError> {
        if !self.rules.iter().any(|r| r.matches(attributes)) {
            return Ok(false);
        }
        selectors_match(
            self.namespace_selector.as_ref(),
            self.object_selector.as_ref(),
            attributes,
            object,
            namespaces,
        )
        .await
    }

    fn ignores_failures(&self) -> bool {
        self.failure_policy.as_deref() == Some("Ignore")
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(
            u64::try_from(self.timeout_seconds.unwrap_or(10).clamp(1, 30)).unwrap_or(10),
        )
    }

    fn supports_dry_run(&self) -> bool {
        matches!(self.side_effects.as_deref(), Some("None" | "NoneOnDryRun"))
    }

    /// Evaluates the match conditions: `Ok(false)` when one is false.
    fn conditions_hold(
        &self,
        review_request: &Value,
        attributes: &Attributes<'_>,
    ) -> Result<bool, Error> {
        if self.match_conditions.is_empty() {
            return Ok(true);
        }
        let compiled;
        let conditions = match &self.conditions {
            Some(conditions) => conditions.as_ref(),
            None => {
                compiled = Conditions::compile(&self.match_conditions);
                &compiled
            }
        };
        let prepared = conditions.environment.prepare(
            genplane_cel::Activation::new()
                .bind("object", &review_request["object"])
                .bind("oldObject", &review_request["oldObject"])
                .bind("request", review_request)
                .bind_value("authorizer", crate::authorizer::value(attributes)),
        );
        // upstream's budget for one webhook's conditions; cheap ones run inline
        crate::evaluation::run(|inline| {
            let budget = std::cell::RefCell::new(
                genplane_cel::Budget::new(crate::evaluation::MATCH_CONDITIONS_BUDGET)
                    .inline(inline),
            );
            let yielded = std::cell::Cell::new(false);
            let held = conditions_hold(
                &self.match_conditions,
                &conditions.programs,
                |_, program| {
                    if yielded.get() {
                        return Err(String::new());
                    }
                    program
                        .evaluate_prepared_within(&prepared, &[], &mut budget.borrow_mut())
                        .map_err(|e| {
                            yielded.set(e == genplane_cel::Error::Yielded);
                            e.to_string()
                        })
                },
            );
            (!yielded.get()).then(|| held.map_err(Error::MatchCondition))
        })
    }
}

/// The webhooks of one stored configuration, their match conditions compiled.
fn webhooks_of(configuration: &mut Value) -> Vec<Webhook> {
    let hooks = configuration
        .get_mut("webhooks")
        .map(Value::take)
        .unwrap_or(Value::Null);
    let mut webhooks = serde_json::from_value::<Vec<Webhook>>(hooks).unwrap_or_default();
    let name = configuration
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    for webhook in &mut webhooks {
        webhook.configuration.clone_from(&name);
        if !webhook.match_conditions.is_empty() {
            webhook.conditions = Some(Arc::new(Conditions::compile(&webhook.match_conditions)));
        }
    }
    webhooks
}

/// The HTTP clients of the webhooks, one per CA bundle and client certificate, shared by both
/// plugins.
#[derive(Debug, Default)]
pub struct Clients {
    by_bundle: Mutex<HashMap<ClientKey, reqwest::Client>>,
}

/// What tells clients apart: the CA bundle, the identity presented, and the address a
/// Service's name is overridden to.
type ClientKey = (
    String,
    Option<String>,
    Option<(String, std::net::SocketAddr)>,
);

impl Clients {
    /// The client trusting `ca_bundle` and presenting `identity` (PEM certificate and key),
    /// connecting to `address` for the name `server_name` when a Service's address is
    /// overridden.
    fn client(
        &self,
        ca_bundle: &str,
        identity: Option<&str>,
        overridden: Option<(&str, std::net::SocketAddr)>,
    ) -> Result<reqwest::Client, Error> {
        let mut clients = self
            .by_bundle
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = (
            ca_bundle.to_owned(),
            identity.map(str::to_owned),
            overridden.map(|(name, address)| (name.to_owned(), address)),
        );
        if let Some(client) = clients.get(&key) {
            return Ok(client.clone());
        }
        let roots = if ca_bundle.is_empty() {
            None
        } else {
            Some(client::parse_ca_bundle(ca_bundle).map_err(Error::Configuration)?)
        };
        let identity = identity
            .map(client::Identity::from_pem)
            .transpose()
            .map_err(Error::Configuration)?;
        let built = client::build_client(roots.as_deref(), identity, overridden)
            .map_err(|e| Error::Configuration(errors::chain(&e)))?;
        clients.insert(key, built.clone());
        Ok(built)
    }
}

/// The webhooks of each configuration read, by flavor and uid, with the generation read.
type ReadConfigurations = HashMap<(Flavor, String), (i64, Arc<Vec<Webhook>>)>;

/// The webhooks of every configuration of a flavor, by flavor, with the generation of the
/// list they were read from ([`Listed::generation`]).
type ReadLists = HashMap<Flavor, (u64, Vec<Arc<Vec<Webhook>>>)>;

/// What the two plugins share: where configurations and namespaces come from, and the clients.
#[derive(Debug, Clone)]
pub struct Dispatcher {
    configurations: Arc<dyn Configurations>,
    namespaces: Arc<dyn Namespaces>,
    clients: Arc<Clients>,
    /// Where webhooks given by `service` are reached.
    resolver: resolver::ServiceResolver,
    /// What this plugin presents to webhooks (`--admission-control-config-file`).
    credentials: Option<Arc<crate::config::WebhookCredentials>>,
    /// The webhooks of each stored configuration (by uid), read and compiled once per
    /// generation.
    read: Arc<Mutex<ReadConfigurations>>,
    /// The webhooks of each flavor, kept while its list's generation stays.
    lists: Arc<Mutex<ReadLists>>,
}

/// What a webhook answered, when it allowed the write.
#[derive(Debug, Default)]
struct Allowed {
    patch: Option<Vec<json_patch::PatchOperation>>,
    warnings: Vec<String>,
    /// The response's `auditAnnotations`.
    audit_annotations: Vec<(String, String)>,
}

impl Dispatcher {
    /// A dispatcher of the configurations of `configurations`, looking namespaces up in
    /// `namespaces`.
    pub fn new(configurations: Arc<dyn Configurations>, namespaces: Arc<dyn Namespaces>) -> Self {
        Self {
            configurations,
            namespaces,
            clients: Arc::new(Clients::default()),
            resolver: resolver::ServiceResolver::default(),
            credentials: None,
            read: Arc::new(Mutex::new(HashMap::new())),
            lists: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// The same dispatcher, reaching webhooks given by `service` through `resolver`.
    pub fn with_resolver(self, resolver: resolver::ServiceResolver) -> Self {
        Self { resolver, ..self }
    }

    /// The same dispatcher (sharing its caches and clients), presenting `credentials` to the
    /// webhooks it calls.
    pub fn with_credentials(
        &self,
        credentials: Option<Arc<crate::config::WebhookCredentials>>,
    ) -> Self {
        Self {
            credentials,
            ..self.clone()
        }
    }

    /// The webhooks of `flavor` to call for this write, with the review request they get.
    async fn matching(
        &self,
        flavor: Flavor,
        attributes: &Attributes<'_>,
        object: Option<&Value>,
    ) -> Result<Vec<(usize, Webhook)>, ApiError> {
        if is_admission_configuration(&attributes.request.kind) {
            return Ok(Vec::new());
        }
        let mut matching = Vec::new();
        let webhooks = self.webhooks(flavor).await?;
        for (index, webhook) in webhooks.iter().flat_map(|w| w.iter()).enumerate() {
            if webhook
                .matches(attributes, object, self.namespaces.as_ref())
                .await?
            {
                matching.push((index, webhook.clone()));
            }
        }
        Ok(matching)
    }

    /// The webhooks of the stored configurations of `flavor`, in upstream's order (by
    /// configuration name, then as listed), read once per configuration generation.
    async fn webhooks(&self, flavor: Flavor) -> Result<Vec<Arc<Vec<Webhook>>>, ApiError> {
        let listed = self.configurations.list(flavor).await?;
        let lists = || {
            self.lists
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        if let Some(generation) = listed.generation
            && let Some((read, webhooks)) = lists().get(&flavor)
            && *read == generation
        {
            return Ok(webhooks.clone());
        }
        let mut configurations = listed.items.as_ref().clone();
        let text = |v: &Value, pointer: &str| {
            v.pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        configurations.sort_by_key(|c| text(c, "/metadata/name"));
        let mut read = self
            .read
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut webhooks = Vec::with_capacity(configurations.len());
        let mut seen = Vec::with_capacity(configurations.len());
        for mut configuration in configurations {
            let uid = text(&configuration, "/metadata/uid");
            let generation = configuration
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            let key = (flavor, uid);
            let hooks = match read.get(&key) {
                Some((g, hooks)) if *g == generation && !key.1.is_empty() => hooks.clone(),
                _ => {
                    let hooks = Arc::new(webhooks_of(&mut configuration));
                    read.insert(key.clone(), (generation, hooks.clone()));
                    hooks
                }
            };
            let (_, uid) = key;
            seen.push(uid);
            webhooks.push(hooks);
        }
        // forget the configurations of this flavor no longer stored
        read.retain(|(f, uid), _| *f != flavor || seen.contains(uid));
        drop(read);
        if let Some(generation) = listed.generation {
            lists().insert(flavor, (generation, webhooks.clone()));
        }
        Ok(webhooks)
    }

    /// Whether a webhook's match conditions select the write; a failure to evaluate them
    /// refuses it, or leaves the webhook out when it ignores failures.
    fn selects(
        webhook: &Webhook,
        attributes: &Attributes<'_>,
        review_request: &Value,
    ) -> Result<bool, ApiError> {
        match webhook.conditions_hold(review_request, attributes) {
            Ok(selected) => Ok(selected),
            Err(error) => failed(webhook, error).map(|_| false),
        }
    }

    /// Calls one webhook its match conditions selected: `Ok(None)` when the call failed and
    /// it ignores failures.
    async fn call(
        &self,
        webhook: &Webhook,
        attributes: &Attributes<'_>,
        review_request: &Value,
    ) -> Result<Option<Allowed>, ApiError> {
        let failed = |error: Error| failed(webhook, error);
        if attributes.request.dry_run && !webhook.supports_dry_run() {
            return Err(Status::bad_request(format!(
                "admission webhook {:?} does not support dry run",
                webhook.name
            ))
            .into());
        }
        let Some(version) = review_version(webhook) else {
            return failed(Error::Configuration(
                "webhook does not accept known AdmissionReview versions".to_owned(),
            ));
        };
        let answer = match self.post(webhook, review_request, version).await {
            Ok(answer) => answer,
            Err(error) => return failed(error),
        };
        let uid = review_request["uid"].as_str().unwrap_or_default();
        match read_response(&answer, uid, version) {
            Ok(Verdict::Allowed(allowed)) => {
                record_audit_annotations(webhook, attributes, &allowed.audit_annotations);
                Ok(Some(allowed))
            }
            Ok(Verdict::Denied(status, warnings, annotations)) => {
                record_audit_annotations(webhook, attributes, &annotations);
                attributes.request.warnings.extend(warnings);
                Err(denial(&webhook.name, status))
            }
            Err(error) => failed(error),
        }
    }

    /// Posts an `AdmissionReview` of `version` (`v1`, `v1beta1`) holding `review_request`.
    async fn post(
        &self,
        webhook: &Webhook,
        review_request: &Value,
        version: &str,
    ) -> Result<Vec<u8>, Error> {
        let endpoint = match (&webhook.client_config.url, &webhook.client_config.service) {
            (Some(url), _) => Ok((url.clone(), None)),
            (None, Some(service)) => self
                .resolver
                .resolve(service)
                .map(|endpoint| {
                    let overridden = endpoint
                        .address
                        .map(|address| (endpoint.server_name.clone(), address));
                    (endpoint.url, overridden)
                })
                .map_err(|e| Error::Configuration(e.to_string())),
            (None, None) => Err(Error::Configuration(
                "webhook configuration must have either service or URL".to_owned(),
            )),
        };
        let (url, overridden) = endpoint?;
        let credentials = self
            .credentials
            .as_ref()
            .and_then(|c| c.for_host(url_host(&url)));
        let url = reqwest::Url::parse(&url)
            .map_err(|e| Error::Configuration(format!("Unparsable URL: {e}")))?;
        let client = self.clients.client(
            webhook
                .client_config
                .ca_bundle
                .as_deref()
                .unwrap_or_default(),
            credentials.and_then(|c| c.identity.as_deref()),
            overridden
                .as_ref()
                .map(|(name, address)| (name.as_str(), *address)),
        )?;
        let timeout = webhook.timeout();
        let review = json!({
            "apiVersion": format!("admission.k8s.io/{version}"),
            "kind": "AdmissionReview",
            "request": review_request,
        });
        let body =
            serde_json::to_vec(&review).expect("invariant: a serde_json::Value always serialises");
        client::post_json(
            &client,
            &client::url_with_timeout(&url, timeout),
            body,
            timeout,
            credentials.and_then(|c| c.authorization.as_deref()),
        )
        .await
        .map_err(Error::Call)
    }
}

/// A failed call of `webhook`: `Ok(None)` (logged) when it ignores failures, else the
/// refusal.
fn failed(webhook: &Webhook, error: Error) -> Result<Option<Allowed>, ApiError> {
    if webhook.ignores_failures() {
        tracing::warn!(webhook = %webhook.name, %error, "failed calling webhook, failing open");
        Ok(None)
    } else {
        Err(Status::internal_error(format!(
            "failed calling webhook {:?}: {error}",
            webhook.name
        ))
        .into())
    }
}

/// The audit annotations upstream's webhook dispatchers add: for each mutating webhook called,
/// whether it changed the object (and, at level `Request`, its patch); for each webhook whose
/// failure was ignored, its name. `round` is 1 in the reinvocation pass; `index` the webhook's
/// place among the webhooks of its kind.
fn annotate_call(
    attributes: &Attributes<'_>,
    key: (&str, usize, usize),
    webhook: &Webhook,
    mutated: Option<bool>,
    patch: Option<&[json_patch::PatchOperation]>,
    failed_open: bool,
) {
    let (kind, round, index) = key;
    let suffix = format!("round_{round}_index_{index}");
    let annotations = &attributes.request.audit_annotations;
    if let Some(mutated) = mutated {
        annotations.add(
            format!("mutation.webhook.admission.k8s.io/{suffix}"),
            json!({"configuration": webhook.configuration, "webhook": webhook.name, "mutated": mutated})
                .to_string(),
        );
    }
    if let Some(patch) = patch {
        annotations.add_at_request_level(
            format!("patch.webhook.admission.k8s.io/{suffix}"),
            json!({"configuration": webhook.configuration, "webhook": webhook.name,
                   "patch": patch, "patchType": "JSONPatch"})
            .to_string(),
        );
    }
    if failed_open {
        annotations.add(
            format!("failed-open.{kind}.webhook.admission.k8s.io/{suffix}"),
            webhook.name.clone(),
        );
    }
}

/// The host of a URL as it is written (`host[:port]`, a port kept even when it is the
/// default), which picks a webhook's credentials.
fn url_host(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host)
}

/// Adds a webhook's audit annotations to the request's, as upstream: each key prefixed with
/// the webhook's name (`<webhook>/<key>`); a key that is then not a qualified name is dropped
/// (logged), as is a key already set.
fn record_audit_annotations(
    webhook: &Webhook,
    attributes: &Attributes<'_>,
    annotations: &[(String, String)],
) {
    for (key, value) in annotations {
        let key = format!("{}/{key}", webhook.name);
        let problems = genplane_apimachinery::validation::is_qualified_name(&key);
        if problems.is_empty() {
            attributes.request.audit_annotations.add(key, value.clone());
        } else {
            tracing::warn!(webhook = %webhook.name, %key, ?problems, "dropping an invalid audit annotation of a webhook");
        }
    }
}

/// A webhook's answer.
#[derive(Debug)]
enum Verdict {
    Allowed(Allowed),
    /// The refusal's `status`, the warnings and the audit annotations.
    Denied(Value, Vec<String>, Vec<(String, String)>),
}

/// The `AdmissionReview` version a webhook is sent: the first of its
/// `admissionReviewVersions` the server speaks (`v1`, `v1beta1`), as upstream picks it.
fn review_version(webhook: &Webhook) -> Option<&'static str> {
    webhook
        .admission_review_versions
        .iter()
        .find_map(|v| match v.as_str() {
            "v1" => Some("v1"),
            "v1beta1" => Some("v1beta1"),
            _ => None,
        })
}

/// Reads a webhook's answer to the request `uid`, sent as an `AdmissionReview` of `version`.
/// A `v1` answer must be a v1 `AdmissionReview` answering `uid`; a `v1beta1` one is not
/// checked for either, as upstream (v1beta1 webhooks were never held to it).
fn read_response(answer: &[u8], uid: &str, version: &str) -> Result<Verdict, Error> {
    let invalid = |message: String| Error::InvalidResponse(message);
    let review: Value = serde_json::from_slice(answer)
        .map_err(|e| invalid(format!("couldn't get version/kind; json parse error: {e}")))?;
    if version == "v1beta1" {
        let response = review
            .get("response")
            .filter(|r| r.is_object())
            .ok_or_else(|| invalid("webhook response was absent".to_owned()))?;
        return read_allowed(response);
    }
    let api_version = review
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let kind = review
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if api_version != "admission.k8s.io/v1" || kind != "AdmissionReview" {
        return Err(invalid(format!(
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {api_version}, Kind={kind}"
        )));
    }
    let response = review
        .get("response")
        .filter(|r| r.is_object())
        .ok_or_else(|| invalid("response was absent".to_owned()))?;
    let got = response
        .get("uid")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if got != uid {
        return Err(invalid(format!(
            "expected response.uid={uid:?}, got {got:?}"
        )));
    }
    read_allowed(response)
}

/// The verdict of an `AdmissionReview`'s `response`: allowed (with its patch), or denied.
fn read_allowed(response: &Value) -> Result<Verdict, Error> {
    let invalid = |message: String| Error::InvalidResponse(message);
    let warnings: Vec<String> = response
        .get("warnings")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|w| w.as_str().map(str::to_owned))
        .collect();
    let audit_annotations: Vec<(String, String)> = response
        .get("auditAnnotations")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
        .collect();
    if response.get("allowed").and_then(Value::as_bool) != Some(true) {
        return Ok(Verdict::Denied(
            response.get("status").cloned().unwrap_or(Value::Null),
            warnings,
            audit_annotations,
        ));
    }
    let patch = match (
        response.get("patch").and_then(Value::as_str),
        response.get("patchType").and_then(Value::as_str),
    ) {
        (None | Some(""), _) => None,
        (Some(patch), Some("JSONPatch")) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(patch)
                .map_err(|e| invalid(format!("patch is not base64: {e}")))?;
            Some(
                serde_json::from_slice::<Vec<json_patch::PatchOperation>>(&bytes)
                    .map_err(|e| invalid(format!("patch is not a JSON patch: {e}")))?,
            )
        }
        (Some(_), other) => {
            return Err(invalid(format!(
                "unsupported patch type {:?}",
                other.unwrap_or_default()
            )));
        }
    };
    Ok(Verdict::Allowed(Allowed {
        patch,
        warnings,
        audit_annotations,
    }))
}

/// Upstream's refusal: the webhook's status with its message prefixed, at least a 400.
fn denial(name: &str, status: Value) -> ApiError {
    let text = |key: &str| {
        status
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let denied_by = format!("admission webhook {name:?} denied the request");
    let (message, reason) = (text("message"), text("reason"));
    let message = if !message.is_empty() {
        format!("{denied_by}: {message}")
    } else if !reason.is_empty() {
        format!("{denied_by}: {reason}")
    } else {
        format!("{denied_by} without explanation")
    };
    let mut refusal = Status::failure(StatusReason::BadRequest, message);
    refusal.reason = reason;
    refusal.code = status
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| *c >= 400)
        .unwrap_or(400);
    refusal.into()
}

/// The `request` of the `AdmissionReview` of a write.
pub(crate) fn review_request(attributes: &Attributes<'_>, object: Option<&Value>) -> Value {
    let request = attributes.request;
    let kind = json!({"group": request.kind.group, "version": request.kind.version, "kind": request.kind.kind});
    let resource = json!({"group": request.resource.group, "version": request.resource.version, "resource": request.resource.resource});
    let options_kind = match attributes.operation {
        Operation::Create => "CreateOptions",
        Operation::Update => "UpdateOptions",
        Operation::Delete => "DeleteOptions",
    };
    let mut review = json!({
        "uid": uuid::Uuid::new_v4().to_string(),
        "kind": kind,
        "resource": resource,
        "requestKind": kind,
        "requestResource": resource,
        "name": attributes.name,
        "operation": attributes.operation.as_str(),
        "userInfo": request.user,
        "object": object,
        "oldObject": attributes.old_object,
        "dryRun": request.dry_run,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": options_kind},
    });
    if !attributes.namespace.is_empty() {
        review["namespace"] = json!(attributes.namespace);
    }
    if !request.subresource.is_empty() {
        review["subResource"] = json!(request.subresource);
        review["requestSubResource"] = json!(request.subresource);
    }
    review
}

/// `MutatingAdmissionWebhook`: calls the matching mutating webhooks in order, applying their
/// patches.
#[derive(Debug, Clone)]
pub struct MutatingAdmissionWebhook {
    dispatcher: Dispatcher,
}

impl MutatingAdmissionWebhook {
    /// The plugin over `dispatcher`'s configurations.
    pub fn new(dispatcher: Dispatcher) -> Self {
        Self { dispatcher }
    }

    async fn run(
        &self,
        attributes: Attributes<'_>,
        mut object: Option<&mut Value>,
        reinvocation: Option<&Reinvocation>,
    ) -> Result<(), ApiError> {
        let plugin = self.name();
        if let (Some(reinvocation), Some(object)) = (reinvocation, object.as_deref())
            && !reinvocation.begin(plugin, object)
        {
            return Ok(());
        }
        let hooks = self
            .dispatcher
            .matching(Flavor::Mutating, &attributes, object.as_deref())
            .await?;
        let round = usize::from(reinvocation.is_some_and(Reinvocation::is_reinvoke));
        for (index, webhook) in hooks {
            let key = format!("{}/{}", webhook.configuration, webhook.name);
            if reinvocation.is_some_and(|r| !r.should_run(plugin, &key)) {
                continue;
            }
            let review = review_request(&attributes, object.as_deref());
            if !Dispatcher::selects(&webhook, &attributes, &review)? {
                continue;
            }
            let annotate = |mutated, patch, failed_open| {
                annotate_call(
                    &attributes,
                    ("mutation", round, index),
                    &webhook,
                    Some(mutated),
                    patch,
                    failed_open,
                );
            };
            let allowed = match self.dispatcher.call(&webhook, &attributes, &review).await {
                Ok(Some(allowed)) => allowed,
                Ok(None) => {
                    annotate(false, None, true);
                    continue;
                }
                Err(error) => {
                    annotate(false, None, false);
                    return Err(error);
                }
            };
            attributes.request.warnings.extend(allowed.warnings);
            let mut changed = false;
            match (allowed.patch, object.as_deref_mut()) {
                (Some(patch), Some(object)) if !patch.is_empty() => {
                    let mut patched = object.clone();
                    let applied = json_patch::patch(&mut patched, &patch).map_err(|e| {
                        ApiError::from(Status::internal_error(format!(
                            "admission webhook {:?} returned a patch that does not apply: {e}",
                            webhook.name
                        )))
                    });
                    if let Err(error) = applied {
                        annotate(false, None, false);
                        return Err(error);
                    }
                    changed = patched != *object;
                    *object = patched;
                    annotate(changed, Some(&patch), false);
                }
                _ => annotate(false, None, false),
            }
            if let Some(reinvocation) = reinvocation {
                let if_needed = webhook.reinvocation_policy.as_deref() == Some("IfNeeded");
                reinvocation.invoked(plugin, &key, changed, if_needed);
            }
        }
        if let (Some(reinvocation), Some(object)) = (reinvocation, object.as_deref()) {
            reinvocation.end(plugin, object);
        }
        Ok(())
    }
}

impl MutatingPlugin for MutatingAdmissionWebhook {
    fn name(&self) -> &'static str {
        "MutatingAdmissionWebhook"
    }

    fn admit<'a>(
        &'a self,
        attributes: Attributes<'a>,
        object: &'a mut Value,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(self.run(attributes, Some(object), None))
    }

    fn admit_in<'a>(
        &'a self,
        attributes: Attributes<'a>,
        object: &'a mut Value,
        reinvocation: &'a Reinvocation,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(self.run(attributes, Some(object), Some(reinvocation)))
    }

    fn admit_delete<'a>(
        &'a self,
        attributes: Attributes<'a>,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(self.run(attributes, None, None))
    }
}

/// `ValidatingAdmissionWebhook`: calls the matching validating webhooks concurrently; any
/// refusal refuses the write.
#[derive(Debug, Clone)]
pub struct ValidatingAdmissionWebhook {
    dispatcher: Dispatcher,
}

impl ValidatingAdmissionWebhook {
    /// The plugin over `dispatcher`'s configurations.
    pub fn new(dispatcher: Dispatcher) -> Self {
        Self { dispatcher }
    }
}

impl ValidatingPlugin for ValidatingAdmissionWebhook {
    fn name(&self) -> &'static str {
        "ValidatingAdmissionWebhook"
    }

    fn validate<'a>(
        &'a self,
        attributes: Attributes<'a>,
        object: Option<&'a Value>,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            let hooks = self
                .dispatcher
                .matching(Flavor::Validating, &attributes, object)
                .await?;
            if hooks.is_empty() {
                return Ok(());
            }
            let review = review_request(&attributes, object);
            let calls = hooks.iter().map(|(index, webhook)| {
                let (attributes, review) = (&attributes, &review);
                async move {
                    if !Dispatcher::selects(webhook, attributes, review)? {
                        return Ok(Some(Allowed::default()));
                    }
                    let answer = self.dispatcher.call(webhook, attributes, review).await;
                    if let Ok(None) = answer {
                        annotate_call(
                            attributes,
                            ("validating", 0, *index),
                            webhook,
                            None,
                            None,
                            true,
                        );
                    }
                    answer
                }
            });
            let mut refusal = None;
            for answer in futures::future::join_all(calls).await {
                match answer {
                    Ok(Some(allowed)) => attributes.request.warnings.extend(allowed.warnings),
                    Ok(None) => {}
                    Err(error) => {
                        refusal.get_or_insert(error);
                    }
                }
            }
            refusal.map_or(Ok(()), Err)
        })
    }
}

#[cfg(test)]
mod tests;
