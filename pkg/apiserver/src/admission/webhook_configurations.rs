//! The stored webhook configurations as the webhook admission plugins read them: from
//! mirrors kept by watches ([`MirroredList`]), so that a write costs no storage read and no
//! copy, as upstream's plugins read them from an informer. A configuration just written
//! reaches the plugins when the watch has delivered it (usually within milliseconds).

use genplane_admission::webhook::{Configurations, Flavor};
use genplane_admission::{BoxFuture, Listed};
use genplane_apimachinery::errors::ApiError;
use genplane_storage::Storage;

use crate::admission::mirrored::MirroredList;

/// The mirrored lists of a server's validating and mutating webhook configurations.
pub struct StoredWebhookConfigurations<S: Storage> {
    /// The ValidatingWebhookConfigurations.
    pub validating: MirroredList<S>,
    /// The MutatingWebhookConfigurations.
    pub mutating: MirroredList<S>,
}

impl<S: Storage> std::fmt::Debug for StoredWebhookConfigurations<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StoredWebhookConfigurations")
    }
}

impl<S: Storage> Configurations for StoredWebhookConfigurations<S> {
    fn list(&self, flavor: Flavor) -> BoxFuture<'_, Result<Listed, ApiError>> {
        Box::pin(async move {
            Ok(match flavor {
                Flavor::Validating => self.validating.list().await,
                Flavor::Mutating => self.mutating.list().await,
            })
        })
    }
}
