//! The stored namespaces as the admission plugins read them (NamespaceLifecycle and its
//! siblings): through the Namespaces store, read consistently so that a namespace created just
//! before is found, or from an in-memory mirror kept by a watch (as upstream's plugins read
//! an informer), which costs no decoding.

use std::sync::{Arc, OnceLock};

use genplane_admission::BoxFuture;
use genplane_apimachinery::errors::ApiError;
use genplane_registry::{Mirror, Store, WriteOptions};
use genplane_storage::Storage;
use serde_json::{Value, json};

/// The namespaces of a server's Namespaces store.
pub struct StoredNamespaces<S: Storage> {
    store: Store<S>,
    /// The namespaces in memory, mirrored from the first cached read on.
    mirror: OnceLock<Mirror>,
}

impl<S: Storage> StoredNamespaces<S> {
    /// The namespaces of `store`.
    pub fn new(store: Store<S>) -> Self {
        Self {
            store,
            mirror: OnceLock::new(),
        }
    }
}

impl<S: Storage> std::fmt::Debug for StoredNamespaces<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StoredNamespaces")
    }
}

impl<S: Storage> genplane_admission::namespace::Namespaces for StoredNamespaces<S> {
    fn get<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Value>, ApiError>> {
        Box::pin(async move {
            match self.store.get("", name, None).await {
                Ok(found) => Ok(Some(found)),
                Err(e) if e.code == 404 => Ok(None),
                Err(e) => Err(e),
            }
        })
    }

    fn get_cached<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Arc<Value>>, ApiError>> {
        Box::pin(async move {
            let mirror = self.mirror.get_or_init(|| self.store.mirror());
            Ok(mirror.snapshot().await.get("", name).cloned())
        })
    }

    fn create<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            let namespace =
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
            match self
                .store
                .create("", namespace, &WriteOptions::default())
                .await
            {
                Ok(_) => Ok(()),
                Err(e) if e.code == 409 => Ok(()),
                Err(e) => Err(e),
            }
        })
    }
}
