//! The API server: what it serves (built-in resources, and custom ones in a snapshot replaced
//! as a whole when they come and go), its settings, and [`ApiServer::handle`], which passes
//! every request through the filter chain ([`crate::filters`]) to the router.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;

use genplane_api::admissionregistration;
use genplane_api::catalog::{FeatureGates, GatesOff, ResourceInfo};
use genplane_audit::Auditor;
use genplane_component_base::http::OpsHandler;
use genplane_component_base::shutdown::Shutdown;
use genplane_component_base::version::{BuildInfo, KUBERNETES_VERSION};
use genplane_registry::{CatalogStrategy, Store};
use genplane_storage::Storage;
use serde_json::{Value, json};

use crate::admission::mirrored::MirroredList;
use crate::answer::Answer;
use crate::backing::Backing;
use crate::discovery::{Discovery, ResourceDescription};
use crate::enablement::{Api, ApiEnablement};
use crate::filters::max_in_flight::{InFlight, Limits};
use crate::flowcontrol::FlowControl;
use crate::kind::ServedKind;
use crate::metrics::ApiMetrics;
use crate::openapi::builder::{self, ServedResource};
use crate::openapi::{CustomDocument, OpenApiV2, OpenApiV3};
use crate::request_info::RequestInfo;
use crate::security::Security;

/// A served resource: its kind, where its requests go, and where those of its subresources
/// go.
pub struct Resource<S: Storage> {
    /// The kind: description and behaviour.
    pub info: Arc<ServedKind>,
    /// Its store, or its answer when it is never stored.
    pub backing: Backing<S>,
    /// The subresources served apart from the resource's own verbs: with rules of their own
    /// (`status`, `finalize`, `scale`: stores) or answered (`token`), by name.
    pub subresources: Vec<(String, Backing<S>)>,
}

impl<S: Storage> std::fmt::Debug for Resource<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resource")
            .field("resource", &self.info.resource)
            .finish_non_exhaustive()
    }
}

impl<S: Storage> Resource<S> {
    /// The built-in resource `info`, stored in `storage`, with its subresources (a kind that is
    /// never stored is answered by the server's built-in answer and needs no storage: see
    /// [`Resource::answered`]).
    pub fn builtin(info: &'static ResourceInfo, storage: Arc<S>) -> Self {
        Self::builtin_with_gates(info, storage, Arc::new(GatesOff))
    }

    /// The resource `info` over `storage`, its strategy's hooks told the server's feature
    /// `gates`.
    pub fn builtin_with_gates(
        info: &'static ResourceInfo,
        storage: Arc<S>,
        gates: Arc<dyn FeatureGates>,
    ) -> Self {
        if !info.stored() {
            return Self::answered(info, gates);
        }
        let strategy = CatalogStrategy::with_gates(info, gates.clone());
        Self {
            info: Arc::new(ServedKind::builtin(info)),
            subresources: Self::builtin_subresources(info, &strategy, &storage, &gates),
            backing: Backing::Stored(Store::new(storage, Arc::new(strategy))),
        }
    }

    /// The subresources of `info` with a store (rules of their own) or an answer (a body
    /// kind of their own, never stored).
    fn builtin_subresources(
        info: &'static ResourceInfo,
        strategy: &CatalogStrategy,
        storage: &Arc<S>,
        gates: &Arc<dyn FeatureGates>,
    ) -> Vec<(String, Backing<S>)> {
        info.subresources
            .iter()
            .filter_map(|sub| {
                let backing = match (strategy.subresource(sub.name), sub.body) {
                    (Some(strategy), _) => {
                        Backing::Stored(Store::new(storage.clone(), Arc::new(strategy)))
                    }
                    (None, Some(body)) if !body.stored() => {
                        Backing::computed(body, crate::reviews::builtin(body), gates.clone())
                    }
                    (None, _) => return None,
                };
                Some((sub.name.to_owned(), backing))
            })
            .collect()
    }

    /// The catalog kind `info` that is never stored (a review), answered by the server's
    /// built-in answer of it (a kind it has none for refuses every create).
    pub fn answered(info: &'static ResourceInfo, gates: Arc<dyn FeatureGates>) -> Self {
        Self::computed(info, crate::reviews::builtin(info), gates)
    }

    /// A kind that is never stored, described by `info` (verbs `["create"]`), whose creates
    /// `answer` answers once they are decoded, defaulted, admitted and validated with the
    /// hooks of `info` (told `gates`).
    pub fn computed(
        info: &'static ResourceInfo,
        answer: Arc<dyn Answer>,
        gates: Arc<dyn FeatureGates>,
    ) -> Self {
        Self {
            info: Arc::new(ServedKind::builtin(info)),
            backing: Backing::computed(info, answer, gates),
            subresources: Vec::new(),
        }
    }

