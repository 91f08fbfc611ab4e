//! Custom resources: the strategy of one served version of a CustomResourceDefinition.
//!
//! What the CRD's schema does (pruning unknown fields, defaulting, validation with CEL rules) is
//! behind [`CustomSchema`], implemented where the schema is compiled; this module holds what
//! every custom resource shares, as upstream's `customResourceStrategy`: objects are stored in
//! the CRD's storage version and served in the version asked for (conversion `None`: only
//! `apiVersion` changes), `metadata.generation` starts at 1 and grows when anything but
//! metadata (and, with the status subresource, status) changes, the status subresource owns
//! `status`, and a CRD being deleted accepts no new objects.

use std::collections::BTreeMap;
use std::sync::Arc;

use genplane_apimachinery::errors::{ApiError, Status, StatusReason};
use genplane_apimachinery::meta::{validate_object_meta, validate_object_meta_update};
use genplane_apimachinery::schema::{GroupResource, GroupVersionKind};
use genplane_apimachinery::validation::field::{ErrorList, Path};
use genplane_apimachinery::validation::name_is_dns_subdomain;
use serde_json::Value;

use crate::conversion::{Conversion, Converter};
use crate::object::{metadata_mut, object_meta};
use crate::scale_paths::{ScalePaths, validate_scale_paths};
use crate::strategy::Strategy;

/// What a CRD version's schema does to the objects of that version.
pub trait CustomSchema: Send + Sync + std::fmt::Debug {
    /// Normalizes a written object: drops the fields the schema does not know and returns
    /// their paths (`spec.foo`); malformed metadata is a 400.
    fn prune(&self, object: &mut Value) -> Result<Vec<String>, ApiError>;
    /// Normalizes an object read from storage (unknown fields dropped, malformed metadata
    /// fields too) and fills in the schema's defaults.
    fn read(&self, object: &mut Value);
    /// Fills in the schema's defaults.
    fn default(&self, object: &mut Value);
    /// Every problem of `object` (an update when `old` is given): the schema's value
    /// validations and its CEL rules, with ratcheting of unchanged values on update.
    fn validate(&self, object: &Value, old: Option<&Value>) -> ErrorList;
}

/// The strategy of one served version of a custom resource.
#[derive(Clone, Debug)]
pub struct CustomResourceStrategy {
    group: String,
    resource: String,
    kind: String,
    version: String,
    storage_version: String,
    namespaced: bool,
    status: bool,
    terminating: bool,
    schema: Arc<dyn CustomSchema>,
    /// The storage version's schema, which stored objects are pruned to (the same as
    /// `schema` when this is the storage version).
    storage_schema: Arc<dyn CustomSchema>,
    conversion: Option<Conversion>,
    /// The selectable fields: (field selector name, e.g. `spec.color`, its path segments).
    selectable: Vec<(String, Vec<String>)>,
    /// The scale subresource's paths, if the version has it.
    scale: Option<ScalePaths>,
}

