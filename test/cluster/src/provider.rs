//! The fake cloud as a `genplane ccm-e2e` provider ([`genplane_cloudprovider::Provider`]),
//! over the cloud's HTTP API ([`crate::cloud::api`]), so that it works from another process:
//! in-process in the runner ([`FakeCloudProvider`]), or as the exec plugin
//! `genplane-testcluster-provider`, which answers each request with this same provider
//! ([`genplane_cloudprovider::protocol::serve`]). Its configuration (`--provider-config`) is
//! `{"cloud": "http://127.0.0.1:PORT"}`, the address the cluster prints.
//!
//! It declares what the fake cloud does: node deletion, stop and reboot; TCP and UDP load
//! balancers with session affinity, source ranges and the health-check node port of
//! `externalTrafficPolicy: Local`; describing them; probes (sent from the plugin's machine,
//! which is the cluster's); node upgrades and downgrades (the cloud re-images its instances
//! with the new kubelet version) and control-plane upgrades and downgrades (the cluster
//! restarts its API server as another genplane version: `v1.33.0+genplane.<version>`, the
//! only versions it can report), during which its nodes and load balancers keep serving
//! (unless `--cloud-fault` says otherwise).

use std::net::SocketAddr;

use genplane_cloudprovider::{
    Call, Capabilities, Capability, Error, LoadBalancerDescription, LoadBalancerPort, NodeRef,
    Probe, ProbeAnswer, Provider, ServiceRef,
};
use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::ccm::load_balancer_name;
use crate::cloud::LoadBalancer;

/// What the fake cloud declares.
pub const CAPABILITIES: [Capability; 16] = [
    Capability::NodeDeletion,
    Capability::NodeStop,
    Capability::NodeReboot,
    Capability::LoadBalancer,
    Capability::LoadBalancerUdp,
    Capability::LoadBalancerToPods,
    Capability::SessionAffinity,
    Capability::SourceRanges,
    Capability::ExternalIps,
    Capability::ExternalTrafficPolicyLocal,
    Capability::DescribeLoadBalancer,
    Capability::TrafficProbe,
    Capability::PodNetwork,
    Capability::NodeUpgrade,
    Capability::ControlPlaneUpgrade,
    Capability::DataPlaneSurvivesControlPlaneUpgrade,
];

/// The fake cloud's provider.
#[derive(Clone, Debug)]
pub struct FakeCloudProvider {
    cloud: SocketAddr,
}

impl FakeCloudProvider {
    /// The provider of the cloud whose API is at `cloud` (`127.0.0.1:PORT`).
    pub fn new(cloud: SocketAddr) -> Self {
        Self { cloud }
    }

    /// The provider a configuration names: `{"cloud": "http://127.0.0.1:PORT"}`.
    pub fn from_config(config: Option<&Value>) -> Result<Self, Error> {
        let url = config
            .and_then(|c| c.get("cloud"))
            .and_then(Value::as_str)
            .ok_or_else(|| {
                Error::Config(
                    "the fake cloud's provider needs {\"cloud\": \"http://127.0.0.1:PORT\"}"
                        .to_owned(),
                )
            })?;
        let address = url
            .strip_prefix("http://")
            .unwrap_or(url)
            .trim_end_matches('/')
            .parse()
            .map_err(|e| Error::Config(format!("cloud {url:?}: {e}")))?;
        Ok(Self::new(address))
    }

