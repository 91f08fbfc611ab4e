//! The role side of Feature objects at run time: a role's gate follows the Feature objects of
//! the features whose value the cluster decides, and the role learns each Feature's state.
//!
//! # Dynamic features (KEP-3920 stage 3)
//!
//! A feature is dynamic in a cluster when two things hold: its author declared that the binary
//! consults it at run time and needs nothing else to act on it
//! ([`genplane_component_base::featuregate::Registry::allow_dynamic`]), and the admin listed it
//! in every API server's `--dynamic-features` (each announces its list on its identity Lease),
//! which the feature-controller announces as the Feature's `status.dynamic`. Clients may then set `spec.desired`; the feature-controller
//! moves `status.state` to `TurningOn` or `TurningOff`, and every role's [`Follower`] sets its
//! gate to the value the state stands for (`On` and `TurningOn` mean on, `Off` and
//! `TurningOff` off). The roles' use reports then show the new value, which is what the
//! transition's `WaitForUses` task waits for: a transition completes only once every live
//! instance runs with the new value.
//!
//! # Central features (KEP-3920 stage 2)
//!
//! A central feature ([`genplane_component_base::featuregate::Registry::make_central`]) is
//! decided by the API servers' `--feature-gates`. The other roles (the controller-manager)
//! follow [`Follower::adopting_central`]: their gate takes the value the Feature's state
//! stands for, as for a dynamic feature, whatever their own flag says; where the flag
//! disagrees the role logs one warning naming both values. Before the Feature says anything
//! (not announced yet, or deleted) the role runs with its own flag.
//!
//! # States
//!
//! [`Follower::states`] hands out the latest `status.state` of every Feature (a `tokio` watch
//! channel, `None` until the first list): the controller-manager starts and stops its gated
//! controllers from it, and keeps the ones that remove a feature's objects running while the
//! cluster turns the feature off.
//!
//! A Feature that is not (or no longer) dynamic, or that is deleted, puts the gate back to the
//! role's own configured value (`--feature-gates` and the defaults). Features the role's
//! binary reads only at start are never changed, whatever the object says.

use std::collections::BTreeMap;
use std::future::Future;

use futures::StreamExt as _;
use genplane_component_base::featuregate::FeatureGate;
use kube::api::{Api, DynamicObject};
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event, watcher};
use serde_json::Value;
use tokio::sync::watch;

use crate::uses::feature_resource;

/// What a Feature object says of its feature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    /// The feature's name (`spec.featureName`).
    pub feature: String,
    /// Whether the feature-controller announces it dynamic (`status.dynamic`).
    pub dynamic: bool,
    /// Its `status.state`, once announced.
    pub state: Option<String>,
}

impl Observed {
    /// The value the state stands for: on for `On` and `TurningOn`, off for `Off` and
    /// `TurningOff`, `None` before the feature is announced.
    pub fn value(&self) -> Option<bool> {
        match self.state.as_deref() {
            Some("On" | "TurningOn") => Some(true),
            Some("Off" | "TurningOff") => Some(false),
            _ => None,
        }
    }
}

/// What the Feature object `feature` (its JSON) says: `None` when it names no feature.
pub fn observed(feature: &Value) -> Option<Observed> {
    let name = feature.pointer("/spec/featureName")?.as_str()?;
    let status = &feature["status"];
    Some(Observed {
        feature: name.to_owned(),
        dynamic: status["dynamic"].as_bool() == Some(true),
        state: status["state"].as_str().map(str::to_owned),
    })
}

/// The `status.state` of every Feature seen, by feature name; `None` until the first list.
pub type States = Option<BTreeMap<String, String>>;

/// Keeps a role's gate on the values its dynamic (and, when adopting, central) features'
/// Feature objects ask for, and publishes the Features' states.
#[derive(Debug)]
pub struct Follower {
    gate: FeatureGate,
    namespace: String,
    adopt_central: bool,
    states: Option<watch::Sender<States>>,
}

impl Follower {
    /// A follower of the Features in `namespace` (`kube-system` for genplane's roles) for
    /// `gate`.
    pub fn new(gate: FeatureGate, namespace: &str) -> Self {
        Self {
            gate,
            namespace: namespace.to_owned(),
            adopt_central: false,
            states: None,
        }
    }

    /// The same follower, adopting the cluster's value of central features: for every role but
    /// the API servers, whose flags decide those features.
    #[must_use]
    pub fn adopting_central(mut self) -> Self {
        self.adopt_central = true;
        self
    }

    /// The Features' states as they change (the follower then runs even with nothing to set).
    pub fn states(&mut self) -> watch::Receiver<States> {
        self.states
            .get_or_insert_with(|| watch::channel(None).0)
            .subscribe()
    }

