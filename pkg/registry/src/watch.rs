//! Watches of a resource: the storage watch, translated into Kubernetes watch events.
//!
//! - The start follows the read semantics: no `resourceVersion` sends the current state as
//!   ADDED events first (`resourceVersion=0` the cache's state), `resourceVersion=N` starts
//!   right after N; `sendInitialEvents` overrides, and ends the initial state with a bookmark
//!   marked `k8s.io/initial-events-end`. The state comes from the storage's own watch
//!   ([`Storage::watch_state`]): from a watch cache, its shared objects, one at a time as the
//!   client reads, each decoded and encoded once for every watcher.
//! - A watcher that fell too far behind is ended by the storage ([`StorageError::TooSlow`]):
//!   the stream then ends with [`WatchItem::Terminated`], and the client watches again.
//! - Selectors apply to transitions, as kube-apiserver applies them: an object that starts to
//!   match is ADDED, one that stops matching is DELETED (with its previous state at the
//!   event's resourceVersion).
//! - Failures, such as a start before the compacted revision (410 Expired), arrive as an ERROR
//!   event inside the stream: that is what clients re-list on.

use genplane_apimachinery::errors::{ApiError, Status};
use genplane_apimachinery::resource_version::{self, ReadOptions, Semantics};
use std::sync::{Arc, OnceLock};

use genplane_storage::{
    Error as StorageError, Event, EventKind, Memo, Revision, StateRead, Storage, Watch, WatchEvent,
};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::store::{ListOptions, Store};

/// The type of a watch event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// The object appeared (or started to match).
    Added,
    /// The object changed.
    Modified,
    /// The object went away (or stopped matching).
    Deleted,
}

impl EventType {
    /// The type as the wire spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// An object a watch delivers, shared by every watcher of the resource that receives the same
/// change (or the same object of the current state): it is encoded as JSON once
/// ([`WatchObject::json`]), decoded again only if a watcher needs the value (a selector, a
/// Table), and whatever else a watcher derives from it once for all ([`WatchObject::derived`]).
/// An object made with [`WatchObject::new`] keeps only its JSON until then, so that a cache's
/// objects cost one encoding each; one made with [`WatchObject::unencoded`] (a previous state,
/// rarely sent) keeps its value and is encoded only if it is sent.
#[derive(Debug)]
pub struct WatchObject {
    json: OnceLock<bytes::Bytes>,
    value: OnceLock<Value>,
    derived: Memo,
}

impl WatchObject {
    /// An object to deliver, encoded now.
    pub fn new(value: Value) -> Self {
        Self {
            json: OnceLock::from(bytes::Bytes::from(genplane_api::order::to_vec(&value))),
            value: OnceLock::new(),
            derived: Memo::default(),
        }
    }

    /// An object given as its JSON, decoded the first time its value is asked for (a selector
    /// that needs it, a form other than JSON).
    pub fn encoded(json: bytes::Bytes) -> Self {
        Self {
            json: OnceLock::from(json),
            value: OnceLock::new(),
            derived: Memo::default(),
        }
    }

    /// An object that may be delivered, encoded the first time it is.
    pub fn unencoded(value: Value) -> Self {
        Self {
            json: OnceLock::new(),
            value: OnceLock::from(value),
            derived: Memo::default(),
        }
    }

    /// The object, decoded from its JSON the first time it is asked for.
    pub fn value(&self) -> &Value {
        self.value.get_or_init(|| {
            self.json
                .get()
                .and_then(|json| serde_json::from_slice(json).ok())
                .unwrap_or_default()
        })
    }

    /// The object as JSON.
    pub fn json(&self) -> &[u8] {
        self.json.get_or_init(|| {
            genplane_api::order::to_vec(self.value.get().unwrap_or(&Value::Null)).into()
        })
    }

    /// The object as JSON, shared (a reference to the same bytes).
    pub fn json_bytes(&self) -> bytes::Bytes {
        self.json();
        self.json.get().cloned().unwrap_or_default()
    }

