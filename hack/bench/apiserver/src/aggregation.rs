//! The aggregator's proxy against the extension API server it proxies to (`--only
//! aggregation`, run by `hack/bench/aggregation.sh`): what a request costs when it goes through
//! an APIService rather than straight to the server that serves it.
//!
//! Two SQLite `genplane apiserver`s on loopback, their certificates made ahead with
//! `genplane pki`:
//! - the extension, serving a namespaced CRD of its own (`widgets.bench.genplane.io`), believing
//!   the aggregator's front proxy (`--requestheader-client-ca-file` = the aggregator's
//!   front-proxy CA, `--requestheader-allowed-names=front-proxy-client`), its serving
//!   certificate naming the Service `bench/api` (`api.bench.svc`);
//! - the aggregator, reaching `bench/api` at the extension's port
//!   (`--service-address-override`), with the APIService `v1.bench.genplane.io` (that Service,
//!   the extension's CA as `caBundle`), waited for until `Available=True`.
//!
//! Measured, side by side:
//! - GET of one Widget, and LIST of the namespace's `--objects` Widgets, directly from the
//!   extension and through the aggregator, in interleaved slices at the same concurrency on one
//!   HTTP/2 connection each: requests per second, p50 and p99 latency, and CPU per request of
//!   each process (user + system time over the slices). Directly, the extension's CPU is the
//!   whole cost; through the aggregator, the aggregator's CPU is what the proxy adds (it
//!   terminates TLS, authenticates, authorizes, audits and sends the request on over its own
//!   TLS connection with the front-proxy headers), and the sum is what the request costs in
//!   all. Target: the proxy's CPU at most 1.5x the direct CPU per GET.
//! - Watch events: one watch of the Widgets of a namespace directly on the extension and one
//!   through the aggregator, open together, while `--agg-events` Widgets are created on the
//!   extension one at a time, `--agg-event-interval-ms` apart. For each watch, the time from
//!   each create's send to its event's arrival (both streams read frame by frame as they
//!   come), and per event the difference between the two. Target: no buffering, the latency
//!   through the aggregator the direct one within noise; an event that reaches the proxied
//!   watch only after the next create was sent (or never) was held back.
//!
//! The CPU figures are of the two server processes alone; the benchmark's client, on the same
//! machine, is not counted (it does the same work either way: one TLS connection, the same
//! requests and answers).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::{Method, StatusCode};

use crate::client::Client;
use crate::process::{self, Server, tail};
use crate::{Args, Op, create_namespace, ms, quantile, run_slice};

/// The extension's API group (its CRD's) and the APIService's group.
const GROUP: &str = "bench.genplane.io";
/// The one version of the group.
const VERSION: &str = "v1";
/// The APIService handing the group-version to the extension.
const API_SERVICE: &str = "v1.bench.genplane.io";
/// The Service the APIService names, `namespace/name`, resolved by the aggregator's
/// `--service-address-override` to the extension's port.
const SERVICE: (&str, &str) = ("bench", "api");
/// The namespace of the Widgets read by GET and LIST.
const READ_NAMESPACE: &str = "bench-agg";
/// The namespace the watches follow.
const WATCH_NAMESPACE: &str = "bench-agg-watch";
/// How long a setup step (a CRD established, the APIService available) may take.
const SETUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the watches may take to deliver the last event after the last create.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The Widgets of `namespace`.
fn widgets(namespace: &str) -> String {
    format!("/apis/{GROUP}/{VERSION}/namespaces/{namespace}/widgets")
}

/// The CustomResourceDefinition of Widgets: namespaced, one served and stored version, a
/// small structural schema.
fn widget_crd() -> Bytes {
    Bytes::from(
        serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": { "name": format!("widgets.{GROUP}") },
            "spec": {
                "group": GROUP,
                "scope": "Namespaced",
                "names": {
                    "plural": "widgets",
                    "singular": "widget",
                    "kind": "Widget",
                    "listKind": "WidgetList",
                },
                "versions": [{
                    "name": VERSION,
                    "served": true,
                    "storage": true,
                    "schema": { "openAPIV3Schema": {
                        "type": "object",
                        "properties": { "spec": {
                            "type": "object",
                            "required": ["replicas"],
                            "properties": {
                                "replicas": { "type": "integer", "minimum": 0, "maximum": 1000 },
                                "color": { "type": "string", "enum": ["red", "green", "blue"] },
                                "note": { "type": "string", "maxLength": 256 },
                            },
                        } },
                    } },
                }],
            },
        })
        .to_string(),
    )
}

