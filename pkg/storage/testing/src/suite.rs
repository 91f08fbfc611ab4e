//! The contract points, one function each. [`crate::conformance_suite!`] runs them all.

use std::sync::Arc;
use std::time::Duration;

use genplane_storage::{
    Bytes, DeleteRequest, Deleted, Error, Event, EventKind, KeyValue, ListRequest, Revision,
    StateRead, Storage, Watch, WatchEvent, continue_token,
};

use crate::{Backend, put, revision, text};

/// How long a test waits for something that should happen promptly.
const WAIT: Duration = Duration::from_secs(15);

fn list_of(prefix: &str) -> ListRequest {
    ListRequest {
        prefix: prefix.to_owned(),
        ..ListRequest::default()
    }
}

async fn list_all<S: Storage>(
    store: &S,
    prefix: &str,
    revision: Option<Revision>,
) -> Vec<KeyValue> {
    let request = ListRequest {
        revision,
        ..list_of(prefix)
    };
    store.list(request).await.unwrap().items
}

/// The next change on `watch`, skipping progress reports; panics on errors and timeouts.
async fn next_event(watch: &mut Watch) -> Arc<Event> {
    loop {
        match tokio::time::timeout(WAIT, watch.next()).await {
            Err(_) => panic!("no event within {WAIT:?}"),
            Ok(None) => panic!("the watch ended"),
            Ok(Some(WatchEvent::Progress(_))) => continue,
            Ok(Some(WatchEvent::Error(e))) => panic!("the watch failed: {e}"),
            Ok(Some(WatchEvent::Event(event))) => return event,
        }
    }
}

/// Asserts that `watch` delivers no change for a while.
async fn assert_quiet(watch: &mut Watch) {
    let deadline = tokio::time::Instant::now() + Duration::from_millis(300);
    loop {
        match tokio::time::timeout_at(deadline, watch.next()).await {
            Err(_) => return,
            Ok(Some(WatchEvent::Progress(_))) => continue,
            Ok(other) => panic!("expected no event, got {other:?}"),
        }
    }
}

fn bytes(value: &str) -> Bytes {
    Bytes::copy_from_slice(value.as_bytes())
}

/// A created key reads back with its value; its revisions are the write's revision.
pub async fn create_then_get<B: Backend>(backend: &mut B) {
    let store = backend.open().await;
    let before = revision(&store).await;
    assert!(
        before >= 1,
        "a store starts at revision 1 or later, not {before}"
    );
    let kv = put(&store, "/t/a", "one").await;
    assert_eq!(kv.key, "/t/a");
    assert_eq!(text(&kv), "one");
    assert_eq!(kv.mod_revision, before + 1);
    assert_eq!(kv.create_revision, kv.mod_revision);
    assert_eq!(store.get("/t/a", None).await.unwrap(), Some(kv.clone()));
    assert_eq!(store.get("/t/missing", None).await.unwrap(), None);
    assert_eq!(revision(&store).await, kv.mod_revision);
}

/// Creating an existing key fails and changes nothing.
pub async fn create_fails_when_the_key_exists<B: Backend>(backend: &mut B) {
    let store = backend.open().await;
    let kv = put(&store, "/t/a", "one").await;
    let err = store.create("/t/a", bytes("two")).await.unwrap_err();
    assert!(
        matches!(&err, Error::AlreadyExists { key } if key == "/t/a"),
        "{err:?}"
    );
    assert_eq!(store.get("/t/a", None).await.unwrap(), Some(kv.clone()));
    assert_eq!(revision(&store).await, kv.mod_revision);
}

/// Every successful write moves the revision by exactly one; failed writes do not move it.
pub async fn revisions_increase_by_one_per_successful_write<B: Backend>(backend: &mut B) {
    let store = backend.open().await;
    let r0 = revision(&store).await;
    let a = put(&store, "/t/a", "1").await;
    assert_eq!(a.mod_revision, r0 + 1);
    let a2 = store
        .update("/t/a", bytes("2"), a.mod_revision)
        .await
        .unwrap();
    assert_eq!(a2.mod_revision, r0 + 2);
    assert!(
        store
            .update("/t/a", bytes("3"), a.mod_revision)
            .await
            .is_err()
    );
    assert!(store.create("/t/a", bytes("4")).await.is_err());
    assert_eq!(revision(&store).await, r0 + 2);
    let deleted = store.delete("/t/a", None).await.unwrap();
    assert_eq!(deleted.revision, r0 + 3);
    assert!(matches!(
        store.delete("/t/a", None).await,
        Err(Error::NotFound { .. })
    ));
    assert_eq!(revision(&store).await, r0 + 3);
}

