//! The Deployment controller: each Deployment's pod template is rolled out through
//! ReplicaSets it owns, as upstream's controller does it.
//!
//! - **The new ReplicaSet** is the one whose template is the Deployment's (its
//!   `pod-template-hash` label aside). When there is none it is created as
//!   `<deployment>-<hash>`: the hash of the template (FNV-1a, in upstream's safe alphabet)
//!   is added to its labels, its selector and its template's labels, so that the ReplicaSets
//!   of one Deployment never select each other's pods. It carries the revision annotation
//!   (`deployment.kubernetes.io/revision`, one more than any old one's), which the
//!   Deployment carries too, and `desired-replicas`/`max-replicas`.
//! - **RollingUpdate**: the new ReplicaSet grows while all ReplicaSets together stay within
//!   `replicas + maxSurge` (an old one counted by its active pods while they are more than
//!   its spec, so the active pods stay within that too); old ones shrink while the available pods stay at least
//!   `replicas - maxUnavailable` (unhealthy old pods go first), upstream's
//!   `reconcileNewReplicaSet` and `reconcileOldReplicaSets`. Scaling a Deployment outside a
//!   rollout is the same arithmetic. **Recreate**: old ReplicaSets go to 0, and the new one
//!   grows once their pods are gone.
//! - **History**: old ReplicaSets with no replicas beyond `revisionHistoryLimit` are deleted.
//! - **Status**: `observedGeneration`, `replicas`, `updatedReplicas`, `readyReplicas`,
//!   `availableReplicas`, `unavailableReplicas` and the `Available` and `Progressing`
//!   conditions with upstream's reasons, which is what `kubectl rollout status` reads.
//! - **Progress deadline** (upstream's `syncRolloutStatus`): `Progressing` is `True`
//!   (`NewReplicaSetAvailable`) once the rollout is complete; while it is not, each pass that
//!   sees progress (more updated, ready or available pods, fewer old ones, a new ReplicaSet)
//!   renews its `lastUpdateTime` (`ReplicaSetUpdated`), and a rollout with no progress for
//!   `progressDeadlineSeconds` since then gets `Progressing=False`, reason
//!   `ProgressDeadlineExceeded` (`kubectl rollout status` then fails: "exceeded its progress
//!   deadline"). The controller wakes up at the next deadline to look.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::api::deployment::{REVISION, STATUS_COUNTS, fenceposts};
use crate::api::workload::POD_TEMPLATE_HASH;
use crate::replicaset_controller::{controller_of, controller_reference};

/// The annotation of the replicas a ReplicaSet's Deployment wants.
pub const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
/// The annotation of the most pods a ReplicaSet's Deployment may have during a rollout.
pub const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";

/// The characters upstream's `rand.SafeEncodeString` uses (no vowels, no look-alikes).
const SAFE_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// The `pod-template-hash` of `template` (upstream's `ComputeHash`: FNV-1a 32 of the
/// template, the collision count added when there is one, in the safe alphabet).
pub fn template_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let mut hash: u32 = 0x811c_9dc5;
    let mut feed = |bytes: &[u8]| {
        for byte in bytes {
            hash ^= u32::from(*byte);
            hash = hash.wrapping_mul(0x0100_0193);
        }
    };
    feed(
        serde_json::to_string(template)
            .unwrap_or_default()
            .as_bytes(),
    );
    if let Some(count) = collision_count {
        feed(&count.to_le_bytes());
    }
    hash.to_string()
        .bytes()
        .map(|b| char::from(SAFE_ALPHABET[usize::from(b) % SAFE_ALPHABET.len()]))
        .collect()
}

/// `template` without the `pod-template-hash` label.
fn without_hash(template: &PodTemplateSpec) -> PodTemplateSpec {
    let mut template = template.clone();
    if let Some(labels) = template.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        labels.remove(POD_TEMPLATE_HASH);
    }
    template
}

fn revision(rs: &ReplicaSet) -> i64 {
    rs.annotations()
        .get(REVISION)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

fn spec_replicas(rs: &ReplicaSet) -> i64 {
    i64::from(rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0))
}

fn status_count(
    rs: &ReplicaSet,
    field: fn(&k8s_openapi::api::apps::v1::ReplicaSetStatus) -> Option<i32>,
) -> i64 {
    i64::from(rs.status.as_ref().and_then(field).unwrap_or(0))
}

