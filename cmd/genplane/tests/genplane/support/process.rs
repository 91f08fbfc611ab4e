//! A child process of a test: its output goes to a log file, every wait on it fails at once
//! (with the end of its log) when it exits early, and dropping it kills it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::DEADLINE;

/// A running child process and its log.
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
        if let Ok(None) = self.child.try_wait()
            && self.child.kill().is_ok()
        {
            self.child.wait().ok();
        }
    }
}

impl Process {
    /// Runs `command` as `name`, its standard output and error appended to `log`.
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
        let output = self.output();
        let lines: Vec<&str> = output.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// How the process exited, if it has.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().unwrap()
    }

    /// Polls `check` until it answers, failing the test with the log when the process exits
    /// first or [`DEADLINE`] passes.
    pub fn wait_for<T>(&mut self, what: &str, mut check: impl FnMut(&Self) -> Option<T>) -> T {
        self.try_wait_for(what, |p| Ok(check(p)))
            .unwrap_or_else(|status| {
                panic!(
                    "{} exited ({status}) while waiting for {what}; its log ends with:\n{}",
                    self.name,
                    self.tail()
                )
            })
    }

    /// Like [`Process::wait_for`], but an early exit is answered (with the exit status)
    /// instead of failing the test, so that the caller can start the process again.
    pub fn try_wait_for<T>(
        &mut self,
        what: &str,
        mut check: impl FnMut(&Self) -> Result<Option<T>, String>,
    ) -> Result<T, ExitStatus> {
        let deadline = Instant::now() + DEADLINE;
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
                "{} gave no {what} within {DEADLINE:?}; its log ends with:\n{}",
                self.name,
                self.tail()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -TERM {}", self.child.id());
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

    /// Kills the process (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}
