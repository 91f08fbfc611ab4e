//! The chaos test across hosts: the Compose HA cluster (manifests/compose/compose.yaml: three
//! etcd members, two API servers, two controller-managers, a feature-controller, the PKI made
//! by its one-shot step), each role in its own container on the cluster's private network,
//! under the chaos workload of `support::chaos` (a writer and a watcher through each API
//! server's published port) while containers are killed (`docker kill`), frozen (`docker
//! pause`) and cut off from the private network (`docker network disconnect`): the etcd leader
//! or the member the first API server uses, an API server, the leading controller-manager
//! (found from the Lease's holderIdentity). `ha_chaos` is its little brother on loopback.
//!
//! What a user must observe: no acknowledged write is lost; every watcher's stream is in order
//! and without gaps, or ends with a 410 after which the watcher's new list is consistent with
//! it; at no time do both controller-managers lead (each one's
//! `leader_election_master_status`, read together every half second); a controller-manager
//! fault ends with the other leading and the controllers acting (a new namespace gets its
//! ServiceAccount). Each fault's report (writes acknowledged and lost, watcher gaps and 410s,
//! recovery times, leaders seen) is printed; the times are never asserted.
//!
//! The images are built from the executable under test (`hack/image.sh --genplane`, with a tag
//! of this run's own and the etcd of the machine's etcd-server and etcd-client packages) and
//! removed at the end, as is the cluster: a Compose project of this run's own, its API servers
//! on free ports of 127.0.0.1. A run killed before it could clean up is cleaned up by the next
//! one. Skipped, saying so, only where Docker is not installed.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, PostParams};
use serde_json::json;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::support::chaos::{
    RECOVERY_LIMIT, Record, Recovery, SERVERS, Verdict, Workload, preferred_endpoint, raw_get,
};
use crate::support::{BIN, free_port, sample, text};

/// The pause between two writes of one writer.
const WRITE_PAUSE: Duration = Duration::from_millis(40);
/// How many writes each writer gets acknowledged after each repair, before the next fault.
const STEADY_WRITES: usize = 10;
/// How long a fault of etcd or of an API server lasts at least: the fault's length, not a wait
/// for something (a controller-manager's lasts until the other leads). Long enough for etcd to
/// elect a leader (its election timeout is 1 s) and for requests in flight to time out.
const HOLD: Duration = Duration::from_secs(5);
/// How often the controller-managers' leadership is read.
const LEADER_POLL: Duration = Duration::from_millis(500);
/// The prefix of this test's Compose projects and image tags (then the test process's id).
const PREFIX: &str = "genplane-chaos-";
/// The roles the cluster runs (hack/image.sh --roles).
const ROLES: [&str; 3] = ["apiserver", "controller-manager", "feature-controller"];
/// The controller-managers, and the series of their leadership gauge.
const MANAGERS: [&str; 2] = ["controller-manager-1", "controller-manager-2"];
const LEADING: &str = "leader_election_master_status{name=\"genplane-controller-manager\"}";
/// The Compose network the roles share, without a way out.
const PRIVATE: &str = "control-plane";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn docker(args: &[&str]) -> Output {
    Command::new("docker").args(args).output().unwrap()
}

