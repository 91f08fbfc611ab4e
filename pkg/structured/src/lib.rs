//! Schema-driven merging of Kubernetes objects (JSON values).
//!
//! - [`schema`]: the type model (list types and keys, map types, patch strategies and merge
//!   keys), built from OpenAPI v3 component schemas with their `x-kubernetes-*` extensions, so
//!   that built-in types and custom resources are handled by the same code.
//! - [`strategic`]: strategic merge patch, driven by that model.
//!
//! Pure: no I/O, no async.

#![warn(missing_docs)]

pub mod schema;
pub mod strategic;

pub use schema::{
    Field, ListOf, ListType, MapOf, MapType, Schema, SchemaError, Struct, Type, TypeRef,
};
