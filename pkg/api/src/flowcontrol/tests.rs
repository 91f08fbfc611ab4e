use serde_json::{Value, json};

use super::bootstrap;
use super::flowschema;
use super::prioritylevelconfiguration as plc;
use genplane_apimachinery::validation::field::ErrorList;

fn summary(errors: &ErrorList) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

fn fs(name: &str, spec: Value) -> Value {
    let mut object = json!({"apiVersion": super::API_VERSION, "kind": "FlowSchema",
        "metadata": {"name": name}, "spec": spec});
    flowschema::default(&mut object);
    object
}

fn level(name: &str, spec: Value) -> Value {
    let mut object = json!({"apiVersion": super::API_VERSION, "kind": "PriorityLevelConfiguration",
        "metadata": {"name": name}, "spec": spec});
    plc::default(&mut object);
    object
}

fn everyone() -> Value {
    json!({"subjects": [{"kind": "Group", "group": {"name": "system:authenticated"}}],
        "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": true}]})
}

#[test]
fn bootstrap_objects_are_valid_and_already_defaulted() {
    let mut all = bootstrap::mandatory_priority_levels();
    all.extend(bootstrap::suggested_priority_levels());
    all.extend(bootstrap::mandatory_flow_schemas());
    all.extend(bootstrap::suggested_flow_schemas());
    for object in all {
        let name = object["metadata"]["name"].as_str().unwrap().to_owned();
        let mut defaulted = object.clone();
        let errors = if object["kind"] == "FlowSchema" {
            flowschema::default(&mut defaulted);
            flowschema::validate(&object).unwrap()
        } else {
            plc::default(&mut defaulted);
            plc::validate(&object).unwrap()
        };
        assert!(errors.is_empty(), "{name}: {:?}", summary(&errors));
        assert_eq!(defaulted, object, "{name} changes when defaulted");
    }
}

#[test]
fn flow_schema_rules() {
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        (
            "valid, precedence defaulted",
            fs(
                "a",
                json!({"priorityLevelConfiguration": {"name": "global-default"}, "rules": [everyone()]}),
            ),
            vec![],
        ),
        (
            "precedence 1 is exempt's",
            fs(
                "a",
                json!({"priorityLevelConfiguration": {"name": "x"}, "matchingPrecedence": 1}),
            ),
            vec![
                "spec.matchingPrecedence: Invalid value: 1: only the schema named 'exempt' may have matchingPrecedence 1",
            ],
        ),
        (
            "precedence too high, no level, bad distinguisher",
            fs(
                "a",
                json!({"priorityLevelConfiguration": {"name": ""}, "matchingPrecedence": 10001, "distinguisherMethod": {"type": "ByGroup"}}),
            ),
            vec![
                "spec.matchingPrecedence: Invalid value: 10001: must not be greater than 10000",
                "spec.distinguisherMethod.type: Unsupported value: {\"type\":\"ByGroup\"}: supported values: \"ByNamespace\", \"ByUser\"",
                "spec.priorityLevelConfiguration.name: Required value: must reference a priority level",
            ],
        ),
        (
            "rule without subjects or rules",
            fs(
                "a",
                json!({"priorityLevelConfiguration": {"name": "x"}, "rules": [{}]}),
            ),
            vec![
                "spec.rules[0].subjects: Required value: subjects must contain at least one value",
                "spec.rules[0]: Required value: at least one of resourceRules and nonResourceRules has to be non-empty",
            ],
        ),
        (
            "subjects",
            fs(
                "a",
                json!({"priorityLevelConfiguration": {"name": "x"}, "rules": [{
                    "subjects": [
                        {"kind": "User", "group": {"name": "g"}},
                        {"kind": "ServiceAccount", "serviceAccount": {"name": "Bad"}},
                        {"kind": "Robot"},
                    ],
                    "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}],
                }]}),
            ),
            vec![
                "spec.rules[0].subjects[0].user: Required value: user is required when subject kind is 'User'",
                "spec.rules[0].subjects[0].group: Forbidden: group is forbidden when subject kind is not 'Group'",
                "spec.rules[0].subjects[1].serviceAccount.name: Invalid value: \"Bad\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                "spec.rules[0].subjects[1].serviceAccount.namespace: Required value: must specify namespace for service account",
                "spec.rules[0].subjects[2].kind: Unsupported value: \"Robot\": supported values: \"Group\", \"ServiceAccount\", \"User\"",
            ],
        ),
        (
            "resource and non-resource rules",
            fs(
                "a",
                json!({"priorityLevelConfiguration": {"name": "x"}, "rules": [{
                    "subjects": [{"kind": "Group", "group": {"name": "g"}}],
                    "resourceRules": [
                        {"verbs": ["*", "get"], "apiGroups": ["*", "apps"], "resources": []},
                        {"verbs": ["fly"], "apiGroups": [""], "resources": ["pods"], "namespaces": ["Bad"]},
                    ],
                    "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["healthz", "/a//b", "/he*", "/ok/*"]}],
                }]}),
            ),
            vec![
                "spec.rules[0].resourceRules[0].verbs: Invalid value: []string{\"*\", \"get\"}: if '*' is present, must not specify other verbs",
                "spec.rules[0].resourceRules[0].apiGroups: Invalid value: []string{\"*\", \"apps\"}: if '*' is present, must not specify other api groups",
                "spec.rules[0].resourceRules[0].resources: Required value: resource rules must supply at least one resource",
                "spec.rules[0].resourceRules[0].namespaces: Required value: resource rules that are not cluster scoped must supply at least one namespace",
                "spec.rules[0].resourceRules[1].verbs: Unsupported value: []string{\"fly\"}: supported values: \"create\", \"delete\", \"deletecollection\", \"get\", \"list\", \"patch\", \"proxy\", \"update\", \"watch\"",
                "spec.rules[0].resourceRules[1].namespaces[0]: Invalid value: \"Bad\": each member of this list must be '*' or a DNS-1123 label; a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
                "spec.rules[0].nonResourceRules[0].nonResourceURLs[0]: Invalid value: \"healthz\": must start with slash",
                "spec.rules[0].nonResourceRules[0].nonResourceURLs[1]: Invalid value: \"/a//b\": must not contain double slash",
                "spec.rules[0].nonResourceRules[0].nonResourceURLs[2]: Invalid value: \"/he*\": wildcard can only do suffix matching",
            ],
        ),
        (
            "the mandatory exempt schema is fixed",
            fs(
                "exempt",
                json!({"priorityLevelConfiguration": {"name": "exempt"}, "matchingPrecedence": 1, "rules": [everyone()]}),
            ),
            vec![
                "spec: Invalid value: {\"matchingPrecedence\":1,\"priorityLevelConfiguration\":{\"name\":\"exempt\"},\"rules\":[{\"resourceRules\":[{\"apiGroups\":[\"*\"],\"clusterScope\":true,\"resources\":[\"*\"],\"verbs\":[\"*\"]}],\"subjects\":[{\"group\":{\"name\":\"system:authenticated\"},\"kind\":\"Group\"}]}]}: spec of 'exempt' must equal the fixed value",
            ],
        ),
    ];
    for (name, object, want) in cases {
        assert_eq!(
            summary(&flowschema::validate(&object).unwrap()),
            want,
            "{name}"
        );
    }
    let with_status = json!({"metadata": {"name": "a"}, "status": {"conditions": [{"type": "Dangling"}, {"type": "Dangling"}, {"type": ""}]}});
    assert_eq!(
        summary(&flowschema::validate_status_update(&with_status, &with_status).unwrap()),
        vec![
            "status.conditions[1].type: Duplicate value: \"Dangling\"",
            "status.conditions[2].type: Required value: must not be empty",
        ]
    );
}

