//! The storage contract of genplane, with etcd v3 semantics.
//!
//! Everything the apiserver promises (resourceVersion, optimistic concurrency, watch, pagination,
//! consistent reads) rests on this contract, and every backend honours it exactly: the embedded
//! SQLite store, the etcd store, and the watch cache that decorates either. One conformance suite
//! (`genplane-storage-testing`) proves it for each.
//!
//! # The contract
//!
//! - **Keys** are UTF-8 paths that start with `/` (see [`validate_key`]), e.g.
//!   `/registry/configmaps/default/settings`. **Values** are opaque bytes.
//! - **Revisions**: the store has one global revision that every successful write increases by
//!   exactly one. A fresh store is at revision 1, so the first write gets revision 2. A key's
//!   [`KeyValue::mod_revision`] is the revision of the write that last changed it (Kubernetes'
//!   `resourceVersion`), [`KeyValue::create_revision`] the revision that created it.
//! - **Reads** happen at a revision: the current one (`None`, or a revision at or below zero,
//!   as etcd reads them), or an older one still in history. A read
//!   at a revision older than the last compaction fails with [`Error::Compacted`]; a read at a
//!   revision newer than the current one fails with [`Error::FutureRevision`].
//! - **Lists** range over a prefix in key order, from an optional start key, with an optional
//!   limit; [`ListResponse::more`] tells whether keys remain. Paging at the revision of the first
//!   page (see [`continue_token`]) sees exactly the state at that revision, however many writes
//!   happen meanwhile.
//! - **Writes** are atomic, each one transaction: [`Storage::create`] fails if the key exists;
//!   [`Storage::update`] and [`Storage::delete`] compare the key's current `mod_revision` with an
//!   expected one and fail with [`Error::Conflict`] (carrying the current value) when they differ.
//!   A write is acknowledged only once it is durable. [`Storage::delete_batch`] deletes many
//!   keys with one request, each as [`Storage::delete`] would, each with a revision of its own.
//! - **Watches** deliver, in revision order and without gaps, every change under a prefix after a
//!   given revision, each with the previous value ([`Event::prev`]). Asked for
//!   ([`Watch::request_progress`]), a watch reports the revision up to which it has delivered
//!   everything ([`WatchEvent::Progress`]), which is how a cache knows it is up to date even when
//!   its prefix is quiet. A watch that would need events the store no longer has fails with
//!   [`Error::Compacted`], at start or later. A cache answers such a watch as its store does
//!   (it keeps no history before [`Storage::compacted_revision`]), so that every cache over
//!   one store gives the same answer. A watch may also start
//!   with the current state ([`Storage::watch_state`]). A watch whose reader falls too far
//!   behind may end with [`Error::TooSlow`]; watching again from the last revision received
//!   continues without a gap.
//! - **Compaction** to revision `C` discards history: every event with revision `<= C` and every
//!   value that was superseded by `C`. Reads at revisions `>= C` keep working.

#![warn(missing_docs)]

pub mod continue_token;
pub mod ring;

use std::fmt;
use std::future::Future;
use std::sync::Arc;

pub use bytes::Bytes;
use tokio::sync::mpsc;

/// A store revision. Revisions are positive and strictly increasing; 0 means "none".
pub type Revision = i64;

