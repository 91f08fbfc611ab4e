//! CustomResourceDefinition schemas (`apiextensions.k8s.io/v1`): everything about a CRD's
//! `openAPIV3Schema` that is pure computation.
//!
//! - When a CRD is written: [`structural`] checks that each version's schema is a valid,
//!   structural schema within upstream's limits; [`openapi`] turns it into the schema
//!   published in the OpenAPI documents; [`typed`] into the type model server-side apply uses.
//! - When a custom resource is written or read: [`schema`] is the compiled schema;
//!   [`object_validation`] checks an object against it, [`defaulting`] fills in `default`s and
//!   [`pruning`] drops fields the schema does not know.
//!
//! CEL rules (`x-kubernetes-validations`) live in `genplane-cel`.

#![warn(missing_docs)]

mod compile;
pub mod defaulting;
mod formats;
pub mod object_validation;
mod objectmeta;
pub mod openapi;
pub mod pruning;
pub mod schema;
pub mod structural;
pub mod typed;
