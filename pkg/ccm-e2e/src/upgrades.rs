//! The upgrade tests: what upstream's `test/e2e/upgrades` checks while `RunUpgradeSuite` runs
//! an upgrade. Each [`UpgradeTest`] works in a namespace of its own ([`Ctx::child`]): it sets
//! up a workload ([`UpgradeTest::setup`]), watches it while the upgrade runs
//! ([`UpgradeTest::during`], told the upgrade's [`Phase`] through [`Upgrading`]) and checks
//! it once the upgrade is done ([`UpgradeTest::after`]). [`run`] does one upgrade
//! ([`MASTER_UPGRADE`], [`CLUSTER_UPGRADE`], [`CLUSTER_DOWNGRADE`]) that way and records an
//! [`UpgradeReport`] (the run writes them to `junit_upgrades.xml`): a case for the upgrade,
//! then one per upgrade test.
//!
//! The tests are those the Kubernetes API of a generic control plane serves and a cluster of
//! simulated nodes runs faithfully: `service-upgrade` (upstream's `ServiceUpgradeTest`),
//! `[sig-apps] deployment-upgrade` and `[sig-apps] replicaset-upgrade`. Upstream's workloads
//! run nginx; these run agnhost `netexec`, as every workload of this suite does.

use std::time::{Duration, Instant};

use futures::future::{BoxFuture, join_all};
use genplane_apimachinery::errors::chain;
use genplane_cloudprovider::{Capability, ProbeAnswer};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt as _;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::watch;

use crate::framework::{Context as _, Ctx, Error, NETEXEC_PORT, POLL, bail, ensure};
use crate::framework::{is_ready, lock, netexec_pod_spec, timeouts};
use crate::results::{Outcome, TestResult, UpgradeReport, missing_reason};

/// One step of an upgrade.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// The provider's `upgrade_control_plane`, then `/version` must report the target.
    ControlPlane,
    /// The provider's `upgrade_nodes`, then every node must be Ready at the target.
    Nodes,
}

impl Step {
    /// What it upgrades, for people.
    pub fn what(self) -> &'static str {
        match self {
            Step::ControlPlane => "control-plane",
            Step::Nodes => "node",
        }
    }
}

/// An upgrade, as a test of the suite runs it.
#[derive(Debug)]
pub struct Upgrade {
    /// The JUnit suite's name, upstream's.
    pub suite: &'static str,
    /// The JUnit case of the upgrade itself, upstream's.
    pub case: &'static str,
    /// Its steps, in order.
    pub steps: &'static [Step],
}

/// "master upgrade": the control plane only.
pub const MASTER_UPGRADE: Upgrade = Upgrade {
    suite: "Master upgrade",
    case: "[sig-cloud-provider-gcp] master-upgrade",
    steps: &[Step::ControlPlane],
};

/// "cluster upgrade": the control plane, then the nodes.
pub const CLUSTER_UPGRADE: Upgrade = Upgrade {
    suite: "Cluster upgrade",
    case: "[sig-cloud-provider-gcp] cluster-upgrade",
    steps: &[Step::ControlPlane, Step::Nodes],
};

/// "cluster downgrade": the nodes first (a kubelet may not be newer than its API server),
/// then the control plane.
pub const CLUSTER_DOWNGRADE: Upgrade = Upgrade {
    suite: "Cluster downgrade",
    case: "[sig-cloud-provider-gcp] cluster-downgrade",
    steps: &[Step::Nodes, Step::ControlPlane],
};

/// Where an upgrade is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Doing this step.
    Doing(Step),
    /// Finished (or failed): nothing changes any more.
    Done,
}

/// The upgrade as a running [`UpgradeTest::during`] sees it.
#[derive(Clone, Debug)]
pub struct Upgrading {
    phases: watch::Receiver<Phase>,
    steps: &'static [Step],
}

impl Upgrading {
    /// Whether the upgrade moves the nodes before `step` (a downgrade's control plane goes
    /// after its nodes): the workloads were just disrupted and may still be settling when
    /// `step` begins.
    pub fn nodes_before(&self, step: Step) -> bool {
        self.steps
            .iter()
            .take_while(|s| **s != step)
            .any(|s| *s == Step::Nodes)
    }

    /// Where the upgrade is now.
    pub fn phase(&self) -> Phase {
        if self.phases.has_changed().is_err() {
            return Phase::Done;
        }
        *self.phases.borrow()
    }

    /// Waits until the phase changes (at once when the upgrade is done).
    pub async fn changed(&mut self) {
        if self.phase() == Phase::Done {
            return;
        }
        let _ = self.phases.changed().await;
    }
}

