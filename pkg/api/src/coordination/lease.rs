//! Leases (`coordination.k8s.io/v1`, namespaced).
//!
//! Upstream rules (`ValidateLease`, `ValidateLeaseUpdate`, Kubernetes 1.33): the name is a
//! DNS-1123 subdomain; `spec.leaseDurationSeconds`, when set, is greater than 0;
//! `spec.leaseTransitions`, when set, is not negative; `spec.strategy`, when set, is
//! `OldestEmulationVersion` or (with a `/`) a qualified name; `spec.preferredHolder` may only
//! be set with a strategy. `holderIdentity` is free-form (upstream sets no length limit).
//! `spec.strategy` and `spec.preferredHolder` belong to the CoordinatedLeaderElection feature,
//! off by default in 1.33: [`drop_disabled_fields`] removes them as upstream's strategy does.

use std::collections::BTreeMap;

use genplane_apimachinery::codec::decode::{self, Decoded};
use genplane_apimachinery::codec::schema::{Field, Struct, Type};
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::meta::schemas::OBJECT_META;
use genplane_apimachinery::meta::{validate_object_meta, validate_object_meta_update};
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use genplane_apimachinery::validation::{is_qualified_name, name_is_dns_subdomain};
use serde::Deserialize;
use serde_json::Value;

use crate::table::{self, ColumnDefinition};
use crate::util;

/// The kind.
pub const KIND: &str = "Lease";
/// The API version.
pub const API_VERSION: &str = "coordination.k8s.io/v1";
/// The strategies Kubernetes defines.
pub const SUPPORTED_STRATEGIES: &[&str] = &["OldestEmulationVersion"];

static LEASE_SPEC: Struct = Struct {
    name: "LeaseSpec",
    fields: &[
        Field::pointer("holderIdentity", 1, Type::String),
        Field::pointer("leaseDurationSeconds", 2, Type::Int32),
        Field::new("acquireTime", 3, Type::MicroTime),
        Field::new("renewTime", 4, Type::MicroTime),
        Field::pointer("leaseTransitions", 5, Type::Int32),
        Field::pointer("strategy", 6, Type::String),
        Field::pointer("preferredHolder", 7, Type::String),
    ],
};

/// The shape of a coordination.k8s.io/v1 Lease.
pub static SCHEMA: Struct = Struct {
    name: "Lease",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("spec", 2, Type::Struct(&LEASE_SPEC)),
    ],
};

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Spec {
    lease_duration_seconds: Option<i32>,
    lease_transitions: Option<i32>,
    strategy: Option<String>,
    preferred_holder: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Lease {
    spec: Spec,
}

/// Type-checks and normalizes a Lease.
pub fn decode(object: &Value) -> Result<Decoded, ApiError> {
    decode::decode(object, &SCHEMA).map_err(|e| e.to_api_error(KIND, API_VERSION))
}

/// Removes `spec.strategy` and `spec.preferredHolder` unless the CoordinatedLeaderElection
/// feature is `enabled` or (on update) the `old` object already used them.
pub fn drop_disabled_fields(new: &mut Value, old: Option<&Value>, enabled: bool) {
    if enabled {
        return;
    }
    let in_use = |field: &str| {
        old.and_then(|o| o.get("spec"))
            .and_then(|s| s.get(field))
            .is_some_and(|v| !v.is_null())
    };
    let keep_strategy = in_use("strategy");
    let keep_holder = in_use("preferredHolder");
    if let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) {
        if !keep_strategy {
            spec.remove("strategy");
        }
        if !keep_holder {
            spec.remove("preferredHolder");
        }
    }
}

/// The strategy on create: the CoordinatedLeaderElection fields only with the feature on.
pub fn prepare_for_create(object: &mut Value, context: &crate::resource::Context<'_>) {
    drop_disabled_fields(
        object,
        None,
        context
            .gates
            .enabled(crate::features::COORDINATED_LEADER_ELECTION),
    );
}

/// The strategy on update: the CoordinatedLeaderElection fields only with the feature on or
/// already in use.
pub fn prepare_for_update(new: &mut Value, old: &Value, context: &crate::resource::Context<'_>) {
    drop_disabled_fields(
        new,
        Some(old),
        context
            .gates
            .enabled(crate::features::COORDINATED_LEADER_ELECTION),
    );
}

