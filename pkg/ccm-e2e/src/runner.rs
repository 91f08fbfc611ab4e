//! What `genplane ccm-e2e` does with its [`Options`]: the tests they select ([`selected`],
//! `--list` prints [`list`]), a client of the cluster, the run ([`run_suite`]) and the JUnit
//! files it writes; on standard output, with a status line on a terminal ([`run_printing`]).

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::display::Terminal;
use crate::options::{self, Options};
use crate::specs::{SPECS, Spec};
use crate::suite::{self, Progress, Report, Selection, StatusHook};

/// Why a run could not be made, or its reports not written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The flags do not make a run.
    #[error(transparent)]
    Options(#[from] options::Error),
    /// The kubeconfig could not be read.
    #[error("reading {}", path.display())]
    ReadKubeconfig {
        /// The kubeconfig.
        path: PathBuf,
        /// Why.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// The kubeconfig (or its context) could not be used.
    #[error("using {}", path.display())]
    UseKubeconfig {
        /// The kubeconfig.
        path: PathBuf,
        /// Why.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// The client of the cluster could not be made.
    #[error(transparent)]
    Client(#[from] kube::Error),
    /// The run could not be made, or its reports not written.
    #[error(transparent)]
    Suite(#[from] suite::Error),
    /// The runtime of [`run_until_interrupted`] could not be started.
    #[error("starting the runtime")]
    Runtime(#[source] std::io::Error),
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
pub async fn client(kubeconfig: &Path, context: Option<&str>) -> Result<kube::Client, Error> {
    let loaded = kube::config::Kubeconfig::read_from(kubeconfig).map_err(|source| {
        Error::ReadKubeconfig {
            path: kubeconfig.to_owned(),
            source,
        }
    })?;
    let options = kube::config::KubeConfigOptions {
        context: context.map(str::to_owned),
        ..Default::default()
    };
    let config = kube::Config::from_custom_kubeconfig(loaded, &options)
        .await
        .map_err(|source| Error::UseKubeconfig {
            path: kubeconfig.to_owned(),
            source,
        })?;
    Ok(kube::Client::try_from(config)?)
}

/// Runs the suite as `options` say against the cluster of `kubeconfig`, printing progress to
/// `progress`, until done or `interrupt` completes; the report (written where the flags say).
pub async fn run_suite(
    options: &Options,
    kubeconfig: &Path,
    progress: Progress,
    interrupt: impl Future<Output = ()>,
) -> Result<Report, Error> {
    run_suite_with(options, kubeconfig, progress, None, interrupt).await
}

/// [`run_suite`], telling `status` how the run stands as tests start and end.
pub async fn run_suite_with(
    options: &Options,
    kubeconfig: &Path,
    progress: Progress,
    status: Option<StatusHook>,
    interrupt: impl Future<Output = ()>,
) -> Result<Report, Error> {
    let specs = selected(&options.selection()?);
    let mut settings = options.settings()?;
    settings.status = status;
    let provider = options.provider()?;
    let client = client(kubeconfig, options.context.as_deref()).await?;
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
    report.write_junit(
        options.junit_report.as_deref(),
        options.report_dir.as_deref(),
    )?;
    Ok(report)
}

/// [`run_suite`] as the command runs it, printing to standard output: on a terminal, the
/// progress lines above one status line ([`Terminal`]), removed before it returns;
/// elsewhere (CI) plain lines only.
pub async fn run_printing(
    options: &Options,
    kubeconfig: &Path,
    interrupt: impl Future<Output = ()>,
) -> Result<Report, Error> {
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stdout())
        .then(|| Terminal::new(Box::new(std::io::stdout())));
    let (progress, status) = match &terminal {
        Some(terminal) => {
            let (progress, status) = terminal.hooks();
            (progress, Some(status))
        }
        None => (Arc::new(|line: &str| println!("{line}")) as Progress, None),
    };
    let report = run_suite_with(options, kubeconfig, progress, status, interrupt).await;
    if let Some(terminal) = &terminal {
        terminal.finish();
    }
    report
}

/// The `ccm-e2e` applet's run: [`run_printing`] on a runtime of its own, until the suite ends
/// or the process gets SIGINT (the tests running then are stopped and reported as such).
///
/// It is not generic and not `async`, so the suite is compiled here once: an `async` function's
/// body is compiled again in each crate that polls it, and optimized builds do not share that
/// code between crates.
pub fn run_until_interrupted(options: &Options, kubeconfig: &Path) -> Result<Report, Error> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(Error::Runtime)?;
    runtime.block_on(run_printing(options, kubeconfig, async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }))
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
