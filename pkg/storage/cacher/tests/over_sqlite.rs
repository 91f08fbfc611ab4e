//! The storage contract, proven for the watch cache over the SQLite backend.

#![allow(clippy::unwrap_used)]

use genplane_storage_cacher::{Cacher, CacherConfig};
use genplane_storage_sqlite::{SqliteConfig, SqliteStore};
use genplane_storage_testing::Backend;

/// A cache of everything (`/`) over a SQLite store in a temporary directory.
struct CachedSqlite {
    dir: tempfile::TempDir,
}

impl Backend for CachedSqlite {
    type Store = Cacher<SqliteStore>;

    async fn open(&mut self) -> Cacher<SqliteStore> {
        let mut config = SqliteConfig::new(self.dir.path().join("genplane.db"));
        config.history = None;
        // A dropped cache's tasks end asynchronously: the one that held the store at that moment
        // may keep the file locked a little longer, as a restarting process would find it.
        let store = genplane_test_support::eventually_ok_async("the store to open", || async {
            match SqliteStore::open(&config) {
                Ok(store) => Ok(store),
                Err(e @ genplane_storage_sqlite::OpenError::Locked { .. }) => Err(e),
                Err(e) => panic!("opening the store: {e}"),
            }
        })
        .await;
        Cacher::new(store, "/", CacherConfig::default()).unwrap()
    }
}

genplane_storage_testing::conformance_suite!(async {
    CachedSqlite {
        dir: tempfile::tempdir().unwrap(),
    }
});
