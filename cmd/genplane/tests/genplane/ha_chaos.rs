//! Chaos under load on a highly available control plane: a three-member etcd cluster, two
//! `genplane apiserver` processes sharing it, and the chaos workload of `support::chaos` (a
//! writer through each apiserver that records every acknowledged create and update, and a
//! watcher on each apiserver). Faults, one after another: SIGKILL of an etcd follower and of
//! the leader, SIGSTOP of the member an apiserver uses, SIGKILL of an apiserver, and the loss of
//! etcd's quorum. `compose_chaos` is its big brother, on the Compose cluster's containers.
//!
//! What a user must observe: no acknowledged write is lost; no write sent while etcd has no
//! quorum is acknowledged; every watch stream delivers every write exactly once, in revision
//! order (or ends with a 410, after which a relist is consistent with it); `/readyz` answers
//! while etcd is unavailable, and fails; the apiservers log each health transition once, not
//! once per request. The recovery time of each fault is measured and printed (never asserted).

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

use genplane_storage_etcd::testing::EtcdCluster;
use tokio::time::Instant;

use crate::support::chaos::{Ack, RECOVERY_LIMIT, Recovery, Workload, preferred_endpoint, raw_get};

/// The pause between two writes of one writer.
const WRITE_PAUSE: Duration = Duration::from_millis(20);
/// How many writes each writer gets acknowledged after each repair, before the next fault.
const STEADY_WRITES: usize = 20;

/// A client of `server` that reports every answer as it comes (no retries of its own: kube's
/// default retries 503s, which would hide them).
async fn client_of(server: &crate::support::Apiserver) -> kube::Client {
    let mut config = crate::support::kube_config(&server.kubeconfig()).await;
    config.default_retry = false;
    kube::Client::try_from(config).unwrap()
}

/// The latest compaction of etcd that apiserver `client` knows of, from its metrics.
async fn compacted_revision(client: &kube::Client) -> i64 {
    let (_, metrics) = raw_get(client, "/metrics").await;
    metrics
        .lines()
        .find_map(|line| line.strip_prefix("genplane_etcd_compacted_revision "))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0)
}

/// The index of the etcd member apiserver `client` sends its requests to, from its metrics.
async fn preferred_member(client: &kube::Client, cluster: &EtcdCluster) -> usize {
    let endpoint = preferred_endpoint(client).await;
    cluster
        .endpoints()
        .iter()
        .position(|e| *e == endpoint)
        .unwrap()
}

fn start_apiserver(
    dir: tempfile::TempDir,
    flags: Vec<String>,
) -> tokio::task::JoinHandle<crate::support::Apiserver> {
    tokio::task::spawn_blocking(move || {
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        crate::support::start_in(dir, &flags)
    })
}

/// Everything a server logged, over all its starts in its directory.
fn logs_of(server: &crate::support::Apiserver) -> String {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(server.dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("apiserver-") && n.ends_with(".log"))
        })
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|path| std::fs::read_to_string(path).unwrap())
        .collect()
}

