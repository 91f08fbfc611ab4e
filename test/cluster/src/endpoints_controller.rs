//! The endpoints and endpoint-slice controllers in one: for each Service with a selector, the
//! pods it selects that have an address become its `Endpoints` (ready ones in `addresses`,
//! others in `notReadyAddresses`; terminating ones left out) and its `EndpointSlice`
//! (`<service>-gp`, labelled `kubernetes.io/service-name`), whose endpoints carry upstream's
//! conditions: `ready` (Ready and not terminating), `serving` (Ready), `terminating`.
//! Ports are the Service's, each `targetPort` resolved (a named one through the pod's
//! container ports). Both are written with server-side apply, so an unchanged result writes
//! nothing.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, Service, ServicePort};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};
use tokio::sync::Notify;

/// The field manager and `endpointslice.kubernetes.io/managed-by` of what it writes.
pub const MANAGER: &str = "endpointslice-controller.k8s.io";

fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn target_port(port: &ServicePort, pod: &Pod) -> Option<i32> {
    match &port.target_port {
        None => Some(port.port),
        Some(IntOrString::Int(n)) => Some(*n),
        Some(IntOrString::String(name)) => pod
            .spec
            .iter()
            .flat_map(|s| s.containers.iter())
            .flat_map(|c| c.ports.iter().flatten())
            .find(|p| p.name.as_deref() == Some(name.as_str()))
            .map(|p| p.container_port),
    }
}

/// The Endpoints and EndpointSlice of `service` given the namespace's `pods`.
pub fn desired(service: &Service, pods: &[Arc<Pod>]) -> Option<(Value, Value)> {
    let spec = service.spec.as_ref()?;
    let selector = spec.selector.as_ref().filter(|s| !s.is_empty())?;
    let name = service.name_any();
    let namespace = service.namespace().unwrap_or_default();
    let ports = spec.ports.clone().unwrap_or_default();
    let selected: Vec<&Arc<Pod>> = pods
        .iter()
        .filter(|p| p.namespace().as_deref() == Some(namespace.as_str()))
        .filter(|p| selector.iter().all(|(k, v)| p.labels().get(k) == Some(v)))
        .filter(|p| p.status.as_ref().and_then(|s| s.pod_ip.as_ref()).is_some())
        .filter(|p| {
            !matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            )
        })
        .collect();
    let first = selected.first();
    let resolved: Vec<Value> = ports
        .iter()
        .map(|p| {
            let target = first.and_then(|pod| target_port(p, pod)).unwrap_or(p.port);
            json!({"name": p.name.clone().unwrap_or_default(), "port": target,
                   "protocol": p.protocol.clone().unwrap_or_else(|| "TCP".into())})
        })
        .collect();
    let mut endpoints = Vec::new();
    let (mut ready_addresses, mut not_ready) = (Vec::new(), Vec::new());
    for pod in &selected {
        let ip = pod
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.clone())
            .unwrap_or_default();
        let ready = pod_ready(pod);
        let terminating = pod.metadata.deletion_timestamp.is_some();
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        let target = json!({"kind": "Pod", "namespace": namespace, "name": pod.name_any(), "uid": pod.uid()});
        endpoints.push(json!({"addresses": [ip],
            "conditions": {"ready": ready && !terminating, "serving": ready, "terminating": terminating},
            "nodeName": node, "targetRef": target}));
        let address = json!({"ip": ip, "nodeName": node, "targetRef": target});
        if terminating {
            continue;
        }
        if ready {
            ready_addresses.push(address);
        } else {
            not_ready.push(address);
        }
    }
    let mut subset = json!({"ports": resolved});
    if !ready_addresses.is_empty() {
        subset["addresses"] = json!(ready_addresses);
    }
    if !not_ready.is_empty() {
        subset["notReadyAddresses"] = json!(not_ready);
    }
    let subsets = if ready_addresses.is_empty() && not_ready.is_empty() {
        json!([])
    } else {
        json!([subset])
    };
    let endpoints_object = json!({"apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": name, "namespace": namespace, "labels": service.labels()},
        "subsets": subsets});
    let slice = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("{name}-gp"), "namespace": namespace,
            "labels": {"kubernetes.io/service-name": name,
                       "endpointslice.kubernetes.io/managed-by": MANAGER}},
        "addressType": "IPv4", "ports": resolved, "endpoints": endpoints});
    Some((endpoints_object, slice))
}

/// Keeps every Service's Endpoints and EndpointSlice current until the task is dropped.
pub async fn run(client: Client) {
    let changed = Arc::new(Notify::new());
    let (services, _services_watch) = crate::watch::reflect(
        Api::<Service>::all(client.clone()),
        watcher::Config::default(),
        changed.clone(),
    );
    let (pods, _pods_watch) = crate::watch::reflect(
        Api::<Pod>::all(client.clone()),
        watcher::Config::default(),
        changed.clone(),
    );
    let apply = PatchParams::apply(MANAGER).force();
    loop {
        changed.notified().await;
        let pods = pods.state();
        for service in services.state() {
            let Some((endpoints, slice)) = desired(&service, &pods) else {
                continue;
            };
            let namespace = service.namespace().unwrap_or_default();
            let name = service.name_any();
            let endpoints_api: Api<k8s_openapi::api::core::v1::Endpoints> =
                Api::namespaced(client.clone(), &namespace);
            if let Err(error) = endpoints_api
                .patch(&name, &apply, &Patch::Apply(endpoints))
                .await
            {
                tracing::debug!(%error, service = %name, "writing endpoints");
            }
            let slices: Api<k8s_openapi::api::discovery::v1::EndpointSlice> =
                Api::namespaced(client.clone(), &namespace);
            if let Err(error) = slices
                .patch(&format!("{name}-gp"), &apply, &Patch::Apply(slice))
                .await
            {
                tracing::debug!(%error, service = %name, "writing endpoint slice");
            }
        }
    }
}
