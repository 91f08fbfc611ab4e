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

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use genplane_api::catalog::{ResourceDescription, SubresourceDescription};
use genplane_apimachinery::errors::{ApiError, Status};
use genplane_apiserver::kind::ServedKind;
use genplane_apiserver::openapi::CustomDocument;
use genplane_apiserver::openapi::builder::CustomKind;
use genplane_apiserver::server::{ApiServer, Resource};
use genplane_registry::{
    ConvertFuture, Converter, CustomResourceStrategy, CustomScaleStrategy, CustomSchema,
    CustomStatusStrategy, DeleteOptions, ListOptions, ScalePaths, Store, WriteOptions,
};
use genplane_storage::{Revision, Storage};
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
    /// What the passes know of the stored CRDs and serve for them, from pass to pass (held
    /// through a pass, so that passes never overlap).
    passes: tokio::sync::Mutex<Passes<S>>,
}

/// What the passes keep: each stored CRD as last read, what serves it, and the OpenAPI
/// document of each group-version. A pass reads only the CRDs that changed, makes again only
/// what serves them and the documents of their group-versions, and computes the status only
/// of the CRDs of the groups they are in: nothing in proportion to all CRDs but passing
/// their handles to the server.
struct Passes<S: Storage> {
    /// Each stored CRD, by name.
    crds: BTreeMap<String, Tracked<S>>,
    /// The name of each stored CRD, by the revision it was read at.
    revisions: HashMap<Revision, String>,
    /// Groups with a change since their CRDs' status was last computed and written.
    dirty_groups: HashSet<String>,
    /// Group-versions whose document is to be made again.
    dirty_documents: BTreeSet<(String, String)>,
    /// The document of each group-version of custom resources.
    documents: BTreeMap<(String, String), Arc<CustomDocument>>,
    /// Whether what the server serves is to be handed to it again.
    changed: bool,
}

impl<S: Storage> Default for Passes<S> {
    fn default() -> Self {
        Self {
            crds: BTreeMap::new(),
            revisions: HashMap::new(),
            dirty_groups: HashSet::new(),
            dirty_documents: BTreeSet::new(),
            documents: BTreeMap::new(),
            changed: false,
        }
    }
}

/// One stored CRD as a pass knows it.
struct Tracked<S: Storage> {
    /// The revision it was read at.
    revision: Revision,
    /// What its status is computed from: the CRD without its versions, conversion and
    /// managed fields, which are most of its size.
    skeleton: Value,
    /// A hash of its `spec`.
    spec_hash: u64,
    /// What serves it, while it is established.
    served: Option<ServedCrd<S>>,
}

/// The served versions of one CRD, and what they were made from.
struct ServedCrd<S: Storage> {
    made_from: MadeFrom,
    /// Its group.
    group: String,
    /// The served versions, newest first.
    versions: Vec<String>,
    resources: Vec<Arc<Resource<S>>>,
}

/// What the serving of a CRD is made from: the same CRD (its uid), the same spec, and
/// whether it is being deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
struct MadeFrom {
    uid: String,
    spec_hash: u64,
    terminating: bool,
}

impl<S: Storage> Tracked<S> {
    /// `crd` as read: its name, and what a pass keeps of it.
    fn read(crd: Value) -> (String, Self) {
        let name = text(&crd, "/metadata/name").to_owned();
        let revision = text(&crd, "/metadata/resourceVersion")
            .parse()
            .unwrap_or_default();
        let spec_hash = {
            use std::hash::{Hash, Hasher};
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            serde_json::to_vec(&crd["spec"])
                .unwrap_or_default()
                .hash(&mut hasher);
            hasher.finish()
        };
        let mut skeleton = crd;
        if let Some(spec) = skeleton.get_mut("spec").and_then(Value::as_object_mut) {
            spec.remove("versions");
            spec.remove("conversion");
        }
        if let Some(metadata) = skeleton.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.remove("managedFields");
        }
        let tracked = Self {
            revision,
            skeleton,
            spec_hash,
            served: None,
        };
        (name, tracked)
    }

    fn group(&self) -> &str {
        text(&self.skeleton, "/spec/group")
    }

    /// What serving it now would be made from.
    fn made_from(&self) -> MadeFrom {
        MadeFrom {
            uid: text(&self.skeleton, "/metadata/uid").to_owned(),
            spec_hash: self.spec_hash,
            terminating: self
                .skeleton
                .pointer("/metadata/deletionTimestamp")
                .is_some(),
        }
    }
}

