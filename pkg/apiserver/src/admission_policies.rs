//! The stored admission policies, their bindings and their params as the
//! `ValidatingAdmissionPolicy` and `MutatingAdmissionPolicy` plugins read them: listed from the
//! watch cache's memory (`resourceVersion=0`), so that a write costs no storage read, as
//! upstream's plugins read them from informers. Params may be of any kind the server serves at
//! the time of the write, built-in or custom (the served set is read on each lookup,
//! [`ServedParams`]). Mutating policies merge their apply configurations with the served type
//! model ([`StoredMutatingPolicies`]).

use std::sync::Arc;

use genplane_admission::BoxFuture;
use genplane_admission::mutating_policy::MutatingPolicies;
use genplane_admission::params::{ParamSelection, Params};
use genplane_admission::policy::Policies;
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::resource_version::ReadOptions;
use genplane_apimachinery::schema::GroupVersionKind;
use genplane_registry::{ListOptions, Store};
use genplane_storage::Storage;
use serde_json::{Value, json};

/// Finds the store of a kind served at the time of the call: given `group`, `version` and
/// `kind`, whether it is namespaced and its store.
pub type KindStores<S> = Arc<dyn Fn(&str, &str, &str) -> Option<(bool, Store<S>)> + Send + Sync>;

/// The served type model at the time of the call (server-side apply's).
pub type ServedTypes = Arc<dyn Fn() -> Arc<genplane_structured::Schema> + Send + Sync>;

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

/// The stores of a server's ValidatingAdmissionPolicies and bindings, and of what it serves
/// (for params).
pub struct StoredPolicies<S: Storage> {
    /// The store of ValidatingAdmissionPolicies.
    pub policies: Store<S>,
    /// The store of ValidatingAdmissionPolicyBindings.
    pub bindings: Store<S>,
    /// The params.
    pub params: ServedParams<S>,
}

impl<S: Storage> std::fmt::Debug for StoredPolicies<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StoredPolicies")
    }
}

/// The stores of a server's MutatingAdmissionPolicies and bindings, its params and its type
/// model.
pub struct StoredMutatingPolicies<S: Storage> {
    /// The store of MutatingAdmissionPolicies.
    pub policies: Store<S>,
    /// The store of MutatingAdmissionPolicyBindings.
    pub bindings: Store<S>,
    /// The params.
    pub params: ServedParams<S>,
    /// The type model apply configurations are merged with.
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

/// Every object of the cluster-scoped `store`, from memory.
async fn list_cached<S: Storage>(store: &Store<S>) -> Result<Vec<Value>, ApiError> {
    Ok(store.list("", &cached(Default::default())).await?.items)
}

impl<S: Storage> ServedParams<S> {
    /// Whether the kind `api_version`/`kind` is namespaced, and its store, when it is served.
    fn param_store(&self, api_version: &str, kind: &str) -> Option<(bool, Store<S>)> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        (self.kinds)(group, version, kind)
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
    ) -> BoxFuture<'a, Result<Vec<Value>, ApiError>> {
        Box::pin(async move {
            let Some((_, store)) = self.param_store(api_version, kind) else {
                return Ok(Vec::new());
            };
            let mut params = match selection {
                ParamSelection::Name(name) => match store.get(namespace, name, Some("0")).await {
                    Ok(param) => vec![param],
                    Err(e) if e.code == 404 => Vec::new(),
                    Err(e) => return Err(e),
                },
                ParamSelection::Selector(selector) => {
                    store
                        .list(namespace, &cached(selector.clone()))
                        .await?
                        .items
                }
            };
            for param in &mut params {
                param["apiVersion"] = json!(api_version);
                param["kind"] = json!(kind);
            }
            Ok(params)
        })
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
            ) -> BoxFuture<'a, Result<Vec<Value>, ApiError>> {
                self.params.params(api_version, kind, namespace, selection)
            }
        }
    };
}

params_through_field!(StoredPolicies);
params_through_field!(StoredMutatingPolicies);

impl<S: Storage> Policies for StoredPolicies<S> {
    fn policies(&self) -> BoxFuture<'_, Result<Vec<Value>, ApiError>> {
        Box::pin(list_cached(&self.policies))
    }

    fn bindings(&self) -> BoxFuture<'_, Result<Vec<Value>, ApiError>> {
        Box::pin(list_cached(&self.bindings))
    }
}

impl<S: Storage> MutatingPolicies for StoredMutatingPolicies<S> {
    fn policies(&self) -> BoxFuture<'_, Result<Vec<Value>, ApiError>> {
        Box::pin(list_cached(&self.policies))
    }

    fn bindings(&self) -> BoxFuture<'_, Result<Vec<Value>, ApiError>> {
        Box::pin(list_cached(&self.bindings))
    }

    fn apply_configuration(
        &self,
        kind: &GroupVersionKind,
        object: Value,
        configuration: &Value,
    ) -> Result<Value, String> {
        let types = (self.types)();
        let Some(ty) = types.kind(&kind.group, &kind.version, &kind.kind) else {
            return Err(format!(
                "no type information for {}/{}, Kind={}",
                kind.group, kind.version, kind.kind
            ));
        };
        if let Some(path) = genplane_structured::apply::atomic_composite(&types, &ty, configuration)
        {
            return Err(format!(
                "invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: {path}"
            ));
        }
        genplane_structured::apply::merge_into(&types, &ty, object, configuration)
            .map_err(|e| format!("{}: {}", e.path, e.message))
    }
}
