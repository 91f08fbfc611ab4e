//! API Priority and Fairness configuration against the real binary, read and written with
//! kubectl as on kube-apiserver: the bootstrap FlowSchemas and priority levels listed with
//! kubectl's columns; the mandatory ones restored when deleted and unchangeable; the suggested
//! ones recreated when deleted, kept as the administrator set them while their
//! `apf.kubernetes.io/autoupdate-spec` annotation is `false` and put back when it is `true`;
//! a FlowSchema's `Dangling` condition following its level; bad objects refused with
//! upstream's messages.

#![allow(clippy::unwrap_used)]

use crate::support::{Apiserver, eventually, eventually_holds, ok, start};
use serde_json::Value;

fn kubectl(server: &Apiserver, args: &[&str]) -> String {
    ok(server.kubectl("kubectl", args))
}

fn get(server: &Apiserver, kind: &str, name: &str) -> Option<Value> {
    let out = server.kubectl("kubectl", &["get", kind, name, "-o", "json"]);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).unwrap())
}

fn rows(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

#[test]
fn the_bootstrap_configuration_is_listed_kept_and_respected() {
    let server = start();

    let schemas = kubectl(&server, &["get", "flowschemas"]);
    let table = rows(&schemas);
    assert_eq!(
        table[0],
        [
            "NAME",
            "PRIORITYLEVEL",
            "MATCHINGPRECEDENCE",
            "DISTINGUISHERMETHOD",
            "AGE",
            "MISSINGPL"
        ],
        "{schemas}"
    );
    let row = |name: &str| {
        table
            .iter()
            .find(|r| r[0] == name)
            .unwrap_or_else(|| panic!("no {name}: {schemas}"))
            .clone()
    };
    assert_eq!(row("exempt")[1..4], ["exempt", "1", "<none>"], "{schemas}");
    assert_eq!(
        row("catch-all")[1..4],
        ["catch-all", "10000", "ByUser"],
        "{schemas}"
    );
    assert_eq!(
        row("genplane-components")[1..4],
        ["workload-high", "800", "ByNamespace"],
        "{schemas}"
    );
    assert_eq!(
        row("genplane-leader-election")[1..4],
        ["leader-election", "100", "ByUser"],
        "{schemas}"
    );
    // kubectl lists by name; every schema's level exists.
    assert_eq!(table.len(), 1 + 15, "{schemas}");
    eventually_holds("every FlowSchema to say its level exists", || {
        rows(&kubectl(&server, &["get", "flowschemas"]))[1..]
            .iter()
            .all(|r| r[5] == "False")
    });

    let levels = kubectl(&server, &["get", "prioritylevelconfigurations"]);
    let table = rows(&levels);
    assert_eq!(
        table[0],
        [
            "NAME",
            "TYPE",
            "NOMINALCONCURRENCYSHARES",
            "QUEUES",
            "HANDSIZE",
            "QUEUELENGTHLIMIT",
            "AGE"
        ],
        "{levels}"
    );
    let level = |name: &str| {
        table
            .iter()
            .find(|r| r[0] == name)
            .unwrap_or_else(|| panic!("no {name}: {levels}"))
            .clone()
    };
    assert_eq!(
        level("exempt")[1..6],
        ["Exempt", "<none>", "<none>", "<none>", "<none>"],
        "{levels}"
    );
    assert_eq!(
        level("catch-all")[1..6],
        ["Limited", "5", "<none>", "<none>", "<none>"],
        "{levels}"
    );
    assert_eq!(
        level("leader-election")[1..6],
        ["Limited", "10", "16", "4", "50"],
        "{levels}"
    );
    assert_eq!(table.len(), 1 + 8, "{levels}");

    // Mandatory objects cannot be changed, and come back when deleted.
    let refused = server.kubectl(
        "kubectl",
        &[
            "patch",
            "prioritylevelconfiguration",
            "catch-all",
            "--type=merge",
            "-p",
            r#"{"spec":{"limited":{"nominalConcurrencyShares":50}}}"#,
        ],
    );
    assert!(!refused.status.success());
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(
        message.contains("spec of 'catch-all' must equal the fixed value"),
        "{message}"
    );
    let uid = get(&server, "flowschema", "catch-all").unwrap()["metadata"]["uid"].clone();
    kubectl(&server, &["delete", "flowschema", "catch-all"]);
    kubectl(
        &server,
        &["delete", "prioritylevelconfiguration", "catch-all"],
    );
    let again = eventually("the catch-all FlowSchema to be made again", || {
        get(&server, "flowschema", "catch-all").filter(|o| o["metadata"]["uid"] != uid)
    });
    assert_eq!(again["spec"]["matchingPrecedence"], 10000, "{again}");
    eventually("the catch-all level to be made again", || {
        get(&server, "prioritylevelconfiguration", "catch-all")
    });
    // The exempt level's `spec.exempt` is the administrator's to tune.
    kubectl(
        &server,
        &[
            "patch",
            "prioritylevelconfiguration",
            "exempt",
            "--type=merge",
            "-p",
            r#"{"spec":{"exempt":{"nominalConcurrencyShares":10}}}"#,
        ],
    );

    // A suggested object the administrator marked `false` keeps their spec ...
    kubectl(
        &server,
        &[
            "annotate",
            "--overwrite",
            "prioritylevelconfiguration",
            "global-default",
            "apf.kubernetes.io/autoupdate-spec=false",
        ],
    );
    kubectl(
        &server,
        &[
            "patch",
            "prioritylevelconfiguration",
            "global-default",
            "--type=merge",
            "-p",
            r#"{"spec":{"limited":{"nominalConcurrencyShares":77}}}"#,
        ],
    );
    // ... through passes the server makes for other changes (a deleted suggested FlowSchema).
    kubectl(&server, &["delete", "flowschema", "service-accounts"]);
    eventually("the service-accounts FlowSchema to be made again", || {
        get(&server, "flowschema", "service-accounts")
    });
    let kept = get(&server, "prioritylevelconfiguration", "global-default").unwrap();
    assert_eq!(
        kept["spec"]["limited"]["nominalConcurrencyShares"], 77,
        "{kept}"
    );
    let exempt = get(&server, "prioritylevelconfiguration", "exempt").unwrap();
    assert_eq!(
        exempt["spec"]["exempt"]["nominalConcurrencyShares"], 10,
        "{exempt}"
    );
    // Marked `true` again, it is put back.
    kubectl(
        &server,
        &[
            "annotate",
            "--overwrite",
            "prioritylevelconfiguration",
            "global-default",
            "apf.kubernetes.io/autoupdate-spec=true",
        ],
    );
    eventually_holds("global-default's shares to be put back", || {
        get(&server, "prioritylevelconfiguration", "global-default").unwrap()["spec"]["limited"]["nominalConcurrencyShares"]
            == 20
    });
}

#[test]
fn a_flow_schema_says_whether_its_level_exists_and_bad_ones_are_refused() {
    let server = start();
    let path = server.dir.path().join("fs.yaml");
    std::fs::write(
        &path,
        "apiVersion: flowcontrol.apiserver.k8s.io/v1\nkind: FlowSchema\nmetadata:\n  name: tenant-a\nspec:\n  priorityLevelConfiguration:\n    name: tenant-a\n  distinguisherMethod:\n    type: ByUser\n  rules:\n  - subjects:\n    - kind: Group\n      group:\n        name: tenant-a\n    resourceRules:\n    - verbs: [\"*\"]\n      apiGroups: [\"*\"]\n      resources: [\"*\"]\n      namespaces: [\"*\"]\n",
    )
    .unwrap();
    kubectl(&server, &["create", "-f", &path.display().to_string()]);
    eventually_holds("tenant-a to be dangling", || {
        let table = rows(&kubectl(&server, &["get", "flowschema", "tenant-a"]));
        table[1][2] == "1000" && table[1][5] == "True"
    });
    let schema = get(&server, "flowschema", "tenant-a").unwrap();
    let condition = &schema["status"]["conditions"][0];
    assert_eq!(condition["reason"], "NotFound", "{schema}");
    assert_eq!(
        condition["message"],
        "This FlowSchema references the PriorityLevelConfiguration object named \"tenant-a\" but there is no such object",
        "{schema}"
    );
    let level = server.dir.path().join("pl.yaml");
    std::fs::write(
        &level,
        "apiVersion: flowcontrol.apiserver.k8s.io/v1\nkind: PriorityLevelConfiguration\nmetadata:\n  name: tenant-a\nspec:\n  type: Limited\n  limited:\n    limitResponse:\n      type: Reject\n",
    )
    .unwrap();
    kubectl(&server, &["create", "-f", &level.display().to_string()]);
    eventually_holds("tenant-a's level to be found", || {
        rows(&kubectl(&server, &["get", "flowschema", "tenant-a"]))[1][5] == "False"
    });
    let created = get(&server, "prioritylevelconfiguration", "tenant-a").unwrap();
    assert_eq!(
        created["spec"]["limited"]["nominalConcurrencyShares"], 30,
        "{created}"
    );
    assert_eq!(
        created["spec"]["limited"]["lendablePercent"], 0,
        "{created}"
    );

    let bad = server.dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: flowcontrol.apiserver.k8s.io/v1\nkind: FlowSchema\nmetadata:\n  name: bad\nspec:\n  matchingPrecedence: 1\n  priorityLevelConfiguration:\n    name: tenant-a\n",
    )
    .unwrap();
    let refused = server.kubectl("kubectl", &["create", "-f", &bad.display().to_string()]);
    assert!(!refused.status.success());
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(
        message.contains(
            "The FlowSchema \"bad\" is invalid: spec.matchingPrecedence: Invalid value: 1: only the schema named 'exempt' may have matchingPrecedence 1"
        ),
        "{message}"
    );
}
