//! What the test cluster's tests share: the cluster started as a process
//! (`genplane_test_support::process`), kubectl 1.33 and a kube-rs client against it, waiting
//! for conditions, and plain HTTP on loopback.

#![allow(clippy::unwrap_used, dead_code)]

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

pub(crate) use genplane_test_support::eventually_async as eventually;
use genplane_test_support::process::Process;

const BIN: &str = env!("CARGO_BIN_EXE_genplane-testcluster");

/// The running cluster, killed when dropped.
pub(crate) struct Cluster {
    /// The cluster's process; its standard output (the banner) and error go to
    /// `cluster.log` in its directory.
    pub(crate) process: Process,
    /// Its loopback address block (see `genplane_test_cluster::net`).
    pub(crate) block: u8,
    /// The fake cloud's HTTP API (`127.0.0.1:port`).
    pub(crate) cloud: String,
    /// The arguments of the `genplane ccm-e2e` command line the cluster printed for itself.
    #[allow(dead_code)] // read by the ccm-e2e tests only
    pub(crate) ccm_e2e: String,
    dir: tempfile::TempDir,
    /// Held while the cluster runs: no other test's cluster takes the same block.
    _block_lock: std::fs::File,
}

/// A free address block, locked for this process (tests run in processes of their own).
fn lock_block() -> (u8, std::fs::File) {
    genplane_test_support::eventually("a free address block", || {
        // Block 0 is the default of a cluster started by hand: tried last.
        (1..16).chain([0]).find_map(|block| {
            let path =
                std::env::temp_dir().join(format!("genplane-testcluster-block-{block}.lock"));
            let file = std::fs::File::create(&path).unwrap();
            file.try_lock().is_ok().then_some((block, file))
        })
    })
}

/// The cluster's log filter: its own components at debug (what they did to the data plane),
/// the rest at info.
const LOG_FILTER: &str = "info,genplane_test_cluster=debug,kube_client=off";

/// How many of the log's last lines a failed test prints.
const LOG_TAIL: usize = 150;

impl Drop for Cluster {
    fn drop(&mut self) {
        self.process.stop();
        if std::thread::panicking() {
            // The test failed: keep the cluster's log and show its end.
            let kept = std::env::temp_dir().join(format!(
                "genplane-testcluster-{}-block-{}.log",
                std::process::id(),
                self.block
            ));
            if std::fs::copy(&self.process.log, &kept).is_ok() {
                eprintln!(
                    "the test cluster's log is kept in {}; its last {LOG_TAIL} lines:\n{}",
                    kept.display(),
                    self.process.last_lines(LOG_TAIL)
                );
            }
        }
    }
}

impl Cluster {
    /// Starts a cluster of `nodes` nodes with `extra` flags; returns once they are registered.
    pub(crate) fn start_with(nodes: u8, extra: &[&str]) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let (block, lock) = lock_block();
        let mut command = Command::new(BIN);
        command
            .args(["--bind-address=127.0.0.1", "--secure-port=0"])
            .arg(format!("--nodes={nodes}"))
            .arg(format!("--address-block={block}"))
            .arg(format!("--data-dir={}", dir.path().join("data").display()))
            .args(extra)
            .env("RUST_LOG", LOG_FILTER);
        let mut process =
            Process::spawn("the test cluster", command, &dir.path().join("cluster.log"));
        // The banner, once the nodes are registered, ends with the ccm-e2e command line the
        // cluster prints for itself, after its cloud's address.
        let ccm_e2e = process.wait_for_line("genplane ccm-e2e ");
        let cloud = process.wait_for_line("genplane testcluster cloud: http://");
        Cluster {
            process,
            block,
            cloud,
            ccm_e2e,
            dir,
            _block_lock: lock,
        }
    }

    /// Starts a cluster of `nodes` nodes.
    pub(crate) fn start(nodes: u8) -> Cluster {
        Self::start_with(nodes, &[])
    }

    /// The admin kubeconfig.
    pub(crate) fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("data/admin.kubeconfig")
    }

    /// Runs kubectl 1.33 with `args` and `stdin` (its discovery cached for this cluster alone).
    pub(crate) fn kubectl_output(&self, args: &[&str], stdin: &str) -> Output {
        let mut command = genplane_test_support::kubectl_command(kubectl_1_33(), self.kubeconfig());
        command.args(args);
        genplane_test_support::process::output_with_input(command, Some(stdin))
    }

    /// Runs kubectl 1.33 with `args`; its output, asserting it succeeded.
    pub(crate) fn kubectl(&self, args: &[&str]) -> String {
        self.kubectl_with(args, "")
    }

    /// Runs kubectl 1.33 with `args` and `stdin`; its output, asserting it succeeded.
    pub(crate) fn kubectl_with(&self, args: &[&str], stdin: &str) -> String {
        let output = self.kubectl_output(args, stdin);
        assert!(
            output.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    /// A client with the admin's identity.
    pub(crate) async fn client(&self) -> kube::Client {
        genplane_test_support::clients::kube_client(&self.kubeconfig()).await
    }
}

/// kubectl 1.33, next to the `kubectl` on PATH.
pub(crate) fn kubectl_1_33() -> PathBuf {
    genplane_test_support::kubectl_path("kubectl.1.33")
}

/// The body of `GET path` from `address` (`ip:port`).
pub(crate) fn http_get(address: &str, path: &str) -> String {
    let answer = http_answer(address, path).unwrap_or_else(|| panic!("no answer from {address}"));
    answer.split("\r\n\r\n").nth(1).unwrap_or("").to_owned()
}

/// The whole answer (head and body) to `GET path` from `address`; `None` when the
/// connection is refused, reset or closed without one.
pub(crate) fn http_answer(address: &str, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(address).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: pod\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    (!answer.is_empty()).then_some(answer)
}

/// The answer to the UDP datagram `message` sent to `address`.
pub(crate) fn udp_ask(address: &str, message: &str) -> Option<String> {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    socket.send_to(message.as_bytes(), address).ok()?;
    let mut buffer = [0u8; 2048];
    let (length, _) = socket.recv_from(&mut buffer).ok()?;
    Some(String::from_utf8_lossy(&buffer[..length]).into_owned())
}

/// A request to the fake cloud's HTTP API: the status code and the JSON body (if any).
pub(crate) fn cloud_request(cloud: &str, method: &str, path: &str) -> (u16, serde_json::Value) {
    let mut stream = TcpStream::connect(cloud).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: cloud\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let code = answer.split(' ').nth(1).unwrap().parse().unwrap();
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or("");
    (
        code,
        serde_json::from_str(body).unwrap_or(serde_json::Value::Null),
    )
}
