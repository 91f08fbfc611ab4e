use genplane_api::flowcontrol::bootstrap;
use serde_json::{Value, json};

use super::*;

fn with_uid(mut objects: Vec<Value>) -> Vec<Value> {
    for object in &mut objects {
        let name = object["metadata"]["name"].as_str().unwrap().to_owned();
        object["metadata"]["uid"] = json!(format!("uid-{name}"));
    }
    objects
}

fn bootstrap_snapshot(extra_schemas: Vec<Value>, extra_levels: Vec<Value>) -> Snapshot {
    let mut schemas = bootstrap::mandatory_flow_schemas();
    schemas.extend(bootstrap::suggested_flow_schemas());
    schemas.extend(extra_schemas);
    let mut levels = bootstrap::mandatory_priority_levels();
    levels.extend(bootstrap::suggested_priority_levels());
    levels.extend(extra_levels);
    Snapshot::new(&with_uid(schemas), &with_uid(levels))
}

fn user(name: &str, groups: &[&str]) -> UserInfo {
    let mut groups: Vec<String> = groups.iter().map(|g| (*g).to_owned()).collect();
    groups.push("system:authenticated".into());
    UserInfo {
        username: name.into(),
        groups,
        ..UserInfo::default()
    }
}

fn resource(verb: &str, group: &str, resource: &str, sub: &str, namespace: &str) -> RequestInfo {
    RequestInfo {
        is_resource_request: true,
        verb: verb.into(),
        api_group: group.into(),
        resource: resource.into(),
        subresource: sub.into(),
        namespace: namespace.into(),
        ..RequestInfo::default()
    }
}

fn non_resource(verb: &str, path: &str) -> RequestInfo {
    RequestInfo {
        verb: verb.into(),
        path: path.into(),
        ..RequestInfo::default()
    }
}

