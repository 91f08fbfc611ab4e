//! `genplane all-in-one`: every long-running role in one process, for the local run: the
//! command line around [`AllInOneRole`] (the API server's options, plus `--controllers`).

#![warn(missing_docs)]

use clap::{ArgMatches, CommandFactory, Parser};
use genplane_component_base::{config::ConfigFlags, process::Process};
use genplane_controlplane::all_in_one::{AllInOneOptions, AllInOneRole};

#[derive(Parser)]
#[command(
    name = "all-in-one",
    about = "Run the API server and the controllers in one process on embedded storage"
)]
struct Cli {
    #[command(flatten)]
    config: ConfigFlags,
    #[command(flatten)]
    options: AllInOneOptions,
}

/// The command line of `genplane all-in-one`: the API server's, plus `--controllers`.
pub fn command() -> clap::Command {
    Cli::command()
}

/// Runs `genplane all-in-one` until SIGTERM or SIGINT.
pub fn run(matches: &ArgMatches, process: &Process) -> anyhow::Result<()> {
    AllInOneRole::run(matches, process).map_err(anyhow::Error::from_boxed)
}
