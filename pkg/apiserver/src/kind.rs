//! What the handlers know about a served kind, built-in or custom: its description (names,
//! scope, verbs, subresources) and how its objects are shown and decoded.

use std::sync::Arc;

use genplane_api::catalog::{ResourceDescription, ResourceInfo};
use genplane_api::decode::Struct;
use genplane_apimachinery::errors::ApiError;
use serde_json::Value;

/// How the objects of a custom kind are shown in tables and checked for unknown fields. The
/// CustomResourceDefinition machinery implements it from the CRD's printer columns and schema.
pub trait CustomBehaviour: Send + Sync + std::fmt::Debug {
    /// The table's column definitions (`meta.k8s.io/v1` `TableColumnDefinition`s).
    fn columns(&self) -> Value;
    /// The cells of `object`'s row at `now` (Unix seconds).
    fn row(&self, object: &Value, now: i64) -> Vec<Value>;
    /// The fields of a written object that its schema does not know, as `fieldValidation`
    /// reports them (`spec.foo`); a 400 for a malformed object.
    fn unknown_fields(&self, object: &Value) -> Result<Vec<String>, ApiError>;
}

/// Where a kind's behaviour comes from.
#[derive(Clone, Debug)]
pub enum Behaviour {
    /// A catalog resource.
    Builtin(&'static ResourceInfo),
    /// A custom resource.
    Custom(Arc<dyn CustomBehaviour>),
}

/// A served kind: its description and behaviour. Dereferences to the description.
#[derive(Clone, Debug)]
pub struct ServedKind {
    description: ResourceDescription,
    behaviour: Behaviour,
}

impl std::ops::Deref for ServedKind {
    type Target = ResourceDescription;

    fn deref(&self) -> &ResourceDescription {
        &self.description
    }
}

impl ServedKind {
    /// The catalog resource `info`.
    pub fn builtin(info: &'static ResourceInfo) -> Self {
        Self {
            description: info.describe(),
            behaviour: Behaviour::Builtin(info),
        }
    }

    /// A custom kind.
    pub fn custom(description: ResourceDescription, behaviour: Arc<dyn CustomBehaviour>) -> Self {
        Self {
            description,
            behaviour: Behaviour::Custom(behaviour),
        }
    }

    /// The description.
    pub fn description(&self) -> &ResourceDescription {
        &self.description
    }

    /// The catalog entry of a built-in kind.
    pub fn builtin_info(&self) -> Option<&'static ResourceInfo> {
        match &self.behaviour {
            Behaviour::Builtin(info) => Some(info),
            Behaviour::Custom(_) => None,
        }
    }

    /// The protobuf shape of the objects, for kinds that speak Kubernetes protobuf (custom
    /// resources do not, as upstream).
    pub fn protobuf(&self) -> Option<&'static Struct> {
        self.builtin_info().map(|info| info.schema)
    }

    /// The table's column definitions.
    pub fn columns(&self) -> Value {
        match &self.behaviour {
            Behaviour::Builtin(info) => {
                serde_json::to_value(info.hooks.columns).unwrap_or_default()
            }
            Behaviour::Custom(custom) => custom.columns(),
        }
    }

    /// The cells of `object`'s table row at `now`.
    pub fn row(&self, object: &Value, now: i64) -> Vec<Value> {
        match &self.behaviour {
            Behaviour::Builtin(info) => (info.hooks.row)(object, now),
            Behaviour::Custom(custom) => custom.row(object, now),
        }
    }

    /// The fields of a written object its schema does not know (400 for a built-in object of
    /// the wrong shape).
    pub fn unknown_fields(&self, object: &Value) -> Result<Vec<String>, ApiError> {
        match &self.behaviour {
            Behaviour::Builtin(info) => Ok((info.hooks.decode)(object)?.unknown_fields),
            Behaviour::Custom(custom) => custom.unknown_fields(object),
        }
    }
}
