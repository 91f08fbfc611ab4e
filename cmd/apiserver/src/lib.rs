//! `genplane apiserver`: the Kubernetes API for the generic resources, over HTTPS.
//!
//! The command line, config file and `GENPLANE_*` variables read into the library's
//! [`Options`], validated into a [`Config`], completed and run by
//! `genplane_controlplane::server`: storage (SQLite by default, or etcd) with a watch cache per
//! resource, system namespaces, HTTPS with authentication and authorization. With no
//! certificates given, a CA, a serving certificate and a client certificate per role are made
//! in the data directory, and `admin.kubeconfig` is written next to them.

#![warn(missing_docs)]

use clap::{ArgMatches, CommandFactory, Parser};
use genplane_component_base::component::{self, Startup};
use genplane_component_base::config::ConfigFlags;
use genplane_component_base::featuregate::UseIdentity;
use genplane_component_base::notify::Notifier;
use genplane_component_base::process::Process;
use genplane_component_base::shutdown::{Shutdown, run_role};
pub use genplane_controlplane::server::options;
pub use genplane_controlplane::server::{Config, Options, Ready};

#[derive(Parser)]
#[command(
    name = "apiserver",
    about = "Serve the Kubernetes API for the generic resources (namespaces, configmaps, secrets, ...)"
)]
struct Cli {
    #[command(flatten)]
    config: ConfigFlags,
    #[command(flatten)]
    options: Options,
}

/// The command line of `genplane apiserver`.
pub fn command() -> clap::Command {
    Cli::command()
}

/// Validates the options of `matches` as `genplane apiserver` does; `None` when the command
/// only printed something (`--print-default-config`, `--config-check`). For a caller that
/// starts the API server itself, such as all-in-one: see [`serve_until_ready`].
pub fn configure(matches: &ArgMatches, process: &Process) -> anyhow::Result<Option<Config>> {
    let instance = process.var("HOSTNAME").unwrap_or("localhost").to_owned();
    let rust_log = process.var("RUST_LOG").map(str::to_owned);
    let startup = component::configure::<Options, _>(
        matches,
        process,
        &mut std::io::stdout(),
        |options, invalid| {
            options.validate(
                UseIdentity::new("apiserver", instance.clone()),
                rust_log.as_deref(),
                invalid,
            )
        },
    )?;
    let Startup::Run(config) = startup else {
        return Ok(None);
    };
    // The binary's one subscriber; a second role in the same process keeps the first.
    let _ = tracing::subscriber::set_global_default(config.common.logging.subscriber());
    for warning in config.common.feature_gate.warnings() {
        tracing::warn!("{warning}");
    }
    Ok(Some(config))
}

/// Runs `genplane apiserver` until SIGTERM or SIGINT.
pub fn run(matches: &ArgMatches, process: &Process) -> anyhow::Result<()> {
    let Some(config) = configure(matches, process)? else {
        return Ok(());
    };
    let stack = Some(genplane_controlplane::server::THREAD_STACK_BYTES);
    run_role(stack, |shutdown| async move {
        // A unit of Type=notify is active once the server takes requests.
        let notifier = Notifier::of(process);
        notifier.watch(&shutdown);
        let (ready, started) = tokio::sync::oneshot::channel::<Ready>();
        tokio::spawn(async move {
            if let Ok(started) = started.await {
                notifier.ready(&format!("serving on {}", started.server_url));
            }
        });
        serve_until_ready("apiserver", config, process, shutdown, Some(ready)).await
    })
}

/// Serves until `shutdown` is triggered.
pub async fn serve(config: Config, process: &Process, shutdown: Shutdown) -> anyhow::Result<()> {
    serve_until_ready("apiserver", config, process, shutdown, None).await
}

/// The well-known claim of the Service IP ranges (`kube-apiserver`).
fn service_claim(
    ranges: Vec<genplane_api::networkregistry::Prefix>,
) -> genplane_networkregistry::WellKnown {
    genplane_networkregistry::WellKnown {
        name: genplane_api::networkregistry::KUBE_APISERVER_CLAIM,
        reference: genplane_api::networkregistry::networkclaim::ResourceReference {
            group: String::new(),
            resource: "services".to_owned(),
        },
        prefixes: ranges,
        flag: "--service-cluster-ip-range",
        component: "kube-apiserver",
    }
}

/// Serves until `shutdown` is triggered, sending [`Ready`] on `ready` once requests are
/// taken and every post-start hook has finished (the kubeconfigs are written by then); `role`
/// names the applet in the banner.
///
/// Besides the library's own post-start hooks, the server has two of `genplane apiserver`'s:
/// `start-feature-reporting` reports its feature uses to the Feature API like every role
/// (`genplane_featurecontroller::Reporter`), as `system:genplane:apiserver` through the
/// `apiserver-loopback.kubeconfig` it wrote, and has its dynamic features follow their Feature
/// objects (`genplane_featurecontroller::Follower`); with the NetworkRegistry feature gate on,
/// `start-network-registry-claim` keeps the well-known NetworkClaim `kube-apiserver` of its
/// `--service-cluster-ip-range`. Each starts its tasks and returns.
pub async fn serve_until_ready(
    role: &str,
    config: Config,
    process: &Process,
    shutdown: Shutdown,
    ready: Option<tokio::sync::oneshot::Sender<Ready>>,
) -> anyhow::Result<()> {
    let gate = config.common.feature_gate.clone();
    let period = config.common.feature_use_report_period;
    let dynamic = config.dynamic_features.clone();
    let service_cluster_ip_range = config.service_cluster_ip_range.clone();
    let mut completed = config.complete().await?;
    let hooks = &mut completed.post_start_hooks;
    let reporting = gate.clone();
    hooks.add("start-feature-reporting", move |context| async move {
        let kubeconfig = context.loopback_kubeconfig();
        let (client, _) = genplane_controller::client::connect(Some(&kubeconfig))
            .await
            .map_err(|e| format!("connecting through {}: {e}", kubeconfig.display()))?;
        // The server's own clients reach it as any client would: say so at once when they
        // cannot (a serving certificate that does not name the address, say).
        if let Err(error) = client.apiserver_version().await {
            tracing::error!(
                %error,
                kubeconfig = %kubeconfig.display(),
                "the API server cannot reach itself through its loopback kubeconfig: feature \
                 reports and well-known claims will fail"
            );
        }
        let follower = genplane_featurecontroller::Follower::new(reporting.clone(), "kube-system");
        let following = context.shutdown.clone();
        tokio::spawn(follower.run(client.clone(), async move { following.triggered().await }));
        let reporter = genplane_featurecontroller::Reporter::new(reporting, "kube-system", period)
            .allowing_dynamic(&dynamic);
        let stop = context.shutdown.clone();
        tokio::spawn(async move {
            reporter
                .run(client, async move { stop.triggered().await })
                .await;
        });
        Ok(())
    })?;
    if gate.enabled(genplane_controlplane::features::NETWORK_REGISTRY) {
        hooks.add("start-network-registry-claim", move |context| async move {
            let kubeconfig = context.loopback_kubeconfig();
            let (client, _) = genplane_controller::client::connect(Some(&kubeconfig))
                .await
                .map_err(|e| format!("connecting through {}: {e}", kubeconfig.display()))?;
            let stop = context.shutdown.clone();
            tokio::spawn(genplane_networkregistry::well_known::keep(
                client,
                service_claim(service_cluster_ip_range),
                async move { stop.triggered().await },
            ));
            Ok(())
        })?;
    }
    completed.run(role, &process.build, shutdown, ready).await?;
    Ok(())
}
