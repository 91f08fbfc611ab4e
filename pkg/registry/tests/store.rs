//! The generic store's object lifecycle, over a real SQLite store (and the watch cache).

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::meta::validate_object_meta;
use genplane_apimachinery::resource_version::ReadOptions;
use genplane_apimachinery::schema::{GroupResource, GroupVersionKind};
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use genplane_apimachinery::validation::{name_is_dns_label, name_is_dns_subdomain};
use genplane_apimachinery::{fields, labels};
use genplane_registry::object::{meta_str, object_meta};
use genplane_registry::{
    DeleteOptions, Deletion, EventType, ListOptions, Propagation, Store, Strategy, WatchItem,
    WatchStream, WriteOptions,
};
use genplane_storage::Storage;
use genplane_storage_cacher::{Cacher, CacherConfig};
use genplane_storage_sqlite::{SqliteConfig, SqliteStore};
use serde_json::{Value, json};

/// A ConfigMap-like resource: namespaced, `data` values must be strings, field `kind.flavor`.
struct Things;

impl Strategy for Things {
    fn group_resource(&self) -> GroupResource {
        GroupResource::new("", "configmaps")
    }
    fn kind(&self) -> GroupVersionKind {
        GroupVersionKind::new("", "v1", "ConfigMap")
    }
    fn namespaced(&self) -> bool {
        true
    }
    fn key_prefix(&self) -> String {
        "/registry/configmaps".into()
    }
    fn validate(
        &self,
        object: &Value,
    ) -> Result<ErrorList, genplane_apimachinery::errors::ApiError> {
        let mut errors = match object_meta(object) {
            Ok(meta) => {
                validate_object_meta(&meta, true, name_is_dns_subdomain, &Path::new("metadata"))
            }
            Err(e) => [Error::invalid(
                &Path::new("metadata"),
                "",
                e.message.clone(),
            )]
            .into_iter()
            .collect(),
        };
        if let Some(data) = object.get("data").and_then(Value::as_object) {
            for (k, v) in data {
                if !v.is_string() {
                    errors.push(Error::invalid(
                        &Path::new("data").key(k),
                        v.clone(),
                        "must be a string",
                    ));
                }
            }
        }
        Ok(errors)
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
        let mut errors = self.validate(new)?;
        errors.extend(genplane_apimachinery::meta::validate_object_meta_update(
            &object_meta(new).unwrap(),
            &object_meta(old).unwrap(),
            &Path::new("metadata"),
        ));
        Ok(errors)
    }
    fn selectable_fields(&self) -> Vec<&str> {
        vec!["flavor"]
    }
    fn field_values(&self, object: &Value) -> BTreeMap<String, String> {
        [(
            "flavor".to_owned(),
            object
                .pointer("/data/flavor")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
        )]
        .into()
    }
}

/// A Namespace-like resource: cluster-scoped, `spec.finalizers` hold back deletion, and a
/// deleting object becomes `Terminating`.
struct Spaces;

impl Strategy for Spaces {
    fn group_resource(&self) -> GroupResource {
        GroupResource::new("", "namespaces")
    }
    fn kind(&self) -> GroupVersionKind {
        GroupVersionKind::new("", "v1", "Namespace")
    }
    fn namespaced(&self) -> bool {
        false
    }
    fn key_prefix(&self) -> String {
        "/registry/namespaces".into()
    }
    fn default(&self, object: &mut Value) {
        if object.pointer("/spec/finalizers").is_none() {
            object["spec"] = json!({"finalizers": ["kubernetes"]});
        }
        if object.pointer("/status/phase").is_none() {
            object["status"] = json!({"phase": "Active"});
        }
    }
    fn validate(&self, object: &Value) -> Result<ErrorList, ApiError> {
        Ok(validate_object_meta(
            &object_meta(object).unwrap(),
            false,
            name_is_dns_label,
            &Path::new("metadata"),
        ))
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
        Ok(genplane_apimachinery::meta::validate_object_meta_update(
            &object_meta(new).unwrap(),
            &object_meta(old).unwrap(),
            &Path::new("metadata"),
        ))
    }
    fn pending_finalization(&self, object: &Value) -> bool {
        object
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty())
    }
    fn mark_deleting(&self, object: &mut Value) {
        object["status"] = json!({"phase": "Terminating"});
    }
}

fn sqlite(dir: &tempfile::TempDir) -> Arc<SqliteStore> {
    let mut config = SqliteConfig::new(dir.path().join("db"));
    config.history = None;
    Arc::new(SqliteStore::open(&config).unwrap())
}

/// The `Things` store over a watch cache on SQLite in `dir`.
fn cached_things(dir: &tempfile::TempDir) -> Store<Cacher<Arc<SqliteStore>>> {
    let cache = Cacher::new(
        sqlite(dir),
        "/registry/configmaps/",
        CacherConfig::default(),
    );
    Store::new(Arc::new(cache.unwrap()), Arc::new(Things))
}

