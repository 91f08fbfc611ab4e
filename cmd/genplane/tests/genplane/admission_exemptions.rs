//! What admission leaves alone, as upstream 1.33 (issue #37, items 7 and 8): webhooks are never
//! called for the admission configuration kinds (webhook configurations, validating and
//! mutating admission policies and their bindings, any version, their subresources and
//! deletes), so a hanging or denying webhook cannot block the repair; admission policies skip
//! only the policy kinds themselves (and the review resources nothing stores), so a policy can
//! guard webhook configurations.

#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};

use base64::Engine as _;
use serde_json::{Value, json};

use crate::admission::kubectl_stdin;
use crate::support::webhook::Webhook;
use crate::support::{eventually, ok, start_with, text};

const GATE: &str = "--feature-gates=MutatingAdmissionPolicy=true";
const RUNTIME_CONFIG: &str = "--runtime-config=admissionregistration.k8s.io/v1alpha1=true";

/// Every operation on every resource of every group.
fn everything() -> Value {
    json!([{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*/*"]}])
}

#[test]
fn webhooks_are_not_called_for_admission_configuration_kinds() {
    let server = start_with(&[GATE, RUNTIME_CONFIG]);
    // a webhook that refuses everything it is asked about, and records what that was
    let asked: Arc<Mutex<Vec<String>>> = Arc::default();
    let record = asked.clone();
    let webhook = Webhook::start(move |call| {
        let review: Value = serde_json::from_slice(&call.body).unwrap();
        let request = &review["request"];
        record.lock().unwrap().push(format!(
            "{} {}/{}",
            request["operation"].as_str().unwrap_or_default(),
            request["resource"]["resource"].as_str().unwrap_or_default(),
            request["subResource"].as_str().unwrap_or_default()
        ));
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": request["uid"], "allowed": false,
                "status": {"code": 403, "message": "the webhook refuses everything"}}})
    });
    let client_config = json!({"url": format!("{}/refuse", webhook.base),
        "caBundle": base64::engine::general_purpose::STANDARD.encode(&webhook.ca_pem)});
    for kind in [
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
    ] {
        ok(kubectl_stdin(
            &server,
            &["create", "-f", "-"],
            &json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
                "metadata": {"name": "refuse-everything"},
                "webhooks": [{"name": "refuse.genplane.test", "sideEffects": "None",
                    "admissionReviewVersions": ["v1"], "failurePolicy": "Fail",
                    "clientConfig": client_config, "rules": everything()}]}),
        ));
    }
    // in force for other kinds
    eventually("the webhooks to refuse a ConfigMap", || {
        let out = server.kubectl(
            "kubectl",
            &["create", "configmap", "refused", "--from-literal=k=v"],
        );
        text(&out)
            .contains("the webhook refuses everything")
            .then_some(())
    });
    asked.lock().unwrap().clear();
    // every admission configuration kind is created, changed (status included) and deleted
    let match_nothing = json!({"resourceRules": [{"apiGroups": ["genplane.test"],
        "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["nothings"]}]});
    let objects = [
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": "guard"},
            "spec": {"matchConstraints": match_nothing, "validations": [{"expression": "true"}]}}),
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": "guard"},
            "spec": {"policyName": "guard", "validationActions": ["Deny"]}}),
        json!({"apiVersion": "admissionregistration.k8s.io/v1alpha1", "kind": "MutatingAdmissionPolicy",
            "metadata": {"name": "guard"},
            "spec": {"reinvocationPolicy": "Never", "matchConstraints": match_nothing,
                "mutations": [{"patchType": "ApplyConfiguration",
                    "applyConfiguration": {"expression": "Object{}"}}]}}),
        json!({"apiVersion": "admissionregistration.k8s.io/v1alpha1", "kind": "MutatingAdmissionPolicyBinding",
            "metadata": {"name": "guard"}, "spec": {"policyName": "guard"}}),
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "another"}, "webhooks": []}),
    ];
    for object in &objects {
        let out = kubectl_stdin(&server, &["create", "-f", "-"], object);
        assert!(out.status.success(), "{object}: {}", text(&out));
    }
    for (kind, name) in [
        ("validatingadmissionpolicy", "guard"),
        ("validatingadmissionpolicybinding", "guard"),
        ("mutatingadmissionpolicy", "guard"),
        ("mutatingadmissionpolicybinding", "guard"),
        ("validatingwebhookconfiguration", "another"),
    ] {
        ok(server.kubectl(
            "kubectl",
            &["label", kind, name, "changed=yes", "--overwrite"],
        ));
    }
    // the status subresource of a policy
    ok(server.kubectl(
        "kubectl",
        &[
            "patch",
            "validatingadmissionpolicy",
            "guard",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"observedGeneration":1}}"#,
        ],
    ));
    for (kind, name) in [
        ("validatingadmissionpolicybinding", "guard"),
        ("validatingadmissionpolicy", "guard"),
        ("mutatingadmissionpolicybinding", "guard"),
        ("mutatingadmissionpolicy", "guard"),
        ("validatingwebhookconfiguration", "another"),
        ("validatingwebhookconfiguration", "refuse-everything"),
        ("mutatingwebhookconfiguration", "refuse-everything"),
    ] {
        ok(server.kubectl("kubectl", &["delete", kind, name]));
    }
    assert_eq!(*asked.lock().unwrap(), Vec::<String>::new());
}

#[test]
fn policies_guard_webhook_configurations_but_not_policies_or_reviews() {
    let server = start_with(&[]);
    let refuse = |name: &str, group: &str, resources: &[&str]| {
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {"failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": [{"apiGroups": [group], "apiVersions": ["*"],
                    "operations": ["*"], "resources": resources}]},
                "validations": [{"expression": "false", "message": format!("{name} refuses")}]}})
    };
    let bind = |name: &str| {
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name}, "spec": {"policyName": name, "validationActions": ["Deny"]}})
    };
    for (name, group, resources) in [
        (
            "guard-webhooks",
            "admissionregistration.k8s.io",
            &[
                "validatingwebhookconfigurations",
                "mutatingwebhookconfigurations",
            ][..],
        ),
        (
            "guard-policies",
            "admissionregistration.k8s.io",
            &[
                "validatingadmissionpolicies",
                "validatingadmissionpolicybindings",
            ][..],
        ),
        (
            "guard-reviews",
            "authorization.k8s.io",
            &["selfsubjectaccessreviews", "subjectaccessreviews"][..],
        ),
    ] {
        ok(kubectl_stdin(
            &server,
            &["create", "-f", "-"],
            &refuse(name, group, resources),
        ));
        ok(kubectl_stdin(&server, &["create", "-f", "-"], &bind(name)));
    }
    // a webhook configuration is refused by the policy that guards it
    let configuration = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "guarded"}, "webhooks": []});
    let refused = eventually("the policy to guard webhook configurations", || {
        let out = kubectl_stdin(
            &server,
            &["create", "--dry-run=server", "-f", "-"],
            &configuration,
        );
        (!out.status.success()).then(|| text(&out))
    });
    assert!(
        refused.contains("ValidatingAdmissionPolicy 'guard-webhooks' with binding 'guard-webhooks' denied request: guard-webhooks refuses"),
        "{refused}"
    );
    // policies and their bindings are not: the policy guarding them can be changed and removed
    ok(server.kubectl(
        "kubectl",
        &[
            "label",
            "validatingadmissionpolicy",
            "guard-policies",
            "changed=yes",
        ],
    ));
    ok(kubectl_stdin(
        &server,
        &["create", "-f", "-"],
        &bind("another"),
    ));
    // nor are the reviews nothing stores: kubectl auth can-i still answers
    let can_i = server.kubectl("kubectl", &["auth", "can-i", "get", "configmaps"]);
    assert_eq!(text(&can_i).trim(), "yes");
    ok(server.kubectl(
        "kubectl",
        &[
            "delete",
            "validatingadmissionpolicybinding",
            "guard-webhooks",
        ],
    ));
    eventually("the webhook configuration to be admitted", || {
        kubectl_stdin(&server, &["create", "-f", "-"], &configuration)
            .status
            .success()
            .then_some(())
    });
}