/// The errors of the storage contract.
///
/// This is the one error type every backend returns; backend-specific failures are wrapped in
/// [`Error::Backend`] so that their types do not leak through the contract. It is cloneable
/// because a watch may hand the same error to several readers.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The key does not exist (at the revision read).
    #[error("key {key:?} not found")]
    NotFound {
        /// The key.
        key: String,
    },
    /// A create found the key already present.
    #[error("key {key:?} already exists")]
    AlreadyExists {
        /// The key.
        key: String,
    },
    /// A compare-and-swap found a different `mod_revision` than expected.
    #[error("key {key:?} has been modified: expected revision {expected}, found {}", current.mod_revision)]
    Conflict {
        /// The key.
        key: String,
        /// The revision the caller expected.
        expected: Revision,
        /// The key's current value, so that the caller can retry without reading again.
        current: Box<KeyValue>,
    },
    /// The revision asked for has been compacted away.
    #[error(
        "revision {requested} has been compacted; the oldest available revision is {compacted}"
    )]
    Compacted {
        /// The revision asked for.
        requested: Revision,
        /// The revision of the last compaction.
        compacted: Revision,
    },
    /// The revision asked for is newer than the store's current revision.
    #[error("revision {requested} is newer than the current revision {current}")]
    FutureRevision {
        /// The revision asked for.
        requested: Revision,
        /// The store's current revision.
        current: Revision,
    },
    /// The key is not a valid storage key.
    #[error("invalid key {key:?}: {reason}")]
    InvalidKey {
        /// The key.
        key: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The store cannot be reached or is closed; retrying later may succeed.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// The operation did not finish in time; it may or may not have taken effect.
    #[error("storage operation timed out")]
    Timeout,
    /// The connection to the store was lost while a write was on its way (the store's member
    /// was killed, or stopped answering): whether it took effect is unknown. Not a timeout:
    /// it ends as soon as the loss is seen, and retrying the same write may find it done.
    #[error("the connection to the store was lost while the write was on its way: {0}")]
    Interrupted(String),
    /// A watch's reader fell too far behind the events kept for it, and the watch ended;
    /// watching again after `revision`, the last revision it delivered, continues where it
    /// stopped (kube-apiserver ends such watchers too, and clients watch again).
    #[error("the watcher fell behind after revision {revision} and was ended")]
    TooSlow {
        /// Every event up to this revision was delivered.
        revision: Revision,
    },
    /// Any other failure of the backend.
    #[error("storage backend error: {0}")]
    Backend(#[source] Arc<dyn std::error::Error + Send + Sync>),
}

impl Error {
    /// Whether retrying the same operation later may succeed (after a timeout or an
    /// interruption, a write may also find that it took effect).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::Unavailable(_) | Error::Timeout | Error::Interrupted(_)
        )
    }

    /// Wraps a backend-specific error.
    pub fn backend(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Error::Backend(Arc::new(error))
    }
}

/// The result type of storage operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A key with its value and revisions.
#[derive(Clone)]
pub struct KeyValue {
    /// The key.
    pub key: String,
    /// The value.
    pub value: Bytes,
    /// The revision of the write that created the key.
    pub create_revision: Revision,
    /// The revision of the write that last changed the key.
    pub mod_revision: Revision,
    /// What the layer above derived from `value` once, kept with the cached value and handed
    /// out with it (a cache's `value_hint`, e.g. where in the bytes the resourceVersion goes):
    /// 0 when nothing was derived (values straight from a store). Not part of the key's state:
    /// equality ignores it.
    pub hint: u64,
}

impl PartialEq for KeyValue {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
            && self.value == other.value
            && self.create_revision == other.create_revision
            && self.mod_revision == other.mod_revision
    }
}

impl Eq for KeyValue {}

impl fmt::Debug for KeyValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyValue")
            .field("key", &self.key)
            .field("value", &format_args!("{} bytes", self.value.len()))
            .field("create_revision", &self.create_revision)
            .field("mod_revision", &self.mod_revision)
            .finish()
    }
}

/// What a change did to its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// The key was created.
    Create,
    /// The key's value was replaced.
    Update,
    /// The key was deleted.
    Delete,
}

/// One change, as a watch delivers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// What happened.
    pub kind: EventKind,
    /// The key after the change. For a delete, the value is empty and `mod_revision` is the
    /// revision of the delete.
    pub kv: KeyValue,
    /// The key before the change; `None` for a create.
    pub prev: Option<KeyValue>,
    /// What the layers above derived from this event (decoded objects, their encodings), kept
    /// with it so that every watcher handed the same shared event reuses the work.
    pub memo: Memo,
}

