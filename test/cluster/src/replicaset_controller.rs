//! The ReplicaSet controller: each ReplicaSet keeps `spec.replicas` active pods made from its
//! template, and reports them in its status.
//!
//! - **Pods it owns** have it as their controller in `ownerReferences` (`controller: true`,
//!   `blockOwnerDeletion: true`), so that the garbage collector deletes them with it. Active
//!   pods are those not being deleted and not finished.
//! - **Too few**: it creates pods named `<replicaset>-<random>` (`generateName`) with the
//!   template's labels, annotations and spec. **Too many**: it deletes the least useful
//!   first, as upstream ranks them: unscheduled, then pending, then not ready, then the
//!   youngest.
//! - **Expectations**: what it created or deleted is remembered until its watch shows it, so a
//!   pass that runs before the watch caught up does not create or delete twice (upstream's
//!   `ControllerExpectations`, which also expire).
//! - **Status**: `replicas` (active), `fullyLabeledReplicas`, `readyReplicas`,
//!   `availableReplicas` (Ready for `minReadySeconds`) and `observedGeneration`, written only
//!   when they change. A pod that will become available later wakes the controller then.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::watcher;
use kube::{Client, ResourceExt as _};
use serde_json::json;
use tokio::sync::Notify;

/// How long an expectation is kept when its watch never shows it (upstream's five minutes
/// is longer than any test here).
const EXPECTATION_TTL: Duration = Duration::from_secs(60);
/// At most this many pods are created or deleted for one ReplicaSet in one pass (upstream's
/// `burstReplicas`).
const BURST: usize = 100;

/// The owner reference of `meta` that names its controller, if any.
pub fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
}

/// An owner reference to `owner` as its controller.
pub fn controller_reference(api_version: &str, kind: &str, owner: &ObjectMeta) -> OwnerReference {
    OwnerReference {
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
        name: owner.name.clone().unwrap_or_default(),
        uid: owner.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Whether `pod` is active: not being deleted, not finished.
pub fn is_active(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && !matches!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        )
}

/// When `pod` became Ready, if it is.
pub fn ready_since(pod: &Pod) -> Option<k8s_openapi::jiff::Timestamp> {
    let condition = pod
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")?;
    Some(
        condition
            .last_transition_time
            .as_ref()
            .map_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH, |t| t.0),
    )
}

/// Pods created and deleted that the watch has not shown yet, per ReplicaSet uid.
#[derive(Default)]
struct Expectations {
    pending: BTreeMap<String, (Instant, BTreeSet<String>, BTreeSet<String>)>,
}

impl Expectations {
    /// Whether the ReplicaSet `uid` may be acted on: everything it expected is seen (created
    /// pods present, deleted ones gone or being deleted) or too old.
    fn satisfied(&mut self, uid: &str, pods: &[&Arc<Pod>]) -> bool {
        let Some((since, created, deleted)) = self.pending.get_mut(uid) else {
            return true;
        };
        created.retain(|name| !pods.iter().any(|p| p.name_any() == *name));
        deleted.retain(|pod_uid| {
            pods.iter()
                .any(|p| p.uid().as_deref() == Some(pod_uid) && is_active(p))
        });
        if (created.is_empty() && deleted.is_empty()) || since.elapsed() > EXPECTATION_TTL {
            self.pending.remove(uid);
            return true;
        }
        false
    }

    fn expect(&mut self, uid: &str, created: BTreeSet<String>, deleted: BTreeSet<String>) {
        if !created.is_empty() || !deleted.is_empty() {
            self.pending
                .insert(uid.to_owned(), (Instant::now(), created, deleted));
        }
    }
}

/// The order in which surplus pods go: unscheduled, pending, not ready, youngest first.
fn deletion_rank(
    pod: &Pod,
) -> (
    u8,
    u8,
    u8,
    std::cmp::Reverse<Option<k8s_openapi::jiff::Timestamp>>,
) {
    let scheduled = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_ref())
        .is_some();
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    (
        u8::from(scheduled),
        u8::from(phase != Some("Pending")),
        u8::from(ready_since(pod).is_some()),
        std::cmp::Reverse(pod.metadata.creation_timestamp.as_ref().map(|t| t.0)),
    )
}

/// A pod of `rs`'s template.
fn new_pod(rs: &ReplicaSet) -> Result<Pod, serde_json::Error> {
    let template = rs
        .spec
        .as_ref()
        .and_then(|s| s.template.clone())
        .unwrap_or_default();
    let meta = template.metadata.unwrap_or_default();
    let owner = controller_reference("apps/v1", "ReplicaSet", &rs.metadata);
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": format!("{}-", rs.name_any()),
            "namespace": rs.namespace(), "labels": meta.labels, "annotations": meta.annotations,
            "ownerReferences": [owner]},
        "spec": template.spec,
    }))
}

