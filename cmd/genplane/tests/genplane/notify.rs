//! The service manager's notification protocol of the real binary, as systemd speaks it to a
//! unit of `Type=notify`: each long-running role says `READY=1` once it is ready (the API
//! server: when `/readyz` passes), pings the watchdog while `WATCHDOG_USEC` asks for it, and
//! says `STOPPING=1` on SIGTERM; all-in-one speaks once, as one process. The test plays
//! systemd: a datagram socket of its own in `NOTIFY_SOCKET`.

#![allow(clippy::unwrap_used)]

use std::os::unix::net::UnixDatagram;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::clients::Raw;
use crate::support::{BIN, Process, eventually, start};

/// The test's end of the notification socket.
struct Manager {
    socket: UnixDatagram,
    path: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Manager {
    fn new() -> Manager {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let socket = UnixDatagram::bind(&path).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        Manager {
            socket,
            path,
            _dir: dir,
        }
    }

    /// `command` with the notification socket and a watchdog of `watchdog`.
    fn command(&self, watchdog: Duration, args: &[String]) -> Command {
        let mut command = Command::new(BIN);
        command
            .args(args)
            .env("NOTIFY_SOCKET", &self.path)
            .env("WATCHDOG_USEC", watchdog.as_micros().to_string());
        command
    }

    /// The next notification that has `key` (`READY=1`), with every one received on the way;
    /// fails when `process` exits or nothing comes before the deadline.
    fn until(&self, process: &mut Process, key: &str) -> (String, Vec<String>) {
        let mut seen = Vec::new();
        let mut buffer = [0u8; 4096];
        let message = eventually(&format!("{key} from the process"), || {
            // (each ask waits up to the socket's read timeout)
            if let Ok(n) = self.socket.recv(&mut buffer) {
                let message = String::from_utf8_lossy(&buffer[..n]).into_owned();
                if message.lines().any(|l| l == key) {
                    return Some(message);
                }
                seen.push(message);
            }
            assert!(
                process.exited().is_none() || key == "STOPPING=1",
                "it exited before {key} (saw {seen:?}); its log ends with:\n{}",
                process.tail()
            );
            None
        });
        (message, seen)
    }
}

/// Waits for `READY=1`, then for watchdog pings (at least two within the watchdog period),
/// then sends SIGTERM and waits for `STOPPING=1` and a clean exit. Answers the status line
/// that came with `READY=1`.
fn ready_watched_and_stopped(
    manager: &Manager,
    process: &mut Process,
    watchdog: Duration,
) -> String {
    let (ready, _) = manager.until(process, "READY=1");
    let status = ready
        .lines()
        .find_map(|l| l.strip_prefix("STATUS="))
        .unwrap_or_default()
        .to_owned();
    let started = Instant::now();
    let (_, before_first) = manager.until(process, "WATCHDOG=1");
    let (_, before_second) = manager.until(process, "WATCHDOG=1");
    assert!(
        started.elapsed() < watchdog * 2,
        "two pings took {:?} with a watchdog of {watchdog:?}",
        started.elapsed()
    );
    // One process, one readiness: nothing inside it says READY=1 again.
    for message in before_first.iter().chain(&before_second) {
        assert!(!message.contains("READY=1"), "{message}");
    }
    process.terminate();
    manager.until(process, "STOPPING=1");
    let exit = process.wait_exit(crate::support::DEADLINE);
    assert!(exit.success(), "{exit}: {}", process.tail());
    status
}

#[test]
fn the_api_server_is_ready_for_its_service_manager_when_readyz_passes() {
    let manager = Manager::new();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let watchdog = Duration::from_secs(1);
    let command = manager.command(
        watchdog,
        &[
            "apiserver".into(),
            "--bind-address=127.0.0.1".into(),
            "--secure-port=0".into(),
            format!("--data-dir={}", data.display()),
        ],
    );
    let mut process = Process::spawn("the apiserver", command, &dir.path().join("apiserver.log"));
    let (ready, _) = manager.until(&mut process, "READY=1");
    // Ready means ready: /readyz passes at once, at the address the status names.
    let address = ready
        .lines()
        .find_map(|l| l.strip_prefix("STATUS=serving on https://"))
        .unwrap_or_else(|| panic!("{ready}"))
        .to_owned();
    let raw = Raw::from_kubeconfig(&data.join("admin.kubeconfig"));
    let answer = raw.get("/readyz");
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert!(
        raw.address.ends_with(&address),
        "{} vs {address}",
        raw.address
    );
    let started = Instant::now();
    manager.until(&mut process, "WATCHDOG=1");
    manager.until(&mut process, "WATCHDOG=1");
    assert!(started.elapsed() < watchdog * 2);
    process.terminate();
    manager.until(&mut process, "STOPPING=1");
    assert!(process.wait_exit(crate::support::DEADLINE).success());
}

#[test]
fn the_controller_roles_and_all_in_one_speak_to_their_service_manager() {
    let server = start();
    let watchdog = Duration::from_secs(1);
    for role in ["controller-manager", "feature-controller"] {
        let manager = Manager::new();
        let kubeconfig = server.data().join(format!("{role}.kubeconfig"));
        let command = manager.command(
            watchdog,
            &[
                role.into(),
                format!("--kubeconfig={}", kubeconfig.display()),
                "--secure-port=0".into(),
                "--bind-address=127.0.0.1".into(),
            ],
        );
        let mut process = Process::spawn(
            &format!("the {role}"),
            command,
            &server.dir.path().join(format!("{role}-notify.log")),
        );
        let status = ready_watched_and_stopped(&manager, &mut process, watchdog);
        assert!(!status.is_empty(), "{role}");
    }

    // all-in-one is one process to its service manager: one READY=1, from its API server.
    let manager = Manager::new();
    let dir = tempfile::tempdir().unwrap();
    let command = manager.command(
        watchdog,
        &[
            "all-in-one".into(),
            "--bind-address=127.0.0.1".into(),
            "--secure-port=0".into(),
            format!("--data-dir={}", dir.path().join("data").display()),
        ],
    );
    let mut process = Process::spawn("all-in-one", command, &dir.path().join("all-in-one.log"));
    let status = ready_watched_and_stopped(&manager, &mut process, watchdog);
    assert!(status.starts_with("serving on https://"), "{status}");
}
