//! Identity Leases: one `coordination.k8s.io/v1` Lease in `kube-system` per component instance
//! that reports feature uses or runs the feature-controller.
//!
//! A Lease is named `<component>-<10 random hex digits>` (chosen at start: several instances of
//! one component may run on one host), labelled [`IDENTITY_LABEL`]`=<component>`, and renewed
//! well within its duration. An instance is *live* while `renewTime + leaseDurationSeconds` is
//! in the future; the feature-controller leader deletes Leases that expired a whole duration
//! ago, and the uses of instances without a live Lease.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams, ListParams, PostParams, Preconditions};

/// The label of every identity Lease; its value is the component.
pub const IDENTITY_LABEL: &str = genplane_api::featuregates::IDENTITY_LABEL;
/// How far in the future a Lease's renew time may be and still count (clock skew).
pub const MAX_RENEW_AHEAD: SignedDuration = SignedDuration::from_secs(60);

use genplane_api::featuregates::{
    DYNAMIC_FEATURES_ANNOTATION, FEATURE_CONTROLLER, MAX_CONTROLLER_LEASE_SECONDS,
};
/// The namespace of identity Leases.
pub const NAMESPACE: &str = "kube-system";

/// One instance's identity Lease.
#[derive(Clone, Debug)]
pub struct Identity {
    component: String,
    name: String,
    holder: String,
    duration: Duration,
    annotations: BTreeMap<String, String>,
}

impl Identity {
    /// A new identity of an instance of `component`, whose Lease lasts `duration`.
    pub fn new(component: &str, holder_host: &str, duration: Duration) -> Self {
        let id = uuid::Uuid::new_v4().simple().to_string();
        Self {
            component: component.to_owned(),
            name: format!("{component}-{}", &id[..10]),
            holder: format!("{holder_host}_{id}"),
            duration,
            annotations: BTreeMap::new(),
        }
    }

    /// The same identity, its Lease annotated `key: value` (kept at every renewal).
    pub fn with_annotation(mut self, key: &str, value: String) -> Self {
        self.annotations.insert(key.to_owned(), value);
        self
    }

    /// The component.
    pub fn component(&self) -> &str {
        &self.component
    }

    /// The Lease's name: the instance, as the Feature's `status.uses` names it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How long the Lease is valid after a renewal.
    pub fn duration(&self) -> Duration {
        self.duration
    }

    /// Creates or renews the Lease.
    pub async fn renew(&self, leases: &Api<Lease>) -> Result<(), kube::Error> {
        let now = MicroTime(Timestamp::now());
        let seconds = i32::try_from(self.duration.as_secs().max(1)).unwrap_or(i32::MAX);
        match leases.get_opt(&self.name).await? {
            Some(mut lease) => {
                if !self.annotations.is_empty() {
                    lease
                        .metadata
                        .annotations
                        .get_or_insert_with(BTreeMap::new)
                        .extend(self.annotations.clone());
                }
                let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
                spec.holder_identity = Some(self.holder.clone());
                spec.lease_duration_seconds = Some(seconds);
                spec.renew_time = Some(now);
                // The read resourceVersion is the precondition.
                leases
                    .replace(&self.name, &PostParams::default(), &lease)
                    .await
                    .map(drop)
            }
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        namespace: Some(NAMESPACE.to_owned()),
                        labels: Some(BTreeMap::from([(
                            IDENTITY_LABEL.to_owned(),
                            self.component.clone(),
                        )])),
                        annotations: (!self.annotations.is_empty())
                            .then(|| self.annotations.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(self.holder.clone()),
                        lease_duration_seconds: Some(seconds),
                        acquire_time: Some(now.clone()),
                        renew_time: Some(now),
                        ..LeaseSpec::default()
                    }),
                };
                leases
                    .create(&PostParams::default(), &lease)
                    .await
                    .map(drop)
            }
        }
    }
}

impl Identity {
    /// Deletes the Lease, when the instance stops on purpose: it stops being live at once (its
    /// uses are dropped, another feature-controller takes over) instead of when it expires.
    pub async fn release(&self, leases: &Api<Lease>) -> Result<(), kube::Error> {
        match leases.delete(&self.name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(error) => Err(error),
        }
    }
}

/// When a Lease stops being valid: its renew time plus its duration. A feature-controller's
/// counts for at most [`MAX_CONTROLLER_LEASE_SECONDS`] (what the API server accepts), so that
/// no Lease, however it was written, keeps a dead or silent instance the acting one for long.
pub fn expiry(lease: &Lease) -> Option<Timestamp> {
    let spec = lease.spec.as_ref()?;
    let renewed = spec.renew_time.as_ref()?.0;
    let mut seconds = spec.lease_duration_seconds?;
    if component_of(lease) == Some(FEATURE_CONTROLLER) {
        seconds = seconds.min(MAX_CONTROLLER_LEASE_SECONDS);
    }
    renewed
        .checked_add(SignedDuration::from_secs(i64::from(seconds)))
        .ok()
}

/// The component of an identity Lease (its label's value).
fn component_of(lease: &Lease) -> Option<&str> {
    lease
        .metadata
        .labels
        .as_ref()?
        .get(IDENTITY_LABEL)
        .map(String::as_str)
}

/// A live instance: its Lease's name and component.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Instance {
    /// The Lease's name.
    pub name: String,
    /// The component (the label's value).
    pub component: String,
    /// The features it lets clients set, for an API server (its Lease's
    /// [`DYNAMIC_FEATURES_ANNOTATION`]).
    pub dynamic: BTreeSet<String>,
}

