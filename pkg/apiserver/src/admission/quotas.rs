//! The stored ResourceQuotas as the `ResourceQuota` admission plugin reads and charges them:
//! listed from the watch cache's memory (`resourceVersion=0`, no storage read per create), or
//! consistently after a write conflicted; charges written through the `status` subresource's
//! store over the version read (the store's resourceVersion precondition).

use genplane_admission::BoxFuture;
use genplane_admission::quota::Quotas;
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::resource_version::ReadOptions;
use genplane_registry::{ListOptions, Store, WriteOptions};
use genplane_storage::Storage;
use serde_json::Value;

/// The stores of a server's ResourceQuotas.
pub struct StoredQuotas<S: Storage> {
    /// The store of ResourceQuotas.
    pub quotas: Store<S>,
    /// The store of their `status` subresource.
    pub status: Store<S>,
}

impl<S: Storage> std::fmt::Debug for StoredQuotas<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StoredQuotas")
    }
}

impl<S: Storage> Quotas for StoredQuotas<S> {
    fn list<'a>(
        &'a self,
        namespace: &'a str,
        fresh: bool,
    ) -> BoxFuture<'a, Result<Vec<Value>, ApiError>> {
        Box::pin(async move {
            let options = ListOptions {
                read: ReadOptions {
                    resource_version: (!fresh).then(|| "0".to_owned()),
                    ..ReadOptions::default()
                },
                ..ListOptions::default()
            };
            Ok(self.quotas.list(namespace, &options).await?.items)
        })
    }

    fn update_status<'a>(&'a self, quota: Value) -> BoxFuture<'a, Result<Value, ApiError>> {
        Box::pin(async move {
            let metadata = &quota["metadata"];
            let (namespace, name) = (
                metadata["namespace"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                metadata["name"].as_str().unwrap_or_default().to_owned(),
            );
            let written = self
                .status
                .update(&namespace, &name, quota, &WriteOptions::default())
                .await?;
            Ok(written.object)
        })
    }
}
