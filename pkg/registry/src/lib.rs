//! The registry: how Kubernetes objects live, over the storage contract.
//!
//! A resource is a [`Strategy`] (its rules) plus the generic [`Store`] (the lifecycle every
//! resource shares): create with `generateName`, `uid` and `creationTimestamp`; reads with
//! `resourceVersion` semantics, selectors and pagination; updates with `resourceVersion`
//! preconditions; deletion with finalizers and propagation policies; watches with selector
//! transitions and bookmarks. A kind that is never stored (a review) has a [`Computed`] create
//! path instead: the same steps up to storage. Objects are raw JSON ([`serde_json::Value`]); storage errors
//! become API errors in exactly one place ([`Store`]).

#![warn(missing_docs)]

pub mod allocation;
pub mod builtin;
pub mod computed;
pub mod conversion;
pub mod custom;
pub mod mirror;
pub mod object;
pub mod scale;
pub mod scale_paths;
mod selection;
pub mod store;
pub mod strategy;
pub mod watch;

pub use allocation::{Allocated, Allocations};
pub use builtin::{CatalogStrategy, SubresourceStrategy};
pub use computed::Computed;
pub use conversion::{Conversion, ConvertFuture, Converter};
pub use custom::{CustomResourceStrategy, CustomSchema, CustomStatusStrategy};
pub use mirror::{Mirror, Snapshot};
pub use scale::CustomScaleStrategy;
pub use scale_paths::ScalePaths;
pub use selection::check_fields;
pub use store::{
    Admission, CheckEscalation, DeleteOptions, Deletion, EscalationCheck, FieldTracker, JsonItem,
    ListOptions, ListResult, Propagation, ServedCounts, Store, TrackFields, WriteOptions, Written,
};
pub use strategy::Strategy;
pub use watch::{EventType, WatchItem, WatchObject, WatchStream};
