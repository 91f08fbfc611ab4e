//! The aggregator's controllers inside the API server (upstream's kube-aggregator and the
//! registration controllers kube-apiserver runs beside it).
//!
//! - [`autoregister`]: a Local APIService for every group-version this server serves, built-in
//!   and custom, kept as what is served changes, and the `Available` condition of every Local
//!   APIService.
//! - [`remote`]: the APIServices served by other servers: resolved, probed, their
//!   `Available` condition written, and handed to the API server's proxy with the resources
//!   they serve.
//! - [`metrics`]: `aggregator_unavailable_apiservice` and its `_total` counter, kept by the
//!   remote controller's passes.

pub mod autoregister;
pub mod metrics;
pub mod remote;