fn available(rs: &ReplicaSet) -> i64 {
    status_count(rs, |s| s.available_replicas)
}

/// The ReplicaSet to create for `deployment`: its template with the hash label, no replicas
/// yet.
fn new_replicaset(
    deployment: &Deployment,
    hash: &str,
    revision: i64,
) -> Result<ReplicaSet, serde_json::Error> {
    let spec = deployment.spec.clone().unwrap_or_default();
    let mut template = spec.template.clone();
    template
        .metadata
        .get_or_insert_with(Default::default)
        .labels
        .get_or_insert_with(Default::default)
        .insert(POD_TEMPLATE_HASH.to_owned(), hash.to_owned());
    let mut selector = serde_json::to_value(&spec.selector)?;
    selector["matchLabels"][POD_TEMPLATE_HASH] = json!(hash);
    let labels = template.metadata.as_ref().and_then(|m| m.labels.clone());
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": format!("{}-{hash}", deployment.name_any()),
            "namespace": deployment.namespace(), "labels": labels,
            "annotations": {REVISION: revision.to_string()},
            "ownerReferences": [controller_reference("apps/v1", "Deployment", &deployment.metadata)]},
        "spec": {"replicas": 0, "minReadySeconds": spec.min_ready_seconds,
            "selector": selector, "template": template},
    }))
}

/// What one pass decided for one ReplicaSet: its replicas and annotations.
struct Scale {
    replicas: i64,
    annotations: BTreeMap<String, String>,
}

/// The rollout arithmetic of one Deployment (see the module docs): the replicas each
/// ReplicaSet should have now, the new one first.
fn plan(deployment: &Deployment, new: &ReplicaSet, old: &[&Arc<ReplicaSet>]) -> (i64, Vec<i64>) {
    let spec = deployment.spec.clone().unwrap_or_default();
    let wanted = i64::from(spec.replicas.unwrap_or(1));
    let deployment_json = serde_json::to_value(deployment).unwrap_or(Value::Null);
    let recreate = spec.strategy.as_ref().and_then(|s| s.type_.as_deref()) == Some("Recreate");
    let mut olds: Vec<i64> = old.iter().map(|rs| spec_replicas(rs)).collect();
    let new_now = spec_replicas(new);
    if recreate {
        olds.iter_mut().for_each(|r| *r = 0);
        let old_pods: i64 = old
            .iter()
            .map(|rs| status_count(rs, |s| Some(s.replicas)))
            .sum();
        let all_old_down = old.iter().all(|rs| spec_replicas(rs) == 0) && old_pods == 0;
        return (if all_old_down { wanted } else { new_now }, olds);
    }
    let (surge, unavailable) = fenceposts(&deployment_json, wanted);
    // reconcileNewReplicaSet, counting an old ReplicaSet's active pods while it still has
    // more than its spec asks (upstream counts specs only, so the pods of a ReplicaSet just
    // scaled down can, for a moment, push the active pods past maxSurge)
    let total: i64 = new_now
        + old
            .iter()
            .zip(&olds)
            .map(|(rs, spec)| (*spec).max(status_count(rs, |s| Some(s.replicas))))
            .sum::<i64>();
    let new_replicas = if new_now > wanted {
        wanted
    } else if new_now == wanted {
        new_now
    } else {
        let room = wanted + surge - total;
        if room > 0 {
            new_now + room.min(wanted - new_now)
        } else {
            new_now
        }
    };
    // reconcileOldReplicaSets
    let all_pods = new_replicas + olds.iter().sum::<i64>();
    let min_available = wanted - unavailable;
    let new_unavailable = (new_replicas - available(new)).max(0);
    let mut budget = all_pods - min_available - new_unavailable;
    if budget > 0 {
        // Unhealthy old pods first.
        for (index, rs) in old.iter().enumerate() {
            let unhealthy = (olds[index] - available(rs)).max(0).min(budget);
            olds[index] -= unhealthy;
            budget -= unhealthy;
        }
        // Then available ones, as long as enough stay available.
        let available_now: i64 = available(new) + old.iter().map(|rs| available(rs)).sum::<i64>();
        let mut more = (available_now - min_available).min(budget).max(0);
        for replicas in &mut olds {
            let down = (*replicas).min(more);
            *replicas -= down;
            more -= down;
        }
    }
    (new_replicas, olds)
}

