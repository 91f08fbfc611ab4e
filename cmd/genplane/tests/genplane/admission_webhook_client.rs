//! What the API server accepts from the webhooks it calls (issue #37, items 9 and 11): answers
//! no larger than a real one can be, from admission and conversion webhooks alike (a 32 MiB
//! answer is refused as a failed call, without the server's memory growing by it), and a
//! self-signed CA certificate as the webhook's own serving certificate, as Go's client accepts
//! it; and a webhook given by a `service` reference, reached through the service resolver.

#![allow(clippy::unwrap_used)]

use base64::Engine as _;
use serde_json::{Value, json};

use crate::admission::kubectl_stdin;
use crate::support::webhook::{Serving, Webhook};
use crate::support::{Apiserver, eventually, ok, start, start_with, text};

/// The peak resident memory of the server's process so far, in KiB (`VmHWM`).
fn peak_rss_kib(server: &Apiserver) -> u64 {
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", server.process.child.id())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// A validating webhook configuration for ConfigMaps labelled `webhook: <name>`.
fn configuration(name: &str, webhook: &Webhook, failure_policy: &str) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{"name": format!("{name}.genplane.test"), "sideEffects": "None",
            "admissionReviewVersions": ["v1"], "failurePolicy": failure_policy,
            "timeoutSeconds": 30,
            "clientConfig": {"url": format!("{}/validate", webhook.base),
                "caBundle": base64::engine::general_purpose::STANDARD.encode(&webhook.ca_pem)},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                "resources": ["configmaps"]}],
            "objectSelector": {"matchLabels": {"webhook": name}}}]})
}

/// Creates a ConfigMap labelled `webhook: <label>` with kubectl.
fn create(server: &Apiserver, name: &str, label: &str) -> std::process::Output {
    kubectl_stdin(
        server,
        &["create", "-f", "-"],
        &json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default", "labels": {"webhook": label}}}),
    )
}

#[test]
fn webhook_answers_larger_than_any_real_one_are_refused_unread() {
    let server = start();
    // allowed, with 32 MiB of padding no real answer has
    let padding = "x".repeat(32 * 1024 * 1024);
    let webhook = Webhook::start(move |call| {
        let review: Value = serde_json::from_slice(&call.body).unwrap();
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": true},
            "padding": padding})
    });
    ok(kubectl_stdin(
        &server,
        &["create", "-f", "-"],
        &configuration("huge", &webhook, "Fail"),
    ));
    ok(kubectl_stdin(
        &server,
        &["create", "-f", "-"],
        &configuration("huge-ignored", &webhook, "Ignore"),
    ));
    let before = peak_rss_kib(&server);
    let mut n = 0;
    let refused = eventually("the webhook to be called", || {
        n += 1;
        let out = create(&server, &format!("huge-{n}"), "huge");
        (!out.status.success()).then(|| text(&out))
    });
    assert!(
        refused.contains("failed calling webhook \"huge.genplane.test\"")
            && refused.contains("larger than"),
        "{refused}"
    );
    // Ignore: admitted
    ok(create(&server, "ignored", "huge-ignored"));
    let grown = peak_rss_kib(&server).saturating_sub(before);
    eprintln!("peak memory grew by {grown} KiB");
    assert!(
        grown < 16 * 1024,
        "the server's peak memory grew by {grown} KiB for a 32 MiB answer"
    );
}

#[test]
fn a_self_signed_ca_certificate_may_serve_a_webhook() {
    let server = start();
    let webhook = Webhook::start_serving(Serving::ItsCa, |call| {
        let review: Value = serde_json::from_slice(&call.body).unwrap();
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": false,
                "status": {"code": 403, "message": "seen by the self-signed webhook"}}})
    });
    ok(kubectl_stdin(
        &server,
        &["create", "-f", "-"],
        &configuration("self-signed", &webhook, "Fail"),
    ));
    let mut n = 0;
    let refused = eventually("the webhook to be called", || {
        n += 1;
        let out = create(&server, &format!("self-signed-{n}"), "self-signed");
        (!out.status.success()).then(|| text(&out))
    });
    assert!(
        refused.contains("admission webhook \"self-signed.genplane.test\" denied the request: seen by the self-signed webhook"),
        "{refused}"
    );
    // the host name is still checked: the certificate is for 127.0.0.1, not localhost
    let port = webhook.base.rsplit_once(':').unwrap().1;
    let elsewhere = Webhook {
        base: format!("https://localhost:{port}"),
        ca_pem: webhook.ca_pem.clone(),
    };
    ok(kubectl_stdin(
        &server,
        &["create", "-f", "-"],
        &configuration("wrong-name", &elsewhere, "Fail"),
    ));
    let refused = eventually("the misnamed webhook to be called", || {
        n += 1;
        let out = create(&server, &format!("wrong-name-{n}"), "wrong-name");
        (!out.status.success()).then(|| text(&out))
    });
    assert!(
        refused.contains("failed calling webhook \"wrong-name.genplane.test\"")
            && !refused.contains("seen by the self-signed webhook"),
        "{refused}"
    );
}

