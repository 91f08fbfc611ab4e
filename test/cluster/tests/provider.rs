//! The fake cloud as a `genplane ccm-e2e` provider: the in-process Rust provider and the exec
//! plugin (a process per call, speaking the protocol for real) answer alike, and act on the
//! cloud; a node upgrade (and downgrade) through either re-images every node, which is
//! reported not Ready while it shuts down ("node is shutting down") and comes back Ready at
//! the new version with its pods running again; a control-plane upgrade (and
//! downgrade) restarts the API server, which then reports the version and still has every
//! object.

#![allow(clippy::unwrap_used)]

mod support;

use genplane_cloudprovider::exec::ExecProvider;
use genplane_cloudprovider::{Capability, Error, NodeRef, Probe, ProbeKind, Provider, ServiceRef};
use genplane_test_cluster::provider::FakeCloudProvider;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::ResourceExt as _;
use kube::api::{Api, DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;
use support::{Cluster, cloud_request, eventually, http_get};

const PLUGIN: &str = env!("CARGO_BIN_EXE_genplane-testcluster-provider");

fn node(name: &str) -> NodeRef {
    NodeRef {
        name: name.to_owned(),
        provider_id: Some(format!("genplane://{name}")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rust_provider_and_the_exec_plugin_act_alike() {
    let cluster = Cluster::start(2);
    let config = json!({"cloud": format!("http://{}", cluster.cloud)});
    let rust = FakeCloudProvider::from_config(Some(&config)).unwrap();
    let exec = ExecProvider::new(PLUGIN, Some(config));

    let capabilities = rust.capabilities().await.unwrap();
    assert_eq!(exec.capabilities().await.unwrap(), capabilities);
    assert!(capabilities.has(Capability::NodeReboot));
    assert!(capabilities.has(Capability::ControlPlaneUpgrade));

    // A LoadBalancer Service's load balancer, described alike, then gone alike.
    let client = cluster.client().await;
    let services: Api<Service> = Api::namespaced(client, "default");
    let service: Service = serde_json::from_value(json!({"metadata": {"name": "lb"},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "protocol": "TCP"}]}}))
    .unwrap();
    let service = services
        .create(&PostParams::default(), &service)
        .await
        .unwrap();
    let reference = ServiceRef {
        namespace: "default".into(),
        name: "lb".into(),
        uid: service.uid().unwrap(),
    };
    // once both nodes pass its health check, what the description holds stays put
    let described = eventually("the load balancer, both nodes healthy", || async {
        rust.describe_load_balancer(&reference)
            .await
            .unwrap()
            .filter(|d| d.details["healthyNodes"].as_array().map(Vec::len) == Some(2))
    })
    .await;
    assert_eq!(described.ports[0].port, 80);
    assert_eq!(described.session_affinity, Some(false));
    assert_eq!(
        exec.describe_load_balancer(&reference).await.unwrap(),
        Some(described)
    );
    services
        .delete("lb", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the load balancer gone", || async {
        exec.describe_load_balancer(&reference)
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    assert_eq!(rust.describe_load_balancer(&reference).await.unwrap(), None);

    // Instance actions reach the cloud, whichever provider asks.
    exec.stop_instance(&node("node-2")).await.unwrap();
    let (_, instance) = cloud_request(&cluster.cloud, "GET", "/instances/node-2");
    assert_eq!(instance["state"], "Stopped");
    rust.start_instance(&node("node-2")).await.unwrap();
    exec.reboot_instance(&node("node-2")).await.unwrap();
    let (_, instance) = cloud_request(&cluster.cloud, "GET", "/instances/node-2");
    assert_eq!(
        (instance["state"].as_str(), instance["boots"].as_u64()),
        (Some("Running"), Some(3))
    );
    exec.delete_instance(&node("node-2")).await.unwrap();
    for provider in [&rust as &dyn Provider, &exec] {
        let again = provider.delete_instance(&node("node-2")).await;
        assert!(
            matches!(&again, Err(Error::Failed(m)) if m.contains("instance \"node-2\" not found")),
            "{again:?}"
        );
    }

    // Probes go out from the plugin's machine.
    let probe = Probe {
        kind: ProbeKind::Http {
            path: "/instances".into(),
        },
        address: "127.0.0.1".into(),
        port: cluster.cloud.rsplit(':').next().unwrap().parse().unwrap(),
        timeout_ms: 5000,
    };
    let answer = exec.probe(&probe).await.unwrap();
    assert_eq!(answer.status, Some(200), "{answer:?}");
    assert!(answer.body.unwrap().contains("node-1"));

    // A plugin without its configuration says what it needs.
    let unconfigured = ExecProvider::new(PLUGIN, None).capabilities().await;
    assert!(
        matches!(&unconfigured, Err(Error::Failed(m)) if m.contains("needs {\"cloud\"")),
        "{unconfigured:?}"
    );
}

/// Every node's kubelet version, when every node is Ready (else `None`).
async fn ready_node_versions(nodes: &Api<Node>) -> Option<Vec<String>> {
    let list = nodes.list(&ListParams::default()).await.ok()?.items;
    list.iter()
        .map(|node| {
            let status = node.status.as_ref()?;
            let ready = status
                .conditions
                .as_ref()?
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            ready.then(|| status.node_info.as_ref().map(|i| i.kubelet_version.clone()))?
        })
        .collect()
}

/// Whether every node is Ready with a heartbeat in second `since` or later.
async fn heartbeats_since(nodes: &Api<Node>, since: i64) -> Option<()> {
    let list = nodes.list(&ListParams::default()).await.ok()?.items;
    list.iter()
        .all(|node| {
            let conditions = node.status.as_ref().and_then(|s| s.conditions.as_ref());
            conditions.is_some_and(|c| {
                c.iter().any(|c| {
                    c.type_ == "Ready"
                        && c.status == "True"
                        && c.last_heartbeat_time
                            .as_ref()
                            .is_some_and(|t| t.0.as_second() >= since)
                })
            })
        })
        .then_some(())
}

/// What a watch of the nodes saw of each node's `Ready` condition, in order: `shutting down`
/// for `Ready=False` because the node is shutting down, else `Ready <kubelet version>` or
/// `not Ready`.
type Readiness = std::sync::Arc<std::sync::Mutex<std::collections::BTreeMap<String, Vec<String>>>>;

/// Watches the nodes from now on, recording each change of their readiness in the returned
/// map until the task is aborted.
async fn watch_readiness(nodes: &Api<Node>) -> (Readiness, tokio::task::JoinHandle<()>) {
    use futures::StreamExt as _;
    let listed = nodes.list(&ListParams::default()).await.unwrap();
    let version = listed.metadata.resource_version.unwrap();
    let stream = nodes
        .watch(&WatchParams::default(), &version)
        .await
        .unwrap();
    let seen = Readiness::default();
    let record = seen.clone();
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(Ok(event)) = stream.next().await {
            let (WatchEvent::Added(node) | WatchEvent::Modified(node)) = event else {
                continue;
            };
            let ready = node
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == "Ready").cloned());
            let state = match ready {
                Some(c) if c.status == "True" => format!(
                    "Ready {}",
                    node.status
                        .as_ref()
                        .unwrap()
                        .node_info
                        .as_ref()
                        .unwrap()
                        .kubelet_version
                ),
                Some(c) if c.message.as_deref() == Some("node is shutting down") => {
                    "shutting down".to_owned()
                }
                _ => "not Ready".to_owned(),
            };
            let mut seen = record.lock().unwrap();
            let states = seen.entry(node.name_any()).or_default();
            if states.last() != Some(&state) {
                states.push(state);
            }
        }
    });
    (seen, task)
}