    /// The store, when objects are stored.
    pub fn store(&self) -> Option<&Store<S>> {
        self.backing.store()
    }

    /// The store of the subresource `name` (`status`), when it has one of its own.
    pub fn subresource_store(&self, name: &str) -> Option<&Store<S>> {
        self.subresources
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, backing)| backing.store())
    }

    /// The same resource, whose subresource `name` (one `info` lists with a `body` kind that
    /// is never stored, as `pods/binding` lists a Binding) is answered by `answer`: its
    /// creates are decoded, defaulted, admitted and validated with the body kind's hooks (told
    /// `gates`), then answered. A program gives this way a subresource of its own kind the
    /// behaviour the server has none for (without it, such creates are refused with a 405).
    /// A subresource `info` does not list, or lists without such a body, is left as it is.
    pub fn with_answer(
        mut self,
        name: &str,
        answer: Arc<dyn Answer>,
        gates: Arc<dyn FeatureGates>,
    ) -> Self {
        let body = self
            .info
            .builtin_info()
            .and_then(|info| info.subresources.iter().find(|s| s.name == name))
            .and_then(|sub| sub.body)
            .filter(|body| !body.stored());
        if let Some(body) = body {
            self.subresources.retain(|(served, _)| served != name);
            self.subresources
                .push((name.to_owned(), Backing::computed(body, answer, gates)));
        }
        self
    }

    /// The built-in resource `info` with `strategy` in place of the catalog's for the resource
    /// itself (its subresources keep theirs).
    pub fn builtin_with(
        info: &'static ResourceInfo,
        storage: Arc<S>,
        strategy: Arc<dyn genplane_registry::Strategy>,
    ) -> Self {
        let mut resource = Self::builtin(info, storage.clone());
        resource.backing = Backing::Stored(Store::new(storage, strategy));
        resource
    }

    /// A custom resource of `kind`, served by `store`, with `subresources` served by theirs.
    pub fn custom(
        kind: ServedKind,
        store: Store<S>,
        subresources: Vec<(String, Store<S>)>,
    ) -> Self {
        Self {
            info: Arc::new(kind),
            backing: Backing::Stored(store),
            subresources: subresources
                .into_iter()
                .map(|(name, store)| (name, Backing::Stored(store)))
                .collect(),
        }
    }

    /// The description the OpenAPI documents publish: the resource with the subresources it
    /// serves.
    pub fn served(&self) -> ServedResource {
        let mut description = self.info.description().clone();
        description
            .subresources
            .retain(|s| self.subresources.iter().any(|(name, _)| *name == s.name));
        description
    }
}

/// What is served at one moment: the resources with their discovery, OpenAPI documents and type
/// model. Replaced as a whole when custom resources come or go; a request works with the
/// snapshot it started with.
#[derive(Debug)]
pub(crate) struct Served<S: Storage> {
    pub(crate) resources: Vec<Arc<Resource<S>>>,
    /// The position in `resources` of each, by group, version and resource.
    index: Arc<ResourceIndex>,
    pub(crate) discovery: Discovery,
    /// The type models of the served kinds (list/map semantics, patch strategies), read from
    /// the OpenAPI documents, for strategic merge patch and server-side apply.
    pub(crate) types: TypeModels,
    /// The OpenAPI v3 documents, as served (the schemas of kinds are read back from them).
    pub(crate) openapi: OpenApiV3,
    pub(crate) openapi_v2: Arc<OpenApiV2>,
    /// What other servers serve ([`ApiServer::set_aggregated`]): proxied, and in discovery
    /// and the OpenAPI index.
    pub(crate) aggregated: Arc<Aggregated>,
}

impl<S: Storage> Served<S> {
    /// The resource a request names.
    pub(crate) fn find(&self, info: &RequestInfo) -> Option<&Arc<Resource<S>>> {
        self.index
            .get(&info.api_group, &info.api_version, &info.resource)
            .map(|at| &self.resources[at])
    }
}

/// The position of each served resource in a snapshot's list, by group, version and resource:
/// made once per snapshot, and looked up without allocating.
#[derive(Debug, Default)]
struct ResourceIndex(HashMap<String, HashMap<String, HashMap<String, usize>>>);

