//! `genplane feature-controller`: KEP-3920's server flow against an API server over HTTPS
//! (`genplane_featurecontroller`).
//!
//! Options → validated config → a client from `--kubeconfig` (or the pod's service account) →
//! the ops endpoints (`/healthz`, `/livez`, `/readyz`, `/metrics` with
//! `feature_controller_leader` and `feature_transitions_total`) over HTTPS with a self-signed
//! certificate → the server flow until SIGTERM: an identity Lease, and when this instance is
//! the one chosen by rendezvous hashing over the live instances, the announcement of every
//! feature the `genplane` binary knows and the transitions between their states. Several
//! instances can run: one acts, the others stand by and take over within one
//! `--identity-lease-duration` of its death. `genplane all-in-one` runs [`serve`] too.
//!
//! The desired value of each feature is the one this role's `--feature-gates` give it, unless
//! the feature is dynamic: named in every live API server's `--dynamic-features` (which each
//! API server's identity Lease carries), whose `spec.desired` clients may then set. This role's
//! own `--dynamic-features` is deprecated: it still makes the features it names dynamic,
//! whatever the API servers say, and says so in a warning at start.

#![warn(missing_docs)]

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::{ArgMatches, Args, CommandFactory, Parser};
use genplane_apimachinery::duration;
use genplane_component_base::component::{self, Startup};
use genplane_component_base::config::{CommonConfig, CommonOptions, ConfigFlags, Invalid};
use genplane_component_base::featuregate::{self, UseIdentity};
use genplane_component_base::health::Health;
use genplane_component_base::http::{self, OpsHandler};
use genplane_component_base::metrics;
use genplane_component_base::process::Process;
use genplane_component_base::shutdown::{Shutdown, run_role};
use genplane_component_base::version::KUBERNETES_VERSION;
use genplane_featurecontroller::{Config, FeatureController, known_features};
use serde::{Deserialize, Serialize};

/// How long open requests to the ops endpoints may finish after a shutdown signal.
const DRAIN: Duration = Duration::from_secs(5);

/// The environment variables that say the process runs in a pod.
const IN_CLUSTER_ENV: [&str; 2] = ["KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"];

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

/// Every feature the `genplane` binary knows: the API server's, which include those the
/// controller-manager knows (NetworkRegistry and OrderedNamespaceDeletion, registered for
/// both by `genplane_features::network_registry::register` and
/// `genplane_features::controllers::register`), with their declared transition tasks.
pub fn binary_features() -> featuregate::Registry {
    genplane_features::registry()
}

/// What is wrong with `--dynamic-features` (`names`) for `registry`
/// ([`genplane_features::dynamic_feature_problems`]).
pub use genplane_features::dynamic_feature_problems;

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
        if self.kubeconfig.is_none() && !in_cluster {
            invalid.push(
                "kubeconfig",
                "required unless running in a pod (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT set)",
            );
        }
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
        let registry = binary_features();
        for problem in dynamic_feature_problems(&registry, &self.dynamic_features) {
            invalid.push("dynamic-features", problem);
        }
        let bind_address = invalid.check(
            "bind-address",
            self.bind_address
                .parse::<IpAddr>()
                .map_err(|e| format!("{:?} is not an IP address: {e}", self.bind_address)),
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

#[derive(Parser)]
#[command(
    name = "feature-controller",
    about = "Announce the cluster's feature gates in the Feature API and turn them on and off safely (KEP-3920)"
)]
struct Cli {
    #[command(flatten)]
    config: ConfigFlags,
    #[command(flatten)]
    options: FeatureControllerOptions,
    #[command(subcommand)]
    check: Option<Check>,
}

/// `genplane feature-controller check`.
#[derive(clap::Subcommand)]
enum Check {
    /// Say whether moving the cluster to another version is safe, given the features on or in
    /// use and what they left in storage; exits 1 when it is not
    Check(CheckArgs),
}

/// The flags of `check`.
#[derive(Args)]
struct CheckArgs {
    /// The kubeconfig to reach the API server with (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The version the cluster's binaries (or their emulated version) would move to,
    /// MAJOR.MINOR.
    #[arg(long, value_name = "MAJOR.MINOR")]
    to_version: String,
    /// The namespace of the Features.
    #[arg(long, default_value = "kube-system")]
    namespace: String,
}

/// The command line of `genplane feature-controller`.
pub fn command() -> clap::Command {
    Cli::command()
}

