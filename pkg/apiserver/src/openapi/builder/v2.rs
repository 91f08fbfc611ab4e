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

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::gnostic;
use crate::body::{GzipPart, gzip_parts};

const V3_PREFIX: &str = "#/components/schemas/";
const V2_PREFIX: &str = "#/definitions/";
const GVK: &str = "x-kubernetes-group-version-kind";

/// A v3 document the v2 document is made from, as JSON text.
#[derive(Clone, Copy, Debug)]
pub struct Source<'a> {
    /// The document, as JSON or gzip-compressed JSON.
    pub bytes: &'a [u8],
    /// For compressed bytes, the JSON's length.
    pub gzip: Option<usize>,
    /// For a document another server serves: the path it describes (`/apis/<group>/<version>`);
    /// only that path and the paths below it are taken from it.
    pub own_paths: Option<&'a str>,
}

/// The Swagger 2.0 document of everything `sources` (the v3 documents of a server, in order)
/// describe, as JSON; `version` is the server's version, reported in `info.version`. It is
/// written gzip-compressed as it is built: one gzip stream in pieces, and the JSON's length.
///
/// Where two documents hold the same path or schema, the first one's is taken (with the
/// group-version-kinds of all of them). Only one source is parsed at a time, and the
/// document is never held uncompressed: with thousands of custom resource definitions it is
/// over 100 MB, a tenth of that compressed.
pub fn json(sources: &[Source<'_>], version: &str) -> (Vec<Bytes>, usize) {
    let mut paths = Section::default();
    let mut definitions = Section::default();
    walk(
        sources,
        |name, item| paths.entry(b",", |out| json_entry(out, name, item)),
        |name, schema| definitions.entry(b",", |out| json_entry(out, name, schema)),
    );
    let info = json!({"title": "Kubernetes", "version": version});
    let head = format!("{{\"swagger\":\"2.0\",\"info\":{info},\"paths\":{{");
    gzip_parts([
        part_of(head.as_bytes()),
        paths.part,
        part_of(b"},\"definitions\":{"),
        definitions.part,
        part_of(b"}}"),
    ])
}

/// The same document as [`json()`], as gnostic's `openapi.v2.Document` message (see
/// [`gnostic`]), likewise compressed as it is written.
pub fn protobuf(sources: &[Source<'_>], version: &str) -> (Vec<Bytes>, usize) {
    let mut paths = Section::default();
    let mut definitions = Section::default();
    walk(
        sources,
        |name, item| paths.entry(b"", |out| gnostic::path_entry(out, name, item)),
        |name, schema| definitions.entry(b"", |out| gnostic::definition_entry(out, name, schema)),
    );
    let head = gnostic::document_head("Kubernetes", version, paths.part.len());
    let definitions_head = gnostic::definitions_head(definitions.part.len());
    gzip_parts([
        part_of(&head),
        paths.part,
        part_of(&definitions_head),
        definitions.part,
    ])
}

/// A part of the document holding `bytes`.
fn part_of(bytes: &[u8]) -> GzipPart {
    let mut part = GzipPart::default();
    part.write(bytes);
    part
}

/// A section of the document (its paths, or its definitions): entries compressed as they are
/// written.
#[derive(Default)]
struct Section {
    part: GzipPart,
    /// The entry being written.
    entry: Vec<u8>,
}

impl Section {
    /// Writes an entry with `write`, after `separator` if it is not the first.
    fn entry(&mut self, separator: &[u8], write: impl FnOnce(&mut Vec<u8>)) {
        self.entry.clear();
        if !self.part.is_empty() {
            self.entry.extend_from_slice(separator);
        }
        write(&mut self.entry);
        self.part.write(&self.entry);
    }
}

impl Source<'_> {
    /// The JSON (`None` if compressed bytes do not uncompress).
    fn json(&self) -> Option<std::borrow::Cow<'_, [u8]>> {
        match self.gzip {
            None => Some(std::borrow::Cow::Borrowed(self.bytes)),
            Some(len) => crate::body::gunzip(self.bytes, len)
                .ok()
                .map(std::borrow::Cow::Owned),
        }
    }
}

/// `"name":value` as JSON.
fn json_entry(out: &mut Vec<u8>, name: &str, value: &Value) {
    // Writing a string or a `Value` into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, name);
    out.push(b':');
    let _ = serde_json::to_writer(&mut *out, value);
}

/// What the first pass reads of a source: the group-version-kinds of its schemas.
#[derive(Deserialize)]
struct KindsOf {
    #[serde(default)]
    components: KindsOfComponents,
}

#[derive(Default, Deserialize)]
struct KindsOfComponents {
    #[serde(default)]
    schemas: HashMap<String, KindsOfSchema>,
}

#[derive(Deserialize)]
struct KindsOfSchema {
    #[serde(rename = "x-kubernetes-group-version-kind")]
    kinds: Option<Vec<Value>>,
}

/// Hands each path (as a v2 path item) and each schema (as a v2 definition) of `sources` to
/// `path` and `definition`, in the sources' order, each name once: the first source's path or
/// schema, a schema with the group-version-kinds of every source that has it (a document that
/// only references a kind, as `apis` references APIGroup, does not name its kind).
///
/// Two passes: the first reads only the group-version-kinds, the second one source at a time.
fn walk(
    sources: &[Source<'_>],
    mut path: impl FnMut(&str, &Value),
    mut definition: impl FnMut(&str, &Value),
) {
    let mut kinds: HashMap<String, Vec<Value>> = HashMap::new();
    for source in sources {
        let Some(Ok(of)) = source
            .json()
            .map(|json| serde_json::from_slice::<KindsOf>(&json))
        else {
            continue;
        };
        for (name, schema) in of.components.schemas {
            let Some(more) = schema.kinds else { continue };
            let known = kinds.entry(name).or_default();
            for kind in more {
                if !known.contains(&kind) {
                    known.push(kind);
                }
            }
        }
    }
    let mut paths_taken: HashSet<String> = HashSet::new();
    let mut definitions_taken: HashSet<String> = HashSet::new();
    for source in sources {
        let Some(Ok(mut document)) = source
            .json()
            .map(|json| serde_json::from_slice::<Value>(&json))
        else {
            continue;
        };
        if !document.is_object() {
            continue;
        }
        if let Some(Value::Object(schemas)) = document.pointer_mut("/components/schemas") {
            for (name, schema) in schemas.iter_mut() {
                if definitions_taken.contains(name) {
                    continue;
                }
                definitions_taken.insert(name.clone());
                if let (Some(all), Value::Object(schema)) = (kinds.get(name), &mut *schema) {
                    schema.insert(GVK.to_owned(), Value::Array(all.clone()));
                }
                definition(name, &schema_v2(schema));
            }
        }
        if let Some(Value::Object(items)) = document.get("paths") {
            for (name, item) in items {
                let own = source.own_paths.is_none_or(|own| {
                    name.strip_prefix(own)
                        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
                });
                if own && !paths_taken.contains(name) {
                    paths_taken.insert(name.clone());
                    path(name, &path_item_v2(item));
                }
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
