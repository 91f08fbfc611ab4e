//! The client flow: a role reports the feature-gate values it saw to the Feature API.
//!
//! The gate ([`FeatureGate`]) records every check in its use log from flag parsing on. A
//! [`Reporter`] started once an API client exists drains the log at start and then every
//! report period (`--feature-use-report-period`, [`DEFAULT_REPORT_PERIOD`]), remembers every
//! feature the instance ever checked, and for each one applies the instance's own entry of the
//! Feature's `status.uses` by server-side apply on `features/status`: field manager
//! `<component>/<instance>`, so each instance owns only its entry (the list is a map keyed by
//! component and instance). The entry says the value seen (`On`/`Off`), the emulated version,
//! when the instance first reported that value and when it last reported.
//!
//! Before the first report, and at every report, the instance renews its identity Lease
//! ([`crate::identity`]), which lasts [`LEASE_PERIODS`] report periods: an instance that stops
//! reporting stops being live, and the feature-controller removes its entries.
//!
//! Reporting never blocks the role: it runs in a task of its own, a failed report (API down, a
//! Feature not announced yet) is logged and tried again at the next period with everything
//! remembered, and nothing else waits for it.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::time::Duration;

use genplane_api::featuregates::{API_VERSION, object_name};
use genplane_component_base::featuregate::FeatureGate;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::{Value, json};

use crate::identity::{self, Identity};

/// The default `--feature-use-report-period`.
pub const DEFAULT_REPORT_PERIOD: Duration = Duration::from_secs(30);
/// How many report periods an instance's identity Lease lasts.
pub const LEASE_PERIODS: u32 = 3;

/// The Feature resource, for dynamic clients.
pub fn feature_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(
            genplane_api::featuregates::GROUP,
            genplane_api::featuregates::VERSION,
            genplane_api::featuregates::feature::KIND,
        ),
        "features",
    )
}

/// What an instance saw of one feature.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Seen {
    value: bool,
    first: Timestamp,
}

/// Reports one role instance's feature uses.
#[derive(Debug)]
pub struct Reporter {
    gate: FeatureGate,
    identity: Identity,
    namespace: String,
    period: Duration,
    seen: BTreeMap<String, Seen>,
    /// Keep the identity Lease even with no use to report (it says something of its own).
    announce: bool,
}

impl Reporter {
    /// A reporter of `gate`'s uses to the Features in `namespace` (`kube-system` for
    /// genplane's roles), every `period`. The component is the gate's
    /// ([`FeatureGate::identity`]); the instance is a new identity Lease's name.
    pub fn new(gate: FeatureGate, namespace: &str, period: Duration) -> Self {
        let use_identity = gate.identity().clone();
        let identity = Identity::new(
            &use_identity.component,
            &use_identity.instance,
            period * LEASE_PERIODS,
        );
        Self {
            gate,
            identity,
            namespace: namespace.to_owned(),
            period,
            seen: BTreeMap::new(),
            announce: false,
        }
    }

    /// The same reporter for an API server that lets clients set `dynamic` features (its
    /// `--dynamic-features`): its identity Lease names them
    /// ([`genplane_api::featuregates::DYNAMIC_FEATURES_ANNOTATION`]), and the feature-controller
    /// marks a feature dynamic while every live API server names it.
    pub fn allowing_dynamic(mut self, dynamic: &BTreeSet<String>) -> Self {
        if dynamic.is_empty() {
            return self;
        }
        let list: Vec<&str> = dynamic.iter().map(String::as_str).collect();
        self.identity = self.identity.with_annotation(
            genplane_api::featuregates::DYNAMIC_FEATURES_ANNOTATION,
            list.join(","),
        );
        self.announce = true;
        self
    }

    /// The instance name this reporter reports as (its identity Lease).
    pub fn instance(&self) -> &str {
        self.identity.name()
    }

    /// The field manager of this instance's entries.
    pub fn field_manager(&self) -> String {
        format!("{}/{}", self.identity.component(), self.identity.name())
    }

    /// Moves the gate's use log into what this instance remembers.
    fn collect(&mut self, now: Timestamp) {
        let current: BTreeMap<&str, bool> = self
            .gate
            .features()
            .into_iter()
            .map(|f| (f.name, f.enabled))
            .collect();
        for used in self.gate.drain_uses() {
            // Both values seen within one period means the value changed: the gate's current
            // one is the last seen.
            let value = current
                .get(used.feature.as_str())
                .copied()
                .unwrap_or(used.value);
            match self.seen.get_mut(&used.feature) {
                Some(seen) if seen.value == value => {}
                Some(seen) => *seen = Seen { value, first: now },
                None => {
                    self.seen.insert(used.feature, Seen { value, first: now });
                }
            }
        }
        // A feature changed at run time ([`crate::follow`]) is seen with its new value from
        // the change on, checked since or not: the old value can no longer be seen.
        for (feature, seen) in &mut self.seen {
            if let Some(&value) = current.get(feature.as_str())
                && value != seen.value
            {
                *seen = Seen { value, first: now };
            }
        }
    }

