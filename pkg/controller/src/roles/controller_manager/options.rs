//! The controller-manager's options (`genplane controller-manager`'s flags, config file keys and
//! `GENPLANE_*` variables), validated into a [`ControllerManagerConfig`].

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::descriptors::{CONTROLLERS, Selection};
use clap::Args;
use genplane_apimachinery::duration;
use genplane_authorization::bootstrap::CONTROLLER_MANAGER_LEASE;
use genplane_component_base::config::{CommonConfig, CommonOptions, Invalid};
use genplane_component_base::featuregate::{self, UseIdentity};
use serde::{Deserialize, Serialize};

/// The raw options.
#[derive(Args, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub struct ControllerManagerOptions {
    /// The kubeconfig to reach the API server with (required unless running in a pod).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<PathBuf>,
    /// The controllers to run, comma-separated: `*` for every controller on by default, `foo`
    /// to enable controller foo, `-foo` to disable it; the first entry naming a controller
    /// decides. Controllers: namespace, garbage-collector, serviceaccount,
    /// root-ca-cert-publisher, clusterrole-aggregation, resourcequota, csrsigning, csrcleaner,
    /// networkclaim (with the
    /// NetworkRegistry feature gate); upstream's names
    /// (namespace-controller, garbage-collector-controller, ...) are accepted too.
    #[arg(long, value_delimiter = ',', default_value = "*")]
    pub controllers: Vec<String>,
    /// Whether to elect a leader on a Lease before running the controllers, so that several
    /// controller-managers can run for availability.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub leader_elect: bool,
    /// How long non-leaders wait after the last observed renewal before taking the Lease.
    #[arg(long, default_value = "15s")]
    pub leader_elect_lease_duration: String,
    /// How long the leader keeps trying to renew before it stops leading.
    #[arg(long, default_value = "10s")]
    pub leader_elect_renew_deadline: String,
    /// How long candidates wait between tries to acquire or renew.
    #[arg(long, default_value = "2s")]
    pub leader_elect_retry_period: String,
    /// The kind of object leader election uses; only `leases` (upstream's default and, since
    /// 1.24, its only choice besides the deprecated ones) is supported.
    #[arg(long, default_value = "leases")]
    pub leader_elect_resource_lock: String,
    /// The namespace of the leader-election Lease.
    #[arg(long, default_value = "kube-system")]
    pub leader_elect_resource_namespace: String,
    /// The name of the leader-election Lease.
    #[arg(long, default_value = CONTROLLER_MANAGER_LEASE)]
    pub leader_elect_resource_name: String,
    /// The root CA bundle (PEM) published in every namespace as the `kube-root-ca.crt`
    /// ConfigMap; the kubeconfig's CA when unset.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root_ca_file: Option<PathBuf>,
    /// How often every resource quota is recalculated in full.
    #[arg(long, default_value = "5m0s")]
    pub resource_quota_sync_period: String,
    /// The Pod IP ranges of the cluster, as kube-controller-manager's flag: one CIDR, or two
    /// of different IP families, comma-separated; none by default. With the NetworkRegistry
    /// feature gate on, the `networkclaim` controller claims them as the NetworkClaim
    /// `kube-controller-manager` (reference `{"", pods}`).
    #[arg(long, default_value = "")]
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cluster_cidr: String,
    /// How long a deleted NetworkClaim keeps its ranges before the network registry gives
    /// them to the next claims (the `networkclaim` controller, with the NetworkRegistry
    /// feature gate on).
    #[arg(long, default_value = "10s")]
    pub network_claim_release_grace_period: String,
    /// The PEM CA certificate `csrsigning` issues certificates with, for every signer that
    /// has no file of its own (with --cluster-signing-key-file).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_signing_cert_file: Option<PathBuf>,
    /// The PEM key of --cluster-signing-cert-file.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_signing_key_file: Option<PathBuf>,
    /// The CA certificate of the `kubernetes.io/kube-apiserver-client` signer (with
    /// --cluster-signing-kube-apiserver-client-key-file).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_signing_kube_apiserver_client_cert_file: Option<PathBuf>,
    /// The key of --cluster-signing-kube-apiserver-client-cert-file.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_signing_kube_apiserver_client_key_file: Option<PathBuf>,
    /// The CA certificate of the `kubernetes.io/legacy-unknown` signer (with
    /// --cluster-signing-legacy-unknown-key-file).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_signing_legacy_unknown_cert_file: Option<PathBuf>,
    /// The key of --cluster-signing-legacy-unknown-cert-file.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_signing_legacy_unknown_key_file: Option<PathBuf>,
    /// The longest lifetime of the certificates `csrsigning` issues; a request's
    /// `spec.expirationSeconds` may ask for less.
    #[arg(long, default_value = "8760h0m0s")]
    pub cluster_signing_duration: String,
    /// The port serving /healthz, /livez, /readyz and /metrics over HTTPS; 0 serves nothing.
    #[arg(long, default_value_t = 10257)]
    pub secure_port: u16,
    /// The address to listen on.
    #[arg(long, default_value = "0.0.0.0")]
    pub bind_address: String,
    /// Logging and feature gates.
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonOptions,
}

