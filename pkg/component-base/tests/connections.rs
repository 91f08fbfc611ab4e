//! Connections that never ask, or never finish asking, are closed; connections that are busy
//! are not. Over plain TCP and TLS, HTTP/1.1 and HTTP/2, with timeouts shortened from
//! kube-apiserver's 32 s / 90 s so that the test takes seconds.

#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use genplane_component_base::http::{self, ConnectionTimeouts};
use genplane_component_base::shutdown::Shutdown;
use hyper::body::Bytes;
use hyper::body::Frame;
use hyper::{Request, Response};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

const TIMEOUTS: ConnectionTimeouts = ConnectionTimeouts {
    read_header: Duration::from_millis(300),
    idle: Duration::from_millis(600),
};

/// Longer than any timeout above by far: a connection still open after this was not closed.
const PATIENCE: Duration = Duration::from_secs(20);

/// A body: whole, or chunks from a channel.
enum Body {
    Full(Option<Bytes>),
    Chunks(tokio::sync::mpsc::Receiver<Bytes>),
}

impl hyper::body::Body for Body {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.get_mut() {
            Body::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Body::Chunks(rx) => rx.poll_recv(cx).map(|c| c.map(|b| Ok(Frame::data(b)))),
        }
    }
}

/// `/stream` answers eight chunks 200 ms apart (longer than the idle timeout in all);
/// anything else answers `ok`.
async fn handler(request: Request<hyper::body::Incoming>) -> Response<Body> {
    if request.uri().path() == "/stream" {
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        tokio::spawn(async move {
            for i in 0..8 {
                tokio::time::sleep(Duration::from_millis(200)).await;
                if tx.send(Bytes::from(format!("chunk{i}\n"))).await.is_err() {
                    return;
                }
            }
        });
        return Response::new(Body::Chunks(rx));
    }
    Response::new(Body::Full(Some(Bytes::from_static(b"ok"))))
}

/// A self-signed certificate for `localhost`: the server's config, and a client config
/// trusting it per ALPN protocol list.
fn tls_configs() -> (
    rustls::ServerConfig,
    impl Fn(&[&[u8]]) -> rustls::ClientConfig,
) {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    let cert = params.self_signed(&key).unwrap();
    let mut server = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivatePkcs8KeyDer::from(key.serialize_der()).into(),
        )
        .unwrap();
    server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.der().clone()).unwrap();
    let client = move |alpn: &[&[u8]]| {
        let mut client = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots.clone())
            .with_no_client_auth();
        client.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        client
    };
    (server, client)
}

async fn start(tls: Option<rustls::ServerConfig>) -> (SocketAddr, Shutdown) {
    let listener = http::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = Shutdown::new();
    tokio::spawn(http::serve_with_timeouts(
        listener,
        tls.map(|config| tokio_rustls::TlsAcceptor::from(Arc::new(config))),
        handler,
        shutdown.clone(),
        Duration::from_secs(1),
        TIMEOUTS,
    ));
    (addr, shutdown)
}

/// Whether the server closed the connection (end of stream or an error) within [`PATIENCE`],
/// reading and dropping whatever it sent before.
async fn closed_by_server(stream: &mut (impl AsyncRead + Unpin)) -> bool {
    let mut buffer = [0u8; 4096];
    let read_until_closed = async {
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(PATIENCE, read_until_closed)
        .await
        .is_ok()
}

/// Sends `bytes` one at a time, 50 ms apart, until the server closes the connection (`true`)
/// or [`PATIENCE`] runs out (`false`).
async fn drip(stream: &mut (impl AsyncRead + AsyncWrite + Unpin), bytes: &[u8]) -> bool {
    let started = tokio::time::Instant::now();
    let mut buffer = [0u8; 1024];
    for byte in bytes.iter().cycle() {
        if started.elapsed() > PATIENCE {
            return false;
        }
        if stream.write_all(&[*byte]).await.is_err() {
            return true;
        }
        if let Ok(read) =
            tokio::time::timeout(Duration::from_millis(50), stream.read(&mut buffer)).await
        {
            match read {
                Ok(0) | Err(_) => return true,
                Ok(_) => {}
            }
        }
    }
    false
}

#[tokio::test]
async fn plain_connections_that_never_finish_asking_are_closed() {
    let (addr, _shutdown) = start(None).await;
    // Nothing at all.
    let mut silent = tokio::net::TcpStream::connect(addr).await.unwrap();
    assert!(
        closed_by_server(&mut silent).await,
        "a silent connection stays open"
    );
    // Half a header.
    let mut partial = tokio::net::TcpStream::connect(addr).await.unwrap();
    partial
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        .await
        .unwrap();
    assert!(
        closed_by_server(&mut partial).await,
        "a half header stays open"
    );
    // A header fed one byte at a time, forever.
    let mut dripping = tokio::net::TcpStream::connect(addr).await.unwrap();
    dripping
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    assert!(
        drip(&mut dripping, b"X-Drip: aaaaaaaa\r\n").await,
        "a drip-fed header stays open"
    );
    // An HTTP/2 preface and nothing more.
    let mut h2 = tokio::net::TcpStream::connect(addr).await.unwrap();
    h2.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .unwrap();
    assert!(
        closed_by_server(&mut h2).await,
        "an idle HTTP/2 connection stays open"
    );
}

#[tokio::test]
async fn idle_keep_alive_connections_are_closed_and_busy_ones_are_not() {
    let (addr, _shutdown) = start(None).await;
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    // The streamed answer takes longer than the idle timeout, and all of it arrives.
    let mut answer = Vec::new();
    let mut buffer = [0u8; 1024];
    while !String::from_utf8_lossy(&answer).contains("chunk7") {
        let read = tokio::time::timeout(PATIENCE, stream.read(&mut buffer))
            .await
            .unwrap()
            .unwrap();
        assert_ne!(
            read,
            0,
            "closed while busy: {}",
            String::from_utf8_lossy(&answer)
        );
        answer.extend_from_slice(&buffer[..read]);
    }
    // Then, idle, it is closed.
    assert!(
        closed_by_server(&mut stream).await,
        "an idle keep-alive connection stays open"
    );
}

#[tokio::test]
async fn tls_connections_that_never_ask_are_closed() {
    let (server, client) = tls_configs();
    let (addr, _shutdown) = start(Some(server)).await;
    // No handshake at all, or half of one.
    let mut raw = tokio::net::TcpStream::connect(addr).await.unwrap();
    assert!(
        closed_by_server(&mut raw).await,
        "a connection without a handshake stays open"
    );
    let mut half = tokio::net::TcpStream::connect(addr).await.unwrap();
    half.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
        .await
        .unwrap();
    assert!(
        closed_by_server(&mut half).await,
        "half a handshake stays open"
    );
    // A handshake, then no request, on HTTP/1.1 and on HTTP/2.
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client(&[b"http/1.1"])));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut tls = connector.connect(name.clone(), tcp).await.unwrap();
    assert!(
        closed_by_server(&mut tls).await,
        "a TLS connection without a request stays open"
    );
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client(&[b"h2"])));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut h2 = connector.connect(name, tcp).await.unwrap();
    assert!(
        closed_by_server(&mut h2).await,
        "an HTTP/2 TLS connection without a request stays open"
    );
    // A request on TLS is answered as ever.
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client(&[b"http/1.1"])));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut tls = connector
        .connect(
            rustls::pki_types::ServerName::try_from("localhost").unwrap(),
            tcp,
        )
        .await
        .unwrap();
    tls.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    tls.read_to_string(&mut answer).await.unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.contains("\r\nok\r\n"),
        "{answer}"
    );
}
