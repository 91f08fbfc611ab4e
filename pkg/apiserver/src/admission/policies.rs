//! The stored ValidatingAdmissionPolicies, their bindings and their params as the
//! `ValidatingAdmissionPolicy` plugin reads them: policies and bindings from mirrors kept by
//! watches ([`MirroredList`]), params from the watch cache's memory (`resourceVersion=0`), so
//! that a write costs no storage read, as upstream's plugin reads them from informers. Params
//! may be of any kind the server serves at the time of the write, built-in or custom (the
//! served set is read on each lookup, [`ServedParams`]). The MutatingAdmissionPolicies and their
//! bindings are read the same way, and their apply configurations merged with the served type
//! model ([`StoredMutatingPolicies`]).

use std::sync::Arc;

use genplane_admission::mutating_policy::MutatingPolicies;
use genplane_admission::params::{ParamSelection, Params};
use genplane_admission::validating_policy::Policies;
use genplane_admission::{BoxFuture, Listed};
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::resource_version::ReadOptions;
use genplane_apimachinery::schema::GroupVersionKind;
use genplane_registry::{ListOptions, Store};
use genplane_storage::Storage;
use serde_json::{Value, json};

use crate::admission::mirrored::MirroredList;

/// Finds the store of a kind served at the time of the call: given `group`, `version` and
/// `kind`, whether it is namespaced and its store.
pub type KindStores<S> = Arc<dyn Fn(&str, &str, &str) -> Option<(bool, Store<S>)> + Send + Sync>;

/// The served type model that describes a kind (given `group`, `version` and `kind`) at the
/// time of the call (server-side apply's).
pub type ServedTypes = Arc<dyn Fn(&str, &str, &str) -> Arc<genplane_merge::Schema> + Send + Sync>;

/// The params of the policies: objects of any served kind.
pub struct ServedParams<S: Storage> {
    /// The stores of the served kinds.
    pub kinds: KindStores<S>,
}

impl<S: Storage> std::fmt::Debug for ServedParams<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServedParams")
    }
}

/// The stores of a server's policies and bindings, and of what it serves (for params).
pub struct StoredPolicies<S: Storage> {
    /// The ValidatingAdmissionPolicies.
    pub policies: MirroredList<S>,
    /// The ValidatingAdmissionPolicyBindings.
    pub bindings: MirroredList<S>,
    /// The params.
    pub params: ServedParams<S>,
}

impl<S: Storage> std::fmt::Debug for StoredPolicies<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StoredPolicies")
    }
}

/// The MutatingAdmissionPolicies and their bindings, the params, and the type model apply
/// configurations are merged with.
pub struct StoredMutatingPolicies<S: Storage> {
    /// The MutatingAdmissionPolicies.
    pub policies: MirroredList<S>,
    /// The MutatingAdmissionPolicyBindings.
    pub bindings: MirroredList<S>,
    /// The params.
    pub params: ServedParams<S>,
    /// The served type model.
    pub types: ServedTypes,
}

impl<S: Storage> std::fmt::Debug for StoredMutatingPolicies<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StoredMutatingPolicies")
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

impl<S: Storage> ServedParams<S> {
    /// Whether the kind `api_version`/`kind` is namespaced, and its store, when it is served.
    fn param_store(&self, api_version: &str, kind: &str) -> Option<(bool, Store<S>)> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        (self.kinds)(group, version, kind)
    }
}

/// A policy kind's params are its `params` field's.
macro_rules! params_through_field {
    ($kind:ident) => {
        impl<S: Storage> Params for $kind<S> {
            fn param_scope(&self, api_version: &str, kind: &str) -> Option<bool> {
                self.params.param_scope(api_version, kind)
            }

            fn params<'a>(
                &'a self,
                api_version: &'a str,
                kind: &'a str,
                namespace: &'a str,
                selection: ParamSelection<'a>,
            ) -> BoxFuture<'a, Result<Vec<Arc<Value>>, ApiError>> {
                self.params.params(api_version, kind, namespace, selection)
            }
        }
    };
}

params_through_field!(StoredPolicies);
params_through_field!(StoredMutatingPolicies);

impl<S: Storage> Policies for StoredPolicies<S> {
    fn policies(&self) -> BoxFuture<'_, Result<Listed, ApiError>> {
        Box::pin(async move { Ok(self.policies.list().await) })
    }

    fn bindings(&self) -> BoxFuture<'_, Result<Listed, ApiError>> {
        Box::pin(async move { Ok(self.bindings.list().await) })
    }
}

impl<S: Storage> MutatingPolicies for StoredMutatingPolicies<S> {
    fn policies(&self) -> BoxFuture<'_, Result<Listed, ApiError>> {
        Box::pin(async move { Ok(self.policies.list().await) })
    }

    fn bindings(&self) -> BoxFuture<'_, Result<Listed, ApiError>> {
        Box::pin(async move { Ok(self.bindings.list().await) })
    }

    fn apply_configuration(
        &self,
        kind: &GroupVersionKind,
        object: Value,
        configuration: &Value,
    ) -> Result<Value, String> {
        let types = (self.types)(&kind.group, &kind.version, &kind.kind);
        let Some(ty) = types.kind(&kind.group, &kind.version, &kind.kind) else {
            return Err(format!(
                "no type information for {}/{}, Kind={}",
                kind.group, kind.version, kind.kind
            ));
        };
        if let Some(path) = genplane_merge::apply::atomic_composite(&types, &ty, configuration) {
            return Err(format!(
                "invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: {path}"
            ));
        }
        genplane_merge::apply::merge_into(&types, &ty, object, configuration)
            .map_err(|e| format!("{}: {}", e.path, e.message))
    }
}

impl<S: Storage> Params for ServedParams<S> {
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