impl ResourceIndex {
    /// The positions of `resources` (the first, should two share a name).
    fn of<S: Storage>(resources: &[Arc<Resource<S>>]) -> Self {
        let mut index = Self::default();
        for (at, r) in resources.iter().enumerate() {
            index
                .0
                .entry(r.info.group.clone())
                .or_default()
                .entry(r.info.version.clone())
                .or_default()
                .entry(r.info.resource.clone())
                .or_insert(at);
        }
        index
    }

    /// The position of `group`/`version`, `resource`.
    fn get(&self, group: &str, version: &str, resource: &str) -> Option<usize> {
        self.0.get(group)?.get(version)?.get(resource).copied()
    }
}

/// The type models of what a server serves: the built-in kinds' one, made once, and one per
/// group-version of custom resources, read from its OpenAPI document when first needed.
#[derive(Clone, Debug)]
pub(crate) struct TypeModels {
    builtin: Arc<genplane_merge::Schema>,
    /// By group and version.
    custom: Arc<HashMap<(String, String), Arc<CustomDocument>>>,
}

impl TypeModels {
    /// The model of the built-in kinds.
    pub(crate) fn builtin(&self) -> Arc<genplane_merge::Schema> {
        self.builtin.clone()
    }

    /// The model of a served resource's kinds.
    pub(crate) fn of_resource<S: Storage>(
        &self,
        resource: &Resource<S>,
    ) -> Arc<genplane_merge::Schema> {
        if resource.info.builtin_info().is_some() {
            return self.builtin.clone();
        }
        self.custom
            .get(&(resource.info.group.clone(), resource.info.version.clone()))
            .map_or_else(|| self.builtin.clone(), |d| d.types())
    }

    /// The model that describes the kind `group`/`version`, `kind`: its group-version's
    /// custom resources' when they describe it, else the built-in one.
    pub(crate) fn of_kind(
        &self,
        group: &str,
        version: &str,
        kind: &str,
    ) -> Arc<genplane_merge::Schema> {
        if let Some(document) = self.custom.get(&(group.to_owned(), version.to_owned())) {
            let types = document.types();
            if types.kind(group, version, kind).is_some() {
                return types;
            }
        }
        self.builtin.clone()
    }
}

/// What other servers serve, as the aggregator's controller last found it: where each
/// group-version an APIService hands elsewhere is proxied
/// ([`crate::aggregation::Targets`]), and the resources of those group-versions, which
/// discovery lists beside this server's own.
#[derive(Debug, Default)]
pub struct Aggregated {
    pub(crate) targets: crate::aggregation::Targets,
    resources: Vec<ResourceDescription>,
    /// The group-versions whose server is unavailable (discovery marks them stale).
    stale: Vec<(String, String)>,
    /// The priorities of each group-version served elsewhere (its APIService's group priority
    /// minimum and version priority), which order discovery.
    priorities: Vec<((String, String), (i32, i32))>,
    /// The OpenAPI v3 index entries of the group-versions served elsewhere (path below
    /// `/openapi/v3/`, the document's URL on its server), when their servers have them.
    openapi: Vec<(String, String)>,
    /// Their v3 documents (path below `/openapi/v3/`, bytes), which the v2 document
    /// includes.
    openapi_documents: Vec<(String, Bytes)>,
}

/// One group-version another server serves, as the aggregator's controller found it.
#[derive(Debug)]
pub struct ServedElsewhere {
    /// The API group.
    pub group: String,
    /// The version.
    pub version: String,
    /// Where its requests are proxied.
    pub target: Arc<crate::aggregation::Target>,
    /// The resources its server said it serves.
    pub resources: Vec<ResourceDescription>,
    /// Its APIService's group priority minimum and version priority.
    pub priority: (i32, i32),
    /// The URL of its OpenAPI v3 document on its server, when it has one.
    pub openapi_url: Option<String>,
    /// That document as its server answered it, when it could be read.
    pub openapi_document: Option<Bytes>,
}

impl Aggregated {
    /// What other servers serve: each group-version of `served`.
    pub fn new(served: impl IntoIterator<Item = ServedElsewhere>) -> Self {
        let mut targets = Vec::new();
        let mut resources = Vec::new();
        let mut stale = Vec::new();
        let mut priorities = Vec::new();
        let mut openapi = Vec::new();
        let mut openapi_documents = Vec::new();
        for ServedElsewhere {
            group,
            version,
            target,
            resources: described,
            priority,
            openapi_url,
            openapi_document,
        } in served
        {
            let path = format!("apis/{group}/{version}");
            if let Some(document) = openapi_document {
                openapi_documents.push((path.clone(), document));
            }
            if let Some(url) = openapi_url {
                openapi.push((path, url));
            }
            if target.unavailable.is_some() {
                stale.push((group.clone(), version.clone()));
            }
            priorities.push(((group.clone(), version.clone()), priority));
            targets.push((group, version, target));
            resources.extend(described);
        }
        Self {
            targets: crate::aggregation::Targets::new(targets),
            resources,
            stale,
            priorities,
            openapi,
            openapi_documents,
        }
    }
}

