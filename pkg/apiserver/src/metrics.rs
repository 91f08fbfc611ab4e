//! The API server's metrics, with upstream's names, label names and buckets:
//! `apiserver_request_total`, `apiserver_request_duration_seconds`,
//! `apiserver_request_terminations_total`, `apiserver_current_inflight_requests`,
//! `apiserver_registered_watchers`, `apiserver_storage_objects` and
//! `apiserver_terminated_watchers_total`; and genplane's `apiserver_watch_buffered_bytes`.
//! With API Priority and Fairness, read from its dispatching at scrape time:
//! `apiserver_flowcontrol_dispatched_requests_total`,
//! `apiserver_flowcontrol_rejected_requests_total` (by reason),
//! `apiserver_flowcontrol_current_inqueue_requests`,
//! `apiserver_flowcontrol_current_executing_requests` and
//! `apiserver_flowcontrol_current_executing_seats`, the histograms
//! `apiserver_flowcontrol_request_wait_duration_seconds` (also by whether the request then
//! ran), `apiserver_flowcontrol_request_execution_seconds` (also by type, `regular` or
//! `watch`) and `apiserver_flowcontrol_work_estimated_seats` (by FlowSchema and priority
//! level), and
//! `apiserver_flowcontrol_nominal_limit_seats`, `apiserver_flowcontrol_current_limit_seats`,
//! `apiserver_flowcontrol_lower_limit_seats` and `apiserver_flowcontrol_upper_limit_seats`
//! (by priority level).
//!
//! Verbs are reported as upstream reports them: the HTTP method for single-object requests
//! (`GET`, `POST`, `PUT`, `PATCH`, `DELETE`), `LIST` and `WATCH` for collections, `APPLY` for
//! server-side apply. The scope is `resource` (one named object), `namespace` or `cluster`.
//! A watch's duration is observed when its stream ends.
//!
//! The filter chain measures each resource request with an `Observation` (`begin` once the
//! request is known, `Observation::finish` with its answer). Requests refused by
//! authentication or authorization are not counted, as upstream counts them at the route.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Instant;

use genplane_component_base::metrics::Registry;
use hyper::header::CONTENT_TYPE;
use hyper::{Response, StatusCode};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;

use crate::body::ResponseBody;
use crate::flowcontrol::FlowControl;
use crate::flowcontrol::dispatch::FlowCounts;
use crate::kind::ServedKind;
use crate::request_info::RequestInfo;

/// The component label of every request metric.
const COMPONENT: &str = "apiserver";

/// Upstream's buckets of `apiserver_request_duration_seconds`.
const DURATION_BUCKETS: [f64; 23] = [
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];

/// What a request was, as its metrics label it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct RequestKind {
    /// The reported verb (`GET`, `LIST`, `WATCH`, `POST`, `PUT`, `PATCH`, `APPLY`, `DELETE`).
    pub verb: String,
    /// `All` for `dryRun=All`, empty otherwise.
    pub dry_run: String,
    /// The API group (empty for the core group).
    pub group: String,
    /// The API version.
    pub version: String,
    /// The resource.
    pub resource: String,
    /// The subresource, if any.
    pub subresource: String,
    /// `resource`, `namespace` or `cluster`.
    pub scope: String,
}

