//! The Feature API (`featuregates.genplane.io/v1alpha1`) and `genplane feature-controller`
//! (KEP-3920, stage 1): features announced with the uses every role reports, transitions
//! through their tasks, refusals of what only dynamic features allow, and several
//! feature-controllers of which exactly one acts.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::{self, Apiserver, BIN, Process, Raw, eventually, ok, text};

const CLE: &str = "coordinated-leader-election";

fn kubectl(kubeconfig: &Path, args: &[&str]) -> Output {
    crate::support::kubectl_command("kubectl", kubeconfig)
        .args(args)
        .output()
        .unwrap()
}

fn feature(kubeconfig: &Path, name: &str) -> Option<Value> {
    let out = kubectl(
        kubeconfig,
        &["get", "feature", name, "-n", "kube-system", "-o", "json"],
    );
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).unwrap())
}

/// The values of the uses reported by `component`.
fn uses_of(feature: &Value, component: &str) -> Vec<String> {
    feature["status"]["uses"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|u| u["component"] == component)
        .map(|u| u["value"].as_str().unwrap().to_owned())
        .collect()
}

const DEMO_LEASE: &str = "apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: demo, namespace: default}
spec: {holderIdentity: me, strategy: OldestEmulationVersion, preferredHolder: you}
";

fn apply_stdin(kubeconfig: &Path, args: &[&str], input: &str) -> Output {
    let mut command = crate::support::kubectl_command("kubectl", kubeconfig);
    command.args(args);
    genplane_test_support::process::output_with_input(command, Some(input))
}

fn all_in_one(dir: &Path, gates: &str) -> (Process, PathBuf) {
    all_in_one_with(dir, gates, &[])
}

fn all_in_one_with(dir: &Path, gates: &str, extra: &[&str]) -> (Process, PathBuf) {
    let mut command = Command::new(BIN);
    command
        .args(["all-in-one", "--bind-address=127.0.0.1", "--secure-port=0"])
        .arg(format!("--data-dir={}", dir.join("data").display()))
        .arg("--feature-use-report-period=1s")
        .arg(format!("--feature-gates={gates}"))
        .args(extra);
    let log = support::next_log(dir, "all-in-one");
    let mut process = Process::spawn("all-in-one", command, &log);
    let kubeconfig = process.wait_for("the export KUBECONFIG line", |p| {
        p.output()
            .lines()
            .find_map(|line| line.strip_prefix("export KUBECONFIG=").map(PathBuf::from))
    });
    (process, kubeconfig)
}

/// All-in-one announces the features it knows with the uses of its API server; the table,
/// `kubectl explain` and validation read well; restarted with CoordinatedLeaderElection off,
/// the feature turns off through its tasks: every live instance reports Off, then the Lease
/// fields the feature wrote are cleared.
#[test]
fn all_in_one_announces_features_and_turns_one_off_through_its_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let (mut process, kubeconfig) = all_in_one(dir.path(), "CoordinatedLeaderElection=true");
    let announced = process.wait_for("the feature with the API server's use", |_| {
        let object = feature(&kubeconfig, CLE)?;
        (uses_of(&object, "apiserver") == ["On"]).then_some(object)
    });
    assert_eq!(
        announced["spec"]["featureName"],
        "CoordinatedLeaderElection"
    );
    assert_eq!(announced["status"]["state"], "On");
    assert_eq!(announced["status"]["stage"], "Beta");
    assert_eq!(announced["status"]["default"], false);
    assert_eq!(announced["status"]["dynamic"], false);
    assert_eq!(announced["status"]["versions"]["binary"], "1.33");

    // Each instance owns only its own entry, by server-side apply.
    let managers = ok(kubectl(
        &kubeconfig,
        &[
            "get",
            "feature",
            CLE,
            "-n",
            "kube-system",
            "--show-managed-fields",
            "-o",
            "jsonpath={range .metadata.managedFields[*]}{.manager} {.operation}{\"\\n\"}{end}",
        ],
    ));
    assert!(
        managers
            .lines()
            .any(|l| l.starts_with("apiserver/apiserver-") && l.ends_with(" Apply")),
        "{managers}"
    );

    let table = ok(kubectl(
        &kubeconfig,
        &["get", "features", "-n", "kube-system"],
    ));
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME", "STATE", "DESIRED", "STAGE", "DEFAULT", "AGREED", "TASK", "AGE"
        ],
        "{table}"
    );
    assert!(table.contains("api-server-identity"), "{table}");
    let explained = ok(kubectl(&kubeconfig, &["explain", "feature.status.uses"]));
    assert!(explained.contains("instance"), "{explained}");
    assert!(explained.contains("firstReport"), "{explained}");

    // Only dynamic features take spec.desired; names follow the feature names.
    let refused = kubectl(
        &kubeconfig,
        &[
            "patch",
            "feature",
            CLE,
            "-n",
            "kube-system",
            "--type=merge",
            "-p",
            "{\"spec\":{\"desired\":\"Off\"}}",
        ],
    );
    assert!(!refused.status.success());
    assert!(
        text(&refused)
            .contains("spec.desired: Forbidden: feature CoordinatedLeaderElection is not dynamic"),
        "{}",
        text(&refused)
    );
    let misnamed = apply_stdin(
        &kubeconfig,
        &["apply", "--server-side", "-f", "-"],
        "apiVersion: featuregates.genplane.io/v1alpha1
kind: Feature
metadata: {name: my-feature, namespace: default}
spec: {featureName: MyOwnFeature}
",
    );
    assert!(
        text(&misnamed)
            .contains("metadata.name: Invalid value: \"my-feature\": must be \"my-own-feature\""),
        "{}",
        text(&misnamed)
    );
    let third_party = apply_stdin(
        &kubeconfig,
        &["apply", "--server-side", "-f", "-"],
        "apiVersion: featuregates.genplane.io/v1alpha1
kind: Feature
metadata: {name: my-own-feature, namespace: default}
spec: {featureName: MyOwnFeature}
",
    );
    assert!(third_party.status.success(), "{}", text(&third_party));

    // With the feature on, a Lease keeps the fields only it allows.
    ok(apply_stdin(&kubeconfig, &["apply", "-f", "-"], DEMO_LEASE));
    let strategy = ok(kubectl(
        &kubeconfig,
        &["get", "lease", "demo", "-o", "jsonpath={.spec.strategy}"],
    ));
    assert_eq!(strategy, "OldestEmulationVersion");
    // Moving to 1.30, which lacks the feature, is not safe while it is on.
    let check = check_to(&kubeconfig, "1.30");
    assert!(!check.status.success());
    let said = text(&check);
    assert!(
        said.contains(
            "UNSAFE CoordinatedLeaderElection  1.30 does not have it and it is On, on in apiserver/"
        ),
        "{said}"
    );
    assert!(
        said.contains("moving the cluster to 1.30 is not safe"),
        "{said}"
    );
    assert!(
        check_to(&kubeconfig, "1.33").status.success(),
        "{}",
        text(&check_to(&kubeconfig, "1.33"))
    );

    // Restart with the feature off: the transition runs its tasks and the fields are gone.
    process.terminate();
    process.wait_exit(support::DEADLINE);
    let (mut process, kubeconfig) = all_in_one(dir.path(), "CoordinatedLeaderElection=false");
    let off = process.wait_for("the feature turned off", |_| {
        let object = feature(&kubeconfig, CLE)?;
        (object["status"]["state"] == "Off").then_some(object)
    });
    assert_eq!(off["status"].get("tasks"), None);
    let spec = ok(kubectl(
        &kubeconfig,
        &["get", "lease", "demo", "-o", "jsonpath={.spec}"],
    ));
    assert_eq!(spec, "{\"holderIdentity\":\"me\"}");
    let log = process.output();
    let turning = log
        .find("feature state changed feature=\"CoordinatedLeaderElection\" state=\"TurningOff\"")
        .unwrap_or_else(|| panic!("{log}"));
    let cleared = log.find("task=\"ClearField\"").unwrap();
    let done = log
        .find("feature state changed feature=\"CoordinatedLeaderElection\" state=\"Off\"")
        .unwrap();
    assert!(turning < cleared && cleared < done, "{log}");
    // Every live instance agrees again, and the old API server's use is gone.
    process.wait_for("agreement on Off", |_| {
        let object = feature(&kubeconfig, CLE)?;
        let agreed = object["status"]["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == "Agreed" && c["status"] == "True");
        (agreed && uses_of(&object, "apiserver") == ["Off"]).then_some(())
    });
    // Off, and nothing of it stored: moving to 1.30 is safe now.
    let check = check_to(&kubeconfig, "1.30");
    let said = text(&check);
    assert!(check.status.success(), "{said}");
    assert!(
        said.contains(
            "SAFE   CoordinatedLeaderElection  1.30 does not have it; it is off and nothing of it is stored\n"
        ),
        "{said}"
    );
    assert!(
        said.ends_with("moving the cluster to 1.30 is safe\n"),
        "{said}"
    );
}

