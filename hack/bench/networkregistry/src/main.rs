//! Network registry benchmarks, in process (see `hack/bench/networkregistry.sh`).
//!
//! For each size (1,000, 10,000, 100,000 records by default): random claims of 1 to 64
//! records (IPv4 in 10.0.0.0/8 and IPv6 in fd00::/16, lengths that collide often), then
//! - the decision pass the `networkclaim` controller runs on every change
//!   (`genplane_networkregistry::allocate`: sort by creation time and name, one index insert
//!   per record), its time and the resident memory it added;
//! - `owner_of` latency: the median and 99th percentile of single lookups of random
//!   addresses, half of them inside allocated ranges;
//! - `overlaps` latency for random prefixes.
//!
//! Growth from 1k to 100k shows the index's O(W) queries: lookups stay flat.
//!
//! With `--kubeconfig` (a running API server and controller-manager with the NetworkRegistry
//! gate; `hack/bench/networkregistry.sh --api` starts both), it creates claims of
//! `--records-per-claim` records up to the largest size instead, and times the creates and then
//! the controller until every claim is decided; with `--controller-manager-pid` it reports that
//! process's resident memory: its peak (`VmHWM`: the decision passes included), when every
//! claim is decided, and after `--settle` seconds more, with the CPU it used meanwhile (no API
//! traffic then: what the controller still does after its last verdict).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use clap::Parser;
use genplane_api::networkregistry::Prefix;
use genplane_api::networkregistry::networkclaim::{AddressRecord, ResourceReference};
use genplane_apimachinery::fuzzing::Rng;
use genplane_networkregistry::{Candidate, allocate};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The command line.
#[derive(Parser, Debug)]
#[command(about = "Network registry benchmarks (in process)")]
struct Args {
    /// The sizes, in records.
    #[arg(long, value_delimiter = ',', default_value = "1000,10000,100000")]
    records: Vec<usize>,
    /// Lookups timed per size.
    #[arg(long, default_value_t = 20_000)]
    lookups: usize,
    /// Against a running API server (this kubeconfig) and controller-manager.
    #[arg(long)]
    kubeconfig: Option<std::path::PathBuf>,
    /// Records per claim, against the API server.
    #[arg(long, default_value_t = 64)]
    records_per_claim: usize,
    /// The controller-manager's process id, for its resident memory.
    #[arg(long)]
    controller_manager_pid: Option<u32>,
    /// Seconds to watch the controller-manager after every claim is decided.
    #[arg(long, default_value_t = 20)]
    settle: u64,
}

fn addr(rng: &mut Rng, v4: bool) -> IpAddr {
    if v4 {
        IpAddr::V4(Ipv4Addr::from(
            0x0A00_0000 | (rng.next_u64() as u32 & 0x00FF_FFFF),
        ))
    } else {
        let high = 0xFD00_u128 << 112 | (u128::from(rng.next_u64()) & 0xFFFF_FFFF_FFFF) << 64;
        IpAddr::V6(Ipv6Addr::from(high | u128::from(rng.next_u64())))
    }
}

fn prefix(rng: &mut Rng) -> Prefix {
    let v4 = rng.below(2) == 0;
    let len = if v4 {
        16 + rng.below(17) as u8
    } else {
        32 + rng.below(97) as u8
    };
    Prefix::new(addr(rng, v4), len).expect("a length within the width")
}

fn claims(rng: &mut Rng, records: usize) -> Vec<Candidate> {
    let mut out = Vec::new();
    let mut left = records;
    while left > 0 {
        let n = (1 + rng.below(64)).min(left);
        left -= n;
        out.push(Candidate {
            name: format!("claim-{:07}", out.len()).into(),
            created: Some(Time(
                k8s_openapi::jiff::Timestamp::from_second(
                    1_700_000_000 + rng.below(100_000) as i64,
                )
                .expect("a valid time"),
            )),
            records: (0..n)
                .map(|_| AddressRecord {
                    reference: ResourceReference {
                        group: String::new(),
                        resource: "pods".to_owned(),
                    },
                    prefix: prefix(rng).to_string(),
                    description: None,
                })
                .collect(),
        });
    }
    out
}

/// A `/proc/<process>/status` figure in KiB (`VmRSS`, `VmHWM`) of `process` (`self` or a pid).
fn status_kib(process: &str, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{process}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// The resident set size of `process` (`self` or a pid), in KiB.
fn rss_kib_of(process: &str) -> u64 {
    status_kib(process, "VmRSS")
}

fn rss_kib() -> u64 {
    rss_kib_of("self")
}

/// The CPU time `pid` used so far (user and system), in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let ticks = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            // The fields after the command (which may hold spaces), from the 3rd on.
            let rest = stat.rsplit_once(')')?.1;
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let user: u64 = fields.get(11)?.parse().ok()?;
            let system: u64 = fields.get(12)?.parse().ok()?;
            Some(user + system)
        })
        .unwrap_or(0);
    // USER_HZ is 100 on Linux.
    ticks as f64 / 100.0
}

