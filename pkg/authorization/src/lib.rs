//! Authorization: may this user do this? (The interface; RBAC follows.)

#![warn(missing_docs)]

use genplane_authentication::UserInfo;

/// What a request asks to do, as upstream's `authorizer.Attributes`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attributes {
    /// Who asks.
    pub user: UserInfo,
    /// The verb (`get`, `list`, `create`, ...; for non-resource requests the lower-cased method).
    pub verb: String,
    /// The namespace ("" for cluster-scoped requests).
    pub namespace: String,
    /// The API group.
    pub api_group: String,
    /// The API version.
    pub api_version: String,
    /// The resource.
    pub resource: String,
    /// The subresource.
    pub subresource: String,
    /// The object's name.
    pub name: String,
    /// The request path.
    pub path: String,
    /// Whether this is a resource request (else a non-resource path).
    pub resource_request: bool,
}

/// An authorizer's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Allowed.
    Allow,
    /// Explicitly denied.
    Deny,
    /// Neither: the next authorizer decides, and the request is denied when none allows it.
    NoOpinion,
}

/// Decides requests.
pub trait Authorizer: Send + Sync + std::fmt::Debug {
    /// The decision on `attributes`, with a reason.
    fn authorize(&self, attributes: &Attributes) -> (Decision, String);
}

/// Allows everything (`--authorization-mode=AlwaysAllow`).
#[derive(Clone, Copy, Debug, Default)]
pub struct AlwaysAllow;

impl Authorizer for AlwaysAllow {
    fn authorize(&self, _: &Attributes) -> (Decision, String) {
        (Decision::Allow, String::new())
    }
}
