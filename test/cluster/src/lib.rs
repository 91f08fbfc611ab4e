//! A hermetic test cluster built with genplane's library: a control plane that serves, besides
//! genplane's generic kinds, core/v1 nodes, pods, services and endpoints,
//! discovery.k8s.io/v1 endpoint slices and apps/v1 deployments and replica sets, with
//! simulated nodes whose pods answer on their own loopback addresses, Service traffic
//! forwarded by a kube-proxy simulator, and a fake cloud (instances, load balancers) driven by
//! a fake cloud controller manager. Everything listens on 127.0.0.0/8 ([`net`] has the address plan); no
//! container runtime, image or privilege is needed. Run it with
//! `cargo run -p genplane-test-cluster -- --data-dir /tmp/cluster --secure-port 0 --nodes 3`;
//! it prints `export KUBECONFIG=...` once the nodes are Ready.
//!
//! It is also a guide to building a control plane of one's own with genplane (KEP-4080's
//! "customizable in code"). The walk through [`run`]:
//!
//! 1. **Options → Config.** The library's `Options` are `genplane apiserver`'s, every flag
//!    included; [`Cli`] adds the number of nodes. `Options::validate` reports every problem
//!    at once (exit 64).
//! 2. **CompletedConfig, with the program's kinds** ([`controlplane::add_cluster_kinds`]).
//!    Each kind is a catalog entry in [`api`]: its names, its shape (borrowed from
//!    k8s-openapi's types, [`api::shape`]), its protobuf message (upstream's field numbers,
//!    [`api::proto`], so that kubectl's protobuf requests work), defaults, strategy,
//!    validation, field selectors and table columns, as plain functions. Three library hooks cover what a catalog entry
//!    cannot say: a subresource answered by the program (`pods/binding`,
//!    `Resource::with_answer`), values allocated outside the object (a Service's ClusterIP
//!    and node ports, `Store::with_allocations`), and graceful deletion (a Pod's
//!    `Hooks::grace_period`).
//! 3. **Run.** `CompletedConfig::run` serves until SIGTERM or SIGINT and says when it takes
//!    requests; then the cluster's components start as clients of it, with the admin
//!    kubeconfig:
//!    - the fake [`cloud`] with one instance per node; an instance's machine is the node's
//!      kubelet simulator ([`kubelet`]) and its kube-proxy ([`kube_proxy`]), so deleting,
//!      stopping, rebooting or upgrading an instance does that to the node; the cloud
//!      manages the control plane too: upgrading it to `v1.33.0+genplane.X` restarts the API
//!      server (same storage, certificates and port) as genplane version `X`, which its
//!      `/version` then reports; the cloud's HTTP API
//!      ([`cloud::api`]) is printed as `genplane testcluster cloud: http://...`;
//!    - the fake cloud's `--cloud-fault` switches ([`cloud::Fault`]);
//!    - the fake cloud controller manager ([`ccm`], with `--ccm-fault` switches) and the node
//!      lifecycle marker it relies on ([`node_lifecycle`]);
//!    - (outside the process) the fake cloud as a `genplane ccm-e2e` provider, in-process or
//!      as the exec plugin `genplane-testcluster-provider` ([`provider`]);
//!    - the controllers: [`scheduler`], [`endpoints_controller`], [`replicaset_controller`],
//!      [`deployment_controller`], genplane's own garbage collector and namespace controller
//!      (`genplane-controller`, as in `genplane controller-manager`; with
//!      `--external-controller-manager` they are left to a `genplane controller-manager`
//!      run against the cluster), and the ClusterIP proxy.
//!
//!    Every component is a level-triggered loop over kube-runtime reflectors ([`watch`]).
//!
//! Clusters started at once on one machine take different `--address-block`s ([`net`]).

pub mod api;
pub mod ccm;
pub mod cloud;
pub mod controlplane;
pub mod deployment_controller;
pub mod endpoints_controller;
pub mod kube_proxy;
pub mod kubelet;
pub mod net;
pub mod node_lifecycle;
pub mod provider;
pub mod replicaset_controller;
pub mod scheduler;
pub mod watch;

