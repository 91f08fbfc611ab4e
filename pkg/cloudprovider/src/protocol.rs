//! The exec-plugin protocol, version [`API_VERSION`].
//!
//! The runner starts the plugin program once per call, with no arguments, writes one JSON
//! [`Request`] to its stdin and closes it, and reads one JSON [`Answer`] from its stdout. The
//! plugin exits 0 after answering, also when the answer is an error; a non-zero exit is a
//! crash. Its stderr is free text (shown when it crashes). A call has a deadline (60 s by
//! default), after which the plugin is killed.
//!
//! ```json
//! {"apiVersion": "ccm-e2e.genplane.io/v1", "operation": "rebootInstance",
//!  "node": {"name": "node-1", "providerID": "genplane://node-1"},
//!  "config": {"cloud": "http://127.0.0.1:4000"}}
//! ```
//! ```json
//! {"apiVersion": "ccm-e2e.genplane.io/v1", "result": null}
//! {"apiVersion": "ccm-e2e.genplane.io/v1", "error": {"message": "no such instance", "unsupported": false}}
//! ```
//!
//! | `operation` | fields | `result` |
//! |---|---|---|
//! | `capabilities` | | [`Capabilities`] |
//! | `deleteInstance`, `stopInstance`, `startInstance`, `rebootInstance` | `node` ([`NodeRef`]) | `null` |
//! | `describeLoadBalancer` | `service` ([`ServiceRef`]) | [`LoadBalancerDescription`], or `null` when there is none |
//! | `probe` | `probe` ([`Probe`]) | [`ProbeAnswer`] |
//! | `upgradeControlPlane`, `upgradeNodes` | `version` | `null` |
//!
//! `config` is the content of `--provider-config` (JSON or YAML, given as JSON), or absent.
//! An operation the plugin does not know is answered with `unsupported: true`. The schema of
//! all of this is `pkg/cloudprovider/protocol.schema.json` ([`schema`] makes it).
//!
//! Within v1 the protocol only grows: new capabilities (`PodNetwork`, `LoadBalancerToPods`,
//! `DataPlaneSurvivesControlPlaneUpgrade`) are names a plugin may declare, and a plugin that
//! declares none of them speaks to every runner of v1. A change that would make an older
//! plugin's answers wrong takes a new `apiVersion`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::{
    Capabilities, Error, LoadBalancerDescription, NodeRef, Probe, ProbeAnswer, Provider, ServiceRef,
};

/// The protocol version requests and answers carry.
pub const API_VERSION: &str = "ccm-e2e.genplane.io/v1";

/// One call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    /// [`API_VERSION`].
    pub api_version: String,
    /// The provider's configuration (`--provider-config`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    /// What to do.
    #[serde(flatten)]
    pub operation: Operation,
}

/// What a call asks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", tag = "operation")]
pub enum Operation {
    /// What the cloud can do.
    Capabilities,
    /// Delete the machine behind `node`.
    DeleteInstance {
        /// The node.
        node: NodeRef,
    },
    /// Shut the machine behind `node` down.
    StopInstance {
        /// The node.
        node: NodeRef,
    },
    /// Boot the stopped machine behind `node`.
    StartInstance {
        /// The node.
        node: NodeRef,
    },
    /// Reboot the machine behind `node`.
    RebootInstance {
        /// The node.
        node: NodeRef,
    },
    /// Describe the load balancer behind `service`.
    DescribeLoadBalancer {
        /// The Service.
        service: ServiceRef,
    },
    /// Send a probe from outside the cluster.
    Probe {
        /// The probe.
        probe: Probe,
    },
    /// Upgrade the control plane.
    UpgradeControlPlane {
        /// The version to upgrade to.
        version: String,
    },
    /// Upgrade or downgrade the nodes.
    UpgradeNodes {
        /// The version to go to.
        version: String,
    },
}

