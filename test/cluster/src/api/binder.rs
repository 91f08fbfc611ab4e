//! Answers `pods/<name>/binding` ([`super::binding`]): [`Binder`] writes the pod's
//! `spec.nodeName` (no other write may change it) and its `PodScheduled` condition, and
//! refuses a pod that is already assigned or being deleted (409, upstream's words).

use std::sync::Arc;

use genplane_admission::BoxFuture;
use genplane_api::catalog::{Context, FeatureGates, SubresourceRules};
use genplane_apimachinery::errors::{ApiError, Status};
use genplane_apimachinery::schema::GroupResource;
use genplane_apimachinery::validation::field::ErrorList;
use genplane_apiserver::answer::{Answer, Creating};
use genplane_registry::{CatalogStrategy, Store, SubresourceStrategy, WriteOptions, Written};
use genplane_storage::Storage;
use serde_json::{Value, json};

use super::{items, meta_update_errors, str_at};

/// A binding's write of a pod: the stored pod with the new `spec.nodeName` and status.
fn bind_write(new: &mut Value, old: &Value, _: &Context<'_>) {
    let node = new.pointer("/spec/nodeName").cloned();
    let status = new.get("status").cloned();
    let resource_version = new.pointer("/metadata/resourceVersion").cloned();
    *new = old.clone();
    if let (Some(spec), Some(node)) = (new.get_mut("spec").and_then(Value::as_object_mut), node) {
        spec.insert("nodeName".into(), node);
    }
    if let Some(status) = status {
        new["status"] = status;
    }
    if let (Some(meta), Some(rv)) = (
        new.get_mut("metadata").and_then(Value::as_object_mut),
        resource_version,
    ) {
        meta.insert("resourceVersion".into(), rv);
    }
}

fn validate_bind(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    meta_update_errors(new, old)
}

/// Answers `pods/<name>/binding`: assigns the pod to the Binding's target node.
pub struct Binder<S: Storage> {
    pods: Store<S>,
}

impl<S: Storage> std::fmt::Debug for Binder<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Binder").finish_non_exhaustive()
    }
}

impl<S: Storage> Binder<S> {
    /// Binds the pods kept in `storage` (the pods resource's), its hooks told `gates`.
    pub fn new(storage: Arc<S>, gates: Arc<dyn FeatureGates>) -> Self {
        let strategy = SubresourceStrategy::new(
            CatalogStrategy::with_gates(&super::pod::INFO, gates),
            SubresourceRules {
                prepare_for_update: bind_write,
                validate_update: validate_bind,
            },
        );
        Self {
            pods: Store::new(storage, Arc::new(strategy)),
        }
    }

    async fn bind(&self, creating: &Creating<'_>, node: &str) -> Result<(), ApiError> {
        let name = creating.name;
        let resource = GroupResource::new("", "pods/binding");
        loop {
            let mut pod = self.pods.get(creating.namespace, name, None).await?;
            if !str_at(&pod, "/metadata/deletionTimestamp").is_empty() {
                return Err(Status::conflict(
                    &resource,
                    name,
                    &format!("pod {name} is being deleted, cannot be assigned to a host"),
                )
                .into());
            }
            let assigned = str_at(&pod, "/spec/nodeName");
            if !assigned.is_empty() {
                return Err(Status::conflict(
                    &resource,
                    name,
                    &format!("pod {name} is already assigned to node {assigned:?}"),
                )
                .into());
            }
            pod["spec"]["nodeName"] = json!(node);
            let mut conditions: Vec<Value> = items(&pod, "/status/conditions")
                .iter()
                .filter(|c| str_at(c, "/type") != "PodScheduled")
                .cloned()
                .collect();
            conditions.push(json!({"type": "PodScheduled", "status": "True",
                "lastProbeTime": null,
                "lastTransitionTime": genplane_apimachinery::meta::rfc3339(creating.now)}));
            pod["status"]["conditions"] = json!(conditions);
            let options = WriteOptions {
                dry_run: creating.dry_run,
                ..WriteOptions::default()
            };
            match self
                .pods
                .update(creating.namespace, name, pod, &options)
                .await
            {
                Ok(_) => return Ok(()),
                // Written meanwhile (a status update): read it again.
                Err(e) if e.code == 409 => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

impl<S: Storage> Answer for Binder<S> {
    fn answer<'a>(
        &'a self,
        creating: &'a Creating<'a>,
        object: Value,
    ) -> BoxFuture<'a, Result<Written, ApiError>> {
        Box::pin(async move {
            let node = str_at(&object, "/target/name").to_owned();
            self.bind(creating, &node).await?;
            Ok(Written {
                object,
                created: true,
                warnings: Vec::new(),
                stored: None,
            })
        })
    }
}
