//! Namespaces (`core/v1`, cluster-scoped; subresources `status` and `finalize`).
//!
//! Upstream behaviour reproduced here:
//! - defaulting (`SetDefaults_Namespace`, `SetDefaults_NamespaceStatus`): the label
//!   `kubernetes.io/metadata.name` is set to the name, and an empty `status.phase` to `Active`;
//! - the strategy on create: `status` becomes `{phase: Active}` and the `kubernetes`
//!   finalizer is added to `spec.finalizers`; on update `spec.finalizers` and `status` keep
//!   their old values (they change only through `finalize` and `status`);
//! - validation: the name is a DNS-1123 label, each `spec.finalizers` entry is a qualified name
//!   and, without a `/`, one of the standard names (`kubernetes`, `orphan`,
//!   `foregroundDeletion`); a status update may set `status.phase` only to `Active` while the
//!   namespace is not being deleted and only to `Terminating` once it is.

use std::collections::BTreeMap;

use genplane_apimachinery::codec::decode::{self, Decoded};
use genplane_apimachinery::codec::schema::{Field, Struct, Type};
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::meta::schemas::OBJECT_META;
use genplane_apimachinery::meta::{validate_object_meta, validate_object_meta_update};
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use genplane_apimachinery::validation::{is_qualified_name, name_is_dns_label};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::table::{self, ColumnDefinition};
use crate::util;

/// The kind.
pub const KIND: &str = "Namespace";
/// The label holding a namespace's own name.
pub const LABEL_METADATA_NAME: &str = "kubernetes.io/metadata.name";
/// The finalizer the namespace controller removes once the namespace is empty.
pub const FINALIZER_KUBERNETES: &str = "kubernetes";
/// The phase of a namespace in use.
pub const PHASE_ACTIVE: &str = "Active";
/// The phase of a namespace being deleted.
pub const PHASE_TERMINATING: &str = "Terminating";

const STANDARD_FINALIZERS: &[&str] = &[FINALIZER_KUBERNETES, "orphan", "foregroundDeletion"];

static NAMESPACE_SPEC: Struct = Struct {
    name: "NamespaceSpec",
    fields: &[Field::new("finalizers", 1, Type::List(&Type::String))],
};

static NAMESPACE_CONDITION: Struct = Struct {
    name: "NamespaceCondition",
    fields: &[
        Field::new("type", 1, Type::String),
        Field::new("status", 2, Type::String),
        Field::new("lastTransitionTime", 4, Type::Time),
        Field::new("reason", 5, Type::String),
        Field::new("message", 6, Type::String),
    ],
};

static NAMESPACE_STATUS: Struct = Struct {
    name: "NamespaceStatus",
    fields: &[
        Field::new("phase", 1, Type::String),
        Field::new(
            "conditions",
            2,
            Type::List(&Type::Struct(&NAMESPACE_CONDITION)),
        ),
    ],
};

