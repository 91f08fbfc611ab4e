//! The request timeout: a request that is not long-running is answered 504 once
//! `--request-timeout` (or the shorter `timeout` query parameter it asks for) has passed; the
//! work it started may still complete. A malformed `timeout` is a 400.

use std::future::Future;
use std::time::Duration;

use genplane_apimachinery::errors::{ApiError, Status, StatusReason};
use hyper::Response;

use crate::body::ResponseBody;
use crate::handlers::error_response;

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
pub(crate) fn deadline(limit: Duration, query: Option<&str>) -> Result<Duration, ApiError> {
    Ok(requested(query)?.map_or(limit, |r| r.min(limit)))
}

/// `answer`, or the 504 past `deadline` (as `Err`, so that it is counted as terminated).
pub(crate) async fn within(
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
