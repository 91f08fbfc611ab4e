//! Mutating admission that tries to change what was authorized: a hostile mutating webhook and
//! a hostile MutatingAdmissionPolicy rewrite the namespace, the name, the uid, the type and the
//! fields only the server sets, on every write path a tenant has (create, create on update,
//! server-side apply, update, patch, a subresource, TokenRequest, a review). Whatever they
//! answer, nothing is stored outside the namespace the request was authorized for, under
//! another name than a named request gave, or with a uid or timestamps of their choosing.

#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};

use base64::Engine as _;
use serde_json::{Value, json};

use crate::admission::kubectl_stdin;
use crate::support::clients::Raw;
use crate::support::webhook::Webhook;
use crate::support::{Apiserver, eventually, ok, start_with};

/// The tenant's token: `tina` edits namespace `tenant` and nothing else.
const TOKENS: &str = "tok-tina,tina,u-tina\n";

/// The all-zero uid the attackers try to give objects.
const ZERO_UID: &str = "00000000-0000-0000-0000-000000000000";

/// A timestamp long past, which the attackers try to give objects.
const LONG_AGO: &str = "2001-01-01T00:00:00Z";

/// One rewrite of the object under admission, as JSON patch operations.
fn attack_patch(attack: &str) -> Value {
    match attack {
        "namespace" => {
            json!([{"op": "add", "path": "/metadata/namespace", "value": "kube-system"}])
        }
        "missing-namespace" => {
            json!([{"op": "add", "path": "/metadata/namespace", "value": "nowhere"}])
        }
        "name" => json!([{"op": "add", "path": "/metadata/name", "value": "hijacked"}]),
        "uid" => json!([{"op": "add", "path": "/metadata/uid", "value": ZERO_UID}]),
        "timestamps" => json!([
            {"op": "add", "path": "/metadata/creationTimestamp", "value": LONG_AGO},
            {"op": "add", "path": "/metadata/deletionTimestamp", "value": LONG_AGO},
            {"op": "add", "path": "/metadata/deletionGracePeriodSeconds", "value": 0},
            {"op": "add", "path": "/metadata/resourceVersion", "value": "1"},
        ]),
        "kind" => json!([{"op": "replace", "path": "/kind", "value": "Secret"}]),
        "apiVersion" => json!([{"op": "replace", "path": "/apiVersion", "value": "v2"}]),
        _ => json!([]),
    }
}

/// The attacks, each tried on every path.
const ATTACKS: [&str; 7] = [
    "namespace",
    "missing-namespace",
    "name",
    "uid",
    "timestamps",
    "kind",
    "apiVersion",
];

/// A server with the tenant, its namespace (labelled `hostile=yes`, which the attackers
/// select) and a ResourceQuota and ConfigMap there.
fn server(extra: &[&str]) -> (Apiserver, tempfile::TempDir) {
    let tokens = tempfile::tempdir().unwrap();
    let file = tokens.path().join("tokens.csv");
    std::fs::write(&file, TOKENS).unwrap();
    let mut flags = vec![format!("--token-auth-file={}", file.display())];
    flags.extend(extra.iter().map(|f| (*f).to_owned()));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let server = start_with(&flags);
    ok(kubectl_stdin(
        &server,
        &["create", "-f", "-"],
        &json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "tenant", "labels": {"hostile": "yes"}}}),
    ));
    ok(server.kubectl(
        "kubectl",
        &[
            "create",
            "rolebinding",
            "tina-edit",
            "--clusterrole=edit",
            "--user=tina",
            "-n",
            "tenant",
        ],
    ));
    // What `edit` lacks for the paths tried: Leases, TokenRequests, access reviews.
    ok(kubectl_stdin(
        &server,
        &["create", "-f", "-"],
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "tina-extra", "namespace": "tenant"},
        "rules": [
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["*"]},
            {"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]},
            {"apiGroups": ["authorization.k8s.io"], "resources": ["localsubjectaccessreviews"], "verbs": ["create"]},
        ]}),
    ));
    ok(server.kubectl(
        "kubectl",
        &[
            "create",
            "rolebinding",
            "tina-extra",
            "--role=tina-extra",
            "--user=tina",
            "-n",
            "tenant",
        ],
    ));
    ok(server.kubectl(
        "kubectl",
        &["create", "serviceaccount", "robot", "-n", "tenant"],
    ));
    (server, tokens)
}

/// The tenant's client.
fn tenant(server: &Apiserver) -> Raw {
    let ca = std::fs::read(server.ca()).unwrap();
    Raw::new(format!("127.0.0.1:{}", server.port), &ca, None)
}