/// Work derived from an [`Event`], computed by the first watcher that needs it and shared with
/// the others. Each entry belongs to an owner (an address identifying the layer, e.g. one
/// resource's strategy), since two resources over the same keys may derive different things.
/// A memo is not part of an event's value: clones start empty and every memo equals every
/// other.
#[derive(Default)]
pub struct Memo {
    entries: std::sync::Mutex<Vec<(usize, Arc<dyn std::any::Any + Send + Sync>)>>,
    /// The value's [`KeyValue::hint`] once derived (0 before): a cache keeps it for the value's
    /// life, so it is a word, not an entry.
    hint: std::sync::atomic::AtomicU64,
}

impl Memo {
    /// The hint derived from the event's value, 0 until [`Memo::hint_or_derive`] ran.
    pub fn hint(&self) -> u64 {
        self.hint.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The hint derived from the event's value, derived by `derive` the first time (two
    /// readers at once may both derive it: it is a function of the value, so they agree).
    pub fn hint_or_derive(&self, derive: impl FnOnce() -> u64) -> u64 {
        match self.hint() {
            0 => {
                let hint = derive();
                self.hint.store(hint, std::sync::atomic::Ordering::Relaxed);
                hint
            }
            known => known,
        }
    }

    /// The value `owner` derived from the event, if some watcher derived and kept it.
    pub fn get<T: std::any::Any + Send + Sync>(&self, owner: usize) -> Option<Arc<T>> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .find(|(o, _)| *o == owner)
            .and_then(|(_, value)| value.clone().downcast::<T>().ok())
    }

    /// The value `owner` derived from the event, computed by `init` the first time. Other
    /// watchers asking meanwhile wait for it rather than compute it again: `init` runs under
    /// the memo's lock, so it must only compute, never wait or call out (a value that needs a
    /// call, such as a conversion webhook's answer, goes in an asynchronous cell that `init`
    /// only creates, filled outside the lock).
    pub fn get_or_insert_with<T: std::any::Any + Send + Sync>(
        &self,
        owner: usize,
        init: impl FnOnce() -> T,
    ) -> Arc<T> {
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let found = entries
            .iter()
            .find(|(o, _)| *o == owner)
            .and_then(|(_, value)| value.clone().downcast::<T>().ok());
        if let Some(value) = found {
            return value;
        }
        let value = Arc::new(init());
        entries.retain(|(o, _)| *o != owner);
        entries.push((owner, value.clone()));
        value
    }
}

impl Clone for Memo {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl PartialEq for Memo {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Memo {}

impl fmt::Debug for Memo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Memo")
    }
}

impl Event {
    /// The revision of the change.
    pub fn revision(&self) -> Revision {
        self.kv.mod_revision
    }
}

/// What a watch delivers.
#[derive(Clone, Debug)]
pub enum WatchEvent {
    /// A change. Shared: the same event is handed to every watcher without copying.
    Event(Arc<Event>),
    /// Every change under the watched prefix up to this revision has been delivered.
    Progress(Revision),
    /// The watch failed and ends after this (e.g. [`Error::Compacted`] when it fell behind).
    Error(Error),
}

/// A running watch. Dropping it stops the watch.
#[derive(Debug)]
pub struct Watch {
    events: mpsc::Receiver<WatchEvent>,
    progress: mpsc::Sender<()>,
}

/// The backend side of a [`Watch`]: where a backend sends events and hears progress requests.
#[derive(Debug)]
pub struct WatchSender {
    /// Where events go. Sending fails once the watch was dropped.
    pub events: mpsc::Sender<WatchEvent>,
    /// Progress requests from the watcher.
    pub progress_requests: mpsc::Receiver<()>,
}

/// How many events a watch buffers before its backend waits for the reader.
pub const WATCH_BUFFER: usize = 1024;

impl Watch {
    /// A connected pair: the watch for the reader, the sender for the backend.
    pub fn channel() -> (Watch, WatchSender) {
        Self::with_capacity(WATCH_BUFFER)
    }

