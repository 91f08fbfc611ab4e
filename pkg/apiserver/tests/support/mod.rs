//! An API server in-process on loopback (plain HTTP) over a SQLite store, for the tests.

#![allow(clippy::unwrap_used, dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use genplane_apiserver::{ApiServer, Resource};
use genplane_component_base::shutdown::Shutdown;
use genplane_component_base::version::BuildInfo;
use genplane_storage_sqlite::{SqliteConfig, SqliteStore};
use serde_json::json;

pub struct Server {
    pub addr: SocketAddr,
    pub storage: Arc<SqliteStore>,
    _dir: tempfile::TempDir,
    shutdown: Shutdown,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown.trigger();
    }
}

/// Starts a server with the `default` and `kube-system` namespaces.
pub async fn start() -> Server {
    start_configured(|server| server).await
}

/// Starts a server as [`start`] does, with `configure` applied to it (limits, metrics).
pub async fn start_configured(
    configure: impl FnOnce(ApiServer<SqliteStore>) -> ApiServer<SqliteStore>,
) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let mut config = SqliteConfig::new(dir.path().join("db"));
    config.history = None;
    let storage = Arc::new(SqliteStore::open(&config).unwrap());
    let resources: Vec<Resource<SqliteStore>> = genplane_api::catalog::all()
        .iter()
        .map(|info| Resource::builtin(info, storage.clone()))
        .collect();
    let namespaces = resources
        .iter()
        .find(|r: &&Resource<SqliteStore>| r.info.resource == "namespaces")
        .unwrap();
    for name in ["default", "kube-system"] {
        let namespace =
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        namespaces
            .store
            .create("", namespace, &genplane_registry::WriteOptions::default())
            .await
            .unwrap();
    }
    let listener = genplane_component_base::http::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let server = Arc::new(configure(ApiServer::new(
        resources,
        &BuildInfo::new("0.1.0", Some("abc")),
        &addr.to_string(),
        None,
    )));
    let shutdown = Shutdown::new();
    let handler = move |request| {
        let server = server.clone();
        async move { server.handle(request).await }
    };
    tokio::spawn(genplane_component_base::http::serve(
        listener,
        handler,
        shutdown.clone(),
        Duration::from_secs(1),
    ));
    Server {
        addr,
        storage,
        _dir: dir,
        shutdown,
    }
}
