//! A provider that is a program speaking the exec-plugin [`protocol`](crate::protocol): one
//! process per call, with a deadline.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::io::AsyncWriteExt as _;

use crate::protocol::{API_VERSION, Answer, Operation, Request};
use crate::{
    Call, Capabilities, Error, LoadBalancerDescription, NodeRef, Probe, ProbeAnswer, Provider,
    ServiceRef,
};

/// How long a call may take by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// How much of a plugin's stderr a crash report keeps.
const STDERR_TAIL: usize = 2000;

/// An exec-plugin provider.
#[derive(Clone, Debug)]
pub struct ExecProvider {
    path: PathBuf,
    config: Option<Value>,
    timeout: Duration,
}

impl ExecProvider {
    /// The plugin at `path`, given `config` with every request.
    pub fn new(path: impl Into<PathBuf>, config: Option<Value>) -> Self {
        Self {
            path: path.into(),
            config,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// Gives each call `timeout` (the plugin is killed after it).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    fn shown(&self) -> String {
        self.path.display().to_string()
    }

    /// Runs the plugin for `operation`; the answer's result.
    pub async fn call(&self, operation: Operation) -> Result<Value, Error> {
        let name = operation.name();
        let request = Request {
            api_version: API_VERSION.to_owned(),
            config: self.config.clone(),
            operation,
        };
        let input = serde_json::to_vec(&request).map_err(|e| Error::Failed(e.to_string()))?;
        let mut child = tokio::process::Command::new(&self.path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| Error::Spawn {
                path: self.shown(),
                source,
            })?;
        let io = |source| Error::Io {
            path: self.shown(),
            source,
        };
        let stdin = child.stdin.take();
        let run = async move {
            if let Some(mut stdin) = stdin {
                // A plugin that exits without reading is judged by its exit and answer.
                let _ = stdin.write_all(&input).await;
                drop(stdin);
            }
            child.wait_with_output().await
        };
        let output = match tokio::time::timeout(self.timeout, run).await {
            Ok(output) => output.map_err(io)?,
            Err(_) => {
                return Err(Error::Timeout {
                    path: self.shown(),
                    operation: name.to_owned(),
                    seconds: self.timeout.as_secs_f64(),
                });
            }
        };
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let stderr = stderr.trim();
            let tail: String = stderr
                .chars()
                .rev()
                .take(STDERR_TAIL)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            return Err(Error::Crashed {
                path: self.shown(),
                operation: name.to_owned(),
                status: output.status.to_string(),
                stderr: if tail.is_empty() {
                    String::new()
                } else {
                    format!(": {tail}")
                },
            });
        }
        let garbage = |reason: String| Error::Garbage {
            path: self.shown(),
            operation: name.to_owned(),
            reason,
            start: String::from_utf8_lossy(&output.stdout)
                .chars()
                .take(80)
                .collect(),
        };
        let answer: Answer =
            serde_json::from_slice(&output.stdout).map_err(|e| garbage(e.to_string()))?;
        if answer.api_version != API_VERSION {
            return Err(Error::Version {
                path: self.shown(),
                found: answer.api_version,
                expected: API_VERSION,
            });
        }
        match answer.error {
            Some(error) if error.unsupported => {
                Err(Error::Unsupported(format!("{name} ({})", error.message)))
            }
            Some(error) => Err(Error::Failed(error.message)),
            None => Ok(answer.result.unwrap_or(Value::Null)),
        }
    }

    async fn typed<T: DeserializeOwned>(&self, operation: Operation) -> Result<T, Error> {
        let name = operation.name();
        let result = self.call(operation).await?;
        let start = result.to_string().chars().take(80).collect();
        serde_json::from_value(result).map_err(|e| Error::Garbage {
            path: self.shown(),
            operation: name.to_owned(),
            reason: format!("its result: {e}"),
            start,
        })
    }

    async fn action(&self, operation: Operation) -> Result<(), Error> {
        self.call(operation).await.map(|_| ())
    }
}

