//! What real kubectl (1.33 and 1.27) does with strategic merge patches: client-side `apply`
//! (create, an edited file, a removed key), `annotate`, `label`, `patch --type=strategic`,
//! `edit` driven by an EDITOR script, and `diff` (exit code 1 with a diff, 0 without).

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Output;

use crate::support::{Apiserver, kubectl_path, ok, start, text};
use serde_json::Value;

fn configmap(dir: &Path, data: &[(&str, &str)]) -> String {
    let mut yaml = String::from(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n  namespace: smp\ndata:\n",
    );
    for (k, v) in data {
        yaml.push_str(&format!("  {k}: \"{v}\"\n"));
    }
    let path = dir.join("cm.yaml");
    std::fs::write(&path, yaml).unwrap();
    path.display().to_string()
}

fn get(server: &Apiserver, kubectl: &Path) -> Value {
    let out = ok(server.kubectl(
        kubectl,
        &["-n", "smp", "get", "configmap", "demo", "-o", "json"],
    ));
    serde_json::from_str(&out).unwrap()
}

fn with_env(server: &Apiserver, kubectl: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut command = crate::support::kubectl_command(kubectl, server.kubeconfig());
    command.args(args);
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().unwrap()
}

fn exercise(name: &str) {
    let kubectl = kubectl_path(name);
    let server = start();
    let work = tempfile::tempdir().unwrap();
    ok(server.kubectl(&kubectl, &["create", "namespace", "smp"]));

    // apply: create, then an edited file, then a file without a key.
    let file = configmap(work.path(), &[("a", "1"), ("b", "2")]);
    let out = ok(server.kubectl(&kubectl, &["apply", "-f", &file]));
    assert!(out.contains("configmap/demo created"), "{out}");
    let file = configmap(work.path(), &[("a", "10"), ("b", "2"), ("c", "3")]);
    let out = ok(server.kubectl(&kubectl, &["apply", "-f", &file]));
    assert!(out.contains("configmap/demo configured"), "{out}");
    let object = get(&server, &kubectl);
    assert_eq!(
        object["data"],
        serde_json::json!({"a": "10", "b": "2", "c": "3"})
    );
    let file = configmap(work.path(), &[("a", "10"), ("c", "3")]);
    ok(server.kubectl(&kubectl, &["apply", "-f", &file]));
    let object = get(&server, &kubectl);
    assert_eq!(
        object["data"],
        serde_json::json!({"a": "10", "c": "3"}),
        "b goes thanks to the last-applied annotation"
    );
    let out = ok(server.kubectl(&kubectl, &["apply", "-f", &file]));
    assert!(out.contains("configmap/demo unchanged"), "{out}");

    // diff: nothing to show, then a change.
    let same = server.kubectl(&kubectl, &["diff", "-f", &file]);
    assert_eq!(same.status.code(), Some(0), "{}", text(&same));
    let file = configmap(work.path(), &[("a", "11"), ("c", "3")]);
    let differs = server.kubectl(&kubectl, &["diff", "-f", &file]);
    assert_eq!(differs.status.code(), Some(1), "{}", text(&differs));
    let shown = String::from_utf8_lossy(&differs.stdout);
    assert!(
        shown.contains("-  a: \"10\"") && shown.contains("+  a: \"11\""),
        "{shown}"
    );
    assert_eq!(
        get(&server, &kubectl)["data"]["a"],
        "10",
        "diff changes nothing"
    );

    // annotate, label, patch.
    ok(server.kubectl(
        &kubectl,
        &["-n", "smp", "annotate", "configmap", "demo", "note=hello"],
    ));
    ok(server.kubectl(
        &kubectl,
        &["-n", "smp", "label", "configmap", "demo", "tier=web"],
    ));
    let object = get(&server, &kubectl);
    assert_eq!(object["metadata"]["annotations"]["note"], "hello");
    assert_eq!(object["metadata"]["labels"]["tier"], "web");
    ok(server.kubectl(
        &kubectl,
        &["-n", "smp", "annotate", "configmap", "demo", "note-"],
    ));
    assert!(
        get(&server, &kubectl)["metadata"]["annotations"]
            .get("note")
            .is_none()
    );
    ok(server.kubectl(
        &kubectl,
        &[
            "-n",
            "smp",
            "patch",
            "configmap",
            "demo",
            "--type=strategic",
            "-p",
            r#"{"data":{"edited":"value-old"},"metadata":{"finalizers":["example.com/keep"]}}"#,
        ],
    ));
    ok(server.kubectl(
        &kubectl,
        &[
            "-n",
            "smp",
            "patch",
            "configmap",
            "demo",
            "-p",
            r#"{"metadata":{"finalizers":["example.com/more"]}}"#,
        ],
    ));
    let object = get(&server, &kubectl);
    assert_eq!(object["data"]["edited"], "value-old");
    assert_eq!(
        object["metadata"]["finalizers"],
        serde_json::json!(["example.com/more", "example.com/keep"]),
        "finalizers merge"
    );
    ok(server.kubectl(
        &kubectl,
        &["-n", "smp", "patch", "configmap", "demo", "--type=strategic", "-p", r#"{"metadata":{"$deleteFromPrimitiveList/finalizers":["example.com/more","example.com/keep"]}}"#],
    ));
    assert!(
        get(&server, &kubectl)["metadata"]["finalizers"]
            .as_array()
            .is_none_or(Vec::is_empty)
    );
    let bad = server.kubectl(
        &kubectl,
        &[
            "-n",
            "smp",
            "patch",
            "configmap",
            "demo",
            "--type=strategic",
            "-p",
            r#"{"metadata":{"name":"other"}}"#,
        ],
    );
    assert!(!bad.status.success());
    assert!(
        text(&bad).contains("does not match the name on the URL"),
        "{}",
        text(&bad)
    );

    // edit, with sed as the editor.
    let out = with_env(
        &server,
        &kubectl,
        &[
            ("EDITOR", "sed -i s/value-old/value-new/"),
            ("KUBE_EDITOR", ""),
        ],
        &["-n", "smp", "edit", "configmap", "demo"],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("configmap/demo edited"),
        "{}",
        text(&out)
    );
    let object = get(&server, &kubectl);
    assert_eq!(object["data"]["edited"], "value-new");
    assert_eq!(object["data"]["a"], "10");
}

#[test]
fn kubectl_1_33() {
    exercise("kubectl.1.33");
}

#[test]
fn kubectl_1_27() {
    exercise("kubectl.1.27");
}
