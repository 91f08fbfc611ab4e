//! The filter chain as a client sees it: a handler that panics is answered 500 with a `Status`
//! (the server keeps serving, the audit log has the completed record), and the in-flight
//! limits and the request timeout cover paths that are not resources.

use crate::support;

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use genplane_api::catalog::ResourceInfo;
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::schema::{GroupResource, GroupVersionKind};
use genplane_apimachinery::validation::field::ErrorList;
use genplane_apiserver::{Limits, Resource};
use genplane_audit::{Auditor, MemorySink, Policy, Stage};
use genplane_controlplane::{EncryptionConfig, StorageConfig};
use genplane_registry::{CatalogStrategy, Strategy};
use hyper::Method;
use serde_json::{Value, json};
use support::{call, start_configured};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A resource of the test's own, `panics.test.genplane.io`, shaped as a ConfigMap.
static PANICS: LazyLock<ResourceInfo> = LazyLock::new(|| {
    let configmaps = *genplane_api::catalog::find("", "v1", "configmaps").unwrap();
    ResourceInfo {
        group: "test.genplane.io",
        kind: "Panic",
        list_kind: "PanicList",
        resource: "panics",
        singular: "panic",
        short_names: &[],
        storage_prefix: "test.genplane.io/panics",
        storage_api_version: "test.genplane.io/v1",
        ..configmaps
    }
});

/// Its strategy: a ConfigMap's, except that validating an object named `boom` panics.
struct Panicky(CatalogStrategy);

impl Strategy for Panicky {
    fn group_resource(&self) -> GroupResource {
        self.0.group_resource()
    }
    fn kind(&self) -> GroupVersionKind {
        self.0.kind()
    }
    fn namespaced(&self) -> bool {
        self.0.namespaced()
    }
    fn key_prefix(&self) -> String {
        self.0.key_prefix()
    }
    fn validate(&self, object: &Value) -> Result<ErrorList, ApiError> {
        if object["metadata"]["name"] == "boom" {
            panic!("validating {object}");
        }
        self.0.validate(object)
    }
    fn validate_update(&self, new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
        self.0.validate_update(new, old)
    }
}

#[tokio::test]
async fn a_handler_that_panics_is_answered_500_and_audited() {
    let dir = tempfile::tempdir().unwrap();
    let backend = genplane_controlplane::open_storage(&StorageConfig::Sqlite {
        path: dir.path().join("db"),
    })
    .await
    .unwrap();
    let storage = genplane_controlplane::custom_storage(backend, EncryptionConfig::default())(
        "/registry/test.genplane.io/panics/",
        "test.genplane.io",
        "panics",
    )
    .unwrap();
    let sink = Arc::new(MemorySink::new());
    let policy = Policy::parse_strict(
        b"apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n",
    )
    .unwrap();
    let auditor = Auditor::new(policy, sink.clone());
    let server = start_configured(move |s| {
        let strategy = Arc::new(Panicky(CatalogStrategy::new(&PANICS)));
        let panics = Resource::builtin_with(&PANICS, storage, strategy);
        let s = s.with_audit(auditor);
        s.set_custom(vec![panics], Vec::new());
        s
    })
    .await;
    let path = "/apis/test.genplane.io/v1/namespaces/default/panics";
    let create = |name: &str| {
        serde_json::to_vec(&json!({"apiVersion": "test.genplane.io/v1", "kind": "Panic", "metadata": {"name": name}})).unwrap()
    };
    let fine = call(
        &server,
        Method::POST,
        path,
        &[("content-type", "application/json")],
        Some(create("fine")),
    )
    .await;
    assert_eq!(fine.status, 201, "{}", String::from_utf8_lossy(&fine.body));

    let boom = call(
        &server,
        Method::POST,
        path,
        &[("content-type", "application/json")],
        Some(create("boom")),
    )
    .await;
    assert_eq!(boom.status, 500);
    let status = boom.json();
    assert_eq!(
        (status["kind"].as_str(), status["reason"].as_str()),
        (Some("Status"), Some("InternalError"))
    );
    let audit_id = boom.header("audit-id").to_owned();
    assert!(!audit_id.is_empty());

    // The server keeps serving.
    let after = call(&server, Method::GET, &format!("{path}/fine"), &[], None).await;
    assert_eq!(after.status, 200);
    // The panicked request's record is complete: a Panic event with the 500.
    let events: Vec<_> = sink
        .events()
        .into_iter()
        .filter(|e| e.audit_id == audit_id)
        .collect();
    let stages: Vec<Stage> = events.iter().map(|e| e.stage).collect();
    assert_eq!(stages, [Stage::RequestReceived, Stage::Panic], "{events:?}");
    assert_eq!(
        events[1].response_status.as_ref().map(|s| s.code),
        Some(500),
        "{events:?}"
    );
}

#[tokio::test]
async fn the_limits_and_the_timeout_cover_paths_that_are_not_resources() {
    let server = start_configured(|s| {
        s.with_limits(Limits {
            max_read_only: 0,
            max_mutating: 1,
            request_timeout: Duration::from_secs(60),
        })
    })
    .await;
    // A create whose body never finishes holds the one mutating slot.
    let mut held = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    held.write_all(b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{")
        .await
        .unwrap();
    // A POST to a path that is not a resource is mutating, as upstream counts it: 429.
    let mut refused = None;
    for _ in 0..200 {
        let answer = call(&server, Method::POST, "/version", &[], Some(b"{}".to_vec())).await;
        if answer.status == 429 {
            refused = Some(answer);
            break;
        }
        // The held create has not reached the limit yet.
        assert_eq!(
            answer.status,
            404,
            "{}",
            String::from_utf8_lossy(&answer.body)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let refused = refused.expect("a POST to /version over the limit was never refused");
    assert_eq!(refused.header("retry-after"), "1");
    assert_eq!(refused.json()["reason"], "TooManyRequests");
    // Reads are not limited here (0), and the timeout parameter is checked on them too.
    let answer = call(&server, Method::GET, "/version?timeout=soon", &[], None).await;
    assert_eq!(
        answer.status,
        400,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    assert_eq!(
        answer.json()["message"],
        "invalid timeout specified in the request URL"
    );
    drop(held.shutdown().await);
    let mut rest = Vec::new();
    let _ = held.read_to_end(&mut rest).await;
}
