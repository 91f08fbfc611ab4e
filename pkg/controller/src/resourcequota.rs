//! The `resourcequota` controller: `status.hard` and `status.used` of every ResourceQuota, for
//! object-count quotas.
//!
//! A quota's `spec.hard` may count objects of a resource as `count/<resource>.<group>`
//! (`count/<resource>` for the core group), and, for the core resources that had object-count
//! quotas before those names existed, by the plain names `configmaps`, `secrets`,
//! `resourcequotas` and `replicationcontrollers` (upstream's legacy aliases; genplane serves
//! the first three; [`genplane_api::core::resourcequota::counted_resource`]). Compute-resource
//! names (`cpu`, `pods`, `services`, ...) name resources genplane does not serve and get no
//! usage, as upstream gives none for resources it cannot evaluate. A quota with scopes counts
//! nothing (every scope is about pods: upstream's object-count evaluator matches none).
//!
//! Counting is done from a metadata-only watch per counted resource (shared with the garbage
//! collector through [`SharedInformers`]), started the first time a
//! quota counts that resource (resources are resolved by discovery, so custom resources can be
//! counted too). As upstream's, the controller replenishes: deleting an object requeues the
//! quotas of its namespace that count its resource, while creates are charged by the
//! `ResourceQuota` admission plugin before they are stored (recounting on creates would race
//! with it: a count taken before an admitted object is stored would give its charge back).
//! For the same reason a sync for deletes recounts only the resources whose objects were
//! deleted: upstream recounts every resource of the quota then, so a delete of a ConfigMap
//! could give back the charge of a Lease created at the same moment, until the next full
//! resync. A quota is synced in full when it appears and when its `spec` changes, not when
//! only its `status` does (the admission plugin's charges); every quota is also recalculated
//! in full every resync period (upstream's `--resource-quota-sync-period`, 5 minutes by
//! default).
//!
//! As upstream: `status.hard` is set to `spec.hard`; `status.used` keeps earlier observations
//! for resources it cannot count now, is limited to the resources of `spec.hard`, and the
//! status is written only when it changes.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use futures::channel::mpsc;
use k8s_openapi::api::core::v1::{ResourceQuota, ResourceQuotaStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::ResourceExt as _;
use kube::api::{Api, ApiResource, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher::Event;
use kube::runtime::{PredicateConfig, WatchStreamExt as _};

use crate::discovery::discover;
use crate::informers::SharedInformers;
use crate::spare::ReleaseSpare as _;

/// Upstream's default `--resource-quota-sync-period`.
pub const DEFAULT_SYNC_PERIOD: Duration = Duration::from_secs(300);

/// How long a quota sync waits for a new resource's first list.
const FIRST_LIST_TIMEOUT: Duration = Duration::from_secs(30);

/// How often discovery may be run again to resolve a resource it did not know.
const DISCOVERY_INTERVAL: Duration = Duration::from_secs(30);

/// Errors of the resource-quota controller.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A request to the API server failed.
    #[error("syncing a resource quota: {0}")]
    Api(#[from] kube::Error),
    /// The first list of a counted resource did not finish in time.
    #[error("the objects of {0} have not been listed yet")]
    NotSynced(String),
}

/// A resource by group and plural name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupResource {
    /// The API group (`""` for core).
    pub group: String,
    /// The plural resource name.
    pub resource: String,
}

impl std::fmt::Display for GroupResource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

/// The resource whose objects the quota resource name `name` counts, if it is an object-count
/// name: `count/<resource>[.<group>]`, or a legacy core name such as `configmaps`.
pub fn counted_resource(name: &str) -> Option<GroupResource> {
    genplane_api::core::resourcequota::counted_resource(name)
        .map(|(group, resource)| GroupResource { group, resource })
}

/// Objects of one resource, by namespace, as a metadata watch reports them.
#[derive(Debug)]
struct Monitor {
    names: Mutex<HashMap<String, HashSet<String>>>,
    listed: tokio::sync::watch::Sender<bool>,
}

impl Monitor {
    fn names(&self) -> std::sync::MutexGuard<'_, HashMap<String, HashSet<String>>> {
        self.names
            .lock()
            .expect("invariant: the lock is never poisoned")
    }

    fn count(&self, namespace: &str) -> usize {
        self.names().get(namespace).map_or(0, HashSet::len)
    }
}

/// What resolves resources and counts objects.
struct Monitors {
    client: kube::Client,
    informers: SharedInformers,
    quotas: Store<ResourceQuota>,
    requeue: mpsc::UnboundedSender<ObjectRef<ResourceQuota>>,
    /// The resources whose objects were deleted since each requeued quota's last sync, by the
    /// quota's namespace and name: its next sync recounts only those.
    replenish: Mutex<HashMap<(String, String), HashSet<GroupResource>>>,
    inner: Mutex<MonitorsInner>,
}