/// A downgrade below a feature's first version: all-in-one with CoordinatedLeaderElection on
/// stores a Lease with the fields only it allows; restarted at `--emulated-version=1.30`, which
/// lacks the feature, the feature-controller turns its Feature off through the feature's
/// turn-off tasks (the fields are cleared from the stored Lease) and records the move in the
/// `UpgradeSafe` condition, false while it runs and true once nothing of it is left.
#[test]
fn moving_the_emulated_version_below_a_feature_clears_what_it_stored() {
    let dir = tempfile::tempdir().unwrap();
    let (mut process, kubeconfig) = all_in_one(dir.path(), "CoordinatedLeaderElection=true");
    process.wait_for("the feature On", |_| {
        (feature(&kubeconfig, CLE)?["status"]["state"] == "On").then_some(())
    });
    ok(apply_stdin(&kubeconfig, &["apply", "-f", "-"], DEMO_LEASE));
    let strategy = ok(kubectl(
        &kubeconfig,
        &["get", "lease", "demo", "-o", "jsonpath={.spec.strategy}"],
    ));
    assert_eq!(strategy, "OldestEmulationVersion");

    process.terminate();
    process.wait_exit(support::DEADLINE);
    let (mut process, kubeconfig) = all_in_one_with(dir.path(), "", &["--emulated-version=1.30"]);
    let off = process.wait_for("the feature turned off at 1.30", |_| {
        let object = feature(&kubeconfig, CLE)?;
        (object["status"]["state"] == "Off").then_some(object)
    });
    assert_eq!(off["status"]["versions"]["emulated"], "1.30");
    let upgrade_safe = off["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "UpgradeSafe")
        .unwrap()
        .clone();
    assert_eq!(upgrade_safe["status"], "True", "{upgrade_safe}");
    assert_eq!(
        upgrade_safe["message"],
        "CoordinatedLeaderElection does not exist at emulated version 1.30; it is off and its turn-off tasks ran"
    );
    let spec = ok(kubectl(
        &kubeconfig,
        &["get", "lease", "demo", "-o", "jsonpath={.spec}"],
    ));
    assert_eq!(spec, "{\"holderIdentity\":\"me\"}");
    let log = process.output();
    let turning = log
        .find("feature state changed feature=\"CoordinatedLeaderElection\" state=\"TurningOff\"")
        .unwrap_or_else(|| panic!("{log}"));
    let cleared = log.find("task=\"ClearField\"").unwrap();
    let done = log
        .find("feature state changed feature=\"CoordinatedLeaderElection\" state=\"Off\"")
        .unwrap();
    assert!(turning < cleared && cleared < done, "{log}");
    // Nothing of it stored: staying at 1.30 is safe.
    let check = check_to(&kubeconfig, "1.30");
    assert!(check.status.success(), "{}", text(&check));
}

const USER_CLAIM: &str = "apiVersion: networkregistry.genplane.io/v1alpha1
kind: NetworkClaim
metadata: {name: lab}
spec:
  addressSpace:
  - {reference: {group: '', resource: pods}, prefix: 10.200.0.0/16}
";

/// The names of the stored NetworkClaims, or `None` when they are not served.
fn claim_names(kubeconfig: &Path) -> Option<Vec<String>> {
    let out = kubectl(kubeconfig, &["get", "networkclaims", "-o", "name"]);
    out.status.success().then(|| {
        let mut names: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        names.sort();
        names
    })
}

/// Turning NetworkRegistry off (all-in-one restarted with it off) leaves nothing behind: while
/// the cluster turns it off the claims stay served, readable and deletable but not creatable;
/// the transition waits for them to be removed, naming them, until an admin deletes them or
/// (here) lets the feature-controller delete them; then the feature is Off, a move to a version
/// without it is safe, and after the next restart the API is not served at all.
#[test]
fn turning_an_api_feature_off_removes_its_objects_first() {
    const FEATURE: &str = "network-registry";
    let dir = tempfile::tempdir().unwrap();
    let (mut process, kubeconfig) = all_in_one(dir.path(), "NetworkRegistry=true");
    ok(apply_stdin(&kubeconfig, &["apply", "-f", "-"], USER_CLAIM));
    process.wait_for("the user's and the API server's claims", |_| {
        let names = claim_names(&kubeconfig)?;
        (names
            == [
                "networkclaim.networkregistry.genplane.io/kube-apiserver",
                "networkclaim.networkregistry.genplane.io/lab",
            ])
        .then_some(())
    });
    process.wait_for("the feature On", |_| {
        (feature(&kubeconfig, FEATURE)?["status"]["state"] == "On").then_some(())
    });

    process.terminate();
    process.wait_exit(support::DEADLINE);
    let (mut process, kubeconfig) = all_in_one(dir.path(), "NetworkRegistry=false");
    // Still served while the cluster turns the feature off: readable, not creatable.
    let waiting = process.wait_for("the transition waiting for the claims", |_| {
        let object = feature(&kubeconfig, FEATURE)?;
        let task = &object["status"]["tasks"][0];
        (object["status"]["state"] == "TurningOff" && task["type"] == "WaitForObjectsRemoved")
            .then(|| task["message"].as_str().unwrap_or_default().to_owned())
    });
    assert!(
        waiting.starts_with("waiting for 2 networkclaims to be removed (kube-apiserver, lab): delete them, or annotate this Feature featuregates.genplane.io/delete-objects=true"),
        "{waiting}"
    );
    assert_eq!(claim_names(&kubeconfig).unwrap().len(), 2);
    let refused = apply_stdin(
        &kubeconfig,
        &["create", "-f", "-"],
        &USER_CLAIM.replace("name: lab", "name: lab-2"),
    );
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains(
            "networkclaims.networkregistry.genplane.io \"lab-2\" is forbidden: the NetworkRegistry feature is off in this server"
        ),
        "{}",
        text(&refused)
    );
    let check = check_to(&kubeconfig, "1.32");
    assert!(!check.status.success(), "{}", text(&check));
    assert!(
        text(&check).contains("UNSAFE NetworkRegistry"),
        "{}",
        text(&check)
    );

    // The admin lets the feature-controller delete them: the controller-manager, still running
    // the registry controller, releases them after their grace period, and the feature is Off.
    ok(kubectl(
        &kubeconfig,
        &[
            "annotate",
            "feature",
            FEATURE,
            "-n",
            "kube-system",
            "featuregates.genplane.io/delete-objects=true",
        ],
    ));
    process.wait_for("the feature Off", |_| {
        (feature(&kubeconfig, FEATURE)?["status"]["state"] == "Off").then_some(())
    });
    assert_eq!(claim_names(&kubeconfig), Some(Vec::new()));
    let check = check_to(&kubeconfig, "1.32");
    assert!(check.status.success(), "{}", text(&check));

    // Restarted: the API is gone.
    process.terminate();
    process.wait_exit(support::DEADLINE);
    let (_process, kubeconfig) = all_in_one(dir.path(), "NetworkRegistry=false");
    let out = kubectl(&kubeconfig, &["get", "networkclaims"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("the server doesn't have a resource type \"networkclaims\""),
        "{}",
        text(&out)
    );
}

/// A cluster the every-feature test works on.
struct Cluster<'a> {
    kubeconfig: &'a Path,
    /// The data directory (its SQLite database is read directly for stored state).
    data: &'a Path,
}

