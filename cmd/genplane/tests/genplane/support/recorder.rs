//! A recording proxy between a client and the API server: plain HTTP on loopback for the
//! client, HTTPS with the admin's client certificate to the server. It keeps what each
//! request and answer carried on the wire (content types and bodies), which is how a test
//! sees what kubectl really sent, and decodes it with code other than genplane's own.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;

use super::{Apiserver, Raw};

/// One exchange, as it went over the wire.
#[derive(Clone, Debug)]
pub struct Exchange {
    /// The request's method.
    pub method: String,
    /// The request's path and query.
    pub path: String,
    /// The request's `Content-Type`, empty when absent.
    pub content_type: String,
    /// The request's `Accept`, empty when absent.
    pub accept: String,
    /// The request's body.
    pub body: Vec<u8>,
    /// The answer's status.
    pub status: u16,
    /// The answer's `Content-Type`.
    pub answer_type: String,
    /// The answer's body.
    pub answer: Vec<u8>,
}

/// A running proxy; it stops with the test process.
pub struct Recorder {
    /// A kubeconfig that sends its user's requests through the proxy.
    pub kubeconfig: PathBuf,
    exchanges: Arc<Mutex<Vec<Exchange>>>,
}

impl Recorder {
    /// Starts a proxy to `server`, and writes its kubeconfig into `dir`.
    pub fn start(server: &Apiserver, dir: &Path) -> Recorder {
        let upstream = server.raw();
        let exchanges = Arc::new(Mutex::new(Vec::new()));
        let kept = exchanges.clone();
        let (ready, address) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                ready.send(listener.local_addr().unwrap()).unwrap();
                loop {
                    let (stream, _) = listener.accept().await.unwrap();
                    let (upstream, kept) = (upstream.clone(), kept.clone());
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(
                            move |request: hyper::Request<hyper::body::Incoming>| {
                                let (upstream, kept) = (upstream.clone(), kept.clone());
                                async move { relay(&upstream, request, &kept).await }
                            },
                        );
                        let served = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                        if let Err(e) = served {
                            eprintln!("the recording proxy: a connection ended with {e}");
                        }
                    });
                }
            });
        });
        let address = address.recv().unwrap();
        let kubeconfig = dir.join("recorded.kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: recorded\n  cluster:\n    server: http://{address}\nusers:\n- name: recorded\n  user: {{}}\ncontexts:\n- name: recorded\n  context:\n    cluster: recorded\n    user: recorded\ncurrent-context: recorded\n"
            ),
        )
        .unwrap();
        Recorder {
            kubeconfig,
            exchanges,
        }
    }

    /// Every exchange so far.
    pub fn exchanges(&self) -> Vec<Exchange> {
        self.exchanges.lock().unwrap().clone()
    }
}

/// Sends `request` on to the server and keeps both sides.
async fn relay(
    upstream: &Raw,
    request: hyper::Request<hyper::body::Incoming>,
    kept: &Mutex<Vec<Exchange>>,
) -> Result<hyper::Response<Full<Bytes>>, String> {
    let (parts, body) = request.into_parts();
    let body = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
    let header = |headers: &hyper::HeaderMap, name| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let tcp = tokio::net::TcpStream::connect(&upstream.address)
        .await
        .map_err(|e| e.to_string())?;
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let tls = tokio_rustls::TlsConnector::from(upstream.tls_config())
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            eprintln!("the recording proxy: the server connection ended with {e}");
        }
    });
    let mut forwarded = hyper::Request::builder()
        .method(parts.method.clone())
        .uri(parts.uri.path_and_query().map_or("/", |p| p.as_str()));
    for (name, value) in &parts.headers {
        if name != hyper::header::HOST {
            forwarded = forwarded.header(name, value);
        }
    }
    let forwarded = forwarded
        .header(hyper::header::HOST, "localhost")
        .body(Full::new(body.clone()))
        .map_err(|e| e.to_string())?;
    let answer = sender
        .send_request(forwarded)
        .await
        .map_err(|e| e.to_string())?;
    let (answer_parts, answer_body) = answer.into_parts();
    let answer_body = answer_body
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    kept.lock().unwrap().push(Exchange {
        method: parts.method.to_string(),
        path: parts.uri.to_string(),
        content_type: header(&parts.headers, "content-type"),
        accept: header(&parts.headers, "accept"),
        body: body.to_vec(),
        status: answer_parts.status.as_u16(),
        answer_type: header(&answer_parts.headers, "content-type"),
        answer: answer_body.to_vec(),
    });
    let mut response = hyper::Response::builder().status(answer_parts.status);
    for (name, value) in &answer_parts.headers {
        // The body goes back whole, with its own length.
        if name != hyper::header::TRANSFER_ENCODING && name != hyper::header::CONTENT_LENGTH {
            response = response.header(name, value);
        }
    }
    response
        .body(Full::new(answer_body))
        .map_err(|e| e.to_string())
}
