//! API server benchmarks against the real `genplane apiserver` executable, measured side by
//! side in one run (these machines are noisy, so only ratios from the same run mean much):
//!
//! 1. time from spawn to `/readyz` answering 200 on an empty SQLite store, median of several
//!    starts, both on a fresh data directory (certificates generated) and on an existing one,
//!    and on an empty etcd (a fresh key prefix per start);
//! 2. ConfigMap create throughput over HTTPS/HTTP/2 with the admin client certificate, on the
//!    SQLite backend and the etcd backend, interleaved with raw etcd create transactions of the
//!    stored bytes at the same concurrency;
//! 3. GET and LIST throughput (consistent, and `resourceVersion=0`) against a bare hyper server
//!    answering the bytes captured from the apiserver, interleaved, same client and concurrency;
//! 4. watch fan-out: many watchers of one namespace over HTTP/2, then paced writes (delivery
//!    latency) and a burst of writes (delivered events per second);
//! 5. the apiserver's resident memory after start-up, with the watchers open, and after the load;
//! 6. (`--only apply`, run by `hack/bench/apply.sh`) server-side apply of a ConfigMap with 50
//!    data fields against a plain update (PUT) of the same object, interleaved, on SQLite;
//! 7. (`--only authz`, run by `hack/bench/authz.sh`) GET of a ConfigMap by a bearer-token user
//!    under RBAC with 1,000 RoleBindings against `AlwaysAllow`, two SQLite servers, interleaved;
//! 8. (`--only crd`, run by `hack/bench/crd.sh`) creates of custom resources of a CRD with a
//!    structural schema, and of one with a CEL rule, against ConfigMap creates, one SQLite
//!    server, interleaved;
//! 9. (`--only idle`) the memory the apiserver holds for clients that do not read: watches of
//!    a large collection without a resourceVersion and LISTs of it, over HTTP/2 and HTTP/1.1,
//!    per client and after the clients left (see `idle.rs`);
//! 10. (`--only memory`) memory per cached object: `--memory-objects` ConfigMaps in one SQLite
//!     server, against the size of their JSON, before and after a watcher received them all
//!     (see `memory.rs`);
//! 11. (`--only admission`, run by `hack/bench/admission.sh`) ConfigMap creates with one
//!     matching ValidatingAdmissionPolicy against the plugin disabled, two SQLite servers,
//!     interleaved (see `admission.rs`);
//! 12. (`--only fairness`, run by `hack/bench/fairness.sh`) a steady tenant's latency and a
//!     controller's Lease renewals without and with a flooding tenant, with API Priority and
//!     Fairness and with the in-flight limits alone (see `fairness.rs`);
//! 13. (`--only crd-scale`, run by `hack/bench/crdscale.sh`) thousands of CRDs shaped like a
//!     cloud provider's (Crossplane's) posted at once and in batches to one SQLite server: time
//!     to all `Established`, memory per CRD (settled and peak), discovery and OpenAPI latency
//!     and size, custom resources of a sample of kinds, and memory after the CRDs are deleted,
//!     against issue #43's targets (see `crdscale.rs`);
//! 14. (`--only aggregation`, run by `hack/bench/aggregation.sh`) GET and LIST of a custom
//!     resource and watch event latency directly from an extension API server and through an
//!     aggregator proxying its APIService, two SQLite servers, interleaved (see
//!     `aggregation.rs`);
//! 15. (`--only storage-scale`, run by `hack/bench/storagescale.sh`) a million small
//!     ConfigMaps and custom resources in one all-in-one server on SQLite and on etcd: memory
//!     against their JSON, cached and consistent GET, a paginated LIST of everything and a
//!     watch from an old resourceVersion at 10,000 objects and at all, the time to ready after
//!     a restart, and the deletion of a namespace of 100,000 (see `storagescale.rs`).
//!
//! Beside each throughput, the CPU time (user + system) the serving processes spent per
//! operation: on a shared machine it moves less than the rates do.
//!
//! `--compare PATH` measures a second `genplane` executable (say, a release build of an earlier
//! commit) in the same run: the creates, reads and authz parts start its servers beside the
//! ones under test, interleave them in the same rounds and print each measure for both and
//! their ratio, so that a before/after comparison does not depend on two runs' noise.
//!
//! Run it with `hack/bench/apiserver.sh` (release build); `--help` lists the knobs.

mod admission;
mod aggregation;
mod authz;
mod bare;
mod client;
mod crd;
mod crdscale;
mod fairness;
mod idle;
mod memory;
mod process;
mod storagescale;
mod tls;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use clap::Parser;
use etcd_client::{Compare, CompareOp, GetOptions, Txn, TxnOp};
use genplane_storage_etcd::testing::{EtcdServer, EtcdServerOptions};
use http_body_util::BodyExt as _;
use hyper::{Method, StatusCode};

use crate::client::Client;
use crate::process::{Server, memory};

