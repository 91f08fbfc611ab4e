//! Panic recovery: a panic anywhere in the chain below answers 500 with a `Status` (the server
//! keeps serving, the connection keeps working), is logged with the request, carries the
//! request's audit ID, and completes the request's audit record with a `Panic` event, as
//! upstream's `WithPanicRecovery` and `finish_panicked` do. Every filter runs inside it,
//! compression on the way out included; only the transport ([`super::unread_body`]) is outside.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, PoisonError};

use futures::FutureExt as _;
use genplane_apimachinery::errors::Status;
use genplane_audit::AuditRecord;
use hyper::Response;
use hyper::header::HeaderValue;

use super::audit_id;
use crate::body::ResponseBody;
use crate::handlers::error_response;

/// What the answer to a panic needs from the filters that ran before it: the audit ID to send
/// back and the audit record to complete. The filters leave them here as they learn them.
#[derive(Clone, Debug, Default)]
pub(crate) struct Slot(Arc<Mutex<Kept>>);

#[derive(Debug, Default)]
struct Kept {
    audit_id: Option<HeaderValue>,
    record: Option<AuditRecord>,
}

impl Slot {
    fn kept(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps the header value of the request's audit ID for the answer, a panic's too.
    pub(crate) fn keep_audit_id(&self, header: Option<HeaderValue>) {
        self.kept().audit_id = header;
    }

    /// The header value of the request's audit ID, taken for the answer.
    pub(crate) fn take_audit_id(&self) -> Option<HeaderValue> {
        self.kept().audit_id.take()
    }

    /// Keeps `record` for a panic to complete.
    pub(crate) fn keep(&self, record: &AuditRecord) {
        self.kept().record = Some(record.clone());
    }
}

/// Runs `chain`, answering a panic inside it.
pub(crate) async fn recover(
    slot: &Slot,
    method: &hyper::Method,
    uri: &hyper::Uri,
    chain: impl Future<Output = Response<ResponseBody>>,
) -> Response<ResponseBody> {
    match AssertUnwindSafe(chain).catch_unwind().await {
        Ok(response) => response,
        Err(payload) => {
            let message = genplane_audit::panic_message(payload.as_ref()).to_owned();
            tracing::error!(%method, %uri, panic = %message, "a request caused a panic");
            let (record, audit_id) = {
                let mut kept = slot.kept();
                (kept.record.take(), kept.audit_id.take())
            };
            if let Some(record) = record {
                record.finish_panicked(&message);
            }
            let response = error_response(
                &Status::internal_error(
                    "This request caused apiserver to panic. Look in the logs for details.",
                )
                .into(),
            );
            audit_id::stamp(response, audit_id)
        }
    }
}
