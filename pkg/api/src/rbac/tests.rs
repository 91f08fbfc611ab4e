use genplane_apimachinery::codec::protobuf;
use serde_json::{Value, json};

use super::*;

const SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

fn summary(errors: &ErrorList) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

fn role(rules: Value) -> Value {
    json!({"apiVersion": API_VERSION, "kind": "Role", "metadata": {"name": "pod-reader", "namespace": "default"}, "rules": rules})
}

fn cluster_role(body: Value) -> Value {
    let mut object = json!({"apiVersion": API_VERSION, "kind": "ClusterRole", "metadata": {"name": "system:view"}});
    object
        .as_object_mut()
        .unwrap()
        .extend(body.as_object().unwrap().clone());
    object
}

/// A binding as the API server validates it: decoded and defaulted.
fn defaulted(mut object: Value) -> Value {
    default_binding(&mut object);
    object
}

fn role_binding(role_ref: Value, subjects: Value) -> Value {
    defaulted(
        json!({"apiVersion": API_VERSION, "kind": "RoleBinding", "metadata": {"name": "read-pods", "namespace": "default"}, "roleRef": role_ref, "subjects": subjects}),
    )
}

fn cluster_role_binding(role_ref: Value, subjects: Value) -> Value {
    defaulted(
        json!({"apiVersion": API_VERSION, "kind": "ClusterRoleBinding", "metadata": {"name": "read-all"}, "roleRef": role_ref, "subjects": subjects}),
    )
}

#[test]
fn role_rules() {
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        (
            "valid",
            role(
                json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"], "resourceNames": ["a"]}]),
            ),
            vec![],
        ),
        ("no rules", role(json!([])), vec![]),
        (
            "no verbs",
            role(json!([{"apiGroups": [""], "resources": ["pods"]}])),
            vec!["rules[0].verbs: Required value: verbs must contain at least one value"],
        ),
        (
            "no api groups, no resources",
            role(json!([{"verbs": ["get"]}, {"verbs": ["get"], "apiGroups": ["apps"]}])),
            vec![
                "rules[0].apiGroups: Required value: resource rules must supply at least one api group",
                "rules[0].resources: Required value: resource rules must supply at least one resource",
                "rules[1].resources: Required value: resource rules must supply at least one resource",
            ],
        ),
        (
            "non-resource URLs in a namespace",
            role(json!([{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}])),
            vec![
                "rules[0].nonResourceURLs: Invalid value: [\"/healthz\"]: namespaced rules cannot apply to non-resource URLs",
            ],
        ),
        (
            "both kinds of rule",
            role(
                json!([{"verbs": ["get"], "nonResourceURLs": ["/*"], "apiGroups": [""], "resources": ["pods"]}]),
            ),
            vec![
                "rules[0].nonResourceURLs: Invalid value: [\"/*\"]: namespaced rules cannot apply to non-resource URLs",
                "rules[0].nonResourceURLs: Invalid value: [\"/*\"]: rules cannot apply to both regular resources and non-resource URLs",
            ],
        ),
        (
            "names are path segments",
            json!({"metadata": {"name": "system:Pod Reader", "namespace": "default"}}),
            vec![],
        ),
        (
            "slash in the name",
            json!({"metadata": {"name": "a/b", "namespace": "default"}}),
            vec!["metadata.name: Invalid value: \"a/b\": may not contain '/'"],
        ),
        (
            "dot-dot name and generateName",
            json!({"metadata": {"name": "..", "generateName": ".", "namespace": "default"}}),
            vec![
                "metadata.generateName: Invalid value: \".\": may not be '.'",
                "metadata.name: Invalid value: \"..\": may not be '..'",
            ],
        ),
        (
            "no namespace",
            json!({"metadata": {"name": "r"}}),
            vec!["metadata.namespace: Required value"],
        ),
    ];
    for (name, object, want) in cases {
        assert_eq!(summary(&role::validate(&object).unwrap()), want, "{name}");
    }
    let err = role::validate(&role(json!([{"verbs": "get"}]))).unwrap_err();
    assert_eq!(
        err.message,
        "Role in version \"rbac.authorization.k8s.io/v1\" cannot be handled as a Role: json: cannot unmarshal string into field Role.rules[0].verbs of type []string"
    );
}

