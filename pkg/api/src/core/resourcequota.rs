//! ResourceQuotas (`core/v1`, namespaced; subresource `status`).
//!
//! Upstream rules (`ValidateResourceQuota`, `...Update`, `...StatusUpdate`):
//! - `spec.hard`, `status.hard`, `status.used`: each resource name is a qualified name, and
//!   without a `/` a standard resource name and a standard quota resource name (`cpu`,
//!   `requests.memory`, `pods`, `hugepages-2Mi`, ...); each quantity is not negative, and an
//!   integer for countable resources (`pods`, `secrets`, `services.nodeports`, extended
//!   resources like `example.com/gpu`, ...);
//! - `spec.scopes`: standard scopes, each valid for every standard resource in `spec.hard`, and
//!   not both of `BestEffort`/`NotBestEffort` or `Terminating`/`NotTerminating`;
//! - `spec.scopeSelector.matchExpressions`: the same scope rules; the operator `In`/`NotIn`
//!   needs values, `Exists`/`DoesNotExist` none, and the pod-phase-like scopes need `Exists`;
//! - on update `spec.scopes` may not change (as a set); a status update needs a resourceVersion.
//!
//! The strategy clears `status` on create and keeps it on spec updates.
//!
//! Quantities come in as strings or numbers and are written back in canonical form by
//! [`decode()`]; a malformed quantity is a 400 BadRequest, as upstream's JSON decoding makes it.

use std::collections::{BTreeMap, BTreeSet};

use genplane_apimachinery::codec::decode::{self, Decoded};
use genplane_apimachinery::codec::schema::{Field, Struct, Type};
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::meta::schemas::OBJECT_META;
use genplane_apimachinery::meta::{validate_object_meta, validate_object_meta_update};
use genplane_apimachinery::quantity::Quantity;
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use genplane_apimachinery::validation::{is_qualified_name, name_is_dns_subdomain};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::FIELD_IMMUTABLE;
use crate::table::{self, ColumnDefinition};
use crate::util;

/// The kind.
pub const KIND: &str = "ResourceQuota";

/// Resource names a quota may limit without a domain prefix (besides `hugepages-*`).
pub const STANDARD_QUOTA_RESOURCES: &[&str] = &[
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.storage",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
    "resourcequotas",
    "services",
    "replicationcontrollers",
    "secrets",
    "persistentvolumeclaims",
    "configmaps",
    "services.nodeports",
    "services.loadbalancers",
];

/// Standard resource names (upstream's `standardResources`, which adds `storage`).
const STANDARD_RESOURCES: &[&str] = &[
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
    "resourcequotas",
    "services",
    "replicationcontrollers",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "storage",
    "requests.storage",
    "services.nodeports",
    "services.loadbalancers",
];

/// Resources counted in whole units.
const INTEGER_RESOURCES: &[&str] = &[
    "pods",
    "resourcequotas",
    "services",
    "replicationcontrollers",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "services.nodeports",
    "services.loadbalancers",
];

/// The scopes a quota may have.
pub const STANDARD_SCOPES: &[&str] = &[
    "Terminating",
    "NotTerminating",
    "BestEffort",
    "NotBestEffort",
    "PriorityClass",
    "CrossNamespacePodAffinity",
    "VolumeAttributesClass",
];

const POD_COMPUTE_RESOURCES: &[&str] = &[
    "cpu",
    "limits.cpu",
    "limits.memory",
    "memory",
    "requests.cpu",
    "requests.memory",
];

static SCOPED_RESOURCE_SELECTOR_REQUIREMENT: Struct = Struct {
    name: "ScopedResourceSelectorRequirement",
    fields: &[
        Field::new("scopeName", 1, Type::String),
        Field::new("operator", 2, Type::String),
        Field::new("values", 3, Type::List(&Type::String)),
    ],
};

