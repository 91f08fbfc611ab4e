//! The control plane's view of the binary's feature gates ([`genplane_features`], re-exported
//! here): and the gates its kinds' strategies consult.

pub use genplane_features::*;

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
        let gate = registry()
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
        let on = registry()
            .resolve(
                &FeatureGateSettings([("CoordinatedLeaderElection".to_owned(), true)].into()),
                Version::new(1, 33),
                UseIdentity::new("apiserver", "test"),
            )
            .unwrap();
        assert!(StrategyGates(on).enabled("CoordinatedLeaderElection"));
    }
}
