//! The garbage collector (upstream's `garbage-collector` controller).
//!
//! It keeps a graph of `ownerReferences` over every resource that discovery lists with the
//! verbs `list`, `watch` and `delete` (events excepted, as upstream), from one metadata-only
//! watch per resource (shared with the other controllers through [`SharedInformers`]);
//! discovery runs again every 30 seconds, so watches start and stop as resources (custom
//! resources included) come and go.
//!
//! - An object whose owners are all gone is deleted (background). An owner counts as gone only
//!   after a live GET finds no object of that uid under its name; absent owners are
//!   remembered.
//! - An owner deleted with the `foregroundDeletion` finalizer has its dependents deleted; once
//!   no dependent with `blockOwnerDeletion: true` is left the finalizer is removed. A
//!   dependent that has dependents of its own is deleted in the foreground too.
//! - An owner deleted with the `orphan` finalizer has its reference removed from each
//!   dependent, then the finalizer removed.
//! - A dependent that still has a live owner loses only its references to absent owners and
//!   to owners being deleted in the foreground.
//! - Invalid references: a namespaced dependent may name a cluster-scoped owner; a
//!   namespaced owner is looked up in the dependent's namespace (one in another namespace
//!   counts as absent, and a Warning event `OwnerRefInvalidNamespace` names the dependent);
//!   a cluster-scoped dependent naming a namespaced kind is never collected (and reported).
//!
//! Nothing is collected before every watch has listed its resource once.

mod graph;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event as CoreEvent, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions, PropagationPolicy};
use kube::core::DynamicObject;
use kube::runtime::watcher;
use kube::{Api, Client};
use serde_json::json;
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinSet};

use graph::{FOREGROUND, Graph, Identity, ORPHAN};

use crate::discovery::{Discovered, Resource, discover};
use crate::informers::{Meta, SharedInformers, Subscription};
use crate::spare::ReleaseSpare as _;
use crate::workqueue::Queue;

/// How often discovery runs again (upstream's 30 s resync of the resource monitors).
pub const DISCOVERY_PERIOD: Duration = Duration::from_secs(30);
/// Workers examining objects for deletion (upstream's `--concurrent-gc-syncs`, 20).
const DELETE_WORKERS: usize = 20;
/// Workers orphaning dependents.
const ORPHAN_WORKERS: usize = 4;
/// How long the workers wait for the first list of every watch before starting anyway.
const INITIAL_SYNC_TIMEOUT: Duration = Duration::from_secs(60);
/// The component events are reported as.
const COMPONENT: &str = "garbage-collector-controller";

/// What stops the garbage collector, or fails one of its steps (a failed step is retried
/// with backoff; only [`Error::GraphStopped`] ends [`run`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API request failed.
    #[error("{0}")]
    Api(#[from] kube::Error),
    /// An owner reference names an `apiVersion`/`kind` discovery does not know.
    #[error("unable to resolve {api_version}, Kind={kind}")]
    UnknownKind {
        /// The reference's `apiVersion`.
        api_version: String,
        /// The reference's `kind`.
        kind: String,
    },
    /// A cluster-scoped object names a namespaced owner: it can never be collected.
    #[error("cluster-scoped object {0} has a namespaced owner")]
    NamespacedOwnerOfClusterScoped(String),
    /// The task that applies watch events to the graph ended.
    #[error("the dependency graph builder stopped")]
    GraphStopped,
}

/// A change for the graph builder.
enum Change {
    /// A watch reported an object added or updated.
    Observed {
        identity: Identity,
        new: Box<ObjectMeta>,
    },
    /// A watch reported an object deleted.
    Deleted { uid: String },
    /// A live GET found no object of this identity.
    VirtualDeleted(Identity),
}

/// The state the workers share.
struct Collector {
    client: Client,
    graph: Mutex<Graph>,
    discovered: RwLock<Arc<Discovered>>,
    attempt_to_delete: Arc<Queue<String>>,
    attempt_to_orphan: Arc<Queue<String>>,
    changes: mpsc::UnboundedSender<Change>,
    events: mpsc::UnboundedSender<(Identity, OwnerReference)>,
}

