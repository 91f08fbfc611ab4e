use super::*;
use crate::{Operation, Request};
use genplane_api::util::str_at;
use genplane_apimachinery::schema::{GroupVersionKind, GroupVersionResource};
use std::sync::Mutex;

/// Namespaces labelled `env: <name>`.
#[derive(Debug)]
struct Labeled;

impl Namespaces for Labeled {
    fn get<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Value>, ApiError>> {
        Box::pin(async move {
            Ok(Some(
                json!({"metadata": {"name": name, "labels": {"env": name}}}),
            ))
        })
    }

    fn create<'a>(&'a self, _name: &'a str) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async { Ok(()) })
    }
}

/// Stored policies and bindings; ConfigMaps (namespaced) as the only param kind.
#[derive(Debug, Default)]
struct Stored {
    policies: Mutex<Vec<Value>>,
    bindings: Vec<Value>,
    config_maps: Vec<Value>,
    /// The generation both lists report (`None`: unknown).
    generation: Mutex<Option<u64>>,
}

impl Stored {
    fn listed(&self, items: Vec<Value>) -> Listed {
        Listed {
            generation: *self.generation.lock().unwrap(),
            items: Arc::new(items),
        }
    }
}

impl Policies for Stored {
    fn policies(&self) -> BoxFuture<'_, Result<Listed, ApiError>> {
        Box::pin(async { Ok(self.listed(self.policies.lock().unwrap().clone())) })
    }

    fn bindings(&self) -> BoxFuture<'_, Result<Listed, ApiError>> {
        Box::pin(async { Ok(self.listed(self.bindings.clone())) })
    }
}

impl Params for Stored {
    fn param_scope(&self, api_version: &str, kind: &str) -> Option<bool> {
        (api_version == "v1" && kind == "ConfigMap").then_some(true)
    }

    fn params<'a>(
        &'a self,
        _api_version: &'a str,
        _kind: &'a str,
        namespace: &'a str,
        selection: ParamSelection<'a>,
    ) -> BoxFuture<'a, Result<Vec<Arc<Value>>, ApiError>> {
        Box::pin(async move {
            Ok(self
                .config_maps
                .iter()
                .filter(|c| str_at(c, &["metadata", "namespace"]) == namespace)
                .filter(|c| match selection {
                    ParamSelection::Name(name) => str_at(c, &["metadata", "name"]) == name,
                    ParamSelection::Selector(selector) => {
                        let labels: std::collections::BTreeMap<String, String> = c
                            .pointer("/metadata/labels")
                            .and_then(Value::as_object)
                            .map(|l| {
                                l.iter()
                                    .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                                    .collect()
                            })
                            .unwrap_or_default();
                        selector.matches(&labels)
                    }
                })
                .map(|c| Arc::new(c.clone()))
                .collect())
        })
    }
}

fn policy(name: &str, spec: Value) -> Value {
    let mut spec = spec;
    if spec.get("matchConstraints").is_none() {
        spec["matchConstraints"] = json!({"resourceRules": [{
            "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
            "resources": ["configmaps"]}]});
    }
    json!({"metadata": {"name": name, "uid": format!("uid-{name}"), "generation": 1}, "spec": spec})
}

fn binding(name: &str, policy: &str, actions: &[&str], extra: Value) -> Value {
    let mut spec = json!({"policyName": policy, "validationActions": actions});
    if let Some(extra) = extra.as_object() {
        for (k, v) in extra {
            spec[k] = v.clone();
        }
    }
    json!({"metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": "1"}, "spec": spec})
}

fn config_map(namespace: &str, name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"namespace": namespace, "name": name, "labels": {"role": "limits"}},
        "data": data})
}

fn request() -> Request {
    Request {
        kind: GroupVersionKind::new("", "v1", "ConfigMap"),
        resource: GroupVersionResource::new("", "v1", "configmaps"),
        ..Request::default()
    }
}

fn plugin(stored: Stored) -> ValidatingAdmissionPolicy {
    ValidatingAdmissionPolicy::new(Arc::new(stored), Arc::new(Labeled))
}

async fn create(
    plugin: &ValidatingAdmissionPolicy,
    request: &Request,
    namespace: &str,
    object: &Value,
) -> Result<(), ApiError> {
    let attributes = Attributes {
        request,
        operation: Operation::Create,
        namespace,
        name: object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or(""),
        old_object: None,
    };
    plugin.validate(attributes, Some(object)).await
}

