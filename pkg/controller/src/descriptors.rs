//! The table of controllers by name, the `--controllers` selection, and running the selected
//! controllers side by side.
//!
//! Every controller is described once in [`CONTROLLERS`] by a [`ControllerDescriptor`]: its
//! name, the names upstream's kube-controller-manager knows it by where they differ (accepted
//! by `--controllers` as aliases), whether `*` includes it, the feature gates it needs, and its
//! constructor.
//!
//! `--controllers` reads as upstream's kube-controller-manager reads it: a list of names, where
//! `foo` enables controller `foo`, `-foo` disables it, and `*` enables every controller that is
//! not disabled by default. The first entry that names a controller (by name or alias) decides;
//! a controller that no entry names is enabled only if `*` is in the list and it is not disabled
//! by default. A name no controller has is a configuration error listing the known names.
//!
//! A selected controller whose required feature gates are not all on is not started
//! ([`Selection::resolve`] reports it as [`Skipped`]); when `--controllers` names it explicitly,
//! the controller-manager says so in a warning that names the gates, as upstream logs it.
//!
//! # Gated controllers at run time
//!
//! [`run_controllers`] follows the feature gates while it runs ([`GateStates`], a `tokio` watch
//! channel the controller-manager fills from its gate and the Features' states). For each
//! selected controller it keeps one of three [`GateState`]s, the lowest of its gates':
//!
//! - `On`: it runs in full;
//! - `Draining`: its gate is off here but the cluster may still hold objects of the feature
//!   (the Feature's state is `On`, `TurningOn` or `TurningOff`): it runs only to remove them
//!   ([`ControllerContext::removal_only`]; the registry controller releases deleted claims but
//!   keeps no well-known claim);
//! - `Off`: it does not run.
//!
//! When a controller's state changes it is stopped (its future dropped at its next await
//! point: its tasks are aborted and its watch subscriptions released) and, unless `Off`,
//! started again in the new state. Controllers decide from what they watch, so a restarted one
//! picks up whatever its predecessor left undone. Ungated controllers start at once; gated ones
//! wait until the gates are known.

use std::future::Future;
use std::time::Duration;

use futures::future::{AbortHandle, Abortable, BoxFuture};
use futures::stream::{FuturesUnordered, StreamExt as _};

use crate::informers::SharedInformers;

/// Any controller's error, as the table's constructors return it.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// How a controller of the table is made: given the shared context, a future that runs the
/// controller until it fails (controllers do not stop on their own). The controller subscribes
/// to its watches through [`ControllerContext::informers`] when the future is first polled.
pub type Constructor = fn(ControllerContext) -> BoxFuture<'static, Result<(), BoxError>>;

/// Errors of the registry.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `--controllers` names a controller that does not exist.
    #[error(
        "{name:?} is not in the list of known controllers: {known} (upstream's names are accepted too)"
    )]
    Unknown {
        /// The name given.
        name: String,
        /// The known names, comma-separated.
        known: String,
    },
    /// A controller stopped with an error.
    #[error("controller {name} failed")]
    Failed {
        /// The controller's name.
        name: &'static str,
        /// Why.
        #[source]
        source: BoxError,
    },
    /// A controller stopped although it should run until shutdown.
    #[error("controller {0} stopped unexpectedly")]
    Stopped(&'static str),
}