/// Update succeeds only at the expected revision and keeps the create revision.
pub async fn update_compares_and_swaps<B: Backend>(backend: &mut B) {
    let store = backend.open().await;
    let v1 = put(&store, "/t/a", "1").await;
    let v2 = store
        .update("/t/a", bytes("2"), v1.mod_revision)
        .await
        .unwrap();
    assert_eq!(text(&v2), "2");
    assert_eq!(v2.mod_revision, v1.mod_revision + 1);
    assert_eq!(v2.create_revision, v1.create_revision);
    match store.update("/t/a", bytes("3"), v1.mod_revision).await {
        Err(Error::Conflict {
            key,
            expected,
            current,
        }) => {
            assert_eq!(key, "/t/a");
            assert_eq!(expected, v1.mod_revision);
            assert_eq!(*current, v2, "a conflict carries the current value");
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert!(matches!(
        store.update("/t/missing", bytes("x"), v1.mod_revision).await,
        Err(Error::NotFound { key }) if key == "/t/missing"
    ));
    assert_eq!(store.get("/t/a", None).await.unwrap(), Some(v2));
}

/// Delete honours its precondition and returns the deleted value.
pub async fn delete_compares_and_swaps<B: Backend>(backend: &mut B) {
    let store = backend.open().await;
    let v1 = put(&store, "/t/a", "1").await;
    let v2 = store
        .update("/t/a", bytes("2"), v1.mod_revision)
        .await
        .unwrap();
    match store.delete("/t/a", Some(v1.mod_revision)).await {
        Err(Error::Conflict { current, .. }) => assert_eq!(*current, v2),
        other => panic!("expected a conflict, got {other:?}"),
    }
    let deleted = store.delete("/t/a", Some(v2.mod_revision)).await.unwrap();
    assert_eq!(
        deleted,
        Deleted {
            revision: v2.mod_revision + 1,
            prev: v2.clone()
        }
    );
    assert_eq!(store.get("/t/a", None).await.unwrap(), None);
    assert!(matches!(
        store.delete("/t/a", None).await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        store.delete("/t/a", Some(v2.mod_revision)).await,
        Err(Error::NotFound { .. })
    ));
    let b = put(&store, "/t/b", "b").await;
    assert_eq!(store.delete("/t/b", None).await.unwrap().prev, b);
}

/// A batch of deletes answers each delete as a single delete would (deleted, conflict, not
/// found, invalid key), gives every deleted key a revision of its own, and a watch sees one
/// delete event per key, with its previous value, at that revision.
pub async fn delete_batch_deletes_each_key_with_its_own_revision<B: Backend>(backend: &mut B) {
    let store = backend.open().await;
    let mut created = Vec::new();
    for i in 0..120 {
        created.push(put(&store, &format!("/t/k{i:03}"), &format!("v{i}")).await);
    }
    let kept = store
        .update("/t/k001", bytes("changed"), created[1].mod_revision)
        .await
        .unwrap();
    let before = revision(&store).await;
    let mut watch = store.watch("/t/", before).await.unwrap();
    let mut deletes: Vec<DeleteRequest> = created
        .iter()
        .enumerate()
        .map(|(i, kv)| DeleteRequest {
            key: kv.key.clone(),
            // Half unconditional, half with the revision each key was created at.
            expected: (i % 2 == 1).then_some(kv.mod_revision),
        })
        .collect();
    deletes.push(DeleteRequest {
        key: "/t/missing".into(),
        expected: None,
    });
    deletes.push(DeleteRequest {
        key: "no-slash".into(),
        expected: None,
    });
    let answers = store.delete_batch(deletes).await;
    assert_eq!(answers.len(), 122);
    let mut deleted = Vec::new();
    for (i, answer) in answers.iter().take(120).enumerate() {
        if i == 1 {
            match answer {
                Err(Error::Conflict { current, .. }) => assert_eq!(**current, kept),
                other => panic!("the stale delete: expected a conflict, got {other:?}"),
            }
            continue;
        }
        let answer = answer
            .as_ref()
            .unwrap_or_else(|e| panic!("delete {i}: {e}"));
        assert_eq!(
            answer.prev, created[i],
            "delete {i} returns the deleted value"
        );
        deleted.push(answer.clone());
    }
    assert!(matches!(answers[120], Err(Error::NotFound { .. })));
    assert!(matches!(answers[121], Err(Error::InvalidKey { .. })));
    let mut revisions: Vec<Revision> = deleted.iter().map(|d| d.revision).collect();
    revisions.sort_unstable();
    revisions.dedup();
    assert_eq!(
        revisions.len(),
        119,
        "every delete has a revision of its own"
    );
    assert_eq!(revisions.first(), Some(&(before + 1)));
    assert_eq!(revision(&store).await, before + 119);
    assert_eq!(list_all(&store, "/t/", None).await, vec![kept]);
    let mut seen = Vec::new();
    for _ in 0..119 {
        let event = next_event(&mut watch).await;
        assert_eq!(event.kind, EventKind::Delete);
        seen.push(Deleted {
            revision: event.revision(),
            prev: event
                .prev
                .clone()
                .expect("a delete event has the previous value"),
        });
    }
    assert!(
        seen.windows(2).all(|w| w[0].revision < w[1].revision),
        "events in revision order, one revision each"
    );
    deleted.sort_by_key(|d| d.revision);
    assert_eq!(seen, deleted, "one event per deleted key, as answered");
    assert_quiet(&mut watch).await;
}

/// A key created again after a delete has a new create revision.
pub async fn recreating_a_deleted_key_starts_a_new_life<B: Backend>(backend: &mut B) {
    let store = backend.open().await;
    let first = put(&store, "/t/a", "1").await;
    store.delete("/t/a", None).await.unwrap();
    let second = put(&store, "/t/a", "2").await;
    assert_eq!(second.create_revision, second.mod_revision);
    assert_eq!(second.create_revision, first.create_revision + 2);
}

/// Gets at older revisions see the value as it was then.
pub async fn get_reads_at_older_revisions<B: Backend>(backend: &mut B) {
    let store = backend.open().await;
    let v1 = put(&store, "/t/a", "1").await;
    let v2 = store
        .update("/t/a", bytes("2"), v1.mod_revision)
        .await
        .unwrap();
    let gone = store.delete("/t/a", None).await.unwrap().revision;
    assert_eq!(
        store.get("/t/a", Some(v1.mod_revision - 1)).await.unwrap(),
        None,
        "before it existed"
    );
    assert_eq!(
        store.get("/t/a", Some(v1.mod_revision)).await.unwrap(),
        Some(v1)
    );
    assert_eq!(
        store.get("/t/a", Some(v2.mod_revision)).await.unwrap(),
        Some(v2)
    );
    assert_eq!(store.get("/t/a", Some(gone)).await.unwrap(), None);
}

/// Reads at revisions the store has not reached fail.
pub async fn reads_at_future_revisions_fail<B: Backend>(backend: &mut B) {
    let store = backend.open().await;
    put(&store, "/t/a", "1").await;
    let now = revision(&store).await;
    let err = store.get("/t/a", Some(now + 100)).await.unwrap_err();
    assert!(
        matches!(err, Error::FutureRevision { requested, .. } if requested == now + 100),
        "{err:?}"
    );
    let list = ListRequest {
        revision: Some(now + 100),
        ..list_of("/t/")
    };
    assert!(matches!(
        store.list(list).await,
        Err(Error::FutureRevision { .. })
    ));
}

/// A list returns exactly the keys under the prefix, in key order, at the current revision.
pub async fn list_returns_the_prefix_in_key_order<B: Backend>(backend: &mut B) {
    let store = backend.open().await;
    let b = put(&store, "/t/b", "b").await;
    let a = put(&store, "/t/a", "a").await;
    let c = put(&store, "/t/c/nested", "c").await;
    put(
        &store,
        "/ta/x",
        "outside: shares the prefix without the slash",
    )
    .await;
    put(&store, "/s/x", "outside").await;
    let now = revision(&store).await;
    let response = store.list(list_of("/t/")).await.unwrap();
    assert_eq!(response.items, vec![a, b, c]);
    assert_eq!(response.revision, now);
    assert!(!response.more);
    assert!(
        store
            .list(list_of("/none/"))
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

/// A list at an older revision sees the keys as they were then.
pub async fn list_reads_a_snapshot_at_a_revision<B: Backend>(backend: &mut B) {
    let store = backend.open().await;
    let a1 = put(&store, "/t/a", "a1").await;
    let b1 = put(&store, "/t/b", "b1").await;
    let then = revision(&store).await;
    let a2 = store
        .update("/t/a", bytes("a2"), a1.mod_revision)
        .await
        .unwrap();
    store.delete("/t/b", None).await.unwrap();
    let c = put(&store, "/t/c", "c").await;
    assert_eq!(list_all(&store, "/t/", Some(then)).await, vec![a1, b1]);
    assert_eq!(list_all(&store, "/t/", None).await, vec![a2, c]);
    let response = store
        .list(ListRequest {
            revision: Some(then),
            ..list_of("/t/")
        })
        .await
        .unwrap();
    assert_eq!(response.revision, then);
}

/// Limits, the `more` flag, start keys and counts.
pub async fn list_limit_more_and_count<B: Backend>(backend: &mut B) {
    let store = backend.open().await;
    let mut kvs = Vec::new();
    for name in ["a", "b", "c", "d", "e"] {
        kvs.push(put(&store, &format!("/t/{name}"), name).await);
    }
    let first = store
        .list(ListRequest {
            limit: Some(2),
            count: true,
            ..list_of("/t/")
        })
        .await
        .unwrap();
    assert_eq!(first.items, kvs[..2]);
    assert!(first.more);
    assert_eq!(first.count, Some(5));
    let rest = ListRequest {
        start: Some("/t/c".into()),
        limit: Some(10),
        count: true,
        ..list_of("/t/")
    };
    let rest = store.list(rest).await.unwrap();
    assert_eq!(rest.items, kvs[2..]);
    assert!(!rest.more);
    assert_eq!(rest.count, Some(3));
    let exact = store
        .list(ListRequest {
            limit: Some(5),
            ..list_of("/t/")
        })
        .await
        .unwrap();
    assert_eq!(exact.items.len(), 5);
    assert!(!exact.more, "nothing follows the fifth key");
    let unlimited = store
        .list(ListRequest {
            limit: Some(0),
            ..list_of("/t/")
        })
        .await
        .unwrap();
    assert_eq!(unlimited.items, kvs, "limit 0 means no limit");
}

/// Pages read with continue tokens see the snapshot of the first page, whatever is written
/// between the pages.
pub async fn pagination_is_stable_across_concurrent_writes<B: Backend>(backend: &mut B) {
    let store = backend.open().await;
    let mut expected = Vec::new();
    for i in 0..60 {
        expected.push(put(&store, &format!("/t/k{i:02}"), &format!("v{i}")).await);
    }
    let first = store
        .list(ListRequest {
            limit: Some(7),
            ..list_of("/t/")
        })
        .await
        .unwrap();
    let snapshot = first.revision;
    let mut seen = first.items.clone();
    let mut token = first
        .more
        .then(|| continue_token::encode_after(&seen.last().unwrap().key, "/t/", snapshot));
    let mut pages = 1;
    let mut churn = expected.iter();
    while let Some(t) = token {
        // Between every two pages: an update, a delete and a create in the listed range.
        for (kind, kv) in (0..3).zip(churn.by_ref()) {
            match kind {
                0 => drop(
                    store
                        .update(&kv.key, bytes("changed"), kv.mod_revision)
                        .await
                        .unwrap(),
                ),
                1 => drop(store.delete(&kv.key, None).await.unwrap()),
                _ => drop(put(&store, &format!("{}-new", kv.key), "new").await),
            }
        }
        assert!(
            revision(&store).await > snapshot,
            "the store moved past the snapshot"
        );
        let position = continue_token::decode(&t, "/t/").unwrap();
        assert_eq!(position.revision, Some(snapshot));
        let request = ListRequest {
            start: Some(position.start),
            revision: position.revision,
            limit: Some(7),
            ..list_of("/t/")
        };
        let page = store.list(request).await.unwrap();
        assert_eq!(page.revision, snapshot);
        seen.extend(page.items.iter().cloned());
        token = page.more.then(|| {
            continue_token::encode_after(&page.items.last().unwrap().key, "/t/", snapshot)
        });
        pages += 1;
    }
    assert_eq!(pages, 9, "60 keys in pages of 7");
    assert_eq!(seen, expected, "every page reads the first page's snapshot");
    assert_eq!(
        list_all(&store, "/t/", None).await.len(),
        60,
        "8 rounds of one update, one delete, one create"
    );
}

/// A continue token whose revision has been compacted fails as Compacted, whichever layer
/// answers (a cache that has moved on must not answer from what it once held); the token
/// upstream answers with then goes on from the same key at the current revision, and sees
/// what was written since the first page.
pub async fn continue_tokens_expire_with_compaction<B: Backend>(backend: &mut B) {
    let store = backend.open().await;
    for name in ["a", "b", "c"] {
        put(&store, &format!("/t/{name}"), name).await;
    }
    let first = store
        .list(ListRequest {
            limit: Some(1),
            ..list_of("/t/")
        })
        .await
        .unwrap();
    let token = continue_token::encode_after(&first.items[0].key, "/t/", first.revision);
    let position = continue_token::decode(&token, "/t/").unwrap();
    let next_page = ListRequest {
        start: Some(position.start.clone()),
        revision: position.revision,
        limit: Some(1),
        ..list_of("/t/")
    };
    let page = store.list(next_page.clone()).await.unwrap();
    assert_eq!((page.items[0].key.as_str(), page.more), ("/t/b", true));
    put(&store, "/t/d", "d").await;
    let latest = put(&store, "/t/e", "e").await.mod_revision;
    serves_revision(&store, "/t/", latest).await;
    store.compact(latest).await.unwrap();
    match store.list(next_page).await {
        Err(Error::Compacted { requested, .. }) => assert_eq!(requested, first.revision),
        other => panic!("expected Compacted, got {other:?}"),
    }

    // The token of the 410: the rest of the list at the current revision, in pages.
    let mut token = continue_token::encode_latest(&position.start, "/t/");
    let mut rest = Vec::new();
    let mut revisions = Vec::new();
    loop {
        let position = continue_token::decode(&token, "/t/").unwrap();
        let page = store
            .list(ListRequest {
                start: Some(position.start),
                revision: position.revision,
                limit: Some(1),
                ..list_of("/t/")
            })
            .await
            .unwrap();
        rest.extend(page.items.iter().map(|kv| kv.key.clone()));
        revisions.push(page.revision);
        if !page.more {
            break;
        }
        token = continue_token::encode_after(&page.items[0].key, "/t/", page.revision);
    }
    assert_eq!(rest, ["/t/b", "/t/c", "/t/d", "/t/e"]);
    assert_eq!(
        revisions, [latest; 4],
        "the rest is one snapshot at the current revision"
    );
}

/// Waits until `store` answers reads of `prefix` from wherever it keeps them (a cache: its
/// memory) at `revision` or later, so that no layer still holds an older state.
async fn serves_revision<S: Storage>(store: &S, prefix: &str, revision: Revision) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let served = store.list_any(list_of(prefix)).await.unwrap().revision;
        if served >= revision {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the store still serves revision {served}, not {revision}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// After compaction the current state and reads at the compacted revision remain.
pub async fn compaction_keeps_the_current_state<B: Backend>(backend: &mut B) {
    let store = backend.open().await;
    let a1 = put(&store, "/t/a", "1").await;
    let a2 = store
        .update("/t/a", bytes("2"), a1.mod_revision)
        .await
        .unwrap();
    let b = put(&store, "/t/b", "b").await;
    put(&store, "/t/c", "c").await;
    store.delete("/t/c", None).await.unwrap();
    let compacted = revision(&store).await;
    store.compact(compacted).await.unwrap();
    assert_eq!(
        list_all(&store, "/t/", None).await,
        vec![a2.clone(), b.clone()]
    );
    assert_eq!(
        list_all(&store, "/t/", Some(compacted)).await,
        vec![a2.clone(), b]
    );
    assert_eq!(
        store.get("/t/a", Some(compacted)).await.unwrap(),
        Some(a2.clone())
    );
    let err = store.get("/t/a", Some(a1.mod_revision)).await.unwrap_err();
    assert!(matches!(err, Error::Compacted { .. }), "{err:?}");
    store
        .compact(compacted)
        .await
        .expect("compacting to a compacted revision again is a no-op");
    store
        .compact(a1.mod_revision)
        .await
        .expect("compacting to an older revision is a no-op");
    let future = store.compact(compacted + 100).await.unwrap_err();
    assert!(matches!(future, Error::FutureRevision { .. }), "{future:?}");
    let a3 = store
        .update("/t/a", bytes("3"), a2.mod_revision)
        .await
        .unwrap();
    assert_eq!(
        a3.mod_revision,
        compacted + 1,
        "writes go on after compaction"
    );
}

/// A watch from a past revision replays exactly the events after it, in order, then goes on.
pub async fn watch_replays_missed_events_in_order<B: Backend>(backend: &mut B) {
    let store = backend.open().await;
    let start = revision(&store).await;
    let a1 = put(&store, "/t/a", "1").await;
    let a2 = store
        .update("/t/a", bytes("2"), a1.mod_revision)
        .await
        .unwrap();
    let b = put(&store, "/t/b", "b").await;
    let gone = store.delete("/t/a", None).await.unwrap();
    let mut watch = store.watch("/t/", start).await.unwrap();
    let events = [
        next_event(&mut watch).await,
        next_event(&mut watch).await,
        next_event(&mut watch).await,
        next_event(&mut watch).await,
    ];
    let kinds: Vec<EventKind> = events.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [
            EventKind::Create,
            EventKind::Update,
            EventKind::Create,
            EventKind::Delete
        ]
    );
    let revisions: Vec<Revision> = events.iter().map(|e| e.revision()).collect();
    assert_eq!(revisions, [start + 1, start + 2, start + 3, start + 4]);
    assert_eq!(events[0].kv, a1);
    assert_eq!(events[0].prev, None);
    assert_eq!(events[1].kv, a2);
    assert_eq!(events[1].prev.as_ref(), Some(&a1));
    assert_eq!(events[2].kv, b);
    assert_eq!(events[3].kv.key, "/t/a");
    assert!(events[3].kv.value.is_empty());
    assert_eq!(events[3].kv.mod_revision, gone.revision);
    assert_eq!(
        events[3].prev.as_ref(),
        Some(&a2),
        "a delete carries the deleted value"
    );
    let c = put(&store, "/t/c", "c").await;
    assert_eq!(
        next_event(&mut watch).await.kv,
        c,
        "after the replay, live events follow"
    );

    let mut later = store.watch("/t/", start + 2).await.unwrap();
    assert_eq!(
        next_event(&mut later).await.kv,
        b,
        "a later start skips the earlier events"
    );
    assert_eq!(next_event(&mut later).await.kind, EventKind::Delete);
}

/// Live events arrive with their previous values.
pub async fn watch_delivers_live_events_with_previous_values<B: Backend>(backend: &mut B) {
    let store = backend.open().await;
    let mut watch = store.watch("/t/", revision(&store).await).await.unwrap();
    let v1 = put(&store, "/t/a", "1").await;
    let created = next_event(&mut watch).await;
    assert_eq!(
        (created.kind, &created.kv, &created.prev),
        (EventKind::Create, &v1, &None)
    );
    let v2 = store
        .update("/t/a", bytes("2"), v1.mod_revision)
        .await
        .unwrap();
    let updated = next_event(&mut watch).await;
    assert_eq!(
        (updated.kind, &updated.kv, updated.prev.as_ref()),
        (EventKind::Update, &v2, Some(&v1))
    );
    store.delete("/t/a", None).await.unwrap();
    let deleted = next_event(&mut watch).await;
    assert_eq!(
        (deleted.kind, deleted.prev.as_ref()),
        (EventKind::Delete, Some(&v2))
    );
    assert_quiet(&mut watch).await;
}

/// A watch sees only keys under its prefix.
pub async fn watch_only_sees_its_prefix<B: Backend>(backend: &mut B) {
    let store = backend.open().await;
    let mut watch = store.watch("/t/a/", revision(&store).await).await.unwrap();
    put(
        &store,
        "/t/ab",
        "outside: shares the prefix without the slash",
    )
    .await;
    put(&store, "/u/a/x", "outside").await;
    let inside = put(&store, "/t/a/x", "inside").await;
    assert_eq!(next_event(&mut watch).await.kv, inside);
    assert_quiet(&mut watch).await;
}

/// A watch that needs events the store no longer has fails as Compacted, at once or as its
/// first message; a cache answers as its store does, although it may still hold the events,
/// so that every cache over one store gives the same answer. The store knows of its own
/// compaction ([`Storage::compacted_revision`]).
pub async fn watch_from_a_compacted_revision_fails<B: Backend>(backend: &mut B) {
    let store = backend.open().await;
    let start = revision(&store).await;
    let mut kv = put(&store, "/t/a", "0").await;
    let mut written = vec![kv.clone()];
    for i in 1..4 {
        kv = store
            .update("/t/a", bytes(&i.to_string()), kv.mod_revision)
            .await
            .unwrap();
        written.push(kv.clone());
    }
    store.compact(kv.mod_revision).await.unwrap();
    assert!(
        store.compacted_revision() >= kv.mod_revision,
        "the store knows of its own compaction"
    );
    match store.watch("/t/", start).await {
        Err(Error::Compacted { .. }) => {}
        Err(other) => panic!("expected Compacted, got {other:?}"),
        Ok(mut watch) => match tokio::time::timeout(WAIT, watch.next()).await {
            Ok(Some(WatchEvent::Error(Error::Compacted { .. }))) => {}
            other => panic!(
                "expected a Compacted error, not a replay of compacted history ({} writes): {other:?}",
                written.len()
            ),
        },
    }
    let mut fresh = store.watch("/t/", kv.mod_revision).await.unwrap();
    let next = store
        .update("/t/a", bytes("4"), kv.mod_revision)
        .await
        .unwrap();
    assert_eq!(
        next_event(&mut fresh).await.kv,
        next,
        "a watch from the compacted revision works"
    );
}

/// Asked for progress, a quiet watch reports a revision covering writes elsewhere.
pub async fn watch_reports_progress<B: Backend>(backend: &mut B) {
    let store = backend.open().await;
    let mut watch = store.watch("/t/a/", revision(&store).await).await.unwrap();
    let elsewhere = put(&store, "/t/b/x", "elsewhere").await.mod_revision;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        watch.request_progress();
        let step = tokio::time::Instant::now() + Duration::from_millis(500);
        match tokio::time::timeout_at(step.min(deadline), watch.next()).await {
            Ok(Some(WatchEvent::Progress(p))) if p >= elsewhere => break,
            Ok(Some(WatchEvent::Progress(_))) | Err(_) => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "no progress to {elsewhere} within {WAIT:?}"
                );
            }
            Ok(other) => panic!("expected progress, got {other:?}"),
        }
    }
}

/// A watch with the state delivers the keys under the prefix as creates, in key order and
/// without previous values, then progress at their revision, then the changes after it.
pub async fn watch_state_starts_with_the_state<B: Backend>(backend: &mut B) {
    let store = backend.open().await;
    let a = put(&store, "/t/s/a", "1").await;
    let b = put(&store, "/t/s/b", "1").await;
    put(&store, "/t/other", "1").await;
    let a2 = store
        .update("/t/s/a", bytes("2"), a.mod_revision)
        .await
        .unwrap();
    let mut watch = store
        .watch_state("/t/s/", StateRead::Current)
        .await
        .unwrap();
    let first = next_event(&mut watch).await;
    let second = next_event(&mut watch).await;
    assert_eq!(
        (first.kind, &first.kv, &first.prev),
        (EventKind::Create, &a2, &None)
    );
    assert_eq!((second.kind, &second.kv), (EventKind::Create, &b));
    let progress = tokio::time::timeout(WAIT, watch.next()).await.unwrap();
    let Some(WatchEvent::Progress(at)) = progress else {
        panic!("expected progress after the state, got {progress:?}");
    };
    assert!(at >= a2.mod_revision, "the state is at revision {at}");
    let c = put(&store, "/t/s/c", "1").await;
    assert_eq!(
        next_event(&mut watch).await.kv,
        c,
        "changes follow the state"
    );
    // Any state at hand (a cache's, maybe older): creates in key order, then progress.
    let mut any = store.watch_state("/t/s/", StateRead::Any).await.unwrap();
    let mut keys = Vec::new();
    loop {
        match tokio::time::timeout(WAIT, any.next()).await.unwrap() {
            Some(WatchEvent::Event(event)) => {
                assert_eq!((event.kind, &event.prev), (EventKind::Create, &None));
                keys.push(event.kv.key.clone());
            }
            Some(WatchEvent::Progress(_)) => break,
            other => panic!("expected the state, got {other:?}"),
        }
    }
    assert!(keys.is_sorted() && keys.len() <= 3, "{keys:?}");
}

/// Many tasks incrementing one counter by compare-and-swap lose no increment.
pub async fn concurrent_compare_and_swap_increments_are_exact<B: Backend>(backend: &mut B) {
    const TASKS: usize = 16;
    const INCREMENTS: usize = 25;
    let store = Arc::new(backend.open().await);
    let start = put(&*store, "/t/counter", "0").await;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..TASKS {
        let store = store.clone();
        tasks.spawn(async move {
            let mut conflicts = 0;
            for _ in 0..INCREMENTS {
                let mut current = store.get("/t/counter", None).await.unwrap().unwrap();
                loop {
                    let n: usize = text(&current).parse().unwrap();
                    match store
                        .update(
                            "/t/counter",
                            bytes(&(n + 1).to_string()),
                            current.mod_revision,
                        )
                        .await
                    {
                        Ok(_) => break,
                        Err(Error::Conflict {
                            current: latest, ..
                        }) => {
                            conflicts += 1;
                            current = *latest;
                        }
                        Err(e) => panic!("update failed: {e}"),
                    }
                }
            }
            conflicts
        });
    }
    let conflicts: usize = tasks.join_all().await.into_iter().sum();
    let end = store.get("/t/counter", None).await.unwrap().unwrap();
    assert_eq!(
        text(&end),
        (TASKS * INCREMENTS).to_string(),
        "after {conflicts} conflicts"
    );
    assert_eq!(
        end.mod_revision,
        start.mod_revision + (TASKS * INCREMENTS) as Revision
    );
}

/// Values of 1.5 MiB are stored, read, listed and watched intact.
pub async fn large_values_round_trip<B: Backend>(backend: &mut B) {
    let store = backend.open().await;
    let big = |seed: u8| {
        Bytes::from(
            (0..1_572_864u32)
                .map(|i| (i % 251) as u8 ^ seed)
                .collect::<Vec<u8>>(),
        )
    };
    let mut watch = store.watch("/t/", revision(&store).await).await.unwrap();
    let v1 = store.create("/t/big", big(1)).await.unwrap();
    assert_eq!(v1.value, big(1));
    let v2 = store
        .update("/t/big", big(2), v1.mod_revision)
        .await
        .unwrap();
    assert_eq!(
        store.get("/t/big", None).await.unwrap().unwrap().value,
        big(2)
    );
    assert_eq!(list_all(&store, "/t/", None).await, vec![v2.clone()]);
    assert_eq!(next_event(&mut watch).await.kv.value, big(1));
    let updated = next_event(&mut watch).await;
    assert_eq!(updated.kv.value, big(2));
    assert_eq!(updated.prev.as_ref().unwrap().value, big(1));
}

/// 100,000 keys are written, counted and listed completely in pages.
pub async fn hundred_thousand_keys<B: Backend>(backend: &mut B) {
    const KEYS: usize = 100_000;
    const CONCURRENCY: usize = 64;
    let store = Arc::new(backend.open().await);
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..CONCURRENCY {
        let store = store.clone();
        tasks.spawn(async move {
            for i in (worker..KEYS).step_by(CONCURRENCY) {
                let value = format!("{{\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"cm-{i:06}\"}},\"data\":{{\"n\":\"{i}\"}}}}");
                store.create(&format!("/t/cm-{i:06}"), Bytes::from(value)).await.unwrap();
            }
        });
    }
    tasks.join_all().await;
    let counted = store
        .list(ListRequest {
            limit: Some(1),
            count: true,
            ..list_of("/t/")
        })
        .await
        .unwrap();
    assert_eq!(counted.count, Some(KEYS as i64));
    let mut seen = 0usize;
    let mut start = None;
    let mut snapshot = None;
    loop {
        let request = ListRequest {
            start: start.take(),
            revision: snapshot,
            limit: Some(10_000),
            ..list_of("/t/")
        };
        let page = store.list(request).await.unwrap();
        for kv in &page.items {
            assert_eq!(
                kv.key,
                format!("/t/cm-{seen:06}"),
                "every key once, in order"
            );
            seen += 1;
        }
        if !page.more {
            break;
        }
        snapshot = Some(page.revision);
        start = Some(format!("{}\0", page.items.last().unwrap().key));
    }
    assert_eq!(seen, KEYS);
}

/// Closing and reopening the store keeps every key, revision and deletion.
pub async fn data_survives_close_and_reopen<B: Backend>(backend: &mut B) {
    let store = backend.open().await;
    let a1 = put(&store, "/t/a", "1").await;
    let a2 = store
        .update("/t/a", bytes("2"), a1.mod_revision)
        .await
        .unwrap();
    put(&store, "/t/b", "b").await;
    store.delete("/t/b", None).await.unwrap();
    let big = Bytes::from(vec![7u8; 300_000]);
    let c = store.create("/t/c", big).await.unwrap();
    let before = revision(&store).await;
    drop(store);

    let store = backend.open().await;
    assert_eq!(revision(&store).await, before);
    assert_eq!(list_all(&store, "/t/", None).await, vec![a2.clone(), c]);
    assert_eq!(
        store.get("/t/a", Some(a1.mod_revision)).await.unwrap(),
        Some(a1),
        "history survives too"
    );
    let d = put(&store, "/t/d", "d").await;
    assert_eq!(
        d.mod_revision,
        before + 1,
        "revisions go on where they stopped"
    );
    let mut watch = store.watch("/t/", a2.mod_revision).await.unwrap();
    assert_eq!(
        next_event(&mut watch).await.kv.key,
        "/t/b",
        "events from before the restart replay"
    );
}

/// Keys that are not storage keys are refused by every operation.
pub async fn invalid_keys_are_refused<B: Backend>(backend: &mut B) {
    let store = backend.open().await;
    let invalid =
        |r: Result<(), Error>| assert!(matches!(r, Err(Error::InvalidKey { .. })), "{r:?}");
    invalid(store.create("no-slash", bytes("x")).await.map(drop));
    invalid(store.get("", None).await.map(drop));
    invalid(store.update("/a\0b", bytes("x"), 1).await.map(drop));
    invalid(store.delete("relative/key", None).await.map(drop));
    invalid(store.list(list_of("registry/")).await.map(drop));
    invalid(store.watch("bad", 1).await.map(drop));
    let outside = ListRequest {
        start: Some("/other/x".into()),
        ..list_of("/t/")
    };
    invalid(store.list(outside).await.map(drop));
}
