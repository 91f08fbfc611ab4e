//! A store's objects mirrored in memory from a watch ([`Store::mirror`]), for code that reads
//! them on every request: the admission plugins read their webhook configurations, policies
//! and bindings from mirrors, as upstream's plugins read informers.
//!
//! Reading a mirror ([`Mirror::snapshot`]) clones one `Arc`; a list from the watch cache
//! would copy every object on every write. Each change makes a new [`Snapshot`] with a higher
//! [`Snapshot::generation`], so that a reader can keep what it derived from a snapshot (parsed
//! specs, compiled expressions) until the generation moves.
//!
//! The mirror starts with a watch that sends the current state first (a consistent read) and
//! follows its events. When the watch fails or is ended, it watches again from the state, so
//! a snapshot never goes back to a partial state: the state is replaced at once when the new
//! watch's initial events end. Until the first state is complete, [`Mirror::snapshot`] waits
//! for it (a request at start-up is decided on every object, never on none).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use genplane_apimachinery::resource_version::ReadOptions;
use genplane_storage::Storage;
use serde_json::Value;
use tokio::sync::watch;

use crate::store::{ListOptions, Store};
use crate::watch::{EventType, WatchItem, WatchObject};

/// How long the mirror waits before watching again after a watch failed.
const RETRY: Duration = Duration::from_secs(1);

/// The objects of a store at one moment.
#[derive(Debug, Default)]
pub struct Snapshot {
    generation: u64,
    synced: bool,
    objects: BTreeMap<(String, String), Arc<Value>>,
}

impl Snapshot {
    /// Grows by one with every change the mirror saw; 0 before the first state.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The objects, in (namespace, name) order.
    pub fn objects(&self) -> impl Iterator<Item = &Value> {
        self.objects.values().map(|o| o.as_ref())
    }

    /// How many objects there are.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// The object `name` of `namespace` (empty for a cluster-scoped kind).
    pub fn get(&self, namespace: &str, name: &str) -> Option<&Arc<Value>> {
        self.objects.get(&(namespace.to_owned(), name.to_owned()))
    }
}

/// A store's objects kept current in memory; the watch stops when the mirror is dropped.
#[derive(Debug)]
pub struct Mirror {
    state: watch::Receiver<Arc<Snapshot>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Mirror {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Mirror {
    /// The current objects, once the first state is complete.
    pub async fn snapshot(&self) -> Arc<Snapshot> {
        let current = self.state.borrow().clone();
        if current.synced {
            return current;
        }
        let mut state = self.state.clone();
        match state.wait_for(|s| s.synced).await {
            Ok(synced) => synced.clone(),
            // the task ended (aborted): what it last had
            Err(_) => self.state.borrow().clone(),
        }
    }
}

/// An event's object as the mirror keeps it (decoded once, for every reader).
fn shared(object: &WatchObject) -> Arc<Value> {
    Arc::new(object.value().clone())
}

/// The (namespace, name) of an object.
fn key(object: &Value) -> (String, String) {
    let text = |field: &str| {
        object
            .pointer(&format!("/metadata/{field}"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    (text("namespace"), text("name"))
}

impl<S: Storage> Store<S> {
    /// The store's objects of every namespace, mirrored in memory from now on.
    pub fn mirror(&self) -> Mirror {
        let (publish, state) = watch::channel(Arc::new(Snapshot::default()));
        let store = self.clone();
        let task = tokio::spawn(async move { store.follow(publish).await });
        Mirror { state, task }
    }

    /// Watches from the state, again and again, publishing each change.
    async fn follow(&self, publish: watch::Sender<Arc<Snapshot>>) {
        let options = ListOptions {
            read: ReadOptions {
                resource_version_match: Some("NotOlderThan".to_owned()),
                send_initial_events: Some(true),
                allow_watch_bookmarks: true,
                ..ReadOptions::default()
            },
            ..ListOptions::default()
        };
        let mut generation = 0;
        loop {
            match self.watch("", &options).await {
                Ok(mut stream) => {
                    // the initial events gather here until their end replaces the state
                    let mut initial = Some(BTreeMap::new());
                    while let Some(item) = stream.next().await {
                        let objects = match (&mut initial, &item) {
                            (Some(gathering), WatchItem::Event(_, object)) => {
                                gathering.insert(key(object), shared(object));
                                continue;
                            }
                            (
                                Some(_),
                                WatchItem::Bookmark {
                                    initial_events_end: true,
                                    ..
                                },
                            ) => initial.take().unwrap_or_default(),
                            (None, WatchItem::Event(kind, object)) => {
                                let mut objects = publish.borrow().objects.clone();
                                let key = key(object);
                                if *kind == EventType::Deleted {
                                    objects.remove(&key);
                                } else {
                                    objects.insert(key, shared(object));
                                }
                                objects
                            }
                            (_, WatchItem::Bookmark { .. }) => continue,
                            (_, WatchItem::Error(error)) => {
                                tracing::warn!(%error, prefix = self.strategy().key_prefix(), "mirror watch failed");
                                break;
                            }
                            (_, WatchItem::Terminated) => break,
                        };
                        generation += 1;
                        let snapshot = Snapshot {
                            generation,
                            synced: true,
                            objects,
                        };
                        publish.send_replace(Arc::new(snapshot));
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, prefix = self.strategy().key_prefix(), "mirror watch could not start");
                }
            }
            tokio::time::sleep(RETRY).await;
        }
    }
}
