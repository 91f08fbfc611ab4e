//! OpenAPI v3 documents of the served resources, as kube-apiserver publishes them below
//! `/openapi/v3/`: one document per group version (`api/v1`, `apis/<group>/<version>`) with the
//! operations on every resource and the component schemas they use, plus small documents for
//! the discovery endpoints (`api`, `apis`, `apis/<group>`).
//!
//! kubectl needs them: `apply`, `create -f` and `replace -f` look for a `fieldValidation`
//! parameter on the PATCH operation of the object's kind before they ask the server to
//! validate fields, and `explain` renders the component schemas.
//!
//! ## Where the parts come from
//!
//! - Component schemas: each catalog entry's `openapi_schema` (genplane-api's
//!   [`schema_of`]: k8s-openapi's `schemars` implementations, upstream names such as
//!   `io.k8s.api.core.v1.ConfigMap`, upstream descriptions), generated with schemars' OpenAPI 3
//!   settings so references read `#/components/schemas/<name>` and a reference with a
//!   description becomes `allOf: [{$ref}]`. List kinds (`ConfigMapList`) are written here, as
//!   k8s-openapi has one generic list type. Each kind and list gets its
//!   `x-kubernetes-group-version-kind`; list, map and patch semantics come from
//!   [`extensions::all`] (genplane-api's table: [`genplane_api::schema::SHARED`] and each
//!   entry's own).
//! - Paths and operations: written here from the catalog entries, with
//!   upstream's operation ids, actions and query parameters.
//!
//! Documents are plain [`serde_json::Value`]s so that custom resources can add their own
//! schemas and paths later. Nothing here hashes or serves them: that is the handler's job
//! ([`super`]).
//!
//! ## OpenAPI v2
//!
//! [`v2::json`] derives the one Swagger 2.0 document upstream serves at `/openapi/v2` from
//! these v3 documents, so both versions have one source; [`v2::protobuf`] writes the same
//! document as the gnostic protobuf message kubectl 1.27 and 1.28 ask for (see [`gnostic`]).
//! Both read one v3 document at a time and write in pieces.

pub mod extensions;
pub mod gnostic;
mod paths;
pub mod v2;

use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};

use genplane_api::resource::{ResourceDescription, ResourceInfo};
use genplane_api::schema::schema_of;
use k8s_openapi::api::{autoscaling as autoscaling_api, core as core_api};
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

/// A served resource with those of its subresources that are served.
pub type ServedResource = ResourceDescription;

/// One document, with the path it is published under below `/openapi/v3/` (`api/v1`,
/// `apis/coordination.k8s.io/v1`, `apis`, ...).
#[derive(Clone, Debug, PartialEq)]
pub struct Document {
    /// The path below `/openapi/v3/`, without slashes at either end.
    pub path: String,
    /// The OpenAPI 3.0 document.
    pub document: Value,
}

/// Every catalog resource with all of its subresources: what the API server serves by default.
pub fn all_served() -> Vec<ServedResource> {
    genplane_api::catalog::all()
        .iter()
        .map(|info| info.describe())
        .collect()
}

/// The type model (list and map semantics, patch strategies) of the component schemas in
/// `documents`, for strategic merge patch and server-side apply. Documents without components
/// (the discovery ones) add nothing.
pub fn type_model(
    documents: &[Document],
) -> Result<genplane_merge::Schema, genplane_merge::SchemaError> {
    let mut schema = genplane_merge::Schema::default();
    extend_type_model(&mut schema, documents)?;
    Ok(schema)
}

/// Adds the component schemas of `documents` to `schema`, as [`type_model`] reads them: the
/// model of some documents followed by others is the model of them all.
pub fn extend_type_model(
    schema: &mut genplane_merge::Schema,
    documents: &[Document],
) -> Result<(), genplane_merge::SchemaError> {
    for document in documents {
        if document.document.pointer("/components/schemas").is_some() {
            schema.add_openapi_v3(&document.document)?;
        }
    }
    Ok(())
}

