//! The one HTTP/2 client every measurement uses: TLS over loopback, requests multiplexed on
//! shared connections (as client-go multiplexes everything on one connection per server).

use std::sync::Arc;

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::http2::SendRequest;
use hyper::header::HeaderValue;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};

/// A connection to one server; clones share the connection.
#[derive(Clone, Debug)]
pub(crate) struct Client {
    base: String,
    send: SendRequest<Full<Bytes>>,
    /// The `Authorization` header every request carries, if any (`Bearer <token>`).
    authorization: Option<HeaderValue>,
}

impl Client {
    /// Connects to `base` (`https://127.0.0.1:PORT`) with `tls` and negotiates HTTP/2.
    pub(crate) async fn connect(
        base: &str,
        tls: Arc<rustls::ClientConfig>,
    ) -> anyhow::Result<Self> {
        let authority = base
            .strip_prefix("https://")
            .with_context(|| format!("{base} is not an https URL"))?;
        let tcp = tokio::net::TcpStream::connect(authority).await?;
        tcp.set_nodelay(true)?;
        Self::handshake(base, tls, tcp).await
    }

    /// Like [`Client::connect`], with client-go's HTTP/2 flow-control windows (Go's
    /// `http2.Transport`: 4 MiB per stream, 1 GiB per connection), so that a server may send
    /// an unread stream as much as it would send to a Kubernetes client.
    pub(crate) async fn connect_like_client_go(
        base: &str,
        tls: Arc<rustls::ClientConfig>,
    ) -> anyhow::Result<Self> {
        let authority = base
            .strip_prefix("https://")
            .with_context(|| format!("{base} is not an https URL"))?;
        let tcp = tokio::net::TcpStream::connect(authority).await?;
        tcp.set_nodelay(true)?;
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1")?;
        let stream = tokio_rustls::TlsConnector::from(tls)
            .connect(name, tcp)
            .await
            .context("TLS handshake")?;
        let (send, connection) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
            .initial_stream_window_size(4 << 20)
            .initial_connection_window_size(1 << 30)
            .handshake(TokioIo::new(stream))
            .await
            .context("HTTP/2 handshake")?;
        tokio::spawn(connection);
        Ok(Self {
            base: base.to_owned(),
            send,
            authorization: None,
        })
    }

    /// Speaks TLS and HTTP/2 over `tcp`, a connection to `base`.
    pub(crate) async fn handshake(
        base: &str,
        tls: Arc<rustls::ClientConfig>,
        tcp: tokio::net::TcpStream,
    ) -> anyhow::Result<Self> {
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1")?;
        let stream = tokio_rustls::TlsConnector::from(tls)
            .connect(name, tcp)
            .await
            .context("TLS handshake")?;
        let (send, connection) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
            .handshake(TokioIo::new(stream))
            .await
            .context("HTTP/2 handshake")?;
        tokio::spawn(connection);
        Ok(Self {
            base: base.to_owned(),
            send,
            authorization: None,
        })
    }

    /// This connection, with every request sent through the returned client carrying
    /// `Authorization: Bearer <token>` (connect with a TLS configuration without a client
    /// certificate, so that the token is what authenticates).
    pub(crate) fn with_bearer(&self, token: &str) -> anyhow::Result<Self> {
        let mut value = HeaderValue::try_from(format!("Bearer {token}"))?;
        value.set_sensitive(true);
        Ok(Self {
            authorization: Some(value),
            ..self.clone()
        })
    }

    /// Sends a request for `path` (with its query) and returns the answer's head, with the
    /// body still streaming.
    pub(crate) async fn start(
        &self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
    ) -> anyhow::Result<Response<hyper::body::Incoming>> {
        self.start_typed(method, path, "application/json", body)
            .await
    }

    /// Like [`Client::start`], with the body's `content_type`.
    pub(crate) async fn start_typed(
        &self,
        method: Method,
        path: &str,
        content_type: &str,
        body: Option<Bytes>,
    ) -> anyhow::Result<Response<hyper::body::Incoming>> {
        self.send(method, path, "application/json", content_type, body)
            .await
    }

    /// GETs `path` asking for `accept` (a discovery or Table form, say) and reads the whole
    /// answer.
    pub(crate) async fn get_as(
        &self,
        path: &str,
        accept: &str,
    ) -> anyhow::Result<(StatusCode, Bytes)> {
        let response = self
            .send(Method::GET, path, accept, "application/json", None)
            .await?;
        let status = response.status();
        let body = response.into_body().collect().await?.to_bytes();
        Ok((status, body))
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        accept: &str,
        content_type: &str,
        body: Option<Bytes>,
    ) -> anyhow::Result<Response<hyper::body::Incoming>> {
        let mut request = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .header("accept", accept);
        if body.is_some() {
            request = request.header("content-type", content_type);
        }
        if let Some(authorization) = &self.authorization {
            request = request.header("authorization", authorization.clone());
        }
        let request = request.body(Full::new(body.unwrap_or_default()))?;
        let mut send = self.send.clone();
        send.ready().await?;
        Ok(send.send_request(request).await?)
    }

    /// Sends a request and reads the whole answer.
    pub(crate) async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
    ) -> anyhow::Result<(StatusCode, Bytes)> {
        let response = self.start(method, path, body).await?;
        let status = response.status();
        let body = response.into_body().collect().await?.to_bytes();
        Ok((status, body))
    }

    /// Sends a request with a body of `content_type` and fails unless the answer has status
    /// `want`.
    pub(crate) async fn expect_typed(
        &self,
        method: Method,
        path: &str,
        content_type: &str,
        body: Bytes,
        want: StatusCode,
    ) -> anyhow::Result<()> {
        let response = self
            .start_typed(method.clone(), path, content_type, Some(body))
            .await?;
        let status = response.status();
        let body = response.into_body().collect().await?.to_bytes();
        anyhow::ensure!(
            status == want,
            "{method} {path}: {status}, wanted {want}: {}",
            String::from_utf8_lossy(&body[..body.len().min(500)])
        );
        Ok(())
    }

    /// Sends a request and fails unless the answer has status `want`.
    pub(crate) async fn expect(
        &self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
        want: StatusCode,
    ) -> anyhow::Result<Bytes> {
        let (status, body) = self.call(method.clone(), path, body).await?;
        anyhow::ensure!(
            status == want,
            "{method} {path}: {status}, wanted {want}: {}",
            String::from_utf8_lossy(&body[..body.len().min(500)])
        );
        Ok(body)
    }
}