impl Operation {
    /// Its name on the wire, e.g. `rebootInstance`.
    pub fn name(&self) -> &'static str {
        match self {
            Operation::Capabilities => "capabilities",
            Operation::DeleteInstance { .. } => "deleteInstance",
            Operation::StopInstance { .. } => "stopInstance",
            Operation::StartInstance { .. } => "startInstance",
            Operation::RebootInstance { .. } => "rebootInstance",
            Operation::DescribeLoadBalancer { .. } => "describeLoadBalancer",
            Operation::Probe { .. } => "probe",
            Operation::UpgradeControlPlane { .. } => "upgradeControlPlane",
            Operation::UpgradeNodes { .. } => "upgradeNodes",
        }
    }
}

/// The answer to one call: `result` or `error`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Answer {
    /// [`API_VERSION`].
    pub api_version: String,
    /// What the operation returns (see the table in the module docs); `null` for actions.
    #[serde(default)]
    pub result: Option<Value>,
    /// Why the operation failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<AnswerError>,
}

/// A failed call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnswerError {
    /// What went wrong, for people.
    pub message: String,
    /// The provider does not do this operation.
    #[serde(default)]
    pub unsupported: bool,
}

/// The JSON Schema of the protocol: the request, the answer and the results' shapes.
pub fn schema() -> Value {
    // Each part is an embedded schema resource (its own `$id`), so that its `#/$defs/...`
    // references resolve within it.
    let part = |name: &str, schema: schemars::Schema| {
        let mut value = serde_json::to_value(schema).unwrap_or(Value::Null);
        if let Some(object) = value.as_object_mut() {
            object.remove("$schema");
            object.insert(
                "$id".to_owned(),
                json!(format!(
                    "https://genplane.io/schemas/ccm-e2e/v1/{name}.json"
                )),
            );
        }
        value
    };
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": format!("genplane ccm-e2e exec-plugin protocol {API_VERSION}"),
        "description": "One JSON Request on the plugin's stdin, one JSON Answer on its stdout, one process per call. The result of each operation has the shape named in its definition.",
        "$defs": {
            "Request": part("Request", schemars::schema_for!(Request)),
            "Answer": part("Answer", schemars::schema_for!(Answer)),
            "CapabilitiesResult": part("CapabilitiesResult", schemars::schema_for!(Capabilities)),
            "DescribeLoadBalancerResult": part("DescribeLoadBalancerResult", schemars::schema_for!(Option<LoadBalancerDescription>)),
            "ProbeResult": part("ProbeResult", schemars::schema_for!(ProbeAnswer)),
        }
    })
}

/// Runs `operation` on `provider`; its result as JSON.
pub async fn dispatch(provider: &dyn Provider, operation: &Operation) -> Result<Value, Error> {
    match operation {
        Operation::Capabilities => value(provider.capabilities().await),
        Operation::DeleteInstance { node } => {
            provider.delete_instance(node).await.map(|()| Value::Null)
        }
        Operation::StopInstance { node } => {
            provider.stop_instance(node).await.map(|()| Value::Null)
        }
        Operation::StartInstance { node } => {
            provider.start_instance(node).await.map(|()| Value::Null)
        }
        Operation::RebootInstance { node } => {
            provider.reboot_instance(node).await.map(|()| Value::Null)
        }
        Operation::DescribeLoadBalancer { service } => {
            value(provider.describe_load_balancer(service).await)
        }
        Operation::Probe { probe } => value(provider.probe(probe).await),
        Operation::UpgradeControlPlane { version } => provider
            .upgrade_control_plane(version)
            .await
            .map(|()| Value::Null),
        Operation::UpgradeNodes { version } => {
            provider.upgrade_nodes(version).await.map(|()| Value::Null)
        }
    }
}

/// A result as JSON.
fn value<T: serde::Serialize>(result: Result<T, Error>) -> Result<Value, Error> {
    result.and_then(|v| serde_json::to_value(v).map_err(|e| Error::Failed(e.to_string())))
}

fn answer_of(result: Result<Value, Error>) -> Answer {
    match result {
        Ok(result) => Answer {
            api_version: API_VERSION.to_owned(),
            result: Some(result),
            error: None,
        },
        Err(error) => Answer {
            api_version: API_VERSION.to_owned(),
            result: None,
            error: Some(AnswerError {
                unsupported: matches!(error, Error::Unsupported(_)),
                message: match error {
                    Error::Failed(message) => message,
                    other => other.to_string(),
                },
            }),
        },
    }
}

