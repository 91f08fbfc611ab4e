//! Kinds whose creates are answered, never stored (upstream's storages that are only a
//! `rest.Creater`): the review APIs and TokenRequest (`serviceaccounts/<name>/token`).
//!
//! Such a kind is a catalog entry like any other (an empty `storage_prefix`, verbs
//! `["create"]`), served through the same filters, router and create handler: the body is
//! decoded and negotiated as every body is, and the registry's
//! [`genplane_registry::Computed`] defaults, admits and validates it as the generic store
//! would. Only the last step is the kind's own: an [`Answer`] computes what the create answers
//! from the admitted object and what the server knows ([`Creating`]). A program adds a kind of
//! its own this way with [`crate::Resource::computed`].

use genplane_admission::BoxFuture;
use genplane_apimachinery::errors::{ApiError, Status};
use genplane_authentication::UserInfo;
use genplane_registry::Written;
use serde_json::Value;

use crate::security::Security;

/// Reads the server's stored objects, for answers that depend on them (a TokenRequest reads
/// its ServiceAccount).
pub trait StoredObjects: Send + Sync {
    /// The object `name` in `namespace` of the built-in `group`/`resource`, read from the store
    /// (not a cache: an object created just before is found); `None` when that resource is not
    /// served, a 404 when the object does not exist.
    fn get<'a>(
        &'a self,
        group: &'a str,
        resource: &'a str,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Option<Result<Value, ApiError>>>;
}

/// What an answer is told about the create it answers.
pub struct Creating<'a> {
    /// Who asks.
    pub user: &'a UserInfo,
    /// The request's namespace (empty for a cluster-scoped kind).
    pub namespace: &'a str,
    /// The name in the URL: the object a subresource belongs to (the ServiceAccount of a
    /// TokenRequest); empty for a create of a collection.
    pub name: &'a str,
    /// `dryRun=All`.
    pub dry_run: bool,
    /// The time of the request (Unix seconds).
    pub now: i64,
    /// The server's authentication and authorization, when it has them.
    pub security: Option<&'a Security>,
    /// The server's stored objects.
    pub objects: &'a dyn StoredObjects,
}

impl std::fmt::Debug for Creating<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Creating")
            .field("user", &self.user.username)
            .field("namespace", &self.namespace)
            .field("name", &self.name)
            .field("dry_run", &self.dry_run)
            .finish_non_exhaustive()
    }
}

/// What answers the creates of a kind that is never stored.
pub trait Answer: Send + Sync + std::fmt::Debug {
    /// The answer to the create of `object` (decoded, defaulted, admitted and validated),
    /// with its warnings; answered with 201 Created in the negotiated form.
    fn answer<'a>(
        &'a self,
        creating: &'a Creating<'a>,
        object: Value,
    ) -> BoxFuture<'a, Result<Written, ApiError>>;
}

/// The answer of a kind the server has none for: every create is refused (405).
#[derive(Debug)]
pub(crate) struct Unanswered {
    pub(crate) resource: genplane_apimachinery::schema::GroupResource,
}

impl Answer for Unanswered {
    fn answer<'a>(
        &'a self,
        _: &'a Creating<'a>,
        _: Value,
    ) -> BoxFuture<'a, Result<Written, ApiError>> {
        Box::pin(async move { Err(Status::method_not_supported(&self.resource, "create").into()) })
    }
}