#[test]
fn role_updates_report_errors_as_upstream_does() {
    let old = role(json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]));
    let mut new = old.clone();
    new["rules"][0]["verbs"] = json!(["get", "watch"]);
    assert!(role::validate_update(&new, &old).unwrap().is_empty());
    new["rules"][0]["verbs"] = json!([]);
    // Upstream's strategy validates the new object, then ValidateRoleUpdate does it again.
    assert_eq!(
        summary(&role::validate_update(&new, &old).unwrap()),
        [
            "rules[0].verbs: Required value: verbs must contain at least one value",
            "rules[0].verbs: Required value: verbs must contain at least one value",
        ]
    );
    let mut moved = old.clone();
    moved["metadata"]["namespace"] = json!("other");
    assert_eq!(
        summary(&role::validate_update(&moved, &old).unwrap()),
        ["metadata.namespace: Invalid value: \"other\": field is immutable"]
    );
}

#[test]
fn cluster_role_rules() {
    let selector = |s: Value| cluster_role(json!({"aggregationRule": {"clusterRoleSelectors": s}}));
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        (
            "non-resource URLs are fine",
            cluster_role(
                json!({"rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/healthz/*"]}]}),
            ),
            vec![],
        ),
        (
            "mixed rule",
            cluster_role(
                json!({"rules": [{"verbs": ["get"], "nonResourceURLs": ["/*"], "resourceNames": ["x"]}]}),
            ),
            vec![
                "rules[0].nonResourceURLs: Invalid value: [\"/*\"]: rules cannot apply to both regular resources and non-resource URLs",
            ],
        ),
        (
            "namespace set on a cluster-scoped kind",
            json!({"metadata": {"name": "c", "namespace": "default"}}),
            vec!["metadata.namespace: Forbidden: not allowed on this type"],
        ),
        (
            "aggregation",
            selector(
                json!([{"matchLabels": {"rbac.example.com/aggregate-to-monitoring": "true"}}, {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}]),
            ),
            vec![],
        ),
        (
            "empty selector list",
            selector(json!([])),
            vec![
                "aggregationRule.clusterRoleSelectors: Required value: at least one clusterRoleSelector required if aggregationRule is non-nil",
            ],
        ),
        (
            "empty aggregation rule",
            cluster_role(json!({"aggregationRule": {}})),
            vec![
                "aggregationRule.clusterRoleSelectors: Required value: at least one clusterRoleSelector required if aggregationRule is non-nil",
            ],
        ),
        (
            "bad selectors",
            selector(
                json!([{"matchExpressions": [{"key": "tier", "operator": "In"}, {"key": "a", "operator": "Exists", "values": ["x"]}, {"key": "b", "operator": "Near"}]}]),
            ),
            vec![
                "aggregationRule.clusterRoleSelectors[0].matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
                "aggregationRule.clusterRoleSelectors[0].matchExpressions[1].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                "aggregationRule.clusterRoleSelectors[0].matchExpressions[2].operator: Invalid value: \"Near\": not a valid selector operator",
                "aggregationRule.clusterRoleSelectors[0]: Invalid value: \"null\": invalid label selector.",
            ],
        ),
        (
            "bad label value",
            selector(json!([{"matchLabels": {"tier": "not ok"}}])),
            vec![
                "aggregationRule.clusterRoleSelectors[0].matchLabels[tier]: Invalid value: \"not ok\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
                "aggregationRule.clusterRoleSelectors[0]: Invalid value: \"null\": invalid label selector.",
            ],
        ),
    ];
    for (name, object, want) in cases {
        assert_eq!(
            summary(&clusterrole::validate(&object).unwrap()),
            want,
            "{name}"
        );
    }
}

