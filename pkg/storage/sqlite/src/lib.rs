//! The embedded storage backend: SQLite, implementing the genplane storage contract.
//!
//! # Layout
//!
//! One table, `kv`, holds one row per revision: the key, its value (empty for a delete), the
//! revision that created the key, a deletion flag, and the revision of the key's previous row.
//! An index on `(key, revision)` serves reads at any revision still in history; `meta` records
//! the current and the compacted revision.
//!
//! # Writes: one writer, group commit
//!
//! Every write goes through one queue to one writer thread. It takes what is queued (up to
//! [`SqliteConfig::max_batch`] writes), checks each write's precondition against the current
//! state, gives each successful write the next revision, and commits the batch in one
//! transaction with one fsync (WAL, `synchronous=FULL`). Only then are the writes acknowledged,
//! so an acknowledged write survives `kill -9` and power loss. [`SqliteStore::commits`] counts
//! the transactions and [`SqliteStore::writes`] the writes they carried.
//!
//! # Watches: published in process, no polling
//!
//! After each commit the writer appends the batch's events to an in-memory ring of recent
//! events and wakes the watchers. A watcher delivers from the ring; when it is behind the ring
//! (a watch from an old revision) it reads the history table until it catches up.
//!
//! # Compaction
//!
//! [`Storage::compact`] marks the compacted revision at once (older reads fail from then on)
//! and the writer removes superseded rows in small chunks between write batches, so compaction
//! never holds up writes for long. With [`SqliteConfig::history`] set, a background task
//! compacts periodically, keeping about that much history, as kube-apiserver does for etcd.
//!
//! # One process at a time
//!
//! The store takes an exclusive lock on `<path>.lock`; opening a database that another live
//! store holds fails with [`OpenError::Locked`].

#![warn(missing_docs)]

mod compactor;
mod reader;
mod schema;
mod watcher;
mod writer;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use genplane_storage::ring::EventRing;
use genplane_storage::{
    Bytes, DeleteRequest, Deleted, Error, KeyValue, ListRequest, ListResponse, Result, Revision,
    Storage, Watch, validate_key, validate_list,
};
use tokio::sync::{mpsc, oneshot, watch};

use crate::reader::ReadPool;
use crate::writer::{KeyWrite, Op, Outcome, WriteRequest};

/// Errors of opening a store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// Another live store (in this process or another) holds the database.
    #[error("the database {path} is in use by another process (lock file {lock} is held)")]
    Locked {
        /// The database file.
        path: PathBuf,
        /// The lock file.
        lock: PathBuf,
    },
    /// Creating the directory or the lock file failed.
    #[error("preparing {path}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// SQLite refused to open or set up the database.
    #[error("opening the database {path}")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: rusqlite::Error,
    },
    /// Periodic compaction was asked for outside a Tokio runtime.
    #[error("periodic compaction (history) needs a Tokio runtime: open the store within one")]
    NoRuntime,
    /// The database was written by a newer genplane whose schema this one does not know.
    #[error(
        "the database {path} has schema version {found}; this genplane supports up to {supported}"
    )]
    Schema {
        /// The database file.
        path: PathBuf,
        /// The schema version found.
        found: i64,
        /// The newest schema version this build knows.
        supported: i64,
    },
}

/// How to open a SQLite store.
#[derive(Clone, Debug)]
pub struct SqliteConfig {
    /// The database file; created with its directory when missing.
    pub path: PathBuf,
    /// How much history to keep: a background task compacts every `history / 5` to the revision
    /// that was current `history` ago. `None` keeps everything until [`Storage::compact`] is
    /// called.
    pub history: Option<Duration>,
    /// The most writes committed in one transaction.
    pub max_batch: usize,
    /// How many connections serve reads concurrently.
    pub read_connections: usize,
    /// How many recent events are kept in memory for watchers.
    pub event_log_events: usize,
    /// How many bytes of recent events (values and previous values) are kept in memory.
    pub event_log_bytes: usize,
    /// How long recent events stay in memory (beyond the newest 100), checked by the periodic
    /// compactor ([`SqliteConfig::history`]); watchers further behind read the history table.
    pub event_log_age: Duration,
}

impl SqliteConfig {
    /// The defaults for a database at `path`: 5 minutes of history (kube-apiserver's compaction
    /// interval for etcd), batches of up to 512 writes, 4 read connections, and up to 64 Ki
    /// events or 64 MiB of recent events in memory, for 75 seconds.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            history: Some(Duration::from_secs(300)),
            max_batch: 512,
            read_connections: 4,
            event_log_events: 65_536,
            event_log_bytes: 64 << 20,
            event_log_age: Duration::from_secs(75),
        }
    }
}

