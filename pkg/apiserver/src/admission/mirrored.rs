//! Stored objects that admission plugins read on every write, kept in memory by a watch.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use genplane_admission::Listed;
use genplane_registry::{Mirror, Store};
use genplane_storage::Storage;

/// The objects of a store as [`Listed`] for admission plugins, from a [`Mirror`] started at
/// the first read (in the runtime that serves requests) and shared until it changes.
pub struct MirroredList<S: Storage> {
    store: Store<S>,
    mirror: OnceLock<Mirror>,
    /// The last list made, for the snapshot generation it was made from.
    listed: Mutex<Option<(u64, Arc<Vec<serde_json::Value>>)>>,
}

impl<S: Storage> MirroredList<S> {
    /// The objects of `store`, mirrored once first read.
    pub fn new(store: Store<S>) -> Self {
        Self {
            store,
            mirror: OnceLock::new(),
            listed: Mutex::new(None),
        }
    }

    /// The current objects.
    pub async fn list(&self) -> Listed {
        let snapshot = self
            .mirror
            .get_or_init(|| self.store.mirror())
            .snapshot()
            .await;
        let generation = snapshot.generation();
        let mut listed = self.listed.lock().unwrap_or_else(PoisonError::into_inner);
        let items = match &*listed {
            Some((made_from, items)) if *made_from == generation => items.clone(),
            _ => {
                let items = Arc::new(snapshot.objects().cloned().collect::<Vec<_>>());
                *listed = Some((generation, items.clone()));
                items
            }
        };
        Listed {
            generation: Some(generation),
            items,
        }
    }
}

impl<S: Storage> std::fmt::Debug for MirroredList<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MirroredList")
            .field("started", &self.mirror.get().is_some())
            .finish_non_exhaustive()
    }
}
