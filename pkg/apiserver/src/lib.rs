//! HTTP serving of the Kubernetes API.
//!
//! - [`request_info`]: what a request asks for (verb, group, version, namespace, resource,
//!   subresource, name), parsed from its method, path and query as kube-apiserver parses them.

#![warn(missing_docs)]

pub mod request_info;
