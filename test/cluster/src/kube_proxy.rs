//! A kube-proxy simulator: Service traffic forwarded in user space, on loopback addresses.
//!
//! Where kube-proxy programs iptables or nftables rules, this one listens on the Service's
//! addresses and forwards each connection (TCP) or flow (UDP, by client address) to one of
//! the Service's endpoints, read from its EndpointSlices:
//!
//! - [`Scope::ClusterIps`] (one for the cluster): each Service's `clusterIP:port`, and its
//!   `externalIPs` with the Service's ports;
//! - [`Scope::Node`] (one per node, started and stopped with it): each `NodePort` and
//!   `LoadBalancer` Service's `nodeIP:nodePort`, and, for `externalTrafficPolicy: Local`,
//!   its `healthCheckNodePort`.
//!
//! Which endpoint, as kube-proxy chooses (KEP-1669 included): the ready ones; when there are
//! none, those still serving while they terminate. With `externalTrafficPolicy: Local` a
//! node port forwards only to endpoints on its own node, and the pod sees the client's own
//! address; with `Cluster` it sees the node's (kube-proxy masquerades). A ClusterIP forwards
//! from the client's address; with `internalTrafficPolicy: Local` only to endpoints on the
//! client's node (the node whose address or pod range holds the client's address, as the
//! [`Plan`](crate::net::Plan) says; a client on no node reaches none). Among the candidates the choice is round-robin; with
//! `sessionAffinity: ClientIP` a client keeps its endpoint for `timeoutSeconds` after its
//! last connection while that endpoint stays a candidate. With no candidate a TCP connection
//! is closed at once and a UDP datagram dropped.
//!
//! The health-check node port answers any HTTP request as kube-proxy's service health
//! server does: JSON naming the Service with `localEndpoints` (its ready endpoints on this
//! node) and `serviceProxyHealthy`, 200 when there is a local endpoint and 503 when there is
//! none, with `X-Load-Balancing-Endpoint-Weight`.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::Api;
use kube::runtime::watcher;
use kube::{Client, ResourceExt as _};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpSocket, TcpStream, UdpSocket};
use tokio::sync::Notify;

use crate::watch::AbortOnDrop;

/// How long a UDP flow lives without a datagram either way.
pub const UDP_FLOW_IDLE: Duration = Duration::from_secs(30);
/// The label naming an EndpointSlice's Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// What one proxy serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Every Service's ClusterIP (and external IPs).
    ClusterIps {
        /// The cluster's addresses: which node a client is on.
        plan: crate::net::Plan,
    },
    /// The node ports and health-check node ports of one node.
    Node {
        /// The node's name.
        name: String,
        /// Its address.
        ip: Ipv4Addr,
    },
}

/// A transport protocol of a Service port.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "UPPERCASE")]
pub enum Protocol {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
}

impl Protocol {
    /// The protocol a Service port names (`TCP` when unset); `None` for SCTP.
    pub fn of(name: Option<&str>) -> Option<Self> {
        match name.unwrap_or("TCP") {
            "TCP" => Some(Self::Tcp),
            "UDP" => Some(Self::Udp),
            _ => None,
        }
    }

    /// Its name in a Service port: `TCP` or `UDP`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Tcp => "TCP",
            Self::Udp => "UDP",
        }
    }
}

/// One endpoint of a Service port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backend {
    /// The pod's `ip:port`.
    pub address: SocketAddr,
    /// The node it runs on.
    pub node: Option<String>,
    /// `conditions.ready`.
    pub ready: bool,
    /// `conditions.serving`.
    pub serving: bool,
    /// `conditions.terminating`.
    pub terminating: bool,
}

/// Where one listening address forwards to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// The Service's namespace and name.
    pub service: (String, String),
    /// Its endpoints for this port.
    pub backends: Vec<Backend>,
    /// Only endpoints on this node (`externalTrafficPolicy: Local` at a node port).
    pub local_to: Option<String>,
    /// The address connections to the endpoint come from: the client's (`None`) or this one.
    pub masquerade: Option<IpAddr>,
    /// `sessionAffinity: ClientIP`'s timeout.
    pub affinity: Option<Duration>,
    /// The client addresses accepted (`loadBalancerSourceRanges`); empty: any.
    pub sources: Vec<(Ipv4Addr, u8)>,
    /// Only endpoints on the client's node (`internalTrafficPolicy: Local` at a ClusterIP):
    /// the plan that says which node a client is on.
    pub client_local: Option<crate::net::Plan>,
}