impl Cluster<'_> {
    fn kubectl(&self, args: &[&str]) -> Output {
        kubectl(self.kubeconfig, args)
    }

    /// How many live keys the database holds under `prefix`.
    fn stored_under(&self, prefix: &str) -> i64 {
        let db = rusqlite::Connection::open_with_flags(
            self.data.join("genplane.db"),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .unwrap();
        db.query_row(
            "SELECT COUNT(*) FROM kv AS k WHERE CAST(k.key AS TEXT) LIKE ?1 || '%' AND k.deleted = 0 \
             AND k.revision = (SELECT MAX(revision) FROM kv WHERE key = k.key)",
            [prefix],
            |row| row.get(0),
        )
        .unwrap()
    }
}

/// How the every-feature test uses a feature while it is on, and what "nothing of it is left"
/// means once it is off. Every feature the binary registers needs one.
struct Exercise {
    feature: &'static str,
    /// Uses the feature, checking that it works.
    use_it: fn(&Cluster<'_>),
    /// Checks, once the feature is off and the roles restarted, that nothing of it is left,
    /// served or done.
    pristine: fn(&Cluster<'_>),
}

/// The upstream APIs off by default that some features serve (MutatingAdmissionPolicy's alpha,
/// ClusterTrustBundle's beta), enabled in the every-feature test so that only the gates decide.
const OFF_BY_DEFAULT_APIS: &[&str] = &[
    "--runtime-config=admissionregistration.k8s.io/v1alpha1=true,certificates.k8s.io/v1beta1=true",
];

/// A ClusterTrustBundle of `signer` named `name` holding the cluster's CA (the
/// ClusterTrustBundle exercise).
fn trust_bundle(cluster: &Cluster<'_>, name: &str, signer: &str) -> String {
    let ca = std::fs::read_to_string(cluster.data.join("pki/ca.crt")).unwrap();
    crate::certificates::trust_bundle_yaml(name, Some(signer), &ca)
}

/// A MutatingAdmissionPolicy and its binding labelling the ConfigMaps labelled
/// `exercise: map` (the MutatingAdmissionPolicy exercise).
const LABEL_POLICY: &str = r#"
apiVersion: admissionregistration.k8s.io/v1alpha1
kind: MutatingAdmissionPolicy
metadata:
  name: label
spec:
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
    objectSelector: {matchLabels: {exercise: map}}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: "Object{metadata: Object.metadata{labels: {'mutated': 'yes'}}}"
---
apiVersion: admissionregistration.k8s.io/v1alpha1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: label
spec:
  policyName: label
"#;

/// Creates the ConfigMap `name` labelled `exercise: map` in `map-exercise`: its labels.
fn labelled_config_map(cluster: &Cluster<'_>, name: &str) -> String {
    let manifest = format!(
        "{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"{name}\",\"namespace\":\"map-exercise\",\"labels\":{{\"exercise\":\"map\"}}}}}}"
    );
    ok(apply_stdin(
        cluster.kubeconfig,
        &["create", "-o", "jsonpath={.metadata.labels}", "-f", "-"],
        &manifest,
    ))
}

const IDENTITY_SELECTOR: &str = "apiserver.kubernetes.io/identity=kube-apiserver";

const EXERCISES: &[Exercise] = &[
    Exercise {
        feature: "APIServerIdentity",
        use_it: |cluster| {
            eventually("the API server's identity Lease", || {
                let out = ok(cluster.kubectl(&[
                    "get",
                    "leases",
                    "-n",
                    "kube-system",
                    "-l",
                    IDENTITY_SELECTOR,
                    "-o",
                    "name",
                ]));
                (out.lines().count() == 1).then_some(())
            });
        },
        pristine: |cluster| {
            let out = ok(cluster.kubectl(&[
                "get",
                "leases",
                "-n",
                "kube-system",
                "-l",
                IDENTITY_SELECTOR,
                "-o",
                "name",
            ]));
            assert_eq!(out, "", "identity Leases left");
        },
    },
    Exercise {
        feature: "CoordinatedLeaderElection",
        use_it: |cluster| {
            ok(apply_stdin(
                cluster.kubeconfig,
                &["apply", "-f", "-"],
                DEMO_LEASE,
            ));
            let strategy =
                ok(cluster.kubectl(&["get", "lease", "demo", "-o", "jsonpath={.spec.strategy}"]));
            assert_eq!(strategy, "OldestEmulationVersion");
        },
        pristine: |cluster| {
            let spec = ok(cluster.kubectl(&["get", "lease", "demo", "-o", "jsonpath={.spec}"]));
            assert_eq!(spec, "{\"holderIdentity\":\"me\"}");
            // New writes of the fields are dropped.
            ok(apply_stdin(
                cluster.kubeconfig,
                &["apply", "-f", "-"],
                &DEMO_LEASE.replace("name: demo", "name: probe"),
            ));
            let spec = ok(cluster.kubectl(&["get", "lease", "probe", "-o", "jsonpath={.spec}"]));
            assert_eq!(spec, "{\"holderIdentity\":\"me\"}");
        },
    },
    Exercise {
        feature: "APIResponseCompression",
        use_it: |cluster| {
            create_config_maps(cluster.kubeconfig);
            assert_eq!(
                list_config_maps(&Raw::from_kubeconfig(cluster.kubeconfig)),
                (true, 160)
            );
        },
        pristine: |cluster| {
            assert_eq!(
                list_config_maps(&Raw::from_kubeconfig(cluster.kubeconfig)),
                (false, 160)
            );
        },
    },
    Exercise {
        feature: "NetworkRegistry",
        use_it: |cluster| {
            ok(apply_stdin(
                cluster.kubeconfig,
                &["apply", "-f", "-"],
                USER_CLAIM,
            ));
            eventually("the claim allocated", || {
                let out = cluster.kubectl(&[
                    "get",
                    "networkclaim",
                    "lab",
                    "-o",
                    "jsonpath={.status.addressSpace[0].status}",
                ]);
                (text(&out) == "Allocated").then_some(())
            });
        },
        pristine: |cluster| {
            let out = cluster.kubectl(&["get", "networkclaims"]);
            assert!(
                text(&out).contains("the server doesn't have a resource type \"networkclaims\""),
                "{}",
                text(&out)
            );
            assert_eq!(
                cluster.stored_under("/registry/networkregistry.genplane.io/"),
                0
            );
        },
    },
    Exercise {
        feature: "MutatingAdmissionPolicy",
        use_it: |cluster| {
            ok(cluster.kubectl(&["create", "namespace", "map-exercise"]));
            ok(apply_stdin(
                cluster.kubeconfig,
                &["apply", "-f", "-"],
                LABEL_POLICY,
            ));
            let mut n = 0;
            eventually("the policy to label ConfigMaps", || {
                n += 1;
                labelled_config_map(cluster, &format!("labelled-{n}"))
                    .contains("\"mutated\":\"yes\"")
                    .then_some(())
            });
        },
        pristine: |cluster| {
            for resource in [
                "mutatingadmissionpolicies",
                "mutatingadmissionpolicybindings",
            ] {
                let out = cluster.kubectl(&["get", resource]);
                assert!(
                    text(&out).contains(&format!(
                        "the server doesn't have a resource type \"{resource}\""
                    )),
                    "{}",
                    text(&out)
                );
                assert_eq!(cluster.stored_under(&format!("/registry/{resource}/")), 0);
            }
            assert_eq!(
                labelled_config_map(cluster, "after"),
                "{\"exercise\":\"map\"}"
            );
        },
    },
    Exercise {
        feature: "ClusterTrustBundle",
        use_it: |cluster| {
            ok(apply_stdin(
                cluster.kubeconfig,
                &["apply", "-f", "-"],
                &trust_bundle(cluster, "example.com:exercise:v1", "example.com/exercise"),
            ));
            let listed = ok(cluster.kubectl(&[
                "get",
                "clustertrustbundles",
                "--field-selector=spec.signerName=example.com/exercise",
                "-o",
                "name",
            ]));
            assert_eq!(
                listed.trim(),
                "clustertrustbundle.certificates.k8s.io/example.com:exercise:v1"
            );
        },
        pristine: |cluster| {
            let out = cluster.kubectl(&["get", "clustertrustbundles"]);
            assert!(
                text(&out)
                    .contains("the server doesn't have a resource type \"clustertrustbundles\""),
                "{}",
                text(&out)
            );
            assert_eq!(cluster.stored_under("/registry/clustertrustbundles/"), 0);
        },
    },
    Exercise {
        feature: "OrderedNamespaceDeletion",
        // genplane serves no pods, so the order shows only where a control plane built with
        // the library serves them (the test cluster's `features` test); here the namespace
        // controller consults the gate as it empties a namespace.
        use_it: |cluster| delete_namespace_with_content(cluster, "ordered-exercise"),
        // It stores nothing: with it off, a namespace's content is still removed.
        pristine: |cluster| delete_namespace_with_content(cluster, "unordered-exercise"),
    },
];

/// Creates the namespace `name` with a ConfigMap, deletes it and waits until it is gone.
fn delete_namespace_with_content(cluster: &Cluster<'_>, name: &str) {
    ok(cluster.kubectl(&["create", "namespace", name]));
    ok(cluster.kubectl(&["create", "configmap", "content", "-n", name]));
    ok(cluster.kubectl(&["delete", "namespace", name, "--wait=false"]));
    eventually("the namespace emptied and gone", || {
        let out = cluster.kubectl(&["get", "namespace", name]);
        text(&out).contains("NotFound").then_some(())
    });
}

/// Every feature the binary registers, all at once: on, used (each feature's exercise), turned
/// off by restarting with it off (the admin letting the feature-controller delete what must
/// go), restarted once more, and pristine (each feature's check). A registered feature without
/// an exercise fails the test.
#[test]
fn every_registered_feature_goes_on_is_used_goes_off_and_leaves_nothing() {
    let registry = genplane_features::registry();
    let features: Vec<&str> = registry.names().collect();
    for feature in &features {
        assert!(
            EXERCISES.iter().any(|e| e.feature == *feature),
            "feature {feature} is registered without an exercise and a pristine check: add one to EXERCISES"
        );
    }
    let gates = |value: bool| {
        features
            .iter()
            .map(|f| format!("{f}={value}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let states = |kubeconfig: &Path, want: &str| {
        features.iter().all(|f| {
            feature(kubeconfig, &genplane_api::featuregates::object_name(f))
                .is_some_and(|o| o["status"]["state"] == want)
        })
    };
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");

    let (mut process, kubeconfig) = all_in_one_with(dir.path(), &gates(true), OFF_BY_DEFAULT_APIS);
    process.wait_for("every feature On", |_| {
        states(&kubeconfig, "On").then_some(())
    });
    let cluster = Cluster {
        kubeconfig: &kubeconfig,
        data: &data,
    };
    for exercise in EXERCISES {
        (exercise.use_it)(&cluster);
    }

    process.terminate();
    process.wait_exit(support::DEADLINE);
    let (mut process, kubeconfig) = all_in_one_with(dir.path(), &gates(false), OFF_BY_DEFAULT_APIS);
    for feature in &features {
        let name = genplane_api::featuregates::object_name(feature);
        process.wait_for("the Feature", |_| feature_of(&kubeconfig, &name));
        ok(kubectl(
            &kubeconfig,
            &[
                "annotate",
                "feature",
                &name,
                "-n",
                "kube-system",
                "featuregates.genplane.io/delete-objects=true",
            ],
        ));
    }
    process.wait_for("every feature Off", |_| {
        states(&kubeconfig, "Off").then_some(())
    });

    process.terminate();
    process.wait_exit(support::DEADLINE);
    let (_process, kubeconfig) = all_in_one_with(dir.path(), &gates(false), OFF_BY_DEFAULT_APIS);
    let cluster = Cluster {
        kubeconfig: &kubeconfig,
        data: &data,
    };
    for exercise in EXERCISES {
        (exercise.pristine)(&cluster);
    }
}

/// The Feature named `name`, once it exists.
fn feature_of(kubeconfig: &Path, name: &str) -> Option<()> {
    feature(kubeconfig, name).map(drop)
}

/// `genplane feature-controller check --to-version VERSION` against `kubeconfig`.
fn check_to(kubeconfig: &Path, version: &str) -> Output {
    Command::new(BIN)
        .args(["feature-controller", "check", "--kubeconfig"])
        .arg(kubeconfig)
        .arg(format!("--to-version={version}"))
        .output()
        .unwrap()
}

/// Creates 160 ConfigMaps `cm-N` of 1 KiB each in the default namespace: a LIST of about
/// 200 KiB, above the compression threshold.
fn create_config_maps(kubeconfig: &Path) {
    let items: Vec<Value> = (0..160)
        .map(|i| {
            serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("cm-{i}"), "namespace": "default"},
                "data": {"payload": "x".repeat(1024)},
            })
        })
        .collect();
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    ok(apply_stdin(
        kubeconfig,
        &["apply", "-f", "-"],
        &list.to_string(),
    ));
}

/// The answer to a LIST of the default namespace's ConfigMaps asking for gzip: whether it came
/// compressed, and how many of its items are the test's (decompressed when it was).
fn list_config_maps(raw: &Raw) -> (bool, usize) {
    let answer = raw.request(
        "GET",
        "/api/v1/namespaces/default/configmaps",
        &[("Accept-Encoding", "gzip")],
        None,
    );
    assert_eq!(answer.status, 200, "{}", answer.text());
    let gzip = answer.header("content-encoding") == "gzip";
    let body = if gzip {
        assert_eq!(answer.header("vary"), "Accept-Encoding");
        let mut plain = Vec::new();
        std::io::Read::read_to_end(
            &mut flate2::read::GzDecoder::new(answer.body.as_slice()),
            &mut plain,
        )
        .unwrap();
        assert!(answer.body.len() * 5 < plain.len(), "{}", answer.body.len());
        plain
    } else {
        answer.body
    };
    let list: Value = serde_json::from_slice(&body).unwrap();
    let ours = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| {
            item["metadata"]["name"]
                .as_str()
                .unwrap()
                .starts_with("cm-")
        })
        .count();
    (gzip, ours)
}

