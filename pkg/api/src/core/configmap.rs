//! ConfigMaps (`core/v1`, namespaced).
//!
//! Upstream rules (`ValidateConfigMap`, `ValidateConfigMapUpdate`): the name is a DNS-1123
//! subdomain; `data` and `binaryData` keys are valid config keys and no key is in both; the
//! values together hold at most 1 MiB; once `immutable: true` is set, `data` and `binaryData`
//! may not change and `immutable` may not be unset.

use std::collections::BTreeMap;

use genplane_apimachinery::codec::decode::{self, Decoded};
use genplane_apimachinery::codec::protobuf;
use genplane_apimachinery::codec::schema::{Field, Struct, Type};
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::meta::schemas::OBJECT_META;
use genplane_apimachinery::meta::{validate_object_meta, validate_object_meta_update};
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use genplane_apimachinery::validation::{is_config_map_key, name_is_dns_subdomain};
use serde::Deserialize;
use serde_json::Value;

use super::MAX_DATA_SIZE;
use crate::table::{self, ColumnDefinition};
use crate::util;

/// The kind.
pub const KIND: &str = "ConfigMap";
/// The message when `immutable` forbids a change.
pub const IMMUTABLE_SET: &str = "field is immutable when `immutable` is set";

/// The shape of a v1 ConfigMap.
pub static SCHEMA: Struct = Struct {
    name: "ConfigMap",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::pointer("immutable", 4, Type::Bool),
        Field::new("data", 2, Type::Map(&Type::String)),
        Field::new("binaryData", 3, Type::Map(&Type::Bytes)),
    ],
};

#[derive(Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct ConfigMap {
    data: BTreeMap<String, String>,
    binary_data: BTreeMap<String, String>,
    immutable: Option<bool>,
}

/// Type-checks and normalizes a ConfigMap.
pub fn decode(object: &Value) -> Result<Decoded, ApiError> {
    decode::decode(object, &SCHEMA).map_err(|e| e.to_api_error(KIND, "v1"))
}

/// The decoded length of a base64 value (already checked by decoding).
pub(crate) fn decoded_len(b64: &str) -> usize {
    let padding = b64.bytes().rev().take_while(|b| *b == b'=').count();
    (b64.len() / 4 * 3).saturating_sub(padding)
}

/// Validates a new ConfigMap.
pub fn validate(object: &Value) -> Result<ErrorList, ApiError> {
    let (meta, cm) = util::decode_typed::<ConfigMap>(object, &SCHEMA, KIND, "v1")?;
    let mut errors =
        validate_object_meta(&meta, true, name_is_dns_subdomain, &Path::new("metadata"));
    errors.extend(validate_body(&cm));
    Ok(errors)
}

fn validate_body(cm: &ConfigMap) -> ErrorList {
    let mut errors = ErrorList::new();
    let mut total = 0usize;
    let data = Path::new("data");
    for (key, value) in &cm.data {
        for message in is_config_map_key(key) {
            errors.push(Error::invalid(&data.key(key), key.as_str(), message));
        }
        if cm.binary_data.contains_key(key) {
            errors.push(Error::invalid(
                &data.key(key),
                key.as_str(),
                "duplicate of key present in binaryData",
            ));
        }
        total += value.len();
    }
    let binary = Path::new("binaryData");
    for (key, value) in &cm.binary_data {
        for message in is_config_map_key(key) {
            errors.push(Error::invalid(&binary.key(key), key.as_str(), message));
        }
        if cm.data.contains_key(key) {
            errors.push(Error::invalid(
                &binary.key(key),
                key.as_str(),
                "duplicate of key present in data",
            ));
        }
        total += decoded_len(value);
    }
    if total > MAX_DATA_SIZE {
        errors.push(Error::too_long(&Path::default(), "", MAX_DATA_SIZE));
    }
    errors
}

/// Validates an update of a ConfigMap.
pub fn validate_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let (new_meta, new_cm) = util::decode_typed::<ConfigMap>(new, &SCHEMA, KIND, "v1")?;
    let (old_meta, old_cm) = util::decode_typed::<ConfigMap>(old, &SCHEMA, KIND, "v1")?;
    let mut errors = validate_object_meta_update(&new_meta, &old_meta, &Path::new("metadata"));
    if old_cm.immutable == Some(true) {
        if new_cm.immutable != Some(true) {
            errors.push(Error::forbidden(&Path::new("immutable"), IMMUTABLE_SET));
        }
        if new_cm.data != old_cm.data {
            errors.push(Error::forbidden(&Path::new("data"), IMMUTABLE_SET));
        }
        if new_cm.binary_data != old_cm.binary_data {
            errors.push(Error::forbidden(&Path::new("binaryData"), IMMUTABLE_SET));
        }
    }
    errors.extend(validate_body(&new_cm));
    Ok(errors)
}

