//! Feature gates: named switches for behaviour that is not yet (or no longer) the default.
//!
//! The model follows Kubernetes' `component-base/featuregate`:
//!
//! - A [`Registry`] knows every feature of a binary. Each feature has a list of [`FeatureSpec`]s,
//!   one per Kubernetes version in which its default, lock or [`Stage`] changed.
//! - Under an emulated version (`--emulated-version`, KEP-4330) the spec in force is the one with
//!   the highest version not above the emulated one. A feature with no such spec does not exist yet
//!   at that version: it is *pre-alpha*, off, and cannot be set.
//! - `--feature-gates=A=true,B=false` ([`FeatureGateSettings`]) overrides defaults. `AllAlpha` and
//!   `AllBeta` set every alpha (beta) feature that is not named explicitly. Unknown features,
//!   locked features set to a value other than their default, pre-alpha features and malformed
//!   input are errors, all reported together.
//! - [`Registry::resolve`] turns the settings into a [`FeatureGate`], which answers
//!   [`FeatureGate::enabled`] and exports the `kubernetes_feature_enabled{name,stage}` gauge.
//!
//! # The use log (KEP-3920's client flow)
//!
//! Every call of [`FeatureGate::enabled`] records that the feature was checked and which value
//! was seen, together with the component and instance that checked it ([`UseIdentity`]). The gate
//! exists from flag parsing on, long before any API client does; a reporter created later reads
//! the log with [`FeatureGate::uses`] or [`FeatureGate::drain_uses`] and writes it to the
//! Feature API. Recording costs one relaxed atomic load on the hot path once a value was seen.
//!
//! ```
//! use genplane_component_base::featuregate::{
//!     Feature, FeatureGateSettings, FeatureSpec, Registry, Stage, UseIdentity, Version,
//! };
//!
//! const WATCH_LIST: Feature = Feature::new("WatchList");
//!
//! let mut registry = Registry::new();
//! registry.add(WATCH_LIST, &[
//!     FeatureSpec::new(Version::new(1, 27), Stage::Alpha, false),
//!     FeatureSpec::new(Version::new(1, 32), Stage::Beta, true),
//! ]).unwrap();
//!
//! let settings: FeatureGateSettings = "WatchList=false".parse().unwrap();
//! let gate = registry
//!     .resolve(&settings, Version::new(1, 33), UseIdentity::new("apiserver", "host-1"))
//!     .unwrap();
//! assert!(!gate.enabled(WATCH_LIST));
//! assert_eq!(gate.uses()[0].feature, "WatchList");
//! ```

mod gate;
mod registry;
mod settings;
mod spec;
mod task;
mod uses;
mod version;

pub use gate::{FeatureGate, FeatureStatus};
pub use registry::Registry;
pub use settings::FeatureGateSettings;
pub use spec::{Feature, FeatureSpec, Stage};
pub use task::{ResourceRef, Stored, Task};
pub use uses::{FeatureUse, UseIdentity};
pub use version::Version;

/// The pseudo-feature that sets every alpha feature not named explicitly.
pub const ALL_ALPHA: &str = "AllAlpha";
/// The pseudo-feature that sets every beta feature not named explicitly.
pub const ALL_BETA: &str = "AllBeta";

