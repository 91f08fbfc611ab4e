//! Impersonation: a user with the `impersonate` verb on each attribute may act as another
//! (`Impersonate-User`, `-Group`, `-Uid`, `-Extra-*`); the audit record names both.

use genplane_apimachinery::errors::ApiError;
use genplane_audit::AuditRecord;
use genplane_authentication::UserInfo;
use hyper::HeaderMap;

use crate::authz::Security;

/// The user the request acts as: the impersonated one, or `user` itself.
pub(crate) fn act_as(
    security: &Security,
    headers: &HeaderMap,
    user: UserInfo,
    record: Option<&AuditRecord>,
) -> Result<UserInfo, ApiError> {
    match crate::impersonation::impersonate(headers, &user, security.authorizer.as_ref())? {
        Some(impersonated) => {
            if let Some(record) = record {
                record.set_impersonated_user(&impersonated);
            }
            Ok(impersonated)
        }
        None => Ok(user),
    }
}
