//! The client library: a watch-backed view of the registry's allocations, and claiming.
//!
//! [`Registry::start`] lists and watches NetworkClaims and keeps an index of every range the
//! registry controller has allocated (the `Allocated` records of each claim's status). The
//! queries ([`Registry::owner_of`], [`Registry::ranges_for`], [`Registry::overlaps`]) answer
//! from that index in memory, without a request; it follows each change as the watch delivers
//! it. [`Registry::claim`] writes a claim by server-side apply and waits until the controller
//! has decided on every record of it.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::StreamExt as _;
use genplane_api::networkregistry::networkclaim::{
    self, ALLOCATED, AddressRecord, NetworkClaim, UNAVAILABLE,
};
use genplane_api::networkregistry::{API_VERSION, GROUP, Prefix, RESOURCE, VERSION};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use serde_json::json;
use tokio::sync::watch;

use crate::index::{Holding, PrefixIndex};

/// Errors of the client library.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A request to the API server failed.
    #[error("network registry request: {0}")]
    Api(#[from] kube::Error),
    /// The watch of NetworkClaims ended before its first list.
    #[error("the NetworkClaim watch ended before it listed the claims")]
    WatchEnded,
    /// The first list of NetworkClaims failed: the API server refused it (403, ...) or could
    /// not be reached.
    #[error("listing NetworkClaims: {}", describe(.0))]
    List(kube::Error),
    /// A record of the claim is unavailable: another claim holds an overlapping range.
    #[error("{prefix} of NetworkClaim {claim} is unavailable: {message}")]
    Unavailable {
        /// The claim.
        claim: String,
        /// The record's prefix.
        prefix: String,
        /// The claim holding an overlapping range.
        holder: String,
        /// The registry's message.
        message: String,
    },
    /// The controller did not decide on every record in time.
    #[error("NetworkClaim {claim} was not decided within {timeout:?}")]
    Timeout {
        /// The claim.
        claim: String,
        /// How long it waited.
        timeout: Duration,
    },
}

/// The NetworkClaim resource, for dynamic clients.
pub fn network_claim_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(GROUP, VERSION, networkclaim::KIND),
        RESOURCE,
    )
}

/// Reads a NetworkClaim from a dynamic object; `None` when it does not read as one.
pub fn read_claim(object: &DynamicObject) -> Option<NetworkClaim> {
    let value = serde_json::to_value(object).ok()?;
    networkclaim::read(&value).ok()
}

/// The records of `claim` whose status says `Allocated` (and that its spec still has), as
/// holdings.
pub fn allocated_records(claim: &NetworkClaim) -> Vec<Holding> {
    let name: Arc<str> = claim.metadata.name.as_deref().unwrap_or_default().into();
    let Some(status) = &claim.status else {
        return Vec::new();
    };
    claim
        .spec
        .address_space
        .iter()
        .filter(|record| {
            status
                .address_space
                .iter()
                .any(|s| s.prefix == record.prefix && s.status == ALLOCATED)
        })
        .filter_map(|record| {
            Some(Holding {
                claim: name.clone(),
                prefix: Prefix::parse_canonical(&record.prefix).ok()?,
                reference: record.reference.clone(),
                description: record.description.clone(),
            })
        })
        .collect()
}

#[derive(Debug, Default)]
struct State {
    index: PrefixIndex,
    claims: HashMap<String, NetworkClaim>,
}

impl State {
    fn put(&mut self, claim: NetworkClaim) {
        let name = claim.metadata.name.clone().unwrap_or_default();
        self.index.remove_claim(&name);
        for holding in allocated_records(&claim) {
            if let Err(holder) = self.index.insert(holding) {
                // Only while two changes are on their way (the holder's release first).
                tracing::debug!(claim = name, holder = %holder.claim, "overlapping allocation");
            }
        }
        self.claims.insert(name, claim);
    }

    fn remove(&mut self, name: &str) {
        self.index.remove_claim(name);
        self.claims.remove(name);
    }
}