/// `described` in the order discovery lists it, as upstream's aggregator orders APIServices:
/// groups by their highest group priority minimum (`apiregistration.k8s.io` first, as
/// upstream lists it), then by name; versions in a group by version priority; otherwise in the
/// order given (the catalog's, a CRD's by Kubernetes version).
fn in_priority_order(
    described: Vec<(ResourceDescription, (i32, i32))>,
) -> Vec<ResourceDescription> {
    /// Upstream's discovery priority of its own group, above every other.
    const APIREGISTRATION_PRIORITY: i32 = 20001;
    let mut group_priority: std::collections::HashMap<&str, i32> = std::collections::HashMap::new();
    for (description, (group, _)) in &described {
        let group = if description.group == genplane_api::apiregistration::apiservice::GROUP {
            APIREGISTRATION_PRIORITY
        } else {
            *group
        };
        let entry = group_priority
            .entry(description.group.as_str())
            .or_insert(group);
        *entry = (*entry).max(group);
    }
    let group_priority: std::collections::HashMap<String, i32> = group_priority
        .into_iter()
        .map(|(g, p)| (g.to_owned(), p))
        .collect();
    let mut ordered = described;
    // A stable sort: equal keys keep the order given.
    ordered.sort_by(|(a, (_, va)), (b, (_, vb))| {
        let (pa, pb) = (group_priority[&a.group], group_priority[&b.group]);
        pb.cmp(&pa)
            .then_with(|| a.group.cmp(&b.group))
            .then_with(|| vb.cmp(va))
    });
    ordered.into_iter().map(|(d, _)| d).collect()
}

/// Answers API requests.
#[derive(Debug)]
pub struct ApiServer<S: Storage> {
    /// The built-in resources, always served first.
    pub(crate) builtin: Vec<Arc<Resource<S>>>,
    /// The OpenAPI documents of the built-in resources, serialized (a snapshot shares them).
    builtin_openapi: OpenApiV3,
    /// The type model of the built-in resources' documents.
    builtin_types: Arc<genplane_merge::Schema>,
    served: Arc<std::sync::RwLock<Arc<Served<S>>>>,
    /// Counts the changes of what is served ([`ApiServer::served_changes`]).
    changes: tokio::sync::watch::Sender<u64>,
    pub(crate) version: Value,
    pub(crate) server_address: String,
    pub(crate) ops: Option<OpsHandler>,
    /// The in-flight limits and the request timeout.
    pub(crate) in_flight: InFlight,
    /// API Priority and Fairness, unless the server runs with the in-flight limits alone.
    pub(crate) flow_control: Option<Arc<FlowControl>>,
    pub(crate) metrics: Option<ApiMetrics>,
    pub(crate) shutdown: Option<Shutdown>,
    pub(crate) security: Option<Security>,
    pub(crate) audit: Option<Auditor>,
    /// The admission plugins every write goes through (upstream's defaults unless replaced).
    pub(crate) admission: Arc<genplane_admission::Chain>,
    /// What admission plugins read of the server (the stored namespaces, webhook
    /// configurations and quotas), when it serves Namespaces.
    admission_context: Option<genplane_admission::plugins::Context>,
    /// The server's feature gates, for what the request path consults at run time (response
    /// compression); `None` serves as if every such feature were off.
    pub(crate) feature_gate: Option<genplane_component_base::featuregate::FeatureGate>,
}

/// Priority and fairness under `limits`, unless they switch it off (or set no limit).
fn flow_control_for(limits: &Limits) -> Option<Arc<FlowControl>> {
    let seats = limits.max_read_only.saturating_add(limits.max_mutating);
    (limits.priority_and_fairness && seats > 0).then(|| {
        Arc::new(FlowControl::new(
            u32::try_from(seats).unwrap_or(u32::MAX),
            limits.request_timeout / 4,
        ))
    })
}

