//! `genplane feature-controller check --to-version`: whether moving the cluster's binaries (or
//! their emulated version) to another version is safe, given which features are on or in use
//! and what they left in storage.
//!
//! For every feature the binary knows, the check reads its Feature (state and uses) and counts
//! what the feature left in storage ([`Stored`]: fields of objects, or objects of an API served
//! only while it is on), then judges it against the feature's spec at the target version:
//!
//! - a feature the target version does not have (not yet, or no longer) must be off, unused and
//!   leave nothing stored: a server of that version would not know the fields or objects
//!   (fields would be dropped at the next write of each object, objects would be unreadable);
//! - a feature the target locks off must be off;
//! - otherwise the move is safe for it (a feature the target locks on is noted: it will be on).
//!
//! The decisions ([`judge`]) are pure; [`inspect`] gathers what they need through the API.

use std::fmt::Write as _;

use genplane_api::featuregates::object_name;
use genplane_component_base::featuregate::{FeatureSpec, Registry, Stage, Stored, Version};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde_json::Value;

use crate::uses::feature_resource;

/// Errors of the check.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A request to the API server failed.
    #[error("{what}: {source}")]
    Api {
        /// What was being read.
        what: String,
        /// The client's error.
        source: kube::Error,
    },
}

/// How much of one kind of stored state the cluster holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Count {
    /// So many objects hold it.
    Objects(usize),
    /// The resource is not served, so nothing can be counted.
    NotServed,
}

/// What the cluster has of one feature.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// The Feature's `status.state`, if the Feature exists and has one.
    pub state: Option<String>,
    /// The live instances reporting the feature on (`component/instance`).
    pub on_in: Vec<String>,
    /// Each kind of state the feature leaves in storage ([`Stored::describe`]), and how much
    /// of it the cluster holds.
    pub stored: Vec<(String, Count)>,
}

impl Observed {
    fn on(&self) -> bool {
        matches!(
            self.state.as_deref(),
            Some("On" | "TurningOn" | "TurningOff")
        ) || !self.on_in.is_empty()
    }

    fn describe_on(&self) -> String {
        let state = self.state.as_deref().unwrap_or("not announced");
        if self.on_in.is_empty() {
            format!("it is {state}")
        } else {
            format!("it is {state}, on in {}", self.on_in.join(", "))
        }
    }
}

/// The verdict on one feature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The feature.
    pub feature: String,
    /// Whether the move is safe as far as this feature goes.
    pub safe: bool,
    /// Why, in words.
    pub reason: String,
}

/// The verdicts on every feature, for one target version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The version the cluster would move to.
    pub target: Version,
    /// One verdict per feature the binary knows, by name.
    pub verdicts: Vec<Verdict>,
}

impl Report {
    /// Whether the move is safe: every verdict is.
    pub fn safe(&self) -> bool {
        self.verdicts.iter().all(|v| v.safe)
    }

    /// The report as printed: one line per feature (`SAFE` or `UNSAFE`, the feature, the
    /// reason), then the conclusion.
    pub fn render(&self) -> String {
        let width = self
            .verdicts
            .iter()
            .map(|v| v.feature.len())
            .max()
            .unwrap_or(0);
        let mut out = String::new();
        for verdict in &self.verdicts {
            let _ = writeln!(
                out,
                "{:<6} {:<width$}  {}",
                if verdict.safe { "SAFE" } else { "UNSAFE" },
                verdict.feature,
                verdict.reason
            );
        }
        let unsafe_count = self.verdicts.iter().filter(|v| !v.safe).count();
        if unsafe_count == 0 {
            let _ = writeln!(out, "moving the cluster to {} is safe", self.target);
        } else {
            let _ = writeln!(
                out,
                "moving the cluster to {} is not safe: {unsafe_count} feature(s) above must be dealt with first",
                self.target
            );
        }
        out
    }
}

