//! A kubelet simulator: one per node, a client of the API server like a real kubelet.
//!
//! - **Registration**: creates its Node (labels `kubernetes.io/hostname`, `os`, `arch`; its
//!   pod CIDR; an `InternalIP` and `Hostname` address; capacity; node info) with a `Ready`
//!   condition.
//! - **Heartbeats**: renews its Lease in `kube-node-lease` and its `Ready` condition's
//!   heartbeat every [`HEARTBEAT`] (or the period it is given). With an external cloud it
//!   registers with the `node.cloudprovider.kubernetes.io/uninitialized` taint, which the
//!   cloud controller manager removes once it has initialized the node.
//! - **Shutdown**: a machine shut down gracefully (a re-image) has its kubelet report the node
//!   `Ready=False` ("node is shutting down") before it stops.
//! - **Pods**: watches the pods bound to it. A new one gets an address from the node's pod
//!   CIDR; each of its containers that runs agnhost `netexec` is served in-process on that
//!   address ([`netexec`]), other containers run nothing; the pod is then `Running` and
//!   `Ready`, with upstream's conditions and container statuses. A pod being deleted keeps
//!   serving for its containers' `--delay-shutdown` (within its grace period), stops, and is
//!   deleted for good.

pub mod netexec;

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::watcher;
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio::task::JoinSet;

use self::netexec::{Netexec, unix_now};
use crate::net;

/// How often a node renews its Lease and reports itself Ready.
pub const HEARTBEAT: Duration = Duration::from_secs(10);
/// The namespace of the nodes' Leases.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";
/// The kubelet version nodes report unless their machine runs another
/// ([`Kubelet::with_version`]).
pub const KUBELET_VERSION: &str = "v1.33.0";

/// Why a kubelet stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server refused or failed a request.
    #[error("{what}: {source}")]
    Api {
        /// What was being done.
        what: String,
        /// Why it failed.
        source: kube::Error,
    },
    /// The node's pod CIDR has no address left.
    #[error("no address left in {0}")]
    NoAddress(String),
    /// An object could not be built.
    #[error("building {what}: {source}")]
    Build {
        /// What.
        what: &'static str,
        /// Why.
        source: serde_json::Error,
    },
}

fn api_error(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let what = what.into();
    move |source| Error::Api { what, source }
}

/// One simulated node.
#[derive(Clone)]
pub struct Kubelet {
    client: Client,
    /// The node's name, `node-<n>`.
    pub name: String,
    /// The node's number (from 1): its address and pod CIDR follow from it and the
    /// cluster's address plan ([`net::Plan`]).
    pub number: u8,
    plan: net::Plan,
    heartbeat_period: Duration,
    external_cloud: bool,
    version: String,
}

/// The message of a node's `Ready=False` condition while its machine shuts down
/// ([`Kubelet::report_shutdown`]).
pub const SHUTTING_DOWN: &str = "node is shutting down";

/// The taint of a node the cloud controller manager has not initialized yet.
pub const UNINITIALIZED_TAINT: &str = "node.cloudprovider.kubernetes.io/uninitialized";

impl std::fmt::Debug for Kubelet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kubelet")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// A pod this node runs.
struct Running {
    uid: String,
    ip: Ipv4Addr,
    servers: JoinSet<()>,
    stopping: bool,
}

fn rfc3339_now() -> String {
    genplane_apimachinery::meta::rfc3339(unix_now())
}

impl Kubelet {
    /// Node `number` (from 1) of a cluster with addresses from `plan`, talking to the API
    /// server through `client`.
    pub fn new(client: Client, plan: net::Plan, number: u8) -> Self {
        Self {
            client,
            name: format!("node-{number}"),
            number,
            plan,
            heartbeat_period: HEARTBEAT,
            external_cloud: false,
            version: KUBELET_VERSION.to_owned(),
        }
    }

    /// The same node, heartbeating every `period`.
    #[must_use]
    pub fn with_heartbeat(mut self, period: Duration) -> Self {
        self.heartbeat_period = period;
        self
    }

    /// The same node, registering with the uninitialized taint for an external cloud
    /// controller manager (kubelet's `--cloud-provider=external`).
    #[must_use]
    pub fn with_external_cloud(mut self) -> Self {
        self.external_cloud = true;
        self
    }

    /// The same node, running kubelet `version` (reported as `nodeInfo.kubeletVersion`).
    #[must_use]
    pub fn with_version(mut self, version: &str) -> Self {
        self.version = version.to_owned();
        self
    }

    /// The node's address.
    pub fn ip(&self) -> Ipv4Addr {
        self.plan.node_ip(self.number)
    }

