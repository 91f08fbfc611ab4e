//! Kubernetes API machinery for genplane: the pure parts every layer above storage shares.
//!
//! - [`errors`]: the `Status` object every failed request answers with, and constructors with the
//!   exact upstream `reason`s and codes (clients branch on `reason`, not on the code); an
//!   error with its sources as one message ([`errors::chain`]).
//! - [`validation`]: name, label, annotation and key validation, and [`validation::field`]'s
//!   field-error lists, which collect every problem of an object at once.
//! - [`labels`] and [`fields`]: label selectors (the full syntax) and field selectors.
//! - [`meta`]: object metadata, its validation on create and update, and the wire schemas of
//!   the meta/v1 types ([`meta::schemas`]).
//! - [`codec`]: typed JSON: the schema model of a Go type ([`codec::schema`]), decoding a raw
//!   object against it ([`codec::decode`]), the Kubernetes protobuf transcoder
//!   ([`codec::protobuf`]) and JSON in kube-apiserver's field order ([`codec::order`]).
//! - [`quantity`]: resource quantities; [`time`]: `metav1.Time` and `MicroTime` parsing and
//!   writing, ages as kubectl prints them.
//! - [`schema`]: group, version, kind and resource names.
//! - [`gofmt`]: strings quoted as Go's `%q` quotes them, for messages.
//! - [`yaml`]: YAML from clients, read without risk to the stack.
//! - [`resource_version`]: how `resourceVersion`, `resourceVersionMatch`, `limit` and `continue`
//!   select what a read returns.
//!
//! No I/O and no async here (checked by `hack/verify-crate-deps.sh`).

#![warn(missing_docs)]

pub mod codec;
pub mod duration;
pub mod errors;
pub mod fields;
pub mod fuzzing;
pub mod gofmt;
pub mod json;
pub mod labels;
pub mod meta;
pub mod quantity;
pub mod resource_version;
pub mod schema;
pub mod time;
pub mod validation;
pub mod yaml;
