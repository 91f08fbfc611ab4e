//! Self-protection and metrics over real HTTP on loopback: the in-flight limits answer 429,
//! the request timeout answers 504, watches are exempt from both, and every request shows in
//! the metrics a Prometheus scrape reads.
//!
//! A request holds its in-flight slot while its body is still arriving, so a client that sends
//! the headers and only part of the body keeps one slot busy for as long as the test wants.

use crate::support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use genplane_apiserver::Limits;
use genplane_apiserver::metrics::ApiMetrics;
use genplane_component_base::metrics::Registry;
use serde_json::Value;
use support::start_configured;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const CONFIGMAP: &str =
    r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"NAME"},"data":{"k":"v"}}"#;

/// Sends the headers of a create and the first `sent` bytes of its body; the rest is returned.
async fn start_create(addr: SocketAddr, name: &str, sent: usize) -> (TcpStream, Vec<u8>) {
    let body = CONFIGMAP.replace("NAME", name).into_bytes();
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&body[..sent]).await.unwrap();
    (stream, body[sent..].to_vec())
}

/// Reads a whole `connection: close` response: the status, the head, the body.
async fn read_response(mut stream: TcpStream) -> (u16, String, Value) {
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let status = head[9..12].parse().unwrap();
    (
        status,
        head.to_owned(),
        serde_json::from_str(body).unwrap_or(Value::Null),
    )
}

async fn request(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String, Value) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let message = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(message.as_bytes()).await.unwrap();
    read_response(stream).await
}

