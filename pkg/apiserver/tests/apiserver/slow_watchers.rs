//! Watch clients that stop reading, over real HTTP on loopback: such a client costs the server
//! a bounded buffer, and once it has fallen behind the watch cache's window of events its
//! stream ends cleanly (as kube-apiserver ends unresponsive watchers; the client watches again
//! from the last resourceVersion it received), while a client that reads gets every event.
//!
//! The slow client is an HTTP/2 stream whose flow-control window is 1 KiB and which is never
//! read until the end, so what the server may send it does not depend on socket buffers.

use crate::support;

use std::time::Duration;

use bytes::Bytes;
use genplane_apiserver::WATCH_BUFFER_BYTES;
use genplane_apiserver::metrics::ApiMetrics;
use genplane_component_base::metrics::Registry;
use genplane_storage_cacher::CacherConfig;
use http_body_util::{BodyExt, Empty};
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::Value;

/// Events written while the slow client does not read: far more than its buffers and the
/// window hold.
const EVENTS: usize = 500;
/// The size of each written ConfigMap's data.
const VALUE_BYTES: usize = 16 << 10;
/// The watch cache's window of events in this test.
const WINDOW: usize = 32;

/// The value of the sample `line` (a metric name with its labels) in `text`.
fn sample(text: &str, line: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(line)?.trim().parse().ok())
}

/// Watches `path` over HTTP/1.1 and reads until `count` events arrived.
async fn read_events(addr: std::net::SocketAddr, path: String, count: usize) -> Vec<Value> {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut send, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(connection);
    let request = Request::get(format!("http://{addr}{path}"))
        .header("host", addr.to_string())
        .body(Empty::<Bytes>::new())
        .unwrap();
    let response = send.send_request(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    let (mut received, mut lines) = (Vec::new(), 0);
    while lines < count {
        let frame = body.frame().await.unwrap().unwrap();
        if let Ok(data) = frame.into_data() {
            lines += data.iter().filter(|b| **b == b'\n').count();
            received.extend_from_slice(&data);
        }
    }
    events(&received)
}

/// Splits newline-delimited watch events.
fn events(stream: &[u8]) -> Vec<Value> {
    stream
        .split(|b| *b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_slice(line).unwrap())
        .collect()
}

#[tokio::test]
async fn a_watcher_that_stops_reading_is_ended_while_a_reading_one_gets_every_event() {
    let registry = Registry::new();
    let metrics = ApiMetrics::new(&registry);
    let cache = CacherConfig {
        window_events: WINDOW,
        ..CacherConfig::default()
    };
    let server = support::start_with_cache(cache, |s| s.with_metrics(metrics, |_| None)).await;
    let collection = "/api/v1/namespaces/default/configmaps";
    let listed = support::call(&server, hyper::Method::GET, collection, &[], None).await;
    let rv = listed.json()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("{collection}?watch=1&resourceVersion={rv}");

    // The slow client: its answer's head arrives, its body is not read.
    let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let (mut slow_send, slow_connection) =
        hyper::client::conn::http2::Builder::new(TokioExecutor::new())
            .initial_stream_window_size(1024)
            .handshake::<_, Empty<Bytes>>(TokioIo::new(tcp))
            .await
            .unwrap();
    tokio::spawn(slow_connection);
    let request = Request::get(format!("http://{}{path}", server.addr))
        .body(Empty::new())
        .unwrap();
    let slow = slow_send.send_request(request).await.unwrap();
    assert_eq!(slow.status(), 200);

    // The fast client reads every event as it comes.
    let fast = tokio::spawn(read_events(server.addr, path.clone(), EVENTS));

    let value = "x".repeat(VALUE_BYTES);
    let mut writers = tokio::task::JoinSet::new();
    for writer in 0..8 {
        let (addr, value) = (server.addr, value.clone());
        writers.spawn(async move {
            let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
                .build_http::<http_body_util::Full<Bytes>>();
            for i in (writer..EVENTS).step_by(8) {
                let body = serde_json::json!({
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": format!("cm-{i:04}")},
                    "data": {"value": value},
                });
                let request = Request::post(format!("http://{addr}{collection}"))
                    .header("content-type", "application/json")
                    .body(http_body_util::Full::new(Bytes::from(body.to_string())))
                    .unwrap();
                let response = client.request(request).await.unwrap();
                assert_eq!(response.status(), 201);
            }
        });
    }
    writers.join_all().await;

    let fast = tokio::time::timeout(Duration::from_secs(60), fast)
        .await
        .expect("the reading client got every event")
        .unwrap();
    let mut names: Vec<&str> = fast
        .iter()
        .map(|e| e["object"]["metadata"]["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), EVENTS, "every event, once each");

    // What the server holds for its watchers is bounded, the stalled one included.
    let text = registry.encode(None).body;
    let buffered = sample(
        &text,
        "apiserver_watch_buffered_bytes{group=\"\",resource=\"configmaps\"}",
    )
    .unwrap();
    assert!(
        buffered <= 2.0 * (WATCH_BUFFER_BYTES + 2 * VALUE_BYTES) as f64,
        "{buffered} bytes buffered for two watchers"
    );

    // Now the slow client reads: what it gets is a prefix of the events without a gap, then
    // the end of the stream, without an error.
    let body = tokio::time::timeout(Duration::from_secs(60), slow.into_body().collect())
        .await
        .expect("the stalled watch was ended")
        .unwrap()
        .to_bytes();
    let slow = events(&body);
    assert!(
        slow.len() < EVENTS,
        "the stalled watch ended early, after {} events",
        slow.len()
    );
    let mut last = rv.parse::<i64>().unwrap();
    for event in &slow {
        assert_eq!(event["type"], "ADDED", "{event}");
        let at: i64 = event["object"]["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(at > last, "in order");
        last = at;
    }
    let text = registry.encode(None).body;
    assert_eq!(
        sample(
            &text,
            "apiserver_terminated_watchers_total{group=\"\",resource=\"configmaps\"}"
        ),
        Some(1.0),
        "{text}"
    );

    // The ended client watches again from the last resourceVersion it received and gets the
    // rest, from the store's history, without listing again.
    let rest = tokio::time::timeout(
        Duration::from_secs(60),
        read_events(
            server.addr,
            format!("{collection}?watch=1&resourceVersion={last}"),
            EVENTS - slow.len(),
        ),
    )
    .await
    .expect("the rest arrived");
    let first: i64 = rest[0]["object"]["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(first > last, "no event twice");
}
