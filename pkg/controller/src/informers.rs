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
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::spare::{self, ReleaseSpare as _};

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
        let informer = self.informer(key, Reflected::<K>::boxed, without_managed_fields, api);
        let store = informer
            .reader
            .as_ref()
            .and_then(|reader| reader.downcast_ref::<Store<K>>())
            .expect("invariant: a typed informer keeps a reflector store")
            .clone();
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
        self.informer(key, ByName::<Meta>::boxed, trim_meta, api)
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

    /// The informer of `key`, started with `api` if none runs: `kept` makes what it keeps of
    /// the objects (and the reader typed callers get), `trim` trims each object as it arrives.
    fn informer<K>(
        &self,
        key: Key,
        kept: fn() -> Made<K>,
        trim: fn(&mut K),
        api: Api<K>,
    ) -> Arc<Informer<K>>
    where
        K: kube::Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
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
        let informer = Informer::new(kept());
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
                    Ok(event) => informer.dispatch(event.modify(trim)),
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

/// Trims a metadata-only object: its managed fields, and its `apiVersion` and `kind` (those of
/// the object, two strings each object would otherwise keep; subscribers know the resource
/// they asked for).
fn trim_meta(object: &mut Meta) {
    without_managed_fields(object);
    object.types = None;
}

/// One resource's watch, what it keeps of the objects, and its subscribers.
struct Informer<K: 'static> {
    /// The reflector store typed callers read (a `Store<K>`), for a typed informer.
    reader: Option<Box<dyn Any + Send + Sync>>,
    state: Mutex<State<K>>,
    task: Mutex<Option<tokio::task::AbortHandle>>,
}

struct State<K: 'static> {
    kept: Box<dyn Kept<K>>,
    subscribers: Vec<mpsc::UnboundedSender<Event<K>>>,
}

/// What an informer keeps, and the reader of it typed callers get (a `Store<K>`), if any.
type Made<K> = (Box<dyn Kept<K>>, Option<Box<dyn Any + Send + Sync>>);

/// What an informer keeps of its resource's objects: what a late subscriber is given.
trait Kept<K>: Send {
    /// Applies a watch event.
    fn apply(&mut self, event: &Event<K>);
    /// What a subscriber joining now is given first.
    fn replay(&self) -> Replay<K>;
}

/// What a subscriber joining is given before the watch's next events.
enum Replay<K> {
    /// No list has started: nothing.
    Nothing,
    /// A list is in progress: `Init` and the objects it has shown so far.
    Listing(Vec<K>),
    /// The objects as of now, as one complete list.
    Listed(Vec<K>),
}

/// A typed informer's objects, in the reflector store its callers read.
struct Reflected<K: Lookup + Clone + 'static>
where
    K::DynamicType: Eq + Hash + Clone,
{
    writer: Writer<K>,
    reader: Store<K>,
    /// The objects of the list in progress, if one is (kube's writer keeps its own buffer
    /// private).
    listing: Option<Vec<K>>,
    /// Whether a list has completed.
    synced: bool,
    /// The most objects the store held since its table was last built: its table's room.
    room: usize,
}

impl<K> Reflected<K>
where
    K: Lookup + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Default + Send + Sync,
{
    fn new() -> Self {
        let writer = Writer::default();
        Self {
            reader: writer.as_reader(),
            writer,
            listing: None,
            synced: false,
            room: 0,
        }
    }

    fn boxed() -> Made<K> {
        let kept = Self::new();
        let reader = kept.reader.clone();
        (Box::new(kept), Some(Box::new(reader)))
    }
}

impl<K> Kept<K> for Reflected<K>
where
    K: Lookup + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    fn apply(&mut self, event: &Event<K>) {
        self.writer.apply_watcher_event(event);
        match event {
            Event::Init => self.listing = Some(Vec::new()),
            Event::InitApply(object) => {
                if let Some(listing) = self.listing.as_mut() {
                    listing.push(object.clone());
                }
            }
            Event::InitDone => {
                self.listing = None;
                self.synced = true;
                self.room = self.reader.len();
            }
            Event::Apply(_) => self.room = self.room.max(self.reader.len()),
            Event::Delete(_) => {
                let len = self.reader.len();
                if self.listing.is_none() && spare::worth_shrinking(len, self.room) {
                    // kube's store keeps its table's room, and a relist builds a new table:
                    // replaying the objects as one gives the room of the deleted ones back.
                    let objects = self.reader.state();
                    self.writer.apply_watcher_event(&Event::Init);
                    for object in objects {
                        self.writer
                            .apply_watcher_event(&Event::InitApply((*object).clone()));
                    }
                    self.writer.apply_watcher_event(&Event::InitDone);
                    self.room = len;
                }
            }
        }
    }

    fn replay(&self) -> Replay<K> {
        match &self.listing {
            Some(listing) => Replay::Listing(listing.clone()),
            None if self.synced => {
                Replay::Listed(self.reader.state().iter().map(|o| (**o).clone()).collect())
            }
            None => Replay::Nothing,
        }
    }
}

