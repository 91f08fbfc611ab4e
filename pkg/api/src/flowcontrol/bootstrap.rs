//! The configuration every server keeps, as Kubernetes 1.33's bootstrap defines it, in its
//! defaulted form.
//!
//! - **Mandatory**: the `exempt` level (with its FlowSchema: `system:masters`, precedence 1)
//!   and the `catch-all` level (5 shares, `Reject`; its FlowSchema: every authenticated and
//!   unauthenticated user, precedence 10000). The server restores them whenever they change
//!   or go (but for the `exempt` level's `spec.exempt`, which administrators may tune).
//! - **Suggested**: the levels `system`, `node-high`, `leader-election`, `workload-high`,
//!   `workload-low` and `global-default`, and the FlowSchemas `probes`,
//!   `system-leader-election`, `endpoint-controller`, `workload-leader-election`,
//!   `system-node-high`, `system-nodes`, `kube-controller-manager`, `kube-scheduler`,
//!   `kube-system-service-accounts`, `service-accounts` and `global-default`. The server creates
//!   them when missing and keeps their specs while their `apf.kubernetes.io/autoupdate-spec`
//!   annotation is `true`.
//!
//! genplane adds two suggested FlowSchemas for its own components' identities (the client
//! certificates its PKI makes): `genplane-leader-election` (precedence 100, level
//! `leader-election`) for their Lease requests — the controller-manager's leader election, the
//! feature-controller's and the API server's identity and feature-report Leases — and
//! `genplane-components` (precedence 800, level `workload-high`, flows by namespace) for the
//! rest of what they ask, as upstream treats kube-controller-manager.

use serde_json::{Value, json};

use super::{
    ALL, API_VERSION, AUTO_UPDATE_ANNOTATION, BY_NAMESPACE, BY_USER, CATCH_ALL, EXEMPT,
    FlowSchemaSpec, PriorityLevelSpec,
};

/// The user name of genplane's controller-manager.
pub const CONTROLLER_MANAGER_USER: &str = "system:genplane:controller-manager";
/// The user name of genplane's feature-controller.
pub const FEATURE_CONTROLLER_USER: &str = "system:genplane:feature-controller";
/// The user name the API server's own client (its feature reports) authenticates as.
pub const APISERVER_USER: &str = "system:genplane:apiserver";
/// genplane's component identities, as the PKI names them.
pub const COMPONENT_USERS: &[&str] = &[
    CONTROLLER_MANAGER_USER,
    FEATURE_CONTROLLER_USER,
    APISERVER_USER,
];

const MASTERS: &str = "system:masters";
const AUTHENTICATED: &str = "system:authenticated";
const UNAUTHENTICATED: &str = "system:unauthenticated";
const NODES: &str = "system:nodes";
const SERVICE_ACCOUNTS: &str = "system:serviceaccounts";
const KUBE_CONTROLLER_MANAGER: &str = "system:kube-controller-manager";
const KUBE_SCHEDULER: &str = "system:kube-scheduler";

fn object(kind: &str, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": API_VERSION,
        "kind": kind,
        "metadata": {"name": name, "annotations": {AUTO_UPDATE_ANNOTATION: "true"}},
        "spec": spec,
    })
}

fn limited(name: &str, shares: i32, lendable: i32, response: Value) -> Value {
    object(
        "PriorityLevelConfiguration",
        name,
        json!({
            "type": "Limited",
            "limited": {
                "nominalConcurrencyShares": shares,
                "limitResponse": response,
                "lendablePercent": lendable,
            },
        }),
    )
}

fn queue(queues: i32, hand_size: i32, queue_length_limit: i32) -> Value {
    json!({"type": "Queue", "queuing": {
        "queues": queues, "handSize": hand_size, "queueLengthLimit": queue_length_limit,
    }})
}

fn users(names: &[&str]) -> Vec<Value> {
    names
        .iter()
        .map(|name| json!({"kind": "User", "user": {"name": name}}))
        .collect()
}

