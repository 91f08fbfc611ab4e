//! Graceful shutdown: SIGTERM or SIGINT starts it, the work in flight gets a deadline to finish,
//! and a second signal (or the deadline) cuts it short.
//!
//! A [`Shutdown`] is a cloneable handle that every part of a component watches: servers stop
//! accepting when it is [triggered](Shutdown::triggered), the `shutdown` readiness check fails,
//! and [`Shutdown::drain`] bounds the time left for what is already running.
//!
//! Signal handlers are process-wide, so this module never installs them by itself: the binary
//! calls [`Signals::install`] once and hands the result to [`Shutdown::trigger_on`], or runs a
//! role with [`run_role`], which does both on the role's runtime.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

/// Errors of shutdown handling.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The signal handlers could not be installed.
    #[error("installing signal handlers")]
    Install(#[source] std::io::Error),
    /// The work in flight did not finish within the deadline.
    #[error("graceful shutdown did not finish within {0:?}")]
    DeadlineExceeded(Duration),
    /// A second signal asked to stop at once.
    #[error("graceful shutdown cut short by a second signal")]
    Forced,
    /// The role's runtime could not be built.
    #[error("starting the runtime")]
    Runtime(#[source] std::io::Error),
}

/// Runs a long-running role as the binary runs each: on a multi-threaded Tokio runtime (with
/// `thread_stack` bytes per worker thread when given), with the signal handlers installed so
/// that the first SIGTERM or SIGINT triggers the [`Shutdown`] handed to `role` and a second
/// stops at once, until `role`'s future returns. Only the binary's roles call it: it installs
/// process-wide handlers.
pub fn run_role<F, Fut, E>(thread_stack: Option<usize>, role: F) -> Result<(), E>
where
    F: FnOnce(Shutdown) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: From<Error>,
{
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    if let Some(bytes) = thread_stack {
        builder.thread_stack_size(bytes);
    }
    let runtime = builder.build().map_err(Error::Runtime)?;
    runtime.block_on(async {
        let shutdown = Shutdown::new();
        tokio::spawn(shutdown.clone().trigger_on(Signals::install()?));
        role(shutdown).await
    })
}

/// Where a component is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Serving.
    Running,
    /// Finishing the work in flight; taking no new work.
    Draining,
    /// Stop now.
    Forced,
}

/// A handle on a component's shutdown. Cheap to clone; clones share the state.
#[derive(Clone, Debug)]
pub struct Shutdown {
    phase: Arc<watch::Sender<Phase>>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Self::new()
    }
}

impl Shutdown {
    /// A handle in the running phase.
    pub fn new() -> Self {
        Self {
            phase: Arc::new(watch::Sender::new(Phase::Running)),
        }
    }

    /// Starts the graceful shutdown (does nothing if it has already started).
    pub fn trigger(&self) {
        self.advance(Phase::Draining);
    }

    /// Asks everything to stop at once.
    pub fn force(&self) {
        self.advance(Phase::Forced);
    }

    fn advance(&self, to: Phase) {
        self.phase.send_if_modified(|phase| {
            let later = to > *phase;
            if later {
                *phase = to;
            }
            later
        });
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        *self.phase.borrow()
    }

    /// Whether the shutdown has started.
    pub fn is_triggered(&self) -> bool {
        self.phase() >= Phase::Draining
    }

    /// Completes when the shutdown has started.
    pub async fn triggered(&self) {
        self.reached(Phase::Draining).await;
    }

    /// Completes when an immediate stop was asked for.
    pub async fn forced(&self) {
        self.reached(Phase::Forced).await;
    }

    async fn reached(&self, phase: Phase) {
        let mut rx = self.phase.subscribe();
        // The sender lives as long as `self`, so waiting cannot fail.
        let _ = rx.wait_for(|p| *p >= phase).await;
    }