impl RequestKind {
    /// The labels of a request: `verb` is the request-info verb (`get`, `list`, `watch`,
    /// `create`, `update`, `patch`, `delete`, `deletecollection`), `method` the HTTP method.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        verb: &str,
        method: &str,
        apply: bool,
        dry_run: bool,
        group: &str,
        version: &str,
        resource: &str,
        subresource: &str,
        namespace: &str,
        name: &str,
    ) -> Self {
        let verb = match verb {
            "list" => "LIST".to_owned(),
            "watch" => "WATCH".to_owned(),
            "patch" if apply => "APPLY".to_owned(),
            _ => method.to_ascii_uppercase(),
        };
        let scope = if !name.is_empty() {
            "resource"
        } else if !namespace.is_empty() {
            "namespace"
        } else {
            "cluster"
        };
        Self {
            verb,
            dry_run: if dry_run { "All".into() } else { String::new() },
            group: group.to_owned(),
            version: version.to_owned(),
            resource: resource.to_owned(),
            subresource: subresource.to_owned(),
            scope: scope.to_owned(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct CountLabels {
    code: String,
    component: &'static str,
    dry_run: String,
    group: String,
    resource: String,
    scope: String,
    subresource: String,
    verb: String,
    version: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct DurationLabels {
    component: &'static str,
    dry_run: String,
    group: String,
    resource: String,
    scope: String,
    subresource: String,
    verb: String,
    version: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct TerminationLabels {
    code: String,
    component: &'static str,
    group: String,
    resource: String,
    scope: String,
    subresource: String,
    verb: String,
    version: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct WatcherLabels {
    group: String,
    kind: String,
    version: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ResourceLabels {
    group: String,
    resource: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct InflightLabels {
    request_kind: &'static str,
}

type ObjectCount = Box<dyn Fn() -> Option<usize> + Send + Sync>;

/// The `apiserver_storage_objects` gauge, read from the watch caches on every scrape.
#[derive(Default)]
struct StorageObjects {
    counts: Mutex<Vec<(String, ObjectCount)>>,
}

impl fmt::Debug for StorageObjects {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StorageObjects").finish_non_exhaustive()
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ObjectLabels {
    resource: String,
}

impl Collector for StorageObjects {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), fmt::Error> {
        let counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let mut family = encoder.encode_descriptor(
            "apiserver_storage_objects",
            "Objects stored per resource, read from the watch cache at scrape time; -1 when unknown",
            None,
            prometheus_client::metrics::MetricType::Gauge,
        )?;
        for (resource, count) in counts.iter() {
            let value = count().and_then(|n| i64::try_from(n).ok()).unwrap_or(-1);
            let labels = ObjectLabels {
                resource: resource.clone(),
            };
            ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

/// The priority and fairness metrics, read from the server's dispatching at scrape time.
#[derive(Debug, Default)]
struct FlowControlMetrics {
    source: RwLock<Option<Arc<FlowControl>>>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct FlowLabels {
    flow_schema: String,
    priority_level: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RejectedLabels {
    flow_schema: String,
    priority_level: String,
    reason: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct LevelLabels {
    priority_level: String,
}

impl Collector for FlowControlMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), fmt::Error> {
        use prometheus_client::metrics::MetricType;
        use prometheus_client::metrics::counter::ConstCounter;
        use std::sync::atomic::Ordering::Relaxed;
        let source = self
            .source
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let Some(flow_control) = source else {
            return Ok(());
        };
        let flows = flow_control.flow_counts();
        let labels = |(schema, level): &(Arc<str>, Arc<str>)| FlowLabels {
            flow_schema: schema.to_string(),
            priority_level: level.to_string(),
        };
        let mut family = encoder.encode_descriptor(
            "apiserver_flowcontrol_dispatched_requests",
            "Requests priority and fairness let run, by FlowSchema and priority level",
            None,
            MetricType::Counter,
        )?;
        for (key, counts) in &flows {
            ConstCounter::new(counts.dispatched.load(Relaxed))
                .encode(family.encode_family(&labels(key))?)?;
        }
        let mut family = encoder.encode_descriptor(
            "apiserver_flowcontrol_rejected_requests",
            "Requests priority and fairness refused, by FlowSchema, priority level and reason",
            None,
            MetricType::Counter,
        )?;
        for (key, counts) in &flows {
            for reason in crate::flowcontrol::queueset::RejectReason::ALL {
                let count = counts.rejected[reason.index()].load(Relaxed);
                if count == 0 {
                    continue;
                }
                let labels = RejectedLabels {
                    flow_schema: key.0.to_string(),
                    priority_level: key.1.to_string(),
                    reason: reason.as_str().to_owned(),
                };
                ConstCounter::new(count).encode(family.encode_family(&labels)?)?;
            }
        }
        type Pair = [std::sync::OnceLock<Histogram>; 2];
        for (name, help, label, values, pair) in [
            (
                "apiserver_flowcontrol_request_wait_duration_seconds",
                "How long requests waited in their queue, by FlowSchema, priority level and \
                 whether they then ran",
                "execute",
                FlowCounts::WAIT_EXECUTE,
                (|c: &FlowCounts| &c.wait) as fn(&FlowCounts) -> &Pair,
            ),
            (
                "apiserver_flowcontrol_request_execution_seconds",
                "How long requests ran (a watch until its stream started), by FlowSchema, \
                 priority level and type",
                "type",
                FlowCounts::EXECUTION_TYPE,
                |c| &c.execution,
            ),
        ] {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
            for ((schema, level), counts) in &flows {
                for (histogram, value) in pair(counts).iter().zip(values) {
                    if let Some(histogram) = histogram.get() {
                        let labels = [
                            ("flow_schema", &**schema),
                            ("priority_level", &**level),
                            (label, value),
                        ];
                        histogram.encode(family.encode_family(&labels)?)?;
                    }
                }
            }
        }
        let mut family = encoder.encode_descriptor(
            "apiserver_flowcontrol_work_estimated_seats",
            "The seats requests were estimated to take, by FlowSchema and priority level",
            None,
            MetricType::Histogram,
        )?;
        for ((schema, level), counts) in &flows {
            if let Some(histogram) = counts.estimated_seats.get() {
                let labels = [("flow_schema", &**schema), ("priority_level", &**level)];
                histogram.encode(family.encode_family(&labels)?)?;
            }
        }
        for (name, help, read) in [
            (
                "apiserver_flowcontrol_current_inqueue_requests",
                "Requests waiting in queues now, by FlowSchema and priority level",
                (|c: &FlowCounts| c.waiting.load(Relaxed)) as fn(&FlowCounts) -> i64,
            ),
            (
                "apiserver_flowcontrol_current_executing_requests",
                "Requests executing now, by FlowSchema and priority level",
                |c| c.executing.load(Relaxed),
            ),
            (
                "apiserver_flowcontrol_current_executing_seats",
                "Seats held by executing requests now, by FlowSchema and priority level",
                |c| c.executing_seats.load(Relaxed),
            ),
        ] {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for (key, counts) in &flows {
                ConstGauge::new(read(counts)).encode(family.encode_family(&labels(key))?)?;
            }
        }
        let levels = flow_control.level_limits();
        for (name, help, read) in [
            (
                "apiserver_flowcontrol_nominal_limit_seats",
                "Each priority level's nominal share of the server's concurrency limit, in seats",
                (|l: &crate::flowcontrol::dispatch::LevelLimits| l.nominal)
                    as fn(&crate::flowcontrol::dispatch::LevelLimits) -> u32,
            ),
            (
                "apiserver_flowcontrol_current_limit_seats",
                "Each priority level's current concurrency limit, after lending and borrowing",
                |l| l.current,
            ),
            (
                "apiserver_flowcontrol_lower_limit_seats",
                "The least concurrency limit each priority level may be given",
                |l| l.lower,
            ),
            (
                "apiserver_flowcontrol_upper_limit_seats",
                "The most concurrency limit each priority level may be given",
                |l| l.upper,
            ),
        ] {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for level in &levels {
                let labels = LevelLabels {
                    priority_level: level.name.to_string(),
                };
                ConstGauge::new(i64::from(read(level))).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

/// The API server's metrics. Cheap to clone; clones share the metrics.
#[derive(Clone, Debug)]
pub struct ApiMetrics {
    requests: Family<CountLabels, Counter>,
    durations: Family<DurationLabels, Histogram, fn() -> Histogram>,
    terminations: Family<TerminationLabels, Counter>,
    inflight: Family<InflightLabels, Gauge>,
    watchers: Family<WatcherLabels, Gauge>,
    terminated_watchers: Family<ResourceLabels, Counter>,
    watch_buffered: Family<ResourceLabels, Gauge>,
    objects: Arc<StorageObjects>,
    flow_control: Arc<FlowControlMetrics>,
    /// The request counter and duration histogram of each request kind and code met so far,
    /// found in the families once: building and hashing their two label sets (sixteen strings
    /// copied) cost about a tenth of a cached GET's own work.
    observed: Arc<RwLock<ObservedKinds>>,
}

/// The metrics of each request kind met, by code.
type ObservedKinds = HashMap<RequestKind, Vec<(u16, Observed)>>;

/// One request kind's and code's metrics ([`ApiMetrics::observe`]).
#[derive(Clone, Debug)]
struct Observed {
    count: Counter,
    duration: Histogram,
}

fn duration_histogram() -> Histogram {
    Histogram::new(DURATION_BUCKETS)
}

impl ApiMetrics {
    /// The metrics, registered in `registry`.
    pub fn new(registry: &Registry) -> Self {
        let metrics = Self {
            requests: Family::default(),
            durations: Family::new_with_constructor(duration_histogram),
            terminations: Family::default(),
            inflight: Family::default(),
            watchers: Family::default(),
            terminated_watchers: Family::default(),
            watch_buffered: Family::default(),
            objects: Arc::default(),
            flow_control: Arc::default(),
            observed: Arc::default(),
        };
        registry.register(
            "apiserver_request",
            "API requests answered, by verb, dry run, group, version, resource, subresource, scope, component and HTTP status code",
            metrics.requests.clone(),
        );
        registry.register(
            "apiserver_request_duration_seconds",
            "Time to answer API requests in seconds (for watches, how long the stream lasted), by verb, dry run, group, version, resource, subresource, scope and component",
            metrics.durations.clone(),
        );
        registry.register(
            "apiserver_request_terminations",
            "API requests refused (429, over the in-flight limit) or cut short (504, over the request timeout)",
            metrics.terminations.clone(),
        );
        registry.register(
            "apiserver_current_inflight_requests",
            "API requests being answered now, read-only or mutating (watches excluded)",
            metrics.inflight.clone(),
        );
        registry.register(
            "apiserver_registered_watchers",
            "Open watches, by group, version and kind",
            metrics.watchers.clone(),
        );
        registry.register(
            "apiserver_terminated_watchers",
            "Watches ended because their client fell too far behind, by group and resource",
            metrics.terminated_watchers.clone(),
        );
        registry.register(
            "apiserver_watch_buffered_bytes",
            "Bytes of watch events waiting for their clients to take them, by group and resource",
            metrics.watch_buffered.clone(),
        );
        registry.register_collector(Box::new(metrics.objects.clone()));
        registry.register_collector(Box::new(metrics.flow_control.clone()));
        metrics
    }

    /// Reports the priority and fairness metrics of `flow_control` (`None`: none).
    pub fn report_flow_control(&self, flow_control: Option<Arc<FlowControl>>) {
        *self
            .flow_control
            .source
            .write()
            .unwrap_or_else(PoisonError::into_inner) = flow_control;
    }

    /// Counts a watch of `group` `resource` ended because its client fell behind.
    pub fn terminated_watcher(&self, group: &str, resource: &str) {
        self.terminated_watchers
            .get_or_create(&ResourceLabels {
                group: group.to_owned(),
                resource: resource.to_owned(),
            })
            .inc();
    }

    /// The gauge of bytes waiting for watch clients of `group` `resource`.
    pub fn watch_buffered_bytes(&self, group: &str, resource: &str) -> Gauge {
        self.watch_buffered
            .get_or_create(&ResourceLabels {
                group: group.to_owned(),
                resource: resource.to_owned(),
            })
            .clone()
    }

    /// Reports `count()` as the number of stored `resource` objects (`configmaps`,
    /// `leases.coordination.k8s.io`); `None` is reported as -1.
    pub fn count_objects(
        &self,
        resource: impl Into<String>,
        count: impl Fn() -> Option<usize> + Send + Sync + 'static,
    ) {
        self.objects
            .counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((resource.into(), Box::new(count)));
    }

    /// Counts a finished request and observes how long it took.
    pub fn observe(&self, kind: &RequestKind, code: u16, started: Instant) {
        let seconds = started.elapsed().as_secs_f64();
        let observe = |observed: &Observed| {
            observed.count.inc();
            observed.duration.observe(seconds);
        };
        if let Some((_, observed)) = self
            .observed
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(kind)
            .and_then(|codes| codes.iter().find(|(c, _)| *c == code))
        {
            observe(observed);
            return;
        }
        let observed = self.observed_in_families(kind, code);
        observe(&observed);
        let mut known = self
            .observed
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let codes = known.entry(kind.clone()).or_default();
        if !codes.iter().any(|(c, _)| *c == code) {
            codes.push((code, observed));
        }
    }

    /// The counter and histogram of `kind` and `code` in their families.
    fn observed_in_families(&self, kind: &RequestKind, code: u16) -> Observed {
        let count = self
            .requests
            .get_or_create(&CountLabels {
                code: code.to_string(),
                component: COMPONENT,
                dry_run: kind.dry_run.clone(),
                group: kind.group.clone(),
                resource: kind.resource.clone(),
                scope: kind.scope.clone(),
                subresource: kind.subresource.clone(),
                verb: kind.verb.clone(),
                version: kind.version.clone(),
            })
            .clone();
        let duration = self
            .durations
            .get_or_create(&DurationLabels {
                component: COMPONENT,
                dry_run: kind.dry_run.clone(),
                group: kind.group.clone(),
                resource: kind.resource.clone(),
                scope: kind.scope.clone(),
                subresource: kind.subresource.clone(),
                verb: kind.verb.clone(),
                version: kind.version.clone(),
            })
            .clone();
        Observed { count, duration }
    }

    /// Counts a request the server refused or cut short to protect itself (429, 504).
    pub fn terminated(&self, kind: &RequestKind, code: u16) {
        self.terminations
            .get_or_create(&TerminationLabels {
                code: code.to_string(),
                component: COMPONENT,
                group: kind.group.clone(),
                resource: kind.resource.clone(),
                scope: kind.scope.clone(),
                subresource: kind.subresource.clone(),
                verb: kind.verb.clone(),
                version: kind.version.clone(),
            })
            .inc();
    }

    /// Marks a request in flight until the returned guard is dropped.
    pub fn in_flight(&self, mutating: bool) -> GaugeGuard {
        let gauge = self
            .inflight
            .get_or_create(&InflightLabels {
                request_kind: if mutating { "mutating" } else { "readOnly" },
            })
            .clone();
        GaugeGuard::new(gauge)
    }

    /// Registers a watcher of `group/version` `kind` until the returned guard is dropped.
    pub fn watcher(&self, group: &str, version: &str, kind: &str) -> GaugeGuard {
        let gauge = self
            .watchers
            .get_or_create(&WatcherLabels {
                group: group.to_owned(),
                kind: kind.to_owned(),
                version: version.to_owned(),
            })
            .clone();
        GaugeGuard::new(gauge)
    }
}

/// Holds a gauge one higher while it lives.
#[derive(Debug)]
pub struct GaugeGuard(Gauge);

impl GaugeGuard {
    fn new(gauge: Gauge) -> Self {
        gauge.inc();
        Self(gauge)
    }
}

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// One request being measured.
pub(crate) struct Observation {
    metrics: ApiMetrics,
    kind: RequestKind,
    started: Instant,
    watch: bool,
    _in_flight: Option<GaugeGuard>,
}

/// Starts measuring a resource request (`None` for others, or without metrics).
pub(crate) fn begin<B>(
    metrics: Option<&ApiMetrics>,
    info: &RequestInfo,
    request: &hyper::Request<B>,
) -> Option<Observation> {
    let metrics = metrics?;
    if !info.is_resource_request {
        return None;
    }
    Some(Observation {
        metrics: metrics.clone(),
        kind: request_kind(info, request),
        started: Instant::now(),
        watch: info.verb == "watch",
        _in_flight: None,
    })
}

/// Observes the answer of a request measured since [`begin`] (see [`Observation::finish`]).
pub(crate) fn finish(
    observation: Option<Observation>,
    response: Response<ResponseBody>,
    terminated: bool,
    watched: impl FnOnce() -> Option<Arc<ServedKind>>,
) -> Response<ResponseBody> {
    match observation {
        Some(observation) => observation.finish(response, terminated, watched),
        None => response,
    }
}

impl Observation {
    /// Counts the request in `apiserver_current_inflight_requests` until it is answered.
    pub(crate) fn in_flight(&mut self, mutating: bool) {
        self._in_flight = Some(self.metrics.in_flight(mutating));
    }

    /// Observes the answer; `terminated` for one the server cut short (429, 504). A watch
    /// answered 200 (of the kind `watched` finds) is observed and counted as registered until
    /// its stream ends.
    pub(crate) fn finish(
        self,
        response: Response<ResponseBody>,
        terminated: bool,
        watched: impl FnOnce() -> Option<Arc<ServedKind>>,
    ) -> Response<ResponseBody> {
        let code = response.status().as_u16();
        if terminated {
            self.metrics.terminated(&self.kind, code);
        }
        if self.watch
            && response.status() == StatusCode::OK
            && let Some(kind) = watched()
        {
            let guard = WatchGuard {
                _watcher: self.metrics.watcher(&kind.group, &kind.version, &kind.kind),
                metrics: self.metrics,
                kind: self.kind,
                started: self.started,
            };
            let (parts, body) = response.into_parts();
            return Response::from_parts(parts, body.guarded(guard));
        }
        self.metrics.observe(&self.kind, code, self.started);
        response
    }
}

/// Observes a watch's duration when its stream ends and holds its watcher registration.
struct WatchGuard {
    metrics: ApiMetrics,
    kind: RequestKind,
    started: Instant,
    _watcher: GaugeGuard,
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        self.metrics.observe(&self.kind, 200, self.started);
    }
}

/// The metric labels of a resource request.
fn request_kind<B>(info: &RequestInfo, request: &hyper::Request<B>) -> RequestKind {
    let apply = request
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("application/apply-patch"));
    let dry_run = request.uri().query().is_some_and(|q| {
        form_urlencoded::parse(q.as_bytes()).any(|(k, v)| k == "dryRun" && v == "All")
    });
    RequestKind::new(
        &info.verb,
        request.method().as_str(),
        apply,
        dry_run,
        &info.api_group,
        &info.api_version,
        &info.resource,
        &info.subresource,
        &info.namespace,
        &info.name,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scrape(registry: &Registry) -> String {
        registry.encode().body
    }

    #[test]
    fn requests_are_counted_and_timed_with_upstream_labels() {
        let registry = Registry::new();
        let metrics = ApiMetrics::new(&registry);
        let kind = RequestKind::new(
            "list",
            "GET",
            false,
            false,
            "",
            "v1",
            "configmaps",
            "",
            "default",
            "",
        );
        metrics.observe(&kind, 200, Instant::now());
        metrics.observe(&kind, 200, Instant::now());
        let text = scrape(&registry);
        assert!(
            text.contains(
                "apiserver_request_total{code=\"200\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"configmaps\",scope=\"namespace\",subresource=\"\",verb=\"LIST\",version=\"v1\"} 2"
            ),
            "{text}"
        );
        assert!(
            text.contains("apiserver_request_duration_seconds_bucket{le=\"0.005\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"configmaps\",scope=\"namespace\",subresource=\"\",verb=\"LIST\",version=\"v1\"} 2"),
            "{text}"
        );
        assert!(text.contains("le=\"60.0\""), "{text}");
    }

    #[test]
    fn verbs_and_scopes_are_reported_as_upstream() {
        let kind = |verb, method, apply, ns, name| {
            let k = RequestKind::new(verb, method, apply, false, "", "v1", "r", "", ns, name);
            (k.verb, k.scope)
        };
        assert_eq!(
            kind("get", "GET", false, "a", "b"),
            ("GET".into(), "resource".into())
        );
        assert_eq!(
            kind("create", "POST", false, "a", ""),
            ("POST".into(), "namespace".into())
        );
        assert_eq!(
            kind("patch", "PATCH", true, "a", "b"),
            ("APPLY".into(), "resource".into())
        );
        assert_eq!(
            kind("watch", "GET", false, "", ""),
            ("WATCH".into(), "cluster".into())
        );
        assert_eq!(
            kind("deletecollection", "DELETE", false, "a", ""),
            ("DELETE".into(), "namespace".into())
        );
    }

    #[test]
    fn guards_and_object_counts_show_in_a_scrape() {
        let registry = Registry::new();
        let metrics = ApiMetrics::new(&registry);
        let watcher = metrics.watcher("coordination.k8s.io", "v1", "Lease");
        metrics.count_objects("configmaps", || Some(7));
        metrics.count_objects("secrets", || None);
        let text = scrape(&registry);
        assert!(
            text.contains("apiserver_registered_watchers{group=\"coordination.k8s.io\",kind=\"Lease\",version=\"v1\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("apiserver_storage_objects{resource=\"configmaps\"} 7"),
            "{text}"
        );
        assert!(
            text.contains("apiserver_storage_objects{resource=\"secrets\"} -1"),
            "{text}"
        );
        drop(watcher);
        let text = scrape(&registry);
        assert!(
            text.contains("apiserver_registered_watchers{group=\"coordination.k8s.io\",kind=\"Lease\",version=\"v1\"} 0"),
            "{text}"
        );
    }
}
