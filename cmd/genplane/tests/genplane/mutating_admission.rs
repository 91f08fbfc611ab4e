//! MutatingAdmissionPolicies of the real binary (alpha): served only with the
//! `MutatingAdmissionPolicy` feature gate and `--runtime-config` enabling
//! `admissionregistration.k8s.io/v1alpha1`, as upstream; created with kubectl, they change
//! ConfigMaps written with kubectl by apply configurations and JSON patches, with params, and
//! follow their failure policy on runtime errors; the changed object is validated as any.

#![allow(clippy::unwrap_used)]

use serde_json::{Value, json};

use crate::admission::kubectl_stdin;
use crate::support::{Apiserver, eventually, ok, start_with, text};

const GATE: &str = "--feature-gates=MutatingAdmissionPolicy=true";
const RUNTIME_CONFIG: &str = "--runtime-config=admissionregistration.k8s.io/v1alpha1=true";

/// Whether the server lists the alpha kinds in discovery, and what a GET of their group
/// version answers.
fn served(server: &Apiserver) -> (bool, String) {
    let resources = ok(server.kubectl(
        "kubectl",
        &[
            "api-resources",
            "--api-group=admissionregistration.k8s.io",
            "-o",
            "name",
        ],
    ));
    let raw = server.kubectl(
        "kubectl",
        &[
            "get",
            "--raw",
            "/apis/admissionregistration.k8s.io/v1alpha1",
        ],
    );
    (
        resources.contains("mutatingadmissionpolicies.admissionregistration.k8s.io")
            && resources.contains("mutatingadmissionpolicybindings.admissionregistration.k8s.io"),
        text(&raw),
    )
}

#[test]
fn mutating_admission_policies_are_served_only_with_the_gate_and_the_runtime_config() {
    for flags in [&[][..], &[GATE][..], &[RUNTIME_CONFIG][..]] {
        let server = start_with(flags);
        let (listed, raw) = served(&server);
        assert!(!listed, "{flags:?}");
        assert!(raw.contains("NotFound"), "{flags:?}: {raw}");
        let out = server.kubectl("kubectl", &["get", "mutatingadmissionpolicies"]);
        assert!(
            text(&out)
                .contains("the server doesn't have a resource type \"mutatingadmissionpolicies\""),
            "{flags:?}: {}",
            text(&out)
        );
    }
    let server = start_with(&[GATE, RUNTIME_CONFIG]);
    let (listed, raw) = served(&server);
    assert!(listed, "{raw}");
    assert!(
        raw.contains("\"kind\":\"MutatingAdmissionPolicy\""),
        "{raw}"
    );
    // Upstream's defaults, validation, table and OpenAPI.
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1alpha1", "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": "defaults"},
        "spec": {"reinvocationPolicy": "Never",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["configmaps"]}]},
            "mutations": [{"patchType": "ApplyConfiguration",
                "applyConfiguration": {"expression": "Object{}"}}]}});
    ok(kubectl_stdin(&server, &["create", "-f", "-"], &policy));
    let stored: Value = serde_json::from_str(&ok(server.kubectl(
        "kubectl",
        &["get", "mutatingadmissionpolicy", "defaults", "-o", "json"],
    )))
    .unwrap();
    assert_eq!(stored["spec"]["failurePolicy"], "Fail");
    assert_eq!(
        stored["spec"]["matchConstraints"]["matchPolicy"],
        "Equivalent"
    );
    assert_eq!(
        stored["spec"]["matchConstraints"]["resourceRules"][0]["scope"],
        "*"
    );
    assert_eq!(stored["metadata"]["generation"], 1);
    let table = ok(server.kubectl("kubectl", &["get", "mutatingadmissionpolicies"]));
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "MUTATIONS", "PARAMKIND", "AGE"], "{table}");
    assert!(table.contains("defaults   1           <unset>"), "{table}");
    let explained = ok(server.kubectl(
        "kubectl",
        &[
            "explain",
            "mutatingadmissionpolicies.spec.mutations.jsonPatch",
        ],
    ));
    assert!(explained.contains("expression"), "{explained}");
    let mut bad = policy.clone();
    bad["metadata"]["name"] = json!("bad");
    bad["spec"]["matchConstraints"]["resourceRules"][0]["operations"] = json!(["DELETE"]);
    bad["spec"]["mutations"] = json!([{"patchType": "JSONPatch",
        "applyConfiguration": {"expression": "Object{}"}}]);
    bad["spec"]
        .as_object_mut()
        .unwrap()
        .remove("reinvocationPolicy");
    let refused = text(&kubectl_stdin(&server, &["create", "-f", "-"], &bad));
    for expected in [
        "spec.matchConstraints.resourceRules[0].operations[0]: Unsupported value: \"DELETE\"",
        "spec.mutations[0].jsonPatch: Required value",
        "spec.mutations[0].applyConfiguration: Forbidden",
        "spec.reinvocationPolicy: Required value",
    ] {
        assert!(refused.contains(expected), "{expected}: {refused}");
    }
    let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1alpha1", "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": "defaults"},
        "spec": {"policyName": "defaults", "paramRef": {"name": "p", "namespace": "default",
            "parameterNotFoundAction": "Allow"}}});
    ok(kubectl_stdin(&server, &["create", "-f", "-"], &binding));
    let bindings = ok(server.kubectl("kubectl", &["get", "mutatingadmissionpolicybindings"]));
    assert!(
        bindings.contains("defaults   defaults     default/p"),
        "{bindings}"
    );
}

