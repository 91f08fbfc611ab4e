//! Thousands of real-world-shaped CRDs in one server (`--only crd-scale`, run by
//! `hack/bench/crdscale.sh`; issue #43): what a cloud provider's full CRD set costs the API
//! server, the load that kube-apiserver is known to carry badly (about 13 MB of memory per CRD,
//! minutes of CPU after 700 CRDs are posted at once while OpenAPI is rebuilt).
//!
//! The set ([`generate`]): `--crd-scale-count` CRDs (2,000 by default, a provider's full set)
//! shaped like Crossplane providers' (two versions, status subresource, printer columns, nested
//! parameters repeated in `forProvider`, `initProvider` and `atProvider`), sized after a real
//! provider's distribution, `--crd-scale-cel-fraction` of them with CEL rules, deterministic
//! from `--crd-scale-seed`. Its own statistics are printed beside the real distribution's.
//!
//! Each mode runs on a fresh SQLite server (`--crd-scale-role`, `all-in-one` by default as the
//! issue measured it; `apiserver` for the API server alone), with one watch of the CRDs open
//! throughout (as a package manager or `kubectl wait` follows them), which is what tells when
//! each CRD became `Established` or went away:
//!
//! 1. **all at once**: every CRD POSTed with `--crd-scale-in-flight` requests in flight; the
//!    time from the first POST until every CRD is `Established`; VmRSS idle before (settled),
//!    its peak from the first POST until the settled reading (VmHWM reset through
//!    `/proc/<pid>/clear_refs`, and VmRSS sampled every 50 ms), and settled after (once it
//!    stops moving, after the first discovery and OpenAPI v3 requests were answered, since no
//!    real client set goes without them), and steady: `--crd-scale-window` seconds (95) after
//!    the last `Established`, once the server's watch window (the last 75 seconds of events,
//!    trimmed every 15, as kube-apiserver's watch cache keeps them) has let go of the burst's
//!    events. The per-CRD figure is (steady − idle) / count: what serving the CRDs costs, not
//!    what the last minute's events cost.
//!    Then, on that server:
//!    - discovery, legacy (`/apis`, `/apis/<group>/<version>`, and every group-version as a
//!      kubectl cache fill reads them) and aggregated (`/apis` as `APIGroupDiscoveryList`
//!      v2), the first request right after the last `Established`, and warm (median of
//!      several); the answers are checked to list every generated group;
//!    - OpenAPI: the `/openapi/v3` index and a few `/openapi/v3/apis/<group>/<version>`
//!      documents (through the index's URLs, as clients follow them), first and warm;
//!      `/openapi/v2`, first and warm, its size, and the server's peak RSS while it built and
//!      served it against its RSS before;
//!    - custom resources of `--crd-scale-samples` kinds: a create, GETs as JSON and as the
//!      Table `kubectl get` asks for (warm: median of several), and a LIST; an object missing
//!      a required parameter is checked to be refused (by CEL where the CRD has rules);
//!    - every CRD deleted: the time until all are gone, and VmRSS settled right after and
//!      steady (the window passed), against idle.
//! 2. **in batches** of `--crd-scale-batch` (0 skips it): each batch POSTed, then its CRDs
//!    waited for until `Established`, as an installer applying a set in parts would; the same
//!    memory figures and the deletion.
//!
//! The end is a table of every figure with the targets beside it, marked met or not.
//! A server that is slow or fails is reported: every request has a timeout, and CRDs not
//! `Established` (or not gone) by `--crd-scale-timeout` are counted and reported as such. A
//! server whose RSS passes `--crd-scale-max-rss-mib` (by default half the memory available)
//! is killed, and what the mode had reached (CRDs `Established`, RSS per CRD) is reported:
//! at several MiB per CRD, a full set would otherwise exhaust a shared machine.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::{Method, StatusCode};
use serde_json::{Value, json};

use crate::client::Client;
use crate::process::{Server, memory, settled};
use crate::{Args, create_namespace, mib, ms};
use genplane_test_support::crd_set::{
    self as generate, GeneratedCrd, OLD_VERSION, SetOptions, VERSION,
};

/// The CustomResourceDefinition collection.
const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
/// The namespace of the namespaced sample objects.
const NAMESPACE: &str = "bench-crd-scale";
/// How long any one request may take before the run fails with it.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(180);
/// How often the server's VmRSS is sampled while a peak is measured.
const SAMPLE_EVERY: Duration = Duration::from_millis(50);
/// What kubectl asks `/apis` for: aggregated discovery, else the legacy list.
const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,\
                          application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,\
                          application/json";
/// What `kubectl get` asks for.
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
/// Warm latencies are the median of this many requests.
const WARM: usize = 7;

/// When the part started, for the progress notes.
static STARTED: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();

/// A progress note on stderr, with the time since the part started.
fn note(what: &str) {
    let started = STARTED.get_or_init(Instant::now);
    eprintln!(
        "crd-scale [{:6.1} s] {what}",
        started.elapsed().as_secs_f64()
    );
}

/// How long memory may take to settle before it is read anyway.
fn settle_limit(args: &Args) -> Duration {
    if args.quick {
        Duration::from_secs(4)
    } else {
        Duration::from_secs(30)
    }
}

/// One row of the final table.
#[derive(Debug)]
struct Row {
    label: String,
    value: String,
    target: String,
    met: Option<bool>,
}

/// The figures, in the order measured, printed at the end.
#[derive(Debug, Default)]
struct Report {
    rows: Vec<Row>,
}

impl Report {
    fn section(&mut self, title: impl Into<String>) {
        self.rows.push(Row {
            label: title.into(),
            value: String::new(),
            target: String::new(),
            met: None,
        });
    }

    fn figure(&mut self, label: impl Into<String>, value: impl Into<String>) {
        self.rows.push(Row {
            label: format!("  {}", label.into()),
            value: value.into(),
            target: String::new(),
            met: None,
        });
    }

    fn target(
        &mut self,
        label: impl Into<String>,
        value: impl Into<String>,
        target: impl Into<String>,
        met: bool,
    ) {
        self.rows.push(Row {
            label: format!("  {}", label.into()),
            value: value.into(),
            target: target.into(),
            met: Some(met),
        });
    }

    /// A latency against a bound in milliseconds.
    fn latency(&mut self, label: impl Into<String>, took: Duration, bound_ms: f64) {
        self.target(
            label,
            format!("{:.1} ms", ms(took)),
            format!("<= {bound_ms:.0} ms"),
            ms(took) <= bound_ms,
        );
    }

