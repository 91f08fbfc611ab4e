//! Dispatching: the server's concurrency shared among priority levels, and each request
//! admitted, queued or rejected by its level.
//!
//! A [`FlowControl`] holds the configuration (the compiled FlowSchemas and the levels, replaced
//! whole by [`FlowControl::configure`] each time the stored objects change) and each level's
//! `QueueSet` ([`super::queueset`]). The server's concurrency limit (the sum of
//! `--max-requests-inflight` and `--max-mutating-requests-inflight`, as upstream) is divided
//! among the levels by `nominalConcurrencyShares`: a level's nominal limit is
//! `ceil(limit × shares / all shares)`, of which `lendablePercent` may be lent and beyond
//! which `borrowingLimitPercent` may be borrowed. Every 10 seconds, on the first request after
//! the period ends, the current limits are allocated again from each level's seat demand
//! (`allocation`).
//!
//! A configuration without the mandatory `exempt` or `catch-all` objects is completed with
//! them (as upstream imagines them until they are stored). A level that disappears lets its
//! waiting requests run; those running finish on it.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};
use std::time::{Duration, Instant};

use genplane_api::flowcontrol::{
    CATCH_ALL, PriorityLevelSpec, RESPONSE_REJECT, TYPE_EXEMPT, bootstrap,
};
use genplane_authentication::UserInfo;
use hyper::header::HeaderValue;
use prometheus_client::metrics::histogram::Histogram;
use serde_json::Value;

use super::Snapshot;
use super::allocation;
use super::queueset::{Arrival, DemandStats, Limit, QueueSet, RejectReason, Slot};
use super::width::{self, WorkEstimate};
use crate::request_info::RequestInfo;

/// How often the levels' current limits are allocated again.
const ADJUSTMENT_PERIOD: Duration = Duration::from_secs(10);
/// The longest `Retry-After` a rejection suggests.
const MAX_RETRY_AFTER: u32 = 60;

/// Upstream's buckets of the wait and execution histograms, in seconds.
const DURATION_BUCKETS: [f64; 12] = [
    0.0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0,
];
/// Upstream's buckets of the estimated seats histogram.
const SEATS_BUCKETS: [f64; 4] = [1.0, 2.0, 4.0, 10.0];

/// Upstream's defaults for what a stored spec may leave out.
const DEFAULT_LIMITED_SHARES: i32 = 30;
const DEFAULT_QUEUES: i32 = 64;
const DEFAULT_HAND_SIZE: i32 = 8;
const DEFAULT_QUEUE_LENGTH_LIMIT: i32 = 50;

/// The `Retry-After` a level suggests to those it rejects: 1 second, doubled (up to a minute)
/// for each window of that length in which it kept rejecting after rejecting in the one
/// before, halved for each window without a rejection.
#[derive(Debug)]
struct RetryAfter {
    seconds: u32,
    window_start: Instant,
    dropped_now: bool,
    dropped_before: bool,
}

impl RetryAfter {
    fn new(now: Instant) -> Self {
        Self {
            seconds: 1,
            window_start: now,
            dropped_now: false,
            dropped_before: false,
        }
    }

    /// Notes a rejection at `now`; answers the `Retry-After` to give it.
    fn dropped(&mut self, now: Instant) -> u32 {
        let mut windows = 0;
        while now.saturating_duration_since(self.window_start)
            >= Duration::from_secs(u64::from(self.seconds))
        {
            windows += 1;
            if windows > 16 {
                // Long quiet: start over.
                *self = Self::new(now);
                break;
            }
            self.window_start += Duration::from_secs(u64::from(self.seconds));
            if self.dropped_now && self.dropped_before {
                self.seconds = (self.seconds * 2).min(MAX_RETRY_AFTER);
            } else if !self.dropped_now {
                self.seconds = (self.seconds / 2).max(1);
            }
            self.dropped_before = self.dropped_now;
            self.dropped_now = false;
        }
        self.dropped_now = true;
        self.seconds
    }
}

/// A level's configuration as dispatching reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Params {
    shares: u32,
    lendable_percent: u32,
    borrowing_percent: Option<u32>,
    limit: Limit,
    hand_size: u32,
}

fn non_negative(value: Option<i32>, default: i32) -> u32 {
    u32::try_from(value.unwrap_or(default)).unwrap_or(0)
}

