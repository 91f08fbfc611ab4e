//! apps/v1 `Deployment`: a pod template rolled out through ReplicaSets by
//! [`crate::deployment_controller`].
//!
//! - defaults (upstream's `SetDefaults_Deployment`): one replica, the `RollingUpdate`
//!   strategy with 25% `maxUnavailable` and `maxSurge`, `revisionHistoryLimit: 10`,
//!   `progressDeadlineSeconds: 600`, and the pod template's defaults;
//! - strategy: the status is the controller's (`deployments/status`); `metadata.generation`
//!   grows with each spec change, which `kubectl rollout status` compares with
//!   `status.observedGeneration`; `deployments/scale` reads and writes a Scale
//!   ([`super::scale`]);
//! - validation: the selector and template ([`super::workload`]), the strategy (type,
//!   `maxSurge` and `maxUnavailable` as numbers or percentages, not both 0),
//!   `progressDeadlineSeconds` above `minReadySeconds`, the selector immutable;
//! - `kubectl get deployments`: `NAME READY UP-TO-DATE AVAILABLE AGE` and, wide,
//!   `CONTAINERS IMAGES SELECTOR`.

use genplane_api::catalog::{self, Hooks, ResourceInfo, Subresource};
use genplane_api::table::{self, ColumnDefinition};
use genplane_api::util;
use genplane_apimachinery::codec::decode::Decoded;
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use k8s_openapi::api::apps::v1::Deployment;
use serde_json::{Map, Value, json};

use super::workload::{self, count};
use super::{shape, str_at};

/// The strategies of a rollout.
pub const STRATEGY_TYPES: &[&str] = &["Recreate", "RollingUpdate"];
/// The annotation of the revision a Deployment and its ReplicaSets are at.
pub const REVISION: &str = "deployment.kubernetes.io/revision";

fn decode(object: &Value) -> Result<Decoded, ApiError> {
    shape::decode::<Deployment>(object, "Deployment", "v1")
}

fn set_default(map: &mut Map<String, Value>, key: &str, value: Value) {
    map.entry(key).or_insert(value);
}

fn default(object: &mut Value) {
    workload::default(object);
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    set_default(spec, "revisionHistoryLimit", json!(10));
    set_default(spec, "progressDeadlineSeconds", json!(600));
    let strategy = spec.entry("strategy").or_insert_with(|| json!({}));
    if let Some(strategy) = strategy.as_object_mut() {
        set_default(strategy, "type", json!("RollingUpdate"));
        if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
            let rolling = strategy.entry("rollingUpdate").or_insert_with(|| json!({}));
            if let Some(rolling) = rolling.as_object_mut() {
                set_default(rolling, "maxUnavailable", json!("25%"));
                set_default(rolling, "maxSurge", json!("25%"));
            }
        }
    }
}

/// An int-or-percent of a rolling update (`maxSurge`, `maxUnavailable`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntOrPercent {
    /// A number of pods.
    Int(i64),
    /// A percentage of the desired replicas.
    Percent(i64),
}

impl IntOrPercent {
    /// Reads a value: a number, or a string of digits ending in `%`.
    pub fn read(value: &Value) -> Option<Self> {
        match value {
            Value::Number(n) => n.as_i64().map(Self::Int),
            Value::String(s) => {
                let digits = s.strip_suffix('%')?;
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                digits.parse().ok().map(Self::Percent)
            }
            _ => None,
        }
    }

    /// The number of pods this is of `total`, rounding a percentage up or down.
    pub fn scaled(self, total: i64, round_up: bool) -> i64 {
        match self {
            Self::Int(n) => n,
            Self::Percent(p) if round_up => (p * total + 99) / 100,
            Self::Percent(p) => p * total / 100,
        }
    }
}

/// Upstream's `ResolveFenceposts`: `maxSurge` (rounded up) and `maxUnavailable` (rounded
/// down) of `replicas`; both 0 makes `maxUnavailable` 1. Recreate: (0, 0) is not used.
pub fn fenceposts(deployment: &Value, replicas: i64) -> (i64, i64) {
    let read = |field: &str, fallback: &str| {
        deployment
            .pointer(&format!("/spec/strategy/rollingUpdate/{field}"))
            .and_then(IntOrPercent::read)
            .or_else(|| IntOrPercent::read(&json!(fallback)))
            .unwrap_or(IntOrPercent::Int(1))
    };
    let surge = read("maxSurge", "25%").scaled(replicas, true);
    let unavailable = read("maxUnavailable", "25%").scaled(replicas, false);
    if surge == 0 && unavailable == 0 {
        (0, 1)
    } else {
        (surge, unavailable)
    }
}