/// One write as the tenant: the status and the answer.
fn write(
    server: &Apiserver,
    method: &str,
    path: &str,
    content_type: &str,
    body: &Value,
) -> (u16, Value) {
    let answer = tenant(server).request(
        method,
        path,
        &[
            ("Authorization", "Bearer tok-tina"),
            ("Content-Type", content_type),
        ],
        Some(body.to_string().as_bytes()),
    );
    let value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
    (answer.status, value)
}

/// Every object the admin can see of `resource` (`configmaps`, `leases`), in all namespaces.
fn everywhere(server: &Apiserver, resource: &str) -> Vec<Value> {
    let listed: Value = serde_json::from_str(&ok(
        server.kubectl("kubectl", &["get", resource, "-A", "-o", "json"])
    ))
    .unwrap();
    listed["items"].as_array().unwrap().clone()
}

/// The paths a tenant writes through, each with the object it writes there: (what it is,
/// method, path, content type, body).
fn paths(round: usize) -> Vec<(&'static str, &'static str, String, &'static str, Value)> {
    // Each object says which path wrote it (label `path`).
    let cm = |name: String, path: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "tenant", "labels": {"path": path}},
            "data": {"round": round.to_string()}})
    };
    let lease = |name: String| {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": "tenant", "labels": {"path": "put"}},
            "spec": {"holderIdentity": "t"}})
    };
    vec![
        (
            "create",
            "POST",
            "/api/v1/namespaces/tenant/configmaps".to_owned(),
            "application/json",
            cm(format!("created-{round}"), "create"),
        ),
        (
            "create on update",
            "PUT",
            format!("/apis/coordination.k8s.io/v1/namespaces/tenant/leases/put-{round}"),
            "application/json",
            lease(format!("put-{round}")),
        ),
        (
            "server-side apply",
            "PATCH",
            format!("/api/v1/namespaces/tenant/configmaps/applied-{round}?fieldManager=tina"),
            "application/apply-patch+yaml",
            cm(format!("applied-{round}"), "apply"),
        ),
        (
            "update",
            "PUT",
            "/api/v1/namespaces/tenant/configmaps/existing".to_owned(),
            "application/json",
            cm("existing".to_owned(), "update"),
        ),
        (
            "patch",
            "PATCH",
            "/api/v1/namespaces/tenant/configmaps/existing".to_owned(),
            "application/merge-patch+json",
            json!({"data": {"patched": round.to_string()}}),
        ),
        (
            "token request",
            "POST",
            "/api/v1/namespaces/tenant/serviceaccounts/robot/token".to_owned(),
            "application/json",
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"audiences": ["x"]}}),
        ),
        (
            "local subject access review",
            "POST",
            "/apis/authorization.k8s.io/v1/namespaces/tenant/localsubjectaccessreviews".to_owned(),
            "application/json",
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview",
                "metadata": {"namespace": "tenant"},
                "spec": {"user": "tina", "resourceAttributes": {"namespace": "tenant", "verb": "get", "resource": "configmaps"}}}),
        ),
    ]
}

/// Checks that what the attackers did changed nothing that was authorized: every ConfigMap
/// and Lease the tenant's writes left is in `tenant` (none appeared elsewhere, no namespace
/// `nowhere` exists), named as a named request asked (only a create of the collection may
/// have been renamed `hijacked`), with a uid and creation time of the server's own (all
/// different), and no deletion mark.
fn check_nothing_escaped(server: &Apiserver, before: &[Value], what: &str) {
    let mut uids = std::collections::BTreeSet::new();
    for resource in ["configmaps", "leases"] {
        for object in everywhere(server, resource) {
            let meta = &object["metadata"];
            if meta["namespace"] != "tenant" {
                let known = before.iter().any(|b| b["metadata"]["uid"] == meta["uid"]);
                assert!(
                    known,
                    "{what}: {resource} stored outside the tenant's namespace: {object}"
                );
                continue;
            }
            if meta["name"] == "hijacked" {
                assert_eq!(
                    meta["labels"]["path"], "create",
                    "{what}: a named {resource} was renamed: {object}"
                );
            }
            assert_ne!(meta["uid"], ZERO_UID, "{what}: {object}");
            assert!(
                uids.insert(meta["uid"].to_string()),
                "{what}: a uid twice: {object}"
            );
            assert_ne!(meta["creationTimestamp"], LONG_AGO, "{what}: {object}");
            assert!(meta.get("deletionTimestamp").is_none(), "{what}: {object}");
        }
    }
    let namespaces = ok(server.kubectl("kubectl", &["get", "namespaces", "-o", "name"]));
    assert!(
        !namespaces.contains("namespace/nowhere"),
        "{what}: {namespaces}"
    );
}

