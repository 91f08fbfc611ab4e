//! JSON answers byte for byte in kube-apiserver's field order (issue 44, item 2): each built-in
//! kind, a list, a Table and a set of `Status` errors, against fixtures written from upstream's
//! Go types (k8s.io/api, k8s.io/apimachinery's meta/v1 `types.go`, apiextensions-apiserver's
//! `types.go`): a struct's fields in declaration order (`kind` before `apiVersion`, `metadata`
//! with `name`, `namespace`, `uid`, `resourceVersion`, `creationTimestamp`, ...), maps with sorted
//! keys. Clients compare these bodies as strings (the Python client's
//! `test_create_from_multi_resource_yaml_with_multi_conflicts`, users' golden files). Volatile
//! values (uids, times, resourceVersions, tokens) are replaced by their key in capitals, and
//! managed fields' `fieldsV1` by `{}`.
//! Custom resources keep sorted keys, as upstream writes unstructured objects.

use crate::support;

use genplane_storage::Storage;
use genplane_test_support::eventually_async;
use hyper::Method;
use serde_json::{Value, json};
use support::{Server, call};

/// The keys whose string values change from run to run.
const VOLATILE: &[&str] = &[
    "uid",
    "creationTimestamp",
    "resourceVersion",
    "time",
    "token",
    "expirationTimestamp",
    "lastTransitionTime",
];

