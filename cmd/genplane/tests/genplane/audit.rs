//! The audit log of the real binary: events at the levels the policy gives, no secret data at
//! Metadata level, omitted stages, and rotation.

#![allow(clippy::unwrap_used)]

use crate::support::{eventually, ok, start_with};
use serde_json::Value;

pub(crate) const POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  resources:
  - group: \"\"
    resources: [secrets]
- level: RequestResponse
  resources:
  - group: \"\"
    resources: [configmaps]
- level: Request
  verbs: [create]
  resources:
  - group: \"\"
    resources: [serviceaccounts]
- level: None
";

/// The complete events in the log (a line still being written is left for the next read).
fn events(log: &std::path::Path) -> Vec<Value> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let complete = &text[..text.rfind('\n').map_or(0, |end| end + 1)];
    complete
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// Waits until the log holds an event matching `pred`.
pub(crate) fn wait_for(log: &std::path::Path, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    eventually(&format!("the event {what} in {}", log.display()), || {
        events(log).into_iter().find(|e| pred(e))
    })
}

pub(crate) fn is(event: &Value, verb: &str, resource: &str, name: &str) -> bool {
    event["verb"] == verb
        && event["objectRef"]["resource"] == resource
        && event["objectRef"]["name"] == name
        && event["stage"] == "ResponseComplete"
}

#[test]
fn the_audit_log_records_what_the_policy_asks_at_its_level() {
    let files = tempfile::tempdir().unwrap();
    let policy = files.path().join("policy.yaml");
    std::fs::write(&policy, POLICY).unwrap();
    let log = files.path().join("audit.log");
    let server = start_with(&[
        &format!("--audit-policy-file={}", policy.display()),
        &format!("--audit-log-path={}", log.display()),
        "--audit-log-maxsize=1",
        "--audit-log-maxbackup=2",
    ]);
    let kubectl = |args: &[&str]| ok(server.kubectl("kubectl", args));
    kubectl(&[
        "create",
        "secret",
        "generic",
        "s1",
        "--from-literal=password=hunter2-secret-value",
    ]);
    kubectl(&["get", "secret", "s1", "-o", "json"]);
    kubectl(&["create", "configmap", "c1", "--from-literal=colour=blue"]);
    kubectl(&["create", "serviceaccount", "bot"]);
    kubectl(&["get", "namespaces"]);

    // Secrets at Metadata: who did what to which object, never the data.
    let created = wait_for(&log, "secret create", |e| is(e, "create", "secrets", "s1"));
    assert_eq!(created["kind"], "Event");
    assert_eq!(created["apiVersion"], "audit.k8s.io/v1");
    assert_eq!(created["level"], "Metadata");
    assert_eq!(created["user"]["username"], "genplane-admin");
    assert_eq!(created["objectRef"]["namespace"], "default");
    assert_eq!(created["objectRef"]["apiVersion"], "v1");
    assert_eq!(created["responseStatus"]["code"], 201);
    assert_eq!(
        created["annotations"]["authorization.k8s.io/decision"],
        "allow"
    );
    assert!(created.get("requestObject").is_none() && created.get("responseObject").is_none());
    assert!(created["auditID"].as_str().is_some_and(|id| id.len() == 36));
    assert!(created["sourceIPs"][0] == "127.0.0.1", "{created}");
    let read = wait_for(&log, "secret get", |e| is(e, "get", "secrets", "s1"));
    assert_eq!(read["level"], "Metadata");
    assert!(read.get("responseObject").is_none());

    // ConfigMaps at RequestResponse: both bodies.
    let cm = wait_for(&log, "configmap create", |e| {
        is(e, "create", "configmaps", "c1")
    });
    assert_eq!(cm["level"], "RequestResponse");
    assert_eq!(cm["requestObject"]["data"]["colour"], "blue", "{cm}");
    assert_eq!(cm["responseObject"]["data"]["colour"], "blue");
    assert!(cm["responseObject"]["metadata"]["uid"].is_string());

    // ServiceAccount creates at Request: the request body only.
    let sa = wait_for(&log, "serviceaccount create", |e| {
        is(e, "create", "serviceaccounts", "bot")
    });
    assert_eq!(sa["level"], "Request");
    assert!(sa["requestObject"].is_object() && sa.get("responseObject").is_none());

    // Level None and omitted stages leave nothing.
    let all = events(&log);
    assert!(
        !all.iter()
            .any(|e| e["objectRef"]["resource"] == "namespaces"),
        "namespaces logged"
    );
    assert!(
        !all.iter().any(|e| e["stage"] == "RequestReceived"),
        "an omitted stage was logged"
    );
    let raw = std::fs::read_to_string(&log).unwrap();
    assert!(
        !raw.contains("hunter2-secret-value"),
        "secret data in the audit log"
    );
    assert!(
        !raw.contains("aHVudGVyMi1zZWNyZXQtdmFsdWU"),
        "secret data (base64) in the audit log"
    );

    // Rotation: past a megabyte the log moves aside, and at most two old files are kept.
    let big = files.path().join("v");
    std::fs::write(&big, "x".repeat(200_000)).unwrap();
    for i in 0..16 {
        kubectl(&[
            "create",
            "configmap",
            &format!("big{i}"),
            &format!("--from-file={}", big.display()),
        ]);
    }
    wait_for(&log, "the last big configmap", |e| {
        is(e, "create", "configmaps", "big15")
    });
    let backups = eventually("two rotated backups", || {
        let backups: Vec<String> = std::fs::read_dir(files.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with("audit-") && n.ends_with(".log"))
            .collect();
        (backups.len() >= 2).then_some(backups)
    });
    assert_eq!(backups.len(), 2, "{backups:?}");
    assert!(std::fs::metadata(&log).unwrap().len() <= 1024 * 1024);
}

