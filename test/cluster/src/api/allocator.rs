//! A Service's ClusterIP and node ports, allocated from ranges every Service shares
//! (the [`Plan`]'s service CIDR, [`crate::net::NODE_PORTS`]), as kube-apiserver's Service
//! storage allocates them: it is the services resource's
//! [`Allocations`], so the generic store asks it just before a
//! Service is written and tells it when one has gone.
//!
//! - a Service of any type but `ExternalName` gets a ClusterIP: the one it asks for (422 when
//!   outside the range or taken), else the next free one; `None` (headless) gets none;
//! - a `NodePort` Service, and a `LoadBalancer` one unless `allocateLoadBalancerNodePorts` is
//!   false, gets a node port per port: the one asked for (422 when outside 30000-32767 or
//!   taken by another Service; ports of one Service with the same number and different
//!   protocols share it), else the next free one; a `LoadBalancer` Service with
//!   `externalTrafficPolicy: Local` gets a `healthCheckNodePort` the same way;
//! - an update keeps what the stored Service held and takes what it adds; once stored, what
//!   the old Service held and the new one does not is released (a type change from
//!   `NodePort` to `ClusterIP` gives its node ports back); a failed write gives back what it
//!   took; a deleted Service gives back everything.
//!
//! Free values are searched from where the last search ended, so a value just released is
//! not handed out again at once.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex, MutexGuard};

use genplane_apimachinery::errors::{ApiError, Status};
use genplane_apimachinery::schema::GroupKind;
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use genplane_registry::{Allocated, Allocations};
use serde_json::{Value, json};

use super::{items, str_at};
use crate::net::{self, NODE_PORTS, Plan};

/// One allocated value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Item {
    Ip(Ipv4Addr),
    Port(u16),
}

#[derive(Debug, Default)]
struct State {
    plan: Plan,
    taken: BTreeSet<Item>,
    next_ip: usize,
    next_port: u16,
}

/// The ClusterIPs and node ports of the cluster's Services.
#[derive(Clone, Debug, Default)]
pub struct ServiceAllocator {
    state: Arc<Mutex<State>>,
}

/// What a Service holds: its ClusterIP, node ports and health-check node port.
fn held(service: &Value) -> BTreeSet<Item> {
    let mut held = BTreeSet::new();
    if let Ok(ip) = str_at(service, "/spec/clusterIP").parse::<Ipv4Addr>() {
        held.insert(Item::Ip(ip));
    }
    for port in items(service, "/spec/ports") {
        if let Some(port) = node_port(port, "/nodePort") {
            held.insert(Item::Port(port));
        }
    }
    if let Some(port) = node_port(service, "/spec/healthCheckNodePort") {
        held.insert(Item::Port(port));
    }
    held
}

fn node_port(object: &Value, pointer: &str) -> Option<u16> {
    object
        .pointer(pointer)
        .and_then(Value::as_i64)
        .filter(|p| *p != 0)
        .and_then(|p| u16::try_from(p).ok())
}

impl ServiceAllocator {
    /// An allocator of the ClusterIPs of `plan`, with nothing taken.
    pub fn new(plan: Plan) -> Self {
        let allocator = Self::default();
        allocator.lock().plan = plan;
        allocator
    }

    /// Marks what the stored `services` hold as taken (before the server serves).
    pub fn seed<'a>(&self, services: impl IntoIterator<Item = &'a Value>) {
        let mut state = self.lock();
        for service in services {
            state.taken.extend(held(service));
        }
    }

    /// Whether `port` is taken by some Service.
    pub fn node_port_taken(&self, port: u16) -> bool {
        self.lock().taken.contains(&Item::Port(port))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves the sets consistent (each change is one
        // insert or remove), so a poisoned lock is still good.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl State {
    fn next_free_ip(&mut self) -> Option<Ipv4Addr> {
        let hosts: Vec<Ipv4Addr> = net::hosts(self.plan.service_cidr()).collect();
        for step in 0..hosts.len() {
            let index = (self.next_ip + step) % hosts.len();
            if !self.taken.contains(&Item::Ip(hosts[index])) {
                self.next_ip = index + 1;
                return Some(hosts[index]);
            }
        }
        None
    }

    fn next_free_port(&mut self) -> Option<u16> {
        let (first, last) = NODE_PORTS;
        let size = last - first + 1;
        for step in 0..size {
            let port = first + (self.next_port.saturating_sub(first) % size + step) % size;
            if !self.taken.contains(&Item::Port(port)) {
                self.next_port = port + 1;
                return Some(port);
            }
        }
        None
    }
}

/// What one write took, and what its old object held that the new one does not.
struct Claim {
    allocator: ServiceAllocator,
    taken: Vec<Item>,
    released_on_commit: Vec<Item>,
}

impl Allocated for Claim {
    fn commit(mut self: Box<Self>) {
        let mut state = self.allocator.lock();
        for item in &self.released_on_commit {
            state.taken.remove(item);
        }
        drop(state);
        self.taken.clear();
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if self.taken.is_empty() {
            return;
        }
        let mut state = self.allocator.lock();
        for item in &self.taken {
            state.taken.remove(item);
        }
    }
}

/// One allocation in progress: what the write took so far and its problems.
struct Allocation<'a> {
    state: MutexGuard<'a, State>,
    old: BTreeSet<Item>,
    taken: Vec<Item>,
    errors: ErrorList,
}

