//! Behaviour of the SQLite backend beyond the shared contract.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use genplane_storage::{Bytes, DeleteRequest, EventKind, ListRequest, Storage, WatchEvent};
use genplane_storage_sqlite::{OpenError, SqliteConfig, SqliteStore};

fn config(dir: &tempfile::TempDir) -> SqliteConfig {
    let mut config = SqliteConfig::new(dir.path().join("data/genplane.db"));
    config.history = None;
    config
}

#[tokio::test]
async fn a_second_store_on_the_same_file_is_refused_until_the_first_closes() {
    let dir = tempfile::tempdir().unwrap();
    let first = SqliteStore::open(&config(&dir)).unwrap();
    match SqliteStore::open(&config(&dir)) {
        Err(OpenError::Locked { path, .. }) => {
            assert_eq!(path, dir.path().join("data/genplane.db"))
        }
        other => panic!("expected Locked, got {other:?}"),
    }
    let message = SqliteStore::open(&config(&dir)).unwrap_err().to_string();
    assert!(message.contains("in use by another process"), "{message}");
    drop(first);
    SqliteStore::open(&config(&dir)).unwrap();
}

#[tokio::test]
async fn a_watch_far_behind_catches_up_from_history_then_follows_live_writes() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(&dir);
    // A tiny ring forces the watch to read most events from the table.
    config.event_log_events = 8;
    let store = SqliteStore::open(&config).unwrap();
    let start = store.current_revision().await.unwrap();
    for i in 0..3000 {
        store
            .create(&format!("/w/{i:05}"), Bytes::from(format!("{i}")))
            .await
            .unwrap();
        store
            .create(&format!("/other/{i:05}"), Bytes::from_static(b"x"))
            .await
            .unwrap();
    }
    let mut watch = store.watch("/w/", start).await.unwrap();
    for i in 0..3000 {
        let Some(WatchEvent::Event(event)) = watch.next().await else {
            panic!("watch ended at {i}")
        };
        assert_eq!(event.kv.key, format!("/w/{i:05}"));
        assert_eq!(event.kind, EventKind::Create);
    }
    store
        .update("/w/00000", Bytes::from_static(b"live"), start + 1)
        .await
        .unwrap();
    let Some(WatchEvent::Event(event)) = watch.next().await else {
        panic!("no live event")
    };
    assert_eq!(&event.kv.value[..], b"live");
    assert_eq!(&event.prev.as_ref().unwrap().value[..], b"0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_started_during_writes_miss_nothing_and_quiet_ones_report_the_current_revision() {
    let dir = tempfile::tempdir().unwrap();
    let store = std::sync::Arc::new(SqliteStore::open(&config(&dir)).unwrap());
    let quiet = store.watch("/quiet/", 1).await.unwrap();
    let writer = {
        let store = store.clone();
        tokio::spawn(async move {
            let mut written = Vec::new();
            for i in 0..300 {
                let w = store
                    .create(&format!("/w/{i:03}"), Bytes::from_static(b"x"))
                    .await
                    .unwrap();
                written.push((w.mod_revision, w.key));
                store
                    .create(&format!("/other/{i:03}"), Bytes::from_static(b"x"))
                    .await
                    .unwrap();
            }
            written
        })
    };
    // Watches of the busy prefix, each started at the revision current then.
    let mut watches = Vec::new();
    while !writer.is_finished() && watches.len() < 40 {
        let from = store.current_revision().await.unwrap();
        watches.push((from, store.watch("/w/", from).await.unwrap()));
        tokio::task::yield_now().await;
    }
    let written = writer.await.unwrap();
    assert!(watches.len() > 5, "the watches started during the writes");
    for (from, mut watch) in watches {
        let expected: Vec<&String> = written
            .iter()
            .filter(|(revision, _)| *revision > from)
            .map(|(_, key)| key)
            .collect();
        for key in expected {
            match tokio::time::timeout(genplane_test_support::DEADLINE, watch.next()).await {
                Ok(Some(WatchEvent::Event(event))) => assert_eq!(&event.kv.key, key),
                other => panic!("watch from {from} wanted {key}, got {other:?}"),
            }
        }
    }
    // A watch that no commit woke still reports progress at the current revision.
    let current = store.current_revision().await.unwrap();
    let mut quiet = quiet;
    quiet.request_progress();
    match tokio::time::timeout(genplane_test_support::DEADLINE, quiet.next()).await {
        Ok(Some(WatchEvent::Progress(at))) => assert_eq!(at, current),
        other => panic!("wanted progress at {current}, got {other:?}"),
    }
}

