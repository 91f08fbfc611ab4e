//! Secrets (`core/v1`, namespaced).
//!
//! Defaulting ([`default`]) does what upstream's decoding does: `stringData` entries are merged
//! into `data` (base64, overwriting) and `stringData` is dropped; an empty `type` becomes
//! `Opaque`. Validation (`ValidateSecret`, `ValidateSecretUpdate`): the name is a DNS-1123
//! subdomain; `data` keys are valid config keys; the values hold at most 1 MiB; each built-in
//! type requires its keys (see [`validate`]); `type` is immutable; an `immutable: true` Secret's
//! `data` may not change and `immutable` may not be unset.

use std::collections::BTreeMap;

use base64::Engine as _;
use genplane_apimachinery::codec::decode::{self, Decoded};
use genplane_apimachinery::codec::schema::{Field, Struct, Type};
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::meta::schemas::OBJECT_META;
use genplane_apimachinery::meta::{ObjectMeta, validate_object_meta, validate_object_meta_update};
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use genplane_apimachinery::validation::{is_config_map_key, name_is_dns_subdomain};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::configmap::IMMUTABLE_SET;
use super::{FIELD_IMMUTABLE, MAX_DATA_SIZE};
use crate::table::{self, ColumnDefinition};
use crate::util;

/// The kind.
pub const KIND: &str = "Secret";
/// The default type.
pub const TYPE_OPAQUE: &str = "Opaque";
/// A service account token; needs the [`SERVICE_ACCOUNT_NAME_KEY`] annotation.
pub const TYPE_SERVICE_ACCOUNT_TOKEN: &str = "kubernetes.io/service-account-token";
/// The annotation naming the service account of a token Secret.
pub const SERVICE_ACCOUNT_NAME_KEY: &str = "kubernetes.io/service-account.name";
/// A legacy `~/.dockercfg`; needs `.dockercfg` holding JSON.
pub const TYPE_DOCKERCFG: &str = "kubernetes.io/dockercfg";
/// A `~/.docker/config.json`; needs `.dockerconfigjson` holding JSON.
pub const TYPE_DOCKER_CONFIG_JSON: &str = "kubernetes.io/dockerconfigjson";
/// Basic authentication; needs `username` or `password`.
pub const TYPE_BASIC_AUTH: &str = "kubernetes.io/basic-auth";
/// SSH authentication; needs a non-empty `ssh-privatekey`.
pub const TYPE_SSH_AUTH: &str = "kubernetes.io/ssh-auth";
/// TLS; needs `tls.crt` and `tls.key`.
pub const TYPE_TLS: &str = "kubernetes.io/tls";

/// The shape of a v1 Secret.
pub static SCHEMA: Struct = Struct {
    name: "Secret",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::pointer("immutable", 5, Type::Bool),
        Field::new("data", 2, Type::Map(&Type::Bytes)),
        Field::new("stringData", 4, Type::Map(&Type::String)),
        Field::new("type", 3, Type::String),
    ],
};

#[derive(Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Secret {
    /// Base64 values, already checked by decoding.
    data: BTreeMap<String, String>,
    #[serde(rename = "type")]
    type_: String,
    immutable: Option<bool>,
}

/// Type-checks and normalizes a Secret.
pub fn decode(object: &Value) -> Result<Decoded, ApiError> {
    decode::decode(object, &SCHEMA).map_err(|e| e.to_api_error(KIND, "v1"))
}

/// Merges `stringData` into `data` (base64-encoding each value, overwriting a key already in
/// `data`), drops `stringData`, and defaults an empty or missing `type` to `Opaque`.
pub fn default(object: &mut Value) {
    let Some(fields) = object.as_object_mut() else {
        return;
    };
    if let Some(Value::Object(strings)) = fields.remove("stringData")
        && !strings.is_empty()
    {
        {
            let data = fields
                .entry("data")
                .or_insert_with(|| Value::Object(Map::new()));
            if !data.is_object() {
                *data = Value::Object(Map::new());
            }
            if let Value::Object(data) = data {
                for (key, value) in strings {
                    let text = value.as_str().unwrap_or_default();
                    let encoded = base64::engine::general_purpose::STANDARD.encode(text);
                    data.insert(key, Value::from(encoded));
                }
            }
        }
    }
    let typed = fields
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if typed.is_empty() {
        fields.insert("type".to_owned(), Value::from(TYPE_OPAQUE));
    }
}

fn decode_b64(value: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(value)
        .unwrap_or_default()
}

