//! `/openapi/v3` and `/openapi/v2` over real HTTP on loopback: what kubectl reads before
//! `apply`, `create -f`, `replace -f` (server-side field validation) and `explain`.

use crate::support;

use support::{Answer, Server, call, start};

use hyper::Method;
use serde_json::{Value, json};

async fn get(server: &Server, path: &str, headers: &[(&str, &str)]) -> Answer {
    call(server, Method::GET, path, headers, None).await
}

/// The served group versions, from legacy discovery.
async fn served_group_versions(server: &Server) -> Vec<String> {
    let mut gvs: Vec<String> = get(server, "/api", &[("accept", "application/json")])
        .await
        .json()["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| format!("api/{}", v.as_str().unwrap()))
        .collect();
    let groups = get(server, "/apis", &[("accept", "application/json")])
        .await
        .json();
    for group in groups["groups"].as_array().unwrap() {
        for version in group["versions"].as_array().unwrap() {
            gvs.push(format!(
                "apis/{}",
                version["groupVersion"].as_str().unwrap()
            ));
        }
    }
    gvs
}

/// The index, and the server-relative URL of each document.
async fn index(server: &Server) -> Value {
    let answer = get(
        server,
        "/openapi/v3?timeout=32s",
        &[("accept", "application/json, */*")],
    )
    .await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.header("content-type"), "application/json");
    assert!(answer.header("etag").starts_with('"'));
    answer.json()["paths"].clone()
}

#[tokio::test]
async fn the_index_lists_every_served_group_version() {
    let server = start().await;
    let gvs = served_group_versions(&server).await;
    assert!(gvs.len() >= 3, "{gvs:?}");
    let paths = index(&server).await;
    for gv in &gvs {
        let url = paths[gv]["serverRelativeURL"]
            .as_str()
            .unwrap_or_else(|| panic!("{gv} missing from {paths}"));
        let hash = url.split_once("?hash=").unwrap().1;
        assert_eq!(url, format!("/openapi/v3/{gv}?hash={hash}"));
        assert_eq!(hash.len(), 128);
        assert!(
            hash.chars()
                .all(|c| c.is_ascii_digit() || c.is_ascii_uppercase())
        );
    }
    // The discovery documents upstream lists too.
    for extra in [
        "api",
        "apis",
        "apis/coordination.k8s.io",
        "apis/events.k8s.io",
    ] {
        assert!(paths.get(extra).is_some(), "{extra} missing from {paths}");
    }
}

#[tokio::test]
async fn every_resource_can_be_validated_and_explained() {
    let server = start().await;
    let paths = index(&server).await;
    for gv in served_group_versions(&server).await {
        let (group, version) = match gv.split('/').collect::<Vec<_>>().as_slice() {
            ["api", v] => (String::new(), (*v).to_owned()),
            ["apis", g, v] => ((*g).to_owned(), (*v).to_owned()),
            _ => unreachable!(),
        };
        let resources = get(
            &server,
            &format!("/{gv}"),
            &[("accept", "application/json")],
        )
        .await
        .json();
        let url = format!(
            "{}&timeout=32s",
            paths[&gv]["serverRelativeURL"].as_str().unwrap()
        );
        let document = get(&server, &url, &[("accept", "application/json")]).await;
        assert_eq!(document.status, 200, "{url}");
        let document = document.json();
        assert_eq!(document["openapi"], "3.0.0");
        for resource in resources["resources"].as_array().unwrap() {
            let name = resource["name"].as_str().unwrap();
            let kind = resource["kind"].as_str().unwrap();
            let verbs = resource["verbs"].as_array().unwrap();
            if name.contains('/') || !verbs.contains(&json!("patch")) {
                continue;
            }
            let gvk = json!({"group": group, "version": version, "kind": kind});
            // kubectl's check: a PATCH operation of the kind with a fieldValidation query
            // parameter.
            let patch = document["paths"]
                .as_object()
                .unwrap()
                .values()
                .filter_map(|item| item.get("patch"))
                .find(|op| op["x-kubernetes-group-version-kind"] == gvk)
                .unwrap_or_else(|| panic!("{gv}: no PATCH of {kind}"));
            assert!(
                patch["parameters"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|p| p["name"] == "fieldValidation" && p["in"] == "query"),
                "{gv} {kind}: {patch}"
            );
            // kubectl explain's lookup: a component schema listing the kind.
            let schema = document["components"]["schemas"]
                .as_object()
                .unwrap()
                .values()
                .find(|s| {
                    s["x-kubernetes-group-version-kind"]
                        .as_array()
                        .is_some_and(|l| l.contains(&gvk))
                })
                .unwrap_or_else(|| panic!("{gv}: no schema of {kind}"));
            assert!(schema["properties"]["metadata"].is_object(), "{kind}");
            assert!(schema["description"].is_string(), "{kind}");
        }
    }
}

