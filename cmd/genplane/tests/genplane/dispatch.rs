//! The built binary: applet listing, dispatch by subcommand and by program name (argv[0]),
//! symlink creation, and exit codes.

#![allow(clippy::unwrap_used)] // test helpers may unwrap, like the tests themselves

use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_genplane");

fn run(program: &Path, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .env_remove("GENPLANE_GIT_COMMIT")
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

#[test]
fn list_prints_every_applet() {
    let out = run(Path::new(BIN), &["--list"]);
    assert!(out.status.success());
    let names: Vec<String> = stdout(&out).lines().map(str::to_owned).collect();
    let expected: Vec<String> = genplane::APPLETS
        .iter()
        .map(|a| a.name.to_owned())
        .collect();
    assert_eq!(names, expected);
    assert!(names.contains(&"version".to_owned()));
}

#[test]
fn version_reports_the_emulated_kubernetes_version_and_commit() {
    let out = run(Path::new(BIN), &["version"]);
    assert!(out.status.success(), "{out:?}");
    let text = stdout(&out);
    assert!(
        text.contains(&format!(
            "genplane version: {}\n",
            env!("CARGO_PKG_VERSION")
        )),
        "{text}"
    );
    assert!(text.contains("kubernetes API version: v1.33\n"), "{text}");
    let json: serde_json::Value =
        serde_json::from_slice(&run(Path::new(BIN), &["version", "-o", "json"]).stdout).unwrap();
    let commit = json["gitCommit"].as_str().unwrap();
    // Built from a git checkout, the commit is a full hash.
    let in_git = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .is_ok_and(|o| o.status.success());
    if in_git {
        assert!(
            commit.len() == 40 && commit.bytes().all(|b| b.is_ascii_hexdigit()),
            "{commit}"
        );
    }
}

#[test]
fn a_symlink_named_after_an_applet_runs_it() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("genplane-version");
    std::os::unix::fs::symlink(BIN, &link).unwrap();
    let out = run(&link, &["-o", "json"]);
    assert!(out.status.success(), "{out:?}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["kubernetesVersion"], "v1.33");
    // Help names the link, as a standalone executable would.
    let help = stdout(&run(&link, &["--help"]));
    assert!(help.contains("genplane-version"), "{help}");
}

#[test]
fn make_symlinks_creates_a_working_link_per_applet() {
    let dir = tempfile::tempdir().unwrap();
    let links = dir.path().join("bin");
    let out = run(
        Path::new(BIN),
        &["--make-symlinks", links.to_str().unwrap()],
    );
    assert!(out.status.success(), "{out:?}");
    for applet in genplane::APPLETS {
        let link = links.join(format!("genplane-{}", applet.name));
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }
    let out = run(&links.join("genplane-version"), &[]);
    assert!(stdout(&out).contains("kubernetes API version: v1.33"));
    // Running it again replaces the links.
    assert!(
        run(
            Path::new(BIN),
            &["--make-symlinks", links.to_str().unwrap()]
        )
        .status
        .success()
    );
    // A regular file in the way is an error, not overwritten.
    let blocked = dir.path().join("blocked");
    std::fs::create_dir_all(&blocked).unwrap();
    std::fs::write(blocked.join("genplane-version"), "keep me").unwrap();
    let out = run(
        Path::new(BIN),
        &["--make-symlinks", blocked.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        std::fs::read_to_string(blocked.join("genplane-version")).unwrap(),
        "keep me"
    );
}

#[test]
fn usage_errors_exit_2_and_help_exits_0() {
    assert_eq!(
        run(Path::new(BIN), &["no-such-applet"]).status.code(),
        Some(2)
    );
    assert_eq!(
        run(Path::new(BIN), &["version", "--bogus"]).status.code(),
        Some(2)
    );
    assert_eq!(
        run(Path::new(BIN), &["version", "-o", "xml"]).status.code(),
        Some(2)
    );
    assert_eq!(
        run(Path::new(BIN), &[]).status.code(),
        Some(2),
        "no applet given"
    );
    assert_eq!(
        run(Path::new(BIN), &["--list", "version"]).status.code(),
        Some(2)
    );
    let help = run(Path::new(BIN), &["--help"]);
    assert_eq!(help.status.code(), Some(0));
    assert!(stdout(&help).contains("version"));
    assert!(!stdout(&help).contains("make-symlinks"), "hidden");
}

#[test]
fn an_unrelated_program_name_falls_back_to_the_root_command() {
    let dir = tempfile::tempdir().unwrap();
    let renamed = dir.path().join("my-control-plane");
    std::os::unix::fs::symlink(BIN, &renamed).unwrap();
    let out = run(&renamed, &["version"]);
    assert!(out.status.success());
    assert!(stdout(&out).contains("kubernetes API version: v1.33"));
}

/// `GENPLANE_*` variables are read as their flags are: lists split on commas, numbers parsed;
/// a value the flag refuses is an error naming the variable (exit 64).
#[test]
fn environment_variables_take_lists_and_numbers() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_genplane"))
        .args(["apiserver", "--config-check", "--storage-backend=etcd"])
        .env(
            "GENPLANE_ETCD_SERVERS",
            "http://127.0.0.1:1,http://127.0.0.1:2",
        )
        .env("GENPLANE_AUTHORIZATION_MODE", "RBAC,AlwaysAllow")
        .env("GENPLANE_V", "4")
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_genplane"))
        .args(["apiserver", "--config-check"])
        .env("GENPLANE_V", "loud")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(64), "{said}");
    assert!(said.contains("GENPLANE_V"), "{said}");
}