use anyhow::Context as _;
use clap::Parser;
use genplane_component_base::config::Invalid;
use genplane_component_base::featuregate::UseIdentity;
use genplane_component_base::shutdown::{Shutdown, Signals};
use genplane_component_base::version::{BuildInfo, KUBERNETES_VERSION};
use genplane_controlplane::server::{CompletedConfig, Config, Options, Ready};

/// The command line: the library's options and the cluster's size.
#[derive(Parser, Debug)]
#[command(
    name = "genplane-testcluster",
    about = "A hermetic Kubernetes-like test cluster on loopback addresses, built with genplane's library"
)]
pub struct Cli {
    /// How many nodes to simulate (1 to 200).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u8).range(1..=200))]
    pub nodes: u8,
    /// Which block of loopback addresses the cluster uses (0 to 15; see `net`): clusters
    /// running at once need different blocks.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..16))]
    pub address_block: u8,
    /// How often kubelets renew their Lease and Ready condition (a Go duration).
    #[arg(long, default_value = "10s", value_parser = go_duration)]
    pub node_status_update_frequency: std::time::Duration,
    /// How long a node may stay silent before it is marked not Ready (a Go duration).
    #[arg(long, default_value = "40s", value_parser = go_duration)]
    pub node_monitor_grace_period: std::time::Duration,
    /// How often the cloud controller manager looks at nodes' instances (a Go duration).
    #[arg(long, default_value = "5s", value_parser = go_duration)]
    pub node_monitor_period: std::time::Duration,
    /// Faults to give the fake cloud controller manager (repeatable or comma-separated).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub ccm_fault: Vec<ccm::Fault>,
    /// Leave the generic controllers (garbage collector, namespace deletion) to a
    /// `genplane controller-manager` run against the cluster (with the admin kubeconfig)
    /// instead of running them in the cluster's process.
    #[arg(long)]
    pub external_controller_manager: bool,
    /// Faults to give the fake cloud (repeatable or comma-separated).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub cloud_fault: Vec<cloud::Fault>,
    /// Every option of `genplane apiserver`.
    #[command(flatten)]
    pub options: Options,
}

/// The node timings under which the suite's waits, scaled down to what a hermetic cluster
/// needs ([`FAST_TIMEOUT_SCALE`]), are long enough: the node tests wait for a node to be marked
/// not Ready and its instance's loss to be noticed.
pub const FAST_NODE_FLAGS: [&str; 3] = [
    "--node-status-update-frequency=500ms",
    "--node-monitor-grace-period=2s",
    "--node-monitor-period=500ms",
];

/// The `--timeout-scale` of `genplane ccm-e2e` against a cluster with [`FAST_NODE_FLAGS`]:
/// upstream's timeouts are minutes, the cluster reacts in seconds.
pub const FAST_TIMEOUT_SCALE: &str = "0.05";

/// The `genplane ccm-e2e` command line that runs the suite against this cluster: its fake
/// cloud as the provider (the exec plugin `genplane-testcluster-provider`, built beside this
/// program, with the cloud's address in `provider_config`), an external IP of the cluster's
/// block, and timeouts scaled down when the cluster's node timings allow it (upstream's
/// otherwise, so that the node tests pass either way).
pub fn ccm_e2e_command(
    cli: &Cli,
    plan: net::Plan,
    data_dir: &std::path::Path,
    provider_config: &std::path::Path,
) -> String {
    let fast = cli.node_status_update_frequency <= std::time::Duration::from_millis(500)
        && cli.node_monitor_grace_period <= std::time::Duration::from_secs(2)
        && cli.node_monitor_period <= std::time::Duration::from_millis(500);
    let external = plan.external_ip_cidr().0.octets();
    let mut command = format!(
        "genplane ccm-e2e --kubeconfig {} --provider=exec:genplane-testcluster-provider --provider-config={} --external-ip=127.{}.0.1",
        data_dir.join("admin.kubeconfig").display(),
        provider_config.display(),
        external[1]
    );
    if fast {
        command.push_str(&format!(" --timeout-scale={FAST_TIMEOUT_SCALE}"));
    } else {
        command.push_str(&format!(
            "\n  (upstream's timeouts; a cluster started with {} runs it in seconds with --timeout-scale={FAST_TIMEOUT_SCALE})",
            FAST_NODE_FLAGS.join(" ")
        ));
    }
    command
}

