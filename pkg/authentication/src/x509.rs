//! Authentication by x509 client certificate: the certificate's Common Name is the user, its
//! Organizations are the groups. The TLS layer has already verified the certificate chain
//! against the client CA; a request without a certificate is not authenticated by this method.

use crate::UserInfo;

/// The user a verified client certificate chain names (leaf first), or `None` when there is no
/// certificate or it names no user.
pub fn user_of_chain(chain: &[Vec<u8>]) -> Option<UserInfo> {
    let leaf = chain.first()?;
    let (_, certificate) = x509_parser::parse_x509_certificate(leaf).ok()?;
    let subject = certificate.subject();
    let name = subject.iter_common_name().next()?.as_str().ok()?.to_owned();
    if name.is_empty() {
        return None;
    }
    let groups: Vec<String> = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_owned))
        .collect();
    Some(UserInfo::authenticated(name, groups))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let user = user_of_chain(&[cert.der().to_vec()]).unwrap();
        assert_eq!(user.username, "alice");
        assert_eq!(user.groups, ["system:masters", "system:authenticated"]);
        assert!(user_of_chain(&[]).is_none());
        assert!(user_of_chain(&[b"garbage".to_vec()]).is_none());
    }
}
