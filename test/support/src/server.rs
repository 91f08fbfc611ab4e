//! An API server in the test's own process on loopback, assembled by the code that assembles
//! `genplane apiserver` (`genplane_controlplane::server`: options validated into a `Config`,
//! completed, run): HTTPS with a serving certificate generated in a temporary data directory,
//! client certificates checked against the generated CA, RBAC over the bootstrap policy, the
//! default admission plugins, and an audit log at Metadata level in the temporary directory.
//! Every resource is behind its watch cache, over SQLite or over a real etcd process. There is
//! no plain-HTTP variant: every client, raw sockets included, speaks TLS.
//!
//! The clients of a [`Server`] (raw TLS streams, HTTP/1.1 and HTTP/2 connections, kube-rs,
//! the real `curl`) trust the generated CA and present the admin's client certificate (user
//! `genplane-admin`, group `system:masters`), as `admin.kubeconfig` does.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use genplane_component_base::config::Invalid;
use genplane_component_base::featuregate::UseIdentity;
use genplane_component_base::shutdown::Shutdown;
use genplane_component_base::version::BuildInfo;
use genplane_controlplane::Backend;
use genplane_controlplane::server::{CompletedConfig, Config, Error, Options, Ready};
use genplane_storage_etcd::testing::EtcdServer;
use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::{http1, http2};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_rustls::client::TlsStream;

use crate::{eventually_async, eventually_ok_async};

/// The audit policy every test server runs with: every request at Metadata level.
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n";

/// Which storage the server runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    /// Embedded SQLite in the temporary data directory.
    Sqlite,
    /// A real etcd process on a free loopback port.
    Etcd,
}

/// A running server and what its clients need; dropping it stops the server.
pub struct Server {
    /// The address it serves HTTPS on.
    pub addr: SocketAddr,
    /// The storage under it (the same store the server writes).
    pub storage: Arc<Backend>,
    /// The TLS configuration of its admin clients: the generated CA trusted, the admin's
    /// client certificate presented.
    tls: Arc<rustls::ClientConfig>,
    /// The generated CA, as clients trust it.
    roots: Arc<rustls::RootCertStore>,
    shutdown: StopOnDrop,
    serving: JoinHandle<Result<(), Error>>,
    place: Place,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addr", &self.addr)
            .field("data_dir", &self.place.data_dir())
            .finish_non_exhaustive()
    }
}

/// What outlives one server: the temporary directory (data directory, audit log) and the etcd.
struct Place {
    dir: tempfile::TempDir,
    etcd: Option<EtcdServer>,
}

impl Place {
    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn audit_log(&self) -> PathBuf {
        self.dir.path().join("audit.log")
    }

    /// The options of `genplane apiserver --data-dir=<tmp>/data --bind-address=127.0.0.1
    /// --secure-port=<port> --audit-policy-file=<tmp>/audit-policy.yaml
    /// --audit-log-path=<tmp>/audit.log` (and `--storage-backend=etcd --etcd-servers=...` on
    /// etcd), validated as the command validates them.
    fn config(&self, port: u16) -> Config {
        let policy = self.dir.path().join("audit-policy.yaml");
        std::fs::write(&policy, AUDIT_POLICY).unwrap();
        let mut options = Options {
            data_dir: self.data_dir(),
            ..Options::default()
        };
        options.serving.bind_address = "127.0.0.1".into();
        options.serving.secure_port = port;
        options.audit.audit_policy_file = Some(policy);
        options.audit.audit_log_path = Some(self.audit_log());
        if let Some(etcd) = &self.etcd {
            options.storage.storage_backend = "etcd".into();
            options.storage.etcd_servers = vec![etcd.endpoint()];
        }
        let mut invalid = Invalid::new();
        let validated = options.validate(UseIdentity::new("apiserver", "test"), None, &mut invalid);
        invalid.finish(validated).unwrap()
    }
}

/// Starts a server on SQLite.
pub async fn start() -> Server {
    start_on(Flavour::Sqlite).await
}

/// Starts a server on `flavour`.
pub async fn start_on(flavour: Flavour) -> Server {
    start_with(flavour, |_| {}, |_| {}).await
}

/// Starts a server on SQLite with `complete` applied to its completed configuration before
/// it runs: limits (`completed.config.limits`), resources of the test's own, other watch
/// caches (see [`with_cache`]).
pub async fn start_configured(complete: impl FnOnce(&mut CompletedConfig)) -> Server {
    start_with(Flavour::Sqlite, |_| {}, complete).await
}

