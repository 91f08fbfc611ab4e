//! Behaviour of the watch cache beyond the shared contract.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use genplane_storage::{
    Bytes, Error, Event, EventKind, ListRequest, StateRead, Storage, Watch, WatchEvent,
};
use genplane_storage_cacher::{Cacher, CacherConfig};
use genplane_storage_sqlite::{SqliteConfig, SqliteStore};

fn store(dir: &tempfile::TempDir) -> SqliteStore {
    let mut config = SqliteConfig::new(dir.path().join("genplane.db"));
    config.history = None;
    SqliteStore::open(&config).unwrap()
}

async fn next_event(watch: &mut Watch) -> Arc<Event> {
    loop {
        match tokio::time::timeout(genplane_test_support::DEADLINE, watch.next())
            .await
            .unwrap()
        {
            Some(WatchEvent::Event(event)) => return event,
            Some(WatchEvent::Progress(_)) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
}

fn list(prefix: &str) -> ListRequest {
    ListRequest {
        prefix: prefix.into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn every_watcher_gets_the_same_shared_event() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cacher::new(
        store(&dir),
        "/registry/configmaps/",
        CacherConfig::default(),
    )
    .unwrap();
    let now = cache.current_revision().await.unwrap();
    let mut watchers = Vec::new();
    for _ in 0..5 {
        watchers.push(cache.watch("/registry/configmaps/", now).await.unwrap());
    }
    cache
        .create(
            "/registry/configmaps/default/a",
            Bytes::from(vec![1u8; 4096]),
        )
        .await
        .unwrap();
    let first = next_event(&mut watchers[0]).await;
    for watch in &mut watchers[1..] {
        let event = next_event(watch).await;
        assert!(
            Arc::ptr_eq(&first, &event),
            "one event object, shared, not copied per watcher"
        );
    }
}

#[tokio::test]
async fn consistent_reads_see_writes_made_behind_the_caches_back() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cacher::new(store(&dir), "/a/", CacherConfig::default()).unwrap();
    for i in 0..50 {
        // Straight to the store: the cache learns of it only through its watch.
        let written = cache
            .store()
            .create(&format!("/a/{i:02}"), Bytes::from_static(b"x"))
            .await
            .unwrap();
        let listed = cache.list(list("/a/")).await.unwrap();
        assert_eq!(
            listed.items.len(),
            i + 1,
            "a consistent list includes the write just acknowledged"
        );
        assert!(listed.revision >= written.mod_revision);
    }
    // A resourceVersion="0" style read answers from memory without waiting.
    assert!(cache.list_cached(list("/a/")).await.unwrap().items.len() <= 50);
}

#[tokio::test]
async fn consistent_gets_over_an_embedded_store_see_writes_and_come_from_memory() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cacher::new(store(&dir), "/a/", CacherConfig::default()).unwrap();
    assert!(cache.knows_current_revision());
    for i in 0..50 {
        // Straight to the store: the cache learns of each write only through its watch.
        let written = cache
            .store()
            .create("/a/x", Bytes::from(format!("v{i}")))
            .await
            .unwrap();
        assert_eq!(
            cache.get("/a/x", None).await.unwrap(),
            Some(written.clone()),
            "a consistent get returns the write just acknowledged"
        );
        cache.store().delete("/a/x", None).await.unwrap();
        assert_eq!(
            cache.get("/a/x", None).await.unwrap(),
            None,
            "and its deletion"
        );
    }
    let written = cache
        .store()
        .create("/a/y", Bytes::from_static(b"kept"))
        .await
        .unwrap();
    let first = cache.get("/a/y", None).await.unwrap().unwrap();
    let second = cache.get("/a/y", None).await.unwrap().unwrap();
    assert_eq!(first, written);
    // Each read of the store decodes a value of its own; the cache hands out its one copy.
    assert_eq!(
        first.value.as_ptr(),
        second.value.as_ptr(),
        "both gets were answered from the cache's entry"
    );
    let stored = cache.store().get("/a/y", None).await.unwrap().unwrap();
    assert_ne!(stored.value.as_ptr(), first.value.as_ptr());
}

#[tokio::test]
async fn a_quiet_prefix_still_answers_consistent_reads_promptly() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cacher::new(store(&dir), "/quiet/", CacherConfig::default()).unwrap();
    cache
        .create("/quiet/a", Bytes::from_static(b"x"))
        .await
        .unwrap();
    for i in 0..20 {
        cache
            .create(&format!("/busy/{i}"), Bytes::from_static(b"x"))
            .await
            .unwrap();
    }
    let current = cache.current_revision().await.unwrap();
    let started = std::time::Instant::now();
    let listed = cache.list(list("/quiet/")).await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(listed.items.len(), 1);
    assert!(
        listed.revision >= current,
        "the cache caught up through progress, not events"
    );
    // The next page of a list at the cache's revision comes from memory; an older revision from
    // the store, exactly.
    let older = cache
        .list(ListRequest {
            revision: Some(current - 20),
            ..list("/quiet/")
        })
        .await
        .unwrap();
    assert_eq!(older.revision, current - 20);
    assert_eq!(older.items.len(), 1);
}

