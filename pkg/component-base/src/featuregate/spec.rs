//! A feature, its maturity and its spec at a version.

use super::Version;
use std::fmt;

/// The maturity of a feature at a given version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    /// Not available at this version: off and cannot be set.
    PreAlpha,
    /// Experimental; off by default.
    Alpha,
    /// Well tested; usually on by default.
    Beta,
    /// Generally available; usually locked on.
    Ga,
    /// To be removed.
    Deprecated,
}

impl Stage {
    /// The stage as Kubernetes spells it in help texts and in the `stage` label of
    /// `kubernetes_feature_enabled` (GA is the empty string there).
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::PreAlpha => "PRE-ALPHA",
            Stage::Alpha => "ALPHA",
            Stage::Beta => "BETA",
            Stage::Ga => "",
            Stage::Deprecated => "DEPRECATED",
        }
    }

    pub(super) fn describe(self) -> &'static str {
        match self {
            Stage::Ga => "GA",
            other => other.as_str(),
        }
    }
}

/// How a feature behaves from one version on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FeatureSpec {
    /// The first version this spec applies to.
    pub since: Version,
    /// The maturity from that version on.
    pub stage: Stage,
    /// Whether the feature is on unless set otherwise.
    pub default: bool,
    /// Whether the feature can only be set to its default.
    pub lock_to_default: bool,
}

impl FeatureSpec {
    /// A spec that applies from `since` on, not locked.
    pub const fn new(since: Version, stage: Stage, default: bool) -> Self {
        Self {
            since,
            stage,
            default,
            lock_to_default: false,
        }
    }

    /// The same spec, locked to its default.
    #[must_use]
    pub const fn locked(mut self) -> Self {
        self.lock_to_default = true;
        self
    }

    /// What a feature is at a version before its first spec: unavailable.
    pub(super) const fn pre_alpha(since: Version) -> Self {
        Self::new(since, Stage::PreAlpha, false)
    }
}

/// A handle on a feature by name; declare one `const` per feature and check it with
/// [`FeatureGate::enabled`](super::FeatureGate::enabled).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Feature(&'static str);

impl Feature {
    /// The feature named `name`.
    pub const fn new(name: &'static str) -> Self {
        Self(name)
    }

    /// The feature's name.
    pub const fn name(self) -> &'static str {
        self.0
    }
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}
