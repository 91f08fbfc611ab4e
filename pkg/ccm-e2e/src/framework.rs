//! What a test works with ([`Ctx`]): its namespace (and more of its own, [`Ctx::child`]), the
//! cluster's API, the provider, scaled timeouts, waiting for conditions, agnhost workloads
//! and probes from outside the cluster; and why a test does not pass ([`Error`]).
//! The helpers are named after upstream's e2e framework (`WaitForLoadBalancer`,
//! `TestReachableHTTP`, ...) whose steps they take.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use genplane_cloudprovider::{
    Capabilities, Capability, NodeRef, Probe, ProbeAnswer, ProbeKind, Provider, ServiceRef,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};

/// upstream's agnhost image, whose `netexec` the workloads run.
pub const AGNHOST: &str = "registry.k8s.io/e2e-test-images/agnhost:2.53";
/// The port agnhost `netexec` serves HTTP and UDP on in these tests.
pub const NETEXEC_PORT: i32 = 8080;

/// The label every test namespace carries, so that `--clean-start` finds an earlier run's.
pub const NAMESPACE_LABEL: (&str, &str) = ("e2e-framework", "ccm-e2e");

/// The cleanup finalizer of load-balancer Services.
pub const CLEANUP_FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";

/// Upstream's timeouts (`test/e2e/framework/service/const.go`), before scaling.
pub mod timeouts {
    use std::time::Duration;

    /// `KubeProxyLagTimeout`.
    pub const KUBE_PROXY_LAG: Duration = Duration::from_secs(5 * 60);
    /// `LoadBalancerLagTimeoutDefault`.
    pub const LOAD_BALANCER_LAG: Duration = Duration::from_secs(2 * 60);
    /// `LoadBalancerCreateTimeoutDefault`.
    pub const LOAD_BALANCER_CREATE: Duration = Duration::from_secs(20 * 60);
    /// `LoadBalancerPropagationTimeoutDefault`.
    pub const LOAD_BALANCER_PROPAGATION: Duration = Duration::from_secs(10 * 60);
    /// `framework.PodStartTimeout`.
    pub const POD_START: Duration = Duration::from_secs(5 * 60);
    /// `RestartNodeReadyAgainTimeout`.
    pub const NODE_READY_AGAIN: Duration = Duration::from_secs(5 * 60);
    /// upstream's `DefaultNamespaceDeletionTimeout`: how long a namespace may take to go.
    pub const NAMESPACE_DELETE: Duration = Duration::from_secs(5 * 60);
}

