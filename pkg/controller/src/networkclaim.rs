//! The `networkclaim` controller: the network registry (KANA). It decides on every record of
//! every NetworkClaim, first come, first served ([`genplane_networkregistry::allocate()`]: by
//! creation time, then name, so that any leader reaches the same verdicts), and writes them to
//! each claim's status: per record `Allocated`, or `Unavailable` with the holder named, and
//! the conditions `Ready` and `Conflict`. A claim whose records become unavailable gets a
//! `Warning` event (`Overlaps`) naming them (the first five) and their holders.
//!
//! Every claim gets the finalizer [`FINALIZER`]. A deleted claim keeps its ranges for the
//! release grace period after its `deletionTimestamp` (10 s by default, as upstream's
//! ServiceCIDR controller waits, so that every reader has seen the deletion before the ranges
//! go to another claim); then the finalizer is removed and the next claims are decided again.
//! A changed spec (a record removed) is decided again at once.
//!
//! The controller decides from all claims at each change (the claims watch, and the end of a
//! grace period), in one pass over the prefix index; writes go only to claims whose status
//! changes.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use genplane_api::networkregistry::networkclaim::{
    ALLOCATED, AddressRecord, CONFLICT, FINALIZER, NetworkClaim, READY, RecordStatus, UNAVAILABLE,
};
use genplane_networkregistry::{Allocation, Candidate, Verdict, allocate};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::{WatchStreamExt as _, watcher};
use serde_json::json;
use tokio::sync::Notify;

/// How long a deleted claim keeps its ranges by default.
pub const DEFAULT_RELEASE_GRACE: Duration = Duration::from_secs(10);

/// Errors of the network-claim controller.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A request to the API server failed.
    #[error("network registry: {0}")]
    Api(#[from] kube::Error),
}

fn now() -> Timestamp {
    Timestamp::now()
}

fn condition(type_: &str, on: bool, reason: &str, message: String, generation: i64) -> Condition {
    Condition {
        type_: type_.to_owned(),
        status: if on { "True" } else { "False" }.to_owned(),
        observed_generation: Some(generation),
        last_transition_time: Time(now()),
        reason: reason.to_owned(),
        message,
    }
}

/// The status the verdicts give `claim`, keeping the dates of unchanged records, the
/// transition times of unchanged conditions, and conditions of other types (the well-known
/// claims' `FromFlags`).
fn desired_status(claim: &NetworkClaim, verdicts: &[(String, Verdict)]) -> serde_json::Value {
    let current = claim.status.clone().unwrap_or_default();
    let generation = claim.metadata.generation.unwrap_or(1);
    let mut records = Vec::new();
    let mut unavailable = Vec::new();
    for (prefix, verdict) in verdicts {
        let (status, reason, message, holder) = match verdict {
            Verdict::Allocated => (
                ALLOCATED,
                "Allocated",
                format!("{prefix} is allocated to this claim"),
                None,
            ),
            Verdict::Unavailable { holder, held } => (
                UNAVAILABLE,
                "Overlaps",
                format!("{prefix} overlaps {held}, held by NetworkClaim {holder}"),
                Some(holder.to_string()),
            ),
            Verdict::Invalid => (
                UNAVAILABLE,
                "Invalid",
                format!("{prefix} is not a prefix in canonical form"),
                None,
            ),
        };
        if status == UNAVAILABLE {
            unavailable.push(message.clone());
        }
        let previous = current
            .address_space
            .iter()
            .find(|r| r.prefix == *prefix && r.status == status);
        let date = previous
            .and_then(|r| r.date.clone())
            .unwrap_or_else(|| Time(now()));
        records.push(RecordStatus {
            prefix: prefix.clone(),
            status: status.to_owned(),
            date: Some(date),
            reason: Some(reason.to_owned()),
            message: Some(message),
            holder,
        });
    }
    let ready = unavailable.is_empty();
    let wanted = [
        if ready {
            condition(
                READY,
                true,
                "Allocated",
                format!("all {} address records are allocated", records.len()),
                generation,
            )
        } else {
            condition(
                READY,
                false,
                "Unavailable",
                format!(
                    "{} of {} address records are unavailable",
                    unavailable.len(),
                    records.len()
                ),
                generation,
            )
        },
        if ready {
            condition(CONFLICT, false, "NoOverlap", String::new(), generation)
        } else {
            condition(
                CONFLICT,
                true,
                "Overlaps",
                unavailable.join("; "),
                generation,
            )
        },
    ];
    let mut conditions: Vec<Condition> = current
        .conditions
        .iter()
        .filter(|c| c.type_ != READY && c.type_ != CONFLICT)
        .cloned()
        .collect();
    for mut wanted in wanted {
        if let Some(old) = current.conditions.iter().find(|c| c.type_ == wanted.type_)
            && old.status == wanted.status
        {
            wanted.last_transition_time = old.last_transition_time.clone();
        }
        conditions.push(wanted);
    }
    json!({
        "addressSpace": records.iter().map(|r| {
            let mut entry = json!({
                "prefix": r.prefix, "status": r.status, "date": r.date,
                "reason": r.reason, "message": r.message,
            });
            if let Some(holder) = &r.holder {
                entry["holder"] = json!(holder);
            }
            entry
        }).collect::<Vec<_>>(),
        "conditions": conditions,
    })
}

