//! The test cluster as its users see it: started as a process, used with kubectl 1.33 and a
//! kube-rs client: nodes Ready, a pod scheduled and answering `/hostname` on its own address,
//! a Service's ClusterIP and node port (released on delete), endpoint slices following pod
//! readiness and termination, and nothing listening outside 127.0.0.0/8.

#![allow(clippy::unwrap_used)]

mod support;

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use support::{Cluster, eventually, http_get};

fn netexec_pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"terminationGracePeriodSeconds": 30, "containers": [{
            "name": "agnhost", "image": "registry.k8s.io/e2e-test-images/agnhost:2.53",
            "args": ["netexec", "--http-port=8080", "--delay-shutdown=2"],
            "ports": [{"containerPort": 8080}]}]}
    }))
    .unwrap()
}

fn node_port_service(name: &str, node_port: Option<u16>) -> Service {
    let mut port = json!({"port": 80, "targetPort": 8080});
    if let Some(node_port) = node_port {
        port["nodePort"] = json!(node_port);
    }
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"type": "NodePort", "selector": {"app": "web"}, "ports": [port]}
    }))
    .unwrap()
}

/// The local addresses of the listening TCP and bound UDP sockets of process `pid`.
fn listening_addresses(pid: u32) -> Vec<String> {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|link| {
            let link = link.to_string_lossy().into_owned();
            Some(link.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .collect();
    let mut found = Vec::new();
    for table in ["tcp", "tcp6", "udp", "udp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (local, state, inode) = (fields[1], fields[3], fields[9]);
            // TCP LISTEN is 0A; every bound UDP socket counts.
            let listening = table.starts_with("udp") || state == "0A";
            if listening && inodes.iter().any(|i| i == inode) {
                found.push(format!("{table} {local}"));
            }
        }
    }
    found
}

/// Whether a /proc/net address (hex, host byte order for IPv4) is in 127.0.0.0/8.
fn is_loopback(entry: &str) -> bool {
    let (table, local) = entry.split_once(' ').unwrap();
    let address = local.split(':').next().unwrap();
    if table.ends_with('6') {
        // ::ffff:127.x.y.z or ::1
        return address == "00000000000000000000000001000000"
            || (address.starts_with("0000000000000000FFFF0000") && address.ends_with("7F"));
    }
    address.ends_with("7F")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_small_cluster_on_loopback() {
    let cluster = Cluster::start(2);
    let client = cluster.client().await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");

    // A pod is scheduled, runs, and answers on its own address.
    pods.create(&PostParams::default(), &netexec_pod("web-1"))
        .await
        .unwrap();
    let pod = eventually("web-1 Running", || async {
        let pod = pods.get("web-1").await.ok()?;
        let status = pod.status.clone()?;
        (status.phase.as_deref() == Some("Running")).then_some(pod)
    })
    .await;
    let ip = pod.status.unwrap().pod_ip.unwrap();
    let block = cluster.block;
    assert!(ip.starts_with(&format!("127.{}.", 2 * block + 1)), "{ip}");
    assert_eq!(http_get(&format!("{ip}:8080"), "/hostname"), "web-1");
    assert_eq!(
        http_get(&format!("{ip}:8080"), "/echo?msg=hello%20there"),
        "hello there"
    );

    // kubectl sees a small cluster.
    let wide = cluster.kubectl(&["get", "nodes,pods,svc", "-A", "-o", "wide"]);
    for expected in [
        "node/node-1",
        "node/node-2",
        "Ready",
        "v1.33.0",
        &format!("127.{}.1.1", 2 * block),
        "pod/web-1",
        "1/1",
        "Running",
        &ip,
    ] {
        assert!(wide.contains(expected), "{expected} missing from:\n{wide}");
    }
    let described = cluster.kubectl(&["describe", "pod", "web-1"]);
    assert!(
        described
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["Status:", "Running"]),
        "{described}"
    );

    // A Service gets a ClusterIP and a node port; the port is its own until it is deleted.
    let service = services
        .create(&PostParams::default(), &node_port_service("web", None))
        .await
        .unwrap();
    let spec = service.spec.unwrap();
    let cluster_ip = spec.cluster_ip.unwrap();
    assert!(
        cluster_ip.starts_with(&format!("127.{}.", 96 + block)),
        "{cluster_ip}"
    );
    let node_port = u16::try_from(spec.ports.unwrap()[0].node_port.unwrap()).unwrap();
    assert!((30000..=32767).contains(&node_port), "{node_port}");
    let taken = services
        .create(
            &PostParams::default(),
            &node_port_service("other", Some(node_port)),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(status) = taken else {
        panic!("{taken}")
    };
    assert_eq!(status.code, 422, "{status:?}");
    assert!(
        status
            .message
            .contains("provided port is already allocated"),
        "{}",
        status.message
    );
    let outside = services
        .create(
            &PostParams::default(),
            &node_port_service("outside", Some(29999)),
        )
        .await
        .unwrap_err();
    assert!(
        outside
            .to_string()
            .contains("provided port is not in the valid range"),
        "{outside}"
    );

    // The endpoint slice has the ready pod.
    let slice = eventually("web's endpoint slice", || async {
        let slice = slices.get("web-gp").await.ok()?;
        (slice.endpoints.len() == 1).then_some(slice)
    })
    .await;
    assert_eq!(slice.endpoints[0].addresses, std::slice::from_ref(&ip));
    let conditions = slice.endpoints[0].conditions.clone().unwrap();
    assert_eq!(
        (conditions.ready, conditions.serving, conditions.terminating),
        (Some(true), Some(true), Some(false))
    );

    // A deleted pod terminates gracefully: its endpoint is serving and terminating while it
    // still answers, then it is gone.
    pods.delete("web-1", &DeleteParams::default())
        .await
        .unwrap();
    eventually("a terminating endpoint", || async {
        let slice = slices.get("web-gp").await.ok()?;
        let conditions = slice.endpoints.first()?.conditions.clone()?;
        (conditions.terminating == Some(true)
            && conditions.serving == Some(true)
            && conditions.ready == Some(false))
        .then_some(())
    })
    .await;
    assert_eq!(http_get(&format!("{ip}:8080"), "/hostname"), "web-1");
    eventually("web-1 gone", || async {
        pods.get_opt("web-1").await.ok()?.is_none().then_some(())
    })
    .await;
    eventually("an empty slice", || async {
        slices
            .get("web-gp")
            .await
            .ok()?
            .endpoints
            .is_empty()
            .then_some(())
    })
    .await;

    // Deleting the Service releases its node port.
    services
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    let again = services
        .create(
            &PostParams::default(),
            &node_port_service("again", Some(node_port)),
        )
        .await
        .unwrap();
    assert_eq!(
        again.spec.unwrap().ports.unwrap()[0].node_port,
        Some(i32::from(node_port))
    );

    // Nothing listens outside 127.0.0.0/8.
    let listening = listening_addresses(cluster.process.child.id());
    assert!(!listening.is_empty());
    let outside: Vec<&String> = listening.iter().filter(|a| !is_loopback(a)).collect();
    assert!(
        outside.is_empty(),
        "listening outside loopback: {outside:?}"
    );
}
