//! `genplane-testcluster`: see the crate docs of `genplane_test_cluster`.

use clap::Parser as _;

use genplane_test_cluster::{Cli, run};

#[allow(clippy::disallowed_methods)] // the one place that reads the process's environment
fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let rust_log = std::env::var("RUST_LOG").ok();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(genplane_controlplane::server::THREAD_STACK_BYTES)
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("Error: starting the runtime: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli, rust_log.as_deref())) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("Error: {error:#}");
            let invalid = error
                .chain()
                .any(|e| e.is::<genplane_component_base::config::Error>());
            std::process::ExitCode::from(if invalid { 64 } else { 1 })
        }
    }
}
