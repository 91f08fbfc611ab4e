//! Storage benchmarks, measured side by side in one run (these machines are noisy, so only
//! ratios from the same run mean much):
//!
//! 1. create throughput at several concurrencies, interleaved per concurrency: raw etcd create
//!    transactions (etcd-client directly: `If(mod_revision == 0) Then(Put)`), genplane's etcd
//!    backend, and genplane's SQLite backend, with the same keys and value sizes, on the same
//!    disk;
//! 2. watch delivery latency from the start of a write to each of many watchers of the watch
//!    cache (over SQLite).
//!
//! Run it with `hack/bench/storage.sh` (release build); `--help` lists the knobs.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Parser;
use etcd_client::{Compare, CompareOp, Txn, TxnOp};
use genplane_storage::{Bytes, Storage, WatchEvent};
use genplane_storage_cacher::{Cacher, CacherConfig};
use genplane_storage_etcd::EtcdStore;
use genplane_storage_etcd::testing::{EtcdServer, EtcdServerOptions};
use genplane_storage_sqlite::{SqliteConfig, SqliteStore};

#[derive(Parser)]
struct Args {
    /// Concurrencies of the create benchmark.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64,256")]
    concurrency: Vec<usize>,
    /// Rounds of the create benchmark: each round runs every implementation once, for
    /// `--slice` seconds each, so that all three are measured over the same stretch of time.
    #[arg(long, default_value_t = 6)]
    rounds: u32,
    /// Seconds each implementation runs per round.
    #[arg(long, default_value_t = 1.0)]
    slice: f64,
    /// Value size in bytes.
    #[arg(long, default_value_t = 1024)]
    value_size: usize,
    /// Watchers of the watch-latency benchmark.
    #[arg(long, default_value_t = 10_000)]
    watchers: usize,
    /// Events written in the watch-latency benchmark.
    #[arg(long, default_value_t = 100)]
    events: usize,
    /// Events per second in the watch-latency benchmark.
    #[arg(long, default_value_t = 20)]
    event_rate: u64,
    /// Where the stores keep their data (default: a temporary directory under /var/tmp, on
    /// disk rather than tmpfs, so that fsync costs what it costs).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The etcd binary.
    #[arg(long, default_value = "etcd")]
    etcd: PathBuf,
    /// Skip the create benchmark.
    #[arg(long)]
    skip_creates: bool,
    /// Skip the watch benchmark.
    #[arg(long)]
    skip_watch: bool,
}

/// One implementation's create operation, boxed so the three can share one measuring loop.
type Op = Arc<
    dyn Fn(u64) -> std::pin::Pin<Box<dyn Future<Output = anyhow::Result<()>> + Send>> + Send + Sync,
>;

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

/// Measures the operations per second of each of `ops` at `concurrency`, interleaved: every
/// round runs each op for one slice, after one warm-up round.
async fn interleaved(
    ops: &[Op],
    concurrency: usize,
    rounds: u32,
    slice: Duration,
) -> anyhow::Result<Vec<f64>> {
    let counters: Vec<Arc<AtomicU64>> = ops.iter().map(|_| Arc::new(AtomicU64::new(0))).collect();
    let mut totals = vec![(0u64, Duration::ZERO); ops.len()];
    for round in 0..=rounds {
        for (i, op) in ops.iter().enumerate() {
            let (done, took) = run_slice(op, &counters[i], concurrency, slice).await?;
            if round > 0 {
                totals[i].0 += done;
                totals[i].1 += took;
            }
        }
    }
    Ok(totals
        .iter()
        .map(|(done, took)| *done as f64 / took.as_secs_f64())
        .collect())
}

fn key(kind: &str, concurrency: usize, n: u64) -> String {
    format!("/registry/configmaps/bench-{kind}-{concurrency}/cm-{n:09}")
}

