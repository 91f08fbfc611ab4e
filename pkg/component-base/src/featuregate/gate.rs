//! The resolved gate of one component, its use log and its metric.

use super::Error;
use super::Feature;
use super::FeatureSpec;
use super::FeatureUse;
use super::Stage;
use super::UseIdentity;
use super::Version;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;

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
pub(super) struct Entry {
    pub(super) name: &'static str,
    pub(super) spec: FeatureSpec,
    /// The value the settings gave (`--feature-gates` and the defaults).
    pub(super) configured: bool,
    /// Whether the value may change at run time ([`Registry::allow_dynamic`](super::Registry::allow_dynamic), not locked,
    /// existing at the emulated version).
    pub(super) dynamic: bool,
    /// Whether the cluster decides the value ([`Registry::make_central`](super::Registry::make_central), not locked, existing
    /// at the emulated version), so a role other than the API server may adopt it at run time.
    pub(super) central: bool,
    pub(super) enabled: AtomicBool,
    /// Whether a check saw `false` (index 0) or `true` (index 1) since the log was last drained.
    pub(super) seen: [AtomicBool; 2],
}

impl Entry {
    pub(super) fn new(name: &'static str, spec: FeatureSpec, enabled: bool) -> Self {
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
    /// The gate of `entries` (in the registry's order) at `version`, for `identity`.
    pub(super) fn new(
        version: Version,
        entries: Vec<Entry>,
        identity: UseIdentity,
        warnings: Vec<String>,
    ) -> Self {
        let by_name = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.name, i))
            .collect();
        Self {
            inner: Arc::new(GateInner {
                version,
                entries,
                by_name,
                identity,
                warnings,
                metric: std::sync::OnceLock::new(),
            }),
        }
    }

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
    /// it with [`Registry::allow_dynamic`](super::Registry::allow_dynamic) and it is not locked to its default.
    pub fn is_dynamic(&self, name: &str) -> bool {
        self.entry(name).is_some_and(|e| e.dynamic)
    }

    /// The value the feature `name` has from the settings (`--feature-gates` and the
    /// defaults), whatever [`FeatureGate::set_dynamic`] made of it since; `None` when unknown.
    pub fn configured(&self, name: &str) -> Option<bool> {
        self.entry(name).map(|e| e.configured)
    }

    /// Whether the feature `name` is central ([`Registry::make_central`](super::Registry::make_central)) and not locked: the
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
