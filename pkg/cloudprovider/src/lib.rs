//! The provider interface of `genplane ccm-e2e`, the conformance suite for external cloud
//! controller managers (CCMs).
//!
//! A CCM test needs a few things the Kubernetes API cannot do: delete, stop or reboot the
//! machine behind a Node; look at the load balancer the CCM made for a Service (and see that
//! it is gone); send traffic from outside the cluster. A cloud offers those through a
//! [`Provider`], and says which of them, and which behaviours of its load balancers, it has
//! through its [`Capabilities`]. Tests ask for capabilities and skip, with the reason, when
//! the cloud lacks one: never by the provider's name.
//!
//! A provider is either
//! - a Rust type implementing [`Provider`] (in-process), or
//! - an **exec plugin** ([`exec::ExecProvider`]): any program that reads one JSON
//!   [`protocol::Request`] on stdin and writes one JSON [`protocol::Answer`] on stdout, one
//!   process per call. The protocol is versioned ([`protocol::API_VERSION`]) and described by
//!   the JSON Schema in `pkg/cloudprovider/protocol.schema.json`; a Python example provider
//!   is `pkg/cloudprovider/examples/example-provider.py`. A plugin that crashes, hangs or
//!   answers garbage gives a clear [`Error`] for that call, never a panic.
//!
//! [`protocol::serve`] turns any Rust [`Provider`] into such a plugin (the test cluster's
//! fake-cloud plugin is one). [`probe`] sends a probe directly, from the machine it runs on.

pub mod exec;
pub mod probe;
pub mod protocol;

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a cloud can do and how its load balancers behave. Tests name the capabilities they
/// need; a test needing one the provider does not declare is skipped with that reason.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "PascalCase")]
pub enum Capability {
    /// [`Provider::delete_instance`] works, and the CCM deletes the Node of a deleted
    /// instance.
    NodeDeletion,
    /// [`Provider::stop_instance`] and [`Provider::start_instance`] work.
    NodeStop,
    /// [`Provider::reboot_instance`] works: the machine restarts and its node comes back.
    NodeReboot,
    /// `type: LoadBalancer` Services get a TCP load balancer reachable from where the
    /// tests (or [`Provider::probe`]) run.
    LoadBalancer,
    /// Load balancers forward UDP too.
    LoadBalancerUdp,
    /// Load balancers honour `sessionAffinity: ClientIP`.
    SessionAffinity,
    /// Load balancers honour `loadBalancerSourceRanges`.
    SourceRanges,
    /// Traffic to a Service's `externalIPs` reaches it.
    ExternalIps,
    /// Load balancers of `externalTrafficPolicy: Local` Services send traffic only to nodes
    /// with endpoints (they use the health-check node port), and node IPs are reachable
    /// from where probes run.
    ExternalTrafficPolicyLocal,
    /// [`Provider::describe_load_balancer`] works.
    DescribeLoadBalancer,
    /// [`Provider::probe`] works (otherwise the runner probes from its own machine).
    TrafficProbe,
    /// [`Provider::upgrade_control_plane`] works.
    ControlPlaneUpgrade,
    /// [`Provider::upgrade_nodes`] works.
    NodeUpgrade,
    /// Pod addresses are reachable from where probes run, so that a test can have an agnhost
    /// `netexec` pod send traffic from inside the cluster (its `/dial`), where upstream's
    /// tests run `curl` in an exec pod.
    PodNetwork,
    /// Load balancers reach a Service's pods without node ports
    /// (`allocateLoadBalancerNodePorts: false`), as those that address pods directly do.
    LoadBalancerToPods,
    /// A control-plane upgrade ([`Provider::upgrade_control_plane`]) leaves the data plane
    /// serving: nodes, pods and load balancers carry on while the control plane restarts,
    /// so a LoadBalancer Service answers every request throughout, as upstream's
    /// `ServiceUpgradeTest` checks during a master upgrade. Without it the upgrade tests
    /// check the Service before and after a control-plane upgrade only.
    DataPlaneSurvivesControlPlaneUpgrade,
}

impl Capability {
    /// Every capability, in order.
    pub const ALL: [Capability; 16] = [
        Capability::NodeDeletion,
        Capability::NodeStop,
        Capability::NodeReboot,
        Capability::LoadBalancer,
        Capability::LoadBalancerUdp,
        Capability::SessionAffinity,
        Capability::SourceRanges,
        Capability::ExternalIps,
        Capability::ExternalTrafficPolicyLocal,
        Capability::DescribeLoadBalancer,
        Capability::TrafficProbe,
        Capability::ControlPlaneUpgrade,
        Capability::NodeUpgrade,
        Capability::PodNetwork,
        Capability::LoadBalancerToPods,
        Capability::DataPlaneSurvivesControlPlaneUpgrade,
    ];