fn cm(name: &str, labels: Value, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}, "data": data})
}

fn write() -> WriteOptions {
    WriteOptions::default()
}

fn names(items: &[Value]) -> Vec<&str> {
    items.iter().map(|o| meta_str(o, "name")).collect()
}

fn list_options(label: &str, field: &str) -> ListOptions {
    ListOptions {
        labels: labels::Selector::parse(label).unwrap(),
        fields: fields::Selector::parse(field).unwrap(),
        read: ReadOptions::default(),
    }
}

#[tokio::test]
async fn create_fills_in_what_the_server_owns() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::new(sqlite(&dir), Arc::new(Things));
    let mut sent = cm("a", json!({"app": "web"}), json!({"k": "v"}));
    sent["metadata"]["uid"] = json!("client-chosen");
    sent["metadata"]["resourceVersion"] = json!("999");
    // A resourceVersion was read from somewhere else: refused, as upstream refuses it.
    let refused = store
        .create("default", sent.clone(), &write())
        .await
        .unwrap_err();
    assert_eq!(
        (refused.code, refused.message.as_str()),
        (
            400,
            "resourceVersion should not be set on objects to be created"
        )
    );
    sent["metadata"]["resourceVersion"] = json!("");
    let created = store.create("default", sent, &write()).await.unwrap();
    assert!(created.created);
    let object = created.object;
    assert_eq!(meta_str(&object, "namespace"), "default");
    assert_ne!(meta_str(&object, "uid"), "client-chosen");
    assert_eq!(meta_str(&object, "uid").len(), 36);
    assert!(meta_str(&object, "creationTimestamp").ends_with('Z'));
    assert_ne!(meta_str(&object, "resourceVersion"), "999");
    assert_eq!(store.get("default", "a", None).await.unwrap(), object);

    let again = store
        .create("default", cm("a", json!({}), json!({})), &write())
        .await
        .unwrap_err();
    assert_eq!(
        (again.code, again.reason.as_str(), again.message.as_str()),
        (409, "AlreadyExists", "configmaps \"a\" already exists")
    );
    let missing = store.get("default", "nope", None).await.unwrap_err();
    assert_eq!((missing.code, missing.reason.as_str()), (404, "NotFound"));
    assert_eq!(
        store.get("other", "a", None).await.unwrap_err().code,
        404,
        "namespaces separate objects"
    );
}

#[tokio::test]
async fn create_refuses_bad_objects_with_every_cause() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::new(sqlite(&dir), Arc::new(Things));
    let invalid = store
        .create(
            "default",
            cm("Bad_Name", json!({"bad key": "v"}), json!({"n": 5})),
            &write(),
        )
        .await
        .unwrap_err();
    assert_eq!((invalid.code, invalid.reason.as_str()), (422, "Invalid"));
    let causes: Vec<&str> = invalid
        .details
        .as_ref()
        .unwrap()
        .causes
        .iter()
        .map(|c| c.field.as_str())
        .collect();
    assert_eq!(causes, ["metadata.name", "metadata.labels", "data[n]"]);
    assert!(
        invalid
            .message
            .starts_with("ConfigMap \"Bad_Name\" is invalid: ["),
        "{}",
        invalid.message
    );

    let mut wrong_ns = cm("a", json!({}), json!({}));
    wrong_ns["metadata"]["namespace"] = json!("elsewhere");
    let mismatch = store
        .create("default", wrong_ns, &write())
        .await
        .unwrap_err();
    assert_eq!(mismatch.code, 400);
    assert!(
        mismatch
            .message
            .contains("does not match the namespace sent on the request")
    );
    assert_eq!(
        store
            .create("default", json!("not an object"), &write())
            .await
            .unwrap_err()
            .code,
        400
    );
    let huge = cm("huge", json!({}), json!({"k": "x".repeat(1_600_000)}));
    assert_eq!(
        store
            .create("default", huge, &write())
            .await
            .unwrap_err()
            .code,
        413
    );
}

#[tokio::test]
async fn generate_name_makes_unique_names() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::new(sqlite(&dir), Arc::new(Things));
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..50 {
        let object = json!({"metadata": {"generateName": "web-"}});
        let created = store
            .create("default", object, &write())
            .await
            .unwrap()
            .object;
        let name = meta_str(&created, "name").to_owned();
        assert!(name.starts_with("web-") && name.len() == 9, "{name}");
        assert!(seen.insert(name));
    }
}

