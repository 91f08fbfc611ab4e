//! The applet table: every role the binary can run. One line per applet.

use clap::ArgMatches;
use genplane_component_base::process::Process;
use genplane_component_base::{probe, version};

use crate::Applet;

/// Every applet, in the order `genplane --list` shows them.
pub static APPLETS: &[Applet] = &[
    Applet {
        name: "all-in-one",
        aliases: &[],
        command: genplane_cmd_all_in_one::command,
        run: genplane_cmd_all_in_one::run,
    },
    Applet {
        name: "apiserver",
        aliases: &[],
        command: genplane_cmd_apiserver::command,
        run: genplane_cmd_apiserver::run,
    },
    Applet {
        name: "ccm-e2e",
        aliases: &[],
        command: genplane_cmd_ccm_e2e::command,
        run: genplane_cmd_ccm_e2e::run,
    },
    Applet {
        name: "controller-manager",
        aliases: &[],
        command: genplane_cmd_controller_manager::command,
        run: genplane_cmd_controller_manager::run,
    },
    Applet {
        name: "feature-controller",
        aliases: &[],
        command: genplane_cmd_feature_controller::command,
        run: genplane_cmd_feature_controller::run,
    },
    Applet {
        name: "healthcheck",
        aliases: &[],
        command: probe::command,
        run: run_healthcheck,
    },
    Applet {
        name: "networkregistry",
        aliases: &[],
        command: genplane_cmd_networkregistry::command,
        run: genplane_cmd_networkregistry::run,
    },
    Applet {
        name: "pki",
        aliases: &[],
        command: genplane_cmd_pki::command,
        run: genplane_cmd_pki::run,
    },
    Applet {
        name: "version",
        aliases: &[],
        command: version::command,
        run: run_version,
    },
];

fn run_version(matches: &ArgMatches, process: &Process) -> anyhow::Result<()> {
    let text = version::render(&process.build, matches)?;
    print!("{text}");
    Ok(())
}

/// Prints a healthy answer's status and body; an unhealthy one is the error (exit 1), its body
/// included, which is what `docker inspect` shows of a failing health check.
fn run_healthcheck(matches: &ArgMatches, _process: &Process) -> anyhow::Result<()> {
    let healthy = probe::run(matches)?;
    println!("{}", healthy.status);
    if !healthy.body.is_empty() {
        println!("{}", healthy.body.trim_end());
    }
    Ok(())
}
