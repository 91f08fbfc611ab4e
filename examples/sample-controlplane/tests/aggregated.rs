//! The sample control plane as an extension API server behind `genplane all-in-one`, as
//! upstream's aggregator e2e test runs its sample API server ("Should be able to support the
//! 1.17 Sample API Server using the current Aggregator"), with the sample's Widgets in place
//! of wardle's Flunders: registered by an APIService, available, served through the
//! aggregator to kubectl and kube-rs (every verb, watches, patches of each kind, explain),
//! authorized by the aggregator's RBAC (the sample delegates its decisions), and gone again
//! when the APIService is deleted.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use futures::StreamExt as _;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, WatchEvent, WatchParams};
use serde_json::{Value, json};

use genplane_test_support::clients::kube_client;
use genplane_test_support::process::{Process, ok, output_with_input, text};
use genplane_test_support::{eventually, eventually_holds};

const BIN: &str = env!("CARGO_BIN_EXE_sample-controlplane");

/// The `genplane` executable beside the sample's, built if it is not there yet (a run of this
/// package's tests alone).
fn genplane() -> PathBuf {
    let path = Path::new(BIN).with_file_name("genplane");
    if !path.exists() {
        let built = Command::new(env!("CARGO"))
            .args(["build", "--locked", "-p", "genplane", "--bin", "genplane"])
            .output()
            .unwrap();
        assert!(built.status.success(), "{}", text(&built));
    }
    path
}

/// The port a server's banner names (`... serving on https://127.0.0.1:PORT`).
fn serving_port(process: &mut Process) -> u16 {
    process.wait_for("its serving address", |p| {
        p.output().lines().find_map(|line| {
            let (_, url) = line.split_once(" serving on https://")?;
            url.rsplit_once(':')?.1.trim().parse().ok()
        })
    })
}

/// kubectl with `kubeconfig`, its discovery cached beside it.
fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    let mut command = genplane_test_support::kubectl_command("kubectl", kubeconfig);
    command.args(args);
    output_with_input(command, stdin)
}

fn widgets() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("sample.genplane.io", "v1", "Widget"),
        "widgets",
    )
}

