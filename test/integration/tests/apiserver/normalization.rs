//! Built-in objects are stored and answered as upstream's typed round trip leaves them: an
//! empty map or list of an `omitempty` field is left out on every write path (create, update,
//! every patch type, apply), so GitOps tools see no spurious diffs; fields without `omitempty`
//! keep theirs.

use crate::support;

use hyper::Method;
use serde_json::{Value, json};
use support::{Server, call};

async fn send(server: &Server, method: Method, path: &str, media: &str, body: &Value) -> Value {
    let answer = call(
        server,
        method,
        path,
        &[("content-type", media)],
        Some(serde_json::to_vec(body).unwrap()),
    )
    .await;
    assert!(
        answer.status < 300,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    answer.json()
}

fn assert_no_empties(object: &Value, context: &str) {
    let metadata = &object["metadata"];
    for field in ["labels", "annotations", "finalizers", "ownerReferences"] {
        assert!(
            metadata.get(field).is_none(),
            "{context}: metadata.{field} in {object}"
        );
    }
    assert!(object.get("data").is_none(), "{context}: data in {object}");
}

#[tokio::test]
async fn empty_maps_and_lists_of_omitempty_fields_are_left_out() {
    let server = support::start().await;
    let path = "/api/v1/namespaces/default/configmaps";
    let empties = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {}, "annotations": {}, "finalizers": [], "ownerReferences": []}, "data": {}});
    let created = send(&server, Method::POST, path, "application/json", &empties).await;
    assert_no_empties(&created, "create");
    let read = call(&server, Method::GET, &format!("{path}/c"), &[], None)
        .await
        .json();
    assert_no_empties(&read, "read");

    // A label added and removed again leaves no `labels: {}` behind, by any patch type.
    for (media, add, remove) in [
        (
            "application/merge-patch+json",
            json!({"metadata": {"labels": {"a": "b"}}}),
            json!({"metadata": {"labels": {"a": null}}}),
        ),
        (
            "application/strategic-merge-patch+json",
            json!({"metadata": {"labels": {"a": "b"}}}),
            json!({"metadata": {"labels": {"a": null}}}),
        ),
        (
            "application/json-patch+json",
            json!([{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}]),
            json!([{"op": "remove", "path": "/metadata/labels/a"}]),
        ),
    ] {
        send(&server, Method::PATCH, &format!("{path}/c"), media, &add).await;
        let removed = send(&server, Method::PATCH, &format!("{path}/c"), media, &remove).await;
        assert_no_empties(&removed, media);
    }
    let mut replaced = read.clone();
    replaced["data"] = json!({});
    replaced["metadata"]["annotations"] = json!({});
    replaced["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    let updated = send(
        &server,
        Method::PUT,
        &format!("{path}/c"),
        "application/json",
        &replaced,
    )
    .await;
    assert_no_empties(&updated, "update");
    let applied = send(
        &server,
        Method::PATCH,
        &format!("{path}/applied?fieldManager=test"),
        "application/apply-patch+yaml",
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied", "labels": {}}, "data": {}}),
    )
    .await;
    assert_no_empties(&applied, "apply");

    // `rules` has no omitempty upstream: an empty list stays.
    let role = send(
        &server,
        Method::POST,
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
        "application/json",
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r", "labels": {}}, "rules": []}),
    )
    .await;
    assert_eq!(role["rules"], json!([]), "{role}");
    assert!(role["metadata"].get("labels").is_none(), "{role}");
}