/// One upgrade test (upstream's `upgrades.Test`).
pub trait UpgradeTest: Send + Sync {
    /// Its name, upstream's (the JUnit case).
    fn name(&self) -> &'static str;

    /// What the provider must be able to do; the test is skipped without it.
    fn needs(&self) -> &'static [Capability] {
        &[]
    }

    /// Creates the workload in `ctx`'s namespace and checks it works, before the upgrade.
    fn setup<'a>(&'a mut self, ctx: &'a Ctx) -> BoxFuture<'a, Result<(), Error>>;

    /// Runs while the upgrade does; returns once `upgrading` says [`Phase::Done`] (or at
    /// once, when there is nothing to watch). An error fails the test.
    fn during<'a>(
        &'a self,
        ctx: &'a Ctx,
        upgrading: Upgrading,
    ) -> BoxFuture<'a, Result<(), Error>> {
        let _ = (ctx, upgrading);
        Box::pin(async { Ok(()) })
    }

    /// Checks the workload once the upgrade is done.
    fn after<'a>(&'a self, ctx: &'a Ctx) -> BoxFuture<'a, Result<(), Error>>;
}

/// The upgrade tests, new (each run sets up its own).
pub fn tests() -> Vec<Box<dyn UpgradeTest>> {
    vec![
        Box::new(ServiceUpgrade::default()),
        Box::new(DeploymentUpgrade::default()),
        Box::new(ReplicaSetUpgrade::default()),
    ]
}

/// The namespace suffix of the test `name`, as upstream makes it: what is not a word
/// character or `-` becomes one `-`, trimmed; lower case.
fn namespace_suffix(name: &str) -> String {
    let mut suffix = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || c == '-' {
            suffix.push(c.to_ascii_lowercase());
        } else if !suffix.ends_with('-') {
            suffix.push('-');
        }
    }
    suffix.trim_matches('-').to_owned()
}

/// The version the upgrade and downgrade tests go to: `--upgrade-target` (upstream's flag, used
/// by its downgrade jobs too, with an older version).
fn upgrade_target(ctx: &Ctx) -> Result<String, Error> {
    ctx.upgrade_target
        .clone()
        .context("the upgrade and downgrade tests need --upgrade-target VERSION")
}

/// Whether `reported` is version `want`, as upstream's checks compare: without their leading
/// `v`, `reported` begins with `want` (so `v1.34` accepts `v1.34.2`).
fn is_version(reported: &str, want: &str) -> bool {
    let want = want.strip_prefix('v').unwrap_or(want);
    let reported = reported.strip_prefix('v').unwrap_or(reported);
    !want.is_empty() && reported.starts_with(want)
}

/// Upstream's `controlPlaneUpgrade` then `checkControlPlaneVersion`: the provider upgrades the
/// control plane to `target`, then the API server must report it on `/version`.
async fn control_plane_upgrade(ctx: &Ctx, target: &str) -> Result<(), Error> {
    ctx.step(format!("upgrading the control plane to {target}"));
    ctx.provider
        .upgrade_control_plane(target)
        .await
        .context("upgrading the control plane")?;
    ctx.wait_for(
        &format!("the API server to report {target}"),
        timeouts::NODE_READY_AGAIN,
        || async {
            // The API server may be restarting: not answering is not an answer yet.
            let reported = ctx.client.apiserver_version().await.ok();
            Ok(reported
                .filter(|v| is_version(&v.git_version, target))
                .map(|_| ()))
        },
    )
    .await
}

/// Upstream's `nodeUpgrade` then `waitForNodesReadyAfterUpgrade` and `checkNodesVersions`: the
/// provider moves the nodes to `target`; every node registered before is Ready again within
/// `RestartNodeReadyAgainTimeout`, each reporting `target` as its kubelet version.
async fn node_upgrade(ctx: &Ctx, target: &str) -> Result<(), Error> {
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    let registered = nodes
        .list(&ListParams::default())
        .await
        .context("listing nodes")?
        .items
        .len();
    ctx.step(format!("moving the {registered} nodes to {target}"));
    ctx.provider
        .upgrade_nodes(target)
        .await
        .context("upgrading the nodes")?;
    ctx.wait_for(
        &format!("{registered} Ready nodes reporting kubelet {target}"),
        timeouts::NODE_READY_AGAIN,
        || async {
            let list = nodes.list(&ListParams::default()).await?.items;
            let done = list.len() >= registered
                && list.iter().filter(|n| is_ready(n)).count() >= registered
                && list.iter().all(|n| is_version(&kubelet_version(n), target));
            Ok(done.then_some(()))
        },
    )
    .await
}

/// The kubelet version `node` reports (empty when it reports none).
fn kubelet_version(node: &Node) -> String {
    node.status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .map(|i| i.kubelet_version.clone())
        .unwrap_or_default()
}