/// A watch-backed view of the network registry (see the module documentation). Dropping it
/// stops its watch.
pub struct Registry {
    client: kube::Client,
    state: Arc<RwLock<State>>,
    changes: watch::Receiver<u64>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("claims", &read_state(&self.state).claims.len())
            .finish_non_exhaustive()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What went wrong, in words: the API server's message when it answered, else the error and
/// each of its causes (`tcp connect error: Connection refused`).
fn describe(error: &kube::Error) -> String {
    if let kube::Error::Api(status) = error {
        return status.message.clone();
    }
    let mut words = error.to_string();
    let mut cause = std::error::Error::source(error);
    while let Some(error) = cause {
        let said = error.to_string();
        if !words.contains(&said) {
            words.push_str(": ");
            words.push_str(&said);
        }
        cause = error.source();
    }
    words
}

/// The client's error inside a watch failure.
fn watch_failure(error: watcher::Error) -> kube::Error {
    match error {
        watcher::Error::InitialListFailed(error)
        | watcher::Error::WatchStartFailed(error)
        | watcher::Error::WatchFailed(error) => error,
        watcher::Error::WatchError(status) => kube::Error::Api(status),
        other => kube::Error::Service(Box::new(other)),
    }
}

fn read_state(state: &RwLock<State>) -> std::sync::RwLockReadGuard<'_, State> {
    state
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Registry {
    /// Lists and watches NetworkClaims with `client`; returns once the first list is in the
    /// index, or with the first list's error ([`Error::List`]: refused, or the API server not
    /// reached) at once. Once listed, the watch retries failures on its own.
    pub async fn start(client: kube::Client) -> Result<Self, Error> {
        let state = Arc::new(RwLock::new(State::default()));
        let (notify, mut changes) = watch::channel(0u64);
        let (failed, first_failure) = tokio::sync::oneshot::channel::<kube::Error>();
        let mut failed = Some(failed);
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &network_claim_resource());
        let shared = state.clone();
        let task = tokio::spawn(async move {
            let mut events = watcher(api, watcher::Config::default())
                .modify(|object: &mut DynamicObject| object.metadata.managed_fields = None)
                .boxed();
            let mut pending: Option<State> = None;
            let mut version = 0u64;
            while let Some(event) = events.next().await {
                let event = match event {
                    Ok(event) => event,
                    // Before the first list, the caller hears why there is none.
                    Err(error) if version == 0 && failed.is_some() => {
                        if let Some(failed) = failed.take() {
                            let _ = failed.send(watch_failure(error));
                        }
                        return;
                    }
                    Err(error) => {
                        tracing::debug!(%error, "NetworkClaim watch");
                        tokio::time::sleep(Duration::from_millis(500)).await;
                        continue;
                    }
                };
                {
                    let mut state = shared
                        .write()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    match event {
                        watcher::Event::Init => pending = Some(State::default()),
                        watcher::Event::InitApply(object) => {
                            if let (Some(pending), Some(claim)) =
                                (&mut pending, read_claim(&object))
                            {
                                pending.put(claim);
                            }
                        }
                        watcher::Event::InitDone => {
                            if let Some(fresh) = pending.take() {
                                *state = fresh;
                            }
                        }
                        watcher::Event::Apply(object) => {
                            if let Some(claim) = read_claim(&object) {
                                state.put(claim);
                            }
                        }
                        watcher::Event::Delete(object) => {
                            state.remove(object.metadata.name.as_deref().unwrap_or_default());
                        }
                    }
                }
                if pending.is_none() {
                    version += 1;
                    notify.send_replace(version);
                }
            }
        });
        // The first list is in once the version moves.
        let mut first_failure = first_failure;
        tokio::select! {
            biased;
            Ok(error) = &mut first_failure => return Err(Error::List(error)),
            changed = changes.changed() => {
                if changed.is_err() {
                    // The watch task ended: with the first list's error, if that is why.
                    return Err(first_failure.try_recv().map_or(Error::WatchEnded, Error::List));
                }
            }
        }
        Ok(Self {
            client,
            state,
            changes,
            task,
        })
    }

