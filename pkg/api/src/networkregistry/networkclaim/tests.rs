use super::*;

fn messages(errors: &ErrorList) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

fn claim(records: Value) -> Value {
    json!({"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": "cni"},
           "spec": {"addressSpace": records}})
}

fn record(prefix: &str) -> Value {
    json!({"reference": {"group": "", "resource": "pods"}, "prefix": prefix})
}

fn errors_of(records: Value) -> Vec<String> {
    messages(&validate(&claim(records)).unwrap())
}

#[test]
fn ipv4_and_ipv6_records_nested_in_no_one_claim_are_accepted() {
    assert_eq!(
        errors_of(json!([
            record("10.244.0.0/16"),
            record("fd00:10:244::/56"),
            {"reference": {"group": "networking.k8s.io", "resource": "ipaddresses"},
             "prefix": "192.168.0.0/24", "description": "load balancers"},
        ])),
        Vec::<String>::new()
    );
}

#[test]
fn prefixes_are_refused_with_upstreams_reasons() {
    assert_eq!(
        errors_of(json!([
            record("10.244.0.1/16"),
            record("2001:DB8:0:0::/64")
        ])),
        [
            "spec.addressSpace[0].prefix: Invalid value: \"10.244.0.1/16\": must not have bits set beyond the prefix length",
            "spec.addressSpace[1].prefix: Invalid value: \"2001:DB8:0:0::/64\": must be in canonical form (\"2001:db8::/64\")",
        ]
    );
    assert_eq!(
        errors_of(json!([record("010.0.0.0/8")])),
        [
            "spec.addressSpace[0].prefix: Invalid value: \"010.0.0.0/8\": must not have leading 0s in IP or prefix length"
        ]
    );
    assert_eq!(
        errors_of(json!([record("::ffff:10.0.0.0/104"), record("10.0.0.0/8")])),
        [
            "spec.addressSpace[0].prefix: Invalid value: \"::ffff:10.0.0.0/104\": must not have an IPv4-mapped IPv6 address"
        ]
    );
    assert_eq!(
        errors_of(json!([record("10.0.0.0")])),
        [
            "spec.addressSpace[0].prefix: Invalid value: \"10.0.0.0\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"
        ]
    );
}

#[test]
fn duplicates_overlaps_and_too_many_records_are_refused() {
    assert_eq!(
        errors_of(json!([record("10.0.0.0/8"), record("10.0.0.0/8")])),
        ["spec.addressSpace[1].prefix: Duplicate value: \"10.0.0.0/8\""]
    );
    assert_eq!(
        errors_of(json!([record("10.0.0.0/8"), record("10.1.0.0/16")])),
        [
            "spec.addressSpace[1].prefix: Invalid value: \"10.1.0.0/16\": overlaps 10.0.0.0/8 of spec.addressSpace[0]: a claim holds each address once"
        ]
    );
    let many: Vec<Value> = (0..=MAX_RECORDS)
        .map(|i| record(&format!("10.{i}.0.0/16")))
        .collect();
    assert_eq!(
        errors_of(Value::Array(many.clone())),
        ["spec.addressSpace: Too many: 65: must have at most 64 items"]
    );
    assert!(errors_of(Value::Array(many[..MAX_RECORDS].to_vec())).is_empty());
    assert_eq!(
        errors_of(json!([])),
        ["spec.addressSpace: Required value: at least one address record"]
    );
}

#[test]
fn references_and_descriptions_are_checked() {
    let long = "x".repeat(MAX_DESCRIPTION + 1);
    let errors = errors_of(json!([
        {"reference": {"group": "Not_A_Group", "resource": ""}, "prefix": "10.0.0.0/8",
         "description": long},
    ]));
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(
        errors[0]
            .starts_with("spec.addressSpace[0].reference.group: Invalid value: \"Not_A_Group\"")
    );
    assert_eq!(
        errors[1],
        "spec.addressSpace[0].reference.resource: Required value"
    );
    assert!(
        errors[2]
            .starts_with("spec.addressSpace[0].description: Too long: may not be more than 255"),
        "{errors:?}"
    );
    let exactly = "é".repeat(MAX_DESCRIPTION);
    assert!(
        errors_of(
            json!([{"reference": {"resource": "services"}, "prefix": "10.0.0.0/8",
                          "description": exactly}])
        )
        .is_empty()
    );
    let wrong_type = decode(&claim(json!([{"prefix": 10}]))).unwrap_err();
    assert_eq!(wrong_type.code, 400, "{wrong_type}");
}

#[test]
fn the_status_is_checked_and_kept_apart_from_the_spec() {
    let mut stored = claim(json!([record("10.0.0.0/8")]));
    stored["metadata"]["generation"] = json!(1);
    stored["status"] = json!({"addressSpace": [{"prefix": "10.0.0.0/8", "status": "Allocated"}]});
    let mut written = stored.clone();
    written["status"]["addressSpace"][0]["status"] = json!("Maybe");
    written["status"]["addressSpace"][0]["prefix"] = json!("10.0.0.1/8");
    assert_eq!(
        messages(&validate_status_update(&written, &stored).unwrap()),
        [
            "status.addressSpace[0].prefix: Invalid value: \"10.0.0.1/8\": must not have bits set beyond the prefix length",
            "status.addressSpace[0].status: Unsupported value: \"Maybe\": supported values: \"Allocated\", \"Unavailable\"",
        ]
    );
    // A spec write keeps the stored status and bumps the generation.
    let mut spec_write = stored.clone();
    spec_write["spec"]["addressSpace"] = json!([record("11.0.0.0/8")]);
    spec_write["status"] = json!({});
    util::prepare_spec_update(&mut spec_write, &stored, &resource::Context::gates_off());
    assert_eq!(spec_write["status"], stored["status"]);
    assert_eq!(spec_write["metadata"]["generation"], 2);
}

#[test]
fn the_table_shows_prefixes_and_allocation() {
    let mut object = claim(json!([record("10.0.0.0/8"), record("fd00::/8")]));
    object["status"] = json!({
        "addressSpace": [{"prefix": "10.0.0.0/8", "status": "Allocated"},
                         {"prefix": "fd00::/8", "status": "Unavailable"}],
        "conditions": [{"type": "Ready", "status": "False"}, {"type": "Conflict", "status": "True"}],
    });
    let cells = row(&object, 0);
    assert_eq!(cells[1], "10.0.0.0/8,fd00::/8");
    assert_eq!(cells[2], "1/2");
    assert_eq!(cells[4], "False");
    assert_eq!(cells[5], "True");
}

#[test]
fn fuzzed_claims_never_panic() {
    let seeds: Vec<Vec<u8>> = [
        claim(json!([record("10.0.0.0/8"), record("fd00:10:96::/112")])).to_string(),
        claim(
            json!([{"reference": {"group": "x.io", "resource": "r"}, "prefix": "::/0",
                      "description": "d"}]),
        )
        .to_string(),
        "10.0.0.1/8".to_owned(),
        "2001:DB8:0:0::/64".to_owned(),
        "010.001.0.0/016".to_owned(),
        "::ffff:1.2.3.4/120".to_owned(),
    ]
    .map(String::into_bytes)
    .to_vec();
    genplane_apimachinery::fuzzing::drive(&seeds, 20_000, exercise);
}