/// Validates a new Secret. The type rules:
/// - `kubernetes.io/service-account-token`: the `kubernetes.io/service-account.name`
///   annotation is required;
/// - `kubernetes.io/dockercfg`: `data[.dockercfg]` is required and holds a JSON object;
/// - `kubernetes.io/dockerconfigjson`: `data[.dockerconfigjson]` likewise;
/// - `kubernetes.io/basic-auth`: `data[username]` or `data[password]` is required (both are
///   reported missing when neither is there);
/// - `kubernetes.io/ssh-auth`: a non-empty `data[ssh-privatekey]` is required;
/// - `kubernetes.io/tls`: `data[tls.crt]` and `data[tls.key]` are required;
/// - `Opaque`, empty, and any other type: no rule.
pub fn validate(object: &Value) -> Result<ErrorList, ApiError> {
    let (meta, secret) = util::decode_typed::<Secret>(object, &SCHEMA, KIND, "v1")?;
    let mut errors =
        validate_object_meta(&meta, true, name_is_dns_subdomain, &Path::new("metadata"));
    errors.extend(validate_body(&meta, &secret));
    Ok(errors)
}

/// The rules below the metadata, shared by create and update.
fn validate_body(meta: &ObjectMeta, secret: &Secret) -> ErrorList {
    let mut errors = ErrorList::new();
    let data_path = Path::new("data");
    let mut total = 0usize;
    for (key, value) in &secret.data {
        for message in is_config_map_key(key) {
            errors.push(Error::invalid(&data_path.key(key), key.as_str(), message));
        }
        total += super::configmap::decoded_len(value);
    }
    if total > MAX_DATA_SIZE {
        errors.push(Error::too_long(&data_path, "", MAX_DATA_SIZE));
    }
    let require_json = |errors: &mut ErrorList, key: &str| match secret.data.get(key) {
        None => errors.push(Error::required(&data_path.key(key), "")),
        Some(value) => {
            if let Err(e) = serde_json::from_slice::<Map<String, Value>>(&decode_b64(value)) {
                errors.push(Error::invalid(
                    &data_path.key(key),
                    "<secret contents redacted>",
                    e.to_string(),
                ));
            }
        }
    };
    match secret.type_.as_str() {
        TYPE_SERVICE_ACCOUNT_TOKEN => {
            let name = meta.annotations.get(SERVICE_ACCOUNT_NAME_KEY);
            if name.is_none_or(String::is_empty) {
                errors.push(Error::required(
                    &Path::new("metadata")
                        .child("annotations")
                        .key(SERVICE_ACCOUNT_NAME_KEY),
                    "",
                ));
            }
        }
        TYPE_DOCKERCFG => require_json(&mut errors, ".dockercfg"),
        TYPE_DOCKER_CONFIG_JSON => require_json(&mut errors, ".dockerconfigjson"),
        TYPE_BASIC_AUTH
            if !secret.data.contains_key("username") && !secret.data.contains_key("password") =>
        {
            errors.push(Error::required(&data_path.key("username"), ""));
            errors.push(Error::required(&data_path.key("password"), ""));
        }
        TYPE_SSH_AUTH
            if secret
                .data
                .get("ssh-privatekey")
                .is_none_or(|v| v.is_empty()) =>
        {
            errors.push(Error::required(&data_path.key("ssh-privatekey"), ""));
        }
        TYPE_TLS => {
            for key in ["tls.crt", "tls.key"] {
                if !secret.data.contains_key(key) {
                    errors.push(Error::required(&data_path.key(key), ""));
                }
            }
        }
        _ => {}
    }
    errors
}

/// Validates an update of a Secret.
pub fn validate_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let (new_meta, new_secret) = util::decode_typed::<Secret>(new, &SCHEMA, KIND, "v1")?;
    let (old_meta, old_secret) = util::decode_typed::<Secret>(old, &SCHEMA, KIND, "v1")?;
    let mut errors = validate_object_meta_update(&new_meta, &old_meta, &Path::new("metadata"));
    if new_secret.type_ != old_secret.type_ {
        errors.push(Error::invalid(
            &Path::new("type"),
            new_secret.type_.as_str(),
            FIELD_IMMUTABLE,
        ));
    }
    if old_secret.immutable == Some(true) {
        if new_secret.immutable != Some(true) {
            errors.push(Error::forbidden(&Path::new("immutable"), IMMUTABLE_SET));
        }
        if new_secret.data != old_secret.data {
            errors.push(Error::forbidden(&Path::new("data"), IMMUTABLE_SET));
        }
    }
    errors.extend(validate_body(&new_meta, &new_secret));
    Ok(errors)
}

/// Field-selector labels: the metadata ones and `type`.
pub const FIELD_SELECTORS: &[&str] = &["metadata.name", "metadata.namespace", "type"];

/// Field-selector values.
pub fn field_values(object: &Value) -> BTreeMap<&'static str, String> {
    let mut fields = util::meta_fields(object, true);
    fields.insert("type", util::str_at(object, &["type"]).to_owned());
    fields
}

