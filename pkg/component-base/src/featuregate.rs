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

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};

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

/// A Kubernetes minor version, `MAJOR.MINOR` (patch versions are not meaningful for features).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    /// The major version.
    pub major: u32,
    /// The minor version.
    pub minor: u32,
}

impl Version {
    /// The version `major.minor`.
    pub const fn new(major: u32, minor: u32) -> Self {
        Self { major, minor }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl FromStr for Version {
    type Err = Error;

    /// Parses `1.33` or `v1.33`; a patch version (`1.33.2`) is refused, as upstream refuses it.
    fn from_str(input: &str) -> Result<Self, Error> {
        let invalid = |reason| Error::InvalidVersion {
            input: input.to_owned(),
            reason,
        };
        let trimmed = input.trim();
        let digits = trimmed.strip_prefix('v').unwrap_or(trimmed);
        let mut parts = digits.split('.');
        let (Some(major), Some(minor)) = (parts.next(), parts.next()) else {
            return Err(invalid("must be MAJOR.MINOR, e.g. 1.33"));
        };
        if parts.next().is_some() {
            return Err(invalid("a patch version is not allowed; use MAJOR.MINOR"));
        }
        let number = |s: &str| -> Result<u32, Error> {
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(invalid("must be MAJOR.MINOR, e.g. 1.33"));
            }
            s.parse().map_err(|_| invalid("number too large"))
        };
        Ok(Self::new(number(major)?, number(minor)?))
    }
}

impl Serialize for Version {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Version {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(de::Error::custom)
    }
}

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

    fn describe(self) -> &'static str {
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
    const fn pre_alpha(since: Version) -> Self {
        Self::new(since, Stage::PreAlpha, false)
    }
}

/// A handle on a feature by name; declare one `const` per feature and check it with
/// [`FeatureGate::enabled`].
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

/// A task a transition of a feature must run besides waiting for every component to agree
/// (KEP-3920's server flow), declared next to the feature's registration with
/// [`Registry::add_turn_off_task`]. The feature-controller runs them in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Task {
    /// Remove fields from every stored object of a resource, so that nothing the feature wrote
    /// is left when it is off. Each field is a dotted path (`spec.strategy`); the objects are
    /// patched with a JSON merge patch that sets each present field to `null`, which the
    /// strategy of a disabled field accepts (it only keeps a field the update still carries).
    ClearField {
        /// The API group of the resource (`""` for core).
        group: &'static str,
        /// Its version.
        version: &'static str,
        /// Its plural name.
        resource: &'static str,
        /// Its kind.
        kind: &'static str,
        /// The dotted paths of the fields to clear.
        fields: &'static [&'static str],
    },
    /// Wait until no object of a resource served only while the feature is on is stored. The
    /// objects stay readable and deletable while the cluster turns the feature off (roles whose
    /// gate is off keep serving them and running what removes them); the feature-controller
    /// deletes them itself only when an admin annotated the Feature
    /// `featuregates.genplane.io/delete-objects: "true"`.
    WaitForObjectsRemoved {
        /// The API group of the resource.
        group: &'static str,
        /// Its version.
        version: &'static str,
        /// Its plural name.
        resource: &'static str,
        /// Its kind.
        kind: &'static str,
    },
    /// Delete the objects of a resource that the feature's own code made (picked by a label),
    /// once every instance runs with the feature off: nothing renews or removes them any more.
    /// Never for objects users make.
    DeleteObjects {
        /// The API group of the resource (`""` for core).
        group: &'static str,
        /// Its version.
        version: &'static str,
        /// Its plural name.
        resource: &'static str,
        /// Its kind.
        kind: &'static str,
        /// The label selector (`key=value`) picking the feature's objects.
        selector: &'static str,
    },
}

impl Task {
    /// The task's type, as the Feature's `status.tasks[].type` names it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Task::ClearField { .. } => "ClearField",
            Task::WaitForObjectsRemoved { .. } => "WaitForObjectsRemoved",
            Task::DeleteObjects { .. } => "DeleteObjects",
        }
    }

    /// What the task works on, in words.
    pub fn target(&self) -> String {
        self.stored().describe()
    }

    /// What the task removes from storage.
    pub fn stored(&self) -> Stored {
        match *self {
            Task::ClearField {
                group,
                version,
                resource,
                kind,
                fields,
            } => Stored::Fields {
                group,
                version,
                resource,
                kind,
                fields,
            },
            Task::WaitForObjectsRemoved {
                group,
                version,
                resource,
                kind,
            } => Stored::Objects {
                group,
                version,
                resource,
                kind,
                selector: "",
            },
            Task::DeleteObjects {
                group,
                version,
                resource,
                kind,
                selector,
            } => Stored::Objects {
                group,
                version,
                resource,
                kind,
                selector,
            },
        }
    }
}

