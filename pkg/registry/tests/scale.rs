//! The `scale` subresource of a custom resource through the generic store, over SQLite: a
//! Scale is read from the object and written back into it.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::validation::field::ErrorList;
use genplane_registry::object::meta_str;
use genplane_registry::{
    CustomResourceStrategy, CustomScaleStrategy, CustomSchema, CustomStatusStrategy, ScalePaths,
    Store, WriteOptions,
};
use genplane_storage::Storage;
use genplane_storage_sqlite::{SqliteConfig, SqliteStore};
use serde_json::{Value, json};

/// A schema that accepts everything.
#[derive(Debug)]
struct Open;

impl CustomSchema for Open {
    fn prune(&self, _: &mut Value) -> Result<Vec<String>, ApiError> {
        Ok(Vec::new())
    }
    fn read(&self, _: &mut Value) {}
    fn default(&self, _: &mut Value) {}
    fn validate(&self, _: &Value, _: Option<&Value>) -> ErrorList {
        ErrorList::new()
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    objects: Store<SqliteStore>,
    status: Store<SqliteStore>,
    scale: Store<SqliteStore>,
}

fn fixture(spec_path: &str) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let mut config = SqliteConfig::new(dir.path().join("db"));
    config.history = None;
    let storage = Arc::new(SqliteStore::open(&config).unwrap());
    let paths = ScalePaths {
        spec_replicas: spec_path.into(),
        status_replicas: ".status.replicas".into(),
        label_selector: Some(".status.selector".into()),
    };
    let base = CustomResourceStrategy::new(
        "stable.example.com",
        "crontabs",
        "CronTab",
        "v1",
        "v1",
        true,
        Arc::new(Open),
    )
    .with_status(true)
    .with_scale(Some(paths.clone()));
    Fixture {
        _dir: dir,
        objects: Store::new(storage.clone(), Arc::new(base.clone())),
        status: Store::new(
            storage.clone(),
            Arc::new(CustomStatusStrategy::new(base.clone())),
        ),
        scale: Store::new(storage, Arc::new(CustomScaleStrategy::new(base, paths))),
    }
}

async fn create(f: &Fixture, spec: Value) -> Value {
    let object = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
        "metadata": {"name": "x", "namespace": "default"}, "spec": spec});
    f.objects
        .create("default", object, &WriteOptions::default())
        .await
        .unwrap()
        .object
}

/// Writes a status as the status subresource would (the main store keeps it as stored).
async fn set_status(f: &Fixture, status: Value) {
    let key = "/registry/stable.example.com/crontabs/default/x";
    let kv = f.objects.storage().get(key, None).await.unwrap().unwrap();
    let mut stored: Value = serde_json::from_slice(&kv.value).unwrap();
    stored["status"] = status;
    f.objects
        .storage()
        .update(
            key,
            serde_json::to_vec(&stored).unwrap().into(),
            kv.mod_revision,
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn a_scale_is_read_from_the_object() {
    let f = fixture(".spec.replicas");
    let created = create(&f, json!({"replicas": 3})).await;
    set_status(&f, json!({"replicas": 2, "selector": "app=x"})).await;
    let object = f.objects.get("default", "x", None).await.unwrap();
    let scale = f.scale.get("default", "x", None).await.unwrap();
    assert_eq!(
        scale,
        json!({
            "kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {
                "name": "x", "namespace": "default",
                "uid": meta_str(&created, "uid"),
                "resourceVersion": meta_str(&object, "resourceVersion"),
                "creationTimestamp": meta_str(&created, "creationTimestamp"),
            },
            "spec": {"replicas": 3},
            "status": {"replicas": 2, "selector": "app=x"},
        })
    );
}

#[tokio::test]
async fn status_replicas_default_to_zero_and_missing_spec_replicas_are_an_error() {
    let f = fixture(".spec.replicas");
    create(&f, json!({"image": "x"})).await;
    let error = f.scale.get("default", "x", None).await.unwrap_err();
    assert_eq!((error.code, error.reason.as_str()), (500, "InternalError"));
    assert_eq!(
        error.0.message,
        "Internal error occurred: the spec replicas field \".spec.replicas\" does not exist"
    );
    // A patch may still set them: it sees the unset marker, which it must replace.
    let seen = f.scale.get_for_patch("default", "x").await.unwrap();
    assert_eq!(seen["spec"]["replicas"], i64::from(i32::MIN));
    assert_eq!(seen["status"], json!({"replicas": 0}));
    let refused = f
        .scale
        .update("default", "x", seen.clone(), &WriteOptions::default())
        .await
        .unwrap_err();
    assert_eq!(refused.code, 400);
    assert_eq!(
        refused.0.message,
        "the spec replicas field \".spec.replicas\" cannot be empty"
    );
    let mut patched = seen;
    patched["spec"]["replicas"] = json!(2);
    let written = f
        .scale
        .update("default", "x", patched, &WriteOptions::default())
        .await
        .unwrap();
    assert_eq!(written.object["spec"]["replicas"], 2);
    let object = f.objects.get("default", "x", None).await.unwrap();
    assert_eq!(object["spec"], json!({"image": "x", "replicas": 2}));
}

#[tokio::test]
async fn an_update_sets_the_replicas_of_the_object_and_answers_the_scale() {
    let f = fixture(".spec.scaling.count");
    create(&f, json!({"image": "x", "scaling": {"count": 1}})).await;
    let before = f.objects.get("default", "x", None).await.unwrap();
    let body = json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
        "metadata": {"name": "x", "namespace": "default"}, "spec": {"replicas": 5},
        "status": {"replicas": 99}});
    let written = f
        .scale
        .update("default", "x", body, &WriteOptions::default())
        .await
        .unwrap();
    assert_eq!(written.object["kind"], "Scale");
    assert_eq!(written.object["spec"], json!({"replicas": 5}));
    // The Scale's status is not the object's to take.
    assert_eq!(written.object["status"], json!({"replicas": 0}));
    let after = f.objects.get("default", "x", None).await.unwrap();
    assert_eq!(
        after["spec"],
        json!({"image": "x", "scaling": {"count": 5}})
    );
    assert_eq!(after.get("status"), None);
    assert_eq!(after["metadata"]["generation"], 2);
    assert_eq!(
        meta_str(&written.object, "resourceVersion"),
        meta_str(&after, "resourceVersion")
    );
    assert_ne!(
        meta_str(&before, "resourceVersion"),
        meta_str(&after, "resourceVersion")
    );
    // The same replicas again change nothing.
    let again = json!({"metadata": {"name": "x"}, "spec": {"replicas": 5}});
    let unchanged = f
        .scale
        .update("default", "x", again, &WriteOptions::default())
        .await
        .unwrap();
    assert_eq!(
        meta_str(&unchanged.object, "resourceVersion"),
        meta_str(&after, "resourceVersion")
    );
    // Replicas left out of a replacing Scale are 0, as Go decodes them.
    let zero = json!({"metadata": {"name": "x"}, "spec": {}});
    f.scale
        .update("default", "x", zero, &WriteOptions::default())
        .await
        .unwrap();
    let object = f.objects.get("default", "x", None).await.unwrap();
    assert_eq!(object["spec"]["scaling"]["count"], 0);
}