static SCOPE_SELECTOR: Struct = Struct {
    name: "ScopeSelector",
    fields: &[Field::new(
        "matchExpressions",
        1,
        Type::List(&Type::Struct(&SCOPED_RESOURCE_SELECTOR_REQUIREMENT)),
    )],
};

static RESOURCE_QUOTA_SPEC: Struct = Struct {
    name: "ResourceQuotaSpec",
    fields: &[
        Field::new("hard", 1, Type::Map(&Type::Quantity)),
        Field::new("scopes", 2, Type::List(&Type::String)),
        Field::new("scopeSelector", 3, Type::Struct(&SCOPE_SELECTOR)),
    ],
};

static RESOURCE_QUOTA_STATUS: Struct = Struct {
    name: "ResourceQuotaStatus",
    fields: &[
        Field::new("hard", 1, Type::Map(&Type::Quantity)),
        Field::new("used", 2, Type::Map(&Type::Quantity)),
    ],
};

/// The shape of a v1 ResourceQuota.
pub static SCHEMA: Struct = Struct {
    name: "ResourceQuota",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("spec", 2, Type::Struct(&RESOURCE_QUOTA_SPEC)),
        Field::new("status", 3, Type::Struct(&RESOURCE_QUOTA_STATUS)),
    ],
};

#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Requirement {
    scope_name: String,
    operator: String,
    values: Vec<String>,
}

