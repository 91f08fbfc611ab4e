//! Reads: a small pool of connections used from blocking threads. Every read runs in its own
//! read transaction and checks the compacted revision inside it, so a compaction that starts
//! meanwhile cannot make it return a half-compacted answer.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use genplane_storage::{
    Bytes, Error, Event, EventKind, KeyValue, ListRequest, ListResponse, Memo, Result, Revision,
};
use rusqlite::{Connection, OptionalExtension, Row, params};
use tokio::sync::Semaphore;

use crate::OpenError;
use crate::schema;

/// Connections for reads.
#[derive(Debug)]
pub(crate) struct ReadPool {
    path: PathBuf,
    connections: Mutex<Vec<Connection>>,
    permits: Semaphore,
}

/// The smallest key after every key that starts with `prefix`; `None` if there is none.
pub(crate) fn range_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// The key range `[start, end)` of a prefix, with an end that is past every key when the
/// prefix has no successor.
fn bounds(prefix: &str) -> Vec<u8> {
    range_end(prefix.as_bytes()).unwrap_or_else(|| vec![u8::MAX; genplane_storage::MAX_KEY_LEN + 1])
}

fn key_of(bytes: Vec<u8>) -> rusqlite::Result<String> {
    String::from_utf8(bytes).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Blob, Box::new(e))
    })
}

/// Fails with Compacted when `revision` is older than the compacted revision.
fn check_compacted(conn: &Connection, revision: Revision) -> Result<()> {
    let compacted: i64 = conn
        .prepare_cached("SELECT value FROM meta WHERE name = 'compacted'")
        .and_then(|mut s| s.query_row([], |row| row.get(0)))
        .map_err(Error::backend)?;
    if revision < compacted {
        return Err(Error::Compacted {
            requested: revision,
            compacted,
        });
    }
    Ok(())
}

/// A kv row (`key, revision, created, value` in that order) as a key-value.
fn key_value(row: &Row<'_>) -> rusqlite::Result<KeyValue> {
    Ok(KeyValue {
        key: key_of(row.get(0)?)?,
        mod_revision: row.get(1)?,
        create_revision: row.get(2)?,
        value: Bytes::from(row.get::<_, Vec<u8>>(3)?),
        hint: 0,
    })
}

/// Rows that are a key's latest state at revision `?3`, within `[?1, ?2)`.
const LATEST_AT: &str = "FROM kv AS k
    WHERE k.key >= ?1 AND k.key < ?2 AND k.revision <= ?3 AND k.deleted = 0
      AND NOT EXISTS (SELECT 1 FROM kv AS newer
                      WHERE newer.key = k.key AND newer.revision > k.revision AND newer.revision <= ?3)";

