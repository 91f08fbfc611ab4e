//! Shared watches: one watch per resource against the API server, however many controllers
//! follow that resource (client-go's shared informer factory).
//!
//! [`SharedInformers`] lives in the [`ControllerContext`](crate::descriptors::ControllerContext)
//! every controller is given. A controller asks it for a resource:
//!
//! - [`SharedInformers::typed`] for a kind of `k8s-openapi` (namespaces, cluster roles,
//!   resource quotas): a [`Store`] of the objects and a [`Subscription`] to their events;
//! - [`SharedInformers::metadata`] for any resource discovery lists (the garbage collector's
//!   and the resource-quota controller's per-resource watches, custom resources included): a
//!   [`Subscription`] to metadata-only events. A resource that also has a typed informer here
//!   (see [`SharedInformers::metadata`]) is served from that informer's one watch, the objects
//!   reduced to their metadata, as upstream's garbage collector reuses the typed informers.
//!
//! Objects are kept and handed out without their `managedFields`, which no controller here
//! reads: kube-controller-manager trims its informers the same way.
//!
//! The first subscriber of a resource starts its watch (a `watcher` with the default backoff,
//! so failures are retried, never returned); the watch stops once the last [`Subscription`] of
//! it is dropped (a controller stopped, or the garbage collector dropping a resource that is no
//! longer served). A subscriber that comes after the first list gets the current objects first,
//! as one initial list (`Init`, `InitApply` for each, `InitDone`), then every later event, so a
//! late subscriber sees exactly what a watch of its own would have shown. Events are delivered
//! to each subscriber through its own unbounded buffer: a slow controller never holds up the
//! others (client-go's listeners are unbounded too).
//!
//! [`SharedInformers::watches_started`] counts the watches this set has started, for tests and
//! for comparing with the API server's `apiserver_registered_watchers`.

use std::any::Any;
use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};

use futures::channel::mpsc;
use futures::stream::{BoxStream, Stream, StreamExt as _};
use k8s_openapi::api::core::v1::{Namespace, ResourceQuota};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, ApiResource, DynamicObject, PartialObjectMeta};
use kube::core::TypeMeta;
use kube::runtime::reflector::{Lookup, Store, store::Writer};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{WatchStreamExt as _, watcher as watch};
use serde::de::DeserializeOwned;

use crate::spare;

/// An object reduced to its metadata, as metadata-only watches return it.
pub type Meta = PartialObjectMeta<DynamicObject>;

/// Which watch of a resource: `(apiVersion, plural, metadata-only)`.
type Key = (String, String, bool);

/// The informers of one controller context; cheap to clone (clones share the watches).
#[derive(Clone)]
pub struct SharedInformers {
    inner: Arc<Inner>,
}

struct Inner {
    client: kube::Client,
    informers: Mutex<HashMap<Key, Weak<dyn Any + Send + Sync>>>,
    started: AtomicU64,
}

impl Debug for SharedInformers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedInformers")
            .field("watches_started", &self.watches_started())
            .finish_non_exhaustive()
    }
}

impl SharedInformers {
    /// No watches yet; they start as controllers subscribe.
    pub fn new(client: kube::Client) -> Self {
        Self {
            inner: Arc::new(Inner {
                client,
                informers: Mutex::default(),
                started: AtomicU64::new(0),
            }),
        }
    }

    /// How many watches this set has started so far (a watch restarted after its last
    /// subscriber left counts again).
    pub fn watches_started(&self) -> u64 {
        self.inner.started.load(Ordering::Relaxed)
    }

    /// The store and a subscription of kind `K`, every object of the cluster.
    pub fn typed<K>(&self) -> (Store<K>, Subscription<K>)
    where
        K: kube::Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync,
        K: 'static,
    {
        let key = (
            K::api_version(&()).into_owned(),
            K::plural(&()).into_owned(),
            false,
        );
        let api = Api::<K>::all(self.inner.client.clone());
        let informer = self.informer(key, Writer::default, api);
        let store = informer.reader.clone();
        (store, informer.subscribe())
    }

    /// A metadata-only subscription of `resource`, every object of the cluster.
    ///
    /// Namespaces, cluster roles and resource quotas (the kinds controllers here follow typed)
    /// are served from their typed informer, so that each has one watch.
    pub fn metadata(&self, resource: &ApiResource) -> Subscription<Meta> {
        if let Some(subscription) = self
            .typed_view::<Namespace>(resource)
            .or_else(|| self.typed_view::<ClusterRole>(resource))
            .or_else(|| self.typed_view::<ResourceQuota>(resource))
        {
            return subscription;
        }
        let key = (resource.api_version.clone(), resource.plural.clone(), true);
        let api = Api::<Meta>::all_with(self.inner.client.clone(), resource);
        let writer_resource = resource.clone();
        self.informer(key, move || Writer::new(writer_resource), api)
            .subscribe()
    }