/// Waits until a scrape of `registry` contains `line`.
async fn scrape_until(registry: &Registry, line: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = registry.encode(None).body;
        if text.contains(line) {
            return text;
        }
        assert!(Instant::now() < deadline, "never saw {line:?} in:\n{text}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn over_the_in_flight_limit_requests_get_429_and_watches_are_exempt() {
    let registry = Registry::new();
    let metrics = ApiMetrics::new(&registry);
    let server = start_configured(|s| {
        s.with_limits(Limits {
            max_read_only: 1,
            max_mutating: 1,
            request_timeout: Duration::from_secs(60),
        })
        .with_metrics(metrics, |_| Some(0))
    })
    .await;
    let (mut slow, rest) = start_create(server.addr, "slow", 10).await;
    scrape_until(
        &registry,
        "apiserver_current_inflight_requests{request_kind=\"mutating\"} 1",
    )
    .await;

    let cm = CONFIGMAP.replace("NAME", "refused");
    let (status, head, body) = request(
        server.addr,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &cm,
    )
    .await;
    assert_eq!(status, 429, "{body}");
    assert!(
        head.to_ascii_lowercase().contains("retry-after: 1"),
        "{head}"
    );
    assert_eq!(body["reason"], "TooManyRequests");
    assert_eq!(body["details"]["retryAfterSeconds"], 1);

    // Reads have their own limit, and a watch counts against none.
    let (status, _, _) = request(
        server.addr,
        "GET",
        "/api/v1/namespaces/default/configmaps",
        "",
    )
    .await;
    assert_eq!(status, 200);
    let (status, _, _) = request(
        server.addr,
        "GET",
        "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1",
        "",
    )
    .await;
    assert_eq!(status, 200);

    // The held request completes once its body arrives; then writes are admitted again.
    slow.write_all(&rest).await.unwrap();
    let (status, _, body) = read_response(slow).await;
    assert_eq!(status, 201, "{body}");
    let (status, _, _) = request(
        server.addr,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &cm,
    )
    .await;
    assert_eq!(status, 201);

    let text = registry.encode(None).body;
    assert!(
        text.contains("apiserver_request_terminations_total{code=\"429\",component=\"apiserver\",group=\"\",resource=\"configmaps\",scope=\"namespace\",subresource=\"\",verb=\"POST\",version=\"v1\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("apiserver_request_total{code=\"201\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"configmaps\",scope=\"namespace\",subresource=\"\",verb=\"POST\",version=\"v1\"} 2"),
        "{text}"
    );
}

#[tokio::test]
async fn past_the_request_timeout_requests_get_504_but_watches_stay_open() {
    let timeout = Duration::from_secs(2);
    let registry = Registry::new();
    let metrics = ApiMetrics::new(&registry);
    let server = start_configured(|s| {
        s.with_limits(Limits {
            request_timeout: timeout,
            ..Limits::default()
        })
        .with_metrics(metrics, |_| None)
    })
    .await;
    let started = Instant::now();
    let (stalled, _rest) = start_create(server.addr, "stalled", 10).await;
    let (status, _, body) = read_response(stalled).await;
    assert_eq!(status, 504, "{body}");
    assert_eq!(body["reason"], "Timeout");
    assert!(
        body["message"].as_str().unwrap().starts_with("Timeout: "),
        "{body}"
    );
    assert!(started.elapsed() >= timeout);

    // A shorter timeout asked for by the client wins; a malformed one is a 400.
    let started = Instant::now();
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    stream
        .write_all(
            format!(
                "POST /api/v1/namespaces/default/configmaps?timeout=100ms HTTP/1.1\r\nhost: {}\r\ncontent-length: 50\r\nconnection: close\r\n\r\n{{",
                server.addr
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let (status, _, _) = read_response(stream).await;
    assert_eq!(status, 504);
    assert!(
        started.elapsed() < timeout / 2,
        "the client's 100ms, not the server's {timeout:?}"
    );
    let (status, _, body) = request(
        server.addr,
        "GET",
        "/api/v1/namespaces/default/configmaps?timeout=soon",
        "",
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        body["message"],
        "invalid timeout specified in the request URL"
    );

    // A watch outlives the request timeout and still delivers events.
    let mut watch = TcpStream::connect(server.addr).await.unwrap();
    watch
        .write_all(
            format!(
                "GET /api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=60 HTTP/1.1\r\nhost: {}\r\nconnection: close\r\n\r\n",
                server.addr
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let watching = Instant::now();
    scrape_until(
        &registry,
        "apiserver_registered_watchers{group=\"\",kind=\"ConfigMap\",version=\"v1\"} 1",
    )
    .await;
    // The event comes once the watch is older than the request timeout.
    tokio::time::sleep_until((watching + timeout).into()).await;
    let cm = CONFIGMAP.replace("NAME", "late");
    let (status, _, _) = request(
        server.addr,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &cm,
    )
    .await;
    assert_eq!(status, 201);
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("\"late\"") && Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_millis(200), watch.read(&mut buf)).await {
            Ok(Ok(0)) => break,
            Ok(Ok(n)) => seen.extend_from_slice(&buf[..n]),
            _ => {}
        }
    }
    let seen = String::from_utf8_lossy(&seen);
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");
    assert!(seen.contains("\"type\":\"ADDED\""), "{seen}");
    assert!(seen.contains("\"late\""), "{seen}");
}

#[tokio::test]
async fn metrics_count_requests_watchers_and_objects_by_upstream_names() {
    let registry = Registry::new();
    let metrics = ApiMetrics::new(&registry);
    let server = start_configured(|s| s.with_metrics(metrics, |_| Some(3))).await;
    let cm = CONFIGMAP.replace("NAME", "a");
    let (status, _, _) = request(
        server.addr,
        "POST",
        "/api/v1/namespaces/default/configmaps?dryRun=All",
        &cm,
    )
    .await;
    assert_eq!(status, 201);
    let (status, _, _) = request(server.addr, "GET", "/api/v1/configmaps", "").await;
    assert_eq!(status, 200);
    let (status, _, _) = request(
        server.addr,
        "GET",
        "/api/v1/namespaces/default/configmaps/missing",
        "",
    )
    .await;
    assert_eq!(status, 404);

    let mut watch = TcpStream::connect(server.addr).await.unwrap();
    watch
        .write_all(
            format!(
                "GET /apis/coordination.k8s.io/v1/leases?watch=true HTTP/1.1\r\nhost: {}\r\n\r\n",
                server.addr
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let watching = "apiserver_registered_watchers{group=\"coordination.k8s.io\",kind=\"Lease\",version=\"v1\"} 1";
    let text = scrape_until(&registry, watching).await;
    for line in [
        "apiserver_request_total{code=\"201\",component=\"apiserver\",dry_run=\"All\",group=\"\",resource=\"configmaps\",scope=\"namespace\",subresource=\"\",verb=\"POST\",version=\"v1\"} 1",
        "apiserver_request_total{code=\"200\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"configmaps\",scope=\"cluster\",subresource=\"\",verb=\"LIST\",version=\"v1\"} 1",
        "apiserver_request_total{code=\"404\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"configmaps\",scope=\"resource\",subresource=\"\",verb=\"GET\",version=\"v1\"} 1",
        "apiserver_storage_objects{resource=\"configmaps\"} 3",
        "apiserver_storage_objects{resource=\"leases.coordination.k8s.io\"} 3",
        "apiserver_storage_objects{resource=\"events.events.k8s.io\"} 3",
        "# TYPE apiserver_request_duration_seconds histogram",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
    // The watch is timed and unregistered when the client goes away.
    drop(watch);
    let text = scrape_until(
        &registry,
        "apiserver_registered_watchers{group=\"coordination.k8s.io\",kind=\"Lease\",version=\"v1\"} 0",
    )
    .await;
    assert!(
        text.contains("apiserver_request_duration_seconds_count{component=\"apiserver\",dry_run=\"\",group=\"coordination.k8s.io\",resource=\"leases\",scope=\"cluster\",subresource=\"\",verb=\"WATCH\",version=\"v1\"} 1"),
        "{text}"
    );
}