#[test]
fn cluster_role_updates_tolerate_old_invalid_label_values() {
    let bad = cluster_role(
        json!({"aggregationRule": {"clusterRoleSelectors": [{"matchExpressions": [{"key": "k", "operator": "In", "values": ["not ok"]}]}]}}),
    );
    let value_error = "aggregationRule.clusterRoleSelectors[0].matchExpressions[0].values[0]";
    let errors = summary(&clusterrole::validate(&bad).unwrap());
    assert!(errors[0].starts_with(value_error), "{errors:?}");
    let good = cluster_role(json!({"rules": []}));
    // Kept from an old invalid object: only the selector itself is still reported.
    let errors = summary(&clusterrole::validate_update(&bad, &bad).unwrap());
    assert!(
        !errors.iter().any(|e| e.starts_with(value_error)),
        "{errors:?}"
    );
    // Introduced by the update: reported (twice, as upstream does).
    let errors = summary(&clusterrole::validate_update(&bad, &good).unwrap());
    assert_eq!(
        errors.iter().filter(|e| e.starts_with(value_error)).count(),
        2
    );
}

#[test]
fn binding_defaults() {
    let object = role_binding(
        json!({"kind": "Role", "name": "pod-reader"}),
        json!([
            {"kind": "User", "name": "jane"},
            {"kind": "Group", "name": "devs", "apiGroup": ""},
            {"kind": "ServiceAccount", "name": "default", "apiGroup": ""},
            {"kind": "User", "name": "x", "apiGroup": "example.com"},
            {"kind": "Robot", "name": "r2"},
        ]),
    );
    assert_eq!(
        object["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"})
    );
    assert_eq!(
        object["subjects"],
        json!([
            {"kind": "User", "name": "jane", "apiGroup": "rbac.authorization.k8s.io"},
            {"kind": "Group", "name": "devs", "apiGroup": "rbac.authorization.k8s.io"},
            {"kind": "ServiceAccount", "name": "default"},
            {"kind": "User", "name": "x", "apiGroup": "example.com"},
            {"kind": "Robot", "name": "r2"},
        ])
    );
    let no_ref = defaulted(json!({"metadata": {"name": "b"}}));
    assert_eq!(
        no_ref["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io"})
    );
}

#[test]
fn role_binding_rules() {
    let bad_sa_name = format!("subjects[1].name: Invalid value: \"Builder\": {SUBDOMAIN}");
    let view = json!({"kind": "ClusterRole", "name": "view"});
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        (
            "valid",
            role_binding(
                json!({"kind": "Role", "name": "pod-reader"}),
                json!([
                    {"kind": "User", "name": "valid@username"},
                    {"kind": "Group", "name": "system:authenticated"},
                    {"kind": "ServiceAccount", "name": "default"},
                    {"kind": "ServiceAccount", "name": "builder", "namespace": "ci"},
                ]),
            ),
            vec![],
        ),
        ("no subjects", role_binding(view.clone(), json!([])), vec![]),
        (
            "bad role ref",
            role_binding(
                json!({"apiGroup": "example.com", "kind": "Thing", "name": "a/b"}),
                json!([]),
            ),
            vec![
                "roleRef.apiGroup: Unsupported value: \"example.com\": supported values: \"rbac.authorization.k8s.io\"",
                "roleRef.kind: Unsupported value: \"Thing\": supported values: \"Role\", \"ClusterRole\"",
                "roleRef.name: Invalid value: \"a/b\": may not contain '/'",
            ],
        ),
        (
            "no role ref",
            defaulted(json!({"metadata": {"name": "b", "namespace": "default"}})),
            vec![
                "roleRef.kind: Unsupported value: \"\": supported values: \"Role\", \"ClusterRole\"",
                "roleRef.name: Required value",
            ],
        ),
        (
            "bad subjects",
            role_binding(
                view.clone(),
                json!([
                    {"kind": "Robot", "name": "r2"},
                    {"kind": "ServiceAccount", "name": "Builder", "apiGroup": "v1"},
                    {"kind": "User", "name": "jane", "apiGroup": "example.com"},
                    {"kind": "Group"},
                ]),
            ),
            vec![
                "subjects[0].kind: Unsupported value: \"Robot\": supported values: \"ServiceAccount\", \"User\", \"Group\"",
                &bad_sa_name,
                "subjects[1].apiGroup: Unsupported value: \"v1\": supported values: \"\"",
                "subjects[2].apiGroup: Unsupported value: \"example.com\": supported values: \"rbac.authorization.k8s.io\"",
                "subjects[3].name: Required value",
            ],
        ),
    ];
    for (name, object, want) in cases {
        assert_eq!(
            summary(&rolebinding::validate(&object).unwrap()),
            want,
            "{name}"
        );
    }
}

