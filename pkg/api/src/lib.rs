//! The built-in types of the genplane generic control plane, and everything about them that is
//! pure: decoding, defaulting, validation, field selectors and table columns.
//!
//! Resources (each module documents its upstream rules):
//! - core/v1 ([`core`]): [`core::namespace`], [`core::configmap`], [`core::secret`],
//!   [`core::serviceaccount`], [`core::event`], [`core::resourcequota`];
//! - events.k8s.io/v1 ([`events`]): events, stored as core/v1 events and converted both ways;
//! - coordination.k8s.io/v1 ([`coordination`]): leases;
//! - rbac.authorization.k8s.io/v1 ([`rbac`]): [`rbac::role`], [`rbac::clusterrole`],
//!   [`rbac::rolebinding`], [`rbac::clusterrolebinding`];
//! - admissionregistration.k8s.io/v1 ([`admissionregistration`]): validating and mutating
//!   webhook configurations;
//! - apiextensions.k8s.io/v1 ([`apiextensions`]): CustomResourceDefinitions, with the pure
//!   helpers of their status ([`apiextensions::status`]);
//! - featuregates.genplane.io/v1alpha1 ([`featuregates`]): genplane's Feature API
//!   ([`featuregates::feature`]), JSON and YAML only;
//! - networkregistry.genplane.io/v1alpha1 ([`networkregistry`]): genplane's NetworkClaim API
//!   ([`networkregistry::networkclaim`]), JSON and YAML only, served while the
//!   `NetworkRegistry` feature gate is on;
//! - the review kinds, created but never stored (an empty `storage_prefix`, `create` their only
//!   verb): authentication.k8s.io/v1 ([`authentication`]: TokenReview, SelfSubjectReview, and
//!   TokenRequest, the body of `serviceaccounts/<name>/token`) and authorization.k8s.io/v1
//!   ([`authorization`]: the access reviews).
//!
//! [`catalog`] lists them all with what discovery, the router and storage need to know, and
//! the hooks the generic registry runs ([`resource::Hooks`]); what an entry is made of is
//! defined in [`resource`], below the kinds and the catalog. [`openapi`] builds the OpenAPI v3
//! documents of served resources (and from them the v2 document, as JSON and protobuf) from
//! k8s-openapi's schemas (the only use of k8s-openapi here) and one table of list, map and
//! patch semantics ([`schema`], walked by [`openapi::extensions`]). [`webhook`] holds what the webhook client
//! configurations of CRD conversion and admission share (the URL rules).
//!
//! ## Raw JSON, typed checks
//!
//! Objects are `serde_json::Value`s everywhere in genplane. This crate checks a Value against a
//! schema of its type ([`decode`]) so that a field of the wrong JSON type becomes a 400
//! BadRequest naming the field, then reads it into small serde structs of its own for the
//! validation rules. It does not use k8s-openapi for that: its structs check `apiVersion` and
//! `kind` on deserialization, report no field path on a type error, and cost a long compile for
//! the seven types needed here; the schemas here also give unknown-field detection and the
//! normalized form upstream stores.
//!
//! ## Protobuf
//!
//! The schemas also hold each field's protobuf number, from upstream's `generated.proto`:
//! [`protobuf`] transcodes Kubernetes protobuf bodies (the `k8s\0` envelope, lists, watch
//! frames) to and from the same JSON, so there is one model of every type and no generated code.
//!
//! ## Field order
//!
//! A schema lists its fields in the Go struct's declaration order, and [`order`] writes JSON
//! in it (kube-apiserver's order: `kind`, `apiVersion`, `metadata`, then the kind's fields),
//! which clients compare as strings.
//!
//! ## Calling convention
//!
//! `validate(obj)` and `validate_update(new, old)` return `Err(ApiError)` (400 BadRequest) when
//! the object does not decode, else `Ok(ErrorList)`: every field problem, empty when valid. Turn
//! a non-empty list into the 422 answer with
//! [`genplane_apimachinery::errors::Status::invalid`]. Validation expects defaulting
//! (`default`, e.g. a Secret's `stringData` merge) to have run first, as upstream decodes and
//! defaults before it validates. Tables take `now` (Unix seconds): no clock is read here.
//!
//! No I/O and no async here (checked by `hack/verify-crate-deps.sh`).

#![warn(missing_docs)]

pub mod admissionregistration;
pub mod apiextensions;
pub mod authentication;
pub mod authorization;
pub mod autoscaling;
pub mod catalog;
pub mod coordination;
pub mod core;
pub mod decode;
pub mod events;
pub mod featuregates;
pub mod features;
pub mod networkregistry;
pub mod openapi;
pub mod order;
pub mod protobuf;
pub mod quantity;
pub mod rbac;
pub mod resource;
pub mod schema;
pub mod table;
pub mod time;

pub mod util;
pub mod webhook;