impl ReadPool {
    /// Opens `size` connections to the database at `path`.
    pub(crate) fn open(path: &Path, size: usize) -> Result<Self, OpenError> {
        let connections = (0..size)
            .map(|_| schema::open_reader(path))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            path: path.to_owned(),
            connections: Mutex::new(connections),
            permits: Semaphore::new(size),
        })
    }

    /// Runs `read` on a pooled connection in a read transaction, on a blocking thread.
    async fn read<T, F>(&self, read: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| Error::Unavailable("the store is closed".into()))?;
        let pooled = self
            .connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let conn = match pooled {
            Some(conn) => conn,
            // A connection was lost to a panicked read; replace it.
            None => {
                schema::open_reader(&self.path).map_err(|e| Error::Unavailable(e.to_string()))?
            }
        };
        let (conn, result) = tokio::task::spawn_blocking(move || {
            // Cached statements: the transaction's two statements are parsed once per
            // connection, not on every read.
            let result = schema::execute_cached(&conn, "BEGIN DEFERRED")
                .map_err(Error::backend)
                .and_then(|()| read(&conn));
            // Ending a read transaction cannot lose anything; a failure would leave it open,
            // and the next BEGIN would report that.
            let _ = schema::execute_cached(&conn, "COMMIT");
            (conn, result)
        })
        .await
        .map_err(|e| Error::Unavailable(format!("a read failed: {e}")))?;
        self.connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(conn);
        result
    }

    /// The key's value at `revision`.
    pub(crate) async fn get(&self, key: String, revision: Revision) -> Result<Option<KeyValue>> {
        self.read(move |conn| {
            check_compacted(conn, revision)?;
            conn.prepare_cached(
                "SELECT key, revision, created, value, deleted FROM kv
                 WHERE key = ?1 AND revision <= ?2 ORDER BY revision DESC LIMIT 1",
            )
            .and_then(|mut s| {
                s.query_row(params![key.as_bytes(), revision], |row| {
                    let deleted: i64 = row.get(4)?;
                    (deleted == 0).then(|| key_value(row)).transpose()
                })
                .optional()
            })
            .map(Option::flatten)
            .map_err(Error::backend)
        })
        .await
    }

    /// The keys of a list request at `revision`.
    pub(crate) async fn list(
        &self,
        request: ListRequest,
        revision: Revision,
    ) -> Result<ListResponse> {
        self.read(move |conn| {
            check_compacted(conn, revision)?;
            let start = request.start.as_deref().unwrap_or(&request.prefix).as_bytes().to_vec();
            let end = bounds(&request.prefix);
            let limit = request.limit.filter(|l| *l > 0);
            // One more than asked tells whether more follow.
            let fetch = limit.map_or(-1, |l| i64::try_from(l).unwrap_or(i64::MAX - 1) + 1);
            let mut items = conn
                .prepare_cached(&format!("SELECT k.key, k.revision, k.created, k.value {LATEST_AT} ORDER BY k.key LIMIT ?4"))
                .and_then(|mut s| {
                    s.query_map(params![start, end, revision, fetch], key_value)?
                        .collect::<rusqlite::Result<Vec<_>>>()
                })
                .map_err(Error::backend)?;
            let more = limit.is_some_and(|l| items.len() > l);
            if let Some(l) = limit {
                items.truncate(l);
            }
            let count = if request.count {
                let n: i64 = conn
                    .prepare_cached(&format!("SELECT count(*) {LATEST_AT}"))
                    .and_then(|mut s| s.query_row(params![start, end, revision], |row| row.get(0)))
                    .map_err(Error::backend)?;
                Some(n)
            } else {
                None
            };
            Ok(ListResponse {
                items,
                revision,
                more,
                count,
            })
        })
        .await
    }

    /// Up to `limit` events under `prefix` with revisions in `(after, upto]`, in order, and the
    /// revision up to which they cover the range.
    pub(crate) async fn events(
        &self,
        prefix: String,
        after: Revision,
        upto: Revision,
        limit: usize,
    ) -> Result<(Vec<Arc<Event>>, Revision)> {
        self.read(move |conn| {
            check_compacted(conn, after)?;
            let end = bounds(&prefix);
            let fetch = i64::try_from(limit).unwrap_or(i64::MAX);
            let events = conn
                .prepare_cached(
                    "SELECT k.key, k.revision, k.created, k.value, k.deleted, p.revision, p.created, p.value
                     FROM kv AS k LEFT JOIN kv AS p ON k.prev_revision > 0 AND p.revision = k.prev_revision
                     WHERE k.revision > ?1 AND k.revision <= ?2 AND k.key >= ?3 AND k.key < ?4
                     ORDER BY k.revision LIMIT ?5",
                )
                .and_then(|mut s| {
                    s.query_map(params![after, upto, prefix.as_bytes(), end, fetch], |row| {
                        let kv = key_value(row)?;
                        let deleted: i64 = row.get(4)?;
                        let prev = match row.get::<_, Option<Revision>>(5)? {
                            Some(prev_revision) => Some(KeyValue {
                                key: kv.key.clone(),
                                mod_revision: prev_revision,
                                hint: 0,
                                create_revision: row.get(6)?,
                                value: Bytes::from(row.get::<_, Vec<u8>>(7)?),
                            }),
                            None => None,
                        };
                        let kind = if deleted != 0 {
                            EventKind::Delete
                        } else if kv.create_revision == kv.mod_revision {
                            EventKind::Create
                        } else {
                            EventKind::Update
                        };
                        Ok(Arc::new(Event {
                            kind,
                            kv,
                            prev,
                            memo: Memo::default(),
                        }))
                    })?
                    .collect::<rusqlite::Result<Vec<_>>>()
                })
                .map_err(Error::backend)?;
            let reached = if events.len() == limit {
                events.last().map_or(upto, |e| e.revision())
            } else {
                upto
            };
            Ok((events, reached))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_end_is_the_next_prefix() {
        assert_eq!(range_end(b"/t/"), Some(b"/t0".to_vec()));
        assert_eq!(range_end(b"a\xff\xff"), Some(b"b".to_vec()));
        assert_eq!(range_end(b"\xff"), None);
    }
}