#[derive(Default)]
struct MonitorsInner {
    discovered: HashMap<GroupResource, Option<ApiResource>>,
    last_discovery: Option<Instant>,
    running: HashMap<GroupResource, Arc<Monitor>>,
    /// The watch tasks: dropping the controller aborts them.
    tasks: tokio::task::JoinSet<()>,
}

impl Monitors {
    fn inner(&self) -> std::sync::MutexGuard<'_, MonitorsInner> {
        self.inner
            .lock()
            .expect("invariant: the lock is never poisoned")
    }

    fn replenish(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<(String, String), HashSet<GroupResource>>> {
        self.replenish
            .lock()
            .expect("invariant: the lock is never poisoned")
    }

    /// The resources a sync of the quota `namespace`/`name` must recount because objects of
    /// them were deleted; `None` when no delete asked for the sync (it recounts everything).
    fn take_replenished(&self, namespace: &str, name: &str) -> Option<HashSet<GroupResource>> {
        self.replenish()
            .remove(&(namespace.to_owned(), name.to_owned()))
    }

    /// The API resource of `gr` if it is served, namespaced and listable; runs discovery when
    /// `gr` is unknown and discovery has not run lately.
    async fn resolve(&self, gr: &GroupResource) -> Result<Option<ApiResource>, Error> {
        {
            let inner = self.inner();
            let fresh = inner
                .last_discovery
                .is_some_and(|at| at.elapsed() < DISCOVERY_INTERVAL);
            match inner.discovered.get(gr) {
                Some(found @ Some(_)) => return Ok(found.clone()),
                Some(None) if fresh => return Ok(None),
                None if fresh => return Ok(None),
                _ => {}
            }
        }
        let discovered = discover(&self.client).await?;
        let mut found = HashMap::new();
        for resource in discovered.preferred {
            let countable = resource.namespaced && resource.supports(&["list", "watch"]);
            let key = GroupResource {
                group: resource.api.group.clone(),
                resource: resource.api.plural.clone(),
            };
            found.insert(key, countable.then_some(resource.api));
        }
        let mut inner = self.inner();
        inner.discovered = found;
        inner.last_discovery = Some(Instant::now());
        Ok(inner.discovered.get(gr).cloned().flatten())
    }

    /// The number of objects of `gr` in `namespace`, or `None` when `gr` cannot be counted.
    async fn count(
        self: &Arc<Self>,
        gr: &GroupResource,
        namespace: &str,
    ) -> Result<Option<usize>, Error> {
        let existing = self.inner().running.get(gr).cloned();
        let monitor = match existing {
            Some(monitor) => monitor,
            None => {
                let Some(resource) = self.resolve(gr).await? else {
                    return Ok(None);
                };
                self.start(gr, resource)
            }
        };
        let mut listed = monitor.listed.subscribe();
        match tokio::time::timeout(FIRST_LIST_TIMEOUT, listed.wait_for(|l| *l)).await {
            Ok(Ok(_)) => Ok(Some(monitor.count(namespace))),
            _ => Err(Error::NotSynced(gr.to_string())),
        }
    }

    /// Starts watching `gr` (or returns the watch started meanwhile).
    fn start(self: &Arc<Self>, gr: &GroupResource, resource: ApiResource) -> Arc<Monitor> {
        let mut inner = self.inner();
        if let Some(monitor) = inner.running.get(gr) {
            return monitor.clone();
        }
        let monitor = Arc::new(Monitor {
            names: Mutex::default(),
            listed: tokio::sync::watch::channel(false).0,
        });
        inner.running.insert(gr.clone(), monitor.clone());
        tracing::info!(resource = %gr, "resourcequota: counting objects");
        let this = Arc::downgrade(self);
        let (gr, task_monitor) = (gr.clone(), monitor.clone());
        let mut events = self.informers.metadata(&resource);
        inner.tasks.spawn(async move {
            let mut buffer: HashMap<String, HashSet<String>> = HashMap::new();
            while let Some(event) = events.next().await {
                let Some(monitors) = this.upgrade() else {
                    return;
                };
                match event {
                    Event::Init => buffer.clear(),
                    Event::InitApply(object) => {
                        buffer
                            .entry(object.namespace().unwrap_or_default())
                            .or_default()
                            .insert(object.name_any());
                    }
                    Event::InitDone => {
                        let old = std::mem::replace(
                            &mut *task_monitor.names(),
                            std::mem::take(&mut buffer),
                        );
                        task_monitor.listed.send_replace(true);
                        // A relist may have missed creates and deletes: requeue where counts changed.
                        let new = task_monitor.names().clone();
                        let changed: HashSet<&String> = old
                            .keys()
                            .chain(new.keys())
                            .filter(|ns| {
                                old.get(*ns).map(HashSet::len) != new.get(*ns).map(HashSet::len)
                            })
                            .collect();
                        for ns in changed {
                            monitors.requeue_namespace(ns, &gr);
                        }
                    }
                    Event::Apply(object) => {
                        // Admission charged the create: only the count is kept.
                        task_monitor
                            .names()
                            .entry(object.namespace().unwrap_or_default())
                            .or_default()
                            .insert(object.name_any());
                    }
                    Event::Delete(object) => {
                        let ns = object.namespace().unwrap_or_default();
                        let removed = {
                            let mut all = task_monitor.names();
                            match all.get_mut(&ns) {
                                Some(names) => {
                                    let removed = names.remove(&object.name_any());
                                    if names.is_empty() {
                                        all.remove(&ns);
                                        all.release_spare();
                                    } else {
                                        names.release_spare();
                                    }
                                    removed
                                }
                                None => false,
                            }
                        };
                        if removed {
                            monitors.requeue_namespace(&ns, &gr);
                        }
                    }
                }
            }
        });
        monitor
    }

    /// Requeues the quotas of `namespace` that count `gr`.
    fn requeue_namespace(&self, namespace: &str, gr: &GroupResource) {
        for quota in self.quotas.state() {
            if quota.namespace().as_deref() != Some(namespace) {
                continue;
            }
            let counts = quota
                .spec
                .as_ref()
                .and_then(|s| s.hard.as_ref())
                .is_some_and(|hard| {
                    hard.keys()
                        .any(|k| counted_resource(k).as_ref() == Some(gr))
                });
            if counts {
                self.replenish()
                    .entry((namespace.to_owned(), quota.name_any()))
                    .or_default()
                    .insert(gr.clone());
                let _ = self.requeue.unbounded_send(ObjectRef::from_obj(&*quota));
            }
        }
    }
}