/// Errors of feature-gate definitions and settings.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A `key=value` pair without `=value`.
    #[error("missing bool value for {key}")]
    MissingValue {
        /// The key as written.
        key: String,
    },
    /// A value that is not a boolean (`true`, `false`, `1`, `0`, `t`, `f`, ...).
    #[error("invalid value of {key}={value}: must be true or false")]
    InvalidValue {
        /// The key as written.
        key: String,
        /// The value as written.
        value: String,
    },
    /// A `=value` with no feature name before it.
    #[error("missing feature name in {pair:?}")]
    MissingName {
        /// The pair as written.
        pair: String,
    },
    /// A feature this binary does not know.
    #[error("unrecognized feature gate: {name}")]
    Unknown {
        /// The feature name.
        name: String,
    },
    /// A feature locked to its default, set to the other value.
    #[error("cannot set feature gate {name} to {value}, feature is locked to {locked_to}")]
    Locked {
        /// The feature name.
        name: String,
        /// The value that was asked for.
        value: bool,
        /// The value the feature is locked to.
        locked_to: bool,
    },
    /// A feature that does not exist yet at the emulated version.
    #[error(
        "cannot set feature gate {name} to {value}, feature is PreAlpha at emulated version {version}"
    )]
    PreAlpha {
        /// The feature name.
        name: String,
        /// The value that was asked for.
        value: bool,
        /// The emulated version.
        version: Version,
    },
    /// A version string that is not `MAJOR.MINOR`.
    #[error("invalid version {input:?}: {reason}")]
    InvalidVersion {
        /// The input as written.
        input: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// An emulated version outside the range this binary can emulate.
    #[error("emulated version {version} is not between {min} and {max}")]
    VersionOutOfRange {
        /// The version asked for.
        version: Version,
        /// The oldest version this binary can emulate.
        min: Version,
        /// The binary's own version.
        max: Version,
    },
    /// A feature name that cannot be used in `--feature-gates` or is reserved.
    #[error("invalid feature name {name:?}: {reason}")]
    InvalidName {
        /// The feature name.
        name: String,
        /// Why it was refused.
        reason: &'static str,
    },
    /// A feature registered with an empty spec list or with versions out of order.
    #[error("invalid specs for feature {name}: {reason}")]
    InvalidSpecs {
        /// The feature name.
        name: String,
        /// Why they were refused.
        reason: &'static str,
    },
    /// A feature registered twice with different specs.
    #[error("feature {name} is already registered with different specs")]
    Redefined {
        /// The feature name.
        name: String,
    },
    /// A feature set at run time whose author did not declare it dynamic (see
    /// [`Registry::allow_dynamic`]): the binary reads it only at start, so a new value would
    /// not take effect.
    #[error(
        "feature {name} cannot be set at run time: the binary reads it only at start (not declared dynamic)"
    )]
    NotDynamic {
        /// The feature name.
        name: String,
    },
    /// A feature adopted from the cluster at run time ([`FeatureGate::adopt_central`]) whose
    /// author did not declare it central (see [`Registry::make_central`]).
    #[error("feature {name} is not central: its value comes from this role's own settings")]
    NotCentral {
        /// The feature name.
        name: String,
    },
}

