//! The bootstrap policy: upstream's default roles and bindings (Kubernetes 1.33) that make
//! sense for a generic control plane, and least-privilege roles for genplane's own components.
//!
//! Kept from upstream with their rules: `cluster-admin`, `system:discovery`,
//! `system:monitoring`, `system:basic-user`, `system:public-info-viewer`, `system:auth-delegator`,
//! `system:service-account-issuer-discovery`, `system:kube-controller-manager`, the aggregated
//! `admin`, `edit`, `view`, and the per-controller `system:controller:*` roles of the generic
//! controllers (namespace, garbage collector, service account, root CA publisher, clusterrole
//! aggregation, resource quota, the certificate controller of `csrsigning` and `csrcleaner`),
//! each bound as upstream binds them; `system:node-bootstrapper` and the
//! `system:certificates.k8s.io:*` roles (requesting node client certificates, approving for
//! each of Kubernetes' signers: verb `approve` on `signers/<signer>`); in `kube-system` the
//! `extension-apiserver-authentication-reader` Role and its binding. As upstream's, `admin`,
//! `edit` and `view` hold nothing of CertificateSigningRequests (cluster-scoped: a namespace's
//! admin does not request the cluster's certificates).
//!
//! ClusterTrustBundles add nothing to the policy genplane reconciles, and nothing is left of
//! upstream's that applies: upstream 1.33 grants them only to `system:node` (read, for the
//! kubelet's `clusterTrustBundle` projected volumes; genplane has no nodes nor that role) and to
//! `system:controller:kube-apiserver-serving-clustertrustbundle-publisher` (write, and
//! `attest` on `kubernetes.io/kube-apiserver-serving`; the controller-manager's publisher of the
//! API server's serving CA, which genplane does not run). `admin`, `edit` and `view` hold
//! nothing of them, as upstream's (cluster-scoped). Only genplane's feature-controller reads
//! and deletes them, for the `ClusterTrustBundle` feature's turn-off task.
//!
//! Kept from upstream with their rules cut to what genplane serves: `system:aggregate-to-admin`
//! (unchanged: local subject access reviews, roles and rolebindings),
//! `system:aggregate-to-edit` (configmaps, secrets, serviceaccounts and their tokens, events,
//! leases, impersonating service accounts) and `system:aggregate-to-view` (configmaps,
//! serviceaccounts, events, resourcequotas, namespaces). Dropped: everything about nodes, pods,
//! services, volumes, workloads and the scheduler.
//!
//! genplane's own: ClusterRoles, ClusterRoleBindings, and kube-system Roles and RoleBindings
//! for the users [`CONTROLLER_MANAGER_USER`] and [`FEATURE_CONTROLLER_USER`], and
//! [`FEATURE_USE_REPORTER`] for every role that reports feature uses ([`FEATURE_USE_REPORTERS`]:
//! read Features, patch `features/status`, keep an identity Lease in kube-system). Each role's
//! user may `report` as its own component (`featuregates.genplane.io` `components/<name>`),
//! which admission (ComponentRestriction) asks of every write of an identity Lease and of a
//! Feature's status: so each writes only its own uses and Leases, and only the
//! feature-controller a Feature's state. `view` reads Features; `admin` may update them (the
//! strategy lets only dynamic features' `spec.desired` change). [`NETWORK_CLAIM_READER`] reads NetworkClaims and is aggregated into `view`; the
//! `networkclaim-controller` role (the network registry) writes them and their status; no
//! other bootstrap role writes NetworkClaims but `system:genplane:apiserver` (bound to the API
//! server's own client), which creates claims and updates only `kube-apiserver`, its
//! well-known claim.
//!
//! Every object carries the label `kubernetes.io/bootstrapping: rbac-defaults` and the
//! annotation `rbac.authorization.kubernetes.io/autoupdate: "true"`, as upstream's. The
//! aggregated roles carry no rules: the aggregation controller fills them
//! ([`crate::aggregation::aggregate_cluster_roles`] computes them).

