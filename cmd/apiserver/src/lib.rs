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
use genplane_component_base::component;
use genplane_component_base::config::ConfigFlags;
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

/// Validates the options of `matches` as `genplane apiserver` does
/// ([`genplane_controlplane::server::configure`]) and installs the log subscriber; `None` when
/// the command only printed something (`--print-default-config`, `--config-check`).
pub fn configure(matches: &ArgMatches, process: &Process) -> anyhow::Result<Option<Config>> {
    let config =
        genplane_controlplane::server::configure(matches, process, &mut std::io::stdout())?;
    if let Some(config) = &config {
        component::install_logging(&config.common);
    }
    Ok(config)
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

/// Serves until `shutdown` is triggered, sending [`Ready`] on `ready` once requests are
/// taken and every post-start hook has finished (the kubeconfigs are written by then); `role`
/// names the applet in the banner. The hooks are the library's (`genplane_controlplane::server`),
/// feature reporting and the well-known NetworkClaim of `--service-cluster-ip-range` among them.
pub async fn serve_until_ready(
    role: &str,
    config: Config,
    process: &Process,
    shutdown: Shutdown,
    ready: Option<tokio::sync::oneshot::Sender<Ready>>,
) -> anyhow::Result<()> {
    config
        .complete()
        .await?
        .run(role, &process.build, shutdown, ready)
        .await?;
    Ok(())
}
