//! The built-in resources through the generic store, over SQLite: their own rules (from
//! genplane-api) and the shared lifecycle together.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use genplane_registry::object::meta_str;
use genplane_registry::{
    CatalogStrategy, DeleteOptions, Deletion, ListOptions, Store, WriteOptions,
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
    let event = json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "e1", "namespace": "default"},
        "eventTime": "2026-11-22T03:00:00.000000Z", "reportingController": "example.com/controller",
        "reportingInstance": "controller-1", "action": "Reconcile", "reason": "Synced", "type": "Normal",
        "regarding": {"kind": "ConfigMap", "namespace": "default", "name": "cm", "apiVersion": "v1"},
        "note": "all good"
    });
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
