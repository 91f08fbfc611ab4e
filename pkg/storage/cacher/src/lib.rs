//! The watch cache: a decorator over any [`Storage`] that serves watches and reads of one
//! resource prefix from memory, and itself honours the storage contract.
//!
//! A [`Cacher`] keeps, for its prefix, the current keys and a window of recent events
//! ([`EventRing`]), fed by one list and one watch of the underlying store (the *reflector*).
//!
//! - **Watches** under the prefix are served from the window: every watcher reads the same
//!   shared events (values are reference-counted bytes, never copied per watcher), a few at a
//!   time and only as fast as its reader takes them, through a small buffer
//!   ([`CacherConfig::watch_buffer`]). A watch from a revision older than the window continues
//!   on the underlying store, which replays its history or fails as compacted, and returns to
//!   the window once it has caught up. (kube-apiserver answers "too old resource version" as
//!   soon as its window does not cover a revision, which makes clients relist everything;
//!   replaying from the store avoids that relist while the store still has the history.)
//! - A watcher whose reader falls behind the window is **ended** with [`Error::TooSlow`], as
//!   kube-apiserver ends unresponsive watchers: a reader that does not read costs the cache
//!   nothing but its place in the shared window until then, and nothing at all after. Its
//!   client watches again from the last revision it received (from the store, as above). Only
//!   watchers that lost their place because the cache listed again continue on the store.
//! - **Watches with the current state** ([`Storage::watch_state`]) start with the objects the
//!   cache holds: each object is held as one shared event (with its [`Memo`], so that what the
//!   layers above derive from it — decoded, encoded — is done once for every watcher), and a
//!   watcher holds only references to them, handed out as its reader takes them.
//! - **Consistent lists** (no revision): the cache reads the store's current revision, waits
//!   (up to [`CacherConfig::consistency_timeout`]) until it has caught up to it, asking the
//!   reflector's watch for progress so that a quiet prefix catches up too, and answers from
//!   memory (KEP-2340's consistent read from cache). When it cannot confirm it caught up in
//!   time, the store answers instead.
//! - **Lists at the cache's revision** are answered from memory; lists at other revisions (such
//!   as later pages of a paginated list) and gets read the store, which answers them exactly.
//! - [`Cacher::list_cached`] answers from memory without waiting (kube's `resourceVersion="0"`).
//! - **History is bounded** by the window's size and by the store's compactions: events at or
//!   before [`Storage::compacted_revision`] are forgotten, and a watch or read at an older
//!   revision goes to the store, so every cache over one store (every apiserver sharing an
//!   etcd) answers an old revision the same way: as the store does, with
//!   [`Error::Compacted`] once it is compacted.
//! - Writes go straight to the store.
//!
//! Keys outside the prefix are passed through to the store untouched.

#![warn(missing_docs)]

mod reflector;
mod watchers;

use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

#[cfg(doc)]
use genplane_storage::Memo;
use genplane_storage::ring::EventRing;
use genplane_storage::{
    Bytes, DeleteRequest, Deleted, Error, Event, KeyValue, ListRequest, ListResponse, Result,
    Revision, StateRead, Storage, Watch, validate_key, validate_list,
};
use tokio::sync::{Notify, watch};

/// How long a consistent read waits for a cache to catch up when its store's watch cannot prove
/// progress ([`Storage::watch_proves_progress`]) before the store answers instead.
const UNPROVEN_WAIT: Duration = Duration::from_millis(50);

/// How many of the newest events a window keeps however old they are
/// ([`CacherConfig::window_age`]); kube-apiserver's watch cache keeps at least 100 too.
pub const WINDOW_MIN_EVENTS: usize = 100;