#[tokio::test]
async fn updates_honour_preconditions_and_preserve_server_fields() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::new(sqlite(&dir), Arc::new(Things));
    let v1 = store
        .create("default", cm("a", json!({}), json!({"k": "1"})), &write())
        .await
        .unwrap()
        .object;

    let mut v2_body = v1.clone();
    v2_body["data"]["k"] = json!("2");
    v2_body["metadata"]["creationTimestamp"] = json!("2000-01-01T00:00:00Z");
    let v2 = store
        .update("default", "a", v2_body, &write())
        .await
        .unwrap()
        .object;
    assert_eq!(v2["data"]["k"], "2");
    assert_eq!(
        v2["metadata"]["creationTimestamp"], v1["metadata"]["creationTimestamp"],
        "the server's creation time stays"
    );
    assert_ne!(
        meta_str(&v2, "resourceVersion"),
        meta_str(&v1, "resourceVersion")
    );

    let mut stale = v1.clone();
    stale["data"]["k"] = json!("stale");
    let conflict = store
        .update("default", "a", stale, &write())
        .await
        .unwrap_err();
    assert_eq!((conflict.code, conflict.reason.as_str()), (409, "Conflict"));
    assert!(conflict.message.contains("the object has been modified; please apply your changes to the latest version and try again"));

    let mut unconditional = cm("a", json!({}), json!({"k": "3"}));
    unconditional["metadata"]["namespace"] = json!("default");
    let v3 = store
        .update("default", "a", unconditional, &write())
        .await
        .unwrap()
        .object;
    assert_eq!(v3["data"]["k"], "3");
    assert_eq!(v3["metadata"]["uid"], v1["metadata"]["uid"]);

    let same = store
        .update("default", "a", v3.clone(), &write())
        .await
        .unwrap()
        .object;
    assert_eq!(
        meta_str(&same, "resourceVersion"),
        meta_str(&v3, "resourceVersion"),
        "a no-op update writes nothing"
    );

    let renamed = store
        .update("default", "a", cm("b", json!({}), json!({})), &write())
        .await
        .unwrap_err();
    assert_eq!(renamed.code, 400);
    assert!(
        renamed
            .message
            .contains("does not match the name on the URL")
    );
    let mut other_uid = v3.clone();
    other_uid["metadata"]["uid"] = json!("someone-else");
    assert_eq!(
        store
            .update("default", "a", other_uid, &write())
            .await
            .unwrap_err()
            .code,
        409
    );
    assert_eq!(
        store
            .update(
                "default",
                "missing",
                cm("missing", json!({}), json!({})),
                &write()
            )
            .await
            .unwrap_err()
            .code,
        404
    );
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::new(sqlite(&dir), Arc::new(Things));
    let mut object = cm("held", json!({}), json!({}));
    object["metadata"]["finalizers"] = json!(["example.com/cleanup"]);
    store.create("default", object, &write()).await.unwrap();

    let Deletion::Pending(deleting) = store
        .delete("default", "held", &DeleteOptions::default())
        .await
        .unwrap()
    else {
        panic!("deleted at once")
    };
    assert!(!meta_str(&deleting, "deletionTimestamp").is_empty());
    assert_eq!(deleting["metadata"]["deletionGracePeriodSeconds"], 0);
    // Deleting again changes nothing; adding a finalizer now is refused.
    let Deletion::Pending(again) = store
        .delete("default", "held", &DeleteOptions::default())
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(
        again["metadata"]["deletionTimestamp"],
        deleting["metadata"]["deletionTimestamp"]
    );
    let mut more = deleting.clone();
    more["metadata"]["finalizers"] = json!(["example.com/cleanup", "example.com/another"]);
    assert_eq!(
        store
            .update("default", "held", more, &write())
            .await
            .unwrap_err()
            .code,
        422
    );

    let mut released = deleting.clone();
    released["metadata"]["finalizers"] = json!([]);
    store
        .update("default", "held", released, &write())
        .await
        .unwrap();
    assert_eq!(
        store.get("default", "held", None).await.unwrap_err().code,
        404,
        "removing the last finalizer deletes"
    );
}