    /// Its name, as the protocol and `--list` spell it.
    pub fn name(self) -> &'static str {
        match self {
            Capability::NodeDeletion => "NodeDeletion",
            Capability::NodeStop => "NodeStop",
            Capability::NodeReboot => "NodeReboot",
            Capability::LoadBalancer => "LoadBalancer",
            Capability::LoadBalancerUdp => "LoadBalancerUdp",
            Capability::SessionAffinity => "SessionAffinity",
            Capability::SourceRanges => "SourceRanges",
            Capability::ExternalIps => "ExternalIps",
            Capability::ExternalTrafficPolicyLocal => "ExternalTrafficPolicyLocal",
            Capability::DescribeLoadBalancer => "DescribeLoadBalancer",
            Capability::TrafficProbe => "TrafficProbe",
            Capability::ControlPlaneUpgrade => "ControlPlaneUpgrade",
            Capability::NodeUpgrade => "NodeUpgrade",
            Capability::PodNetwork => "PodNetwork",
            Capability::LoadBalancerToPods => "LoadBalancerToPods",
            Capability::DataPlaneSurvivesControlPlaneUpgrade => {
                "DataPlaneSurvivesControlPlaneUpgrade"
            }
        }
    }
}

impl std::fmt::Display for Capability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The capabilities a provider declares.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Capabilities {
    /// What the cloud can do.
    pub capabilities: BTreeSet<Capability>,
}

impl Capabilities {
    /// These capabilities.
    pub fn of(capabilities: impl IntoIterator<Item = Capability>) -> Self {
        Self {
            capabilities: capabilities.into_iter().collect(),
        }
    }

    /// Whether `capability` is declared.
    pub fn has(&self, capability: Capability) -> bool {
        self.capabilities.contains(&capability)
    }

    /// The ones of `needed` not declared, in order.
    pub fn missing(&self, needed: &[Capability]) -> Vec<Capability> {
        let mut missing: Vec<Capability> =
            needed.iter().copied().filter(|c| !self.has(*c)).collect();
        missing.sort();
        missing.dedup();
        missing
    }
}

/// The Node whose machine an action is for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeRef {
    /// The Node's name.
    pub name: String,
    /// Its `spec.providerID`, when set.
    #[serde(
        default,
        rename = "providerID",
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<String>,
}

/// The Service whose load balancer is asked about.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its `metadata.uid` (upstream CCMs name load balancers after it).
    pub uid: String,
}

/// One port of a load balancer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LoadBalancerPort {
    /// `TCP` or `UDP`.
    pub protocol: String,
    /// The port clients connect to.
    pub port: u16,
    /// The node port it forwards to, if it forwards to node ports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_port: Option<u16>,
}

/// The cloud's description of the load balancer behind a Service.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LoadBalancerDescription {
    /// The cloud's name for it.
    pub name: String,
    /// Its addresses (IPs or host names).
    pub addresses: Vec<String>,
    /// Its ports.
    pub ports: Vec<LoadBalancerPort>,
    /// The nodes it forwards to, when the cloud says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<String>>,
    /// Whether it keeps a client on one backend, when the cloud says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_affinity: Option<bool>,
    /// Anything else the cloud wants to show (kept in failure dumps).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub details: serde_json::Value,
}

/// A probe sent from outside the cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Probe {
    /// What to send.
    pub kind: ProbeKind,
    /// The address (IP or host name).
    pub address: String,
    /// The port.
    pub port: u16,
    /// How long to wait for an answer, in milliseconds.
    pub timeout_ms: u64,
}

/// What a probe sends.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", tag = "protocol")]
pub enum ProbeKind {
    /// `GET path` over HTTP/1.1 (a new connection each time).
    Http {
        /// The path, e.g. `/hostname`.
        path: String,
    },
    /// One UDP datagram; the answer is the first datagram back.
    Udp {
        /// The datagram, e.g. `hostname`.
        message: String,
    },
}

/// What came back from a probe.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProbeAnswer {
    /// The HTTP status (HTTP probes that got an answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The body or datagram, when there was an answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// Why there was none (refused, reset, timed out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ProbeAnswer {
    /// The body of a successful answer (HTTP 2xx, or any UDP answer).
    pub fn ok_body(&self) -> Option<&str> {
        match self.status {
            Some(status) if !(200..300).contains(&status) => None,
            _ => self.body.as_deref(),
        }
    }
}

/// Why a provider call failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The provider does not do this (its capabilities should not claim it).
    #[error("the provider does not support {0}")]
    Unsupported(String),
    /// The provider tried and failed; its message.
    #[error("the provider failed: {0}")]
    Failed(String),
    /// The plugin program could not be started.
    #[error("starting the provider plugin {path}: {source}")]
    Spawn {
        /// The program.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The plugin exited unsuccessfully.
    #[error("the provider plugin {path} crashed during {operation} ({status}){stderr}")]
    Crashed {
        /// The program.
        path: String,
        /// The operation asked.
        operation: String,
        /// How it exited.
        status: String,
        /// The end of its stderr, prefixed with `: `, or empty.
        stderr: String,
    },
    /// The plugin did not answer in time and was killed.
    #[error(
        "the provider plugin {path} did not answer {operation} within {seconds:.1}s and was killed"
    )]
    Timeout {
        /// The program.
        path: String,
        /// The operation asked.
        operation: String,
        /// The time allowed.
        seconds: f64,
    },
    /// The plugin's answer is not a protocol answer.
    #[error(
        "the provider plugin {path} answered {operation} with garbage ({reason}); its output began {start:?}"
    )]
    Garbage {
        /// The program.
        path: String,
        /// The operation asked.
        operation: String,
        /// What is wrong with it.
        reason: String,
        /// The first bytes of its output.
        start: String,
    },
    /// The plugin speaks another version of the protocol.
    #[error("the provider plugin {path} speaks {found:?}, not {expected:?}")]
    Version {
        /// The program.
        path: String,
        /// Its `apiVersion`.
        found: String,
        /// Ours.
        expected: &'static str,
    },
    /// Talking to the plugin (its pipes) failed.
    #[error("talking to the provider plugin {path}: {source}")]
    Io {
        /// The program.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The provider's configuration is not usable.
    #[error("the provider configuration: {0}")]
    Config(String),
}