impl Params {
    fn of(spec: &PriorityLevelSpec) -> Self {
        if spec.type_ == TYPE_EXEMPT {
            let exempt = spec.exempt.clone().unwrap_or_default();
            return Self {
                shares: non_negative(exempt.nominal_concurrency_shares, 0),
                lendable_percent: non_negative(exempt.lendable_percent, 0),
                borrowing_percent: None,
                limit: Limit::Exempt,
                hand_size: 0,
            };
        }
        let limited = spec.limited.clone().unwrap_or_default();
        let (limit, hand_size) = if limited.limit_response.type_ == RESPONSE_REJECT {
            (Limit::Reject, 0)
        } else {
            let queuing = limited.limit_response.queuing.clone();
            let (queues, hand_size, length) = queuing.map_or(
                (
                    DEFAULT_QUEUES,
                    DEFAULT_HAND_SIZE,
                    DEFAULT_QUEUE_LENGTH_LIMIT,
                ),
                |q| (q.queues, q.hand_size, q.queue_length_limit),
            );
            let queues = usize::try_from(queues.max(1)).unwrap_or(1);
            let hand_size = usize::try_from(hand_size.max(1)).unwrap_or(1).min(queues);
            (
                Limit::Queue {
                    queues,
                    hand_size,
                    queue_length_limit: usize::try_from(length.max(1)).unwrap_or(1),
                },
                hand_size as u32,
            )
        };
        Self {
            shares: non_negative(limited.nominal_concurrency_shares, DEFAULT_LIMITED_SHARES),
            lendable_percent: non_negative(limited.lendable_percent, 0),
            borrowing_percent: limited
                .borrowing_limit_percent
                .map(|p| u32::try_from(p).unwrap_or(0)),
            limit,
            hand_size,
        }
    }
}

/// One level's mutable state.
#[derive(Debug)]
pub(crate) struct LevelState {
    params: Params,
    pub(crate) nominal: u32,
    pub(crate) lendable: u32,
    pub(crate) borrowing: Option<u32>,
    pub(crate) set: QueueSet,
    retry: RetryAfter,
    /// Whether the level is still in the configuration.
    pub(crate) configured: bool,
}

/// A priority level being dispatched.
#[derive(Debug)]
pub(crate) struct Level {
    pub(crate) name: Arc<str>,
    /// The most seats one of its requests takes (read without the lock).
    max_seats: AtomicU32,
    pub(crate) state: Mutex<LevelState>,
}