fn policy(name: &str, failure: &str, selector: Value, extra: Value, mutations: Value) -> Value {
    let mut spec = json!({"failurePolicy": failure, "reinvocationPolicy": "Never",
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE"], "resources": ["configmaps"]}],
            "objectSelector": selector},
        "mutations": mutations});
    for (key, value) in extra.as_object().unwrap() {
        spec[key] = value.clone();
    }
    json!({"apiVersion": "admissionregistration.k8s.io/v1alpha1", "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": name}, "spec": spec})
}

fn binding(name: &str, spec: Value) -> Value {
    let mut spec = spec;
    spec["policyName"] = json!(name);
    json!({"apiVersion": "admissionregistration.k8s.io/v1alpha1", "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": name}, "spec": spec})
}

fn configmap(name: &str, namespace: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels}, "data": {"k": "v"}})
}

/// The stored ConfigMap `namespace/name`.
fn stored(server: &Apiserver, namespace: &str, name: &str) -> Value {
    serde_json::from_str(&ok(server.kubectl(
        "kubectl",
        &["get", "configmap", name, "-n", namespace, "-o", "json"],
    )))
    .unwrap()
}

/// Creates `object` once a server-side dry run of it gives what `ready` accepts (the
/// policies are read from the watch cache, which follows their creation).
fn create_when(server: &Apiserver, object: &Value, what: &str, ready: impl Fn(&Value) -> bool) {
    eventually(what, || {
        let out = kubectl_stdin(
            server,
            &["create", "--dry-run=server", "-o", "json", "-f", "-"],
            object,
        );
        let answered: Value = serde_json::from_slice(&out.stdout).ok()?;
        ready(&answered).then_some(())
    });
    ok(kubectl_stdin(server, &["create", "-f", "-"], object));
}