/// Runs the garbage collector with `client` until an unrecoverable error; drop (abort) the
/// future to stop it, which stops every task it started.
pub async fn run(client: Client, informers: SharedInformers) -> Result<(), Error> {
    let (changes_tx, mut changes_rx) = mpsc::unbounded_channel();
    let (events_tx, mut events_rx) = mpsc::unbounded_channel();
    let gc = Arc::new(Collector {
        client: client.clone(),
        graph: Mutex::new(Graph::default()),
        discovered: RwLock::new(Arc::new(Discovered::default())),
        attempt_to_delete: Queue::new(),
        attempt_to_orphan: Queue::new(),
        changes: changes_tx.clone(),
        events: events_tx,
    });
    let mut tasks: JoinSet<Result<(), Error>> = JoinSet::new();
    let graph_task = {
        let gc = gc.clone();
        tasks.spawn(async move {
            while let Some(change) = changes_rx.recv().await {
                gc.apply(change);
            }
            Err(Error::GraphStopped)
        })
    };
    {
        let client = client.clone();
        tasks.spawn(async move {
            while let Some((dependent, owner)) = events_rx.recv().await {
                report_invalid_owner(&client, &dependent, &owner).await;
            }
            Ok(())
        });
    }
    let (synced_tx, synced_rx) = tokio::sync::watch::channel(false);
    for _ in 0..DELETE_WORKERS {
        let gc = gc.clone();
        let mut synced = synced_rx.clone();
        tasks.spawn(async move {
            let _ = synced.wait_for(|s| *s).await;
            loop {
                let uid = gc.attempt_to_delete.get().await;
                gc.attempt_to_delete_worker(&uid).await;
                gc.attempt_to_delete.done(&uid);
            }
        });
    }
    for _ in 0..ORPHAN_WORKERS {
        let gc = gc.clone();
        let mut synced = synced_rx.clone();
        tasks.spawn(async move {
            let _ = synced.wait_for(|s| *s).await;
            loop {
                let uid = gc.attempt_to_orphan.get().await;
                gc.attempt_to_orphan_worker(&uid).await;
                gc.attempt_to_orphan.done(&uid);
            }
        });
    }

    let mut monitors: HashMap<(String, String), AbortHandle> = HashMap::new();
    let mut initial: Option<Vec<tokio::sync::oneshot::Receiver<()>>> = Some(Vec::new());
    let mut tick = tokio::time::interval(DISCOVERY_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                match discover(&client).await {
                    Ok(found) => {
                        if let Some(message) = found.failure_message() {
                            tracing::warn!(%message, "garbage collector: partial discovery");
                        }
                        let wanted: HashMap<(String, String), Resource> = found
                            .preferred
                            .iter()
                            .filter(|r| r.supports(&["list", "watch", "delete"]))
                            .filter(|r| r.api.plural != "events" || (!r.api.group.is_empty() && r.api.group != "events.k8s.io"))
                            .map(|r| ((r.api.api_version.clone(), r.api.plural.clone()), r.clone()))
                            .collect();
                        *gc.discovered.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(found);
                        monitors.retain(|key, handle| {
                            let keep = wanted.contains_key(key) && !handle.is_finished();
                            if !keep {
                                tracing::info!(resource = ?key, "garbage collector: stopping a monitor");
                                handle.abort();
                            }
                            keep
                        });
                        for (key, resource) in wanted {
                            if monitors.contains_key(&key) {
                                continue;
                            }
                            let (tx, rx) = tokio::sync::oneshot::channel();
                            if let Some(waiting) = initial.as_mut() {
                                waiting.push(rx);
                            }
                            let handle = tasks.spawn(monitor(informers.metadata(&resource.api), resource, changes_tx.clone(), tx));
                            monitors.insert(key, handle);
                        }
                        if let Some(waiting) = initial.take() {
                            let synced_tx = synced_tx.clone();
                            tasks.spawn(async move {
                                let all = futures::future::join_all(waiting);
                                if tokio::time::timeout(INITIAL_SYNC_TIMEOUT, all).await.is_err() {
                                    tracing::warn!("garbage collector: not every resource listed in time; starting anyway");
                                }
                                let _ = synced_tx.send(true);
                                Ok(())
                            });
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "garbage collector: discovery failed"),
                }
            }
            Some(done) = tasks.join_next_with_id() => {
                match done {
                    Ok((id, result)) => {
                        if id == graph_task.id() {
                            return result;
                        }
                        if let Err(e) = result {
                            tracing::warn!(error = %e, "garbage collector: a task ended");
                        }
                    }
                    Err(e) if e.is_cancelled() => {}
                    Err(e) => {
                        if e.id() == graph_task.id() {
                            return Err(Error::GraphStopped);
                        }
                        tracing::error!(error = %e, "garbage collector: a task panicked");
                    }
                }
            }
        }
    }
}

