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

fn get(server: &Apiserver, resource: &str, name: &str) -> Value {
    let out = ok(server.kubectl(
        "kubectl",
        &["get", resource, name, "-n", "default", "-o", "json"],
    ));
    serde_json::from_str(&out).unwrap()
}

#[test]
fn a_conversion_webhook_converts_between_versions_both_ways() {
    let webhook = start_webhook();
    let server = start();
    let file = server.dir.path().join("crd.json");
    std::fs::write(&file, crd(&webhook)).unwrap();
    ok(server.kubectl("kubectl", &["apply", "-f", file.to_str().unwrap()]));
    server.wait_established("crontabs.stable.example.com");

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
    assert!(webhook.calls.load(Ordering::SeqCst) >= 4);

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
