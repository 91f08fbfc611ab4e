//! The namespace plugins, as upstream's: NamespaceLifecycle (no new content in a namespace
//! that does not exist or is being deleted; the namespaces every cluster depends on cannot be
//! deleted), NamespaceExists (no new content in a namespace that does not exist) and
//! NamespaceAutoProvision (a create in a namespace that does not exist creates it first).

use std::sync::Arc;

use genplane_apimachinery::errors::{ApiError, Status, StatusCause, StatusDetails, StatusReason};
use genplane_apimachinery::schema::GroupResource;
use serde_json::Value;

use crate::{Attributes, BoxFuture, MutatingPlugin, Operation};

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
    fn get_cached<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<Value>, ApiError>> {
        self.get(name)
    }
    /// Creates the namespace `name` (succeeds if it exists already).
    fn create<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), ApiError>>;
}

fn namespaces() -> GroupResource {
    GroupResource::new("", "namespaces")
}

fn missing(namespace: &str) -> ApiError {
    Status::not_found(&namespaces(), namespace).into()
}

fn is_terminating(namespace: &Value) -> bool {
    namespace
        .pointer("/metadata/deletionTimestamp")
        .and_then(Value::as_str)
        .is_some_and(|t| !t.is_empty())
        || namespace.pointer("/status/phase").and_then(Value::as_str) == Some("Terminating")
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
}

impl NamespaceLifecycle {
    /// The plugin over `namespaces`.
    pub fn new(namespaces: Arc<dyn Namespaces>) -> Self {
        Self { namespaces }
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
            let Some(found) = lookup(&*self.namespaces, &attributes).await? else {
                return Err(missing(namespace));
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
                && IMMORTAL_NAMESPACES.contains(&attributes.name)
            {
                return Err(Status::forbidden(
                    &namespaces(),
                    attributes.name,
                    "this namespace may not be deleted",
                )
                .into());
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
}
