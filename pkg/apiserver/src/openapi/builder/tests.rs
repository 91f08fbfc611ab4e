use serde_json::{Value, json};

use super::*;
use genplane_api::catalog;
use genplane_api::resource;

pub(super) fn served() -> Vec<ServedResource> {
    catalog::all()
        .iter()
        .map(|info| {
            let mut d = info.describe();
            // serviceaccounts/token is not served.
            d.subresources.retain(|s| s.name != "token");
            d
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
                // A property may be named `$ref` (JSONSchemaProps has one): only a string is a
                // reference.
                if let (true, Some(reference)) = (k == "$ref", v.as_str()) {
                    out.push(reference.to_owned());
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
            "apis/certificates.k8s.io",
            "apis/certificates.k8s.io/v1",
            "apis/certificates.k8s.io/v1beta1",
            "apis/rbac.authorization.k8s.io",
            "apis/rbac.authorization.k8s.io/v1",
            "apis/admissionregistration.k8s.io",
            "apis/admissionregistration.k8s.io/v1",
            "apis/admissionregistration.k8s.io/v1alpha1",
            "apis/coordination.k8s.io",
            "apis/coordination.k8s.io/v1",
            "apis/flowcontrol.apiserver.k8s.io",
            "apis/flowcontrol.apiserver.k8s.io/v1",
            "apis/apiextensions.k8s.io",
            "apis/apiextensions.k8s.io/v1",
            "apis/apiregistration.k8s.io",
            "apis/apiregistration.k8s.io/v1",
            "apis/featuregates.genplane.io",
            "apis/featuregates.genplane.io/v1alpha1",
            "apis/networkregistry.genplane.io",
            "apis/networkregistry.genplane.io/v1alpha1",
            "apis/authentication.k8s.io",
            "apis/authentication.k8s.io/v1",
            "apis/authorization.k8s.io",
            "apis/authorization.k8s.io/v1",
        ]
    );
}

#[test]
fn rbac_schemas_declare_upstream_list_semantics() {
    let rbac = document("apis/rbac.authorization.k8s.io/v1");
    let schemas = &rbac["components"]["schemas"];
    for kind in ["Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"] {
        assert_eq!(
            schemas[format!("io.k8s.api.rbac.v1.{kind}")]["x-kubernetes-group-version-kind"],
            json!([{"group": "rbac.authorization.k8s.io", "version": "v1", "kind": kind}]),
        );
        assert_eq!(
            schemas[format!("io.k8s.api.rbac.v1.{kind}List")]["x-kubernetes-group-version-kind"],
            json!([{"group": "rbac.authorization.k8s.io", "version": "v1", "kind": format!("{kind}List")}]),
        );
    }
    for (schema, property) in [
        ("Role", "rules"),
        ("ClusterRole", "rules"),
        ("RoleBinding", "subjects"),
        ("ClusterRoleBinding", "subjects"),
        ("PolicyRule", "verbs"),
        ("PolicyRule", "nonResourceURLs"),
        ("AggregationRule", "clusterRoleSelectors"),
    ] {
        let at = &schemas[format!("io.k8s.api.rbac.v1.{schema}")]["properties"][property];
        assert_eq!(
            at["x-kubernetes-list-type"], "atomic",
            "{schema}.{property}"
        );
        assert!(at.get("x-kubernetes-patch-strategy").is_none());
    }
    for schema in [
        "io.k8s.api.rbac.v1.RoleRef",
        "io.k8s.api.rbac.v1.Subject",
        "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector",
    ] {
        assert_eq!(
            schemas[schema]["x-kubernetes-map-type"], "atomic",
            "{schema}"
        );
    }
    let paths = &rbac["paths"];
    let list =
        &paths["/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings"]["get"];
    assert_eq!(
        list["operationId"],
        "listRbacAuthorizationV1NamespacedRoleBinding"
    );
    assert_eq!(list["tags"], json!(["rbacAuthorization_v1"]));
    assert!(paths["/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}"]["patch"].is_object());
    let group = document("apis/rbac.authorization.k8s.io");
    assert_eq!(
        group["paths"]["/apis/rbac.authorization.k8s.io/"]["get"]["operationId"],
        "getRbacAuthorizationAPIGroup"
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
        "apis/rbac.authorization.k8s.io/v1",
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

/// The v2 document of `documents`, written by `write` (`v2::json` or `v2::protobuf`) as one
/// gzip stream in pieces, joined and uncompressed.
pub(super) fn v2_of(
    documents: &[Document],
    write: fn(&[v2::Source<'_>], &str) -> (Vec<bytes::Bytes>, usize),
) -> Vec<u8> {
    let texts: Vec<Vec<u8>> = documents
        .iter()
        .map(|d| serde_json::to_vec(&d.document).unwrap())
        .collect();
    let sources: Vec<v2::Source<'_>> = texts
        .iter()
        .map(|bytes| v2::Source {
            bytes,
            gzip: None,
            own_paths: None,
        })
        .collect();
    let (gzip, len) = write(&sources, "v1.33.0");
    let whole = crate::body::gunzip(&gzip.concat(), len).unwrap();
    assert_eq!(whole.len(), len);
    whole
}

/// The v2 document of `documents` as JSON, parsed.
pub(super) fn swagger_of(documents: &[Document]) -> Value {
    serde_json::from_slice(&v2_of(documents, v2::json)).unwrap()
}

fn swagger() -> Value {
    swagger_of(&documents(&served()))
}

#[test]
fn the_v2_document_holds_every_group_version() {
    let doc = swagger();
    assert_eq!(doc["swagger"], "2.0");
    assert_eq!(
        doc["info"],
        json!({"title": "Kubernetes", "version": "v1.33.0"})
    );
    for (name, gvk) in [
        (
            "io.k8s.api.core.v1.ConfigMap",
            json!([{"group": "", "version": "v1", "kind": "ConfigMap"}]),
        ),
        (
            "io.k8s.api.core.v1.ConfigMapList",
            json!([{"group": "", "version": "v1", "kind": "ConfigMapList"}]),
        ),
        (
            "io.k8s.api.coordination.v1.Lease",
            json!([{"group": "coordination.k8s.io", "version": "v1", "kind": "Lease"}]),
        ),
        (
            "io.k8s.api.events.v1.Event",
            json!([{"group": "events.k8s.io", "version": "v1", "kind": "Event"}]),
        ),
    ] {
        assert_eq!(
            doc["definitions"][name]["x-kubernetes-group-version-kind"], gvk,
            "{name}"
        );
    }
    let delete_options = &doc["definitions"]["io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions"];
    assert_eq!(
        delete_options["x-kubernetes-group-version-kind"]
            .as_array()
            .unwrap()
            .len(),
        // Every group version's, featuregates.genplane.io/v1alpha1's,
        // networkregistry.genplane.io/v1alpha1's, admissionregistration.k8s.io/v1alpha1's and
        // certificates.k8s.io/v1beta1's included.
        15
    );
    assert_eq!(
        doc["definitions"]["io.k8s.apimachinery.pkg.apis.meta.v1.APIGroup"]["x-kubernetes-group-version-kind"],
        json!([{"group": "", "version": "v1", "kind": "APIGroup"}])
    );
    assert_eq!(
        doc["definitions"]["io.k8s.apimachinery.pkg.apis.meta.v1.APIGroup"]["x-kubernetes-group-version-kind"],
        json!([{"group": "", "version": "v1", "kind": "APIGroup"}])
    );
    for path in [
        "/api/",
        "/api/v1/",
        "/apis/",
        "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}",
    ] {
        assert!(doc["paths"].get(path).is_some(), "{path}");
    }
}

#[test]
fn every_v2_write_declares_field_validation_and_its_kind() {
    let doc = swagger();
    let mut patches = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in ["post", "put", "patch"] {
            let Some(op) = item.get(method) else { continue };
            patches += usize::from(method == "patch");
            let parameters = op["parameters"].as_array().unwrap();
            let field_validation = parameters
                .iter()
                .find(|p| p["name"] == "fieldValidation")
                .unwrap_or_else(|| panic!("{method} {path}"));
            assert_eq!(field_validation["in"], "query");
            assert_eq!(field_validation["type"], "string");
            assert!(field_validation.get("schema").is_none());
            let body = parameters.iter().find(|p| p["in"] == "body").unwrap();
            assert_eq!(body["name"], "body");
            assert!(
                body["schema"]["$ref"]
                    .as_str()
                    .unwrap()
                    .starts_with("#/definitions/")
            );
            assert!(
                op["x-kubernetes-group-version-kind"]["kind"].is_string(),
                "{path}"
            );
            assert!(op.get("requestBody").is_none());
            assert!(!op["consumes"].as_array().unwrap().is_empty());
            assert!(
                op["produces"]
                    .as_array()
                    .unwrap()
                    .contains(&json!("application/json"))
            );
            assert!(
                op["responses"]["200"]["schema"]["$ref"].is_string(),
                "{path}"
            );
        }
    }
    assert!(patches >= 8, "{patches}");
    let patch = &doc["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"];
    assert_eq!(
        patch["x-kubernetes-group-version-kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    assert_eq!(
        patch["consumes"],
        json!([
            "application/json-patch+json",
            "application/merge-patch+json"
        ])
    );
}

/// What kubectl's OpenAPI v2 parser refuses: a reference that is not to a definition, a
/// reference with a type or properties beside it, an array without exactly one item schema, a
/// schema of several types, and anything left from v3.
fn check_v2_schema(schema: &Value, at: &str, definitions: &serde_json::Map<String, Value>) {
    let s = schema.as_object().unwrap_or_else(|| panic!("{at}"));
    for key in ["allOf", "anyOf", "oneOf", "nullable"] {
        assert!(!s.contains_key(key), "{at}: {key}");
    }
    if let Some(reference) = s.get("$ref") {
        let name = reference.as_str().unwrap().strip_prefix("#/definitions/");
        assert!(
            definitions.contains_key(name.unwrap_or("")),
            "{at}: {reference}"
        );
        assert!(
            !s.contains_key("type") && !s.contains_key("properties"),
            "{at}"
        );
        return;
    }
    if let Some(kind) = s.get("type") {
        assert!(kind.is_string(), "{at}");
        if kind == "array" {
            check_v2_schema(&s["items"], &format!("{at}[]"), definitions);
        }
    }
    for (name, property) in s
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        check_v2_schema(property, &format!("{at}.{name}"), definitions);
    }
    if let Some(values @ Value::Object(_)) = s.get("additionalProperties") {
        check_v2_schema(values, &format!("{at}{{}}"), definitions);
    }
}

#[test]
fn v2_schemas_keep_to_what_kubectl_parses() {
    let doc = swagger();
    let definitions = doc["definitions"].as_object().unwrap();
    for (name, schema) in definitions {
        check_v2_schema(schema, name, definitions);
    }
    let mut refs = Vec::new();
    collect_refs(&doc["paths"], &mut refs);
    for reference in refs {
        let name = reference.strip_prefix("#/definitions/").unwrap();
        assert!(definitions.contains_key(name), "{reference}");
    }
    // A described reference keeps its description beside the reference.
    let spec = &definitions["io.k8s.api.coordination.v1.Lease"]["properties"]["spec"];
    assert_eq!(
        spec["$ref"],
        "#/definitions/io.k8s.api.coordination.v1.LeaseSpec"
    );
    assert!(spec["description"].is_string());
}

#[test]
fn schemas_shared_by_documents_differ_at_most_in_their_kinds() {
    let mut seen: std::collections::BTreeMap<String, Value> = Default::default();
    for d in documents(&served()) {
        for (name, schema) in d.document["components"]["schemas"].as_object().unwrap() {
            let mut schema = schema.clone();
            schema
                .as_object_mut()
                .unwrap()
                .remove("x-kubernetes-group-version-kind");
            if let Some(earlier) = seen.insert(name.clone(), schema.clone()) {
                assert_eq!(earlier, schema, "{name} differs in {}", d.path);
            }
        }
    }
}

const APIEXTENSIONS: &str = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.";

#[test]
fn custom_resource_definitions_are_described_as_upstream_describes_them() {
    let doc = document("apis/apiextensions.k8s.io/v1");
    let schemas = &doc["components"]["schemas"];
    let name = |n: &str| format!("{APIEXTENSIONS}{n}");
    assert_eq!(
        schemas[name("CustomResourceDefinition")]["x-kubernetes-group-version-kind"],
        json!([{"group": "apiextensions.k8s.io", "version": "v1", "kind": "CustomResourceDefinition"}]),
    );
    assert_eq!(
        schemas[name("CustomResourceDefinitionList")]["x-kubernetes-group-version-kind"],
        json!([{"group": "apiextensions.k8s.io", "version": "v1", "kind": "CustomResourceDefinitionList"}]),
    );
    // `kubectl explain crd.spec.versions.schema.openAPIV3Schema` walks these references.
    let version = &schemas[name("CustomResourceDefinitionVersion")]["properties"];
    assert_eq!(
        version["schema"]["allOf"][0]["$ref"],
        format!("#/components/schemas/{}", name("CustomResourceValidation"))
    );
    let validation = &schemas[name("CustomResourceValidation")]["properties"];
    assert_eq!(
        validation["openAPIV3Schema"]["allOf"][0]["$ref"],
        format!("#/components/schemas/{}", name("JSONSchemaProps"))
    );
    // JSONSchemaProps refers to itself: the recursion goes through references.
    let props = &schemas[name("JSONSchemaProps")]["properties"];
    assert_eq!(
        props["properties"]["additionalProperties"]["$ref"],
        format!("#/components/schemas/{}", name("JSONSchemaProps"))
    );
    assert_eq!(props["$ref"], json!({"type": "string"}));
    // The unions and raw JSON values carry no type, as upstream publishes them.
    for union in [
        "JSON",
        "JSONSchemaPropsOrArray",
        "JSONSchemaPropsOrBool",
        "JSONSchemaPropsOrStringArray",
    ] {
        let schema = schemas[name(union)].as_object().unwrap();
        assert_eq!(
            schema.keys().collect::<Vec<_>>(),
            ["description"],
            "{union}"
        );
    }
    assert_eq!(
        schemas[name("CustomResourceDefinitionStatus")]["properties"]["conditions"]["x-kubernetes-list-map-keys"],
        json!(["type"])
    );
    assert_eq!(
        schemas[name("CustomResourceDefinitionSpec")]["properties"]["versions"]["x-kubernetes-list-type"],
        "atomic"
    );
    // The type model accepts the document (server-side apply of CRDs).
    let model = type_model(&documents(&served())).unwrap();
    drop(model);
    // The v2 document keeps them too.
    let v2 = swagger();
    assert_eq!(
        v2["definitions"][name("JSONSchemaProps")]["properties"]["not"]["$ref"],
        format!("#/definitions/{}", name("JSONSchemaProps"))
    );
    assert!(
        v2["paths"]
            .get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}/status")
            .is_some()
    );
}

#[test]
fn a_custom_resource_with_scale_publishes_the_scale_paths() {
    use genplane_api::resource::{ResourceDescription, SubresourceDescription};
    let verbs = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let description = ResourceDescription {
        group: "stable.example.com".into(),
        version: "v1".into(),
        kind: "CronTab".into(),
        list_kind: "CronTabList".into(),
        resource: "crontabs".into(),
        singular: "crontab".into(),
        short_names: vec![],
        namespaced: true,
        verbs: verbs(resource::ALL_VERBS),
        categories: vec![],
        subresources: vec![SubresourceDescription {
            name: "scale".into(),
            kind: "Scale".into(),
            group: Some("autoscaling".into()),
            version: Some("v1".into()),
            verbs: verbs(&["get", "patch", "update"]),
        }],
        storage_api_version: None,
    };
    let component = "com.example.stable.v1.CronTab";
    let kind = CustomKind {
        description,
        component: component.into(),
        schema: json!({"type": "object", "x-kubernetes-group-version-kind": [
            {"group": "stable.example.com", "version": "v1", "kind": "CronTab"}]}),
        list_schema: json!({"type": "object"}),
    };
    let doc = custom_group_version_document("stable.example.com", "v1", &[kind]).document;
    let scale = "io.k8s.api.autoscaling.v1.Scale";
    let schemas = &doc["components"]["schemas"];
    assert_eq!(
        schemas[scale]["x-kubernetes-group-version-kind"],
        json!([{"group": "autoscaling", "version": "v1", "kind": "Scale"}])
    );
    assert!(
        schemas[scale].get("required").is_none(),
        "{}",
        schemas[scale]
    );
    assert!(schemas[scale]["properties"]["spec"].is_object());
    let path =
        &doc["paths"]["/apis/stable.example.com/v1/namespaces/{namespace}/crontabs/{name}/scale"];
    let reference = json!(format!("#/components/schemas/{scale}"));
    for (method, id) in [
        ("get", "readStableExampleComV1NamespacedCronTabScale"),
        ("put", "replaceStableExampleComV1NamespacedCronTabScale"),
        ("patch", "patchStableExampleComV1NamespacedCronTabScale"),
    ] {
        let op = &path[method];
        assert_eq!(op["operationId"], id, "{path}");
        assert_eq!(
            op["x-kubernetes-group-version-kind"],
            json!({"group": "autoscaling", "version": "v1", "kind": "Scale"}),
        );
        assert_eq!(
            op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
            reference
        );
    }
    assert_eq!(
        path["put"]["requestBody"]["content"]["*/*"]["schema"]["$ref"],
        reference
    );
    // Every reference resolves within the document.
    let mut refs = Vec::new();
    collect_refs(&doc, &mut refs);
    for r in refs {
        let name = r.trim_start_matches("#/components/schemas/");
        assert!(schemas.get(name).is_some(), "dangling {r}");
    }
}

#[test]
fn schemas_that_keep_unknown_fields_are_published_in_v2_without_their_fields() {
    use genplane_api::resource::ResourceDescription;
    let description = ResourceDescription {
        group: "example.com".into(),
        version: "v1".into(),
        kind: "Blob".into(),
        list_kind: "BlobList".into(),
        resource: "blobs".into(),
        singular: "blob".into(),
        short_names: vec![],
        namespaced: true,
        verbs: resource::ALL_VERBS
            .iter()
            .map(|v| (*v).to_owned())
            .collect(),
        categories: vec![],
        subresources: vec![],
        storage_api_version: Some("example.com/v1".into()),
    };
    let meta =
        json!({"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"});
    let kind = CustomKind {
        description,
        component: "com.example.v1.Blob".into(),
        // A CRD whose schema keeps every field (upstream's "CRD without validation schema"),
        // with a nested object and array that keep theirs.
        schema: json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true,
            "x-kubernetes-group-version-kind": [{"group": "example.com", "version": "v1", "kind": "Blob"}],
            "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": meta,
                "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                    "properties": {"a": {"type": "string"}}},
                "list": {"type": "array", "x-kubernetes-preserve-unknown-fields": true,
                    "items": {"type": "string"}}}}),
        list_schema: json!({"type": "object"}),
    };
    let doc = custom_group_version_document("example.com", "v1", &[kind]);
    let v2 = swagger_of(&[doc]);
    let blob = &v2["definitions"]["com.example.v1.Blob"];
    let mut root = blob.clone();
    let properties = root.as_object_mut().unwrap().remove("properties").unwrap();
    root.as_object_mut()
        .unwrap()
        .remove("x-kubernetes-group-version-kind");
    assert_eq!(root, json!({"type": "object"}), "{blob}");
    let names: Vec<&String> = properties.as_object().unwrap().keys().collect();
    assert_eq!(names, ["apiVersion", "kind", "metadata"], "{blob}");
}

