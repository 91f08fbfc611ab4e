//! The controller-manager assembled: what `genplane controller-manager` runs and all-in-one
//! runs beside its API server.
//!
//! [`ControllerManagerOptions`] (flags, file, `GENPLANE_*`) → [`ControllerManagerConfig`]
//! (validated) → [`serve`]: a client from `--kubeconfig` (or the pod's service account) → the
//! ops endpoints (`/healthz`, `/livez`, `/readyz` with the `leaderElection` check, `/metrics`)
//! over HTTPS with a self-signed certificate → leader election on the
//! `kube-system/genplane-controller-manager` Lease → the controllers of `--controllers`, sharing
//! one watch per resource; the gated ones start, drain and stop as their feature gates and the
//! Features' states change ([`crate::descriptors`]). Central features take the cluster's value from
//! their Feature objects, not `--feature-gates`.
//!
//! A leader that cannot renew its Lease within the renew deadline stops every controller and
//! [`serve`] fails (the process exits 1, as upstream's controller-manager does), before another
//! instance can take over; with `campaign_again` (all-in-one) it stands again instead. On
//! shutdown the controllers stop and the Lease is released, so that another instance takes over
//! at once.

pub mod options;

use std::path::PathBuf;
use std::time::Duration;

use genplane_component_base::featuregate::{Feature, FeatureGate};
use genplane_component_base::health::{Health, Kind};
use genplane_component_base::http::OpsHandler;
use genplane_component_base::metrics;
use genplane_component_base::notify::Notifier;
use genplane_component_base::shutdown::Shutdown;
use genplane_featurecontroller::follow::States;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use crate::descriptors::{CONTROLLERS, ControllerContext, GateState, GateStates, run_controllers};
use crate::leaderelection::{LeaderElectionConfig, LeaderElector};

pub use options::{
    ControllerManagerConfig, ControllerManagerOptions, LeaderElection, check_controllers,
    feature_registry,
};