/// A stateless dynamic feature flipped with `kubectl patch` changes the running server within
/// two report periods, both ways: APIResponseCompression (on by default) compresses a LIST
/// larger than 128 KiB for a client that accepts gzip; asked Off, the server answers the same
/// LIST plain; asked On again, compressed again.
#[test]
fn a_dynamic_feature_flipped_with_kubectl_changes_the_running_server() {
    const FEATURE: &str = "api-response-compression";
    let dir = tempfile::tempdir().unwrap();
    let (mut process, kubeconfig) = all_in_one_with(
        dir.path(),
        "",
        &["--dynamic-features=APIResponseCompression"],
    );
    create_config_maps(&kubeconfig);
    let raw = Raw::from_kubeconfig(&kubeconfig);
    assert_eq!(list_config_maps(&raw), (true, 160));
    // A client that does not ask for gzip gets the answer plain.
    let plain = raw.get("/api/v1/namespaces/default/configmaps");
    assert_eq!(plain.header("content-encoding"), "");
    assert_eq!(plain.json()["items"].as_array().unwrap().len(), 161);
    // kubectl (which asks for gzip) reads it.
    let names = ok(kubectl(&kubeconfig, &["get", "configmaps", "-o", "name"]));
    assert_eq!(
        names
            .lines()
            .filter(|l| l.starts_with("configmap/cm-"))
            .count(),
        160
    );

    // Dynamic once the feature-controller has seen every API server name it so.
    process.wait_for("the feature to be dynamic", |_| {
        (feature(&kubeconfig, FEATURE)?["status"]["dynamic"] == true).then_some(())
    });
    for (desired, compressed) in [("Off", false), ("On", true)] {
        ok(kubectl(
            &kubeconfig,
            &[
                "patch",
                "feature",
                FEATURE,
                "-n",
                "kube-system",
                "--type=merge",
                "-p",
                &format!("{{\"spec\":{{\"desired\":\"{desired}\"}}}}"),
            ],
        ));
        process.wait_for(
            "the transition done, the server reporting its new value",
            |_| {
                let object = feature(&kubeconfig, FEATURE)?;
                (object["status"]["state"] == desired && uses_of(&object, "apiserver") == [desired])
                    .then_some(())
            },
        );
        assert_eq!(list_config_maps(&raw), (compressed, 160), "{desired}");
    }
}

