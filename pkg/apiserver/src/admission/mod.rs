//! What the admission plugins read of the server's own storage, as upstream's plugins read
//! informers: each view is the server's side of a `genplane_admission` trait, kept in memory by
//! a watch where a write must cost no storage read.
//!
//! - [`namespaces`]: the namespaces (NamespaceLifecycle and its siblings);
//! - [`policies`]: the Validating and Mutating AdmissionPolicies, their bindings and params;
//! - [`quotas`]: the ResourceQuotas the `ResourceQuota` plugin reads and charges;
//! - [`webhook_configurations`]: the webhook configurations the webhook plugins call;
//! - [`mirrored`]: the watch-kept list the views above share.

pub mod mirrored;
pub mod namespaces;
pub mod policies;
pub mod quotas;
pub mod webhook_configurations;
