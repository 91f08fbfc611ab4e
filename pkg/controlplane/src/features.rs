//! The feature gates of the control plane's API server, with their upstream history.

use genplane_component_base::featuregate::{Feature, FeatureSpec, Registry, Stage, Version};

/// `APIServerIdentity` (KEP-1965): each API server publishes an identity Lease in
/// `kube-system`. Alpha in 1.20, beta and on by default since 1.26.
pub const API_SERVER_IDENTITY: Feature = Feature::new("APIServerIdentity");

/// The features `genplane apiserver` knows.
pub fn registry() -> Registry {
    let mut registry = Registry::new();
    let added = registry.add(
        API_SERVER_IDENTITY,
        &[
            FeatureSpec::new(Version::new(1, 20), Stage::Alpha, false),
            FeatureSpec::new(Version::new(1, 26), Stage::Beta, true),
        ],
    );
    // The table above is static and valid; a test proves it.
    debug_assert!(added.is_ok(), "{added:?}");
    registry
}

#[cfg(test)]
mod tests {
    use super::*;
    use genplane_component_base::featuregate::{FeatureGateSettings, UseIdentity};

    #[test]
    fn identity_is_on_at_1_33_and_off_at_1_25() {
        let registry = registry();
        let at = |minor| {
            registry
                .resolve(
                    &FeatureGateSettings::default(),
                    Version::new(1, minor),
                    UseIdentity::new("apiserver", "test"),
                )
                .unwrap()
                .enabled(API_SERVER_IDENTITY)
        };
        assert!(at(33));
        assert!(!at(25));
    }
}