/// Only features genplane consults at run time can be dynamic: one it reads only at start is
/// refused before anything starts, naming the reason.
#[test]
fn a_feature_read_only_at_start_cannot_be_dynamic() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["all-in-one", "--bind-address=127.0.0.1", "--secure-port=0"])
        .arg(format!("--data-dir={}", dir.path().join("data").display()))
        .arg("--dynamic-features=NetworkRegistry,NoSuchFeature")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said = text(&out);
    assert!(
        said.contains("NetworkRegistry cannot be dynamic: genplane reads it only at start"),
        "{said}"
    );
    assert!(
        said.contains("unrecognized feature gate: NoSuchFeature"),
        "{said}"
    );
    // Nothing was started.
    assert!(!dir.path().join("data").join("admin.kubeconfig").exists());
}

/// A central feature's desired value comes from the API servers' flags, not the
/// feature-controller's: two API servers on one etcd with NetworkRegistry on make it On (the
/// feature-controller's own flag leaves it off); one restarted with it off turns it off, and
/// the transition stays in WaitForUses naming the other server until that one is restarted
/// with the fixed flag; then it completes (the claims the servers made removed first).
#[test]
fn a_central_feature_follows_the_api_servers_and_waits_for_them_to_agree() {
    const FEATURE: &str = "network-registry";
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let etcd = support::etcd(&runtime);
    let servers = format!("--etcd-servers={}", etcd.endpoint());
    let flags = |on: bool, port: Option<u16>| {
        let mut flags = vec![
            "--storage-backend=etcd".to_owned(),
            servers.clone(),
            "--feature-use-report-period=1s".to_owned(),
            format!("--feature-gates=NetworkRegistry={on}"),
        ];
        flags.extend(port.map(|p| format!("--secure-port={p}")));
        flags
    };
    let start = |dir: Option<tempfile::TempDir>, on: bool, port: Option<u16>| {
        let flags = flags(on, port);
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        match dir {
            Some(dir) => support::start_in(dir, &flags),
            None => support::start_with(&flags),
        }
    };
    let a = start(None, true, None);
    let b = start(None, true, None);
    let admin = a.kubeconfig();
    let mut controller = FeatureController::start(
        &a,
        "feature-controller.log",
        &[
            "--feature-use-report-period=1s",
            "--identity-lease-duration=3s",
            "--sync-period=1s",
        ],
    );
    let on = controller
        .process
        .wait_for("the feature On, as both servers run it", |_| {
            let object = feature(&admin, FEATURE)?;
            (object["status"]["state"] == "On" && uses_of(&object, "apiserver") == ["On", "On"])
                .then_some(object)
        });
    assert_eq!(on["status"]["default"], false);

    // B restarted with the feature off: the cluster turns it off, held by A.
    let b_port = b.port;
    let b = start(Some(support::stop(b)), false, Some(b_port));
    let held = controller
        .process
        .wait_for("the transition held by A", |_| {
            let object = feature(&admin, FEATURE)?;
            let message = object["status"]["tasks"][0]["message"].as_str()?.to_owned();
            (object["status"]["state"] == "TurningOff"
                && message.starts_with("waiting for instances that still report On: apiserver/"))
            .then_some(object)
        });
    let agreed = held["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Agreed")
        .unwrap()
        .clone();
    assert_eq!(agreed["status"], "False", "{agreed}");
    let message = agreed["message"].as_str().unwrap();
    assert_eq!(message.matches("apiserver/").count(), 1, "{message}");

    // A's flag fixed: every server runs it off; the claims they made go (the admin lets the
    // feature-controller delete them), and the feature is Off.
    let a_port = a.port;
    let a = start(Some(support::stop(a)), false, Some(a_port));
    ok(kubectl(
        &admin,
        &[
            "annotate",
            "feature",
            FEATURE,
            "-n",
            "kube-system",
            "featuregates.genplane.io/delete-objects=true",
        ],
    ));
    let off = controller.process.wait_for("the feature Off", |_| {
        let object = feature(&admin, FEATURE)?;
        (object["status"]["state"] == "Off").then_some(object)
    });
    assert_eq!(uses_of(&off, "apiserver"), ["Off", "Off"]);
    drop((a, b));
}

