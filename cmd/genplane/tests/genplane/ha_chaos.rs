//! Chaos under load on a highly available control plane: a three-member etcd cluster, two
//! `genplane apiserver` processes sharing it, a writer through each apiserver that records
//! every acknowledged create, and a watcher on each apiserver. Faults, one after another:
//! SIGKILL of an etcd follower and of the leader, SIGSTOP of the member an apiserver uses,
//! SIGKILL of an apiserver, and the loss of etcd's quorum.
//!
//! What a user must observe: no acknowledged write is lost; no write sent while etcd has no
//! quorum is acknowledged; every watch stream delivers every write exactly once, in revision
//! order (or ends with a 410, after which a relist is consistent with it); `/readyz` answers
//! while etcd is unavailable, and fails; the apiservers log each health transition once, not
//! once per request. The recovery time of each fault is measured and printed (never asserted).

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use genplane_storage_etcd::testing::EtcdCluster;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;
use tokio::sync::watch;
use tokio::time::Instant;

const NAMESPACE: &str = "chaos";
/// How long any wait for recovery may take before the test fails.
const RECOVERY_LIMIT: Duration = Duration::from_secs(60);
/// The pause between two creates of one writer.
const WRITE_PAUSE: Duration = Duration::from_millis(20);
/// How many creates each writer gets acknowledged after each repair, before the next fault.
const STEADY_WRITES: usize = 20;
/// How long one create may take before the writer gives up on it (its outcome is unknown).
const WRITE_TIMEOUT: Duration = Duration::from_secs(20);

/// An acknowledged create.
#[derive(Clone, Debug)]
struct Ack {
    name: String,
    revision: i64,
    sent: Instant,
    acked: Instant,
}

/// What one watcher saw between two lists.
#[derive(Debug, Default)]
struct Epoch {
    /// The list the epoch began with, and its revision.
    listed: BTreeMap<String, i64>,
    list_revision: i64,
    /// Every event after it: type, name, revision, when it arrived.
    events: Vec<(String, String, i64, Instant)>,
}

/// Everything the writers and watchers record, shared with the test.
#[derive(Default)]
struct Record {
    /// Per apiserver.
    acks: [Mutex<Vec<Ack>>; 2],
    /// Creates whose outcome is unknown (a 5xx, a timeout, a broken connection).
    unknown: Mutex<Vec<String>>,
    /// Every failed create: apiserver, HTTP code (0 without an answer), when it was sent.
    failures: Mutex<Vec<(usize, u16, Instant)>>,
    /// When each create was sent.
    sent: Mutex<HashMap<String, Instant>>,
    /// Per watcher.
    epochs: [Mutex<Vec<Epoch>>; 2],
    /// Per watcher: the revision it has everything up to.
    reached: [AtomicI64; 2],
    /// Per watcher: how many 410s it got.
    expired: [AtomicI64; 2],
    /// Per watcher: its watches, bookmarks, errors and ends, to explain a failure.
    trace: [Mutex<Vec<String>>; 2],
}