    /// Like [`Watch::channel`], buffering `capacity` events (at least one).
    pub fn with_capacity(capacity: usize) -> (Watch, WatchSender) {
        let (events_tx, events_rx) = mpsc::channel(capacity.max(1));
        let (progress_tx, progress_rx) = mpsc::channel(1);
        (
            Watch {
                events: events_rx,
                progress: progress_tx,
            },
            WatchSender {
                events: events_tx,
                progress_requests: progress_rx,
            },
        )
    }

    /// The next event, or `None` when the watch has ended.
    pub async fn next(&mut self) -> Option<WatchEvent> {
        self.events.recv().await
    }

    /// The next event if one is already waiting, without waiting.
    pub fn try_next(&mut self) -> Option<WatchEvent> {
        self.events.try_recv().ok()
    }

    /// Asks for a [`WatchEvent::Progress`] report. Requests made while one is pending are
    /// answered together.
    pub fn request_progress(&self) {
        // A full channel means a request is already pending, which will answer this one too.
        let _ = self.progress.try_send(());
    }
}

/// Which state [`Storage::watch_state`] starts with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StateRead {
    /// The current state, read consistently.
    Current,
    /// Whatever state is at hand, possibly older (kube's `resourceVersion="0"`): a cache's,
    /// without waiting.
    Any,
}

/// How many keys [`with_state`]'s callers read at a time.
const STATE_PAGE: usize = 1000;

/// A watch that delivers `state` (keys at `revision`, in key order) as [`EventKind::Create`]
/// events without previous values, then [`WatchEvent::Progress`] at `revision`, then what
/// `changes` (a watch after `revision`) delivers. For stores without a cache of their own.
pub fn with_state(state: Vec<KeyValue>, revision: Revision, changes: Watch) -> Watch {
    let (watch, mut sender) = Watch::channel();
    tokio::spawn(async move {
        let mut changes = changes;
        for kv in state {
            let event = Event {
                kind: EventKind::Create,
                kv,
                prev: None,
                memo: Memo::default(),
            };
            if sender
                .events
                .send(WatchEvent::Event(Arc::new(event)))
                .await
                .is_err()
            {
                return;
            }
        }
        if sender
            .events
            .send(WatchEvent::Progress(revision))
            .await
            .is_err()
        {
            return;
        }
        loop {
            tokio::select! {
                message = changes.next() => match message {
                    Some(message) => {
                        if sender.events.send(message).await.is_err() {
                            return;
                        }
                    }
                    None => return,
                },
                request = sender.progress_requests.recv() => match request {
                    Some(()) => changes.request_progress(),
                    None => return,
                },
            }
        }
    });
    watch
}

/// A list request: a range of keys at a revision.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListRequest {
    /// Only keys starting with this prefix. Usually ends with `/`.
    pub prefix: String,
    /// Start at this key (inclusive) instead of at the prefix; must be within the prefix.
    pub start: Option<String>,
    /// Read at this revision; `None` reads at the current revision.
    pub revision: Option<Revision>,
    /// Return at most this many keys; `None` or 0 returns all.
    pub limit: Option<usize>,
    /// Also count the keys in the range (from `start` on), which can be expensive.
    pub count: bool,
}

/// The answer to a [`ListRequest`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListResponse {
    /// The keys, in key order.
    pub items: Vec<KeyValue>,
    /// The revision the list was read at.
    pub revision: Revision,
    /// Whether more keys follow the last one returned.
    pub more: bool,
    /// The number of keys in the range from `start` on, when asked for.
    pub count: Option<i64>,
}

/// The answer to a delete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deleted {
    /// The revision of the delete.
    pub revision: Revision,
    /// The key as it was before the delete.
    pub prev: KeyValue,
}

/// One delete of a [`Storage::delete_batch`]: a key and, optionally, the `mod_revision` it must
/// still have.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeleteRequest {
    /// The key.
    pub key: String,
    /// Delete only if the key's `mod_revision` is this.
    pub expected: Option<Revision>,
}