fn validate_int_or_percent(
    value: &Value,
    path: &Path,
    errors: &mut ErrorList,
) -> Option<IntOrPercent> {
    match IntOrPercent::read(value) {
        None => {
            errors.push(Error::invalid(
                path,
                value.clone(),
                "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
            ));
            None
        }
        Some(IntOrPercent::Int(n)) if n < 0 => {
            errors.push(Error::invalid(
                path,
                n,
                "must be greater than or equal to 0",
            ));
            None
        }
        read => read,
    }
}

fn validate_strategy(object: &Value, errors: &mut ErrorList) {
    let path = Path::new("spec").child("strategy");
    let kind = str_at(object, "/spec/strategy/type");
    if !STRATEGY_TYPES.contains(&kind) {
        errors.push(Error::not_supported(
            &path.child("type"),
            kind,
            STRATEGY_TYPES,
        ));
    }
    let rolling = object.pointer("/spec/strategy/rollingUpdate");
    if kind == "Recreate" && rolling.is_some_and(|r| !r.is_null()) {
        errors.push(Error::forbidden(
            &path.child("rollingUpdate"),
            "may not be specified when strategy `type` is 'Recreate'",
        ));
    }
    if kind != "RollingUpdate" {
        return;
    }
    let rolling_path = path.child("rollingUpdate");
    let at = |field: &str| rolling.and_then(|r| r.get(field)).cloned();
    let unavailable = at("maxUnavailable")
        .and_then(|v| validate_int_or_percent(&v, &rolling_path.child("maxUnavailable"), errors));
    let surge = at("maxSurge")
        .and_then(|v| validate_int_or_percent(&v, &rolling_path.child("maxSurge"), errors));
    if let Some(IntOrPercent::Percent(p)) = unavailable
        && p > 100
    {
        errors.push(Error::invalid(
            &rolling_path.child("maxUnavailable"),
            format!("{p}%"),
            "must not be greater than 100%",
        ));
    }
    let zero = |v: Option<IntOrPercent>| {
        matches!(v, Some(IntOrPercent::Int(0) | IntOrPercent::Percent(0)))
    };
    if zero(unavailable) && zero(surge) {
        errors.push(Error::invalid(
            &rolling_path.child("maxUnavailable"),
            at("maxUnavailable").unwrap_or(Value::Null),
            "may not be 0 when `maxSurge` is 0",
        ));
    }
}

/// What a Deployment's spec has beyond a ReplicaSet's: the strategy and the deadline.
fn validate_strategy_and_deadline(object: &Value, errors: &mut ErrorList) {
    validate_strategy(object, errors);
    let spec = Path::new("spec");
    workload::validate_non_negative(
        object,
        "spec",
        &["revisionHistoryLimit", "progressDeadlineSeconds"],
        errors,
    );
    let deadline = object
        .pointer("/spec/progressDeadlineSeconds")
        .and_then(Value::as_i64);
    if let Some(deadline) = deadline
        && deadline <= count(object, "/spec/minReadySeconds")
    {
        errors.push(Error::invalid(
            &spec.child("progressDeadlineSeconds"),
            deadline,
            "must be greater than minReadySeconds",
        ));
    }
}

fn validate(object: &Value) -> Result<ErrorList, ApiError> {
    let mut errors = workload::validate(object)?;
    validate_strategy_and_deadline(object, &mut errors);
    Ok(errors)
}

fn validate_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let mut errors = workload::validate_update(new, old)?;
    validate_strategy_and_deadline(new, &mut errors);
    Ok(errors)
}

/// The counts of a Deployment's status.
pub const STATUS_COUNTS: &[&str] = &[
    "observedGeneration",
    "replicas",
    "updatedReplicas",
    "readyReplicas",
    "availableReplicas",
    "unavailableReplicas",
];

fn validate_status_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    workload::validate_status_update(new, old, STATUS_COUNTS)
}

const COLUMNS: &[ColumnDefinition] = &[
    table::NAME,
    table::column("Ready", "Number of the pod with ready state", 0),
    table::column(
        "Up-to-date",
        "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
        0,
    ),
    table::column(
        "Available",
        "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
        0,
    ),
    table::AGE,
    table::column("Containers", "Names of each container in the template.", 1),
    table::column(
        "Images",
        "Images referenced by each container in the template.",
        1,
    ),
    table::column(
        "Selector",
        "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment.",
        1,
    ),
];

