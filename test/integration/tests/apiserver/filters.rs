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
use genplane_registry::{CatalogStrategy, Strategy};
use genplane_test_support::eventually_async;
use hyper::Method;
use serde_json::{Value, json};
use support::{call, post_json, start_configured};
use tokio::io::AsyncWriteExt;

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
    let server = start_configured(|completed| {
        let storage = completed.storage_for(&PANICS).unwrap();
        let strategy = Arc::new(Panicky(CatalogStrategy::new(&PANICS)));
        completed
            .resources
            .push(Resource::builtin_with(&PANICS, storage, strategy));
    })
    .await;
    let path = "/apis/test.genplane.io/v1/namespaces/default/panics";
    let create = |name: &str| json!({"apiVersion": "test.genplane.io/v1", "kind": "Panic", "metadata": {"name": name}});
    post_json(&server, path, &create("fine")).await.expect(201);
    let boom = post_json(&server, path, &create("boom")).await;
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
    // The panicked request's record in the audit log is complete: a Panic event with the 500,
    // naming the admin who sent it.
    let of_boom = |events: &[Value]| -> Vec<Value> {
        events
            .iter()
            .filter(|e| e["auditID"] == audit_id.as_str())
            .cloned()
            .collect()
    };
    let events = of_boom(
        &server
            .audit_until(|events| of_boom(events).len() == 2)
            .await,
    );
    let stages: Vec<&str> = events
        .iter()
        .map(|e| e["stage"].as_str().unwrap())
        .collect();
    assert_eq!(stages, ["RequestReceived", "Panic"], "{events:#?}");
    assert_eq!(events[1]["responseStatus"]["code"], 500, "{events:#?}");
    assert_eq!(
        events[1]["user"]["username"], "genplane-admin",
        "{events:#?}"
    );
}

