//! A minimal scheduler: binds each pod that names `default-scheduler` and no node to a node
//! that is `Ready`, schedulable, matches the pod's `nodeSelector` and has no `NoSchedule` or
//! `NoExecute` taint the pod does not tolerate; among those, the one running the fewest pods.
//! Binding is a create of `pods/<name>/binding`, as kube-scheduler binds. A pod it bound
//! counts on its node until the watch shows the binding (kube-scheduler's assumed pods), so
//! pods created together spread even when the watch lags.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod, Taint, Toleration};
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt as _};
use serde_json::json;
use tokio::sync::Notify;

/// The scheduler's name, as pods name it in `spec.schedulerName`.
pub const NAME: &str = "default-scheduler";

fn tolerates(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| {
        let key = t.key.as_deref().unwrap_or("");
        let effect = t.effect.as_deref().unwrap_or("");
        let key_matches = key.is_empty() || key == taint.key;
        let effect_matches = effect.is_empty() || effect == taint.effect;
        let value_matches = match t.operator.as_deref() {
            Some("Exists") => true,
            _ => t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
        };
        key_matches && effect_matches && value_matches
    })
}

/// Whether `pod` may run on `node`.
pub fn fits(pod: &Pod, node: &Node) -> bool {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let spec = node.spec.clone().unwrap_or_default();
    let pod_spec = pod.spec.clone().unwrap_or_default();
    let tolerations = pod_spec.tolerations.unwrap_or_default();
    let labels = node.labels();
    ready
        && !spec.unschedulable.unwrap_or(false)
        && spec
            .taints
            .unwrap_or_default()
            .iter()
            .all(|taint| taint.effect == "PreferNoSchedule" || tolerates(&tolerations, taint))
        && pod_spec
            .node_selector
            .unwrap_or_default()
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
}

/// Schedules until the task is dropped.
pub async fn run(client: Client) {
    let changed = Arc::new(Notify::new());
    let (pods, _pods_watch) = crate::watch::reflect(
        Api::<Pod>::all(client.clone()),
        watcher::Config::default(),
        changed.clone(),
    );
    let (nodes, _nodes_watch) = crate::watch::reflect(
        Api::<Node>::all(client.clone()),
        watcher::Config::default(),
        changed.clone(),
    );
    let mut assumed: BTreeMap<String, String> = BTreeMap::new();
    loop {
        changed.notified().await;
        let all = pods.state();
        let mut load: BTreeMap<String, usize> = BTreeMap::new();
        let mut unbound = std::collections::BTreeSet::new();
        for pod in &all {
            match pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
                Some(node) => *load.entry(node).or_default() += 1,
                None => {
                    unbound.insert(pod.uid().unwrap_or_default());
                }
            }
        }
        assumed.retain(|uid, _| unbound.contains(uid));
        for node in assumed.values() {
            *load.entry(node.clone()).or_default() += 1;
        }
        let waiting: Vec<&std::sync::Arc<Pod>> = all
            .iter()
            .filter(|p| {
                let spec = p.spec.clone().unwrap_or_default();
                spec.node_name.is_none()
                    && spec.scheduler_name.as_deref().unwrap_or(NAME) == NAME
                    && p.metadata.deletion_timestamp.is_none()
                    && !assumed.contains_key(&p.uid().unwrap_or_default())
            })
            .collect();
        for pod in waiting {
            let candidates = nodes.state();
            let Some(node) = candidates
                .iter()
                .filter(|n| fits(pod, n))
                .min_by_key(|n| (load.get(&n.name_any()).copied().unwrap_or(0), n.name_any()))
            else {
                continue;
            };
            let api: Api<Pod> =
                Api::namespaced(client.clone(), &pod.namespace().unwrap_or_default());
            let binding = json!({"apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": pod.name_any(), "namespace": pod.namespace()},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node.name_any()}});
            match api
                .create_subresource::<_, serde_json::Value>(
                    "binding",
                    &pod.name_any(),
                    &PostParams::default(),
                    &binding,
                )
                .await
            {
                Ok(_) => {
                    *load.entry(node.name_any()).or_default() += 1;
                    assumed.insert(pod.uid().unwrap_or_default(), node.name_any());
                }
                Err(error) => tracing::debug!(%error, pod = %pod.name_any(), "binding failed"),
            }
        }
    }
}
