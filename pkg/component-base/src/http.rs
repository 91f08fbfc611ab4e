//! A small HTTP server for a component's operational endpoints (`/healthz`, `/livez`,
//! `/readyz`, `/metrics`), with graceful shutdown.
//!
//! Roles that have an HTTP server of their own (the apiserver) mount [`OpsHandler::handle`] in
//! their router instead; roles that do not (the controller-manager) run [`serve`] with it.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;

use crate::health::Health;
use crate::metrics;
use crate::shutdown::{self, Shutdown};

/// A response with a body held in memory.
pub type FullResponse = Response<Full<Bytes>>;

/// Errors of the ops server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Binding the listening socket failed.
    #[error("listening on {addr}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Connections did not finish within the shutdown deadline.
    #[error("closing connections")]
    Drain(#[source] shutdown::Error),
}

/// Answers the operational endpoints of a component.
#[derive(Clone, Debug)]
pub struct OpsHandler {
    health: Health,
    metrics: metrics::Registry,
}

impl OpsHandler {
    /// A handler over the given health checks and metrics.
    pub fn new(health: Health, metrics: metrics::Registry) -> Self {
        Self { health, metrics }
    }

    /// Answers `req` if it is for an ops endpoint, or returns `None` for any other path.
    pub async fn handle<B>(&self, req: &Request<B>) -> Option<FullResponse> {
        let path = req.uri().path();
        let is_metrics = path == "/metrics";
        let health = if is_metrics {
            None
        } else {
            Some(self.health.answer(path, req.uri().query()).await?)
        };
        if req.method() != Method::GET && req.method() != Method::HEAD {
            return Some(text(
                StatusCode::METHOD_NOT_ALLOWED,
                "only GET and HEAD are allowed\n".into(),
            ));
        }
        Some(match health {
            Some(answer) => {
                let status = StatusCode::from_u16(answer.status)
                    .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                text(status, answer.body)
            }
            None => {
                let accept = req.headers().get(ACCEPT).and_then(|v| v.to_str().ok());
                let encoded = self.metrics.encode(accept);
                let mut response = Response::new(Full::new(Bytes::from(encoded.body)));
                response
                    .headers_mut()
                    .insert(CONTENT_TYPE, HeaderValue::from_static(encoded.content_type));
                response
            }
        })
    }
}

/// A plain-text response.
pub fn text(status: StatusCode, body: String) -> FullResponse {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// Binds `addr`; a port of 0 picks a free one (see [`TcpListener::local_addr`]).
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, Error> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Bind { addr, source })
}

/// The client certificates a TLS peer presented (DER, leaf first); every request of a TLS
/// connection carries them in its extensions (empty when the client sent none). Clones share
/// the chain, and what a server derives from it ([`PeerCertificates::derived`]) is computed
/// once per connection, not on every request.
#[derive(Clone, Default)]
pub struct PeerCertificates {
    chain: Arc<Vec<Vec<u8>>>,
    derived: Arc<std::sync::OnceLock<Arc<dyn std::any::Any + Send + Sync>>>,
}

impl std::fmt::Debug for PeerCertificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerCertificates")
            .field("certificates", &self.chain.len())
            .finish_non_exhaustive()
    }
}

impl PeerCertificates {
    /// The certificates of `chain` (DER, leaf first).
    pub fn new(chain: Vec<Vec<u8>>) -> Self {
        Self {
            chain: Arc::new(chain),
            derived: Arc::default(),
        }
    }

    /// The chain (DER, leaf first).
    pub fn chain(&self) -> &[Vec<u8>] {
        &self.chain
    }

    /// What `derive` makes of the chain (the user it names, say), computed by the first
    /// request of the connection and shared by the others. `None` if another type was derived
    /// from this connection's chain before.
    pub fn derived<T: Send + Sync + 'static>(
        &self,
        derive: impl FnOnce(&[Vec<u8>]) -> T,
    ) -> Option<Arc<T>> {
        let value = self
            .derived
            .get_or_init(|| Arc::new(derive(&self.chain)) as Arc<dyn std::any::Any + Send + Sync>)
            .clone();
        value.downcast::<T>().ok()
    }
}

/// The address a request's connection came from, in each request's extensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteAddr(pub std::net::SocketAddr);

/// The most concurrent HTTP/2 streams per connection: client-go multiplexes every watch of a
/// process on one connection, so the default of 200 is far too low.
const MAX_CONCURRENT_STREAMS: u32 = 1000;

/// Serves HTTP/1.1 and HTTP/2 (cleartext) on `listener` with `handler` until `shutdown` is
/// triggered; then stops accepting and gives open connections `drain_deadline` to finish.
/// Responses may have any body, streamed ones included.
pub async fn serve<H, F, B>(
    listener: TcpListener,
    handler: H,
    shutdown: Shutdown,
    drain_deadline: Duration,
) -> Result<(), Error>
where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    serve_with(listener, None, handler, shutdown, drain_deadline).await
}