#[test]
fn cluster_role_binding_rules() {
    let view = json!({"kind": "ClusterRole", "name": "view"});
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        (
            "valid",
            cluster_role_binding(
                view.clone(),
                json!([
                    {"kind": "ServiceAccount", "name": "default", "namespace": "kube-system"},
                    {"kind": "Group", "name": "system:masters"},
                ]),
            ),
            vec![],
        ),
        (
            "a Role cannot be bound cluster-wide",
            cluster_role_binding(json!({"kind": "Role", "name": "r"}), json!([])),
            vec!["roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\""],
        ),
        (
            "service accounts need a namespace",
            cluster_role_binding(
                view.clone(),
                json!([{"kind": "ServiceAccount", "name": "default"}]),
            ),
            vec!["subjects[0].namespace: Required value"],
        ),
        (
            "no name",
            cluster_role_binding(json!({"kind": "ClusterRole"}), json!([])),
            vec!["roleRef.name: Required value"],
        ),
    ];
    for (name, object, want) in cases {
        assert_eq!(
            summary(&clusterrolebinding::validate(&object).unwrap()),
            want,
            "{name}"
        );
    }
}

#[test]
fn role_ref_is_immutable() {
    let old = role_binding(json!({"kind": "ClusterRole", "name": "view"}), json!([]));
    let mut more_subjects = old.clone();
    more_subjects["subjects"] = json!([{"kind": "User", "name": "jane", "apiGroup": GROUP_NAME}]);
    assert!(
        rolebinding::validate_update(&more_subjects, &old)
            .unwrap()
            .is_empty()
    );
    let mut changed = old.clone();
    changed["roleRef"]["name"] = json!("edit");
    assert_eq!(
        summary(&rolebinding::validate_update(&changed, &old).unwrap()),
        [
            "roleRef: Invalid value: {\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"ClusterRole\",\"name\":\"edit\"}: cannot change roleRef"
        ]
    );
    let old = cluster_role_binding(json!({"kind": "ClusterRole", "name": "view"}), json!([]));
    let mut changed = old.clone();
    changed["roleRef"]["kind"] = json!("Role");
    assert_eq!(
        summary(&clusterrolebinding::validate_update(&changed, &old).unwrap()),
        [
            "roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\"",
            "roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\"",
            "roleRef: Invalid value: {\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"Role\",\"name\":\"view\"}: cannot change roleRef",
        ]
    );
}

