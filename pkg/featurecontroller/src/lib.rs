//! KEP-3920 ("finish feature flags") for genplane, stages 1 and 3: every role reports the feature-gate
//! values it saw, and `genplane feature-controller` announces the features the binary knows
//! and turns them on and off safely, all through the `featuregates.genplane.io/v1alpha1`
//! Feature API ([`genplane_api::featuregates`]).
//!
//! # The client flow ([`uses`])
//!
//! Each role's [`genplane_component_base::featuregate::FeatureGate`] records every check. Once
//! the role has an API client it starts a [`uses::Reporter`]: at start and every
//! `--feature-use-report-period` (default 30 s) it applies, by server-side apply on
//! `features/status` with a field manager of its own (`<component>/<instance>`), its entry of
//! each checked Feature's `status.uses` (a list map keyed by component and instance): the value
//! seen, the emulated version, the first and the last report. The instance is the name of its
//! identity Lease ([`identity`]), renewed at each report and valid for three periods. Reports
//! never block the role; failures are retried at the next period.
//!
//! # Dynamic features ([`follow`])
//!
//! A feature its binary consults at every use can be made dynamic with the API servers'
//! `--dynamic-features` (every live one must name it; the feature-controller's own flag is
//! deprecated); clients then set its `spec.desired`. Every role runs a
//! [`follow::Follower`] beside its reporter: it watches the Features and sets the gate to the
//! value the Feature's state stands for, so a transition completes without restarting anyone.
//!
//! # Central features ([`follow`])
//!
//! A central feature's desired value comes from the API servers' `--feature-gates` (on only
//! while every live API server reports it on). Roles other than the API servers follow the
//! Feature's state instead of their own flag ([`follow::Follower::adopting_central`]), logging
//! one warning where the flag disagrees, so their reports follow the cluster and a transition's
//! `WaitForUses` completes whichever way the API servers move. The follower also publishes
//! every Feature's state ([`follow::Follower::states`]); the controller-manager starts, drains
//! and stops its gated controllers from it while it runs.
//!
//! # The server flow ([`controller`])
//!
//! Every feature-controller instance keeps an identity Lease (`--identity-lease-duration`,
//! default 15 s, renewed every third of it). The instance that acts is chosen by rendezvous
//! hashing over the live feature-controller Leases ([`leader`]): no election traffic, the
//! same answer everywhere, and a new leader within one lease duration of the leader's death.
//! `feature_controller_leader` is 1 on the acting instance. A feature-controller Lease counts
//! for at most [`genplane_api::featuregates::MAX_CONTROLLER_LEASE_SECONDS`] after its renewal,
//! and the instances standing by pass over an acting one that leaves a Feature owing it a
//! write for too long ([`reconcile::owed`]): a live Lease whose holder does not act cannot
//! silence the others. The leader, every
//! `--sync-period` (default 5 s):
//!
//! 1. deletes identity Leases expired for a whole lease duration;
//! 2. announces every feature the binary knows at its emulated version: creates its Feature
//!    in `kube-system` (`spec.featureName`) and keeps `status.stage`, `default`,
//!    `lockedToDefault`, `versions` and `dynamic` current;
//! 3. removes the `uses` of instances whose identity Lease is no longer live;
//! 4. compares the desired value (`spec.desired` of a dynamic feature, else the
//!    feature-controller's own `--feature-gates`) with `status.state` and starts a transition:
//!    `TurningOn` or `TurningOff` with a task list in `status.tasks`;
//! 5. runs the first task, removes it when it succeeds, and sets `On` or `Off` when none is
//!    left (`feature_transitions_total{feature,to}` counts each state entered);
//! 6. sets the `Agreed` condition: whether every live instance reports the value of the state,
//!    naming those that do not.
//!
//! Tasks ([`reconcile`]): `WaitForUses` starts every transition: it clears the uses, waits
//! twice the report period (every live instance reports within it), and completes when no
//! live instance reports the old value; until then its message names the instances that do (a
//! misconfigured server keeps the feature in transition, visibly). Tasks declared with a
//! feature's registration follow when turning it off
//! ([`genplane_component_base::featuregate::Task`]): `ClearField` removes fields from every
//! stored object of a resource with a JSON merge patch carrying the object's resourceVersion.
//!
//! # Moving the cluster's version
//!
//! The Feature records the announcing binary's version and emulated version. A
//! feature-controller whose emulated version lacks a feature (a downgrade below the feature's
//! first version) does not announce it, but turns an existing Feature of it off like a feature
//! configured off: its turn-off tasks remove what it stored, since the older version cannot
//! read or clean it. The [`reconcile::UPGRADE_SAFE`] condition of that Feature is `False`
//! until then and `True` once the feature is `Off`. A default that flips at the new version
//! changes the desired value, and the usual transition (with its tasks) follows; nothing else is
//! needed. Before moving, `genplane feature-controller check --to-version` ([`check`]) says
//! whether it is safe.
//!
//! Every status write carries the resourceVersion it was computed from, and every task is
//! idempotent: two instances that both believe they lead (while their views of the Leases
//! differ) cannot both write, and a task repeated after a leader died changes nothing more.

#![warn(missing_docs)]

pub mod check;
pub mod controller;
pub mod follow;
pub mod identity;
pub mod leader;
pub mod reconcile;
pub mod uses;

pub use controller::{Config, FeatureController, known_features};
pub use follow::Follower;
pub use uses::Reporter;