/// The stored webhook configurations, when both kinds are served.
fn webhook_configurations<S: Storage>(
    builtin: &[Arc<Resource<S>>],
) -> Option<Arc<dyn genplane_admission::webhook::Configurations>> {
    use genplane_api::admissionregistration::{
        mutatingwebhookconfiguration, validatingwebhookconfiguration,
    };
    Some(Arc::new(
        crate::admission::webhook_configurations::StoredWebhookConfigurations {
            validating: MirroredList::new(admission_store(
                builtin,
                &validatingwebhookconfiguration::INFO,
            )?),
            mutating: MirroredList::new(admission_store(
                builtin,
                &mutatingwebhookconfiguration::INFO,
            )?),
        },
    ))
}

/// The params of admission policies: objects of any kind served at the time of the write.
fn served_params<S: Storage>(
    served: &Arc<std::sync::RwLock<Arc<Served<S>>>>,
) -> crate::admission::policies::ServedParams<S> {
    let served = served.clone();
    let kinds: crate::admission::policies::KindStores<S> =
        Arc::new(move |group: &str, version: &str, kind: &str| {
            let served = served
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone();
            served.resources.iter().find_map(|r| {
                (r.info.group == group && r.info.version == version && r.info.kind == kind)
                    .then(|| r.store().map(|store| (r.info.namespaced, store.clone())))
                    .flatten()
            })
        });
    crate::admission::policies::ServedParams { kinds }
}

/// The store of the built-in admission configuration resource `kind`, when served.
fn admission_store<S: Storage>(
    builtin: &[Arc<Resource<S>>],
    kind: &ResourceInfo,
) -> Option<Store<S>> {
    builtin
        .iter()
        .find(|r| r.info.is(kind))
        .and_then(|r| r.store().cloned())
}

/// The stored ValidatingAdmissionPolicies and their bindings, when both are served.
fn admission_policies<S: Storage>(
    builtin: &[Arc<Resource<S>>],
    served: &Arc<std::sync::RwLock<Arc<Served<S>>>>,
) -> Option<Arc<dyn genplane_admission::validating_policy::Policies>> {
    Some(Arc::new(crate::admission::policies::StoredPolicies {
        policies: MirroredList::new(admission_store(
            builtin,
            &admissionregistration::validatingadmissionpolicy::INFO,
        )?),
        bindings: MirroredList::new(admission_store(
            builtin,
            &admissionregistration::validatingadmissionpolicybinding::INFO,
        )?),
        params: served_params(served),
    }))
}

/// The stored MutatingAdmissionPolicies and their bindings, when both are served (alpha: with
/// their feature gate on and `--runtime-config` enabling them).
fn mutating_admission_policies<S: Storage>(
    builtin: &[Arc<Resource<S>>],
    served: &Arc<std::sync::RwLock<Arc<Served<S>>>>,
) -> Option<Arc<dyn genplane_admission::mutating_policy::MutatingPolicies>> {
    let snapshot = served.clone();
    let types: crate::admission::policies::ServedTypes = Arc::new(move |group, version, kind| {
        let types = snapshot
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .types
            .clone();
        types.of_kind(group, version, kind)
    });
    Some(Arc::new(
        crate::admission::policies::StoredMutatingPolicies {
            policies: MirroredList::new(admission_store(
                builtin,
                &admissionregistration::mutatingadmissionpolicy::INFO,
            )?),
            bindings: MirroredList::new(admission_store(
                builtin,
                &admissionregistration::mutatingadmissionpolicybinding::INFO,
            )?),
            params: served_params(served),
            types,
        },
    ))
}

/// The stored ResourceQuotas and their `status` store, when they are served.
fn resource_quotas<S: Storage>(
    builtin: &[Arc<Resource<S>>],
) -> Option<Arc<dyn genplane_admission::quota::Quotas>> {
    let resource = builtin
        .iter()
        .find(|r| r.info.group.is_empty() && r.info.resource == "resourcequotas")?;
    let status = resource.subresource_store("status")?;
    Some(Arc::new(crate::admission::quotas::StoredQuotas {
        quotas: resource.store()?.clone(),
        status: status.clone(),
    }))
}

/// `/version`, as kube-apiserver answers it; `minor` tells kubectl's dispatcher which kubectl to
/// run.
fn version_info(build: &BuildInfo) -> Value {
    json!({
        "major": KUBERNETES_VERSION.major.to_string(),
        "minor": KUBERNETES_VERSION.minor.to_string(),
        "gitVersion": format!("v{}.0+genplane.{}", KUBERNETES_VERSION, build.genplane_version),
        "gitCommit": build.git_commit,
        "gitTreeState": "clean",
        "buildDate": "",
        "goVersion": "",
        "compiler": "rustc",
        "platform": build.platform,
    })
}