/// Every identity Lease, split into the live instances at `now` and the Leases that expired
/// more than `grace` ago (to delete).
#[derive(Debug, Default)]
pub struct Identities {
    /// The live instances, by Lease name.
    pub live: BTreeMap<String, Instance>,
    /// Leases long expired.
    pub stale: Vec<Lease>,
}

/// Lists the identity Leases and sorts them at `now`.
pub async fn list(
    leases: &Api<Lease>,
    now: Timestamp,
    grace: Duration,
) -> Result<Identities, kube::Error> {
    let listed = leases
        .list(&ListParams::default().labels(IDENTITY_LABEL))
        .await?;
    Ok(sort(listed.items, now, grace))
}

/// Sorts `leases` into the live ones and those expired more than `grace` before `now`.
pub fn sort(leases: Vec<Lease>, now: Timestamp, grace: Duration) -> Identities {
    let grace = SignedDuration::try_from(grace).unwrap_or(SignedDuration::MAX);
    let mut identities = Identities::default();
    for lease in leases {
        let Some(name) = lease.metadata.name.clone() else {
            continue;
        };
        let component = component_of(&lease).unwrap_or_default().to_owned();
        // Renewed in the future (beyond clock skew): not a live instance's.
        let ahead = lease
            .spec
            .as_ref()
            .and_then(|s| s.renew_time.as_ref())
            .is_some_and(|t| t.0.duration_since(now) > MAX_RENEW_AHEAD);
        match expiry(&lease) {
            Some(_) if ahead => identities.stale.push(lease),
            Some(until) if until > now => {
                let dynamic = lease
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(DYNAMIC_FEATURES_ANNOTATION))
                    .map(|list| {
                        list.split(',')
                            .filter(|f| !f.is_empty())
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default();
                identities.live.insert(
                    name.clone(),
                    Instance {
                        name,
                        component,
                        dynamic,
                    },
                );
            }
            Some(until) if until.checked_add(grace).is_ok_and(|t| t > now) => {}
            _ => identities.stale.push(lease),
        }
    }
    identities
}

/// Deletes a Lease unless it changed since it was read. Returns whether it was deleted.
pub async fn delete_stale(leases: &Api<Lease>, lease: &Lease) -> Result<bool, kube::Error> {
    let Some(name) = lease.metadata.name.as_deref() else {
        return Ok(false);
    };
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            resource_version: lease.metadata.resource_version.clone(),
            uid: lease.metadata.uid.clone(),
        }),
        ..DeleteParams::default()
    };
    match leases.delete(name, &params).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(false),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(name: &str, component: &str, renewed: Timestamp, seconds: i32) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                labels: Some(BTreeMap::from([(
                    IDENTITY_LABEL.to_owned(),
                    component.to_owned(),
                )])),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                renew_time: Some(MicroTime(renewed)),
                lease_duration_seconds: Some(seconds),
                ..LeaseSpec::default()
            }),
        }
    }

    #[test]
    fn live_until_renew_time_plus_duration_then_stale_after_the_grace() {
        let now = Timestamp::from_second(1_000_000).unwrap();
        let ago = |s: i64| now.checked_sub(SignedDuration::from_secs(s)).unwrap();
        let identities = sort(
            vec![
                lease("fresh", "apiserver", ago(5), 15),
                lease("just-expired", "apiserver", ago(20), 15),
                lease("long-gone", "feature-controller", ago(100), 15),
            ],
            now,
            Duration::from_secs(15),
        );
        assert_eq!(identities.live.keys().collect::<Vec<_>>(), ["fresh"]);
        assert_eq!(identities.live["fresh"].component, "apiserver");
        assert_eq!(identities.stale.len(), 1);
        assert_eq!(
            identities.stale[0].metadata.name.as_deref(),
            Some("long-gone")
        );
    }

    #[test]
    fn a_feature_controller_lease_counts_for_at_most_the_cap_and_never_from_the_future() {
        let now = Timestamp::from_second(1_000_000).unwrap();
        let at = |s: i64| now.checked_add(SignedDuration::from_secs(s)).unwrap();
        let identities = sort(
            vec![
                lease(
                    "feature-controller-long",
                    "feature-controller",
                    at(-400),
                    86_400,
                ),
                lease(
                    "feature-controller-ahead",
                    "feature-controller",
                    at(3_600),
                    15,
                ),
                lease("apiserver-long", "apiserver", at(-400), 86_400),
                lease(
                    "feature-controller-ok",
                    "feature-controller",
                    at(-100),
                    86_400,
                ),
            ],
            now,
            Duration::from_secs(15),
        );
        assert_eq!(
            identities.live.keys().collect::<Vec<_>>(),
            ["apiserver-long", "feature-controller-ok"]
        );
        let stale: Vec<_> = identities
            .stale
            .iter()
            .map(|l| l.metadata.name.as_deref().unwrap())
            .collect();
        assert_eq!(
            stale,
            ["feature-controller-long", "feature-controller-ahead"]
        );
    }

    #[test]
    fn names_are_per_instance() {
        let a = Identity::new("apiserver", "host", Duration::from_secs(15));
        let b = Identity::new("apiserver", "host", Duration::from_secs(15));
        assert_ne!(a.name(), b.name());
        assert!(a.name().starts_with("apiserver-"), "{}", a.name());
        assert_eq!(a.name().len(), "apiserver-".len() + 10);
    }
}
