//! Assembling a control plane: the one place that chooses the storage backend, puts a watch
//! cache in front of every resource, and creates what must exist at start-up.
//!
//! ```no_run
//! # async fn example() -> Result<(), genplane_controlplane::Error> {
//! use genplane_controlplane::{StorageConfig, open_storage, resources};
//! let storage = open_storage(&StorageConfig::Sqlite { path: "/var/lib/genplane/genplane.db".into() }).await?;
//! let resources = resources(storage)?;
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

pub mod aggregator;
pub mod all_in_one;
pub mod apiserver_identity;
pub mod auth;
pub mod cluster_authentication;
pub mod conversion;
pub mod crd;
pub mod features;
pub mod flowcontrol;
pub mod policy_status;
pub mod rbac;
pub mod server;
pub mod storage_health;
pub mod store_follower;

use std::path::PathBuf;
use std::sync::Arc;

use genplane_apimachinery::errors::ApiError;
use genplane_apiserver::{ApiEnablement, Backing, Resource};
use genplane_registry::WriteOptions;
use genplane_storage::{
    Bytes, DeleteRequest, Deleted, KeyValue, ListRequest, ListResponse, Result as StorageResult,
    Revision, Storage, Watch,
};
use genplane_storage_cacher::{Cacher, CacherConfig};
use genplane_storage_etcd::EtcdStore;
pub use genplane_storage_etcd::{DEFAULT_COMPACTION_INTERVAL, EtcdConfig, EtcdTls};
use genplane_storage_sqlite::{SqliteConfig, SqliteStore};
pub use genplane_storage_value::EncryptionConfig;
use genplane_storage_value::Transformed;
use serde_json::{Value, json};