    /// The typed informer of `K` reduced to metadata, if `resource` is `K`'s.
    fn typed_view<K>(&self, resource: &ApiResource) -> Option<Subscription<Meta>>
    where
        K: kube::Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync,
        K: 'static,
    {
        if resource.api_version != K::api_version(&()) || resource.plural != K::plural(&()) {
            return None;
        }
        let (_, subscription) = self.typed::<K>();
        let types = TypeMeta {
            api_version: resource.api_version.clone(),
            kind: resource.kind.clone(),
        };
        Some(
            subscription.map_objects(move |object: K| PartialObjectMeta {
                types: Some(types.clone()),
                metadata: object.meta().clone(),
                _phantom: std::marker::PhantomData,
            }),
        )
    }

    /// The informer of `key`, started with `api` if none runs.
    fn informer<K>(
        &self,
        key: Key,
        writer: impl FnOnce() -> Writer<K>,
        api: Api<K>,
    ) -> Arc<Informer<K>>
    where
        K: kube::Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        <K as Lookup>::DynamicType: Clone + Eq + Hash + Send + Sync,
    {
        let mut informers = self
            .inner
            .informers
            .lock()
            .expect("invariant: the lock is never poisoned");
        if let Some(existing) = informers.get(&key).and_then(Weak::upgrade)
            && let Ok(informer) = existing.downcast::<Informer<K>>()
        {
            return informer;
        }
        let writer = writer();
        let informer = Arc::new(Informer {
            reader: writer.as_reader(),
            state: Mutex::new(State {
                writer,
                listing: None,
                synced: false,
                room: 0,
                subscribers: Vec::new(),
            }),
            task: Mutex::new(None),
        });
        let weak = Arc::downgrade(&informer);
        let (version, plural, metadata) = key.clone();
        let task = tokio::spawn(async move {
            tracing::debug!(%version, %plural, metadata, "starting a shared watch");
            let mut events = watch(api, watcher::Config::default())
                .default_backoff()
                .boxed();
            while let Some(event) = events.next().await {
                let Some(informer) = weak.upgrade() else {
                    return;
                };
                match event {
                    Ok(event) => informer.dispatch(event.modify(without_managed_fields)),
                    Err(error) => {
                        tracing::debug!(%version, %plural, %error, "shared watch");
                    }
                }
            }
        });
        *informer
            .task
            .lock()
            .expect("invariant: the lock is never poisoned") = Some(task.abort_handle());
        self.inner.started.fetch_add(1, Ordering::Relaxed);
        let erased: Arc<dyn Any + Send + Sync> = informer.clone();
        informers.retain(|_, weak| weak.strong_count() > 0);
        informers.insert(key, Arc::downgrade(&erased));
        informer
    }
}

/// Drops an object's managed fields as it arrives: no controller here reads them, and kept in
/// the store and handed to every subscriber they were the largest part of each object's
/// metadata (a map of maps per field manager). kube-controller-manager trims its informers'
/// objects the same way.
fn without_managed_fields<K: kube::Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

/// One resource's watch, its store and its subscribers.
struct Informer<K: Lookup + Clone + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    reader: Store<K>,
    state: Mutex<State<K>>,
    task: Mutex<Option<tokio::task::AbortHandle>>,
}

struct State<K: Lookup + Clone + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    writer: Writer<K>,
    /// The objects of the list in progress, if one is.
    listing: Option<Vec<K>>,
    /// Whether a list has completed.
    synced: bool,
    /// The most objects the store held since its table was last built: its table's room.
    room: usize,
    subscribers: Vec<mpsc::UnboundedSender<Event<K>>>,
}

