//! The ops server over real HTTP on loopback: health endpoints, the feature-gate gauge on
//! /metrics, and graceful shutdown.

#![allow(clippy::unwrap_used)] // test helpers may unwrap, like the tests themselves

use std::net::SocketAddr;
use std::time::Duration;

use genplane_component_base::featuregate::{
    Feature, FeatureGateSettings, FeatureSpec, Registry, Stage, UseIdentity, Version,
};
use genplane_component_base::health::{Health, Kind};
use genplane_component_base::http::{self, OpsHandler};
use genplane_component_base::metrics;
use genplane_component_base::shutdown::Shutdown;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A minimal HTTP/1.1 GET: returns the status code, the headers (lower-cased) and the body.
async fn get(addr: SocketAddr, path: &str, accept: Option<&str>) -> (u16, String, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{accept}Connection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).await.unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, head.to_lowercase(), body.to_owned())
}

async fn start(
    health: Health,
    registry: metrics::Registry,
    shutdown: Shutdown,
) -> (SocketAddr, tokio::task::JoinHandle<Result<(), http::Error>>) {
    let listener = http::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(http::serve_ops(
        listener,
        OpsHandler::new(health, registry),
        shutdown,
        Duration::from_secs(5),
    ));
    (addr, server)
}

#[tokio::test]
async fn metrics_expose_the_feature_gate_gauge() {
    let mut features = Registry::new();
    features
        .add(
            Feature::new("WatchList"),
            &[
                FeatureSpec::new(Version::new(1, 27), Stage::Alpha, false),
                FeatureSpec::new(Version::new(1, 32), Stage::Beta, true),
            ],
        )
        .unwrap();
    features
        .add(
            Feature::new("OldThing"),
            &[FeatureSpec::new(Version::new(1, 20), Stage::Ga, true).locked()],
        )
        .unwrap();
    features
        .add(
            Feature::new("Future"),
            &[FeatureSpec::new(Version::new(1, 33), Stage::Alpha, false)],
        )
        .unwrap();
    let settings: FeatureGateSettings = "WatchList=false".parse().unwrap();
    let gate = features
        .resolve(
            &settings,
            Version::new(1, 32),
            UseIdentity::new("test", "1"),
        )
        .unwrap();
    let registry = metrics::Registry::new();
    gate.register_metrics(&registry);
    let shutdown = Shutdown::new();
    let (addr, server) = start(Health::new(&shutdown), registry, shutdown.clone()).await;

    let (status, head, body) = get(addr, "/metrics", None).await;
    assert_eq!(status, 200);
    assert!(
        head.contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    assert!(
        body.contains("# TYPE kubernetes_feature_enabled gauge\n"),
        "{body}"
    );
    assert!(
        body.contains("kubernetes_feature_enabled{name=\"WatchList\",stage=\"BETA\"} 0\n"),
        "{body}"
    );
    assert!(
        body.contains("kubernetes_feature_enabled{name=\"OldThing\",stage=\"\"} 1\n"),
        "GA has an empty stage: {body}"
    );
    assert!(
        body.contains("kubernetes_feature_enabled{name=\"AllAlpha\",stage=\"ALPHA\"} 0\n"),
        "{body}"
    );
    assert!(
        !body.contains("Future"),
        "features that do not exist at 1.32 are not exported: {body}"
    );

    let (_, head, body) = get(
        addr,
        "/metrics",
        Some("application/openmetrics-text;version=1.0.0"),
    )
    .await;
    // Prometheus text whatever is asked for, as Kubernetes components answer.
    assert!(
        head.contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    assert!(!body.contains("# EOF"), "{body}");

    shutdown.trigger();
    server.await.unwrap().unwrap();
}

#[tokio::test]
async fn health_endpoints_answer_over_http() {
    let shutdown = Shutdown::new();
    let mut health = Health::new(&shutdown);
    health.add("storage", Kind::Readiness, || async {
        Err("no connection".to_owned())
    });
    let (addr, server) = start(health, metrics::Registry::new(), shutdown.clone()).await;

    let (status, _, body) = get(addr, "/livez", None).await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    let (status, head, body) = get(addr, "/readyz?verbose", None).await;
    assert_eq!(status, 500);
    assert!(
        head.contains("content-type: text/plain; charset=utf-8"),
        "{head}"
    );
    assert_eq!(
        body,
        "[+]ping ok\n[+]log ok\n[-]storage failed: reason withheld\n[+]shutdown ok\nreadyz check failed\n"
    );
    let (status, _, body) = get(addr, "/readyz?exclude=storage", None).await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    let (status, _, body) = get(addr, "/readyz/storage", None).await;
    assert_eq!(
        (status, body.as_str()),
        (500, "internal server error: no connection\n")
    );
    assert_eq!(get(addr, "/nope", None).await.0, 404);

    shutdown.trigger();
    server.await.unwrap().unwrap();
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "no longer accepting after shutdown"
    );
}

#[tokio::test]
async fn shutdown_lets_a_request_in_flight_finish() {
    let shutdown = Shutdown::new();
    let mut health = Health::new(&shutdown);
    // The check tells when the request is in flight, and finishes when it is let go.
    let (running, release) = (
        std::sync::Arc::new(tokio::sync::Notify::new()),
        std::sync::Arc::new(tokio::sync::Notify::new()),
    );
    let (check_running, check_release) = (running.clone(), release.clone());
    health.add("slow", Kind::Liveness, move || {
        let (running, release) = (check_running.clone(), check_release.clone());
        async move {
            running.notify_one();
            release.notified().await;
            Ok(())
        }
    });
    let (addr, server) = start(health, metrics::Registry::new(), shutdown.clone()).await;
    let in_flight = tokio::spawn(async move { get(addr, "/livez/slow", None).await });
    running.notified().await;
    shutdown.trigger();
    // The server is shutting down (it no longer accepts) while the request is in flight.
    genplane_test_support::eventually_async("the server to stop accepting", || async {
        tokio::net::TcpStream::connect(addr)
            .await
            .is_err()
            .then_some(())
    })
    .await;
    release.notify_one();
    let (status, _, body) = in_flight.await.unwrap();
    assert_eq!((status, body.as_str()), (200, "ok"));
    server.await.unwrap().unwrap();
}