/// Every `"key":value` of a volatile key in `value` (the value as JSON), and every
/// `"fieldsV1":{...}` (what the field manager tracks is not what this test is about).
fn volatile_pairs(value: &Value, out: &mut Vec<(String, String, String)>) {
    match value {
        Value::Object(map) => {
            for (key, item) in map {
                match item {
                    Value::String(s) if VOLATILE.contains(&key.as_str()) => out.push((
                        key.clone(),
                        serde_json::to_string(s).unwrap(),
                        serde_json::to_string(&key.to_uppercase()).unwrap(),
                    )),
                    Value::Object(_) if key == "fieldsV1" => out.push((
                        key.clone(),
                        serde_json::to_string(item).unwrap(),
                        "{}".to_owned(),
                    )),
                    _ => volatile_pairs(item, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| volatile_pairs(item, out)),
        _ => {}
    }
}

/// The body as text, its volatile values replaced by their key in capitals (the bytes
/// otherwise as sent, the final newline left out).
fn normalized(body: &[u8]) -> String {
    let text = String::from_utf8(body.to_vec()).unwrap();
    let mut text = text.strip_suffix('\n').unwrap_or(&text).to_owned();
    let value: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    let mut pairs = Vec::new();
    volatile_pairs(&value, &mut pairs);
    for (key, volatile, placeholder) in pairs {
        let key = serde_json::to_string(&key).unwrap();
        text = text.replace(
            &format!("{key}:{volatile}"),
            &format!("{key}:{placeholder}"),
        );
    }
    text
}

/// Sends a request as `kubectl` would and answers the status and the normalized body.
async fn send(server: &Server, method: Method, path: &str, body: Option<&Value>) -> (u16, String) {
    send_as(server, method, path, body, &[]).await
}

async fn send_as(
    server: &Server,
    method: Method,
    path: &str,
    body: Option<&Value>,
    headers: &[(&str, &str)],
) -> (u16, String) {
    let mut all = vec![
        ("content-type", "application/json"),
        (
            "user-agent",
            "field-order/v1.0.0 (linux/amd64) kubernetes/test",
        ),
    ];
    all.extend_from_slice(headers);
    let answer = call(
        server,
        method,
        path,
        &all,
        body.map(|b| serde_json::to_vec(b).unwrap()),
    )
    .await;
    (answer.status, normalized(&answer.body))
}

/// What differs from the fixtures, collected so that one run shows every difference.
#[derive(Default)]
struct Differences(Vec<String>);

impl Differences {
    fn check(&mut self, what: &str, got: (u16, String), status: u16, expected: &str) {
        if got.0 != status || got.1 != expected {
            self.0.push(format!(
                "{what}: expected {status}\n  {expected}\ngot {}\n  {}",
                got.0, got.1
            ));
        }
    }

    #[track_caller]
    fn assert_none(self) {
        assert!(
            self.0.is_empty(),
            "{} answers differ from upstream's field order:\n\n{}",
            self.0.len(),
            self.0.join("\n\n")
        );
    }
}

const CORE: &str = "/api/v1";
const NS: &str = "/api/v1/namespaces/fo";

/// A fixture with `@MF(<apiVersion>)` standing for the create's managed fields entry.
fn fixture(text: &str) -> String {
    let mut out = text.to_owned();
    while let Some(at) = out.find("@MF(") {
        let end = at + out[at..].find(')').unwrap();
        let api_version = out[at + 4..end].to_owned();
        out.replace_range(
            at..=end,
            &format!(
                r#""managedFields":[{{"manager":"field-order","operation":"Update","apiVersion":"{api_version}","time":"TIME","fieldsType":"FieldsV1","fieldsV1":{{}}}}]"#
            ),
        );
    }
    out
}

/// `metadata` of a created object named `name` (in namespace `fo` when `namespaced`).
fn meta(name: &str, namespaced: bool, api_version: &str) -> String {
    let namespace = if namespaced {
        r#""namespace":"fo","#
    } else {
        ""
    };
    fixture(&format!(
        r#""metadata":{{"name":"{name}",{namespace}"uid":"UID","resourceVersion":"RESOURCEVERSION","creationTimestamp":"CREATIONTIMESTAMP",@MF({api_version})}}"#
    ))
}

/// [`meta`] of a kind whose objects have a generation.
fn meta_with_generation(name: &str, api_version: &str) -> String {
    meta(name, false, api_version).replace(
        r#""resourceVersion":"RESOURCEVERSION","#,
        r#""resourceVersion":"RESOURCEVERSION","generation":1,"#,
    )
}

#[tokio::test]
async fn built_in_kinds_lists_and_statuses_are_written_in_upstreams_field_order() {
    let server = support::start().await;
    let mut differences = Differences::default();
    let mut check = async |what: &str,
                           method: Method,
                           path: &str,
                           body: Option<Value>,
                           status: u16,
                           expected: &str| {
        let got = send(&server, method, path, body.as_ref()).await;
        differences.check(what, got, status, expected);
    };
    let rbac = "rbac.authorization.k8s.io/v1";
    let admission = "admissionregistration.k8s.io/v1";

    check(
        "Namespace",
        Method::POST,
        &format!("{CORE}/namespaces"),
        Some(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fo"}})),
        201,
        &fixture(r#"{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"fo","uid":"UID","resourceVersion":"RESOURCEVERSION","creationTimestamp":"CREATIONTIMESTAMP","labels":{"kubernetes.io/metadata.name":"fo"},@MF(v1)},"spec":{"finalizers":["kubernetes"]},"status":{"phase":"Active"}}"#),
    )
    .await;

    let config_map = fixture(
        r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c","namespace":"fo","uid":"UID","resourceVersion":"RESOURCEVERSION","creationTimestamp":"CREATIONTIMESTAMP","labels":{"a":"1","b":"2"},"annotations":{"z":"1"},@MF(v1)},"immutable":true,"data":{"k1":"v","k2":"v"},"binaryData":{"b":"AQI="}}"#,
    );
    check(
        "ConfigMap",
        Method::POST,
        &format!("{NS}/configmaps"),
        Some(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "labels": {"b": "2", "a": "1"}, "annotations": {"z": "1"}},
            "data": {"k2": "v", "k1": "v"}, "binaryData": {"b": "AQI="}, "immutable": true})),
        201,
        &config_map,
    )
    .await;
    // Reads serve the stored bytes, with the resourceVersion after the uid.
    for read in ["", "?resourceVersion=0"] {
        check(
            &format!("ConfigMap GET{read}"),
            Method::GET,
            &format!("{NS}/configmaps/c{read}"),
            None,
            200,
            &config_map,
        )
        .await;
    }
    for read in ["", "?resourceVersion=0", "?labelSelector=a%3D1"] {
        check(
            &format!("ConfigMapList{read}"),
            Method::GET,
            &format!("{NS}/configmaps{read}"),
            None,
            200,
            &format!(
                r#"{{"kind":"ConfigMapList","apiVersion":"v1","metadata":{{"resourceVersion":"RESOURCEVERSION"}},"items":[{config_map}]}}"#
            ),
        )
        .await;
    }
    check(
        "Secret",
        Method::POST,
        &format!("{NS}/secrets"),
        Some(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"},
            "type": "Opaque", "data": {"a": "YQ=="}, "immutable": false})),
        201,
        &format!(
            r#"{{"kind":"Secret","apiVersion":"v1",{},"immutable":false,"data":{{"a":"YQ=="}},"type":"Opaque"}}"#,
            meta("s", true, "v1")
        ),
    )
    .await;
    check(
        "ServiceAccount",
        Method::POST,
        &format!("{NS}/serviceaccounts"),
        Some(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa"},
            "automountServiceAccountToken": false, "imagePullSecrets": [{"name": "p"}],
            "secrets": [{"name": "x", "kind": "Secret"}]})),
        201,
        &format!(
            r#"{{"kind":"ServiceAccount","apiVersion":"v1",{},"secrets":[{{"kind":"Secret","name":"x"}}],"imagePullSecrets":[{{"name":"p"}}],"automountServiceAccountToken":false}}"#,
            meta("sa", true, "v1")
        ),
    )
    .await;
    // Upstream also writes `"eventTime":null,"reportingComponent":"","reportingInstance":""`
    // (fields without omitempty), which genplane leaves out: a difference of content, not order.
    check(
        "Event",
        Method::POST,
        &format!("{NS}/events"),
        Some(json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"},
            "type": "Normal", "count": 1, "lastTimestamp": "2026-01-01T00:00:01Z",
            "firstTimestamp": "2026-01-01T00:00:00Z", "source": {"host": "h", "component": "c"},
            "message": "m", "reason": "R",
            "involvedObject": {"name": "c", "namespace": "fo", "kind": "ConfigMap", "apiVersion": "v1"}})),
        201,
        &format!(
            r#"{{"kind":"Event","apiVersion":"v1",{},"involvedObject":{{"kind":"ConfigMap","namespace":"fo","name":"c","apiVersion":"v1"}},"reason":"R","message":"m","source":{{"component":"c","host":"h"}},"firstTimestamp":"2026-01-01T00:00:00Z","lastTimestamp":"2026-01-01T00:00:01Z","count":1,"type":"Normal"}}"#,
            meta("e", true, "v1")
        ),
    )
    .await;
    check(
        "events.k8s.io Event",
        Method::POST,
        "/apis/events.k8s.io/v1/namespaces/fo/events",
        Some(json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e2"},
            "type": "Normal", "note": "n", "reason": "R", "action": "A",
            "regarding": {"kind": "ConfigMap", "name": "c", "namespace": "fo"},
            "reportingInstance": "i", "reportingController": "example.com/c",
            "eventTime": "2026-01-01T00:00:00.000000Z"})),
        201,
        &format!(
            r#"{{"kind":"Event","apiVersion":"events.k8s.io/v1",{},"eventTime":"2026-01-01T00:00:00.000000Z","reportingController":"example.com/c","reportingInstance":"i","action":"A","reason":"R","regarding":{{"kind":"ConfigMap","namespace":"fo","name":"c"}},"note":"n","type":"Normal"}}"#,
            meta("e2", true, "events.k8s.io/v1")
        ),
    )
    .await;
    // Upstream also writes `"status":{}` (a struct, never left out), which genplane leaves out.
    check(
        "ResourceQuota",
        Method::POST,
        &format!("{NS}/resourcequotas"),
        Some(json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
            "spec": {"hard": {"pods": "2", "configmaps": "10"}}})),
        201,
        &format!(
            r#"{{"kind":"ResourceQuota","apiVersion":"v1",{},"spec":{{"hard":{{"configmaps":"10","pods":"2"}}}}}}"#,
            meta("q", true, "v1")
        ),
    )
    .await;
    check(
        "Lease",
        Method::POST,
        "/apis/coordination.k8s.io/v1/namespaces/fo/leases",
        Some(json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"},
            "spec": {"leaseTransitions": 1, "renewTime": "2026-01-01T00:00:01.000000Z",
                "acquireTime": "2026-01-01T00:00:00.000000Z", "leaseDurationSeconds": 15,
                "holderIdentity": "h"}})),
        201,
        &format!(
            r#"{{"kind":"Lease","apiVersion":"coordination.k8s.io/v1",{},"spec":{{"holderIdentity":"h","leaseDurationSeconds":15,"acquireTime":"2026-01-01T00:00:00.000000Z","renewTime":"2026-01-01T00:00:01.000000Z","leaseTransitions":1}}}}"#,
            meta("l", true, "coordination.k8s.io/v1")
        ),
    )
    .await;
    let rules = json!([{"nonResourceURLs": [], "resourceNames": ["c"], "resources": ["configmaps"],
        "apiGroups": [""], "verbs": ["get"]}]);
    let rules_text = r#""rules":[{"verbs":["get"],"apiGroups":[""],"resources":["configmaps"],"resourceNames":["c"]}]"#;
    check(
        "Role",
        Method::POST,
        "/apis/rbac.authorization.k8s.io/v1/namespaces/fo/roles",
        Some(
            json!({"apiVersion": rbac, "kind": "Role", "metadata": {"name": "r"}, "rules": rules}),
        ),
        201,
        &format!(
            r#"{{"kind":"Role","apiVersion":"{rbac}",{},{rules_text}}}"#,
            meta("r", true, rbac)
        ),
    )
    .await;
    check(
        "ClusterRole",
        Method::POST,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        Some(json!({"apiVersion": rbac, "kind": "ClusterRole", "metadata": {"name": "fo-r"}, "rules": rules})),
        201,
        &format!(r#"{{"kind":"ClusterRole","apiVersion":"{rbac}",{},{rules_text}}}"#, meta("fo-r", false, rbac)),
    )
    .await;
    let binding = json!({"roleRef": {"name": "r", "kind": "Role", "apiGroup": "rbac.authorization.k8s.io"},
        "subjects": [{"namespace": "fo", "name": "u", "kind": "User", "apiGroup": "rbac.authorization.k8s.io"}]});
    let binding_text = r#""subjects":[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"u","namespace":"fo"}],"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"r"}"#;
    let mut role_binding = binding.clone();
    role_binding["apiVersion"] = json!(rbac);
    role_binding["kind"] = json!("RoleBinding");
    role_binding["metadata"] = json!({"name": "rb"});
    check(
        "RoleBinding",
        Method::POST,
        "/apis/rbac.authorization.k8s.io/v1/namespaces/fo/rolebindings",
        Some(role_binding),
        201,
        &format!(
            r#"{{"kind":"RoleBinding","apiVersion":"{rbac}",{},{binding_text}}}"#,
            meta("rb", true, rbac)
        ),
    )
    .await;
    let mut cluster_binding = binding.clone();
    cluster_binding["apiVersion"] = json!(rbac);
    cluster_binding["kind"] = json!("ClusterRoleBinding");
    cluster_binding["metadata"] = json!({"name": "fo-crb"});
    cluster_binding["roleRef"]["kind"] = json!("ClusterRole");
    check(
        "ClusterRoleBinding",
        Method::POST,
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        Some(cluster_binding),
        201,
        &format!(
            r#"{{"kind":"ClusterRoleBinding","apiVersion":"{rbac}",{},{}}}"#,
            meta("fo-crb", false, rbac),
            binding_text.replace(r#""kind":"Role""#, r#""kind":"ClusterRole""#)
        ),
    )
    .await;
    let webhook = json!({"name": "w.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
        "failurePolicy": "Ignore", "timeoutSeconds": 5,
        "clientConfig": {"url": "https://127.0.0.1:1/hook"},
        "rules": [{"scope": "*", "resources": ["secrets"], "apiVersions": ["v1"], "apiGroups": [""], "operations": ["CREATE"]}],
        "matchConditions": [{"expression": "true", "name": "m"}]});
    let webhook_text = r#""name":"w.example.com","clientConfig":{"url":"https://127.0.0.1:1/hook"},"rules":[{"operations":["CREATE"],"apiGroups":[""],"apiVersions":["v1"],"resources":["secrets"],"scope":"*"}],"failurePolicy":"Ignore","matchPolicy":"Equivalent","namespaceSelector":{},"objectSelector":{},"sideEffects":"None","timeoutSeconds":5,"admissionReviewVersions":["v1"]"#;
    check(
        "ValidatingWebhookConfiguration",
        Method::POST,
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        Some(json!({"apiVersion": admission, "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "vw"}, "webhooks": [webhook]})),
        201,
        &format!(
            r#"{{"kind":"ValidatingWebhookConfiguration","apiVersion":"{admission}",{},"webhooks":[{{{webhook_text},"matchConditions":[{{"name":"m","expression":"true"}}]}}]}}"#,
            meta_with_generation("vw", admission)
        ),
    )
    .await;
    let mut mutating = webhook.clone();
    mutating["reinvocationPolicy"] = json!("IfNeeded");
    check(
        "MutatingWebhookConfiguration",
        Method::POST,
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
        Some(json!({"apiVersion": admission, "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "mw"}, "webhooks": [mutating]})),
        201,
        &format!(
            r#"{{"kind":"MutatingWebhookConfiguration","apiVersion":"{admission}",{},"webhooks":[{{{webhook_text},"reinvocationPolicy":"IfNeeded","matchConditions":[{{"name":"m","expression":"true"}}]}}]}}"#,
            meta_with_generation("mw", admission)
        ),
    )
    .await;
    // Upstream also writes `"status":{}` (a struct, never left out), which genplane leaves out.
    check(
        "ValidatingAdmissionPolicy",
        Method::POST,
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
        Some(json!({"apiVersion": admission, "kind": "ValidatingAdmissionPolicy", "metadata": {"name": "vap"},
            "spec": {"variables": [{"expression": "1", "name": "v"}],
                "validations": [{"messageExpression": "'m'", "reason": "Invalid", "message": "m", "expression": "true"}],
                "failurePolicy": "Fail", "auditAnnotations": [{"valueExpression": "'v'", "key": "k"}],
                "matchConstraints": {"resourceRules": [{"resourceNames": ["x"], "operations": ["CREATE"],
                    "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]},
                "paramKind": {"kind": "ConfigMap", "apiVersion": "v1"}}})),
        201,
        &format!(
            r#"{{"kind":"ValidatingAdmissionPolicy","apiVersion":"{admission}",{},"spec":{{"paramKind":{{"apiVersion":"v1","kind":"ConfigMap"}},"matchConstraints":{{"namespaceSelector":{{}},"objectSelector":{{}},"resourceRules":[{{"resourceNames":["x"],"operations":["CREATE"],"apiGroups":[""],"apiVersions":["v1"],"resources":["configmaps"],"scope":"*"}}],"matchPolicy":"Equivalent"}},"validations":[{{"expression":"true","message":"m","reason":"Invalid","messageExpression":"'m'"}}],"failurePolicy":"Fail","auditAnnotations":[{{"key":"k","valueExpression":"'v'"}}],"variables":[{{"name":"v","expression":"1"}}]}}}}"#,
            meta_with_generation("vap", admission)
        ),
    )
    .await;
    check(
        "ValidatingAdmissionPolicyBinding",
        Method::POST,
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
        Some(json!({"apiVersion": admission, "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "vapb"},
            "spec": {"validationActions": ["Deny"], "paramRef": {"parameterNotFoundAction": "Deny", "namespace": "fo", "name": "c"},
                "policyName": "vap"}})),
        201,
        &format!(
            r#"{{"kind":"ValidatingAdmissionPolicyBinding","apiVersion":"{admission}",{},"spec":{{"policyName":"vap","paramRef":{{"name":"c","namespace":"fo","parameterNotFoundAction":"Deny"}},"validationActions":["Deny"]}}}}"#,
            meta_with_generation("vapb", admission)
        ),
    )
    .await;
    let crd = "apiextensions.k8s.io/v1";
    check(
        "CustomResourceDefinition",
        Method::POST,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        Some(json!({"apiVersion": crd, "kind": "CustomResourceDefinition", "metadata": {"name": "widgets.example.com"},
            "spec": {"scope": "Namespaced", "group": "example.com",
                "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
                "versions": [{"subresources": {"scale": {"statusReplicasPath": ".status.replicas", "specReplicasPath": ".spec.replicas"}, "status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                    "deprecated": true, "storage": true, "served": true, "name": "v1"}]}})),
        201,
        &format!(
            r#"{{"kind":"CustomResourceDefinition","apiVersion":"{crd}",{},"spec":{{"group":"example.com","names":{{"plural":"widgets","singular":"widget","kind":"Widget","listKind":"WidgetList"}},"scope":"Namespaced","versions":[{{"name":"v1","served":true,"storage":true,"deprecated":true,"schema":{{"openAPIV3Schema":{{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}},"subresources":{{"status":{{}},"scale":{{"specReplicasPath":".spec.replicas","statusReplicasPath":".status.replicas"}}}}}}],"conversion":{{"strategy":"None"}}}},"status":{{"conditions":null,"acceptedNames":{{"plural":"","kind":""}},"storedVersions":["v1"]}}}}"#,
            meta_with_generation("widgets.example.com", crd)
        ),
    )
    .await;

    // The reviews: answered, never stored.
    check(
        "SelfSubjectAccessReview",
        Method::POST,
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        Some(json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"resource": "configmaps", "verb": "get", "namespace": "fo"}}})),
        201,
        r#"{"kind":"SelfSubjectAccessReview","apiVersion":"authorization.k8s.io/v1","metadata":{},"spec":{"resourceAttributes":{"namespace":"fo","verb":"get","resource":"configmaps"}},"status":{"allowed":true}}"#,
    )
    .await;
    check(
        "SubjectAccessReview",
        Method::POST,
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        Some(json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"groups": ["g"], "user": "someone", "nonResourceAttributes": {"verb": "get", "path": "/x"}}})),
        201,
        r#"{"kind":"SubjectAccessReview","apiVersion":"authorization.k8s.io/v1","metadata":{},"spec":{"nonResourceAttributes":{"path":"/x","verb":"get"},"user":"someone","groups":["g"]},"status":{"allowed":false}}"#,
    )
    .await;
    check(
        "SelfSubjectRulesReview",
        Method::POST,
        "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
        Some(json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {"namespace": "fo"}})),
        201,
        r#"{"kind":"SelfSubjectRulesReview","apiVersion":"authorization.k8s.io/v1","metadata":{},"spec":{"namespace":"fo"},"status":{"resourceRules":[{"verbs":["*"],"apiGroups":["*"],"resources":["*"]},{"verbs":["create"],"apiGroups":["authorization.k8s.io"],"resources":["selfsubjectaccessreviews","selfsubjectrulesreviews"]},{"verbs":["create"],"apiGroups":["authentication.k8s.io"],"resources":["selfsubjectreviews"]}],"nonResourceRules":[{"verbs":["*"],"nonResourceURLs":["*"]},{"verbs":["get"],"nonResourceURLs":["/api","/api/*","/apis","/apis/*","/healthz","/livez","/openapi","/openapi/*","/readyz","/version","/version/"]},{"verbs":["get"],"nonResourceURLs":["/healthz","/livez","/readyz","/version","/version/"]}],"incomplete":false}}"#,
    )
    .await;
    check(
        "SelfSubjectReview",
        Method::POST,
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        Some(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})),
        201,
        r#"{"kind":"SelfSubjectReview","apiVersion":"authentication.k8s.io/v1","metadata":{},"status":{"userInfo":{"username":"genplane-admin","groups":["system:masters","system:authenticated"]}}}"#,
    )
    .await;
    // Upstream also writes `"boundObjectRef":null` (a pointer without omitempty).
    check(
        "TokenRequest",
        Method::POST,
        &format!("{NS}/serviceaccounts/sa/token"),
        Some(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600, "audiences": ["a"]}})),
        201,
        r#"{"kind":"TokenRequest","apiVersion":"authentication.k8s.io/v1","metadata":{"name":"sa","namespace":"fo","creationTimestamp":"CREATIONTIMESTAMP"},"spec":{"audiences":["a"],"expirationSeconds":3600},"status":{"token":"TOKEN","expirationTimestamp":"EXPIRATIONTIMESTAMP"}}"#,
    )
    .await;

    // A custom resource keeps sorted keys (upstream's unstructured objects), its Scale does not.
    // (Once the CRD is served: it is established a moment after it is created.)
    let widgets = "/apis/example.com/v1/namespaces/fo/widgets";
    eventually_async("the CRD to be served", || async {
        (send(&server, Method::GET, widgets, None).await.0 == 200).then_some(())
    })
    .await;
    check(
        "custom resource",
        Method::POST,
        "/apis/example.com/v1/namespaces/fo/widgets",
        Some(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
            "spec": {"replicas": 2, "b": 1}})),
        201,
        r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"creationTimestamp":"CREATIONTIMESTAMP","generation":1,"managedFields":[{"apiVersion":"example.com/v1","fieldsType":"FieldsV1","fieldsV1":{},"manager":"field-order","operation":"Update","time":"TIME"}],"name":"w","namespace":"fo","resourceVersion":"RESOURCEVERSION","uid":"UID"},"spec":{"b":1,"replicas":2}}"#,
    )
    .await;
    check(
        "Scale",
        Method::GET,
        "/apis/example.com/v1/namespaces/fo/widgets/w/scale",
        None,
        200,
        r#"{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"w","namespace":"fo","uid":"UID","resourceVersion":"RESOURCEVERSION","creationTimestamp":"CREATIONTIMESTAMP"},"spec":{"replicas":2},"status":{"replicas":0}}"#,
    )
    .await;

    // Status errors.
    check(
        "409 AlreadyExists",
        Method::POST,
        &format!("{NS}/configmaps"),
        Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})),
        409,
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps \"c\" already exists","reason":"AlreadyExists","details":{"name":"c","kind":"configmaps"},"code":409}"#,
    )
    .await;
    check(
        "404 NotFound",
        Method::GET,
        &format!("{NS}/configmaps/nope"),
        None,
        404,
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps \"nope\" not found","reason":"NotFound","details":{"name":"nope","kind":"configmaps"},"code":404}"#,
    )
    .await;
    // go-restful's service error in a served group version: empty details.
    for path in [
        format!("{NS}/foos"),
        "/apis/rbac.authorization.k8s.io/v1/foos".to_owned(),
        format!("{NS}/configmaps/c/foo"),
    ] {
        check(
            &format!("404 unknown resource {path}"),
            Method::GET,
            &path,
            None,
            404,
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","details":{},"code":404}"#,
        )
        .await;
    }
    // Upstream's not-found handler, past every web service: no details.
    check(
        "404 unknown group",
        Method::GET,
        "/apis/nothing.example.com/v1/foos",
        None,
        404,
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","code":404}"#,
    )
    .await;
    check(
        "422 Invalid",
        Method::POST,
        &format!("{NS}/configmaps"),
        Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c2"}, "data": {"a b": "x"}})),
        422,
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"ConfigMap \"c2\" is invalid: data[a b]: Invalid value: \"a b\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')","reason":"Invalid","details":{"name":"c2","kind":"ConfigMap","causes":[{"reason":"FieldValueInvalid","message":"Invalid value: \"a b\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')","field":"data[a b]"}]},"code":422}"#,
    )
    .await;
    let got = send_as(
        &server,
        Method::GET,
        &format!("{NS}/configmaps"),
        None,
        &[("impersonate-user", "nobody")],
    )
    .await;
    differences.check(
        "403 Forbidden",
        got,
        403,
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps is forbidden: User \"nobody\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"fo\"","reason":"Forbidden","details":{"kind":"configmaps"},"code":403}"#,
    );
    differences.assert_none();
    server.stop().await;
}

