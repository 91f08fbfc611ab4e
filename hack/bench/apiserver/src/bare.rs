//! The bare server: hyper over rustls answering fixed bytes per path, the ceiling GET and LIST
//! through genplane are compared with. It runs as a child process of the benchmark (the
//! benchmark runs itself with `--serve-bare FILE`), so that it shares the machine with its
//! client exactly as the apiserver does.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};

/// What the bare server serves, written by the benchmark as JSON.
#[derive(Debug, Default)]
pub(crate) struct Routes {
    /// The serving certificate (the apiserver's), its key, and the CA of client certificates.
    pub(crate) cert: PathBuf,
    /// The serving certificate's key.
    pub(crate) key: PathBuf,
    /// The CA that signs client certificates.
    pub(crate) client_ca: PathBuf,
    /// Path with query → (content type, body).
    pub(crate) answers: Vec<(String, String, Bytes)>,
}

impl Routes {
    /// Writes the routes to `file`.
    pub(crate) fn write(&self, file: &Path) -> anyhow::Result<()> {
        let answers: Vec<serde_json::Value> = self
            .answers
            .iter()
            .map(|(path, content_type, body)| {
                serde_json::json!({
                    "path": path,
                    "contentType": content_type,
                    "body": String::from_utf8_lossy(body),
                })
            })
            .collect();
        let json = serde_json::json!({
            "cert": self.cert,
            "key": self.key,
            "clientCA": self.client_ca,
            "answers": answers,
        });
        std::fs::write(file, serde_json::to_vec(&json)?)?;
        Ok(())
    }

    fn read(file: &Path) -> anyhow::Result<Self> {
        let json: serde_json::Value = serde_json::from_slice(&std::fs::read(file)?)?;
        let path = |name: &str| -> anyhow::Result<PathBuf> {
            Ok(PathBuf::from(
                json[name].as_str().with_context(|| format!("no {name}"))?,
            ))
        };
        let mut routes = Routes {
            cert: path("cert")?,
            key: path("key")?,
            client_ca: path("clientCA")?,
            answers: Vec::new(),
        };
        for answer in json["answers"].as_array().context("no answers")? {
            let text = |name: &str| answer[name].as_str().unwrap_or_default().to_owned();
            routes
                .answers
                .push((text("path"), text("contentType"), Bytes::from(text("body"))));
        }
        Ok(routes)
    }
}

/// Serves the routes in `file` on a free loopback port, printed as `port N` on stdout, until
/// killed.
pub(crate) async fn serve(file: &Path) -> anyhow::Result<()> {
    let routes = Routes::read(file)?;
    let tls = crate::tls::server(&routes.cert, &routes.key, &routes.client_ca)?;
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    let mut answers = HashMap::new();
    for (path, content_type, body) in routes.answers {
        answers.insert(path, (HeaderValue::from_str(&content_type)?, body));
    }
    let answers = Arc::new(answers);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let mut stdout = std::io::stdout();
    writeln!(stdout, "port {}", listener.local_addr()?.port())?;
    stdout.flush()?;
    loop {
        let (tcp, _) = listener.accept().await?;
        tcp.set_nodelay(true)?;
        let (acceptor, answers) = (acceptor.clone(), answers.clone());
        tokio::spawn(async move {
            let Ok(stream) = acceptor.accept(tcp).await else {
                return;
            };
            let service = hyper::service::service_fn(move |request: hyper::Request<_>| {
                let answers = answers.clone();
                async move {
                    let path = request.uri().path_and_query().map_or("/", |p| p.as_str());
                    match answers.get(path) {
                        Some((content_type, body)) => Response::builder()
                            .header(CONTENT_TYPE, content_type.clone())
                            .body(Full::new(body.clone())),
                        None => Response::builder()
                            .status(StatusCode::NOT_FOUND)
                            .body(Full::new(Bytes::new())),
                    }
                }
            });
            let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .max_concurrent_streams(1000)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}
