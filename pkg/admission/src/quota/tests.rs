use std::sync::atomic::{AtomicUsize, Ordering};

use genplane_apimachinery::schema::{GroupVersionKind, GroupVersionResource};
use serde_json::json;

use super::*;
use crate::Request;

/// Quotas in memory, written as storage writes them: a resourceVersion precondition, a new
/// version per write. `stale` answers non-fresh lists with what was stored before the last
/// write (a cache behind); `interfere` makes the next writes lose to another writer.
#[derive(Debug, Default)]
struct Stored {
    quotas: Mutex<BTreeMap<String, Value>>,
    before_last_write: Mutex<Option<Vec<Value>>>,
    stale: bool,
    interfere: AtomicUsize,
    writes: AtomicUsize,
    fresh_lists: AtomicUsize,
}

impl Stored {
    fn with(quotas: &[Value]) -> Self {
        let stored = Stored::default();
        for (i, quota) in quotas.iter().enumerate() {
            let mut quota = quota.clone();
            quota["metadata"]["resourceVersion"] = json!((i + 1).to_string());
            stored.quotas.lock().unwrap().insert(name_of(&quota), quota);
        }
        stored
    }

    fn used(&self, name: &str) -> Value {
        self.quotas.lock().unwrap()[name]["status"]["used"].clone()
    }

    fn bump(quota: &mut Value) {
        let next = resource_version(quota) + 100;
        quota["metadata"]["resourceVersion"] = json!(next.to_string());
    }
}

impl Quotas for Stored {
    fn list<'a>(
        &'a self,
        _namespace: &'a str,
        fresh: bool,
    ) -> BoxFuture<'a, Result<Vec<Value>, ApiError>> {
        Box::pin(async move {
            if fresh {
                self.fresh_lists.fetch_add(1, Ordering::SeqCst);
            } else if self.stale
                && let Some(old) = self.before_last_write.lock().unwrap().clone()
            {
                return Ok(old);
            }
            Ok(self.quotas.lock().unwrap().values().cloned().collect())
        })
    }

    fn update_status<'a>(&'a self, quota: Value) -> BoxFuture<'a, Result<Value, ApiError>> {
        Box::pin(async move {
            tokio::task::yield_now().await;
            let mut quotas = self.quotas.lock().unwrap();
            let name = name_of(&quota);
            let stored = quotas.get_mut(&name).unwrap();
            if self
                .interfere
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
            {
                Self::bump(stored);
            }
            if resource_version(stored) != resource_version(&quota) {
                return Err(Status::conflict(
                    &GroupResource::new("", "resourcequotas"),
                    &name,
                    "the object has been modified",
                )
                .into());
            }
            *self.before_last_write.lock().unwrap() = Some(quotas.values().cloned().collect());
            let stored = quotas.get_mut(&name).unwrap();
            stored["status"] = quota["status"].clone();
            Self::bump(stored);
            self.writes.fetch_add(1, Ordering::SeqCst);
            Ok(stored.clone())
        })
    }
}

fn quota(name: &str, hard: Value, used: Value) -> Value {
    json!({"metadata": {"name": name, "namespace": "ns"}, "spec": {"hard": hard},
        "status": {"hard": hard, "used": used}})
}

fn request(group: &str, resource: &str) -> Request {
    Request {
        kind: GroupVersionKind::new(group, "v1", "Thing"),
        resource: GroupVersionResource::new(group, "v1", resource),
        ..Request::default()
    }
}