/// Whether the status written differs from `claim`'s in anything but dates and times.
fn status_changed(claim: &NetworkClaim, desired: &serde_json::Value) -> bool {
    let strip = |mut value: serde_json::Value| {
        for list in ["addressSpace", "conditions"] {
            if let Some(items) = value.get_mut(list).and_then(|v| v.as_array_mut()) {
                for item in items {
                    if let Some(item) = item.as_object_mut() {
                        item.remove("date");
                        item.remove("lastTransitionTime");
                    }
                }
            }
        }
        value
    };
    let current = claim.status.as_ref().map_or(json!({}), |status| {
        json!({
            "addressSpace": status.address_space.iter().map(|r| {
                let mut entry = json!({
                    "prefix": r.prefix, "status": r.status, "reason": r.reason,
                    "message": r.message,
                });
                if let Some(holder) = &r.holder {
                    entry["holder"] = json!(holder);
                }
                entry
            }).collect::<Vec<_>>(),
            "conditions": status.conditions,
        })
    });
    strip(current) != strip(desired.clone())
}

/// How many writes of one pass are in flight at once.
const WRITES_IN_FLIGHT: usize = 16;

/// Runs `writes`, [`WRITES_IN_FLIGHT`] at a time; the first error, after all ran.
async fn concurrently<F>(writes: Vec<F>) -> Result<(), Error>
where
    F: std::future::Future<Output = Result<(), Error>>,
{
    let results: Vec<Result<(), Error>> = futures::stream::iter(writes)
        .buffer_unordered(WRITES_IN_FLIGHT)
        .collect()
        .await;
    results.into_iter().collect()
}

/// The most records one event names; the rest are counted.
const EVENT_RECORDS: usize = 5;

/// An event's note for the records that became unavailable.
fn event_note(newly: &[String]) -> String {
    let mut note = newly
        .iter()
        .take(EVENT_RECORDS)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    if newly.len() > EVENT_RECORDS {
        note.push_str(&format!(
            "; and {} more records (see status.addressSpace)",
            newly.len() - EVENT_RECORDS
        ));
    }
    note
}

/// A NetworkClaim as the controller reads it: decoded from the watch into its type as it
/// arrives, never kept as JSON (a claim's JSON takes many times the memory of its type). One
/// that does not read as a NetworkClaim (stored by other means) is kept with its metadata only
/// and decided on not at all, as before.
#[derive(Clone, Debug, Default)]
struct Claim {
    claim: NetworkClaim,
    readable: bool,
}

impl<'de> serde::Deserialize<'de> for Claim {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut value = serde_json::Value::deserialize(deserializer)?;
        if let Some(meta) = value.get_mut("metadata").and_then(|m| m.as_object_mut()) {
            meta.remove("managedFields");
        }
        Ok(
            match genplane_api::networkregistry::networkclaim::read(&value) {
                Ok(claim) => Claim {
                    claim,
                    readable: true,
                },
                Err(_) => Claim {
                    claim: NetworkClaim {
                        metadata: serde_json::from_value(value["metadata"].take())
                            .unwrap_or_default(),
                        ..NetworkClaim::default()
                    },
                    readable: false,
                },
            },
        )
    }
}

impl kube::Resource for Claim {
    type DynamicType = ();
    type Scope = kube::core::ClusterResourceScope;

    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        genplane_api::networkregistry::networkclaim::KIND.into()
    }
    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        genplane_api::networkregistry::GROUP.into()
    }
    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        genplane_api::networkregistry::VERSION.into()
    }
    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        genplane_api::networkregistry::RESOURCE.into()
    }
    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &self.claim.metadata
    }
    fn meta_mut(&mut self) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &mut self.claim.metadata
    }
}

