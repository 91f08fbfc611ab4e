//! A launcher of real etcd processes for tests (feature `test-util`).
//!
//! [`EtcdServer::start`] runs one etcd member on free loopback ports, with its data in a
//! temporary directory, and waits until it answers; dropping the server kills the process and
//! removes the data. [`EtcdServer::start_tls`] does the same with mutual TLS, from a CA and
//! certificates it generates. [`EtcdCluster::start`] runs several members as one cluster, whose
//! members can be killed, restarted, frozen (`SIGSTOP`) and thawed one by one. The binary is
//! `etcd` from `PATH` (Debian's `etcd-server`) unless [`EtcdServerOptions::binary`] says
//! otherwise.
//!
//! The member is configured for tests: requests up to 8 MiB (values of 1.5 MiB fit), and a
//! watch progress notification every 200 ms, which is how watches on etcd before 3.4.31 /
//! 3.5.13 answer progress requests promptly (see the crate documentation).

use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use etcd_client::Client;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use tempfile::TempDir;

use crate::{EtcdConfig, EtcdStore, EtcdTls};

/// How long etcd gets to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// How often a start is retried when etcd lost a race for its ports.
const PORT_ATTEMPTS: usize = 5;

/// Errors of starting etcd.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    /// A file or directory for the server could not be created.
    #[error("preparing {path}")]
    Prepare {
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// No free loopback port could be found.
    #[error("finding free loopback ports")]
    Ports(#[source] std::io::Error),
    /// The test certificates could not be generated.
    #[error("generating test certificates")]
    Certificates(#[from] rcgen::Error),
    /// The etcd binary could not be run.
    #[error("running {binary}")]
    Spawn {
        /// The binary.
        binary: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// etcd exited before it was ready.
    #[error("etcd exited before it was ready ({status}); its log ends with:\n{log}")]
    Exited {
        /// How it exited.
        status: ExitStatus,
        /// The end of its log.
        log: String,
    },
    /// etcd did not answer in time.
    #[error("etcd was not ready within {timeout:?}; its log ends with:\n{log}")]
    NotReady {
        /// How long it was given.
        timeout: Duration,
        /// The end of its log.
        log: String,
    },
}

/// How to start an [`EtcdServer`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdServerOptions {
    /// The etcd binary; `etcd` (found on `PATH`) by default.
    pub binary: PathBuf,
    /// Serve clients over mutual TLS with generated certificates.
    pub tls: bool,
}

impl Default for EtcdServerOptions {
    fn default() -> Self {
        EtcdServerOptions {
            binary: PathBuf::from("etcd"),
            tls: false,
        }
    }
}

/// The PEM files of a TLS server: the CA, and a client certificate it signed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// The CA certificate that signed the server and client certificates.
    pub ca: PathBuf,
    /// A client certificate etcd accepts.
    pub client_cert: PathBuf,
    /// The client certificate's key.
    pub client_key: PathBuf,
    /// The server's certificate (also valid as a client certificate, as etcd wants it).
    pub server_cert: PathBuf,
    /// The server's key.
    pub server_key: PathBuf,
}

/// A running etcd member for tests. Dropping it kills etcd and removes its data.
#[derive(Debug)]
pub struct EtcdServer {
    options: EtcdServerOptions,
    dir: TempDir,
    client_port: u16,
    peer_port: u16,
    tls: Option<TlsFiles>,
    child: Option<Child>,
}

impl EtcdServer {
    /// Starts etcd from `PATH` over plain HTTP.
    pub async fn start() -> Result<EtcdServer, LaunchError> {
        Self::start_with(EtcdServerOptions::default()).await
    }

    /// Starts etcd from `PATH` over mutual TLS.
    pub async fn start_tls() -> Result<EtcdServer, LaunchError> {
        Self::start_with(EtcdServerOptions {
            tls: true,
            ..EtcdServerOptions::default()
        })
        .await
    }

    /// Starts etcd as `options` say, on free loopback ports (new ones if it loses a race for
    /// them), and waits until it answers.
    pub async fn start_with(options: EtcdServerOptions) -> Result<EtcdServer, LaunchError> {
        let dir = tempfile::Builder::new()
            .prefix("genplane-etcd-")
            .tempdir()
            .map_err(|source| LaunchError::Prepare {
                path: std::env::temp_dir(),
                source,
            })?;
        let tls = if options.tls {
            Some(write_certificates(dir.path())?)
        } else {
            None
        };
        let mut server = EtcdServer {
            options,
            dir,
            client_port: 0,
            peer_port: 0,
            tls,
            child: None,
        };
        let mut attempt = 1;
        loop {
            server.client_port = free_port()?;
            server.peer_port = free_port()?;
            match server.launch().await {
                Err(LaunchError::Exited { log, .. })
                    if attempt < PORT_ATTEMPTS && log.contains("address already in use") =>
                {
                    attempt += 1;
                    // A fresh data directory: the failed start may have left a member there
                    // (or have failed before making one).
                    let data = server.data_dir();
                    match std::fs::remove_dir_all(&data) {
                        Err(source) if source.kind() != std::io::ErrorKind::NotFound => {
                            return Err(LaunchError::Prepare { path: data, source });
                        }
                        _ => {}
                    }
                }
                result => return result.map(|()| server),
            }
        }
    }

    /// The client URL, e.g. `http://127.0.0.1:43125`.
    pub fn endpoint(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.client_port)
    }

    /// The TLS files, for a server started with TLS.
    pub fn tls_files(&self) -> Option<&TlsFiles> {
        self.tls.as_ref()
    }

    /// A store configuration that reaches this server (with the client certificate under TLS).
    pub fn config(&self) -> EtcdConfig {
        let mut config = EtcdConfig::new([self.endpoint()]);
        config.tls = self.tls.as_ref().map(|files| EtcdTls {
            ca_file: Some(files.ca.clone()),
            cert_file: Some(files.client_cert.clone()),
            key_file: Some(files.client_key.clone()),
        });
        config
    }

    /// The member's data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Kills etcd (`SIGKILL`) and waits for it to exit; the data stays for [`Self::restart`].
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            // It may have exited already; either way it is gone afterwards.
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Freezes etcd (`SIGSTOP`): it keeps its connections but answers nothing, as a member
    /// with a hung disk or a half-open connection.
    pub fn freeze(&mut self) {
        if let Some(child) = &self.child {
            signal(child.id(), "-STOP");
            // `kill` returns once the signal is sent; on a busy machine etcd may still answer a
            // request or two before every thread has stopped. Frozen means stopped.
            wait_stopped(child.id());
        }
    }

    /// Thaws etcd (`SIGCONT`) after [`Self::freeze`].
    pub fn thaw(&mut self) {
        if let Some(child) = &self.child {
            signal(child.id(), "-CONT");
        }
    }

    /// Starts etcd again on the same data and ports, after [`Self::kill`] (or kills it first).
    pub async fn restart(&mut self) -> Result<(), LaunchError> {
        self.kill();
        self.launch().await
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("etcd.log")
    }

    /// Runs etcd and waits until it answers.
    async fn launch(&mut self) -> Result<(), LaunchError> {
        let log_path = self.log_path();
        let log = File::create(&log_path).map_err(|source| LaunchError::Prepare {
            path: log_path.clone(),
            source,
        })?;
        let stderr = log.try_clone().map_err(|source| LaunchError::Prepare {
            path: log_path.clone(),
            source,
        })?;
        let peer_url = format!("http://127.0.0.1:{}", self.peer_port);
        let client_url = self.endpoint();
        let mut command = Command::new(&self.options.binary);
        command
            .arg("--name=genplane-test")
            .arg(format!("--data-dir={}", self.data_dir().display()))
            .arg(format!("--listen-client-urls={client_url}"))
            .arg(format!("--advertise-client-urls={client_url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=genplane-test={peer_url}"))
            .arg("--max-request-bytes=8388608")
            .arg("--experimental-watch-progress-notify-interval=200ms")
            .arg("--logger=zap")
            .arg("--log-outputs=stderr")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(stderr);
        if let Some(files) = &self.tls {
            command
                .arg("--client-cert-auth")
                .arg(format!("--trusted-ca-file={}", files.ca.display()))
                .arg(format!("--cert-file={}", files.server_cert.display()))
                .arg(format!("--key-file={}", files.server_key.display()));
        }
        let child = command.spawn().map_err(|source| LaunchError::Spawn {
            binary: self.options.binary.clone(),
            source,
        })?;
        self.child = Some(child);
        self.wait_ready().await
    }

    async fn wait_ready(&mut self) -> Result<(), LaunchError> {
        let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
        let mut config = self.config();
        config.dial_timeout = Duration::from_millis(500);
        loop {
            if let Some(child) = &mut self.child
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                return Err(LaunchError::Exited {
                    status,
                    log: self.log_tail(),
                });
            }
            if EtcdStore::connect(&config).await.is_ok() {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                self.kill();
                return Err(LaunchError::NotReady {
                    timeout: READY_TIMEOUT,
                    log: self.log_tail(),
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The last lines of etcd's log.
    fn log_tail(&self) -> String {
        log_tail(&self.log_path())
    }
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A loopback port that was free a moment ago.
fn free_port() -> Result<u16, LaunchError> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .map_err(LaunchError::Ports)
}

/// Generates a CA, a server certificate for 127.0.0.1 and a client certificate, as PEM files
/// in `dir`.
fn write_certificates(dir: &Path) -> Result<TlsFiles, LaunchError> {
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "genplane test etcd CA");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let leaf = |name: &str, sans: Vec<String>, usages: Vec<ExtendedKeyUsagePurpose>| {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(sans)?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = usages;
        let cert = params.signed_by(&key, &issuer)?;
        Ok::<_, rcgen::Error>((cert.pem(), key.serialize_pem()))
    };
    // etcd also dials itself (its gateway) with the server certificate, so it is a client
    // certificate too.
    let (server_cert, server_key) = leaf(
        "genplane test etcd",
        vec!["127.0.0.1".into(), "localhost".into()],
        vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ],
    )?;
    let (client_cert, client_key) = leaf(
        "genplane-apiserver",
        Vec::new(),
        vec![ExtendedKeyUsagePurpose::ClientAuth],
    )?;

    let tls_dir = dir.join("tls");
    std::fs::create_dir(&tls_dir).map_err(|source| LaunchError::Prepare {
        path: tls_dir.clone(),
        source,
    })?;
    let write = |name: &str, contents: &str| {
        let path = tls_dir.join(name);
        std::fs::write(&path, contents)
            .map(|()| path.clone())
            .map_err(|source| LaunchError::Prepare { path, source })
    };
    Ok(TlsFiles {
        ca: write("ca.pem", &ca_cert.pem())?,
        client_cert: write("client.pem", &client_cert)?,
        client_key: write("client-key.pem", &client_key)?,
        server_cert: write("server.pem", &server_cert)?,
        server_key: write("server-key.pem", &server_key)?,
    })
}

/// One member of an [`EtcdCluster`].
#[derive(Debug)]
struct Node {
    name: String,
    client_port: u16,
    peer_port: u16,
    child: Option<Child>,
    frozen: bool,
}

impl Node {
    fn client_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    fn peer_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.peer_port)
    }
}

