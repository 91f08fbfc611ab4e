//! The table of controllers by name, the `--controllers` selection, and running the selected
//! controllers side by side.
//!
//! `--controllers` reads as upstream's kube-controller-manager reads it: a list of names, where
//! `foo` enables controller `foo`, `-foo` disables it, and `*` enables every controller that is
//! not disabled by default. The first entry that names a controller decides; a controller that
//! no entry names is enabled only if `*` is in the list and it is not disabled by default.

use std::future::Future;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt as _};

/// Any controller's error, as the table's start functions return it.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// How a controller of the table is started: given the shared context, a future that runs the
/// controller until it fails (controllers do not stop on their own).
pub type StartFn = fn(ControllerContext) -> BoxFuture<'static, Result<(), BoxError>>;

/// Errors of the registry.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `--controllers` names a controller that does not exist.
    #[error("{0:?} is not in the list of known controllers")]
    Unknown(String),
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
    /// The root CA bundle (PEM) published in every namespace as `kube-root-ca.crt`.
    pub root_ca: String,
    /// How often the resource-quota controller recalculates every quota in full
    /// (`--resource-quota-sync-period`, 5 minutes upstream).
    pub resource_quota_sync_period: Duration,
}

impl std::fmt::Debug for ControllerContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerContext")
            .field("root_ca_bytes", &self.root_ca.len())
            .field(
                "resource_quota_sync_period",
                &self.resource_quota_sync_period,
            )
            .finish_non_exhaustive()
    }
}

/// One controller of the table.
#[derive(Clone, Copy, Debug)]
pub struct ControllerDescriptor {
    /// The name `--controllers` knows it by (upstream's name).
    pub name: &'static str,
    /// Whether `*` leaves it out (it must then be named to run).
    pub disabled_by_default: bool,
    /// How it is started.
    pub start: StartFn,
}

/// Every controller genplane's controller-manager can run, by upstream name.
pub static CONTROLLERS: &[ControllerDescriptor] = &[
    ControllerDescriptor {
        name: "namespace",
        disabled_by_default: false,
        start: |ctx| Box::pin(async move { Ok(crate::namespace::run(ctx.client).await?) }),
    },
    ControllerDescriptor {
        name: "garbage-collector",
        disabled_by_default: false,
        start: |ctx| Box::pin(async move { Ok(crate::garbagecollector::run(ctx.client).await?) }),
    },
    ControllerDescriptor {
        name: "serviceaccount",
        disabled_by_default: false,
        start: |ctx| Box::pin(async move { Ok(crate::serviceaccount::run(ctx.client).await?) }),
    },
    ControllerDescriptor {
        name: "root-ca-cert-publisher",
        disabled_by_default: false,
        start: |ctx| {
            Box::pin(
                async move { Ok(crate::rootcacertpublisher::run(ctx.client, ctx.root_ca).await?) },
            )
        },
    },
    ControllerDescriptor {
        name: "clusterrole-aggregation",
        disabled_by_default: false,
        start: |ctx| {
            Box::pin(async move { Ok(crate::clusterroleaggregation::run(ctx.client).await?) })
        },
    },
    ControllerDescriptor {
        name: "resourcequota",
        disabled_by_default: false,
        start: |ctx| {
            Box::pin(async move {
                Ok(crate::resourcequota::run(ctx.client, ctx.resource_quota_sync_period).await?)
            })
        },
    },
];

/// The parsed `--controllers` list.
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

impl Selection {
    /// Reads `--controllers` entries against `table`: every entry is `*`, a known name or a
    /// known name prefixed with `-`.
    pub fn parse<S: AsRef<str>>(
        entries: &[S],
        table: &[ControllerDescriptor],
    ) -> Result<Self, Error> {
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry.as_ref().trim();
            let name = entry.strip_prefix('-').unwrap_or(entry);
            if entry != "*" && !table.iter().any(|c| c.name == name) {
                return Err(Error::Unknown(name.to_owned()));
            }
            out.push(entry.to_owned());
        }
        Ok(Self { entries: out })
    }

    /// Whether `controller` runs.
    pub fn is_enabled(&self, controller: &ControllerDescriptor) -> bool {
        let mut star = false;
        for entry in &self.entries {
            if entry == controller.name {
                return true;
            }
            if entry.strip_prefix('-') == Some(controller.name) {
                return false;
            }
            if entry == "*" {
                star = true;
            }
        }
        star && !controller.disabled_by_default
    }

    /// The controllers of `table` that run, in table order.
    pub fn enabled<'a>(&self, table: &'a [ControllerDescriptor]) -> Vec<&'a ControllerDescriptor> {
        table.iter().filter(|c| self.is_enabled(c)).collect()
    }
}

/// Runs `controllers` side by side until `stop` completes (then `Ok`) or one of them stops,
/// which is an error: controllers run until the process stops. Dropping the returned future
/// stops every controller at its next await point.
pub async fn run_controllers(
    controllers: &[&ControllerDescriptor],
    context: ControllerContext,
    stop: impl Future<Output = ()>,
) -> Result<(), Error> {
    let mut running: FuturesUnordered<_> = controllers
        .iter()
        .map(|c| {
            let name = c.name;
            tracing::info!(controller = name, "starting controller");
            let future = (c.start)(context.clone());
            async move { (name, future.await) }
        })
        .collect();
    if running.is_empty() {
        tracing::warn!("no controllers are enabled");
    }
    tokio::pin!(stop);
    tokio::select! {
        () = &mut stop => Ok(()),
        Some((name, result)) = running.next() => match result {
            Ok(()) => Err(Error::Stopped(name)),
            Err(source) => Err(Error::Failed { name, source }),
        },
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
            disabled_by_default: false,
            start: never,
        },
        ControllerDescriptor {
            name: "b",
            disabled_by_default: false,
            start: never,
        },
        ControllerDescriptor {
            name: "off",
            disabled_by_default: true,
            start: never,
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
        assert_eq!(names(&["*"]), ["a", "b"]);
        assert_eq!(
            Selection::default()
                .enabled(TABLE)
                .iter()
                .map(|c| c.name)
                .collect::<Vec<_>>(),
            ["a", "b"]
        );
    }

    #[test]
    fn names_and_minus_names_decide_first() {
        assert_eq!(names(&["*", "-a"]), ["b"]);
        assert_eq!(names(&["*", "off"]), ["a", "b", "off"]);
        assert_eq!(names(&["a"]), ["a"]);
        assert_eq!(names(&["a", "-a"]), ["a"]);
        assert_eq!(names(&["-a", "a", "*"]), ["b"]);
        assert!(names(&[]).is_empty());
        assert!(names(&["-a"]).is_empty());
    }

    #[test]
    fn unknown_names_are_refused() {
        let error = Selection::parse(&["*", "-nope"], TABLE).unwrap_err();
        assert_eq!(
            error.to_string(),
            "\"nope\" is not in the list of known controllers"
        );
    }

    #[test]
    fn the_table_has_upstream_names_once_each() {
        let mut names: Vec<_> = CONTROLLERS.iter().map(|c| c.name).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(names.len(), before);
        for name in [
            "serviceaccount",
            "root-ca-cert-publisher",
            "clusterrole-aggregation",
            "resourcequota",
        ] {
            assert!(names.contains(&name), "{name}");
        }
    }
}
