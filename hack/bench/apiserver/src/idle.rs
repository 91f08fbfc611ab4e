//! Memory held for clients that do not read (`--only idle`): one SQLite apiserver, one
//! namespace filled with `--collection-mib` MiB of ConfigMaps, then, one kind of client at a
//! time, `--idle-watchers` requests whose answers are never read:
//!
//! - watches without a resourceVersion (the whole collection as ADDED events first) as HTTP/2
//!   streams on one connection with client-go's flow-control windows, then as HTTP/1.1
//!   requests on a connection each;
//! - LISTs of the collection, the same two ways.
//!
//! Each kind of client gets a fresh server (filled the same way), so that what one left behind
//! does not count for the next: the apiserver's resident memory once filled and settled, once
//! it has settled with the clients open (the growth, per client), and once it has settled
//! again after they left.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

use crate::client::Client;
use crate::process::{Server, memory, settled};
use crate::{Args, configmap, configmaps, create_namespace, mib, registered_watchers};

/// The namespace that holds the collection.
const NAMESPACE: &str = "bench-idle";

/// How the clients of one phase talk to the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Transport {
    /// Streams on one HTTP/2 connection.
    Http2,
    /// One HTTP/1.1 connection each.
    Http1,
}

/// The open requests of one phase; dropping them closes every stream and connection.
struct Open {
    responses: Vec<Response<hyper::body::Incoming>>,
    connections: Vec<tokio::task::JoinHandle<()>>,
    _clients: Vec<Client>,
}

impl Drop for Open {
    fn drop(&mut self) {
        self.responses.clear();
        for connection in &self.connections {
            connection.abort();
        }
    }
}

/// Sends `path` on a new HTTP/1.1 connection and returns the answer's head, with the body
/// unread, and the connection's task.
async fn http1(
    base: &str,
    tls: Arc<rustls::ClientConfig>,
    path: &str,
) -> anyhow::Result<(Response<hyper::body::Incoming>, tokio::task::JoinHandle<()>)> {
    let authority = base
        .strip_prefix("https://")
        .with_context(|| format!("{base} is not an https URL"))?;
    let tcp = tokio::net::TcpStream::connect(authority).await?;
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1")?;
    let stream = tokio_rustls::TlsConnector::from(tls)
        .connect(name, tcp)
        .await
        .context("TLS handshake")?;
    let (mut send, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .context("HTTP/1.1 handshake")?;
    let task = tokio::spawn(async move {
        let _ = connection.await;
    });
    let request = Request::builder()
        .method(Method::GET)
        .uri(format!("{base}{path}"))
        .header("host", authority)
        .header("accept", "application/json")
        .body(Full::new(Bytes::new()))?;
    let response = send.send_request(request).await?;
    Ok((response, task))
}

/// Opens `count` requests for `path` whose answers are never read.
async fn open(
    server: &Server,
    transport: Transport,
    path: &str,
    count: usize,
) -> anyhow::Result<Open> {
    let mut open = Open {
        responses: Vec::with_capacity(count),
        connections: Vec::new(),
        _clients: Vec::new(),
    };
    match transport {
        Transport::Http2 => {
            let client = Client::connect_like_client_go(&server.base, server.tls.clone()).await?;
            let mut pending = tokio::task::JoinSet::new();
            for _ in 0..count {
                let (client, path) = (client.clone(), path.to_owned());
                pending.spawn(async move { client.start(Method::GET, &path, None).await });
            }
            for response in pending.join_all().await {
                open.responses.push(response?);
            }
            open._clients.push(client);
        }
        Transport::Http1 => {
            let mut tls = (*server.tls).clone();
            tls.alpn_protocols = vec![b"http/1.1".to_vec()];
            let tls = Arc::new(tls);
            for _ in 0..count {
                let (response, connection) = http1(&server.base, tls.clone(), path).await?;
                open.responses.push(response);
                open.connections.push(connection);
            }
        }
    }
    for response in &open.responses {
        anyhow::ensure!(
            response.status() == StatusCode::OK,
            "GET {path}: {}",
            response.status()
        );
    }
    Ok(open)
}

/// Creates `count` ConfigMaps named `cm-NNNNNN` with `size` bytes of data in `namespace`, from
/// `concurrency` requests in flight.
pub(crate) async fn fill(
    server: &Server,
    namespace: &str,
    count: usize,
    size: usize,
    concurrency: usize,
) -> anyhow::Result<()> {
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut writers = tokio::task::JoinSet::new();
    for _ in 0..concurrency.max(1) {
        let (client, next) = (server.client.clone(), next.clone());
        let path = configmaps(namespace);
        writers.spawn(async move {
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= count {
                    return anyhow::Ok(());
                }
                client
                    .expect(
                        Method::POST,
                        &path,
                        Some(configmap(&format!("cm-{i:06}"), size, None)),
                        StatusCode::CREATED,
                    )
                    .await?;
            }
        });
    }
    for result in writers.join_all().await {
        result?;
    }
    Ok(())
}

/// Memory held for idle watchers and idle LISTs of a large collection.
pub(crate) async fn idle(args: &Args, dir: &Path) -> anyhow::Result<()> {
    let n = args.idle_watchers.max(1);
    let settle = args.settle(Duration::from_secs(60));
    let watch = format!("{}?watch=1", configmaps(NAMESPACE));
    let list = configmaps(NAMESPACE);
    let phases = [
        (
            "watch, no resourceVersion, HTTP/2",
            Transport::Http2,
            &watch,
        ),
        (
            "watch, no resourceVersion, HTTP/1.1",
            Transport::Http1,
            &watch,
        ),
        ("LIST, HTTP/2", Transport::Http2, &list),
        ("LIST, HTTP/1.1", Transport::Http1, &list),
    ];
    let kib = args.idle_object_kib.max(1);
    let count = (args.collection_mib * 1024 * 1024).div_ceil(kib * 1024);
    println!(
        "\nidle clients: {n} requests that never read, against {} MiB of ConfigMaps of {kib} KiB \
         in one namespace, a fresh SQLite server each; VmRSS once settled",
        args.collection_mib
    );
    println!(
        "  {:<38} {:>11} {:>10} {:>11} {:>10} {:>9} {:>9}",
        "clients", "filled MiB", "open MiB", "per client", "left MiB", "peak MiB", "watchers"
    );
    for (i, (label, transport, path)) in phases.into_iter().enumerate() {
        let mut server = Server::apiserver(&args.genplane(), &dir.join(format!("idle-{i}")), &[])
            .await
            .context("starting the apiserver on SQLite")?;
        let pid = server.pid()?;
        create_namespace(&server.client, NAMESPACE).await?;
        fill(&server, NAMESPACE, count, kib * 1024, args.concurrency).await?;
        let before = settled(pid, settle).await?;
        let clients = open(&server, transport, path, n).await?;
        let with = settled(pid, settle).await?;
        drop(clients);
        let after = settled(pid, settle).await?;
        let (_, peak) = memory(pid)?;
        println!(
            "  {label:<38} {:>11.1} {:>10.1} {:>11.2} {:>10.1} {:>9.1} {:>9}",
            mib(before),
            mib(with),
            mib(with.saturating_sub(before)) / n as f64,
            mib(after),
            mib(peak),
            registered_watchers(&server.client, "ConfigMap").await?
        );
        server.check_alive()?;
        server.stop().await?;
    }
    Ok(())
}
