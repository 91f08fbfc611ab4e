//! The audit ID: the caller's own `Audit-ID` header, or a new one. It names the request in the
//! audit log and is sent back on every answer, refusals and panics included.

use hyper::header::HeaderValue;
use hyper::{HeaderMap, Response};

use crate::body::ResponseBody;

/// The audit ID header, on requests (a caller's own ID) and on every answer.
pub(crate) const AUDIT_ID: &str = "audit-id";

/// The request's audit ID: the one it carries, or a new one.
pub(crate) fn assign(headers: &HeaderMap) -> String {
    headers
        .get(AUDIT_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
        .map_or_else(genplane_audit::new_audit_id, str::to_owned)
}

/// `response` with the audit ID header.
pub(crate) fn stamp(
    mut response: Response<ResponseBody>,
    audit_id: &str,
) -> Response<ResponseBody> {
    if let Ok(value) = HeaderValue::from_str(audit_id) {
        response.headers_mut().insert(AUDIT_ID, value);
    }
    response
}