/// A metadata informer's objects, by namespace and name, each kept as its JSON.
///
/// Nothing reads these objects but a late subscriber, which is rare (a controller starting
/// after the watch listed), so they are kept in their smallest form: an object's metadata as
/// JSON is about a third of its decoded size, and kube's reflector store would add a key per
/// object holding its own copy of the resource's five names, its resource version and uid.
/// A replay decodes them again.
struct ByName<K> {
    objects: HashMap<Box<str>, Box<[u8]>>,
    /// The objects of the list in progress, if one is; they replace `objects` once it ends.
    listing: Option<HashMap<Box<str>, Box<[u8]>>>,
    /// Whether a list has completed.
    synced: bool,
    _kind: std::marker::PhantomData<fn() -> K>,
}

impl<K> ByName<K>
where
    K: kube::Resource + Serialize + DeserializeOwned + Send + 'static,
{
    fn boxed() -> Made<K> {
        let kept = Self {
            objects: HashMap::new(),
            listing: None,
            synced: false,
            _kind: std::marker::PhantomData,
        };
        (Box::new(kept), None)
    }

    /// `namespace/name`, or `name` alone for a cluster-scoped object.
    fn key(object: &K) -> Box<str> {
        let meta = object.meta();
        let name = meta.name.as_deref().unwrap_or_default();
        match meta.namespace.as_deref() {
            Some(namespace) => format!("{namespace}/{name}").into(),
            None => name.into(),
        }
    }

    /// Keeps `object` in `objects` as its JSON.
    fn keep(objects: &mut HashMap<Box<str>, Box<[u8]>>, object: &K) {
        match serde_json::to_vec(object) {
            Ok(json) => {
                objects.insert(Self::key(object), json.into_boxed_slice());
            }
            // Not expected: the kinds kept here are plain structures with string keys.
            Err(error) => tracing::warn!(%error, "informer: an object could not be kept"),
        }
    }

    /// The objects of `objects`, decoded again.
    fn decoded(objects: &HashMap<Box<str>, Box<[u8]>>) -> Vec<K> {
        objects
            .values()
            .filter_map(|json| match serde_json::from_slice(json) {
                Ok(object) => Some(object),
                Err(error) => {
                    tracing::warn!(%error, "informer: a kept object could not be read back");
                    None
                }
            })
            .collect()
    }
}

impl<K> Kept<K> for ByName<K>
where
    K: kube::Resource + Serialize + DeserializeOwned + Send + 'static,
{
    fn apply(&mut self, event: &Event<K>) {
        match event {
            Event::Init => self.listing = Some(HashMap::new()),
            Event::InitApply(object) => {
                if let Some(listing) = self.listing.as_mut() {
                    Self::keep(listing, object);
                }
            }
            Event::InitDone => {
                self.objects = self.listing.take().unwrap_or_default();
                self.synced = true;
            }
            Event::Apply(object) => Self::keep(&mut self.objects, object),
            Event::Delete(object) => {
                self.objects.remove(&Self::key(object));
                self.objects.release_spare();
            }
        }
    }

    fn replay(&self) -> Replay<K> {
        match &self.listing {
            Some(listing) => Replay::Listing(Self::decoded(listing)),
            None if self.synced => Replay::Listed(Self::decoded(&self.objects)),
            None => Replay::Nothing,
        }
    }
}

