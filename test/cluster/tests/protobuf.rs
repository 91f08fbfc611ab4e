//! The cluster's kinds in Kubernetes protobuf, which kubectl 1.33 sends for built-in kinds:
//! `kubectl create deployment`, `expose`, `describe`, `scale` and `rollout status` against
//! the test cluster, every kind's protobuf answer equal to its JSON one, and the `scale`
//! subresources in the OpenAPI documents.

#![allow(clippy::unwrap_used)]

mod support;

use genplane_apimachinery::codec::protobuf;
use genplane_apimachinery::codec::schema::Struct;
use genplane_test_cluster::api::proto;
use serde_json::Value;
use support::{Cluster, eventually, http_get};

const IMAGE: &str = "registry.k8s.io/e2e-test-images/agnhost:2.53";

/// The body of `GET path` as `accept`.
async fn get(client: &kube::Client, path: &str, accept: &str) -> Vec<u8> {
    let request = hyper::Request::get(path)
        .header(hyper::header::ACCEPT, accept)
        .body(Vec::new())
        .unwrap();
    let response = client
        .send(request.map(kube::client::Body::from))
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "GET {path} as {accept}");
    let body = http_body_util::BodyExt::collect(response.into_body())
        .await
        .unwrap();
    body.to_bytes().to_vec()
}

/// `json` without the zero values `read` lacks (an empty list or string, `false`, 0): Go's
/// `omitempty` leaves them out and so does protobuf, where the JSON path keeps one a client
/// wrote (`taints: []`, a port's `name: ""`).
fn as_read(json: &Value, read: &Value) -> Value {
    let zero = |v: &Value| match v {
        Value::Array(a) => a.is_empty(),
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_i64() == Some(0),
        _ => false,
    };
    match (json, read) {
        (Value::Object(fields), Value::Object(read)) => Value::Object(
            fields
                .iter()
                .filter(|(k, v)| read.contains_key(*k) || !zero(v))
                .map(|(k, v)| (k.clone(), as_read(v, read.get(k).unwrap_or(&Value::Null))))
                .collect(),
        ),
        (Value::Array(items), Value::Array(read)) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, v)| as_read(v, read.get(i).unwrap_or(&Value::Null)))
                .collect(),
        ),
        (other, _) => other.clone(),
    }
}

