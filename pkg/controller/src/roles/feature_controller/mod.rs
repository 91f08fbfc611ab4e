//! The feature-controller assembled: what `genplane feature-controller` runs and all-in-one
//! runs beside its API server (KEP-3920's server flow, [`genplane_featurecontroller`]).
//!
//! [`FeatureControllerOptions`] → [`FeatureControllerConfig`] (validated) → [`serve`]: a client
//! from `--kubeconfig` (or the pod's service account) → the ops endpoints (`/healthz`,
//! `/livez`, `/readyz`, `/metrics` with `feature_controller_leader` and
//! `feature_transitions_total`) over HTTPS with a self-signed certificate → the server flow until
//! shutdown: an identity Lease, and when this instance is the one chosen by rendezvous hashing
//! over the live instances, the announcement of every feature the `genplane` binary knows
//! ([`genplane_features::registry`]) and the transitions between their states. Several instances
//! can run: one acts, the others stand by and take over within one `--identity-lease-duration`
//! of its death.
//!
//! The desired value of each feature is the one this role's `--feature-gates` give it, unless
//! the feature is dynamic: named in every live API server's `--dynamic-features` (which each
//! API server's identity Lease carries), whose `spec.desired` clients may then set. This role's
//! own `--dynamic-features` is deprecated: it still makes the features it names dynamic,
//! whatever the API servers say.
//!
//! [`check`] is `genplane feature-controller check`: whether moving the cluster to another
//! version is safe.

pub mod check;

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use genplane_apimachinery::duration;
use genplane_component_base::config::{CommonConfig, CommonOptions, Invalid};
use genplane_component_base::featuregate::UseIdentity;
use genplane_component_base::health::Health;
use genplane_component_base::http::OpsHandler;
use genplane_component_base::metrics;
use genplane_component_base::notify::Notifier;
use genplane_component_base::shutdown::Shutdown;
use genplane_component_base::version::KUBERNETES_VERSION;
use genplane_featurecontroller::{Config, FeatureController, known_features};
use serde::{Deserialize, Serialize};

/// Why the feature-controller stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No client of the API server could be made from the kubeconfig.
    #[error(transparent)]
    Connect(#[from] crate::client::Error),
    /// The ops endpoints could not be served.
    #[error("serving the ops endpoints")]
    Ops(#[source] genplane_component_base::http::Error),
}

/// The raw options.
#[derive(Args, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub struct FeatureControllerOptions {
    /// The kubeconfig to reach the API server with (required unless running in a pod).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<PathBuf>,
    /// The namespace of the Features of the features this binary knows.
    #[arg(long, default_value = "kube-system")]
    pub namespace: String,
    /// How long this instance's identity Lease stays valid after a renewal (renewed every
    /// third of it); another instance acts within about this long after the acting one stops.
    #[arg(long, default_value = "15s")]
    pub identity_lease_duration: String,
    /// How often the acting instance reconciles every Feature.
    #[arg(long, default_value = "5s")]
    pub sync_period: String,
    /// Deprecated: name dynamic features in the API servers' --dynamic-features. Features
    /// whose spec.desired clients may set whatever the API servers say (comma-separated
    /// names).
    #[arg(long, value_delimiter = ',')]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dynamic_features: Vec<String>,
    /// The port serving /healthz, /livez, /readyz and /metrics over HTTPS; 0 serves nothing.
    #[arg(long, default_value_t = 10260)]
    pub secure_port: u16,
    /// The address to listen on.
    #[arg(long, default_value = "0.0.0.0")]
    pub bind_address: String,
    /// Logging, feature gates and the use report period.
    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonOptions,
}

impl Default for FeatureControllerOptions {
    fn default() -> Self {
        Self {
            kubeconfig: None,
            namespace: "kube-system".to_owned(),
            identity_lease_duration: "15s".to_owned(),
            sync_period: "5s".to_owned(),
            dynamic_features: Vec::new(),
            secure_port: 10260,
            bind_address: "0.0.0.0".to_owned(),
            common: CommonOptions::default(),
        }
    }
}

/// The validated options.
#[derive(Clone, Debug)]
pub struct FeatureControllerConfig {
    /// The options as given.
    pub options: FeatureControllerOptions,
    /// `--identity-lease-duration`.
    pub identity_lease_duration: Duration,
    /// `--sync-period`.
    pub sync_period: Duration,
    /// `--dynamic-features`.
    pub dynamic: BTreeSet<String>,
    /// The listening address of the ops endpoints.
    pub bind_address: IpAddr,
    /// Logging and feature gates.
    pub common: CommonConfig,
}

/// A duration option that must be positive (and, here, at least a second).
fn positive(text: &str) -> Result<Duration, String> {
    duration::parse_at_least(text, Duration::from_secs(1))
}

impl FeatureControllerOptions {
    /// Validates every option, recording every problem in `invalid`.
    pub fn validate(
        &self,
        identity: UseIdentity,
        rust_log: Option<&str>,
        in_cluster: bool,
        invalid: &mut Invalid,
    ) -> Option<FeatureControllerConfig> {
        crate::roles::check_kubeconfig(self.kubeconfig.as_deref(), in_cluster, invalid);
        let identity_lease_duration = invalid.check(
            "identity-lease-duration",
            positive(&self.identity_lease_duration).and_then(|d| {
                let max = genplane_api::featuregates::MAX_CONTROLLER_LEASE_SECONDS;
                if d > Duration::from_secs(u64::try_from(max).unwrap_or(u64::MAX)) {
                    Err(format!(
                        "must be at most {max}s: the API server accepts no longer \
                         feature-controller identity Lease"
                    ))
                } else {
                    Ok(d)
                }
            }),
        );
        let sync_period = invalid.check("sync-period", positive(&self.sync_period));
        let registry = genplane_features::registry();
        for problem in
            genplane_features::dynamic_feature_problems(&registry, &self.dynamic_features)
        {
            invalid.push("dynamic-features", problem);
        }
        let bind_address = invalid.check(
            "bind-address",
            crate::roles::bind_address(&self.bind_address),
        );
        let common = self.common.validate(&registry, identity, rust_log, invalid);
        Some(FeatureControllerConfig {
            options: self.clone(),
            identity_lease_duration: identity_lease_duration?,
            sync_period: sync_period?,
            dynamic: self.dynamic_features.iter().cloned().collect(),
            bind_address: bind_address?,
            common: common?,
        })
    }
}