#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct ScopeSelector {
    match_expressions: Vec<Requirement>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Spec {
    hard: BTreeMap<String, String>,
    scopes: Vec<String>,
    scope_selector: Option<ScopeSelector>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Status {
    hard: BTreeMap<String, String>,
    used: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ResourceQuota {
    spec: Spec,
    status: Status,
}

/// Type-checks and normalizes a ResourceQuota (quantities become canonical).
pub fn decode(object: &Value) -> Result<Decoded, ApiError> {
    decode::decode(object, &SCHEMA).map_err(|e| e.to_api_error(KIND, "v1"))
}

/// The strategy on create: `status` is cleared.
pub fn prepare_for_create(object: &mut Value, _context: &crate::resource::Context<'_>) {
    if let Some(fields) = object.as_object_mut() {
        fields.remove("status");
    }
}

/// The strategy on update: `status` keeps its old value.
pub fn prepare_for_update(new: &mut Value, old: &Value, _context: &crate::resource::Context<'_>) {
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

fn is_huge_pages(name: &str) -> bool {
    name.starts_with("hugepages-") || name.starts_with("requests.hugepages-")
}

fn is_standard_quota_resource(name: &str) -> bool {
    STANDARD_QUOTA_RESOURCES.contains(&name) || is_huge_pages(name)
}

/// Upstream's `IsExtendedResourceName`: domain-prefixed, not `kubernetes.io/`, not `requests.`.
fn is_extended_resource(name: &str) -> bool {
    let native = !name.contains('/') || name.contains("kubernetes.io/");
    !native
        && !name.starts_with("requests.")
        && is_qualified_name(&format!("requests.{name}")).is_empty()
}

fn is_integer_resource(name: &str) -> bool {
    INTEGER_RESOURCES.contains(&name) || is_extended_resource(name)
}

fn validate_resource_name(name: &str, path: &Path) -> ErrorList {
    let mut errors: ErrorList = is_qualified_name(name)
        .into_iter()
        .map(|m| Error::invalid(path, name, m))
        .collect();
    if !errors.is_empty() {
        return errors;
    }
    if !name.contains('/') {
        if !(STANDARD_RESOURCES.contains(&name) || is_huge_pages(name)) {
            errors.push(Error::invalid(
                path,
                name,
                "must be a standard resource type or fully qualified",
            ));
            return errors;
        }
        if !is_standard_quota_resource(name) {
            errors.push(Error::invalid(
                path,
                name,
                "must be a standard resource for quota",
            ));
        }
    }
    errors
}

fn validate_resources(resources: &BTreeMap<String, String>, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    for (name, quantity) in resources {
        let at = path.key(name);
        errors.extend(validate_resource_name(name, &at));
        match Quantity::parse(quantity) {
            Ok(q) => {
                if q.is_negative() {
                    errors.push(Error::invalid(
                        &at,
                        q.to_string(),
                        "must be greater than or equal to 0",
                    ));
                }
                if is_integer_resource(name) && !q.is_integer() {
                    errors.push(Error::invalid(&at, q.to_string(), "must be an integer"));
                }
            }
            Err(e) => errors.push(Error::invalid(&at, quantity.as_str(), e.to_string())),
        }
    }
    errors
}

fn scope_valid_for(scope: &str, resource: &str) -> bool {
    match scope {
        "Terminating"
        | "NotTerminating"
        | "NotBestEffort"
        | "PriorityClass"
        | "CrossNamespacePodAffinity" => {
            resource == "pods" || POD_COMPUTE_RESOURCES.contains(&resource)
        }
        "BestEffort" => resource == "pods",
        "VolumeAttributesClass" => {
            resource == "persistentvolumeclaims" || resource == "requests.storage"
        }
        _ => true,
    }
}

fn conflicting(scopes: &BTreeSet<&str>) -> usize {
    [
        ("BestEffort", "NotBestEffort"),
        ("Terminating", "NotTerminating"),
    ]
    .iter()
    .filter(|(a, b)| scopes.contains(a) && scopes.contains(b))
    .count()
}

fn validate_spec(spec: &Spec) -> ErrorList {
    let spec_path = Path::new("spec");
    let mut errors = validate_resources(&spec.hard, &spec_path.child("hard"));
    let standard_hard: Vec<&str> = spec
        .hard
        .keys()
        .map(String::as_str)
        .filter(|k| is_standard_quota_resource(k))
        .collect();
    if !spec.scopes.is_empty() {
        let path = spec_path.child("scopes");
        let value = || Value::from(spec.scopes.clone());
        let mut seen = BTreeSet::new();
        for scope in &spec.scopes {
            if !STANDARD_SCOPES.contains(&scope.as_str()) {
                errors.push(Error::invalid(&path, value(), "unsupported scope"));
            }
            for resource in &standard_hard {
                if !scope_valid_for(scope, resource) {
                    errors.push(Error::invalid(
                        &path,
                        value(),
                        "unsupported scope applied to resource",
                    ));
                }
            }
            seen.insert(scope.as_str());
        }
        for _ in 0..conflicting(&seen) {
            errors.push(Error::invalid(&path, value(), "conflicting scopes"));
        }
    }
    if let Some(selector) = &spec.scope_selector {
        let path = spec_path.child("scopeSelector").child("matchExpressions");
        let value = || serde_json::to_value(selector).unwrap_or_default();
        let mut seen = BTreeSet::new();
        for req in &selector.match_expressions {
            let scope = req.scope_name.as_str();
            if !STANDARD_SCOPES.contains(&scope) {
                errors.push(Error::invalid(
                    &path.child("scopeName"),
                    scope,
                    "unsupported scope",
                ));
            }
            for resource in &standard_hard {
                if !scope_valid_for(scope, resource) {
                    errors.push(Error::invalid(
                        &path,
                        value(),
                        "unsupported scope applied to resource",
                    ));
                }
            }
            if matches!(
                scope,
                "BestEffort"
                    | "NotBestEffort"
                    | "Terminating"
                    | "NotTerminating"
                    | "CrossNamespacePodAffinity"
            ) && req.operator != "Exists"
            {
                errors.push(Error::invalid(
                    &path.child("operator"),
                    req.operator.as_str(),
                    "must be 'Exist' when scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity",
                ));
            }
            match req.operator.as_str() {
                "In" | "NotIn" => {
                    if req.values.is_empty() {
                        errors.push(Error::required(
                            &path.child("values"),
                            "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector",
                        ));
                    }
                }
                "Exists" | "DoesNotExist" => {
                    if !req.values.is_empty() {
                        errors.push(Error::invalid(
                            &path.child("values"),
                            Value::from(req.values.clone()),
                            "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector",
                        ));
                    }
                }
                other => errors.push(Error::invalid(
                    &path.child("operator"),
                    other,
                    "not a valid selector operator",
                )),
            }
            seen.insert(scope);
        }
        for _ in 0..conflicting(&seen) {
            errors.push(Error::invalid(&path, value(), "conflicting scopes"));
        }
    }
    errors
}

fn validate_status(status: &Status) -> ErrorList {
    let path = Path::new("status");
    let mut errors = validate_resources(&status.hard, &path.child("hard"));
    errors.extend(validate_resources(&status.used, &path.child("used")));
    errors
}

/// Validates a new ResourceQuota.
pub fn validate(object: &Value) -> Result<ErrorList, ApiError> {
    let (meta, quota) = util::decode_typed::<ResourceQuota>(object, &SCHEMA, KIND, "v1")?;
    let mut errors =
        validate_object_meta(&meta, true, name_is_dns_subdomain, &Path::new("metadata"));
    errors.extend(validate_spec(&quota.spec));
    errors.extend(validate_status(&quota.status));
    Ok(errors)
}

/// Validates an update of a ResourceQuota's spec: the spec rules, and `spec.scopes` unchanged.
pub fn validate_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let (new_meta, new_quota) = util::decode_typed::<ResourceQuota>(new, &SCHEMA, KIND, "v1")?;
    let (old_meta, old_quota) = util::decode_typed::<ResourceQuota>(old, &SCHEMA, KIND, "v1")?;
    let mut errors = validate_object_meta_update(&new_meta, &old_meta, &Path::new("metadata"));
    errors.extend(validate_spec(&new_quota.spec));
    let new_scopes: BTreeSet<&String> = new_quota.spec.scopes.iter().collect();
    let old_scopes: BTreeSet<&String> = old_quota.spec.scopes.iter().collect();
    if new_scopes != old_scopes {
        errors.push(Error::invalid(
            &Path::new("spec").child("scopes"),
            Value::from(new_quota.spec.scopes.clone()),
            FIELD_IMMUTABLE,
        ));
    }
    Ok(errors)
}

/// Validates an update through the `status` subresource.
pub fn validate_status_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let (new_meta, new_quota) = util::decode_typed::<ResourceQuota>(new, &SCHEMA, KIND, "v1")?;
    let (old_meta, _) = util::decode_typed::<ResourceQuota>(old, &SCHEMA, KIND, "v1")?;
    let mut errors = validate_object_meta_update(&new_meta, &old_meta, &Path::new("metadata"));
    if new_meta.resource_version.is_empty() {
        errors.push(Error::required(&Path::new("resourceVersion"), ""));
    }
    errors.extend(validate_status(&new_quota.status));
    Ok(errors)
}

/// Core resources whose object counts have plain quota names as well (upstream's legacy
/// aliases: `configmaps` counts what `count/configmaps` counts).
pub const LEGACY_OBJECT_COUNT_NAMES: &[&str] = &[
    "configmaps",
    "resourcequotas",
    "replicationcontrollers",
    "secrets",
];

/// The resource (group, plural) whose objects the quota resource name `name` counts, if it is
/// an object-count name: `count/<resource>[.<group>]`, or a legacy core name such as
/// `configmaps`.
pub fn counted_resource(name: &str) -> Option<(String, String)> {
    if let Some(rest) = name.strip_prefix("count/") {
        let (resource, group) = rest.split_once('.').unwrap_or((rest, ""));
        return (!resource.is_empty()).then(|| (group.to_owned(), resource.to_owned()));
    }
    LEGACY_OBJECT_COUNT_NAMES
        .contains(&name)
        .then(|| (String::new(), name.to_owned()))
}

/// The quota resource names a new object of `resource` in `group` counts against:
/// `count/<resource>[.<group>]`, and its legacy name when it has one (upstream's object-count
/// evaluator).
pub fn object_count_names(group: &str, resource: &str) -> Vec<String> {
    let mut names = vec![if group.is_empty() {
        format!("count/{resource}")
    } else {
        format!("count/{resource}.{group}")
    }];
    if group.is_empty() && LEGACY_OBJECT_COUNT_NAMES.contains(&resource) {
        names.push(resource.to_owned());
    }
    names
}

/// Whether the quota `object` has scopes (`spec.scopes` or `spec.scopeSelector`). Every scope
/// is about pods, so a scoped quota never matches the objects a generic control plane counts
/// (upstream's object-count evaluator matches no scope).
pub fn is_scoped(object: &Value) -> bool {
    let spec = &object["spec"];
    spec["scopes"].as_array().is_some_and(|s| !s.is_empty())
        || spec["scopeSelector"]["matchExpressions"]
            .as_array()
            .is_some_and(|m| !m.is_empty())
}
/// Field-selector labels: only the metadata ones.
pub const FIELD_SELECTORS: &[&str] = &["metadata.name", "metadata.namespace"];

/// Field-selector values.
pub fn field_values(object: &Value) -> BTreeMap<&'static str, String> {
    util::meta_fields(object, true)
}

