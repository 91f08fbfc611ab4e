//! core/v1 resources, and the wire schemas of the core/v1 references several kinds share
//! ([`OBJECT_REFERENCE`], [`LOCAL_OBJECT_REFERENCE`]).

use genplane_apimachinery::codec::schema::{Field, Struct, Type};

pub mod configmap;
pub mod event;
pub mod namespace;
pub mod resourcequota;
pub mod secret;
pub mod serviceaccount;

/// The most data a ConfigMap or Secret may hold, in bytes (upstream's `MaxSecretSize`, 1 MiB).
pub const MAX_DATA_SIZE: usize = 1024 * 1024;

/// The message of a field that may not change (upstream's `ValidateImmutableField`).
pub(crate) const FIELD_IMMUTABLE: &str = "field is immutable";

/// `core/v1.ObjectReference`.
pub static OBJECT_REFERENCE: Struct = Struct {
    name: "ObjectReference",
    fields: &[
        Field::new("kind", 1, Type::String),
        Field::new("namespace", 2, Type::String),
        Field::new("name", 3, Type::String),
        Field::new("uid", 4, Type::String),
        Field::new("apiVersion", 5, Type::String),
        Field::new("resourceVersion", 6, Type::String),
        Field::new("fieldPath", 7, Type::String),
    ],
};

/// `core/v1.LocalObjectReference`.
pub static LOCAL_OBJECT_REFERENCE: Struct = Struct {
    name: "LocalObjectReference",
    fields: &[Field::new("name", 1, Type::String)],
};
