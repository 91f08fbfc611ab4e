//! Running the tests: selection (`--focus`, `--skip`, `--label-filter`), skipping by
//! capability, a namespace per test, parallel and serial runs, timeouts, clean-up (also when
//! interrupted), failure dumps and the report (progress lines, summary, JUnit).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use genplane_apimachinery::errors::chain;
use genplane_cloudprovider::{Capabilities, Capability, Provider};
use k8s_openapi::api::core::v1::{Event, Namespace, Service};
use kube::api::{Api, DeleteParams, ListParams};
use kube::{Client, ResourceExt as _};
use regex::Regex;
use serde_json::json;

use crate::framework::{Ctx, create_namespace, lock, timeouts};
pub use crate::results::{Outcome, TestResult, UpgradeReport, missing_reason};
use crate::specs::Spec;

/// Why a run could not be made, or its reports (and a failed test's dump) not written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A label filter is not Ginkgo's syntax; where it is wrong.
    #[error("{0}")]
    LabelFilter(String),
    /// The provider did not say what it can do.
    #[error("asking the provider for its capabilities")]
    Capabilities(#[source] genplane_cloudprovider::Error),
    /// `--clean-start` could not list the namespaces an earlier run left.
    #[error("--clean-start: listing the namespaces of earlier runs")]
    ListLeftovers(#[source] kube::Error),
    /// `--clean-start` deleted namespaces an earlier run left, and they did not go in time.
    #[error("--clean-start: namespaces {namespaces:?} still exist after {waited:?}")]
    LeftoversStay {
        /// The namespaces still there.
        namespaces: Vec<String>,
        /// How long they were waited for.
        waited: Duration,
    },
    /// A request to the cluster's API failed.
    #[error(transparent)]
    Api(#[from] kube::Error),
    /// A folder for reports or a failure dump could not be made.
    #[error("creating {}", path.display())]
    CreateDir {
        /// The folder.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A report, or a file of a failure dump, could not be written.
    #[error("writing {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// What was listed could not be written as JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// Which tests to run.
#[derive(Debug, Default, Clone)]
pub struct Selection {
    /// Run only tests whose full name matches one of these (all when empty).
    pub focus: Vec<Regex>,
    /// Do not run tests whose full name matches one of these.
    pub skip: Vec<Regex>,
    /// Run only tests whose labels satisfy this.
    pub labels: Option<LabelFilter>,
}

impl Selection {
    /// Whether `spec` is selected.
    pub fn selects(&self, spec: &Spec) -> bool {
        (self.focus.is_empty() || self.focus.iter().any(|r| r.is_match(spec.name)))
            && !self.skip.iter().any(|r| r.is_match(spec.name))
            && self.labels.as_ref().is_none_or(|f| f.matches(spec.labels))
    }
}

/// A label filter, as Ginkgo's `--label-filter`: labels combined with `&&`, `||` (or `,`),
/// `!` and parentheses; labels match case-insensitively.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelFilter {
    /// This label.
    Label(String),
    /// Not this.
    Not(Box<LabelFilter>),
    /// Both.
    And(Box<LabelFilter>, Box<LabelFilter>),
    /// Either.
    Or(Box<LabelFilter>, Box<LabelFilter>),
}

impl LabelFilter {
    /// Parses `text`; the error says where it is wrong.
    pub fn parse(text: &str) -> Result<Self, Error> {
        let tokens = tokenize(text);
        let mut at = 0;
        let filter = parse_or(&tokens, &mut at).map_err(Error::LabelFilter)?;
        if at != tokens.len() {
            return Err(Error::LabelFilter(format!(
                "unexpected {:?} in label filter {text:?}",
                tokens[at]
            )));
        }
        Ok(filter)
    }

    /// Whether `labels` satisfy it.
    pub fn matches(&self, labels: &[&str]) -> bool {
        match self {
            LabelFilter::Label(l) => labels.iter().any(|x| x.eq_ignore_ascii_case(l)),
            LabelFilter::Not(f) => !f.matches(labels),
            LabelFilter::And(a, b) => a.matches(labels) && b.matches(labels),
            LabelFilter::Or(a, b) => a.matches(labels) || b.matches(labels),
        }
    }
}

fn tokenize(text: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut label = String::new();
    let mut chars = text.chars().peekable();
    let flush = |label: &mut String, tokens: &mut Vec<String>| {
        if !label.trim().is_empty() {
            tokens.push(label.trim().to_owned());
        }
        label.clear();
    };
    while let Some(c) = chars.next() {
        match c {
            '(' | ')' | '!' | ',' => {
                flush(&mut label, &mut tokens);
                tokens.push(if c == ',' {
                    "||".to_owned()
                } else {
                    c.to_string()
                });
            }
            '&' | '|' if chars.peek() == Some(&c) => {
                chars.next();
                flush(&mut label, &mut tokens);
                tokens.push(format!("{c}{c}"));
            }
            _ => label.push(c),
        }
    }
    flush(&mut label, &mut tokens);
    tokens
}

fn parse_or(tokens: &[String], at: &mut usize) -> Result<LabelFilter, String> {
    let mut left = parse_and(tokens, at)?;
    while tokens.get(*at).map(String::as_str) == Some("||") {
        *at += 1;
        left = LabelFilter::Or(Box::new(left), Box::new(parse_and(tokens, at)?));
    }
    Ok(left)
}

fn parse_and(tokens: &[String], at: &mut usize) -> Result<LabelFilter, String> {
    let mut left = parse_not(tokens, at)?;
    while tokens.get(*at).map(String::as_str) == Some("&&") {
        *at += 1;
        left = LabelFilter::And(Box::new(left), Box::new(parse_not(tokens, at)?));
    }
    Ok(left)
}

fn parse_not(tokens: &[String], at: &mut usize) -> Result<LabelFilter, String> {
    let token = tokens.get(*at).ok_or("the label filter ends too early")?;
    *at += 1;
    match token.as_str() {
        "!" => Ok(LabelFilter::Not(Box::new(parse_not(tokens, at)?))),
        "(" => {
            let inner = parse_or(tokens, at)?;
            if tokens.get(*at).map(String::as_str) != Some(")") {
                return Err("a '(' in the label filter is not closed".to_owned());
            }
            *at += 1;
            Ok(inner)
        }
        ")" | "&&" | "||" => Err(format!("unexpected {token:?} in the label filter")),
        label => Ok(LabelFilter::Label(label.to_owned())),
    }
}

/// How to run.
#[derive(Debug, Clone)]
pub struct Settings {
    /// How many non-serial tests run at once.
    pub parallel: usize,
    /// How long the whole run may take.
    pub suite_timeout: Duration,
    /// The factor upstream's timeouts are multiplied by.
    pub scale: f64,
    /// Delete each test's namespace after it.
    pub delete_namespace: bool,
    /// ... also when it failed.
    pub delete_namespace_on_failure: bool,
    /// Write the namespace's objects and events and the provider's load balancers to
    /// `report_dir` when a test fails.
    pub dump_on_failure: bool,
    /// Where reports and dumps go.
    pub report_dir: Option<PathBuf>,
    /// Walk the tests without running them.
    pub dry_run: bool,
    /// The version the upgrade tests go to.
    pub upgrade_target: Option<String>,
    /// The address the external-IP test gives its Service.
    pub external_ip: String,
    /// Before the tests, delete the namespaces an earlier run left (those labelled
    /// [`NAMESPACE_LABEL`]), with their Services and so their load balancers.
    pub clean_start: bool,
    /// Told how the run stands whenever a test starts or ends (the terminal's status line).
    pub status: Option<StatusHook>,
}

pub use crate::framework::NAMESPACE_LABEL;

/// How a run stands.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// The tests selected.
    pub selected: usize,
    /// The tests running now, by name.
    pub running: Vec<&'static str>,
    /// How many passed.
    pub passed: usize,
    /// How many failed (or were stopped).
    pub failed: usize,
    /// How many were skipped.
    pub skipped: usize,
    /// Since the run started.
    pub elapsed: Duration,
}

/// What is told how a run stands ([`Settings::status`]).
#[derive(Clone)]
pub struct StatusHook(pub Arc<dyn Fn(&Tally) + Send + Sync>);

impl std::fmt::Debug for StatusHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StatusHook")
    }
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            parallel: 1,
            suite_timeout: Duration::from_secs(3600),
            scale: 1.0,
            delete_namespace: true,
            delete_namespace_on_failure: true,
            dump_on_failure: false,
            report_dir: None,
            dry_run: false,
            upgrade_target: None,
            external_ip: "203.0.113.250".to_owned(),
            clean_start: false,
            status: None,
        }
    }
}

