//! Strategic merge patch over real HTTP: merged lists and maps on built-in kinds, dry run,
//! resourceVersion preconditions, field validation of the patch text, and the Status errors
//! for malformed patches and for patches that change the object's identity.

use crate::support;

use hyper::Method;
use serde_json::{Value, json};
use support::Server;

const SMP: &str = "application/strategic-merge-patch+json";

async fn call(
    server: &Server,
    method: Method,
    path: &str,
    content_type: &str,
    body: &[u8],
) -> (u16, Value, Vec<String>) {
    let answer = support::call(
        server,
        method,
        path,
        &[("content-type", content_type)],
        Some(body.to_vec()),
    )
    .await;
    (answer.status, answer.json(), answer.warnings())
}

async fn create(server: &Server, path: &str, object: Value) -> Value {
    let (status, body, _) = call(
        server,
        Method::POST,
        path,
        "application/json",
        &serde_json::to_vec(&object).unwrap(),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    body
}

async fn patch(server: &Server, path: &str, body: &str) -> (u16, Value) {
    let (status, value, _) = call(server, Method::PATCH, path, SMP, body.as_bytes()).await;
    (status, value)
}

const CM: &str = "/api/v1/namespaces/smp/configmaps/cm";

async fn setup(server: &Server) -> Value {
    create(
        server,
        "/api/v1/namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "smp"}}),
    )
    .await;
    create(
        server,
        "/api/v1/namespaces/smp/configmaps",
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "labels": {"a": "1", "b": "2"}, "finalizers": ["x.io/one"],
                "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o1", "uid": "u1"}]},
            "data": {"k": "v", "gone": "soon"}
        }),
    )
    .await
}

