//! Regression tests of what adversarial testing found (issue #21): routes that ignored a
//! resource's scope, writes that changed an object's type, creates that skipped
//! NamespaceLifecycle, updates that did not create where upstream's strategies do, and
//! malformed requests answered as if they were fine.

use crate::support;

use genplane_storage::Storage;
use hyper::Method;
use serde_json::{Value, json};
use support::{Answer, Server, call};

on_both_backends!(writes_never_change_an_objects_type);

async fn send(server: &Server, method: Method, path: &str, media: &str, body: &Value) -> Answer {
    call(
        server,
        method,
        path,
        &[("content-type", media), ("accept", "application/json")],
        Some(serde_json::to_vec(body).unwrap()),
    )
    .await
}

async fn get(server: &Server, path: &str) -> Answer {
    call(
        server,
        Method::GET,
        path,
        &[("accept", "application/json")],
        None,
    )
    .await
}

/// The `(reason, field)` of each cause of an answer.
fn causes(answer: &Answer) -> Vec<(String, String)> {
    answer.json()["details"]["causes"]
        .as_array()
        .map(|causes| {
            causes
                .iter()
                .map(|c| {
                    (
                        c["reason"].as_str().unwrap_or("").to_owned(),
                        c["field"].as_str().unwrap_or("").to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn cluster_scoped_resources_do_not_exist_under_a_namespace() {
    let server = support::start().await;
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "evil"}});
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "evil"}});
    let label = json!({"metadata": {"labels": {"pwned": "yes"}}});
    let mut unexpected = Vec::new();
    for (method, path, body) in [
        (Method::GET, "/api/v1/namespaces/default/namespaces", None),
        (
            Method::GET,
            "/api/v1/namespaces/default/namespaces?watch=true&timeoutSeconds=1",
            None,
        ),
        (
            Method::POST,
            "/api/v1/namespaces/default/namespaces",
            Some(&namespace),
        ),
        (
            Method::GET,
            "/api/v1/namespaces/default/namespaces/kube-system",
            None,
        ),
        (
            Method::PATCH,
            "/api/v1/namespaces/default/namespaces/kube-system",
            Some(&label),
        ),
        (
            Method::PATCH,
            "/api/v1/namespaces/default/namespaces/kube-system/status",
            Some(&label),
        ),
        (
            Method::PUT,
            "/api/v1/namespaces/default/namespaces/kube-system/finalize",
            Some(&namespace),
        ),
        (
            Method::DELETE,
            "/api/v1/namespaces/default/namespaces/kube-public",
            None,
        ),
        (
            Method::DELETE,
            "/api/v1/namespaces/default/namespaces",
            None,
        ),
        (
            Method::GET,
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/clusterroles",
            None,
        ),
        (
            Method::POST,
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/clusterroles",
            Some(&role),
        ),
        (
            Method::PATCH,
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/clusterroles/admin",
            Some(&label),
        ),
        (
            Method::GET,
            "/apis/apiextensions.k8s.io/v1/namespaces/default/customresourcedefinitions",
            None,
        ),
        (
            Method::POST,
            "/apis/authorization.k8s.io/v1/namespaces/default/subjectaccessreviews",
            Some(&json!({})),
        ),
        (
            Method::POST,
            "/apis/authentication.k8s.io/v1/namespaces/default/tokenreviews",
            Some(&json!({})),
        ),
        // And a namespaced object has no path outside its namespace.
        (Method::GET, "/api/v1/configmaps/kube-root-ca.crt", None),
        (Method::POST, "/api/v1/configmaps", Some(&json!({}))),
        (
            Method::POST,
            "/api/v1/serviceaccounts/default/token",
            Some(&json!({})),
        ),
        (
            Method::POST,
            "/apis/authorization.k8s.io/v1/localsubjectaccessreviews",
            Some(&json!({})),
        ),
    ] {
        let answer = match body {
            Some(body) => {
                let media = if method == Method::PATCH {
                    "application/merge-patch+json"
                } else {
                    "application/json"
                };
                send(&server, method.clone(), path, media, body).await
            }
            None => {
                call(
                    &server,
                    method.clone(),
                    path,
                    &[("accept", "application/json")],
                    None,
                )
                .await
            }
        };
        if answer.status != 404 || answer.json()["reason"] != "NotFound" {
            unexpected.push(format!(
                "{method} {path}: {} {}",
                answer.status,
                String::from_utf8_lossy(&answer.body)
            ));
        }
    }
    assert!(unexpected.is_empty(), "{}", unexpected.join("\n"));
    // Nothing changed.
    let namespaces = get(&server, "/api/v1/namespaces").await.json();
    let names: Vec<&str> = namespaces["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["default", "kube-node-lease", "kube-public", "kube-system"]
    );
    let system = get(&server, "/api/v1/namespaces/kube-system").await.json();
    assert_eq!(
        system["metadata"]
            .get("labels")
            .and_then(|l| l.get("pwned")),
        None
    );
    // The namespace itself and its subresources are where they always were.
    assert_eq!(get(&server, "/api/v1/namespaces/default").await.status, 200);
    assert_eq!(
        get(&server, "/api/v1/namespaces/default/status")
            .await
            .status,
        200
    );
    assert_eq!(get(&server, "/api/v1/configmaps").await.status, 200);
}

