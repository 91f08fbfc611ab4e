//! `genplane controller-manager`: the generic controllers, run against an API server over
//! HTTPS, with leader election so that several instances can run for availability
//! ([`ControllerManagerRole`]).

#![warn(missing_docs)]

use clap::{ArgMatches, CommandFactory, Parser};
use genplane_component_base::{config::ConfigFlags, process::Process};
use genplane_controller::roles::controller_manager::{
    ControllerManagerOptions, ControllerManagerRole,
};

#[derive(Parser)]
#[command(
    name = "controller-manager",
    about = "Run the generic controllers (service accounts, root CA, cluster-role aggregation, resource quota, ...) with leader election"
)]
struct Cli {
    #[command(flatten)]
    config: ConfigFlags,
    #[command(flatten)]
    options: ControllerManagerOptions,
}

/// The command line of `genplane controller-manager`.
pub fn command() -> clap::Command {
    Cli::command()
}

/// Runs `genplane controller-manager` until SIGTERM or SIGINT, or until it loses its Lease.
pub fn run(matches: &ArgMatches, process: &Process) -> anyhow::Result<()> {
    ControllerManagerRole::run(matches, process).map_err(anyhow::Error::from_boxed)
}
