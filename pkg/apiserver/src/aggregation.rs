//! The aggregator's proxy: requests below `/apis/<group>/<version>` of a group-version an
//! APIService hands to another server go to that server, as kube-aggregator sends them.
//!
//! The request reaches the proxy after genplane's own filters: it is authenticated, audited,
//! authorized (and impersonation applied) here, then sent on with the user it was authorized
//! as in the front-proxy headers (`X-Remote-User`, `X-Remote-Group`, `X-Remote-Extra-<key>`),
//! over TLS with the proxy's client certificate (`--proxy-client-cert-file`), which the
//! extension server trusts through `--requestheader-client-ca-file`. The client's own
//! credentials (`Authorization`, its client certificate) and any `Impersonate-*` or
//! `X-Remote-*` headers it sent never reach the extension server. Bodies stream both ways
//! without being held (a watch's events pass as the extension server writes them); HTTP/2 is
//! used when the extension server offers it, one connection per target shared by its
//! requests. A group-version whose APIService is not available is answered 503, as upstream.
//!
//! What is served where is a [`Targets`] snapshot the aggregator's controller replaces
//! ([`crate::ApiServer::set_aggregated`]); each [`Target`] holds its connection.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, PoisonError};

use bytes::Bytes;
use genplane_apimachinery::errors::{ApiError, Status, StatusReason};
use genplane_authentication::UserInfo;
use http_body_util::BodyExt as _;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};

use crate::body::{RequestBody, ResponseBody};
use crate::handlers::error_response;

/// The body of a proxied request.
type ProxyBody = http_body_util::combinators::BoxBody<Bytes, hyper::Error>;