impl Route {
    /// The endpoints a new connection may go to (see the module docs).
    pub fn candidates(&self) -> Vec<SocketAddr> {
        let eligible: Vec<&Backend> = self
            .backends
            .iter()
            .filter(|b| self.local_to.is_none() || b.node == self.local_to)
            .collect();
        let ready: Vec<SocketAddr> = eligible
            .iter()
            .filter(|b| b.ready)
            .map(|b| b.address)
            .collect();
        if !ready.is_empty() {
            return ready;
        }
        eligible
            .iter()
            .filter(|b| b.serving && b.terminating)
            .map(|b| b.address)
            .collect()
    }
}

/// What one listening address does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Served {
    /// Forwards to a Service's endpoints.
    Forward(Route),
    /// Answers health checks of a Service with this many local endpoints.
    Health {
        /// The Service's namespace and name.
        service: (String, String),
        /// Its ready endpoints on this node.
        local_endpoints: usize,
    },
}

/// A listening address and protocol.
pub type Key = (SocketAddr, Protocol);

/// Everything a proxy of `scope` serves, given the cluster's Services and EndpointSlices.
pub fn table(
    scope: &Scope,
    services: &[Arc<Service>],
    slices: &[Arc<EndpointSlice>],
) -> BTreeMap<Key, Served> {
    let mut table = BTreeMap::new();
    for service in services {
        let Some(spec) = service.spec.as_ref() else {
            continue;
        };
        let namespace = service.namespace().unwrap_or_default();
        let name = service.name_any();
        let mine = slices_of(service, slices);
        let affinity = (spec.session_affinity.as_deref() == Some("ClientIP")).then(|| {
            let seconds = spec
                .session_affinity_config
                .as_ref()
                .and_then(|c| c.client_ip.as_ref())
                .and_then(|c| c.timeout_seconds)
                .unwrap_or(10800);
            Duration::from_secs(u64::try_from(seconds).unwrap_or(0))
        });
        let kind = spec.type_.as_deref().unwrap_or("ClusterIP");
        let local = spec.external_traffic_policy.as_deref() == Some("Local");
        let internal_local = spec.internal_traffic_policy.as_deref() == Some("Local");
        for port in spec.ports.iter().flatten() {
            let Some(protocol) = Protocol::of(port.protocol.as_deref()) else {
                continue;
            };
            let backends = backends(&mine, port.name.as_deref().unwrap_or(""), protocol);
            let route = |local_to: Option<String>, masquerade: Option<IpAddr>| Route {
                service: (namespace.clone(), name.clone()),
                backends: backends.clone(),
                local_to,
                masquerade,
                affinity,
                sources: Vec::new(),
                client_local: None,
            };
            let Ok(number) = u16::try_from(port.port) else {
                continue;
            };
            match scope {
                Scope::ClusterIps { plan } => {
                    let cluster_ip = spec
                        .cluster_ip
                        .as_deref()
                        .and_then(|ip| ip.parse::<IpAddr>().ok());
                    if let Some(ip) = cluster_ip {
                        let mut internal = route(None, None);
                        internal.client_local = internal_local.then_some(*plan);
                        table.insert(
                            (SocketAddr::new(ip, number), protocol),
                            Served::Forward(internal),
                        );
                    }
                    // External IPs are external traffic: externalTrafficPolicy applies.
                    let external = spec.external_ips.iter().flatten();
                    for ip in external.filter_map(|ip| ip.parse::<IpAddr>().ok()) {
                        if cluster_ip.is_some() {
                            table.insert(
                                (SocketAddr::new(ip, number), protocol),
                                Served::Forward(route(None, None)),
                            );
                        }
                    }
                }
                Scope::Node { name: node, ip } => {
                    let node_port = port.node_port.and_then(|p| u16::try_from(p).ok());
                    if let Some(node_port) =
                        node_port.filter(|_| matches!(kind, "NodePort" | "LoadBalancer"))
                    {
                        let served = if local {
                            route(Some(node.clone()), None)
                        } else {
                            route(None, Some(IpAddr::V4(*ip)))
                        };
                        table.insert(
                            (SocketAddr::new(IpAddr::V4(*ip), node_port), protocol),
                            Served::Forward(served),
                        );
                    }
                }
            }
        }
        if let Scope::Node { name: node, ip } = scope
            && kind == "LoadBalancer"
            && local
            && let Some(port) = spec
                .health_check_node_port
                .and_then(|p| u16::try_from(p).ok())
        {
            let local_endpoints = mine
                .iter()
                .flat_map(|s| s.endpoints.iter())
                .filter(|e| e.node_name.as_ref() == Some(node))
                .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
                .map(|e| e.addresses.len())
                .sum();
            table.insert(
                (SocketAddr::new(IpAddr::V4(*ip), port), Protocol::Tcp),
                Served::Health {
                    service: (namespace.clone(), name.clone()),
                    local_endpoints,
                },
            );
        }
    }
    table
}

