//! The admission plugins of the real binary: `--enable-admission-plugins` and
//! `--disable-admission-plugins` with upstream's names, what each implemented plugin does to a
//! write made with kubectl, and a configuration error for names that do not exist; admission
//! webhooks registered with kubectl and served by an HTTPS server in the test; ResourceQuota
//! refusing creates over a quota, also under concurrent creates.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ResourceQuota};
use kube::api::PostParams;
use serde_json::{Value, json};

use crate::support::webhook::Webhook;
use crate::support::{
    Apiserver, BIN, ControllerManager, eventually, eventually_async, free_port, ok, start,
    start_with, text,
};

#[test]
fn unknown_and_unavailable_plugins_are_configuration_errors() {
    for (flag, expected) in [
        (
            "--enable-admission-plugins=NamespaceLifecycle,NoSuchPlugin",
            "admission plugin \"NoSuchPlugin\" is unknown; known plugins: AlwaysAdmit, NamespaceAutoProvision, NamespaceLifecycle",
        ),
        (
            "--disable-admission-plugins=NoSuchPlugin",
            "admission plugin \"NoSuchPlugin\" is unknown",
        ),
        (
            "--enable-admission-plugins=EventRateLimit",
            "admission plugin \"EventRateLimit\" is not available in genplane yet",
        ),
        (
            "--admission-control-config-file=/nonexistent/admission.yaml",
            "admission-control-config-file: reading /nonexistent/admission.yaml",
        ),
        ("--enable-admission-plugins=ValidatingAdmissionWebhook", ""),
        ("--enable-admission-plugins=AlwaysDeny", ""),
    ] {
        let output = Command::new(BIN)
            .args(["apiserver", "--config-check", flag])
            .output()
            .unwrap();
        let said = text(&output);
        if expected.is_empty() {
            assert_eq!(output.status.code(), Some(0), "{flag}: {said}");
        } else {
            assert_eq!(output.status.code(), Some(64), "{flag}: {said}");
            assert!(said.contains(expected), "{flag}: {said}");
        }
    }
}