#[tokio::test]
async fn delete_preconditions_and_propagation() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::new(sqlite(&dir), Arc::new(Things));
    let object = store
        .create("default", cm("a", json!({}), json!({})), &write())
        .await
        .unwrap()
        .object;
    let wrong_uid = DeleteOptions {
        uid: Some("x".into()),
        ..DeleteOptions::default()
    };
    let conflict = store.delete("default", "a", &wrong_uid).await.unwrap_err();
    assert_eq!(conflict.code, 409);
    assert!(
        conflict
            .message
            .contains("Precondition failed: UID in precondition: x")
    );
    let wrong_rv = DeleteOptions {
        resource_version: Some("1".into()),
        ..DeleteOptions::default()
    };
    assert!(
        store
            .delete("default", "a", &wrong_rv)
            .await
            .unwrap_err()
            .message
            .contains("ResourceVersion in precondition: 1")
    );

    let foreground = DeleteOptions {
        propagation: Some(Propagation::Foreground),
        ..DeleteOptions::default()
    };
    let Deletion::Pending(marked) = store.delete("default", "a", &foreground).await.unwrap() else {
        panic!()
    };
    assert_eq!(
        marked["metadata"]["finalizers"],
        json!(["foregroundDeletion"])
    );
    let orphan = DeleteOptions {
        propagation: Some(Propagation::Orphan),
        ..DeleteOptions::default()
    };
    let Deletion::Pending(marked) = store.delete("default", "a", &orphan).await.unwrap() else {
        panic!()
    };
    assert_eq!(
        marked["metadata"]["finalizers"],
        json!(["orphan"]),
        "one propagation policy at a time"
    );

    let plain = store
        .create("default", cm("b", json!({}), json!({})), &write())
        .await
        .unwrap()
        .object;
    let exact = DeleteOptions {
        uid: Some(meta_str(&plain, "uid").into()),
        resource_version: Some(meta_str(&plain, "resourceVersion").into()),
        ..DeleteOptions::default()
    };
    let Deletion::Gone(last) = store.delete("default", "b", &exact).await.unwrap() else {
        panic!()
    };
    assert_eq!(last["metadata"]["uid"], plain["metadata"]["uid"]);
    assert_eq!(
        store
            .delete("default", "b", &DeleteOptions::default())
            .await
            .unwrap_err()
            .code,
        404
    );
    drop(object);
}

