//! The filter chain every request goes through, in one function: `chain`.
//!
//! The order is upstream's (`DefaultBuildHandlerChain` in k8s.io/apiserver), outermost first,
//! except that the in-flight limits come before authentication (they only count requests, so a
//! flood is turned away before it costs a signature check):
//!
//! 1. `audit_id`: the request's audit ID, on every answer.
//! 2. [`unread_body`]: every client reads the answer, even one given before its body was read.
//! 3. `panic_recovery`: a panic below is a 500 `Status`, logged and audited.
//! 4. request info ([`crate::request_info`]): what the request asks for; `metrics` begin.
//! 5. [`max_in_flight`]: 429 over the limits (long-running requests exempt).
//! 6. `authentication`: who asks (401 for credentials nobody recognizes).
//! 7. `audit`: the record, at the level the policy gives the user and request.
//! 8. `impersonation`: acting as another user, if allowed.
//! 9. `authorization`: may they (403).
//! 10. `timeout`: 504 past the request timeout (long-running requests exempt).
//! 11. the router (`crate::router`): ops endpoints, discovery, OpenAPI, resources.
//! 12. [`compression`], on the way out: a large answer gzip-compressed for clients that accept
//!     it.
//!
//! The request timeout (10) also sits elsewhere than upstream's: kube-apiserver's
//! `WithRequestDeadline` and `WithTimeoutForNonLongRunningRequests` wrap authentication, audit,
//! impersonation, the in-flight limits and authorization, so their deadline counts the time
//! those take; here it wraps the router alone. Every step before it answers from memory (the
//! certificate and token authenticators, RBAC, the audit policy), so what the deadline cuts
//! short is the same: storage reads and writes, admission webhooks, conversion.
//!
//! The chain is a plain async function rather than a stack of tower layers: each filter is a
//! call in order, so reading `chain` top to bottom is reading the order, a refusal is an early
//! return, and the hot path has no boxing or cloning of services. What a filter does after the
//! answer (audit completion, metrics, the unread body) is the matching call on the way out.

pub(crate) mod audit;
pub(crate) mod audit_id;
pub(crate) mod authentication;
pub(crate) mod authorization;
pub mod compression;
pub(crate) mod impersonation;
pub mod max_in_flight;
pub(crate) mod metrics;
pub(crate) mod panic_recovery;
pub(crate) mod timeout;
pub mod unread_body;

use std::time::SystemTime;

use genplane_authentication::UserInfo;
use genplane_storage::Storage;
use hyper::body::Incoming;
use hyper::header::ACCEPT;
use hyper::{Request, Response};

use crate::body::{ResponseBody, Unread};
use crate::handlers::error_response_for;
use crate::request_info;
use crate::server::ApiServer;

impl<S: Storage> ApiServer<S> {
    /// Answers one request, through the filter chain (see [`crate::filters`]).
    pub async fn handle(&self, request: Request<Incoming>) -> Response<ResponseBody> {
        chain(self, request).await
    }
}

/// Answers one request through every filter, in order.
pub(crate) async fn chain<S: Storage>(
    server: &ApiServer<S>,
    request: Request<Incoming>,
) -> Response<ResponseBody> {
    // 1. The audit ID, outermost, so that every answer carries it.
    let audit_id = audit_id::assign(request.headers());
    let accepts_gzip = compression::accepts_gzip(request.headers());
    // 2. The body as `Unread`: what handlers leave of it comes back to `transport`.
    let (request, transport) = unread_body::wrap(request);
    // 3. Panic recovery, around everything that looks at the request.
    let slot = panic_recovery::Slot::default();
    let (method, uri) = (request.method().clone(), request.uri().clone());
    let filtered = filtered(server, request, &audit_id, &slot);
    let response = panic_recovery::recover(&slot, &method, &uri, filtered).await;
    // 12. Compression of a large answer, on the way out (audit and metrics saw it plain).
    let response = compression::compress(response, accepts_gzip, server.feature_gate.as_ref());
    transport.finish(audit_id::stamp(response, &audit_id)).await
}