#[test]
fn the_enabled_plugins_admit_writes_as_upstreams() {
    // NamespaceAutoProvision instead of NamespaceLifecycle: a create in a missing namespace
    // creates it.
    let server = start_with(&[
        "--enable-admission-plugins=NamespaceAutoProvision",
        "--disable-admission-plugins=NamespaceLifecycle",
    ]);
    ok(server.kubectl(
        "kubectl",
        &[
            "create",
            "configmap",
            "c",
            "-n",
            "fresh",
            "--from-literal=k=v",
        ],
    ));
    let namespace = ok(server.kubectl("kubectl", &["get", "namespace", "fresh", "-o", "name"]));
    assert_eq!(namespace.trim(), "namespace/fresh");
    // Without NamespaceLifecycle, the namespaces every cluster needs may be deleted too (as
    // upstream, which protects them in that plugin only): not tried here.
    drop(server);

    // AlwaysDeny refuses every write, reads still work.
    let server = start_with(&["--enable-admission-plugins=AlwaysDeny"]);
    let refused = server.kubectl(
        "kubectl",
        &["create", "configmap", "c", "--from-literal=k=v"],
    );
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("admission control is denying all modifications"),
        "{}",
        text(&refused)
    );
    ok(server.kubectl("kubectl", &["get", "namespaces"]));

    // The default, NamespaceLifecycle: no content in a missing namespace, default not deleted.
    let server = start_with(&[]);
    let missing = server.kubectl(
        "kubectl",
        &[
            "create",
            "configmap",
            "c",
            "-n",
            "nowhere",
            "--from-literal=k=v",
        ],
    );
    assert!(
        text(&missing).contains("namespaces \"nowhere\" not found"),
        "{}",
        text(&missing)
    );
    let immortal = server.kubectl("kubectl", &["delete", "namespace", "default"]);
    assert!(
        text(&immortal).contains("this namespace may not be deleted"),
        "{}",
        text(&immortal)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_admission_configuration_gives_webhooks_credentials_and_limits_resources() {
    // the webhook admits everything and keeps the Authorization header it was sent
    let sent: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
    let record = sent.clone();
    let webhook = Webhook::start(move |call| {
        record.lock().unwrap().push(call.authorization);
        let review: Value = serde_json::from_slice(&call.body).unwrap();
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
               "response": {"uid": review["request"]["uid"], "allowed": true}})
    });
    let dir = tempfile::tempdir().unwrap();
    let host = webhook.base.trim_start_matches("https://");
    let kubeconfig = dir.path().join("webhooks.kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nusers:\n- name: '{host}'\n  user: {{token: for-this-webhook}}\n- name: '*'\n  user: {{token: for-any-other}}\n"
        ),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("quota.yaml"),
        "apiVersion: apiserver.config.k8s.io/v1\nkind: ResourceQuotaConfiguration\nlimitedResources:\n- resource: secrets\n  matchContains: [secrets]\n",
    )
    .unwrap();
    let configuration = dir.path().join("admission.yaml");
    std::fs::write(
        &configuration,
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: ValidatingAdmissionWebhook\n  configuration:\n    apiVersion: apiserver.config.k8s.io/v1\n    kind: WebhookAdmissionConfiguration\n    kubeConfigFile: {}\n- name: ResourceQuota\n  path: quota.yaml\n",
            kubeconfig.display()
        ),
    )
    .unwrap();
    let flag = format!(
        "--admission-control-config-file={}",
        configuration.display()
    );
    let server = start_with(&[&flag]);
    let _cm = ControllerManager::start(
        &server,
        "cm.log",
        &["--controllers=resourcequota", "--leader-elect=false"],
    );

    // the validating webhook is sent the token of the user named by its host and port
    let manifest = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "credentials"},
        "webhooks": [{
            "name": "credentials.example.com",
            "clientConfig": {
                "url": format!("{}/validate", webhook.base),
                "caBundle": base64::engine::general_purpose::STANDARD.encode(&webhook.ca_pem),
            },
            "rules": rules(),
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        }],
    });
    ok(kubectl_stdin(&server, &["apply", "-f", "-"], &manifest));
    eventually("the webhook is called", || {
        let _ = server.kubectl(
            "kubectl",
            &["create", "configmap", "seen", "--from-literal=k=v"],
        );
        (!sent.lock().unwrap().is_empty()).then_some(())
    });
    assert!(
        sent.lock()
            .unwrap()
            .iter()
            .all(|a| a.as_deref() == Some("Bearer for-this-webhook")),
        "{:?}",
        sent.lock().unwrap()
    );

    // Secrets are limited by default: refused where no quota covers them
    let create_secret = |namespace: &str| {
        server.kubectl(
            "kubectl",
            &[
                "create",
                "secret",
                "generic",
                "s",
                "-n",
                namespace,
                "--from-literal=k=v",
            ],
        )
    };
    ok(server.kubectl("kubectl", &["create", "namespace", "limited"]));
    let refused = create_secret("limited");
    assert!(
        text(&refused).contains(
            "secrets \"s\" is forbidden: insufficient quota to consume: count/secrets,secrets"
        ),
        "{}",
        text(&refused)
    );
    // a quota covering one of the two names is not enough
    ok(server.kubectl(
        "kubectl",
        &[
            "create",
            "quota",
            "half",
            "-n",
            "limited",
            "--hard=count/secrets=5",
        ],
    ));
    eventually("the quota covers count/secrets", || {
        let refused = create_secret("limited");
        text(&refused)
            .contains("insufficient quota to consume: secrets")
            .then_some(())
    });
    ok(server.kubectl(
        "kubectl",
        &[
            "create",
            "quota",
            "whole",
            "-n",
            "limited",
            "--hard=secrets=5",
        ],
    ));
    eventually("the quotas cover Secrets", || {
        create_secret("limited").status.success().then_some(())
    });
    // other namespaces' Secrets are limited too; other resources are not
    ok(server.kubectl(
        "kubectl",
        &[
            "create",
            "configmap",
            "free",
            "-n",
            "limited",
            "--from-literal=k=v",
        ],
    ));
    let refused = create_secret("default");
    assert!(
        text(&refused).contains("insufficient quota to consume"),
        "{}",
        text(&refused)
    );
}

/// What the test's webhook server saw: the requests of each path (`/validate`, `/mutate`).
type Seen = Arc<Mutex<BTreeMap<String, Vec<Value>>>>;

/// The test's webhooks: `/validate` refuses ConfigMaps named `bad-*` (403, with a message)
/// and warns on the others; `/mutate` adds the label `mutated: "yes"` with a JSON patch.
fn webhook_server() -> (Webhook, Seen) {
    let seen: Seen = Arc::default();
    let record = seen.clone();
    let server = Webhook::start(move |call| {
        let review: Value = serde_json::from_slice(&call.body).unwrap();
        let request = review["request"].clone();
        let path = call.path.split('?').next().unwrap().to_owned();
        let uid = request["uid"].clone();
        let name = request["name"].as_str().unwrap_or_default().to_owned();
        let has_labels = request["object"]["metadata"]["labels"].is_object();
        record
            .lock()
            .unwrap()
            .entry(path.clone())
            .or_default()
            .push(request);
        let response = match path.as_str() {
            "/validate" if name.starts_with("bad-") => json!({
                "uid": uid, "allowed": false,
                "status": {"code": 403, "message": "names starting with bad- are refused"},
            }),
            "/validate" => {
                json!({"uid": uid, "allowed": true, "warnings": ["validated by the test"]})
            }
            _ => {
                let patch = if has_labels {
                    json!([{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}])
                } else {
                    json!([{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}])
                };
                let patch = base64::engine::general_purpose::STANDARD.encode(patch.to_string());
                json!({"uid": uid, "allowed": true, "patchType": "JSONPatch", "patch": patch})
            }
        };
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
    });
    (server, seen)
}

