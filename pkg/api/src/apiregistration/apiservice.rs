//! APIServices (`apiregistration.k8s.io/v1`, cluster-scoped): which server answers a
//! group-version. One without `spec.service` is `Local` (this server serves it); one with a
//! service names an extension API server that the aggregator proxies to.
//!
//! Upstream rules (kube-aggregator's `ValidateAPIService`, `ValidateAPIServiceUpdate`,
//! `ValidateAPIServiceStatusUpdate` and its registry strategy, Kubernetes 1.33):
//! - the name is one path segment and exactly `<spec.version>.<spec.group>` (`v1.` for the core
//!   group, the only group that may be empty, and only at `v1`);
//! - `spec.group` is a DNS-1123 subdomain, `spec.version` a DNS-1035 label;
//! - `spec.groupPriorityMinimum` is in 1..=20000, `spec.versionPriority` in 1..=1000;
//! - a Local APIService has neither `caBundle` nor `insecureSkipTLSVerify`; a service
//!   reference needs its namespace and name, and `insecureSkipTLSVerify` excludes `caBundle`;
//!   its port defaults to 443;
//! - on create the status is reset, and a Local APIService is marked available at once
//!   (`Available=True`, reason `Local`); on update the stored status is kept; a `status`
//!   write keeps the spec, labels, annotations, finalizers and owner references, and its
//!   conditions' statuses are `True`, `False` or `Unknown`.
//!
//! The table is upstream's: `NAME SERVICE AVAILABLE AGE`, the service `Local` or
//! `<namespace>/<name>`, availability `True` or `False (<reason>)`.

use std::collections::BTreeMap;

use base64::Engine as _;
use genplane_apimachinery::codec::decode::{self, Decoded};
use genplane_apimachinery::codec::schema::{Field, Struct, Type};
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::meta::schemas::OBJECT_META;
use genplane_apimachinery::meta::{validate_object_meta, validate_object_meta_update};
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use genplane_apimachinery::validation::{
    is_dns1035_label, is_dns1123_subdomain, name_is_path_segment,
};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::resource::{self, Context, Hooks, ResourceInfo, Subresource, SubresourceRules};
use crate::table::{self, ColumnDefinition};
use crate::util;

/// The group.
pub const GROUP: &str = "apiregistration.k8s.io";
/// The kind.
pub const KIND: &str = "APIService";
/// The API version.
pub const API_VERSION: &str = "apiregistration.k8s.io/v1";
/// The condition saying whether the APIService's server answers.
pub const AVAILABLE: &str = "Available";
/// The reason of a Local APIService's `Available` condition.
pub const LOCAL_REASON: &str = "Local";
/// The message of a Local APIService's `Available` condition.
pub const LOCAL_MESSAGE: &str = "Local APIServices are always available";
/// The label of the APIServices the server keeps itself: `onstart` for its built-in
/// group-versions (made when it starts), `true` for the custom resources' (followed).
pub const AUTOMANAGED_LABEL: &str = "kube-aggregator.kubernetes.io/automanaged";
/// The port of a service reference without one.
pub const DEFAULT_PORT: i32 = 443;

/// Upstream's priorities of the built-in group-versions (group priority minimum, version
/// priority), from kube-apiserver 1.33's tables; `None` for a group-version it has none for.
pub fn builtin_priority(group: &str, version: &str) -> Option<(i32, i32)> {
    let priority = match (group, version) {
        ("", "v1") => (18000, 1),
        ("apiregistration.k8s.io", "v1") => (18000, 1),
        ("events.k8s.io", "v1") => (17750, 15),
        ("authentication.k8s.io", "v1") => (17700, 15),
        ("authentication.k8s.io", "v1beta1") => (17700, 9),
        ("authentication.k8s.io", "v1alpha1") => (17700, 1),
        ("authorization.k8s.io", "v1") => (17600, 15),
        ("autoscaling", "v1") => (17500, 15),
        ("certificates.k8s.io", "v1") => (17300, 15),
        ("certificates.k8s.io", "v1beta1") => (17300, 9),
        ("certificates.k8s.io", "v1alpha1") => (17300, 1),
        ("rbac.authorization.k8s.io", "v1") => (17000, 15),
        ("apiextensions.k8s.io", "v1") => (16700, 15),
        ("admissionregistration.k8s.io", "v1") => (16700, 15),
        ("admissionregistration.k8s.io", "v1beta1") => (16700, 12),
        ("admissionregistration.k8s.io", "v1alpha1") => (16700, 9),
        ("coordination.k8s.io", "v1") => (16500, 15),
        ("coordination.k8s.io", "v1beta1") => (16500, 13),
        ("coordination.k8s.io", "v1alpha2") => (16500, 12),
        ("flowcontrol.apiserver.k8s.io", "v1") => (16100, 21),
        ("flowcontrol.apiserver.k8s.io", "v1beta3") => (16100, 18),
        _ => return None,
    };
    Some(priority)
}

