//! The namespace controller (upstream's `namespace`): empties a terminating namespace, then
//! removes its `kubernetes` finalizer through the `finalize` subresource, after which the
//! API server deletes it.
//!
//! For a namespace with a `deletionTimestamp` whose `spec.finalizers` still hold
//! `kubernetes`, each sync: discovers every namespaced resource (custom resources included)
//! that supports `delete`; deletes each one's objects in the namespace (`deletecollection`
//! with background propagation where supported, else list and delete one by one); lists what
//! remains; and records the outcome in the namespace's `status.conditions`
//! (`NamespaceDeletionDiscoveryFailure`, `NamespaceDeletionGroupVersionParsingFailure`,
//! `NamespaceDeletionContentFailure`, `NamespaceContentRemaining`,
//! `NamespaceFinalizersRemaining`, with upstream's reasons and messages). While objects
//! remain (waiting for their finalizers) the namespace is synced again after half of
//! upstream's 15-second estimate; once nothing remains, the finalizer goes.
//!
//! As upstream, a namespace is synced 5 seconds after each change is observed, so that every
//! API server (and storage member) has seen the deletion before the content is removed.
//!
//! # Pods first
//!
//! While `OrderedNamespaceDeletion` is on ([`genplane_features::controllers`]; asked at every sync through
//! [`PodsFirst`]), and the API serves core `pods`, a sync deletes the namespace's pods first
//! and touches nothing else while any remains: the namespace's other content outlives its
//! last pod. Pods that are terminating gracefully count, as upstream, toward the estimate of
//! when to look again: the longest `terminationGracePeriodSeconds` of the pods not yet
//! finished, as long as the namespace has not been terminating for that long.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, NamespaceCondition, NamespaceStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::core::DynamicObject;
use kube::runtime::WatchStreamExt;
use kube::{Api, Client};

use crate::discovery::{Discovered, Resource, discover};
use crate::informers::SharedInformers;
use crate::workqueue::Queue;

/// The finalizer this controller owns in a namespace's `spec.finalizers`.
pub const FINALIZER: &str = "kubernetes";
/// How long after a change a namespace is synced (upstream's `namespaceDeletionGracePeriod`).
pub const DELETION_GRACE_PERIOD: Duration = Duration::from_secs(5);
/// How long objects with finalizers are expected to take (upstream's
/// `finalizerEstimateSeconds`); a namespace still holding some is synced again after half.
pub const FINALIZER_ESTIMATE_SECONDS: u64 = 15;
/// Workers syncing namespaces (upstream's `--concurrent-namespace-syncs`).
const WORKERS: usize = 10;

/// Whether a terminating namespace's pods are deleted before the rest of its content
/// (`OrderedNamespaceDeletion`): asked at every sync, so a gate that changes while the
/// controller runs takes effect at the next one.
pub type PodsFirst = Arc<dyn Fn() -> bool + Send + Sync>;

/// What fails a namespace sync (retried with backoff), or stops the controller.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API request failed.
    #[error("{0}")]
    Api(#[from] kube::Error),
    /// Discovery could not list the API groups at all.
    #[error("discovery failed: {0}")]
    Discovery(kube::Error),
    /// Some content could not be discovered or deleted; the namespace's conditions say which.
    #[error("{0}")]
    Content(String),
    /// Content remains (objects waiting for finalizers): sync again after `estimate` seconds.
    #[error("some content remains in the namespace, estimate {0} seconds before it is removed")]
    ResourcesRemaining(u64),
    /// The namespace watch ended.
    #[error("the namespace watch ended")]
    WatchEnded,
}