/// `NAME TYPE DATA AGE`.
pub const COLUMNS: &[ColumnDefinition] = &[
    table::NAME,
    table::column(
        "Type",
        "Used to facilitate programmatic handling of secret data.",
        0,
    ),
    table::column(
        "Data",
        "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'.",
        0,
    ),
    table::AGE,
];

/// The cells: name, type, number of `data` entries, age.
pub fn row(object: &Value, now: i64) -> Vec<Value> {
    vec![
        util::name(object),
        Value::from(util::str_at(object, &["type"])),
        Value::from(util::len_at(object, "data")),
        util::age(object, now),
    ]
}

/// This resource in the catalog: everything the server needs to serve it.
pub const INFO: crate::resource::ResourceInfo = crate::resource::ResourceInfo {
    group: "",
    version: "v1",
    kind: "Secret",
    list_kind: "SecretList",
    resource: "secrets",
    singular: "secret",
    short_names: &[],
    namespaced: true,
    create_on_update: false,
    verbs: crate::resource::ALL_VERBS,
    subresources: &[],
    categories: &[],
    storage_prefix: "secrets",
    storage_api_version: "v1",
    schema: &SCHEMA,
    protobuf: true,
    feature_gate: None,
    extensions: &[],
    openapi_schema: crate::schema::schema_of::<k8s_openapi::api::core::v1::Secret>,
    hooks: crate::resource::Hooks {
        decode,
        default,
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn secret(extra: Value) -> Value {
        let mut base = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds", "namespace": "default"}, "type": "Opaque"});
        if let (Some(b), Value::Object(e)) = (base.as_object_mut(), extra) {
            b.extend(e);
        }
        base
    }

    fn summary(errors: &ErrorList) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn defaulting_merges_string_data_and_sets_the_type() {
        let mut object = json!({"metadata": {"name": "s"}, "data": {"a": "eA==", "b": "eA=="}, "stringData": {"b": "hello", "c": ""}});
        default(&mut object);
        assert_eq!(
            object,
            json!({"metadata": {"name": "s"}, "data": {"a": "eA==", "b": "aGVsbG8=", "c": ""}, "type": "Opaque"})
        );
        let mut typed =
            json!({"type": "kubernetes.io/tls", "stringData": {"tls.crt": "c", "tls.key": "k"}});
        default(&mut typed);
        assert_eq!(
            typed,
            json!({"type": "kubernetes.io/tls", "data": {"tls.crt": "Yw==", "tls.key": "aw=="}})
        );
        let mut empty_type = json!({"type": ""});
        default(&mut empty_type);
        assert_eq!(empty_type, json!({"type": "Opaque"}));
        let mut after = secret(json!({"stringData": {"k": "v"}}));
        default(&mut after);
        assert!(validate(&after).unwrap().is_empty());
    }

    #[test]
    fn create_rules() {
        let big = "A".repeat(MAX_DATA_SIZE / 3 * 4 + 4);
        let cases: Vec<(&str, Value, Vec<&str>)> = vec![
            (
                "opaque",
                secret(json!({"data": {"password": "aGVsbG8="}})),
                vec![],
            ),
            (
                "bad key",
                secret(json!({"data": {"a/b": "eA=="}})),
                vec![
                    "data[a/b]: Invalid value: \"a/b\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
                ],
            ),
            (
                "over 1 MiB",
                secret(json!({"data": {"big": big}})),
                vec!["data: Too long: may not be more than 1048576 bytes"],
            ),
            (
                "token without account",
                secret(json!({"type": TYPE_SERVICE_ACCOUNT_TOKEN})),
                vec!["metadata.annotations[kubernetes.io/service-account.name]: Required value"],
            ),
            (
                "token with account",
                secret(
                    json!({"type": TYPE_SERVICE_ACCOUNT_TOKEN, "metadata": {"name": "t", "namespace": "default", "annotations": {SERVICE_ACCOUNT_NAME_KEY: "default"}}}),
                ),
                vec![],
            ),
            (
                "dockercfg missing",
                secret(json!({"type": TYPE_DOCKERCFG})),
                vec!["data[.dockercfg]: Required value"],
            ),
            (
                "dockercfg valid",
                secret(json!({"type": TYPE_DOCKERCFG, "data": {".dockercfg": "e30="}})),
                vec![],
            ),
            (
                "dockerconfigjson missing",
                secret(json!({"type": TYPE_DOCKER_CONFIG_JSON, "data": {".dockercfg": "e30="}})),
                vec!["data[.dockerconfigjson]: Required value"],
            ),
            (
                "basic-auth empty",
                secret(json!({"type": TYPE_BASIC_AUTH})),
                vec![
                    "data[username]: Required value",
                    "data[password]: Required value",
                ],
            ),
            (
                "basic-auth username only",
                secret(json!({"type": TYPE_BASIC_AUTH, "data": {"username": ""}})),
                vec![],
            ),
            (
                "ssh-auth empty key",
                secret(json!({"type": TYPE_SSH_AUTH, "data": {"ssh-privatekey": ""}})),
                vec!["data[ssh-privatekey]: Required value"],
            ),
            (
                "ssh-auth",
                secret(json!({"type": TYPE_SSH_AUTH, "data": {"ssh-privatekey": "eA=="}})),
                vec![],
            ),
            (
                "tls without key",
                secret(json!({"type": TYPE_TLS, "data": {"tls.crt": "eA=="}})),
                vec!["data[tls.key]: Required value"],
            ),
            (
                "tls without both",
                secret(json!({"type": TYPE_TLS})),
                vec![
                    "data[tls.crt]: Required value",
                    "data[tls.key]: Required value",
                ],
            ),
            (
                "custom type",
                secret(json!({"type": "example.com/thing"})),
                vec![],
            ),
            (
                "bad name",
                secret(json!({"metadata": {"name": "a_b", "namespace": "default"}})),
                vec![
                    "metadata.name: Invalid value: \"a_b\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                ],
            ),
        ];
        for (name, object, want) in cases {
            let errors = validate(&object).unwrap();
            assert_eq!(summary(&errors), want, "{name}");
        }
        let bad_json = secret(
            json!({"type": TYPE_DOCKER_CONFIG_JSON, "data": {".dockerconfigjson": "bm90IGpzb24="}}),
        );
        let errors = validate(&bad_json).unwrap();
        assert_eq!(errors.0.len(), 1);
        assert!(
            errors.to_string().starts_with(
                "data[.dockerconfigjson]: Invalid value: \"<secret contents redacted>\": "
            ),
            "{errors}"
        );
        let err = validate(&secret(json!({"data": {"k": "not base64"}}))).unwrap_err();
        assert_eq!(err.code, 400);
        assert_eq!(
            err.message,
            "Secret in version \"v1\" cannot be handled as a Secret: field Secret.data[k]: illegal base64 data at input byte 3"
        );
    }

    #[test]
    fn update_rules() {
        let old = secret(json!({"data": {"k": "eA=="}, "immutable": true}));
        let cases: Vec<(&str, Value, Vec<&str>)> = vec![
            ("unchanged", old.clone(), vec![]),
            (
                "type is immutable",
                secret(json!({"type": "example.com/x", "data": {"k": "eA=="}, "immutable": true})),
                vec!["type: Invalid value: \"example.com/x\": field is immutable"],
            ),
            (
                "data frozen",
                secret(json!({"data": {"k": "eQ=="}, "immutable": true})),
                vec!["data: Forbidden: field is immutable when `immutable` is set"],
            ),
            (
                "cannot unset immutable",
                secret(json!({"data": {"k": "eA=="}})),
                vec!["immutable: Forbidden: field is immutable when `immutable` is set"],
            ),
        ];
        for (name, new, want) in cases {
            assert_eq!(
                summary(&validate_update(&new, &old).unwrap()),
                want,
                "{name}"
            );
        }
        let mutable = secret(json!({"data": {"k": "eA=="}}));
        assert!(
            validate_update(&secret(json!({"data": {"k": "eQ=="}})), &mutable)
                .unwrap()
                .is_empty()
        );
        let tls_old =
            secret(json!({"type": TYPE_TLS, "data": {"tls.crt": "eA==", "tls.key": "eA=="}}));
        let tls_new = secret(json!({"type": TYPE_TLS, "data": {"tls.crt": "eA=="}}));
        assert_eq!(
            summary(&validate_update(&tls_new, &tls_old).unwrap()),
            ["data[tls.key]: Required value"]
        );
    }

    #[test]
    fn fields_and_table() {
        let object = secret(
            json!({"type": TYPE_TLS, "data": {"tls.crt": "eA==", "tls.key": "eA=="}, "metadata": {"name": "cert", "namespace": "web", "creationTimestamp": "1970-01-01T00:00:00Z"}}),
        );
        let fields = field_values(&object);
        assert_eq!(fields.get("type").map(String::as_str), Some(TYPE_TLS));
        assert_eq!(
            fields.get("metadata.name").map(String::as_str),
            Some("cert")
        );
        assert_eq!(fields.keys().copied().collect::<Vec<_>>(), FIELD_SELECTORS);
        assert_eq!(
            row(&object, 5 * 3600 + 600),
            vec![json!("cert"), json!(TYPE_TLS), json!(2), json!("5h10m")]
        );
        let names: Vec<&str> = COLUMNS.iter().map(|c| c.name).collect();
        assert_eq!(names, ["Name", "Type", "Data", "Age"]);
    }
}