/// The headers that belong to one connection (RFC 9110 §7.6.1), never passed on.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Why an APIService's server cannot be called.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The connection failed.
    #[error("dial {address}: {source}")]
    Connect {
        /// The address dialled.
        address: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The TLS handshake failed (the serving certificate, say).
    #[error("tls handshake with {server_name}: {source}")]
    Handshake {
        /// The name the certificate is checked against.
        server_name: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// HTTP failed on the connection.
    #[error("{0}")]
    Http(#[from] hyper::Error),
    /// The server's name cannot be a TLS server name.
    #[error("invalid server name {0:?}")]
    ServerName(String),
    /// No answer within the time given.
    #[error("no answer within {0:?}")]
    TimedOut(std::time::Duration),
}

/// One extension API server: where it is, how it is trusted, and its shared connection.
pub struct Target {
    /// The APIService's name (`<version>.<group>`).
    pub api_service: String,
    /// The address connected to.
    pub address: SocketAddr,
    /// The name its certificate is checked against (`<service>.<namespace>.svc`).
    pub server_name: String,
    /// Why it is not available, when it is not: its requests are answered 503.
    pub unavailable: Option<String>,
    tls: tokio_rustls::TlsConnector,
    /// `<server_name>:<port>`, what an HTTP/2 request names as its authority (made once).
    authority: Option<hyper::http::uri::Authority>,
    /// The HTTP/2 connection, when the server speaks it and it is open: taken for each request
    /// without waiting.
    h2: std::sync::Mutex<Option<hyper::client::conn::http2::SendRequest<ProxyBody>>>,
    /// Held while a connection is made, so that requests arriving meanwhile wait for it
    /// rather than each making one.
    connecting: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("api_service", &self.api_service)
            .field("address", &self.address)
            .field("server_name", &self.server_name)
            .field("unavailable", &self.unavailable)
            .finish_non_exhaustive()
    }
}

/// A connection's request sender, by protocol.
enum Sender {
    H2(hyper::client::conn::http2::SendRequest<ProxyBody>),
    H1(hyper::client::conn::http1::SendRequest<ProxyBody>),
}

impl Target {
    /// The server of `api_service` at `address`, its certificate checked against
    /// `server_name` by `tls` (which presents the proxy's client certificate).
    pub fn new(
        api_service: String,
        address: SocketAddr,
        server_name: String,
        mut tls: rustls::ClientConfig,
    ) -> Self {
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let authority = format!("{server_name}:{}", address.port()).parse().ok();
        Self {
            api_service,
            address,
            server_name,
            unavailable: None,
            tls: tokio_rustls::TlsConnector::from(Arc::new(tls)),
            authority,
            h2: std::sync::Mutex::new(None),
            connecting: tokio::sync::Mutex::new(()),
        }
    }

    /// The same target, answered 503 for `reason` (its connection kept).
    pub fn with_unavailable(mut self, reason: Option<String>) -> Self {
        self.unavailable = reason;
        self
    }

    /// A new connection: HTTP/2 when the server offers it, else HTTP/1.1.
    async fn connect(&self) -> Result<Sender, Error> {
        let stream = tokio::net::TcpStream::connect(self.address)
            .await
            .map_err(|source| Error::Connect {
                address: self.address,
                source,
            })?;
        let _ = stream.set_nodelay(true);
        let name = rustls::pki_types::ServerName::try_from(self.server_name.clone())
            .map_err(|_| Error::ServerName(self.server_name.clone()))?;
        let tls = self
            .tls
            .connect(name, stream)
            .await
            .map_err(|source| Error::Handshake {
                server_name: self.server_name.clone(),
                source,
            })?;
        let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
        let io = TokioIo::new(tls);
        if h2 {
            let (sender, connection) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), io).await?;
            tokio::spawn(async move {
                if let Err(error) = connection.await {
                    tracing::debug!(%error, "aggregated API server connection ended");
                }
            });
            Ok(Sender::H2(sender))
        } else {
            let (sender, connection) = hyper::client::conn::http1::handshake(io).await?;
            tokio::spawn(async move {
                if let Err(error) = connection.await {
                    tracing::debug!(%error, "aggregated API server connection ended");
                }
            });
            Ok(Sender::H1(sender))
        }
    }

    /// Sends `request` (its URI a path and query) on the shared HTTP/2 connection, or a new
    /// one.
    pub async fn send(
        &self,
        mut request: Request<ProxyBody>,
    ) -> Result<Response<hyper::body::Incoming>, Error> {
        let sender = match self.open_h2() {
            Some(sender) => Sender::H2(sender),
            None => {
                // One connection is made at a time; who waited for it takes it.
                let _connecting = self.connecting.lock().await;
                match self.open_h2() {
                    Some(sender) => Sender::H2(sender),
                    None => {
                        let sender = self.connect().await?;
                        if let Sender::H2(sender) = &sender {
                            *self.h2.lock().unwrap_or_else(PoisonError::into_inner) =
                                Some(sender.clone());
                        }
                        sender
                    }
                }
            }
        };
        let path_and_query = request.uri().path_and_query().cloned();
        match sender {
            Sender::H2(mut sender) => {
                // An HTTP/2 request names its target whole: `https://<authority><path>`.
                let mut uri = hyper::http::uri::Parts::default();
                uri.scheme = Some(hyper::http::uri::Scheme::HTTPS);
                uri.authority = self.authority.clone();
                uri.path_and_query = path_and_query;
                *request.uri_mut() = hyper::Uri::from_parts(uri).unwrap_or_default();
                sender.ready().await?;
                Ok(sender.send_request(request).await?)
            }
            Sender::H1(mut sender) => {
                if let Some(host) = self
                    .authority
                    .as_ref()
                    .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
                {
                    request.headers_mut().insert(hyper::header::HOST, host);
                }
                sender.ready().await?;
                Ok(sender.send_request(request).await?)
            }
        }
    }

    /// The shared HTTP/2 connection's sender, when it is open.
    fn open_h2(&self) -> Option<hyper::client::conn::http2::SendRequest<ProxyBody>> {
        let mut shared = self.h2.lock().unwrap_or_else(PoisonError::into_inner);
        match shared.as_ref() {
            Some(sender) if !sender.is_closed() => Some(sender.clone()),
            _ => {
                *shared = None;
                None
            }
        }
    }
}

/// The group-versions served by other servers, by group and version.
#[derive(Debug, Default)]
pub struct Targets {
    by_group_version: HashMap<(String, String), Arc<Target>>,
}