fn resource_version(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> i64 {
    meta.resource_version
        .as_deref()
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(0)
}

/// A client of `server` that reports every answer as it comes (no retries of its own: kube's
/// default retries 503s, which would hide them).
async fn client_of(server: &crate::support::Apiserver) -> kube::Client {
    let mut config = crate::support::kube_config(&server.kubeconfig()).await;
    config.default_retry = false;
    kube::Client::try_from(config).unwrap()
}

/// Creates ConfigMaps through apiserver `index` until `stop`, recording every outcome.
async fn writer(
    index: usize,
    client: watch::Receiver<kube::Client>,
    record: Arc<Record>,
    stop: watch::Receiver<bool>,
) {
    let prefix = ["a", "b"][index];
    for n in 0.. {
        if *stop.borrow() {
            return;
        }
        let api = Api::<ConfigMap>::namespaced(client.borrow().clone(), NAMESPACE);
        let name = format!("{prefix}-{n}");
        let cm: ConfigMap = serde_json::from_value(
            json!({"metadata": {"name": name}, "data": {"n": n.to_string()}}),
        )
        .unwrap();
        let sent = Instant::now();
        record.sent.lock().unwrap().insert(name.clone(), sent);
        let outcome =
            tokio::time::timeout(WRITE_TIMEOUT, api.create(&PostParams::default(), &cm)).await;
        match outcome {
            Ok(Ok(created)) => record.acks[index].lock().unwrap().push(Ack {
                name,
                revision: resource_version(&created.metadata),
                sent,
                acked: Instant::now(),
            }),
            Ok(Err(kube::Error::Api(status))) if status.code < 500 => {
                panic!("a create through apiserver {prefix} was refused: {status:?}");
            }
            Ok(Err(error)) => {
                let code = match &error {
                    kube::Error::Api(status) => status.code,
                    _ => 0,
                };
                record.failures.lock().unwrap().push((index, code, sent));
                record.unknown.lock().unwrap().push(name);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(_) => {
                record.failures.lock().unwrap().push((index, 0, sent));
                record.unknown.lock().unwrap().push(name);
            }
        }
        tokio::time::sleep(WRITE_PAUSE).await;
    }
}

/// Lists and watches ConfigMaps through apiserver `index` as a client would: watch again
/// from the last revision when a stream ends, list again after a 410.
async fn watcher(
    index: usize,
    client: watch::Receiver<kube::Client>,
    record: Arc<Record>,
    mut stop: watch::Receiver<bool>,
) {
    let mut revision: Option<String> = None;
    loop {
        if *stop.borrow() {
            return;
        }
        let api = Api::<ConfigMap>::namespaced(client.borrow().clone(), NAMESPACE);
        let from = match &revision {
            Some(revision) => revision.clone(),
            None => match api.list(&ListParams::default()).await {
                Ok(list) => {
                    let list_revision = list
                        .metadata
                        .resource_version
                        .as_deref()
                        .unwrap()
                        .parse()
                        .unwrap();
                    let listed = list
                        .items
                        .iter()
                        .map(|cm| {
                            (
                                cm.metadata.name.clone().unwrap(),
                                resource_version(&cm.metadata),
                            )
                        })
                        .collect();
                    record.epochs[index].lock().unwrap().push(Epoch {
                        listed,
                        list_revision,
                        events: Vec::new(),
                    });
                    record.reached[index].fetch_max(list_revision, Ordering::Relaxed);
                    let at = list_revision.to_string();
                    revision = Some(at.clone());
                    at
                }
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let params = WatchParams::default().timeout(20);
        record.trace[index]
            .lock()
            .unwrap()
            .push(format!("{:?} watch from {from}", Instant::now()));
        let Ok(stream) = api.watch(&params, &from).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let mut stream = stream.boxed();
        loop {
            let next = tokio::select! {
                next = stream.next() => next,
                _ = stop.changed() => return,
            };
            let event = match next {
                Some(Ok(event)) => event,
                // The stream ended or broke: watch again from where it was.
                Some(Err(e)) => {
                    record.trace[index]
                        .lock()
                        .unwrap()
                        .push(format!("{:?} error {e}", Instant::now()));
                    break;
                }
                None => {
                    record.trace[index]
                        .lock()
                        .unwrap()
                        .push(format!("{:?} end", Instant::now()));
                    break;
                }
            };
            let (kind, meta) = match &event {
                WatchEvent::Added(cm) => ("ADDED", &cm.metadata),
                WatchEvent::Modified(cm) => ("MODIFIED", &cm.metadata),
                WatchEvent::Deleted(cm) => ("DELETED", &cm.metadata),
                WatchEvent::Bookmark(bookmark) => {
                    record.trace[index].lock().unwrap().push(format!(
                        "{:?} bookmark {}",
                        Instant::now(),
                        bookmark.metadata.resource_version
                    ));
                    revision = Some(bookmark.metadata.resource_version.clone());
                    if let Ok(at) = bookmark.metadata.resource_version.parse() {
                        record.reached[index].fetch_max(at, Ordering::Relaxed);
                    }
                    continue;
                }
                WatchEvent::Error(status) if status.code == 410 => {
                    record.expired[index].fetch_add(1, Ordering::Relaxed);
                    revision = None;
                    break;
                }
                WatchEvent::Error(e) => {
                    record.trace[index]
                        .lock()
                        .unwrap()
                        .push(format!("{:?} ERROR {e:?}", Instant::now()));
                    break;
                }
            };
            let at = resource_version(meta);
            let name = meta.name.clone().unwrap();
            let mut epochs = record.epochs[index].lock().unwrap();
            epochs
                .last_mut()
                .unwrap()
                .events
                .push((kind.to_owned(), name, at, Instant::now()));
            drop(epochs);
            revision = Some(at.to_string());
            record.reached[index].fetch_max(at, Ordering::Relaxed);
        }
    }
}

/// When, after `since`, apiserver `index` acknowledged its first create sent after `since`.
fn write_recovered(record: &Record, index: usize, since: Instant) -> Option<Duration> {
    record.acks[index]
        .lock()
        .unwrap()
        .iter()
        .filter(|ack| ack.sent >= since)
        .map(|ack| ack.acked - since)
        .min()
}

/// When, after `since`, watcher `index` received its first event of a create sent after
/// `since`.
fn watch_recovered(record: &Record, index: usize, since: Instant) -> Option<Duration> {
    let sent = record.sent.lock().unwrap();
    let epochs = record.epochs[index].lock().unwrap();
    epochs
        .iter()
        .flat_map(|epoch| &epoch.events)
        .filter(|(_, name, _, _)| sent.get(name).is_some_and(|at| *at >= since))
        .map(|(_, _, _, received)| *received - since)
        .min()
}

/// One line of the report.
#[derive(Debug)]
struct Figure {
    fault: String,
    write: [Duration; 2],
    watch: [Duration; 2],
}

/// Waits until both apiservers' writes and watches work again after `since`.
async fn recovery(record: &Record, fault: &str, since: Instant) -> Figure {
    loop {
        let write = [0, 1].map(|i| write_recovered(record, i, since));
        let watch = [0, 1].map(|i| watch_recovered(record, i, since));
        if let ([Some(wa), Some(wb)], [Some(va), Some(vb)]) = (write, watch) {
            return Figure {
                fault: fault.to_owned(),
                write: [wa, wb],
                watch: [va, vb],
            };
        }
        assert!(
            since.elapsed() < RECOVERY_LIMIT,
            "no recovery from {fault} within {RECOVERY_LIMIT:?}: writes {write:?}, watches {watch:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until each writer has had `count` more creates acknowledged: load between faults.
async fn steady(record: &Record, count: usize) {
    let start = [0, 1].map(|i| record.acks[i].lock().unwrap().len());
    let since = Instant::now();
    while (0..2).any(|i| record.acks[i].lock().unwrap().len() < start[i] + count) {
        assert!(
            since.elapsed() < RECOVERY_LIMIT,
            "the writers stalled after a repair"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A GET of `path` through `client`: the status code and body; 0 when no answer came.
async fn raw_get(client: &kube::Client, path: &str) -> (u16, String) {
    let request = hyper::Request::get(path).body(Vec::new()).unwrap();
    match tokio::time::timeout(Duration::from_secs(10), client.request_text(request)).await {
        Ok(Ok(body)) => (200, body),
        Ok(Err(kube::Error::Api(status))) => (status.code, status.message),
        Ok(Err(other)) => (0, other.to_string()),
        Err(_) => (0, "no answer within 10s".into()),
    }
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
    let (_, metrics) = raw_get(client, "/metrics").await;
    let endpoint = metrics
        .lines()
        .find_map(|line| {
            let rest = line.strip_prefix("genplane_etcd_member_preferred{endpoint=\"")?;
            let (endpoint, value) = rest.split_once("\"} ")?;
            (value.trim() == "1").then(|| endpoint.to_owned())
        })
        .expect("a preferred member in the metrics");
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
    let clients = [
        watch::Sender::new(client_of(&a).await),
        watch::Sender::new(client_of(&b).await),
    ];
    let mut servers = [Some(a), Some(b)];
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).unwrap();
    Api::<Namespace>::all(clients[0].borrow().clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();

    let record = Arc::new(Record::default());
    let (stop_writers, writers_stopped) = watch::channel(false);
    let (stop_watchers, watchers_stopped) = watch::channel(false);
    let (mut watchers, mut writers) = (Vec::new(), Vec::new());
    for (index, client) in clients.iter().enumerate() {
        watchers.push(tokio::spawn(watcher(
            index,
            client.subscribe(),
            record.clone(),
            watchers_stopped.clone(),
        )));
        writers.push(tokio::spawn(writer(
            index,
            client.subscribe(),
            record.clone(),
            writers_stopped.clone(),
        )));
    }
    let mut figures = Vec::new();
    figures.push(recovery(&record, "start", Instant::now()).await);

    // A follower dies.
    let leader = cluster.leader().await.expect("a leader");
    let follower = (0..3).find(|&i| i != leader).unwrap();
    let since = Instant::now();
    cluster.kill(follower);
    figures.push(
        recovery(
            &record,
            &format!("SIGKILL follower (member {follower})"),
            since,
        )
        .await,
    );
    cluster.restart(&[follower]).await.unwrap();
    steady(&record, STEADY_WRITES).await;

    // The leader dies.
    let leader = cluster.leader().await.expect("a leader");
    let since = Instant::now();
    cluster.kill(leader);
    figures.push(recovery(&record, &format!("SIGKILL leader (member {leader})"), since).await);
    cluster.restart(&[leader]).await.unwrap();
    steady(&record, STEADY_WRITES).await;

    // The member apiserver a uses freezes; a's writes and watches must move.
    let used = preferred_member(&clients[0].borrow().clone(), &cluster).await;
    let since = Instant::now();
    cluster.freeze(used);
    figures.push(
        recovery(
            &record,
            &format!("SIGSTOP member a uses (member {used})"),
            since,
        )
        .await,
    );
    let asked = Instant::now();
    let (ready, body) = raw_get(&clients[0].borrow().clone(), "/readyz").await;
    let readyz_while_frozen = asked.elapsed();
    assert_eq!(ready, 200, "two members of three answer: {body}");
    cluster.thaw(used);
    steady(&record, STEADY_WRITES).await;

    // Apiserver b dies, and stays down until etcd's history no longer covers what its watcher
    // has seen: the watcher must get a 410 and list again. Then b comes back and its clients
    // follow it.
    let since = Instant::now();
    let dir = crate::support::stop(servers[1].take().unwrap());
    let seen_by_b = record.reached[1].load(Ordering::Relaxed);
    while compacted_revision(&clients[0].borrow().clone()).await <= seen_by_b {
        assert!(since.elapsed() < RECOVERY_LIMIT, "etcd was not compacted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let b = start_apiserver(dir, flag_sets[1].clone()).await.unwrap();
    clients[1].send_replace(client_of(&b).await);
    servers[1] = Some(b);
    figures.push(
        recovery(
            &record,
            "SIGKILL apiserver b (restarted after a compaction)",
            since,
        )
        .await,
    );
    steady(&record, STEADY_WRITES).await;

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
        for index in 0..2 {
            if readyz_failed[index].is_some() {
                continue;
            }
            let asked = Instant::now();
            let (code, body) = raw_get(&clients[index].borrow().clone(), "/readyz?verbose").await;
            slowest_readyz = slowest_readyz.max(asked.elapsed());
            assert_ne!(code, 0, "/readyz must answer: {body}");
            if code != 200 {
                assert!(body.contains("[-]etcd"), "{body}");
                readyz_failed[index] = Some(quorum_lost.elapsed());
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
    figures.push(recovery(&record, "quorum loss (after etcd restarted)", since).await);

    // The end: writers stop, watchers catch up with the last acknowledged write.
    stop_writers.send_replace(true);
    for writer in writers {
        writer.await.unwrap();
    }
    let last_ack = record
        .acks
        .iter()
        .flat_map(|acks| {
            acks.lock()
                .unwrap()
                .iter()
                .map(|a| a.revision)
                .collect::<Vec<_>>()
        })
        .max()
        .unwrap();
    let caught_up = Instant::now();
    while record
        .reached
        .iter()
        .any(|r| r.load(Ordering::Relaxed) < last_ack)
    {
        assert!(
            caught_up.elapsed() < RECOVERY_LIMIT,
            "the watchers did not catch up with revision {last_ack}: {:?}",
            record.reached
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop_watchers.send_replace(true);
    for watcher in watchers {
        watcher.await.unwrap();
    }

    // Every acknowledged write is stored, as acknowledged.
    let stored: BTreeMap<String, i64> =
        Api::<ConfigMap>::namespaced(clients[0].borrow().clone(), NAMESPACE)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .map(|cm| {
                (
                    cm.metadata.name.clone().unwrap(),
                    resource_version(&cm.metadata),
                )
            })
            .collect();
    let acks: Vec<Ack> = record
        .acks
        .iter()
        .flat_map(|acks| acks.lock().unwrap().clone())
        .collect();
    let lost_writes: Vec<&Ack> = acks
        .iter()
        .filter(|ack| stored.get(&ack.name) != Some(&ack.revision))
        .collect();
    assert!(
        lost_writes.is_empty(),
        "acknowledged writes lost: {lost_writes:?}"
    );
    let unknown = record.unknown.lock().unwrap().clone();
    for name in stored.keys() {
        assert!(
            acks.iter().any(|a| a.name == *name) || unknown.contains(name),
            "{name} is stored but was never written"
        );
    }

    // Every stream is consistent with the store and complete.
    for index in 0..2 {
        let epochs = record.epochs[index].lock().unwrap();
        let mut known: BTreeMap<String, i64> = BTreeMap::new();
        for (number, epoch) in epochs.iter().enumerate() {
            for (name, revision) in &known {
                assert_eq!(
                    epoch.listed.get(name),
                    Some(revision),
                    "watcher {index}: relist {number} lost or changed {name}"
                );
            }
            known = epoch.listed.clone();
            let mut last = epoch.list_revision;
            for (kind, name, revision, _) in &epoch.events {
                assert_eq!(kind, "ADDED", "watcher {index}: {name} was only created");
                assert!(
                    *revision > last,
                    "watcher {index}: {name} at {revision} after {last}: out of order"
                );
                assert!(
                    known.insert(name.clone(), *revision).is_none(),
                    "watcher {index}: {name} delivered twice"
                );
                last = *revision;
            }
        }
        for (name, revision) in &known {
            assert_eq!(
                stored.get(name),
                Some(revision),
                "watcher {index}: {name} is not stored so"
            );
        }
        for ack in &acks {
            if known.get(&ack.name) != Some(&ack.revision) {
                // What the watcher did, for the failure below.
                eprintln!("{}", record.trace[index].lock().unwrap().join("\n"));
            }
            assert_eq!(
                known.get(&ack.name),
                Some(&ack.revision),
                "watcher {index} missed {}",
                ack.name
            );
        }
    }

    assert!(
        record.expired[1].load(Ordering::Relaxed) >= 1,
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
        acks.len(),
        failures
    );
    println!(
        "chaos: watch events: a {}, b {}; 410s: a {}, b {}",
        record.epochs[0]
            .lock()
            .unwrap()
            .iter()
            .map(|e| e.events.len())
            .sum::<usize>(),
        record.epochs[1]
            .lock()
            .unwrap()
            .iter()
            .map(|e| e.events.len())
            .sum::<usize>(),
        record.expired[0].load(Ordering::Relaxed),
        record.expired[1].load(Ordering::Relaxed),
    );
    println!(
        "chaos: recovery after each fault (first acknowledged write sent after it / first watch event of such a write), per apiserver a | b:"
    );
    for figure in &figures {
        println!(
            "  {:<52} writes {:>6.2}s | {:>6.2}s   watches {:>6.2}s | {:>6.2}s",
            figure.fault,
            figure.write[0].as_secs_f64(),
            figure.write[1].as_secs_f64(),
            figure.watch[0].as_secs_f64(),
            figure.watch[1].as_secs_f64(),
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