/// One claim as last watched: the claim without its records (metadata and status), and its
/// records, shared with the decision (one copy of each record).
#[derive(Clone, Debug)]
struct Entry {
    claim: Arc<NetworkClaim>,
    records: Arc<[AddressRecord]>,
    readable: bool,
}

impl Entry {
    fn of(claim: Claim) -> Self {
        let Claim {
            mut claim,
            readable,
        } = claim;
        let records: Arc<[AddressRecord]> = std::mem::take(&mut claim.spec.address_space).into();
        Self {
            claim: Arc::new(claim),
            records,
            readable,
        }
    }

    fn name(&self) -> &str {
        self.claim.metadata.name.as_deref().unwrap_or_default()
    }

    fn version(&self) -> &str {
        self.claim
            .metadata
            .resource_version
            .as_deref()
            .unwrap_or_default()
    }

    fn ours(&self) -> bool {
        self.claim
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == FINALIZER)
    }
}

/// The claims as the watch delivers them, and which changed since the last pass.
#[derive(Debug, Default)]
struct Watched {
    claims: HashMap<Arc<str>, Entry>,
    /// Added, changed or removed since the last pass took them.
    changed: HashSet<Arc<str>>,
    /// The claims of a list in progress (the watch's start, or a relist).
    listing: Option<HashMap<Arc<str>, Entry>>,
    /// Whether a first list is in.
    ready: bool,
}

impl Watched {
    fn apply(&mut self, event: watcher::Event<Claim>) {
        match event {
            watcher::Event::Init => self.listing = Some(HashMap::new()),
            watcher::Event::InitApply(claim) => {
                let entry = Entry::of(claim);
                if let Some(listing) = &mut self.listing {
                    listing.insert(entry.name().into(), entry);
                }
            }
            watcher::Event::InitDone => {
                let Some(listed) = self.listing.take() else {
                    return;
                };
                for (name, entry) in &listed {
                    if self
                        .claims
                        .get(name)
                        .is_none_or(|had| had.version() != entry.version())
                    {
                        self.changed.insert(name.clone());
                    }
                }
                for name in self.claims.keys() {
                    if !listed.contains_key(name) {
                        self.changed.insert(name.clone());
                    }
                }
                self.claims = listed;
                self.ready = true;
            }
            watcher::Event::Apply(claim) => {
                let entry = Entry::of(claim);
                let name: Arc<str> = entry.name().into();
                self.changed.insert(name.clone());
                self.claims.insert(name, entry);
            }
            watcher::Event::Delete(claim) => {
                let name: Arc<str> = claim
                    .claim
                    .metadata
                    .name
                    .as_deref()
                    .unwrap_or_default()
                    .into();
                self.claims.remove(&name);
                self.changed.insert(name);
            }
        }
    }
}

/// What a claim counts as in the allocation: creation time and records (its candidate), or
/// nothing (deleted without the finalizer, or released).
fn candidate(name: &Arc<str>, entry: &Entry) -> Candidate {
    Candidate {
        name: name.clone(),
        created: entry.claim.metadata.creation_timestamp.clone(),
        records: entry.records.clone(),
    }
}

fn same_candidate(a: &Candidate, b: &Candidate) -> bool {
    a.created == b.created && (Arc::ptr_eq(&a.records, &b.records) || a.records == b.records)
}

/// What the controller decided, kept from one pass to the next.
#[derive(Debug, Default)]
struct Decisions {
    /// The claims in the allocation, as decided.
    candidates: HashMap<Arc<str>, Candidate>,
    allocation: Allocation,
    /// Deleted claims still holding their ranges, and when they are released.
    releasing: HashMap<Arc<str>, Timestamp>,
}

struct Controller {
    api: Api<Claim>,
    recorder: Recorder,
    grace: SignedDuration,
    watched: Arc<std::sync::Mutex<Watched>>,
    decisions: Decisions,
}

/// The writes one pass makes.
#[derive(Debug, Default)]
struct Writes {
    /// Claims to get the finalizer.
    finalize: Vec<Entry>,
    /// Deleted claims past their grace: the finalizer goes.
    release: Vec<Entry>,
    /// Claims whose status may differ from their verdicts.
    statuses: Vec<Entry>,
}

