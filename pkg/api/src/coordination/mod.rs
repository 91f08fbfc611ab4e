//! coordination.k8s.io/v1 resources.

pub mod lease;