fn calls(seen: &Seen, path: &str) -> usize {
    seen.lock().unwrap().get(path).map_or(0, Vec::len)
}

/// Runs kubectl with `manifest` on its standard input (`-f -`).
pub(crate) fn kubectl_stdin(server: &Apiserver, args: &[&str], manifest: &Value) -> Output {
    let mut command = crate::support::kubectl_command("kubectl", server.kubeconfig());
    command.args(args);
    genplane_test_support::process::output_with_input(command, Some(&manifest.to_string()))
}

fn configmap(name: &str, namespace: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace, "labels": labels}, "data": {"k": "v"}})
}

fn rules() -> Value {
    json!([{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}])
}

#[test]
fn admission_webhooks_act_on_writes_as_upstreams() {
    let (hooks, seen) = webhook_server();
    let ca = base64::engine::general_purpose::STANDARD.encode(&hooks.ca_pem);
    let server = start();
    for (namespace, labels) in [
        ("hooked", json!({"env": "test"})),
        ("other", json!({})),
        ("down-ignore", json!({"down": "ignore"})),
        ("down-fail", json!({"down": "fail"})),
    ] {
        ok(kubectl_stdin(
            &server,
            &["create", "-f", "-"],
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": labels}}),
        ));
    }

    // A Service reference is checked as upstream checks it (its call goes through the service
    // resolver: see admission_webhook_client).
    let service = kubectl_stdin(
        &server,
        &["create", "-f", "-"],
        &json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "by-service"},
            "webhooks": [{"name": "svc.genplane.test", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                "clientConfig": {"service": {"namespace": "default", "name": "hook", "port": 0}}, "rules": rules()}]}),
    );
    assert!(
        text(&service).contains(
            "webhooks[0].clientConfig.service.port: Invalid value: 0: port is not valid: must be between 1 and 65535, inclusive"
        ),
        "{}",
        text(&service)
    );

    // Validating: names bad-* refused in namespaces labelled env=test, unless a match
    // condition exempts them; registered with server-side apply.
    ok(kubectl_stdin(
        &server,
        &["apply", "--server-side", "-f", "-"],
        &json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "deny-bad"},
            "webhooks": [{"name": "deny.genplane.test", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                "clientConfig": {"url": format!("{}/validate", hooks.base), "caBundle": ca},
                "rules": rules(), "namespaceSelector": {"matchLabels": {"env": "test"}},
                "matchConditions": [{"name": "not-exempt", "expression": "!object.metadata.name.startsWith('bad-exempt')"}]}]}),
    ));
    // Mutating: a label on every ConfigMap created without the label skip-mutation.
    ok(kubectl_stdin(
        &server,
        &["create", "-f", "-"],
        &json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "label"},
            "webhooks": [{"name": "label.genplane.test", "sideEffects": "NoneOnDryRun", "admissionReviewVersions": ["v1"],
                "clientConfig": {"url": format!("{}/mutate", hooks.base), "caBundle": ca},
                "rules": rules(),
                "objectSelector": {"matchExpressions": [{"key": "skip-mutation", "operator": "DoesNotExist"}]}}]}),
    ));
    // Defaulted and shown as upstream shows them.
    let listed = ok(server.kubectl("kubectl", &["get", "validatingwebhookconfigurations"]));
    assert!(listed.starts_with("NAME"), "{listed}");
    assert!(listed.contains("WEBHOOKS"), "{listed}");
    let stored: Value = serde_json::from_str(&ok(server.kubectl(
        "kubectl",
        &["get", "mutatingwebhookconfiguration", "label", "-o", "json"],
    )))
    .unwrap();
    let hook = &stored["webhooks"][0];
    assert_eq!(
        (
            &hook["failurePolicy"],
            &hook["timeoutSeconds"],
            &hook["reinvocationPolicy"],
            &hook["rules"][0]["scope"]
        ),
        (&json!("Fail"), &json!(10), &json!("Never"), &json!("*"))
    );
    let explained = ok(server.kubectl(
        "kubectl",
        &[
            "explain",
            "validatingwebhookconfigurations.webhooks.sideEffects",
        ],
    ));
    assert!(explained.contains("sideEffects"), "{explained}");

    // The webhooks see a configuration once the API server's cache has it: wait for the
    // refusal, with a new name each time.
    let mut attempt = 0;
    let refused = eventually("the validating webhook to refuse", || {
        attempt += 1;
        let name = format!("bad-{attempt}");
        let output = server.kubectl("kubectl", &["create", "configmap", &name, "-n", "hooked"]);
        (!output.status.success()).then(|| text(&output))
    });
    assert!(
        refused.contains("admission webhook \"deny.genplane.test\" denied the request: names starting with bad- are refused"),
        "{refused}"
    );
    eventually("the mutating webhook to label", || {
        attempt += 1;
        let name = format!("probe-{attempt}");
        ok(server.kubectl("kubectl", &["create", "configmap", &name, "-n", "other"]));
        let labels = ok(server.kubectl(
            "kubectl",
            &[
                "get",
                "configmap",
                &name,
                "-n",
                "other",
                "-o",
                "jsonpath={.metadata.labels}",
            ],
        ));
        labels.contains("mutated").then_some(())
    });

    // Admitted: mutated and stored, with the validating webhook's warning for kubectl.
    let good = server.kubectl("kubectl", &["create", "configmap", "good", "-n", "hooked"]);
    assert!(good.status.success(), "{}", text(&good));
    assert!(
        String::from_utf8_lossy(&good.stderr).contains("Warning: validated by the test"),
        "{}",
        text(&good)
    );
    let label = ok(server.kubectl(
        "kubectl",
        &[
            "get",
            "configmap",
            "good",
            "-n",
            "hooked",
            "-o",
            "jsonpath={.metadata.labels.mutated}",
        ],
    ));
    assert_eq!(label, "yes");

    // What does not match is not sent: another namespace (namespaceSelector), a match
    // condition, another resource (rules), a label (objectSelector).
    let validated = calls(&seen, "/validate");
    ok(server.kubectl(
        "kubectl",
        &["create", "configmap", "bad-elsewhere", "-n", "other"],
    ));
    ok(server.kubectl(
        "kubectl",
        &["create", "configmap", "bad-exempt", "-n", "hooked"],
    ));
    assert_eq!(calls(&seen, "/validate"), validated);
    let mutated = calls(&seen, "/mutate");
    ok(server.kubectl(
        "kubectl",
        &["create", "secret", "generic", "bad-secret", "-n", "hooked"],
    ));
    ok(kubectl_stdin(
        &server,
        &["create", "-f", "-"],
        &configmap("skipped", "other", json!({"skip-mutation": "1"})),
    ));
    assert_eq!(calls(&seen, "/mutate"), mutated);
    assert_eq!(calls(&seen, "/validate"), validated);
    let labels = ok(server.kubectl(
        "kubectl",
        &[
            "get",
            "configmap",
            "skipped",
            "-n",
            "other",
            "-o",
            "jsonpath={.metadata.labels}",
        ],
    ));
    assert!(!labels.contains("mutated"), "{labels}");

    // A dry run goes to webhooks without side effects, marked as a dry run; nothing is stored.
    let dry = ok(server.kubectl(
        "kubectl",
        &[
            "create",
            "configmap",
            "dry",
            "-n",
            "hooked",
            "--dry-run=server",
            "-o",
            "jsonpath={.metadata.labels.mutated}",
        ],
    ));
    assert_eq!(dry, "yes");
    let last_mutation = seen.lock().unwrap()["/mutate"].last().cloned().unwrap();
    assert_eq!(last_mutation["dryRun"], true);
    assert_eq!(last_mutation["name"], "dry");
    assert_eq!(last_mutation["namespace"], "hooked");
    assert_eq!(last_mutation["operation"], "CREATE");
    assert_eq!(last_mutation["userInfo"]["username"], "genplane-admin");
    let absent = server.kubectl("kubectl", &["get", "configmap", "dry", "-n", "hooked"]);
    assert!(!absent.status.success());

    // A webhook that cannot be reached: Ignore admits, Fail refuses.
    let down = format!("https://127.0.0.1:{}/down", free_port());
    let unreachable = |name: &str, policy: &str, value: &str| {
        json!({"name": name, "sideEffects": "None", "admissionReviewVersions": ["v1"], "failurePolicy": policy,
            "clientConfig": {"url": down, "caBundle": ca}, "rules": rules(),
            "namespaceSelector": {"matchLabels": {"down": value}}})
    };
    ok(kubectl_stdin(
        &server,
        &["create", "-f", "-"],
        &json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "down"},
            "webhooks": [unreachable("ignore.genplane.test", "Ignore", "ignore"), unreachable("fail.genplane.test", "Fail", "fail")]}),
    ));
    let failed = eventually("the unreachable webhook to refuse", || {
        attempt += 1;
        let name = format!("c-{attempt}");
        let output = server.kubectl(
            "kubectl",
            &["create", "configmap", &name, "-n", "down-fail"],
        );
        (!output.status.success()).then(|| text(&output))
    });
    assert!(
        failed.contains("Internal error occurred: failed calling webhook \"fail.genplane.test\": failed to call webhook: Post"),
        "{failed}"
    );
    ok(server.kubectl(
        "kubectl",
        &["create", "configmap", "admitted", "-n", "down-ignore"],
    ));
}

