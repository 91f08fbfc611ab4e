//! The database schema and connection settings.

use std::path::Path;
use std::time::Duration;

use genplane_storage::Revision;
use rusqlite::{Connection, OpenFlags, OptionalExtension};

use crate::OpenError;

/// The schema version this build writes.
pub(crate) const SCHEMA_VERSION: i64 = 1;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS kv (
    revision      INTEGER PRIMARY KEY,  -- the revision of this change
    key           BLOB    NOT NULL,     -- the key, UTF-8
    created       INTEGER NOT NULL,     -- the revision that created the key
    deleted       INTEGER NOT NULL,     -- 1 for a delete (a tombstone), else 0
    value         BLOB    NOT NULL,     -- the new value; empty for a delete
    prev_revision INTEGER NOT NULL      -- the key's previous row; 0 for a create
);
CREATE INDEX IF NOT EXISTS kv_key_revision ON kv (key, revision);
CREATE TABLE IF NOT EXISTS meta (
    name  TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
";

/// Runs a statement without parameters or rows (`BEGIN`, `COMMIT`, `ROLLBACK`) from the
/// connection's statement cache: parsed once per connection, not at every transaction.
pub(crate) fn execute_cached(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(drop)
}

/// What the writer needs to know when it starts.
#[derive(Clone, Copy, Debug)]
pub(crate) struct State {
    /// The current revision.
    pub(crate) revision: Revision,
    /// The compacted revision.
    pub(crate) compacted: Revision,
}

fn sqlite_error(path: &Path) -> impl Fn(rusqlite::Error) -> OpenError + '_ {
    move |source| OpenError::Sqlite {
        path: path.to_owned(),
        source,
    }
}

fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(Duration::from_secs(30))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    // Every commit is durable: the WAL is fsynced before a write is acknowledged.
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "OFF")?;
    Ok(())
}

/// Opens the writer's connection, creating the schema when needed.
pub(crate) fn open_writer(path: &Path) -> Result<Connection, OpenError> {
    let err = sqlite_error(path);
    let conn = Connection::open(path).map_err(&err)?;
    configure(&conn).map_err(&err)?;
    let found: Option<i64> = conn
        .query_row("SELECT value FROM meta WHERE name = 'schema'", [], |row| {
            row.get(0)
        })
        .optional()
        .or_else(|e| match e {
            // A new database has no meta table yet.
            rusqlite::Error::SqliteFailure(_, Some(ref m)) if m.contains("no such table") => {
                Ok(None)
            }
            other => Err(other),
        })
        .map_err(&err)?;
    if let Some(found) = found
        && found > SCHEMA_VERSION
    {
        return Err(OpenError::Schema {
            path: path.to_owned(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    conn.execute_batch(SCHEMA).map_err(&err)?;
    conn.execute(
        "INSERT OR IGNORE INTO meta (name, value) VALUES ('schema', ?1), ('revision', 1), ('compacted', 0)",
        [SCHEMA_VERSION],
    )
    .map_err(&err)?;
    Ok(conn)
}

/// The page cache of each reader connection, in KiB (SQLite's default is 2,000 KiB).
///
/// A reader's cache serves little: in WAL mode a connection drops its whole cache when it
/// begins a read after another connection committed, which the writer does all the time, and
/// the pages readers read (the newest, for the watches; all of them in order, for a cache's
/// list) are in the operating system's page cache anyway. But a full cache is memory the
/// process keeps for good: after 20,000 objects came and went, the four readers held about
/// 2 MiB each (their threads' `malloc` arenas, measured in `/proc/PID/smaps`), a third of what
/// the API server kept above idle. The writer keeps SQLite's default: its cache stays valid
/// between its own commits and serves the precondition reads of every write.
pub(crate) const READER_CACHE_KIB: i64 = 256;

/// Opens a connection for reads.
pub(crate) fn open_reader(path: &Path) -> Result<Connection, OpenError> {
    let err = sqlite_error(path);
    // Read-write at the file level (WAL readers update the shared-memory index), but this
    // connection refuses writes: only the writer writes.
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(&err)?;
    conn.busy_timeout(Duration::from_secs(30)).map_err(&err)?;
    conn.pragma_update(None, "query_only", "ON").map_err(&err)?;
    // A negative size is in KiB.
    conn.pragma_update(None, "cache_size", -READER_CACHE_KIB)
        .map_err(&err)?;
    // A stable query plan: without it, binding new values to a cached statement can make
    // SQLite prepare it again on every read (seen in profiles as sqlite3Reprepare).
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .map_err(&err)?;
    Ok(conn)
}

/// Reads the current and compacted revisions.
pub(crate) fn load_state(conn: &Connection) -> rusqlite::Result<State> {
    let meta = |name: &str| -> rusqlite::Result<i64> {
        conn.query_row("SELECT value FROM meta WHERE name = ?1", [name], |row| {
            row.get(0)
        })
    };
    let stored = meta("revision")?;
    // The meta row is written in the same transaction as the rows, so it cannot be behind them;
    // the max is a belt-and-braces check.
    let newest: Option<i64> =
        conn.query_row("SELECT max(revision) FROM kv", [], |row| row.get(0))?;
    Ok(State {
        revision: stored.max(newest.unwrap_or(0)),
        compacted: meta("compacted")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `kill -9` cannot tell a missing fsync from a present one (the page cache survives), so
    /// the settings that make commits durable against power loss are checked here.
    #[test]
    fn the_writer_commits_durably() {
        let dir = tempfile::tempdir().unwrap();
        let conn = open_writer(&dir.path().join("db")).unwrap();
        let journal: String = conn
            .query_row("PRAGMA journal_mode", [], |row| row.get(0))
            .unwrap();
        let synchronous: i64 = conn
            .query_row("PRAGMA synchronous", [], |row| row.get(0))
            .unwrap();
        assert_eq!(journal, "wal");
        assert_eq!(synchronous, 2, "FULL: the WAL is fsynced at every commit");
        let reader = open_reader(&dir.path().join("db")).unwrap();
        assert!(
            reader.execute("DELETE FROM kv", []).is_err(),
            "readers cannot write"
        );
    }

    #[test]
    fn readers_keep_a_small_page_cache_and_the_writer_the_default() {
        let dir = tempfile::tempdir().unwrap();
        let cache = |conn: &Connection| -> i64 {
            conn.query_row("PRAGMA cache_size", [], |row| row.get(0))
                .unwrap()
        };
        let writer = open_writer(&dir.path().join("db")).unwrap();
        let reader = open_reader(&dir.path().join("db")).unwrap();
        assert_eq!(cache(&reader), -READER_CACHE_KIB);
        assert_eq!(cache(&writer), -2000);
    }
}
