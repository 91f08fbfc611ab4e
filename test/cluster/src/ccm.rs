//! A fake cloud controller manager over the fake [`Cloud`], with kube-runtime watches as
//! upstream's cloud-controller-manager has informers, and three controllers:
//!
//! - **cloud-node**: a Node with the `node.cloudprovider.kubernetes.io/uninitialized` taint
//!   gets its instance's `spec.providerID`, instance-type and zone labels and addresses, and
//!   loses the taint;
//! - **cloud-node-lifecycle** (every `--node-monitor-period`): a Node that is not Ready whose
//!   instance is gone is deleted; one whose instance is stopped gets the
//!   `node.cloudprovider.kubernetes.io/shutdown` taint, removed once it is Ready again;
//! - **service** (load balancers): each `type: LoadBalancer` Service gets the
//!   `service.kubernetes.io/load-balancer-cleanup` finalizer, then a load balancer (named as
//!   upstream's `GetLoadBalancerName`: `a` and the uid without dashes, 32 characters) with
//!   its ports, the nodes of upstream's stable node set (KEP-3458, the only behaviour since
//!   1.32: every node not being deleted, not labelled
//!   `node.kubernetes.io/exclude-from-external-load-balancers` and not tainted
//!   `ToBeDeletedByClusterAutoscaler`; a node's readiness does not change the set, the load
//!   balancer's health checks decide where traffic goes), its session affinity, source
//!   ranges and health-check node port, and its address in `status.loadBalancer.ingress`. A
//!   Service being deleted, or no longer of that type, has its load balancer deleted first,
//!   then the finalizer removed (and the ingress cleared). Load balancers of Services that
//!   no longer exist are deleted.
//!
//! [`Faults`] make it misbehave in named ways, so that a conformance suite can be shown to
//! catch each.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt as _};
use serde_json::json;
use tokio::sync::Notify;

use crate::cloud::{
    Cloud, Error as CloudError, InstanceState, LoadBalancerPort, LoadBalancerSpec, PodTarget,
};
use crate::kube_proxy::Protocol;
use crate::kubelet::UNINITIALIZED_TAINT;

/// The finalizer that holds a Service until its load balancer is gone.
pub const CLEANUP_FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";
/// The taint of a node whose instance is shut down.
pub const SHUTDOWN_TAINT: &str = "node.cloudprovider.kubernetes.io/shutdown";
/// The label that keeps a node out of load balancers.
pub const EXCLUDE_LABEL: &str = "node.kubernetes.io/exclude-from-external-load-balancers";

/// Ways the CCM can be told to misbehave (`--ccm-fault`), each a real CCM bug.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// Never adds the cleanup finalizer: a deleted Service goes before its load balancer.
    pub no_finalizer: bool,
    /// Keeps a load balancer's first ports when its Service's ports change.
    pub stale_ports: bool,
    /// Never deletes a Node whose instance is gone.
    pub no_node_deletion: bool,
    /// Ignores `sessionAffinity: ClientIP`.
    pub no_session_affinity: bool,
    /// Ignores `loadBalancerSourceRanges`: every client reaches the load balancer.
    pub no_source_ranges: bool,
}

/// The fault names, as `--ccm-fault` takes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Fault {
    /// [`Faults::no_finalizer`].
    NoFinalizer,
    /// [`Faults::stale_ports`].
    StalePorts,
    /// [`Faults::no_node_deletion`].
    NoNodeDeletion,
    /// [`Faults::no_session_affinity`].
    NoSessionAffinity,
    /// [`Faults::no_source_ranges`].
    NoSourceRanges,
}

impl Faults {
    /// The faults named.
    pub fn of(named: &[Fault]) -> Self {
        Self {
            no_finalizer: named.contains(&Fault::NoFinalizer),
            stale_ports: named.contains(&Fault::StalePorts),
            no_node_deletion: named.contains(&Fault::NoNodeDeletion),
            no_session_affinity: named.contains(&Fault::NoSessionAffinity),
            no_source_ranges: named.contains(&Fault::NoSourceRanges),
        }
    }
}

/// The load balancer name of the Service with `uid` (upstream's `GetLoadBalancerName`).
pub fn load_balancer_name(uid: &str) -> String {
    let mut name: String = format!("a{}", uid.replace('-', ""));
    name.truncate(32);
    name
}

fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The taint the cluster autoscaler puts on a node it is about to delete.
pub const TO_BE_DELETED_TAINT: &str = "ToBeDeletedByClusterAutoscaler";

