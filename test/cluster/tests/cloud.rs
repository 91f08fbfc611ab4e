//! The fake cloud and its cloud controller manager, as a cloud-provider test sees them:
//! nodes initialized from their instances, a LoadBalancer Service answering through its
//! load balancer's address, a deleted instance's Node deleted, the load balancer deleted
//! before the Service's cleanup finalizer goes; and each fault switch producing the wrong
//! behaviour it names.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::ResourceExt as _;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::{Cluster, cloud_request, eventually, http_answer, http_get};

/// Fast node heartbeats and monitoring, so that node loss shows within seconds.
const FAST_NODES: &[&str] = &genplane_test_cluster::FAST_NODE_FLAGS;

fn web(replicas: i32) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{
                "name": "agnhost", "image": "registry.k8s.io/e2e-test-images/agnhost:2.53",
                "args": ["netexec", "--http-port=8080"], "ports": [{"containerPort": 8080}]}]}}}
    }))
    .unwrap()
}

fn load_balancer(extra: serde_json::Value) -> Service {
    let mut spec = json!({"type": "LoadBalancer", "selector": {"app": "web"},
        "ports": [{"name": "http", "port": 80, "targetPort": 8080}]});
    for (key, value) in extra.as_object().unwrap() {
        spec[key] = value.clone();
    }
    serde_json::from_value(json!({"metadata": {"name": "web"}, "spec": spec})).unwrap()
}

/// The ingress address of `web`, once the CCM wrote it.
async fn ingress(services: &Api<Service>) -> String {
    eventually("the load balancer's ingress", || async {
        let service = services.get("web").await.ok()?;
        service.status?.load_balancer?.ingress?.first()?.ip.clone()
    })
    .await
}

fn balancer_name(service: &Service) -> String {
    format!("a{}", service.uid().unwrap().replace('-', ""))[..32].to_owned()
}

