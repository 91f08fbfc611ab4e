//! A CRD with two versions converted by a webhook: an HTTPS server in this test (its own CA,
//! given to the CRD as `caBundle`) converts CronTabs between `stable.example.com/v1`
//! (`spec.cronSpec`) and `v2` (`spec.schedule`). Objects written in either version are read in
//! both; a failing webhook is a clear 500.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::support::{Apiserver, ok, start, text};
use base64::Engine as _;
use serde_json::{Value, json};

/// Converts one CronTab to `desired`.
fn convert(object: &Value, desired: &str) -> Value {
    let mut out = object.clone();
    let from = object["apiVersion"].as_str().unwrap();
    out["apiVersion"] = json!(desired);
    let spec = out["spec"].as_object_mut().unwrap();
    match (from, desired) {
        ("stable.example.com/v1", "stable.example.com/v2") => {
            if let Some(cron) = spec.remove("cronSpec") {
                spec.insert("schedule".into(), cron);
            }
        }
        ("stable.example.com/v2", "stable.example.com/v1") => {
            if let Some(schedule) = spec.remove("schedule") {
                spec.insert("cronSpec".into(), schedule);
            }
        }
        _ => {}
    }
    out
}

/// The test's conversion webhook: whether it fails, and how often it was called.
struct Webhook {
    url: String,
    ca_pem: String,
    fail: Arc<AtomicBool>,
    calls: Arc<AtomicUsize>,
}

/// Starts the webhook, an HTTPS server of the test's.
fn start_webhook() -> Webhook {
    let fail = Arc::new(AtomicBool::new(false));
    let calls = Arc::new(AtomicUsize::new(0));
    let (server_fail, server_calls) = (fail.clone(), calls.clone());
    let server = crate::support::webhook::Webhook::start(move |call| {
        server_calls.fetch_add(1, Ordering::SeqCst);
        let review: Value = serde_json::from_slice(&call.body).unwrap();
        let request = &review["request"];
        let response = if server_fail.load(Ordering::SeqCst) {
            json!({"uid": request["uid"], "result": {"status": "Failure", "message": "the converter is down for maintenance"}})
        } else {
            let desired = request["desiredAPIVersion"].as_str().unwrap();
            let converted: Vec<Value> = request["objects"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| convert(o, desired))
                .collect();
            json!({"uid": request["uid"], "result": {"status": "Success"}, "convertedObjects": converted})
        };
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "response": response})
    });
    Webhook {
        url: format!("{}/convert", server.base),
        ca_pem: server.ca_pem,
        fail,
        calls,
    }
}

fn crd(webhook: &Webhook) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(&webhook.ca_pem);
    let version = |name: &str, storage: bool, field: &str| {
        json!({
            "name": name, "served": true, "storage": storage,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "properties": {field: {"type": "string"}}},
            }}},
        })
    };
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "crontabs.stable.example.com"},
        "spec": {
            "group": "stable.example.com",
            "scope": "Namespaced",
            "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab"},
            "versions": [version("v1", true, "cronSpec"), version("v2", false, "schedule")],
            "conversion": {
                "strategy": "Webhook",
                "webhook": {
                    "conversionReviewVersions": ["v1"],
                    "clientConfig": {"url": webhook.url, "caBundle": ca},
                },
            },
        },
    })
    .to_string()
}

/// The test's webhook and a server with the CronTab CRD it converts, established.
fn start_with_crd() -> (Webhook, Apiserver) {
    let webhook = start_webhook();
    let server = start();
    let file = server.dir.path().join("crd.json");
    std::fs::write(&file, crd(&webhook)).unwrap();
    ok(server.kubectl("kubectl", &["apply", "-f", file.to_str().unwrap()]));
    server.wait_established("crontabs.stable.example.com");
    (webhook, server)
}

fn get(server: &Apiserver, resource: &str, name: &str) -> Value {
    let out = ok(server.kubectl(
        "kubectl",
        &["get", resource, name, "-n", "default", "-o", "json"],
    ));
    serde_json::from_str(&out).unwrap()
}