/// Runs `genplane feature-controller check`: prints the report; an unsafe move is an error
/// (exit 1), so scripts can test it.
fn check(matches: &ArgMatches, process: &Process) -> anyhow::Result<()> {
    use clap::FromArgMatches as _;
    let args = CheckArgs::from_arg_matches(matches)?;
    let target: featuregate::Version = args
        .to_version
        .parse()
        .map_err(|e| anyhow::anyhow!("--to-version: {e}"))?;
    let kubeconfig = genplane_controller::client::kubeconfig_path(
        args.kubeconfig.as_deref(),
        process.var("KUBECONFIG"),
        process.var("HOME"),
    )
    .context("no --kubeconfig, KUBECONFIG or HOME")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let report = runtime.block_on(async {
        let (client, _) = genplane_controller::client::connect(Some(&kubeconfig)).await?;
        let report = genplane_featurecontroller::check::inspect(
            &client,
            &binary_features(),
            &args.namespace,
            target,
        )
        .await?;
        anyhow::Ok(report)
    })?;
    print!("{}", report.render());
    if !report.safe() {
        anyhow::bail!("moving to {target} is not safe");
    }
    Ok(())
}

/// Runs `genplane feature-controller` until SIGTERM or SIGINT (or `check`, once).
pub fn run(matches: &ArgMatches, process: &Process) -> anyhow::Result<()> {
    if let Some(("check", sub)) = matches.subcommand() {
        return check(sub, process);
    }
    let instance = process.var("HOSTNAME").unwrap_or("localhost").to_owned();
    let rust_log = process.var("RUST_LOG").map(str::to_owned);
    let in_cluster = IN_CLUSTER_ENV.iter().all(|v| process.var(v).is_some());
    let startup = component::configure::<FeatureControllerOptions, _>(
        matches,
        process,
        &mut std::io::stdout(),
        |options, invalid| {
            options.validate(
                UseIdentity::new("feature-controller", instance.clone()),
                rust_log.as_deref(),
                in_cluster,
                invalid,
            )
        },
    )?;
    let Startup::Run(config) = startup else {
        return Ok(());
    };
    let _ = tracing::subscriber::set_global_default(config.common.logging.subscriber());
    for warning in config.common.feature_gate.warnings() {
        tracing::warn!("{warning}");
    }
    if !config.dynamic.is_empty() {
        tracing::warn!(
            features = ?config.dynamic,
            "--dynamic-features of the feature-controller is deprecated: the API servers decide \
             which features are dynamic (genplane apiserver --dynamic-features, and \
             all-in-one's); these are still marked dynamic whatever the API servers say"
        );
    }
    run_role(None, |shutdown| async move {
        let notifier = genplane_component_base::notify::Notifier::of(process);
        notifier.watch(&shutdown);
        serve(config, shutdown, &notifier).await
    })
}

/// Runs the feature-controller with `config` until `shutdown` is triggered. It installs no
/// signal handler or subscriber, so it can run next to other roles in one process (all-in-one
/// validates [`FeatureControllerOptions`] itself, with the API server's
/// `feature-controller.kubeconfig` and `secure_port` 0). It tells `notifier` (the service
/// manager, when it listens) once it is connected and serves its ops endpoints.
pub async fn serve(
    config: FeatureControllerConfig,
    shutdown: Shutdown,
    notifier: &genplane_component_base::notify::Notifier,
) -> anyhow::Result<()> {
    let (client, _) =
        genplane_controller::client::connect(config.options.kubeconfig.as_deref()).await?;
    let registry = metrics::Registry::new();
    config.common.feature_gate.register_metrics(&registry);
    let gate = &config.common.feature_gate;
    let known = known_features(&binary_features(), gate, &config.dynamic);
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
    let ops = if config.options.secure_port == 0 {
        None
    } else {
        let tls = http::self_signed_tls()?;
        let listener = http::bind(SocketAddr::new(
            config.bind_address,
            config.options.secure_port,
        ))
        .await?;
        tracing::info!(address = %listener.local_addr()?, "serving the ops endpoints over HTTPS");
        Some(tokio::spawn(http::serve_ops_tls(
            listener,
            tls,
            OpsHandler::new(Health::new(&shutdown), registry),
            shutdown.clone(),
            DRAIN,
        )))
    };
    notifier.ready("running");
    let stop = shutdown.clone();
    controller.run(async move { stop.triggered().await }).await;
    if let Some(ops) = ops {
        match ops.await {
            Ok(Err(error)) => tracing::warn!(%error, "closing the ops endpoints"),
            Err(error) => tracing::warn!(%error, "the ops server task failed"),
            Ok(Ok(())) => {}
        }
    }
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
