//! The stored ValidatingAdmissionPolicies, their bindings and their params as the
//! `ValidatingAdmissionPolicy` plugin reads them: policies and bindings from mirrors kept by
//! watches ([`MirroredList`]), params from the watch cache's memory (`resourceVersion=0`), so
//! that a write costs no storage read, as upstream's plugin reads them from informers. Params
//! may be of any kind the server serves at the time of the write, built-in or custom (the
//! served set is read on each lookup).

use std::sync::Arc;

use genplane_admission::policy::{ParamSelection, Policies};
use genplane_admission::{BoxFuture, Listed};
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::resource_version::ReadOptions;
use genplane_registry::{ListOptions, Store};
use genplane_storage::Storage;
use serde_json::{Value, json};

use crate::mirrored::MirroredList;

/// Finds the store of a kind served at the time of the call: given `group`, `version` and
/// `kind`, whether it is namespaced and its store.
pub type KindStores<S> = Arc<dyn Fn(&str, &str, &str) -> Option<(bool, Store<S>)> + Send + Sync>;

/// The stores of a server's policies and bindings, and of what it serves (for params).
pub struct StoredPolicies<S: Storage> {
    /// The ValidatingAdmissionPolicies.
    pub policies: MirroredList<S>,
    /// The ValidatingAdmissionPolicyBindings.
    pub bindings: MirroredList<S>,
    /// The stores of the served kinds.
    pub kinds: KindStores<S>,
}

impl<S: Storage> std::fmt::Debug for StoredPolicies<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StoredPolicies")
    }
}

/// A list from memory.
fn cached(labels: genplane_apimachinery::labels::Selector) -> ListOptions {
    ListOptions {
        labels,
        read: ReadOptions {
            resource_version: Some("0".to_owned()),
            ..ReadOptions::default()
        },
        ..ListOptions::default()
    }
}

impl<S: Storage> StoredPolicies<S> {
    /// Whether the kind `api_version`/`kind` is namespaced, and its store, when it is served.
    fn param_store(&self, api_version: &str, kind: &str) -> Option<(bool, Store<S>)> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        (self.kinds)(group, version, kind)
    }
}

impl<S: Storage> Policies for StoredPolicies<S> {
    fn policies(&self) -> BoxFuture<'_, Result<Listed, ApiError>> {
        Box::pin(async move { Ok(self.policies.list().await) })
    }

    fn bindings(&self) -> BoxFuture<'_, Result<Listed, ApiError>> {
        Box::pin(async move { Ok(self.bindings.list().await) })
    }

    fn param_scope(&self, api_version: &str, kind: &str) -> Option<bool> {
        self.param_store(api_version, kind)
            .map(|(namespaced, _)| namespaced)
    }

    fn params<'a>(
        &'a self,
        api_version: &'a str,
        kind: &'a str,
        namespace: &'a str,
        selection: ParamSelection<'a>,
    ) -> BoxFuture<'a, Result<Vec<Arc<Value>>, ApiError>> {
        Box::pin(async move {
            let Some((_, store)) = self.param_store(api_version, kind) else {
                return Ok(Vec::new());
            };
            let params = match selection {
                ParamSelection::Name(name) => match store.get_shared(namespace, name).await {
                    Ok(param) => vec![param],
                    Err(e) if e.code == 404 => Vec::new(),
                    Err(e) => return Err(e),
                },
                ParamSelection::Selector(selector) => store
                    .list(namespace, &cached(selector.clone()))
                    .await?
                    .items
                    .into_iter()
                    .map(Arc::new)
                    .collect(),
            };
            // as the params' kind names them (a custom resource may be served in another
            // version than the one read)
            Ok(params
                .into_iter()
                .map(|mut param| {
                    let typed = param["apiVersion"] == api_version && param["kind"] == kind;
                    if !typed {
                        let param = Arc::make_mut(&mut param);
                        param["apiVersion"] = json!(api_version);
                        param["kind"] = json!(kind);
                    }
                    param
                })
                .collect())
        })
    }
}
