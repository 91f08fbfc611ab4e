//! Local APIServices for what the server serves, as upstream's autoregister and CRD
//! registration controllers keep them, and their availability, as upstream's local
//! availability controller writes it.
//!
//! [`AutoRegister::run`] makes a pass over the stored APIServices at start (the post-start hook
//! returns after it, so `/readyz` waits for it as upstream's `autoregister-completion` check
//! does), then another after every change of the APIServices or of what is served:
//! - every served group-version has an APIService `<version>.<group>` (`v1.` for the core
//!   group) without a service, labelled [`AUTOMANAGED_LABEL`]: `onstart` for the built-in
//!   group-versions, with upstream's priorities ([`builtin_priority`]), and `true` for the custom
//!   resources' group-versions (group priority 1000, version priority 100, as upstream);
//! - an APIService the server made whose group-version is no longer served goes: one made for
//!   custom resources at once, one made at start only in the first pass (servers of one cluster
//!   configured differently then do not delete each other's forever);
//! - an APIService without the label is the user's: never changed or deleted, even for a
//!   group-version the server serves (so a group can be handed to an extension server);
//! - every Local APIService is `Available=True` with reason `Local`.
//!
//! Several API servers of one cluster run this at once: a write that loses a race (409, 404,
//! already exists) is left to the next pass.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use genplane_api::apiregistration::apiservice::{
    self, AUTOMANAGED_LABEL, CUSTOM_PRIORITY, LOCAL_MESSAGE, LOCAL_REASON, OWN_PRIORITY,
    builtin_priority,
};
use genplane_apimachinery::errors::ApiError;
use genplane_apiserver::server::ApiServer;
use genplane_registry::{DeleteOptions, ListOptions, Store, WriteOptions};
use genplane_storage::Storage;
use serde_json::{Value, json};

use crate::store_follower::raced;

/// The label value of the APIServices of built-in group-versions.
pub const ON_START: &str = "onstart";
/// The label value of the APIServices of custom resources' group-versions.
pub const FOLLOWED: &str = "true";

/// An APIService the server wants: its group-version, priorities and label value.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Wanted {
    group: String,
    version: String,
    priority: (i32, i32),
    label: &'static str,
}

impl Wanted {
    fn name(&self) -> String {
        format!("{}.{}", self.version, self.group)
    }

    fn spec(&self) -> Value {
        json!({
            "group": self.group, "version": self.version,
            "groupPriorityMinimum": self.priority.0, "versionPriority": self.priority.1,
        })
    }

    fn object(&self) -> Value {
        json!({
            "apiVersion": apiservice::API_VERSION, "kind": apiservice::KIND,
            "metadata": {"name": self.name(), "labels": {AUTOMANAGED_LABEL: self.label}},
            "spec": self.spec(),
        })
    }
}

/// The APIServices of one API server, kept.
pub struct AutoRegister<S: Storage> {
    api: Arc<ApiServer<S>>,
    api_services: Store<S>,
    status: Store<S>,
    /// Whether a pass finished: the start-up APIServices of group-versions not served are
    /// deleted only until then. Held across a pass, so passes never overlap.
    started: tokio::sync::Mutex<bool>,
}

impl<S: Storage> std::fmt::Debug for AutoRegister<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AutoRegister")
    }
}

fn label(object: &Value) -> Option<&str> {
    object
        .pointer("/metadata/labels")
        .and_then(|labels| labels.get(AUTOMANAGED_LABEL))
        .and_then(Value::as_str)
}