    /// `method path` against the cloud's API: the status and the JSON body.
    async fn request(&self, method: &str, path: &str) -> Result<(u16, Value), Error> {
        let failed =
            |e: std::io::Error| Error::Failed(format!("the fake cloud at {}: {e}", self.cloud));
        let mut stream = tokio::net::TcpStream::connect(self.cloud)
            .await
            .map_err(failed)?;
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: cloud\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        stream.write_all(head.as_bytes()).await.map_err(failed)?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.map_err(failed)?;
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| Error::Failed(format!("the fake cloud answered {head:?}")))?;
        Ok((status, serde_json::from_str(body).unwrap_or(Value::Null)))
    }

    /// Answers a 2xx answer with `()`, any other with the cloud's error message.
    fn done(status: u16, body: &Value) -> Result<(), Error> {
        match status {
            200..300 => Ok(()),
            _ => Err(Error::Failed(
                body["error"]
                    .as_str()
                    .map_or_else(|| format!("HTTP {status}"), str::to_owned),
            )),
        }
    }

    async fn instance_action(
        &self,
        node: &NodeRef,
        method: &str,
        action: &str,
    ) -> Result<(), Error> {
        let instance = node
            .provider_id
            .as_deref()
            .and_then(|id| id.strip_prefix("genplane://"))
            .unwrap_or(&node.name);
        let (status, body) = self
            .request(method, &format!("/instances/{instance}{action}"))
            .await?;
        Self::done(status, &body)
    }

    /// `POST /upgrades/<what>/<version>`: `what` is `nodes` or `controlplane`.
    async fn upgrade(&self, what: &str, version: &str) -> Result<(), Error> {
        // A version goes into the path as it is: refuse what would not stay one segment.
        if version.is_empty() || version.contains(['/', '?', '#', ' ', '%']) {
            return Err(Error::Failed(format!(
                "{version:?} is not a Kubernetes version such as v1.34.0"
            )));
        }
        let (status, body) = self
            .request("POST", &format!("/upgrades/{what}/{version}"))
            .await?;
        Self::done(status, &body)
    }

    async fn describe(
        &self,
        service: &ServiceRef,
    ) -> Result<Option<LoadBalancerDescription>, Error> {
        let name = load_balancer_name(&service.uid);
        let (status, body) = self
            .request("GET", &format!("/loadbalancers/{name}"))
            .await?;
        if status == 404 {
            return Ok(None);
        }
        let balancer: LoadBalancer = serde_json::from_value(body.clone())
            .map_err(|e| Error::Failed(format!("the fake cloud's load balancer {name}: {e}")))?;
        Ok(Some(LoadBalancerDescription {
            name,
            addresses: vec![balancer.address.to_string()],
            ports: balancer
                .spec
                .ports
                .iter()
                .map(|p| LoadBalancerPort {
                    protocol: p.protocol.name().to_owned(),
                    port: p.port,
                    node_port: Some(p.node_port),
                })
                .collect(),
            nodes: Some(balancer.spec.nodes.clone()),
            session_affinity: Some(balancer.spec.affinity_seconds.is_some()),
            details: body,
        }))
    }
}

impl Provider for FakeCloudProvider {
    fn capabilities(&self) -> Call<'_, Capabilities> {
        Box::pin(async { Ok(Capabilities::of(CAPABILITIES)) })
    }

    fn delete_instance<'a>(&'a self, node: &'a NodeRef) -> Call<'a, ()> {
        Box::pin(self.instance_action(node, "DELETE", ""))
    }

    fn stop_instance<'a>(&'a self, node: &'a NodeRef) -> Call<'a, ()> {
        Box::pin(self.instance_action(node, "POST", "/stop"))
    }

    fn start_instance<'a>(&'a self, node: &'a NodeRef) -> Call<'a, ()> {
        Box::pin(self.instance_action(node, "POST", "/start"))
    }

    fn reboot_instance<'a>(&'a self, node: &'a NodeRef) -> Call<'a, ()> {
        Box::pin(self.instance_action(node, "POST", "/reboot"))
    }

    fn describe_load_balancer<'a>(
        &'a self,
        service: &'a ServiceRef,
    ) -> Call<'a, Option<LoadBalancerDescription>> {
        Box::pin(self.describe(service))
    }

    fn probe<'a>(&'a self, probe: &'a Probe) -> Call<'a, ProbeAnswer> {
        Box::pin(async move { Ok(genplane_cloudprovider::probe::send(probe).await) })
    }

    fn upgrade_control_plane<'a>(&'a self, version: &'a str) -> Call<'a, ()> {
        Box::pin(self.upgrade("controlplane", version))
    }

    fn upgrade_nodes<'a>(&'a self, version: &'a str) -> Call<'a, ()> {
        Box::pin(self.upgrade("nodes", version))
    }
}
