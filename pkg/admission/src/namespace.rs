//! The namespace plugins, as upstream's: NamespaceLifecycle (no new content in a namespace
//! that does not exist or is being deleted; the namespaces every cluster depends on cannot be
//! deleted), NamespaceExists (no new content in a namespace that does not exist) and
//! NamespaceAutoProvision (a create in a namespace that does not exist creates it first).
//!
//! NamespaceLifecycle reads the namespace from the watch cache, as upstream's reads its
//! informer, and reads it consistently from storage only when the cache does not have it (it
//! may have been created a moment ago) or when this server let a deletion of it through in the
//! last [`FORCE_LIVE_LOOKUP_TTL`] while the cache still shows it active.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use genplane_apimachinery::errors::{ApiError, Status, StatusCause, StatusDetails, StatusReason};
use genplane_apimachinery::schema::GroupResource;
use serde_json::Value;

use crate::{Attributes, BoxFuture, MutatingPlugin, Operation};

/// How long after letting a namespace's deletion through NamespaceLifecycle reads that
/// namespace consistently rather than from the cache (upstream's 30 seconds).
pub const FORCE_LIVE_LOOKUP_TTL: Duration = Duration::from_secs(30);

/// Namespaces every cluster depends on, which may not be deleted.
pub const IMMORTAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public"];

/// The stored namespaces, as the namespace plugins read (and auto-provisioning writes) them.
pub trait Namespaces: Send + Sync + std::fmt::Debug {
    /// The namespace `name`, read consistently (a namespace created just before is found), or
    /// `None`.
    fn get<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Value>, ApiError>>;
    /// The namespace `name` as the watch cache has it (maybe a moment old: for plugins that,
    /// as upstream's, read namespaces from an informer), or `None`. Reads consistently unless
    /// the implementation has a cache.
    fn get_cached<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Arc<Value>>, ApiError>> {
        Box::pin(async move { Ok(self.get(name).await?.map(Arc::new)) })
    }
    /// Creates the namespace `name` (succeeds if it exists already).
    fn create<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), ApiError>>;
}

/// The namespace `name` from the cache, or read consistently when the cache does not have it
/// (it may have been created a moment ago), as upstream's namespace matcher reads it.
pub async fn cached_or_stored(
    namespaces: &dyn Namespaces,
    name: &str,
) -> Result<Option<Arc<Value>>, ApiError> {
    match namespaces.get_cached(name).await? {
        Some(found) => Ok(Some(found)),
        None => Ok(namespaces.get(name).await?.map(Arc::new)),
    }
}

fn namespaces() -> GroupResource {
    GroupResource::new("", "namespaces")
}

fn missing(namespace: &str) -> ApiError {
    Status::not_found(&namespaces(), namespace).into()
}

fn is_terminating(namespace: &Value) -> bool {
    use genplane_api::util::str_at;
    !str_at(namespace, &["metadata", "deletionTimestamp"]).is_empty()
        || str_at(namespace, &["status", "phase"]) == "Terminating"
}

/// The namespace of a write, looked up for it. The lookup is part of the write: when the
/// storage does not answer in time, the answer names the write's resource and operation
/// ("The create operation against configmaps ..."), not the namespace lookup.
async fn lookup(
    namespaces: &dyn Namespaces,
    attributes: &Attributes<'_>,
) -> Result<Option<Value>, ApiError> {
    match namespaces.get(attributes.namespace).await {
        Err(e) if e.is(StatusReason::ServerTimeout) => {
            let retry = e
                .details
                .as_ref()
                .and_then(|d| d.retry_after_seconds)
                .unwrap_or(2);
            let resource = GroupResource::new(
                &attributes.request.resource.group,
                &attributes.request.resource.resource,
            );
            let operation = attributes.operation.as_str().to_ascii_lowercase();
            Err(Status::server_timeout(&resource, &operation, retry).into())
        }
        other => other,
    }
}

/// Whether a write makes new content in a namespace: a create of a namespaced object.
fn creates_content(attributes: &Attributes<'_>) -> bool {
    attributes.operation == Operation::Create && !attributes.namespace.is_empty()
}

/// Whether a write is an access review of a namespace, which NamespaceLifecycle always lets
/// through (upstream's `accessReviewResources`): refusing one would tell whoever asks whether
/// the namespace exists or is being deleted.
fn is_access_review(attributes: &Attributes<'_>) -> bool {
    let resource = &attributes.request.resource;
    resource.group == "authorization.k8s.io" && resource.resource == "localsubjectaccessreviews"
}

