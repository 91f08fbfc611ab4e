//! Audit logging, as kube-apiserver 1.33 does it.
//!
//! - [`policy`]: the `audit.k8s.io/v1` `Policy` (`--audit-policy-file`): which requests are
//!   recorded at which [`Level`], and which [`Stage`]s are left out.
//! - [`event`]: the `audit.k8s.io/v1` `Event`, serialized exactly as upstream writes it.
//! - [`auditor`]: the request-path API. [`Auditor::begin`] decides per request (allocating
//!   nothing when the level is `None`) and returns an [`AuditRecord`] that collects what the
//!   request path learns and writes the events of each stage.
//! - [`log`]: the log backend (`--audit-log-path`): JSON lines to a file or standard output,
//!   written by one thread behind a bounded queue; [`rotate`]: size-based rotation with
//!   lumberjack's names and pruning (`--audit-log-maxsize`, `--audit-log-maxbackup`,
//!   `--audit-log-maxage`).
//! - [`options`]: the flags in one struct, [`AuditOptions::build`] turning them into an
//!   [`Audit`].
//!
//! # In the filter chain
//!
//! The audit filter sits after authentication and before impersonation and authorization:
//!
//! 0. Authentication failed (401): [`Auditor::failed_authentication`], and that is all.
//! 1. Build [`RequestAttributes`] from the request info and the authenticated user and call
//!    [`Auditor::begin`]. `None`: nothing more to do. `Some(record)`: put a clone in the
//!    request's extensions and answer with the [`AUDIT_ID_HEADER`] header.
//! 2. Impersonation: [`AuditRecord::set_impersonated_user`]. Authorization:
//!    [`AuditRecord::annotate`] with [`DECISION_ANNOTATION`] and [`REASON_ANNOTATION`].
//! 3. Handlers: [`AuditRecord::set_request_object`] with the decoded body (or
//!    [`AuditRecord::set_request_patch`] for patches), [`AuditRecord::set_response_object`] with
//!    the answer (every error `Status` too).
//! 4. When the response head goes out: [`AuditRecord::response_started`] with the code. When
//!    the body is done: [`AuditRecord::finish`], or simply drop the last handle (move one into
//!    the body of a watch). A panic of the inner service, caught in the audit layer:
//!    [`AuditRecord::finish_panicked`] with [`panic_message`] of the payload, then resume.
//!
//! ```
//! use std::sync::Arc;
//! use genplane_audit::{
//!     Auditor, DECISION_ALLOW, DECISION_ANNOTATION, Level, MemorySink, Policy,
//!     REASON_ANNOTATION, RequestAttributes, ResourceAttributes, Stage,
//! };
//! use genplane_authentication::UserInfo;
//!
//! let sink = Arc::new(MemorySink::new());
//! let auditor = Auditor::new(Policy::everything_at(Level::Request), sink.clone());
//! let user = UserInfo::authenticated("alice", vec![]);
//! let attrs = RequestAttributes {
//!     resource: Some(ResourceAttributes {
//!         api_version: "v1",
//!         resource: "configmaps",
//!         namespace: "default",
//!         ..ResourceAttributes::default()
//!     }),
//!     ..RequestAttributes::new(&user, "create", "/api/v1/namespaces/default/configmaps")
//! };
//! if let Some(record) = auditor.begin(&attrs) {
//!     record.annotate(DECISION_ANNOTATION, DECISION_ALLOW);
//!     record.annotate(REASON_ANNOTATION, "");
//!     record.set_request_object(&serde_json::json!({
//!         "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}
//!     }));
//!     record.response_started(201);
//!     record.finish();
//! }
//! let events = sink.events();
//! assert_eq!(events.len(), 2);
//! assert_eq!(events[1].stage, Stage::ResponseComplete);
//! assert_eq!(events[1].object_ref.as_ref().map(|r| r.name.as_str()), Some("settings"));
//! ```

#![warn(missing_docs)]

pub mod attributes;
pub mod auditor;
pub mod event;
pub mod log;
pub mod options;
pub mod policy;
pub mod rotate;

pub use attributes::{RequestAttributes, ResourceAttributes, SourceIps};
pub use auditor::{
    AUDIT_ID_HEADER, AuditRecord, Auditor, DECISION_ALLOW, DECISION_ANNOTATION, DECISION_FORBID,
    MemorySink, REASON_ANNOTATION, Sink, failed_authentication_message, new_audit_id,
    panic_message,
};
pub use event::{Event, ObjectReference, ResponseStatus};
pub use log::{LogBackend, LogConfig, LogError, LogMode, LogStats};
pub use options::{Audit, AuditOptions, OptionsError};
pub use policy::{Level, ParsedPolicy, Policy, PolicyError, PolicyRule, RequestAuditConfig, Stage};
