//! The chaos tests' workload and its checks, shared by `ha_chaos` (processes on loopback) and
//! `compose_chaos` (the Compose cluster's containers): a writer and a watcher on each of two API
//! servers, recording everything they see, and the verdict on what they recorded.
//!
//! Each writer creates ConfigMaps and, every third write, updates one it created before (a
//! JSON merge patch, so that no write depends on the one before it); every write's value is
//! unique, and every outcome is recorded: acknowledged (with the revision the answer carries),
//! refused (the test fails at once: nothing here is invalid), or unknown (a 5xx, a timeout, a
//! broken connection: it may or may not have been stored). Each watcher lists and watches the
//! writers' ConfigMaps (by label) as a client does: from the last revision it saw when a stream
//! ends, from a new list after a 410.
//!
//! [`verdict`] judges it all against a final list of the store: every acknowledged write is
//! readable (its value, or a later write's to the same object); nothing is stored that no
//! writer wrote; each watcher's events come in revision order, each object's ADDED first and
//! never twice, and every acknowledged write reaches every watcher, unless a 410 made the
//! watcher list again after the write had been superseded; each relist is consistent with
//! what the watcher had; at the end each watcher holds what the store holds.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// The namespace the workload writes in.
pub const NAMESPACE: &str = "chaos";
/// The label every written ConfigMap carries, and the watchers select.
const LABEL: &str = "genplane-chaos";
/// How long any wait for recovery may take before the test fails.
pub const RECOVERY_LIMIT: Duration = Duration::from_secs(60);
/// How long one write may take before the writer gives up on it (its outcome is unknown).
const WRITE_TIMEOUT: Duration = Duration::from_secs(20);
/// The writers' names (and their objects' prefixes), one per API server.
pub const SERVERS: [&str; 2] = ["a", "b"];

/// An acknowledged write.
#[derive(Clone, Debug)]
pub struct Ack {
    pub name: String,
    pub value: String,
    pub revision: i64,
    pub sent: Instant,
    pub acked: Instant,
}

/// What one watcher saw between two lists.
#[derive(Debug, Default)]
pub struct Epoch {
    /// The list the epoch began with, and its revision.
    listed: BTreeMap<String, i64>,
    list_revision: i64,
    /// Every event after it: type, name, revision, when it arrived.
    events: Vec<(String, String, i64, Instant)>,
    /// The revision it had everything up to (its events' and bookmarks').
    reached: i64,
}

/// Everything the writers and watchers record, shared with the test.
#[derive(Default)]
pub struct Record {
    /// Per API server.
    pub acks: [Mutex<Vec<Ack>>; 2],
    /// Writes whose outcome is unknown (a 5xx, a timeout, a broken connection): name, value.
    unknown: Mutex<Vec<(String, String)>>,
    /// Every failed write: API server, HTTP code (0 without an answer), when it was sent.
    pub failures: Mutex<Vec<(usize, u16, Instant)>>,
    /// When each write was sent, by value.
    sent: Mutex<HashMap<String, Instant>>,
    /// Per watcher.
    epochs: [Mutex<Vec<Epoch>>; 2],
    /// Per watcher: the revision it has everything up to.
    pub reached: [AtomicI64; 2],
    /// Per watcher: how many 410s it got, and when.
    expired: [Mutex<Vec<Instant>>; 2],
    /// Per watcher: its watches, bookmarks, errors and ends, to explain a failure.
    trace: [Mutex<Vec<String>>; 2],
}

impl Record {
    /// How many 410s watcher `index` got.
    pub fn expired(&self, index: usize) -> usize {
        self.expired[index].lock().unwrap().len()
    }

    /// How many 410s watcher `index` got in `[from, to)`.
    pub fn expired_between(&self, index: usize, from: Instant, to: Instant) -> usize {
        let expired = self.expired[index].lock().unwrap();
        expired
            .iter()
            .filter(|at| **at >= from && **at < to)
            .count()
    }