    /// What `owner` (an address identifying the deriving layer and form) derives from the
    /// object, computed by `init` the first time, shared with every watcher after that.
    pub fn derived<T: std::any::Any + Send + Sync>(
        &self,
        owner: usize,
        init: impl FnOnce() -> T,
    ) -> Arc<T> {
        self.derived.get_or_insert_with(owner, init)
    }
}

impl std::ops::Deref for WatchObject {
    type Target = Value;

    fn deref(&self) -> &Value {
        self.value()
    }
}

impl PartialEq for WatchObject {
    fn eq(&self, other: &Self) -> bool {
        self.json() == other.json() || self.value() == other.value()
    }
}

/// What a watch delivers.
#[derive(Clone, Debug, PartialEq)]
pub enum WatchItem {
    /// An object event.
    Event(EventType, Arc<WatchObject>),
    /// Everything up to `resource_version` has been delivered.
    Bookmark {
        /// The revision reached.
        resource_version: String,
        /// Whether this bookmark ends the initial events of `sendInitialEvents=true`.
        initial_events_end: bool,
    },
    /// The watch failed; nothing follows.
    Error(ApiError),
    /// The watcher fell too far behind and was ended; nothing follows. The stream ends without
    /// an error (as kube-apiserver ends unresponsive watchers), and the client watches again
    /// from the last resourceVersion it received.
    Terminated,
}

/// A running watch; dropping it stops the watch.
#[derive(Debug)]
pub struct WatchStream {
    items: mpsc::Receiver<WatchItem>,
    bookmarks: mpsc::Sender<()>,
}

impl WatchStream {
    /// The next item, or `None` when the watch ended.
    pub async fn next(&mut self) -> Option<WatchItem> {
        self.items.recv().await
    }

    /// Asks for a bookmark with the revision the watch has reached.
    pub fn request_bookmark(&self) {
        let _ = self.bookmarks.try_send(());
    }
}

impl<S: Storage> Store<S> {
    /// Watches objects of `namespace` (all namespaces when empty).
    pub async fn watch(
        &self,
        namespace: &str,
        options: &ListOptions,
    ) -> Result<WatchStream, ApiError> {
        // Checks the field names before anything starts.
        self.selection(options)?;
        let read = ReadOptions {
            watch: true,
            ..options.read.clone()
        };
        let semantics = resource_version::read_semantics(&read)?;
        let send_initial = read.send_initial_events;
        let current = || async {
            self.storage()
                .current_revision()
                .await
                .map_err(|e| self.storage_error(e, "watch", ""))
        };
        let prefix = self.list_prefix(namespace);
        // A failure to read the state is the request's answer, as a list's would be.
        let state = |read| async move {
            self.storage()
                .watch_state(&self.list_prefix(namespace), read)
                .await
                .map(Source::State)
                .map_err(|e| self.storage_error(e, "watch", ""))
        };
        let source = match semantics {
            Semantics::Consistent if send_initial != Some(false) => {
                state(StateRead::Current).await?
            }
            Semantics::Any if send_initial != Some(false) => state(StateRead::Any).await?,
            Semantics::Consistent | Semantics::Any => Source::After(prefix, current().await?),
            Semantics::NotOlderThan(at) if send_initial == Some(true) => {
                self.require_revision(at, "watch").await?;
                state(StateRead::Current).await?
            }
            Semantics::NotOlderThan(at) => Source::After(prefix, at),
            Semantics::Exact(_) | Semantics::Continue(_) => {
                return Err(Status::bad_request(
                    "a watch cannot start from an exact revision or a continue token",
                )
                .into());
            }
        };
        // Few items are buffered per watcher: each holds a shared object, and the storage
        // watch below buffers the shared events.
        let (items_tx, items) = mpsc::channel(16);
        let (bookmarks, bookmark_requests) = mpsc::channel(1);
        let store = self.clone();
        let options = options.clone();
        let end_marker = send_initial == Some(true);
        tokio::spawn(async move {
            store
                .feed(source, options, end_marker, items_tx, bookmark_requests)
                .await;
        });
        Ok(WatchStream { items, bookmarks })
    }