impl Targets {
    /// The targets of `served`: each with its group and version.
    pub fn new(served: impl IntoIterator<Item = (String, String, Arc<Target>)>) -> Self {
        Self {
            by_group_version: served
                .into_iter()
                .map(|(group, version, target)| ((group, version), target))
                .collect(),
        }
    }

    /// The target of a request's path, when it is below `/apis/<group>/<version>` of a
    /// group-version served elsewhere, or its OpenAPI v3 document
    /// (`/openapi/v3/apis/<group>/<version>`).
    pub fn of_path(&self, path: &str) -> Option<&Arc<Target>> {
        if self.by_group_version.is_empty() {
            return None;
        }
        let rest = path
            .strip_prefix("/apis/")
            .or_else(|| path.strip_prefix("/openapi/v3/apis/"))?;
        let mut parts = rest.splitn(3, '/');
        let group = parts.next()?;
        let version = parts.next().filter(|v| !v.is_empty())?;
        self.by_group_version
            .get(&(group.to_owned(), version.to_owned()))
    }
}

/// `X-Remote-Extra-<key>`: the key escaped as a URL path segment, as upstream writes it.
fn extra_header(key: &str) -> Option<HeaderName> {
    let mut escaped = String::with_capacity(key.len());
    for byte in key.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            escaped.push(char::from(byte));
        } else {
            escaped.push_str(&format!("%{byte:02X}"));
        }
    }
    HeaderName::from_bytes(format!("x-remote-extra-{escaped}").as_bytes()).ok()
}

/// Whether a request header stays out of the proxied request: one connection's, the client's
/// credentials, and the identity headers only the proxy may set.
fn withheld(name: &HeaderName) -> bool {
    let name = name.as_str();
    HOP_BY_HOP.contains(&name)
        || name == "authorization"
        || name == "host"
        || name.starts_with("impersonate-")
        || name.starts_with("x-remote-")
}

/// The proxied request's body: streamed as received, or, when the audit log records it,
/// read first (within the limit of every request body, [`crate::MAX_BODY_BYTES`]).
async fn outgoing_body(body: RequestBody) -> Result<ProxyBody, ApiError> {
    let full = |bytes: Bytes| {
        http_body_util::Full::new(bytes)
            .map_err(|never| match never {})
            .boxed()
    };
    Ok(match body {
        RequestBody::Read(bytes) => full(bytes),
        RequestBody::Incoming(unread) => match unread.into_incoming() {
            Some(incoming) => incoming.boxed(),
            None => full(Bytes::new()),
        },
        recorded @ RequestBody::Recorded(..) => full(crate::handlers::read_bytes(recorded).await?),
    })
}

/// Answers a request for `target`'s group-version by sending it there as `user`.
pub(crate) async fn proxy(
    target: &Target,
    parts: hyper::http::request::Parts,
    body: RequestBody,
    user: &UserInfo,
) -> Response<ResponseBody> {
    if let Some(reason) = &target.unavailable {
        tracing::debug!(api_service = %target.api_service, %reason, "unavailable");
        return error_response(
            &Status::failure(StatusReason::ServiceUnavailable, "service unavailable").into(),
        );
    }
    let body = match outgoing_body(body).await {
        Ok(body) => body,
        Err(error) => return error_response(&error),
    };
    let mut request = Request::new(body);
    *request.method_mut() = parts.method;
    let mut uri = hyper::http::uri::Parts::default();
    uri.path_and_query = parts.uri.path_and_query().cloned();
    *request.uri_mut() = hyper::Uri::from_parts(uri).unwrap_or_default();
    let headers = request.headers_mut();
    for (name, value) in &parts.headers {
        if !withheld(name) {
            headers.append(name.clone(), value.clone());
        }
    }
    if let Ok(value) = HeaderValue::from_str(&user.username) {
        headers.insert("x-remote-user", value);
    }
    for group in &user.groups {
        if let Ok(value) = HeaderValue::from_str(group) {
            headers.append("x-remote-group", value);
        }
    }
    for (key, values) in &user.extra {
        let Some(name) = extra_header(key) else {
            continue;
        };
        for value in values {
            if let Ok(value) = HeaderValue::from_str(value) {
                headers.append(name.clone(), value);
            }
        }
    }
    match target.send(request).await {
        Ok(answer) => {
            let (mut parts, incoming) = answer.into_parts();
            for name in HOP_BY_HOP {
                parts.headers.remove(*name);
            }
            Response::from_parts(parts, ResponseBody::Proxied(incoming))
        }
        Err(error) => {
            tracing::warn!(api_service = %target.api_service, %error, "proxying");
            error_response(
                &Status::failure(
                    StatusReason::ServiceUnavailable,
                    format!("error trying to reach service: {error}"),
                )
                .into(),
            )
        }
    }
}