use serde_json::{Map, Value, json};

use crate::policy::{API_VERSION, Kind, PolicyRule, RoleRef, Subject};

/// The label every bootstrap object carries, and its value.
pub const BOOTSTRAPPING_LABEL: (&str, &str) = ("kubernetes.io/bootstrapping", "rbac-defaults");
/// The annotation saying whether reconciliation may update the object (`"false"` protects it).
pub const AUTOUPDATE_ANNOTATION: &str = "rbac.authorization.kubernetes.io/autoupdate";
/// The label that aggregates a ClusterRole into `admin`.
pub const AGGREGATE_TO_ADMIN: &str = "rbac.authorization.k8s.io/aggregate-to-admin";
/// The label that aggregates a ClusterRole into `edit`.
pub const AGGREGATE_TO_EDIT: &str = "rbac.authorization.k8s.io/aggregate-to-edit";
/// The label that aggregates a ClusterRole into `view`.
pub const AGGREGATE_TO_VIEW: &str = "rbac.authorization.k8s.io/aggregate-to-view";

/// The user genplane's controller-manager authenticates as.
pub const CONTROLLER_MANAGER_USER: &str = "system:genplane:controller-manager";
/// The user genplane's feature-controller authenticates as.
pub const FEATURE_CONTROLLER_USER: &str = "system:genplane:feature-controller";
/// The user genplane's API server reports its feature uses as (its loopback client).
pub const APISERVER_USER: &str = "system:genplane:apiserver";
/// The ClusterRole and kube-system Role of every component that reports feature uses: read
/// Features, apply its own `status.uses` entries, keep its identity Lease.
pub const FEATURE_USE_REPORTER: &str = "system:genplane:feature-use-reporter";
/// The users that report feature uses (KEP-3920's client flow): every genplane role.
pub const FEATURE_USE_REPORTERS: &[&str] = &[
    APISERVER_USER,
    CONTROLLER_MANAGER_USER,
    FEATURE_CONTROLLER_USER,
];
/// The name of the controller-manager's leader-election Lease (in `kube-system`).
pub const CONTROLLER_MANAGER_LEASE: &str = "genplane-controller-manager";
/// The namespace of system components' Leases and Roles.
pub const KUBE_SYSTEM: &str = "kube-system";
/// The group of monitoring users (upstream's `system:monitoring`).
pub const MONITORING_GROUP: &str = "system:monitoring";
/// The group of all service accounts.
pub const SERVICE_ACCOUNTS_GROUP: &str = "system:serviceaccounts";
/// The user upstream's kube-controller-manager authenticates as.
pub const KUBE_CONTROLLER_MANAGER_USER: &str = "system:kube-controller-manager";
/// The user upstream's kube-scheduler authenticates as.
pub const KUBE_SCHEDULER_USER: &str = "system:kube-scheduler";

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];
const READ_WRITE: &[&str] = &[
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];
const CORE: &str = "";
const AUTHENTICATION: &str = "authentication.k8s.io";
const AUTHORIZATION: &str = "authorization.k8s.io";
const COORDINATION: &str = "coordination.k8s.io";
const EVENTS: &str = "events.k8s.io";
const RBAC: &str = "rbac.authorization.k8s.io";
const FEATURES: &str = "featuregates.genplane.io";
const CERTIFICATES: &str = "certificates.k8s.io";
// Kubernetes' signers (genplane_api::certificates names them for the rest of genplane).
const KUBE_APISERVER_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client";
const KUBE_APISERVER_CLIENT_KUBELET_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
const KUBELET_SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";
const LEGACY_UNKNOWN_SIGNER: &str = "kubernetes.io/legacy-unknown";
// The components each role's user reports as (`genplane_api::featuregates` names them).
const APISERVER_COMPONENT: &str = "apiserver";
const CONTROLLER_MANAGER_COMPONENT: &str = "controller-manager";
const FEATURE_CONTROLLER_COMPONENT: &str = "feature-controller";
const NETWORK_REGISTRY: &str = "networkregistry.genplane.io";
/// The ClusterRole that reads NetworkClaims (aggregated into `view`).
pub const NETWORK_CLAIM_READER: &str = "networkclaim-reader";
const CONTROLLER_PREFIX: &str = "system:controller:";