/// How many deletes a caller should put in one [`Storage::delete_batch`]: etcd's default limit
/// of operations per transaction (`--max-txn-ops`), and small enough that one batch is one short
/// commit on SQLite.
pub const DELETE_BATCH: usize = 128;

/// A store with etcd v3 semantics; see the crate documentation for the full contract.
pub trait Storage: Send + Sync + 'static {
    /// Reads one key at `revision` (`None`: the current revision). Returns `None` if the key
    /// does not exist at that revision.
    fn get(
        &self,
        key: &str,
        revision: Option<Revision>,
    ) -> impl Future<Output = Result<Option<KeyValue>>> + Send;

    /// Reads a key at whatever revision is at hand, possibly older than the current one
    /// (kube's `resourceVersion="0"`). A store reads its current revision; a cache answers
    /// from memory without waiting.
    fn get_any(&self, key: &str) -> impl Future<Output = Result<Option<KeyValue>>> + Send {
        self.get(key, None)
    }

    /// Lists a range of keys at a revision.
    fn list(&self, request: ListRequest) -> impl Future<Output = Result<ListResponse>> + Send;

    /// How many objects the storage holds, when it knows without reading them (a watch cache
    /// once filled); `None` otherwise.
    fn object_count(&self) -> Option<usize> {
        None
    }

    /// Lists a range of keys at whatever revision is at hand, possibly older than the current
    /// one (kube's `resourceVersion="0"`); `request.revision` is ignored. A store reads its
    /// current revision; a cache answers from memory without waiting.
    fn list_any(&self, request: ListRequest) -> impl Future<Output = Result<ListResponse>> + Send {
        self.list(ListRequest {
            revision: None,
            ..request
        })
    }

    /// Creates a key; fails with [`Error::AlreadyExists`] if it exists.
    fn create(&self, key: &str, value: Bytes) -> impl Future<Output = Result<KeyValue>> + Send;

    /// Replaces a key's value if its `mod_revision` is `expected`. Fails with
    /// [`Error::NotFound`] if the key does not exist and [`Error::Conflict`] if it was modified.
    fn update(
        &self,
        key: &str,
        value: Bytes,
        expected: Revision,
    ) -> impl Future<Output = Result<KeyValue>> + Send;

    /// Deletes a key, if `expected` is given only when its `mod_revision` is that. Fails with
    /// [`Error::NotFound`] if the key does not exist and [`Error::Conflict`] if it was modified.
    fn delete(
        &self,
        key: &str,
        expected: Option<Revision>,
    ) -> impl Future<Output = Result<Deleted>> + Send;

    /// Deletes many keys in one request (a collection delete): each as [`Storage::delete`]
    /// would delete it, with its own precondition and its own answer, in the order asked.
    ///
    /// Every delete that succeeds gets a revision of its own, and a watch delivers one
    /// [`EventKind::Delete`] per key, exactly as for single deletes. That is deliberate: a
    /// Kubernetes client resumes a watch after the last resourceVersion it received, so two
    /// events sharing one revision could be half delivered and the rest never seen. What a
    /// backend batches is the commit: SQLite applies a batch in one transaction (one fsync);
    /// etcd, whose transactions give all their keys one revision, sends the deletes as
    /// concurrent transactions, which its raft log commits together.
    ///
    /// A failure of the whole request (the store is unavailable) is each delete's answer.
    /// Callers send at most [`DELETE_BATCH`] deletes at a time. This default deletes one key
    /// after the other.
    fn delete_batch(
        &self,
        deletes: Vec<DeleteRequest>,
    ) -> impl Future<Output = Vec<Result<Deleted>>> + Send {
        async move {
            let mut answers = Vec::with_capacity(deletes.len());
            for delete in deletes {
                answers.push(self.delete(&delete.key, delete.expected).await);
            }
            answers
        }
    }

    /// Watches every change to keys under `prefix` with a revision greater than `after`.
    fn watch(&self, prefix: &str, after: Revision) -> impl Future<Output = Result<Watch>> + Send;

    /// Watches `prefix` starting with its state: the keys at one revision `R`, in key order, as
    /// [`EventKind::Create`] events without previous values; then [`WatchEvent::Progress`] at
    /// `R`; then every change after `R`, as [`Storage::watch`] delivers them. (kube's watch
    /// without a resourceVersion, and `sendInitialEvents`.)
    ///
    /// This default lists the state (in pages, at one revision) and then watches after it;
    /// a cache sends the objects it holds, shared, as the reader takes them.
    fn watch_state(
        &self,
        prefix: &str,
        read: StateRead,
    ) -> impl Future<Output = Result<Watch>> + Send {
        async move {
            validate_key(prefix)?;
            let mut state = Vec::new();
            let (mut start, mut revision) = (None, None);
            loop {
                let request = ListRequest {
                    prefix: prefix.to_owned(),
                    start: start.take(),
                    revision,
                    limit: Some(STATE_PAGE),
                    count: false,
                };
                let page = match (read, revision) {
                    (StateRead::Any, None) => self.list_any(request).await?,
                    _ => self.list(request).await?,
                };
                revision = Some(page.revision);
                let next = page.items.last().map(|kv| format!("{}\0", kv.key));
                state.extend(page.items);
                match next {
                    Some(next) if page.more => start = Some(next),
                    _ => break,
                }
            }
            let revision = revision.unwrap_or_default();
            let changes = self.watch(prefix, revision).await?;
            Ok(with_state(state, revision, changes))
        }
    }

    /// The store's current revision, read consistently (a quorum read on etcd).
    fn current_revision(&self) -> impl Future<Output = Result<Revision>> + Send;

    /// Discards history up to and including `revision`.
    fn compact(&self, revision: Revision) -> impl Future<Output = Result<()>> + Send;

    /// The revision of the latest compaction the store knows of, without asking anyone (0 when
    /// it knows of none). A store shared with other processes learns of their compactions
    /// after a moment; whatever it says, reads and watches before the revision it really
    /// compacted to fail with [`Error::Compacted`]. A cache does not serve history at or
    /// before it, so every cache over one store answers an old revision as the store does.
    fn compacted_revision(&self) -> Revision {
        0
    }

    /// Whether a watch of this store answers [`Watch::request_progress`] promptly even on a
    /// quiet prefix, so that a cache can prove it is up to date by asking. etcd before 3.4.26
    /// and 3.5.8 cannot: its answers are not ordered with the events, and are not trusted. A
    /// cache over such a store that is behind the current revision answers a consistent read
    /// from the store at once instead of waiting for a report that may never come.
    fn watch_proves_progress(&self) -> bool {
        true
    }

    /// Whether [`Storage::current_revision`] is known here, without a round trip to another
    /// process (an embedded store that is the only writer of its database). A cache over such
    /// a store answers consistent reads of single objects from memory too; over a remote store
    /// a consistent get reads the object there, which costs the same one round trip as learning
    /// the current revision would.
    fn knows_current_revision(&self) -> bool {
        false
    }
}