#[tokio::test]
async fn dropping_the_store_ends_its_watches() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&config(&dir)).unwrap();
    let mut watch = store.watch("/w/", 1).await.unwrap();
    drop(store);
    let ended = tokio::time::timeout(genplane_test_support::DEADLINE, async {
        loop {
            match watch.next().await {
                None | Some(WatchEvent::Error(_)) => return,
                Some(_) => {}
            }
        }
    });
    ended.await.unwrap();
}

#[tokio::test]
async fn compaction_removes_superseded_rows_from_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&config(&dir)).unwrap();
    let mut kv = store
        .create("/c/a", Bytes::from(vec![1u8; 10_000]))
        .await
        .unwrap();
    for _ in 0..200 {
        kv = store
            .update("/c/a", Bytes::from(vec![2u8; 10_000]), kv.mod_revision)
            .await
            .unwrap();
    }
    store
        .create("/c/gone", Bytes::from_static(b"x"))
        .await
        .unwrap();
    store.delete("/c/gone", None).await.unwrap();
    let revision = store.current_revision().await.unwrap();
    store.compact(revision).await.unwrap();
    // Physical removal runs between writes; give it a moment, then count the rows.
    let path = store.path().to_owned();
    let rows = || count_rows(&path);
    genplane_test_support::eventually_ok_async("one row left", || async {
        match rows() {
            1 => Ok(()),
            n => Err(format!("{n} rows remain")),
        }
    })
    .await;
    let listed = store
        .list(ListRequest {
            prefix: "/c/".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.items, vec![kv]);
}

/// Counts the rows of the history table through a separate connection.
fn count_rows(path: &std::path::Path) -> i64 {
    let output = std::process::Command::new("python3")
        .args(["-c", "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from kv').fetchone()[0])"])
        .arg(path)
        .output()
        .unwrap();
    String::from_utf8(output.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn the_background_compactor_keeps_the_history_window() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(&dir);
    let history = Duration::from_secs(2);
    config.history = Some(history);
    let store = SqliteStore::open(&config).unwrap();
    let first = store
        .create("/h/a", Bytes::from_static(b"1"))
        .await
        .unwrap();
    store
        .update("/h/a", Bytes::from_static(b"2"), first.mod_revision)
        .await
        .unwrap();
    // Within the window the old revision is readable; some time after it, it is compacted.
    assert!(store.get("/h/a", Some(first.mod_revision)).await.is_ok());
    let deadline = std::time::Instant::now() + history * 10;
    // Writes move time and the revision on; the compactor runs between write batches.
    for tick in 0.. {
        store
            .create(&format!("/h/tick-{tick}"), Bytes::new())
            .await
            .unwrap();
        match store.get("/h/a", Some(first.mod_revision)).await {
            Err(genplane_storage::Error::Compacted { .. }) => break,
            Ok(_) => assert!(
                std::time::Instant::now() < deadline,
                "history was never compacted"
            ),
            Err(other) => panic!("{other}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_watch_from_before_the_compacted_revision_fails_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&config(&dir)).unwrap();
    let start = store.current_revision().await.unwrap();
    let kv = store
        .create("/w/a", Bytes::from_static(b"1"))
        .await
        .unwrap();
    store
        .update("/w/a", Bytes::from_static(b"2"), kv.mod_revision)
        .await
        .unwrap();
    let compacted = store.current_revision().await.unwrap();
    store.compact(compacted).await.unwrap();
    match store.watch("/w/", start).await {
        Err(genplane_storage::Error::Compacted {
            requested,
            compacted: at,
        }) => assert_eq!((requested, at), (start, compacted)),
        other => panic!("expected Compacted, got {other:?}"),
    }
}

#[tokio::test]
async fn a_list_at_a_compacted_revision_fails() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&config(&dir)).unwrap();
    let kv = store
        .create("/l/a", Bytes::from_static(b"1"))
        .await
        .unwrap();
    store
        .update("/l/a", Bytes::from_static(b"2"), kv.mod_revision)
        .await
        .unwrap();
    store
        .compact(store.current_revision().await.unwrap())
        .await
        .unwrap();
    let request = ListRequest {
        prefix: "/l/".into(),
        revision: Some(kv.mod_revision),
        ..Default::default()
    };
    assert!(matches!(
        store.list(request).await,
        Err(genplane_storage::Error::Compacted { .. })
    ));
}

#[tokio::test]
async fn a_batch_that_fails_in_sqlite_leaves_nothing_and_the_next_batch_commits() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(&dir);
    let store = SqliteStore::open(&config).unwrap();
    store
        .create("/f/before", Bytes::from_static(b"v"))
        .await
        .unwrap();
    let before = store.current_revision().await.unwrap();
    // Another connection makes SQLite refuse one key, as a full disk or a broken file would
    // refuse a write: the writer's transaction fails midway.
    let other = rusqlite::Connection::open(&config.path).unwrap();
    // ABORT undoes the statement and leaves the transaction to the writer; ROLLBACK undoes
    // the transaction in SQLite itself.
    other
        .execute_batch(
            "CREATE TRIGGER refuse BEFORE INSERT ON kv WHEN NEW.key = CAST('/f/refused' AS BLOB)
             BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;
             CREATE TRIGGER undo BEFORE INSERT ON kv WHEN NEW.key = CAST('/f/undone' AS BLOB)
             BEGIN SELECT RAISE(ROLLBACK, 'rolled back by the test'); END;",
        )
        .unwrap();
    for key in ["/f/refused", "/f/undone", "/f/refused", "/f/undone"] {
        let refused = store.create(key, Bytes::from_static(b"v")).await;
        assert!(refused.is_err(), "{key}: {refused:?}");
        assert_eq!(store.current_revision().await.unwrap(), before);
        assert_eq!(store.get(key, None).await.unwrap(), None);
    }
    // The failed transaction was rolled back: the writer goes on committing.
    let written = store
        .create("/f/after", Bytes::from_static(b"w"))
        .await
        .unwrap();
    assert_eq!(written.mod_revision, before + 1);
    let listed = store.list(ListRequest {
        prefix: "/f/".into(),
        ..Default::default()
    });
    let keys: Vec<String> = listed
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|kv| kv.key)
        .collect();
    assert_eq!(keys, ["/f/after", "/f/before"]);
    drop(other);
    drop(store);
    // And what it committed is there after a restart.
    let reopened = SqliteStore::open(&config).unwrap();
    assert_eq!(reopened.current_revision().await.unwrap(), before + 1);
}