/// A rule with its lists sorted, as upstream's rule builder leaves them.
fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> PolicyRule {
    sorted(PolicyRule::new(verbs).groups(groups).resources(resources))
}

fn url_rule(verbs: &[&str], urls: &[&str]) -> PolicyRule {
    sorted(PolicyRule::new(verbs).urls(urls))
}

fn sorted(mut r: PolicyRule) -> PolicyRule {
    for list in [
        &mut r.verbs,
        &mut r.api_groups,
        &mut r.resources,
        &mut r.resource_names,
        &mut r.non_resource_urls,
    ] {
        list.sort();
    }
    r
}

/// Taking part as `component` (its identity Leases and its uses of Features; for the
/// feature-controller, a Feature's state): verb `report` on `components/<component>`, which
/// genplane's admission (ComponentRestriction) asks for.
fn report_rule(component: &str) -> PolicyRule {
    sorted(
        PolicyRule::new(&["report"])
            .groups(&[FEATURES])
            .resources(&["components"])
            .names(&[component]),
    )
}

fn events_rule() -> PolicyRule {
    rule(&["create", "update", "patch"], &[CORE, EVENTS], &["events"])
}

fn metadata(name: &str, namespace: &str, labels: &[(&str, &str)]) -> Value {
    let mut label_map = Map::new();
    label_map.insert(BOOTSTRAPPING_LABEL.0.into(), BOOTSTRAPPING_LABEL.1.into());
    for (k, v) in labels {
        label_map.insert((*k).into(), (*v).into());
    }
    let mut meta = json!({
        "name": name,
        "labels": label_map,
        "annotations": {AUTOUPDATE_ANNOTATION: "true"},
    });
    if !namespace.is_empty() {
        meta["namespace"] = json!(namespace);
    }
    meta
}

fn cluster_role(name: &str, labels: &[(&str, &str)], rules: Vec<PolicyRule>) -> Value {
    json!({
        "apiVersion": API_VERSION,
        "kind": "ClusterRole",
        "metadata": metadata(name, "", labels),
        "rules": rules,
    })
}

fn aggregated_cluster_role(name: &str, labels: &[(&str, &str)], selector_label: &str) -> Value {
    json!({
        "apiVersion": API_VERSION,
        "kind": "ClusterRole",
        "metadata": metadata(name, "", labels),
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {selector_label: "true"}}]},
    })
}

fn role(namespace: &str, name: &str, rules: Vec<PolicyRule>) -> Value {
    json!({
        "apiVersion": API_VERSION,
        "kind": "Role",
        "metadata": metadata(name, namespace, &[]),
        "rules": rules,
    })
}

fn cluster_binding(role: &str, subjects: Vec<Subject>) -> Value {
    json!({
        "apiVersion": API_VERSION,
        "kind": "ClusterRoleBinding",
        "metadata": metadata(role, "", &[]),
        "roleRef": RoleRef::cluster_role(role),
        "subjects": subjects,
    })
}

fn role_binding(namespace: &str, name: &str, role_ref: RoleRef, subjects: Vec<Subject>) -> Value {
    json!({
        "apiVersion": API_VERSION,
        "kind": "RoleBinding",
        "metadata": metadata(name, namespace, &[]),
        "roleRef": role_ref,
        "subjects": subjects,
    })
}

/// `verb` on the `signers` named `names` (what the certificate admission plugins ask for).
fn signer_rule(verb: &str, names: &[&str]) -> PolicyRule {
    sorted(
        PolicyRule::new(&[verb])
            .groups(&[CERTIFICATES])
            .resources(&["signers"])
            .names(names),
    )
}