    /// Runs `work` (what remains to finish once the shutdown started) for at most `deadline`,
    /// and not past a forced stop.
    pub async fn drain<F: Future>(&self, deadline: Duration, work: F) -> Result<F::Output, Error> {
        tokio::select! {
            out = work => Ok(out),
            () = tokio::time::sleep(deadline) => Err(Error::DeadlineExceeded(deadline)),
            () = self.forced() => Err(Error::Forced),
        }
    }

    /// Triggers the shutdown at the first signal and forces it at the second. Returns after the
    /// second signal; spawn it as a task.
    pub async fn trigger_on(self, mut signals: Signals) {
        let first = signals.recv().await;
        tracing::info!(signal = ?first, "received signal, shutting down gracefully; send it again to stop at once");
        self.trigger();
        let second = signals.recv().await;
        tracing::warn!(signal = ?second, "received a second signal, stopping at once");
        self.force();
    }
}

/// The signals that stop a component.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// SIGTERM, as sent by systemd, container runtimes and `kill`.
    Terminate,
    /// SIGINT, as sent by Ctrl-C.
    Interrupt,
}

/// Installed handlers for SIGTERM and SIGINT.
///
/// Once installed, the default action of these signals (ending the process) no longer applies
/// for the rest of the process's life: whoever holds this must act on them.
#[derive(Debug)]
pub struct Signals {
    terminate: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
}

impl Signals {
    /// Installs the handlers. Must be called within a Tokio runtime.
    pub fn install() -> Result<Self, Error> {
        Ok(Self {
            terminate: signal(SignalKind::terminate()).map_err(Error::Install)?,
            interrupt: signal(SignalKind::interrupt()).map_err(Error::Install)?,
        })
    }

    /// Waits for the next SIGTERM or SIGINT.
    pub async fn recv(&mut self) -> Signal {
        tokio::select! {
            _ = self.terminate.recv() => Signal::Terminate,
            _ = self.interrupt.recv() => Signal::Interrupt,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn drain_bounds_the_work_in_flight() {
        let shutdown = Shutdown::new();
        assert_eq!(
            shutdown
                .drain(Duration::from_secs(5), async { 7 })
                .await
                .unwrap(),
            7
        );
        let slow = shutdown.drain(
            Duration::from_millis(20),
            tokio::time::sleep(Duration::from_secs(60)),
        );
        assert!(matches!(slow.await, Err(Error::DeadlineExceeded(_))));
        let forcer = shutdown.clone();
        tokio::spawn(async move { forcer.force() });
        let forced = shutdown.drain(
            Duration::from_secs(60),
            tokio::time::sleep(Duration::from_secs(60)),
        );
        assert!(matches!(forced.await, Err(Error::Forced)));
    }

    #[tokio::test]
    async fn phases_only_move_forward() {
        let shutdown = Shutdown::new();
        assert_eq!(shutdown.phase(), Phase::Running);
        shutdown.force();
        shutdown.trigger();
        assert_eq!(shutdown.phase(), Phase::Forced);
        shutdown.triggered().await;
    }

    /// Sends real signals to this test process (nextest runs each test in its own process).
    #[tokio::test]
    async fn sigterm_starts_a_graceful_shutdown_and_sigint_forces_it() {
        let signals = Signals::install().unwrap();
        let shutdown = Shutdown::new();
        let watcher = tokio::spawn(shutdown.clone().trigger_on(signals));
        let kill = |sig: &str| {
            let status = std::process::Command::new("kill")
                .args([sig, &std::process::id().to_string()])
                .status()
                .unwrap();
            assert!(status.success());
        };
        kill("-TERM");
        tokio::time::timeout(Duration::from_secs(10), shutdown.triggered())
            .await
            .unwrap();
        assert_eq!(shutdown.phase(), Phase::Draining);
        kill("-INT");
        tokio::time::timeout(Duration::from_secs(10), shutdown.forced())
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_secs(10), watcher)
            .await
            .unwrap()
            .unwrap();
    }
}