impl<S: Storage> Passes<S> {
    /// Takes in a CRD read anew.
    fn update(&mut self, name: String, tracked: Tracked<S>) {
        self.dirty_groups.insert(tracked.group().to_owned());
        self.revisions.insert(tracked.revision, name.clone());
        match self.crds.get_mut(&name) {
            Some(known) => {
                self.revisions.remove(&known.revision);
                self.dirty_groups.insert(known.group().to_owned());
                known.revision = tracked.revision;
                known.skeleton = tracked.skeleton;
                known.spec_hash = tracked.spec_hash;
            }
            None => {
                self.crds.insert(name, tracked);
            }
        }
    }

    /// Forgets a CRD that is no longer stored.
    fn remove(&mut self, name: &str) {
        if let Some(gone) = self.crds.remove(name) {
            self.revisions.remove(&gone.revision);
            self.dirty_groups.insert(gone.group().to_owned());
            self.stop_serving(gone.served);
        }
    }

    /// Marks the documents of what `served` served to be made again.
    fn stop_serving(&mut self, served: Option<ServedCrd<S>>) {
        if let Some(served) = served {
            for version in served.versions {
                self.dirty_documents.insert((served.group.clone(), version));
            }
            self.changed = true;
        }
    }
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

/// The served resource of one `version` of `crd`, as discovery and OpenAPI describe it.
fn description(crd: &Value, version: &Value) -> ResourceDescription {
    let spec = &crd["spec"];
    let group = text(spec, "/group");
    let names = &spec["names"];
    let kind = text(names, "/kind");
    let version_name = text(version, "/name");
    let storage_version = spec["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["storage"] == true)
        .map(|v| text(v, "/name"))
        .unwrap_or_default();
    let mut subresources = Vec::new();
    if version.pointer("/subresources/status").is_some() {
        subresources.push(SubresourceDescription {
            name: "status".into(),
            kind: kind.to_owned(),
            group: None,
            version: None,
            verbs: ["get", "patch", "update"].map(str::to_owned).to_vec(),
        });
    }
    if ScalePaths::of_version(version).is_some() {
        subresources.push(SubresourceDescription {
            name: "scale".into(),
            kind: genplane_api::autoscaling::KIND.to_owned(),
            group: Some(genplane_api::autoscaling::GROUP.to_owned()),
            version: Some(genplane_api::autoscaling::VERSION.to_owned()),
            verbs: ["get", "patch", "update"].map(str::to_owned).to_vec(),
        });
    }
    ResourceDescription {
        group: group.to_owned(),
        version: version_name.to_owned(),
        kind: kind.to_owned(),
        list_kind: match text(names, "/listKind") {
            "" => format!("{kind}List"),
            list => list.to_owned(),
        },
        resource: text(names, "/plural").to_owned(),
        singular: match text(names, "/singular") {
            "" => kind.to_lowercase(),
            singular => singular.to_owned(),
        },
        short_names: strings(names.get("shortNames")),
        namespaced: text(spec, "/scope") != "Cluster",
        verbs: genplane_api::catalog::ALL_VERBS
            .iter()
            .map(|v| (*v).to_owned())
            .collect(),
        categories: strings(names.get("categories")),
        subresources,
        storage_api_version: Some(format!("{group}/{storage_version}")),
    }
}

/// The kind of `crd`'s version `version_name` as its group-version's OpenAPI document
/// publishes it; `None` if the CRD has no such version.
fn published_kind(crd: &Value, version_name: &str) -> Option<CustomKind> {
    let version = crd
        .pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| text(v, "/name") == version_name)?;
    let published = schema::publish(crd, version);
    Some(CustomKind {
        description: description(crd, version),
        component: published.component,
        schema: published.schema,
        list_schema: published.list_schema,
    })
}

/// The compiled schemas of one CRD's versions: versions with equal schemas (the usual case)
/// share one.
#[derive(Default)]
struct CompiledSchemas<'a> {
    compiled: Vec<(Option<&'a Value>, Arc<dyn CustomSchema>)>,
}

impl<'a> CompiledSchemas<'a> {
    /// The compiled schema of `version`.
    fn of(&mut self, version: &'a Value) -> Arc<dyn CustomSchema> {
        let schema = version.pointer("/schema/openAPIV3Schema");
        if let Some((_, compiled)) = self.compiled.iter().find(|(s, _)| *s == schema) {
            return compiled.clone();
        }
        let compiled = schema::version_schema(version);
        self.compiled.push((schema, compiled.clone()));
        compiled
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
            passes: tokio::sync::Mutex::new(Passes::default()),
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

    /// One pass over the stored CRDs; returns the revision the list was read at.
    async fn sync(self: &Arc<Self>) -> Result<String, ApiError> {
        let mut guard = self.passes.lock().await;
        let passes = &mut *guard;

        // What changed since the last pass: only the CRDs at a revision not seen before are
        // read.
        let mut seen: HashSet<String> = HashSet::new();
        let mut fresh: Vec<(String, Tracked<S>)> = Vec::new();
        let revisions = &passes.revisions;
        let listed = self
            .crds
            .list_each_unknown(
                "",
                &ListOptions::default(),
                |revision| match revisions.get(&revision) {
                    Some(name) => {
                        seen.insert(name.clone());
                        true
                    }
                    None => false,
                },
                |crd| {
                    fresh.push(Tracked::read(crd));
                    Ok(())
                },
            )
            .await?;
        // The CRDs read again below are read at the list's revision or later, from the watch
        // cache: a consistent read would wait for the cache to reach the newest revision,
        // once per CRD, while CRDs are being written.
        let at = listed.resource_version.as_str();
        for (name, tracked) in fresh {
            seen.insert(name.clone());
            passes.update(name, tracked);
        }
        let gone: Vec<String> = passes
            .crds
            .keys()
            .filter(|name| !seen.contains(*name))
            .cloned()
            .collect();
        for name in gone {
            passes.remove(&name);
        }

        // The status upstream's controllers would write (names accepted, established), for
        // the CRDs of the groups that changed: the naming of one CRD depends only on the
        // others of its group. What it says is served before it is written, so that a client
        // that sees `Established` finds the resource.
        let used = status::NamesInUse::of(passes.crds.values().map(|t| &t.skeleton));
        let mut statuses: BTreeMap<String, Value> = BTreeMap::new();
        for (name, tracked) in &passes.crds {
            if !passes.dirty_groups.contains(tracked.group()) {
                continue;
            }
            let status = schema::status(&tracked.skeleton, &used);
            if tracked.skeleton.get("status") != Some(&status) {
                statuses.insert(name.clone(), status);
            }
        }

        // Serve what is established and changed; stop serving what is no longer.
        let mut remake = Vec::new();
        for (name, tracked) in &passes.crds {
            let status = statuses.get(name).unwrap_or(&tracked.skeleton["status"]);
            let wanted = status::is_status_condition_true(status, status::ESTABLISHED)
                .then(|| tracked.made_from());
            let current = tracked.served.as_ref().map(|s| &s.made_from);
            if current != wanted.as_ref() {
                remake.push((name.clone(), wanted));
            } else if wanted.is_some_and(|w| w.terminating) {
                self.clean_up(name, &tracked.skeleton);
            }
        }
        for (name, wanted) in remake {
            let old = passes.crds.get_mut(&name).and_then(|t| t.served.take());
            passes.stop_serving(old);
            let Some(made_from) = wanted else { continue };
            let crd = match self.crds.get("", &name, Some(at)).await {
                Ok(crd) => crd,
                // Gone since the list: the next pass forgets it.
                Err(error) if error.code == 404 => continue,
                Err(error) => return Err(error),
            };
            let storage = match self.storage_of(&name, &made_from.uid, &crd) {
                Ok(storage) => storage,
                Err(error) => {
                    tracing::error!(crd = name, %error, "creating the storage of a CRD");
                    continue;
                }
            };
            let (versions, resources) = self.serve(&crd, &storage, made_from.terminating);
            let group = text(&crd, "/spec/group").to_owned();
            for version in &versions {
                passes
                    .dirty_documents
                    .insert((group.clone(), version.clone()));
            }
            if made_from.terminating {
                self.clean_up(&name, &crd);
            }
            if let Some(tracked) = passes.crds.get_mut(&name) {
                tracked.served = Some(ServedCrd {
                    made_from,
                    group,
                    versions,
                    resources,
                });
            }
            passes.changed = true;
        }
        let live: HashSet<&String> = passes
            .crds
            .iter()
            .filter(|(_, t)| t.served.is_some())
            .map(|(name, _)| name)
            .collect();
        self.caches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|name, _| live.contains(name));
        self.webhooks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|name, _| live.contains(name));

