//! The storage contract, proven for the encrypting decorator over the SQLite backend: values
//! encrypted on the way in and decrypted on the way out must change nothing a caller sees.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use genplane_storage_sqlite::{SqliteConfig, SqliteStore};
use genplane_storage_testing::Backend;
use genplane_storage_value::{Transformed, Transformer};

/// A store in a temporary directory whose values are sealed with AES-GCM, rotated from an older
/// key so that both the write and the read-by-name paths run.
struct EncryptedSqlite {
    dir: tempfile::TempDir,
}

impl Backend for EncryptedSqlite {
    type Store = Transformed<SqliteStore>;

    async fn open(&mut self) -> Transformed<SqliteStore> {
        let mut config = SqliteConfig::new(self.dir.path().join("genplane.db"));
        config.history = None;
        let transformer = Transformer::new()
            .with_aesgcm([
                ("key2", &b"0123456789abcdef0123456789abcdef"[..]),
                ("key1", &b"fedcba9876543210fedcba9876543210"[..]),
            ])
            .unwrap()
            .with_identity();
        Transformed::new(
            SqliteStore::open(&config).unwrap(),
            Some(Arc::new(transformer)),
        )
    }
}

genplane_storage_testing::conformance_suite!(async {
    EncryptedSqlite {
        dir: tempfile::tempdir().unwrap(),
    }
});
