//! CustomResourceDefinitions, served at run time: the part of upstream's apiextensions-apiserver
//! that runs inside the API server.
//!
//! [`CustomResources::run`] follows the stored CRDs and, on every change:
//! - writes each CRD's status as upstream's naming and establishing controllers do
//!   (`acceptedNames`, `NamesAccepted`, `Established`, and `Terminating` while it is deleted);
//! - serves every served version of each CRD whose names are accepted, through
//!   [`ApiServer::set_custom`]: its store (one watch cache per CRD over `/registry/<group>/
//!   <plural>/`, shared by its versions), its discovery entry, its OpenAPI document and its
//!   table printer;
//! - cleans up CRDs being deleted: no new objects are accepted, every object is deleted, then
//!   the `customresourcecleanup.apiextensions.k8s.io` finalizer is removed so the CRD goes.
//!
//! Built-in resources always win over a CRD that names them.

pub mod printer;
pub mod schema;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use genplane_api::catalog::{ResourceDescription, SubresourceDescription};
use genplane_apimachinery::errors::{ApiError, Status};
use genplane_apiserver::kind::ServedKind;
use genplane_apiserver::openapi::builder::{CustomKind, Document};
use genplane_apiserver::server::{ApiServer, Resource};
use genplane_registry::{
    ConvertFuture, Converter, CustomResourceStrategy, CustomScaleStrategy, CustomStatusStrategy,
    DeleteOptions, ListOptions, ScalePaths, Store, WriteOptions,
};
use genplane_storage::Storage;
use serde_json::{Value, json};

use genplane_api::apiextensions::status;
use printer::Printer;

use crate::conversion::ConversionWebhook;
use genplane_admission::webhook::resolver::ServiceResolver;

/// Conversion by a CRD's webhook; a failure is the request's 500, as upstream answers it.
#[derive(Debug)]
struct WebhookConverter(ConversionWebhook);

impl Converter for WebhookConverter {
    fn convert<'a>(&'a self, objects: Vec<Value>, api_version: &'a str) -> ConvertFuture<'a> {
        Box::pin(async move {
            self.0
                .convert(objects, api_version)
                .await
                .map_err(|error| ApiError::from(Status::internal_error(error.to_string())))
        })
    }
}

/// The converter of a CRD whose webhook configuration cannot be used (a service reference, a
/// bad CA bundle): every conversion fails with why.
#[derive(Debug)]
struct Unconvertible(String);

impl Converter for Unconvertible {
    fn convert<'a>(&'a self, _objects: Vec<Value>, api_version: &'a str) -> ConvertFuture<'a> {
        let error = Status::internal_error(format!(
            "conversion webhook to {api_version} cannot be called: {}",
            self.0
        ));
        Box::pin(std::future::ready(Err(error.into())))
    }
}

use genplane_api::apiextensions::CLEANUP_FINALIZER;

/// Makes the storage of a CRD's objects from its key prefix (`/registry/<group>/<plural>/`).
pub type StorageFactory<S> =
    Arc<dyn Fn(&str, &str, &str) -> Result<Arc<S>, genplane_storage::Error> + Send + Sync>;

/// A CRD's converter, with the CRD generation it was made for.
type Webhook = (i64, Arc<dyn Converter>);

/// The CRD machinery of one API server.
pub struct CustomResources<S: Storage> {
    api: Arc<ApiServer<S>>,
    crds: Store<S>,
    crd_status: Store<S>,
    storage: StorageFactory<S>,
    /// The storage of each served CRD, by `<plural>.<group>`, with the CRD's uid.
    caches: Mutex<HashMap<String, (String, Arc<S>)>>,
    /// CRDs whose cleanup is running.
    cleaning: Mutex<Vec<String>>,
    /// The conversion webhook of each CRD converting by webhook, by name, with the CRD
    /// generation it was made for.
    webhooks: Mutex<HashMap<String, Webhook>>,
    /// Where conversion webhooks given by `service` are reached.
    resolver: ServiceResolver,
}

