//! The storage contract, proven for the etcd backend against a real etcd.

#![allow(clippy::unwrap_used)]

use genplane_storage_etcd::EtcdStore;
use genplane_storage_etcd::testing::EtcdServer;
use genplane_storage_testing::Backend;

/// One etcd per test; every `open` connects a new store to it.
struct Etcd {
    server: EtcdServer,
}

impl Backend for Etcd {
    type Store = EtcdStore;

    async fn open(&mut self) -> EtcdStore {
        EtcdStore::connect(&self.server.config()).await.unwrap()
    }
}

genplane_storage_testing::conformance_suite!(async {
    Etcd {
        server: EtcdServer::start().await.unwrap(),
    }
});
