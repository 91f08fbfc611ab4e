//! The tests, ported from upstream's `test/e2e/cloud`, `test/e2e/cloud/gcp` and
//! `test/e2e/network` (`loadbalancer.go`, `service.go`) with upstream's names, labels, steps
//! and timeouts (scaled by `--timeout-scale`). Each names the capabilities it needs instead
//! of the providers it runs on. Where upstream checks reachability from an exec pod inside
//! the cluster, these check it from outside (the provider's probe or the runner's machine),
//! through the load balancer.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use genplane_apimachinery::errors::chain;
use genplane_cloudprovider::Capability;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::ResourceExt as _;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::framework::{Context as _, Ctx, Error, NETEXEC_PORT, bail, ensure};
use crate::framework::{ingress, internal_ip, is_ready, node_port, node_ref, pod_ready, port16};
use crate::framework::{netexec_pod_spec, timeouts};
use crate::upgrades;

pub use crate::framework::CLEANUP_FINALIZER;

/// A test's body.
pub type Body = for<'a> fn(&'a Ctx) -> BoxFuture<'a, Result<(), Error>>;

/// One test.
#[derive(Debug)]
pub struct Spec {
    /// The full name, upstream's, with its labels in brackets.
    pub name: &'static str,
    /// Its labels (`Serial` ones run alone, after the others).
    pub labels: &'static [&'static str],
    /// What the provider must be able to do.
    pub needs: &'static [Capability],
    /// How long it may take, before scaling.
    pub timeout: Duration,
    /// What it does.
    pub body: Body,
}

impl Spec {
    /// Whether it must run alone.
    pub fn serial(&self) -> bool {
        self.labels.contains(&"Serial")
    }
}

const LB: &str = "Feature:LoadBalancer";
const MINUTES: u64 = 60;

