use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::{Value, json};

use super::certificatesigningrequest::*;
use super::*;
use crate::resource::{Context, GatesOff, Requestor};

/// A PEM CSR for `cn` in `org` signed by a new P-256 key.
fn request_pem(cn: &str, org: &str) -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["example.com".to_owned()]).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, cn);
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, org);
    params.serialize_request(&key).unwrap().pem().unwrap()
}

fn b64(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

fn pem(label: &str, der: &[u8]) -> String {
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let lines: Vec<&str> = body
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        lines.join("\n")
    )
}

fn csr(spec: Value) -> Value {
    json!({"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": "req"}, "spec": spec})
}

fn valid_spec() -> Value {
    json!({
        "request": b64(request_pem("alice", "dev").as_bytes()),
        "signerName": KUBE_APISERVER_CLIENT_SIGNER,
        "usages": ["client auth", "digital signature"],
    })
}

fn messages(errors: &genplane_apimachinery::validation::field::ErrorList) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

fn with(mut object: Value, pointer: &str, value: Value) -> Value {
    *object.pointer_mut(pointer).unwrap() = value;
    object
}

#[test]
fn requests_are_read_and_their_signatures_checked() {
    let pem_text = request_pem("alice", "dev");
    let request = parse_request(pem_text.as_bytes()).unwrap();
    assert_eq!(request.common_name, "alice");
    assert_eq!(request.organizations, ["dev"]);
    assert!(request.has_alt_names);
    assert!(request.subject_alt_names_der.is_some());

    let block = &pem_blocks(pem_text.as_bytes())[0];
    let mut tampered = block.contents.clone();
    let last = tampered.len() - 1;
    tampered[last] ^= 1;
    assert_eq!(
        parse_request(pem("CERTIFICATE REQUEST", &tampered).as_bytes()).unwrap_err(),
        "x509: ECDSA verification failure"
    );
    assert_eq!(
        parse_request(b"not pem").unwrap_err(),
        "PEM block type must be CERTIFICATE REQUEST"
    );
    assert_eq!(
        parse_request(pem("CERTIFICATE", &block.contents).as_bytes()).unwrap_err(),
        "PEM block type must be CERTIFICATE REQUEST"
    );
    assert!(
        parse_request(pem("CERTIFICATE REQUEST", b"junk").as_bytes())
            .unwrap_err()
            .starts_with("x509: malformed certificate request")
    );
}

#[test]
fn pem_is_read_as_go_reads_it() {
    let text = "junk\n-----BEGIN A-----\nAAEC\n-----END A-----\nmore\n-----BEGIN B-----\nProc-Type: 4\n\nAw==\n-----END B-----\n-----BEGIN C-----\nno end\n";
    let blocks = pem_blocks(text.as_bytes());
    assert_eq!(
        blocks,
        [
            PemBlock {
                label: "A".into(),
                has_headers: false,
                contents: vec![0, 1, 2]
            },
            PemBlock {
                label: "B".into(),
                has_headers: true,
                contents: vec![3]
            },
        ]
    );
}