/// What a feature leaves in storage while it is on: what must be gone before a version of the
/// binary without the feature runs (`genplane feature-controller check --to-version`), and what
/// "no dangling state" means once it is off. The turn-off tasks declare it
/// ([`Task::stored`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Stored {
    /// Fields of the objects of a resource.
    Fields {
        /// The API group of the resource (`""` for core).
        group: &'static str,
        /// Its version.
        version: &'static str,
        /// Its plural name.
        resource: &'static str,
        /// Its kind.
        kind: &'static str,
        /// The dotted paths of the fields.
        fields: &'static [&'static str],
    },
    /// Objects of a resource: every one (a resource served only while the feature is on), or
    /// those a label selector picks (objects the feature's code made).
    Objects {
        /// The API group of the resource (`""` for core).
        group: &'static str,
        /// Its version.
        version: &'static str,
        /// Its plural name.
        resource: &'static str,
        /// Its kind.
        kind: &'static str,
        /// A label selector (`key=value`); empty for every object.
        selector: &'static str,
    },
}

impl Stored {
    /// The resource the state is in: `(group, version, resource, kind)`.
    pub fn resource(&self) -> (&'static str, &'static str, &'static str, &'static str) {
        match *self {
            Stored::Fields {
                group,
                version,
                resource,
                kind,
                ..
            }
            | Stored::Objects {
                group,
                version,
                resource,
                kind,
                ..
            } => (group, version, resource, kind),
        }
    }

    /// The state in words: `leases.coordination.k8s.io spec.strategy,spec.preferredHolder`, or
    /// `networkclaims.networkregistry.genplane.io`.
    pub fn describe(&self) -> String {
        let (group, _, resource, _) = self.resource();
        let resource = if group.is_empty() {
            resource.to_owned()
        } else {
            format!("{resource}.{group}")
        };
        match self {
            Stored::Fields { fields, .. } => format!("{resource} {}", fields.join(",")),
            Stored::Objects { selector: "", .. } => resource,
            Stored::Objects { selector, .. } => format!("{resource} labelled {selector}"),
        }
    }
}

/// Every feature a binary knows, with its versioned specs.
#[derive(Clone, Debug, Default)]
pub struct Registry {
    features: BTreeMap<&'static str, Vec<FeatureSpec>>,
    turn_off_tasks: BTreeMap<&'static str, Vec<Task>>,
    dynamic: BTreeSet<&'static str>,
    central: BTreeSet<&'static str>,
}

impl Registry {
    /// An empty registry; `AllAlpha` and `AllBeta` are always understood.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a feature with its specs, ordered by strictly increasing version.
    ///
    /// Registering the same feature again with identical specs does nothing; with different
    /// specs it is an error.
    pub fn add(&mut self, feature: Feature, specs: &[FeatureSpec]) -> Result<(), Error> {
        let name = feature.name();
        validate_name(name)?;
        if name == ALL_ALPHA || name == ALL_BETA {
            return Err(Error::InvalidName {
                name: name.to_owned(),
                reason: "reserved",
            });
        }
        if specs.is_empty() {
            return Err(Error::InvalidSpecs {
                name: name.to_owned(),
                reason: "no specs",
            });
        }
        if specs.windows(2).any(|w| w[0].since >= w[1].since) {
            return Err(Error::InvalidSpecs {
                name: name.to_owned(),
                reason: "versions must be strictly increasing",
            });
        }
        if specs.iter().any(|s| s.stage == Stage::PreAlpha) {
            return Err(Error::InvalidSpecs {
                name: name.to_owned(),
                reason: "PreAlpha is implied before the first spec and cannot be registered",
            });
        }
        match self.features.get(name) {
            Some(existing) if existing.as_slice() == specs => Ok(()),
            Some(_) => Err(Error::Redefined {
                name: name.to_owned(),
            }),
            None => {
                self.features.insert(name, specs.to_vec());
                Ok(())
            }
        }
    }

