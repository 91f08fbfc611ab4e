//! `genplane all-in-one`: every long-running role in one process, for the local run. The API
//! server (SQLite in `--data-dir` by default; every `genplane apiserver` flag is accepted) and,
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

#![warn(missing_docs)]

use anyhow::Context as _;
use clap::{ArgMatches, CommandFactory, Parser};
use genplane_component_base::component::{self, Environment};
use genplane_component_base::config::{CommonOptions, ConfigFlags, Invalid};
use genplane_component_base::featuregate::{FeatureGateSettings, Version};
use genplane_component_base::notify::Notifier;
use genplane_component_base::process::Process;
use genplane_component_base::shutdown::run_role;
use genplane_controller::roles::controller_manager::{self, ControllerManagerOptions};
use genplane_controller::roles::feature_controller::{self, FeatureControllerOptions};
use genplane_controlplane::server::{Backend, Options};

#[derive(Parser)]
#[command(
    name = "all-in-one",
    about = "Run the API server and the controllers in one process on embedded storage"
)]
struct Cli {
    #[command(flatten)]
    config: ConfigFlags,
    #[command(flatten)]
    options: Options,
    /// The controllers to run, as `genplane controller-manager --controllers` reads them: `*`
    /// for every controller on by default, `foo` to enable controller foo, `-foo` to disable it
    #[arg(long, value_delimiter = ',', default_value = "*")]
    controllers: Vec<String>,
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

/// The command line of `genplane all-in-one`: the API server's, plus `--controllers`.
pub fn command() -> clap::Command {
    Cli::command()
}

/// Runs `genplane all-in-one` until SIGTERM or SIGINT.
pub fn run(matches: &ArgMatches, process: &Process) -> anyhow::Result<()> {
    let controllers: Vec<String> = matches
        .get_many::<String>("controllers")
        .map(|values| values.cloned().collect())
        .unwrap_or_else(|| vec!["*".to_owned()]);
    // An unknown controller is a configuration error before anything starts.
    controller_manager::check_controllers(&controllers)?;
    let Some(config) =
        genplane_controlplane::server::configure(matches, process, &mut std::io::stdout())?
    else {
        return Ok(());
    };
    component::install_logging(&config.common);
    let environment = Environment::of(process);
    let common = config.options.common.clone();
    // Shared storage, possibly shared with other all-in-one processes: elect a leader.
    let leader_elect = config.backend == Backend::Etcd;
    run_role(
        Some(genplane_controlplane::server::THREAD_STACK_BYTES),
        |shutdown| async move {
            let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
            let apiserver = async {
                config
                    .complete()
                    .await?
                    .run(
                        "all-in-one",
                        &process.build,
                        shutdown.clone(),
                        Some(ready_tx),
                    )
                    .await?;
                anyhow::Ok(())
            };
            // The service manager (a unit of Type=notify) hears of the process as one: ready once
            // the API server takes requests; the controllers inside do not speak to it.
            let notifier = Notifier::of(process);
            notifier.watch(&shutdown);
            let controller_manager = async {
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
                    .context("configuring the feature-controller")?;
                let stop = shutdown.clone();
                tokio::spawn(async move {
                    if let Err(error) =
                        feature_controller::serve(feature_controller, stop, &Notifier::default())
                            .await
                    {
                        tracing::error!("the feature-controller stopped: {error:#}");
                    }
                });
                let options = ControllerManagerOptions {
                    kubeconfig: Some(ready.data_dir.join("controller-manager.kubeconfig")),
                    controllers,
                    leader_elect,
                    secure_port: 0,
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
                    .context("configuring the controller-manager")?;
                // The API server serves on when the Lease is lost: the controllers stop and
                // campaign again.
                if let Some(election) = &mut config.leader_election {
                    election.campaign_again = true;
                }
                tracing::info!(
                    server = ready.server_url,
                    leader_elect,
                    "starting the controller-manager"
                );
                // The service manager heard of the process from the API server's side.
                controller_manager::serve(config, &Notifier::default(), shutdown.clone())
                    .await
                    .context("the controllers stopped, and the API server with them")
            };
            // The controller-manager triggers `shutdown` when it stops (lost leadership included),
            // so the API server drains before the process exits with the controllers' error.
            tokio::pin!(apiserver, controller_manager);
            tokio::select! {
                // Failed: stop the controllers at once. Stopped on shutdown: so do they.
                result = &mut apiserver => match result {
                    Ok(()) => controller_manager.await,
                    Err(error) => Err(error),
                },
                result = &mut controller_manager => {
                    let served = apiserver.await;
                    result.and(served)
                }
            }
        },
    )
}