/// Whether `node` is in load balancers' node set, as upstream's service controller decides
/// since `StableLoadBalancerNodeSet`: not being deleted, not excluded by its label (a value
/// that is no boolean excludes it) and not about to be deleted by the cluster autoscaler.
/// Readiness is left out on purpose: a node that misses a heartbeat (say while the control
/// plane restarts) keeps its connections, and the health checks take a dead one out.
fn in_load_balancers(node: &Node) -> bool {
    let excluded = node
        .labels()
        .get(EXCLUDE_LABEL)
        .is_some_and(|value| genplane_component_base::strconv::parse_bool(value) != Some(false));
    node.metadata.deletion_timestamp.is_none()
        && !excluded
        && !taints(node).iter().any(|t| t.key == TO_BE_DELETED_TAINT)
}

fn taints(node: &Node) -> Vec<k8s_openapi::api::core::v1::Taint> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
}

/// Runs the three controllers until the task is dropped.
pub async fn run(client: Client, cloud: Cloud, faults: Faults, monitor_period: Duration) {
    let changed = Arc::new(Notify::new());
    let (nodes, _nodes_watch) = crate::watch::reflect(
        Api::<Node>::all(client.clone()),
        watcher::Config::default(),
        changed.clone(),
    );
    let (services, _services_watch) = crate::watch::reflect(
        Api::<Service>::all(client.clone()),
        watcher::Config::default(),
        changed.clone(),
    );
    let (slices, _slices_watch) = crate::watch::reflect(
        Api::<EndpointSlice>::all(client.clone()),
        watcher::Config::default(),
        changed.clone(),
    );
    let mut ticks = tokio::time::interval(monitor_period);
    loop {
        let lifecycle = tokio::select! {
            () = changed.notified() => false,
            _ = ticks.tick() => true,
        };
        let nodes = nodes.state();
        initialize_nodes(&client, &cloud, &nodes).await;
        if lifecycle {
            monitor_nodes(&client, &cloud, &nodes, faults).await;
        }
        let (services, slices) = (services.state(), slices.state());
        reconcile_load_balancers(&client, &cloud, &services, &nodes, &slices, faults).await;
    }
}

/// cloud-node: initializes the nodes with the uninitialized taint.
async fn initialize_nodes(client: &Client, cloud: &Cloud, nodes: &[Arc<Node>]) {
    let api: Api<Node> = Api::all(client.clone());
    for node in nodes {
        let mut remaining = taints(node);
        let before = remaining.len();
        remaining.retain(|t| t.key != UNINITIALIZED_TAINT);
        if remaining.len() == before {
            continue;
        }
        let Ok(instance) = cloud.instance(&node.name_any()) else {
            continue;
        };
        let addresses = json!([{"type": "InternalIP", "address": instance.address.to_string()},
                               {"type": "Hostname", "address": node.name_any()}]);
        let status = api
            .patch_status(
                &node.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"addresses": addresses}})),
            )
            .await;
        let spec = api
            .patch(
                &node.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({
                    "metadata": {"labels": {"node.kubernetes.io/instance-type": instance.instance_type,
                        "topology.kubernetes.io/zone": instance.zone}},
                    "spec": {"providerID": instance.provider_id, "taints": remaining}})),
            )
            .await;
        if let Some(error) = status.err().or(spec.err()) {
            tracing::debug!(%error, node = %node.name_any(), "initializing a node");
        }
    }
}

/// cloud-node-lifecycle: deletes nodes whose instance is gone, taints shut-down ones.
async fn monitor_nodes(client: &Client, cloud: &Cloud, nodes: &[Arc<Node>], faults: Faults) {
    let api: Api<Node> = Api::all(client.clone());
    for node in nodes {
        let name = node.name_any();
        let mut current = taints(node);
        let shut_down = current.iter().any(|t| t.key == SHUTDOWN_TAINT);
        let result = if is_ready(node) {
            if !shut_down {
                continue;
            }
            current.retain(|t| t.key != SHUTDOWN_TAINT);
            api.patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"taints": current}})),
            )
            .await
            .map(|_| ())
        } else {
            match cloud.instance(&name) {
                Err(CloudError::InstanceNotFound(_)) if !faults.no_node_deletion => api
                    .delete(&name, &DeleteParams::default())
                    .await
                    .map(|_| ()),
                Ok(instance) if instance.state == InstanceState::Stopped && !shut_down => {
                    let mut taints = serde_json::to_value(&current).unwrap_or(json!([]));
                    if let Some(list) = taints.as_array_mut() {
                        list.push(json!({"key": SHUTDOWN_TAINT, "effect": "NoSchedule"}));
                    }
                    api.patch(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"spec": {"taints": taints}})),
                    )
                    .await
                    .map(|_| ())
                }
                _ => continue,
            }
        };
        if let Err(error) = result {
            tracing::debug!(%error, node = %name, "node lifecycle");
        }
    }
}

