//! `genplane all-in-one`, the README's main job: one process serving the API and running the
//! controllers; the printed `export KUBECONFIG=...` line is all kubectl needs.

#![allow(clippy::unwrap_used)]

use std::process::Command;

use crate::support::{BIN, Process, ok};

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
        Command::new("kubectl")
            .env("KUBECONFIG", &kubeconfig)
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
}
