//! Panic recovery: a panic anywhere in the chain below answers 500 with a `Status` (the server
//! keeps serving, the connection keeps working), is logged with the request, and completes the
//! request's audit record with a `Panic` event, as upstream's `WithPanicRecovery` and
//! `finish_panicked` do.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, PoisonError};

use futures::FutureExt as _;
use genplane_apimachinery::errors::Status;
use genplane_audit::AuditRecord;
use hyper::Response;

use crate::body::ResponseBody;
use crate::handlers::error_response;

/// Where the audit filter leaves the request's record, so that a panic can complete it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Slot(Arc<Mutex<Option<AuditRecord>>>);

impl Slot {
    /// Keeps `record` for a panic to complete.
    pub(crate) fn keep(&self, record: &AuditRecord) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(record.clone());
    }

    fn take(&self) -> Option<AuditRecord> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
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
            if let Some(record) = slot.take() {
                record.finish_panicked(&message);
            }
            error_response(
                &Status::internal_error(
                    "This request caused apiserver to panic. Look in the logs for details.",
                )
                .into(),
            )
        }
    }
}