/// Starts a server on `flavour`, with `configure` applied to its validated configuration
/// (before the storage is opened) and `complete` to its completed configuration (before it
/// runs).
pub async fn start_with(
    flavour: Flavour,
    configure: impl FnOnce(&mut Config),
    complete: impl FnOnce(&mut CompletedConfig),
) -> Server {
    let etcd = match flavour {
        Flavour::Sqlite => None,
        Flavour::Etcd => Some(EtcdServer::start().await.unwrap()),
    };
    let place = Place {
        dir: tempfile::tempdir().unwrap(),
        etcd,
    };
    let mut config = place.config(0);
    configure(&mut config);
    let mut completed = config.complete().await.unwrap();
    complete(&mut completed);
    serve(place, completed).await
}

/// Replaces the watch caches of `completed`'s resources by caches configured by `cache`.
pub fn with_cache(completed: &mut CompletedConfig, cache: genplane_storage_cacher::CacherConfig) {
    completed.resources = genplane_controlplane::resources_with(
        completed.backend().clone(),
        &genplane_controlplane::ResourceOptions {
            cache,
            enablement: completed.config.api_enablement.clone(),
            gates: completed.strategy_gates(),
            ..Default::default()
        },
    )
    .unwrap();
}

/// Runs `completed` in a task of its own until the server takes requests.
async fn serve(place: Place, completed: CompletedConfig) -> Server {
    let storage = completed.backend().clone();
    let (roots, tls) = admin_tls(&completed.pki);
    let shutdown = Shutdown::new();
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel::<Ready>();
    let stop = shutdown.clone();
    let serving = tokio::spawn(async move {
        completed
            .run(
                "apiserver",
                &BuildInfo::new("0.1.0", Some("abc")),
                stop,
                Some(ready_tx),
            )
            .await
    });
    let ready = match ready_rx.await {
        Ok(ready) => ready,
        Err(_) => panic!("the server stopped before serving: {:?}", serving.await),
    };
    let addr = ready
        .server_url
        .strip_prefix("https://")
        .unwrap()
        .parse()
        .unwrap();
    Server {
        addr,
        storage,
        tls,
        roots,
        shutdown: StopOnDrop(shutdown),
        serving,
        place,
    }
}

/// The CA `admin.kubeconfig` trusts, and its TLS configuration: the CA trusted, the admin's
/// certificate presented.
fn admin_tls(
    pki: &genplane_controlplane::server::pki::Pki,
) -> (Arc<rustls::RootCertStore>, Arc<rustls::ClientConfig>) {
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_file_iter(&pki.ca).unwrap() {
        roots.add(ca.unwrap()).unwrap();
    }
    let roots = Arc::new(roots);
    let chain = CertificateDer::pem_file_iter(&pki.admin_cert)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let key = PrivateKeyDer::from_pem_file(&pki.admin_key).unwrap();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots.clone())
        .with_client_auth_cert(chain, key)
        .unwrap();
    (roots, Arc::new(config))
}

impl Server {
    /// Stops serving (the watch caches go too) and waits until the server has stopped; its
    /// storage stays open for writes made while no server runs.
    pub async fn stop(self) -> Stopped {
        let Server {
            addr,
            storage,
            shutdown,
            serving,
            place,
            ..
        } = self;
        drop(shutdown);
        serving.await.unwrap().unwrap();
        Stopped {
            storage,
            place,
            addr,
        }
    }

    /// The same data served by a new server (new watch caches) on the same address, as after
    /// a restart.
    pub async fn restarted(self) -> Server {
        self.stop().await.start().await
    }

    /// The etcd under a server started on etcd.
    pub fn etcd(&mut self) -> &mut EtcdServer {
        self.place.etcd.as_mut().expect("a server on etcd")
    }

    /// The data directory (certificates, kubeconfigs, the SQLite database).
    pub fn data_dir(&self) -> PathBuf {
        self.place.data_dir()
    }

    /// Runs the real `curl` as the admin (the generated CA trusted, the admin's client
    /// certificate presented) with `args`: its exit code and standard output (standard error
    /// appended).
    pub async fn curl(&self, args: &[&str]) -> (Option<i32>, String) {
        let pki = self.data_dir().join("pki");
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        // (on a blocking thread: curl talks to this process's server)
        let output = tokio::task::spawn_blocking(move || {
            std::process::Command::new("curl")
                .arg("--cacert")
                .arg(pki.join("ca.crt"))
                .arg("--cert")
                .arg(pki.join("admin.crt"))
                .arg("--key")
                .arg(pki.join("admin.key"))
                .args(["-sS", "--max-time", "60"])
                .args(args)
                .output()
                .expect("curl runs")
        })
        .await
        .unwrap();
        (output.status.code(), crate::process::text(&output))
    }