/// The results of a run.
#[derive(Debug, Clone)]
pub struct Report {
    /// The results, in the order of the suite.
    pub results: Vec<TestResult>,
    /// How many tests the suite has (selected or not).
    pub total: usize,
    /// How long the run took.
    pub duration: Duration,
    /// Why the run stopped early, if it did.
    pub stopped: Option<String>,
    /// What the upgrade tests found, one per upgrade run, in the order they ran.
    pub upgrades: Vec<UpgradeReport>,
}

fn count(results: &[TestResult], test: impl Fn(&Outcome) -> bool) -> usize {
    results.iter().filter(|r| test(&r.outcome)).count()
}

impl Report {
    /// Whether CI may call it a success: nothing failed and the run was not stopped.
    pub fn success(&self) -> bool {
        self.stopped.is_none()
            && count(&self.results, |o| {
                matches!(o, Outcome::Failed(_) | Outcome::Stopped(_))
            }) == 0
    }

    /// The result of the test named `name`.
    pub fn outcome(&self, name: &str) -> Option<&Outcome> {
        self.results
            .iter()
            .find(|r| r.name == name)
            .map(|r| &r.outcome)
    }

    /// The summary printed at the end.
    pub fn summary(&self) -> String {
        let passed = count(&self.results, |o| *o == Outcome::Passed);
        let failed = count(&self.results, |o| matches!(o, Outcome::Failed(_)));
        let skipped = count(&self.results, |o| matches!(o, Outcome::Skipped(_)));
        let stopped = count(&self.results, |o| matches!(o, Outcome::Stopped(_)));
        let would = count(&self.results, |o| *o == Outcome::DryRun);
        let mut text = String::new();
        if let Some(why) = &self.stopped {
            let _ = writeln!(text, "Stopped: {why}");
        }
        for result in &self.results {
            if let Outcome::Failed(message) = &result.outcome {
                let _ = writeln!(
                    text,
                    "FAILED {}\n    {}",
                    result.name,
                    message.replace('\n', "\n    ")
                );
            }
        }
        let _ = write!(
            text,
            "Ran {} of {} tests in {:.1}s: {passed} passed, {failed} failed, {skipped} skipped",
            self.results.len() - skipped - would,
            self.total,
            self.duration.as_secs_f64()
        );
        if stopped > 0 {
            let _ = write!(text, ", {stopped} stopped");
        }
        if would > 0 {
            let _ = write!(text, ", {would} would run (dry run)");
        }
        let _ = write!(
            text,
            "; {}",
            if self.success() { "SUCCESS" } else { "FAIL" }
        );
        text
    }