/// A cluster of real etcd members on loopback, for tests of failures: members can be killed
/// (`SIGKILL`) and restarted on their data, or frozen (`SIGSTOP`) and thawed. Dropping the
/// cluster kills every member and removes the data. Plain HTTP; each member is configured as
/// [`EtcdServer`]'s is, with etcd's default heartbeat and election timeouts.
#[derive(Debug)]
pub struct EtcdCluster {
    binary: PathBuf,
    dir: TempDir,
    nodes: Vec<Node>,
}

impl EtcdCluster {
    /// Starts a cluster of `size` members from `PATH` and waits until it has a leader and
    /// every member answers.
    pub async fn start(size: usize) -> Result<EtcdCluster, LaunchError> {
        let dir = tempfile::Builder::new()
            .prefix("genplane-etcd-cluster-")
            .tempdir()
            .map_err(|source| LaunchError::Prepare {
                path: std::env::temp_dir(),
                source,
            })?;
        let mut cluster = EtcdCluster {
            binary: PathBuf::from("etcd"),
            dir,
            nodes: Vec::new(),
        };
        let mut attempt = 1;
        loop {
            cluster.nodes = (0..size)
                .map(|i| {
                    Ok(Node {
                        name: format!("member-{i}"),
                        client_port: free_port()?,
                        peer_port: free_port()?,
                        child: None,
                        frozen: false,
                    })
                })
                .collect::<Result<_, LaunchError>>()?;
            let all: Vec<usize> = (0..size).collect();
            match cluster.launch(&all).await {
                Err(LaunchError::Exited { log, .. })
                    if attempt < PORT_ATTEMPTS && log.contains("address already in use") =>
                {
                    attempt += 1;
                    for index in all {
                        cluster.kill(index);
                        let data = cluster.data_dir(index);
                        if data.exists() {
                            std::fs::remove_dir_all(&data)
                                .map_err(|source| LaunchError::Prepare { path: data, source })?;
                        }
                    }
                }
                result => return result.map(|()| cluster),
            }
        }
    }

