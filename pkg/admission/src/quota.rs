//! The `ResourceQuota` plugin, as upstream's for the object counts a generic control plane
//! has: a create in a namespace is charged to the namespace's ResourceQuotas that limit
//! objects of its resource (`count/<resource>[.<group>]`, and the legacy core names
//! `configmaps`, `secrets`, `resourcequotas`, `replicationcontrollers`), and refused with
//! upstream's 403 when one would go over its limit:
//!
//! ```text
//! configmaps "c" is forbidden: exceeded quota: q, requested: configmaps=1, used: configmaps=3, limited: configmaps=3
//! ```
//!
//! What a quota limits is its `status.hard` (set by the `resourcequota` controller); a quota
//! whose `status.used` has no value yet for a limited resource refuses with `status unknown
//! for quota: ...`. A quota with scopes never matches (every scope is about pods). Updates,
//! deletes, subresources, creates of Namespaces and of core Events are not charged; a dry run
//! is checked but not charged.
//!
//! Consistency: before a create is admitted, its charge is written to the quota's
//! `status.used` over the version it was read at ([`Quotas::update_status`], a
//! resourceVersion-fenced write); a conflict reads the namespace's quotas again and checks
//! again (three times, as upstream). Concurrent creates in one namespace are checked as
//! batches by one worker per namespace, as upstream's quota evaluator does: the creates of a
//! batch are checked one after the other against the running usage, and the changed quotas
//! are written once for the whole batch. Upstream's limits apply: a charged create that then
//! fails (a name taken, a later plugin's refusal) keeps its charge until the `resourcequota`
//! controller recounts (on deletes and its periodic resync).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use genplane_api::core::resourcequota::{is_scoped, object_count_names};
use genplane_apimachinery::errors::{ApiError, Status, StatusReason};
use genplane_apimachinery::quantity::Quantity;
use genplane_apimachinery::schema::GroupResource;
use serde_json::Value;
use tokio::sync::oneshot;

use crate::config::QuotaConfiguration;
use crate::{Attributes, BoxFuture, Operation, ValidatingPlugin};

/// How often a batch is checked again after its writes conflicted (upstream's retries).
const RETRIES: usize = 3;

/// How long a create waits for its batch (upstream's evaluation timeout).
const EVALUATION_TIMEOUT: Duration = Duration::from_secs(10);

/// The stored ResourceQuotas, as the plugin reads and charges them.
pub trait Quotas: Send + Sync + std::fmt::Debug {
    /// The quotas of `namespace`: from memory unless `fresh`, then read consistently (after a
    /// write conflicted).
    fn list<'a>(
        &'a self,
        namespace: &'a str,
        fresh: bool,
    ) -> BoxFuture<'a, Result<Vec<Value>, ApiError>>;
    /// Writes `quota`'s status over the version its `metadata.resourceVersion` names (a 409
    /// when the stored quota changed since), answering the quota written.
    fn update_status<'a>(&'a self, quota: Value) -> BoxFuture<'a, Result<Value, ApiError>>;
}

/// One create waiting for its quota check.
#[derive(Debug)]
struct Charge {
    /// The resource (for the refusal).
    resource: GroupResource,
    /// The object's name, or its `generateName` (for the refusal).
    name: String,
    /// The quota resource names it counts against, each by one.
    names: Vec<String>,
    /// A dry run: checked, not charged.
    dry_run: bool,
}

impl Charge {
    fn forbidden(&self, why: &str) -> ApiError {
        Status::forbidden(&self.resource, &self.name, why).into()
    }
}

/// A create's charge and where its verdict goes.
struct Waiter {
    charge: Charge,
    verdict: Option<Result<(), ApiError>>,
    done: oneshot::Sender<Result<(), ApiError>>,
}

/// The namespaces with creates waiting, and whether a worker is checking each.
#[derive(Default)]
struct Pending {
    running: bool,
    waiting: Vec<Waiter>,
}

