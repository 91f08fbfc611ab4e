//! The built-in resources through the generic store, over SQLite: their own rules (from
//! genplane-api) and the shared lifecycle together.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use genplane_registry::object::meta_str;
use genplane_registry::{
    CatalogStrategy, DeleteOptions, Deletion, EventType, JsonItem, ListOptions, Store, WatchItem,
    WriteOptions,
};
use genplane_storage_sqlite::{SqliteConfig, SqliteStore};
use serde_json::json;

fn store(storage: &Arc<SqliteStore>, group: &str, resource: &str) -> Store<SqliteStore> {
    let strategy = CatalogStrategy::find(group, "v1", resource).unwrap();
    Store::new(storage.clone(), Arc::new(strategy))
}

fn sqlite(dir: &tempfile::TempDir) -> Arc<SqliteStore> {
    let mut config = SqliteConfig::new(dir.path().join("db"));
    config.history = None;
    Arc::new(SqliteStore::open(&config).unwrap())
}

#[tokio::test]
async fn configmaps_and_secrets_follow_their_rules() {
    let dir = tempfile::tempdir().unwrap();
    let storage = sqlite(&dir);
    let configmaps = store(&storage, "", "configmaps");
    let bad = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"a b": "x"}, "binaryData": {"k": "eA=="}});
    let invalid = configmaps
        .create("default", bad, &WriteOptions::default())
        .await
        .unwrap_err();
    assert_eq!((invalid.code, invalid.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        invalid.details.as_ref().unwrap().causes[0].field,
        "data[a b]"
    );
    let wrong_type = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"k": 5}});
    let bad_request = configmaps
        .create("default", wrong_type, &WriteOptions::default())
        .await
        .unwrap_err();
    assert_eq!(bad_request.code, 400, "{}", bad_request.message);

    let secrets = store(&storage, "", "secrets");
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"password": "hunter2"}});
    let created = secrets
        .create("default", secret, &WriteOptions::default())
        .await
        .unwrap()
        .object;
    assert_eq!(created["type"], "Opaque", "defaulted");
    assert_eq!(
        created["data"]["password"], "aHVudGVyMg==",
        "stringData merged into data"
    );
    assert!(created.get("stringData").is_none());
    let tls = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "t"}, "type": "kubernetes.io/tls", "data": {}});
    let missing = secrets
        .create("default", tls, &WriteOptions::default())
        .await
        .unwrap_err();
    assert_eq!(missing.code, 422);
    assert!(missing.message.contains("tls.crt"), "{}", missing.message);
    let options = ListOptions {
        fields: genplane_apimachinery::fields::Selector::parse("type=Opaque").unwrap(),
        ..ListOptions::default()
    };
    assert_eq!(
        secrets.list("default", &options).await.unwrap().items.len(),
        1
    );
}

#[tokio::test]
async fn namespaces_terminate_until_finalized() {
    let dir = tempfile::tempdir().unwrap();
    let storage = sqlite(&dir);
    let namespaces = store(&storage, "", "namespaces");
    let created = namespaces
        .create(
            "",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}),
            &WriteOptions::default(),
        )
        .await
        .unwrap()
        .object;
    assert_eq!(created["status"]["phase"], "Active");
    assert_eq!(created["spec"]["finalizers"], json!(["kubernetes"]));
    assert_eq!(
        created["metadata"]["labels"]["kubernetes.io/metadata.name"],
        "team-a"
    );
    let invalid = namespaces
        .create(
            "",
            json!({"metadata": {"name": "Team.A"}}),
            &WriteOptions::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(invalid.code, 422);
    let Deletion::Pending(terminating) = namespaces
        .delete("", "team-a", &DeleteOptions::default())
        .await
        .unwrap()
    else {
        panic!("gone at once")
    };
    assert_eq!(terminating["status"]["phase"], "Terminating");
    assert!(!meta_str(&terminating, "deletionTimestamp").is_empty());
}

#[tokio::test]
async fn events_k8s_io_events_are_core_events_underneath() {
    let dir = tempfile::tempdir().unwrap();
    let storage = sqlite(&dir);
    let new_events = store(&storage, "events.k8s.io", "events");
    let core_events = store(&storage, "", "events");
    let event = new_event("all good");
    let created = new_events
        .create("default", event, &WriteOptions::default())
        .await
        .unwrap()
        .object;
    assert_eq!(created["note"], "all good");
    let as_core = core_events.get("default", "e1", None).await.unwrap();
    assert_eq!(as_core["apiVersion"], "v1");
    assert_eq!(as_core["message"], "all good");
    assert_eq!(as_core["involvedObject"]["name"], "cm");
    let as_new = new_events.get("default", "e1", None).await.unwrap();
    assert_eq!(as_new["regarding"]["name"], "cm");
    assert_eq!(as_new["apiVersion"], "events.k8s.io/v1");
}

