//! The API over real HTTP on loopback, against the real handlers and a SQLite store: what
//! kubectl, kube-rs and the Python client send, and what they need back.

use crate::support;

on_both_backends!(
    version_and_discovery,
    crud_with_status_errors,
    lists_tables_and_metadata,
    pages_expire_with_compaction_and_go_on_with_the_answers_token,
    bad_input_gets_a_precise_status,
    watches_stream_events_bookmarks_and_expiry,
    a_watch_gets_a_bookmark_just_before_its_timeout,
    metadata_only_watches,
    namespace_lifecycle,
    status_and_finalize_subresources,
    protobuf_bodies_and_answers,
    protobuf_watch_frames,
    protobuf_delete_options,
);

use support::{Answer, Server, call};

use bytes::Bytes;
use genplane_api::core::configmap;
use genplane_apimachinery::codec::protobuf;
use genplane_apimachinery::meta::schemas::STATUS;
use genplane_storage::Storage;
use genplane_test_support::eventually_async;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request};
use serde_json::{Value, json};

async fn get(server: &Server, path: &str, accept: &str) -> Answer {
    call(server, Method::GET, path, &[("accept", accept)], None).await
}

async fn post(server: &Server, path: &str, body: Value) -> Answer {
    call(
        server,
        Method::POST,
        path,
        &[("content-type", "application/json")],
        Some(serde_json::to_vec(&body).unwrap()),
    )
    .await
}

fn configmap(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}, "data": {"k": "v"}})
}