/// Judges one feature: `spec` is its spec at `target` (as [`Registry::spec_at`] gives it).
pub fn judge(feature: &str, spec: FeatureSpec, target: Version, observed: &Observed) -> Verdict {
    let verdict = |safe: bool, reason: String| Verdict {
        feature: feature.to_owned(),
        safe,
        reason,
    };
    if spec.stage == Stage::PreAlpha {
        if observed.on() {
            return verdict(
                false,
                format!(
                    "{target} does not have it and {}: turn it off first",
                    observed.describe_on()
                ),
            );
        }
        let mut problems = Vec::new();
        let mut unseen = Vec::new();
        for (what, count) in &observed.stored {
            match count {
                Count::Objects(0) => {}
                Count::Objects(n) => problems.push(format!("{n} objects hold {what}")),
                Count::NotServed => unseen.push(what.as_str()),
            }
        }
        if !problems.is_empty() {
            return verdict(
                false,
                format!(
                    "{target} does not have it and {}: a server of {target} would not know them; \
                     turn the feature on and off again to clear them, or remove them",
                    problems.join("; ")
                ),
            );
        }
        let mut reason =
            format!("{target} does not have it; it is off and nothing of it is stored");
        if !unseen.is_empty() {
            let _ = write!(
                reason,
                " (not served here, so not counted: {})",
                unseen.join(", ")
            );
        }
        return verdict(true, reason);
    }
    if spec.lock_to_default && !spec.default && observed.on() {
        return verdict(
            false,
            format!(
                "{target} locks it off and {}: turn it off first",
                observed.describe_on()
            ),
        );
    }
    if spec.lock_to_default && spec.default && !observed.on() {
        return verdict(
            true,
            format!("{target} locks it on: it will be on after the move"),
        );
    }
    verdict(
        true,
        format!(
            "{target} has it ({}, default {})",
            spec.stage.as_str(),
            if spec.default { "on" } else { "off" }
        ),
    )
}

/// Reads what the cluster has of every feature `registry` knows (Features in `namespace`) and
/// judges each against `target`.
pub async fn inspect(
    client: &kube::Client,
    registry: &Registry,
    namespace: &str,
    target: Version,
) -> Result<Report, Error> {
    let features: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &feature_resource());
    let mut verdicts = Vec::new();
    for name in registry.names() {
        let Some(spec) = registry.spec_at(name, target) else {
            continue;
        };
        let object = features
            .get_opt(&object_name(name))
            .await
            .map_err(|source| Error::Api {
                what: format!("reading the Feature of {name}"),
                source,
            })?
            .map(|o| serde_json::to_value(&o).unwrap_or_default());
        let mut observed = observe(object.as_ref());
        for stored in registry.stored(name) {
            let count = count(client, &stored).await?;
            observed.stored.push((stored.describe(), count));
        }
        verdicts.push(judge(name, spec, target, &observed));
    }
    Ok(Report { target, verdicts })
}

/// The state and the uses reporting On of a Feature object.
pub fn observe(feature: Option<&Value>) -> Observed {
    let Some(feature) = feature else {
        return Observed::default();
    };
    let status = &feature["status"];
    Observed {
        state: status["state"].as_str().map(str::to_owned),
        on_in: status["uses"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|u| u["value"] == "On")
            .map(|u| {
                format!(
                    "{}/{}",
                    u["component"].as_str().unwrap_or_default(),
                    u["instance"].as_str().unwrap_or_default()
                )
            })
            .collect(),
        stored: Vec::new(),
    }
}

/// The objects of `stored`'s resource that may hold it (every object, or those its label
/// selector picks), with the resource.
pub(crate) async fn list_stored(
    client: &kube::Client,
    stored: &Stored,
) -> Result<(ApiResource, Vec<DynamicObject>), kube::Error> {
    let genplane_component_base::featuregate::ResourceRef {
        group,
        version,
        resource,
        kind,
    } = stored.resource();
    let resource_type =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), resource);
    let objects: Api<DynamicObject> = Api::all_with(client.clone(), &resource_type);
    let params = match stored {
        Stored::Objects { selector, .. } if !selector.is_empty() => {
            ListParams::default().labels(selector)
        }
        _ => ListParams::default(),
    };
    let listed = objects.list(&params).await?;
    Ok((resource_type, listed.items))
}

