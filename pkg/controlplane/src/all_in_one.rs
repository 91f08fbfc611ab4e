//! Every long-running role in one process (`genplane all-in-one`, the local run; and any program
//! that wants the whole control plane in one call). The API
//! server (SQLite in `--data-dir` by default; every `genplane apiserver` option applies) and,
//! once it takes requests, the controller-manager and the feature-controller, connected to it
//! with the `controller-manager.kubeconfig` and `feature-controller.kubeconfig` the API server
//! wrote. The feature-controller takes its desired feature values from the same
//! `--feature-gates` and reports at the same `--feature-use-report-period`. There is no second ops port: the API
//! server's `/healthz`, `/readyz` and `/metrics` stand for both.
//!
//! On SQLite one process owns the data directory, so the controllers run without election. On
//! etcd (`--storage-backend=etcd`) several all-in-one processes may share the data (a k3s-style
//! HA pair), so the controllers are leader-elected exactly as `genplane controller-manager`
//! does it, on the same Lease (`kube-system/genplane-controller-manager`, upstream's timings):
//! one process runs them, the others serve the API and stand by, and one takes over within the
//! lease duration (15 s) when the leader dies.
//!
//! A leader that cannot renew its Lease (an etcd outage longer than the renew deadline, say)
//! stops its controllers at once, before another process may take over, says so in its log
//! (`leaderelection lost ... campaigning again`) and stands again as a candidate, while its API
//! server serves on (answering 503 itself while etcd is unavailable): losing the Lease does
//! not take the API down with it. `genplane controller-manager`, which has no API to serve,
//! exits 1 instead, as upstream's does, for its service manager to restart it.
//!
//! SIGTERM stops both (a leader releases the Lease, so another process takes over at once); a
//! controller-manager that fails ends the process with its error, the API server drained first;
//! an API server that fails ends the process at once.

use genplane_component_base::component::Environment;
use genplane_component_base::config::{CommonOptions, Invalid};
use genplane_component_base::featuregate::{FeatureGateSettings, Version};
use genplane_component_base::notify::Notifier;
use genplane_component_base::shutdown::Shutdown;
use genplane_component_base::version::BuildInfo;
use genplane_controller::roles::controller_manager::{self, ControllerManagerOptions};
use genplane_controller::roles::feature_controller::{self, FeatureControllerOptions};
use serde::{Deserialize, Serialize};

use crate::server::{Backend, Config, Options};

/// Why the control plane stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The API server failed (it stops the controllers with it).
    #[error(transparent)]
    Server(#[from] crate::server::Error),
    /// A controller role's options, made from the API server's, are invalid.
    #[error("configuring the {role}")]
    Configure {
        /// `controller-manager` or `feature-controller`.
        role: &'static str,
        /// What is invalid.
        #[source]
        source: genplane_component_base::config::Error,
    },
    /// The controllers failed (a lost Lease is not a failure here: they campaign again).
    #[error("the controllers stopped, and the API server with them")]
    Controllers(#[source] controller_manager::Error),
}

/// The options of `genplane all-in-one`: every option of `genplane apiserver`, and the
/// controllers to run.
#[derive(clap::Args, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub struct AllInOneOptions {
    /// The API server's options.
    #[command(flatten)]
    #[serde(flatten)]
    pub server: Options,
    /// The controllers to run, as `genplane controller-manager --controllers` reads them: `*`
    /// for every controller on by default, `foo` to enable controller foo, `-foo` to disable it
    #[arg(long, value_delimiter = ',', default_value = "*")]
    pub controllers: Vec<String>,
}

impl Default for AllInOneOptions {
    fn default() -> Self {
        Self {
            server: Options::default(),
            controllers: vec!["*".to_owned()],
        }
    }
}

/// [`AllInOneOptions`] validated.
#[derive(Debug)]
pub struct AllInOneConfig {
    /// The API server's configuration.
    pub server: Config,
    /// The controllers to run, as given (checked).
    pub controllers: Vec<String>,
}

/// `genplane all-in-one` as a [`Role`](genplane_component_base::component::Role): the API
/// server's options validated as `genplane apiserver` validates them, `--controllers` as the
/// controller-manager checks it, then [`serve`]; a unit of `Type=notify` hears of the process
/// as one, ready once the API server is.
#[derive(Debug)]
pub struct AllInOneRole;

impl AllInOneRole {
    /// Runs `genplane all-in-one` with the arguments in `matches` until SIGTERM or SIGINT:
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

impl genplane_component_base::component::Role for AllInOneRole {
    type Options = AllInOneOptions;
    type Config = AllInOneConfig;
    type Error = Error;

    const THREAD_STACK: Option<usize> = Some(crate::server::THREAD_STACK_BYTES);

    fn validate(
        options: &AllInOneOptions,
        environment: &Environment,
        invalid: &mut Invalid,
    ) -> Option<AllInOneConfig> {
        let server =
            <crate::server::ApiServerRole as genplane_component_base::component::Role>::validate(
                &options.server,
                environment,
                invalid,
            );
        let controllers = controller_manager::check_controllers(&options.controllers, invalid);
        controllers?;
        Some(AllInOneConfig {
            server: server?,
            controllers: options.controllers.clone(),
        })
    }

    fn common(config: &AllInOneConfig) -> &genplane_component_base::config::CommonConfig {
        &config.server.common
    }