impl Provider for ExecProvider {
    fn capabilities(&self) -> Call<'_, Capabilities> {
        Box::pin(self.typed(Operation::Capabilities))
    }

    fn delete_instance<'a>(&'a self, node: &'a NodeRef) -> Call<'a, ()> {
        Box::pin(self.action(Operation::DeleteInstance { node: node.clone() }))
    }

    fn stop_instance<'a>(&'a self, node: &'a NodeRef) -> Call<'a, ()> {
        Box::pin(self.action(Operation::StopInstance { node: node.clone() }))
    }

    fn start_instance<'a>(&'a self, node: &'a NodeRef) -> Call<'a, ()> {
        Box::pin(self.action(Operation::StartInstance { node: node.clone() }))
    }

    fn reboot_instance<'a>(&'a self, node: &'a NodeRef) -> Call<'a, ()> {
        Box::pin(self.action(Operation::RebootInstance { node: node.clone() }))
    }

    fn describe_load_balancer<'a>(
        &'a self,
        service: &'a ServiceRef,
    ) -> Call<'a, Option<LoadBalancerDescription>> {
        Box::pin(self.typed(Operation::DescribeLoadBalancer {
            service: service.clone(),
        }))
    }

    fn probe<'a>(&'a self, probe: &'a Probe) -> Call<'a, ProbeAnswer> {
        Box::pin(self.typed(Operation::Probe {
            probe: probe.clone(),
        }))
    }

    fn upgrade_control_plane<'a>(&'a self, version: &'a str) -> Call<'a, ()> {
        Box::pin(self.action(Operation::UpgradeControlPlane {
            version: version.to_owned(),
        }))
    }

    fn upgrade_nodes<'a>(&'a self, version: &'a str) -> Call<'a, ()> {
        Box::pin(self.action(Operation::UpgradeNodes {
            version: version.to_owned(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Capability;

    /// A plugin written as a shell script in a temporary directory.
    fn plugin(dir: &tempfile::TempDir, name: &str, script: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt as _;
        let path = dir.path().join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{script}\n")).unwrap_or_default();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).ok();
        path
    }

    /// The message of a call that must fail.
    fn message<T: std::fmt::Debug>(result: Result<T, Error>) -> String {
        match result {
            Err(error) => error.to_string(),
            Ok(value) => format!("unexpected success: {value:?}"),
        }
    }

    fn node() -> NodeRef {
        NodeRef {
            name: "node-1".into(),
            provider_id: None,
        }
    }

    #[tokio::test]
    async fn a_well_behaved_plugin_gets_the_request_and_its_answer_is_read() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let log = dir.path().join("request.json");
        let path = plugin(
            &dir,
            "good",
            &format!(
                "cat > {}\necho '{{\"apiVersion\": \"{API_VERSION}\", \"result\": {{\"capabilities\": [\"LoadBalancer\"]}}}}'",
                log.display()
            ),
        );
        let provider = ExecProvider::new(path, Some(serde_json::json!({"region": "r1"})));
        let capabilities = provider
            .capabilities()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(capabilities, Capabilities::of([Capability::LoadBalancer]));
        let sent: Value = serde_json::from_slice(&std::fs::read(&log).unwrap_or_default())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            sent,
            serde_json::json!({"apiVersion": API_VERSION, "operation": "capabilities", "config": {"region": "r1"}})
        );
    }

    #[tokio::test]
    async fn crashes_hangs_garbage_and_other_versions_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let crash = plugin(
            &dir,
            "crash",
            "cat >/dev/null; echo 'out of quota' >&2; exit 3",
        );
        let error = ExecProvider::new(&crash, None)
            .reboot_instance(&node())
            .await;
        let error = message(error);
        assert!(
            error.contains("crashed during rebootInstance (exit status: 3): out of quota"),
            "{error}"
        );

        let hang = plugin(&dir, "hang", "exec sleep 30");
        let started = std::time::Instant::now();
        let error = ExecProvider::new(&hang, None)
            .with_timeout(Duration::from_millis(300))
            .delete_instance(&node())
            .await;
        let error = message(error);
        assert!(
            error.contains("did not answer deleteInstance within 0.3s and was killed"),
            "{error}"
        );
        assert!(started.elapsed() < Duration::from_secs(10));

        let garbage = plugin(&dir, "garbage", "echo 'hello, world'");
        let error = ExecProvider::new(&garbage, None).capabilities().await;
        let error = message(error);
        assert!(
            error.contains("answered capabilities with garbage") && error.contains("hello, world"),
            "{error}"
        );

        let shape = plugin(
            &dir,
            "shape",
            &format!("echo '{{\"apiVersion\": \"{API_VERSION}\", \"result\": 42}}'"),
        );
        let error = ExecProvider::new(&shape, None).capabilities().await;
        let error = message(error);
        assert!(error.contains("its result"), "{error}");

        let old = plugin(
            &dir,
            "old",
            "echo '{\"apiVersion\": \"ccm-e2e.genplane.io/v0\"}'",
        );
        let error = ExecProvider::new(&old, None).capabilities().await;
        let error = message(error);
        assert!(
            error.contains("speaks \"ccm-e2e.genplane.io/v0\""),
            "{error}"
        );

        let missing = ExecProvider::new(dir.path().join("absent"), None)
            .capabilities()
            .await;
        assert!(matches!(missing, Err(Error::Spawn { .. })));

        let refuses = plugin(
            &dir,
            "refuses",
            &format!(
                "echo '{{\"apiVersion\": \"{API_VERSION}\", \"error\": {{\"message\": \"no upgrades here\", \"unsupported\": true}}}}'"
            ),
        );
        let error = ExecProvider::new(&refuses, None)
            .upgrade_nodes("v1.34.0")
            .await;
        assert!(
            matches!(&error, Err(Error::Unsupported(m)) if m.contains("no upgrades here")),
            "{error:?}"
        );
    }

    /// The Python example provider of the docs works as written.
    #[tokio::test]
    async fn the_python_example_provider_works() {
        let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/example-provider.py");
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let state = dir.path().join("cloud.json");
        std::fs::write(&state, r#"{"instances": ["node-1", "node-2"]}"#).unwrap_or_default();
        let provider = ExecProvider::new(
            example,
            Some(serde_json::json!({"stateFile": state.display().to_string()})),
        );
        let capabilities = provider
            .capabilities()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            capabilities.has(Capability::NodeDeletion),
            "{capabilities:?}"
        );
        provider
            .delete_instance(&node())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let left = std::fs::read_to_string(&state).unwrap_or_default();
        assert!(
            !left.contains("node-1") && left.contains("node-2"),
            "{left}"
        );
        let again = provider.delete_instance(&node()).await;
        assert!(
            matches!(&again, Err(Error::Failed(m)) if m.contains("no instance node-1")),
            "{again:?}"
        );
        let unsupported = provider.reboot_instance(&node()).await;
        assert!(
            matches!(unsupported, Err(Error::Unsupported(_))),
            "{unsupported:?}"
        );
    }
}
