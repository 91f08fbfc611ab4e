//! `genplane ccm-e2e`: a conformance suite for external cloud controller managers.
//!
//! It runs upstream's cloud-provider tests (nodes deleted with their instances, reboots,
//! upgrades) and the LoadBalancer and Service tests of `test/e2e/network` ([`specs`])
//! against a cluster (`--kubeconfig`, `--context`), with the infrastructure actions they need
//! (delete or reboot an instance, describe a load balancer, probe from outside) done by a
//! provider (`--provider exec:PATH` for an exec plugin, or a built-in name; see
//! `genplane_cloudprovider`). A test needing a capability the provider does not declare is
//! skipped with that reason.
//!
//! Selection is upstream's: `--focus`/`--skip` (regular expressions on the full name, labels
//! included in brackets) and `--label-filter` (Ginkgo's syntax). `--list` prints the tests
//! with their labels and needs, `--dry-run` walks the selection against the provider's
//! capabilities without touching the cluster. Each test gets a namespace of its own, deleted
//! after it with its Services (so the cloud's load balancers go too); Ctrl-C and
//! `--timeout` clean up the same way, and `--clean-start` deletes what an interrupted run
//! left (namespaces labelled `e2e-framework=ccm-e2e`) before the tests. Waits are upstream's
//! timeouts times `--timeout-scale`. The upgrade tests run upstream's upgrade tests (a
//! LoadBalancer Service, a Deployment, a ReplicaSet) while the upgrade happens
//! ([`upgrades`]) and write their results to `junit_upgrades.xml` in `--report-dir`
//! ([`UPGRADES_JUNIT`]). On a terminal one status line follows the run
//! ([`display`]); elsewhere the output is plain lines, one per finished test.
//! The exit code is 0 when nothing failed, 1 otherwise (2 for usage errors).

#![warn(missing_docs)]

pub mod display;
pub mod framework;
pub mod results;
pub mod specs;
pub mod suite;
pub mod upgrades;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{ArgMatches, Args, Command, FromArgMatches as _};
use genplane_cloudprovider::exec::ExecProvider;
use genplane_cloudprovider::{NullProvider, Provider};
use genplane_component_base::process::Process;
use regex::Regex;

use crate::specs::{SPECS, Spec};
use crate::suite::{LabelFilter, Progress, Report, Selection, Settings, StatusHook};

/// The file in `--report-dir` the upgrade tests' results go to when upgrade tests ran
/// (upstream's `junit_<prefix>upgrades.xml`, with no prefix).
pub const UPGRADES_JUNIT: &str = "junit_upgrades.xml";

/// The built-in provider names (`--provider NAME`).
pub const BUILT_IN_PROVIDERS: &[&str] = &["skeleton"];

/// The command line.
#[derive(Args, Debug, Clone)]
pub struct Cli {
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

/// The command line of `genplane ccm-e2e`.
pub fn command() -> Command {
    Cli::augment_args(Command::new("ccm-e2e").about(
        "Run the conformance suite for external cloud controller managers against a cluster",
    ))
}

impl Cli {
    /// The selection the flags make.
    pub fn selection(&self) -> anyhow::Result<Selection> {
        let regexes = |list: &[String], flag: &str| -> anyhow::Result<Vec<Regex>> {
            list.iter()
                .map(|r| Regex::new(r).with_context(|| format!("--{flag} {r:?}")))
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
                .map_err(|e| anyhow::anyhow!("--label-filter: {e}"))?,
        })
    }

    /// The settings the flags make.
    pub fn settings(&self) -> anyhow::Result<Settings> {
        anyhow::ensure!(
            self.timeout_scale > 0.0 && self.timeout_scale.is_finite(),
            "--timeout-scale must be a positive number, not {}",
            self.timeout_scale
        );
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
    pub fn provider(&self) -> anyhow::Result<Arc<dyn Provider>> {
        let config =
            match &self.provider_config {
                Some(path) => {
                    let text = std::fs::read_to_string(path)
                        .with_context(|| format!("reading --provider-config {}", path.display()))?;
                    Some(genplane_apimachinery::yaml::from_str(&text).map_err(|e| {
                        anyhow::anyhow!("--provider-config {}: {e}", path.display())
                    })?)
                }
                None => None,
            };
        if let Some(path) = self.provider.strip_prefix("exec:") {
            anyhow::ensure!(!path.is_empty(), "--provider exec: needs a program path");
            return Ok(Arc::new(
                ExecProvider::new(path, config).with_timeout(self.provider_timeout),
            ));
        }
        match self.provider.as_str() {
            "skeleton" => Ok(Arc::new(NullProvider)),
            other => anyhow::bail!(
                "unknown provider {other:?}: use exec:PATH for a plugin, or one of {BUILT_IN_PROVIDERS:?}"
            ),
        }
    }
}

/// The tests `selection` picks, in suite order.
pub fn selected(selection: &Selection) -> Vec<&'static Spec> {
    SPECS.iter().filter(|s| selection.selects(s)).collect()
}