/// Every test, in the order they run (serial ones are run last, in this order).
pub static SPECS: &[Spec] = &[
    Spec {
        name: "[sig-network] LoadBalancers [Feature:LoadBalancer] should be able to change the type and ports of a TCP service [Slow]",
        labels: &[LB, "Slow"],
        needs: &[Capability::LoadBalancer],
        timeout: Duration::from_secs(40 * MINUTES),
        body: |ctx| Box::pin(type_and_ports(ctx, "TCP")),
    },
    Spec {
        name: "[sig-network] LoadBalancers [Feature:LoadBalancer] should be able to change the type and ports of a UDP service [Slow]",
        labels: &[LB, "Slow"],
        needs: &[Capability::LoadBalancer, Capability::LoadBalancerUdp],
        timeout: Duration::from_secs(40 * MINUTES),
        body: |ctx| Box::pin(type_and_ports(ctx, "UDP")),
    },
    Spec {
        name: "[sig-network] LoadBalancers [Feature:LoadBalancer] should have session affinity work for LoadBalancer service with Local traffic policy [Slow] [LinuxOnly]",
        labels: &[LB, "Slow", "LinuxOnly"],
        needs: &[Capability::LoadBalancer, Capability::SessionAffinity],
        timeout: Duration::from_secs(30 * MINUTES),
        body: |ctx| Box::pin(session_affinity(ctx, false)),
    },
    Spec {
        name: "[sig-network] LoadBalancers [Feature:LoadBalancer] should be able to switch session affinity for LoadBalancer service with Local traffic policy [Slow] [LinuxOnly]",
        labels: &[LB, "Slow", "LinuxOnly"],
        needs: &[Capability::LoadBalancer, Capability::SessionAffinity],
        timeout: Duration::from_secs(30 * MINUTES),
        body: |ctx| Box::pin(session_affinity(ctx, true)),
    },
    Spec {
        name: "[sig-network] LoadBalancers [Feature:LoadBalancer] should handle load balancer cleanup finalizer for service [Slow]",
        labels: &[LB, "Slow"],
        needs: &[Capability::LoadBalancer],
        timeout: Duration::from_secs(30 * MINUTES),
        body: |ctx| Box::pin(cleanup_finalizer(ctx)),
    },
    Spec {
        name: "[sig-network] LoadBalancers ExternalTrafficPolicy: Local [Feature:LoadBalancer] [Slow] should only target nodes with endpoints",
        labels: &[LB, "Slow"],
        needs: &[
            Capability::LoadBalancer,
            Capability::ExternalTrafficPolicyLocal,
        ],
        timeout: Duration::from_secs(40 * MINUTES),
        body: |ctx| Box::pin(only_target_nodes_with_endpoints(ctx)),
    },
    Spec {
        name: "[sig-network] Services should release NodePorts on delete",
        labels: &[],
        needs: &[],
        timeout: Duration::from_secs(10 * MINUTES),
        body: |ctx| Box::pin(release_node_ports(ctx)),
    },
    Spec {
        name: "[sig-network] Services should delete a collection of services [Conformance]",
        labels: &["Conformance"],
        needs: &[],
        timeout: Duration::from_secs(5 * MINUTES),
        body: |ctx| Box::pin(delete_collection(ctx)),
    },
    Spec {
        name: "[sig-network] LoadBalancers ExternalTrafficPolicy: Local [Feature:LoadBalancer] [Slow] should work for type=LoadBalancer",
        labels: &[LB, "Slow"],
        needs: &[
            Capability::LoadBalancer,
            Capability::ExternalTrafficPolicyLocal,
        ],
        timeout: Duration::from_secs(25 * MINUTES),
        body: |ctx| Box::pin(local_keeps_client_ip(ctx)),
    },
    Spec {
        name: "[sig-network] LoadBalancers ExternalTrafficPolicy: Local [Feature:LoadBalancer] [Slow] should work from pods",
        labels: &[LB, "Slow"],
        needs: &[
            Capability::LoadBalancer,
            Capability::ExternalTrafficPolicyLocal,
            Capability::PodNetwork,
        ],
        timeout: Duration::from_secs(25 * MINUTES),
        body: |ctx| Box::pin(local_from_pods(ctx)),
    },
    Spec {
        name: "[sig-network] LoadBalancers [Feature:LoadBalancer] should only allow access from service loadbalancer source ranges [Slow]",
        labels: &[LB, "Slow"],
        needs: &[
            Capability::LoadBalancer,
            Capability::SourceRanges,
            Capability::PodNetwork,
        ],
        timeout: Duration::from_secs(25 * MINUTES),
        body: |ctx| Box::pin(source_ranges(ctx)),
    },
    Spec {
        name: "[sig-network] LoadBalancers [Feature:LoadBalancer] should be able to create LoadBalancer Service without NodePort and change it [Slow]",
        labels: &[LB, "Slow"],
        needs: &[Capability::LoadBalancer, Capability::LoadBalancerToPods],
        timeout: Duration::from_secs(25 * MINUTES),
        body: |ctx| Box::pin(without_node_ports(ctx)),
    },
    Spec {
        name: "[sig-network] LoadBalancers [Feature:LoadBalancer] should not have connectivity disruption during rolling update with externalTrafficPolicy=Cluster [Slow]",
        labels: &[LB, "Slow"],
        needs: &[Capability::LoadBalancer],
        timeout: Duration::from_secs(40 * MINUTES),
        body: |ctx| Box::pin(rolling_update_without_disruption(ctx, "Cluster")),
    },
    Spec {
        name: "[sig-network] LoadBalancers [Feature:LoadBalancer] should not have connectivity disruption during rolling update with externalTrafficPolicy=Local [Slow]",
        labels: &[LB, "Slow"],
        needs: &[
            Capability::LoadBalancer,
            Capability::ExternalTrafficPolicyLocal,
        ],
        timeout: Duration::from_secs(40 * MINUTES),
        body: |ctx| Box::pin(rolling_update_without_disruption(ctx, "Local")),
    },
    Spec {
        name: "[sig-network] Services should be possible to connect to a service via ExternalIP when the external IP is not assigned to a node",
        labels: &[],
        needs: &[Capability::ExternalIps, Capability::PodNetwork],
        timeout: Duration::from_secs(10 * MINUTES),
        body: |ctx| Box::pin(external_ip(ctx)),
    },
    Spec {
        name: "[sig-network] Services should be able to update service type to NodePort listening on same port number but different protocols",
        labels: &[],
        needs: &[Capability::PodNetwork],
        timeout: Duration::from_secs(10 * MINUTES),
        body: |ctx| Box::pin(same_port_other_protocol(ctx)),
    },
    Spec {
        name: "[sig-network] Services should be able to change the type from ExternalName to ClusterIP [Conformance]",
        labels: &["Conformance"],
        needs: &[Capability::PodNetwork],
        timeout: Duration::from_secs(10 * MINUTES),
        body: |ctx| Box::pin(from_external_name(ctx, "ClusterIP")),
    },
    Spec {
        name: "[sig-network] Services should be able to change the type from ExternalName to NodePort [Conformance]",
        labels: &["Conformance"],
        needs: &[Capability::PodNetwork],
        timeout: Duration::from_secs(10 * MINUTES),
        body: |ctx| Box::pin(from_external_name(ctx, "NodePort")),
    },
    Spec {
        name: "[sig-network] Services should be able to change the type from ClusterIP to ExternalName [Conformance]",
        labels: &["Conformance"],
        needs: &[],
        timeout: Duration::from_secs(10 * MINUTES),
        body: |ctx| Box::pin(to_external_name(ctx, "ClusterIP")),
    },
    Spec {
        name: "[sig-network] Services should be able to change the type from NodePort to ExternalName [Conformance]",
        labels: &["Conformance"],
        needs: &[],
        timeout: Duration::from_secs(10 * MINUTES),
        body: |ctx| Box::pin(to_external_name(ctx, "NodePort")),
    },
    Spec {
        name: "[sig-network] Services should fallback to terminating endpoints when there are no ready endpoints with internalTrafficPolicy=Cluster",
        labels: &[],
        needs: &[Capability::PodNetwork],
        timeout: Duration::from_secs(10 * MINUTES),
        body: |ctx| Box::pin(terminating_fallback(ctx, false)),
    },
    Spec {
        name: "[sig-network] Services should fallback to local terminating endpoints when there are no ready endpoints with internalTrafficPolicy=Local",
        labels: &[],
        needs: &[Capability::PodNetwork],
        timeout: Duration::from_secs(10 * MINUTES),
        body: |ctx| Box::pin(terminating_fallback(ctx, true)),
    },
    Spec {
        name: "[sig-cloud-provider-gcp] Upgrade [Feature:Upgrade] master upgrade should maintain a functioning cluster [Feature:MasterUpgrade] [Serial] [Disruptive]",
        labels: &[
            "Feature:Upgrade",
            "Feature:MasterUpgrade",
            "Serial",
            "Disruptive",
        ],
        needs: &[Capability::ControlPlaneUpgrade],
        timeout: Duration::from_secs(60 * MINUTES),
        body: |ctx| Box::pin(master_upgrade(ctx)),
    },
    Spec {
        name: "[sig-cloud-provider-gcp] Upgrade [Feature:Upgrade] cluster upgrade should maintain a functioning cluster [Feature:ClusterUpgrade] [Serial] [Disruptive]",
        labels: &[
            "Feature:Upgrade",
            "Feature:ClusterUpgrade",
            "Serial",
            "Disruptive",
        ],
        needs: &[Capability::ControlPlaneUpgrade, Capability::NodeUpgrade],
        timeout: Duration::from_secs(60 * MINUTES),
        body: |ctx| Box::pin(cluster_upgrade(ctx)),
    },
    Spec {
        name: "[sig-cloud-provider-gcp] Downgrade [Feature:Downgrade] cluster downgrade should maintain a functioning cluster [Feature:ClusterDowngrade] [Serial] [Disruptive]",
        labels: &[
            "Feature:Downgrade",
            "Feature:ClusterDowngrade",
            "Serial",
            "Disruptive",
        ],
        needs: &[Capability::ControlPlaneUpgrade, Capability::NodeUpgrade],
        timeout: Duration::from_secs(60 * MINUTES),
        body: |ctx| Box::pin(cluster_downgrade(ctx)),
    },
    Spec {
        name: "[sig-cloud-provider-gcp] Reboot [Disruptive] [Feature:Reboot] each node by ordering clean reboot and ensure they function upon restart [Serial]",
        labels: &["Disruptive", "Feature:Reboot", "Serial"],
        needs: &[Capability::NodeReboot],
        timeout: Duration::from_secs(30 * MINUTES),
        body: |ctx| Box::pin(reboot_each_node(ctx)),
    },
    Spec {
        name: "[sig-cloud-provider] [Feature:CloudProvider] [Disruptive] Nodes should be deleted on API server if it doesn't exist in the cloud provider [Serial]",
        labels: &["Feature:CloudProvider", "Disruptive", "Serial"],
        needs: &[Capability::NodeDeletion],
        timeout: Duration::from_secs(10 * MINUTES),
        body: |ctx| Box::pin(nodes_deleted(ctx)),
    },
];

fn probe_reachable<'a>(
    ctx: &'a Ctx,
    protocol: &'a str,
    address: &'a str,
    port: u16,
) -> BoxFuture<'a, Result<String, Error>> {
    Box::pin(async move {
        if protocol == "UDP" {
            ctx.wait_reachable_udp(address, port).await
        } else {
            ctx.wait_reachable_http(address, port).await
        }
    })
}

fn probe_unreachable<'a>(
    ctx: &'a Ctx,
    protocol: &'a str,
    address: &'a str,
    port: u16,
) -> BoxFuture<'a, Result<(), Error>> {
    Box::pin(async move {
        if protocol == "UDP" {
            ctx.wait_not_reachable_udp(address, port).await
        } else {
            ctx.wait_not_reachable_http(address, port).await
        }
    })
}