#[tokio::test]
async fn dry_run_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::new(sqlite(&dir), Arc::new(Things));
    let dry = WriteOptions {
        dry_run: true,
        ..WriteOptions::default()
    };
    let would = store
        .create("default", cm("a", json!({}), json!({})), &dry)
        .await
        .unwrap();
    assert_eq!(meta_str(&would.object, "name"), "a");
    assert_eq!(store.get("default", "a", None).await.unwrap_err().code, 404);
    let real = store
        .create("default", cm("a", json!({}), json!({"k": "1"})), &write())
        .await
        .unwrap()
        .object;
    let mut changed = real.clone();
    changed["data"]["k"] = json!("2");
    store.update("default", "a", changed, &dry).await.unwrap();
    store
        .delete(
            "default",
            "a",
            &DeleteOptions {
                dry_run: true,
                ..DeleteOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(store.get("default", "a", None).await.unwrap(), real);
    assert_eq!(
        store
            .create("default", cm("a", json!({}), json!({})), &dry)
            .await
            .unwrap_err()
            .code,
        409
    );
}

#[tokio::test]
async fn lists_select_and_page_through_a_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::new(sqlite(&dir), Arc::new(Things));
    for i in 0..30 {
        let flavor = if i % 3 == 0 { "sweet" } else { "sour" };
        let labels = json!({"app": if i % 2 == 0 { "web" } else { "db" }, "n": i.to_string()});
        store
            .create(
                "default",
                cm(&format!("cm-{i:02}"), labels, json!({"flavor": flavor})),
                &write(),
            )
            .await
            .unwrap();
    }
    store
        .create(
            "other",
            cm("elsewhere", json!({"app": "web"}), json!({})),
            &write(),
        )
        .await
        .unwrap();

    assert_eq!(
        store
            .list("default", &list_options("", ""))
            .await
            .unwrap()
            .items
            .len(),
        30
    );
    assert_eq!(
        store
            .list("", &list_options("", ""))
            .await
            .unwrap()
            .items
            .len(),
        31,
        "all namespaces"
    );
    assert_eq!(
        store
            .list("default", &list_options("app=web", ""))
            .await
            .unwrap()
            .items
            .len(),
        15
    );
    assert_eq!(
        store
            .list(
                "default",
                &list_options("app in (web,db),n notin (0,1)", "flavor=sweet")
            )
            .await
            .unwrap()
            .items
            .len(),
        9
    );
    assert_eq!(
        names(
            &store
                .list("", &list_options("", "metadata.name=elsewhere"))
                .await
                .unwrap()
                .items
        ),
        ["elsewhere"]
    );
    assert_eq!(
        store
            .list("", &list_options("", "metadata.namespace!=default"))
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    let unsupported = store
        .list("default", &list_options("", "spec.nope=1"))
        .await
        .unwrap_err();
    assert_eq!(
        (unsupported.code, unsupported.message.as_str()),
        (400, "field label not supported: spec.nope")
    );

    // Pages of 7 web objects, while the collection changes under the pages.
    let mut options = list_options("app=web", "");
    options.read.limit = Some(7);
    let first = store.list("default", &options).await.unwrap();
    assert_eq!(
        names(&first.items),
        [
            "cm-00", "cm-02", "cm-04", "cm-06", "cm-08", "cm-10", "cm-12"
        ]
    );
    assert_eq!(
        first.remaining_item_count, None,
        "unknown when a selector filters"
    );
    store
        .delete("default", "cm-14", &DeleteOptions::default())
        .await
        .unwrap();
    store
        .create(
            "default",
            cm("cm-13a", json!({"app": "web"}), json!({})),
            &write(),
        )
        .await
        .unwrap();
    options.read.continue_token = first.continue_token.clone();
    let second = store.list("default", &options).await.unwrap();
    assert_eq!(
        names(&second.items),
        [
            "cm-14", "cm-16", "cm-18", "cm-20", "cm-22", "cm-24", "cm-26"
        ],
        "the snapshot of the first page"
    );
    assert_eq!(second.resource_version, first.resource_version);
    options.read.continue_token = second.continue_token.clone();
    let third = store.list("default", &options).await.unwrap();
    assert_eq!(names(&third.items), ["cm-28"]);
    assert!(third.continue_token.is_none());

    let mut plain = list_options("", "");
    plain.read.limit = Some(10);
    let page = store.list("default", &plain).await.unwrap();
    assert_eq!(page.remaining_item_count, Some(20));
    // Each later page tells what is left of the same snapshot, whatever was written since.
    store
        .create("default", cm("cm-99", json!({}), json!({})), &write())
        .await
        .unwrap();
    plain.read.continue_token = page.continue_token.clone();
    let page = store.list("default", &plain).await.unwrap();
    assert_eq!(page.items.len(), 10);
    assert_eq!(page.remaining_item_count, Some(10));
    plain.read.continue_token = page.continue_token.clone();
    let page = store.list("default", &plain).await.unwrap();
    assert_eq!(
        (page.items.len(), page.remaining_item_count),
        (10, None),
        "the last page of the snapshot"
    );
    assert!(page.continue_token.is_none());
    let mut bad = list_options("", "");
    bad.read.continue_token = Some("garbage".into());
    assert_eq!(store.list("default", &bad).await.unwrap_err().code, 400);
}

#[tokio::test]
async fn an_expired_continue_token_is_410() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = sqlite(&dir);
    let store = Store::new(sqlite.clone(), Arc::new(Things));
    for i in 0..3 {
        store
            .create(
                "default",
                cm(&format!("cm-{i}"), json!({}), json!({})),
                &write(),
            )
            .await
            .unwrap();
    }
    let mut options = list_options("", "");
    options.read.limit = Some(1);
    let first = store.list("default", &options).await.unwrap();
    store
        .create("default", cm("later", json!({}), json!({})), &write())
        .await
        .unwrap();
    sqlite
        .compact(sqlite.current_revision().await.unwrap())
        .await
        .unwrap();
    options.read.continue_token = first.continue_token;
    let expired = store.list("default", &options).await.unwrap_err();
    assert_eq!((expired.code, expired.reason.as_str()), (410, "Expired"));
    assert!(
        expired
            .message
            .contains("or use the continue token in this response"),
        "{}",
        expired.message
    );
    // The token in the answer goes on after cm-0 at the current revision: "later" included.
    let mut rest = Vec::new();
    options.read.continue_token = Some(expired.metadata.continue_token.clone());
    while options.read.continue_token.is_some() {
        let page = store.list("default", &options).await.unwrap();
        rest.extend(names(&page.items).into_iter().map(str::to_owned));
        options.read.continue_token = page.continue_token;
    }
    assert_eq!(rest, ["cm-1", "cm-2", "later"]);

    // A list at a compacted revision without a continue token has nothing to go on with.
    let mut exact = list_options("", "");
    exact.read.resource_version = Some(first.resource_version.clone());
    exact.read.resource_version_match = Some("Exact".into());
    let expired = store.list("default", &exact).await.unwrap_err();
    assert_eq!(
        (
            expired.code,
            expired.message.as_str(),
            expired.metadata.continue_token.as_str()
        ),
        (
            410,
            "The resourceVersion for the provided list is too old.",
            ""
        )
    );
}

async fn next(watch: &mut WatchStream) -> WatchItem {
    tokio::time::timeout(genplane_test_support::DEADLINE, watch.next())
        .await
        .unwrap()
        .unwrap()
}

fn event(item: WatchItem) -> (EventType, String) {
    match item {
        WatchItem::Event(kind, object) => (kind, meta_str(&object, "name").to_owned()),
        other => panic!("expected an event, got {other:?}"),
    }
}