fn groups(names: &[&str]) -> Vec<Value> {
    names
        .iter()
        .map(|name| json!({"kind": "Group", "group": {"name": name}}))
        .collect()
}

fn kube_system_accounts(names: &[&str]) -> Vec<Value> {
    names
        .iter()
        .map(|name| {
            json!({"kind": "ServiceAccount",
                "serviceAccount": {"namespace": "kube-system", "name": name}})
        })
        .collect()
}

fn resource_rule(
    verbs: &[&str],
    groups: &[&str],
    resources: &[&str],
    namespaces: &[&str],
) -> Value {
    json!({"verbs": verbs, "apiGroups": groups, "resources": resources, "namespaces": namespaces})
}

fn everything() -> (Value, Value) {
    (
        json!([{"verbs": [ALL], "apiGroups": [ALL], "resources": [ALL],
            "clusterScope": true, "namespaces": [ALL]}]),
        json!([{"verbs": [ALL], "nonResourceURLs": [ALL]}]),
    )
}

fn flow_schema(
    name: &str,
    level: &str,
    precedence: i32,
    method: Option<&str>,
    rule: Value,
) -> Value {
    let mut spec = json!({
        "priorityLevelConfiguration": {"name": level},
        "matchingPrecedence": precedence,
        "rules": [rule],
    });
    if let Some(method) = method {
        spec["distinguisherMethod"] = json!({"type": method});
    }
    object("FlowSchema", name, spec)
}

/// A FlowSchema of every request of `subjects`.
fn all_of(
    name: &str,
    level: &str,
    precedence: i32,
    method: Option<&str>,
    subjects: Vec<Value>,
) -> Value {
    let (resource_rules, non_resource_rules) = everything();
    flow_schema(
        name,
        level,
        precedence,
        method,
        json!({"subjects": subjects, "resourceRules": resource_rules,
            "nonResourceRules": non_resource_rules}),
    )
}

