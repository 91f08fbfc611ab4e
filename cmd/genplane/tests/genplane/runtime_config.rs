//! `--runtime-config` as kube-apiserver reads it: a disabled group version or resource is gone
//! from discovery (what `kubectl api-resources` shows), the OpenAPI documents and routing, while
//! the rest is served as before; entries that cannot be applied are configuration errors.

#![allow(clippy::unwrap_used)]

use std::process::Command;

use serde_json::{Value, json};

use crate::support::{BIN, ok, start_with, text};

/// The `kubectl api-resources` lines whose resource name is `name`.
fn api_resources(listing: &str, name: &str) -> Vec<String> {
    listing
        .lines()
        .filter(|line| line.split_whitespace().next() == Some(name))
        .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

fn openapi_v3_paths(raw: &crate::support::Raw) -> Vec<String> {
    let index = raw.get("/openapi/v3").json();
    index["paths"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect()
}

#[test]
fn a_disabled_group_version_or_resource_is_gone_and_the_rest_is_served() {
    let server = start_with(&["--runtime-config=events.k8s.io/v1=false"]);
    let raw = server.raw();
    let listing = ok(server.kubectl("kubectl", &["api-resources"]));
    assert_eq!(
        api_resources(&listing, "events"),
        ["events ev v1 true Event"],
        "{listing}"
    );
    assert!(!listing.contains("events.k8s.io"), "{listing}");
    // Routing: the group is unknown; the core Events are served.
    for path in [
        "/apis/events.k8s.io",
        "/apis/events.k8s.io/v1",
        "/apis/events.k8s.io/v1/events",
        "/apis/events.k8s.io/v1/namespaces/default/events",
    ] {
        assert_eq!(raw.get(path).status, 404, "{path}");
    }
    let event = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "e1", "namespace": "default"},
        "involvedObject": {"kind": "ConfigMap", "name": "c", "namespace": "default"},
        "reason": "Tested", "message": "a core event",
    });
    let created = raw.request(
        "POST",
        "/api/v1/namespaces/default/events",
        &[],
        Some(event.to_string().as_bytes()),
    );
    assert_eq!(created.status, 201, "{}", created.text());
    let events = ok(server.kubectl("kubectl", &["get", "events", "-o", "name"]));
    assert_eq!(events.trim(), "event/e1");
    // Discovery and OpenAPI.
    let groups: Vec<Value> = raw.get("/apis").json()["groups"]
        .as_array()
        .unwrap()
        .clone();
    assert!(groups.iter().all(|g| g["name"] != "events.k8s.io"));
    assert!(groups.iter().any(|g| g["name"] == "coordination.k8s.io"));
    let paths = openapi_v3_paths(&raw);
    assert!(
        !paths.iter().any(|p| p.contains("events.k8s.io")),
        "{paths:?}"
    );
    assert!(paths.contains(&"api/v1".to_owned()), "{paths:?}");
    let v2 = raw.get("/openapi/v2").json();
    let v2_paths: Vec<&String> = v2["paths"].as_object().unwrap().keys().collect();
    assert!(
        !v2_paths
            .iter()
            .any(|p| p.starts_with("/apis/events.k8s.io/")),
        "{v2_paths:?}"
    );
    assert!(v2_paths.iter().any(|p| p.starts_with("/api/v1/")));
    drop(server);

    // One resource and a group of reviews; the later entry of a key wins.
    let server = start_with(&[
        "--runtime-config=coordination.k8s.io/v1/leases=false,authentication.k8s.io/v1=true",
        "--runtime-config=authentication.k8s.io/v1=false",
    ]);
    let raw = server.raw();
    let listing = ok(server.kubectl("kubectl", &["api-resources"]));
    assert!(api_resources(&listing, "leases").is_empty(), "{listing}");
    assert!(
        api_resources(&listing, "tokenreviews").is_empty(),
        "{listing}"
    );
    assert!(
        api_resources(&listing, "selfsubjectreviews").is_empty(),
        "{listing}"
    );
    assert_eq!(
        api_resources(&listing, "subjectaccessreviews"),
        ["subjectaccessreviews authorization.k8s.io/v1 false SubjectAccessReview"],
        "{listing}"
    );
    assert_eq!(
        raw.get("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases")
            .status,
        404
    );
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let answer = raw.request(
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        &[],
        Some(review.to_string().as_bytes()),
    );
    assert_eq!(answer.status, 404, "{}", answer.text());
    let whoami = server.kubectl("kubectl", &["auth", "whoami"]);
    assert!(!whoami.status.success(), "{}", text(&whoami));
    // Leases are coordination.k8s.io/v1's only resource here: the group version goes with
    // them, as upstream drops a group version that serves nothing.
    assert_eq!(raw.get("/apis/coordination.k8s.io/v1").status, 404);
    let groups = raw.get("/apis").json();
    let names: Vec<&str> = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert!(!names.contains(&"coordination.k8s.io"), "{names:?}");
    assert!(!names.contains(&"authentication.k8s.io"), "{names:?}");
    assert!(names.contains(&"authorization.k8s.io"), "{names:?}");
}

#[test]
fn entries_that_cannot_be_applied_are_configuration_errors() {
    for (flag, expected) in [
        (
            "--runtime-config=events.k8s.io/v2=false",
            "group version events.k8s.io/v2 that has not been registered",
        ),
        ("--runtime-config=api/all=no", "invalid value api/all=no"),
        (
            "--runtime-config=events.k8s.io/v1=maybe",
            "invalid value of events.k8s.io/v1: maybe",
        ),
        (
            "--runtime-config=events.k8s.io/v1/Events=false",
            "resource is always lowercase plural",
        ),
        (
            "--runtime-config=api/all=false",
            "the core API's namespaces cannot be disabled",
        ),
        (
            "--runtime-config=rbac.authorization.k8s.io/v1=false",
            "--authorization-mode=RBAC needs every resource of rbac.authorization.k8s.io/v1",
        ),
        // Groups the server does not have are left to whoever has them.
        ("--runtime-config=apps/v1=false,batch/v1/jobs=true", ""),
        (
            "--runtime-config=api/all=false,api/v1=true,rbac.authorization.k8s.io/v1=true",
            "",
        ),
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
