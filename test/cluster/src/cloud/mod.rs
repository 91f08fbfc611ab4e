//! A fake cloud: one instance per node, and load balancers on loopback addresses.
//!
//! **Instances** are the machines the nodes run on ([`Machines`] powers them: a kubelet and
//! its kube-proxy). An instance can be stopped (its node stops heartbeating, its pods stop
//! answering), started, rebooted (stopped and started: the kubelet registers again and runs
//! its pods again) and deleted (stopped for good, gone from every listing). A **node upgrade**
//! ([`Cloud::upgrade_nodes`], also a downgrade) re-images the instances one after the other,
//! as a cloud's node-pool upgrade does: each machine is shut down (gracefully: its kubelet
//! reports the node not Ready first) and booted again with the
//! new node software, so its kubelet registers again reporting the new `kubeletVersion` and
//! runs its pods again (restarted). Unlike a real cloud it does not wait for a node to be
//! Ready before re-imaging the next: the machines boot in a moment here.
//!
//! A **control-plane upgrade** ([`Cloud::upgrade_control_plane`]) asks the cluster's
//! [`ControlPlane`] to restart its API server running another version, as a managed
//! cloud's control-plane upgrade does; the cloud answers once the new one serves. Nodes and
//! load balancers serve on meanwhile, unless the [`Fault`] `--cloud-fault
//! lb-outage-during-control-plane-upgrade` takes the load balancers' backends away for it.
//!
//! **Load balancers** are made and changed with [`Cloud::ensure_load_balancer`] (what a
//! cloud controller manager calls for a `type: LoadBalancer` Service): each gets an address
//! from the plan's load-balancer range, kept until it is deleted, and forwards each
//! [`LoadBalancerPort`] (TCP or UDP) to `nodeIP:nodePort` of its nodes, through the same
//! user-space forwarder as the kube-proxy simulator: round-robin over the nodes that pass its
//! health check (the Service's `healthCheckNodePort` answering 200 when it has one, else the
//! first TCP node port accepting connections), with the client's address kept, `ClientIP`
//! affinity when asked, and only from the allowed source ranges when given.
//!
//! Everything can be listed and described ([`Cloud::instances`], [`Cloud::load_balancers`]);
//! [`api`] serves the same over HTTP for processes outside the cluster's (an exec provider
//! of `genplane ccm-e2e`).

pub mod api;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::kube_proxy::{Backend, Forwarder, Key, Protocol, Route, Served};
use crate::net::{self, Plan};
use crate::watch::AbortOnDrop;

/// How often load balancers check their nodes.
pub const HEALTH_CHECK_PERIOD: Duration = Duration::from_millis(500);

/// What the cloud could not do.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    /// No instance has this name.
    #[error("instance {0:?} not found")]
    InstanceNotFound(String),
    /// No load balancer has this name.
    #[error("load balancer {0:?} not found")]
    LoadBalancerNotFound(String),
    /// The address range of load balancers is used up.
    #[error("no load-balancer address left in {0}")]
    NoAddress(String),
    /// A source range is not an IPv4 CIDR.
    #[error("invalid source range {0:?}")]
    SourceRange(String),
    /// A version to upgrade to is not a Kubernetes version (`v1.34.0`).
    #[error("{0:?} is not a Kubernetes version such as v1.34.0")]
    Version(String),
    /// This cloud runs no control plane it could upgrade.
    #[error("this cloud cannot upgrade the control plane")]
    NoControlPlane,
    /// The control plane could not be upgraded; why.
    #[error("upgrading the control plane: {0}")]
    ControlPlane(String),
}

/// The cluster's control plane, as a cloud managing it sees it.
pub trait ControlPlane: Send + Sync + 'static {
    /// Restarts the control plane running `version`; resolves once it serves again, or
    /// with why it cannot run that version.
    fn upgrade(&self, version: &str) -> futures::future::BoxFuture<'static, Result<(), String>>;
}

