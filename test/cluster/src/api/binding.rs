//! core/v1 `Binding`, the body of `pods/<name>/binding`: how the scheduler assigns a pod to a
//! node. Never stored: a create is decoded and validated as a Binding, then answered by
//! [`super::binder::Binder`].

use genplane_api::catalog::{Hooks, ResourceInfo};
use genplane_apimachinery::codec::decode::Decoded;
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use k8s_openapi::api::core::v1::Binding;
use serde_json::Value;

use super::{shape, str_at};

fn decode(object: &Value) -> Result<Decoded, ApiError> {
    shape::decode::<Binding>(object, "Binding", "v1")
}

fn validate(object: &Value) -> Result<ErrorList, ApiError> {
    let mut errors = ErrorList::new();
    let target = Path::new("target");
    if str_at(object, "/target/name").is_empty() {
        errors.push(Error::required(&target.child("name"), ""));
    }
    let kind = str_at(object, "/target/kind");
    if !kind.is_empty() && kind != "Node" {
        errors.push(Error::not_supported(&target.child("kind"), kind, &["Node"]));
    }
    Ok(errors)
}

/// The Binding kind (created through `pods/<name>/binding` only).
pub static INFO: ResourceInfo = ResourceInfo {
    group: "",
    version: "v1",
    kind: "Binding",
    list_kind: "BindingList",
    resource: "bindings",
    singular: "binding",
    short_names: &[],
    namespaced: true,
    create_on_update: false,
    verbs: &["create"],
    subresources: &[],
    categories: &[],
    storage_prefix: "",
    storage_api_version: "v1",
    schema: &super::proto::BINDING,
    protobuf: true,
    feature_gate: None,
    extensions: &[],
    openapi_schema: genplane_api::schema::schema_of::<Binding>,
    hooks: Hooks::create_only(decode, validate),
};