/// How a cache behaves.
#[derive(Clone, Debug)]
pub struct CacherConfig {
    /// How many recent events the window keeps.
    pub window_events: usize,
    /// How many bytes of recent events (values and previous values) the window keeps.
    pub window_bytes: usize,
    /// How long events stay in the window once newer ones follow: older ones leave (all but
    /// the newest [`WINDOW_MIN_EVENTS`]), with what they hold, so that memory comes back after
    /// a burst of changes. kube-apiserver's watch cache keeps about 75 seconds of events too.
    /// Zero keeps events for as long as the window has room.
    pub window_age: Duration,
    /// How long a consistent read waits for the cache to catch up before failing with
    /// [`Error::Timeout`] (kube-apiserver waits 3 seconds).
    pub consistency_timeout: Duration,
    /// The page size of the reflector's initial list.
    pub list_page: usize,
    /// How many events each watcher buffers for its reader (shared events: references, not
    /// copies).
    pub watch_buffer: usize,
    /// What the layer above derives from a cached value's bytes once (the registry: where the
    /// resourceVersion goes in a stored object), kept with the cached value, derived at its
    /// first read, and handed out with it as [`KeyValue::hint`]. `None` hands out 0.
    pub value_hint: Option<fn(&[u8]) -> u64>,
}

impl Default for CacherConfig {
    fn default() -> Self {
        Self {
            window_events: 102_400,
            window_bytes: 128 << 20,
            window_age: Duration::from_secs(75),
            consistency_timeout: Duration::from_secs(3),
            list_page: 10_000,
            watch_buffer: 64,
            value_hint: None,
        }
    }
}

/// One cached key, as the event that creates it as it is now ([`EventKind::Create`], no
/// previous value): watches that start with the current state hand it out, shared, and its
/// memo keeps what the layers above derived from it. The map key is the storage key.
///
/// [`EventKind::Create`]: genplane_storage::EventKind::Create
pub(crate) type Entry = Arc<Event>;

/// A cached key in the snapshot's ordered set: its [`Entry`], ordered and found by the
/// storage key the entry holds (so the key is held once, not again as a map key).
#[derive(Clone, Debug)]
pub(crate) struct Keyed(pub(crate) Entry);

impl std::borrow::Borrow<str> for Keyed {
    fn borrow(&self) -> &str {
        &self.0.kv.key
    }
}

impl PartialEq for Keyed {
    fn eq(&self, other: &Self) -> bool {
        self.0.kv.key == other.0.kv.key
    }
}

impl Eq for Keyed {}

impl PartialOrd for Keyed {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Keyed {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.kv.key.cmp(&other.0.kv.key)
    }
}

/// The state of one key as a create event.
pub(crate) fn entry(kv: KeyValue) -> Entry {
    Arc::new(Event {
        kind: genplane_storage::EventKind::Create,
        kv,
        prev: None,
        memo: genplane_storage::Memo::default(),
    })
}

/// A cached key as a read hands it out: its key-value with the hint `value_hint` derives from
/// the value, derived at the first read and kept with the entry.
fn handed(entry: &Event, value_hint: Option<fn(&[u8]) -> u64>) -> KeyValue {
    let mut kv = entry.kv.clone();
    if let Some(derive) = value_hint {
        kv.hint = entry.memo.hint_or_derive(|| derive(&entry.kv.value));
    }
    kv
}

/// The cached state of the prefix.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    /// The cached keys, in key order ([`BTreeSet::replace`] updates one).
    pub(crate) objects: BTreeSet<Keyed>,
    /// The revision the objects are at; 0 until the first list completed.
    pub(crate) revision: Revision,
}

/// What the reflector publishes to readers and watchers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Head {
    /// The revision the cache has reached.
    pub(crate) revision: Revision,
    /// Whether the cache holds a complete list.
    pub(crate) ready: bool,
    /// Whether the first list has ended, done or failed.
    pub(crate) listed_once: bool,
    /// Whether the cache was dropped.
    pub(crate) closed: bool,
}

/// What the reflector, the readers and the watchers share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) prefix: String,
    pub(crate) snapshot: RwLock<Snapshot>,
    pub(crate) ring: EventRing,
    pub(crate) head: watch::Sender<Head>,
    /// Readers waiting to catch up ask the reflector to request progress from its watch.
    pub(crate) progress_wanted: Notify,
}