/// The priorities of a built-in group-version upstream has none for (genplane's own groups, a
/// program's own kinds): below every upstream group, above the custom resources.
pub const OWN_PRIORITY: (i32, i32) = (15000, 9);

/// The priorities of a custom resources' group-version, as upstream's CRD registration gives.
pub const CUSTOM_PRIORITY: (i32, i32) = (1000, 100);

static SERVICE_REFERENCE: Struct = Struct {
    name: "ServiceReference",
    fields: &[
        Field::new("namespace", 1, Type::String),
        Field::new("name", 2, Type::String),
        Field::pointer("port", 3, Type::Int32),
    ],
};

static SPEC: Struct = Struct {
    name: "APIServiceSpec",
    fields: &[
        Field::pointer("service", 1, Type::Struct(&SERVICE_REFERENCE)),
        Field::new("group", 2, Type::String),
        Field::new("version", 3, Type::String),
        Field::new("insecureSkipTLSVerify", 4, Type::Bool),
        Field::new("caBundle", 5, Type::Bytes),
        Field::pointer("groupPriorityMinimum", 7, Type::Int32),
        Field::pointer("versionPriority", 8, Type::Int32),
    ],
};

static CONDITION: Struct = Struct {
    name: "APIServiceCondition",
    fields: &[
        Field::pointer("type", 1, Type::String),
        Field::pointer("status", 2, Type::String),
        Field::new("lastTransitionTime", 3, Type::Time),
        Field::new("reason", 4, Type::String),
        Field::new("message", 5, Type::String),
    ],
};

static STATUS: Struct = Struct {
    name: "APIServiceStatus",
    fields: &[Field::new(
        "conditions",
        1,
        Type::List(&Type::Struct(&CONDITION)),
    )],
};

/// The shape of an apiregistration.k8s.io/v1 APIService.
pub static SCHEMA: Struct = Struct {
    name: "APIService",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("spec", 2, Type::Struct(&SPEC)),
        Field::new("status", 3, Type::Struct(&STATUS)),
    ],
};

const SPEC_SCHEMA: &str = "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIServiceSpec";
const STATUS_SCHEMA: &str = "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIServiceStatus";

