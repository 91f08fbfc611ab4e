//! `genplane feature-controller check`: whether moving the cluster to another version is safe,
//! given the features on or in use and what they left in storage
//! ([`genplane_featurecontroller::check`]), as a one-shot client of the API server.

use std::path::PathBuf;

use clap::Args;
use genplane_component_base::featuregate::{self, Version};
use genplane_component_base::process::Process;

/// Why the check could not answer, or answered no.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `--to-version` is not `MAJOR.MINOR`.
    #[error("--to-version: {0}")]
    Version(featuregate::Error),
    /// No client of the API server could be made from the kubeconfig.
    #[error(transparent)]
    Connect(#[from] crate::client::Error),
    /// The cluster could not be read.
    #[error(transparent)]
    Inspect(#[from] genplane_featurecontroller::check::Error),
    /// The move is not safe (the report says why).
    #[error("moving to {0} is not safe")]
    Unsafe(Version),
}

/// The flags of `check`.
#[derive(Args, Clone, Debug)]
pub struct CheckArgs {
    /// The kubeconfig to reach the API server with (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The version the cluster's binaries (or their emulated version) would move to,
    /// MAJOR.MINOR.
    #[arg(long, value_name = "MAJOR.MINOR")]
    pub to_version: String,
    /// The namespace of the Features.
    #[arg(long, default_value = "kube-system")]
    pub namespace: String,
}

/// Runs the check of `args` (with the kubeconfig of `process`'s environment when none is named)
/// and prints its report to standard output; an unsafe move is [`Error::Unsafe`], so that
/// scripts can test it by the exit code.
pub fn run(args: &CheckArgs, process: &Process) -> Result<(), Error> {
    let target: Version = args.to_version.parse().map_err(Error::Version)?;
    let report =
        crate::client::run_once(args.kubeconfig.as_deref(), process, |client| async move {
            let registry = genplane_features::registry();
            let report = genplane_featurecontroller::check::inspect(
                &client,
                &registry,
                &args.namespace,
                target,
            )
            .await?;
            Ok::<_, Error>(report)
        })?;
    print!("{}", report.render());
    if !report.safe() {
        return Err(Error::Unsafe(target));
    }
    Ok(())
}