impl<K> Informer<K>
where
    K: Lookup + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    fn lock(&self) -> std::sync::MutexGuard<'_, State<K>> {
        self.state
            .lock()
            .expect("invariant: the lock is never poisoned")
    }

    /// Applies `event` to the store and hands it to every subscriber.
    fn dispatch(&self, event: Event<K>) {
        let mut state = self.lock();
        state.writer.apply_watcher_event(&event);
        match &event {
            Event::Init => state.listing = Some(Vec::new()),
            Event::InitApply(object) => {
                if let Some(listing) = state.listing.as_mut() {
                    listing.push(object.clone());
                }
            }
            Event::InitDone => {
                state.listing = None;
                state.synced = true;
                state.room = self.reader.len();
            }
            Event::Apply(_) => state.room = state.room.max(self.reader.len()),
            Event::Delete(_) => {
                let len = self.reader.len();
                if state.listing.is_none() && spare::worth_shrinking(len, state.room) {
                    // kube's store keeps its table's room, and a relist builds a new table:
                    // replaying the objects as one gives the room of the deleted ones back.
                    let objects = self.reader.state();
                    state.writer.apply_watcher_event(&Event::Init);
                    for object in objects {
                        state
                            .writer
                            .apply_watcher_event(&Event::InitApply((*object).clone()));
                    }
                    state.writer.apply_watcher_event(&Event::InitDone);
                    state.room = len;
                }
            }
        }
        state
            .subscribers
            .retain(|subscriber| subscriber.unbounded_send(event.clone()).is_ok());
    }

    /// A new subscriber, given what a watch of its own would have shown so far.
    fn subscribe(self: Arc<Self>) -> Subscription<K> {
        let (tx, rx) = mpsc::unbounded();
        {
            let mut state = self.lock();
            let replay: Option<Vec<K>> = match &state.listing {
                Some(listing) => Some(listing.clone()),
                None if state.synced => {
                    Some(self.reader.state().iter().map(|o| (**o).clone()).collect())
                }
                None => None,
            };
            if let Some(objects) = replay {
                let _ = tx.unbounded_send(Event::Init);
                for object in objects {
                    let _ = tx.unbounded_send(Event::InitApply(object));
                }
                if state.listing.is_none() {
                    let _ = tx.unbounded_send(Event::InitDone);
                }
            }
            state.subscribers.push(tx);
        }
        Subscription {
            events: rx.boxed(),
            _informer: self,
        }
    }
}

impl<K: Lookup + Clone + 'static> Drop for Informer<K>
where
    K::DynamicType: Eq + Hash + Clone,
{
    fn drop(&mut self) {
        if let Ok(mut task) = self.task.lock()
            && let Some(task) = task.take()
        {
            task.abort();
        }
    }
}

/// The events of one shared watch for one subscriber: a stream of [`watcher::Event`]s that
/// never fails (the watch retries on its own). Dropping the last subscription of a resource
/// stops its watch.
pub struct Subscription<K> {
    events: BoxStream<'static, Event<K>>,
    _informer: Arc<dyn Any + Send + Sync>,
}

impl<K> Debug for Subscription<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription").finish_non_exhaustive()
    }
}

impl<K: Send + 'static> Subscription<K> {
    /// The events as a watcher's results, for kube-runtime's `WatchStreamExt` (`reflect`,
    /// `touched_objects`, ...) and `Controller::for_stream`.
    pub fn results(self) -> impl Stream<Item = Result<Event<K>, watcher::Error>> + Send {
        self.map(Ok)
    }

    /// The same events with every object mapped by `f`.
    pub fn map_objects<T: Send + 'static>(
        self,
        f: impl Fn(K) -> T + Send + 'static,
    ) -> Subscription<T> {
        let events = self
            .events
            .map(move |event| match event {
                Event::Apply(o) => Event::Apply(f(o)),
                Event::Delete(o) => Event::Delete(f(o)),
                Event::Init => Event::Init,
                Event::InitApply(o) => Event::InitApply(f(o)),
                Event::InitDone => Event::InitDone,
            })
            .boxed();
        Subscription {
            events,
            _informer: self._informer,
        }
    }
}

impl<K: Send + 'static> Subscription<K> {
    /// The events of the objects `keep` accepts only (a client-side selector): what a watch
    /// with the equivalent selector would have shown.
    pub fn filter_objects(self, keep: impl Fn(&K) -> bool + Send + 'static) -> Subscription<K> {
        let events = self
            .events
            .filter(move |event| {
                let kept = match event {
                    Event::Apply(o) | Event::Delete(o) | Event::InitApply(o) => keep(o),
                    Event::Init | Event::InitDone => true,
                };
                futures::future::ready(kept)
            })
            .boxed();
        Subscription {
            events,
            _informer: self._informer,
        }
    }
}

