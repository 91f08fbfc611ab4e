use std::path::Path;

use genplane_api::certificates::{Request, parse_request};
use genplane_authentication::keys::{GeneratedKeyType, SigningKey};
use x509_parser::extensions::ParsedExtension;

use super::*;

/// A CA (certificate and key files in `dir`) with a key of `key_type`, valid until 2036.
fn ca(dir: &Path, key_type: GeneratedKeyType) -> Authority {
    let key = SigningKey::generate(key_type).unwrap();
    let key_pem = key.to_pkcs8_pem().unwrap();
    let pair = rcgen::KeyPair::from_pem(&key_pem).unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "test-ca");
    params.not_after = rcgen::date_time_ymd(2036, 1, 1);
    let cert = params.self_signed(&pair).unwrap();
    std::fs::write(dir.join("ca.crt"), cert.pem()).unwrap();
    std::fs::write(dir.join("ca.key"), key_pem).unwrap();
    Authority::from_files(&dir.join("ca.crt"), &dir.join("ca.key")).unwrap()
}

fn request() -> Request {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["alice.example".to_owned()]).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "alice");
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, "dev");
    let pem = params.serialize_request(&key).unwrap().pem().unwrap();
    parse_request(pem.as_bytes()).unwrap()
}

const NOW: i64 = 1_800_000_000; // 2027-01-15

fn der(pem_text: &str) -> Vec<u8> {
    pem_blocks(pem_text.as_bytes()).remove(0).contents
}

#[test]
fn issued_certificates_are_upstreams_for_both_key_kinds() {
    for key_type in [GeneratedKeyType::EcdsaP256, GeneratedKeyType::Rsa2048] {
        let dir = tempfile::tempdir().unwrap();
        let authority = ca(dir.path(), key_type);
        let request = request();
        let usages = ["client auth".to_owned(), "digital signature".to_owned()];
        let issued = authority.sign(&request, &usages, 24 * 3600, NOW).unwrap();
        let cert_der = der(&issued);
        let (_, cert) = x509_parser::parse_x509_certificate(&cert_der).unwrap();
        let ca_der = der(authority.certificate_pem());
        let (_, ca_cert) = x509_parser::parse_x509_certificate(&ca_der).unwrap();
        cert.verify_signature(Some(ca_cert.public_key()))
            .unwrap_or_else(|e| panic!("{key_type:?}: {e}"));
        assert_eq!(cert.subject().as_raw(), request.subject_der.as_slice());
        assert_eq!(cert.issuer().as_raw(), ca_cert.subject().as_raw());
        assert_eq!(cert.public_key().raw, request.public_key_der.as_slice());
        assert_eq!(
            cert.validity().not_before.timestamp(),
            NOW - BACKDATE_SECONDS
        );
        assert_eq!(
            cert.validity().not_after.timestamp(),
            NOW + 24 * 3600 - BACKDATE_SECONDS
        );
        let eku = cert.extended_key_usage().unwrap().unwrap().value;
        assert!(eku.client_auth && !eku.server_auth);
        let ku = cert.key_usage().unwrap().unwrap();
        assert!(ku.critical && ku.value.digital_signature() && !ku.value.key_cert_sign());
        let bc = cert.basic_constraints().unwrap().unwrap();
        assert!(bc.critical && !bc.value.ca);
        let sans: Vec<String> = cert
            .subject_alternative_name()
            .unwrap()
            .unwrap()
            .value
            .general_names
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(sans, ["DNSName(alice.example)"]);
        assert!(cert.extensions().iter().all(|e| !matches!(
            e.parsed_extension(),
            ParsedExtension::UnsupportedExtension { .. }
        )));
    }
}

#[test]
fn lifetimes_follow_the_policy_and_the_ca() {
    let dir = tempfile::tempdir().unwrap();
    let authority = ca(dir.path(), GeneratedKeyType::EcdsaP256);
    let request = request();
    let usages = ["client auth".to_owned()];
    let not_after = |ttl: i64| {
        let pem = authority.sign(&request, &usages, ttl, NOW).unwrap();
        let der = der(&pem);
        let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
        cert.validity().not_after.timestamp()
    };
    // Short-lived: the whole TTL after now.
    assert_eq!(not_after(3600), NOW + 3600);
    // Past the CA's end: cut to it.
    let end_of_ca = 2_082_758_400; // 2036-01-01
    assert_eq!(not_after(20 * 365 * 86_400), end_of_ca);
    assert!(matches!(
        authority.sign(&request, &usages, 3600, end_of_ca + 1),
        Err(Error::Expired(_))
    ));
    assert!(matches!(
        authority.sign(&request, &["bogus".to_owned()], 3600, NOW),
        Err(Error::Usage(_))
    ));
}

#[test]
fn mismatched_or_missing_files_are_refused() {
    let one = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    ca(one.path(), GeneratedKeyType::EcdsaP256);
    ca(other.path(), GeneratedKeyType::EcdsaP256);
    let error = Authority::from_files(&one.path().join("ca.crt"), &other.path().join("ca.key"))
        .unwrap_err();
    assert!(matches!(error, Error::Mismatch { .. }), "{error}");
    let error = Authority::from_files(&one.path().join("nope.crt"), &one.path().join("ca.key"))
        .unwrap_err();
    assert!(
        error.to_string().starts_with("error reading CA cert file"),
        "{error}"
    );
    std::fs::write(one.path().join("empty.crt"), "nothing").unwrap();
    let error = Authority::from_files(&one.path().join("empty.crt"), &one.path().join("ca.key"))
        .unwrap_err();
    assert!(matches!(error, Error::NoCertificate { .. }), "{error}");
}