impl Default for ControllerManagerOptions {
    fn default() -> Self {
        Self {
            kubeconfig: None,
            controllers: vec!["*".to_owned()],
            leader_elect: true,
            leader_elect_lease_duration: "15s".to_owned(),
            leader_elect_renew_deadline: "10s".to_owned(),
            leader_elect_retry_period: "2s".to_owned(),
            leader_elect_resource_lock: "leases".to_owned(),
            leader_elect_resource_namespace: "kube-system".to_owned(),
            leader_elect_resource_name: CONTROLLER_MANAGER_LEASE.to_owned(),
            root_ca_file: None,
            resource_quota_sync_period: "5m0s".to_owned(),
            network_claim_release_grace_period: "10s".to_owned(),
            cluster_cidr: String::new(),
            cluster_signing_cert_file: None,
            cluster_signing_key_file: None,
            cluster_signing_kube_apiserver_client_cert_file: None,
            cluster_signing_kube_apiserver_client_key_file: None,
            cluster_signing_legacy_unknown_cert_file: None,
            cluster_signing_legacy_unknown_key_file: None,
            cluster_signing_duration: "8760h0m0s".to_owned(),
            secure_port: 10257,
            bind_address: "0.0.0.0".to_owned(),
            common: CommonOptions::default(),
        }
    }
}

/// Leader-election timings and Lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderElection {
    /// `--leader-elect-lease-duration`.
    pub lease_duration: Duration,
    /// `--leader-elect-renew-deadline`.
    pub renew_deadline: Duration,
    /// `--leader-elect-retry-period`.
    pub retry_period: Duration,
    /// `--leader-elect-resource-namespace`.
    pub namespace: String,
    /// `--leader-elect-resource-name`.
    pub name: String,
    /// What losing the Lease does: `false` (the controller-manager, as upstream's) ends the
    /// process; `true` (all-in-one, whose API server serves on) stops the controllers and
    /// campaigns again.
    pub campaign_again: bool,
}

/// The validated options.
#[derive(Clone, Debug)]
pub struct ControllerManagerConfig {
    /// The options as given.
    pub options: ControllerManagerOptions,
    /// Which controllers run.
    pub controllers: Selection,
    /// Leader election, unless `--leader-elect=false`.
    pub leader_election: Option<LeaderElection>,
    /// `--resource-quota-sync-period`.
    pub resource_quota_sync_period: Duration,
    /// `--network-claim-release-grace-period`.
    pub network_claim_release_grace: Duration,
    /// `--cluster-cidr` (empty when not given).
    pub cluster_cidr: Vec<genplane_api::networkregistry::Prefix>,
    /// `--cluster-signing-*`: what `csrsigning` signs with.
    pub csr_signing: crate::certificates::SigningConfig,
    /// The listening address of the ops endpoints.
    pub bind_address: IpAddr,
    /// Logging and feature gates.
    pub common: CommonConfig,
}