impl<S: Storage> ApiServer<S> {
    /// A server of `resources`, reporting `build` on `/version` and `server_address` in
    /// discovery; `ops` answers the health and metrics endpoints.
    pub fn new(
        resources: Vec<Resource<S>>,
        build: &BuildInfo,
        server_address: &str,
        ops: Option<OpsHandler>,
    ) -> Self {
        Self::serving(resources, &ApiEnablement::all(), build, server_address, ops)
    }

    /// A server as [`ApiServer::new`] makes it, of the resources `enablement`
    /// serves (`--runtime-config`): the others are in neither discovery, the OpenAPI
    /// documents nor routing.
    pub fn serving(
        resources: Vec<Resource<S>>,
        enablement: &ApiEnablement,
        build: &BuildInfo,
        server_address: &str,
        ops: Option<OpsHandler>,
    ) -> Self {
        let builtin: Vec<Arc<Resource<S>>> = resources
            .into_iter()
            .filter(|r| {
                enablement.serves(Api {
                    group: &r.info.group,
                    version: &r.info.version,
                    resource: &r.info.resource,
                })
            })
            .map(Arc::new)
            .collect();
        // The entries whose schemas the documents describe: the served kinds' own (a
        // program's kinds included).
        let entries: Vec<&'static ResourceInfo> = builtin
            .iter()
            .filter_map(|r| r.info.builtin_info())
            .collect();
        let builtin_documents = builder::documents_of(
            &builtin.iter().map(|r| r.served()).collect::<Vec<_>>(),
            &entries,
        );
        // The documents are built from the same tables as the model, so their extensions
        // always read; should one not, patches of that kind degrade to untyped merging.
        let builtin_types = Arc::new(builder::type_model(&builtin_documents).unwrap_or_else(
            |error| {
                tracing::error!(%error, "reading the type model");
                genplane_merge::Schema::default()
            },
        ));
        // Only the documents' bytes are kept: parsed, they take several times more.
        let builtin_openapi = OpenApiV3::from_documents(builtin_documents);
        let version = version_info(build);
        let served = Arc::new(std::sync::RwLock::new(Arc::new(Self::snapshot(
            &builtin,
            &builtin_openapi,
            &builtin_types,
            Vec::new(),
            &[],
            Arc::default(),
            &version,
        ))));
        let admission_context = builtin
            .iter()
            .find(|r| r.info.group.is_empty() && r.info.resource == "namespaces")
            .and_then(|namespaces| namespaces.store())
            .map(|namespaces| genplane_admission::plugins::Context {
                namespaces: Arc::new(crate::admission::namespaces::StoredNamespaces::new(
                    namespaces.clone(),
                )),
                webhooks: webhook_configurations(&builtin),
                quotas: resource_quotas(&builtin),
                policies: admission_policies(&builtin, &served),
                mutating_policies: mutating_admission_policies(&builtin, &served),
                configuration: Arc::default(),
                resolver: Default::default(),
            });
        let admission = Arc::new(
            admission_context
                .as_ref()
                .map(genplane_admission::plugins::defaults)
                .unwrap_or_default(),
        );
        Self {
            builtin,
            builtin_openapi,
            builtin_types,
            served,
            changes: tokio::sync::watch::Sender::new(0),
            version,
            server_address: server_address.to_owned(),
            ops,
            in_flight: InFlight::new(Limits::default()),
            flow_control: flow_control_for(&Limits::default()),
            metrics: None,
            shutdown: None,
            security: None,
            audit: None,
            admission,
            admission_context,
            feature_gate: None,
        }
    }

    /// What is served: the built-in resources (their documents and type model built once)
    /// followed by `custom` ones, whose OpenAPI documents are `custom_documents`; discovery
    /// also lists `aggregated`, the resources other servers serve.
    fn snapshot(
        builtin: &[Arc<Resource<S>>],
        builtin_openapi: &OpenApiV3,
        builtin_types: &Arc<genplane_merge::Schema>,
        custom: Vec<Arc<Resource<S>>>,
        custom_documents: &[Arc<CustomDocument>],
        aggregated: Arc<Aggregated>,
        version: &Value,
    ) -> Served<S> {
        let resources: Vec<Arc<Resource<S>>> = builtin.iter().cloned().chain(custom).collect();
        let discovery = Self::discovery_of(&resources, &aggregated);
        let types = TypeModels {
            builtin: builtin_types.clone(),
            custom: Arc::new(
                custom_documents
                    .iter()
                    .filter_map(|d| {
                        let (group, version) = builder::group_version_of_path(d.path())?;
                        Some(((group.to_owned(), version.to_owned()), d.clone()))
                    })
                    .collect(),
            ),
        };
        let openapi = builtin_openapi
            .extended(custom_documents)
            .with_remote(aggregated.openapi.clone());
        let openapi_v2 = Self::openapi_v2(version, &openapi, &aggregated);
        Served {
            index: Arc::new(ResourceIndex::of(&resources)),
            resources,
            discovery,
            types,
            openapi,
            openapi_v2,
            aggregated,
        }
    }