/// "should be able to change the type and ports of a TCP/UDP service".
async fn type_and_ports(ctx: &Ctx, protocol: &str) -> Result<(), Error> {
    let name = if protocol == "UDP" {
        "mutability-test-udp"
    } else {
        "mutability-test"
    };
    ctx.agnhost(name, 1, None).await?;
    ctx.step(format!("creating a {protocol} ClusterIP Service {name}"));
    let port = |port: i32, node_port: Option<i32>| {
        let mut p =
            json!({"name": "p", "port": port, "targetPort": NETEXEC_PORT, "protocol": protocol});
        if let Some(node_port) = node_port {
            p["nodePort"] = json!(node_port);
        }
        json!([p])
    };
    ctx.create_service(
        name,
        json!({"type": "ClusterIP", "selector": {"app": name}, "ports": port(80, None)}),
    )
    .await?;

    ctx.step("changing the Service to type=NodePort");
    let service = ctx
        .update_service(name, json!({"type": "NodePort"}))
        .await?;
    let first_node_port =
        node_port(&service).context("no node port allocated for type=NodePort")?;

    ctx.step("changing the Service to type=LoadBalancer");
    let service = ctx
        .update_service(name, json!({"type": "LoadBalancer"}))
        .await?;
    ensure!(
        node_port(&service) == Some(first_node_port),
        "the node port changed from {first_node_port} to {:?} with the type change to LoadBalancer",
        node_port(&service)
    );
    let address = ctx
        .wait_for_ingress(name, timeouts::LOAD_BALANCER_CREATE)
        .await?;
    probe_reachable(ctx, protocol, &address, 80).await?;

    ctx.step("changing the Service's node port");
    // upstream's ChangeServiceNodePort: the next free port, trying others while taken.
    let mut attempt = 0;
    let (service, new_node_port) = loop {
        attempt += 1;
        let candidate = 30000 + (first_node_port - 30000 + attempt) % 2768;
        match ctx
            .update_service(name, json!({"ports": port(80, Some(candidate))}))
            .await
        {
            Ok(service) => break (service, candidate),
            Err(error) if attempt < 100 && chain(&error).contains("already allocated") => {}
            Err(error) => return Err(error),
        }
    };
    ensure!(
        node_port(&service) == Some(new_node_port),
        "the node port is {:?}, not {new_node_port}",
        node_port(&service)
    );
    ensure_same_ingress(ctx, name, &address).await?;
    probe_reachable(ctx, protocol, &address, 80).await.context(
        "the load balancer does not answer after the node port changed: does the CCM update its ports?",
    )?;

    ctx.step("changing the Service's port");
    ctx.update_service(name, json!({"ports": port(81, Some(new_node_port))}))
        .await?;
    ensure_same_ingress(ctx, name, &address).await?;
    probe_reachable(ctx, protocol, &address, 81).await.context(
        "the load balancer does not answer on the new port: does the CCM update its ports?",
    )?;

    ctx.scale(name, 0).await?;
    probe_unreachable(ctx, protocol, &address, 81).await?;
    ctx.scale(name, 1).await?;
    probe_reachable(ctx, protocol, &address, 81).await?;

    ctx.step("changing the Service back to type=ClusterIP");
    let reference = ctx.service_ref(name).await?;
    let service = ctx
        .update_service(name, json!({"type": "ClusterIP", "ports": port(81, None)}))
        .await?;
    ensure!(
        node_port(&service).is_none(),
        "type=ClusterIP kept node port {:?}",
        node_port(&service)
    );
    let services = ctx.services();
    ctx.wait_for(
        "the Service's ingress to be cleared",
        timeouts::LOAD_BALANCER_LAG,
        || async { Ok(ingress(&services.get(name).await?).is_none().then_some(())) },
    )
    .await?;
    if protocol == "UDP" {
        if ctx.capabilities.has(Capability::DescribeLoadBalancer) {
            ctx.wait_for(
                "the cloud to delete the load balancer",
                timeouts::LOAD_BALANCER_LAG,
                || async {
                    Ok(ctx
                        .provider
                        .describe_load_balancer(&reference)
                        .await?
                        .is_none()
                        .then_some(()))
                },
            )
            .await?;
        }
        ctx.wait_not_reachable_udp(&address, 81).await
    } else {
        ctx.wait_for_load_balancer_destroyed(&reference, &address, 81)
            .await
    }
}

async fn ensure_same_ingress(ctx: &Ctx, name: &str, address: &str) -> Result<(), Error> {
    let now = ingress(&ctx.services().get(name).await?);
    ensure!(
        now.as_deref() == Some(address),
        "the load balancer's address changed from {address} to {now:?}"
    );
    Ok(())
}

/// upstream's `AffinityConfirmCount`: this many answers in a row from one pod is affinity.
const AFFINITY_CONFIRM_COUNT: usize = 15;

/// Waits until `AFFINITY_CONFIRM_COUNT` requests in a row reach one pod (`sticky`), or until
/// requests reach more than one (`!sticky`): upstream's `checkAffinity`.
async fn check_affinity(ctx: &Ctx, address: &str, port: u16, sticky: bool) -> Result<(), Error> {
    ctx.step(if sticky {
        "checking one client always reaches one pod"
    } else {
        "checking one client reaches several pods"
    });
    let what = if sticky {
        format!(
            "{AFFINITY_CONFIRM_COUNT} requests in a row to reach one pod (session affinity at the load balancer)"
        )
    } else {
        "requests to reach more than one pod".to_owned()
    };
    ctx.wait_for(
        &what,
        timeouts::LOAD_BALANCER_PROPAGATION.min(timeouts::LOAD_BALANCER_LAG),
        || async {
            let seen = ctx.hostnames(address, port, AFFINITY_CONFIRM_COUNT).await?;
            let mut distinct = seen.clone();
            distinct.sort();
            distinct.dedup();
            Ok(if sticky {
                (seen.len() == AFFINITY_CONFIRM_COUNT && distinct.len() == 1).then_some(())
            } else {
                (distinct.len() > 1).then_some(())
            })
        },
    )
    .await
}

/// "should have session affinity work / be able to switch session affinity for LoadBalancer
/// service with Local traffic policy" (`execAffinityTestForLBService(WithTransition)`).
async fn session_affinity(ctx: &Ctx, transition: bool) -> Result<(), Error> {
    let name = if transition {
        "affinity-lb-esipp-transition"
    } else {
        "affinity-lb-esipp"
    };
    let replicas = i32::try_from(ctx.ready_nodes().await?.len().clamp(2, 3))?;
    ctx.agnhost(name, replicas, None).await?;
    ctx.create_service(
        name,
        json!({"type": "LoadBalancer", "selector": {"app": name},
        "externalTrafficPolicy": "Local", "sessionAffinity": "ClientIP",
        "ports": [{"port": 80, "targetPort": NETEXEC_PORT, "protocol": "TCP"}]}),
    )
    .await?;
    let address = ctx
        .wait_for_ingress(name, timeouts::LOAD_BALANCER_CREATE)
        .await?;
    ctx.wait_reachable_http(&address, 80).await?;
    check_affinity(ctx, &address, 80, true).await?;
    if transition {
        ctx.step("switching session affinity off");
        ctx.update_service(name, json!({"sessionAffinity": "None"}))
            .await?;
        check_affinity(ctx, &address, 80, false).await?;
        ctx.step("switching session affinity on again");
        ctx.update_service(name, json!({"sessionAffinity": "ClientIP"}))
            .await?;
        check_affinity(ctx, &address, 80, true).await?;
    }
    Ok(())
}