/// Runs one pass over `rs` with its `owned` pods; returns when it must look again, if a pod
/// becomes available later.
async fn sync(
    client: &Client,
    rs: &ReplicaSet,
    owned: &[&Arc<Pod>],
    expectations: &mut Expectations,
) -> Option<Duration> {
    let uid = rs.uid().unwrap_or_default();
    let namespace = rs.namespace().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let spec = rs.spec.clone().unwrap_or_default();
    let wanted = usize::try_from(spec.replicas.unwrap_or(1)).unwrap_or(0);
    let mut active: Vec<&Arc<Pod>> = owned.iter().copied().filter(|p| is_active(p)).collect();
    if rs.metadata.deletion_timestamp.is_none() && expectations.satisfied(&uid, owned) {
        let (mut created, mut deleted) = (BTreeSet::new(), BTreeSet::new());
        if active.len() < wanted {
            for _ in 0..(wanted - active.len()).min(BURST) {
                let pod = match new_pod(rs) {
                    Ok(pod) => pod,
                    Err(error) => {
                        tracing::warn!(%error, replicaset = %rs.name_any(), "building a pod");
                        break;
                    }
                };
                match pods.create(&PostParams::default(), &pod).await {
                    Ok(pod) => {
                        created.insert(pod.name_any());
                    }
                    Err(error) => {
                        tracing::debug!(%error, replicaset = %rs.name_any(), "creating a pod");
                        break;
                    }
                }
            }
        } else if active.len() > wanted {
            active.sort_by_key(|p| deletion_rank(p));
            for pod in active.iter().take((active.len() - wanted).min(BURST)) {
                let pod_uid = pod.uid().unwrap_or_default();
                let params = DeleteParams {
                    preconditions: Some(Preconditions {
                        uid: Some(pod_uid.clone()),
                        resource_version: None,
                    }),
                    ..DeleteParams::default()
                };
                match pods.delete(&pod.name_any(), &params).await {
                    Ok(_) => {
                        deleted.insert(pod_uid);
                    }
                    Err(error) => tracing::debug!(%error, pod = %pod.name_any(), "deleting a pod"),
                }
            }
        }
        expectations.expect(&uid, created, deleted);
    }
    write_status(client, rs, owned).await
}

/// Writes `rs`'s status from its `owned` pods when it changed; returns when a Ready pod
/// becomes available, if one will.
async fn write_status(client: &Client, rs: &ReplicaSet, owned: &[&Arc<Pod>]) -> Option<Duration> {
    let spec = rs.spec.clone().unwrap_or_default();
    let template_labels = spec
        .template
        .as_ref()
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let min_ready = i64::from(spec.min_ready_seconds.unwrap_or(0));
    let now = k8s_openapi::jiff::Timestamp::now();
    let mut next: Option<Duration> = None;
    let (mut replicas, mut labelled, mut ready, mut available) = (0, 0, 0, 0);
    for pod in owned.iter().filter(|p| is_active(p)) {
        replicas += 1;
        if template_labels
            .iter()
            .all(|(k, v)| pod.labels().get(k) == Some(v))
        {
            labelled += 1;
        }
        let Some(since) = ready_since(pod) else {
            continue;
        };
        ready += 1;
        let waited = now.as_second() - since.as_second();
        if waited >= min_ready {
            available += 1;
        } else {
            let left = Duration::from_secs(u64::try_from(min_ready - waited).unwrap_or(1));
            next = Some(next.map_or(left, |n| n.min(left)));
        }
    }
    let status = rs.status.clone().unwrap_or_default();
    let generation = rs.metadata.generation.unwrap_or(0);
    let current = (
        status.replicas,
        status.fully_labeled_replicas.unwrap_or(0),
        status.ready_replicas.unwrap_or(0),
        status.available_replicas.unwrap_or(0),
        status.observed_generation.unwrap_or(0),
    );
    if current != (replicas, labelled, ready, available, generation) {
        let api: Api<ReplicaSet> =
            Api::namespaced(client.clone(), &rs.namespace().unwrap_or_default());
        let patch = json!({"status": {"replicas": replicas, "fullyLabeledReplicas": labelled,
            "readyReplicas": ready, "availableReplicas": available, "observedGeneration": generation}});
        if let Err(error) = api
            .patch_status(
                &rs.name_any(),
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await
        {
            tracing::debug!(%error, replicaset = %rs.name_any(), "writing the status");
        }
    }
    next
}

/// Keeps every ReplicaSet's pods and status until the task is dropped.
pub async fn run(client: Client) {
    let changed = Arc::new(Notify::new());
    let (replicasets, _rs_watch) = crate::watch::reflect(
        Api::<ReplicaSet>::all(client.clone()),
        watcher::Config::default(),
        changed.clone(),
    );
    let (pods, _pods_watch) = crate::watch::reflect(
        Api::<Pod>::all(client.clone()),
        watcher::Config::default(),
        changed.clone(),
    );
    let mut expectations = Expectations::default();
    let mut wake: Option<Duration> = None;
    loop {
        match wake {
            Some(after) => {
                tokio::select! {
                    () = changed.notified() => {}
                    () = tokio::time::sleep(after) => {}
                }
            }
            None => changed.notified().await,
        }
        let pods = pods.state();
        wake = None;
        for rs in replicasets.state() {
            let uid = rs.uid();
            let owned: Vec<&Arc<Pod>> = pods
                .iter()
                .filter(|p| controller_of(&p.metadata).map(|r| Some(&r.uid)) == Some(uid.as_ref()))
                .collect();
            if let Some(after) = sync(&client, &rs, &owned, &mut expectations).await {
                wake = Some(wake.map_or(after, |w| w.min(after)));
            }
        }
    }
}