impl<K: Clone + Send + 'static> Informer<K> {
    fn new((kept, reader): Made<K>) -> Arc<Self> {
        Arc::new(Informer {
            reader,
            state: Mutex::new(State {
                kept,
                subscribers: Vec::new(),
            }),
            task: Mutex::new(None),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<K>> {
        self.state
            .lock()
            .expect("invariant: the lock is never poisoned")
    }

    /// Applies `event` to what is kept and hands it to every subscriber.
    fn dispatch(&self, event: Event<K>) {
        let mut state = self.lock();
        state.kept.apply(&event);
        state
            .subscribers
            .retain(|subscriber| subscriber.unbounded_send(event.clone()).is_ok());
    }

    /// A new subscriber, given what a watch of its own would have shown so far.
    fn subscribe(self: Arc<Self>) -> Subscription<K> {
        let (tx, rx) = mpsc::unbounded();
        {
            let mut state = self.lock();
            let (objects, complete) = match state.kept.replay() {
                Replay::Nothing => (None, false),
                Replay::Listing(objects) => (Some(objects), false),
                Replay::Listed(objects) => (Some(objects), true),
            };
            if let Some(objects) = objects {
                let _ = tx.unbounded_send(Event::Init);
                for object in objects {
                    let _ = tx.unbounded_send(Event::InitApply(object));
                }
                if complete {
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

impl<K: 'static> Drop for Informer<K> {
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
        Informer::new(Reflected::<Namespace>::boxed())
    }

    fn reader(informer: &Informer<Namespace>) -> &Store<Namespace> {
        informer
            .reader
            .as_ref()
            .and_then(|reader| reader.downcast_ref())
            .expect("a typed informer's reader")
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
        assert_eq!(reader(&informer).state().len(), 2);
    }

    #[test]
    fn a_store_that_emptied_gives_back_its_room_and_keeps_its_objects() {
        let mut kept = Reflected::<Namespace>::new();
        kept.apply(&Event::Init);
        kept.apply(&Event::InitDone);
        for i in 0..4_000 {
            kept.apply(&Event::Apply(namespace(&format!("ns-{i}"))));
        }
        assert_eq!(kept.room, 4_000);
        for i in 10..4_000 {
            kept.apply(&Event::Delete(namespace(&format!("ns-{i}"))));
        }
        // The table was rebuilt when a quarter was left, and again below that.
        assert!(kept.room < 1_000, "{}", kept.room);
        let mut left: Vec<String> = kept
            .reader
            .state()
            .iter()
            .map(|o| o.metadata.name.clone().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, (0..10).map(|i| format!("ns-{i}")).collect::<Vec<_>>());
        // A later subscriber gets the objects left, as one list.
        let Replay::Listed(objects) = kept.replay() else {
            panic!("a listed store replays as a complete list");
        };
        assert_eq!(objects.len(), 10);
    }

    #[tokio::test]
    async fn subscribers_see_only_the_watch_events_not_the_store_rebuilding() {
        let informer = informer();
        let mut subscriber = informer.clone().subscribe();
        informer.dispatch(Event::Init);
        informer.dispatch(Event::InitDone);
        for i in 0..4_000 {
            informer.dispatch(Event::Apply(namespace(&format!("ns-{i}"))));
        }
        for i in 10..4_000 {
            informer.dispatch(Event::Delete(namespace(&format!("ns-{i}"))));
        }
        assert_eq!(drain(&mut subscriber).await.len(), 2 + 4_000 + 3_990);
        let mut late = informer.clone().subscribe();
        assert_eq!(drain(&mut late).await.len(), 12);
    }

    fn meta(namespace: &str, name: &str) -> Meta {
        PartialObjectMeta {
            types: None,
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(namespace.to_owned()),
                ..ObjectMeta::default()
            },
            _phantom: std::marker::PhantomData,
        }
    }

    fn replayed(kept: &dyn Kept<Meta>) -> (Vec<String>, &'static str) {
        let (objects, what) = match kept.replay() {
            Replay::Nothing => (Vec::new(), "nothing"),
            Replay::Listing(objects) => (objects, "listing"),
            Replay::Listed(objects) => (objects, "listed"),
        };
        let mut names: Vec<String> = objects
            .iter()
            .map(|o| {
                format!(
                    "{}/{}",
                    o.metadata.namespace.as_deref().unwrap_or_default(),
                    o.metadata.name.as_deref().unwrap_or_default()
                )
            })
            .collect();
        names.sort();
        (names, what)
    }

    #[test]
    fn metadata_kept_by_name_replays_what_a_watch_would_show() {
        let (mut kept, reader) = ByName::<Meta>::boxed();
        assert!(reader.is_none());
        assert_eq!(replayed(&*kept), (vec![], "nothing"));
        kept.apply(&Event::Init);
        kept.apply(&Event::InitApply(meta("a", "x")));
        assert_eq!(replayed(&*kept), (vec!["a/x".to_owned()], "listing"));
        kept.apply(&Event::InitApply(meta("b", "x")));
        kept.apply(&Event::InitDone);
        // The same name in two namespaces is two objects.
        kept.apply(&Event::Apply(meta("a", "y")));
        kept.apply(&Event::Apply(meta("a", "y")));
        kept.apply(&Event::Delete(meta("b", "x")));
        let expected = vec!["a/x".to_owned(), "a/y".to_owned()];
        assert_eq!(replayed(&*kept), (expected.clone(), "listed"));
        // During a relist the objects as of the last list stay; what the new list lacks is
        // gone once it ends.
        kept.apply(&Event::Init);
        kept.apply(&Event::InitApply(meta("a", "y")));
        assert_eq!(replayed(&*kept), (vec!["a/y".to_owned()], "listing"));
        kept.apply(&Event::InitDone);
        assert_eq!(replayed(&*kept), (vec!["a/y".to_owned()], "listed"));
    }

    #[test]
    fn metadata_objects_are_kept_without_their_types_and_managed_fields() {
        let mut object = meta("a", "x");
        object.types = Some(TypeMeta {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
        });
        object.metadata.managed_fields = Some(vec![Default::default()]);
        trim_meta(&mut object);
        assert!(object.types.is_none());
        assert!(object.metadata.managed_fields.is_none());
        assert_eq!(object.metadata.name.as_deref(), Some("x"));
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
