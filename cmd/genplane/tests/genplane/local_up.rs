//! The deployment files kept honest: `hack/local-up.sh` run against the built binary (the roles
//! come up as separate processes, kubectl works with the printed kubeconfig, the
//! controller-manager acts, and a signal stops every process), and static checks of
//! `manifests/systemd/` and `manifests/container/` against what `genplane` accepts.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{BIN, DEADLINE, Process, eventually_ok, ok, text};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn applets() -> BTreeSet<String> {
    ok(Command::new(BIN).arg("--list").output().unwrap())
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The long flags `genplane <applet> --help` lists.
fn flags_of(applet: &str) -> BTreeSet<String> {
    let help = ok(Command::new(BIN).args([applet, "--help"]).output().unwrap());
    let flags: BTreeSet<String> = help
        .lines()
        .filter_map(|line| {
            let line = line.trim_start();
            let line = match line.strip_prefix('-') {
                Some(rest) if !rest.starts_with('-') => rest.split_once(", ")?.1,
                _ => line,
            };
            let name = line.strip_prefix("--")?;
            let end = name.find([' ', '=', '[', '<']).unwrap_or(name.len());
            Some(name[..end].to_owned())
        })
        .collect();
    assert!(flags.contains("config-check"), "{applet}: {flags:?}");
    flags
}

/// The `key = value` lines of `genplane <applet> --print-default-config`.
fn defaults_of(applet: &str) -> BTreeMap<String, String> {
    let out = ok(Command::new(BIN)
        .args([applet, "--print-default-config"])
        .output()
        .unwrap());
    out.lines()
        .filter_map(|l| l.split_once(" = "))
        .map(|(k, v)| (k.to_owned(), v.trim_matches('"').to_owned()))
        .collect()
}

// --- hack/local-up.sh

