//! The writer thread: one connection, group commit, and compaction in small chunks.

use std::fs::File;
use std::sync::Arc;
use std::thread::JoinHandle;

use genplane_storage::{
    Bytes, DeleteRequest, Deleted, Error, Event, EventKind, KeyValue, Memo, Result, Revision,
};
use rusqlite::{Connection, OptionalExtension, params};
use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::{mpsc, oneshot};

use crate::Shared;
use crate::schema::{self, State};

/// How many revisions one compaction step examines; small enough that a step takes a few
/// milliseconds, so writes queued meanwhile wait little.
const COMPACTION_CHUNK: Revision = 2048;

/// A write asked of the writer.
#[derive(Debug)]
pub(crate) enum Op {
    Write(KeyWrite),
    /// Deletes applied in the same transaction, each with its own revision and answer.
    DeleteBatch(Vec<DeleteRequest>),
    Compact {
        revision: Revision,
    },
}

/// A write of one key.
#[derive(Debug)]
pub(crate) enum KeyWrite {
    Create {
        key: String,
        value: Bytes,
    },
    Update {
        key: String,
        value: Bytes,
        expected: Revision,
    },
    Delete {
        key: String,
        expected: Option<Revision>,
    },
}

/// What a successful write produced.
#[derive(Debug)]
pub(crate) enum Outcome {
    Written(KeyValue),
    Deleted(Deleted),
    DeletedBatch(Vec<Result<Deleted>>),
    Compacted,
}

/// A write with the channel its answer goes to.
#[derive(Debug)]
pub(crate) struct WriteRequest {
    pub(crate) op: Op,
    pub(crate) reply: oneshot::Sender<Result<Outcome>>,
}

/// Starts the writer thread. It holds the lock file until it ends.
pub(crate) fn spawn(
    conn: Connection,
    lock: File,
    queue: mpsc::Receiver<WriteRequest>,
    shared: Arc<Shared>,
    state: State,
    max_batch: usize,
) -> std::io::Result<JoinHandle<()>> {
    let writer = Writer {
        conn,
        shared,
        revision: state.revision,
        compacted: state.compacted,
        max_batch,
        compaction: None,
    };
    std::thread::Builder::new()
        .name("genplane-sqlite-writer".into())
        .spawn(move || {
            writer.run(queue);
            drop(lock);
        })
}

/// A compaction whose physical part is under way.
#[derive(Debug, Clone, Copy)]
struct Compaction {
    /// Remove what this revision superseded.
    target: Revision,
    /// Rows at or below this revision have been examined.
    done: Revision,
}

/// The row that holds a key's latest state.
struct Latest {
    revision: Revision,
    created: Revision,
    deleted: bool,
    value: Vec<u8>,
}

struct Writer {
    conn: Connection,
    shared: Arc<Shared>,
    revision: Revision,
    compacted: Revision,
    max_batch: usize,
    compaction: Option<Compaction>,
}

/// One write of a batch, with what it produced so far.
struct Pending {
    reply: oneshot::Sender<Result<Outcome>>,
    result: Result<Outcome>,
}

impl Writer {
    fn run(mut self, mut queue: mpsc::Receiver<WriteRequest>) {
        loop {
            let first = if self.compaction.is_some() {
                match queue.try_recv() {
                    Ok(request) => request,
                    Err(TryRecvError::Empty) => {
                        self.compact_step();
                        continue;
                    }
                    Err(TryRecvError::Disconnected) => break,
                }
            } else {
                match queue.blocking_recv() {
                    Some(request) => request,
                    None => break,
                }
            };
            let mut batch = vec![first];
            while batch.len() < self.max_batch {
                match queue.try_recv() {
                    Ok(request) => batch.push(request),
                    Err(_) => break,
                }
            }
            self.commit(batch);
        }
    }