/// "should handle load balancer cleanup finalizer for service".
async fn cleanup_finalizer(ctx: &Ctx) -> Result<(), Error> {
    let name = "lb-finalizer";
    ctx.create_service(
        name,
        json!({"type": "LoadBalancer", "selector": {"app": name},
        "ports": [{"port": 80, "targetPort": NETEXEC_PORT, "protocol": "TCP"}]}),
    )
    .await?;
    ctx.wait_for_ingress(name, timeouts::LOAD_BALANCER_CREATE)
        .await?;
    ctx.wait_finalizer(name, true).await?;
    ctx.step("changing the Service to type=ClusterIP");
    ctx.update_service(name, json!({"type": "ClusterIP"}))
        .await?;
    ctx.wait_finalizer(name, false).await?;
    ctx.step("changing the Service back to type=LoadBalancer");
    ctx.update_service(name, json!({"type": "LoadBalancer"}))
        .await?;
    ctx.wait_finalizer(name, true).await?;
    let reference = ctx.service_ref(name).await?;
    ctx.step("deleting the Service");
    ctx.services()
        .delete(name, &DeleteParams::default())
        .await?;
    let services = ctx.services();
    let describes = ctx.capabilities.has(Capability::DescribeLoadBalancer);
    ctx.wait_for(&format!("Service {name} to be deleted"), timeouts::LOAD_BALANCER_LAG, || async {
        if services.get_opt(name).await?.is_some() {
            return Ok(None);
        }
        if describes && ctx.provider.describe_load_balancer(&reference).await?.is_some() {
            bail!("Service {name} is gone but the cloud still has its load balancer: the finalizer must hold the Service until the load balancer is deleted");
        }
        Ok(Some(()))
    })
    .await
}

/// "should only target nodes with endpoints" (ExternalTrafficPolicy: Local).
async fn only_target_nodes_with_endpoints(ctx: &Ctx) -> Result<(), Error> {
    let name = "external-local-nodes";
    let nodes: Vec<Node> = ctx.ready_nodes().await?.into_iter().take(3).collect();
    ensure!(!nodes.is_empty(), "no Ready node");
    let service = ctx
        .create_service(
            name,
            json!({"type": "LoadBalancer", "selector": {"app": name},
            "externalTrafficPolicy": "Local",
            "ports": [{"port": 80, "targetPort": NETEXEC_PORT, "protocol": "TCP"}]}),
        )
        .await?;
    let health_port = service
        .spec
        .as_ref()
        .and_then(|s| s.health_check_node_port)
        .filter(|p| *p != 0)
        .context("the Service has no healthCheckNodePort")?;
    let health_port = port16(health_port)?;
    let address = ctx
        .wait_for_ingress(name, timeouts::LOAD_BALANCER_CREATE)
        .await?;
    for (index, node) in nodes.iter().enumerate() {
        let node_name = node.name_any();
        if index == 0 {
            ctx.agnhost(name, 1, Some(&node_name)).await?;
        } else {
            ctx.step(format!("moving the endpoint to {node_name}"));
            ctx.deployments()
                .patch(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"template": {"spec": {
                    "nodeSelector": {"kubernetes.io/hostname": node_name}}}}})),
                )
                .await?;
        }
        let pods = ctx.pods();
        ctx.wait_for(
            &format!("the only endpoint pod to run on {node_name}"),
            timeouts::POD_START,
            || async {
                let live: Vec<Pod> = pods
                    .list(&ListParams::default().labels(&format!("app={name}")))
                    .await?
                    .items;
                Ok((live.len() == 1
                    && pod_ready(&live[0])
                    && live[0].spec.as_ref().and_then(|s| s.node_name.as_deref())
                        == Some(node_name.as_str()))
                .then_some(()))
            },
        )
        .await?;
        ctx.wait_reachable_http(&address, 80).await?;
        ctx.step(format!(
            "checking the health-check node port {health_port} passes on {node_name} only"
        ));
        ctx.wait_for(
            &format!("the health check on port {health_port} to pass on {node_name} only"),
            timeouts::KUBE_PROXY_LAG,
            || async {
                for other in &nodes {
                    let ip = internal_ip(other).context("a node without an InternalIP")?;
                    let passes = ctx.http_get(&ip, health_port, "/healthz").await?.is_some();
                    if passes != (other.name_any() == node_name) {
                        return Ok(None);
                    }
                }
                Ok(Some(()))
            },
        )
        .await?;
    }
    Ok(())
}

/// "should release NodePorts on delete": a deleted Service's node port can be taken again.
async fn release_node_ports(ctx: &Ctx) -> Result<(), Error> {
    let name = "nodeport-reuse";
    let spec = |node_port: Option<i32>| {
        let mut port = json!({"port": 80, "targetPort": NETEXEC_PORT, "protocol": "TCP"});
        if let Some(node_port) = node_port {
            port["nodePort"] = json!(node_port);
        }
        json!({"type": "NodePort", "selector": {"app": name}, "ports": [port]})
    };
    let service = ctx.create_service(name, spec(None)).await?;
    let taken = node_port(&service).context("no node port allocated")?;
    ctx.step(format!("deleting the Service holding node port {taken}"));
    ctx.services()
        .delete(name, &DeleteParams::default())
        .await?;
    let services = ctx.services();
    ctx.wait_for(
        &format!("Service {name} to be deleted"),
        timeouts::KUBE_PROXY_LAG,
        || async { Ok(services.get_opt(name).await?.is_none().then_some(())) },
    )
    .await?;
    ctx.step(format!("creating a Service with node port {taken} again"));
    let again = ctx
        .create_service(name, spec(Some(taken)))
        .await
        .with_context(|| {
            format!("node port {taken} was not released when its Service was deleted")
        })?;
    ensure!(
        node_port(&again) == Some(taken),
        "the Service got node port {:?}, not {taken}",
        node_port(&again)
    );
    Ok(())
}

/// "should delete a collection of services".
async fn delete_collection(ctx: &Ctx) -> Result<(), Error> {
    let selector = "e2e-test-service=delete-collection";
    for (index, labelled) in [true, true, true, false].iter().enumerate() {
        let name = format!("e2e-svc-{index}");
        let mut service: k8s_openapi::api::core::v1::Service = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"type": "ClusterIP", "ports": [{"port": 80, "targetPort": 80, "protocol": "TCP"}]}}))?;
        if *labelled {
            service
                .labels_mut()
                .insert("e2e-test-service".into(), "delete-collection".into());
        }
        ctx.services().create(&Default::default(), &service).await?;
    }
    ctx.step(format!("deleting the Services labelled {selector}"));
    ctx.services()
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels(selector),
        )
        .await
        .context("deletecollection of services")?;
    let services = ctx.services();
    ctx.wait_for(
        "one Service to remain",
        timeouts::KUBE_PROXY_LAG,
        || async {
            let left = services.list(&ListParams::default()).await?.items;
            Ok((left.len() == 1).then_some(()))
        },
    )
    .await
}

/// "master upgrade should maintain a functioning cluster": the upgrade tests
/// ([`upgrades`](crate::upgrades)) run while the control plane goes to `--upgrade-target`.
async fn master_upgrade(ctx: &Ctx) -> Result<(), Error> {
    upgrades::run(ctx, &upgrades::MASTER_UPGRADE).await
}

/// "cluster upgrade should maintain a functioning cluster": the upgrade tests run while the
/// control plane, then the nodes go to `--upgrade-target`.
async fn cluster_upgrade(ctx: &Ctx) -> Result<(), Error> {
    upgrades::run(ctx, &upgrades::CLUSTER_UPGRADE).await
}

/// "cluster downgrade should maintain a functioning cluster": the upgrade tests run while the
/// nodes, then the control plane go to `--upgrade-target` (an older version; "nodes must
/// downgrade first", upstream says: a kubelet may not be newer than its API server).
async fn cluster_downgrade(ctx: &Ctx) -> Result<(), Error> {
    upgrades::run(ctx, &upgrades::CLUSTER_DOWNGRADE).await
}