    /// Whether the gate has a feature the cluster may change at run time, or someone reads the
    /// states: otherwise there is nothing to follow.
    pub fn has_work(&self) -> bool {
        self.states.is_some()
            || self.gate.features().iter().any(|f| {
                self.gate.is_dynamic(f.name) || (self.adopt_central && self.gate.is_central(f.name))
            })
    }

    /// Applies what one Feature object says; returns whether the gate's value changed.
    /// Features the gate does not know or cannot change at run time are left alone.
    pub fn apply(&self, observed: &Observed) -> bool {
        let name = observed.feature.as_str();
        let value = if self.gate.is_dynamic(name) {
            observed.value().filter(|_| observed.dynamic)
        } else if self.adopt_central && self.gate.is_central(name) {
            observed.value()
        } else {
            return false;
        };
        self.set(name, value)
    }

    /// Puts back the configured value of the feature of a Feature that is gone; returns
    /// whether the gate's value changed.
    pub fn forget(&self, feature: &str) -> bool {
        if self.gate.is_dynamic(feature) || (self.adopt_central && self.gate.is_central(feature)) {
            self.set(feature, None)
        } else {
            false
        }
    }

    fn set(&self, name: &str, value: Option<bool>) -> bool {
        let central = !self.gate.is_dynamic(name);
        let result = if central {
            self.gate.adopt_central(name, value)
        } else {
            self.gate.set_dynamic(name, value)
        };
        let changed = match result {
            Ok(changed) => changed,
            Err(error) => {
                tracing::warn!(%error, "following a Feature");
                return false;
            }
        };
        if changed {
            let configured = self.gate.configured(name).unwrap_or_default();
            let now = value.unwrap_or(configured);
            if central && value.is_some() && now != configured {
                tracing::warn!(
                    feature = name,
                    cluster = now,
                    flag = configured,
                    "this role's --feature-gates disagrees with the cluster on a central feature: \
                     following the cluster (the API servers' flags decide it)"
                );
            } else {
                tracing::info!(
                    feature = name,
                    value = now,
                    from_api = value.is_some(),
                    "feature gate changed at run time"
                );
            }
        }
        changed
    }

    fn publish(&self, features: &BTreeMap<String, Observed>) {
        if let Some(states) = &self.states {
            let fresh: BTreeMap<String, String> = features
                .values()
                .filter_map(|o| Some((o.feature.clone(), o.state.clone()?)))
                .collect();
            states.send_if_modified(|current| {
                let changed = current.as_ref() != Some(&fresh);
                *current = Some(fresh);
                changed
            });
        }
    }

