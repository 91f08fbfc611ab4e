//! APIServices against the real binary, read and written with kubectl as on kube-apiserver: a
//! Local APIService for every served group-version (built-in ones at start, custom resources'
//! as their CRDs come and go), each available; the server's own restored when deleted or
//! marked unavailable; the user's left alone; bad ones refused with upstream's messages.

#![allow(clippy::unwrap_used)]

use crate::support::{self, Apiserver, eventually, eventually_holds, ok, start, text};
use serde_json::Value;

fn kubectl(server: &Apiserver, args: &[&str]) -> String {
    ok(server.kubectl("kubectl", args))
}

fn api_service(server: &Apiserver, name: &str) -> Option<Value> {
    let out = server.kubectl("kubectl", &["get", "apiservice", name, "-o", "json"]);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).unwrap())
}

fn write(server: &Apiserver, name: &str, content: &str) -> String {
    let path = server.dir.path().join(name);
    std::fs::write(&path, content).unwrap();
    path.display().to_string()
}

#[test]
fn every_served_group_version_has_a_local_available_apiservice() {
    let server = start();

    // Ready means registered (upstream's autoregister-completion): no waiting.
    let table = kubectl(&server, &["get", "apiservices"]);
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "SERVICE", "AVAILABLE", "AGE"], "{table}");
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split_whitespace().collect()).collect();
    for name in [
        "v1.",
        "v1.apiextensions.k8s.io",
        "v1.apiregistration.k8s.io",
        "v1.authentication.k8s.io",
        "v1.authorization.k8s.io",
        "v1.coordination.k8s.io",
        "v1.rbac.authorization.k8s.io",
        "v1alpha1.featuregates.genplane.io",
    ] {
        let row = rows
            .iter()
            .find(|r| r[0] == name)
            .unwrap_or_else(|| panic!("no {name}: {table}"));
        assert_eq!(row[1..3], ["Local", "True"], "{table}");
    }
    // Alpha versions that are off (--runtime-config) have none.
    assert!(
        !rows
            .iter()
            .any(|r| r[0] == "v1alpha1.admissionregistration.k8s.io"),
        "{table}"
    );
    let core = api_service(&server, "v1.").unwrap();
    assert_eq!(core["spec"]["groupPriorityMinimum"], 18000, "{core}");
    assert_eq!(core["spec"]["versionPriority"], 1, "{core}");
    assert_eq!(
        core["metadata"]["labels"]["kube-aggregator.kubernetes.io/automanaged"], "onstart",
        "{core}"
    );
    let available = &core["status"]["conditions"][0];
    assert_eq!(available["type"], "Available", "{core}");
    assert_eq!(available["reason"], "Local", "{core}");
    assert_eq!(
        available["message"], "Local APIServices are always available",
        "{core}"
    );
    let rbac = api_service(&server, "v1.rbac.authorization.k8s.io").unwrap();
    assert_eq!(rbac["spec"]["groupPriorityMinimum"], 17000, "{rbac}");
    assert_eq!(rbac["spec"]["versionPriority"], 15, "{rbac}");

    // The server's own come back: deleted, or marked unavailable through `status`.
    kubectl(&server, &["delete", "apiservice", "v1.coordination.k8s.io"]);
    eventually("v1.coordination.k8s.io to be made again", || {
        api_service(&server, "v1.coordination.k8s.io")
    });
    kubectl(
        &server,
        &[
            "patch",
            "apiservice",
            "v1.authentication.k8s.io",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"conditions":[{"type":"Available","status":"False","reason":"Broken","message":"by hand"}]}}"#,
        ],
    );
    eventually_holds("v1.authentication.k8s.io to be available again", || {
        let object = api_service(&server, "v1.authentication.k8s.io").unwrap();
        object["status"]["conditions"][0]["status"] == "True"
            && object["status"]["conditions"][0]["reason"] == "Local"
    });
    // A spec changed by hand is put back.
    kubectl(
        &server,
        &[
            "patch",
            "apiservice",
            "v1.rbac.authorization.k8s.io",
            "--type=merge",
            "-p",
            r#"{"spec":{"versionPriority":3}}"#,
        ],
    );
    eventually_holds("the priority of v1.rbac to be put back", || {
        api_service(&server, "v1.rbac.authorization.k8s.io").unwrap()["spec"]["versionPriority"]
            == 15
    });
}

#[test]
fn custom_resources_group_versions_come_and_go_and_the_users_stay() {
    let server = start();
    let crd = write(&server, "crd.yaml", &support::fixture("crds/crontabs.yaml"));
    kubectl(&server, &["apply", "-f", &crd]);
    server.wait_established("crontabs.stable.example.com");
    let registered = eventually("v1.stable.example.com to be registered", || {
        api_service(&server, "v1.stable.example.com")
    });
    assert_eq!(
        registered["metadata"]["labels"]["kube-aggregator.kubernetes.io/automanaged"], "true",
        "{registered}"
    );
    assert_eq!(
        registered["spec"]["groupPriorityMinimum"], 1000,
        "{registered}"
    );
    assert_eq!(registered["spec"]["versionPriority"], 100, "{registered}");
    assert_eq!(
        registered["status"]["conditions"][0]["status"], "True",
        "{registered}"
    );

    // The user's own APIService, for a group nothing serves here: kept as written.
    let own = write(
        &server,
        "own.yaml",
        "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: v1alpha1.wardle.example.com\nspec:\n  group: wardle.example.com\n  version: v1alpha1\n  groupPriorityMinimum: 2000\n  versionPriority: 200\n  insecureSkipTLSVerify: true\n  service:\n    namespace: sample-system\n    name: sample\n",
    );
    let out = kubectl(&server, &["apply", "-f", &own]);
    assert!(
        out.contains("apiservice.apiregistration.k8s.io/v1alpha1.wardle.example.com created"),
        "{out}"
    );
    let stored = api_service(&server, "v1alpha1.wardle.example.com").unwrap();
    assert_eq!(stored["spec"]["service"]["port"], 443, "{stored}");
    let table = kubectl(
        &server,
        &["get", "apiservice", "v1alpha1.wardle.example.com"],
    );
    assert!(table.contains("sample-system/sample"), "{table}");

    // Deleting the CRD takes its APIService, not the user's.
    kubectl(&server, &["delete", "crd", "crontabs.stable.example.com"]);
    eventually_holds("v1.stable.example.com to go", || {
        api_service(&server, "v1.stable.example.com").is_none()
    });
    assert!(api_service(&server, "v1alpha1.wardle.example.com").is_some());

    // Bad APIServices are refused with upstream's messages.
    let bad = write(
        &server,
        "bad.yaml",
        "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: v1.other.example.com\nspec:\n  group: wardle.example.com\n  version: v1\n  groupPriorityMinimum: 30000\n  versionPriority: 10\n",
    );
    let out = server.kubectl("kubectl", &["create", "-f", &bad]);
    assert!(!out.status.success(), "{}", text(&out));
    let message = text(&out);
    assert!(
        message.contains(
            "metadata.name: Invalid value: \"v1.other.example.com\": must be `spec.version+\".\"+spec.group`: \"v1.wardle.example.com\""
        ),
        "{message}"
    );
    assert!(
        message.contains(
            "spec.groupPriorityMinimum: Invalid value: 30000: must be positive and less than 20000"
        ),
        "{message}"
    );
}