/// A duration option that must be positive (and, here, any length).
fn positive(text: &str) -> Result<Duration, String> {
    duration::parse_at_least(text, Duration::from_nanos(1))
}

impl ControllerManagerOptions {
    /// Validates every option, recording every problem in `invalid`. `in_cluster` says
    /// whether the in-cluster environment is there (then `--kubeconfig` may be left out).
    pub fn validate(
        &self,
        identity: UseIdentity,
        rust_log: Option<&str>,
        in_cluster: bool,
        invalid: &mut Invalid,
    ) -> Option<ControllerManagerConfig> {
        crate::roles::check_kubeconfig(self.kubeconfig.as_deref(), in_cluster, invalid);
        let controllers = invalid.check(
            "controllers",
            Selection::parse(&self.controllers, CONTROLLERS).map_err(|e| e.to_string()),
        );
        let lease_duration = invalid.check(
            "leader-elect-lease-duration",
            positive(&self.leader_elect_lease_duration),
        );
        let renew_deadline = invalid.check(
            "leader-elect-renew-deadline",
            positive(&self.leader_elect_renew_deadline),
        );
        let retry_period = invalid.check(
            "leader-elect-retry-period",
            positive(&self.leader_elect_retry_period),
        );
        let leader_election = match (lease_duration, renew_deadline, retry_period) {
            (Some(lease_duration), Some(renew_deadline), Some(retry_period)) => {
                let election = LeaderElection {
                    lease_duration,
                    renew_deadline,
                    retry_period,
                    namespace: self.leader_elect_resource_namespace.clone(),
                    name: self.leader_elect_resource_name.clone(),
                    campaign_again: false,
                };
                if self.leader_elect {
                    let check = crate::leaderelection::LeaderElectionConfig {
                        namespace: election.namespace.clone(),
                        name: election.name.clone(),
                        identity: "check".to_owned(),
                        lease_duration,
                        renew_deadline,
                        retry_period,
                    };
                    if let Err(error) = check.validate() {
                        invalid.push("leader-elect-renew-deadline", error);
                    }
                    if election.name.is_empty() || election.namespace.is_empty() {
                        invalid.push(
                            "leader-elect-resource-name",
                            "the leader-election Lease needs a name and a namespace",
                        );
                    }
                }
                Some(Some(election).filter(|_| self.leader_elect))
            }
            _ => None,
        };
        if self.leader_elect_resource_lock != "leases" {
            invalid.push(
                "leader-elect-resource-lock",
                format!(
                    "{:?} is not supported: only leases",
                    self.leader_elect_resource_lock
                ),
            );
        }
        let resource_quota_sync_period = invalid.check(
            "resource-quota-sync-period",
            positive(&self.resource_quota_sync_period),
        );
        let network_claim_release_grace = invalid.check(
            "network-claim-release-grace-period",
            duration::parse(&self.network_claim_release_grace_period).map_err(|e| e.to_string()),
        );
        let cluster_cidr = if self.cluster_cidr.trim().is_empty() {
            Some(Vec::new())
        } else {
            invalid.check(
                "cluster-cidr",
                genplane_api::networkregistry::prefix::parse_dual_stack(&self.cluster_cidr),
            )
        };
        let csr_signing = self.csr_signing(invalid);
        let bind_address = invalid.check(
            "bind-address",
            crate::roles::bind_address(&self.bind_address),
        );
        if let Some(path) = &self.root_ca_file
            && let Err(error) = std::fs::read_to_string(path)
        {
            invalid.push("root-ca-file", format!("{}: {error}", path.display()));
        }
        let common = self
            .common
            .validate(&feature_registry(), identity, rust_log, invalid);
        Some(ControllerManagerConfig {
            options: self.clone(),
            controllers: controllers?,
            leader_election: leader_election?,
            resource_quota_sync_period: resource_quota_sync_period?,
            network_claim_release_grace: network_claim_release_grace?,
            cluster_cidr: cluster_cidr?,
            csr_signing: csr_signing?,
            bind_address: bind_address?,
            common: common?,
        })
    }
}

