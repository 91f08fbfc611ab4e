//! The stored webhook configurations as the webhook admission plugins read them: listed from
//! the watch cache's memory (`resourceVersion=0`), so that a write costs no storage read, as
//! upstream's plugins read them from an informer. A configuration just written reaches the
//! plugins when the cache has seen it (usually within milliseconds).

use genplane_admission::BoxFuture;
use genplane_admission::webhook::{Configurations, Flavor};
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::resource_version::ReadOptions;
use genplane_registry::{ListOptions, Store};
use genplane_storage::Storage;
use serde_json::Value;

/// The stores of a server's validating and mutating webhook configurations.
pub struct StoredWebhookConfigurations<S: Storage> {
    /// The store of ValidatingWebhookConfigurations.
    pub validating: Store<S>,
    /// The store of MutatingWebhookConfigurations.
    pub mutating: Store<S>,
}

impl<S: Storage> std::fmt::Debug for StoredWebhookConfigurations<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StoredWebhookConfigurations")
    }
}

impl<S: Storage> Configurations for StoredWebhookConfigurations<S> {
    fn list(&self, flavor: Flavor) -> BoxFuture<'_, Result<Vec<Value>, ApiError>> {
        Box::pin(async move {
            let store = match flavor {
                Flavor::Validating => &self.validating,
                Flavor::Mutating => &self.mutating,
            };
            let options = ListOptions {
                read: ReadOptions {
                    resource_version: Some("0".to_owned()),
                    ..ReadOptions::default()
                },
                ..ListOptions::default()
            };
            Ok(store.list("", &options).await?.items)
        })
    }
}