    /// The JUnit XML CI systems read.
    pub fn junit(&self) -> String {
        junit(
            "genplane ccm-e2e",
            &[JunitSuite {
                name: "ccm-e2e",
                classname: "ccm-e2e",
                results: &self.results,
                duration: self.duration,
            }],
        )
    }

    /// The JUnit XML of the upgrade tests (upstream's `junit_upgrades.xml`): a test suite per
    /// upgrade run, with a test case for the upgrade and one per upgrade test; `None` when
    /// no upgrade ran.
    pub fn upgrades_junit(&self) -> Option<String> {
        if self.upgrades.is_empty() {
            return None;
        }
        let suites: Vec<JunitSuite<'_>> = self
            .upgrades
            .iter()
            .map(|u| JunitSuite {
                name: u.name,
                classname: "upgrade_tests",
                results: &u.results,
                duration: u.duration,
            })
            .collect();
        Some(junit("genplane ccm-e2e upgrades", &suites))
    }

    /// Writes the JUnit XML to `junit_report`, and to `junit_01.xml` in `report_dir` (made
    /// when missing) with the upgrade tests' in [`UPGRADES_JUNIT`] there, when upgrade tests
    /// ran.
    pub fn write_junit(
        &self,
        junit_report: Option<&Path>,
        report_dir: Option<&Path>,
    ) -> Result<(), Error> {
        let mut targets: Vec<PathBuf> = junit_report.into_iter().map(Path::to_owned).collect();
        if let Some(dir) = report_dir {
            create_dir(dir)?;
            targets.push(dir.join("junit_01.xml"));
        }
        for path in targets {
            write_file(path, self.junit())?;
        }
        if let (Some(dir), Some(xml)) = (report_dir, self.upgrades_junit()) {
            write_file(dir.join(UPGRADES_JUNIT), xml)?;
        }
        Ok(())
    }
}

/// Makes the folder `dir` (and those above it) unless it exists.
fn create_dir(dir: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(dir).map_err(|source| Error::CreateDir {
        path: dir.to_owned(),
        source,
    })
}

/// Writes `contents` to the file `path`.
fn write_file(path: PathBuf, contents: impl AsRef<[u8]>) -> Result<(), Error> {
    std::fs::write(&path, contents).map_err(|source| Error::Write { path, source })
}