/// The names of the pods answering `/hostname` through `address` in `tries` requests.
fn answering(address: &str, tries: usize) -> BTreeSet<String> {
    (0..tries)
        .filter_map(|_| http_answer(address, "/hostname"))
        .filter_map(|a| a.split("\r\n\r\n").nth(1).map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_balancer_serves_and_the_ccm_follows_the_cloud() {
    let cluster = Cluster::start_with(3, FAST_NODES);
    let client = cluster.client().await;
    let nodes: Api<Node> = Api::all(client.clone());
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");

    // The CCM initialized every node from its instance.
    let (code, instances) = cloud_request(&cluster.cloud, "GET", "/instances");
    assert_eq!((code, instances.as_array().unwrap().len()), (200, 3));
    let node = nodes.get("node-1").await.unwrap();
    assert_eq!(
        node.spec.as_ref().unwrap().provider_id.as_deref(),
        Some("genplane://node-1")
    );
    assert_eq!(
        node.labels()["node.kubernetes.io/instance-type"],
        "genplane.small"
    );
    assert!(node.spec.unwrap().taints.unwrap_or_default().is_empty());

    // A Deployment behind a LoadBalancer Service answers through the load balancer.
    deployments
        .create(&PostParams::default(), &web(2))
        .await
        .unwrap();
    let service = services
        .create(&PostParams::default(), &load_balancer(json!({})))
        .await
        .unwrap();
    let ip = ingress(&services).await;
    let plan_prefix = format!("127.{}.", 112 + cluster.block);
    assert!(ip.starts_with(&plan_prefix), "{ip}");
    let pods = eventually("both pods through the load balancer", || async {
        let seen = answering(&format!("{ip}:80"), 8);
        (seen.len() == 2).then_some(seen)
    })
    .await;
    assert!(pods.iter().all(|p| p.starts_with("web-")), "{pods:?}");
    let with_finalizer = services.get("web").await.unwrap();
    assert!(
        with_finalizer
            .finalizers()
            .contains(&"service.kubernetes.io/load-balancer-cleanup".to_owned())
    );
    let name = balancer_name(&service);
    let (code, described) = cloud_request(&cluster.cloud, "GET", &format!("/loadbalancers/{name}"));
    assert_eq!(code, 200, "{described}");
    assert_eq!(described["address"], ip.as_str());
    assert_eq!(described["spec"]["ports"][0]["port"], 80);

    // A deleted instance's Node goes.
    let (code, _) = cloud_request(&cluster.cloud, "DELETE", "/instances/node-3");
    assert_eq!(code, 204);
    eventually("node-3 deleted", || async {
        nodes.get_opt("node-3").await.ok()?.is_none().then_some(())
    })
    .await;

    // Deleting the Service deletes its load balancer before the finalizer lets it go.
    let deleted = services
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    assert!(deleted.is_left(), "held by the finalizer");
    eventually("the Service gone", || async {
        let service_present = services.get_opt("web").await.ok()?.is_some();
        let (code, _) = cloud_request(&cluster.cloud, "GET", &format!("/loadbalancers/{name}"));
        assert!(
            service_present || code == 404,
            "the Service went before its load balancer"
        );
        (!service_present).then_some(())
    })
    .await;
    assert_eq!(http_answer(&format!("{ip}:80"), "/hostname"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_ccm_fault_switch_misbehaves_as_named() {
    let mut flags = FAST_NODES.to_vec();
    flags.push(
        "--ccm-fault=no-finalizer,stale-ports,no-node-deletion,no-session-affinity,no-source-ranges",
    );
    let cluster = Cluster::start_with(3, &flags);
    let client = cluster.client().await;
    let nodes: Api<Node> = Api::all(client.clone());
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    deployments
        .create(&PostParams::default(), &web(2))
        .await
        .unwrap();
    let service = services
        .create(
            &PostParams::default(),
            &load_balancer(json!({"sessionAffinity": "ClientIP",
                                  "externalTrafficPolicy": "Local"})),
        )
        .await
        .unwrap();
    let name = balancer_name(&service);
    let ip = ingress(&services).await;

    // no-session-affinity: the load balancer is told no affinity, and one client reaches
    // both pods (one on each of two nodes: with the Local policy each node forwards to its
    // own, so only the load balancer could keep the client on one).
    let (_, described) = cloud_request(&cluster.cloud, "GET", &format!("/loadbalancers/{name}"));
    assert_eq!(
        described["spec"]["affinitySeconds"],
        serde_json::Value::Null
    );
    eventually("both pods for one client", || async {
        (answering(&format!("{ip}:80"), 8).len() == 2).then_some(())
    })
    .await;

    // stale-ports: a port change reaches the load balancer with the rest of the update (the
    // policy's change: no health-check port any more), but it keeps forwarding the old port.
    // no-source-ranges: the load balancer is told no source ranges, and a client outside the
    // Service's only range (10.255.255.0/24) still gets through.
    services
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {
                "ports": [{"name": "http", "port": 8000, "targetPort": 8080}],
                "externalTrafficPolicy": "Cluster",
                "loadBalancerSourceRanges": ["10.255.255.0/24"]}})),
        )
        .await
        .unwrap();
    let described = eventually("the update at the load balancer", || async {
        let (_, described) =
            cloud_request(&cluster.cloud, "GET", &format!("/loadbalancers/{name}"));
        described["spec"]["healthCheckNodePort"]
            .is_null()
            .then_some(described)
    })
    .await;
    assert_eq!(described["spec"]["ports"][0]["port"], 80);
    assert_eq!(described["spec"]["sourceRanges"], json!([]));
    assert_eq!(http_answer(&format!("{ip}:8000"), "/hostname"), None);
    assert!(http_get(&format!("{ip}:80"), "/hostname").starts_with("web-"));

    // no-node-deletion: node-2's instance is deleted and the node is left. Proof that the
    // lifecycle controller looked: node-3, stopped after node-2 went silent, gets the
    // shutdown taint in a later pass.
    cloud_request(&cluster.cloud, "DELETE", "/instances/node-2");
    let not_ready = |node: Node| {
        node.status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status != "True")
    };
    eventually("node-2 not ready", || async {
        not_ready(nodes.get("node-2").await.ok()?).then_some(())
    })
    .await;
    cloud_request(&cluster.cloud, "POST", "/instances/node-3/stop");
    eventually("node-3 tainted as shut down", || async {
        let node = nodes.get("node-3").await.ok()?;
        node.spec?
            .taints?
            .iter()
            .any(|t| t.key == "node.cloudprovider.kubernetes.io/shutdown")
            .then_some(())
    })
    .await;
    assert!(
        nodes.get_opt("node-2").await.unwrap().is_some(),
        "node-2 was deleted"
    );

    // no-finalizer: the Service carries no cleanup finalizer and is deleted at once.
    let service = services.get("web").await.unwrap();
    assert!(
        service.finalizers().is_empty(),
        "{:?}",
        service.finalizers()
    );
    let deleted = services
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    assert!(deleted.is_right(), "deleted at once");
}