/// The EndpointSlices of `service` among `slices`.
pub fn slices_of<'a>(
    service: &Service,
    slices: &'a [Arc<EndpointSlice>],
) -> Vec<&'a Arc<EndpointSlice>> {
    let namespace = service.namespace();
    let name = service.name_any();
    slices
        .iter()
        .filter(|s| s.namespace() == namespace)
        .filter(|s| s.labels().get(SERVICE_NAME_LABEL) == Some(&name))
        .collect()
}

/// The endpoints of the slice port named `port_name` with `protocol` in `slices` (a
/// Service's, [`slices_of`]).
pub fn backends(
    slices: &[&Arc<EndpointSlice>],
    port_name: &str,
    protocol: Protocol,
) -> Vec<Backend> {
    let mut found = Vec::new();
    for slice in slices {
        let Some(port) = slice.ports.iter().flatten().find(|p| {
            p.name.as_deref().unwrap_or("") == port_name
                && Protocol::of(p.protocol.as_deref()) == Some(protocol)
        }) else {
            continue;
        };
        let Some(number) = port.port.and_then(|p| u16::try_from(p).ok()) else {
            continue;
        };
        for endpoint in &slice.endpoints {
            let conditions = endpoint.conditions.clone().unwrap_or_default();
            for address in &endpoint.addresses {
                let Ok(ip) = address.parse::<IpAddr>() else {
                    continue;
                };
                found.push(Backend {
                    address: SocketAddr::new(ip, number),
                    node: endpoint.node_name.clone(),
                    ready: conditions.ready.unwrap_or(true),
                    serving: conditions
                        .serving
                        .unwrap_or(conditions.ready.unwrap_or(true)),
                    terminating: conditions.terminating.unwrap_or(false),
                });
            }
        }
    }
    found
}

/// What the listeners read: the current table, affinities and the round-robin counter.
#[derive(Default)]
struct Shared {
    table: RwLock<BTreeMap<Key, Served>>,
    affinity: Mutex<HashMap<(Key, IpAddr), (SocketAddr, Instant)>>,
    next: AtomicUsize,
}

impl Shared {
    fn route(&self, key: &Key) -> Option<Route> {
        let table = self
            .table
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match table.get(key) {
            Some(Served::Forward(route)) => Some(route.clone()),
            _ => None,
        }
    }

    /// The endpoint for a new connection from `client` to `key`.
    fn choose(&self, key: &Key, client: IpAddr) -> Option<(SocketAddr, Option<IpAddr>)> {
        let mut route = self.route(key)?;
        if let Some(plan) = route.client_local {
            let node = match client {
                IpAddr::V4(ip) => plan.node_of(ip),
                IpAddr::V6(_) => None,
            };
            route.local_to = Some(node.map(|n| format!("node-{n}")).unwrap_or_default());
        }
        let allowed = route.sources.is_empty()
            || matches!(client, IpAddr::V4(ip) if route.sources.iter().any(|cidr| crate::net::contains(*cidr, ip)));
        if !allowed {
            return None;
        }
        let candidates = route.candidates();
        if candidates.is_empty() {
            return None;
        }
        let now = Instant::now();
        let mut affinity = self
            .affinity
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let chosen = match (route.affinity, affinity.get(&(*key, client))) {
            (Some(timeout), Some((backend, last)))
                if now.duration_since(*last) <= timeout && candidates.contains(backend) =>
            {
                *backend
            }
            _ => candidates[self.next.fetch_add(1, Ordering::Relaxed) % candidates.len()],
        };
        if route.affinity.is_some() {
            affinity.insert((*key, client), (chosen, now));
        }
        Some((chosen, route.masquerade))
    }
}