/// The group-version path of a group and version: `api/v1` for core, else `apis/<g>/<v>`.
pub fn group_version_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// The group and version of a group-version path ([`group_version_path`]); `None` for
/// other paths.
pub fn group_version_of_path(path: &str) -> Option<(&str, &str)> {
    if let Some(version) = path.strip_prefix("api/") {
        return (!version.is_empty() && !version.contains('/')).then_some(("", version));
    }
    let (group, version) = path.strip_prefix("apis/")?.split_once('/')?;
    (!group.is_empty() && !version.is_empty() && !version.contains('/')).then_some((group, version))
}

/// Every document for `resources` of the built-in catalog, in a stable order: `api`,
/// `api/v1`, `apis`, then each group (`apis/<group>`, then its versions) in the order the
/// resources list them.
pub fn documents(resources: &[ServedResource]) -> Vec<Document> {
    let kinds: Vec<&'static ResourceInfo> = genplane_api::catalog::all().iter().collect();
    documents_of(resources, &kinds)
}

/// The documents of [`documents`], with the schemas and extensions of `kinds` (the entries
/// of what is served: the catalog's, or a program's own): a served kind that is not among them
/// has no schema.
pub fn documents_of(
    resources: &[ServedResource],
    kinds: &[&'static ResourceInfo],
) -> Vec<Document> {
    let mut group_versions: Vec<(&str, &str)> = Vec::new();
    for r in resources {
        let gv = (r.group.as_str(), r.version.as_str());
        if !group_versions.contains(&gv) {
            group_versions.push(gv);
        }
    }
    let mut out = Vec::new();
    let has_core = group_versions.iter().any(|(g, _)| g.is_empty());
    if has_core {
        out.push(discovery_document(
            "api",
            "/api/",
            "getCoreAPIVersions",
            "core",
            "get available API versions",
            Discovered::Versions,
        ));
    }
    for &(group, version) in group_versions.iter().filter(|(g, _)| g.is_empty()) {
        out.push(group_version_document(
            group,
            version,
            resources,
            &group_versions,
            kinds,
        ));
    }
    out.push(discovery_document(
        "apis",
        "/apis/",
        "getAPIVersions",
        "apis",
        "get available API versions",
        Discovered::Groups,
    ));
    let mut groups: Vec<&str> = Vec::new();
    for &(group, _) in &group_versions {
        if !group.is_empty() && !groups.contains(&group) {
            groups.push(group);
        }
    }
    for group in groups {
        let prefix = paths::operation_group(group);
        out.push(discovery_document(
            &format!("apis/{group}"),
            &format!("/apis/{group}/"),
            &format!("get{prefix}APIGroup"),
            &paths::lower_first(&prefix),
            "get information of a group",
            Discovered::Group,
        ));
        for &(g, version) in group_versions.iter().filter(|(g, _)| *g == group) {
            out.push(group_version_document(
                g,
                version,
                resources,
                &group_versions,
                kinds,
            ));
        }
    }
    out
}

fn generator() -> SchemaGenerator {
    SchemaSettings::openapi3()
        .with(|s| s.meta_schema = None)
        .with_transform(nullable_as_all_of)
        .into_generator()
}

/// Writes schemars' `Option<T>` of a referenced type (`anyOf: [{$ref}, {enum: [null],
/// nullable: true}]`) as Kubernetes writes an optional struct (`allOf: [{$ref}]`, `nullable`),
/// which the type model of server-side apply and strategic merge follows into the type: a
/// kind derived in Rust then merges its optional structs field by field, and its list maps by
/// key, as a built-in kind does.
fn nullable_as_all_of(schema: &mut schemars::Schema) {
    if let Some(object) = schema.as_object_mut()
        && let Some(Value::Array(any)) = object.get("anyOf")
        && any.len() == 2
        && any[0].get("$ref").is_some()
        && any[1] == serde_json::json!({"enum": [null], "nullable": true})
    {
        let referenced = any[0].clone();
        object.remove("anyOf");
        object.insert("allOf".into(), Value::Array(vec![referenced]));
        object.insert("nullable".into(), Value::Bool(true));
    }
    schemars::transform::transform_subschemas(&mut nullable_as_all_of, schema);
}

/// Adds the schema of a kind (its entry's among `kinds`) and returns its name; `None` for a
/// kind that has no entry.
fn add_kind(
    generator: &mut SchemaGenerator,
    kinds: &[&'static ResourceInfo],
    group: &str,
    version: &str,
    kind: &str,
) -> Option<String> {
    let info = kinds
        .iter()
        .find(|r| r.group == group && r.version == version && r.kind == kind)?;
    Some((info.openapi_schema)(generator))
}

/// Whether a subresource's body is an autoscaling/v1 Scale.
fn is_scale(gvk: &genplane_apimachinery::schema::GroupVersionKind) -> bool {
    gvk.group == genplane_api::autoscaling::GROUP
        && gvk.version == genplane_api::autoscaling::VERSION
        && gvk.kind == genplane_api::autoscaling::KIND
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "version": version, "kind": kind})
}