impl<K> Stream for Subscription<K> {
    type Item = Event<K>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.events.poll_next_unpin(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn namespace(name: &str) -> Namespace {
        Namespace {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        }
    }

    fn informer() -> Arc<Informer<Namespace>> {
        let writer = Writer::default();
        Arc::new(Informer {
            reader: writer.as_reader(),
            state: Mutex::new(State {
                writer,
                listing: None,
                synced: false,
                room: 0,
                subscribers: Vec::new(),
            }),
            task: Mutex::new(None),
        })
    }

    fn names(events: &[Event<Namespace>]) -> Vec<String> {
        events
            .iter()
            .map(|e| match e {
                Event::Init => "init".to_owned(),
                Event::InitApply(o) => format!("list {}", o.metadata.name.as_deref().unwrap_or("")),
                Event::InitDone => "done".to_owned(),
                Event::Apply(o) => format!("apply {}", o.metadata.name.as_deref().unwrap_or("")),
                Event::Delete(o) => format!("delete {}", o.metadata.name.as_deref().unwrap_or("")),
            })
            .collect()
    }

    async fn drain(subscription: &mut Subscription<Namespace>) -> Vec<Event<Namespace>> {
        let mut out = Vec::new();
        while let Some(Some(event)) = futures::FutureExt::now_or_never(subscription.next()) {
            out.push(event);
        }
        out
    }

    #[tokio::test]
    async fn every_subscriber_sees_what_its_own_watch_would_have_shown() {
        let informer = informer();
        let mut early = informer.clone().subscribe();
        informer.dispatch(Event::Init);
        informer.dispatch(Event::InitApply(namespace("a")));
        // Joins during the list: gets the list so far, then the rest.
        let mut during = informer.clone().subscribe();
        informer.dispatch(Event::InitApply(namespace("b")));
        informer.dispatch(Event::InitDone);
        informer.dispatch(Event::Apply(namespace("c")));
        // Joins after: gets the current objects as one list.
        let mut late = informer.clone().subscribe();
        informer.dispatch(Event::Delete(namespace("a")));

        assert_eq!(
            names(&drain(&mut early).await),
            ["init", "list a", "list b", "done", "apply c", "delete a"]
        );
        assert_eq!(
            names(&drain(&mut during).await),
            ["init", "list a", "list b", "done", "apply c", "delete a"]
        );
        let mut late_events = names(&drain(&mut late).await);
        late_events[1..4].sort();
        assert_eq!(
            late_events,
            ["init", "list a", "list b", "list c", "done", "delete a"]
        );
        assert_eq!(informer.reader.state().len(), 2);
    }

    #[tokio::test]
    async fn a_store_that_emptied_gives_back_its_room_and_keeps_its_objects() {
        let informer = informer();
        let mut subscriber = informer.clone().subscribe();
        informer.dispatch(Event::Init);
        informer.dispatch(Event::InitDone);
        for i in 0..4_000 {
            informer.dispatch(Event::Apply(namespace(&format!("ns-{i}"))));
        }
        assert_eq!(informer.lock().room, 4_000);
        for i in 10..4_000 {
            informer.dispatch(Event::Delete(namespace(&format!("ns-{i}"))));
        }
        // The table was rebuilt when a quarter was left, and again below that.
        assert!(informer.lock().room < 1_000, "{}", informer.lock().room);
        let mut left: Vec<String> = informer
            .reader
            .state()
            .iter()
            .map(|o| o.metadata.name.clone().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, (0..10).map(|i| format!("ns-{i}")).collect::<Vec<_>>());
        // Subscribers saw only the watch's events, not the rebuilding.
        assert_eq!(drain(&mut subscriber).await.len(), 2 + 4_000 + 3_990);
        // A later subscriber gets the objects left.
        let mut late = informer.clone().subscribe();
        assert_eq!(drain(&mut late).await.len(), 12);
    }

    #[tokio::test]
    async fn a_dropped_subscriber_is_forgotten_and_the_others_still_get_events() {
        let informer = informer();
        let gone = informer.clone().subscribe();
        let mut kept = informer.clone().subscribe();
        drop(gone);
        informer.dispatch(Event::Apply(namespace("a")));
        assert_eq!(informer.lock().subscribers.len(), 1);
        assert_eq!(names(&drain(&mut kept).await), ["apply a"]);
    }

    /// A client of a loopback port nothing listens on: watches start, fail and retry.
    fn unreachable_client() -> kube::Client {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        kube::Client::try_from(config).unwrap()
    }

    #[tokio::test]
    async fn one_watch_per_resource_however_many_subscribe() {
        let informers = SharedInformers::new(unreachable_client());
        let (_, a) = informers.typed::<Namespace>();
        let (_, b) = informers.typed::<Namespace>();
        // The garbage collector's metadata watch of namespaces is the typed one.
        let c = informers.metadata(&ApiResource::erase::<Namespace>(&()));
        assert_eq!(informers.watches_started(), 1);
        let config_maps = ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
        let d = informers.metadata(&config_maps);
        let e = informers.metadata(&config_maps);
        assert_eq!(informers.watches_started(), 2);
        // The last subscriber gone, the watch stops; a new subscriber starts it again.
        drop((d, e));
        let _f = informers.metadata(&config_maps);
        assert_eq!(informers.watches_started(), 3);
        drop((a, b, c));
    }

    #[test]
    fn typed_kinds_are_recognised_by_their_metadata_resource() {
        let namespaces = ApiResource::erase::<Namespace>(&());
        assert_eq!(namespaces.api_version, "v1");
        assert_eq!(namespaces.plural, "namespaces");
        let roles = ApiResource::erase::<ClusterRole>(&());
        assert_eq!(roles.api_version, "rbac.authorization.k8s.io/v1");
    }
}