fn named(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}, "data": {}})
}

fn limited_policy() -> Value {
    policy(
        "max-keys",
        json!({
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "variables": [{"name": "keys", "expression": "size(object.data)"}],
            "validations": [{
                "expression": "variables.keys <= int(params.data.max)",
                "messageExpression": "'at most ' + params.data.max + ' keys, not ' + string(variables.keys)",
            }],
        }),
    )
}

#[tokio::test]
async fn a_deny_binding_refuses_with_the_policys_message_and_reason() {
    let plugin = plugin(Stored {
        policies: Mutex::new(vec![limited_policy()]),
        bindings: vec![binding(
            "max-keys-binding",
            "max-keys",
            &["Deny"],
            json!({"paramRef": {"name": "limits", "parameterNotFoundAction": "Deny"}}),
        )],
        config_maps: vec![config_map("team", "limits", json!({"max": "1"}))],
        ..Stored::default()
    });
    let request = request();
    let mut object = named("two", json!({}));
    object["data"] = json!({"a": "1", "b": "2"});
    let refused = create(&plugin, &request, "team", &object)
        .await
        .unwrap_err();
    assert_eq!(refused.code, 422);
    assert_eq!(refused.reason, "Invalid");
    assert_eq!(
        refused.message,
        "configmaps \"two\" is forbidden: ValidatingAdmissionPolicy 'max-keys' with binding \
         'max-keys-binding' denied request: at most 1 keys, not 2"
    );
    object["data"] = json!({"a": "1"});
    create(&plugin, &request, "team", &object).await.unwrap();
    // no param in another namespace: Deny refuses
    let refused = create(&plugin, &request, "other", &object)
        .await
        .unwrap_err();
    assert!(
        refused.message.ends_with(
            "denied request: failed to configure binding: no params found for policy binding \
             with `Deny` parameterNotFoundAction"
        ),
        "{}",
        refused.message
    );
}

#[tokio::test]
async fn warn_and_audit_actions_admit_and_report() {
    let spec = json!({"validations": [{"expression": "object.metadata.name != 'bad'",
        "message": "no bad names", "reason": "Forbidden"}],
        "auditAnnotations": [{"key": "name", "valueExpression": "object.metadata.name"}]});
    let plugin = plugin(Stored {
        policies: Mutex::new(vec![policy("names", spec)]),
        bindings: vec![binding("names", "names", &["Warn", "Audit"], json!({}))],
        ..Stored::default()
    });
    let request = request();
    create(&plugin, &request, "team", &named("bad", json!({})))
        .await
        .unwrap();
    assert_eq!(
        request.warnings.take(),
        [
            "Validation failed for ValidatingAdmissionPolicy 'names' with binding 'names': no bad names"
        ]
    );
    let annotations = request.audit_annotations.take();
    assert_eq!(
        annotations[0].key,
        "validation.policy.admission.k8s.io/validation_failure"
    );
    let failure: Value = serde_json::from_str(&annotations[0].value).unwrap();
    assert_eq!(
        failure,
        json!([{"message": "no bad names", "policy": "names", "binding": "names",
            "expressionIndex": 0, "validationActions": ["Warn", "Audit"]}])
    );
    assert_eq!(
        (annotations[1].key.as_str(), annotations[1].value.as_str()),
        ("names/name", "bad")
    );
}

#[tokio::test]
async fn the_reason_gives_the_code() {
    let spec = json!({"validations": [{"expression": "false", "reason": "Forbidden"}]});
    let plugin = plugin(Stored {
        policies: Mutex::new(vec![policy("never", spec)]),
        bindings: vec![binding("never", "never", &["Deny"], json!({}))],
        ..Stored::default()
    });
    let refused = create(&plugin, &request(), "team", &named("x", json!({})))
        .await
        .unwrap_err();
    assert_eq!((refused.code, refused.reason.as_str()), (403, "Forbidden"));
    assert!(
        refused
            .message
            .ends_with("denied request: failed expression: false"),
        "{}",
        refused.message
    );
}

