//! The units under `manifests/systemd`, started by a real systemd: a Docker container whose PID 1
//! is systemd, from a Debian root `hack/systemd-host.sh` builds here (no registry). The units
//! are installed with the commands of `manifests/systemd/README.md`, the executable under test
//! standing for the release build, and the test checks what their user sees: `systemctl start`
//! returns once `/readyz` passes, every role is `active (running)`, kubectl works with the
//! admin's kubeconfig, the roles' logs are in the journal, the watchdog hears from a role (and
//! restarts one that stops), `systemctl stop` and `restart` end a role cleanly and in time
//! after it said `STOPPING=1`, a role killed with SIGKILL is started again, the etcd unit
//! replaces the SQLite one, and `systemd-analyze security` rates every unit.
//!
//! Skipped, saying so, only where Docker is not installed. The container has no network but
//! its loopback and powers itself off after ten minutes, should the test be killed before it
//! removes it.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::support::{BIN, eventually, kubectl_path, text};
use genplane_test_support::eventually_within;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Where the repository's files are in the container (the README's commands run there).
const SRC: &str = "/src";

/// kubectl with the admin's kubeconfig, as the README uses it.
const KUBECTL: &str =
    "kubectl --kubeconfig /var/lib/genplane/admin.kubeconfig --request-timeout=10s";

/// The worst exposure `systemd-analyze security` may rate a unit (tenths: 12 is "1.2 OK"), as
/// manifests/systemd/README.md reports it.
const EXPOSURE: u32 = 12;

/// A container of the systemd host, removed when dropped.
struct Host {
    name: String,
}

impl Host {
    /// Starts a container of `image` with the executable under test, the unit files and
    /// kubectl 1.33 mounted, and waits until its systemd has booted.
    fn start(image: &str) -> Host {
        let name = format!(
            "genplane-systemd-test-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos()
        );
        let mount = |from: &Path, to: &str| format!("{}:{to}:ro", from.display());
        let kubectl = kubectl_path("kubectl.1.33");
        let out = Command::new("docker")
            .args(["run", "-d", "--rm", "--name", &name])
            .args(["--label", "genplane.test=systemd"])
            // What systemd needs to run as PID 1 and to apply the units' sandboxing (mount
            // and other namespaces, seccomp filters of its own), and no more.
            .args(["--cap-add", "SYS_ADMIN"])
            .args(["--security-opt", "seccomp=unconfined"])
            .args(["--security-opt", "apparmor=unconfined"])
            .args(["--cgroupns", "private"])
            .args(["--tmpfs", "/run", "--tmpfs", "/run/lock", "--tmpfs", "/tmp"])
            .args(["--stop-signal", "SIGRTMIN+3", "--network", "none"])
            .args(["-v", &mount(Path::new(BIN), "/src/target/release/genplane")])
            .args([
                "-v",
                &mount(&repo().join("manifests/systemd"), "/src/manifests/systemd"),
            ])
            .args(["-v", &mount(&kubectl, "/usr/local/bin/kubectl")])
            .arg(image)
            .output()
            .unwrap();
        assert!(out.status.success(), "docker run: {}", text(&out));
        let host = Host { name };
        // systemd answers once it has set up its own socket.
        let state = eventually("systemd to boot in the container", || {
            let out = host.sh("systemctl is-system-running --wait");
            if String::from_utf8_lossy(&out.stderr).contains("is not running") {
                let logs = Command::new("docker").args(["logs", &host.name]).output();
                panic!(
                    "systemd stopped: {}",
                    logs.as_ref().map(text).unwrap_or_default()
                );
            }
            let state = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            (!state.is_empty()).then_some(state)
        });
        assert_eq!(
            state,
            "running",
            "{}",
            host.ok("systemctl --failed --no-pager")
        );
        host.ok("systemd-run --quiet --on-active=600 /bin/systemctl poweroff");
        host
    }

    /// Runs `script` with `sh` in the container, in the repository's directory, for at most
    /// two minutes.
    fn sh(&self, script: &str) -> Output {
        Command::new("docker")
            .args(["exec", "-w", SRC, &self.name, "timeout", "120", "sh", "-c"])
            .arg(script)
            .output()
            .unwrap()
    }

    /// The standard output of `script`, which must succeed.
    fn ok(&self, script: &str) -> String {
        let out = self.sh(script);
        assert!(out.status.success(), "{script}: {}", text(&out));
        String::from_utf8(out.stdout).unwrap()
    }

