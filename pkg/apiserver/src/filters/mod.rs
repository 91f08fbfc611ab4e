//! The filter chain every request goes through, in two functions read top to bottom: `chain`
//! and `checked`, one call per filter.
//!
//! The order is upstream's (`DefaultBuildHandlerChain` in k8s.io/apiserver), outermost first,
//! except that the in-flight limits come before authentication (they only count requests, so a
//! flood is turned away before it costs a signature check):
//!
//! 1. `panic_recovery`: a panic anywhere below is a 500 `Status`, logged and audited.
//! 2. `audit_id`: the request's audit ID, on every answer.
//! 3. [`compression`], on the way out: a large answer gzip-compressed for clients that accept
//!    it (audit and metrics see it plain).
//! 4. request info ([`crate::request_info`]): what the request asks for.
//! 5. metrics ([`crate::metrics`]): resource requests are measured from here.
//! 6. [`max_in_flight`]: 429 over the limits (long-running requests exempt), only when API
//!    Priority and Fairness is off.
//! 7. `authentication`: who asks (401 for credentials nobody recognizes).
//! 8. `audit`: the record, at the level the policy gives the user and request.
//! 9. `impersonation`: acting as another user, if allowed.
//! 10. [`priority_and_fairness`]: the request's priority level lets it run, queues it, or
//!     answers 429; its answer carries the classification's headers.
//! 11. `authorization`: may they (403).
//! 12. `timeout`: 504 past the request timeout (long-running requests exempt), around
//! 13. the router (`crate::router`): ops endpoints, discovery, OpenAPI, resources.
//!
//! Only the transport is outside them all: [`unread_body`] hands the body down as
//! [`Unread`] and, once the answer is known, deals with what the handlers
//! left of it (as upstream's HTTP server does below its handler chain).
//!
//! The request timeout (12) sits elsewhere than upstream's: kube-apiserver's
//! `WithRequestDeadline` and `WithTimeoutForNonLongRunningRequests` wrap authentication, audit,
//! impersonation, the in-flight limits and authorization, so their deadline counts the time
//! those take; here it wraps the router alone. Every step before it answers from memory (the
//! certificate and token authenticators, RBAC, the audit policy), so what the deadline cuts
//! short is the same: storage reads and writes, admission webhooks, conversion.
//!
//! The chain is a plain async function rather than a stack of tower layers: each filter is a
//! call in order, so reading `checked` top to bottom is reading the order, a refusal is an
//! early return (`?`: every filter answers `Err` with its refusal), and the hot path has no
//! boxing or cloning of services. What a filter does after the answer (audit completion,
//! metrics, compression) is the matching call on the way out.

pub(crate) mod audit;
pub(crate) mod audit_id;
pub(crate) mod authentication;
pub(crate) mod authorization;
pub mod compression;
pub(crate) mod impersonation;
pub mod max_in_flight;
pub(crate) mod panic_recovery;
pub mod priority_and_fairness;
pub(crate) mod timeout;
pub mod unread_body;

use genplane_apimachinery::errors::ApiError;
use genplane_storage::Storage;
use hyper::body::Incoming;
use hyper::header::{ACCEPT, HeaderMap};
use hyper::{Request, Response};

use crate::body::{ResponseBody, Unread};
use crate::handlers::error_response_for;
use crate::server::ApiServer;
use crate::{metrics, request_info};

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
    // The transport: the body goes down as `Unread`; what handlers leave of it comes back.
    let (request, transport) = unread_body::wrap(request);
    let (method, uri) = (request.method().clone(), request.uri().clone());
    let slot = panic_recovery::Slot::default();
    // 1. Panic recovery, around every filter.
    let response = panic_recovery::recover(&slot, &method, &uri, async {
        // 2. The audit ID, on every answer (a panic's too).
        let mut audit_id = audit_id::assign(request.headers());
        slot.keep_audit_id(audit_id.header.take());
        let accepts_gzip = compression::accepts_gzip(request.headers());
        let response = match checked(server, request, &audit_id.id, &slot).await {
            Ok(answer) => answer,
            Err(refusal) => *refusal,
        };
        // 3. Compression of a large answer, on the way out.
        let response = compression::compress(response, accepts_gzip, server.feature_gate.as_ref());
        audit_id::stamp(response, slot.take_audit_id())
    });
    transport.finish(response.await).await
}