/// Built-in objects are stored in upstream's order, without their resourceVersion; one stored
/// with sorted keys by an earlier version is still read, and answered in upstream's order.
#[tokio::test]
async fn objects_are_stored_in_upstreams_order_and_sorted_ones_still_read() {
    let server = support::start().await;
    let (status, _) = send(
        &server,
        Method::POST,
        "/api/v1/namespaces/default/configmaps",
        Some(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "new"}, "data": {"k": "v"}})),
    )
    .await;
    assert_eq!(status, 201);
    let stored = server
        .storage
        .get("/registry/configmaps/default/new", None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        normalized(&stored.value),
        fixture(
            r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"new","namespace":"default","uid":"UID","creationTimestamp":"CREATIONTIMESTAMP",@MF(v1)},"data":{"k":"v"}}"#
        )
    );

    let sorted = json!({"apiVersion": "v1", "data": {"k": "v"}, "immutable": false, "kind": "ConfigMap",
        "metadata": {"creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"a": "b"}, "name": "old",
            "namespace": "default", "uid": "u1"}});
    server
        .storage
        .create(
            "/registry/configmaps/default/old",
            serde_json::to_vec(&sorted).unwrap().into(),
        )
        .await
        .unwrap();
    let old = r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"old","namespace":"default","uid":"UID","resourceVersion":"RESOURCEVERSION","creationTimestamp":"CREATIONTIMESTAMP","labels":{"a":"b"}},"immutable":false,"data":{"k":"v"}}"#;
    for read in ["", "?resourceVersion=0"] {
        let (status, body) = send(
            &server,
            Method::GET,
            &format!("/api/v1/namespaces/default/configmaps/old{read}"),
            None,
        )
        .await;
        assert_eq!((status, body.as_str()), (200, old), "GET{read}");
        let (status, body) = send(
            &server,
            Method::GET,
            &format!("/api/v1/namespaces/default/configmaps{read}"),
            None,
        )
        .await;
        assert_eq!(status, 200);
        assert!(body.contains(old), "LIST{read}: {body}");
    }
    server.stop().await;
}
