//! What the tests of the real binary share: the roles of `genplane` started as processes
//! through `genplane_test_support::process` (the one way every test binary starts and waits on
//! processes: a role binds port 0 itself and reports its address, or, where it cannot, is
//! started again on another port when it lost its port to another process; every wait is on a
//! condition with [`DEADLINE`], and a process that exits while a test waits on it fails the
//! test at once with its log), and clients built from the kubeconfig
//! (`genplane_test_support::clients`, kubectl). What only these tests need stays here: the
//! recording proxy and the test's own webhook server.

#![allow(clippy::unwrap_used, dead_code, unreachable_pub)]

pub mod chaos;
pub mod extension;
pub mod recorder;
pub mod webhook;

use std::path::PathBuf;
use std::process::{Command, Output};

pub use genplane_test_support::clients::{self, Raw, https, kube_client, kube_config};
pub use genplane_test_support::metrics::sample;
pub use genplane_test_support::process::{Process, free_port, next_log, ok, text};
pub use genplane_test_support::{
    DEADLINE, eventually, eventually_async, eventually_holds, eventually_ok, eventually_ok_async,
    fixture, kubectl_cache, kubectl_command, kubectl_path,
};

/// The executable under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_genplane");

/// A `genplane apiserver` on loopback with its own data directory.
pub struct Apiserver {
    pub process: Process,
    pub dir: tempfile::TempDir,
    pub port: u16,
}

impl Apiserver {
    /// The data directory.
    pub fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The admin's kubeconfig.
    pub fn kubeconfig(&self) -> PathBuf {
        self.data().join("admin.kubeconfig")
    }

    /// The CA certificate the server's certificate is signed by.
    pub fn ca(&self) -> PathBuf {
        self.data().join("pki/ca.crt")
    }

    /// Runs `kubectl` (a path or a name on `PATH`) with the admin's kubeconfig.
    pub fn kubectl(&self, kubectl: impl AsRef<std::ffi::OsStr>, args: &[&str]) -> Output {
        kubectl_command(kubectl, self.kubeconfig())
            .args(args)
            .output()
            .unwrap()
    }

    /// Waits, with `kubectl wait` as a user would, until the CRD `name` is Established.
    /// kubectl fails at once rather than waiting on a CRD whose `status.conditions` is still
    /// `null` (as upstream, and genplane, write it until the establishing controller's first
    /// update): only that answer is asked again.
    pub fn wait_established(&self, name: &str) {
        let crd = format!("crd/{name}");
        eventually(&format!("{crd} to be Established"), || {
            let out = self.kubectl(
                "kubectl",
                &["wait", "--for=condition=Established", "--timeout=30s", &crd],
            );
            if out.status.success() {
                return Some(());
            }
            let answer = text(&out);
            assert!(
                answer.contains(".status.conditions accessor error: <nil> is of the type <nil>"),
                "{answer}"
            );
            None
        });
    }

    /// Raw HTTPS requests as the admin.
    pub fn raw(&self) -> Raw {
        Raw::from_kubeconfig(&self.kubeconfig())
    }

    /// A kube-rs client as the admin.
    pub async fn client(&self) -> kube::Client {
        kube_client(&self.kubeconfig()).await
    }

    /// One scrape of the server's `/metrics` (read values with [`sample`]).
    pub fn metrics(&self) -> String {
        let answer = self.raw().get("/metrics");
        assert_eq!(answer.status, 200, "{}", answer.text());
        answer.text()
    }
}

/// Starts `genplane apiserver` on SQLite.
pub fn start() -> Apiserver {
    start_with(&[])
}

/// Starts `genplane apiserver` with `extra` flags (a storage backend, say).
pub fn start_with(extra: &[&str]) -> Apiserver {
    start_in(tempfile::tempdir().unwrap(), extra)
}

/// Starts `genplane apiserver` over the data directory in `dir` (which may hold an earlier
/// run's data) with `extra` flags, on a port it picks itself (unless `extra` names one: the
/// port of an earlier run, which its clients know), and waits until `/readyz` answers 200;
/// fails with the server's log if it exits first.
pub fn start_in(dir: tempfile::TempDir, extra: &[&str]) -> Apiserver {
    let log = next_log(dir.path(), "apiserver");
    let mut command = Command::new(BIN);
    command.args(["apiserver", "--bind-address=127.0.0.1"]);
    if !extra.iter().any(|a| a.starts_with("--secure-port")) {
        command.arg("--secure-port=0");
    }
    command
        .arg(format!("--data-dir={}", dir.path().join("data").display()))
        .args(extra);
    let mut process = Process::spawn("the apiserver", command, &log);
    let port = process.wait_for("its serving address", |p| {
        p.output().lines().find_map(|line| {
            let url = line.strip_prefix("genplane apiserver serving on https://")?;
            url.rsplit_once(':')?.1.parse().ok()
        })
    });
    let mut server = Apiserver { process, dir, port };
    let raw = server.raw();
    server.process.wait_for("/readyz", |_| {
        let answer = raw.try_request("GET", "/readyz", &[], None).ok()?;
        (answer.status == 200).then_some(())
    });
    server
}