/// The audit records the sample wrote of requests to `path`.
fn audited(log: &Path, path: &str) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| {
            event["requestURI"]
                .as_str()
                .is_some_and(|uri| uri.starts_with(path))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sample_serves_widgets_behind_genplane_all_in_one() {
    let dir = tempfile::tempdir().unwrap();
    let aggregator_data = dir.path().join("aggregator");
    let sample_data = dir.path().join("sample");
    // The certificates first: the sample believes the aggregator's front proxy, and its
    // serving certificate names the Service the APIService will name.
    for (data, sans) in [
        (&aggregator_data, "kubernetes"),
        (&sample_data, "api.sample.svc"),
    ] {
        ok(Command::new(genplane())
            .args(["pki", &format!("--data-dir={}", data.display())])
            .arg(format!("--apiserver-cert-extra-sans={sans}"))
            .arg("--server=https://127.0.0.1:6443")
            .output()
            .unwrap());
    }
    let aggregator_kubeconfig = aggregator_data.join("admin.kubeconfig");
    let audit_log = dir.path().join("sample-audit.log");
    let policy = dir.path().join("audit-policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n",
    )
    .unwrap();

    // The sample, asking the aggregator what its own RBAC leaves open.
    let sample_command = |port: u16| {
        let mut command = Command::new(BIN);
        command
            .args(["--bind-address=127.0.0.1", &format!("--secure-port={port}")])
            .arg(format!("--data-dir={}", sample_data.display()))
            .arg(format!(
                "--requestheader-client-ca-file={}",
                aggregator_data.join("pki/front-proxy-ca.crt").display()
            ))
            .arg("--requestheader-allowed-names=front-proxy-client")
            .arg(format!(
                "--authorization-kubeconfig={}",
                aggregator_kubeconfig.display()
            ))
            .arg(format!(
                "--authentication-kubeconfig={}",
                aggregator_kubeconfig.display()
            ))
            .arg(format!("--audit-policy-file={}", policy.display()))
            .arg(format!("--audit-log-path={}", audit_log.display()));
        command
    };
    let mut sample = Process::spawn(
        "the sample",
        sample_command(0),
        &dir.path().join("sample.log"),
    );
    let sample_port = serving_port(&mut sample);

    // genplane all-in-one, reaching the Service `sample/api` at the sample's address.
    let mut command = Command::new(genplane());
    command
        .args(["all-in-one", "--bind-address=127.0.0.1", "--secure-port=0"])
        .arg(format!("--data-dir={}", aggregator_data.display()))
        .arg(format!(
            "--service-address-override=sample/api:443=127.0.0.1:{sample_port}"
        ));
    let mut aggregator = Process::spawn(
        "genplane all-in-one",
        command,
        &dir.path().join("aggregator.log"),
    );
    serving_port(&mut aggregator);
    let kubeconfig = aggregator_kubeconfig.as_path();
    eventually_holds("the aggregator to be ready", || {
        kubectl(kubeconfig, &["get", "--raw", "/readyz"], None)
            .status
            .success()
    });

    // Registered by an APIService: available, listed beside the Local ones.
    let ca = std::fs::read(sample_data.join("pki/ca.crt")).unwrap();
    let registration = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": "v1.sample.genplane.io"},
        "spec": {"group": "sample.genplane.io", "version": "v1", "groupPriorityMinimum": 2000,
            "versionPriority": 200, "service": {"namespace": "sample", "name": "api"},
            "caBundle": base64_of(&ca)}});
    ok(kubectl(
        kubeconfig,
        &["create", "-f", "-"],
        Some(&registration.to_string()),
    ));
    let table = eventually("the sample's APIService to be available", || {
        let table = text(&kubectl(kubeconfig, &["get", "apiservices"], None));
        table
            .lines()
            .any(|l| {
                l.split_whitespace().take(3).collect::<Vec<_>>()
                    == ["v1.sample.genplane.io", "sample/api", "True"]
            })
            .then_some(table)
    });
    for local in [
        "v1.",
        "v1.rbac.authorization.k8s.io",
        "v1.apiextensions.k8s.io",
    ] {
        assert!(
            table.lines().any(|l| {
                l.split_whitespace().take(3).collect::<Vec<_>>() == [local, "Local", "True"]
            }),
            "{local} in {table}"
        );
    }

    // kubectl finds widgets in the aggregator's discovery, and every verb works through it.
    eventually("widgets in the aggregator's discovery", || {
        let out = kubectl(
            kubeconfig,
            &["api-resources", "--api-group=sample.genplane.io"],
            None,
        );
        (out.status.success() && text(&out).contains("widgets")).then_some(())
    });
    let created = ok(kubectl(
        kubeconfig,
        &["create", "-f", "-"],
        Some(
            "apiVersion: sample.genplane.io/v1\nkind: Widget\nmetadata: {name: w1, namespace: default}\nspec: {size: 3}\n",
        ),
    ));
    assert_eq!(created.trim(), "widget.sample.genplane.io/w1 created");
    let table = ok(kubectl(kubeconfig, &["get", "wg"], None));
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows[0],
        ["NAME", "SIZE", "COLOR", "PHASE", "AGE"],
        "{table}"
    );
    assert_eq!(rows[1][..3], ["w1", "3", "green"], "{table}");
    // Its validation answers through the aggregator, with the field.
    let refused = kubectl(
        kubeconfig,
        &["create", "-f", "-"],
        Some(
            "apiVersion: sample.genplane.io/v1\nkind: Widget\nmetadata: {name: w2, namespace: default}\nspec: {size: 300}\n",
        ),
    );
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("spec.size: Invalid value: 300"),
        "{}",
        text(&refused)
    );
    // JSON and merge patches.
    for (kind, patch, size) in [
        (
            "json",
            r#"[{"op": "replace", "path": "/spec/size", "value": 4}]"#,
            "4",
        ),
        ("merge", r#"{"spec": {"size": 5}}"#, "5"),
    ] {
        ok(kubectl(
            kubeconfig,
            &["patch", "widget", "w1", "--type", kind, "-p", patch],
            None,
        ));
        let got = ok(kubectl(
            kubeconfig,
            &["get", "widget", "w1", "-o", "jsonpath={.spec.size}"],
            None,
        ));
        assert_eq!(got, size, "{kind}");
    }
    // Server-side apply: the color kubectl create set is another manager's until forced.
    let manifest = "apiVersion: sample.genplane.io/v1\nkind: Widget\nmetadata: {name: w1, namespace: default}\nspec: {size: 5, color: blue}\n";
    let conflict = kubectl(
        kubeconfig,
        &[
            "apply",
            "--server-side",
            "--field-manager=tester",
            "-f",
            "-",
        ],
        Some(manifest),
    );
    assert!(!conflict.status.success());
    assert!(
        text(&conflict).contains("conflict with \"kubectl-create\""),
        "{}",
        text(&conflict)
    );
    let applied = ok(kubectl(
        kubeconfig,
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=tester",
            "-f",
            "-",
        ],
        Some(manifest),
    ));
    assert!(applied.contains("serverside-applied"), "{applied}");
    let managers = ok(kubectl(
        kubeconfig,
        &[
            "get",
            "widget",
            "w1",
            "--show-managed-fields",
            "-o",
            "jsonpath={.metadata.managedFields[*].manager}",
        ],
        None,
    ));
    assert!(managers.contains("tester"), "{managers}");
    // kubectl explain reads the sample's OpenAPI through the aggregator.
    let explained = eventually("the sample's OpenAPI document", || {
        let out = kubectl(kubeconfig, &["explain", "widgets.spec.size"], None);
        (out.status.success()).then(|| text(&out))
    });
    assert!(
        explained.contains("How big the widget is, 1 to 100."),
        "{explained}"
    );

    // A watch through the aggregator sees a create made after it began, at once.
    let client = kube_client(kubeconfig).await;
    let api: Api<DynamicObject> = Api::namespaced_with(client, "default", &widgets());
    let listed = api.list(&Default::default()).await.unwrap();
    let version = listed.metadata.resource_version.unwrap();
    let stream = api.watch(&WatchParams::default(), &version).await.unwrap();
    let mut stream = std::pin::pin!(stream);
    ok(kubectl(
        kubeconfig,
        &["create", "-f", "-"],
        Some(
            "apiVersion: sample.genplane.io/v1\nkind: Widget\nmetadata: {name: w3, namespace: default}\nspec: {size: 1}\n",
        ),
    ));
    let event = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("the watch event within 10 s")
        .unwrap()
        .unwrap();
    assert!(
        matches!(&event, WatchEvent::Added(o) if o.metadata.name.as_deref() == Some("w3")),
        "{event:?}"
    );

    // Authorization: genplane refuses alice until its RBAC lets her; then the sample, whose
    // own RBAC knows nothing of her, asks genplane and serves her, seeing her as genplane
    // authenticated her.
    let as_alice = kubectl(kubeconfig, &["get", "widgets", "--as=alice"], None);
    assert!(!as_alice.status.success());
    assert!(
        text(&as_alice).contains("User \"alice\" cannot list resource \"widgets\""),
        "{}",
        text(&as_alice)
    );
    ok(kubectl(
        kubeconfig,
        &[
            "create",
            "clusterrole",
            "widget-reader",
            "--verb=get,list",
            "--resource=widgets.sample.genplane.io",
        ],
        None,
    ));
    ok(kubectl(
        kubeconfig,
        &[
            "create",
            "rolebinding",
            "alice-reads-widgets",
            "--clusterrole=widget-reader",
            "--user=alice",
            "--group=devs",
            "-n",
            "default",
        ],
        None,
    ));
    let names = eventually("alice to read widgets", || {
        let out = kubectl(
            kubeconfig,
            &[
                "get",
                "widgets",
                "--as=alice",
                "--as-group=devs",
                "-o",
                "name",
            ],
            None,
        );
        out.status.success().then(|| text(&out))
    });
    assert!(names.contains("widget.sample.genplane.io/w1"), "{names}");
    let seen = audited(
        &audit_log,
        "/apis/sample.genplane.io/v1/namespaces/default/widgets",
    );
    let alices: Vec<&Value> = seen
        .iter()
        .filter(|e| e["user"]["username"] == "alice")
        .collect();
    assert!(!alices.is_empty(), "{seen:?}");
    let groups = &alices[0]["user"]["groups"];
    assert!(
        groups.as_array().is_some_and(
            |g| g.contains(&json!("devs")) && g.contains(&json!("system:authenticated"))
        ),
        "{groups}"
    );
    // She may read, not write: the sample refuses what genplane allows her not.
    let write = kubectl(
        kubeconfig,
        &["delete", "widget", "w1", "--as=alice", "--as-group=devs"],
        None,
    );
    assert!(!write.status.success());

    // A client's own identity headers mean nothing to the sample.
    let raw = genplane_test_support::clients::Raw::from_kubeconfig(kubeconfig);
    let answer = raw.request(
        "GET",
        "/apis/sample.genplane.io/v1/namespaces/default/widgets/w3",
        &[
            ("X-Remote-User", "mallory"),
            ("X-Remote-Group", "system:masters"),
        ],
        None,
    );
    assert_eq!(answer.status, 200, "{}", answer.text());
    let last = audited(
        &audit_log,
        "/apis/sample.genplane.io/v1/namespaces/default/widgets/w3",
    );
    assert!(
        last.iter().all(|e| e["user"]["username"] != "mallory"),
        "{last:?}"
    );
    assert!(
        last.iter()
            .any(|e| e["user"]["username"] == "genplane-admin"),
        "{last:?}"
    );

    // Stopped, the sample is unavailable and its group answers 503, the rest serving on;
    // started again, it is available again.
    sample.kill();
    let available = |status: &str| {
        let out = kubectl(
            kubeconfig,
            &[
                "get",
                "apiservice",
                "v1.sample.genplane.io",
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Available\")].status}",
            ],
            None,
        );
        text(&out).trim() == status
    };
    eventually_holds("the stopped sample to be unavailable", || {
        available("False")
    });
    let answer = raw.request(
        "GET",
        "/apis/sample.genplane.io/v1/namespaces/default/widgets",
        &[],
        None,
    );
    assert_eq!(answer.status, 503, "{}", answer.text());
    ok(kubectl(kubeconfig, &["get", "namespaces"], None));
    let mut sample = Process::spawn(
        "the sample again",
        sample_command(sample_port),
        &dir.path().join("sample-again.log"),
    );
    serving_port(&mut sample);
    eventually_holds("the restarted sample to be available", || available("True"));
    ok(kubectl(kubeconfig, &["get", "widget", "w1"], None));

    // Deleted through the aggregator, then the APIService itself: the group is gone.
    ok(kubectl(kubeconfig, &["delete", "widget", "w1"], None));
    let gone = kubectl(kubeconfig, &["get", "widget", "w1"], None);
    assert!(text(&gone).contains("NotFound"), "{}", text(&gone));
    ok(kubectl(
        kubeconfig,
        &["delete", "apiservice", "v1.sample.genplane.io"],
        None,
    ));
    eventually_holds("the sample's group to leave discovery", || {
        let out = kubectl(kubeconfig, &["get", "--raw", "/apis"], None);
        out.status.success() && !text(&out).contains("sample.genplane.io")
    });
    let answer = raw.request(
        "GET",
        "/apis/sample.genplane.io/v1/namespaces/default/widgets",
        &[],
        None,
    );
    assert_eq!(answer.status, 404, "{}", answer.text());
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