    /// The properties of `unit` (`systemctl show`).
    fn show(&self, unit: &str) -> BTreeMap<String, String> {
        self.ok(&format!("systemctl show --no-pager {unit}"))
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }

    /// The position of the journal's end, for [`Host::journal_after`].
    fn cursor(&self) -> String {
        let out = self.ok("journalctl --no-pager --show-cursor -n 0");
        out.lines()
            .find_map(|l| l.strip_prefix("-- cursor: "))
            .unwrap_or_else(|| panic!("no cursor in {out:?}"))
            .to_owned()
    }

    /// What the journal holds about `unit` (systemd's messages and the role's output) after
    /// `cursor`, as `journalctl -u` shows it.
    fn journal_after(&self, unit: &str, cursor: &str) -> String {
        self.ok(&format!(
            "journalctl --no-pager -o cat -u {unit} --after-cursor='{cursor}'"
        ))
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = Command::new("docker")
            .args(["rm", "-f", "-v", &self.name])
            .output();
    }
}

/// The install guide of manifests/systemd/README.md (its first `sh` block): the commands that
/// install, the one that enables and starts the units, and the kubectl that checks them. The
/// build is left out: the executable under test is where the build would put it.
struct Guide {
    install: Vec<String>,
    enable: String,
    check: String,
}

fn guide() -> Guide {
    let readme = std::fs::read_to_string(repo().join("manifests/systemd/README.md")).unwrap();
    let block = readme
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("manifests/systemd/README.md has an sh block");
    let commands: Vec<&str> = block
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let find = |prefix: &str| -> String {
        let found: Vec<&&str> = commands.iter().filter(|c| c.starts_with(prefix)).collect();
        assert_eq!(found.len(), 1, "one `{prefix}` in the guide: {commands:?}");
        (*found[0]).to_owned()
    };
    let enable = find("systemctl enable --now ");
    let check = find("kubectl ");
    assert!(find("cargo build ").contains("--release"), "{commands:?}");
    let install = commands
        .iter()
        .take_while(|c| **c != enable)
        .filter(|c| !c.starts_with("cargo "))
        .map(|c| (*c).to_owned())
        .collect();
    Guide {
        install,
        enable,
        check,
    }
}

/// The image of the systemd host, built when it is not loaded yet.
fn image() -> String {
    let started = Instant::now();
    let out = Command::new(repo().join("hack/systemd-host.sh"))
        .output()
        .unwrap();
    assert!(out.status.success(), "hack/systemd-host.sh: {}", text(&out));
    let image = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .to_owned();
    assert!(
        image.starts_with("genplane-systemd-host:"),
        "{}",
        text(&out)
    );
    eprintln!("{image} ready in {:?}", started.elapsed());
    image
}

/// A systemd duration (`TimeoutStopUSec=30s`, `1min 30s`, `500ms`).
fn systemd_duration(value: &str) -> Duration {
    value
        .split_whitespace()
        .map(|part| {
            let digits = part.trim_end_matches(|c: char| c.is_ascii_alphabetic());
            let n: u64 = digits.parse().unwrap_or_else(|_| panic!("{value}"));
            match &part[digits.len()..] {
                "min" => Duration::from_secs(n * 60),
                "s" => Duration::from_secs(n),
                "ms" => Duration::from_millis(n),
                "us" => Duration::from_micros(n),
                unit => panic!("{value}: unit {unit}"),
            }
        })
        .sum()
}

/// `systemctl stop` or `restart` (`verb`) of `unit`: it ends in time, the role having said
/// `STOPPING=1` and exited by itself with 0 (systemd killed nothing). Answers the time taken.
fn stops_cleanly(host: &Host, verb: &str, unit: &str) -> Duration {
    let before = host.show(unit);
    let pid = &before["MainPID"];
    let timeout = systemd_duration(&before["TimeoutStopUSec"]);
    let cursor = host.cursor();
    let started = Instant::now();
    host.ok(&format!("systemctl {verb} {unit}"));
    let took = started.elapsed();
    assert!(
        took < timeout,
        "{verb} {unit} took {took:?} (timeout {timeout:?})"
    );
    let journal = host.journal_after(unit, &cursor);
    assert!(
        journal.contains(&format!(
            "Got notification message from PID {pid} (STOPPING=1"
        )),
        "{unit} did not say STOPPING=1:\n{journal}"
    );
    assert!(
        journal.contains("Main process exited, code=exited, status=0/SUCCESS"),
        "{journal}"
    );
    for unclean in ["Killing process", "timed out", "Failed with result"] {
        assert!(!journal.contains(unclean), "{unclean}:\n{journal}");
    }
    took
}

