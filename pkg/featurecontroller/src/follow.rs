//! The role side of dynamic features (KEP-3920 stage 3): a role's gate follows the Feature
//! objects of the features it may change at run time.
//!
//! A feature is dynamic in a cluster when two things hold: its author declared that the binary
//! consults it at run time and needs nothing else to act on it
//! ([`genplane_component_base::featuregate::Registry::allow_dynamic`]), and the admin listed it
//! in the feature-controller's `--dynamic-features`, which the feature-controller announces as
//! the Feature's `status.dynamic`. Clients may then set `spec.desired`; the feature-controller
//! moves `status.state` to `TurningOn` or `TurningOff`, and every role's [`Follower`] sets its
//! gate to the value the state stands for (`On` and `TurningOn` mean on, `Off` and
//! `TurningOff` off). The roles' use reports then show the new value, which is what the
//! transition's `WaitForUses` task waits for: a transition completes only once every live
//! instance runs with the new value.
//!
//! A Feature that is not (or no longer) dynamic, or that is deleted, puts the gate back to the
//! role's own configured value (`--feature-gates` and the defaults). Features the role's
//! binary reads only at start are never changed, whatever the object says.

use std::future::Future;

use futures::StreamExt as _;
use genplane_component_base::featuregate::FeatureGate;
use kube::api::{Api, DynamicObject};
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher;
use serde_json::Value;

use crate::uses::feature_resource;

/// What a Feature object asks of a role's gate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wanted {
    /// The feature's name (`spec.featureName`).
    pub feature: String,
    /// The value to run with, or `None` for the role's own configured value.
    pub value: Option<bool>,
}

/// What the Feature object `feature` (its JSON) asks of a gate: `None` when it names no
/// feature.
pub fn wanted(feature: &Value) -> Option<Wanted> {
    let name = feature.pointer("/spec/featureName")?.as_str()?;
    let status = &feature["status"];
    let value = if status["dynamic"].as_bool() == Some(true) {
        match status["state"].as_str() {
            Some("On" | "TurningOn") => Some(true),
            Some("Off" | "TurningOff") => Some(false),
            // Not announced yet: the role keeps its own value.
            _ => None,
        }
    } else {
        None
    };
    Some(Wanted {
        feature: name.to_owned(),
        value,
    })
}

/// Keeps a role's gate on the values its dynamic features' Feature objects ask for.
#[derive(Clone, Debug)]
pub struct Follower {
    gate: FeatureGate,
    namespace: String,
}

impl Follower {
    /// A follower of the Features in `namespace` (`kube-system` for genplane's roles) for
    /// `gate`.
    pub fn new(gate: FeatureGate, namespace: &str) -> Self {
        Self {
            gate,
            namespace: namespace.to_owned(),
        }
    }

    /// Whether the gate has any feature that may change at run time (when none does, there is
    /// nothing to follow).
    pub fn has_dynamic_features(&self) -> bool {
        self.gate
            .features()
            .iter()
            .any(|f| self.gate.is_dynamic(f.name))
    }

    /// Applies what one Feature object asks; returns whether the gate's value changed.
    /// Features the gate does not know or cannot change at run time are left alone.
    pub fn apply(&self, wanted: &Wanted) -> bool {
        if !self.gate.is_dynamic(&wanted.feature) {
            return false;
        }
        match self.gate.set_dynamic(&wanted.feature, wanted.value) {
            Ok(changed) => {
                if changed {
                    let value = self
                        .gate
                        .configured(&wanted.feature)
                        .map(|configured| wanted.value.unwrap_or(configured));
                    tracing::info!(
                        feature = %wanted.feature,
                        value = ?value,
                        from_api = wanted.value.is_some(),
                        "feature gate changed at run time"
                    );
                }
                changed
            }
            Err(error) => {
                tracing::warn!(%error, "following a Feature");
                false
            }
        }
    }

    /// Watches the Features until `stop` resolves, applying each one as it changes. A role
    /// whose gate has no dynamic feature returns at once. Watch failures are retried with
    /// backoff; they never stop the role.
    pub async fn run(self, client: kube::Client, stop: impl Future<Output = ()>) {
        if !self.has_dynamic_features() {
            return;
        }
        let api: Api<DynamicObject> =
            Api::namespaced_with(client, &self.namespace, &feature_resource());
        let events = watcher(api, watcher::Config::default())
            .default_backoff()
            .applied_objects();
        tokio::pin!(events);
        tokio::pin!(stop);
        loop {
            tokio::select! {
                () = &mut stop => return,
                event = events.next() => match event {
                    Some(Ok(object)) => {
                        let Ok(json) = serde_json::to_value(&object) else {
                            continue;
                        };
                        if let Some(wanted) = wanted(&json) {
                            self.apply(&wanted);
                        }
                    }
                    Some(Err(error)) => {
                        tracing::debug!(%error, "watching Features; retrying");
                    }
                    None => return,
                },
            }
        }
    }
}