#[test]
fn create_rules_with_upstreams_messages() {
    let request = request_pem("alice", "dev");
    let cases: Vec<(&str, Value, Vec<String>)> = vec![
        ("valid", csr(valid_spec()), vec![]),
        (
            "no request",
            csr(json!({"signerName": "example.com/s", "usages": ["any"]})),
            vec![
                "spec.request: Invalid value: []byte(nil): PEM block type must be CERTIFICATE REQUEST"
                    .into(),
            ],
        ),
        (
            "a request that is not PEM",
            with(csr(valid_spec()), "/spec/request", json!(b64(b"-\n"))),
            vec![
                "spec.request: Invalid value: []byte{0x2d, 0xa}: PEM block type must be CERTIFICATE REQUEST"
                    .into(),
            ],
        ),
        (
            "no usages",
            with(csr(valid_spec()), "/spec/usages", json!([])),
            vec!["spec.usages: Required value".into()],
        ),
        (
            "unknown and repeated usages",
            with(
                csr(valid_spec()),
                "/spec/usages",
                json!(["client auth", "bogus", "client auth"]),
            ),
            vec![
                format!(
                    "spec.usages[1]: Unsupported value: \"bogus\": supported values: {}",
                    USAGES
                        .iter()
                        .map(|u| format!("\"{u}\""))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                "spec.usages[2]: Duplicate value: \"client auth\"".into(),
            ],
        ),
        (
            "no signer",
            with(csr(valid_spec()), "/spec/signerName", json!("")),
            vec!["spec.signerName: Required value".into()],
        ),
        (
            "the legacy signer",
            with(csr(valid_spec()), "/spec/signerName", json!(LEGACY_UNKNOWN_SIGNER)),
            vec![
                "spec.signerName: Invalid value: \"kubernetes.io/legacy-unknown\": the legacy signerName is not allowed via this API version"
                    .into(),
            ],
        ),
        (
            "a signer without a path",
            with(csr(valid_spec()), "/spec/signerName", json!("example.com")),
            vec![
                "spec.signerName: Invalid value: \"example.com\": must be a fully qualified domain and path of the form 'example.com/signer-name'"
                    .into(),
            ],
        ),
        (
            "a signer of one label",
            with(csr(valid_spec()), "/spec/signerName", json!("example/Signer")),
            vec![
                "spec.signerName: Invalid value: \"example\": should be a domain with at least two segments separated by dots".into(),
                "spec.signerName: Invalid value: \"Signer\": validating label \"Signer\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".into(),
            ],
        ),
        (
            "another signer",
            with(
                csr(valid_spec()),
                "/spec/signerName",
                json!("example.com/signer"),
            ),
            vec![],
        ),
        (
            "599 seconds",
            {
                let mut object = csr(valid_spec());
                object["spec"]["expirationSeconds"] = json!(599);
                object
            },
            vec![
                "spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 600 seconds (10 minutes)"
                    .into(),
            ],
        ),
        (
            "approved and denied",
            {
                let mut object = csr(valid_spec());
                object["status"] = json!({"conditions": [
                    {"type": "Approved", "status": "True"},
                    {"type": "Denied", "status": "True"},
                    {"type": "Failed", "status": "False"},
                    {"type": "Custom", "status": ""},
                    {"type": "Custom", "status": "Maybe"},
                    {"type": "", "status": "True"},
                ]});
                object
            },
            vec![
                "status.conditions[1].type: Invalid value: \"Denied\": Approved and Denied conditions are mutually exclusive".into(),
                "status.conditions[2].status: Unsupported value: \"False\": supported values: \"True\"".into(),
                "status.conditions[3].status: Required value".into(),
                "status.conditions[4].status: Unsupported value: \"Maybe\": supported values: \"False\", \"True\", \"Unknown\"".into(),
                "status.conditions[4].type: Duplicate value: \"Custom\"".into(),
                "status.conditions[5].type: Required value".into(),
            ],
        ),
        (
            "a certificate that is not one",
            {
                let mut object = csr(valid_spec());
                object["status"] = json!({"certificate": b64(request.as_bytes())});
                object
            },
            vec![
                "status.certificate: Invalid value: \"<certificate data>\": only CERTIFICATE PEM blocks are allowed, found \"CERTIFICATE REQUEST\"".into(),
            ],
        ),
        (
            "no PEM at all",
            {
                let mut object = csr(valid_spec());
                object["status"] = json!({"certificate": b64(b"junk")});
                object
            },
            vec![
                "status.certificate: Invalid value: \"<certificate data>\": must contain at least one CERTIFICATE PEM block".into(),
            ],
        ),
    ];
    for (name, object, want) in cases {
        assert_eq!(messages(&validate(&object).unwrap()), want, "{name}");
    }
}

#[test]
fn the_requestor_is_the_authenticated_user() {
    let mut object = csr(valid_spec());
    object["spec"]["username"] = json!("mallory");
    object["spec"]["groups"] = json!(["system:masters"]);
    object["status"] = json!({"conditions": [{"type": "Approved", "status": "True"}]});
    let groups = vec!["dev".to_owned(), "system:authenticated".to_owned()];
    let extra = BTreeMap::from([("scopes".to_owned(), vec!["a".to_owned()])]);
    let context = Context {
        gates: &GatesOff,
        requestor: Some(Requestor {
            username: "alice",
            uid: "u-1",
            groups: &groups,
            extra: &extra,
        }),
        now: 0,
    };
    prepare_for_create(&mut object, &context);
    assert_eq!(object["spec"]["username"], "alice");
    assert_eq!(object["spec"]["uid"], "u-1");
    assert_eq!(object["spec"]["groups"], json!(groups));
    assert_eq!(object["spec"]["extra"], json!({"scopes": ["a"]}));
    assert_eq!(object["status"], json!({}));
    // Without a requestor, nothing the body said stays.
    let mut anonymous = csr(valid_spec());
    anonymous["spec"]["username"] = json!("mallory");
    prepare_for_create(&mut anonymous, &Context::gates_off());
    assert!(anonymous["spec"].get("username").is_none());
}

fn stored() -> Value {
    let mut object = csr(valid_spec());
    prepare_for_create(&mut object, &Context::gates_off());
    object["spec"]["username"] = json!("alice");
    object
}

fn at(now: i64) -> Context<'static> {
    Context {
        now,
        ..Context::gates_off()
    }
}