/// The user the aggregator's own requests (availability checks, discovery) are made as, in
/// `system:masters` so that an extension server always lets them read, as upstream's.
pub const AGGREGATOR_USER: &str = "system:kube-aggregator";

/// Reads the whole answer of `target` to a GET of `path` within `timeout`, made as
/// [`AGGREGATOR_USER`]: the status and the body (what the availability check and discovery
/// read).
pub async fn get(
    target: &Target,
    path: &str,
    timeout: std::time::Duration,
) -> Result<(hyper::StatusCode, Bytes), Error> {
    let fetch = async {
        let mut request = Request::new(
            http_body_util::Empty::new()
                .map_err(|never| match never {})
                .boxed(),
        );
        *request.uri_mut() = path.parse().unwrap_or_default();
        let headers = request.headers_mut();
        headers.insert(
            hyper::header::ACCEPT,
            HeaderValue::from_static("application/json"),
        );
        headers.insert("x-remote-user", HeaderValue::from_static(AGGREGATOR_USER));
        headers.insert("x-remote-group", HeaderValue::from_static("system:masters"));
        let answer = target.send(request).await?;
        let status = answer.status();
        let body = answer.into_body().collect().await?.to_bytes();
        Ok((status, body))
    };
    tokio::time::timeout(timeout, fetch)
        .await
        .map_err(|_| Error::TimedOut(timeout))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_headers_are_the_proxys_alone() {
        for name in [
            "authorization",
            "impersonate-user",
            "impersonate-extra-scopes",
            "x-remote-user",
            "x-remote-group",
            "x-remote-extra-scopes",
            "connection",
            "host",
        ] {
            assert!(withheld(&HeaderName::from_static(name)), "{name}");
        }
        for name in ["accept", "content-type", "user-agent", "audit-id"] {
            assert!(!withheld(&HeaderName::from_static(name)), "{name}");
        }
        assert_eq!(
            extra_header("authentication.kubernetes.io/pod-name")
                .unwrap()
                .as_str(),
            "x-remote-extra-authentication.kubernetes.io%2fpod-name"
        );
    }

    #[test]
    fn paths_below_a_group_version_are_its() {
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
        let target = Arc::new(Target::new(
            "v1alpha1.wardle.example.com".into(),
            "127.0.0.1:1".parse().unwrap(),
            "api.wardle.svc".into(),
            tls,
        ));
        let targets = Targets::new([(
            "wardle.example.com".to_owned(),
            "v1alpha1".to_owned(),
            target,
        )]);
        for (path, theirs) in [
            ("/apis/wardle.example.com/v1alpha1", true),
            ("/apis/wardle.example.com/v1alpha1/", true),
            (
                "/apis/wardle.example.com/v1alpha1/namespaces/a/flunders",
                true,
            ),
            ("/apis/wardle.example.com", false),
            ("/apis/wardle.example.com/v1", false),
            ("/apis/wardle.example.com/", false),
            ("/api/v1", false),
            ("/apis", false),
            ("/openapi/v3/apis/wardle.example.com/v1alpha1", true),
            ("/openapi/v3/apis/wardle.example.com", false),
        ] {
            assert_eq!(targets.of_path(path).is_some(), theirs, "{path}");
        }
    }
}