/// Runs `upgrade` to `--upgrade-target` with every upgrade test (upstream's
/// `RunUpgradeSuite`): each set up in its own namespace, all watching while the upgrade
/// runs, all checked after it. The upgrade's and each test's result go to the run's report
/// ([`Ctx::upgrade_reports`]); the error names the upgrade's failure and each failed test.
pub async fn run(ctx: &Ctx, upgrade: &Upgrade) -> Result<(), Error> {
    let target = upgrade_target(ctx)?;
    let started = Instant::now();
    let mut tests = tests();
    let mut contexts: Vec<Option<Ctx>> = Vec::new();
    let mut outcomes: Vec<Option<Outcome>> = Vec::new();
    for test in &tests {
        if let Some(reason) = missing_reason(&ctx.capabilities, test.needs()) {
            contexts.push(None);
            outcomes.push(Some(Outcome::Skipped(reason)));
            continue;
        }
        match ctx.child(&namespace_suffix(test.name())).await {
            Ok(child) => {
                contexts.push(Some(child));
                outcomes.push(None);
            }
            Err(error) => {
                contexts.push(None);
                outcomes.push(Some(Outcome::Failed(chain(&error))));
            }
        }
    }

    ctx.step("setting up the upgrade tests");
    let setups = join_all(
        tests
            .iter_mut()
            .zip(&contexts)
            .map(|(test, child)| async move {
                match child {
                    Some(child) => Some(test.setup(child).await),
                    None => None,
                }
            }),
    )
    .await;
    for (outcome, setup) in outcomes.iter_mut().zip(setups) {
        if let Some(Err(error)) = setup {
            *outcome = Some(Outcome::Failed(format!("setting up: {}", chain(&error))));
        }
    }

    let upgrade_began = Instant::now();
    let first = upgrade
        .steps
        .first()
        .copied()
        .map_or(Phase::Done, Phase::Doing);
    let (phases, watching) = watch::channel(first);
    let drive = async {
        let mut result = Ok(());
        for step in upgrade.steps {
            phases.send_replace(Phase::Doing(*step));
            let done = match step {
                Step::ControlPlane => control_plane_upgrade(ctx, &target).await,
                Step::Nodes => node_upgrade(ctx, &target).await,
            };
            if let Err(error) = done {
                result = Err(error);
                break;
            }
        }
        phases.send_replace(Phase::Done);
        result
    };
    let watches = join_all(tests.iter().zip(&contexts).zip(&outcomes).map(
        |((test, child), outcome)| {
            let upgrading = Upgrading {
                phases: watching.clone(),
                steps: upgrade.steps,
            };
            async move {
                match (child, outcome) {
                    (Some(child), None) => Some(test.during(child, upgrading).await),
                    _ => None,
                }
            }
        },
    ));
    let (upgraded, watched) = tokio::join!(drive, watches);
    let upgrade_took = upgrade_began.elapsed();
    for (outcome, during) in outcomes.iter_mut().zip(watched) {
        if let Some(Err(error)) = during {
            *outcome = Some(Outcome::Failed(format!(
                "during the upgrade: {}",
                chain(&error)
            )));
        }
    }

    if upgraded.is_ok() {
        let checks = join_all(tests.iter().zip(&contexts).zip(&outcomes).map(
            |((test, child), outcome)| async move {
                match (child, outcome) {
                    (Some(child), None) => Some(test.after(child).await),
                    _ => None,
                }
            },
        ))
        .await;
        for (outcome, after) in outcomes.iter_mut().zip(checks) {
            if let Some(Err(error)) = after {
                *outcome = Some(Outcome::Failed(format!(
                    "after the upgrade: {}",
                    chain(&error)
                )));
            }
        }
    }

    let mut results = vec![TestResult {
        name: upgrade.case,
        outcome: match &upgraded {
            Ok(()) => Outcome::Passed,
            Err(error) => Outcome::Failed(chain(error)),
        },
        duration: upgrade_took,
        steps: ctx.steps(),
    }];
    for ((test, child), outcome) in tests.iter().zip(&contexts).zip(outcomes) {
        let outcome = outcome.unwrap_or(if upgraded.is_ok() {
            Outcome::Passed
        } else {
            Outcome::Skipped("not checked after the upgrade: the upgrade failed".to_owned())
        });
        ctx.step(format!(
            "upgrade test {}: {}",
            test.name(),
            match &outcome {
                Outcome::Passed => "passed",
                Outcome::Skipped(_) => "skipped",
                _ => "failed",
            }
        ));
        results.push(TestResult {
            name: test.name(),
            outcome,
            duration: child.as_ref().map(Ctx::elapsed).unwrap_or_default(),
            steps: child.as_ref().map(Ctx::steps).unwrap_or_default(),
        });
    }
    let failed: Vec<String> = results[1..]
        .iter()
        .filter_map(|r| match &r.outcome {
            Outcome::Failed(why) => Some(format!("{}: {why}", r.name)),
            _ => None,
        })
        .collect();
    lock(&ctx.upgrade_reports).push(UpgradeReport {
        name: upgrade.suite,
        results,
        duration: started.elapsed(),
    });
    let failures = if failed.is_empty() {
        String::new()
    } else {
        format!(
            "\n{} of {} upgrade tests failed:\n{}",
            failed.len(),
            tests.len(),
            failed.join("\n")
        )
    };
    match upgraded {
        Err(error) => bail!("{}{failures}", chain(&error)),
        Ok(()) if !failed.is_empty() => bail!("the upgrade went through, but{failures}"),
        Ok(()) => Ok(()),
    }
}