/// Errors of assembling a control plane.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The SQLite store could not be opened.
    #[error("opening the SQLite store")]
    Sqlite(#[from] genplane_storage_sqlite::OpenError),
    /// The storage layer failed (e.g. etcd could not be reached).
    #[error("storage")]
    Storage(#[from] genplane_storage::Error),
    /// A start-up object could not be created.
    #[error("creating {what}: {error}")]
    Bootstrap {
        /// What was being created.
        what: String,
        /// Why it failed.
        error: ApiError,
    },
}

/// Which backend stores the data.
#[derive(Clone, Debug)]
pub enum StorageConfig {
    /// The embedded SQLite store in a file.
    Sqlite {
        /// The database file.
        path: PathBuf,
    },
    /// An etcd cluster.
    Etcd(EtcdConfig),
}

/// The chosen backend. Every layer above sees only the [`Storage`] contract.
#[derive(Debug)]
pub enum Backend {
    /// Embedded SQLite.
    Sqlite(SqliteStore),
    /// etcd.
    Etcd(EtcdStore),
}

/// Opens the backend `config` describes (within a Tokio runtime). On etcd this starts the
/// health probes of the members and, when [`EtcdConfig::compaction_interval`] is not zero,
/// the coordinated compactor (`--etcd-compaction-interval`), both for as long as the backend
/// lives.
pub async fn open_storage(config: &StorageConfig) -> Result<Arc<Backend>, Error> {
    Ok(Arc::new(match config {
        StorageConfig::Sqlite { path } => {
            Backend::Sqlite(SqliteStore::open(&SqliteConfig::new(path))?)
        }
        StorageConfig::Etcd(etcd) => Backend::Etcd(EtcdStore::connect(etcd).await?),
    }))
}

/// Calls the backend's store. etcd's futures (its gRPC client's) take about 8 KB, SQLite's
/// under 1 KB (sizes of a test build); an enum's future is as large as its largest, and every
/// caller up the request path embeds it and is copied whole each time it is moved or boxed
/// (17k instructions of copying per create on SQLite, by callgrind). So etcd's are boxed: one
/// allocation per etcd request, none of that copying on either backend.
macro_rules! delegate {
    ($self:ident, $store:ident => $call:expr) => {
        match $self {
            Backend::Sqlite($store) => $call.await,
            Backend::Etcd($store) => Box::pin($call).await,
        }
    };
}

impl Storage for Backend {
    async fn get(&self, key: &str, revision: Option<Revision>) -> StorageResult<Option<KeyValue>> {
        delegate!(self, s => s.get(key, revision))
    }

    async fn list(&self, request: ListRequest) -> StorageResult<ListResponse> {
        delegate!(self, s => s.list(request))
    }

    async fn create(&self, key: &str, value: Bytes) -> StorageResult<KeyValue> {
        delegate!(self, s => s.create(key, value))
    }

    async fn update(&self, key: &str, value: Bytes, expected: Revision) -> StorageResult<KeyValue> {
        delegate!(self, s => s.update(key, value, expected))
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> StorageResult<Deleted> {
        delegate!(self, s => s.delete(key, expected))
    }

    async fn delete_batch(&self, deletes: Vec<DeleteRequest>) -> Vec<StorageResult<Deleted>> {
        delegate!(self, s => s.delete_batch(deletes))
    }

    async fn watch(&self, prefix: &str, after: Revision) -> StorageResult<Watch> {
        delegate!(self, s => s.watch(prefix, after))
    }

    async fn current_revision(&self) -> StorageResult<Revision> {
        delegate!(self, s => s.current_revision())
    }

    async fn compact(&self, revision: Revision) -> StorageResult<()> {
        delegate!(self, s => s.compact(revision))
    }

    fn compacted_revision(&self) -> Revision {
        match self {
            Backend::Sqlite(s) => s.compacted_revision(),
            Backend::Etcd(s) => s.compacted_revision(),
        }
    }

    fn watch_proves_progress(&self) -> bool {
        match self {
            Backend::Sqlite(s) => s.watch_proves_progress(),
            Backend::Etcd(s) => s.watch_proves_progress(),
        }
    }

    fn knows_current_revision(&self) -> bool {
        match self {
            Backend::Sqlite(s) => s.knows_current_revision(),
            Backend::Etcd(s) => s.knows_current_revision(),
        }
    }
}

/// The storage of a served resource: its own watch cache over the shared backend, with the
/// resource's values encrypted at rest in between when the encryption configuration names it
/// (the cache holds plain objects; the store only what the configuration writes).
pub type ResourceStorage = Cacher<Transformed<Arc<Backend>>>;

/// Every built-in resource, each behind its own watch cache of its key prefix, none encrypted.
/// Resources that share stored objects (core and events.k8s.io Events) share one cache.
pub fn resources(backend: Arc<Backend>) -> Result<Vec<Resource<ResourceStorage>>, Error> {
    resources_with_encryption(backend, &EncryptionConfig::default())
}

/// Every built-in resource as [`resources`] makes them, with values encrypted at rest as
/// `encryption` says (`--encryption-provider-config`). Resources that share stored objects take
/// the configuration of the first one (core Events for events.k8s.io Events, as upstream, which
/// refuses `events.events.k8s.io` in the file). Resources the file does not name pass through
/// with no transformation at all.
pub fn resources_with_encryption(
    backend: Arc<Backend>,
    encryption: &EncryptionConfig,
) -> Result<Vec<Resource<ResourceStorage>>, Error> {
    resources_with(
        backend,
        &ResourceOptions {
            encryption: encryption.clone(),
            ..ResourceOptions::default()
        },
    )
}

/// How the built-in resources are stored and which are served.
#[derive(Clone, Debug)]
pub struct ResourceOptions {
    /// Which resources are encrypted at rest ([`resources_with_encryption`]).
    pub encryption: EncryptionConfig,
    /// Each watch cache's window of events and what each watcher buffers.
    pub cache: CacherConfig,
    /// Which resources are served (`--runtime-config`): the others get no watch cache.
    pub enablement: ApiEnablement,
    /// The feature gates the kinds' strategies consult (every gated feature off by default).
    pub gates: Arc<dyn genplane_api::catalog::FeatureGates>,
    /// Features whose kinds are served although their gate is off, because the cluster is
    /// still turning them off ([`turning_off`]): their objects can be read, changed and
    /// deleted, not created.
    pub turning_off: std::collections::BTreeSet<&'static str>,
}

impl Default for ResourceOptions {
    fn default() -> Self {
        Self {
            encryption: EncryptionConfig::default(),
            cache: CacherConfig::default(),
            enablement: ApiEnablement::default(),
            gates: Arc::new(genplane_api::catalog::GatesOff),
            turning_off: std::collections::BTreeSet::new(),
        }
    }
}

/// The features whose gate is off in `gates` but whose kinds must still be served: the cluster
/// has not finished turning them off (their Feature in kube-system says `On`, `TurningOn` or
/// `TurningOff`), so objects of those kinds may be stored, and they must stay readable and
/// deletable until the feature-controller sees them gone. Read from storage at start (through
/// the encryption `encryption` gives Features), before anything is served.
pub async fn turning_off(
    backend: &Arc<Backend>,
    encryption: &EncryptionConfig,
    gates: &dyn genplane_api::catalog::FeatureGates,
) -> Result<std::collections::BTreeSet<&'static str>, Error> {
    let mut features = std::collections::BTreeSet::new();
    let Some(info) = genplane_api::catalog::all()
        .iter()
        .find(|i| i.is(&genplane_api::featuregates::feature::INFO))
    else {
        return Ok(features);
    };
    let storage = Transformed::new(
        backend.clone(),
        encryption.transformer_for(info.group, info.resource),
    );
    for gate in genplane_api::catalog::all()
        .iter()
        .filter_map(|i| i.feature_gate)
        .filter(|gate| !gates.enabled(gate))
    {
        if features.contains(gate) {
            continue;
        }
        let key = format!(
            "/registry/{}/kube-system/{}",
            info.storage_prefix,
            genplane_api::featuregates::object_name(gate)
        );
        let Some(stored) = genplane_storage::Storage::get(&storage, &key, None).await? else {
            continue;
        };
        let feature: Value = serde_json::from_slice(&stored.value).unwrap_or_default();
        let state = feature.pointer("/status/state").and_then(Value::as_str);
        if genplane_api::featuregates::may_hold_objects(state) {
            tracing::info!(
                feature = gate,
                state,
                "serving the feature's kinds although it is off here: the cluster is turning it off; \
                 they can be read, changed and deleted, not created"
            );
            features.insert(gate);
        }
    }
    Ok(features)
}

/// The built-in resources `options.enablement` serves, stored as `options` says.
pub fn resources_with(
    backend: Arc<Backend>,
    options: &ResourceOptions,
) -> Result<Vec<Resource<ResourceStorage>>, Error> {
    let mut caches: Vec<(String, Arc<ResourceStorage>)> = Vec::new();
    let mut served = Vec::new();
    for info in genplane_api::catalog::all() {
        if !options.enablement.serves_info(info) {
            continue;
        }
        if let Some(gate) = info.feature_gate
            && !options.gates.enabled(gate)
            && !options.turning_off.contains(gate)
        {
            // Served only while its feature is on: no routes, discovery or watch cache.
            continue;
        }
        if !info.stored() {
            // A review: created and answered, nothing to cache.
            served.push(Resource::answered(info, options.gates.clone()));
            continue;
        }
        let prefix = format!("/registry/{}/", info.storage_prefix);
        let cache = match caches.iter().find(|(p, _)| *p == prefix) {
            Some((_, cache)) => cache.clone(),
            None => {
                let transformer = options
                    .encryption
                    .transformer_for(info.group, info.resource);
                if let Some(transformer) = &transformer {
                    tracing::info!(
                        resource = info.resource,
                        group = info.group,
                        providers = ?transformer,
                        "encrypting at rest"
                    );
                }
                let cache = Arc::new(Cacher::new(
                    Transformed::new(backend.clone(), transformer),
                    &prefix,
                    registry_cache(&options.cache),
                )?);
                caches.push((prefix, cache.clone()));
                cache
            }
        };
        let mut resource = Resource::builtin_with_gates(info, cache.clone(), options.gates.clone());
        if info.is(&genplane_api::apiextensions::INFO) {
            resource.backing = Backing::Stored(genplane_registry::Store::new(
                cache,
                Arc::new(crd::schema::CrdStrategy::with_gates(options.gates.clone())),
            ));
        }
        served.push(resource);
    }
    Ok(served)
}

/// The storage of custom resources: for each CRD, a watch cache over its key prefix, with
/// values encrypted at rest as `encryption` says for its group and resource.
pub fn custom_storage(
    backend: Arc<Backend>,
    encryption: EncryptionConfig,
) -> crd::StorageFactory<ResourceStorage> {
    Arc::new(move |prefix: &str, group: &str, resource: &str| {
        let transformer = encryption.transformer_for(group, resource);
        Ok(Arc::new(Cacher::new(
            Transformed::new(backend.clone(), transformer),
            prefix,
            // Custom resources are decoded for every read: their objects keep no layout.
            CacherConfig::default(),
        )?))
    })
}

/// `config` for a cache the registry reads through: each cached object keeps where its
/// resourceVersion goes ([`genplane_registry::object::layout_hint`]), found at its first read,
/// so that GETs and LISTs write it from the stored bytes without reading them again.
fn registry_cache(config: &CacherConfig) -> CacherConfig {
    CacherConfig {
        value_hint: Some(genplane_registry::object::layout_hint),
        ..config.clone()
    }
}

/// The namespaces every cluster has.
pub const SYSTEM_NAMESPACES: &[&str] =
    &["default", "kube-system", "kube-public", "kube-node-lease"];

/// The time now as Kubernetes writes it (`2026-11-22T03:40:00Z`): a condition's
/// `lastTransitionTime`.
pub(crate) fn now_rfc3339() -> String {
    genplane_apimachinery::meta::rfc3339(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX)),
    )
}