/// NamespaceLifecycle.
#[derive(Debug, Clone)]
pub struct NamespaceLifecycle {
    namespaces: Arc<dyn Namespaces>,
    /// The namespaces whose deletion this plugin let through, and when.
    deleted: Arc<Mutex<HashMap<String, Instant>>>,
}

impl NamespaceLifecycle {
    /// The plugin over `namespaces`.
    pub fn new(namespaces: Arc<dyn Namespaces>) -> Self {
        Self {
            namespaces,
            deleted: Arc::default(),
        }
    }

    /// Whether `namespace`'s deletion was let through less than [`FORCE_LIVE_LOOKUP_TTL`] ago.
    fn deleted_lately(&self, namespace: &str) -> bool {
        let deleted = self.deleted.lock().unwrap_or_else(PoisonError::into_inner);
        deleted
            .get(namespace)
            .is_some_and(|at| at.elapsed() < FORCE_LIVE_LOOKUP_TTL)
    }

    /// Notes that `namespace`'s deletion was let through (forgetting the expired notes).
    fn note_deletion(&self, namespace: &str) {
        let mut deleted = self.deleted.lock().unwrap_or_else(PoisonError::into_inner);
        deleted.retain(|_, at| at.elapsed() < FORCE_LIVE_LOOKUP_TTL);
        deleted.insert(namespace.to_owned(), Instant::now());
    }
}

impl MutatingPlugin for NamespaceLifecycle {
    fn name(&self) -> &'static str {
        "NamespaceLifecycle"
    }

    fn admit<'a>(
        &'a self,
        attributes: Attributes<'a>,
        _object: &'a mut Value,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            if !creates_content(&attributes) || is_access_review(&attributes) {
                return Ok(());
            }
            let namespace = attributes.namespace;
            let cached = self.namespaces.get_cached(namespace).await?;
            let found = match cached {
                Some(found) if is_terminating(&found) || !self.deleted_lately(namespace) => found,
                // not cached yet, or perhaps deleted since the cache saw it
                _ => match lookup(&*self.namespaces, &attributes).await? {
                    Some(found) => Arc::new(found),
                    None => return Err(missing(namespace)),
                },
            };
            if !is_terminating(&found) {
                return Ok(());
            }
            let resource = GroupResource::new(
                &attributes.request.resource.group,
                &attributes.request.resource.resource,
            );
            let message = format!(
                "unable to create new content in namespace {namespace} because it is being terminated"
            );
            let mut status = Status::forbidden(&resource, attributes.name, &message);
            status.details = Some(StatusDetails {
                causes: vec![StatusCause {
                    reason: "NamespaceTerminating".into(),
                    message: format!("namespace {namespace} is being terminated"),
                    field: "metadata.namespace".into(),
                }],
                ..status.details.unwrap_or_default()
            });
            Err(status.into())
        })
    }

    fn admit_delete<'a>(
        &'a self,
        attributes: Attributes<'a>,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            let resource = &attributes.request.resource;
            if resource.group.is_empty()
                && resource.resource == "namespaces"
                && attributes.request.subresource.is_empty()
            {
                if IMMORTAL_NAMESPACES.contains(&attributes.name) {
                    return Err(Status::forbidden(
                        &namespaces(),
                        attributes.name,
                        "this namespace may not be deleted",
                    )
                    .into());
                }
                self.note_deletion(attributes.name);
            }
            Ok(())
        })
    }
}

/// NamespaceExists.
#[derive(Debug, Clone)]
pub struct NamespaceExists {
    namespaces: Arc<dyn Namespaces>,
}

impl NamespaceExists {
    /// The plugin over `namespaces`.
    pub fn new(namespaces: Arc<dyn Namespaces>) -> Self {
        Self { namespaces }
    }
}

impl MutatingPlugin for NamespaceExists {
    fn name(&self) -> &'static str {
        "NamespaceExists"
    }

    fn admit<'a>(
        &'a self,
        attributes: Attributes<'a>,
        _object: &'a mut Value,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            if creates_content(&attributes)
                && lookup(&*self.namespaces, &attributes).await?.is_none()
            {
                return Err(missing(attributes.namespace));
            }
            Ok(())
        })
    }
}

/// NamespaceAutoProvision.
#[derive(Debug, Clone)]
pub struct NamespaceAutoProvision {
    namespaces: Arc<dyn Namespaces>,
}

impl NamespaceAutoProvision {
    /// The plugin over `namespaces`.
    pub fn new(namespaces: Arc<dyn Namespaces>) -> Self {
        Self { namespaces }
    }
}

