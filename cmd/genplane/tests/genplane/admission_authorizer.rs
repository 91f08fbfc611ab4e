//! The `authorizer` variable of admission expressions, backed by the server's RBAC: a
//! ValidatingAdmissionPolicy refuses ConfigMap creates by users who may not delete
//! ConfigMaps, with two users authenticated by bearer tokens.

#![allow(clippy::unwrap_used)]

use std::process::Output;

use serde_json::json;

use crate::admission::kubectl_stdin;
use crate::networkregistry::viewer_kubeconfig;
use crate::support::{eventually, ok, start_with, text};

#[test]
fn policies_ask_the_servers_authorizer_about_the_requesting_user() {
    let tokens = tempfile::tempdir().unwrap();
    let file = tokens.path().join("tokens.csv");
    std::fs::write(&file, "tok-alice,alice,u-alice\ntok-bob,bob,u-bob\n").unwrap();
    let server = start_with(&[&format!("--token-auth-file={}", file.display())]);
    let kubeconfig = viewer_kubeconfig(&server, tokens.path());
    let as_user = |token: &str, args: &[&str]| -> Output {
        crate::support::kubectl_command("kubectl", &kubeconfig)
            .arg(format!("--token={token}"))
            .args(args)
            .output()
            .unwrap()
    };
    ok(server.kubectl("kubectl", &["create", "namespace", "work"]));
    // alice may create and delete ConfigMaps in work, bob only create them
    for (role, verbs, user) in [
        ("writer-deleter", "create,delete,get", "alice"),
        ("writer", "create,get", "bob"),
    ] {
        ok(server.kubectl(
            "kubectl",
            &[
                "create",
                "role",
                role,
                "-n",
                "work",
                &format!("--verb={verbs}"),
                "--resource=configmaps",
            ],
        ));
        ok(server.kubectl(
            "kubectl",
            &[
                "create",
                "rolebinding",
                role,
                "-n",
                "work",
                &format!("--role={role}"),
                &format!("--user={user}"),
            ],
        ));
    }
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "deleters-create"},
        "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["configmaps"]}]},
            "validations": [{
                "expression": "authorizer.group('').resource('configmaps').namespace(object.metadata.namespace).check('delete').allowed()",
                "messageExpression": "request.userInfo.username + ' may not delete configmaps, so may not create them'",
                "reason": "Forbidden"}]}});
    ok(kubectl_stdin(&server, &["create", "-f", "-"], &policy));
    let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "deleters-create"},
        "spec": {"policyName": "deleters-create", "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "work"}}}}});
    ok(kubectl_stdin(&server, &["create", "-f", "-"], &binding));
    let denial = "configmaps \"bobs\" is forbidden: ValidatingAdmissionPolicy 'deleters-create' \
                  with binding 'deleters-create' denied request: bob may not delete configmaps, so \
                  may not create them";
    // (the policy and the roles reach the watch caches in their own time)
    eventually("the policy to refuse bob", || {
        let out = as_user("tok-bob", &["create", "configmap", "bobs", "-n", "work"]);
        text(&out).contains(denial).then_some(())
    });
    eventually("alice to create", || {
        let out = as_user(
            "tok-alice",
            &["create", "configmap", "alices", "-n", "work"],
        );
        assert!(
            !text(&out).contains("ValidatingAdmissionPolicy"),
            "{}",
            text(&out)
        );
        out.status.success().then_some(())
    });
    // bob may create once he may delete
    ok(server.kubectl(
        "kubectl",
        &[
            "create",
            "rolebinding",
            "bob-deletes",
            "-n",
            "work",
            "--role=writer-deleter",
            "--user=bob",
        ],
    ));
    eventually("bob's new role to count", || {
        as_user("tok-bob", &["create", "configmap", "bobs", "-n", "work"])
            .status
            .success()
            .then_some(())
    });
}