/// The quota evaluator: the per-namespace queues and the quotas the plugin wrote last.
#[derive(Debug)]
struct Evaluator {
    quotas: Arc<dyn Quotas>,
    pending: Mutex<HashMap<String, Pending>>,
    /// The quotas written by this plugin, by namespace and name: used in place of a listed
    /// one that is older (the cache has not seen the write yet), dropped once it has.
    written: Mutex<HashMap<(String, String), (u64, Value)>>,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("running", &self.running)
            .field("waiting", &self.waiting.len())
            .finish()
    }
}

fn resource_version(object: &Value) -> u64 {
    object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(0)
}

fn name_of(object: &Value) -> String {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// A quantity map of a quota (`status.hard`, `status.used`), the unreadable entries left out
/// (validation keeps them out of storage).
fn quantities(object: &Value, field: &str) -> BTreeMap<String, Quantity> {
    object
        .pointer(&format!("/status/{field}"))
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(name, value)| {
            let text = value.as_str()?;
            Some((name.clone(), Quantity::parse(text).ok()?))
        })
        .collect()
}

/// Upstream's `prettyPrint`: `name=value` pairs sorted by name, comma-separated.
fn pretty(list: &BTreeMap<String, Quantity>) -> String {
    list.iter()
        .map(|(name, value)| format!("{name}={value}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Whether `quota` limits any resource `charge` counts against (its `status.hard`, as
/// [`check`] reads it).
fn limits(quota: &Value, charge: &Charge) -> bool {
    charge.names.iter().any(|name| covers(quota, name))
}

/// Whether `quota` covers the quota resource `name` (an unscoped quota whose `status.hard`
/// limits it), as a resource limited by default needs.
fn covers(quota: &Value, name: &str) -> bool {
    !is_scoped(quota)
        && quota
            .pointer("/status/hard")
            .and_then(Value::as_object)
            .is_some_and(|hard| hard.contains_key(name))
}

/// Checks one create against the running `quotas`, charging it to them: the quotas after the
/// charge and whether any changed, or the refusal.
fn check(quotas: &mut [Value], charge: &Charge) -> Result<bool, ApiError> {
    let one = Quantity::parse("1").expect("invariant: 1 is a quantity");
    let mut charged = Vec::new();
    for (index, quota) in quotas.iter().enumerate() {
        if is_scoped(quota) {
            continue;
        }
        let hard = quantities(quota, "hard");
        let limited: Vec<&String> = charge
            .names
            .iter()
            .filter(|n| hard.contains_key(*n))
            .collect();
        if limited.is_empty() {
            continue;
        }
        let used = quantities(quota, "used");
        let mut unknown: Vec<&str> = limited
            .iter()
            .filter(|n| !used.contains_key(**n))
            .map(|n| n.as_str())
            .collect();
        if !unknown.is_empty() {
            unknown.sort_unstable();
            return Err(charge.forbidden(&format!(
                "status unknown for quota: {}, resources: {}",
                name_of(quota),
                unknown.join(",")
            )));
        }
        let mut new_used = BTreeMap::new();
        let mut exceeded = Vec::new();
        for name in limited {
            let sum = used[name]
                .checked_add(&one)
                .ok_or_else(|| charge.forbidden("quota usage overflows"))?;
            if sum.cmp_value(&hard[name]) == std::cmp::Ordering::Greater {
                exceeded.push(name.clone());
            }
            new_used.insert(name.clone(), sum);
        }
        if !exceeded.is_empty() {
            let mask = |list: &BTreeMap<String, Quantity>| -> BTreeMap<String, Quantity> {
                exceeded
                    .iter()
                    .filter_map(|n| Some((n.clone(), list.get(n)?.clone())))
                    .collect()
            };
            let requested = exceeded.iter().map(|n| (n.clone(), one.clone())).collect();
            return Err(charge.forbidden(&format!(
                "exceeded quota: {}, requested: {}, used: {}, limited: {}",
                name_of(quota),
                pretty(&requested),
                pretty(&mask(&used)),
                pretty(&mask(&hard)),
            )));
        }
        charged.push((index, new_used));
    }
    if charge.dry_run {
        return Ok(false);
    }
    let changed = !charged.is_empty();
    for (index, new_used) in charged {
        let status = &mut quotas[index]["status"];
        if !status["used"].is_object() {
            status["used"] = Value::Object(serde_json::Map::new());
        }
        for (name, value) in new_used {
            status["used"][name] = Value::String(value.to_string());
        }
    }
    Ok(changed)
}

impl Evaluator {
    /// The quotas of `namespace`, with this plugin's later writes in place of what the cache
    /// has not seen yet.
    async fn list(&self, namespace: &str, fresh: bool) -> Result<Vec<Value>, ApiError> {
        let mut listed = self.quotas.list(namespace, fresh).await?;
        let mut written = self
            .written
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for quota in &mut listed {
            let key = (namespace.to_owned(), name_of(quota));
            let listed_version = resource_version(quota);
            match written.get(&key) {
                Some((version, ours)) if *version > listed_version => *quota = ours.clone(),
                Some(_) => {
                    written.remove(&key);
                }
                None => {}
            }
        }
        Ok(listed)
    }

    /// Checks the creates of a batch in `namespace`, answering each.
    async fn check_batch(&self, namespace: &str, mut waiters: Vec<Waiter>) {
        let mut fresh = false;
        for attempt in 0..=RETRIES {
            match self.attempt(namespace, &mut waiters, fresh).await {
                Ok(()) => break,
                Err(error) if error.is(StatusReason::Conflict) && attempt < RETRIES => {
                    fresh = true;
                }
                Err(error) => {
                    for waiter in &mut waiters {
                        waiter.verdict.get_or_insert_with(|| Err(error.clone()));
                    }
                    break;
                }
            }
        }
        for waiter in waiters {
            let verdict = waiter.verdict.unwrap_or_else(|| {
                Err(Status::internal_error("resource quota evaluation failed").into())
            });
            let _ = waiter.done.send(verdict);
        }
    }

    /// One check of the undecided creates of a batch against the quotas as listed now: the
    /// refused and the uncharged ones are decided; the charged ones once every changed quota
    /// is written (a conflict leaves them undecided, for the next attempt).
    async fn attempt(
        &self,
        namespace: &str,
        waiters: &mut [Waiter],
        fresh: bool,
    ) -> Result<(), ApiError> {
        let original = self.list(namespace, fresh).await?;
        let mut running = original.clone();
        let mut charged = Vec::new();
        for (index, waiter) in waiters.iter_mut().enumerate() {
            if waiter.verdict.is_some() {
                continue;
            }
            match check(&mut running, &waiter.charge) {
                Ok(true) => charged.push(index),
                Ok(false) => waiter.verdict = Some(Ok(())),
                Err(refusal) => waiter.verdict = Some(Err(refusal)),
            }
        }
        for (quota, before) in running.into_iter().zip(&original) {
            if quota["status"]["used"] == before["status"]["used"] {
                continue;
            }
            let written = self.quotas.update_status(quota).await?;
            let key = (namespace.to_owned(), name_of(&written));
            self.written
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(key, (resource_version(&written), written));
        }
        for index in charged {
            waiters[index].verdict = Some(Ok(()));
        }
        Ok(())
    }

    /// Checks batches of `namespace` until none is waiting.
    async fn drain(self: Arc<Self>, namespace: String) {
        loop {
            let batch = {
                let mut pending = self
                    .pending
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let Some(entry) = pending.get_mut(&namespace) else {
                    return;
                };
                if entry.waiting.is_empty() {
                    pending.remove(&namespace);
                    return;
                }
                std::mem::take(&mut entry.waiting)
            };
            self.check_batch(&namespace, batch).await;
        }
    }

    /// Queues `charge` in `namespace` and waits for its verdict.
    async fn evaluate(self: &Arc<Self>, namespace: &str, charge: Charge) -> Result<(), ApiError> {
        let (done, verdict) = oneshot::channel();
        let start = {
            let mut pending = self
                .pending
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let entry = pending.entry(namespace.to_owned()).or_default();
            entry.waiting.push(Waiter {
                charge,
                verdict: None,
                done,
            });
            !std::mem::replace(&mut entry.running, true)
        };
        if start {
            tokio::spawn(self.clone().drain(namespace.to_owned()));
        }
        match tokio::time::timeout(EVALUATION_TIMEOUT, verdict).await {
            Ok(Ok(verdict)) => verdict,
            Ok(Err(_)) | Err(_) => {
                Err(Status::internal_error("resource quota evaluation timed out").into())
            }
        }
    }
}

/// `ResourceQuota`.
#[derive(Debug, Clone)]
pub struct ResourceQuota {
    evaluator: Arc<Evaluator>,
    configuration: Arc<QuotaConfiguration>,
}

impl ResourceQuota {
    /// The plugin over the stored `quotas`, with the resources `configuration` limits by
    /// default.
    pub fn new(quotas: Arc<dyn Quotas>, configuration: Arc<QuotaConfiguration>) -> Self {
        Self {
            configuration,
            evaluator: Arc::new(Evaluator {
                quotas,
                pending: Mutex::default(),
                written: Mutex::default(),
            }),
        }
    }
}

/// Whether the plugin charges a write: creates of namespaced objects, except Namespaces and
/// core Events, and not through a subresource.
fn charged(attributes: &Attributes<'_>) -> bool {
    let request = attributes.request;
    let resource = &request.resource;
    let uncharged = attributes.operation != Operation::Create
        || !request.subresource.is_empty()
        || attributes.namespace.is_empty()
        || resource.group.is_empty()
            && matches!(resource.resource.as_str(), "namespaces" | "events");
    !uncharged
}

/// The charge of a write the plugin charges ([`charged`]).
fn charge_of(attributes: &Attributes<'_>, object: Option<&Value>) -> Charge {
    let request = attributes.request;
    let resource = &request.resource;
    let name = if attributes.name.is_empty() {
        object
            .and_then(|o| o.pointer("/metadata/generateName"))
            .and_then(Value::as_str)
            .unwrap_or("Unknown")
            .to_owned()
    } else {
        attributes.name.to_owned()
    };
    Charge {
        resource: GroupResource::new(&resource.group, &resource.resource),
        name,
        names: object_count_names(&resource.group, &resource.resource),
        dry_run: request.dry_run,
    }
}

impl ValidatingPlugin for ResourceQuota {
    fn name(&self) -> &'static str {
        "ResourceQuota"
    }

    fn validate<'a>(
        &'a self,
        attributes: Attributes<'a>,
        object: Option<&'a Value>,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            if !charged(&attributes) {
                return Ok(());
            }
            // Most namespaces have no quota: one read of the cache, before anything is built.
            let quotas = self
                .evaluator
                .quotas
                .list(attributes.namespace, false)
                .await?;
            if quotas.is_empty() && self.configuration.limited_resources.is_empty() {
                return Ok(());
            }
            let charge = charge_of(&attributes, object);
            // resources limited by default need a quota that covers them
            let resource = &attributes.request.resource;
            let limited = self.configuration.limited_names(
                &resource.group,
                &resource.resource,
                &charge.names,
            );
            let uncovered: Vec<&str> = limited
                .iter()
                .filter(|name| !quotas.iter().any(|quota| covers(quota, name)))
                .map(String::as_str)
                .collect();
            if !uncovered.is_empty() {
                return Err(charge.forbidden(&format!(
                    "insufficient quota to consume: {}",
                    uncovered.join(",")
                )));
            }
            if !quotas.iter().any(|quota| limits(quota, &charge)) {
                return Ok(());
            }
            self.evaluator.evaluate(attributes.namespace, charge).await
        })
    }
}

#[cfg(test)]
mod tests;