/// The longest key accepted, in bytes.
pub const MAX_KEY_LEN: usize = 4096;

/// Checks that `key` is a valid storage key: it starts with `/`, is at most [`MAX_KEY_LEN`]
/// bytes, and contains no NUL or other control characters.
pub fn validate_key(key: &str) -> Result<()> {
    let invalid = |reason| Error::InvalidKey {
        key: key.to_owned(),
        reason,
    };
    if !key.starts_with('/') {
        return Err(invalid("must start with '/'"));
    }
    if key.len() > MAX_KEY_LEN {
        return Err(invalid("longer than 4096 bytes"));
    }
    if key.chars().any(char::is_control) {
        return Err(invalid("contains control characters"));
    }
    Ok(())
}

/// Checks a list request: a valid prefix, and a start key within it.
pub fn validate_list(request: &ListRequest) -> Result<()> {
    validate_key(&request.prefix)?;
    if let Some(start) = &request.start
        && !start.starts_with(&request.prefix)
    {
        return Err(Error::InvalidKey {
            key: start.clone(),
            reason: "the start key is not within the listed prefix",
        });
    }
    Ok(())
}

/// A shared store is a store: one backend serves every resource's cache and registry.
impl<S: Storage> Storage for Arc<S> {
    fn get(
        &self,
        key: &str,
        revision: Option<Revision>,
    ) -> impl Future<Output = Result<Option<KeyValue>>> + Send {
        (**self).get(key, revision)
    }