/// The Service of [`ServiceUpgrade`], and the app its pod runs as.
const SERVICE: &str = "service-test";
/// Its port.
const SERVICE_PORT: u16 = 80;

/// Upstream's `ServiceUpgradeTest`: a LoadBalancer Service with a pod behind it answers
/// before the upgrade; during a control-plane upgrade that does not follow the nodes' it must
/// answer every request, when the
/// provider declares the data plane survives one
/// ([`Capability::DataPlaneSurvivesControlPlaneUpgrade`]); after the upgrade it answers again,
/// still carries the load balancer's cleanup finalizer and can be deleted with it. Upstream
/// also guards its pod with a PodDisruptionBudget, which a generic control plane does not
/// serve.
#[derive(Debug, Default)]
struct ServiceUpgrade {
    /// The load balancer's address.
    address: String,
}

/// A stretch of time in which the Service did not answer.
#[derive(Debug)]
struct Outage {
    /// When the first request failed, since the step began.
    from: Duration,
    /// When a request was answered again, if one was before the step ended.
    until: Option<Duration>,
    /// How many requests failed.
    failed: usize,
    /// Why the first one failed.
    first: String,
}

/// `duration` in seconds, for people (`1.25s`).
fn seconds(duration: Duration) -> String {
    format!("{:.2}s", duration.as_secs_f64())
}

/// Why `answer` is no answer.
fn no_answer(answer: &ProbeAnswer) -> String {
    match (&answer.error, answer.status) {
        (Some(error), _) => error.clone(),
        (None, Some(status)) if !(200..300).contains(&status) => format!("HTTP {status}"),
        _ => "an empty answer".to_owned(),
    }
}

/// What the requests sent during one upgrade step saw.
#[derive(Debug, Default)]
struct Hits {
    /// Requests counted: sent and answered within the step.
    sent: usize,
    /// Those that got a non-empty 2xx answer.
    answered: usize,
    /// The stretches in which none did.
    outages: Vec<Outage>,
}

impl Hits {
    /// Counts the answer to a request sent `at` after the step began.
    fn record(&mut self, at: Duration, answer: &ProbeAnswer) {
        self.sent += 1;
        let ongoing = self.outages.last_mut().filter(|o| o.until.is_none());
        match (answer.ok_body().is_some_and(|b| !b.is_empty()), ongoing) {
            (true, ongoing) => {
                self.answered += 1;
                if let Some(outage) = ongoing {
                    outage.until = Some(at);
                }
            }
            (false, Some(outage)) => outage.failed += 1,
            (false, None) => self.outages.push(Outage {
                from: at,
                until: None,
                failed: 1,
                first: no_answer(answer),
            }),
        }
    }
}

/// Sends a request with `send` every `poll` while `upgrading` is at `step`; what they saw,
/// and how long the step lasted from the first request.
///
/// Only a request answered while the step still runs is counted. One still on its way when
/// the step ends may have met the next step (a cluster upgrade moves the nodes right after
/// the control plane, shutting their proxies down), so its answer says nothing about this
/// step and is left out.
async fn hit_during<F, Fut>(
    upgrading: &mut Upgrading,
    step: Step,
    poll: Duration,
    mut send: F,
) -> Result<(Hits, Duration), Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<ProbeAnswer, Error>>,
{
    let began = Instant::now();
    let mut hits = Hits::default();
    while upgrading.phase() == Phase::Doing(step) {
        let at = began.elapsed();
        let answer = send().await?;
        if upgrading.phase() != Phase::Doing(step) {
            break;
        }
        hits.record(at, &answer);
        tokio::select! {
            () = tokio::time::sleep(poll) => {}
            () = upgrading.changed() => {}
        }
    }
    Ok((hits, began.elapsed()))
}