/// Why a test, or a step of one, did not pass. The report shows it with its causes
/// ([`chain`](genplane_apimachinery::errors::chain)): `creating Service lb: <the API server's
/// message>`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The test finds, once running, that the cluster cannot run it (upstream's
    /// `e2eskipper`): it is reported skipped, with this reason.
    #[error("skipped: {0}")]
    Skip(String),
    /// A check found what it should not; what.
    #[error("{0}")]
    Failed(String),
    /// A step failed: what it was doing, and why.
    #[error("{what}")]
    Step {
        /// What the step was doing.
        what: String,
        /// Why it failed.
        #[source]
        source: Box<Error>,
    },
    /// A request to the cluster's API failed.
    #[error(transparent)]
    Api(#[from] kube::Error),
    /// A call of the provider failed.
    #[error(transparent)]
    Provider(#[from] genplane_cloudprovider::Error),
    /// An object could not be made from JSON, or an answer read as JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// A number did not fit where it goes (a count of nodes as replicas).
    #[error(transparent)]
    OutOfRange(#[from] std::num::TryFromIntError),
}

impl Error {
    /// The reason the test is skipped, if it is (an [`Error::Skip`], maybe within steps).
    pub fn skipped(&self) -> Option<&str> {
        match self {
            Error::Skip(reason) => Some(reason),
            Error::Step { source, .. } => source.skipped(),
            _ => None,
        }
    }
}

/// Says what a failing step was doing ([`Error::Step`]), or makes a missing value a failure
/// ([`Error::Failed`]).
pub(crate) trait Context<T> {
    /// With `what` as the step.
    fn context(self, what: impl Into<String>) -> Result<T, Error>;

    /// With `what()` as the step, made only when it failed.
    fn with_context(self, what: impl FnOnce() -> String) -> Result<T, Error>;
}

impl<T, E: Into<Error>> Context<T> for Result<T, E> {
    fn context(self, what: impl Into<String>) -> Result<T, Error> {
        self.with_context(|| what.into())
    }

    fn with_context(self, what: impl FnOnce() -> String) -> Result<T, Error> {
        self.map_err(|error| Error::Step {
            what: what(),
            source: Box::new(error.into()),
        })
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, what: impl Into<String>) -> Result<T, Error> {
        self.ok_or_else(|| Error::Failed(what.into()))
    }

    fn with_context(self, what: impl FnOnce() -> String) -> Result<T, Error> {
        self.ok_or_else(|| Error::Failed(what()))
    }
}

/// Fails with [`Error::Failed`] and the message `format!` makes of the arguments.
macro_rules! bail {
    ($($message:tt)+) => {
        return Err($crate::framework::Error::Failed(format!($($message)+)))
    };
}
pub(crate) use bail;

/// Fails with [`Error::Failed`] and the message unless the condition holds.
macro_rules! ensure {
    ($condition:expr, $($message:tt)+) => {
        if !$condition {
            $crate::framework::bail!($($message)+);
        }
    };
}
pub(crate) use ensure;

/// The context of one running test.
pub struct Ctx {
    /// The cluster's API.
    pub client: Client,
    /// The test's own namespace.
    pub namespace: String,
    /// The provider.
    pub provider: Arc<dyn Provider>,
    /// What it declared.
    pub capabilities: Capabilities,
    /// The factor upstream's timeouts are multiplied by (`--timeout-scale`).
    pub scale: f64,
    /// The version the upgrade tests go to (`--upgrade-target`).
    pub upgrade_target: Option<String>,
    /// The address the external-IP test uses (`--external-ip`).
    pub external_ip: String,
    /// The run's namespaces not cleaned up yet (the suite's, so that an interrupted run
    /// cleans up those of [`Ctx::child`] too).
    pub live: Arc<Mutex<BTreeSet<String>>>,
    /// Where the upgrade tests put their results (the run's report).
    pub upgrade_reports: Arc<Mutex<Vec<crate::results::UpgradeReport>>>,
    children: Mutex<Vec<String>>,
    steps: Mutex<Vec<String>>,
    started: Instant,
}

/// Creates the namespace `name`, labelled as a test's ([`NAMESPACE_LABEL`]) so
/// that `--clean-start` finds it if the run is interrupted.
pub async fn create_namespace(client: &Client, name: &str) -> Result<(), Error> {
    let (key, value) = NAMESPACE_LABEL;
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": name, "labels": {key: value}}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .with_context(|| format!("creating namespace {name}"))?;
    Ok(())
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

/// The least any scaled wait gets.
const MIN_WAIT: Duration = Duration::from_secs(2);
/// How often conditions are looked at again.
pub const POLL: Duration = Duration::from_millis(200);

impl Ctx {
    /// A context for a test in `namespace`.
    pub fn new(
        client: Client,
        namespace: String,
        provider: Arc<dyn Provider>,
        capabilities: Capabilities,
        scale: f64,
    ) -> Self {
        Self {
            client,
            namespace,
            provider,
            capabilities,
            scale,
            upgrade_target: None,
            external_ip: String::new(),
            live: Arc::default(),
            upgrade_reports: Arc::default(),
            children: Mutex::default(),
            steps: Mutex::default(),
            started: Instant::now(),
        }
    }

    /// A context in a namespace of its own, `<this namespace>-<suffix>`, sharing this one's
    /// cluster, provider and settings (upstream gives each upgrade test its own framework).
    /// The suite cleans it up with this test's namespace ([`Ctx::children`]).
    pub async fn child(&self, suffix: &str) -> Result<Ctx, Error> {
        let namespace = format!("{}-{suffix}", self.namespace);
        create_namespace(&self.client, &namespace).await?;
        lock(&self.live).insert(namespace.clone());
        lock(&self.children).push(namespace.clone());
        let mut child = Ctx::new(
            self.client.clone(),
            namespace,
            self.provider.clone(),
            self.capabilities.clone(),
            self.scale,
        );
        child.upgrade_target = self.upgrade_target.clone();
        child.external_ip = self.external_ip.clone();
        child.live = self.live.clone();
        child.upgrade_reports = self.upgrade_reports.clone();
        Ok(child)
    }

    /// The namespaces [`Ctx::child`] made.
    pub fn children(&self) -> Vec<String> {
        lock(&self.children).clone()
    }

    /// Records a step (`STEP:` lines of the report).
    pub fn step(&self, text: impl Into<String>) {
        let line = format!(
            "[{:>6.2}s] STEP: {}",
            self.started.elapsed().as_secs_f64(),
            text.into()
        );
        lock(&self.steps).push(line);
    }

    /// The steps so far.
    pub fn steps(&self) -> Vec<String> {
        lock(&self.steps).clone()
    }

    /// Since the context was made.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Upstream's `timeout`, scaled.
    pub fn timeout(&self, upstream: Duration) -> Duration {
        upstream.mul_f64(self.scale).max(MIN_WAIT)
    }

    /// Waits up to `timeout` (scaled) until `check` answers `Ok(Some)`; `Err` ends the wait
    /// at once. The error names `what` and the last thing `check` saw (`last`).
    pub async fn wait_for<T, F, Fut>(
        &self,
        what: &str,
        timeout: Duration,
        mut check: F,
    ) -> Result<T, Error>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Option<T>, Error>>,
    {
        let timeout = self.timeout(timeout);
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(found) = check().await? {
                return Ok(found);
            }
            if Instant::now() >= deadline {
                bail!("timed out after {timeout:.1?} waiting for {what}");
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The namespace's Services.
    pub fn services(&self) -> Api<Service> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// The namespace's Deployments.
    pub fn deployments(&self) -> Api<Deployment> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// The namespace's Pods.
    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// The Ready, schedulable nodes, by name.
    pub async fn ready_nodes(&self) -> Result<Vec<Node>, Error> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let mut ready: Vec<Node> = nodes
            .list(&ListParams::default())
            .await
            .context("listing nodes")?
            .items
            .into_iter()
            .filter(|n| {
                is_ready(n)
                    && !n
                        .spec
                        .as_ref()
                        .and_then(|s| s.unschedulable)
                        .unwrap_or(false)
            })
            .collect();
        ready.sort_by_key(|n| n.name_any());
        Ok(ready)
    }

    /// Creates a Deployment `name` of `replicas` agnhost `netexec` pods labelled `app=name`
    /// (on `node` only, when given), and waits until they are Ready.
    pub async fn agnhost(
        &self,
        name: &str,
        replicas: i32,
        node: Option<&str>,
    ) -> Result<(), Error> {
        self.step(format!(
            "creating a Deployment {name} of {replicas} agnhost netexec pods"
        ));
        let mut pod_spec = netexec_pod_spec(&[]);
        if let Some(node) = node {
            pod_spec["nodeSelector"] = json!({"kubernetes.io/hostname": node});
        }
        let deployment: Deployment = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec}}}))?;
        self.deployments()
            .create(&PostParams::default(), &deployment)
            .await
            .with_context(|| format!("creating Deployment {name}"))?;
        self.wait_ready_pods(name, replicas).await.map(|_| ())
    }

    /// Creates the agnhost `netexec` Pod `name` labelled `app=label` on `node` with `extra`
    /// arguments and `grace` seconds to terminate, and waits until it is Ready; it.
    pub async fn netexec_pod(
        &self,
        name: &str,
        label: &str,
        node: &str,
        extra: &[&str],
        grace: i64,
    ) -> Result<Pod, Error> {
        self.step(format!("creating agnhost netexec pod {name} on {node}"));
        let mut spec = netexec_pod_spec(extra);
        spec["nodeSelector"] = json!({"kubernetes.io/hostname": node});
        spec["terminationGracePeriodSeconds"] = json!(grace);
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"app": label}}, "spec": spec}))?;
        self.pods()
            .create(&PostParams::default(), &pod)
            .await
            .with_context(|| format!("creating Pod {name}"))?;
        let pods = self.pods();
        self.wait_for(
            &format!("Pod {name} to be Ready"),
            timeouts::POD_START,
            || async { Ok(pods.get(name).await.ok().filter(pod_ready)) },
        )
        .await
    }

    /// What `pod` (an agnhost `netexec` pod) gets when it sends `request` to `host:port`
    /// over `protocol` (`http` or `udp`): agnhost's `/dial`, asked from where probes run.
    /// `None` when the pod got no answer (or gave none itself).
    pub async fn dial(
        &self,
        pod: &Pod,
        host: &str,
        port: u16,
        protocol: &str,
        request: &str,
    ) -> Result<Option<String>, Error> {
        let ip = pod
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.clone())
            .with_context(|| format!("Pod {} has no address", pod.name_any()))?;
        let query: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("request", request)
            .append_pair("host", host)
            .append_pair("port", &port.to_string())
            .append_pair("protocol", protocol)
            .append_pair("tries", "1")
            .finish();
        let mut probe = self.http(&ip, port16(NETEXEC_PORT)?, &format!("/dial?{query}"));
        // The pod's own try may take seconds (agnhost's dial timeout).
        probe.timeout_ms = 10_000;
        let answer = self.probe(&probe).await?;
        // A pod that does not answer (yet) reached nothing either.
        let Some(body) = answer.ok_body() else {
            return Ok(None);
        };
        let answer: Value = serde_json::from_str(body)
            .with_context(|| format!("/dial of Pod {} answered {body:?}", pod.name_any()))?;
        Ok(answer["responses"]
            .as_array()
            .and_then(|r| r.first())
            .and_then(Value::as_str)
            .map(str::to_owned))
    }

    /// Waits until `pod` reaches `host:port` over `protocol` (its `/dial` gets `hostname`
    /// answered) and the answer satisfies `expect`; the answer.
    pub async fn wait_dial(
        &self,
        pod: &Pod,
        host: &str,
        port: u16,
        protocol: &str,
        expect: impl Fn(&str) -> bool,
    ) -> Result<String, Error> {
        let what = format!("Pod {} to reach {protocol}://{host}:{port}", pod.name_any());
        self.step(format!("waiting for {what}"));
        self.wait_for(&what, timeouts::KUBE_PROXY_LAG, || async {
            let answer = self.dial(pod, host, port, protocol, "hostname").await?;
            Ok(answer.filter(|a| expect(a)))
        })
        .await
    }

    /// Waits until `count` pods labelled `app=name` are Ready (and no others exist); them.
    pub async fn wait_ready_pods(&self, name: &str, count: i32) -> Result<Vec<Pod>, Error> {
        let pods = self.pods();
        self.wait_for(
            &format!("{count} Ready pods of {name}"),
            timeouts::POD_START,
            || async {
                let list = pods
                    .list(&ListParams::default().labels(&format!("app={name}")))
                    .await?
                    .items;
                let live: Vec<Pod> = list
                    .into_iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                    .collect();
                let ready = live.iter().filter(|p| pod_ready(p)).count();
                Ok((ready == live.len() && usize::try_from(count) == Ok(ready)).then_some(live))
            },
        )
        .await
    }

    /// Scales Deployment `name` to `replicas` and waits for that many Ready pods.
    pub async fn scale(&self, name: &str, replicas: i32) -> Result<(), Error> {
        self.step(format!("scaling {name} to {replicas}"));
        self.deployments()
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": replicas}})),
            )
            .await
            .with_context(|| format!("scaling {name}"))?;
        self.wait_ready_pods(name, replicas).await.map(|_| ())
    }

    /// Waits until the load-balancer cleanup finalizer is on Service `name` (`present`) or
    /// gone from it (upstream's `WaitForServiceUpdatedWithFinalizer`).
    pub async fn wait_finalizer(&self, name: &str, present: bool) -> Result<(), Error> {
        let services = self.services();
        let what = if present {
            format!(
                "the {CLEANUP_FINALIZER} finalizer on Service {name} (the CCM must add it before it makes a load balancer)"
            )
        } else {
            format!("the {CLEANUP_FINALIZER} finalizer to be removed from Service {name}")
        };
        self.step(format!("waiting for {what}"));
        self.wait_for(&what, timeouts::LOAD_BALANCER_LAG, || async {
            let held = services
                .get(name)
                .await?
                .finalizers()
                .iter()
                .any(|f| f == CLEANUP_FINALIZER);
            Ok((held == present).then_some(()))
        })
        .await
    }

    /// Deletes Service `name` and waits until it is gone, its load balancer's finalizer
    /// removed (upstream's `WaitForServiceDeletedWithFinalizer`).
    pub async fn delete_service_with_finalizer(&self, name: &str) -> Result<(), Error> {
        self.step(format!("deleting Service {name}"));
        let services = self.services();
        services
            .delete(name, &DeleteParams::default())
            .await
            .with_context(|| format!("deleting Service {name}"))?;
        self.wait_for(
            &format!("Service {name} to be deleted (its load balancer first)"),
            timeouts::LOAD_BALANCER_LAG,
            || async { Ok(services.get_opt(name).await?.is_none().then_some(())) },
        )
        .await
    }

    /// Waits until Deployment `name` has rolled out: every one of its `replicas` pods
    /// updated and available, and no old one left (upstream's `WaitForDeploymentComplete`).
    pub async fn wait_rolled_out(&self, name: &str, replicas: i32) -> Result<(), Error> {
        let deployments = self.deployments();
        self.wait_for(
            &format!("Deployment {name} to roll out"),
            timeouts::LOAD_BALANCER_PROPAGATION,
            || async {
                let deployment = deployments.get(name).await?;
                let generation = deployment.metadata.generation.unwrap_or(0);
                let status = deployment.status.unwrap_or_default();
                Ok((status.observed_generation.unwrap_or(0) >= generation
                    && status.updated_replicas == Some(replicas)
                    && status.available_replicas == Some(replicas)
                    && status.replicas == Some(replicas))
                .then_some(()))
            },
        )
        .await
    }

    /// Creates the Service `spec` describes (named `name`).
    pub async fn create_service(&self, name: &str, spec: Value) -> Result<Service, Error> {
        let service: Service =
            serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec}))?;
        self.services()
            .create(&PostParams::default(), &service)
            .await
            .with_context(|| format!("creating Service {name}"))
    }

    /// Merge-patches the Service `name`'s spec; the Service after.
    pub async fn update_service(&self, name: &str, spec: Value) -> Result<Service, Error> {
        self.services()
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": spec})),
            )
            .await
            .with_context(|| format!("updating Service {name}"))
    }

    /// upstream's `WaitForLoadBalancer`: the first ingress address of Service `name`.
    pub async fn wait_for_ingress(&self, name: &str, timeout: Duration) -> Result<String, Error> {
        self.step(format!("waiting for Service {name}'s load balancer"));
        let services = self.services();
        self.wait_for(
            &format!("an ingress address of Service {name}"),
            timeout,
            || async {
                let service = services.get(name).await?;
                Ok(ingress(&service))
            },
        )
        .await
    }

    /// The reference the provider takes for Service `name`.
    pub async fn service_ref(&self, name: &str) -> Result<ServiceRef, Error> {
        let service = self.services().get(name).await?;
        Ok(ServiceRef {
            namespace: self.namespace.clone(),
            name: name.to_owned(),
            uid: service.uid().unwrap_or_default(),
        })
    }

    /// upstream's `WaitForLoadBalancerDestroy` with `EnsureLoadBalancerResourcesDeleted`: the
    /// cloud no longer has the load balancer of `service` (when the provider can describe
    /// load balancers), and `address:port` no longer answers.
    pub async fn wait_for_load_balancer_destroyed(
        &self,
        service: &ServiceRef,
        address: &str,
        port: u16,
    ) -> Result<(), Error> {
        if self.capabilities.has(Capability::DescribeLoadBalancer) {
            self.step(format!(
                "waiting for the cloud to delete the load balancer of {}",
                service.name
            ));
            self.wait_for(
                &format!(
                    "the cloud to delete the load balancer of Service {}",
                    service.name
                ),
                timeouts::LOAD_BALANCER_LAG,
                || async {
                    let found = self.provider.describe_load_balancer(service).await?;
                    Ok(found.is_none().then_some(()))
                },
            )
            .await?;
        }
        self.wait_not_reachable_http(address, port).await
    }

    /// Sends `probe`: through the provider when it can, else from here.
    pub async fn probe(&self, probe: &Probe) -> Result<ProbeAnswer, Error> {
        if self.capabilities.has(Capability::TrafficProbe) {
            return Ok(self.provider.probe(probe).await?);
        }
        Ok(genplane_cloudprovider::probe::send(probe).await)
    }

    /// An HTTP probe of `path` on `address:port`.
    pub fn http(&self, address: &str, port: u16, path: &str) -> Probe {
        Probe {
            kind: ProbeKind::Http {
                path: path.to_owned(),
            },
            address: address.to_owned(),
            port,
            timeout_ms: 3000,
        }
    }

    /// The body of `GET path` from `address:port`, if it answered 2xx.
    pub async fn http_get(
        &self,
        address: &str,
        port: u16,
        path: &str,
    ) -> Result<Option<String>, Error> {
        let answer = self.probe(&self.http(address, port, path)).await?;
        Ok(answer.ok_body().map(str::to_owned))
    }

    /// upstream's `TestReachableHTTP`: waits until `/hostname` on `address:port` answers;
    /// the pod that answered.
    pub async fn wait_reachable_http(&self, address: &str, port: u16) -> Result<String, Error> {
        self.step(format!("checking http://{address}:{port}/hostname answers"));
        self.wait_for(
            &format!("http://{address}:{port}/hostname to answer"),
            timeouts::LOAD_BALANCER_LAG,
            || async {
                Ok(self
                    .http_get(address, port, "/hostname")
                    .await?
                    .filter(|b| !b.is_empty()))
            },
        )
        .await
    }

    /// upstream's `testNotReachableHTTP`: waits until `address:port` gives no answer.
    pub async fn wait_not_reachable_http(&self, address: &str, port: u16) -> Result<(), Error> {
        self.step(format!(
            "checking http://{address}:{port}/hostname no longer answers"
        ));
        self.wait_for(
            &format!("http://{address}:{port} to stop answering"),
            timeouts::LOAD_BALANCER_LAG,
            || async {
                Ok(self
                    .http_get(address, port, "/hostname")
                    .await?
                    .is_none()
                    .then_some(()))
            },
        )
        .await
    }

    /// upstream's `testReachableUDP`: waits until `hostname` sent to `address:port` is
    /// answered.
    pub async fn wait_reachable_udp(&self, address: &str, port: u16) -> Result<String, Error> {
        self.step(format!("checking udp://{address}:{port} answers"));
        self.wait_for(
            &format!("udp://{address}:{port} to answer"),
            timeouts::LOAD_BALANCER_LAG,
            || async {
                let answer = self.probe(&self.udp(address, port)).await?;
                Ok(answer
                    .ok_body()
                    .filter(|b| !b.is_empty())
                    .map(str::to_owned))
            },
        )
        .await
    }

    /// upstream's `testNotReachableUDP`: waits until `address:port` gives no UDP answer.
    pub async fn wait_not_reachable_udp(&self, address: &str, port: u16) -> Result<(), Error> {
        self.step(format!("checking udp://{address}:{port} no longer answers"));
        self.wait_for(
            &format!("udp://{address}:{port} to stop answering"),
            timeouts::LOAD_BALANCER_LAG,
            || async {
                let answer = self.probe(&self.udp(address, port)).await?;
                Ok(answer.ok_body().is_none().then_some(()))
            },
        )
        .await
    }

    fn udp(&self, address: &str, port: u16) -> Probe {
        Probe {
            kind: ProbeKind::Udp {
                message: "hostname".to_owned(),
            },
            address: address.to_owned(),
            port,
            timeout_ms: 1000,
        }
    }

    /// The pods answering `/hostname` on `address:port` in `tries` requests.
    pub async fn hostnames(
        &self,
        address: &str,
        port: u16,
        tries: usize,
    ) -> Result<Vec<String>, Error> {
        let mut seen = Vec::new();
        for _ in 0..tries {
            if let Some(body) = self.http_get(address, port, "/hostname").await? {
                seen.push(body);
            }
        }
        Ok(seen)
    }
}