/// The store's counters: (transactions committed, writes they carried).
fn counters(store: &SqliteStore) -> (u64, u64) {
    (store.commits(), store.writes())
}

#[tokio::test]
async fn writes_count_what_was_committed_and_a_batch_that_fails_counts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(&dir);
    let store = SqliteStore::open(&config).unwrap();
    assert_eq!(counters(&store), (0, 0));
    let value = || Bytes::from_static(b"v");
    // Each write awaited before the next: a commit each.
    let a = store.create("/c/a", value()).await.unwrap();
    for key in ["/c/b", "/c/c"] {
        store.create(key, value()).await.unwrap();
    }
    store.update("/c/a", value(), a.mod_revision).await.unwrap();
    store.delete("/c/c", None).await.unwrap();
    assert_eq!(counters(&store), (5, 5));

    // Writes refused by their precondition and a compaction's mark write nothing.
    assert!(store.create("/c/b", value()).await.is_err());
    assert!(store.update("/c/b", value(), a.mod_revision).await.is_err());
    assert!(store.delete("/c/missing", None).await.is_err());
    store
        .compact(store.current_revision().await.unwrap())
        .await
        .unwrap();
    assert_eq!(store.writes(), 5);

    // A batch of deletes is one commit, and counts the keys it deleted.
    let commits = store.commits();
    let delete = |key: &str| DeleteRequest {
        key: key.to_owned(),
        expected: None,
    };
    let answers = store
        .delete_batch(vec![delete("/c/a"), delete("/c/missing"), delete("/c/b")])
        .await;
    let deleted: Vec<bool> = answers.iter().map(Result::is_ok).collect();
    assert_eq!(deleted, [true, false, true]);
    assert_eq!(counters(&store), (commits + 1, 7));

    // A batch SQLite refuses midway (see
    // `a_batch_that_fails_in_sqlite_leaves_nothing_and_the_next_batch_commits`) counts nothing,
    // not even the deletes applied before the refused one.
    for key in ["/c/d", "/c/refused", "/c/e"] {
        store.create(key, value()).await.unwrap();
    }
    let before = counters(&store);
    let other = rusqlite::Connection::open(&config.path).unwrap();
    other
        .execute_batch(
            "CREATE TRIGGER refuse BEFORE INSERT ON kv
             WHEN NEW.key = CAST('/c/refused' AS BLOB) AND NEW.deleted = 1
             BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;",
        )
        .unwrap();
    let answers = store
        .delete_batch(vec![delete("/c/d"), delete("/c/refused"), delete("/c/e")])
        .await;
    assert!(answers.iter().all(Result::is_err), "{answers:?}");
    assert_eq!(counters(&store), before);
    for key in ["/c/d", "/c/e"] {
        assert!(store.get(key, None).await.unwrap().is_some(), "{key}");
    }
    // The next batch counts as usual.
    let answers = store
        .delete_batch(vec![delete("/c/d"), delete("/c/e")])
        .await;
    assert!(answers.iter().all(Result::is_ok), "{answers:?}");
    assert_eq!(counters(&store), (before.0 + 1, before.1 + 2));
}