#[test]
fn approval_sets_only_conditions_with_their_times() {
    let old = stored();
    let mut new = old.clone();
    new["spec"]["username"] = json!("mallory");
    new["status"] = json!({
        "conditions": [{"type": "Approved", "status": "True", "reason": "AdminApproved"}],
        "certificate": b64(b"sneaked in"),
    });
    prepare_for_approval_update(&mut new, &old, &at(86_400));
    assert_eq!(new["spec"], old["spec"]);
    assert_eq!(
        new["status"],
        json!({"conditions": [{"type": "Approved", "status": "True", "reason": "AdminApproved",
            "lastUpdateTime": "1970-01-02T00:00:00Z", "lastTransitionTime": "1970-01-02T00:00:00Z"}]})
    );
    assert!(validate_approval_update(&new, &old).unwrap().is_empty());
    // The same through the object itself or through status is refused or ignored.
    assert_eq!(
        messages(&validate_update(&new, &old).unwrap()),
        ["status.conditions: Forbidden: updates may not add a condition of type \"Approved\""]
    );
    let mut through_status = new.clone();
    prepare_for_status_update(&mut through_status, &old, &at(86_400));
    assert_eq!(
        messages(&validate_status_update(&through_status, &old).unwrap()),
        ["status.conditions: Forbidden: updates may not add a condition of type \"Approved\""]
    );
    let mut through_object = new.clone();
    prepare_for_update(&mut through_object, &old, &at(0));
    assert_eq!(through_object["status"], old["status"]);

    // Denying what is approved, or dropping the approval, is refused.
    let mut denied = new.clone();
    denied["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "Denied", "status": "True"}));
    assert_eq!(
        messages(&validate_approval_update(&denied, &new).unwrap()),
        [
            "status.conditions[1].type: Invalid value: \"Denied\": Approved and Denied conditions are mutually exclusive"
        ]
    );
    let mut dropped = new.clone();
    dropped["status"] = json!({});
    assert_eq!(
        messages(&validate_approval_update(&dropped, &new).unwrap()),
        ["status.conditions: Forbidden: updates may not remove a condition of type \"Approved\""]
    );
}

fn certificate_pem() -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["a".to_owned()]).unwrap();
    params.self_signed(&key).unwrap().pem()
}