/// Upstream's per-controller roles for the controllers genplane runs (name without the
/// `system:controller:` prefix, rules).
fn controller_roles() -> Vec<(&'static str, Vec<PolicyRule>)> {
    vec![
        (
            // csrsigning and csrcleaner (upstream's approver runs under it too).
            "certificate-controller",
            vec![
                rule(
                    &["get", "list", "watch", "delete"],
                    &[CERTIFICATES],
                    &["certificatesigningrequests"],
                ),
                rule(
                    &["update"],
                    &[CERTIFICATES],
                    &[
                        "certificatesigningrequests/status",
                        "certificatesigningrequests/approval",
                    ],
                ),
                signer_rule("approve", &[KUBE_APISERVER_CLIENT_KUBELET_SIGNER]),
                signer_rule(
                    "sign",
                    &[
                        LEGACY_UNKNOWN_SIGNER,
                        KUBE_APISERVER_CLIENT_SIGNER,
                        KUBE_APISERVER_CLIENT_KUBELET_SIGNER,
                        KUBELET_SERVING_SIGNER,
                    ],
                ),
                rule(&["create"], &[AUTHORIZATION], &["subjectaccessreviews"]),
                events_rule(),
            ],
        ),
        (
            "clusterrole-aggregation-controller",
            vec![rule(
                &["escalate", "get", "list", "watch", "update", "patch"],
                &[RBAC],
                &["clusterroles"],
            )],
        ),
        (
            "generic-garbage-collector",
            vec![
                rule(
                    &["get", "list", "watch", "patch", "update", "delete"],
                    &["*"],
                    &["*"],
                ),
                events_rule(),
            ],
        ),
        (
            "namespace-controller",
            vec![
                rule(
                    &["get", "list", "watch", "delete"],
                    &[CORE],
                    &["namespaces"],
                ),
                rule(
                    &["update"],
                    &[CORE],
                    &["namespaces/finalize", "namespaces/status"],
                ),
                rule(
                    &["get", "list", "watch", "delete", "deletecollection"],
                    &["*"],
                    &["*"],
                ),
            ],
        ),
        (
            "networkclaim-controller",
            vec![
                // create: the well-known claim kube-controller-manager (--cluster-cidr).
                rule(
                    &["get", "list", "watch", "create", "update", "patch"],
                    &[NETWORK_REGISTRY],
                    &["networkclaims"],
                ),
                rule(
                    &["update", "patch"],
                    &[NETWORK_REGISTRY],
                    &["networkclaims/status"],
                ),
                events_rule(),
            ],
        ),
        (
            "resourcequota-controller",
            vec![
                rule(&["list", "watch"], &["*"], &["*"]),
                rule(&["update"], &[CORE], &["resourcequotas/status"]),
                events_rule(),
            ],
        ),
        (
            "root-ca-cert-publisher",
            vec![
                rule(&["create", "update"], &[CORE], &["configmaps"]),
                events_rule(),
            ],
        ),
        (
            "service-account-controller",
            vec![
                rule(&["create"], &[CORE], &["serviceaccounts"]),
                events_rule(),
            ],
        ),
    ]
}

/// The rules of `system:genplane:controller-manager`: the union of the controller roles of
/// the controllers it runs (kept one by one, as upstream lists them), plus creating token and
/// subject access reviews for delegated authentication of its own endpoints.
fn controller_manager_rules() -> Vec<PolicyRule> {
    let mut rules: Vec<PolicyRule> = Vec::new();
    for (_, role_rules) in controller_roles() {
        for r in role_rules {
            if !rules.contains(&r) {
                rules.push(r);
            }
        }
    }
    rules.push(rule(&["create"], &[AUTHENTICATION], &["tokenreviews"]));
    rules.push(rule(
        &["create"],
        &[AUTHORIZATION],
        &["subjectaccessreviews"],
    ));
    rules.push(report_rule(CONTROLLER_MANAGER_COMPONENT));
    rules
}

