//! Request metrics (`apiserver_request_total`, `apiserver_request_duration_seconds`,
//! `apiserver_request_terminations_total`, `apiserver_current_inflight_requests`,
//! `apiserver_registered_watchers`) of resource requests: begun once the request is known,
//! observed when its answer is (a watch when its stream ends). Requests refused by
//! authentication or authorization are not counted here, as upstream counts them at the route.

use std::time::Instant;

use hyper::header::CONTENT_TYPE;
use hyper::{Response, StatusCode};

use crate::body::ResponseBody;
use crate::metrics::{ApiMetrics, GaugeGuard, RequestKind};
use crate::request_info::RequestInfo;

/// One request being measured.
pub(crate) struct Observation {
    metrics: ApiMetrics,
    kind: RequestKind,
    started: Instant,
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
        _in_flight: None,
    })
}

impl Observation {
    /// Counts the request in `apiserver_current_inflight_requests` until it is answered.
    pub(crate) fn in_flight(&mut self, mutating: bool) {
        self._in_flight = Some(self.metrics.in_flight(mutating));
    }

    /// Observes the answer; `terminated` for one the server cut short (429, 504). A watch
    /// (`watcher`: the served kind's group, version and kind) is observed and counted as
    /// registered until its stream ends.
    pub(crate) fn finish(
        self,
        response: Response<ResponseBody>,
        terminated: bool,
        watcher: Option<(&str, &str, &str)>,
    ) -> Response<ResponseBody> {
        let code = response.status().as_u16();
        if terminated {
            self.metrics.terminated(&self.kind, code);
        }
        if let Some((group, version, kind)) = watcher
            && response.status() == StatusCode::OK
        {
            let guard = WatchGuard {
                _watcher: self.metrics.watcher(group, version, kind),
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