/// One pass over `deployment` with the ReplicaSets it `owned`.
async fn sync(client: &Client, deployment: &Deployment, owned: &[Arc<ReplicaSet>]) {
    if deployment.metadata.deletion_timestamp.is_some() {
        return;
    }
    let namespace = deployment.namespace().unwrap_or_default();
    let paused = deployment.spec.as_ref().and_then(|s| s.paused) == Some(true);
    let now = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    if let Some(conditions) = paused_conditions(deployment, paused, &now) {
        let api: Api<Deployment> = Api::namespaced(client.clone(), &namespace);
        let patch = json!({"status": {"conditions": conditions}});
        if let Err(error) = api
            .patch_status(
                &deployment.name_any(),
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await
        {
            tracing::debug!(%error, deployment = %deployment.name_any(), "writing the paused condition");
        }
        // the next pass sees the condition written
        return;
    }
    if paused {
        return;
    }
    let replicasets: Api<ReplicaSet> = Api::namespaced(client.clone(), &namespace);
    let spec = deployment.spec.clone().unwrap_or_default();
    let template = spec.template.clone();
    let collisions = deployment.status.as_ref().and_then(|s| s.collision_count);
    let (news, mut old): (Vec<&Arc<ReplicaSet>>, Vec<&Arc<ReplicaSet>>) =
        owned.iter().partition(|rs| {
            rs.spec
                .as_ref()
                .and_then(|s| s.template.as_ref())
                .is_some_and(|t| without_hash(t) == template)
        });
    old.sort_by_key(|rs| revision(rs));
    let max_old_revision = old.iter().map(|rs| revision(rs)).max().unwrap_or(0);
    let new = match news
        .into_iter()
        .min_by_key(|rs| rs.metadata.creation_timestamp.as_ref().map(|t| t.0))
    {
        Some(rs) => (**rs).clone(),
        None => {
            let hash = template_hash(&template, collisions);
            let rs = match new_replicaset(deployment, &hash, max_old_revision + 1) {
                Ok(rs) => rs,
                Err(error) => {
                    tracing::warn!(%error, deployment = %deployment.name_any(), "building a replica set");
                    return;
                }
            };
            match replicasets.create(&PostParams::default(), &rs).await {
                Ok(rs) => rs,
                Err(error) => {
                    // Most likely the watch has not shown it yet: the next pass finds it.
                    tracing::debug!(%error, deployment = %deployment.name_any(), "creating a replica set");
                    return;
                }
            }
        }
    };
    let wanted = i64::from(spec.replicas.unwrap_or(1));
    let deployment_json = serde_json::to_value(deployment).unwrap_or(Value::Null);
    let (surge, _) = fenceposts(&deployment_json, wanted);
    let (new_replicas, old_replicas) = plan(deployment, &new, &old);
    let new_revision = revision(&new).max(max_old_revision + 1);
    let mut changes: Vec<(&ReplicaSet, Scale)> = Vec::new();
    let annotations = |revision: Option<i64>| {
        let mut annotations = BTreeMap::from([
            (DESIRED_REPLICAS.to_owned(), wanted.to_string()),
            (MAX_REPLICAS.to_owned(), (wanted + surge).to_string()),
        ]);
        if let Some(revision) = revision {
            annotations.insert(REVISION.to_owned(), revision.to_string());
        }
        annotations
    };
    changes.push((
        &new,
        Scale {
            replicas: new_replicas,
            annotations: annotations(Some(new_revision)),
        },
    ));
    for (rs, replicas) in old.iter().zip(&old_replicas) {
        changes.push((
            rs,
            Scale {
                replicas: *replicas,
                annotations: annotations(None),
            },
        ));
    }
    for (rs, scale) in changes {
        let current = rs.annotations();
        let same_annotations = scale
            .annotations
            .iter()
            .all(|(k, v)| current.get(k) == Some(v));
        if spec_replicas(rs) == scale.replicas && same_annotations {
            continue;
        }
        let patch = json!({"metadata": {"annotations": scale.annotations},
            "spec": {"replicas": scale.replicas}});
        if let Err(error) = replicasets
            .patch(
                &rs.name_any(),
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await
        {
            tracing::debug!(%error, replicaset = %rs.name_any(), "scaling a replica set");
        }
    }
    // History beyond the limit: the oldest idle ReplicaSets.
    let limit = usize::try_from(spec.revision_history_limit.unwrap_or(10)).unwrap_or(0);
    let idle: Vec<&&Arc<ReplicaSet>> = old
        .iter()
        .zip(&old_replicas)
        .filter(|(rs, replicas)| {
            **replicas == 0 && spec_replicas(rs) == 0 && status_count(rs, |s| Some(s.replicas)) == 0
        })
        .map(|(rs, _)| rs)
        .collect();
    for rs in idle.iter().take(idle.len().saturating_sub(limit)) {
        if let Err(error) = replicasets
            .delete(&rs.name_any(), &DeleteParams::background())
            .await
        {
            tracing::debug!(%error, replicaset = %rs.name_any(), "deleting an old replica set");
        }
    }
    write_status(client, deployment, &new, &old, new_revision).await;
}

fn condition(type_: &str, status: bool, reason: &str, message: String, now: &str) -> Value {
    json!({"type": type_, "status": if status { "True" } else { "False" }, "reason": reason,
        "message": message, "lastUpdateTime": now, "lastTransitionTime": now})
}

/// Writes the Deployment's status and revision from its ReplicaSets, when they changed.
async fn write_status(
    client: &Client,
    deployment: &Deployment,
    new: &ReplicaSet,
    old: &[&Arc<ReplicaSet>],
    revision: i64,
) {
    let spec = deployment.spec.clone().unwrap_or_default();
    let wanted = i64::from(spec.replicas.unwrap_or(1));
    let deployment_json = serde_json::to_value(deployment).unwrap_or(Value::Null);
    let (_, max_unavailable) = fenceposts(&deployment_json, wanted);
    let all: Vec<&ReplicaSet> = std::iter::once(new)
        .chain(old.iter().map(|rs| &***rs))
        .collect();
    let sum = |field: fn(&ReplicaSet) -> i64| all.iter().map(|rs| field(rs)).sum::<i64>();
    let replicas = sum(|rs| status_count(rs, |s| Some(s.replicas)));
    let ready = sum(|rs| status_count(rs, |s| s.ready_replicas));
    let available_now = sum(available);
    let updated = status_count(new, |s| Some(s.replicas));
    let name = deployment.name_any();
    let new_name = new.name_any();
    let complete = updated == wanted
        && replicas == wanted
        && available_now == wanted
        && spec_replicas(new) == wanted;
    let is_available = available_now >= wanted - max_unavailable;
    let existing = deployment.status.clone().unwrap_or_default();
    let old_conditions = existing.conditions.clone().unwrap_or_default();
    let (available_reason, available_message) = if is_available {
        (
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.".to_owned(),
        )
    } else {
        (
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.".to_owned(),
        )
    };
    let now = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let mut conditions = Vec::new();
    let mut available = condition(
        "Available",
        is_available,
        available_reason,
        available_message.clone(),
        &now,
    );
    if let Some(previous) = old_conditions.iter().find(|c| c.type_ == "Available") {
        if previous.status == available["status"]
            && previous.reason.as_deref() == Some(available_reason)
            && previous.message.as_deref() == Some(available_message.as_str())
        {
            available = serde_json::to_value(previous).unwrap_or(available);
        } else if previous.status == available["status"]
            && let Some(time) = &previous.last_transition_time
        {
            available["lastTransitionTime"] = json!(time);
        }
    }
    conditions.push(available);
    let progress = Progress {
        complete,
        progressed: updated > i64::from(existing.updated_replicas.unwrap_or(0))
            || ready > i64::from(existing.ready_replicas.unwrap_or(0))
            || available_now > i64::from(existing.available_replicas.unwrap_or(0))
            || replicas - updated
                < i64::from(
                    existing.replicas.unwrap_or(0) - existing.updated_replicas.unwrap_or(0),
                ),
        new_name: &new_name,
        deadline: spec.progress_deadline_seconds,
    };
    let previous = old_conditions.iter().find(|c| c.type_ == "Progressing");
    if let Some(progressing) = progressing(&progress, previous, &now) {
        conditions.push(progressing);
    }
    let generation = deployment.metadata.generation.unwrap_or(0);
    let status = json!({
        "observedGeneration": generation, "replicas": replicas, "updatedReplicas": updated,
        "readyReplicas": ready, "availableReplicas": available_now,
        "unavailableReplicas": (wanted - available_now).max(0), "conditions": conditions,
    });
    let api: Api<Deployment> =
        Api::namespaced(client.clone(), &deployment.namespace().unwrap_or_default());
    if deployment.annotations().get(REVISION) != Some(&revision.to_string()) {
        let patch = json!({"metadata": {"annotations": {REVISION: revision.to_string()}}});
        if let Err(error) = api
            .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            tracing::debug!(%error, deployment = %name, "writing the revision");
        }
    }
    let current = serde_json::to_value(&existing).unwrap_or(Value::Null);
    let differs = STATUS_COUNTS
        .iter()
        .chain(&["conditions"])
        .any(|field| current.get(*field).unwrap_or(&json!(0)) != &status[*field]);
    if differs
        && let Err(error) = api
            .patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await
    {
        tracing::debug!(%error, deployment = %name, "writing the status");
    }
}

/// The conditions with `Progressing` saying the Deployment is paused (`Unknown`,
/// `DeploymentPaused`) or was resumed (`Unknown`, `DeploymentResumed`), as upstream's
/// `checkPausedConditions`: `None` when they need no change (no progress deadline, a rollout
/// that timed out keeps saying so, or the condition says it already).
fn paused_conditions(deployment: &Deployment, paused: bool, now: &str) -> Option<Vec<Value>> {
    let deadline = deployment
        .spec
        .as_ref()
        .and_then(|s| s.progress_deadline_seconds)?;
    if deadline == i32::MAX {
        return None;
    }
    let conditions = deployment
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let progressing = conditions.iter().find(|c| c.type_ == "Progressing");
    let reason = progressing.and_then(|c| c.reason.as_deref());
    if reason == Some(DEADLINE_EXCEEDED) {
        return None;
    }
    let (reason, message) = match (paused, reason == Some(PAUSED)) {
        (true, false) => (PAUSED, "Deployment is paused"),
        (false, true) => (RESUMED, "Deployment is resumed"),
        _ => return None,
    };
    let mut fresh = condition("Progressing", false, reason, message.to_owned(), now);
    fresh["status"] = json!("Unknown");
    if let Some(previous) = progressing.filter(|p| p.status == "Unknown")
        && let Some(time) = &previous.last_transition_time
    {
        fresh["lastTransitionTime"] = json!(time);
    }
    Some(
        conditions
            .iter()
            .filter(|c| c.type_ != "Progressing")
            .filter_map(|c| serde_json::to_value(c).ok())
            .chain(std::iter::once(fresh))
            .collect(),
    )
}

/// The `Progressing` reason of a paused Deployment.
pub const PAUSED: &str = "DeploymentPaused";

/// The `Progressing` reason of a Deployment resumed, until its rollout progresses.
pub const RESUMED: &str = "DeploymentResumed";

/// What a pass saw of a rollout, for its `Progressing` condition.
struct Progress<'a> {
    /// Every pod updated and available, no old one left.
    complete: bool,
    /// More pods updated, ready or available, or fewer old ones, than the status says.
    progressed: bool,
    /// The new ReplicaSet's name.
    new_name: &'a str,
    /// `progressDeadlineSeconds`.
    deadline: Option<i32>,
}