/// The file in `--report-dir` the upgrade tests' results go to when upgrade tests ran
/// (upstream's `junit_<prefix>upgrades.xml`, with no prefix).
pub const UPGRADES_JUNIT: &str = "junit_upgrades.xml";

/// One `<testsuite>` of a JUnit file.
struct JunitSuite<'a> {
    name: &'a str,
    classname: &'a str,
    results: &'a [TestResult],
    duration: Duration,
}

/// The `tests`, `failures`, `errors`, `skipped` and `time` attributes of `results`.
fn junit_counts<'a>(
    results: impl Iterator<Item = &'a TestResult> + Clone,
    time: Duration,
) -> String {
    let failures = results
        .clone()
        .filter(|r| matches!(r.outcome, Outcome::Failed(_) | Outcome::Stopped(_)))
        .count();
    let skipped = results
        .clone()
        .filter(|r| matches!(r.outcome, Outcome::Skipped(_) | Outcome::DryRun))
        .count();
    format!(
        "tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\" time=\"{:.3}\"",
        results.count(),
        time.as_secs_f64()
    )
}

/// A JUnit file named `title` of `suites`.
fn junit(title: &str, suites: &[JunitSuite<'_>]) -> String {
    let total: Duration = suites.iter().map(|s| s.duration).sum();
    let mut xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"{}\" {}>\n",
        escape(title),
        junit_counts(suites.iter().flat_map(|s| s.results.iter()), total)
    );
    for suite in suites {
        let _ = writeln!(
            xml,
            "  <testsuite name=\"{}\" {}>",
            escape(suite.name),
            junit_counts(suite.results.iter(), suite.duration)
        );
        for result in suite.results {
            let _ = write!(
                xml,
                "    <testcase name=\"{}\" classname=\"{}\" time=\"{:.3}\">",
                escape(result.name),
                escape(suite.classname),
                result.duration.as_secs_f64()
            );
            match &result.outcome {
                Outcome::Passed => {}
                Outcome::Failed(message) | Outcome::Stopped(message) => {
                    let _ = write!(
                        xml,
                        "\n      <failure message=\"{}\" type=\"failed\">{}</failure>",
                        escape(message),
                        escape(message)
                    );
                }
                Outcome::Skipped(reason) => {
                    let _ = write!(xml, "\n      <skipped message=\"{}\"/>", escape(reason));
                }
                Outcome::DryRun => xml.push_str("\n      <skipped message=\"dry run\"/>"),
            }
            if !result.steps.is_empty() {
                let _ = write!(
                    xml,
                    "\n      <system-out>{}</system-out>",
                    escape(&result.steps.join("\n"))
                );
            }
            if result.outcome != Outcome::Passed || !result.steps.is_empty() {
                xml.push_str("\n    ");
            }
            xml.push_str("</testcase>\n");
        }
        xml.push_str("  </testsuite>\n");
    }
    xml.push_str("</testsuites>\n");
    xml
}

/// `text` escaped for XML attributes and text.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if c.is_control() && c != '\n' && c != '\t' => {}
            c => out.push(c),
        }
    }
    out
}

/// Why a test is skipped by `capabilities`, if it is.
pub fn skip_reason(spec: &Spec, capabilities: &Capabilities) -> Option<String> {
    missing_reason(capabilities, spec.needs)
}

/// Where progress lines go.
pub type Progress = Arc<dyn Fn(&str) + Send + Sync>;

/// What the running tests share.
struct Shared {
    client: Client,
    provider: Arc<dyn Provider>,
    capabilities: Capabilities,
    settings: Settings,
    progress: Progress,
    results: Mutex<BTreeMap<usize, TestResult>>,
    /// Namespaces made and not yet cleaned up.
    live: Arc<Mutex<BTreeSet<String>>>,
    /// What the upgrade tests found.
    upgrades: Arc<Mutex<Vec<UpgradeReport>>>,
    started: Mutex<BTreeMap<usize, Instant>>,
    /// How the run stands (`Tally::elapsed` is filled in when told).
    tally: Mutex<Tally>,
    /// When the run started.
    since: Instant,
}

impl Shared {
    /// Changes the tally and tells the status hook.
    fn tally(&self, change: impl FnOnce(&mut Tally)) {
        let now = {
            let mut tally = lock(&self.tally);
            change(&mut tally);
            tally.elapsed = self.since.elapsed();
            tally.clone()
        };
        if let Some(StatusHook(hook)) = &self.settings.status {
            hook(&now);
        }
    }
}

