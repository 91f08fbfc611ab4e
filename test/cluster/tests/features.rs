//! Feature gates across roles assembled around a control plane built with the library: the
//! cluster serves pods and leaves its generic controllers to a real `genplane
//! controller-manager`, and a real `genplane feature-controller` announces the binary's
//! features. Both roles run in this process through their own entry points, as the `genplane`
//! binary runs them.

#![allow(clippy::unwrap_used)]

mod support;

use genplane_component_base::process::Process;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::Api;
use support::{Cluster, eventually};

/// The Feature object of OrderedNamespaceDeletion in `kube-system`.
const FEATURE: &str = "ordered-namespace-deletion";
/// What keeps the test's pod after its deletion, until the test lets it go.
const HOLD: &str = "e2e.genplane.io/hold";

/// Runs a role of the `genplane` binary, with `args`, on a thread of its own until the test
/// process ends (a role stops on a signal only).
fn run_role(
    command: clap::Command,
    run: fn(&clap::ArgMatches, &Process) -> anyhow::Result<()>,
    args: Vec<String>,
) {
    let matches = command.get_matches_from(&args);
    let process = Process::with_args(args);
    let name = process.args[0].to_string_lossy().into_owned();
    std::thread::spawn(move || {
        if let Err(error) = run(&matches, &process) {
            panic!("{name} stopped: {error:#}");
        }
    });
}

/// A namespace holding a pod (with [`HOLD`]) and a ConfigMap.
fn namespace_with_content(name: &str) -> String {
    format!(
        "apiVersion: v1
kind: Namespace
metadata: {{name: {name}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: guarded, namespace: {name}, finalizers: [{HOLD}]}}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: server
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
    args: [netexec]
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: guard, namespace: {name}}}
data: {{policy: deny}}
"
    )
}

/// The `status` of a namespace condition of `namespace`, with its message.
fn condition(namespace: &Namespace, type_: &str) -> Option<(String, String)> {
    let conditions = namespace.status.as_ref()?.conditions.as_ref()?;
    let found = conditions.iter().find(|c| c.type_ == type_)?;
    Some((
        found.status.clone(),
        found.message.clone().unwrap_or_default(),
    ))
}

/// Lets the pod of `namespace` go and waits until the namespace is gone.
async fn release(cluster: &Cluster, client: &kube::Client, namespace: &str) {
    cluster.kubectl(&[
        "patch",
        "pod",
        "guarded",
        "-n",
        namespace,
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    eventually(&format!("namespace {namespace} gone"), || async {
        namespaces
            .get_opt(namespace)
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
}

/// KEP-3920's dynamic features reach the controller-manager: OrderedNamespaceDeletion (on by
/// default at 1.33) keeps a terminating namespace's ConfigMap while its pod remains; flipped
/// Off with `kubectl patch feature`, the same controller-manager, not restarted, deletes the
/// ConfigMap at once while the pod still waits for its finalizer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dynamic_feature_changes_the_running_controller_manager() {
    let cluster = Cluster::start_with(1, &["--external-controller-manager"]);
    let kubeconfig = cluster.kubeconfig().display().to_string();
    run_role(
        genplane_cmd_feature_controller::command(),
        genplane_cmd_feature_controller::run,
        [
            "feature-controller",
            "--secure-port=0",
            "--dynamic-features=OrderedNamespaceDeletion",
            "--feature-use-report-period=1s",
            "--identity-lease-duration=3s",
            "--sync-period=1s",
        ]
        .map(str::to_owned)
        .into_iter()
        .chain([format!("--kubeconfig={kubeconfig}")])
        .collect(),
    );
    run_role(
        genplane_cmd_controller_manager::command(),
        genplane_cmd_controller_manager::run,
        [
            "controller-manager",
            "--secure-port=0",
            "--leader-elect=false",
            "--feature-use-report-period=1s",
        ]
        .map(str::to_owned)
        .into_iter()
        .chain([format!("--kubeconfig={kubeconfig}")])
        .collect(),
    );
    let client = cluster.client().await;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let feature_state = || {
        let out = cluster.kubectl_output(
            &[
                "get",
                "feature",
                FEATURE,
                "-n",
                "kube-system",
                "-o",
                "jsonpath={.status.state}",
            ],
            "",
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    eventually("the Feature announced On", || async {
        (feature_state() == "On").then_some(())
    })
    .await;
    // The library-built API server reports its own uses and keeps its identity Lease with no
    // code of the cluster's for either: the library's post-start hooks do.
    eventually(
        "the cluster's API server reporting APIServerIdentity",
        || async {
            let out = cluster.kubectl_output(
                &[
                    "get",
                    "feature",
                    "api-server-identity",
                    "-n",
                    "kube-system",
                    "-o",
                    "jsonpath={.status.uses[?(@.component==\"apiserver\")].value}",
                ],
                "",
            );
            (String::from_utf8_lossy(&out.stdout) == "On").then_some(())
        },
    )
    .await;
    let leases = cluster.kubectl(&[
        "get",
        "leases",
        "-n",
        "kube-system",
        "-l",
        "apiserver.kubernetes.io/identity=kube-apiserver",
        "-o",
        "name",
    ]);
    assert!(
        leases.starts_with("lease.coordination.k8s.io/apiserver-"),
        "{leases}"
    );

    // On: the pod goes first; the ConfigMap stays while the pod remains.
    cluster.kubectl_with(&["apply", "-f", "-"], &namespace_with_content("ordered"));
    cluster.kubectl(&["delete", "namespace", "ordered", "--wait=false"]);
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ordered");
    eventually("the pod deleted by the namespace controller", || async {
        let pod = pods.get_opt("guarded").await.unwrap()?;
        pod.metadata.deletion_timestamp.map(|_| ())
    })
    .await;
    // The pass that deleted the pod wrote what remains: after it, the ConfigMap must be there.
    let message = eventually("the namespace naming the pod that remains", || async {
        let ns = namespaces.get_opt("ordered").await.unwrap()?;
        condition(&ns, "NamespaceContentRemaining").filter(|(status, _)| status == "True")
    })
    .await
    .1;
    assert!(message.contains("pods."), "{message}");
    assert!(!message.contains("configmaps."), "{message}");
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "ordered");
    assert!(
        config_maps.get_opt("guard").await.unwrap().is_some(),
        "the ConfigMap went before the pod"
    );
    release(&cluster, &client, "ordered").await;

    // Off, by a client, at run time: the ConfigMap goes while the pod still waits.
    cluster.kubectl(&[
        "patch",
        "feature",
        FEATURE,
        "-n",
        "kube-system",
        "--type=merge",
        "-p",
        r#"{"spec":{"desired":"Off"}}"#,
    ]);
    eventually("the Feature Off", || async {
        (feature_state() == "Off").then_some(())
    })
    .await;
    cluster.kubectl_with(&["apply", "-f", "-"], &namespace_with_content("unordered"));
    cluster.kubectl(&["delete", "namespace", "unordered", "--wait=false"]);
    let pods: Api<Pod> = Api::namespaced(client.clone(), "unordered");
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "unordered");
    eventually("the ConfigMap deleted", || async {
        config_maps
            .get_opt("guard")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    assert!(
        pods.get_opt("guarded").await.unwrap().is_some(),
        "the pod's finalizer holds it"
    );
    release(&cluster, &client, "unordered").await;
}