#[tokio::test]
async fn a_watcher_that_falls_behind_the_window_is_ended_and_resumes_without_a_gap() {
    let dir = tempfile::tempdir().unwrap();
    let config = CacherConfig {
        window_events: 16,
        watch_buffer: 8,
        ..CacherConfig::default()
    };
    let cache = Cacher::new(store(&dir), "/w/", config).unwrap();
    let start = cache.current_revision().await.unwrap();
    let mut slow = cache.watch("/w/", start).await.unwrap();
    // Far more events than the watch buffers and the window holds, while nobody reads.
    for i in 0..300 {
        cache
            .create(&format!("/w/{i:05}"), Bytes::from_static(b"x"))
            .await
            .unwrap();
    }
    // What the watcher buffered arrives in order, then the end.
    let mut received = 0;
    let resume = loop {
        match tokio::time::timeout(genplane_test_support::DEADLINE, slow.next())
            .await
            .unwrap()
        {
            Some(WatchEvent::Event(event)) => {
                assert_eq!(event.kv.key, format!("/w/{received:05}"));
                received += 1;
            }
            Some(WatchEvent::Progress(_)) => {}
            Some(WatchEvent::Error(Error::TooSlow { revision })) => break revision,
            other => panic!("unexpected {other:?}"),
        }
    };
    assert!(received <= 8 + 1, "no more than the buffer, got {received}");
    assert!(slow.next().await.is_none(), "nothing after the end");
    // Watching again from there continues without a gap (from the store: it is older than the
    // window), and so does a new watch from before the window.
    let mut again = cache.watch("/w/", resume).await.unwrap();
    for i in received..300 {
        assert_eq!(next_event(&mut again).await.kv.key, format!("/w/{i:05}"));
    }
    let mut old = cache.watch("/w/", start).await.unwrap();
    assert_eq!(next_event(&mut old).await.kv.key, "/w/00000");
}

#[tokio::test]
async fn a_reader_that_keeps_up_is_not_ended_by_a_burst() {
    let dir = tempfile::tempdir().unwrap();
    let config = CacherConfig {
        window_events: 16,
        watch_buffer: 8,
        ..CacherConfig::default()
    };
    let cache = Arc::new(Cacher::new(store(&dir), "/w/", config).unwrap());
    let start = cache.current_revision().await.unwrap();
    let mut watch = cache.watch("/w/", start).await.unwrap();
    let writer = {
        let cache = cache.clone();
        tokio::spawn(async move {
            for i in 0..300 {
                cache
                    .create(&format!("/w/{i:05}"), Bytes::from_static(b"x"))
                    .await
                    .unwrap();
            }
        })
    };
    for i in 0..300 {
        assert_eq!(next_event(&mut watch).await.kv.key, format!("/w/{i:05}"));
    }
    writer.await.unwrap();
}

