//! `genplane networkregistry`: the network registry (KANA) for people, against a kubeconfig
//! (`--kubeconfig`, else the first file of `KUBECONFIG`, else `~/.kube/config`), from one list
//! of the claims ([`genplane_networkregistry::report`]). `lookup 10.96.0.10` prints the
//! allocated range holding the address, `lookup 10.0.0.0/8` every allocated range overlapping
//! the prefix (nothing there exits 1); `claims` prints every record of every claim.

#![warn(missing_docs)]

use std::path::PathBuf;

use clap::{ArgMatches, CommandFactory, FromArgMatches as _, Parser, Subcommand};
use genplane_component_base::process::Process;
use genplane_networkregistry::report::{self, Query};

#[derive(Parser)]
#[command(
    name = "networkregistry",
    about = "Ask the network registry who owns an address or a prefix, and list the claims"
)]
struct Cli {
    /// The kubeconfig of the API server (default: $KUBECONFIG, then ~/.kube/config)
    #[arg(long, global = true)]
    kubeconfig: Option<PathBuf>,
    #[command(subcommand)]
    command: Ask,
}

#[derive(Subcommand)]
enum Ask {
    /// Who holds an address (10.96.0.10), or which allocated ranges overlap a prefix (10.0.0.0/8)
    Lookup {
        #[arg(value_name = "IP|PREFIX")]
        what: String,
    },
    /// Every record of every claim, with its allocation
    Claims,
}

/// The command line.
pub fn command() -> clap::Command {
    Cli::command()
}

/// Runs `genplane networkregistry`.
pub fn run(matches: &ArgMatches, process: &Process) -> anyhow::Result<()> {
    let cli = Cli::from_arg_matches(matches)?;
    let kubeconfig = cli.kubeconfig.as_deref();
    let text = genplane_controller::client::run_once(kubeconfig, process, |client| async move {
        let registry = report::start(client).await?;
        Ok::<_, anyhow::Error>(match &cli.command {
            Ask::Lookup { what } => report::lookup(&registry, &what.parse::<Query>()?)?,
            Ask::Claims => report::claims(&registry),
        })
    })?;
    print!("{text}");
    Ok(())
}