/// A running `hack/local-up.sh`, its output in a log of its own.
struct LocalUp {
    process: Process,
    run_dir: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for LocalUp {
    /// Leaves nothing behind when a test fails half-way: the script, and every role it started.
    fn drop(&mut self) {
        self.process.stop();
        for pid in self.pids().values() {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

impl LocalUp {
    fn start(extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let run_dir = dir.path().join("run");
        let mut command = Command::new("bash");
        command
            .arg(repo().join("hack/local-up.sh"))
            .arg(format!("--genplane={BIN}"))
            .arg(format!("--dir={}", run_dir.display()))
            .arg("--port=0")
            .args(extra);
        let process = Process::spawn("local-up", command, &dir.path().join("local-up.log"));
        LocalUp {
            process,
            run_dir,
            _dir: dir,
        }
    }

    fn output(&self) -> String {
        self.process.output()
    }

    /// Waits for the `export KUBECONFIG=...` line, printed once every role is ready (each
    /// role in turn: twice the one deadline).
    fn kubeconfig(&mut self) -> PathBuf {
        self.process
            .wait_for_within("its KUBECONFIG line", 2 * DEADLINE, |p| {
                p.output()
                    .lines()
                    .find_map(|l| l.strip_prefix("export KUBECONFIG=").map(PathBuf::from))
            })
    }

    /// The roles' process ids, from the pid files in the run directory.
    fn pids(&self) -> BTreeMap<String, u32> {
        let Ok(entries) = std::fs::read_dir(&self.run_dir) else {
            return BTreeMap::new();
        };
        entries
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let role = name.strip_suffix(".pid")?.to_owned();
                let pid = std::fs::read_to_string(e.path())
                    .ok()?
                    .trim()
                    .parse()
                    .ok()?;
                Some((role, pid))
            })
            .collect()
    }

    /// Sends `signal` to the script alone (as Ctrl-C or `kill` would reach it) and waits for it
    /// to exit.
    fn stop(&mut self, signal: &str) -> std::process::ExitStatus {
        self.process.signal(signal);
        self.process.wait_exit(DEADLINE)
    }
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

fn kubectl(kubeconfig: &Path, args: &[&str]) -> std::process::Output {
    crate::support::kubectl_command("kubectl", kubeconfig)
        .args(args)
        .output()
        .unwrap()
}

/// Starts local-up with `extra`, checks the roles in `roles` run and serve, stops it with
/// `signal` and checks every one of them is gone.
fn up_use_and_stop(extra: &[&str], roles: &[&str], signal: &str) {
    let mut up = LocalUp::start(extra);
    let kubeconfig = up.kubeconfig();
    assert_eq!(
        kubeconfig,
        up.run_dir.join("data/admin.kubeconfig"),
        "{}",
        up.output()
    );
    let pids = up.pids();
    assert_eq!(
        pids.keys().map(String::as_str).collect::<Vec<_>>(),
        roles,
        "pid files"
    );
    for (role, pid) in &pids {
        assert!(alive(*pid), "{role} (pid {pid}) is not running");
        let log = up.run_dir.join(format!("{role}.log"));
        assert!(
            up.output().contains(&log.display().to_string()),
            "the log of {role} is not announced:\n{}",
            up.output()
        );
        assert!(log.exists(), "{}", log.display());
    }

    let namespaces = ok(kubectl(&kubeconfig, &["get", "ns", "-o", "name"]));
    assert!(namespaces.contains("namespace/kube-system"), "{namespaces}");
    ok(kubectl(&kubeconfig, &["create", "ns", "local-up"]));
    // The serviceaccount controller of the separate controller-manager process.
    eventually_ok("a default ServiceAccount in a new namespace", || {
        let out = kubectl(
            &kubeconfig,
            &["-n", "local-up", "get", "serviceaccount", "default"],
        );
        if out.status.success() {
            return Ok(());
        }
        Err(format!(
            "{}\ncontroller-manager log:\n{}",
            text(&out),
            std::fs::read_to_string(up.run_dir.join("controller-manager.log")).unwrap_or_default()
        ))
    });

    let status = up.stop(signal);
    assert!(status.success(), "local-up: {status}\n{}", up.output());
    for (role, pid) in &pids {
        assert!(
            !alive(*pid),
            "{role} (pid {pid}) still runs after local-up stopped"
        );
    }
    let output = up.output();
    for role in roles {
        assert!(
            output.contains(&format!("--- stopping {role}")),
            "{role} was not stopped in order:\n{output}"
        );
    }
    assert!(up.pids().is_empty(), "pid files left: {:?}", up.pids());
}

#[test]
fn local_up_runs_apiserver_and_controller_manager_on_sqlite_until_sigterm() {
    up_use_and_stop(&[], &["apiserver", "controller-manager"], "TERM");
}

#[test]
fn local_up_runs_etcd_apiserver_and_controller_manager_until_ctrl_c() {
    up_use_and_stop(
        &["--etcd"],
        &["apiserver", "controller-manager", "etcd"],
        "INT",
    );
}

#[test]
fn local_up_refuses_unknown_arguments_and_documents_its_options() {
    let script = repo().join("hack/local-up.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg("--bogus")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let help = ok(Command::new("bash")
        .arg(&script)
        .arg("--help")
        .output()
        .unwrap());
    for option in ["--dir", "--etcd", "--release", "--genplane", "--port"] {
        assert!(
            help.contains(option),
            "--help does not mention {option}:\n{help}"
        );
    }
}

// --- manifests/systemd

/// `Key=value` lines of a unit, in order, comments and section headers left out.
fn directives(unit: &str) -> Vec<(String, String)> {
    unit.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('['))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn units() -> Vec<(String, String)> {
    let dir = repo().join("manifests/systemd");
    let mut units: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "service"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    units.sort();
    units
}

#[test]
fn systemd_units_run_known_applets_with_flags_they_accept() {
    let units = units();
    let found: Vec<&str> = units.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        found,
        [
            "genplane-apiserver-etcd.service",
            "genplane-apiserver.service",
            "genplane-controller-manager.service",
            "genplane-feature-controller.service"
        ]
    );
    let applets = applets();
    let sysusers =
        std::fs::read_to_string(repo().join("manifests/systemd/genplane.sysusers.conf")).unwrap();
    for (name, unit) in &units {
        let directives = directives(unit);
        let get = |key: &str| -> Vec<&str> {
            directives
                .iter()
                .filter(|(k, _)| k == key)
                .map(|(_, v)| v.as_str())
                .collect()
        };
        // Every role speaks sd_notify (tests/genplane/notify.rs) and pings the watchdog.
        assert_eq!(get("Type"), ["notify"], "{name}");
        assert_eq!(get("NotifyAccess"), ["main"], "{name}");
        assert_eq!(get("WatchdogSec").len(), 1, "{name}");
        assert_eq!(get("NoNewPrivileges"), ["yes"], "{name}");
        assert_eq!(get("ProtectSystem"), ["strict"], "{name}");
        let user = get("User");
        assert_eq!(user.len(), 1, "{name}");
        assert!(
            sysusers
                .lines()
                .any(|l| l.split_whitespace().nth(1) == Some(user[0])),
            "{name}: user {} is not in genplane.sysusers.conf",
            user[0]
        );

        let exec = get("ExecStart");
        assert_eq!(exec.len(), 1, "{name}: one ExecStart");
        assert!(
            !exec[0].contains(['"', '\'', '\\', '$']),
            "{name}: {}",
            exec[0]
        );
        let words: Vec<&str> = exec[0].split_whitespace().collect();
        assert_eq!(words[0], "/usr/local/bin/genplane", "{name}");
        let applet = words[1];
        assert!(
            applets.contains(applet),
            "{name}: {applet} is not an applet of `genplane --list`: {applets:?}"
        );
        let accepted = flags_of(applet);
        let flags = &words[2..];
        for flag in flags {
            let key = flag
                .strip_prefix("--")
                .unwrap_or_else(|| panic!("{name}: {flag} is not a --flag"));
            let key = key.split_once('=').map_or(key, |(k, _)| k);
            assert!(
                accepted.contains(key),
                "{name}: `genplane {applet}` has no --{key}"
            );
        }
        // The values are valid too (nothing is started: --config-check only validates).
        let check = Command::new(BIN)
            .arg(applet)
            .args(flags)
            .arg("--config-check")
            .env_clear()
            .output()
            .unwrap();
        assert!(check.status.success(), "{name}: {}", text(&check));

        // The data directory is the unit's state directory, and the controller-manager waits
        // for the kubeconfig it is given.
        let flag_value = |key: &str| {
            flags
                .iter()
                .find_map(|f| f.strip_prefix(&format!("--{key}=")))
        };
        if let Some(data_dir) = flag_value("data-dir") {
            assert_eq!(
                get("StateDirectory")
                    .iter()
                    .map(|d| format!("/var/lib/{d}"))
                    .collect::<Vec<_>>(),
                [data_dir],
                "{name}"
            );
        }
        if let Some(kubeconfig) = flag_value("kubeconfig") {
            assert!(
                get("ExecStartPre")
                    .iter()
                    .any(|pre| pre.contains(kubeconfig)),
                "{name}: ExecStartPre does not wait for {kubeconfig}"
            );
            assert!(
                kubeconfig.starts_with("/var/lib/genplane/")
                    && kubeconfig.ends_with(&format!("/{applet}.kubeconfig")),
                "{name}: {kubeconfig}"
            );
        }
        for file in get("EnvironmentFile") {
            let file = file.trim_start_matches('-');
            assert!(
                file.starts_with("/etc/genplane/") && file.ends_with(".env"),
                "{name}: {file}"
            );
            let role = file
                .trim_start_matches("/etc/genplane/")
                .trim_end_matches(".env");
            assert_eq!(role, applet, "{name}: the environment file of another role");
        }
    }
}

#[test]
fn systemd_environment_examples_name_flags_of_their_role_with_valid_values() {
    for applet in ["apiserver", "controller-manager", "feature-controller"] {
        let path = repo().join(format!("manifests/systemd/{applet}.env.example"));
        let example = std::fs::read_to_string(&path).unwrap();
        let accepted = flags_of(applet);
        let mut values = Vec::new();
        for line in example.lines() {
            // Set or commented out: each variable must be one the role reads.
            let Some(assignment) = line.trim_start_matches('#').strip_prefix("GENPLANE_") else {
                continue;
            };
            let (key, value) = assignment.split_once('=').unwrap();
            let flag = key.to_ascii_lowercase().replace('_', "-");
            assert!(
                accepted.contains(&flag),
                "{}: GENPLANE_{key} is no flag of `genplane {applet}`",
                path.display()
            );
            // Files named by the example do not exist here; every other value must be valid.
            if !value.starts_with('/') {
                values.push((format!("GENPLANE_{key}"), value.to_owned()));
            }
        }
        assert!(values.len() >= 3, "{}: {values:?}", path.display());
        let mut check = Command::new(BIN);
        check.arg(applet).env_clear().envs(values.iter().cloned());
        if applet != "apiserver" {
            check.arg(format!(
                "--kubeconfig=/var/lib/genplane/{applet}.kubeconfig"
            ));
        }
        let out = check.arg("--config-check").output().unwrap();
        assert!(
            out.status.success(),
            "{}: {values:?}: {}",
            path.display(),
            text(&out)
        );
    }
}

/// `systemd-analyze verify` over the units, with ExecStart pointing at the built binary (verify
/// requires the executable to exist). Skipped, saying so, where systemd is not installed.
#[test]
fn systemd_units_pass_systemd_analyze_verify() {
    let available = Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !available {
        eprintln!("systemd-analyze is not installed: the units were not verified");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut paths = Vec::new();
    for (name, unit) in units() {
        let path = dir.path().join(&name);
        std::fs::write(&path, unit.replace("/usr/local/bin/genplane", BIN)).unwrap();
        paths.push(path);
    }
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .args(&paths)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}", text(&out));
    // Unknown keys and bad values are only warnings: any mention of a unit is a failure.
    for (name, _) in units() {
        assert!(!stderr.contains(&name), "{stderr}");
    }
    assert!(
        !stderr.contains(&dir.path().display().to_string()),
        "{stderr}"
    );
}

// --- manifests/container

/// The JSON-array form of a Containerfile instruction (`ENTRYPOINT ["a", "b"]`).
fn exec_form(line: &str) -> Vec<String> {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"))
}

#[test]
fn container_image_roles_ports_and_user_match_genplane() {
    let dir = repo().join("manifests/container");
    let file = std::fs::read_to_string(dir.join("Containerfile")).unwrap();
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let applets = applets();
    // Instructions of the last stage (the runtime image).
    let runtime = file.rsplit_once("\nFROM ").unwrap().1;
    let instruction = |name: &str| -> Vec<&str> {
        runtime
            .lines()
            .filter_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .collect()
    };
    assert_eq!(instruction("ENTRYPOINT").len(), 1);
    assert_eq!(exec_form(instruction("ENTRYPOINT")[0]), ["genplane"]);
    let cmd = exec_form(instruction("CMD")[0]);
    assert!(applets.contains(&cmd[0]), "CMD {cmd:?}");
    assert!(runtime.contains("genplane --make-symlinks /usr/local/bin"));

    // A non-root user.
    let user = instruction("USER");
    assert_eq!(user.len(), 1);
    assert!(
        !["0", "root"].contains(&user[0].split(':').next().unwrap()),
        "{user:?}"
    );

    // The exposed ports are the roles' default ports.
    let exposed: BTreeSet<String> = instruction("EXPOSE")
        .iter()
        .flat_map(|l| l.split_whitespace().map(str::to_owned))
        .collect();
    let defaults: BTreeSet<String> = ["apiserver", "controller-manager", "feature-controller"]
        .iter()
        .map(|applet| defaults_of(applet)["secure-port"].clone())
        .collect();
    assert_eq!(exposed, defaults);

    // The data directory: a volume, named to the roles through their variable.
    let apiserver_flags = flags_of("apiserver");
    let mut data_dir = None;
    for env in instruction("ENV") {
        let (key, value) = env.split_once('=').unwrap();
        let flag = key
            .strip_prefix("GENPLANE_")
            .unwrap()
            .to_ascii_lowercase()
            .replace('_', "-");
        assert!(apiserver_flags.contains(&flag), "ENV {key}");
        if flag == "data-dir" {
            data_dir = Some(value.to_owned());
        }
    }
    let data_dir = data_dir.expect("GENPLANE_DATA_DIR is set");
    assert_eq!(exec_form(instruction("VOLUME")[0]), [data_dir]);

    // Every role the README runs exists: `--entrypoint genplane-<applet>` and
    // `genplane <applet>` after the image name.
    let mut documented = BTreeSet::new();
    for word in readme.split_whitespace() {
        if let Some(applet) = word.strip_prefix("genplane-")
            && readme.contains(&format!("--entrypoint genplane-{applet}"))
        {
            documented.insert(applet.to_owned());
        }
    }
    for line in readme.lines().filter(|l| l.contains("docker run")) {
        let words: Vec<&str> = line.split_whitespace().collect();
        for pair in words.windows(2) {
            if pair[0] == "genplane" && !pair[1].starts_with('-') {
                documented.insert(pair[1].to_owned());
            }
        }
    }
    for role in ["apiserver", "controller-manager", "all-in-one"] {
        assert!(
            documented.contains(role) || (role == cmd[0] && readme.contains("default role")),
            "the README does not run {role}: {documented:?}"
        );
    }
    for applet in &documented {
        assert!(
            applets.contains(applet),
            "the README runs {applet}: no such applet"
        );
    }
}
