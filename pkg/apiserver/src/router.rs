//! The router: which answer a request gets once the filters let it through — the ops
//! endpoints, the paths that are not resources (discovery, OpenAPI, `/version`, OIDC
//! discovery), and the handlers of every served resource (one file per verb in `handlers/`;
//! the kinds that are never stored, reviews and TokenRequest, included: see
//! [`crate::answer`]). Scope is part of the route: a cluster-scoped resource exists only
//! without a `namespaces/<ns>/` prefix, a namespaced object only with it.

use genplane_admission::BoxFuture;
use genplane_api::catalog::ResourceDescription;
use genplane_apimachinery::errors::{ApiError, Status, StatusDetails, StatusReason};
use genplane_authentication::UserInfo;
use std::sync::Arc;

use genplane_storage::Storage;
use hyper::header::{ACCEPT, CONTENT_TYPE};
use hyper::{Request, Response, StatusCode};
use serde_json::Value;

use crate::answer::StoredObjects;
use crate::body::{RequestBody, ResponseBody};
use crate::handlers::{self, Ctx, Query, error_response};
use crate::negotiation::{self, Capabilities, Format, Negotiated, Target};
use crate::request_info::RequestInfo;
use crate::server::ApiServer;

/// Whether a request's path has the shape of a resource of this scope. Scope is part of the
/// route, as upstream registers it: a cluster-scoped resource (Namespaces, ClusterRoles, CRDs,
/// cluster-scoped custom resources and reviews) exists only without a `namespaces/<ns>/`
/// prefix (which would otherwise have been authorized as a namespaced request in `<ns>`); a
/// namespaced resource exists only with it, except for lists and watches across all
/// namespaces.
fn in_scope(namespaced: bool, info: &RequestInfo) -> bool {
    if !namespaced {
        return !info.namespaced_path;
    }
    info.namespaced_path
        || (info.parts.len() == 1 && matches!(info.verb.as_str(), "list" | "watch"))
}

/// Whether the objects of a resource have paths of their own: not when it is only created.
fn has_item_path(resource: &ResourceDescription) -> bool {
    !resource.subresources.is_empty()
        || resource
            .verbs
            .iter()
            .any(|v| matches!(v.as_str(), "get" | "update" | "patch" | "delete"))
}

fn not_found() -> ApiError {
    Status::failure(
        StatusReason::NotFound,
        "the server could not find the requested resource",
    )
    .into()
}