    /// How many members there are.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the cluster has no member (never, once started).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Member `index`'s client URL.
    pub fn endpoint(&self, index: usize) -> String {
        self.nodes[index].client_url()
    }

    /// Every member's client URL, in order.
    pub fn endpoints(&self) -> Vec<String> {
        self.nodes.iter().map(Node::client_url).collect()
    }

    /// A store configuration that reaches every member (the first one preferred).
    pub fn config(&self) -> EtcdConfig {
        EtcdConfig::new(self.endpoints())
    }

    /// Member `index`'s process id, while it runs.
    pub fn pid(&self, index: usize) -> Option<u32> {
        self.nodes[index].child.as_ref().map(Child::id)
    }

    fn data_dir(&self, index: usize) -> PathBuf {
        self.dir.path().join(&self.nodes[index].name)
    }

    fn log_path(&self, index: usize) -> PathBuf {
        self.dir
            .path()
            .join(format!("{}.log", self.nodes[index].name))
    }

    /// Kills member `index` (`SIGKILL`) and waits for it to exit; its data stays for
    /// [`Self::restart`]. A frozen member is killed too.
    pub fn kill(&mut self, index: usize) {
        let node = &mut self.nodes[index];
        if let Some(mut child) = node.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        node.frozen = false;
    }

    /// Freezes member `index` (`SIGSTOP`): it keeps its connections but answers nothing.
    pub fn freeze(&mut self, index: usize) {
        if let Some(pid) = self.pid(index) {
            signal(pid, "-STOP");
            self.nodes[index].frozen = true;
        }
    }

