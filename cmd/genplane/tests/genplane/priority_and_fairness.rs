//! API Priority and Fairness dispatching against the real binary: every answer names the
//! FlowSchema and priority level (by UID) its request was classified into, a level configured
//! with kubectl takes effect, a saturated `Reject` level answers 429 with `Retry-After` while
//! exempt requests still run, the debug dump shows it, and `--enable-priority-and-fairness=false`
//! goes back to the in-flight limits.

#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::net::TcpStream;

use crate::admission::kubectl_stdin;
use crate::support::{Apiserver, eventually, ok, start_with};
use genplane_test_support::clients::Raw;
use serde_json::{Value, json};

const FLOW_SCHEMA_UID: &str = "x-kubernetes-pf-flowschema-uid";
const PRIORITY_LEVEL_UID: &str = "x-kubernetes-pf-prioritylevel-uid";

fn uid(server: &Apiserver, kind: &str, name: &str) -> String {
    ok(server.kubectl(
        "kubectl",
        &["get", kind, name, "-o", "jsonpath={.metadata.uid}"],
    ))
}

/// One level of one seat that rejects the rest, and the FlowSchema sending alice to it.
fn tight() -> Value {
    json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
            "metadata": {"name": "tight"},
            "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 1,
                "borrowingLimitPercent": 0, "limitResponse": {"type": "Reject"}}}},
        {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
            "metadata": {"name": "alice"},
            "spec": {"priorityLevelConfiguration": {"name": "tight"}, "matchingPrecedence": 500,
                "distinguisherMethod": {"type": "ByUser"},
                "rules": [{"subjects": [{"kind": "User", "user": {"name": "alice"}}],
                    "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                        "namespaces": ["*"]}]}]}},
    ]})
}

/// A create of alice's whose body is never finished: it holds its seat while it is open.
fn held_create(raw: &Raw) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let connection = rustls::ClientConnection::new(raw.tls_config(), name).unwrap();
    let socket = TcpStream::connect(&raw.address).unwrap();
    let mut tls = rustls::StreamOwned::new(connection, socket);
    tls.write_all(
        b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer tok-alice\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
    )
    .unwrap();
    tls.flush().unwrap();
    tls
}

fn level_row(server: &Apiserver, level: &str) -> Vec<String> {
    let dump = server
        .raw()
        .get("/debug/api_priority_and_fairness/dump_priority_levels")
        .text();
    dump.lines()
        .find(|l| l.starts_with(&format!("{level},")))
        .unwrap_or_else(|| panic!("no {level}: {dump}"))
        .split(',')
        .map(|c| c.trim().to_owned())
        .collect()
}