/// Sets `x-kubernetes-group-version-kind` of a component schema.
fn set_gvks(schemas: &mut Map<String, Value>, name: &str, gvks: Vec<Value>) {
    if let Some(schema) = schemas.get_mut(name).and_then(Value::as_object_mut) {
        schema.insert("x-kubernetes-group-version-kind".into(), Value::Array(gvks));
    }
}

/// The list schema of a kind, in upstream's shape (`items` required).
fn list_schema(kind: &str, kind_schema: &str, item: &Value) -> Value {
    let property = |name: &str| {
        item.pointer(&format!("/properties/{name}"))
            .cloned()
            .unwrap_or_else(|| json!({"type": "string"}))
    };
    json!({
        "description": format!("A list of {kind} objects."),
        "type": "object",
        "properties": {
            "apiVersion": property("apiVersion"),
            "kind": property("kind"),
            "metadata": {
                "allOf": [{"$ref": format!("#/components/schemas/{}", genplane_api::schema::meta("ListMeta"))}],
                "description": "The list's metadata: its resourceVersion and continue token.",
            },
            "items": {
                "description": format!("The {kind} objects."),
                "type": "array",
                "items": {"$ref": format!("#/components/schemas/{kind_schema}")},
            },
        },
        "required": ["items"],
    })
}

/// The kinds a group version document describes: (kind, kind schema, list schema) by kind.
struct Kinds {
    names: Vec<(String, String, String)>,
}

impl Kinds {
    fn component(&self, kind: &str) -> Option<(&str, &str)> {
        self.names
            .iter()
            .find(|(k, _, _)| k == kind)
            .map(|(_, s, l)| (s.as_str(), l.as_str()))
    }
}