impl CustomResourceStrategy {
    /// The strategy of `kind` in `group`/`version` (resource `resource`), whose objects are
    /// stored as `storage_version`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        group: &str,
        resource: &str,
        kind: &str,
        version: &str,
        storage_version: &str,
        namespaced: bool,
        schema: Arc<dyn CustomSchema>,
    ) -> Self {
        Self {
            group: group.to_owned(),
            resource: resource.to_owned(),
            kind: kind.to_owned(),
            version: version.to_owned(),
            storage_version: storage_version.to_owned(),
            namespaced,
            status: false,
            terminating: false,
            storage_schema: schema.clone(),
            schema,
            conversion: None,
            selectable: Vec::new(),
            scale: None,
        }
    }

    /// With the scale subresource at `paths`: on every write (the status subresource's too),
    /// the replicas at its `specReplicasPath` and `statusReplicasPath` must be non-negative
    /// int32s and the value at its `labelSelectorPath` a string.
    pub fn with_scale(mut self, paths: Option<ScalePaths>) -> Self {
        self.scale = paths;
        self
    }

    /// With `schema` as the storage version's schema (when this version is not the storage
    /// version): an object converted to the storage version is pruned to it before it is
    /// stored, as upstream prunes it, so that fields only another version knows are not kept.
    pub fn with_storage_schema(mut self, schema: Arc<dyn CustomSchema>) -> Self {
        self.storage_schema = schema;
        self
    }

    /// With conversion by `converter` instead of conversion `None`.
    pub fn with_converter(mut self, converter: Option<Arc<dyn Converter>>) -> Self {
        self.conversion = converter.map(|converter| {
            Conversion::new(
                converter,
                self.api_version(&self.version),
                self.api_version(&self.storage_version),
            )
        });
        self
    }

    /// With the status subresource: writes to the object keep its status.
    pub fn with_status(mut self, status: bool) -> Self {
        self.status = status;
        self
    }

    /// With the CRD being deleted: creates are refused.
    pub fn terminating(mut self, terminating: bool) -> Self {
        self.terminating = terminating;
        self
    }

    /// With `selectableFields`, each given as its JSON path (`.spec.color`).
    pub fn with_selectable_fields(mut self, paths: &[String]) -> Self {
        self.selectable = paths
            .iter()
            .map(|p| {
                let name = p.trim_start_matches('.').to_owned();
                let segments = name.split('.').map(str::to_owned).collect();
                (name, segments)
            })
            .collect();
        self
    }

    fn api_version(&self, version: &str) -> String {
        format!("{}/{version}", self.group)
    }

    /// `object` in `version`: with conversion `None` only `apiVersion` changes; with a
    /// converter (a conversion webhook) the store has converted it already
    /// ([`Strategy::conversion`]), and an object in another version is a 500.
    fn convert(&self, mut object: Value, version: &str) -> Result<Value, ApiError> {
        let wanted = self.api_version(version);
        if object.get("apiVersion").and_then(Value::as_str) == Some(wanted.as_str()) {
            return Ok(object);
        }
        if self.conversion.is_some() {
            return Err(Status::internal_error(format!(
                "the object was not converted to {wanted} by the conversion webhook"
            ))
            .into());
        }
        if let Some(map) = object.as_object_mut() {
            map.insert("apiVersion".into(), Value::from(wanted));
        }
        Ok(object)
    }

    /// The object without what a spec change ignores: metadata, and status when the status
    /// subresource owns it.
    fn content<'a>(&self, object: &'a Value) -> BTreeMap<&'a str, &'a Value> {
        object
            .as_object()
            .map(|map| {
                map.iter()
                    .filter(|(k, _)| {
                        *k != "metadata"
                            && *k != "apiVersion"
                            && *k != "kind"
                            && !(self.status && *k == "status")
                    })
                    .map(|(k, v)| (k.as_str(), v))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn validate_scale(&self, object: &Value) -> ErrorList {
        self.scale
            .as_ref()
            .map(|paths| validate_scale_paths(object, paths))
            .unwrap_or_default()
    }

    fn validate_meta(&self, object: &Value) -> Result<ErrorList, ApiError> {
        let meta = object_meta(object)?;
        Ok(validate_object_meta(
            &meta,
            self.namespaced,
            name_is_dns_subdomain,
            &Path::new("metadata"),
        ))
    }
}

fn generation(object: &Value) -> i64 {
    object
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

impl Strategy for CustomResourceStrategy {
    fn group_resource(&self) -> GroupResource {
        GroupResource::new(&self.group, &self.resource)
    }

    fn kind(&self) -> GroupVersionKind {
        GroupVersionKind::new(&self.group, &self.version, &self.kind)
    }

    fn namespaced(&self) -> bool {
        self.namespaced
    }

    fn key_prefix(&self) -> String {
        format!("/registry/{}/{}", self.group, self.resource)
    }

    fn decode(&self, mut object: Value) -> Result<Value, ApiError> {
        if !object.is_object() {
            return Err(Status::bad_request("the object must be a JSON object").into());
        }
        if let Some(metadata) = object.get("metadata")
            && !metadata.is_object()
            && !metadata.is_null()
        {
            return Err(Status::bad_request(format!(
                "unable to decode {}: .metadata must be an object",
                self.kind
            ))
            .into());
        }
        self.schema.prune(&mut object)?;
        Ok(object)
    }

    fn stored_form(&self, object: Value) -> Result<Value, ApiError> {
        let mut stored = self.convert(object, &self.storage_version)?;
        if self.version != self.storage_version {
            // Fields the storage version does not know are not stored; a conversion webhook
            // that answers malformed metadata is the webhook's failure.
            self.storage_schema.prune(&mut stored).map_err(|e| {
                ApiError::from(Status::internal_error(format!(
                    "the object converted to the storage version {} does not fit its schema: {}",
                    self.storage_version, e.message
                )))
            })?;
        }
        Ok(stored)
    }

    fn conversion(&self) -> Option<&Conversion> {
        self.conversion.as_ref()
    }

    fn stores_served_form(&self) -> bool {
        // The storage version's objects are stored as they are served.
        self.version == self.storage_version
    }

    fn served_form(&self, object: Value) -> Result<Value, ApiError> {
        let mut object = self.convert(object, &self.version)?;
        // Fields the schema dropped since are pruned, defaults added since are filled in.
        self.schema.read(&mut object);
        Ok(object)
    }

    fn default(&self, object: &mut Value) {
        self.schema.default(object);
    }

    fn prepare_for_create(&self, object: &mut Value) {
        if self.status
            && let Some(map) = object.as_object_mut()
        {
            map.remove("status");
        }
        metadata_mut(object).insert("generation".into(), Value::from(1));
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        if self.status
            && let Some(map) = new.as_object_mut()
        {
            match old.get("status") {
                Some(status) => {
                    map.insert("status".into(), status.clone());
                }
                None => {
                    map.remove("status");
                }
            }
        }
        let mut next = generation(old);
        if self.content(new) != self.content(old) {
            next += 1;
        }
        metadata_mut(new).insert("generation".into(), Value::from(next.max(1)));
    }

    fn validate(&self, object: &Value) -> Result<ErrorList, ApiError> {
        if self.terminating {
            return Err(Status::failure(
                StatusReason::MethodNotAllowed,
                "create not allowed while custom resource definition is terminating",
            )
            .into());
        }
        let mut errors = self.validate_meta(object)?;
        errors.extend(self.schema.validate(object, None));
        errors.extend(self.validate_scale(object));
        Ok(errors)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
        let mut errors = validate_object_meta_update(
            &object_meta(new)?,
            &object_meta(old)?,
            &Path::new("metadata"),
        );
        errors.extend(self.schema.validate(new, Some(old)));
        errors.extend(self.validate_scale(new));
        Ok(errors)
    }

    fn selectable_fields(&self) -> Vec<&str> {
        self.selectable
            .iter()
            .map(|(name, _)| name.as_str())
            .collect()
    }

    fn field_values(&self, object: &Value) -> BTreeMap<String, String> {
        self.selectable
            .iter()
            .map(|(name, segments)| {
                let value = segments
                    .iter()
                    .try_fold(object, |v, s| v.get(s))
                    .map(|v| match v {
                        Value::String(s) => s.clone(),
                        Value::Null => String::new(),
                        other => other.to_string(),
                    })
                    .unwrap_or_default();
                (name.clone(), value)
            })
            .collect()
    }
}

/// The strategy of a custom resource's `status` subresource: a write changes `status` only
/// (and the field ownership of the writer), everything else stays as stored.
#[derive(Clone, Debug)]
pub struct CustomStatusStrategy {
    base: CustomResourceStrategy,
}

impl CustomStatusStrategy {
    /// The status strategy of `base`'s resource.
    pub fn new(base: CustomResourceStrategy) -> Self {
        Self { base }
    }
}

impl Strategy for CustomStatusStrategy {
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

    fn decode(&self, object: Value) -> Result<Value, ApiError> {
        self.base.decode(object)
    }

    fn stored_form(&self, object: Value) -> Result<Value, ApiError> {
        self.base.stored_form(object)
    }

    fn served_form(&self, object: Value) -> Result<Value, ApiError> {
        self.base.served_form(object)
    }

    fn conversion(&self) -> Option<&Conversion> {
        self.base.conversion()
    }

    fn stores_served_form(&self) -> bool {
        self.base.stores_served_form()
    }

    fn serves_stored_form(&self) -> bool {
        self.base.serves_stored_form()
    }

    fn default(&self, object: &mut Value) {
        self.base.default(object);
    }

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        let status = new.get("status").cloned();
        let managed = new.pointer("/metadata/managedFields").cloned();
        let resource_version = new.pointer("/metadata/resourceVersion").cloned();
        *new = old.clone();
        let metadata = metadata_mut(new);
        match managed {
            Some(managed) => metadata.insert("managedFields".into(), managed),
            None => metadata.remove("managedFields"),
        };
        if let Some(rv) = resource_version {
            metadata.insert("resourceVersion".into(), rv);
        }
        if let Some(map) = new.as_object_mut() {
            match status {
                Some(status) => map.insert("status".into(), status),
                None => map.remove("status"),
            };
        }
    }

    fn validate(&self, object: &Value) -> Result<ErrorList, ApiError> {
        self.base.validate(object)
    }

    fn validate_update(&self, new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
        self.base.validate_update(new, old)
    }

    fn selectable_fields(&self) -> Vec<&str> {
        self.base.selectable_fields()
    }

    fn field_values(&self, object: &Value) -> BTreeMap<String, String> {
        self.base.field_values(object)
    }
}