async fn version_and_discovery(server: Server) {
    let version = get(&server, "/version?timeout=5s", "application/json, */*")
        .await
        .json();
    assert_eq!(
        (version["major"].as_str(), version["minor"].as_str()),
        (Some("1"), Some("33"))
    );

    let aggregated = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
    let api = get(&server, "/api?timeout=32s", aggregated).await;
    assert_eq!(
        api.header("content-type"),
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    );
    let resources = api.json()["items"][0]["versions"][0]["resources"].clone();
    let names: Vec<&str> = resources
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["resource"].as_str().unwrap())
        .collect();
    for expected in [
        "namespaces",
        "configmaps",
        "secrets",
        "serviceaccounts",
        "events",
        "resourcequotas",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    let apis = get(&server, "/apis", aggregated).await.json();
    let groups: Vec<&str> = apis["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["metadata"]["name"].as_str().unwrap())
        .collect();
    assert!(
        groups.contains(&"coordination.k8s.io") && groups.contains(&"events.k8s.io"),
        "{groups:?}"
    );

    assert_eq!(
        get(&server, "/api", "application/json").await.json()["kind"],
        "APIVersions"
    );
    assert_eq!(
        get(&server, "/apis", "application/json").await.json()["kind"],
        "APIGroupList"
    );
    let v1 = get(&server, "/api/v1", "application/json, */*")
        .await
        .json();
    let cm = v1["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "configmaps")
        .unwrap()
        .clone();
    assert_eq!(cm["shortNames"], json!(["cm"]));
    assert_eq!(
        get(&server, "/apis/coordination.k8s.io/v1", "application/json")
            .await
            .json()["groupVersion"],
        "coordination.k8s.io/v1"
    );
    let missing = get(&server, "/apis/apps/v1", "application/json").await;
    assert_eq!(
        (missing.status, missing.json()["reason"].as_str()),
        (404, Some("NotFound"))
    );
}

async fn crud_with_status_errors(server: Server) {
    assert_eq!(
        post(
            &server,
            "/api/v1/namespaces",
            json!({"metadata": {"name": "team"}})
        )
        .await
        .status,
        201
    );
    let created = post(
        &server,
        "/api/v1/namespaces/team/configmaps",
        configmap("cm", json!({"app": "web"})),
    )
    .await;
    assert_eq!(created.status, 201);
    let object = created.json();
    assert_eq!(object["metadata"]["namespace"], "team");
    let fetched = get(
        &server,
        "/api/v1/namespaces/team/configmaps/cm",
        "application/json",
    )
    .await;
    assert_eq!((fetched.status, fetched.json()), (200, object.clone()));
    let again = post(
        &server,
        "/api/v1/namespaces/team/configmaps",
        configmap("cm", json!({})),
    )
    .await;
    assert_eq!(
        (again.status, again.json()["reason"].as_str()),
        (409, Some("AlreadyExists"))
    );
    let missing = get(
        &server,
        "/api/v1/namespaces/team/configmaps/nope",
        "application/json",
    )
    .await;
    assert_eq!(missing.header("content-type"), "application/json");
    assert_eq!(missing.json()["message"], "configmaps \"nope\" not found");

    // Replace with a stale resourceVersion, then a merge patch, a JSON patch with test ops.
    let mut stale = object.clone();
    stale["metadata"]["resourceVersion"] = json!("1");
    let conflict = call(
        &server,
        Method::PUT,
        "/api/v1/namespaces/team/configmaps/cm",
        &[("content-type", "application/json")],
        Some(serde_json::to_vec(&stale).unwrap()),
    )
    .await;
    assert_eq!(
        (conflict.status, conflict.json()["reason"].as_str()),
        (409, Some("Conflict"))
    );
    let merge = call(
        &server,
        Method::PATCH,
        "/api/v1/namespaces/team/configmaps/cm",
        &[("content-type", "application/merge-patch+json")],
        Some(br#"{"data":{"k":"patched"}}"#.to_vec()),
    )
    .await;
    assert_eq!(
        (merge.status, merge.json()["data"]["k"].as_str()),
        (200, Some("patched"))
    );
    let test_fails = br#"[{"op":"test","path":"/data/k","value":"other"},{"op":"replace","path":"/data/k","value":"x"}]"#;
    let refused = call(
        &server,
        Method::PATCH,
        "/api/v1/namespaces/team/configmaps/cm",
        &[("content-type", "application/json-patch+json")],
        Some(test_fails.to_vec()),
    )
    .await;
    assert_eq!(refused.status, 422);
    let test_passes = br#"[{"op":"test","path":"/data/k","value":"patched"},{"op":"add","path":"/metadata/finalizers","value":["example.com/f"]}]"#;
    let applied = call(
        &server,
        Method::PATCH,
        "/api/v1/namespaces/team/configmaps/cm",
        &[("content-type", "application/json-patch+json")],
        Some(test_passes.to_vec()),
    )
    .await;
    assert_eq!(
        (
            applied.status,
            applied.json()["metadata"]["finalizers"].clone()
        ),
        (200, json!(["example.com/f"]))
    );
    let strategic = call(
        &server,
        Method::PATCH,
        "/api/v1/namespaces/team/configmaps/cm",
        &[("content-type", "application/strategic-merge-patch+json")],
        Some(br#"{"data":{"s":"1"}}"#.to_vec()),
    )
    .await;
    assert_eq!(
        (strategic.status, strategic.json()["data"]["s"].as_str()),
        (200, Some("1"))
    );

    // Deletion waits for the finalizer, then goes when it is removed.
    let pending = call(
        &server,
        Method::DELETE,
        "/api/v1/namespaces/team/configmaps/cm",
        &[],
        Some(br#"{"propagationPolicy":"Background"}"#.to_vec()),
    )
    .await;
    assert_eq!(pending.status, 200);
    assert!(pending.json()["metadata"]["deletionTimestamp"].is_string());
    let release = br#"[{"op":"remove","path":"/metadata/finalizers"}]"#;
    call(
        &server,
        Method::PATCH,
        "/api/v1/namespaces/team/configmaps/cm",
        &[("content-type", "application/json-patch+json")],
        Some(release.to_vec()),
    )
    .await;
    assert_eq!(
        get(
            &server,
            "/api/v1/namespaces/team/configmaps/cm",
            "application/json"
        )
        .await
        .status,
        404
    );

    post(
        &server,
        "/api/v1/namespaces/team/configmaps",
        configmap("plain", json!({})),
    )
    .await;
    let deleted = call(
        &server,
        Method::DELETE,
        "/api/v1/namespaces/team/configmaps/plain",
        &[],
        None,
    )
    .await;
    assert_eq!(
        (deleted.status, deleted.json()["status"].as_str()),
        (200, Some("Success"))
    );
    assert_eq!(deleted.json()["details"]["name"], "plain");
}

async fn lists_tables_and_metadata(server: Server) {
    for (name, app) in [("a", "web"), ("b", "db"), ("c", "web")] {
        assert_eq!(
            post(
                &server,
                "/api/v1/namespaces/default/configmaps",
                configmap(name, json!({"app": app}))
            )
            .await
            .status,
            201
        );
    }
    let answer = get(
        &server,
        "/api/v1/namespaces/default/configmaps?&limit=500",
        "application/json",
    )
    .await;
    let list = answer.json();
    // Encoded item by item, the answer is still the list's compact JSON (in upstream's field
    // order) and a newline.
    let mut whole = genplane_api::order::to_vec(&list);
    whole.push(b'\n');
    assert_eq!(
        String::from_utf8_lossy(&answer.body),
        String::from_utf8_lossy(&whole)
    );
    let empty = get(
        &server,
        "/api/v1/namespaces/kube-public/configmaps",
        "application/json",
    )
    .await
    .json();
    assert_eq!(empty["items"], json!([]));
    assert_eq!(list["kind"], "ConfigMapList");
    assert_eq!(list["items"].as_array().unwrap().len(), 3);
    assert!(list["metadata"]["resourceVersion"].is_string());
    let selected = get(
        &server,
        "/api/v1/configmaps?labelSelector=app%3Dweb",
        "application/json",
    )
    .await
    .json();
    assert_eq!(selected["items"].as_array().unwrap().len(), 2);
    let by_name = get(
        &server,
        "/api/v1/configmaps?fieldSelector=metadata.name%3Db",
        "application/json",
    )
    .await
    .json();
    assert_eq!(by_name["items"][0]["metadata"]["name"], "b");
    let bad_field = get(
        &server,
        "/api/v1/configmaps?fieldSelector=spec.x%3D1",
        "application/json",
    )
    .await;
    assert_eq!(
        (bad_field.status, bad_field.json()["message"].as_str()),
        (400, Some("field label not supported: spec.x"))
    );

    let table_accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
    let table = get(
        &server,
        "/api/v1/namespaces/default/configmaps?limit=500",
        table_accept,
    )
    .await;
    assert_eq!(
        table.header("content-type"),
        "application/json;as=Table;v=v1;g=meta.k8s.io"
    );
    let table = table.json();
    assert_eq!(table["kind"], "Table");
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(columns, ["Name", "Data", "Age"]);
    assert_eq!(table["rows"][0]["cells"][0], "a");
    assert_eq!(table["rows"][0]["cells"][1], 1);
    assert_eq!(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(
        table["rows"][0]["object"]["metadata"]["labels"]["app"], "web",
        "for --show-labels"
    );

    let metadata = get(
        &server,
        "/api/v1/namespaces/default/configmaps",
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
    )
    .await
    .json();
    assert_eq!(metadata["kind"], "PartialObjectMetadataList");
    assert!(metadata["items"][0].get("data").is_none());
    let yaml = get(
        &server,
        "/api/v1/namespaces/default/configmaps/a",
        "application/yaml",
    )
    .await;
    assert_eq!(yaml.header("content-type"), "application/yaml");
    assert!(String::from_utf8(yaml.body).unwrap().contains("name: a"));
    let proto = get(
        &server,
        "/api/v1/namespaces/default/configmaps",
        "application/vnd.kubernetes.protobuf",
    )
    .await;
    assert_eq!(proto.status, 200);
    assert_eq!(
        proto.header("content-type"),
        "application/vnd.kubernetes.protobuf"
    );
    let list = protobuf::decode_list(&proto.body, &configmap::SCHEMA).unwrap();
    assert_eq!(list["kind"], "ConfigMapList");
    assert_eq!(list["items"][0]["metadata"]["name"], "a");
    assert_eq!(list["items"][0]["data"], json!({"k": "v"}));

    // A kind that is never stored has no table convertor: asked for a Table, a 406 (upstream's
    // conformance case "should return a 406 for a backend which does not implement
    // metadata"), as for a TokenRequest.
    let table = "application/json;as=Table;v=v1;g=meta.k8s.io";
    assert_eq!(
        post(
            &server,
            "/api/v1/namespaces/default/serviceaccounts",
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}})
        )
        .await
        .status,
        201
    );
    for (path, body) in [
        (
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "spec": {"nonResourceAttributes": {"path": "/", "verb": "get"}}}),
        ),
        (
            "/api/v1/namespaces/default/serviceaccounts/robot/token",
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}),
        ),
    ] {
        let answer = call(
            &server,
            Method::POST,
            path,
            &[("content-type", "application/json"), ("accept", table)],
            Some(serde_json::to_vec(&body).unwrap()),
        )
        .await;
        assert_eq!(answer.status, 406, "{path}: {}", answer.json());
        assert_eq!(answer.json()["reason"], "NotAcceptable", "{path}");
        // JSON is still answered.
        let answer = post(&server, path, body).await;
        assert_eq!(answer.status, 201, "{path}: {}", answer.json());
    }
}