/// The bootstrap ClusterRoles.
pub fn cluster_roles() -> Vec<Value> {
    let mut roles = vec![
        cluster_role(
            "cluster-admin",
            &[],
            vec![rule(&["*"], &["*"], &["*"]), url_rule(&["*"], &["*"])],
        ),
        cluster_role(
            "system:discovery",
            &[],
            vec![url_rule(
                &["get"],
                &[
                    "/livez",
                    "/readyz",
                    "/healthz",
                    "/version",
                    "/version/",
                    "/openapi",
                    "/openapi/*",
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                ],
            )],
        ),
        cluster_role(
            "system:monitoring",
            &[],
            vec![url_rule(
                &["get"],
                &[
                    "/metrics",
                    "/metrics/slis",
                    "/livez",
                    "/readyz",
                    "/healthz",
                    "/livez/*",
                    "/readyz/*",
                    "/healthz/*",
                ],
            )],
        ),
        cluster_role(
            "system:basic-user",
            &[],
            vec![
                rule(
                    &["create"],
                    &[AUTHORIZATION],
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                ),
                rule(&["create"], &[AUTHENTICATION], &["selfsubjectreviews"]),
            ],
        ),
        cluster_role(
            "system:public-info-viewer",
            &[],
            vec![url_rule(
                &["get"],
                &["/livez", "/readyz", "/healthz", "/version", "/version/"],
            )],
        ),
        aggregated_cluster_role("admin", &[], AGGREGATE_TO_ADMIN),
        aggregated_cluster_role("edit", &[(AGGREGATE_TO_ADMIN, "true")], AGGREGATE_TO_EDIT),
        aggregated_cluster_role("view", &[(AGGREGATE_TO_EDIT, "true")], AGGREGATE_TO_VIEW),
        cluster_role(
            "system:aggregate-to-admin",
            &[(AGGREGATE_TO_ADMIN, "true")],
            vec![
                rule(
                    &["create"],
                    &[AUTHORIZATION],
                    &["localsubjectaccessreviews"],
                ),
                rule(READ_WRITE, &[RBAC], &["roles", "rolebindings"]),
                // spec.desired of dynamic features (the strategy refuses the others).
                rule(&["update", "patch"], &[FEATURES], &["features"]),
            ],
        ),
        cluster_role(
            "system:aggregate-to-edit",
            &[(AGGREGATE_TO_EDIT, "true")],
            vec![
                rule(READ, &[CORE], &["secrets"]),
                rule(&["impersonate"], &[CORE], &["serviceaccounts"]),
                rule(
                    WRITE,
                    &[CORE],
                    &["serviceaccounts", "configmaps", "secrets", "events"],
                ),
                rule(&["create"], &[CORE], &["serviceaccounts/token"]),
                rule(READ_WRITE, &[COORDINATION], &["leases"]),
            ],
        ),
        cluster_role(
            "system:aggregate-to-view",
            &[(AGGREGATE_TO_VIEW, "true")],
            vec![
                rule(READ, &[CORE], &["serviceaccounts", "configmaps"]),
                rule(
                    READ,
                    &[CORE],
                    &[
                        "resourcequotas",
                        "events",
                        "resourcequotas/status",
                        "namespaces/status",
                    ],
                ),
                rule(READ, &[CORE], &["namespaces"]),
                rule(READ, &[FEATURES], &["features", "features/status"]),
            ],
        ),
        cluster_role(
            "system:auth-delegator",
            &[],
            vec![
                rule(&["create"], &[AUTHENTICATION], &["tokenreviews"]),
                rule(&["create"], &[AUTHORIZATION], &["subjectaccessreviews"]),
            ],
        ),
        cluster_role(
            "system:kube-controller-manager",
            &[],
            vec![
                events_rule(),
                rule(&["create"], &[COORDINATION], &["leases"]),
                sorted(
                    PolicyRule::new(&["get", "update"])
                        .groups(&[COORDINATION])
                        .resources(&["leases"])
                        .names(&["kube-controller-manager"]),
                ),
                rule(&["create"], &[CORE], &["secrets", "serviceaccounts"]),
                rule(&["delete"], &[CORE], &["secrets"]),
                rule(
                    &["get"],
                    &[CORE],
                    &["configmaps", "namespaces", "secrets", "serviceaccounts"],
                ),
                rule(&["update"], &[CORE], &["secrets", "serviceaccounts"]),
                rule(&["create"], &[AUTHENTICATION], &["tokenreviews"]),
                rule(&["create"], &[AUTHORIZATION], &["subjectaccessreviews"]),
                rule(&["list", "watch"], &["*"], &["*"]),
                rule(&["create"], &[CORE], &["serviceaccounts/token"]),
            ],
        ),
        // Requesting node client certificates (kubelets' TLS bootstrap), as upstream.
        cluster_role(
            "system:node-bootstrapper",
            &[],
            vec![rule(
                &["create", "get", "list", "watch"],
                &[CERTIFICATES],
                &["certificatesigningrequests"],
            )],
        ),
        cluster_role(
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            &[],
            vec![rule(
                &["create"],
                &[CERTIFICATES],
                &["certificatesigningrequests/nodeclient"],
            )],
        ),
        cluster_role(
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            &[],
            vec![rule(
                &["create"],
                &[CERTIFICATES],
                &["certificatesigningrequests/selfnodeclient"],
            )],
        ),
        // Approving for each of Kubernetes' signers, to bind to whoever approves.
        cluster_role(
            "system:certificates.k8s.io:kube-apiserver-client-approver",
            &[],
            vec![signer_rule("approve", &[KUBE_APISERVER_CLIENT_SIGNER])],
        ),
        cluster_role(
            "system:certificates.k8s.io:kube-apiserver-client-kubelet-approver",
            &[],
            vec![signer_rule(
                "approve",
                &[KUBE_APISERVER_CLIENT_KUBELET_SIGNER],
            )],
        ),
        cluster_role(
            "system:certificates.k8s.io:kubelet-serving-approver",
            &[],
            vec![signer_rule("approve", &[KUBELET_SERVING_SIGNER])],
        ),
        cluster_role(
            "system:certificates.k8s.io:legacy-unknown-approver",
            &[],
            vec![signer_rule("approve", &[LEGACY_UNKNOWN_SIGNER])],
        ),
        cluster_role(
            "system:service-account-issuer-discovery",
            &[],
            vec![url_rule(
                &["get"],
                &[
                    "/.well-known/openid-configuration",
                    "/.well-known/openid-configuration/",
                    "/openid/v1/jwks",
                    "/openid/v1/jwks/",
                ],
            )],
        ),
    ];
    for (name, rules) in controller_roles() {
        roles.push(cluster_role(
            &format!("{CONTROLLER_PREFIX}{name}"),
            &[],
            rules,
        ));
    }
    roles.push(cluster_role(
        CONTROLLER_MANAGER_USER,
        &[],
        controller_manager_rules(),
    ));
    roles.push(cluster_role(
        FEATURE_CONTROLLER_USER,
        &[],
        vec![
            // It announces Features; it never writes their spec (spec.desired is the admins').
            rule(
                &["get", "list", "watch", "create"],
                &[FEATURES],
                &["features"],
            ),
            rule(&["update", "patch"], &[FEATURES], &["features/status"]),
            report_rule(FEATURE_CONTROLLER_COMPONENT),
            // The tasks of the features it knows over Leases: ClearField (CoordinatedLeaderElection's
            // Lease fields) patches; DeleteObjects (APIServerIdentity's identity Leases) deletes
            // the Leases the API servers made, picked by their label.
            rule(
                &["get", "list", "patch", "delete"],
                &[COORDINATION],
                &["leases"],
            ),
            // The WaitForObjectsRemoved tasks (NetworkRegistry's claims): read, and delete only
            // when an admin annotated the Feature to ask for it.
            rule(
                &["get", "list", "delete"],
                &[NETWORK_REGISTRY],
                &["networkclaims"],
            ),
            // ... and MutatingAdmissionPolicy's policies and bindings.
            rule(
                &["get", "list", "delete"],
                &["admissionregistration.k8s.io"],
                &[
                    "mutatingadmissionpolicies",
                    "mutatingadmissionpolicybindings",
                ],
            ),
            // ... and ClusterTrustBundle's bundles (deleting needs no `attest`).
            rule(
                &["get", "list", "delete"],
                &[CERTIFICATES],
                &["clustertrustbundles"],
            ),
        ],
    ));
    // The API server's own client: its well-known claim (kube-apiserver) and its status
    // condition, by name; creating cannot be limited by name (the name is in the body), which
    // admission (ComponentRestriction) does, as it keeps the status write to the condition.
    roles.push(cluster_role(
        APISERVER_USER,
        &[],
        vec![
            rule(
                &["get", "list", "watch", "create"],
                &[NETWORK_REGISTRY],
                &["networkclaims"],
            ),
            sorted(
                PolicyRule::new(&["update", "patch"])
                    .groups(&[NETWORK_REGISTRY])
                    .resources(&["networkclaims/status"])
                    .names(&["kube-apiserver"]),
            ),
            events_rule(),
            report_rule(APISERVER_COMPONENT),
        ],
    ));
    roles.push(cluster_role(
        NETWORK_CLAIM_READER,
        &[(AGGREGATE_TO_VIEW, "true")],
        vec![rule(
            READ,
            &[NETWORK_REGISTRY],
            &["networkclaims", "networkclaims/status"],
        )],
    ));
    roles.push(cluster_role(
        FEATURE_USE_REPORTER,
        &[],
        vec![
            rule(READ, &[FEATURES], &["features"]),
            rule(&["patch"], &[FEATURES], &["features/status"]),
        ],
    ));
    roles
}

