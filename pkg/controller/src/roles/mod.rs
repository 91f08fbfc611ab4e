//! genplane's controller roles assembled, as the `genplane` binary runs them and all-in-one runs
//! them beside its API server: each an options struct (flags, config file keys, `GENPLANE_*`
//! variables), its validated config, and a `serve` that runs until shutdown. They install no
//! signal handler or log subscriber, so several can share a process.
//!
//! - [`controller_manager`]: the generic controllers, with leader election.
//! - [`feature_controller`]: KEP-3920's server flow (announcing features and turning them on
//!   and off).

pub mod controller_manager;
pub mod feature_controller;

/// How long open requests to a role's ops endpoints may finish after shutdown began.
const OPS_DRAIN: std::time::Duration = std::time::Duration::from_secs(5);
