//! The `scale` subresource of custom resources against the real binary: `kubectl scale` (by
//! patch, and by get-then-update with `--current-replicas`), the Scale read with `get --raw`,
//! merge and JSON patches of it, resourceVersion preconditions, upstream's errors, field
//! ownership, and the subresource in discovery and OpenAPI.

#![allow(clippy::unwrap_used)]

use crate::support::{Apiserver, ok, start, text};
use serde_json::{Value, json};

const SCALE: &str = "/apis/stable.example.com/v1/namespaces/default/crontabs/x/scale";

fn write(server: &Apiserver, name: &str, content: &str) -> String {
    let path = server.dir.path().join(name);
    std::fs::write(&path, content).unwrap();
    path.display().to_string()
}

fn kubectl(server: &Apiserver, args: &[&str]) -> String {
    ok(server.kubectl("kubectl", args))
}

fn refused(server: &Apiserver, args: &[&str]) -> String {
    let out = server.kubectl("kubectl", args);
    assert!(!out.status.success(), "expected a failure: {}", text(&out));
    text(&out)
}

fn json_of(server: &Apiserver, args: &[&str]) -> Value {
    serde_json::from_str(&kubectl(server, args)).unwrap()
}

fn crontab(server: &Apiserver) -> Value {
    json_of(
        server,
        &[
            "get",
            "crontab",
            "x",
            "-n",
            "default",
            "-o",
            "json",
            "--show-managed-fields",
        ],
    )
}

fn setup() -> Apiserver {
    let server = start();
    let crd = write(
        &server,
        "crd.yaml",
        &crate::support::fixture("crds/crontabs-scale.yaml"),
    );
    kubectl(&server, &["apply", "-f", &crd]);
    server.wait_established("crontabs.stable.example.com");
    let object = write(
        &server,
        "x.yaml",
        "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: x\n  namespace: default\nspec:\n  image: busybox\n  replicas: 1\n",
    );
    kubectl(&server, &["create", "-f", &object]);
    kubectl(
        &server,
        &[
            "patch",
            "crontab",
            "x",
            "-n",
            "default",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"replicas":2,"labelSelector":"app=x"}}"#,
        ],
    );
    server
}

#[test]
fn kubectl_scale_sets_the_replicas_of_a_custom_resource() {
    let server = setup();
    let before = crontab(&server);

    let out = kubectl(
        &server,
        &["scale", "--replicas=5", "crontab/x", "-n", "default"],
    );
    assert!(out.contains("crontab.stable.example.com/x scaled"), "{out}");
    let after = crontab(&server);
    assert_eq!(after["spec"], json!({"image": "busybox", "replicas": 5}));
    assert_eq!(after["metadata"]["generation"], 2);
    assert_eq!(after["status"]["replicas"], 2, "the status is kept");
    // The writer owns the replicas, through the scale subresource.
    let entries = after["metadata"]["managedFields"].as_array().unwrap();
    let scaled = entries
        .iter()
        .find(|e| e["subresource"] == "scale")
        .unwrap_or_else(|| panic!("{entries:?}"));
    assert_eq!(scaled["operation"], "Update");
    assert_eq!(scaled["apiVersion"], "stable.example.com/v1");
    assert_eq!(
        scaled["fieldsV1"],
        json!({"f:spec": {"f:replicas": {}}}),
        "{entries:?}"
    );

    // The Scale, as upstream answers it.
    let scale: Value = serde_json::from_str(&kubectl(&server, &["get", "--raw", SCALE])).unwrap();
    assert_eq!(
        scale,
        json!({
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                "name": "x",
                "namespace": "default",
                "uid": after["metadata"]["uid"],
                "resourceVersion": after["metadata"]["resourceVersion"],
                "creationTimestamp": after["metadata"]["creationTimestamp"],
            },
            "spec": {"replicas": 5},
            "status": {"replicas": 2, "selector": "app=x"},
        })
    );

    // Get-then-update, with a precondition kubectl checks on the Scale it read.
    let out = kubectl(
        &server,
        &[
            "scale",
            "--current-replicas=5",
            "--replicas=4",
            "crontab/x",
            "-n",
            "default",
        ],
    );
    assert!(out.contains("scaled"), "{out}");
    assert_eq!(crontab(&server)["spec"]["replicas"], 4);

    // A replace with a stale resourceVersion is a conflict; with the current one it applies.
    let stale = json!({
        "apiVersion": "autoscaling/v1", "kind": "Scale",
        "metadata": {"name": "x", "namespace": "default",
            "resourceVersion": before["metadata"]["resourceVersion"]},
        "spec": {"replicas": 7},
    });
    let file = write(&server, "stale.json", &stale.to_string());
    let out = refused(&server, &["replace", "--raw", SCALE, "-f", &file]);
    assert!(out.contains("Conflict"), "{out}");
    assert!(out.contains("the object has been modified"), "{out}");
    assert_eq!(crontab(&server)["spec"]["replicas"], 4);
    let mut current = stale;
    current["metadata"]["resourceVersion"] =
        crontab(&server)["metadata"]["resourceVersion"].clone();
    let file = write(&server, "current.json", &current.to_string());
    let answer: Value =
        serde_json::from_str(&kubectl(&server, &["replace", "--raw", SCALE, "-f", &file])).unwrap();
    assert_eq!(answer["kind"], "Scale");
    assert_eq!(answer["spec"]["replicas"], 7);
    assert_eq!(crontab(&server)["spec"]["replicas"], 7);

    // The body must be a Scale.
    let wrong = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
        "metadata": {"name": "x"}, "spec": {"replicas": 1}});
    let file = write(&server, "wrong.json", &wrong.to_string());
    let out = refused(&server, &["replace", "--raw", SCALE, "-f", &file]);
    assert!(
        out.contains("does not match the expected API version"),
        "{out}"
    );
}

