//! Admission checks that run before a write reaches its store.
//!
//! NamespaceLifecycle, as upstream: nothing is created in a namespace that does not exist
//! (404) or is being deleted (403, cause `NamespaceTerminating`), and the namespaces every
//! cluster depends on (`default`, `kube-system`, `kube-public`) cannot be deleted.

use genplane_apimachinery::errors::{ApiError, Status, StatusCause, StatusDetails, StatusReason};
use genplane_apimachinery::schema::GroupResource;
use genplane_registry::Store;
use genplane_registry::object::meta_str;
use genplane_storage::Storage;

/// Namespaces that may not be deleted.
pub const IMMORTAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public"];

/// Refuses a create of `resource` object `name` in `namespace` unless the namespace exists and
/// is not terminating.
pub async fn namespace_accepts_creates<S: Storage>(
    namespaces: &Store<S>,
    namespace: &str,
    resource: &GroupResource,
    name: &str,
) -> Result<(), ApiError> {
    let found = match namespaces.get("", namespace, None).await {
        Ok(found) => found,
        Err(e) if e.code == 404 => {
            return Err(Status::not_found(&GroupResource::new("", "namespaces"), namespace).into());
        }
        // The lookup is part of the create: a storage that did not answer in time fails the
        // create of this resource, and the answer says so (not "... against namespaces").
        Err(e) if e.is(StatusReason::ServerTimeout) => {
            let retry = e
                .details
                .as_ref()
                .and_then(|d| d.retry_after_seconds)
                .unwrap_or(2);
            return Err(Status::server_timeout(resource, "create", retry).into());
        }
        Err(e) => return Err(e),
    };
    let terminating = !meta_str(&found, "deletionTimestamp").is_empty()
        || found
            .pointer("/status/phase")
            .and_then(serde_json::Value::as_str)
            == Some("Terminating");
    if terminating {
        let message = format!(
            "unable to create new content in namespace {namespace} because it is being terminated"
        );
        let mut status = Status::forbidden(resource, name, &message);
        status.details = Some(StatusDetails {
            causes: vec![StatusCause {
                reason: "NamespaceTerminating".into(),
                message: format!("namespace {namespace} is being terminated"),
                field: "metadata.namespace".into(),
            }],
            ..status.details.unwrap_or_default()
        });
        return Err(status.into());
    }
    Ok(())
}

/// NamespaceLifecycle on every path that creates (see [`genplane_registry::AdmitCreate`]): a
/// namespaced object is created only in a namespace that exists and is not terminating.
#[derive(Debug)]
pub struct NamespaceLifecycle<S: Storage> {
    /// The store of Namespaces.
    pub namespaces: Store<S>,
}

impl<S: Storage> genplane_registry::AdmitCreate for NamespaceLifecycle<S> {
    fn admit_create<'a>(
        &'a self,
        resource: &'a GroupResource,
        namespace: &'a str,
        name: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), ApiError>> + Send + 'a>>
    {
        Box::pin(async move {
            if namespace.is_empty() {
                return Ok(());
            }
            namespace_accepts_creates(&self.namespaces, namespace, resource, name).await
        })
    }
}

/// Refuses deleting a namespace every cluster depends on.
pub fn namespace_may_be_deleted(name: &str) -> Result<(), ApiError> {
    if IMMORTAL_NAMESPACES.contains(&name) {
        return Err(Status::forbidden(
            &GroupResource::new("", "namespaces"),
            name,
            "this namespace may not be deleted",
        )
        .into());
    }
    Ok(())
}