/// No patch type, apply, update or subresource write stores an object whose `kind` or
/// `apiVersion` is not its resource's: the patched ones are refused (422 naming the field),
/// the stored bytes keep the resource's type, and data stored with another type (by an
/// earlier version) reads as its resource.
async fn writes_never_change_an_objects_type(server: Server) {
    let created = send(
        &server,
        Method::POST,
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"k": "v"}}),
    )
    .await;
    assert_eq!(
        created.status,
        201,
        "{}",
        String::from_utf8_lossy(&created.body)
    );
    let path = "/api/v1/namespaces/default/configmaps/cm";
    for (media, patch, field) in [
        (
            "application/merge-patch+json",
            json!({"kind": "Secret"}),
            "kind",
        ),
        (
            "application/merge-patch+json",
            json!({"apiVersion": "v2"}),
            "apiVersion",
        ),
        (
            "application/strategic-merge-patch+json",
            json!({"kind": "Secret", "type": "Opaque"}),
            "kind",
        ),
        (
            "application/json-patch+json",
            json!([{"op": "replace", "path": "/kind", "value": "Secret"}]),
            "kind",
        ),
        (
            "application/json-patch+json",
            json!([{"op": "replace", "path": "/apiVersion", "value": "apps/v1"}]),
            "apiVersion",
        ),
    ] {
        let answer = send(&server, Method::PATCH, path, media, &patch).await;
        assert_eq!(
            (answer.status, causes(&answer)),
            (
                422,
                vec![("FieldValueInvalid".to_owned(), field.to_owned())]
            ),
            "{media} {patch}: {}",
            String::from_utf8_lossy(&answer.body)
        );
    }
    // One of the wrong type does not decode (400, as upstream).
    let typed = send(
        &server,
        Method::PATCH,
        path,
        "application/json-patch+json",
        &json!([{"op": "replace", "path": "/kind", "value": 7}]),
    )
    .await;
    assert_eq!(
        typed.status,
        400,
        "{}",
        String::from_utf8_lossy(&typed.body)
    );
    // A patch that removes them gets them back.
    let removed = send(
        &server,
        Method::PATCH,
        path,
        "application/json-patch+json",
        &json!([{"op": "remove", "path": "/kind"}, {"op": "remove", "path": "/apiVersion"}, {"op": "add", "path": "/data/x", "value": "y"}]),
    )
    .await;
    assert_eq!(
        removed.status,
        200,
        "{}",
        String::from_utf8_lossy(&removed.body)
    );
    assert_eq!(
        (
            removed.json()["kind"].as_str(),
            removed.json()["apiVersion"].as_str()
        ),
        (Some("ConfigMap"), Some("v1"))
    );
    // A status subresource write is held to the same rule.
    let status = send(
        &server,
        Method::PATCH,
        "/api/v1/namespaces/default/status",
        "application/merge-patch+json",
        &json!({"kind": "ConfigMap"}),
    )
    .await;
    assert_eq!(
        status.status,
        422,
        "{}",
        String::from_utf8_lossy(&status.body)
    );
    // What is stored is a ConfigMap.
    let stored = server
        .storage
        .get("/registry/configmaps/default/cm", None)
        .await
        .unwrap()
        .unwrap();
    let stored: Value = serde_json::from_slice(&stored.value).unwrap();
    assert_eq!(
        (stored["kind"].as_str(), stored["apiVersion"].as_str()),
        (Some("ConfigMap"), Some("v1"))
    );
    assert_eq!(stored["data"], json!({"k": "v", "x": "y"}));

    // A ConfigMap stored as a Secret (before writes were checked) reads as a ConfigMap, alone
    // and in a list.
    server
        .storage
        .create(
            "/registry/configmaps/default/corrupt",
            serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "corrupt", "namespace": "default", "uid": "u1", "creationTimestamp": "2026-01-01T00:00:00Z"}, "data": {"k": "v"}}))
                .unwrap()
                .into(),
        )
        .await
        .unwrap();
    let read = get(&server, "/api/v1/namespaces/default/configmaps/corrupt").await;
    assert_eq!(read.json()["kind"], "ConfigMap");
    let list = get(&server, "/api/v1/namespaces/default/configmaps")
        .await
        .json();
    for item in list["items"].as_array().unwrap() {
        assert_eq!(item["kind"], "ConfigMap", "{item}");
    }
}