impl ServiceUpgrade {
    /// Sends `/hostname` through the load balancer every [`POLL`] while the upgrade is at
    /// `step` ([`hit_during`]); fails naming each outage (when, how long, how many requests,
    /// why).
    async fn hit_continuously(
        &self,
        ctx: &Ctx,
        upgrading: &mut Upgrading,
        step: Step,
    ) -> Result<(), Error> {
        let url = format!("http://{}:{SERVICE_PORT}/hostname", self.address);
        ctx.step(format!(
            "continuously hitting the pod through the service's LoadBalancer ({url}) during the {} upgrade",
            step.what()
        ));
        let probe = ctx.http(&self.address, SERVICE_PORT, "/hostname");
        let (hits, took) = hit_during(upgrading, step, POLL, || ctx.probe(&probe)).await?;
        let Hits {
            sent,
            answered,
            outages,
        } = hits;
        ctx.step(format!(
            "{answered} of {sent} requests answered during the {} the {} upgrade took",
            seconds(took),
            step.what()
        ));
        if outages.is_empty() {
            return Ok(());
        }
        let described: Vec<String> = outages
            .iter()
            .map(|o| {
                let length = match o.until {
                    Some(until) => format!(
                        "from {} to {} after the {} upgrade began (for {})",
                        seconds(o.from),
                        seconds(until),
                        step.what(),
                        seconds(until.saturating_sub(o.from))
                    ),
                    None => format!(
                        "from {} after the {} upgrade began until it ended {} later, still not answering",
                        seconds(o.from),
                        step.what(),
                        seconds(took.saturating_sub(o.from))
                    ),
                };
                format!(
                    "{length}: {} request{} failed, the first with {:?}",
                    o.failed,
                    if o.failed == 1 { "" } else { "s" },
                    o.first
                )
            })
            .collect();
        bail!(
            "Service {SERVICE} did not answer through its load balancer ({url}) during the {} upgrade, which the provider declares leaves Services reachable ({}): {} of {sent} requests failed in {} outage{}: {}",
            step.what(),
            Capability::DataPlaneSurvivesControlPlaneUpgrade,
            sent - answered,
            outages.len(),
            if outages.len() == 1 { "" } else { "s" },
            described.join("; ")
        )
    }
}

impl UpgradeTest for ServiceUpgrade {
    fn name(&self) -> &'static str {
        "service-upgrade"
    }

    fn needs(&self) -> &'static [Capability] {
        &[Capability::LoadBalancer]
    }

    fn setup<'a>(&'a mut self, ctx: &'a Ctx) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            ctx.step(format!(
                "creating a TCP service {SERVICE} with type=LoadBalancer in namespace {}",
                ctx.namespace
            ));
            ctx.create_service(
                SERVICE,
                json!({"type": "LoadBalancer", "selector": {"app": SERVICE},
                    "ports": [{"port": SERVICE_PORT, "targetPort": NETEXEC_PORT, "protocol": "TCP"}]}),
            )
            .await?;
            self.address = ctx
                .wait_for_ingress(SERVICE, timeouts::LOAD_BALANCER_CREATE)
                .await?;
            ctx.step(format!("creating a pod to be part of service {SERVICE}"));
            ctx.agnhost(SERVICE, 1, None).await?;
            ctx.wait_reachable_http(&self.address, SERVICE_PORT).await?;
            Ok(())
        })
    }

    fn during<'a>(
        &'a self,
        ctx: &'a Ctx,
        mut upgrading: Upgrading,
    ) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            // As upstream, the Service is hit throughout a control-plane upgrade only while
            // the data plane is undisturbed: not when the nodes were just moved (a
            // downgrade), whose pods and load-balancer health checks may still be settling.
            let survives = ctx
                .capabilities
                .has(Capability::DataPlaneSurvivesControlPlaneUpgrade)
                && !upgrading.nodes_before(Step::ControlPlane);
            loop {
                match upgrading.phase() {
                    Phase::Done => return Ok(()),
                    Phase::Doing(Step::ControlPlane) if survives => {
                        self.hit_continuously(ctx, &mut upgrading, Step::ControlPlane)
                            .await?;
                    }
                    Phase::Doing(step) => {
                        ctx.step(format!(
                            "waiting for the {} upgrade to finish without checking if the service remains up",
                            step.what()
                        ));
                        upgrading.changed().await;
                    }
                }
            }
        })
    }

    fn after<'a>(&'a self, ctx: &'a Ctx) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            ctx.wait_reachable_http(&self.address, SERVICE_PORT).await?;
            ctx.wait_finalizer(SERVICE, true).await?;
            ctx.delete_service_with_finalizer(SERVICE).await
        })
    }
}