    /// How many events watcher `index` received.
    pub fn events(&self, index: usize) -> usize {
        let epochs = self.epochs[index].lock().unwrap();
        epochs.iter().map(|e| e.events.len()).sum()
    }

    fn trace(&self, index: usize, line: String) {
        self.trace[index]
            .lock()
            .unwrap()
            .push(format!("{:?} {line}", Instant::now()));
    }
}

pub fn resource_version(meta: &ObjectMeta) -> i64 {
    meta.resource_version
        .as_deref()
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(0)
}

/// One write of writer `index` through `api`: a create of `name`, or with `update` a merge
/// patch of it, carrying `value`. Records the outcome.
async fn write(
    index: usize,
    api: &Api<ConfigMap>,
    name: &str,
    value: &str,
    update: bool,
    record: &Record,
) -> bool {
    let data = json!({"data": {"v": value}});
    let sent = Instant::now();
    record.sent.lock().unwrap().insert(value.to_owned(), sent);
    let outcome = if update {
        tokio::time::timeout(
            WRITE_TIMEOUT,
            api.patch(name, &PatchParams::default(), &Patch::Merge(&data)),
        )
        .await
    } else {
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {LABEL: SERVERS[index]}},
            "data": data["data"],
        }))
        .unwrap();
        tokio::time::timeout(WRITE_TIMEOUT, api.create(&PostParams::default(), &cm)).await
    };
    let code = match outcome {
        Ok(Ok(written)) => {
            record.acks[index].lock().unwrap().push(Ack {
                name: name.to_owned(),
                value: value.to_owned(),
                revision: resource_version(&written.metadata),
                sent,
                acked: Instant::now(),
            });
            return true;
        }
        Ok(Err(kube::Error::Api(status))) if status.code < 500 => {
            panic!(
                "a write of {name} through API server {} was refused: {status:?}",
                SERVERS[index]
            );
        }
        Ok(Err(kube::Error::Api(status))) => status.code,
        Ok(Err(_)) | Err(_) => 0,
    };
    record.failures.lock().unwrap().push((index, code, sent));
    record
        .unknown
        .lock()
        .unwrap()
        .push((name.to_owned(), value.to_owned()));
    false
}

/// Writes through API server `index` until `stop`, a pause between two writes: creates, and
/// every third write an update of an object created before.
async fn writer(
    index: usize,
    client: watch::Receiver<kube::Client>,
    record: Arc<Record>,
    stop: watch::Receiver<bool>,
    pause: Duration,
) {
    let prefix = SERVERS[index];
    let mut created: Vec<String> = Vec::new();
    for n in 0.. {
        if *stop.borrow() {
            return;
        }
        let api = Api::<ConfigMap>::namespaced(client.borrow().clone(), NAMESPACE);
        let value = format!("{prefix}{n}");
        let acked = if n % 3 == 2 && !created.is_empty() {
            let name = created[(n / 3) % created.len()].clone();
            write(index, &api, &name, &value, true, &record).await
        } else {
            let name = format!("{prefix}-{n}");
            let acked = write(index, &api, &name, &value, false, &record).await;
            if acked {
                created.push(name);
            }
            acked
        };
        if !acked {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(pause).await;
    }
}

/// Lists and watches the writers' ConfigMaps through API server `index` as a client would:
/// watch again from the last revision when a stream ends, list again after a 410.
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
            None => match api.list(&ListParams::default().labels(LABEL)).await {
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
                        reached: list_revision,
                    });
                    record.reached[index].fetch_max(list_revision, Ordering::Relaxed);
                    record.trace(index, format!("listed at {list_revision}"));
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
        let params = WatchParams::default().labels(LABEL).timeout(20);
        record.trace(index, format!("watch from {from}"));
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
                    record.trace(index, format!("error {e}"));
                    break;
                }
                None => {
                    record.trace(index, "end".into());
                    break;
                }
            };
            let (kind, meta) = match &event {
                WatchEvent::Added(cm) => ("ADDED", &cm.metadata),
                WatchEvent::Modified(cm) => ("MODIFIED", &cm.metadata),
                WatchEvent::Deleted(cm) => ("DELETED", &cm.metadata),
                WatchEvent::Bookmark(bookmark) => {
                    let at = &bookmark.metadata.resource_version;
                    record.trace(index, format!("bookmark {at}"));
                    revision = Some(at.clone());
                    if let Ok(at) = at.parse() {
                        record.reached[index].fetch_max(at, Ordering::Relaxed);
                        let mut epochs = record.epochs[index].lock().unwrap();
                        let epoch = epochs.last_mut().unwrap();
                        epoch.reached = epoch.reached.max(at);
                    }
                    continue;
                }
                WatchEvent::Error(status) if status.code == 410 => {
                    record.trace(index, format!("410 {}", status.message));
                    record.expired[index].lock().unwrap().push(Instant::now());
                    revision = None;
                    break;
                }
                WatchEvent::Error(e) => {
                    record.trace(index, format!("ERROR {e:?}"));
                    break;
                }
            };
            let at = resource_version(meta);
            let name = meta.name.clone().unwrap();
            let mut epochs = record.epochs[index].lock().unwrap();
            let epoch = epochs.last_mut().unwrap();
            epoch
                .events
                .push((kind.to_owned(), name, at, Instant::now()));
            epoch.reached = epoch.reached.max(at);
            drop(epochs);
            revision = Some(at.to_string());
            record.reached[index].fetch_max(at, Ordering::Relaxed);
        }
    }
}