/// What the load balancer of `service` should be, given the `nodes`.
fn desired(
    service: &Service,
    nodes: &[Arc<Node>],
    slices: &[Arc<EndpointSlice>],
    faults: Faults,
) -> LoadBalancerSpec {
    let spec = service.spec.clone().unwrap_or_default();
    let mut ports = Vec::new();
    let mut pods = Vec::new();
    let mine = crate::kube_proxy::slices_of(service, slices);
    for p in spec.ports.iter().flatten() {
        let (Some(protocol), Ok(port)) =
            (Protocol::of(p.protocol.as_deref()), u16::try_from(p.port))
        else {
            continue;
        };
        let node_port = p.node_port.and_then(|n| u16::try_from(n).ok()).unwrap_or(0);
        if node_port == 0 {
            // No node port (allocateLoadBalancerNodePorts: false): straight to the pods.
            let name = p.name.as_deref().unwrap_or("");
            pods.extend(
                crate::kube_proxy::backends(&mine, name, protocol)
                    .into_iter()
                    .filter(|b| b.ready)
                    .map(|b| PodTarget {
                        port,
                        protocol,
                        address: b.address,
                    }),
            );
        }
        ports.push(LoadBalancerPort {
            protocol,
            port,
            node_port,
        });
    }
    pods.sort();
    let mut names: Vec<String> = nodes
        .iter()
        .filter(|n| in_load_balancers(n))
        .map(|n| n.name_any())
        .collect();
    names.sort();
    let affinity = (spec.session_affinity.as_deref() == Some("ClientIP")
        && !faults.no_session_affinity)
        .then(|| {
            let seconds = spec
                .session_affinity_config
                .as_ref()
                .and_then(|c| c.client_ip.as_ref())
                .and_then(|c| c.timeout_seconds)
                .unwrap_or(10800);
            u64::try_from(seconds).unwrap_or(0)
        });
    LoadBalancerSpec {
        ports,
        nodes: names,
        affinity_seconds: affinity,
        source_ranges: if faults.no_source_ranges {
            Vec::new()
        } else {
            spec.load_balancer_source_ranges.unwrap_or_default()
        },
        health_check_node_port: (spec.external_traffic_policy.as_deref() == Some("Local"))
            .then(|| {
                spec.health_check_node_port
                    .and_then(|p| u16::try_from(p).ok())
            })
            .flatten(),
        pods,
    }
}