impl Controller {
    fn watched(&self) -> std::sync::MutexGuard<'_, Watched> {
        self.watched
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// One pass: decides again only what the changes since the last one (and the grace periods
    /// that ended) can change, then writes the finalizers and the statuses that differ.
    /// Returns when the next grace period ends.
    async fn sync(&mut self) -> Result<Option<Timestamp>, Error> {
        let now = now();
        let (changed, entries) = {
            let mut watched = self.watched();
            let mut changed = std::mem::take(&mut watched.changed);
            changed.extend(
                self.decisions
                    .releasing
                    .iter()
                    .filter(|(_, at)| now >= **at)
                    .map(|(name, _)| name.clone()),
            );
            let entries: Vec<(Arc<str>, Option<Entry>)> = changed
                .iter()
                .map(|name| (name.clone(), watched.claims.get(name).cloned()))
                .collect();
            (changed, entries)
        };
        if changed.is_empty() {
            return Ok(self.next_release());
        }
        let mut writes = Writes::default();
        let mut added = Vec::new();
        let mut whole_pass = false;
        for (name, entry) in entries {
            let wanted = entry.as_ref().filter(|e| e.readable).and_then(|entry| {
                let deleted = entry.claim.metadata.deletion_timestamp.as_ref();
                match deleted {
                    Some(_) if !entry.ours() => None,
                    Some(deleted) => {
                        let release = deleted.0 + self.grace;
                        if now >= release {
                            writes.release.push(entry.clone());
                            None
                        } else {
                            self.decisions.releasing.insert(name.clone(), release);
                            Some(candidate(&name, entry))
                        }
                    }
                    None => {
                        if !entry.ours() {
                            writes.finalize.push(entry.clone());
                        }
                        Some(candidate(&name, entry))
                    }
                }
            });
            if wanted.is_none() {
                self.decisions.releasing.remove(&name);
            }
            // A claim that gets the finalizer now changes version: its status is written in
            // the pass its watch event brings.
            if let Some(entry) = &entry
                && entry.ours()
                && wanted.is_some()
            {
                writes.statuses.push(entry.clone());
            }
            let had = self.decisions.candidates.get(&name);
            match (had, wanted) {
                (Some(had), Some(wanted)) if same_candidate(had, &wanted) => {}
                (None, None) => {}
                (None, Some(wanted)) => {
                    self.decisions.candidates.insert(name, wanted.clone());
                    added.push(wanted);
                }
                (_, wanted) => {
                    whole_pass = true;
                    match wanted {
                        Some(wanted) => self.decisions.candidates.insert(name, wanted),
                        None => self.decisions.candidates.remove(&name),
                    };
                }
            }
        }
        let finalizer_writes: Vec<_> = writes
            .release
            .iter()
            .map(|entry| (entry, false))
            .chain(writes.finalize.iter().map(|entry| (entry, true)))
            .map(|(entry, hold)| self.hold(entry, hold))
            .collect();
        let finalized = concurrently(finalizer_writes).await;
        // Decide: on top of what was decided when only claims later than all others came,
        // else everything again; and every claim whose verdicts changed gets its status
        // checked.
        let mut verdicts_changed: Vec<Arc<str>> = Vec::new();
        if whole_pass || !self.decisions.allocation.follows(&added) {
            let before = std::mem::take(&mut self.decisions.allocation);
            self.decisions.allocation =
                allocate(self.decisions.candidates.values().cloned().collect());
            for (name, verdicts) in &self.decisions.allocation.verdicts {
                if before.verdicts.get(name) != Some(verdicts) {
                    verdicts_changed.push(name.clone());
                }
            }
        } else if !added.is_empty() {
            verdicts_changed.extend(added.iter().map(|c| c.name.clone()));
            self.decisions.allocation.extend(added);
        }
        if !verdicts_changed.is_empty() {
            let watched = self.watched();
            for name in verdicts_changed {
                if changed.contains(&name) {
                    continue;
                }
                if let Some(entry) = watched.claims.get(&name)
                    && entry.ours()
                {
                    writes.statuses.push(entry.clone());
                }
            }
        }
        let allocation = &self.decisions.allocation;
        let status_writes = writes
            .statuses
            .iter()
            .filter_map(|entry| {
                let verdicts = allocation.verdicts.get(entry.name())?;
                Some(self.write_status(entry, verdicts))
            })
            .collect::<Vec<_>>();
        let written = concurrently(status_writes).await;
        if finalized.is_err() || written.is_err() {
            // Checked again at the next pass.
            self.watched().changed.extend(changed);
        }
        finalized?;
        written?;
        Ok(self.next_release())
    }