/// The `--list` text of `specs`.
pub fn list(specs: &[&Spec]) -> String {
    let mut text = String::new();
    for spec in specs {
        text.push_str(spec.name);
        text.push('\n');
        text.push_str(&format!(
            "    labels: {}\n    needs: {}\n",
            if spec.labels.is_empty() {
                "-".to_owned()
            } else {
                spec.labels.join(", ")
            },
            suite::needs(spec)
        ));
    }
    text.push_str(&format!("{} of {} tests\n", specs.len(), SPECS.len()));
    text
}

/// A client for `kubeconfig` and `context`.
pub async fn client(
    kubeconfig: &std::path::Path,
    context: Option<&str>,
) -> anyhow::Result<kube::Client> {
    let loaded = kube::config::Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("reading {}", kubeconfig.display()))?;
    let options = kube::config::KubeConfigOptions {
        context: context.map(str::to_owned),
        ..Default::default()
    };
    let config = kube::Config::from_custom_kubeconfig(loaded, &options)
        .await
        .with_context(|| format!("using {}", kubeconfig.display()))?;
    Ok(kube::Client::try_from(config)?)
}

/// Runs the suite as the flags say, printing progress to `progress`; the report (written
/// where the flags say).
pub async fn run_suite(
    cli: &Cli,
    kubeconfig: &std::path::Path,
    progress: Progress,
    interrupt: impl std::future::Future<Output = ()>,
) -> anyhow::Result<Report> {
    run_suite_with(cli, kubeconfig, progress, None, interrupt).await
}

/// [`run_suite`], telling `status` how the run stands as tests start and end.
pub async fn run_suite_with(
    cli: &Cli,
    kubeconfig: &std::path::Path,
    progress: Progress,
    status: Option<StatusHook>,
    interrupt: impl std::future::Future<Output = ()>,
) -> anyhow::Result<Report> {
    let specs = selected(&cli.selection()?);
    let mut settings = cli.settings()?;
    settings.status = status;
    let provider = cli.provider()?;
    let client = client(kubeconfig, cli.context.as_deref()).await?;
    let report = suite::run(
        client,
        provider,
        specs,
        SPECS.len(),
        settings,
        progress,
        interrupt,
    )
    .await?;
    let mut targets: Vec<PathBuf> = cli.junit_report.iter().cloned().collect();
    if let Some(dir) = &cli.report_dir {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        targets.push(dir.join("junit_01.xml"));
    }
    for path in targets {
        std::fs::write(&path, report.junit())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let (Some(dir), Some(xml)) = (&cli.report_dir, report.upgrades_junit()) {
        let path = dir.join(UPGRADES_JUNIT);
        std::fs::write(&path, xml).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(report)
}

/// Runs `genplane ccm-e2e`.
pub fn run(matches: &ArgMatches, process: &Process) -> anyhow::Result<()> {
    let cli = Cli::from_arg_matches(matches)?;
    if cli.list {
        print!("{}", list(&selected(&cli.selection()?)));
        return Ok(());
    }
    let kubeconfig = genplane_controller::client::kubeconfig_path(
        cli.kubeconfig.as_deref(),
        process.var("KUBECONFIG"),
        process.var("HOME"),
    )
    .context("no --kubeconfig, KUBECONFIG or HOME")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    // On a terminal one status line follows the run; elsewhere (CI) plain lines only.
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stdout())
        .then(|| display::Terminal::new(Box::new(std::io::stdout())));
    let (progress, status) = match &terminal {
        Some(terminal) => {
            let (progress, status) = terminal.hooks();
            (progress, Some(status))
        }
        None => (Arc::new(|line: &str| println!("{line}")) as Progress, None),
    };
    let report = runtime.block_on(run_suite_with(&cli, &kubeconfig, progress, status, async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }));
    if let Some(terminal) = &terminal {
        terminal.finish();
    }
    let report = report?;
    println!("{}", report.summary());
    anyhow::ensure!(report.success(), "the suite did not pass");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The README shows `--list` as it is: every test, its labels and needs.
    #[test]
    fn the_readme_lists_every_test() {
        let readme = include_str!("../../../README.md");
        let all: Vec<&Spec> = SPECS.iter().collect();
        let listed: String = list(&all)
            .lines()
            .map(|line| format!("   {line}\n"))
            .collect();
        assert!(
            readme.contains(&listed),
            "README.md's `--list` example is not current; it is:\n{listed}"
        );
    }
}
