//! HTTP serving of the Kubernetes API.
//!
//! - [`discovery`]: the legacy and aggregated discovery documents.
//! - [`negotiation`]: which form a response takes, how a body is read.
//! - [`request_info`]: what a request asks for (verb, group, version, namespace, resource,
//!   subresource, name), parsed from its method, path and query as kube-apiserver parses them.

#![warn(missing_docs)]

pub mod discovery;
pub mod negotiation;
pub mod request_info;
