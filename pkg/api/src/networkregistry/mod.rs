//! `networkregistry.genplane.io/v1alpha1`: genplane's network registry (the draft "Kubernetes
//! Assigned Numbers Authority", KANA).
//!
//! Components claim IP ranges with a cluster-scoped [`networkclaim`] object; the registry
//! controller of the controller-manager allocates them first come, first served, and anyone can
//! ask who holds an address. Prefixes are written in one canonical form ([`prefix`]), so that
//! equal ranges are equal strings.
//!
//! The API is served only while the feature gate [`crate::features::NETWORK_REGISTRY`] is on.

pub mod networkclaim;
pub mod prefix;

pub use prefix::{Prefix, PrefixError};

/// The API group.
pub const GROUP: &str = "networkregistry.genplane.io";
/// The served version.
pub const VERSION: &str = "v1alpha1";
/// The `apiVersion` of the group's objects.
pub const API_VERSION: &str = "networkregistry.genplane.io/v1alpha1";
/// The plural resource name.
pub const RESOURCE: &str = "networkclaims";

/// The well-known claim of the API server: the Service IP ranges of its
/// `--service-cluster-ip-range`, for the reference `{"", services}`.
pub const KUBE_APISERVER_CLAIM: &str = "kube-apiserver";
/// The well-known claim of the controller-manager: the Pod IP ranges of its `--cluster-cidr`,
/// for the reference `{"", pods}`.
pub const KUBE_CONTROLLER_MANAGER_CLAIM: &str = "kube-controller-manager";
