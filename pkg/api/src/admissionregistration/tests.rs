use serde_json::{Value, json};

use super::{
    mutatingwebhookconfiguration as mutating, validatingwebhookconfiguration as validating,
};

fn summary(errors: &genplane_apimachinery::validation::field::ErrorList) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

fn hook(extra: Value) -> Value {
    let mut hook = json!({
        "name": "deny.example.com",
        "clientConfig": {"url": "https://127.0.0.1:8443/validate", "caBundle": "AAAA"},
        "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    });
    for (k, v) in extra.as_object().unwrap() {
        hook[k] = v.clone();
    }
    hook
}

fn configuration(kind: &str, hooks: Vec<Value>) -> Value {
    json!({"apiVersion": super::API_VERSION, "kind": kind, "metadata": {"name": "policy"}, "webhooks": hooks})
}

fn errors_of(hook_fields: Value) -> Vec<String> {
    let object = configuration(validating::KIND, vec![hook(hook_fields)]);
    summary(&validating::validate(&object).unwrap())
}

#[test]
fn defaulting_is_upstreams() {
    let mut object = configuration(mutating::KIND, vec![hook(json!({}))]);
    mutating::default(&mut object);
    let hook = &object["webhooks"][0];
    assert_eq!(hook["failurePolicy"], "Fail");
    assert_eq!(hook["matchPolicy"], "Equivalent");
    assert_eq!(hook["namespaceSelector"], json!({}));
    assert_eq!(hook["objectSelector"], json!({}));
    assert_eq!(hook["timeoutSeconds"], 10);
    assert_eq!(hook["reinvocationPolicy"], "Never");
    assert_eq!(hook["rules"][0]["scope"], "*");
    assert!(hook.get("sideEffects").is_some());

    let mut object = configuration(validating::KIND, vec![hook_without_side_effects()]);
    validating::default(&mut object);
    let hook = &object["webhooks"][0];
    assert!(hook.get("reinvocationPolicy").is_none());
    assert!(hook.get("sideEffects").is_none(), "v1 has no default");
    // The decoded (stored) form keeps the empty selectors.
    let decoded = validating::decode(&object).unwrap().object;
    assert_eq!(decoded["webhooks"][0]["objectSelector"], json!({}));
}

fn hook_without_side_effects() -> Value {
    let mut h = hook(json!({}));
    h.as_object_mut().unwrap().remove("sideEffects");
    h
}

#[test]
fn a_valid_configuration_has_no_errors() {
    let mut object = configuration(validating::KIND, vec![hook(json!({}))]);
    validating::default(&mut object);
    assert_eq!(
        summary(&validating::validate(&object).unwrap()),
        Vec::<String>::new()
    );
}

#[test]
fn webhook_rules_and_messages() {
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        (
            "short name",
            json!({"name": "deny.example"}),
            vec![
                "webhooks[0].name: Invalid value: \"deny.example\": should be a domain with at least three segments separated by dots",
            ],
        ),
        (
            "no name",
            json!({"name": ""}),
            vec!["webhooks[0].name: Required value"],
        ),
        (
            "no side effects",
            json!({"sideEffects": null}),
            vec!["webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun"],
        ),
        (
            "some side effects",
            json!({"sideEffects": "Some"}),
            vec![
                "webhooks[0].sideEffects: Unsupported value: \"Some\": supported values: \"None\", \"NoneOnDryRun\"",
            ],
        ),
        (
            "bad failure policy",
            json!({"failurePolicy": "Maybe"}),
            vec![
                "webhooks[0].failurePolicy: Unsupported value: \"Maybe\": supported values: \"Fail\", \"Ignore\"",
            ],
        ),
        (
            "timeout",
            json!({"timeoutSeconds": 31}),
            vec![
                "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds",
            ],
        ),
        (
            "no review version",
            json!({"admissionReviewVersions": []}),
            vec![
                "webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1",
            ],
        ),
        (
            "unknown review version",
            json!({"admissionReviewVersions": ["v2"]}),
            vec![
                "webhooks[0].admissionReviewVersions: Invalid value: [\"v2\"]: must include at least one of v1, v1beta1",
            ],
        ),
        (
            "duplicate review version",
            json!({"admissionReviewVersions": ["v1", "v1"]}),
            vec![
                "webhooks[0].admissionReviewVersions[1]: Invalid value: \"v1\": duplicate version",
            ],
        ),
        (
            "http",
            json!({"clientConfig": {"url": "http://hook.example.com/x"}}),
            vec![
                "webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]",
            ],
        ),
        (
            "user, query and fragment",
            json!({"clientConfig": {"url": "https://me:secret@hook.example.com/x?a=b#top"}}),
            vec![
                "webhooks[0].clientConfig.url: Invalid value: \"me:xxxxx\": user information is not permitted in the URL",
                "webhooks[0].clientConfig.url: Invalid value: \"top\": fragments are not permitted in the URL",
                "webhooks[0].clientConfig.url: Invalid value: \"a=b\": query parameters are not permitted in the URL",
            ],
        ),
        (
            "neither url nor service",
            json!({"clientConfig": {}}),
            vec![
                "webhooks[0].clientConfig: Required value: exactly one of url or service is required",
            ],
        ),
        (
            "service",
            json!({"clientConfig": {"service": {"namespace": "default", "name": "hook"}}}),
            vec![],
        ),
        (
            "bad service",
            json!({"clientConfig": {"service": {"namespace": "", "name": "hook", "port": 0, "path": "/Validate//x"}}}),
            vec![
                "webhooks[0].clientConfig.service.namespace: Required value",
                "webhooks[0].clientConfig.service.port: Invalid value: 0: port is not valid: must be between 1 and 65535, inclusive",
                "webhooks[0].clientConfig.service.path: Invalid value: \"/Validate//x\": segment[0]: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                "webhooks[0].clientConfig.service.path: Invalid value: \"/Validate//x\": segment[1] may not be empty",
            ],
        ),
        (
            "rules",
            json!({"rules": [{"operations": ["*", "CREATE"], "apiGroups": [], "apiVersions": [""], "resources": ["*", "configmaps"], "scope": "Everywhere"}]}),
            vec![
                "webhooks[0].rules[0].operations: Invalid value: [\"*\",\"CREATE\"]: if '*' is present, must not specify other operations",
                "webhooks[0].rules[0].apiGroups: Required value",
                "webhooks[0].rules[0].apiVersions[0]: Required value",
                "webhooks[0].rules[0].resources: Invalid value: [\"*\",\"configmaps\"]: if '*' is present, must not specify other resources without subresources",
                "webhooks[0].rules[0].scope: Unsupported value: \"Everywhere\": supported values: \"*\", \"Cluster\", \"Namespaced\"",
            ],
        ),
        (
            "overlapping subresources",
            json!({"rules": [{"operations": ["PATCH"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["configmaps/*", "configmaps/status"]}]}),
            vec![
                "webhooks[0].rules[0].operations[0]: Unsupported value: \"PATCH\": supported values: \"*\", \"CONNECT\", \"CREATE\", \"DELETE\", \"UPDATE\"",
                "webhooks[0].rules[0].resources[1]: Invalid value: \"configmaps/status\": if 'configmaps/*' is present, must not specify configmaps/status",
            ],
        ),
        (
            "selectors",
            json!({"namespaceSelector": {"matchExpressions": [{"key": "env", "operator": "In"}]}}),
            vec![
                "webhooks[0].namespaceSelector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
            ],
        ),
        (
            "match conditions",
            json!({"matchConditions": [{"name": "a", "expression": "true"}, {"name": "a", "expression": ""}]}),
            vec![
                "webhooks[0].matchConditions[1].name: Duplicate value: \"a\"",
                "webhooks[0].matchConditions[1].expression: Required value",
            ],
        ),
    ];
    for (name, fields, want) in cases {
        assert_eq!(errors_of(fields), want, "{name}");
    }
}

#[test]
fn names_are_unique_and_mutating_policies_checked() {
    let object = configuration(
        mutating::KIND,
        vec![
            hook(json!({"reinvocationPolicy": "Always"})),
            hook(json!({})),
        ],
    );
    assert_eq!(
        summary(&mutating::validate(&object).unwrap()),
        [
            "webhooks[0].reinvocationPolicy: Unsupported value: \"Always\": supported values: \"IfNeeded\", \"Never\"",
            "webhooks[1].name: Duplicate value: \"deny.example.com\"",
        ]
    );
    let err = validating::validate(&configuration(
        validating::KIND,
        vec![hook(json!({"timeoutSeconds": "10"}))],
    ))
    .unwrap_err();
    assert_eq!(err.code, 400);
    assert!(
        err.message
            .contains("webhooks[0].timeoutSeconds of type int32"),
        "{}",
        err.message
    );
}

#[test]
fn updates_keep_what_was_stored_before_a_rule() {
    let old = configuration(
        validating::KIND,
        vec![hook(json!({"sideEffects": "Unknown"}))],
    );
    let new = configuration(validating::KIND, vec![hook(json!({"sideEffects": "Some"}))]);
    assert!(validating::validate_update(&new, &old).unwrap().is_empty());
    let clean = configuration(validating::KIND, vec![hook(json!({}))]);
    assert_eq!(
        validating::validate_update(&new, &clean)
            .unwrap()
            .iter()
            .count(),
        1
    );

    let mut created = clean.clone();
    super::prepare_for_create(&mut created, &crate::resource::Context::gates_off());
    assert_eq!(created["metadata"]["generation"], 1);
    let mut same = created.clone();
    super::prepare_for_update(&mut same, &created, &crate::resource::Context::gates_off());
    assert_eq!(same["metadata"]["generation"], 1);
    let mut changed = configuration(validating::KIND, vec![hook(json!({"timeoutSeconds": 5}))]);
    super::prepare_for_update(
        &mut changed,
        &created,
        &crate::resource::Context::gates_off(),
    );
    assert_eq!(changed["metadata"]["generation"], 2);
}

#[test]
fn table_and_protobuf() {
    let object = json!({"metadata": {"name": "p", "creationTimestamp": "1970-01-01T00:00:00Z"}, "webhooks": [hook(json!({})), hook(json!({}))]});
    assert_eq!(
        super::row(&object, 60),
        vec![json!("p"), json!(2), json!("60s")]
    );
    let names: Vec<&str> = super::COLUMNS.iter().map(|c| c.name).collect();
    assert_eq!(names, ["Name", "Webhooks", "Age"]);

    // The embedded Rule is a message of its own in protobuf, flat in JSON.
    let mut object = configuration(validating::KIND, vec![hook(json!({}))]);
    validating::default(&mut object);
    let object = validating::decode(&object).unwrap().object;
    let bytes =
        genplane_apimachinery::codec::protobuf::encode(&object, &validating::SCHEMA).unwrap();
    assert_eq!(
        genplane_apimachinery::codec::protobuf::decode(&bytes, &validating::SCHEMA).unwrap(),
        object
    );
    let rule = k8s_openapi_rule(&bytes);
    assert_eq!(rule, "configmaps");
}

/// The first resource of the first rule, read with a schema where the embedded `Rule` is an
/// ordinary message field `rule` (as generated protobuf code sees it).
fn k8s_openapi_rule(bytes: &[u8]) -> String {
    use genplane_apimachinery::codec::schema::{Field, Struct, Type};
    use genplane_apimachinery::meta::schemas::OBJECT_META;
    static NESTED_RULE: Struct = Struct {
        name: "RuleWithOperations",
        fields: &[
            Field::new("operations", 1, Type::List(&Type::String)),
            Field::new("rule", 2, Type::Struct(&super::RULE)),
        ],
    };
    static NESTED_HOOK: Struct = Struct {
        name: "ValidatingWebhook",
        fields: &[Field::new(
            "rules",
            3,
            Type::List(&Type::Struct(&NESTED_RULE)),
        )],
    };
    static NESTED: Struct = Struct {
        name: "ValidatingWebhookConfiguration",
        fields: &[
            Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
            Field::new("webhooks", 2, Type::List(&Type::Struct(&NESTED_HOOK))),
        ],
    };
    let object = genplane_apimachinery::codec::protobuf::decode(bytes, &NESTED).unwrap();
    object["webhooks"][0]["rules"][0]["rule"]["resources"][0]
        .as_str()
        .unwrap()
        .to_owned()
}

mod policies {
    use serde_json::{Value, json};

    use super::summary;
    use crate::admissionregistration::{
        validatingadmissionpolicy as policy, validatingadmissionpolicybinding as binding,
    };

    fn a_policy(spec: Value) -> Value {
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": policy::KIND,
            "metadata": {"name": "replicas.example.com"}, "spec": spec})
    }

    fn a_binding(spec: Value) -> Value {
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": binding::KIND,
            "metadata": {"name": "replicas-binding"}, "spec": spec})
    }

    fn rules() -> Value {
        json!({"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}]})
    }

    #[test]
    fn policies_are_defaulted_and_validated_as_upstreams() {
        let mut object = a_policy(json!({
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": rules(),
            "validations": [{"expression": "object.data.size() < 3", "reason": "Forbidden"}],
        }));
        policy::default(&mut object);
        assert_eq!(object["spec"]["failurePolicy"], "Fail");
        let constraints = &object["spec"]["matchConstraints"];
        assert_eq!(constraints["matchPolicy"], "Equivalent");
        assert_eq!(constraints["namespaceSelector"], json!({}));
        assert_eq!(constraints["resourceRules"][0]["scope"], "*");
        let decoded = policy::decode(&object).unwrap().object;
        assert_eq!(
            summary(&policy::validate(&decoded).unwrap()),
            Vec::<String>::new()
        );
        assert_eq!(
            policy::row(&decoded, 0)[1..3],
            [json!(1), json!("v1/ConfigMap")]
        );

        let bad = a_policy(json!({
            "paramKind": {"kind": "ConfigMap"},
            "matchConstraints": {"resourceRules": []},
            "validations": [
                {"expression": "a &&\nb"},
                {"expression": " ", "message": "two\nlines", "reason": "Teapot"},
            ],
            "auditAnnotations": [{"key": "k", "valueExpression": "'v'"}, {"key": "k", "valueExpression": ""}],
            "variables": [{"name": "1x", "expression": "1"}, {"name": "ok", "expression": ""}],
            "failurePolicy": "Sometimes",
        }));
        assert_eq!(
            summary(&policy::validate(&bad).unwrap()),
            [
                "spec.paramKind.apiVersion: Required value",
                "spec.matchConstraints.resourceRules: Required value",
                "spec.validations[0].message: Required value: message must be specified if expression contains line breaks",
                "spec.validations[1].expression: Required value: expression is not specified",
                "spec.validations[1].message: Invalid value: \"two\\nlines\": message must not contain line breaks",
                "spec.validations[1].reason: Unsupported value: \"Teapot\": supported values: \"Unauthorized\", \"Forbidden\", \"Invalid\", \"RequestEntityTooLarge\"",
                "spec.auditAnnotations[1].key: Duplicate value: \"k\"",
                "spec.auditAnnotations[1].valueExpression: Required value: valueExpression is not specified",
                "spec.variables[0].name: Invalid value: \"1x\": name is not a valid CEL identifier",
                "spec.variables[1].expression: Required value",
                "spec.failurePolicy: Unsupported value: \"Sometimes\": supported values: \"Fail\", \"Ignore\"",
            ]
        );
        let empty = a_policy(json!({"matchConstraints": rules()}));
        assert!(
            summary(&policy::validate(&empty).unwrap())
                .iter()
                .any(|e| e
                    .contains("validations or auditAnnotations must contain at least one item"))
        );
    }

    #[test]
    fn bindings_are_validated_and_shown_as_upstreams() {
        let good = a_binding(json!({
            "policyName": "replicas.example.com",
            "paramRef": {"name": "limits", "namespace": "default", "parameterNotFoundAction": "Deny"},
            "validationActions": ["Deny", "Audit"],
        }));
        assert_eq!(
            summary(&binding::validate(&good).unwrap()),
            Vec::<String>::new()
        );
        assert_eq!(
            binding::row(&good, 0)[1..3],
            [json!("replicas.example.com"), json!("default/limits")]
        );
        let selected = a_binding(
            json!({"policyName": "p", "paramRef": {"selector": {"matchLabels": {"a": "b"}}, "parameterNotFoundAction": "Allow"}, "validationActions": ["Warn"]}),
        );
        assert_eq!(binding::row(&selected, 0)[2], json!("a=b"));
        assert_eq!(binding::row(&a_binding(json!({})), 0)[2], json!("<unset>"));
        let bad = a_binding(json!({
            "paramRef": {"name": "x", "selector": {}},
            "matchResources": {"matchPolicy": "Loose"},
            "validationActions": ["Deny", "Warn", "Deny", "Shout"],
        }));
        assert_eq!(
            summary(&binding::validate(&bad).unwrap()),
            [
                "spec.policyName: Required value",
                "spec.paramRef: Forbidden: name and selector are mutually exclusive",
                "spec.paramRef.parameterNotFoundAction: Required value",
                "spec.matchResources.matchPolicy: Unsupported value: \"Loose\": supported values: \"Equivalent\", \"Exact\"",
                "spec.validationActions[2]: Duplicate value: \"Deny\"",
                "spec.validationActions[3]: Unsupported value: \"Shout\": supported values: \"Audit\", \"Deny\", \"Warn\"",
                "spec.validationActions: Invalid value: [\"Deny\",\"Warn\",\"Deny\",\"Shout\"]: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
            ]
        );
    }
}

mod mutating_admission_policies {
    use serde_json::{Value, json};

    use super::summary;
    use crate::admissionregistration::mutatingadmissionpolicy as policy;
    use crate::admissionregistration::mutatingadmissionpolicybinding as binding;

    fn object(kind: &str, spec: Value) -> Value {
        json!({"apiVersion": policy::API_VERSION, "kind": kind,
            "metadata": {"name": "p", "creationTimestamp": "1970-01-01T00:00:00Z"}, "spec": spec})
    }

    #[test]
    fn policies_are_defaulted_validated_shown_and_encoded_as_upstreams() {
        let mut good = object(
            policy::KIND,
            json!({
                "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                    "operations": ["CREATE"], "resources": ["configmaps"]}]},
                "variables": [{"name": "v", "expression": "1"}],
                "mutations": [
                    {"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": "Object{}"}},
                    {"patchType": "JSONPatch", "jsonPatch": {"expression": "[]"}},
                ],
                "reinvocationPolicy": "IfNeeded",
            }),
        );
        policy::default(&mut good);
        assert_eq!(good["spec"]["failurePolicy"], "Fail");
        assert_eq!(
            good["spec"]["matchConstraints"]["matchPolicy"],
            "Equivalent"
        );
        assert_eq!(
            good["spec"]["matchConstraints"]["resourceRules"][0]["scope"],
            "*"
        );
        let decoded = policy::decode(&good).unwrap().object;
        assert_eq!(
            summary(&policy::validate(&decoded).unwrap()),
            Vec::<String>::new()
        );
        assert_eq!(
            policy::row(&decoded, 60),
            [json!("p"), json!(2), json!("v1/ConfigMap"), json!("60s")]
        );
        let mut plain = decoded.clone();
        plain["metadata"] = json!({"name": "p"});
        let bytes =
            genplane_apimachinery::codec::protobuf::encode(&plain, &policy::SCHEMA).unwrap();
        assert_eq!(
            genplane_apimachinery::codec::protobuf::decode(&bytes, &policy::SCHEMA).unwrap(),
            plain
        );

        let bad = object(
            policy::KIND,
            json!({
                "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                    "operations": ["DELETE"], "resources": ["configmaps"]}]},
                "mutations": [
                    {"patchType": "ApplyConfiguration", "jsonPatch": {"expression": "[]"}},
                    {"patchType": "JSONPatch", "jsonPatch": {"expression": " "}},
                    {"patchType": "Strategic"},
                    {},
                ],
                "failurePolicy": "Sometimes",
                "reinvocationPolicy": "Always",
            }),
        );
        assert_eq!(
            summary(&policy::validate(&bad).unwrap()),
            [
                "spec.matchConstraints.resourceRules[0].operations[0]: Unsupported value: \"DELETE\": supported values: \"*\", \"CONNECT\", \"CREATE\", \"UPDATE\"",
                "spec.mutations[0].applyConfiguration: Required value: applyConfiguration field is required when patchType is ApplyConfiguration",
                "spec.mutations[0].jsonPatch: Forbidden: must not be set when patchType is ApplyConfiguration",
                "spec.mutations[1].jsonPatch.expression: Required value: expression is not specified",
                "spec.mutations[2].patchType: Unsupported value: \"Strategic\": supported values: \"ApplyConfiguration\", \"JSONPatch\"",
                "spec.mutations[3].patchType: Required value",
                "spec.failurePolicy: Unsupported value: \"Sometimes\": supported values: \"Fail\", \"Ignore\"",
                "spec.reinvocationPolicy: Unsupported value: \"Always\": supported values: \"IfNeeded\", \"Never\"",
            ]
        );
        let empty = object(policy::KIND, json!({}));
        assert_eq!(
            summary(&policy::validate(&empty).unwrap()),
            [
                "spec.matchConstraints: Required value",
                "spec.mutations: Required value: mutations must contain at least one item",
                "spec.reinvocationPolicy: Required value",
            ]
        );
    }

    #[test]
    fn bindings_are_validated_and_shown_as_upstreams() {
        let good = object(
            binding::KIND,
            json!({"policyName": "p", "paramRef": {"name": "limits", "namespace": "default",
                "parameterNotFoundAction": "Deny"},
                "matchResources": {"namespaceSelector": {"matchLabels": {"env": "prod"}}}}),
        );
        assert_eq!(
            summary(&binding::validate(&good).unwrap()),
            Vec::<String>::new()
        );
        assert_eq!(
            binding::row(&good, 60),
            [
                json!("p"),
                json!("p"),
                json!("default/limits"),
                json!("60s")
            ]
        );
        let bad = object(
            binding::KIND,
            json!({"paramRef": {"name": "a", "selector": {}},
                "matchResources": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                    "operations": ["DELETE"], "resources": ["configmaps"]}]}}),
        );
        assert_eq!(
            summary(&binding::validate(&bad).unwrap()),
            [
                "spec.policyName: Required value",
                "spec.paramRef: Forbidden: name and selector are mutually exclusive",
                "spec.paramRef.parameterNotFoundAction: Required value",
                "spec.matchResources.resourceRules[0].operations[0]: Unsupported value: \"DELETE\": supported values: \"*\", \"CONNECT\", \"CREATE\", \"UPDATE\"",
            ]
        );
    }
}
