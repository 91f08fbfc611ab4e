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
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use serde_json::{Map, Value, json};

use crate::custom::CustomResourceStrategy;
use crate::object::{meta_str, metadata_mut, set_meta_str};
use crate::strategy::Strategy;

/// The replicas a patch sees when the object has none yet: a patch must set them.
const UNSET_REPLICAS: i64 = i32::MIN as i64;

/// Where a custom resource keeps what its Scale shows: a CRD version's
/// `subresources.scale`, each path as the CRD writes it (`.spec.replicas`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScalePaths {
    /// `specReplicasPath`.
    pub spec_replicas: String,
    /// `statusReplicasPath`.
    pub status_replicas: String,
    /// `labelSelectorPath`, if set.
    pub label_selector: Option<String>,
}

impl ScalePaths {
    /// The paths of a CRD version's `subresources.scale`, if it has one.
    pub fn of_version(version: &Value) -> Option<Self> {
        let scale = version.pointer("/subresources/scale")?;
        let text = |key: &str| scale.get(key).and_then(Value::as_str).unwrap_or("");
        Some(Self {
            spec_replicas: text("specReplicasPath").to_owned(),
            status_replicas: text("statusReplicasPath").to_owned(),
            label_selector: Some(text("labelSelectorPath"))
                .filter(|p| !p.is_empty())
                .map(str::to_owned),
        })
    }
}

/// The segments of a simple JSON path (`.spec.replicas` -> `spec`, `replicas`).
fn segments(path: &str) -> Vec<&str> {
    path.trim_start_matches('.').split('.').collect()
}

/// The JSON type of a value, in Go's words, for accessor errors.
fn go_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// The value at `path` (`None` when it or a parent is absent); an error when a parent is not
/// an object, as upstream's accessors report it.
fn lookup<'a>(object: &'a Value, path: &str) -> Result<Option<&'a Value>, String> {
    let mut at = object;
    let parts = segments(path);
    for (index, part) in parts.iter().enumerate() {
        let Value::Object(map) = at else {
            let parent = format!(".{}", parts[..index].join("."));
            return Err(format!(
                "{parent} accessor error: {at} is of the type {}, expected map[string]interface{{}}",
                go_type(at)
            ));
        };
        match map.get(*part) {
            Some(next) => at = next,
            None => return Ok(None),
        }
    }
    Ok(Some(at))
}

/// The integer at `path`, if present; an error when something else is there.
pub(crate) fn integer_at(object: &Value, path: &str) -> Result<Option<i64>, String> {
    match lookup(object, path)? {
        None => Ok(None),
        Some(value) => value.as_i64().map(Some).ok_or_else(|| {
            format!(
                "{path} accessor error: {value} is of the type {}, expected int64",
                go_type(value)
            )
        }),
    }
}

