//! What the API server's tests share beyond the server itself
//! (`genplane_test_support::server`, re-exported here): whole answers to one request as the
//! admin, and [`on_both_backends!`], which runs a test on SQLite and on etcd.

#![allow(dead_code, unreachable_pub)]

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

pub use genplane_test_support::server::{
    Flavour, Server, start, start_configured, start_on, start_with, with_cache,
};

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
