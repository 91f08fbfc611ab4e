//! Authentication at the HTTP boundary: the user a request's verified client certificate names,
//! anonymous otherwise.

use genplane_apimachinery::errors::{ApiError, Status};
use genplane_authentication::UserInfo;
use genplane_component_base::http::PeerCertificates;

/// The user a verified client certificate names, or `None` when there is none.
pub fn from_certificates(peer: Option<&PeerCertificates>) -> Option<UserInfo> {
    genplane_authentication::x509::user_of_chain(&peer?.0)
}

/// Paths anonymous requests may reach (upstream grants them through system:public-info-viewer).
pub fn is_public(path: &str) -> bool {
    ["/healthz", "/livez", "/readyz", "/version"]
        .iter()
        .any(|p| {
            path == *p
                || path
                    .strip_prefix(p)
                    .is_some_and(|rest| rest.starts_with('/'))
        })
}

/// Refuses anonymous requests outside the public paths with 401.
pub fn require_authenticated(user: &UserInfo, path: &str) -> Result<(), ApiError> {
    if user.is_anonymous() && !is_public(path) {
        return Err(Status::unauthorized("Unauthorized").into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_paths() {
        for path in ["/healthz", "/livez", "/readyz", "/readyz/ping", "/version"] {
            assert!(is_public(path), "{path}");
        }
        for path in ["/api", "/healthzz", "/versions", "/api/v1/namespaces"] {
            assert!(!is_public(path), "{path}");
        }
        let anonymous = UserInfo::anonymous();
        assert_eq!(
            require_authenticated(&anonymous, "/api").unwrap_err().code,
            401
        );
        assert!(require_authenticated(&anonymous, "/readyz").is_ok());
    }
}