/// Powers the machines behind instances on and off.
pub trait Machines: Send + Sync + 'static {
    /// Starts the machine of `instance` running kubelet `kubelet_version` (its node
    /// registers and runs its pods).
    fn power_on(&self, instance: &str, kubelet_version: &str);
    /// Stops the machine of `instance` (its node stops heartbeating, its pods stop).
    fn power_off(&self, instance: &str);
    /// Shuts the machine of `instance` down gracefully, as a re-image does: its kubelet
    /// reports the node not Ready, then the machine stops as [`power_off`](Self::power_off)
    /// stops it. Resolves once the machine is off.
    fn shut_down(&self, instance: &str) -> futures::future::BoxFuture<'static, ()>;
}

/// Ways the fake cloud can be told to misbehave (`--cloud-fault`), each a real cloud's bug.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Fault {
    /// The load balancers lose their backends while the control plane is upgraded, as those
    /// of a cloud whose load-balancer health state lives with the control plane: from the
    /// upgrade's start, a load balancer forwards nowhere until its first health check after
    /// the control plane serves again.
    LbOutageDuringControlPlaneUpgrade,
}

/// The state of an instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum InstanceState {
    /// Running.
    Running,
    /// Stopped (shut down; it can be started again).
    Stopped,
}

/// An instance, as listed and described.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Instance {
    /// Its name, which is its node's.
    pub name: String,
    /// `genplane://<name>`, the node's `spec.providerID`.
    pub provider_id: String,
    /// Its address (the node's `InternalIP`).
    pub address: Ipv4Addr,
    /// The instance type (the node's `node.kubernetes.io/instance-type` label).
    pub instance_type: String,
    /// The zone (the node's `topology.kubernetes.io/zone` label).
    pub zone: String,
    /// Running or stopped.
    pub state: InstanceState,
    /// How many times it was booted.
    pub boots: u32,
    /// The version of the node software it runs (its kubelet's).
    pub kubelet_version: String,
}

/// One port of a load balancer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadBalancerPort {
    /// TCP or UDP.
    pub protocol: Protocol,
    /// The port clients connect to.
    pub port: u16,
    /// The node port it forwards to.
    pub node_port: u16,
}

/// What a load balancer should be.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadBalancerSpec {
    /// Its ports.
    pub ports: Vec<LoadBalancerPort>,
    /// The nodes it forwards to (instance names).
    pub nodes: Vec<String>,
    /// `ClientIP` affinity's timeout, if any.
    pub affinity_seconds: Option<u64>,
    /// The client ranges accepted (CIDRs); empty: any.
    pub source_ranges: Vec<String>,
    /// The node port answering health checks (`healthCheckNodePort`), if any.
    pub health_check_node_port: Option<u16>,
    /// Where a port without a node port (0: `allocateLoadBalancerNodePorts: false`) sends
    /// traffic: straight to the Service's ready pods, as a load balancer that reaches pod
    /// addresses does.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pods: Vec<PodTarget>,
}

/// A pod a load-balancer port without a node port forwards to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodTarget {
    /// The load balancer's port.
    pub port: u16,
    /// TCP or UDP.
    pub protocol: Protocol,
    /// The pod's address and port.
    pub address: SocketAddr,
}

/// A load balancer, as listed and described.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadBalancer {
    /// Its name (the CCM's: `a` + the Service's uid without dashes, as upstream's
    /// `GetLoadBalancerName`).
    pub name: String,
    /// Its address.
    pub address: Ipv4Addr,
    /// What it was last told to be.
    pub spec: LoadBalancerSpec,
    /// The nodes passing its health check now.
    pub healthy_nodes: Vec<String>,
}

/// The cloud's state.
#[derive(Default)]
struct State {
    instances: BTreeMap<String, Instance>,
    load_balancers: BTreeMap<String, LoadBalancer>,
    next_address: usize,
    /// [`Fault::LbOutageDuringControlPlaneUpgrade`] in effect: the load balancers have no
    /// backends.
    backends_lost: bool,
}

/// The fake cloud (cheap to clone: one shared state).
#[derive(Clone)]
pub struct Cloud {
    plan: Plan,
    state: Arc<Mutex<State>>,
    machines: Arc<dyn Machines>,
    control_plane: Option<Arc<dyn ControlPlane>>,
    faults: Vec<Fault>,
    forwarder: Arc<tokio::sync::Mutex<Forwarder>>,
    _health_checks: Arc<AbortOnDrop>,
}