impl MutatingPlugin for NamespaceAutoProvision {
    fn name(&self) -> &'static str {
        "NamespaceAutoProvision"
    }

    fn admit<'a>(
        &'a self,
        attributes: Attributes<'a>,
        _object: &'a mut Value,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            if !creates_content(&attributes) || attributes.request.dry_run {
                return Ok(());
            }
            if lookup(&*self.namespaces, &attributes).await?.is_none() {
                self.namespaces.create(attributes.namespace).await?;
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use genplane_apimachinery::schema::GroupVersionResource;
    use serde_json::json;

    use super::*;

    /// No namespace exists: every lookup is a miss.
    #[derive(Debug)]
    struct NoNamespaces;

    impl Namespaces for NoNamespaces {
        fn get<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<Option<Value>, ApiError>> {
            Box::pin(async { Ok(None) })
        }

        fn create<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<(), ApiError>> {
            Box::pin(async { Ok(()) })
        }
    }

    fn create_of(group: &str, resource: &str) -> crate::Request {
        crate::Request {
            resource: GroupVersionResource::new(group, "v1", resource),
            ..crate::Request::default()
        }
    }

    #[tokio::test]
    async fn access_reviews_are_answered_in_any_namespace() {
        let plugin = NamespaceLifecycle::new(Arc::new(NoNamespaces));
        for (group, resource, want) in [
            ("authorization.k8s.io", "localsubjectaccessreviews", Ok(())),
            ("", "configmaps", Err(404)),
        ] {
            let request = create_of(group, resource);
            let attributes = Attributes {
                request: &request,
                operation: Operation::Create,
                namespace: "gone",
                name: "",
                old_object: None,
            };
            let got = plugin.admit(attributes, &mut Value::Null).await;
            assert_eq!(got.map_err(|e| e.code), want, "{resource}");
        }
    }

    /// A cache and a storage that may disagree; counts the storage reads.
    #[derive(Debug, Default)]
    struct Lagging {
        cached: std::collections::BTreeMap<String, Value>,
        stored: std::collections::BTreeMap<String, Value>,
        reads: std::sync::atomic::AtomicUsize,
    }

    impl Namespaces for Lagging {
        fn get<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Value>, ApiError>> {
            self.reads
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Box::pin(async move { Ok(self.stored.get(name).cloned()) })
        }

        fn get_cached<'a>(
            &'a self,
            name: &'a str,
        ) -> BoxFuture<'a, Result<Option<Arc<Value>>, ApiError>> {
            Box::pin(async move { Ok(self.cached.get(name).cloned().map(Arc::new)) })
        }

        fn create<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<(), ApiError>> {
            Box::pin(async { Ok(()) })
        }
    }

    #[tokio::test]
    async fn the_cache_decides_unless_it_lacks_the_namespace_or_a_deletion_went_through() {
        let active =
            |name: &str| json!({"metadata": {"name": name}, "status": {"phase": "Active"}});
        let terminating =
            |name: &str| json!({"metadata": {"name": name}, "status": {"phase": "Terminating"}});
        let namespaces = Arc::new(Lagging {
            // "old" is being deleted, which the cache has not seen yet; "new" is not cached yet
            cached: [("old".to_owned(), active("old"))].into(),
            stored: [
                ("old".to_owned(), terminating("old")),
                ("new".to_owned(), active("new")),
            ]
            .into(),
            ..Lagging::default()
        });
        let plugin = NamespaceLifecycle::new(namespaces.clone());
        let request = create_of("", "configmaps");
        let create = |namespace: &'static str| {
            let (plugin, request) = (&plugin, &request);
            async move {
                let attributes = Attributes {
                    request,
                    operation: Operation::Create,
                    namespace,
                    name: "x",
                    old_object: None,
                };
                plugin
                    .admit(attributes, &mut Value::Null)
                    .await
                    .map_err(|e| e.code)
            }
        };
        let reads = || namespaces.reads.load(std::sync::atomic::Ordering::Relaxed);
        // the cache says active: no storage read
        assert_eq!(create("old").await, Ok(()));
        assert_eq!(reads(), 0);
        // not in the cache: read from storage
        assert_eq!(create("new").await, Ok(()));
        assert_eq!(reads(), 1);
        // once this server let the deletion through, storage decides
        let delete = create_of("", "namespaces");
        let attributes = Attributes {
            request: &delete,
            operation: Operation::Delete,
            namespace: "",
            name: "old",
            old_object: None,
        };
        plugin.admit_delete(attributes).await.unwrap();
        assert_eq!(create("old").await, Err(403));
        assert_eq!(reads(), 2);
    }
}
