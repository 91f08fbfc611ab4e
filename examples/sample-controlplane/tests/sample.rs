//! The sample control plane as its users see it: started as a process, used with kubectl and
//! with a kube-rs client (create, get, list, watch, status update, server-side apply) on its
//! own kind, and nothing served that it did not ask for.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Instant;

use futures::StreamExt as _;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
    WatchEvent, WatchParams,
};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_sample-controlplane");
use genplane_component_base::config::Invalid;
use genplane_component_base::featuregate::UseIdentity;
use genplane_component_base::notify::Notifier;
use genplane_component_base::shutdown::Shutdown;
use genplane_controller::roles::feature_controller::{self, FeatureControllerOptions};
use genplane_test_support::clients::kube_client;
use genplane_test_support::process::{Process, ok, output_with_input, text};
use genplane_test_support::{DEADLINE, eventually_async};

/// The running sample, killed when dropped.
struct Sample {
    _process: Process,
    dir: tempfile::TempDir,
}

impl Sample {
    fn start() -> Sample {
        Sample::start_with(&[])
    }

    fn start_with(extra: &[&str]) -> Sample {
        let dir = tempfile::tempdir().unwrap();
        let mut command = Command::new(BIN);
        command
            .args(["--bind-address=127.0.0.1", "--secure-port=0"])
            .args(extra)
            .arg(format!("--data-dir={}", dir.path().join("data").display()));
        let mut process = Process::spawn("the sample", command, &dir.path().join("sample.log"));
        // The banner comes once the server takes requests and the kubeconfig is written.
        process.wait_for_line("genplane sample-controlplane serving on https://127.0.0.1:");
        Sample {
            _process: process,
            dir,
        }
    }

    fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("data/admin.kubeconfig")
    }

    /// kubectl with the admin's kubeconfig, its discovery cached for this server alone.
    fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut command = genplane_test_support::kubectl_command("kubectl", self.kubeconfig());
        command.args(args);
        output_with_input(command, stdin)
    }

    async fn client(&self) -> kube::Client {
        kube_client(&self.kubeconfig()).await
    }
}

fn widgets() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("sample.genplane.io", "v1", "Widget"),
        "widgets",
    )
}

fn widget(name: &str, spec: serde_json::Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "sample.genplane.io/v1", "kind": "Widget",
        "metadata": {"name": name, "namespace": "default"}, "spec": spec,
    }))
    .unwrap()
}

#[test]
fn kubectl_sees_exactly_what_the_sample_serves() {
    let sample = Sample::start();
    let listing = ok(sample.kubectl(&["api-resources", "--no-headers"], None));
    let names: Vec<&str> = listing
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        names,
        [
            "configmaps",
            "namespaces",
            "leases",
            "features",
            "clusterrolebindings",
            "clusterroles",
            "rolebindings",
            "roles",
            "widgets"
        ],
        "{listing}"
    );
    assert!(
        listing
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["widgets", "wg", "sample.genplane.io/v1", "true", "Widget"]),
        "{listing}"
    );

    let applied = ok(sample.kubectl(
        &["apply", "-f", "-"],
        Some("apiVersion: sample.genplane.io/v1\nkind: Widget\nmetadata: {name: w1, namespace: default}\nspec: {size: 3}\n"),
    ));
    assert_eq!(applied.trim(), "widget.sample.genplane.io/w1 created");
    let table = ok(sample.kubectl(&["get", "wg"], None));
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0], ["NAME", "SIZE", "COLOR", "PHASE", "AGE"]);
    assert_eq!(rows[1][..3], ["w1", "3", "green"]);

    // Its own validation, with field paths.
    let refused = sample.kubectl(
        &["apply", "-f", "-"],
        Some("apiVersion: sample.genplane.io/v1\nkind: Widget\nmetadata: {name: w2, namespace: default}\nspec: {size: 300, color: pink}\n"),
    );
    assert!(!refused.status.success());
    let said = text(&refused);
    assert!(
        said.contains("spec.size: Invalid value: 300: must be between 1 and 100, inclusive"),
        "{said}"
    );
    assert!(
        said.contains("spec.color: Unsupported value: \"pink\""),
        "{said}"
    );

    // OpenAPI knows the kind.
    let explained = ok(sample.kubectl(&["explain", "widgets.spec.size"], None));
    assert!(
        explained.contains("How big the widget is, 1 to 100."),
        "{explained}"
    );

    // Field selectors of its own.
    ok(sample.kubectl(
        &["apply", "-f", "-"],
        Some("apiVersion: sample.genplane.io/v1\nkind: Widget\nmetadata: {name: w3, namespace: default}\nspec: {size: 5, color: blue}\n"),
    ));
    let blue = ok(sample.kubectl(
        &[
            "get",
            "widgets",
            "--field-selector=spec.color=blue",
            "-o",
            "name",
        ],
        None,
    ));
    assert_eq!(blue.trim(), "widget.sample.genplane.io/w3");

    // Nothing else is served.
    let secrets = sample.kubectl(&["get", "secrets"], None);
    assert!(!secrets.status.success());
    assert!(
        text(&secrets).contains("the server doesn't have a resource type \"secrets\""),
        "{}",
        text(&secrets)
    );
}