impl std::fmt::Debug for Cloud {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cloud")
            .field("plan", &self.plan)
            .finish_non_exhaustive()
    }
}

impl Cloud {
    /// A cloud with addresses from `plan` whose instances run on `machines`, with no
    /// instance yet. Must be called within a Tokio runtime (health checks run in a task).
    pub fn new(plan: Plan, machines: Arc<dyn Machines>) -> Self {
        let state: Arc<Mutex<State>> = Arc::default();
        let forwarder: Arc<tokio::sync::Mutex<Forwarder>> = Arc::default();
        let health_checks = tokio::spawn(check_health(state.clone(), forwarder.clone()));
        Self {
            plan,
            state,
            machines,
            control_plane: None,
            faults: Vec::new(),
            forwarder,
            _health_checks: Arc::new(AbortOnDrop(health_checks)),
        }
    }

    /// The same cloud, managing `control_plane` ([`Cloud::upgrade_control_plane`]).
    #[must_use]
    pub fn with_control_plane(mut self, control_plane: Arc<dyn ControlPlane>) -> Self {
        self.control_plane = Some(control_plane);
        self
    }

    /// The same cloud, misbehaving as `faults` say.
    #[must_use]
    pub fn with_faults(mut self, faults: &[Fault]) -> Self {
        self.faults = faults.to_vec();
        self
    }

    /// Whether it manages a control plane it can upgrade.
    pub fn has_control_plane(&self) -> bool {
        self.control_plane.is_some()
    }