/// The `Progressing` condition after a pass (upstream's `syncRolloutStatus`), `previous`
/// being the current one; `None` keeps none.
fn progressing(
    progress: &Progress<'_>,
    previous: Option<&k8s_openapi::api::apps::v1::DeploymentCondition>,
    now: &str,
) -> Option<Value> {
    let name = k8s_quote(progress.new_name);
    let (status, reason, message) = if progress.complete {
        (
            true,
            "NewReplicaSetAvailable",
            format!("ReplicaSet {name} has successfully progressed."),
        )
    } else if progress.progressed
        || previous.is_none_or(|p| !p.message.as_deref().unwrap_or("").contains(&name))
    {
        // Progress renews lastUpdateTime, whatever the condition said before.
        let mut fresh = condition(
            "Progressing",
            true,
            "ReplicaSetUpdated",
            format!("ReplicaSet {name} is progressing."),
            now,
        );
        if let Some(previous) = previous.filter(|p| p.status == "True")
            && let Some(time) = &previous.last_transition_time
        {
            fresh["lastTransitionTime"] = json!(time);
        }
        return Some(fresh);
    } else if timed_out(previous, progress.deadline, now) {
        (
            false,
            DEADLINE_EXCEEDED,
            format!("ReplicaSet {name} has timed out progressing."),
        )
    } else {
        return previous.and_then(|p| serde_json::to_value(p).ok());
    };
    // upstream's SetDeploymentCondition: the same status and reason keep the condition.
    if let Some(previous) = previous
        && previous.status == if status { "True" } else { "False" }
        && previous.reason.as_deref() == Some(reason)
    {
        return serde_json::to_value(previous).ok();
    }
    let mut fresh = condition("Progressing", status, reason, message, now);
    if let Some(previous) = previous.filter(|p| p.status == fresh["status"])
        && let Some(time) = &previous.last_transition_time
    {
        fresh["lastTransitionTime"] = json!(time);
    }
    Some(fresh)
}

