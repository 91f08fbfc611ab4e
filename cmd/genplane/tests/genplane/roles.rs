//! What each role identity may do on the objects that steer the cluster: Features, the Leases
//! in `kube-system` and NetworkClaims, as a table. Every role's own kubeconfig (the API
//! server's `apiserver-loopback`, the controller-manager's, the feature-controller's) and an
//! editor of `kube-system` make each request (a dry run, so that the rows do not change what
//! the next one finds); a refusal is a 403 `Forbidden`, anything else is allowed.

#![allow(clippy::unwrap_used)]

use serde_json::{Value, json};

use crate::support::{self, Raw, ok};

const FEATURES: &str = "/apis/featuregates.genplane.io/v1alpha1/namespaces/kube-system/features";
const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";
const CLAIMS: &str = "/apis/networkregistry.genplane.io/v1alpha1/networkclaims";
const IDENTITY: &str = "featuregates.genplane.io/identity";

/// Who makes the requests of a row.
struct Caller {
    name: &'static str,
    /// The component its identity is (`apiserver`, `controller-manager`, ...), whose uses it
    /// reports and whose identity Leases it keeps.
    component: &'static str,
    /// Another component than its own.
    other: &'static str,
    raw: Raw,
    token: Option<String>,
}

impl Caller {
    fn request(&self, method: &str, path: &str, content_type: &str, body: &Value) -> (u16, Value) {
        let auth = self.token.as_ref().map(|t| format!("Bearer {t}"));
        let mut headers = vec![("Content-Type", content_type)];
        if let Some(auth) = &auth {
            headers.push(("Authorization", auth.as_str()));
        }
        let body = (method != "GET" && method != "DELETE").then(|| body.to_string());
        let answer = self
            .raw
            .request(method, path, &headers, body.as_deref().map(str::as_bytes));
        let json = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
        (answer.status, json)
    }
}

/// One operation of the table: a name, and the request as `caller` makes it.
type Operation = (&'static str, fn(&Caller) -> (u16, Value));

const MERGE: &str = "application/merge-patch+json";
const APPLY: &str = "application/apply-patch+yaml";
const JSON: &str = "application/json";

fn lease(name: &str, component: Option<&str>, seconds: i64) -> Value {
    let mut lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "namespace": "kube-system"},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": seconds},
    });
    if let Some(component) = component {
        lease["metadata"]["labels"] = json!({IDENTITY: component});
    }
    lease
}

fn use_of(component: &str) -> Value {
    json!({
        "apiVersion": "featuregates.genplane.io/v1alpha1", "kind": "Feature",
        "metadata": {"name": "probe-feature", "namespace": "kube-system"},
        "status": {"uses": [{"component": component, "instance": format!("{component}-probe"),
                             "value": "On", "version": "1.33"}]},
    })
}

fn status_patch(status: Value) -> Value {
    json!({"status": status})
}

