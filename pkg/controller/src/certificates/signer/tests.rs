use base64::Engine as _;
use serde_json::{Value, json};

use super::*;

fn request_pem(org: &str) -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "alice");
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, org);
    params.serialize_request(&key).unwrap().pem().unwrap()
}

fn csr(signer: &str, usages: Value, org: &str, conditions: Value) -> Value {
    json!({
        "metadata": {"name": "r"},
        "spec": {
            "request": base64::engine::general_purpose::STANDARD.encode(request_pem(org)),
            "signerName": signer,
            "usages": usages,
        },
        "status": {"conditions": conditions},
    })
}

fn approved() -> Value {
    json!([{"type": "Approved", "status": "True"}])
}

const YEAR: i64 = 8760 * 3600;

#[test]
fn only_approved_unissued_requests_of_the_signer_are_signed() {
    let client = KUBE_APISERVER_CLIENT_SIGNER;
    let ok = csr(client, json!(["client auth"]), "dev", approved());
    assert_eq!(
        decide(&ok, client, YEAR),
        Decision::Sign {
            usages: vec!["client auth".into()],
            ttl_seconds: YEAR
        }
    );
    assert_eq!(decide(&ok, LEGACY_UNKNOWN_SIGNER, YEAR), Decision::Skip);
    let pending = csr(client, json!(["client auth"]), "dev", json!([]));
    assert_eq!(decide(&pending, client, YEAR), Decision::Skip);
    let failed = csr(
        client,
        json!(["client auth"]),
        "dev",
        json!([{"type": "Approved", "status": "True"}, {"type": "Failed", "status": "True"}]),
    );
    assert_eq!(decide(&failed, client, YEAR), Decision::Skip);
    let mut issued = ok.clone();
    issued["status"]["certificate"] = json!("eA==");
    assert_eq!(decide(&issued, client, YEAR), Decision::Skip);
    // The legacy signer takes any usages.
    let legacy = csr(
        LEGACY_UNKNOWN_SIGNER,
        json!(["server auth", "cert sign"]),
        "dev",
        approved(),
    );
    assert!(matches!(
        decide(&legacy, LEGACY_UNKNOWN_SIGNER, YEAR),
        Decision::Sign { .. }
    ));
}

#[test]
fn refusals_are_upstreams() {
    let client = KUBE_APISERVER_CLIENT_SIGNER;
    let cases = [
        (
            csr(
                client,
                json!(["client auth", "server auth"]),
                "dev",
                approved(),
            ),
            "invalid usage for client certificate: server auth",
        ),
        (
            csr(client, json!(["digital signature"]), "dev", approved()),
            "missing required usage for client certificate: client auth",
        ),
        (
            csr(client, json!(["client auth"]), "system:masters", approved()),
            "use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed",
        ),
    ];
    for (object, message) in cases {
        assert_eq!(
            decide(&object, client, YEAR),
            Decision::Fail(message.into())
        );
    }
    let mut tampered = csr(client, json!(["client auth"]), "dev", approved());
    tampered["spec"]["request"] = json!(base64::engine::general_purpose::STANDARD.encode("junk"));
    assert_eq!(
        decide(&tampered, client, YEAR),
        Decision::Fail("unable to parse csr: PEM block type must be CERTIFICATE REQUEST".into())
    );
}

#[test]
fn lifetimes_honour_the_request_within_bounds() {
    assert_eq!(lifetime(None, YEAR), YEAR);
    assert_eq!(lifetime(Some(3600), YEAR), 3600);
    assert_eq!(lifetime(Some(2 * YEAR), YEAR), YEAR);
    assert_eq!(lifetime(Some(60), YEAR), 600);
    assert_eq!(lifetime(Some(3600), 1800), 1800);
}
