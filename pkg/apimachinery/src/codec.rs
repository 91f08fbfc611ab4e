//! Typed JSON: one schema per Go type ([`schema`]: a [`Struct`](schema::Struct) of
//! [`Field`](schema::Field)s, each with its JSON name, protobuf number and [`Type`](schema::Type))
//! and the codecs it drives, so that there is one model of every type and no generated code:
//!
//! - [`decode`]: a raw JSON object checked against its type (a field of the wrong JSON type is
//!   a 400 naming the field) and normalized as a round trip through the Go type would leave it;
//! - [`protobuf`]: Kubernetes protobuf (the `k8s\0` envelope, lists, watch frames) transcoded
//!   to and from the same JSON;
//! - [`order`]: JSON written in kube-apiserver's field order, a schema's fields in the Go
//!   struct's declaration order.
//!
//! The meta/v1 types' schemas are in [`crate::meta::schemas`]; the built-in kinds' in
//! genplane-api, each in its kind's module.

pub mod decode;
pub mod order;
pub mod protobuf;
pub mod schema;