/// A Widget `name` (a few hundred bytes once stored, with its metadata).
fn widget(name: &str) -> Bytes {
    Bytes::from(
        serde_json::json!({
            "apiVersion": format!("{GROUP}/{VERSION}"),
            "kind": "Widget",
            "metadata": { "name": name, "labels": { "app": "bench" } },
            "spec": { "replicas": 3, "color": "blue", "note": "n".repeat(64) },
        })
        .to_string(),
    )
}

/// Runs `genplane pki` for `data_dir` with `extra` flags; writes no kubeconfig (the server
/// writes them with its real port when it starts).
async fn pki(bin: &Path, data_dir: &Path, extra: &[&str]) -> anyhow::Result<()> {
    let out = tokio::process::Command::new(bin)
        .arg("pki")
        .arg(format!("--data-dir={}", data_dir.display()))
        .arg("--print-kubeconfig=admin")
        .args(extra)
        .output()
        .await
        .with_context(|| format!("running {} pki", bin.display()))?;
    anyhow::ensure!(
        out.status.success(),
        "genplane pki --data-dir={} failed ({}): {}",
        data_dir.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(())
}

/// Polls `path` on `client` every 20 ms until `done` holds of its JSON answer; fails after
/// [`SETUP_TIMEOUT`] with what it last answered and `server`'s log tail.
async fn wait_for(
    client: &Client,
    path: &str,
    what: &str,
    server: &Server,
    done: impl Fn(StatusCode, &serde_json::Value) -> bool,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    loop {
        let (status, body) = client.call(Method::GET, path, None).await?;
        let value: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        if done(status, &value) {
            return Ok(started.elapsed());
        }
        anyhow::ensure!(
            started.elapsed() < SETUP_TIMEOUT,
            "{what}: not after {SETUP_TIMEOUT:?}; GET {path} answered {status}: {}\n{} log:\n{}",
            String::from_utf8_lossy(&body[..body.len().min(800)]),
            server.base,
            tail(&server.log)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether `object`'s condition `kind` is `True`.
fn condition_true(object: &serde_json::Value, kind: &str) -> bool {
    object["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == kind && c["status"] == "True")
}

/// The two servers, set up, and how long the setup's waits took.
struct Setup {
    extension: Server,
    aggregator: Server,
    established: Duration,
    available: Duration,
    proxied: Duration,
}

/// Makes both servers' certificates, starts the extension with its CRD and the aggregator
/// with the APIService, and waits until the aggregator serves the extension's Widgets.
async fn setup(args: &Args, dir: &Path) -> anyhow::Result<Setup> {
    let bin = args.genplane();
    let aggregator_dir: PathBuf = dir.join("aggregator");
    let extension_dir: PathBuf = dir.join("extension");
    pki(&bin, &aggregator_dir, &[]).await?;
    let (namespace, name) = SERVICE;
    pki(
        &bin,
        &extension_dir,
        &[&format!(
            "--apiserver-cert-extra-sans={name}.{namespace}.svc"
        )],
    )
    .await?;

    let extension = Server::apiserver(
        &bin,
        &extension_dir,
        &[
            format!(
                "--requestheader-client-ca-file={}",
                aggregator_dir.join("pki/front-proxy-ca.crt").display()
            ),
            "--requestheader-allowed-names=front-proxy-client".to_owned(),
        ],
    )
    .await
    .context("starting the extension apiserver")?;
    let client = extension.client.clone();
    for namespace in [READ_NAMESPACE, WATCH_NAMESPACE] {
        create_namespace(&client, namespace)
            .await
            .with_context(|| format!("creating the namespace {namespace} on the extension"))?;
    }
    client
        .expect(
            Method::POST,
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            Some(widget_crd()),
            StatusCode::CREATED,
        )
        .await
        .context("creating the Widget CRD on the extension")?;
    let crd = format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.{GROUP}");
    let established = wait_for(
        &client,
        &crd,
        "the Widget CRD Established",
        &extension,
        |status, crd| status == StatusCode::OK && condition_true(crd, "Established"),
    )
    .await?;
    wait_for(
        &client,
        &widgets(READ_NAMESPACE),
        "the Widgets served by the extension",
        &extension,
        |status, _| status == StatusCode::OK,
    )
    .await?;

    let port = extension
        .base
        .rsplit_once(':')
        .map(|(_, port)| port.to_owned())
        .with_context(|| format!("no port in {}", extension.base))?;
    let aggregator = Server::apiserver(
        &bin,
        &aggregator_dir,
        &[format!(
            "--service-address-override={namespace}/{name}:443=127.0.0.1:{port}"
        )],
    )
    .await
    .context("starting the aggregator apiserver")?;
    let ca =
        std::fs::read(extension_dir.join("pki/ca.crt")).context("reading the extension's CA")?;
    let api_service = serde_json::json!({
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": { "name": API_SERVICE },
        "spec": {
            "group": GROUP,
            "version": VERSION,
            "groupPriorityMinimum": 1000,
            "versionPriority": 100,
            "service": { "namespace": namespace, "name": name, "port": 443 },
            "caBundle": base64::engine::general_purpose::STANDARD.encode(ca),
        },
    });
    let started = Instant::now();
    aggregator
        .client
        .expect(
            Method::POST,
            "/apis/apiregistration.k8s.io/v1/apiservices",
            Some(Bytes::from(api_service.to_string())),
            StatusCode::CREATED,
        )
        .await
        .context("creating the APIService on the aggregator")?;
    let path = format!("/apis/apiregistration.k8s.io/v1/apiservices/{API_SERVICE}");
    wait_for(
        &aggregator.client,
        &path,
        "the APIService Available",
        &aggregator,
        |status, object| status == StatusCode::OK && condition_true(object, "Available"),
    )
    .await
    .with_context(|| format!("the extension's log:\n{}", tail(&extension.log)))?;
    let available = started.elapsed();
    wait_for(
        &aggregator.client,
        &widgets(READ_NAMESPACE),
        "the Widgets served through the aggregator",
        &aggregator,
        |status, _| status == StatusCode::OK,
    )
    .await?;
    let proxied = started.elapsed();
    Ok(Setup {
        extension,
        aggregator,
        established,
        available,
        proxied,
    })
}

/// What one side (directly, or through the aggregator) measured in [`side_by_side`].
#[derive(Debug, Default)]
struct Measured {
    /// Requests per second.
    rate: f64,
    /// Sorted latencies of the counted requests, in microseconds.
    latencies: Vec<u64>,
    /// The extension's CPU per request, in microseconds.
    extension_us: f64,
    /// The aggregator's CPU per request, in microseconds.
    aggregator_us: f64,
}

impl Measured {
    fn latency_ms(&self, q: f64) -> f64 {
        if self.latencies.is_empty() {
            return f64::NAN;
        }
        quantile(&self.latencies, q) as f64 / 1e3
    }
}

/// An op that GETs `path` on `client`, expecting 200, and records each latency in `latencies`.
fn get_op(client: &Client, path: &str, latencies: &Arc<Mutex<Vec<u64>>>) -> Op {
    let (client, path, latencies) = (client.clone(), path.to_owned(), latencies.clone());
    Arc::new(move |_| {
        let (client, path, latencies) = (client.clone(), path.clone(), latencies.clone());
        Box::pin(async move {
            let started = Instant::now();
            client
                .expect(Method::GET, &path, None, StatusCode::OK)
                .await?;
            let took = started.elapsed().as_micros() as u64;
            if let Ok(mut latencies) = latencies.lock() {
                latencies.push(took);
            }
            Ok(())
        })
    })
}

/// GETs of `path` directly from the extension (`direct`) and through the aggregator
/// (`through`), in interleaved slices of `--slice` seconds at `--concurrency`, after one
/// warm-up round that is not counted; odd rounds run them in reverse order. Over each side's
/// slices, the CPU time of each process is counted apart.
async fn side_by_side(
    args: &Args,
    path: &str,
    direct: &Client,
    through: &Client,
    pids: Pids,
) -> anyhow::Result<[Measured; 2]> {
    let slice = Duration::from_secs_f64(args.slice);
    let latencies = [
        Arc::new(Mutex::new(Vec::new())),
        Arc::new(Mutex::new(Vec::new())),
    ];
    let ops = [
        get_op(direct, path, &latencies[0]),
        get_op(through, path, &latencies[1]),
    ];
    let counter = Arc::new(std::sync::atomic::AtomicU64::new(0));
    // Per side: requests, time, the extension's ticks, the aggregator's ticks.
    let mut totals = [(0u64, Duration::ZERO, 0u64, 0u64); 2];
    for round in 0..=args.rounds {
        let order = if round % 2 == 1 { [1, 0] } else { [0, 1] };
        for i in order {
            let before = pids.ticks()?;
            let (done, took) = run_slice(&ops[i], &counter, args.concurrency, slice)
                .await
                .with_context(|| {
                    format!(
                        "GET {path} {}",
                        ["from the extension", "through the aggregator"][i]
                    )
                })?;
            let after = pids.ticks()?;
            if round == 0 {
                if let Ok(mut latencies) = latencies[i].lock() {
                    latencies.clear();
                }
                continue;
            }
            totals[i].0 += done;
            totals[i].1 += took;
            totals[i].2 += after.0 - before.0;
            totals[i].3 += after.1 - before.1;
        }
    }
    let us_per = |ticks: u64, done: u64| {
        ticks as f64 * 1e6 / process::TICKS_PER_SECOND as f64 / done.max(1) as f64
    };
    let mut measured: [Measured; 2] = Default::default();
    for (i, m) in measured.iter_mut().enumerate() {
        let (done, took, extension, aggregator) = totals[i];
        let mut sorted = latencies[i].lock().map(|l| l.clone()).unwrap_or_default();
        sorted.sort_unstable();
        *m = Measured {
            rate: done as f64 / took.as_secs_f64(),
            latencies: sorted,
            extension_us: us_per(extension, done),
            aggregator_us: us_per(aggregator, done),
        };
    }
    Ok(measured)
}

/// The two server processes.
#[derive(Clone, Copy, Debug)]
struct Pids {
    extension: u32,
    aggregator: u32,
}

impl Pids {
    /// The CPU ticks of the extension and of the aggregator so far.
    fn ticks(&self) -> anyhow::Result<(u64, u64)> {
        Ok((
            process::cpu_ticks(&[self.extension])?,
            process::cpu_ticks(&[self.aggregator])?,
        ))
    }
}

/// The body `client` answers for `path` (fails unless 200).
async fn fetch(client: &Client, path: &str) -> anyhow::Result<Bytes> {
    client.expect(Method::GET, path, None, StatusCode::OK).await
}

/// Measures GET of one Widget and LIST of the namespace, both ways, and prints the table.
async fn reads(args: &Args, setup: &Setup, pids: Pids) -> anyhow::Result<()> {
    let collection = widgets(READ_NAMESPACE);
    for i in 0..args.objects.max(1) {
        setup
            .extension
            .client
            .expect(
                Method::POST,
                &collection,
                Some(widget(&format!("w-{i:06}"))),
                StatusCode::CREATED,
            )
            .await
            .context("creating the read Widgets on the extension")?;
    }
    let one = format!("{collection}/w-{:06}", args.objects.max(1) / 2);
    println!(
        "\nGET and LIST of Widgets directly from the extension and through the aggregator, \
         concurrency {} on one HTTP/2 connection each, {} rounds of {:.2} s, interleaved",
        args.concurrency, args.rounds, args.slice
    );
    println!(
        "  {:<6} {:<16} {:>7} {:>9} {:>8} {:>8}   {:>24}",
        "", "", "bytes", "req/s", "p50 ms", "p99 ms", "CPU us/req: ext, agg, sum"
    );
    let mut ratios = Vec::new();
    for (label, path) in [("GET", one.clone()), ("LIST", collection.clone())] {
        let direct_body = fetch(&setup.extension.client, &path).await?;
        let through_body = fetch(&setup.aggregator.client, &path)
            .await
            .context("reading through the aggregator")?;
        let [direct, through] = side_by_side(
            args,
            &path,
            &setup.extension.client,
            &setup.aggregator.client,
            pids,
        )
        .await?;
        for (side, m, bytes) in [
            ("direct", &direct, direct_body.len()),
            ("via aggregator", &through, through_body.len()),
        ] {
            println!(
                "  {label:<6} {side:<16} {bytes:>7} {:>9.0} {:>8.2} {:>8.2}   {:>8.0} {:>7.0} {:>7.0}",
                m.rate,
                m.latency_ms(0.5),
                m.latency_ms(0.99),
                m.extension_us,
                m.aggregator_us,
                m.extension_us + m.aggregator_us,
            );
        }
        ratios.push((label, direct, through));
    }
    for (label, direct, through) in &ratios {
        let target = if *label == "GET" {
            " (target <= 1.5x)"
        } else {
            ""
        };
        println!(
            "  {label}: the proxy's CPU / the direct CPU {:.2}x{target}; all CPU via the \
             aggregator / direct {:.2}x; rate via the aggregator {:.0}% of direct, p50 +{:.2} ms",
            through.aggregator_us / direct.extension_us.max(f64::MIN_POSITIVE),
            (through.aggregator_us + through.extension_us)
                / direct.extension_us.max(f64::MIN_POSITIVE),
            100.0 * through.rate / direct.rate,
            through.latency_ms(0.5) - direct.latency_ms(0.5),
        );
    }
    println!(
        "  (CPU: user+system time of each server process over its side's slices, per request; \
         direct: the extension's alone; via the aggregator, its CPU is what the proxy adds)"
    );
    Ok(())
}

/// The name of the watched Widget `i`.
fn event_name(i: usize) -> String {
    format!("e-{i:06}")
}

/// Reads a watch stream frame by frame as it arrives (never the whole body) and notes in
/// `arrivals[i]` when the ADDED event of the Widget `e-<i>` arrived, in nanoseconds since
/// `base`, until every slot is filled or the stream ends.
async fn record_arrivals(
    response: hyper::Response<hyper::body::Incoming>,
    base: Instant,
    arrivals: Arc<Mutex<Vec<Option<u64>>>>,
) -> anyhow::Result<()> {
    let mut body = response.into_body();
    let expected = arrivals.lock().map(|a| a.len()).unwrap_or_default();
    let mut seen = 0;
    let mut pending: Vec<u8> = Vec::new();
    while seen < expected {
        let Some(frame) = body.frame().await else {
            anyhow::bail!("the watch ended after {seen} of {expected} events");
        };
        let Ok(data) = frame.context("reading the watch")?.into_data() else {
            continue;
        };
        let now = base.elapsed().as_nanos() as u64;
        pending.extend_from_slice(&data);
        while let Some(end) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let event: serde_json::Value =
                serde_json::from_slice(&line).context("a watch event that is not JSON")?;
            anyhow::ensure!(event["type"] != "ERROR", "the watch failed: {event}");
            if event["type"] != "ADDED" {
                continue;
            }
            let index = event["object"]["metadata"]["name"]
                .as_str()
                .and_then(|name| name.strip_prefix("e-"))
                .and_then(|i| i.parse::<usize>().ok());
            if let Some(i) = index
                && let Ok(mut arrivals) = arrivals.lock()
                && i < arrivals.len()
                && arrivals[i].is_none()
            {
                arrivals[i] = Some(now);
                seen += 1;
            }
        }
    }
    Ok(())
}

/// Opens a watch of the watched namespace's Widgets from `rv` on `client`.
async fn open_watch(
    client: &Client,
    rv: &str,
) -> anyhow::Result<hyper::Response<hyper::body::Incoming>> {
    let path = format!("{}?watch=1&resourceVersion={rv}", widgets(WATCH_NAMESPACE));
    let response = client.start(Method::GET, &path, None).await?;
    if response.status() != StatusCode::OK {
        let status = response.status();
        let body = response.into_body().collect().await?.to_bytes();
        anyhow::bail!(
            "watch {path}: {status}: {}",
            String::from_utf8_lossy(&body[..body.len().min(500)])
        );
    }
    Ok(response)
}

/// What one watch saw of the paced creates.
struct Seen {
    /// From each create's send to its event's arrival, in nanoseconds (`None`: never arrived).
    latencies: Vec<Option<u64>>,
    /// Events that arrived only after the next create was sent (or never).
    late: usize,
}

impl Seen {
    /// What a watch whose events arrived at `arrivals` saw of the creates sent at `sent`
    /// (both in nanoseconds since the same instant).
    fn of(arrivals: &[Option<u64>], sent: &[u64]) -> Self {
        let latencies: Vec<Option<u64>> = arrivals
            .iter()
            .zip(sent)
            .map(|(arrived, sent)| arrived.map(|a| a.saturating_sub(*sent)))
            .collect();
        let late = arrivals
            .iter()
            .enumerate()
            .filter(|(i, arrived)| match (arrived, sent.get(i + 1)) {
                (None, _) => true,
                (Some(at), Some(next)) => at > next,
                (Some(_), None) => false,
            })
            .count();
        Self { latencies, late }
    }

    /// The sorted latencies of the events that arrived.
    fn sorted(&self) -> Vec<u64> {
        let mut sorted: Vec<u64> = self.latencies.iter().flatten().copied().collect();
        sorted.sort_unstable();
        sorted
    }
}

/// Nanoseconds as milliseconds.
fn ns_ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// The watch event latency, directly and through the aggregator, and prints it.
async fn watch_events(args: &Args, setup: &Setup) -> anyhow::Result<()> {
    let events = args.agg_events.max(2);
    let gap = Duration::from_millis(args.agg_event_interval_ms);
    let list = fetch(&setup.extension.client, &widgets(WATCH_NAMESPACE)).await?;
    let list: serde_json::Value = serde_json::from_slice(&list)?;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .context("the Widget list has no resourceVersion")?
        .to_owned();
    // Connections of their own, so that the GETs' connections carry nothing of theirs.
    let direct = Client::connect(&setup.extension.base, setup.extension.tls.clone()).await?;
    let through = Client::connect(&setup.aggregator.base, setup.aggregator.tls.clone()).await?;
    let base = Instant::now();
    let arrivals = [
        Arc::new(Mutex::new(vec![None; events])),
        Arc::new(Mutex::new(vec![None; events])),
    ];
    let mut readers = Vec::new();
    for (client, arrivals, what) in [
        (&direct, &arrivals[0], "directly on the extension"),
        (&through, &arrivals[1], "through the aggregator"),
    ] {
        let response = open_watch(client, &rv)
            .await
            .with_context(|| format!("opening the watch {what}"))?;
        let arrivals = arrivals.clone();
        readers.push(tokio::spawn(async move {
            record_arrivals(response, base, arrivals)
                .await
                .with_context(|| format!("the watch {what}"))
        }));
    }
    // Both answered their heads; let them settle before the first create.
    tokio::time::sleep(args.settle(Duration::from_millis(400))).await;

    let mut sent = Vec::with_capacity(events);
    let mut answered = Vec::with_capacity(events);
    let mut next = Instant::now();
    for i in 0..events {
        sent.push(base.elapsed().as_nanos() as u64);
        setup
            .extension
            .client
            .expect(
                Method::POST,
                &widgets(WATCH_NAMESPACE),
                Some(widget(&event_name(i))),
                StatusCode::CREATED,
            )
            .await
            .context("creating a watched Widget on the extension")?;
        answered.push(base.elapsed().as_nanos() as u64 - sent[i]);
        next += gap;
        tokio::time::sleep_until(next.into()).await;
    }
    let deadline = tokio::time::Instant::now() + DRAIN_TIMEOUT;
    let mut failures = Vec::new();
    for (reader, what) in readers.into_iter().zip(["direct", "via aggregator"]) {
        let abort = reader.abort_handle();
        match tokio::time::timeout_at(deadline, reader).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => failures.push(format!("{what}: {e:#}")),
            Ok(Err(e)) => failures.push(format!("{what}: {e}")),
            Err(_) => {
                abort.abort();
                failures.push(format!(
                    "{what}: events still missing {DRAIN_TIMEOUT:?} after the last create"
                ));
            }
        }
    }
    let snapshot =
        |a: &Arc<Mutex<Vec<Option<u64>>>>| a.lock().map(|a| a.clone()).unwrap_or_default();
    let seen = [
        Seen::of(&snapshot(&arrivals[0]), &sent),
        Seen::of(&snapshot(&arrivals[1]), &sent),
    ];
    answered.sort_unstable();

    println!(
        "\nWatch events: a watch of a namespace's Widgets directly on the extension and one \
         through the aggregator, open together; {events} Widgets created on the extension, one \
         every {} ms (the create's answer took p50 {:.2} ms)",
        args.agg_event_interval_ms,
        ns_ms(quantile(&answered, 0.5)),
    );
    println!(
        "  {:<16} {:>9} {:>8} {:>8} {:>8} {:>9} {:>22}",
        "watch", "delivered", "p50 ms", "p99 ms", "max ms", "first ms", "held past next create"
    );
    for (side, seen) in ["direct", "via aggregator"].iter().zip(&seen) {
        let sorted = seen.sorted();
        let at = |q| {
            if sorted.is_empty() {
                f64::NAN
            } else {
                ns_ms(quantile(&sorted, q))
            }
        };
        println!(
            "  {side:<16} {:>5}/{:<3} {:>8.2} {:>8.2} {:>8.2} {:>9} {:>22}",
            sorted.len(),
            events,
            at(0.5),
            at(0.99),
            at(1.0),
            seen.latencies[0].map_or("never".to_owned(), |l| format!("{:.2}", ns_ms(l))),
            seen.late,
        );
    }
    // Per event: how much later it arrived through the aggregator than directly.
    let mut added: Vec<i64> = seen[0]
        .latencies
        .iter()
        .zip(&seen[1].latencies)
        .filter_map(|(direct, through)| Some((*through)? as i64 - (*direct)? as i64))
        .collect();
    added.sort_unstable();
    let direct_sorted = seen[0].sorted();
    if !added.is_empty() && !direct_sorted.is_empty() {
        let at = |q: f64| added[((added.len() - 1) as f64 * q).round() as usize] as f64 / 1e6;
        println!(
            "  added by the proxy, per event (via aggregator - direct): p50 {:+.2} ms, p99 {:+.2} ms, \
             max {:+.2} ms; the direct watch's own spread (p99 - p50): {:.2} ms",
            at(0.5),
            at(0.99),
            at(1.0),
            ns_ms(quantile(&direct_sorted, 0.99) - quantile(&direct_sorted, 0.5)),
        );
    }
    println!(
        "  (latency: from the create's send to the event's arrival; held: arrived after the next \
         create was sent, or never; target: no buffering: nothing held through the aggregator, \
         its latency the direct one within noise)"
    );
    for failure in &failures {
        println!("  watch failure: {failure}");
    }
    Ok(())
}

/// Sets up the extension and the aggregator, measures the reads and the watch events, stops
/// both.
pub(crate) async fn aggregation(args: &Args, dir: &Path) -> anyhow::Result<()> {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let dir = dir.join("aggregation");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut setup = setup(args, &dir).await?;
    println!(
        "\nAggregation: an extension apiserver serving widgets.{GROUP} (SQLite) behind an \
         aggregator apiserver (APIService {API_SERVICE}); load average before: {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "  setup: the CRD Established {:.0} ms after its POST; the APIService Available {:.0} ms \
         after its POST, its Widgets served through the aggregator after {:.0} ms",
        ms(setup.established),
        ms(setup.available),
        ms(setup.proxied)
    );
    let pids = Pids {
        extension: setup.extension.pid()?,
        aggregator: setup.aggregator.pid()?,
    };
    reads(args, &setup, pids).await?;
    watch_events(args, &setup).await?;
    setup
        .extension
        .check_alive()
        .context("the extension apiserver")?;
    setup
        .aggregator
        .check_alive()
        .context("the aggregator apiserver")?;
    let Setup {
        extension,
        aggregator,
        ..
    } = setup;
    aggregator.stop().await?;
    extension.stop().await
}