#[test]
fn requests_are_classified_limited_by_their_level_and_refused_with_429() {
    let tokens = tempfile::tempdir().unwrap();
    let file = tokens.path().join("tokens.csv");
    std::fs::write(&file, "tok-alice,alice,u-alice\n").unwrap();
    // 3 seats in all.
    let server = start_with(&[
        &format!("--token-auth-file={}", file.display()),
        "--max-requests-inflight=2",
        "--max-mutating-requests-inflight=1",
    ]);
    ok(server.kubectl(
        "kubectl",
        &[
            "create",
            "clusterrolebinding",
            "alice-edit",
            "--clusterrole=edit",
            "--user=alice",
        ],
    ));
    let admin = server.raw();
    let alice = Raw::without_certificate(&server.kubeconfig());
    let as_alice =
        |path: &str| alice.request("GET", path, &[("Authorization", "Bearer tok-alice")], None);

    // The admin (system:masters) is exempt; alice falls to global-default.
    let answer = admin.get("/api/v1/namespaces/default/configmaps");
    assert_eq!(answer.status, 200);
    assert_eq!(
        answer.header(FLOW_SCHEMA_UID),
        uid(&server, "flowschema", "exempt")
    );
    assert_eq!(
        answer.header(PRIORITY_LEVEL_UID),
        uid(&server, "prioritylevelconfiguration", "exempt")
    );
    let answer = as_alice("/api/v1/namespaces/default/configmaps");
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(
        answer.header(FLOW_SCHEMA_UID),
        uid(&server, "flowschema", "global-default")
    );
    // A refusal after classification is classified too.
    let refused = as_alice("/apis/rbac.authorization.k8s.io/v1/clusterroles");
    assert_eq!(refused.status, 403, "{}", refused.text());
    assert_eq!(
        refused.header(FLOW_SCHEMA_UID),
        uid(&server, "flowschema", "global-default")
    );

    // A level of her own, of one seat, rejecting the rest.
    ok(kubectl_stdin(&server, &["apply", "-f", "-"], &tight()));
    let tight = uid(&server, "prioritylevelconfiguration", "tight");
    eventually("alice's requests to go to her level", || {
        let answer = as_alice("/api/v1/namespaces/default/configmaps");
        (answer.header(PRIORITY_LEVEL_UID) == tight).then_some(())
    });
    assert_eq!(
        as_alice("/api/v1/namespaces/default/configmaps").header(FLOW_SCHEMA_UID),
        uid(&server, "flowschema", "alice")
    );

    // Her one seat taken by a create whose body is still coming: the next request is refused.
    let held = held_create(&alice);
    eventually("the held create to run", || {
        (level_row(&server, "tight")[5] == "1").then_some(())
    });
    let refused = as_alice("/api/v1/namespaces/default/configmaps");
    assert_eq!(refused.status, 429, "{}", refused.text());
    assert_eq!(refused.header("retry-after"), "1");
    assert_eq!(refused.header(PRIORITY_LEVEL_UID), tight);
    let status = refused.json();
    assert_eq!(status["reason"], "TooManyRequests");
    assert_eq!(status["details"]["retryAfterSeconds"], 1);
    // Others are not held back by her level.
    assert_eq!(
        admin.get("/api/v1/namespaces/default/configmaps").status,
        200
    );
    let row = level_row(&server, "tight");
    assert_eq!(row[7], "1", "{row:?}");

    // Once the held request ends, she is served again. The server frees the seat when it
    // sees the connection close, so a request in between may still be refused.
    drop(held);
    let mut refused_since = 0;
    eventually("alice's seat to be free again", || {
        let status = as_alice("/api/v1/namespaces/default/configmaps").status;
        if status == 429 {
            refused_since += 1;
        }
        (status == 200).then_some(())
    });
    let text = server.metrics();
    assert!(
        text.contains("apiserver_request_terminations_total{code=\"429\""),
        "{text}"
    );
    let rejected = format!(
        "apiserver_flowcontrol_rejected_requests_total{{flow_schema=\"alice\",priority_level=\"tight\",reason=\"concurrency-limit\"}} {}",
        1 + refused_since
    );
    for line in [
        rejected.as_str(),
        "apiserver_flowcontrol_nominal_limit_seats{priority_level=\"tight\"} 1",
        "apiserver_flowcontrol_upper_limit_seats{priority_level=\"tight\"} 1",
        "apiserver_flowcontrol_current_executing_requests{flow_schema=\"alice\",priority_level=\"tight\"} 0",
        "apiserver_flowcontrol_current_inqueue_requests{flow_schema=\"alice\",priority_level=\"tight\"} 0",
    ] {
        assert!(text.contains(line), "{line} in {text}");
    }
    let dispatched: f64 = crate::support::sample(
        &text,
        "apiserver_flowcontrol_dispatched_requests_total{flow_schema=\"alice\",priority_level=\"tight\"}",
    )
    .unwrap();
    assert!(dispatched >= 3.0, "{dispatched}");
    // Every dispatched request observed its wait; those done, how long they ran.
    let waited: f64 = crate::support::sample(
        &text,
        "apiserver_flowcontrol_request_wait_duration_seconds_count{flow_schema=\"alice\",priority_level=\"tight\",execute=\"true\"}",
    )
    .unwrap();
    assert_eq!(waited, dispatched, "{text}");
    let ran: f64 = crate::support::sample(
        &text,
        "apiserver_flowcontrol_request_execution_seconds_count{flow_schema=\"alice\",priority_level=\"tight\",type=\"regular\"}",
    )
    .unwrap();
    assert!(ran >= dispatched - 1.0, "{ran} of {dispatched}");
    let estimated: f64 = crate::support::sample(
        &text,
        "apiserver_flowcontrol_work_estimated_seats_count{flow_schema=\"alice\",priority_level=\"tight\"}",
    )
    .unwrap();
    assert!(
        estimated > dispatched,
        "{estimated} for {dispatched} and a rejection"
    );
}

#[test]
fn without_priority_and_fairness_answers_carry_no_classification() {
    let server = start_with(&["--enable-priority-and-fairness=false"]);
    let answer = server.raw().get("/api/v1/namespaces/default/configmaps");
    assert_eq!(answer.status, 200);
    assert_eq!(answer.header(FLOW_SCHEMA_UID), "");
    assert_eq!(
        server
            .raw()
            .get("/debug/api_priority_and_fairness/dump_priority_levels")
            .status,
        404
    );
}

