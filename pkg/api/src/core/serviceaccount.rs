//! ServiceAccounts (`core/v1`, namespaced; subresource `token`).
//!
//! Upstream (`ValidateServiceAccount`) checks only the metadata (the name is a DNS-1123
//! subdomain); the shapes of `secrets` (object references) and `imagePullSecrets` (local
//! references) are checked by decoding, as Go's decoder does.

use std::collections::BTreeMap;

use genplane_apimachinery::codec::decode::{self, Decoded};
use genplane_apimachinery::codec::schema::{Field, Struct, Type};
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::meta::schemas::OBJECT_META;
use genplane_apimachinery::meta::{validate_object_meta, validate_object_meta_update};
use genplane_apimachinery::validation::field::{ErrorList, Path};
use genplane_apimachinery::validation::name_is_dns_subdomain;
use serde::Deserialize;
use serde_json::Value;

use crate::core::{LOCAL_OBJECT_REFERENCE, OBJECT_REFERENCE};
use crate::table::{self, ColumnDefinition};
use crate::util;

/// The kind.
pub const KIND: &str = "ServiceAccount";

/// The shape of a v1 ServiceAccount.
pub static SCHEMA: Struct = Struct {
    name: "ServiceAccount",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("secrets", 2, Type::List(&Type::Struct(&OBJECT_REFERENCE))),
        Field::new(
            "imagePullSecrets",
            3,
            Type::List(&Type::Struct(&LOCAL_OBJECT_REFERENCE)),
        ),
        Field::pointer("automountServiceAccountToken", 4, Type::Bool),
    ],
};

#[derive(Debug, Default, Deserialize)]
struct ServiceAccount {}

/// Type-checks and normalizes a ServiceAccount.
pub fn decode(object: &Value) -> Result<Decoded, ApiError> {
    decode::decode(object, &SCHEMA).map_err(|e| e.to_api_error(KIND, "v1"))
}

/// Validates a new ServiceAccount.
pub fn validate(object: &Value) -> Result<ErrorList, ApiError> {
    let (meta, ServiceAccount {}) =
        util::decode_typed::<ServiceAccount>(object, &SCHEMA, KIND, "v1")?;
    Ok(validate_object_meta(
        &meta,
        true,
        name_is_dns_subdomain,
        &Path::new("metadata"),
    ))
}

/// Validates an update of a ServiceAccount.
pub fn validate_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let (new_meta, _) = util::decode_typed::<ServiceAccount>(new, &SCHEMA, KIND, "v1")?;
    let (old_meta, _) = util::decode_typed::<ServiceAccount>(old, &SCHEMA, KIND, "v1")?;
    Ok(validate_object_meta_update(
        &new_meta,
        &old_meta,
        &Path::new("metadata"),
    ))
}

/// Field-selector labels: only the metadata ones.
pub const FIELD_SELECTORS: &[&str] = &["metadata.name", "metadata.namespace"];

/// Field-selector values.
pub fn field_values(object: &Value) -> BTreeMap<&'static str, String> {
    util::meta_fields(object, true)
}

/// `NAME SECRETS AGE`.
pub const COLUMNS: &[ColumnDefinition] = &[
    table::NAME,
    table::column(
        "Secrets",
        "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.",
        0,
    ),
    table::AGE,
];

/// The cells: name, number of `secrets`, age.
pub fn row(object: &Value, now: i64) -> Vec<Value> {
    vec![
        util::name(object),
        Value::from(util::len_at(object, "secrets")),
        util::age(object, now),
    ]
}

/// The list and patch semantics of the ServiceAccount's own types.
pub static EXTENSIONS: &[crate::schema::Extensions] = &[
    crate::schema::Extensions {
        schema: "io.k8s.api.core.v1.ServiceAccount",
        property: "secrets",
        patch_strategy: Some("merge"),
        patch_merge_key: Some("name"),
        ..crate::schema::NONE
    },
    crate::schema::atomic_list("io.k8s.api.core.v1.ServiceAccount", "imagePullSecrets"),
];

/// This resource in the catalog: everything the server needs to serve it.
pub const INFO: crate::resource::ResourceInfo = crate::resource::ResourceInfo {
    group: "",
    version: "v1",
    kind: "ServiceAccount",
    list_kind: "ServiceAccountList",
    resource: "serviceaccounts",
    singular: "serviceaccount",
    short_names: &["sa"],
    namespaced: true,
    create_on_update: false,
    verbs: crate::resource::ALL_VERBS,
    subresources: &[crate::resource::Subresource {
        name: "token",
        kind: "TokenRequest",
        verbs: &["create"],
        rules: None,
        body: Some(&crate::authentication::TOKEN_REQUEST_INFO),
    }],
    categories: &[],
    storage_prefix: "serviceaccounts",
    storage_api_version: "v1",
    schema: &SCHEMA,
    protobuf: true,
    feature_gate: None,
    extensions: EXTENSIONS,
    openapi_schema: crate::schema::schema_of::<k8s_openapi::api::core::v1::ServiceAccount>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn validation() {
        let ok = json!({"metadata": {"name": "builder", "namespace": "ci"}, "secrets": [{"name": "t"}], "imagePullSecrets": [{"name": "pull"}], "automountServiceAccountToken": false});
        assert!(validate(&ok).unwrap().is_empty());
        let bad = json!({"metadata": {"name": "Builder", "namespace": "ci"}});
        assert_eq!(
            validate(&bad)
                .unwrap()
                .iter()
                .map(|e| e.field.to_string())
                .collect::<Vec<_>>(),
            ["metadata.name"]
        );
        let shape =
            json!({"metadata": {"name": "b", "namespace": "ci"}, "imagePullSecrets": ["pull"]});
        assert_eq!(
            validate(&shape).unwrap_err().message,
            "ServiceAccount in version \"v1\" cannot be handled as a ServiceAccount: json: cannot unmarshal string into field ServiceAccount.imagePullSecrets[0] of type LocalObjectReference"
        );
        let secrets =
            json!({"metadata": {"name": "b", "namespace": "ci"}, "secrets": {"name": "x"}});
        assert!(
            validate(&secrets)
                .unwrap_err()
                .message
                .contains("ServiceAccount.secrets of type []ObjectReference")
        );
        let renamed =
            json!({"metadata": {"name": "other", "namespace": "ci"}, "secrets": [{"name": "t"}]});
        assert_eq!(
            validate_update(&renamed, &ok).unwrap().to_string(),
            "metadata.name: Invalid value: \"other\": field is immutable"
        );
        let more = json!({"metadata": {"name": "builder", "namespace": "ci"}, "secrets": [{"name": "t"}, {"name": "u"}]});
        assert!(validate_update(&more, &ok).unwrap().is_empty());
    }

    #[test]
    fn table_and_fields() {
        let sa = json!({"metadata": {"name": "default", "namespace": "ns", "creationTimestamp": "1970-01-01T00:00:00Z"}, "secrets": [{"name": "a"}, {"name": "b"}]});
        assert_eq!(
            row(&sa, 200),
            vec![json!("default"), json!(2), json!("3m20s")]
        );
        assert_eq!(
            field_values(&sa)
                .get("metadata.namespace")
                .map(String::as_str),
            Some("ns")
        );
        let names: Vec<&str> = COLUMNS.iter().map(|c| c.name).collect();
        assert_eq!(names, ["Name", "Secrets", "Age"]);
    }
}
