//! What clients see when the storage stalls or cannot be reached: Status errors that say which
//! operation on which resource failed, with `Retry-After` as their Status promises.

use crate::support;

use std::time::Duration;

use hyper::Method;
use serde_json::{Value, json};
use support::call;

async fn create_configmap(server: &support::Server, name: &str) -> support::Answer {
    call(
        server,
        Method::POST,
        "/api/v1/namespaces/default/configmaps",
        &[("content-type", "application/json")],
        Some(
            serde_json::to_vec(
                &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}),
            )
            .unwrap(),
        ),
    )
    .await
}

#[tokio::test]
async fn a_stalled_storage_answers_with_the_operation_and_retry_after() {
    // A request may take 4 s, so a stalled etcd request ends after half of that: 2 s.
    let mut server = support::start_with(
        support::Flavour::Etcd,
        |config| config.limits.request_timeout = Duration::from_secs(4),
        |_| {},
    )
    .await;
    assert_eq!(create_configmap(&server, "before").await.status, 201);

    // Frozen: the namespace lookup of the create is what stalls first, and the answer names
    // the create of a ConfigMap, not the lookup.
    server.etcd().freeze();
    let stalled = create_configmap(&server, "stalled").await;
    let status: Value = stalled.json();
    assert_eq!(
        (stalled.status, status["reason"].as_str()),
        (500, Some("ServerTimeout")),
        "{status}"
    );
    assert_eq!(
        status["message"],
        "The create operation against configmaps could not be completed at this time, please try again."
    );
    assert_eq!(status["details"]["retryAfterSeconds"], 2);
    assert_eq!(stalled.header("retry-after"), "2");

    // Once the store knows its only member is unhealthy, requests fail without waiting for it.
    let mut attempts = 0;
    let unavailable = loop {
        let answer = create_configmap(&server, "unavailable").await;
        if answer.status == 503 {
            break answer;
        }
        assert_eq!(
            answer.status,
            500,
            "{}",
            String::from_utf8_lossy(&answer.body)
        );
        attempts += 1;
        assert!(attempts < 20, "etcd never found unavailable");
    };
    let status = unavailable.json();
    assert_eq!(status["reason"], "ServiceUnavailable", "{status}");
    assert_eq!(status["details"]["retryAfterSeconds"], 1);
    assert_eq!(unavailable.header("retry-after"), "1");

    // Readiness says so at once, without waiting for etcd.
    let ready = call(&server, Method::GET, "/readyz?verbose", &[], None).await;
    let text = String::from_utf8_lossy(&ready.body).into_owned();
    assert_eq!(ready.status, 500, "{text}");
    assert!(text.contains("[-]etcd failed"), "{text}");
    assert!(text.contains("[-]etcd-readiness failed"), "{text}");
    // As on kube-apiserver, the etcd check is a liveness check too; etcd-readiness is not.
    let live = call(&server, Method::GET, "/livez?verbose", &[], None).await;
    let text = String::from_utf8_lossy(&live.body).into_owned();
    assert_eq!(live.status, 500, "{text}");
    assert!(text.contains("[-]etcd failed"), "{text}");
    assert!(!text.contains("etcd-readiness"), "{text}");

    server.etcd().thaw();
    for attempt in 0.. {
        let answer = create_configmap(&server, "after").await;
        if answer.status == 201 {
            break;
        }
        assert!(
            matches!(answer.status, 500 | 503) && attempt < 100,
            "{}",
            String::from_utf8_lossy(&answer.body)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    call(&server, Method::GET, "/readyz", &[], None)
        .await
        .expect(200);
}