fn group_version_document(
    group: &str,
    version: &str,
    resources: &[ServedResource],
    all_group_versions: &[(&str, &str)],
    entries: &[&'static ResourceInfo],
) -> Document {
    let mut generator = generator();
    let mut kinds = Kinds { names: Vec::new() };
    let served: Vec<&ServedResource> = resources
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .collect();
    // A scale subresource reads and writes autoscaling/v1 Scales, whatever the group.
    let mut scale = None;
    for r in &served {
        let mut wanted = vec![r.kind.as_str()];
        for sub in &r.subresources {
            if is_scale(&r.subresource_gvk(sub)) {
                if scale.is_none() {
                    let name = schema_of::<autoscaling_api::v1::Scale>(&mut generator);
                    kinds
                        .names
                        .push((sub.kind.clone(), name.clone(), String::new()));
                    scale = Some(name);
                }
            } else {
                wanted.push(sub.kind.as_str());
            }
        }
        for kind in wanted {
            if kinds.component(kind).is_some() {
                continue;
            }
            if let Some(name) = add_kind(&mut generator, entries, group, version, kind) {
                let list = format!("{name}List");
                kinds.names.push((kind.to_owned(), name, list));
            }
        }
    }
    let names = Shared {
        status: schema_of::<meta::Status>(&mut generator),
        delete_options: schema_of::<meta::DeleteOptions>(&mut generator),
        patch: schema_of::<meta::Patch>(&mut generator),
        watch_event: schema_of::<meta::WatchEvent<core_api::v1::ConfigMap>>(&mut generator),
        resource_list: schema_of::<meta::APIResourceList>(&mut generator),
    };
    let mut schemas = generator.take_definitions(true);
    untyped_unions(&mut schemas);
    for (kind, name, list) in &kinds.names {
        if let Some(schema) = schemas.get_mut(name).and_then(Value::as_object_mut) {
            // k8s-openapi requires `metadata` (its field is not optional); upstream does not.
            if let Some(Value::Array(required)) = schema.get_mut("required") {
                required.retain(|r| r != "metadata");
                if required.is_empty() {
                    schema.remove("required");
                }
            }
        }
        if scale.as_ref() == Some(name) {
            let (g, v, k) = (
                genplane_api::autoscaling::GROUP,
                genplane_api::autoscaling::VERSION,
                genplane_api::autoscaling::KIND,
            );
            set_gvks(&mut schemas, name, vec![gvk(g, v, k)]);
            continue;
        }
        set_gvks(&mut schemas, name, vec![gvk(group, version, kind)]);
        // Only kinds that can be listed have a list kind (the reviews have none).
        let listable = served.iter().any(|r| r.kind == *kind && r.has_verb("list"));
        if listable {
            let item = schemas.get(name).cloned().unwrap_or(Value::Null);
            schemas.insert(list.clone(), list_schema(kind, name, &item));
            set_gvks(
                &mut schemas,
                list,
                vec![gvk(group, version, &format!("{kind}List"))],
            );
        }
    }
    for (name, kind) in [
        (&names.delete_options, "DeleteOptions"),
        (&names.watch_event, "WatchEvent"),
    ] {
        let gvks = all_group_versions
            .iter()
            .map(|(g, v)| gvk(g, v, kind))
            .collect();
        set_gvks(&mut schemas, name, gvks);
    }
    set_gvks(&mut schemas, &names.status, vec![gvk("", "v1", "Status")]);
    set_gvks(
        &mut schemas,
        &names.resource_list,
        vec![gvk("", "v1", "APIResourceList")],
    );
    extensions::apply_of(&mut schemas, entries);
    let path = group_version_path(group, version);
    let paths = paths::group_version_paths(group, version, &served, &kinds, &names);
    Document {
        document: openapi(paths, schemas),
        path,
    }
}

/// A custom resource kind of one version, as its group-version document describes it.
#[derive(Clone, Debug)]
pub struct CustomKind {
    /// The served resource and its served subresources.
    pub description: ResourceDescription,
    /// The component name of the kind's schema (`com.example.stable.v1.CronTab`).
    pub component: String,
    /// The kind's published schema (with `x-kubernetes-group-version-kind`).
    pub schema: Value,
    /// The list kind's published schema, if the kind is listed.
    pub list_schema: Value,
}

/// The OpenAPI document of one group version of custom resources: their schemas, the shared
/// meta schemas they refer to, and their paths with upstream's operations, so that kubectl's
/// field validation and `explain` find them.
pub fn custom_group_version_document(group: &str, version: &str, kinds: &[CustomKind]) -> Document {
    let mut generator = generator();
    let names = Shared {
        status: schema_of::<meta::Status>(&mut generator),
        delete_options: schema_of::<meta::DeleteOptions>(&mut generator),
        patch: schema_of::<meta::Patch>(&mut generator),
        watch_event: schema_of::<meta::WatchEvent<core_api::v1::ConfigMap>>(&mut generator),
        resource_list: schema_of::<meta::APIResourceList>(&mut generator),
    };
    schema_of::<meta::ObjectMeta>(&mut generator);
    schema_of::<meta::ListMeta>(&mut generator);
    // The scale subresource reads and writes autoscaling/v1 Scales.
    let scale = kinds
        .iter()
        .flat_map(|k| {
            k.description
                .subresources
                .iter()
                .map(|s| k.description.subresource_gvk(s))
        })
        .any(|gvk| is_scale(&gvk))
        .then(|| schema_of::<autoscaling_api::v1::Scale>(&mut generator));
    let mut schemas = generator.take_definitions(true);
    let mut known = Kinds { names: Vec::new() };
    if let Some(name) = scale {
        // k8s-openapi requires `metadata` (its field is not optional); upstream does not.
        if let Some(schema) = schemas.get_mut(&name).and_then(Value::as_object_mut)
            && let Some(Value::Array(required)) = schema.get_mut("required")
        {
            required.retain(|r| r != "metadata");
            if required.is_empty() {
                schema.remove("required");
            }
        }
        set_gvks(
            &mut schemas,
            &name,
            vec![gvk(
                genplane_api::autoscaling::GROUP,
                genplane_api::autoscaling::VERSION,
                genplane_api::autoscaling::KIND,
            )],
        );
        known.names.push((
            genplane_api::autoscaling::KIND.to_owned(),
            name,
            String::new(),
        ));
    }
    for kind in kinds {
        let list = format!("{}List", kind.component);
        schemas.insert(kind.component.clone(), kind.schema.clone());
        schemas.insert(list.clone(), kind.list_schema.clone());
        known
            .names
            .push((kind.description.kind.clone(), kind.component.clone(), list));
    }
    for (name, gvk_kind) in [
        (&names.delete_options, "DeleteOptions"),
        (&names.watch_event, "WatchEvent"),
    ] {
        set_gvks(&mut schemas, name, vec![gvk(group, version, gvk_kind)]);
    }
    set_gvks(&mut schemas, &names.status, vec![gvk("", "v1", "Status")]);
    set_gvks(
        &mut schemas,
        &names.resource_list,
        vec![gvk("", "v1", "APIResourceList")],
    );
    extensions::apply(&mut schemas);
    let served: Vec<&ServedResource> = kinds.iter().map(|k| &k.description).collect();
    let paths = paths::group_version_paths(group, version, &served, &known, &names);
    Document {
        document: openapi(paths, schemas),
        path: group_version_path(group, version),
    }
}

/// The apiextensions schemas upstream publishes without a type, with their description only:
/// `JSON` (any value: `default`, `example`, `enum` items) and the JSONSchemaProps unions
/// (`items` is a schema or a list of schemas, `additionalProperties` a schema or a bool, ...).
/// k8s-openapi writes `JSON` as an object and the unions as `oneOf`s, which would make `default:
/// 1` look wrong to a client that checks types.
const UNTYPED_SCHEMAS: &[&str] = &[
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrArray",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrBool",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrStringArray",
];

fn untyped_unions(schemas: &mut Map<String, Value>) {
    for name in UNTYPED_SCHEMAS {
        if let Some(schema) = schemas.get_mut(*name).and_then(Value::as_object_mut) {
            schema.retain(|key, _| key == "description");
        }
    }
}

/// The names of the schemas every group version document shares.
struct Shared {
    status: String,
    delete_options: String,
    patch: String,
    watch_event: String,
    resource_list: String,
}

fn openapi(paths: Map<String, Value>, schemas: Map<String, Value>) -> Value {
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "unversioned"},
        "paths": paths,
        "components": {"schemas": schemas},
    })
}

