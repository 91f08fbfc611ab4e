//! A stand-in extension API server for the aggregator's tests: `wardle.example.com/v1alpha1`
//! with one namespaced resource, `flunders`, over TLS (HTTP/2 and HTTP/1.1) with a serving
//! certificate for the Service `wardle/api` (`api.wardle.svc`) signed by a CA of its own, and
//! client certificates required and checked against the front-proxy CA it is given, as an
//! extension server started with `--requestheader-client-ca-file` checks them. It records
//! every request it gets (method, path and query, headers, the client certificate's subject)
//! and answers a watch with one event at once, then keeps the stream open.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Bytes, Frame};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};

/// The group-version it serves.
pub const GROUP: &str = "wardle.example.com";
/// Its version.
pub const VERSION: &str = "v1alpha1";

/// A request it got.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub target: String,
    pub headers: Vec<(String, String)>,
    /// The HTTP version it came in (`HTTP/2.0`, `HTTP/1.1`).
    pub version: String,
}

impl Seen {
    /// The values of header `name`.
    pub fn header(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

type Body = http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>;

/// The server: bound at once (its port known before the API server starts), serving once
/// [`Extension::serve`] gives it the front-proxy CA.
pub struct Extension {
    pub port: u16,
    /// The CA of its serving certificate (PEM), the APIService's `caBundle`.
    pub ca_pem: String,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    listener: Option<std::net::TcpListener>,
    cert_der: Vec<u8>,
    key_der: Vec<u8>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Extension {
    /// Binds a port on 127.0.0.1 and makes the serving certificate.
    pub fn bind() -> Extension {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["api.wardle.svc".to_owned()])
            .unwrap()
            .signed_by(&key, &issuer)
            .unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        Extension {
            port: listener.local_addr().unwrap().port(),
            ca_pem: ca.pem(),
            seen: Arc::default(),
            listener: Some(listener),
            cert_der: cert.der().to_vec(),
            key_der: key.serialize_der(),
            stop: None,
            thread: None,
        }
    }

    /// Serves, requiring client certificates signed by `front_proxy_ca` (PEM).
    pub fn serve(&mut self, front_proxy_ca: &str) {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject as _;
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(front_proxy_ca.as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .build()
        .unwrap();
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(
                vec![self.cert_der.clone().into()],
                rustls::pki_types::PrivatePkcs8KeyDer::from(self.key_der.clone()).into(),
            )
            .unwrap();
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = self.listener.take().expect("served once");
        let seen = self.seen.clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        self.stop = Some(stop);
        self.thread = Some(std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let serve = async {
                    loop {
                        let Ok((stream, _)) = listener.accept().await else {
                            continue;
                        };
                        let acceptor = acceptor.clone();
                        let seen = seen.clone();
                        tokio::spawn(async move {
                            let Ok(tls) = acceptor.accept(stream).await else {
                                return;
                            };
                            let service = hyper::service::service_fn(move |request| {
                                let seen = seen.clone();
                                async move {
                                    Ok::<_, std::convert::Infallible>(answer(request, &seen).await)
                                }
                            });
                            let _ =
                                hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                                    .serve_connection(TokioIo::new(tls), service)
                                    .await;
                        });
                    }
                };
                tokio::select! {
                    () = serve => {}
                    _ = stopped => {}
                }
            });
            // Dropping the runtime ends every connection.
            runtime.shutdown_timeout(Duration::from_secs(1));
        }));
    }

    /// Stops serving: its port refuses connections, its open connections end.
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }

    /// The requests it got so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Extension {
    fn drop(&mut self) {
        self.stop();
    }
}

fn json_answer(status: u16, value: Value) -> hyper::Response<Body> {
    hyper::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(value.to_string())).boxed())
        .unwrap()
}

fn flunder(name: &str) -> Value {
    json!({"apiVersion": format!("{GROUP}/{VERSION}"), "kind": "Flunder",
        "metadata": {"name": name, "namespace": "default", "resourceVersion": "7",
            "uid": format!("uid-{name}"), "creationTimestamp": "2026-12-06T00:00:00Z"},
        "spec": {"reference": "wardle"}})
}

async fn answer(
    request: hyper::Request<hyper::body::Incoming>,
    seen: &Arc<Mutex<Vec<Seen>>>,
) -> hyper::Response<Body> {
    let target = request
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    let method = request.method().to_string();
    seen.lock().unwrap().push(Seen {
        method: method.clone(),
        target: target.clone(),
        headers: request
            .headers()
            .iter()
            .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
            .collect(),
        version: format!("{:?}", request.version()),
    });
    let path = target.split('?').next().unwrap_or("").to_owned();
    let watch = target.contains("watch=true") || target.contains("watch=1");
    let base = format!("/apis/{GROUP}/{VERSION}");
    let flunders = format!("{base}/namespaces/default/flunders");
    match (method.as_str(), path.as_str()) {
        ("GET", p) if p == base => json_answer(
            200,
            json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": format!("{GROUP}/{VERSION}"),
                "resources": [
                    {"name": "flunders", "singularName": "flunder", "namespaced": true, "kind": "Flunder",
                     "verbs": ["create", "delete", "get", "list", "watch"], "shortNames": ["fl"]},
                    {"name": "flunders/status", "singularName": "", "namespaced": true, "kind": "Flunder",
                     "verbs": ["get", "patch", "update"]}]}),
        ),
        ("GET", p) if p == flunders && watch => {
            let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(4);
            tokio::spawn(async move {
                let event = json!({"type": "ADDED", "object": flunder("first")});
                let _ = tx.send(Bytes::from(format!("{event}\n"))).await;
                // The stream stays open: what the client saw came through at once.
                tokio::time::sleep(Duration::from_secs(30)).await;
            });
            let stream = futures::stream::unfold(rx, |mut rx| async move {
                rx.recv()
                    .await
                    .map(|chunk| (Ok::<_, std::convert::Infallible>(Frame::data(chunk)), rx))
            });
            hyper::Response::builder()
                .status(200)
                .header("content-type", "application/json")
                .body(StreamBody::new(stream).boxed())
                .unwrap()
        }
        ("GET", p) if p == flunders => json_answer(
            200,
            json!({"kind": "FlunderList", "apiVersion": format!("{GROUP}/{VERSION}"),
                "metadata": {"resourceVersion": "7"}, "items": [flunder("first")]}),
        ),
        ("GET", p) if p == format!("{flunders}/first") => json_answer(200, flunder("first")),
        ("POST", p) if p == flunders => {
            let body = request.into_body().collect().await.unwrap().to_bytes();
            let mut object: Value = serde_json::from_slice(&body).unwrap_or(json!({}));
            object["metadata"]["uid"] = json!("uid-new");
            object["metadata"]["resourceVersion"] = json!("8");
            json_answer(201, object)
        }
        _ => json_answer(
            404,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                "reason": "NotFound", "code": 404, "message": "not found"}),
        ),
    }
}