#[test]
fn the_certificate_is_set_once_through_status() {
    let mut approved = stored();
    approved["status"] = json!({"conditions": [{"type": "Approved", "status": "True",
        "lastUpdateTime": "1970-01-02T00:00:00Z", "lastTransitionTime": "1970-01-02T00:00:00Z"}]});
    let certificate = b64(certificate_pem().as_bytes());
    let mut issued = approved.clone();
    issued["status"]["certificate"] = json!(certificate);
    // The signer's status write cannot touch the approval: its copy of Approved is replaced by
    // the stored one.
    issued["status"]["conditions"][0]["reason"] = json!("changed");
    prepare_for_status_update(&mut issued, &approved, &at(0));
    assert_eq!(
        issued["status"]["conditions"],
        approved["status"]["conditions"]
    );
    assert!(
        validate_status_update(&issued, &approved)
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        messages(&validate_update(&issued, &approved).unwrap()),
        ["status.certificate: Forbidden: updates may not set certificate content"]
    );
    let mut replaced = issued.clone();
    replaced["status"]["certificate"] = json!(b64(certificate_pem().as_bytes()));
    assert_eq!(
        messages(&validate_status_update(&replaced, &issued).unwrap()),
        ["status.certificate: Forbidden: updates may not modify existing certificate content"]
    );
    let mut garbage = approved.clone();
    garbage["status"]["certificate"] = json!(b64(
        b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
    ));
    assert_eq!(
        messages(&validate_status_update(&garbage, &approved).unwrap()),
        ["status.certificate: Invalid value: \"<certificate data>\": x509: malformed certificate"]
    );
    // A Failed condition is the signer's to add, and stays.
    let mut failed = approved.clone();
    failed["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "Failed", "status": "True", "reason": "SignerValidationFailure"}));
    prepare_for_status_update(&mut failed, &approved, &at(5));
    assert!(
        validate_status_update(&failed, &approved)
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        messages(&validate_status_update(&approved, &failed).unwrap()),
        ["status.conditions: Forbidden: updates may not remove a condition of type \"Failed\""]
    );
}

#[test]
fn stored_problems_are_tolerated_on_update() {
    let mut old = stored();
    old["spec"]["signerName"] = json!(LEGACY_UNKNOWN_SIGNER);
    old["spec"]["usages"] = json!(["bogus", "bogus"]);
    let mut new = old.clone();
    new["metadata"]["labels"] = json!({"a": "b"});
    assert!(validate_update(&new, &old).unwrap().is_empty());
    assert_eq!(validate(&new).unwrap().0.len(), 4);
}

#[test]
fn signer_names_follow_upstream() {
    let path = genplane_apimachinery::validation::field::Path::new("s");
    assert!(validate_signer_name(&path, "example.com/a.b-c").is_empty());
    assert_eq!(
        messages(&validate_signer_name(&path, "a/b/c")),
        [
            "s: Invalid value: \"a/b/c\": must be a fully qualified domain and path of the form 'example.com/signer-name'"
        ]
    );
    let long = format!("example.com/{}", "a".repeat(600));
    assert!(
        messages(&validate_signer_name(&path, &long))
            .last()
            .unwrap()
            .ends_with("Too long: may not be more than 571 bytes")
    );
    assert!(is_kubernetes_signer("kubernetes.io/x"));
    assert!(is_kubernetes_signer("a.kubernetes.io/x"));
    assert!(!is_kubernetes_signer("example.com/x"));
    assert_eq!(
        signer_authorization_names("example.com/my-signer"),
        ["example.com/my-signer", "example.com/*"]
    );
}

#[test]
fn table_rows_as_kubectl_shows_them() {
    let mut object = stored();
    object["metadata"]["creationTimestamp"] = json!("1970-01-01T00:00:00Z");
    object["spec"]["expirationSeconds"] = json!(86_400);
    let names: Vec<&str> = COLUMNS.iter().map(|c| c.name).collect();
    assert_eq!(
        names,
        [
            "Name",
            "Age",
            "SignerName",
            "Requestor",
            "RequestedDuration",
            "Condition"
        ]
    );
    assert_eq!(
        row(&object, 120),
        vec![
            json!("req"),
            json!("2m"),
            json!(KUBE_APISERVER_CLIENT_SIGNER),
            json!("alice"),
            json!("24h"),
            json!("Pending")
        ]
    );
    object["status"] = json!({"conditions": [{"type": "Approved", "status": "True"}, {"type": "Failed", "status": "True"}], "certificate": "eA=="});
    assert_eq!(condition_summary(&object), "Approved,Failed,Issued");
    object["status"]["conditions"][0]["type"] = json!("Denied");
    assert_eq!(row(&object, 0)[5], "Denied,Failed,Issued");
    assert_eq!(
        field_values(&object).get("spec.signerName").unwrap(),
        KUBE_APISERVER_CLIENT_SIGNER
    );
}