        // The documents of the group-versions whose resources changed, each CRD in them read
        // once.
        if !passes.dirty_documents.is_empty() {
            let dirty = std::mem::take(&mut passes.dirty_documents);
            let document_groups: HashSet<&str> = dirty.iter().map(|(g, _)| g.as_str()).collect();
            let mut kinds: BTreeMap<(String, String), Vec<CustomKind>> = BTreeMap::new();
            for (name, tracked) in &passes.crds {
                let Some(served) = tracked
                    .served
                    .as_ref()
                    .filter(|s| document_groups.contains(s.group.as_str()))
                else {
                    continue;
                };
                let wanted: Vec<&String> = served
                    .versions
                    .iter()
                    .filter(|v| dirty.contains(&(served.group.clone(), (*v).clone())))
                    .collect();
                if wanted.is_empty() {
                    continue;
                }
                let crd = match self.crds.get("", name, Some(at)).await {
                    Ok(crd) => crd,
                    Err(error) if error.code == 404 => continue,
                    Err(error) => {
                        passes.dirty_documents = dirty;
                        return Err(error);
                    }
                };
                for version in wanted {
                    if let Some(kind) = published_kind(&crd, version) {
                        kinds
                            .entry((served.group.clone(), version.clone()))
                            .or_default()
                            .push(kind);
                    }
                }
            }
            for group_version in &dirty {
                if !kinds.contains_key(group_version) {
                    passes.documents.remove(group_version);
                }
            }
            // Building, serializing and compressing the documents is CPU work of up to seconds
            // for thousands of CRDs: it runs off the server's async workers, which keep
            // answering requests meanwhile.
            let built = tokio::task::spawn_blocking(move || {
                kinds
                    .into_iter()
                    .map(|((group, version), kinds)| {
                        let document =
                            genplane_apiserver::openapi::builder::custom_group_version_document(
                                &group, &version, &kinds,
                            );
                        ((group, version), Arc::new(CustomDocument::new(document)))
                    })
                    .collect::<Vec<_>>()
            })
            .await;
            match built {
                Ok(built) => passes.documents.extend(built),
                Err(error) => {
                    // Only a panic while building ends the task early: the next pass tries
                    // these group-versions again.
                    passes.dirty_documents = dirty;
                    return Err(ApiError::from(Status::internal_error(format!(
                        "building the OpenAPI documents of custom resources: {error}"
                    ))));
                }
            }
            passes.changed = true;
        }
        if std::mem::take(&mut passes.changed) {
            let resources: Vec<Arc<Resource<S>>> = passes
                .crds
                .values()
                .filter_map(|t| t.served.as_ref())
                .flat_map(|s| s.resources.iter().cloned())
                .collect();
            let documents: Vec<Arc<CustomDocument>> = passes.documents.values().cloned().collect();
            self.api.set_custom(resources, &documents);
        }