/// Runs the namespace controller with `client`, on the shared namespace watch of
/// `informers`, deleting pods first whenever `pods_first` says so, until an unrecoverable
/// error; drop (abort) the future to stop it, which stops every task it started.
pub async fn run(
    client: Client,
    informers: SharedInformers,
    pods_first: PodsFirst,
) -> Result<(), Error> {
    let queue: Arc<Queue<String>> = Queue::new();
    let mut tasks: tokio::task::JoinSet<()> = tokio::task::JoinSet::new();
    for _ in 0..WORKERS {
        let queue = queue.clone();
        let client = client.clone();
        let pods_first = pods_first.clone();
        tasks.spawn(async move {
            loop {
                let name = queue.get().await;
                match sync(&client, &name, pods_first()).await {
                    Ok(()) => queue.forget(&name),
                    Err(Error::ResourcesRemaining(estimate)) => {
                        tracing::debug!(namespace = %name, estimate, "namespace: content remains");
                        queue.forget(&name);
                        queue.add_after(name.clone(), Duration::from_secs(estimate / 2 + 1));
                    }
                    Err(e) => {
                        tracing::info!(namespace = %name, error = %e, "namespace: deletion will retry");
                        queue.add_rate_limited(name.clone());
                    }
                }
                queue.done(&name);
            }
        });
    }
    let (_, events) = informers.typed::<Namespace>();
    let mut stream = events.results().touched_objects().boxed();
    loop {
        tokio::select! {
            next = stream.next() => match next {
                Some(Ok(ns)) => {
                    if ns.metadata.deletion_timestamp.is_some()
                        && let Some(name) = ns.metadata.name
                    {
                        queue.add_after(name, DELETION_GRACE_PERIOD);
                    }
                }
                Some(Err(e)) => tracing::debug!(error = %e, "namespace: watch error"),
                None => return Err(Error::WatchEnded),
            },
            Some(done) = tasks.join_next() => {
                if let Err(e) = done {
                    tracing::error!(error = %e, "namespace: a worker stopped");
                }
            }
        }
    }
}

/// What remained of the namespace's content after one pass.
#[derive(Debug, Default)]
struct Remaining {
    /// Objects left per `resource.group`.
    by_resource: BTreeMap<String, usize>,
    /// Objects left per finalizer.
    by_finalizer: BTreeMap<String, usize>,
}

/// The conditions upstream's namespace deleter maintains, in its order, with the reason and
/// message of their "all is well" (`False`) state.
const CONDITIONS: [(&str, &str, &str); 5] = [
    (
        "NamespaceDeletionDiscoveryFailure",
        "ResourcesDiscovered",
        "All resources successfully discovered",
    ),
    (
        "NamespaceDeletionGroupVersionParsingFailure",
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    (
        "NamespaceDeletionContentFailure",
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
    (
        "NamespaceContentRemaining",
        "ContentRemoved",
        "All content successfully removed",
    ),
    (
        "NamespaceFinalizersRemaining",
        "ContentHasNoFinalizers",
        "All content-preserving finalizers finished",
    ),
];

/// The failing conditions of one pass: type -> (reason, message).
fn failures(
    discovered: Option<&Discovered>,
    discovery_error: Option<&str>,
    content_errors: &[String],
    remaining: &Remaining,
) -> BTreeMap<&'static str, (String, String)> {
    let mut failing = BTreeMap::new();
    let discovery_message = discovery_error
        .map(str::to_owned)
        .or_else(|| discovered.and_then(Discovered::failure_message));
    if let Some(message) = discovery_message {
        failing.insert(
            "NamespaceDeletionDiscoveryFailure",
            ("DiscoveryFailed".to_owned(), message),
        );
    }
    if let Some(d) = discovered
        && !d.unparsable.is_empty()
    {
        failing.insert(
            "NamespaceDeletionGroupVersionParsingFailure",
            (
                "GroupVersionParsingFailed".to_owned(),
                d.unparsable.join(", "),
            ),
        );
    }
    if !content_errors.is_empty() {
        let mut errors = content_errors.to_vec();
        errors.sort();
        failing.insert(
            "NamespaceDeletionContentFailure",
            (
                "ContentDeletionFailed".to_owned(),
                format!(
                    "Failed to delete all resource types, {} remaining: {}",
                    errors.len(),
                    errors.join(", ")
                ),
            ),
        );
    }
    let resources: Vec<String> = remaining
        .by_resource
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(r, n)| format!("{r} has {n} resource instances"))
        .collect();
    if !resources.is_empty() {
        failing.insert(
            "NamespaceContentRemaining",
            (
                "SomeResourcesRemain".to_owned(),
                format!("Some resources are remaining: {}", resources.join(", ")),
            ),
        );
    }
    let finalizers: Vec<String> = remaining
        .by_finalizer
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(f, n)| format!("{f} in {n} resource instances"))
        .collect();
    if !finalizers.is_empty() {
        failing.insert(
            "NamespaceFinalizersRemaining",
            (
                "SomeFinalizersRemain".to_owned(),
                format!(
                    "Some content in the namespace has finalizers remaining: {}",
                    finalizers.join(", ")
                ),
            ),
        );
    }
    failing
}

