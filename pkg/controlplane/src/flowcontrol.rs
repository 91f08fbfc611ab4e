//! The API Priority and Fairness configuration, kept inside the API server (upstream's
//! `priority-and-fairness-config-producer` hook and the status part of its APF controller).
//!
//! [`Configuration::run`] follows the stored FlowSchemas and PriorityLevelConfigurations and,
//! at every change, makes one pass ([`Configuration::sync`]) over both:
//! - a **mandatory** object ([`bootstrap`]: `exempt`, `catch-all`) that is missing is created,
//!   one whose spec differs is put back (the `exempt` level keeps its `spec.exempt`, which
//!   administrators may tune);
//! - a **suggested** object that is missing is created; one whose spec differs is updated only
//!   while its `apf.kubernetes.io/autoupdate-spec` annotation is true (as Go's `ParseBool`
//!   reads it); without a readable annotation, it is updated (and marked `true`) at
//!   generation 1 (never changed since it was made), and marked `false` otherwise;
//! - an object marked for automatic update that is neither (one an older bootstrap made) is
//!   deleted;
//! - every FlowSchema's `Dangling` status condition says whether its priority level exists
//!   (`True`, reason `NotFound`; `False`, reason `Found`), its transition time moving only when
//!   its status does.
//!
//! Each pass also hands what it read to the server's dispatching ([`FlowControl::configure`]),
//! so that requests are classified and limited by the stored configuration.
//!
//! A write that loses a race with another writer (404, 409) is left to the next pass, which
//! the other write's event brings.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use genplane_api::flowcontrol::{
    AUTO_UPDATE_ANNOTATION, DANGLING, EXEMPT, FlowSchemaSpec, PriorityLevelSpec, bootstrap,
    flowschema, prioritylevelconfiguration,
};
use genplane_apimachinery::errors::ApiError;
use genplane_apiserver::flowcontrol::FlowControl;
use genplane_apiserver::server::ApiServer;
use genplane_registry::{DeleteOptions, ListOptions, Store, WriteOptions};
use genplane_storage::Storage;
use serde_json::{Value, json};

/// The stores of the flowcontrol objects, the server's dispatching they configure, and one
/// lock so that passes do not overlap.
pub struct Configuration<S: Storage> {
    flow_schemas: Store<S>,
    flow_schema_status: Store<S>,
    levels: Store<S>,
    dispatching: Option<Arc<FlowControl>>,
    pass: tokio::sync::Mutex<()>,
}

impl<S: Storage> std::fmt::Debug for Configuration<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("flowcontrol::Configuration")
    }
}

/// The kinds of objects a pass keeps.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    FlowSchema,
    PriorityLevel,
}

/// What the bootstrap wants of one object.
struct Wanted {
    object: Value,
    mandatory: bool,
}