impl Level {
    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, LevelState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The configuration in force: the classification and the levels, in the same order.
#[derive(Debug)]
pub(crate) struct Config {
    pub(crate) snapshot: Snapshot,
    pub(crate) levels: Vec<Arc<Level>>,
    /// What each FlowSchema's requests carry, at its index in the snapshot's matching order:
    /// made once per configuration, so that classifying a request builds nothing.
    flows: Vec<Flow>,
}

/// A FlowSchema's classification and its metrics' counts.
#[derive(Debug)]
struct Flow {
    classified: Arc<Classified>,
    counts: Arc<FlowCounts>,
}

/// API Priority and Fairness for one server (see the module's documentation).
#[derive(Debug)]
pub struct FlowControl {
    server_limit: u32,
    wait_limit: Duration,
    config: RwLock<Arc<Config>>,
    next_adjustment: Mutex<Instant>,
    next_id: AtomicU64,
    /// Open watches.
    watches: Arc<Mutex<WatchCounts>>,
    /// What the debug dump shows of each waiting request, by its id.
    pub(crate) waiting: Arc<Mutex<HashMap<u64, WaitingRequest>>>,
    /// The metrics' counts of each flow schema and level met.
    counts: Mutex<HashMap<FlowKey, Arc<FlowCounts>>>,
}

/// A FlowSchema's name and its priority level's.
pub type FlowKey = (Arc<str>, Arc<str>);

/// What the metrics count of the requests of one FlowSchema and level.
#[derive(Debug, Default)]
pub struct FlowCounts {
    /// Requests dispatched.
    pub dispatched: AtomicU64,
    /// Requests rejected, by reason (at [`RejectReason::index`]).
    pub rejected: [AtomicU64; 4],
    /// Requests waiting in a queue now.
    pub waiting: AtomicI64,
    /// Requests executing now.
    pub executing: AtomicI64,
    /// Seats held by executing requests now.
    pub executing_seats: AtomicI64,
    /// How long requests waited in a queue: those that then ran, those that did not (timed
    /// out or cancelled). Made when first observed.
    pub wait: [OnceLock<Histogram>; 2],
    /// How long requests ran (a watch until its stream started): other requests, watches.
    /// Made when first observed.
    pub execution: [OnceLock<Histogram>; 2],
    /// The seats each request was estimated to take. Made when first observed.
    pub estimated_seats: OnceLock<Histogram>,
}

/// Observes `value` in the histogram of `cell` with `buckets`, made if it is not yet.
fn observe(cell: &OnceLock<Histogram>, buckets: &[f64], value: f64) {
    cell.get_or_init(|| Histogram::new(buckets.iter().copied()))
        .observe(value);
}

impl FlowCounts {
    /// The `execute` label of each of [`FlowCounts::wait`].
    pub const WAIT_EXECUTE: [&'static str; 2] = ["true", "false"];
    /// The `type` label of each of [`FlowCounts::execution`].
    pub const EXECUTION_TYPE: [&'static str; 2] = ["regular", "watch"];

    fn reject(&self, reason: RejectReason) {
        self.rejected[reason.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// Observes a wait in a queue of `waited`, after which the request ran or did not.
    fn waited(&self, waited: Duration, ran: bool) {
        observe(
            &self.wait[usize::from(!ran)],
            &DURATION_BUCKETS,
            waited.as_secs_f64(),
        );
    }

    fn start(&self, seats: u32) {
        self.dispatched.fetch_add(1, Ordering::Relaxed);
        self.executing.fetch_add(1, Ordering::Relaxed);
        self.executing_seats
            .fetch_add(i64::from(seats), Ordering::Relaxed);
    }
}

/// A level's limits as the metrics show them.
#[derive(Clone, Debug)]
pub struct LevelLimits {
    /// The level's name.
    pub name: Arc<str>,
    /// Its nominal concurrency limit, in seats.
    pub nominal: u32,
    /// Its current concurrency limit (after lending and borrowing), in seats.
    pub current: u32,
    /// The least it may be given (nominal less what it lends).
    pub lower: u32,
    /// The most it may be given (nominal plus what it may borrow; the server's limit when
    /// unbounded).
    pub upper: u32,
}

/// A waiting request as the debug dump shows it.
#[derive(Clone, Debug)]
pub(crate) struct WaitingRequest {
    pub(crate) flow_schema: Arc<str>,
    pub(crate) distinguisher: String,
    pub(crate) user: String,
    pub(crate) info: RequestInfo,
}

/// A request allowed to run: its seats are given back when this is dropped (after the
/// estimate's additional latency).
#[derive(Debug)]
pub struct Seats {
    level: Arc<Level>,
    slot: Slot,
    seats: u32,
    started: Instant,
    additional_latency: Duration,
    counts: Arc<FlowCounts>,
    watch: bool,
}

impl Drop for Seats {
    fn drop(&mut self) {
        observe(
            &self.counts.execution[usize::from(self.watch)],
            &DURATION_BUCKETS,
            self.started.elapsed().as_secs_f64(),
        );
        let level = self.level.clone();
        let counts = self.counts.clone();
        let (slot, seats, started) = (self.slot, self.seats, self.started);
        let complete = move || {
            level
                .lock()
                .set
                .complete(Instant::now(), slot, seats, started);
            counts.executing.fetch_sub(1, Ordering::Relaxed);
            counts
                .executing_seats
                .fetch_sub(i64::from(seats), Ordering::Relaxed);
        };
        if !self.additional_latency.is_zero()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let latency = self.additional_latency;
            runtime.spawn(async move {
                tokio::time::sleep(latency).await;
                complete();
            });
        } else {
            complete();
        }
    }
}

/// Where a request was classified, as its answer's headers show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Classified {
    /// The FlowSchema's name.
    pub flow_schema: Arc<str>,
    /// Its `metadata.uid`.
    pub flow_schema_uid: Arc<str>,
    /// The priority level's name.
    pub priority_level: Arc<str>,
    /// Its `metadata.uid`.
    pub priority_level_uid: Arc<str>,
    /// The FlowSchema's UID as an answer header's value (`None` if it cannot be one).
    pub flow_schema_header: Option<HeaderValue>,
    /// The priority level's UID as an answer header's value (`None` if it cannot be one).
    pub priority_level_header: Option<HeaderValue>,
}

impl Classified {
    /// The classification of requests of the FlowSchema `flow_schema` (with its `uid`) on
    /// the level `level` (with its `level_uid`).
    fn new(
        flow_schema: Arc<str>,
        uid: Arc<str>,
        priority_level: Arc<str>,
        level_uid: Arc<str>,
    ) -> Self {
        Self {
            flow_schema_header: HeaderValue::from_str(&uid).ok(),
            priority_level_header: HeaderValue::from_str(&level_uid).ok(),
            flow_schema,
            flow_schema_uid: uid,
            priority_level,
            priority_level_uid: level_uid,
        }
    }
}

/// A request that may run.
#[derive(Debug)]
pub struct Admitted {
    /// Where it was classified.
    pub classified: Arc<Classified>,
    /// Its seats (held until dropped).
    pub seats: Seats,
}

/// A request turned away: answered 429.
#[derive(Debug)]
pub struct Rejected {
    /// Where it was classified.
    pub classified: Arc<Classified>,
    /// Why.
    pub reason: RejectReason,
    /// The `Retry-After` to suggest, in seconds.
    pub retry_after: u32,
}

/// Open watches by API group, resource, namespace and name (empty for a watch of every
/// namespace, of every name), as upstream's watch tracker counts them: watches differing
/// only in their selectors are alike, since each event is matched against them anyway.
type WatchCounts = HashMap<String, HashMap<String, HashMap<String, HashMap<String, usize>>>>;

/// An open watch, counted until dropped.
#[derive(Debug)]
pub struct WatchRegistration {
    watches: Arc<Mutex<WatchCounts>>,
    group: String,
    resource: String,
    namespace: String,
    name: String,
}

impl Drop for WatchRegistration {
    fn drop(&mut self) {
        let mut watches = self.watches.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(resources) = watches.get_mut(&self.group) else {
            return;
        };
        let Some(namespaces) = resources.get_mut(&self.resource) else {
            return;
        };
        let Some(names) = namespaces.get_mut(&self.namespace) else {
            return;
        };
        if let Some(count) = names.get_mut(&self.name) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                names.remove(&self.name);
            }
        }
        if names.is_empty() {
            namespaces.remove(&self.namespace);
        }
        if namespaces.is_empty() {
            resources.remove(&self.resource);
        }
        if resources.is_empty() {
            watches.remove(&self.group);
        }
    }
}

fn flow_hash(flow_schema: &str, distinguisher: &str) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    flow_schema.hash(&mut hasher);
    distinguisher.hash(&mut hasher);
    hasher.finish()
}

