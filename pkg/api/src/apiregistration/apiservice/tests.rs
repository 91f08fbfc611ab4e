use super::*;
use serde_json::json;

fn summary(errors: &ErrorList) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

fn api_service(name: &str, spec: Value) -> Value {
    json!({"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name}, "spec": spec})
}

fn remote(extra: Value) -> Value {
    let mut spec = json!({
        "group": "wardle.example.com", "version": "v1alpha1",
        "groupPriorityMinimum": 2000, "versionPriority": 200,
        "service": {"namespace": "sample-system", "name": "sample", "port": 443},
    });
    for (key, value) in extra.as_object().unwrap() {
        spec[key] = value.clone();
    }
    api_service("v1alpha1.wardle.example.com", spec)
}

#[test]
fn create_rules_with_upstream_messages() {
    let bundle = base64::engine::general_purpose::STANDARD.encode("0123456789");
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        ("remote", remote(json!({})), vec![]),
        (
            "local core",
            api_service(
                "v1.",
                json!({"version": "v1", "groupPriorityMinimum": 18000, "versionPriority": 1}),
            ),
            vec![],
        ),
        (
            "wrong name",
            api_service(
                "v1.other.example.com",
                json!({"group": "wardle.example.com", "version": "v1", "groupPriorityMinimum": 1, "versionPriority": 1}),
            ),
            vec![
                "metadata.name: Invalid value: \"v1.other.example.com\": must be `spec.version+\".\"+spec.group`: \"v1.wardle.example.com\"",
            ],
        ),
        (
            "empty group at v2",
            api_service(
                "v2.",
                json!({"version": "v2", "groupPriorityMinimum": 1, "versionPriority": 1}),
            ),
            vec![
                "spec.group: Required value: only v1 may have an empty group and it better be legacy kube",
            ],
        ),
        (
            "bad group and version",
            api_service(
                "V1.Wardle",
                json!({"group": "Wardle", "version": "V1", "groupPriorityMinimum": 1, "versionPriority": 1}),
            ),
            vec![
                "spec.group: Invalid value: \"Wardle\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                "spec.version: Invalid value: \"V1\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
            ],
        ),
        (
            "priorities out of range",
            remote(json!({"groupPriorityMinimum": 20001, "versionPriority": 0})),
            vec![
                "spec.groupPriorityMinimum: Invalid value: 20001: must be positive and less than 20000",
                "spec.versionPriority: Invalid value: 0: must be positive and less than 1000",
            ],
        ),
        (
            "priorities missing",
            api_service(
                "v1.wardle.example.com",
                json!({"group": "wardle.example.com", "version": "v1"}),
            ),
            vec![
                "spec.groupPriorityMinimum: Invalid value: 0: must be positive and less than 20000",
                "spec.versionPriority: Invalid value: 0: must be positive and less than 1000",
            ],
        ),
        (
            "local with a CA bundle and no verification",
            api_service(
                "v1.wardle.example.com",
                json!({"group": "wardle.example.com", "version": "v1", "groupPriorityMinimum": 1, "versionPriority": 1, "caBundle": bundle, "insecureSkipTLSVerify": true}),
            ),
            vec![
                "spec.caBundle: Invalid value: \"10 bytes\": local APIServices may not have a caBundle",
                "spec.insecureSkipTLSVerify: Invalid value: true: local APIServices may not have insecureSkipTLSVerify",
            ],
        ),
        (
            "service without its names",
            remote(json!({"service": {"port": 443}})),
            vec![
                "spec.service.namespace: Required value",
                "spec.service.name: Required value",
            ],
        ),
        (
            "both CA bundle and no verification",
            remote(json!({"caBundle": bundle, "insecureSkipTLSVerify": true})),
            vec![
                "spec.insecureSkipTLSVerify: Invalid value: true: may not be true if caBundle is present",
            ],
        ),
        (
            "no verification alone",
            remote(json!({"insecureSkipTLSVerify": true})),
            vec![],
        ),
        (
            "a name with a slash",
            api_service(
                "v1/x",
                json!({"group": "x", "version": "v1", "groupPriorityMinimum": 1, "versionPriority": 1}),
            ),
            vec!["metadata.name: Invalid value: \"v1/x\": may not contain '/'"],
        ),
    ];
    for (name, object, want) in cases {
        assert_eq!(summary(&validate(&object).unwrap()), want, "{name}");
    }
    let err = validate(&remote(json!({"versionPriority": "high"}))).unwrap_err();
    assert_eq!(err.code, 400, "{}", err.message);
    assert!(
        err.message.contains("APIService.spec.versionPriority"),
        "{}",
        err.message
    );
}

#[test]
fn defaults_and_strategies() {
    let mut object = remote(json!({"service": {"namespace": "s", "name": "n"}}));
    default(&mut object);
    assert_eq!(object["spec"]["service"]["port"], 443);
    let mut local = api_service(
        "v1.wardle.example.com",
        json!({"group": "wardle.example.com", "version": "v1"}),
    );
    default(&mut local);
    assert!(local["spec"].get("service").is_none());

    // On create the status is the server's: a Local APIService is available at once.
    local["metadata"]["creationTimestamp"] = json!("2026-12-06T10:00:00Z");
    local["status"] = json!({"conditions": [{"type": "Available", "status": "False"}]});
    prepare_for_create(&mut local, &Context::gates_off());
    assert_eq!(
        local["status"],
        json!({"conditions": [{"type": "Available", "status": "True", "lastTransitionTime": "2026-12-06T10:00:00Z", "reason": "Local", "message": "Local APIServices are always available"}]})
    );
    object["status"] = json!({"conditions": [{"type": "Available", "status": "True"}]});
    prepare_for_create(&mut object, &Context::gates_off());
    assert!(object.get("status").is_none());

    // An update keeps the stored status; a status write keeps the rest.
    let stored = local.clone();
    let mut update = local.clone();
    update["status"] = json!({});
    update["spec"]["versionPriority"] = json!(5);
    prepare_for_update(&mut update, &stored, &Context::gates_off());
    assert_eq!(update["status"], stored["status"]);
    assert_eq!(update["spec"]["versionPriority"], 5);
    let mut status = stored.clone();
    status["spec"]["group"] = json!("changed.example.com");
    status["metadata"]["labels"] = json!({"a": "b"});
    status["status"]["conditions"][0]["status"] = json!("False");
    prepare_for_status_update(&mut status, &stored, &Context::gates_off());
    assert_eq!(status["spec"], stored["spec"]);
    assert!(status["metadata"].get("labels").is_none());
    assert_eq!(status["status"]["conditions"][0]["status"], "False");

    let mut bad = stored.clone();
    bad["status"]["conditions"][0]["status"] = json!("Maybe");
    assert_eq!(
        summary(&validate_status_update(&bad, &stored).unwrap()),
        [
            "status.conditions[0].status: Unsupported value: \"Maybe\": supported values: \"True\", \"False\", \"Unknown\""
        ]
    );
}

#[test]
fn table_reads_as_upstream() {
    let names: Vec<&str> = COLUMNS.iter().map(|c| c.name).collect();
    assert_eq!(names, ["Name", "Service", "Available", "Age"]);
    let mut local = api_service("v1.", json!({"version": "v1"}));
    local["metadata"]["creationTimestamp"] = json!("1970-01-01T00:00:00Z");
    local["status"] = json!({"conditions": [local_available_condition("1970-01-01T00:00:00Z")]});
    assert_eq!(
        row(&local, 120),
        [json!("v1."), json!("Local"), json!("True"), json!("2m")]
    );
    let mut down = remote(json!({}));
    assert_eq!(row(&down, 0)[1], "sample-system/sample");
    assert_eq!(row(&down, 0)[2], "Unknown");
    down["status"] = json!({"conditions": [{"type": "Available", "status": "False", "reason": "MissingEndpoints"}]});
    assert_eq!(row(&down, 0)[2], "False (MissingEndpoints)");
    down["status"] = json!({"conditions": [{"type": "Available", "status": "False"}]});
    assert_eq!(row(&down, 0)[2], "False");
}
