//! Helpers on raw JSON objects: metadata access and the stored form.
//!
//! Objects are stored as JSON without `metadata.resourceVersion`; the store's revision is put
//! back on every read, as kube-apiserver does with etcd's `mod_revision`.

use genplane_apimachinery::errors::{ApiError, Status};
use genplane_apimachinery::meta::ObjectMeta;
use serde_json::{Map, Value};

/// The `metadata` map of an object, created when missing.
pub fn metadata_mut(object: &mut Value) -> &mut Map<String, Value> {
    if !object.is_object() {
        *object = Value::Object(Map::new());
    }
    let map = object
        .as_object_mut()
        .expect("invariant: made an object above");
    let metadata = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !metadata.is_object() {
        *metadata = Value::Object(Map::new());
    }
    metadata
        .as_object_mut()
        .expect("invariant: made an object above")
}

/// A string field of `metadata`, or "".
pub fn meta_str<'a>(object: &'a Value, field: &str) -> &'a str {
    object
        .pointer(&format!("/metadata/{field}"))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Sets a string field of `metadata`; an empty value removes it.
pub fn set_meta_str(object: &mut Value, field: &str, value: &str) {
    let metadata = metadata_mut(object);
    if value.is_empty() {
        metadata.remove(field);
    } else {
        metadata.insert(field.to_owned(), Value::String(value.to_owned()));
    }
}

/// Reads an object's metadata as [`ObjectMeta`]; a malformed `metadata` is a 400.
pub fn object_meta(object: &Value) -> Result<ObjectMeta, ApiError> {
    match object.get("metadata") {
        None | Some(Value::Null) => Ok(ObjectMeta::default()),
        Some(metadata) => serde_json::from_value(metadata.clone()).map_err(|e| {
            Status::bad_request(format!("the object's metadata is invalid: {e}")).into()
        }),
    }
}

/// The finalizers in `metadata.finalizers`.
pub fn finalizers(object: &Value) -> Vec<String> {
    object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Replaces `metadata.finalizers` (an empty list removes the field).
pub fn set_finalizers(object: &mut Value, finalizers: &[String]) {
    let metadata = metadata_mut(object);
    if finalizers.is_empty() {
        metadata.remove("finalizers");
    } else {
        metadata.insert("finalizers".into(), Value::from(finalizers.to_vec()));
    }
}

/// The stored form: the object without `metadata.resourceVersion`.
pub fn encode(object: &Value) -> Result<bytes::Bytes, ApiError> {
    let mut stored = object.clone();
    metadata_mut(&mut stored).remove("resourceVersion");
    serde_json::to_vec(&stored)
        .map(bytes::Bytes::from)
        .map_err(|e| Status::internal_error(format!("encoding the object: {e}")).into())
}

/// The served form of a stored value at `revision`.
pub fn decode(value: &[u8], revision: i64) -> Result<Value, ApiError> {
    let mut object: Value = serde_json::from_slice(value)
        .map_err(|e| Status::internal_error(format!("decoding a stored object: {e}")))?;
    set_meta_str(&mut object, "resourceVersion", &revision.to_string());
    Ok(object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stored_objects_carry_no_resource_version_and_get_it_back_on_read() {
        let object = json!({"metadata": {"name": "a", "resourceVersion": "5"}, "data": {"k": "v"}});
        let stored = encode(&object).unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&stored).unwrap(),
            json!({"metadata": {"name": "a"}, "data": {"k": "v"}})
        );
        assert_eq!(
            decode(&stored, 9).unwrap()["metadata"]["resourceVersion"],
            "9"
        );
    }

    #[test]
    fn metadata_helpers_tolerate_missing_metadata() {
        let mut object = json!({"kind": "ConfigMap"});
        assert_eq!(meta_str(&object, "name"), "");
        set_meta_str(&mut object, "name", "a");
        assert_eq!(object["metadata"]["name"], "a");
        set_finalizers(&mut object, &["x".into()]);
        assert_eq!(finalizers(&object), vec!["x".to_owned()]);
        set_finalizers(&mut object, &[]);
        assert!(object["metadata"].get("finalizers").is_none());
        assert!(object_meta(&json!({"metadata": {"labels": 5}})).is_err());
    }
}
