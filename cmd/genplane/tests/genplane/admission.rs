//! The admission plugins of the real binary: `--enable-admission-plugins` and
//! `--disable-admission-plugins` with upstream's names, what each implemented plugin does to a
//! write made with kubectl, and a configuration error for names that do not exist.

#![allow(clippy::unwrap_used)]

use std::process::Command;

use crate::support::{BIN, ok, start_with, text};

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
            "--enable-admission-plugins=ValidatingAdmissionWebhook",
            "admission plugin \"ValidatingAdmissionWebhook\" is not available in genplane yet",
        ),
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