#[tokio::test]
async fn a_watch_with_the_state_hands_out_the_cached_objects_shared() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cacher::new(store(&dir), "/s/", CacherConfig::default()).unwrap();
    for key in ["/s/a/1", "/s/b/1", "/s/b/2"] {
        cache.create(key, Bytes::from_static(b"v")).await.unwrap();
    }
    let updated = cache
        .update("/s/b/1", Bytes::from_static(b"w"), 3)
        .await
        .unwrap();
    let mut first = cache
        .watch_state("/s/b/", StateRead::Current)
        .await
        .unwrap();
    let mut second = cache.watch_state("/s/b/", StateRead::Any).await.unwrap();
    let mut state = Vec::new();
    for _ in 0..2 {
        let (a, b) = (next_event(&mut first).await, next_event(&mut second).await);
        assert!(Arc::ptr_eq(&a, &b), "the cache's object itself, not a copy");
        assert_eq!((a.kind, a.prev.is_none()), (EventKind::Create, true));
        state.push(a);
    }
    assert_eq!(state[0].kv, updated);
    assert_eq!(state[1].kv.key, "/s/b/2");
    let Some(WatchEvent::Progress(at)) = first.next().await else {
        panic!("the state ends with a progress report");
    };
    assert_eq!(at, updated.mod_revision);
    let later = cache
        .create("/s/b/3", Bytes::from_static(b"v"))
        .await
        .unwrap();
    let event = next_event(&mut first).await;
    assert_eq!((event.kind, &event.kv), (EventKind::Create, &later));
}