/// Runs `specs` (the selected tests, `total` in the suite) against the cluster of `client`
/// with `provider`, until done, `interrupt` completes (Ctrl-C) or the suite times out; in
/// both last cases the namespaces of running tests are cleaned up before it returns.
pub async fn run(
    client: Client,
    provider: Arc<dyn Provider>,
    specs: Vec<&'static Spec>,
    total: usize,
    settings: Settings,
    progress: Progress,
    interrupt: impl Future<Output = ()>,
) -> Result<Report, Error> {
    let started = Instant::now();
    let capabilities = provider.capabilities().await.map_err(Error::Capabilities)?;
    let declared: Vec<&str> = capabilities.capabilities.iter().map(|c| c.name()).collect();
    progress(&format!(
        "ccm-e2e: {} of {total} tests selected; the provider declares: {}",
        specs.len(),
        if declared.is_empty() {
            "nothing".to_owned()
        } else {
            declared.join(", ")
        }
    ));
    let shared = Arc::new(Shared {
        client,
        provider,
        capabilities,
        settings: settings.clone(),
        progress: progress.clone(),
        results: Mutex::default(),
        live: Arc::default(),
        upgrades: Arc::default(),
        started: Mutex::default(),
        tally: Mutex::new(Tally {
            selected: specs.len(),
            ..Tally::default()
        }),
        since: started,
    });
    if settings.clean_start && !settings.dry_run {
        clean_start(&shared).await?;
    }
    let mut parallel = Vec::new();
    let mut serial = Vec::new();
    for (index, spec) in specs.iter().enumerate() {
        let outcome = match skip_reason(spec, &shared.capabilities) {
            Some(reason) => Some(Outcome::Skipped(reason)),
            None if settings.dry_run => Some(Outcome::DryRun),
            None => None,
        };
        match outcome {
            Some(outcome) => record(&shared, index, spec, outcome, Duration::ZERO, Vec::new()),
            None if spec.serial() => serial.push((index, *spec)),
            None => parallel.push((index, *spec)),
        }
    }
    let work = {
        let shared = shared.clone();
        async move {
            let mut running = tokio::task::JoinSet::new();
            let mut queue = parallel.into_iter();
            loop {
                while running.len() < shared.settings.parallel.max(1) {
                    let Some((index, spec)) = queue.next() else {
                        break;
                    };
                    running.spawn(run_one(shared.clone(), index, spec));
                }
                if running.join_next().await.is_none() {
                    break;
                }
            }
            for (index, spec) in serial {
                let mut alone = tokio::task::JoinSet::new();
                alone.spawn(run_one(shared.clone(), index, spec));
                alone.join_next().await;
            }
        }
    };
    let stopped = tokio::select! {
        () = work => None,
        () = interrupt => Some("interrupted".to_owned()),
        () = tokio::time::sleep(settings.suite_timeout) => {
            Some(format!("the suite timed out after {:?}", settings.suite_timeout))
        }
    };
    if let Some(why) = &stopped {
        progress(&format!("ccm-e2e: {why}; cleaning up"));
        let live: Vec<String> = lock(&shared.live).iter().cloned().collect();
        for namespace in live {
            let notes = clean_up(&shared, &namespace, true).await;
            for note in notes {
                progress(&format!("ccm-e2e: {note}"));
            }
        }
        let now = Instant::now();
        for (index, spec) in specs.iter().enumerate() {
            if lock(&shared.results).contains_key(&index) {
                continue;
            }
            let since = lock(&shared.started).get(&index).copied();
            let outcome = match since {
                Some(_) => Outcome::Stopped(format!("{why} while it ran")),
                None => Outcome::Skipped(format!("not run: {why}")),
            };
            let duration = since.map(|s| now - s).unwrap_or_default();
            record(&shared, index, spec, outcome, duration, Vec::new());
        }
    }
    let results = lock(&shared.results).values().cloned().collect();
    let upgrades = lock(&shared.upgrades).clone();
    Ok(Report {
        results,
        total,
        duration: started.elapsed(),
        stopped,
        upgrades,
    })
}