    fn print(&self) {
        println!("\n  {:<66} {:>24}   target", "figure", "measured");
        for row in &self.rows {
            let met = match row.met {
                Some(true) => "met",
                Some(false) => "NOT MET",
                None => "",
            };
            if row.value.is_empty() && row.met.is_none() {
                println!("  {}", row.label);
            } else {
                println!(
                    "  {:<66} {:>24}   {:<16} {met}",
                    row.label, row.value, row.target
                );
            }
        }
        let (met, total) = self.rows.iter().fold((0, 0), |(met, total), row| {
            (
                met + usize::from(row.met == Some(true)),
                total + usize::from(row.met.is_some()),
            )
        });
        println!("  targets met: {met} of {total}");
    }
}

/// The peak VmRSS over a stretch: VmHWM after resetting it through `clear_refs` (exact, when
/// allowed) and VmRSS sampled every [`SAMPLE_EVERY`] (what is left when it is not).
#[derive(Debug)]
struct PeakMeter {
    pid: u32,
    reset: bool,
    max: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl PeakMeter {
    fn start(pid: u32) -> Self {
        // "5" resets the process's peak resident set size to its current size.
        let reset = std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok();
        let max = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let task = {
            let (max, stop) = (max.clone(), stop.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    if let Ok((rss, _)) = memory(pid) {
                        max.fetch_max(rss, Ordering::Relaxed);
                    }
                    tokio::time::sleep(SAMPLE_EVERY).await;
                }
            })
        };
        Self {
            pid,
            reset,
            max,
            stop,
            task,
        }
    }

    /// The peak since [`PeakMeter::start`], in KiB.
    async fn finish(self) -> anyhow::Result<u64> {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await?;
        let (rss, hwm) = memory(self.pid)?;
        let hwm = if self.reset { hwm } else { 0 };
        Ok(self.max.load(Ordering::Relaxed).max(rss).max(hwm))
    }
}

/// Kills the server once its VmRSS passes `--crd-scale-max-rss-mib`, so that a server that
/// grows without bound is reported instead of exhausting a shared machine's memory.
#[derive(Debug)]
struct Guard {
    /// The VmRSS (KiB) the server was killed at; 0 while it was not.
    tripped: Arc<AtomicU64>,
    /// KiB.
    limit: u64,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Guard {
    fn start(pid: u32, limit: u64) -> Self {
        let tripped = Arc::new(AtomicU64::new(0));
        let task = {
            let tripped = tripped.clone();
            tokio::spawn(async move {
                while let Ok((rss, _)) = memory(pid) {
                    if rss > limit {
                        tripped.store(rss, Ordering::Relaxed);
                        let _ = std::process::Command::new("kill")
                            .arg("-KILL")
                            .arg(pid.to_string())
                            .status();
                        return;
                    }
                    tokio::time::sleep(SAMPLE_EVERY).await;
                }
            })
        };
        Self {
            tripped,
            limit,
            task,
        }
    }

    /// The VmRSS the server was killed at, if it was.
    fn tripped(&self) -> Option<u64> {
        Some(self.tripped.load(Ordering::Relaxed)).filter(|rss| *rss > 0)
    }
}

/// The machine's `MemAvailable`, in KiB.
fn available_kib() -> anyhow::Result<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo")?;
    meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no MemAvailable in /proc/meminfo")
}

/// What the CRD watch has seen.
#[derive(Debug, Default)]
struct Seen {
    /// When each CRD was first seen `Established`.
    established: HashMap<String, Instant>,
    /// The CRDs that exist.
    live: HashSet<String>,
    /// The CRDs seen deleted.
    deleted: HashSet<String>,
    /// Events received, and their bytes.
    events: u64,
    bytes: u64,
    /// Why the watch stopped, if it did.
    error: Option<String>,
}

