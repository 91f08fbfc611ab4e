//! A hermetic test cluster built with genplane's library: a control plane that serves, besides
//! genplane's generic kinds, core/v1 nodes, pods, services and endpoints and
//! discovery.k8s.io/v1 endpoint slices, with simulated nodes whose pods answer on their own
//! loopback addresses. Everything listens on 127.0.0.0/8 ([`net`] has the address plan); no
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
//!    k8s-openapi's types, [`api::shape`]), defaults, strategy, validation, field selectors
//!    and table columns, as plain functions. Three library hooks cover what a catalog entry
//!    cannot say: a subresource answered by the program (`pods/binding`,
//!    `Resource::with_answer`), values allocated outside the object (a Service's ClusterIP
//!    and node ports, `Store::with_allocations`), and graceful deletion (a Pod's
//!    `Hooks::grace_period`).
//! 3. **Run.** `CompletedConfig::run` serves until SIGTERM or SIGINT and says when it takes
//!    requests; then the cluster's components start as clients of it, with the admin
//!    kubeconfig: the kubelet simulators ([`kubelet`], one per node), the scheduler
//!    ([`scheduler`]) and the endpoints controller ([`endpoints_controller`]).

pub mod api;
pub mod controlplane;
pub mod deployment_controller;
pub mod endpoints_controller;
pub mod kube_proxy;
pub mod kubelet;
pub mod net;
pub mod replicaset_controller;
pub mod scheduler;
mod watch;

use anyhow::Context as _;
use clap::Parser;
use genplane_component_base::config::Invalid;
use genplane_component_base::featuregate::UseIdentity;
use genplane_component_base::shutdown::{Shutdown, Signals};
use genplane_component_base::version::BuildInfo;
use genplane_controlplane::server::Options;

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
    /// Every option of `genplane apiserver`.
    #[command(flatten)]
    pub options: Options,
}

/// Serves until SIGTERM or SIGINT; `rust_log` is the `RUST_LOG` filter, when set.
pub async fn run(cli: Cli, rust_log: Option<&str>) -> anyhow::Result<()> {
    // 1. Options → Config.
    let mut invalid = Invalid::new();
    let validated = cli.options.validate(
        UseIdentity::new("genplane-testcluster", "localhost"),
        rust_log,
        &mut invalid,
    );
    let config = invalid.finish(validated)?;
    let _ = tracing::subscriber::set_global_default(config.common.logging.subscriber());

    // 2. CompletedConfig, with the cluster's kinds.
    let mut completed = config.complete().await?;
    let plan = net::Plan::new(cli.address_block);
    controlplane::add_cluster_kinds(&mut completed, plan)
        .await
        .context("serving the cluster's kinds")?;

    // 3. Run.
    let shutdown = Shutdown::new();
    tokio::spawn(shutdown.clone().trigger_on(Signals::install()?));
    let build = BuildInfo::new(env!("CARGO_PKG_VERSION"), None);
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let server = completed.run("testcluster", &build, shutdown.clone(), Some(ready_tx));
    let components = async {
        let Ok(ready) = ready_rx.await else {
            return Ok(()); // the server stopped before it was ready: its error says why
        };
        let client = client(&ready.data_dir.join("admin.kubeconfig")).await?;
        let mut components = tokio::task::JoinSet::new();
        for number in 1..=cli.nodes {
            let kubelet = kubelet::Kubelet::new(client.clone(), plan, number);
            kubelet.register().await.context("registering the nodes")?;
            let scope = kube_proxy::Scope::Node {
                name: kubelet.name.clone(),
                ip: kubelet.ip(),
            };
            components.spawn(kube_proxy::run(client.clone(), scope));
            components.spawn(async move {
                if let Err(error) = kubelet.run().await {
                    tracing::error!(%error, "a kubelet stopped");
                }
            });
        }
        components.spawn(kube_proxy::run(
            client.clone(),
            kube_proxy::Scope::ClusterIps,
        ));
        components.spawn(scheduler::run(client.clone()));
        components.spawn(endpoints_controller::run(client.clone()));
        components.spawn(replicaset_controller::run(client.clone()));
        components.spawn(deployment_controller::run(client.clone()));
        components.spawn(async move {
            let informers = genplane_controller::informers::SharedInformers::new(client.clone());
            if let Err(error) = genplane_controller::garbagecollector::run(client, informers).await
            {
                tracing::error!(%error, "the garbage collector stopped");
            }
        });
        println!("genplane testcluster: {} nodes registered", cli.nodes);
        shutdown.triggered().await;
        components.shutdown().await;
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