/// What readers, watchers and the writer share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) readers: ReadPool,
    pub(crate) log: EventRing,
    /// The last committed revision whose events are in the log, and whether the store closed.
    pub(crate) committed: watch::Sender<Committed>,
    /// How many write transactions the writer has committed.
    pub(crate) commits: std::sync::atomic::AtomicU64,
    /// How many writes (creates, updates, deletes) those transactions carried.
    pub(crate) writes: std::sync::atomic::AtomicU64,
    /// The watches, woken by the writer for the commits that touch their prefixes.
    pub(crate) wakers: watcher::Wakers,
}

/// The newest published state of the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Committed {
    /// The revision of the last committed write.
    pub(crate) revision: Revision,
    /// The compacted revision.
    pub(crate) compacted: Revision,
    /// Whether the store has been closed.
    pub(crate) closed: bool,
}

/// The SQLite store. Dropping it stops the writer, ends every watch and releases the lock.
#[derive(Debug)]
pub struct SqliteStore {
    shared: Arc<Shared>,
    requests: Option<mpsc::Sender<WriteRequest>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    path: PathBuf,
}

impl SqliteStore {
    /// Opens (or creates) the store described by `config`.
    ///
    /// Must be called within a Tokio runtime when [`SqliteConfig::history`] is set (the
    /// compactor is a task).
    pub fn open(config: &SqliteConfig) -> Result<Self, OpenError> {
        let path = config.path.clone();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| OpenError::Io {
                path: dir.to_owned(),
                source,
            })?;
        }
        let lock = lock_file(&path)?;
        let conn = schema::open_writer(&path)?;
        let state = schema::load_state(&conn).map_err(|source| OpenError::Sqlite {
            path: path.clone(),
            source,
        })?;
        let readers = ReadPool::open(&path, config.read_connections.max(1))?;
        let (committed, _) = watch::channel(Committed {
            revision: state.revision,
            compacted: state.compacted,
            closed: false,
        });
        let shared = Arc::new(Shared {
            readers,
            log: EventRing::new(
                state.revision,
                config.event_log_events,
                config.event_log_bytes,
            ),
            committed,
            commits: Default::default(),
            writes: Default::default(),
            wakers: watcher::Wakers::default(),
        });
        let (requests, queue) = mpsc::channel(config.max_batch.max(1) * 8);
        let writer = writer::spawn(
            conn,
            lock,
            queue,
            shared.clone(),
            state,
            config.max_batch.max(1),
        )
        .map_err(|source| OpenError::Io {
            path: path.clone(),
            source,
        })?;
        let store = Self {
            shared,
            requests: Some(requests),
            writer: Mutex::new(Some(writer)),
            path,
        };
        if let Some(history) = config.history.filter(|h| !h.is_zero()) {
            let runtime =
                tokio::runtime::Handle::try_current().map_err(|_| OpenError::NoRuntime)?;
            compactor::spawn(&runtime, &store, history, config.event_log_age);
        }
        Ok(store)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many write transactions (each with one fsync) the store has committed since it was
    /// opened; a batch of writes counts once.
    pub fn commits(&self) -> u64 {
        self.shared
            .commits
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How many writes (creates, updates and deletes, each of a [`Storage::delete_batch`]
    /// included) the store has committed since it was opened: the writes of a batch that failed
    /// as a whole, and those refused by their precondition, do not count. Against
    /// [`SqliteStore::commits`] it tells how well writes are batched: writes per commit.
    pub fn writes(&self) -> u64 {
        self.shared
            .writes
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The latest state the writer published.
    fn committed(&self) -> Committed {
        *self.shared.committed.borrow()
    }

    async fn write(&self, op: Op) -> Result<Outcome> {
        let (reply, answer) = oneshot::channel();
        let requests = self
            .requests
            .as_ref()
            .ok_or_else(|| Error::Unavailable("the store is closed".into()))?;
        requests
            .send(WriteRequest { op, reply })
            .await
            .map_err(|_| Error::Unavailable("the store is closed".into()))?;
        answer
            .await
            .map_err(|_| Error::Unavailable("the writer stopped before answering".into()))?
    }

    /// The revision to read at: `requested`, checked against the store's current revision.
    fn read_revision(&self, requested: Option<Revision>) -> Result<Revision> {
        let committed = self.committed();
        match requested {
            // As etcd: no revision, or one at or below zero, reads the current revision.
            None => Ok(committed.revision),
            Some(r) if r <= 0 => Ok(committed.revision),
            Some(r) if r > committed.revision => Err(Error::FutureRevision {
                requested: r,
                current: committed.revision,
            }),
            Some(r) => Ok(r),
        }
    }

    /// A handle the compactor uses without keeping the store alive.
    pub(crate) fn weak_parts(&self) -> (std::sync::Weak<Shared>, mpsc::WeakSender<WriteRequest>) {
        let requests = self
            .requests
            .as_ref()
            .expect("invariant: requests are only taken when the store is dropped");
        (Arc::downgrade(&self.shared), requests.downgrade())
    }
}

fn lock_file(path: &Path) -> Result<File, OpenError> {
    let mut name = path.as_os_str().to_owned();
    name.push(".lock");
    let lock_path = PathBuf::from(name);
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|source| OpenError::Io {
            path: lock_path.clone(),
            source,
        })?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(OpenError::Locked {
            path: path.to_owned(),
            lock: lock_path,
        }),
        Err(std::fs::TryLockError::Error(source)) => Err(OpenError::Io {
            path: lock_path,
            source,
        }),
    }
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        // Closing the queue stops the writer once it has answered what was queued.
        drop(self.requests.take());
        let writer = self
            .writer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(writer) = writer
            && writer.join().is_err()
        {
            tracing::error!(path = %self.path.display(), "the SQLite writer thread panicked");
        }
        self.shared.committed.send_modify(|c| c.closed = true);
        self.shared.wakers.wake_all();
    }
}