impl Shared {
    /// The snapshot, for reading (poisoned or not, as every lock of this crate is taken).
    pub(crate) fn read_snapshot(&self) -> std::sync::RwLockReadGuard<'_, Snapshot> {
        self.snapshot.read().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The watch cache of one prefix over a store `S`. See the crate documentation.
#[derive(Debug)]
pub struct Cacher<S: Storage> {
    store: Arc<S>,
    shared: Arc<Shared>,
    config: CacherConfig,
    reflector: tokio::task::JoinHandle<()>,
}

impl<S: Storage> Cacher<S> {
    /// Starts caching `prefix` (which must end with `/`, or be `/` for everything) of `store`.
    /// Must be called within a Tokio runtime. Reads wait until the first list is complete.
    pub fn new(store: S, prefix: &str, config: CacherConfig) -> Result<Self> {
        validate_key(prefix)?;
        if !prefix.ends_with('/') {
            return Err(Error::InvalidKey {
                key: prefix.to_owned(),
                reason: "a cache prefix must end with '/'",
            });
        }
        let store = Arc::new(store);
        let shared = Arc::new(Shared {
            prefix: prefix.to_owned(),
            snapshot: RwLock::new(Snapshot::default()),
            ring: EventRing::new(0, config.window_events, config.window_bytes),
            head: watch::Sender::new(Head::default()),
            progress_wanted: Notify::new(),
        });
        let reflector = tokio::spawn(reflector::run(
            Arc::downgrade(&store),
            shared.clone(),
            config.list_page,
            config.window_age,
        ));
        Ok(Self {
            store,
            shared,
            config,
            reflector,
        })
    }

    /// The store under the cache.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The revision the cache has reached.
    pub fn revision(&self) -> Revision {
        self.shared.head.borrow().revision
    }

    /// Whether the cache's first list has ended: it completed, and the cache answers from
    /// memory, or it failed (an object that cannot be read, say: the reflector says so in the
    /// log and tries again) and reads wait for it no longer than the consistency timeout.
    pub fn listed_once(&self) -> bool {
        self.shared.head.borrow().listed_once
    }

    /// The cached value of `key` right now, without waiting: `None` when the key is absent,
    /// outside the prefix, or the cache has not completed its first list. For synchronous
    /// lookups that may be a moment behind the store (e.g. whether a service account still
    /// exists when its token is checked).
    pub fn peek(&self, key: &str) -> Option<KeyValue> {
        if !self.covers(key) || !self.shared.head.borrow().ready {
            return None;
        }
        self.cached(key)
    }

    fn covers(&self, key: &str) -> bool {
        key.starts_with(&self.shared.prefix)
    }

    /// Waits until the cache holds a complete list at `target` or later.
    async fn wait_for(&self, target: Option<Revision>) -> Result<()> {
        let mut head = self.shared.head.subscribe();
        // Over a store whose watch cannot prove progress on a quiet prefix, a cache that has
        // listed but is behind gets a moment for events already on their way, not the full
        // wait for a report that will not come. The first list is waited for in full.
        let proven = self.store.watch_proves_progress();
        let mut deadline = tokio::time::Instant::now() + self.config.consistency_timeout;
        let mut shortened = proven;
        loop {
            let now = *head.borrow_and_update();
            if now.closed {
                return Err(Error::Unavailable("the cache was closed".into()));
            }
            if now.ready && target.is_none_or(|t| now.revision >= t) {
                return Ok(());
            }
            if now.ready && !shortened {
                shortened = true;
                deadline = deadline.min(tokio::time::Instant::now() + UNPROVEN_WAIT);
            }
            self.shared.progress_wanted.notify_one();
            let nudge = tokio::time::Instant::now() + Duration::from_millis(100);
            tokio::select! {
                changed = head.changed() => {
                    if changed.is_err() {
                        return Err(Error::Unavailable("the cache was closed".into()));
                    }
                }
                () = tokio::time::sleep_until(nudge.min(deadline)) => {
                    if tokio::time::Instant::now() >= deadline {
                        if proven || !now.ready {
                            tracing::warn!(prefix = %self.shared.prefix, ?target, reached = now.revision, "the cache did not catch up in time");
                        }
                        return Err(Error::Timeout);
                    }
                }
            }
        }
    }

    /// Lists from memory at whatever revision the cache has reached, without waiting for it
    /// to catch up with the store (kube's `resourceVersion="0"` semantics). Waits only for the
    /// first list to complete. `request.revision` is ignored.
    pub async fn list_cached(&self, request: ListRequest) -> Result<ListResponse> {
        validate_list(&request)?;
        if !self.covers(&request.prefix) {
            return self.store.list(request).await;
        }
        self.wait_for(None).await?;
        Ok(self.list_snapshot(&request))
    }