fn record(
    shared: &Shared,
    index: usize,
    spec: &'static Spec,
    outcome: Outcome,
    duration: Duration,
    steps: Vec<String>,
) {
    let line = match &outcome {
        Outcome::Passed => format!("PASS [{:.1}s] {}", duration.as_secs_f64(), spec.name),
        Outcome::Failed(m) => format!(
            "FAIL [{:.1}s] {}\n    {}",
            duration.as_secs_f64(),
            spec.name,
            m.replace('\n', "\n    ")
        ),
        Outcome::Skipped(r) => format!("SKIP {}: {r}", spec.name),
        Outcome::DryRun => format!("WOULD RUN {} (needs: {})", spec.name, needs(spec)),
        Outcome::Stopped(r) => format!(
            "STOPPED [{:.1}s] {}: {r}",
            duration.as_secs_f64(),
            spec.name
        ),
    };
    (shared.progress)(&line);
    shared.tally(|t| {
        t.running.retain(|name| *name != spec.name);
        match &outcome {
            Outcome::Passed => t.passed += 1,
            Outcome::Failed(_) | Outcome::Stopped(_) => t.failed += 1,
            Outcome::Skipped(_) | Outcome::DryRun => t.skipped += 1,
        }
    });
    lock(&shared.results).insert(
        index,
        TestResult {
            name: spec.name,
            outcome,
            duration,
            steps,
        },
    );
}