fn go_duration(text: &str) -> Result<std::time::Duration, String> {
    genplane_apimachinery::duration::parse(text).map_err(|e| e.to_string())
}

/// How long a machine's init waits before restarting a kubelet that stopped (systemd's
/// default `RestartSec`).
const KUBELET_RESTART_DELAY: std::time::Duration = std::time::Duration::from_millis(100);

/// How long a machine shutting down gives its kubelet to report the node not Ready.
const SHUTDOWN_REPORT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The machines behind the cloud's instances: node N's kubelet and kube-proxy, run while
/// its instance runs.
struct NodeMachines {
    client: kube::Client,
    plan: net::Plan,
    heartbeat: std::time::Duration,
    running: std::sync::Mutex<std::collections::BTreeMap<String, tokio::task::JoinSet<()>>>,
}

impl cloud::Machines for NodeMachines {
    fn power_on(&self, instance: &str, kubelet_version: &str) {
        let Some(number) = instance.strip_prefix("node-").and_then(|n| n.parse().ok()) else {
            return;
        };
        let kubelet = kubelet::Kubelet::new(self.client.clone(), self.plan, number)
            .with_heartbeat(self.heartbeat)
            .with_external_cloud()
            .with_version(kubelet_version);
        let mut machine = tokio::task::JoinSet::new();
        let scope = kube_proxy::Scope::Node {
            name: kubelet.name.clone(),
            ip: kubelet.ip(),
        };
        machine.spawn(kube_proxy::run(self.client.clone(), scope));
        machine.spawn(async move {
            // The machine's init restarts the kubelet when it stops, as systemd does: a
            // kubelet that cannot reach the API server (being restarted) tries again.
            loop {
                if let Err(error) = kubelet.clone().run().await {
                    tracing::warn!(%error, "a kubelet stopped; restarting it");
                }
                tokio::time::sleep(KUBELET_RESTART_DELAY).await;
            }
        });
        let mut running = self
            .running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        running.insert(instance.to_owned(), machine);
    }

    fn shut_down(&self, instance: &str) -> futures::future::BoxFuture<'static, ()> {
        // The machine's tasks stop first, so that no heartbeat of its kubelet follows the
        // shutdown report.
        let stopped = self
            .running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(instance);
        let kubelet = instance
            .strip_prefix("node-")
            .and_then(|n| n.parse().ok())
            .map(|number| kubelet::Kubelet::new(self.client.clone(), self.plan, number));
        Box::pin(async move {
            drop(stopped);
            let Some(kubelet) = kubelet else { return };
            match tokio::time::timeout(SHUTDOWN_REPORT_TIMEOUT, kubelet.report_shutdown()).await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    tracing::warn!(%error, "a shutting-down kubelet could not say so")
                }
                Err(_) => tracing::warn!("a shutting-down kubelet could not say so in time"),
            }
        })
    }

    fn power_off(&self, instance: &str) {
        // Dropping the tasks stops the kubelet, its pods' servers and the node's proxy.
        let mut running = self
            .running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        running.remove(instance);
    }
}