    /// This instance's entry of a Feature's status, as applied.
    fn entry(&self, feature: &str, seen: &Seen, now: Timestamp) -> Value {
        json!({
            "apiVersion": API_VERSION,
            "kind": genplane_api::featuregates::feature::KIND,
            "metadata": {"name": object_name(feature), "namespace": self.namespace},
            "status": {"uses": [{
                "component": self.identity.component(),
                "instance": self.identity.name(),
                "value": if seen.value { "On" } else { "Off" },
                "version": self.gate.emulated_version().to_string(),
                "firstReport": genplane_apimachinery::meta::rfc3339(seen.first.as_second()),
                "lastReport": genplane_apimachinery::meta::rfc3339(now.as_second()),
            }]},
        })
    }

    /// Reports once: renews the identity Lease and applies every remembered use. Returns how
    /// many Features were written; a Feature not announced yet is skipped (tried next time).
    pub async fn report(&mut self, client: &kube::Client) -> Result<usize, kube::Error> {
        let now = Timestamp::now();
        self.collect(now);
        if self.seen.is_empty() && !self.announce {
            return Ok(0);
        }
        let leases: Api<Lease> = Api::namespaced(client.clone(), identity::NAMESPACE);
        self.identity.renew(&leases).await?;
        let features: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &self.namespace, &feature_resource());
        let params = PatchParams::apply(&self.field_manager()).force();
        let mut written = 0;
        for (feature, seen) in &self.seen {
            let body = self.entry(feature, seen, now);
            match features
                .patch_status(&object_name(feature), &params, &Patch::Apply(&body))
                .await
            {
                Ok(_) => written += 1,
                Err(kube::Error::Api(status)) if status.code == 404 => {
                    tracing::debug!(%feature, "feature not announced yet; reporting later");
                }
                Err(error) => return Err(error),
            }
        }
        Ok(written)
    }

    /// Reports at once and then every period until `stop` resolves. Failures are logged and
    /// retried at the next period.
    pub async fn run(mut self, client: kube::Client, stop: impl Future<Output = ()>) {
        tracing::info!(
            instance = self.identity.name(),
            period = ?self.period,
            "reporting feature uses"
        );
        let mut ticks = tokio::time::interval(self.period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tokio::pin!(stop);
        loop {
            tokio::select! {
                () = &mut stop => {
                    if !self.seen.is_empty() || self.announce {
                        let leases: Api<Lease> = Api::namespaced(client.clone(), identity::NAMESPACE);
                        if let Err(error) = self.identity.release(&leases).await {
                            tracing::debug!(%error, "releasing the identity lease");
                        }
                    }
                    return;
                }
                _ = ticks.tick() => match self.report(&client).await {
                    Ok(written) => tracing::debug!(written, "reported feature uses"),
                    Err(error) => tracing::warn!(%error, "reporting feature uses; retrying next period"),
                },
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

    const A: Feature = Feature::new("FeatureA");
    const B: Feature = Feature::new("FeatureB");

    fn gate() -> FeatureGate {
        let mut registry = Registry::new();
        for feature in [A, B] {
            registry
                .add(
                    feature,
                    &[FeatureSpec::new(Version::new(1, 30), Stage::Beta, true)],
                )
                .unwrap();
        }
        registry.allow_dynamic(A).unwrap();
        registry
            .resolve(
                &"FeatureB=false".parse::<FeatureGateSettings>().unwrap(),
                Version::new(1, 33),
                UseIdentity::new("apiserver", "host-1"),
            )
            .unwrap()
    }

    #[test]
    fn remembers_every_checked_feature_and_applies_only_its_own_entry() {
        let gate = gate();
        let mut reporter = Reporter::new(gate.clone(), "kube-system", DEFAULT_REPORT_PERIOD);
        let t0 = Timestamp::from_second(1_000).unwrap();
        reporter.collect(t0);
        assert!(reporter.seen.is_empty());
        assert!(gate.enabled(A));
        assert!(!gate.enabled(B));
        reporter.collect(t0);
        // Checked once, remembered for good: the next drain is empty.
        let t1 = Timestamp::from_second(1_030).unwrap();
        reporter.collect(t1);
        assert_eq!(reporter.seen.len(), 2);
        assert_eq!(reporter.seen["FeatureA"].first, t0);
        let entry = reporter.entry("FeatureB", &reporter.seen["FeatureB"], t1);
        assert_eq!(entry["metadata"]["name"], "feature-b");
        let used = &entry["status"]["uses"][0];
        assert_eq!(used["component"], "apiserver");
        assert_eq!(used["instance"], reporter.instance());
        assert_eq!(used["value"], "Off");
        assert_eq!(used["version"], "1.33");
        assert_eq!(used["firstReport"], "1970-01-01T00:16:40Z");
        assert_eq!(used["lastReport"], "1970-01-01T00:17:10Z");
        assert_eq!(
            reporter.field_manager(),
            format!("apiserver/{}", reporter.instance())
        );
    }

    #[test]
    fn a_value_changed_at_run_time_is_reported_without_a_new_check() {
        let gate = gate();
        let mut reporter = Reporter::new(gate.clone(), "kube-system", DEFAULT_REPORT_PERIOD);
        let t0 = Timestamp::from_second(1_000).unwrap();
        assert!(gate.enabled(A));
        reporter.collect(t0);
        assert!(reporter.seen["FeatureA"].value);
        gate.set_dynamic("FeatureA", Some(false)).unwrap();
        let t1 = Timestamp::from_second(1_030).unwrap();
        reporter.collect(t1);
        assert_eq!(
            reporter.seen["FeatureA"],
            Seen {
                value: false,
                first: t1
            }
        );
    }
}