/// The library's post-start hooks run in the sample with no code of its own for them: each is
/// a `/readyz` check, the API server's identity Lease is held, and the feature gates it uses
/// are reported to the Feature API once a feature-controller (run here as a platform would run
/// it beside the sample, from genplane's library) announces the features.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sample_holds_its_identity_lease_and_reports_its_feature_uses() {
    let sample = Sample::start_with(&["--feature-use-report-period=1s"]);
    let hooks = [
        "start-system-namespaces-controller",
        "rbac/bootstrap-roles",
        "start-apiextensions-controllers",
        "start-kube-apiserver-identity-lease-controller",
        "start-feature-reporting",
    ];
    eventually_async("every post-start hook ready", || async {
        let readyz = text(&sample.kubectl(&["get", "--raw", "/readyz?verbose"], None));
        hooks
            .iter()
            .all(|hook| readyz.contains(&format!("[+]poststarthook/{hook} ok")))
            .then_some(())
    })
    .await;
    let leases = ok(sample.kubectl(
        &[
            "get",
            "leases",
            "-n",
            "kube-system",
            "-l",
            "apiserver.kubernetes.io/identity=kube-apiserver",
            "-o",
            "name",
        ],
        None,
    ));
    assert!(
        leases.starts_with("lease.coordination.k8s.io/apiserver-"),
        "{leases}"
    );

    let options = FeatureControllerOptions {
        kubeconfig: Some(sample.dir.path().join("data/feature-controller.kubeconfig")),
        secure_port: 0,
        bind_address: "127.0.0.1".to_owned(),
        sync_period: "1s".to_owned(),
        identity_lease_duration: "3s".to_owned(),
        ..FeatureControllerOptions::default()
    };
    let mut invalid = Invalid::new();
    let validated = options.validate(
        UseIdentity::new("feature-controller", "sample-test"),
        None,
        false,
        &mut invalid,
    );
    let config = invalid.finish(validated).unwrap();
    let shutdown = Shutdown::new();
    let stop = shutdown.clone();
    let controller =
        tokio::spawn(
            async move { feature_controller::serve(config, stop, &Notifier::default()).await },
        );
    eventually_async("the sample reporting APIServerIdentity", || async {
        let uses = ok(sample.kubectl(
            &[
                "get",
                "feature",
                "api-server-identity",
                "-n",
                "kube-system",
                "--ignore-not-found",
                "-o",
                "jsonpath={.status.uses[?(@.component==\"apiserver\")].value}",
            ],
            None,
        ));
        (uses == "On").then_some(())
    })
    .await;
    shutdown.trigger();
    controller.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_kube_rs_client_creates_reads_watches_updates_status_and_applies() {
    let sample = Sample::start();
    let client = sample.client().await;
    let api: Api<DynamicObject> = Api::namespaced_with(client, "default", &widgets());

    let created = api
        .create(&PostParams::default(), &widget("w1", json!({"size": 2})))
        .await
        .unwrap();
    assert_eq!(created.data["spec"], json!({"size": 2, "color": "green"}));
    assert_eq!(created.metadata.generation, Some(1));
    let rv = created.metadata.resource_version.clone().unwrap();

    // A watch from the create's version sees what follows.
    let mut events = api
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();

    // The status subresource: status changes, the spec does not.
    let mut status = api.get("w1").await.unwrap();
    status.data["status"] = json!({"phase": "Ready", "observedGeneration": 1});
    status.data["spec"]["size"] = json!(99);
    let written = api
        .replace_status("w1", &PostParams::default(), &status)
        .await
        .unwrap();
    assert_eq!(written.data["status"]["phase"], "Ready");
    assert_eq!(written.data["spec"]["size"], 2);
    // A write of the object does not change the status; a spec change bumps the generation.
    let mut resized = written.clone();
    resized.data["spec"]["size"] = json!(7);
    resized.data["status"] = json!({"phase": "Pending"});
    let replaced = api
        .replace("w1", &PostParams::default(), &resized)
        .await
        .unwrap();
    assert_eq!(replaced.data["status"]["phase"], "Ready");
    assert_eq!(replaced.metadata.generation, Some(2));
    // A bad phase is refused with the field.
    let bad = api
        .patch_status(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Exploded"}})),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(status) = bad else {
        panic!("{bad}");
    };
    assert_eq!(status.code, 422);
    assert!(
        status.message.contains("status.phase"),
        "{}",
        status.message
    );

    // Server-side apply: field ownership as for any kind.
    let applied = api
        .patch(
            "w2",
            &PatchParams::apply("sample-test"),
            &Patch::Apply(json!({
                "apiVersion": "sample.genplane.io/v1", "kind": "Widget",
                "metadata": {"name": "w2", "namespace": "default"},
                "spec": {"size": 4, "color": "red"},
            })),
        )
        .await
        .unwrap();
    assert_eq!(applied.data["spec"]["color"], "red");
    let managers: Vec<String> = applied
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert_eq!(managers, ["sample-test"]);
    let conflict = api
        .patch(
            "w2",
            &PatchParams::apply("someone-else"),
            &Patch::Apply(json!({
                "apiVersion": "sample.genplane.io/v1", "kind": "Widget",
                "metadata": {"name": "w2", "namespace": "default"},
                "spec": {"size": 9},
            })),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(status) = conflict else {
        panic!("{conflict}");
    };
    assert_eq!(status.code, 409, "{}", status.message);

    // List.
    let listed = api.list(&ListParams::default()).await.unwrap();
    let names: Vec<String> = listed
        .items
        .iter()
        .filter_map(|w| w.metadata.name.clone())
        .collect();
    assert_eq!(names, ["w1", "w2"]);

    // The watch saw the status write, the replace and the apply, in order.
    let deadline = Instant::now() + DEADLINE;
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let next = tokio::time::timeout_at(deadline.into(), events.next())
            .await
            .expect("watch events within the deadline")
            .expect("an open watch")
            .unwrap();
        match next {
            WatchEvent::Added(w) | WatchEvent::Modified(w) => seen.push((
                w.metadata.name.unwrap(),
                w.metadata.generation.unwrap(),
                w.data["status"]["phase"].as_str().unwrap_or("").to_owned(),
            )),
            WatchEvent::Bookmark(_) => {}
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(
        seen,
        [
            ("w1".to_owned(), 1, "Ready".to_owned()),
            ("w1".to_owned(), 2, "Ready".to_owned()),
            ("w2".to_owned(), 1, String::new()),
        ]
    );
}