fn name(object: &Value) -> &str {
    object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Whether two specs of `kind` are the same, as typed values (so a list the store dropped
/// when empty equals an empty one).
fn same_spec(kind: Kind, a: Option<&Value>, b: Option<&Value>) -> bool {
    let (a, b) = (
        a.cloned().unwrap_or(Value::Null),
        b.cloned().unwrap_or(Value::Null),
    );
    match kind {
        Kind::FlowSchema => {
            serde_json::from_value::<FlowSchemaSpec>(a).ok()
                == serde_json::from_value::<FlowSchemaSpec>(b).ok()
        }
        Kind::PriorityLevel => {
            serde_json::from_value::<PriorityLevelSpec>(a).ok()
                == serde_json::from_value::<PriorityLevelSpec>(b).ok()
        }
    }
}

/// The annotation's value as Go's `strconv.ParseBool` reads it, `None` when absent or unreadable.
fn auto_update(object: &Value) -> Option<bool> {
    object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(AUTO_UPDATE_ANNOTATION))
        .and_then(Value::as_str)
        .and_then(genplane_component_base::strconv::parse_bool)
}

/// The `Dangling` condition of a FlowSchema naming `level`, which exists or not (its time is
/// set when it is written).
pub fn dangling_condition(level: &str, exists: bool) -> Value {
    if exists {
        json!({"type": DANGLING, "status": "False", "reason": "Found",
            "message": format!("This FlowSchema references the PriorityLevelConfiguration object named {level:?} and it exists")})
    } else {
        json!({"type": DANGLING, "status": "True", "reason": "NotFound",
            "message": format!("This FlowSchema references the PriorityLevelConfiguration object named {level:?} but there is no such object")})
    }
}

impl<S: Storage> Configuration<S> {
    /// The controller of `api`'s flowcontrol objects, when it serves both kinds (FlowSchemas
    /// with their `status`).
    pub fn new(api: &ApiServer<S>) -> Option<Arc<Self>> {
        let resources = api.resources();
        let flow_schemas = resources.iter().find(|r| r.info.is(&flowschema::INFO))?;
        let levels = resources
            .iter()
            .find(|r| r.info.is(&prioritylevelconfiguration::INFO))?;
        Some(Arc::new(Self {
            flow_schemas: flow_schemas.store()?.clone(),
            flow_schema_status: flow_schemas.subresource_store("status")?.clone(),
            levels: levels.store()?.clone(),
            dispatching: api.flow_control().cloned(),
            pass: tokio::sync::Mutex::new(()),
        }))
    }

    /// Makes a first pass, then follows both kinds until the future `stop` makes completes
    /// (it is called once per kind followed).
    pub async fn run<F>(self: Arc<Self>, stop: impl Fn() -> F) -> Result<(), ApiError>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        for kind in [Kind::PriorityLevel, Kind::FlowSchema] {
            let (store, what) = match kind {
                Kind::FlowSchema => (self.flow_schemas.clone(), "FlowSchemas"),
                Kind::PriorityLevel => (self.levels.clone(), "PriorityLevelConfigurations"),
            };
            let this = self.clone();
            crate::store_follower::follow(
                store,
                what,
                move || {
                    let this = this.clone();
                    async move { this.sync_reporting(kind).await }
                },
                stop(),
            )
            .await?;
        }
        Ok(())
    }

    /// A pass, answering the revision the objects of `kind` were read at.
    async fn sync_reporting(&self, kind: Kind) -> Result<String, ApiError> {
        let (schemas, levels) = self.sync().await?;
        Ok(match kind {
            Kind::FlowSchema => schemas,
            Kind::PriorityLevel => levels,
        })
    }

    /// One pass over both kinds (see the module's documentation). Answers the revisions the
    /// FlowSchemas and the levels were read at.
    pub async fn sync(&self) -> Result<(String, String), ApiError> {
        let _pass = self.pass.lock().await;
        let levels = self.levels.list("", &ListOptions::default()).await?;
        let mut level_names: Vec<String> =
            levels.items.iter().map(|o| name(o).to_owned()).collect();
        let mut wanted = BTreeMap::new();
        for (object, mandatory) in bootstrap::mandatory_priority_levels()
            .into_iter()
            .map(|o| (o, true))
            .chain(
                bootstrap::suggested_priority_levels()
                    .into_iter()
                    .map(|o| (o, false)),
            )
        {
            wanted.insert(name(&object).to_owned(), Wanted { object, mandatory });
        }
        for created in self
            .ensure(Kind::PriorityLevel, &self.levels, &levels.items, &wanted)
            .await?
        {
            level_names.push(created);
        }
        let schemas = self.flow_schemas.list("", &ListOptions::default()).await?;
        let mut wanted = BTreeMap::new();
        for (object, mandatory) in bootstrap::mandatory_flow_schemas()
            .into_iter()
            .map(|o| (o, true))
            .chain(
                bootstrap::suggested_flow_schemas()
                    .into_iter()
                    .map(|o| (o, false)),
            )
        {
            wanted.insert(name(&object).to_owned(), Wanted { object, mandatory });
        }
        self.ensure(
            Kind::FlowSchema,
            &self.flow_schemas,
            &schemas.items,
            &wanted,
        )
        .await?;
        // Dispatching follows what is stored now (what this pass wrote comes with its event).
        if let Some(dispatching) = &self.dispatching {
            dispatching.configure(&schemas.items, &levels.items);
        }
        // The conditions of what is stored now (a created FlowSchema's come with its event).
        for schema in &schemas.items {
            self.mark_dangling(schema, &level_names).await?;
        }
        Ok((schemas.resource_version, levels.resource_version))
    }

    /// Creates, corrects and deletes the objects of `kind` in `store` as `wanted` says;
    /// answers the names it created.
    async fn ensure(
        &self,
        kind: Kind,
        store: &Store<S>,
        stored: &[Value],
        wanted: &BTreeMap<String, Wanted>,
    ) -> Result<Vec<String>, ApiError> {
        let mut created = Vec::new();
        for object in stored {
            let object_name = name(object);
            let Some(want) = wanted.get(object_name) else {
                if auto_update(object) == Some(true) {
                    let deleted = store
                        .delete("", object_name, &DeleteOptions::default())
                        .await;
                    self.tolerate(deleted.map(drop))?;
                }
                continue;
            };
            let mut spec = want.object["spec"].clone();
            if want.mandatory && kind == Kind::PriorityLevel && object_name == EXEMPT {
                // Administrators may tune the exempt level's `spec.exempt`.
                if let Some(exempt) = object.pointer("/spec/exempt") {
                    spec["exempt"] = exempt.clone();
                }
            }
            let differs = !same_spec(kind, object.get("spec"), Some(&spec));
            let (update_spec, annotation) = if want.mandatory {
                (differs, Some(true))
            } else {
                match auto_update(object) {
                    Some(auto) => (auto && differs, None),
                    None => {
                        let fresh = object
                            .pointer("/metadata/generation")
                            .and_then(Value::as_i64)
                            == Some(1);
                        (fresh && differs, Some(fresh))
                    }
                }
            };
            let annotation = annotation.filter(|a| auto_update(object) != Some(*a));
            if !update_spec && annotation.is_none() {
                continue;
            }
            let mut updated = object.clone();
            if update_spec {
                updated["spec"] = spec;
            }
            if let Some(annotation) = annotation {
                updated["metadata"]["annotations"][AUTO_UPDATE_ANNOTATION] =
                    json!(annotation.to_string());
            }
            tracing::info!(
                kind = if kind == Kind::FlowSchema {
                    "FlowSchema"
                } else {
                    "PriorityLevelConfiguration"
                },
                name = object_name,
                "restoring the flowcontrol bootstrap configuration"
            );
            let written = store
                .update("", object_name, updated, &WriteOptions::default())
                .await;
            self.tolerate(written.map(drop))?;
        }
        for (want_name, want) in wanted {
            if stored.iter().any(|o| name(o) == want_name) {
                continue;
            }
            match store
                .create("", want.object.clone(), &WriteOptions::default())
                .await
            {
                Ok(_) => created.push(want_name.clone()),
                Err(error) if error.code == 409 => created.push(want_name.clone()),
                Err(error) => return Err(error),
            }
        }
        Ok(created)
    }

    fn tolerate(&self, result: Result<(), ApiError>) -> Result<(), ApiError> {
        match result {
            Err(error) if !crate::store_follower::raced(&error) => Err(error),
            _ => Ok(()),
        }
    }

    /// Writes the FlowSchema's `Dangling` condition when it is not what `levels` say.
    async fn mark_dangling(&self, schema: &Value, levels: &[String]) -> Result<(), ApiError> {
        let level = schema
            .pointer("/spec/priorityLevelConfiguration/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let exists = levels.iter().any(|l| l == level);
        let condition = dangling_condition(level, exists);
        crate::store_follower::write_condition(&self.flow_schema_status, schema, condition).await
    }
}
