//! `genplane all-in-one`, the README's main job: one process serving the API and running the
//! controllers; the printed `export KUBECONFIG=...` line is all kubectl needs.

#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{BIN, free_port, ok, text};

struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn all_in_one_serves_the_api_and_runs_the_controllers() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut child = Command::new(BIN)
        .args([
            "all-in-one",
            "--bind-address=127.0.0.1",
            &format!("--secure-port={port}"),
        ])
        .arg(format!("--data-dir={}", dir.path().join("data").display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let _child = Killed(child);
    // The line the README tells users to run.
    let kubeconfig = BufReader::new(stdout)
        .lines()
        .map(Result::unwrap)
        .find_map(|line| line.strip_prefix("export KUBECONFIG=").map(str::to_owned))
        .expect("all-in-one prints the export KUBECONFIG line");
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
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let sa = kubectl(&["get", "serviceaccount", "default", "-n", "team-a"]);
        let ca = kubectl(&["get", "configmap", "kube-root-ca.crt", "-n", "team-a"]);
        if sa.status.success() && ca.status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no default service account or CA bundle: {} {}",
            text(&sa),
            text(&ca)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
