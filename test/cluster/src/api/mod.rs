//! The kinds this cluster serves besides genplane's generic ones, each a catalog entry
//! ([`ResourceInfo`](genplane_api::catalog::ResourceInfo)) in a module of its own: its shape
//! (the k8s-openapi type, read through [`shape`]; its protobuf message in [`proto`]), its defaults, its strategy (what a write
//! keeps of the stored object), its validation (upstream's, for the fields the tests use, with
//! upstream's field paths and words), its field selectors and its `kubectl get` columns.
//!
//! - [`node`]: core/v1 `nodes` and `nodes/status`;
//! - [`pod`]: core/v1 `pods`, `pods/status` and `pods/binding` (answered by
//!   [`binder::Binder`]), with graceful deletion;
//! - [`service`]: core/v1 `services` and `services/status`, with ClusterIPs and node ports
//!   from [`allocator::ServiceAllocator`];
//! - [`endpoints`]: core/v1 `endpoints`; [`endpointslice`]: discovery.k8s.io/v1
//!   `endpointslices`;
//! - [`deployment`] and [`replicaset`]: apps/v1 `deployments` and `replicasets`, each with
//!   `status` and `scale` (an autoscaling/v1 Scale, [`scale`]); what they share is in
//!   [`workload`].
//!
//! Every kind speaks JSON, YAML and Kubernetes protobuf (what kubectl sends for built-in
//! kinds): [`shape`] decodes JSON, [`proto`] holds the protobuf messages.

pub mod allocator;
pub mod binder;
pub mod binding;
pub mod deployment;
pub mod endpoints;
pub mod endpointslice;
pub mod node;
pub mod pod;
pub mod proto;
#[cfg(test)]
mod proto_tests;
pub mod replicaset;
pub mod scale;
pub mod service;
pub mod shape;
pub mod workload;

use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::meta::{validate_object_meta, validate_object_meta_update};
use genplane_apimachinery::validation::NameValidator;
use genplane_apimachinery::validation::field::{ErrorList, Path};
use genplane_registry::object::object_meta;
use serde_json::{Value, json};

/// The metadata problems of a new object.
pub(crate) fn meta_errors(
    object: &Value,
    namespaced: bool,
    name: NameValidator,
) -> Result<ErrorList, ApiError> {
    Ok(validate_object_meta(
        &object_meta(object)?,
        namespaced,
        name,
        &Path::new("metadata"),
    ))
}

/// The metadata problems of an update.
pub(crate) fn meta_update_errors(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    Ok(validate_object_meta_update(
        &object_meta(new)?,
        &object_meta(old)?,
        &Path::new("metadata"),
    ))
}

/// A write through `status`: the stored object with the new status (and the write's
/// resourceVersion and managed fields), as upstream's status strategies reset everything else.
pub(crate) fn status_write(new: &mut Value, old: &Value) {
    let status = new.get("status").cloned();
    let resource_version = new.pointer("/metadata/resourceVersion").cloned();
    let managed_fields = new.pointer("/metadata/managedFields").cloned();
    *new = old.clone();
    match status {
        Some(status) => new["status"] = status,
        None => {
            if let Some(fields) = new.as_object_mut() {
                fields.remove("status");
            }
        }
    }
    if let Some(meta) = new.get_mut("metadata").and_then(Value::as_object_mut) {
        for (key, value) in [
            ("resourceVersion", resource_version),
            ("managedFields", managed_fields),
        ] {
            match value {
                Some(value) => meta.insert(key.into(), value),
                None => meta.remove(key),
            };
        }
    }
}

/// The object's `metadata.generation`.
pub(crate) fn generation(object: &Value) -> i64 {
    object
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// Sets `metadata.generation`.
pub(crate) fn set_generation(object: &mut Value, generation: i64) {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("generation".into(), json!(generation));
    }
}

/// `metadata.generation` on update: one more when `spec` changed.
pub(crate) fn next_generation(new: &mut Value, old: &Value) {
    let next = if new.get("spec") == old.get("spec") {
        generation(old)
    } else {
        generation(old) + 1
    };
    set_generation(new, next);
}

/// The object at `pointer` as a string, or `""`.
pub(crate) fn str_at<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The objects of the list at `pointer` (none when absent).
pub(crate) fn items<'a>(object: &'a Value, pointer: &str) -> &'a [Value] {
    object
        .pointer(pointer)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}