    /// Thaws member `index` (`SIGCONT`) after [`Self::freeze`].
    pub fn thaw(&mut self, index: usize) {
        if let Some(pid) = self.pid(index) {
            signal(pid, "-CONT");
            self.nodes[index].frozen = false;
        }
    }

    /// Starts the members `indexes` again on their data (killing them first if they run),
    /// then waits until each answers and knows a leader: restart together the members a
    /// quorum needs.
    pub async fn restart(&mut self, indexes: &[usize]) -> Result<(), LaunchError> {
        for &index in indexes {
            self.kill(index);
        }
        self.launch(indexes).await
    }

    /// The index of the member that leads, as the running, unfrozen members say; `None`
    /// when none of them knows a leader.
    pub async fn leader(&self) -> Option<usize> {
        for index in 0..self.nodes.len() {
            let node = &self.nodes[index];
            if node.child.is_none() || node.frozen {
                continue;
            }
            let Some((_, leader)) = self.member_status(index).await else {
                continue;
            };
            if leader == 0 {
                continue;
            }
            for other in 0..self.nodes.len() {
                if self.nodes[other].child.is_none() || self.nodes[other].frozen {
                    continue;
                }
                if let Some((id, _)) = self.member_status(other).await
                    && id == leader
                {
                    return Some(other);
                }
            }
        }
        None
    }