/// The start time of `pod`'s first container, as reported.
fn started_at(pod: &Pod) -> Option<k8s_openapi::jiff::Timestamp> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .first()?
        .state
        .as_ref()?
        .running
        .as_ref()?
        .started_at
        .as_ref()
        .map(|t| t.0)
}

/// "each node by ordering clean reboot and ensure they function upon restart": each node is
/// rebooted in turn; it is Ready again and its pods run again (restarted: their containers'
/// start time is after the reboot) and are Ready.
async fn reboot_each_node(ctx: &Ctx) -> Result<(), Error> {
    let nodes = ctx.ready_nodes().await?;
    let replicas = i32::try_from(nodes.len())?;
    ctx.agnhost("reboot", replicas, None).await?;
    let node_api: Api<Node> = Api::all(ctx.client.clone());
    for node in &nodes {
        let node_name = node.name_any();
        let pods = ctx.pods();
        let on_node = || async {
            let list = pods
                .list(&ListParams::default().labels("app=reboot"))
                .await?
                .items;
            Ok::<_, Error>(
                list.into_iter()
                    .filter(|p| {
                        p.spec.as_ref().and_then(|s| s.node_name.as_deref())
                            == Some(node_name.as_str())
                    })
                    .collect::<Vec<Pod>>(),
            )
        };
        let before = on_node().await?;
        // Start times are reported to the second: reboot in a later second than any start.
        let latest = before.iter().filter_map(started_at).max();
        ctx.wait_for(
            "the clock to pass the pods' start",
            Duration::from_secs(30),
            || async {
                Ok((latest.is_none_or(|t| {
                    k8s_openapi::jiff::Timestamp::now().as_second() > t.as_second()
                }))
                .then_some(()))
            },
        )
        .await?;
        let rebooted_at = k8s_openapi::jiff::Timestamp::now().as_second();
        ctx.step(format!(
            "rebooting {node_name} ({} pods on it)",
            before.len()
        ));
        ctx.provider.reboot_instance(&node_ref(node)).await?;
        ctx.wait_for(
            &format!("{node_name} to be Ready again"),
            timeouts::NODE_READY_AGAIN,
            || async {
                Ok(node_api
                    .get_opt(&node_name)
                    .await?
                    .filter(is_ready)
                    .map(|_| ()))
            },
        )
        .await?;
        ctx.wait_for(
            &format!("the pods on {node_name} to run again after the reboot"),
            timeouts::NODE_READY_AGAIN,
            || async {
                let now = on_node().await?;
                let restarted = now.len() == before.len()
                    && now.iter().all(|p| {
                        pod_ready(p) && started_at(p).is_some_and(|t| t.as_second() >= rebooted_at)
                    });
                Ok(restarted.then_some(()))
            },
        )
        .await?;
    }
    Ok(())
}

/// "Nodes should be deleted on API server if it doesn't exist in the cloud provider".
async fn nodes_deleted(ctx: &Ctx) -> Result<(), Error> {
    let nodes = ctx.ready_nodes().await?;
    let victim = nodes.last().context("no Ready schedulable node")?;
    let victim_name = victim.name_any();
    let node_api: Api<Node> = Api::all(ctx.client.clone());
    let original = node_api
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .filter(|n| is_ready(n))
        .count();
    ctx.step(format!("deleting the instance of {victim_name}"));
    ctx.provider.delete_instance(&node_ref(victim)).await?;
    ctx.wait_for(
        &format!(
            "{} Ready nodes, {victim_name} deleted from the API server by the CCM",
            original - 1
        ),
        timeouts::NODE_READY_AGAIN,
        || async {
            let list = node_api.list(&ListParams::default()).await?.items;
            let ready = list.iter().filter(|n| is_ready(n)).count();
            Ok(
                (ready == original - 1 && list.iter().all(|n| n.name_any() != victim_name))
                    .then_some(()),
            )
        },
    )
    .await?;
    ensure!(
        node_api.get_opt(&victim_name).await?.is_none(),
        "{victim_name} still exists"
    );
    Ok(())
}

/// A Service's ClusterIP.
fn cluster_ip(service: &Service) -> Result<String, Error> {
    service
        .spec
        .as_ref()
        .and_then(|s| s.cluster_ip.clone())
        .filter(|ip| !ip.is_empty() && ip != "None")
        .with_context(|| format!("Service {} has no ClusterIP", service.name_any()))
}

/// The node ports of a Service's ports, in order (0 for none).
fn node_ports(service: &Service) -> Vec<i32> {
    service
        .spec
        .iter()
        .flat_map(|s| s.ports.iter().flatten())
        .map(|p| p.node_port.unwrap_or(0))
        .collect()
}

/// The address of the first Ready node, and its name.
async fn first_node(ctx: &Ctx) -> Result<(String, String), Error> {
    let node = ctx
        .ready_nodes()
        .await?
        .into_iter()
        .next()
        .context("no Ready schedulable node")?;
    let ip = internal_ip(&node).context("a node without an InternalIP")?;
    Ok((node.name_any(), ip))
}

/// The load balancer's address of `name`, skipping the test as upstream does when traffic to
/// it is not delivered to the nodes with that address kept (`ipMode: Proxy`, or a host
/// name).
async fn vip_ingress(ctx: &Ctx, name: &str) -> Result<String, Error> {
    let address = ctx
        .wait_for_ingress(name, timeouts::LOAD_BALANCER_CREATE)
        .await?;
    let service = ctx.services().get(name).await?;
    let first = service
        .status
        .and_then(|s| s.load_balancer)
        .and_then(|l| l.ingress)
        .and_then(|i| i.into_iter().next());
    let proxy = first.as_ref().and_then(|i| i.ip_mode.as_deref()) == Some("Proxy");
    if first.and_then(|i| i.ip).is_none() || proxy {
        return Err(Error::Skip(format!(
            "the load balancer of {name} has no IP, or its ipMode is Proxy: the client's address cannot be kept (upstream issue 123714)"
        )));
    }
    Ok(address)
}

/// "ExternalTrafficPolicy: Local should work for type=LoadBalancer": the pods see the
/// client's own address, not a node's; when the Service is no longer a load balancer its
/// health-check node port stops answering.
async fn local_keeps_client_ip(ctx: &Ctx) -> Result<(), Error> {
    let name = "external-local-lb";
    ctx.agnhost(name, 1, None).await?;
    let service = ctx
        .create_service(
            name,
            json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local",
            "selector": {"app": name},
            "ports": [{"port": 80, "targetPort": NETEXEC_PORT, "protocol": "TCP"}]}),
        )
        .await?;
    let health_port = service
        .spec
        .as_ref()
        .and_then(|s| s.health_check_node_port)
        .filter(|p| *p != 0)
        .context("the Service has no healthCheckNodePort")?;
    let health_port = port16(health_port)?;
    let address = vip_ingress(ctx, name).await?;
    ctx.step(format!(
        "reading the client address the pod sees through {address}"
    ));
    let seen = ctx
        .wait_for(
            &format!("http://{address}:80/clientip to answer"),
            timeouts::LOAD_BALANCER_LAG,
            || async { ctx.http_get(&address, 80, "/clientip").await },
        )
        .await?;
    let host = seen.rsplit_once(':').map_or(seen.as_str(), |(h, _)| h);
    let nodes = ctx.ready_nodes().await?;
    let node_ips: Vec<String> = nodes.iter().filter_map(internal_ip).collect();
    ensure!(
        !node_ips.iter().any(|ip| ip == host),
        "the pod saw the client as {host}, a node's address: with externalTrafficPolicy=Local the client's address must be kept"
    );
    ctx.step("changing the Service to type=ClusterIP");
    ctx.update_service(
        name,
        json!({"type": "ClusterIP", "externalTrafficPolicy": null}),
    )
    .await?;
    ctx.wait_for(
        &format!("the health-check node port {health_port} to stop answering on every node"),
        timeouts::KUBE_PROXY_LAG,
        || async {
            for ip in &node_ips {
                if ctx.http_get(ip, health_port, "/healthz").await?.is_some() {
                    return Ok(None);
                }
            }
            Ok(Some(()))
        },
    )
    .await
}