/// `NAME AGE REQUEST LIMIT`.
pub const COLUMNS: &[ColumnDefinition] = &[
    table::NAME,
    table::AGE,
    table::column(
        "Request",
        "Request represents a minimum amount of cpu/memory that a container may consume.",
        0,
    ),
    table::column(
        "Limit",
        "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
        0,
    ),
];

/// The cells: name, age, then `resource: used/hard` for each resource in `status.hard` (sorted),
/// `limits.*` resources in the Limit cell and all others in the Request cell.
pub fn row(object: &Value, now: i64) -> Vec<Value> {
    let hard = object
        .get("status")
        .and_then(|s| s.get("hard"))
        .and_then(Value::as_object);
    let used = object.get("status").and_then(|s| s.get("used"));
    let show = |v: Option<&Value>| -> String {
        let text = match v {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => "0".to_owned(),
        };
        Quantity::parse(text.trim()).map_or(text, |q| q.to_string())
    };
    let mut request = Vec::new();
    let mut limit = Vec::new();
    let mut names: Vec<&String> = hard.map(|h| h.keys().collect()).unwrap_or_default();
    names.sort();
    for name in names {
        let cell = format!(
            "{name}: {}/{}",
            show(used.and_then(|u| u.get(name))),
            show(hard.and_then(|h| h.get(name)))
        );
        let mut pieces = name.split('.');
        let is_limit = pieces.next() == Some("limits") && pieces.next().is_some();
        if is_limit {
            limit.push(cell);
        } else {
            request.push(cell);
        }
    }
    vec![
        util::name(object),
        util::age(object, now),
        Value::from(request.join(", ")),
        Value::from(limit.join(", ")),
    ]
}