    fn ready_condition(&self) -> Value {
        let now = rfc3339_now();
        json!({"type": "Ready", "status": "True", "reason": "KubeletReady",
               "message": "kubelet is posting ready status",
               "lastHeartbeatTime": now, "lastTransitionTime": now})
    }

    fn node_status(&self) -> Value {
        let now = rfc3339_now();
        let condition = |kind: &str, reason: &str, message: &str| {
            json!({"type": kind, "status": "False", "reason": reason, "message": message,
                   "lastHeartbeatTime": now, "lastTransitionTime": now})
        };
        json!({
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110", "ephemeral-storage": "100Gi"},
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110", "ephemeral-storage": "100Gi"},
            "conditions": [
                condition("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                condition("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                condition("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                self.ready_condition(),
            ],
            "addresses": [
                {"type": "InternalIP", "address": self.ip().to_string()},
                {"type": "Hostname", "address": self.name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": format!("genplane-{}", self.name), "systemUUID": format!("genplane-{}", self.name),
                "bootID": uuid_like(&self.name), "kernelVersion": std::env::consts::OS,
                "osImage": "genplane simulated node", "containerRuntimeVersion": "genplane-sim://0.1.0",
                "kubeletVersion": self.version, "kubeProxyVersion": "",
                "operatingSystem": "linux", "architecture": std::env::consts::ARCH,
            },
        })
    }

    /// Registers the node (or takes over its existing Node) and reports it Ready.
    pub async fn register(&self) -> Result<(), Error> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let cidr = net::format_cidr(self.plan.pod_cidr(self.number));
        let taints = if self.external_cloud {
            json!([{"key": UNINITIALIZED_TAINT, "value": "true", "effect": "NoSchedule"}])
        } else {
            json!([])
        };
        let node: Node = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": self.name, "labels": {
                "kubernetes.io/hostname": self.name, "kubernetes.io/os": "linux",
                "kubernetes.io/arch": std::env::consts::ARCH,
                "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": std::env::consts::ARCH}},
            "spec": {"podCIDR": cidr, "podCIDRs": [cidr], "taints": taints},
            "status": self.node_status(),
        }))
        .map_err(|source| Error::Build { what: "the node", source })?;
        match nodes.create(&PostParams::default(), &node).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {
                nodes
                    .patch_status(
                        &self.name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"status": self.node_status()})),
                    )
                    .await
                    .map_err(api_error(format!("reporting node {}", self.name)))?;
            }
            Err(e) => return Err(api_error(format!("registering node {}", self.name))(e)),
        }
        Ok(())
    }

    /// Reports the node not Ready because it is shutting down (upstream's graceful node
    /// shutdown: `Ready=False`, reason `KubeletNotReady`, "node is shutting down"), the last
    /// status a machine's kubelet writes before the machine goes off. The next
    /// [`register`](Self::register) reports it Ready again.
    pub async fn report_shutdown(&self) -> Result<(), Error> {
        let now = rfc3339_now();
        let not_ready = json!({"type": "Ready", "status": "False", "reason": "KubeletNotReady",
            "message": SHUTTING_DOWN, "lastHeartbeatTime": now, "lastTransitionTime": now});
        self.report_ready(|condition| *condition = not_ready).await
    }

    /// Renews the node's Lease and its Ready condition's heartbeat.
    pub async fn heartbeat(&self) -> Result<(), Error> {
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), LEASE_NAMESPACE);
        let now = chrono_like_micro_now();
        let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": self.name, "namespace": LEASE_NAMESPACE},
            "spec": {"holderIdentity": self.name, "leaseDurationSeconds": 40, "renewTime": now}});
        leases
            .patch(
                &self.name,
                &PatchParams::apply("kubelet").force(),
                &Patch::Apply(lease),
            )
            .await
            .map_err(api_error(format!("renewing the lease of {}", self.name)))?;
        let ready = self.ready_condition();
        self.report_ready(|condition| {
            if condition["status"] == "True" {
                condition["lastHeartbeatTime"] = ready["lastHeartbeatTime"].clone();
            } else {
                *condition = ready;
            }
        })
        .await
    }

    /// Writes the node's conditions with its `Ready` condition as `change` makes it (from
    /// `null` when it has none), the others as they are.
    async fn report_ready(&self, change: impl FnOnce(&mut Value)) -> Result<(), Error> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let node = nodes
            .get_status(&self.name)
            .await
            .map_err(api_error(format!("reading node {}", self.name)))?;
        let mut conditions: Vec<Value> = node
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|c| serde_json::to_value(c).ok())
            .collect();
        match conditions.iter_mut().find(|c| c["type"] == "Ready") {
            Some(condition) => change(condition),
            None => {
                let mut condition = Value::Null;
                change(&mut condition);
                conditions.push(condition);
            }
        }
        nodes
            .patch_status(
                &self.name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"conditions": conditions}})),
            )
            .await
            .map_err(api_error(format!("reporting node {}", self.name)))?;
        Ok(())
    }

    /// Registers, then heartbeats and runs the node's pods until the task is dropped.
    pub async fn run(self) -> Result<(), Error> {
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let namespace: Namespace = serde_json::from_value(
            json!({"metadata": {"name": LEASE_NAMESPACE}}),
        )
        .map_err(|source| Error::Build {
            what: "a namespace",
            source,
        })?;
        match namespaces.create(&PostParams::default(), &namespace).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(e) => return Err(api_error("creating kube-node-lease")(e)),
        }
        self.register().await?;
        self.heartbeat().await?;
        let beating = self.clone();
        let _heartbeats = crate::watch::AbortOnDrop(tokio::spawn(async move {
            let mut ticks = tokio::time::interval(beating.heartbeat_period);
            loop {
                ticks.tick().await;
                if let Err(error) = beating.heartbeat().await {
                    tracing::warn!(%error, "heartbeat failed");
                }
            }
        }));
        self.run_pods().await
    }

    async fn run_pods(&self) -> Result<(), Error> {
        let changed = Arc::new(Notify::new());
        let pods: Api<Pod> = Api::all(self.client.clone());
        let (store, watch) = crate::watch::reflect(
            pods,
            watcher::Config::default().fields(&format!("spec.nodeName={}", self.name)),
            changed.clone(),
        );
        let mut running: BTreeMap<String, Running> = BTreeMap::new();
        let (stopped_tx, mut stopped_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        loop {
            tokio::select! {
                () = changed.notified() => {}
                Some(uid) = stopped_rx.recv() => {
                    running.retain(|_, r| r.uid != uid);
                }
            }
            let pods = store.state();
            let present: BTreeSet<String> = pods.iter().filter_map(|p| p.uid()).collect();
            running.retain(|_, r| present.contains(&r.uid));
            for pod in pods {
                let Some(uid) = pod.uid() else { continue };
                if pod.metadata.deletion_timestamp.is_some() {
                    if let Some(run) = running.get_mut(&uid)
                        && !run.stopping
                    {
                        run.stopping = true;
                        let servers = std::mem::take(&mut run.servers);
                        tokio::spawn(self.clone().terminate(
                            (*pod).clone(),
                            servers,
                            stopped_tx.clone(),
                        ));
                    } else if !running.contains_key(&uid) {
                        tokio::spawn(self.clone().terminate(
                            (*pod).clone(),
                            JoinSet::new(),
                            stopped_tx.clone(),
                        ));
                        running.insert(
                            uid.clone(),
                            Running {
                                uid,
                                ip: Ipv4Addr::UNSPECIFIED,
                                servers: JoinSet::new(),
                                stopping: true,
                            },
                        );
                    }
                    continue;
                }
                if running.contains_key(&uid) {
                    continue;
                }
                let taken: BTreeSet<Ipv4Addr> = running.values().map(|r| r.ip).collect();
                match self.start(&pod, &taken).await {
                    Ok(run) => {
                        running.insert(uid, run);
                    }
                    Err(error) => {
                        tracing::warn!(%error, pod = %pod.name_any(), "starting a pod failed")
                    }
                }
            }
            if watch.is_finished() {
                return Ok(());
            }
        }
    }

    /// Starts `pod` on an address not `taken`: its netexec servers, then its status.
    async fn start(&self, pod: &Pod, taken: &BTreeSet<Ipv4Addr>) -> Result<Running, Error> {
        let uid = pod.uid().unwrap_or_default();
        let cidr = self.plan.pod_cidr(self.number);
        let given = pod
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.as_deref())
            .and_then(|ip| ip.parse::<Ipv4Addr>().ok())
            .filter(|ip| net::contains(cidr, *ip) && !taken.contains(ip));
        let ip = given
            .or_else(|| net::hosts(cidr).skip(1).find(|ip| !taken.contains(ip)))
            .ok_or_else(|| Error::NoAddress(net::format_cidr(cidr)))?;
        let mut servers = JoinSet::new();
        let containers = pod
            .spec
            .as_ref()
            .map(|s| s.containers.clone())
            .unwrap_or_default();
        let mut statuses = Vec::new();
        let started = rfc3339_now();
        for container in &containers {
            let words: Vec<String> = container
                .command
                .iter()
                .flatten()
                .chain(container.args.iter().flatten())
                .cloned()
                .collect();
            let image = container.image.clone().unwrap_or_default();
            if let Some(netexec) = Netexec::of(&image, &words)
                && let Err(error) = netexec
                    .serve(IpAddr::V4(ip), &pod.name_any(), &mut servers)
                    .await
            {
                tracing::warn!(%error, pod = %pod.name_any(), "netexec could not listen");
            }
            statuses.push(
                json!({"name": container.name, "ready": true, "started": true,
                "restartCount": 0, "image": image, "imageID": format!("sim://{image}"),
                "containerID": format!("sim://{uid}/{}", container.name),
                "state": {"running": {"startedAt": started}}}),
            );
        }
        let condition = |kind: &str| json!({"type": kind, "status": "True", "lastProbeTime": null, "lastTransitionTime": started});
        let status = json!({"status": {
            "phase": "Running", "hostIP": self.ip().to_string(), "hostIPs": [{"ip": self.ip().to_string()}],
            "podIP": ip.to_string(), "podIPs": [{"ip": ip.to_string()}], "startTime": started,
            "conditions": [condition("PodReadyToStartContainers"), condition("Initialized"),
                           condition("Ready"), condition("ContainersReady"), condition("PodScheduled")],
            "containerStatuses": statuses}});
        let pods: Api<Pod> =
            Api::namespaced(self.client.clone(), &pod.namespace().unwrap_or_default());
        pods.patch_status(
            &pod.name_any(),
            &PatchParams::default(),
            &Patch::Merge(status),
        )
        .await
        .map_err(api_error(format!("reporting pod {}", pod.name_any())))?;
        Ok(Running {
            uid,
            ip,
            servers,
            stopping: false,
        })
    }

    /// Stops a deleted pod: serves on for its `--delay-shutdown` within the grace period,
    /// stops, reports its containers terminated and deletes it for good.
    async fn terminate(
        self,
        pod: Pod,
        mut servers: JoinSet<()>,
        stopped: tokio::sync::mpsc::UnboundedSender<String>,
    ) {
        let grace =
            u64::try_from(pod.metadata.deletion_grace_period_seconds.unwrap_or(0)).unwrap_or(0);
        let delay = pod
            .spec
            .iter()
            .flat_map(|s| s.containers.iter())
            .filter_map(|c| {
                let words: Vec<String> = c
                    .command
                    .iter()
                    .flatten()
                    .chain(c.args.iter().flatten())
                    .cloned()
                    .collect();
                Netexec::of(c.image.as_deref().unwrap_or(""), &words)
            })
            .map(|n| n.delay_shutdown)
            .max()
            .unwrap_or(0)
            .min(grace);
        tokio::time::sleep(Duration::from_secs(delay)).await;
        servers.shutdown().await;
        let name = pod.name_any();
        let pods: Api<Pod> =
            Api::namespaced(self.client.clone(), &pod.namespace().unwrap_or_default());
        let finished = rfc3339_now();
        let statuses: Vec<Value> = pod
            .spec
            .iter()
            .flat_map(|s| s.containers.iter())
            .map(|c| json!({"name": c.name, "ready": false, "started": false, "restartCount": 0,
                "image": c.image, "imageID": format!("sim://{}", c.image.as_deref().unwrap_or("")),
                "state": {"terminated": {"exitCode": 0, "reason": "Completed", "finishedAt": finished}}}))
            .collect();
        let status = json!({"status": {"containerStatuses": statuses,
            "conditions": [{"type": "Ready", "status": "False", "lastProbeTime": null, "lastTransitionTime": finished}]}});
        if let Err(error) = pods
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
            .await
        {
            tracing::debug!(%error, pod = %name, "reporting a stopped pod");
        }
        let uid = pod.uid().unwrap_or_default();
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        if let Err(error) = pods.delete(&name, &params).await {
            tracing::debug!(%error, pod = %name, "deleting a stopped pod");
        }
        let _ = stopped.send(uid);
    }
}

/// A `metav1.MicroTime` of now.
fn chrono_like_micro_now() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    genplane_apimachinery::time::micro_time(
        i64::try_from(now.as_secs()).unwrap_or(i64::MAX),
        now.subsec_nanos(),
    )
}

/// A stable, UUID-shaped boot ID for a node.
fn uuid_like(name: &str) -> String {
    let hash = name
        .bytes()
        .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    format!(
        "{:08x}-0000-4000-8000-{:012x}",
        hash >> 32,
        hash & 0xffff_ffff_ffff
    )
}