impl Allocation<'_> {
    /// Takes `item` unless the old object holds it or this write took it already; `false`
    /// when another Service holds it.
    fn claim(&mut self, item: Item) -> bool {
        if self.old.contains(&item) || self.taken.contains(&item) {
            return true;
        }
        if !self.state.taken.insert(item) {
            return false;
        }
        self.taken.push(item);
        true
    }

    fn cluster_ip(&mut self, service: &mut Value) {
        let path = Path::new("spec").child("clusterIPs");
        let ip = str_at(service, "/spec/clusterIP").to_owned();
        let ip = match ip.as_str() {
            "None" => return,
            "" => match self.state.next_free_ip() {
                Some(ip) => {
                    self.state.taken.insert(Item::Ip(ip));
                    self.taken.push(Item::Ip(ip));
                    ip
                }
                None => {
                    self.errors.push(Error::internal(
                        &path,
                        "failed to allocate a serviceIP: range is full",
                    ));
                    return;
                }
            },
            given => {
                let Ok(ip) = given.parse::<Ipv4Addr>() else {
                    return; // validation reported it
                };
                let problem = if !net::contains(self.state.plan.service_cidr(), ip) {
                    Some(format!(
                        "provided IP is not in the valid range. The range of valid IPs is {}",
                        net::format_cidr(self.state.plan.service_cidr())
                    ))
                } else if !self.claim(Item::Ip(ip)) {
                    Some("provided IP is already allocated".to_owned())
                } else {
                    None
                };
                if let Some(problem) = problem {
                    self.errors.push(Error::invalid(
                        &path,
                        json!([given]),
                        format!("failed to allocate IP {given}: {problem}"),
                    ));
                    return;
                }
                ip
            }
        };
        service["spec"]["clusterIP"] = json!(ip.to_string());
        service["spec"]["clusterIPs"] = json!([ip.to_string()]);
    }

    /// The node port at `pointer` of `object` (reported at `path`): the one given, or a free
    /// one when `wanted`.
    fn node_port(&mut self, object: &mut Value, pointer: &str, path: &Path, wanted: bool) {
        match node_port(object, pointer) {
            Some(port) => {
                let (first, last) = NODE_PORTS;
                let problem = if !(first..=last).contains(&port) {
                    Some(format!(
                        "provided port is not in the valid range. The range of valid ports is {first}-{last}"
                    ))
                } else if !self.claim(Item::Port(port)) {
                    Some("provided port is already allocated".to_owned())
                } else {
                    None
                };
                if let Some(problem) = problem {
                    self.errors.push(Error::invalid(path, port, problem));
                }
            }
            None if wanted => match self.state.next_free_port() {
                Some(port) => {
                    self.state.taken.insert(Item::Port(port));
                    self.taken.push(Item::Port(port));
                    if let Some(field) = pointer.rsplit('/').next()
                        && let Some(fields) = object
                            .pointer_mut(pointer.rsplit_once('/').map_or("", |(p, _)| p))
                            .and_then(Value::as_object_mut)
                    {
                        fields.insert(field.to_owned(), json!(port));
                    }
                }
                None => self.errors.push(Error::internal(
                    path,
                    "failed to allocate a nodePort: range is full",
                )),
            },
            None => {}
        }
    }
}

impl Allocations for ServiceAllocator {
    fn allocate(
        &self,
        new: &mut Value,
        old: Option<&Value>,
        dry_run: bool,
    ) -> Result<Option<Box<dyn Allocated>>, ApiError> {
        let old_held = old.map(held).unwrap_or_default();
        let mut allocation = Allocation {
            state: self.lock(),
            old: old_held.clone(),
            taken: Vec::new(),
            errors: ErrorList::new(),
        };
        let kind = str_at(new, "/spec/type").to_owned();
        if kind != "ExternalName" {
            allocation.cluster_ip(new);
        }
        let node_ports = kind == "NodePort"
            || (kind == "LoadBalancer"
                && new
                    .pointer("/spec/allocateLoadBalancerNodePorts")
                    .and_then(Value::as_bool)
                    .unwrap_or(true));
        let count = items(new, "/spec/ports").len();
        let mut by_number: Vec<(i64, u16)> = Vec::new();
        for index in 0..count {
            let pointer = format!("/spec/ports/{index}");
            let number = new
                .pointer(&format!("{pointer}/port"))
                .and_then(Value::as_i64)
                .unwrap_or(0);
            // Ports of one number and two protocols get one node port (upstream's
            // "same port, other protocol").
            let shared = by_number
                .iter()
                .find(|(n, _)| *n == number)
                .map(|(_, p)| *p);
            if let (Some(port), None, true) = (
                shared,
                node_port(new, &format!("{pointer}/nodePort")),
                node_ports,
            ) {
                new["spec"]["ports"][index]["nodePort"] = json!(port);
            }
            let path = Path::new("spec")
                .child("ports")
                .index(index)
                .child("nodePort");
            allocation.node_port(new, &format!("{pointer}/nodePort"), &path, node_ports);
            if let Some(port) = node_port(new, &format!("{pointer}/nodePort")) {
                by_number.push((number, port));
            }
        }
        let local = str_at(new, "/spec/externalTrafficPolicy") == "Local";
        if kind == "LoadBalancer" && local {
            let path = Path::new("spec").child("healthCheckNodePort");
            allocation.node_port(new, "/spec/healthCheckNodePort", &path, true);
        }
        let Allocation {
            state,
            taken,
            errors,
            ..
        } = allocation;
        drop(state);
        let claim = Claim {
            allocator: self.clone(),
            taken,
            released_on_commit: old_held.difference(&held(new)).copied().collect(),
        };
        if !errors.is_empty() {
            return Err(Status::invalid(
                &GroupKind::new("", "Service"),
                str_at(new, "/metadata/name"),
                &errors,
            )
            .into());
        }
        if dry_run {
            // Dropped: a dry run checks and fills in, but keeps nothing.
            return Ok(None);
        }
        Ok(Some(Box::new(claim)))
    }

    fn release(&self, object: &Value) {
        let mut state = self.lock();
        for item in held(object) {
            state.taken.remove(&item);
        }
    }
}