#[tokio::test]
async fn preconditions_missing_objects_and_bad_replicas_are_refused() {
    let f = fixture(".spec.replicas");
    let created = create(&f, json!({"replicas": 1})).await;
    let stale = meta_str(&created, "resourceVersion").to_owned();
    f.scale
        .update(
            "default",
            "x",
            json!({"metadata": {"name": "x"}, "spec": {"replicas": 2}}),
            &WriteOptions::default(),
        )
        .await
        .unwrap();
    let conflict = f
        .scale
        .update(
            "default",
            "x",
            json!({"metadata": {"name": "x", "resourceVersion": stale}, "spec": {"replicas": 3}}),
            &WriteOptions::default(),
        )
        .await
        .unwrap_err();
    assert_eq!((conflict.code, conflict.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        conflict.0.message,
        "Operation cannot be fulfilled on crontabs.stable.example.com \"x\": the object has been modified; please apply your changes to the latest version and try again"
    );

    let missing = f
        .scale
        .update(
            "default",
            "y",
            json!({"metadata": {"name": "y"}, "spec": {"replicas": 3}}),
            &WriteOptions::default(),
        )
        .await
        .unwrap_err();
    assert_eq!((missing.code, missing.reason.as_str()), (404, "NotFound"));
    let missing = f.scale.get("default", "y", None).await.unwrap_err();
    assert_eq!(missing.code, 404);

    let negative = f
        .scale
        .update(
            "default",
            "x",
            json!({"metadata": {"name": "x"}, "spec": {"replicas": -1}}),
            &WriteOptions::default(),
        )
        .await
        .unwrap_err();
    assert_eq!((negative.code, negative.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        negative.0.message,
        "CronTab.stable.example.com \"x\" is invalid: .spec.replicas: Invalid value: -1: should be a non-negative integer"
    );
    let not_a_number = f
        .scale
        .update(
            "default",
            "x",
            json!({"metadata": {"name": "x"}, "spec": {"replicas": "3"}}),
            &WriteOptions::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(not_a_number.code, 400);
    assert!(
        not_a_number
            .0
            .message
            .starts_with("Scale in version \"v1\" cannot be handled as a Scale"),
        "{}",
        not_a_number.0.message
    );
    // The object's own writes are held to the same rule.
    let mut object = f.objects.get("default", "x", None).await.unwrap();
    object["spec"]["replicas"] = json!(-2);
    let refused = f
        .objects
        .update("default", "x", object, &WriteOptions::default())
        .await
        .unwrap_err();
    assert_eq!(refused.code, 422);
    let object = f.objects.get("default", "x", None).await.unwrap();
    assert_eq!(object["spec"]["replicas"], 2);
}

#[tokio::test]
async fn status_writes_keep_the_scale_status_readable() {
    let f = fixture(".spec.replicas");
    create(&f, json!({"replicas": 1})).await;
    let mut object = f.objects.get("default", "x", None).await.unwrap();
    object["status"] = json!({"replicas": -1, "selector": ["app=x"]});
    let refused = f
        .status
        .update("default", "x", object.clone(), &WriteOptions::default())
        .await
        .unwrap_err();
    assert_eq!(refused.code, 422);
    let causes: Vec<String> = refused
        .details
        .as_ref()
        .unwrap()
        .causes
        .iter()
        .map(|c| c.field.clone())
        .collect();
    assert_eq!(causes, [".status.replicas", ".status.selector"]);
    object["status"] = json!({"replicas": 3, "selector": "app=x"});
    f.status
        .update("default", "x", object, &WriteOptions::default())
        .await
        .unwrap();
    let scale = f.scale.get("default", "x", None).await.unwrap();
    assert_eq!(scale["status"], json!({"replicas": 3, "selector": "app=x"}));
}
