//! The `genplane` executable: collects the process context and hands it to the dispatcher.

use std::process::ExitCode;

use genplane_component_base::process::Process;
use genplane_component_base::version::BuildInfo;

#[allow(clippy::disallowed_methods)] // the one place that reads the process's own context
fn main() -> ExitCode {
    let process = Process {
        args: std::env::args_os().collect(),
        env: std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect(),
        current_exe: std::env::current_exe().ok(),
        build: BuildInfo::new(
            env!("CARGO_PKG_VERSION"),
            Some(env!("GENPLANE_BUILD_GIT_COMMIT")),
        ),
    };
    ExitCode::from(genplane::run(&process))
}