/// The plugin side: answers the request in `input` (a plugin's whole stdin) with the provider
/// `make` builds from the request's `config`; the bytes to write to stdout. Bad requests
/// are answered with an error, never a panic.
pub async fn serve<P, F>(make: F, input: &[u8]) -> Vec<u8>
where
    P: Provider,
    F: FnOnce(Option<&Value>) -> Result<P, Error>,
{
    let answer = match serde_json::from_slice::<Request>(input) {
        Err(error) => answer_of(Err(Error::Failed(format!("not a request: {error}")))),
        Ok(request) if request.api_version != API_VERSION => {
            answer_of(Err(Error::Failed(format!(
                "unknown apiVersion {:?}: this plugin speaks {API_VERSION}",
                request.api_version
            ))))
        }
        Ok(request) => match make(request.config.as_ref()) {
            Ok(provider) => answer_of(dispatch(&provider, &request.operation).await),
            Err(error) => answer_of(Err(error)),
        },
    };
    let mut bytes = serde_json::to_vec(&answer).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NullProvider;

    /// The checked-in schema is the one the types make: documentation that cannot drift.
    /// `GENPLANE_UPDATE_SCHEMA=1` rewrites it.
    #[test]
    #[allow(clippy::disallowed_methods)] // a test's switch to rewrite the file
    fn the_checked_in_schema_is_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/protocol.schema.json");
        let mut made = serde_json::to_string_pretty(&schema()).unwrap_or_default();
        made.push('\n');
        if std::env::var_os("GENPLANE_UPDATE_SCHEMA").is_some() {
            std::fs::write(path, &made).ok();
        }
        let stored = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            stored == made,
            "{path} is out of date: run this test with GENPLANE_UPDATE_SCHEMA=1"
        );
    }

    #[test]
    fn requests_read_as_documented() {
        let request: Request = serde_json::from_value(json!({
            "apiVersion": API_VERSION, "operation": "rebootInstance",
            "node": {"name": "node-1", "providerID": "genplane://node-1"},
            "config": {"cloud": "http://127.0.0.1:4000"}}))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            request.operation,
            Operation::RebootInstance {
                node: NodeRef {
                    name: "node-1".into(),
                    provider_id: Some("genplane://node-1".into())
                }
            }
        );
        assert_eq!(request.operation.name(), "rebootInstance");
    }

    #[tokio::test]
    async fn serve_answers_results_errors_and_bad_requests() {
        let ask = |operation: Value| {
            let mut request = json!({"apiVersion": API_VERSION});
            if let (Some(r), Some(o)) = (request.as_object_mut(), operation.as_object()) {
                r.extend(o.clone());
            }
            serde_json::to_vec(&request).unwrap_or_default()
        };
        let read = |bytes: Vec<u8>| -> Answer {
            serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{e}"))
        };
        let make = |_: Option<&Value>| Ok(NullProvider);
        let capabilities = read(serve(make, &ask(json!({"operation": "capabilities"}))).await);
        assert_eq!(capabilities.result, Some(json!({"capabilities": []})));
        let reboot = read(
            serve(
                make,
                &ask(json!({"operation": "rebootInstance", "node": {"name": "n"}})),
            )
            .await,
        );
        let error = reboot.error.unwrap_or_else(|| panic!("no error"));
        assert!(error.unsupported, "{error:?}");
        let garbage = read(serve(make, b"{nope").await);
        assert!(
            garbage
                .error
                .is_some_and(|e| e.message.starts_with("not a request") && !e.unsupported)
        );
        let other = read(
            serve(
                make,
                br#"{"apiVersion": "v0", "operation": "capabilities"}"#,
            )
            .await,
        );
        assert!(
            other
                .error
                .is_some_and(|e| e.message.contains("unknown apiVersion"))
        );
    }
}
