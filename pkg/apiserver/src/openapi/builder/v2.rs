//! The OpenAPI v2 (Swagger 2.0) document kube-apiserver publishes at `/openapi/v2`, derived from
//! the v3 documents so that both describe the same schemas and operations.
//!
//! kubectl before 1.29 reads this document (as protobuf, see [`super::gnostic`]) before it
//! validates `create -f`, `apply -f` and `replace -f`, and for `explain`. It looks for the
//! `fieldValidation` parameter on the PATCH operation whose `x-kubernetes-group-version-kind`
//! names the object's kind, and it parses every definition, so the document must keep to the
//! subset of Swagger 2.0 its parser accepts: a `$ref` has no `type` or `properties` beside it,
//! and an array has exactly one `items` schema.
//!
//! ## The translation
//!
//! One document holds every served group version: the paths of all v3 documents and their
//! component schemas, merged (a schema several documents share is the same in each, except
//! that a document which only references a kind leaves out its group-version-kind: the
//! entries are joined). Then:
//!
//! - `components.schemas` become `definitions`, and references `#/components/schemas/<name>`
//!   become `#/definitions/<name>`. A v3 `allOf` of one reference with a description beside it
//!   becomes the reference with the description beside it, as upstream writes v2 schemas.
//! - A parameter's `schema` (`type`, `format`, `uniqueItems`, ...) moves into the parameter.
//! - A `requestBody` becomes a parameter named `body` in the body, and its media types the
//!   operation's `consumes`.
//! - Each response's schema (the same for every media type) becomes the response's `schema`,
//!   and the media types of all responses the operation's `produces`.
//! - A schema that keeps unknown fields (`x-kubernetes-preserve-unknown-fields: true`) loses
//!   the extension and its `properties` and `items` (but for a kind's `apiVersion`, `kind` and
//!   `metadata`), and an array left without items its type, as upstream writes v2 for custom
//!   resources: kubectl's v2 parser then reads it as any value, and a CRD whose schema keeps
//!   every field is published as `type: object`.
//! - Everything else (descriptions, operation ids, tags, the `x-kubernetes-*` extensions on
//!   schemas and operations) is kept as it is.

use serde_json::{Map, Value, json};

use super::Document;

const V3_PREFIX: &str = "#/components/schemas/";
const V2_PREFIX: &str = "#/definitions/";
const GVK: &str = "x-kubernetes-group-version-kind";

/// The Swagger 2.0 document of everything `documents` (the v3 documents of a server)
/// describe; `version` is the server's version, reported in `info.version`.
pub fn swagger(documents: &[Document], version: &str) -> Value {
    let mut paths = Map::new();
    let mut definitions = Map::new();
    for document in documents {
        if let Some(schemas) = document
            .document
            .pointer("/components/schemas")
            .and_then(Value::as_object)
        {
            for (name, schema) in schemas {
                match definitions.get_mut(name) {
                    Some(earlier) => merge_kinds(earlier, schema),
                    None => {
                        definitions.insert(name.clone(), schema_v2(schema));
                    }
                }
            }
        }
        if let Some(items) = document.document.get("paths").and_then(Value::as_object) {
            for (path, item) in items {
                if !paths.contains_key(path) {
                    paths.insert(path.clone(), path_item_v2(item));
                }
            }
        }
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": version},
        "paths": paths,
        "definitions": definitions,
    })
}

/// Adds the `x-kubernetes-group-version-kind` entries of `schema` that `earlier` (the same
/// schema from another document) lacks: a document that only references a kind's schema (as
/// `apis` references APIGroup) does not name its kind.
fn merge_kinds(earlier: &mut Value, schema: &Value) {
    let Some(kinds) = schema.get(GVK).and_then(Value::as_array) else {
        return;
    };
    let Some(earlier) = earlier.as_object_mut() else {
        return;
    };
    let known = earlier
        .entry(GVK)
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(known) = known {
        for kind in kinds {
            if !known.contains(kind) {
                known.push(kind.clone());
            }
        }
    }
}

/// The extension of a schema that keeps unknown fields.
const PRESERVE: &str = "x-kubernetes-preserve-unknown-fields";

