//! The log backend: events as JSON lines in a file (rotated) or on standard output.
//!
//! Events are serialized on the caller's thread and handed to one writer thread through a
//! bounded queue, so a request never waits on the disk unless the writer has fallen a whole
//! queue behind. What happens then is the [`LogMode`]:
//!
//! - [`LogMode::Blocking`] (upstream's default for the log backend): the caller waits for room (on a
//!   Tokio worker thread through `block_in_place`, so the thread's other tasks move on).
//!   Nothing is lost; a slow disk slows requests down. Write errors are logged and counted,
//!   never returned to the request (upstream's `blocking`, not `blocking-strict`).
//! - [`LogMode::Batch`]: the caller never waits; when the queue is full the event is dropped
//!   and counted (upstream's `batch` mode drops the same way when its buffer is full).
//!
//! The writer flushes whenever the queue runs empty. [`LogBackend::flush`] waits until every
//! event queued before it is written; [`LogBackend::shutdown`] (also run on drop) drains the
//! queue and stops the thread.

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::auditor::Sink;
use crate::event::Event;
use crate::rotate::{RotatingFile, Rotation, is_stdout};

/// How long [`LogBackend::flush`] waits for the writer before giving up.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(30);

/// What a full queue does to the caller.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogMode {
    /// Wait for room (upstream's default `blocking`).
    #[default]
    Blocking,
    /// Drop the event (upstream's `batch` behaviour on a full buffer).
    Batch,
}

/// Where and how the log backend writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogConfig {
    /// The file; `-` is standard output (never rotated).
    pub path: PathBuf,
    /// Rotation of the file.
    pub rotation: Rotation,
    /// What a full queue does.
    pub mode: LogMode,
    /// How many events the queue holds.
    pub queue: usize,
}

impl LogConfig {
    /// Writes to `path` with upstream's defaults: rotation at 100 MB, all backups kept,
    /// blocking, a queue of 1024 events.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        LogConfig {
            path: path.into(),
            rotation: Rotation::default(),
            mode: LogMode::Blocking,
            queue: 1024,
        }
    }
}

/// Why the log backend could not start or flush.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The log file could not be created.
    #[error("ensureLogFile: {path}: {source}")]
    Open {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: io::Error,
    },
    /// The writer thread could not be started.
    #[error("starting the audit log writer: {0}")]
    Spawn(io::Error),
    /// The writer has stopped.
    #[error("the audit log writer has stopped")]
    Stopped,
    /// The writer did not catch up in time.
    #[error("the audit log writer did not flush within {0:?}")]
    Timeout(Duration),
    /// Writing or flushing failed.
    #[error("writing the audit log: {0}")]
    Write(io::Error),
}

/// Counters of the log backend (for `apiserver_audit_event_total` and
/// `apiserver_audit_error_total`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogStats {
    /// Events written.
    pub written: u64,
    /// Events dropped because the queue was full (batch mode) or the writer had stopped.
    pub dropped: u64,
    /// Events that could not be encoded or written.
    pub errors: u64,
}

#[derive(Debug, Default)]
struct Counters {
    written: AtomicU64,
    dropped: AtomicU64,
    errors: AtomicU64,
}

enum Message {
    Line(Vec<u8>),
    Flush(SyncSender<io::Result<()>>),
    Stop,
}

/// The JSON-lines log backend. Share it as `Arc<LogBackend>`; it is a [`Sink`].
#[derive(Debug)]
pub struct LogBackend {
    queue: SyncSender<Message>,
    mode: LogMode,
    counters: Arc<Counters>,
    stopped: AtomicBool,
    writer: Mutex<Option<JoinHandle<()>>>,
}

enum Output {
    Stdout(BufWriter<io::Stdout>),
    File(RotatingFile),
}

impl Output {
    fn write_line(&mut self, line: &[u8]) -> io::Result<()> {
        match self {
            Output::Stdout(out) => out.write_all(line),
            Output::File(file) => file.write_line(line),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Output::Stdout(out) => out.flush(),
            Output::File(file) => file.flush(),
        }
    }
}