/// The reason of a rollout that made no progress within its deadline.
pub const DEADLINE_EXCEEDED: &str = "ProgressDeadlineExceeded";

/// When the rollout whose `Progressing` condition is `previous` times out, in Unix seconds:
/// `lastUpdateTime + deadline` while it is progressing, `None` when it cannot (complete,
/// timed out already, no deadline).
fn deadline_of(
    previous: Option<&k8s_openapi::api::apps::v1::DeploymentCondition>,
    deadline: Option<i32>,
) -> Option<i64> {
    let previous = previous?;
    if previous.reason.as_deref() != Some("ReplicaSetUpdated") {
        return None;
    }
    let since = previous.last_update_time.as_ref()?.0.as_second();
    Some(since + i64::from(deadline?))
}

/// Whether a rollout whose `Progressing` condition is `previous` is past its deadline at
/// `now` (upstream's `DeploymentTimedOut`).
fn timed_out(
    previous: Option<&k8s_openapi::api::apps::v1::DeploymentCondition>,
    deadline: Option<i32>,
    now: &str,
) -> bool {
    if previous.and_then(|p| p.reason.as_deref()) == Some(DEADLINE_EXCEEDED) {
        return true;
    }
    let now = now
        .parse::<k8s_openapi::jiff::Timestamp>()
        .map_or(0, |t| t.as_second());
    deadline_of(previous, deadline).is_some_and(|at| at < now)
}