/// The Deployment of [`DeploymentUpgrade`].
const DEPLOYMENT: &str = "deployment-hash-test";
/// The labels of the apps tests' pods (upstream's `test=upgrade`).
const APP_LABEL: (&str, &str) = ("test", "upgrade");
/// The revision annotation of Deployments and their ReplicaSets.
const REVISION: &str = "deployment.kubernetes.io/revision";

/// The pod template of the apps tests, its container named `container`.
fn app_template(container: &str) -> serde_json::Value {
    let mut spec = netexec_pod_spec(&[]);
    spec["containers"][0]["name"] = json!(container);
    json!({"metadata": {"labels": {APP_LABEL.0: APP_LABEL.1}}, "spec": spec})
}

/// The ReplicaSets labelled [`APP_LABEL`] in `ctx`'s namespace.
async fn replica_sets(ctx: &Ctx) -> Result<Vec<ReplicaSet>, Error> {
    let api: Api<ReplicaSet> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    let selector = format!("{}={}", APP_LABEL.0, APP_LABEL.1);
    Ok(api
        .list(&ListParams::default().labels(&selector))
        .await
        .context("listing replicasets")?
        .items)
}

/// Upstream's `DeploymentUpgradeTest`: a Deployment with a second revision keeps its UID,
/// its two ReplicaSets (no new one) and revision 2 through the upgrade, completes, and scales.
#[derive(Debug, Default)]
struct DeploymentUpgrade {
    deployment_uid: String,
    old_rs_uid: String,
    new_rs_uid: String,
}

/// Waits until Deployment [`DEPLOYMENT`] is at `revision`.
async fn wait_revision(ctx: &Ctx, revision: &str) -> Result<(), Error> {
    ctx.step(format!(
        "waiting for revision of the deployment {DEPLOYMENT} to become {revision}"
    ));
    let deployments = ctx.deployments();
    ctx.wait_for(
        &format!("revision {revision} of Deployment {DEPLOYMENT}"),
        timeouts::POD_START,
        || async {
            let deployment = deployments.get(DEPLOYMENT).await?;
            Ok(
                (deployment.annotations().get(REVISION).map(String::as_str) == Some(revision))
                    .then_some(()),
            )
        },
    )
    .await
}

