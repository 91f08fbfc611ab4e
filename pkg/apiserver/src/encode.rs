//! The shapes of answers: lists, Tables, partial object metadata, watch events and Status
//! objects, and their serialization. JSON is written in kube-apiserver's field order
//! (`genplane_api::order`: built-in kinds, their lists, Status, Tables and partial object
//! metadata as their Go types are declared; custom resources with sorted keys, as upstream's
//! unstructured objects).

use genplane_apimachinery::codec::protobuf;
use genplane_apimachinery::errors::{ApiError, Status};
use genplane_apimachinery::meta::schemas::STATUS;
use genplane_registry::ListResult;
use serde_json::{Map, Value, json};

use crate::kind::ServedKind;
use crate::negotiation::{Format, Negotiated};

/// Serializes `value` in `format`, with a trailing newline for JSON (as kube-apiserver ends
/// its bodies), in upstream's field order. Protobuf needs the schema: a `Status` has its own, a list of `info`'s list kind
/// is a list of `info`'s objects, anything else is one of `info`'s objects.
pub fn serialize(
    value: &Value,
    format: Format,
    info: Option<&ServedKind>,
) -> Result<Vec<u8>, ApiError> {
    match format {
        Format::Json => {
            let mut bytes = genplane_api::order::to_vec(value);
            bytes.push(b'\n');
            Ok(bytes)
        }
        Format::Yaml => Ok(serde_saphyr::to_string(value)
            .unwrap_or_default()
            .into_bytes()),
        Format::Protobuf => {
            let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
            let encoded = match info {
                _ if kind == "Status" => protobuf::encode(value, &STATUS),
                Some(info) if info.protobuf().is_some() => {
                    let schema = info.protobuf().expect("invariant: checked above");
                    if kind == info.list_kind {
                        protobuf::encode_list(value, schema)
                    } else {
                        protobuf::encode(value, schema)
                    }
                }
                _ => {
                    return Err(Status::internal_error(format!(
                        "no protobuf form for a {} answer",
                        genplane_apimachinery::gofmt::Quoted(kind)
                    ))
                    .into());
                }
            };
            encoded.map_err(|e| Status::internal_error(e).into())
        }
    }
}

/// The `metadata` of a list.
fn list_meta(list: &ListResult) -> Value {
    let mut meta = Map::new();
    meta.insert("resourceVersion".into(), json!(list.resource_version));
    if let Some(token) = &list.continue_token {
        meta.insert("continue".into(), json!(token));
    }
    if let Some(remaining) = list.remaining_item_count {
        meta.insert("remainingItemCount".into(), json!(remaining));
    }
    Value::Object(meta)
}

/// A list of objects: `{"kind": "ConfigMapList", "apiVersion": "v1", "metadata": ..., "items": [...]}`.
pub fn list(info: &ServedKind, list: ListResult) -> Value {
    let meta = list_meta(&list);
    json!({"kind": info.list_kind, "apiVersion": info.api_version(), "metadata": meta, "items": list.items})
}

/// `PartialObjectMetadata` of an object.
pub fn partial_metadata(object: &Value, version: &str) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": object.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// `PartialObjectMetadataList` of a list.
pub fn partial_metadata_list(list: &ListResult, version: &str) -> Value {
    let items: Vec<Value> = list
        .items
        .iter()
        .map(|o| partial_metadata(o, version))
        .collect();
    json!({"kind": "PartialObjectMetadataList", "apiVersion": format!("meta.k8s.io/{version}"), "metadata": list_meta(list), "items": items})
}

/// A `meta.k8s.io` Table of `objects`, each row carrying the object's metadata (so that kubectl
/// can show namespaces and labels). Without `headers` the column definitions are left out, as
/// for every watch event after the first.
pub fn table(
    info: &ServedKind,
    objects: &[Value],
    list: Option<&ListResult>,
    version: &str,
    headers: bool,
    now: i64,
) -> Value {
    let rows: Vec<Value> = objects
        .iter()
        .map(|object| json!({"cells": info.row(object, now), "object": partial_metadata(object, "v1")}))
        .collect();
    let columns = if headers { info.columns() } else { json!([]) };
    // A table of one object carries the object's resourceVersion, as upstream's (a watch of
    // Tables resumes from it).
    let metadata = match (list, objects) {
        (Some(list), _) => list_meta(list),
        (None, [object]) => match object.pointer("/metadata/resourceVersion") {
            Some(resource_version) => json!({"resourceVersion": resource_version}),
            None => json!({}),
        },
        (None, _) => json!({}),
    };
    json!({"kind": "Table", "apiVersion": format!("meta.k8s.io/{version}"), "metadata": metadata, "columnDefinitions": columns, "rows": rows})
}

/// One object in the negotiated form.
pub fn object(info: &ServedKind, object: Value, negotiated: &Negotiated, now: i64) -> Value {
    use crate::negotiation::Target;
    match negotiated.target {
        Target::Table(version) => table(
            info,
            std::slice::from_ref(&object),
            None,
            version,
            true,
            now,
        ),
        Target::PartialObjectMetadata(version) | Target::PartialObjectMetadataList(version) => {
            partial_metadata(&object, version)
        }
        Target::Object | Target::GroupDiscoveryList(_) => object,
    }
}

/// One watch event in `format`: a JSON line `{"type":"ADDED","object":{...}}` and a newline,
/// or a protobuf frame (a 4-byte length, then a `WatchEvent` holding the object's whole body).
/// An object that does not encode becomes an ERROR event with the Status.
pub fn watch_event(kind: &str, object: Value, format: Format, info: &ServedKind) -> Vec<u8> {
    if format == Format::Protobuf {
        return match serialize(&object, format, Some(info)) {
            Ok(body) => protobuf::watch_frame(kind, &body),
            Err(error) => {
                let body = serialize(&status(&error), format, None).unwrap_or_default();
                protobuf::watch_frame("ERROR", &body)
            }
        };
    }
    watch_line(kind, &genplane_api::order::to_vec(&object))
}

/// A JSON watch event line from the object's JSON: `{"type":...,"object":...}` and a newline.
pub fn watch_line(kind: &str, object_json: &[u8]) -> Vec<u8> {
    let mut line = Vec::with_capacity(object_json.len() + kind.len() + 24);
    line.extend_from_slice(b"{\"type\":\"");
    line.extend_from_slice(kind.as_bytes());
    line.extend_from_slice(b"\",\"object\":");
    line.extend_from_slice(object_json);
    line.extend_from_slice(b"}\n");
    line
}

/// A bookmark's object: only kind, apiVersion and the revision reached (kube-rs requires the
/// kind and apiVersion), with the end-of-initial-events annotation when it ends them.
pub fn bookmark(info: &ServedKind, resource_version: &str, initial_events_end: bool) -> Value {
    let mut metadata = json!({"resourceVersion": resource_version});
    if initial_events_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    json!({"kind": info.kind, "apiVersion": info.api_version(), "metadata": metadata})
}

/// A Status as a JSON value.
pub fn status(status: &Status) -> Value {
    serde_json::to_value(status).unwrap_or_default()
}
