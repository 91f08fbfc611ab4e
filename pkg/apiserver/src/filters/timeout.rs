//! The request timeout: a request that is not long-running is answered 504 once
//! `--request-timeout` (or the shorter `timeout` query parameter it asks for) has passed; the
//! work it started may still complete. A malformed `timeout` is a 400. It wraps the router
//! (see [`super`] for where that sits against upstream's chain).

use std::future::Future;
use std::time::Duration;

use genplane_apimachinery::errors::{ApiError, Status, StatusReason};
use genplane_authentication::UserInfo;
use genplane_storage::Storage;
use hyper::{Request, Response};

use super::{max_in_flight, refused};
use crate::body::{RequestBody, ResponseBody};
use crate::handlers::error_response;
use crate::request_info::RequestInfo;
use crate::server::ApiServer;

/// The router's answer to `request`, within the request's deadline: the answer and whether the
/// timeout cut it short (a 504, counted as terminated). Long-running requests have no deadline.
pub(crate) async fn route<S: Storage>(
    server: &ApiServer<S>,
    info: &RequestInfo,
    request: Request<RequestBody>,
    user: &UserInfo,
) -> (Response<ResponseBody>, bool) {
    let (parts, body) = request.into_parts();
    // The router's future holds every handler's state (tens of KiB): it is boxed, so that the
    // timeout, panic recovery and the connection's task spawn move a pointer, not a copy of it
    // (those copies were a third of a cached GET's instructions).
    if max_in_flight::is_long_running(info) {
        return (Box::pin(server.route(info, parts, body, user)).await, false);
    }
    let deadline = match deadline(server.in_flight.limits.request_timeout, parts.uri.query()) {
        Ok(deadline) => deadline,
        Err(bad) => return (*refused(&bad, &parts.headers), false),
    };
    let routed = Box::pin(server.route(info, parts, body, user));
    match within(deadline, routed).await {
        Ok(response) => (response, false),
        Err(timed_out) => (timed_out, true),
    }
}

/// The deadline a request asks for with its `timeout` query parameter, if any.
fn requested(query: Option<&str>) -> Result<Option<Duration>, ApiError> {
    let Some(value) = query.and_then(|q| {
        form_urlencoded::parse(q.as_bytes())
            .find(|(k, _)| k == "timeout")
            .map(|(_, v)| v.into_owned())
    }) else {
        return Ok(None);
    };
    if value.is_empty() {
        return Ok(None);
    }
    genplane_apimachinery::duration::parse(&value)
        .map(Some)
        .map_err(|_| Status::bad_request("invalid timeout specified in the request URL").into())
}

/// The deadline of a request: `limit`, or the shorter one its `timeout` parameter asks for;
/// a malformed `timeout` is a 400.
fn deadline(limit: Duration, query: Option<&str>) -> Result<Duration, ApiError> {
    Ok(requested(query)?.map_or(limit, |r| r.min(limit)))
}

/// `answer`, or the 504 past `deadline` (as `Err`, so that it is counted as terminated).
async fn within(
    deadline: Duration,
    answer: impl Future<Output = Response<ResponseBody>>,
) -> Result<Response<ResponseBody>, Response<ResponseBody>> {
    tokio::time::timeout(deadline, answer)
        .await
        .map_err(|_| timed_out())
}

/// The answer past the request timeout.
fn timed_out() -> Response<ResponseBody> {
    error_response(
        &Status::failure(
            StatusReason::Timeout,
            "Timeout: request did not complete within requested timeout - context deadline exceeded",
        )
        .into(),
    )
}