impl UpgradeTest for DeploymentUpgrade {
    fn name(&self) -> &'static str {
        "[sig-apps] deployment-upgrade"
    }

    fn setup<'a>(&'a mut self, ctx: &'a Ctx) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            ctx.step(format!(
                "creating a deployment {DEPLOYMENT} with 1 replica in namespace {}",
                ctx.namespace
            ));
            let deployment: Deployment = serde_json::from_value(json!({
                "metadata": {"name": DEPLOYMENT},
                "spec": {"replicas": 1, "selector": {"matchLabels": {APP_LABEL.0: APP_LABEL.1}},
                    "strategy": {"type": "RollingUpdate"}, "template": app_template("agnhost")}}))?;
            ctx.deployments()
                .create(&PostParams::default(), &deployment)
                .await
                .with_context(|| format!("creating Deployment {DEPLOYMENT}"))?;
            ctx.wait_rolled_out(DEPLOYMENT, 1).await?;
            ctx.step(format!(
                "getting replicaset revision 1 of deployment {DEPLOYMENT}"
            ));
            let sets = replica_sets(ctx).await?;
            ensure!(
                sets.len() == 1,
                "expected one replicaset, got {}",
                sets.len()
            );
            self.old_rs_uid = sets[0].uid().unwrap_or_default();
            wait_revision(ctx, "1").await?;

            ctx.step(format!(
                "triggering a new rollout for deployment {DEPLOYMENT}"
            ));
            let template = app_template("updated-name");
            ctx.deployments()
                .patch(
                    DEPLOYMENT,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"template": template}})),
                )
                .await
                .with_context(|| format!("updating Deployment {DEPLOYMENT}"))?;
            ctx.wait_rolled_out(DEPLOYMENT, 1).await?;
            ctx.step(format!(
                "getting replicasets revision 1 and 2 of deployment {DEPLOYMENT}"
            ));
            let sets = replica_sets(ctx).await?;
            ensure!(
                sets.len() == 2,
                "expected 2 replicasets, got {}",
                sets.len()
            );
            let uids: Vec<String> = sets.iter().map(|s| s.uid().unwrap_or_default()).collect();
            ensure!(
                uids.contains(&self.old_rs_uid),
                "old replicaset with UID {} does not survive rollout",
                self.old_rs_uid
            );
            self.new_rs_uid = uids
                .into_iter()
                .find(|u| *u != self.old_rs_uid)
                .unwrap_or_default();
            wait_revision(ctx, "2").await?;
            self.deployment_uid = ctx
                .deployments()
                .get(DEPLOYMENT)
                .await?
                .uid()
                .unwrap_or_default();
            Ok(())
        })
    }

    fn after<'a>(&'a self, ctx: &'a Ctx) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            let deployment = ctx.deployments().get(DEPLOYMENT).await?;
            ctx.step(format!(
                "checking UID to verify deployment {DEPLOYMENT} survives upgrade"
            ));
            let uid = deployment.uid().unwrap_or_default();
            ensure!(
                uid == self.deployment_uid,
                "Deployment {DEPLOYMENT} did not survive the upgrade: its UID was {}, it is {uid} now",
                self.deployment_uid
            );
            ctx.step(format!(
                "verifying deployment {DEPLOYMENT} does not create new replicasets"
            ));
            let sets = replica_sets(ctx).await?;
            ensure!(
                sets.len() == 2,
                "expected 2 replicasets, got {}",
                sets.len()
            );
            let mut uids: Vec<String> = sets.iter().map(|s| s.uid().unwrap_or_default()).collect();
            uids.sort();
            let mut before = vec![self.old_rs_uid.clone(), self.new_rs_uid.clone()];
            before.sort();
            ensure!(
                uids == before,
                "new replicasets are created during upgrade of deployment {DEPLOYMENT}: the replicasets were {before:?}, they are {uids:?}"
            );
            ctx.step(format!(
                "verifying revision of the deployment {DEPLOYMENT} is still 2"
            ));
            let revision = deployment.annotations().get(REVISION).cloned();
            ensure!(
                revision.as_deref() == Some("2"),
                "Deployment {DEPLOYMENT} is at revision {revision:?} after the upgrade, not 2"
            );
            ctx.step(format!(
                "waiting for deployment {DEPLOYMENT} to complete adoption"
            ));
            ctx.wait_rolled_out(DEPLOYMENT, 1).await?;
            ctx.step(format!(
                "scaling up replicaset of deployment {DEPLOYMENT} by 1"
            ));
            ctx.deployments()
                .patch(
                    DEPLOYMENT,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"replicas": 2}})),
                )
                .await
                .with_context(|| format!("scaling Deployment {DEPLOYMENT}"))?;
            ctx.wait_rolled_out(DEPLOYMENT, 2).await
        })
    }
}

/// The ReplicaSet of [`ReplicaSetUpgrade`].
const REPLICA_SET: &str = "rs";

/// Upstream's `ReplicaSetUpgradeTest`: a ReplicaSet keeps its UID through the upgrade, has
/// all its replicas ready after it, and scales to 2.
#[derive(Debug, Default)]
struct ReplicaSetUpgrade {
    uid: String,
}

/// Upstream's `WaitForReadyReplicaSet`: every replica of ReplicaSet [`REPLICA_SET`] ready.
async fn wait_ready_replica_set(ctx: &Ctx, when: &str) -> Result<(), Error> {
    ctx.step(format!(
        "waiting for replicaset {REPLICA_SET} to have all of its replicas ready{when}"
    ));
    let api: Api<ReplicaSet> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
    ctx.wait_for(
        &format!("every replica of ReplicaSet {REPLICA_SET} to be ready"),
        timeouts::POD_START,
        || async {
            let set = api.get(REPLICA_SET).await?;
            let wanted = set.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            let generation = set.metadata.generation.unwrap_or(0);
            let status = set.status.unwrap_or_default();
            Ok((status.observed_generation.unwrap_or(0) >= generation
                && status.replicas == wanted
                && status.ready_replicas.unwrap_or(0) == wanted)
                .then_some(()))
        },
    )
    .await
}

