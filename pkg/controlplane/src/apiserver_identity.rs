//! The API server's identity Lease (KEP-1965).
//!
//! Every API server publishes a `coordination.k8s.io/v1` Lease in `kube-system`, named after a
//! hash of its host name, labelled `apiserver.kubernetes.io/identity=kube-apiserver` and
//! `kubernetes.io/hostname=<host>`, and renews it every 10 seconds with a lease duration of an
//! hour. A restarted server on the same host takes the same Lease over under a new holder
//! identity. Leases of servers that stopped renewing are deleted by the others once expired.
//!
//! The name is the one kube-apiserver computes, so tools that look a server's Lease up by its
//! host name find ours: SHA-256 over the host name and the component name `kube-apiserver`, each
//! prefixed by its length as a big-endian `u16`; the first 16 bytes of the digest in unpadded
//! base32, lower-cased, after `apiserver-`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use genplane_apimachinery::errors::{ApiError, Status};
use genplane_apimachinery::labels::Selector;
use genplane_apimachinery::time::micro_time;
use genplane_apimachinery::time::parse_micro_time;
use genplane_apiserver::Resource;
use genplane_registry::{DeleteOptions, ListOptions, Store, WriteOptions};
use genplane_storage::Storage;
use serde_json::{Value, json};

/// The label every identity Lease carries, with the value [`COMPONENT`].
pub const IDENTITY_LABEL: &str = "apiserver.kubernetes.io/identity";
/// The label naming the host of the server that holds the Lease.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// The component name in the identity label and the name hash; upstream's, so that clients
/// counting API servers count ours.
pub const COMPONENT: &str = "kube-apiserver";
/// The namespace of identity Leases.
pub const NAMESPACE: &str = "kube-system";

/// How often the Lease is renewed, and how long it stays valid without renewal, and how often
/// expired Leases of other servers are collected: upstream's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// Renewal period (10 s).
    pub renew_interval: Duration,
    /// `spec.leaseDurationSeconds` (3600).
    pub lease_duration_seconds: i64,
    /// How often expired identity Leases are deleted (1 h).
    pub gc_period: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            renew_interval: Duration::from_secs(10),
            lease_duration_seconds: 3600,
            gc_period: Duration::from_secs(3600),
        }
    }
}

/// The Lease name of the API server on `hostname`, as kube-apiserver computes it.
pub fn lease_name(hostname: &str) -> String {
    let mut data = Vec::with_capacity(hostname.len() + COMPONENT.len() + 4);
    for part in [hostname, COMPONENT] {
        // Host names are far shorter than 64 KiB; a longer one is cut, as a u16 prefix must be.
        let bytes = &part.as_bytes()[..part.len().min(usize::from(u16::MAX))];
        let len = u16::try_from(bytes.len()).unwrap_or(u16::MAX);
        data.extend_from_slice(&len.to_be_bytes());
        data.extend_from_slice(bytes);
    }
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, &data);
    let encoded = data_encoding::BASE32_NOPAD.encode(&digest.as_ref()[..16]);
    format!("apiserver-{}", encoded.to_ascii_lowercase())
}

/// Keeps one API server's identity Lease.
#[derive(Debug)]
pub struct IdentityLease<S: Storage> {
    leases: Store<S>,
    name: String,
    holder: String,
    hostname: String,
    timing: Timing,
}

fn now() -> (i64, u32) {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (
        i64::try_from(since.as_secs()).unwrap_or(i64::MAX),
        since.subsec_nanos(),
    )
}

impl<S: Storage> IdentityLease<S> {
    /// The Lease of the server on `hostname`, written through `leases` (the
    /// `coordination.k8s.io/v1` leases store). Each instance holds it under a new identity.
    pub fn new(leases: Store<S>, hostname: &str, timing: Timing) -> Self {
        let name = lease_name(hostname);
        Self {
            holder: format!("{name}_{}", uuid::Uuid::new_v4()),
            name,
            leases,
            hostname: hostname.to_owned(),
            timing,
        }
    }