/// "ExternalTrafficPolicy: Local should work from pods": a pod asking the load balancer is
/// seen with its own address.
async fn local_from_pods(ctx: &Ctx) -> Result<(), Error> {
    let name = "external-local-pods";
    ctx.agnhost(name, 1, None).await?;
    ctx.create_service(
        name,
        json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local",
        "selector": {"app": name},
        "ports": [{"port": 80, "targetPort": NETEXEC_PORT, "protocol": "TCP"}]}),
    )
    .await?;
    let address = vip_ingress(ctx, name).await?;
    let (node, _) = first_node(ctx).await?;
    let client = ctx.netexec_pod("pause-pod", "pause", &node, &[], 0).await?;
    let client_ip = client
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .context("the client pod has no address")?;
    ctx.step(format!("asking {address}/clientip from pod {client_ip}"));
    let what = format!("the load balancer to see Pod pause-pod as {client_ip}");
    ctx.wait_for(&what, timeouts::LOAD_BALANCER_PROPAGATION, || async {
        let seen = ctx.dial(&client, &address, 80, "http", "clientip").await?;
        let host = seen
            .as_deref()
            .map(|s| s.rsplit_once(':').map_or(s, |(h, _)| h).to_owned());
        Ok((host.as_deref() == Some(client_ip.as_str())).then_some(()))
    })
    .await
}

/// "should only allow access from service loadbalancer source ranges": only pods within
/// `loadBalancerSourceRanges` reach the load balancer, as the ranges change.
async fn source_ranges(ctx: &Ctx) -> Result<(), Error> {
    let name = "lb-sourcerange";
    ctx.agnhost(name, 1, None).await?;
    let (node, _) = first_node(ctx).await?;
    let accept = ctx
        .netexec_pod("accept-pod", "accept", &node, &[], 0)
        .await?;
    let drop = ctx.netexec_pod("drop-pod", "drop", &node, &[], 0).await?;
    let ip = |pod: &Pod| {
        pod.status
            .as_ref()
            .and_then(|s| s.pod_ip.clone())
            .context("a pod without an address")
    };
    let (accept_ip, drop_ip) = (ip(&accept)?, ip(&drop)?);
    ctx.create_service(
        name,
        json!({"type": "LoadBalancer", "selector": {"app": name},
        "loadBalancerSourceRanges": [format!("{accept_ip}/32")],
        "ports": [{"port": 80, "targetPort": NETEXEC_PORT, "protocol": "TCP"}]}),
    )
    .await?;
    let address = ctx
        .wait_for_ingress(name, timeouts::LOAD_BALANCER_CREATE)
        .await?;
    let only = |allowed: &'static str| {
        let (accept, drop, address) = (&accept, &drop, address.as_str());
        async move {
            let what = format!("only {allowed} to reach the load balancer {address}");
            ctx.step(format!("waiting for {what}"));
            ctx.wait_for(&what, timeouts::LOAD_BALANCER_PROPAGATION, || async {
                let a = ctx
                    .dial(accept, address, 80, "http", "hostname")
                    .await?
                    .is_some();
                let d = ctx
                    .dial(drop, address, 80, "http", "hostname")
                    .await?
                    .is_some();
                Ok(match allowed {
                    "accept-pod" => a && !d,
                    "drop-pod" => d && !a,
                    _ => a && d,
                }
                .then_some(()))
            })
            .await
        }
    };
    only("accept-pod").await?;
    ctx.step(format!("allowing only {drop_ip}/32"));
    ctx.update_service(
        name,
        json!({"loadBalancerSourceRanges": [format!("{drop_ip}/32")]}),
    )
    .await?;
    only("drop-pod").await?;
    ctx.step("removing the source ranges");
    ctx.update_service(name, json!({"loadBalancerSourceRanges": null}))
        .await?;
    only("both pods").await
}

/// "should be able to update service type to NodePort listening on same port number but
/// different protocols": a NodePort Service gets 80/UDP beside 80/TCP, a node port for
/// each, and both answer.
async fn same_port_other_protocol(ctx: &Ctx) -> Result<(), Error> {
    let name = "nodeport-update-service";
    ctx.agnhost(name, 2, None).await?;
    let tcp =
        json!({"name": "tcp-port", "port": 80, "targetPort": NETEXEC_PORT, "protocol": "TCP"});
    let service = ctx
        .create_service(
            name,
            json!({"type": "ClusterIP", "selector": {"app": name}, "ports": [tcp]}),
        )
        .await?;
    let ip = cluster_ip(&service)?;
    let (node, node_ip) = first_node(ctx).await?;
    let client = ctx.netexec_pod("execpod", "execpod", &node, &[], 0).await?;
    let from_backend = |h: &str| h.starts_with(name);
    ctx.wait_dial(&client, &ip, 80, "http", from_backend)
        .await?;
    ctx.step("changing the Service to type=NodePort");
    let service = ctx
        .update_service(name, json!({"type": "NodePort"}))
        .await?;
    let first = node_port(&service).context("no node port for type=NodePort")?;
    ctx.wait_dial(&client, &node_ip, port16(first)?, "http", from_backend)
        .await?;
    ctx.step("adding port 80/UDP");
    let udp =
        json!({"name": "udp-port", "port": 80, "targetPort": NETEXEC_PORT, "protocol": "UDP"});
    let service = ctx
        .update_service(name, json!({"ports": [tcp, udp]}))
        .await?;
    let ports = node_ports(&service);
    ensure!(
        ports.len() == 2 && ports.iter().all(|p| *p != 0),
        "expected two ports with node ports, got node ports {ports:?}"
    );
    ctx.wait_dial(&client, &ip, 80, "udp", from_backend).await?;
    ctx.wait_dial(&client, &node_ip, port16(ports[0])?, "http", from_backend)
        .await?;
    ctx.wait_dial(&client, &node_ip, port16(ports[1])?, "udp", from_backend)
        .await?;
    Ok(())
}

