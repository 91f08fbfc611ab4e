//! A small control plane assembled with genplane's library (KEP-4080's sample): it serves
//! namespaces, configmaps and `widgets.sample.genplane.io`, a kind of its own defined in Rust
//! ([`widget`]), on embedded SQLite, over HTTPS with client-certificate authentication. Run it
//! with `cargo run -p genplane-example-sample-controlplane -- --data-dir /tmp/sample
//! --secure-port 7443` and use the kubeconfig it prints, with kubectl or any client.
//!
//! The walk through [`run`]:
//!
//! 1. **Options.** The library's [`Options`] are the same `genplane apiserver` reads from its
//!    command line, by concern (serving, storage, authentication, authorization, audit,
//!    admission, API enablement); every one of its flags works here too. The program sets two
//!    before it reads the command line's: which built-in APIs it serves (`--runtime-config`:
//!    nothing but namespaces and configmaps), and who may do what (nobody but the
//!    `system:masters` group of the admin kubeconfig: no RBAC kinds are served).
//! 2. **Config.** [`Options::validate`] checks everything at once and reports every problem
//!    (exit 64 on a bad flag).
//! 3. **CompletedConfig.** `complete` makes the certificates (a CA, a serving certificate and a
//!    client certificate per identity in the data directory), opens the storage and sets up a
//!    watch cache per served resource. The program adds its own kind there:
//!    `add_resource(&widget::INFO)`. From then on widgets are served like the built-in kinds:
//!    discovery, OpenAPI (`kubectl explain widgets.spec`), every verb, watches, tables
//!    (`kubectl get widgets`), field selectors, server-side apply, the `status` subresource.
//! 4. **Run.** `run` writes the system namespaces, assembles authentication, authorization,
//!    audit and admission, and serves until SIGTERM or SIGINT.

pub mod widget;

use anyhow::Context as _;
use clap::Parser;
use genplane_component_base::config::Invalid;
use genplane_component_base::featuregate::UseIdentity;
use genplane_component_base::shutdown::{Shutdown, Signals};
use genplane_component_base::version::BuildInfo;
use genplane_controlplane::server::Options;

/// The command line: the library's options.
#[derive(Parser, Debug)]
#[command(
    name = "sample-controlplane",
    about = "A control plane of namespaces, configmaps and widgets, built with genplane's library"
)]
pub struct Cli {
    /// Every option of `genplane apiserver`.
    #[command(flatten)]
    pub options: Options,
}

/// The built-in APIs this control plane serves: namespaces and configmaps, nothing else.
pub const RUNTIME_CONFIG: &[&str] = &[
    "api/all=false",
    "api/v1/namespaces=true",
    "api/v1/configmaps=true",
];

/// Serves until SIGTERM or SIGINT; `rust_log` is the `RUST_LOG` filter, when set.
pub async fn run(cli: Cli, rust_log: Option<&str>) -> anyhow::Result<()> {
    // 1. Options: this program's choices first, then whatever the command line adds.
    let mut options = cli.options;
    let given = std::mem::take(&mut options.apis.runtime_config);
    options.apis.runtime_config = RUNTIME_CONFIG
        .iter()
        .map(|entry| (*entry).to_owned())
        .chain(given)
        .collect();
    // No RBAC kinds are served: only the admin (group system:masters) may do anything.
    options.authorization.authorization_mode = vec!["AlwaysDeny".to_owned()];

    // 2. Config.
    let mut invalid = Invalid::new();
    let validated = options.validate(
        UseIdentity::new("sample-controlplane", "localhost"),
        rust_log,
        &mut invalid,
    );
    let config = invalid.finish(validated)?;
    let _ = tracing::subscriber::set_global_default(config.common.logging.subscriber());

    // 3. CompletedConfig, with the program's own kind.
    let mut completed = config.complete().await?;
    completed
        .add_resource(&widget::INFO)
        .context("serving widgets")?;

    // 4. Run.
    let shutdown = Shutdown::new();
    tokio::spawn(shutdown.clone().trigger_on(Signals::install()?));
    let build = BuildInfo::new(env!("CARGO_PKG_VERSION"), None);
    completed
        .run("sample-controlplane", &build, shutdown, None)
        .await?;
    Ok(())
}
