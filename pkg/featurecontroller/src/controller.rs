//! The server flow of `genplane feature-controller`: every instance keeps its identity Lease;
//! the leader ([`crate::leader`]) announces the features the binary knows, drives transitions
//! through their tasks and collects the Leases and uses of instances that are gone.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::time::Duration;

use genplane_api::featuregates::{API_VERSION, object_name};
use genplane_component_base::featuregate::{FeatureGate, Registry, Stage, Task};
use genplane_component_base::metrics;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use serde_json::{Value, json};

use crate::check::field;
use crate::identity::{self, Identity};
use crate::reconcile::{self, Known, Versions};
use crate::uses::feature_resource;

/// How often one sync tries to write a Feature's status when use reports keep changing it.
const WRITE_ATTEMPTS: usize = 5;

/// The component name of the feature-controller (its identity Leases' label value).
pub const COMPONENT: &str = genplane_api::featuregates::FEATURE_CONTROLLER;

/// Errors of the server flow; each is logged and the work retried at the next sync.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A request to the API server failed.
    #[error("{what}: {source}")]
    Api {
        /// What was being done.
        what: String,
        /// The client's error.
        source: kube::Error,
    },
    /// A task this feature-controller does not know how to run.
    #[error("this feature-controller does not know how to run task {task}")]
    UnknownTask {
        /// The task's type.
        task: String,
    },
}

fn api(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let what = what.into();
    move |source| Error::Api { what, source }
}

/// How the server flow runs.
#[derive(Clone, Debug)]
pub struct Config {
    /// Where the Features live (`kube-system`).
    pub namespace: String,
    /// How often instances report uses (`--feature-use-report-period`); `WaitForUses` waits
    /// twice as long after clearing the uses.
    pub report_period: Duration,
    /// How long this instance's identity Lease lasts (`--identity-lease-duration`); it is
    /// renewed every third of it, and the leader changes within about that long after the
    /// leader stops.
    pub identity_lease_duration: Duration,
    /// How often the leader reconciles every Feature (`--sync-period`).
    pub sync_period: Duration,
    /// The features clients may set `spec.desired` of whatever the API servers say (the
    /// feature-controller's deprecated `--dynamic-features`).
    pub dynamic: BTreeSet<String>,
    /// The binary's Kubernetes version, MAJOR.MINOR.
    pub binary_version: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TransitionLabels {
    feature: String,
    to: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TaskLabels {
    feature: String,
    task: String,
    outcome: String,
}

/// The buckets of `feature_task_duration_seconds`: a run lists and writes objects through the
/// API, from milliseconds to minutes for many objects.
const TASK_BUCKETS: [f64; 10] = [0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 30.0, 120.0];

fn task_histogram() -> Histogram {
    Histogram::new(TASK_BUCKETS)
}

/// The server flow's metrics.
#[derive(Clone, Debug)]
struct Metrics {
    transitions: Family<TransitionLabels, Counter>,
    tasks: Family<TaskLabels, Histogram, fn() -> Histogram>,
    leader: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            transitions: Family::default(),
            tasks: Family::new_with_constructor(task_histogram),
            leader: Gauge::default(),
        }
    }
}

/// The server flow of one feature-controller instance.
pub struct FeatureController {
    client: kube::Client,
    config: Config,
    known: Vec<Known>,
    versions: Versions,
    identity: Identity,
    metrics: Metrics,
}