#[derive(Parser, Debug)]
struct Args {
    /// The `genplane` executable under test (`hack/bench/apiserver.sh` builds it and passes
    /// the path).
    #[arg(long, default_value = "target/release/genplane")]
    genplane: PathBuf,
    /// A second `genplane` executable measured side by side with `--genplane` in the creates,
    /// reads and authz parts (for example a release build of an earlier commit).
    #[arg(long)]
    compare: Option<PathBuf>,
    /// The etcd executable.
    #[arg(long, default_value = "etcd")]
    etcd: PathBuf,
    /// A smoke run of a few seconds: small counts and short slices, whatever else is given.
    #[arg(long)]
    quick: bool,
    /// Requests in flight at once in the throughput measurements (one HTTP/2 connection).
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Measured rounds: each round runs every compared implementation for one slice, after one
    /// warm-up round, so that they are measured over the same stretch of time.
    #[arg(long, default_value_t = 6)]
    rounds: u32,
    /// Seconds each implementation runs per round.
    #[arg(long, default_value_t = 1.0)]
    slice: f64,
    /// Size of each ConfigMap's data value in bytes.
    #[arg(long, default_value_t = 1024)]
    value_size: usize,
    /// ConfigMaps in the namespace that GET and LIST read.
    #[arg(long, default_value_t = 100)]
    objects: usize,
    /// Watchers in the fan-out measurement.
    #[arg(long, default_value_t = 1000)]
    watchers: usize,
    /// Watch streams per HTTP/2 connection (the server allows 1,000).
    #[arg(long, default_value_t = 500)]
    streams_per_connection: usize,
    /// Writes in each phase of the fan-out measurement (paced, then a burst).
    #[arg(long, default_value_t = 100)]
    events: usize,
    /// Writes per second in the paced phase.
    #[arg(long, default_value_t = 20)]
    event_rate: u64,
    /// RoleBindings of other subjects on the servers of the authz part (and a tenth as many
    /// ClusterRoleBindings).
    #[arg(long, default_value_t = 1000)]
    bindings: usize,
    /// Starts of the start-up measurement, per kind (fresh data directory, existing one).
    #[arg(long, default_value_t = 7)]
    starts: usize,
    /// Requests per kind of client in the idle-client part.
    #[arg(long, default_value_t = 20)]
    idle_watchers: usize,
    /// MiB of ConfigMaps in the collection the idle clients watch and list.
    #[arg(long, default_value_t = 40)]
    collection_mib: usize,
    /// KiB of data per ConfigMap in the idle-client part.
    #[arg(long, default_value_t = 16)]
    idle_object_kib: usize,
    /// ConfigMaps (of `--value-size` bytes of data) in the memory-per-object part.
    #[arg(long, default_value_t = 100_000)]
    memory_objects: usize,
    /// ConfigMaps in the namespace the flooding tenant lists (`--only fairness`).
    #[arg(long, default_value_t = 2000)]
    fair_objects: usize,
    /// Connections the flooding tenant sends from, each request after request.
    #[arg(long, default_value_t = 50)]
    fair_flood_connections: usize,
    /// Requests a second of the steady tenant.
    #[arg(long, default_value_t = 20.0)]
    fair_steady_rate: f64,
    /// Seconds of each phase (without, then with the flood).
    #[arg(long, default_value_t = 20.0)]
    fair_seconds: f64,
    /// The servers' `--max-requests-inflight` in the fairness part (their
    /// `--max-mutating-requests-inflight` is half of it); unset: the defaults (400 and 200).
    #[arg(long)]
    fair_max_inflight: Option<usize>,
    /// In the fairness part, the server runs on CPU 0 alone and this program on the others
    /// (`taskset`; at least 2 CPUs): the server's fairness measured apart from the CPU this
    /// program spends on the flood's answers.
    #[arg(long)]
    fair_pin: bool,
    /// CRDs in the CRD-scale part's generated set (`--only crd-scale`).
    #[arg(long, default_value_t = 2000)]
    crd_scale_count: usize,
    /// CRDs per batch in the CRD-scale part's batch mode, each batch waited for until
    /// Established; 0 skips the mode.
    #[arg(long, default_value_t = 100)]
    crd_scale_batch: usize,
    /// The fraction of the generated CRDs with `x-kubernetes-validations` CEL rules.
    #[arg(long, default_value_t = 0.1)]
    crd_scale_cel_fraction: f64,
    /// The seed the CRD set is generated from (the same seed, the same set).
    #[arg(long, default_value_t = 43)]
    crd_scale_seed: u64,
    /// CRD creates (and deletes) in flight at once in the CRD-scale part.
    #[arg(long, default_value_t = 32)]
    crd_scale_in_flight: usize,
    /// Kinds whose custom resources are created, read and listed in the CRD-scale part.
    #[arg(long, default_value_t = 20)]
    crd_scale_samples: usize,
    /// Seconds the CRD-scale part waits for the CRDs to be Established (and to be gone after
    /// their deletion) before it reports how many were.
    #[arg(long, default_value_t = 600.0)]
    crd_scale_timeout: f64,
    /// The role serving the CRDs in the CRD-scale part: `all-in-one` (API server and
    /// controllers, as issue #43 measured it) or `apiserver`.
    #[arg(long, default_value = "all-in-one")]
    crd_scale_role: String,
    /// The CRD-scale part kills its server once the server's RSS passes this many MiB, and
    /// reports how far it got (default: half the machine's available memory at the start of
    /// each mode).
    #[arg(long)]
    crd_scale_max_rss_mib: Option<u64>,
    /// Seconds after the last write of a phase (the last CRD `Established`, the last CRD
    /// gone) before the CRD-scale part reads the steady RSS: the server's watch window keeps
    /// the events of the last 75 seconds (as kube-apiserver's watch cache does) and trims it
    /// every 15, so memory that only those events hold is back by then. 0 reads it at once.
    #[arg(long, default_value_t = 95.0)]
    crd_scale_window: f64,
    /// Writes the CRD-scale part's generated set to this directory (a JSON file per CRD) and
    /// measures nothing.
    #[arg(long)]
    crd_scale_write: Option<PathBuf>,
    /// Objects in the storage-at-scale part (`--only storage-scale`).
    #[arg(long, default_value_t = 1_000_000)]
    scale_objects: usize,
    /// Objects at the storage-at-scale part's first point of measurement, whose costs per
    /// object the last point's are compared with.
    #[arg(long, default_value_t = 10_000)]
    scale_baseline: usize,
    /// Objects per namespace in the storage-at-scale part; the first namespace is deleted at
    /// its end.
    #[arg(long, default_value_t = 100_000)]
    scale_per_namespace: usize,
    /// Bytes of data in each object of the storage-at-scale part.
    #[arg(long, default_value_t = 64)]
    scale_value_size: usize,
    /// Creates in flight at once while the storage-at-scale part fills the store.
    #[arg(long, default_value_t = 64)]
    scale_in_flight: usize,
    /// Seconds each GET measurement of the storage-at-scale part runs.
    #[arg(long, default_value_t = 3.0)]
    scale_slice: f64,
    /// Creates between the old resourceVersion and the watch from it.
    #[arg(long, default_value_t = 1000)]
    scale_watch_events: usize,
    /// The backends of the storage-at-scale part.
    #[arg(long, value_delimiter = ',', default_value = "sqlite,etcd")]
    scale_backends: Vec<storagescale::Backend>,
    /// Custom resources created one at a time while a watch directly on the extension and one
    /// through the aggregator are open (`--only aggregation`).
    #[arg(long, default_value_t = 50)]
    agg_events: usize,
    /// Milliseconds between those creates.
    #[arg(long, default_value_t = 50)]
    agg_event_interval_ms: u64,
    /// Where data directories go (default: a temporary directory under /var/tmp, on disk).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The parts to run.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "startup,creates,reads,watch"
    )]
    only: Vec<Part>,
    /// Internal: serve the bare server's routes from this file.
    #[arg(long, hide = true)]
    serve_bare: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Part {
    Startup,
    Creates,
    Reads,
    Watch,
    Apply,
    Authz,
    Crd,
    Idle,
    Memory,
    Admission,
    Fairness,
    CrdScale,
    Aggregation,
    StorageScale,
}

