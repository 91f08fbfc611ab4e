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

/// The Containerfile's stages by name, each its instructions (continuation lines joined,
/// comments left out) as (instruction, arguments).
fn stages() -> BTreeMap<String, Vec<(String, String)>> {
    let file = std::fs::read_to_string(repo().join("manifests/container/Containerfile")).unwrap();
    let joined = file
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("\\\n", " ");
    let mut stages: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    let mut current = None;
    for line in joined.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (instruction, args) = line.split_once(' ').unwrap_or((line, ""));
        let args = args.split_whitespace().collect::<Vec<_>>().join(" ");
        if instruction == "FROM" {
            let (base, name) = args
                .split_once(" AS ")
                .unwrap_or_else(|| panic!("{line}: unnamed stage"));
            current = Some(name.to_owned());
            stages
                .entry(name.to_owned())
                .or_default()
                .push(("FROM".to_owned(), base.to_owned()));
        } else if let Some(stage) = &current {
            stages
                .get_mut(stage)
                .unwrap()
                .push((instruction.to_owned(), args));
        }
    }
    stages
}

/// The roles that keep running, with their image's health-check port.
const LONG_RUNNING: &[&str] = &[
    "apiserver",
    "controller-manager",
    "feature-controller",
    "all-in-one",
];

#[test]
fn container_images_run_each_role_as_a_user_with_a_health_check_on_its_port() {
    let stages = stages();
    let applets = applets();
    assert!(applets.contains("healthcheck"), "{applets:?}");
    let get = |stage: &str, name: &str| -> Vec<String> {
        stages[stage]
            .iter()
            .filter(|(i, _)| i == name)
            .map(|(_, a)| a.clone())
            .collect()
    };

    // Nothing is pulled: every stage starts from scratch or from another stage.
    for (name, instructions) in &stages {
        let base = &instructions[0].1;
        assert!(
            base == "scratch" || stages.contains_key(base),
            "stage {name} starts FROM {base}: only scratch and stages of this file build offline"
        );
    }

    // The shared stage: a non-root user, the data directory as a volume named to the roles
    // through their variable, the OCI labels.
    let user = get("genplane", "USER");
    assert_eq!(user.len(), 1);
    assert!(
        !["0", "root"].contains(&user[0].split(':').next().unwrap()),
        "{user:?}"
    );
    let apiserver_flags = flags_of("apiserver");
    let env = get("genplane", "ENV").join(" ");
    let data_dir = env
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("GENPLANE_DATA_DIR="))
        .expect("GENPLANE_DATA_DIR is set");
    assert!(apiserver_flags.contains("data-dir"));
    assert_eq!(exec_form(&get("genplane", "VOLUME")[0]), [data_dir]);
    for stage in ["genplane", "etcd"] {
        let labels = get(stage, "LABEL").join(" ");
        for label in ["version", "revision", "source"] {
            assert!(
                labels.contains(&format!("org.opencontainers.image.{label}=")),
                "{stage}: no {label} label in {labels}"
            );
        }
    }

    // A stage per role, named after it, whose entrypoint runs it; the long-running ones check
    // their /readyz on their default port, which they expose.
    for role in LONG_RUNNING.iter().chain(&["ccm-e2e"]) {
        assert!(applets.contains(*role), "{role}");
        assert_eq!(get(role, "FROM"), ["genplane"], "{role}");
        assert_eq!(
            exec_form(&get(role, "ENTRYPOINT")[0]),
            ["/usr/local/bin/genplane", role],
            "{role}"
        );
        let health = get(role, "HEALTHCHECK");
        if !LONG_RUNNING.contains(role) {
            assert!(health.is_empty(), "{role} runs to completion: {health:?}");
            continue;
        }
        let port = defaults_of(role)["secure-port"].clone();
        assert_eq!(get(role, "EXPOSE"), std::slice::from_ref(&port), "{role}");
        assert_eq!(health.len(), 1, "{role}");
        let command = health[0].split_once("CMD ").unwrap().1;
        assert_eq!(
            exec_form(command),
            [
                "/usr/local/bin/genplane".to_owned(),
                "healthcheck".to_owned(),
                format!("https://127.0.0.1:{port}/readyz")
            ],
            "{role}"
        );
    }
}

