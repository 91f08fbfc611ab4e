//! A graceful stop of `genplane apiserver` with clients watching: SIGTERM ends the watch
//! streams, the server drains and exits 0 instead of waiting out its drain deadline.

#![allow(clippy::unwrap_used)]

use crate::support::{Process, kubectl_command, kubectl_path, start};

#[test]
fn sigterm_with_open_watches_exits_cleanly() {
    let mut server = start();
    let kubectl = kubectl_path("kubectl");
    let _watchers: Vec<Process> = ["configmaps", "namespaces"]
        .iter()
        .map(|resource| {
            let mut command = kubectl_command(&kubectl, server.kubeconfig());
            command.args(["get", resource, "-A", "--watch"]);
            Process::spawn(
                "kubectl --watch",
                command,
                &server.dir.path().join(format!("watch-{resource}.log")),
            )
        })
        .collect();
    // Both watches are registered (the server's metric says so) before the signal.
    let raw = server.raw();
    server.process.wait_for("both watches to register", |_| {
        let metrics = raw.get("/metrics").text();
        (metrics.contains(
            "apiserver_registered_watchers{group=\"\",kind=\"Namespace\",version=\"v1\"} 1",
        ) && metrics.contains(
            "apiserver_registered_watchers{group=\"\",kind=\"ConfigMap\",version=\"v1\"} 1",
        ))
        .then_some(())
    });

    server.process.terminate();
    // The drain deadline is 10 s; a server still waiting on watches would hit it and fail.
    let exited = server.process.wait_exit(crate::support::DEADLINE);
    assert!(exited.success(), "the apiserver exited with {exited}");
}
