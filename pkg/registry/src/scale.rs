//! The `scale` subresource of custom resources, as upstream's apiextensions-apiserver serves
//! it: clients read and write an `autoscaling/v1` Scale, the store keeps the custom resource.
//!
//! [`CustomScaleStrategy`] is the one place where a Scale is made of an object and applied to
//! it. Its [`Strategy::view`] turns a custom resource into its Scale (`spec.replicas` from the
//! CRD's `specReplicasPath`, `status.replicas` from `statusReplicasPath`, 0 when absent,
//! `status.selector` from `labelSelectorPath`); an update's body is a Scale, which
//! [`Strategy::prepare_for_update`] turns into the stored object with the Scale's replicas at
//! `specReplicasPath`, after which the custom resource's own rules run (generation, schema
//! validation, non-negative replicas). Field ownership is recorded on the custom resource, so
//! the writer owns the field at `specReplicasPath`, through the subresource `scale`, as
//! upstream records it.

use std::collections::BTreeMap;

use genplane_apimachinery::errors::{ApiError, Status};
use genplane_apimachinery::schema::{GroupResource, GroupVersionKind};
use genplane_apimachinery::validation::field::ErrorList;
use serde_json::{Map, Value, json};

use crate::custom::CustomResourceStrategy;
use crate::object::{meta_str, metadata_mut, set_meta_str};
use crate::scale_paths::{ScalePaths, go_type, integer_at, lookup, set_at};
use crate::strategy::Strategy;

/// The replicas a patch sees when the object has none yet: a patch must set them.
const UNSET_REPLICAS: i64 = i32::MIN as i64;

/// The strategy of a custom resource's `scale` subresource (see the module docs).
#[derive(Clone, Debug)]
pub struct CustomScaleStrategy {
    base: CustomResourceStrategy,
    paths: ScalePaths,
}

impl CustomScaleStrategy {
    /// The scale strategy of `base`'s resource, whose Scale lives at `paths`.
    pub fn new(base: CustomResourceStrategy, paths: ScalePaths) -> Self {
        Self { base, paths }
    }

    /// The Scale of a served custom resource; `unset` is the spec replicas when the object
    /// has none (`None`: that is an error, as a read answers it).
    fn scale(&self, object: &Value, unset: Option<i64>) -> Result<Value, ApiError> {
        let internal = |message: String| ApiError::from(Status::internal_error(message));
        let spec_replicas = match integer_at(object, &self.paths.spec_replicas).map_err(internal)? {
            Some(n) => n,
            None => unset.ok_or_else(|| {
                internal(format!(
                    "the spec replicas field {:?} does not exist",
                    self.paths.spec_replicas
                ))
            })?,
        };
        let status_replicas = integer_at(object, &self.paths.status_replicas)
            .map_err(internal)?
            .unwrap_or(0);
        let selector = match &self.paths.label_selector {
            None => String::new(),
            Some(path) => match lookup(object, path).map_err(internal)? {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(s)) => s.clone(),
                Some(other) => {
                    return Err(internal(format!(
                        "{path} accessor error: {other} is of the type {}, expected string",
                        go_type(other)
                    )));
                }
            },
        };
        let mut metadata = Map::new();
        metadata.insert("name".into(), json!(meta_str(object, "name")));
        let namespace = meta_str(object, "namespace");
        if !namespace.is_empty() {
            metadata.insert("namespace".into(), json!(namespace));
        }
        for field in ["uid", "resourceVersion"] {
            let value = meta_str(object, field);
            if !value.is_empty() {
                metadata.insert(field.into(), json!(value));
            }
        }
        metadata.insert(
            "creationTimestamp".into(),
            object
                .pointer("/metadata/creationTimestamp")
                .cloned()
                .unwrap_or(Value::Null),
        );
        // Go's omitempty: zero spec replicas and an empty selector are left out; status
        // replicas are always written.
        let mut spec = Map::new();
        if spec_replicas != 0 {
            spec.insert("replicas".into(), json!(spec_replicas));
        }
        let mut scale_status = Map::new();
        scale_status.insert("replicas".into(), json!(status_replicas));
        if !selector.is_empty() {
            scale_status.insert("selector".into(), json!(selector));
        }
        Ok(json!({
            "kind": genplane_api::autoscaling::KIND,
            "apiVersion": genplane_api::autoscaling::API_VERSION,
            "metadata": metadata,
            "spec": spec,
            "status": scale_status,
        }))
    }
}

impl Strategy for CustomScaleStrategy {
    fn group_resource(&self) -> GroupResource {
        self.base.group_resource()
    }

    fn kind(&self) -> GroupVersionKind {
        self.base.kind()
    }

    fn namespaced(&self) -> bool {
        self.base.namespaced()
    }

    fn key_prefix(&self) -> String {
        self.base.key_prefix()
    }

    /// The body is a Scale: type-checked as one; replicas left out are 0 (Go's zero value), a
    /// patch that left replicas unset where the object has none is refused.
    fn decode(&self, object: Value) -> Result<Value, ApiError> {
        let decoded = genplane_api::autoscaling::decode(&object)?.object;
        if decoded.pointer("/spec/replicas").and_then(Value::as_i64) == Some(UNSET_REPLICAS) {
            return Err(Status::bad_request(format!(
                "the spec replicas field {:?} cannot be empty",
                self.paths.spec_replicas
            ))
            .into());
        }
        Ok(decoded)
    }

    fn stored_form(&self, object: Value) -> Result<Value, ApiError> {
        self.base.stored_form(object)
    }

    fn served_form(&self, object: Value) -> Result<Value, ApiError> {
        self.base.served_form(object)
    }

    fn conversion(&self) -> Option<&crate::conversion::Conversion> {
        self.base.conversion()
    }

    fn stores_served_form(&self) -> bool {
        self.base.stores_served_form()
    }

    fn view(&self, object: Value) -> Result<Value, ApiError> {
        self.scale(&object, None)
    }

    fn patch_view(&self, object: Value) -> Result<Value, ApiError> {
        self.scale(&object, Some(UNSET_REPLICAS))
    }

    // A Scale has no defaults; the object's were filled in when it was read.

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        let replicas = new
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let resource_version = meta_str(new, "resourceVersion").to_owned();
        let mut object = old.clone();
        set_at(&mut object, &self.paths.spec_replicas, json!(replicas));
        metadata_mut(&mut object).remove("resourceVersion");
        if !resource_version.is_empty() {
            set_meta_str(&mut object, "resourceVersion", &resource_version);
        }
        *new = object;
        self.base.prepare_for_update(new, old);
    }

    fn validate(&self, object: &Value) -> Result<ErrorList, ApiError> {
        self.base.validate(object)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
        self.base.validate_update(new, old)
    }

    fn canonicalize(&self, object: &mut Value) {
        self.base.canonicalize(object);
    }

    fn selectable_fields(&self) -> Vec<&str> {
        self.base.selectable_fields()
    }

    fn field_values(&self, object: &Value) -> BTreeMap<String, String> {
        self.base.field_values(object)
    }
}