#[test]
fn priority_level_rules_and_defaults() {
    let defaulted = level(
        "a",
        json!({"type": "Limited", "limited": {"limitResponse": {"type": "Queue", "queuing": {}}}}),
    );
    assert_eq!(
        defaulted["spec"],
        json!({"type": "Limited", "limited": {"nominalConcurrencyShares": 30, "lendablePercent": 0,
            "limitResponse": {"type": "Queue", "queuing": {"queues": 64, "handSize": 8, "queueLengthLimit": 50}}}})
    );
    assert!(plc::validate(&defaulted).unwrap().is_empty());
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        (
            "exempt type for another name",
            level("a", json!({"type": "Exempt"})),
            vec![
                "spec.type: Invalid value: \"Exempt\": type must be 'Exempt' if and only if name is 'exempt'",
            ],
        ),
        (
            "limited without limited, with exempt",
            level("a", json!({"type": "Limited", "exempt": {}})),
            vec![
                "spec.exempt: Forbidden: must be nil if the type is Limited",
                "spec.limited: Required value: must not be empty when type is Limited",
            ],
        ),
        (
            "bad numbers",
            level(
                "a",
                json!({"type": "Limited", "limited": {"nominalConcurrencyShares": -1, "lendablePercent": 101, "borrowingLimitPercent": -1,
                "limitResponse": {"type": "Queue", "queuing": {"queues": 4, "handSize": 5, "queueLengthLimit": -1}}}}),
            ),
            vec![
                "spec.limited.nominalConcurrencyShares: Invalid value: -1: must be a non-negative integer",
                "spec.limited.limitResponse.queuing.queueLengthLimit: Invalid value: -1: must be positive",
                "spec.limited.limitResponse.queuing.handSize: Invalid value: 5: should not be greater than queues (4)",
                "spec.limited.lendablePercent: Invalid value: 101: must be between 0 and 100, inclusive",
                "spec.limited.borrowingLimitPercent: Invalid value: -1: if specified, must be a non-negative integer",
            ],
        ),
        (
            "too much entropy",
            level(
                "a",
                json!({"type": "Limited", "limited": {"limitResponse": {"type": "Queue", "queuing": {"queues": 10000000, "handSize": 8}}}}),
            ),
            vec![
                "spec.limited.limitResponse.queuing.handSize: Invalid value: 8: required entropy bits of deckSize 10000000 and handSize 8 should not be greater than 60",
            ],
        ),
        (
            "reject with queuing, unknown response",
            level(
                "a",
                json!({"type": "Limited", "limited": {"limitResponse": {"type": "Reject", "queuing": {}}}}),
            ),
            vec![
                "spec.limited.limitResponse.queuing: Forbidden: must be nil if limited.limitResponse.type is not Limited",
            ],
        ),
        (
            "catch-all is fixed",
            level(
                "catch-all",
                json!({"type": "Limited", "limited": {"nominalConcurrencyShares": 6, "limitResponse": {"type": "Reject"}}}),
            ),
            vec![
                "spec: Invalid value: {\"limited\":{\"lendablePercent\":0,\"limitResponse\":{\"type\":\"Reject\"},\"nominalConcurrencyShares\":6},\"type\":\"Limited\"}: spec of 'catch-all' must equal the fixed value",
            ],
        ),
        (
            "exempt's exempt may change",
            level(
                "exempt",
                json!({"type": "Exempt", "exempt": {"nominalConcurrencyShares": 10, "lendablePercent": 50}}),
            ),
            vec![],
        ),
        (
            "but not its limits",
            level(
                "exempt",
                json!({"type": "Exempt", "exempt": {"nominalConcurrencyShares": -1, "lendablePercent": 101}, "limited": {"limitResponse": {"type": "Reject"}}}),
            ),
            vec![
                "spec.limited: Forbidden: must be nil if the type is not Limited",
                "spec.exempt.nominalConcurrencyShares: Invalid value: -1: must be a non-negative integer",
                "spec.exempt.lendablePercent: Invalid value: 101: must be between 0 and 100, inclusive",
                "spec: Invalid value: {\"exempt\":{\"lendablePercent\":101,\"nominalConcurrencyShares\":-1},\"limited\":{\"lendablePercent\":0,\"limitResponse\":{\"type\":\"Reject\"},\"nominalConcurrencyShares\":30},\"type\":\"Exempt\"}: spec of 'exempt' except the 'spec.exempt' field must equal the fixed value",
            ],
        ),
        (
            "unknown type",
            level("a", json!({"type": "Sometimes"})),
            vec![
                "spec.type: Unsupported value: \"Sometimes\": supported values: \"Exempt\", \"Limited\"",
            ],
        ),
    ];
    for (name, object, want) in cases {
        assert_eq!(summary(&plc::validate(&object).unwrap()), want, "{name}");
    }
}