/// The quota's `status.used`, once the quota controller has written it.
async fn quota_used(quotas: &kube::Api<ResourceQuota>, name: &str) -> BTreeMap<String, String> {
    let quota = quotas.get(name).await.unwrap();
    quota
        .status
        .and_then(|s| s.used)
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .collect()
}

async fn wait_used(quotas: &kube::Api<ResourceQuota>, name: &str, want: &[(&str, &str)]) {
    let want: BTreeMap<String, String> = want
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    eventually_async("the quota's status.used", || async {
        (quota_used(quotas, name).await == want).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn resource_quotas_refuse_creates_over_their_limits() {
    let server = start();
    let _cm = ControllerManager::start(
        &server,
        "cm.log",
        &["--controllers=resourcequota", "--leader-elect=false"],
    );
    let client = server.client().await;
    let create_namespace = |name: String| {
        let namespaces = kube::Api::<Namespace>::all(client.clone());
        async move {
            let ns = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
            namespaces
                .create(&PostParams::default(), &ns)
                .await
                .unwrap();
        }
    };

    // kubectl: a quota of three ConfigMaps and one Lease; the fourth ConfigMap is refused
    // with upstream's message, the second Lease too (a group's resource).
    create_namespace("limited".to_owned()).await;
    ok(server.kubectl(
        "kubectl",
        &[
            "create",
            "quota",
            "three",
            "-n",
            "limited",
            "--hard=configmaps=3,count/leases.coordination.k8s.io=1",
        ],
    ));
    let quotas = kube::Api::<ResourceQuota>::namespaced(client.clone(), "limited");
    wait_used(
        &quotas,
        "three",
        &[
            ("configmaps", "0"),
            ("count/leases.coordination.k8s.io", "0"),
        ],
    )
    .await;
    for name in ["one", "two", "three"] {
        ok(server.kubectl("kubectl", &["create", "configmap", name, "-n", "limited"]));
    }
    let refused = server.kubectl("kubectl", &["create", "configmap", "four", "-n", "limited"]);
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains(
            "configmaps \"four\" is forbidden: exceeded quota: three, requested: configmaps=1, used: configmaps=3, limited: configmaps=3"
        ),
        "{}",
        text(&refused)
    );
    let leases = kube::Api::<Lease>::namespaced(client.clone(), "limited");
    let lease =
        |name: &str| serde_json::from_value::<Lease>(json!({"metadata": {"name": name}})).unwrap();
    leases
        .create(&PostParams::default(), &lease("a"))
        .await
        .unwrap();
    let second = leases
        .create(&PostParams::default(), &lease("b"))
        .await
        .unwrap_err();
    assert!(
        matches!(&second, kube::Error::Api(s) if s.code == 403 && s.message == "leases.coordination.k8s.io \"b\" is forbidden: exceeded quota: three, requested: count/leases.coordination.k8s.io=1, used: count/leases.coordination.k8s.io=1, limited: count/leases.coordination.k8s.io=1"),
        "{second:?}"
    );
    // A delete gives the charge back (the controller recounts), and the next create fits.
    ok(server.kubectl("kubectl", &["delete", "configmap", "two", "-n", "limited"]));
    wait_used(
        &quotas,
        "three",
        &[
            ("configmaps", "2"),
            ("count/leases.coordination.k8s.io", "1"),
        ],
    )
    .await;
    ok(server.kubectl("kubectl", &["create", "configmap", "four", "-n", "limited"]));

    // Ten concurrent creates against a quota of three admit exactly three, every time.
    for round in 0..5 {
        let namespace = format!("race-{round}");
        create_namespace(namespace.clone()).await;
        let quotas = kube::Api::<ResourceQuota>::namespaced(client.clone(), &namespace);
        let quota = serde_json::from_value(
            json!({"metadata": {"name": "three"}, "spec": {"hard": {"count/configmaps": "3"}}}),
        )
        .unwrap();
        quotas.create(&PostParams::default(), &quota).await.unwrap();
        wait_used(&quotas, "three", &[("count/configmaps", "0")]).await;
        let config_maps = kube::Api::<ConfigMap>::namespaced(client.clone(), &namespace);
        let creates = (0..10).map(|i| {
            let config_maps = config_maps.clone();
            tokio::spawn(async move {
                let cm = serde_json::from_value(json!({"metadata": {"name": format!("cm-{i}")}}))
                    .unwrap();
                config_maps.create(&PostParams::default(), &cm).await
            })
        });
        let results: Vec<_> = futures::future::join_all(creates)
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        let admitted = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(admitted, 3, "round {round}: {results:?}");
        for refusal in results.iter().filter_map(|r| r.as_ref().err()) {
            assert!(
                matches!(refusal, kube::Error::Api(s) if s.code == 403 && s.message.contains("exceeded quota: three, requested: count/configmaps=1, used: count/configmaps=3, limited: count/configmaps=3")),
                "round {round}: {refusal:?}"
            );
        }
        let stored = config_maps.list(&Default::default()).await.unwrap();
        assert_eq!(stored.items.len(), 3, "round {round}");
        assert_eq!(
            quota_used(&quotas, "three").await,
            BTreeMap::from([("count/configmaps".to_owned(), "3".to_owned())])
        );
    }
}

#[test]
fn validating_admission_policies_are_served_as_upstreams() {
    let server = start();
    // The documentation's layout applies unchanged; defaults as upstream's.
    let manifest = crate::support::fixture("admission/validating-admission-policy.yaml");
    let path = server.dir.path().join("policy.yaml");
    std::fs::write(&path, manifest).unwrap();
    let applied = ok(server.kubectl("kubectl", &["apply", "-f", path.to_str().unwrap()]));
    assert!(
        applied.contains("validatingadmissionpolicy.admissionregistration.k8s.io/small-configmaps.genplane.test created")
            && applied.contains("validatingadmissionpolicybinding.admissionregistration.k8s.io/small-configmaps-qa.genplane.test created"),
        "{applied}"
    );
    // Applied again: unchanged.
    let again = ok(server.kubectl("kubectl", &["apply", "-f", path.to_str().unwrap()]));
    assert!(again.contains("unchanged"), "{again}");
    let policies = ok(server.kubectl("kubectl", &["get", "validatingadmissionpolicies"]));
    let header: Vec<&str> = policies
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "VALIDATIONS", "PARAMKIND", "AGE"],
        "{policies}"
    );
    assert!(
        policies.contains("small-configmaps.genplane.test   1             v1/ConfigMap"),
        "{policies}"
    );
    let bindings = ok(server.kubectl("kubectl", &["get", "validatingadmissionpolicybindings"]));
    assert!(
        bindings.contains("small-configmaps.genplane.test")
            && bindings.contains("default/configmap-limits"),
        "{bindings}"
    );
    let stored: Value = serde_json::from_str(&ok(server.kubectl(
        "kubectl",
        &[
            "get",
            "validatingadmissionpolicy",
            "small-configmaps.genplane.test",
            "-o",
            "json",
        ],
    )))
    .unwrap();
    assert_eq!(stored["metadata"]["generation"], 1);
    assert_eq!(
        stored["spec"]["matchConstraints"]["matchPolicy"],
        "Equivalent"
    );
    assert_eq!(
        stored["spec"]["matchConstraints"]["resourceRules"][0]["scope"],
        "*"
    );
    let explained = ok(server.kubectl(
        "kubectl",
        &[
            "explain",
            "validatingadmissionpolicies.spec.validations.messageExpression",
        ],
    ));
    assert!(explained.contains("messageExpression"), "{explained}");
    // Validation as upstream's.
    let refused = kubectl_stdin(
        &server,
        &["create", "-f", "-"],
        &json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": "both"},
            "spec": {"policyName": "small-configmaps.genplane.test", "validationActions": ["Deny", "Warn"]}}),
    );
    assert!(
        text(&refused).contains("spec.validationActions: Invalid value: [\"Deny\",\"Warn\"]: must not contain both Deny and Warn"),
        "{}",
        text(&refused)
    );
}