#[test]
fn the_container_readme_runs_images_and_roles_that_exist() {
    let readme = std::fs::read_to_string(repo().join("manifests/container/README.md")).unwrap();
    let stages = stages();
    let applets = applets();
    let mut images = BTreeSet::new();
    for word in readme.split(|c: char| c.is_whitespace() || c == '`' || c == '|') {
        if let Some(image) = word.strip_prefix("genplane-")
            && !word.contains(['/', '.', ':', '<'])
            && !word.ends_with(".kubeconfig")
        {
            images.insert(image.to_owned());
        }
    }
    for image in ["apiserver", "controller-manager", "all-in-one", "etcd"] {
        assert!(
            images.contains(image),
            "the README does not name genplane-{image}: {images:?}"
        );
    }
    for image in &images {
        // genplane-<image> is an image (a stage) or an applet's link.
        assert!(
            stages.contains_key(image) || applets.contains(image),
            "the README names genplane-{image}: no such image or applet"
        );
    }
}

// --- manifests/compose

/// `${VAR:-default}` replaced by its default, as Compose does with the variable unset.
fn defaults(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find('}').unwrap() + start;
        let (_, default) = rest[start + 2..end]
            .split_once(":-")
            .unwrap_or_else(|| panic!("{}: a variable without a default", &rest[start..=end]));
        out.push_str(default);
        rest = &rest[end + 1..];
    }
    out + rest
}

fn compose() -> serde_json::Value {
    let text = std::fs::read_to_string(repo().join("manifests/compose/compose.yaml")).unwrap();
    serde_saphyr::from_str(&defaults(&text)).unwrap()
}

fn strings(value: &serde_json::Value) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {value}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

/// The services, their applet and their arguments (the entrypoint's applet, or the image's).
fn compose_roles(compose: &serde_json::Value) -> Vec<(String, String, Vec<String>)> {
    compose["services"]
        .as_object()
        .unwrap()
        .iter()
        .filter_map(|(name, service)| {
            let image = service["image"].as_str()?;
            let role = image.strip_prefix("genplane-")?.split(':').next()?;
            if role == "etcd" {
                return None;
            }
            let applet = match service.get("entrypoint") {
                Some(entrypoint) => {
                    let entrypoint = strings(entrypoint);
                    assert_eq!(entrypoint[0], "/usr/local/bin/genplane", "{name}");
                    entrypoint[1].clone()
                }
                None => role.to_owned(),
            };
            let args = service.get("command").map(strings).unwrap_or_default();
            Some((name.clone(), applet, args))
        })
        .collect()
}

#[test]
fn compose_services_run_known_applets_with_flags_they_accept() {
    let compose = compose();
    let applets = applets();
    let roles = compose_roles(&compose);
    let names: BTreeSet<&str> = roles.iter().map(|(n, _, _)| n.as_str()).collect();
    for service in [
        "pki",
        "apiserver-1",
        "apiserver-2",
        "controller-manager-1",
        "controller-manager-2",
        "feature-controller",
        "kubeconfig",
    ] {
        assert!(names.contains(service), "{service}: {names:?}");
    }
    for (name, applet, args) in &roles {
        assert!(applets.contains(applet), "{name}: {applet}");
        let service = &compose["services"][name];
        assert_eq!(
            service["read_only"], true,
            "{name}: a read-only root file system"
        );
        if applet == "pki" {
            continue; // run for real below
        }
        let check = Command::new(BIN)
            .arg(applet)
            .args(args)
            .arg("--config-check")
            .env_clear()
            .output()
            .unwrap();
        assert!(check.status.success(), "{name}: {}", text(&check));
    }
    let etcd = ["etcd-1", "etcd-2", "etcd-3"];
    for member in etcd {
        assert!(
            compose["services"][member]["image"]
                .as_str()
                .unwrap()
                .starts_with("genplane-etcd:")
        );
    }
    // Every API server names every member.
    for server in ["apiserver-1", "apiserver-2"] {
        let args = strings(&compose["services"][server]["command"]);
        let endpoints = args
            .iter()
            .find_map(|a| a.strip_prefix("--etcd-servers="))
            .unwrap();
        let expected: Vec<String> = etcd.iter().map(|m| format!("http://{m}:2379")).collect();
        assert_eq!(endpoints, expected.join(","), "{server}");
    }
}