/// What every controller is given.
#[derive(Clone)]
pub struct ControllerContext {
    /// A client of the API server.
    pub client: kube::Client,
    /// The watches every controller shares: one per resource.
    pub informers: SharedInformers,
    /// The root CA bundle (PEM) published in every namespace as `kube-root-ca.crt`.
    pub root_ca: String,
    /// How often the resource-quota controller recalculates every quota in full
    /// (`--resource-quota-sync-period`, 5 minutes upstream).
    pub resource_quota_sync_period: Duration,
    /// How long a deleted NetworkClaim keeps its ranges before they are released
    /// (`--network-claim-release-grace-period`, [`crate::networkclaim::DEFAULT_RELEASE_GRACE`]
    /// unless set).
    pub network_claim_release_grace: Duration,
    /// The Pod IP ranges (`--cluster-cidr`), claimed as the well-known NetworkClaim
    /// `kube-controller-manager` by the `networkclaim` controller; none when empty.
    pub cluster_cidr: Vec<genplane_api::networkregistry::Prefix>,
    /// Whether the controller runs only to remove what its feature left, its gate being off
    /// while the cluster turns the feature off ([`GateState::Draining`]): it makes nothing new.
    pub removal_only: bool,
    /// What `csrsigning` signs with (`--cluster-signing-*`); no CA: it issues nothing.
    pub csr_signing: crate::certificates::SigningConfig,
    /// Whether the namespace controller deletes a namespace's pods before the rest
    /// (`OrderedNamespaceDeletion`, asked at every sync): the controller-manager's feature
    /// gate; on unless set, the feature's default at this Kubernetes version.
    pub pods_first: crate::namespace::PodsFirst,
}

impl ControllerContext {
    /// A context for one run of the controllers, with a fresh set of shared watches (they stop
    /// when every controller given this context, or a clone of it, has stopped).
    pub fn new(
        client: kube::Client,
        root_ca: String,
        resource_quota_sync_period: Duration,
    ) -> Self {
        Self {
            informers: SharedInformers::new(client.clone()),
            client,
            root_ca,
            resource_quota_sync_period,
            network_claim_release_grace: crate::networkclaim::DEFAULT_RELEASE_GRACE,
            cluster_cidr: Vec::new(),
            csr_signing: crate::certificates::SigningConfig::default(),
            removal_only: false,
            pods_first: std::sync::Arc::new(|| true),
        }
    }
}

impl std::fmt::Debug for ControllerContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerContext")
            .field("informers", &self.informers)
            .field("root_ca_bytes", &self.root_ca.len())
            .field(
                "resource_quota_sync_period",
                &self.resource_quota_sync_period,
            )
            .field(
                "network_claim_release_grace",
                &self.network_claim_release_grace,
            )
            .field("cluster_cidr", &self.cluster_cidr)
            .field("csr_signing", &self.csr_signing)
            .field("removal_only", &self.removal_only)
            .finish_non_exhaustive()
    }
}

/// One controller of the table.
#[derive(Clone, Copy, Debug)]
pub struct ControllerDescriptor {
    /// The name `--controllers` knows it by, and that logs use.
    pub name: &'static str,
    /// Other names `--controllers` accepts: upstream's, where they differ from `name`.
    pub aliases: &'static [&'static str],
    /// Whether `*` leaves it out (it must then be named to run).
    pub disabled_by_default: bool,
    /// The feature gates that must all be on for it to run.
    pub required_feature_gates: &'static [&'static str],
    /// How it is made.
    pub constructor: Constructor,
}

impl ControllerDescriptor {
    /// Whether `name` is this controller's name or one of its aliases.
    pub fn is_named(&self, name: &str) -> bool {
        self.name == name || self.aliases.contains(&name)
    }
}