/// service: ensures, updates and deletes load balancers (see the module docs).
async fn reconcile_load_balancers(
    client: &Client,
    cloud: &Cloud,
    services: &[Arc<Service>],
    nodes: &[Arc<Node>],
    slices: &[Arc<EndpointSlice>],
    faults: Faults,
) {
    let mut wanted = BTreeSet::new();
    for service in services {
        let api: Api<Service> =
            Api::namespaced(client.clone(), &service.namespace().unwrap_or_default());
        let name = service.name_any();
        let balancer = load_balancer_name(&service.uid().unwrap_or_default());
        let is_lb = service.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer");
        let finalizers = service.finalizers().to_vec();
        let held = finalizers.iter().any(|f| f == CLEANUP_FINALIZER);
        if is_lb && service.metadata.deletion_timestamp.is_none() {
            wanted.insert(balancer.clone());
            if !held && !faults.no_finalizer {
                let mut with = finalizers.clone();
                with.push(CLEANUP_FINALIZER.to_owned());
                let patch = json!({"metadata": {"finalizers": with, "resourceVersion": service.resource_version()}});
                if let Err(error) = api
                    .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                    .await
                {
                    tracing::debug!(%error, service = %name, "adding the cleanup finalizer");
                }
                continue; // the next pass, on the Service's change, makes the load balancer
            }
            let mut spec = desired(service, nodes, slices, faults);
            if faults.stale_ports
                && let Ok(existing) = cloud.load_balancer(&balancer)
            {
                spec.ports = existing.spec.ports;
            }
            let current = cloud.load_balancer(&balancer).ok();
            let made = match current {
                Some(current) if current.spec == spec => current,
                _ => match cloud.ensure_load_balancer(&balancer, spec).await {
                    Ok(made) => made,
                    Err(error) => {
                        tracing::warn!(%error, service = %name, "ensuring a load balancer");
                        continue;
                    }
                },
            };
            let ingress = json!([{"ip": made.address.to_string(), "ipMode": "VIP"}]);
            let shown = service
                .status
                .as_ref()
                .and_then(|s| s.load_balancer.as_ref())
                .and_then(|l| l.ingress.as_ref())
                .map(|i| serde_json::to_value(i).unwrap_or_default());
            if shown.as_ref() != Some(&ingress)
                && let Err(error) = api
                    .patch_status(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"status": {"loadBalancer": {"ingress": ingress}}})),
                    )
                    .await
            {
                tracing::debug!(%error, service = %name, "writing the ingress");
            }
            continue;
        }
        // Not (or no longer) a load balancer: the cloud's first, then the finalizer.
        cloud.delete_load_balancer(&balancer).await;
        if held {
            let without: Vec<&String> = finalizers
                .iter()
                .filter(|f| *f != CLEANUP_FINALIZER)
                .collect();
            let patch = json!({"metadata": {"finalizers": without, "resourceVersion": service.resource_version()}});
            if let Err(error) = api
                .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await
            {
                tracing::debug!(%error, service = %name, "removing the cleanup finalizer");
            }
        }
        let has_ingress = service
            .status
            .as_ref()
            .and_then(|s| s.load_balancer.as_ref())
            .and_then(|l| l.ingress.as_ref())
            .is_some_and(|i| !i.is_empty());
        if has_ingress && service.metadata.deletion_timestamp.is_none() {
            let _ = api
                .patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": {"loadBalancer": {"ingress": null}}})),
                )
                .await;
        }
    }
    for orphan in cloud
        .load_balancers()
        .into_iter()
        .filter(|b| !wanted.contains(&b.name))
    {
        cloud.delete_load_balancer(&orphan.name).await;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A node named `name`, Ready as `ready` says, with `labels` and `taints`.
    fn node(name: &str, ready: &str, labels: &[(&str, &str)], taints: &[&str]) -> Arc<Node> {
        let labels: serde_json::Map<String, serde_json::Value> = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), json!(v)))
            .collect();
        let taints: Vec<serde_json::Value> = taints
            .iter()
            .map(|key| json!({"key": key, "effect": "NoSchedule"}))
            .collect();
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "labels": labels},
                "spec": {"taints": taints},
                "status": {"conditions": [{"type": "Ready", "status": ready}]},
            }))
            .unwrap(),
        )
    }

    fn load_balancer_nodes(nodes: &[Arc<Node>]) -> Vec<String> {
        let service: Service = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default", "uid": "u"},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "nodePort": 30080}]},
        }))
        .unwrap();
        desired(&service, nodes, &[], Faults::default()).nodes
    }

    #[test]
    fn a_node_that_is_not_ready_stays_in_the_load_balancer() {
        let nodes = [
            node("ready", "True", &[], &[]),
            node("unknown", "Unknown", &[], &[]),
            node("not-ready", "False", &[], &[]),
        ];
        assert_eq!(
            load_balancer_nodes(&nodes),
            ["not-ready", "ready", "unknown"]
        );
    }

    #[test]
    fn excluded_tainted_and_deleted_nodes_leave_the_load_balancer() {
        let mut deleted = (*node("deleted", "True", &[], &[])).clone();
        deleted.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now(),
            ));
        let nodes = [
            node("excluded", "True", &[(EXCLUDE_LABEL, "")], &[]),
            node("excluded-true", "True", &[(EXCLUDE_LABEL, "true")], &[]),
            node("excluded-garbage", "True", &[(EXCLUDE_LABEL, "maybe")], &[]),
            node("included-false", "True", &[(EXCLUDE_LABEL, "false")], &[]),
            node("scaled-down", "True", &[], &[TO_BE_DELETED_TAINT]),
            node("other-taint", "True", &[], &["example.com/other"]),
            Arc::new(deleted),
        ];
        assert_eq!(
            load_balancer_nodes(&nodes),
            ["included-false", "other-taint"]
        );
    }
}