impl<S: Storage> std::fmt::Debug for CustomResources<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CustomResources").finish_non_exhaustive()
    }
}

fn text<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn strings(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Kubernetes' version priority: GA before beta before alpha, higher numbers first, versions
/// that do not look like Kubernetes versions last, alphabetically.
pub fn version_priority(a: &str, b: &str) -> std::cmp::Ordering {
    fn parse(v: &str) -> Option<(u64, u8, u64)> {
        let rest = v.strip_prefix('v')?;
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let major: u64 = rest[..digits].parse().ok()?;
        let tail = &rest[digits..];
        if tail.is_empty() {
            return Some((major, 2, 0));
        }
        let (stage, number) = if let Some(n) = tail.strip_prefix("beta") {
            (1, n)
        } else if let Some(n) = tail.strip_prefix("alpha") {
            (0, n)
        } else {
            return None;
        };
        Some((major, stage, number.parse().ok()?))
    }
    match (parse(a), parse(b)) {
        (Some((ma, sa, na)), Some((mb, sb, nb))) => sb.cmp(&sa).then(mb.cmp(&ma)).then(nb.cmp(&na)),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

impl<S: Storage> CustomResources<S> {
    /// The CRD machinery of `api`, which must serve `apiextensions.k8s.io/v1`
    /// customresourcedefinitions; `storage` makes the storage of each CRD's objects.
    pub fn new(
        api: Arc<ApiServer<S>>,
        storage: StorageFactory<S>,
        resolver: ServiceResolver,
    ) -> Option<Arc<Self>> {
        let resource = api
            .resources()
            .into_iter()
            .find(|r| r.info.is(&genplane_api::apiextensions::INFO))?;
        let crds = resource.store()?.clone();
        let crd_status = resource.subresource_store("status")?.clone();
        Some(Arc::new(Self {
            api,
            crds,
            crd_status,
            storage,
            caches: Mutex::new(HashMap::new()),
            cleaning: Mutex::new(Vec::new()),
            webhooks: Mutex::new(HashMap::new()),
            resolver,
        }))
    }

    /// Follows the CRDs until `stop` completes: serves them, writes their status, cleans up
    /// deleted ones. Returns after the first pass, so that the CRDs stored at start-up are
    /// served before the server takes requests.
    pub async fn run(
        self: Arc<Self>,
        stop: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<(), ApiError> {
        let crds = self.crds.clone();
        crate::store_follower::follow(
            crds,
            "CustomResourceDefinitions",
            move || {
                let this = self.clone();
                async move { this.sync().await }
            },
            stop,
        )
        .await
    }

    /// One pass over every stored CRD; returns the revision the list was read at.
    async fn sync(self: &Arc<Self>) -> Result<String, ApiError> {
        let listed = self.crds.list("", &ListOptions::default()).await?;
        let mut crds = listed.items;
        // The status upstream's controllers would write: names accepted and established.
        // What it says is served before it is written, so that a client that sees
        // `Established` finds the resource.
        let mut writes = Vec::new();
        // The naming helpers take every known CRD, this one included (upstream's lister
        // includes it), so the list is passed as it was read.
        let statuses: Vec<Value> = crds.iter().map(|crd| schema::status(crd, &crds)).collect();
        for (index, status) in statuses.into_iter().enumerate() {
            if crds[index].get("status") != Some(&status) {
                crds[index]["status"] = status;
                writes.push(index);
            }
        }
        let mut resources = Vec::new();
        let mut documents: BTreeMap<(String, String), Vec<CustomKind>> = BTreeMap::new();
        let mut live = Vec::new();
        for crd in &crds {
            if !status::is_condition_true(crd, status::ESTABLISHED) {
                continue;
            }
            let name = text(crd, "/metadata/name").to_owned();
            let uid = text(crd, "/metadata/uid").to_owned();
            let storage = match self.storage_of(&name, &uid, crd) {
                Ok(storage) => storage,
                Err(error) => {
                    tracing::error!(crd = name, %error, "creating the storage of a CRD");
                    continue;
                }
            };
            live.push(name.clone());
            let terminating = crd.pointer("/metadata/deletionTimestamp").is_some();
            for (resource, kind) in self.serve(crd, &storage, terminating) {
                documents
                    .entry((resource.info.group.clone(), resource.info.version.clone()))
                    .or_default()
                    .push(kind);
                resources.push(resource);
            }
            if terminating {
                self.clean_up(crd, storage);
            }
        }
        self.caches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|name, _| live.contains(name));
        self.webhooks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|name, _| live.contains(name));
        let documents: Vec<Document> = documents
            .into_iter()
            .map(|((group, version), kinds)| {
                genplane_apiserver::openapi::builder::custom_group_version_document(
                    &group, &version, &kinds,
                )
            })
            .collect();
        self.api.set_custom(resources, documents);
        for index in writes {
            let name = text(&crds[index], "/metadata/name").to_owned();
            match self
                .crd_status
                .update("", &name, crds[index].clone(), &WriteOptions::default())
                .await
            {
                Ok(_) => {}
                // A newer write comes back through the watch.
                Err(error) if crate::store_follower::raced(&error) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(listed.resource_version)
    }

    /// The storage of a CRD's objects, made on first use (and again when the CRD was deleted
    /// and created anew).
    fn storage_of(
        &self,
        name: &str,
        uid: &str,
        crd: &Value,
    ) -> Result<Arc<S>, genplane_storage::Error> {
        let mut caches = self
            .caches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((cached_uid, storage)) = caches.get(name)
            && cached_uid == uid
        {
            return Ok(storage.clone());
        }
        let group = text(crd, "/spec/group");
        let plural = text(crd, "/spec/names/plural");
        let storage = (self.storage)(&format!("/registry/{group}/{plural}/"), group, plural)?;
        caches.insert(name.to_owned(), (uid.to_owned(), storage.clone()));
        Ok(storage)
    }

    /// The served versions of `crd`: their resources and OpenAPI kinds, newest version first.
    fn serve(
        &self,
        crd: &Value,
        storage: &Arc<S>,
        terminating: bool,
    ) -> Vec<(Resource<S>, CustomKind)> {
        let spec = &crd["spec"];
        let group = text(spec, "/group");
        let names = &spec["names"];
        let plural = text(names, "/plural");
        let kind = text(names, "/kind");
        let list_kind = match text(names, "/listKind") {
            "" => format!("{kind}List"),
            list => list.to_owned(),
        };
        let namespaced = text(spec, "/scope") != "Cluster";
        let versions: Vec<&Value> = spec["versions"]
            .as_array()
            .map(|v| v.iter().collect())
            .unwrap_or_default();
        let stored_version = versions.iter().find(|v| v["storage"] == true);
        let storage_version = stored_version.map(|v| text(v, "/name")).unwrap_or_default();
        // Objects written in another version are pruned to the storage version's schema when
        // they are stored.
        let storage_schema = stored_version
            .filter(|_| spec["versions"].as_array().is_some_and(|v| v.len() > 1))
            .map(|v| schema::version_schema(v));
        let converter = self.converter(crd);
        let mut served: Vec<&Value> = versions
            .into_iter()
            .filter(|v| v["served"] == true)
            .collect();
        served.sort_by(|a, b| version_priority(text(a, "/name"), text(b, "/name")));
        let mut out = Vec::new();
        for version in served {
            let version_name = text(version, "/name");
            let compiled = schema::compile(crd, version);
            let status = version.pointer("/subresources/status").is_some();
            let scale = ScalePaths::of_version(version);
            let selectable: Vec<String> = version
                .get("selectableFields")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|f| f.get("jsonPath").and_then(Value::as_str))
                .map(str::to_owned)
                .collect();
            let strategy = CustomResourceStrategy::new(
                group,
                plural,
                kind,
                version_name,
                storage_version,
                namespaced,
                compiled.schema.clone(),
            )
            .with_status(status)
            .with_converter(converter.clone())
            .with_scale(scale.clone())
            .terminating(terminating)
            .with_selectable_fields(&selectable);
            let strategy = match &storage_schema {
                Some(storage_schema) if version_name != storage_version => {
                    strategy.with_storage_schema(storage_schema.clone())
                }
                _ => strategy,
            };
            let mut subresources = Vec::new();
            let mut described = Vec::new();
            if status {
                subresources.push((
                    "status".to_owned(),
                    Store::new(
                        storage.clone(),
                        Arc::new(CustomStatusStrategy::new(strategy.clone())),
                    ),
                ));
                described.push(SubresourceDescription {
                    name: "status".into(),
                    kind: kind.to_owned(),
                    group: None,
                    version: None,
                    verbs: ["get", "patch", "update"].map(str::to_owned).to_vec(),
                });
            }
            if let Some(paths) = scale {
                // The scale subresource reads and writes autoscaling/v1 Scales.
                subresources.push((
                    "scale".to_owned(),
                    Store::new(
                        storage.clone(),
                        Arc::new(CustomScaleStrategy::new(strategy.clone(), paths)),
                    ),
                ));
                described.push(SubresourceDescription {
                    name: "scale".into(),
                    kind: genplane_api::autoscaling::KIND.to_owned(),
                    group: Some(genplane_api::autoscaling::GROUP.to_owned()),
                    version: Some(genplane_api::autoscaling::VERSION.to_owned()),
                    verbs: ["get", "patch", "update"].map(str::to_owned).to_vec(),
                });
            }
            let description = ResourceDescription {
                group: group.to_owned(),
                version: version_name.to_owned(),
                kind: kind.to_owned(),
                list_kind: list_kind.clone(),
                resource: plural.to_owned(),
                singular: match text(names, "/singular") {
                    "" => kind.to_lowercase(),
                    singular => singular.to_owned(),
                },
                short_names: strings(names.get("shortNames")),
                namespaced,
                verbs: genplane_api::catalog::ALL_VERBS
                    .iter()
                    .map(|v| (*v).to_owned())
                    .collect(),
                categories: strings(names.get("categories")),
                subresources: described,
                storage_api_version: Some(format!("{group}/{storage_version}")),
            };
            let printer = Printer::new(
                version.get("additionalPrinterColumns"),
                compiled.schema.clone(),
            );
            let served_kind = ServedKind::custom(description.clone(), Arc::new(printer));
            let store = Store::new(storage.clone(), Arc::new(strategy));
            out.push((
                Resource::custom(served_kind, store, subresources),
                CustomKind {
                    description,
                    component: compiled.component,
                    schema: compiled.published,
                    list_schema: compiled.published_list,
                },
            ));
        }
        out
    }

    /// The converter of a CRD whose conversion strategy is `Webhook` (made once per CRD
    /// generation); `None` for conversion `None`.
    fn converter(&self, crd: &Value) -> Option<Arc<dyn Converter>> {
        let conversion = crd.pointer("/spec/conversion")?;
        if conversion.get("strategy").and_then(Value::as_str) != Some("Webhook") {
            return None;
        }
        let name = text(crd, "/metadata/name").to_owned();
        let generation = crd
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let mut webhooks = self
            .webhooks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((made_for, converter)) = webhooks.get(&name)
            && *made_for == generation
        {
            return Some(converter.clone());
        }
        let converter: Arc<dyn Converter> = match ConversionWebhook::resolved(
            conversion,
            &self.resolver,
        ) {
            Ok(webhook) => Arc::new(WebhookConverter(webhook)),
            Err(error) => {
                tracing::warn!(crd = name, %error, "the CRD's conversion webhook cannot be used");
                Arc::new(Unconvertible(error.to_string()))
            }
        };
        webhooks.insert(name, (generation, converter.clone()));
        Some(converter)
    }

    /// Deletes every object of a CRD being deleted, then removes its cleanup finalizer (once;
    /// later passes find it running).
    fn clean_up(self: &Arc<Self>, crd: &Value, storage: Arc<S>) {
        let name = text(crd, "/metadata/name").to_owned();
        if !strings(crd.pointer("/metadata/finalizers")).contains(&CLEANUP_FINALIZER.to_owned()) {
            return;
        }
        {
            let mut cleaning = self
                .cleaning
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if cleaning.contains(&name) {
                return;
            }
            cleaning.push(name.clone());
        }
        let this = self.clone();
        let crd = crd.clone();
        tokio::spawn(async move {
            let result = this.delete_instances(&crd, storage).await;
            if let Err(error) = &result {
                tracing::warn!(crd = name, %error, "deleting the objects of a CRD");
            }
            this.cleaning
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .retain(|n| *n != name);
            if result.is_err() {
                // Try again on a later pass.
                tokio::time::sleep(Duration::from_secs(1)).await;
                if let (Ok(current), Some(storage)) = (
                    this.crds.get("", &name, None).await,
                    this.cached_storage(&name),
                ) {
                    this.clean_up(&current, storage);
                }
            }
        });
    }

    /// The storage of a CRD still served, if it is.
    fn cached_storage(&self, name: &str) -> Option<Arc<S>> {
        self.caches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(name)
            .map(|(_, s)| s.clone())
    }

    async fn delete_instances(&self, crd: &Value, storage: Arc<S>) -> Result<(), ApiError> {
        let name = text(crd, "/metadata/name").to_owned();
        let compiled = schema::compile_storage(crd);
        let store = Store::new(storage, Arc::new(compiled));
        loop {
            let listed = store.list("", &ListOptions::default()).await?;
            let pending: Vec<&Value> = listed
                .items
                .iter()
                .filter(|o| o.pointer("/metadata/deletionTimestamp").is_none())
                .collect();
            for object in &pending {
                let namespace = text(object, "/metadata/namespace");
                let object_name = text(object, "/metadata/name");
                match store
                    .delete(namespace, object_name, &DeleteOptions::default())
                    .await
                {
                    Ok(_) => {}
                    Err(e) if e.code == 404 => {}
                    Err(e) => return Err(e),
                }
            }
            if listed.items.is_empty() {
                break;
            }
            // Objects with finalizers go when their controllers let them.
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        loop {
            let mut current = match self.crds.get("", &name, None).await {
                Ok(current) => current,
                Err(e) if e.code == 404 => return Ok(()),
                Err(e) => return Err(e),
            };
            let mut finalizers = strings(current.pointer("/metadata/finalizers"));
            finalizers.retain(|f| f != CLEANUP_FINALIZER);
            current["metadata"]["finalizers"] = json!(finalizers);
            match self
                .crds
                .update("", &name, current, &WriteOptions::default())
                .await
            {
                Ok(_) => return Ok(()),
                Err(e) if e.code == 409 => continue,
                Err(e) if e.code == 404 => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_by_kubernetes_priority() {
        let mut versions = vec![
            "v1alpha1",
            "foo",
            "v2",
            "v1beta2",
            "v1",
            "v11alpha2",
            "v1beta1",
            "v10",
            "bar",
        ];
        versions.sort_by(|a, b| version_priority(a, b));
        assert_eq!(
            versions,
            vec![
                "v10",
                "v2",
                "v1",
                "v1beta2",
                "v1beta1",
                "v11alpha2",
                "v1alpha1",
                "bar",
                "foo"
            ]
        );
    }
}