#[test]
fn tables_show_what_kubectl_shows() {
    let names = |columns: &[crate::table::ColumnDefinition]| {
        columns
            .iter()
            .map(|c| c.name.to_uppercase())
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(
        names(flowschema::COLUMNS),
        "NAME PRIORITYLEVEL MATCHINGPRECEDENCE DISTINGUISHERMETHOD AGE MISSINGPL"
    );
    assert_eq!(
        names(plc::COLUMNS),
        "NAME TYPE NOMINALCONCURRENCYSHARES QUEUES HANDSIZE QUEUELENGTHLIMIT AGE"
    );
    let mut schemas = bootstrap::mandatory_flow_schemas();
    schemas[0]["metadata"]["creationTimestamp"] = json!("1970-01-01T00:00:00Z");
    schemas[1]["status"] = json!({"conditions": [{"type": "Dangling", "status": "False"}]});
    assert_eq!(
        flowschema::row(&schemas[0], 120),
        vec![
            json!("exempt"),
            json!("exempt"),
            json!(1),
            json!("<none>"),
            json!("2m"),
            json!("?")
        ]
    );
    assert_eq!(flowschema::row(&schemas[1], 0)[3], json!("ByUser"));
    assert_eq!(flowschema::row(&schemas[1], 0)[5], json!("False"));
    let levels = bootstrap::mandatory_priority_levels();
    assert_eq!(
        plc::row(&levels[0], 0)[1..6],
        [
            json!("Exempt"),
            json!("<none>"),
            json!("<none>"),
            json!("<none>"),
            json!("<none>")
        ]
    );
    assert_eq!(
        plc::row(&levels[1], 0)[1..6],
        [
            json!("Limited"),
            json!(5),
            json!("<none>"),
            json!("<none>"),
            json!("<none>")
        ]
    );
    let system = &bootstrap::suggested_priority_levels()[0];
    assert_eq!(
        plc::row(system, 0)[1..6],
        [json!("Limited"), json!(30), json!(64), json!(6), json!(50)]
    );
}