/// The capabilities `spec` needs, for people.
pub fn needs(spec: &Spec) -> String {
    if spec.needs.is_empty() {
        return "nothing".to_owned();
    }
    spec.needs
        .iter()
        .map(|c| c.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Runs one test in a namespace of its own, then dumps and cleans up.
async fn run_one(shared: Arc<Shared>, index: usize, spec: &'static Spec) {
    let started = Instant::now();
    lock(&shared.started).insert(index, started);
    shared.tally(|t| t.running.push(spec.name));
    let suffix: String = uuid::Uuid::new_v4()
        .simple()
        .to_string()
        .chars()
        .take(5)
        .collect();
    let namespace = format!("ccm-e2e-{index}-{suffix}");
    if let Err(error) = create_namespace(&shared.client, &namespace).await {
        let outcome = Outcome::Failed(chain(&error));
        record(&shared, index, spec, outcome, started.elapsed(), Vec::new());
        return;
    }
    lock(&shared.live).insert(namespace.clone());
    let mut ctx = Ctx::new(
        shared.client.clone(),
        namespace.clone(),
        shared.provider.clone(),
        shared.capabilities.clone(),
        shared.settings.scale,
    );
    ctx.upgrade_target = shared.settings.upgrade_target.clone();
    ctx.external_ip = shared.settings.external_ip.clone();
    ctx.live = shared.live.clone();
    ctx.upgrade_reports = shared.upgrades.clone();
    let limit = spec.timeout.mul_f64(shared.settings.scale);
    let outcome = match tokio::time::timeout(limit, (spec.body)(&ctx)).await {
        Ok(Ok(())) => Outcome::Passed,
        Ok(Err(error)) => match error.skipped() {
            Some(reason) => Outcome::Skipped(reason.to_owned()),
            None => Outcome::Failed(chain(&error)),
        },
        Err(_) => Outcome::Failed(format!("the test timed out after {limit:.1?}")),
    };
    let failed = matches!(outcome, Outcome::Failed(_));
    let mut steps = ctx.steps();
    if failed
        && shared.settings.dump_on_failure
        && let Some(dir) = &shared.settings.report_dir
    {
        // The test's namespace, and those of its upgrade tests.
        let children = ctx.children().into_iter().map(|child| {
            Ctx::new(
                shared.client.clone(),
                child,
                shared.provider.clone(),
                shared.capabilities.clone(),
                shared.settings.scale,
            )
        });
        for one in std::iter::once(&ctx).chain(children.collect::<Vec<_>>().iter()) {
            let target = dir.join(&one.namespace);
            match dump(one, &target).await {
                Ok(()) => steps.push(format!("dumped to {}", target.display())),
                Err(error) => steps.push(format!("dumping failed: {}", chain(&error))),
            }
        }
    }
    let delete = shared.settings.delete_namespace
        && (!failed || shared.settings.delete_namespace_on_failure);
    for child in ctx.children() {
        steps.extend(clean_up(&shared, &child, delete).await);
    }
    steps.extend(clean_up(&shared, &namespace, delete).await);
    record(&shared, index, spec, outcome, started.elapsed(), steps);
}

/// Deletes the Services of `namespace` (so that the CCM deletes their load balancers) and
/// waits until they are gone; then deletes the namespace when `delete`. Notes on what went
/// wrong.
/// `--clean-start`: deletes the namespaces an earlier run left (labelled
/// [`NAMESPACE_LABEL`]) as a test's are cleaned up, Services first so that their load
/// balancers go, and waits until they are gone.
async fn clean_start(shared: &Shared) -> Result<(), Error> {
    let namespaces: Api<Namespace> = Api::all(shared.client.clone());
    let selector = format!("{}={}", NAMESPACE_LABEL.0, NAMESPACE_LABEL.1);
    let listed = ListParams::default().labels(&selector);
    let left: Vec<String> = namespaces
        .list(&listed)
        .await
        .map_err(Error::ListLeftovers)?
        .items
        .iter()
        .map(|n| n.name_any())
        .collect();
    if left.is_empty() {
        (shared.progress)("ccm-e2e: --clean-start: no namespace left by an earlier run");
        return Ok(());
    }
    (shared.progress)(&format!(
        "ccm-e2e: --clean-start: deleting {} namespaces left by an earlier run: {}",
        left.len(),
        left.join(", ")
    ));
    for namespace in &left {
        for note in clean_up(shared, namespace, true).await {
            (shared.progress)(&format!("ccm-e2e: {note}"));
        }
    }
    let wait = timeouts::NAMESPACE_DELETE
        .mul_f64(shared.settings.scale)
        .max(Duration::from_secs(10));
    let deadline = Instant::now() + wait;
    loop {
        let still: Vec<String> = namespaces
            .list(&listed)
            .await?
            .items
            .iter()
            .map(|n| n.name_any())
            .filter(|n| left.contains(n))
            .collect();
        if still.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(Error::LeftoversStay {
                namespaces: still,
                waited: wait,
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn clean_up(shared: &Shared, namespace: &str, delete: bool) -> Vec<String> {
    let mut notes = Vec::new();
    let services: Api<Service> = Api::namespaced(shared.client.clone(), namespace);
    let wait = timeouts::LOAD_BALANCER_LAG
        .mul_f64(shared.settings.scale)
        .max(Duration::from_secs(5));
    let deadline = Instant::now() + wait;
    loop {
        let left = match services.list(&ListParams::default()).await {
            Ok(list) => list.items,
            Err(error) => {
                notes.push(format!(
                    "clean-up of {namespace}: listing Services: {error}"
                ));
                break;
            }
        };
        let doomed: Vec<&Service> = left
            .iter()
            .filter(|s| {
                delete || s.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer")
            })
            .collect();
        if doomed.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            let names: Vec<String> = doomed.iter().map(|s| s.name_any()).collect();
            notes.push(format!(
                "clean-up of {namespace}: Services {names:?} still exist after {wait:?} (are their load balancers stuck?)"
            ));
            break;
        }
        for service in doomed
            .iter()
            .filter(|s| s.metadata.deletion_timestamp.is_none())
        {
            let _ = services
                .delete(&service.name_any(), &DeleteParams::default())
                .await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    if delete {
        let namespaces: Api<Namespace> = Api::all(shared.client.clone());
        if let Err(error) = namespaces.delete(namespace, &DeleteParams::default()).await {
            notes.push(format!("clean-up: deleting namespace {namespace}: {error}"));
        }
    }
    lock(&shared.live).remove(namespace);
    notes
}

/// Writes the namespace's objects and events, and the provider's description of the load
/// balancers of its Services, into `dir`.
async fn dump(ctx: &Ctx, dir: &Path) -> Result<(), Error> {
    create_dir(dir)?;
    let write = |name: &str, value: serde_json::Value| -> Result<(), Error> {
        write_file(dir.join(name), serde_json::to_vec_pretty(&value)?)
    };
    let list = ListParams::default();
    let as_json = |r: Result<serde_json::Value, &kube::Error>| {
        r.unwrap_or_else(|e| json!({"error": e.to_string()}))
    };
    let services = ctx.services().list(&list).await;
    write(
        "services.json",
        as_json(services.as_ref().map(|l| json!(l.items))),
    )?;
    write(
        "pods.json",
        as_json(
            ctx.pods()
                .list(&list)
                .await
                .as_ref()
                .map(|l| json!(l.items)),
        ),
    )?;
    write(
        "deployments.json",
        as_json(
            ctx.deployments()
                .list(&list)
                .await
                .as_ref()
                .map(|l| json!(l.items)),
        ),
    )?;
    let events: Api<Event> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    write(
        "events.json",
        as_json(events.list(&list).await.as_ref().map(|l| json!(l.items))),
    )?;
    if ctx.capabilities.has(Capability::DescribeLoadBalancer) {
        let mut balancers = serde_json::Map::new();
        for service in services.map(|l| l.items).unwrap_or_default() {
            let reference = genplane_cloudprovider::ServiceRef {
                namespace: ctx.namespace.clone(),
                name: service.name_any(),
                uid: service.uid().unwrap_or_default(),
            };
            let described = match ctx.provider.describe_load_balancer(&reference).await {
                Ok(found) => json!(found),
                Err(error) => json!({"error": error.to_string()}),
            };
            balancers.insert(service.name_any(), described);
        }
        write("loadbalancers.json", serde_json::Value::Object(balancers))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_filters_read_as_ginkgo_does() {
        let filter = |text: &str| LabelFilter::parse(text).unwrap_or_else(|e| panic!("{e}"));
        let slow_lb = ["Feature:LoadBalancer", "Slow"];
        let serial = ["Serial", "Disruptive"];
        assert!(filter("Feature:LoadBalancer && !Serial").matches(&slow_lb));
        assert!(!filter("Feature:LoadBalancer && !Serial").matches(&serial));
        assert!(filter("serial, Conformance").matches(&serial));
        assert!(filter("!(Slow || Disruptive)").matches(&["Conformance"]));
        assert!(!filter("!(Slow || Disruptive)").matches(&slow_lb));
        assert!(LabelFilter::parse("Slow &&").is_err());
        assert!(LabelFilter::parse("(Slow").is_err());
    }

    #[test]
    fn junit_escapes_and_counts() {
        let result = |name, outcome| TestResult {
            name,
            outcome,
            duration: Duration::from_millis(1500),
            steps: vec!["STEP: <one> & two".into()],
        };
        let report = Report {
            results: vec![
                result("a [Slow]", Outcome::Passed),
                result("b", Outcome::Failed("x < \"y\"".into())),
                result("c", Outcome::Skipped("no LoadBalancer".into())),
            ],
            total: 4,
            duration: Duration::from_secs(3),
            stopped: None,
            upgrades: Vec::new(),
        };
        let xml = report.junit();
        assert!(
            xml.contains("tests=\"3\" failures=\"1\" errors=\"0\" skipped=\"1\""),
            "{xml}"
        );
        assert!(
            xml.contains("<failure message=\"x &lt; &quot;y&quot;\""),
            "{xml}"
        );
        assert!(
            xml.contains("<skipped message=\"no LoadBalancer\"/>"),
            "{xml}"
        );
        assert!(xml.contains("STEP: &lt;one&gt; &amp; two"), "{xml}");
        assert!(!report.success());
        assert!(
            report
                .summary()
                .ends_with("Ran 2 of 4 tests in 3.0s: 1 passed, 1 failed, 1 skipped; FAIL"),
            "{}",
            report.summary()
        );
        assert_eq!(report.upgrades_junit(), None, "no upgrade ran");
    }

    #[test]
    fn the_upgrades_junit_has_a_suite_per_upgrade() {
        let result = |name, outcome| TestResult {
            name,
            outcome,
            duration: Duration::from_millis(500),
            steps: Vec::new(),
        };
        let report = Report {
            results: Vec::new(),
            total: 27,
            duration: Duration::from_secs(3),
            stopped: None,
            upgrades: vec![
                UpgradeReport {
                    name: "Master upgrade",
                    results: vec![
                        result("[sig-cloud-provider-gcp] master-upgrade", Outcome::Passed),
                        result("service-upgrade", Outcome::Failed("gone".into())),
                    ],
                    duration: Duration::from_secs(1),
                },
                UpgradeReport {
                    name: "Cluster upgrade",
                    results: vec![result("service-upgrade", Outcome::Skipped("no LB".into()))],
                    duration: Duration::from_secs(2),
                },
            ],
        };
        let xml = report.upgrades_junit().unwrap_or_default();
        assert!(
            xml.contains("<testsuites name=\"genplane ccm-e2e upgrades\" tests=\"3\" failures=\"1\" errors=\"0\" skipped=\"1\" time=\"3.000\">"),
            "{xml}"
        );
        assert!(
            xml.contains("<testsuite name=\"Master upgrade\" tests=\"2\" failures=\"1\" errors=\"0\" skipped=\"0\" time=\"1.000\">\n    <testcase name=\"[sig-cloud-provider-gcp] master-upgrade\" classname=\"upgrade_tests\" time=\"0.500\"></testcase>\n    <testcase name=\"service-upgrade\" classname=\"upgrade_tests\" time=\"0.500\">\n      <failure message=\"gone\""),
            "{xml}"
        );
        assert!(
            xml.contains("<testsuite name=\"Cluster upgrade\" tests=\"1\" failures=\"0\" errors=\"0\" skipped=\"1\""),
            "{xml}"
        );
    }
}
