//! Schema-driven merging of Kubernetes objects (JSON values).
//!
//! - [`schema`]: the type model (list types and keys, map types, patch strategies and merge
//!   keys), built from OpenAPI v3 component schemas with their `x-kubernetes-*` extensions, so
//!   that built-in types and custom resources are handled by the same code.
//! - [`strategic`]: strategic merge patch, driven by that model.
//! - [`fieldpath`]: field paths and sets of them, with the FieldsV1 encoding.
//! - [`typed`]: objects read through the type model: the fields an object sets, and the
//!   difference between two versions of an object.
//! - [`apply`]: merging an applied configuration into an object, and removing fields.
//! - [`managed`]: `metadata.managedFields`, updated by writes and by server-side apply (with
//!   conflicts).
//!
//! - [`reconcile`]: owned fields brought in line with a changed schema (a list or map made
//!   atomic, or granular again).
//! - [`fuzzing`]: the entry point the fuzzers of both patch engines share.
//!
//! Pure: no I/O, no async.

#![warn(missing_docs)]

pub mod apply;
pub mod fieldpath;
pub mod fuzzing;
pub mod managed;
pub mod reconcile;
pub mod schema;
pub mod strategic;
pub mod typed;

pub use schema::{
    Field, ListOf, ListType, MapOf, MapType, Schema, SchemaError, Struct, Type, TypeRef,
};
