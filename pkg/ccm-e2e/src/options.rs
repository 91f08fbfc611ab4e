//! The flags of `genplane ccm-e2e` ([`Options`]) and what they make: the [`Selection`] of
//! tests, the [`Settings`] of the run and the [`Provider`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use genplane_cloudprovider::exec::ExecProvider;
use genplane_cloudprovider::{NullProvider, Provider};
use regex::Regex;

use crate::suite::{self, LabelFilter, Selection, Settings};

/// The built-in provider names (`--provider NAME`).
pub const BUILT_IN_PROVIDERS: &[&str] = &["skeleton"];

/// Why the flags do not make a run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A `--focus` or `--skip` pattern is not a regular expression.
    #[error("--{flag} {pattern:?}")]
    Pattern {
        /// `focus` or `skip`.
        flag: &'static str,
        /// The pattern.
        pattern: String,
        /// Why it is not one.
        #[source]
        source: regex::Error,
    },
    /// `--label-filter` is not Ginkgo's syntax.
    #[error("--label-filter")]
    LabelFilter(#[source] suite::Error),
    /// `--timeout-scale` is zero, negative or not a number.
    #[error("--timeout-scale must be a positive number, not {0}")]
    TimeoutScale(f64),
    /// `--provider-config` could not be read.
    #[error("reading --provider-config {}", path.display())]
    ReadProviderConfig {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `--provider-config` is neither JSON nor YAML.
    #[error("--provider-config {}: {message}", path.display())]
    ProviderConfig {
        /// The file.
        path: PathBuf,
        /// Where it is wrong.
        message: String,
    },
    /// `--provider exec:` names no program.
    #[error("--provider exec: needs a program path")]
    NoPluginPath,
    /// `--provider` names no built-in provider.
    #[error("unknown provider {0:?}: use exec:PATH for a plugin, or one of {BUILT_IN_PROVIDERS:?}")]
    UnknownProvider(String),
}

/// The flags of `genplane ccm-e2e`.
#[derive(Args, Debug, Clone)]
pub struct Options {
    /// The kubeconfig of the cluster under test (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long)]
    pub context: Option<String>,
    /// The provider: `exec:PATH` (an exec plugin) or a built-in name (`skeleton`: can do
    /// nothing, only tests needing no capability run).
    #[arg(long, default_value = "skeleton")]
    pub provider: String,
    /// The provider's configuration (JSON or YAML), given to it with every call.
    #[arg(long)]
    pub provider_config: Option<PathBuf>,
    /// How long one call of an exec provider may take (a Go duration).
    #[arg(long, default_value = "60s", value_parser = go_duration)]
    pub provider_timeout: Duration,
    /// Run only tests whose full name matches (repeatable: any of them).
    #[arg(long)]
    pub focus: Vec<String>,
    /// Do not run tests whose full name matches (repeatable).
    #[arg(long)]
    pub skip: Vec<String>,
    /// Run only tests whose labels satisfy this (`Feature:LoadBalancer && !Serial`).
    #[arg(long)]
    pub label_filter: Option<String>,
    /// Print the selected tests, their labels and the capabilities they need; run nothing.
    #[arg(long)]
    pub list: bool,
    /// Walk the selected tests against the provider's capabilities without running them.
    #[arg(long)]
    pub dry_run: bool,
    /// Write a JUnit report here.
    #[arg(long)]
    pub junit_report: Option<PathBuf>,
    /// Write `junit_01.xml` (and `junit_upgrades.xml` when upgrade tests ran) and failure
    /// dumps here.
    #[arg(long)]
    pub report_dir: Option<PathBuf>,
    /// Run up to N tests at once (tests labelled Serial run alone, after the others).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub parallel: u16,
    /// How long the whole run may take (a Go duration).
    #[arg(long, default_value = "1h", value_parser = go_duration)]
    pub timeout: Duration,
    /// The factor upstream's per-test timeouts and waits are multiplied by (a fast hermetic
    /// cluster can use 0.05).
    #[arg(long, default_value_t = 1.0)]
    pub timeout_scale: f64,
    /// Delete each test's namespace after it.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub delete_namespace: bool,
    /// Delete the namespace of a failed test too.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub delete_namespace_on_failure: bool,
    /// Write a failed test's objects, events and the provider's load balancers into
    /// `--report-dir`.
    #[arg(long)]
    pub dump_on_failure: bool,
    /// The version the upgrade tests go to (`v1.34.0`; a prefix such as `v1.34` accepts any
    /// patch release). The downgrade test goes to it too: give it an older version, in a run
    /// of its own, as upstream's downgrade jobs did.
    #[arg(long)]
    pub upgrade_target: Option<String>,
    /// The address the external-IP test gives its Service (`externalIPs`): on no node, and
    /// routed to the cluster by its network (upstream's test uses this documentation one).
    #[arg(long, default_value = "203.0.113.250")]
    pub external_ip: String,
    /// Before running, delete the test namespaces (and so the load balancers) an earlier,
    /// interrupted run left behind (those labelled `e2e-framework=ccm-e2e`).
    #[arg(long)]
    pub clean_start: bool,
}

fn go_duration(text: &str) -> Result<Duration, String> {
    genplane_apimachinery::duration::parse(text).map_err(|e| e.to_string())
}

impl Options {
    /// The selection the flags make.
    pub fn selection(&self) -> Result<Selection, Error> {
        let regexes = |list: &[String], flag: &'static str| -> Result<Vec<Regex>, Error> {
            list.iter()
                .map(|pattern| {
                    Regex::new(pattern).map_err(|source| Error::Pattern {
                        flag,
                        pattern: pattern.clone(),
                        source,
                    })
                })
                .collect()
        };
        Ok(Selection {
            focus: regexes(&self.focus, "focus")?,
            skip: regexes(&self.skip, "skip")?,
            labels: self
                .label_filter
                .as_deref()
                .map(LabelFilter::parse)
                .transpose()
                .map_err(Error::LabelFilter)?,
        })
    }

    /// The settings the flags make.
    pub fn settings(&self) -> Result<Settings, Error> {
        if !(self.timeout_scale > 0.0 && self.timeout_scale.is_finite()) {
            return Err(Error::TimeoutScale(self.timeout_scale));
        }
        Ok(Settings {
            parallel: usize::from(self.parallel),
            suite_timeout: self.timeout,
            scale: self.timeout_scale,
            delete_namespace: self.delete_namespace,
            delete_namespace_on_failure: self.delete_namespace_on_failure,
            dump_on_failure: self.dump_on_failure,
            report_dir: self.report_dir.clone(),
            dry_run: self.dry_run,
            upgrade_target: self.upgrade_target.clone(),
            external_ip: self.external_ip.clone(),
            clean_start: self.clean_start,
            status: None,
        })
    }

    /// The provider the flags name.
    pub fn provider(&self) -> Result<Arc<dyn Provider>, Error> {
        let config = match &self.provider_config {
            Some(path) => {
                let text =
                    std::fs::read_to_string(path).map_err(|source| Error::ReadProviderConfig {
                        path: path.clone(),
                        source,
                    })?;
                let config = genplane_apimachinery::yaml::from_str(&text).map_err(|message| {
                    Error::ProviderConfig {
                        path: path.clone(),
                        message,
                    }
                })?;
                Some(config)
            }
            None => None,
        };
        if let Some(path) = self.provider.strip_prefix("exec:") {
            if path.is_empty() {
                return Err(Error::NoPluginPath);
            }
            return Ok(Arc::new(
                ExecProvider::new(path, config).with_timeout(self.provider_timeout),
            ));
        }
        match self.provider.as_str() {
            "skeleton" => Ok(Arc::new(NullProvider)),
            other => Err(Error::UnknownProvider(other.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::{Command, FromArgMatches as _};

    use super::*;
    use genplane_apimachinery::errors::chain;

    fn options(args: &[&str]) -> Options {
        let command = Options::augment_args(Command::new("ccm-e2e"));
        let matches = command
            .try_get_matches_from(std::iter::once("ccm-e2e").chain(args.iter().copied()))
            .unwrap_or_else(|e| panic!("{e}"));
        Options::from_arg_matches(&matches).unwrap_or_else(|e| panic!("{e}"))
    }

    /// The flags' errors read as they always have: the flag, then what is wrong with it.
    #[test]
    fn bad_flags_say_which_flag_and_why() {
        let error = |args: &[&str]| -> String {
            let options = options(args);
            let made = options
                .selection()
                .and_then(|_| options.settings())
                .and_then(|_| options.provider());
            match made {
                Ok(_) => panic!("{args:?} were accepted"),
                Err(error) => chain(&error),
            }
        };
        assert!(
            error(&["--focus", "("]).starts_with("--focus \"(\": regex parse error"),
            "{}",
            error(&["--focus", "("])
        );
        assert_eq!(
            error(&["--label-filter", "Slow &&"]),
            "--label-filter: the label filter ends too early"
        );
        assert_eq!(
            error(&["--timeout-scale", "0"]),
            "--timeout-scale must be a positive number, not 0"
        );
        assert_eq!(
            error(&["--provider", "exec:"]),
            "--provider exec: needs a program path"
        );
        assert_eq!(
            error(&["--provider", "gce"]),
            "unknown provider \"gce\": use exec:PATH for a plugin, or one of [\"skeleton\"]"
        );
        assert!(
            error(&["--provider-config", "/nonexistent/ccm.yaml"])
                .starts_with("reading --provider-config /nonexistent/ccm.yaml: "),
            "{}",
            error(&["--provider-config", "/nonexistent/ccm.yaml"])
        );
    }
}