fn name(object: &Value) -> &str {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

impl<S: Storage> AutoRegister<S> {
    /// The controller of `api`'s APIServices, when it serves them with their `status`.
    pub fn new(api: Arc<ApiServer<S>>) -> Option<Arc<Self>> {
        let resource = api
            .resources()
            .into_iter()
            .find(|r| r.info.is(&apiservice::INFO))?;
        let api_services = resource.store()?.clone();
        let status = resource.subresource_store("status")?.clone();
        Some(Arc::new(Self {
            api,
            api_services,
            status,
            started: tokio::sync::Mutex::new(false),
        }))
    }

    /// Makes a first pass, then follows the APIServices and what is served until `stop`
    /// completes.
    pub async fn run(
        self: Arc<Self>,
        stop: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<(), ApiError> {
        let served = Arc::new(tokio::sync::Mutex::new(self.api.served_changes()));
        let api_services = self.api_services.clone();
        crate::store_follower::follow_waking(
            api_services,
            "APIServices",
            move || {
                let this = self.clone();
                async move { this.sync().await }
            },
            move || {
                let served = served.clone();
                async move { served.lock().await.changed().await.is_ok() }
            },
            stop,
        )
        .await
    }

    /// The APIServices the server wants for what it serves now, by name.
    fn wanted(&self) -> BTreeMap<String, Wanted> {
        let mut wanted = BTreeMap::new();
        for resource in self.api.resources() {
            let (group, version) = (&resource.info.group, &resource.info.version);
            let (priority, label) = if resource.info.builtin_info().is_some() {
                (
                    builtin_priority(group, version).unwrap_or(OWN_PRIORITY),
                    ON_START,
                )
            } else {
                (CUSTOM_PRIORITY, FOLLOWED)
            };
            let entry = Wanted {
                group: group.clone(),
                version: version.clone(),
                priority,
                label,
            };
            wanted.entry(entry.name()).or_insert(entry);
        }
        wanted
    }

    /// One pass: the wanted APIServices made or corrected, the unwanted ones the server made
    /// deleted, and the Local ones available. Answers the revision it read at.
    pub async fn sync(&self) -> Result<String, ApiError> {
        let mut started = self.started.lock().await;
        let listed = self.api_services.list("", &ListOptions::default()).await?;
        let wanted = self.wanted();
        let mut seen = BTreeSet::new();
        for object in &listed.items {
            let name = name(object).to_owned();
            seen.insert(name.clone());
            let ours = label(object);
            match (wanted.get(&name), ours) {
                // The user's: never touched.
                (_, None) => {}
                (Some(want), Some(_)) => {
                    if object.get("spec") != Some(&want.spec()) || ours != Some(want.label) {
                        let mut updated = object.clone();
                        updated["spec"] = want.spec();
                        updated["metadata"]["labels"][AUTOMANAGED_LABEL] = json!(want.label);
                        self.write(self.api_services.update(
                            "",
                            &name,
                            updated,
                            &WriteOptions::default(),
                        ))
                        .await?;
                        continue;
                    }
                }
                (None, Some(label)) => {
                    if label == FOLLOWED || !*started {
                        let deleted = self
                            .api_services
                            .delete("", &name, &DeleteOptions::default())
                            .await;
                        if let Err(error) = deleted
                            && !raced(&error)
                        {
                            return Err(error);
                        }
                        continue;
                    }
                }
            }
            self.mark_local_available(object).await?;
        }
        for (name, want) in &wanted {
            if seen.contains(name) {
                continue;
            }
            let created = self
                .api_services
                .create("", want.object(), &WriteOptions::default())
                .await;
            match created {
                Ok(_) => {}
                Err(error) if raced(&error) => {}
                Err(error) => return Err(error),
            }
        }
        *started = true;
        Ok(listed.resource_version)
    }

    /// Writes `Available=True` (reason `Local`) on a Local APIService that lacks it.
    async fn mark_local_available(&self, object: &Value) -> Result<(), ApiError> {
        if !apiservice::is_local(object) {
            return Ok(());
        }
        let condition = apiservice::available_condition("True", LOCAL_REASON, LOCAL_MESSAGE);
        crate::store_follower::write_condition(&self.status, object, condition).await
    }

    /// Awaits a write, leaving a lost race to the next pass.
    async fn write(
        &self,
        write: impl std::future::Future<Output = Result<genplane_registry::Written, ApiError>>,
    ) -> Result<(), ApiError> {
        match write.await {
            Ok(_) => Ok(()),
            Err(error) if raced(&error) => Ok(()),
            Err(error) => Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_priorities_and_names() {
        assert_eq!(builtin_priority("", "v1"), Some((18000, 1)));
        assert_eq!(
            builtin_priority("rbac.authorization.k8s.io", "v1"),
            Some((17000, 15))
        );
        assert_eq!(
            builtin_priority("featuregates.genplane.io", "v1alpha1"),
            None
        );
        let core = Wanted {
            group: String::new(),
            version: "v1".into(),
            priority: (18000, 1),
            label: ON_START,
        };
        assert_eq!(core.name(), "v1.");
        let object = core.object();
        assert_eq!(object["metadata"]["labels"][AUTOMANAGED_LABEL], "onstart");
        assert!(
            genplane_api::apiregistration::apiservice::validate(&object)
                .unwrap()
                .is_empty()
        );
    }
}
