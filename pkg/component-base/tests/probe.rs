//! `genplane healthcheck`'s probe against real ops servers on loopback: HTTPS with the roles'
//! self-signed certificate and plain HTTP, a passing and a failing `/readyz`, nothing
//! listening, and a server that never answers.

#![allow(clippy::unwrap_used)] // test helpers may unwrap, like the tests themselves

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use genplane_component_base::health::{Health, Kind};
use genplane_component_base::http::{self, OpsHandler};
use genplane_component_base::metrics;
use genplane_component_base::probe::{self, Error};
use genplane_component_base::shutdown::Shutdown;

/// An ops server whose readiness check `storage` passes or fails as `ready` says.
async fn ops_server(tls: bool, ready: bool) -> (SocketAddr, Shutdown) {
    let shutdown = Shutdown::new();
    let mut health = Health::new(&shutdown);
    health.add("storage", Kind::Readiness, move || async move {
        if ready {
            Ok(())
        } else {
            Err("no storage".to_owned())
        }
    });
    let listener = http::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let ops = OpsHandler::new(health, metrics::Registry::new());
    let deadline = Duration::from_secs(5);
    if tls {
        let acceptor = http::self_signed_tls().unwrap();
        tokio::spawn(http::serve_ops_tls(
            listener,
            acceptor,
            ops,
            shutdown.clone(),
            deadline,
        ));
    } else {
        tokio::spawn(http::serve_ops(listener, ops, shutdown.clone(), deadline));
    }
    (addr, shutdown)
}

const TIMEOUT: Duration = Duration::from_secs(10);

#[tokio::test]
async fn a_passing_readyz_over_https_with_a_self_signed_certificate_is_healthy() {
    let (addr, shutdown) = ops_server(true, true).await;
    let healthy = probe::probe(&format!("https://{addr}/readyz"), TIMEOUT)
        .await
        .unwrap();
    assert_eq!(healthy.status, 200);
    assert_eq!(healthy.body, "ok");
    // The query is sent as given.
    let verbose = probe::probe(&format!("https://{addr}/readyz?verbose"), TIMEOUT)
        .await
        .unwrap();
    assert!(verbose.body.contains("[+]storage ok"), "{}", verbose.body);
    shutdown.trigger();
}

#[tokio::test]
async fn a_failing_readyz_is_unhealthy_with_the_checks_in_its_error() {
    let (addr, shutdown) = ops_server(true, false).await;
    let url = format!("https://{addr}/readyz");
    match probe::probe(&url, TIMEOUT).await {
        Err(Error::Unhealthy { status, body, .. }) => {
            assert_eq!(status, 500);
            assert!(body.contains("[-]storage failed"), "{body}");
        }
        other => panic!("{other:?}"),
    }
    // A liveness endpoint without the failing check passes on the same server.
    probe::probe(&format!("https://{addr}/livez"), TIMEOUT)
        .await
        .unwrap();
    // 404 is no success either.
    let missing = probe::probe(&format!("https://{addr}/nothing"), TIMEOUT).await;
    assert!(
        matches!(&missing, Err(Error::Unhealthy { status, .. }) if *status == 404),
        "{missing:?}"
    );
    shutdown.trigger();
}

#[tokio::test]
async fn plain_http_is_probed_too() {
    let (addr, shutdown) = ops_server(false, true).await;
    let healthy = probe::probe(&format!("http://{addr}/healthz"), TIMEOUT)
        .await
        .unwrap();
    assert_eq!(healthy.status, 200);
    // TLS to a plain server fails in the handshake, saying so.
    let error = probe::probe(&format!("https://{addr}/healthz"), TIMEOUT)
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("TLS handshake"), "{error}");
    shutdown.trigger();
}

#[tokio::test]
async fn nothing_listening_is_a_connection_error() {
    // A port just freed: nothing listens there.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let error = probe::probe(&format!("https://{addr}/readyz"), TIMEOUT)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, Error::Exchange { what, .. } if *what == "connecting"),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_server_that_never_answers_fails_at_the_deadline() {
    // Accepts connections (the kernel's backlog) and never speaks.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let timeout = Duration::from_millis(300);
    let started = Instant::now();
    let error = probe::probe(&format!("https://{addr}/readyz"), timeout)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, Error::Deadline { timeout: t, .. } if *t == timeout),
        "{error:?}"
    );
    assert!(started.elapsed() >= timeout);
    drop(listener);
}