/// Sets the five conditions from `failing` (absent types are `False` with their "ok" text);
/// the transition time changes only when the status does. Returns whether anything changed.
fn update_conditions(
    status: &mut NamespaceStatus,
    failing: &BTreeMap<&'static str, (String, String)>,
) -> bool {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let mut changed = false;
    for (type_, ok_reason, ok_message) in CONDITIONS {
        let (state, reason, message) = match failing.get(type_) {
            Some((reason, message)) => ("True", reason.clone(), message.clone()),
            None => ("False", ok_reason.to_owned(), ok_message.to_owned()),
        };
        let now = Some(Time(k8s_openapi::jiff::Timestamp::now()));
        match conditions.iter_mut().find(|c| c.type_ == type_) {
            None => {
                conditions.push(NamespaceCondition {
                    type_: type_.to_owned(),
                    status: state.to_owned(),
                    reason: Some(reason),
                    message: Some(message),
                    last_transition_time: now,
                });
                changed = true;
            }
            Some(c) => {
                if c.status != state
                    || c.reason.as_deref() != Some(reason.as_str())
                    || c.message.as_deref() != Some(message.as_str())
                {
                    if c.status != state {
                        c.last_transition_time = now;
                    }
                    c.status = state.to_owned();
                    c.reason = Some(reason);
                    c.message = Some(message);
                    changed = true;
                }
            }
        }
    }
    changed
}

fn has_finalizer(ns: &Namespace) -> bool {
    ns.spec
        .as_ref()
        .and_then(|s| s.finalizers.as_ref())
        .is_some_and(|f| f.iter().any(|x| x == FINALIZER))
}

fn is_status(e: &kube::Error, codes: &[u16]) -> bool {
    matches!(e, kube::Error::Api(s) if codes.contains(&s.code))
}