/// The dotted `path` of `object`, when it holds a value other than null.
pub(crate) fn field<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .try_fold(object, |value, key| value.get(key))
        .filter(|v| !v.is_null())
}

/// How many objects hold `stored`.
async fn count(client: &kube::Client, stored: &Stored) -> Result<Count, Error> {
    let items = match list_stored(client, stored).await {
        Ok((_, items)) => items,
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(Count::NotServed),
        Err(source) => {
            return Err(Error::Api {
                what: format!("listing {}", stored.describe()),
                source,
            });
        }
    };
    let holding = match stored {
        Stored::Fields { fields, .. } => items
            .iter()
            .filter(|object| {
                let value = serde_json::to_value(object).unwrap_or_default();
                fields.iter().any(|path| field(&value, path).is_some())
            })
            .count(),
        _ => items.len(),
    };
    Ok(Count::Objects(holding))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(minor: u32) -> Version {
        Version::new(1, minor)
    }

    fn absent() -> FeatureSpec {
        FeatureSpec::new(v(30), Stage::PreAlpha, false)
    }

    #[test]
    fn a_feature_the_target_lacks_must_be_off_and_leave_nothing_stored() {
        let on = Observed {
            state: Some("On".into()),
            on_in: vec!["apiserver/apiserver-x".into()],
            stored: vec![],
        };
        let verdict = judge("F", absent(), v(30), &on);
        assert!(!verdict.safe);
        assert_eq!(
            verdict.reason,
            "1.30 does not have it and it is On, on in apiserver/apiserver-x: turn it off first"
        );

        let dangling = Observed {
            state: Some("Off".into()),
            on_in: vec![],
            stored: vec![(
                "leases.coordination.k8s.io spec.strategy".into(),
                Count::Objects(2),
            )],
        };
        let verdict = judge("F", absent(), v(30), &dangling);
        assert!(!verdict.safe);
        assert!(
            verdict
                .reason
                .contains("2 objects hold leases.coordination.k8s.io spec.strategy"),
            "{}",
            verdict.reason
        );

        let clean = Observed {
            state: Some("Off".into()),
            on_in: vec![],
            stored: vec![
                (
                    "leases.coordination.k8s.io spec.strategy".into(),
                    Count::Objects(0),
                ),
                (
                    "networkclaims.networkregistry.genplane.io".into(),
                    Count::NotServed,
                ),
            ],
        };
        let verdict = judge("F", absent(), v(30), &clean);
        assert!(verdict.safe, "{}", verdict.reason);
        assert!(verdict.reason.ends_with(
            "(not served here, so not counted: networkclaims.networkregistry.genplane.io)"
        ));
    }

    #[test]
    fn locks_at_the_target_and_ordinary_features() {
        let on = Observed {
            state: Some("On".into()),
            ..Observed::default()
        };
        let locked_off = FeatureSpec::new(v(34), Stage::Deprecated, false).locked();
        assert!(!judge("F", locked_off, v(34), &on).safe);
        let locked_on = FeatureSpec::new(v(34), Stage::Ga, true).locked();
        let off = Observed {
            state: Some("Off".into()),
            ..Observed::default()
        };
        let verdict = judge("F", locked_on, v(34), &off);
        assert!(verdict.safe);
        assert_eq!(
            verdict.reason,
            "1.34 locks it on: it will be on after the move"
        );
        let beta = FeatureSpec::new(v(31), Stage::Beta, false);
        assert_eq!(
            judge("F", beta, v(32), &on).reason,
            "1.32 has it (BETA, default off)"
        );
    }

    #[test]
    fn the_report_concludes_from_every_verdict() {
        let report = Report {
            target: v(32),
            verdicts: vec![
                Verdict {
                    feature: "A".into(),
                    safe: true,
                    reason: "fine".into(),
                },
                Verdict {
                    feature: "Longer".into(),
                    safe: false,
                    reason: "not fine".into(),
                },
            ],
        };
        assert!(!report.safe());
        assert_eq!(
            report.render(),
            "SAFE   A       fine\nUNSAFE Longer  not fine\n\
             moving the cluster to 1.32 is not safe: 1 feature(s) above must be dealt with first\n"
        );
    }
}