    /// Declares a task that turning `feature` off runs after every component agreed (see
    /// [`Task`]); tasks run in the order they are added. The feature must be registered.
    pub fn add_turn_off_task(&mut self, feature: Feature, task: Task) -> Result<(), Error> {
        let Some((&name, _)) = self.features.get_key_value(feature.name()) else {
            return Err(Error::Unknown {
                name: feature.name().to_owned(),
            });
        };
        self.turn_off_tasks.entry(name).or_default().push(task);
        Ok(())
    }

    /// The tasks turning the feature `name` off runs, in order.
    pub fn turn_off_tasks(&self, name: &str) -> &[Task] {
        self.turn_off_tasks.get(name).map_or(&[], Vec::as_slice)
    }

    /// The state the feature `name` leaves in storage: what its turn-off tasks remove.
    pub fn stored(&self, name: &str) -> Vec<Stored> {
        self.turn_off_tasks(name).iter().map(Task::stored).collect()
    }

    /// The names of every registered feature, in order.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.features.keys().copied()
    }

    /// Declares that the binary consults `feature` each time it acts on it (never only at
    /// start) and that it needs no other configuration, so its value may change while the
    /// binary runs ([`FeatureGate::set_dynamic`]). Only such features may be made dynamic
    /// (KEP-3920 stage 3: config-less features only). The feature must be registered.
    pub fn allow_dynamic(&mut self, feature: Feature) -> Result<(), Error> {
        let Some((&name, _)) = self.features.get_key_value(feature.name()) else {
            return Err(Error::Unknown {
                name: feature.name().to_owned(),
            });
        };
        if self.central.contains(name) {
            return Err(Error::InvalidSpecs {
                name: name.to_owned(),
                reason: "a feature cannot be both central and dynamic",
            });
        }
        self.dynamic.insert(name);
        Ok(())
    }

    /// Declares `feature` central (KEP-3920 stage 2): the cluster's desired value is decided by
    /// the API servers' `--feature-gates` (on only when every live API server runs it on), not
    /// by the feature-controller's own. The feature must be registered; a feature cannot be
    /// both central and dynamic.
    pub fn make_central(&mut self, feature: Feature) -> Result<(), Error> {
        let Some((&name, _)) = self.features.get_key_value(feature.name()) else {
            return Err(Error::Unknown {
                name: feature.name().to_owned(),
            });
        };
        if self.dynamic.contains(name) {
            return Err(Error::InvalidSpecs {
                name: name.to_owned(),
                reason: "a feature cannot be both central and dynamic",
            });
        }
        self.central.insert(name);
        Ok(())
    }

    /// Whether the feature `name` was declared with [`Registry::make_central`].
    pub fn is_central(&self, name: &str) -> bool {
        self.central.contains(name)
    }

    /// Whether the feature `name` was declared with [`Registry::allow_dynamic`].
    pub fn is_dynamic_capable(&self, name: &str) -> bool {
        self.dynamic.contains(name)
    }

    /// Adds every feature and task of `other` (the same feature with different specs is an
    /// error): the registry of a binary is the union of its roles'.
    pub fn merge(&mut self, other: &Registry) -> Result<(), Error> {
        for (&name, specs) in &other.features {
            self.add(Feature::new(name), specs)?;
        }
        for (&name, tasks) in &other.turn_off_tasks {
            let mine = self.turn_off_tasks.entry(name).or_default();
            for task in tasks {
                if !mine.contains(task) {
                    mine.push(*task);
                }
            }
        }
        self.dynamic.extend(other.dynamic.iter().copied());
        self.central.extend(other.central.iter().copied());

        Ok(())
    }

    /// The spec of a registered feature at `version`, or `None` for an unknown feature.
    pub fn spec_at(&self, name: &str, version: Version) -> Option<FeatureSpec> {
        let specs = self.features.get(name)?;
        Some(
            specs
                .iter()
                .rev()
                .find(|s| s.since <= version)
                .copied()
                .unwrap_or(FeatureSpec::pre_alpha(version)),
        )
    }

    /// The help text for `--feature-gates`: every feature available at `version` that is not GA
    /// or deprecated, as `Name=true|false (STAGE - default=VALUE)`.
    pub fn help(&self, version: Version) -> String {
        let mut lines = vec![
            format!("{ALL_ALPHA}=true|false (ALPHA - default=false)"),
            format!("{ALL_BETA}=true|false (BETA - default=false)"),
        ];
        for name in self.features.keys() {
            let Some(spec) = self.spec_at(name, version) else {
                continue;
            };
            if matches!(spec.stage, Stage::Alpha | Stage::Beta) {
                lines.push(format!(
                    "{name}=true|false ({} - default={})",
                    spec.stage.describe(),
                    spec.default
                ));
            }
        }
        lines.join("\n")
    }

    /// Applies `settings` at the emulated `version` and returns the gate, or every error found.
    pub fn resolve(
        &self,
        settings: &FeatureGateSettings,
        version: Version,
        identity: UseIdentity,
    ) -> Result<FeatureGate, Vec<Error>> {
        let mut errors = Vec::new();
        let mut warnings = Vec::new();
        for (name, &value) in &settings.0 {
            if name == ALL_ALPHA || name == ALL_BETA {
                continue;
            }
            let Some(spec) = self.spec_at(name, version) else {
                errors.push(Error::Unknown { name: name.clone() });
                continue;
            };
            if spec.stage == Stage::PreAlpha {
                errors.push(Error::PreAlpha {
                    name: name.clone(),
                    value,
                    version,
                });
            } else if spec.lock_to_default && value != spec.default {
                errors.push(Error::Locked {
                    name: name.clone(),
                    value,
                    locked_to: spec.default,
                });
            } else if matches!(spec.stage, Stage::Ga | Stage::Deprecated) {
                warnings.push(format!(
                    "setting {} feature gate {name}={value}; it will be removed in a future release",
                    spec.stage.describe()
                ));
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }

        let all_alpha = settings.0.get(ALL_ALPHA).copied();
        let all_beta = settings.0.get(ALL_BETA).copied();
        let mut entries = Vec::with_capacity(self.features.len() + 2);
        for (pseudo, stage, value) in [
            (ALL_ALPHA, Stage::Alpha, all_alpha),
            (ALL_BETA, Stage::Beta, all_beta),
        ] {
            let spec = FeatureSpec::new(Version::new(0, 0), stage, false);
            entries.push(Entry::new(pseudo, spec, value.unwrap_or(false)));
        }
        for &name in self.features.keys() {
            let spec = self
                .spec_at(name, version)
                .expect("invariant: iterating registered features");
            let by_stage = match spec.stage {
                Stage::Alpha => all_alpha,
                Stage::Beta => all_beta,
                _ => None,
            };
            let value = match settings.0.get(name) {
                _ if spec.stage == Stage::PreAlpha => false,
                Some(&explicit) => explicit,
                None if spec.lock_to_default => spec.default,
                None => by_stage.unwrap_or(spec.default),
            };
            let mut entry = Entry::new(name, spec, value);
            // A feature that does not exist yet at the emulated version never changes.
            let changeable = !spec.lock_to_default && spec.stage != Stage::PreAlpha;
            entry.dynamic = self.dynamic.contains(name) && changeable;
            entry.central = self.central.contains(name) && changeable;
            entries.push(entry);
        }
        let by_name = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.name, i))
            .collect();
        Ok(FeatureGate {
            inner: Arc::new(GateInner {
                version,
                entries,
                by_name,
                identity,
                warnings,
                metric: std::sync::OnceLock::new(),
            }),
        })
    }
}