const OPERATIONS: &[Operation] = &[
    ("list Features", |c| {
        c.request("GET", FEATURES, JSON, &Value::Null)
    }),
    ("apply its own use of a Feature", |c| {
        c.request(
            "PATCH",
            &format!(
                "{FEATURES}/probe-feature/status?dryRun=All&fieldManager={}/{}-probe&force=true",
                c.component, c.component
            ),
            APPLY,
            &use_of(c.component),
        )
    }),
    ("apply another component's use", |c| {
        c.request(
            "PATCH",
            &format!(
                "{FEATURES}/probe-feature/status?dryRun=All&fieldManager={}/{}-probe&force=true",
                c.other, c.other
            ),
            APPLY,
            &use_of(c.other),
        )
    }),
    ("set a Feature's status.state", |c| {
        c.request(
            "PATCH",
            &format!("{FEATURES}/probe-feature/status?dryRun=All"),
            MERGE,
            &status_patch(json!({"state": "Off"})),
        )
    }),
    ("set a Feature's status.dynamic", |c| {
        c.request(
            "PATCH",
            &format!("{FEATURES}/probe-feature/status?dryRun=All"),
            MERGE,
            &status_patch(json!({"dynamic": false})),
        )
    }),
    ("set a Feature's status.tasks", |c| {
        c.request(
            "PATCH",
            &format!("{FEATURES}/probe-feature/status?dryRun=All"),
            MERGE,
            &status_patch(json!({"tasks": [{"type": "WaitForUses"}]})),
        )
    }),
    ("annotate a Feature through its status", |c| {
        c.request(
            "PATCH",
            &format!("{FEATURES}/probe-feature/status?dryRun=All"),
            MERGE,
            &json!({"metadata": {"annotations": {"featuregates.genplane.io/delete-objects": "true"}}}),
        )
    }),
    ("set a Feature's spec.desired", |c| {
        c.request(
            "PATCH",
            &format!("{FEATURES}/probe-feature?dryRun=All"),
            MERGE,
            &json!({"spec": {"desired": "Off"}}),
        )
    }),
    ("delete a Feature", |c| {
        c.request(
            "DELETE",
            &format!("{FEATURES}/probe-feature?dryRun=All"),
            JSON,
            &Value::Null,
        )
    }),
    ("create a Feature", |c| {
        c.request(
            "POST",
            &format!("{FEATURES}?dryRun=All"),
            JSON,
            &json!({"apiVersion": "featuregates.genplane.io/v1alpha1", "kind": "Feature",
                    "metadata": {"name": "other-probe", "namespace": "kube-system"},
                    "spec": {"featureName": "OtherProbe"}}),
        )
    }),
    ("create its own identity Lease", |c| {
        c.request(
            "POST",
            &format!("{LEASES}?dryRun=All"),
            JSON,
            &lease(&format!("{}-mine", c.component), Some(c.component), 15),
        )
    }),
    ("create a feature-controller identity Lease", |c| {
        c.request(
            "POST",
            &format!("{LEASES}?dryRun=All"),
            JSON,
            &lease("feature-controller-forged", Some("feature-controller"), 15),
        )
    }),
    (
        "create a feature-controller identity Lease lasting a day",
        |c| {
            c.request(
                "POST",
                &format!("{LEASES}?dryRun=All"),
                JSON,
                &lease(
                    "feature-controller-long",
                    Some("feature-controller"),
                    86_400,
                ),
            )
        },
    ),
    ("create another component's identity Lease", |c| {
        c.request(
            "POST",
            &format!("{LEASES}?dryRun=All"),
            JSON,
            &lease(&format!("{}-forged", c.other), Some(c.other), 15),
        )
    }),
    ("relabel a Lease as a feature-controller identity", |c| {
        c.request(
            "PATCH",
            &format!("{LEASES}/some-app?dryRun=All"),
            MERGE,
            &json!({"metadata": {"labels": {IDENTITY: "feature-controller"}}}),
        )
    }),
    ("delete another component's identity Lease", |c| {
        c.request(
            "DELETE",
            &format!("{LEASES}/{}-probe?dryRun=All", c.other),
            JSON,
            &Value::Null,
        )
    }),
    ("renew the controller-manager's leader Lease", |c| {
        c.request(
            "PATCH",
            &format!("{LEASES}/genplane-controller-manager?dryRun=All"),
            MERGE,
            &json!({"spec": {"holderIdentity": "someone"}}),
        )
    }),
    ("create an ordinary Lease", |c| {
        c.request(
            "POST",
            &format!("{LEASES}?dryRun=All"),
            JSON,
            &lease("another-app", None, 15),
        )
    }),
    ("clear a field of an ordinary Lease", |c| {
        c.request(
            "PATCH",
            &format!("{LEASES}/some-app?dryRun=All"),
            MERGE,
            &json!({"spec": {"leaseDurationSeconds": null}}),
        )
    }),
    ("take an ordinary Lease", |c| {
        c.request(
            "PATCH",
            &format!("{LEASES}/some-app?dryRun=All"),
            MERGE,
            &json!({"spec": {"holderIdentity": "someone"}}),
        )
    }),
    ("list NetworkClaims", |c| {
        c.request("GET", CLAIMS, JSON, &Value::Null)
    }),
    ("create kube-controller-manager's claim", |c| {
        c.request(
            "POST",
            &format!("{CLAIMS}?dryRun=All"),
            JSON,
            &json!({"apiVersion": "networkregistry.genplane.io/v1alpha1", "kind": "NetworkClaim",
                    "metadata": {"name": "kube-controller-manager"},
                    "spec": {"addressSpace": [{"reference": {"resource": "pods"}, "prefix": "::/0"}]}}),
        )
    }),
    ("create kube-apiserver's claim", |c| {
        c.request(
            "POST",
            &format!("{CLAIMS}?dryRun=All"),
            JSON,
            &json!({"apiVersion": "networkregistry.genplane.io/v1alpha1", "kind": "NetworkClaim",
                    "metadata": {"name": "kube-apiserver"},
                    "spec": {"addressSpace": [{"reference": {"resource": "services"}, "prefix": "10.0.0.0/24"}]}}),
        )
    }),
    ("write kube-apiserver's FromFlags condition", |c| {
        c.request(
            "PATCH",
            &format!("{CLAIMS}/kube-apiserver/status?dryRun=All"),
            MERGE,
            &status_patch(
                json!({"conditions": [{"type": "FromFlags", "status": "False",
                "reason": "DiffersFromFlags", "message": "probe",
                "lastTransitionTime": "2030-01-01T00:00:00Z"}]}),
            ),
        )
    }),
    ("write kube-apiserver's allocation", |c| {
        c.request(
            "PATCH",
            &format!("{CLAIMS}/kube-apiserver/status?dryRun=All"),
            MERGE,
            &status_patch(
                json!({"addressSpace": [{"prefix": "0.0.0.0/0", "status": "Allocated"}]}),
            ),
        )
    }),
    ("change another claim's spec", |c| {
        c.request(
            "PATCH",
            &format!("{CLAIMS}/some-claim?dryRun=All"),
            MERGE,
            &json!({"spec": {"addressSpace": [{"reference": {"resource": "pods"}, "prefix": "0.0.0.0/0"}]}}),
        )
    }),
    ("delete a claim", |c| {
        c.request(
            "DELETE",
            &format!("{CLAIMS}/some-claim?dryRun=All"),
            JSON,
            &Value::Null,
        )
    }),
];