/// What the binary knows: every feature of `registry`, with the values `gate` (the
/// feature-controller's own `--feature-gates`) gives them at its emulated version. A feature
/// that does not exist at that version (pre-alpha: the emulated version is below its first) is
/// known as absent ([`Known::exists`]): configured off, neither dynamic nor central, so that a
/// Feature left from a newer version is turned off with its turn-off tasks (a downgrade's
/// stored-state cleanup). Values are read without recording a use: the feature-controller
/// configures features, it does not use them.
pub fn known_features(
    registry: &Registry,
    gate: &FeatureGate,
    dynamic: &BTreeSet<String>,
) -> Vec<Known> {
    gate.features()
        .into_iter()
        .filter(|f| registry.spec_at(f.name, gate.emulated_version()).is_some())
        .map(|f| {
            let exists = f.spec.stage != Stage::PreAlpha;
            Known {
                name: f.name,
                stage: f.spec.stage,
                default: f.spec.default,
                locked: f.spec.lock_to_default,
                configured: f.enabled && exists,
                dynamic: exists && dynamic.contains(f.name),
                may_be_dynamic: exists
                    && registry.is_dynamic_capable(f.name)
                    && !registry.is_central(f.name),
                central: exists && registry.is_central(f.name),
                turn_off_tasks: registry.turn_off_tasks(f.name).to_vec(),
                exists,
            }
        })
        .collect()
}

impl std::fmt::Debug for FeatureController {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FeatureController")
            .field("config", &self.config)
            .field("instance", &self.identity.name())
            .finish_non_exhaustive()
    }
}

impl FeatureController {
    /// The server flow of a new instance (host `host`), announcing `known` features.
    pub fn new(
        client: kube::Client,
        config: Config,
        known: Vec<Known>,
        emulated_version: String,
        host: &str,
        registry: &metrics::Registry,
    ) -> Self {
        let identity = Identity::new(COMPONENT, host, config.identity_lease_duration);
        let metrics = Metrics::default();
        registry.register(
            "feature_transitions",
            "Feature state changes this feature-controller made, by feature and the state entered",
            metrics.transitions.clone(),
        );
        registry.register(
            "feature_task_duration_seconds",
            "How long each run of a transition's task took, by feature, task and outcome (done, pending, failed)",
            metrics.tasks.clone(),
        );
        registry.register(
            "feature_controller_leader",
            "Whether this feature-controller instance is the one acting (1) or stands by (0)",
            metrics.leader.clone(),
        );
        Self {
            client,
            versions: Versions {
                binary: config.binary_version.clone(),
                emulated: emulated_version,
            },
            config,
            known,
            identity,
            metrics,
        }
    }

    /// This instance's name (its identity Lease).
    pub fn instance(&self) -> &str {
        self.identity.name()
    }

    /// How long a Feature may go without a write it is owed ([`reconcile::owed`]) before an
    /// instance standing by passes over the acting one: two identity Lease durations (the
    /// acting one may just have died) and three sync periods (it may be in the middle of one).
    pub fn stall_bound(&self) -> Duration {
        self.config.identity_lease_duration * 2 + self.config.sync_period * 3
    }