    /// When the next deleted claim's grace period ends.
    fn next_release(&self) -> Option<Timestamp> {
        self.decisions.releasing.values().min().copied()
    }

    /// Writes `entry`'s status when its verdicts change it, over exactly the version read (so
    /// that a condition another writer added meanwhile, a well-known claim's FromFlags, is not
    /// lost), and an event naming the records that became unavailable. The status is built
    /// only here: a pass holds at most [`WRITES_IN_FLIGHT`] of them.
    async fn write_status(
        &self,
        entry: &Entry,
        verdicts: &[(String, Verdict)],
    ) -> Result<(), Error> {
        let claim = &entry.claim;
        let desired = desired_status(claim, verdicts);
        if !status_changed(claim, &desired) {
            return Ok(());
        }
        let name = entry.name();
        let patch = json!({
            "metadata": {"resourceVersion": entry.version()},
            "status": desired,
        });
        match self
            .api
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            // Gone or changed meanwhile: the watch brings the next pass.
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {
                return Ok(());
            }
            Err(error) => return Err(error.into()),
        }
        let was_unavailable: HashSet<&str> = claim
            .status
            .iter()
            .flat_map(|s| &s.address_space)
            .filter(|r| r.status == UNAVAILABLE)
            .map(|r| r.prefix.as_str())
            .collect();
        let newly: Vec<String> = verdicts
            .iter()
            .filter(|(prefix, _)| !was_unavailable.contains(prefix.as_str()))
            .filter_map(|(prefix, verdict)| match verdict {
                Verdict::Unavailable { holder, held } => Some(format!(
                    "{prefix} overlaps {held}, held by NetworkClaim {holder}"
                )),
                _ => None,
            })
            .collect();
        if !newly.is_empty() {
            tracing::info!(
                claim = name,
                unavailable = newly.len(),
                "network ranges unavailable"
            );
            self.event(entry, "Overlaps", event_note(&newly)).await;
        }
        Ok(())
    }

    async fn event(&self, entry: &Entry, reason: &str, note: String) {
        let meta = &entry.claim.metadata;
        let reference = k8s_openapi::api::core::v1::ObjectReference {
            api_version: Some(genplane_api::networkregistry::API_VERSION.to_owned()),
            kind: Some(genplane_api::networkregistry::networkclaim::KIND.to_owned()),
            name: meta.name.clone(),
            uid: meta.uid.clone(),
            ..Default::default()
        };
        let event = Event {
            type_: EventType::Warning,
            reason: reason.to_owned(),
            note: Some(note),
            action: "Allocate".to_owned(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, &reference).await {
            tracing::debug!(%error, "network claim event");
        }
    }

    /// Adds the finalizer (`hold`), or removes it: a deleted claim's ranges are released.
    async fn hold(&self, entry: &Entry, hold: bool) -> Result<(), Error> {
        let mut finalizers: Vec<String> = entry
            .claim
            .metadata
            .finalizers
            .iter()
            .flatten()
            .filter(|f| *f != FINALIZER)
            .cloned()
            .collect();
        if hold {
            finalizers.push(FINALIZER.to_owned());
        } else {
            tracing::info!(
                claim = entry.name(),
                "releasing the ranges of a deleted network claim"
            );
        }
        // Over exactly the version read (a conflict or a missing object is left to the next
        // pass, which the watch brings).
        let patch = json!({"metadata": {
            "finalizers": finalizers,
            "resourceVersion": entry.version(),
        }});
        match self
            .api
            .patch(entry.name(), &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(()),
            Err(error) => Err(error.into()),
        }
    }
}

/// A task stopped when its handle is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs the controller with release grace period `grace` until its watch ends (it does not on
/// its own). With `cluster_cidr` (the controller-manager's `--cluster-cidr`) it also keeps the
/// well-known claim `kube-controller-manager` of those Pod ranges
/// ([`genplane_networkregistry::well_known`]).
pub async fn run(
    client: kube::Client,
    grace: Duration,
    cluster_cidr: Vec<genplane_api::networkregistry::Prefix>,
) -> Result<(), Error> {
    if cluster_cidr.is_empty() {
        return registry(client, grace).await;
    }
    let well_known = genplane_networkregistry::WellKnown {
        name: genplane_api::networkregistry::KUBE_CONTROLLER_MANAGER_CLAIM,
        reference: genplane_api::networkregistry::networkclaim::ResourceReference {
            group: String::new(),
            resource: "pods".to_owned(),
        },
        prefixes: cluster_cidr,
        flag: "--cluster-cidr",
        component: "kube-controller-manager",
    };
    tokio::select! {
        result = registry(client.clone(), grace) => result,
        () = genplane_networkregistry::well_known::keep(client, well_known, std::future::pending()) => Ok(()),
    }
}

