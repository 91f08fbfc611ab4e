//! The `scale` subresource of Deployments and ReplicaSets: clients (`kubectl scale`, a
//! HorizontalPodAutoscaler) read and write an `autoscaling/v1` Scale, the store keeps the
//! object.
//!
//! The catalog entry lists `scale` with [`INFO`] as its body kind, so discovery and the
//! router know its requests and answers are Scales; [`ScaleStrategy`] is the store's
//! strategy behind it (given to the served resource by [`crate::controlplane`]): a read
//! answers the object's Scale (`spec.replicas`, `status.replicas`, and `status.selector`,
//! the object's selector as text); a write's replicas are put into the stored object, whose
//! own rules then run (generation, validation).

use std::collections::BTreeMap;

use genplane_api::autoscaling;
use genplane_api::catalog::{self, Hooks, ResourceInfo, Subresource, SubresourceRules};
use genplane_api::util;
use genplane_apimachinery::errors::{ApiError, Status};
use genplane_apimachinery::schema::{GroupResource, GroupVersionKind};
use genplane_apimachinery::validation::field::ErrorList;
use genplane_registry::object::{meta_str, metadata_mut, set_meta_str};
use genplane_registry::{CatalogStrategy, Strategy};
use serde_json::{Map, Value, json};

use super::workload;

/// `autoscaling/v1` Scale as the body kind of a `scale` subresource (never stored).
pub static INFO: ResourceInfo = ResourceInfo {
    group: autoscaling::GROUP,
    version: autoscaling::VERSION,
    kind: autoscaling::KIND,
    list_kind: "",
    resource: "scale",
    singular: "",
    short_names: &[],
    namespaced: true,
    create_on_update: false,
    verbs: &[],
    subresources: &[],
    categories: &[],
    storage_prefix: "",
    storage_api_version: autoscaling::API_VERSION,
    schema: &autoscaling::SCHEMA,
    protobuf: true,
    feature_gate: None,
    extensions: &[],
    openapi_schema: genplane_api::schema::schema_of::<k8s_openapi::api::autoscaling::v1::Scale>,
    hooks: Hooks {
        decode: autoscaling::decode,
        default: catalog::no_default,
        prepare_for_create: catalog::no_prepare,
        prepare_for_update: catalog::no_prepare_update,
        validate: |_| Ok(ErrorList::new()),
        validate_update: |_, _| Ok(ErrorList::new()),
        to_storage: None,
        from_storage: None,
        field_selectors: &[],
        field_values: |_| BTreeMap::new(),
        columns: &[],
        row: |_, _| Vec::new(),
        pending_finalization: catalog::nothing_pending,
        mark_deleting: catalog::no_default,
        grace_period: catalog::not_graceful,
    },
};

/// The `status` subresource of `kind` (its status writes checked by `validate_status`) and
/// its `scale` subresource, whose body is an autoscaling/v1 Scale.
pub const fn status_and_scale(
    kind: &'static str,
    validate_status: fn(&Value, &Value) -> Result<ErrorList, ApiError>,
) -> [Subresource; 2] {
    [
        Subresource {
            name: "status",
            kind,
            verbs: catalog::STATUS_VERBS,
            rules: Some(SubresourceRules {
                prepare_for_update: util::prepare_status_update,
                validate_update: validate_status,
            }),
            body: None,
        },
        Subresource {
            name: "scale",
            kind: genplane_api::autoscaling::KIND,
            verbs: catalog::STATUS_VERBS,
            rules: None,
            body: Some(&INFO),
        },
    ]
}

/// The store's strategy of `<resource>/scale` over the resource's own (see the module docs).
#[derive(Clone, Debug)]
pub struct ScaleStrategy {
    base: CatalogStrategy,
}

impl ScaleStrategy {
    /// The scale strategy of the resource `base` serves.
    pub fn new(base: CatalogStrategy) -> Self {
        Self { base }
    }

    /// The Scale of `object`.
    pub fn scale(object: &Value) -> Value {
        let mut metadata = Map::new();
        for field in ["name", "namespace", "uid", "resourceVersion"] {
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
        let mut spec = Map::new();
        let replicas = workload::replicas(object).unwrap_or(0);
        if replicas != 0 {
            spec.insert("replicas".into(), json!(replicas));
        }
        let mut status = Map::new();
        status.insert(
            "replicas".into(),
            json!(workload::count(object, "/status/replicas")),
        );
        if let Some(selector) = workload::selector(object) {
            status.insert("selector".into(), json!(selector.to_string()));
        }
        json!({
            "kind": autoscaling::KIND,
            "apiVersion": autoscaling::API_VERSION,
            "metadata": metadata,
            "spec": spec,
            "status": status,
        })
    }
}

impl Strategy for ScaleStrategy {
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

    /// The body is a Scale; replicas left out are 0, as Go reads them.
    fn decode(&self, object: Value) -> Result<Value, ApiError> {
        let decoded = autoscaling::decode(&object)?.object;
        if decoded
            .get("kind")
            .and_then(Value::as_str)
            .is_some_and(|k| k != autoscaling::KIND)
        {
            return Err(Status::bad_request("the body of a scale write must be a Scale").into());
        }
        Ok(decoded)
    }

    fn stored_form(&self, object: Value) -> Result<Value, ApiError> {
        self.base.stored_form(object)
    }

    fn served_form(&self, object: Value) -> Result<Value, ApiError> {
        self.base.served_form(object)
    }

    fn conversion(&self) -> Option<&genplane_registry::Conversion> {
        self.base.conversion()
    }

    fn view(&self, object: Value) -> Result<Value, ApiError> {
        Ok(Self::scale(&object))
    }

    // A Scale has no defaults; the object's were filled in when it was written.

    fn prepare_for_update(&self, new: &mut Value, old: &Value) {
        let replicas = new
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let resource_version = meta_str(new, "resourceVersion").to_owned();
        let mut object = old.clone();
        object["spec"]["replicas"] = json!(replicas);
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