    /// The cache's state of `key`, at whatever revision the cache has reached.
    fn cached(&self, key: &str) -> Option<KeyValue> {
        let entry = self
            .shared
            .read_snapshot()
            .objects
            .get(key)
            .map(|e| e.0.clone());
        // Out of the lock: a first read derives the value's hint.
        entry.map(|e| handed(&e, self.config.value_hint))
    }

    fn list_snapshot(&self, request: &ListRequest) -> ListResponse {
        let listed = {
            let snapshot = self.shared.read_snapshot();
            Self::list_from(&snapshot, request)
        };
        listed.handed(self.config.value_hint)
    }

    /// Answers `request` from `snapshot`, which the caller holds locked, so that the answer is
    /// exactly at `snapshot.revision`: the entries, handed out ([`Listed::handed`]) once the
    /// lock is released.
    fn list_from(snapshot: &Snapshot, request: &ListRequest) -> Listed {
        let start = request.start.as_deref().unwrap_or(&request.prefix);
        let in_range = snapshot
            .objects
            .range::<str, _>((Bound::Included(start), Bound::Unbounded))
            .take_while(|Keyed(e)| e.kv.key.starts_with(&request.prefix));
        let limit = request.limit.filter(|l| *l > 0).unwrap_or(usize::MAX);
        let mut entries = Vec::new();
        let mut more = false;
        let mut count = 0i64;
        for Keyed(entry) in in_range {
            if entries.len() < limit {
                entries.push(entry.clone());
            } else {
                more = true;
                if !request.count {
                    break;
                }
            }
            count += 1;
        }
        Listed {
            entries,
            revision: snapshot.revision,
            more,
            count: request.count.then_some(count),
        }
    }
}

/// A list answered from a snapshot: its entries, shared, to be handed out once the snapshot's
/// lock is released (a first read of an entry derives its hint, which reads the whole value).
struct Listed {
    entries: Vec<Entry>,
    revision: Revision,
    more: bool,
    count: Option<i64>,
}

impl Listed {
    /// The answer: each entry as a read hands it out, with its hint by `value_hint`.
    fn handed(self, value_hint: Option<fn(&[u8]) -> u64>) -> ListResponse {
        ListResponse {
            items: self
                .entries
                .iter()
                .map(|entry| handed(entry, value_hint))
                .collect(),
            revision: self.revision,
            more: self.more,
            count: self.count,
        }
    }
}

impl<S: Storage> Drop for Cacher<S> {
    fn drop(&mut self) {
        self.reflector.abort();
        self.shared.head.send_modify(|h| h.closed = true);
    }
}

impl<S: Storage> Storage for Cacher<S> {
    /// How many objects the cache holds, or `None` before its first list completed.
    fn object_count(&self) -> Option<usize> {
        if !self.shared.head.borrow().ready {
            return None;
        }
        let snapshot = self.shared.read_snapshot();
        Some(snapshot.objects.len())
    }

    async fn get(&self, key: &str, revision: Option<Revision>) -> Result<Option<KeyValue>> {
        validate_key(key)?;
        if let Some(r) = revision
            && self.covers(key)
        {
            let snapshot = self.shared.read_snapshot();
            if snapshot.revision == r && r > 0 && r >= self.store.compacted_revision() {
                let entry = snapshot.objects.get(key).map(|e| e.0.clone());
                drop(snapshot);
                return Ok(entry.map(|e| handed(&e, self.config.value_hint)));
            }
        }
        if revision.is_none() && self.covers(key) && self.store.knows_current_revision() {
            // The store knows its current revision without a round trip: once the cache has
            // caught up with it, memory answers as the store would.
            let current = self.store.current_revision().await?;
            match self.wait_for(Some(current)).await {
                Ok(()) => return Ok(self.cached(key)),
                Err(Error::Timeout) => {}
                Err(other) => return Err(other),
            }
        }
        // Over a remote store a consistent get costs one round trip either way (the current
        // revision or the object): the store answers it.
        self.store.get(key, revision).await
    }