#[test]
fn mutating_admission_policies_change_writes_as_upstreams() {
    let server = start_with(&[GATE, RUNTIME_CONFIG]);
    ok(server.kubectl("kubectl", &["create", "namespace", "prod"]));
    ok(server.kubectl("kubectl", &["label", "namespace", "prod", "env=prod"]));
    ok(server.kubectl("kubectl", &["create", "namespace", "dev"]));

    // An apply configuration adds a label to ConfigMaps of namespaces labelled env=prod,
    // merged with the labels the object has.
    let label = policy(
        "add-label",
        "Fail",
        json!({"matchLabels": {"policy": "label"}}),
        json!({}),
        json!([{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
            "Object{metadata: Object.metadata{labels: {'mutated': 'true', 'from': namespaceObject.metadata.name}}}"}}]),
    );
    ok(kubectl_stdin(&server, &["create", "-f", "-"], &label));
    ok(kubectl_stdin(
        &server,
        &["create", "-f", "-"],
        &binding(
            "add-label",
            json!({"matchResources": {"namespaceSelector": {"matchLabels": {"env": "prod"}}}}),
        ),
    ));
    let labels = json!({"policy": "label", "own": "kept"});
    create_when(
        &server,
        &configmap("labelled", "prod", labels.clone()),
        "the label policy",
        |o| o["metadata"]["labels"]["mutated"] == "true",
    );
    assert_eq!(
        stored(&server, "prod", "labelled")["metadata"]["labels"],
        json!({"policy": "label", "own": "kept", "mutated": "true", "from": "prod"})
    );
    ok(kubectl_stdin(
        &server,
        &["create", "-f", "-"],
        &configmap("labelled", "dev", labels.clone()),
    ));
    assert_eq!(
        stored(&server, "dev", "labelled")["metadata"]["labels"],
        labels
    );

    // A JSON patch whose value comes from a param (a ConfigMap named by the binding).
    ok(server.kubectl(
        "kubectl",
        &[
            "create",
            "configmap",
            "owners",
            "-n",
            "default",
            "--from-literal=team=storage",
        ],
    ));
    let patch = policy(
        "annotate",
        "Fail",
        json!({"matchLabels": {"policy": "patch"}}),
        json!({"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "variables": [{"name": "key", "expression": "'example.com/owner'"}]}),
        json!([{"patchType": "JSONPatch", "jsonPatch": {"expression":
            "[JSONPatch{op: 'add', path: '/metadata/annotations', value: {}}, \
              JSONPatch{op: 'add', path: '/metadata/annotations/' + jsonpatch.escapeKey(variables.key), value: params.data.team}]"}}]),
    );
    ok(kubectl_stdin(&server, &["create", "-f", "-"], &patch));
    ok(kubectl_stdin(
        &server,
        &["create", "-f", "-"],
        &binding(
            "annotate",
            json!({"paramRef": {"name": "owners", "namespace": "default", "parameterNotFoundAction": "Deny"}}),
        ),
    ));
    create_when(
        &server,
        &configmap("patched", "dev", json!({"policy": "patch"})),
        "the patch policy",
        |o| o["metadata"]["annotations"].is_object(),
    );
    assert_eq!(
        stored(&server, "dev", "patched")["metadata"]["annotations"],
        json!({"example.com/owner": "storage"})
    );
    // Updates are changed too: the annotation comes back after it was removed.
    ok(server.kubectl(
        "kubectl",
        &[
            "annotate",
            "configmap",
            "patched",
            "-n",
            "dev",
            "example.com/owner-",
        ],
    ));
    assert_eq!(
        stored(&server, "dev", "patched")["metadata"]["annotations"],
        json!({"example.com/owner": "storage"})
    );

    // The changed object is validated as any: an invalid label value is refused.
    let invalid = policy(
        "invalid",
        "Fail",
        json!({"matchLabels": {"policy": "invalid"}}),
        json!({}),
        json!([{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
            "Object{metadata: Object.metadata{labels: {'bad': 'not a label value!'}}}"}}]),
    );
    ok(kubectl_stdin(&server, &["create", "-f", "-"], &invalid));
    ok(kubectl_stdin(
        &server,
        &["create", "-f", "-"],
        &binding("invalid", json!({})),
    ));
    let refused = eventually("the invalid policy to apply", || {
        let out = kubectl_stdin(
            &server,
            &["create", "-f", "-"],
            &configmap("invalid", "dev", json!({"policy": "invalid"})),
        );
        (!out.status.success()).then(|| text(&out))
    });
    assert!(
        refused.contains("The ConfigMap \"invalid\" is invalid: metadata.labels")
            && refused.contains("Invalid value: \"not a label value!\""),
        "{refused}"
    );

    // A runtime error: Fail refuses, Ignore admits the object unchanged.
    let failing = policy(
        "runtime-error",
        "Fail",
        json!({"matchLabels": {"policy": "runtime"}}),
        json!({}),
        json!([{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression":
            "Object{data: {'copy': object.data.missing}}"}}]),
    );
    ok(kubectl_stdin(&server, &["create", "-f", "-"], &failing));
    ok(kubectl_stdin(
        &server,
        &["create", "-f", "-"],
        &binding("runtime-error", json!({})),
    ));
    let runtime = |name: &str| configmap(name, "dev", json!({"policy": "runtime"}));
    let failed = eventually("the failing policy to refuse", || {
        let out = kubectl_stdin(&server, &["create", "-f", "-"], &runtime("failing"));
        (!out.status.success()).then(|| text(&out))
    });
    assert!(
        failed.contains("Error from server (Forbidden): error when creating \"STDIN\": configmaps \"failing\" is forbidden: policy 'runtime-error' with binding 'runtime-error' denied request: expression 'Object{data: {'copy': object.data.missing}}' resulted in error: no such key: missing"),
        "{failed}"
    );
    ok(server.kubectl(
        "kubectl",
        &[
            "patch",
            "mutatingadmissionpolicy",
            "runtime-error",
            "--type=merge",
            "-p",
            r#"{"spec":{"failurePolicy":"Ignore"}}"#,
        ],
    ));
    eventually("the ignoring policy to admit", || {
        kubectl_stdin(&server, &["create", "-f", "-"], &runtime("ignored"))
            .status
            .success()
            .then_some(())
    });
    assert_eq!(stored(&server, "dev", "ignored")["data"], json!({"k": "v"}));
}