/// The 404 of a path nothing serves below `/api` or a served group's `/apis/<group>`: there
/// upstream's go-restful web services own the path, and their service error
/// (`NewGenericServerResponse`) carries empty details, `"details":{}`. Elsewhere upstream's
/// not-found handler answers [`not_found`], without details.
fn not_found_in_web_service() -> ApiError {
    let mut error = not_found();
    error.0.details = Some(StatusDetails::default());
    error
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

impl<S: Storage> ApiServer<S> {
    /// The 404 of `path`, which nothing serves: [`not_found_in_web_service`] below `/api` and
    /// below a served group's `/apis/<group>`, else [`not_found`].
    fn not_found_at(&self, path: &str) -> ApiError {
        let mut segments = path.trim_matches('/').split('/');
        let in_web_service = match (segments.next(), segments.next()) {
            (Some("api"), Some(_)) => true,
            (Some("apis"), Some(group)) if !group.is_empty() => {
                self.served().discovery.api_group(group).is_some()
            }
            _ => false,
        };
        if in_web_service {
            not_found_in_web_service()
        } else {
            not_found()
        }
    }

    /// Routes an admitted request made by `user`: the ops endpoints, then the other paths
    /// that are not resources (discovery, OpenAPI, `/version`, OIDC discovery), then resources.
    pub(crate) async fn route(
        &self,
        info: &RequestInfo,
        parts: hyper::http::request::Parts,
        body: RequestBody,
        user: &UserInfo,
    ) -> Response<ResponseBody> {
        if let Some(ops) = &self.ops {
            let probe = Request::from_parts(parts, ());
            if let Some(answer) = ops.handle(&probe).await {
                let (parts, body) = answer.into_parts();
                let bytes = http_body_util::BodyExt::collect(body)
                    .await
                    .map(|c| c.to_bytes())
                    .unwrap_or_default();
                return Response::from_parts(parts, ResponseBody::full(bytes));
            }
            let (parts, ()) = probe.into_parts();
            return self.route_api(info, parts, body, user).await;
        }
        self.route_api(info, parts, body, user).await
    }

    async fn route_api(
        &self,
        info: &RequestInfo,
        parts: hyper::http::request::Parts,
        body: RequestBody,
        user: &UserInfo,
    ) -> Response<ResponseBody> {
        // A group-version an APIService hands to another server is that server's.
        // Only the target is held, not the snapshot (a proxied watch may last long).
        let target = self
            .served()
            .aggregated
            .targets
            .of_path(parts.uri.path())
            .cloned();
        if let Some(target) = target {
            return crate::aggregation::proxy(&target, parts, body, user).await;
        }
        if !info.is_resource_request {
            return self
                .non_resource(info, &parts)
                .unwrap_or_else(|e| error_response(&e));
        }
        let accept = parts.headers.get(ACCEPT).and_then(|v| v.to_str().ok());
        let accept = accept.map(str::to_owned);
        self.resource(info, &parts, body, user)
            .await
            .unwrap_or_else(|e| handlers::error_response_for(&e, accept.as_deref()))
    }

    fn non_resource(
        &self,
        info: &RequestInfo,
        parts: &hyper::http::request::Parts,
    ) -> Result<Response<ResponseBody>, ApiError> {
        let not_found = || self.not_found_at(&info.path);
        if info.verb != "get" && info.verb != "head" {
            return Err(not_found());
        }
        let accept = parts.headers.get(ACCEPT).and_then(|v| v.to_str().ok());
        let json = Negotiated {
            format: Format::Json,
            target: Target::Object,
        };
        let served = self.served();
        let segments: Vec<&str> = info
            .path
            .trim_matches('/')
            .split('/')
            .filter(|s| !s.is_empty())
            .collect();
        let (document, negotiated) = match segments.as_slice() {
            ["debug", "api_priority_and_fairness", what] => {
                let dump = self
                    .flow_control
                    .as_ref()
                    .and_then(|f| f.dump(what, parts.uri.query()))
                    .ok_or_else(not_found)?;
                let mut response = Response::new(ResponseBody::full(dump));
                response.headers_mut().insert(
                    hyper::header::CONTENT_TYPE,
                    hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
                );
                return Ok(response);
            }
            ["openapi", "v3", rest @ ..] => {
                return served.openapi.handle(
                    &rest.join("/"),
                    parts.uri.query(),
                    &parts.headers,
                    info.verb == "head",
                );
            }
            ["openapi", "v2"] => {
                return served
                    .openapi_v2
                    .handle(&parts.headers, info.verb == "head");
            }
            [".well-known", "openid-configuration"] | ["openid", "v1", "jwks"] => {
                let oidc = self
                    .security
                    .as_ref()
                    .and_then(|s| s.oidc.as_ref())
                    .ok_or_else(not_found)?;
                let (bytes, content_type) = if segments[0] == "openid" {
                    (oidc.keys.clone(), "application/jwk-set+json")
                } else {
                    (oidc.configuration.clone(), "application/json")
                };
                let mut response = Response::new(ResponseBody::full(bytes));
                response.headers_mut().insert(
                    CONTENT_TYPE,
                    hyper::header::HeaderValue::from_static(content_type),
                );
                response.headers_mut().insert(
                    hyper::header::CACHE_CONTROL,
                    hyper::header::HeaderValue::from_static("public, max-age=3600"),
                );
                return Ok(response);
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
                    Target::GroupDiscoveryList(version) => {
                        return Ok(served.discovery.aggregated_answer(
                            core,
                            version,
                            &negotiated,
                            &parts.headers,
                        ));
                    }
                    _ if core => served.discovery.api_versions(&self.server_address),
                    _ => served.discovery.api_group_list(),
                };
                (document, negotiated)
            }
            ["api", version] => (
                served
                    .discovery
                    .api_resource_list("", version)
                    .ok_or_else(not_found)?,
                json,
            ),
            ["apis", group] => (
                served.discovery.api_group(group).ok_or_else(not_found)?,
                json,
            ),
            ["apis", group, version] => (
                served
                    .discovery
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
            None,
            &[],
        ))
    }

    async fn resource(
        &self,
        info: &RequestInfo,
        parts: &hyper::http::request::Parts,
        body: RequestBody,
        user: &UserInfo,
    ) -> Result<Response<ResponseBody>, ApiError> {
        // The request keeps its resource and its kinds' type model, not the whole snapshot (nor
        // every type model): a watch that outlives a change of what is served must not keep
        // the old snapshot's documents.
        let (resource, models) = {
            let served = self.served();
            let Some(resource) = served.find(info) else {
                return Err(self.not_found_at(&info.path));
            };
            (resource.clone(), served.types.clone())
        };
        if !in_scope(resource.info.namespaced, info) || info.parts.len() > 3 {
            return Err(not_found_in_web_service());
        }
        // A resource that is only created (a review) has no path of its objects, as upstream
        // registers none.
        if info.parts.len() > 1 && !has_item_path(&resource.info) {
            return Err(not_found_in_web_service());
        }
        // Subresources with rules of their own are served by their own store, answered ones
        // (`serviceaccounts/token`) by their answer; others are not found as any unknown one.
        let (backing, verbs) = if info.subresource.is_empty() {
            (&resource.backing, &resource.info.verbs)
        } else {
            let backing = resource
                .subresources
                .iter()
                .find(|(name, _)| *name == info.subresource)
                .map(|(_, backing)| backing);
            let verbs = resource
                .info
                .subresources
                .iter()
                .find(|s| s.name == info.subresource)
                .map(|s| &s.verbs);
            match (backing, verbs) {
                (Some(backing), Some(verbs)) if info.parts.len() == 3 => (backing, verbs),
                _ => return Err(not_found_in_web_service()),
            }
        };
        // A cluster-scoped resource's request has no namespace (a copy only when the path
        // gave one).
        let request = if resource.info.namespaced || info.namespace.is_empty() {
            std::borrow::Cow::Borrowed(info)
        } else {
            std::borrow::Cow::Owned(RequestInfo {
                namespace: String::new(),
                ..info.clone()
            })
        };
        let request: &RequestInfo = &request;
        let verb = request.verb.as_str();
        // A POST names its object in the body: only collections (and subresources) take it.
        if verb == "create" && !request.name.is_empty() && request.subresource.is_empty() {
            return Err(
                Status::method_not_supported(&resource.info.group_resource(), "create").into(),
            );
        }
        if !verbs.iter().any(|v| v == verb) {
            return Err(Status::method_not_supported(&resource.info.group_resource(), verb).into());
        }
        let subresource_kind = resource.info.subresource_body(&request.subresource);
        // Only writes read the type model (field ownership, patches, apply): a read does not
        // make a custom resources' model that was not made yet.
        let types = if matches!(verb, "get" | "list" | "watch") {
            models.builtin()
        } else {
            models.of_resource(&resource)
        };
        drop(models);
        let ctx = Ctx {
            info: &resource.info,
            body: subresource_kind.as_ref().unwrap_or(&resource.info),
            backing,
            request,
            query: Query::parse(parts.uri.query()),
            headers: &parts.headers,
            now: now(),
            shutdown: self.shutdown.as_ref(),
            metrics: self.metrics.as_ref(),
            types: &types,
            user,
            security: self.security.as_ref(),
            objects: self,
            escalation: self
                .security
                .as_ref()
                .and_then(|s| s.escalation.as_ref())
                .filter(|_| request.subresource.is_empty())
                .and_then(|checks| {
                    checks.check_for(
                        &resource.info.group,
                        &resource.info.resource,
                        &request.namespace,
                        user,
                    )
                }),
            admission: (!self.admission.is_empty() && !matches!(verb, "get" | "list" | "watch"))
                .then(|| genplane_registry::Admission {
                    chain: self.admission.clone(),
                    request: Arc::new(genplane_admission::Request {
                        user: user.clone(),
                        kind: resource.info.gvk(),
                        resource: genplane_apimachinery::schema::GroupVersionResource::new(
                            &resource.info.group,
                            &resource.info.version,
                            &resource.info.resource,
                        ),
                        subresource: request.subresource.clone(),
                        dry_run: parts.uri.query().is_some_and(|q| {
                            form_urlencoded::parse(q.as_bytes())
                                .any(|(k, v)| k == "dryRun" && v == "All")
                        }),
                        warnings: genplane_admission::Warnings::default(),
                        audit_annotations: genplane_admission::AuditAnnotations::default(),
                        authorizer: self.security.as_ref().map(|s| s.authorizer.clone()),
                    }),
                }),
        };
        // Each handler's future is boxed: the router's own future then holds none of their
        // states, so moving it (into the filter chain's box) copies a little, and each request
        // allocates room for its own handler only.
        let answer = match verb {
            "get" => Box::pin(handlers::get(&ctx)).await,
            "list" => Box::pin(handlers::list(&ctx)).await,
            "watch" => Box::pin(handlers::watch(&ctx)).await,
            "create" => Box::pin(handlers::create(&ctx, body)).await,
            "update" => Box::pin(handlers::update(&ctx, body)).await,
            "patch" => Box::pin(handlers::patch(&ctx, body)).await,
            "delete" => Box::pin(handlers::delete(&ctx, body)).await,
            "deletecollection" => Box::pin(handlers::delete_collection(&ctx, body)).await,
            other => {
                Err(Status::method_not_supported(&resource.info.group_resource(), other).into())
            }
        };
        // what admission plugins annotated goes into the request's audit event
        if let (Some(admission), Some(record)) = (
            &ctx.admission,
            parts.extensions.get::<genplane_audit::AuditRecord>(),
        ) {
            for annotation in admission.request.audit_annotations.take() {
                if !annotation.request_level || record.records_request_body() {
                    record.annotate(&annotation.key, &annotation.value);
                }
            }
        }
        answer
    }
}

/// The server's stored built-in objects, for answers that read them (from the store, not the
/// watch cache).
impl<S: Storage> StoredObjects for ApiServer<S> {
    fn get<'a>(
        &'a self,
        group: &'a str,
        resource: &'a str,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Option<Result<Value, ApiError>>> {
        Box::pin(async move {
            let store = self
                .builtin
                .iter()
                .find(|r| r.info.group == group && r.info.resource == resource)?
                .store()?;
            Some(store.get(namespace, name, None).await)
        })
    }
}