/// The spec of a pod running agnhost `netexec` on [`NETEXEC_PORT`] (HTTP and UDP), with
/// `extra` arguments.
pub fn netexec_pod_spec(extra: &[&str]) -> Value {
    let mut args = vec![
        "netexec".to_owned(),
        format!("--http-port={NETEXEC_PORT}"),
        format!("--udp-port={NETEXEC_PORT}"),
    ];
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    json!({"containers": [{"name": "agnhost", "image": AGNHOST, "args": args,
        "ports": [{"containerPort": NETEXEC_PORT, "protocol": "TCP"},
                  {"containerPort": NETEXEC_PORT, "protocol": "UDP"}]}]})
}

/// The first ingress address (IP or host name) of `service`.
pub fn ingress(service: &Service) -> Option<String> {
    let first = service
        .status
        .as_ref()?
        .load_balancer
        .as_ref()?
        .ingress
        .as_ref()?
        .first()?
        .clone();
    first.ip.or(first.hostname)
}

/// The first port's node port of `service`, if any.
pub fn node_port(service: &Service) -> Option<i32> {
    service.spec.as_ref()?.ports.as_ref()?.first()?.node_port
}

/// Whether `node` is Ready.
pub fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Whether `pod` is Ready.
pub fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The reference the provider takes for `node`.
pub fn node_ref(node: &Node) -> NodeRef {
    NodeRef {
        name: node.name_any(),
        provider_id: node.spec.as_ref().and_then(|s| s.provider_id.clone()),
    }
}

/// `port` as a `u16`, or why not.
pub fn port16(port: i32) -> Result<u16, Error> {
    u16::try_from(port).with_context(|| format!("port {port} is out of range"))
}

/// The InternalIP of `node`.
pub fn internal_ip(node: &Node) -> Option<String> {
    node.status
        .as_ref()?
        .addresses
        .as_ref()?
        .iter()
        .find(|a| a.type_ == "InternalIP")
        .map(|a| a.address.clone())
}

/// `mutex` locked, also when a holder panicked.
pub fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