impl ControllerManagerOptions {
    /// The signing configuration of the `--cluster-signing-*` flags, checked as upstream
    /// checks them: each certificate with its key, and the common pair not together with a
    /// signer's own.
    fn csr_signing(&self, invalid: &mut Invalid) -> Option<crate::certificates::SigningConfig> {
        use crate::certificates::CaFiles;
        let mut ok = true;
        let mut pair = |flag: &str, cert: &Option<PathBuf>, key: &Option<PathBuf>| match (cert, key)
        {
            (Some(cert), Some(key)) => Some(CaFiles {
                cert: cert.clone(),
                key: key.clone(),
            }),
            (None, None) => None,
            _ => {
                invalid.push(
                    flag,
                    format!(
                        "the --{flag}-cert-file and --{flag}-key-file flags must be set together"
                    ),
                );
                ok = false;
                None
            }
        };
        let common = pair(
            "cluster-signing",
            &self.cluster_signing_cert_file,
            &self.cluster_signing_key_file,
        );
        let client = pair(
            "cluster-signing-kube-apiserver-client",
            &self.cluster_signing_kube_apiserver_client_cert_file,
            &self.cluster_signing_kube_apiserver_client_key_file,
        );
        let legacy = pair(
            "cluster-signing-legacy-unknown",
            &self.cluster_signing_legacy_unknown_cert_file,
            &self.cluster_signing_legacy_unknown_key_file,
        );
        if common.is_some() && (client.is_some() || legacy.is_some()) {
            invalid.push(
                "cluster-signing-cert-file",
                "cannot specify --cluster-signing-{cert,key}-file and other --cluster-signing-*-file flags at the same time",
            );
            ok = false;
        }
        let duration = invalid.check(
            "cluster-signing-duration",
            positive(&self.cluster_signing_duration),
        );
        Some(crate::certificates::SigningConfig {
            kube_apiserver_client: client.or_else(|| common.clone()),
            legacy_unknown: legacy.or(common),
            duration: duration?,
        })
        .filter(|_| ok)
    }
}

/// `NetworkRegistry`: the `networkclaim` controller runs only while it is on (the API
/// server serves the NetworkClaim API under the same gate; both register it with
/// [`genplane_features::network_registry::register`]).
pub const NETWORK_REGISTRY: featuregate::Feature = genplane_features::NETWORK_REGISTRY;

/// The features the controller-manager knows.
pub fn feature_registry() -> featuregate::Registry {
    let mut registry = featuregate::Registry::new();
    let added = genplane_features::network_registry::register(&mut registry);
    // Static, valid registrations; their crates' tests prove them.
    debug_assert!(added.is_ok(), "{added:?}");
    let added = genplane_features::controllers::register(&mut registry);
    debug_assert!(added.is_ok(), "{added:?}");
    registry
}