/// What a discovery document describes.
#[derive(Clone, Copy)]
enum Discovered {
    /// `/api/`: APIVersions.
    Versions,
    /// `/apis/`: APIGroupList.
    Groups,
    /// `/apis/<group>/`: APIGroup.
    Group,
}

fn discovery_document(
    path: &str,
    url: &str,
    operation_id: &str,
    tag: &str,
    description: &str,
    discovered: Discovered,
) -> Document {
    let mut generator = generator();
    let (name, kind) = match discovered {
        Discovered::Versions => (
            schema_of::<meta::APIVersions>(&mut generator),
            "APIVersions",
        ),
        Discovered::Groups => (
            schema_of::<meta::APIGroupList>(&mut generator),
            "APIGroupList",
        ),
        Discovered::Group => (schema_of::<meta::APIGroup>(&mut generator), "APIGroup"),
    };
    let mut schemas = generator.take_definitions(true);
    set_gvks(&mut schemas, &name, vec![gvk("", "v1", kind)]);
    let mut paths = Map::new();
    paths.insert(
        url.to_owned(),
        json!({"get": {
            "description": description,
            "operationId": operation_id,
            "tags": [tag],
            "responses": {
                "200": {"description": "OK", "content": paths::content(&name, paths::RESPONSE_TYPES)},
                "401": {"description": "Unauthorized"},
            },
        }}),
    );
    Document {
        path: path.to_owned(),
        document: openapi(paths, schemas),
    }
}

