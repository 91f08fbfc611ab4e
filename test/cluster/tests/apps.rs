//! Deployments as kubectl 1.33 drives them against the test cluster: created, rolled out,
//! scaled, updated with a new image (a rolling update within `maxSurge` and
//! `maxUnavailable`, endpoints following the pods), rolled back and deleted (its ReplicaSets
//! and pods collected).

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::watcher;
use kube::{ResourceExt as _, runtime::WatchStreamExt as _};
use serde_json::json;
use support::{Cluster, eventually, http_get};

const OLD_IMAGE: &str = "registry.k8s.io/e2e-test-images/agnhost:2.52";
const NEW_IMAGE: &str = "registry.k8s.io/e2e-test-images/agnhost:2.53";

fn deployment_yaml(selector_app: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  replicas: 3
  selector: {{matchLabels: {{app: {selector_app}}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      terminationGracePeriodSeconds: 5
      containers:
      - name: agnhost
        image: {OLD_IMAGE}
        args: [netexec, --http-port=8080, --delay-shutdown=1]
        ports: [{{containerPort: 8080}}]
"
    )
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The most active pods and the fewest ready ones seen since the watch listed them.
#[derive(Debug, Default)]
struct Extremes {
    most_active: usize,
    fewest_ready: Option<usize>,
}

/// Follows the pods of `app=web` from their watch (every change, in order) and records the
/// extremes of active and ready pods.
fn follow_pods(pods: Api<Pod>, extremes: Arc<Mutex<Extremes>>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut current: BTreeMap<String, Pod> = BTreeMap::new();
        let mut events = watcher(pods, watcher::Config::default().labels("app=web"))
            .default_backoff()
            .boxed();
        let mut listed = false;
        while let Some(Ok(event)) = events.next().await {
            match event {
                watcher::Event::Apply(pod) | watcher::Event::InitApply(pod) => {
                    current.insert(pod.uid().unwrap(), pod);
                }
                watcher::Event::Delete(pod) => {
                    current.remove(&pod.uid().unwrap());
                }
                watcher::Event::Init => current.clear(),
                watcher::Event::InitDone => listed = true,
            }
            if !listed {
                continue;
            }
            let active: Vec<&Pod> = current
                .values()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .collect();
            let ready = active.iter().filter(|p| is_ready(p)).count();
            let mut extremes = extremes.lock().unwrap();
            extremes.most_active = extremes.most_active.max(active.len());
            extremes.fewest_ready = Some(extremes.fewest_ready.map_or(ready, |r| r.min(ready)));
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_rolls_out_scales_updates_and_goes_with_kubectl() {
    let cluster = Cluster::start(2);
    let client = cluster.client().await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let replicasets: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let service: Service = serde_json::from_value(json!({"metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}}))
    .unwrap();
    services
        .create(&PostParams::default(), &service)
        .await
        .unwrap();

    // A selector that does not match the template is refused, as upstream refuses it.
    let refused = cluster.kubectl_output(&["create", "-f", "-"], &deployment_yaml("other"));
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("spec.template.metadata.labels: Invalid value")
            && stderr.contains("`selector` does not match template `labels`"),
        "{stderr}"
    );

    // Created and rolled out: three ready pods behind the Service, each answering.
    cluster.kubectl_with(&["create", "-f", "-"], &deployment_yaml("web"));
    let rolled = cluster.kubectl(&["rollout", "status", "deployment/web", "--timeout=60s"]);
    assert!(rolled.contains("successfully rolled out"), "{rolled}");
    let first = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap();
    assert_eq!(first.items.len(), 3);
    let hash = first.items[0].labels()["pod-template-hash"].clone();
    let rs = replicasets.get(&format!("web-{hash}")).await.unwrap();
    assert_eq!(rs.annotations()["deployment.kubernetes.io/revision"], "1");
    let owner = &rs.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("Deployment", Some(true))
    );
    for pod in &first.items {
        let ip = pod.status.as_ref().unwrap().pod_ip.clone().unwrap();
        assert_eq!(http_get(&format!("{ip}:8080"), "/hostname"), pod.name_any());
        assert_eq!(pod.owner_references()[0].name, rs.name_any());
    }
    let ready_endpoints = |count: usize, image: &'static str| {
        let (slices, pods) = (slices.clone(), pods.clone());
        async move {
            let slice = slices.get("web-gp").await.ok()?;
            let ready: Vec<&String> = slice
                .endpoints
                .iter()
                .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
                .flat_map(|e| e.addresses.iter())
                .collect();
            let live = pods
                .list(&ListParams::default().labels("app=web"))
                .await
                .ok()?;
            let wanted: Vec<String> = live
                .items
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .filter(|p| p.spec.as_ref().unwrap().containers[0].image.as_deref() == Some(image))
                .filter_map(|p| p.status.as_ref()?.pod_ip.clone())
                .collect();
            (ready.len() == count
                && wanted.len() == count
                && wanted.iter().all(|ip| ready.contains(&ip)))
            .then_some(())
        }
    };
    eventually("three ready endpoints", || ready_endpoints(3, OLD_IMAGE)).await;

    // Scaled through `deployments/scale`.
    cluster.kubectl(&["scale", "deployment/web", "--replicas=5"]);
    let scale = cluster.kubectl(&[
        "get",
        "--raw",
        "/apis/apps/v1/namespaces/default/deployments/web/scale",
    ]);
    let scale: serde_json::Value = serde_json::from_str(&scale).unwrap();
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["spec"]["replicas"], 5);
    assert_eq!(scale["status"]["selector"], "app=web");
    cluster.kubectl(&["rollout", "status", "deployment/web", "--timeout=60s"]);
    eventually("five ready endpoints", || ready_endpoints(5, OLD_IMAGE)).await;

    // A new image rolls out within maxSurge (25% of 5, up: 2) and maxUnavailable (down: 1).
    let extremes = Arc::new(Mutex::new(Extremes::default()));
    let following = follow_pods(pods.clone(), extremes.clone());
    eventually("the pod watch listing", || async {
        extremes.lock().unwrap().fewest_ready.map(|_| ())
    })
    .await;
    cluster.kubectl(&[
        "set",
        "image",
        "deployment/web",
        &format!("agnhost={NEW_IMAGE}"),
    ]);
    let rolled = cluster.kubectl(&["rollout", "status", "deployment/web", "--timeout=60s"]);
    assert!(rolled.contains("successfully rolled out"), "{rolled}");
    eventually("five new ready endpoints", || ready_endpoints(5, NEW_IMAGE)).await;
    following.abort();
    {
        let seen = extremes.lock().unwrap();
        assert!(seen.most_active <= 7, "{seen:?}");
        assert!(seen.fewest_ready >= Some(4), "{seen:?}");
        assert!(seen.most_active > 5, "the rollout never surged: {seen:?}");
    }
    let deployment = deployments.get("web").await.unwrap();
    assert_eq!(
        deployment.annotations()["deployment.kubernetes.io/revision"],
        "2"
    );
    let status = deployment.status.unwrap();
    assert_eq!(
        (
            status.replicas,
            status.updated_replicas,
            status.available_replicas
        ),
        (Some(5), Some(5), Some(5))
    );
    assert_eq!(status.observed_generation, deployment.metadata.generation);
    let old = replicasets.get(&format!("web-{hash}")).await.unwrap();
    assert_eq!(old.spec.unwrap().replicas, Some(0));
    let wide = cluster.kubectl(&["get", "deployments,replicasets", "-o", "wide"]);
    for expected in [
        "deployment.apps/web",
        "5/5",
        NEW_IMAGE,
        "app=web,pod-template-hash=",
    ] {
        assert!(wide.contains(expected), "{expected} missing from:\n{wide}");
    }

    // Paused: `Progressing` says so (Unknown, DeploymentPaused); resumed: it says that
    // until the next pass, and the rollout status is complete again.
    let progressing = |reasons: &'static [&'static str]| {
        let deployments = deployments.clone();
        async move {
            let deployment = deployments.get("web").await.ok()?;
            let condition = deployment
                .status?
                .conditions?
                .into_iter()
                .find(|c| c.type_ == "Progressing")?;
            reasons
                .contains(&condition.reason.as_deref()?)
                .then_some(condition)
        }
    };
    cluster.kubectl(&["rollout", "pause", "deployment/web"]);
    let paused = eventually("the paused condition", || {
        progressing(&["DeploymentPaused"])
    })
    .await;
    assert_eq!(
        (paused.status.as_str(), paused.message.as_deref()),
        ("Unknown", Some("Deployment is paused"))
    );
    cluster.kubectl(&["rollout", "resume", "deployment/web"]);
    eventually("the paused condition gone", || {
        progressing(&["DeploymentResumed", "NewReplicaSetAvailable"])
    })
    .await;
    cluster.kubectl(&["rollout", "status", "deployment/web", "--timeout=60s"]);

    // Rolled back: the old ReplicaSet becomes the new one, at revision 3.
    cluster.kubectl(&["rollout", "undo", "deployment/web"]);
    cluster.kubectl(&["rollout", "status", "deployment/web", "--timeout=60s"]);
    let back = replicasets.get(&format!("web-{hash}")).await.unwrap();
    assert_eq!(back.annotations()["deployment.kubernetes.io/revision"], "3");
    assert_eq!(back.spec.unwrap().replicas, Some(5));

    // Deleted: the garbage collector takes its ReplicaSets and their pods.
    cluster.kubectl(&["delete", "deployment", "web"]);
    eventually("no replica sets and no pods", || async {
        let left = replicasets
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .len()
            + pods
                .list(&ListParams::default().labels("app=web"))
                .await
                .ok()?
                .items
                .len();
        (left == 0).then_some(())
    })
    .await;
    eventually("an empty endpoint slice", || async {
        slices
            .get("web-gp")
            .await
            .ok()?
            .endpoints
            .is_empty()
            .then_some(())
    })
    .await;
}

/// A rollout that makes no progress for `progressDeadlineSeconds` gets `Progressing=False`
/// with reason `ProgressDeadlineExceeded`, which `kubectl rollout status` reports; once the
/// rollout progresses again the condition is `True` again and the rollout completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_rollout_exceeds_its_progress_deadline() {
    let cluster = Cluster::start(1);
    let client = cluster.client().await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    // Its pods fit no node: they stay Pending.
    let stuck = format!(
        "apiVersion: apps/v1
kind: Deployment
metadata: {{name: stuck}}
spec:
  replicas: 1
  progressDeadlineSeconds: 2
  selector: {{matchLabels: {{app: stuck}}}}
  template:
    metadata: {{labels: {{app: stuck}}}}
    spec:
      nodeSelector: {{no-such-label: x}}
      containers:
      - name: agnhost
        image: {NEW_IMAGE}
        args: [netexec]
"
    );
    cluster.kubectl_with(&["create", "-f", "-"], &stuck);
    let progressing = |deployment: &Deployment| {
        deployment
            .status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .find(|c| c.type_ == "Progressing")
            .cloned()
    };
    let condition = eventually("the progress deadline to pass", || async {
        progressing(&deployments.get("stuck").await.ok()?).filter(|c| c.status == "False")
    })
    .await;
    assert_eq!(
        condition.reason.as_deref(),
        Some("ProgressDeadlineExceeded")
    );
    let message = condition.message.unwrap();
    assert!(
        message.starts_with("ReplicaSet \"stuck-")
            && message.ends_with("\" has timed out progressing."),
        "{message}"
    );
    let status = cluster.kubectl_output(
        &["rollout", "status", "deployment/stuck", "--timeout=30s"],
        "",
    );
    assert!(!status.status.success());
    let stderr = String::from_utf8_lossy(&status.stderr);
    assert!(
        stderr.contains("deployment \"stuck\" exceeded its progress deadline"),
        "{stderr}"
    );

    // Fixed: the new rollout progresses and completes.
    cluster.kubectl(&[
        "patch",
        "deployment",
        "stuck",
        "--type=json",
        "-p=[{\"op\": \"remove\", \"path\": \"/spec/template/spec/nodeSelector\"}]",
    ]);
    let rolled = cluster.kubectl(&["rollout", "status", "deployment/stuck", "--timeout=60s"]);
    assert!(rolled.contains("successfully rolled out"), "{rolled}");
    let condition = progressing(&deployments.get("stuck").await.unwrap()).unwrap();
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_deref()),
        ("True", Some("NewReplicaSetAvailable"))
    );
}
