//! What the etcd backend adds to the contract: TLS, several endpoints, key prefixes, watches
//! that outlive an etcd restart, and the coordinated compactor.

#![allow(clippy::unwrap_used)]

use std::net::TcpListener;
use std::time::Duration;

use genplane_storage::{Bytes, Error, EventKind, Revision, Storage, Watch, WatchEvent};
use genplane_storage_etcd::testing::EtcdServer;
use genplane_storage_etcd::{COMPACT_REV_KEY, EtcdConfig, EtcdStore, EtcdTls};
use genplane_test_support::{DEADLINE, eventually_async, eventually_ok_async};

fn bytes(value: &str) -> Bytes {
    Bytes::copy_from_slice(value.as_bytes())
}

/// The next change on `watch`, skipping progress reports.
async fn next_event(watch: &mut Watch) -> std::sync::Arc<genplane_storage::Event> {
    loop {
        match tokio::time::timeout(DEADLINE, watch.next()).await {
            Err(_) => panic!("no event within {DEADLINE:?}"),
            Ok(None) => panic!("the watch ended"),
            Ok(Some(WatchEvent::Progress(_))) => continue,
            Ok(Some(WatchEvent::Error(e))) => panic!("the watch failed: {e}"),
            Ok(Some(WatchEvent::Event(event))) => return event,
        }
    }
}

/// A raw etcd client, to look at what the store wrote.
async fn raw_client(server: &EtcdServer) -> etcd_client::Client {
    etcd_client::Client::connect([server.endpoint()], None)
        .await
        .unwrap()
}

#[tokio::test]
async fn mutual_tls_is_required_and_works() {
    let server = EtcdServer::start_tls().await.unwrap();
    assert!(server.endpoint().starts_with("https://"));
    let store = EtcdStore::connect(&server.config()).await.unwrap();
    let start = store.current_revision().await.unwrap();
    let mut watch = store.watch("/t/", start).await.unwrap();
    let kv = store.create("/t/a", bytes("over tls")).await.unwrap();
    assert_eq!(store.get("/t/a", None).await.unwrap(), Some(kv.clone()));
    assert_eq!(next_event(&mut watch).await.kv, kv);

    let files = server.tls_files().unwrap();
    let mut without_cert = server.config();
    without_cert.dial_timeout = Duration::from_secs(2);
    without_cert.tls = Some(EtcdTls {
        ca_file: Some(files.ca.clone()),
        cert_file: None,
        key_file: None,
    });
    let refused = EtcdStore::connect(&without_cert).await;
    assert!(
        refused.is_err(),
        "a client without a certificate is refused"
    );

    let mut plain = server.config();
    plain.dial_timeout = Duration::from_secs(2);
    plain.tls = None;
    plain.endpoints = vec![server.endpoint().replace("https://", "http://")];
    assert!(
        EtcdStore::connect(&plain).await.is_err(),
        "plain HTTP to a TLS member fails"
    );
}