/// Sets `value` at `path`, making the objects on the way (a non-object on the way is replaced).
fn set_at(object: &mut Value, path: &str, value: Value) {
    let mut at = object;
    let parts = segments(path);
    let Some((last, parents)) = parts.split_last() else {
        return;
    };
    for part in parents {
        if !at.is_object() {
            *at = Value::Object(Map::new());
        }
        at = at
            .as_object_mut()
            .expect("invariant: made an object above")
            .entry((*part).to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    if !at.is_object() {
        *at = Value::Object(Map::new());
    }
    at.as_object_mut()
        .expect("invariant: made an object above")
        .insert((*last).to_owned(), value);
}

/// The replicas at `path`, when present, are a non-negative int32.
fn validate_replicas(object: &Value, path: &str, errors: &mut ErrorList) {
    let field = Path::new(path);
    match integer_at(object, path) {
        Err(message) => errors.push(Error::invalid(&field, 0, message)),
        Ok(Some(n)) if n < 0 => {
            errors.push(Error::invalid(
                &field,
                n,
                "should be a non-negative integer",
            ));
        }
        Ok(Some(n)) if n > i64::from(i32::MAX) => errors.push(Error::invalid(
            &field,
            n,
            format!("should be less than or equal to {}", i32::MAX),
        )),
        Ok(_) => {}
    }
}

/// Upstream's checks of a custom resource with the scale subresource, on every write: the
/// values at `specReplicasPath` and `statusReplicasPath`, when present, are non-negative
/// int32s, and the value at `labelSelectorPath`, when present, is a string.
pub(crate) fn validate_scale_paths(object: &Value, paths: &ScalePaths) -> ErrorList {
    let mut errors = ErrorList::new();
    validate_replicas(object, &paths.spec_replicas, &mut errors);
    validate_replicas(object, &paths.status_replicas, &mut errors);
    if let Some(path) = &paths.label_selector {
        let field = Path::new(path);
        match lookup(object, path) {
            Err(message) => errors.push(Error::invalid(&field, "", message)),
            Ok(None | Some(Value::Null | Value::String(_))) => {}
            Ok(Some(other)) => errors.push(Error::invalid(
                &field,
                "",
                format!(
                    "{path} accessor error: {other} is of the type {}, expected string",
                    go_type(other)
                ),
            )),
        }
    }
    errors
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(selector: Option<&str>) -> ScalePaths {
        ScalePaths {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: ".status.replicas".into(),
            label_selector: selector.map(str::to_owned),
        }
    }

    #[test]
    fn paths_are_read_from_a_crd_version() {
        let version = json!({"name": "v1", "subresources": {"scale": {
            "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector"}}});
        assert_eq!(
            ScalePaths::of_version(&version),
            Some(paths(Some(".status.selector")))
        );
        let no_selector = json!({"subresources": {"scale": {
            "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}}});
        assert_eq!(ScalePaths::of_version(&no_selector), Some(paths(None)));
        assert_eq!(
            ScalePaths::of_version(&json!({"subresources": {"status": {}}})),
            None
        );
    }

    #[test]
    fn integers_are_read_as_upstream_accessors_read_them() {
        let object = json!({"spec": {"replicas": 3, "ratio": 1.5, "name": "x"}, "status": 4});
        assert_eq!(integer_at(&object, ".spec.replicas"), Ok(Some(3)));
        assert_eq!(integer_at(&object, ".spec.missing"), Ok(None));
        assert_eq!(integer_at(&object, ".nothing.below"), Ok(None));
        assert_eq!(
            integer_at(&object, ".spec.ratio").unwrap_err(),
            ".spec.ratio accessor error: 1.5 is of the type float64, expected int64"
        );
        assert_eq!(
            integer_at(&object, ".status.replicas").unwrap_err(),
            ".status accessor error: 4 is of the type int64, expected map[string]interface{}"
        );
    }

    #[test]
    fn set_at_makes_the_objects_on_the_way() {
        let mut object = json!({"spec": {"image": "x"}});
        set_at(&mut object, ".spec.scaling.replicas", json!(2));
        assert_eq!(
            object,
            json!({"spec": {"image": "x", "scaling": {"replicas": 2}}})
        );
    }

    #[test]
    fn replicas_must_be_a_non_negative_int32() {
        let p = paths(Some(".status.selector"));
        assert!(validate_scale_paths(&json!({"spec": {"replicas": 0}}), &p).is_empty());
        assert!(validate_scale_paths(&json!({"spec": {}}), &p).is_empty());
        let messages = |object: Value| -> Vec<String> {
            validate_scale_paths(&object, &p)
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        assert_eq!(
            messages(json!({"spec": {"replicas": -1}})),
            [".spec.replicas: Invalid value: -1: should be a non-negative integer"]
        );
        assert_eq!(
            messages(json!({"spec": {"replicas": 2_147_483_648_i64}})),
            [
                ".spec.replicas: Invalid value: 2147483648: should be less than or equal to 2147483647"
            ]
        );
        assert_eq!(
            messages(json!({"status": {"replicas": -3, "selector": 7}})),
            [
                ".status.replicas: Invalid value: -3: should be a non-negative integer",
                ".status.selector: Invalid value: \"\": .status.selector accessor error: 7 is of the type int64, expected string",
            ]
        );
        assert!(
            validate_scale_paths(&json!({"status": {"replicas": 2, "selector": "app=x"}}), &p)
                .is_empty()
        );
    }
}
