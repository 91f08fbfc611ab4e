//! `genplane ccm-e2e`: the conformance suite for external cloud controller managers, run
//! against a cluster. The flags, the tests and the runner are [`genplane_ccm_e2e`]'s; the
//! command finds the kubeconfig, runs the suite until done or Ctrl-C and prints the summary.
//! The exit code is 0 when nothing failed, 1 otherwise (2 for usage errors).

#![warn(missing_docs)]

use anyhow::Context as _;
use clap::{ArgMatches, Args as _, Command, FromArgMatches as _};
use genplane_ccm_e2e::{Options, list, run_until_interrupted, selected};
use genplane_component_base::process::Process;

/// The command line of `genplane ccm-e2e`.
pub fn command() -> Command {
    Options::augment_args(Command::new("ccm-e2e").about(
        "Run the conformance suite for external cloud controller managers against a cluster",
    ))
}

/// Runs `genplane ccm-e2e`.
pub fn run(matches: &ArgMatches, process: &Process) -> anyhow::Result<()> {
    let options = Options::from_arg_matches(matches)?;
    if options.list {
        print!("{}", list(&selected(&options.selection()?)));
        return Ok(());
    }
    let kubeconfig = genplane_controller::client::kubeconfig_path(
        options.kubeconfig.as_deref(),
        process.var("KUBECONFIG"),
        process.var("HOME"),
    )
    .context("no --kubeconfig, KUBECONFIG or HOME")?;
    let report = run_until_interrupted(&options, &kubeconfig)?;
    println!("{}", report.summary());
    anyhow::ensure!(report.success(), "the suite did not pass");
    Ok(())
}