/// How many watches of NetworkClaims the API server `raw` serves.
fn claim_watchers(raw: &Raw) -> Option<u32> {
    let metrics = raw.get("/metrics").text();
    let series = "apiserver_registered_watchers{group=\"networkregistry.genplane.io\",kind=\"NetworkClaim\",version=\"v1alpha1\"} ";
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.parse().ok())
}

/// A controller-manager started with NetworkRegistry off while the API server runs it on
/// follows the cluster, not its flag: it says so once, starts the registry controller at run
/// time when the Feature turns on (a claim is allocated) and reports On. The API server
/// restarted with the feature off turns it off: the controller-manager follows at run time,
/// keeps the registry controller only to release the claims (the admin lets the
/// feature-controller delete them), reports Off so the transition completes, then stops the
/// controller and releases its watch.
#[test]
fn a_controller_manager_follows_a_central_feature_against_its_own_flag() {
    const FEATURE: &str = "network-registry";
    let flags = |on: bool| {
        vec![
            "--feature-use-report-period=1s".to_owned(),
            format!("--feature-gates=NetworkRegistry={on}"),
        ]
    };
    let server = support::start_with(&flags(true).iter().map(String::as_str).collect::<Vec<_>>());
    let admin = server.kubeconfig();
    let mut manager = support::ControllerManager::start(
        &server,
        "controller-manager.log",
        &[
            "--feature-gates=NetworkRegistry=false",
            "--feature-use-report-period=1s",
            "--network-claim-release-grace-period=0s",
            // The garbage collector watches every resource: without it, the registry
            // controller's is the one watch of NetworkClaims.
            "--controllers=*,-garbage-collector",
            // The API server restarts below: the Lease outlives that.
            "--leader-elect-lease-duration=60s",
            "--leader-elect-renew-deadline=40s",
        ],
    );
    // No Feature yet: the controller-manager runs with its own flag.
    manager.process.wait_for("the registry controller held back", |p| {
        p.output()
            .contains("controller networkclaim is not started: it needs the feature gate NetworkRegistry, which is off")
            .then_some(())
    });
    ok(apply_stdin(&admin, &["apply", "-f", "-"], USER_CLAIM));

    let mut controller = FeatureController::start(
        &server,
        "feature-controller.log",
        &[
            "--feature-use-report-period=1s",
            "--identity-lease-duration=3s",
            "--sync-period=1s",
        ],
    );
    let on = controller
        .process
        .wait_for("the feature On, the controller-manager agreeing", |_| {
            let object = feature(&admin, FEATURE)?;
            (object["status"]["state"] == "On" && uses_of(&object, "controller-manager") == ["On"])
                .then_some(object)
        });
    assert_eq!(uses_of(&on, "apiserver"), ["On"]);
    manager
        .process
        .wait_for("the claim allocated by the registry controller", |_| {
            let out = kubectl(
                &admin,
                &[
                    "get",
                    "networkclaim",
                    "lab",
                    "-o",
                    "jsonpath={.status.addressSpace[0].status}",
                ],
            );
            (text(&out) == "Allocated").then_some(())
        });
    let log = manager.process.output();
    let disagreeing = "this role's --feature-gates disagrees with the cluster on a central feature: following the cluster (the API servers' flags decide it) feature=\"NetworkRegistry\" cluster=true flag=false";
    assert_eq!(log.matches(disagreeing).count(), 1, "{log}");
    assert!(
        log.contains("starting controller controller=\"networkclaim\" removal_only=false"),
        "{log}"
    );

    // The API server restarted with the feature off: the cluster turns it off.
    let port = server.port;
    let mut off_flags = flags(false);
    off_flags.push(format!("--secure-port={port}"));
    let server = support::start_in(
        support::stop(server),
        &off_flags.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let raw = server.raw();
    manager.process.wait_for("the registry controller draining", |p| {
        let drained = p.output().contains(
            "restarting controller: its feature gates changed controller=\"networkclaim\" from=On to=Draining",
        );
        (drained && claim_watchers(&raw) == Some(1)).then_some(())
    });
    ok(kubectl(
        &admin,
        &[
            "annotate",
            "feature",
            FEATURE,
            "-n",
            "kube-system",
            "featuregates.genplane.io/delete-objects=true",
        ],
    ));
    controller.process.wait_for("the feature Off", |_| {
        let object = feature(&admin, FEATURE)?;
        (object["status"]["state"] == "Off").then_some(())
    });
    assert_eq!(claim_names(&admin), Some(Vec::new()));
    manager.process.wait_for("the registry controller stopped, its watch released", |p| {
        let stopped = p.output().contains(
            "stopping controller: its feature gates are off controller=\"networkclaim\" gates_off=\"NetworkRegistry\"",
        );
        (stopped && claim_watchers(&raw) == Some(0)).then_some(())
    });
    let off = eventually("the controller-manager reporting Off", || {
        let object = feature(&admin, FEATURE)?;
        (uses_of(&object, "controller-manager") == ["Off"]).then_some(object)
    });
    assert_eq!(off["status"]["state"], "Off");
    // Back to its own flag, which now agrees: no second warning, still running.
    let log = manager.process.output();
    assert_eq!(log.matches(disagreeing).count(), 1, "{log}");
    assert!(
        manager.process.exited().is_none(),
        "{}",
        manager.process.tail()
    );
}

/// A `genplane feature-controller` with its ops endpoints on loopback.
struct FeatureController {
    process: Process,
    port: u16,
}

impl FeatureController {
    fn start(server: &Apiserver, log: &str, extra: &[&str]) -> FeatureController {
        let (process, port) = support::start_ops_role(server, "feature-controller", log, extra);
        FeatureController { process, port }
    }

    /// The value of the metric line starting with `series`, if any.
    fn metric(&self, series: &str) -> Option<f64> {
        let (_, body) = support::ops_get(self.port, "/metrics");
        support::sample(&body, series)
    }

    fn leads(&self) -> bool {
        self.metric("feature_controller_leader") == Some(1.0)
    }
}

/// Three feature-controllers: exactly one acts. A dynamic feature asked off with `kubectl
/// patch` turns off in the running API server, without a restart: the server follows the
/// Feature's state and reports Off. The acting controller is killed with SIGKILL in the middle
/// of the transition (its `WaitForUses` waits twice the controllers' 5 s report period), and
/// another completes it: the Lease fields the feature wrote are cleared, and the server drops
/// them from new writes.
#[test]
fn three_feature_controllers_one_acts_and_another_finishes_after_sigkill() {
    let server = support::start_with(&[
        "--feature-use-report-period=1s",
        "--feature-gates=CoordinatedLeaderElection=true",
    ]);
    let admin = server.kubeconfig();
    let extra = [
        "--feature-use-report-period=5s",
        "--identity-lease-duration=3s",
        "--sync-period=1s",
        "--dynamic-features=CoordinatedLeaderElection",
        "--feature-gates=CoordinatedLeaderElection=true",
        "-v=2",
    ];
    let mut controllers: Vec<FeatureController> = (1..=3)
        .map(|i| FeatureController::start(&server, &format!("feature-controller-{i}.log"), &extra))
        .collect();
    let on = eventually(
        "the dynamic feature announced On with the API server's use",
        || {
            let object = feature(&admin, CLE)?;
            (object["status"]["dynamic"] == true
                && object["status"]["state"] == "On"
                && uses_of(&object, "apiserver") == ["On"])
            .then_some(object)
        },
    );
    assert_eq!(on["status"]["stage"], "Beta");
    let leader = eventually("exactly one acting feature-controller", || {
        let leading: Vec<usize> = (0..3).filter(|&i| controllers[i].leads()).collect();
        let standing_by = (0..3)
            .filter(|&i| controllers[i].metric("feature_controller_leader") == Some(0.0))
            .count();
        (leading.len() == 1 && standing_by == 2).then(|| leading[0])
    });
    // While on, a Lease keeps the fields only the feature allows.
    ok(apply_stdin(&admin, &["apply", "-f", "-"], DEMO_LEASE));
    let strategy = ok(kubectl(
        &admin,
        &["get", "lease", "demo", "-o", "jsonpath={.spec.strategy}"],
    ));
    assert_eq!(strategy, "OldestEmulationVersion");

    // Asked off: the transition starts with WaitForUses.
    ok(kubectl(
        &admin,
        &[
            "patch",
            "feature",
            CLE,
            "-n",
            "kube-system",
            "--type=merge",
            "-p",
            "{\"spec\":{\"desired\":\"Off\"}}",
        ],
    ));
    let turning = eventually("the transition started", || {
        let object = feature(&admin, CLE)?;
        (object["status"]["state"] == "TurningOff"
            && object["status"]["tasks"][0]["startTime"].is_string())
        .then_some(object)
    });
    assert_eq!(turning["status"]["tasks"][0]["type"], "WaitForUses");
    assert_eq!(turning["status"]["tasks"][1]["type"], "ClearField");
    assert_eq!(
        controllers[leader].metric(
            "feature_transitions_total{feature=\"CoordinatedLeaderElection\",to=\"TurningOff\"}"
        ),
        Some(1.0)
    );

    // The acting one dies mid-transition; another takes over within the identity lease
    // duration.
    controllers[leader].process.kill();
    let killed = controllers.remove(leader);
    let next = eventually("another acting feature-controller", || {
        let leading: Vec<usize> = (0..2).filter(|&i| controllers[i].leads()).collect();
        (leading.len() == 1).then(|| leading[0])
    });
    // The running API server follows: it reports Off, with no restart.
    let off = controllers[next]
        .process
        .wait_for("the feature turned off", |_| {
            let object = feature(&admin, CLE)?;
            (object["status"]["state"] == "Off").then_some(object)
        });
    assert_eq!(off["status"].get("tasks"), None);
    assert_eq!(uses_of(&off, "apiserver"), ["Off"]);
    let spec = ok(kubectl(
        &admin,
        &["get", "lease", "demo", "-o", "jsonpath={.spec}"],
    ));
    assert_eq!(spec, "{\"holderIdentity\":\"me\"}");
    // A new write of the fields: the server, running with the feature off, drops them.
    ok(apply_stdin(
        &admin,
        &["apply", "-f", "-"],
        &DEMO_LEASE.replace("name: demo", "name: demo-2"),
    ));
    let spec = ok(kubectl(
        &admin,
        &["get", "lease", "demo-2", "-o", "jsonpath={.spec}"],
    ));
    assert_eq!(spec, "{\"holderIdentity\":\"me\"}");
    assert!(
        server
            .process
            .output()
            .contains("feature gate changed at run time"),
        "{}",
        server.process.tail()
    );
    assert_eq!(
        controllers[next]
            .metric("feature_transitions_total{feature=\"CoordinatedLeaderElection\",to=\"Off\"}"),
        Some(1.0)
    );
    assert_eq!(
        controllers[next].metric(
            "feature_task_duration_seconds_count{feature=\"CoordinatedLeaderElection\",task=\"ClearField\",outcome=\"done\"}"
        ),
        Some(1.0)
    );
    // Nobody else completed it, and the killed one had only started it.
    let other = 1 - next;
    assert_eq!(
        controllers[other]
            .metric("feature_transitions_total{feature=\"CoordinatedLeaderElection\",to=\"Off\"}"),
        None
    );
    assert!(
        !killed.process.output().contains("state=\"Off\""),
        "{}",
        killed.process.tail()
    );
    assert!(
        controllers[next]
            .process
            .output()
            .contains("leading: this instance acts for the feature-controllers"),
        "{}",
        controllers[next].process.tail()
    );
}

/// A feature-controller identity Lease that outweighs the acting instance but whose holder never
/// acts (made with the feature-controller's own credentials: no one else may make one) does not
/// silence the feature-controller: the instance standing by notices a dynamic Feature asked Off
/// whose transition nobody starts, and acts in the silent one's place.
#[test]
fn a_leader_that_does_not_act_is_passed_over() {
    const FEATURE: &str = "api-response-compression";
    let server = support::start_with(&["--feature-use-report-period=1s"]);
    let admin = server.kubeconfig();
    let controller = FeatureController::start(
        &server,
        "feature-controller.log",
        &[
            "--feature-use-report-period=1s",
            "--identity-lease-duration=3s",
            "--sync-period=1s",
            "--dynamic-features=APIResponseCompression",
            "-v=2",
        ],
    );
    eventually("the dynamic feature announced On", || {
        let object = feature(&admin, FEATURE)?;
        (object["status"]["dynamic"] == true && object["status"]["state"] == "On").then_some(())
    });
    eventually("the feature-controller acting", || {
        controller.leads().then_some(())
    });

    // A silent "instance" heavier than any real one, valid for five minutes.
    let name = (0..)
        .map(|i| format!("feature-controller-silent{i}"))
        .find(|n| genplane_featurecontroller::leader::weight(n) > u64::MAX - (u64::MAX >> 12))
        .unwrap();
    let now = k8s_openapi::jiff::Timestamp::now();
    let lease = serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "namespace": "kube-system",
                     "labels": {"featuregates.genplane.io/identity": "feature-controller"}},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 300,
                 "renewTime": format!("{}", now.strftime("%Y-%m-%dT%H:%M:%S.%6fZ"))},
    });
    let as_controller = Raw::from_kubeconfig(&server.data().join("feature-controller.kubeconfig"));
    let created = as_controller.request(
        "POST",
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
        &[],
        Some(lease.to_string().as_bytes()),
    );
    assert_eq!(created.status, 201, "{}", created.text());
    eventually("the real instance standing by", || {
        (controller.metric("feature_controller_leader") == Some(0.0)).then_some(())
    });

    ok(kubectl(
        &admin,
        &[
            "patch",
            "feature",
            FEATURE,
            "-n",
            "kube-system",
            "--type=merge",
            "-p",
            "{\"spec\":{\"desired\":\"Off\"}}",
        ],
    ));
    let asked = std::time::Instant::now();
    eventually("the feature turned off by the instance standing by", || {
        let object = feature(&admin, FEATURE)?;
        (object["status"]["state"] == "Off").then_some(())
    });
    assert!(
        asked.elapsed() < std::time::Duration::from_secs(40),
        "took {:?}",
        asked.elapsed()
    );
    assert!(controller.leads());
    let log = controller.process.output();
    assert!(
        log.contains("passing over") && log.contains(&name),
        "{}",
        controller.process.tail()
    );
}

