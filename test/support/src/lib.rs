//! What every test binary of genplane shares, so that each waits and finds its tools the same
//! way:
//!
//! - [`DEADLINE`]: how long any wait may take, generous because the machine may be busy with
//!   other builds and tests; a wait ends as soon as its condition holds;
//! - [`eventually`] (blocking) and [`eventually_async`] (on a Tokio runtime): poll a condition
//!   until it answers, failing the test with what it waited for ([`eventually_holds`] for a
//!   plain condition, [`eventually_ok`] and [`eventually_ok_async`] for an attempt that fails
//!   until it works, failing with its last error);
//! - [`kubectl_path`]: an installed kubectl version (`kubectl.1.33`, `kubectl.1.27`, ...), which
//!   lives beside the `kubectl` on `PATH`; [`kubectl_command`]: kubectl with a kubeconfig and a
//!   discovery cache of its own;
//! - [`fixture`]: a file under `test/fixtures`;
//! - [`process`]: child processes (a role of the `genplane` executable, a test cluster, a
//!   script) started with a log of their own and waited on until ready, failing at once with
//!   the log when they exit early;
//! - [`metrics`]: samples read from a scrape of `/metrics`;
//! - `clients` (feature `clients`): raw HTTPS requests and kube-rs clients from a kubeconfig;
//! - `server` (feature `server`, which builds the whole control plane): an API server in the
//!   test's own process, assembled as `genplane apiserver` is, on SQLite or a real etcd, with
//!   its admin clients;
//! - `crd_set` (feature `crd-set`): a generated set of CRDs shaped like a cloud provider's.
//!
//! Test-only code: it panics with a message where a test should fail.

#![warn(missing_docs)]
#![allow(clippy::unwrap_used, clippy::panic, clippy::expect_used)]

#[cfg(feature = "clients")]
pub mod clients;
#[cfg(feature = "crd-set")]
pub mod crd_set;
pub mod metrics;
pub mod process;
#[cfg(feature = "server")]
pub mod server;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// How long a test waits for something that should happen.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// How often a condition is asked again.
const POLL: Duration = Duration::from_millis(100);

/// Polls `check` until it answers `Some`, failing the test after [`DEADLINE`].
pub fn eventually<T>(what: &str, check: impl FnMut() -> Option<T>) -> T {
    eventually_within(what, DEADLINE, check)
}

/// Polls `check` until it holds, failing the test after [`DEADLINE`]: [`eventually`] for a
/// condition with nothing to hand back.
pub fn eventually_holds(what: &str, mut check: impl FnMut() -> bool) {
    eventually(what, || check().then_some(()));
}

/// Polls `check` until it answers `Some`, failing the test after `limit`.
pub fn eventually_within<T>(
    what: &str,
    limit: Duration,
    mut check: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(POLL);
    }
}

/// Polls the future `check` makes until it answers `Some`, failing the test after
/// [`DEADLINE`].
pub async fn eventually_async<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(POLL).await;
    }
}

/// Calls `attempt` until it succeeds, failing the test after [`DEADLINE`] with the last
/// error: for what fails until it works (a store still locked by a stopped server, a client
/// reconnecting, a command asked until its answer is the one wanted).
pub fn eventually_ok<T, E: std::fmt::Display>(
    what: &str,
    mut attempt: impl FnMut() -> Result<T, E>,
) -> T {
    let deadline = Instant::now() + DEADLINE;
    loop {
        match attempt() {
            Ok(value) => return value,
            Err(e) => assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; the last attempt: {e}"
            ),
        }
        std::thread::sleep(POLL);
    }
}

/// Awaits the future `attempt` makes until it succeeds, failing the test after [`DEADLINE`]
/// with the last error.
pub async fn eventually_ok_async<T, E, F, Fut>(what: &str, mut attempt: F) -> T
where
    E: std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let deadline = Instant::now() + DEADLINE;
    loop {
        match attempt().await {
            Ok(value) => return value,
            Err(e) => assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; the last attempt: {e}"
            ),
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The kubectl named `name` (`kubectl`, `kubectl.1.33`, ...). The versioned ones live beside
/// the real `kubectl`, which may be a symbolic link from a directory on `PATH`. A missing one
/// fails the test: a test that skips what it cannot find proves nothing.
pub fn kubectl_path(name: &str) -> PathBuf {
    let output = Command::new("sh")
        .args(["-c", "command -v kubectl"])
        .output()
        .unwrap();
    let found = String::from_utf8(output.stdout).unwrap();
    assert!(!found.trim().is_empty(), "no kubectl on PATH");
    let real = std::fs::canonicalize(found.trim()).unwrap();
    let path = real.parent().unwrap().join(name);
    assert!(path.exists(), "{} is missing", path.display());
    path
}

/// kubectl (`program`: a path or a name on `PATH`) with `kubeconfig`, its discovery cache in
/// the kubeconfig's directory ([`kubectl_cache`]). By default kubectl keeps discovery for six
/// hours in one cache per user, a directory per `host_port`; tests start hundreds of servers on
/// ports the system hands out again, so a shared cache answers for another test's server.
pub fn kubectl_command(
    program: impl AsRef<std::ffi::OsStr>,
    kubeconfig: impl AsRef<Path>,
) -> Command {
    let kubeconfig = kubeconfig.as_ref();
    let mut command = Command::new(program);
    command
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(kubectl_cache(kubeconfig.parent().unwrap_or(Path::new("."))));
    command
}

/// The kubectl discovery cache directory of the tests whose files are in `dir`.
pub fn kubectl_cache(dir: &Path) -> PathBuf {
    dir.join("kubectl-cache")
}

/// The file `path` under the repository's `test/fixtures`.
pub fn fixture(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures")
        .join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eventually_returns_the_first_answer() {
        let mut asked = 0;
        let found = eventually("the third ask", || {
            asked += 1;
            (asked == 3).then_some(asked)
        });
        assert_eq!(found, 3);
    }

    #[test]
    #[should_panic(expected = "timed out waiting for nothing")]
    fn a_condition_that_never_holds_fails_the_test_at_the_deadline() {
        eventually_within("nothing", Duration::from_millis(300), || None::<()>);
    }

    #[test]
    fn eventually_ok_returns_the_first_success() {
        let mut asked = 0;
        let found = eventually_ok("the second ask", || {
            asked += 1;
            if asked == 2 {
                Ok(asked)
            } else {
                Err(format!("ask {asked}"))
            }
        });
        assert_eq!(found, 2);
        eventually_holds("a condition that holds", || true);
    }

    #[test]
    fn fixtures_are_read_from_the_repository() {
        assert!(fixture("crds/crontabs.yaml").contains("CustomResourceDefinition"));
    }
}