/// `docker ARGS`, which must succeed; its standard output.
fn docker_ok(args: &[&str]) -> String {
    let out = docker(args);
    assert!(out.status.success(), "docker {args:?}: {}", text(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// [`docker`] off the runtime's threads.
async fn docker_async(args: Vec<String>) -> Output {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        docker(&args)
    })
    .await
    .unwrap()
}

/// Runs `hack/lib/compose.sh`'s `compose` for `project` with `args` and `env`.
fn compose(project: &str, env: &[(&str, String)], args: &[&str]) -> Output {
    Command::new("bash")
        .arg("-c")
        .arg(r#". hack/lib/compose.sh && compose_init "$0" && compose "$@""#)
        .arg(project)
        .args(args)
        .current_dir(repo())
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap()
}

/// Removes what earlier runs of this test left behind when they were killed before they could
/// (their process is gone): their projects' containers, networks and volumes, and their images.
fn remove_leftovers() {
    let dead = |name: &str| {
        let Some(rest) = name.strip_prefix(PREFIX) else {
            return false;
        };
        let pid = rest.split('-').next().unwrap_or_default();
        !pid.is_empty() && !Path::new("/proc").join(pid).exists()
    };
    let label = "{{.Label \"com.docker.compose.project\"}}";
    let mut projects: Vec<String> = Vec::new();
    for kind in [["ps", "-a"], ["network", "ls"], ["volume", "ls"]] {
        let listed = docker_ok(&[
            kind[0],
            kind[1],
            "--filter",
            "label=com.docker.compose.project",
            "--format",
            label,
        ]);
        projects.extend(listed.lines().filter(|p| dead(p)).map(str::to_owned));
    }
    projects.sort();
    projects.dedup();
    for project in projects {
        eprintln!("removing {project}, left behind by a killed run");
        let containers = docker_ok(&[
            "ps",
            "-a",
            "-q",
            "--filter",
            &format!("label=com.docker.compose.project={project}"),
        ]);
        for id in containers.lines() {
            docker(&["unpause", id]);
        }
        compose(
            &project,
            &[],
            &["down", "-v", "--remove-orphans", "-t", "1"],
        );
    }
    let images = docker_ok(&["images", "--format", "{{.Repository}}:{{.Tag}}"]);
    for image in images.lines() {
        let tag = image.rsplit_once(':').map(|(_, t)| t).unwrap_or_default();
        if image.starts_with("genplane-") && dead(&format!("genplane-{tag}")) {
            docker(&["rmi", image]);
        }
    }
}

/// The Compose cluster of one run: its project, its images' tag, its API servers' ports; torn
/// down with its images when dropped.
struct Cluster {
    project: String,
    ports: [u16; 2],
    dir: tempfile::TempDir,
    /// Each service's container.
    containers: BTreeMap<String, String>,
}

impl Cluster {
    fn new() -> Cluster {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        Cluster {
            project: format!("{PREFIX}{}-{nanos}", std::process::id()),
            ports: [0, 0],
            dir: tempfile::tempdir().unwrap(),
            containers: BTreeMap::new(),
        }
    }

    /// The images' tag: `chaos-<pid>-<nanos>`.
    fn tag(&self) -> &str {
        self.project.strip_prefix("genplane-").unwrap()
    }

    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("GENPLANE_TAG", self.tag().to_owned()),
            ("GENPLANE_ETCD_TAG", self.tag().to_owned()),
            ("GENPLANE_APISERVER_1_PORT", self.ports[0].to_string()),
            ("GENPLANE_APISERVER_2_PORT", self.ports[1].to_string()),
        ]
    }

    fn compose(&self, args: &[&str]) -> Output {
        compose(&self.project, &self.env(), args)
    }

    /// The images of the roles and of etcd, from the executable under test.
    fn build_images(&self) {
        let out = Command::new(repo().join("hack/image.sh"))
            .args(["--genplane", BIN, "--tag", self.tag(), "--no-latest"])
            .args(["--installed-etcd", "--roles", &ROLES.join(",")])
            .output()
            .unwrap();
        assert!(out.status.success(), "hack/image.sh: {}", text(&out));
    }

    /// `compose up`, on free ports (others when another process took one meanwhile); then
    /// the admin's kubeconfig and each service's container.
    fn up(&mut self) {
        for attempt in 1.. {
            self.ports = [free_port(), free_port()];
            if self.ports[0] == self.ports[1] {
                continue;
            }
            let out = self.compose(&["up", "-d"]);
            if out.status.success() {
                break;
            }
            let taken = text(&out).contains("already");
            assert!(taken && attempt < 5, "compose up: {}", text(&out));
        }
        let out = self.compose(&["run", "--rm", "-T", "kubeconfig"]);
        assert!(out.status.success(), "the kubeconfig: {}", text(&out));
        std::fs::write(self.kubeconfig(), &out.stdout).unwrap();
        for service in ["etcd-1", "etcd-2", "etcd-3", "apiserver-1", "apiserver-2"]
            .into_iter()
            .chain(MANAGERS)
        {
            let out = Command::new("bash")
                .arg("-c")
                .arg(r#". hack/lib/compose.sh && compose_init "$0" && compose_container "$1""#)
                .args([&self.project, service])
                .current_dir(repo())
                .output()
                .unwrap();
            let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            assert!(!id.is_empty(), "no container of {service}: {}", text(&out));
            self.containers.insert(service.to_owned(), id);
        }
    }

    fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("admin.kubeconfig")
    }

    /// A client of API server `index` (the kubeconfig's context `genplane` or `genplane-2`)
    /// that reports every answer as it comes (no retries of its own).
    async fn client(&self, index: usize) -> kube::Client {
        let kubeconfig = kube::config::Kubeconfig::read_from(self.kubeconfig()).unwrap();
        let options = kube::config::KubeConfigOptions {
            context: Some(["genplane", "genplane-2"][index].to_owned()),
            ..Default::default()
        };
        let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .unwrap();
        config.default_retry = false;
        kube::Client::try_from(config).unwrap()
    }

    fn container(&self, service: &str) -> String {
        self.containers[service].clone()
    }

    /// The private network's name.
    fn private_network(&self) -> String {
        docker_ok(&[
            "network",
            "ls",
            "-q",
            "--filter",
            &format!("label=com.docker.compose.project={}", self.project),
            "--filter",
            &format!("label=com.docker.compose.network={PRIVATE}"),
        ])
        .trim()
        .to_owned()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // What the services said, to explain the failure.
            eprintln!("{}", text(&self.compose(&["ps"])));
            for (service, id) in &self.containers {
                let logs = docker(&["logs", "--tail", "40", id]);
                eprintln!("--- {service}, its last log lines:\n{}", text(&logs));
            }
        }
        // A frozen container cannot be stopped.
        for id in self.containers.values() {
            docker(&["unpause", id]);
        }
        let out = self.compose(&["down", "-v", "--remove-orphans", "-t", "1"]);
        if !out.status.success() {
            eprintln!("compose down: {}", text(&out));
        }
        for role in ROLES.iter().chain(&["etcd"]) {
            docker(&["rmi", &format!("genplane-{role}:{}", self.tag())]);
        }
    }
}