/// The JSON a client reads is the decoded object serialized, byte for byte, whether the store
/// wrote it from the stored bytes or decoded it.
/// An events.k8s.io/v1 Event `e1` in `default` with the note `note`.
fn new_event(note: &str) -> serde_json::Value {
    json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "e1", "namespace": "default"},
        "eventTime": "2026-11-22T03:00:00.000000Z", "reportingController": "example.com/controller",
        "reportingInstance": "controller-1", "action": "Reconcile", "reason": "Synced", "type": "Normal",
        "regarding": {"kind": "ConfigMap", "namespace": "default", "name": "cm", "apiVersion": "v1"},
        "note": note
    })
}

fn json_of(object: &serde_json::Value) -> Vec<u8> {
    genplane_api::order::to_vec(object)
}

/// Each item's JSON as written when a list is sent.
fn written(items: &[JsonItem]) -> Vec<Vec<u8>> {
    items
        .iter()
        .map(|item| {
            let mut out = Vec::new();
            item.write_into(&mut out);
            assert_eq!(out.len(), item.len(), "the length an item announces");
            out
        })
        .collect()
}

/// The ConfigMaps store over a watch cache on SQLite in `dir`, as the API server builds it.
fn cached_configmaps(
    dir: &tempfile::TempDir,
) -> Store<genplane_storage_cacher::Cacher<Arc<SqliteStore>>> {
    use genplane_storage_cacher::{Cacher, CacherConfig};

    // Each cached object keeps its layout, found at its first read, as in the API server.
    let config = CacherConfig {
        value_hint: Some(genplane_registry::object::layout_hint),
        ..CacherConfig::default()
    };
    let cache = Cacher::new(sqlite(dir), "/registry/configmaps/", config).unwrap();
    let strategy = CatalogStrategy::find("", "v1", "configmaps").unwrap();
    Store::new(Arc::new(cache), Arc::new(strategy))
}

/// A watch's initial state is the cache's objects themselves: each such watch writes them
/// anew and keeps nothing on them (kept, the served bytes would double every cached object's
/// memory for its whole life), while a change is written once for all its watchers.
#[tokio::test]
async fn initial_states_are_written_per_watch_and_changes_once_for_all() {
    let dir = tempfile::tempdir().unwrap();
    let configmaps = cached_configmaps(&dir);
    let create = |name: &str| {
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name}, "data": {"k": "v"}});
        let configmaps = &configmaps;
        async move {
            configmaps
                .create("default", object, &WriteOptions::default())
                .await
                .unwrap()
        }
    };
    for name in ["a", "b", "c"] {
        create(name).await;
    }
    async fn next(watch: &mut genplane_registry::WatchStream) -> EventType {
        match tokio::time::timeout(genplane_test_support::DEADLINE, watch.next())
            .await
            .unwrap()
            .unwrap()
        {
            WatchItem::Event(kind, _) => kind,
            other => panic!("expected an event, got {other:?}"),
        }
    }
    let before = configmaps.served_counts().verbatim;
    let mut watches = Vec::new();
    for round in 1..=2 {
        let mut watch = configmaps
            .watch("default", &ListOptions::default())
            .await
            .unwrap();
        for _ in 0..3 {
            assert_eq!(next(&mut watch).await, EventType::Added);
        }
        assert_eq!(configmaps.served_counts().verbatim, before + 3 * round);
        watches.push(watch);
    }
    create("d").await;
    for watch in &mut watches {
        assert_eq!(next(watch).await, EventType::Added);
    }
    assert_eq!(configmaps.served_counts().verbatim, before + 3 * 2 + 1);
}

#[tokio::test]
async fn cached_reads_answer_with_the_stored_bytes_without_decoding() {
    use genplane_registry::ServedCounts;

    let dir = tempfile::tempdir().unwrap();
    let configmaps = cached_configmaps(&dir);
    for name in ["a", "b", "c"] {
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "labels": {"app": name}, "annotations": {"x": "y\"z"}},
            "data": {"k": "v\u{e9}\n"}});
        configmaps
            .create("default", object, &WriteOptions::default())
            .await
            .unwrap();
    }
    // A read at "0" answers from the cache as far as it has come, which may be short of the
    // creates: wait until it holds them all.
    let created = {
        use genplane_storage::Storage;
        configmaps
            .storage()
            .store()
            .current_revision()
            .await
            .unwrap()
    };
    genplane_test_support::eventually_async("the cache to reach the creates", || async {
        (configmaps.storage().revision() >= created).then_some(())
    })
    .await;
    let before = configmaps.served_counts();
    // The first read finds each object's layout, the later ones read it from the cache.
    for resource_version in [Some("0"), None, Some("0"), None] {
        let served = configmaps
            .get_json("default", "b", resource_version)
            .await
            .unwrap();
        let decoded = configmaps
            .get("default", "b", resource_version)
            .await
            .unwrap();
        assert_eq!(served, json_of(&decoded), "{resource_version:?}");
    }
    let decoded = configmaps
        .list("default", &ListOptions::default())
        .await
        .unwrap();
    let expected: Vec<Vec<u8>> = decoded.items.iter().map(json_of).collect();
    for _ in 0..2 {
        let mut items = Vec::new();
        let listed = configmaps
            .list_json("default", &ListOptions::default(), &mut items)
            .await
            .unwrap();
        assert_eq!(listed.resource_version, decoded.resource_version);
        assert!(
            items.iter().all(|i| matches!(i, JsonItem::Stored(_))),
            "an unselected list holds the stored bytes, written when sent"
        );
        assert_eq!(written(&items), expected);
    }
    assert_eq!(
        configmaps.served_counts(),
        ServedCounts {
            verbatim: before.verbatim + 4 + 2 * 3,
            decoded: before.decoded
        },
        "no object was decoded and encoded again"
    );

    // A selector needs the objects: they are decoded, and only the selected ones written.
    let selected = ListOptions {
        labels: genplane_apimachinery::labels::Selector::parse("app in (a,c)").unwrap(),
        ..ListOptions::default()
    };
    let mut items = Vec::new();
    configmaps
        .list_json("default", &selected, &mut items)
        .await
        .unwrap();
    let expected: Vec<Vec<u8>> = configmaps
        .list("default", &selected)
        .await
        .unwrap()
        .items
        .iter()
        .map(json_of)
        .collect();
    assert_eq!(expected.len(), 2);
    assert_eq!(written(&items), expected);
    assert_eq!(configmaps.served_counts().decoded, before.decoded + 2);
}

