//! A graceful stop of `genplane apiserver` with clients watching: SIGTERM ends the watch
//! streams, the server drains and exits 0 instead of waiting out its drain deadline.

#![allow(clippy::unwrap_used)]

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{kubectl_path, start};

#[test]
fn sigterm_with_open_watches_exits_cleanly() {
    let mut server = start();
    let kubectl = kubectl_path("kubectl");
    let mut watchers: Vec<_> = ["configmaps", "namespaces"]
        .iter()
        .map(|resource| {
            Command::new(&kubectl)
                .arg("--kubeconfig")
                .arg(server.kubeconfig())
                .args(["get", resource, "-A", "--watch"])
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    // The namespace watch lists the system namespaces first: both watches are open by then.
    let deadline = Instant::now() + Duration::from_secs(10);
    let metrics = loop {
        let metrics = common::ok(server.kubectl("kubectl", &["get", "--raw", "/metrics"]));
        if metrics.contains(
            "apiserver_registered_watchers{group=\"\",kind=\"Namespace\",version=\"v1\"} 1",
        ) && metrics.contains(
            "apiserver_registered_watchers{group=\"\",kind=\"ConfigMap\",version=\"v1\"} 1",
        ) {
            break metrics;
        }
        assert!(
            Instant::now() < deadline,
            "watches never registered:\n{metrics}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    drop(metrics);

    let status = Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exited = loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            break status;
        }
        // The drain deadline is 10 s; a server still waiting on watches would hit it and fail.
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(exited.success(), "the apiserver exited with {exited}");
    for watcher in &mut watchers {
        let _ = watcher.kill();
        let _ = watcher.wait();
    }
}