#[tokio::test]
async fn documents_are_cached_by_hash() {
    let server = start().await;
    let paths = index(&server).await;
    let url = paths["api/v1"]["serverRelativeURL"].as_str().unwrap();
    let hash = url.split_once("?hash=").unwrap().1;
    let etag = format!("\"{hash}\"");

    let hashed = get(&server, url, &[("accept", "application/json")]).await;
    assert_eq!(hashed.status, 200);
    assert_eq!(hashed.header("etag"), etag);
    assert_eq!(hashed.header("cache-control"), "public, immutable");
    assert!(hashed.header("expires").ends_with(" GMT"));
    assert_eq!(hashed.header("content-type"), "application/json");

    let unhashed = get(&server, "/openapi/v3/api/v1", &[]).await;
    assert_eq!(unhashed.status, 200);
    assert_eq!(unhashed.header("etag"), etag);
    assert_eq!(unhashed.header("cache-control"), "no-cache, private");
    assert_eq!(unhashed.body, hashed.body);

    let cached = get(
        &server,
        url,
        &[("accept", "application/json"), ("if-none-match", &etag)],
    )
    .await;
    assert_eq!(cached.status, 304);
    assert!(cached.body.is_empty());
    assert_eq!(cached.header("etag"), etag);

    let changed = get(
        &server,
        url,
        &[("accept", "application/json"), ("if-none-match", "\"x\"")],
    )
    .await;
    assert_eq!(changed.status, 200);
    assert_eq!(changed.body, hashed.body);

    let stale = get(&server, "/openapi/v3/api/v1?hash=ABC", &[]).await;
    assert_eq!(stale.status, 301);
    assert_eq!(stale.header("location"), url);

    let unknown = get(&server, "/openapi/v3/apis/apps/v1", &[]).await;
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.json()["reason"], "NotFound");

    let protobuf = get(
        &server,
        url,
        &[(
            "accept",
            "application/com.github.proto-openapi.spec.v3@v1.0+protobuf",
        )],
    )
    .await;
    assert_eq!(protobuf.status, 406);
}

const PROTOBUF_V2: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";

#[tokio::test]
async fn the_v2_document_is_served_as_json_and_protobuf() {
    let server = start().await;
    let json = get(&server, "/openapi/v2", &[]).await;
    assert_eq!(json.status, 200);
    assert_eq!(json.header("content-type"), "application/json");
    assert_eq!(json.header("vary"), "Accept");
    let etag = json.header("etag").to_owned();
    assert_eq!(etag.len(), 130, "{etag}");
    let document = json.json();
    assert_eq!(document["swagger"], "2.0");
    assert_eq!(document["info"]["title"], "Kubernetes");
    let version = get(&server, "/version", &[]).await.json();
    assert_eq!(document["info"]["version"], version["gitVersion"]);

    // Every served kind that can be patched: kubectl's check and explain's lookup.
    for gv in served_group_versions(&server).await {
        let (group, version) = match gv.split('/').collect::<Vec<_>>().as_slice() {
            ["api", v] => (String::new(), (*v).to_owned()),
            ["apis", g, v] => ((*g).to_owned(), (*v).to_owned()),
            _ => unreachable!(),
        };
        let resources = get(
            &server,
            &format!("/{gv}"),
            &[("accept", "application/json")],
        )
        .await
        .json();
        for resource in resources["resources"].as_array().unwrap() {
            let name = resource["name"].as_str().unwrap();
            let kind = resource["kind"].as_str().unwrap();
            if name.contains('/')
                || !resource["verbs"]
                    .as_array()
                    .unwrap()
                    .contains(&json!("patch"))
            {
                continue;
            }
            let gvk = json!({"group": group, "version": version, "kind": kind});
            let patch = document["paths"]
                .as_object()
                .unwrap()
                .values()
                .filter_map(|item| item.get("patch"))
                .find(|op| op["x-kubernetes-group-version-kind"] == gvk)
                .unwrap_or_else(|| panic!("{gv}: no PATCH of {kind}"));
            assert!(
                patch["parameters"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|p| p["name"] == "fieldValidation" && p["in"] == "query"),
                "{gv} {kind}: {patch}"
            );
            assert!(
                document["definitions"]
                    .as_object()
                    .unwrap()
                    .values()
                    .any(|s| s["x-kubernetes-group-version-kind"]
                        .as_array()
                        .is_some_and(|l| l.contains(&gvk))),
                "{gv}: no definition of {kind}"
            );
        }
    }

    // kubectl's request: protobuf only, answered in upstream's media type, same ETag.
    let protobuf = get(
        &server,
        "/openapi/v2?timeout=32s",
        &[("accept", PROTOBUF_V2)],
    )
    .await;
    assert_eq!(protobuf.status, 200);
    assert_eq!(
        protobuf.header("content-type"),
        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    );
    assert_eq!(protobuf.header("etag"), etag);
    // Document.swagger (field 1) = "2.0" comes first.
    assert_eq!(&protobuf.body[..5], b"\x0a\x032.0");
    assert!(protobuf.body.len() < json.body.len());

    let cached = get(
        &server,
        "/openapi/v2",
        &[("accept", PROTOBUF_V2), ("if-none-match", &etag)],
    )
    .await;
    assert_eq!(cached.status, 304);
    assert!(cached.body.is_empty());
    assert_eq!(cached.header("etag"), etag);

    let yaml = get(&server, "/openapi/v2", &[("accept", "application/yaml")]).await;
    assert_eq!(yaml.status, 406);
}
