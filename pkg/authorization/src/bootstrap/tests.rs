//! The bootstrap policy, evaluated: who may do what.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::*;
use crate::aggregation::aggregate_cluster_roles;
use crate::escalation::check_role_write;
use crate::policy::GROUP;
use crate::rbac::{RbacAuthorizer, RuleResolver};
use crate::{Attributes, Authorizer, Decision, UserInfo};

/// The bootstrap policy with aggregation done (as the controller would), plus test bindings in
/// namespace `a`: vera views, eddie edits, ada administers, the service account `a/bot` views.
fn policy() -> RbacAuthorizer {
    let mut roles = cluster_roles();
    aggregate_cluster_roles(&mut roles);
    let grant = |name: &str, role: &str, subject: Value| {
        json!({"metadata": {"name": name, "namespace": "a"},
               "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": role},
               "subjects": [subject]})
    };
    let mut objects: Vec<(Kind, Value)> =
        roles.into_iter().map(|r| (Kind::ClusterRole, r)).collect();
    objects.extend(
        cluster_role_bindings()
            .into_iter()
            .map(|b| (Kind::ClusterRoleBinding, b)),
    );
    objects.extend(super::roles().into_iter().map(|r| (Kind::Role, r)));
    objects.extend(role_bindings().into_iter().map(|b| (Kind::RoleBinding, b)));
    // A role with a subresource wildcard, bound cluster-wide to stan.
    objects.push((
        Kind::ClusterRole,
        json!({"metadata": {"name": "status-reader"}, "rules": [
            {"verbs": ["get"], "apiGroups": ["*"], "resources": ["*/status"]}]}),
    ));
    objects.push((
        Kind::ClusterRoleBinding,
        json!({"metadata": {"name": "stan-reads-status"},
               "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "status-reader"},
               "subjects": [{"kind": "User", "apiGroup": GROUP, "name": "stan"}]}),
    ));
    for (name, role, subject) in [
        (
            "vera-views",
            "view",
            json!({"kind": "User", "apiGroup": GROUP, "name": "vera"}),
        ),
        (
            "eddie-edits",
            "edit",
            json!({"kind": "User", "apiGroup": GROUP, "name": "eddie"}),
        ),
        (
            "ada-admins",
            "admin",
            json!({"kind": "User", "apiGroup": GROUP, "name": "ada"}),
        ),
        (
            "bot-views",
            "view",
            json!({"kind": "ServiceAccount", "name": "bot"}),
        ),
    ] {
        objects.push((Kind::RoleBinding, grant(name, role, subject)));
    }
    RbacAuthorizer::from_objects(objects.iter().map(|(k, v)| (*k, v))).unwrap()
}

fn who(name: &str) -> UserInfo {
    match name {
        "anonymous" => UserInfo::anonymous(),
        "root" => UserInfo::authenticated("root", vec!["system:masters".into()]),
        "bot" => UserInfo::authenticated(
            "system:serviceaccount:a:bot",
            vec![
                "system:serviceaccounts".into(),
                "system:serviceaccounts:a".into(),
            ],
        ),
        "otherbot" => UserInfo::authenticated(
            "system:serviceaccount:b:bot",
            vec![
                "system:serviceaccounts".into(),
                "system:serviceaccounts:b".into(),
            ],
        ),
        "prometheus" => UserInfo::authenticated("prometheus", vec![MONITORING_GROUP.into()]),
        "cm" => UserInfo::authenticated(CONTROLLER_MANAGER_USER, vec![]),
        "fc" => UserInfo::authenticated(FEATURE_CONTROLLER_USER, vec![]),
        other => UserInfo::authenticated(other, vec![]),
    }
}

/// A request: "verb group/resource[/sub] ns name" or "verb /path".
fn request(user: &str, what: &str) -> Attributes {
    let parts: Vec<&str> = what.split(' ').collect();
    if parts[1].starts_with('/') {
        return Attributes::non_resource(who(user), parts[0], parts[1]);
    }
    let (group, resource) = match parts[1].split_once(':') {
        Some((g, r)) => (g, r),
        None => ("", parts[1]),
    };
    let ns = parts.get(2).copied().unwrap_or("-");
    let ns = if ns == "-" { "" } else { ns };
    let name = parts.get(3).copied().unwrap_or("");
    Attributes::resource(who(user), parts[0], group, resource, ns, name)
}