fn validate_name(name: &str) -> Result<(), Error> {
    let invalid = |reason| Error::InvalidName {
        name: name.to_owned(),
        reason,
    };
    if name.is_empty() {
        return Err(invalid("empty"));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
    {
        return Err(invalid(
            "only letters, digits, '-', '_' and '.' are allowed",
        ));
    }
    Ok(())
}

/// The values asked for with `--feature-gates` or the `feature-gates` key of a config file.
///
/// Parses from `A=true,B=false` (as the flag and environment variables give it) and deserializes
/// from that string or from a map of booleans (as a config file gives it). Values accept what
/// Go's `strconv.ParseBool` accepts: `1 t T TRUE true True 0 f F FALSE false False`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FeatureGateSettings(pub BTreeMap<String, bool>);

impl FeatureGateSettings {
    /// Parses `A=true,B=false`, collecting every malformed pair.
    pub fn parse(input: &str) -> Result<Self, Vec<Error>> {
        let mut map = BTreeMap::new();
        let mut errors = Vec::new();
        for pair in input.split(',') {
            let pair = pair.trim();
            if pair.is_empty() {
                continue;
            }
            let Some((key, value)) = pair.split_once('=') else {
                errors.push(Error::MissingValue {
                    key: pair.to_owned(),
                });
                continue;
            };
            let (key, value) = (key.trim(), value.trim());
            if key.is_empty() {
                errors.push(Error::MissingName {
                    pair: pair.to_owned(),
                });
                continue;
            }
            match crate::strconv::parse_bool(value) {
                Some(b) => {
                    map.insert(key.to_owned(), b);
                }
                None => errors.push(Error::InvalidValue {
                    key: key.to_owned(),
                    value: value.to_owned(),
                }),
            }
        }
        if errors.is_empty() {
            Ok(Self(map))
        } else {
            Err(errors)
        }
    }

    /// Whether no feature is set.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl FromStr for FeatureGateSettings {
    type Err = String;

    fn from_str(input: &str) -> Result<Self, String> {
        Self::parse(input).map_err(|errors| join_errors(&errors))
    }
}

impl fmt::Display for FeatureGateSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (k, v) in &self.0 {
            if !first {
                f.write_str(",")?;
            }
            first = false;
            write!(f, "{k}={v}")?;
        }
        Ok(())
    }
}

