//! API Priority and Fairness: each request classified by the FlowSchemas, estimated in seats,
//! and admitted, queued or rejected by its priority level ([`crate::flowcontrol`]).
//!
//! Every classified answer carries `X-Kubernetes-PF-FlowSchema-UID` and
//! `X-Kubernetes-PF-PriorityLevel-UID`, as upstream (UIDs, not names: the names an
//! administrator chose are not shown to the clients). A rejected request is answered 429
//! `TooManyRequests` with its level's `Retry-After`, counted as terminated and dropped, and
//! its audit record completed. A request holds its seats until its answer is sent (a list
//! written as it goes, a proxied answer), except a watch, which holds them only until its
//! stream starts, and is then counted against its resource for the estimate of writes.

use genplane_audit::AuditRecord;
use genplane_authentication::UserInfo;
use genplane_storage::Storage;
use hyper::header::HeaderName;
use hyper::{Response, StatusCode};

use super::{Refusal, audit, max_in_flight};
use crate::body::ResponseBody;
use crate::flowcontrol::dispatch::{Admitted, Classified};
use crate::metrics::Observation;
use crate::request_info::RequestInfo;
use crate::server::ApiServer;

/// The answer header naming the FlowSchema's UID.
pub const FLOW_SCHEMA_UID_HEADER: &str = "x-kubernetes-pf-flowschema-uid";
/// The answer header naming the priority level's UID.
pub const PRIORITY_LEVEL_UID_HEADER: &str = "x-kubernetes-pf-prioritylevel-uid";

/// A request let through: where it was classified and the seats it holds.
pub(crate) struct Let {
    admitted: Admitted,
    watch: bool,
}

/// Admits the request `info` describes (with its `query`, of `user`) under priority and
/// fairness, or answers 429 (observed as terminated, the audit record completed). `None`
/// when the server runs without it (the in-flight limits protect it instead).
pub(crate) async fn admit<S: Storage>(
    server: &ApiServer<S>,
    info: &RequestInfo,
    query: Option<&str>,
    user: &UserInfo,
    record: Option<&AuditRecord>,
    observation: &mut Option<Observation>,
) -> Result<Option<Let>, Refusal> {
    let Some(flow_control) = &server.flow_control else {
        return Ok(None);
    };
    let stored = || match server.served_resource(info) {
        Some(resource) => resource
            .store()
            .ok_or(false)?
            .storage()
            .object_count()
            .ok_or(true),
        None => Err(false),
    };
    match flow_control.admit(info, query, user, stored).await {
        Ok(admitted) => {
            let watch = max_in_flight::is_long_running(info);
            if !watch && let Some(observation) = observation {
                observation.in_flight(max_in_flight::is_mutating(&info.verb));
            }
            Ok(Some(Let { admitted, watch }))
        }
        Err(rejected) => {
            let mut response = max_in_flight::too_many_requests(rejected.retry_after);
            stamp(&mut response, &rejected.classified);
            let response = crate::metrics::finish(observation.take(), response, true, || None);
            Err(Box::new(audit::finish(record.cloned(), info, response)))
        }
    }
}

/// Sets the classification headers on `response`.
fn stamp(response: &mut Response<ResponseBody>, classified: &Classified) {
    let headers = response.headers_mut();
    for (name, value) in [
        (FLOW_SCHEMA_UID_HEADER, &classified.flow_schema_header),
        (PRIORITY_LEVEL_UID_HEADER, &classified.priority_level_header),
    ] {
        if let Some(value) = value {
            headers.insert(HeaderName::from_static(name), value.clone());
        }
    }
}

/// The answer of a request let through: stamped with its classification, its seats given
/// back when the answer is sent (a watch's at once, its registration held while it streams).
pub(crate) fn finish<S: Storage>(
    server: &ApiServer<S>,
    info: &RequestInfo,
    admitted: Option<Let>,
    mut response: Response<ResponseBody>,
) -> Response<ResponseBody> {
    let Some(Let { admitted, watch }) = admitted else {
        return response;
    };
    stamp(&mut response, &admitted.classified);
    let seats = admitted.seats;
    if watch {
        drop(seats);
        if response.status() == StatusCode::OK
            && let Some(flow_control) = &server.flow_control
        {
            let registration = flow_control.register_watch(info);
            let (parts, body) = response.into_parts();
            return Response::from_parts(parts, body.guarded(registration));
        }
        return response;
    }
    if let ResponseBody::Full(_) | ResponseBody::Pieces(_) | ResponseBody::Gzipped(_) =
        response.body()
    {
        // In memory already: sending it is the connection's work.
        drop(seats);
        return response;
    }
    let (parts, body) = response.into_parts();
    Response::from_parts(parts, body.guarded(seats))
}
