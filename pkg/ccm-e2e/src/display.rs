//! What the runner prints as it goes: plain lines where the output is not a terminal (CI logs
//! keep every line), and on a terminal the same lines with one status line below them,
//! redrawn in place as tests start and end (elapsed time, tests done of selected, the
//! running ones, passed/failed/skipped).

use std::io::Write;
use std::sync::{Arc, Mutex};

use crate::suite::{Progress, StatusHook, Tally};

/// Erases the terminal's current line and returns to its start.
const CLEAR_LINE: &str = "\r\x1b[2K";
/// How long the status line may be (terminals are at least this wide).
const STATUS_WIDTH: usize = 100;

/// A terminal's output: progress lines above one status line kept at the bottom.
pub struct Terminal {
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for Terminal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Terminal")
            .field("status", &self.inner().status)
            .finish()
    }
}

struct Inner {
    out: Box<dyn Write + Send>,
    status: String,
}

impl Terminal {
    /// Output to `out`, a terminal.
    pub fn new(out: Box<dyn Write + Send>) -> Arc<Self> {
        Arc::new(Self {
            inner: Mutex::new(Inner {
                out,
                status: String::new(),
            }),
        })
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Prints `text` above the status line.
    pub fn line(&self, text: &str) {
        let mut inner = self.inner();
        let status = inner.status.clone();
        let _ = write!(inner.out, "{CLEAR_LINE}{text}\n{status}");
        let _ = inner.out.flush();
    }

    /// Redraws the status line for `tally`.
    pub fn status(&self, tally: &Tally) {
        let mut inner = self.inner();
        inner.status = status_line(tally);
        let status = inner.status.clone();
        let _ = write!(inner.out, "{CLEAR_LINE}{status}");
        let _ = inner.out.flush();
    }

    /// Removes the status line (before the summary).
    pub fn finish(&self) {
        let mut inner = self.inner();
        inner.status.clear();
        let _ = write!(inner.out, "{CLEAR_LINE}");
        let _ = inner.out.flush();
    }

    /// The progress and status hooks that print here.
    pub fn hooks(self: &Arc<Self>) -> (Progress, StatusHook) {
        let lines = self.clone();
        let status = self.clone();
        (
            Arc::new(move |text: &str| lines.line(text)),
            StatusHook(Arc::new(move |tally: &Tally| status.status(tally))),
        )
    }
}

/// The status line of `tally`: `[1m05s] 7/23 done, running 3: <first name>… | 6 passed,
/// 1 failed, 0 skipped`, cut to 100 characters.
pub fn status_line(tally: &Tally) -> String {
    let seconds = tally.elapsed.as_secs();
    let done = tally.passed + tally.failed + tally.skipped;
    let running = match tally.running.first() {
        Some(first) => format!(", running {}: {first}", tally.running.len()),
        None => String::new(),
    };
    let counts = format!(
        " | {} passed, {} failed, {} skipped",
        tally.passed, tally.failed, tally.skipped
    );
    let head = format!(
        "[{}m{:02}s] {done}/{} done{running}",
        seconds / 60,
        seconds % 60,
        tally.selected
    );
    let room = STATUS_WIDTH.saturating_sub(counts.chars().count());
    let head = if head.chars().count() > room {
        let cut: String = head.chars().take(room.saturating_sub(1)).collect();
        format!("{cut}…")
    } else {
        head
    };
    format!("{head}{counts}")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::time::Duration;

    use super::*;

    /// A writer whose bytes the test can read.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn tally() -> Tally {
        Tally {
            selected: 23,
            running: vec!["[sig-network] Services should release NodePorts on delete"; 3],
            passed: 6,
            failed: 1,
            skipped: 0,
            elapsed: Duration::from_secs(65),
        }
    }

    #[test]
    fn the_status_line_counts_and_names_the_running_tests_within_its_width() {
        let line = status_line(&tally());
        assert!(
            line.starts_with("[1m05s] 7/23 done, running 3: [sig-network] Services"),
            "{line}"
        );
        assert!(line.ends_with(" | 6 passed, 1 failed, 0 skipped"), "{line}");
        let mut long = tally();
        long.running = vec!["x".repeat(300).leak()];
        let line = status_line(&long);
        assert_eq!(line.chars().count(), STATUS_WIDTH, "{line}");
        assert!(line.contains("…"), "{line}");
        assert_eq!(
            status_line(&Tally::default()),
            "[0m00s] 0/0 done | 0 passed, 0 failed, 0 skipped"
        );
    }

    #[test]
    fn lines_print_above_the_status_line_which_is_redrawn_in_place() {
        let captured = Captured::default();
        let terminal = Terminal::new(Box::new(captured.clone()));
        let (progress, StatusHook(status)) = terminal.hooks();
        status(&tally());
        progress("PASS [1.0s] a test");
        terminal.finish();
        let out = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        let status = status_line(&tally());
        assert_eq!(
            out,
            format!("{CLEAR_LINE}{status}{CLEAR_LINE}PASS [1.0s] a test\n{status}{CLEAR_LINE}")
        );
    }
}