#[cfg(test)]
mod tests;

/// How deep [`resolved_schema`] follows references (deeper ones read as any value: recursive
/// schemas such as `JSONSchemaProps` stay finite).
const MAX_RESOLVED_DEPTH: usize = 12;

/// The component schema of the kind `group`/`version`/`kind` in `documents` (found by its
/// `x-kubernetes-group-version-kind`), with every `$ref` replaced by the schema it names (a
/// reference wrapped in `allOf` too), for code that types values by the schema (CEL type
/// checks); `None` when no document has the kind.
pub fn resolved_schema(
    documents: &[Document],
    group: &str,
    version: &str,
    kind: &str,
) -> Option<Value> {
    for document in documents {
        let Some(schemas) = document
            .document
            .pointer("/components/schemas")
            .and_then(Value::as_object)
        else {
            continue;
        };
        let found = schemas.values().find(|schema| {
            schema
                .get("x-kubernetes-group-version-kind")
                .and_then(Value::as_array)
                .is_some_and(|gvks| {
                    gvks.iter().any(|gvk| {
                        gvk["group"] == group && gvk["version"] == version && gvk["kind"] == kind
                    })
                })
        });
        if let Some(schema) = found {
            return Some(inline_refs(schema, schemas, 0));
        }
    }
    None
}

/// `schema` with its references replaced by their schemas, down to [`MAX_RESOLVED_DEPTH`].
fn inline_refs(schema: &Value, schemas: &Map<String, Value>, depth: usize) -> Value {
    let target = |reference: &str| {
        reference
            .strip_prefix("#/components/schemas/")
            .and_then(|name| schemas.get(name))
    };
    match schema {
        Value::Object(fields) => {
            let reference = fields.get("$ref").and_then(Value::as_str).or_else(|| {
                match fields
                    .get("allOf")
                    .and_then(Value::as_array)
                    .map(Vec::as_slice)
                {
                    Some([only]) => only.get("$ref").and_then(Value::as_str),
                    _ => None,
                }
            });
            if let Some(reference) = reference {
                if depth >= MAX_RESOLVED_DEPTH {
                    return json!({"x-kubernetes-preserve-unknown-fields": true});
                }
                let mut resolved =
                    target(reference).map_or(json!({}), |t| inline_refs(t, schemas, depth + 1));
                if let (Some(resolved), Some(description)) =
                    (resolved.as_object_mut(), fields.get("description"))
                {
                    resolved.insert("description".to_owned(), description.clone());
                }
                return resolved;
            }
            Value::Object(
                fields
                    .iter()
                    .map(|(k, v)| (k.clone(), inline_refs(v, schemas, depth)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| inline_refs(v, schemas, depth))
                .collect(),
        ),
        other => other.clone(),
    }
}
