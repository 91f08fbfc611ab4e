//! An HTTPS server in the test, for the API server to call (a conversion webhook, say): a
//! certificate for 127.0.0.1 signed by a CA of its own, on a port it binds itself, answering
//! every request with a function of the test.

use std::sync::Arc;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;

/// What the test's function is asked: the method, path and body of one request.
#[derive(Debug)]
pub struct Call {
    /// The method.
    pub method: String,
    /// The path and query.
    pub path: String,
    /// The body.
    pub body: Vec<u8>,
    /// The `Authorization` header, if sent.
    pub authorization: Option<String>,
}

/// The certificate the server presents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Serving {
    /// A certificate for 127.0.0.1 signed by its CA (the usual set-up).
    SignedByItsCa,
    /// Its self-signed CA certificate itself, for 127.0.0.1 (what many guides set up, and Go
    /// accepts).
    ItsCa,
}

/// A running server; it stops with the test process.
pub struct Webhook {
    /// `https://127.0.0.1:<port>`.
    pub base: String,
    /// The CA that signed its certificate, PEM (a `caBundle`).
    pub ca_pem: String,
}

impl Webhook {
    /// Serves HTTP/1.1 over TLS on its own thread and runtime; `answer` turns each request
    /// into a JSON body (status 200).
    pub fn start(answer: impl Fn(Call) -> serde_json::Value + Send + Sync + 'static) -> Webhook {
        Webhook::start_serving(Serving::SignedByItsCa, answer)
    }

    /// [`Webhook::start`], presenting the certificate `serving` says.
    pub fn start_serving(
        serving: Serving,
        answer: impl Fn(Call) -> serde_json::Value + Send + Sync + 'static,
    ) -> Webhook {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
        let ca_key = KeyPair::generate().unwrap();
        let names = match serving {
            Serving::SignedByItsCa => Vec::new(),
            Serving::ItsCa => vec!["127.0.0.1".to_owned()],
        };
        let mut ca_params = CertificateParams::new(names).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let ca_pem = ca.pem();
        let (cert, key) = match serving {
            Serving::ItsCa => (ca, ca_key),
            Serving::SignedByItsCa => {
                let issuer = Issuer::new(ca_params, ca_key);
                let key = KeyPair::generate().unwrap();
                // Also the name of the Service `webhooks/policy`, for calls by reference.
                let cert = CertificateParams::new(vec![
                    "127.0.0.1".to_owned(),
                    "policy.webhooks.svc".to_owned(),
                ])
                .unwrap()
                .signed_by(&key, &issuer)
                .unwrap();
                (cert, key)
            }
        };
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivatePkcs8KeyDer::from(key.serialize_der()).into(),
        )
        .unwrap();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let answer = Arc::new(answer);
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
                    let (acceptor, answer) = (acceptor.clone(), answer.clone());
                    tokio::spawn(async move {
                        // A client that gives up on the handshake is no failure of the test.
                        let Ok(tls) = acceptor.accept(stream).await else {
                            return;
                        };
                        let service = hyper::service::service_fn(
                            move |request: hyper::Request<hyper::body::Incoming>| {
                                let answer = answer.clone();
                                async move {
                                    let method = request.method().to_string();
                                    let path = request.uri().to_string();
                                    let authorization = request
                                        .headers()
                                        .get(hyper::header::AUTHORIZATION)
                                        .and_then(|v| v.to_str().ok())
                                        .map(str::to_owned);
                                    let body = request.into_body().collect().await?.to_bytes();
                                    let reply = answer(Call {
                                        method,
                                        path,
                                        body: body.to_vec(),
                                        authorization,
                                    });
                                    Ok::<_, hyper::Error>(
                                        hyper::Response::builder()
                                            .header("content-type", "application/json")
                                            .body(Full::new(Bytes::from(reply.to_string())))
                                            .unwrap(),
                                    )
                                }
                            },
                        );
                        let served = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(tls), service)
                            .await;
                        if let Err(e) = served {
                            eprintln!("the test's webhook: a connection ended with {e}");
                        }
                    });
                }
            });
        });
        let address = address.recv().unwrap();
        Webhook {
            base: format!("https://{address}"),
            ca_pem,
        }
    }
}