/// The mandatory PriorityLevelConfigurations: `exempt` and `catch-all`.
pub fn mandatory_priority_levels() -> Vec<Value> {
    vec![
        object(
            "PriorityLevelConfiguration",
            EXEMPT,
            json!({"type": "Exempt",
                "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}}),
        ),
        limited(CATCH_ALL, 5, 0, json!({"type": "Reject"})),
    ]
}

/// The mandatory FlowSchemas: `exempt` and `catch-all`.
pub fn mandatory_flow_schemas() -> Vec<Value> {
    vec![
        all_of(EXEMPT, EXEMPT, 1, None, groups(&[MASTERS])),
        all_of(
            CATCH_ALL,
            CATCH_ALL,
            10000,
            Some(BY_USER),
            groups(&[UNAUTHENTICATED, AUTHENTICATED]),
        ),
    ]
}

/// The suggested PriorityLevelConfigurations.
pub fn suggested_priority_levels() -> Vec<Value> {
    vec![
        limited("system", 30, 33, queue(64, 6, 50)),
        limited("node-high", 40, 25, queue(64, 6, 50)),
        limited("leader-election", 10, 0, queue(16, 4, 50)),
        limited("workload-high", 40, 50, queue(128, 6, 50)),
        limited("workload-low", 100, 90, queue(128, 6, 50)),
        limited("global-default", 20, 50, queue(128, 6, 50)),
    ]
}

/// The suggested FlowSchemas, upstream's and genplane's own.
pub fn suggested_flow_schemas() -> Vec<Value> {
    let leases = |namespaces: &[&str]| {
        resource_rule(
            &["get", "create", "update"],
            &["coordination.k8s.io"],
            &["leases"],
            namespaces,
        )
    };
    let mut leader_election_subjects = users(&[KUBE_CONTROLLER_MANAGER, KUBE_SCHEDULER]);
    leader_election_subjects.extend(kube_system_accounts(&[ALL]));
    let mut endpoint_subjects = users(&[KUBE_CONTROLLER_MANAGER]);
    endpoint_subjects.extend(kube_system_accounts(&[
        "endpoint-controller",
        "endpointslicemirroring-controller",
    ]));
    vec![
        all_of(
            "system-nodes",
            "system",
            500,
            Some(BY_USER),
            groups(&[NODES]),
        ),
        flow_schema(
            "system-node-high",
            "node-high",
            400,
            Some(BY_USER),
            json!({"subjects": groups(&[NODES]), "resourceRules": [
                {"verbs": [ALL], "apiGroups": [""], "resources": ["nodes", "nodes/status"],
                    "clusterScope": true, "namespaces": [ALL]},
                resource_rule(&[ALL], &["coordination.k8s.io"], &["leases"], &[ALL]),
            ]}),
        ),
        flow_schema(
            "probes",
            EXEMPT,
            2,
            None,
            json!({"subjects": groups(&[UNAUTHENTICATED, AUTHENTICATED]), "nonResourceRules": [
                {"verbs": ["get"], "nonResourceURLs": ["/healthz", "/readyz", "/livez"]},
            ]}),
        ),
        flow_schema(
            "system-leader-election",
            "leader-election",
            100,
            Some(BY_USER),
            json!({"subjects": leader_election_subjects, "resourceRules": [leases(&[ALL])]}),
        ),
        flow_schema(
            "workload-leader-election",
            "leader-election",
            200,
            Some(BY_USER),
            json!({"subjects": kube_system_accounts(&[ALL]), "resourceRules": [
                resource_rule(&["get", "create", "update"], &[""], &["endpoints", "configmaps"], &[ALL]),
                leases(&[ALL]),
            ]}),
        ),
        flow_schema(
            "endpoint-controller",
            "workload-high",
            150,
            Some(BY_USER),
            json!({"subjects": endpoint_subjects, "resourceRules": [
                resource_rule(&["get", "create", "update"], &[""], &["endpoints"], &[ALL]),
            ]}),
        ),
        all_of(
            "kube-controller-manager",
            "workload-high",
            800,
            Some(BY_NAMESPACE),
            users(&[KUBE_CONTROLLER_MANAGER]),
        ),
        all_of(
            "kube-scheduler",
            "workload-high",
            800,
            Some(BY_NAMESPACE),
            users(&[KUBE_SCHEDULER]),
        ),
        all_of(
            "kube-system-service-accounts",
            "workload-high",
            900,
            Some(BY_NAMESPACE),
            kube_system_accounts(&[ALL]),
        ),
        all_of(
            "service-accounts",
            "workload-low",
            9000,
            Some(BY_USER),
            groups(&[SERVICE_ACCOUNTS]),
        ),
        all_of(
            "global-default",
            "global-default",
            9900,
            Some(BY_USER),
            groups(&[UNAUTHENTICATED, AUTHENTICATED]),
        ),
        flow_schema(
            "genplane-leader-election",
            "leader-election",
            100,
            Some(BY_USER),
            json!({"subjects": users(COMPONENT_USERS), "resourceRules": [leases(&[ALL])]}),
        ),
        all_of(
            "genplane-components",
            "workload-high",
            800,
            Some(BY_NAMESPACE),
            users(COMPONENT_USERS),
        ),
    ]
}

fn spec_of<T: serde::de::DeserializeOwned>(objects: Vec<Value>, name: &str) -> Option<T> {
    objects
        .into_iter()
        .find(|o| o["metadata"]["name"] == name)
        .and_then(|o| serde_json::from_value(o["spec"].clone()).ok())
}

/// The fixed spec of the mandatory FlowSchema `name`, if it is one.
pub fn mandatory_flow_schema_spec(name: &str) -> Option<FlowSchemaSpec> {
    if name != EXEMPT && name != CATCH_ALL {
        return None;
    }
    spec_of(mandatory_flow_schemas(), name)
}

/// The fixed spec of the mandatory PriorityLevelConfiguration `name`, if it is one.
pub fn mandatory_priority_level_spec(name: &str) -> Option<PriorityLevelSpec> {
    if name != EXEMPT && name != CATCH_ALL {
        return None;
    }
    spec_of(mandatory_priority_levels(), name)
}
