//! The feature gates the controllers consult, registered once for every role that knows them
//! (the controller-manager, and the API server, whose registry is the binary's: the
//! feature-controller announces what it holds).
//!
//! # `OrderedNamespaceDeletion` (KEP-5080)
//!
//! When a namespace is deleted, its pods go first: the namespace controller deletes the
//! namespace's pods and deletes nothing else until they are gone, so that what guards or
//! serves a running pod (its Secrets, ConfigMaps, ServiceAccount, policies) outlives it. It
//! matters wherever the API serves `pods` (a control plane built with this library that
//! serves them, or one the controller-manager runs against); where no `pods` are served the
//! order of the other resources is unchanged.
//!
//! Upstream's history: beta and off by default from 1.30, on by default from 1.33, GA and
//! locked on from 1.34. The controller reads it at every namespace sync and needs nothing
//! else to act on a new value, and it stores nothing, so it may be dynamic
//! ([`Registry::allow_dynamic`]) and turning it off leaves no state behind.

use genplane_component_base::featuregate::{self, Feature, FeatureSpec, Registry, Stage, Version};

/// `OrderedNamespaceDeletion`: a terminating namespace's pods are deleted before the rest of
/// its content.
pub const ORDERED_NAMESPACE_DELETION: Feature = Feature::new("OrderedNamespaceDeletion");

/// Its history, as upstream's.
pub const ORDERED_NAMESPACE_DELETION_SPECS: &[FeatureSpec] = &[
    FeatureSpec::new(Version::new(1, 30), Stage::Beta, false),
    FeatureSpec::new(Version::new(1, 33), Stage::Beta, true),
    FeatureSpec::new(Version::new(1, 34), Stage::Ga, true).locked(),
];

/// Registers the controllers' features in `registry`: OrderedNamespaceDeletion, dynamic.
/// Registering twice is harmless.
pub fn register(registry: &mut Registry) -> Result<(), featuregate::Error> {
    registry.add(ORDERED_NAMESPACE_DELETION, ORDERED_NAMESPACE_DELETION_SPECS)?;
    registry.allow_dynamic(ORDERED_NAMESPACE_DELETION)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordered_namespace_deletion_is_registered_dynamic_with_upstreams_history() {
        let mut registry = Registry::new();
        register(&mut registry).unwrap();
        register(&mut registry).unwrap();
        let name = ORDERED_NAMESPACE_DELETION.name();
        assert!(registry.is_dynamic_capable(name));
        let at = |minor| registry.spec_at(name, Version::new(1, minor)).unwrap();
        assert_eq!((at(30).stage, at(30).default), (Stage::Beta, false));
        assert_eq!((at(33).stage, at(33).default), (Stage::Beta, true));
        assert!(!at(33).lock_to_default);
        assert!(at(34).lock_to_default);
    }
}
