//! HTTP serving of the Kubernetes API.
//!
//! - [`discovery`]: the legacy and aggregated discovery documents.
//! - [`aggregation`]: the aggregator's proxy to extension API servers, for the group-versions
//!   APIServices hand to them.
//! - [`openapi`]: the OpenAPI v3 documents below `/openapi/v3` and the v2 document at
//!   `/openapi/v2` (JSON or protobuf), hashed once; [`openapi::builder`] builds them from the
//!   served catalog entries (their schemas and extension tables are genplane-api's).
//! - [`negotiation`]: which form a response takes, how a body is read.
//! - [`admission`]: what the admission plugins read of the server's storage (namespaces,
//!   policies, quotas, webhook configurations), kept in memory by watches.
//! - [`security`]: what the server is given to decide who makes a request (the request
//!   authenticator of `genplane-authentication`) and what they may do (the authorizer), and
//!   the issuers behind the authentication APIs; the filters that use it are
//!   [`filters`]' authentication, impersonation and authorization.
//! - [`metrics`]: the API server's metrics, and the per-request observation the chain makes.
//! - [`server`]: [`ApiServer`], what it serves (a snapshot replaced when custom resources come
//!   and go); [`filters`]: the chain every request goes through, in one function; the router
//!   then answers: the ops endpoints, `/version`, discovery, OpenAPI and every verb on every
//!   served resource (handlers, one file per verb).
//! - [`answer`]: kinds that are created, never stored (the review APIs, TokenRequest): served
//!   by the same path, their creates answered by an [`answer::Answer`].
//! - [`enablement`]: which built-in APIs are served (`--runtime-config`).
//! - [`encode`]: the shapes of answers (lists, Tables, metadata-only objects, watch events).
//! - [`body`]: whole and streamed response bodies.
//! - [`request_info`]: what a request asks for (verb, group, version, namespace, resource,
//!   subresource, name), parsed from its method, path and query as kube-apiserver parses them.

#![warn(missing_docs)]

pub mod admission;
pub mod aggregation;
pub mod answer;
pub mod backing;
pub mod body;
pub mod discovery;
pub mod enablement;
pub mod encode;
mod fieldmanager;
pub mod filters;
pub mod flowcontrol;
mod handlers;
pub mod kind;
pub mod metrics;
pub mod negotiation;
pub mod openapi;
pub mod request_body;
pub mod request_info;
mod reviews;
mod router;
pub mod security;
pub mod server;

pub use enablement::ApiEnablement;
pub use metrics::ApiMetrics;
pub use security::Security;

/// The stack each thread that answers requests should have. Request handling recurses over
/// bodies and objects (decoders, schemas, patches, field sets) as deep as the decoders allow
/// (128 levels of JSON); 2 MiB (tokio's default) leaves little margin in a debug build, so the
/// roles' runtimes give their threads this much (address space: pages are used only as touched).
pub const THREAD_STACK_BYTES: usize = 8 * 1024 * 1024;
pub use backing::Backing;
pub use filters::max_in_flight::Limits;
pub use handlers::{MAX_BODY_BYTES, WATCH_BUFFER_BYTES, error_response};
pub use server::{ApiServer, Resource};