/// A GET of `path` through `client`: the status code and body; 0 when no answer came.
pub async fn raw_get(client: &kube::Client, path: &str) -> (u16, String) {
    let request = hyper::Request::get(path).body(Vec::new()).unwrap();
    match tokio::time::timeout(Duration::from_secs(10), client.request_text(request)).await {
        Ok(Ok(body)) => (200, body),
        Ok(Err(kube::Error::Api(status))) => (status.code, status.message),
        Ok(Err(other)) => (0, other.to_string()),
        Err(_) => (0, "no answer within 10s".into()),
    }
}

/// The etcd endpoint API server `client` sends its requests to, from its metrics.
pub async fn preferred_endpoint(client: &kube::Client) -> String {
    let (_, metrics) = raw_get(client, "/metrics").await;
    metrics
        .lines()
        .find_map(|line| {
            let rest = line.strip_prefix("genplane_etcd_member_preferred{endpoint=\"")?;
            let (endpoint, value) = rest.split_once("\"} ")?;
            (value.trim() == "1").then(|| endpoint.to_owned())
        })
        .expect("a preferred member in the metrics")
}

/// When, after `since`, API server `index` acknowledged its first write sent after `since`.
fn write_recovered(record: &Record, index: usize, since: Instant) -> Option<Duration> {
    record.acks[index]
        .lock()
        .unwrap()
        .iter()
        .filter(|ack| ack.sent >= since)
        .map(|ack| ack.acked - since)
        .min()
}

/// When, after `since`, watcher `index` received its first event of a write sent after
/// `since`.
fn watch_recovered(record: &Record, index: usize, since: Instant) -> Option<Duration> {
    let sent = record.sent.lock().unwrap();
    let acks: Vec<(String, i64)> = record
        .acks
        .iter()
        .flat_map(|acks| {
            acks.lock()
                .unwrap()
                .iter()
                .filter(|ack| sent.get(&ack.value).is_some_and(|at| *at >= since))
                .map(|ack| (ack.name.clone(), ack.revision))
                .collect::<Vec<_>>()
        })
        .collect();
    let epochs = record.epochs[index].lock().unwrap();
    epochs
        .iter()
        .flat_map(|epoch| &epoch.events)
        .filter(|(_, name, at, _)| acks.iter().any(|(n, r)| n == name && r == at))
        .map(|(_, _, _, received)| received.saturating_duration_since(since))
        .min()
}