/// Every controller genplane's controller-manager can run, by name, with upstream's names
/// (`kube-controller-manager --controllers`, both the current and the older short ones) as
/// aliases.
pub static CONTROLLERS: &[ControllerDescriptor] = &[
    ControllerDescriptor {
        name: "namespace",
        aliases: &["namespace-controller"],
        disabled_by_default: false,
        required_feature_gates: &[],
        constructor: |ctx| {
            Box::pin(async move {
                Ok(crate::namespace::run(ctx.client, ctx.informers, ctx.pods_first).await?)
            })
        },
    },
    ControllerDescriptor {
        name: "garbage-collector",
        aliases: &["garbage-collector-controller", "garbagecollector"],
        disabled_by_default: false,
        required_feature_gates: &[],
        constructor: |ctx| {
            Box::pin(
                async move { Ok(crate::garbagecollector::run(ctx.client, ctx.informers).await?) },
            )
        },
    },
    ControllerDescriptor {
        name: "serviceaccount",
        aliases: &["serviceaccount-controller"],
        disabled_by_default: false,
        required_feature_gates: &[],
        constructor: |ctx| {
            Box::pin(
                async move { Ok(crate::serviceaccount::run(ctx.client, ctx.informers).await?) },
            )
        },
    },
    ControllerDescriptor {
        name: "root-ca-cert-publisher",
        aliases: &["root-ca-certificate-publisher-controller"],
        disabled_by_default: false,
        required_feature_gates: &[],
        constructor: |ctx| {
            Box::pin(async move {
                Ok(crate::rootcacertpublisher::run(ctx.client, ctx.informers, ctx.root_ca).await?)
            })
        },
    },
    ControllerDescriptor {
        name: "clusterrole-aggregation",
        aliases: &["clusterrole-aggregation-controller"],
        disabled_by_default: false,
        required_feature_gates: &[],
        constructor: |ctx| {
            Box::pin(async move {
                Ok(crate::clusterroleaggregation::run(ctx.client, ctx.informers).await?)
            })
        },
    },
    ControllerDescriptor {
        name: "resourcequota",
        aliases: &["resourcequota-controller"],
        disabled_by_default: false,
        required_feature_gates: &[],
        constructor: |ctx| {
            Box::pin(async move {
                Ok(crate::resourcequota::run(
                    ctx.client,
                    ctx.informers,
                    ctx.resource_quota_sync_period,
                )
                .await?)
            })
        },
    },
    ControllerDescriptor {
        name: "csrsigning",
        aliases: &["certificatesigningrequest-signing-controller"],
        disabled_by_default: false,
        required_feature_gates: &[],
        constructor: |ctx| {
            Box::pin(async move {
                Ok(crate::certificates::signer::run(ctx.client, ctx.csr_signing).await?)
            })
        },
    },
    ControllerDescriptor {
        name: "csrcleaner",
        aliases: &["certificatesigningrequest-cleaner-controller"],
        disabled_by_default: false,
        required_feature_gates: &[],
        constructor: |ctx| {
            Box::pin(async move { Ok(crate::certificates::cleaner::run(ctx.client).await?) })
        },
    },
    ControllerDescriptor {
        name: "networkclaim",
        aliases: &["networkclaim-controller"],
        disabled_by_default: false,
        required_feature_gates: &[genplane_api::features::NETWORK_REGISTRY],
        constructor: |ctx| {
            Box::pin(async move {
                // While the feature drains, no well-known claim is made again.
                let cluster_cidr = if ctx.removal_only {
                    Vec::new()
                } else {
                    ctx.cluster_cidr
                };
                Ok(crate::networkclaim::run(
                    ctx.client,
                    ctx.network_claim_release_grace,
                    cluster_cidr,
                )
                .await?)
            })
        },
    },
];

/// The parsed `--controllers` list, every name resolved to the controller's own name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    entries: Vec<String>,
}

impl Default for Selection {
    /// `*`: every controller not disabled by default.
    fn default() -> Self {
        Self {
            entries: vec!["*".to_owned()],
        }
    }
}

/// A selected controller that is not started because a feature gate it needs is off.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    /// The controller's name.
    pub name: &'static str,
    /// The gates it needs that are off.
    pub gates_off: Vec<&'static str>,
    /// Whether `--controllers` names it (rather than only `*`).
    pub named: bool,
}

impl std::fmt::Display for Skipped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "controller {} is not started: it needs the feature gate{} {}, which {} off",
            self.name,
            if self.gates_off.len() == 1 { "" } else { "s" },
            self.gates_off.join(", "),
            if self.gates_off.len() == 1 {
                "is"
            } else {
                "are"
            },
        )?;
        if self.named {
            write!(
                f,
                " (enable with --feature-gates={}=true)",
                self.gates_off.join("=true,")
            )?;
        }
        Ok(())
    }
}

/// What a selection resolves to with the feature gates in force.
#[derive(Debug)]
pub struct Resolved<'a> {
    /// The controllers to start, in table order.
    pub start: Vec<&'a ControllerDescriptor>,
    /// The selected controllers that are not started, with why.
    pub skipped: Vec<Skipped>,
}