/// Filters 4 to 11, inside panic recovery.
async fn filtered<S: Storage>(
    server: &ApiServer<S>,
    request: Request<Unread>,
    audit_id: &str,
    slot: &panic_recovery::Slot,
) -> Response<ResponseBody> {
    let arrival = audit::Arrival {
        audit_id,
        received_at: SystemTime::now(),
    };
    let accept = |request: &Request<Unread>| {
        request
            .headers()
            .get(ACCEPT)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    // 4. Request info: what is asked (verb, group, version, namespace, resource, name), which
    // every filter below uses; resource requests are measured from here.
    let info = request_info::parse(
        request.method().as_str(),
        request.uri().path(),
        request.uri().query(),
    );
    let mut observation = metrics::begin(server.metrics.as_ref(), &info, &request);
    // 5. In-flight limits.
    let long_running = max_in_flight::is_long_running(&info);
    let _permit = match server.in_flight.admit(&info) {
        Ok(permit) => permit,
        Err(max_in_flight::OverLimit) => {
            let too_many = max_in_flight::too_many_requests();
            return match observation {
                Some(observation) => observation.finish(too_many, true, None),
                None => too_many,
            };
        }
    };
    if !long_running && let Some(observation) = &mut observation {
        observation.in_flight(max_in_flight::is_mutating(&info.verb));
    }
    // 6. Authentication (a server built without security lets everyone in as nobody).
    let user = match &server.security {
        Some(security) => {
            match authentication::authenticate(
                security,
                server.audit.as_ref(),
                &info,
                &request,
                arrival,
            ) {
                Ok(user) => user,
                Err(error) => return error_response_for(&error, accept(&request).as_deref()),
            }
        }
        None => UserInfo::default(),
    };
    // 7. Audit: the record of this request, kept for a panic to complete.
    let record = audit::begin(server.audit.as_ref(), &info, &request, &user, arrival);
    if let Some(record) = &record {
        slot.keep(record);
    }
    // 8. Impersonation and 9. authorization.
    let user = match &server.security {
        Some(security) => {
            let allowed = impersonation::act_as(security, request.headers(), user, record.as_ref())
                .and_then(|user| {
                    authorization::authorize(security, &info, &user, record.as_ref()).map(|()| user)
                });
            match allowed {
                Ok(user) => user,
                Err(error) => {
                    let refused = error_response_for(&error, accept(&request).as_deref());
                    return audit::finish(record, &info, refused);
                }
            }
        }
        None => user,
    };
    // 10. The request timeout, around 11. the router.
    let (mut parts, body) = request.into_parts();
    // the router hands the admission plugins' audit annotations to the record
    if let Some(record) = &record {
        parts.extensions.insert(record.clone());
    }
    let deadline = timeout::deadline(server.in_flight.limits.request_timeout, parts.uri.query());
    let body = audit::body(record.as_ref(), &info, &parts, body);
    // The router's future holds every handler's state (tens of KiB): it is boxed, so that the
    // timeout, panic recovery and the connection's task spawn move a pointer, not a copy of it
    // (those copies were a third of a cached GET's instructions).
    let (response, terminated) = match (long_running, deadline) {
        (true, _) => (
            Box::pin(server.route(&info, parts, body, &user)).await,
            false,
        ),
        (false, Err(bad)) => (
            error_response_for(&bad, accept_of(&parts).as_deref()),
            false,
        ),
        (false, Ok(deadline)) => {
            let routed = Box::pin(server.route(&info, parts, body, &user));
            match timeout::within(deadline, routed).await {
                Ok(response) => (response, false),
                Err(timed_out) => (timed_out, true),
            }
        }
    };
    let response = match observation {
        Some(observation) => {
            let watched = long_running
                .then(|| server.served_resource(&info))
                .flatten();
            let watcher = watched.as_ref().map(|r| {
                (
                    r.info.group.as_str(),
                    r.info.version.as_str(),
                    r.info.kind.as_str(),
                )
            });
            observation.finish(response, terminated, watcher)
        }
        None => response,
    };
    audit::finish(record, &info, response)
}

/// The `Accept` header of a request's parts.
fn accept_of(parts: &hyper::http::request::Parts) -> Option<String> {
    parts
        .headers
        .get(ACCEPT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}