/// Runs every attack on every path, `arm` arming the attacker for one attack and returning
/// once it acts; then checks that the answers are upstream's and nothing escaped. Access
/// reviews are not admitted by policies (upstream's exclusion of the review kinds), so
/// `reviews_attacked` says whether the attacker sees them.
fn attack_every_path(server: &Apiserver, arm: &dyn Fn(&str), reviews_attacked: bool) {
    arm("none");
    ok(server.kubectl(
        "kubectl",
        &[
            "create",
            "configmap",
            "existing",
            "-n",
            "tenant",
            "--from-literal=k=v",
        ],
    ));
    let before: Vec<Value> = ["configmaps", "leases"]
        .iter()
        .flat_map(|r| everywhere(server, r))
        .collect();
    let existing: Value = serde_json::from_str(&ok(server.kubectl(
        "kubectl",
        &["get", "configmap", "existing", "-n", "tenant", "-o", "json"],
    )))
    .unwrap();
    let existing_uid = existing["metadata"]["uid"].as_str().unwrap().to_owned();
    let existing_created = existing["metadata"]["creationTimestamp"]
        .as_str()
        .unwrap()
        .to_owned();
    for (round, attack) in ATTACKS.iter().enumerate() {
        arm(attack);
        for (what, method, path, content_type, body) in paths(round) {
            let label = format!("{attack} on {what}");
            let (status, answer) = write(server, method, &path, content_type, &body);
            if what == "local subject access review" && !reviews_attacked {
                assert_eq!(status, 201, "{label}: {answer}");
                continue;
            }
            match *attack {
                "namespace" | "missing-namespace" => {
                    // Upstream's check after admission (a review's or TokenRequest's too).
                    assert_eq!(status, 400, "{label}: {answer}");
                    assert_eq!(
                        answer["message"],
                        "the namespace of the provided object does not match the namespace sent on the request",
                        "{label}"
                    );
                }
                "name" => match what {
                    // A create of a collection may be named by admission, as upstream.
                    "create" => assert!(status < 300, "{label}: {status} {answer}"),
                    // An update renames nothing: the name is immutable; a TokenRequest is
                    // named after its account, if at all; a review has no metadata.
                    "update" | "patch" | "token request" | "local subject access review" => {
                        assert_eq!(status, 422, "{label}: {answer}");
                    }
                    _ => {
                        assert_eq!(status, 400, "{label}: {answer}");
                        assert!(
                            answer["message"]
                                .as_str()
                                .unwrap()
                                .starts_with("the name of the object (hijacked) does not match the name on the URL"),
                            "{label}: {answer}"
                        );
                    }
                },
                "kind" | "apiVersion" => {
                    assert!((400..500).contains(&status), "{label}: {status} {answer}");
                }
                // A review's metadata must be empty (upstream's validation).
                _ if what == "local subject access review" => {
                    assert_eq!(status, 422, "{label}: {answer}");
                }
                // The server's own fields are set after admission, whatever it said.
                _ => {
                    assert!(status < 300, "{label}: {status} {answer}");
                    if let Some(meta) = answer.get("metadata")
                        && answer["kind"] != "TokenRequest"
                        && answer["kind"] != "LocalSubjectAccessReview"
                    {
                        assert_ne!(meta["uid"], ZERO_UID, "{label}: {answer}");
                        assert_ne!(meta["creationTimestamp"], LONG_AGO, "{label}: {answer}");
                        assert!(meta.get("deletionTimestamp").is_none(), "{label}: {answer}");
                        if path.ends_with("/configmaps/existing") {
                            assert_eq!(meta["uid"], existing_uid.as_str(), "{label}");
                            assert_eq!(
                                meta["creationTimestamp"],
                                existing_created.as_str(),
                                "{label}"
                            );
                        }
                    }
                }
            }
            if answer["kind"] == "TokenRequest" {
                // A token is only ever for the account the URL names.
                let token = answer["status"]["token"].as_str().unwrap();
                let claims = token.split('.').nth(1).unwrap();
                let claims: Value = serde_json::from_slice(
                    &base64::engine::general_purpose::URL_SAFE_NO_PAD
                        .decode(claims)
                        .unwrap(),
                )
                .unwrap();
                assert_eq!(
                    claims["sub"], "system:serviceaccount:tenant:robot",
                    "{label}"
                );
            }
        }
        check_nothing_escaped(server, &before, attack);
    }
}

/// Waits until the attacker acts: with the `kind` attack armed, a dry-run create is refused.
fn wait_armed(server: &Apiserver, arm: &dyn Fn(&str)) {
    arm("kind");
    eventually("the attacker to act", || {
        let (status, _) = write(
            server,
            "POST",
            "/api/v1/namespaces/tenant/configmaps?dryRun=All",
            "application/json",
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "probe"}}),
        );
        (status >= 400).then_some(())
    });
}

