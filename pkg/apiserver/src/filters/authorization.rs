//! Authorization: may the user do what the request asks (`system:masters`, then RBAC or
//! `AlwaysAllow`)? The decision and its reason are annotated on the audit record, as upstream
//! annotates `authorization.k8s.io/decision` and `/reason`; a refusal is a 403 naming the
//! attributes.

use genplane_apimachinery::errors::ApiError;
use genplane_audit::AuditRecord;
use genplane_authentication::UserInfo;

use crate::authz::{self, Security};
use crate::request_info::RequestInfo;

/// Lets the request through, or refuses it.
pub(crate) fn authorize(
    security: &Security,
    info: &RequestInfo,
    user: &UserInfo,
    record: Option<&AuditRecord>,
) -> Result<(), ApiError> {
    let attributes = authz::attributes(info, user);
    let (decision, reason) = authz::decide(security.authorizer.as_ref(), &attributes);
    let allowed = decision == genplane_authorization::Decision::Allow;
    if let Some(record) = record {
        record.annotate(
            genplane_audit::DECISION_ANNOTATION,
            if allowed {
                genplane_audit::DECISION_ALLOW
            } else {
                genplane_audit::DECISION_FORBID
            },
        );
        if !reason.is_empty() {
            record.annotate(genplane_audit::REASON_ANNOTATION, &reason);
        }
    }
    if allowed {
        Ok(())
    } else {
        Err(authz::forbidden(&attributes, &reason))
    }
}