    /// Applies a batch in one transaction, then publishes and acknowledges it.
    fn commit(&mut self, batch: Vec<WriteRequest>) {
        let mut events = Vec::new();
        let mut pending = Vec::with_capacity(batch.len());
        let mut revision = self.revision;
        let mut compacted = self.compacted;
        // The transaction's statements are prepared once, as the writes' are (rusqlite's
        // `Transaction` parsed BEGIN and COMMIT anew each time: about 4,000 instructions per
        // batch in callgrind, 1.4% of a create).
        let tx = &self.conn;
        let applied = (|| -> rusqlite::Result<()> {
            schema::execute_cached(tx, "BEGIN IMMEDIATE")?;
            for WriteRequest { op, reply } in batch.into_iter() {
                let result = match op {
                    Op::Compact { revision: target } => {
                        if target > compacted {
                            tx.prepare_cached(
                                "UPDATE meta SET value = ?1 WHERE name = 'compacted'",
                            )?
                            .execute([target])?;
                            compacted = target;
                        }
                        Ok(Outcome::Compacted)
                    }
                    Op::Write(write) => apply(tx, write, &mut revision, &mut events)?,
                    Op::DeleteBatch(deletes) => {
                        let mut answers = Vec::with_capacity(deletes.len());
                        for DeleteRequest { key, expected } in deletes {
                            let write = KeyWrite::Delete { key, expected };
                            answers.push(match apply(tx, write, &mut revision, &mut events)? {
                                Ok(Outcome::Deleted(deleted)) => Ok(deleted),
                                Ok(other) => Err(crate::unexpected(other)),
                                Err(e) => Err(e),
                            });
                        }
                        Ok(Outcome::DeletedBatch(answers))
                    }
                };
                pending.push(Pending { reply, result });
            }
            tx.prepare_cached("UPDATE meta SET value = ?1 WHERE name = 'revision'")?
                .execute([revision])?;
            schema::execute_cached(tx, "COMMIT")
        })();
        if let Err(e) = applied {
            // Nothing of the batch stays: roll back, unless SQLite already did (some errors
            // end the transaction themselves).
            if !tx.is_autocommit()
                && let Err(error) = schema::execute_cached(tx, "ROLLBACK")
            {
                tracing::error!(%error, "rolling back a failed batch of writes");
            }
            tracing::error!(error = %e, "committing a batch of writes failed; none of them took effect");
            let error = Error::backend(e);
            for p in pending {
                let _ = p.reply.send(Err(error.clone()));
            }
            return;
        }
        // Each successful write took the next revision: what the batch moved the revision by
        // is how many writes it committed (a failed precondition or a compaction takes none).
        let writes = u64::try_from(revision - self.revision).unwrap_or_default();
        self.revision = revision;
        self.shared
            .commits
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.shared
            .writes
            .fetch_add(writes, std::sync::atomic::Ordering::Relaxed);
        if compacted > self.compacted {
            self.compacted = compacted;
            self.compaction = Some(Compaction {
                target: compacted,
                done: 0,
            });
        }
        // Publish before acknowledging: a client that hears its write succeeded and then
        // watches from its revision must find the event.
        self.shared.log.push(events.iter().cloned(), revision);
        self.shared.committed.send_modify(|c| {
            c.revision = revision;
            c.compacted = compacted;
        });
        // Looked up after the publication: a watch that registers later reads the new revision
        // itself.
        let following = self
            .shared
            .wakers
            .following(events.iter().map(|e| e.kv.key.as_str()));
        for watch in following {
            watch.wake();
        }
        for p in pending {
            let _ = p.reply.send(p.result);
        }
    }

    /// Removes one chunk of rows superseded by the compaction target.
    fn compact_step(&mut self) {
        let Some(mut compaction) = self.compaction else {
            return;
        };
        let upto = (compaction.done + COMPACTION_CHUNK).min(compaction.target);
        let removed = self.conn.prepare_cached(
            "DELETE FROM kv WHERE revision > ?1 AND revision <= ?2 AND (deleted = 1 OR EXISTS (
                SELECT 1 FROM kv AS newer
                WHERE newer.key = kv.key AND newer.revision > kv.revision AND newer.revision <= ?3))",
        )
        .and_then(|mut statement| statement.execute(params![compaction.done, upto, compaction.target]));
        match removed {
            Ok(_) => {
                compaction.done = upto;
                self.compaction = (upto < compaction.target).then_some(compaction);
                if self.compaction.is_none() {
                    tracing::debug!(revision = compaction.target, "compaction finished");
                }
            }
            Err(error) => {
                // The logical compaction stands; the rows stay until the next compaction.
                tracing::warn!(%error, "removing compacted rows failed; will retry at the next compaction");
                self.compaction = None;
            }
        }
    }
}

/// The newest row of a key, with its value. The key is compared as `CAST(?1 AS BLOB)` (it is
/// bound as a blob either way): with a bare `?1`, SQLite (as bundled, with STAT4) prepares this
/// statement again at every new binding, which cost about as much as the rest of a create's
/// storage work.
const LATEST: &str = "SELECT revision, created, deleted, value FROM kv \
    WHERE key = CAST(?1 AS BLOB) ORDER BY revision DESC LIMIT 1";

/// [`LATEST`] without the value: a create only needs to know whether the key is live.
const LATEST_LIVE: &str = "SELECT revision, created, deleted, x'' FROM kv \
    WHERE key = CAST(?1 AS BLOB) ORDER BY revision DESC LIMIT 1";