/// Field-selector labels: only the metadata ones.
pub const FIELD_SELECTORS: &[&str] = &["metadata.name", "metadata.namespace"];

/// Field-selector values.
pub fn field_values(object: &Value) -> BTreeMap<&'static str, String> {
    util::meta_fields(object, true)
}

/// `NAME DATA AGE`.
pub const COLUMNS: &[ColumnDefinition] = &[
    table::NAME,
    table::column(
        "Data",
        "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'.",
        0,
    ),
    table::AGE,
];

/// The cells: name, number of `data` plus `binaryData` entries, age.
pub fn row(object: &Value, now: i64) -> Vec<Value> {
    let count = util::len_at(object, "data") + util::len_at(object, "binaryData");
    vec![
        util::name(object),
        Value::from(count),
        util::age(object, now),
    ]
}

/// This resource in the catalog: everything the server needs to serve it.
pub const INFO: crate::resource::ResourceInfo = crate::resource::ResourceInfo {
    group: "",
    version: "v1",
    kind: "ConfigMap",
    list_kind: "ConfigMapList",
    resource: "configmaps",
    singular: "configmap",
    short_names: &["cm"],
    namespaced: true,
    create_on_update: false,
    verbs: crate::resource::ALL_VERBS,
    subresources: &[],
    categories: &[],
    storage_prefix: "configmaps",
    storage_api_version: "v1",
    schema: &SCHEMA,
    protobuf: true,
    feature_gate: None,
    extensions: &[],
    openapi_schema: crate::schema::schema_of::<k8s_openapi::api::core::v1::ConfigMap>,
    hooks: crate::resource::Hooks {
        decode,
        default: crate::resource::no_default,
        prepare_for_create: crate::resource::no_prepare,
        prepare_for_update: crate::resource::no_prepare_update,
        validate,
        validate_update,
        to_storage: None,
        from_storage: None,
        field_selectors: FIELD_SELECTORS,
        field_values,
        columns: COLUMNS,
        row,
        pending_finalization: crate::resource::nothing_pending,
        mark_deleting: crate::resource::no_default,
        grace_period: crate::resource::not_graceful,
    },
};