/// Watches one resource's metadata and feeds the graph; a relist reports what disappeared
/// meanwhile as deleted. `synced` fires after the first complete list.
///
/// The graph keeps what the collector needs of each object; the monitor keeps only the uids
/// its watch has shown, to tell after a relist which objects went away meanwhile.
async fn monitor(
    mut stream: Subscription<Meta>,
    resource: Resource,
    changes: mpsc::UnboundedSender<Change>,
    synced: tokio::sync::oneshot::Sender<()>,
) -> Result<(), Error> {
    let api_version: Arc<str> = resource.api.api_version.as_str().into();
    let kind: Arc<str> = resource.api.kind.as_str().into();
    let identity = |m: &ObjectMeta| Identity {
        api_version: api_version.clone(),
        kind: kind.clone(),
        namespace: m.namespace.as_deref().unwrap_or_default().into(),
        name: m.name.as_deref().unwrap_or_default().into(),
        uid: uid_of(m),
    };
    let observed = |meta: ObjectMeta| {
        let meta = slim(meta);
        Change::Observed {
            identity: identity(&meta),
            new: Box::new(meta),
        }
    };
    let mut known: HashSet<Box<str>> = HashSet::new();
    let mut listing: HashSet<Box<str>> = HashSet::new();
    let mut synced = Some(synced);
    while let Some(event) = stream.next().await {
        let sent = match event {
            watcher::Event::Apply(o) => {
                let uid = o.metadata.uid.as_deref().unwrap_or_default();
                if !known.contains(uid) {
                    known.insert(uid.into());
                }
                changes.send(observed(o.metadata))
            }
            watcher::Event::Delete(o) => {
                let uid = uid_of(&o.metadata);
                known.remove(&uid);
                known.release_spare();
                changes.send(Change::Deleted { uid: uid.into() })
            }
            watcher::Event::Init => {
                listing.clear();
                Ok(())
            }
            watcher::Event::InitApply(o) => {
                // What a list shows is the object's latest state: the graph may have it now.
                // Only what the list lacks waits for its end.
                listing.insert(uid_of(&o.metadata));
                changes.send(observed(o.metadata))
            }
            watcher::Event::InitDone => {
                let mut result = Ok(());
                for uid in known.difference(&listing) {
                    result = result.and(changes.send(Change::Deleted {
                        uid: uid.to_string(),
                    }));
                }
                known = std::mem::take(&mut listing);
                if let Some(s) = synced.take() {
                    let _ = s.send(());
                }
                result
            }
        };
        if sent.is_err() {
            return Err(Error::GraphStopped);
        }
    }
    Ok(())
}

/// An object's uid, as the monitors keep it.
fn uid_of(meta: &ObjectMeta) -> Box<str> {
    meta.uid.as_deref().unwrap_or_default().into()
}

/// The part of an object's metadata the graph needs (labels, annotations and managed fields
/// would only cost memory).
fn slim(meta: ObjectMeta) -> ObjectMeta {
    ObjectMeta {
        name: meta.name,
        namespace: meta.namespace,
        uid: meta.uid,
        resource_version: meta.resource_version,
        deletion_timestamp: meta.deletion_timestamp,
        finalizers: meta.finalizers,
        owner_references: meta.owner_references,
        ..ObjectMeta::default()
    }
}

/// Whether `meta` carries `finalizer`.
fn has_finalizer(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|x| x == finalizer))
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// An owner reference classified against the live owner.
enum OwnerState {
    /// The owner exists and is not deleting its dependents.
    Solid,
    /// No object of that uid exists under the reference's coordinates.
    Dangling,
    /// The owner exists and is deleting its dependents in the foreground.
    Waiting,
}