impl Serialize for FeatureGateSettings {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for FeatureGateSettings {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SettingsVisitor;

        impl<'de> Visitor<'de> for SettingsVisitor {
            type Value = FeatureGateSettings;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of feature names to booleans, or \"A=true,B=false\"")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                v.parse().map_err(E::custom)
            }

            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
                let mut out = BTreeMap::new();
                while let Some((key, value)) = map.next_entry::<String, BoolOrString>()? {
                    let value = match value {
                        BoolOrString::Bool(b) => b,
                        BoolOrString::String(s) => crate::strconv::parse_bool(s.trim())
                            .ok_or_else(|| {
                                de::Error::custom(Error::InvalidValue {
                                    key: key.clone(),
                                    value: s.clone(),
                                })
                            })?,
                    };
                    out.insert(key, value);
                }
                Ok(FeatureGateSettings(out))
            }
        }

        deserializer.deserialize_any(SettingsVisitor)
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum BoolOrString {
    Bool(bool),
    String(String),
}

/// Joins errors into one line, for places that can only carry one message.
pub fn join_errors(errors: &[Error]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// Who checks features through a gate: recorded with every use.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct UseIdentity {
    /// The component, e.g. `apiserver`.
    pub component: String,
    /// The instance of that component, e.g. a host name with a process id.
    pub instance: String,
}

impl UseIdentity {
    /// The identity of `instance` of `component`.
    pub fn new(component: impl Into<String>, instance: impl Into<String>) -> Self {
        Self {
            component: component.into(),
            instance: instance.into(),
        }
    }
}

/// One entry of the use log: a component instance checked a feature and saw a value.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct FeatureUse {
    /// The feature that was checked.
    pub feature: String,
    /// The value the check returned.
    pub value: bool,
    /// The component that checked it.
    pub component: String,
    /// The instance of that component.
    pub instance: String,
}

/// A feature's state in a resolved gate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeatureStatus {
    /// The feature name.
    pub name: &'static str,
    /// The spec in force at the emulated version.
    pub spec: FeatureSpec,
    /// Whether the feature is on.
    pub enabled: bool,
}

/// The resolved feature gate of one component: which features are on, plus the use log.
///
/// Cheap to clone; clones share the same values and the same use log.
#[derive(Clone, Debug)]
pub struct FeatureGate {
    inner: Arc<GateInner>,
}

#[derive(Debug)]
struct GateInner {
    version: Version,
    entries: Vec<Entry>,
    by_name: HashMap<&'static str, usize>,
    identity: UseIdentity,
    warnings: Vec<String>,
    /// `kubernetes_feature_enabled`, once registered, kept current by
    /// [`FeatureGate::set_dynamic`].
    metric: std::sync::OnceLock<Family<FeatureLabels, Gauge>>,
}