/// "should be able to change the type from ExternalName to ClusterIP/NodePort": the
/// Service gets a ClusterIP (and node port) and answers.
async fn from_external_name(ctx: &Ctx, target: &str) -> Result<(), Error> {
    let name = "externalname-service";
    ctx.create_service(
        name,
        json!({"type": "ExternalName", "externalName": "foo.example.com"}),
    )
    .await?;
    ctx.agnhost(name, 2, None).await?;
    ctx.step(format!("changing the Service to type={target}"));
    let service = ctx
        .update_service(
            name,
            json!({"type": target, "externalName": null, "selector": {"app": name},
            "ports": [{"port": 80, "targetPort": NETEXEC_PORT, "protocol": "TCP"}]}),
        )
        .await?;
    let ip = cluster_ip(&service).context("no ClusterIP after the change from ExternalName")?;
    let (node, node_ip) = first_node(ctx).await?;
    let client = ctx.netexec_pod("execpod", "execpod", &node, &[], 0).await?;
    let from_backend = |h: &str| h.starts_with(name);
    ctx.wait_dial(&client, &ip, 80, "http", from_backend)
        .await?;
    if target == "NodePort" {
        let port = node_port(&service).context("no node port for type=NodePort")?;
        ctx.wait_dial(&client, &node_ip, port16(port)?, "http", from_backend)
            .await?;
    }
    Ok(())
}

/// "should be able to change the type from ClusterIP/NodePort to ExternalName": the
/// Service gives up its ClusterIP and node ports. (Upstream then resolves the name through
/// the cluster's DNS; the runner has no DNS to ask, so it checks the API's side only.)
async fn to_external_name(ctx: &Ctx, from: &str) -> Result<(), Error> {
    let name = if from == "NodePort" {
        "nodeport-service"
    } else {
        "clusterip-service"
    };
    let service = ctx
        .create_service(
            name,
            json!({"type": from, "selector": {"app": name},
            "ports": [{"port": 80, "targetPort": NETEXEC_PORT, "protocol": "TCP"}]}),
        )
        .await?;
    cluster_ip(&service)?;
    let external = format!("externalsvc.{}.svc.cluster.local", ctx.namespace);
    ctx.step(format!(
        "changing the Service to type=ExternalName {external}"
    ));
    let service = ctx
        .update_service(
            name,
            json!({"type": "ExternalName", "externalName": external}),
        )
        .await?;
    let spec = service.spec.clone().unwrap_or_default();
    ensure!(
        spec.cluster_ip.as_deref().unwrap_or("").is_empty(),
        "the ExternalName Service kept ClusterIP {:?}",
        spec.cluster_ip
    );
    ensure!(
        node_ports(&service).iter().all(|p| *p == 0),
        "the ExternalName Service kept node ports {:?}",
        node_ports(&service)
    );
    ensure!(
        spec.external_name.as_deref() == Some(external.as_str()),
        "externalName is {:?}",
        spec.external_name
    );
    Ok(())
}