    /// `https://<addr><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.addr)
    }

    /// A TLS connection to the server as the admin, offering `alpn` (`b"http/1.1"`, `b"h2"`).
    pub async fn tls(&self, alpn: &[u8]) -> TlsStream<TcpStream> {
        self.connect((*self.tls).clone(), alpn).await
    }

    /// A TLS connection to the server without a client certificate (an anonymous client, as
    /// far as the server can tell), offering `alpn`.
    pub async fn anonymous_tls(&self, alpn: &[u8]) -> TlsStream<TcpStream> {
        let config =
            rustls::ClientConfig::builder_with_provider(self.tls.crypto_provider().clone())
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(self.roots.clone())
                .with_no_client_auth();
        self.connect(config, alpn).await
    }

    async fn connect(&self, mut config: rustls::ClientConfig, alpn: &[u8]) -> TlsStream<TcpStream> {
        config.alpn_protocols = vec![alpn.to_vec()];
        let tcp = TcpStream::connect(self.addr).await.unwrap();
        tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
            .unwrap()
    }

    /// An HTTP/1.1 connection to the server as the admin.
    pub async fn http1(&self) -> http1::SendRequest<Full<Bytes>> {
        let (send, connection) = http1::handshake(TokioIo::new(self.tls(b"http/1.1").await))
            .await
            .unwrap();
        tokio::spawn(connection);
        send
    }

    /// An HTTP/2 connection to the server as the admin, made by `builder` (its windows, say).
    pub async fn http2<B>(&self, builder: &http2::Builder<TokioExecutor>) -> http2::SendRequest<B>
    where
        B: hyper::body::Body + Unpin + Send + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let (send, connection) = builder
            .handshake(TokioIo::new(self.tls(b"h2").await))
            .await
            .unwrap();
        tokio::spawn(connection);
        send
    }

    /// Sends `request` (a path or a URL of this server) over a new HTTP/1.1 connection.
    pub async fn send(&self, mut request: Request<Full<Bytes>>) -> Response<hyper::body::Incoming> {
        if !request.headers().contains_key(hyper::header::HOST) {
            let host = self.addr.to_string().parse().unwrap();
            request.headers_mut().insert(hyper::header::HOST, host);
        }
        self.http1().await.send_request(request).await.unwrap()
    }

    /// A kube-rs client from the `admin.kubeconfig` the server wrote.
    pub async fn kube_client(&self) -> kube::Client {
        crate::clients::kube_client(&self.data_dir().join("admin.kubeconfig")).await
    }

    /// The server's `/metrics`, as a Prometheus scrape reads them (read values with
    /// [`crate::metrics::sample`]).
    pub async fn metrics(&self) -> String {
        let request = Request::get("/metrics").body(Full::default()).unwrap();
        let response = self.send(request).await;
        let status = response.status();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let text = String::from_utf8(body.to_vec()).unwrap();
        assert_eq!(status, 200, "{text}");
        text
    }

    /// Waits until a scrape of the server's metrics has the sample line `line` (value
    /// included); the scrape.
    pub async fn metrics_until(&self, line: &str) -> String {
        eventually_async(&format!("{line:?} in /metrics"), || async {
            let text = self.metrics().await;
            crate::metrics::has_all(&text, &[line]).then_some(text)
        })
        .await
    }

    /// The audit events written so far (audit.k8s.io/v1 Events, one JSON object a line).
    pub fn audit_events(&self) -> Vec<Value> {
        audit_events(&self.place.audit_log())
    }

    /// Waits until the audit log has the events `wanted` accepts; they, in the log's order.
    pub async fn audit_until(&self, wanted: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        eventually_async("the events wanted in the audit log", || async {
            let events = self.audit_events();
            wanted(&events).then_some(events)
        })
        .await
    }
}

/// The events in the audit log at `path` (none while it does not exist).
fn audit_events(path: &Path) -> Vec<Value> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => panic!("reading {}: {e}", path.display()),
    };
    // The writer may be half-way through the last line.
    text.lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// Stops the server it belongs to when dropped (at the end of a test).
struct StopOnDrop(Shutdown);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.trigger();
    }
}

/// A server's data while no server runs.
pub struct Stopped {
    /// The storage, still open.
    pub storage: Arc<Backend>,
    place: Place,
    addr: SocketAddr,
}

impl std::fmt::Debug for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stopped")
            .field("addr", &self.addr)
            .field("data_dir", &self.place.data_dir())
            .finish_non_exhaustive()
    }
}

impl Stopped {
    /// Serves the data again on the same address, with the same certificates.
    pub async fn start(self) -> Server {
        let Stopped {
            storage,
            place,
            addr,
        } = self;
        drop(storage);
        // The stopped server's tasks may hold the SQLite store a moment longer.
        let completed = eventually_ok_async("the data to open again", || {
            let config = place.config(addr.port());
            async move { config.complete().await.map_err(|e| format!("{e:?}")) }
        })
        .await;
        serve(place, completed).await
    }
}
