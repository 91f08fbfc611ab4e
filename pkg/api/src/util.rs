//! Helpers for writing a kind: reading an object (typed or by path), its field-selector values
//! and its table cells. The built-in kinds use them; so can a program's own.

use std::collections::BTreeMap;

use genplane_apimachinery::codec::decode;
use genplane_apimachinery::codec::schema::Struct;
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::meta::ObjectMeta;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::resource::Context;
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};

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
    // Objects reaching validation were decoded when their write began: decoding them again
    // only checks, and copies nothing.
    let decoded =
        decode::decode_borrowed(object, schema).map_err(|e| e.to_api_error(kind, version))?;
    let meta = match decoded.get("metadata") {
        Some(m) => decode::typed(m, "metadata"),
        None => Ok(ObjectMeta::default()),
    };
    let body = decode::typed(&decoded, schema.name);
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
    Value::from(genplane_apimachinery::time::age(created, now))
}

fn generation(object: &Value) -> i64 {
    object
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

fn set_generation(object: &mut Value, generation: i64) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("generation".into(), Value::from(generation));
    }
}

/// The create hook of a kind with a spec and a `status` subresource: no status is accepted on
/// create, and `metadata.generation` starts at 1.
pub fn prepare_spec_create(object: &mut Value, _: &Context<'_>) {
    if let Some(object) = object.as_object_mut() {
        object.remove("status");
    }
    set_generation(object, 1);
}

/// The update hook of a kind with a spec and a `status` subresource: the stored status is
/// kept, and `metadata.generation` grows when the spec changes.
pub fn prepare_spec_update(new: &mut Value, old: &Value, _: &Context<'_>) {
    let next = if new.get("spec") == old.get("spec") {
        generation(old)
    } else {
        generation(old) + 1
    };
    match old.get("status") {
        Some(status) => new["status"] = status.clone(),
        None => {
            if let Some(new) = new.as_object_mut() {
                new.remove("status");
            }
        }
    }
    set_generation(new, next);
}

/// The update hook of a `status` subresource: everything but the status (and the labels and
/// annotations) stays as stored.
pub fn prepare_status_update(new: &mut Value, old: &Value, _: &Context<'_>) {
    let status = new.get("status").cloned();
    let labels = new.pointer("/metadata/labels").cloned();
    let annotations = new.pointer("/metadata/annotations").cloned();
    let resource_version = new.pointer("/metadata/resourceVersion").cloned();
    // What a server-side apply through `status` computed for its manager.
    let managed_fields = new.pointer("/metadata/managedFields").cloned();
    *new = old.clone();
    match status {
        Some(status) => new["status"] = status,
        None => {
            if let Some(new) = new.as_object_mut() {
                new.remove("status");
            }
        }
    }
    if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
        for (key, value) in [
            ("labels", labels),
            ("annotations", annotations),
            ("resourceVersion", resource_version),
            ("managedFields", managed_fields),
        ] {
            match value {
                Some(value) => meta.insert(key.into(), value),
                None => meta.remove(key),
            };
        }
    }
}

/// The `status` of the condition of type `type_` in `status.conditions`, or `Unknown` (a
/// table cell).
pub fn condition_status(object: &Value, type_: &str) -> String {
    object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|conditions| conditions.iter().find(|c| c["type"] == type_))
        .and_then(|c| c["status"].as_str())
        .unwrap_or("Unknown")
        .to_owned()
}

/// The statuses of a condition.
pub const CONDITION_STATUSES: &[&str] = &["True", "False", "Unknown"];

/// Checks conditions given as (type, status), at `path` (`status.conditions`): each has a
/// type, no type twice, and a status of [`CONDITION_STATUSES`].
pub fn validate_conditions<'a>(
    conditions: impl Iterator<Item = (&'a str, &'a str)>,
    path: &Path,
    errors: &mut ErrorList,
) {
    let mut types = std::collections::BTreeSet::new();
    for (i, (type_, status)) in conditions.enumerate() {
        let at = path.index(i);
        if type_.is_empty() {
            errors.push(Error::required(&at.child("type"), ""));
        } else if !types.insert(type_) {
            errors.push(Error::duplicate(&at.child("type"), type_));
        }
        if !CONDITION_STATUSES.contains(&status) {
            errors.push(Error::not_supported(
                &at.child("status"),
                status,
                CONDITION_STATUSES,
            ));
        }
    }
}

/// The string field `key` of `value`, or `""`.
fn str_of<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

/// `object` with `condition` set ([`set_condition`]), or `None` when its condition of that type
/// already says the same ([`condition_equivalent`]): what a controller writes through `status`.
pub fn with_condition(object: &Value, condition: Value, now: &str) -> Option<Value> {
    let kind = str_of(&condition, "type");
    let current = object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|conditions| conditions.iter().find(|c| str_of(c, "type") == kind));
    if condition_equivalent(current, Some(&condition)) {
        return None;
    }
    let mut updated = object.clone();
    set_condition(&mut updated, condition, now);
    Some(updated)
}

/// Whether two conditions say the same: type, status, reason and message (not the time).
pub fn condition_equivalent(a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => ["type", "status", "reason", "message"]
            .iter()
            .all(|k| str_of(a, k) == str_of(b, k)),
        _ => false,
    }
}

/// Writes `condition` into `object.status.conditions` as upstream's `Set*Condition` helpers
/// do (CRDs, APIServices, FlowSchemas): a new condition is appended with
/// `lastTransitionTime: now`; an existing one takes the new reason and message, and the new
/// status with `now` only when the status changes (or it had no time).
pub fn set_condition(object: &mut Value, condition: Value, now: &str) {
    let Some(root) = object.as_object_mut() else {
        return;
    };
    let status = root
        .entry("status")
        .or_insert_with(|| Value::Object(Map::new()));
    if !status.is_object() {
        *status = Value::Object(Map::new());
    }
    let conditions = &mut status["conditions"];
    if !conditions.is_array() {
        *conditions = Value::Array(Vec::new());
    }
    let Some(list) = conditions.as_array_mut() else {
        return;
    };
    let kind = str_of(&condition, "type").to_owned();
    let field = |c: &Value, k: &str| c.get(k).cloned().unwrap_or(Value::from(""));
    match list.iter_mut().find(|c| str_of(c, "type") == kind) {
        None => {
            let mut new = condition.clone();
            new["lastTransitionTime"] = Value::from(now);
            list.push(new);
        }
        Some(existing) => {
            let status_changed = str_of(existing, "status") != str_of(&condition, "status");
            let no_time = str_of(existing, "lastTransitionTime").is_empty();
            if status_changed || no_time {
                existing["status"] = field(&condition, "status");
                existing["lastTransitionTime"] = Value::from(now);
            }
            for key in ["reason", "message"] {
                let value = field(&condition, key);
                match existing.as_object_mut() {
                    Some(map) if value == "" => {
                        map.remove(key);
                    }
                    Some(map) => {
                        map.insert(key.to_owned(), value);
                    }
                    None => {}
                }
            }
        }
    }
}