#[derive(Debug)]
struct Entry {
    name: &'static str,
    spec: FeatureSpec,
    /// The value the settings gave (`--feature-gates` and the defaults).
    configured: bool,
    /// Whether the value may change at run time ([`Registry::allow_dynamic`], not locked,
    /// existing at the emulated version).
    dynamic: bool,
    /// Whether the cluster decides the value ([`Registry::make_central`], not locked, existing
    /// at the emulated version), so a role other than the API server may adopt it at run time.
    central: bool,
    enabled: AtomicBool,
    /// Whether a check saw `false` (index 0) or `true` (index 1) since the log was last drained.
    seen: [AtomicBool; 2],
}

impl Entry {
    fn new(name: &'static str, spec: FeatureSpec, enabled: bool) -> Self {
        Self {
            name,
            spec,
            configured: enabled,
            dynamic: false,
            central: false,
            enabled: AtomicBool::new(enabled),
            seen: [AtomicBool::new(false), AtomicBool::new(false)],
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FeatureLabels {
    name: String,
    stage: String,
}

impl FeatureGate {
    /// Whether `feature` is on, recording the check in the use log.
    ///
    /// A feature this gate does not know is off. That is a programming error (the feature was
    /// not added to the registry), so debug builds assert on it.
    pub fn enabled(&self, feature: Feature) -> bool {
        let Some(&index) = self.inner.by_name.get(feature.name()) else {
            debug_assert!(false, "feature {feature} is not registered");
            return false;
        };
        let entry = &self.inner.entries[index];
        let value = entry.enabled.load(Ordering::Relaxed);
        let seen = &entry.seen[usize::from(value)];
        if !seen.load(Ordering::Relaxed) {
            seen.store(true, Ordering::Relaxed);
        }
        value
    }

    /// The version this gate emulates.
    pub fn emulated_version(&self) -> Version {
        self.inner.version
    }

    /// Who this gate records uses for.
    pub fn identity(&self) -> &UseIdentity {
        &self.inner.identity
    }

    /// Warnings produced while resolving the settings (e.g. setting a GA feature), for the
    /// caller to log once logging is set up.
    pub fn warnings(&self) -> &[String] {
        &self.inner.warnings
    }

    /// Every known feature with its spec at the emulated version and its value, by name;
    /// `AllAlpha` and `AllBeta` first, as upstream lists them.
    pub fn features(&self) -> Vec<FeatureStatus> {
        self.inner
            .entries
            .iter()
            .map(|e| FeatureStatus {
                name: e.name,
                spec: e.spec,
                enabled: e.enabled.load(Ordering::Relaxed),
            })
            .collect()
    }

    /// The uses recorded since the gate was made or last drained, ordered by feature name.
    pub fn uses(&self) -> Vec<FeatureUse> {
        self.collect_uses(|flag| flag.load(Ordering::Relaxed))
    }

    /// The uses recorded since the gate was made or last drained, clearing them: a reporter
    /// calls this each time it writes uses to the API, so that a later call shows only the
    /// values seen since.
    pub fn drain_uses(&self) -> Vec<FeatureUse> {
        self.collect_uses(|flag| flag.swap(false, Ordering::Relaxed))
    }

    fn collect_uses(&self, mut take: impl FnMut(&AtomicBool) -> bool) -> Vec<FeatureUse> {
        let mut uses = Vec::new();
        let mut entries: Vec<&Entry> = self.inner.entries.iter().collect();
        entries.sort_by_key(|e| e.name);
        for entry in entries {
            for (value, flag) in [(false, &entry.seen[0]), (true, &entry.seen[1])] {
                if take(flag) {
                    uses.push(FeatureUse {
                        feature: entry.name.to_owned(),
                        value,
                        component: self.inner.identity.component.clone(),
                        instance: self.inner.identity.instance.clone(),
                    });
                }
            }
        }
        uses
    }

    /// Registers `kubernetes_feature_enabled{name,stage}` (1 when on, 0 when off) for every
    /// feature that exists at the emulated version, as Kubernetes components export it. The
    /// values follow [`FeatureGate::set_dynamic`].
    pub fn register_metrics(&self, registry: &crate::metrics::Registry) {
        let family = self.inner.metric.get_or_init(|| {
            let family = Family::<FeatureLabels, Gauge>::default();
            for entry in &self.inner.entries {
                if entry.spec.stage == Stage::PreAlpha {
                    continue;
                }
                family
                    .get_or_create(&FeatureLabels::of(entry))
                    .set(i64::from(entry.enabled.load(Ordering::Relaxed)));
            }
            family
        });
        registry.register(
            "kubernetes_feature_enabled",
            "Whether each feature gate of this component is enabled (1) or not (0), by stage",
            family.clone(),
        );
    }

    /// Whether the feature `name` may change value while the binary runs: its author declared
    /// it with [`Registry::allow_dynamic`] and it is not locked to its default.
    pub fn is_dynamic(&self, name: &str) -> bool {
        self.entry(name).is_some_and(|e| e.dynamic)
    }

    /// The value the feature `name` has from the settings (`--feature-gates` and the
    /// defaults), whatever [`FeatureGate::set_dynamic`] made of it since; `None` when unknown.
    pub fn configured(&self, name: &str) -> Option<bool> {
        self.entry(name).map(|e| e.configured)
    }

    /// Whether the feature `name` is central ([`Registry::make_central`]) and not locked: the
    /// API servers' flags decide the cluster's value, which other roles adopt
    /// ([`FeatureGate::adopt_central`]).
    pub fn is_central(&self, name: &str) -> bool {
        self.entry(name).is_some_and(|e| e.central)
    }

    /// Changes the value of a dynamic feature at run time: `Some(value)` sets it, `None` puts
    /// back the configured value. Every check after the change sees the new value (the change is
    /// one atomic store), and the use log records it as checks happen. Returns whether the
    /// value changed.
    ///
    /// A feature the gate does not know, or one not dynamic ([`FeatureGate::is_dynamic`]), is
    /// an error and keeps its value.
    pub fn set_dynamic(&self, name: &str, value: Option<bool>) -> Result<bool, Error> {
        let Some(entry) = self.entry(name) else {
            return Err(Error::Unknown {
                name: name.to_owned(),
            });
        };
        if !entry.dynamic {
            return Err(Error::NotDynamic {
                name: name.to_owned(),
            });
        }
        Ok(self.store(entry, value))
    }

    /// Adopts the cluster's value of a central feature at run time (a role other than the API
    /// servers, which decide it): `Some(value)` sets it, `None` puts back the configured value
    /// (no Feature object says anything yet). As [`FeatureGate::set_dynamic`] otherwise; a
    /// feature not central ([`FeatureGate::is_central`]) is an error and keeps its value.
    pub fn adopt_central(&self, name: &str, value: Option<bool>) -> Result<bool, Error> {
        let Some(entry) = self.entry(name) else {
            return Err(Error::Unknown {
                name: name.to_owned(),
            });
        };
        if !entry.central {
            return Err(Error::NotCentral {
                name: name.to_owned(),
            });
        }
        Ok(self.store(entry, value))
    }

    /// Stores `value` (the configured one for `None`) as `entry`'s, keeping the metric current;
    /// returns whether the value changed.
    fn store(&self, entry: &Entry, value: Option<bool>) -> bool {
        let value = value.unwrap_or(entry.configured);
        let before = entry.enabled.swap(value, Ordering::Relaxed);
        if let Some(family) = self.inner.metric.get() {
            family
                .get_or_create(&FeatureLabels::of(entry))
                .set(i64::from(value));
        }
        before != value
    }

    fn entry(&self, name: &str) -> Option<&Entry> {
        let &index = self.inner.by_name.get(name)?;
        Some(&self.inner.entries[index])
    }
}

impl FeatureLabels {
    fn of(entry: &Entry) -> Self {
        Self {
            name: entry.name.to_owned(),
            stage: entry.spec.stage.as_str().to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
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
        let text = metrics.encode(None).body;
        assert!(
            text.contains("kubernetes_feature_enabled{name=\"BetaOn\",stage=\"BETA\"} 0"),
            "{text}"
        );
        // None puts the configured value back.
        assert_eq!(gate.set_dynamic("BetaOn", None), Ok(true));
        assert!(gate.enabled(BETA_ON));
        assert!(
            metrics
                .encode(None)
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
