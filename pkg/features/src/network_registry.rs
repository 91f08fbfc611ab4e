//! The `NetworkRegistry` feature gate, registered once for every role that consults it: the
//! API server serves the `networkregistry.genplane.io` API under it, and the
//! controller-manager runs the registry controller under it.
//!
//! Its registration ([`register`]) says everything the roles and the feature-controller need:
//! its history (alpha in 1.33, off by default: the API is new and its shape may still change),
//! the task turning it off runs ([`REMOVE_NETWORK_CLAIMS`]), and that it is central: the API
//! servers' `--feature-gates` decide it (they serve the API), and the other roles follow the
//! Feature object's state rather than their own flag.

use genplane_component_base::featuregate::{
    self, Feature, FeatureSpec, Registry, ResourceRef, Stage, Task,
};

/// `NetworkRegistry` (genplane's own, the draft KANA proposal).
pub const FEATURE: Feature = Feature::new(genplane_api::features::NETWORK_REGISTRY);

/// Its history: alpha from 1.33, off by default.
pub const SPECS: &[FeatureSpec] = &[FeatureSpec::new(
    featuregate::Version::new(1, 33),
    Stage::Alpha,
    false,
)];

/// The task that turning NetworkRegistry off runs once every component runs with it off: the
/// NetworkClaims, served only while it is on (or while it is turned off), must be gone.
pub const REMOVE_NETWORK_CLAIMS: Task = Task::WaitForObjectsRemoved {
    target: ResourceRef::new(
        genplane_api::networkregistry::GROUP,
        genplane_api::networkregistry::VERSION,
        "networkclaims",
        "NetworkClaim",
    ),
};

/// Registers NetworkRegistry in `registry`: its specs, its turn-off task, and central.
pub fn register(registry: &mut Registry) -> Result<(), featuregate::Error> {
    registry.add(FEATURE, SPECS)?;
    if !registry
        .turn_off_tasks(FEATURE.name())
        .contains(&REMOVE_NETWORK_CLAIMS)
    {
        registry.add_turn_off_task(FEATURE, REMOVE_NETWORK_CLAIMS)?;
    }
    registry.make_central(FEATURE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registration_is_valid_repeatable_and_central() {
        let mut registry = Registry::new();
        register(&mut registry).unwrap();
        register(&mut registry).unwrap();
        assert!(registry.is_central(FEATURE.name()));
        assert_eq!(
            registry.turn_off_tasks(FEATURE.name()),
            [REMOVE_NETWORK_CLAIMS]
        );
        let spec = registry
            .spec_at(FEATURE.name(), featuregate::Version::new(1, 33))
            .unwrap();
        assert_eq!((spec.stage, spec.default), (Stage::Alpha, false));
    }
}