#[tokio::test]
async fn every_path_that_creates_respects_namespace_lifecycle() {
    let server = support::start().await;
    let apply = |namespace: &str, name: &str| {
        let path =
            format!("/api/v1/namespaces/{namespace}/serviceaccounts/{name}?fieldManager=test");
        let body =
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}});
        (path, body)
    };
    // Server-side apply into a namespace that does not exist.
    let (path, body) = apply("nowhere", "sa");
    let missing = send(
        &server,
        Method::PATCH,
        &path,
        "application/apply-patch+yaml",
        &body,
    )
    .await;
    assert_eq!(
        (missing.status, missing.json()["message"].as_str()),
        (404, Some("namespaces \"nowhere\" not found")),
    );
    // A PUT that would create (a Lease) into a namespace that does not exist.
    let lease =
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"}});
    let put = send(
        &server,
        Method::PUT,
        "/apis/coordination.k8s.io/v1/namespaces/nowhere/leases/l",
        "application/json",
        &lease,
    )
    .await;
    assert_eq!(put.status, 404, "{}", String::from_utf8_lossy(&put.body));

    // A terminating namespace (its `kubernetes` finalizer holds it: no controller runs here).
    let created = send(
        &server,
        Method::POST,
        "/api/v1/namespaces",
        "application/json",
        &json!({"metadata": {"name": "leaving"}}),
    )
    .await;
    assert_eq!(created.status, 201);
    let deleting = call(
        &server,
        Method::DELETE,
        "/api/v1/namespaces/leaving",
        &[],
        None,
    )
    .await;
    assert_eq!(deleting.json()["status"]["phase"], "Terminating");
    let (path, body) = apply("leaving", "sa");
    for answer in [
        send(
            &server,
            Method::PATCH,
            &path,
            "application/apply-patch+yaml",
            &body,
        )
        .await,
        send(
            &server,
            Method::PUT,
            "/apis/coordination.k8s.io/v1/namespaces/leaving/leases/l",
            "application/json",
            &lease,
        )
        .await,
        send(
            &server,
            Method::PATCH,
            &format!("{path}&dryRun=All"),
            "application/apply-patch+yaml",
            &body,
        )
        .await,
    ] {
        assert_eq!(
            (answer.status, causes(&answer)),
            (
                403,
                vec![(
                    "NamespaceTerminating".to_owned(),
                    "metadata.namespace".to_owned()
                )]
            ),
            "{}",
            String::from_utf8_lossy(&answer.body)
        );
    }
    // Nothing was created; updates of what exists still go through (a namespace's content
    // is finalized by updates).
    assert_eq!(
        get(&server, "/api/v1/namespaces/leaving/serviceaccounts/sa")
            .await
            .status,
        404
    );
    assert_eq!(
        get(
            &server,
            "/apis/coordination.k8s.io/v1/namespaces/leaving/leases/l"
        )
        .await
        .status,
        404
    );
    let (path, body) = apply("default", "sa");
    let fine = send(
        &server,
        Method::PATCH,
        &path,
        "application/apply-patch+yaml",
        &body,
    )
    .await;
    assert_eq!(fine.status, 201, "{}", String::from_utf8_lossy(&fine.body));
}

