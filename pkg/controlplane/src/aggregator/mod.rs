//! The aggregator's controllers inside the API server (upstream's kube-aggregator and the
//! registration controllers kube-apiserver runs beside it).
//!
//! - [`autoregister`]: a Local APIService for every group-version this server serves, built-in
//!   and custom, kept as what is served changes, and the `Available` condition of every Local
//!   APIService.

pub mod autoregister;