/// Waits until `count` nodes are registered and initialized by the cloud controller manager.
async fn nodes_initialized(client: &kube::Client, count: usize) -> anyhow::Result<()> {
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client.clone());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let list = nodes.list(&Default::default()).await?;
        let initialized = list
            .items
            .iter()
            .filter(|n| {
                n.spec
                    .as_ref()
                    .and_then(|s| s.provider_id.as_ref())
                    .is_some()
                    && !n
                        .spec
                        .as_ref()
                        .and_then(|s| s.taints.as_ref())
                        .is_some_and(|t| t.iter().any(|t| t.key == kubelet::UNINITIALIZED_TAINT))
            })
            .count();
        if initialized >= count {
            return Ok(());
        }
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "the nodes did not come up within a minute"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// The genplane version a control-plane `version` names: the test cluster's API server is
/// genplane serving Kubernetes 1.33, which reports `v1.33.0+genplane.<genplane version>`, so
/// those are the versions it can be upgraded (or downgraded) to.
pub fn genplane_version(version: &str) -> Result<String, String> {
    let prefix = format!("v{KUBERNETES_VERSION}.0+genplane.");
    version
        .strip_prefix(&prefix)
        .filter(|v| {
            !v.is_empty()
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
        })
        .map(str::to_owned)
        .ok_or_else(|| {
            format!(
                "the test cluster's control plane is genplane serving Kubernetes {KUBERNETES_VERSION}: it can run {prefix}<genplane version> only, not {version:?}"
            )
        })
}

/// A request to run the control plane as another genplane version.
struct Upgrade {
    /// The genplane version.
    genplane_version: String,
    /// Told once the new control plane serves, or why it does not.
    done: tokio::sync::oneshot::Sender<Result<(), String>>,
}

/// The control plane as the fake cloud manages it: upgrades go to [`serve`].
struct ServedControlPlane {
    upgrades: tokio::sync::mpsc::Sender<Upgrade>,
}

impl cloud::ControlPlane for ServedControlPlane {
    fn upgrade(&self, version: &str) -> futures::future::BoxFuture<'static, Result<(), String>> {
        let upgrades = self.upgrades.clone();
        let version = version.to_owned();
        Box::pin(async move {
            let (done, answer) = tokio::sync::oneshot::channel();
            let upgrade = Upgrade {
                genplane_version: genplane_version(&version)?,
                done,
            };
            upgrades
                .send(upgrade)
                .await
                .map_err(|_| "the control plane is shutting down".to_owned())?;
            answer
                .await
                .map_err(|_| "the control plane stopped during the upgrade".to_owned())?
        })
    }
}

/// Validates `options` (exit 64 on errors).
fn config(options: &Options, rust_log: Option<&str>) -> anyhow::Result<Config> {
    let mut invalid = Invalid::new();
    let validated = options.validate(
        // Its API server is the cluster's: it reports its feature uses as one.
        UseIdentity::new(genplane_api::featuregates::API_SERVER, "localhost"),
        rust_log,
        &mut invalid,
    );
    Ok(invalid.finish(validated)?)
}

/// Completes `config` with the cluster's kinds.
async fn complete(config: Config, plan: net::Plan) -> anyhow::Result<CompletedConfig> {
    let mut completed = config.complete().await?;
    controlplane::add_cluster_kinds(&mut completed, plan)
        .await
        .context("serving the cluster's kinds")?;
    Ok(completed)
}

/// How long a restarted control plane waits for the stopped one to let go of its storage.
const STORAGE_RELEASE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Completes `options` again for a restart: the stopped server's last tasks may still hold
/// the SQLite database for a moment, so a locked database is tried again until it is free
/// (or [`STORAGE_RELEASE_TIMEOUT`]).
async fn restart(
    options: &Options,
    rust_log: Option<&str>,
    plan: net::Plan,
) -> anyhow::Result<CompletedConfig> {
    let deadline = tokio::time::Instant::now() + STORAGE_RELEASE_TIMEOUT;
    loop {
        match complete(config(options, rust_log)?, plan).await {
            Err(error) if storage_locked(&error) && tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            done => return done,
        }
    }
}

