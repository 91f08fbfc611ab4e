use serde_json::{Value, json};

use super::*;
use crate::catalog;

fn served() -> Vec<ServedResource> {
    catalog::all()
        .iter()
        .map(|info| ServedResource {
            info,
            // serviceaccounts/token is not served.
            subresources: info
                .subresources
                .iter()
                .filter(|s| s.name != "token")
                .collect(),
        })
        .collect()
}

fn document(path: &str) -> Value {
    documents(&served())
        .into_iter()
        .find(|d| d.path == path)
        .unwrap_or_else(|| panic!("no document {path}"))
        .document
}

fn collect_refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                if k == "$ref" {
                    out.push(v.as_str().unwrap().to_owned());
                } else {
                    collect_refs(v, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}

#[test]
fn documents_are_listed_as_upstream_lists_them() {
    let paths: Vec<String> = documents(&served()).into_iter().map(|d| d.path).collect();
    assert_eq!(
        paths,
        [
            "api",
            "api/v1",
            "apis",
            "apis/events.k8s.io",
            "apis/events.k8s.io/v1",
            "apis/coordination.k8s.io",
            "apis/coordination.k8s.io/v1",
        ]
    );
}

#[test]
fn every_reference_resolves_within_its_document() {
    for doc in documents(&served()) {
        let mut refs = Vec::new();
        collect_refs(&doc.document, &mut refs);
        assert!(!refs.is_empty(), "{}", doc.path);
        for r in refs {
            let name = r
                .strip_prefix("#/components/schemas/")
                .unwrap_or_else(|| panic!("{}: {r}", doc.path));
            assert!(
                doc.document["components"]["schemas"].get(name).is_some(),
                "{}: {r} does not resolve",
                doc.path
            );
        }
    }
}

#[test]
fn kinds_and_lists_carry_their_group_version_kind() {
    let core = document("api/v1");
    let schemas = &core["components"]["schemas"];
    for kind in [
        "Namespace",
        "ConfigMap",
        "Secret",
        "ServiceAccount",
        "Event",
        "ResourceQuota",
    ] {
        assert_eq!(
            schemas[format!("io.k8s.api.core.v1.{kind}")]["x-kubernetes-group-version-kind"],
            json!([{"group": "", "version": "v1", "kind": kind}]),
        );
        assert_eq!(
            schemas[format!("io.k8s.api.core.v1.{kind}List")]["x-kubernetes-group-version-kind"],
            json!([{"group": "", "version": "v1", "kind": format!("{kind}List")}]),
        );
    }
    // metadata is optional, as upstream declares it.
    assert!(
        schemas["io.k8s.api.core.v1.ConfigMap"]
            .get("required")
            .is_none()
    );
    assert_eq!(
        schemas["io.k8s.api.core.v1.ConfigMapList"]["required"],
        json!(["items"])
    );
    let lease = document("apis/coordination.k8s.io/v1");
    assert_eq!(
        lease["components"]["schemas"]["io.k8s.api.coordination.v1.Lease"]["x-kubernetes-group-version-kind"],
        json!([{"group": "coordination.k8s.io", "version": "v1", "kind": "Lease"}]),
    );
    assert!(
        lease["components"]["schemas"]
            .get("io.k8s.api.core.v1.ConfigMap")
            .is_none()
    );
    let events = document("apis/events.k8s.io/v1");
    assert_eq!(
        events["components"]["schemas"]["io.k8s.api.events.v1.Event"]["x-kubernetes-group-version-kind"],
        json!([{"group": "events.k8s.io", "version": "v1", "kind": "Event"}]),
    );
}

#[test]
fn metadata_references_keep_their_description() {
    let core = document("api/v1");
    let metadata =
        &core["components"]["schemas"]["io.k8s.api.core.v1.ConfigMap"]["properties"]["metadata"];
    assert_eq!(
        metadata["allOf"],
        json!([{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}])
    );
    assert!(
        metadata["description"]
            .as_str()
            .unwrap()
            .contains("metadata")
    );
}

#[test]
fn extensions_come_from_the_table() {
    let core = document("api/v1");
    let schemas = &core["components"]["schemas"];
    let owner = &schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"]["ownerReferences"];
    assert_eq!(owner["x-kubernetes-list-type"], "map");
    assert_eq!(owner["x-kubernetes-list-map-keys"], json!(["uid"]));
    assert_eq!(owner["x-kubernetes-patch-merge-key"], "uid");
    assert_eq!(owner["x-kubernetes-patch-strategy"], "merge");
    let conditions = &schemas["io.k8s.api.core.v1.NamespaceStatus"]["properties"]["conditions"];
    assert_eq!(conditions["x-kubernetes-patch-merge-key"], "type");
    assert_eq!(
        schemas["io.k8s.api.core.v1.ObjectReference"]["x-kubernetes-map-type"],
        "atomic"
    );
}

#[test]
fn every_patch_declares_its_kind_and_field_validation() {
    for path in [
        "api/v1",
        "apis/events.k8s.io/v1",
        "apis/coordination.k8s.io/v1",
    ] {
        let doc = document(path);
        let mut patches = 0;
        for (url, item) in doc["paths"].as_object().unwrap() {
            let Some(patch) = item.get("patch") else {
                continue;
            };
            patches += 1;
            assert!(
                patch["x-kubernetes-group-version-kind"].is_object(),
                "{url}"
            );
            let names: Vec<&str> = patch["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| p["in"] == "query")
                .map(|p| p["name"].as_str().unwrap())
                .collect();
            for name in ["dryRun", "fieldManager", "fieldValidation", "force"] {
                assert!(names.contains(&name), "{url}: {names:?}");
            }
        }
        assert!(patches > 0, "{path}");
    }
}

#[test]
fn operations_are_named_as_upstream_names_them() {
    let core = document("api/v1");
    let op = |path: &str, method: &str| {
        core["paths"][path][method]["operationId"]
            .as_str()
            .unwrap_or_else(|| panic!("{method} {path}"))
            .to_owned()
    };
    assert_eq!(
        op("/api/v1/namespaces/{namespace}/configmaps/{name}", "patch"),
        "patchCoreV1NamespacedConfigMap"
    );
    assert_eq!(
        op("/api/v1/namespaces/{namespace}/configmaps", "delete"),
        "deleteCoreV1CollectionNamespacedConfigMap"
    );
    assert_eq!(
        op("/api/v1/configmaps", "get"),
        "listCoreV1ConfigMapForAllNamespaces"
    );
    assert_eq!(
        op("/api/v1/namespaces/{name}/status", "patch"),
        "patchCoreV1NamespaceStatus"
    );
    assert_eq!(
        op("/api/v1/namespaces/{name}/finalize", "put"),
        "replaceCoreV1NamespaceFinalize"
    );
    assert_eq!(op("/api/v1/", "get"), "getCoreV1APIResources");
    // Namespaces have no deletecollection; serviceaccounts/token is not served.
    assert!(core["paths"]["/api/v1/namespaces"].get("delete").is_none());
    assert!(
        core["paths"]
            .get("/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token")
            .is_none()
    );
    let lease = document("apis/coordination.k8s.io/v1");
    let list = &lease["paths"]["/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"]["get"];
    assert_eq!(list["operationId"], "listCoordinationV1NamespacedLease");
    assert_eq!(list["x-kubernetes-action"], "list");
    assert_eq!(list["tags"], json!(["coordination_v1"]));
    let names: Vec<&str> = list["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    for name in [
        "labelSelector",
        "fieldSelector",
        "limit",
        "continue",
        "resourceVersion",
        "resourceVersionMatch",
        "sendInitialEvents",
        "timeoutSeconds",
        "watch",
    ] {
        assert!(names.contains(&name), "{names:?}");
    }
    let group = document("apis/coordination.k8s.io");
    assert_eq!(
        group["paths"]["/apis/coordination.k8s.io/"]["get"]["operationId"],
        "getCoordinationAPIGroup"
    );
}