        for (name, status) in statuses {
            let Some(revision) = passes.crds.get(&name).map(|t| t.revision) else {
                continue;
            };
            let mut crd = match self.crds.get("", &name, Some(at)).await {
                Ok(crd) => crd,
                Err(error) if error.code == 404 => continue,
                Err(error) => return Err(error),
            };
            // A newer CRD than the one the status was computed for comes back through the
            // watch.
            if text(&crd, "/metadata/resourceVersion") != revision.to_string() {
                continue;
            }
            crd["status"] = status;
            match self
                .crd_status
                .update("", &name, crd, &WriteOptions::default())
                .await
            {
                Ok(_) => {}
                // A newer write comes back through the watch.
                Err(error) if crate::store_follower::raced(&error) => {}
                Err(error) => return Err(error),
            }
        }
        passes.dirty_groups.clear();
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

    /// The served versions of `crd`, newest first, and their resources. Versions with the
    /// same schema share one compiled form of it.
    fn serve(
        &self,
        crd: &Value,
        storage: &Arc<S>,
        terminating: bool,
    ) -> (Vec<String>, Vec<Arc<Resource<S>>>) {
        let spec = &crd["spec"];
        let group = text(spec, "/group");
        let names = &spec["names"];
        let plural = text(names, "/plural");
        let kind = text(names, "/kind");
        let namespaced = text(spec, "/scope") != "Cluster";
        let versions: Vec<&Value> = spec["versions"]
            .as_array()
            .map(|v| v.iter().collect())
            .unwrap_or_default();
        let mut compiled = CompiledSchemas::default();
        let stored_version = versions.iter().find(|v| v["storage"] == true);
        let storage_version = stored_version.map(|v| text(v, "/name")).unwrap_or_default();
        // Objects written in another version are pruned to the storage version's schema when
        // they are stored.
        let storage_schema = stored_version
            .filter(|_| versions.len() > 1)
            .map(|v| compiled.of(v));
        let converter = self.converter(crd);
        let mut served: Vec<&Value> = versions
            .into_iter()
            .filter(|v| v["served"] == true)
            .collect();
        served.sort_by(|a, b| version_priority(text(a, "/name"), text(b, "/name")));
        let mut out = Vec::new();
        let mut names_out = Vec::new();
        for version in served {
            let version_name = text(version, "/name");
            let schema = compiled.of(version);
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
                schema.clone(),
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
            if status {
                subresources.push((
                    "status".to_owned(),
                    Store::new(
                        storage.clone(),
                        Arc::new(CustomStatusStrategy::new(strategy.clone())),
                    ),
                ));
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
            }
            let description = description(crd, version);
            let printer = Printer::new(version.get("additionalPrinterColumns"), schema);
            let served_kind = ServedKind::custom(description, Arc::new(printer));
            let store = Store::new(storage.clone(), Arc::new(strategy));
            out.push(Arc::new(Resource::custom(served_kind, store, subresources)));
            names_out.push(version_name.to_owned());
        }
        (names_out, out)
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

    /// Deletes every object of the CRD `name`, being deleted, then removes its cleanup
    /// finalizer (once; later passes find it running). `crd` is the CRD as last read (its
    /// finalizers are all that is read of it).
    fn clean_up(self: &Arc<Self>, name: &str, crd: &Value) {
        if !strings(crd.pointer("/metadata/finalizers")).contains(&CLEANUP_FINALIZER.to_owned()) {
            return;
        }
        let Some(storage) = self.cached_storage(name) else {
            return;
        };
        {
            let mut cleaning = self
                .cleaning
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if cleaning.iter().any(|n| n == name) {
                return;
            }
            cleaning.push(name.to_owned());
        }
        let this = self.clone();
        let name = name.to_owned();
        tokio::spawn(async move {
            let result = match this.crds.get("", &name, None).await {
                Ok(crd) => this.delete_instances(&crd, storage).await,
                Err(error) if error.code == 404 => Ok(()),
                Err(error) => Err(error),
            };
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
                if let Ok(current) = this.crds.get("", &name, None).await {
                    this.clean_up(&name, &current);
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