#[tokio::test]
async fn keys_outside_the_prefix_pass_through() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cacher::new(store(&dir), "/cached/", CacherConfig::default()).unwrap();
    let kv = cache
        .create("/other/x", Bytes::from_static(b"x"))
        .await
        .unwrap();
    assert_eq!(
        cache.list(list("/other/")).await.unwrap().items,
        vec![kv.clone()]
    );
    let mut watch = cache.watch("/other/", kv.mod_revision - 1).await.unwrap();
    assert_eq!(next_event(&mut watch).await.kv, kv);
    assert!(
        Cacher::new(
            store(&tempfile::tempdir().unwrap()),
            "/no-slash",
            CacherConfig::default()
        )
        .is_err()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_at_the_caches_revision_is_exactly_that_revision() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Arc::new(Cacher::new(store(&dir), "/race/", CacherConfig::default()).unwrap());
    let start = cache.current_revision().await.unwrap();
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let cache = cache.clone();
            tokio::spawn(async move {
                for i in 0..300 {
                    cache
                        .create(&format!("/race/{w}-{i:04}"), Bytes::from_static(b"x"))
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    let mut checked = 0;
    while writers.iter().any(|w| !w.is_finished()) {
        let at = cache.revision();
        if at <= start {
            tokio::task::yield_now().await;
            continue;
        }
        let listed = cache
            .list(ListRequest {
                revision: Some(at),
                ..list("/race/")
            })
            .await
            .unwrap();
        assert_eq!(listed.revision, at);
        // Every write here is a create, one revision each: the state at `at` has this many keys.
        assert_eq!(
            listed.items.len() as i64,
            at - start,
            "a list at {at} answered with another revision's state"
        );
        assert!(listed.items.iter().all(|kv| kv.mod_revision <= at));
        checked += 1;
    }
    assert!(checked > 10, "only {checked} lists raced the writers");
}

#[tokio::test]
async fn work_derived_from_an_event_is_done_once_for_all_watchers() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cacher::new(store(&dir), "/registry/leases/", CacherConfig::default()).unwrap();
    let now = cache.current_revision().await.unwrap();
    let mut watchers = Vec::new();
    for _ in 0..3 {
        watchers.push(cache.watch("/registry/leases/", now).await.unwrap());
    }
    cache
        .create("/registry/leases/default/a", Bytes::from_static(b"{}"))
        .await
        .unwrap();
    let calls = std::sync::atomic::AtomicUsize::new(0);
    let mut derived = Vec::new();
    for watch in &mut watchers {
        let event = next_event(watch).await;
        derived.push(event.memo.get_or_insert_with(1, || {
            calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            event.kv.value.len()
        }));
        // Another owner derives its own.
        assert_eq!(*event.memo.get_or_insert_with(2, || "other"), "other");
    }
    assert_eq!(calls.into_inner(), 1);
    assert!(derived.iter().all(|d| Arc::ptr_eq(d, &derived[0])));
}

#[tokio::test]
async fn a_read_of_any_revision_is_answered_from_memory() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cacher::new(store(&dir), "/registry/leases/", CacherConfig::default()).unwrap();
    let written = cache
        .create(
            "/registry/leases/default/a",
            Bytes::from_static(b"{\"a\":1}"),
        )
        .await
        .unwrap();
    // Once the cache has seen the write, get_any returns it; a key it does not cover is read
    // from the store.
    let kv = genplane_test_support::eventually_async("the cache to see the write", || async {
        cache.get_any("/registry/leases/default/a").await.unwrap()
    })
    .await;
    assert_eq!(kv, written);
    assert_eq!(
        cache.get_any("/registry/leases/default/b").await.unwrap(),
        None
    );
    assert_eq!(cache.get_any("/registry/other/x").await.unwrap(), None);
}

/// How many times [`counted_hint`] ran (one test uses it).
static HINTS_DERIVED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A value hint that counts its runs: the value's length, plus one so that it is never 0.
fn counted_hint(value: &[u8]) -> u64 {
    HINTS_DERIVED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    value.len() as u64 + 1
}

#[tokio::test]
async fn a_value_hint_is_derived_once_per_cached_value_and_handed_out_with_every_read() {
    use std::sync::atomic::Ordering::SeqCst;
    let dir = tempfile::tempdir().unwrap();
    let config = CacherConfig {
        value_hint: Some(counted_hint),
        ..CacherConfig::default()
    };
    let cache = Cacher::new(store(&dir), "/h/", config).unwrap();
    let written = cache
        .create("/h/a", Bytes::from_static(b"abc"))
        .await
        .unwrap();
    cache
        .create("/h/b", Bytes::from_static(b"abcdef"))
        .await
        .unwrap();
    assert_eq!(written.hint, 0, "a store's answer carries no hint");
    for _ in 0..3 {
        let got = cache.get("/h/a", None).await.unwrap().unwrap();
        assert_eq!((got.hint, &got), (4, &written));
        let listed = cache.list(list("/h/")).await.unwrap();
        let hints: Vec<u64> = listed.items.iter().map(|kv| kv.hint).collect();
        assert_eq!(hints, [4, 7]);
        let any = cache.get_any("/h/b").await.unwrap().unwrap();
        assert_eq!(any.hint, 7);
    }
    assert_eq!(HINTS_DERIVED.load(SeqCst), 2, "once per cached value");
    // A new value gets its own hint; the other key's stays.
    let changed = cache
        .update(
            "/h/a",
            Bytes::from_static(b"abcdefghij"),
            written.mod_revision,
        )
        .await
        .unwrap();
    let got = cache.get("/h/a", None).await.unwrap().unwrap();
    assert_eq!((got.hint, &got), (11, &changed));
    cache.get("/h/a", None).await.unwrap();
    cache.get("/h/b", None).await.unwrap();
    assert_eq!(HINTS_DERIVED.load(SeqCst), 3);
    // A watch of the current state hands out the cached entries, their hints with them.
    let mut state = cache.watch_state("/h/", StateRead::Current).await.unwrap();
    let first = next_event(&mut state).await;
    assert_eq!((first.kv.key.as_str(), first.memo.hint()), ("/h/a", 11));
    // A cache without a hint hands out 0.
    let other = tempfile::tempdir().unwrap();
    let plain = Cacher::new(store(&other), "/h/", CacherConfig::default()).unwrap();
    plain
        .create("/h/a", Bytes::from_static(b"abc"))
        .await
        .unwrap();
    assert_eq!(plain.get("/h/a", None).await.unwrap().unwrap().hint, 0);
}