#[test]
fn admission_policies_annotate_the_audit_event() {
    let files = tempfile::tempdir().unwrap();
    let policy = files.path().join("policy.yaml");
    std::fs::write(&policy, POLICY).unwrap();
    let log = files.path().join("audit.log");
    let server = start_with(&[
        &format!("--audit-policy-file={}", policy.display()),
        &format!("--audit-log-path={}", log.display()),
    ]);
    let manifests = files.path().join("vap.yaml");
    std::fs::write(
        &manifests,
        "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: audited}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [''], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  validations:
  - {expression: \"!object.metadata.name.startsWith('audited')\", message: no audited names}
  auditAnnotations:
  - {key: name, valueExpression: object.metadata.name}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: audited}
spec: {policyName: audited, validationActions: [Audit]}
",
    )
    .unwrap();
    ok(server.kubectl("kubectl", &["apply", "-f", manifests.to_str().unwrap()]));
    // The policy is in force a moment after it is written: creates are retried with new
    // names until one's event carries the annotations (Audit never refuses).
    let mut attempt = 0;
    let event = eventually("an audited create", || {
        attempt += 1;
        let name = format!("audited-{attempt}");
        ok(server.kubectl(
            "kubectl",
            &["create", "configmap", &name, "--from-literal=k=v"],
        ));
        let event = wait_for(&log, &name, |e| is(e, "create", "configmaps", &name));
        event["annotations"]
            .get("audited/name")
            .is_some()
            .then_some((name, event))
    });
    let (name, event) = event;
    assert_eq!(
        event["annotations"]["audited/name"],
        name.as_str(),
        "{event}"
    );
    let failure: Value = serde_json::from_str(
        event["annotations"]["validation.policy.admission.k8s.io/validation_failure"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        failure,
        serde_json::json!([{"message": "no audited names", "policy": "audited", "binding": "audited",
            "expressionIndex": 0, "validationActions": ["Audit"]}])
    );
}