/// The second `pod`'s container started in, when it runs.
fn started_second(pod: &Pod) -> Option<i64> {
    let status = pod.status.as_ref()?.container_statuses.as_ref()?.first()?;
    Some(
        status
            .state
            .as_ref()?
            .running
            .as_ref()?
            .started_at
            .as_ref()?
            .0
            .as_second(),
    )
}

/// The pods of `app=web` when there are `count`, all Ready and started in `since` or later.
async fn web_pods_started_since(pods: &Api<Pod>, count: usize, since: i64) -> Option<Vec<Pod>> {
    let list = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .ok()?
        .items;
    let ready = list.iter().all(|p| {
        p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            && started_second(p).is_some_and(|t| t >= since)
    });
    (list.len() == count && ready).then_some(list)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_upgrade_reimages_every_node_and_its_pods_run_again() {
    let cluster = Cluster::start_with(3, &genplane_test_cluster::FAST_NODE_FLAGS);
    let config = json!({"cloud": format!("http://{}", cluster.cloud)});
    let rust = FakeCloudProvider::from_config(Some(&config)).unwrap();
    let exec = ExecProvider::new(PLUGIN, Some(config));
    for provider in [&rust as &dyn Provider, &exec] {
        assert!(
            provider
                .capabilities()
                .await
                .unwrap()
                .has(Capability::NodeUpgrade)
        );
    }
    let client = cluster.client().await;
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let deployments: Api<Deployment> = Api::namespaced(client, "default");
    let before = eventually("every node Ready", || ready_node_versions(&nodes)).await;
    assert_eq!(before, vec!["v1.33.0"; 3]);
    let web: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{
                "name": "agnhost", "image": "registry.k8s.io/e2e-test-images/agnhost:2.53",
                "args": ["netexec", "--http-port=8080"]}]}}}
    }))
    .unwrap();
    deployments
        .create(&PostParams::default(), &web)
        .await
        .unwrap();
    let running = eventually("3 web pods running", || web_pods_started_since(&pods, 3, 0)).await;

    // Upgraded through the plugin, downgraded through the Rust provider: each time every
    // instance boots again, every node comes back Ready at the version, and the pods run
    // again, restarted on their re-imaged nodes.
    let mut latest = running.iter().filter_map(started_second).max().unwrap();
    for (provider, version, boots) in [
        (&exec as &dyn Provider, "v1.34.0", 2),
        (&rust as &dyn Provider, "v1.33.0", 3),
    ] {
        // Start times are reported to the second: upgrade in a later second.
        eventually("the clock past the pods' start", || async {
            (k8s_openapi::jiff::Timestamp::now().as_second() > latest).then_some(())
        })
        .await;
        let upgraded_at = k8s_openapi::jiff::Timestamp::now().as_second();
        let (readiness, watching) = watch_readiness(&nodes).await;
        provider.upgrade_nodes(version).await.unwrap();
        let (_, instances) = cloud_request(&cluster.cloud, "GET", "/instances");
        for instance in instances.as_array().unwrap() {
            assert_eq!(instance["kubeletVersion"], version, "{instance}");
            assert_eq!(instance["boots"], boots, "{instance}");
        }
        let versions = eventually(&format!("every node Ready at {version}"), || async {
            ready_node_versions(&nodes)
                .await
                .filter(|v| v.iter().all(|v| v == version))
        })
        .await;
        assert_eq!(versions.len(), 3);
        // Each node was seen not Ready while its machine shut down, then Ready at the
        // version.
        let ready_again = format!("Ready {version}");
        eventually(
            "each node seen shutting down, then Ready at the version",
            || async {
                let seen = readiness.lock().unwrap().clone();
                let reimaged = seen.values().filter(|states| {
                    states
                        .iter()
                        .position(|s| s == "shutting down")
                        .is_some_and(|at| states[at..].contains(&ready_again))
                });
                (reimaged.count() == 3).then_some(())
            },
        )
        .await;
        watching.abort();
        let again = eventually("the web pods running again", || {
            web_pods_started_since(&pods, 3, upgraded_at)
        })
        .await;
        for pod in &again {
            let ip = pod.status.as_ref().unwrap().pod_ip.clone().unwrap();
            assert_eq!(http_get(&format!("{ip}:8080"), "/hostname"), pod.name_any());
        }
        latest = again.iter().filter_map(started_second).max().unwrap();
    }

    // What is not a version is refused, whichever provider is asked, and nothing changes.
    for provider in [&rust as &dyn Provider, &exec] {
        let refused = provider.upgrade_nodes("latest").await;
        assert!(
            matches!(&refused, Err(Error::Failed(m)) if m.contains("\"latest\" is not a Kubernetes version")),
            "{refused:?}"
        );
    }
    let (_, instance) = cloud_request(&cluster.cloud, "GET", "/instances/node-1");
    assert_eq!(
        (
            instance["kubeletVersion"].as_str(),
            instance["boots"].as_u64()
        ),
        (Some("v1.33.0"), Some(3))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_control_plane_upgrade_restarts_the_api_server_at_the_version() {
    let cluster = Cluster::start_with(2, &genplane_test_cluster::FAST_NODE_FLAGS);
    let config = json!({"cloud": format!("http://{}", cluster.cloud)});
    let rust = FakeCloudProvider::from_config(Some(&config)).unwrap();
    let exec = ExecProvider::new(PLUGIN, Some(config));
    let client = cluster.client().await;
    let before = client.apiserver_version().await.unwrap().git_version;
    assert!(before.starts_with("v1.33.0+genplane."), "{before}");
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let web: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{
                "name": "agnhost", "image": "registry.k8s.io/e2e-test-images/agnhost:2.53",
                "args": ["netexec", "--http-port=8080"]}]}}}
    }))
    .unwrap();
    deployments
        .create(&PostParams::default(), &web)
        .await
        .unwrap();
    eventually("2 web pods running", || web_pods_started_since(&pods, 2, 0)).await;

    // Up through the plugin, down through the Rust provider: each answers once the restarted
    // API server serves, reporting the version, with the objects it had; the nodes and the
    // workload carry on.
    for (provider, version) in [
        (&exec as &dyn Provider, "v1.33.0+genplane.9.9.9"),
        (&rust as &dyn Provider, "v1.33.0+genplane.0.0.1"),
    ] {
        provider.upgrade_control_plane(version).await.unwrap();
        let reported = eventually("the API server answering", || async {
            client.apiserver_version().await.ok()
        })
        .await;
        assert_eq!(reported.git_version, version);
        assert!(deployments.get_opt("web").await.unwrap().is_some());
        // The kubelets heartbeat to the new server (a second later than its start).
        let restarted = k8s_openapi::jiff::Timestamp::now().as_second();
        eventually("every node heartbeating again", || {
            heartbeats_since(&nodes, restarted + 1)
        })
        .await;
        eventually("2 web pods running", || web_pods_started_since(&pods, 2, 0)).await;
    }

    // Nodes re-imaged after the restarts register with the new server.
    let upgraded_at = k8s_openapi::jiff::Timestamp::now().as_second() + 1;
    eventually("the clock past the restart", || async {
        (k8s_openapi::jiff::Timestamp::now().as_second() >= upgraded_at).then_some(())
    })
    .await;
    rust.upgrade_nodes("v1.33.0+genplane.0.0.1").await.unwrap();
    eventually("every node Ready at v1.33.0+genplane.0.0.1", || async {
        ready_node_versions(&nodes)
            .await
            .filter(|v| v.iter().all(|v| v == "v1.33.0+genplane.0.0.1"))
    })
    .await;
    eventually("the web pods running again", || {
        web_pods_started_since(&pods, 2, upgraded_at)
    })
    .await;

    // The test cluster's control plane can only be another genplane of its Kubernetes version.
    for provider in [&rust as &dyn Provider, &exec] {
        let refused = provider.upgrade_control_plane("v1.34.0").await;
        assert!(
            matches!(&refused, Err(Error::Failed(m)) if m.contains("it can run v1.33.0+genplane.<genplane version> only")),
            "{refused:?}"
        );
    }
    assert_eq!(
        client.apiserver_version().await.unwrap().git_version,
        "v1.33.0+genplane.0.0.1"
    );
}
