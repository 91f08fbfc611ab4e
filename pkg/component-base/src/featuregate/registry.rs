//! The features a binary knows, and their resolution into a gate.

use super::ALL_ALPHA;
use super::ALL_BETA;
use super::Error;
use super::Feature;
use super::FeatureGate;
use super::FeatureGateSettings;
use super::FeatureSpec;
use super::Stage;
use super::Stored;
use super::Task;
use super::UseIdentity;
use super::Version;
use super::gate::Entry;
use std::collections::BTreeMap;
use std::collections::BTreeSet;

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
        Ok(FeatureGate::new(version, entries, identity, warnings))
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