/// A socket's local address `source` (port 0), so that the pod sees that address.
fn bind_source(socket: &TcpSocket, source: IpAddr) {
    if let Err(error) = socket.bind(SocketAddr::new(source, 0)) {
        tracing::debug!(%error, %source, "binding a proxied connection's source");
    }
}

async fn forward_tcp(shared: Arc<Shared>, key: Key, mut client: TcpStream, peer: SocketAddr) {
    let Some((backend, masquerade)) = shared.choose(&key, peer.ip()) else {
        tracing::debug!(address = %key.0, %peer, "no endpoint to forward to: closing the connection");
        return; // no endpoint: the connection is closed
    };
    let Ok(socket) = TcpSocket::new_v4() else {
        return;
    };
    bind_source(&socket, masquerade.unwrap_or(peer.ip()));
    match socket.connect(backend).await {
        Ok(mut upstream) => {
            let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
        }
        Err(error) => tracing::debug!(%error, %backend, "connecting to an endpoint"),
    }
}

async fn serve_tcp(shared: Arc<Shared>, key: Key, listener: TcpListener) {
    loop {
        match listener.accept().await {
            Ok((client, peer)) => {
                tokio::spawn(forward_tcp(shared.clone(), key, client, peer));
            }
            Err(error) => tracing::debug!(%error, "accepting"),
        }
    }
}

async fn serve_udp(shared: Arc<Shared>, key: Key, socket: UdpSocket) {
    let socket = Arc::new(socket);
    let flows: Arc<Mutex<HashMap<SocketAddr, Arc<UdpSocket>>>> = Arc::default();
    // The flows' reply tasks hold the socket too: they end with this task, so that the
    // address is free once it is given up.
    let mut replies = tokio::task::JoinSet::new();
    let mut buffer = vec![0u8; 65536];
    loop {
        while replies.try_join_next().is_some() {}
        let Ok((length, client)) = socket.recv_from(&mut buffer).await else {
            continue;
        };
        let existing = flows
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&client)
            .cloned();
        let upstream = match existing {
            Some(upstream) => upstream,
            None => {
                let Some((backend, masquerade)) = shared.choose(&key, client.ip()) else {
                    continue;
                };
                let source = SocketAddr::new(masquerade.unwrap_or(client.ip()), 0);
                let upstream = match UdpSocket::bind(source).await {
                    Ok(upstream) => upstream,
                    Err(_) => {
                        match UdpSocket::bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0))
                            .await
                        {
                            Ok(upstream) => upstream,
                            Err(_) => continue,
                        }
                    }
                };
                if upstream.connect(backend).await.is_err() {
                    continue;
                }
                let upstream = Arc::new(upstream);
                flows
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .insert(client, upstream.clone());
                replies.spawn(reply_udp(
                    socket.clone(),
                    upstream.clone(),
                    client,
                    flows.clone(),
                ));
                upstream
            }
        };
        let _ = upstream.send(&buffer[..length]).await;
    }
}

/// Sends what the endpoint answers back to `client`, until the flow is idle.
async fn reply_udp(
    socket: Arc<UdpSocket>,
    upstream: Arc<UdpSocket>,
    client: SocketAddr,
    flows: Arc<Mutex<HashMap<SocketAddr, Arc<UdpSocket>>>>,
) {
    let mut buffer = vec![0u8; 65536];
    while let Ok(Ok(length)) = tokio::time::timeout(UDP_FLOW_IDLE, upstream.recv(&mut buffer)).await
    {
        let _ = socket.send_to(&buffer[..length], client).await;
    }
    flows
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .remove(&client);
}

/// The answer of the health-check node port of `service` with `local_endpoints`.
pub fn health_answer(service: &(String, String), local_endpoints: usize) -> String {
    let body = format!(
        "{{\n\t\"service\": {{\n\t\t\"namespace\": {},\n\t\t\"name\": {}\n\t}},\n\t\"localEndpoints\": {local_endpoints},\n\t\"serviceProxyHealthy\": true\n}}",
        serde_json::Value::from(service.0.as_str()),
        serde_json::Value::from(service.1.as_str()),
    );
    let status = if local_endpoints > 0 {
        "200 OK"
    } else {
        "503 Service Unavailable"
    };
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nX-Content-Type-Options: nosniff\r\nX-Load-Balancing-Endpoint-Weight: {local_endpoints}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

async fn serve_health(shared: Arc<Shared>, key: Key, listener: TcpListener) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            // Read the request's head (bounded), then answer with the current count.
            let mut head = Vec::new();
            let mut buffer = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16384 {
                match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buffer)).await {
                    Ok(Ok(n)) if n > 0 => head.extend_from_slice(&buffer[..n]),
                    _ => return,
                }
            }
            let answer = {
                let table = shared
                    .table
                    .read()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                match table.get(&key) {
                    Some(Served::Health {
                        service,
                        local_endpoints,
                    }) => health_answer(service, *local_endpoints),
                    _ => return,
                }
            };
            let _ = stream.write_all(answer.as_bytes()).await;
            let _ = stream.shutdown().await;
        });
    }
}

