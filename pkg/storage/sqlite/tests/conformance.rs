//! The storage contract, proven for the SQLite backend.

#![allow(clippy::unwrap_used)]

use genplane_storage_sqlite::{SqliteConfig, SqliteStore};
use genplane_storage_testing::Backend;

/// A store in a temporary directory, reopened over the same file.
struct Sqlite {
    dir: tempfile::TempDir,
}

impl Backend for Sqlite {
    type Store = SqliteStore;

    async fn open(&mut self) -> SqliteStore {
        let mut config = SqliteConfig::new(self.dir.path().join("genplane.db"));
        // The suite compacts explicitly; a background compactor would only add noise.
        config.history = None;
        SqliteStore::open(&config).unwrap()
    }
}

genplane_storage_testing::conformance_suite!(async {
    Sqlite {
        dir: tempfile::tempdir().unwrap(),
    }
});
