//! `genplane all-in-one`: every long-running role in one process, for the local run: the
//! command line around [`genplane_controlplane::all_in_one`] (the API server's options, plus
//! `--controllers`).

#![warn(missing_docs)]

use clap::{ArgMatches, CommandFactory, Parser};
use genplane_component_base::component::{self, Environment};
use genplane_component_base::config::ConfigFlags;
use genplane_component_base::notify::Notifier;
use genplane_component_base::process::Process;
use genplane_component_base::shutdown::run_role;
use genplane_controller::roles::controller_manager;
use genplane_controlplane::server::Options;

#[derive(Parser)]
#[command(
    name = "all-in-one",
    about = "Run the API server and the controllers in one process on embedded storage"
)]
struct Cli {
    #[command(flatten)]
    config: ConfigFlags,
    #[command(flatten)]
    options: Options,
    /// The controllers to run, as `genplane controller-manager --controllers` reads them: `*`
    /// for every controller on by default, `foo` to enable controller foo, `-foo` to disable it
    #[arg(long, value_delimiter = ',', default_value = "*")]
    controllers: Vec<String>,
}

/// The command line of `genplane all-in-one`: the API server's, plus `--controllers`.
pub fn command() -> clap::Command {
    Cli::command()
}

/// Runs `genplane all-in-one` until SIGTERM or SIGINT.
pub fn run(matches: &ArgMatches, process: &Process) -> anyhow::Result<()> {
    let controllers: Vec<String> = matches
        .get_many::<String>("controllers")
        .map(|values| values.cloned().collect())
        .unwrap_or_else(|| vec!["*".to_owned()]);
    // An unknown controller is a configuration error before anything starts.
    controller_manager::check_controllers(&controllers)?;
    let Some(config) =
        genplane_controlplane::server::configure(matches, process, &mut std::io::stdout())?
    else {
        return Ok(());
    };
    component::install_logging(&config.common);
    let stack = Some(genplane_controlplane::server::THREAD_STACK_BYTES);
    run_role(stack, |shutdown| async move {
        // A unit of Type=notify hears of the process as one, ready once the API server is.
        let notifier = Notifier::of(process);
        notifier.watch(&shutdown);
        let environment = Environment::of(process);
        Ok(genplane_controlplane::all_in_one::serve(
            "all-in-one",
            config,
            controllers,
            &environment,
            &process.build,
            shutdown,
            &notifier,
        )
        .await?)
    })
}