/// Like [`serve`], over TLS: HTTP/2 is negotiated by ALPN when `tls` offers it, and each
/// request carries the client's [`PeerCertificates`].
pub async fn serve_tls<H, F, B>(
    listener: TcpListener,
    tls: tokio_rustls::TlsAcceptor,
    handler: H,
    shutdown: Shutdown,
    drain_deadline: Duration,
) -> Result<(), Error>
where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    serve_with(listener, Some(tls), handler, shutdown, drain_deadline).await
}

async fn serve_with<H, F, B>(
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    handler: H,
    shutdown: Shutdown,
    drain_deadline: Duration,
) -> Result<(), Error>
where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http2()
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS);
    let graceful = GracefulShutdown::new();
    // Connections that outlive the drain deadline (open watches) are aborted when this set is
    // dropped, so that nothing keeps serving after `serve` returns.
    let mut connections = tokio::task::JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(error) => {
                    // Running out of file descriptors and the like is transient: keep serving.
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = shutdown.triggered() => break,
        };
        let (handler, builder, watcher, tls) = (
            handler.clone(),
            builder.clone(),
            graceful.watcher(),
            tls.clone(),
        );
        // The TLS handshake runs in the connection's own task, so that a slow client never holds
        // up accepting others.
        connections.spawn(async move {
            let result = match tls {
                None => {
                    let service = service(handler, None, peer);
                    let conn = builder
                        .serve_connection_with_upgrades(TokioIo::new(stream), service)
                        .into_owned();
                    watcher.watch(conn).await
                }
                Some(tls) => {
                    let stream = match tls.accept(stream).await {
                        Ok(stream) => stream,
                        Err(error) => {
                            tracing::debug!(%peer, %error, "TLS handshake failed");
                            return;
                        }
                    };
                    let certificates = stream
                        .get_ref()
                        .1
                        .peer_certificates()
                        .map(|certs| certs.iter().map(|c| c.as_ref().to_vec()).collect())
                        .unwrap_or_default();
                    let service = service(handler, Some(PeerCertificates::new(certificates)), peer);
                    let conn = builder
                        .serve_connection_with_upgrades(TokioIo::new(stream), service)
                        .into_owned();
                    watcher.watch(conn).await
                }
            };
            if let Err(error) = result {
                tracing::debug!(%peer, %error, "connection ended with an error");
            }
        });
    }
    drop(listener);
    shutdown
        .drain(drain_deadline, graceful.shutdown())
        .await
        .map_err(Error::Drain)
}

/// The per-connection service: the handler, with the peer's certificates and address in each
/// request.
fn service<H, F, B>(
    handler: H,
    peer: Option<PeerCertificates>,
    remote: std::net::SocketAddr,
) -> impl hyper::service::Service<
    Request<Incoming>,
    Response = Response<B>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<B>, Infallible>> + Send,
> + Clone
where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: hyper::body::Body + Send + 'static,
{
    hyper::service::service_fn(move |mut req: Request<Incoming>| {
        let handler = handler.clone();
        if let Some(peer) = &peer {
            req.extensions_mut().insert(peer.clone());
        }
        req.extensions_mut().insert(RemoteAddr(remote));
        async move { Ok::<_, Infallible>(handler(req).await) }
    })
}

/// Serves only the ops endpoints of `ops`, answering 404 elsewhere.
pub async fn serve_ops(
    listener: TcpListener,
    ops: OpsHandler,
    shutdown: Shutdown,
    drain_deadline: Duration,
) -> Result<(), Error> {
    let handler = move |req: Request<Incoming>| {
        let ops = ops.clone();
        async move {
            match ops.handle(&req).await {
                Some(response) => response,
                None => text(StatusCode::NOT_FOUND, "404 page not found\n".into()),
            }
        }
    };
    serve(listener, handler, shutdown, drain_deadline).await
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn what_is_derived_from_a_chain_is_computed_once_per_connection() {
        let peer = PeerCertificates::new(vec![b"leaf".to_vec()]);
        let calls = AtomicUsize::new(0);
        let derive = |chain: &[Vec<u8>]| {
            calls.fetch_add(1, Ordering::Relaxed);
            chain.len()
        };
        let request_copy = peer.clone();
        assert_eq!(*peer.derived(derive).unwrap(), 1);
        assert_eq!(*request_copy.derived(derive).unwrap(), 1);
        assert_eq!(calls.load(Ordering::Relaxed), 1);
        // Another type than the one derived first is not there.
        assert!(peer.derived(|_| "other").is_none());
        assert_eq!(peer.chain(), [b"leaf".to_vec()]);
    }
}
