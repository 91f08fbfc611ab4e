//! `genplane pki`: makes, ahead of time, what `genplane apiserver` makes in its data directory
//! at its first start: the CA, the service-account signing key, the serving certificate, a
//! client certificate per identity (admin and each role) under `DIR/pki/`, and a kubeconfig per
//! identity in `DIR`. It reuses what is there (as the API server does: a serving certificate
//! that does not name every `--apiserver-cert-extra-sans` is made again), so it can run at
//! every start of a cluster, as the Compose cluster's one-shot `pki` service does.
//!
//! Several API servers on one etcd share the CA and the service-account key: each runs with a
//! data directory whose `pki/` is this one (or a copy), and makes nothing of its own. With
//! `--print-kubeconfig admin` it writes no kubeconfig and prints that one, for a user outside
//! the network the roles reach each other on (`--server https://127.0.0.1:6443`).

#![warn(missing_docs)]

use clap::{ArgMatches, CommandFactory, FromArgMatches as _, Parser};
use genplane_component_base::process::Process;
use genplane_controlplane::server::pki::PkiOptions;

#[derive(Parser)]
#[command(
    name = "pki",
    about = "Make the certificates, service-account key and kubeconfigs of a control plane ahead \
             of time (what `genplane apiserver` makes in its data directory), reusing what is there"
)]
struct Cli {
    #[command(flatten)]
    options: PkiOptions,
}

/// The command line of `genplane pki`.
pub fn command() -> clap::Command {
    Cli::command()
}

/// Runs `genplane pki`.
pub fn run(matches: &ArgMatches, _process: &Process) -> anyhow::Result<()> {
    let prepared = Cli::from_arg_matches(matches)?.options.prepare()?;
    // Printing a kubeconfig, the report goes to standard error and says only what was made.
    let printing = prepared.printed.is_some();
    for line in prepared
        .lines
        .iter()
        .filter(|l| !(printing && l.starts_with("kept ")))
    {
        if printing {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    }
    print!("{}", prepared.printed.unwrap_or_default());
    Ok(())
}
