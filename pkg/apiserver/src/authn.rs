//! Authentication by x509 client certificate: the certificate's Common Name is the user, its
//! Organizations are the groups. The TLS layer has already verified the certificate against the
//! client CA; a request without one is anonymous.

use genplane_apimachinery::errors::{ApiError, Status};
use genplane_component_base::http::PeerCertificates;

/// Who made a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserInfo {
    /// The user name.
    pub name: String,
    /// The groups, including `system:authenticated` (or `system:unauthenticated`).
    pub groups: Vec<String>,
}

/// The anonymous user.
pub fn anonymous() -> UserInfo {
    UserInfo {
        name: "system:anonymous".into(),
        groups: vec!["system:unauthenticated".into()],
    }
}

/// The user a verified client certificate names, or `None` when there is none.
pub fn from_certificates(peer: Option<&PeerCertificates>) -> Option<UserInfo> {
    let leaf = peer?.0.first()?;
    let (_, certificate) = x509_parser::parse_x509_certificate(leaf).ok()?;
    let subject = certificate.subject();
    let name = subject.iter_common_name().next()?.as_str().ok()?.to_owned();
    let mut groups: Vec<String> = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_owned))
        .collect();
    groups.push("system:authenticated".into());
    Some(UserInfo { name, groups })
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
    if user.name == "system:anonymous" && !is_public(path) {
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
        assert_eq!(
            require_authenticated(&anonymous(), "/api")
                .unwrap_err()
                .code,
            401
        );
        assert!(require_authenticated(&anonymous(), "/readyz").is_ok());
    }

    #[test]
    fn certificates_name_the_user_and_groups() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "alice");
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "system:masters");
        let cert = params.self_signed(&key).unwrap();
        let user = from_certificates(Some(&PeerCertificates(vec![cert.der().to_vec()]))).unwrap();
        assert_eq!(user.name, "alice");
        assert_eq!(user.groups, ["system:masters", "system:authenticated"]);
        assert!(from_certificates(None).is_none());
        assert!(from_certificates(Some(&PeerCertificates(vec![b"garbage".to_vec()]))).is_none());
    }
}