struct Context {
    monitors: Arc<Monitors>,
    client: kube::Client,
    resync: Duration,
}

/// Runs the controller, recalculating every quota in full every `resync`, on the shared
/// watches of `informers`, until its watches end (they do not on their own).
pub async fn run(
    client: kube::Client,
    informers: SharedInformers,
    resync: Duration,
) -> Result<(), Error> {
    let (quotas, quota_events) = informers.typed::<ResourceQuota>();
    // Synced when a quota appears or its spec changes, or when its status.hard is not its
    // spec.hard yet; not for the admission plugin's charges to status.used.
    let changes = quota_events
        .results()
        .applied_objects()
        .predicate_filter(sync_trigger, PredicateConfig::default());
    let controller = Controller::for_stream(changes, quotas);
    let (requeue, requeued) = mpsc::unbounded();
    let context = Arc::new(Context {
        monitors: Arc::new(Monitors {
            client: client.clone(),
            informers,
            quotas: controller.store(),
            requeue,
            replenish: Mutex::default(),
            inner: Mutex::default(),
        }),
        client,
        resync,
    });
    controller
        .reconcile_on(requeued)
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "resourcequota sync");
            }
        })
        .await;
    Ok(())
}

/// What of a quota, when it changes, asks for a sync: its spec, and whether its `status.hard`
/// is its `spec.hard`.
fn sync_trigger(quota: &ResourceQuota) -> Option<u64> {
    use std::hash::{Hash as _, Hasher as _};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(&quota.spec)
        .unwrap_or_default()
        .hash(&mut hasher);
    let hard = quota.spec.as_ref().and_then(|s| s.hard.as_ref());
    (quota.status.as_ref().and_then(|s| s.hard.as_ref()) == hard).hash(&mut hasher);
    Some(hasher.finish())
}

/// The status a quota should have, given its current status and the counts found (`None`
/// for resources that cannot be counted now).
fn desired_status(
    quota: &ResourceQuota,
    counts: &BTreeMap<String, Option<usize>>,
) -> ResourceQuotaStatus {
    let hard = quota
        .spec
        .as_ref()
        .and_then(|s| s.hard.clone())
        .unwrap_or_default();
    let mut used = quota
        .status
        .as_ref()
        .and_then(|s| s.used.clone())
        .unwrap_or_default();
    for (name, count) in counts {
        if let Some(count) = count {
            used.insert(name.clone(), Quantity(count.to_string()));
        }
    }
    used.retain(|name, _| hard.contains_key(name));
    ResourceQuotaStatus {
        hard: Some(hard),
        used: Some(used),
    }
}

