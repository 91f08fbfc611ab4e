//! `genplane apiserver`: the Kubernetes API for the generic resources, over HTTPS.
//!
//! The command line around [`ApiServerRole`]: storage (SQLite by default, or etcd) with a
//! watch cache per resource, system namespaces, HTTPS with authentication and authorization;
//! with no certificates given, a CA, a serving certificate and a client certificate per role in
//! the data directory, and `admin.kubeconfig` next to them.

#![warn(missing_docs)]

use clap::{ArgMatches, CommandFactory, Parser};
use genplane_component_base::{config::ConfigFlags, process::Process};
use genplane_controlplane::server::{ApiServerRole, Options};

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

/// Runs `genplane apiserver` until SIGTERM or SIGINT.
pub fn run(matches: &ArgMatches, process: &Process) -> anyhow::Result<()> {
    ApiServerRole::run(matches, process).map_err(anyhow::Error::from_boxed)
}