#[test]
fn conversion_webhook_answers_larger_than_any_real_one_are_refused_unread() {
    let server = start();
    // converts, with 32 MiB of padding no real answer has
    let padding = "x".repeat(32 * 1024 * 1024);
    let webhook = Webhook::start(move |call| {
        let review: Value = serde_json::from_slice(&call.body).unwrap();
        let request = &review["request"];
        let desired = request["desiredAPIVersion"].clone();
        let converted: Vec<Value> = request["objects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                let mut o = o.clone();
                o["apiVersion"] = desired.clone();
                o
            })
            .collect();
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": request["uid"], "result": {"status": "Success"},
                "convertedObjects": converted},
            "padding": padding})
    });
    let version = |name: &str, storage: bool| {
        json!({"name": name, "served": true, "storage": storage,
            "schema": {"openAPIV3Schema": {"type": "object",
                "x-kubernetes-preserve-unknown-fields": true}}})
    };
    ok(kubectl_stdin(
        &server,
        &["create", "-f", "-"],
        &json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "paddeds.genplane.test"},
            "spec": {"group": "genplane.test", "scope": "Namespaced",
                "names": {"plural": "paddeds", "singular": "padded", "kind": "Padded"},
                "versions": [version("v1", true), version("v2", false)],
                "conversion": {"strategy": "Webhook", "webhook": {
                    "conversionReviewVersions": ["v1"],
                    "clientConfig": {"url": format!("{}/convert", webhook.base),
                        "caBundle": base64::engine::general_purpose::STANDARD.encode(&webhook.ca_pem)}}}}}),
    ));
    server.wait_established("paddeds.genplane.test");
    let before = peak_rss_kib(&server);
    // written in v2, converted to v1 (the storage version) by the webhook
    let object = json!({"apiVersion": "genplane.test/v2", "kind": "Padded",
        "metadata": {"name": "p", "namespace": "default"}, "spec": {"a": 1}});
    let refused = eventually("the conversion webhook to be called", || {
        let answer = server.raw().request(
            "POST",
            "/apis/genplane.test/v2/namespaces/default/paddeds",
            &[],
            Some(object.to_string().as_bytes()),
        );
        (answer.status != 404).then(|| (answer.status, answer.text()))
    });
    assert_eq!(refused.0, 500, "{}", refused.1);
    assert!(refused.1.contains("larger than"), "{}", refused.1);
    let grown = peak_rss_kib(&server).saturating_sub(before);
    eprintln!("peak memory grew by {grown} KiB");
    assert!(
        grown < 16 * 1024,
        "the server's peak memory grew by {grown} KiB for a 32 MiB answer"
    );
}

#[test]
fn a_webhook_given_by_service_is_reached_through_the_override() {
    let webhook = Webhook::start(|call| {
        let review: Value = serde_json::from_slice(&call.body).unwrap();
        assert_eq!(call.path.split('?').next(), Some("/validate"));
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": false,
                "status": {"code": 403, "message": "seen by the webhook behind webhooks/policy"}}})
    });
    let address = webhook.base.strip_prefix("https://").unwrap();
    let server = start_with(&[&format!(
        "--service-address-override=webhooks/policy:443={address}"
    )]);
    let mut configuration = configuration("by-service", &webhook, "Fail");
    configuration["webhooks"][0]["clientConfig"] = json!({
        "service": {"namespace": "webhooks", "name": "policy", "path": "/validate"},
        "caBundle": base64::engine::general_purpose::STANDARD.encode(&webhook.ca_pem)});
    ok(kubectl_stdin(
        &server,
        &["create", "-f", "-"],
        &configuration,
    ));
    let mut n = 0;
    let refused = eventually("the webhook to be called", || {
        n += 1;
        let out = create(&server, &format!("by-service-{n}"), "by-service");
        (!out.status.success()).then(|| text(&out))
    });
    assert!(
        refused.contains("admission webhook \"by-service.genplane.test\" denied the request: seen by the webhook behind webhooks/policy"),
        "{refused}"
    );
    // Without an override, the Service's name goes to DNS, which does not know it here.
    let elsewhere = start();
    ok(kubectl_stdin(
        &elsewhere,
        &["create", "-f", "-"],
        &configuration,
    ));
    let refused = eventually("the unresolvable webhook to be called", || {
        n += 1;
        let out = create(&elsewhere, &format!("by-service-{n}"), "by-service");
        (!out.status.success()).then(|| text(&out))
    });
    assert!(
        refused.contains("failed calling webhook \"by-service.genplane.test\"")
            && refused.contains("policy.webhooks.svc"),
        "{refused}"
    );
    // A malformed override stops the server at start with the flag named.
    let out = std::process::Command::new(crate::support::BIN)
        .args(["apiserver", "--service-address-override=policy=127.0.0.1:1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "{}", text(&out));
    assert!(
        text(&out).contains("is not <namespace>/<name>:<port>=<ip>:<port>"),
        "{}",
        text(&out)
    );
}