#[test]
fn network_claims_declare_list_maps_keyed_by_prefix() {
    let doc = document("apis/networkregistry.genplane.io/v1alpha1");
    let schemas = &doc["components"]["schemas"];
    let spec = &schemas["io.genplane.networkregistry.v1alpha1.NetworkClaimSpec"]["properties"]["addressSpace"];
    assert_eq!(spec["x-kubernetes-list-type"], "map");
    assert_eq!(
        spec["x-kubernetes-list-map-keys"],
        serde_json::json!(["prefix"])
    );
    let status = &schemas["io.genplane.networkregistry.v1alpha1.NetworkClaimStatus"]["properties"];
    assert_eq!(
        status["addressSpace"]["x-kubernetes-list-map-keys"],
        serde_json::json!(["prefix"])
    );
    assert_eq!(
        status["conditions"]["x-kubernetes-list-map-keys"],
        serde_json::json!(["type"])
    );
}

#[test]
fn documents_sharing_a_schema_give_it_once_with_every_kind() {
    let kind =
        |version: &str| json!({"group": "g.example.com", "version": version, "kind": "Thing"});
    let doc = |path: &str, schema: Value, operation: &str| Document {
        path: path.to_owned(),
        document: json!({"openapi": "3.0.0",
            "paths": {"/shared": {"get": {"operationId": operation}}},
            "components": {"schemas": {"com.example.Shared": schema}}}),
    };
    let swagger = swagger_of(&[
        // Only references the schema: no kinds.
        doc(
            "a",
            json!({"type": "object", "description": "first"}),
            "first",
        ),
        doc(
            "b",
            json!({"type": "object", "description": "second",
                "x-kubernetes-group-version-kind": [kind("v1")]}),
            "second",
        ),
        doc(
            "c",
            json!({"type": "object", "x-kubernetes-group-version-kind": [kind("v2"), kind("v1")]}),
            "third",
        ),
    ]);
    let shared = &swagger["definitions"]["com.example.Shared"];
    assert_eq!(
        shared["description"], "first",
        "the first document's schema"
    );
    assert_eq!(
        shared["x-kubernetes-group-version-kind"],
        json!([kind("v1"), kind("v2")]),
        "the kinds of all, each once"
    );
    assert_eq!(swagger["paths"]["/shared"]["get"]["operationId"], "first");
}
