//! `reinvocationPolicy: IfNeeded` of mutating webhooks and their audit annotations, with an
//! HTTPS webhook server in the test: a webhook that reports a label runs again after a later
//! webhook added the label, and what webhooks annotate reaches the audit event, prefixed with
//! the webhook's name; a webhook accepting only `v1beta1` reviews gets one.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use serde_json::{Value, json};

use crate::admission::kubectl_stdin;
use crate::audit::{POLICY, is, wait_for};
use crate::support::webhook::Webhook;
use crate::support::{eventually, ok, start_with};

/// The calls of each path, by object name.
type Calls = Arc<Mutex<BTreeMap<(String, String), usize>>>;

/// `/report` (configured `IfNeeded`) sets the label `saw-b` to the label `b` it sees (`none`
/// without one) and annotates the audit event; `/add` sets `b: added`. The calls of each path
/// are counted by object name.
fn webhooks() -> (Webhook, Calls) {
    let calls: Calls = Arc::default();
    let record = calls.clone();
    let server = Webhook::start(move |call| {
        let review: Value = serde_json::from_slice(&call.body).unwrap();
        let request = &review["request"];
        let name = request["name"].as_str().unwrap_or_default().to_owned();
        let path = call.path.split('?').next().unwrap().to_owned();
        *record
            .lock()
            .unwrap()
            .entry((path.clone(), name))
            .or_default() += 1;
        let labels = &request["object"]["metadata"]["labels"];
        let (patch, annotations) = if path == "/report" {
            let seen = labels["b"].as_str().unwrap_or("none");
            (
                json!([{"op": "add", "path": "/metadata/labels/saw-b", "value": seen}]),
                json!({"saw-b": seen}),
            )
        } else {
            (
                json!([{"op": "add", "path": "/metadata/labels/b", "value": "added"}]),
                json!({}),
            )
        };
        let patch = base64::engine::general_purpose::STANDARD.encode(patch.to_string());
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": request["uid"], "allowed": true, "patchType": "JSONPatch",
                "patch": patch, "auditAnnotations": annotations}})
    });
    (server, calls)
}