    fn list(&self, request: ListRequest) -> impl Future<Output = Result<ListResponse>> + Send {
        (**self).list(request)
    }

    fn list_any(&self, request: ListRequest) -> impl Future<Output = Result<ListResponse>> + Send {
        (**self).list_any(request)
    }

    fn object_count(&self) -> Option<usize> {
        (**self).object_count()
    }

    fn get_any(&self, key: &str) -> impl Future<Output = Result<Option<KeyValue>>> + Send {
        (**self).get_any(key)
    }

    fn create(&self, key: &str, value: Bytes) -> impl Future<Output = Result<KeyValue>> + Send {
        (**self).create(key, value)
    }

    fn update(
        &self,
        key: &str,
        value: Bytes,
        expected: Revision,
    ) -> impl Future<Output = Result<KeyValue>> + Send {
        (**self).update(key, value, expected)
    }

    fn delete(
        &self,
        key: &str,
        expected: Option<Revision>,
    ) -> impl Future<Output = Result<Deleted>> + Send {
        (**self).delete(key, expected)
    }

    fn delete_batch(
        &self,
        deletes: Vec<DeleteRequest>,
    ) -> impl Future<Output = Vec<Result<Deleted>>> + Send {
        (**self).delete_batch(deletes)
    }

    fn watch(&self, prefix: &str, after: Revision) -> impl Future<Output = Result<Watch>> + Send {
        (**self).watch(prefix, after)
    }

    fn watch_state(
        &self,
        prefix: &str,
        read: StateRead,
    ) -> impl Future<Output = Result<Watch>> + Send {
        (**self).watch_state(prefix, read)
    }

    fn current_revision(&self) -> impl Future<Output = Result<Revision>> + Send {
        (**self).current_revision()
    }

    fn compact(&self, revision: Revision) -> impl Future<Output = Result<()>> + Send {
        (**self).compact(revision)
    }

    fn compacted_revision(&self) -> Revision {
        (**self).compacted_revision()
    }

    fn watch_proves_progress(&self) -> bool {
        (**self).watch_proves_progress()
    }

    fn knows_current_revision(&self) -> bool {
        (**self).knows_current_revision()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_validated() {
        assert!(validate_key("/registry/configmaps/default/a").is_ok());
        for bad in ["", "registry/x", "/a\0b", "/a\nb"] {
            assert!(
                matches!(validate_key(bad), Err(Error::InvalidKey { .. })),
                "{bad:?}"
            );
        }
        assert!(validate_key(&format!("/{}", "a".repeat(MAX_KEY_LEN))).is_err());
        let outside = ListRequest {
            prefix: "/a/".into(),
            start: Some("/b/x".into()),
            ..Default::default()
        };
        assert!(validate_list(&outside).is_err());
    }

    #[test]
    fn only_transient_errors_are_retryable() {
        assert!(Error::Timeout.is_retryable());
        assert!(Error::Interrupted("etcd: connection reset".into()).is_retryable());
        assert!(Error::Unavailable("down".into()).is_retryable());
        assert!(!Error::NotFound { key: "/a".into() }.is_retryable());
    }

    #[tokio::test]
    async fn progress_requests_coalesce() {
        let (watch, mut sender) = Watch::channel();
        watch.request_progress();
        watch.request_progress();
        assert!(sender.progress_requests.recv().await.is_some());
        assert!(
            sender.progress_requests.try_recv().is_err(),
            "two requests, one pending answer"
        );
        drop(watch);
        assert!(
            sender.events.send(WatchEvent::Progress(1)).await.is_err(),
            "a dropped watch stops its sender"
        );
    }
}
