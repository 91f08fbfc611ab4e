//! The start-up sequence every role shares, before it does anything of its own:
//!
//! 1. `--print-default-config`: print the defaults as TOML and stop;
//! 2. load the options from every layer ([`config::load`]);
//! 3. validate them into the role's typed configuration, collecting every error;
//! 4. `--config-check`: report that the configuration is valid and stop;
//! 5. otherwise hand the configuration to the role.
//!
//! [`run`] is the whole life of a long-running role as every applet lives it: that sequence,
//! then the log subscriber, a runtime with the signal handlers (see [`shutdown::run_role`]),
//! systemd's notifications, and the role's own [`Role::serve`]. An applet's main is its command
//! line and one call of [`run`].
//!
//! A role's command line flattens [`ConfigFlags`] and its own options struct:
//!
//! ```
//! use clap::{CommandFactory, Parser};
//! use genplane_component_base::component::{self, Startup};
//! use genplane_component_base::config::{CommonOptions, ConfigFlags};
//! use genplane_component_base::process::Process;
//!
//! #[derive(Parser, Debug, Default, serde::Serialize, serde::Deserialize)]
//! #[serde(rename_all = "kebab-case", default)]
//! struct Options {
//!     #[command(flatten)]
//!     #[serde(flatten)]
//!     common: CommonOptions,
//! }
//!
//! #[derive(Parser)]
//! struct Cli {
//!     #[command(flatten)]
//!     config: ConfigFlags,
//!     #[command(flatten)]
//!     options: Options,
//! }
//!
//! let matches = Cli::command().get_matches_from(["role", "--config-check", "--log-format=json"]);
//! let mut out = Vec::new();
//! let startup = component::configure::<Options, _>(&matches, &Process::default(), &mut out, |o, _| {
//!     Some(o.common.log_format.clone())
//! })
//! .unwrap();
//! assert!(matches!(startup, Startup::Done));
//! assert_eq!(String::from_utf8(out).unwrap(), "configuration is valid\n");
//! ```

use std::future::Future;
use std::io::Write;

use clap::{ArgMatches, Args, FromArgMatches};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::config::{self, CommonConfig, ConfigFlags, Invalid};
use crate::featuregate::UseIdentity;
use crate::notify::Notifier;
use crate::process::Process;
use crate::shutdown::{self, Shutdown};

/// The environment variables that say the process runs in a pod (kube-rs and client-go read
/// the same ones): with them, a role may do without `--kubeconfig`.
pub const IN_CLUSTER_ENV: [&str; 2] = ["KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"];

/// What a role reads of its process at start, besides its options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Environment {
    /// The instance name its feature uses are reported under: `HOSTNAME`, else `localhost`.
    pub instance: String,
    /// `RUST_LOG`, the log filter used when `--log-filter` is not given.
    pub rust_log: Option<String>,
    /// Whether it runs in a pod ([`IN_CLUSTER_ENV`] set).
    pub in_cluster: bool,
}

impl Environment {
    /// The environment of `process`.
    pub fn of(process: &Process) -> Self {
        Self {
            instance: process.var("HOSTNAME").unwrap_or("localhost").to_owned(),
            rust_log: process.var("RUST_LOG").map(str::to_owned),
            in_cluster: IN_CLUSTER_ENV.iter().all(|v| process.var(v).is_some()),
        }
    }

    /// The identity of the role `component` of this process, as its feature uses name it.
    pub fn identity(&self, component: &str) -> UseIdentity {
        UseIdentity::new(component, self.instance.clone())
    }
}

/// Installs the log subscriber of `common` as the process's, and logs the warnings its feature
/// gates gave (a GA feature set, say). Only the binary's roles call it, once; a second role in
/// the same process keeps the first's subscriber.
pub fn install_logging(common: &CommonConfig) {
    let _ = tracing::subscriber::set_global_default(common.logging.subscriber());
    for warning in common.feature_gate.warnings() {
        tracing::warn!("{warning}");
    }
}

/// What to do after [`configure`].
#[derive(Debug)]
pub enum Startup<C> {
    /// Run the role with this configuration.
    Run(C),
    /// Nothing more to do (`--print-default-config` or `--config-check` answered).
    Done,
}