/// Stops the server (SIGKILL) and hands back its directory for the next start.
pub fn stop(mut server: Apiserver) -> tempfile::TempDir {
    server.process.kill();
    // Swap the kept directory out of the server before it is dropped.
    std::mem::replace(&mut server.dir, tempfile::tempdir().unwrap())
}

/// A `genplane controller-manager` with its ops endpoints on loopback.
pub struct ControllerManager {
    pub process: Process,
    pub port: u16,
}

/// Starts `genplane ROLE` (a role whose one listener is its ops endpoints) with the role's own
/// kubeconfig (`<data>/ROLE.kubeconfig`, its user bound by the bootstrap RBAC policy), logging
/// to `<server dir>/<log>`, with its ops endpoints on a free port (another one when it loses
/// the port to another process); returns the process and the port.
pub fn start_ops_role(server: &Apiserver, role: &str, log: &str, extra: &[&str]) -> (Process, u16) {
    let kubeconfig = server.data().join(format!("{role}.kubeconfig"));
    assert!(kubeconfig.exists(), "{} is missing", kubeconfig.display());
    let log = server.dir.path().join(log);
    for _ in 0..5 {
        let port = free_port();
        let mut command = Command::new(BIN);
        command
            .arg(role)
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!("--secure-port={port}"))
            .arg("--bind-address=127.0.0.1")
            .args(extra);
        let mut process = Process::spawn(&format!("the {role}"), command, &log);
        // It logs its ops address once it is bound: then the port is its own.
        let bound = process.try_wait_for("its ops endpoints", |p| {
            Ok(p.output()
                .lines()
                .any(|l| l.contains("serving the ops endpoints over HTTPS"))
                .then_some(()))
        });
        match bound {
            Ok(()) => return (process, port),
            Err(_) if process.output().contains("in use") => {}
            Err(status) => panic!(
                "the {role} exited ({status}); its log ends with:\n{}",
                process.tail()
            ),
        }
    }
    panic!("the {role} lost its port five times");
}

impl ControllerManager {
    /// Starts a controller-manager with the controller-manager's own kubeconfig (its own user,
    /// bound by the bootstrap RBAC policy), logging to `<server dir>/<log>`, with its ops
    /// endpoints on a free port (another one when it loses the port to another process).
    pub fn start(server: &Apiserver, log: &str, extra: &[&str]) -> ControllerManager {
        let mut args = vec!["-v=2"];
        args.extend_from_slice(extra);
        let (process, port) = start_ops_role(server, "controller-manager", log, &args);
        ControllerManager { process, port }
    }

    /// `GET path` on the ops port, as [`ops_get`] asks it.
    pub fn get(&self, path: &str) -> (u16, String) {
        ops_get(self.port, path)
    }
}

/// `GET path` on the ops endpoints of a role on `port` (a self-signed certificate), as
/// (status, body); status 0 when nothing answered.
pub fn ops_get(port: u16, path: &str) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-sk", "-w", "\n%{http_code}"])
        .arg(format!("https://127.0.0.1:{port}{path}"))
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let (body, code) = text.rsplit_once('\n').unwrap();
    (code.parse().unwrap_or(0), body.to_owned())
}

/// An etcd of its own for a test, on free loopback ports (started again on others when it
/// loses a race for them).
pub fn etcd(runtime: &tokio::runtime::Runtime) -> genplane_storage_etcd::testing::EtcdServer {
    runtime
        .block_on(genplane_storage_etcd::testing::EtcdServer::start())
        .unwrap()
}

/// kubectl (whatever version is installed), 1.33 and 1.27.
pub fn kubectl_binaries() -> Vec<String> {
    ["kubectl", "kubectl.1.33", "kubectl.1.27"]
        .into_iter()
        .map(|name| kubectl_path(name).display().to_string())
        .collect()
}