impl Storage for SqliteStore {
    async fn get(&self, key: &str, revision: Option<Revision>) -> Result<Option<KeyValue>> {
        validate_key(key)?;
        let at = self.read_revision(revision)?;
        self.shared.readers.get(key.to_owned(), at).await
    }

    async fn list(&self, request: ListRequest) -> Result<ListResponse> {
        validate_list(&request)?;
        let at = self.read_revision(request.revision)?;
        self.shared.readers.list(request, at).await
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue> {
        validate_key(key)?;
        match self
            .write(Op::Write(KeyWrite::Create {
                key: key.to_owned(),
                value,
            }))
            .await?
        {
            Outcome::Written(kv) => Ok(kv),
            other => Err(unexpected(other)),
        }
    }

    async fn update(&self, key: &str, value: Bytes, expected: Revision) -> Result<KeyValue> {
        validate_key(key)?;
        let op = Op::Write(KeyWrite::Update {
            key: key.to_owned(),
            value,
            expected,
        });
        match self.write(op).await? {
            Outcome::Written(kv) => Ok(kv),
            other => Err(unexpected(other)),
        }
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<Deleted> {
        validate_key(key)?;
        match self
            .write(Op::Write(KeyWrite::Delete {
                key: key.to_owned(),
                expected,
            }))
            .await?
        {
            Outcome::Deleted(deleted) => Ok(deleted),
            other => Err(unexpected(other)),
        }
    }

    async fn delete_batch(&self, deletes: Vec<DeleteRequest>) -> Vec<Result<Deleted>> {
        // An invalid key is its own answer; the others go to the writer as one write.
        let mut answers: Vec<Option<Result<Deleted>>> = deletes
            .iter()
            .map(|d| validate_key(&d.key).err().map(Err))
            .collect();
        let valid: Vec<DeleteRequest> = deletes
            .into_iter()
            .zip(&answers)
            .filter(|(_, answer)| answer.is_none())
            .map(|(delete, _)| delete)
            .collect();
        let count = valid.len();
        if count == 0 {
            return answers.into_iter().flatten().collect();
        }
        let written = match self.write(Op::DeleteBatch(valid)).await {
            Ok(Outcome::DeletedBatch(written)) if written.len() == count => written,
            Ok(other) => {
                let error = unexpected(other);
                (0..count).map(|_| Err(error.clone())).collect()
            }
            Err(error) => (0..count).map(|_| Err(error.clone())).collect(),
        };
        let mut written = written.into_iter();
        for answer in &mut answers {
            if answer.is_none() {
                *answer = written.next();
            }
        }
        answers
            .into_iter()
            .map(|a| a.expect("invariant: the writer answers every valid delete"))
            .collect()
    }

    async fn watch(&self, prefix: &str, after: Revision) -> Result<Watch> {
        validate_key(prefix)?;
        let committed = self.committed();
        if after < committed.compacted {
            return Err(Error::Compacted {
                requested: after,
                compacted: committed.compacted,
            });
        }
        Ok(watcher::spawn(
            self.shared.clone(),
            prefix.to_owned(),
            after,
        ))
    }

    async fn current_revision(&self) -> Result<Revision> {
        Ok(self.committed().revision)
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        let committed = self.committed();
        if revision > committed.revision {
            return Err(Error::FutureRevision {
                requested: revision,
                current: committed.revision,
            });
        }
        if revision <= committed.compacted {
            return Ok(());
        }
        match self.write(Op::Compact { revision }).await? {
            Outcome::Compacted => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    fn compacted_revision(&self) -> Revision {
        self.committed().compacted
    }

    /// The writer publishes every commit here, and no other process writes the database (the
    /// lock file): the committed revision is the current one.
    fn knows_current_revision(&self) -> bool {
        true
    }
}

/// The writer answered a write with the outcome of another kind of write: a bug.
#[derive(Debug, thiserror::Error)]
#[error("internal error: the writer answered with an unexpected outcome: {0}")]
struct UnexpectedOutcome(String);

pub(crate) fn unexpected(outcome: Outcome) -> Error {
    Error::backend(UnexpectedOutcome(format!("{outcome:?}")))
}