#[tokio::test]
async fn merges_maps_and_lists_of_builtin_kinds() {
    let server = support::start().await;
    setup(&server).await;
    let (status, body) = patch(
        &server,
        CM,
        r#"{"data":{"gone":null,"new":"n"},"metadata":{"labels":{"b":null,"c":"3"},"finalizers":["x.io/two"],
            "ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"o2","uid":"u2"}]}}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"], json!({"k": "v", "new": "n"}));
    assert_eq!(body["metadata"]["labels"], json!({"a": "1", "c": "3"}));
    assert_eq!(
        body["metadata"]["finalizers"],
        json!(["x.io/two", "x.io/one"])
    );
    let uids: Vec<&str> = body["metadata"]["ownerReferences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["uid"].as_str().unwrap())
        .collect();
    assert_eq!(uids, ["u2", "u1"]);

    // Directives: delete an owner by uid, a finalizer by value, replace the labels.
    let (status, body) = patch(
        &server,
        CM,
        r#"{"metadata":{"labels":{"$patch":"replace","z":"26"},"$deleteFromPrimitiveList/finalizers":["x.io/one"],
            "ownerReferences":[{"uid":"u1","$patch":"delete"}]}}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["metadata"]["labels"], json!({"z": "26"}));
    assert_eq!(body["metadata"]["finalizers"], json!(["x.io/two"]));
    assert_eq!(
        body["metadata"]["ownerReferences"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // A ServiceAccount's secrets merge by name.
    create(&server, "/api/v1/namespaces/smp/serviceaccounts", json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"}, "secrets": [{"name": "s1"}]})).await;
    let (status, body) = patch(
        &server,
        "/api/v1/namespaces/smp/serviceaccounts/sa",
        r#"{"secrets":[{"name":"s2"}]}"#,
    )
    .await;
    assert_eq!(
        (status, body["secrets"].clone()),
        (200, json!([{"name": "s2"}, {"name": "s1"}]))
    );
}

#[tokio::test]
async fn dry_run_preconditions_and_field_validation() {
    let server = support::start().await;
    let created = setup(&server).await;
    let rv = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();

    let (status, body) = patch(
        &server,
        &format!("{CM}?dryRun=All"),
        r#"{"data":{"k":"dry"}}"#,
    )
    .await;
    assert_eq!((status, body["data"]["k"].as_str()), (200, Some("dry")));
    let (_, stored, _) = call(&server, Method::GET, CM, "application/json", b"").await;
    assert_eq!(stored["data"]["k"], "v", "a dry run does not persist");

    // kubectl diff sends the resourceVersion it read as a precondition.
    let stale = r#"{"data":{"k":"late"},"metadata":{"resourceVersion":"1"}}"#;
    let (status, body) = patch(&server, CM, stale).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (409, Some("Conflict")),
        "{body}"
    );
    let fresh = format!(r#"{{"data":{{"k":"on time"}},"metadata":{{"resourceVersion":"{rv}"}}}}"#);
    let (status, _) = patch(&server, CM, &fresh).await;
    assert_eq!(status, 200);

    // The patch text's repeated keys and the result's unknown fields, as for other bodies.
    let (status, body) = patch(
        &server,
        &format!("{CM}?fieldValidation=Strict"),
        r#"{"data":{"k":"1","k":"2"}}"#,
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains(r#"duplicate field "data.k""#),
        "{body}"
    );
    let (status, body) = patch(
        &server,
        &format!("{CM}?fieldValidation=Strict"),
        r#"{"spec":{"x":1}}"#,
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains(r#"unknown field "spec""#),
        "{body}"
    );
    let (status, _, warnings) = call(
        &server,
        Method::PATCH,
        &format!("{CM}?fieldValidation=Warn"),
        SMP,
        br#"{"spec":{"x":1}}"#,
    )
    .await;
    assert_eq!(status, 200);
    assert!(
        warnings.iter().any(|w| w.contains("unknown field")),
        "{warnings:?}"
    );
}

#[tokio::test]
async fn bad_patches_get_precise_statuses() {
    let server = support::start().await;
    setup(&server).await;
    let expect = |(status, body): (u16, Value), code: u16, reason: &str, message: &str| {
        assert_eq!(
            (status, body["reason"].as_str()),
            (code, Some(reason)),
            "{body}"
        );
        assert!(
            body["message"].as_str().unwrap().contains(message),
            "{message:?} in {body}"
        );
    };
    expect(
        patch(&server, CM, "{not json").await,
        400,
        "BadRequest",
        "not valid JSON",
    );
    expect(
        patch(&server, CM, "[1]").await,
        400,
        "BadRequest",
        "must be a JSON object",
    );
    expect(
        patch(&server, CM, r#"{"metadata":{"labels":{"$patch":"merge"}}}"#).await,
        400,
        "BadRequest",
        "metadata.labels.$patch",
    );
    expect(
        patch(
            &server,
            CM,
            r#"{"metadata":{"ownerReferences":[{"name":"no uid"}]}}"#,
        )
        .await,
        400,
        "BadRequest",
        "merge key \"uid\"",
    );
    expect(
        patch(&server, CM, r#"{"$bogus":1}"#).await,
        400,
        "BadRequest",
        "unknown directive \"$bogus\"",
    );
    expect(
        patch(&server, CM, r#"{"metadata":{"$retainKeys":"name"}}"#).await,
        400,
        "BadRequest",
        "retainKeys",
    );
    expect(
        patch(&server, CM, r#"{"metadata":{"finalizers":[["nested"]]}}"#).await,
        422,
        "Invalid",
        "lists of lists",
    );
    // Identity: the name and namespace are the URL's, the uid is immutable.
    expect(
        patch(&server, CM, r#"{"metadata":{"name":"other"}}"#).await,
        400,
        "BadRequest",
        "the name of the object (other) does not match the name on the URL (cm)",
    );
    expect(
        patch(&server, CM, r#"{"metadata":{"namespace":"elsewhere"}}"#).await,
        400,
        "BadRequest",
        "the namespace of the object (elsewhere) does not match the namespace on the URL (smp)",
    );
    expect(
        patch(&server, CM, r#"{"metadata":{"uid":"forged"}}"#).await,
        422,
        "Invalid",
        "metadata.uid: Invalid value: \"forged\": field is immutable",
    );
    // Server-side apply is another patch type, with rules of its own: a fieldManager is
    // required.
    let (status, _, _) = call(
        &server,
        Method::PATCH,
        CM,
        "application/apply-patch+yaml",
        b"{}",
    )
    .await;
    assert_eq!(status, 422);
}