#[tokio::test]
async fn watches_follow_selector_transitions() {
    let dir = tempfile::tempdir().unwrap();
    let store = cached_things(&dir);
    let a = store
        .create(
            "default",
            cm("a", json!({"app": "web"}), json!({})),
            &write(),
        )
        .await
        .unwrap()
        .object;
    let listed = store
        .list("default", &list_options("app=web", ""))
        .await
        .unwrap();
    let mut options = list_options("app=web", "");
    options.read.resource_version = Some(listed.resource_version.clone());
    let mut watch = store.watch("default", &options).await.unwrap();

    let b = store
        .create(
            "default",
            cm("b", json!({"app": "db"}), json!({})),
            &write(),
        )
        .await
        .unwrap()
        .object;
    let mut leaves = a.clone();
    leaves["metadata"]["labels"] = json!({"app": "db"});
    store
        .update("default", "a", leaves, &write())
        .await
        .unwrap();
    let mut enters = b.clone();
    enters["metadata"]["labels"] = json!({"app": "web"});
    let entered = store
        .update("default", "b", enters, &write())
        .await
        .unwrap()
        .object;
    let mut changes = entered.clone();
    changes["data"] = json!({"k": "v"});
    store
        .update("default", "b", changes, &write())
        .await
        .unwrap();
    store
        .delete("default", "b", &DeleteOptions::default())
        .await
        .unwrap();

    assert_eq!(
        event(next(&mut watch).await),
        (EventType::Deleted, "a".into()),
        "a stopped matching"
    );
    assert_eq!(
        event(next(&mut watch).await),
        (EventType::Added, "b".into()),
        "b started matching"
    );
    assert_eq!(
        event(next(&mut watch).await),
        (EventType::Modified, "b".into())
    );
    let WatchItem::Event(EventType::Deleted, gone) = next(&mut watch).await else {
        panic!()
    };
    assert_eq!(
        gone["data"],
        json!({"k": "v"}),
        "a deleted object arrives in its last state"
    );

    // A bookmark on request carries the revision reached.
    watch.request_bookmark();
    let WatchItem::Bookmark {
        resource_version,
        initial_events_end,
    } = next(&mut watch).await
    else {
        panic!()
    };
    assert!(!initial_events_end);
    assert!(
        resource_version.parse::<i64>().unwrap()
            >= gone["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap()
    );
}

/// A watch of one name (as a controller follows one ConfigMap in every namespace) and of one
/// namespace by field: each gets every change of what it names, and of nothing else, from its
/// initial state through updates and deletes.
#[tokio::test]
async fn watches_by_name_and_namespace_fields_see_only_what_they_name() {
    let dir = tempfile::tempdir().unwrap();
    let store = cached_things(&dir);
    let create = |namespace: &'static str, name: &'static str| {
        let store = &store;
        async move {
            store
                .create(namespace, cm(name, json!({}), json!({})), &write())
                .await
                .unwrap()
                .object
        }
    };
    create("one", "wanted").await;
    create("one", "other").await;
    let mut by_name = store
        .watch("", &list_options("", "metadata.name=wanted"))
        .await
        .unwrap();
    let mut by_namespace = store
        .watch(
            "",
            &list_options("", "metadata.namespace=two,metadata.name!=skip"),
        )
        .await
        .unwrap();
    assert_eq!(
        event(next(&mut by_name).await),
        (EventType::Added, "wanted".into()),
        "the initial state"
    );
    create("two", "skip").await;
    create("two", "other").await;
    let mut wanted = create("two", "wanted").await;
    wanted["data"] = json!({"k": "v"});
    store
        .update("two", "wanted", wanted, &write())
        .await
        .unwrap();
    store
        .delete("one", "other", &DeleteOptions::default())
        .await
        .unwrap();
    store
        .delete("one", "wanted", &DeleteOptions::default())
        .await
        .unwrap();

    let mut seen = Vec::new();
    for _ in 0..3 {
        let WatchItem::Event(kind, object) = next(&mut by_name).await else {
            panic!("expected an event")
        };
        seen.push((kind, meta_str(&object, "namespace").to_owned()));
    }
    assert_eq!(
        seen,
        [
            (EventType::Added, "two".to_owned()),
            (EventType::Modified, "two".to_owned()),
            (EventType::Deleted, "one".to_owned()),
        ]
    );
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(event(next(&mut by_namespace).await));
    }
    assert_eq!(
        seen,
        [
            (EventType::Added, "other".to_owned()),
            (EventType::Added, "wanted".to_owned()),
            (EventType::Modified, "wanted".to_owned()),
        ]
    );
    // Nothing else came: a later change each watch selects arrives next.
    create("three", "wanted").await;
    assert_eq!(
        event(next(&mut by_name).await),
        (EventType::Added, "wanted".into())
    );
    create("two", "last").await;
    assert_eq!(
        event(next(&mut by_namespace).await),
        (EventType::Added, "last".into())
    );
}