/// The list and patch semantics of the ResourceQuota's own types.
pub static EXTENSIONS: &[crate::schema::Extensions] = &[
    crate::schema::atomic_list("io.k8s.api.core.v1.ResourceQuotaSpec", "scopes"),
    crate::schema::atomic_struct("io.k8s.api.core.v1.ScopeSelector"),
    crate::schema::atomic_list("io.k8s.api.core.v1.ScopeSelector", "matchExpressions"),
    crate::schema::atomic_list(
        "io.k8s.api.core.v1.ScopedResourceSelectorRequirement",
        "values",
    ),
];

/// This resource in the catalog: everything the server needs to serve it.
pub const INFO: crate::resource::ResourceInfo = crate::resource::ResourceInfo {
    group: "",
    version: "v1",
    kind: "ResourceQuota",
    list_kind: "ResourceQuotaList",
    resource: "resourcequotas",
    singular: "resourcequota",
    short_names: &["quota"],
    namespaced: true,
    create_on_update: false,
    verbs: crate::resource::ALL_VERBS,
    subresources: &[crate::resource::Subresource {
        name: "status",
        kind: "ResourceQuota",
        verbs: crate::resource::STATUS_VERBS,
        rules: Some(crate::resource::SubresourceRules {
            prepare_for_update: prepare_for_status_update,
            validate_update: validate_status_update,
        }),
        body: None,
    }],
    categories: &[],
    storage_prefix: "resourcequotas",
    storage_api_version: "v1",
    schema: &SCHEMA,
    protobuf: true,
    feature_gate: None,
    extensions: EXTENSIONS,
    openapi_schema: crate::schema::schema_of::<k8s_openapi::api::core::v1::ResourceQuota>,
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

    #[test]
    fn object_count_names_are_read_as_upstream() {
        let gr = |g: &str, r: &str| Some((g.to_owned(), r.to_owned()));
        assert_eq!(counted_resource("count/configmaps"), gr("", "configmaps"));
        assert_eq!(counted_resource("configmaps"), gr("", "configmaps"));
        assert_eq!(counted_resource("secrets"), gr("", "secrets"));
        assert_eq!(
            counted_resource("count/leases.coordination.k8s.io"),
            gr("coordination.k8s.io", "leases")
        );
        assert_eq!(
            counted_resource("count/widgets.example.com"),
            gr("example.com", "widgets")
        );
        // No legacy name for service accounts; compute resources are not object counts.
        assert_eq!(counted_resource("serviceaccounts"), None);
        assert_eq!(counted_resource("cpu"), None);
        assert_eq!(counted_resource("pods"), None);
        assert_eq!(counted_resource("count/"), None);
        assert_eq!(
            object_count_names("", "configmaps"),
            ["count/configmaps", "configmaps"]
        );
        assert_eq!(
            object_count_names("example.com", "widgets"),
            ["count/widgets.example.com"]
        );
        assert_eq!(
            object_count_names("", "serviceaccounts"),
            ["count/serviceaccounts"]
        );
        for name in LEGACY_OBJECT_COUNT_NAMES {
            assert!(object_count_names("", name).contains(&(*name).to_owned()));
        }
        assert!(is_scoped(
            &serde_json::json!({"spec": {"scopes": ["Terminating"]}})
        ));
        assert!(is_scoped(
            &serde_json::json!({"spec": {"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "Exists"}]}}})
        ));
        assert!(!is_scoped(
            &serde_json::json!({"spec": {"hard": {"configmaps": "1"}}})
        ));
    }
    use super::*;
    use serde_json::json;

    fn summary(errors: &ErrorList) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    fn quota(spec: Value) -> Value {
        json!({"metadata": {"name": "compute", "namespace": "team"}, "spec": spec})
    }

    #[test]
    fn create_rules() {
        let cases: Vec<(&str, Value, Vec<&str>)> = vec![
            (
                "valid",
                quota(
                    json!({"hard": {"pods": "10", "requests.cpu": "500m", "limits.memory": "1Gi", "count/deployments.apps": "5", "example.com/gpu": 2}}),
                ),
                vec![],
            ),
            (
                "negative",
                quota(json!({"hard": {"cpu": "-1"}})),
                vec!["spec.hard[cpu]: Invalid value: \"-1\": must be greater than or equal to 0"],
            ),
            (
                "fractional pods",
                quota(json!({"hard": {"pods": "1.5"}})),
                vec!["spec.hard[pods]: Invalid value: \"1500m\": must be an integer"],
            ),
            (
                "fractional extended",
                quota(json!({"hard": {"example.com/gpu": "500m"}})),
                vec!["spec.hard[example.com/gpu]: Invalid value: \"500m\": must be an integer"],
            ),
            (
                "unknown resource",
                quota(json!({"hard": {"widgets": "1"}})),
                vec![
                    "spec.hard[widgets]: Invalid value: \"widgets\": must be a standard resource type or fully qualified",
                ],
            ),
            (
                "standard but not for quota",
                quota(json!({"hard": {"storage": "1Gi"}})),
                vec![
                    "spec.hard[storage]: Invalid value: \"storage\": must be a standard resource for quota",
                ],
            ),
            (
                "hugepages",
                quota(json!({"hard": {"requests.hugepages-2Mi": "4Mi"}})),
                vec![],
            ),
            (
                "bad qualified name",
                quota(json!({"hard": {"Example.com/x": "1"}})),
                vec![
                    "spec.hard[Example.com/x]: Invalid value: \"Example.com/x\": prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                ],
            ),
            (
                "scopes",
                quota(
                    json!({"hard": {"pods": "5", "cpu": "1"}, "scopes": ["NotTerminating", "NotBestEffort"]}),
                ),
                vec![],
            ),
            (
                "unknown scope",
                quota(json!({"hard": {"pods": "5"}, "scopes": ["Sometimes"]})),
                vec!["spec.scopes: Invalid value: [\"Sometimes\"]: unsupported scope"],
            ),
            (
                "scope not for resource",
                quota(json!({"hard": {"configmaps": "5"}, "scopes": ["BestEffort"]})),
                vec![
                    "spec.scopes: Invalid value: [\"BestEffort\"]: unsupported scope applied to resource",
                ],
            ),
            (
                "best effort with cpu",
                quota(json!({"hard": {"cpu": "1"}, "scopes": ["BestEffort"]})),
                vec![
                    "spec.scopes: Invalid value: [\"BestEffort\"]: unsupported scope applied to resource",
                ],
            ),
            (
                "conflicting scopes",
                quota(json!({"hard": {"pods": "5"}, "scopes": ["Terminating", "NotTerminating"]})),
                vec![
                    "spec.scopes: Invalid value: [\"Terminating\",\"NotTerminating\"]: conflicting scopes",
                ],
            ),
            (
                "selector",
                quota(
                    json!({"hard": {"pods": "5"}, "scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}}),
                ),
                vec![],
            ),
            (
                "selector without values",
                quota(
                    json!({"hard": {"pods": "5"}, "scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In"}]}}),
                ),
                vec![
                    "spec.scopeSelector.matchExpressions.values: Required value: must be at least one value when `operator` is 'In' or 'NotIn' for scope selector",
                ],
            ),
            (
                "selector operator",
                quota(
                    json!({"hard": {"pods": "5"}, "scopeSelector": {"matchExpressions": [{"scopeName": "Terminating", "operator": "In", "values": ["x"]}]}}),
                ),
                vec![
                    "spec.scopeSelector.matchExpressions.operator: Invalid value: \"In\": must be 'Exist' when scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity",
                ],
            ),
            (
                "selector bad operator",
                quota(
                    json!({"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "Maybe"}]}}),
                ),
                vec![
                    "spec.scopeSelector.matchExpressions.operator: Invalid value: \"Maybe\": not a valid selector operator",
                ],
            ),
            (
                "selector exists with values",
                quota(
                    json!({"scopeSelector": {"matchExpressions": [{"scopeName": "BestEffort", "operator": "Exists", "values": ["x"]}]}}),
                ),
                vec![
                    "spec.scopeSelector.matchExpressions.values: Invalid value: [\"x\"]: must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector",
                ],
            ),
            (
                "status checked too",
                json!({"metadata": {"name": "q", "namespace": "team"}, "status": {"used": {"pods": "-1"}}}),
                vec![
                    "status.used[pods]: Invalid value: \"-1\": must be greater than or equal to 0",
                ],
            ),
        ];
        for (name, object, want) in cases {
            assert_eq!(summary(&validate(&object).unwrap()), want, "{name}");
        }
        let err = validate(&quota(json!({"hard": {"cpu": "lots"}}))).unwrap_err();
        assert_eq!(err.code, 400);
        assert_eq!(
            err.message,
            "ResourceQuota in version \"v1\" cannot be handled as a ResourceQuota: field ResourceQuota.spec.hard[cpu]: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        );
    }

    #[test]
    fn decoding_canonicalizes_quantities() {
        let decoded = decode(&quota(
            json!({"hard": {"pods": 10, "memory": "1024Mi", "cpu": "1.5", "configmaps": "1000"}}),
        ))
        .unwrap();
        assert_eq!(
            decoded.object["spec"]["hard"],
            json!({"pods": "10", "memory": "1Gi", "cpu": "1500m", "configmaps": "1k"})
        );
    }

    #[test]
    fn update_and_status_rules() {
        let old = quota(json!({"hard": {"pods": "5"}, "scopes": ["NotTerminating"]}));
        let more = quota(json!({"hard": {"pods": "10"}, "scopes": ["NotTerminating"]}));
        assert!(validate_update(&more, &old).unwrap().is_empty());
        let rescoped = quota(json!({"hard": {"pods": "10"}, "scopes": ["Terminating"]}));
        assert_eq!(
            summary(&validate_update(&rescoped, &old).unwrap()),
            ["spec.scopes: Invalid value: [\"Terminating\"]: field is immutable"]
        );
        let mut status = json!({"metadata": {"name": "compute", "namespace": "team", "resourceVersion": "7"}, "status": {"hard": {"pods": "5"}, "used": {"pods": "2"}}});
        assert!(validate_status_update(&status, &old).unwrap().is_empty());
        status["metadata"]["resourceVersion"] = json!(null);
        assert!(
            summary(&validate_status_update(&status, &old).unwrap())
                .contains(&"resourceVersion: Required value".to_owned())
        );
        let mut created = quota(json!({"hard": {"pods": "5"}}));
        created["status"] = json!({"used": {"pods": "9"}});
        prepare_for_create(&mut created, &crate::resource::Context::gates_off());
        assert!(created.get("status").is_none());
        let mut spec_write = more.clone();
        let stored = json!({"metadata": {}, "spec": {}, "status": {"used": {"pods": "1"}}});
        prepare_for_update(
            &mut spec_write,
            &stored,
            &crate::resource::Context::gates_off(),
        );
        assert_eq!(spec_write["status"], stored["status"]);
        let mut status_write = json!({"spec": {"hard": {"pods": "99"}}, "status": {}});
        prepare_for_status_update(
            &mut status_write,
            &old,
            &crate::resource::Context::gates_off(),
        );
        assert_eq!(status_write["spec"], old["spec"]);
    }

    #[test]
    fn table_rows() {
        let object = json!({"metadata": {"name": "compute", "namespace": "team", "creationTimestamp": "1970-01-01T00:00:00Z"},
            "status": {"hard": {"pods": "10", "requests.cpu": "1", "limits.memory": "2Gi", "limits.cpu": "2000m"}, "used": {"pods": "3", "limits.cpu": "500m"}}});
        assert_eq!(
            row(&object, 7200),
            vec![
                json!("compute"),
                json!("120m"),
                json!("pods: 3/10, requests.cpu: 0/1"),
                json!("limits.cpu: 500m/2, limits.memory: 0/2Gi")
            ]
        );
        let names: Vec<&str> = COLUMNS.iter().map(|c| c.name).collect();
        assert_eq!(names, ["Name", "Age", "Request", "Limit"]);
        assert_eq!(
            row(&json!({"metadata": {"name": "q"}}), 0)[2..],
            [json!(""), json!("")]
        );
        assert_eq!(field_values(&object).len(), 2);
    }
}
