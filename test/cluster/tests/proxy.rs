//! Service traffic through the kube-proxy simulator, as a client on the machine sees it:
//! ClusterIP and node ports over TCP and UDP, spreading over endpoints, session affinity,
//! `externalTrafficPolicy: Local` (only local endpoints, the client's address kept) and its
//! health-check node port.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::{Cluster, eventually, http_answer, http_get, udp_ask};

fn deployment(name: &str, replicas: i32) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{
                "name": "agnhost", "image": "registry.k8s.io/e2e-test-images/agnhost:2.53",
                "args": ["netexec", "--http-port=8080", "--udp-port=8081"],
                "ports": [{"containerPort": 8080}, {"containerPort": 8081, "protocol": "UDP"}]}]}}}
    }))
    .unwrap()
}

fn service(name: &str, kind: &str, extra: serde_json::Value) -> Service {
    let mut spec = json!({"type": kind, "selector": {"app": name}, "ports": [
        {"name": "http", "port": 80, "targetPort": 8080},
        {"name": "udp", "port": 81, "targetPort": 8081, "protocol": "UDP"}]});
    for (key, value) in extra.as_object().unwrap() {
        spec[key] = value.clone();
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

fn node_port(service: &Service, index: usize) -> i32 {
    service.spec.as_ref().unwrap().ports.as_ref().unwrap()[index]
        .node_port
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_forward_to_their_endpoints() {
    let cluster = Cluster::start(2);
    let node_ip = |n: u8| format!("127.{}.1.{n}", 2 * cluster.block);
    let client = cluster.client().await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let post = PostParams::default();
    deployments
        .create(&post, &deployment("web", 2))
        .await
        .unwrap();
    deployments
        .create(&post, &deployment("solo", 1))
        .await
        .unwrap();
    let web = services
        .create(&post, &service("web", "NodePort", json!({})))
        .await
        .unwrap();
    let solo = services
        .create(
            &post,
            &service(
                "solo",
                "LoadBalancer",
                json!({"externalTrafficPolicy": "Local"}),
            ),
        )
        .await
        .unwrap();
    let web_ip = web.spec.as_ref().unwrap().cluster_ip.clone().unwrap();
    let names = |app: &'static str| {
        let pods = pods.clone();
        async move {
            let list = pods
                .list(&ListParams::default().labels(&format!("app={app}")))
                .await
                .unwrap();
            list.items
                .into_iter()
                .filter(|p| p.status.as_ref().and_then(|s| s.pod_ip.as_ref()).is_some())
                .map(|p| {
                    let node = p.spec.unwrap().node_name.unwrap();
                    (p.metadata.name.unwrap(), node)
                })
                .collect::<Vec<_>>()
        }
    };
    let web_pods: BTreeSet<String> = eventually("two web pods", || async {
        let found = names("web").await;
        (found.len() == 2).then(|| found.into_iter().map(|(name, _)| name).collect())
    })
    .await;

    // ClusterIP over TCP spreads over both endpoints; over UDP it answers too.
    let web_address = format!("{web_ip}:80");
    eventually("both web pods through the ClusterIP", || async {
        let seen: BTreeSet<String> = (0..6)
            .filter_map(|_| http_answer(&web_address, "/hostname"))
            .filter_map(|a| a.split("\r\n\r\n").nth(1).map(str::to_owned))
            .collect();
        (seen == web_pods).then_some(())
    })
    .await;
    let udp_answer = udp_ask(&format!("{web_ip}:81"), "hostname").unwrap();
    assert!(web_pods.contains(&udp_answer), "{udp_answer}");

    // A node port answers on every node; the pod sees the node's address (masquerade).
    for n in [1, 2] {
        let address = format!("{}:{}", node_ip(n), node_port(&web, 0));
        assert!(web_pods.contains(&http_get(&address, "/hostname")));
        let seen_from = http_get(&address, "/clientip");
        assert!(
            seen_from.starts_with(&format!("{}:", node_ip(n))),
            "{seen_from}"
        );
        let udp = format!("{}:{}", node_ip(n), node_port(&web, 1));
        assert!(web_pods.contains(&udp_ask(&udp, "hostname").unwrap()));
    }

    // With ClientIP affinity every request from this client reaches one pod.
    services
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"sessionAffinity": "ClientIP"}})),
        )
        .await
        .unwrap();
    let sticky = eventually("one web pod with affinity", || async {
        let seen: BTreeSet<String> = (0..8)
            .map(|_| http_get(&web_address, "/hostname"))
            .collect();
        (seen.len() == 1).then_some(seen)
    })
    .await;
    assert!(sticky.is_subset(&web_pods));

    // externalTrafficPolicy: Local: the node with the endpoint forwards (keeping the
    // client's address) and its health check answers 200; the other refuses, 503.
    let (solo_pod, solo_node) = eventually("the solo pod", || async {
        names("solo").await.into_iter().next()
    })
    .await;
    let (with, without) = if solo_node == "node-1" {
        (1, 2)
    } else {
        (2, 1)
    };
    let health_port = solo.spec.as_ref().unwrap().health_check_node_port.unwrap();
    let healthy = eventually("a healthy node", || async {
        http_answer(&format!("{}:{health_port}", node_ip(with)), "/healthz")
            .filter(|a| a.starts_with("HTTP/1.1 200"))
    })
    .await;
    let body: serde_json::Value =
        serde_json::from_str(healthy.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(
        body,
        json!({"service": {"namespace": "default", "name": "solo"},
               "localEndpoints": 1, "serviceProxyHealthy": true})
    );
    let unhealthy =
        http_answer(&format!("{}:{health_port}", node_ip(without)), "/healthz").unwrap();
    assert!(unhealthy.starts_with("HTTP/1.1 503"), "{unhealthy}");
    assert!(unhealthy.contains("\"localEndpoints\": 0"), "{unhealthy}");
    let local = format!("{}:{}", node_ip(with), node_port(&solo, 0));
    assert_eq!(http_get(&local, "/hostname"), solo_pod);
    let seen_from = http_get(&local, "/clientip");
    assert!(seen_from.starts_with("127.0.0.1:"), "{seen_from}");
    let remote = format!("{}:{}", node_ip(without), node_port(&solo, 0));
    assert_eq!(http_answer(&remote, "/hostname"), None);
}
