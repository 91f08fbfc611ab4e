//! Helpers for writing a kind: reading an object (typed or by path), its field-selector values
//! and its table cells. The built-in kinds use them; so can a program's own.

use std::collections::BTreeMap;

use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::meta::ObjectMeta;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::decode::{self, Struct};

/// The string at `path` in `value`, or `""`.
pub fn str_at<'a>(value: &'a Value, path: &[&str]) -> &'a str {
    let mut current = value;
    for key in path {
        match current.get(key) {
            Some(next) => current = next,
            None => return "",
        }
    }
    current.as_str().unwrap_or("")
}

/// The number of entries of the object or array at `key`, or 0.
pub fn len_at(value: &Value, key: &str) -> usize {
    match value.get(key) {
        Some(Value::Object(m)) => m.len(),
        Some(Value::Array(a)) => a.len(),
        _ => 0,
    }
}

/// Decodes `object` as `schema` and reads its metadata and body: the body type reads the
/// fields it needs from the decoded object.
pub fn decode_typed<T: DeserializeOwned>(
    object: &Value,
    schema: &'static Struct,
    kind: &str,
    version: &str,
) -> Result<(ObjectMeta, T), ApiError> {
    let decoded = decode::decode(object, schema).map_err(|e| e.to_api_error(kind, version))?;
    let meta = match decoded.object.get("metadata") {
        Some(m) => decode::typed(m, "metadata"),
        None => Ok(ObjectMeta::default()),
    };
    let body = decode::typed(&decoded.object, schema.name);
    match (meta, body) {
        (Ok(meta), Ok(body)) => Ok((meta, body)),
        (Err(e), _) | (_, Err(e)) => Err(e.to_api_error(kind, version)),
    }
}

/// Sets `new`'s top-level field `key` to `old`'s (removes it when `old` has none): what a
/// strategy keeps of the stored object on an update (`status` on a spec write, `spec` on a
/// status write).
pub fn keep_field(new: &mut Value, old: &Value, key: &str) {
    if let Some(fields) = new.as_object_mut() {
        match old.get(key) {
            Some(value) => {
                fields.insert(key.to_owned(), value.clone());
            }
            None => {
                fields.remove(key);
            }
        }
    }
}

/// The `metadata.name` and, for namespaced resources, `metadata.namespace` field-selector values
/// (upstream's `ObjectMetaFieldsSet`).
pub fn meta_fields(object: &Value, namespaced: bool) -> BTreeMap<&'static str, String> {
    let mut fields = BTreeMap::new();
    fields.insert(
        "metadata.name",
        str_at(object, &["metadata", "name"]).to_owned(),
    );
    if namespaced {
        fields.insert(
            "metadata.namespace",
            str_at(object, &["metadata", "namespace"]).to_owned(),
        );
    }
    fields
}

/// The object's `metadata.name`.
pub fn name(object: &Value) -> Value {
    Value::from(str_at(object, &["metadata", "name"]))
}

/// The object's age at `now`.
pub fn age(object: &Value, now: i64) -> Value {
    let created = object
        .get("metadata")
        .and_then(|m| m.get("creationTimestamp"))
        .and_then(Value::as_str);
    Value::from(crate::time::age(created, now))
}