/// Whether `error` is that the SQLite database is held by another store.
fn storage_locked(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<genplane_storage_sqlite::OpenError>(),
            Some(genplane_storage_sqlite::OpenError::Locked { .. })
        )
    })
}

/// Whom to tell that the control plane serves: the cluster's components (first start) or
/// the upgrade that restarted it.
enum Announce {
    Started(tokio::sync::oneshot::Sender<Ready>),
    Upgraded(tokio::sync::oneshot::Sender<Result<(), String>>),
}

/// Serves `completed` until `shutdown`; on each upgrade, stops the API server and serves the
/// same options (storage, certificates, and the port it took) as the genplane version asked.
async fn serve(
    mut completed: CompletedConfig,
    options: &Options,
    rust_log: Option<&str>,
    plan: net::Plan,
    shutdown: &Shutdown,
    ready: tokio::sync::oneshot::Sender<Ready>,
    mut upgrades: tokio::sync::mpsc::Receiver<Upgrade>,
) -> anyhow::Result<()> {
    let mut build = BuildInfo::new(env!("CARGO_PKG_VERSION"), None);
    let mut announce = Announce::Started(ready);
    loop {
        let stop = Shutdown::new();
        let (up, serving) = tokio::sync::oneshot::channel();
        let (upgrade, port) = {
            let run = completed.run("testcluster", &build, stop.clone(), Some(up));
            tokio::pin!(run);
            let serving = tokio::select! {
                result = &mut run => {
                    if let Announce::Upgraded(done) = announce {
                        let _ = done.send(Err("the upgraded control plane did not start".into()));
                    }
                    return Ok(result?);
                }
                serving = serving => serving,
            };
            let Ok(serving) = serving else {
                return Ok((&mut run).await?);
            };
            let port = serving
                .server_url
                .rsplit(':')
                .next()
                .and_then(|p| p.parse::<u16>().ok())
                .with_context(|| format!("the server's URL {}", serving.server_url))?;
            match announce {
                Announce::Started(ready) => {
                    let _ = ready.send(serving);
                }
                Announce::Upgraded(done) => {
                    let _ = done.send(Ok(()));
                }
            }
            tokio::select! {
                result = &mut run => return Ok(result?),
                () = shutdown.triggered() => {
                    stop.trigger();
                    return Ok((&mut run).await?);
                }
                upgrade = upgrades.recv() => {
                    stop.trigger();
                    (&mut run).await?;
                    match upgrade {
                        Some(upgrade) => (upgrade, port),
                        None => return Ok(()),
                    }
                }
            }
        };
        tracing::info!(version = %upgrade.genplane_version, "restarting the control plane");
        let mut options = options.clone();
        options.serving.secure_port = port;
        let restarted = restart(&options, rust_log, plan).await;
        completed = match restarted {
            Ok(completed) => completed,
            Err(error) => {
                let _ = upgrade.done.send(Err(format!("{error:#}")));
                return Err(error.context("restarting the control plane"));
            }
        };
        build = BuildInfo::new(&upgrade.genplane_version, None);
        announce = Announce::Upgraded(upgrade.done);
    }
}