/// One pass over the namespace `name` (upstream's `namespacedResourcesDeleter.Delete`), its
/// pods first when `pods_first`.
async fn sync(client: &Client, name: &str, pods_first: bool) -> Result<(), Error> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let Some(mut ns) = namespaces.get_opt(name).await? else {
        return Ok(());
    };
    if ns.metadata.deletion_timestamp.is_none() || !has_finalizer(&ns) {
        return Ok(());
    }
    if ns.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Terminating") {
        ns.status.get_or_insert_with(Default::default).phase = Some("Terminating".into());
        ns = match namespaces
            .replace_status(name, &PostParams::default(), &ns)
            .await
        {
            Ok(ns) => ns,
            Err(e) if is_status(&e, &[404]) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
    }

    let (discovered, discovery_error) = match discover(client).await {
        Ok(d) => (Some(d), None),
        Err(e) => (None, Some(e)),
    };
    let mut content_errors = Vec::new();
    let mut remaining = Remaining::default();
    let mut estimate = 0;
    if let Some(d) = &discovered {
        let deleted_at = ns.metadata.deletion_timestamp.as_ref().map(|t| t.0);
        let deletable: Vec<&Resource> = d
            .preferred
            .iter()
            .filter(|r| r.namespaced && r.supports(&["delete"]))
            .collect();
        let (first, rest): (Vec<&Resource>, Vec<&Resource>) = deletable
            .into_iter()
            .partition(|r| pods_first && is_pods(r));
        for resource in first.into_iter().chain(rest) {
            // Nothing else goes while a pod remains (or could not be deleted).
            if pods_first
                && !is_pods(resource)
                && (!remaining.by_resource.is_empty() || !content_errors.is_empty())
            {
                break;
            }
            match delete_content(client, resource, name, deleted_at, &mut remaining).await {
                Ok(e) => estimate = estimate.max(e),
                Err(e) => content_errors.push(e),
            }
        }
    }
    let discovery_text = discovery_error.as_ref().map(ToString::to_string);
    let failing = failures(
        discovered.as_ref(),
        discovery_text.as_deref(),
        &content_errors,
        &remaining,
    );
    if update_conditions(ns.status.get_or_insert_with(Default::default), &failing) {
        match namespaces
            .replace_status(name, &PostParams::default(), &ns)
            .await
        {
            Ok(updated) => ns = updated,
            Err(e) if is_status(&e, &[404]) => return Ok(()),
            // The conditions are written again on the next pass.
            Err(e) => {
                tracing::info!(namespace = %name, error = %e, "namespace: could not update conditions")
            }
        }
    }
    if let Some(e) = discovery_error {
        return Err(Error::Discovery(e));
    }
    if let Some(d) = &discovered
        && (!d.failed.is_empty() || !d.unparsable.is_empty() || !content_errors.is_empty())
    {
        let mut all: Vec<String> = d.failure_message().into_iter().collect();
        all.extend(d.unparsable.iter().cloned());
        all.extend(content_errors);
        return Err(Error::Content(all.join("; ")));
    }
    if estimate > 0 {
        return Err(Error::ResourcesRemaining(estimate));
    }
    finalize(&namespaces, ns).await
}