/// Creates the log file (and its directory) as upstream's `ensureLogFile`: directory 0700,
/// file 0600, so a bad path fails at start rather than at the first event.
fn ensure_log_file(path: &Path) -> io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt;
            builder.mode(0o700);
        }
        builder.create(dir)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path).map(drop)
}

impl LogBackend {
    /// Starts the backend: creates the file, then the writer thread.
    pub fn start(config: LogConfig) -> Result<Self, LogError> {
        let output = if is_stdout(&config.path) {
            Output::Stdout(BufWriter::new(io::stdout()))
        } else {
            ensure_log_file(&config.path).map_err(|source| LogError::Open {
                path: config.path.clone(),
                source,
            })?;
            Output::File(RotatingFile::new(&config.path, config.rotation))
        };
        Self::with_output(output, config.mode, config.queue)
    }

    fn with_output(output: Output, mode: LogMode, queue: usize) -> Result<Self, LogError> {
        let (tx, rx) = mpsc::sync_channel(queue.max(1));
        let counters = Arc::new(Counters::default());
        let thread_counters = Arc::clone(&counters);
        let writer = std::thread::Builder::new()
            .name("audit-log".to_owned())
            .spawn(move || write_loop(rx, output, &thread_counters))
            .map_err(LogError::Spawn)?;
        Ok(LogBackend {
            queue: tx,
            mode,
            counters,
            stopped: AtomicBool::new(false),
            writer: Mutex::new(Some(writer)),
        })
    }

    /// The counters so far.
    pub fn stats(&self) -> LogStats {
        LogStats {
            written: self.counters.written.load(Ordering::Relaxed),
            dropped: self.counters.dropped.load(Ordering::Relaxed),
            errors: self.counters.errors.load(Ordering::Relaxed),
        }
    }

    /// Waits until every event queued so far is handed to the operating system.
    pub fn flush(&self) -> Result<(), LogError> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.queue
            .send(Message::Flush(tx))
            .map_err(|_| LogError::Stopped)?;
        match rx.recv_timeout(FLUSH_TIMEOUT) {
            Ok(result) => result.map_err(LogError::Write),
            Err(RecvTimeoutError::Timeout) => Err(LogError::Timeout(FLUSH_TIMEOUT)),
            Err(RecvTimeoutError::Disconnected) => Err(LogError::Stopped),
        }
    }

    /// Writes every queued event and stops the writer; later events are dropped. Idempotent.
    pub fn shutdown(&self) {
        if self.stopped.swap(true, Ordering::SeqCst) {
            return;
        }
        let _ = self.queue.send(Message::Stop);
        let handle = self
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(handle) = handle
            && handle.join().is_err()
        {
            tracing::error!("the audit log writer panicked");
        }
    }

    fn drop_event(&self) -> bool {
        self.counters.dropped.fetch_add(1, Ordering::Relaxed);
        false
    }
}

