//! The generic controllers of `genplane controller-manager`, built on kube-runtime against the
//! API server over HTTPS, as any third-party controller would be.
//!
//! - [`descriptors`]: the table of controllers by name ([`descriptors::CONTROLLERS`]), the
//!   `--controllers` selection ([`descriptors::Selection`]) and [`descriptors::run_controllers`], which
//!   runs the selected ones side by side;
//! - [`leaderelection`]: leader election on a `coordination.k8s.io/v1` Lease, with client-go's
//!   semantics, so that only one controller-manager runs the controllers at a time;
//! - what controllers share: [`informers`] (one watch per resource for every controller that
//!   follows it), [`workqueue`] (client-go's rate-limited, deduplicating queue) and
//!   [`discovery`] (every served resource, custom resources included);
//! - the controllers: [`serviceaccount`], [`rootcacertpublisher`], [`clusterroleaggregation`],
//!   [`resourcequota`], [`namespace`], [`garbagecollector`] and [`networkclaim`] (the network
//!   registry, while the `NetworkRegistry` feature gate is on);
//! - [`roles`]: the controller-manager and the feature-controller assembled (options, ops
//!   endpoints, leader election, `serve`), as the `genplane` binary and all-in-one run them.
//!
//! The feature gates the controllers consult (`OrderedNamespaceDeletion`) are declared with
//! every other in `genplane_features`.

#![warn(missing_docs)]

pub mod certificates;
pub mod client;
pub mod clusterroleaggregation;
pub mod descriptors;
pub mod discovery;
pub mod garbagecollector;
pub mod informers;
pub mod leaderelection;
pub mod namespace;
pub mod networkclaim;
pub mod resourcequota;
pub mod roles;
pub mod rootcacertpublisher;
pub mod serviceaccount;
mod spare;
pub mod workqueue;