#[tokio::test]
async fn a_dead_endpoint_next_to_a_live_one_is_tolerated() {
    let server = EtcdServer::start().await.unwrap();
    let dead = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let mut config = server.config();
    config.endpoints.insert(0, dead);
    let store = EtcdStore::connect(&config).await.unwrap();
    for i in 0..20 {
        let kv = store.create(&format!("/t/{i}"), bytes("x")).await.unwrap();
        assert_eq!(store.get(&kv.key, None).await.unwrap(), Some(kv));
    }
    let listed = store
        .list(genplane_storage::ListRequest {
            prefix: "/t/".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 20);
}

/// A TCP proxy to etcd that can be cut (closing every connection and refusing new ones) and
/// restored on the same port: a member that becomes unreachable.
struct Proxy {
    address: std::net::SocketAddr,
    upstream: std::net::SocketAddr,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Proxy {
    async fn start(upstream: &str) -> Proxy {
        let upstream = upstream.trim_start_matches("http://").parse().unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let mut proxy = Proxy {
            address,
            upstream,
            task: None,
        };
        proxy.serve(listener);
        proxy
    }

    fn endpoint(&self) -> String {
        format!("http://{}", self.address)
    }

    fn serve(&mut self, listener: tokio::net::TcpListener) {
        let upstream = self.upstream;
        self.task = Some(tokio::spawn(async move {
            // Dropping the set (when the task is aborted) closes every proxied connection.
            let mut connections = tokio::task::JoinSet::new();
            loop {
                let (mut client, _) = listener.accept().await.unwrap();
                connections.spawn(async move {
                    if let Ok(mut server) = tokio::net::TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
            }
        }));
    }

    async fn cut(&mut self) {
        let task = self.task.take().unwrap();
        task.abort();
        let _ = task.await;
    }

    async fn restore(&mut self) {
        let listener = tokio::net::TcpListener::bind(self.address).await.unwrap();
        self.serve(listener);
    }
}

#[tokio::test]
async fn requests_and_watches_fail_over_to_a_reachable_member() {
    let server = EtcdServer::start().await.unwrap();
    let mut proxies = [
        Proxy::start(&server.endpoint()).await,
        Proxy::start(&server.endpoint()).await,
    ];
    let mut config = server.config();
    config.endpoints = proxies.iter().map(Proxy::endpoint).collect();
    let store = EtcdStore::connect(&config).await.unwrap();
    let mut watch = store
        .watch("/t/", store.current_revision().await.unwrap())
        .await
        .unwrap();
    // One of the two is the member in use; cutting each in turn cuts that one once.
    for (round, cut) in [0, 1].into_iter().enumerate() {
        proxies[cut].cut().await;
        for i in 0..5 {
            let key = format!("/t/{round}-{i}");
            let kv = store.create(&key, bytes("x")).await.unwrap();
            assert_eq!(store.get(&key, None).await.unwrap(), Some(kv.clone()));
            assert_eq!(next_event(&mut watch).await.kv, kv, "the watch goes on");
        }
        proxies[cut].restore().await;
    }
}

#[tokio::test]
async fn no_endpoint_answering_is_unavailable() {
    let dead = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let mut config = EtcdConfig::new([dead]);
    config.dial_timeout = Duration::from_millis(500);
    let err = EtcdStore::connect(&config).await.unwrap_err();
    assert!(matches!(err, Error::Unavailable(_)), "{err:?}");
    assert!(err.is_retryable());
}

#[tokio::test]
async fn concurrent_reads_of_the_current_revision_share_round_trips_and_miss_no_write() {
    let server = EtcdServer::start().await.unwrap();
    let store = EtcdStore::connect(&server.config()).await.unwrap();
    // Another client writes: this store learns of the writes only from etcd.
    let other = EtcdStore::connect(&server.config()).await.unwrap();
    for round in 0..5 {
        let written = other
            .create(&format!("/t/{round}"), bytes("x"))
            .await
            .unwrap();
        let before = store.status().revision_reads;
        let revisions = futures::future::join_all((0..64).map(|_| store.current_revision())).await;
        let sent = store.status().revision_reads - before;
        for revision in revisions {
            assert!(
                revision.unwrap() >= written.mod_revision,
                "every caller sees the write acknowledged before it asked"
            );
        }
        // The first caller's read, and one for the callers that arrived while it was out.
        assert!(
            (1..=2).contains(&sent),
            "64 concurrent callers sent {sent} reads"
        );
    }
    // A caller that gives up while its read is out leaves the turn to the others.
    let _ = tokio::time::timeout(Duration::ZERO, store.current_revision()).await;
    let written = other.create("/t/last", bytes("x")).await.unwrap();
    assert!(store.current_revision().await.unwrap() >= written.mod_revision);

    // While etcd does not answer, a failed read fails its whole batch: the callers do not
    // queue for one failed read after another.
    let mut server = server;
    server.freeze();
    let before = store.status().revision_reads;
    let answers = futures::future::join_all((0..16).map(|_| store.current_revision())).await;
    assert!(answers.iter().all(Result::is_err), "{answers:?}");
    let sent = store.status().revision_reads - before;
    assert!((1..=2).contains(&sent), "16 callers sent {sent} reads");
    server.thaw();
    eventually_ok_async("etcd to answer again", || store.current_revision()).await;
}

#[tokio::test]
async fn prefixes_keep_clusters_apart() {
    let server = EtcdServer::start().await.unwrap();
    let open = |prefix: &str| {
        let mut config = server.config();
        config.prefix = prefix.to_owned();
        async move { EtcdStore::connect(&config).await.unwrap() }
    };
    let a = open("/cluster-a").await;
    let b = open("/cluster-b").await;
    let mut watch_b = b
        .watch("/t/", b.current_revision().await.unwrap())
        .await
        .unwrap();
    let in_a = a.create("/t/x", bytes("a")).await.unwrap();
    assert_eq!(b.get("/t/x", None).await.unwrap(), None);
    let in_b = b.create("/t/x", bytes("b")).await.unwrap();
    assert_eq!(a.get("/t/x", None).await.unwrap(), Some(in_a));
    assert_eq!(
        next_event(&mut watch_b).await.kv,
        in_b,
        "b's watch skips a's write"
    );

    let mut raw = raw_client(&server).await;
    let stored = raw.get("/cluster-a/t/x", None).await.unwrap();
    assert_eq!(stored.kvs()[0].value(), b"a");
}

#[tokio::test]
async fn a_watch_survives_an_etcd_restart() {
    let mut server = EtcdServer::start().await.unwrap();
    let store = EtcdStore::connect(&server.config()).await.unwrap();
    let start = store.current_revision().await.unwrap();
    let mut watch = store.watch("/t/", start).await.unwrap();
    let before = store.create("/t/before", bytes("1")).await.unwrap();
    assert_eq!(next_event(&mut watch).await.kv, before);

    server.kill();
    server.restart().await.unwrap();

    // The client reconnects by itself; writes may fail until it has.
    let after = eventually_ok_async("a write after the restart", || async {
        match store.create("/t/after", bytes("2")).await {
            Ok(kv) => Ok(kv),
            Err(e) if e.is_retryable() => Err(e),
            Err(e) => panic!("writing after the restart: {e}"),
        }
    })
    .await;
    assert_eq!(after.mod_revision, before.mod_revision + 1);
    let event = next_event(&mut watch).await;
    assert_eq!(
        (event.kind, &event.kv),
        (EventKind::Create, &after),
        "the watch goes on after the restart, without a gap or a duplicate"
    );
}

#[tokio::test]
async fn a_watch_needing_the_compacted_revision_fails_although_etcd_still_has_it() {
    let server = EtcdServer::start().await.unwrap();
    let store = EtcdStore::connect(&server.config()).await.unwrap();
    let mut kv = store.create("/t/a", bytes("0")).await.unwrap();
    for i in 1..4 {
        kv = store
            .update("/t/a", bytes(&i.to_string()), kv.mod_revision)
            .await
            .unwrap();
    }
    let compacted = kv.mod_revision;
    store.compact(compacted).await.unwrap();
    // etcd would replay the event at the compacted revision; the contract discards it.
    match store.watch("/t/", compacted - 1).await {
        Err(Error::Compacted {
            requested,
            compacted: reported,
        }) => assert_eq!((requested, reported), (compacted - 1, compacted)),
        other => panic!("expected Compacted, got {other:?}"),
    }
    let mut watch = store.watch("/t/", compacted).await.unwrap();
    let next = store
        .update("/t/a", bytes("4"), kv.mod_revision)
        .await
        .unwrap();
    assert_eq!(next_event(&mut watch).await.kv, next);
}

#[tokio::test]
async fn coordinated_compactors_compact_once_per_interval() {
    const INTERVAL: Duration = Duration::from_millis(400);
    const ROUNDS: u32 = 6;
    let server = EtcdServer::start().await.unwrap();
    let a = EtcdStore::connect(&server.config()).await.unwrap();
    let b = EtcdStore::connect(&server.config()).await.unwrap();
    let first = a.create("/t/k", bytes("0")).await.unwrap();
    let mut latest = first.clone();

    let compactors = [a.start_compactor(INTERVAL), b.start_compactor(INTERVAL)];
    let started = tokio::time::Instant::now();
    while started.elapsed() < INTERVAL * ROUNDS + INTERVAL / 2 {
        latest = a
            .update("/t/k", bytes("more"), latest.mod_revision)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let compactions: u64 = compactors.iter().map(|c| c.compactions()).sum();
    drop(compactors);

    let mut raw = raw_client(&server).await;
    let key = raw.get(COMPACT_REV_KEY, None).await.unwrap();
    let claims = key.kvs()[0].version();
    assert!(
        (1..=i64::from(ROUNDS)).contains(&claims),
        "two compactors over {ROUNDS} intervals claimed {claims} compactions"
    );
    assert!(
        (1..=u64::from(ROUNDS) - 1).contains(&compactions),
        "{compactions} compactions in {ROUNDS} intervals, the first of which only looks"
    );

    let compacted_to: Revision = key.kvs()[0].value_str().unwrap().parse().unwrap();
    assert!(compacted_to > first.mod_revision);
    match a.get("/t/k", Some(first.mod_revision)).await {
        Err(Error::Compacted {
            requested,
            compacted,
        }) => {
            assert_eq!(requested, first.mod_revision);
            assert!(compacted > first.mod_revision, "compacted to {compacted}");
        }
        other => panic!("history before the compaction is gone, but got {other:?}"),
    }
    assert_eq!(a.get("/t/k", None).await.unwrap(), Some(latest));
}

/// Creates `key`, retrying while etcd is unavailable; returns the write and how long it took
/// from the first attempt.
async fn create_retrying(store: &EtcdStore, key: &str) -> (genplane_storage::KeyValue, Duration) {
    let started = tokio::time::Instant::now();
    let kv = eventually_ok_async(&format!("{key} written"), || async {
        match store.create(key, bytes("x")).await {
            Ok(kv) => Ok(kv),
            // A write abandoned on a member that stopped answering may still have taken
            // effect: it is there, then.
            Err(e @ (Error::Timeout | Error::Interrupted(_))) => {
                match store.get(key, None).await.ok().flatten() {
                    Some(kv) => Ok(kv),
                    None => Err(e),
                }
            }
            Err(e) if e.is_retryable() => Err(e),
            Err(e) => panic!("writing {key}: {e}"),
        }
    })
    .await;
    (kv, started.elapsed())
}

/// Writes on their way to a member that is killed end at once, as interrupted (their outcome
/// unknown), never as timeouts; each either took effect or did not, and the store goes on
/// with the other members.
#[tokio::test]
async fn writes_cut_off_by_a_killed_member_are_interrupted_not_timed_out() {
    let mut cluster = genplane_storage_etcd::testing::EtcdCluster::start(3)
        .await
        .unwrap();
    let store = std::sync::Arc::new(EtcdStore::connect(&cluster.config()).await.unwrap());
    create_retrying(&store, "/t/warm").await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let (store, stop) = (store.clone(), stop.clone());
            tokio::spawn(async move {
                let mut outcomes = Vec::new();
                let mut i = 0;
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    let key = format!("/t/w{w}-{i}");
                    let started = tokio::time::Instant::now();
                    let outcome = store.create(&key, bytes("x")).await;
                    outcomes.push((key, outcome.map(drop), started.elapsed()));
                    i += 1;
                }
                outcomes
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    cluster.kill(0);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let mut interrupted = 0;
    for writer in writers {
        for (key, outcome, took) in writer.await.unwrap() {
            match outcome {
                Ok(()) => {}
                Err(Error::Interrupted(reason)) => {
                    interrupted += 1;
                    assert!(
                        took < Duration::from_secs(5),
                        "{key}: interrupted after {took:?}"
                    );
                    assert!(reason.contains("etcd"), "{key}: {reason}");
                }
                // Sent nowhere: no member was available for a moment.
                Err(Error::Unavailable(_)) => {}
                Err(other) => panic!("{key}: {other:?} after {took:?}"),
            }
        }
    }
    assert!(
        interrupted > 0,
        "some write was on its way to the killed member"
    );
    // The store goes on with the other two.
    create_retrying(&store, "/t/after").await;
}

#[tokio::test]
async fn a_frozen_member_is_abandoned_for_writes_reads_and_watches() {
    let mut cluster = genplane_storage_etcd::testing::EtcdCluster::start(3)
        .await
        .unwrap();
    let store = EtcdStore::connect(&cluster.config()).await.unwrap();
    let preferred = store.status().members.iter().position(|m| m.preferred);
    assert_eq!(preferred, Some(0), "the first endpoint is preferred");
    let start = store.current_revision().await.unwrap();
    let mut watch = store.watch("/t/", start).await.unwrap();
    let (before, _) = create_retrying(&store, "/t/before").await;
    assert_eq!(next_event(&mut watch).await.kv, before);

    cluster.freeze(0);
    let (during, took) = create_retrying(&store, "/t/during").await;
    let event = next_event(&mut watch).await;
    assert_eq!(event.kv, during, "the watch moved to a live member");
    assert_eq!(
        store.get("/t/during", None).await.unwrap(),
        Some(during.clone())
    );
    let status = store.status();
    assert!(status.members[0].error.is_some(), "{status:?}");
    assert!(!status.members[0].preferred);
    assert!(store.available().is_ok(), "two members of three answer");
    println!("a frozen member cost {took:?} of write unavailability");

    cluster.thaw(0);
    let (after, _) = create_retrying(&store, "/t/after").await;
    assert_eq!(
        next_event(&mut watch).await.kv,
        after,
        "no gap, no duplicate"
    );
}

#[tokio::test]
async fn losing_quorum_fails_requests_and_readiness_and_recovery_needs_no_reconnect() {
    let mut cluster = genplane_storage_etcd::testing::EtcdCluster::start(3)
        .await
        .unwrap();
    let mut config = cluster.config();
    config.request_timeout = Duration::from_secs(10);
    let store = EtcdStore::connect(&config).await.unwrap();
    let (before, _) = create_retrying(&store, "/t/before").await;
    let mut watch = store.watch("/t/", before.mod_revision).await.unwrap();

    cluster.kill(1);
    cluster.kill(2);
    // Without quorum nothing succeeds: every write fails (none is acknowledged falsely), and
    // readiness says so without waiting for etcd.
    let mut failures = 0;
    while failures < 3 {
        match store
            .create(&format!("/t/lost-{failures}"), bytes("x"))
            .await
        {
            Err(e) => {
                assert!(e.is_retryable(), "{e:?}");
                failures += 1;
            }
            Ok(kv) => panic!("a write succeeded without quorum: {kv:?}"),
        }
    }
    let unavailable = eventually_async("the store to say it is unavailable", || async {
        store.available().err()
    })
    .await;
    for endpoint in cluster.endpoints() {
        assert!(unavailable.contains(&endpoint), "{unavailable}");
    }

    cluster.restart(&[1, 2]).await.unwrap();
    let (after, _) = create_retrying(&store, "/t/after").await;
    loop {
        let event = next_event(&mut watch).await;
        // Writes that failed without quorum may still have been committed later.
        if event.kv.key.starts_with("/t/lost-") {
            continue;
        }
        assert_eq!(event.kv, after, "the watch follows after recovery");
        break;
    }
    assert!(store.available().is_ok());
}