/// The bootstrap ClusterRoleBindings (each named after its ClusterRole).
pub fn cluster_role_bindings() -> Vec<Value> {
    let mut bindings = vec![
        cluster_binding(
            "cluster-admin",
            vec![Subject::group(genplane_authentication::SYSTEM_MASTERS)],
        ),
        cluster_binding("system:monitoring", vec![Subject::group(MONITORING_GROUP)]),
        cluster_binding(
            "system:discovery",
            vec![Subject::group(
                genplane_authentication::SYSTEM_AUTHENTICATED,
            )],
        ),
        cluster_binding(
            "system:basic-user",
            vec![Subject::group(
                genplane_authentication::SYSTEM_AUTHENTICATED,
            )],
        ),
        cluster_binding(
            "system:public-info-viewer",
            vec![
                Subject::group(genplane_authentication::SYSTEM_AUTHENTICATED),
                Subject::group(genplane_authentication::SYSTEM_UNAUTHENTICATED),
            ],
        ),
        cluster_binding(
            "system:kube-controller-manager",
            vec![Subject::user(KUBE_CONTROLLER_MANAGER_USER)],
        ),
        cluster_binding(
            "system:service-account-issuer-discovery",
            vec![Subject::group(SERVICE_ACCOUNTS_GROUP)],
        ),
    ];
    for (name, _) in controller_roles() {
        bindings.push(cluster_binding(
            &format!("{CONTROLLER_PREFIX}{name}"),
            vec![Subject::service_account(KUBE_SYSTEM, name)],
        ));
    }
    bindings.push(cluster_binding(
        CONTROLLER_MANAGER_USER,
        vec![Subject::user(CONTROLLER_MANAGER_USER)],
    ));
    bindings.push(cluster_binding(
        FEATURE_CONTROLLER_USER,
        vec![Subject::user(FEATURE_CONTROLLER_USER)],
    ));
    bindings.push(cluster_binding(
        APISERVER_USER,
        vec![Subject::user(APISERVER_USER)],
    ));
    bindings.push(cluster_binding(
        FEATURE_USE_REPORTER,
        FEATURE_USE_REPORTERS
            .iter()
            .map(|u| Subject::user(u))
            .collect(),
    ));
    bindings
}