/// The shape of a v1 Namespace.
pub static SCHEMA: Struct = Struct {
    name: "Namespace",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("spec", 2, Type::Struct(&NAMESPACE_SPEC)),
        Field::new("status", 3, Type::Struct(&NAMESPACE_STATUS)),
    ],
};

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Spec {
    finalizers: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Status {
    phase: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Namespace {
    spec: Spec,
    status: Status,
}

/// Type-checks and normalizes a Namespace.
pub fn decode(object: &Value) -> Result<Decoded, ApiError> {
    decode::decode(object, &SCHEMA).map_err(|e| e.to_api_error(KIND, "v1"))
}

fn object_mut<'a>(object: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    let fields = object.as_object_mut()?;
    let entry = fields
        .entry(key)
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    entry.as_object_mut()
}

/// Upstream defaulting: the `kubernetes.io/metadata.name` label (when the name is known) and
/// `status.phase: Active` when the phase is empty.
pub fn default(object: &mut Value) {
    let name = util::str_at(object, &["metadata", "name"]).to_owned();
    if !name.is_empty()
        && let Some(labels) = object_mut(object, "metadata").and_then(|m| {
            let labels = m
                .entry("labels")
                .or_insert_with(|| Value::Object(Map::new()));
            if !labels.is_object() {
                *labels = Value::Object(Map::new());
            }
            labels.as_object_mut()
        })
    {
        labels.insert(LABEL_METADATA_NAME.to_owned(), Value::from(name));
    }
    if util::str_at(object, &["status", "phase"]).is_empty()
        && let Some(status) = object_mut(object, "status")
    {
        status.insert("phase".to_owned(), Value::from(PHASE_ACTIVE));
    }
}

/// The strategy on create: `status` is `{phase: Active}`, and `spec.finalizers` gets
/// `kubernetes` if it does not have it.
pub fn prepare_for_create(object: &mut Value, _context: &crate::resource::Context<'_>) {
    if let Some(fields) = object.as_object_mut() {
        fields.insert("status".to_owned(), json!({"phase": PHASE_ACTIVE}));
    }
    if let Some(spec) = object_mut(object, "spec") {
        let finalizers = spec
            .entry("finalizers")
            .or_insert_with(|| Value::Array(Vec::new()));
        if !finalizers.is_array() {
            *finalizers = Value::Array(Vec::new());
        }
        if let Value::Array(list) = finalizers
            && !list.iter().any(|f| f == FINALIZER_KUBERNETES)
        {
            list.push(Value::from(FINALIZER_KUBERNETES));
        }
    }
}

/// The strategy on update: `spec.finalizers` and `status` keep their old values.
pub fn prepare_for_update(new: &mut Value, old: &Value, _context: &crate::resource::Context<'_>) {
    match old.get("spec").and_then(|s| s.get("finalizers")) {
        Some(finalizers) => {
            if let Some(spec) = object_mut(new, "spec") {
                spec.insert("finalizers".to_owned(), finalizers.clone());
            }
        }
        None => {
            if let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) {
                spec.remove("finalizers");
            }
        }
    }
    crate::util::keep_field(new, old, "status");
}

/// The strategy of the `status` subresource: `spec` keeps its old value.
pub fn prepare_for_status_update(
    new: &mut Value,
    old: &Value,
    _context: &crate::resource::Context<'_>,
) {
    crate::util::keep_field(new, old, "spec");
}

/// The strategy of the `finalize` subresource: `status` keeps its old value.
pub fn prepare_for_finalize_update(
    new: &mut Value,
    old: &Value,
    _context: &crate::resource::Context<'_>,
) {
    crate::util::keep_field(new, old, "status");
}

fn validate_finalizers(finalizers: &[String]) -> ErrorList {
    let path = Path::new("spec").child("finalizers");
    let mut errors = ErrorList::new();
    for finalizer in finalizers {
        for message in is_qualified_name(finalizer) {
            errors.push(Error::invalid(&path, finalizer.as_str(), message));
        }
        if !finalizer.contains('/') && !STANDARD_FINALIZERS.contains(&finalizer.as_str()) {
            errors.push(Error::invalid(
                &path,
                finalizer.as_str(),
                "name is neither a standard finalizer name nor is it fully qualified",
            ));
        }
    }
    errors
}

/// Validates a new Namespace.
pub fn validate(object: &Value) -> Result<ErrorList, ApiError> {
    let (meta, ns) = util::decode_typed::<Namespace>(object, &SCHEMA, KIND, "v1")?;
    let mut errors = validate_object_meta(&meta, false, name_is_dns_label, &Path::new("metadata"));
    errors.extend(validate_finalizers(&ns.spec.finalizers));
    Ok(errors)
}

/// Validates an update of a Namespace (after [`prepare_for_update`]): only metadata rules.
pub fn validate_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let (new_meta, _) = util::decode_typed::<Namespace>(new, &SCHEMA, KIND, "v1")?;
    let (old_meta, _) = util::decode_typed::<Namespace>(old, &SCHEMA, KIND, "v1")?;
    Ok(validate_object_meta_update(
        &new_meta,
        &old_meta,
        &Path::new("metadata"),
    ))
}

