//! The part of kube-controller-manager's node lifecycle controller a cloud controller manager
//! relies on: a node whose kubelet has not renewed its Lease for the grace period
//! (`--node-monitor-grace-period`, 40 s by default) gets its `Ready` condition set to
//! `Unknown` (reason `NodeStatusUnknown`), so that the CCM's lifecycle controller looks at
//! its instance.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::kubelet::LEASE_NAMESPACE;

/// Marks silent nodes every `grace / 4` until the task is dropped.
pub async fn run(client: Client, grace: Duration) {
    let changed = Arc::new(Notify::new());
    let (nodes, _nodes_watch) = crate::watch::reflect(
        Api::<Node>::all(client.clone()),
        watcher::Config::default(),
        changed.clone(),
    );
    let (leases, _leases_watch) = crate::watch::reflect(
        Api::<Lease>::namespaced(client.clone(), LEASE_NAMESPACE),
        watcher::Config::default(),
        changed,
    );
    let api: Api<Node> = Api::all(client);
    let mut ticks = tokio::time::interval(grace / 4);
    loop {
        ticks.tick().await;
        let now = k8s_openapi::jiff::Timestamp::now();
        let leases = leases.state();
        for node in nodes.state() {
            let renewed = leases
                .iter()
                .find(|l| l.name_any() == node.name_any())
                .and_then(|l| l.spec.as_ref()?.renew_time.as_ref().map(|t| t.0));
            let silent = renewed.is_none_or(|t| {
                now.as_second() - t.as_second() > i64::try_from(grace.as_secs()).unwrap_or(i64::MAX)
            });
            let conditions = node
                .status
                .as_ref()
                .and_then(|s| s.conditions.clone())
                .unwrap_or_default();
            let ready_true = conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            if !silent || !ready_true {
                continue;
            }
            let stamp = genplane_apimachinery::meta::rfc3339(crate::kubelet::netexec::unix_now());
            let conditions: Vec<Value> = conditions
                .iter()
                .filter_map(|c| serde_json::to_value(c).ok())
                .map(|mut c| {
                    if c["type"] == "Ready" {
                        c = json!({"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                            "message": "Kubelet stopped posting node status.",
                            "lastHeartbeatTime": c["lastHeartbeatTime"], "lastTransitionTime": stamp});
                    }
                    c
                })
                .collect();
            if let Err(error) = api
                .patch_status(
                    &node.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": {"conditions": conditions}})),
                )
                .await
            {
                tracing::debug!(%error, node = %node.name_any(), "marking a silent node");
            }
        }
    }
}