impl Collector {
    fn graph(&self) -> std::sync::MutexGuard<'_, Graph> {
        self.graph
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn discovered(&self) -> Arc<Discovered> {
        self.discovered
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Applies a change to the graph and queues what it calls for.
    fn apply(&self, change: Change) {
        let fx = {
            let mut graph = self.graph();
            match change {
                Change::Observed { identity, new } => graph.observe(identity, &new),
                Change::Deleted { uid } => graph.observe_deleted(&uid),
                Change::VirtualDeleted(identity) => graph.virtual_deleted(&identity),
            }
        };
        for uid in fx.delete {
            self.attempt_to_delete.add(uid);
        }
        for uid in fx.orphan {
            self.attempt_to_orphan.add(uid);
        }
        for invalid in fx.invalid {
            let _ = self.events.send(invalid);
        }
    }

    /// The metadata API of the resource of `api_version`/`kind` in `namespace`.
    fn api_for(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
    ) -> Result<(Api<DynamicObject>, bool), Error> {
        let discovered = self.discovered();
        let resource = discovered
            .resolve(api_version, kind)
            .ok_or_else(|| Error::UnknownKind {
                api_version: api_version.to_owned(),
                kind: kind.to_owned(),
            })?;
        let api = if resource.namespaced {
            Api::namespaced_with(self.client.clone(), namespace, &resource.api)
        } else {
            Api::all_with(self.client.clone(), &resource.api)
        };
        Ok((api, resource.namespaced))
    }

    /// The live object of `identity`, if one of that uid exists.
    async fn get_live(&self, identity: &Identity) -> Result<Option<Meta>, Error> {
        let (api, namespaced) =
            self.api_for(&identity.api_version, &identity.kind, &identity.namespace)?;
        if namespaced && identity.namespace.is_empty() {
            // A namespaced kind named by a cluster-scoped object: there is no such object.
            return Ok(None);
        }
        match api.get_metadata_opt(&identity.name).await? {
            Some(o) if o.metadata.uid.as_deref() == Some(&*identity.uid) => Ok(Some(o)),
            _ => Ok(None),
        }
    }

    async fn attempt_to_delete_worker(self: &Arc<Self>, uid: &str) {
        match self.attempt_to_delete_item(uid).await {
            Ok(()) => self.attempt_to_delete.forget(&uid.to_owned()),
            Err(Error::NamespacedOwnerOfClusterScoped(item)) => {
                tracing::info!(%item, "garbage collector: cluster-scoped object names a namespaced owner");
                self.attempt_to_delete.forget(&uid.to_owned());
            }
            Err(e) => {
                tracing::debug!(%uid, error = %e, "garbage collector: will retry");
                self.attempt_to_delete.add_rate_limited(uid.to_owned());
            }
        }
    }

    /// Upstream's `attemptToDeleteItem`.
    async fn attempt_to_delete_item(&self, uid: &str) -> Result<(), Error> {
        let Some(snapshot) = self.graph().snapshot(uid) else {
            return Ok(());
        };
        let item = snapshot.node;
        if item.being_deleted && !item.deleting_dependents {
            return Ok(());
        }
        let Some(latest) = self.get_live(&item.identity).await? else {
            let _ = self
                .changes
                .send(Change::VirtualDeleted(item.identity.clone()));
            return Ok(());
        };
        if item.deleting_dependents {
            let blocking: Vec<_> = snapshot
                .dependents
                .iter()
                .filter(|d| d.blocks_owner)
                .collect();
            if blocking.is_empty() {
                return self.remove_finalizer(&item.identity, FOREGROUND).await;
            }
            for d in blocking {
                if !d.deleting_dependents {
                    self.attempt_to_delete.add(d.identity.uid.to_string());
                }
            }
            return Ok(());
        }
        let owners = latest.metadata.owner_references.clone().unwrap_or_default();
        if owners.is_empty() {
            return Ok(());
        }
        let mut solid = Vec::new();
        let mut dangling = Vec::new();
        let mut waiting = Vec::new();
        for owner in &owners {
            match self.classify(owner, &item.identity).await? {
                OwnerState::Solid => solid.push(owner.uid.clone()),
                OwnerState::Dangling => dangling.push(owner.uid.clone()),
                OwnerState::Waiting => waiting.push(owner.uid.clone()),
            }
        }
        let rv = latest.metadata.resource_version.clone();
        if !solid.is_empty() {
            if dangling.is_empty() && waiting.is_empty() {
                return Ok(());
            }
            // Drop the references to absent owners and to owners waiting for their
            // dependents: they would otherwise wait for this object forever.
            let gone: Vec<String> = dangling.into_iter().chain(waiting).collect();
            let kept: Vec<&OwnerReference> =
                owners.iter().filter(|o| !gone.contains(&o.uid)).collect();
            return self.patch_owners(&item.identity, &kept, rv).await;
        }
        let policy = if !waiting.is_empty() && !snapshot.dependents.is_empty() {
            if snapshot.dependents.iter().any(|d| d.deleting_dependents) {
                // Break a possible cycle: this object stops blocking its owners first.
                let unblocked: Vec<OwnerReference> = owners
                    .iter()
                    .map(|o| OwnerReference {
                        block_owner_deletion: o.block_owner_deletion.map(|_| false),
                        ..o.clone()
                    })
                    .collect();
                let refs: Vec<&OwnerReference> = unblocked.iter().collect();
                self.patch_owners(&item.identity, &refs, rv.clone()).await?;
            }
            PropagationPolicy::Foreground
        } else if has_finalizer(&latest.metadata, ORPHAN) {
            PropagationPolicy::Orphan
        } else if has_finalizer(&latest.metadata, FOREGROUND) {
            PropagationPolicy::Foreground
        } else {
            PropagationPolicy::Background
        };
        self.delete(&item.identity, policy).await
    }

    /// Classifies one owner reference of `item` with a live GET (upstream's `isDangling`).
    async fn classify(&self, owner: &OwnerReference, item: &Identity) -> Result<OwnerState, Error> {
        let cluster = Identity::of_owner(owner, "");
        let namespaced = Identity::of_owner(owner, &item.namespace);
        {
            let graph = self.graph();
            if graph.is_absent(&cluster) || graph.is_absent(&namespaced) {
                return Ok(OwnerState::Dangling);
            }
        }
        let (api, owner_namespaced) =
            self.api_for(&owner.api_version, &owner.kind, &item.namespace)?;
        if item.namespace.is_empty() && owner_namespaced {
            let _ = self.events.send((item.clone(), owner.clone()));
            return Err(Error::NamespacedOwnerOfClusterScoped(item.to_string()));
        }
        let key = if owner_namespaced {
            namespaced
        } else {
            cluster
        };
        match api.get_metadata_opt(&owner.name).await? {
            Some(live) if live.metadata.uid.as_deref() == Some(owner.uid.as_str()) => {
                if live.metadata.deletion_timestamp.is_some()
                    && has_finalizer(&live.metadata, FOREGROUND)
                {
                    Ok(OwnerState::Waiting)
                } else {
                    Ok(OwnerState::Solid)
                }
            }
            _ => {
                self.graph().add_absent(key);
                Ok(OwnerState::Dangling)
            }
        }
    }

    /// Replaces `identity`'s owner references by `owners`, if its resource version is still
    /// `rv` (a conflict is retried with backoff by the caller).
    async fn patch_owners(
        &self,
        identity: &Identity,
        owners: &[&OwnerReference],
        rv: Option<String>,
    ) -> Result<(), Error> {
        let (api, _) = self.api_for(&identity.api_version, &identity.kind, &identity.namespace)?;
        // An empty list is removed (null), so the field disappears as it does upstream.
        let owners = if owners.is_empty() {
            serde_json::Value::Null
        } else {
            json!(owners)
        };
        let patch = json!({"metadata": {"ownerReferences": owners, "resourceVersion": rv, "uid": identity.uid}});
        match api
            .patch_metadata(
                &identity.name,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Deletes `identity` (preconditioned on its uid) with `policy`.
    async fn delete(&self, identity: &Identity, policy: PropagationPolicy) -> Result<(), Error> {
        let (api, _) = self.api_for(&identity.api_version, &identity.kind, &identity.namespace)?;
        let params = DeleteParams {
            propagation_policy: Some(policy),
            preconditions: Some(Preconditions {
                uid: Some(identity.uid.to_string()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        tracing::debug!(item = %identity, ?params.propagation_policy, "garbage collector: deleting");
        match api.delete(&identity.name, &params).await {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => {
                let _ = self.changes.send(Change::VirtualDeleted(identity.clone()));
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Removes `finalizer` from the live `identity`, retrying on conflicts.
    async fn remove_finalizer(&self, identity: &Identity, finalizer: &str) -> Result<(), Error> {
        let (api, _) = self.api_for(&identity.api_version, &identity.kind, &identity.namespace)?;
        loop {
            let Some(live) = api.get_metadata_opt(&identity.name).await? else {
                return Ok(());
            };
            if live.metadata.uid.as_deref() != Some(&*identity.uid) {
                return Ok(());
            }
            let finalizers = live.metadata.finalizers.clone().unwrap_or_default();
            if !finalizers.iter().any(|f| f == finalizer) {
                return Ok(());
            }
            let kept: Vec<&String> = finalizers.iter().filter(|f| *f != finalizer).collect();
            let kept = if kept.is_empty() {
                serde_json::Value::Null
            } else {
                json!(kept)
            };
            let patch = json!({"metadata": {"finalizers": kept, "resourceVersion": live.metadata.resource_version}});
            match api
                .patch_metadata(
                    &identity.name,
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
            {
                Ok(_) => return Ok(()),
                Err(e) if is_not_found(&e) => return Ok(()),
                Err(e) if is_conflict(&e) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }

    async fn attempt_to_orphan_worker(self: &Arc<Self>, uid: &str) {
        match self.orphan_dependents(uid).await {
            Ok(()) => self.attempt_to_orphan.forget(&uid.to_owned()),
            Err(e) => {
                tracing::debug!(%uid, error = %e, "garbage collector: orphaning will retry");
                self.attempt_to_orphan.add_rate_limited(uid.to_owned());
            }
        }
    }

    /// Removes the owner `uid` from each dependent's references, then the owner's `orphan`
    /// finalizer.
    async fn orphan_dependents(&self, uid: &str) -> Result<(), Error> {
        let Some(snapshot) = self.graph().snapshot(uid) else {
            return Ok(());
        };
        let results = futures::future::join_all(
            snapshot
                .dependents
                .iter()
                .map(|d| self.remove_owner_reference(&d.identity, uid)),
        )
        .await;
        for r in results {
            r?;
        }
        self.remove_finalizer(&snapshot.node.identity, ORPHAN).await
    }

    /// Removes the reference to `owner_uid` from the live `dependent`, retrying on conflicts.
    async fn remove_owner_reference(
        &self,
        dependent: &Identity,
        owner_uid: &str,
    ) -> Result<(), Error> {
        loop {
            let Some(live) = self.get_live(dependent).await? else {
                return Ok(());
            };
            let owners = live.metadata.owner_references.clone().unwrap_or_default();
            if !owners.iter().any(|o| o.uid == owner_uid) {
                return Ok(());
            }
            let kept: Vec<&OwnerReference> = owners.iter().filter(|o| o.uid != owner_uid).collect();
            match self
                .patch_owners(dependent, &kept, live.metadata.resource_version.clone())
                .await
            {
                Err(Error::Api(e)) if is_conflict(&e) => continue,
                other => return other,
            }
        }
    }
}

/// Reports an invalid owner reference as a Warning event on the dependent, as upstream:
/// reason `OwnerRefInvalidNamespace`.
async fn report_invalid_owner(client: &Client, dependent: &Identity, owner: &OwnerReference) {
    let owner_identity = Identity::of_owner(owner, &dependent.namespace);
    let message = format!(
        "ownerRef {owner_identity} does not exist in namespace {:?}",
        dependent.namespace
    );
    let namespace = if dependent.namespace.is_empty() {
        "default"
    } else {
        &*dependent.namespace
    };
    let now = k8s_openapi::jiff::Timestamp::now();
    let event = CoreEvent {
        metadata: ObjectMeta {
            name: Some(format!("{}.{:x}", dependent.name, now.as_nanosecond())),
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        },
        involved_object: ObjectReference {
            api_version: Some(dependent.api_version.to_string()),
            kind: Some(dependent.kind.to_string()),
            name: Some(dependent.name.to_string()),
            namespace: (!dependent.namespace.is_empty()).then(|| dependent.namespace.to_string()),
            uid: Some(dependent.uid.to_string()),
            ..ObjectReference::default()
        },
        reason: Some("OwnerRefInvalidNamespace".into()),
        message: Some(message),
        type_: Some("Warning".into()),
        source: Some(EventSource {
            component: Some(COMPONENT.into()),
            host: None,
        }),
        reporting_component: Some(COMPONENT.into()),
        reporting_instance: Some(String::new()),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        count: Some(1),
        ..CoreEvent::default()
    };
    let api: Api<CoreEvent> = Api::namespaced(client.clone(), namespace);
    if let Err(e) = api.create(&PostParams::default(), &event).await {
        tracing::warn!(error = %e, "garbage collector: could not record an event");
    }
}