#[test]
fn a_hostile_mutating_webhook_changes_nothing_that_was_authorized() {
    let attack: Arc<Mutex<String>> = Arc::default();
    let current = attack.clone();
    let hook = Webhook::start(move |call| {
        let review: Value = serde_json::from_slice(&call.body).unwrap();
        let uid = review["request"]["uid"].clone();
        let attack = current.lock().unwrap().clone();
        let patch =
            base64::engine::general_purpose::STANDARD.encode(attack_patch(&attack).to_string());
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": uid, "allowed": true, "patchType": "JSONPatch", "patch": patch}})
    });
    let (server, _tokens) = server(&[]);
    let ca = base64::engine::general_purpose::STANDARD.encode(&hook.ca_pem);
    ok(kubectl_stdin(
        &server,
        &["create", "-f", "-"],
        &json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "hostile"},
            "webhooks": [{"name": "hostile.genplane.test", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                "clientConfig": {"url": format!("{}/mutate", hook.base), "caBundle": ca},
                "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["*"], "apiVersions": ["*"],
                    "resources": ["*/*"], "scope": "Namespaced"}],
                "namespaceSelector": {"matchLabels": {"hostile": "yes"}}}]}),
    ));
    // The webhook reads the attack at each call.
    let arm = |name: &str| *attack.lock().unwrap() = name.to_owned();
    wait_armed(&server, &arm);
    attack_every_path(&server, &arm, true);
}

#[test]
fn a_hostile_mutating_admission_policy_changes_nothing_that_was_authorized() {
    let (server, _tokens) = server(&[
        "--feature-gates=MutatingAdmissionPolicy=true",
        "--runtime-config=admissionregistration.k8s.io/v1alpha1=true",
    ]);
    // The attack is the data of a ConfigMap the policy reads as its params: one mutation per
    // attack, each applying its patch only when the params name it.
    ok(server.kubectl("kubectl", &["create", "namespace", "attacker"]));
    ok(server.kubectl(
        "kubectl",
        &[
            "create",
            "configmap",
            "attack",
            "-n",
            "attacker",
            "--from-literal=name=none",
        ],
    ));
    let mutations: Vec<Value> = ATTACKS
        .iter()
        .map(|attack| {
            let ops: Vec<String> = attack_patch(attack)
                .as_array()
                .unwrap()
                .iter()
                .map(|op| {
                    format!(
                        "JSONPatch{{op: {}, path: {}, value: {}}}",
                        op["op"], op["path"], op["value"]
                    )
                })
                .collect();
            json!({"patchType": "JSONPatch", "jsonPatch": {"expression": format!(
                "params.data.name == '{attack}' ? [{}] : []",
                ops.join(", ")
            )}})
        })
        .collect();
    ok(kubectl_stdin(
        &server,
        &["create", "-f", "-"],
        &json!({"apiVersion": "admissionregistration.k8s.io/v1alpha1", "kind": "MutatingAdmissionPolicy",
            "metadata": {"name": "hostile"},
            "spec": {"reinvocationPolicy": "Never", "failurePolicy": "Fail",
                "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                "matchConstraints": {"resourceRules": [{"operations": ["CREATE", "UPDATE"],
                    "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/*"], "scope": "Namespaced"}],
                    "namespaceSelector": {"matchLabels": {"hostile": "yes"}}},
                "mutations": mutations}}),
    ));
    ok(kubectl_stdin(
        &server,
        &["create", "-f", "-"],
        &json!({"apiVersion": "admissionregistration.k8s.io/v1alpha1", "kind": "MutatingAdmissionPolicyBinding",
            "metadata": {"name": "hostile"},
            "spec": {"policyName": "hostile",
                "paramRef": {"name": "attack", "namespace": "attacker", "parameterNotFoundAction": "Deny"}}}),
    ));
    // The policy reads its params from the watch cache: armed once the cache has them.
    let arm = |attack: &str| {
        let patch = json!({"data": {"name": attack}}).to_string();
        ok(server.kubectl(
            "kubectl",
            &[
                "patch",
                "configmap",
                "attack",
                "-n",
                "attacker",
                "--type=merge",
                "-p",
                &patch,
            ],
        ));
        eventually("the cache to have the attack", || {
            let cached = server
                .raw()
                .get("/api/v1/namespaces/attacker/configmaps/attack?resourceVersion=0")
                .json();
            (cached["data"]["name"] == attack).then_some(())
        });
    };
    wait_armed(&server, &arm);
    attack_every_path(&server, &arm, false);
}