/// How long until the earliest progress deadline of `deployments` passes.
fn next_deadline(deployments: &[Arc<Deployment>]) -> Option<std::time::Duration> {
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    deployments
        .iter()
        .filter_map(|d| {
            let conditions = d.status.as_ref()?.conditions.as_ref()?;
            let previous = conditions.iter().find(|c| c.type_ == "Progressing");
            deadline_of(previous, d.spec.as_ref()?.progress_deadline_seconds)
        })
        .min()
        .map(|at| std::time::Duration::from_secs(u64::try_from(at + 1 - now).unwrap_or(0)))
}

/// A name quoted as upstream's messages quote it.
fn k8s_quote(name: &str) -> String {
    genplane_apimachinery::gofmt::quote(name)
}

/// Rolls out every Deployment until the task is dropped.
pub async fn run(client: Client) {
    let changed = Arc::new(Notify::new());
    let (deployments, _deployments_watch) = crate::watch::reflect(
        Api::<Deployment>::all(client.clone()),
        watcher::Config::default(),
        changed.clone(),
    );
    let (replicasets, _rs_watch) = crate::watch::reflect(
        Api::<ReplicaSet>::all(client.clone()),
        watcher::Config::default(),
        changed.clone(),
    );
    loop {
        // A change, or the next progress deadline passing (a rollout stuck since).
        match next_deadline(&deployments.state()) {
            Some(wait) => {
                tokio::select! {
                    () = changed.notified() => {}
                    () = tokio::time::sleep(wait) => {}
                }
            }
            None => changed.notified().await,
        }
        let replicasets = replicasets.state();
        for deployment in deployments.state() {
            let uid = deployment.uid();
            let owned: Vec<Arc<ReplicaSet>> = replicasets
                .iter()
                .filter(|rs| {
                    controller_of(&rs.metadata).map(|r| Some(&r.uid)) == Some(uid.as_ref())
                })
                .cloned()
                .collect();
            sync(&client, &deployment, &owned).await;
        }
    }
}