/// The registry controller alone.
async fn registry(client: kube::Client, grace: Duration) -> Result<(), Error> {
    let api: Api<Claim> = Api::all(client.clone());
    let watched = Arc::new(std::sync::Mutex::new(Watched::default()));
    let changed = Arc::new(Notify::new());
    let notify = changed.clone();
    let shared = watched.clone();
    // The watch runs in a task of its own (stopped with this future), keeping the claims as
    // their types and waking the loop below on every event.
    let watch = watcher(api.clone(), watcher::Config::default())
        .default_backoff()
        .for_each(move |event| {
            if let Ok(event) = event {
                shared
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .apply(event);
                notify.notify_one();
            }
            async {}
        });
    let watch = AbortOnDrop(tokio::spawn(watch));
    let mut controller = Controller {
        api,
        recorder: Recorder::new(
            client,
            Reporter {
                controller: "networkclaim-controller".to_owned(),
                instance: None,
            },
        ),
        grace: SignedDuration::try_from(grace).unwrap_or(SignedDuration::from_secs(10)),
        watched,
        decisions: Decisions::default(),
    };
    let mut next: Option<Timestamp> = None;
    loop {
        let wait = next.map_or(Duration::from_secs(3600), |at| {
            Duration::try_from(at.duration_since(now())).unwrap_or(Duration::ZERO)
        });
        tokio::select! {
            () = changed.notified() => {}
            () = tokio::time::sleep(wait) => {}
        }
        if watch.0.is_finished() {
            return Ok(());
        }
        if !controller.watched().ready {
            continue;
        }
        // Let a burst of changes (a client creating many claims, this pass's own writes
        // coming back) settle into one pass.
        tokio::time::sleep(SETTLE).await;
        match controller.sync().await {
            Ok(at) => next = at,
            Err(error) => {
                tracing::warn!(%error, "network claim sync failed; retrying");
                next = Some(now() + SignedDuration::from_secs(1));
            }
        }
    }
}

/// How long a pass waits for more changes before it runs.
const SETTLE: Duration = Duration::from_millis(20);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unchanged_verdicts_write_nothing_and_keep_dates() {
        let claim: NetworkClaim = genplane_api::networkregistry::networkclaim::read(&json!({
            "apiVersion": "networkregistry.genplane.io/v1alpha1", "kind": "NetworkClaim",
            "metadata": {"name": "b", "generation": 1},
            "spec": {"addressSpace": [{"reference": {"resource": "pods"}, "prefix": "10.0.0.0/8"}]},
        }))
        .unwrap();
        let verdicts = vec![(
            "10.0.0.0/8".to_owned(),
            Verdict::Unavailable {
                holder: "a".into(),
                held: genplane_api::networkregistry::Prefix::parse_canonical("10.1.0.0/16")
                    .unwrap(),
            },
        )];
        let first = desired_status(&claim, &verdicts);
        assert!(status_changed(&claim, &first));
        assert_eq!(first["addressSpace"][0]["holder"], "a");
        assert_eq!(
            first["addressSpace"][0]["message"],
            "10.0.0.0/8 overlaps 10.1.0.0/16, held by NetworkClaim a"
        );
        let mut stored = serde_json::to_value(&claim.metadata).unwrap();
        stored = json!({"metadata": stored, "spec": {"addressSpace": [
            {"reference": {"resource": "pods"}, "prefix": "10.0.0.0/8"}]}, "status": first});
        let stored = genplane_api::networkregistry::networkclaim::read(&stored).unwrap();
        let again = desired_status(&stored, &verdicts);
        assert!(!status_changed(&stored, &again));
        assert_eq!(
            again["addressSpace"][0]["date"],
            first["addressSpace"][0]["date"]
        );
        assert_eq!(
            again["conditions"][1]["lastTransitionTime"],
            first["conditions"][1]["lastTransitionTime"]
        );
    }
}