#[test]
fn if_needed_webhooks_run_again_after_later_changes_and_annotate_the_audit_event() {
    let files = tempfile::tempdir().unwrap();
    let policy = files.path().join("policy.yaml");
    std::fs::write(&policy, POLICY).unwrap();
    let log = files.path().join("audit.log");
    let server = start_with(&[
        &format!("--audit-policy-file={}", policy.display()),
        &format!("--audit-log-path={}", log.display()),
    ]);
    let (hooks, calls) = webhooks();
    let ca = base64::engine::general_purpose::STANDARD.encode(&hooks.ca_pem);
    // configurations run in name order: a-report before b-add
    for (configuration, webhook, path, reinvocation) in [
        ("a-report", "report.genplane.test", "/report", "IfNeeded"),
        ("b-add", "add.genplane.test", "/add", "Never"),
    ] {
        ok(kubectl_stdin(
            &server,
            &["create", "-f", "-"],
            &json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": configuration},
                "webhooks": [{"name": webhook, "sideEffects": "None", "admissionReviewVersions": ["v1"],
                    "reinvocationPolicy": reinvocation,
                    "clientConfig": {"url": format!("{}{path}", hooks.base), "caBundle": ca},
                    "objectSelector": {"matchLabels": {"hooked": "yes"}},
                    "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                        "resources": ["configmaps"]}]}]}),
        ));
    }
    let mut attempt = 0;
    let (name, stored) = eventually("both webhooks to act", || {
        attempt += 1;
        let name = format!("hooked-{attempt}");
        let created = ok(kubectl_stdin(
            &server,
            &["create", "-o", "json", "-f", "-"],
            &json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "labels": {"hooked": "yes"}}}),
        ));
        let created: Value = serde_json::from_str(&created).unwrap();
        (created["metadata"]["labels"]["b"] == "added").then_some((name, created))
    });
    // The report ran again after the later webhook added b, and saw it.
    assert_eq!(
        stored["metadata"]["labels"],
        json!({"hooked": "yes", "b": "added", "saw-b": "added"})
    );
    let count = |path: &str| calls.lock().unwrap()[&(path.to_owned(), name.clone())];
    assert_eq!((count("/report"), count("/add")), (2, 1));
    // Its audit annotations, prefixed with its name; the second call's value is kept only if
    // the key was not set yet (the first one's stays, as upstream).
    let event = wait_for(&log, &name, |e| is(e, "create", "configmaps", &name));
    assert_eq!(
        event["annotations"]["report.genplane.test/saw-b"], "none",
        "{event}"
    );
    // Upstream's annotations of each call: whether it changed the object, by round and by
    // the webhook's place among the mutating webhooks; its patch at level Request and above
    // (the ConfigMaps' level here is RequestResponse).
    let annotation = |key: &str| -> Value {
        serde_json::from_str(
            event["annotations"][key]
                .as_str()
                .unwrap_or_else(|| panic!("no {key}: {event}")),
        )
        .unwrap()
    };
    for (round_index, configuration, webhook, label) in [
        (
            "round_0_index_0",
            "a-report",
            "report.genplane.test",
            "saw-b",
        ),
        ("round_0_index_1", "b-add", "add.genplane.test", "b"),
        (
            "round_1_index_0",
            "a-report",
            "report.genplane.test",
            "saw-b",
        ),
    ] {
        assert_eq!(
            annotation(&format!("mutation.webhook.admission.k8s.io/{round_index}")),
            json!({"configuration": configuration, "webhook": webhook, "mutated": true})
        );
        let patch = annotation(&format!("patch.webhook.admission.k8s.io/{round_index}"));
        assert_eq!(patch["patchType"], "JSONPatch");
        assert_eq!(patch["webhook"], webhook);
        assert_eq!(
            patch["patch"][0]["path"],
            format!("/metadata/labels/{label}")
        );
    }
    assert!(
        event["annotations"]
            .get("mutation.webhook.admission.k8s.io/round_1_index_1")
            .is_none(),
        "b-add does not run again: {event}"
    );
}

/// A webhook that accepts only `v1beta1` reviews is sent one and answered in kind (without
/// the uid, which v1beta1 never required).
#[test]
fn v1beta1_only_webhooks_get_v1beta1_reviews() {
    let server = crate::support::start();
    let versions: Arc<Mutex<Vec<String>>> = Arc::default();
    let record = versions.clone();
    let hooks = Webhook::start(move |call| {
        let review: Value = serde_json::from_slice(&call.body).unwrap();
        record
            .lock()
            .unwrap()
            .push(review["apiVersion"].as_str().unwrap_or_default().to_owned());
        let patch = base64::engine::general_purpose::STANDARD.encode(
            json!([{"op": "add", "path": "/metadata/labels/review", "value": "v1beta1"}])
                .to_string(),
        );
        json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview",
            "response": {"allowed": true, "patchType": "JSONPatch", "patch": patch}})
    });
    let ca = base64::engine::general_purpose::STANDARD.encode(&hooks.ca_pem);
    ok(kubectl_stdin(
        &server,
        &["create", "-f", "-"],
        &json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "old"},
            "webhooks": [{"name": "old.genplane.test", "sideEffects": "None",
                "admissionReviewVersions": ["v1beta1"],
                "clientConfig": {"url": format!("{}/old", hooks.base), "caBundle": ca},
                "objectSelector": {"matchLabels": {"hooked": "old"}},
                "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                    "resources": ["configmaps"]}]}]}),
    ));
    let mut attempt = 0;
    eventually("the v1beta1 webhook to act", || {
        attempt += 1;
        let created = ok(kubectl_stdin(
            &server,
            &[
                "create",
                "-o",
                "jsonpath={.metadata.labels.review}",
                "-f",
                "-",
            ],
            &json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("old-{attempt}"), "labels": {"hooked": "old"}}}),
        ));
        (created == "v1beta1").then_some(())
    });
    assert!(
        versions
            .lock()
            .unwrap()
            .iter()
            .all(|v| v == "admission.k8s.io/v1beta1"),
        "{versions:?}"
    );
}