fn validate_spec(spec: &Spec) -> ErrorList {
    let path = Path::new("spec");
    let mut errors = ErrorList::new();
    if let Some(d) = spec.lease_duration_seconds.filter(|d| *d <= 0) {
        errors.push(Error::invalid(
            &path.child("leaseDurationSeconds"),
            d,
            "must be greater than 0",
        ));
    }
    if let Some(t) = spec.lease_transitions.filter(|t| *t < 0) {
        errors.push(Error::invalid(
            &path.child("leaseTransitions"),
            t,
            "must be greater than or equal to 0",
        ));
    }
    if let Some(strategy) = &spec.strategy {
        let at = path.child("strategy");
        if strategy.contains('/') {
            for message in is_qualified_name(strategy) {
                errors.push(Error::invalid(&at, strategy.as_str(), message));
            }
        } else if !SUPPORTED_STRATEGIES.contains(&strategy.as_str()) {
            errors.push(Error::not_supported(
                &at,
                strategy.as_str(),
                SUPPORTED_STRATEGIES,
            ));
        }
    }
    let has_holder = spec
        .preferred_holder
        .as_ref()
        .is_some_and(|h| !h.is_empty());
    let has_strategy = spec.strategy.as_ref().is_some_and(|s| !s.is_empty());
    if has_holder && !has_strategy {
        errors.push(Error::forbidden(
            &path.child("preferredHolder"),
            "may only be specified if `strategy` is defined",
        ));
    }
    errors
}

/// Validates a new Lease.
pub fn validate(object: &Value) -> Result<ErrorList, ApiError> {
    let (meta, lease) = util::decode_typed::<Lease>(object, &SCHEMA, KIND, API_VERSION)?;
    let mut errors =
        validate_object_meta(&meta, true, name_is_dns_subdomain, &Path::new("metadata"));
    errors.extend(validate_spec(&lease.spec));
    Ok(errors)
}

/// Validates an update of a Lease.
pub fn validate_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let (new_meta, lease) = util::decode_typed::<Lease>(new, &SCHEMA, KIND, API_VERSION)?;
    let (old_meta, _) = util::decode_typed::<Lease>(old, &SCHEMA, KIND, API_VERSION)?;
    let mut errors = validate_object_meta_update(&new_meta, &old_meta, &Path::new("metadata"));
    errors.extend(validate_spec(&lease.spec));
    Ok(errors)
}

/// Field-selector labels: only the metadata ones.
pub const FIELD_SELECTORS: &[&str] = &["metadata.name", "metadata.namespace"];

/// Field-selector values.
pub fn field_values(object: &Value) -> BTreeMap<&'static str, String> {
    util::meta_fields(object, true)
}

/// `NAME HOLDER AGE`.
pub const COLUMNS: &[ColumnDefinition] = &[
    table::NAME,
    table::column(
        "Holder",
        "holderIdentity contains the identity of the holder of a current lease.",
        0,
    ),
    table::AGE,
];

/// The cells: name, `spec.holderIdentity`, age.
pub fn row(object: &Value, now: i64) -> Vec<Value> {
    vec![
        util::name(object),
        Value::from(util::str_at(object, &["spec", "holderIdentity"])),
        util::age(object, now),
    ]
}