    /// Runs until `stop` resolves: renews the identity Lease, and when this instance leads,
    /// reconciles every sync period. Errors are logged and retried.
    pub async fn run(self, stop: impl Future<Output = ()>) {
        tracing::info!(
            instance = self.identity.name(),
            "starting the feature-controller"
        );
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), identity::NAMESPACE);
        let renew_every = self.config.identity_lease_duration / 3;
        let mut ticks = tokio::time::interval(self.config.sync_period.min(renew_every));
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut renewed: Option<tokio::time::Instant> = None;
        let mut synced: Option<tokio::time::Instant> = None;
        let mut leading = None;
        let mut standby = Standby::default();
        tokio::pin!(stop);
        loop {
            tokio::select! {
                () = &mut stop => {
                    self.metrics.leader.set(0);
                    // Stopping on purpose: the next instance takes over at once.
                    if let Err(error) = self.identity.release(&leases).await {
                        tracing::warn!(%error, "releasing the identity lease");
                    }
                    return;
                }
                _ = ticks.tick() => {}
            }
            if renewed.is_none_or(|at| at.elapsed() >= renew_every) {
                match self.identity.renew(&leases).await {
                    Ok(()) => renewed = Some(tokio::time::Instant::now()),
                    Err(error) => {
                        tracing::warn!(%error, "renewing the identity lease");
                        continue;
                    }
                }
            }
            if synced.is_some_and(|at| at.elapsed() < self.config.sync_period) {
                continue;
            }
            synced = Some(tokio::time::Instant::now());
            match self.sync(&leases, &mut leading, &mut standby).await {
                Ok(()) => {}
                Err(error) => tracing::warn!(%error, "feature-controller sync; retrying"),
            }
        }
    }

    /// One pass: find the leader and, when it is this instance, reconcile. Standing by, watch
    /// that the acting instance does what the Features ask of it, and pass it over when it
    /// does not ([`Standby`]).
    async fn sync(
        &self,
        leases: &Api<Lease>,
        leading: &mut Option<bool>,
        standby: &mut Standby,
    ) -> Result<(), Error> {
        let now = Timestamp::now();
        let identities = identity::list(leases, now, self.config.identity_lease_duration)
            .await
            .map_err(api("listing identity leases"))?;
        standby
            .passed_over
            .retain(|name| identities.live.contains_key(name));
        let features: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            &self.config.namespace,
            &feature_resource(),
        );
        let mut leader = self.leader_among(&identities, standby);
        let mut listed = None;
        if let Some(acting) = leader.clone()
            && acting != self.identity.name()
        {
            let objects = self.list_features(&features).await?;
            let wait = self.config.report_period * 2;
            let bound = SignedDuration::try_from(self.stall_bound()).unwrap_or(SignedDuration::MAX);
            if let Some((feature, owed)) =
                standby.stalled(&objects, &identities.live, now, wait, bound)
            {
                tracing::warn!(
                    instance = acting,
                    feature,
                    owed,
                    "passing over the acting feature-controller: a Feature waits for it longer \
                     than {:?}",
                    self.stall_bound()
                );
                standby.passed_over.insert(acting);
                standby.stalls.clear();
                leader = self.leader_among(&identities, standby);
            }
            listed = Some(objects);
        }
        let me = leader.as_deref() == Some(self.identity.name());
        if me {
            standby.stalls.clear();
        }
        if *leading != Some(me) {
            *leading = Some(me);
            if me {
                tracing::info!(
                    instance = self.identity.name(),
                    "leading: this instance acts for the feature-controllers"
                );
            } else {
                tracing::info!(
                    instance = self.identity.name(),
                    leader = leader.as_deref().unwrap_or("none"),
                    "standing by"
                );
            }
        }
        self.metrics.leader.set(i64::from(me));
        if !me {
            return Ok(());
        }
        for lease in &identities.stale {
            if identity::delete_stale(leases, lease)
                .await
                .map_err(api("deleting an expired identity lease"))?
            {
                tracing::info!(
                    lease = lease.metadata.name.as_deref().unwrap_or_default(),
                    "deleted an expired identity lease"
                );
            }
        }
        let objects = match listed {
            Some(objects) => objects,
            None => self.list_features(&features).await?,
        };
        let mut by_name: BTreeMap<String, Value> = BTreeMap::new();
        for value in objects {
            if let Some(name) = value.pointer("/metadata/name").and_then(Value::as_str) {
                by_name.insert(name.to_owned(), value);
            }
        }
        for known in &self.known {
            let name = object_name(known.name);
            let object = match by_name.remove(&name) {
                Some(object) => object,
                // Absent at this emulated version: nothing to announce.
                None if !known.exists => continue,
                None => match self.announce(&features, known).await {
                    Ok(object) => object,
                    Err(error) => {
                        tracing::warn!(%error, feature = known.name, "announcing");
                        continue;
                    }
                },
            };
            if let Err(error) = self
                .reconcile(&features, known, &object, &identities.live, now)
                .await
            {
                tracing::warn!(%error, feature = known.name, "reconciling");
            }
        }
        Ok(())
    }

    /// The acting instance: the heaviest live feature-controller not passed over.
    fn leader_among(&self, identities: &identity::Identities, standby: &Standby) -> Option<String> {
        let candidates = identities
            .live
            .values()
            .filter(|i| i.component == COMPONENT && !standby.passed_over.contains(&i.name))
            .map(|i| i.name.as_str());
        crate::leader::leader(candidates).map(str::to_owned)
    }

    /// The Features of the namespace, as JSON.
    async fn list_features(&self, features: &Api<DynamicObject>) -> Result<Vec<Value>, Error> {
        let listed = features
            .list(&ListParams::default())
            .await
            .map_err(api("listing features"))?;
        Ok(listed
            .items
            .into_iter()
            .map(|object| serde_json::to_value(&object).unwrap_or_default())
            .collect())
    }

    /// Creates the Feature of `known`.
    async fn announce(&self, features: &Api<DynamicObject>, known: &Known) -> Result<Value, Error> {
        let name = object_name(known.name);
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": API_VERSION,
            "kind": genplane_api::featuregates::feature::KIND,
            "metadata": {"name": name, "namespace": self.config.namespace},
            "spec": {"featureName": known.name},
        }))
        .expect("invariant: a Feature is a DynamicObject");
        let created = match features.create(&post_params(), &object).await {
            Ok(created) => created,
            Err(kube::Error::Api(status)) if status.code == 409 => features
                .get(&name)
                .await
                .map_err(api(format!("reading feature {name}")))?,
            Err(error) => return Err(api(format!("creating feature {name}"))(error)),
        };
        tracing::info!(feature = known.name, object = %name, "announced a feature");
        Ok(serde_json::to_value(&created).unwrap_or_default())
    }

    /// Computes and writes the status of one Feature, running its next task when due. A write
    /// that loses a race (a use report came in between) is recomputed from a fresh read, with
    /// the outcome of a task already run this time rather than running it again.
    async fn reconcile(
        &self,
        features: &Api<DynamicObject>,
        known: &Known,
        object: &Value,
        live: &BTreeMap<String, identity::Instance>,
        now: Timestamp,
    ) -> Result<(), Error> {
        let wait = self.config.report_period * 2;
        let name = object_name(known.name);
        let mut object = object.clone();
        let mut ran: Option<(Task, Result<Outcome, String>)> = None;
        for _ in 0..WRITE_ATTEMPTS {
            let mut plan = reconcile::plan(&object, known, &self.versions, live, now, wait);
            if let Some(task) = plan.run {
                let outcome = match &ran {
                    Some((done, outcome)) if *done == task => outcome.clone(),
                    _ => {
                        let started = std::time::Instant::now();
                        let outcome = self
                            .run_task(&task, &object)
                            .await
                            .map_err(|e| e.to_string());
                        self.metrics
                            .tasks
                            .get_or_create(&TaskLabels {
                                feature: known.name.to_owned(),
                                task: task.type_name().to_owned(),
                                outcome: match &outcome {
                                    Ok(Outcome::Done(_)) => "done",
                                    Ok(Outcome::Pending(_)) => "pending",
                                    Err(_) => "failed",
                                }
                                .to_owned(),
                            })
                            .observe(started.elapsed().as_secs_f64());
                        match &outcome {
                            Ok(Outcome::Done(message)) => {
                                tracing::info!(feature = known.name, task = task.type_name(), %message, "task done")
                            }
                            Ok(Outcome::Pending(message)) => {
                                tracing::info!(feature = known.name, task = task.type_name(), %message, "task waiting")
                            }
                            Err(error) => {
                                tracing::warn!(feature = known.name, task = task.type_name(), %error, "task failed; retrying")
                            }
                        }
                        ran = Some((task, outcome.clone()));
                        outcome
                    }
                };
                match outcome {
                    Ok(Outcome::Done(message)) => {
                        if let Some(done) = reconcile::task_done(&mut plan.status, &message) {
                            plan.transitions.push(done);
                            reconcile::refresh_upgrade_safe(
                                &mut plan.status,
                                known,
                                &self.versions,
                                now,
                            );
                        }
                    }
                    Ok(Outcome::Pending(message)) => {
                        reconcile::task_pending(&mut plan.status, &message);
                    }
                    Err(error) => reconcile::task_failed(&mut plan.status, &error),
                }
            }
            if object.get("status") == Some(&plan.status) {
                return Ok(());
            }
            let mut updated = object.clone();
            updated["status"] = plan.status;
            // Managed fields sent back would replace the server's record of who owns what (the
            // reporters' `uses` entries); left out, the server keeps and updates it.
            if let Some(meta) = updated.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("managedFields");
            }
            let body: DynamicObject =
                serde_json::from_value(updated).expect("invariant: a Feature is a DynamicObject");
            // The resourceVersion read is the precondition: a write computed from an old read
            // (by a second leader, or racing a use report) fails and is recomputed.
            match features.replace_status(&name, &post_params(), &body).await {
                Ok(_) => {
                    for to in plan.transitions {
                        tracing::info!(feature = known.name, state = to, "feature state changed");
                        self.metrics
                            .transitions
                            .get_or_create(&TransitionLabels {
                                feature: known.name.to_owned(),
                                to: to.to_owned(),
                            })
                            .inc();
                    }
                    return Ok(());
                }
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    tracing::debug!(
                        feature = known.name,
                        "status changed meanwhile; recomputing"
                    );
                    let fresh = features
                        .get(&name)
                        .await
                        .map_err(api(format!("reading feature {name}")))?;
                    object = serde_json::to_value(&fresh).unwrap_or_default();
                }
                Err(error) => return Err(api(format!("writing the status of {name}"))(error)),
            }
        }
        Ok(())
    }

    /// The API of `object`'s resource in its namespace (or cluster-wide).
    fn api_of(&self, object: &DynamicObject, resource_type: &ApiResource) -> Api<DynamicObject> {
        match &object.metadata.namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, resource_type),
            None => Api::all_with(self.client.clone(), resource_type),
        }
    }

    /// Deletes each of `objects` not being deleted already; returns how many are going.
    async fn delete_all(
        &self,
        objects: &[DynamicObject],
        resource_type: &ApiResource,
    ) -> Result<usize, Error> {
        let mut deleting = 0;
        for object in objects {
            if object.metadata.deletion_timestamp.is_some() {
                deleting += 1;
                continue;
            }
            let name = object.metadata.name.clone().unwrap_or_default();
            match self
                .api_of(object, resource_type)
                .delete(&name, &Default::default())
                .await
            {
                Ok(_) => deleting += 1,
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => {
                    return Err(api(format!("deleting {} {name}", resource_type.plural))(
                        error,
                    ));
                }
            }
        }
        Ok(deleting)
    }

    /// The objects `task` works on, with their resource.
    async fn list_stored(&self, task: &Task) -> Result<(ApiResource, Vec<DynamicObject>), Error> {
        let stored = task.stored();
        crate::check::list_stored(&self.client, &stored)
            .await
            .map_err(api(format!("listing {}", stored.describe())))
    }

    /// Runs one declared task of the Feature `feature`; returns what it did.
    async fn run_task(&self, task: &Task, feature: &Value) -> Result<Outcome, Error> {
        match *task {
            Task::ClearField { target, fields } => {
                let resource = target.resource;
                let (resource_type, items) = self.list_stored(task).await?;
                let mut cleared = 0;
                for object in items {
                    let value = serde_json::to_value(&object).unwrap_or_default();
                    let present: Vec<&str> = fields
                        .iter()
                        .copied()
                        .filter(|f| field(&value, f).is_some())
                        .collect();
                    if present.is_empty() {
                        continue;
                    }
                    let mut patch = json!({"metadata": {
                        "resourceVersion": object.metadata.resource_version,
                    }});
                    for path in &present {
                        set_null(&mut patch, path);
                    }
                    let name = object.metadata.name.clone().unwrap_or_default();
                    self.api_of(&object, &resource_type)
                        .patch(
                            &name,
                            &PatchParams {
                                field_manager: Some(FIELD_MANAGER.to_owned()),
                                ..PatchParams::default()
                            },
                            &Patch::Merge(&patch),
                        )
                        .await
                        .map_err(api(format!(
                            "clearing {} of {resource} {name}",
                            present.join(",")
                        )))?;
                    cleared += 1;
                }
                Ok(Outcome::Done(format!(
                    "cleared {} from {cleared} {resource}",
                    fields.join(",")
                )))
            }
            Task::WaitForObjectsRemoved { target } => {
                let resource = target.resource;
                let (resource_type, items) = self.list_stored(task).await?;
                if items.is_empty() {
                    return Ok(Outcome::Done(format!("no {resource} left")));
                }
                let names: Vec<String> = items
                    .iter()
                    .map(|o| match &o.metadata.namespace {
                        Some(ns) => format!("{ns}/{}", o.metadata.name.as_deref().unwrap_or("")),
                        None => o.metadata.name.clone().unwrap_or_default(),
                    })
                    .collect();
                let shown = names.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
                let more = if names.len() > 5 { ", ..." } else { "" };
                let opted_in = feature
                    .pointer("/metadata/annotations")
                    .and_then(|a| a.get(DELETE_OBJECTS))
                    .and_then(Value::as_str)
                    == Some("true");
                if !opted_in {
                    return Ok(Outcome::Pending(format!(
                        "waiting for {} {resource} to be removed ({shown}{more}): delete them, or \
                         annotate this Feature {DELETE_OBJECTS}=true to let the feature-controller \
                         delete them",
                        names.len()
                    )));
                }
                let deleting = self.delete_all(&items, &resource_type).await?;
                Ok(Outcome::Pending(format!(
                    "deleting {deleting} {resource} as {DELETE_OBJECTS}=true asks; waiting for \
                     them to go ({shown}{more})"
                )))
            }
            Task::DeleteObjects { target, selector } => {
                let resource = target.resource;
                let (resource_type, items) = self.list_stored(task).await?;
                if items.is_empty() {
                    return Ok(Outcome::Done(format!(
                        "no {resource} labelled {selector} left"
                    )));
                }
                let deleting = self.delete_all(&items, &resource_type).await?;
                Ok(Outcome::Pending(format!(
                    "deleting {deleting} {resource} labelled {selector}"
                )))
            }
            _ => Err(Error::UnknownTask {
                task: task.type_name().to_owned(),
            }),
        }
    }
}