    /// The OpenAPI v2 document (built at its first request) of `openapi` and of the
    /// documents other servers serve (`aggregated`), for a server of `version`.
    fn openapi_v2(version: &Value, openapi: &OpenApiV3, aggregated: &Aggregated) -> Arc<OpenApiV2> {
        Arc::new(OpenApiV2::new(
            openapi,
            aggregated.openapi_documents.clone(),
            version["gitVersion"].as_str().unwrap_or_default(),
        ))
    }

    /// Discovery of `resources`, and of `aggregated` (what other servers serve) in the
    /// group-versions none of them is in.
    fn discovery_of(resources: &[Arc<Resource<S>>], aggregated: &Aggregated) -> Discovery {
        use genplane_api::apiregistration::apiservice;
        let mut described: Vec<(ResourceDescription, (i32, i32))> = resources
            .iter()
            .map(|r| {
                let priority = if r.info.builtin_info().is_some() {
                    apiservice::builtin_priority(&r.info.group, &r.info.version)
                        .unwrap_or(apiservice::OWN_PRIORITY)
                } else {
                    apiservice::CUSTOM_PRIORITY
                };
                (r.info.description().clone(), priority)
            })
            .collect();
        for remote in &aggregated.resources {
            if !resources
                .iter()
                .any(|r| r.info.group == remote.group && r.info.version == remote.version)
            {
                let priority = aggregated
                    .priorities
                    .iter()
                    .find(|((g, v), _)| *g == remote.group && *v == remote.version)
                    .map_or(apiservice::CUSTOM_PRIORITY, |(_, p)| *p);
                described.push((remote.clone(), priority));
            }
        }
        Discovery::new(in_priority_order(described)).with_stale(aggregated.stale.clone())
    }

    /// Hands the group-versions of `aggregated` to other servers (the aggregator's
    /// controller calls it after each pass): requests below their `/apis/<group>/<version>`
    /// are proxied, and discovery lists the resources their servers serve.
    pub fn set_aggregated(&self, aggregated: Aggregated) {
        let aggregated = Arc::new(aggregated);
        // Replaced under the snapshot's write lock, so that a concurrent `set_custom` sees it
        // (it builds its snapshot outside the lock, then checks).
        let mut served = self
            .served
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let current = served.clone();
        let openapi = current.openapi.with_remote(aggregated.openapi.clone());
        let openapi_v2 = if aggregated.openapi_documents == current.aggregated.openapi_documents {
            current.openapi_v2.clone()
        } else {
            Self::openapi_v2(&self.version, &openapi, &aggregated)
        };
        *served = Arc::new(Served {
            resources: current.resources.clone(),
            index: current.index.clone(),
            discovery: Self::discovery_of(&current.resources, &aggregated),
            types: current.types.clone(),
            openapi,
            openapi_v2,
            aggregated,
        });
    }