/// `kubectl create configmap NAME -n NAMESPACE` with `keys` keys (`extra` flags added).
fn create_configmap(
    server: &Apiserver,
    name: &str,
    namespace: &str,
    keys: usize,
    extra: &[&str],
) -> Output {
    let literals: Vec<String> = (0..keys)
        .map(|i| format!("--from-literal=k{i}=v"))
        .collect();
    let mut args = vec!["create", "configmap", name, "-n", namespace];
    args.extend(literals.iter().map(String::as_str));
    args.extend_from_slice(extra);
    server.kubectl("kubectl", &args)
}

#[test]
fn validating_admission_policies_refuse_warn_and_fail_as_upstreams() {
    let server = start();
    let manifest = crate::support::fixture("admission/validating-admission-policy.yaml");
    let path = server.dir.path().join("policy.yaml");
    std::fs::write(&path, manifest).unwrap();
    ok(server.kubectl("kubectl", &["apply", "-f", path.to_str().unwrap()]));
    ok(server.kubectl("kubectl", &["create", "namespace", "qa"]));
    ok(server.kubectl("kubectl", &["label", "namespace", "qa", "stage=qa"]));
    ok(server.kubectl("kubectl", &["create", "namespace", "dev"]));
    // The binding's param is missing and parameterNotFoundAction is Deny: refused.
    let denied = "configmaps \"big\" is forbidden: ValidatingAdmissionPolicy 'small-configmaps.genplane.test' with binding 'small-configmaps-qa.genplane.test' denied request:";
    let missing = eventually("the policy to refuse without its param", || {
        let out = create_configmap(&server, "big", "qa", 1, &["--dry-run=server"]);
        (!out.status.success()).then(|| text(&out))
    });
    assert!(
        missing.contains(&format!("{denied} failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction")),
        "{missing}"
    );
    ok(server.kubectl(
        "kubectl",
        &[
            "create",
            "configmap",
            "configmap-limits",
            "-n",
            "default",
            "--from-literal=maxKeys=2",
        ],
    ));
    // With the param: the policy's message, its reason (Forbidden).
    let refused = eventually("the policy to read its param", || {
        let out = create_configmap(&server, "big", "qa", 3, &[]);
        let said = text(&out);
        (!out.status.success() && !said.contains("no params found")).then_some(said)
    });
    assert!(
        refused.contains(&format!("{denied} a ConfigMap may hold at most 2 keys")),
        "{refused}"
    );
    // The reason reaches kubectl: Forbidden (403).
    let big = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big", "namespace": "qa"},
        "data": {"a": "1", "b": "2", "c": "3"}});
    let out = kubectl_stdin(&server, &["create", "-f", "-"], &big);
    assert!(
        text(&out).contains(&format!("Error from server (Forbidden): error when creating \"STDIN\": {denied} a ConfigMap may hold at most 2 keys")),
        "{}",
        text(&out)
    );
    ok(create_configmap(&server, "small", "qa", 2, &[]));
    // The namespace selector: dev is not stage=qa.
    ok(create_configmap(&server, "big", "dev", 3, &[]));
    // Warn: admitted, with kubectl showing the warning.
    let warn = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "warn"},
        "spec": {"policyName": "small-configmaps.genplane.test", "validationActions": ["Warn"],
            "paramRef": {"name": "configmap-limits", "namespace": "default", "parameterNotFoundAction": "Deny"},
            "matchResources": {"namespaceSelector": {"matchExpressions": [{"key": "stage", "operator": "DoesNotExist"}]}}}});
    ok(kubectl_stdin(&server, &["create", "-f", "-"], &warn));
    let warning = "Warning: Validation failed for ValidatingAdmissionPolicy 'small-configmaps.genplane.test' with binding 'warn': a ConfigMap may hold at most 2 keys";
    eventually("the Warn binding to warn", || {
        let out = create_configmap(&server, "warned", "dev", 3, &["--dry-run=server"]);
        assert!(out.status.success(), "{}", text(&out));
        String::from_utf8_lossy(&out.stderr)
            .contains(warning)
            .then_some(())
    });
    let out = create_configmap(&server, "warned", "dev", 3, &[]);
    assert!(
        out.status.success() && text(&out).contains(warning),
        "{}",
        text(&out)
    );
    // A runtime error: Fail refuses, Ignore admits.
    let failing = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "runtime-error"},
        "spec": {"failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["configmaps"]}],
                "objectSelector": {"matchLabels": {"test": "runtime"}}},
            "validations": [{"expression": "object.data.missing == 'x'"}]}});
    ok(kubectl_stdin(&server, &["create", "-f", "-"], &failing));
    let bind = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "runtime-error"},
        "spec": {"policyName": "runtime-error", "validationActions": ["Deny"]}});
    ok(kubectl_stdin(&server, &["create", "-f", "-"], &bind));
    let labelled = |name: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "dev", "labels": {"test": "runtime"}}, "data": {"k": "v"}})
    };
    let failed = eventually("the failing policy to refuse", || {
        let out = kubectl_stdin(&server, &["create", "-f", "-"], &labelled("failing"));
        (!out.status.success()).then(|| text(&out))
    });
    assert!(
        // kubectl shows an Invalid (422) refusal by its cause, as with upstream's
        failed.contains("The configmaps \"failing\" is invalid: : ValidatingAdmissionPolicy 'runtime-error' with binding 'runtime-error' denied request: expression 'object.data.missing == 'x'' resulted in error: no such key: missing"),
        "{failed}"
    );
    ok(server.kubectl(
        "kubectl",
        &[
            "patch",
            "validatingadmissionpolicy",
            "runtime-error",
            "--type=merge",
            "-p",
            r#"{"spec":{"failurePolicy":"Ignore"}}"#,
        ],
    ));
    eventually("the ignoring policy to admit", || {
        kubectl_stdin(&server, &["create", "-f", "-"], &labelled("ignored"))
            .status
            .success()
            .then_some(())
    });
}