#[tokio::test]
async fn failures_follow_the_failure_policy() {
    for (policy_name, failure_policy, refused) in
        [("fail", "Fail", true), ("ignore", "Ignore", false)]
    {
        let spec = json!({"failurePolicy": failure_policy,
            "validations": [{"expression": "object.data.missing == 'x'"}]});
        let plugin = plugin(Stored {
            policies: Mutex::new(vec![policy(policy_name, spec)]),
            bindings: vec![binding("b", policy_name, &["Deny"], json!({}))],
            ..Stored::default()
        });
        let answer = create(&plugin, &request(), "team", &named("x", json!({}))).await;
        assert_eq!(answer.is_err(), refused, "{answer:?}");
        if let Err(error) = answer {
            assert_eq!(
                error.message,
                "configmaps \"x\" is forbidden: ValidatingAdmissionPolicy 'fail' with binding 'b' \
                 denied request: expression 'object.data.missing == 'x'' resulted in error: no \
                 such key: missing"
            );
        }
    }
    // a compile error too
    let spec = json!({"validations": [{"expression": "object.("}]});
    let plugin = plugin(Stored {
        policies: Mutex::new(vec![policy("broken", spec)]),
        bindings: vec![binding("b", "broken", &["Deny"], json!({}))],
        ..Stored::default()
    });
    let error = create(&plugin, &request(), "team", &named("x", json!({})))
        .await
        .unwrap_err();
    assert!(
        error
            .message
            .contains("denied request: compilation error: compilation failed: ERROR:"),
        "{}",
        error.message
    );
}