/// A v3 schema as a v2 schema: references rewritten, single-reference `allOf`s flattened,
/// schemas that keep unknown fields left without their fields.
fn schema_v2(schema: &Value) -> Value {
    match schema {
        Value::Object(map) => {
            let mut out = Map::new();
            let preserves = map.get(PRESERVE) == Some(&Value::Bool(true));
            let kind_root = map.contains_key(GVK);
            for (key, value) in map {
                match key.as_str() {
                    PRESERVE if preserves => {}
                    "items" if preserves => {}
                    "properties" if preserves => {
                        // A kind keeps what every object has.
                        let kept: Map<String, Value> = value
                            .as_object()
                            .into_iter()
                            .flatten()
                            .filter(|(name, _)| {
                                kind_root
                                    && matches!(name.as_str(), "apiVersion" | "kind" | "metadata")
                            })
                            .map(|(name, v)| (name.clone(), schema_v2(v)))
                            .collect();
                        if !kept.is_empty() {
                            out.insert(key.clone(), Value::Object(kept));
                        }
                    }
                    "type" if preserves && value == "array" => {}
                    "$ref" => {
                        let reference = value.as_str().unwrap_or_default();
                        let name = reference.strip_prefix(V3_PREFIX).unwrap_or(reference);
                        out.insert(key.clone(), Value::String(format!("{V2_PREFIX}{name}")));
                    }
                    // v3 only; v2 has no null type.
                    "nullable" => {}
                    "properties" => {
                        let properties = value
                            .as_object()
                            .map(|p| p.iter().map(|(k, v)| (k.clone(), schema_v2(v))).collect())
                            .unwrap_or_default();
                        out.insert(key.clone(), Value::Object(properties));
                    }
                    "allOf" => match value.as_array().map(Vec::as_slice) {
                        Some([only]) if only.get("$ref").is_some() => {
                            if let Value::Object(reference) = schema_v2(only) {
                                out.extend(reference);
                            }
                        }
                        _ => {
                            out.insert(key.clone(), schema_v2(value));
                        }
                    },
                    "items" | "additionalProperties" | "not" | "anyOf" | "oneOf" => {
                        out.insert(key.clone(), schema_v2(value));
                    }
                    _ => {
                        out.insert(key.clone(), value.clone());
                    }
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(schema_v2).collect()),
        other => other.clone(),
    }
}

const METHODS: &[&str] = &["get", "put", "post", "delete", "options", "head", "patch"];

fn path_item_v2(item: &Value) -> Value {
    let Some(item) = item.as_object() else {
        return item.clone();
    };
    let mut out = Map::new();
    for (key, value) in item {
        let converted = match key.as_str() {
            "parameters" => parameters_v2(value),
            method if METHODS.contains(&method) => operation_v2(value),
            _ => value.clone(),
        };
        out.insert(key.clone(), converted);
    }
    Value::Object(out)
}

fn parameters_v2(parameters: &Value) -> Value {
    Value::Array(
        parameters
            .as_array()
            .map(|p| p.iter().map(parameter_v2).collect())
            .unwrap_or_default(),
    )
}

/// A v3 parameter with the keys of its `schema` moved into it.
fn parameter_v2(parameter: &Value) -> Value {
    let Some(parameter) = parameter.as_object() else {
        return parameter.clone();
    };
    let mut out = Map::new();
    for (key, value) in parameter {
        if key == "schema" {
            if let Value::Object(schema) = schema_v2(value) {
                out.extend(schema);
            }
        } else {
            out.insert(key.clone(), value.clone());
        }
    }
    Value::Object(out)
}

/// Appends the keys of `content` (media types) to `types`, each once.
fn media_types(content: Option<&Value>, types: &mut Vec<Value>) {
    for media in content.and_then(Value::as_object).into_iter().flatten() {
        let media = Value::String(media.0.clone());
        if !types.contains(&media) {
            types.push(media);
        }
    }
}

/// The schema of the first media type of `content`, as a v2 schema.
fn content_schema(content: Option<&Value>) -> Option<Value> {
    content
        .and_then(Value::as_object)
        .and_then(|c| c.values().find_map(|m| m.get("schema")))
        .map(schema_v2)
}

fn operation_v2(operation: &Value) -> Value {
    let Some(operation) = operation.as_object() else {
        return operation.clone();
    };
    let mut out = Map::new();
    let mut consumes = Vec::new();
    let mut produces = Vec::new();
    let mut parameters = operation
        .get("parameters")
        .map(parameters_v2)
        .and_then(|p| p.as_array().cloned())
        .unwrap_or_default();
    for (key, value) in operation {
        match key.as_str() {
            "parameters" => {}
            "requestBody" => {
                let content = value.get("content");
                media_types(content, &mut consumes);
                let mut body = Map::new();
                body.insert("name".into(), json!("body"));
                body.insert("in".into(), json!("body"));
                body.insert(
                    "required".into(),
                    Value::Bool(value.get("required").and_then(Value::as_bool) == Some(true)),
                );
                if let Some(description) = value.get("description") {
                    body.insert("description".into(), description.clone());
                }
                if let Some(schema) = content_schema(content) {
                    body.insert("schema".into(), schema);
                }
                parameters.insert(0, Value::Object(body));
            }
            "responses" => {
                let mut responses = Map::new();
                for (code, response) in value.as_object().into_iter().flatten() {
                    let content = response.get("content");
                    media_types(content, &mut produces);
                    let mut converted = Map::new();
                    for (k, v) in response.as_object().into_iter().flatten() {
                        if k != "content" {
                            converted.insert(k.clone(), v.clone());
                        }
                    }
                    if let Some(schema) = content_schema(content) {
                        converted.insert("schema".into(), schema);
                    }
                    responses.insert(code.clone(), Value::Object(converted));
                }
                out.insert(key.clone(), Value::Object(responses));
            }
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    if !consumes.is_empty() {
        out.insert("consumes".into(), Value::Array(consumes));
    }
    if !produces.is_empty() {
        out.insert("produces".into(), Value::Array(produces));
    }
    if !parameters.is_empty() {
        out.insert("parameters".into(), Value::Array(parameters));
    }
    Value::Object(out)
}