/// What a fault does to a container, and how it is undone.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// `docker kill`, then `docker start`.
    Kill,
    /// `docker pause`, then `docker unpause`.
    Pause,
    /// `docker network disconnect` from the private network, then `connect` with the same
    /// names (aliases) on it.
    Disconnect,
}

/// A fault done to a service's container.
struct Inflicted {
    fault: Fault,
    service: String,
    container: String,
    network: String,
    aliases: Vec<String>,
}

impl Inflicted {
    async fn new(cluster: &Cluster, fault: Fault, service: &str) -> Inflicted {
        let container = cluster.container(service);
        let network = cluster.private_network();
        let inspected = docker_ok(&[
            "inspect",
            "-f",
            "{{json .NetworkSettings.Networks}}",
            &container,
        ]);
        let networks: serde_json::Value = serde_json::from_str(&inspected).unwrap();
        let aliases = networks
            .as_object()
            .unwrap()
            .values()
            .find(|n| {
                n["NetworkID"]
                    .as_str()
                    .is_some_and(|id| id.starts_with(&network))
            })
            .and_then(|n| n["Aliases"].as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|a| Some(a.as_str()?.to_owned()))
                    .collect()
            })
            .unwrap_or_default();
        let inflicted = Inflicted {
            fault,
            service: service.to_owned(),
            container,
            network,
            aliases,
        };
        let args = match fault {
            Fault::Kill => vec!["kill".to_owned(), inflicted.container.clone()],
            Fault::Pause => vec!["pause".to_owned(), inflicted.container.clone()],
            Fault::Disconnect => vec![
                "network".to_owned(),
                "disconnect".to_owned(),
                inflicted.network.clone(),
                inflicted.container.clone(),
            ],
        };
        let out = docker_async(args).await;
        assert!(out.status.success(), "{fault:?} {service}: {}", text(&out));
        inflicted
    }

    async fn repair(&self) {
        let args = match self.fault {
            Fault::Kill => vec!["start".to_owned(), self.container.clone()],
            Fault::Pause => vec!["unpause".to_owned(), self.container.clone()],
            Fault::Disconnect => {
                let mut args = vec!["network".to_owned(), "connect".to_owned()];
                for alias in &self.aliases {
                    args.extend(["--alias".to_owned(), alias.clone()]);
                }
                args.extend([self.network.clone(), self.container.clone()]);
                args
            }
        };
        let out = docker_async(args).await;
        assert!(
            out.status.success(),
            "repairing {}: {}",
            self.service,
            text(&out)
        );
    }

    fn describe(&self, role: &str) -> String {
        let verb = match self.fault {
            Fault::Kill => "docker kill",
            Fault::Pause => "docker pause",
            Fault::Disconnect => "docker network disconnect",
        };
        format!("{verb} {} ({role})", self.service)
    }
}

