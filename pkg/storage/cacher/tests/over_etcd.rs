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

/// On etcd 3.4.23 (the `etcd-server` package) a watch cannot prove progress on a quiet prefix:
/// a consistent list there, after writes elsewhere, is answered from the store rather than
/// after waiting for a progress report that never comes (a fresh API server's caches did that,
/// one consistency timeout per list).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_prefix_on_etcd_3_4_answers_consistent_lists_without_waiting() {
    use std::sync::Arc;
    use std::time::Duration;

    use genplane_storage::{Bytes, ListRequest, Storage};

    let server = EtcdServer::start().await.unwrap();
    let store = Arc::new(EtcdStore::connect(&server.config()).await.unwrap());
    assert!(
        !store.watch_proves_progress(),
        "this test needs an etcd whose progress answers are not trusted ({})",
        store.server_version()
    );
    let config = CacherConfig {
        // Long enough that waiting for it fails the test.
        consistency_timeout: Duration::from_secs(3600),
        ..CacherConfig::default()
    };
    let quiet = Cacher::new(store.clone(), "/quiet/", config).unwrap();
    store.create("/quiet/a", Bytes::from("a")).await.unwrap();
    let request = ListRequest {
        prefix: "/quiet/".into(),
        ..ListRequest::default()
    };
    for i in 0..5 {
        store
            .create(&format!("/busy/{i}"), Bytes::from("b"))
            .await
            .unwrap();
        let listed = tokio::time::timeout(Duration::from_secs(60), quiet.list(request.clone()))
            .await
            .expect("a consistent list does not wait for the consistency timeout")
            .unwrap();
        let keys: Vec<&str> = listed.items.iter().map(|kv| kv.key.as_str()).collect();
        assert_eq!(keys, ["/quiet/a"]);
        assert_eq!(listed.revision, store.current_revision().await.unwrap());
    }
}