fn row(object: &Value, now: i64) -> Vec<Value> {
    let [containers, images, selector] = workload::wide_cells(object);
    vec![
        util::name(object),
        json!(format!(
            "{}/{}",
            count(object, "/status/readyReplicas"),
            workload::replicas(object).unwrap_or(0)
        )),
        json!(count(object, "/status/updatedReplicas")),
        json!(count(object, "/status/availableReplicas")),
        util::age(object, now),
        containers,
        images,
        selector,
    ]
}

static SUBRESOURCES: [Subresource; 2] =
    super::scale::status_and_scale("Deployment", validate_status_update);

/// `deployments`, `deployments/status` and `deployments/scale`.
pub static INFO: ResourceInfo = ResourceInfo {
    group: "apps",
    version: "v1",
    kind: "Deployment",
    list_kind: "DeploymentList",
    resource: "deployments",
    singular: "deployment",
    short_names: &["deploy"],
    namespaced: true,
    create_on_update: false,
    verbs: catalog::ALL_VERBS,
    subresources: &SUBRESOURCES,
    categories: &["all"],
    storage_prefix: "deployments",
    storage_api_version: "apps/v1",
    schema: &super::proto::DEPLOYMENT,
    protobuf: true,
    feature_gate: None,
    extensions: &[],
    openapi_schema: genplane_api::schema::schema_of::<Deployment>,
    hooks: Hooks {
        decode,
        default,
        prepare_for_create: util::prepare_spec_create,
        prepare_for_update: util::prepare_spec_update,
        validate,
        validate_update,
        to_storage: None,
        from_storage: None,
        field_selectors: &["metadata.name", "metadata.namespace"],
        field_values: |object| util::meta_fields(object, true),
        columns: COLUMNS,
        row,
        pending_finalization: catalog::nothing_pending,
        mark_deleting: catalog::no_default,
        grace_period: catalog::not_graceful,
    },
};

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn deployment(strategy: Value) -> Value {
        let mut object = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        if !strategy.is_null() {
            object["spec"]["strategy"] = strategy;
        }
        default(&mut object);
        object
    }

    fn messages(object: &Value) -> Vec<String> {
        validate(object)
            .unwrap()
            .iter()
            .map(|e| format!("{}: {}", e.field.as_str(), e.detail))
            .collect()
    }

    #[test]
    fn defaults_and_fenceposts_are_upstreams() {
        let object = deployment(Value::Null);
        assert_eq!(object["spec"]["replicas"], 1);
        assert_eq!(
            object["spec"]["strategy"]["rollingUpdate"]["maxSurge"],
            "25%"
        );
        assert_eq!(
            object["spec"]["template"]["spec"]["restartPolicy"],
            "Always"
        );
        assert!(messages(&object).is_empty(), "{:?}", messages(&object));
        assert_eq!(fenceposts(&object, 4), (1, 1));
        assert_eq!(fenceposts(&object, 3), (1, 0));
        assert_eq!(fenceposts(&object, 1), (1, 0));
        let zero = deployment(json!({"type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": "10%", "maxUnavailable": "10%"}}));
        assert_eq!(fenceposts(&zero, 3), (1, 0));
    }

    #[test]
    fn bad_specs_are_refused_with_upstreams_paths() {
        let both_zero = deployment(json!({"type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "0%"}}));
        assert_eq!(
            messages(&both_zero),
            ["spec.strategy.rollingUpdate.maxUnavailable: may not be 0 when `maxSurge` is 0"]
        );
        let mut mismatch = deployment(Value::Null);
        mismatch["spec"]["template"]["metadata"]["labels"]["app"] = json!("other");
        assert_eq!(
            messages(&mismatch),
            ["spec.template.metadata.labels: `selector` does not match template `labels`"]
        );
        let mut never = deployment(json!({"type": "Recreate", "rollingUpdate": {}}));
        never["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
        never["spec"]["replicas"] = json!(-1);
        assert_eq!(
            messages(&never),
            [
                "spec.replicas: must be greater than or equal to 0",
                "spec.template.spec.restartPolicy: supported values: \"Always\"",
                "spec.strategy.rollingUpdate: may not be specified when strategy `type` is 'Recreate'",
            ]
        );
    }
}