/// Checks `--controllers` alone, as [`ControllerManagerOptions::validate`] does, for a role that
/// runs the controllers next to others (all-in-one): a problem goes to `invalid`.
pub fn check_controllers(entries: &[String], invalid: &mut Invalid) -> Option<()> {
    invalid
        .check("controllers", Selection::parse(entries, CONTROLLERS))
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn validate(
        options: &ControllerManagerOptions,
        in_cluster: bool,
    ) -> Result<ControllerManagerConfig, String> {
        let mut invalid = Invalid::new();
        let config = options.validate(
            UseIdentity::new("controller-manager", "test"),
            None,
            in_cluster,
            &mut invalid,
        );
        invalid.finish(config).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_are_upstreams() {
        let options = ControllerManagerOptions {
            kubeconfig: Some("k".into()),
            ..ControllerManagerOptions::default()
        };
        let config = validate(&options, false).unwrap();
        let election = config.leader_election.unwrap();
        assert_eq!(election.lease_duration, Duration::from_secs(15));
        assert_eq!(election.renew_deadline, Duration::from_secs(10));
        assert_eq!(election.retry_period, Duration::from_secs(2));
        assert_eq!(election.namespace, "kube-system");
        assert_eq!(election.name, "genplane-controller-manager");
        assert_eq!(config.resource_quota_sync_period, Duration::from_secs(300));
        assert_eq!(
            config.controllers.enabled(CONTROLLERS).len(),
            CONTROLLERS.len()
        );
    }

    #[test]
    fn signing_flags_are_checked_as_upstreams() {
        let base = ControllerManagerOptions {
            kubeconfig: Some("k".into()),
            ..ControllerManagerOptions::default()
        };
        let config = validate(&base, false).unwrap();
        assert_eq!(
            config.csr_signing,
            crate::certificates::SigningConfig::default()
        );
        assert_eq!(
            config.csr_signing.duration,
            Duration::from_secs(365 * 24 * 3600)
        );
        let common = ControllerManagerOptions {
            cluster_signing_cert_file: Some("ca.crt".into()),
            cluster_signing_key_file: Some("ca.key".into()),
            cluster_signing_duration: "1h".into(),
            ..base.clone()
        };
        let config = validate(&common, false).unwrap();
        let ca = crate::certificates::CaFiles {
            cert: "ca.crt".into(),
            key: "ca.key".into(),
        };
        assert_eq!(config.csr_signing.kube_apiserver_client, Some(ca.clone()));
        assert_eq!(config.csr_signing.legacy_unknown, Some(ca));
        assert_eq!(config.csr_signing.duration, Duration::from_secs(3600));
        let own = ControllerManagerOptions {
            cluster_signing_legacy_unknown_cert_file: Some("l.crt".into()),
            cluster_signing_legacy_unknown_key_file: Some("l.key".into()),
            ..base.clone()
        };
        let config = validate(&own, false).unwrap();
        assert_eq!(config.csr_signing.kube_apiserver_client, None);
        assert_eq!(
            config.csr_signing.legacy_unknown.unwrap().cert,
            std::path::PathBuf::from("l.crt")
        );
        let both = ControllerManagerOptions {
            cluster_signing_legacy_unknown_cert_file: Some("l.crt".into()),
            cluster_signing_legacy_unknown_key_file: Some("l.key".into()),
            ..common.clone()
        };
        let error = validate(&both, false).unwrap_err();
        assert!(
            error.contains("cannot specify --cluster-signing-{cert,key}-file and other --cluster-signing-*-file flags at the same time"),
            "{error}"
        );
        let half = ControllerManagerOptions {
            cluster_signing_key_file: None,
            ..common
        };
        let error = validate(&half, false).unwrap_err();
        assert!(
            error.contains("the --cluster-signing-cert-file and --cluster-signing-key-file flags must be set together"),
            "{error}"
        );
    }

    #[test]
    fn kubeconfig_is_required_outside_a_pod() {
        let options = ControllerManagerOptions::default();
        let error = validate(&options, false).unwrap_err();
        assert!(error.contains("kubeconfig"), "{error}");
        assert!(validate(&options, true).is_ok());
    }

    #[test]
    fn bad_controllers_and_timings_are_reported() {
        let options = ControllerManagerOptions {
            kubeconfig: Some("k".into()),
            controllers: vec!["*".into(), "-nope".into()],
            leader_elect_renew_deadline: "20s".into(),
            ..ControllerManagerOptions::default()
        };
        let error = validate(&options, false).unwrap_err();
        assert!(
            error.contains("\"nope\" is not in the list of known controllers"),
            "{error}"
        );
        assert!(
            error.contains("leaseDuration must be greater than renewDeadline"),
            "{error}"
        );
        let options = ControllerManagerOptions {
            kubeconfig: Some("k".into()),
            leader_elect: false,
            leader_elect_renew_deadline: "20s".into(),
            ..ControllerManagerOptions::default()
        };
        assert!(validate(&options, false).unwrap().leader_election.is_none());
    }
}
