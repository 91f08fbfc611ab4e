//! The API server's request handling: the ops endpoints, `/version`, discovery, and the
//! resource handlers for every served resource.

use std::sync::Arc;

use genplane_api::catalog::ResourceInfo;
use genplane_api::openapi::ServedResource;
use genplane_apimachinery::errors::{ApiError, Status};
use genplane_component_base::http::OpsHandler;
use genplane_component_base::version::{BuildInfo, KUBERNETES_VERSION};
use genplane_registry::{CatalogStrategy, Store};
use genplane_storage::Storage;
use hyper::body::Incoming;
use hyper::header::ACCEPT;
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};

use crate::body::ResponseBody;
use crate::discovery::{Discovery, ResourceDescription, SubresourceDescription};
use crate::handlers::{self, Ctx, Query, error_response};
use crate::negotiation::{self, Capabilities, Format, Negotiated, Target};
use crate::openapi::OpenApiV3;
use crate::request_info::{self, RequestInfo};

/// A served resource: its catalog entry, its store, and the stores of its subresources.
pub struct Resource<S: Storage> {
    /// The catalog entry.
    pub info: &'static ResourceInfo,
    /// The store.
    pub store: Store<S>,
    /// The stores of subresources with rules of their own (`status`, `finalize`), by name.
    pub subresources: Vec<(&'static str, Store<S>)>,
}

impl<S: Storage> std::fmt::Debug for Resource<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resource")
            .field("resource", &self.info.resource)
            .finish_non_exhaustive()
    }
}

impl<S: Storage> Resource<S> {
    /// The built-in resource `info`, stored in `storage`, with its subresources.
    pub fn builtin(info: &'static ResourceInfo, storage: Arc<S>) -> Self {
        let strategy = CatalogStrategy::new(info);
        let subresources = info
            .subresources
            .iter()
            .filter_map(|sub| {
                let strategy = strategy.subresource(sub.name)?;
                Some((sub.name, Store::new(storage.clone(), Arc::new(strategy))))
            })
            .collect();
        Self {
            info,
            store: Store::new(storage, Arc::new(strategy)),
            subresources,
        }
    }
}

/// Answers API requests.
#[derive(Debug)]
pub struct ApiServer<S: Storage> {
    resources: Vec<Resource<S>>,
    discovery: Discovery,
    openapi: OpenApiV3,
    version: Value,
    server_address: String,
    ops: Option<OpsHandler>,
}

fn describe(info: &ResourceInfo) -> ResourceDescription {
    let strings = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    ResourceDescription {
        group: info.group.to_owned(),
        version: info.version.to_owned(),
        kind: info.kind.to_owned(),
        resource: info.resource.to_owned(),
        singular: info.singular.to_owned(),
        short_names: strings(info.short_names),
        namespaced: info.namespaced,
        verbs: strings(info.verbs),
        categories: strings(info.categories),
        subresources: info
            .subresources
            .iter()
            .map(|s| SubresourceDescription {
                name: s.name.to_owned(),
                kind: s.kind.to_owned(),
                verbs: strings(s.verbs),
            })
            .collect(),
    }
}