/// The API servers decide which features are dynamic (`--dynamic-features` of `genplane
/// apiserver`): the feature-controller, started without the flag, announces the feature
/// dynamic, and its `spec.desired` turns it off; the feature-controller's own flag still works
/// but says it is deprecated.
#[test]
fn the_api_servers_decide_which_features_are_dynamic() {
    const FEATURE: &str = "api-response-compression";
    let server = support::start_with(&[
        "--feature-use-report-period=1s",
        "--dynamic-features=APIResponseCompression",
    ]);
    let admin = server.kubeconfig();
    let mut controller = FeatureController::start(
        &server,
        "feature-controller.log",
        &["--feature-use-report-period=1s", "--sync-period=1s"],
    );
    eventually("the feature announced dynamic", || {
        let object = feature(&admin, FEATURE)?;
        (object["status"]["dynamic"] == true && object["status"]["state"] == "On").then_some(())
    });
    ok(kubectl(
        &admin,
        &[
            "patch",
            "feature",
            FEATURE,
            "-n",
            "kube-system",
            "--type=merge",
            "-p",
            "{\"spec\":{\"desired\":\"Off\"}}",
        ],
    ));
    controller.process.wait_for("the feature off", |_| {
        let object = feature(&admin, FEATURE)?;
        (object["status"]["state"] == "Off").then_some(())
    });
    // Another feature stays fixed: only the API servers' list is dynamic.
    let out = kubectl(
        &admin,
        &[
            "patch",
            "feature",
            CLE,
            "-n",
            "kube-system",
            "--type=merge",
            "-p",
            "{\"spec\":{\"desired\":\"On\"}}",
        ],
    );
    assert!(text(&out).contains("is not dynamic"), "{}", text(&out));

    // The feature-controller's own flag, as before, with a warning.
    let mut old = FeatureController::start(
        &server,
        "feature-controller-old.log",
        &["--dynamic-features=CoordinatedLeaderElection"],
    );
    old.process.wait_for("the deprecation warning", |p| {
        p.output()
            .contains("--dynamic-features of the feature-controller is deprecated")
            .then_some(())
    });
}