    /// The current snapshot of what is served.
    pub(crate) fn served(&self) -> Arc<Served<S>> {
        self.served
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Serves `custom` resources (from now on, in place of the custom resources served
    /// before) beside the built-in ones, with `documents` as their OpenAPI documents
    /// (group-version documents below `/openapi/v3/`). A custom resource that names a built-in
    /// one is ignored: built-in resources always win. What was passed before and is passed
    /// again (the same `Arc`s) is shared, not made again: only what changed costs anything.
    pub fn set_custom(&self, custom: Vec<Arc<Resource<S>>>, documents: &[Arc<CustomDocument>]) {
        let builtin = ResourceIndex::of(&self.builtin);
        let custom = custom
            .into_iter()
            .filter(|c| {
                builtin
                    .get(&c.info.group, &c.info.version, &c.info.resource)
                    .is_none()
            })
            .collect();
        let aggregated = self.served().aggregated.clone();
        let served = Self::snapshot(
            &self.builtin,
            &self.builtin_openapi,
            &self.builtin_types,
            custom,
            documents,
            aggregated.clone(),
            &self.version,
        );
        let mut current = self
            .served
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // What other servers serve may have changed while this snapshot was built.
        let now = current.aggregated.clone();
        let served = if Arc::ptr_eq(&now, &aggregated) {
            served
        } else {
            let openapi = served.openapi.with_remote(now.openapi.clone());
            let openapi_v2 = if now.openapi_documents == aggregated.openapi_documents {
                served.openapi_v2
            } else {
                Self::openapi_v2(&self.version, &openapi, &now)
            };
            Served {
                discovery: Self::discovery_of(&served.resources, &now),
                openapi,
                openapi_v2,
                aggregated: now,
                ..served
            }
        };
        *current = Arc::new(served);
        drop(current);
        self.changes.send_modify(|count| *count += 1);
    }

    /// A receiver that is told each time what is served changes (custom resources come or go):
    /// controllers that follow the served group-versions wait on it.
    pub fn served_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// The same server, ending its watch streams when `shutdown` is triggered (clients then
    /// resume elsewhere), so that a graceful shutdown does not wait for them.
    pub fn with_shutdown(mut self, shutdown: Shutdown) -> Self {
        self.shutdown = Some(shutdown);
        self
    }

    /// The same server, consulting `gate` for the features of the request path that may change
    /// at run time: `APIResponseCompression` ([`crate::filters::compression`]). The gate's
    /// registry must know those features.
    pub fn with_feature_gate(
        mut self,
        gate: genplane_component_base::featuregate::FeatureGate,
    ) -> Self {
        self.feature_gate = Some(gate);
        self
    }

    /// The same server, authenticating and authorizing every request with `security`
    /// (without it, every request is allowed: for tests and embedding behind another guard).
    pub fn with_security(mut self, security: Security) -> Self {
        self.security = Some(security);
        self
    }

    /// The same server, writing an audit log with `auditor` (its policy decides what).
    pub fn with_audit(mut self, auditor: Auditor) -> Self {
        self.audit = Some(auditor);
        self
    }

    /// The same server, running `chain` on every write instead of upstream's default plugins
    /// (see [`genplane_admission::plugins::resolve`]).
    pub fn with_admission(mut self, chain: genplane_admission::Chain) -> Self {
        self.admission = Arc::new(chain);
        self
    }

    /// The OpenAPI v3 schema of the served kind `api_version`/`kind`, references resolved
    /// (see [`builder::resolved_schema`]); `None` when it is not served.
    pub fn kind_schema(&self, api_version: &str, kind: &str) -> Option<Value> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        // A served kind is in its own group-version document, which holds every schema it
        // refers to: only that document is parsed.
        let own = builder::group_version_path(group, version);
        let document = self.served().openapi.document(&own)?;
        builder::resolved_schema(&[document], group, version, kind)
    }

    /// What admission plugins need of this server, to build a chain with (`None` when it does
    /// not serve Namespaces).
    pub fn admission_context(&self) -> Option<genplane_admission::plugins::Context> {
        self.admission_context.clone()
    }

    /// The same server, enforcing `limits` instead of the defaults.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.in_flight = InFlight::new(limits);
        self.flow_control = flow_control_for(&limits);
        if let Some(metrics) = &self.metrics {
            metrics.report_flow_control(self.flow_control.clone());
        }
        self
    }

    /// API Priority and Fairness, unless the server runs with the in-flight limits alone:
    /// its configuration is replaced as the stored FlowSchemas and levels change
    /// ([`FlowControl::configure`]).
    pub fn flow_control(&self) -> Option<&Arc<FlowControl>> {
        self.flow_control.as_ref()
    }

    /// The same server, recording request metrics in `metrics` and reporting the number of
    /// stored objects of each resource (as its storage counts them).
    pub fn with_metrics(mut self, metrics: ApiMetrics) -> Self {
        metrics.report_flow_control(self.flow_control.clone());
        let mut seen = Vec::new();
        for resource in &self.builtin {
            let name = resource.info.group_resource().to_string();
            if seen.contains(&name) {
                continue;
            }
            let Some(store) = resource.store() else {
                continue;
            };
            let storage = store.shared_storage();
            metrics.count_objects(name.clone(), move || storage.object_count());
            seen.push(name);
        }
        self.metrics = Some(metrics);
        self
    }

    /// The served resources, built-in and custom, at this moment.
    pub fn resources(&self) -> Vec<Arc<Resource<S>>> {
        self.served().resources.clone()
    }

    /// The served resource a request names, at this moment.
    pub(crate) fn served_resource(&self, info: &RequestInfo) -> Option<Arc<Resource<S>>> {
        self.served().find(info).cloned()
    }
}