/// One reading of the controller-managers' leadership.
#[derive(Clone, Debug)]
struct Sample {
    at: Instant,
    /// The Lease's holder (its hostname: the service), when an API server answered.
    holder: Option<String>,
    /// Each controller-manager's gauge, when it answered (a frozen one does not).
    leading: [Option<bool>; 2],
}

/// The Lease's holder, through the first API server that answers.
async fn lease_holder(clients: &[kube::Client; 2]) -> Option<String> {
    for client in clients {
        let api = Api::<Lease>::namespaced(client.clone(), "kube-system");
        let read = tokio::time::timeout(
            Duration::from_secs(2),
            api.get_opt("genplane-controller-manager"),
        )
        .await;
        if let Ok(Ok(lease)) = read {
            let holder = lease
                .and_then(|l| l.spec?.holder_identity)
                .unwrap_or_default();
            return Some(holder.split('_').next().unwrap_or_default().to_owned());
        }
    }
    None
}

/// Whether the controller-manager in `container` says it leads (its gauge), if it answers
/// within [`LEADER_POLL`] times four. A reading caught by `docker pause` is frozen with the
/// container until it is unpaused: the readings go on without it meanwhile.
async fn leading(container: String) -> Option<bool> {
    let exec = docker_async(vec![
        "exec".into(),
        container,
        "/usr/local/bin/genplane".into(),
        "healthcheck".into(),
        "https://127.0.0.1:10257/metrics".into(),
    ]);
    let out = tokio::time::timeout(LEADER_POLL * 4, exec).await.ok()?;
    if !out.status.success() {
        return None;
    }
    sample::<u8>(&String::from_utf8_lossy(&out.stdout), LEADING).map(|v| v == 1)
}

/// Reads the leadership every [`LEADER_POLL`] until `stop`: both gauges at once.
async fn poll_leaders(
    clients: [kube::Client; 2],
    managers: [String; 2],
    samples: Arc<Mutex<Vec<Sample>>>,
    stop: watch::Receiver<bool>,
) {
    while !*stop.borrow() {
        let at = Instant::now();
        let (holder, first, second) = tokio::join!(
            lease_holder(&clients),
            leading(managers[0].clone()),
            leading(managers[1].clone()),
        );
        samples.lock().unwrap().push(Sample {
            at,
            holder,
            leading: [first, second],
        });
        tokio::time::sleep(LEADER_POLL.saturating_sub(at.elapsed())).await;
    }
}

