//! The generic controllers of `genplane controller-manager`, built on kube-runtime against the
//! API server over HTTPS, as any third-party controller would be.

#![warn(missing_docs)]

pub mod garbagecollector;
pub mod namespace;
