//! An API server in-process on loopback (plain HTTP), assembled as `genplane apiserver`
//! assembles it: every resource behind its watch cache, over SQLite or over a real etcd
//! process, with the system namespaces created.

#![allow(clippy::unwrap_used, dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use genplane_apiserver::ApiServer;
use genplane_component_base::shutdown::Shutdown;
use genplane_component_base::version::BuildInfo;
use genplane_controlplane::{Backend, ResourceStorage, StorageConfig, bootstrap, open_storage};
use genplane_storage_etcd::testing::EtcdServer;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

/// Which storage the server runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    /// Embedded SQLite in a temporary directory.
    Sqlite,
    /// A real etcd process on a free loopback port.
    Etcd,
}

pub struct Server {
    pub addr: SocketAddr,
    pub storage: Arc<Backend>,
    config: StorageConfig,
    etcd: Option<EtcdServer>,
    dir: Option<tempfile::TempDir>,
    shutdown: Shutdown,
}

impl Server {
    /// Stops serving (the watch caches go too) and opens the storage again, for writes made
    /// while no server runs.
    pub async fn stop(mut self) -> Stopped {
        self.shutdown.trigger();
        let (config, etcd, dir) = (self.config.clone(), self.etcd.take(), self.dir.take());
        let addr = self.addr;
        drop(self);
        Stopped {
            storage: open(&config).await,
            config,
            etcd,
            dir: dir.unwrap(),
            addr,
        }
    }

    /// The same data served by a new server (new watch caches) on the same address, as after
    /// a restart.
    pub async fn restarted(self) -> Server {
        self.stop().await.start().await
    }
}

/// A server's data while no server runs.
pub struct Stopped {
    pub storage: Arc<Backend>,
    config: StorageConfig,
    etcd: Option<EtcdServer>,
    dir: tempfile::TempDir,
    addr: SocketAddr,
}

impl Stopped {
    /// Serves the data again on the same address.
    pub async fn start(self) -> Server {
        serve(
            self.storage,
            self.config,
            self.etcd,
            self.dir,
            Some(self.addr),
            |s| s,
        )
        .await
    }
}

/// Opens the storage; after a stop the previous server may hold the SQLite lock until its
/// tasks end.
async fn open(config: &StorageConfig) -> Arc<Backend> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match open_storage(config).await {
            Ok(storage) => return storage,
            Err(e) if std::time::Instant::now() < deadline => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("opening storage: {e:?}"),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown.trigger();
    }
}

/// Starts a server on SQLite.
pub async fn start() -> Server {
    start_on(Flavour::Sqlite, |server| server).await
}

/// Starts a server on SQLite with `configure` applied to it (limits, metrics).
pub async fn start_configured(
    configure: impl FnOnce(ApiServer<ResourceStorage>) -> ApiServer<ResourceStorage>,
) -> Server {
    start_on(Flavour::Sqlite, configure).await
}

/// Starts a server on SQLite whose watch caches are configured by `cache`, with `configure`
/// applied to it.
pub async fn start_with_cache(
    cache: genplane_storage_cacher::CacherConfig,
    configure: impl FnOnce(ApiServer<ResourceStorage>) -> ApiServer<ResourceStorage>,
) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let config = StorageConfig::Sqlite {
        path: dir.path().join("db"),
    };
    serve_with(
        open(&config).await,
        config,
        None,
        dir,
        None,
        &cache,
        configure,
    )
    .await
}

/// Starts a server on a real etcd whose store configuration `tune` changes (timeouts, say).
pub async fn start_on_etcd(tune: impl FnOnce(&mut genplane_controlplane::EtcdConfig)) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let etcd = EtcdServer::start().await.unwrap();
    let mut etcd_config = etcd.config();
    tune(&mut etcd_config);
    let config = StorageConfig::Etcd(etcd_config);
    serve(open(&config).await, config, Some(etcd), dir, None, |s| s).await
}

impl Server {
    /// The etcd under a server started on etcd.
    pub fn etcd(&mut self) -> &mut EtcdServer {
        self.etcd.as_mut().expect("a server on etcd")
    }
}

/// Starts a server on `flavour` with `configure` applied to it.
pub async fn start_on(
    flavour: Flavour,
    configure: impl FnOnce(ApiServer<ResourceStorage>) -> ApiServer<ResourceStorage>,
) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let (config, etcd) = match flavour {
        Flavour::Sqlite => (
            StorageConfig::Sqlite {
                path: dir.path().join("db"),
            },
            None,
        ),
        Flavour::Etcd => {
            let etcd = EtcdServer::start().await.unwrap();
            (StorageConfig::Etcd(etcd.config()), Some(etcd))
        }
    };
    serve(open(&config).await, config, etcd, dir, None, configure).await
}

async fn serve(
    storage: Arc<Backend>,
    config: StorageConfig,
    etcd: Option<EtcdServer>,
    dir: tempfile::TempDir,
    addr: Option<SocketAddr>,
    configure: impl FnOnce(ApiServer<ResourceStorage>) -> ApiServer<ResourceStorage>,
) -> Server {
    let cache = genplane_storage_cacher::CacherConfig::default();
    serve_with(storage, config, etcd, dir, addr, &cache, configure).await
}

async fn serve_with(
    storage: Arc<Backend>,
    config: StorageConfig,
    etcd: Option<EtcdServer>,
    dir: tempfile::TempDir,
    addr: Option<SocketAddr>,
    cache: &genplane_storage_cacher::CacherConfig,
    configure: impl FnOnce(ApiServer<ResourceStorage>) -> ApiServer<ResourceStorage>,
) -> Server {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let resources = genplane_controlplane::resources_with(
        storage.clone(),
        &genplane_controlplane::ResourceOptions {
            cache: cache.clone(),
            ..Default::default()
        },
    )
    .unwrap();
    bootstrap(&resources).await.unwrap();
    // The previous server's listener may take a moment to close after a restart.
    let wanted = addr.unwrap_or_else(|| "127.0.0.1:0".parse().unwrap());
    let listener = loop {
        match genplane_component_base::http::bind(wanted).await {
            Ok(listener) => break listener,
            Err(e) if std::time::Instant::now() < deadline => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("binding {wanted}: {e:?}"),
        }
    };
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
        config,
        etcd,
        dir: Some(dir),
        shutdown,
    }
}

/// Runs each named `async fn(Server)` test twice: `sqlite::<name>` and `etcd::<name>`.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name(
                        super::support::start_on(super::support::Flavour::Sqlite, |s| s).await,
                    )
                    .await;
                }
            )*
        }
        mod etcd {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name(
                        super::support::start_on(super::support::Flavour::Etcd, |s| s).await,
                    )
                    .await;
                }
            )*
        }
    };
}

/// A whole answer: status, headers, body.
pub struct Answer {
    pub status: u16,
    pub headers: hyper::HeaderMap,
    pub body: Vec<u8>,
}

impl Answer {
    /// The body as JSON (the test fails when it is not).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    /// A header's value, empty when absent.
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).map_or("", |v| v.to_str().unwrap())
    }

    /// Every `Warning` header.
    pub fn warnings(&self) -> Vec<String> {
        self.headers
            .get_all("warning")
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect()
    }
}

/// Sends one request over plain HTTP and reads the whole answer.
pub async fn call(
    server: &Server,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
) -> Answer {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let mut request = Request::builder()
        .method(method)
        .uri(format!("http://{}{path}", server.addr));
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let request = request
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .unwrap();
    let response = client.request(request).await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    Answer {
        status,
        headers,
        body,
    }
}