#[test]
fn scale_patches_and_errors_follow_upstream() {
    let server = setup();
    let patch = |kind: &str, body: &str| {
        server.kubectl(
            "kubectl",
            &[
                "patch",
                "crontab",
                "x",
                "-n",
                "default",
                "--subresource=scale",
                &format!("--type={kind}"),
                "-p",
                body,
            ],
        )
    };
    let out = ok(patch(
        "json",
        r#"[{"op":"replace","path":"/spec/replicas","value":3}]"#,
    ));
    assert!(out.contains("patched"), "{out}");
    assert_eq!(crontab(&server)["spec"]["replicas"], 3);
    ok(patch("merge", r#"{"spec":{"replicas":6}}"#));
    assert_eq!(crontab(&server)["spec"]["replicas"], 6);
    // Scale is a typed kind: strategic merge patch applies to it.
    ok(patch("strategic", r#"{"spec":{"replicas":2}}"#));
    assert_eq!(crontab(&server)["spec"]["replicas"], 2);

    let negative = patch("merge", r#"{"spec":{"replicas":-1}}"#);
    assert!(!negative.status.success());
    let out = text(&negative);
    assert!(
        out.contains(
            r#"The CronTab "x" is invalid: .spec.replicas: Invalid value: -1: should be a non-negative integer"#
        ),
        "{out}"
    );
    assert_eq!(crontab(&server)["spec"]["replicas"], 2);

    let out = refused(
        &server,
        &["scale", "--replicas=2", "crontab/nope", "-n", "default"],
    );
    assert!(
        out.contains("NotFound") || out.contains("not found"),
        "{out}"
    );
    let out = refused(
        &server,
        &[
            "get",
            "--raw",
            "/apis/stable.example.com/v1/namespaces/default/crontabs/nope/scale",
        ],
    );
    assert!(out.contains("NotFound"), "{out}");
}

#[test]
fn the_scale_subresource_is_discovered_and_published() {
    let server = setup();
    let list = json_of(&server, &["get", "--raw", "/apis/stable.example.com/v1"]);
    let scale = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "crontabs/scale")
        .unwrap_or_else(|| panic!("{list}"));
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["group"], "autoscaling");
    assert_eq!(scale["version"], "v1");
    assert_eq!(scale["verbs"], json!(["get", "patch", "update"]));

    let document = json_of(
        &server,
        &["get", "--raw", "/openapi/v3/apis/stable.example.com/v1"],
    );
    let path = &document["paths"]["/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}/scale"];
    assert_eq!(
        path["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/io.k8s.api.autoscaling.v1.Scale",
        "{path}"
    );
    assert_eq!(
        path["put"]["x-kubernetes-group-version-kind"],
        json!({"group": "autoscaling", "version": "v1", "kind": "Scale"})
    );
    assert!(path["patch"].is_object(), "{path}");
    assert_eq!(
        document["components"]["schemas"]["io.k8s.api.autoscaling.v1.Scale"]["x-kubernetes-group-version-kind"],
        json!([{"group": "autoscaling", "version": "v1", "kind": "Scale"}])
    );
}
