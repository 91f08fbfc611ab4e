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
    ALLOCATED, CONFLICT, FINALIZER, NetworkClaim, READY, RecordStatus, UNAVAILABLE,
};
use genplane_networkregistry::{Candidate, Verdict, allocate, network_claim_resource, read_claim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::store::Writer;
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Resource as _, ResourceExt as _};
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

struct Controller {
    /// The claims as last read, by name, with the resourceVersion read: a pass decodes only
    /// what changed since the last one.
    decoded: std::sync::Mutex<HashMap<String, (String, Arc<NetworkClaim>)>>,
    api: Api<DynamicObject>,
    recorder: Recorder,
    grace: SignedDuration,
}

impl Controller {
    /// One pass: releases what is past its grace, decides on every claim, writes the statuses
    /// that change and the missing finalizers. Returns when the next grace period ends.
    async fn sync(&self, objects: Vec<Arc<DynamicObject>>) -> Result<Option<Timestamp>, Error> {
        let now = now();
        let mut next: Option<Timestamp> = None;
        let mut candidates = Vec::new();
        let mut claims = Vec::new();
        let mut releases = Vec::new();
        let mut finalize = Vec::new();
        for (object, claim) in self.decode(objects) {
            let name = object.name_any();
            let ours = object.finalizers().iter().any(|f| f == FINALIZER);
            if let Some(deleted) = &claim.metadata.deletion_timestamp {
                if !ours {
                    continue;
                }
                let release = deleted.0 + self.grace;
                if now >= release {
                    releases.push(object);
                    continue;
                }
                next = Some(next.map_or(release, |n: Timestamp| n.min(release)));
            } else if !ours {
                finalize.push(object.clone());
            }
            candidates.push(Candidate {
                name: name.as_str().into(),
                created: claim.metadata.creation_timestamp.clone(),
                records: claim.spec.address_space.clone(),
            });
            // A claim that gets the finalizer now changes version: its status is written in
            // the pass its watch event brings.
            if ours {
                claims.push((object, claim));
            }
        }
        let finalizer_writes: Vec<_> = releases
            .iter()
            .map(|object| (object, false))
            .chain(finalize.iter().map(|object| (object, true)))
            .map(|(object, hold)| self.hold(object, hold))
            .collect();
        concurrently(finalizer_writes).await?;
        let allocation = allocate(candidates);
        let mut status_writes = Vec::new();
        for (object, claim) in &claims {
            let Some(verdicts) = allocation.verdicts.get(object.name_any().as_str()) else {
                continue;
            };
            let desired = desired_status(claim, verdicts);
            if status_changed(claim, &desired) {
                status_writes.push(self.write_status(object, claim, verdicts, desired));
            }
        }
        concurrently(status_writes).await?;
        Ok(next)
    }

    /// The claims of `objects`, decoded (again only when their version changed).
    fn decode(
        &self,
        objects: Vec<Arc<DynamicObject>>,
    ) -> Vec<(Arc<DynamicObject>, Arc<NetworkClaim>)> {
        let mut cache = self
            .decoded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut seen = HashSet::with_capacity(objects.len());
        let mut out = Vec::with_capacity(objects.len());
        for object in objects {
            let name = object.name_any();
            let version = object.resource_version().unwrap_or_default();
            let claim = match cache.get(&name) {
                Some((read, claim)) if *read == version => claim.clone(),
                _ => {
                    let Some(claim) = read_claim(&object) else {
                        continue;
                    };
                    let claim = Arc::new(claim);
                    cache.insert(name.clone(), (version, claim.clone()));
                    claim
                }
            };
            seen.insert(name);
            out.push((object, claim));
        }
        cache.retain(|name, _| seen.contains(name));
        out
    }

    /// Writes `claim`'s status, over exactly the version read (so that a condition another
    /// writer added meanwhile, a well-known claim's FromFlags, is not lost), and an event
    /// naming the records that became unavailable.
    async fn write_status(
        &self,
        object: &DynamicObject,
        claim: &NetworkClaim,
        verdicts: &[(String, Verdict)],
        desired: serde_json::Value,
    ) -> Result<(), Error> {
        let name = object.name_any();
        let patch = json!({
            "metadata": {"resourceVersion": object.resource_version()},
            "status": desired,
        });
        match self
            .api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
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
            self.event(object, "Overlaps", event_note(&newly)).await;
        }
        Ok(())
    }

    async fn event(&self, object: &DynamicObject, reason: &str, note: String) {
        let reference = object.object_ref(&network_claim_resource());
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
    async fn hold(&self, object: &DynamicObject, hold: bool) -> Result<(), Error> {
        let mut finalizers: Vec<String> = object
            .finalizers()
            .iter()
            .filter(|f| *f != FINALIZER)
            .cloned()
            .collect();
        if hold {
            finalizers.push(FINALIZER.to_owned());
        } else {
            tracing::info!(
                claim = object.name_any(),
                "releasing the ranges of a deleted network claim"
            );
        }
        self.patch_finalizers(object, finalizers).await
    }

    /// Writes the finalizers over exactly the version read (a conflict or a missing object is
    /// left to the next pass, which the watch brings).
    async fn patch_finalizers(
        &self,
        object: &DynamicObject,
        finalizers: Vec<String>,
    ) -> Result<(), Error> {
        let patch = json!({"metadata": {
            "finalizers": finalizers,
            "resourceVersion": object.resource_version(),
        }});
        match self
            .api
            .patch(
                &object.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
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
    let resource = network_claim_resource();
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let writer = Writer::<DynamicObject>::new(resource.clone());
    let store = writer.as_reader();
    let changed = Arc::new(Notify::new());
    let notify = changed.clone();
    // The watch runs in a task of its own (stopped with this future), filling the store and
    // waking the loop below on every event.
    let watch = watcher(api.clone(), watcher::Config::default())
        .default_backoff()
        // The managed fields are most of a claim's bytes, and nothing here reads them.
        .modify(|object: &mut DynamicObject| object.metadata.managed_fields = None)
        .reflect(writer)
        .for_each(move |_| {
            notify.notify_one();
            async {}
        });
    let watch = AbortOnDrop(tokio::spawn(watch));
    let controller = Controller {
        decoded: std::sync::Mutex::default(),
        api,
        recorder: Recorder::new(
            client,
            Reporter {
                controller: "networkclaim-controller".to_owned(),
                instance: None,
            },
        ),
        grace: SignedDuration::try_from(grace).unwrap_or(SignedDuration::from_secs(10)),
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
        if store.wait_until_ready().await.is_err() {
            return Ok(());
        }
        match controller.sync(store.state()).await {
            Ok(at) => next = at,
            Err(error) => {
                tracing::warn!(%error, "network claim sync failed; retrying");
                next = Some(now() + SignedDuration::from_secs(1));
            }
        }
    }
}

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