#[test]
fn validating_admission_policy_status_reports_type_errors() {
    let server = start();
    let policy = |expression: &str| {
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": "typed"},
            "spec": {"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                    "operations": ["CREATE"], "resources": ["configmaps"]}]},
                "validations": [{"expression": expression,
                    "messageExpression": "'at most ' + params.data.max"}]}})
    };
    ok(kubectl_stdin(
        &server,
        &["create", "-f", "-"],
        &policy("object.spec.replicas <= 3"),
    ));
    let status = |server: &Apiserver| -> Value {
        serde_json::from_str(&ok(server.kubectl(
            "kubectl",
            &["get", "validatingadmissionpolicy", "typed", "-o", "json"],
        )))
        .unwrap()
    };
    let checked = eventually("the type check of generation 1", || {
        let policy = status(&server);
        (policy["status"]["observedGeneration"] == 1).then_some(policy)
    });
    assert_eq!(
        checked["status"]["typeChecking"]["expressionWarnings"],
        json!([{"fieldRef": "spec.validations[0].expression",
            "warning": "/v1, Kind=ConfigMap: ERROR: <input>:1:7: undefined field 'spec'\n"}]),
        "{checked}"
    );
    // Fixed: generation 2 has no warnings.
    ok(kubectl_stdin(
        &server,
        &["apply", "-f", "-"],
        &policy("size(object.data) <= int(params.data.max)"),
    ));
    let fixed = eventually("the type check of generation 2", || {
        let policy = status(&server);
        (policy["status"]["observedGeneration"] == 2).then_some(policy)
    });
    assert_eq!(fixed["status"]["typeChecking"], json!({}), "{fixed}");
    // Ill-typed: a number compared with a string (cel-go's checker's words).
    ok(kubectl_stdin(
        &server,
        &["apply", "-f", "-"],
        &policy("object.data.size() <= 'three'"),
    ));
    let ill_typed = eventually("the type check of generation 3", || {
        let policy = status(&server);
        (policy["status"]["observedGeneration"] == 3).then_some(policy)
    });
    assert_eq!(
        ill_typed["status"]["typeChecking"]["expressionWarnings"],
        json!([{"fieldRef": "spec.validations[0].expression",
            "warning": "/v1, Kind=ConfigMap: ERROR: <input>:1:20: found no matching overload for '_<=_' applied to '(int, string)'\n"}]),
        "{ill_typed}"
    );
}