async fn creates(args: &Args, dir: &std::path::Path) -> anyhow::Result<()> {
    let etcd = EtcdServer::start_with(EtcdServerOptions {
        binary: args.etcd.clone(),
        ..EtcdServerOptions::default()
    })
    .await
    .context("starting etcd")?;
    let raw = etcd_client::Client::connect([etcd.endpoint()], None)
        .await?
        .kv_client();
    let backend = Arc::new(EtcdStore::connect(&etcd.config()).await?);
    let mut sqlite_config = SqliteConfig::new(dir.join("bench.db"));
    sqlite_config.history = None;
    let sqlite = Arc::new(SqliteStore::open(&sqlite_config)?);
    let value = Bytes::from(vec![b'x'; args.value_size]);
    let slice = Duration::from_secs_f64(args.slice);

    println!(
        "create throughput, {} B values, {} rounds of {:.1} s per implementation, interleaved (ops/s)",
        args.value_size, args.rounds, args.slice
    );
    println!(
        "{:>11} {:>12} {:>12} {:>8} {:>12} {:>8}",
        "concurrency", "raw etcd", "etcd backend", "/raw", "sqlite", "/raw"
    );
    for &c in &args.concurrency {
        let raw_op: Op = {
            let (raw, value) = (raw.clone(), value.clone());
            Arc::new(move |n| {
                let (mut raw, value) = (raw.clone(), value.clone());
                Box::pin(async move {
                    let k = key("raw", c, n);
                    let txn = Txn::new()
                        .when([Compare::mod_revision(k.clone(), CompareOp::Equal, 0)])
                        .and_then([TxnOp::put(k, value.to_vec(), None)]);
                    anyhow::ensure!(raw.txn(txn).await?.succeeded(), "raw create found the key");
                    Ok(())
                })
            })
        };
        let etcd_op: Op = {
            let (store, value) = (backend.clone(), value.clone());
            Arc::new(move |n| {
                let (store, value) = (store.clone(), value.clone());
                Box::pin(
                    async move { Ok(store.create(&key("etcd", c, n), value).await.map(drop)?) },
                )
            })
        };
        let sqlite_op: Op = {
            let (store, value) = (sqlite.clone(), value.clone());
            Arc::new(move |n| {
                let (store, value) = (store.clone(), value.clone());
                Box::pin(
                    async move { Ok(store.create(&key("sqlite", c, n), value).await.map(drop)?) },
                )
            })
        };
        let rates = interleaved(&[raw_op, etcd_op, sqlite_op], c, args.rounds, slice).await?;
        let (raw_ops, etcd_ops, sqlite_ops) = (rates[0], rates[1], rates[2]);
        println!(
            "{c:>11} {raw_ops:>12.0} {etcd_ops:>12.0} {:>7.0}% {sqlite_ops:>12.0} {:>7.2}x",
            100.0 * etcd_ops / raw_ops,
            sqlite_ops / raw_ops
        );
    }
    Ok(())
}

async fn watch_latency(args: &Args, dir: &std::path::Path) -> anyhow::Result<()> {
    let mut config = SqliteConfig::new(dir.join("watch.db"));
    config.history = None;
    let prefix = "/registry/configmaps/";
    let cache = Arc::new(Cacher::new(
        SqliteStore::open(&config)?,
        prefix,
        CacherConfig::default(),
    )?);
    let start = cache.current_revision().await?;
    let base = Instant::now();
    let mut watchers = tokio::task::JoinSet::new();
    for _ in 0..args.watchers {
        let mut watch = cache.watch(prefix, start).await?;
        let events = args.events;
        watchers.spawn(async move {
            let mut latencies = Vec::with_capacity(events);
            while latencies.len() < events {
                match watch.next().await {
                    Some(WatchEvent::Event(event)) => {
                        let sent = u64::from_be_bytes(event.kv.value[..8].try_into()?);
                        let now = base.elapsed().as_nanos() as u64;
                        latencies.push(now.saturating_sub(sent));
                    }
                    Some(WatchEvent::Progress(_)) => {}
                    other => anyhow::bail!("watch ended: {other:?}"),
                }
            }
            anyhow::Ok(latencies)
        });
    }
    // Let every watcher task start before the first write.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let gap = Duration::from_secs_f64(1.0 / args.event_rate as f64);
    let mut next = Instant::now();
    for i in 0..args.events {
        let mut value = (base.elapsed().as_nanos() as u64).to_be_bytes().to_vec();
        value.resize(args.value_size.max(8), b'x');
        cache
            .create(&format!("{prefix}default/cm-{i:06}"), Bytes::from(value))
            .await?;
        next += gap;
        tokio::time::sleep_until(next.into()).await;
    }
    let mut all = Vec::with_capacity(args.watchers * args.events);
    for result in watchers.join_all().await {
        all.extend(result?);
    }
    all.sort_unstable();
    let ms = |q: f64| all[((all.len() - 1) as f64 * q) as usize] as f64 / 1e6;
    println!(
        "\nwatch delivery through the cache: {} watchers x {} events at {}/s = {} deliveries, all delivered",
        args.watchers,
        args.events,
        args.event_rate,
        all.len()
    );
    println!(
        "latency from write start: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        ms(0.50),
        ms(0.99),
        ms(1.0)
    );
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let temp;
    let dir = match &args.dir {
        Some(dir) => dir.clone(),
        None => {
            temp = tempfile::Builder::new()
                .prefix("genplane-bench-")
                .tempdir_in("/var/tmp")?;
            temp.path().to_owned()
        }
    };
    if !args.skip_creates {
        creates(&args, &dir).await?;
    }
    if !args.skip_watch {
        watch_latency(&args, &dir).await?;
    }
    Ok(())
}