/// How long after a moment both API servers' writes and watches worked again.
#[derive(Debug)]
pub struct Recovery {
    /// Per API server: its first acknowledged write sent after the moment.
    pub write: [Duration; 2],
    /// Per watcher: its first event of such a write.
    pub watch: [Duration; 2],
}

/// The writers, the watchers, and what they record.
pub struct Workload {
    pub record: Arc<Record>,
    clients: [watch::Sender<kube::Client>; 2],
    stop_writers: watch::Sender<bool>,
    stop_watchers: watch::Sender<bool>,
    writers: Vec<JoinHandle<()>>,
    watchers: Vec<JoinHandle<()>>,
}

impl Workload {
    /// Creates the namespace through the first client, then starts a watcher and a writer on
    /// each, the writers pausing `pause` between two writes.
    pub async fn start(clients: [kube::Client; 2], pause: Duration) -> Workload {
        let ns = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).unwrap();
        Api::<k8s_openapi::api::core::v1::Namespace>::all(clients[0].clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap();
        let clients = clients.map(watch::Sender::new);
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
                pause,
            )));
        }
        Workload {
            record,
            clients,
            stop_writers,
            stop_watchers,
            writers,
            watchers,
        }
    }

    /// The client of API server `index`.
    pub fn client(&self, index: usize) -> kube::Client {
        self.clients[index].borrow().clone()
    }

    /// Hands API server `index`'s writer and watcher a new client.
    pub fn replace_client(&self, index: usize, client: kube::Client) {
        self.clients[index].send_replace(client);
    }

    /// Waits until the writer and the watcher of each API server of `servers` have recovered
    /// after `since` (see [`Recovery`]; the others' figures are zero); fails after
    /// [`RECOVERY_LIMIT`].
    pub async fn recovered(&self, what: &str, since: Instant, servers: &[usize]) -> Recovery {
        loop {
            let record = &self.record;
            let write = [0, 1].map(|i| {
                if servers.contains(&i) {
                    write_recovered(record, i, since)
                } else {
                    Some(Duration::ZERO)
                }
            });
            let watch = [0, 1].map(|i| {
                if servers.contains(&i) {
                    watch_recovered(record, i, since)
                } else {
                    Some(Duration::ZERO)
                }
            });
            if let ([Some(wa), Some(wb)], [Some(va), Some(vb)]) = (write, watch) {
                return Recovery {
                    write: [wa, wb],
                    watch: [va, vb],
                };
            }
            assert!(
                since.elapsed() < RECOVERY_LIMIT,
                "no recovery from {what} within {RECOVERY_LIMIT:?}: writes {write:?}, watches {watch:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Both API servers' recovery after `since`.
    pub async fn recovery(&self, what: &str, since: Instant) -> Recovery {
        self.recovered(what, since, &[0, 1]).await
    }

    /// Waits until each writer has had `count` more writes acknowledged: load between faults.
    pub async fn steady(&self, count: usize) {
        let acked = |i: usize| self.record.acks[i].lock().unwrap().len();
        let start = [0, 1].map(acked);
        let since = Instant::now();
        while (0..2).any(|i| acked(i) < start[i] + count) {
            assert!(
                since.elapsed() < RECOVERY_LIMIT,
                "the writers stalled after a repair"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The highest revision an acknowledged write got.
    pub fn last_ack(&self) -> i64 {
        let record = &self.record;
        let revisions = record
            .acks
            .iter()
            .flat_map(|acks| acks.lock().unwrap().iter().map(|a| a.revision).max());
        revisions.max().unwrap_or(0)
    }

    /// Stops the writers, waits until both watchers hold what the store holds (read through
    /// API server `reader`), stops them, and judges everything recorded.
    pub async fn finish(mut self, reader: usize) -> Verdict {
        self.stop_writers.send_replace(true);
        for writer in self.writers.drain(..) {
            writer.await.unwrap();
        }
        let api = Api::<ConfigMap>::namespaced(self.client(reader), NAMESPACE);
        let since = Instant::now();
        // A write given up on may still land late: list until the store no longer changes.
        let mut stored: BTreeMap<String, (i64, String)> = BTreeMap::new();
        loop {
            let list = api
                .list(&ListParams::default().labels(LABEL))
                .await
                .unwrap();
            let now: BTreeMap<String, (i64, String)> = list
                .items
                .iter()
                .map(|cm| {
                    let value = cm.data.as_ref().and_then(|d| d.get("v")).cloned();
                    (
                        cm.metadata.name.clone().unwrap(),
                        (resource_version(&cm.metadata), value.unwrap_or_default()),
                    )
                })
                .collect();
            let newest = now.values().map(|(r, _)| *r).max().unwrap_or(0);
            let behind = || {
                let reached = &self.record.reached;
                reached.iter().any(|r| r.load(Ordering::Relaxed) < newest)
            };
            while behind() && since.elapsed() < RECOVERY_LIMIT {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            if now == stored || behind() {
                // A watcher that never catches up: the verdict says what it misses.
                stored = now;
                break;
            }
            stored = now;
        }
        self.stop_watchers.send_replace(true);
        for watcher in self.watchers.drain(..) {
            watcher.await.unwrap();
        }
        verdict(&self.record, &stored)
    }
}

/// Something that should not have happened, and when the write it concerns was sent.
#[derive(Debug, Clone)]
pub struct Finding {
    pub sent: Option<Instant>,
    pub what: String,
}

/// What the workload's record says, against the store.
#[derive(Debug, Default)]
pub struct Verdict {
    /// Acknowledged writes not in the store (neither their value nor a later write's).
    pub lost: Vec<Finding>,
    /// Objects in the store with a value no writer wrote.
    pub phantom: Vec<Finding>,
    /// Per watcher: acknowledged writes it never received (and no 410 excuses).
    pub gaps: [Vec<Finding>; 2],
    /// Per watcher: events out of revision order, twice, or disagreeing with a relist or the
    /// store.
    pub disorder: [Vec<Finding>; 2],
    /// Acknowledged writes, all told.
    pub acked: usize,
}

impl Verdict {
    /// Whether nothing was found.
    pub fn clean(&self) -> bool {
        self.lost.is_empty()
            && self.phantom.is_empty()
            && self.gaps.iter().all(Vec::is_empty)
            && self.disorder.iter().all(Vec::is_empty)
    }

    /// Of the findings about writes sent in `[from, to)`: lost, and the watchers' gaps.
    pub fn between(&self, from: Instant, to: Instant) -> (usize, [usize; 2]) {
        let count = |findings: &[Finding]| {
            findings
                .iter()
                .filter(|f| f.sent.is_some_and(|at| at >= from && at < to))
                .count()
        };
        (
            count(&self.lost),
            [count(&self.gaps[0]), count(&self.gaps[1])],
        )
    }

    /// Fails the test with every finding (and the watchers' traces where they missed events).
    pub fn assert_clean(&self, record: &Record) {
        if self.clean() {
            return;
        }
        for (index, name) in SERVERS.iter().enumerate() {
            if !self.gaps[index].is_empty() || !self.disorder[index].is_empty() {
                let trace = record.trace[index].lock().unwrap().join("\n");
                eprintln!("watcher {name}:\n{trace}");
            }
        }
        let show = |findings: &[Finding]| {
            findings
                .iter()
                .map(|f| f.what.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        };
        panic!(
            "acknowledged writes lost: [{}]\nstored but never written: [{}]\nwatcher gaps: a [{}], b [{}]\nwatcher disorder: a [{}], b [{}]",
            show(&self.lost),
            show(&self.phantom),
            show(&self.gaps[0]),
            show(&self.gaps[1]),
            show(&self.disorder[0]),
            show(&self.disorder[1]),
        );
    }
}

/// Judges `record` against `stored` (name → revision and value, the writers' objects).
pub fn verdict(record: &Record, stored: &BTreeMap<String, (i64, String)>) -> Verdict {
    let acks: Vec<Ack> = record
        .acks
        .iter()
        .flat_map(|acks| acks.lock().unwrap().clone())
        .collect();
    let unknown = record.unknown.lock().unwrap().clone();
    let sent = record.sent.lock().unwrap();
    let mut verdict = Verdict {
        acked: acks.len(),
        ..Verdict::default()
    };
    // Which write each stored value comes from.
    let written = |name: &str, value: &str| {
        acks.iter().any(|a| a.name == name && a.value == value)
            || unknown.iter().any(|(n, v)| n == name && v == value)
    };
    for (name, (_, value)) in stored {
        if !written(name, value) {
            verdict.phantom.push(Finding {
                sent: sent.get(value).copied(),
                what: format!("{name}={value}"),
            });
        }
    }
    for ack in &acks {
        let kept = match stored.get(&ack.name) {
            Some((revision, value)) if *revision == ack.revision => *value == ack.value,
            // A later write's value: it must be one of this object's.
            Some((revision, value)) => *revision > ack.revision && written(&ack.name, value),
            None => false,
        };
        if !kept {
            verdict.lost.push(Finding {
                sent: Some(ack.sent),
                what: format!(
                    "{}={} at {} (stored: {:?})",
                    ack.name,
                    ack.value,
                    ack.revision,
                    stored.get(&ack.name)
                ),
            });
        }
    }
    for index in 0..2 {
        let epochs = record.epochs[index].lock().unwrap();
        let disorder = &mut verdict.disorder[index];
        let mut fault = |what: String| {
            disorder.push(Finding { sent: None, what });
        };
        // Every revision this watcher saw of each object.
        let mut seen: HashMap<&str, Vec<i64>> = HashMap::new();
        let mut known: BTreeMap<String, i64> = BTreeMap::new();
        for (number, epoch) in epochs.iter().enumerate() {
            for (name, revision) in &known {
                if epoch
                    .listed
                    .get(name)
                    .is_none_or(|listed| listed < revision)
                {
                    fault(format!(
                        "relist {number} at {} has {name} at {:?}, after {revision}",
                        epoch.list_revision,
                        epoch.listed.get(name)
                    ));
                }
            }
            known = epoch.listed.clone();
            for (name, revision) in &epoch.listed {
                seen.entry(name).or_default().push(*revision);
            }
            let mut last = epoch.list_revision;
            for (kind, name, revision, _) in &epoch.events {
                if *revision <= last {
                    fault(format!("{kind} {name} at {revision} after {last}"));
                }
                let before = known.insert(name.clone(), *revision);
                match (kind.as_str(), before) {
                    ("ADDED", None) => {}
                    ("MODIFIED", Some(before)) if before < *revision => {}
                    _ => fault(format!("{kind} {name} at {revision}, known at {before:?}")),
                }
                seen.entry(name).or_default().push(*revision);
                last = last.max(*revision);
            }
        }
        for (name, revision) in &known {
            if stored.get(name).map(|(r, _)| r) != Some(revision) {
                fault(format!(
                    "ends with {name} at {revision}, stored at {:?}",
                    stored.get(name)
                ));
            }
        }
        for name in stored.keys() {
            if !known.contains_key(name) {
                fault(format!("never heard of {name}"));
            }
        }
        // A write the watcher never saw is excused only when a 410 ended an epoch before it,
        // and the list after it had a later write of the object.
        let excused = |ack: &Ack| {
            epochs.windows(2).any(|pair| {
                pair[0].reached < ack.revision
                    && ack.revision <= pair[1].list_revision
                    && pair[1]
                        .listed
                        .get(&ack.name)
                        .is_some_and(|r| *r > ack.revision)
            })
        };
        for ack in &acks {
            let saw = seen
                .get(ack.name.as_str())
                .is_some_and(|revisions| revisions.contains(&ack.revision));
            if !saw && !excused(ack) {
                verdict.gaps[index].push(Finding {
                    sent: Some(ack.sent),
                    what: format!("{}={} at {}", ack.name, ack.value, ack.revision),
                });
            }
        }
    }
    verdict
}