/// Validates an update through the `status` subresource.
pub fn validate_status_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let (new_meta, new_ns) = util::decode_typed::<Namespace>(new, &SCHEMA, KIND, "v1")?;
    let (old_meta, _) = util::decode_typed::<Namespace>(old, &SCHEMA, KIND, "v1")?;
    let mut errors = validate_object_meta_update(&new_meta, &old_meta, &Path::new("metadata"));
    let phase_path = Path::new("status").child("Phase");
    let phase = new_ns.status.phase.as_str();
    if new_meta.deletion_timestamp.is_none() {
        if phase != PHASE_ACTIVE {
            errors.push(Error::invalid(
                &phase_path,
                phase,
                "may only be 'Active' if `deletionTimestamp` is empty",
            ));
        }
    } else if phase != PHASE_TERMINATING {
        errors.push(Error::invalid(
            &phase_path,
            phase,
            "may only be 'Terminating' if `deletionTimestamp` is not empty",
        ));
    }
    Ok(errors)
}

/// Validates an update through the `finalize` subresource.
pub fn validate_finalize_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let (new_meta, new_ns) = util::decode_typed::<Namespace>(new, &SCHEMA, KIND, "v1")?;
    let (old_meta, _) = util::decode_typed::<Namespace>(old, &SCHEMA, KIND, "v1")?;
    let mut errors = validate_object_meta_update(&new_meta, &old_meta, &Path::new("metadata"));
    errors.extend(validate_finalizers(&new_ns.spec.finalizers));
    Ok(errors)
}

/// Field-selector labels (upstream's conversion accepts `metadata.namespace`, which is always
/// empty for a namespace).
pub const FIELD_SELECTORS: &[&str] = &["metadata.name", "metadata.namespace", "status.phase"];

/// Field-selector values.
pub fn field_values(object: &Value) -> BTreeMap<&'static str, String> {
    let mut fields = util::meta_fields(object, false);
    fields.insert("metadata.namespace", String::new());
    fields.insert(
        "status.phase",
        util::str_at(object, &["status", "phase"]).to_owned(),
    );
    fields
}

/// `NAME STATUS AGE`.
pub const COLUMNS: &[ColumnDefinition] = &[
    table::NAME,
    table::column("Status", "The status of the namespace", 0),
    table::AGE,
];

/// The cells: name, phase, age.
pub fn row(object: &Value, now: i64) -> Vec<Value> {
    vec![
        util::name(object),
        Value::from(util::str_at(object, &["status", "phase"])),
        util::age(object, now),
    ]
}