/// Filters 4 to 13: the answer, or a filter's refusal.
async fn checked<S: Storage>(
    server: &ApiServer<S>,
    request: Request<Unread>,
    audit_id: &str,
    slot: &panic_recovery::Slot,
) -> Result<Response<ResponseBody>, Refusal> {
    let arrival = audit::Arrival::now(audit_id);
    let security = server.security.as_ref();
    // 4. Request info: what is asked (verb, group, version, namespace, resource, name).
    let info = request_info::of(&request);
    // 5. Metrics: a resource request is measured from here to its answer.
    let mut observation = metrics::begin(server.metrics.as_ref(), &info, &request);
    // 6. In-flight limits, when priority and fairness is off: 429 over them (observed as
    //    terminated).
    let _permit = match server.flow_control {
        None => max_in_flight::admit(&server.in_flight, &info, &mut observation)?,
        Some(_) => None,
    };
    // 7. Authentication: who asks (401, audited, when nobody recognizes the credentials).
    let user = match authentication::delegating(security) {
        Some(security) => {
            let certificate = authentication::certificate(security, &request);
            let answer = security
                .authentication
                .authenticate_delegated(request.headers(), certificate.as_deref())
                .await;
            authentication::settle(answer, server.audit.as_ref(), &info, &request, arrival)?
        }
        None => {
            authentication::authenticate(security, server.audit.as_ref(), &info, &request, arrival)?
        }
    };
    // 8. Audit: the record begins, and goes with the request (and its body) to the router.
    let (request, record) =
        audit::begin(server.audit.as_ref(), &info, request, &user, arrival, slot);
    // 9. Impersonation: the user the request acts as (403 when not allowed).
    let user =
        impersonation::act_as(security, &info, request.headers(), user, record.as_ref()).await?;
    // 10. Priority and fairness: classified, then run, queued or refused (429) by its level.
    let admitted = priority_and_fairness::admit(
        server,
        &info,
        request.uri().query(),
        &user,
        record.as_ref(),
        &mut observation,
    )
    .await?;
    // 11. Authorization: may they (403, classified as every answer after 10 is).
    if let Err(refusal) =
        authorization::allow(security, &info, request.headers(), &user, record.as_ref()).await
    {
        return Err(Box::new(priority_and_fairness::finish(
            server, &info, admitted, *refusal,
        )));
    }
    // 12. The request timeout, around 13. the router.
    let (response, terminated) = timeout::route(server, &info, request, &user).await;
    // 5 and 8 on the way out: the answer's metrics (a watch's when it ends), the record's end.
    let response = metrics::finish(observation, response, terminated, || {
        server.served_resource(&info).map(|r| r.info.clone())
    });
    let response = audit::finish(record, &info, response);
    // 10 on the way out: the classification's headers; the seats given back once it is sent.
    Ok(priority_and_fairness::finish(
        server, &info, admitted, response,
    ))
}

/// A filter's refusal: the answer it gives instead of passing the request on (boxed: refusals
/// are the rare path, and what a filter passes on stays small).
pub(crate) type Refusal = Box<Response<ResponseBody>>;

/// The answer refusing a request with `error`, in the form its `Accept` header asks for.
pub(crate) fn refused(error: &ApiError, headers: &HeaderMap) -> Refusal {
    let accept = headers.get(ACCEPT).and_then(|v| v.to_str().ok());
    Box::new(error_response_for(error, accept))
}