#[test]
fn the_matrix_of_users_verbs_and_resources() {
    let p = policy();
    // (user, request, allowed). Requests: "verb [group:]resource[/sub] ns name" ("-" for no
    // namespace) or "verb /path".
    let table: &[(&str, &str, bool)] = &[
        // system:masters can do anything, anywhere.
        ("root", "delete secrets a x", true),
        (
            "root",
            "escalate rbac.authorization.k8s.io:clusterroles - x",
            true,
        ),
        ("root", "post /anything", true),
        (
            "root",
            "create serviceaccounts/token kube-system default",
            true,
        ),
        // An authenticated user: discovery, health, version, self reviews; no data.
        ("alice", "get /api", true),
        ("alice", "get /apis/apps/v1", true),
        ("alice", "get /version", true),
        ("alice", "get /healthz", true),
        ("alice", "get /openapi/v3", true),
        ("alice", "post /api", false),
        ("alice", "get /metrics", false),
        ("alice", "get /livez/etcd", false),
        // Certificates: nobody but admins and the certificate controller approves or signs.
        (
            "alice",
            "create certificates.k8s.io:certificatesigningrequests - csr",
            false,
        ),
        (
            "alice",
            "approve certificates.k8s.io:signers - kubernetes.io/kube-apiserver-client",
            false,
        ),
        (
            "system:serviceaccount:kube-system:certificate-controller",
            "sign certificates.k8s.io:signers - kubernetes.io/kube-apiserver-client",
            true,
        ),
        (
            "system:serviceaccount:kube-system:certificate-controller",
            "sign certificates.k8s.io:signers - example.com/other",
            false,
        ),
        (
            "system:serviceaccount:kube-system:certificate-controller",
            "update certificates.k8s.io:certificatesigningrequests/status - csr",
            true,
        ),
        (
            "system:genplane:controller-manager",
            "delete certificates.k8s.io:certificatesigningrequests - csr",
            true,
        ),
        (
            "system:genplane:controller-manager",
            "sign certificates.k8s.io:signers - kubernetes.io/legacy-unknown",
            true,
        ),
        (
            "alice",
            "create authorization.k8s.io:selfsubjectaccessreviews -",
            true,
        ),
        (
            "alice",
            "create authorization.k8s.io:selfsubjectrulesreviews -",
            true,
        ),
        (
            "alice",
            "create authentication.k8s.io:selfsubjectreviews -",
            true,
        ),
        (
            "alice",
            "create authorization.k8s.io:subjectaccessreviews -",
            false,
        ),
        ("alice", "list configmaps a", false),
        ("alice", "list configmaps -", false),
        ("alice", "get namespaces - a", false),
        ("alice", "get /.well-known/openid-configuration", false),
        // Anonymous: public info only.
        ("anonymous", "get /version", true),
        ("anonymous", "get /version/", true),
        ("anonymous", "get /healthz", true),
        ("anonymous", "get /livez", true),
        ("anonymous", "get /readyz", true),
        ("anonymous", "get /api", false),
        ("anonymous", "get /apis", false),
        ("anonymous", "get /openapi/v2", false),
        (
            "anonymous",
            "create authorization.k8s.io:selfsubjectaccessreviews -",
            false,
        ),
        ("anonymous", "list configmaps a", false),
        // view in a: read configmaps in a only, not secrets, no writes.
        ("vera", "list configmaps a", true),
        ("vera", "watch configmaps a", true),
        ("vera", "get configmaps a x", true),
        ("vera", "list configmaps b", false),
        ("vera", "list configmaps -", false),
        ("vera", "get secrets a x", false),
        ("vera", "list secrets a", false),
        ("vera", "create configmaps a", false),
        ("vera", "get namespaces a a", true),
        ("vera", "get namespaces/status a a", true),
        ("vera", "list resourcequotas a", true),
        ("vera", "list events a", true),
        ("vera", "list serviceaccounts a", true),
        ("vera", "create serviceaccounts/token a default", false),
        ("vera", "list coordination.k8s.io:leases a", false),
        ("vera", "list rbac.authorization.k8s.io:roles a", false),
        ("vera", "get /api", true),
        // edit in a: writes to configmaps, secrets, tokens, leases; no RBAC, no quota writes.
        ("eddie", "create configmaps a", true),
        ("eddie", "update configmaps a x", true),
        ("eddie", "deletecollection configmaps a", true),
        ("eddie", "get secrets a x", true),
        ("eddie", "create secrets a", true),
        ("eddie", "create serviceaccounts/token a default", true),
        ("eddie", "impersonate serviceaccounts a default", true),
        ("eddie", "update coordination.k8s.io:leases a l", true),
        ("eddie", "list configmaps a", true),
        ("eddie", "create configmaps b", false),
        ("eddie", "update resourcequotas a q", false),
        ("eddie", "update resourcequotas/status a q", false),
        ("eddie", "create rbac.authorization.k8s.io:roles a", false),
        (
            "eddie",
            "create authorization.k8s.io:localsubjectaccessreviews a",
            false,
        ),
        // admin in a: edit plus RBAC in the namespace.
        ("ada", "create rbac.authorization.k8s.io:roles a", true),
        (
            "ada",
            "delete rbac.authorization.k8s.io:rolebindings a x",
            true,
        ),
        (
            "ada",
            "create authorization.k8s.io:localsubjectaccessreviews a",
            true,
        ),
        ("ada", "create secrets a", true),
        ("ada", "create rbac.authorization.k8s.io:roles b", false),
        (
            "ada",
            "create rbac.authorization.k8s.io:clusterroles -",
            false,
        ),
        (
            "ada",
            "bind rbac.authorization.k8s.io:clusterroles a admin",
            false,
        ),
        // A service account bound by a RoleBinding without a subject namespace.
        ("bot", "list configmaps a", true),
        ("bot", "list configmaps b", false),
        ("bot", "get /.well-known/openid-configuration", true),
        ("bot", "get /openid/v1/jwks", true),
        ("otherbot", "list configmaps a", false),
        // resourceNames: the scheduler reads one configmap in kube-system, by name only.
        (
            "system:kube-scheduler",
            "get configmaps kube-system extension-apiserver-authentication",
            true,
        ),
        (
            "system:kube-scheduler",
            "watch configmaps kube-system extension-apiserver-authentication",
            true,
        ),
        (
            "system:kube-scheduler",
            "get configmaps kube-system other",
            false,
        ),
        (
            "system:kube-scheduler",
            "list configmaps kube-system",
            false,
        ),
        (
            "system:kube-scheduler",
            "get configmaps a extension-apiserver-authentication",
            false,
        ),
        // Subresource wildcards: `*/status` of any resource in any group, nothing else.
        ("stan", "get namespaces/status - a", true),
        ("stan", "get resourcequotas/status a q", true),
        (
            "stan",
            "get featuregates.genplane.io:features/status kube-system f",
            true,
        ),
        ("stan", "get namespaces - a", false),
        ("stan", "update namespaces/status - a", false),
        ("stan", "get namespaces/finalize - a", false),
        // Monitoring.
        ("prometheus", "get /metrics", true),
        ("prometheus", "get /readyz/etcd", true),
        ("prometheus", "get /metrics/slis", true),
        ("prometheus", "get /debug/pprof", false),
        // genplane's controller-manager.
        ("cm", "delete configmaps a x", true),
        ("cm", "deletecollection secrets a", true),
        (
            "cm",
            "list networkregistry.genplane.io:networkclaims -",
            true,
        ),
        (
            "cm",
            "patch networkregistry.genplane.io:networkclaims/status - x",
            true,
        ),
        (
            "cm",
            "patch networkregistry.genplane.io:networkclaims - x",
            true,
        ),
        // The API server's client writes its own well-known claim only.
        (
            "system:genplane:apiserver",
            "patch networkregistry.genplane.io:networkclaims/status - kube-apiserver",
            true,
        ),
        (
            "system:genplane:apiserver",
            "update networkregistry.genplane.io:networkclaims - kube-controller-manager",
            false,
        ),
        (
            "system:genplane:apiserver",
            "patch networkregistry.genplane.io:networkclaims - kube-apiserver",
            false,
        ),
        // Each role takes part as its own component only.
        (
            "system:genplane:apiserver",
            "report featuregates.genplane.io:components - apiserver",
            true,
        ),
        (
            "system:genplane:apiserver",
            "report featuregates.genplane.io:components - feature-controller",
            false,
        ),
        (
            "cm",
            "report featuregates.genplane.io:components - controller-manager",
            true,
        ),
        (
            "cm",
            "report featuregates.genplane.io:components - feature-controller",
            false,
        ),
        (
            "fc",
            "report featuregates.genplane.io:components - feature-controller",
            true,
        ),
        (
            "fc",
            "report featuregates.genplane.io:components - apiserver",
            false,
        ),
        (
            "eddie",
            "report featuregates.genplane.io:components - feature-controller",
            false,
        ),
        // Nobody else writes NetworkClaims, the well-known ones included.
        (
            "alice",
            "get networkregistry.genplane.io:networkclaims - kube-apiserver",
            false,
        ),
        (
            "eddie",
            "patch networkregistry.genplane.io:networkclaims - kube-apiserver",
            false,
        ),
        ("cm", "update namespaces/finalize - a", true),
        ("cm", "update namespaces/status - a", true),
        ("cm", "create serviceaccounts a", true),
        ("cm", "create configmaps a", true),
        ("cm", "update configmaps a kube-root-ca.crt", true),
        (
            "cm",
            "escalate rbac.authorization.k8s.io:clusterroles - admin",
            true,
        ),
        (
            "cm",
            "update rbac.authorization.k8s.io:clusterroles - admin",
            true,
        ),
        ("cm", "update resourcequotas/status a q", true),
        ("cm", "create events a", true),
        ("cm", "create events.k8s.io:events a", true),
        ("cm", "create secrets a", false),
        (
            "cm",
            "create rbac.authorization.k8s.io:clusterrolebindings -",
            false,
        ),
        (
            "cm",
            "bind rbac.authorization.k8s.io:clusterroles - cluster-admin",
            false,
        ),
        ("cm", "create serviceaccounts/token a default", false),
        ("cm", "impersonate users - root", false),
        ("cm", "create coordination.k8s.io:leases kube-system", true),
        (
            "cm",
            "get coordination.k8s.io:leases kube-system genplane-controller-manager",
            true,
        ),
        (
            "cm",
            "update coordination.k8s.io:leases kube-system genplane-controller-manager",
            true,
        ),
        // The garbage collector's role (update and delete of everything) dominates: the
        // lease-name restriction adds nothing beyond it, as upstream's union would.
        (
            "cm",
            "update coordination.k8s.io:leases kube-system someone-else",
            true,
        ),
        ("cm", "create coordination.k8s.io:leases a", false),
        // genplane's feature-controller.
        (
            "fc",
            "list featuregates.genplane.io:features kube-system",
            true,
        ),
        (
            "fc",
            "create featuregates.genplane.io:features kube-system",
            true,
        ),
        (
            "fc",
            "patch featuregates.genplane.io:features/status kube-system f",
            true,
        ),
        (
            "fc",
            "delete featuregates.genplane.io:features kube-system f",
            false,
        ),
        (
            "fc",
            "patch featuregates.genplane.io:features kube-system f",
            false,
        ),
        ("fc", "list coordination.k8s.io:leases kube-system", true),
        (
            "fc",
            "delete coordination.k8s.io:leases kube-system old",
            true,
        ),
        // Its ClearField tasks patch Leases anywhere; its DeleteObjects tasks delete the
        // Leases a feature made (APIServerIdentity's, picked by label).
        ("fc", "list coordination.k8s.io:leases a", true),
        ("fc", "patch coordination.k8s.io:leases a x", true),
        ("fc", "delete coordination.k8s.io:leases a x", true),
        ("fc", "create coordination.k8s.io:leases a x", false),
        // Every role reports its feature uses and keeps an identity Lease.
        (
            "cm",
            "patch featuregates.genplane.io:features/status kube-system f",
            true,
        ),
        (
            "cm",
            "create featuregates.genplane.io:features kube-system",
            false,
        ),
        ("fc", "list configmaps kube-system", false),
    ];
    let mut wrong = Vec::new();
    for (user, what, allowed) in table {
        let (decision, reason) = p.authorize(&request(user, what));
        if (decision == Decision::Allow) != *allowed {
            wrong.push(format!(
                "{user} {what}: expected allowed={allowed}, got {decision:?} {reason}"
            ));
        }
        if decision != Decision::Allow && (decision != Decision::NoOpinion || !reason.is_empty()) {
            wrong.push(format!(
                "{user} {what}: a denial without errors expected, got {decision:?} {reason}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn allow_reasons_name_the_bootstrap_bindings() {
    let p = policy();
    assert_eq!(
        p.authorize(&request("root", "delete secrets a x")).1,
        "RBAC: allowed by ClusterRoleBinding \"cluster-admin\" of ClusterRole \"cluster-admin\" to Group \"system:masters\""
    );
    assert_eq!(
        p.authorize(&request("anonymous", "get /version")).1,
        "RBAC: allowed by ClusterRoleBinding \"system:public-info-viewer\" of ClusterRole \"system:public-info-viewer\" to Group \"system:unauthenticated\""
    );
    assert_eq!(
        p.authorize(&request("vera", "list configmaps a")).1,
        "RBAC: allowed by RoleBinding \"vera-views/a\" of ClusterRole \"view\" to User \"vera\""
    );
}

#[test]
fn every_object_is_labelled_annotated_and_resolvable() {
    let p = policy();
    let mut names = BTreeSet::new();
    for (kind, object) in objects() {
        assert_eq!(object["apiVersion"], "rbac.authorization.k8s.io/v1");
        assert_eq!(object["kind"], kind.as_str());
        let meta = &object["metadata"];
        assert_eq!(
            meta["labels"]["kubernetes.io/bootstrapping"], "rbac-defaults",
            "{meta}"
        );
        assert_eq!(meta["annotations"][AUTOUPDATE_ANNOTATION], "true", "{meta}");
        let key = (
            kind,
            meta["namespace"].as_str().unwrap_or("").to_owned(),
            meta["name"].to_string(),
        );
        assert!(names.insert(key), "duplicate {kind} {meta}");
        if matches!(kind, Kind::RoleBinding | Kind::ClusterRoleBinding) {
            let role_ref: RoleRef = serde_json::from_value(object["roleRef"].clone()).unwrap();
            let ns = meta["namespace"].as_str().unwrap_or("");
            assert!(
                p.role_reference_rules(&role_ref, ns).is_ok(),
                "{kind} {meta} refers to a missing role"
            );
        }
    }
    // The aggregated roles as upstream: selectors and the labels chaining view→edit→admin.
    let roles = cluster_roles();
    let find = |name: &str| {
        roles
            .iter()
            .find(|r| r["metadata"]["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(
        find("admin")["aggregationRule"],
        json!({"clusterRoleSelectors": [{"matchLabels": {AGGREGATE_TO_ADMIN: "true"}}]})
    );
    assert!(find("admin").get("rules").is_none());
    assert_eq!(
        find("edit")["metadata"]["labels"][AGGREGATE_TO_ADMIN],
        "true"
    );
    assert_eq!(
        find("view")["metadata"]["labels"][AGGREGATE_TO_EDIT],
        "true"
    );
    assert_eq!(
        find("system:aggregate-to-view")["metadata"]["labels"][AGGREGATE_TO_VIEW],
        "true"
    );
}

#[test]
fn admins_cannot_escalate_beyond_admin() {
    let p = policy();
    let ada = who("ada");
    let within = json!({"metadata": {"name": "cm-reader", "namespace": "a"}, "rules": [
        {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"]}]});
    assert!(check_role_write(&p, &p, &ada, Kind::Role, "a", &within, None).is_ok());
    let beyond = json!({"metadata": {"name": "quota-writer", "namespace": "a"}, "rules": [
        {"verbs": ["update"], "apiGroups": [""], "resources": ["resourcequotas"]}]});
    let err = check_role_write(&p, &p, &ada, Kind::Role, "a", &beyond, None).unwrap_err();
    assert_eq!(
        err.reason,
        "user \"ada\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"resourcequotas\"], Verbs:[\"update\"]}"
    );
    // cluster-admin holders may write anything.
    assert!(check_role_write(&p, &p, &who("root"), Kind::Role, "a", &beyond, None).is_ok());
}

#[test]
fn rules_review_of_an_authenticated_user_lists_the_bootstrap_grants() {
    let p = policy();
    let rules = p.rules_for(&who("alice"), "a");
    assert!(rules.evaluation_errors.is_empty());
    let urls: BTreeSet<&str> = rules
        .non_resource_rules
        .iter()
        .flat_map(|r| r.non_resource_urls.iter().map(String::as_str))
        .collect();
    assert!(urls.contains("/api/*") && urls.contains("/version"));
    let resources: BTreeSet<&str> = rules
        .resource_rules
        .iter()
        .flat_map(|r| r.resources.iter().map(String::as_str))
        .collect();
    assert_eq!(
        resources,
        BTreeSet::from([
            "selfsubjectaccessreviews",
            "selfsubjectreviews",
            "selfsubjectrulesreviews"
        ])
    );
}