    async fn feed(
        &self,
        source: Source,
        options: ListOptions,
        end_marker: bool,
        items: mpsc::Sender<WatchItem>,
        mut bookmark_requests: mpsc::Receiver<()>,
    ) {
        let Ok(selection) = self.selection(&options) else {
            return;
        };
        let (mut watch, mut in_state, mut reached) = match source {
            Source::State(watch) => (watch, true, 0),
            Source::After(prefix, after) => match self.storage().watch(&prefix, after).await {
                Ok(watch) => (watch, false, after),
                Err(e) => {
                    let _ = items
                        .send(WatchItem::Error(self.storage_error(e, "watch", "")))
                        .await;
                    return;
                }
            },
        };
        loop {
            tokio::select! {
                message = watch.next() => match message {
                    Some(WatchEvent::Event(event)) => {
                        if !in_state {
                            reached = event.revision();
                        }
                        match self.translate(&selection, &event, !in_state).await {
                            Ok(Some(item)) => {
                                if items.send(item).await.is_err() {
                                    return;
                                }
                            }
                            Ok(None) => {}
                            Err(e) => {
                                let _ = items.send(WatchItem::Error(e)).await;
                                return;
                            }
                        }
                    }
                    Some(WatchEvent::Progress(revision)) => {
                        reached = reached.max(revision);
                        // The first progress report of a watch with the state ends the state.
                        let initial_events_end = std::mem::take(&mut in_state);
                        if initial_events_end && !end_marker {
                            continue;
                        }
                        let bookmark = WatchItem::Bookmark { resource_version: reached.to_string(), initial_events_end };
                        if items.send(bookmark).await.is_err() {
                            return;
                        }
                    }
                    Some(WatchEvent::Error(StorageError::TooSlow { .. })) => {
                        let _ = items.send(WatchItem::Terminated).await;
                        return;
                    }
                    Some(WatchEvent::Error(e)) => {
                        let _ = items.send(WatchItem::Error(self.storage_error(e, "watch", ""))).await;
                        return;
                    }
                    None => return,
                },
                request = bookmark_requests.recv(), if !in_state => match request {
                    Some(()) => watch.request_progress(),
                    None => return,
                },
                () = items.closed() => return,
            }
        }
    }

    /// The served object of an event from its stored bytes at `revision`: written from them
    /// for a resource served as stored (decoded later only if a selector needs it), else
    /// decoded, and encoded now when `deliver` says it will be sent (a new state) rather than
    /// perhaps only consulted (a previous state). `hint` is the layout a cache kept with the
    /// bytes (a watch's initial state is the cache's objects), or 0.
    async fn watch_object(
        &self,
        stored: &bytes::Bytes,
        revision: Revision,
        deliver: bool,
        hint: u64,
    ) -> Result<WatchObject, ApiError> {
        if let Some(served) = self.served_verbatim(stored, revision, hint) {
            let mut json = Vec::with_capacity(served.len());
            served.write_into(&mut json);
            return Ok(WatchObject::encoded(json.into()));
        }
        let object = self.served_bytes(stored, revision).await?;
        if !deliver {
            return Ok(WatchObject::unencoded(object));
        }
        self.served
            .decoded
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(WatchObject::new(object))
    }