/// The bootstrap Roles (all in `kube-system`).
pub fn roles() -> Vec<Value> {
    vec![
        role(
            KUBE_SYSTEM,
            "extension-apiserver-authentication-reader",
            vec![sorted(
                PolicyRule::new(READ)
                    .groups(&[CORE])
                    .resources(&["configmaps"])
                    .names(&["extension-apiserver-authentication"]),
            )],
        ),
        // Leader election of the controller-manager: create the Lease, then read and renew
        // only its own.
        role(
            KUBE_SYSTEM,
            CONTROLLER_MANAGER_USER,
            vec![
                rule(&["create"], &[COORDINATION], &["leases"]),
                sorted(
                    PolicyRule::new(&["get", "update", "patch"])
                        .groups(&[COORDINATION])
                        .resources(&["leases"])
                        .names(&[CONTROLLER_MANAGER_LEASE]),
                ),
            ],
        ),
        // The feature-controller's identity and leader Leases: it reads all live identities
        // and removes expired ones.
        role(
            KUBE_SYSTEM,
            FEATURE_CONTROLLER_USER,
            vec![rule(
                &[
                    "get", "list", "watch", "create", "update", "patch", "delete",
                ],
                &[COORDINATION],
                &["leases"],
            )],
        ),
        // Identity Leases of feature-use reporters: each creates, renews and at a clean stop
        // deletes its own (their names are chosen at start, so they cannot be listed here;
        // admission keeps each to its own component's).
        role(
            KUBE_SYSTEM,
            FEATURE_USE_REPORTER,
            vec![rule(
                &["create", "get", "update", "patch", "delete"],
                &[COORDINATION],
                &["leases"],
            )],
        ),
    ]
}