/// `count` claims of `per_claim` records each, no two records of a claim overlapping.
fn api_claims(rng: &mut Rng, count: usize, per_claim: usize) -> Vec<serde_json::Value> {
    (0..count)
        .map(|i| {
            let mut taken: Vec<Prefix> = Vec::new();
            while taken.len() < per_claim {
                let candidate = prefix(rng);
                if !taken.iter().any(|p| p.overlaps(&candidate)) {
                    taken.push(candidate);
                }
            }
            let records: Vec<serde_json::Value> = taken
                .iter()
                .map(|p| serde_json::json!({"reference": {"group": "", "resource": "pods"}, "prefix": p.to_string()}))
                .collect();
            serde_json::json!({
                "apiVersion": "networkregistry.genplane.io/v1alpha1", "kind": "NetworkClaim",
                "metadata": {"name": format!("bench-{i:06}")},
                "spec": {"addressSpace": records},
            })
        })
        .collect()
}

/// Creates the claims and waits until the controller decided every one.
fn against_api(args: &Args, kubeconfig: &std::path::Path) -> anyhow::Result<()> {
    use futures::StreamExt as _;
    let records = args.records.iter().copied().max().unwrap_or(100_000);
    let count = records.div_ceil(args.records_per_claim.max(1));
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async {
        let (client, _) = genplane_controller::client::connect(Some(kubeconfig)).await?;
        let api: kube::Api<kube::api::DynamicObject> = kube::Api::all_with(
            client,
            &genplane_networkregistry::network_claim_resource(),
        );
        let mut rng = Rng(0xA11_0CA7E);
        let bodies = api_claims(&mut rng, count, args.records_per_claim);
        let started = Instant::now();
        let created: Vec<anyhow::Result<()>> = futures::stream::iter(bodies)
            .map(|body| {
                let api = api.clone();
                async move {
                    let object: kube::api::DynamicObject = serde_json::from_value(body)?;
                    api.create(&kube::api::PostParams::default(), &object).await?;
                    Ok(())
                }
            })
            .buffer_unordered(16)
            .collect()
            .await;
        created.into_iter().collect::<anyhow::Result<Vec<()>>>()?;
        let creates = started.elapsed();
        loop {
            let list = api.list(&kube::api::ListParams::default()).await?;
            let decided = list
                .items
                .iter()
                .filter(|o| {
                    o.data["status"]["conditions"]
                        .as_array()
                        .is_some_and(|c| c.iter().any(|c| c["type"] == "Ready"))
                })
                .count();
            if decided >= count {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let all = started.elapsed();
        println!(
            "{count} claims of {} records ({} records): created in {creates:.1?}, all decided {:.1?} after the first create",
            args.records_per_claim,
            count * args.records_per_claim,
            all
        );
        if let Some(pid) = args.controller_manager_pid {
            let process = pid.to_string();
            let decided_rss = rss_kib_of(&process);
            let cpu_before = cpu_seconds(pid);
            tokio::time::sleep(Duration::from_secs(args.settle)).await;
            let cpu = cpu_seconds(pid) - cpu_before;
            println!(
                "controller-manager resident memory: peak {} MiB, {} MiB when all were decided, \
                 {} MiB {}s later; CPU in those {}s: {:.1}s ({:.0}%)",
                status_kib(&process, "VmHWM") / 1024,
                decided_rss / 1024,
                rss_kib_of(&process) / 1024,
                args.settle,
                args.settle,
                cpu,
                cpu * 100.0 / args.settle.max(1) as f64
            );
        }
        anyhow::Ok(())
    })
}

fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q) as usize];
    (at(0.5), at(0.99))
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if let Some(kubeconfig) = &args.kubeconfig {
        return against_api(&args, kubeconfig);
    }
    println!(
        "{:>8} {:>8} {:>10} {:>10} {:>12} {:>12} {:>12} {:>12}",
        "records", "claims", "allocated", "pass", "memory", "owner p50", "owner p99", "overlap p50"
    );
    for &records in &args.records {
        let mut rng = Rng(0xBE7C_0000 ^ records as u64);
        let candidates = claims(&mut rng, records);
        let count = candidates.len();
        let before = rss_kib();
        let started = Instant::now();
        let allocation = allocate(candidates);
        let pass = started.elapsed();
        let memory = rss_kib().saturating_sub(before);
        let held: Vec<Prefix> = allocation.index.iter().map(|h| h.prefix).collect();
        let mut owner = Vec::with_capacity(args.lookups);
        let mut found = 0usize;
        for i in 0..args.lookups {
            let probe = if i % 2 == 0 && !held.is_empty() {
                held[rng.below(held.len())].addr()
            } else {
                let v4 = rng.below(2) == 0;
                addr(&mut rng, v4)
            };
            let t = Instant::now();
            let hit = allocation.index.owner_of(probe);
            owner.push(t.elapsed());
            found += usize::from(hit.is_some());
        }
        let mut overlap = Vec::with_capacity(args.lookups);
        for _ in 0..args.lookups {
            let probe = prefix(&mut rng);
            let t = Instant::now();
            let hits = allocation.index.first_overlap(&probe).is_some();
            overlap.push(t.elapsed());
            found += usize::from(hits);
        }
        let (owner50, owner99) = percentiles(owner);
        let (overlap50, _) = percentiles(overlap);
        println!(
            "{records:>8} {count:>8} {:>10} {:>10.1?} {:>9} KiB {:>12.1?} {:>12.1?} {:>12.1?}",
            allocation.index.len(),
            pass,
            memory,
            owner50,
            owner99,
            overlap50
        );
        // Keeps the lookups from being optimized away.
        std::hint::black_box(found);
    }
    Ok(())
}
