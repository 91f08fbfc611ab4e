//! The service manager's notification protocol (systemd's `sd_notify`), so that a unit of
//! `Type=notify` is active only once its role is ready, is seen stopping, and is restarted when
//! its role stops answering its watchdog.
//!
//! A role started by systemd with `Type=notify` finds the path of a datagram socket in
//! `NOTIFY_SOCKET` (an abstract socket when it starts with `@`) and sends newline-separated
//! `KEY=value` assignments to it: `READY=1` once ready, `STOPPING=1` when shutting down,
//! `STATUS=...` for `systemctl status`, and, when `WatchdogSec=` is set (`WATCHDOG_USEC`, with
//! `WATCHDOG_PID` naming the process it is meant for), `WATCHDOG=1` at least every half of that
//! period. Without `NOTIFY_SOCKET` (not started by systemd, or another `Type=`) every call is a
//! no-op. The socket is unset nowhere: children of the role (none today) would see it too.
//!
//! [`Notifier::watch`] sends `READY=1` when the role says it is ready and `STOPPING=1` when
//! its [`Shutdown`] triggers, and pings the watchdog from the role's runtime: a runtime that
//! stops running tasks (a deadlock) stops the pings, and systemd restarts the role.

use std::path::PathBuf;
use std::time::Duration;

use crate::process::Process;
use crate::shutdown::Shutdown;

/// Why a notification could not be sent.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NotifyError {
    /// `NOTIFY_SOCKET` names no usable socket address.
    #[error("NOTIFY_SOCKET={0:?} is not a socket address")]
    Address(String),
    /// Sending to the socket failed.
    #[error("notifying the service manager: {0}")]
    Send(#[from] std::io::Error),
}

/// Where notifications go, from the process's environment. Clones share whether `STOPPING=1`
/// was sent.
#[derive(Clone, Debug, Default)]
pub struct Notifier {
    /// The socket, when the service manager gave one.
    socket: Option<String>,
    /// How often the watchdog must hear from the role, when it watches.
    watchdog: Option<Duration>,
    /// Whether `STOPPING=1` was sent (it is sent once).
    stopping: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Notifier {
    /// The notifier of `process`: its `NOTIFY_SOCKET`, and the watchdog period of
    /// `WATCHDOG_USEC` when `WATCHDOG_PID` is unset or names this process.
    pub fn of(process: &Process) -> Notifier {
        let socket = process
            .var("NOTIFY_SOCKET")
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        let for_us = process
            .var("WATCHDOG_PID")
            .is_none_or(|pid| pid.parse::<u32>().ok() == Some(std::process::id()));
        let watchdog = process
            .var("WATCHDOG_USEC")
            .and_then(|usec| usec.parse::<u64>().ok())
            .filter(|usec| *usec > 0 && for_us)
            .map(Duration::from_micros);
        Notifier {
            socket,
            watchdog,
            stopping: Default::default(),
        }
    }

    /// Whether a service manager listens.
    pub fn enabled(&self) -> bool {
        self.socket.is_some()
    }

    /// The watchdog's period, when the service manager watches the role.
    pub fn watchdog(&self) -> Option<Duration> {
        self.watchdog.filter(|_| self.enabled())
    }

    /// Sends `state` (newline-separated assignments, e.g. `READY=1\nSTATUS=serving`); a
    /// no-op without a socket.
    pub fn notify(&self, state: &str) -> Result<(), NotifyError> {
        let Some(socket) = &self.socket else {
            return Ok(());
        };
        let sender = std::os::unix::net::UnixDatagram::unbound()?;
        match socket.strip_prefix('@') {
            Some(name) => {
                use std::os::linux::net::SocketAddrExt as _;
                let address = std::os::unix::net::SocketAddr::from_abstract_name(name)
                    .map_err(|_| NotifyError::Address(socket.clone()))?;
                sender.send_to_addr(state.as_bytes(), &address)?;
            }
            None => {
                sender.send_to(state.as_bytes(), PathBuf::from(socket))?;
            }
        }
        Ok(())
    }

    /// Tells the service manager the role is ready, with a status line.
    pub fn ready(&self, status: &str) {
        self.send_logged(&format!("READY=1\nSTATUS={status}"));
    }

    /// Tells the service manager the role's state as it changes (`systemctl status` shows
    /// the last one).
    pub fn status(&self, status: &str) {
        self.send_logged(&format!("STATUS={status}"));
    }

    /// Follows the role's life: `STOPPING=1` once `shutdown` triggers, and the watchdog's
    /// pings every half period until then, from the role's runtime. Call it from the runtime;
    /// it returns at once.
    pub fn watch(&self, shutdown: &Shutdown) {
        if !self.enabled() {
            return;
        }
        let notifier = self.clone();
        let stop = shutdown.clone();
        tokio::spawn(async move {
            let period = notifier.watchdog().map(|p| p / 2);
            loop {
                tokio::select! {
                    () = stop.triggered() => {
                        notifier.stopping();
                        return;
                    }
                    () = sleep_some(period) => notifier.send_logged("WATCHDOG=1"),
                }
            }
        });
    }

    /// Says `STOPPING=1` (once, whoever asks first): the watching task does when the shutdown
    /// triggers, and the role's runner does again when the role returns, since a role that
    /// stops at once may end its runtime before that task ran.
    pub fn stopping(&self) {
        if !self
            .stopping
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            self.send_logged("STOPPING=1\nSTATUS=stopping");
        }
    }

