//! Child processes of a test, started and waited on one way: a process's standard output and
//! error go to a log file of its own, every wait is on a condition with [`DEADLINE`] and fails
//! at once, with the end of the log, when the process exits first, and dropping it kills it.
//!
//! A server started this way binds port 0 itself and prints the address it took, which
//! [`Process::wait_for_line`] reads from its log; one that cannot is given a [`free_port`] and
//! started again on another one when it loses that port to another process
//! ([`Process::try_wait_for`] answers its early exit instead of failing the test).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use crate::DEADLINE;

/// How many of its log's last lines [`Process::tail`] shows.
const TAIL: usize = 40;

/// A running child process and its log.
#[derive(Debug)]
pub struct Process {
    /// The process.
    pub child: Child,
    /// Where its standard output and error go.
    pub log: PathBuf,
    name: String,
}

impl Drop for Process {
    fn drop(&mut self) {
        // A test that failed half-way leaves nothing running.
        self.stop();
    }
}

impl Process {
    /// Runs `command` as `name` (what failure messages call it), its standard output and
    /// error appended to `log`, its standard input empty.
    pub fn spawn(name: &str, mut command: Command, log: &Path) -> Process {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap_or_else(|e| panic!("opening {}: {e}", log.display()));
        let child = command
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name}: {e}"));
        Process {
            child,
            log: log.to_owned(),
            name: name.to_owned(),
        }
    }

    /// The log so far.
    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last lines of the log, for failure messages.
    pub fn tail(&self) -> String {
        self.last_lines(TAIL)
    }

    /// The last `count` lines of the log.
    pub fn last_lines(&self, count: usize) -> String {
        let output = self.output();
        let lines: Vec<&str> = output.lines().collect();
        lines[lines.len().saturating_sub(count)..].join("\n")
    }

    /// How the process exited, if it has.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().unwrap()
    }

    /// Polls `check` until it answers, failing the test with the log when the process exits
    /// first or [`DEADLINE`] passes.
    pub fn wait_for<T>(&mut self, what: &str, check: impl FnMut(&Self) -> Option<T>) -> T {
        self.wait_for_within(what, DEADLINE, check)
    }

    /// Like [`Process::wait_for`], for what may take longer than [`DEADLINE`] (several
    /// processes that start one after another, say): fails after `limit`.
    pub fn wait_for_within<T>(
        &mut self,
        what: &str,
        limit: Duration,
        mut check: impl FnMut(&Self) -> Option<T>,
    ) -> T {
        self.poll(what, limit, |p| Ok(check(p)))
            .unwrap_or_else(|status| {
                panic!(
                    "{} exited ({status}) while waiting for {what}; its log ends with:\n{}",
                    self.name,
                    self.tail()
                )
            })
    }

    /// Like [`Process::wait_for`], but an early exit is answered (with the exit status)
    /// instead of failing the test, so that the caller can start the process again; a check
    /// that answers `Err` fails the test with its message and the log.
    pub fn try_wait_for<T>(
        &mut self,
        what: &str,
        check: impl FnMut(&Self) -> Result<Option<T>, String>,
    ) -> Result<T, ExitStatus> {
        self.poll(what, DEADLINE, check)
    }

    fn poll<T>(
        &mut self,
        what: &str,
        limit: Duration,
        mut check: impl FnMut(&Self) -> Result<Option<T>, String>,
    ) -> Result<T, ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.exited() {
                return Err(status);
            }
            match check(self) {
                Ok(Some(value)) => return Ok(value),
                Ok(None) => {}
                Err(failure) => panic!(
                    "{} failed while waiting for {what}: {failure}; its log ends with:\n{}",
                    self.name,
                    self.tail()
                ),
            }
            assert!(
                Instant::now() < deadline,
                "{} gave no {what} within {limit:?}; its log ends with:\n{}",
                self.name,
                self.tail()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until the log has a line that starts with `prefix` (after leading blanks): the
    /// rest of that line. How a server's banner (its address, say) is read.
    pub fn wait_for_line(&mut self, prefix: &str) -> String {
        self.wait_for(&format!("a line {prefix:?}"), |p| {
            p.output().lines().find_map(|line| {
                let rest = line.trim_start().strip_prefix(prefix)?;
                Some(rest.to_owned())
            })
        })
    }

    /// Sends `signal` (`TERM`, `INT`, ...) to the process.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal} {}", self.child.id());
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        self.signal("TERM");
    }

    /// Waits until the process exits, within `within`.
    pub fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.exited() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "{} did not exit within {within:?}; its log ends with:\n{}",
                self.name,
                self.tail()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the process (SIGKILL) and reaps it; the test fails when it had already exited.
    pub fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// Kills the process if it still runs and reaps it; never fails (what a drop does).
    pub fn stop(&mut self) {
        if let Ok(None) = self.child.try_wait()
            && self.child.kill().is_ok()
        {
            self.child.wait().ok();
        }
    }
}

/// A new log file `<name>-<n>.log` in `dir`: one per start, so that what an earlier run of
/// the same data directory printed is never read as this one's.
pub fn next_log(dir: &Path, name: &str) -> PathBuf {
    (1..)
        .map(|n| dir.join(format!("{name}-{n}.log")))
        .find(|path| !path.exists())
        .unwrap()
}

/// A port nobody listens on right now, for a process that cannot bind port 0 itself; whoever
/// uses it must start again on another one when it lost the port to another process.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Standard output and error of a finished command, as text.
pub fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Runs `command` with `input` on its standard input (none: an empty one) and collects both
/// outputs.
pub fn output_with_input(mut command: Command, input: Option<&str>) -> Output {
    use std::io::Write as _;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    if let Some(input) = input {
        stdin.write_all(input.as_bytes()).unwrap();
    }
    drop(stdin);
    child.wait_with_output().unwrap()
}

/// The standard output of a command that must have succeeded (the test fails with both
/// outputs otherwise).
pub fn ok(output: Output) -> String {
    assert!(output.status.success(), "{}", text(&output));
    String::from_utf8(output.stdout).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell(script: &str, dir: &tempfile::TempDir) -> Process {
        let mut command = Command::new("sh");
        command.args(["-c", script]);
        Process::spawn("the script", command, &next_log(dir.path(), "script"))
    }

    #[test]
    fn a_banner_line_is_read_from_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let mut process = shell(
            "echo starting >&2; echo '  serving on 127.0.0.1:1234'; sleep 60",
            &dir,
        );
        assert_eq!(process.wait_for_line("serving on "), "127.0.0.1:1234");
        assert!(process.output().starts_with("starting\n"));
        process.stop();
        assert!(process.exited().is_some());
    }

    #[test]
    #[should_panic(expected = "the script exited (exit status: 3) while waiting for")]
    fn an_early_exit_fails_the_wait_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut process = shell("echo giving up; exit 3", &dir);
        process.wait_for_line("serving on ");
    }

    #[test]
    fn the_outputs_of_a_command_are_read_as_text() {
        let output = Command::new("sh")
            .args(["-c", "echo out; echo err >&2"])
            .output()
            .unwrap();
        assert_eq!(text(&output), "out\nerr\n");
        assert_eq!(ok(output), "out\n");
    }
}
