//! The fake cloud as a `genplane ccm-e2e` provider: the in-process Rust provider and the exec
//! plugin (a process per call, speaking the protocol for real) answer alike, and act on the
//! cloud.

#![allow(clippy::unwrap_used)]

mod support;

use genplane_cloudprovider::exec::ExecProvider;
use genplane_cloudprovider::{Capability, Error, NodeRef, Probe, ProbeKind, Provider, ServiceRef};
use genplane_test_cluster::provider::FakeCloudProvider;
use k8s_openapi::api::core::v1::Service;
use kube::ResourceExt as _;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use support::{Cluster, cloud_request, eventually};

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
    assert!(!capabilities.has(Capability::ControlPlaneUpgrade));

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