impl Args {
    /// How long to let things settle before reading memory or between phases.
    fn settle(&self, full: Duration) -> Duration {
        if self.quick { full / 4 } else { full }
    }

    fn apply_quick(&mut self) {
        if self.quick {
            self.rounds = 1;
            self.slice = 0.25;
            self.objects = self.objects.min(20);
            self.watchers = self.watchers.min(50);
            self.events = self.events.min(20);
            self.event_rate = self.event_rate.max(50);
            self.starts = self.starts.min(3);
            self.bindings = self.bindings.min(100);
            self.idle_watchers = self.idle_watchers.min(4);
            self.collection_mib = self.collection_mib.min(4);
            self.memory_objects = self.memory_objects.min(2_000);
            self.fair_objects = self.fair_objects.min(200);
            self.fair_flood_connections = self.fair_flood_connections.min(8);
            self.fair_seconds = self.fair_seconds.min(3.0);
            self.crd_scale_count = self.crd_scale_count.min(50);
            self.crd_scale_batch = self.crd_scale_batch.min(20);
            self.crd_scale_samples = self.crd_scale_samples.min(5);
            self.crd_scale_timeout = self.crd_scale_timeout.min(120.0);
            self.agg_events = self.agg_events.min(20);
            self.scale_objects = self.scale_objects.min(2_000);
            self.scale_baseline = self.scale_baseline.min(500);
            self.scale_per_namespace = self.scale_per_namespace.min(500);
            self.scale_slice = self.scale_slice.min(0.5);
            self.scale_watch_events = self.scale_watch_events.min(50);
        }
    }

    fn genplane(&self) -> PathBuf {
        self.genplane.clone()
    }
}

/// One implementation's operation, boxed so that compared implementations share one loop.
type Op =
    Arc<dyn Fn(u64) -> Pin<Box<dyn Future<Output = anyhow::Result<()>> + Send>> + Send + Sync>;

/// Runs `op` from `concurrency` tasks for `duration`; returns the operations completed and the
/// time they took.
async fn run_slice(
    op: &Op,
    counter: &Arc<AtomicU64>,
    concurrency: usize,
    duration: Duration,
) -> anyhow::Result<(u64, Duration)> {
    let started = Instant::now();
    let deadline = started + duration;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let (op, counter) = (op.clone(), counter.clone());
        tasks.spawn(async move {
            let mut done = 0u64;
            while Instant::now() < deadline {
                op(counter.fetch_add(1, Ordering::Relaxed)).await?;
                done += 1;
            }
            anyhow::Ok(done)
        });
    }
    let mut done = 0;
    for result in tasks.join_all().await {
        done += result?;
    }
    Ok((done, started.elapsed()))
}

/// What [`interleaved`] measured for one op.
#[derive(Clone, Copy, Debug)]
struct Rate {
    /// Operations per second.
    ops: f64,
    /// CPU time the op's server processes spent per operation, in microseconds.
    cpu_us: f64,
}

/// Operations per second of each of `ops`, interleaved: every round runs each op for one
/// slice, after one warm-up round that is not counted; odd rounds run them in reverse order,
/// so that none always runs first (or right after another's load). Each op comes with the
/// processes that serve it, whose CPU time per operation is measured over its slices.
async fn interleaved(ops: &[(Op, Vec<u32>)], args: &Args) -> anyhow::Result<Vec<Rate>> {
    let slice = Duration::from_secs_f64(args.slice);
    let counters: Vec<Arc<AtomicU64>> = ops.iter().map(|_| Arc::new(AtomicU64::new(0))).collect();
    let mut totals = vec![(0u64, Duration::ZERO, 0u64); ops.len()];
    for round in 0..=args.rounds {
        let mut order: Vec<usize> = (0..ops.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let (op, pids) = &ops[i];
            let cpu = process::cpu_ticks(pids)?;
            let (done, took) = run_slice(op, &counters[i], args.concurrency, slice).await?;
            if round > 0 {
                totals[i].0 += done;
                totals[i].1 += took;
                totals[i].2 += process::cpu_ticks(pids)? - cpu;
            }
        }
    }
    Ok(totals
        .iter()
        .map(|(done, took, ticks)| Rate {
            ops: *done as f64 / took.as_secs_f64(),
            cpu_us: *ticks as f64 * 1e6 / process::TICKS_PER_SECOND as f64 / (*done).max(1) as f64,
        })
        .collect())
}

/// The value at quantile `q` of sorted `values`.
fn quantile(sorted: &[u64], q: f64) -> u64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// A ConfigMap named `name` whose `payload` value is `value_size` bytes, and an optional
/// `sent` value.
fn configmap(name: &str, value_size: usize, sent: Option<&str>) -> Bytes {
    let mut data = serde_json::json!({ "payload": "x".repeat(value_size) });
    if let Some(sent) = sent {
        data["sent"] = sent.into();
    }
    Bytes::from(
        serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": { "name": name },
            "data": data,
        })
        .to_string(),
    )
}

/// A ConfigMap `name` with `fields` data keys, one of which carries `n`.
fn wide_configmap(name: &str, fields: usize, n: u64) -> Bytes {
    let mut data = serde_json::Map::new();
    for i in 0..fields {
        data.insert(format!("key-{i:02}"), format!("value-{i:02}").into());
    }
    data.insert("key-00".into(), n.to_string().into());
    Bytes::from(
        serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": { "name": name },
            "data": data,
        })
        .to_string(),
    )
}