    /// Member `index`'s id and the id of the leader it knows (0 for none).
    async fn member_status(&self, index: usize) -> Option<(u64, u64)> {
        let status = async {
            let options =
                etcd_client::ConnectOptions::new().with_connect_timeout(Duration::from_millis(500));
            let mut client = Client::connect([self.endpoint(index)], Some(options))
                .await
                .ok()?;
            let status = client.status().await.ok()?;
            Some((status.header()?.member_id(), status.leader()))
        };
        tokio::time::timeout(Duration::from_secs(2), status)
            .await
            .ok()
            .flatten()
    }

    /// Spawns the members `indexes`, then waits until each answers with a leader known.
    async fn launch(&mut self, indexes: &[usize]) -> Result<(), LaunchError> {
        let initial_cluster = self
            .nodes
            .iter()
            .map(|n| format!("{}={}", n.name, n.peer_url()))
            .collect::<Vec<_>>()
            .join(",");
        for &index in indexes {
            let log_path = self.log_path(index);
            let log = File::options()
                .create(true)
                .append(true)
                .open(&log_path)
                .map_err(|source| LaunchError::Prepare {
                    path: log_path.clone(),
                    source,
                })?;
            let stderr = log.try_clone().map_err(|source| LaunchError::Prepare {
                path: log_path.clone(),
                source,
            })?;
            let node = &self.nodes[index];
            let (client_url, peer_url) = (node.client_url(), node.peer_url());
            let child = Command::new(&self.binary)
                .arg(format!("--name={}", node.name))
                .arg(format!("--data-dir={}", self.data_dir(index).display()))
                .arg(format!("--listen-client-urls={client_url}"))
                .arg(format!("--advertise-client-urls={client_url}"))
                .arg(format!("--listen-peer-urls={peer_url}"))
                .arg(format!("--initial-advertise-peer-urls={peer_url}"))
                .arg(format!("--initial-cluster={initial_cluster}"))
                .arg("--initial-cluster-token=genplane-test-cluster")
                .arg("--initial-cluster-state=new")
                .arg("--max-request-bytes=8388608")
                .arg("--experimental-watch-progress-notify-interval=200ms")
                .arg("--logger=zap")
                .arg("--log-outputs=stderr")
                .stdin(Stdio::null())
                .stdout(log)
                .stderr(stderr)
                .spawn()
                .map_err(|source| LaunchError::Spawn {
                    binary: self.binary.clone(),
                    source,
                })?;
            self.nodes[index].child = Some(child);
            self.nodes[index].frozen = false;
        }
        let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
        for &index in indexes {
            loop {
                if let Some(child) = &mut self.nodes[index].child
                    && let Ok(Some(status)) = child.try_wait()
                {
                    self.nodes[index].child = None;
                    return Err(LaunchError::Exited {
                        status,
                        log: log_tail(&self.log_path(index)),
                    });
                }
                if let Some((_, leader)) = self.member_status(index).await
                    && leader != 0
                {
                    break;
                }
                if tokio::time::Instant::now() >= deadline {
                    let log = log_tail(&self.log_path(index));
                    for &index in indexes {
                        self.kill(index);
                    }
                    return Err(LaunchError::NotReady {
                        timeout: READY_TIMEOUT,
                        log,
                    });
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        Ok(())
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for index in 0..self.nodes.len() {
            // A frozen process is killed too (SIGKILL needs no thaw).
            self.kill(index);
        }
    }
}

/// Sends a signal (`-STOP`, `-CONT`) to a process with the system's `kill`.
fn signal(pid: u32, signal: &str) {
    // A process that is gone already needs no signal.
    let _ = Command::new("kill")
        .arg(signal)
        .arg(pid.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Waits (up to 5 s) until every thread of process `pid` is stopped (`T` in
/// `/proc/<pid>/task/<tid>/stat`), or the process is gone.
fn wait_stopped(pid: u32) {
    let stopped = || {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return true;
        };
        tasks.flatten().all(|task| {
            std::fs::read_to_string(task.path().join("stat"))
                .ok()
                .and_then(|stat| {
                    // The state follows the command name, which is in parentheses.
                    let after = stat.rsplit_once(')')?.1;
                    after
                        .split_whitespace()
                        .next()
                        .map(|state| state == "T" || state == "t")
                })
                .unwrap_or(true)
        })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !stopped() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// The last lines of a log file.
fn log_tail(path: &Path) -> String {
    let log = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}