    /// The Lease of the server on `hostname`, written through the `coordination.k8s.io/v1`
    /// leases among `resources`; `None` when leases are not served.
    pub fn among<R: std::borrow::Borrow<Resource<S>>>(
        resources: &[R],
        hostname: &str,
        timing: Timing,
    ) -> Option<Self> {
        let leases = resources
            .iter()
            .map(std::borrow::Borrow::borrow)
            .find(|r| r.info.is(&genplane_api::coordination::lease::INFO))?;
        Some(Self::new(leases.store()?.clone(), hostname, timing))
    }

    /// The Lease's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// This instance's holder identity.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// Creates the Lease, or takes it over and renews it.
    pub async fn renew(&self) -> Result<(), ApiError> {
        let (seconds, nanos) = now();
        let renew_time = micro_time(seconds, nanos);
        let options = WriteOptions::default();
        match self.leases.get(NAMESPACE, &self.name, None).await {
            Ok(mut lease) => {
                let spec = &mut lease["spec"];
                if !spec.is_object() {
                    *spec = json!({});
                }
                spec["holderIdentity"] = Value::from(self.holder.as_str());
                spec["leaseDurationSeconds"] = Value::from(self.timing.lease_duration_seconds);
                spec["renewTime"] = Value::from(renew_time);
                let labels = &mut lease["metadata"]["labels"];
                if !labels.is_object() {
                    *labels = json!({});
                }
                labels[IDENTITY_LABEL] = Value::from(COMPONENT);
                labels[HOSTNAME_LABEL] = Value::from(self.hostname.as_str());
                // The read resourceVersion is a precondition: a concurrent writer makes this
                // renewal fail, and the next one retries.
                self.leases
                    .update(NAMESPACE, &self.name, lease, &options)
                    .await
                    .map(drop)
            }
            Err(e) if e.code == 404 => {
                let lease = json!({
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {
                        "name": self.name,
                        "namespace": NAMESPACE,
                        "labels": {IDENTITY_LABEL: COMPONENT, HOSTNAME_LABEL: self.hostname},
                    },
                    "spec": {
                        "holderIdentity": self.holder,
                        "leaseDurationSeconds": self.timing.lease_duration_seconds,
                        "renewTime": renew_time,
                    },
                });
                self.leases
                    .create(NAMESPACE, lease, &options)
                    .await
                    .map(drop)
            }
            Err(e) => Err(e),
        }
    }