/// The fuzz entry point of the protobuf watch stream reader: the input as a protobuf watch
/// stream of ConfigMaps ([`protobuf::exercise_watch_stream`], which says what it checks).
///
/// # Panics
///
/// When reading or decoding panics, or a decoded object does not encode.
pub fn exercise_watch_stream(data: &[u8]) {
    protobuf::exercise_watch_stream(data, &SCHEMA);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cm(extra: Value) -> Value {
        let mut base = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "default"}});
        if let (Some(b), Value::Object(e)) = (base.as_object_mut(), extra) {
            b.extend(e);
        }
        base
    }

    fn summary(errors: &ErrorList) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn create_rules() {
        let big = "x".repeat(MAX_DATA_SIZE);
        let cases: Vec<(&str, Value, Vec<&str>)> = vec![
            ("empty", cm(json!({})), vec![]),
            (
                "data and binary",
                cm(json!({"data": {"a.conf": "x", "B_KEY": "y"}, "binaryData": {"bin": "AAEC"}})),
                vec![],
            ),
            (
                "bad data key",
                cm(json!({"data": {"a b": "x"}})),
                vec![
                    "data[a b]: Invalid value: \"a b\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                ],
            ),
            (
                "dot-dot key",
                cm(json!({"binaryData": {"..x": "AA=="}})),
                vec!["binaryData[..x]: Invalid value: \"..x\": must not start with '..'"],
            ),
            (
                "duplicate key",
                cm(json!({"data": {"k": "x"}, "binaryData": {"k": "AA=="}})),
                vec![
                    "data[k]: Invalid value: \"k\": duplicate of key present in binaryData",
                    "binaryData[k]: Invalid value: \"k\": duplicate of key present in data",
                ],
            ),
            ("exactly 1 MiB", cm(json!({"data": {"k": big}})), vec![]),
            (
                "over 1 MiB",
                cm(json!({"data": {"k": big, "k2": "x"}})),
                vec![": Too long: may not be more than 1048576 bytes"],
            ),
            (
                "binary counts decoded bytes",
                cm(
                    json!({"data": {"k": "x".repeat(MAX_DATA_SIZE - 2)}, "binaryData": {"b": "AAAA"}}),
                ),
                vec![": Too long: may not be more than 1048576 bytes"],
            ),
            (
                "bad name",
                cm(json!({"metadata": {"name": "Settings", "namespace": "default"}})),
                vec![
                    "metadata.name: Invalid value: \"Settings\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                ],
            ),
            (
                "no namespace",
                cm(json!({"metadata": {"name": "a"}})),
                vec!["metadata.namespace: Required value"],
            ),
            (
                "generateName",
                cm(json!({"metadata": {"generateName": "cfg-", "namespace": "default"}})),
                vec![],
            ),
            (
                "empty key",
                cm(json!({"data": {"": "x"}})),
                vec![
                    "data[]: Invalid value: \"\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                ],
            ),
        ];
        for (name, object, want) in cases {
            let errors = validate(&object).unwrap();
            assert_eq!(summary(&errors), want, "{name}");
        }
    }

    #[test]
    fn wrong_types_are_bad_requests() {
        let err = validate(&cm(json!({"data": {"k": 5}}))).unwrap_err();
        assert_eq!(err.code, 400);
        assert_eq!(
            err.message,
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot unmarshal number into field ConfigMap.data[k] of type string"
        );
        let err = validate(&cm(json!({"immutable": "yes"}))).unwrap_err();
        assert!(
            err.message.contains("ConfigMap.immutable of type bool"),
            "{}",
            err.message
        );
        let err = validate(&cm(json!({"binaryData": {"b": "%%%"}}))).unwrap_err();
        assert!(
            err.message
                .contains("ConfigMap.binaryData[b]: illegal base64 data at input byte 0"),
            "{}",
            err.message
        );
    }

    #[test]
    fn update_rules() {
        let old = cm(
            json!({"metadata": {"name": "settings", "namespace": "default", "uid": "u"}, "data": {"a": "1"}, "immutable": true}),
        );
        let cases: Vec<(&str, Value, Vec<&str>)> = vec![
            (
                "labels may change",
                cm(
                    json!({"metadata": {"name": "settings", "namespace": "default", "uid": "u", "labels": {"x": "y"}}, "data": {"a": "1"}, "immutable": true}),
                ),
                vec![],
            ),
            (
                "data frozen",
                cm(
                    json!({"metadata": {"name": "settings", "namespace": "default", "uid": "u"}, "data": {"a": "2"}, "immutable": true}),
                ),
                vec!["data: Forbidden: field is immutable when `immutable` is set"],
            ),
            (
                "binaryData frozen",
                cm(
                    json!({"metadata": {"name": "settings", "namespace": "default", "uid": "u"}, "data": {"a": "1"}, "binaryData": {"b": "AA=="}, "immutable": true}),
                ),
                vec!["binaryData: Forbidden: field is immutable when `immutable` is set"],
            ),
            (
                "cannot unset",
                cm(
                    json!({"metadata": {"name": "settings", "namespace": "default", "uid": "u"}, "data": {"a": "1"}}),
                ),
                vec!["immutable: Forbidden: field is immutable when `immutable` is set"],
            ),
            (
                "cannot set false",
                cm(
                    json!({"metadata": {"name": "settings", "namespace": "default", "uid": "u"}, "data": {"a": "1"}, "immutable": false}),
                ),
                vec!["immutable: Forbidden: field is immutable when `immutable` is set"],
            ),
            (
                "uid immutable",
                cm(
                    json!({"metadata": {"name": "settings", "namespace": "default", "uid": "v"}, "data": {"a": "1"}, "immutable": true}),
                ),
                vec!["metadata.uid: Invalid value: \"v\": field is immutable"],
            ),
        ];
        for (name, new, want) in cases {
            let errors = validate_update(&new, &old).unwrap();
            assert_eq!(summary(&errors), want, "{name}");
        }
        let mutable = cm(json!({"data": {"a": "1"}}));
        let changed = cm(json!({"data": {"a": "2"}, "immutable": true}));
        assert!(
            validate_update(&changed, &mutable).unwrap().is_empty(),
            "a mutable ConfigMap may change and become immutable"
        );
        let bad_key = cm(json!({"data": {"a b": "2"}}));
        assert_eq!(
            validate_update(&bad_key, &mutable).unwrap().0.len(),
            1,
            "the new object is validated too"
        );
    }

    #[test]
    fn fields_and_table() {
        let object = cm(
            json!({"metadata": {"name": "settings", "namespace": "default", "creationTimestamp": "1970-01-01T00:00:00Z"}, "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}}),
        );
        let fields = field_values(&object);
        assert_eq!(
            fields.get("metadata.name").map(String::as_str),
            Some("settings")
        );
        assert_eq!(
            fields.get("metadata.namespace").map(String::as_str),
            Some("default")
        );
        assert_eq!(fields.len(), FIELD_SELECTORS.len());
        assert_eq!(
            row(&object, 3 * 86_400),
            vec![json!("settings"), json!(3), json!("3d")]
        );
        let names: Vec<&str> = COLUMNS.iter().map(|c| c.name).collect();
        assert_eq!(names, ["Name", "Data", "Age"]);
        assert_eq!(
            row(&cm(json!({})), 0),
            vec![json!("settings"), json!(0), json!("<unknown>")]
        );
    }
}