#[test]
fn validating_admission_policies_read_custom_resource_params() {
    let server = start();
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "limits.genplane.test"},
        "spec": {"group": "genplane.test", "scope": "Cluster",
            "names": {"plural": "limits", "singular": "limit", "kind": "Limit"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"maxKeys": {"type": "integer"}}}}}}}]}});
    ok(kubectl_stdin(&server, &["create", "-f", "-"], &crd));
    server.wait_established("limits.genplane.test");
    let limit = json!({"apiVersion": "genplane.test/v1", "kind": "Limit",
        "metadata": {"name": "strict"}, "spec": {"maxKeys": 1}});
    eventually("the Limit kind to be served", || {
        kubectl_stdin(&server, &["create", "-f", "-"], &limit)
            .status
            .success()
            .then_some(())
    });
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "limited"},
        "spec": {"paramKind": {"apiVersion": "genplane.test/v1", "kind": "Limit"},
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["configmaps"]}]},
            "validations": [{"expression": "size(object.data) <= params.spec.maxKeys",
                "messageExpression": "'at most ' + string(params.spec.maxKeys) + ' keys (' + params.metadata.name + ')'"}]}});
    let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "limited"},
        "spec": {"policyName": "limited", "validationActions": ["Deny"],
            "paramRef": {"name": "strict", "parameterNotFoundAction": "Deny"}}});
    ok(kubectl_stdin(&server, &["create", "-f", "-"], &policy));
    ok(kubectl_stdin(&server, &["create", "-f", "-"], &binding));
    let refused = eventually("the policy to read its custom resource param", || {
        let out = create_configmap(&server, "two", "default", 2, &[]);
        (!out.status.success()).then(|| text(&out))
    });
    assert!(
        refused.contains("ValidatingAdmissionPolicy 'limited' with binding 'limited' denied request: at most 1 keys (strict)"),
        "{refused}"
    );
    ok(create_configmap(&server, "one", "default", 1, &[]));
}