/// Of `features` (off in the role), those whose Feature in `namespace` says the cluster may
/// still hold objects of their kinds ([`genplane_api::featuregates::may_hold_objects`]): a role
/// keeps running what reads, changes and removes those objects (the registry controller
/// releasing its finalizers, say) until the cluster has turned the feature off. A Feature that
/// cannot be read (the API server not up yet) is tried again every second for `patience`;
/// then the feature counts as off, with a warning.
pub async fn turning_off(
    client: &kube::Client,
    namespace: &str,
    features: &[&'static str],
    patience: std::time::Duration,
) -> std::collections::BTreeSet<&'static str> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &feature_resource());
    let deadline = tokio::time::Instant::now() + patience;
    let mut found = std::collections::BTreeSet::new();
    for &feature in features {
        let name = genplane_api::featuregates::object_name(feature);
        loop {
            match api.get_opt(&name).await {
                Ok(object) => {
                    let state = object
                        .as_ref()
                        .and_then(|o| o.data.pointer("/status/state"))
                        .and_then(Value::as_str);
                    if genplane_api::featuregates::may_hold_objects(state) {
                        tracing::info!(
                            feature,
                            state,
                            "the feature is off here but the cluster is turning it off: running \
                             what removes its objects"
                        );
                        found.insert(feature);
                    }
                    break;
                }
                Err(error) if tokio::time::Instant::now() < deadline => {
                    tracing::debug!(%error, feature, "reading the Feature; retrying");
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                }
                Err(error) => {
                    tracing::warn!(%error, feature, "cannot read the Feature: counting it as off");
                    break;
                }
            }
        }
    }
    found
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

    fn gate() -> FeatureGate {
        let mut registry = Registry::new();
        for feature in [DYNAMIC, FIXED] {
            registry
                .add(
                    feature,
                    &[FeatureSpec::new(Version::new(1, 30), Stage::Beta, true)],
                )
                .unwrap();
        }
        registry.allow_dynamic(DYNAMIC).unwrap();
        registry
            .resolve(
                &FeatureGateSettings::default(),
                Version::new(1, 33),
                UseIdentity::new("apiserver", "host-1"),
            )
            .unwrap()
    }

    fn feature(name: &str, dynamic: bool, state: &str) -> Value {
        json!({
            "spec": {"featureName": name},
            "status": {"dynamic": dynamic, "state": state},
        })
    }

    #[test]
    fn the_state_of_a_dynamic_feature_sets_the_gate() {
        let gate = gate();
        let follower = Follower::new(gate.clone(), "kube-system");
        assert!(follower.has_dynamic_features());
        let off = wanted(&feature("Dynamic", true, "TurningOff")).unwrap();
        assert_eq!(off.value, Some(false));
        assert!(follower.apply(&off));
        assert!(!gate.enabled(DYNAMIC));
        // Applying the same again changes nothing.
        assert!(!follower.apply(&wanted(&feature("Dynamic", true, "Off")).unwrap()));
        assert!(follower.apply(&wanted(&feature("Dynamic", true, "TurningOn")).unwrap()));
        assert!(gate.enabled(DYNAMIC));
    }

    #[test]
    fn a_feature_no_longer_dynamic_goes_back_to_the_configured_value() {
        let gate = gate();
        let follower = Follower::new(gate.clone(), "kube-system");
        follower.apply(&wanted(&feature("Dynamic", true, "Off")).unwrap());
        assert!(!gate.enabled(DYNAMIC));
        let back = wanted(&feature("Dynamic", false, "Off")).unwrap();
        assert_eq!(back.value, None);
        assert!(follower.apply(&back));
        assert!(gate.enabled(DYNAMIC));
        // Not announced yet: nothing asked.
        assert_eq!(
            wanted(&json!({"spec": {"featureName": "Dynamic"}}))
                .unwrap()
                .value,
            None
        );
        assert_eq!(wanted(&json!({"spec": {}})), None);
    }

    #[test]
    fn features_read_only_at_start_never_change() {
        let gate = gate();
        let follower = Follower::new(gate.clone(), "kube-system");
        // Even when the object says it is dynamic (another binary may allow it).
        assert!(!follower.apply(&wanted(&feature("Fixed", true, "Off")).unwrap()));
        assert!(gate.enabled(FIXED));
        assert!(!follower.apply(&wanted(&feature("Unknown", true, "Off")).unwrap()));
    }
}