/// Server-side apply against a plain update of the same 50-field ConfigMaps, on SQLite: each
/// write changes one value; applies use one field manager with `force`, updates replace the
/// object without a resourceVersion (as `kubectl replace --force` does not, but as an
/// unconditional controller update does).
async fn apply(args: &Args, servers: &mut Servers) -> anyhow::Result<()> {
    const FIELDS: usize = 50;
    let namespace = "bench-apply";
    let objects = 64u64;
    let client = servers.sqlite.client.clone();
    create_namespace(&client, namespace).await?;
    for kind in ["put", "apply"] {
        for i in 0..objects {
            client
                .expect(
                    Method::POST,
                    &configmaps(namespace),
                    Some(wide_configmap(&format!("{kind}-{i}"), FIELDS, 0)),
                    StatusCode::CREATED,
                )
                .await?;
        }
    }
    let update: Op = {
        let client = client.clone();
        Arc::new(move |n| {
            let client = client.clone();
            Box::pin(async move {
                let name = format!("put-{}", n % objects);
                client
                    .expect(
                        Method::PUT,
                        &format!("{}/{name}", configmaps(namespace)),
                        Some(wide_configmap(&name, FIELDS, n)),
                        StatusCode::OK,
                    )
                    .await?;
                Ok(())
            })
        })
    };
    let apply: Op = {
        let client = client.clone();
        Arc::new(move |n| {
            let client = client.clone();
            Box::pin(async move {
                let name = format!("apply-{}", n % objects);
                client
                    .expect_typed(
                        Method::PATCH,
                        &format!(
                            "{}/{name}?fieldManager=bench&force=true",
                            configmaps(namespace)
                        ),
                        "application/apply-patch+yaml",
                        wide_configmap(&name, FIELDS, n),
                        StatusCode::OK,
                    )
                    .await
            })
        })
    };
    let pid = servers.sqlite.pid()?;
    let rates = interleaved(&[(update, vec![pid]), (apply, vec![pid])], args).await?;
    println!(
        "
Server-side apply vs update of a ConfigMap with {FIELDS} data fields on SQLite, concurrency {}, {} rounds of {:.2} s, interleaved",
        args.concurrency, args.rounds, args.slice
    );
    println!(
        "  {:<36} {:>8} {:>10} {:>18}",
        "", "ops/s", "vs update", "server CPU us/op"
    );
    println!(
        "  {:<36} {:>8.0} {:>10} {:>18.0}",
        "update (PUT)", rates[0].ops, "", rates[0].cpu_us
    );
    println!(
        "  {:<36} {:>8.0} {:>9.0}% {:>18.0}",
        "server-side apply (PATCH, force)",
        rates[1].ops,
        100.0 * rates[1].ops / rates[0].ops,
        rates[1].cpu_us
    );
    servers.sqlite.check_alive()
}

async fn create_namespace(client: &Client, name: &str) -> anyhow::Result<()> {
    let body = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": { "name": name },
    });
    client
        .expect(
            Method::POST,
            "/api/v1/namespaces",
            Some(Bytes::from(body.to_string())),
            StatusCode::CREATED,
        )
        .await?;
    Ok(())
}

fn configmaps(namespace: &str) -> String {
    format!("/api/v1/namespaces/{namespace}/configmaps")
}

/// The running servers every part after start-up shares.
struct Servers {
    _etcd: EtcdServer,
    raw: etcd_client::KvClient,
    sqlite: Server,
    etcd: Server,
    /// The `--compare` executable's servers: SQLite, and etcd under the key prefix
    /// [`COMPARE_PREFIX`] of the same etcd.
    compare: Option<[Server; 2]>,
}

/// The etcd key prefix of the `--compare` executable's apiserver, so that it shares etcd with
/// the one under test without sharing its objects.
const COMPARE_PREFIX: &str = "/compare";

/// Starts `bin`'s apiservers on SQLite under `dir/sqlite` and on `etcd` under `dir/etcd`.
async fn apiservers_of(
    bin: &Path,
    dir: &Path,
    etcd: &EtcdServer,
    extra: &[String],
) -> anyhow::Result<[Server; 2]> {
    std::fs::create_dir_all(dir)?;
    let sqlite = Server::apiserver(bin, &dir.join("sqlite"), &[])
        .await
        .with_context(|| format!("starting {} on SQLite", bin.display()))?;
    let mut flags = vec![
        "--storage-backend=etcd".to_owned(),
        format!("--etcd-servers={}", etcd.endpoint()),
    ];
    flags.extend_from_slice(extra);
    let on_etcd = Server::apiserver(bin, &dir.join("etcd"), &flags)
        .await
        .with_context(|| format!("starting {} on etcd", bin.display()))?;
    Ok([sqlite, on_etcd])
}

impl Servers {
    async fn start(args: &Args, dir: &Path) -> anyhow::Result<Self> {
        let etcd = EtcdServer::start_with(EtcdServerOptions {
            binary: args.etcd.clone(),
            ..EtcdServerOptions::default()
        })
        .await
        .context("starting etcd")?;
        let raw = etcd_client::Client::connect([etcd.endpoint()], None)
            .await?
            .kv_client();
        let [sqlite, on_etcd] = apiservers_of(&args.genplane(), dir, &etcd, &[]).await?;
        let compare = match &args.compare {
            Some(bin) => Some(
                apiservers_of(
                    bin,
                    &dir.join("compare"),
                    &etcd,
                    &[format!("--etcd-prefix={COMPARE_PREFIX}")],
                )
                .await?,
            ),
            None => None,
        };
        Ok(Servers {
            _etcd: etcd,
            raw,
            sqlite,
            etcd: on_etcd,
            compare,
        })
    }

