//! A small control plane assembled with genplane's library (KEP-4080's sample): it serves
//! namespaces, configmaps and `widgets.sample.genplane.io`, a kind of its own defined in Rust
//! ([`widget`]), beside what a control plane needs to run itself (Leases, RBAC, the Feature
//! API), on embedded SQLite, over HTTPS with client-certificate authentication. Run it
//! with `cargo run -p genplane-example-sample-controlplane -- --data-dir /tmp/sample
//! --secure-port 7443` and use the kubeconfig it prints, with kubectl or any client.
//!
//! The walk through [`SampleRole`], a [`Role`] that the main hands to genplane's component
//! runner (`genplane_component_base::component::run`, which every `genplane` role runs with:
//! `--config` files, `GENPLANE_*` variables, logging, signals, systemd's notifications):
//!
//! 1. **Options.** The library's [`Options`] are the same `genplane apiserver` reads from its
//!    command line, by concern (serving, storage, authentication, authorization, audit,
//!    admission, API enablement); every one of its flags works here too. The program chooses
//!    which built-in APIs it serves before the command line's choices (`--runtime-config`):
//!    namespaces and configmaps for its users; Leases, RBAC and the Feature API for itself.
//! 2. **Config.** [`Options::validate`] checks everything at once and reports every problem
//!    (exit 64 on a bad flag).
//! 3. **CompletedConfig.** `complete` makes the certificates (a CA, a serving certificate and a
//!    client certificate per identity in the data directory), opens the storage and sets up a
//!    watch cache per served resource. The program adds its own kind there:
//!    `add_resource(&widget::INFO)`. From then on widgets are served like the built-in kinds:
//!    discovery, OpenAPI (`kubectl explain widgets.spec`), every verb, watches, tables
//!    (`kubectl get widgets`), field selectors, server-side apply, the `status` subresource.
//! 4. **Run.** `run` assembles authentication, authorization, audit and admission, serves until
//!    SIGTERM or SIGINT, and runs the library's post-start hooks, each a `/readyz` check: the
//!    system namespaces, the bootstrap RBAC policy, the API server's identity Lease, and the
//!    report of the feature gates it uses to the Feature API (where a feature-controller,
//!    `genplane feature-controller` against this server, announces the features). The program
//!    writes none of that itself.

pub mod widget;

use anyhow::Context as _;
use clap::Parser;
use genplane_component_base::component::{Context, Environment, Role};
use genplane_component_base::config::{CommonConfig, ConfigFlags, Invalid};
use genplane_controlplane::server::{ApiServerRole, Config, Options};

/// The command line: the library's options, and `--config` with its companions.
#[derive(Parser, Debug)]
#[command(
    name = "sample-controlplane",
    about = "A control plane of namespaces, configmaps and widgets, built with genplane's library"
)]
pub struct Cli {
    /// `--config`, `--print-default-config`, `--config-check`.
    #[command(flatten)]
    pub config: ConfigFlags,
    /// Every option of `genplane apiserver`.
    #[command(flatten)]
    pub options: Options,
}

/// The built-in APIs this control plane serves: namespaces and configmaps for its users;
/// Leases (the API server's identity), RBAC (who may do what) and Features (the gates it
/// uses) for itself. Nothing else.
pub const RUNTIME_CONFIG: &[&str] = &[
    "api/all=false",
    "api/v1/namespaces=true",
    "api/v1/configmaps=true",
    "coordination.k8s.io/v1=true",
    "rbac.authorization.k8s.io/v1=true",
    "featuregates.genplane.io/v1alpha1=true",
];

/// The sample control plane as a [`Role`]: `genplane apiserver`'s options and validation with
/// [`RUNTIME_CONFIG`] first, and widgets added to what it serves.
#[derive(Debug)]
pub struct SampleRole;

impl Role for SampleRole {
    type Options = Options;
    type Config = Config;
    type Error = anyhow::Error;

    const THREAD_STACK: Option<usize> = Some(genplane_controlplane::server::THREAD_STACK_BYTES);

    fn validate(
        options: &Options,
        environment: &Environment,
        invalid: &mut Invalid,
    ) -> Option<Config> {
        // 1. Options: this program's choices first, then whatever the command line adds.
        let mut options = options.clone();
        options.apis.runtime_config = RUNTIME_CONFIG
            .iter()
            .map(|entry| (*entry).to_owned())
            .chain(std::mem::take(&mut options.apis.runtime_config))
            .collect();
        // 2. Config, as `genplane apiserver` validates it.
        ApiServerRole::validate(&options, environment, invalid)
    }

    fn common(config: &Config) -> &CommonConfig {
        &config.common
    }

    async fn serve(config: Config, context: Context<'_>) -> anyhow::Result<()> {
        // 3. CompletedConfig, with the program's own kind.
        let mut completed = config.complete().await?;
        completed
            .add_resource(&widget::INFO)
            .context("serving widgets")?;
        // 4. Run.
        completed
            .run(
                "sample-controlplane",
                &context.process.build,
                context.shutdown,
                None,
            )
            .await?;
        Ok(())
    }
}
