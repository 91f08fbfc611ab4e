use serde_json::{Value, json};

use super::*;

/// A self-signed certificate for `cn`, a CA (basic constraints with the CA bit) when `ca`.
fn certificate(cn: &str, ca: bool) -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, cn);
    params.is_ca = if ca {
        rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained)
    } else {
        rcgen::IsCa::ExplicitNoCa
    };
    params.self_signed(&key).unwrap().pem()
}

fn bundle(name: &str, signer: &str, trust_bundle: &str) -> Value {
    let mut spec = json!({"trustBundle": trust_bundle});
    if !signer.is_empty() {
        spec["signerName"] = json!(signer);
    }
    json!({"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name}, "spec": spec})
}

fn messages(errors: &ErrorList) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

fn create_messages(object: &Value) -> Vec<String> {
    messages(&validate(object).unwrap())
}

#[test]
fn bundles_with_and_without_a_signer_are_accepted() {
    let ca = certificate("root", true);
    let two = format!("{ca}{}", certificate("other root", true));
    assert_eq!(
        create_messages(&bundle("example.com:foo:v1", "example.com/foo", &ca)),
        Vec::<String>::new()
    );
    assert_eq!(
        create_messages(&bundle("my-roots", "", &two)),
        Vec::<String>::new()
    );
    // Text around and between the blocks is ignored, as Go's PEM decoder ignores it.
    let commented = format!("# our roots\n{ca}\ntrailing words\n");
    assert_eq!(
        create_messages(&bundle("commented", "", &commented)),
        Vec::<String>::new()
    );
}

#[test]
fn names_follow_the_signer_name_with_upstreams_messages() {
    let ca = certificate("root", true);
    assert_eq!(
        create_messages(&bundle("other:foo:v1", "example.com/foo", &ca)),
        [
            "metadata.name: Invalid value: \"other:foo:v1\": ClusterTrustBundle for signerName example.com/foo must be named with prefix example.com:foo:"
        ]
    );
    assert_eq!(
        create_messages(&bundle(
            "example.com:foo:Bad_Suffix",
            "example.com/foo",
            &ca
        )),
        [
            "metadata.name: Invalid value: \"example.com:foo:Bad_Suffix\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        ]
    );
    assert_eq!(
        create_messages(&bundle("example.com:foo", "", &ca)),
        [
            "metadata.name: Invalid value: \"example.com:foo\": ClusterTrustBundle without signer name must not have \":\" in its name"
        ]
    );
    // generateName: a prefix after the signer's.
    let mut generated = bundle("", "example.com/foo", &ca);
    generated["metadata"] = json!({"generateName": "example.com:foo:gen-"});
    assert_eq!(create_messages(&generated), Vec::<String>::new());
    // The part after the signer's is checked as a prefix of its own, which may not be empty
    // (upstream's NameIsDNSSubdomain of "").
    generated["metadata"] = json!({"generateName": "example.com:foo:"});
    assert_eq!(create_messages(&generated).len(), 1);
    generated["metadata"] = json!({"generateName": "foo-"});
    assert_eq!(
        create_messages(&generated),
        [
            "metadata.generateName: Invalid value: \"foo-\": ClusterTrustBundle for signerName example.com/foo must be named with prefix example.com:foo:"
        ]
    );
    generated["metadata"] = json!({});
    assert_eq!(
        create_messages(&generated),
        ["metadata.name: Required value: name or generateName is required"]
    );
}

#[test]
fn signer_names_are_checked_as_a_csrs() {
    let ca = certificate("root", true);
    assert_eq!(
        create_messages(&bundle("example:foo:v1", "example/foo", &ca)),
        [
            "spec.signerName: Invalid value: \"example\": should be a domain with at least two segments separated by dots"
        ]
    );
    assert_eq!(
        create_messages(&bundle("a:b:c:v1", "a/b/c", &ca)),
        [
            "spec.signerName: Invalid value: \"a/b/c\": must be a fully qualified domain and path of the form 'example.com/signer-name'"
        ]
    );
}

#[test]
fn trust_bundles_hold_only_distinct_ca_certificates() {
    let ca = certificate("root", true);
    let invalid = |trust_bundle: &str| create_messages(&bundle("roots", "", trust_bundle));
    let at =
        |detail: &str| format!("spec.trustBundle: Invalid value: \"<value omitted>\": {detail}");
    assert_eq!(
        invalid(""),
        [at("at least one trust anchor must be provided")]
    );
    assert_eq!(
        invalid("no PEM here"),
        [at("at least one trust anchor must be provided")]
    );
    let request = "-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n";
    assert_eq!(
        invalid(&format!("{ca}{request}")),
        [at("entry 1 has bad block type: CERTIFICATE REQUEST")]
    );
    let with_headers = ca.replacen(
        "-----BEGIN CERTIFICATE-----\n",
        "-----BEGIN CERTIFICATE-----\nProc-Type: 4,ENCRYPTED\n\n",
        1,
    );
    assert_eq!(
        invalid(&with_headers),
        [at("entry 0 has PEM block headers")]
    );
    assert_eq!(
        invalid("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"),
        [at("entry 0 does not parse as X.509")]
    );
    assert_eq!(
        invalid(&certificate("leaf", false)),
        [at("entry 0 does not have the CA bit set")]
    );
    let other = certificate("other", true);
    assert_eq!(
        invalid(&format!("{ca}{other}{ca}{other}{ca}")),
        [
            at("duplicate trust anchor (indices [0 2 4])"),
            at("duplicate trust anchor (indices [1 3])")
        ]
    );
    // A malformed entry hides the duplicates.
    assert_eq!(
        invalid(&format!("{ca}{ca}{}", certificate("leaf", false))),
        [at("entry 2 does not have the CA bit set")]
    );
    let huge = format!("{ca}{}", " ".repeat(MAX_TRUST_BUNDLE_SIZE));
    assert_eq!(
        invalid(&huge),
        ["spec.trustBundle: Too long: may not be more than 1048576 bytes"]
    );
    // A missing trust bundle is an empty one.
    let mut missing = bundle("roots", "", "");
    missing["spec"] = json!({});
    assert_eq!(
        create_messages(&missing),
        [at("at least one trust anchor must be provided")]
    );
}

#[test]
fn updates_keep_the_signer_and_parse_only_a_changed_bundle() {
    let ca = certificate("root", true);
    let old = bundle("example.com:foo:v1", "example.com/foo", &ca);
    let mut new = old.clone();
    new["spec"]["signerName"] = json!("example.com/bar");
    assert_eq!(
        messages(&validate_update(&new, &old).unwrap()),
        [
            "metadata.name: Invalid value: \"example.com:foo:v1\": ClusterTrustBundle for signerName example.com/bar must be named with prefix example.com:bar:",
            "spec.signerName: Invalid value: \"example.com/bar\": field is immutable"
        ]
    );
    // A stored bundle that no longer validates is not parsed again when left as it is.
    let stored = bundle("roots", "", &certificate("leaf", false));
    let mut relabelled = stored.clone();
    relabelled["metadata"]["labels"] = json!({"team": "a"});
    assert_eq!(
        messages(&validate_update(&relabelled, &stored).unwrap()),
        Vec::<String>::new()
    );
    relabelled["spec"]["trustBundle"] = json!(format!("{}\n", certificate("leaf2", false)));
    assert_eq!(
        messages(&validate_update(&relabelled, &stored).unwrap()),
        [
            "spec.trustBundle: Invalid value: \"<value omitted>\": entry 0 does not have the CA bit set"
        ]
    );
    let mut rotated = old.clone();
    rotated["spec"]["trustBundle"] = json!(format!("{ca}{}", certificate("next", true)));
    assert_eq!(
        messages(&validate_update(&rotated, &old).unwrap()),
        Vec::<String>::new()
    );
}

#[test]
fn table_rows_and_field_selectors_as_upstreams() {
    let names: Vec<&str> = COLUMNS.iter().map(|c| c.name).collect();
    assert_eq!(names, ["Name", "SignerName"]);
    let with_signer = bundle("example.com:foo:v1", "example.com/foo", "");
    assert_eq!(
        row(&with_signer, 0),
        vec![json!("example.com:foo:v1"), json!("example.com/foo")]
    );
    assert_eq!(
        row(&bundle("roots", "", ""), 0),
        vec![json!("roots"), json!("<none>")]
    );
    assert_eq!(FIELD_SELECTORS, ["metadata.name", "spec.signerName"]);
    assert_eq!(
        field_values(&with_signer).get("spec.signerName").unwrap(),
        "example.com/foo"
    );
}

#[test]
fn the_wire_shape_has_upstreams_protobuf_numbers() {
    let numbers: Vec<(&str, u32)> = SPEC.fields.iter().map(|f| (f.name, f.number)).collect();
    assert_eq!(numbers, [("signerName", 1), ("trustBundle", 2)]);
}