    /// The watch event a storage event becomes for this selection, if any. The objects of a
    /// change (`live`) are decoded once per event and resource (in the event's memo) and shared
    /// by every watcher. Those of a watch's initial state are a cache's objects themselves,
    /// which live as long as the objects do: what one watch derives from them is not kept
    /// (it would double each cached object's memory for its whole life to save the next such
    /// watch a copy), though what the change's watchers kept is used.
    ///
    /// Deriving may call out (a custom resource's conversion webhook): the memo holds an
    /// asynchronous cell, which the first watcher fills while the others wait for it without
    /// holding a thread or a lock.
    async fn translate(
        &self,
        selection: &crate::selection::Selection<'_>,
        event: &Event,
        live: bool,
    ) -> Result<Option<WatchItem>, ApiError> {
        // A watch of named objects (one ConfigMap by `metadata.name`, say, among a million
        // changing) decides from the event's key, without decoding the objects it skips.
        let by_key = self.selected_by_key(selection, &event.kv.key);
        if by_key == Some(false) {
            return Ok(None);
        }
        let owner = Arc::as_ptr(self.strategy_arc()).cast::<()>() as usize;
        let decoded = if live {
            let cell = event
                .memo
                .get_or_insert_with(owner, tokio::sync::OnceCell::<Arc<Decoded>>::new);
            cell.get_or_init(|| async { Arc::new(self.derive(event).await) })
                .await
                .clone()
        } else {
            match event
                .memo
                .get::<tokio::sync::OnceCell<Arc<Decoded>>>(owner)
                .and_then(|cell| cell.get().cloned())
            {
                Some(decoded) => decoded,
                None => Arc::new(self.derive(event).await),
            }
        };
        let selects = |object: &WatchObject| {
            by_key.unwrap_or_else(|| {
                selection.is_everything() || self.selects(selection, object.value())
            })
        };
        let old = decoded.old.clone().transpose()?;
        let old_selected = old.as_deref().map(selects);
        Ok(match event.kind {
            EventKind::Delete => match (old, old_selected) {
                (Some(old), Some(true)) => Some(WatchItem::Event(EventType::Deleted, old)),
                _ => None,
            },
            EventKind::Create | EventKind::Update => {
                let Some(new) = decoded.new.clone().transpose()? else {
                    return Ok(None);
                };
                let new_selected = selects(&new);
                match (
                    old_selected.unwrap_or(new_selected && event.kind == EventKind::Update),
                    new_selected,
                ) {
                    (false, true) => Some(WatchItem::Event(EventType::Added, new)),
                    (true, true) => Some(WatchItem::Event(EventType::Modified, new)),
                    (true, false) => old.map(|old| WatchItem::Event(EventType::Deleted, old)),
                    (false, false) => None,
                }
            }
        })
    }
}

impl<S: Storage> Store<S> {
    /// The objects of `event` decoded for this resource: the previous state (at the event's
    /// resourceVersion, as upstream sends it) and the new one.
    async fn derive(&self, event: &Event) -> Decoded {
        let revision = event.revision();
        let old = match &event.prev {
            Some(prev) => Some(
                self.watch_object(&prev.value, revision, false, 0)
                    .await
                    .map(Arc::new),
            ),
            None => None,
        };
        let new = if event.kind == EventKind::Delete {
            None
        } else {
            Some(
                self.watch_object(&event.kv.value, revision, true, event.memo.hint())
                    .await
                    .map(Arc::new),
            )
        };
        Decoded { old, new }
    }
}

/// What a watch's task reads from.
enum Source {
    /// A storage watch that starts with the state.
    State(Watch),
    /// A storage watch of the prefix to open after the revision.
    After(String, Revision),
}

/// The objects of one storage event, decoded for one resource.
struct Decoded {
    old: Option<Result<Arc<WatchObject>, ApiError>>,
    new: Option<Result<Arc<WatchObject>, ApiError>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_is_the_same_whether_encoded_first_or_when_sent() {
        let value = serde_json::json!({"metadata": {"name": "a"}, "data": {"k": "v"}});
        let encoded = WatchObject::new(value.clone());
        let unencoded = WatchObject::unencoded(value.clone());
        assert_eq!(encoded.json(), unencoded.json());
        assert_eq!(encoded.value(), &value);
        assert_eq!(unencoded.value(), &value);
        assert_eq!(
            &encoded.json_bytes()[..],
            genplane_api::order::to_vec(&value)
        );
        assert!(encoded == unencoded);
        let first = encoded.derived(1, || 7);
        assert!(
            Arc::ptr_eq(&first, &encoded.derived(1, || 8)),
            "derived once"
        );
    }
}
