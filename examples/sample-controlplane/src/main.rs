//! `sample-controlplane`: see the crate docs of `genplane_example_sample_controlplane`.

use clap::CommandFactory as _;
use genplane_component_base::component;
use genplane_component_base::process::Process;
use genplane_component_base::version::BuildInfo;
use genplane_example_sample_controlplane::{Cli, SampleRole};

fn main() -> std::process::ExitCode {
    let process = Process::current(BuildInfo::new(env!("CARGO_PKG_VERSION"), None));
    let matches = Cli::command().get_matches_from(&process.args);
    match component::run::<SampleRole, anyhow::Error>(&matches, &process) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("Error: {error:#}");
            // A configuration that cannot be used is a usage error, as for genplane's roles.
            let invalid = error
                .chain()
                .any(|e| e.is::<genplane_component_base::config::Error>());
            std::process::ExitCode::from(if invalid { 64 } else { 1 })
        }
    }
}