/// The leading controller-manager and the other, from the Lease.
async fn lease_leader(clients: &[kube::Client; 2]) -> (usize, usize) {
    let since = Instant::now();
    loop {
        if let Some(holder) = lease_holder(clients).await
            && let Some(index) = MANAGERS.iter().position(|m| **m == holder)
        {
            return (index, 1 - index);
        }
        assert!(since.elapsed() < RECOVERY_LIMIT, "nobody holds the Lease");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `etcdctl ARGS` in etcd `member`'s container, against it.
async fn etcdctl(cluster: &Cluster, member: &str, args: &[&str]) -> Output {
    let mut command = vec!["exec".to_owned(), cluster.container(member)];
    command.extend(
        [
            "etcdctl",
            "--endpoints=http://127.0.0.1:2379",
            "--command-timeout=2s",
        ]
        .map(String::from),
    );
    command.extend(args.iter().map(|a| (*a).to_owned()));
    docker_async(command).await
}

/// The etcd leader's service, asking each member in turn (`etcdctl endpoint status`).
async fn etcd_leader(cluster: &Cluster) -> String {
    let since = Instant::now();
    loop {
        for member in ["etcd-1", "etcd-2", "etcd-3"] {
            let out = etcdctl(cluster, member, &["endpoint", "status", "-w", "json"]).await;
            let Ok(status) = serde_json::from_slice::<serde_json::Value>(&out.stdout) else {
                continue;
            };
            let status = &status[0]["Status"];
            if status["leader"].as_u64().is_some()
                && status["leader"] == status["header"]["member_id"]
            {
                return member.to_owned();
            }
        }
        assert!(since.elapsed() < RECOVERY_LIMIT, "etcd has no leader");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until etcd `member` answers as part of a cluster with a quorum again.
async fn etcd_healthy(cluster: &Cluster, member: &str) {
    let since = Instant::now();
    loop {
        let out = etcdctl(cluster, member, &["endpoint", "health"]).await;
        if out.status.success() {
            return;
        }
        assert!(
            since.elapsed() < RECOVERY_LIMIT,
            "{member} not healthy again: {}",
            text(&out)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until a reading taken after `since` is `wanted`; how long after `since` it was taken.
async fn reading(
    samples: &Mutex<Vec<Sample>>,
    since: Instant,
    what: &str,
    wanted: impl Fn(&Sample) -> bool,
) -> Duration {
    loop {
        let first = samples
            .lock()
            .unwrap()
            .iter()
            .find(|s| s.at >= since && wanted(s))
            .map(|s| s.at - since);
        if let Some(first) = first {
            return first;
        }
        if since.elapsed() >= RECOVERY_LIMIT {
            let samples = samples.lock().unwrap();
            let seen: Vec<String> = samples
                .iter()
                .filter(|s| s.at >= since)
                .map(|s| {
                    let at = seconds(s.at - since);
                    format!("{at} Lease {:?} gauges {:?}", s.holder, s.leading)
                })
                .collect();
            panic!("{what} did not happen; the readings:\n{}", seen.join("\n"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// When, after `since`, a reading first showed `manager` leading.
async fn leads(samples: &Mutex<Vec<Sample>>, manager: usize, since: Instant) -> Duration {
    let what = format!("{} leading", MANAGERS[manager]);
    reading(samples, since, &what, |s| s.leading[manager] == Some(true)).await
}

/// Creates namespace `name` and waits until the controllers have made its ServiceAccount
/// `default`; when they had.
async fn controllers_act(client: &kube::Client, name: &str, since: Instant) -> Duration {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    let namespaces = Api::<Namespace>::all(client.clone());
    let accounts = Api::<ServiceAccount>::namespaced(client.clone(), name);
    let mut created = false;
    loop {
        if !created {
            created = match namespaces.create(&PostParams::default(), &ns).await {
                Ok(_) => true,
                Err(kube::Error::Api(status)) if status.code == 409 => true,
                Err(_) => false,
            };
        } else if let Ok(Some(_)) = accounts.get_opt("default").await {
            return since.elapsed();
        }
        assert!(
            since.elapsed() < RECOVERY_LIMIT,
            "the controllers did not act in {name}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// How many times Docker has started `service`'s container again (its restart policy).
fn restart_count(cluster: &Cluster, service: &str) -> u32 {
    let container = cluster.container(service);
    let count = docker_ok(&["inspect", "-f", "{{.RestartCount}}", &container]);
    count.trim().parse().unwrap()
}

/// What `service` logged since `since`.
fn logs_since(cluster: &Cluster, service: &str, since: Instant) -> String {
    let ago = format!("{}s", since.elapsed().as_secs() + 1);
    let out = docker(&["logs", "--since", &ago, &cluster.container(service)]);
    text(&out)
}

/// What happened during one fault: from its start to the next fault's.
struct Phase {
    what: String,
    started: Instant,
    held: Duration,
    /// Recovery figures, as printed.
    recovery: Vec<String>,
}

fn seconds(d: Duration) -> String {
    format!("{:.2}s", d.as_secs_f64())
}

fn recovery_figure(servers: &[usize], recovery: &Recovery) -> String {
    servers
        .iter()
        .map(|&i| {
            format!(
                "{} writes {} watch {}",
                SERVERS[i],
                seconds(recovery.write[i]),
                seconds(recovery.watch[i])
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The leaders in `samples` between `from` and `to`: the Lease's holders and the gauges that
/// said 1, each run of the same named once; and the readings where both gauges said 1.
fn leaders_between(samples: &[Sample], from: Instant, to: Instant) -> (String, usize) {
    let mut holders: Vec<String> = Vec::new();
    let mut gauges: Vec<String> = Vec::new();
    let mut both = 0;
    for sample in samples.iter().filter(|s| s.at >= from && s.at < to) {
        let holder = sample.holder.clone().unwrap_or_else(|| "?".into());
        if holders.last() != Some(&holder) {
            holders.push(holder);
        }
        let leading: Vec<&str> = (0..2)
            .filter(|&i| sample.leading[i] == Some(true))
            .map(|i| MANAGERS[i])
            .collect();
        let leading = match leading.as_slice() {
            [] => "none".to_owned(),
            [one] => (*one).to_owned(),
            _ => {
                both += 1;
                "BOTH".to_owned()
            }
        };
        if gauges.last() != Some(&leading) {
            gauges.push(leading);
        }
    }
    (
        format!(
            "Lease {}; gauges {}",
            holders.join(" > "),
            gauges.join(" > ")
        ),
        both,
    )
}

fn report(
    phases: &[Phase],
    ended: Instant,
    verdict: &Verdict,
    record: &Record,
    samples: &[Sample],
) -> usize {
    let mut overlaps = 0;
    println!("compose-chaos: per fault (the writers' and watchers' figures per API server a | b)");
    for (number, phase) in phases.iter().enumerate() {
        let to = phases.get(number + 1).map_or(ended, |p| p.started);
        let acked = [0, 1].map(|i| {
            let acks = record.acks[i].lock().unwrap();
            acks.iter()
                .filter(|a| a.sent >= phase.started && a.sent < to)
                .count()
        });
        let failed = [0, 1].map(|i| {
            let failures = record.failures.lock().unwrap();
            failures
                .iter()
                .filter(|(s, _, at)| *s == i && *at >= phase.started && *at < to)
                .count()
        });
        let (lost, gaps) = verdict.between(phase.started, to);
        let expired = [0, 1].map(|i| record.expired_between(i, phase.started, to));
        let (leaders, both) = leaders_between(samples, phase.started, to);
        overlaps += both;
        println!(
            "  {}. {} (held {}, phase {})",
            number,
            phase.what,
            seconds(phase.held),
            seconds(to - phase.started)
        );
        println!(
            "     writes acknowledged {} | {}, failed or unknown {} | {}; lost {lost}; watcher gaps {} | {}; 410s {} | {}",
            acked[0], acked[1], failed[0], failed[1], gaps[0], gaps[1], expired[0], expired[1]
        );
        println!("     recovery: {}", phase.recovery.join("; "));
        println!("     leaders seen: {leaders}; both leading in {both} readings");
    }
    overlaps
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_compose_cluster_under_faults_loses_no_acknowledged_write() {
    if Command::new("docker").arg("--version").output().is_err() {
        eprintln!("docker is not installed: the Compose cluster was not put under faults");
        return;
    }
    let started = Instant::now();
    let (cluster, images_built) = tokio::task::spawn_blocking(|| {
        remove_leftovers();
        let mut cluster = Cluster::new();
        let started = Instant::now();
        cluster.build_images();
        let images_built = started.elapsed();
        cluster.up();
        (cluster, images_built)
    })
    .await
    .unwrap();
    let up = started.elapsed();
    let clients = [cluster.client(0).await, cluster.client(1).await];
    for client in &clients {
        let since = Instant::now();
        while raw_get(client, "/readyz").await.0 != 200 {
            assert!(
                since.elapsed() < RECOVERY_LIMIT * 2,
                "an API server is not ready"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let ready = started.elapsed();

    let samples = Arc::new(Mutex::new(Vec::new()));
    let (stop_polling, polling_stopped) = watch::channel(false);
    let poller = tokio::spawn(poll_leaders(
        clients.clone(),
        MANAGERS.map(|m| cluster.container(m)),
        samples.clone(),
        polling_stopped,
    ));
    let workload = Workload::start(clients.clone(), WRITE_PAUSE).await;
    let since = Instant::now();
    let figure = workload.recovery("start", since).await;
    let (leader, _) = lease_leader(&clients).await;
    let leader_since = leads(&samples, leader, since).await;
    let mut phases = vec![Phase {
        what: "start".into(),
        started: since,
        held: Duration::ZERO,
        recovery: vec![
            format!(
                "first writes and events: {}",
                recovery_figure(&[0, 1], &figure)
            ),
            format!("{} leads after {}", MANAGERS[leader], seconds(leader_since)),
        ],
    }];

    let faults = [Fault::Kill, Fault::Pause, Fault::Disconnect];
    for (round, fault) in faults.into_iter().enumerate() {
        // etcd: the leader when it is killed or cut off, the member the first API server uses
        // when it is frozen. Writes and watches go on through both API servers.
        let (member, role) = match fault {
            Fault::Pause => {
                let endpoint = preferred_endpoint(&clients[0]).await;
                let host = endpoint.trim_start_matches("http://");
                let member = host.split(':').next().unwrap().to_owned();
                (member, "the etcd member API server a uses")
            }
            Fault::Kill | Fault::Disconnect => (etcd_leader(&cluster).await, "the etcd leader"),
        };
        let since = Instant::now();
        let inflicted = Inflicted::new(&cluster, fault, &member).await;
        let what = inflicted.describe(role);
        let during = workload.recovery(&what, since).await;
        tokio::time::sleep(HOLD.saturating_sub(since.elapsed())).await;
        let held = since.elapsed();
        inflicted.repair().await;
        let repaired = Instant::now();
        etcd_healthy(&cluster, &member).await;
        let back = repaired.elapsed();
        phases.push(Phase {
            what,
            started: since,
            held,
            recovery: vec![
                format!("during the fault {}", recovery_figure(&[0, 1], &during)),
                format!("{member} healthy {} after the repair", seconds(back)),
            ],
        });
        workload.steady(STEADY_WRITES).await;

        // An API server: its writer and watcher wait for it; the other's go on.
        let faulty = if round == 1 { 0 } else { 1 };
        let other = 1 - faulty;
        let service = format!("apiserver-{}", faulty + 1);
        let since = Instant::now();
        let inflicted = Inflicted::new(&cluster, fault, &service).await;
        let what = inflicted.describe(&format!("API server {}", SERVERS[faulty]));
        let during = workload.recovered(&what, since, &[other]).await;
        tokio::time::sleep(HOLD.saturating_sub(since.elapsed())).await;
        let held = since.elapsed();
        inflicted.repair().await;
        let repaired = Instant::now();
        let back = workload.recovered(&what, repaired, &[faulty]).await;
        phases.push(Phase {
            what,
            started: since,
            held,
            recovery: vec![
                format!("during the fault {}", recovery_figure(&[other], &during)),
                format!("after the repair {}", recovery_figure(&[faulty], &back)),
            ],
        });
        workload.steady(STEADY_WRITES).await;

        // The leading controller-manager: the other takes the Lease and the controllers act;
        // once repaired, the first stands by.
        let (leader, standby) = lease_leader(&clients).await;
        let restarts_before = restart_count(&cluster, MANAGERS[leader]);
        let since = Instant::now();
        let inflicted = Inflicted::new(&cluster, fault, MANAGERS[leader]).await;
        let what = inflicted.describe("the leading controller-manager");
        let acted = controllers_act(&workload.client(0), &format!("acts-{round}"), since).await;
        let took_over = leads(&samples, standby, since).await;
        let during = workload.recovery(&what, since).await;
        let held = since.elapsed();
        inflicted.repair().await;
        let repaired = Instant::now();
        // It answers again, standing by (having exited when it found it had lost the Lease,
        // and been started again by Docker, or not).
        let standing = format!("{} standing by", MANAGERS[leader]);
        let back = reading(&samples, repaired, &standing, |s| {
            s.leading[leader] == Some(false)
        })
        .await;
        let restarts = restart_count(&cluster, MANAGERS[leader]) - restarts_before;
        let stopped =
            if logs_since(&cluster, MANAGERS[leader], since).contains("leaderelection lost") {
                "it logged leaderelection lost"
            } else {
                "it logged no leaderelection lost"
            };
        phases.push(Phase {
            what,
            started: since,
            held,
            recovery: vec![
                format!("{} leads after {}", MANAGERS[standby], seconds(took_over)),
                format!(
                    "{} restarted {restarts} times by Docker ({stopped})",
                    MANAGERS[leader]
                ),
                format!("the controllers act after {}", seconds(acted)),
                format!("during the fault {}", recovery_figure(&[0, 1], &during)),
                format!(
                    "{} stands by {} after the repair",
                    MANAGERS[leader],
                    seconds(back)
                ),
            ],
        });
        workload.steady(STEADY_WRITES).await;
    }

    let record = workload.record.clone();
    let ended = Instant::now();
    let verdict = workload.finish(0).await;
    stop_polling.send_replace(true);
    poller.await.unwrap();
    let samples = samples.lock().unwrap().clone();
    let overlaps = report(&phases, ended, &verdict, &record, &samples);
    // The last readings: exactly one leads, the Lease's holder.
    let last = samples.last().unwrap();
    println!(
        "compose-chaos: {} acknowledged writes, {} failed or unknown, watch events a | b {} | {}, {} leadership readings; images built in {}, cluster up in {}, ready in {}, whole test {}",
        verdict.acked,
        record.failures.lock().unwrap().len(),
        record.events(0),
        record.events(1),
        samples.len(),
        seconds(images_built),
        seconds(up),
        seconds(ready),
        seconds(started.elapsed())
    );
    verdict.assert_clean(&record);
    assert_eq!(overlaps, 0, "both controller-managers led at once");
    let leading: Vec<usize> = (0..2).filter(|&i| last.leading[i] == Some(true)).collect();
    assert_eq!(leading.len(), 1, "at the end: {last:?}");
    assert_eq!(
        last.holder.as_deref(),
        Some(MANAGERS[leading[0]]),
        "{last:?}"
    );
    drop(cluster);
}
