//! In-flight limits: `--max-requests-inflight` and `--max-mutating-requests-inflight`, when API
//! Priority and Fairness is off (when it is on, [`super::priority_and_fairness`] shares their
//! sum among priority levels instead). A request over the limit of its kind is answered 429 with `Retry-After: 1`, as upstream's
//! `WithMaxInFlightLimit`; long-running requests (watches) are not counted, since what each
//! costs is bounded instead. Every other request is: resource requests, discovery, OpenAPI,
//! health and metrics alike.

use std::sync::Arc;
use std::time::Duration;

use genplane_apimachinery::errors::Status;
use hyper::Response;
use hyper::header::RETRY_AFTER;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::body::ResponseBody;
use crate::handlers::error_response;
use crate::metrics::Observation;
use crate::request_info::RequestInfo;

/// Self-protection limits: `--max-requests-inflight`, `--max-mutating-requests-inflight` and
/// `--request-timeout`. Watches count against neither the in-flight limits nor the timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Read-only requests answered at once; more get 429. 0: no limit.
    pub max_read_only: usize,
    /// Mutating requests answered at once; more get 429. 0: no limit.
    pub max_mutating: usize,
    /// How long a request may take before it is answered 504 (a client's shorter `timeout`
    /// query parameter wins).
    pub request_timeout: Duration,
    /// Whether API Priority and Fairness shares the sum of the two limits among priority
    /// levels (`--enable-priority-and-fairness`), instead of the two limits applying as they
    /// are. Queued requests wait at most a quarter of the request timeout.
    pub priority_and_fairness: bool,
}

impl Default for Limits {
    /// Upstream's defaults: 400 read-only, 200 mutating, one minute, priority and fairness.
    fn default() -> Self {
        Self {
            max_read_only: 400,
            max_mutating: 200,
            request_timeout: Duration::from_secs(60),
            priority_and_fairness: true,
        }
    }
}

/// The semaphores enforcing [`Limits`].
#[derive(Debug)]
pub(crate) struct InFlight {
    pub(crate) limits: Limits,
    read_only: Option<Arc<Semaphore>>,
    mutating: Option<Arc<Semaphore>>,
}

impl InFlight {
    pub(crate) fn new(limits: Limits) -> Self {
        let semaphore = |n: usize| (n > 0).then(|| Arc::new(Semaphore::new(n)));
        Self {
            read_only: semaphore(limits.max_read_only),
            mutating: semaphore(limits.max_mutating),
            limits,
        }
    }

    /// A permit for `info` (none needed for a long-running request), or `Err` over the limit
    /// (answered with [`too_many_requests`]).
    pub(crate) fn admit(
        &self,
        info: &RequestInfo,
    ) -> Result<Option<OwnedSemaphorePermit>, OverLimit> {
        if is_long_running(info) {
            return Ok(None);
        }
        let semaphore = if is_mutating(&info.verb) {
            &self.mutating
        } else {
            &self.read_only
        };
        match semaphore {
            None => Ok(None),
            Some(s) => s
                .clone()
                .try_acquire_owned()
                .map(Some)
                .map_err(|_| OverLimit),
        }
    }
}

/// Whether a request is long-running: a watch (upstream also counts proxies, exec and the like,
/// which are not served here).
pub(crate) fn is_long_running(info: &RequestInfo) -> bool {
    info.is_resource_request && info.verb == "watch"
}

/// Whether a request counts as mutating: any verb but `get`, `list` and `watch`, as upstream
/// counts them (a POST to a path that is not a resource is mutating).
pub(crate) fn is_mutating(verb: &str) -> bool {
    !matches!(verb, "get" | "list" | "watch")
}

/// A request over its in-flight limit.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OverLimit;

/// The permit `info` needs under `in_flight`'s limits (none for a long-running request, which
/// is also not counted in flight by `observation`), or the 429 answer over them, observed as
/// terminated (a [`Refusal`](super::Refusal)).
pub(crate) fn admit(
    in_flight: &InFlight,
    info: &RequestInfo,
    observation: &mut Option<Observation>,
) -> Result<Option<OwnedSemaphorePermit>, Box<Response<ResponseBody>>> {
    match in_flight.admit(info) {
        Ok(permit) => {
            if !is_long_running(info)
                && let Some(observation) = observation
            {
                observation.in_flight(is_mutating(&info.verb));
            }
            Ok(permit)
        }
        Err(OverLimit) => Err(Box::new(crate::metrics::finish(
            observation.take(),
            too_many_requests(1),
            true,
            || None,
        ))),
    }
}

/// The answer over the limits (in flight, or of a priority level), as upstream gives it:
/// 429 `TooManyRequests`, suggesting a retry after `retry_after` seconds.
pub(crate) fn too_many_requests(retry_after: u32) -> Response<ResponseBody> {
    let mut response = error_response(
        &Status::too_many_requests("Too many requests, please try again later.", retry_after)
            .into(),
    );
    response
        .headers_mut()
        .insert(RETRY_AFTER, hyper::header::HeaderValue::from(retry_after));
    response
}