impl UpgradeTest for ReplicaSetUpgrade {
    fn name(&self) -> &'static str {
        "[sig-apps] replicaset-upgrade"
    }

    fn setup<'a>(&'a mut self, ctx: &'a Ctx) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            ctx.step(format!(
                "creating replicaset {REPLICA_SET} in namespace {}",
                ctx.namespace
            ));
            let set: ReplicaSet = serde_json::from_value(json!({
                "metadata": {"name": REPLICA_SET},
                "spec": {"replicas": 1, "selector": {"matchLabels": {APP_LABEL.0: APP_LABEL.1}},
                    "template": app_template("agnhost")}}))?;
            let api: Api<ReplicaSet> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
            let created = api
                .create(&PostParams::default(), &set)
                .await
                .with_context(|| format!("creating ReplicaSet {REPLICA_SET}"))?;
            wait_ready_replica_set(ctx, "").await?;
            self.uid = created.uid().unwrap_or_default();
            Ok(())
        })
    }

    fn after<'a>(&'a self, ctx: &'a Ctx) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            ctx.step(format!(
                "checking UID to verify replicaset {REPLICA_SET} survives upgrade"
            ));
            let api: Api<ReplicaSet> = Api::namespaced(ctx.client.clone(), &ctx.namespace);
            let uid = api.get(REPLICA_SET).await?.uid().unwrap_or_default();
            ensure!(
                uid == self.uid,
                "expected same replicaset UID: {} got: {uid}",
                self.uid
            );
            wait_ready_replica_set(ctx, " after upgrade").await?;
            ctx.step(format!("scaling up replicaset {REPLICA_SET} to 2"));
            api.patch(
                REPLICA_SET,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": 2}})),
            )
            .await
            .with_context(|| format!("scaling ReplicaSet {REPLICA_SET}"))?;
            wait_ready_replica_set(ctx, " after scaling").await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_downgrades_control_plane_follows_its_nodes() {
        let upgrading = |upgrade: &Upgrade| Upgrading {
            phases: watch::channel(Phase::Done).1,
            steps: upgrade.steps,
        };
        assert!(!upgrading(&MASTER_UPGRADE).nodes_before(Step::ControlPlane));
        assert!(!upgrading(&CLUSTER_UPGRADE).nodes_before(Step::ControlPlane));
        assert!(upgrading(&CLUSTER_DOWNGRADE).nodes_before(Step::ControlPlane));
        assert!(!upgrading(&CLUSTER_DOWNGRADE).nodes_before(Step::Nodes));
    }

    /// An answer through the load balancer: the pod's name, or the connection closed.
    fn answer(served: bool) -> ProbeAnswer {
        if served {
            ProbeAnswer {
                status: Some(200),
                body: Some("service-test-x7k2p".into()),
                error: None,
            }
        } else {
            ProbeAnswer {
                status: None,
                body: None,
                error: Some("the connection was closed without an answer".into()),
            }
        }
    }

    /// Runs [`hit_during`] over the control-plane step of a cluster upgrade; `served` says
    /// how each request (1, 2, ...) is answered, and the nodes' step begins while request
    /// `last` is on its way.
    async fn hits(served: impl Fn(usize) -> bool, last: usize) -> Hits {
        let (phases, watching) = watch::channel(Phase::Doing(Step::ControlPlane));
        let mut upgrading = Upgrading {
            phases: watching,
            steps: CLUSTER_UPGRADE.steps,
        };
        let mut calls = 0;
        let (hits, _) = hit_during(
            &mut upgrading,
            Step::ControlPlane,
            Duration::from_millis(1),
            || {
                calls += 1;
                if calls == last {
                    phases.send_replace(Phase::Doing(Step::Nodes));
                }
                let answer = answer(served(calls));
                async move { Ok(answer) }
            },
        )
        .await
        .unwrap();
        assert_eq!(calls, last, "no request is sent once the step has ended");
        hits
    }

    #[tokio::test]
    async fn a_request_answered_after_the_step_ended_is_not_counted() {
        // The third request meets the nodes' move (a node's proxy shutting down).
        let hits = hits(|call| call != 3, 3).await;
        assert_eq!((hits.sent, hits.answered), (2, 2));
        assert!(hits.outages.is_empty(), "{:?}", hits.outages);
    }

    #[tokio::test]
    async fn requests_failed_within_the_step_are_outages() {
        let hits = hits(|call| matches!(call, 1 | 4), 6).await;
        assert_eq!((hits.sent, hits.answered), (5, 2));
        let outages: Vec<(usize, bool, &str)> = hits
            .outages
            .iter()
            .map(|o| (o.failed, o.until.is_some(), o.first.as_str()))
            .collect();
        let closed = "the connection was closed without an answer";
        assert_eq!(outages, [(2, true, closed), (1, false, closed)]);
    }

    #[test]
    fn versions_compare_as_upstream_checks_them() {
        assert!(is_version("v1.34.2", "v1.34"));
        assert!(is_version("v1.34.0+genplane.0.1.0", "1.34.0"));
        assert!(!is_version("v1.33.0", "v1.34.0"));
        assert!(!is_version("v1.33.0", ""));
    }

    #[test]
    fn namespaces_are_named_after_the_tests_as_upstream_names_them() {
        let suffixes: Vec<String> = tests().iter().map(|t| namespace_suffix(t.name())).collect();
        assert_eq!(
            suffixes,
            [
                "service-upgrade",
                "sig-apps-deployment-upgrade",
                "sig-apps-replicaset-upgrade"
            ]
        );
    }
}