/// What the OpenAPI documents describe of a resource: it and its served subresources.
fn served<S: Storage>(resource: &Resource<S>) -> ServedResource {
    ServedResource {
        info: resource.info,
        subresources: resource
            .info
            .subresources
            .iter()
            .filter(|s| {
                resource
                    .subresources
                    .iter()
                    .any(|(name, _)| *name == s.name)
            })
            .collect(),
    }
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

fn not_found() -> ApiError {
    Status::failure(
        genplane_apimachinery::errors::StatusReason::NotFound,
        "the server could not find the requested resource",
    )
    .into()
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
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
        let discovery = Discovery::new(resources.iter().map(|r| describe(r.info)).collect());
        let openapi = OpenApiV3::new(&resources.iter().map(served).collect::<Vec<_>>());
        Self {
            resources,
            discovery,
            openapi,
            version: version_info(build),
            server_address: server_address.to_owned(),
            ops,
        }
    }

    /// Answers one request.
    pub async fn handle(&self, request: Request<Incoming>) -> Response<ResponseBody> {
        if let Some(ops) = &self.ops
            && let Some(answer) = ops.handle(&request).await
        {
            let (parts, body) = answer.into_parts();
            let bytes = http_body_util::BodyExt::collect(body)
                .await
                .map(|c| c.to_bytes())
                .unwrap_or_default();
            return Response::from_parts(parts, ResponseBody::full(bytes));
        }
        let (parts, body) = request.into_parts();
        let info = request_info::parse(parts.method.as_str(), parts.uri.path(), parts.uri.query());
        let result = if info.is_resource_request {
            self.resource(&info, &parts, body).await
        } else {
            self.non_resource(&info, &parts)
        };
        result.unwrap_or_else(|e| error_response(&e))
    }

    fn non_resource(
        &self,
        info: &RequestInfo,
        parts: &hyper::http::request::Parts,
    ) -> Result<Response<ResponseBody>, ApiError> {
        if info.verb != "get" && info.verb != "head" {
            return Err(not_found());
        }
        let accept = parts.headers.get(ACCEPT).and_then(|v| v.to_str().ok());
        let json = Negotiated {
            format: Format::Json,
            target: Target::Object,
        };
        let segments: Vec<&str> = info
            .path
            .trim_matches('/')
            .split('/')
            .filter(|s| !s.is_empty())
            .collect();
        let (document, negotiated) = match segments.as_slice() {
            ["openapi", "v3", rest @ ..] => {
                return self.openapi.handle(
                    &rest.join("/"),
                    parts.uri.query(),
                    &parts.headers,
                    info.verb == "head",
                );
            }
            ["version"] => (self.version.clone(), json),
            [root @ ("api" | "apis")] => {
                let negotiated = negotiation::negotiate(
                    accept,
                    Capabilities {
                        aggregated_discovery: true,
                        ..Capabilities::default()
                    },
                )?;
                let core = *root == "api";
                let document = match negotiated.target {
                    Target::GroupDiscoveryList(version) => self.discovery.aggregated(core, version),
                    _ if core => self.discovery.api_versions(&self.server_address),
                    _ => self.discovery.api_group_list(),
                };
                (document, negotiated)
            }
            ["api", version] => (
                self.discovery
                    .api_resource_list("", version)
                    .ok_or_else(not_found)?,
                json,
            ),
            ["apis", group] => (self.discovery.api_group(group).ok_or_else(not_found)?, json),
            ["apis", group, version] => (
                self.discovery
                    .api_resource_list(group, version)
                    .ok_or_else(not_found)?,
                json,
            ),
            _ => return Err(not_found()),
        };
        Ok(handlers::respond(
            StatusCode::OK,
            &document,
            &negotiated,
            &[],
        ))
    }

    /// Admission before a write: NamespaceLifecycle.
    async fn admit(
        &self,
        resource: &Resource<S>,
        request: &RequestInfo,
        verb: &str,
    ) -> Result<(), ApiError> {
        let namespaces = self
            .resources
            .iter()
            .find(|r| r.info.group.is_empty() && r.info.resource == "namespaces");
        match (verb, namespaces) {
            ("create", Some(namespaces)) if resource.info.namespaced => {
                // The name is in the body; the check names the resource only.
                crate::admission::namespace_accepts_creates(
                    &namespaces.store,
                    &request.namespace,
                    &resource.info.group_resource(),
                    "",
                )
                .await
            }
            ("delete", _)
                if resource.info.group.is_empty() && resource.info.resource == "namespaces" =>
            {
                crate::admission::namespace_may_be_deleted(&request.name)
            }
            _ => Ok(()),
        }
    }

    async fn resource(
        &self,
        info: &RequestInfo,
        parts: &hyper::http::request::Parts,
        body: Incoming,
    ) -> Result<Response<ResponseBody>, ApiError> {
        let resource = self
            .resources
            .iter()
            .find(|r| {
                r.info.group == info.api_group
                    && r.info.version == info.api_version
                    && r.info.resource == info.resource
            })
            .ok_or_else(not_found)?;
        // Subresources with rules of their own are served by their own store; others
        // (serviceaccounts/token) are not served yet, and are not found as any unknown one.
        let (store, verbs) = if info.subresource.is_empty() {
            (&resource.store, resource.info.verbs)
        } else {
            let store = resource
                .subresources
                .iter()
                .find(|(name, _)| *name == info.subresource)
                .map(|(_, store)| store);
            let verbs = resource
                .info
                .subresources
                .iter()
                .find(|s| s.name == info.subresource)
                .map(|s| s.verbs);
            match (store, verbs) {
                (Some(store), Some(verbs)) if info.parts.len() == 3 => (store, verbs),
                _ => return Err(not_found()),
            }
        };
        if info.parts.len() > 3 {
            return Err(not_found());
        }
        // A namespaced object needs a namespace in its path; a cluster-scoped one has none.
        if (resource.info.namespaced
            && info.namespace.is_empty()
            && !info.name.is_empty()
            && info.parts.len() > 1)
            || (!resource.info.namespaced
                && !info.namespace.is_empty()
                && info.resource != "namespaces")
        {
            return Err(not_found());
        }
        // Across all namespaces, a namespaced resource can only be listed and watched.
        if resource.info.namespaced
            && info.namespace.is_empty()
            && !matches!(info.verb.as_str(), "list" | "watch")
        {
            return Err(not_found());
        }
        let namespace = if resource.info.namespaced {
            info.namespace.clone()
        } else {
            String::new()
        };
        let request = RequestInfo {
            namespace,
            ..info.clone()
        };
        let verb = request.verb.as_str();
        if !verbs.contains(&verb) {
            return Err(Status::method_not_supported(&resource.info.group_resource(), verb).into());
        }
        self.admit(resource, &request, verb).await?;
        let ctx = Ctx {
            info: resource.info,
            store,
            request: &request,
            query: Query::parse(parts.uri.query()),
            headers: &parts.headers,
            now: now(),
        };
        match verb {
            "get" => handlers::get(&ctx).await,
            "list" => handlers::list(&ctx).await,
            "watch" => handlers::watch(&ctx).await,
            "create" => handlers::create(&ctx, body).await,
            "update" => handlers::update(&ctx, body).await,
            "patch" => handlers::patch(&ctx, body).await,
            "delete" => handlers::delete(&ctx, body).await,
            "deletecollection" => handlers::delete_collection(&ctx, body).await,
            other => {
                Err(Status::method_not_supported(&resource.info.group_resource(), other).into())
            }
        }
    }
}
