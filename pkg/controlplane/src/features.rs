//! The gates the built-in kinds' strategies consult, over the server's resolved feature gate
//! (the binary's features are declared in [`genplane_features`]).

use genplane_component_base::featuregate::{Feature, FeatureGate};

/// The resolved gates of a server, as the strategies of its kinds consult them.
#[derive(Clone, Debug)]
pub struct StrategyGates(pub FeatureGate);

impl genplane_api::catalog::FeatureGates for StrategyGates {
    fn enabled(&self, feature: &'static str) -> bool {
        self.0.enabled(Feature::new(feature))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use genplane_component_base::featuregate::{FeatureGateSettings, UseIdentity, Version};

    #[test]
    fn every_feature_a_strategy_consults_is_known_and_off_by_default() {
        use genplane_api::catalog::FeatureGates as _;
        let gate = genplane_features::registry()
            .resolve(
                &FeatureGateSettings::default(),
                Version::new(1, 33),
                UseIdentity::new("apiserver", "test"),
            )
            .unwrap();
        let gates = StrategyGates(gate);
        for feature in genplane_api::features::GATED_FEATURES {
            assert!(!gates.enabled(feature), "{feature}");
        }
        let on = genplane_features::registry()
            .resolve(
                &FeatureGateSettings([("CoordinatedLeaderElection".to_owned(), true)].into()),
                Version::new(1, 33),
                UseIdentity::new("apiserver", "test"),
            )
            .unwrap();
        assert!(StrategyGates(on).enabled("CoordinatedLeaderElection"));
    }
}