#[test]
fn a_conversion_webhook_converts_between_versions_both_ways() {
    let (webhook, server) = start_with_crd();

    // Written in v1 (the storage version), read in v2.
    let v1 = server.dir.path().join("v1.yaml");
    std::fs::write(&v1, "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: old-style\n  namespace: default\nspec:\n  cronSpec: '*/5 * * * *'\n").unwrap();
    ok(server.kubectl("kubectl", &["create", "-f", v1.to_str().unwrap()]));
    let read = get(&server, "crontabs.v2.stable.example.com", "old-style");
    assert_eq!(read["apiVersion"], "stable.example.com/v2", "{read}");
    assert_eq!(read["spec"], json!({"schedule": "*/5 * * * *"}), "{read}");

    // Written in v2, stored converted to v1, read in both.
    let v2 = server.dir.path().join("v2.yaml");
    std::fs::write(&v2, "apiVersion: stable.example.com/v2\nkind: CronTab\nmetadata:\n  name: new-style\n  namespace: default\nspec:\n  schedule: '0 * * * *'\n").unwrap();
    let created = ok(server.kubectl(
        "kubectl",
        &["create", "-f", v2.to_str().unwrap(), "-o", "json"],
    ));
    let created: Value = serde_json::from_str(&created).unwrap();
    assert_eq!(created["apiVersion"], "stable.example.com/v2", "{created}");
    assert_eq!(
        created["spec"],
        json!({"schedule": "0 * * * *"}),
        "{created}"
    );
    let read = get(&server, "crontabs.v1.stable.example.com", "new-style");
    assert_eq!(read["spec"], json!({"cronSpec": "0 * * * *"}), "{read}");
    let calls_before_list = webhook.calls.load(Ordering::SeqCst);
    let listed = ok(server.kubectl(
        "kubectl",
        &[
            "get",
            "crontabs.v2.stable.example.com",
            "-n",
            "default",
            "-o",
            "json",
        ],
    ));
    let listed: Value = serde_json::from_str(&listed).unwrap();
    let schedules: Vec<&Value> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| &i["spec"]["schedule"])
        .collect();
    assert_eq!(
        schedules,
        [&json!("0 * * * *"), &json!("*/5 * * * *")],
        "{listed}"
    );
    // The list's page is converted in one call, as upstream converts a list.
    assert_eq!(
        webhook.calls.load(Ordering::SeqCst) - calls_before_list,
        1,
        "calls for a list of two objects"
    );

    // A webhook that fails makes reads in the other version fail, with its message.
    webhook.fail.store(true, Ordering::SeqCst);
    let failed = server.kubectl(
        "kubectl",
        &[
            "get",
            "crontabs.v2.stable.example.com",
            "old-style",
            "-n",
            "default",
        ],
    );
    assert!(!failed.status.success());
    let message = text(&failed);
    assert!(
        message.contains("conversion webhook for stable.example.com/v1, Kind=CronTab failed"),
        "{message}"
    );
    assert!(
        message.contains("the converter is down for maintenance"),
        "{message}"
    );
    // Reads in the stored version need no conversion.
    let read = get(&server, "crontabs.v1.stable.example.com", "old-style");
    assert_eq!(read["spec"], json!({"cronSpec": "*/5 * * * *"}));
}

/// Many watches of both versions of a CRD converted by a webhook, while objects are created:
/// every watch sees every object in its own version, and the server answers `/readyz`
/// throughout. A watch event of the version that is not stored is converted by a call to the
/// webhook; no watch may hold up the others (or the server) while that call is on its way.
#[test]
fn many_watches_of_a_converted_crd_do_not_hold_up_the_server() {
    use futures::StreamExt;
    use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, WatchEvent, WatchParams};

    let (_webhook, server) = start_with_crd();

    // Four watches per worker thread of the server's runtime (one per core), of each version.
    let per_version = 4 * std::thread::available_parallelism().map_or(2, usize::from);
    const OBJECTS: usize = 3;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let client = runtime.block_on(server.client());
    let (seen_tx, seen) = std::sync::mpsc::channel::<(String, String, String)>();
    let mut started = Vec::new();
    for version in ["v1", "v2"] {
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("stable.example.com", version, "CronTab"),
            "crontabs",
        );
        for _ in 0..per_version {
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), "default", &resource);
            let seen_tx = seen_tx.clone();
            let (ready_tx, ready) = std::sync::mpsc::channel();
            runtime.spawn(async move {
                let mut stream = api
                    .watch(&WatchParams::default().timeout(120), "0")
                    .await
                    .unwrap()
                    .boxed();
                ready_tx.send(()).unwrap();
                while let Some(event) = stream.next().await {
                    if let Ok(WatchEvent::Added(object)) = event {
                        let api_version = object.types.map(|t| t.api_version).unwrap_or_default();
                        let spec = object.data["spec"].to_string();
                        let name = object.metadata.name.unwrap_or_default();
                        let _ = seen_tx.send((api_version, name, spec));
                    }
                }
            });
            started.push(ready);
        }
    }
    for ready in started {
        ready.recv_timeout(crate::support::DEADLINE).unwrap();
    }

    // /readyz, asked over new connections the whole time.
    let stop = Arc::new(AtomicBool::new(false));
    let prober = {
        let (raw, stop) = (server.raw(), stop.clone());
        std::thread::spawn(move || {
            let mut answered = 0;
            while !stop.load(Ordering::SeqCst) {
                let answer = raw
                    .try_request("GET", "/readyz", &[], None)
                    .unwrap_or_else(|e| panic!("/readyz after {answered} answers: {e}"));
                assert_eq!(answer.status, 200, "{}", answer.text());
                answered += 1;
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            answered
        })
    };

    for i in 0..OBJECTS {
        let (version, body) = if i % 2 == 0 {
            ("v1", "spec:\n  cronSpec: '* * * * *'\n")
        } else {
            ("v2", "spec:\n  schedule: '* * * * *'\n")
        };
        let path = server.dir.path().join(format!("object-{i}.yaml"));
        std::fs::write(
            &path,
            format!("apiVersion: stable.example.com/{version}\nkind: CronTab\nmetadata:\n  name: tab-{i}\n  namespace: default\n{body}"),
        )
        .unwrap();
        ok(server.kubectl("kubectl", &["create", "-f", path.to_str().unwrap()]));
    }

    // Every watch sees every object, in its version's shape.
    let mut events = Vec::new();
    let deadline = std::time::Instant::now() + crate::support::DEADLINE;
    while events.len() < 2 * per_version * OBJECTS {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match seen.recv_timeout(left) {
            Ok(event) => events.push(event),
            Err(_) => panic!(
                "{} of {} watch events arrived: {events:?}",
                events.len(),
                2 * per_version * OBJECTS
            ),
        }
    }
    for (api_version, name, spec) in &events {
        let field = match api_version.as_str() {
            "stable.example.com/v1" => "cronSpec",
            "stable.example.com/v2" => "schedule",
            other => panic!("{name} arrived as {other}"),
        };
        assert!(spec.contains(field), "{name} in {api_version}: {spec}");
    }
    stop.store(true, Ordering::SeqCst);
    assert!(prober.join().unwrap() > 0);
    runtime.shutdown_background();
}