    /// The allocated range `addr` is in, and the claim holding it.
    pub fn owner_of(&self, addr: IpAddr) -> Option<Holding> {
        read_state(&self.state)
            .index
            .owner_of(addr)
            .map(|h| (**h).clone())
    }

    /// The allocated ranges for `group` and `resource` (e.g. `("", "services")`: the Service
    /// IP ranges), in address order, IPv4 first.
    pub fn ranges_for(&self, group: &str, resource: &str) -> Vec<Holding> {
        read_state(&self.state)
            .index
            .ranges_for(group, resource)
            .into_iter()
            .map(|h| (**h).clone())
            .collect()
    }

    /// The allocated ranges overlapping `prefix`.
    pub fn overlaps(&self, prefix: &Prefix) -> Vec<Holding> {
        read_state(&self.state)
            .index
            .overlaps(prefix)
            .into_iter()
            .map(|h| (**h).clone())
            .collect()
    }

    /// Every claim as last seen, by name.
    pub fn claims(&self) -> Vec<NetworkClaim> {
        let mut claims: Vec<NetworkClaim> =
            read_state(&self.state).claims.values().cloned().collect();
        claims.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        claims
    }

    /// Waits until the view has seen a change after this call (for tests and tools that
    /// wrote something and want to read it back).
    pub async fn changed(&self) {
        let mut changes = self.changes.clone();
        changes.mark_unchanged();
        let _ = changes.changed().await;
    }

    /// Claims `records` as NetworkClaim `name` (server-side apply as `field_manager`, which
    /// then owns these records) and waits, at most `timeout`, until the registry has decided
    /// on each of them: the claim when all are allocated, else [`Error::Unavailable`] naming
    /// the holder of the first unavailable one.
    pub async fn claim(
        &self,
        name: &str,
        field_manager: &str,
        records: &[AddressRecord],
        timeout: Duration,
    ) -> Result<NetworkClaim, Error> {
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &network_claim_resource());
        let records: Vec<serde_json::Value> = records
            .iter()
            .map(|r| {
                let mut record = json!({
                    "reference": {"group": r.reference.group, "resource": r.reference.resource},
                    "prefix": r.prefix,
                });
                if let Some(description) = &r.description {
                    record["description"] = json!(description);
                }
                record
            })
            .collect();
        let body = json!({
            "apiVersion": API_VERSION,
            "kind": networkclaim::KIND,
            "metadata": {"name": name},
            "spec": {"addressSpace": records},
        });
        let applied = api
            .patch(
                name,
                &PatchParams::apply(field_manager),
                &Patch::Apply(body),
            )
            .await?;
        let generation = applied.metadata.generation.unwrap_or(1);
        let mut changes = self.changes.clone();
        let wait = async {
            loop {
                if let Some(outcome) = self.decided(name, generation) {
                    return outcome;
                }
                if changes.changed().await.is_err() {
                    return Err(Error::WatchEnded);
                }
            }
        };
        tokio::time::timeout(timeout, wait)
            .await
            .map_err(|_| Error::Timeout {
                claim: name.to_owned(),
                timeout,
            })?
    }

    /// The outcome of claim `name` once the controller decided on its `generation`.
    fn decided(&self, name: &str, generation: i64) -> Option<Result<NetworkClaim, Error>> {
        let state = read_state(&self.state);
        let claim = state.claims.get(name)?;
        let status = claim.status.as_ref()?;
        let observed = status
            .conditions
            .iter()
            .find(|c| c.type_ == networkclaim::READY)
            .and_then(|c| c.observed_generation)?;
        if observed < generation {
            return None;
        }
        if let Some(record) = status
            .address_space
            .iter()
            .find(|r| r.status == UNAVAILABLE)
        {
            return Some(Err(Error::Unavailable {
                claim: name.to_owned(),
                prefix: record.prefix.clone(),
                holder: record.holder.clone().unwrap_or_default(),
                message: record.message.clone().unwrap_or_default(),
            }));
        }
        Some(Ok(claim.clone()))
    }
}