async fn reconcile(quota: Arc<ResourceQuota>, context: Arc<Context>) -> Result<Action, Error> {
    let (Some(namespace), name) = (quota.namespace(), quota.name_any()) else {
        return Ok(Action::await_change());
    };
    // A sync for deletes recounts what was deleted, and what has no count yet; a quota that
    // appeared, changed its spec or is due for its resync recounts everything. A sync that
    // fails leaves what it took for its retry.
    let replenished = context.monitors.take_replenished(&namespace, &name);
    let synced = sync(&quota, &context, &namespace, &name, replenished.as_ref()).await;
    if synced.is_err()
        && let Some(deleted) = replenished
    {
        context
            .monitors
            .replenish()
            .entry((namespace, name))
            .or_default()
            .extend(deleted);
    }
    synced
}

/// Writes the status of `quota`, recounting everything or, for a sync for deletes, the
/// `replenished` resources (and those without a count yet).
async fn sync(
    quota: &ResourceQuota,
    context: &Context,
    namespace: &str,
    name: &str,
    replenished: Option<&HashSet<GroupResource>>,
) -> Result<Action, Error> {
    let hard = quota
        .spec
        .as_ref()
        .and_then(|s| s.hard.clone())
        .unwrap_or_default();
    let scoped = quota.spec.as_ref().is_some_and(|s| {
        s.scopes.as_ref().is_some_and(|v| !v.is_empty())
            || s.scope_selector
                .as_ref()
                .and_then(|s| s.match_expressions.as_ref())
                .is_some_and(|v| !v.is_empty())
    });
    let in_step = quota.status.as_ref().and_then(|s| s.hard.as_ref()) == Some(&hard);
    let used = quota.status.as_ref().and_then(|s| s.used.as_ref());
    let mut counts = BTreeMap::new();
    for key in hard.keys() {
        if let Some(gr) = counted_resource(key) {
            let recount = match replenished {
                Some(deleted) if in_step => {
                    deleted.contains(&gr) || used.is_none_or(|u| !u.contains_key(key))
                }
                _ => true,
            };
            if !recount {
                continue;
            }
            let count = if scoped {
                Some(0)
            } else {
                context.monitors.count(&gr, namespace).await?
            };
            counts.insert(key.clone(), count);
        }
    }
    let want = desired_status(quota, &counts);
    let status = quota.status.clone().unwrap_or_default();
    let dirty = status.hard.is_none() || status.used.is_none() || status != want;
    if dirty {
        let mut updated = quota.clone();
        updated.status = Some(want);
        match Api::<ResourceQuota>::namespaced(context.client.clone(), namespace)
            .replace_status(name, &PostParams::default(), &updated)
            .await
        {
            Ok(_) => tracing::debug!(%namespace, quota = %name, "updated quota status"),
            Err(kube::Error::Api(status)) if status.code == 404 => {
                return Ok(Action::await_change());
            }
            Err(error) => return Err(error.into()),
        }
    }
    Ok(Action::requeue(context.resync))
}

fn error_policy(_: Arc<ResourceQuota>, error: &Error, _: Arc<Context>) -> Action {
    tracing::warn!(%error, "resourcequota sync failed");
    Action::requeue(Duration::from_secs(1))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ResourceQuotaSpec;

    use super::*;

    fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
            .collect()
    }

    #[test]
    fn used_follows_hard_and_keeps_what_cannot_be_counted() {
        let quota = ResourceQuota {
            spec: Some(ResourceQuotaSpec {
                hard: Some(quantities(&[
                    ("configmaps", "10"),
                    ("count/widgets.example.com", "5"),
                    ("cpu", "2"),
                ])),
                ..ResourceQuotaSpec::default()
            }),
            status: Some(ResourceQuotaStatus {
                hard: None,
                used: Some(quantities(&[
                    ("configmaps", "1"),
                    ("count/widgets.example.com", "3"),
                    ("secrets", "4"),
                ])),
            }),
            ..ResourceQuota::default()
        };
        let counts = BTreeMap::from([
            ("configmaps".to_owned(), Some(2)),
            ("count/widgets.example.com".to_owned(), None),
        ]);
        let status = desired_status(&quota, &counts);
        assert_eq!(status.hard, quota.spec.as_ref().unwrap().hard);
        assert_eq!(
            status.used,
            Some(quantities(&[
                ("configmaps", "2"),
                ("count/widgets.example.com", "3"),
            ]))
        );
    }
}
