use super::*;
use crate::params::ParamSelection;
use crate::{Operation, Request};
use genplane_api::util::str_at;
use genplane_apimachinery::schema::GroupVersionResource;
use serde_json::json;

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

/// Stored policies and bindings; ConfigMaps (namespaced, found by name) as the only param
/// kind; apply configurations merged as granular maps (lists replaced).
#[derive(Debug, Default)]
struct Stored {
    policies: Vec<Value>,
    bindings: Vec<Value>,
    config_maps: Vec<Value>,
}

fn merge(live: Value, config: &Value) -> Value {
    match (live, config) {
        (Value::Object(mut live), Value::Object(config)) => {
            for (key, value) in config {
                let merged = merge(live.remove(key).unwrap_or(Value::Null), value);
                live.insert(key.clone(), merged);
            }
            Value::Object(live)
        }
        (_, config) => config.clone(),
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
                .filter(|c| matches!(selection, ParamSelection::Name(n) if str_at(c, &["metadata", "name"]) == n))
                .map(|c| Arc::new(c.clone()))
                .collect())
        })
    }
}

impl MutatingPolicies for Stored {
    fn policies(&self) -> BoxFuture<'_, Result<Listed, ApiError>> {
        Box::pin(async { Ok(Listed::unversioned(self.policies.clone())) })
    }

    fn bindings(&self) -> BoxFuture<'_, Result<Listed, ApiError>> {
        Box::pin(async { Ok(Listed::unversioned(self.bindings.clone())) })
    }

    fn apply_configuration(
        &self,
        _kind: &GroupVersionKind,
        object: Value,
        configuration: &Value,
    ) -> Result<Value, String> {
        Ok(merge(object, configuration))
    }
}

fn policy(name: &str, spec: Value) -> Value {
    let mut spec = spec;
    spec["matchConstraints"] = json!({"resourceRules": [{
        "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
        "resources": ["configmaps"]}]});
    spec["reinvocationPolicy"] = json!("Never");
    json!({"metadata": {"name": name, "uid": format!("uid-{name}"), "generation": 1}, "spec": spec})
}

fn apply(expression: &str) -> Value {
    json!({"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": expression}})
}

fn binding(name: &str, policy: &str, extra: Value) -> Value {
    let mut spec = json!({"policyName": policy});
    if let Some(extra) = extra.as_object() {
        for (k, v) in extra {
            spec[k] = v.clone();
        }
    }
    json!({"metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": "1"}, "spec": spec})
}

fn config_map(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {}})
}

/// Creates `object` in `namespace` through the plugin: the changed object, or the refusal.
async fn create(stored: Stored, namespace: &str, object: Value) -> Result<Value, ApiError> {
    let plugin = MutatingAdmissionPolicy::new(Arc::new(stored), Arc::new(Labeled));
    let request = Request {
        kind: GroupVersionKind::new("", "v1", "ConfigMap"),
        resource: GroupVersionResource::new("", "v1", "configmaps"),
        ..Request::default()
    };
    let name = str_at(&object, &["metadata", "name"]).to_owned();
    let attributes = Attributes {
        request: &request,
        operation: Operation::Create,
        namespace,
        name: &name,
        old_object: None,
    };
    let mut object = object;
    plugin.admit(attributes, &mut object).await?;
    Ok(object)
}

#[tokio::test]
async fn an_apply_configuration_merges_into_objects_of_selected_namespaces() {
    let stored = || Stored {
        policies: vec![policy(
            "add-label",
            json!({"mutations": [apply(
                "Object{metadata: Object.metadata{labels: {'mutated': 'yes', 'ns': namespaceObject.metadata.name}}}"
            )]}),
        )],
        bindings: vec![binding(
            "add-label",
            "add-label",
            json!({"matchResources": {"namespaceSelector": {"matchLabels": {"env": "team"}}}}),
        )],
        ..Stored::default()
    };
    let mut object = config_map("a");
    object["metadata"]["labels"] = json!({"kept": "1"});
    let changed = create(stored(), "team", object.clone()).await.unwrap();
    assert_eq!(
        changed["metadata"]["labels"],
        json!({"kept": "1", "mutated": "yes", "ns": "team"})
    );
    // another namespace: untouched
    assert_eq!(
        create(stored(), "other", object.clone()).await.unwrap(),
        object
    );
}

#[tokio::test]
async fn json_patches_apply_in_order_and_params_feed_them() {
    let stored = Stored {
        policies: vec![policy(
            "annotate",
            json!({
                "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                "variables": [{"name": "key", "expression": "'example.com/' + params.data.key"}],
                "mutations": [
                    {"patchType": "JSONPatch", "jsonPatch": {"expression":
                        "[JSONPatch{op: 'add', path: '/metadata/annotations', value: {}}, \
                          JSONPatch{op: 'add', path: '/metadata/annotations/' + jsonpatch.escapeKey(variables.key), value: params.data.value}]"}},
                    apply("Object{data: {'seen': object.metadata.annotations[variables.key]}}"),
                ],
            }),
        )],
        bindings: vec![binding(
            "annotate",
            "annotate",
            json!({"paramRef": {"name": "settings", "parameterNotFoundAction": "Allow"}}),
        )],
        config_maps: vec![
            json!({"metadata": {"namespace": "team", "name": "settings"},
            "data": {"key": "owner", "value": "me"}}),
        ],
    };
    let changed = create(stored, "team", config_map("a")).await.unwrap();
    assert_eq!(
        changed["metadata"]["annotations"],
        json!({"example.com/owner": "me"})
    );
    // the second mutation saw the first one's change
    assert_eq!(changed["data"], json!({"seen": "me"}));
}

