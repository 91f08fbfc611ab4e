//! `genplane controller-manager`: the generic controllers, run against an API server over
//! HTTPS, with leader election so that several instances can run for availability.
//!
//! The command line, config file and `GENPLANE_*` variables read into the library's
//! [`ControllerManagerOptions`], validated and run by [`genplane_controller::roles::controller_manager`] (which
//! all-in-one runs too).

#![warn(missing_docs)]

use clap::{ArgMatches, CommandFactory, Parser};
use genplane_component_base::component::{self, Environment, Startup};
use genplane_component_base::config::ConfigFlags;
use genplane_component_base::notify::Notifier;
use genplane_component_base::process::Process;
use genplane_component_base::shutdown::run_role;
use genplane_controller::roles::controller_manager::{
    self as manager, ControllerManagerConfig, ControllerManagerOptions,
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

/// Validates the options of `matches` as `genplane controller-manager` does; `None` when the
/// command only printed something (`--print-default-config`, `--config-check`).
pub fn configure(
    matches: &ArgMatches,
    process: &Process,
) -> anyhow::Result<Option<ControllerManagerConfig>> {
    let environment = Environment::of(process);
    let startup = component::configure::<ControllerManagerOptions, _>(
        matches,
        process,
        &mut std::io::stdout(),
        |options, invalid| {
            options.validate(
                environment.identity("controller-manager"),
                environment.rust_log.as_deref(),
                environment.in_cluster,
                invalid,
            )
        },
    )?;
    Ok(match startup {
        Startup::Run(config) => Some(config),
        Startup::Done => None,
    })
}

/// Runs `genplane controller-manager` until SIGTERM or SIGINT, or until it loses its Lease.
pub fn run(matches: &ArgMatches, process: &Process) -> anyhow::Result<()> {
    let Some(config) = configure(matches, process)? else {
        return Ok(());
    };
    component::install_logging(&config.common);
    run_role(None, |shutdown| async move {
        // A unit of Type=notify is active once the controller-manager is connected.
        let notifier = Notifier::of(process);
        notifier.watch(&shutdown);
        Ok(manager::serve(config, &notifier, shutdown).await?)
    })
}