    fn send_logged(&self, state: &str) {
        if let Err(error) = self.notify(state) {
            tracing::warn!(%error, "the service manager's notification socket");
        }
    }
}

/// Sleeps `period`; forever when `None`.
async fn sleep_some(period: Option<Duration>) {
    match period {
        Some(period) => tokio::time::sleep(period).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_socket_nothing_is_sent_and_with_one_it_arrives() {
        let none = Notifier::of(&Process::default());
        assert!(!none.enabled());
        none.notify("READY=1").expect("a no-op");

        let dir = tempfile::tempdir().expect("a directory");
        let path = dir.path().join("notify.sock");
        let listener = std::os::unix::net::UnixDatagram::bind(&path).expect("a socket");
        let process = Process::default()
            .with_env("NOTIFY_SOCKET", path.display().to_string())
            .with_env("WATCHDOG_USEC", "2000000");
        let notifier = Notifier::of(&process);
        assert_eq!(notifier.watchdog(), Some(Duration::from_secs(2)));
        notifier.ready("serving");
        let mut buffer = [0u8; 256];
        let n = listener.recv(&mut buffer).expect("a datagram");
        assert_eq!(&buffer[..n], b"READY=1\nSTATUS=serving");
        notifier.status("leading");
        let n = listener.recv(&mut buffer).expect("a datagram");
        assert_eq!(&buffer[..n], b"STATUS=leading");
        // STOPPING=1 goes once, whichever clone says it first.
        notifier.clone().stopping();
        notifier.stopping();
        notifier.status("last");
        let n = listener.recv(&mut buffer).expect("a datagram");
        assert_eq!(&buffer[..n], b"STOPPING=1\nSTATUS=stopping");
        let n = listener.recv(&mut buffer).expect("a datagram");
        assert_eq!(&buffer[..n], b"STATUS=last");

        // A watchdog meant for another process is not ours to ping.
        let other = Notifier::of(&process.clone().with_env("WATCHDOG_PID", "1"));
        assert_eq!(other.watchdog(), None);
    }

    #[test]
    fn an_abstract_socket_is_reached_by_name() {
        use std::os::linux::net::SocketAddrExt as _;
        let name = format!("genplane-notify-test-{}", std::process::id());
        let address =
            std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).expect("a name");
        let listener = std::os::unix::net::UnixDatagram::bind_addr(&address).expect("a socket");
        let notifier =
            Notifier::of(&Process::default().with_env("NOTIFY_SOCKET", format!("@{name}")));
        notifier.notify("STATUS=x").expect("sent");
        let mut buffer = [0u8; 64];
        let n = listener.recv(&mut buffer).expect("a datagram");
        assert_eq!(&buffer[..n], b"STATUS=x");
    }
}
