//! `kubectl apply --server-side` against the real binary, with kubectl 1.33 and 1.27: create,
//! a second field manager's conflict, `--force-conflicts`, and a smaller configuration
//! removing a key.

#![allow(clippy::unwrap_used)]

use crate::support::{kubectl_path, ok, start, text};
use serde_json::Value;

fn server_side_apply(name: &str) {
    let kubectl = kubectl_path(name);
    let server = start();
    let work = server.dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let manifest = |file: &str, data: &str| {
        let path = work.join(file);
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n  namespace: default\n  labels:\n    app: demo\ndata:\n{data}"
            ),
        )
        .unwrap();
        path.display().to_string()
    };
    let first = manifest("first.yaml", "  a: \"1\"\n  b: \"2\"\n");
    let out = ok(server.kubectl(&kubectl, &["apply", "--server-side", "-f", &first]));
    assert!(out.contains("configmap/demo serverside-applied"), "{out}");

    let get = || -> Value {
        let out = ok(server.kubectl(
            &kubectl,
            &[
                "get",
                "configmap",
                "demo",
                "-o",
                "json",
                "--show-managed-fields",
            ],
        ));
        serde_json::from_str(&out).unwrap()
    };
    let object = get();
    let entry = &object["metadata"]["managedFields"][0];
    assert_eq!(
        (entry["manager"].as_str(), entry["operation"].as_str()),
        (Some("kubectl"), Some("Apply")),
        "{object}"
    );

    // A second manager changing a's value conflicts, and kubectl says so.
    let other = manifest("other.yaml", "  a: \"changed\"\n");
    let refused = server.kubectl(
        &kubectl,
        &[
            "apply",
            "--server-side",
            "--field-manager=other",
            "-f",
            &other,
        ],
    );
    assert!(!refused.status.success());
    let message = text(&refused);
    assert!(
        message.contains("conflict with \"kubectl\": .data.a"),
        "{message}"
    );

    // --force-conflicts takes the field over.
    let out = ok(server.kubectl(
        &kubectl,
        &[
            "apply",
            "--server-side",
            "--field-manager=other",
            "--force-conflicts",
            "-f",
            &other,
        ],
    ));
    assert!(out.contains("serverside-applied"), "{out}");
    assert_eq!(get()["data"]["a"], "changed");

    // kubectl's own smaller configuration removes b, which only it owned; a stays (other's).
    let smaller = manifest("smaller.yaml", "  c: \"3\"\n");
    ok(server.kubectl(&kubectl, &["apply", "--server-side", "-f", &smaller]));
    let object = get();
    assert_eq!(
        object["data"],
        serde_json::json!({"a": "changed", "c": "3"}),
        "{object}"
    );

    // A server-side diff against the same configuration finds nothing; a change, something.
    let same = server.kubectl(&kubectl, &["diff", "--server-side", "-f", &smaller]);
    assert_eq!(same.status.code(), Some(0), "{}", text(&same));
    let changed = manifest("changed.yaml", "  c: \"4\"\n");
    let differs = server.kubectl(&kubectl, &["diff", "--server-side", "-f", &changed]);
    assert_eq!(differs.status.code(), Some(1), "{}", text(&differs));
}

/// An object created by client-side `kubectl apply` moves to server-side apply: kubectl
/// re-applies, then hands the client-side manager's fields over by editing managedFields (a
/// JSON patch with a resourceVersion precondition), and a later removal works.
fn client_side_to_server_side(name: &str) {
    let kubectl = kubectl_path(name);
    let server = start();
    let work = server.dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let manifest = |file: &str, data: &str| {
        let path = work.join(file);
        std::fs::write(
            &path,
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: moved\n  namespace: default\ndata:\n{data}"),
        )
        .unwrap();
        path.display().to_string()
    };
    let both = manifest("both.yaml", "  a: \"1\"\n  b: \"2\"\n");
    ok(server.kubectl(&kubectl, &["apply", "-f", &both]));
    ok(server.kubectl(&kubectl, &["apply", "--server-side", "-f", &both]));
    let out = ok(server.kubectl(
        &kubectl,
        &[
            "get",
            "configmap",
            "moved",
            "-o",
            "json",
            "--show-managed-fields",
        ],
    ));
    let object: Value = serde_json::from_str(&out).unwrap();
    let managers: Vec<&str> = object["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["manager"].as_str())
        .collect();
    assert!(!managers.contains(&"kubectl-client-side-apply"), "{object}");
    let only_a = manifest("only-a.yaml", "  a: \"1\"\n");
    ok(server.kubectl(&kubectl, &["apply", "--server-side", "-f", &only_a]));
    let out = ok(server.kubectl(&kubectl, &["get", "configmap", "moved", "-o", "json"]));
    let object: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(object["data"], serde_json::json!({"a": "1"}), "{object}");
}

#[test]
fn kubectl_1_33_client_side_to_server_side() {
    client_side_to_server_side("kubectl.1.33");
}

#[test]
fn kubectl_1_27_client_side_to_server_side() {
    client_side_to_server_side("kubectl.1.27");
}

#[test]
fn kubectl_1_33_server_side_apply() {
    server_side_apply("kubectl.1.33");
}

#[test]
fn kubectl_1_27_server_side_apply() {
    server_side_apply("kubectl.1.27");
}