/// The `pki` service's command run for real, then what the API servers, the controllers and
/// the `kubeconfig` service expect of it: the files where they mount them, the name the
/// controllers reach the API servers by, the host ports the admin's kubeconfig names.
#[test]
fn the_compose_pki_is_what_the_services_mount_and_name() {
    let compose = compose();
    let roles = compose_roles(&compose);
    let service = |name: &str| &compose["services"][name];
    let args_of = |name: &str| roles.iter().find(|(n, _, _)| n == name).unwrap().2.clone();
    let volumes = |name: &str| {
        service(name)["volumes"]
            .as_array()
            .map(|v| {
                v.iter()
                    .map(|m| m.as_str().unwrap().to_owned())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };

    // The pki service writes certificates to the `pki` volume and kubeconfigs to
    // `kubeconfigs`, at the data directory it is given.
    let pki_args = args_of("pki");
    let data_dir = pki_args
        .iter()
        .find_map(|a| a.strip_prefix("--data-dir="))
        .unwrap()
        .to_owned();
    assert_eq!(
        volumes("pki"),
        [
            format!("kubeconfigs:{data_dir}"),
            format!("pki:{data_dir}/pki")
        ]
    );
    let dir = tempfile::tempdir().unwrap();
    let here = |args: Vec<String>| -> Vec<String> {
        args.into_iter()
            .map(|a| match a.strip_prefix("--data-dir=") {
                Some(_) => format!("--data-dir={}", dir.path().display()),
                None => a,
            })
            .collect()
    };
    ok(Command::new(BIN)
        .arg("pki")
        .args(here(pki_args))
        .output()
        .unwrap());

    // The controllers read their kubeconfig from that volume, read-only, and it names the
    // name both API servers answer to on the private network.
    for (controller, file) in [
        ("controller-manager-1", "controller-manager"),
        ("controller-manager-2", "controller-manager"),
        ("feature-controller", "feature-controller"),
    ] {
        assert_eq!(
            volumes(controller),
            [format!("kubeconfigs:{data_dir}:ro")],
            "{controller}"
        );
        let kubeconfig = format!("--kubeconfig={data_dir}/{file}.kubeconfig");
        assert_eq!(args_of(controller), [kubeconfig], "{controller}");
        let written =
            std::fs::read_to_string(dir.path().join(format!("{file}.kubeconfig"))).unwrap();
        let written: serde_json::Value = serde_saphyr::from_str(&written).unwrap();
        assert_eq!(
            written["clusters"][0]["cluster"]["server"],
            "https://kubernetes:6443"
        );
    }
    for (server, port) in [("apiserver-1", "6443"), ("apiserver-2", "6444")] {
        assert_eq!(
            volumes(server),
            [format!("pki:{data_dir}/pki:ro")],
            "{server}"
        );
        let aliases = strings(&service(server)["networks"]["control-plane"]["aliases"]);
        assert_eq!(aliases, ["kubernetes"], "{server}");
        assert_eq!(
            strings(&service(server)["ports"]),
            [format!("127.0.0.1:{port}:6443")]
        );
    }

    // An API server finds every file there: run again without the extra names (as a server
    // checks its certificate), nothing is made.
    let again = ok(Command::new(BIN)
        .args(["pki", &format!("--data-dir={}", dir.path().display())])
        .output()
        .unwrap());
    assert!(
        again
            .lines()
            .filter(|l| l.contains("/pki/"))
            .all(|l| l.starts_with("kept ")),
        "{again}"
    );

    // The kubeconfig service prints the admin's, a context per published port, in order.
    let printed = Command::new(BIN)
        .arg("pki")
        .args(here(args_of("kubeconfig")))
        .output()
        .unwrap();
    let printed: serde_json::Value = serde_saphyr::from_str(&ok(printed)).unwrap();
    let servers: Vec<&str> = printed["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["cluster"]["server"].as_str().unwrap())
        .collect();
    assert_eq!(
        servers,
        ["https://127.0.0.1:6443", "https://127.0.0.1:6444"]
    );
    assert_eq!(printed["users"][0]["name"], "genplane-admin");
}

#[test]
fn image_and_compose_check_scripts_refuse_unknown_arguments_and_document_their_options() {
    for (script, options) in [
        (
            "hack/image.sh",
            &[
                "--genplane",
                "--tag",
                "--strip-all",
                "--no-etcd",
                "--context",
            ][..],
        ),
        (
            "hack/compose-check.sh",
            &["--genplane", "--no-build", "--tag", "--project", "--keep"],
        ),
    ] {
        let path = repo().join(script);
        let out = Command::new("bash")
            .arg(&path)
            .arg("--bogus")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{script}: {}", text(&out));
        assert!(
            text(&out).contains("unknown argument: --bogus"),
            "{script}: {}",
            text(&out)
        );
        let help = ok(Command::new("bash")
            .arg(&path)
            .arg("--help")
            .output()
            .unwrap());
        for option in options {
            assert!(
                help.contains(option),
                "{script} --help does not mention {option}:\n{help}"
            );
        }
    }
    let bad_tag = Command::new("bash")
        .arg(repo().join("hack/image.sh"))
        .arg("--tag=-x")
        .output()
        .unwrap();
    assert_eq!(bad_tag.status.code(), Some(2), "{}", text(&bad_tag));
    let contradiction = Command::new("bash")
        .arg(repo().join("hack/compose-check.sh"))
        .args(["--no-build", "--genplane=/bin/true"])
        .output()
        .unwrap();
    assert_eq!(
        contradiction.status.code(),
        Some(2),
        "{}",
        text(&contradiction)
    );
}