fn flags(cluster: &EtcdCluster, order: [usize; 3]) -> Vec<String> {
    let endpoints: Vec<String> = order.iter().map(|&i| cluster.endpoint(i)).collect();
    vec![
        "--storage-backend=etcd".into(),
        format!("--etcd-servers={}", endpoints.join(",")),
        "--etcd-compaction-interval=2s".into(),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_on_a_three_member_etcd_loses_no_acknowledged_write() {
    let test_started = Instant::now();
    let mut cluster = EtcdCluster::start(3).await.unwrap();
    // Apiserver a prefers member 0, b member 1.
    let flag_sets = [flags(&cluster, [0, 1, 2]), flags(&cluster, [1, 2, 0])];
    let a = start_apiserver(tempfile::tempdir().unwrap(), flag_sets[0].clone())
        .await
        .unwrap();
    let b = start_apiserver(tempfile::tempdir().unwrap(), flag_sets[1].clone())
        .await
        .unwrap();
    let clients = [client_of(&a).await, client_of(&b).await];
    let mut servers = [Some(a), Some(b)];
    let workload = Workload::start(clients, WRITE_PAUSE).await;
    let record = workload.record.clone();
    let mut figures = Vec::new();
    figures.push((
        "start".to_owned(),
        workload.recovery("start", Instant::now()).await,
    ));

    // A follower dies.
    let leader = cluster.leader().await.expect("a leader");
    let follower = (0..3).find(|&i| i != leader).unwrap();
    let since = Instant::now();
    cluster.kill(follower);
    let fault = format!("SIGKILL follower (member {follower})");
    figures.push((fault.clone(), workload.recovery(&fault, since).await));
    cluster.restart(&[follower]).await.unwrap();
    workload.steady(STEADY_WRITES).await;

    // The leader dies.
    let leader = cluster.leader().await.expect("a leader");
    let since = Instant::now();
    cluster.kill(leader);
    let fault = format!("SIGKILL leader (member {leader})");
    figures.push((fault.clone(), workload.recovery(&fault, since).await));
    cluster.restart(&[leader]).await.unwrap();
    workload.steady(STEADY_WRITES).await;

    // The member apiserver a uses freezes; a's writes and watches must move.
    let used = preferred_member(&workload.client(0), &cluster).await;
    let since = Instant::now();
    cluster.freeze(used);
    let fault = format!("SIGSTOP member a uses (member {used})");
    figures.push((fault.clone(), workload.recovery(&fault, since).await));
    let asked = Instant::now();
    let (ready, body) = raw_get(&workload.client(0), "/readyz").await;
    let readyz_while_frozen = asked.elapsed();
    assert_eq!(ready, 200, "two members of three answer: {body}");
    cluster.thaw(used);
    workload.steady(STEADY_WRITES).await;

    // Apiserver b dies, and stays down until etcd's history no longer covers what its watcher
    // has seen: the watcher must get a 410 and list again. Then b comes back and its clients
    // follow it.
    let since = Instant::now();
    let dir = crate::support::stop(servers[1].take().unwrap());
    let seen_by_b = record.reached[1].load(Ordering::Relaxed);
    while compacted_revision(&workload.client(0)).await <= seen_by_b {
        assert!(since.elapsed() < RECOVERY_LIMIT, "etcd was not compacted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let b = start_apiserver(dir, flag_sets[1].clone()).await.unwrap();
    workload.replace_client(1, client_of(&b).await);
    servers[1] = Some(b);
    let fault = "SIGKILL apiserver b (restarted after a compaction)";
    figures.push((fault.to_owned(), workload.recovery(fault, since).await));
    workload.steady(STEADY_WRITES).await;

    // Quorum is lost: nothing sent meanwhile is acknowledged, /readyz fails without hanging.
    let leader = cluster.leader().await.expect("a leader");
    let lost: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    for &member in &lost {
        cluster.kill(member);
    }
    let quorum_lost = Instant::now();
    let mut readyz_failed = [None, None];
    let mut slowest_readyz = Duration::ZERO;
    while readyz_failed.iter().any(Option::is_none) {
        for (index, failed) in readyz_failed.iter_mut().enumerate() {
            if failed.is_some() {
                continue;
            }
            let asked = Instant::now();
            let (code, body) = raw_get(&workload.client(index), "/readyz?verbose").await;
            slowest_readyz = slowest_readyz.max(asked.elapsed());
            assert_ne!(code, 0, "/readyz must answer: {body}");
            if code != 200 {
                assert!(body.contains("[-]etcd"), "{body}");
                *failed = Some(quorum_lost.elapsed());
            }
        }
        assert!(
            quorum_lost.elapsed() < RECOVERY_LIMIT,
            "/readyz never failed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Writes keep failing for a while.
    let failures_before = record.failures.lock().unwrap().len();
    while record.failures.lock().unwrap().len() < failures_before + 6 {
        assert!(
            quorum_lost.elapsed() < RECOVERY_LIMIT,
            "writes do not fail without quorum"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let restarting = Instant::now();
    for index in 0..2 {
        let false_successes: Vec<Ack> = record.acks[index]
            .lock()
            .unwrap()
            .iter()
            .filter(|ack| ack.sent >= quorum_lost && ack.sent < restarting)
            .cloned()
            .collect();
        assert!(
            false_successes.is_empty(),
            "acknowledged without quorum: {false_successes:?}"
        );
    }
    let unavailable_answers = record
        .failures
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, code, sent)| *sent >= quorum_lost && *code == 503)
        .count();
    let quorum_lost_for = quorum_lost.elapsed();
    cluster.restart(&lost).await.unwrap();
    let etcd_back = restarting.elapsed();
    let since = Instant::now();
    let fault = "quorum loss (after etcd restarted)";
    figures.push((fault.to_owned(), workload.recovery(fault, since).await));

    // The end: writers stop, watchers catch up with the store; every acknowledged write is
    // stored, and every stream is consistent with the store and complete.
    let verdict = workload.finish(0).await;
    verdict.assert_clean(&record);
    assert!(
        record.expired(1) >= 1,
        "the watcher on b resumed after a compaction without a 410"
    );

    // Health transitions are logged once each.
    let transitions = [
        "etcd member unhealthy",
        "etcd member healthy again",
        "etcd unavailable",
        "etcd available again",
        "etcd requests move to another member",
    ];
    let mut log_lines = Vec::new();
    for server in servers.iter().flatten() {
        let log = logs_of(server);
        let count = log
            .lines()
            .filter(|line| transitions.iter().any(|t| line.contains(t)))
            .count();
        log_lines.push(count);
    }

    let failures = record.failures.lock().unwrap().len();
    println!(
        "chaos: {} acknowledged writes, {} failed or unknown, 0 lost",
        verdict.acked, failures
    );
    println!(
        "chaos: watch events: a {}, b {}; 410s: a {}, b {}",
        record.events(0),
        record.events(1),
        record.expired(0),
        record.expired(1),
    );
    println!(
        "chaos: recovery after each fault (first acknowledged write sent after it / first watch event of such a write), per apiserver a | b:"
    );
    for (fault, Recovery { write, watch }) in &figures {
        println!(
            "  {:<52} writes {:>6.2}s | {:>6.2}s   watches {:>6.2}s | {:>6.2}s",
            fault,
            write[0].as_secs_f64(),
            write[1].as_secs_f64(),
            watch[0].as_secs_f64(),
            watch[1].as_secs_f64(),
        );
    }
    println!(
        "chaos: quorum lost for {:.1}s: {unavailable_answers} answers 503, /readyz failed after {:.2}s | {:.2}s (slowest /readyz answer {:.2}s); etcd quorum back {:.1}s after the restart began",
        quorum_lost_for.as_secs_f64(),
        readyz_failed[0].unwrap().as_secs_f64(),
        readyz_failed[1].unwrap().as_secs_f64(),
        slowest_readyz.as_secs_f64(),
        etcd_back.as_secs_f64(),
    );
    println!(
        "chaos: /readyz answered 200 in {:.2}s while member {used} was frozen",
        readyz_while_frozen.as_secs_f64()
    );
    println!(
        "chaos: health transition log lines: a {}, b {}; whole test {:.0}s",
        log_lines[0],
        log_lines[1],
        test_started.elapsed().as_secs_f64()
    );
    for (server, count) in ["a", "b"].iter().zip(&log_lines) {
        assert!(
            *count <= 60,
            "apiserver {server} logged {count} health transitions: more than one per transition"
        );
    }
}