/// A priority level of its own (one share, no borrowing) and the FlowSchema sending `user`
/// to it; `queuing` as the level queues.
fn level_of(user: &str, queuing: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
            "metadata": {"name": user},
            "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 1,
                "borrowingLimitPercent": 0,
                "limitResponse": {"type": "Queue", "queuing": queuing}}}},
        {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
            "metadata": {"name": user},
            "spec": {"priorityLevelConfiguration": {"name": user}, "matchingPrecedence": 999,
                "distinguisherMethod": {"type": "ByUser"},
                "rules": [{"subjects": [{"kind": "User", "user": {"name": user}}],
                    "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                        "namespaces": ["*"]}]}]}},
    ]})
}

/// Upstream's "should ensure that requests can't be drowned out (priority)", at this
/// machine's scale: a client flooding its own priority level (more concurrent requests than
/// it has seats and queue) is turned away with 429s, while a steady client at another level
/// of the same share completes what it asks, none refused.
#[test]
fn requests_cannot_be_drowned_out_by_another_level() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    // 3 seats in all: each test level's nominal share is one seat.
    let server = start_with(&[
        "--max-requests-inflight=2",
        "--max-mutating-requests-inflight=1",
    ]);
    ok(kubectl_stdin(
        &server,
        &["apply", "-f", "-"],
        &level_of(
            "highqps",
            json!({"queues": 1, "handSize": 1, "queueLengthLimit": 1}),
        ),
    ));
    ok(kubectl_stdin(
        &server,
        &["apply", "-f", "-"],
        &level_of(
            "lowqps",
            json!({"queues": 8, "handSize": 2, "queueLengthLimit": 50}),
        ),
    ));
    for user in ["highqps", "lowqps"] {
        ok(server.kubectl(
            "kubectl",
            &[
                "create",
                "clusterrolebinding",
                user,
                "--clusterrole=view",
                &format!("--user={user}"),
            ],
        ));
    }
    let admin = server.raw();
    let as_user = |user: &str| {
        admin.request(
            "GET",
            "/api/v1/namespaces/default/configmaps",
            &[("Impersonate-User", user)],
            None,
        )
    };
    for user in ["highqps", "lowqps"] {
        let level = uid(&server, "prioritylevelconfiguration", user);
        eventually("the test levels to take effect", || {
            (as_user(user).header(PRIORITY_LEVEL_UID) == level).then_some(())
        });
    }
    let nominal: f64 = crate::support::sample(
        &server.metrics(),
        "apiserver_flowcontrol_nominal_limit_seats{priority_level=\"lowqps\"}",
    )
    .unwrap();
    assert_eq!(nominal, 1.0);

    let load = Duration::from_secs(10);
    let stop = AtomicBool::new(false);
    let (high_done, high_refused) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let (low_done, low_refused, low_other) = (
        AtomicUsize::new(0),
        AtomicUsize::new(0),
        AtomicUsize::new(0),
    );
    let low_qps = 4.0;
    std::thread::scope(|scope| {
        // The flood: four clients back to back, twice the seats and queue its level has.
        for _ in 0..4 {
            scope.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    match as_user("highqps").status {
                        200 => high_done.fetch_add(1, Ordering::Relaxed),
                        _ => high_refused.fetch_add(1, Ordering::Relaxed),
                    };
                }
            });
        }
        // The steady client: 4 requests a second.
        scope.spawn(|| {
            let started = Instant::now();
            let mut sent = 0u32;
            while started.elapsed() < load {
                let due = started + Duration::from_secs_f64(f64::from(sent) / low_qps);
                if let Some(wait) = due.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                sent += 1;
                match as_user("lowqps").status {
                    200 => low_done.fetch_add(1, Ordering::Relaxed),
                    429 => low_refused.fetch_add(1, Ordering::Relaxed),
                    _ => low_other.fetch_add(1, Ordering::Relaxed),
                };
            }
            stop.store(true, Ordering::Relaxed);
        });
    });
    let (high_done, high_refused) = (high_done.into_inner(), high_refused.into_inner());
    let (low_done, low_refused, low_other) = (
        low_done.into_inner(),
        low_refused.into_inner(),
        low_other.into_inner(),
    );
    eprintln!(
        "highqps: {high_done} served, {high_refused} refused; lowqps: {low_done} served, {low_refused} refused"
    );
    assert!(high_refused > 0, "the flood never filled its level");
    assert_eq!((low_refused, low_other), (0, 0));
    let wanted = low_qps * load.as_secs_f64();
    assert!(
        low_done as f64 >= 0.9 * wanted,
        "lowqps completed {low_done} of {wanted}"
    );
}