/// The bootstrap RoleBindings (all in `kube-system`).
pub fn role_bindings() -> Vec<Value> {
    vec![
        role_binding(
            KUBE_SYSTEM,
            "system::extension-apiserver-authentication-reader",
            RoleRef::role("extension-apiserver-authentication-reader"),
            vec![
                Subject::user(KUBE_CONTROLLER_MANAGER_USER),
                Subject::user(KUBE_SCHEDULER_USER),
            ],
        ),
        role_binding(
            KUBE_SYSTEM,
            CONTROLLER_MANAGER_USER,
            RoleRef::role(CONTROLLER_MANAGER_USER),
            vec![Subject::user(CONTROLLER_MANAGER_USER)],
        ),
        role_binding(
            KUBE_SYSTEM,
            FEATURE_CONTROLLER_USER,
            RoleRef::role(FEATURE_CONTROLLER_USER),
            vec![Subject::user(FEATURE_CONTROLLER_USER)],
        ),
        role_binding(
            KUBE_SYSTEM,
            FEATURE_USE_REPORTER,
            RoleRef::role(FEATURE_USE_REPORTER),
            FEATURE_USE_REPORTERS
                .iter()
                .map(|u| Subject::user(u))
                .collect(),
        ),
    ]
}

/// Every bootstrap object with its kind, in the order to create them: ClusterRoles,
/// ClusterRoleBindings, Roles, RoleBindings.
pub fn objects() -> Vec<(Kind, Value)> {
    let mut all: Vec<(Kind, Value)> = Vec::new();
    all.extend(cluster_roles().into_iter().map(|o| (Kind::ClusterRole, o)));
    all.extend(
        cluster_role_bindings()
            .into_iter()
            .map(|o| (Kind::ClusterRoleBinding, o)),
    );
    all.extend(roles().into_iter().map(|o| (Kind::Role, o)));
    all.extend(role_bindings().into_iter().map(|o| (Kind::RoleBinding, o)));
    all
}

#[cfg(test)]
mod tests;
