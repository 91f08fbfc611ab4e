//! apps/v1 `ReplicaSet`: a number of pods from one template, kept by
//! [`crate::replicaset_controller`]; a Deployment's rollout steps are its ReplicaSets.
//!
//! - defaults: one replica and the pod template's defaults;
//! - strategy: the status is the controller's (`replicasets/status`), `metadata.generation`
//!   grows with each spec change; `replicasets/scale` reads and writes a Scale
//!   ([`super::scale`]);
//! - validation: the selector and template ([`super::workload`]), the selector immutable;
//! - `kubectl get replicasets`: `NAME DESIRED CURRENT READY AGE` and, wide, `CONTAINERS
//!   IMAGES SELECTOR`.

use genplane_api::catalog::{self, Hooks, ResourceInfo, Subresource};
use genplane_api::table::{self, ColumnDefinition};
use genplane_api::util;
use genplane_apimachinery::codec::decode::Decoded;
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::validation::field::ErrorList;
use k8s_openapi::api::apps::v1::ReplicaSet;
use serde_json::{Value, json};

use super::shape;
use super::workload::{self, count};

fn decode(object: &Value) -> Result<Decoded, ApiError> {
    shape::decode::<ReplicaSet>(object, "ReplicaSet", "v1")
}

/// The counts of a ReplicaSet's status.
const STATUS_COUNTS: &[&str] = &[
    "observedGeneration",
    "replicas",
    "fullyLabeledReplicas",
    "readyReplicas",
    "availableReplicas",
];

fn validate_status_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    workload::validate_status_update(new, old, STATUS_COUNTS)
}

const COLUMNS: &[ColumnDefinition] = &[
    table::NAME,
    table::column("Desired", "Replicas is the number of desired pods.", 0),
    table::column(
        "Current",
        "Replicas is the most recently observed number of replicas.",
        0,
    ),
    table::column(
        "Ready",
        "The number of ready replicas for this replica set.",
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
        "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this replica set.",
        1,
    ),
];

fn row(object: &Value, now: i64) -> Vec<Value> {
    let [containers, images, selector] = workload::wide_cells(object);
    vec![
        util::name(object),
        json!(workload::replicas(object).unwrap_or(0)),
        json!(count(object, "/status/replicas")),
        json!(count(object, "/status/readyReplicas")),
        util::age(object, now),
        containers,
        images,
        selector,
    ]
}

static SUBRESOURCES: [Subresource; 2] =
    super::scale::status_and_scale("ReplicaSet", validate_status_update);

/// `replicasets`, `replicasets/status` and `replicasets/scale`.
pub static INFO: ResourceInfo = ResourceInfo {
    group: "apps",
    version: "v1",
    kind: "ReplicaSet",
    list_kind: "ReplicaSetList",
    resource: "replicasets",
    singular: "replicaset",
    short_names: &["rs"],
    namespaced: true,
    create_on_update: false,
    verbs: catalog::ALL_VERBS,
    subresources: &SUBRESOURCES,
    categories: &["all"],
    storage_prefix: "replicasets",
    storage_api_version: "apps/v1",
    schema: &super::proto::REPLICA_SET,
    protobuf: true,
    feature_gate: None,
    extensions: &[],
    openapi_schema: genplane_api::schema::schema_of::<ReplicaSet>,
    hooks: Hooks {
        decode,
        default: workload::default,
        prepare_for_create: util::prepare_spec_create,
        prepare_for_update: util::prepare_spec_update,
        validate: workload::validate,
        validate_update: workload::validate_update,
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