    fn apiservers(&mut self) -> [(&'static str, &mut Server); 2] {
        [("sqlite", &mut self.sqlite), ("etcd", &mut self.etcd)]
    }

    /// The apiservers of both executables.
    fn every(&mut self) -> Vec<(&'static str, &mut Server)> {
        let mut every = vec![("sqlite", &mut self.sqlite), ("etcd", &mut self.etcd)];
        if let Some([sqlite, etcd]) = &mut self.compare {
            every.extend([("sqlite", sqlite), ("etcd", etcd)]);
        }
        every
    }

    /// The `--compare` executable's servers, labelled as [`Servers::apiservers`] labels them.
    fn compared(&mut self) -> Vec<(&'static str, &mut Server)> {
        match &mut self.compare {
            Some([sqlite, etcd]) => vec![("sqlite", sqlite), ("etcd", etcd)],
            None => Vec::new(),
        }
    }
}

async fn startup(args: &Args, dir: &Path) -> anyhow::Result<()> {
    // The executable under test, then the `--compare` one: their starts alternate, so that
    // both see the same machine.
    let mut bins = vec![("genplane", args.genplane())];
    if let Some(compare) = &args.compare {
        bins.push(("--compare", compare.clone()));
    }
    println!(
        "start-up: spawn until /readyz answers 200 on an empty SQLite store (and on an empty \
         etcd), {} starts each (target: < 100 ms; VmRSS settled after readiness: < 30 MiB)",
        args.starts
    );
    let settle = args.settle(Duration::from_secs(10));
    let mut fresh = vec![Vec::new(); bins.len()];
    let mut again = vec![Vec::new(); bins.len()];
    let mut at_ready = vec![Vec::new(); bins.len()];
    let mut settled = vec![Vec::new(); bins.len()];
    for i in 0..args.starts {
        for (b, (_, bin)) in bins.iter().enumerate() {
            // The first starts also wait for the memory to settle.
            let wait = (i < 3).then_some(settle);
            let started =
                process::time_to_ready(bin, &dir.join(format!("start-{b}-{i}")), &[], wait).await?;
            fresh[b].push(started.took);
            at_ready[b].push(started.rss);
            settled[b].extend(started.settled);
        }
    }
    // Existing data directory: certificates and the database are there from the first start.
    for _ in 0..args.starts {
        for (b, (_, bin)) in bins.iter().enumerate() {
            let data = dir.join(format!("start-{b}-0"));
            again[b].push(process::time_to_ready(bin, &data, &[], None).await?.took);
        }
    }
    // A fresh etcd: an empty key prefix per start, so that every start finds nothing stored
    // (the cache of each resource must establish that it is current without waiting for a
    // progress report; etcd 3.4 gives none that can be trusted).
    let etcd = EtcdServer::start_with(EtcdServerOptions {
        binary: args.etcd.clone(),
        ..EtcdServerOptions::default()
    })
    .await
    .context("starting etcd")?;
    let mut on_etcd = vec![Vec::new(); bins.len()];
    for i in 0..args.starts {
        for (b, (_, bin)) in bins.iter().enumerate() {
            let flags = [
                "--storage-backend=etcd".to_owned(),
                format!("--etcd-servers={}", etcd.endpoint()),
                format!("--etcd-prefix=/start-{b}-{i}"),
            ];
            let data = dir.join(format!("etcd-start-{b}-{i}"));
            on_etcd[b].push(process::time_to_ready(bin, &data, &flags, None).await?.took);
        }
    }
    let median = |values: &mut Vec<u64>| {
        values.sort_unstable();
        values[values.len() / 2]
    };
    for (b, (label, _)) in bins.iter().enumerate() {
        println!("  {label}:");
        for (kind, times) in [
            (
                "fresh data directory (generates certificates)",
                &mut fresh[b],
            ),
            ("existing data directory", &mut again[b]),
            ("empty etcd (target: < 1 s)", &mut on_etcd[b]),
        ] {
            times.sort();
            println!(
                "    {kind:<48} median {:>6.1} ms  (min {:.1}, max {:.1})",
                ms(times[times.len() / 2]),
                ms(times[0]),
                ms(times[times.len() - 1]),
            );
        }
        println!(
            "    VmRSS at readiness: median {:.1} MiB; settled: median {:.1} MiB",
            mib(median(&mut at_ready[b])),
            mib(median(&mut settled[b])),
        );
        match process::symbol_order(&bins[b].1) {
            Ok(said) => println!("    code layout: {said}"),
            Err(error) => println!("    code layout: not known ({error:#})"),
        }
    }
    Ok(())
}

async fn creates(args: &Args, servers: &mut Servers) -> anyhow::Result<()> {
    let namespace = "bench-create";
    for (_, server) in servers.every() {
        create_namespace(&server.client, namespace).await?;
    }
    // The bytes genplane stores for such a ConfigMap, read back from etcd, for the raw puts.
    let sample = "cm-sample";
    servers
        .etcd
        .client
        .expect(
            Method::POST,
            &configmaps(namespace),
            Some(configmap(sample, args.value_size, None)),
            StatusCode::CREATED,
        )
        .await?;
    let stored = servers
        .raw
        .get("/registry/", Some(GetOptions::new().with_prefix()))
        .await?
        .kvs()
        .iter()
        .find(|kv| {
            kv.key()
                .ends_with(format!("/{namespace}/{sample}").as_bytes())
        })
        .map(|kv| Bytes::copy_from_slice(kv.value()))
        .context("the sample ConfigMap is not in etcd under /registry/")?;

    let raw_op: Op = {
        let (raw, value) = (servers.raw.clone(), stored.clone());
        Arc::new(move |n| {
            let (mut raw, value) = (raw.clone(), value.clone());
            Box::pin(async move {
                let key = format!("/bench-raw/configmaps/{namespace}/cm-{n:09}");
                let txn = Txn::new()
                    .when([Compare::mod_revision(key.clone(), CompareOp::Equal, 0)])
                    .and_then([TxnOp::put(key, value.to_vec(), None)]);
                anyhow::ensure!(raw.txn(txn).await?.succeeded(), "raw create found the key");
                Ok(())
            })
        })
    };
    let api_op = |client: &Client| -> Op {
        let client = client.clone();
        let value_size = args.value_size;
        Arc::new(move |n| {
            let client = client.clone();
            Box::pin(async move {
                let body = configmap(&format!("cm-{n:09}"), value_size, None);
                client
                    .expect(
                        Method::POST,
                        &configmaps(namespace),
                        Some(body),
                        StatusCode::CREATED,
                    )
                    .await?;
                Ok(())
            })
        })
    };
    let etcd_pid = process::child_named("etcd")?;
    let mut ops = vec![
        (raw_op, vec![etcd_pid]),
        (
            api_op(&servers.etcd.client),
            vec![servers.etcd.pid()?, etcd_pid],
        ),
        (api_op(&servers.sqlite.client), vec![servers.sqlite.pid()?]),
    ];
    if let Some([sqlite, etcd]) = &servers.compare {
        ops.push((api_op(&etcd.client), vec![etcd.pid()?, etcd_pid]));
        ops.push((api_op(&sqlite.client), vec![sqlite.pid()?]));
    }
    let rates = interleaved(&ops, args).await?;
    println!(
        "\nConfigMap creates, {} B stored values, concurrency {}, {} rounds of {:.2} s each, interleaved",
        stored.len(),
        args.concurrency,
        args.rounds,
        args.slice
    );
    println!(
        "  {:<36} {:>8} {:>14} {:>22}",
        "", "ops/s", "vs raw etcd", "server CPU us/op"
    );
    println!(
        "  {:<36} {:>8.0} {:>14} {:>22.0}",
        "raw etcd create transactions", rates[0].ops, "", rates[0].cpu_us
    );
    println!(
        "  {:<36} {:>8.0} {:>13.0}% {:>22}",
        "apiserver on etcd (target >= 90%)",
        rates[1].ops,
        100.0 * rates[1].ops / rates[0].ops,
        format!("{:.0} (apiserver+etcd)", rates[1].cpu_us)
    );
    println!(
        "  {:<36} {:>8.0} {:>13.2}x {:>22.0}",
        "apiserver on SQLite (target >= 3x)",
        rates[2].ops,
        rates[2].ops / rates[0].ops,
        rates[2].cpu_us
    );
    if let Some(compare) = &args.compare {
        println!("  --compare {}:", compare.display());
        for (label, this, that) in [
            ("apiserver on etcd", rates[1], rates[3]),
            ("apiserver on SQLite", rates[2], rates[4]),
        ] {
            println!(
                "  {:<36} {:>8.0} {:>13.2}x {:>22.0}   (--genplane: {:.2}x its ops/s, {:.2}x its CPU/op)",
                label,
                that.ops,
                that.ops / rates[0].ops,
                that.cpu_us,
                this.ops / that.ops,
                this.cpu_us / that.cpu_us,
            );
        }
    }
    for (_, server) in servers.every() {
        server.check_alive()?;
    }
    Ok(())
}

/// Creates the namespace `bench-read-BACKEND` holding `--objects` ConfigMaps; returns its name.
async fn fill_read_namespace(
    args: &Args,
    client: &Client,
    backend: &str,
) -> anyhow::Result<String> {
    let namespace = format!("bench-read-{backend}");
    create_namespace(client, &namespace).await?;
    for i in 0..args.objects {
        client
            .expect(
                Method::POST,
                &configmaps(&namespace),
                Some(configmap(&format!("cm-{i:06}"), args.value_size, None)),
                StatusCode::CREATED,
            )
            .await?;
    }
    Ok(namespace)
}

async fn reads(args: &Args, servers: &mut Servers, dir: &Path) -> anyhow::Result<()> {
    // Fill one namespace per backend and capture each answer once.
    let mut routes = bare::Routes {
        cert: dir.join("sqlite/pki/apiserver.crt"),
        key: dir.join("sqlite/pki/apiserver.key"),
        client_ca: dir.join("sqlite/pki/ca.crt"),
        answers: Vec::new(),
    };
    // The `--compare` servers hold the same objects and are read at the same paths.
    let mut compared = Vec::new();
    for (backend, server) in servers.compared() {
        fill_read_namespace(args, &server.client, backend).await?;
        compared.push((backend, server.client.clone(), server.pid()?));
    }
    let mut cases = Vec::new();
    for (backend, server) in servers.apiservers() {
        let namespace = fill_read_namespace(args, &server.client, backend).await?;
        let one = format!("{}/cm-{:06}", configmaps(&namespace), args.objects / 2);
        let all = configmaps(&namespace);
        for (label, path) in [
            ("GET", one.clone()),
            ("GET ?resourceVersion=0", format!("{one}?resourceVersion=0")),
            ("LIST", all.clone()),
            (
                "LIST ?resourceVersion=0",
                format!("{all}?resourceVersion=0"),
            ),
        ] {
            let response = server.client.start(Method::GET, &path, None).await?;
            anyhow::ensure!(
                response.status() == StatusCode::OK,
                "GET {path}: {}",
                response.status()
            );
            let content_type = response
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("application/json")
                .to_owned();
            let body = response.into_body().collect().await?.to_bytes();
            cases.push((
                backend,
                label,
                path.clone(),
                body.len(),
                server.client.clone(),
                server.pid()?,
            ));
            routes.answers.push((path, content_type, body));
        }
    }
    let routes_file = dir.join("bare-routes.json");
    routes.write(&routes_file)?;
    let bare = Server::bare(&routes_file, servers.sqlite.tls.clone()).await?;

    println!(
        "\nGET and LIST, concurrency {}, {} objects of {} B data in the namespace, against a bare \
         hyper server answering the same bytes, interleaved",
        args.concurrency, args.objects, args.value_size
    );
    println!(
        "  {:<8} {:<24} {:>9} {:>12} {:>12} {:>8} {:>19}",
        "backend", "request", "bytes", "genplane/s", "bare/s", "ratio", "CPU us/op: gp, bare"
    );
    let bare_pid = bare.pid()?;
    for (backend, label, path, size, client, pid) in cases {
        let op = |client: &Client| -> Op {
            let (client, path) = (client.clone(), path.clone());
            Arc::new(move |_| {
                let (client, path) = (client.clone(), path.clone());
                Box::pin(async move {
                    client
                        .expect(Method::GET, &path, None, StatusCode::OK)
                        .await?;
                    Ok(())
                })
            })
        };
        let mut ops = vec![(op(&client), vec![pid]), (op(&bare.client), vec![bare_pid])];
        let compare = compared.iter().find(|(b, _, _)| *b == backend);
        if let Some((_, client, pid)) = compare {
            ops.push((op(client), vec![*pid]));
        }
        let rates = interleaved(&ops, args).await?;
        println!(
            "  {backend:<8} {label:<24} {size:>9} {:>12.0} {:>12.0} {:>7.0}% {:>9.0} {:>9.0}",
            rates[0].ops,
            rates[1].ops,
            100.0 * rates[0].ops / rates[1].ops,
            rates[0].cpu_us,
            rates[1].cpu_us,
        );
        if compare.is_some() {
            println!(
                "  {:<8} {:<24} {:>9} {:>12.0} {:>12} {:>7.0}% {:>9.0} {:>9}   (--genplane: {:.2}x its ops/s, {:.2}x its CPU/op)",
                "",
                "  --compare",
                "",
                rates[2].ops,
                "",
                100.0 * rates[2].ops / rates[1].ops,
                rates[2].cpu_us,
                "",
                rates[0].ops / rates[2].ops,
                rates[0].cpu_us / rates[2].cpu_us,
            );
        }
        if backend == "etcd" && label == "GET" {
            raw_etcd_get(args, servers, &path, rates[0]).await?;
        }
    }
    println!(
        "  (target: GET and LIST from the watch cache >= 50% of bare; CPU: user+system time of \
         the apiserver process, etcd's not included, and of the bare server process)"
    );
    bare.stop().await?;
    for (_, server) in servers.every() {
        server.check_alive()?;
    }
    Ok(())
}

/// What a consistent GET on etcd pays to etcd: linearizable reads of the same object's key
/// straight from etcd, interleaved with the GET through the apiserver (`through`, measured just
/// before), so that the note can say what part of the GET's gap to the bare server the round
/// trip explains.
async fn raw_etcd_get(
    args: &Args,
    servers: &Servers,
    path: &str,
    through: Rate,
) -> anyhow::Result<()> {
    let suffix = path
        .strip_prefix("/api/v1/namespaces/")
        .and_then(|rest| rest.split_once("/configmaps/"))
        .map(|(namespace, name)| format!("/configmaps/{namespace}/{name}"))
        .context("not a ConfigMap's path")?;
    let key = servers
        .raw
        .clone()
        .get(
            "/registry/",
            Some(GetOptions::new().with_prefix().with_keys_only()),
        )
        .await?
        .kvs()
        .iter()
        .find(|kv| kv.key().ends_with(suffix.as_bytes()))
        .map(|kv| kv.key().to_vec())
        .context("the read ConfigMap is not in etcd under /registry/")?;
    let op: Op = {
        let raw = servers.raw.clone();
        Arc::new(move |_| {
            let (mut raw, key) = (raw.clone(), key.clone());
            Box::pin(async move {
                anyhow::ensure!(raw.get(key, None).await?.count() == 1, "the key is gone");
                Ok(())
            })
        })
    };
    let rates = interleaved(&[(op, vec![process::child_named("etcd")?])], args).await?;
    println!(
        "  {:<8} {:<24} {:>9} {:>12.0} {:>12} {:>8} {:>9.0} {:>9}   (etcd's CPU; the GET above reached {:.0}% of its rate)",
        "etcd",
        "raw etcd read, same key",
        "",
        rates[0].ops,
        "",
        "",
        rates[0].cpu_us,
        "",
        100.0 * through.ops / rates[0].ops,
    );
    Ok(())
}

/// One delivery: the phase's marker, the latency from write start, and when it arrived.
struct Delivery {
    burst: bool,
    latency: u64,
    at: u64,
}

/// Reads a watch stream until `expected` marked events arrived or the stream ends.
async fn read_watch(
    body: hyper::body::Incoming,
    base: Instant,
    expected: usize,
) -> anyhow::Result<Vec<Delivery>> {
    const MARKER: &[u8] = b"\"sent\":\"";
    let mut body = body;
    let mut deliveries = Vec::with_capacity(expected);
    let mut pending: Vec<u8> = Vec::new();
    while deliveries.len() < expected {
        let Some(frame) = body.frame().await else {
            break;
        };
        let Ok(data) = frame?.into_data() else {
            continue;
        };
        let now = base.elapsed().as_nanos() as u64;
        pending.extend_from_slice(&data);
        while let Some(end) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let Some(at) = line.windows(MARKER.len()).position(|w| w == MARKER) else {
                continue;
            };
            let value = &line[at + MARKER.len()..];
            let digits = value[1..].iter().take_while(|b| b.is_ascii_digit()).count();
            let sent: u64 = std::str::from_utf8(&value[1..1 + digits])?.parse()?;
            deliveries.push(Delivery {
                burst: value[0] == b'b',
                latency: now.saturating_sub(sent),
                at: now,
            });
        }
    }
    Ok(deliveries)
}