    async fn serve(
        config: AllInOneConfig,
        context: genplane_component_base::component::Context<'_>,
    ) -> Result<(), Error> {
        serve(
            "all-in-one",
            config.server,
            config.controllers,
            &context.environment,
            &context.process.build,
            context.shutdown,
            &context.notifier,
        )
        .await
    }
}

/// The part of the API server's `--feature-gates` that the controller-manager knows.
fn controller_manager_gates(gates: Option<&FeatureGateSettings>) -> Option<FeatureGateSettings> {
    let known = controller_manager::feature_registry();
    let kept: std::collections::BTreeMap<String, bool> = gates?
        .0
        .iter()
        .filter(|(name, _)| {
            matches!(name.as_str(), "AllAlpha" | "AllBeta")
                || known.spec_at(name, Version::new(0, 0)).is_some()
        })
        .map(|(name, on)| (name.clone(), *on))
        .collect();
    Some(FeatureGateSettings(kept))
}

/// Serves the API server of `config` and, once it takes requests, the feature-controller and
/// the controller-manager with `controllers` (as `--controllers` reads them; checked with
/// [`controller_manager::check_controllers`]), until `shutdown` is triggered or the API
/// server or the controllers fail. `environment` names the roles' instances; `notifier` hears
/// of the process as one (ready once the API server takes requests). `role` names the process
/// in the banner. Installs no signal handler or log subscriber.
pub async fn serve(
    role: &str,
    config: Config,
    controllers: Vec<String>,
    environment: &Environment,
    build: &BuildInfo,
    shutdown: Shutdown,
    notifier: &Notifier,
) -> Result<(), Error> {
    let common = config.options.common.clone();
    // The API server trusts its generated CA for client certificates unless given another
    // (whose key it has not): csrsigning signs with that CA, so an issued client certificate
    // logs in at once.
    let signs_with_generated_ca = config.options.serving.client_ca_file.is_none();
    // Shared storage, possibly shared with other all-in-one processes: elect a leader.
    let leader_elect = config.backend == Backend::Etcd;
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let apiserver = async {
        config
            .complete()
            .await?
            .run(role, build, shutdown.clone(), Some(ready_tx))
            .await?;
        Ok::<(), Error>(())
    };
    let controllers = async {
        let Ok(ready) = ready_rx.await else {
            // The API server stopped before it was ready; its error tells why.
            return Ok(());
        };
        notifier.ready(&format!("serving on {}", ready.server_url));
        // The feature-controller, connected as its own user; no ops port of its own.
        let options = FeatureControllerOptions {
            kubeconfig: Some(ready.data_dir.join("feature-controller.kubeconfig")),
            secure_port: 0,
            common: common.clone(),
            ..FeatureControllerOptions::default()
        };
        let mut invalid = Invalid::new();
        let validated = options.validate(
            environment.identity("feature-controller"),
            None,
            false,
            &mut invalid,
        );
        let feature_controller = invalid
            .finish(validated)
            .map_err(|source| Error::Configure {
                role: "feature-controller",
                source,
            })?;
        let stop = shutdown.clone();
        tokio::spawn(async move {
            // The controllers inside do not speak to the service manager.
            let quiet = Notifier::default();
            if let Err(error) = feature_controller::serve(feature_controller, stop, &quiet).await {
                tracing::error!(%error, "the feature-controller stopped");
            }
        });
        let options = ControllerManagerOptions {
            kubeconfig: Some(ready.data_dir.join("controller-manager.kubeconfig")),
            controllers,
            leader_elect,
            secure_port: 0,
            cluster_signing_cert_file: signs_with_generated_ca
                .then(|| ready.data_dir.join("pki").join("ca.crt")),
            cluster_signing_key_file: signs_with_generated_ca
                .then(|| ready.data_dir.join("pki").join("ca.key")),
            // The API server's --feature-gates (validated by the API server), those the
            // controller-manager knows (NetworkRegistry) and the AllAlpha/AllBeta switches.
            common: CommonOptions {
                feature_gates: controller_manager_gates(common.feature_gates.as_ref()),
                ..common
            },
            ..ControllerManagerOptions::default()
        };
        let mut invalid = Invalid::new();
        let validated = options.validate(
            environment.identity("controller-manager"),
            None,
            false,
            &mut invalid,
        );
        let mut config = invalid
            .finish(validated)
            .map_err(|source| Error::Configure {
                role: "controller-manager",
                source,
            })?;
        // The API server serves on when the Lease is lost: the controllers stop and campaign
        // again.
        if let Some(election) = &mut config.leader_election {
            election.campaign_again = true;
        }
        tracing::info!(
            server = ready.server_url,
            leader_elect,
            "starting the controller-manager"
        );
        controller_manager::serve(config, &Notifier::default(), shutdown.clone())
            .await
            .map_err(Error::Controllers)
    };
    // The controller-manager triggers `shutdown` when it stops (lost leadership included), so
    // the API server drains before the process exits with the controllers' error.
    tokio::pin!(apiserver, controllers);
    tokio::select! {
        // Failed: stop the controllers at once. Stopped on shutdown: so do they.
        result = &mut apiserver => match result {
            Ok(()) => controllers.await,
            Err(error) => Err(error),
        },
        result = &mut controllers => {
            let served = apiserver.await;
            result.and(served)
        }
    }
}