#[tokio::test]
async fn writes_answer_with_the_bytes_they_stored_when_served_as_stored() {
    let dir = tempfile::tempdir().unwrap();
    let storage = sqlite(&dir);
    let configmaps = store(&storage, "", "configmaps");
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w"}, "data": {"k": "v\u{e9}\"q<>&"}});
    let created = configmaps
        .create("default", cm, &WriteOptions::default())
        .await
        .unwrap();
    let before = configmaps.served_counts();
    let answer = configmaps.written_json(&created).unwrap();
    // As every JSON answer, it ends with a newline.
    let line = |object: &serde_json::Value| [json_of(object), b"\n".to_vec()].concat();
    assert_eq!(
        answer,
        line(&created.object),
        "the object the write returned"
    );
    assert_eq!(
        configmaps.served_counts().verbatim,
        before.verbatim + 1,
        "from the stored bytes, not serialized again"
    );
    let mut changed = created.object.clone();
    changed["data"]["k"] = json!("w");
    let updated = configmaps
        .update("default", "w", changed, &WriteOptions::default())
        .await
        .unwrap();
    assert_eq!(
        configmaps.written_json(&updated).unwrap(),
        line(&updated.object)
    );
    // A dry run stored nothing: its object is serialized.
    let dry = WriteOptions {
        dry_run: true,
        ..WriteOptions::default()
    };
    let mut again = updated.object.clone();
    again["data"]["k"] = json!("x");
    let dry_run = configmaps
        .update("default", "w", again, &dry)
        .await
        .unwrap();
    assert!(configmaps.written_json(&dry_run).is_none());
    // Events of events.k8s.io are stored as core Events: never answered with those bytes.
    let new_events = store(&storage, "events.k8s.io", "events");
    let event = new_event("n1");
    let written = new_events
        .create("default", event, &WriteOptions::default())
        .await
        .unwrap();
    assert!(written.stored.is_some());
    assert!(new_events.written_json(&written).is_none());
}

#[tokio::test]
async fn resources_served_in_another_form_than_stored_are_decoded() {
    let dir = tempfile::tempdir().unwrap();
    let storage = sqlite(&dir);
    let new_events = store(&storage, "events.k8s.io", "events");
    let event = new_event("n1");
    new_events
        .create("default", event, &WriteOptions::default())
        .await
        .unwrap();
    let served = new_events.get_json("default", "e1", None).await.unwrap();
    let decoded = new_events.get("default", "e1", None).await.unwrap();
    assert_eq!(served, json_of(&decoded));
    assert_eq!(decoded["apiVersion"], "events.k8s.io/v1");
    let counts = new_events.served_counts();
    assert_eq!((counts.verbatim, counts.decoded), (0, 1));

    // A watch hands out both states in the served form: the new one and, on a delete, the
    // previous one.
    let mut from = ListOptions::default();
    from.read.resource_version = Some(meta_str(&decoded, "resourceVersion").to_owned());
    let mut watch = new_events.watch("default", &from).await.unwrap();
    let mut changed = decoded.clone();
    changed["metadata"]["labels"] = json!({"changed": "yes"});
    new_events
        .update("default", "e1", changed, &WriteOptions::default())
        .await
        .unwrap();
    new_events
        .delete("default", "e1", &DeleteOptions::default())
        .await
        .unwrap();
    for expected in [EventType::Modified, EventType::Deleted] {
        let item = tokio::time::timeout(genplane_test_support::DEADLINE, watch.next())
            .await
            .unwrap()
            .unwrap();
        let WatchItem::Event(kind, object) = item else {
            panic!("expected an event, got {item:?}");
        };
        assert_eq!(kind, expected);
        assert_eq!(object["apiVersion"], "events.k8s.io/v1", "{kind:?}");
        assert_eq!(object["note"], "n1", "{kind:?}: {}", object.value());
        assert_eq!(object["metadata"]["labels"]["changed"], "yes");
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(object.json()).unwrap()["note"],
            "n1"
        );
    }
}