/// Whether a namespace's `spec.finalizers` still hold back its deletion.
pub fn pending_finalization(object: &Value) -> bool {
    object
        .pointer("/spec/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|finalizers| !finalizers.is_empty())
}

/// Marks a namespace whose deletion waits: it is `Terminating` until its finalizers are done.
pub fn mark_deleting(object: &mut Value) {
    if let Some(map) = object.as_object_mut() {
        let status = map
            .entry("status")
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        if let Some(status) = status.as_object_mut() {
            status.insert("phase".into(), Value::from("Terminating"));
        }
    }
}

/// The list and patch semantics of the Namespace's own types.
pub static EXTENSIONS: &[crate::schema::Extensions] = &[
    crate::schema::atomic_list("io.k8s.api.core.v1.NamespaceSpec", "finalizers"),
    crate::schema::keyed_list(
        "io.k8s.api.core.v1.NamespaceStatus",
        "conditions",
        &["type"],
    ),
];

/// This resource in the catalog: everything the server needs to serve it.
pub const INFO: crate::resource::ResourceInfo = crate::resource::ResourceInfo {
    group: "",
    version: "v1",
    kind: "Namespace",
    list_kind: "NamespaceList",
    resource: "namespaces",
    singular: "namespace",
    short_names: &["ns"],
    namespaced: false,
    create_on_update: false,
    verbs: &[
        "create", "delete", "get", "list", "patch", "update", "watch",
    ],
    subresources: &[
        crate::resource::Subresource {
            name: "status",
            kind: "Namespace",
            verbs: crate::resource::STATUS_VERBS,
            rules: Some(crate::resource::SubresourceRules {
                prepare_for_update: prepare_for_status_update,
                validate_update: validate_status_update,
            }),
            body: None,
        },
        crate::resource::Subresource {
            name: "finalize",
            kind: "Namespace",
            verbs: &["update"],
            rules: Some(crate::resource::SubresourceRules {
                prepare_for_update: prepare_for_finalize_update,
                validate_update: validate_finalize_update,
            }),
            body: None,
        },
    ],
    categories: &[],
    storage_prefix: "namespaces",
    storage_api_version: "v1",
    schema: &SCHEMA,
    protobuf: true,
    feature_gate: None,
    extensions: EXTENSIONS,
    openapi_schema: crate::schema::schema_of::<k8s_openapi::api::core::v1::Namespace>,
    hooks: crate::resource::Hooks {
        decode,
        default,
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
        pending_finalization,
        mark_deleting,
        grace_period: crate::resource::not_graceful,
    },
};

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(errors: &ErrorList) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn defaulting_and_create_strategy() {
        let mut object = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"x": "y"}}});
        default(&mut object);
        prepare_for_create(&mut object, &crate::resource::Context::gates_off());
        assert_eq!(
            object,
            json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "team-a", "labels": {"x": "y", "kubernetes.io/metadata.name": "team-a"}},
                "status": {"phase": "Active"}, "spec": {"finalizers": ["kubernetes"]}})
        );
        let mut own = json!({"metadata": {"name": "b"}, "spec": {"finalizers": ["example.com/x"]}, "status": {"phase": "Terminating"}});
        prepare_for_create(&mut own, &crate::resource::Context::gates_off());
        assert_eq!(
            own["spec"]["finalizers"],
            json!(["example.com/x", "kubernetes"])
        );
        assert_eq!(own["status"], json!({"phase": "Active"}));
        let mut generated = json!({"metadata": {"generateName": "ns-"}});
        default(&mut generated);
        assert_eq!(
            generated,
            json!({"metadata": {"generateName": "ns-"}, "status": {"phase": "Active"}}),
            "no label without a name"
        );
        let mut kept = json!({"metadata": {"name": "c"}, "status": {"phase": "Terminating"}});
        default(&mut kept);
        assert_eq!(kept["status"]["phase"], "Terminating");
    }

    #[test]
    fn update_strategies_keep_spec_and_status() {
        let old = json!({"metadata": {"name": "a"}, "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
        let mut new = json!({"metadata": {"name": "a"}, "spec": {"finalizers": []}, "status": {"phase": "Terminating"}});
        prepare_for_update(&mut new, &old, &crate::resource::Context::gates_off());
        assert_eq!(new, old);
        let mut status =
            json!({"metadata": {"name": "a"}, "spec": {}, "status": {"phase": "Terminating"}});
        prepare_for_status_update(&mut status, &old, &crate::resource::Context::gates_off());
        assert_eq!(status["spec"], old["spec"]);
        assert_eq!(status["status"]["phase"], "Terminating");
        let mut finalize = json!({"metadata": {"name": "a"}, "spec": {"finalizers": []}, "status": {"phase": "Terminating"}});
        prepare_for_finalize_update(&mut finalize, &old, &crate::resource::Context::gates_off());
        assert_eq!(finalize["spec"]["finalizers"], json!([]));
        assert_eq!(finalize["status"], old["status"]);
    }

    #[test]
    fn create_rules() {
        let ns = |meta: Value, spec: Value| json!({"metadata": meta, "spec": spec});
        let label_msg = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
        let dotted = format!("metadata.name: Invalid value: \"a.b\": {label_msg}");
        let upper = format!("metadata.name: Invalid value: \"Team\": {label_msg}");
        let cases: Vec<(&str, Value, Vec<&str>)> = vec![
            ("plain", ns(json!({"name": "team-a"}), json!({})), vec![]),
            (
                "standard finalizers",
                ns(
                    json!({"name": "a"}),
                    json!({"finalizers": ["kubernetes", "orphan", "foregroundDeletion"]}),
                ),
                vec![],
            ),
            (
                "qualified finalizer",
                ns(
                    json!({"name": "a"}),
                    json!({"finalizers": ["example.com/cleanup"]}),
                ),
                vec![],
            ),
            (
                "dots are not labels",
                ns(json!({"name": "a.b"}), json!({})),
                vec![&dotted],
            ),
            (
                "upper case",
                ns(json!({"name": "Team"}), json!({})),
                vec![&upper],
            ),
            (
                "too long",
                ns(json!({"name": "a".repeat(64)}), json!({})),
                vec![],
            ),
            (
                "namespace set",
                ns(json!({"name": "a", "namespace": "default"}), json!({})),
                vec!["metadata.namespace: Forbidden: not allowed on this type"],
            ),
            (
                "unqualified finalizer",
                ns(json!({"name": "a"}), json!({"finalizers": ["cleanup"]})),
                vec![
                    "spec.finalizers: Invalid value: \"cleanup\": name is neither a standard finalizer name nor is it fully qualified",
                ],
            ),
            (
                "malformed finalizer",
                ns(
                    json!({"name": "a"}),
                    json!({"finalizers": ["example.com/"]}),
                ),
                vec![
                    "spec.finalizers: Invalid value: \"example.com/\": name part must be non-empty",
                ],
            ),
            (
                "no name",
                ns(json!({}), json!({})),
                vec!["metadata.name: Required value: name or generateName is required"],
            ),
            (
                "generateName",
                ns(json!({"generateName": "tmp-"}), json!({})),
                vec![],
            ),
        ];
        for (name, object, want) in cases {
            let errors = validate(&object).unwrap();
            if name == "too long" {
                assert_eq!(
                    summary(&errors),
                    [format!(
                        "metadata.name: Invalid value: \"{}\": must be no more than 63 characters",
                        "a".repeat(64)
                    )],
                    "{name}"
                );
                continue;
            }
            assert_eq!(summary(&errors), want, "{name}");
        }
        let err =
            validate(&json!({"metadata": {"name": "a"}, "spec": {"finalizers": "kubernetes"}}))
                .unwrap_err();
        assert!(
            err.message
                .contains("Namespace.spec.finalizers of type []string"),
            "{}",
            err.message
        );
    }

    #[test]
    fn subresource_rules() {
        let old = json!({"metadata": {"name": "a", "uid": "u"}, "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
        let deleting = json!({"metadata": {"name": "a", "uid": "u", "deletionTimestamp": "2026-01-01T00:00:00Z"}, "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
        let with = |base: &Value, phase: &str| {
            let mut v = base.clone();
            v["status"]["phase"] = json!(phase);
            v
        };
        assert!(
            validate_status_update(&with(&old, "Active"), &old)
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            summary(&validate_status_update(&with(&old, "Terminating"), &old).unwrap()),
            [
                "status.Phase: Invalid value: \"Terminating\": may only be 'Active' if `deletionTimestamp` is empty"
            ]
        );
        assert!(
            validate_status_update(&with(&deleting, "Terminating"), &deleting)
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            summary(&validate_status_update(&with(&deleting, "Active"), &deleting).unwrap()),
            [
                "status.Phase: Invalid value: \"Active\": may only be 'Terminating' if `deletionTimestamp` is not empty"
            ]
        );
        let mut finalized = deleting.clone();
        finalized["spec"]["finalizers"] = json!([]);
        assert!(
            validate_finalize_update(&finalized, &deleting)
                .unwrap()
                .is_empty()
        );
        finalized["spec"]["finalizers"] = json!(["bad"]);
        assert_eq!(
            validate_finalize_update(&finalized, &deleting)
                .unwrap()
                .0
                .len(),
            1
        );
        let mut renamed = old.clone();
        renamed["metadata"]["name"] = json!("b");
        assert_eq!(
            summary(&validate_update(&renamed, &old).unwrap()),
            ["metadata.name: Invalid value: \"b\": field is immutable"]
        );
    }

    #[test]
    fn fields_and_table() {
        let object = json!({"metadata": {"name": "kube-system", "creationTimestamp": "1970-01-01T00:00:00Z"}, "status": {"phase": "Active"}});
        let fields = field_values(&object);
        assert_eq!(
            fields.get("status.phase").map(String::as_str),
            Some("Active")
        );
        assert_eq!(
            fields.get("metadata.name").map(String::as_str),
            Some("kube-system")
        );
        assert_eq!(
            fields.get("metadata.namespace").map(String::as_str),
            Some("")
        );
        assert_eq!(
            row(&object, 400 * 86_400),
            vec![json!("kube-system"), json!("Active"), json!("400d")]
        );
        let names: Vec<&str> = COLUMNS.iter().map(|c| c.name).collect();
        assert_eq!(names, ["Name", "Status", "Age"]);
    }
}