/// `genplane feature-controller` as a [`Role`](genplane_component_base::component::Role):
/// [`FeatureControllerOptions`] validated with the feature uses named `feature-controller` and
/// the instance `HOSTNAME`, then [`serve`].
#[derive(Debug)]
pub struct FeatureControllerRole;

impl FeatureControllerRole {
    /// Runs `genplane feature-controller` with the arguments in `matches` until SIGTERM or SIGINT:
    /// [`component::run`](genplane_component_base::component::run) for this role. It is not
    /// generic, so the role is compiled here once and not again in every crate that runs it
    /// (see [`Failure`](genplane_component_base::component::Failure)).
    pub fn run(
        matches: &clap::ArgMatches,
        process: &genplane_component_base::process::Process,
    ) -> Result<(), genplane_component_base::component::Failure> {
        genplane_component_base::component::run::<Self, _>(matches, process)
    }
}

impl genplane_component_base::component::Role for FeatureControllerRole {
    type Options = FeatureControllerOptions;
    type Config = FeatureControllerConfig;
    type Error = Error;

    fn validate(
        options: &FeatureControllerOptions,
        environment: &genplane_component_base::component::Environment,
        invalid: &mut Invalid,
    ) -> Option<FeatureControllerConfig> {
        options.validate(
            environment.identity("feature-controller"),
            environment.rust_log.as_deref(),
            environment.in_cluster,
            invalid,
        )
    }

    fn common(config: &FeatureControllerConfig) -> &CommonConfig {
        &config.common
    }

    async fn serve(
        config: FeatureControllerConfig,
        context: genplane_component_base::component::Context<'_>,
    ) -> Result<(), Error> {
        if !config.dynamic.is_empty() {
            tracing::warn!(
                features = ?config.dynamic,
                "--dynamic-features of the feature-controller is deprecated: the API servers \
                 decide which features are dynamic (genplane apiserver --dynamic-features, and \
                 all-in-one's); these are still marked dynamic whatever the API servers say"
            );
        }
        serve(config, context.shutdown, &context.notifier).await
    }
}

/// Runs the feature-controller with `config` until `shutdown` is triggered. It installs no
/// signal handler or subscriber, so it can run next to other roles in one process (all-in-one
/// validates [`FeatureControllerOptions`] itself, with the API server's
/// `feature-controller.kubeconfig` and `secure_port` 0). It tells `notifier` (the service
/// manager, when it listens) once it is connected and serves its ops endpoints.
pub async fn serve(
    config: FeatureControllerConfig,
    shutdown: Shutdown,
    notifier: &Notifier,
) -> Result<(), Error> {
    let (client, _) = crate::client::connect(config.options.kubeconfig.as_deref()).await?;
    let registry = metrics::Registry::new();
    config.common.feature_gate.register_metrics(&registry);
    let gate = &config.common.feature_gate;
    let known = known_features(&genplane_features::registry(), gate, &config.dynamic);
    let controller = FeatureController::new(
        client,
        Config {
            namespace: config.options.namespace.clone(),
            report_period: config.common.feature_use_report_period,
            identity_lease_duration: config.identity_lease_duration,
            sync_period: config.sync_period,
            dynamic: config.dynamic.clone(),
            binary_version: KUBERNETES_VERSION.to_string(),
        },
        known,
        gate.emulated_version().to_string(),
        &genplane_component_base::process::hostname(),
        &registry,
    );
    let ops = crate::roles::Ops::start(
        config.bind_address,
        config.options.secure_port,
        OpsHandler::new(Health::new(&shutdown), registry),
        &shutdown,
    )
    .await
    .map_err(Error::Ops)?;
    notifier.ready("running");
    let stop = shutdown.clone();
    controller.run(async move { stop.triggered().await }).await;
    ops.finish().await;
    tracing::info!("stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn validate(options: &FeatureControllerOptions) -> Result<FeatureControllerConfig, String> {
        let mut invalid = Invalid::new();
        let config = options.validate(
            UseIdentity::new("feature-controller", "test"),
            None,
            false,
            &mut invalid,
        );
        invalid.finish(config).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_and_every_problem_reported() {
        let options = FeatureControllerOptions {
            kubeconfig: Some("k".into()),
            ..FeatureControllerOptions::default()
        };
        let config = validate(&options).unwrap();
        assert_eq!(config.identity_lease_duration, Duration::from_secs(15));
        assert_eq!(config.sync_period, Duration::from_secs(5));
        assert_eq!(
            config.common.feature_use_report_period,
            Duration::from_secs(30)
        );
        let bad = FeatureControllerOptions {
            sync_period: "0s".into(),
            identity_lease_duration: "1h".into(),
            dynamic_features: vec!["NoSuchFeature".into()],
            ..FeatureControllerOptions::default()
        };
        let error = validate(&bad).unwrap_err();
        for part in [
            "kubeconfig",
            "sync-period",
            "identity-lease-duration: must be at most 300s",
            "unrecognized feature gate: NoSuchFeature",
        ] {
            assert!(error.contains(part), "{part}: {error}");
        }
    }
}