impl Selection {
    /// Reads `--controllers` entries against `table`: every entry is `*`, a known name or
    /// alias, or one prefixed with `-`.
    pub fn parse<S: AsRef<str>>(
        entries: &[S],
        table: &[ControllerDescriptor],
    ) -> Result<Self, Error> {
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry.as_ref().trim();
            if entry == "*" {
                out.push(entry.to_owned());
                continue;
            }
            let (minus, name) = match entry.strip_prefix('-') {
                Some(name) => ("-", name),
                None => ("", entry),
            };
            let Some(controller) = table.iter().find(|c| c.is_named(name)) else {
                let mut known: Vec<&str> = table.iter().map(|c| c.name).collect();
                known.sort_unstable();
                return Err(Error::Unknown {
                    name: name.to_owned(),
                    known: known.join(", "),
                });
            };
            out.push(format!("{minus}{}", controller.name));
        }
        Ok(Self { entries: out })
    }

    /// Whether `controller` is selected, and whether an entry names it.
    fn decide(&self, controller: &ControllerDescriptor) -> (bool, bool) {
        let mut star = false;
        for entry in &self.entries {
            if entry == controller.name {
                return (true, true);
            }
            if entry.strip_prefix('-') == Some(controller.name) {
                return (false, true);
            }
            if entry == "*" {
                star = true;
            }
        }
        (star && !controller.disabled_by_default, false)
    }

    /// Whether `controller` is selected (feature gates aside).
    pub fn is_enabled(&self, controller: &ControllerDescriptor) -> bool {
        self.decide(controller).0
    }

    /// The controllers of `table` that are selected (feature gates aside), in table order.
    pub fn enabled<'a>(&self, table: &'a [ControllerDescriptor]) -> Vec<&'a ControllerDescriptor> {
        table.iter().filter(|c| self.is_enabled(c)).collect()
    }

    /// The controllers of `table` to start, given whether each feature gate is on
    /// (`gate_on`), and the selected ones that a gate keeps off.
    pub fn resolve<'a>(
        &self,
        table: &'a [ControllerDescriptor],
        gate_on: impl Fn(&str) -> bool,
    ) -> Resolved<'a> {
        let mut resolved = Resolved {
            start: Vec::new(),
            skipped: Vec::new(),
        };
        for controller in table {
            let (selected, named) = self.decide(controller);
            if !selected {
                continue;
            }
            let gates_off: Vec<&'static str> = controller
                .required_feature_gates
                .iter()
                .copied()
                .filter(|gate| !gate_on(gate))
                .collect();
            if gates_off.is_empty() {
                resolved.start.push(controller);
            } else {
                resolved.skipped.push(Skipped {
                    name: controller.name,
                    gates_off,
                    named,
                });
            }
        }
        resolved
    }
}

/// What a feature gate lets the controllers that need it do (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum GateState {
    /// The gate is off and nothing of the feature is left: the controllers do not run.
    Off,
    /// The gate is off here but the cluster may still hold the feature's objects: the
    /// controllers run only to remove them.
    Draining,
    /// The gate is on: the controllers run in full.
    On,
}

impl GateState {
    /// The state of a gate that is `enabled` (or not) in this role, when the feature's Feature
    /// object says `cluster_state` (`status.state`; `None` when unknown).
    pub fn of(enabled: bool, cluster_state: Option<&str>) -> Self {
        if enabled {
            GateState::On
        } else if genplane_api::featuregates::may_hold_objects(cluster_state) {
            GateState::Draining
        } else {
            GateState::Off
        }
    }
}

/// The state of every feature gate the controllers need, by name (a gate missing is
/// [`GateState::Off`]); `None` until the gates are known.
pub type GateStates = Option<std::collections::BTreeMap<&'static str, GateState>>;

/// The state `controller` runs in under `gates`: the lowest of its gates' (`On` with none).
fn state_of(
    controller: &ControllerDescriptor,
    gates: &std::collections::BTreeMap<&str, GateState>,
) -> GateState {
    controller
        .required_feature_gates
        .iter()
        .map(|gate| gates.get(gate).copied().unwrap_or(GateState::Off))
        .min()
        .unwrap_or(GateState::On)
}