fn latest(tx: &Connection, key: &str, with_value: bool) -> rusqlite::Result<Option<Latest>> {
    let sql = if with_value { LATEST } else { LATEST_LIVE };
    tx.prepare_cached(sql)?
        .query_row([key.as_bytes()], |row| {
            Ok(Latest {
                revision: row.get(0)?,
                created: row.get(1)?,
                deleted: row.get::<_, i64>(2)? != 0,
                value: row.get(3)?,
            })
        })
        .optional()
}

fn insert(
    tx: &Connection,
    revision: Revision,
    key: &str,
    created: Revision,
    deleted: bool,
    value: &[u8],
    prev: Revision,
) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "INSERT INTO kv (revision, key, created, deleted, value, prev_revision) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![revision, key.as_bytes(), created, i64::from(deleted), value, prev])?;
    Ok(())
}

/// Applies one key write inside the batch's transaction. The outer error aborts the batch;
/// the inner one is this write's own answer (its precondition failed).
fn apply(
    tx: &Connection,
    write: KeyWrite,
    revision: &mut Revision,
    events: &mut Vec<Arc<Event>>,
) -> rusqlite::Result<Result<Outcome>> {
    let key = match &write {
        KeyWrite::Create { key, .. }
        | KeyWrite::Update { key, .. }
        | KeyWrite::Delete { key, .. } => key.clone(),
    };
    let with_value = !matches!(write, KeyWrite::Create { .. });
    let current = latest(tx, &key, with_value)?.filter(|l| !l.deleted);
    let current_kv = |l: Latest| {
        (
            l.revision,
            l.created,
            KeyValue {
                key: key.clone(),
                value: Bytes::from(l.value),
                create_revision: l.created,
                mod_revision: l.revision,
                hint: 0,
            },
        )
    };
    let next = *revision + 1;
    let outcome = match write {
        KeyWrite::Create { value, .. } => {
            if current.is_some() {
                return Ok(Err(Error::AlreadyExists { key }));
            }
            insert(tx, next, &key, next, false, &value, 0)?;
            let kv = KeyValue {
                key: key.clone(),
                value,
                create_revision: next,
                mod_revision: next,
                hint: 0,
            };
            events.push(Arc::new(Event {
                kind: EventKind::Create,
                kv: kv.clone(),
                prev: None,
                memo: Memo::default(),
            }));
            Outcome::Written(kv)
        }
        KeyWrite::Update {
            value, expected, ..
        } => {
            let Some(current) = current else {
                return Ok(Err(Error::NotFound { key }));
            };
            let (current_revision, created, prev) = current_kv(current);
            if current_revision != expected {
                return Ok(Err(Error::Conflict {
                    key,
                    expected,
                    current: Box::new(prev),
                }));
            }
            insert(tx, next, &key, created, false, &value, current_revision)?;
            let kv = KeyValue {
                key: key.clone(),
                value,
                create_revision: created,
                mod_revision: next,
                hint: 0,
            };
            events.push(Arc::new(Event {
                kind: EventKind::Update,
                kv: kv.clone(),
                prev: Some(prev),
                memo: Memo::default(),
            }));
            Outcome::Written(kv)
        }
        KeyWrite::Delete { expected, .. } => {
            let Some(current) = current else {
                return Ok(Err(Error::NotFound { key }));
            };
            let (current_revision, created, prev) = current_kv(current);
            if expected.is_some_and(|e| e != current_revision) {
                return Ok(Err(Error::Conflict {
                    key,
                    expected: expected.unwrap_or_default(),
                    current: Box::new(prev),
                }));
            }
            insert(tx, next, &key, created, true, &[], current_revision)?;
            events.push(Arc::new(Event {
                kind: EventKind::Delete,
                kv: KeyValue {
                    key: key.clone(),
                    value: Bytes::new(),
                    create_revision: created,
                    mod_revision: next,
                    hint: 0,
                },
                prev: Some(prev.clone()),
                memo: Memo::default(),
            }));
            Outcome::Deleted(Deleted {
                revision: next,
                prev,
            })
        }
    };
    *revision = next;
    Ok(Ok(outcome))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_lookups_are_prepared_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = crate::schema::open_writer(&dir.path().join("db")).unwrap();
        for i in 1..=5 {
            let tx = conn.transaction().unwrap();
            for with_value in [false, true] {
                assert!(
                    latest(&tx, &format!("/k/{i}"), with_value)
                        .unwrap()
                        .is_none()
                );
            }
            insert(&tx, i, &format!("/k/{i}"), i, false, b"v", 0).unwrap();
            tx.commit().unwrap();
        }
        for sql in [LATEST, LATEST_LIVE] {
            let statement = conn.prepare_cached(sql).unwrap();
            assert_eq!(
                statement.get_status(rusqlite::StatementStatus::RePrepare),
                0,
                "{sql}"
            );
        }
    }
}