/// This resource in the catalog: everything the server needs to serve it.
pub const INFO: crate::resource::ResourceInfo = crate::resource::ResourceInfo {
    group: "coordination.k8s.io",
    version: "v1",
    kind: "Lease",
    list_kind: "LeaseList",
    resource: "leases",
    singular: "lease",
    short_names: &[],
    namespaced: true,
    create_on_update: true,
    verbs: crate::resource::ALL_VERBS,
    subresources: &[],
    categories: &[],
    storage_prefix: "leases",
    storage_api_version: "coordination.k8s.io/v1",
    schema: &SCHEMA,
    protobuf: true,
    feature_gate: None,
    extensions: &[],
    openapi_schema: crate::schema::schema_of::<k8s_openapi::api::coordination::v1::Lease>,
    hooks: crate::resource::Hooks {
        decode,
        default: crate::resource::no_default,
        prepare_for_create,
        prepare_for_update,
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

    fn summary(errors: &ErrorList) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    fn lease(spec: Value) -> Value {
        json!({"apiVersion": API_VERSION, "kind": "Lease", "metadata": {"name": "kube-controller-manager", "namespace": "kube-system"}, "spec": spec})
    }

    #[test]
    fn create_rules() {
        let cases: Vec<(&str, Value, Vec<&str>)> = vec![
            (
                "valid",
                lease(
                    json!({"holderIdentity": "node-1_abc", "leaseDurationSeconds": 15, "acquireTime": "2026-01-01T00:00:00.000000Z", "renewTime": "2026-01-01T00:00:10.000000Z", "leaseTransitions": 0}),
                ),
                vec![],
            ),
            ("empty spec", lease(json!({})), vec![]),
            (
                "zero duration",
                lease(json!({"leaseDurationSeconds": 0})),
                vec!["spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"],
            ),
            (
                "negative duration",
                lease(json!({"leaseDurationSeconds": -5})),
                vec!["spec.leaseDurationSeconds: Invalid value: -5: must be greater than 0"],
            ),
            (
                "negative transitions",
                lease(json!({"leaseTransitions": -1})),
                vec![
                    "spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0",
                ],
            ),
            (
                "long holder is fine",
                lease(json!({"holderIdentity": "h".repeat(1000)})),
                vec![],
            ),
            (
                "known strategy",
                lease(json!({"strategy": "OldestEmulationVersion", "preferredHolder": "a"})),
                vec![],
            ),
            (
                "unknown strategy",
                lease(json!({"strategy": "Newest"})),
                vec![
                    "spec.strategy: Unsupported value: \"Newest\": supported values: \"OldestEmulationVersion\"",
                ],
            ),
            (
                "custom strategy",
                lease(json!({"strategy": "example.com/mine"})),
                vec![],
            ),
            (
                "bad custom strategy",
                lease(json!({"strategy": "example.com/"})),
                vec!["spec.strategy: Invalid value: \"example.com/\": name part must be non-empty"],
            ),
            (
                "holder without strategy",
                lease(json!({"preferredHolder": "a"})),
                vec![
                    "spec.preferredHolder: Forbidden: may only be specified if `strategy` is defined",
                ],
            ),
            (
                "bad name",
                json!({"metadata": {"name": "Lease", "namespace": "kube-system"}}),
                vec![
                    "metadata.name: Invalid value: \"Lease\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                ],
            ),
        ];
        for (name, object, want) in cases {
            assert_eq!(summary(&validate(&object).unwrap()), want, "{name}");
        }
        let err = validate(&lease(json!({"leaseDurationSeconds": "15"}))).unwrap_err();
        assert_eq!(
            err.message,
            "Lease in version \"coordination.k8s.io/v1\" cannot be handled as a Lease: json: cannot unmarshal string into field Lease.spec.leaseDurationSeconds of type int32"
        );
        let err = validate(&lease(json!({"renewTime": "2026-01-01T00:00:10Z"}))).unwrap_err();
        assert!(
            err.message
                .contains("field Lease.spec.renewTime: cannot parse"),
            "{}",
            err.message
        );
    }

    #[test]
    fn update_rules_and_feature_gate() {
        let old = lease(json!({"holderIdentity": "a", "leaseDurationSeconds": 15}));
        let renewed = lease(
            json!({"holderIdentity": "b", "leaseDurationSeconds": 15, "leaseTransitions": 1}),
        );
        assert!(validate_update(&renewed, &old).unwrap().is_empty());
        let broken = lease(json!({"leaseDurationSeconds": 0}));
        assert_eq!(validate_update(&broken, &old).unwrap().0.len(), 1);
        let mut new = lease(
            json!({"holderIdentity": "a", "strategy": "OldestEmulationVersion", "preferredHolder": "b"}),
        );
        prepare_for_create(&mut new, &crate::resource::Context::gates_off());
        assert_eq!(new["spec"], json!({"holderIdentity": "a"}));
        let in_use = lease(json!({"strategy": "OldestEmulationVersion"}));
        let mut update =
            lease(json!({"strategy": "OldestEmulationVersion", "preferredHolder": "b"}));
        prepare_for_update(&mut update, &in_use, &crate::resource::Context::gates_off());
        assert_eq!(
            update["spec"],
            json!({"strategy": "OldestEmulationVersion"})
        );
        // With the server's gate on, the strategy keeps them.
        #[derive(Debug)]
        struct On;
        impl crate::resource::FeatureGates for On {
            fn enabled(&self, feature: &'static str) -> bool {
                feature == crate::features::COORDINATED_LEADER_ELECTION
            }
        }
        let mut enabled =
            lease(json!({"strategy": "OldestEmulationVersion", "preferredHolder": "b"}));
        prepare_for_create(
            &mut enabled,
            &crate::resource::Context {
                gates: &On,
                requestor: None,
                now: 0,
            },
        );
        assert_eq!(enabled["spec"]["preferredHolder"], "b");
        assert_eq!(enabled["spec"]["strategy"], "OldestEmulationVersion");
    }

    #[test]
    fn fields_and_table() {
        let object = json!({"metadata": {"name": "l", "namespace": "kube-system", "creationTimestamp": "1970-01-01T00:00:00Z"}, "spec": {"holderIdentity": "node-1"}});
        assert_eq!(
            row(&object, 3 * 3600),
            vec![json!("l"), json!("node-1"), json!("3h")]
        );
        assert_eq!(
            row(&json!({"metadata": {"name": "l"}}), 0),
            vec![json!("l"), json!(""), json!("<unknown>")]
        );
        let names: Vec<&str> = COLUMNS.iter().map(|c| c.name).collect();
        assert_eq!(names, ["Name", "Holder", "Age"]);
        assert_eq!(
            field_values(&object).keys().copied().collect::<Vec<_>>(),
            FIELD_SELECTORS
        );
    }
}
