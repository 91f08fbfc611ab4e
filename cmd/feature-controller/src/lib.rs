//! `genplane feature-controller`: KEP-3920's server flow against an API server over HTTPS.
//!
//! The command line, config file and `GENPLANE_*` variables read into the library's
//! [`FeatureControllerOptions`], validated and run by
//! [`genplane_controller::roles::feature_controller`] (which all-in-one runs too); and
//! `genplane feature-controller check`, which says whether moving the cluster to another version
//! is safe.

#![warn(missing_docs)]

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{ArgMatches, Args, CommandFactory, Parser};
use genplane_component_base::component::{self, Environment, Startup};
use genplane_component_base::config::ConfigFlags;
use genplane_component_base::featuregate;
use genplane_component_base::notify::Notifier;
use genplane_component_base::process::Process;
use genplane_component_base::shutdown::run_role;
use genplane_controller::roles::feature_controller::{self, FeatureControllerOptions};

#[derive(Parser)]
#[command(
    name = "feature-controller",
    about = "Announce the cluster's feature gates in the Feature API and turn them on and off safely (KEP-3920)"
)]
struct Cli {
    #[command(flatten)]
    config: ConfigFlags,
    #[command(flatten)]
    options: FeatureControllerOptions,
    #[command(subcommand)]
    check: Option<Check>,
}

/// `genplane feature-controller check`.
#[derive(clap::Subcommand)]
enum Check {
    /// Say whether moving the cluster to another version is safe, given the features on or in
    /// use and what they left in storage; exits 1 when it is not
    Check(CheckArgs),
}

/// The flags of `check`.
#[derive(Args)]
struct CheckArgs {
    /// The kubeconfig to reach the API server with (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The version the cluster's binaries (or their emulated version) would move to,
    /// MAJOR.MINOR.
    #[arg(long, value_name = "MAJOR.MINOR")]
    to_version: String,
    /// The namespace of the Features.
    #[arg(long, default_value = "kube-system")]
    namespace: String,
}

/// The command line of `genplane feature-controller`.
pub fn command() -> clap::Command {
    Cli::command()
}

/// Runs `genplane feature-controller check`: prints the report; an unsafe move is an error
/// (exit 1), so scripts can test it.
fn check(matches: &ArgMatches, process: &Process) -> anyhow::Result<()> {
    use clap::FromArgMatches as _;
    let args = CheckArgs::from_arg_matches(matches)?;
    let target: featuregate::Version = args
        .to_version
        .parse()
        .map_err(|e| anyhow::anyhow!("--to-version: {e}"))?;
    let kubeconfig = genplane_controller::client::kubeconfig_path(
        args.kubeconfig.as_deref(),
        process.var("KUBECONFIG"),
        process.var("HOME"),
    )
    .context("no --kubeconfig, KUBECONFIG or HOME")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let report = runtime.block_on(async {
        let (client, _) = genplane_controller::client::connect(Some(&kubeconfig)).await?;
        let report = genplane_featurecontroller::check::inspect(
            &client,
            &genplane_features::registry(),
            &args.namespace,
            target,
        )
        .await?;
        anyhow::Ok(report)
    })?;
    print!("{}", report.render());
    if !report.safe() {
        anyhow::bail!("moving to {target} is not safe");
    }
    Ok(())
}

/// Runs `genplane feature-controller` until SIGTERM or SIGINT (or `check`, once).
pub fn run(matches: &ArgMatches, process: &Process) -> anyhow::Result<()> {
    if let Some(("check", sub)) = matches.subcommand() {
        return check(sub, process);
    }
    let environment = Environment::of(process);
    let startup = component::configure::<FeatureControllerOptions, _>(
        matches,
        process,
        &mut std::io::stdout(),
        |options, invalid| {
            options.validate(
                environment.identity("feature-controller"),
                environment.rust_log.as_deref(),
                environment.in_cluster,
                invalid,
            )
        },
    )?;
    let Startup::Run(config) = startup else {
        return Ok(());
    };
    component::install_logging(&config.common);
    if !config.dynamic.is_empty() {
        tracing::warn!(
            features = ?config.dynamic,
            "--dynamic-features of the feature-controller is deprecated: the API servers decide \
             which features are dynamic (genplane apiserver --dynamic-features, and \
             all-in-one's); these are still marked dynamic whatever the API servers say"
        );
    }
    run_role(None, |shutdown| async move {
        let notifier = Notifier::of(process);
        notifier.watch(&shutdown);
        Ok(feature_controller::serve(config, shutdown, &notifier).await?)
    })
}