/// A watch of every CRD, from the server's start to its end, re-opened from the last
/// resourceVersion when the server ends it.
#[derive(Debug)]
struct CrdWatch {
    seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for CrdWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl CrdWatch {
    async fn start(server: &Server) -> anyhow::Result<Self> {
        let list = server
            .client
            .expect(
                Method::GET,
                &format!("{CRDS}?limit=1"),
                None,
                StatusCode::OK,
            )
            .await?;
        let list: Value = serde_json::from_slice(&list)?;
        let rv = list["metadata"]["resourceVersion"]
            .as_str()
            .context("the CRD list has no resourceVersion")?
            .to_owned();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let task = {
            let (base, tls, seen) = (server.base.clone(), server.tls.clone(), seen.clone());
            tokio::spawn(async move {
                if let Err(error) = follow(&base, tls, rv, &seen).await {
                    lock(&seen).error = Some(format!("{error:#}"));
                }
            })
        };
        Ok(Self { seen, task })
    }

    fn read<R>(&self, f: impl FnOnce(&Seen) -> R) -> R {
        f(&lock(&self.seen))
    }
}

fn lock(seen: &Mutex<Seen>) -> std::sync::MutexGuard<'_, Seen> {
    seen.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Follows the CRDs from `rv` into `seen`, until an error.
async fn follow(
    base: &str,
    tls: Arc<rustls::ClientConfig>,
    mut rv: String,
    seen: &Mutex<Seen>,
) -> anyhow::Result<()> {
    loop {
        let client = Client::connect_like_client_go(base, tls.clone()).await?;
        let path = format!("{CRDS}?watch=1&allowWatchBookmarks=true&resourceVersion={rv}");
        let response = client.start(Method::GET, &path, None).await?;
        anyhow::ensure!(
            response.status() == StatusCode::OK,
            "the CRD watch: {}",
            response.status()
        );
        let mut body = response.into_body();
        let mut pending: Vec<u8> = Vec::new();
        let mut scanned = 0;
        while let Some(frame) = body.frame().await {
            let Ok(data) = frame?.into_data() else {
                continue;
            };
            pending.extend_from_slice(&data);
            while let Some(at) = pending[scanned..].iter().position(|b| *b == b'\n') {
                let end = scanned + at;
                let event: Value = serde_json::from_slice(&pending[..end])
                    .context("a CRD watch event is not JSON")?;
                let len = end + 1;
                pending.drain(..=end);
                scanned = 0;
                record(&event, len, seen, &mut rv)?;
            }
            scanned = pending.len();
        }
        // The server ended the watch: on from where it was.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Records one watch event.
fn record(event: &Value, len: usize, seen: &Mutex<Seen>, rv: &mut String) -> anyhow::Result<()> {
    let kind = event["type"].as_str().unwrap_or_default();
    let object = &event["object"];
    anyhow::ensure!(kind != "ERROR", "the CRD watch ended with {object}");
    if let Some(version) = object["metadata"]["resourceVersion"].as_str() {
        version.clone_into(rv);
    }
    let mut seen = lock(seen);
    seen.events += 1;
    seen.bytes += len as u64;
    let Some(name) = object["metadata"]["name"].as_str() else {
        return Ok(());
    };
    match kind {
        "ADDED" | "MODIFIED" => {
            seen.live.insert(name.to_owned());
            let established = object["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Established" && c["status"] == "True");
            if established && !seen.established.contains_key(name) {
                seen.established.insert(name.to_owned(), Instant::now());
            }
        }
        "DELETED" => {
            seen.live.remove(name);
            seen.deleted.insert(name.to_owned());
        }
        _ => {}
    }
    Ok(())
}

/// Waits until `done` says so of what the watch saw (it returns how many of `total` are done
/// and whether all are), printing progress every 10 s; false when `deadline` passed first.
async fn wait_for(
    server: &mut Server,
    watch: &CrdWatch,
    what: &str,
    total: usize,
    deadline: Instant,
    done: impl Fn(&Seen) -> usize,
) -> anyhow::Result<bool> {
    let started = Instant::now();
    let mut report = started + Duration::from_secs(10);
    loop {
        let (count, error) = watch.read(|seen| (done(seen), seen.error.clone()));
        if let Some(error) = error {
            anyhow::bail!("the CRD watch failed: {error}");
        }
        if count >= total {
            return Ok(true);
        }
        server.check_alive()?;
        if Instant::now() >= deadline {
            return Ok(false);
        }
        if Instant::now() >= report {
            note(&format!(
                "{what}: {count} of {total} after {:.0} s; RSS {:.0} MiB",
                started.elapsed().as_secs_f64(),
                mib(memory(server.pid()?)?.0)
            ));
            report += Duration::from_secs(10);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// POSTs each CRD with `in_flight` requests at once (retrying 429s); returns each POST's
/// latency.
async fn post_all(
    client: &Client,
    crds: &[GeneratedCrd],
    in_flight: usize,
) -> anyhow::Result<Vec<Duration>> {
    let mut tasks = tokio::task::JoinSet::new();
    let mut latencies = Vec::with_capacity(crds.len());
    for crd in crds {
        while tasks.len() >= in_flight.max(1) {
            if let Some(done) = tasks.join_next().await {
                latencies.push(done??);
            }
        }
        let (client, name, body) = (client.clone(), crd.name.clone(), crd.body.clone());
        tasks.spawn(async move {
            let started = Instant::now();
            loop {
                let (status, answer) = tokio::time::timeout(
                    REQUEST_TIMEOUT,
                    client.call(Method::POST, CRDS, Some(body.clone())),
                )
                .await
                .with_context(|| {
                    format!("creating the CRD {name}: no answer after {REQUEST_TIMEOUT:?}")
                })??;
                match status {
                    StatusCode::CREATED => return anyhow::Ok(started.elapsed()),
                    StatusCode::TOO_MANY_REQUESTS => {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    _ => anyhow::bail!(
                        "creating the CRD {name} ({} bytes): {status}: {}",
                        body.len(),
                        String::from_utf8_lossy(&answer[..answer.len().min(1000)])
                    ),
                }
            }
        });
    }
    for done in tasks.join_all().await {
        latencies.push(done?);
    }
    Ok(latencies)
}

/// DELETEs each CRD with `in_flight` requests at once.
async fn delete_all(
    client: &Client,
    crds: &[GeneratedCrd],
    in_flight: usize,
) -> anyhow::Result<()> {
    let mut tasks = tokio::task::JoinSet::new();
    for crd in crds {
        while tasks.len() >= in_flight.max(1) {
            if let Some(done) = tasks.join_next().await {
                done??;
            }
        }
        let (client, path) = (client.clone(), format!("{CRDS}/{}", crd.name));
        tasks.spawn(async move {
            let (status, answer) =
                tokio::time::timeout(REQUEST_TIMEOUT, client.call(Method::DELETE, &path, None))
                    .await
                    .with_context(|| {
                        format!("DELETE {path}: no answer after {REQUEST_TIMEOUT:?}")
                    })??;
            anyhow::ensure!(
                status.is_success() || status == StatusCode::NOT_FOUND,
                "DELETE {path}: {status}: {}",
                String::from_utf8_lossy(&answer[..answer.len().min(500)])
            );
            anyhow::Ok(())
        });
    }
    for done in tasks.join_all().await {
        done?;
    }
    Ok(())
}

/// One GET asking for `accept`, timed; fails unless the answer is 200.
async fn timed(client: &Client, path: &str, accept: &str) -> anyhow::Result<(Duration, Bytes)> {
    let started = Instant::now();
    let (status, body) = tokio::time::timeout(REQUEST_TIMEOUT, client.get_as(path, accept))
        .await
        .with_context(|| format!("GET {path}: no answer after {REQUEST_TIMEOUT:?}"))??;
    let took = started.elapsed();
    anyhow::ensure!(
        status == StatusCode::OK,
        "GET {path}: {status}: {}",
        String::from_utf8_lossy(&body[..body.len().min(500)])
    );
    Ok((took, body))
}

/// The median latency of [`WARM`] GETs.
async fn warm(client: &Client, path: &str, accept: &str) -> anyhow::Result<Duration> {
    let mut took = Vec::with_capacity(WARM);
    for _ in 0..WARM {
        took.push(timed(client, path, accept).await?.0);
    }
    Ok(median(&mut took))
}

fn median(values: &mut [Duration]) -> Duration {
    values.sort_unstable();
    values.get(values.len() / 2).copied().unwrap_or_default()
}

fn kib_text(bytes: usize) -> String {
    if bytes >= 10 << 20 {
        format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
    } else {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    }
}

/// The set's own statistics, beside the real distribution's.
fn describe_set(crds: &[GeneratedCrd], took: Duration, report: &mut Report) {
    let mut yaml: Vec<usize> = crds.iter().map(|c| c.yaml_bytes).collect();
    yaml.sort_unstable();
    let at = |q: f64| yaml[((yaml.len() - 1) as f64 * q).round() as usize];
    let json: usize = crds.iter().map(|c| c.body.len()).sum();
    let groups: BTreeSet<&str> = crds.iter().map(|c| c.group.as_str()).collect();
    let largest = crds
        .iter()
        .max_by_key(|c| c.yaml_bytes)
        .map(|c| c.body.len());
    report.section(format!(
        "the generated set ({:.1} s to generate)",
        took.as_secs_f64()
    ));
    report.figure(
        "CRDs / groups / with CEL rules / namespaced",
        format!(
            "{} / {} / {} / {}",
            crds.len(),
            groups.len(),
            crds.iter().filter(|c| c.cel).count(),
            crds.iter().filter(|c| c.namespaced).count()
        ),
    );
    report.figure(
        "YAML (as kubectl prints it) in all / JSON posted in all",
        format!(
            "{:.1} / {:.1} MiB",
            yaml.iter().sum::<usize>() as f64 / f64::from(1 << 20),
            json as f64 / f64::from(1 << 20)
        ),
    );
    report.figure(
        format!(
            "YAML median / p90 / max (real set: {} / {} / {} KB)",
            generate::REAL_MEDIAN / 1000,
            generate::REAL_P90 / 1000,
            generate::REAL_MAX / 1000
        ),
        format!(
            "{:.0} / {:.0} / {:.0} KB",
            at(0.5) as f64 / 1000.0,
            at(0.9) as f64 / 1000.0,
            at(1.0) as f64 / 1000.0
        ),
    );
    report.figure(
        "YAML min / p10 / p25 / p75",
        format!(
            "{:.0} / {:.0} / {:.0} / {:.0} KB",
            at(0.0) as f64 / 1000.0,
            at(0.1) as f64 / 1000.0,
            at(0.25) as f64 / 1000.0,
            at(0.75) as f64 / 1000.0
        ),
    );
    report.figure(
        "largest CRD as JSON",
        largest.map_or_else(String::new, kib_text),
    );
}

/// One mode's server, the watch of its CRDs and its memory guard.
struct Run {
    server: Server,
    watch: CrdWatch,
    guard: Guard,
    pid: u32,
    /// VmRSS settled before any CRD, KiB.
    idle: u64,
    /// The mode's name.
    mode: &'static str,
    /// What the mode is doing, for a report of why it stopped.
    phase: String,
}

impl Run {
    async fn start(args: &Args, dir: &Path, mode: &'static str) -> anyhow::Result<Self> {
        let server = Server::role(&args.genplane(), &args.crd_scale_role, dir, &[])
            .await
            .with_context(|| format!("starting genplane {} on SQLite", args.crd_scale_role))?;
        create_namespace(&server.client, NAMESPACE).await?;
        let watch = CrdWatch::start(&server).await?;
        let pid = server.pid()?;
        let idle = settled(pid, settle_limit(args)).await?;
        let limit = match args.crd_scale_max_rss_mib {
            Some(limit) => limit * 1024,
            None => available_kib()? / 2,
        };
        Ok(Self {
            server,
            watch,
            guard: Guard::start(pid, limit),
            pid,
            idle,
            mode,
            phase: "starting".to_owned(),
        })
    }

    /// Notes that the mode enters `phase`.
    fn enter(&mut self, phase: &str) {
        note(&format!("{}: {phase}", self.mode));
        phase.clone_into(&mut self.phase);
    }

    /// Ends the mode: stops the server, or when the guard killed it, reports what the mode
    /// had reached and lets the run go on.
    async fn finish(
        self,
        outcome: anyhow::Result<()>,
        crds: &[GeneratedCrd],
        report: &mut Report,
    ) -> anyhow::Result<()> {
        let Some(rss) = self.guard.tripped() else {
            outcome?;
            return self.stop().await;
        };
        note(&format!(
            "the server's RSS reached {:.0} MiB: killed ({})",
            mib(rss),
            self.phase
        ));
        let established = self.watch.read(|seen| seen.established.len());
        report.target(
            format!("ABORTED while {}: the server's RSS reached", self.phase),
            format!("{:.0} MiB", mib(rss)),
            format!("<= {:.0} MiB", mib(self.guard.limit)),
            false,
        );
        report.figure(
            "CRDs Established when it was killed",
            format!("{established} of {}", crds.len()),
        );
        if established > 0 {
            let per_crd = mib(rss.saturating_sub(self.idle)) / established as f64;
            report.target(
                "RSS per Established CRD when it was killed",
                format!("{per_crd:.3} MiB"),
                "<= 0.5 MiB",
                per_crd <= 0.5,
            );
        }
        if let Err(error) = outcome {
            let text = format!("{error:#}");
            report.figure(
                "what the benchmark saw",
                text.lines()
                    .next()
                    .unwrap_or_default()
                    .chars()
                    .take(60)
                    .collect::<String>(),
            );
        }
        Ok(())
    }

    /// A fresh connection with client-go's flow-control windows.
    async fn connect(&self) -> anyhow::Result<Client> {
        Client::connect_like_client_go(&self.server.base, self.server.tls.clone()).await
    }

    /// Waits until every CRD of `crds` is `Established`; the time from `start` until the
    /// last of them was, or how many were by the deadline.
    async fn established(
        &mut self,
        crds: &[GeneratedCrd],
        start: Instant,
        deadline: Instant,
    ) -> anyhow::Result<Result<Duration, usize>> {
        let names: Vec<&str> = crds.iter().map(|c| c.name.as_str()).collect();
        let count = |seen: &Seen| {
            names
                .iter()
                .filter(|n| seen.established.contains_key(**n))
                .count()
        };
        let all = wait_for(
            &mut self.server,
            &self.watch,
            "Established",
            names.len(),
            deadline,
            count,
        )
        .await?;
        Ok(if all {
            Ok(self.watch.read(|seen| {
                names
                    .iter()
                    .filter_map(|n| seen.established.get(*n))
                    .max()
                    .map_or(Duration::ZERO, |last| last.saturating_duration_since(start))
            }))
        } else {
            Err(self.watch.read(count))
        })
    }

    /// Deletes every CRD and reports the time until all are gone and the memory after.
    async fn delete(
        &mut self,
        args: &Args,
        crds: &[GeneratedCrd],
        report: &mut Report,
    ) -> anyhow::Result<()> {
        let client = self.connect().await?;
        let started = Instant::now();
        delete_all(&client, crds, args.crd_scale_in_flight).await?;
        let names: Vec<&str> = crds.iter().map(|c| c.name.as_str()).collect();
        let deadline = started + Duration::from_secs_f64(args.crd_scale_timeout);
        let gone = wait_for(
            &mut self.server,
            &self.watch,
            "deleted",
            names.len(),
            deadline,
            |seen| names.iter().filter(|n| seen.deleted.contains(**n)).count(),
        )
        .await?;
        let took = started.elapsed();
        let last_write = Instant::now();
        if gone {
            report.figure(
                "all CRDs deleted and gone after",
                format!("{:.1} s", took.as_secs_f64()),
            );
        } else {
            let count = self
                .watch
                .read(|seen| names.iter().filter(|n| seen.deleted.contains(**n)).count());
            report.target(
                "all CRDs deleted and gone",
                format!(
                    "{count} of {} after {:.0} s",
                    names.len(),
                    took.as_secs_f64()
                ),
                "all",
                false,
            );
        }
        let after = settled(self.pid, settle_limit(args)).await?;
        report.figure(
            "RSS settled right after the deletion / idle before",
            format!(
                "{:.0} / {:.0} MiB = {:.2}x",
                mib(after),
                mib(self.idle),
                after as f64 / self.idle as f64
            ),
        );
        let steady = steady(self.pid, args, last_write).await?;
        report.target(
            format!(
                "RSS {:.0} s after the deletion / idle before",
                args.crd_scale_window
            ),
            format!(
                "{:.0} / {:.0} MiB = {:.2}x",
                mib(steady),
                mib(self.idle),
                steady as f64 / self.idle as f64
            ),
            "<= 1.50x",
            steady as f64 <= 1.5 * self.idle as f64,
        );
        Ok(())
    }

    async fn stop(mut self) -> anyhow::Result<()> {
        self.server.check_alive()?;
        let Run { server, watch, .. } = self;
        drop(watch);
        server.stop().await
    }
}

/// The memory figures of a mode, once its CRDs are `Established` (and, for the mode at once,
/// the first discovery and OpenAPI requests answered).
/// The RSS once `window` has passed since `since` (the phase's last write) and memory has
/// settled: the server's watch window has let go of the phase's events by then.
async fn steady(pid: u32, args: &Args, since: Instant) -> anyhow::Result<u64> {
    let until = since + Duration::from_secs_f64(args.crd_scale_window);
    let now = Instant::now();
    if until > now {
        note(&format!(
            "waiting {:.0} s for the watch window to pass",
            (until - now).as_secs_f64()
        ));
        tokio::time::sleep(until - now).await;
    }
    settled(pid, settle_limit(args)).await
}

/// The memory rows of a mode: `after` settled right after the CRDs were `Established`,
/// `steady` once the watch window passed too (the per-CRD figure's).
fn memory_rows(
    report: &mut Report,
    args: &Args,
    count: usize,
    idle: u64,
    peak: u64,
    (after, steady): (u64, u64),
) {
    report.figure("RSS idle before (settled)", format!("{:.1} MiB", mib(idle)));
    report.figure(
        "RSS peak from the first POST until settled",
        format!("{:.1} MiB", mib(peak)),
    );
    report.figure(
        "RSS settled right after / once the watch window passed",
        format!(
            "{:.1} / {:.1} MiB ({:.3} / {:.3} MiB per CRD)",
            mib(after),
            mib(steady),
            mib(after.saturating_sub(idle)) / count as f64,
            mib(steady.saturating_sub(idle)) / count as f64,
        ),
    );
    let per_crd = mib(steady.saturating_sub(idle)) / count as f64;
    report.target(
        format!(
            "RSS per CRD: (steady - idle) / count, {:.0} s after the last write",
            args.crd_scale_window
        ),
        format!("{per_crd:.3} MiB"),
        "<= 0.5 MiB",
        per_crd <= 0.5,
    );
    let ratio = peak as f64 / steady.max(1) as f64;
    report.target(
        "peak / settled",
        format!("{ratio:.2}x"),
        "<= 1.50x",
        ratio <= 1.5,
    );
}

/// The POST figures of a mode.
fn post_rows(report: &mut Report, latencies: &mut [Duration], posted: Duration) {
    let slowest = latencies.iter().max().copied().unwrap_or_default();
    report.figure(
        "every POST answered after / POST p50 / slowest",
        format!(
            "{:.1} s / {:.0} ms / {:.0} ms",
            posted.as_secs_f64(),
            ms(median(latencies)),
            ms(slowest)
        ),
    );
}

/// Discovery, right after the last `Established` (`first`) and warm.
async fn discovery(
    client: &Client,
    crds: &[GeneratedCrd],
    report: &mut Report,
) -> anyhow::Result<()> {
    let groups: BTreeSet<&str> = crds.iter().map(|c| c.group.as_str()).collect();
    let sample_group = crds[0].group.clone();
    let gv = format!("/apis/{sample_group}/{VERSION}");

    let (legacy_first, legacy) = timed(client, "/apis", "application/json").await?;
    let (aggregated_first, aggregated) = timed(client, "/apis", AGGREGATED).await?;
    let (gv_first, gv_body) = timed(client, &gv, "application/json").await?;
    report.section("discovery (first: right after the last Established)");

    // What they say: every generated group, and in the aggregated form every resource.
    let legacy: Value = serde_json::from_slice(&legacy)?;
    let listed: BTreeSet<&str> = legacy["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|g| g["name"].as_str())
        .collect();
    let missing = groups.iter().filter(|g| !listed.contains(**g)).count();
    let aggregated_len = aggregated.len();
    let aggregated: Value = serde_json::from_slice(&aggregated)?;
    anyhow::ensure!(
        aggregated["kind"] == "APIGroupDiscoveryList",
        "GET /apis as aggregated discovery answered a {}",
        aggregated["kind"]
    );
    let resources: usize = aggregated["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|g| {
            g["metadata"]["name"]
                .as_str()
                .is_some_and(|n| groups.contains(n))
        })
        .flat_map(|g| g["versions"].as_array().into_iter().flatten())
        .map(|v| v["resources"].as_array().map_or(0, Vec::len))
        .sum();
    let served: usize = serde_json::from_slice::<Value>(&gv_body)?["resources"]
        .as_array()
        .map_or(0, |r| {
            r.iter()
                .filter(|r| !r["name"].as_str().unwrap_or_default().contains('/'))
                .count()
        });
    let in_group = crds.iter().filter(|c| c.group == sample_group).count();
    report.target(
        "legacy /apis lists every generated group",
        format!("{} of {} missing", missing, groups.len()),
        "none missing",
        missing == 0,
    );
    report.target(
        "aggregated /apis: resources of the generated groups",
        format!("{resources} ({} KiB)", aggregated_len / 1024),
        format!("{}", 2 * crds.len()),
        resources == 2 * crds.len(),
    );
    report.target(
        format!("{gv}: resources"),
        format!("{served}"),
        format!("{in_group}"),
        served == in_group,
    );
    report.latency("legacy GET /apis, first", legacy_first, 100.0);
    report.latency("aggregated GET /apis (v2), first", aggregated_first, 100.0);
    report.latency(
        format!("legacy GET /apis/<group>/{VERSION}, first"),
        gv_first,
        100.0,
    );
    Ok(())
}

/// Warm discovery, and every group-version as a kubectl cache fill reads them.
async fn discovery_warm(
    client: &Client,
    crds: &[GeneratedCrd],
    report: &mut Report,
) -> anyhow::Result<()> {
    let gv = format!("/apis/{}/{VERSION}", crds[0].group);
    report.latency(
        "legacy GET /apis, warm (median)",
        warm(client, "/apis", "application/json").await?,
        100.0,
    );
    report.latency(
        "aggregated GET /apis (v2), warm (median)",
        warm(client, "/apis", AGGREGATED).await?,
        100.0,
    );
    report.latency(
        format!("legacy GET /apis/<group>/{VERSION}, warm (median)"),
        warm(client, &gv, "application/json").await?,
        100.0,
    );
    let groups: BTreeSet<&str> = crds.iter().map(|c| c.group.as_str()).collect();
    let paths: Vec<String> = groups
        .iter()
        .flat_map(|g| [OLD_VERSION, VERSION].map(|v| format!("/apis/{g}/{v}")))
        .collect();
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for path in &paths {
        while tasks.len() >= 8 {
            if let Some(done) = tasks.join_next().await {
                done??;
            }
        }
        let (client, path) = (client.clone(), path.clone());
        tasks.spawn(async move { timed(&client, &path, "application/json").await.map(|_| ()) });
    }
    for done in tasks.join_all().await {
        done?;
    }
    report.figure(
        format!(
            "legacy: every /apis/<group>/<version> ({}, 8 in flight)",
            paths.len()
        ),
        format!("{:.0} ms", ms(started.elapsed())),
    );
    Ok(())
}

/// The OpenAPI v3 index and the group-version documents to time: the group of the largest
/// CRD and a few others spread over the set.
async fn openapi_v3_first(
    client: &Client,
    crds: &[GeneratedCrd],
    report: &mut Report,
) -> anyhow::Result<Vec<String>> {
    let (index_first, index) = timed(client, "/openapi/v3", "application/json").await?;
    let index: Value = serde_json::from_slice(&index)?;
    let paths = index["paths"]
        .as_object()
        .context("/openapi/v3 has no paths")?;
    let groups: BTreeSet<&str> = crds.iter().map(|c| c.group.as_str()).collect();
    let missing = groups
        .iter()
        .filter(|g| !paths.contains_key(&format!("apis/{g}/{VERSION}")))
        .count();
    let largest = crds
        .iter()
        .max_by_key(|c| c.body.len())
        .map(|c| c.group.as_str())
        .unwrap_or_default();
    let mut chosen = vec![largest];
    let spread: Vec<&str> = groups.iter().copied().collect();
    for i in 0..4.min(spread.len()) {
        let group = spread[i * spread.len() / 4];
        if !chosen.contains(&group) {
            chosen.push(group);
        }
    }
    let mut urls = Vec::new();
    let mut firsts = Vec::new();
    let mut sizes = Vec::new();
    for group in &chosen {
        let key = format!("apis/{group}/{VERSION}");
        let url = paths
            .get(&key)
            .and_then(|p| p["serverRelativeURL"].as_str())
            .map_or_else(|| format!("/openapi/v3/{key}"), str::to_owned);
        let (first, body) = timed(client, &url, "application/json").await?;
        firsts.push(first);
        sizes.push(body.len());
        urls.push(url);
    }
    report.section("OpenAPI (v3 first: right after the first discovery)");
    report.target(
        "/openapi/v3 index lists every generated group-version",
        format!("{missing} of {} missing", groups.len()),
        "none missing",
        missing == 0,
    );
    report.figure(
        "GET /openapi/v3 (index), first",
        format!("{:.1} ms", ms(index_first)),
    );
    let slowest = firsts.iter().max().copied().unwrap_or_default();
    report.figure(
        format!(
            "/openapi/v3/apis/<group>/{VERSION} of {} groups: sizes",
            firsts.len()
        ),
        format!(
            "{} to {}",
            kib_text(sizes.iter().min().copied().unwrap_or_default()),
            kib_text(sizes.iter().max().copied().unwrap_or_default())
        ),
    );
    report.latency(
        format!("GET /openapi/v3/apis/<group>/{VERSION}, first (slowest)"),
        slowest,
        50.0,
    );
    Ok(urls)
}

/// Warm OpenAPI v3, then `/openapi/v2` and what serving it costs in memory.
async fn openapi_rest(
    run: &mut Run,
    args: &Args,
    client: &Client,
    urls: &[String],
    report: &mut Report,
) -> anyhow::Result<()> {
    report.figure(
        "GET /openapi/v3 (index), warm (median)",
        format!(
            "{:.1} ms",
            ms(warm(client, "/openapi/v3", "application/json").await?)
        ),
    );
    let mut warms = Vec::new();
    for url in urls {
        warms.push(warm(client, url, "application/json").await?);
    }
    report.latency(
        format!("GET /openapi/v3/apis/<group>/{VERSION}, warm (slowest median)"),
        warms.iter().max().copied().unwrap_or_default(),
        50.0,
    );

    let before = memory(run.pid)?.0;
    let meter = PeakMeter::start(run.pid);
    let (first, body) = timed(client, "/openapi/v2", "application/json").await?;
    let size = body.len();
    drop(body);
    let warm_v2 = warm(client, "/openapi/v2", "application/json").await?;
    let peak = meter.finish().await?;
    let after = settled(run.pid, settle_limit(args)).await?;
    report.figure("GET /openapi/v2 (JSON): size", kib_text(size));
    report.figure(
        "GET /openapi/v2, first / warm (median)",
        format!("{:.0} / {:.0} ms", ms(first), ms(warm_v2)),
    );
    let growth = peak.saturating_sub(before) * 1024;
    report.target(
        format!(
            "RSS growth while /openapi/v2 was served {} times (peak - before)",
            WARM + 1
        ),
        format!("{:.1} MiB", growth as f64 / f64::from(1 << 20)),
        format!("<= its size, {:.1} MiB", size as f64 / f64::from(1 << 20)),
        growth <= size as u64,
    );
    report.figure(
        "RSS before /openapi/v2 / settled after it",
        format!("{:.1} / {:.1} MiB", mib(before), mib(after)),
    );
    Ok(())
}

/// Custom resources of `--crd-scale-samples` kinds: create, GET (JSON and Table), LIST.
async fn custom_resources(
    args: &Args,
    client: &Client,
    crds: &[GeneratedCrd],
    report: &mut Report,
) -> anyhow::Result<()> {
    // A quarter of the kinds (at least one) with CEL rules, where there are any; spread over
    // the set.
    fn spread<'a>(from: &[&'a GeneratedCrd], n: usize) -> Vec<&'a GeneratedCrd> {
        (0..n).map(|i| from[i * from.len() / n]).collect()
    }
    let samples = args.crd_scale_samples.clamp(1, crds.len());
    let cel: Vec<&GeneratedCrd> = crds.iter().filter(|c| c.cel).collect();
    let plain: Vec<&GeneratedCrd> = crds.iter().filter(|c| !c.cel).collect();
    let with_cel = (samples / 4).max(1).min(cel.len());
    let without = (samples - with_cel).min(plain.len());
    let mut chosen = spread(&cel, with_cel);
    chosen.extend(spread(&plain, without));
    let mut creates = Vec::new();
    let mut gets = Vec::new();
    let mut tables = Vec::new();
    let mut lists = Vec::new();
    let mut refused = Vec::new();
    for (i, crd) in chosen.iter().enumerate() {
        let collection = if crd.namespaced {
            format!(
                "/apis/{}/{VERSION}/namespaces/{NAMESPACE}/{}",
                crd.group, crd.plural
            )
        } else {
            format!("/apis/{}/{VERSION}/{}", crd.group, crd.plural)
        };
        let mut metadata = json!({"name": "sample"});
        if crd.namespaced {
            metadata["namespace"] = NAMESPACE.into();
        }
        let object = json!({
            "apiVersion": format!("{}/{VERSION}", crd.group),
            "kind": crd.kind,
            "metadata": metadata,
            "spec": {"forProvider": crd.for_provider},
        });
        let started = Instant::now();
        let (status, answer) = tokio::time::timeout(
            REQUEST_TIMEOUT,
            client.call(
                Method::POST,
                &collection,
                Some(Bytes::from(object.to_string())),
            ),
        )
        .await
        .with_context(|| format!("POST {collection}: no answer after {REQUEST_TIMEOUT:?}"))??;
        anyhow::ensure!(
            status == StatusCode::CREATED,
            "creating a {} (CEL: {}): {status}: {}",
            crd.kind,
            crd.cel,
            String::from_utf8_lossy(&answer[..answer.len().min(1000)])
        );
        creates.push(started.elapsed());
        let one = format!("{collection}/sample");
        timed(client, &one, "application/json").await?;
        gets.push(warm(client, &one, "application/json").await?);
        tables.push(warm(client, &one, TABLE).await?);
        lists.push(warm(client, &collection, "application/json").await?);

        // Without its required parameter: refused, by the CEL rule where there is one.
        if i == 0 || i == with_cel {
            let mut without = object.clone();
            without["metadata"]["name"] = "without-region".into();
            if let Some(p) = without["spec"]["forProvider"].as_object_mut() {
                p.remove("region");
            }
            let (status, answer) = client
                .call(
                    Method::POST,
                    &collection,
                    Some(Bytes::from(without.to_string())),
                )
                .await?;
            let text = String::from_utf8_lossy(&answer);
            let ok = status == StatusCode::UNPROCESSABLE_ENTITY
                && (!crd.cel || text.contains("spec.forProvider.region is a required parameter"));
            refused.push((crd.cel, ok));
        }
    }
    let slowest = |v: &[Duration]| v.iter().max().copied().unwrap_or_default();
    report.section(format!(
        "custom resources: one object of each of {} kinds, {with_cel} with CEL rules",
        chosen.len()
    ));
    report.figure(
        "create: median / slowest",
        format!(
            "{:.1} / {:.1} ms",
            ms(median(&mut creates)),
            ms(slowest(&creates))
        ),
    );
    report.latency(
        "GET (JSON), warm: median of the kinds' medians",
        median(&mut gets),
        100.0,
    );
    report.latency(
        "GET as kubectl get's Table, warm: slowest kind's median",
        slowest(&tables),
        100.0,
    );
    report.figure(
        "LIST of the kind's collection, warm: median / slowest",
        format!(
            "{:.1} / {:.1} ms",
            ms(median(&mut lists)),
            ms(slowest(&lists))
        ),
    );
    let (cel_ok, cel_all) = refused
        .iter()
        .filter(|(cel, _)| *cel)
        .fold((0, 0), |(ok, all), (_, r)| (ok + usize::from(*r), all + 1));
    let (plain_ok, plain_all) = refused
        .iter()
        .filter(|(cel, _)| !*cel)
        .fold((0, 0), |(ok, all), (_, r)| (ok + usize::from(*r), all + 1));
    report.target(
        "an object without its required parameter refused (422): CEL / schema",
        format!("{cel_ok} of {cel_all} / {plain_ok} of {plain_all}"),
        "all",
        cel_ok == cel_all && plain_ok == plain_all,
    );
    Ok(())
}

/// Every CRD at once, then the measurements on the served set, then the deletion.
async fn at_once(
    args: &Args,
    dir: &Path,
    crds: &[GeneratedCrd],
    report: &mut Report,
) -> anyhow::Result<()> {
    note("all at once: starting the server");
    let mut run = Run::start(args, dir, "all at once").await?;
    report.section(format!(
        "all at once: {} CRDs POSTed with {} in flight, genplane {} on SQLite",
        crds.len(),
        args.crd_scale_in_flight,
        args.crd_scale_role
    ));
    let outcome = measure_at_once(&mut run, args, crds, report).await;
    run.finish(outcome, crds, report).await
}

async fn measure_at_once(
    run: &mut Run,
    args: &Args,
    crds: &[GeneratedCrd],
    report: &mut Report,
) -> anyhow::Result<()> {
    let client = run.connect().await?;
    note(&format!("all at once: idle at {:.1} MiB", mib(run.idle)));
    run.enter("posting");
    let meter = PeakMeter::start(run.pid);
    let start = Instant::now();
    let mut latencies = post_all(&client, crds, args.crd_scale_in_flight).await?;
    let posted = start.elapsed();
    let deadline = start + Duration::from_secs_f64(args.crd_scale_timeout);
    run.enter("waiting for Established");
    let established = run.established(crds, start, deadline).await?;
    let last_write = Instant::now();
    note(&match established {
        Ok(took) => format!(
            "all at once: all Established after {:.1} s",
            took.as_secs_f64()
        ),
        Err(count) => format!("all at once: {count} Established by the deadline"),
    });
    run.enter("first discovery and OpenAPI v3");
    post_rows(report, &mut latencies, posted);
    match established {
        Ok(took) => report.target(
            "all Established, from the first POST",
            format!("{:.1} s", took.as_secs_f64()),
            "<= 60 s",
            took.as_secs_f64() <= 60.0,
        ),
        Err(count) => report.target(
            "all Established, from the first POST",
            format!(
                "{count} of {} after {:.0} s",
                crds.len(),
                args.crd_scale_timeout
            ),
            "<= 60 s",
            false,
        ),
    }

    // Discovery and OpenAPI v3 first, right after the last Established; their rows go after
    // the memory figures.
    let mut discovered = Report::default();
    discovery(&client, crds, &mut discovered).await?;
    let mut openapi = Report::default();
    let urls = openapi_v3_first(&client, crds, &mut openapi).await?;
    run.enter("settling");
    let after = settled(run.pid, settle_limit(args)).await?;
    let peak = meter.finish().await?;
    let steady = steady(run.pid, args, last_write).await?;
    let (events, bytes) = run.watch.read(|seen| (seen.events, seen.bytes));
    report.figure(
        "the CRD watch received (events / MiB)",
        format!("{events} / {:.0}", bytes as f64 / f64::from(1 << 20)),
    );
    memory_rows(report, args, crds.len(), run.idle, peak, (after, steady));
    // The server closes connections idle through the wait, as kube-apiserver does.
    let client = run.connect().await?;

    run.enter("warm discovery");
    discovery_warm(&client, crds, &mut discovered).await?;
    report.rows.append(&mut discovered.rows);
    run.enter("OpenAPI");
    openapi_rest(run, args, &client, &urls, &mut openapi).await?;
    report.rows.append(&mut openapi.rows);
    run.enter("custom resources");
    custom_resources(args, &client, crds, report).await?;
    run.enter("deleting the CRDs");
    report.section("all at once: deletion");
    run.delete(args, crds, report).await
}

/// The CRDs in batches, each waited for until `Established`; then the deletion.
async fn in_batches(
    args: &Args,
    dir: &Path,
    crds: &[GeneratedCrd],
    report: &mut Report,
) -> anyhow::Result<()> {
    let batch = args.crd_scale_batch;
    note(&format!("in batches of {batch}: starting the server"));
    let mut run = Run::start(args, dir, "in batches").await?;
    report.section(format!(
        "in batches: {} CRDs in batches of {batch} ({} in flight), each waited for until \
         Established",
        crds.len(),
        args.crd_scale_in_flight
    ));
    let outcome = measure_in_batches(&mut run, args, crds, report).await;
    run.finish(outcome, crds, report).await
}

async fn measure_in_batches(
    run: &mut Run,
    args: &Args,
    crds: &[GeneratedCrd],
    report: &mut Report,
) -> anyhow::Result<()> {
    let batch = args.crd_scale_batch;
    let client = run.connect().await?;
    note(&format!("in batches: idle at {:.1} MiB", mib(run.idle)));
    run.enter("posting and waiting for Established");
    let meter = PeakMeter::start(run.pid);
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(args.crd_scale_timeout);
    let mut latencies = Vec::new();
    let mut posting = Duration::ZERO;
    let mut batch_times = Vec::new();
    let mut outcome = Ok(Duration::ZERO);
    for (i, chunk) in crds.chunks(batch).enumerate() {
        let batch_start = Instant::now();
        latencies.extend(post_all(&client, chunk, args.crd_scale_in_flight).await?);
        posting += batch_start.elapsed();
        match run.established(chunk, batch_start, deadline).await? {
            Ok(_) => batch_times.push(batch_start.elapsed()),
            Err(count) => {
                outcome = Err(i * batch + count);
                break;
            }
        }
    }
    if outcome.is_ok() {
        outcome = Ok(start.elapsed());
    }
    let last_write = Instant::now();
    run.enter("settling");
    let after = settled(run.pid, settle_limit(args)).await?;
    let peak = meter.finish().await?;
    let steady = steady(run.pid, args, last_write).await?;
    post_rows(report, &mut latencies, posting);
    match outcome {
        Ok(took) => {
            let first = batch_times.first().copied().unwrap_or_default();
            let last = batch_times.last().copied().unwrap_or_default();
            report.figure(
                "all Established, from the first POST",
                format!("{:.1} s", took.as_secs_f64()),
            );
            report.figure(
                "a batch, POSTs to Established: first / last batch",
                format!("{:.2} / {:.2} s", first.as_secs_f64(), last.as_secs_f64()),
            );
        }
        Err(count) => report.target(
            "all Established",
            format!(
                "{count} of {} after {:.0} s",
                crds.len(),
                args.crd_scale_timeout
            ),
            "all",
            false,
        ),
    }
    memory_rows(report, args, crds.len(), run.idle, peak, (after, steady));
    run.enter("deleting the CRDs");
    run.delete(args, crds, report).await
}

/// Generates the set, runs both modes and prints the table.
pub(crate) async fn crd_scale(args: &Args, dir: &Path) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.crd_scale_count > 0,
        "--crd-scale-count must be positive"
    );
    note(&format!(
        "generating {} CRDs (seed {})",
        args.crd_scale_count, args.crd_scale_seed
    ));
    let started = Instant::now();
    let crds = generate::generate(SetOptions {
        count: args.crd_scale_count,
        seed: args.crd_scale_seed,
        cel_fraction: args.crd_scale_cel_fraction,
        namespaced_fraction: 0.3,
    });
    if let Some(out) = &args.crd_scale_write {
        // The set as files (one JSON CRD each, in the order posted), for other tools.
        std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
        for (index, crd) in crds.iter().enumerate() {
            let path = out.join(format!("{index:05}-{}.json", crd.name));
            std::fs::write(&path, &crd.body)
                .with_context(|| format!("writing {}", path.display()))?;
        }
        println!("wrote {} CRDs to {}", crds.len(), out.display());
        return Ok(());
    }
    let mut report = Report::default();
    describe_set(&crds, started.elapsed(), &mut report);
    println!(
        "\nCRD scale (issue #43): {} generated provider-shaped CRDs (seed {}), genplane {} on \
         SQLite, one fresh server per mode",
        crds.len(),
        args.crd_scale_seed,
        args.crd_scale_role
    );
    let outcome = async {
        at_once(args, &dir.join("crd-scale-once"), &crds, &mut report).await?;
        if args.crd_scale_batch > 0 && args.crd_scale_batch < crds.len() {
            in_batches(args, &dir.join("crd-scale-batches"), &crds, &mut report).await?;
        }
        anyhow::Ok(())
    }
    .await;
    // What was measured is printed even when a later step failed.
    report.print();
    outcome
}
