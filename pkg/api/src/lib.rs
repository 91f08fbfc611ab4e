//! The built-in types of the genplane generic control plane, and everything about them that is
//! pure: decoding, defaulting, validation, field selectors and table columns.
//!
//! Resources (each module documents its upstream rules):
//! - core/v1 ([`core`]): [`core::namespace`], [`core::configmap`], [`core::secret`],
//!   [`core::serviceaccount`], [`core::event`], [`core::resourcequota`];
//! - events.k8s.io/v1 ([`events`]): events, stored as core/v1 events and converted both ways;
//! - certificates.k8s.io/v1 ([`certificates`]): CertificateSigningRequests, with their
//!   `status` and `approval` subresources; certificates.k8s.io/v1beta1 ClusterTrustBundles
//!   ([`certificates::clustertrustbundle`]), served while the `ClusterTrustBundle` feature gate
//!   is on and `--runtime-config` enables the group version;
//! - coordination.k8s.io/v1 ([`coordination`]): leases;
//! - flowcontrol.apiserver.k8s.io/v1 ([`flowcontrol`]): FlowSchemas and
//!   PriorityLevelConfigurations, with the configuration every server keeps
//!   ([`flowcontrol::bootstrap`]);
//! - rbac.authorization.k8s.io/v1 ([`rbac`]): [`rbac::role`], [`rbac::clusterrole`],
//!   [`rbac::rolebinding`], [`rbac::clusterrolebinding`];
//! - admissionregistration.k8s.io/v1 ([`admissionregistration`]): validating and mutating
//!   webhook configurations;
//! - apiextensions.k8s.io/v1 ([`apiextensions`]): CustomResourceDefinitions, with the pure
//!   helpers of their status ([`apiextensions::status`]);
//! - apiregistration.k8s.io/v1 ([`apiregistration`]): APIServices
//!   ([`apiregistration::apiservice`]), which say which server answers each group-version;
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
//! defined in [`resource`], below the kinds and the catalog. What an entry says of its OpenAPI
//! schema is in [`schema`]: its component from k8s-openapi's types (or the kind's own Rust
//! type) and the table of list, map and patch semantics ([`schema::Extensions`], the shared
//! entries in [`schema::SHARED`], each kind's in its entry). The OpenAPI documents are built
//! from them by the API server (`genplane_apiserver::openapi::builder`). [`webhook`] holds what
//! the webhook client configurations of CRD conversion and admission share (the URL rules).
//!
//! ## Raw JSON, typed checks
//!
//! Objects are `serde_json::Value`s everywhere in genplane. Each kind here has a schema of its
//! type (its module's `SCHEMA`, a [`genplane_apimachinery::codec::schema::Struct`] built on the
//! shared meta/v1 ones of [`genplane_apimachinery::meta::schemas`] and the core/v1 references
//! of [`core`]): the kind's `decode` checks a Value against it
//! ([`genplane_apimachinery::codec::decode`]) so that a field of the wrong JSON type becomes a
//! 400 BadRequest naming the field, then reads it into small serde structs of its own for the
//! validation rules. It does not use k8s-openapi for that: its structs check `apiVersion` and
//! `kind` on deserialization, report no field path on a type error, and cost a long compile for
//! the seven types needed here; the schemas here also give unknown-field detection and the
//! normalized form upstream stores.
//!
//! The same schemas hold each field's protobuf number, from upstream's `generated.proto`, for
//! the transcoder ([`genplane_apimachinery::codec::protobuf`]), and list the fields in the Go
//! struct's declaration order, in which [`order`] writes the built-in answers (with
//! [`genplane_apimachinery::codec::order`], given the table of built-in kinds
//! [`order::schema_of`]): kube-apiserver's order, `kind`, `apiVersion`, `metadata`, then the
//! kind's fields, which clients compare as strings. The machinery itself is generic and lives in
//! genplane-apimachinery; this crate holds the kinds and the catalog.

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
pub mod apiregistration;
pub mod authentication;
pub mod authorization;
pub mod autoscaling;
pub mod catalog;
pub mod certificates;
pub mod coordination;
pub mod core;
pub mod events;
pub mod featuregates;
pub mod features;
pub mod flowcontrol;
pub mod networkregistry;
pub mod order;
#[cfg(test)]
mod protobuf_tests;
pub mod rbac;
pub mod resource;
pub mod schema;
pub mod table;

pub mod util;
pub mod webhook;
