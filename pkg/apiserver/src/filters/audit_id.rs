//! The audit ID: the caller's own `Audit-ID` header, or a new one. It names the request in the
//! audit log and is sent back on every answer, refusals and panics included (panic recovery
//! keeps its header for the panic's answer).

use hyper::header::HeaderValue;
use hyper::{HeaderMap, Response};

use crate::body::ResponseBody;

/// The audit ID header, on requests (a caller's own ID) and on every answer.
pub(crate) const AUDIT_ID: &str = "audit-id";

/// A request's audit ID, and the header value that sends it back.
#[derive(Debug)]
pub(crate) struct AuditId {
    /// The ID, as the audit log writes it.
    pub(crate) id: String,
    /// The header value of the answer (none for an ID that is not a valid header value).
    pub(crate) header: Option<HeaderValue>,
}

/// The request's audit ID: the one it carries, or a new one.
pub(crate) fn assign(headers: &HeaderMap) -> AuditId {
    let id = headers
        .get(AUDIT_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
        .map_or_else(genplane_audit::new_audit_id, str::to_owned);
    let header = HeaderValue::from_str(&id).ok();
    AuditId { id, header }
}

/// `response` with the audit ID `header`.
pub(crate) fn stamp(
    mut response: Response<ResponseBody>,
    header: Option<HeaderValue>,
) -> Response<ResponseBody> {
    if let Some(value) = header {
        response.headers_mut().insert(AUDIT_ID, value);
    }
    response
}