/// Why the controller-manager stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No client of the API server could be made from the kubeconfig.
    #[error(transparent)]
    Connect(#[from] crate::client::Error),
    /// `--root-ca-file` could not be read.
    #[error("error parsing root-ca-file at {}", path.display())]
    RootCa {
        /// The file.
        path: PathBuf,
        /// Why it could not be read.
        #[source]
        source: std::io::Error,
    },
    /// The ops endpoints could not be served.
    #[error("serving the ops endpoints")]
    Ops(#[source] genplane_component_base::http::Error),
    /// Leader election failed (its configuration, or the Lease lost).
    #[error(transparent)]
    LeaderElection(#[from] crate::leaderelection::Error),
    /// A controller failed.
    #[error(transparent)]
    Controllers(#[from] crate::descriptors::Error),
}

/// `genplane controller-manager` as a [`Role`](genplane_component_base::component::Role):
/// [`ControllerManagerOptions`] validated with the feature uses named `controller-manager` and
/// the instance `HOSTNAME`, then [`serve`].
#[derive(Debug)]
pub struct ControllerManagerRole;

impl ControllerManagerRole {
    /// Runs `genplane controller-manager` with the arguments in `matches` until SIGTERM or SIGINT:
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

impl genplane_component_base::component::Role for ControllerManagerRole {
    type Options = ControllerManagerOptions;
    type Config = ControllerManagerConfig;
    type Error = Error;

    fn validate(
        options: &ControllerManagerOptions,
        environment: &genplane_component_base::component::Environment,
        invalid: &mut genplane_component_base::config::Invalid,
    ) -> Option<ControllerManagerConfig> {
        options.validate(
            environment.identity("controller-manager"),
            environment.rust_log.as_deref(),
            environment.in_cluster,
            invalid,
        )
    }

    fn common(config: &ControllerManagerConfig) -> &genplane_component_base::config::CommonConfig {
        &config.common
    }

    async fn serve(
        config: ControllerManagerConfig,
        context: genplane_component_base::component::Context<'_>,
    ) -> Result<(), Error> {
        serve(config, &context.notifier, context.shutdown).await
    }
}

/// The service manager's status line of a candidate for the Lease, and of the leader.
const STANDING: &str = "running: standing for the lease";
const LEADING: &str = "running: leading, the controllers running";

/// How long the gated controllers wait, at start, for the Features' states; then they follow
/// this role's own gates until the Features can be read.
const GATES_PATIENCE: Duration = Duration::from_secs(30);

/// Runs the controller-manager with `config` until `shutdown` is triggered (then `Ok`), a
/// controller fails, or leadership is lost (both errors). It installs no signal handler or
/// subscriber, so it can run next to other roles in one process. It tells `notifier` (the
/// service manager, when the role is a unit of `Type=notify`) once it is connected and its ops
/// endpoints serve; its readiness then follows leader election.
///
/// A caller that runs it next to the API server (all-in-one) validates
/// [`ControllerManagerOptions`] itself, with `kubeconfig` set to the API server's
/// `controller-manager.kubeconfig` (which must exist when `serve` starts: the API server writes
/// it once its port is bound), and runs `serve` on the same runtime; until the API server
/// answers, leader election and the watches retry.
pub async fn serve(
    config: ControllerManagerConfig,
    notifier: &Notifier,
    shutdown: Shutdown,
) -> Result<(), Error> {
    let (client, kubeconfig_ca) =
        crate::client::connect(config.options.kubeconfig.as_deref()).await?;
    let root_ca = match &config.options.root_ca_file {
        Some(path) => std::fs::read_to_string(path).map_err(|source| Error::RootCa {
            path: path.clone(),
            source,
        })?,
        None => kubeconfig_ca.unwrap_or_default(),
    };
    if root_ca.is_empty() {
        tracing::warn!("no root CA: kube-root-ca.crt will hold an empty ca.crt");
    }
    // The client flow: report the feature uses, and follow the Feature objects (the dynamic
    // features' values, the cluster's value of central features, every state for the gated
    // controllers), each in a task of its own.
    let mut follower = genplane_featurecontroller::Follower::new(
        config.common.feature_gate.clone(),
        "kube-system",
    )
    .adopting_central();
    let states = follower.states();
    let following = shutdown.clone();
    tokio::spawn(follower.run(client.clone(), async move { following.triggered().await }));
    let (gates, gate_states) = tokio::sync::watch::channel(None);
    let following = shutdown.clone();
    tokio::spawn(follow_gates(
        config.common.feature_gate.clone(),
        states,
        gates,
        async move { following.triggered().await },
    ));
    let reporter = genplane_featurecontroller::Reporter::new(
        config.common.feature_gate.clone(),
        "kube-system",
        config.common.feature_use_report_period,
    );
    let stop = shutdown.clone();
    let reporting = client.clone();
    tokio::spawn(async move {
        reporter
            .run(reporting, async move { stop.triggered().await })
            .await;
    });
    let identity = format!(
        "{}_{}",
        genplane_component_base::process::hostname(),
        uuid::Uuid::new_v4()
    );
    let elector = match &config.leader_election {
        Some(election) => Some(LeaderElector::new(
            client.clone(),
            LeaderElectionConfig {
                namespace: election.namespace.clone(),
                name: election.name.clone(),
                identity: identity.clone(),
                lease_duration: election.lease_duration,
                renew_deadline: election.renew_deadline,
                retry_period: election.retry_period,
            },
        )?),
        None => None,
    };

    let registry = metrics::Registry::new();
    config.common.feature_gate.register_metrics(&registry);
    let mut health = Health::new(&shutdown);
    if let (Some(elector), Some(election)) = (&elector, &config.leader_election) {
        let check = elector.health();
        health.add("leaderElection", Kind::Readiness, move || {
            let result = check.check();
            async move { result }
        });
        // Upstream's gauge: 1 while this instance leads, 0 otherwise.
        let gauge = Family::<Vec<(String, String)>, Gauge>::default();
        registry.register(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease",
            gauge.clone(),
        );
        let labels = vec![("name".to_owned(), election.name.clone())];
        let check = elector.health();
        let stop = shutdown.clone();
        tokio::spawn(async move {
            loop {
                gauge
                    .get_or_create(&labels)
                    .set(i64::from(check.is_leader()));
                tokio::select! {
                    () = stop.triggered() => return,
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        });
    }
    let ops = crate::roles::Ops::start(
        config.bind_address,
        config.options.secure_port,
        OpsHandler::new(health, registry),
        &shutdown,
    )
    .await
    .map_err(Error::Ops)?;

    notifier.ready(if config.leader_election.is_some() {
        STANDING
    } else {
        "running the controllers"
    });
    // The shared watches start when the controllers first run: after the Lease is taken (each
    // time it is, for a candidate that campaigns again).
    let context = || {
        let mut context = ControllerContext::new(
            client.clone(),
            root_ca.clone(),
            config.resource_quota_sync_period,
        );
        context.network_claim_release_grace = config.network_claim_release_grace;
        // The well-known claim of --cluster-cidr is kept only while the feature is on (a
        // draining registry controller runs without it).
        context.cluster_cidr = config.cluster_cidr.clone();
        context.csr_signing = config.csr_signing.clone();
        // Dynamic: the follower may change it while the controllers run; each sync asks.
        let gate = config.common.feature_gate.clone();
        context.pods_first = std::sync::Arc::new(move || {
            gate.enabled(genplane_features::controllers::ORDERED_NAMESPACE_DELETION)
        });
        context
    };
    let stop = shutdown.clone();
    let result = match (&elector, &config.leader_election) {
        (Some(elector), Some(election)) => loop {
            tracing::info!(%identity, "starting leader election");
            let controllers = run_controllers(
                &config.controllers,
                CONTROLLERS,
                context(),
                gate_states.clone(),
                std::future::pending(),
            );
            // Run only while leading: the status line says so from the moment it leads.
            let work = async {
                notifier.status(LEADING);
                controllers.await
            };
            match elector.run(work, stop.triggered()).await {
                Ok(Some(outcome)) => break outcome.map_err(Error::from),
                Ok(None) => break Ok(()),
                Err(error @ crate::leaderelection::Error::LeadershipLost { .. })
                    if election.campaign_again =>
                {
                    // The controllers stopped before anyone else may take over; the process
                    // (an API server) serves on, and this candidate stands again.
                    tracing::warn!(
                        "{error}: the controllers stopped; campaigning again for the lease"
                    );
                    notifier.status(STANDING);
                }
                Err(error) => break Err(error.into()),
            }
        },
        _ => run_controllers(
            &config.controllers,
            CONTROLLERS,
            context(),
            gate_states,
            stop.triggered(),
        )
        .await
        .map_err(Error::from),
    };
    shutdown.trigger();
    ops.finish().await;
    match &result {
        Ok(()) => tracing::info!("stopped"),
        Err(error) => tracing::error!(%error, "the controller-manager stopped"),
    }
    result
}

/// Keeps `gates` on the state of every feature gate a controller of the table needs: this
/// role's value (which the follower sets for central and dynamic features; checking it records
/// the use the reporter reports) and whether the cluster may still hold the feature's objects
/// (the Feature's state, from `states`). Waits up to [`GATES_PATIENCE`] for the first list of
/// Features; then decides from the role's gates alone until the Features can be read.
async fn follow_gates(
    gate: FeatureGate,
    mut states: tokio::sync::watch::Receiver<States>,
    gates: tokio::sync::watch::Sender<GateStates>,
    stop: impl std::future::Future<Output = ()>,
) {
    let mut names: Vec<&'static str> = CONTROLLERS
        .iter()
        .flat_map(|c| c.required_feature_gates.iter().copied())
        .collect();
    names.sort_unstable();
    names.dedup();
    tokio::pin!(stop);
    tokio::select! {
        () = &mut stop => return,
        listed = tokio::time::timeout(GATES_PATIENCE, states.wait_for(Option::is_some)) => {
            if listed.is_err() {
                tracing::warn!(
                    "cannot read the Features yet: the gated controllers follow this role's \
                     --feature-gates until they can"
                );
            }
        }
    }
    loop {
        let current = states.borrow_and_update().clone().unwrap_or_default();
        let fresh: std::collections::BTreeMap<&'static str, GateState> = names
            .iter()
            .map(|&name| {
                let state = current.get(name).map(String::as_str);
                (name, GateState::of(gate.enabled(Feature::new(name)), state))
            })
            .collect();
        gates.send_if_modified(|now| {
            let changed = now.as_ref() != Some(&fresh);
            *now = Some(fresh);
            changed
        });
        tokio::select! {
            () = &mut stop => return,
            changed = states.changed() => if changed.is_err() {
                return;
            },
        }
    }
}