/// Starts serving `key` as `served` says; `None` when the address cannot be bound.
async fn listen(shared: &Arc<Shared>, key: Key, served: &Served) -> Option<AbortOnDrop> {
    let (address, protocol) = key;
    let shared = shared.clone();
    let bound = match (protocol, served) {
        (Protocol::Tcp, Served::Forward(_)) => TcpListener::bind(address)
            .await
            .map(|l| tokio::spawn(serve_tcp(shared, key, l))),
        (Protocol::Udp, Served::Forward(_)) => UdpSocket::bind(address)
            .await
            .map(|s| tokio::spawn(serve_udp(shared, key, s))),
        (_, Served::Health { .. }) => TcpListener::bind(address)
            .await
            .map(|l| tokio::spawn(serve_health(shared, key, l))),
    };
    match bound {
        Ok(task) => Some(AbortOnDrop(task)),
        Err(error) => {
            tracing::warn!(%error, %address, ?protocol, "kube-proxy could not listen");
            None
        }
    }
}

/// Listening addresses and where they forward, changed as a whole with [`Forwarder::set`]:
/// what kube-proxy's rules are to a node, and what the fake cloud's load balancers use too.
#[derive(Default)]
pub struct Forwarder {
    shared: Arc<Shared>,
    listeners: BTreeMap<Key, AbortOnDrop>,
}

