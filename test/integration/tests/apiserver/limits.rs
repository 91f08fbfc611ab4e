//! Self-protection and metrics over real HTTPS on loopback: the in-flight limits answer 429,
//! the request timeout answers 504, watches are exempt from both, and every request shows in
//! the metrics a Prometheus scrape of `/metrics` reads.
//!
//! A request holds its in-flight slot while its body is still arriving, so a client that sends
//! the headers and only part of the body keeps one slot busy for as long as the test wants.

use crate::support;

use std::time::{Duration, Instant};

use genplane_apiserver::Limits;
use genplane_test_support::DEADLINE;
use serde_json::Value;
use support::{Server, start_configured};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

const CONFIGMAP: &str =
    r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"NAME"},"data":{"k":"v"}}"#;

/// Sends the headers of a create and the first `sent` bytes of its body; the rest is returned.
async fn start_create(server: &Server, name: &str, sent: usize) -> (TlsStream<TcpStream>, Vec<u8>) {
    let body = CONFIGMAP.replace("NAME", name).into_bytes();
    let mut stream = server.tls(b"http/1.1").await;
    let head = format!(
        "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&body[..sent]).await.unwrap();
    (stream, body[sent..].to_vec())
}

/// Creates the ConfigMap `name` in `default`; the status of the answer.
async fn create(server: &Server, name: &str) -> u16 {
    let cm = CONFIGMAP.replace("NAME", name);
    let (status, _, _) =
        request(server, "POST", "/api/v1/namespaces/default/configmaps", &cm).await;
    status
}

/// Reads a whole `connection: close` response: the status, the head, the body.
async fn read_response(mut stream: TlsStream<TcpStream>) -> (u16, String, Value) {
    let raw = support::read_to_end(&mut stream).await.unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let status = head[9..12].parse().unwrap();
    (
        status,
        head.to_owned(),
        serde_json::from_str(body).unwrap_or(Value::Null),
    )
}

async fn request(server: &Server, method: &str, path: &str, body: &str) -> (u16, String, Value) {
    let mut stream = server.tls(b"http/1.1").await;
    let message = format!(
        "{method} {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(message.as_bytes()).await.unwrap();
    read_response(stream).await
}

#[tokio::test]
async fn over_the_in_flight_limit_requests_get_429_and_watches_are_exempt() {
    let server = start_configured(|completed| {
        completed.config.limits = Limits {
            max_read_only: 1,
            max_mutating: 1,
            request_timeout: Duration::from_secs(60),
            priority_and_fairness: false,
        };
    })
    .await;
    let (mut slow, rest) = start_create(&server, "slow", 10).await;
    server
        .metrics_until("apiserver_current_inflight_requests{request_kind=\"mutating\"} 1")
        .await;

    let cm = CONFIGMAP.replace("NAME", "refused");
    let (status, head, body) = request(
        &server,
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
    let (status, _, _) = request(&server, "GET", "/api/v1/namespaces/default/configmaps", "").await;
    assert_eq!(status, 200);
    let (status, _, _) = request(
        &server,
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
        &server,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &cm,
    )
    .await;
    assert_eq!(status, 201);

    let text = server.metrics().await;
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
    let server = start_configured(|completed| {
        completed.config.limits = Limits {
            request_timeout: timeout,
            ..Limits::default()
        };
    })
    .await;
    let started = Instant::now();
    let (stalled, _rest) = start_create(&server, "stalled", 10).await;
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
    let mut stream = server.tls(b"http/1.1").await;
    stream
        .write_all(
            b"POST /api/v1/namespaces/default/configmaps?timeout=100ms HTTP/1.1\r\nhost: x\r\ncontent-length: 50\r\nconnection: close\r\n\r\n{",
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
        &server,
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
    let mut watch = server.tls(b"http/1.1").await;
    watch
        .write_all(
            b"GET /api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=60 HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
        )
        .await
        .unwrap();
    let watching = Instant::now();
    server
        .metrics_until(
            "apiserver_registered_watchers{group=\"\",kind=\"ConfigMap\",version=\"v1\"} 1",
        )
        .await;
    // The event comes once the watch is older than the request timeout.
    tokio::time::sleep_until((watching + timeout).into()).await;
    assert_eq!(create(&server, "late").await, 201);
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    // Read until the event, the end of the stream or the deadline; what came is checked below.
    let read = async {
        while !String::from_utf8_lossy(&seen).contains("\"late\"") {
            match watch.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
    };
    let _ended_or_timed_out = tokio::time::timeout(DEADLINE, read).await;
    let seen = String::from_utf8_lossy(&seen);
    assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");
    assert!(seen.contains("\"type\":\"ADDED\""), "{seen}");
    assert!(seen.contains("\"late\""), "{seen}");
}

#[tokio::test]
async fn metrics_count_requests_watchers_and_objects_by_upstream_names() {
    let server = support::start().await;
    let cm = CONFIGMAP.replace("NAME", "a");
    let (status, _, _) = request(
        &server,
        "POST",
        "/api/v1/namespaces/default/configmaps?dryRun=All",
        &cm,
    )
    .await;
    assert_eq!(status, 201);
    assert_eq!(create(&server, "b").await, 201);
    let (status, _, list) = request(&server, "GET", "/api/v1/configmaps", "").await;
    assert_eq!(status, 200);
    let configmaps = list["items"].as_array().unwrap().len();
    let (status, _, _) = request(
        &server,
        "GET",
        "/api/v1/namespaces/default/configmaps/missing",
        "",
    )
    .await;
    assert_eq!(status, 404);

    let mut watch = server.tls(b"http/1.1").await;
    watch
        .write_all(
            b"GET /apis/coordination.k8s.io/v1/leases?watch=true HTTP/1.1\r\nhost: x\r\n\r\n",
        )
        .await
        .unwrap();
    let watching = "apiserver_registered_watchers{group=\"coordination.k8s.io\",kind=\"Lease\",version=\"v1\"} 1";
    let text = server.metrics_until(watching).await;
    for line in [
        "apiserver_request_total{code=\"201\",component=\"apiserver\",dry_run=\"All\",group=\"\",resource=\"configmaps\",scope=\"namespace\",subresource=\"\",verb=\"POST\",version=\"v1\"} 1",
        "apiserver_request_total{code=\"201\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"configmaps\",scope=\"namespace\",subresource=\"\",verb=\"POST\",version=\"v1\"} 1",
        "apiserver_request_total{code=\"200\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"configmaps\",scope=\"cluster\",subresource=\"\",verb=\"LIST\",version=\"v1\"} 1",
        "apiserver_request_total{code=\"404\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"configmaps\",scope=\"resource\",subresource=\"\",verb=\"GET\",version=\"v1\"} 1",
        // The stored objects, as many as a list shows (the dry run stored nothing).
        &format!("apiserver_storage_objects{{resource=\"configmaps\"}} {configmaps}"),
        "apiserver_storage_objects{resource=\"leases.coordination.k8s.io\"} ",
        "apiserver_storage_objects{resource=\"events.events.k8s.io\"} ",
        "# TYPE apiserver_request_duration_seconds histogram",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
    assert!(configmaps >= 1, "{list}");
    // The watch is timed and unregistered when the client goes away.
    drop(watch);
    let text = server
        .metrics_until(
            "apiserver_registered_watchers{group=\"coordination.k8s.io\",kind=\"Lease\",version=\"v1\"} 0",
        )
        .await;
    assert!(
        text.contains("apiserver_request_duration_seconds_count{component=\"apiserver\",dry_run=\"\",group=\"coordination.k8s.io\",resource=\"leases\",scope=\"cluster\",subresource=\"\",verb=\"WATCH\",version=\"v1\"} 1"),
        "{text}"
    );
}