#[tokio::test]
async fn updates_create_where_upstreams_strategies_allow_it() {
    let server = support::start().await;
    let rbac = "/apis/rbac.authorization.k8s.io/v1";
    let rules = json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]);
    let role_ref =
        |kind: &str| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": "r"});
    let subjects = json!([{"kind": "User", "name": "u", "apiGroup": "rbac.authorization.k8s.io"}]);
    let creates = [
        (
            "/apis/coordination.k8s.io/v1/namespaces/default/leases/l".to_owned(),
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"}, "spec": {"holderIdentity": "me"}}),
        ),
        (
            format!("{rbac}/namespaces/default/roles/r"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r"}, "rules": rules}),
        ),
        (
            format!("{rbac}/namespaces/default/rolebindings/r"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "r"}, "roleRef": role_ref("Role"), "subjects": subjects}),
        ),
        (
            format!("{rbac}/clusterroles/r"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"}, "rules": rules}),
        ),
        (
            format!("{rbac}/clusterrolebindings/r"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "r"}, "roleRef": role_ref("ClusterRole"), "subjects": subjects}),
        ),
        (
            "/api/v1/namespaces/default/events/e".to_owned(),
            json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"}, "involvedObject": {"kind": "ConfigMap", "name": "x", "namespace": "default"}, "reason": "Test", "message": "m"}),
        ),
    ];
    for (path, body) in &creates {
        let answer = send(&server, Method::PUT, path, "application/json", body).await;
        assert_eq!(
            answer.status,
            201,
            "{path}: {}",
            String::from_utf8_lossy(&answer.body)
        );
        assert_eq!(get(&server, path).await.status, 200, "{path}");
        // And again: now an update.
        let again = send(&server, Method::PUT, path, "application/json", body).await;
        assert_eq!(
            again.status,
            200,
            "{path}: {}",
            String::from_utf8_lossy(&again.body)
        );
    }
    // The others are not created by an update, as upstream.
    for (path, body) in [
        (
            "/api/v1/namespaces/default/configmaps/c",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}),
        ),
        (
            "/api/v1/namespaces/default/secrets/s",
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}),
        ),
        (
            "/api/v1/namespaces/default/serviceaccounts/s",
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "s"}}),
        ),
        (
            "/api/v1/namespaces/n",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}),
        ),
    ] {
        let answer = send(&server, Method::PUT, path, "application/json", &body).await;
        assert_eq!(
            answer.status,
            404,
            "{path}: {}",
            String::from_utf8_lossy(&answer.body)
        );
    }
}