/// The object at `path` read as protobuf with `schema` equals the one read as JSON (asked
/// until both reads see the same resourceVersion: nodes and pods change while we read).
async fn same_in_protobuf_and_json(client: &kube::Client, path: &str, schema: &'static Struct) {
    eventually(&format!("{path} read alike"), || async {
        let json: Value =
            serde_json::from_slice(&get(client, path, "application/json").await).unwrap();
        let body = get(client, path, protobuf::CONTENT_TYPE).await;
        let read = protobuf::decode(&body, schema).unwrap();
        let again: Value =
            serde_json::from_slice(&get(client, path, "application/json").await).unwrap();
        let version = |o: &Value| o["metadata"]["resourceVersion"].clone();
        if version(&json) != version(&again) || version(&read) != version(&json) {
            return None;
        }
        assert_eq!(read, as_read(&json, &read), "{path}");
        Some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_creates_exposes_scales_and_describes_in_protobuf() {
    let cluster = Cluster::start(2);
    let client = cluster.client().await;

    // kubectl 1.33 sends these objects as protobuf.
    let created = cluster.kubectl_output(
        &[
            "create",
            "deployment",
            "web",
            &format!("--image={IMAGE}"),
            "--replicas=2",
            "--port=8080",
            "-v=8",
            "--",
            "/agnhost",
            "netexec",
            "--http-port=8080",
        ],
        "",
    );
    let log = String::from_utf8_lossy(&created.stderr);
    assert!(created.status.success(), "{log}");
    assert!(
        log.contains("Content-Type: application/vnd.kubernetes.protobuf"),
        "kubectl did not send protobuf:\n{log}"
    );
    let rolled = cluster.kubectl(&["rollout", "status", "deployment/web", "--timeout=60s"]);
    assert!(rolled.contains("successfully rolled out"), "{rolled}");
    cluster.kubectl(&[
        "expose",
        "deployment",
        "web",
        "--port=80",
        "--target-port=8080",
        "--type=LoadBalancer",
    ]);

    // The Service works: its load balancer answers from the deployment's pods.
    let ip = eventually("the load balancer's address", || async {
        let ip = cluster.kubectl(&[
            "get",
            "service",
            "web",
            "-o",
            "jsonpath={.status.loadBalancer.ingress[0].ip}",
        ]);
        (!ip.is_empty()).then_some(ip)
    })
    .await;
    let hostname = eventually("an answer through the load balancer", || async {
        support::http_answer(&format!("{ip}:80"), "/hostname")
            .and_then(|a| a.split("\r\n\r\n").nth(1).map(str::to_owned))
            .filter(|h| h.starts_with("web-"))
    })
    .await;
    assert!(hostname.starts_with("web-"), "{hostname}");

    // Scaled and rolled out; described.
    cluster.kubectl(&["scale", "deployment/web", "--replicas=3"]);
    let rolled = cluster.kubectl(&["rollout", "status", "deployment/web", "--timeout=60s"]);
    assert!(rolled.contains("successfully rolled out"), "{rolled}");
    let described = cluster.kubectl(&["describe", "deployment", "web"]);
    for expected in [
        "Replicas:",
        "3 desired | 3 updated | 3 total | 3 available",
        IMAGE,
        "/agnhost",
    ] {
        assert!(
            described.contains(expected),
            "{expected} missing from:\n{described}"
        );
    }
    let described = cluster.kubectl(&["describe", "service", "web"]);
    for expected in [
        "Type:                     LoadBalancer",
        &format!("LoadBalancer Ingress:     {ip}"),
        "TargetPort:               8080/TCP",
    ] {
        assert!(
            described.contains(expected),
            "{expected} missing from:\n{described}"
        );
    }
    let pod = cluster.kubectl(&[
        "get",
        "pods",
        "-l",
        "app=web",
        "-o",
        "jsonpath={.items[0].metadata.name}",
    ]);
    let described = cluster.kubectl(&["describe", "pod", &pod]);
    assert!(
        described
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["Status:", "Running"]),
        "{described}"
    );
    assert_eq!(http_get(&format!("{ip}:80"), "/echo?msg=hi"), "hi");

    // Every kind reads the same in protobuf as in JSON, one object and a list.
    let slice = cluster.kubectl(&[
        "get",
        "endpointslices",
        "-l",
        "kubernetes.io/service-name=web",
        "-o",
        "jsonpath={.items[0].metadata.name}",
    ]);
    let replicaset = cluster.kubectl(&[
        "get",
        "replicasets",
        "-l",
        "app=web",
        "-o",
        "jsonpath={.items[0].metadata.name}",
    ]);
    for (path, schema) in [
        ("/api/v1/nodes/node-1".to_owned(), &proto::NODE),
        (
            format!("/api/v1/namespaces/default/pods/{pod}"),
            &proto::POD,
        ),
        (
            "/api/v1/namespaces/default/services/web".to_owned(),
            &proto::SERVICE,
        ),
        (
            "/api/v1/namespaces/default/endpoints/web".to_owned(),
            &proto::ENDPOINTS,
        ),
        (
            format!("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/{slice}"),
            &proto::ENDPOINT_SLICE,
        ),
        (
            "/apis/apps/v1/namespaces/default/deployments/web".to_owned(),
            &proto::DEPLOYMENT,
        ),
        (
            format!("/apis/apps/v1/namespaces/default/replicasets/{replicaset}"),
            &proto::REPLICA_SET,
        ),
    ] {
        same_in_protobuf_and_json(&client, &path, schema).await;
    }
    let body = get(
        &client,
        "/apis/apps/v1/namespaces/default/deployments",
        protobuf::CONTENT_TYPE,
    )
    .await;
    let list = protobuf::decode_list(&body, &proto::DEPLOYMENT).unwrap();
    assert_eq!(list["kind"], "DeploymentList");
    assert_eq!(list["items"][0]["spec"]["replicas"], 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scale_subresources_are_in_the_openapi_documents() {
    let cluster = Cluster::start(1);
    let v3: Value =
        serde_json::from_str(&cluster.kubectl(&["get", "--raw", "/openapi/v3/apis/apps/v1"]))
            .unwrap();
    let v2: Value =
        serde_json::from_str(&cluster.kubectl(&["get", "--raw", "/openapi/v2"])).unwrap();
    for resource in ["deployments", "replicasets"] {
        let path = format!("/apis/apps/v1/namespaces/{{namespace}}/{resource}/{{name}}/scale");
        let get = &v3["paths"][&path]["get"];
        let reference = get["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
            .as_str()
            .unwrap_or_else(|| panic!("{path} in v3: {get}"));
        let name = reference.rsplit('/').next().unwrap();
        assert_eq!(
            v3["components"]["schemas"][name]["x-kubernetes-group-version-kind"],
            serde_json::json!([{"group": "autoscaling", "version": "v1", "kind": "Scale"}])
        );
        assert_eq!(
            get["x-kubernetes-group-version-kind"]["kind"], "Scale",
            "{get}"
        );
        for verb in ["get", "put", "patch"] {
            assert!(
                v2["paths"][&path][verb].is_object(),
                "{verb} {path} missing from v2"
            );
        }
    }
    // kubectl finds the kinds' fields.
    let explained = cluster.kubectl(&["explain", "deployment.spec.replicas"]);
    assert!(
        explained.contains("FIELD: replicas <integer>"),
        "{explained}"
    );
}