/// Creates what must exist at start-up (the system namespaces) when it is missing.
pub async fn bootstrap<S: Storage, R: std::borrow::Borrow<Resource<S>>>(
    resources: &[R],
) -> Result<(), Error> {
    let Some(namespaces) = resources
        .iter()
        .map(std::borrow::Borrow::borrow)
        .find(|r| r.info.group.is_empty() && r.info.resource == "namespaces")
        .and_then(|r| r.store())
    else {
        return Ok(());
    };
    for name in SYSTEM_NAMESPACES {
        let object = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        match namespaces
            .create("", object, &WriteOptions::default())
            .await
        {
            Ok(_) => tracing::info!(namespace = name, "created system namespace"),
            Err(e) if e.code == 409 => {}
            Err(error) => {
                return Err(Error::Bootstrap {
                    what: format!("namespace {name}"),
                    error,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn system_namespaces_exist_after_bootstrap_and_bootstrap_is_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let backend = open_storage(&StorageConfig::Sqlite {
            path: dir.path().join("db"),
        })
        .await
        .unwrap();
        let served = resources(backend).unwrap();
        bootstrap(&served).await.unwrap();
        bootstrap(&served).await.unwrap();
        let namespaces = served
            .iter()
            .find(|r| r.info.resource == "namespaces")
            .unwrap();
        for name in SYSTEM_NAMESPACES {
            let ns = namespaces
                .store()
                .unwrap()
                .get("", name, None)
                .await
                .unwrap();
            assert_eq!(ns["status"]["phase"], "Active");
        }
        let events: Vec<_> = served
            .iter()
            .filter(|r| r.info.resource == "events")
            .collect();
        assert_eq!(events.len(), 2, "core and events.k8s.io Events");
    }

    #[tokio::test]
    async fn configured_resources_are_encrypted_below_the_cache_and_others_stay_plain() {
        let dir = tempfile::tempdir().unwrap();
        let backend = open_storage(&StorageConfig::Sqlite {
            path: dir.path().join("db"),
        })
        .await
        .unwrap();
        let encryption = EncryptionConfig::parse(
            br#"{"apiVersion":"apiserver.config.k8s.io/v1","kind":"EncryptionConfiguration",
                "resources":[{"resources":["secrets"],"providers":[
                  {"aesgcm":{"keys":[{"name":"key1","secret":"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}]}},
                  {"identity":{}}]}]}"#,
            "encryption.json",
        )
        .unwrap();
        let served = resources_with_encryption(backend.clone(), &encryption).unwrap();
        bootstrap(&served).await.unwrap();
        let store = |resource: &str| {
            served
                .iter()
                .find(|r| r.info.group.is_empty() && r.info.resource == resource)
                .unwrap()
                .store()
                .unwrap()
        };
        let secret = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s1", "namespace": "default"},
            "stringData": {"password": "hunter2-plaintext"}});
        store("secrets")
            .create("default", secret, &WriteOptions::default())
            .await
            .unwrap();
        let configmap = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c1", "namespace": "default"}, "data": {"k": "visible"}});
        store("configmaps")
            .create("default", configmap, &WriteOptions::default())
            .await
            .unwrap();

        let raw = backend
            .get("/registry/secrets/default/s1", None)
            .await
            .unwrap()
            .unwrap()
            .value;
        assert!(raw.starts_with(b"k8s:enc:aesgcm:v1:key1:"));
        assert!(
            !raw.windows(6).any(|w| w == b"hunter"),
            "no plaintext at rest"
        );
        let read = store("secrets").get("default", "s1", None).await.unwrap();
        assert_eq!(read["data"]["password"], "aHVudGVyMi1wbGFpbnRleHQ=");
        let raw = backend
            .get("/registry/configmaps/default/c1", None)
            .await
            .unwrap()
            .unwrap()
            .value;
        assert!(
            raw.starts_with(b"{"),
            "configmaps are not listed: stored plain"
        );
    }
}
