//! The audit ID: the caller's own `Audit-ID` header, or a new one. It names the request in the
//! audit log and is sent back on every answer, refusals and panics included (the panic's answer
//! finds it in the [`Slot`]).

use hyper::header::HeaderValue;
use hyper::{HeaderMap, Response};

use super::panic_recovery::Slot;
use crate::body::ResponseBody;

/// The audit ID header, on requests (a caller's own ID) and on every answer.
pub(crate) const AUDIT_ID: &str = "audit-id";

/// The request's audit ID: the one it carries, or a new one; kept in `slot` for the answer.
pub(crate) fn assign(headers: &HeaderMap, slot: &Slot) -> String {
    let audit_id = headers
        .get(AUDIT_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
        .map_or_else(genplane_audit::new_audit_id, str::to_owned);
    if let Ok(value) = HeaderValue::from_str(&audit_id) {
        slot.keep_audit_id(value);
    }
    audit_id
}

/// `response` with the audit ID header kept in `slot`.
pub(crate) fn stamp(mut response: Response<ResponseBody>, slot: &Slot) -> Response<ResponseBody> {
    if let Some(value) = slot.audit_id() {
        response.headers_mut().insert(AUDIT_ID, value);
    }
    response
}