#[tokio::test]
async fn a_failing_mutation_refuses_with_fail_and_changes_nothing_with_ignore() {
    let stored = |failure_policy: &str| Stored {
        policies: vec![policy(
            "broken",
            json!({
                "failurePolicy": failure_policy,
                "mutations": [
                    apply("Object{metadata: Object.metadata{labels: {'first': 'yes'}}}"),
                    apply("Object{data: {'x': object.data.missing}}"),
                ],
            }),
        )],
        bindings: vec![binding("broken-binding", "broken", json!({}))],
        ..Stored::default()
    };
    let refused = create(stored("Fail"), "team", config_map("a"))
        .await
        .unwrap_err();
    assert_eq!(refused.code, 403);
    assert_eq!(
        refused.message,
        "configmaps \"a\" is forbidden: policy 'broken' with binding 'broken-binding' denied \
         request: expression 'Object{data: {'x': object.data.missing}}' resulted in error: no \
         such key: missing"
    );
    // Ignore: the binding's partial change is dropped too
    assert_eq!(
        create(stored("Ignore"), "team", config_map("a"))
            .await
            .unwrap(),
        config_map("a")
    );
}

#[tokio::test]
async fn match_conditions_skip_and_wrong_results_fail() {
    let stored = |mutation: Value| Stored {
        policies: vec![policy(
            "conditional",
            json!({
                "matchConditions": [{"name": "named-b", "expression": "object.metadata.name == 'b'"}],
                "mutations": [mutation],
            }),
        )],
        bindings: vec![binding("conditional", "conditional", json!({}))],
        ..Stored::default()
    };
    let label = apply("Object{metadata: Object.metadata{labels: {'b': 'yes'}}}");
    assert_eq!(
        create(stored(label.clone()), "team", config_map("a"))
            .await
            .unwrap(),
        config_map("a")
    );
    let changed = create(stored(label), "team", config_map("b"))
        .await
        .unwrap();
    assert_eq!(changed["metadata"]["labels"], json!({"b": "yes"}));
    let refused = create(stored(apply("'not an object'")), "team", config_map("b"))
        .await
        .unwrap_err();
    assert!(
        refused
            .message
            .ends_with("must evaluate to an Object, not string"),
        "{}",
        refused.message
    );
    let refused = create(
        stored(json!({"patchType": "JSONPatch", "jsonPatch": {"expression":
            "[JSONPatch{op: 'replace', path: '/spec/none', value: 1}]"}})),
        "team",
        config_map("b"),
    )
    .await
    .unwrap_err();
    assert!(
        refused.message.contains("JSON Patch"),
        "{}",
        refused.message
    );
}

#[tokio::test]
async fn an_if_needed_binding_runs_again_after_a_later_one_changed_the_object() {
    let copy = |policy_name: &str, reinvocation: &str| {
        let mut copy = policy(
            policy_name,
            json!({"mutations": [apply(
                "Object{metadata: Object.metadata{labels: {'copy': \
                 has(object.metadata.labels) && 'b' in object.metadata.labels ? object.metadata.labels.b : 'none'}}}"
            )]}),
        );
        copy["spec"]["reinvocationPolicy"] = json!(reinvocation);
        copy
    };
    let set_b = policy(
        "b-set",
        json!({"mutations": [apply("Object{metadata: Object.metadata{labels: {'b': 'set'}}}")]}),
    );
    for (reinvocation, copied) in [("IfNeeded", "set"), ("Never", "none")] {
        let stored = Stored {
            policies: vec![copy("a-copy", reinvocation), set_b.clone()],
            bindings: vec![
                binding("a-copy", "a-copy", json!({})),
                binding("b-set", "b-set", json!({})),
            ],
            ..Stored::default()
        };
        let chain = crate::Chain::new(
            vec![Arc::new(MutatingAdmissionPolicy::new(
                Arc::new(stored),
                Arc::new(Labeled),
            ))],
            Vec::new(),
        );
        let request = Request {
            kind: GroupVersionKind::new("", "v1", "ConfigMap"),
            resource: GroupVersionResource::new("", "v1", "configmaps"),
            ..Request::default()
        };
        let attributes = Attributes {
            request: &request,
            operation: Operation::Create,
            namespace: "team",
            name: "a",
            old_object: None,
        };
        let mut object = config_map("a");
        let mutated = chain.mutate(attributes, &mut object).await.unwrap();
        assert_eq!(mutated, crate::Mutated::Changed);
        assert_eq!(
            object["metadata"]["labels"],
            json!({"b": "set", "copy": copied}),
            "{reinvocation}"
        );
    }
}