/// "should fallback to (local) terminating endpoints when there are no ready endpoints with
/// internalTrafficPolicy=Cluster/Local": a Service whose only endpoint is terminating
/// still forwards to it, from every node (Cluster) or from its node only (Local).
async fn terminating_fallback(ctx: &Ctx, local: bool) -> Result<(), Error> {
    let nodes = ctx.ready_nodes().await?;
    if nodes.len() < 2 {
        return Err(Error::Skip(
            "the test needs at least 2 Ready schedulable nodes".into(),
        ));
    }
    let (node0, node1) = (nodes[0].name_any(), nodes[1].name_any());
    let name = "svc-terminating";
    let server = "webserver-pod";
    ctx.netexec_pod(server, "webserver", &node0, &["--delay-shutdown=100"], 100)
        .await?;
    let pod0 = ctx.netexec_pod("pod0", "client", &node0, &[], 0).await?;
    let pod1 = ctx.netexec_pod("pod1", "client", &node1, &[], 0).await?;
    let policy = if local { "Local" } else { "Cluster" };
    let service = ctx
        .create_service(
            name,
            json!({"selector": {"app": "webserver"}, "internalTrafficPolicy": policy,
            "ports": [{"port": 80, "targetPort": NETEXEC_PORT, "protocol": "TCP"}]}),
        )
        .await?;
    let ip = cluster_ip(&service)?;
    let is_server = |h: &str| h == server;
    ctx.wait_dial(&pod0, &ip, 80, "http", is_server).await?;
    if !local {
        ctx.wait_dial(&pod1, &ip, 80, "http", is_server).await?;
    }
    ctx.step(format!(
        "deleting {server}: its endpoint is left terminating"
    ));
    let pods = ctx.pods();
    pods.delete(server, &DeleteParams::default()).await?;
    let slices: Api<EndpointSlice> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    ctx.wait_for(
        "the endpoint to be terminating and serving, not ready",
        timeouts::KUBE_PROXY_LAG,
        || async {
            let list = slices
                .list(&ListParams::default().labels(&format!("kubernetes.io/service-name={name}")))
                .await?;
            let terminating = list.items.iter().flat_map(|s| &s.endpoints).any(|e| {
                let c = e.conditions.clone().unwrap_or_default();
                c.ready == Some(false) && c.serving == Some(true) && c.terminating == Some(true)
            });
            Ok(terminating.then_some(()))
        },
    )
    .await?;
    // upstream's execHostnameTest retries until it reaches the pod; reaching nothing is a
    // single try that must fail.
    let only_terminating = "a Service with only terminating endpoints must still use them";
    for round in 1..=5 {
        ctx.step(format!(
            "round {round}: asking the Service from pod0 and pod1"
        ));
        ctx.wait_dial(&pod0, &ip, 80, "http", is_server)
            .await
            .with_context(|| {
                format!("pod0, on the terminating endpoint's node: {only_terminating}")
            })?;
        if local {
            let from1 = ctx.dial(&pod1, &ip, 80, "http", "hostname").await?;
            ensure!(
                from1.is_none(),
                "pod1 reached {from1:?} on another node although internalTrafficPolicy is Local"
            );
        } else {
            ctx.wait_dial(&pod1, &ip, 80, "http", is_server)
                .await
                .with_context(|| format!("pod1: {only_terminating}"))?;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    ctx.step(format!("removing {server} at once"));
    pods.delete(server, &DeleteParams::default().grace_period(0))
        .await?;
    Ok(())
}

/// How many rolling updates the disruption test makes, and the share of requests that must
/// succeed during each (upstream's).
const ROLLING_UPDATES: usize = 5;
const MIN_SUCCESS_RATE: f64 = 0.95;

/// "should not have connectivity disruption during rolling update with
/// externalTrafficPolicy=Cluster/Local" (`testRollingUpdateLBConnectivityDisruption`).
/// Upstream rolls a DaemonSet; this cluster may serve no DaemonSets, so a Deployment of one
/// pod per node rolls instead (`maxUnavailable: 10%`), its pods serving on for the scaled
/// `--delay-shutdown=60` after they are told to stop, while requests go through the load
/// balancer without keep-alive. At least 95% of them succeed during each of five updates.
async fn rolling_update_without_disruption(ctx: &Ctx, policy: &str) -> Result<(), Error> {
    let nodes = ctx.ready_nodes().await?.len();
    if !(2..=25).contains(&nodes) {
        return Err(Error::Skip(format!(
            "the test needs 2 to 25 Ready schedulable nodes, not {nodes}"
        )));
    }
    let name = "lb-rolling-update";
    let shutdown = ctx.timeout(Duration::from_secs(60)).as_secs().max(1);
    let mut pod_spec = netexec_pod_spec(&[&format!("--delay-shutdown={shutdown}")]);
    pod_spec["terminationGracePeriodSeconds"] = json!(shutdown + 1);
    let replicas = i32::try_from(nodes)?;
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%"}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec}}}))?;
    ctx.step(format!(
        "creating a Deployment {name} of {replicas} agnhost netexec pods"
    ));
    ctx.deployments()
        .create(&PostParams::default(), &deployment)
        .await?;
    ctx.wait_ready_pods(name, replicas).await?;
    ctx.create_service(
        name,
        json!({"type": "LoadBalancer", "externalTrafficPolicy": policy,
        "selector": {"app": name},
        "ports": [{"port": 80, "targetPort": NETEXEC_PORT, "protocol": "TCP"}]}),
    )
    .await?;
    let address = ctx
        .wait_for_ingress(name, timeouts::LOAD_BALANCER_CREATE)
        .await?;
    ctx.wait_reachable_http(&address, 80).await?;
    let sent = AtomicUsize::new(0);
    let answered = AtomicUsize::new(0);
    let done = AtomicBool::new(false);
    let traffic = async {
        while !done.load(Ordering::Relaxed) {
            let body = ctx.http_get(&address, 80, "/echo?msg=hello").await;
            sent.fetch_add(1, Ordering::Relaxed);
            if matches!(body, Ok(Some(ref b)) if b == "hello") {
                answered.fetch_add(1, Ordering::Relaxed);
            }
        }
    };
    let updates = async {
        let outcome = async {
            for version in 1..=ROLLING_UPDATES {
                sent.store(0, Ordering::Relaxed);
                answered.store(0, Ordering::Relaxed);
                ctx.step(format!("rolling update {version}: VERSION={version}"));
                let env = json!([{"name": "VERSION", "value": version.to_string()}]);
                ctx.deployments()
                    .patch(
                        name,
                        &PatchParams::default(),
                        &Patch::Strategic(json!({"spec": {"template": {"spec": {
                            "containers": [{"name": "agnhost", "env": env}]}}}})),
                    )
                    .await?;
                ctx.wait_rolled_out(name, replicas).await?;
                let (total, good) = (sent.load(Ordering::Relaxed), answered.load(Ordering::Relaxed));
                let rate = if total == 0 { 0.0 } else { good as f64 / total as f64 };
                ctx.step(format!("{good} of {total} requests answered during update {version}"));
                ensure!(
                    total > 0 && rate >= MIN_SUCCESS_RATE,
                    "only {good} of {total} requests through the load balancer were answered during rolling update {version} (at least {:.0}% must be): does the load balancer drain nodes whose pods go?",
                    MIN_SUCCESS_RATE * 100.0
                );
            }
            Ok::<_, Error>(())
        }
        .await;
        done.store(true, Ordering::Relaxed);
        outcome
    };
    let ((), outcome) = tokio::join!(traffic, updates);
    outcome?;
    ctx.wait_reachable_http(&address, 80).await.map(|_| ())
}

/// "should be possible to connect to a service via ExternalIP when the external IP is not
/// assigned to a node": a ClusterIP Service with `externalIPs: [--external-ip]` answers
/// there, from inside the cluster.
async fn external_ip(ctx: &Ctx) -> Result<(), Error> {
    let name = "externalip-test";
    let address = ctx.external_ip.clone();
    let created = ctx
        .create_service(
            name,
            json!({"type": "ClusterIP", "selector": {"app": name}, "externalIPs": [address],
            "ports": [{"name": "http", "port": 80, "targetPort": NETEXEC_PORT, "protocol": "TCP"}]}),
        )
        .await;
    if let Err(error) = &created
        && chain(&error).contains("Use of external IPs is denied by admission control")
    {
        return Err(Error::Skip(
            "the cluster's admission control denies external IPs".into(),
        ));
    }
    let service = created?;
    ctx.agnhost(name, 2, None).await?;
    let (node, _) = first_node(ctx).await?;
    let client = ctx.netexec_pod("execpod", "execpod", &node, &[], 0).await?;
    let from_backend = |h: &str| h.starts_with(name);
    ctx.wait_dial(&client, &cluster_ip(&service)?, 80, "http", from_backend)
        .await?;
    ctx.wait_dial(&client, &address, 80, "http", from_backend)
        .await
        .with_context(|| format!("the Service does not answer on its external IP {address}"))?;
    Ok(())
}

/// "should be able to create LoadBalancer Service without NodePort and change it": a
/// load balancer with `allocateLoadBalancerNodePorts: false` has no node port and answers;
/// allowed node ports again, it gets one and keeps its address.
async fn without_node_ports(ctx: &Ctx) -> Result<(), Error> {
    let name = "lb-without-nodeport";
    ctx.agnhost(name, 1, None).await?;
    ctx.create_service(
        name,
        json!({"type": "ClusterIP", "selector": {"app": name},
        "ports": [{"port": 80, "targetPort": NETEXEC_PORT, "protocol": "TCP"}]}),
    )
    .await?;
    ctx.step("changing the Service to type=LoadBalancer without node ports");
    let service = ctx
        .update_service(
            name,
            json!({"type": "LoadBalancer", "allocateLoadBalancerNodePorts": false}),
        )
        .await?;
    ensure!(
        node_ports(&service).iter().all(|p| *p == 0),
        "allocateLoadBalancerNodePorts=false, yet node ports {:?} were allocated",
        node_ports(&service)
    );
    let address = ctx
        .wait_for_ingress(name, timeouts::LOAD_BALANCER_CREATE)
        .await?;
    ctx.wait_reachable_http(&address, 80).await.context(
        "the load balancer of a Service without node ports does not answer: does it reach the pods?",
    )?;
    ctx.step("allowing node ports");
    let service = ctx
        .update_service(name, json!({"allocateLoadBalancerNodePorts": true}))
        .await?;
    ensure!(
        node_ports(&service).iter().all(|p| *p != 0),
        "allocateLoadBalancerNodePorts=true, yet the node ports are {:?}",
        node_ports(&service)
    );
    ensure_same_ingress(ctx, name, &address).await?;
    // The load balancer must take the node ports; until it does, the old one still answers
    // through the pods, so answering alone would not show it.
    if ctx.capabilities.has(Capability::DescribeLoadBalancer) {
        let reference = ctx.service_ref(name).await?;
        let wanted = node_ports(&service);
        ctx.wait_for(
            "the load balancer to forward to the new node ports (does the CCM update its ports?)",
            timeouts::LOAD_BALANCER_LAG,
            || async {
                let described = ctx.provider.describe_load_balancer(&reference).await?;
                Ok(described
                    .filter(|d| {
                        let mut ports: Vec<i32> = d
                            .ports
                            .iter()
                            .map(|p| p.node_port.map_or(0, i32::from))
                            .collect();
                        ports.sort_unstable();
                        let mut wanted = wanted.clone();
                        wanted.sort_unstable();
                        ports == wanted
                    })
                    .map(|_| ()))
            },
        )
        .await?;
    }
    ctx.wait_reachable_http(&address, 80).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_show_their_labels() {
        let mut names: Vec<&str> = SPECS.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), SPECS.len());
        for spec in SPECS {
            for label in spec.labels {
                assert!(
                    spec.name.contains(&format!("[{label}]")),
                    "{} lacks [{label}]",
                    spec.name
                );
            }
        }
    }
}