fn name_of(object: &Value) -> &str {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// `stored` with the mandatory objects of `mandatory` it lacks added.
fn with_mandatory(stored: &[Value], mandatory: Vec<Value>) -> Vec<Value> {
    let mut objects = stored.to_vec();
    for object in mandatory {
        if !stored.iter().any(|s| name_of(s) == name_of(&object)) {
            objects.push(object);
        }
    }
    objects
}

impl FlowControl {
    /// Priority and fairness over `server_limit` seats, with requests waiting in queues at
    /// most `wait_limit`; configured with the mandatory objects alone until
    /// [`FlowControl::configure`] is given the stored ones.
    pub fn new(server_limit: u32, wait_limit: Duration) -> Self {
        let now = Instant::now();
        let flow_control = Self {
            server_limit: server_limit.max(1),
            wait_limit,
            config: RwLock::new(Arc::new(Config {
                snapshot: Snapshot::default(),
                levels: Vec::new(),
                flows: Vec::new(),
            })),
            next_adjustment: Mutex::new(now + ADJUSTMENT_PERIOD),
            next_id: AtomicU64::new(0),
            watches: Arc::default(),
            waiting: Arc::default(),
            counts: Mutex::default(),
        };
        flow_control.configure(&[], &[]);
        flow_control
    }

    /// The server's concurrency limit, in seats.
    pub fn server_limit(&self) -> u32 {
        self.server_limit
    }

    pub(crate) fn config(&self) -> Arc<Config> {
        self.config
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replaces the configuration with the stored FlowSchemas and PriorityLevelConfigurations
    /// (their JSON), completed with the mandatory ones they lack. Levels kept by name keep
    /// their queues and what runs on them.
    pub fn configure(&self, flow_schemas: &[Value], levels: &[Value]) {
        let flow_schemas = with_mandatory(flow_schemas, bootstrap::mandatory_flow_schemas());
        let levels = with_mandatory(levels, bootstrap::mandatory_priority_levels());
        let snapshot = Snapshot::new(&flow_schemas, &levels);
        let now = Instant::now();
        let mut current = self.config.write().unwrap_or_else(PoisonError::into_inner);
        let params: Vec<Params> = snapshot
            .levels()
            .iter()
            .map(|l| Params::of(&l.spec))
            .collect();
        let shares: u64 = params.iter().map(|p| u64::from(p.shares)).sum();
        let mut kept = Vec::with_capacity(params.len());
        for (level, params) in snapshot.levels().iter().zip(&params) {
            let nominal = if shares == 0 {
                self.server_limit
            } else {
                (u64::from(self.server_limit) * u64::from(params.shares)).div_ceil(shares) as u32
            };
            let percent = |p: u32| ((f64::from(nominal) * f64::from(p)) / 100.0).round() as u32;
            let lendable = percent(params.lendable_percent.min(100));
            let borrowing = params.borrowing_percent.map(percent);
            let max_seats = width::level_max_seats(nominal, params.hand_size);
            let existing = current
                .levels
                .iter()
                .find(|l| l.name == level.name)
                .cloned();
            let state = match existing {
                Some(existing) => {
                    {
                        let mut state = existing.lock();
                        state.nominal = nominal;
                        state.lendable = lendable;
                        state.borrowing = borrowing;
                        state.configured = true;
                        let concurrency = if state.params == *params {
                            state
                                .set
                                .concurrency
                                .min(nominal.saturating_add(borrowing.unwrap_or(self.server_limit)))
                        } else {
                            nominal
                        };
                        state.params = *params;
                        state.set.reconfigure(params.limit, concurrency, now);
                    }
                    existing.max_seats.store(max_seats, Ordering::Relaxed);
                    existing
                }
                None => Arc::new(Level {
                    name: level.name.clone(),
                    max_seats: AtomicU32::new(max_seats),
                    state: Mutex::new(LevelState {
                        params: *params,
                        nominal,
                        lendable,
                        borrowing,
                        set: QueueSet::new(params.limit, nominal, now),
                        retry: RetryAfter::new(now),
                        configured: true,
                    }),
                }),
            };
            kept.push(state);
        }
        for old in &current.levels {
            if !kept.iter().any(|k| Arc::ptr_eq(k, old)) {
                let mut state = old.lock();
                state.configured = false;
                state.set.release_all(now);
            }
        }
        let flows = snapshot
            .flow_schemas()
            .map(|(name, uid, level)| {
                let level = &snapshot.levels()[level];
                let classified = Classified::new(
                    name.clone(),
                    uid.clone(),
                    level.name.clone(),
                    level.uid.clone(),
                );
                let counts = self.counts_of(&classified);
                Flow {
                    classified: Arc::new(classified),
                    counts,
                }
            })
            .collect();
        *current = Arc::new(Config {
            snapshot,
            levels: kept,
            flows,
        });
    }

    /// The counts of `classified`'s FlowSchema and level.
    fn counts_of(&self, classified: &Classified) -> Arc<FlowCounts> {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        counts
            .entry((
                classified.flow_schema.clone(),
                classified.priority_level.clone(),
            ))
            .or_default()
            .clone()
    }

    /// The counts of every FlowSchema and level met, for the metrics.
    pub fn flow_counts(&self) -> Vec<(FlowKey, Arc<FlowCounts>)> {
        let counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let mut all: Vec<_> = counts.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// Every configured level's limits, for the metrics.
    pub fn level_limits(&self) -> Vec<LevelLimits> {
        self.config()
            .levels
            .iter()
            .map(|level| {
                let state = level.lock();
                LevelLimits {
                    name: level.name.clone(),
                    nominal: state.nominal,
                    current: if state.params.limit == Limit::Exempt {
                        state.nominal
                    } else {
                        state.set.concurrency
                    },
                    lower: state.nominal.saturating_sub(state.lendable),
                    upper: state
                        .borrowing
                        .map_or(self.server_limit, |b| state.nominal.saturating_add(b)),
                }
            })
            .collect()
    }

    /// Allocates the levels' current limits again when the period is over.
    fn adjust_if_due(&self, now: Instant) {
        let Ok(mut next) = self.next_adjustment.try_lock() else {
            return;
        };
        if now < *next {
            return;
        }
        *next = now + ADJUSTMENT_PERIOD;
        drop(next);
        self.adjust(now);
    }

    /// Allocates the levels' current limits from their seat demand since the last time.
    pub(crate) fn adjust(&self, now: Instant) {
        let config = self.config();
        let mut items = Vec::new();
        let mut limited = Vec::new();
        let mut exempt_kept = 0.0;
        for level in &config.levels {
            let mut state = level.lock();
            let stats: DemandStats = state.set.demand.take(now);
            let target = stats.high_watermark.min(stats.average + stats.deviation);
            state.set.demand.smoothed = allocation::smooth(state.set.demand.smoothed, target);
            if state.params.limit == Limit::Exempt {
                exempt_kept += f64::from(state.nominal.saturating_sub(state.lendable));
                continue;
            }
            items.push(allocation::item(
                state.nominal,
                state.lendable,
                state.borrowing,
                self.server_limit,
                stats.high_watermark,
                state.set.demand.smoothed,
            ));
            limited.push(level.clone());
        }
        let sum = (f64::from(self.server_limit) - exempt_kept).max(0.0);
        let allocations = allocation::allocate(sum, &items);
        for (level, allocation) in limited.iter().zip(allocations) {
            let mut state = level.lock();
            let limit = state.params.limit;
            let concurrency = (allocation.round() as u32).max(1);
            state.set.reconfigure(limit, concurrency, now);
        }
    }

    /// Registers the open watch `info` describes (of its resource, in its namespace or all,
    /// of its name or all; the mutating requests' estimate counts them) until the
    /// registration is dropped.
    pub fn register_watch(&self, info: &RequestInfo) -> WatchRegistration {
        let mut watches = self.watches.lock().unwrap_or_else(PoisonError::into_inner);
        *watches
            .entry(info.api_group.clone())
            .or_default()
            .entry(info.resource.clone())
            .or_default()
            .entry(info.namespace.clone())
            .or_default()
            .entry(info.name.clone())
            .or_default() += 1;
        WatchRegistration {
            watches: self.watches.clone(),
            group: info.api_group.clone(),
            resource: info.resource.clone(),
            namespace: info.namespace.clone(),
            name: info.name.clone(),
        }
    }

    /// How many open watches may be sent an event of the object `info` writes: those of its
    /// resource in every namespace, in its namespace, and of its name, as upstream counts
    /// them (a create's object has no name in its request, so only the first two count).
    pub fn watchers(&self, info: &RequestInfo) -> usize {
        let watches = self.watches.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(namespaces) = watches
            .get(&info.api_group)
            .and_then(|r| r.get(&info.resource))
        else {
            return 0;
        };
        let count = |namespace: &str, name: &str| {
            namespaces
                .get(namespace)
                .and_then(|names| names.get(name))
                .copied()
                .unwrap_or(0)
        };
        let mut interested = count("", "");
        if !info.namespace.is_empty() {
            interested += count(&info.namespace, "");
        }
        if !info.name.is_empty() {
            interested += count(&info.namespace, &info.name);
        }
        interested
    }

    /// Classifies the request `info` (with its `query`) of `user`, estimates its work
    /// (`stored` counts its resource's objects, see [`width`]), and waits
    /// until its level lets it run, or answers why it may not.
    pub async fn admit(
        &self,
        info: &RequestInfo,
        query: Option<&str>,
        user: &UserInfo,
        stored: impl FnOnce() -> Result<usize, bool>,
    ) -> Result<Admitted, Rejected> {
        let now = Instant::now();
        self.adjust_if_due(now);
        let config = self.config();
        let (classified, counts, level, flow, distinguisher) =
            match config.snapshot.classify(info, user) {
                Some(c) => {
                    let flow = &config.flows[c.schema_index];
                    (
                        flow.classified.clone(),
                        flow.counts.clone(),
                        config.levels[c.level_index].clone(),
                        flow_hash(c.flow_schema, c.distinguisher),
                        c.distinguisher,
                    )
                }
                None => {
                    // Unreachable with the mandatory catch-all; run it on the first level
                    // (exempt).
                    let level = config.levels[0].clone();
                    let classified = Classified::new(
                        Arc::from(CATCH_ALL),
                        Arc::from(""),
                        level.name.clone(),
                        Arc::from(""),
                    );
                    let counts = self.counts_of(&classified);
                    (Arc::new(classified), counts, level, 0, "")
                }
            };

        let estimate: WorkEstimate = width::estimate(
            info,
            query,
            level.max_seats.load(Ordering::Relaxed),
            stored,
            || self.watchers(info),
        );
        let seats = estimate.max_seats();
        observe(&counts.estimated_seats, &SEATS_BUCKETS, f64::from(seats));
        let watch = info.verb == "watch";
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let arrival = level.lock().set.arrive(now, seats, flow, id);
        let admitted = |level: Arc<Level>, slot: Slot, classified: Arc<Classified>| {
            counts.start(seats);
            Admitted {
                classified,
                seats: Seats {
                    level,
                    slot,
                    seats,
                    started: Instant::now(),
                    additional_latency: estimate.additional_latency,
                    counts: counts.clone(),
                    watch,
                },
            }
        };
        match arrival {
            Arrival::Dispatched(slot) => {
                counts.waited(Duration::ZERO, true);
                Ok(admitted(level, slot, classified))
            }
            Arrival::Rejected(reason) => {
                counts.reject(reason);
                let retry_after = level.lock().retry.dropped(now);
                Err(Rejected {
                    classified,
                    reason,
                    retry_after,
                })
            }
            Arrival::Queued { slot, dispatched } => {
                self.waiting
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(
                        id,
                        WaitingRequest {
                            flow_schema: classified.flow_schema.clone(),
                            distinguisher: distinguisher.to_owned(),
                            user: user.username.clone(),
                            info: info.clone(),
                        },
                    );
                counts.waiting.fetch_add(1, Ordering::Relaxed);
                let mut waiting = Waiting {
                    level: level.clone(),
                    id,
                    slot,
                    seats,
                    dispatched,
                    done: false,
                    shown: self.waiting.clone(),
                    counts: counts.clone(),
                    arrived: now,
                };
                let dispatched = tokio::select! {
                    dispatched = &mut waiting.dispatched => dispatched.ok(),
                    () = tokio::time::sleep(self.wait_limit) => None,
                };
                waiting.done = true;
                if let Some(slot) = dispatched {
                    counts.waited(now.elapsed(), true);
                    return Ok(admitted(level, slot, classified));
                }
                let mut state = level.lock();
                if state.set.cancel(Instant::now(), id, slot) {
                    state.set.count_rejection(RejectReason::TimeOut);
                    counts.reject(RejectReason::TimeOut);
                    counts.waited(now.elapsed(), false);
                    let retry_after = state.retry.dropped(Instant::now());
                    return Err(Rejected {
                        classified,
                        reason: RejectReason::TimeOut,
                        retry_after,
                    });
                }
                // Dispatched as the wait ended (under the lock, to a receiver still open).
                drop(state);
                let slot = waiting.dispatched.try_recv().unwrap_or(slot);
                counts.waited(now.elapsed(), true);
                Ok(admitted(level, slot, classified))
            }
        }
    }

    /// The wait limit of queued requests.
    pub fn wait_limit(&self) -> Duration {
        self.wait_limit
    }
}

/// A request waiting in a queue; if its future is dropped (the client went away), it leaves
/// its queue, or gives back the seats it was dispatched with meanwhile.
struct Waiting {
    level: Arc<Level>,
    id: u64,
    slot: Slot,
    seats: u32,
    dispatched: tokio::sync::oneshot::Receiver<Slot>,
    done: bool,
    shown: Arc<Mutex<HashMap<u64, WaitingRequest>>>,
    counts: Arc<FlowCounts>,
    arrived: Instant,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.shown
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.id);
        self.counts.waiting.fetch_sub(1, Ordering::Relaxed);
        if self.done {
            return;
        }
        let now = Instant::now();
        let mut state = self.level.lock();
        if state.set.cancel(now, self.id, self.slot) {
            state.set.count_rejection(RejectReason::Cancelled);
            self.counts.reject(RejectReason::Cancelled);
            self.counts.waited(now - self.arrived, false);
        } else {
            // Dispatched meanwhile: the slot it was given is in the channel.
            let slot = self.dispatched.try_recv().unwrap_or(self.slot);
            state.set.complete(now, slot, self.seats, now);
        }
    }
}

#[cfg(test)]
mod tests;