/// The list and patch semantics of the APIService's own types.
pub static EXTENSIONS: &[crate::schema::Extensions] = &[
    crate::schema::atomic_list(SPEC_SCHEMA, "caBundle"),
    crate::schema::keyed_list(STATUS_SCHEMA, "conditions", &["type"]),
];

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct ServiceReference {
    namespace: String,
    name: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Spec {
    service: Option<ServiceReference>,
    group: String,
    version: String,
    #[serde(rename = "insecureSkipTLSVerify")]
    insecure_skip_tls_verify: bool,
    ca_bundle: String,
    group_priority_minimum: i32,
    version_priority: i32,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Condition {
    status: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Status {
    conditions: Vec<Condition>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ApiService {
    spec: Spec,
    status: Status,
}

/// Type-checks and normalizes an APIService.
pub fn decode(object: &Value) -> Result<Decoded, ApiError> {
    decode::decode(object, &SCHEMA).map_err(|e| e.to_api_error(KIND, API_VERSION))
}

/// Upstream's defaults: a service reference's port is 443.
pub fn default(object: &mut Value) {
    if let Some(service) = object
        .pointer_mut("/spec/service")
        .and_then(Value::as_object_mut)
        && service.get("port").is_none_or(Value::is_null)
    {
        service.insert("port".into(), json!(DEFAULT_PORT));
    }
}

/// The `Available` condition with `status`, `reason` and `message`, without a time (the one
/// who sets it gives the time: [`crate::util::set_condition`]).
pub fn available_condition(status: &str, reason: &str, message: &str) -> Value {
    json!({"type": AVAILABLE, "status": status, "reason": reason, "message": message})
}

/// The condition a Local APIService carries: available, reason `Local`, since `now` (RFC 3339).
pub fn local_available_condition(now: &str) -> Value {
    let mut condition = available_condition("True", LOCAL_REASON, LOCAL_MESSAGE);
    condition["lastTransitionTime"] = Value::from(now);
    condition
}

/// Whether the APIService names no service: this server serves its group-version.
pub fn is_local(object: &Value) -> bool {
    object.pointer("/spec/service").is_none_or(Value::is_null)
}

/// The strategy on create: no status but, for a Local APIService, `Available=True` since the
/// object's creation (the registry sets `creationTimestamp` before this hook runs).
pub fn prepare_for_create(object: &mut Value, _: &Context<'_>) {
    let local = is_local(object);
    let now = util::str_at(object, &["metadata", "creationTimestamp"]).to_owned();
    if let Some(map) = object.as_object_mut() {
        map.remove("status");
        if local {
            let mut condition = local_available_condition(&now);
            // Without a creation time (a strategy run outside the registry), no time.
            if now.is_empty()
                && let Some(condition) = condition.as_object_mut()
            {
                condition.remove("lastTransitionTime");
            }
            map.insert("status".into(), json!({"conditions": [condition]}));
        }
    }
}

/// The strategy on update: the stored status is kept.
pub fn prepare_for_update(new: &mut Value, old: &Value, _: &Context<'_>) {
    util::keep_field(new, old, "status");
}

/// The strategy of the `status` subresource: only the status changes; the labels and
/// annotations stay as stored too, as upstream's.
pub fn prepare_for_status_update(new: &mut Value, old: &Value, context: &Context<'_>) {
    util::prepare_status_update(new, old, context);
    for key in ["labels", "annotations"] {
        match old.pointer(&format!("/metadata/{key}")) {
            Some(value) => new["metadata"][key] = value.clone(),
            None => {
                if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.remove(key);
                }
            }
        }
    }
}

/// The name an APIService of `spec` must have: `<version>.<group>`.
fn required_name(spec: &Spec) -> String {
    format!("{}.{}", spec.version, spec.group)
}

fn validate_spec(spec: &Spec) -> ErrorList {
    let path = Path::new("spec");
    let mut errors = ErrorList::new();
    if spec.group.is_empty() && spec.version != "v1" {
        errors.push(Error::required(
            &path.child("group"),
            "only v1 may have an empty group and it better be legacy kube",
        ));
    }
    if !spec.group.is_empty() {
        for message in is_dns1123_subdomain(&spec.group) {
            errors.push(Error::invalid(
                &path.child("group"),
                spec.group.as_str(),
                message,
            ));
        }
    }
    for message in is_dns1035_label(&spec.version) {
        errors.push(Error::invalid(
            &path.child("version"),
            spec.version.as_str(),
            message,
        ));
    }
    if !(1..=20000).contains(&spec.group_priority_minimum) {
        errors.push(Error::invalid(
            &path.child("groupPriorityMinimum"),
            spec.group_priority_minimum,
            "must be positive and less than 20000",
        ));
    }
    if !(1..=1000).contains(&spec.version_priority) {
        errors.push(Error::invalid(
            &path.child("versionPriority"),
            spec.version_priority,
            "must be positive and less than 1000",
        ));
    }
    let ca_bundle_bytes = base64::engine::general_purpose::STANDARD
        .decode(&spec.ca_bundle)
        .map_or(spec.ca_bundle.len(), |b| b.len());
    let Some(service) = &spec.service else {
        if ca_bundle_bytes != 0 {
            errors.push(Error::invalid(
                &path.child("caBundle"),
                format!("{ca_bundle_bytes} bytes"),
                "local APIServices may not have a caBundle",
            ));
        }
        if spec.insecure_skip_tls_verify {
            errors.push(Error::invalid(
                &path.child("insecureSkipTLSVerify"),
                true,
                "local APIServices may not have insecureSkipTLSVerify",
            ));
        }
        return errors;
    };
    let service_path = path.child("service");
    if service.namespace.is_empty() {
        errors.push(Error::required(&service_path.child("namespace"), ""));
    }
    if service.name.is_empty() {
        errors.push(Error::required(&service_path.child("name"), ""));
    }
    if spec.insecure_skip_tls_verify && ca_bundle_bytes > 0 {
        errors.push(Error::invalid(
            &path.child("insecureSkipTLSVerify"),
            true,
            "may not be true if caBundle is present",
        ));
    }
    errors
}

/// The metadata rules with upstream's name rule: one path segment, then exactly
/// `<version>.<group>`.
fn validate_meta_name(meta: &genplane_apimachinery::meta::ObjectMeta, spec: &Spec) -> ErrorList {
    let mut errors = ErrorList::new();
    let required = required_name(spec);
    let path = Path::new("metadata");
    for (field, value) in [("name", &meta.name), ("generateName", &meta.generate_name)] {
        if value.is_empty() || !name_is_path_segment(value, field == "generateName").is_empty() {
            continue;
        }
        if *value != required {
            errors.push(Error::invalid(
                &path.child(field),
                value.as_str(),
                format!("must be `spec.version+\".\"+spec.group`: {required:?}"),
            ));
        }
    }
    errors
}

/// Validates a new APIService.
pub fn validate(object: &Value) -> Result<ErrorList, ApiError> {
    let (meta, api_service) = util::decode_typed::<ApiService>(object, &SCHEMA, KIND, API_VERSION)?;
    let mut errors =
        validate_object_meta(&meta, false, name_is_path_segment, &Path::new("metadata"));
    errors.extend(validate_meta_name(&meta, &api_service.spec));
    errors.extend(validate_spec(&api_service.spec));
    Ok(errors)
}

/// Validates an update of an APIService: the metadata's update rules, then everything a new
/// one must satisfy.
pub fn validate_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let (new_meta, _) = util::decode_typed::<ApiService>(new, &SCHEMA, KIND, API_VERSION)?;
    let (old_meta, _) = util::decode_typed::<ApiService>(old, &SCHEMA, KIND, API_VERSION)?;
    let mut errors = validate_object_meta_update(&new_meta, &old_meta, &Path::new("metadata"));
    errors.extend(validate(new)?);
    Ok(errors)
}

/// Validates a write through `status`: the metadata's update rules and the conditions'
/// statuses.
pub fn validate_status_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let (new_meta, api_service) =
        util::decode_typed::<ApiService>(new, &SCHEMA, KIND, API_VERSION)?;
    let (old_meta, _) = util::decode_typed::<ApiService>(old, &SCHEMA, KIND, API_VERSION)?;
    let mut errors = validate_object_meta_update(&new_meta, &old_meta, &Path::new("metadata"));
    let conditions = Path::new("status").child("conditions");
    for (i, condition) in api_service.status.conditions.iter().enumerate() {
        if !util::CONDITION_STATUSES.contains(&condition.status.as_str()) {
            errors.push(Error::not_supported(
                &conditions.index(i).child("status"),
                condition.status.as_str(),
                util::CONDITION_STATUSES,
            ));
        }
    }
    Ok(errors)
}

/// Field-selector labels: only the metadata ones.
pub const FIELD_SELECTORS: &[&str] = &["metadata.name", "metadata.namespace"];

/// Field-selector values.
pub fn field_values(object: &Value) -> BTreeMap<&'static str, String> {
    util::meta_fields(object, true)
}