    /// Watches the Features until `stop` resolves, applying each one as it changes (the gate
    /// first, then the published states). A role with nothing to follow returns at once. Watch
    /// failures are retried with backoff; they never stop the role.
    pub async fn run(self, client: kube::Client, stop: impl Future<Output = ()>) {
        if !self.has_work() {
            return;
        }
        let api: Api<DynamicObject> =
            Api::namespaced_with(client, &self.namespace, &feature_resource());
        let events = watcher(api, watcher::Config::default()).default_backoff();
        tokio::pin!(events);
        tokio::pin!(stop);
        let read = |object: &DynamicObject| {
            serde_json::to_value(object)
                .ok()
                .and_then(|json| observed(&json))
        };
        let mut known: BTreeMap<String, Observed> = BTreeMap::new();
        let mut listing: Option<BTreeMap<String, Observed>> = None;
        loop {
            let event = tokio::select! {
                () = &mut stop => return,
                event = events.next() => event,
            };
            match event {
                Some(Ok(Event::Init)) => listing = Some(BTreeMap::new()),
                Some(Ok(Event::InitApply(object))) => {
                    if let (Some(listing), Some(seen)) = (&mut listing, read(&object)) {
                        listing.insert(seen.feature.clone(), seen);
                    }
                }
                Some(Ok(Event::InitDone)) => {
                    let Some(fresh) = listing.take() else {
                        continue;
                    };
                    for gone in known.keys().filter(|f| !fresh.contains_key(*f)) {
                        self.forget(gone);
                    }
                    for seen in fresh.values() {
                        self.apply(seen);
                    }
                    known = fresh;
                    self.publish(&known);
                }
                Some(Ok(Event::Apply(object))) => {
                    if let Some(seen) = read(&object) {
                        self.apply(&seen);
                        known.insert(seen.feature.clone(), seen);
                        self.publish(&known);
                    }
                }
                Some(Ok(Event::Delete(object))) => {
                    if let Some(seen) = read(&object) {
                        self.forget(&seen.feature);
                        known.remove(&seen.feature);
                        self.publish(&known);
                    }
                }
                Some(Err(error)) => {
                    tracing::debug!(%error, "watching Features; retrying");
                }
                None => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use genplane_component_base::featuregate::{
        Feature, FeatureGateSettings, FeatureSpec, Registry, Stage, UseIdentity, Version,
    };
    use serde_json::json;

    const DYNAMIC: Feature = Feature::new("Dynamic");
    const FIXED: Feature = Feature::new("Fixed");
    const CENTRAL: Feature = Feature::new("Central");

    fn gate(settings: &str) -> FeatureGate {
        let mut registry = Registry::new();
        for feature in [DYNAMIC, FIXED, CENTRAL] {
            registry
                .add(
                    feature,
                    &[FeatureSpec::new(Version::new(1, 30), Stage::Beta, true)],
                )
                .unwrap();
        }
        registry.allow_dynamic(DYNAMIC).unwrap();
        registry.make_central(CENTRAL).unwrap();
        registry
            .resolve(
                &settings.parse::<FeatureGateSettings>().unwrap(),
                Version::new(1, 33),
                UseIdentity::new("controller-manager", "host-1"),
            )
            .unwrap()
    }

    fn feature(name: &str, dynamic: bool, state: &str) -> Observed {
        observed(&json!({
            "spec": {"featureName": name},
            "status": {"dynamic": dynamic, "state": state},
        }))
        .unwrap()
    }

    #[test]
    fn the_state_of_a_dynamic_feature_sets_the_gate() {
        let gate = gate("");
        let follower = Follower::new(gate.clone(), "kube-system");
        assert!(follower.has_work());
        let off = feature("Dynamic", true, "TurningOff");
        assert_eq!(off.value(), Some(false));
        assert!(follower.apply(&off));
        assert!(!gate.enabled(DYNAMIC));
        // Applying the same again changes nothing.
        assert!(!follower.apply(&feature("Dynamic", true, "Off")));
        assert!(follower.apply(&feature("Dynamic", true, "TurningOn")));
        assert!(gate.enabled(DYNAMIC));
    }

    #[test]
    fn a_feature_no_longer_dynamic_or_gone_goes_back_to_the_configured_value() {
        let gate = gate("");
        let follower = Follower::new(gate.clone(), "kube-system");
        follower.apply(&feature("Dynamic", true, "Off"));
        assert!(!gate.enabled(DYNAMIC));
        assert!(follower.apply(&feature("Dynamic", false, "Off")));
        assert!(gate.enabled(DYNAMIC));
        follower.apply(&feature("Dynamic", true, "Off"));
        assert!(follower.forget("Dynamic"));
        assert!(gate.enabled(DYNAMIC));
        // Not announced yet: nothing asked.
        let fresh = observed(&json!({"spec": {"featureName": "Dynamic"}})).unwrap();
        assert_eq!(fresh.value(), None);
        assert_eq!(observed(&json!({"spec": {}})), None);
    }

    #[test]
    fn features_read_only_at_start_never_change() {
        let gate = gate("");
        let follower = Follower::new(gate.clone(), "kube-system").adopting_central();
        // Even when the object says it is dynamic (another binary may allow it).
        assert!(!follower.apply(&feature("Fixed", true, "Off")));
        assert!(gate.enabled(FIXED));
        assert!(!follower.apply(&feature("Unknown", true, "Off")));
        assert!(!follower.forget("Fixed"));
    }

    #[test]
    fn roles_other_than_the_api_servers_adopt_a_central_features_state() {
        let gate = gate("Central=false");
        // The API servers decide it: their follower leaves it alone.
        let deciding = Follower::new(gate.clone(), "kube-system");
        assert!(!deciding.apply(&feature("Central", false, "On")));
        assert!(!gate.enabled(CENTRAL));
        let adopting = Follower::new(gate.clone(), "kube-system").adopting_central();
        assert!(adopting.has_work());
        assert!(adopting.apply(&feature("Central", false, "TurningOn")));
        assert!(gate.enabled(CENTRAL));
        assert!(!adopting.apply(&feature("Central", false, "On")));
        assert!(adopting.apply(&feature("Central", false, "TurningOff")));
        assert!(!gate.enabled(CENTRAL));
        // Deleted: the role's own flag again.
        adopting.apply(&feature("Central", false, "On"));
        assert!(adopting.forget("Central"));
        assert!(!gate.enabled(CENTRAL));
    }

    #[test]
    fn states_are_published_once_listed() {
        let mut follower = Follower::new(gate(""), "kube-system");
        let states = follower.states();
        assert!(follower.has_work());
        assert_eq!(*states.borrow(), None);
        let mut features = BTreeMap::new();
        let on = feature("Central", false, "TurningOff");
        features.insert(on.feature.clone(), on);
        follower.publish(&features);
        assert_eq!(
            *states.borrow(),
            Some(BTreeMap::from([(
                "Central".to_owned(),
                "TurningOff".to_owned()
            )]))
        );
    }
}