async fn create(plugin: &ResourceQuota, request: &Request, name: &str) -> Result<(), ApiError> {
    let object = json!({"metadata": {"name": name, "namespace": "ns"}});
    let attributes = Attributes {
        request,
        operation: Operation::Create,
        namespace: "ns",
        name,
        old_object: None,
    };
    plugin.validate(attributes, Some(&object)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_creates_are_admitted_up_to_the_limit() {
    for stale in [false, true] {
        let stored = Arc::new(Stored {
            stale,
            ..Stored::with(&[quota(
                "q",
                json!({"configmaps": "3"}),
                json!({"configmaps": "0"}),
            )])
        });
        let plugin = ResourceQuota::new(stored.clone(), Arc::default());
        let request = Arc::new(request("", "configmaps"));
        let creates = (0..10).map(|i| {
            let (plugin, request) = (plugin.clone(), request.clone());
            tokio::spawn(async move { create(&plugin, &request, &format!("c{i}")).await })
        });
        let verdicts: Vec<Result<(), ApiError>> = futures::future::join_all(creates)
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        let admitted = verdicts.iter().filter(|v| v.is_ok()).count();
        assert_eq!(admitted, 3, "stale={stale}: {verdicts:?}");
        assert_eq!(stored.used("q"), json!({"configmaps": "3"}));
        for refusal in verdicts.iter().filter_map(|v| v.as_ref().err()) {
            assert_eq!(refusal.code, 403);
            assert!(
                refusal.message.ends_with(
                    "is forbidden: exceeded quota: q, requested: configmaps=1, used: configmaps=3, limited: configmaps=3"
                ),
                "{}",
                refusal.message
            );
        }
        // Batches: fewer writes than creates admitted is possible, more is not.
        assert!(stored.writes.load(Ordering::SeqCst) <= 3);
    }
}

#[tokio::test]
async fn refusals_name_the_quota_and_resources_as_upstreams() {
    let stored = Arc::new(Stored::with(&[
        quota(
            "objects",
            json!({"count/configmaps": "1", "configmaps": "5", "cpu": "1"}),
            json!({"count/configmaps": "1", "configmaps": "1", "cpu": "0"}),
        ),
        quota(
            "widgets",
            json!({"count/widgets.example.com": "2"}),
            json!({}),
        ),
        quota(
            "scoped",
            json!({"count/secrets": "0"}),
            json!({"count/secrets": "0"}),
        ),
    ]));
    stored.quotas.lock().unwrap().get_mut("scoped").unwrap()["spec"]["scopes"] =
        json!(["Terminating"]);
    let plugin = ResourceQuota::new(stored.clone(), Arc::default());
    let refused = create(&plugin, &request("", "configmaps"), "c")
        .await
        .unwrap_err();
    assert_eq!(
        refused.message,
        "configmaps \"c\" is forbidden: exceeded quota: objects, requested: count/configmaps=1, used: count/configmaps=1, limited: count/configmaps=1"
    );
    assert_eq!(refused.reason, "Forbidden");
    // Nothing charged on a refusal.
    assert_eq!(
        stored.used("objects"),
        json!({"count/configmaps": "1", "configmaps": "1", "cpu": "0"})
    );
    let unknown = create(&plugin, &request("example.com", "widgets"), "w")
        .await
        .unwrap_err();
    assert_eq!(
        unknown.message,
        "widgets.example.com \"w\" is forbidden: status unknown for quota: widgets, resources: count/widgets.example.com"
    );
    // A scoped quota does not match; a resource no quota limits is not charged.
    create(&plugin, &request("", "secrets"), "s").await.unwrap();
    create(&plugin, &request("coordination.k8s.io", "leases"), "l")
        .await
        .unwrap();
    assert_eq!(stored.writes.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn dry_runs_updates_and_subresources_are_not_charged() {
    let stored = Arc::new(Stored::with(&[quota(
        "q",
        json!({"count/secrets": "1"}),
        json!({"count/secrets": "0"}),
    )]));
    let plugin = ResourceQuota::new(stored.clone(), Arc::default());
    let mut dry = request("", "secrets");
    dry.dry_run = true;
    create(&plugin, &dry, "a").await.unwrap();
    create(&plugin, &dry, "b").await.unwrap();
    let secrets = request("", "secrets");
    let object = json!({"metadata": {"name": "x"}});
    for operation in [Operation::Update, Operation::Delete] {
        let attributes = Attributes {
            request: &secrets,
            operation,
            namespace: "ns",
            name: "x",
            old_object: Some(&object),
        };
        plugin.validate(attributes, Some(&object)).await.unwrap();
    }
    let mut status = request("", "secrets");
    status.subresource = "status".into();
    create(&plugin, &status, "y").await.unwrap();
    assert_eq!(stored.writes.load(Ordering::SeqCst), 0);
    create(&plugin, &secrets, "real").await.unwrap();
    assert_eq!(stored.used("q"), json!({"count/secrets": "1"}));
    // A generated name is named by its prefix.
    let attributes = Attributes {
        request: &secrets,
        operation: Operation::Create,
        namespace: "ns",
        name: "",
        old_object: None,
    };
    let refused = plugin
        .validate(
            attributes,
            Some(&json!({"metadata": {"generateName": "gen-"}})),
        )
        .await
        .unwrap_err();
    assert!(
        refused.message.starts_with("secrets \"gen-\" is forbidden"),
        "{}",
        refused.message
    );
}

#[tokio::test]
async fn conflicting_writes_are_checked_again_on_a_fresh_read() {
    let stored = Arc::new(Stored::with(&[quota(
        "q",
        json!({"configmaps": "2"}),
        json!({"configmaps": "0"}),
    )]));
    let plugin = ResourceQuota::new(stored.clone(), Arc::default());
    let configmaps = request("", "configmaps");
    stored.interfere.store(2, Ordering::SeqCst);
    create(&plugin, &configmaps, "a").await.unwrap();
    assert_eq!(stored.fresh_lists.load(Ordering::SeqCst), 2);
    assert_eq!(stored.used("q"), json!({"configmaps": "1"}));
    // Past upstream's three retries, the conflict is the answer.
    stored.interfere.store(4, Ordering::SeqCst);
    let refused = create(&plugin, &configmaps, "b").await.unwrap_err();
    assert_eq!(refused.code, 409, "{}", refused.message);
    assert_eq!(stored.used("q"), json!({"configmaps": "1"}));
}