/// A running controller's outcome: its name and result, or `Aborted` when it was stopped.
type Outcome = (
    &'static str,
    Result<Result<(), BoxError>, futures::future::Aborted>,
);

/// Runs the controllers of `table` that `selection` selects, side by side, until `stop`
/// completes (then `Ok`) or one of them stops on its own, which is an error: controllers run
/// until the process stops. Gated controllers start, stop and restart as `gates` changes (see
/// the module documentation). Dropping the returned future stops every controller at its next
/// await point.
pub async fn run_controllers(
    selection: &Selection,
    table: &'static [ControllerDescriptor],
    context: ControllerContext,
    mut gates: tokio::sync::watch::Receiver<GateStates>,
    stop: impl Future<Output = ()>,
) -> Result<(), Error> {
    let mut running: FuturesUnordered<BoxFuture<'static, Outcome>> = FuturesUnordered::new();
    let mut handles: std::collections::BTreeMap<&'static str, (GateState, AbortHandle)> =
        std::collections::BTreeMap::new();
    let mut told: std::collections::BTreeSet<&'static str> = std::collections::BTreeSet::new();
    if selection.enabled(table).is_empty() {
        tracing::warn!("no controllers are enabled");
    }
    let mut gates_open = true;
    tokio::pin!(stop);
    loop {
        let current = gates.borrow_and_update().clone();
        let known = current.clone().unwrap_or_default();
        let resolved = selection.resolve(table, |gate| {
            known
                .get(gate)
                .is_some_and(|state| *state != GateState::Off)
        });
        for controller in resolved.start {
            let state = state_of(controller, &known);
            match handles.get(controller.name) {
                Some((now, _)) if *now == state => continue,
                Some((now, handle)) => {
                    tracing::info!(
                        controller = controller.name,
                        from = ?now,
                        to = ?state,
                        "restarting controller: its feature gates changed"
                    );
                    handle.abort();
                }
                None => tracing::info!(
                    controller = controller.name,
                    removal_only = state == GateState::Draining,
                    "starting controller"
                ),
            }
            told.remove(controller.name);
            let mut context = context.clone();
            context.removal_only = state == GateState::Draining;
            let (handle, registration) = AbortHandle::new_pair();
            let future = Abortable::new((controller.constructor)(context), registration);
            let name = controller.name;
            running.push(Box::pin(async move { (name, future.await) }));
            handles.insert(name, (state, handle));
        }
        for skipped in resolved.skipped {
            if current.is_none() {
                // The gates are not known yet: decide once they are.
                continue;
            }
            if let Some((_, handle)) = handles.remove(skipped.name) {
                tracing::info!(
                    controller = skipped.name,
                    gates_off = skipped.gates_off.join(","),
                    "stopping controller: its feature gates are off"
                );
                handle.abort();
            } else if told.insert(skipped.name) {
                if skipped.named {
                    tracing::warn!("{skipped}");
                } else {
                    tracing::info!("{skipped}");
                }
            }
        }
        tokio::select! {
            () = &mut stop => return Ok(()),
            changed = gates.changed(), if gates_open => {
                // No more changes: the gates stay as they are.
                gates_open = changed.is_ok();
            }
            Some((name, result)) = running.next() => match result {
                // Stopped on purpose (its gates changed).
                Err(futures::future::Aborted) => {}
                Ok(Ok(())) => return Err(Error::Stopped(name)),
                Ok(Err(source)) => return Err(Error::Failed { name, source }),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn never(_: ControllerContext) -> BoxFuture<'static, Result<(), BoxError>> {
        Box::pin(futures::future::pending())
    }

    const TABLE: &[ControllerDescriptor] = &[
        ControllerDescriptor {
            name: "a",
            aliases: &["a-controller"],
            disabled_by_default: false,
            required_feature_gates: &[],
            constructor: never,
        },
        ControllerDescriptor {
            name: "b",
            aliases: &[],
            disabled_by_default: false,
            required_feature_gates: &[],
            constructor: never,
        },
        ControllerDescriptor {
            name: "off",
            aliases: &[],
            disabled_by_default: true,
            required_feature_gates: &[],
            constructor: never,
        },
        ControllerDescriptor {
            name: "gated",
            aliases: &[],
            disabled_by_default: false,
            required_feature_gates: &["Shiny", "Other"],
            constructor: never,
        },
    ];

    fn names(entries: &[&str]) -> Vec<&'static str> {
        Selection::parse(entries, TABLE)
            .unwrap()
            .enabled(TABLE)
            .iter()
            .map(|c| c.name)
            .collect()
    }

    #[test]
    fn star_enables_all_but_the_disabled_by_default() {
        assert_eq!(names(&["*"]), ["a", "b", "gated"]);
        assert_eq!(
            Selection::default()
                .enabled(TABLE)
                .iter()
                .map(|c| c.name)
                .collect::<Vec<_>>(),
            ["a", "b", "gated"]
        );
    }

    #[test]
    fn names_and_minus_names_decide_first() {
        assert_eq!(names(&["*", "-a", "-gated"]), ["b"]);
        assert_eq!(names(&["*", "off", "-gated"]), ["a", "b", "off"]);
        assert_eq!(names(&["a"]), ["a"]);
        assert_eq!(names(&["a", "-a"]), ["a"]);
        assert_eq!(names(&["-a", "a", "*"]), ["b", "gated"]);
        assert!(names(&[]).is_empty());
        assert!(names(&["-a"]).is_empty());
    }

    #[test]
    fn unknown_names_are_refused() {
        let error = Selection::parse(&["*", "-nope"], TABLE).unwrap_err();
        assert_eq!(
            error.to_string(),
            "\"nope\" is not in the list of known controllers: a, b, gated, off (upstream's names are accepted too)"
        );
    }

    #[test]
    fn aliases_name_the_same_controller() {
        assert_eq!(names(&["a-controller"]), ["a"]);
        assert_eq!(names(&["*", "-a-controller", "-gated"]), ["b"]);
        // The first entry decides, whichever name it uses.
        assert_eq!(names(&["a", "-a-controller"]), ["a"]);
        let selection = Selection::parse(&["-a-controller", "*"], TABLE).unwrap();
        assert_eq!(selection, Selection::parse(&["-a", "*"], TABLE).unwrap());
    }

    #[test]
    fn a_controller_whose_gate_is_off_is_not_started_and_says_why_when_named() {
        let starred = Selection::parse(&["*"], TABLE).unwrap();
        let resolved = starred.resolve(TABLE, |gate| gate == "Other");
        let started: Vec<_> = resolved.start.iter().map(|c| c.name).collect();
        assert_eq!(started, ["a", "b"]);
        assert_eq!(
            resolved.skipped,
            [Skipped {
                name: "gated",
                gates_off: vec!["Shiny"],
                named: false
            }]
        );
        let named = Selection::parse(&["gated"], TABLE).unwrap();
        let resolved = named.resolve(TABLE, |_| false);
        assert!(resolved.start.is_empty());
        assert_eq!(
            resolved.skipped[0].to_string(),
            "controller gated is not started: it needs the feature gates Shiny, Other, which are off (enable with --feature-gates=Shiny=true,Other=true)"
        );
        let resolved = named.resolve(TABLE, |_| true);
        assert_eq!(resolved.start.len(), 1);
        assert!(resolved.skipped.is_empty());
    }

    #[test]
    fn the_table_has_upstream_names_once_each() {
        let mut names: Vec<_> = CONTROLLERS
            .iter()
            .flat_map(|c| std::iter::once(c.name).chain(c.aliases.iter().copied()))
            .collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(names.len(), before);
        // Upstream's names (kube-controller-manager's names.go), current and older.
        for name in [
            "namespace-controller",
            "namespace",
            "garbage-collector-controller",
            "garbagecollector",
            "serviceaccount-controller",
            "serviceaccount",
            "root-ca-certificate-publisher-controller",
            "root-ca-cert-publisher",
            "clusterrole-aggregation-controller",
            "clusterrole-aggregation",
            "resourcequota-controller",
            "resourcequota",
        ] {
            assert!(names.contains(&name), "{name}");
        }
    }

    /// What the recorded controllers did, in order.
    static EVENTS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

    fn take() -> Vec<String> {
        std::mem::take(&mut *EVENTS.lock().unwrap())
    }

    /// Records its start (and whether it only removes) and, when dropped, its stop.
    struct Recorded(&'static str);

    impl Drop for Recorded {
        fn drop(&mut self) {
            EVENTS.lock().unwrap().push(format!("stop {}", self.0));
        }
    }

    fn recorded(
        name: &'static str,
        ctx: ControllerContext,
    ) -> BoxFuture<'static, Result<(), BoxError>> {
        Box::pin(async move {
            let removing = if ctx.removal_only { " removing" } else { "" };
            EVENTS
                .lock()
                .unwrap()
                .push(format!("start {name}{removing}"));
            let _running = Recorded(name);
            futures::future::pending::<()>().await;
            Ok(())
        })
    }

    const RUN_TABLE: &[ControllerDescriptor] = &[
        ControllerDescriptor {
            name: "plain",
            aliases: &[],
            disabled_by_default: false,
            required_feature_gates: &[],
            constructor: |ctx| recorded("plain", ctx),
        },
        ControllerDescriptor {
            name: "gated",
            aliases: &[],
            disabled_by_default: false,
            required_feature_gates: &["Shiny"],
            constructor: |ctx| recorded("gated", ctx),
        },
        ControllerDescriptor {
            name: "failing",
            aliases: &[],
            disabled_by_default: true,
            required_feature_gates: &[],
            constructor: |_| Box::pin(async { Err("broken".into()) }),
        },
    ];

    fn context() -> ControllerContext {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        ControllerContext::new(client, String::new(), Duration::from_secs(60))
    }

    /// Lets the spawned supervisor run until it waits again.
    async fn settle() {
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
    }

    #[test]
    fn a_gate_drains_while_the_cluster_may_hold_objects() {
        assert_eq!(GateState::of(true, None), GateState::On);
        assert_eq!(
            GateState::of(false, Some("TurningOff")),
            GateState::Draining
        );
        assert_eq!(GateState::of(false, Some("On")), GateState::Draining);
        assert_eq!(GateState::of(false, Some("Off")), GateState::Off);
        assert_eq!(GateState::of(false, None), GateState::Off);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn gated_controllers_start_drain_and_stop_as_their_gates_change() {
        let (gates, receiver) = tokio::sync::watch::channel(None);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let run = tokio::spawn(async move {
            let selection = Selection::default();
            run_controllers(&selection, RUN_TABLE, context(), receiver, async {
                let _ = stopped.await;
            })
            .await
        });
        settle().await;
        // Ungated controllers start at once; gated ones wait for the gates.
        assert_eq!(take(), ["start plain"]);
        let set = |state| {
            gates
                .send(Some(std::collections::BTreeMap::from([("Shiny", state)])))
                .unwrap();
        };
        set(GateState::On);
        settle().await;
        assert_eq!(take(), ["start gated"]);
        set(GateState::On);
        settle().await;
        assert!(take().is_empty());
        set(GateState::Draining);
        settle().await;
        assert_eq!(take(), ["stop gated", "start gated removing"]);
        set(GateState::Off);
        settle().await;
        assert_eq!(take(), ["stop gated"]);
        set(GateState::On);
        settle().await;
        assert_eq!(take(), ["start gated"]);
        stop.send(()).unwrap();
        run.await.unwrap().unwrap();
        let mut stopped = take();
        stopped.sort();
        assert_eq!(stopped, ["stop gated", "stop plain"]);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_controller_that_stops_on_its_own_is_an_error() {
        let (_gates, receiver) = tokio::sync::watch::channel(Some(Default::default()));
        let selection = Selection::parse(&["failing"], RUN_TABLE).unwrap();
        let result = run_controllers(
            &selection,
            RUN_TABLE,
            context(),
            receiver,
            std::future::pending(),
        )
        .await;
        assert!(
            matches!(
                result,
                Err(Error::Failed {
                    name: "failing",
                    ..
                })
            ),
            "{result:?}"
        );
    }
}