/// Each role identity may do what its role needs on Features, the Leases of `kube-system` and
/// NetworkClaims, and nothing else: a role writes only its own uses and identity Leases, only
/// the feature-controller writes a Feature's state, only the controller-manager decides claims,
/// the API server writes only its well-known claim's `FromFlags`, and a `kube-system` editor
/// cannot take part as a component.
#[test]
fn each_role_identity_may_do_exactly_what_its_role_needs() {
    let tokens = tempfile::tempdir().unwrap();
    let file = tokens.path().join("tokens.csv");
    std::fs::write(&file, "tok-eddie,eddie,u-eddie\n").unwrap();
    let token_flag = format!("--token-auth-file={}", file.display());
    let server = support::start_with(&["--feature-gates=NetworkRegistry=true", &token_flag]);
    let admin = |args: &[&str]| ok(server.kubectl("kubectl", args));
    admin(&[
        "create",
        "rolebinding",
        "eddie-edits",
        "--clusterrole=edit",
        "--user=eddie",
        "-n",
        "kube-system",
    ]);
    // What the operations find: a Feature with a state and uses, identity Leases of every
    // component, the controller-manager's leader Lease, another Lease, a claim.
    let raw = server.raw();
    let created = |path: &str, body: Value| {
        let answer = raw.request("POST", path, &[], Some(body.to_string().as_bytes()));
        assert_eq!(answer.status, 201, "{path}: {}", answer.text());
    };
    created(
        FEATURES,
        json!({"apiVersion": "featuregates.genplane.io/v1alpha1", "kind": "Feature",
               "metadata": {"name": "probe-feature", "namespace": "kube-system"},
               "spec": {"featureName": "ProbeFeature"}}),
    );
    let status = raw.request(
        "PATCH",
        &format!("{FEATURES}/probe-feature/status"),
        &[("Content-Type", MERGE)],
        Some(
            status_patch(json!({"state": "On", "dynamic": true, "stage": "Alpha"}))
                .to_string()
                .as_bytes(),
        ),
    );
    assert_eq!(status.status, 200, "{}", status.text());
    for component in ["apiserver", "controller-manager", "feature-controller"] {
        created(
            LEASES,
            lease(&format!("{component}-probe"), Some(component), 15),
        );
    }
    created(LEASES, lease("genplane-controller-manager", None, 15));
    created(LEASES, lease("some-app", None, 15));
    created(
        CLAIMS,
        json!({"apiVersion": "networkregistry.genplane.io/v1alpha1", "kind": "NetworkClaim",
               "metadata": {"name": "some-claim"},
               "spec": {"addressSpace": [{"reference": {"resource": "pods"}, "prefix": "10.200.0.0/16"}]}}),
    );
    support::eventually("the API server's well-known claim", || {
        (raw.get(&format!("{CLAIMS}/kube-apiserver")).status == 200).then_some(())
    });

    let role = |stem: &str| Raw::from_kubeconfig(&server.data().join(format!("{stem}.kubeconfig")));
    let callers = [
        Caller {
            name: "apiserver",
            component: "apiserver",
            other: "controller-manager",
            raw: role("apiserver-loopback"),
            token: None,
        },
        Caller {
            name: "controller-manager",
            component: "controller-manager",
            other: "apiserver",
            raw: role("controller-manager"),
            token: None,
        },
        Caller {
            name: "feature-controller",
            component: "feature-controller",
            other: "apiserver",
            raw: role("feature-controller"),
            token: None,
        },
        Caller {
            name: "kube-system editor",
            component: "eddie",
            other: "apiserver",
            raw: Raw::without_certificate(&server.kubeconfig()),
            token: Some("tok-eddie".to_owned()),
        },
    ];
    let y = true;
    let n = false;
    // One column per caller above, one row per operation.
    let expected: &[[bool; 4]] = &[
        [y, y, y, y], // list Features
        [y, y, y, n], // apply its own use of a Feature
        [n, n, y, n], // apply another component's use
        [n, n, y, n], // set a Feature's status.state
        [n, n, y, n], // set a Feature's status.dynamic
        [n, n, y, n], // set a Feature's status.tasks
        [n, n, y, n], // annotate a Feature through its status
        [n, n, n, n], // set a Feature's spec.desired
        [n, n, n, n], // delete a Feature
        [n, n, y, n], // create a Feature
        [y, y, y, n], // create its own identity Lease
        [n, n, y, n], // create a feature-controller identity Lease
        [n, n, n, n], // create a feature-controller identity Lease lasting a day
        [n, n, n, n], // create another component's identity Lease
        [n, n, n, n], // relabel a Lease as a feature-controller identity
        [n, n, y, n], // delete another component's identity Lease
        [n, y, n, y], // renew the controller-manager's leader Lease
        [n, n, n, y], // create an ordinary Lease
        [n, n, y, y], // clear a field of an ordinary Lease
        [n, n, n, y], // take an ordinary Lease
        [y, y, y, n], // list NetworkClaims
        [n, y, n, n], // create kube-controller-manager's claim
        [y, y, n, n], // create kube-apiserver's claim
        [y, y, n, n], // write kube-apiserver's FromFlags condition
        [n, y, n, n], // write kube-apiserver's allocation
        [n, y, n, n], // change another claim's spec
        [n, y, y, n], // delete a claim
    ];
    assert_eq!(expected.len(), OPERATIONS.len());
    let mut wrong = Vec::new();
    for ((operation, request), row) in OPERATIONS.iter().zip(expected) {
        for (caller, want) in callers.iter().zip(row) {
            let (status, answer) = request(caller);
            let forbidden = status == 403;
            if forbidden {
                assert_eq!(answer["reason"], "Forbidden", "{answer}");
            } else {
                assert!(
                    status < 300 || [404, 409].contains(&status),
                    "{} {operation}: {status} {answer}",
                    caller.name
                );
            }
            if forbidden == *want {
                wrong.push(format!(
                    "{} may {}{operation}: {status} {}",
                    caller.name,
                    if *want { "" } else { "not " },
                    answer["message"].as_str().unwrap_or_default()
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}
