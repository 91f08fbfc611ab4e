//! `genplane all-in-one`, the README's main job: one process serving the API and running the
//! controllers; the printed `export KUBECONFIG=...` line is all kubectl needs.

#![allow(clippy::unwrap_used)]

use std::process::Command;

use crate::support::{BIN, Process, eventually, ok};

#[test]
fn all_in_one_serves_the_api_and_runs_the_controllers() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = Command::new(BIN);
    command
        .args(["all-in-one", "--bind-address=127.0.0.1", "--secure-port=0"])
        .arg(format!("--data-dir={}", dir.path().join("data").display()));
    let mut process = Process::spawn("all-in-one", command, &dir.path().join("all-in-one.log"));
    // The line the README tells users to run.
    let kubeconfig = process.wait_for("the export KUBECONFIG line", |p| {
        p.output()
            .lines()
            .find_map(|line| line.strip_prefix("export KUBECONFIG=").map(str::to_owned))
    });
    let kubectl = |args: &[&str]| {
        crate::support::kubectl_command("kubectl", &kubeconfig)
            .args(args)
            .output()
            .unwrap()
    };
    let namespaces = ok(kubectl(&["get", "ns", "-o", "name"]));
    assert!(namespaces.contains("namespace/kube-system"), "{namespaces}");

    // The controllers run: a new namespace gets its service account and CA bundle.
    ok(kubectl(&["create", "namespace", "team-a"]));
    process.wait_for("the default service account and CA bundle", |_| {
        let sa = kubectl(&["get", "serviceaccount", "default", "-n", "team-a"]);
        let ca = kubectl(&["get", "configmap", "kube-root-ca.crt", "-n", "team-a"]);
        (sa.status.success() && ca.status.success()).then_some(())
    });

    // The controllers share their watches, as the API server counts its watchers: one of
    // namespaces (the namespace, service-account and root-CA controllers and the garbage
    // collector follow it), one of service accounts (the service-account controller and the
    // collector), one of cluster roles and one of resource quotas (their controller and the
    // collector).
    let watchers = |kind: &str| -> u64 {
        let metrics = ok(kubectl(&["get", "--raw", "/metrics"]));
        metrics
            .lines()
            .filter(|l| {
                l.starts_with("apiserver_registered_watchers{")
                    && l.contains(&format!("kind=\"{kind}\""))
            })
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
            .sum()
    };
    // Every controller is watching once the garbage collector watches secrets (only it does)
    // and the root-CA publisher (its own, field-selected watch) and the collector both watch
    // config maps.
    eventually("every controller's watches", || {
        (watchers("Secret") >= 1 && watchers("ConfigMap") >= 2).then_some(())
    });
    assert_eq!(watchers("Namespace"), 1);
    assert_eq!(watchers("ServiceAccount"), 1);
    assert_eq!(watchers("ClusterRole"), 1);
    assert_eq!(watchers("ResourceQuota"), 1);
}

/// `--controllers` naming a controller that does not exist stops the role before it serves,
/// with exit code 64 and the list of known controllers; upstream's names are accepted.
#[test]
fn an_unknown_controller_is_a_configuration_error_listing_the_known_ones() {
    let dir = tempfile::tempdir().unwrap();
    let data = format!("--data-dir={}", dir.path().join("data").display());
    let kubeconfig = format!("--kubeconfig={}", dir.path().join("none").display());
    for args in [
        vec![
            "all-in-one",
            "--secure-port=0",
            "--controllers=*,-nope",
            data.as_str(),
        ],
        vec![
            "controller-manager",
            "--controllers=*,-nope",
            kubeconfig.as_str(),
        ],
    ] {
        let output = Command::new(BIN).args(&args).output().unwrap();
        let said = crate::support::text(&output);
        assert_eq!(output.status.code(), Some(64), "{args:?}: {said}");
        assert!(
            said.contains(
                "\"nope\" is not in the list of known controllers: clusterrole-aggregation, \
                 csrcleaner, csrsigning, garbage-collector, namespace, networkclaim, resourcequota, \
                 root-ca-cert-publisher, serviceaccount"
            ),
            "{args:?}: {said}"
        );
    }
}