    async fn list(&self, request: ListRequest) -> Result<ListResponse> {
        validate_list(&request)?;
        if !self.covers(&request.prefix) {
            return self.store.list(request).await;
        }
        match request.revision {
            None => {
                let current = self.store.current_revision().await?;
                match self.wait_for(Some(current)).await {
                    Ok(()) => Ok(self.list_snapshot(&request)),
                    // The cache could not confirm it caught up (a quiet prefix on an etcd whose
                    // progress reports are not trusted, or a lagging watch): the store answers
                    // the consistent read itself, as kube-apiserver falls back to etcd.
                    Err(Error::Timeout) => self.store.list(request).await,
                    Err(other) => Err(other),
                }
            }
            Some(r) => {
                let answered = {
                    let snapshot = self.shared.read_snapshot();
                    (snapshot.revision == r && r > 0 && r >= self.store.compacted_revision())
                        .then(|| Self::list_from(&snapshot, &request))
                };
                match answered {
                    Some(listed) => Ok(listed.handed(self.config.value_hint)),
                    None => self.store.list(request).await,
                }
            }
        }
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue> {
        self.store.create(key, value).await
    }

    async fn update(&self, key: &str, value: Bytes, expected: Revision) -> Result<KeyValue> {
        self.store.update(key, value, expected).await
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<Deleted> {
        self.store.delete(key, expected).await
    }

    async fn delete_batch(&self, deletes: Vec<DeleteRequest>) -> Vec<Result<Deleted>> {
        self.store.delete_batch(deletes).await
    }

    async fn watch(&self, prefix: &str, after: Revision) -> Result<Watch> {
        validate_key(prefix)?;
        if !self.covers(prefix) {
            return self.store.watch(prefix, after).await;
        }
        self.wait_for(None).await?;
        // History the store has compacted is not served from memory either, so that every
        // cache over the store answers an old revision as the store does.
        let compacted = self.store.compacted_revision();
        self.shared.ring.forget_through(compacted);
        if after < self.shared.ring.floor() || after < compacted {
            // Older than the window: the store replays it, or says it is compacted.
            return self.store.watch(prefix, after).await;
        }
        Ok(watchers::spawn(
            Arc::downgrade(&self.store),
            self.shared.clone(),
            prefix.to_owned(),
            None,
            after,
            self.config.watch_buffer,
        ))
    }

    async fn watch_state(&self, prefix: &str, read: StateRead) -> Result<Watch> {
        validate_key(prefix)?;
        if !self.covers(prefix) {
            return self.store.watch_state(prefix, read).await;
        }
        let target = match read {
            StateRead::Any => None,
            StateRead::Current => Some(self.store.current_revision().await?),
        };
        match self.wait_for(target).await {
            Ok(()) => {}
            // As for consistent lists: the store answers when the cache cannot confirm.
            Err(Error::Timeout) => return self.store.watch_state(prefix, read).await,
            Err(other) => return Err(other),
        }
        let (state, revision) = {
            let snapshot = self.shared.read_snapshot();
            let state: Vec<Entry> = snapshot
                .objects
                .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
                .take_while(|Keyed(e)| e.kv.key.starts_with(prefix))
                .map(|Keyed(entry)| entry.clone())
                .collect();
            (state, snapshot.revision)
        };
        Ok(watchers::spawn(
            Arc::downgrade(&self.store),
            self.shared.clone(),
            prefix.to_owned(),
            Some(state),
            revision,
            self.config.watch_buffer,
        ))
    }

    async fn list_any(&self, request: ListRequest) -> Result<ListResponse> {
        self.list_cached(request).await
    }

    async fn get_any(&self, key: &str) -> Result<Option<KeyValue>> {
        validate_key(key)?;
        if !self.covers(key) {
            return self.store.get_any(key).await;
        }
        // Only the first complete list is waited for, as for cached lists.
        self.wait_for(None).await?;
        Ok(self.cached(key))
    }

    async fn current_revision(&self) -> Result<Revision> {
        self.store.current_revision().await
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        self.store.compact(revision).await?;
        self.shared.ring.forget_through(revision);
        Ok(())
    }

    fn compacted_revision(&self) -> Revision {
        self.store.compacted_revision()
    }

    fn watch_proves_progress(&self) -> bool {
        self.store.watch_proves_progress()
    }

    fn knows_current_revision(&self) -> bool {
        self.store.knows_current_revision()
    }
}