#[tokio::test]
async fn watch_start_semantics() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = sqlite(&dir);
    let store = Store::new(sqlite.clone(), Arc::new(Things));
    for name in ["a", "b"] {
        store
            .create("default", cm(name, json!({}), json!({})), &write())
            .await
            .unwrap();
    }
    // No resourceVersion: the current state as ADDED events, then changes.
    let mut watch = store.watch("default", &list_options("", "")).await.unwrap();
    assert_eq!(
        event(next(&mut watch).await),
        (EventType::Added, "a".into())
    );
    assert_eq!(
        event(next(&mut watch).await),
        (EventType::Added, "b".into())
    );
    store
        .create("default", cm("c", json!({}), json!({})), &write())
        .await
        .unwrap();
    assert_eq!(
        event(next(&mut watch).await),
        (EventType::Added, "c".into())
    );

    // The streaming list: initial events, then the bookmark that ends them.
    let mut streaming = list_options("", "");
    streaming.read = ReadOptions {
        resource_version: Some("0".into()),
        resource_version_match: Some("NotOlderThan".into()),
        send_initial_events: Some(true),
        allow_watch_bookmarks: true,
        ..ReadOptions::default()
    };
    let mut watch = store.watch("default", &streaming).await.unwrap();
    for expected in ["a", "b", "c"] {
        assert_eq!(
            event(next(&mut watch).await),
            (EventType::Added, expected.into())
        );
    }
    let WatchItem::Bookmark {
        initial_events_end, ..
    } = next(&mut watch).await
    else {
        panic!()
    };
    assert!(initial_events_end);

    // From a compacted revision: a 410 Expired inside the stream.
    let mut old = list_options("", "");
    old.read.resource_version = Some("2".into());
    sqlite
        .compact(sqlite.current_revision().await.unwrap())
        .await
        .unwrap();
    let mut watch = store.watch("default", &old).await.unwrap();
    let WatchItem::Error(status) = next(&mut watch).await else {
        panic!()
    };
    assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
}

#[tokio::test]
async fn cluster_scoped_objects_wait_for_spec_finalizers() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::new(sqlite(&dir), Arc::new(Spaces));
    let created = store
        .create(
            "",
            json!({"metadata": {"name": "team-a", "namespace": "ignored"}}),
            &write(),
        )
        .await
        .unwrap()
        .object;
    assert_eq!(
        meta_str(&created, "namespace"),
        "",
        "cluster-scoped objects have no namespace"
    );
    assert_eq!(created["spec"]["finalizers"], json!(["kubernetes"]));
    let Deletion::Pending(terminating) = store
        .delete("", "team-a", &DeleteOptions::default())
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(terminating["status"]["phase"], "Terminating");
    let mut finalized = terminating.clone();
    finalized["spec"]["finalizers"] = json!([]);
    store
        .update("", "team-a", finalized, &write())
        .await
        .unwrap();
    assert_eq!(store.get("", "team-a", None).await.unwrap_err().code, 404);
}

#[tokio::test]
async fn delete_collection_removes_the_selection() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::new(sqlite(&dir), Arc::new(Things));
    for (name, app) in [("a", "web"), ("b", "web"), ("c", "db")] {
        store
            .create(
                "default",
                cm(name, json!({"app": app}), json!({})),
                &write(),
            )
            .await
            .unwrap();
    }
    let deleted = store
        .delete_collection(
            "default",
            &list_options("app=web", ""),
            &DeleteOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(names(&deleted), ["a", "b"]);
    assert_eq!(
        names(
            &store
                .list("default", &list_options("", ""))
                .await
                .unwrap()
                .items
        ),
        ["c"]
    );
}