/// A provider call in progress.
pub type Call<'a, T> = Pin<Box<dyn Future<Output = Result<T, Error>> + Send + 'a>>;

fn unsupported<T: Send + 'static>(what: &str) -> Call<'static, T> {
    let error = Error::Unsupported(what.to_owned());
    Box::pin(async move { Err(error) })
}

/// What a cloud does for the tests. Every action defaults to [`Error::Unsupported`]; a
/// provider implements those its [`Capabilities`] declare.
pub trait Provider: Send + Sync + std::fmt::Debug {
    /// What the cloud can do.
    fn capabilities(&self) -> Call<'_, Capabilities>;

    /// Deletes the machine behind `node` for good ([`Capability::NodeDeletion`]).
    fn delete_instance<'a>(&'a self, node: &'a NodeRef) -> Call<'a, ()> {
        let _ = node;
        unsupported("deleteInstance")
    }

    /// Shuts the machine behind `node` down ([`Capability::NodeStop`]).
    fn stop_instance<'a>(&'a self, node: &'a NodeRef) -> Call<'a, ()> {
        let _ = node;
        unsupported("stopInstance")
    }

    /// Boots the stopped machine behind `node` ([`Capability::NodeStop`]).
    fn start_instance<'a>(&'a self, node: &'a NodeRef) -> Call<'a, ()> {
        let _ = node;
        unsupported("startInstance")
    }

    /// Reboots the machine behind `node` ([`Capability::NodeReboot`]).
    fn reboot_instance<'a>(&'a self, node: &'a NodeRef) -> Call<'a, ()> {
        let _ = node;
        unsupported("rebootInstance")
    }

    /// The load balancer behind `service`, or `None` when the cloud has none (it is gone)
    /// ([`Capability::DescribeLoadBalancer`]).
    fn describe_load_balancer<'a>(
        &'a self,
        service: &'a ServiceRef,
    ) -> Call<'a, Option<LoadBalancerDescription>> {
        let _ = service;
        unsupported("describeLoadBalancer")
    }

    /// Sends `probe` from outside the cluster ([`Capability::TrafficProbe`]).
    fn probe<'a>(&'a self, probe: &'a Probe) -> Call<'a, ProbeAnswer> {
        let _ = probe;
        unsupported("probe")
    }

    /// Upgrades (or downgrades) the control plane to `version`, as `--upgrade-target` gives
    /// it ([`Capability::ControlPlaneUpgrade`]). It may return before the API server serves
    /// again: the tests then wait until `/version` reports `version`.
    fn upgrade_control_plane<'a>(&'a self, version: &'a str) -> Call<'a, ()> {
        let _ = version;
        unsupported("upgradeControlPlane")
    }

    /// Upgrades (or downgrades) the nodes to `version`, as `--upgrade-target` gives it
    /// ([`Capability::NodeUpgrade`]): each node's machine gets the new node software, as a
    /// cloud's node-pool upgrade does. It may return before the nodes are back: the tests
    /// then wait until every node registered before is Ready, reporting `version` as its
    /// `kubeletVersion`.
    fn upgrade_nodes<'a>(&'a self, version: &'a str) -> Call<'a, ()> {
        let _ = version;
        unsupported("upgradeNodes")
    }
}

/// A provider that can do nothing (upstream's `skeleton`): only the tests needing no
/// capability run.
#[derive(Clone, Copy, Debug, Default)]
pub struct NullProvider;

impl Provider for NullProvider {
    fn capabilities(&self) -> Call<'_, Capabilities> {
        Box::pin(async { Ok(Capabilities::default()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capability_names_are_their_serialized_form() {
        for capability in Capability::ALL {
            assert_eq!(
                serde_json::to_value(capability).ok(),
                Some(serde_json::Value::String(capability.name().to_owned()))
            );
        }
    }

    #[test]
    fn missing_capabilities_are_listed_in_order() {
        let declared = Capabilities::of([Capability::LoadBalancer]);
        assert_eq!(
            declared.missing(&[
                Capability::SessionAffinity,
                Capability::LoadBalancer,
                Capability::NodeDeletion
            ]),
            vec![Capability::NodeDeletion, Capability::SessionAffinity]
        );
    }
}