/// What an instance standing by keeps between syncs to notice an acting instance that does not
/// act: since when each Feature has owed it a write ([`reconcile::owed`]) with nothing the
/// acting instance writes changed ([`acted_on`]), and the instances it passed over (a silent
/// one's Lease may be renewed, or last long: it is live but never acts). An instance passed over is left out of the choice of
/// the acting one until its Lease is gone; while its Lease lives, several instances may act at
/// once, which the resourceVersion preconditions of every write make safe.
#[derive(Debug, Default)]
struct Standby {
    stalls: BTreeMap<String, (String, Timestamp)>,
    passed_over: BTreeSet<String>,
}

impl Standby {
    /// Records what `features` owe at `now`; the first Feature (name, what it is owed) that
    /// has owed it, with nothing the acting instance writes changed, for `bound` or longer.
    fn stalled(
        &mut self,
        features: &[Value],
        live: &BTreeMap<String, identity::Instance>,
        now: Timestamp,
        wait: Duration,
        bound: SignedDuration,
    ) -> Option<(String, String)> {
        let mut stalls = BTreeMap::new();
        let mut found = None;
        for object in features {
            let Some(owed) = reconcile::owed(object, live, now, wait) else {
                continue;
            };
            let name = object
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let acted = acted_on(object);
            let since = match self.stalls.get(&name) {
                Some((seen, since)) if *seen == acted => *since,
                _ => now,
            };
            if found.is_none() && now.duration_since(since) >= bound {
                found = Some((name.clone(), owed));
            }
            stalls.insert(name, (acted, since));
        }
        self.stalls = stalls;
        found
    }
}

