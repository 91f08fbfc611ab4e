//! Decoding a body into the upstream shape of a kind through its k8s-openapi type.
//!
//! genplane's built-in kinds describe their JSON shape field by field (`genplane_apimachinery::codec::decode`).
//! The kinds of this cluster are large (a `PodSpec` has some forty fields, each with its own
//! types), so for JSON and YAML they borrow their shape from k8s-openapi instead (their
//! protobuf messages are a table of their own, [`super::proto`], which reads a protobuf body
//! into the JSON this module then decodes):
//!
//! 1. the metadata is decoded and normalized by genplane's own schema of `ObjectMeta`
//!    (times, managed fields), the rest kept as given;
//! 2. the object is read into its k8s-openapi type, which checks every field's JSON type
//!    (a 400 in upstream's words, `Pod in version "v1" cannot be handled as a Pod: ...`);
//! 3. the typed value is written back: what upstream would store after a round trip through
//!    its Go types, without fields the type does not have. Those are reported as unknown
//!    (`spec.foo`), for `fieldValidation=Strict|Warn`.
//!
//! Resource quantities are read as Go reads them, from a string or a number.

use genplane_apimachinery::codec::decode::{self, Decoded};
use genplane_apimachinery::codec::schema::{Field, Struct, Type};
use genplane_apimachinery::errors::{ApiError, Status};
use genplane_apimachinery::gofmt::Quoted;
use genplane_apimachinery::meta::schemas::OBJECT_META;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// The top of every kind here: type meta and metadata known, the rest taken from the typed
/// round trip.
pub static TOP: Struct = Struct {
    name: "Object",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
    ],
};

/// Keys whose values are maps of resource quantities.
const QUANTITY_MAPS: &[&str] = &["capacity", "allocatable", "limits", "requests", "overhead"];

/// Decodes `object` as the k8s-openapi type `T` of `kind` in `version` (see the module docs).
pub fn decode<T: DeserializeOwned + Serialize>(
    object: &Value,
    kind: &str,
    version: &str,
) -> Result<Decoded, ApiError> {
    let cannot = |why: &dyn std::fmt::Display| -> ApiError {
        Status::bad_request(format!(
            "{kind} in version {} cannot be handled as a {kind}: {why}",
            Quoted(version)
        ))
        .into()
    };
    let Value::Object(fields) = object else {
        return Err(cannot(&"the body must be a JSON object"));
    };
    let top = decode::decode(object, &TOP).map_err(|e| e.to_api_error(kind, version))?;
    let mut given = Map::new();
    for (key, value) in fields {
        if matches!(key.as_str(), "apiVersion" | "kind" | "metadata") || value.is_null() {
            continue;
        }
        let mut value = value.clone();
        quantities_as_strings(&mut value);
        given.insert(key.clone(), value);
    }
    let typed: T = serde_json::from_value(Value::Object(given.clone())).map_err(|e| cannot(&e))?;
    let Value::Object(written) = serde_json::to_value(&typed).map_err(|e| cannot(&e))? else {
        return Err(cannot(&"not an object"));
    };
    // The top schema knows only the metadata: what it reports elsewhere is the typed part's.
    let mut unknown_fields: Vec<String> = top
        .unknown_fields
        .into_iter()
        .filter(|f| f.starts_with("metadata."))
        .collect();
    for (key, value) in &given {
        unknown(value, written.get(key), key, &mut unknown_fields);
    }
    let Value::Object(mut out) = top.object else {
        return Err(cannot(&"not an object"));
    };
    for (key, value) in written {
        if !matches!(key.as_str(), "apiVersion" | "kind" | "metadata") && !value.is_null() {
            out.insert(key, value);
        }
    }
    Ok(Decoded {
        object: Value::Object(out),
        unknown_fields,
    })
}

/// Reads an already decoded object (a hook's input) as `T`; a 400 when it does not fit.
pub fn typed<T: DeserializeOwned>(object: &Value, kind: &str) -> Result<T, ApiError> {
    serde_json::from_value(object.clone())
        .map_err(|e| Status::bad_request(format!("{kind} cannot be read: {e}")).into())
}

/// The paths of `given` the typed value does not have (`written`), below `path`.
fn unknown(given: &Value, written: Option<&Value>, path: &str, out: &mut Vec<String>) {
    match (given, written) {
        (Value::Null, _) => {}
        (_, None) => out.push(path.to_owned()),
        (Value::Object(given), Some(Value::Object(written))) => {
            for (key, value) in given {
                unknown(value, written.get(key), &format!("{path}.{key}"), out);
            }
        }
        (Value::Array(given), Some(Value::Array(written))) => {
            for (index, value) in given.iter().enumerate() {
                unknown(value, written.get(index), &format!("{path}[{index}]"), out);
            }
        }
        _ => {}
    }
}

/// Quantities given as JSON numbers (`cpu: 1` in YAML) as the strings k8s-openapi reads.
fn quantities_as_strings(value: &mut Value) {
    match value {
        Value::Object(fields) => {
            for (key, value) in fields.iter_mut() {
                match value {
                    Value::Object(quantities) if QUANTITY_MAPS.contains(&key.as_str()) => {
                        for quantity in quantities.values_mut() {
                            if let Value::Number(n) = quantity {
                                *quantity = Value::String(n.to_string());
                            }
                        }
                    }
                    other => quantities_as_strings(other),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(quantities_as_strings),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    use super::*;

    #[test]
    fn a_pod_is_read_in_its_upstream_shape() {
        let decoded = decode::<Pod>(
            &json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": "p", "creationTimestamp": null},
                    "spec": {"containers": [{"name": "c", "image": "i", "bogus": 1,
                             "resources": {"limits": {"cpu": 1}}}]}}),
            "Pod",
            "v1",
        )
        .unwrap();
        assert_eq!(decoded.unknown_fields, ["spec.containers[0].bogus"]);
        assert_eq!(
            decoded.object["spec"]["containers"][0]["resources"]["limits"]["cpu"],
            "1"
        );
        assert_eq!(decoded.object["metadata"], json!({"name": "p"}));
        let wrong = decode::<Pod>(
            &json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": "x"}}),
            "Pod",
            "v1",
        )
        .unwrap_err();
        assert_eq!(wrong.code, 400);
        assert!(
            wrong
                .to_string()
                .starts_with("Pod in version \"v1\" cannot be handled as a Pod: invalid type"),
            "{wrong}"
        );
    }
}
