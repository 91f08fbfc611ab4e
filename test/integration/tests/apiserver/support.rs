//! An API server in-process on loopback, assembled by the code that assembles
//! `genplane apiserver` (`genplane_controlplane::server`: options validated into a `Config`,
//! completed, run): HTTPS with a serving certificate generated in a temporary data directory,
//! client certificates checked against the generated CA, RBAC over the bootstrap policy,
//! the default admission plugins, and an audit log at Metadata level in the temporary
//! directory. Every resource is behind its watch cache, over SQLite or over a real etcd
//! process.
//!
//! The clients here (raw TLS streams, HTTP/1.1 and HTTP/2 connections, kube-rs) trust the
//! generated CA and present the admin's client certificate (user `genplane-admin`, group
//! `system:masters`), as `admin.kubeconfig` does.

#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use genplane_component_base::config::Invalid;
use genplane_component_base::featuregate::UseIdentity;
use genplane_component_base::shutdown::Shutdown;
use genplane_component_base::version::BuildInfo;
use genplane_controlplane::Backend;
use genplane_controlplane::server::{CompletedConfig, Config, Error, Options, Ready};
use genplane_storage_etcd::testing::EtcdServer;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::{http1, http2};
use hyper::{Method, Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_rustls::client::TlsStream;

/// The audit policy every test server runs with: every request at Metadata level.
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n";

/// How long a server may take to start (a restart waits for the previous one's storage).
const START: Duration = Duration::from_secs(30);

/// Which storage the server runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    /// Embedded SQLite in the temporary data directory.
    Sqlite,
    /// A real etcd process on a free loopback port.
    Etcd,
}

/// A running server and what its clients need.
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
        (
            output.status.code(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ),
        )
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
        let path = self.data_dir().join("admin.kubeconfig");
        let kubeconfig = kube::config::Kubeconfig::read_from(&path).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        kube::Client::try_from(config).unwrap()
    }

    /// The server's `/metrics`, as a Prometheus scrape reads them.
    pub async fn metrics(&self) -> String {
        let answer = call(self, Method::GET, "/metrics", &[], None)
            .await
            .expect(200);
        String::from_utf8(answer.body).unwrap()
    }

    /// Waits until a scrape of the server's metrics contains `line`; the scrape.
    pub async fn metrics_until(&self, line: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let text = self.metrics().await;
            if text.contains(line) {
                return text;
            }
            assert!(Instant::now() < deadline, "never saw {line:?} in:\n{text}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The audit events written so far (audit.k8s.io/v1 Events, one JSON object a line).
    pub fn audit_events(&self) -> Vec<Value> {
        audit_events(&self.place.audit_log())
    }

    /// Waits until the audit log has the events `wanted` accepts; they, in the log's order.
    pub async fn audit_until(&self, wanted: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let events = self.audit_events();
            if wanted(&events) {
                return events;
            }
            assert!(
                Instant::now() < deadline,
                "the audit log never had the events wanted: {events:#?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
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
        let deadline = Instant::now() + START;
        let completed = loop {
            match place.config(addr.port()).complete().await {
                Ok(completed) => break completed,
                Err(e) if Instant::now() < deadline => {
                    drop(e);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("starting again: {e:?}"),
            }
        };
        serve(place, completed).await
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
                        $crate::support::start_on($crate::support::Flavour::Sqlite).await,
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
                        $crate::support::start_on($crate::support::Flavour::Etcd).await,
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

    /// Fails the test unless the status is `status` (saying what the body says); the answer.
    #[track_caller]
    pub fn expect(self, status: u16) -> Answer {
        assert_eq!(
            self.status,
            status,
            "{}",
            String::from_utf8_lossy(&self.body)
        );
        self
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

/// Sends one request as the admin over HTTPS and reads the whole answer.
pub async fn call(
    server: &Server,
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
) -> Answer {
    let mut request = Request::builder().method(method).uri(path);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let request = request
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .unwrap();
    let response = server.send(request).await;
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

/// `POST`s `object` as JSON to `path`.
pub async fn post_json(server: &Server, path: &str, object: &Value) -> Answer {
    let body = serde_json::to_vec(object).unwrap();
    call(
        server,
        Method::POST,
        path,
        &[("content-type", "application/json")],
        Some(body),
    )
    .await
}

/// Reads `stream` to its end: a server may close a connection without TLS's close_notify once
/// its answer is complete.
pub async fn read_to_end(stream: &mut TlsStream<TcpStream>) -> std::io::Result<Vec<u8>> {
    use tokio::io::AsyncReadExt as _;
    let mut raw = Vec::new();
    match stream.read_to_end(&mut raw).await {
        Ok(_) => Ok(raw),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => Ok(raw),
        Err(e) => Err(e),
    }
}