/// Runs the shared start-up sequence for options `O`, validated into `C` by `validate`.
///
/// `out` receives what `--print-default-config` and `--config-check` print. Errors are always
/// [`config::Error`]s: an invalid configuration.
pub fn configure<O, C>(
    matches: &ArgMatches,
    process: &Process,
    out: &mut dyn Write,
    validate: impl FnOnce(&O, &mut Invalid) -> Option<C>,
) -> Result<Startup<C>, config::Error>
where
    O: Args + FromArgMatches + Serialize + DeserializeOwned + Default,
{
    let flags = ConfigFlags::from_arg_matches(matches).unwrap_or_default();
    let write_error = |source| config::Error::Read {
        path: "<standard output>".into(),
        source,
    };
    if flags.print_default_config {
        let text = config::default_config_toml::<O>()?;
        out.write_all(text.as_bytes()).map_err(write_error)?;
        return Ok(Startup::Done);
    }
    let options: O = config::load(matches, flags.config.as_deref(), &process.env)?;
    let mut invalid = Invalid::new();
    let validated = validate(&options, &mut invalid);
    let config = invalid.finish(validated)?;
    if flags.config_check {
        out.write_all(b"configuration is valid\n")
            .map_err(write_error)?;
        return Ok(Startup::Done);
    }
    Ok(Startup::Run(config))
}

/// A long-running role of the binary (the API server, the controller-manager, ...): its options,
/// how they are validated, and how it serves. [`run`] runs it.
pub trait Role {
    /// The options: the role's flags, config-file keys and `GENPLANE_*` variables.
    type Options: Args + FromArgMatches + Serialize + DeserializeOwned + Default;
    /// The options validated.
    type Config;
    /// Why serving stopped with an error.
    type Error;

    /// Bytes of stack per worker thread, when the role needs more than Tokio's default.
    const THREAD_STACK: Option<usize> = None;

    /// Validates `options` into the configuration, reporting every problem to `invalid`.
    fn validate(
        options: &Self::Options,
        environment: &Environment,
        invalid: &mut Invalid,
    ) -> Option<Self::Config>;

    /// The part of the configuration every role has (logging, feature gates).
    fn common(config: &Self::Config) -> &CommonConfig;

    /// Serves until `context.shutdown` is triggered, or until the role fails.
    fn serve(
        config: Self::Config,
        context: Context<'_>,
    ) -> impl Future<Output = Result<(), Self::Error>>;
}

/// Why a role's [`run`] ended, for an applet that only reports it: the error with its causes.
/// An invalid configuration is a [`config::Error`], found by downcasting.
///
/// A role's crate gives its applet a non-generic entry point that calls
/// `run::<TheRole, Failure>`, so that the role is compiled once, in its own crate. A role's
/// serving future is instantiated in the crate that polls it, and optimized builds do not
/// share instantiations between crates: every applet crate that called `run::<R, _>` itself
/// compiled the whole server again.
pub type Failure = Box<dyn std::error::Error + Send + Sync>;

/// What a running [`Role`] gets from its process besides its configuration.
#[derive(Debug)]
pub struct Context<'a> {
    /// The process: its build information, environment and arguments.
    pub process: &'a Process,
    /// What the role reads of the environment.
    pub environment: Environment,
    /// Triggered by the first SIGTERM or SIGINT.
    pub shutdown: Shutdown,
    /// systemd's notification socket (a no-op outside a unit of `Type=notify`), already
    /// following the shutdown and the watchdog; the role says [`Notifier::ready`] itself.
    pub notifier: Notifier,
}

/// Runs role `R` with the arguments in `matches` as every applet does: the start-up sequence
/// ([`configure`], printing to standard output), the log subscriber ([`install_logging`]), a
/// runtime with the signal handlers ([`shutdown::run_role`]), systemd's notifications, then
/// [`Role::serve`] until it returns. Only the binary's applets call it: it installs process-wide
/// state. An invalid configuration is a [`config::Error`] in `E`, so the caller can tell it
/// from a failure while running.
pub fn run<R, E>(matches: &ArgMatches, process: &Process) -> Result<(), E>
where
    R: Role,
    E: From<config::Error> + From<shutdown::Error> + From<R::Error>,
{
    let environment = Environment::of(process);
    let startup = configure::<R::Options, _>(
        matches,
        process,
        &mut std::io::stdout(),
        |options, invalid| R::validate(options, &environment, invalid),
    )?;
    let Startup::Run(config) = startup else {
        return Ok(());
    };
    install_logging(R::common(&config));
    shutdown::run_role(R::THREAD_STACK, |shutdown| async move {
        let notifier = Notifier::of(process);
        notifier.watch(&shutdown);
        let last_word = notifier.clone();
        let context = Context {
            process,
            environment,
            shutdown,
            notifier,
        };
        let served = R::serve(config, context).await.map_err(E::from);
        // The watching task may not have run before the role returned.
        last_word.stopping();
        served
    })
}
