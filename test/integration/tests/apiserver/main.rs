//! The API server over real HTTPS on loopback, one test binary with a module per area (one
//! compile of `support`, one link): each test starts a server in-process, assembled by the code
//! that assembles `genplane apiserver` (TLS, client-certificate authentication, RBAC, admission,
//! an audit log: see [`support`]), and talks to it as kubectl, kube-rs and the Python client do.

#![allow(clippy::unwrap_used)]

#[macro_use]
mod support;

mod api;
mod certificates;
mod field_order;
mod filters;
mod flowcontrol;
mod hardening;
mod kube_rs;
mod limits;
mod managed_fields;
mod normalization;
mod openapi;
mod rbac_api;
mod slow_watchers;
mod storage_failures;
mod strategic_patch;