/// What of a Feature shows whether the acting feature-controller acts on it: the generation
/// (the admin's spec) and the status but for `status.uses`. The uses are the instances' own
/// reports, which every API server rewrites each report period: keyed by the resourceVersion,
/// a Feature in use changed every period, and an acting instance that never acted was never
/// passed over.
fn acted_on(object: &Value) -> String {
    let generation = object
        .pointer("/metadata/generation")
        .map(Value::to_string)
        .unwrap_or_default();
    let mut status = object.get("status").cloned().unwrap_or(Value::Null);
    if let Some(status) = status.as_object_mut() {
        status.remove("uses");
    }
    format!("{generation} {status}")
}

/// The annotation of a Feature by which an admin lets the feature-controller delete the objects
/// a `WaitForObjectsRemoved` task waits for.
pub const DELETE_OBJECTS: &str = "featuregates.genplane.io/delete-objects";

/// What running a task came to.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    /// The task is complete.
    Done(String),
    /// The task ran and waits for something else (an admin, a finalizer); it runs again at the
    /// next sync.
    Pending(String),
}

/// The field manager of the server flow's writes.
pub const FIELD_MANAGER: &str = "genplane-feature-controller";

fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    }
}

/// Sets the dotted `path` of a merge patch to `null`.
fn set_null(patch: &mut Value, path: &str) {
    let mut at = patch;
    let mut keys = path.split('.').peekable();
    while let Some(key) = keys.next() {
        if keys.peek().is_none() {
            at[key] = Value::Null;
            return;
        }
        if !at[key].is_object() {
            at[key] = json!({});
        }
        at = &mut at[key];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_feature_left_waiting_is_a_stall_though_the_api_servers_keep_reporting_its_use() {
        let feature = |rv: u32, report: &str, state: &str| {
            json!({
                "metadata": {"name": "f", "resourceVersion": rv.to_string(), "generation": 2},
                "spec": {"desired": "Off"},
                "status": {"state": state, "dynamic": true, "uses": [{
                    "instance": "apiserver-1", "value": "On", "lastReport": report}]},
            })
        };
        let live: BTreeMap<String, identity::Instance> =
            [("apiserver-1".to_owned(), identity::Instance::default())].into();
        let bound = SignedDuration::from_secs(10);
        let at = |s: i64| Timestamp::from_second(1_000 + s).unwrap();
        let mut standby = Standby::default();
        // Owed from 0 s; every second the API server's report changes the resourceVersion.
        for s in 0..10 {
            let objects = [feature(10 + s as u32, &format!("t{s}"), "On")];
            let found = standby.stalled(&objects, &live, at(s), Duration::from_secs(2), bound);
            assert_eq!(found, None, "at {s} s");
        }
        let objects = [feature(20, "t10", "On")];
        let found = standby.stalled(&objects, &live, at(10), Duration::from_secs(2), bound);
        assert_eq!(found.map(|(name, _)| name).as_deref(), Some("f"));
        // What the acting instance writes (a condition, say) starts the wait again.
        let mut standby = Standby::default();
        standby.stalled(
            &[feature(30, "t0", "On")],
            &live,
            at(0),
            Duration::from_secs(2),
            bound,
        );
        let mut acted = [feature(31, "t9", "On")];
        acted[0]["status"]["conditions"] = json!([{"type": "Agreed", "status": "False"}]);
        standby.stalled(&acted, &live, at(9), Duration::from_secs(2), bound);
        let found = standby.stalled(&acted, &live, at(12), Duration::from_secs(2), bound);
        assert_eq!(found, None, "waited 3 s since it acted");
    }

    #[test]
    fn clear_field_patches_name_each_present_field() {
        let mut patch = json!({"metadata": {"resourceVersion": "5"}});
        set_null(&mut patch, "spec.strategy");
        set_null(&mut patch, "spec.preferredHolder");
        assert_eq!(
            patch,
            json!({"metadata": {"resourceVersion": "5"},
                   "spec": {"strategy": null, "preferredHolder": null}})
        );
        let lease = json!({"spec": {"strategy": "OldestEmulationVersion", "holderIdentity": "a"}});
        assert!(field(&lease, "spec.strategy").is_some());
        assert!(field(&lease, "spec.preferredHolder").is_none());
        assert!(field(&lease, "status.x").is_none());
    }
}