/// Serves until SIGTERM or SIGINT; `rust_log` is the `RUST_LOG` filter, when set.
pub async fn run(cli: Cli, rust_log: Option<&str>) -> anyhow::Result<()> {
    // 1. Options → Config.
    let config = config(&cli.options, rust_log)?;
    let _ = tracing::subscriber::set_global_default(config.common.logging.subscriber());
    // The namespace controller asks the first server's gate (which that server's follower
    // keeps on the cluster's value of dynamic features) at every sync.
    let gate = config.common.feature_gate.clone();
    let pods_first: genplane_controller::namespace::PodsFirst = std::sync::Arc::new(move || {
        gate.enabled(genplane_features::controllers::ORDERED_NAMESPACE_DELETION)
    });

    // 2. CompletedConfig, with the cluster's kinds.
    let plan = net::Plan::new(cli.address_block);
    let completed = complete(config, plan).await?;

    // 3. Run (and run again at another version when the cloud upgrades the control plane).
    let shutdown = Shutdown::new();
    tokio::spawn(shutdown.clone().trigger_on(Signals::install()?));
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let (upgrades_tx, upgrades) = tokio::sync::mpsc::channel(1);
    let server = serve(
        completed,
        &cli.options,
        rust_log,
        plan,
        &shutdown,
        ready_tx,
        upgrades,
    );
    let components = async {
        let Ok(ready) = ready_rx.await else {
            return Ok(()); // the server stopped before it was ready: its error says why
        };
        let client = client(&ready.data_dir.join("admin.kubeconfig")).await?;
        let mut components = tokio::task::JoinSet::new();
        let machines = std::sync::Arc::new(NodeMachines {
            client: client.clone(),
            plan,
            heartbeat: cli.node_status_update_frequency,
            running: Default::default(),
        });
        let cloud = cloud::Cloud::new(plan, machines.clone())
            .with_control_plane(std::sync::Arc::new(ServedControlPlane {
                upgrades: upgrades_tx,
            }))
            .with_faults(&cli.cloud_fault);
        let (listener, cloud_address) =
            cloud::api::listen(std::net::SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        components.spawn(cloud::api::serve(cloud.clone(), listener));
        components.spawn(ccm::run(
            client.clone(),
            cloud.clone(),
            ccm::Faults::of(&cli.ccm_fault),
            cli.node_monitor_period,
        ));
        components.spawn(node_lifecycle::run(
            client.clone(),
            cli.node_monitor_grace_period,
        ));
        for number in 1..=cli.nodes {
            cloud.create_instance(number);
        }
        components.spawn(kube_proxy::run(
            client.clone(),
            kube_proxy::Scope::ClusterIps { plan },
        ));
        components.spawn(scheduler::run(client.clone()));
        components.spawn(endpoints_controller::run(client.clone()));
        components.spawn(replicaset_controller::run(client.clone()));
        components.spawn(deployment_controller::run(client.clone()));
        if !cli.external_controller_manager {
            let collector = client.clone();
            components.spawn(async move {
                let client = collector;
                let informers =
                    genplane_controller::informers::SharedInformers::new(client.clone());
                if let Err(error) =
                    genplane_controller::garbagecollector::run(client, informers).await
                {
                    tracing::error!(%error, "the garbage collector stopped");
                }
            });
            let namespaces = client.clone();
            components.spawn(async move {
                let client = namespaces;
                let informers =
                    genplane_controller::informers::SharedInformers::new(client.clone());
                if let Err(error) =
                    genplane_controller::namespace::run(client, informers, pods_first).await
                {
                    tracing::error!(%error, "the namespace controller stopped");
                }
            });
        }
        nodes_initialized(&client, usize::from(cli.nodes)).await?;
        println!("genplane testcluster cloud: http://{cloud_address}");
        println!("genplane testcluster: {} nodes registered", cli.nodes);
        let provider_config = ready.data_dir.join("ccm-e2e-provider.json");
        std::fs::write(
            &provider_config,
            format!("{{\"cloud\": \"http://{cloud_address}\"}}\n"),
        )
        .with_context(|| format!("writing {}", provider_config.display()))?;
        println!(
            "genplane testcluster: test its cloud controller manager with\n  {}",
            ccm_e2e_command(&cli, plan, &ready.data_dir, &provider_config)
        );
        shutdown.triggered().await;
        components.shutdown().await;
        machines
            .running
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
        anyhow::Ok(())
    };
    let cluster = async {
        let started = components.await;
        if started.is_err() {
            shutdown.trigger();
        }
        started
    };
    let (served, cluster) = tokio::join!(server, cluster);
    cluster?;
    served?;
    Ok(())
}

/// A client with the identity and server of `kubeconfig`.
async fn client(kubeconfig: &std::path::Path) -> anyhow::Result<kube::Client> {
    let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig)?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    Ok(kube::Client::try_from(config)?)
}
