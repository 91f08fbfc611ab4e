//! The watch cache: a decorator over any [`Storage`] that serves watches and reads of one
//! resource prefix from memory, and itself honours the storage contract.
//!
//! A [`Cacher`] keeps, for its prefix, the current keys and a window of recent events
//! ([`EventRing`]), fed by one list and one watch of the underlying store (the *reflector*).
//!
//! - **Watches** under the prefix are served from the window: every watcher reads the same
//!   shared events (values are reference-counted bytes, never copied per watcher). A watch from
//!   a revision older than the window — or a watcher that falls behind it — continues on the
//!   underlying store, which replays its history or fails as compacted. (kube-apiserver answers
//!   "too old resource version" as soon as its window does not cover a revision, which makes
//!   clients relist everything; replaying from the store avoids that relist while the store
//!   still has the history.)
//! - **Consistent lists** (no revision): the cache reads the store's current revision, waits
//!   (up to [`CacherConfig::consistency_timeout`]) until it has caught up to it, asking the
//!   reflector's watch for progress so that a quiet prefix catches up too, and answers from
//!   memory (KEP-2340's consistent read from cache). When it cannot confirm it caught up in
//!   time, the store answers instead.
//! - **Lists at the cache's revision** are answered from memory; lists at other revisions (such
//!   as later pages of a paginated list) and gets read the store, which answers them exactly.
//! - [`Cacher::list_cached`] answers from memory without waiting (kube's `resourceVersion="0"`).
//! - Writes go straight to the store.
//!
//! Keys outside the prefix are passed through to the store untouched.

#![warn(missing_docs)]

mod reflector;
mod watchers;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use genplane_storage::ring::EventRing;
use genplane_storage::{
    Bytes, Deleted, Error, KeyValue, ListRequest, ListResponse, Result, Revision, Storage, Watch,
    validate_key, validate_list,
};
use tokio::sync::{Notify, watch};

/// How a cache behaves.
#[derive(Clone, Debug)]
pub struct CacherConfig {
    /// How many recent events the window keeps.
    pub window_events: usize,
    /// How many bytes of recent events (values and previous values) the window keeps.
    pub window_bytes: usize,
    /// How long a consistent read waits for the cache to catch up before failing with
    /// [`Error::Timeout`] (kube-apiserver waits 3 seconds).
    pub consistency_timeout: Duration,
    /// The page size of the reflector's initial list.
    pub list_page: usize,
}

impl Default for CacherConfig {
    fn default() -> Self {
        Self {
            window_events: 102_400,
            window_bytes: 128 << 20,
            consistency_timeout: Duration::from_secs(3),
            list_page: 10_000,
        }
    }
}

/// One cached key: the map key is the storage key.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub(crate) value: Bytes,
    pub(crate) create_revision: Revision,
    pub(crate) mod_revision: Revision,
}

impl Entry {
    fn key_value(&self, key: &str) -> KeyValue {
        KeyValue {
            key: key.to_owned(),
            value: self.value.clone(),
            create_revision: self.create_revision,
            mod_revision: self.mod_revision,
        }
    }
}

/// The cached state of the prefix.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    pub(crate) objects: BTreeMap<String, Entry>,
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

    /// How many objects the cache holds, or `None` before its first list completed.
    pub fn object_count(&self) -> Option<usize> {
        if !self.shared.head.borrow().ready {
            return None;
        }
        let snapshot = self
            .shared
            .snapshot
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        Some(snapshot.objects.len())
    }

    /// The cached value of `key` right now, without waiting: `None` when the key is absent,
    /// outside the prefix, or the cache has not completed its first list. For synchronous
    /// lookups that may be a moment behind the store (e.g. whether a service account still
    /// exists when its token is checked).
    pub fn peek(&self, key: &str) -> Option<KeyValue> {
        if !self.covers(key) || !self.shared.head.borrow().ready {
            return None;
        }
        let snapshot = self
            .shared
            .snapshot
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        snapshot.objects.get(key).map(|e| e.key_value(key))
    }

    fn covers(&self, key: &str) -> bool {
        key.starts_with(&self.shared.prefix)
    }

    /// Waits until the cache holds a complete list at `target` or later.
    async fn wait_for(&self, target: Option<Revision>) -> Result<()> {
        let mut head = self.shared.head.subscribe();
        let deadline = tokio::time::Instant::now() + self.config.consistency_timeout;
        loop {
            let now = *head.borrow_and_update();
            if now.closed {
                return Err(Error::Unavailable("the cache was closed".into()));
            }
            if now.ready && target.is_none_or(|t| now.revision >= t) {
                return Ok(());
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
                        tracing::warn!(prefix = %self.shared.prefix, ?target, reached = now.revision, "the cache did not catch up in time");
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

    fn list_snapshot(&self, request: &ListRequest) -> ListResponse {
        let snapshot = self
            .shared
            .snapshot
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        Self::list_from(&snapshot, request)
    }

    /// Answers `request` from `snapshot`, which the caller holds locked, so that the answer is
    /// exactly at `snapshot.revision`.
    fn list_from(snapshot: &Snapshot, request: &ListRequest) -> ListResponse {
        let start = request.start.as_deref().unwrap_or(&request.prefix);
        let in_range = snapshot
            .objects
            .range::<str, _>((Bound::Included(start), Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(&request.prefix));
        let limit = request.limit.filter(|l| *l > 0).unwrap_or(usize::MAX);
        let mut items = Vec::new();
        let mut more = false;
        let mut count = 0i64;
        for (key, entry) in in_range {
            if items.len() < limit {
                items.push(entry.key_value(key));
            } else {
                more = true;
                if !request.count {
                    break;
                }
            }
            count += 1;
        }
        ListResponse {
            items,
            revision: snapshot.revision,
            more,
            count: request.count.then_some(count),
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
    async fn get(&self, key: &str, revision: Option<Revision>) -> Result<Option<KeyValue>> {
        validate_key(key)?;
        if let Some(r) = revision
            && self.covers(key)
        {
            let snapshot = self
                .shared
                .snapshot
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            if snapshot.revision == r && r > 0 {
                return Ok(snapshot.objects.get(key).map(|e| e.key_value(key)));
            }
        }
        // A consistent get costs one read of the store either way; read it there.
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
                    let snapshot = self
                        .shared
                        .snapshot
                        .read()
                        .unwrap_or_else(PoisonError::into_inner);
                    (snapshot.revision == r && r > 0).then(|| Self::list_from(&snapshot, &request))
                };
                match answered {
                    Some(response) => Ok(response),
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

    async fn watch(&self, prefix: &str, after: Revision) -> Result<Watch> {
        validate_key(prefix)?;
        if !self.covers(prefix) {
            return self.store.watch(prefix, after).await;
        }
        self.wait_for(None).await?;
        if after < self.shared.ring.floor() {
            // Older than the window: the store replays it, or says it is compacted.
            return self.store.watch(prefix, after).await;
        }
        Ok(watchers::spawn(
            Arc::downgrade(&self.store),
            self.shared.clone(),
            prefix.to_owned(),
            after,
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
        let snapshot = self
            .shared
            .snapshot
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        Ok(snapshot.objects.get(key).map(|e| e.key_value(key)))
    }

    async fn current_revision(&self) -> Result<Revision> {
        self.store.current_revision().await
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        self.store.compact(revision).await
    }
}