/// `NAME SERVICE AVAILABLE AGE`.
pub const COLUMNS: &[ColumnDefinition] = &[
    table::NAME,
    table::column(
        "Service",
        "The reference to the service that hosts this API endpoint.",
        0,
    ),
    table::column("Available", "Whether this service is available.", 0),
    table::AGE,
];

/// The `Available` cell: `True`, or the status with its reason (`False (MissingEndpoints)`),
/// or `Unknown` without the condition.
pub fn availability(object: &Value) -> String {
    let condition = object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|conditions| conditions.iter().find(|c| c["type"] == AVAILABLE));
    let Some(condition) = condition else {
        return "Unknown".to_owned();
    };
    let status = condition["status"].as_str().unwrap_or_default();
    let reason = condition["reason"].as_str().unwrap_or_default();
    if status == "True" || reason.is_empty() {
        status.to_owned()
    } else {
        format!("{status} ({reason})")
    }
}

/// The cells: name, `Local` or `<namespace>/<name>`, availability, age.
pub fn row(object: &Value, now: i64) -> Vec<Value> {
    let service = if is_local(object) {
        "Local".to_owned()
    } else {
        format!(
            "{}/{}",
            util::str_at(object, &["spec", "service", "namespace"]),
            util::str_at(object, &["spec", "service", "name"])
        )
    };
    vec![
        util::name(object),
        Value::from(service),
        Value::from(availability(object)),
        util::age(object, now),
    ]
}

/// This resource in the catalog: everything the server needs to serve it.
pub static INFO: ResourceInfo = ResourceInfo {
    group: GROUP,
    version: "v1",
    kind: KIND,
    list_kind: "APIServiceList",
    resource: "apiservices",
    singular: "apiservice",
    short_names: &[],
    namespaced: false,
    create_on_update: false,
    verbs: resource::ALL_VERBS,
    subresources: &[Subresource {
        name: "status",
        kind: KIND,
        verbs: resource::STATUS_VERBS,
        rules: Some(SubresourceRules {
            prepare_for_update: prepare_for_status_update,
            validate_update: validate_status_update,
        }),
        body: None,
    }],
    categories: &["api-extensions"],
    storage_prefix: "apiregistration.k8s.io/apiservices",
    storage_api_version: API_VERSION,
    schema: &SCHEMA,
    protobuf: true,
    feature_gate: None,
    extensions: EXTENSIONS,
    openapi_schema: crate::schema::schema_of::<
        k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService,
    >,
    hooks: Hooks {
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
        pending_finalization: resource::nothing_pending,
        mark_deleting: resource::no_default,
        grace_period: resource::not_graceful,
    },
};

#[cfg(test)]
mod tests;