async fn bad_input_gets_a_precise_status(server: Server) {
    let path = "/api/v1/namespaces/default/configmaps";
    // (what, content type, body, code, reason)
    type Case<'a> = (&'a str, Option<&'a str>, Vec<u8>, u16, &'a str);
    let cases: Vec<Case<'_>> = vec![
        (
            "malformed JSON",
            Some("application/json"),
            b"{not json".to_vec(),
            400,
            "BadRequest",
        ),
        (
            "kind mismatch",
            Some("application/json"),
            br#"{"kind":"Secret","metadata":{"name":"x"}}"#.to_vec(),
            400,
            "BadRequest",
        ),
        (
            "apiVersion mismatch",
            Some("application/json"),
            br#"{"apiVersion":"v2","metadata":{"name":"x"}}"#.to_vec(),
            400,
            "BadRequest",
        ),
        (
            "invalid name",
            Some("application/json"),
            br#"{"metadata":{"name":"Not_Valid"}}"#.to_vec(),
            422,
            "Invalid",
        ),
        (
            "unknown content type",
            Some("text/plain"),
            b"hello".to_vec(),
            415,
            "UnsupportedMediaType",
        ),
        (
            "too large",
            Some("application/json"),
            vec![b' '; 3 * 1024 * 1024 + 1],
            413,
            "RequestEntityTooLarge",
        ),
        (
            "not an object",
            Some("application/json"),
            b"[1,2]".to_vec(),
            400,
            "BadRequest",
        ),
        (
            "wrong type",
            Some("application/json"),
            br#"{"metadata":{"name":"x"},"data":{"k":1}}"#.to_vec(),
            400,
            "BadRequest",
        ),
    ];
    for (what, content_type, body, code, reason) in cases {
        let headers: Vec<(&str, &str)> = content_type
            .map(|c| vec![("content-type", c)])
            .unwrap_or_default();
        let answer = call(&server, Method::POST, path, &headers, Some(body)).await;
        assert_eq!(
            (answer.status, answer.json()["reason"].as_str()),
            (code, Some(reason)),
            "{what}: {}",
            String::from_utf8_lossy(&answer.body)
        );
    }
    // No Content-Type at all means JSON (the Python client sends none).
    let untyped = call(
        &server,
        Method::POST,
        path,
        &[],
        Some(serde_json::to_vec(&configmap("untyped", json!({}))).unwrap()),
    )
    .await;
    assert_eq!(untyped.status, 201);
    // Unknown fields: Strict refuses, Warn (the default) warns.
    let unknown = br#"{"metadata":{"name":"strict"},"spec":{"x":1}}"#.to_vec();
    let strict = call(
        &server,
        Method::POST,
        &format!("{path}?fieldValidation=Strict"),
        &[("content-type", "application/json")],
        Some(unknown.clone()),
    )
    .await;
    assert_eq!(strict.status, 400);
    assert!(
        strict.json()["message"]
            .as_str()
            .unwrap()
            .contains("unknown field \"spec\""),
        "{}",
        strict.json()
    );
    let warned = call(
        &server,
        Method::POST,
        path,
        &[("content-type", "application/json")],
        Some(unknown),
    )
    .await;
    assert_eq!(warned.status, 201);
    assert!(
        warned.header("warning").contains("unknown field"),
        "{:?}",
        warned.headers
    );
    // Repeated keys: Strict refuses them with the unknown fields, Warn warns, Ignore keeps the
    // last value silently; a merge patch is read the same way.
    let repeated =
        br#"{"metadata":{"name":"dup","name":"dup"},"data":{"k":"1","k":"2"},"extra":1}"#.to_vec();
    let strict = call(
        &server,
        Method::POST,
        &format!("{path}?fieldValidation=Strict"),
        &[("content-type", "application/json")],
        Some(repeated.clone()),
    )
    .await;
    assert_eq!(strict.status, 400);
    assert!(
        strict.json()["message"].as_str().unwrap().ends_with(
            r#"strict decoding error: duplicate field "metadata.name", duplicate field "data.k", unknown field "extra""#
        ),
        "{}",
        strict.json()
    );
    // Problems are listed in document order, as upstream's strict decoder meets them.
    let unknown_first = call(
        &server,
        Method::POST,
        &format!("{path}?fieldValidation=Strict"),
        &[("content-type", "application/json")],
        Some(
            br#"{"extra":1,"data":{"k":"1","other":"x","k":"2"},"metadata":{"name":"dup2"}}"#
                .to_vec(),
        ),
    )
    .await;
    assert_eq!(unknown_first.status, 400);
    assert!(
        unknown_first.json()["message"]
            .as_str()
            .unwrap()
            .ends_with(r#"strict decoding error: unknown field "extra", duplicate field "data.k""#),
        "{}",
        unknown_first.json()
    );
    let warned = call(
        &server,
        Method::POST,
        &format!("{path}?fieldValidation=Warn"),
        &[("content-type", "application/json")],
        Some(repeated.clone()),
    )
    .await;
    assert_eq!(warned.status, 201);
    let warnings: Vec<_> = warned
        .headers
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains(r#"duplicate field \"data.k\""#)),
        "{warnings:?}"
    );
    assert_eq!(warned.json()["data"]["k"], "2");
    let patched = call(
        &server,
        Method::PATCH,
        &format!("{path}/dup?fieldValidation=Strict"),
        &[("content-type", "application/merge-patch+json")],
        Some(br#"{"data":{"k":"3","k":"4"}}"#.to_vec()),
    )
    .await;
    assert_eq!(patched.status, 400, "{}", patched.json());
    assert!(
        patched.json()["message"]
            .as_str()
            .unwrap()
            .contains(r#"duplicate field "data.k""#),
        "{}",
        patched.json()
    );
    let ignored = call(
        &server,
        Method::PATCH,
        &format!("{path}/dup?fieldValidation=Ignore"),
        &[("content-type", "application/merge-patch+json")],
        Some(br#"{"data":{"k":"3","k":"4"}}"#.to_vec()),
    )
    .await;
    assert_eq!(ignored.status, 200);
    assert!(ignored.headers.get("warning").is_none());
    assert_eq!(ignored.json()["data"]["k"], "4");
    let across = post(
        &server,
        "/api/v1/configmaps",
        configmap("nowhere", json!({})),
    )
    .await;
    assert_eq!(
        (across.status, across.json()["reason"].as_str()),
        (404, Some("NotFound")),
        "no create across namespaces"
    );
    let verb = call(&server, Method::DELETE, "/api/v1/namespaces", &[], None).await;
    assert_eq!(
        (verb.status, verb.json()["reason"].as_str()),
        (405, Some("MethodNotAllowed"))
    );
}

/// Reads watch lines from a streaming response until `count` lines arrived.
async fn watch_lines(
    server: &Server,
    path: &str,
    count: usize,
    during: impl std::future::Future<Output = ()>,
) -> Vec<Value> {
    watch_lines_accepting(server, path, "application/json", count, during).await
}

/// [`watch_lines`] asking for `accept`.
async fn watch_lines_accepting(
    server: &Server,
    path: &str,
    accept: &str,
    count: usize,
    during: impl std::future::Future<Output = ()>,
) -> Vec<Value> {
    let request = Request::get(path)
        .header("accept", accept)
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = server.send(request).await;
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    during.await;
    let mut buffer = Vec::new();
    let mut lines = Vec::new();
    while lines.len() < count {
        let frame = tokio::time::timeout(genplane_test_support::DEADLINE, body.frame())
            .await
            .expect("a watch line in time")
            .unwrap()
            .unwrap();
        buffer.extend_from_slice(frame.data_ref().unwrap());
        while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=end).collect();
            lines.push(serde_json::from_slice(&line).unwrap());
        }
    }
    lines
}

/// As upstream's watch cache: a watch that asked for bookmarks gets one shortly before its
/// `timeoutSeconds` end it, so that its client resumes from there without relisting.
async fn a_watch_gets_a_bookmark_just_before_its_timeout(server: Server) {
    let rv = get(
        &server,
        "/api/v1/namespaces/default/configmaps",
        "application/json",
    )
    .await
    .json()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!(
        "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=3"
    );
    // The whole stream, until the server ends it at its timeout.
    let answer = get(&server, &path, "application/json").await;
    assert_eq!(answer.status, 200);
    let lines: Vec<Value> = answer
        .body
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    let last = lines.last().expect("a bookmark before the end");
    assert_eq!(last["type"], "BOOKMARK", "{lines:?}");
    let bookmarked: u64 = last["object"]["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(bookmarked >= rv.parse().unwrap(), "{last}");

    // Without allowWatchBookmarks there is none.
    let path = format!(
        "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=3"
    );
    let answer = get(&server, &path, "application/json").await;
    assert!(
        answer.body.is_empty(),
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
}

/// One page of `limit=1` under `path` (`continue` appended when given): its names, list
/// metadata and the whole answer.
async fn page(server: &Server, path: &str, token: Option<&str>) -> (Vec<String>, Value, Answer) {
    let mut uri = format!("{path}?limit=1");
    if let Some(token) = token {
        uri.push_str("&continue=");
        uri.push_str(token);
    }
    let answer = get(server, &uri, "application/json").await;
    let body = answer.json();
    let names = body["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|i| i["metadata"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default();
    (names, body["metadata"].clone(), answer)
}

/// Paginated lists as clients page them (`limit=1`, through the watch cache): every page reads
/// the first page's snapshot; once the history is compacted the next page is upstream's 410
/// with a token in `metadata.continue` that finishes the list at the current state.
async fn pages_expire_with_compaction_and_go_on_with_the_answers_token(server: Server) {
    const PATH: &str = "/api/v1/namespaces/default/configmaps";
    for i in 0..5 {
        let created = post(&server, PATH, configmap(&format!("p-{i}"), json!({}))).await;
        assert_eq!(created.status, 201);
    }
    let (first, meta, _) = page(&server, PATH, None).await;
    assert_eq!(first, ["p-0"]);
    assert_eq!(meta["remainingItemCount"], 4);
    let snapshot = meta["resourceVersion"].as_str().unwrap().to_owned();
    let (second, meta, _) = page(&server, PATH, meta["continue"].as_str()).await;
    assert_eq!(second, ["p-1"]);
    assert_eq!(meta["resourceVersion"], snapshot.as_str(), "one snapshot");
    let token = meta["continue"].as_str().unwrap().to_owned();

    // Changes after the snapshot, then the history is compacted past it.
    assert_eq!(
        post(&server, PATH, configmap("p-5", json!({})))
            .await
            .status,
        201
    );
    let deleted = call(&server, Method::DELETE, &format!("{PATH}/p-2"), &[], None).await;
    assert_eq!(deleted.status, 200);
    let latest: i64 =
        get(&server, PATH, "application/json").await.json()["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
    // The cache has seen the changes (what resourceVersion=0 reads is its memory), so no layer
    // still holds the snapshot.
    eventually_async(&format!("the cache to reach {latest}"), || async {
        let cached = get(
            &server,
            &format!("{PATH}?resourceVersion=0"),
            "application/json",
        )
        .await
        .json();
        let at: i64 = cached["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        (at >= latest).then_some(())
    })
    .await;
    let current = server.storage.current_revision().await.unwrap();
    server.storage.compact(current).await.unwrap();

    let (_, _, expired) = page(&server, PATH, Some(&token)).await;
    assert_eq!(expired.status, 410);
    // In protobuf too (read by types generated apart from genplane's codec).
    let in_protobuf = get(
        &server,
        &format!("{PATH}?limit=1&continue={token}"),
        PROTOBUF,
    )
    .await;
    let read: k8s_pb::apimachinery::pkg::apis::meta::v1::Status =
        independent::open(&in_protobuf.body, "Status");
    assert_eq!(
        (read.code, read.reason.as_deref()),
        (Some(410), Some("Expired"))
    );
    assert_eq!(
        read.metadata.and_then(|m| m.r#continue),
        expired.json()["metadata"]["continue"]
            .as_str()
            .map(str::to_owned)
    );
    let status = expired.json();
    assert_eq!(
        (status["reason"].as_str(), status["message"].as_str()),
        (
            Some("Expired"),
            Some(
                "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list."
            )
        )
    );
    // The answer's token finishes the list from where it stopped, at the current state: p-2
    // is gone, p-5 is there, and the rest is one snapshot again.
    let mut token = status["metadata"]["continue"].as_str().unwrap().to_owned();
    let (mut rest, mut versions) = (Vec::new(), Vec::new());
    loop {
        let (names, meta, answer) = page(&server, PATH, Some(&token)).await;
        assert_eq!(
            answer.status,
            200,
            "{}",
            String::from_utf8_lossy(&answer.body)
        );
        rest.extend(names);
        versions.push(meta["resourceVersion"].as_str().unwrap().to_owned());
        match meta["continue"].as_str() {
            Some(next) => token = next.to_owned(),
            None => break,
        }
    }
    assert_eq!(rest, ["p-3", "p-4", "p-5"]);
    assert!(versions.iter().all(|v| v == &versions[0] && v != &snapshot));
}

async fn watches_stream_events_bookmarks_and_expiry(server: Server) {
    post(
        &server,
        "/api/v1/namespaces/default/configmaps",
        configmap("first", json!({})),
    )
    .await;
    let rv = get(
        &server,
        "/api/v1/namespaces/default/configmaps",
        "application/json",
    )
    .await
    .json()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let lines = watch_lines(
        &server,
        &format!("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv}"),
        2,
        async {
            post(
                &server,
                "/api/v1/namespaces/default/configmaps",
                configmap("second", json!({})),
            )
            .await;
            call(
                &server,
                Method::DELETE,
                "/api/v1/namespaces/default/configmaps/first",
                &[],
                None,
            )
            .await;
        },
    )
    .await;
    assert_eq!(
        (
            lines[0]["type"].as_str(),
            lines[0]["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some("second"))
    );
    assert_eq!(
        (
            lines[1]["type"].as_str(),
            lines[1]["object"]["metadata"]["name"].as_str()
        ),
        (Some("DELETED"), Some("first"))
    );

    // kube-rs's streaming list: initial events, then the bookmark that ends them.
    let streaming = "/api/v1/namespaces/default/configmaps?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion=0";
    let lines = watch_lines(&server, streaming, 2, async {}).await;
    assert_eq!(lines[0]["type"], "ADDED");
    assert_eq!(lines[1]["type"], "BOOKMARK");
    assert_eq!(lines[1]["object"]["kind"], "ConfigMap");
    assert_eq!(lines[1]["object"]["apiVersion"], "v1");
    assert_eq!(
        lines[1]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    // Asked as Tables (a reflector of kubectl's): every event a Table carrying its object's
    // resourceVersion, and the bookmark a Table of one row whose object's metadata carries
    // the annotation; asked as partial metadata, the bookmark is partial metadata.
    let lines = watch_lines_accepting(
        &server,
        streaming,
        "application/json;as=Table;v=v1;g=meta.k8s.io",
        2,
        async {},
    )
    .await;
    let (added, bookmark) = (&lines[0]["object"], &lines[1]["object"]);
    assert_eq!(added["kind"], "Table", "{added}");
    assert_eq!(
        added["metadata"]["resourceVersion"],
        added["rows"][0]["object"]["metadata"]["resourceVersion"],
        "{added}"
    );
    assert_eq!(lines[1]["type"], "BOOKMARK");
    assert_eq!(bookmark["kind"], "Table", "{bookmark}");
    assert_eq!(bookmark["apiVersion"], "meta.k8s.io/v1", "{bookmark}");
    let row = &bookmark["rows"][0]["object"];
    assert_eq!(row["kind"], "PartialObjectMetadata", "{bookmark}");
    assert_eq!(
        row["metadata"]["annotations"]["k8s.io/initial-events-end"], "true",
        "{bookmark}"
    );
    assert_eq!(
        bookmark["metadata"]["resourceVersion"], row["metadata"]["resourceVersion"],
        "{bookmark}"
    );
    let lines = watch_lines_accepting(
        &server,
        streaming,
        "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io",
        2,
        async {},
    )
    .await;
    assert_eq!(lines[1]["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(
        lines[1]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );

    // A watch from a compacted revision older than the watch cache (which, as upstream's,
    // serves whatever its window holds): 200, then an ERROR event with a 410 Expired Status.
    server
        .storage
        .compact(server.storage.current_revision().await.unwrap())
        .await
        .unwrap();
    let server = server.restarted().await;
    let lines = watch_lines(
        &server,
        "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=2",
        1,
        async {},
    )
    .await;
    assert_eq!(lines[0]["type"], "ERROR");
    assert_eq!(
        (
            lines[0]["object"]["code"].as_i64(),
            lines[0]["object"]["reason"].as_str()
        ),
        (Some(410), Some("Expired"))
    );
}

/// kube-rs' and client-go's metadata informers watch with `as=PartialObjectMetadata` (the
/// single-object form: each event holds one object).
async fn metadata_only_watches(server: Server) {
    let rv = get(
        &server,
        "/api/v1/namespaces/default/configmaps",
        "application/json",
    )
    .await
    .json()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let lines = watch_lines_accepting(
        &server,
        &format!("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}"),
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        1,
        async {
            let mut cm = configmap("meta", json!({"app": "web"}));
            cm["data"] = json!({"secret-ish": "value"});
            post(&server, "/api/v1/namespaces/default/configmaps", cm).await;
        },
    )
    .await;
    assert_eq!(lines[0]["type"], "ADDED");
    let object = &lines[0]["object"];
    assert_eq!(object["kind"], "PartialObjectMetadata");
    assert_eq!(object["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(object["metadata"]["name"], "meta");
    assert_eq!(object["metadata"]["labels"]["app"], "web");
    assert!(object.get("data").is_none(), "{object}");
}

async fn namespace_lifecycle(server: Server) {
    let missing = post(
        &server,
        "/api/v1/namespaces/nowhere/configmaps",
        configmap("a", json!({})),
    )
    .await;
    assert_eq!(
        (missing.status, missing.json()["message"].as_str()),
        (404, Some("namespaces \"nowhere\" not found"))
    );
    assert_eq!(
        post(
            &server,
            "/api/v1/namespaces",
            json!({"metadata": {"name": "leaving"}})
        )
        .await
        .status,
        201
    );
    assert_eq!(
        post(
            &server,
            "/api/v1/namespaces/leaving/configmaps",
            configmap("a", json!({}))
        )
        .await
        .status,
        201
    );
    let deleting = call(
        &server,
        Method::DELETE,
        "/api/v1/namespaces/leaving",
        &[],
        None,
    )
    .await;
    assert_eq!(
        (deleting.status, deleting.json()["status"]["phase"].as_str()),
        (200, Some("Terminating"))
    );
    let refused = post(
        &server,
        "/api/v1/namespaces/leaving/configmaps",
        configmap("b", json!({})),
    )
    .await;
    assert_eq!(
        (refused.status, refused.json()["reason"].as_str()),
        (403, Some("Forbidden"))
    );
    assert_eq!(
        refused.json()["details"]["causes"][0]["reason"],
        "NamespaceTerminating"
    );
    let immortal = call(
        &server,
        Method::DELETE,
        "/api/v1/namespaces/default",
        &[],
        None,
    )
    .await;
    assert_eq!(
        (immortal.status, immortal.json()["message"].as_str()),
        (
            403,
            Some("namespaces \"default\" is forbidden: this namespace may not be deleted")
        )
    );
}

async fn status_and_finalize_subresources(server: Server) {
    let created = post(
        &server,
        "/api/v1/namespaces",
        json!({"metadata": {"name": "team"}}),
    )
    .await
    .json();
    let status = get(
        &server,
        "/api/v1/namespaces/team/status",
        "application/json",
    )
    .await;
    assert_eq!(
        (status.status, status.json()["metadata"]["name"].as_str()),
        (200, Some("team"))
    );

    // A status write keeps the stored spec.
    let mut body = created.clone();
    body["spec"]["finalizers"] = json!(["example.com/changed"]);
    let written = call(
        &server,
        Method::PUT,
        "/api/v1/namespaces/team/status",
        &[("content-type", "application/json")],
        Some(serde_json::to_vec(&body).unwrap()),
    )
    .await;
    assert_eq!(
        written.status,
        200,
        "{}",
        String::from_utf8_lossy(&written.body)
    );
    assert_eq!(written.json()["spec"]["finalizers"], json!(["kubernetes"]));
    assert_eq!(
        call(
            &server,
            Method::DELETE,
            "/api/v1/namespaces/team/status",
            &[],
            None
        )
        .await
        .status,
        405
    );
    assert_eq!(
        get(&server, "/api/v1/namespaces/team/bogus", "application/json")
            .await
            .status,
        404
    );

    // Deleting leaves it Terminating until /finalize empties spec.finalizers; then it is gone.
    let terminating = call(
        &server,
        Method::DELETE,
        "/api/v1/namespaces/team",
        &[],
        None,
    )
    .await
    .json();
    assert_eq!(terminating["status"]["phase"], "Terminating");
    let mut finalized = terminating.clone();
    finalized["spec"]["finalizers"] = json!([]);
    finalized["status"]["phase"] = json!("Active");
    let done = call(
        &server,
        Method::PUT,
        "/api/v1/namespaces/team/finalize",
        &[("content-type", "application/json")],
        Some(serde_json::to_vec(&finalized).unwrap()),
    )
    .await;
    assert_eq!(done.status, 200, "{}", String::from_utf8_lossy(&done.body));
    assert_eq!(
        get(&server, "/api/v1/namespaces/team", "application/json")
            .await
            .status,
        404
    );
}

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
/// What kubectl (client-go ≥ 1.31) sends on typed commands.
const PROTOBUF_FIRST: &str = "application/vnd.kubernetes.protobuf,application/json";

async fn send_protobuf(server: &Server, method: Method, path: &str, body: Vec<u8>) -> Answer {
    call(
        server,
        method,
        path,
        &[("content-type", PROTOBUF), ("accept", PROTOBUF_FIRST)],
        Some(body),
    )
    .await
}

/// The Status of a protobuf error answer.
/// The wire format read and written with protobuf types generated apart from genplane's
/// codec (k8s-pb), so that a mistake shared by genplane's encoder and decoder cannot pass.
mod independent {
    use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
    use prost::Message;

    /// The message in a `k8s\0` envelope of `kind`.
    pub(super) fn open<M: Message + Default>(bytes: &[u8], kind: &str) -> M {
        let unknown = Unknown::decode(bytes.strip_prefix(b"k8s\0").expect("an envelope")).unwrap();
        assert_eq!(
            unknown.type_meta.and_then(|t| t.kind).as_deref(),
            Some(kind)
        );
        M::decode(unknown.raw.unwrap_or_default().as_slice()).unwrap()
    }

    /// `message` in a `k8s\0` envelope.
    pub(super) fn seal(api_version: &str, kind: &str, message: &impl Message) -> Vec<u8> {
        let unknown = Unknown {
            type_meta: Some(TypeMeta {
                api_version: Some(api_version.to_owned()),
                kind: Some(kind.to_owned()),
            }),
            raw: Some(message.encode_to_vec()),
            content_encoding: Some(String::new()),
            content_type: Some(String::new()),
        };
        let mut bytes = b"k8s\0".to_vec();
        bytes.extend(unknown.encode_to_vec());
        bytes
    }

    /// The whole frames of a protobuf watch stream (a 4-byte big-endian length, then a
    /// `WatchEvent`), and the bytes left over.
    pub(super) fn frames(
        mut stream: &[u8],
    ) -> (
        Vec<k8s_pb::apimachinery::pkg::apis::meta::v1::WatchEvent>,
        &[u8],
    ) {
        let mut events = Vec::new();
        while let Some((head, rest)) = stream.split_first_chunk::<4>() {
            let length = u32::from_be_bytes(*head) as usize;
            if rest.len() < length {
                break;
            }
            events.push(Message::decode(&rest[..length]).unwrap());
            stream = &rest[length..];
        }
        (events, stream)
    }
}

fn proto_status(answer: &Answer) -> (u16, Value) {
    assert_eq!(answer.header("content-type"), PROTOBUF);
    (
        answer.status,
        protobuf::decode(&answer.body, &STATUS).unwrap(),
    )
}

async fn protobuf_bodies_and_answers(server: Server) {
    let collection = "/api/v1/namespaces/default/configmaps";
    let object = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "p", "labels": {"app": "web"}},
        "data": {"a": "b"}, "binaryData": {"bin": "AP8B"}, "immutable": false,
    });
    let created = send_protobuf(
        &server,
        Method::POST,
        &format!("{collection}?fieldManager=kubectl-create&fieldValidation=Strict"),
        protobuf::encode(&object, &configmap::SCHEMA).unwrap(),
    )
    .await;
    assert_eq!(created.status, 201);
    assert_eq!(created.header("content-type"), PROTOBUF);
    let answer = protobuf::decode(&created.body, &configmap::SCHEMA).unwrap();
    assert_eq!(answer["metadata"]["namespace"], "default");
    assert_eq!(answer["immutable"], false);
    // The same answer read by the independent types.
    let read: k8s_pb::api::core::v1::ConfigMap = independent::open(&created.body, "ConfigMap");
    let meta = read.metadata.clone().unwrap();
    assert_eq!(
        (meta.name.as_deref(), meta.namespace.as_deref()),
        (Some("p"), Some("default"))
    );
    assert_eq!(meta.labels, [("app".to_owned(), "web".to_owned())].into());
    assert!(
        meta.uid.is_some() && meta.resource_version.is_some() && meta.creation_timestamp.is_some()
    );
    assert_eq!(read.data, [("a".to_owned(), "b".to_owned())].into());
    assert_eq!(
        read.binary_data,
        [("bin".to_owned(), vec![0, 0xff, 1])].into()
    );
    assert_eq!(read.immutable, Some(false));
    // A body written by the independent types is read as genplane's own.
    let written = k8s_pb::api::core::v1::ConfigMap {
        metadata: Some(k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some("k8s-pb".to_owned()),
            labels: [("app".to_owned(), "web".to_owned())].into(),
            ..Default::default()
        }),
        data: [("a".to_owned(), "b".to_owned())].into(),
        binary_data: [("bin".to_owned(), vec![0, 0xff, 1])].into(),
        immutable: Some(false),
    };
    let from_pb = send_protobuf(
        &server,
        Method::POST,
        collection,
        independent::seal("v1", "ConfigMap", &written),
    )
    .await;
    assert_eq!(from_pb.status, 201);
    let stored_pb = get(&server, &format!("{collection}/k8s-pb"), "application/json")
        .await
        .json();
    assert_eq!(stored_pb["data"], json!({"a": "b"}));
    assert_eq!(stored_pb["binaryData"], json!({"bin": "AP8B"}));
    assert_eq!(stored_pb["metadata"]["labels"], json!({"app": "web"}));
    // Stored as a JSON create of the same object would store it.
    let mut twin = object.clone();
    twin["metadata"]["name"] = json!("j");
    assert_eq!(post(&server, collection, twin).await.status, 201);
    let strip = |mut v: Value| {
        for field in [
            "name",
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "managedFields",
        ] {
            v["metadata"].as_object_mut().unwrap().remove(field);
        }
        v
    };
    let stored = get(&server, &format!("{collection}/p"), "application/json")
        .await
        .json();
    let json_stored = get(&server, &format!("{collection}/j"), "application/json")
        .await
        .json();
    assert_eq!(strip(stored.clone()), strip(json_stored));
    assert_eq!(strip(answer), strip(stored.clone()));

    // Replace in protobuf.
    let mut changed = stored.clone();
    changed["data"] = json!({"a": "c"});
    let replaced = send_protobuf(
        &server,
        Method::PUT,
        &format!("{collection}/p"),
        protobuf::encode(&changed, &configmap::SCHEMA).unwrap(),
    )
    .await;
    assert_eq!(replaced.status, 200);
    let replaced = protobuf::decode(&replaced.body, &configmap::SCHEMA).unwrap();
    assert_eq!(replaced["data"], json!({"a": "c"}));

    // Errors come back as a protobuf Status when protobuf is preferred.
    let again = send_protobuf(
        &server,
        Method::POST,
        collection,
        protobuf::encode(&object, &configmap::SCHEMA).unwrap(),
    )
    .await;
    let (code, status) = proto_status(&again);
    assert_eq!((code, &status["reason"]), (409, &json!("AlreadyExists")));
    assert_eq!(status["message"], "configmaps \"p\" already exists");
    assert_eq!(status["details"]["name"], "p");
    let read: k8s_pb::apimachinery::pkg::apis::meta::v1::Status =
        independent::open(&again.body, "Status");
    assert_eq!(
        (read.code, read.reason.as_deref(), read.message.as_deref()),
        (
            Some(409),
            Some("AlreadyExists"),
            Some("configmaps \"p\" already exists")
        )
    );
    assert_eq!(read.details.and_then(|d| d.name).as_deref(), Some("p"));

    // The typeMeta is checked as a JSON body's kind and apiVersion are.
    let secret = protobuf::envelope("v1", "Secret", b"");
    let (code, status) =
        proto_status(&send_protobuf(&server, Method::POST, collection, secret).await);
    assert_eq!(
        (code, status["message"].as_str().unwrap()),
        (
            400,
            "the kind in the data (Secret) does not match the expected kind (ConfigMap)"
        )
    );
    let other_version = protobuf::envelope("v2", "ConfigMap", b"");
    let (code, status) =
        proto_status(&send_protobuf(&server, Method::POST, collection, other_version).await);
    assert_eq!(
        (code, status["message"].as_str().unwrap()),
        (
            400,
            "the API version in the data (v2) does not match the expected API version (v1)"
        )
    );
    let (code, status) = proto_status(
        &send_protobuf(
            &server,
            Method::POST,
            collection,
            b"{\"kind\":\"ConfigMap\"}".to_vec(),
        )
        .await,
    );
    assert_eq!(
        (code, status["message"].as_str().unwrap()),
        (
            400,
            "the object provided is unrecognized (must be of type ConfigMap): provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"
        )
    );
    let truncated = protobuf::envelope("v1", "ConfigMap", &[0x12, 0x09, 0x0a]);
    let (code, status) =
        proto_status(&send_protobuf(&server, Method::POST, collection, truncated).await);
    assert_eq!(
        (code, status["message"].as_str().unwrap()),
        (
            400,
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: proto: ConfigMap.data: 9 bytes announced but only 1 left"
        )
    );
    // Missing typeMeta is filled in from the URL, as for JSON.
    let bare = protobuf::envelope("", "", &[0x0a, 0x03, 0x0a, 0x01, b'q']);
    let created = send_protobuf(&server, Method::POST, collection, bare).await;
    assert_eq!(created.status, 201);
    assert_eq!(
        protobuf::decode(&created.body, &configmap::SCHEMA).unwrap()["kind"],
        "ConfigMap"
    );
    // A JSON client still gets JSON errors.
    let missing = get(&server, &format!("{collection}/nope"), "application/json").await;
    assert_eq!(missing.header("content-type"), "application/json");
    // Tables stay JSON even when protobuf comes first.
    let table = get(
        &server,
        collection,
        "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
    )
    .await;
    assert_eq!(table.json()["kind"], "Table");
}

async fn protobuf_watch_frames(server: Server) {
    let request =
        Request::get("/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=30")
            .header("accept", "application/vnd.kubernetes.protobuf;stream=watch")
            .body(Full::new(Bytes::new()))
            .unwrap();
    let response = server.send(request).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"],
        "application/vnd.kubernetes.protobuf;stream=watch"
    );
    let mut body = response.into_body();
    post(
        &server,
        "/api/v1/namespaces/default/configmaps",
        configmap("w", json!({"x": "1"})),
    )
    .await;
    call(
        &server,
        Method::DELETE,
        "/api/v1/namespaces/default/configmaps/w",
        &[],
        None,
    )
    .await;
    let mut buffer = Vec::new();
    let mut events = Vec::new();
    let mut stream = Vec::new();
    while events.len() < 2 {
        let frame = tokio::time::timeout(genplane_test_support::DEADLINE, body.frame())
            .await
            .expect("a watch frame in time")
            .unwrap()
            .unwrap();
        buffer.extend_from_slice(frame.data_ref().unwrap());
        stream.extend_from_slice(frame.data_ref().unwrap());
        while let Some(frame) = protobuf::read_watch_frame(&buffer).unwrap() {
            let object = protobuf::decode(frame.object, &configmap::SCHEMA).unwrap();
            events.push((frame.event_type.clone(), object));
            let consumed = buffer.len() - frame.rest.len();
            buffer.drain(..consumed);
        }
    }
    // The same frames read by the independent types.
    let (frames, rest) = independent::frames(&stream);
    assert!(rest.is_empty());
    let read: Vec<(String, String)> = frames
        .into_iter()
        .map(|event| {
            let raw = event.object.and_then(|o| o.raw).unwrap();
            let object: k8s_pb::api::core::v1::ConfigMap = independent::open(&raw, "ConfigMap");
            (
                event.r#type.unwrap(),
                object.metadata.and_then(|m| m.name).unwrap(),
            )
        })
        .collect();
    assert_eq!(
        read,
        [
            ("ADDED".to_owned(), "w".to_owned()),
            ("DELETED".to_owned(), "w".to_owned())
        ]
    );
    assert_eq!(events[0].0, "ADDED");
    assert_eq!(events[0].1["kind"], "ConfigMap");
    assert_eq!(events[0].1["metadata"]["labels"], json!({"x": "1"}));
    assert_eq!(events[1].0, "DELETED");
    assert_eq!(events[1].1["metadata"]["name"], "w");
}

async fn protobuf_delete_options(server: Server) {
    let path = "/api/v1/namespaces/default/configmaps/d";
    let created = post(
        &server,
        "/api/v1/namespaces/default/configmaps",
        configmap("d", json!({})),
    )
    .await;
    let uid = created.json()["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_owned();
    let options = |uid: &str| {
        protobuf::encode(
            &json!({"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}, "propagationPolicy": "Background"}),
            &genplane_apimachinery::meta::schemas::DELETE_OPTIONS,
        )
        .unwrap()
    };
    let (code, status) =
        proto_status(&send_protobuf(&server, Method::DELETE, path, options("other")).await);
    assert_eq!((code, &status["reason"]), (409, &json!("Conflict")));
    let wrong_kind = protobuf::envelope("v1", "ConfigMap", b"");
    let (code, status) =
        proto_status(&send_protobuf(&server, Method::DELETE, path, wrong_kind).await);
    assert_eq!(
        (code, status["message"].as_str().unwrap()),
        (
            400,
            "the kind in the data (ConfigMap) does not match the expected kind (DeleteOptions)"
        )
    );
    let deleted = send_protobuf(&server, Method::DELETE, path, options(&uid)).await;
    let (code, status) = proto_status(&deleted);
    assert_eq!((code, &status["status"]), (200, &json!("Success")));
    assert_eq!(status["details"]["name"], "d");
}