impl std::fmt::Debug for Forwarder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forwarder")
            .field("listening", &self.listeners.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Forwarder {
    /// Serves `wanted` from now on: new addresses are listened on, gone ones closed, and
    /// every connection from now on follows the new routes.
    pub async fn set(&mut self, wanted: BTreeMap<Key, Served>) {
        // A listener closes when its aborted task is dropped, which the runtime does later:
        // wait for that, so that an address given up here can be listened on again at once
        // (a deleted Service's ClusterIP handed to the next Service). Otherwise the new bind
        // failed and nothing tried again until some other Service or EndpointSlice changed.
        let gone: Vec<Key> = self
            .listeners
            .keys()
            .filter(|key| !wanted.contains_key(*key))
            .copied()
            .collect();
        for key in gone {
            if let Some(mut task) = self.listeners.remove(&key) {
                task.0.abort();
                let _ = (&mut task.0).await;
            }
        }
        for (key, served) in &wanted {
            if !self.listeners.contains_key(key)
                && let Some(task) = listen(&self.shared, *key, served).await
            {
                self.listeners.insert(*key, task);
            }
        }
        *self
            .shared
            .table
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = wanted;
    }
}

/// Proxies for `scope` until the task is dropped, which closes every listener.
pub async fn run(client: Client, scope: Scope) {
    let changed = Arc::new(Notify::new());
    let (services, _services_watch) = crate::watch::reflect(
        Api::<Service>::all(client.clone()),
        watcher::Config::default(),
        changed.clone(),
    );
    let (slices, _slices_watch) = crate::watch::reflect(
        Api::<EndpointSlice>::all(client),
        watcher::Config::default(),
        changed.clone(),
    );
    let mut forwarder = Forwarder::default();
    loop {
        changed.notified().await;
        forwarder
            .set(table(&scope, &services.state(), &slices.state()))
            .await;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn backend(ip: &str, node: &str, ready: bool, terminating: bool) -> Backend {
        Backend {
            address: SocketAddr::new(ip.parse().unwrap(), 8080),
            node: Some(node.to_owned()),
            ready,
            serving: ready || terminating,
            terminating,
        }
    }

    #[test]
    fn candidates_are_ready_local_then_terminating() {
        let mut route = Route {
            service: ("ns".into(), "svc".into()),
            backends: vec![
                backend("127.1.1.2", "node-1", true, false),
                backend("127.1.2.2", "node-2", false, true),
            ],
            local_to: None,
            masquerade: None,
            affinity: None,
            sources: Vec::new(),
            client_local: None,
        };
        assert_eq!(route.candidates(), [route.backends[0].address]);
        route.local_to = Some("node-2".into());
        assert_eq!(route.candidates(), [route.backends[1].address]);
        route.local_to = Some("node-3".into());
        assert!(route.candidates().is_empty());
    }

    #[test]
    fn internal_traffic_policy_local_keeps_a_client_on_its_node() {
        let plan = crate::net::Plan::new(3);
        let service: Service = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "svc", "namespace": "ns"},
            "spec": {"clusterIP": "127.99.0.7", "internalTrafficPolicy": "Local",
                     "externalIPs": ["127.250.0.1"],
                     "ports": [{"port": 80, "protocol": "TCP", "targetPort": 8080}]}}))
        .unwrap();
        let slice: EndpointSlice = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "svc-1", "namespace": "ns", "labels": {SERVICE_NAME_LABEL: "svc"}},
            "addressType": "IPv4",
            "endpoints": [
                {"addresses": ["127.7.1.5"], "nodeName": "node-1", "conditions": {"ready": true}},
                {"addresses": ["127.7.2.5"], "nodeName": "node-2", "conditions": {"ready": true}}],
            "ports": [{"name": "", "port": 8080, "protocol": "TCP"}]}))
        .unwrap();
        let table = table(
            &Scope::ClusterIps { plan },
            &[Arc::new(service)],
            &[Arc::new(slice)],
        );
        let shared = Shared::default();
        *shared.table.write().unwrap() = table;
        let key = ("127.99.0.7:80".parse().unwrap(), Protocol::Tcp);
        let chosen = |client: &str| shared.choose(&key, client.parse().unwrap()).map(|c| c.0);
        // A pod on node 2 (127.7.2.0/24), node 1's own address, a client on no node.
        assert_eq!(chosen("127.7.2.9"), Some("127.7.2.5:8080".parse().unwrap()));
        assert_eq!(chosen("127.6.1.1"), Some("127.7.1.5:8080".parse().unwrap()));
        assert_eq!(chosen("127.0.0.1"), None);
        // External IPs forward to every endpoint.
        let external = ("127.250.0.1:80".parse().unwrap(), Protocol::Tcp);
        assert!(
            shared
                .choose(&external, "127.0.0.1".parse().unwrap())
                .is_some()
        );
    }

    #[test]
    fn health_checks_answer_as_kube_proxy() {
        let ok = health_answer(&("default".into(), "web".into()), 2);
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(
            ok.contains("X-Load-Balancing-Endpoint-Weight: 2\r\n"),
            "{ok}"
        );
        let body: serde_json::Value =
            serde_json::from_str(ok.split("\r\n\r\n").nth(1).unwrap()).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"service": {"namespace": "default", "name": "web"},
                               "localEndpoints": 2, "serviceProxyHealthy": true})
        );
        assert!(
            health_answer(&("default".into(), "web".into()), 0)
                .starts_with("HTTP/1.1 503 Service Unavailable")
        );
    }

    #[tokio::test]
    async fn an_address_given_up_and_wanted_again_at_once_is_listened_on() {
        // Free ports on loopback (TCP and UDP), for the keys.
        let tcp = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let udp = std::net::UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let route = || Route {
            service: ("ns".into(), "svc".into()),
            backends: Vec::new(),
            local_to: None,
            masquerade: None,
            affinity: None,
            sources: Vec::new(),
            client_local: None,
        };
        let wanted = || {
            BTreeMap::from([
                ((tcp, Protocol::Tcp), Served::Forward(route())),
                ((udp, Protocol::Udp), Served::Forward(route())),
            ])
        };
        let mut forwarder = Forwarder::default();
        for _ in 0..3 {
            forwarder.set(wanted()).await;
            assert_eq!(forwarder.listeners.len(), 2, "{forwarder:?}");
            forwarder.set(BTreeMap::new()).await;
            assert!(forwarder.listeners.is_empty());
        }
        // A health-check port too.
        let health = (tcp, Protocol::Tcp);
        let served = || Served::Health {
            service: ("ns".into(), "svc".into()),
            local_endpoints: 1,
        };
        forwarder.set(BTreeMap::from([(health, served())])).await;
        forwarder.set(BTreeMap::new()).await;
        forwarder.set(BTreeMap::from([(health, served())])).await;
        assert!(forwarder.listeners.contains_key(&health), "{forwarder:?}");
    }
}