/// `unit` is active and running, its role having said READY=1; answers its main PID.
fn running(host: &Host, unit: &str) -> String {
    let state = host.show(unit);
    assert_eq!(
        (state["ActiveState"].as_str(), state["SubState"].as_str()),
        ("active", "running"),
        "{unit}: {}",
        host.ok(&format!("systemctl status --no-pager {unit} || true"))
    );
    assert!(!state["StatusText"].is_empty(), "{unit}: no STATUS=");
    state["MainPID"].clone()
}

#[test]
fn the_units_run_under_a_real_systemd() {
    if Command::new("docker").arg("--version").output().is_err() {
        eprintln!("docker is not installed: the units were not started by a real systemd");
        return;
    }
    let started = Instant::now();
    let image = image();
    let host = Host::start(&image);
    eprintln!("{} booted at {:?}", host.name, started.elapsed());
    // systemd's debug messages name every notification a unit sends.
    host.ok("systemd-analyze log-level debug");

    // The README's install guide, up to enabling the units.
    let guide = guide();
    host.ok(&format!("set -ex\n{}", guide.install.join("\n")));

    // `systemctl start` returns once the API server is ready: /readyz passes at once.
    let readyz = host.ok(&format!(
        "systemctl start genplane-apiserver.service && {KUBECTL} get --raw /readyz"
    ));
    assert_eq!(readyz.trim(), "ok", "/readyz right after systemctl start");
    running(&host, "genplane-apiserver.service");
    let status = host.show("genplane-apiserver.service")["StatusText"].clone();
    assert!(status.starts_with("serving on https://"), "{status}");

    // The README enables and starts every role; each is running once the command returns.
    host.ok(&guide.enable);
    for unit in [
        "genplane-apiserver.service",
        "genplane-controller-manager.service",
        "genplane-feature-controller.service",
    ] {
        running(&host, unit);
        assert_eq!(
            host.ok(&format!("systemctl is-enabled {unit}")).trim(),
            "enabled"
        );
    }
    // The one candidate takes the Lease, and its status line says so.
    eventually("the controller-manager to say it leads", || {
        let status = &host.show("genplane-controller-manager.service")["StatusText"];
        (status == "running: leading, the controllers running").then_some(())
    });
    let namespaces = host.ok(&guide.check);
    for name in ["default", "kube-system"] {
        assert!(namespaces.contains(name), "{namespaces}");
    }
    host.ok(&format!("{KUBECTL} create namespace before-the-faults"));

    // The roles' logs are in the journal (JSON lines, as apiserver.env asks).
    let journal = host.ok("journalctl --no-pager -o cat -u genplane-apiserver.service");
    assert!(
        journal.contains(r#""message":"serving","server_url":"https://"#),
        "{journal}"
    );
    let journal = host.ok("journalctl --no-pager -o cat -u genplane-controller-manager.service");
    assert!(journal.contains(r#""level":"INFO""#), "{journal}");

    // With a short watchdog (a drop-in), the feature-controller stays up: its pings arrive.
    let unit = "genplane-feature-controller.service";
    host.ok(&format!(
        "mkdir -p /etc/systemd/system/{unit}.d && \
         printf '[Service]\\nWatchdogSec=2s\\n' >/etc/systemd/system/{unit}.d/watchdog.conf && \
         systemctl daemon-reload && systemctl restart {unit}"
    ));
    assert_eq!(host.show(unit)["WatchdogUSec"], "2s");
    let pid = running(&host, unit);
    let restarts = host.show(unit)["NRestarts"].clone();
    let cursor = host.cursor();
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(running(&host, unit), pid, "restarted under a 2 s watchdog");
    assert_eq!(host.show(unit)["NRestarts"], restarts);
    let journal = host.journal_after(unit, &cursor);
    let pings = journal
        .matches(&format!(
            "Got notification message from PID {pid} (WATCHDOG=1)"
        ))
        .count();
    assert!(pings >= 3, "{pings} pings in 5 s:\n{journal}");
    // ... and a role that stops answering (frozen with SIGSTOP) is killed and started again.
    let cursor = host.cursor();
    host.ok(&format!("systemctl kill -s SIGSTOP {unit}"));
    let after = restarts.parse::<u32>().unwrap() + 1;
    let again = eventually("the watchdog to restart the frozen role", || {
        let state = host.show(unit);
        (state["NRestarts"] == after.to_string() && state["SubState"] == "running")
            .then(|| state["MainPID"].clone())
    });
    assert_ne!(again, pid);
    let journal = host.journal_after(unit, &cursor);
    assert!(
        journal.contains("Watchdog timeout (limit 2s)!"),
        "{journal}"
    );

    // `systemctl stop` ends a role in time, cleanly, after STOPPING=1.
    let took = stops_cleanly(&host, "stop", "genplane-controller-manager.service");
    eprintln!("systemctl stop genplane-controller-manager: {took:?}");
    let state = host.show("genplane-controller-manager.service");
    assert_eq!(state["ActiveState"], "inactive");
    assert_eq!(state["Result"], "success");
    host.ok("systemctl start genplane-controller-manager.service");

    // `systemctl restart` of the API server, its watches open: clean, and ready once it returns.
    let unit = "genplane-apiserver.service";
    let before = running(&host, unit);
    let took = stops_cleanly(&host, "restart", unit);
    eprintln!("systemctl restart genplane-apiserver: {took:?}");
    assert_eq!(
        host.ok(&format!("{KUBECTL} get --raw /readyz")).trim(),
        "ok"
    );
    let pid = running(&host, unit);
    assert_ne!(pid, before);

    // A role killed with SIGKILL is started again by systemd, its data kept.
    let after = host.show(unit)["NRestarts"].parse::<u32>().unwrap() + 1;
    let cursor = host.cursor();
    host.ok(&format!("systemctl kill -s SIGKILL {unit}"));
    let killed = Instant::now();
    let again = eventually_within(
        "systemd to start the killed API server again",
        Duration::from_secs(90),
        || {
            let state = host.show(unit);
            (state["NRestarts"] == after.to_string() && state["SubState"] == "running")
                .then(|| state["MainPID"].clone())
        },
    );
    eprintln!(
        "the killed API server was running again after {:?}",
        killed.elapsed()
    );
    assert_ne!(again, pid);
    let journal = host.journal_after(unit, &cursor);
    assert!(
        journal.contains("Main process exited, code=killed, status=9/KILL"),
        "{journal}"
    );
    assert_eq!(
        host.ok(&format!("{KUBECTL} get --raw /readyz")).trim(),
        "ok"
    );
    host.ok(&format!("{KUBECTL} get namespace before-the-faults"));

    // The etcd unit takes the SQLite one's place (Conflicts=) and pulls in Debian's etcd.
    let readyz = host.ok(&format!(
        "systemctl start genplane-apiserver-etcd.service && {KUBECTL} get --raw /readyz"
    ));
    assert_eq!(
        readyz.trim(),
        "ok",
        "/readyz right after systemctl start (etcd)"
    );
    running(&host, "genplane-apiserver-etcd.service");
    assert_eq!(
        host.show("genplane-apiserver.service")["ActiveState"],
        "inactive"
    );
    assert_eq!(host.show("etcd.service")["ActiveState"], "active");
    let namespaces = host.ok(&guide.check);
    assert!(namespaces.contains("kube-system"), "{namespaces}");

    // Every unit's exposure, as systemd rates it.
    for unit in [
        "genplane-apiserver.service",
        "genplane-apiserver-etcd.service",
        "genplane-controller-manager.service",
        "genplane-feature-controller.service",
    ] {
        let out = host.sh(&format!(
            "systemd-analyze security --no-pager --threshold={EXPOSURE} {unit}"
        ));
        let report = text(&out);
        let overall = report
            .lines()
            .find(|l| l.contains("Overall exposure level"))
            .unwrap_or_else(|| panic!("{report}"));
        eprintln!("{overall}");
        assert!(
            out.status.success(),
            "{unit} is rated above {}.{}:\n{report}",
            EXPOSURE / 10,
            EXPOSURE % 10
        );
    }
    eprintln!("the systemd test took {:?}", started.elapsed());
}