/// Reads `watch` until it has seen `count` events; returns each event's type, name and
/// resourceVersion.
async fn collect_events(mut watch: WatchStream, count: usize) -> Vec<(EventType, String, String)> {
    let mut seen = Vec::with_capacity(count);
    while seen.len() < count {
        match next(&mut watch).await {
            WatchItem::Event(kind, object) => seen.push((
                kind,
                meta_str(&object, "name").to_owned(),
                meta_str(&object, "resourceVersion").to_owned(),
            )),
            WatchItem::Bookmark { .. } => {}
            other => panic!("expected an event, got {other:?}"),
        }
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_collection_of_thousands_commits_in_batches_and_every_watcher_sees_each_delete() {
    const OBJECTS: usize = 5_000;
    let dir = tempfile::tempdir().unwrap();
    let backend = sqlite(&dir);
    let cache = Arc::new(
        Cacher::new(
            backend.clone(),
            "/registry/configmaps/",
            CacherConfig::default(),
        )
        .unwrap(),
    );
    let store = Arc::new(Store::new(cache, Arc::new(Things)));
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let store = store.clone();
            tokio::spawn(async move {
                for i in (w..OBJECTS).step_by(8) {
                    let mut object = cm(&format!("cm-{i:05}"), json!({}), json!({"k": "v"}));
                    if i == 42 {
                        object["metadata"]["finalizers"] = json!(["example.com/hold"]);
                    }
                    store.create("default", object, &write()).await.unwrap();
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
    let listed = store.list("default", &list_options("", "")).await.unwrap();
    assert_eq!(listed.items.len(), OBJECTS);
    let mut from = list_options("", "");
    from.read.resource_version = Some(listed.resource_version.clone());
    let watchers: Vec<_> = (0..2)
        .map(|_| async { store.watch("default", &from).await.unwrap() })
        .collect();
    let mut readers = Vec::new();
    for watcher in watchers {
        readers.push(tokio::spawn(collect_events(watcher.await, OBJECTS)));
    }

    let commits = backend.commits();
    let answered = store
        .delete_collection("default", &list_options("", ""), &DeleteOptions::default())
        .await
        .unwrap();
    let commits = backend.commits() - commits;

    assert_eq!(answered.len(), OBJECTS, "every object is answered");
    // 4,999 removals in batches of DELETE_BATCH, and one object marked.
    let batches = (OBJECTS - 1).div_ceil(genplane_storage::DELETE_BATCH) as u64;
    assert_eq!(commits, batches + 1, "one commit per batch, not per object");
    let left = store
        .list("default", &list_options("", ""))
        .await
        .unwrap()
        .items;
    assert_eq!(names(&left), ["cm-00042"], "the finalizer holds one object");
    assert!(!meta_str(&left[0], "deletionTimestamp").is_empty());
    for reader in readers {
        let seen = reader.await.unwrap();
        let deleted: std::collections::BTreeSet<&str> = seen
            .iter()
            .filter(|(kind, _, _)| *kind == EventType::Deleted)
            .map(|(_, name, _)| name.as_str())
            .collect();
        assert_eq!(deleted.len(), OBJECTS - 1, "one DELETED event per object");
        assert!(!deleted.contains("cm-00042"));
        assert!(seen.contains(&(
            EventType::Modified,
            "cm-00042".into(),
            meta_str(&left[0], "resourceVersion").to_owned()
        )));
        let versions: std::collections::BTreeSet<&str> =
            seen.iter().map(|(_, _, rv)| rv.as_str()).collect();
        assert_eq!(
            versions.len(),
            OBJECTS,
            "every event has its own resourceVersion"
        );
    }
}

/// Waits (bounded) until the mirror's snapshot satisfies `done`, and returns it.
async fn mirrored(
    mirror: &genplane_registry::Mirror,
    done: impl Fn(&genplane_registry::Snapshot) -> bool,
) -> Arc<genplane_registry::Snapshot> {
    genplane_test_support::eventually_ok_async("the mirror to get there", || async {
        let snapshot = mirror.snapshot().await;
        if done(&snapshot) {
            Ok(snapshot)
        } else {
            Err(format!("{:?}", snapshot.objects().collect::<Vec<_>>()))
        }
    })
    .await
}

#[tokio::test]
async fn a_mirror_starts_with_every_object_and_follows_each_change() {
    let dir = tempfile::tempdir().unwrap();
    let store = cached_things(&dir);
    for (namespace, name) in [("default", "a"), ("other", "b")] {
        store
            .create(namespace, cm(name, json!({}), json!({})), &write())
            .await
            .unwrap();
    }
    let mirror = store.mirror();
    // the first snapshot is the whole state, never a part of it
    let first = mirror.snapshot().await;
    assert_eq!(
        names(&first.objects().cloned().collect::<Vec<_>>()),
        ["a", "b"]
    );
    assert!(first.get("other", "b").is_some() && first.get("default", "b").is_none());
    store
        .create("default", cm("c", json!({}), json!({})), &write())
        .await
        .unwrap();
    let mut a = store.get("default", "a", None).await.unwrap();
    a["data"] = json!({"k": "v"});
    store.update("default", "a", a, &write()).await.unwrap();
    store
        .delete("other", "b", &DeleteOptions::default())
        .await
        .unwrap();
    let last = mirrored(&mirror, |s| {
        s.get("other", "b").is_none()
            && s.get("default", "c").is_some()
            && s.get("default", "a").and_then(|a| a.pointer("/data/k")) == Some(&json!("v"))
    })
    .await;
    assert_eq!(last.len(), 2);
    assert!(
        last.generation() >= first.generation() + 3,
        "each change is a new generation: {} then {}",
        first.generation(),
        last.generation()
    );
    // a snapshot taken before the changes still holds what it held
    assert_eq!(first.len(), 2);
    assert!(first.get("other", "b").is_some());
}
