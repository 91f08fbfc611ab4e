//! Watches of a resource: the storage watch, translated into Kubernetes watch events.
//!
//! - The start follows the read semantics: no `resourceVersion` sends the current state as
//!   ADDED events first (`resourceVersion=0` the cache's state), `resourceVersion=N` starts
//!   right after N; `sendInitialEvents` overrides, and ends the initial state with a bookmark
//!   marked `k8s.io/initial-events-end`.
//! - Selectors apply to transitions, as kube-apiserver applies them: an object that starts to
//!   match is ADDED, one that stops matching is DELETED (with its previous state at the
//!   event's resourceVersion).
//! - Failures, such as a start before the compacted revision (410 Expired), arrive as an ERROR
//!   event inside the stream: that is what clients re-list on.

use genplane_apimachinery::errors::{ApiError, Status};
use genplane_apimachinery::resource_version::{self, ReadOptions, Semantics};
use std::sync::{Arc, OnceLock};

use genplane_storage::{Event, EventKind, Revision, Storage, WatchEvent};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::object;
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
/// change: it is decoded once, and its JSON encoding is made once ([`WatchObject::json`]).
#[derive(Debug)]
pub struct WatchObject {
    value: Value,
    json: OnceLock<bytes::Bytes>,
}

impl WatchObject {
    /// An object to deliver.
    pub fn new(value: Value) -> Self {
        Self {
            value,
            json: OnceLock::new(),
        }
    }

    /// The object.
    pub fn value(&self) -> &Value {
        &self.value
    }

    /// The object as JSON, encoded by the first watcher that asks.
    pub fn json(&self) -> &[u8] {
        self.json
            .get_or_init(|| serde_json::to_vec(&self.value).unwrap_or_default().into())
    }
}

impl std::ops::Deref for WatchObject {
    type Target = Value;

    fn deref(&self) -> &Value {
        &self.value
    }
}

impl PartialEq for WatchObject {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
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
        let everything = |rv: &str| ListOptions {
            read: ReadOptions {
                resource_version: Some(rv.to_owned()),
                ..ReadOptions::default()
            },
            ..options.clone()
        };
        let current = || async {
            self.storage()
                .current_revision()
                .await
                .map_err(|e| self.storage_error(e, ""))
        };
        let (initial, after) = match semantics {
            Semantics::Consistent | Semantics::Any if send_initial != Some(false) => {
                let rv = if semantics == Semantics::Any { "0" } else { "" };
                let listed = self.list(namespace, &everything(rv)).await?;
                (
                    listed.items,
                    resource_version::parse(&listed.resource_version)?,
                )
            }
            Semantics::Consistent | Semantics::Any => (Vec::new(), current().await?),
            Semantics::NotOlderThan(at) if send_initial == Some(true) => {
                let listed = self.list(namespace, &everything(&at.to_string())).await?;
                (
                    listed.items,
                    resource_version::parse(&listed.resource_version)?,
                )
            }
            Semantics::NotOlderThan(at) => (Vec::new(), at),
            Semantics::Exact(_) | Semantics::Continue(_) => {
                return Err(Status::bad_request(
                    "a watch cannot start from an exact revision or a continue token",
                )
                .into());
            }
        };
        // Few items are buffered per watcher: each holds a decoded object, and the storage
        // watch below buffers the cheap shared events.
        let (items_tx, items) = mpsc::channel(16);
        let (bookmarks, bookmark_requests) = mpsc::channel(1);
        let store = self.clone();
        let prefix = self.list_prefix(namespace);
        let options = options.clone();
        let end_marker = send_initial == Some(true);
        tokio::spawn(async move {
            store
                .feed(
                    prefix,
                    options,
                    initial,
                    after,
                    end_marker,
                    items_tx,
                    bookmark_requests,
                )
                .await;
        });
        Ok(WatchStream { items, bookmarks })
    }

    #[allow(clippy::too_many_arguments)]
    async fn feed(
        &self,
        prefix: String,
        options: ListOptions,
        initial: Vec<Value>,
        after: Revision,
        end_marker: bool,
        items: mpsc::Sender<WatchItem>,
        mut bookmark_requests: mpsc::Receiver<()>,
    ) {
        let Ok(selection) = self.selection(&options) else {
            return;
        };
        for object in initial {
            if items
                .send(WatchItem::Event(
                    EventType::Added,
                    Arc::new(WatchObject::new(object)),
                ))
                .await
                .is_err()
            {
                return;
            }
        }
        if end_marker {
            let bookmark = WatchItem::Bookmark {
                resource_version: after.to_string(),
                initial_events_end: true,
            };
            if items.send(bookmark).await.is_err() {
                return;
            }
        }
        let mut watch = match self.storage().watch(&prefix, after).await {
            Ok(watch) => watch,
            Err(e) => {
                let _ = items
                    .send(WatchItem::Error(self.storage_error(e, "")))
                    .await;
                return;
            }
        };
        let mut reached = after;
        loop {
            tokio::select! {
                message = watch.next() => match message {
                    Some(WatchEvent::Event(event)) => {
                        reached = event.revision();
                        match self.translate(&selection, &event) {
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
                        let bookmark = WatchItem::Bookmark { resource_version: reached.to_string(), initial_events_end: false };
                        if items.send(bookmark).await.is_err() {
                            return;
                        }
                    }
                    Some(WatchEvent::Error(e)) => {
                        let _ = items.send(WatchItem::Error(self.storage_error(e, ""))).await;
                        return;
                    }
                    None => return,
                },
                request = bookmark_requests.recv() => match request {
                    Some(()) => watch.request_progress(),
                    None => return,
                },
                () = items.closed() => return,
            }
        }
    }

    /// The watch event a storage event becomes for this selection, if any. The objects are
    /// decoded once per event and resource (in the event's memo) and shared by every watcher.
    fn translate(
        &self,
        selection: &crate::selection::Selection<'_>,
        event: &Event,
    ) -> Result<Option<WatchItem>, ApiError> {
        let revision = event.revision();
        let owner = Arc::as_ptr(self.strategy_arc()).cast::<()>() as usize;
        let decoded = event.memo.get_or_insert_with(owner, || Decoded {
            // The previous state, at the event's resourceVersion (as upstream sends it).
            old: event.prev.as_ref().map(|prev| {
                object::decode(&prev.value, revision).map(|o| Arc::new(WatchObject::new(o)))
            }),
            new: (event.kind != EventKind::Delete).then(|| {
                self.served_bytes(&event.kv.value, revision)
                    .map(|o| Arc::new(WatchObject::new(o)))
            }),
        });
        let old = decoded.old.clone().transpose()?;
        let old_selected = old.as_ref().map(|o| self.selects(selection, o));
        Ok(match event.kind {
            EventKind::Delete => match (old, old_selected) {
                (Some(old), Some(true)) => Some(WatchItem::Event(EventType::Deleted, old)),
                _ => None,
            },
            EventKind::Create | EventKind::Update => {
                let Some(new) = decoded.new.clone().transpose()? else {
                    return Ok(None);
                };
                let new_selected = self.selects(selection, &new);
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

/// The objects of one storage event, decoded for one resource.
struct Decoded {
    old: Option<Result<Arc<WatchObject>, ApiError>>,
    new: Option<Result<Arc<WatchObject>, ApiError>>,
}
