//! Watch clients that stop reading, over real HTTPS on loopback: such a client costs the server
//! a bounded buffer, and once it has fallen behind the watch cache's window of events its
//! stream ends cleanly (as kube-apiserver ends unresponsive watchers; the client watches again
//! from the last resourceVersion it received), while a client that reads gets every event.
//!
//! The slow client is an HTTP/2 stream whose flow-control window is 1 KiB and which is never
//! read until the end, so what the server may send it does not depend on socket buffers.

use crate::support;

use std::sync::Arc;

use bytes::Bytes;
use genplane_apiserver::WATCH_BUFFER_BYTES;
use genplane_storage_cacher::CacherConfig;
use genplane_test_support::metrics::sample;
use http_body_util::{BodyExt, Empty, Full};
use hyper::Request;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use support::Server;

/// Events written while the slow client does not read: far more than its buffers and the
/// window hold.
const EVENTS: usize = 500;
/// The size of each written ConfigMap's data.
const VALUE_BYTES: usize = 16 << 10;
/// The watch cache's window of events in this test.
const WINDOW: usize = 32;

/// Watches `path` over HTTP/1.1 and reads until `count` events arrived.
async fn read_events(server: &Server, path: String, count: usize) -> Vec<Value> {
    let request = Request::get(path).body(Full::default()).unwrap();
    let response = server.send(request).await;
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
    let cache = CacherConfig {
        window_events: WINDOW,
        ..CacherConfig::default()
    };
    let server = Arc::new(
        support::start_configured(|completed| support::with_cache(completed, cache)).await,
    );
    let collection = "/api/v1/namespaces/default/configmaps";
    let listed = support::call(&server, hyper::Method::GET, collection, &[], None).await;
    let rv = listed.json()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("{collection}?watch=1&resourceVersion={rv}");

    // The slow client: its answer's head arrives, its body is not read.
    let mut slow_send = server
        .http2::<Empty<Bytes>>(
            hyper::client::conn::http2::Builder::new(TokioExecutor::new())
                .initial_stream_window_size(1024),
        )
        .await;
    let request = Request::get(server.url(&path)).body(Empty::new()).unwrap();
    let slow = slow_send.send_request(request).await.unwrap();
    assert_eq!(slow.status(), 200);

    // The fast client reads every event as it comes.
    let fast = tokio::spawn({
        let (server, path) = (server.clone(), path.clone());
        async move { read_events(&server, path, EVENTS).await }
    });

    let value = "x".repeat(VALUE_BYTES);
    let mut writers = tokio::task::JoinSet::new();
    for writer in 0..8 {
        let (server, value) = (server.clone(), value.clone());
        writers.spawn(async move {
            let mut client = server.http1().await;
            for i in (writer..EVENTS).step_by(8) {
                let body = serde_json::json!({
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": format!("cm-{i:04}")},
                    "data": {"value": value},
                });
                let request = Request::post(collection)
                    .header("host", "x")
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from(body.to_string())))
                    .unwrap();
                client.ready().await.unwrap();
                let response = client.send_request(request).await.unwrap();
                assert_eq!(response.status(), 201);
                // Read to its end, so that the connection takes the next request.
                response.into_body().collect().await.unwrap();
            }
        });
    }
    writers.join_all().await;

    let fast = tokio::time::timeout(genplane_test_support::DEADLINE, fast)
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
    let text = server.metrics().await;
    let buffered: f64 = sample(
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
    let body = tokio::time::timeout(genplane_test_support::DEADLINE, slow.into_body().collect())
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
    let text = server.metrics().await;
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
        genplane_test_support::DEADLINE,
        read_events(
            &server,
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