#[test]
fn tables() {
    let created =
        json!({"name": "b", "namespace": "ns", "creationTimestamp": "1970-01-01T00:00:00Z"});
    let binding = json!({"metadata": created, "roleRef": {"apiGroup": GROUP_NAME, "kind": "ClusterRole", "name": "view"}, "subjects": [
        {"kind": "User", "name": "jane"},
        {"kind": "ServiceAccount", "name": "default", "namespace": "ci"},
        {"kind": "User", "name": "joe"},
        {"kind": "Group", "name": "devs"},
        {"kind": "ServiceAccount", "name": "builder"},
        {"kind": "Robot", "name": "r2"},
    ]});
    assert_eq!(
        rolebinding::row(&binding, 3 * 86400),
        vec![
            json!("b"),
            json!("ClusterRole/view"),
            json!("3d"),
            json!("jane, joe"),
            json!("devs"),
            json!("ci/default, /builder"),
        ]
    );
    assert_eq!(
        clusterrolebinding::row(&json!({"metadata": {"name": "x"}}), 0),
        vec![
            json!("x"),
            json!("/"),
            json!("<unknown>"),
            json!(""),
            json!(""),
            json!("")
        ]
    );
    let names: Vec<(&str, i32)> = rolebinding::COLUMNS
        .iter()
        .map(|c| (c.name, c.priority))
        .collect();
    assert_eq!(
        names,
        [
            ("Name", 0),
            ("Role", 0),
            ("Age", 0),
            ("Users", 1),
            ("Groups", 1),
            ("ServiceAccounts", 1)
        ]
    );
    let role = json!({"metadata": {"name": "r", "creationTimestamp": "2026-01-02T03:04:05Z"}});
    assert_eq!(
        role::row(&role, 0),
        vec![json!("r"), json!("2026-01-02T03:04:05Z")]
    );
    assert_eq!(
        clusterrole::row(&json!({"metadata": {"name": "c"}}), 0),
        vec![json!("c"), json!("0001-01-01T00:00:00Z")]
    );
    let columns: Vec<(&str, &str)> = clusterrole::COLUMNS
        .iter()
        .map(|c| (c.name, c.type_))
        .collect();
    assert_eq!(columns, [("Name", "string"), ("Created At", "date")]);
}

#[test]
fn field_selectors() {
    let object = json!({"metadata": {"name": "view"}});
    let values = clusterrole::field_values(&object);
    assert_eq!(values["metadata.name"], "view");
    assert_eq!(values["metadata.namespace"], "");
    assert_eq!(
        values.keys().copied().collect::<Vec<_>>(),
        clusterrole::FIELD_SELECTORS
    );
    let namespaced = json!({"metadata": {"name": "r", "namespace": "ns"}});
    assert_eq!(role::field_values(&namespaced)["metadata.namespace"], "ns");
}

#[test]
fn protobuf_round_trip() {
    let binding = json!({
        "apiVersion": API_VERSION,
        "kind": "RoleBinding",
        "metadata": {"name": "b", "namespace": "ns"},
        "subjects": [
            {"kind": "User", "apiGroup": GROUP_NAME, "name": "jane"},
            {"kind": "ServiceAccount", "name": "default", "namespace": "ns"},
        ],
        "roleRef": {"apiGroup": GROUP_NAME, "kind": "Role", "name": "r"},
    });
    let bytes = protobuf::encode(&binding, &rolebinding::SCHEMA).unwrap();
    assert_eq!(
        protobuf::decode(&bytes, &rolebinding::SCHEMA).unwrap(),
        binding
    );
    let aggregated = json!({
        "apiVersion": API_VERSION,
        "kind": "ClusterRole",
        "metadata": {"name": "monitoring"},
        "rules": [{"verbs": ["get"], "nonResourceURLs": ["/metrics"]}, {"verbs": ["*"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["p"]}],
        "aggregationRule": {"clusterRoleSelectors": [
            {"matchLabels": {"a": "b"}},
            {"matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]},
        ]},
    });
    let bytes = protobuf::encode(&aggregated, &clusterrole::SCHEMA).unwrap();
    assert_eq!(
        protobuf::decode(&bytes, &clusterrole::SCHEMA).unwrap(),
        aggregated
    );
    // Field numbers from upstream's generated.proto: a RoleBinding's roleRef is field 3, the
    // RoleRef's name field 3.
    let role_ref =
        json!({"apiVersion": API_VERSION, "kind": "RoleBinding", "roleRef": {"name": "r"}});
    let bytes = protobuf::encode(&role_ref, &rolebinding::SCHEMA).unwrap();
    let message = [0x1a, 0x03, 0x1a, 0x01, b'r'];
    assert!(
        bytes.windows(message.len()).any(|w| w == message),
        "{bytes:?}"
    );
}