#[tokio::test]
async fn a_resource_version_on_a_new_object_is_refused() {
    let server = support::start().await;
    let answer = send(
        &server,
        Method::POST,
        "/api/v1/namespaces/default/configmaps",
        "application/json",
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "resourceVersion": "42"}}),
    )
    .await;
    assert_eq!(
        (answer.status, answer.json()["message"].as_str()),
        (
            400,
            Some("resourceVersion should not be set on objects to be created")
        )
    );
    assert_eq!(
        get(&server, "/api/v1/namespaces/default/configmaps/c")
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn subresource_writes_keep_the_resources_defaults() {
    let server = support::start().await;
    let created = send(
        &server,
        Method::POST,
        "/api/v1/namespaces",
        "application/json",
        &json!({"metadata": {"name": "fin"}}),
    )
    .await;
    assert_eq!(created.status, 201);
    let label = "kubernetes.io/metadata.name";
    assert_eq!(created.json()["metadata"]["labels"][label], "fin");
    for subresource in ["finalize", "status"] {
        let written = send(
            &server,
            Method::PUT,
            &format!("/api/v1/namespaces/fin/{subresource}"),
            "application/json",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fin"}, "spec": {"finalizers": []}}),
        )
        .await;
        assert_eq!(
            written.status,
            200,
            "{}",
            String::from_utf8_lossy(&written.body)
        );
        assert_eq!(
            written.json()["metadata"]["labels"][label],
            "fin",
            "{subresource}"
        );
        let read = get(&server, "/api/v1/namespaces/fin").await.json();
        assert_eq!(read["metadata"]["labels"][label], "fin", "{subresource}");
    }
}

#[tokio::test]
async fn malformed_requests_get_upstreams_answers() {
    let server = support::start().await;
    let configmaps = "/api/v1/namespaces/default/configmaps";
    let body = serde_json::to_vec(&json!({"metadata": {"name": "c"}})).unwrap();
    // A Content-Type that does not parse is 415, whatever it starts with.
    for content_type in [
        ";;;///",
        "application/json;;;",
        "application/json; charset",
        "application/json; a=1; a=2",
    ] {
        let answer = call(
            &server,
            Method::POST,
            configmaps,
            &[("content-type", content_type)],
            Some(body.clone()),
        )
        .await;
        assert_eq!(
            (answer.status, answer.json()["reason"].as_str()),
            (415, Some("UnsupportedMediaType")),
            "{content_type}"
        );
    }
    // Parameters that parse are ignored, as upstream ignores them.
    let fine = call(
        &server,
        Method::POST,
        configmaps,
        &[("content-type", "application/json; charset=utf-8; x=\"y;z\"")],
        Some(body),
    )
    .await;
    assert_eq!(fine.status, 201, "{}", String::from_utf8_lossy(&fine.body));
    // An integer parameter that is not one is 400, for lists and watches.
    for query in [
        "timeoutSeconds=abc",
        "watch=true&timeoutSeconds=abc",
        "limit=x",
    ] {
        let answer = get(&server, &format!("{configmaps}?{query}")).await;
        assert_eq!(
            (answer.status, answer.json()["reason"].as_str()),
            (400, Some("BadRequest")),
            "{query}"
        );
    }
    // A namespace too long for any key: the answer does not show storage keys.
    let long = "n".repeat(5000);
    let answer = get(&server, &format!("/api/v1/namespaces/{long}/configmaps")).await;
    let message = answer.json()["message"].as_str().unwrap().to_owned();
    assert_eq!(answer.status, 400, "{message}");
    assert!(!message.contains("/registry"), "{message}");
}

/// One HTTP/1.1 request over a raw socket, its whole body written before anything is read
/// (as python-requests sends): the status and body of the answer, or the error that lost it.
async fn send_all_then_read(
    server: &Server,
    head: &str,
    body: &[u8],
) -> Result<(u16, String), String> {
    use tokio::io::AsyncWriteExt;
    let mut stream = server.tls(b"http/1.1").await;
    let request = format!(
        "{head}\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    stream
        .write_all(body)
        .await
        .map_err(|e| format!("writing the body: {e}"))?;
    let raw = support::read_to_end(&mut stream)
        .await
        .map_err(|e| format!("reading the answer: {e}"))?;
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .ok_or(format!("no answer: {raw:?}"))?;
    let code = head.split(' ').nth(1).unwrap().parse().unwrap();
    Ok((code, body.to_owned()))
}

#[tokio::test]
async fn clients_read_the_answer_to_a_body_the_server_did_not_read() {
    let server = support::start().await;
    let big = vec![b'x'; 1024 * 1024];
    let huge = vec![b' '; 4 * 1024 * 1024];
    for (head, body, code) in [
        // Refused before the body is read: an unknown media type, a missing resource.
        (
            "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nContent-Type: text/plain",
            &big,
            415,
        ),
        (
            "POST /api/v1/namespaces/default/nothings HTTP/1.1\r\nContent-Type: application/json",
            &big,
            404,
        ),
        // Read up to the limit, then refused.
        (
            "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nContent-Type: application/json",
            &huge,
            413,
        ),
    ] {
        let answer = send_all_then_read(&server, head, body).await;
        let (status, text) = answer.unwrap_or_else(|e| panic!("{head}: {e}"));
        assert_eq!(status, code, "{head}: {text}");
        assert!(text.contains("\"kind\":\"Status\""), "{head}: {text}");
    }
}

#[tokio::test]
async fn http2_clients_get_the_answer_to_a_body_too_large_and_heads_without_bodies() {
    use http_body_util::{BodyExt, Full};
    let server = support::start().await;
    let mut client = server
        .http2(&hyper::client::conn::http2::Builder::new(
            hyper_util::rt::TokioExecutor::new(),
        ))
        .await;
    let request = hyper::Request::post(server.url("/api/v1/namespaces/default/configmaps"))
        .header("content-type", "application/json")
        .body(Full::new(bytes::Bytes::from(vec![b' '; 5 * 1024 * 1024])))
        .unwrap();
    let response = client
        .send_request(request)
        .await
        .expect("the answer, not a reset stream");
    assert_eq!(response.version(), hyper::Version::HTTP_2);
    assert_eq!(response.status(), 413);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert!(String::from_utf8_lossy(&body).contains("RequestEntityTooLarge"));

    // HEAD: the GET's headers, no body.
    let head = hyper::Request::head(server.url("/api/v1/namespaces/default"))
        .body(Full::new(bytes::Bytes::new()))
        .unwrap();
    let response = client.send_request(head).await.unwrap();
    assert_eq!(response.status(), 200);
    let length: usize = response.headers()["content-length"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(length > 0);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert!(body.is_empty(), "{}", String::from_utf8_lossy(&body));
}

/// curl over HTTP/2 (7.88 with nghttp2 1.52 here, as in issue #37) reads the 413 of a body
/// larger than the server takes, as kubectl does: the stream is not reset while curl still
/// uploads (curl 7.88 then reports "Stream error in the HTTP/2 framing layer", exit 92, and
/// shows no answer).
#[tokio::test]
async fn curl_over_http2_reads_the_answer_to_a_body_too_large() {
    let server = support::start().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("4MB.json");
    let big = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"},
        "data": {"k": "x".repeat(4 * 1024 * 1024)}});
    std::fs::write(&file, big.to_string()).unwrap();
    let data = format!("@{}", file.display());
    let url = server.url("/api/v1/namespaces/default/configmaps");
    for protocol in ["--http2", "--http1.1"] {
        let (code, out) = server
            .curl(&[
                protocol,
                "-H",
                "Content-Type: application/json",
                "--data-binary",
                &data,
                "-w",
                "\n%{http_code} %{http_version}",
                &url,
            ])
            .await;
        assert_eq!(code, Some(0), "{protocol}: {out}");
        assert!(
            out.contains("\"reason\":\"RequestEntityTooLarge\""),
            "{protocol}: {out}"
        );
        let version = if protocol == "--http2" { "2" } else { "1.1" };
        assert!(
            out.ends_with(&format!("\n413 {version}")),
            "{protocol}: {out}"
        );
    }
}

/// Request heads as large as Go's servers read (`http.DefaultMaxHeaderBytes`, 1 MiB) are
/// read over both protocols (long label selectors and long header values are real), and
/// larger ones refused; the request target stays within what the `http` crate holds
/// (64 KiB).
#[tokio::test]
async fn request_heads_up_to_go_s_limit_are_read_over_both_protocols() {
    use http_body_util::{BodyExt, Full};
    let server = support::start().await;
    // a label selector of about 40 KiB: 5,000 values (over HTTP/2, beyond hyper's 16 KiB)
    let values: Vec<String> = (0..5000).map(|i| format!("v{i}")).collect();
    let selector = format!("app in ({})", values.join(","));
    let url = server.url("/api/v1/namespaces/default/configmaps");
    for protocol in ["--http2", "--http1.1"] {
        let (code, out) = server
            .curl(&[
                protocol,
                "-G",
                "--data-urlencode",
                &format!("labelSelector={selector}"),
                "-w",
                "\n%{http_code}",
                &url,
            ])
            .await;
        assert_eq!(code, Some(0), "{protocol}: {out}");
        assert!(
            out.contains("\"kind\":\"ConfigMapList\"") && out.ends_with("\n200"),
            "{protocol}: {}",
            &out[out.len().saturating_sub(300)..]
        );
    }
    // a header of 900 KiB is read, one of 2 MiB refused, over HTTP/1.1 and HTTP/2 (not with
    // curl: it does not send a header line that long, and its HTTP/2 sends at most 64 KiB of
    // headers, nghttp2's own limit)
    let head = |size: usize| {
        format!(
            "GET /api/v1/namespaces/default/configmaps HTTP/1.1\r\nX-Padding: {}",
            "p".repeat(size)
        )
    };
    let (status, text) = send_all_then_read(&server, &head(900 * 1024), b"")
        .await
        .unwrap();
    assert_eq!(status, 200, "{}", &text[..text.len().min(300)]);
    // (the server may close before the client has written it all)
    if let Ok((status, _)) = send_all_then_read(&server, &head(2 * 1024 * 1024), b"").await {
        assert_eq!(status, 431);
    }
    let mut client = server
        .http2(&hyper::client::conn::http2::Builder::new(
            hyper_util::rt::TokioExecutor::new(),
        ))
        .await;
    let request = |size: usize| {
        hyper::Request::get(server.url("/api/v1/namespaces/default/configmaps"))
            .header("x-padding", "p".repeat(size))
            .body(Full::new(bytes::Bytes::new()))
            .unwrap()
    };
    let response = client.send_request(request(900 * 1024)).await.unwrap();
    assert_eq!(response.status(), 200);
    response.into_body().collect().await.unwrap();
    // refused: an answer of 431 or the stream reset, never served
    if let Ok(response) = client.send_request(request(2 * 1024 * 1024)).await {
        assert_eq!(response.status(), 431);
    }
}

/// Bodies nested deeper than the decoders allow (JSON 128 levels, YAML 64) are refused with a
/// 400 that says so, however deep they go; nothing deeper reaches code that recurses over
/// objects, so no body can exhaust a stack. (Go's decoder allows 10,000; a `serde_json` value
/// that deep cannot even be dropped on a 2 MiB thread stack, so genplane keeps the limit.)
#[tokio::test]
async fn bodies_nested_too_deep_are_refused_with_the_limit() {
    let server = support::start().await;
    let path = "/api/v1/namespaces/default/configmaps";
    for depth in [129usize, 10_000, 1_000_000] {
        let body = format!(
            r#"{{"metadata":{{"name":"deep"}},"extra":{}1{}}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        );
        let answer = call(
            &server,
            Method::POST,
            path,
            &[("content-type", "application/json")],
            Some(body.into_bytes()),
        )
        .await;
        let message = answer.json()["message"].as_str().unwrap_or("").to_owned();
        assert_eq!(answer.status, 400, "{depth}: {message}");
        assert!(message.contains("recursion limit"), "{depth}: {message}");
        let yaml = format!(
            "metadata: {{name: deep}}\nextra: {}1{}\n",
            "[".repeat(depth),
            "]".repeat(depth)
        );
        let answer = call(
            &server,
            Method::POST,
            path,
            &[("content-type", "application/yaml")],
            Some(yaml.into_bytes()),
        )
        .await;
        assert_eq!(
            answer.status,
            400,
            "yaml {depth}: {}",
            String::from_utf8_lossy(&answer.body)
        );
    }
    // Within the limit, an unknown deep field is dropped as any unknown field.
    let body = format!(
        r#"{{"metadata":{{"name":"deep"}},"extra":{}1{}}}"#,
        "[".repeat(100),
        "]".repeat(100)
    );
    let answer = call(
        &server,
        Method::POST,
        path,
        &[("content-type", "application/json")],
        Some(body.into_bytes()),
    )
    .await;
    assert_eq!(
        answer.status,
        201,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
}