/// Removes [`FINALIZER`] through the `finalize` subresource, retrying on conflicts.
async fn finalize(namespaces: &Api<Namespace>, mut ns: Namespace) -> Result<(), Error> {
    let name = ns.metadata.name.clone().unwrap_or_default();
    let uid = ns.metadata.uid.clone();
    loop {
        if let Some(spec) = ns.spec.as_mut() {
            let mut kept: Vec<String> = spec
                .finalizers
                .take()
                .unwrap_or_default()
                .into_iter()
                .filter(|f| f != FINALIZER)
                .collect();
            kept.sort();
            kept.dedup();
            spec.finalizers = Some(kept);
        }
        match namespaces
            .replace_subresource("finalize", &name, &PostParams::default(), &ns)
            .await
        {
            Ok(_) => return Ok(()),
            Err(e) if is_status(&e, &[404]) => return Ok(()),
            Err(e) if is_status(&e, &[409]) => {
                let Some(latest) = namespaces.get_opt(&name).await? else {
                    return Ok(());
                };
                if latest.metadata.uid != uid || !has_finalizer(&latest) {
                    return Ok(());
                }
                ns = latest;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Whether `resource` is core `pods`.
fn is_pods(resource: &Resource) -> bool {
    resource.api.group.is_empty() && resource.api.plural == "pods"
}

/// How long the pods among `objects` may still take to terminate gracefully, in seconds: the
/// longest `spec.terminationGracePeriodSeconds` of those not finished (phase neither
/// `Succeeded` nor `Failed`), or 0 once the namespace (deleted at `deleted_at`) has been
/// terminating for that long.
fn graceful_estimate(
    objects: &[DynamicObject],
    deleted_at: Option<k8s_openapi::jiff::Timestamp>,
) -> u64 {
    let longest = objects
        .iter()
        .filter(|o| {
            !matches!(
                o.data["status"]["phase"].as_str(),
                Some("Succeeded" | "Failed")
            )
        })
        .filter_map(|o| o.data["spec"]["terminationGracePeriodSeconds"].as_u64())
        .max()
        .unwrap_or(0);
    let waited = deleted_at
        .map(|at| {
            let since = k8s_openapi::jiff::Timestamp::now().duration_since(at);
            u64::try_from(since.as_secs()).unwrap_or(0)
        })
        .unwrap_or(0);
    if waited >= longest { 0 } else { longest }
}

/// Deletes every object of `resource` in `namespace` (deleted at `deleted_at`), then counts
/// what remains into `remaining`; returns the estimate in seconds until the rest is gone (0
/// when nothing remains), or the error text for the condition.
async fn delete_content(
    client: &Client,
    resource: &Resource,
    namespace: &str,
    deleted_at: Option<k8s_openapi::jiff::Timestamp>,
    remaining: &mut Remaining,
) -> Result<u64, String> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource.api);
    let failed = |e: kube::Error| format!("{}: {e}", resource.group_resource());
    let background = DeleteParams::background();
    let mut collection_done = false;
    if resource.supports(&["deletecollection"]) {
        match api
            .delete_collection(&background, &ListParams::default())
            .await
        {
            Ok(_) => collection_done = true,
            Err(e) if is_status(&e, &[404, 405]) => {}
            Err(e) => return Err(failed(e)),
        }
    }
    if !resource.supports(&["list"]) {
        return Ok(0);
    }
    if !collection_done {
        let list = match api.list_metadata(&ListParams::default()).await {
            Ok(list) => list,
            Err(e) if is_status(&e, &[404, 405]) => return Ok(0),
            Err(e) => return Err(failed(e)),
        };
        for item in list.items {
            let item_name = item.metadata.name.unwrap_or_default();
            match api.delete(&item_name, &background).await {
                Ok(_) => {}
                Err(e) if is_status(&e, &[404, 405]) => {}
                Err(e) => return Err(failed(e)),
            }
        }
    }
    // Pods are read whole: their grace periods make the estimate.
    let listed = if is_pods(resource) {
        api.list(&ListParams::default()).await.map(|list| {
            let graceful = graceful_estimate(&list.items, deleted_at);
            let left: Vec<_> = list.items.into_iter().map(|o| o.metadata).collect();
            (left, graceful)
        })
    } else {
        api.list_metadata(&ListParams::default())
            .await
            .map(|list| (list.items.into_iter().map(|o| o.metadata).collect(), 0))
    };
    let (left, graceful): (Vec<ObjectMeta>, u64) = match listed {
        Ok(listed) => listed,
        Err(e) if is_status(&e, &[404, 405]) => return Ok(0),
        Err(e) => return Err(failed(e)),
    };
    if left.is_empty() {
        return Ok(0);
    }
    *remaining
        .by_resource
        .entry(resource.group_resource())
        .or_default() += left.len();
    let mut with_finalizers = false;
    for item in &left {
        for f in item.finalizers.iter().flatten() {
            with_finalizers = true;
            *remaining.by_finalizer.entry(f.clone()).or_default() += 1;
        }
    }
    let estimate = if with_finalizers {
        graceful.max(FINALIZER_ESTIMATE_SECONDS)
    } else {
        graceful
    };
    if estimate > 0 {
        Ok(estimate)
    } else {
        Err(format!(
            "unexpected items still remain in namespace: {namespace} for gvr: {}/{}, Resource={}",
            resource.api.group, resource.api.version, resource.api.plural
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find<'a>(status: &'a NamespaceStatus, type_: &str) -> &'a NamespaceCondition {
        status
            .conditions
            .as_ref()
            .and_then(|c| c.iter().find(|c| c.type_ == type_))
            .expect("condition")
    }

    #[test]
    fn remaining_content_and_finalizers_read_as_upstream() {
        let mut remaining = Remaining::default();
        remaining.by_resource.insert("configmaps.".into(), 2);
        remaining
            .by_resource
            .insert("leases.coordination.k8s.io".into(), 1);
        remaining.by_finalizer.insert("example.com/hold".into(), 3);
        let failing = failures(Some(&Discovered::default()), None, &[], &remaining);
        let mut status = NamespaceStatus::default();
        assert!(update_conditions(&mut status, &failing));
        let c = find(&status, "NamespaceContentRemaining");
        assert_eq!(c.status, "True");
        assert_eq!(c.reason.as_deref(), Some("SomeResourcesRemain"));
        assert_eq!(
            c.message.as_deref(),
            Some(
                "Some resources are remaining: configmaps. has 2 resource instances, leases.coordination.k8s.io has 1 resource instances"
            )
        );
        let c = find(&status, "NamespaceFinalizersRemaining");
        assert_eq!(c.reason.as_deref(), Some("SomeFinalizersRemain"));
        assert_eq!(
            c.message.as_deref(),
            Some(
                "Some content in the namespace has finalizers remaining: example.com/hold in 3 resource instances"
            )
        );
        let c = find(&status, "NamespaceDeletionDiscoveryFailure");
        assert_eq!(
            (c.status.as_str(), c.reason.as_deref()),
            ("False", Some("ResourcesDiscovered"))
        );
        assert_eq!(status.conditions.as_ref().map(Vec::len), Some(5));
        // The same outcome again changes nothing.
        assert!(!update_conditions(&mut status, &failing));
    }

    #[test]
    fn content_errors_and_discovery_failures_become_conditions() {
        let mut d = Discovered::default();
        d.failed.insert("example.com/v1".into(), "boom".into());
        d.unparsable
            .push("unexpected GroupVersion string: a/b/c".into());
        let errors = vec![
            "secrets.: forbidden".to_owned(),
            "configmaps.: timeout".to_owned(),
        ];
        let failing = failures(Some(&d), None, &errors, &Remaining::default());
        let mut status = NamespaceStatus::default();
        update_conditions(&mut status, &failing);
        let c = find(&status, "NamespaceDeletionContentFailure");
        assert_eq!(c.reason.as_deref(), Some("ContentDeletionFailed"));
        assert_eq!(
            c.message.as_deref(),
            Some(
                "Failed to delete all resource types, 2 remaining: configmaps.: timeout, secrets.: forbidden"
            )
        );
        assert_eq!(
            find(&status, "NamespaceDeletionDiscoveryFailure")
                .reason
                .as_deref(),
            Some("DiscoveryFailed")
        );
        assert_eq!(
            find(&status, "NamespaceDeletionGroupVersionParsingFailure")
                .reason
                .as_deref(),
            Some("GroupVersionParsingFailed")
        );
        // Recovery flips them back to False with the "ok" texts.
        let first = find(&status, "NamespaceDeletionContentFailure")
            .last_transition_time
            .clone();
        assert!(update_conditions(&mut status, &BTreeMap::new()));
        let c = find(&status, "NamespaceDeletionContentFailure");
        assert_eq!(c.status, "False");
        assert_eq!(c.reason.as_deref(), Some("ContentDeleted"));
        assert!(c.last_transition_time >= first);
        let c = find(&status, "NamespaceFinalizersRemaining");
        assert_eq!(
            c.message.as_deref(),
            Some("All content-preserving finalizers finished")
        );
    }

    fn pod(phase: &str, grace: Option<u64>) -> DynamicObject {
        let mut spec = serde_json::json!({});
        if let Some(grace) = grace {
            spec["terminationGracePeriodSeconds"] = grace.into();
        }
        DynamicObject {
            types: None,
            metadata: ObjectMeta::default(),
            data: serde_json::json!({"spec": spec, "status": {"phase": phase}}),
        }
    }

    #[test]
    fn pods_still_terminating_estimate_their_longest_grace_period_until_it_passed() {
        let pods = [
            pod("Running", Some(30)),
            pod("Pending", Some(45)),
            // Finished pods have nothing left to stop.
            pod("Succeeded", Some(600)),
            pod("Failed", Some(600)),
            pod("Running", None),
        ];
        let now = k8s_openapi::jiff::Timestamp::now();
        let ago = |secs: i64| now.checked_sub(k8s_openapi::jiff::SignedDuration::from_secs(secs));
        assert_eq!(graceful_estimate(&pods, Some(ago(1).unwrap())), 45);
        assert_eq!(graceful_estimate(&pods, Some(ago(60).unwrap())), 0);
        assert_eq!(graceful_estimate(&pods[2..], Some(ago(1).unwrap())), 0);
        assert_eq!(graceful_estimate(&[], None), 0);
    }
}
