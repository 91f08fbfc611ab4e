//! `genplane feature-controller`: KEP-3920's server flow against an API server over HTTPS
//! ([`FeatureControllerRole`]), and `genplane feature-controller check`, which says whether
//! moving the cluster to another version is safe ([`check`]).

#![warn(missing_docs)]

use clap::{ArgMatches, CommandFactory, FromArgMatches as _, Parser};
use genplane_component_base::{config::ConfigFlags, process::Process};
use genplane_controller::roles::feature_controller::check::{self, CheckArgs};
use genplane_controller::roles::feature_controller::{
    FeatureControllerOptions, FeatureControllerRole,
};

#[derive(Parser)]
#[command(
    name = "feature-controller",
    about = "Announce the cluster's feature gates in the Feature API and turn them on and off safely (KEP-3920)"
)]
struct Cli {
    #[command(flatten)]
    config: ConfigFlags,
    #[command(flatten)]
    options: FeatureControllerOptions,
    #[command(subcommand)]
    check: Option<Check>,
}

#[derive(clap::Subcommand)]
enum Check {
    /// Say whether moving the cluster to another version is safe, given the features on or in
    /// use and what they left in storage; exits 1 when it is not
    Check(CheckArgs),
}

/// The command line of `genplane feature-controller`.
pub fn command() -> clap::Command {
    Cli::command()
}

/// Runs `genplane feature-controller` until SIGTERM or SIGINT (or `check`, once).
pub fn run(matches: &ArgMatches, process: &Process) -> anyhow::Result<()> {
    if let Some(("check", sub)) = matches.subcommand() {
        return Ok(check::run(&CheckArgs::from_arg_matches(sub)?, process)?);
    }
    FeatureControllerRole::run(matches, process).map_err(anyhow::Error::from_boxed)
}