impl Drop for LogBackend {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl Sink for LogBackend {
    fn process(&self, event: &Event) -> bool {
        if self.stopped.load(Ordering::Relaxed) {
            return self.drop_event();
        }
        let mut line = match serde_json::to_vec(event) {
            Ok(line) => line,
            Err(e) => {
                self.counters.errors.fetch_add(1, Ordering::Relaxed);
                tracing::error!(error = %e, "Error in audit plugin 'log' affecting 1 audit events");
                return false;
            }
        };
        line.push(b'\n');
        let sent = match self.mode {
            LogMode::Blocking => match self.queue.try_send(Message::Line(line)) {
                Ok(()) => true,
                Err(TrySendError::Disconnected(_)) => false,
                // A full queue makes the request wait for the writer. On a runtime's worker
                // thread the wait must not hold up the other tasks of that thread: tell the
                // runtime, so that it moves them elsewhere while this one blocks.
                Err(TrySendError::Full(message)) => {
                    let send = || self.queue.send(message).is_ok();
                    match tokio::runtime::Handle::try_current() {
                        Ok(handle)
                            if handle.runtime_flavor()
                                == tokio::runtime::RuntimeFlavor::MultiThread =>
                        {
                            tokio::task::block_in_place(send)
                        }
                        _ => send(),
                    }
                }
            },
            LogMode::Batch => match self.queue.try_send(Message::Line(line)) {
                Ok(()) => true,
                Err(TrySendError::Full(_)) => {
                    tracing::error!(
                        "Error in audit plugin 'log' affecting 1 audit events: audit buffer queue blocked"
                    );
                    false
                }
                Err(TrySendError::Disconnected(_)) => false,
            },
        };
        if sent { true } else { self.drop_event() }
    }
}

fn write_loop(rx: Receiver<Message>, mut output: Output, counters: &Counters) {
    let handle = |message: Message, output: &mut Output| -> bool {
        match message {
            Message::Line(line) => match output.write_line(&line) {
                Ok(()) => {
                    counters.written.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    counters.errors.fetch_add(1, Ordering::Relaxed);
                    tracing::error!(error = %e, "Error in audit plugin 'log' affecting 1 audit events");
                }
            },
            Message::Flush(reply) => {
                let _ = reply.send(output.flush());
            }
            Message::Stop => return false,
        }
        true
    };
    'outer: while let Ok(message) = rx.recv() {
        if !handle(message, &mut output) {
            break;
        }
        while let Ok(message) = rx.try_recv() {
            if !handle(message, &mut output) {
                break 'outer;
            }
        }
        if let Err(e) = output.flush() {
            tracing::error!(error = %e, "flushing the audit log");
        }
    }
    if let Err(e) = output.flush() {
        tracing::error!(error = %e, "flushing the audit log");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use genplane_authentication::UserInfo;

    use super::*;
    use crate::attributes::RequestAttributes;
    use crate::auditor::Auditor;
    use crate::policy::{Level, Policy};
    use crate::rotate::Rotation;

    fn write_events(backend: &Arc<LogBackend>, n: usize) {
        let auditor = Auditor::new(Policy::everything_at(Level::Metadata), backend.clone());
        let user = UserInfo::authenticated("alice", vec![]);
        for _ in 0..n {
            let record = auditor
                .begin(&RequestAttributes::new(&user, "get", "/api/v1/namespaces"))
                .expect("audited");
            record.response_started(200);
            record.finish();
        }
    }

    #[test]
    fn writes_json_lines_and_flushes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("logs/audit.log");
        let backend = Arc::new(LogBackend::start(LogConfig::new(&path)).expect("start"));
        write_events(&backend, 3);
        backend.flush().expect("flush");
        let text = std::fs::read_to_string(&path).expect("read");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 6);
        for line in lines {
            let event: Event = serde_json::from_str(line).expect("an event per line");
            assert_eq!(event.user.username, "alice");
        }
        assert_eq!(backend.stats().written, 6);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
            assert_eq!(mode(&path), 0o600);
            assert_eq!(mode(&dir.path().join("logs")), 0o700);
        }
    }

    #[test]
    fn the_log_holds_secret_data_only_at_request_level() {
        use crate::attributes::ResourceAttributes;
        use crate::policy::{GroupResources, PolicyRule, StageSet};

        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("audit.log");
        let backend = Arc::new(LogBackend::start(LogConfig::new(&path)).expect("start"));
        // Secrets at Metadata, configmaps with bodies.
        let rule = |level, resource: &str| PolicyRule {
            resources: vec![GroupResources {
                resources: vec![resource.to_owned()],
                ..GroupResources::default()
            }],
            ..PolicyRule::at(level)
        };
        let policy = Policy {
            rules: vec![
                rule(Level::Metadata, "secrets"),
                rule(Level::Request, "configmaps"),
            ],
            omit_stages: StageSet::EMPTY,
            omit_managed_fields: false,
        };
        let auditor = Auditor::new(policy, backend.clone());
        let user = UserInfo::authenticated("alice", vec![]);
        for (resource, kind, field) in [
            ("secrets", "Secret", "data"),
            ("configmaps", "ConfigMap", "data"),
        ] {
            let attrs = RequestAttributes {
                resource: Some(ResourceAttributes {
                    api_version: "v1",
                    resource,
                    namespace: "default",
                    ..ResourceAttributes::default()
                }),
                ..RequestAttributes::new(&user, "create", "/api/v1/namespaces/default/x")
            };
            let record = auditor.begin(&attrs).expect("audited");
            record.set_request_object(&serde_json::json!({
                "apiVersion": "v1", "kind": kind, "metadata": {"name": "n"},
                field: {"password": "c2VjcmV0LXZhbHVl"}
            }));
            record.response_started(201);
            record.finish();
        }
        backend.flush().expect("flush");
        let events: Vec<Event> = std::fs::read_to_string(&path)
            .expect("read")
            .lines()
            .map(|l| serde_json::from_str(l).expect("event"))
            .collect();
        assert_eq!(events.len(), 4);
        let secret = serde_json::to_string(&events[1]).expect("json");
        assert_eq!(events[1].level, Level::Metadata);
        assert!(!secret.contains("c2VjcmV0LXZhbHVl"), "{secret}");
        assert_eq!(events[3].level, Level::Request);
        let configmap = events[3].request_object.as_ref().expect("body").get();
        assert!(configmap.contains("c2VjcmV0LXZhbHVl"), "{configmap}");
    }

    #[test]
    fn shutdown_drains_the_queue_and_later_events_are_dropped() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("audit.log");
        let backend = Arc::new(LogBackend::start(LogConfig::new(&path)).expect("start"));
        write_events(&backend, 50);
        backend.shutdown();
        assert_eq!(
            std::fs::read_to_string(&path)
                .expect("read")
                .lines()
                .count(),
            100
        );
        write_events(&backend, 1);
        assert_eq!(backend.stats().dropped, 2);
        assert!(matches!(backend.flush(), Err(LogError::Stopped)));
    }

    #[test]
    fn small_max_size_rotates_and_max_backups_prunes() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("audit.log");
        let config = LogConfig {
            rotation: Rotation {
                max_size_bytes: 2000,
                max_backups: 2,
                max_age_days: 0,
            },
            ..LogConfig::new(&path)
        };
        let backend = Arc::new(LogBackend::start(config).expect("start"));
        // About 600 bytes per event: many rotations, a few milliseconds apart so that backup
        // names (millisecond resolution) differ.
        for _ in 0..12 {
            write_events(&backend, 1);
            backend.flush().expect("flush");
            std::thread::sleep(Duration::from_millis(3));
        }
        backend.shutdown();
        let mut backups = 0;
        let mut events = 0;
        for entry in std::fs::read_dir(dir.path()).expect("read dir") {
            let entry = entry.expect("entry");
            let name = entry.file_name().to_string_lossy().into_owned();
            let size = entry.metadata().expect("stat").len();
            assert!(size <= 2000, "{name} has {size} bytes");
            if name != "audit.log" {
                assert!(
                    name.starts_with("audit-") && name.ends_with(".log"),
                    "{name}"
                );
                backups += 1;
            }
            events += std::fs::read_to_string(entry.path())
                .expect("read")
                .lines()
                .count();
        }
        assert_eq!(backups, 2);
        assert!(events < 24, "old backups were removed");
        assert_eq!(backend.stats().written, 24);
    }

    #[test]
    fn batch_mode_drops_instead_of_waiting() {
        // A writer that never drains: a queue nobody reads.
        let (tx, rx) = mpsc::sync_channel::<Message>(1);
        let backend = LogBackend {
            queue: tx,
            mode: LogMode::Batch,
            counters: Arc::default(),
            stopped: AtomicBool::new(false),
            writer: Mutex::new(None),
        };
        let backend = Arc::new(backend);
        write_events(&backend, 2); // four events into a queue of one
        assert_eq!(backend.stats().dropped, 3);
        drop(rx);
    }

    #[test]
    fn stdout_backend_writes() {
        let backend = Arc::new(LogBackend::start(LogConfig::new("-")).expect("start"));
        write_events(&backend, 1);
        backend.flush().expect("flush");
        assert_eq!(backend.stats().written, 2);
    }
}