/// Every request the harness makes is authenticated, authorized and audited as the real
/// server does it: the admin's client certificate names the user, and the audit log has a
/// Metadata-level line for the request with the verb, the resource and the answer's code.
#[tokio::test]
async fn requests_are_authenticated_authorized_and_audited() {
    let server = support::start().await;
    let created = post_json(
        &server,
        "/api/v1/namespaces/default/configmaps",
        &json!({"metadata": {"name": "audited"}}),
    )
    .await
    .expect(201);
    let audit_id = created.header("audit-id").to_owned();
    let events = server
        .audit_until(|events| {
            events
                .iter()
                .any(|e| e["auditID"] == audit_id.as_str() && e["stage"] == "ResponseComplete")
        })
        .await;
    let event = events
        .iter()
        .find(|e| e["auditID"] == audit_id.as_str() && e["stage"] == "ResponseComplete")
        .unwrap();
    assert_eq!(event["level"], "Metadata", "{event:#}");
    assert_eq!(event["verb"], "create", "{event:#}");
    assert_eq!(event["user"]["username"], "genplane-admin", "{event:#}");
    assert!(
        event["user"]["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g == "system:masters"),
        "{event:#}"
    );
    assert_eq!(event["objectRef"]["resource"], "configmaps", "{event:#}");
    assert_eq!(event["objectRef"]["name"], "audited", "{event:#}");
    assert_eq!(event["responseStatus"]["code"], 201, "{event:#}");
    assert_eq!(
        event["annotations"]["authorization.k8s.io/decision"], "allow",
        "{event:#}"
    );
    // Metadata level: no request or response body.
    assert!(event.get("requestObject").is_none(), "{event:#}");

    // Without a client certificate the request is anonymous, and RBAC refuses it.
    let mut anonymous = server.anonymous_tls(b"http/1.1").await;
    anonymous
        .write_all(b"GET /api/v1/namespaces/default/configmaps HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let answer = String::from_utf8(support::read_to_end(&mut anonymous).await.unwrap()).unwrap();
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(answer.contains("system:anonymous"), "{answer}");
}

#[tokio::test]
async fn the_limits_and_the_timeout_cover_paths_that_are_not_resources() {
    let server = start_configured(|completed| {
        completed.config.limits = Limits {
            max_read_only: 0,
            max_mutating: 1,
            request_timeout: Duration::from_secs(60),
            priority_and_fairness: false,
        };
    })
    .await;
    // A create whose body never finishes holds the one mutating slot.
    let mut held = server.tls(b"http/1.1").await;
    held.write_all(b"POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{")
        .await
        .unwrap();
    // A POST to a path that is not a resource is mutating, as upstream counts it: 429.
    let refused = eventually_async("a POST to /version over the limit refused", || async {
        let answer = call(&server, Method::POST, "/version", &[], Some(b"{}".to_vec())).await;
        if answer.status == 429 {
            return Some(answer);
        }
        // The held create has not reached the limit yet.
        assert_eq!(
            answer.status,
            404,
            "{}",
            String::from_utf8_lossy(&answer.body)
        );
        None
    })
    .await;
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
    drop(held);
}

/// Compression runs inside panic recovery: a panic while an answer is compressed is a 500
/// with the request's audit ID, and the server keeps serving. The panic is a real one: a
/// server whose feature registry lacks `APIResponseCompression` (a program that assembles its
/// own registry and forgets it) asserts on the unknown feature in a debug build, when the first
/// answer large enough to compress goes to a client that accepts gzip. A release build treats
/// the unknown feature as off and answers uncompressed.
#[tokio::test]
async fn a_panic_while_compressing_is_answered_500_with_the_audit_id() {
    use genplane_component_base::featuregate::{
        FeatureGateSettings, Registry as FeatureRegistry, UseIdentity, Version,
    };
    use genplane_component_base::health::Health;
    use genplane_component_base::http::OpsHandler;
    use genplane_component_base::metrics::Registry as MetricsRegistry;
    use genplane_component_base::shutdown::Shutdown;
    use genplane_component_base::version::BuildInfo;
    use http_body_util::{BodyExt as _, Empty};
    use hyper_util::rt::TokioIo;

    // /metrics answers 200 KiB: past the compression threshold.
    let metrics = MetricsRegistry::new();
    metrics.register(
        "large_help",
        &"x".repeat(200 * 1024),
        prometheus_client::metrics::counter::Counter::<u64>::default(),
    );
    let shutdown = Shutdown::new();
    let gate = FeatureRegistry::new()
        .resolve(
            &FeatureGateSettings::default(),
            Version::new(1, 33),
            UseIdentity::new("apiserver", "test"),
        )
        .unwrap();
    let server = Arc::new(
        genplane_apiserver::ApiServer::<genplane_storage_sqlite::SqliteStore>::new(
            Vec::new(),
            &BuildInfo::new("0.0.0", None),
            "127.0.0.1",
            Some(OpsHandler::new(Health::new(&shutdown), metrics)),
        )
        .with_feature_gate(gate),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let serving = tokio::spawn(genplane_component_base::http::serve(
        listener,
        move |request| {
            let server = server.clone();
            async move { server.handle(request).await }
        },
        shutdown.clone(),
        Duration::from_secs(1),
    ));
    let get = |gzip: bool| async move {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (mut send, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
            .await
            .unwrap();
        tokio::spawn(connection);
        let mut request = hyper::Request::get("/metrics")
            .header("host", addr.to_string())
            .header("audit-id", "compressed-answer");
        if gzip {
            request = request.header("accept-encoding", "gzip");
        }
        let response = send
            .send_request(request.body(Empty::<bytes::Bytes>::new()).unwrap())
            .await
            .unwrap();
        let (parts, body) = response.into_parts();
        (parts, body.collect().await.unwrap().to_bytes())
    };

    let (parts, body) = get(true).await;
    assert_eq!(parts.headers["audit-id"], "compressed-answer");
    if cfg!(debug_assertions) {
        assert_eq!(parts.status, 500, "{}", String::from_utf8_lossy(&body));
        let status: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            (status["kind"].as_str(), status["reason"].as_str()),
            (Some("Status"), Some("InternalError"))
        );
    } else {
        assert_eq!(parts.status, 200);
        assert!(!parts.headers.contains_key("content-encoding"));
    }
    // The server keeps serving: an answer that is not compressed is whole.
    let (parts, body) = get(false).await;
    assert_eq!(parts.status, 200);
    assert!(body.len() > 200 * 1024);
    shutdown.trigger();
    serving.await.unwrap().unwrap();
}