#[tokio::test]
async fn selectors_rules_and_conditions_exclude() {
    let deny_all = json!({"validations": [{"expression": "false", "message": "no"}]});
    let mut excluding = deny_all.clone();
    excluding["matchConditions"] = json!([{"name": "not-kept", "expression": "!has(object.metadata.labels) || !('keep' in object.metadata.labels)"}]);
    let plugin = plugin(Stored {
        policies: Mutex::new(vec![policy("deny", excluding)]),
        bindings: vec![binding(
            "prod-only",
            "deny",
            &["Deny"],
            json!({"matchResources": {
                "namespaceSelector": {"matchLabels": {"env": "prod"}},
                "objectSelector": {"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]},
                "excludeResourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                    "operations": ["*"], "resources": ["configmaps"], "resourceNames": ["allowed"]}]}}),
        )],
        ..Stored::default()
    });
    let request = request();
    assert!(
        create(&plugin, &request, "prod", &named("x", json!({})))
            .await
            .is_err()
    );
    // the namespace selector, the object selector, the excluded name, the match condition
    create(&plugin, &request, "dev", &named("x", json!({})))
        .await
        .unwrap();
    create(&plugin, &request, "prod", &named("x", json!({"skip": "1"})))
        .await
        .unwrap();
    create(&plugin, &request, "prod", &named("allowed", json!({})))
        .await
        .unwrap();
    create(&plugin, &request, "prod", &named("x", json!({"keep": "1"})))
        .await
        .unwrap();
    // the policy's rules: another resource is not matched
    let secrets = Request {
        kind: GroupVersionKind::new("", "v1", "Secret"),
        resource: GroupVersionResource::new("", "v1", "secrets"),
        ..Request::default()
    };
    create(&plugin, &secrets, "prod", &named("x", json!({})))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_selector_runs_every_selected_param_and_allow_admits_without_one() {
    let plugin = plugin(Stored {
        policies: Mutex::new(vec![limited_policy()]),
        bindings: vec![binding(
            "b",
            "max-keys",
            &["Deny"],
            json!({"paramRef": {"selector": {"matchLabels": {"role": "limits"}},
                "parameterNotFoundAction": "Allow"}}),
        )],
        config_maps: vec![
            config_map("team", "loose", json!({"max": "5"})),
            config_map("team", "strict", json!({"max": "0"})),
        ],
        ..Stored::default()
    });
    let request = request();
    let mut object = named("one", json!({}));
    object["data"] = json!({"a": "1"});
    let refused = create(&plugin, &request, "team", &object)
        .await
        .unwrap_err();
    assert!(
        refused.message.ends_with("at most 0 keys, not 1"),
        "{}",
        refused.message
    );
    create(&plugin, &request, "elsewhere", &object)
        .await
        .unwrap();
}

#[tokio::test]
async fn policies_compile_once_per_generation() {
    let stored = Arc::new(Stored {
        policies: Mutex::new(vec![policy(
            "p",
            json!({"validations": [{"expression": "object.metadata.name != 'a'"}]}),
        )]),
        bindings: vec![binding("b", "p", &["Deny"], json!({}))],
        ..Stored::default()
    });
    let plugin = ValidatingAdmissionPolicy::new(stored.clone(), Arc::new(Labeled));
    let request = request();
    assert!(
        create(&plugin, &request, "team", &named("a", json!({})))
            .await
            .is_err()
    );
    let first = plugin.cache().policies["uid-p"].clone();
    create(&plugin, &request, "team", &named("b", json!({})))
        .await
        .unwrap();
    assert!(Arc::ptr_eq(&first, &plugin.cache().policies["uid-p"]));
    // a new generation is compiled again
    let mut changed = policy(
        "p",
        json!({"validations": [{"expression": "object.metadata.name != 'b'"}]}),
    );
    changed["metadata"]["generation"] = json!(2);
    *stored.policies.lock().unwrap() = vec![changed];
    assert!(
        create(&plugin, &request, "team", &named("b", json!({})))
            .await
            .is_err()
    );
    create(&plugin, &request, "team", &named("a", json!({})))
        .await
        .unwrap();
    assert!(!Arc::ptr_eq(&first, &plugin.cache().policies["uid-p"]));
}

#[tokio::test]
async fn what_is_bound_is_kept_while_the_lists_generations_stay() {
    let stored = Arc::new(Stored {
        policies: Mutex::new(vec![policy(
            "p",
            json!({"validations": [{"expression": "object.metadata.name != 'a'"}]}),
        )]),
        bindings: vec![binding("b", "p", &["Deny"], json!({}))],
        generation: Mutex::new(Some(1)),
        ..Stored::default()
    });
    let plugin = ValidatingAdmissionPolicy::new(stored.clone(), Arc::new(Labeled));
    let request = request();
    let refused = |name: &'static str| {
        let (plugin, request) = (&plugin, &request);
        async move {
            create(plugin, request, "team", &named(name, json!({})))
                .await
                .is_err()
        }
    };
    assert!(refused("a").await && !refused("b").await);
    let bound = || plugin.cache().bound.clone().unwrap();
    let first = bound();
    assert_eq!(first.0, (1, 1));
    // a list of the same generation is taken to be the same: nothing is read again
    let mut changed = policy(
        "p",
        json!({"validations": [{"expression": "object.metadata.name != 'b'"}]}),
    );
    changed["metadata"]["generation"] = json!(2);
    *stored.policies.lock().unwrap() = vec![changed];
    assert!(refused("a").await && !refused("b").await);
    assert!(Arc::ptr_eq(&first.1, &bound().1));
    // a new generation is read
    *stored.generation.lock().unwrap() = Some(2);
    assert!(!refused("a").await && refused("b").await);
    assert_eq!(bound().0, (2, 2));
}

#[tokio::test]
async fn request_and_namespace_object_are_visible() {
    let spec = json!({"validations": [
        {"expression": "request.operation == 'CREATE' && request.namespace == 'team'"},
        {"expression": "namespaceObject.metadata.labels.env == 'team'"},
        {"expression": "oldObject == null && params == null"},
    ]});
    let plugin = plugin(Stored {
        policies: Mutex::new(vec![policy("p", spec)]),
        bindings: vec![binding("b", "p", &["Deny"], json!({}))],
        ..Stored::default()
    });
    create(&plugin, &request(), "team", &named("x", json!({})))
        .await
        .unwrap();
}

#[tokio::test]
async fn writes_of_policies_are_exempt() {
    let spec = json!({"validations": [{"expression": "false"}],
        "matchConstraints": {"resourceRules": [{"apiGroups": ["*"], "apiVersions": ["*"],
            "operations": ["*"], "resources": ["*"]}]}});
    let plugin = plugin(Stored {
        policies: Mutex::new(vec![policy("p", spec)]),
        bindings: vec![binding("b", "p", &["Deny"], json!({}))],
        ..Stored::default()
    });
    let bindings = Request {
        kind: GroupVersionKind::new(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingAdmissionPolicyBinding",
        ),
        resource: GroupVersionResource::new(
            "admissionregistration.k8s.io",
            "v1",
            "validatingadmissionpolicybindings",
        ),
        ..Request::default()
    };
    create(&plugin, &bindings, "", &named("x", json!({})))
        .await
        .unwrap();
    assert!(
        create(&plugin, &request(), "team", &named("x", json!({})))
            .await
            .is_err()
    );
}

/// Comparisons of operands whose types are certain and have no overload are warned of, as
/// cel-go's checker reports them; numbers of any kinds compare, and dynamic values are not
/// judged.
#[test]
fn the_type_check_warns_of_comparisons_without_an_overload() {
    let config_map = json!({"type": "object", "properties": {
        "metadata": {"type": "object", "properties": {"name": {"type": "string"},
            "generation": {"type": "integer"}}},
        "data": {"type": "object", "additionalProperties": {"type": "string"}}}});
    let expressions = [
        (
            "object.data.size() <= 'three'",
            Some("1:20: found no matching overload for '_<=_' applied to '(int, string)'"),
        ),
        (
            "object.metadata.name == 1",
            Some("1:22: found no matching overload for '_==_' applied to '(string, int)'"),
        ),
        (
            "object.metadata.generation > true",
            Some("1:28: found no matching overload for '_>_' applied to '(int, bool)'"),
        ),
        (
            "object.data.size() <= 3.5 && object.metadata.generation != 2u",
            None,
        ),
        ("object.metadata.name == 'a' && size(object.data) < 3", None),
        // a map of strings' values are strings
        (
            "object.data.a == 1 || params.data.max == 'x'",
            Some("1:15: found no matching overload for '_==_' applied to '(string, int)'"),
        ),
        // the request is not typed: judged when it runs
        ("request.name == 1", None),
        ("int(object.metadata.name) < 3", None),
    ];
    let validations: Vec<Value> = expressions
        .iter()
        .map(|(e, _)| json!({"expression": e}))
        .collect();
    let spec: PolicySpec = serde_json::from_value(json!({
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "matchConstraints": {"resourceRules": [
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["*"], "resources": ["configmaps"]}]},
        "validations": validations}))
    .unwrap();
    let kinds = [CheckedKind {
        name: "/v1, Kind=ConfigMap".to_owned(),
        schema: config_map.clone(),
    }];
    let warnings = type_check(&spec, &kinds, Some(&config_map));
    let expected: Vec<(String, String)> = expressions
        .iter()
        .enumerate()
        .filter_map(|(i, (_, warning))| {
            warning.map(|w| {
                (
                    format!("spec.validations[{i}].expression"),
                    format!("/v1, Kind=ConfigMap: ERROR: <input>:{w}\n"),
                )
            })
        })
        .collect();
    assert_eq!(warnings, expected);
}

#[test]
fn the_type_check_warns_of_fields_the_kind_does_not_have() {
    let config_map = json!({"type": "object", "properties": {
        "apiVersion": {"type": "string"}, "kind": {"type": "string"},
        "metadata": {"type": "object", "properties": {"name": {"type": "string"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}}}},
        "data": {"type": "object", "additionalProperties": {"type": "string"}}}});
    let spec: PolicySpec = serde_json::from_value(json!({
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "matchConstraints": {"resourceRules": [
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["*"], "resources": ["configmaps", "configmaps/status"]},
            {"apiGroups": ["*"], "apiVersions": ["v1"], "operations": ["*"], "resources": ["things"]}]},
        "validations": [
            {"expression": "size(object.data) < 3 && object.metadata.labels.a == 'b'"},
            {"expression": "object.spec.replicas < 3", "messageExpression": "'max ' + params.data.max"},
            {"expression": "true", "messageExpression": "params.nope"},
        ]}))
    .unwrap();
    assert_eq!(
        resources_to_check(&spec),
        [("".to_owned(), "v1".to_owned(), "configmaps".to_owned())]
    );
    let kinds = [CheckedKind {
        name: "/v1, Kind=ConfigMap".to_owned(),
        schema: config_map.clone(),
    }];
    let warnings = type_check(&spec, &kinds, Some(&config_map));
    assert_eq!(
        warnings,
        [
            (
                "spec.validations[1].expression".to_owned(),
                "/v1, Kind=ConfigMap: ERROR: <input>:1:7: undefined field 'spec'\n".to_owned()
            ),
            (
                "spec.validations[2].messageExpression".to_owned(),
                "/v1, Kind=ConfigMap: ERROR: <input>:1:7: undefined field 'nope'\n".to_owned()
            ),
        ]
    );
}