    /// Deletes the identity Leases in `kube-system` that expired (renew time plus duration in
    /// the past), other than this server's own. Returns their names.
    pub async fn collect_expired(&self) -> Result<Vec<String>, ApiError> {
        let selector: Selector = format!("{IDENTITY_LABEL}={COMPONENT}")
            .parse()
            .map_err(|e| ApiError::from(Status::internal_error(e)))?;
        let options = ListOptions {
            labels: selector,
            ..ListOptions::default()
        };
        let listed = self.leases.list(NAMESPACE, &options).await?;
        let (seconds, _) = now();
        let mut deleted = Vec::new();
        for lease in listed.items {
            let name = lease["metadata"]["name"].as_str().unwrap_or_default();
            if name == self.name {
                continue;
            }
            let spec = &lease["spec"];
            let Some(renewed) = spec["renewTime"].as_str().and_then(parse_micro_time) else {
                continue;
            };
            let duration = spec["leaseDurationSeconds"].as_i64().unwrap_or(0);
            if renewed.seconds.saturating_add(duration) >= seconds {
                continue;
            }
            let precondition = DeleteOptions {
                resource_version: lease["metadata"]["resourceVersion"]
                    .as_str()
                    .map(str::to_owned),
                ..DeleteOptions::default()
            };
            match self.leases.delete(NAMESPACE, name, &precondition).await {
                Ok(_) => deleted.push(name.to_owned()),
                // Renewed or deleted meanwhile: not ours to collect any more.
                Err(e) if e.code == 404 || e.code == 409 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(deleted)
    }

    /// Renews the Lease every renewal period and collects expired ones every collection period,
    /// until `stop` resolves. Failures are logged and retried at the next tick.
    pub async fn run(self, stop: impl std::future::Future<Output = ()>) {
        let mut renew = tokio::time::interval(self.timing.renew_interval);
        renew.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut collect = tokio::time::interval(self.timing.gc_period);
        collect.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tokio::pin!(stop);
        loop {
            tokio::select! {
                () = &mut stop => return,
                _ = renew.tick() => {
                    if let Err(error) = self.renew().await {
                        tracing::warn!(lease = %self.name, %error, "renewing the identity lease");
                    }
                }
                _ = collect.tick() => match self.collect_expired().await {
                    Ok(names) => for name in names {
                        tracing::info!(lease = %name, "deleted an expired apiserver identity lease");
                    },
                    Err(error) => tracing::warn!(%error, "collecting expired identity leases"),
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{StorageConfig, bootstrap, open_storage, resources};

    #[test]
    fn lease_name_is_upstreams_hash_of_the_host_name() {
        // Computed independently (Python hashlib + base64.b32encode) from the documented recipe.
        assert_eq!(lease_name("node-1"), "apiserver-lgabes5ywnaqeagh5dny4zlzs4");
        assert_ne!(lease_name("node-2"), lease_name("node-1"));
    }

    fn stale_lease(name: &str, namespace: &str, labelled: bool, renewed_seconds_ago: i64) -> Value {
        let (seconds, _) = now();
        let labels = if labelled {
            json!({IDENTITY_LABEL: COMPONENT})
        } else {
            json!({})
        };
        json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {
                "holderIdentity": name,
                "leaseDurationSeconds": 3600,
                "renewTime": micro_time(seconds - renewed_seconds_ago, 0),
            },
        })
    }

    #[tokio::test]
    async fn renews_takes_over_and_collects_only_expired_identity_leases() {
        let dir = tempfile::tempdir().unwrap();
        let backend = open_storage(&StorageConfig::Sqlite {
            path: dir.path().join("db"),
        })
        .await
        .unwrap();
        let served = resources(backend).unwrap();
        bootstrap(&served).await.unwrap();
        let first = IdentityLease::among(&served, "node-1", Timing::default()).unwrap();
        first.renew().await.unwrap();
        let leases = &first.leases;
        let lease = leases.get(NAMESPACE, first.name(), None).await.unwrap();
        assert_eq!(lease["metadata"]["labels"][IDENTITY_LABEL], COMPONENT);
        assert_eq!(lease["metadata"]["labels"][HOSTNAME_LABEL], "node-1");
        assert_eq!(lease["spec"]["holderIdentity"], first.holder());
        assert_eq!(lease["spec"]["leaseDurationSeconds"], 3600);
        let renewed = lease["spec"]["renewTime"].as_str().unwrap().to_owned();
        assert!(parse_micro_time(&renewed).is_some(), "{renewed}");

        // A restart on the same host takes the same Lease over.
        let second = IdentityLease::among(&served, "node-1", Timing::default()).unwrap();
        assert_eq!(second.name(), first.name());
        assert_ne!(second.holder(), first.holder());
        second.renew().await.unwrap();
        let lease = leases.get(NAMESPACE, first.name(), None).await.unwrap();
        assert_eq!(lease["spec"]["holderIdentity"], second.holder());

        let options = WriteOptions::default();
        for lease in [
            stale_lease("expired", NAMESPACE, true, 2 * 3600),
            stale_lease("fresh", NAMESPACE, true, 120),
            stale_lease("unlabelled", NAMESPACE, false, 2 * 3600),
            stale_lease("elsewhere", "default", true, 2 * 3600),
        ] {
            let namespace = lease["metadata"]["namespace"].as_str().unwrap().to_owned();
            leases.create(&namespace, lease, &options).await.unwrap();
        }
        assert_eq!(second.collect_expired().await.unwrap(), vec!["expired"]);
        assert_eq!(
            leases
                .get(NAMESPACE, "expired", None)
                .await
                .unwrap_err()
                .code,
            404
        );
        for (namespace, name) in [
            (NAMESPACE, "fresh"),
            (NAMESPACE, "unlabelled"),
            ("default", "elsewhere"),
            (NAMESPACE, second.name()),
        ] {
            leases.get(namespace, name, None).await.unwrap();
        }
    }
}
