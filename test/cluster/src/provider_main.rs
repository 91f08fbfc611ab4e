//! `genplane-testcluster-provider`: the fake cloud as an exec plugin of `genplane ccm-e2e`
//! (see `genplane_test_cluster::provider`). It answers the one request on stdin on stdout.

use std::io::{Read as _, Write as _};

use genplane_test_cluster::provider::FakeCloudProvider;

fn main() -> std::process::ExitCode {
    let mut input = Vec::new();
    if let Err(error) = std::io::stdin().read_to_end(&mut input) {
        eprintln!("Error: reading the request: {error}");
        return std::process::ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("Error: starting the runtime: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let answer = runtime.block_on(genplane_cloudprovider::protocol::serve(
        FakeCloudProvider::from_config,
        &input,
    ));
    match std::io::stdout().write_all(&answer) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("Error: writing the answer: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}