    /// Upgrades (or downgrades) the control plane to `version`; done once it serves again.
    pub async fn upgrade_control_plane(&self, version: &str) -> Result<(), Error> {
        let control_plane = self.control_plane.clone().ok_or(Error::NoControlPlane)?;
        let outage = self
            .faults
            .contains(&Fault::LbOutageDuringControlPlaneUpgrade);
        if outage {
            {
                let mut cloud = self.lock();
                cloud.backends_lost = true;
                for balancer in cloud.load_balancers.values_mut() {
                    balancer.healthy_nodes.clear();
                }
            }
            self.forward().await;
        }
        let upgraded = control_plane
            .upgrade(version)
            .await
            .map_err(Error::ControlPlane);
        if outage {
            // The health checks find the backends again.
            self.lock().backends_lost = false;
            self.forward().await;
        }
        upgraded
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Creates and boots the instance of node `number`.
    pub fn create_instance(&self, number: u8) -> Instance {
        let name = format!("node-{number}");
        let instance = Instance {
            provider_id: format!("genplane://{name}"),
            address: self.plan.node_ip(number),
            instance_type: "genplane.small".to_owned(),
            zone: format!("zone-{}", (number - 1) % 3),
            state: InstanceState::Running,
            boots: 1,
            kubelet_version: crate::kubelet::KUBELET_VERSION.to_owned(),
            name: name.clone(),
        };
        self.lock().instances.insert(name.clone(), instance.clone());
        self.machines.power_on(&name, &instance.kubelet_version);
        instance
    }

    /// Every instance.
    pub fn instances(&self) -> Vec<Instance> {
        self.lock().instances.values().cloned().collect()
    }

    /// The instance `name`.
    pub fn instance(&self, name: &str) -> Result<Instance, Error> {
        self.lock()
            .instances
            .get(name)
            .cloned()
            .ok_or_else(|| Error::InstanceNotFound(name.to_owned()))
    }

    /// Sets the instance's state; the state it was in and the node software it runs.
    fn set_state(
        &self,
        name: &str,
        state: InstanceState,
    ) -> Result<(InstanceState, String), Error> {
        let mut cloud = self.lock();
        let instance = cloud
            .instances
            .get_mut(name)
            .ok_or_else(|| Error::InstanceNotFound(name.to_owned()))?;
        let was = instance.state;
        instance.state = state;
        if state == InstanceState::Running && was == InstanceState::Stopped {
            instance.boots += 1;
        }
        Ok((was, instance.kubelet_version.clone()))
    }

    /// Shuts the instance down.
    pub fn stop_instance(&self, name: &str) -> Result<(), Error> {
        if self.set_state(name, InstanceState::Stopped)?.0 == InstanceState::Running {
            self.machines.power_off(name);
        }
        Ok(())
    }

    /// Boots a stopped instance.
    pub fn start_instance(&self, name: &str) -> Result<(), Error> {
        let (was, version) = self.set_state(name, InstanceState::Running)?;
        if was == InstanceState::Stopped {
            self.machines.power_on(name, &version);
        }
        Ok(())
    }

    /// Stops and boots the instance again.
    pub fn reboot_instance(&self, name: &str) -> Result<(), Error> {
        self.stop_instance(name)?;
        self.start_instance(name)
    }

    /// Upgrades (or downgrades) the node software of every instance to `version` (a
    /// Kubernetes version, `v1.34.0`), one instance at a time: each running one is shut
    /// down gracefully (its kubelet reports the node not Ready, "node is shutting down"),
    /// re-imaged and booted again (its node comes back reporting `version`, its pods
    /// restarted); a stopped one boots with `version` when it is started.
    pub async fn upgrade_nodes(&self, version: &str) -> Result<(), Error> {
        if !is_kubernetes_version(version) {
            return Err(Error::Version(version.to_owned()));
        }
        let names: Vec<String> = self.lock().instances.keys().cloned().collect();
        for name in names {
            let was = {
                let mut cloud = self.lock();
                let Some(instance) = cloud.instances.get_mut(&name) else {
                    continue; // deleted meanwhile
                };
                instance.kubelet_version = version.to_owned();
                instance.state
            };
            if was == InstanceState::Running {
                self.set_state(&name, InstanceState::Stopped)?;
                self.machines.shut_down(&name).await;
                self.start_instance(&name)?;
            }
        }
        Ok(())
    }

    /// Deletes the instance: its machine stops for good.
    pub fn delete_instance(&self, name: &str) -> Result<(), Error> {
        let removed = self
            .lock()
            .instances
            .remove(name)
            .ok_or_else(|| Error::InstanceNotFound(name.to_owned()))?;
        if removed.state == InstanceState::Running {
            self.machines.power_off(name);
        }
        Ok(())
    }

    /// Every load balancer.
    pub fn load_balancers(&self) -> Vec<LoadBalancer> {
        self.lock().load_balancers.values().cloned().collect()
    }

    /// The load balancer `name`.
    pub fn load_balancer(&self, name: &str) -> Result<LoadBalancer, Error> {
        self.lock()
            .load_balancers
            .get(name)
            .cloned()
            .ok_or_else(|| Error::LoadBalancerNotFound(name.to_owned()))
    }

    /// Makes the load balancer `name` what `spec` says (creating it, with a new address,
    /// when there is none); returns it.
    pub async fn ensure_load_balancer(
        &self,
        name: &str,
        spec: LoadBalancerSpec,
    ) -> Result<LoadBalancer, Error> {
        for range in &spec.source_ranges {
            if net::parse_cidr(range.trim()).is_none() {
                return Err(Error::SourceRange(range.clone()));
            }
        }
        let balancer = {
            let mut cloud = self.lock();
            let address = match cloud.load_balancers.get(name) {
                Some(existing) => existing.address,
                None => {
                    let taken: Vec<Ipv4Addr> =
                        cloud.load_balancers.values().map(|b| b.address).collect();
                    let hosts: Vec<Ipv4Addr> = net::hosts(self.plan.load_balancer_cidr()).collect();
                    let free = (0..hosts.len())
                        .map(|step| hosts[(cloud.next_address + step) % hosts.len()])
                        .find(|ip| !taken.contains(ip))
                        .ok_or_else(|| {
                            Error::NoAddress(net::format_cidr(self.plan.load_balancer_cidr()))
                        })?;
                    cloud.next_address += 1;
                    free
                }
            };
            let healthy = cloud
                .load_balancers
                .get(name)
                .map(|b| b.healthy_nodes.clone())
                .unwrap_or_default();
            let balancer = LoadBalancer {
                name: name.to_owned(),
                address,
                spec,
                healthy_nodes: healthy,
            };
            cloud
                .load_balancers
                .insert(name.to_owned(), balancer.clone());
            balancer
        };
        self.forward().await;
        Ok(balancer)
    }

    /// Deletes the load balancer `name`; deleting one that does not exist is no error.
    pub async fn delete_load_balancer(&self, name: &str) {
        self.lock().load_balancers.remove(name);
        self.forward().await;
    }

    async fn forward(&self) {
        forward(&self.state, &self.forwarder).await;
    }
}

/// Whether `text` is a Kubernetes version: `v` and three numbers, with an optional
/// `-pre.release` or `+build` suffix of ASCII letters, digits, dots and dashes.
pub fn is_kubernetes_version(text: &str) -> bool {
    let Some(rest) = text.strip_prefix('v') else {
        return false;
    };
    let end = rest.find(['-', '+']).unwrap_or(rest.len());
    let (core, suffix) = rest.split_at(end);
    let numbers: Vec<&str> = core.split('.').collect();
    numbers.len() == 3
        && numbers
            .iter()
            .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        && suffix
            .bytes()
            .skip(1)
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
        && suffix.len() != 1
}

/// Points the forwarder at every load balancer's healthy nodes.
async fn forward(state: &Mutex<State>, forwarder: &tokio::sync::Mutex<Forwarder>) {
    let mut forwarder = forwarder.lock().await;
    let table = {
        let cloud = state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        table(&cloud)
    };
    forwarder.set(table).await;
}

fn table(cloud: &State) -> BTreeMap<Key, Served> {
    let mut table = BTreeMap::new();
    for balancer in cloud.load_balancers.values() {
        let sources: Vec<(Ipv4Addr, u8)> = balancer
            .spec
            .source_ranges
            .iter()
            .filter_map(|r| net::parse_cidr(r.trim()))
            .collect();
        for port in &balancer.spec.ports {
            let pods = balancer
                .spec
                .pods
                .iter()
                .filter(|p| p.port == port.port && p.protocol == port.protocol)
                .map(|p| Backend {
                    address: p.address,
                    node: None,
                    ready: true,
                    serving: true,
                    terminating: false,
                });
            let nodes = balancer
                .spec
                .nodes
                .iter()
                .filter_map(|node| cloud.instances.get(node))
                .map(|instance| {
                    let healthy = balancer.healthy_nodes.contains(&instance.name);
                    Backend {
                        address: SocketAddr::new(IpAddr::V4(instance.address), port.node_port),
                        node: Some(instance.name.clone()),
                        ready: healthy,
                        serving: healthy,
                        terminating: false,
                    }
                });
            let backends = if cloud.backends_lost {
                Vec::new()
            } else if port.node_port == 0 {
                pods.collect()
            } else {
                nodes.collect()
            };
            table.insert(
                (
                    SocketAddr::new(IpAddr::V4(balancer.address), port.port),
                    port.protocol,
                ),
                Served::Forward(Route {
                    service: (String::new(), balancer.name.clone()),
                    backends,
                    local_to: None,
                    masquerade: None,
                    affinity: balancer.spec.affinity_seconds.map(Duration::from_secs),
                    sources: sources.clone(),
                    client_local: None,
                }),
            );
        }
    }
    table
}

/// Whether `node` passes `balancer`'s health check.
async fn healthy(address: Ipv4Addr, spec: &LoadBalancerSpec) -> bool {
    let probe = async {
        if let Some(port) = spec.health_check_node_port {
            let Ok(mut stream) = tokio::net::TcpStream::connect((address, port)).await else {
                return false;
            };
            use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
            if stream
                .write_all(b"GET /healthz HTTP/1.1\r\nHost: lb\r\nConnection: close\r\n\r\n")
                .await
                .is_err()
            {
                return false;
            }
            let mut answer = Vec::new();
            let _ = stream.read_to_end(&mut answer).await;
            return answer.starts_with(b"HTTP/1.1 200");
        }
        match spec.ports.iter().find(|p| p.protocol == Protocol::Tcp) {
            Some(port) => tokio::net::TcpStream::connect((address, port.node_port))
                .await
                .is_ok(),
            None => true,
        }
    };
    tokio::time::timeout(Duration::from_secs(2), probe)
        .await
        .unwrap_or(false)
}

/// Checks every load balancer's nodes every [`HEALTH_CHECK_PERIOD`] (all at once, each
/// probe bounded by its own timeout) and forwards to the healthy ones.
async fn check_health(state: Arc<Mutex<State>>, forwarder: Arc<tokio::sync::Mutex<Forwarder>>) {
    let mut ticks = tokio::time::interval(HEALTH_CHECK_PERIOD);
    loop {
        ticks.tick().await;
        let probes: Vec<(String, String, Ipv4Addr, LoadBalancerSpec)> = {
            let cloud = state
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            cloud
                .load_balancers
                .values()
                .flat_map(|b| {
                    b.spec.nodes.iter().filter_map(|node| {
                        let instance = cloud.instances.get(node)?;
                        Some((
                            b.name.clone(),
                            node.clone(),
                            instance.address,
                            b.spec.clone(),
                        ))
                    })
                })
                .collect()
        };
        // Each node of each load balancer is probed at once, as a cloud's health checker
        // probes its backends independently: one slow answer does not delay the others.
        let checked = futures::future::join_all(probes.into_iter().map(
            |(balancer, node, address, spec)| async move {
                let began = std::time::Instant::now();
                let healthy = healthy(address, &spec).await;
                if !healthy {
                    tracing::debug!(%balancer, %node, took = ?began.elapsed(), "a node failed the health check");
                }
                (balancer, node, healthy)
            },
        ))
        .await;
        let mut results: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (balancer, node, healthy) in checked {
            let entry = results.entry(balancer).or_default();
            if healthy {
                entry.push(node);
            }
        }
        let changed = {
            let mut cloud = state
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let mut changed = false;
            let lost = cloud.backends_lost;
            for balancer in cloud.load_balancers.values_mut() {
                let now = results.remove(&balancer.name).unwrap_or_default();
                let now = if lost { Vec::new() } else { now };
                if balancer.healthy_nodes != now {
                    balancer.healthy_nodes = now;
                    changed = true;
                }
            }
            changed
        };
        if changed {
            forward(&state, &forwarder).await;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn kubernetes_versions_are_recognized() {
        for good in [
            "v1.34.0",
            "v1.33.10",
            "v1.35.0-alpha.1",
            "v1.34.0+genplane.0.1.0",
        ] {
            assert!(is_kubernetes_version(good), "{good}");
        }
        for bad in [
            "1.34.0", "v1.34", "v1..0", "v1.34.0-", "v1.34.0 ", "latest", "",
        ] {
            assert!(!is_kubernetes_version(bad), "{bad}");
        }
    }

    #[test]
    fn a_port_without_node_port_forwards_to_the_pods() {
        let mut state = State::default();
        let spec = LoadBalancerSpec {
            ports: vec![
                LoadBalancerPort {
                    protocol: Protocol::Tcp,
                    port: 80,
                    node_port: 0,
                },
                LoadBalancerPort {
                    protocol: Protocol::Tcp,
                    port: 81,
                    node_port: 30001,
                },
            ],
            pods: vec![PodTarget {
                port: 80,
                protocol: Protocol::Tcp,
                address: "127.3.1.5:8080".parse().unwrap(),
            }],
            ..LoadBalancerSpec::default()
        };
        state.load_balancers.insert(
            "lb".into(),
            LoadBalancer {
                name: "lb".into(),
                address: Ipv4Addr::new(127, 112, 0, 1),
                spec,
                healthy_nodes: Vec::new(),
            },
        );
        let table = table(&state);
        let route = |port: u16| match &table[&(
            SocketAddr::new([127, 112, 0, 1].into(), port),
            Protocol::Tcp,
        )] {
            Served::Forward(route) => route.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(route(80).candidates(), ["127.3.1.5:8080".parse().unwrap()]);
        // A port with a node port goes to nodes only (none here).
        assert!(route(81).candidates().is_empty());
    }
}
