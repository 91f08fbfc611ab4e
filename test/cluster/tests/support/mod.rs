//! What the test cluster's tests share: the cluster started as a process, kubectl 1.33 and a
//! kube-rs client against it, waiting for conditions, and plain HTTP on loopback.

#![allow(clippy::unwrap_used, dead_code)]

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub(crate) use genplane_test_support::{DEADLINE, eventually_async as eventually};

const BIN: &str = env!("CARGO_BIN_EXE_genplane-testcluster");

/// The running cluster, killed when dropped.
pub(crate) struct Cluster {
    /// The cluster's process.
    pub(crate) child: Child,
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
    let start = Instant::now();
    loop {
        // Block 0 is the default of a cluster started by hand: tried last.
        for block in (1..16).chain([0]) {
            let path =
                std::env::temp_dir().join(format!("genplane-testcluster-block-{block}.lock"));
            let file = std::fs::File::create(&path).unwrap();
            if file.try_lock().is_ok() {
                return (block, file);
            }
        }
        assert!(start.elapsed() < DEADLINE, "no free address block");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The cluster's log filter: its own components at debug (what they did to the data plane),
/// the rest at info.
const LOG_FILTER: &str = "info,genplane_test_cluster=debug,kube_client=off";

/// How many of the log's last lines a failed test prints.
const LOG_TAIL: usize = 150;

impl Drop for Cluster {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
        if std::thread::panicking() {
            // The test failed: keep the cluster's log and show its end.
            let log = self.dir.path().join("cluster.log");
            let kept = std::env::temp_dir().join(format!(
                "genplane-testcluster-{}-block-{}.log",
                std::process::id(),
                self.block
            ));
            if std::fs::copy(&log, &kept).is_ok() {
                let text = std::fs::read_to_string(&kept).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                let tail = &lines[lines.len().saturating_sub(LOG_TAIL)..];
                eprintln!(
                    "the test cluster's log is kept in {}; its last {} lines:\n{}",
                    kept.display(),
                    tail.len(),
                    tail.join("\n")
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
        let mut child = Command::new(BIN)
            .args(["--bind-address=127.0.0.1", "--secure-port=0"])
            .arg(format!("--nodes={nodes}"))
            .arg(format!("--address-block={block}"))
            .arg(format!("--data-dir={}", dir.path().join("data").display()))
            .args(extra)
            .env("RUST_LOG", LOG_FILTER)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.path().join("cluster.log")).unwrap())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut cloud = String::new();
        // The banner ends with the ccm-e2e command line the cluster prints for itself.
        let ccm_e2e = loop {
            let line = lines.next().expect("the cluster's banner").unwrap();
            if let Some(url) = line.strip_prefix("genplane testcluster cloud: http://") {
                cloud = url.to_owned();
            }
            if let Some(command) = line.trim_start().strip_prefix("genplane ccm-e2e ") {
                break command.to_owned();
            }
        };
        std::thread::spawn(move || for _ in lines {});
        Cluster {
            child,
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

    /// Runs kubectl 1.33 with `args` and `stdin`.
    pub(crate) fn kubectl_output(&self, args: &[&str], stdin: &str) -> Output {
        let mut child = Command::new(kubectl_1_33())
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            // Discovery cached for this cluster alone: kubectl's default cache is shared by
            // every server that ever had this port.
            .arg("--cache-dir")
            .arg(self.dir.path().join("kubectl-cache"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
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
        let kubeconfig = kube::config::Kubeconfig::read_from(self.kubeconfig()).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        kube::Client::try_from(config).unwrap()
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