#[test]
fn requests_are_classified_by_upstreams_precedence_rules() {
    let tenant_schema = json!({"metadata": {"name": "tenant-a"}, "spec": {
        "priorityLevelConfiguration": {"name": "tenant"}, "matchingPrecedence": 800,
        "distinguisherMethod": {"type": "ByNamespace"},
        "rules": [{"subjects": [{"kind": "ServiceAccount", "serviceAccount": {"namespace": "tenant-a", "name": "*"}}],
            "resourceRules": [{"verbs": ["list", "watch"], "apiGroups": [""], "resources": ["configmaps", "secrets/status"], "namespaces": ["*"]}]}],
    }});
    // Ties in precedence go by name: "aaa" before "tenant-a".
    let same_precedence = json!({"metadata": {"name": "aaa"}, "spec": {
        "priorityLevelConfiguration": {"name": "workload-low"}, "matchingPrecedence": 800,
        "rules": [{"subjects": [{"kind": "User", "user": {"name": "system:serviceaccount:tenant-a:bot"}}],
            "resourceRules": [{"verbs": ["list"], "apiGroups": [""], "resources": ["configmaps"], "namespaces": ["tenant-a"]}]}],
    }});
    // Its level is missing: never used.
    let dangling = json!({"metadata": {"name": "dangling"}, "spec": {
        "priorityLevelConfiguration": {"name": "nowhere"}, "matchingPrecedence": 2,
        "rules": [{"subjects": [{"kind": "Group", "group": {"name": "*"}}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}],
    }});
    let tenant_level = json!({"metadata": {"name": "tenant"}, "spec": {"type": "Limited",
        "limited": {"nominalConcurrencyShares": 5, "limitResponse": {"type": "Reject"}}}});
    let snapshot = bootstrap_snapshot(
        vec![tenant_schema, same_precedence, dangling],
        vec![tenant_level],
    );
    let admin = user("admin", &["system:masters"]);
    let alice = user("alice", &[]);
    let anonymous = UserInfo {
        username: "system:anonymous".into(),
        groups: vec!["system:unauthenticated".into()],
        ..UserInfo::default()
    };
    let bot = user(
        "system:serviceaccount:tenant-a:bot",
        &["system:serviceaccounts"],
    );
    let kube_system = user(
        "system:serviceaccount:kube-system:job",
        &["system:serviceaccounts"],
    );
    let node = user("system:node:n1", &["system:nodes"]);
    let kcm = user("system:kube-controller-manager", &[]);
    let gcm = user("system:genplane:controller-manager", &[]);
    let feature = user("system:genplane:feature-controller", &[]);
    let cases: Vec<(&str, RequestInfo, &UserInfo, &str, &str, &str)> = vec![
        (
            "masters are exempt",
            resource("delete", "", "secrets", "", "x"),
            &admin,
            "exempt",
            "exempt",
            "",
        ),
        (
            "probes are exempt for anyone",
            non_resource("get", "/readyz"),
            &anonymous,
            "probes",
            "exempt",
            "",
        ),
        (
            "a probe's sub-path is not",
            non_resource("get", "/readyz/etcd"),
            &anonymous,
            "global-default",
            "global-default",
            "system:anonymous",
        ),
        (
            "a probe written to is not",
            non_resource("post", "/healthz"),
            &alice,
            "global-default",
            "global-default",
            "alice",
        ),
        (
            "a user by default",
            resource("list", "", "configmaps", "", "web"),
            &alice,
            "global-default",
            "global-default",
            "alice",
        ),
        (
            "a name wins a precedence tie",
            resource("list", "", "configmaps", "", "tenant-a"),
            &bot,
            "aaa",
            "workload-low",
            "",
        ),
        (
            "service accounts of a namespace",
            resource("watch", "", "configmaps", "", "other"),
            &bot,
            "tenant-a",
            "tenant",
            "other",
        ),
        (
            "a subresource by its full name",
            resource("list", "", "secrets", "status", "x"),
            &bot,
            "tenant-a",
            "tenant",
            "x",
        ),
        (
            "not the resource itself",
            resource("list", "", "secrets", "", "x"),
            &bot,
            "service-accounts",
            "workload-low",
            "system:serviceaccount:tenant-a:bot",
        ),
        (
            "a verb the rule does not name",
            resource("create", "", "configmaps", "", "x"),
            &bot,
            "service-accounts",
            "workload-low",
            "system:serviceaccount:tenant-a:bot",
        ),
        (
            "a cluster-wide list is not in namespace *",
            resource("list", "", "configmaps", "", ""),
            &bot,
            "service-accounts",
            "workload-low",
            "system:serviceaccount:tenant-a:bot",
        ),
        (
            "kube-system's service accounts' leases",
            resource("update", "coordination.k8s.io", "leases", "", "kube-system"),
            &kube_system,
            "system-leader-election",
            "leader-election",
            "system:serviceaccount:kube-system:job",
        ),
        (
            "kube-system's service accounts otherwise",
            resource("get", "", "secrets", "", "app"),
            &kube_system,
            "kube-system-service-accounts",
            "workload-high",
            "app",
        ),
        (
            "nodes' own objects",
            resource("patch", "", "nodes", "status", ""),
            &node,
            "system-node-high",
            "node-high",
            "system:node:n1",
        ),
        (
            "nodes otherwise",
            resource("get", "", "secrets", "", "x"),
            &node,
            "system-nodes",
            "system",
            "system:node:n1",
        ),
        (
            "kube-controller-manager",
            resource("list", "apps", "deployments", "", ""),
            &kcm,
            "kube-controller-manager",
            "workload-high",
            "",
        ),
        (
            "genplane's controller-manager's leader election",
            resource("update", "coordination.k8s.io", "leases", "", "kube-system"),
            &gcm,
            "genplane-leader-election",
            "leader-election",
            "system:genplane:controller-manager",
        ),
        (
            "genplane's controllers' work",
            resource("delete", "", "configmaps", "", "gone"),
            &gcm,
            "genplane-components",
            "workload-high",
            "gone",
        ),
        (
            "the feature-controller's reports",
            resource(
                "update",
                "featuregates.genplane.io",
                "features",
                "status",
                "kube-system",
            ),
            &feature,
            "genplane-components",
            "workload-high",
            "kube-system",
        ),
        (
            "anonymous discovery",
            non_resource("get", "/apis"),
            &anonymous,
            "global-default",
            "global-default",
            "system:anonymous",
        ),
    ];
    for (what, info, user, schema, level, flow) in cases {
        let class = snapshot
            .classify(&info, user)
            .unwrap_or_else(|| panic!("{what}: no class"));
        assert_eq!(
            (
                &**class.flow_schema,
                &*class.level.name,
                class.distinguisher
            ),
            (schema, level, flow),
            "{what}"
        );
        assert_eq!(&**class.flow_schema_uid, format!("uid-{schema}"), "{what}");
        assert_eq!(&*class.level.uid, format!("uid-{level}"), "{what}");
    }
}

#[test]
fn without_global_default_catch_all_takes_the_rest_and_without_it_nothing_matches() {
    let mut schemas = bootstrap::mandatory_flow_schemas();
    let levels = bootstrap::mandatory_priority_levels();
    let snapshot = Snapshot::new(&schemas, &levels);
    let alice = user("alice", &[]);
    let version = non_resource("get", "/version");
    let class = snapshot.classify(&version, &alice).unwrap();
    assert_eq!(
        (&**class.flow_schema, &*class.level.name),
        ("catch-all", "catch-all")
    );
    // Prefix patterns: `/metrics/*` covers what is below, not the path itself.
    schemas.push(json!({"metadata": {"name": "metrics"}, "spec": {
        "priorityLevelConfiguration": {"name": "exempt"}, "matchingPrecedence": 50,
        "rules": [{"subjects": [{"kind": "User", "user": {"name": "*"}}],
            "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/metrics/*"]}]}]}}));
    let snapshot = Snapshot::new(&schemas, &levels);
    assert_eq!(
        snapshot
            .classify(&non_resource("get", "/metrics/slis"), &alice)
            .unwrap()
            .flow_schema
            .as_ref(),
        "metrics"
    );
    assert_eq!(
        snapshot
            .classify(&non_resource("get", "/metrics"), &alice)
            .unwrap()
            .flow_schema
            .as_ref(),
        "catch-all"
    );
    let empty = Snapshot::new(&[], &levels);
    assert_eq!(
        empty.classify(&non_resource("get", "/version"), &alice),
        None
    );
    assert_eq!(empty.levels().len(), 2);
}