/// Joins errors into one line, for places that can only carry one message.
pub fn join_errors(errors: &[Error]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    const GA_LOCKED: Feature = Feature::new("GaLocked");
    const ALPHA_FEATURE: Feature = Feature::new("AlphaFeature");
    const BETA_ON: Feature = Feature::new("BetaOn");
    const BETA_OFF: Feature = Feature::new("BetaOff");
    /// Alpha (off) from 1.31, beta (on) from 1.33.
    const PROMOTED: Feature = Feature::new("Promoted");
    /// Added at 1.33 only.
    const NEW_IN_133: Feature = Feature::new("NewIn133");
    const OLD_DEPRECATED: Feature = Feature::new("OldDeprecated");

    fn v(major: u32, minor: u32) -> Version {
        Version::new(major, minor)
    }

    fn registry() -> Registry {
        let mut r = Registry::new();
        r.add(
            GA_LOCKED,
            &[
                FeatureSpec::new(v(1, 20), Stage::Beta, true),
                FeatureSpec::new(v(1, 30), Stage::Ga, true).locked(),
            ],
        )
        .unwrap();
        r.add(
            ALPHA_FEATURE,
            &[FeatureSpec::new(v(1, 25), Stage::Alpha, false)],
        )
        .unwrap();
        r.add(BETA_ON, &[FeatureSpec::new(v(1, 25), Stage::Beta, true)])
            .unwrap();
        r.add(BETA_OFF, &[FeatureSpec::new(v(1, 25), Stage::Beta, false)])
            .unwrap();
        r.add(
            PROMOTED,
            &[
                FeatureSpec::new(v(1, 31), Stage::Alpha, false),
                FeatureSpec::new(v(1, 33), Stage::Beta, true),
            ],
        )
        .unwrap();
        r.add(
            NEW_IN_133,
            &[FeatureSpec::new(v(1, 33), Stage::Alpha, false)],
        )
        .unwrap();
        r.add(
            OLD_DEPRECATED,
            &[
                FeatureSpec::new(v(1, 10), Stage::Ga, true),
                FeatureSpec::new(v(1, 32), Stage::Deprecated, false),
            ],
        )
        .unwrap();
        r
    }

    fn id() -> UseIdentity {
        UseIdentity::new("test-component", "instance-1")
    }

    fn resolve(settings: &str, version: Version) -> Result<FeatureGate, Vec<Error>> {
        let settings = FeatureGateSettings::parse(settings).expect("settings parse");
        registry().resolve(&settings, version, id())
    }

    #[test]
    fn parses_pairs_with_go_booleans_and_whitespace() {
        let s = FeatureGateSettings::parse(" A=true, B=0,C=F ,,D = True").unwrap();
        let expected: BTreeMap<String, bool> =
            [("A", true), ("B", false), ("C", false), ("D", true)]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect();
        assert_eq!(s.0, expected);
        assert_eq!(s.to_string(), "A=true,B=false,C=false,D=true");
        assert!(FeatureGateSettings::parse("").unwrap().is_empty());
    }

    #[test]
    fn reports_every_malformed_pair() {
        let errors = FeatureGateSettings::parse("A,B=maybe,=true,C=true").unwrap_err();
        assert_eq!(
            errors,
            vec![
                Error::MissingValue { key: "A".into() },
                Error::InvalidValue {
                    key: "B".into(),
                    value: "maybe".into()
                },
                Error::MissingName {
                    pair: "=true".into()
                },
            ]
        );
        assert_eq!(errors[0].to_string(), "missing bool value for A");
        let joined = "A,B=yes".parse::<FeatureGateSettings>().unwrap_err();
        assert!(
            joined.contains("missing bool value for A") && joined.contains("B=yes"),
            "{joined}"
        );
    }

    #[test]
    fn defaults_apply_when_nothing_is_set() {
        let gate = resolve("", v(1, 33)).unwrap();
        assert!(gate.enabled(GA_LOCKED));
        assert!(!gate.enabled(ALPHA_FEATURE));
        assert!(gate.enabled(BETA_ON));
        assert!(!gate.enabled(BETA_OFF));
        assert!(gate.enabled(PROMOTED));
        assert!(!gate.enabled(OLD_DEPRECATED));
    }

    #[test]
    fn explicit_settings_override_defaults() {
        let gate = resolve("AlphaFeature=true,BetaOn=false,GaLocked=true", v(1, 33)).unwrap();
        assert!(gate.enabled(ALPHA_FEATURE));
        assert!(!gate.enabled(BETA_ON));
        assert!(gate.enabled(GA_LOCKED));
        assert!(
            gate.warnings()
                .iter()
                .any(|w| w.contains("GA feature gate GaLocked")),
            "{:?}",
            gate.warnings()
        );
    }

    #[test]
    fn unknown_and_locked_features_are_all_reported() {
        let errors = resolve("Nope=true,GaLocked=false,AlsoNope=false", v(1, 33)).unwrap_err();
        assert_eq!(
            errors,
            vec![
                Error::Unknown {
                    name: "AlsoNope".into()
                },
                Error::Locked {
                    name: "GaLocked".into(),
                    value: false,
                    locked_to: true
                },
                Error::Unknown {
                    name: "Nope".into()
                },
            ]
        );
        assert_eq!(errors[0].to_string(), "unrecognized feature gate: AlsoNope");
        assert_eq!(
            errors[1].to_string(),
            "cannot set feature gate GaLocked to false, feature is locked to true"
        );
    }

    #[test]
    fn all_alpha_and_all_beta_set_unnamed_features_of_their_stage() {
        let gate = resolve("AllAlpha=true,AllBeta=false,BetaOff=true", v(1, 33)).unwrap();
        assert!(gate.enabled(ALPHA_FEATURE));
        assert!(gate.enabled(NEW_IN_133));
        assert!(
            !gate.enabled(BETA_ON),
            "AllBeta=false turns off a default-on beta feature"
        );
        assert!(
            gate.enabled(BETA_OFF),
            "an explicit setting wins over AllBeta"
        );
        assert!(gate.enabled(GA_LOCKED), "GA features are untouched");

        let gate = resolve("AllAlpha=true,AlphaFeature=false", v(1, 33)).unwrap();
        assert!(
            !gate.enabled(ALPHA_FEATURE),
            "an explicit setting wins over AllAlpha"
        );
        assert!(gate.enabled(NEW_IN_133));
    }

    #[test]
    fn versioned_defaults_follow_the_emulated_version() {
        // Beta and on by default at 1.33, alpha and off at 1.32.
        let at_133 = resolve("", v(1, 33)).unwrap();
        assert!(at_133.enabled(PROMOTED));
        let at_132 = resolve("", v(1, 32)).unwrap();
        assert!(!at_132.enabled(PROMOTED));
        let status = at_132
            .features()
            .into_iter()
            .find(|f| f.name == "Promoted")
            .unwrap();
        assert_eq!(status.spec.stage, Stage::Alpha);
        // AllAlpha at 1.32 reaches it, AllBeta does not.
        assert!(
            resolve("AllAlpha=true", v(1, 32))
                .unwrap()
                .enabled(PROMOTED)
        );
        assert!(!resolve("AllBeta=true", v(1, 32)).unwrap().enabled(PROMOTED));
        // Before 1.31 it does not exist: off, and cannot be set.
        assert!(!resolve("", v(1, 30)).unwrap().enabled(PROMOTED));
        let errors = resolve("Promoted=true", v(1, 30)).unwrap_err();
        assert_eq!(
            errors,
            vec![Error::PreAlpha {
                name: "Promoted".into(),
                value: true,
                version: v(1, 30)
            }]
        );
        assert!(
            errors[0]
                .to_string()
                .contains("PreAlpha at emulated version 1.30")
        );
        // A lock that only starts at 1.30 does not bind at 1.29.
        assert!(
            !resolve("GaLocked=false", v(1, 29))
                .unwrap()
                .enabled(GA_LOCKED)
        );
    }

    #[test]
    fn use_log_records_feature_value_component_and_instance() {
        let gate = resolve("BetaOn=false", v(1, 33)).unwrap();
        assert!(gate.uses().is_empty());
        let clone = gate.clone();
        assert!(!clone.enabled(BETA_ON));
        assert!(gate.enabled(GA_LOCKED));
        assert!(gate.enabled(GA_LOCKED));
        let expected = vec![
            FeatureUse {
                feature: "BetaOn".into(),
                value: false,
                component: "test-component".into(),
                instance: "instance-1".into(),
            },
            FeatureUse {
                feature: "GaLocked".into(),
                value: true,
                component: "test-component".into(),
                instance: "instance-1".into(),
            },
        ];
        assert_eq!(gate.uses(), expected);
        assert_eq!(gate.drain_uses(), expected);
        assert!(gate.uses().is_empty(), "draining clears the log");
        assert!(!gate.enabled(BETA_ON));
        assert_eq!(
            gate.drain_uses(),
            expected[..1].to_vec(),
            "only what was seen since the drain"
        );
    }

    #[test]
    fn registry_refuses_bad_definitions() {
        let mut r = registry();
        assert!(
            r.add(BETA_ON, &[FeatureSpec::new(v(1, 25), Stage::Beta, true)])
                .is_ok(),
            "identical re-add"
        );
        assert_eq!(
            r.add(BETA_ON, &[FeatureSpec::new(v(1, 25), Stage::Beta, false)]),
            Err(Error::Redefined {
                name: "BetaOn".into()
            })
        );
        assert!(matches!(
            r.add(
                Feature::new("AllAlpha"),
                &[FeatureSpec::new(v(1, 1), Stage::Alpha, false)]
            ),
            Err(Error::InvalidName { .. })
        ));
        assert!(matches!(
            r.add(
                Feature::new("Bad=Name"),
                &[FeatureSpec::new(v(1, 1), Stage::Alpha, false)]
            ),
            Err(Error::InvalidName { .. })
        ));
        assert!(matches!(
            r.add(Feature::new("Empty"), &[]),
            Err(Error::InvalidSpecs { .. })
        ));
        let unordered = [
            FeatureSpec::new(v(1, 30), Stage::Beta, true),
            FeatureSpec::new(v(1, 29), Stage::Alpha, false),
        ];
        assert!(matches!(
            r.add(Feature::new("Unordered"), &unordered),
            Err(Error::InvalidSpecs { .. })
        ));
    }

    #[test]
    fn versions_parse_like_upstream() {
        assert_eq!("1.32".parse::<Version>().unwrap(), v(1, 32));
        assert_eq!("v1.33".parse::<Version>().unwrap(), v(1, 33));
        for bad in ["1", "1.33.1", "a.b", "1.", "", "1.-3"] {
            assert!(bad.parse::<Version>().is_err(), "{bad}");
        }
        assert!(v(1, 9) < v(1, 10));
    }

    #[test]
    fn help_lists_alpha_and_beta_features_at_the_version() {
        let help = registry().help(v(1, 32));
        assert!(help.contains("AllAlpha=true|false (ALPHA - default=false)"));
        assert!(
            help.contains("Promoted=true|false (ALPHA - default=false)"),
            "{help}"
        );
        assert!(!help.contains("NewIn133"), "not yet available at 1.32");
        assert!(!help.contains("GaLocked"), "GA features are not listed");
    }

    #[test]
    fn settings_deserialize_from_a_map_or_a_string() {
        let from_map: FeatureGateSettings =
            serde_json::from_str(r#"{"A": true, "B": "false"}"#).unwrap();
        let from_str: FeatureGateSettings = serde_json::from_str(r#""A=true,B=false""#).unwrap();
        assert_eq!(from_map, from_str);
        assert!(serde_json::from_str::<FeatureGateSettings>(r#"{"A": "maybe"}"#).is_err());
        assert_eq!(
            serde_json::to_string(&from_map).unwrap(),
            r#"{"A":true,"B":false}"#
        );
    }

    #[test]
    fn a_dynamic_feature_changes_at_run_time_and_others_refuse() {
        let mut r = registry();
        r.allow_dynamic(BETA_ON).unwrap();
        r.allow_dynamic(GA_LOCKED).unwrap();
        assert_eq!(
            r.allow_dynamic(Feature::new("Nope")),
            Err(Error::Unknown {
                name: "Nope".into()
            })
        );
        let gate = r
            .resolve(&FeatureGateSettings::default(), v(1, 33), id())
            .unwrap();
        let metrics = crate::metrics::Registry::new();
        gate.register_metrics(&metrics);
        assert!(gate.is_dynamic("BetaOn"));
        assert!(!gate.is_dynamic("BetaOff"));
        // Locked features never change, even when their author allowed it.
        assert!(!gate.is_dynamic("GaLocked"));

        assert!(gate.enabled(BETA_ON));
        assert_eq!(gate.set_dynamic("BetaOn", Some(false)), Ok(true));
        assert!(!gate.enabled(BETA_ON));
        assert_eq!(gate.set_dynamic("BetaOn", Some(false)), Ok(false));
        assert_eq!(gate.configured("BetaOn"), Some(true));
        let uses: Vec<bool> = gate
            .uses()
            .iter()
            .filter(|u| u.feature == "BetaOn")
            .map(|u| u.value)
            .collect();
        assert_eq!(uses, [false, true]);
        let text = metrics.encode().body;
        assert!(
            text.contains("kubernetes_feature_enabled{name=\"BetaOn\",stage=\"BETA\"} 0"),
            "{text}"
        );
        // None puts the configured value back.
        assert_eq!(gate.set_dynamic("BetaOn", None), Ok(true));
        assert!(gate.enabled(BETA_ON));
        assert!(
            metrics
                .encode()
                .body
                .contains("kubernetes_feature_enabled{name=\"BetaOn\",stage=\"BETA\"} 1")
        );

        assert_eq!(
            gate.set_dynamic("BetaOff", Some(true)),
            Err(Error::NotDynamic {
                name: "BetaOff".into()
            })
        );
        assert!(!gate.enabled(BETA_OFF));
        assert_eq!(
            gate.set_dynamic("Missing", Some(true)),
            Err(Error::Unknown {
                name: "Missing".into()
            })
        );
    }

    #[test]
    fn a_feature_cannot_be_both_central_and_dynamic() {
        let mut r = registry();
        r.make_central(BETA_OFF).unwrap();
        assert!(matches!(
            r.allow_dynamic(BETA_OFF),
            Err(Error::InvalidSpecs { .. })
        ));
        r.allow_dynamic(BETA_ON).unwrap();
        assert!(matches!(
            r.make_central(BETA_ON),
            Err(Error::InvalidSpecs { .. })
        ));
        assert!(r.is_central("BetaOff"));
        assert!(!r.is_central("BetaOn"));
    }

    #[test]
    fn a_central_feature_adopts_the_clusters_value_and_nothing_else_does() {
        let mut r = registry();
        r.make_central(BETA_OFF).unwrap();
        let gate = r
            .resolve(
                &FeatureGateSettings::default(),
                v(1, 33),
                UseIdentity::new("controller-manager", "test"),
            )
            .unwrap();
        assert!(gate.is_central("BetaOff"));
        assert!(!gate.is_central("BetaOn"));
        assert_eq!(gate.adopt_central("BetaOff", Some(true)), Ok(true));
        assert!(gate.enabled(BETA_OFF));
        assert_eq!(gate.adopt_central("BetaOff", Some(true)), Ok(false));
        // Back to the configured value.
        assert_eq!(gate.adopt_central("BetaOff", None), Ok(true));
        assert!(!gate.enabled(BETA_OFF));
        assert!(matches!(
            gate.adopt_central("BetaOn", Some(false)),
            Err(Error::NotCentral { .. })
        ));
        assert!(gate.enabled(BETA_ON));
        assert!(matches!(
            gate.set_dynamic("BetaOff", Some(true)),
            Err(Error::NotDynamic { .. })
        ));
        // Below its first version a feature does not exist: nothing adopts it.
        r.make_central(NEW_IN_133).unwrap();
        let old = r
            .resolve(
                &FeatureGateSettings::default(),
                v(1, 32),
                UseIdentity::new("controller-manager", "test"),
            )
            .unwrap();
        assert!(!old.is_central("NewIn133"));
        assert!(old.is_central("BetaOff"));
    }
}