/// Watch fan-out on `server`; returns its memory with the watchers open.
async fn watch(args: &Args, backend: &str, server: &Server) -> anyhow::Result<(u64, u64)> {
    let namespace = "bench-watch";
    create_namespace(&server.client, namespace).await?;
    let list = server
        .client
        .expect(Method::GET, &configmaps(namespace), None, StatusCode::OK)
        .await?;
    let list: serde_json::Value = serde_json::from_slice(&list)?;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .context("no resourceVersion")?
        .to_owned();
    let path = format!("{}?watch=1&resourceVersion={rv}", configmaps(namespace));
    let connections = args.watchers.div_ceil(args.streams_per_connection.max(1));
    let mut clients = Vec::new();
    for _ in 0..connections {
        clients.push(Client::connect(&server.base, server.tls.clone()).await?);
    }
    let expected = 2 * args.events;
    let base = Instant::now();
    let open = Arc::new(AtomicUsize::new(0));
    let mut watchers = tokio::task::JoinSet::new();
    for i in 0..args.watchers {
        let (client, path, open) = (clients[i % connections].clone(), path.clone(), open.clone());
        watchers.spawn(async move {
            let response = client.start(Method::GET, &path, None).await?;
            anyhow::ensure!(
                response.status() == StatusCode::OK,
                "watch: {}",
                response.status()
            );
            open.fetch_add(1, Ordering::Relaxed);
            read_watch(response.into_body(), base, expected).await
        });
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while open.load(Ordering::Relaxed) < args.watchers {
        if Instant::now() > deadline || watchers.try_join_next().is_some() {
            anyhow::bail!(
                "only {} of {} watches opened",
                open.load(Ordering::Relaxed),
                args.watchers
            );
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(args.settle(Duration::from_millis(500))).await;

    // Paced writes: delivery latency at a steady rate.
    let gap = Duration::from_secs_f64(1.0 / args.event_rate.max(1) as f64);
    let paced_start = base.elapsed().as_nanos() as u64;
    let mut next = Instant::now();
    for i in 0..args.events {
        let sent = format!("p{}", base.elapsed().as_nanos());
        let body = configmap(&format!("p-{i:06}"), 64, Some(&sent));
        server
            .client
            .expect(
                Method::POST,
                &configmaps(namespace),
                Some(body),
                StatusCode::CREATED,
            )
            .await?;
        next += gap;
        tokio::time::sleep_until(next.into()).await;
    }
    // Let the paced phase drain before the burst.
    tokio::time::sleep(args.settle(Duration::from_secs(1))).await;

    // A burst: as many writes as the concurrency allows.
    let burst_start = base.elapsed().as_nanos() as u64;
    let counter = Arc::new(AtomicU64::new(0));
    let mut writers = tokio::task::JoinSet::new();
    for _ in 0..args.concurrency {
        let (client, counter, events) =
            (server.client.clone(), counter.clone(), args.events as u64);
        writers.spawn(async move {
            loop {
                let i = counter.fetch_add(1, Ordering::Relaxed);
                if i >= events {
                    return anyhow::Ok(());
                }
                let sent = format!("b{}", base.elapsed().as_nanos());
                let body = configmap(&format!("b-{i:06}"), 64, Some(&sent));
                client
                    .expect(
                        Method::POST,
                        &configmaps(namespace),
                        Some(body),
                        StatusCode::CREATED,
                    )
                    .await?;
            }
        });
    }
    for result in writers.join_all().await {
        result?;
    }
    let burst_written = Duration::from_nanos(base.elapsed().as_nanos() as u64 - burst_start);
    let with_watchers = memory(server.pid()?)?;

    let mut paced = Vec::new();
    let mut burst = Vec::new();
    let mut failures = 0;
    let collect = async {
        while let Some(result) = watchers.join_next().await {
            match result? {
                Ok(deliveries) => {
                    for d in deliveries {
                        if d.burst { &mut burst } else { &mut paced }.push((d.latency, d.at));
                    }
                }
                Err(e) => {
                    if failures == 0 {
                        eprintln!("a watcher failed: {e:#}");
                    }
                    failures += 1;
                }
            }
        }
        anyhow::Ok(())
    };
    if tokio::time::timeout(Duration::from_secs(60), collect)
        .await
        .is_err()
    {
        eprintln!("watchers still waiting after 60 s; counting what arrived");
    }
    watchers.abort_all();

    println!(
        "\nwatch fan-out on {backend}: {} watchers of one namespace on {connections} HTTP/2 \
         connection(s); {failures} watcher(s) failed",
        args.watchers
    );
    for (label, start, deliveries, written) in [
        (
            format!("paced, {} writes at {}/s", args.events, args.event_rate),
            paced_start,
            &mut paced,
            None,
        ),
        (
            format!(
                "burst, {} writes at concurrency {}",
                args.events, args.concurrency
            ),
            burst_start,
            &mut burst,
            Some(burst_written),
        ),
    ] {
        let want = args.watchers * args.events;
        if deliveries.is_empty() {
            println!("  {label}: nothing delivered of {want}");
            continue;
        }
        let last = deliveries.iter().map(|d| d.1).max().unwrap_or(start);
        let span = Duration::from_nanos(last.saturating_sub(start));
        let mut latencies: Vec<u64> = deliveries.iter().map(|d| d.0).collect();
        latencies.sort_unstable();
        let at = |q| ms(Duration::from_nanos(quantile(&latencies, q)));
        println!("  {label}:");
        println!(
            "    delivered {} of {want}; latency from write start p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            latencies.len(),
            at(0.5),
            at(0.99),
            at(1.0)
        );
        let written = written.map_or(String::new(), |w: Duration| {
            format!(
                " (writes took {:.0} ms, {:.0} writes/s)",
                ms(w),
                args.events as f64 / w.as_secs_f64()
            )
        });
        println!(
            "    {:.0} events/s delivered over {:.0} ms from the first write to the last delivery{written}",
            latencies.len() as f64 / span.as_secs_f64(),
            ms(span)
        );
    }
    Ok(with_watchers)
}

/// The server's `apiserver_registered_watchers` gauge for `kind`, from `/metrics`.
async fn registered_watchers(client: &Client, kind: &str) -> anyhow::Result<String> {
    let metrics = client
        .expect(Method::GET, "/metrics", None, StatusCode::OK)
        .await?;
    let text = String::from_utf8_lossy(&metrics);
    let wanted = format!("kind=\"{kind}\"");
    Ok(text
        .lines()
        .find(|l| l.starts_with("apiserver_registered_watchers{") && l.contains(&wanted))
        .and_then(|l| l.rsplit(' ').next())
        .unwrap_or("0")
        .to_owned())
}

async fn run(args: &Args) -> anyhow::Result<()> {
    let temp;
    let dir = match &args.dir {
        Some(dir) => dir.clone(),
        None => {
            temp = tempfile::Builder::new()
                .prefix("genplane-bench-apiserver-")
                .tempdir_in("/var/tmp")?;
            temp.path().to_owned()
        }
    };
    // Writing the CRD-scale set to files measures nothing and runs no server.
    if args.crd_scale_write.is_some() && args.only == [Part::CrdScale] {
        return crdscale::crd_scale(args, &dir).await;
    }
    let bin = args.genplane();
    anyhow::ensure!(
        bin.exists(),
        "{} does not exist: build it with `cargo build --release -p genplane`",
        bin.display()
    );
    println!("genplane: {}\n", bin.display());
    if args.only.contains(&Part::Startup) {
        startup(args, &dir).await?;
    }
    if args.only.contains(&Part::Authz) {
        authz::authz(args, &dir).await?;
    }
    if args.only.contains(&Part::Crd) {
        crd::crd(args, &dir).await?;
    }
    if args.only.contains(&Part::Admission) {
        admission::admission(args, &dir).await?;
    }
    if args.only.contains(&Part::Idle) {
        idle::idle(args, &dir).await?;
    }
    if args.only.contains(&Part::Fairness) {
        fairness::fairness(args, &dir).await?;
    }
    if args.only.contains(&Part::Aggregation) {
        aggregation::aggregation(args, &dir).await?;
    }
    if args.only.contains(&Part::Memory) {
        memory::memory_per_object(args, &dir).await?;
    }
    if args.only.contains(&Part::CrdScale) {
        crdscale::crd_scale(args, &dir).await?;
    }
    if args.only.contains(&Part::StorageScale) {
        storagescale::storage_scale(args, &dir).await?;
    }
    if !args.only.iter().any(|p| {
        !matches!(
            p,
            Part::Startup
                | Part::Authz
                | Part::Crd
                | Part::Idle
                | Part::Memory
                | Part::Admission
                | Part::Fairness
                | Part::CrdScale
                | Part::Aggregation
                | Part::StorageScale
        )
    }) {
        return Ok(());
    }
    let mut servers = Servers::start(args, &dir).await?;
    tokio::time::sleep(args.settle(Duration::from_secs(2))).await;
    let mut idle = Vec::new();
    for (_, server) in servers.apiservers() {
        idle.push(memory(server.pid()?)?);
    }
    if args.only.contains(&Part::Creates) {
        creates(args, &mut servers).await?;
    }
    if args.only.contains(&Part::Reads) {
        reads(args, &mut servers, &dir).await?;
    }
    if args.only.contains(&Part::Apply) {
        apply(args, &mut servers).await?;
    }
    let mut watching = Vec::new();
    if args.only.contains(&Part::Watch) {
        watching.push(watch(args, "sqlite", &servers.sqlite).await?);
        watching.push(watch(args, "etcd", &servers.etcd).await?);
    }
    // Let the watchers' streams close and the servers settle.
    tokio::time::sleep(args.settle(Duration::from_secs(3))).await;
    println!("\napiserver memory (VmRSS; target: idle < 30 MiB)");
    for (i, (backend, server)) in servers.apiservers().into_iter().enumerate() {
        server.check_alive()?;
        let (after, peak) = memory(server.pid()?)?;
        let open = watching.get(i).map_or(String::new(), |m| {
            format!(", with {} watchers {:.1} MiB", args.watchers, mib(m.0))
        });
        println!(
            "  {backend:<7} idle after start-up {:.1} MiB{open}, idle after the load {:.1} MiB, peak {:.1} MiB; \
             ConfigMap watchers still registered: {}",
            mib(idle[i].0),
            mib(after),
            mib(peak),
            // A new connection: the server ends connections idle for 90 s, as the harness's
            // own may have been while the other servers were measured.
            registered_watchers(
                &Client::connect(&server.base, server.tls.clone()).await?,
                "ConfigMap"
            )
            .await?
        );
    }
    let Servers {
        sqlite,
        etcd,
        compare,
        ..
    } = servers;
    sqlite.stop().await?;
    etcd.stop().await?;
    for server in compare.into_iter().flatten() {
        server.stop().await?;
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let mut args = Args::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    if let Some(routes) = &args.serve_bare {
        return runtime.block_on(bare::serve(routes));
    }
    args.apply_quick();
    runtime.block_on(run(&args))
}
