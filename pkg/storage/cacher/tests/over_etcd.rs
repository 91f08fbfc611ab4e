//! The storage contract, proven for the watch cache over the etcd backend (a real etcd per test).

#![allow(clippy::unwrap_used)]

use genplane_storage_cacher::{Cacher, CacherConfig};
use genplane_storage_etcd::EtcdStore;
use genplane_storage_etcd::testing::EtcdServer;
use genplane_storage_testing::Backend;

/// A cache of everything (`/`) over an etcd member of its own; reopening reconnects.
struct CachedEtcd {
    server: EtcdServer,
}

impl Backend for CachedEtcd {
    type Store = Cacher<EtcdStore>;

    async fn open(&mut self) -> Cacher<EtcdStore> {
        let store = EtcdStore::connect(&self.server.config()).await.unwrap();
        Cacher::new(store, "/", CacherConfig::default()).unwrap()
    }
}

genplane_storage_testing::conformance_suite!(async {
    CachedEtcd {
        server: EtcdServer::start().await.unwrap(),
    }
});
