//! The API server's request handling: the ops endpoints, `/version`, discovery, and the
//! resource handlers for every served resource.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use genplane_api::catalog::ResourceInfo;
use genplane_api::openapi::ServedResource;
use genplane_apimachinery::errors::{ApiError, Status, StatusReason};
use genplane_apimachinery::schema::GroupResource;
use genplane_audit::{
    AuditRecord, Auditor, RequestAttributes as AuditAttributes,
    ResourceAttributes as AuditResource, SourceIps,
};
use genplane_authentication::UserInfo;
use genplane_component_base::http::{OpsHandler, PeerCertificates, RemoteAddr};
use genplane_component_base::shutdown::Shutdown;
use genplane_component_base::version::{BuildInfo, KUBERNETES_VERSION};
use genplane_registry::{CatalogStrategy, Store};
use genplane_storage::Storage;
use hyper::body::Incoming;
use hyper::header::{ACCEPT, CONTENT_TYPE, RETRY_AFTER};
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::authz::{self, Security};
use crate::body::{RequestBody, ResponseBody};
use crate::discovery::Discovery;
use crate::handlers::{self, Ctx, Query, error_response};
use crate::kind::ServedKind;
use crate::metrics::{ApiMetrics, GaugeGuard, RequestKind};
use crate::negotiation::{self, Capabilities, Format, Negotiated, Target};
use crate::openapi::{OpenApiV2, OpenApiV3};
use crate::request_info::{self, RequestInfo};

/// A served resource: its kind, its store, and the stores of its subresources.
pub struct Resource<S: Storage> {
    /// The kind: description and behaviour.
    pub info: Arc<ServedKind>,
    /// The store.
    pub store: Store<S>,
    /// The stores of subresources with rules of their own (`status`, `finalize`, `scale`), by
    /// name.
    pub subresources: Vec<(String, Store<S>)>,
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
                Some((
                    sub.name.to_owned(),
                    Store::new(storage.clone(), Arc::new(strategy)),
                ))
            })
            .collect();
        Self {
            info: Arc::new(ServedKind::builtin(info)),
            store: Store::new(storage, Arc::new(strategy)),
            subresources,
        }
    }

    /// The built-in resource `info` with `strategy` in place of the catalog's for the resource
    /// itself (its subresources keep theirs).
    pub fn builtin_with(
        info: &'static ResourceInfo,
        storage: Arc<S>,
        strategy: Arc<dyn genplane_registry::Strategy>,
    ) -> Self {
        let mut resource = Self::builtin(info, storage.clone());
        resource.store = Store::new(storage, strategy);
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
            store,
            subresources,
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

/// Self-protection limits: `--max-requests-inflight`, `--max-mutating-requests-inflight` and
/// `--request-timeout`. Watches count against neither the in-flight limits nor the timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Read-only requests answered at once; more get 429. 0: no limit.
    pub max_read_only: usize,
    /// Mutating requests answered at once; more get 429. 0: no limit.
    pub max_mutating: usize,
    /// How long a request may take before it is answered 504 (a client's shorter `timeout`
    /// query parameter wins).
    pub request_timeout: Duration,
}

impl Default for Limits {
    /// Upstream's defaults: 400 read-only, 200 mutating, one minute.
    fn default() -> Self {
        Self {
            max_read_only: 400,
            max_mutating: 200,
            request_timeout: Duration::from_secs(60),
        }
    }
}

/// The semaphores enforcing [`Limits`].
#[derive(Debug)]
struct Admission {
    limits: Limits,
    read_only: Option<Arc<Semaphore>>,
    mutating: Option<Arc<Semaphore>>,
}

impl Admission {
    fn new(limits: Limits) -> Self {
        let semaphore = |n: usize| (n > 0).then(|| Arc::new(Semaphore::new(n)));
        Self {
            read_only: semaphore(limits.max_read_only),
            mutating: semaphore(limits.max_mutating),
            limits,
        }
    }

    /// A permit for one request, or `Err` when the limit of its kind is reached.
    fn try_acquire(&self, mutating: bool) -> Result<Option<OwnedSemaphorePermit>, ()> {
        let semaphore = if mutating {
            &self.mutating
        } else {
            &self.read_only
        };
        match semaphore {
            None => Ok(None),
            Some(s) => s.clone().try_acquire_owned().map(Some).map_err(drop),
        }
    }
}

/// What is served at one moment: the resources with their discovery, OpenAPI documents and type
/// model. Replaced as a whole when custom resources come or go; a request works with the
/// snapshot it started with.
#[derive(Debug)]
struct Served<S: Storage> {
    resources: Vec<Arc<Resource<S>>>,
    discovery: Discovery,
    /// The type model of the served kinds (list/map semantics, patch strategies), read from
    /// the OpenAPI documents, for strategic merge patch and server-side apply.
    types: Arc<genplane_structured::Schema>,
    openapi: OpenApiV3,
    openapi_v2: OpenApiV2,
}

impl<S: Storage> Served<S> {
    /// The resource a request names.
    fn find(&self, info: &RequestInfo) -> Option<&Arc<Resource<S>>> {
        self.resources.iter().find(|r| {
            r.info.group == info.api_group
                && r.info.version == info.api_version
                && r.info.resource == info.resource
        })
    }
}

/// Answers API requests.
#[derive(Debug)]
pub struct ApiServer<S: Storage> {
    /// The built-in resources, always served first.
    builtin: Vec<Arc<Resource<S>>>,
    /// The OpenAPI documents of the built-in resources.
    builtin_documents: Vec<genplane_api::openapi::Document>,
    served: std::sync::RwLock<Arc<Served<S>>>,
    version: Value,
    server_address: String,
    ops: Option<OpsHandler>,
    admission: Admission,
    metrics: Option<ApiMetrics>,
    shutdown: Option<Shutdown>,
    security: Option<Security>,
    audit: Option<Auditor>,
    /// NamespaceLifecycle, checked by the stores on every create (when Namespaces are served).
    namespace_lifecycle: Option<genplane_registry::AdmitCreation>,
}

/// Whether a request-info verb writes.
fn is_mutating(verb: &str) -> bool {
    matches!(
        verb,
        "create" | "update" | "patch" | "delete" | "deletecollection"
    )
}

/// The deadline a request asks for with its `timeout` query parameter, if any.
fn requested_timeout(query: Option<&str>) -> Result<Option<Duration>, ApiError> {
    let Some(value) = query.and_then(|q| {
        form_urlencoded::parse(q.as_bytes())
            .find(|(k, _)| k == "timeout")
            .map(|(_, v)| v.into_owned())
    }) else {
        return Ok(None);
    };
    if value.is_empty() {
        return Ok(None);
    }
    genplane_apimachinery::duration::parse(&value)
        .map(Some)
        .map_err(|_| Status::bad_request("invalid timeout specified in the request URL").into())
}

/// Observes a watch's duration when its stream ends and holds its watcher registration.
struct WatchGuard {
    metrics: ApiMetrics,
    kind: RequestKind,
    started: Instant,
    _watcher: Option<GaugeGuard>,
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        self.metrics.observe(&self.kind, 200, self.started);
    }
}

/// The metric labels of a resource request.
fn request_kind(info: &RequestInfo, parts: &hyper::http::request::Parts) -> RequestKind {
    let apply = parts
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("application/apply-patch"));
    let dry_run = parts.uri.query().is_some_and(|q| {
        form_urlencoded::parse(q.as_bytes()).any(|(k, v)| k == "dryRun" && v == "All")
    });
    RequestKind::new(
        &info.verb,
        parts.method.as_str(),
        apply,
        dry_run,
        &info.api_group,
        &info.api_version,
        &info.resource,
        &info.subresource,
        &info.namespace,
        &info.name,
    )
}

/// The answer over the in-flight limit, as upstream gives it.
fn too_many_requests() -> Response<ResponseBody> {
    let mut response = error_response(
        &Status::too_many_requests("Too many requests, please try again later.", 1).into(),
    );
    response
        .headers_mut()
        .insert(RETRY_AFTER, hyper::header::HeaderValue::from_static("1"));
    response
}

/// The answer past the request timeout. The request may still complete.
fn timed_out() -> Response<ResponseBody> {
    error_response(
        &Status::failure(
            StatusReason::Timeout,
            "Timeout: request did not complete within requested timeout - context deadline exceeded",
        )
        .into(),
    )
}

/// The audit ID header, on requests (a caller's own ID) and on every answer.
const AUDIT_ID: &str = "audit-id";

/// The most of an unread HTTP/1.1 request body read (and dropped) so that its client reads the
/// answer: a little more than the largest body a request may have.
pub const DRAIN_BYTES: usize = 4 * 1024 * 1024;
/// The longest an unread HTTP/1.1 request body is read for before the answer.
pub const DRAIN_TIME: Duration = Duration::from_secs(5);

/// How long the drain of an unread body waits for more of it before it gives up.
const DRAIN_PAUSE: Duration = Duration::from_millis(500);

/// Reads and drops what is left of a request body, within [`DRAIN_BYTES`] and [`DRAIN_TIME`],
/// as long as the client keeps sending (a pause of [`DRAIN_PAUSE`] ends it).
async fn drain(body: Incoming) {
    let mut body = body;
    let read = async {
        let mut total = 0usize;
        while total <= DRAIN_BYTES {
            let next = http_body_util::BodyExt::frame(&mut body);
            match tokio::time::timeout(DRAIN_PAUSE, next).await {
                Ok(Some(Ok(frame))) => {
                    total += frame.data_ref().map_or(0, bytes::Bytes::len);
                }
                _ => return,
            }
        }
    };
    let _ = tokio::time::timeout(DRAIN_TIME, read).await;
}

/// An unread request body kept until the answer has been sent (HTTP/2: dropping it ends the
/// stream, which must come after the answer).
struct Holding {
    _body: Incoming,
}

/// Records a request's body in its audit record: the object (JSON, YAML or protobuf as the
/// URL's kind), or the patch.
fn record_request_body(record: &AuditRecord, info: &RequestInfo, content_type: &str, bytes: &[u8]) {
    if info.verb == "patch" {
        record.set_request_patch(bytes);
        return;
    }
    if content_type.starts_with("application/json") {
        record.set_request_object_json(bytes);
        return;
    }
    if let Some(kind) = body_kind(info)
        && let Ok((object, _)) = crate::request_body::decode_object(
            &ServedKind::builtin(kind),
            Some(content_type),
            Some("Ignore"),
            bytes,
        )
    {
        record.set_request_object(&object);
    }
}

/// The kind of a request's (and its answer's) body.
fn body_kind(info: &RequestInfo) -> Option<&'static ResourceInfo> {
    if info.subresource == "token" {
        return Some(&genplane_api::catalog::TOKEN_REQUEST);
    }
    genplane_api::catalog::all()
        .iter()
        .chain(genplane_api::catalog::reviews())
        .find(|r| {
            r.group == info.api_group
                && r.version == info.api_version
                && r.resource == info.resource
        })
}

/// Records an answer's body in its audit record: JSON as it is, protobuf decoded with the
/// schema of its kind (a Status, or the request's kind: an object, or a list for a list
/// request).
fn record_response_body(
    record: &AuditRecord,
    info: &RequestInfo,
    content_type: &str,
    bytes: &[u8],
) {
    use genplane_api::protobuf;
    if content_type.starts_with("application/json") {
        record.set_response_object_json(bytes);
        return;
    }
    if !content_type.starts_with(protobuf::CONTENT_TYPE) {
        return;
    }
    let Ok(envelope) = protobuf::read_envelope(bytes) else {
        return;
    };
    let decoded = if envelope.kind == "Status" {
        protobuf::decode_object(&envelope, &genplane_api::decode::STATUS).ok()
    } else if info.verb == "list" {
        body_kind(info).and_then(|kind| protobuf::decode_list(bytes, kind.schema).ok())
    } else {
        body_kind(info).and_then(|kind| protobuf::decode_object(&envelope, kind.schema).ok())
    };
    if let Some(object) = decoded {
        record.set_response_object(&object);
    }
}

/// Completes a request's audit record with its answer: the status, the answer's object
/// when the level records it, and the end of the request (for a watch, when its stream
/// ends).
fn finish_audit(
    record: Option<AuditRecord>,
    info: &RequestInfo,
    response: Response<ResponseBody>,
) -> Response<ResponseBody> {
    let Some(record) = record else {
        return response;
    };
    record.response_started(response.status().as_u16());
    if let Some(parts) = response.body().held_parts() {
        if record.records_response_body() {
            let content_type = response
                .headers()
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            // Only for the audit log: the answer itself is sent in its parts.
            let whole: Vec<u8> = parts.iter().flat_map(|p| p.iter().copied()).collect();
            record_response_body(&record, info, content_type, &whole);
        }
        record.finish();
        return response;
    }
    if let ResponseBody::Full(_) | ResponseBody::Guarded(..) = response.body()
        && let Some(bytes) = response.body().bytes()
    {
        if record.records_response_body() {
            let content_type = response
                .headers()
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            record_response_body(&record, info, content_type, bytes);
        }
        record.finish();
        return response;
    }
    // A streamed answer: the record completes when the stream ends.
    struct FinishOnDrop(AuditRecord);
    impl Drop for FinishOnDrop {
        fn drop(&mut self) {
            self.0.finish();
        }
    }
    let (parts, body) = response.into_parts();
    Response::from_parts(parts, body.guarded(FinishOnDrop(record)))
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

fn not_found() -> ApiError {
    Status::failure(
        StatusReason::NotFound,
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
        let builtin: Vec<Arc<Resource<S>>> = resources.into_iter().map(Arc::new).collect();
        let builtin_documents = genplane_api::openapi::documents(
            &builtin
                .iter()
                .map(|r| r.served())
                .chain(
                    genplane_api::catalog::reviews()
                        .iter()
                        .map(ResourceInfo::describe)
                        .map(|mut d| {
                            d.subresources.clear();
                            d
                        }),
                )
                .collect::<Vec<_>>(),
        );
        let version = version_info(build);
        let namespace_lifecycle = builtin
            .iter()
            .find(|r| r.info.group.is_empty() && r.info.resource == "namespaces")
            .map(|namespaces| {
                genplane_registry::AdmitCreation(Arc::new(crate::admission::NamespaceLifecycle {
                    namespaces: namespaces.store.clone(),
                }))
            });
        let served = Self::snapshot(
            &builtin,
            &builtin_documents,
            Vec::new(),
            Vec::new(),
            &version,
        );
        Self {
            builtin,
            builtin_documents,
            served: std::sync::RwLock::new(Arc::new(served)),
            version,
            server_address: server_address.to_owned(),
            ops,
            admission: Admission::new(Limits::default()),
            metrics: None,
            shutdown: None,
            security: None,
            audit: None,
            namespace_lifecycle,
        }
    }

    /// What is served: the built-in resources followed by `custom` ones, whose OpenAPI
    /// documents are `custom_documents`.
    fn snapshot(
        builtin: &[Arc<Resource<S>>],
        builtin_documents: &[genplane_api::openapi::Document],
        custom: Vec<Arc<Resource<S>>>,
        custom_documents: Vec<genplane_api::openapi::Document>,
        version: &Value,
    ) -> Served<S> {
        let resources: Vec<Arc<Resource<S>>> = builtin.iter().cloned().chain(custom).collect();
        let reviews = genplane_api::catalog::reviews()
            .iter()
            .map(|info| info.describe());
        let discovery = Discovery::new(
            resources
                .iter()
                .map(|r| r.info.description().clone())
                .chain(reviews)
                .collect(),
        );
        let documents: Vec<_> = builtin_documents
            .iter()
            .cloned()
            .chain(custom_documents)
            .collect();
        let openapi_v2 = OpenApiV2::new(
            &documents,
            version["gitVersion"].as_str().unwrap_or_default(),
        );
        // The documents are built from the same tables as the model, so their extensions
        // always read; should one not, patches of that kind degrade to untyped merging.
        let types = genplane_api::openapi::type_model(&documents).unwrap_or_else(|error| {
            tracing::error!(%error, "reading the type model");
            genplane_structured::Schema::default()
        });
        let openapi = OpenApiV3::from_documents(documents);
        Served {
            resources,
            discovery,
            types: Arc::new(types),
            openapi,
            openapi_v2,
        }
    }

    /// The current snapshot of what is served.
    fn served(&self) -> Arc<Served<S>> {
        self.served
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Serves `custom` resources (from now on, in place of the custom resources served
    /// before) beside the built-in ones, with `documents` as their OpenAPI documents
    /// (group-version documents below `/openapi/v3/`). A custom resource that names a built-in
    /// one is ignored: built-in resources always win.
    pub fn set_custom(
        &self,
        custom: Vec<Resource<S>>,
        documents: Vec<genplane_api::openapi::Document>,
    ) {
        let custom = custom
            .into_iter()
            .filter(|c| {
                !self.builtin.iter().any(|b| {
                    b.info.group == c.info.group
                        && b.info.version == c.info.version
                        && b.info.resource == c.info.resource
                })
            })
            .map(Arc::new)
            .collect();
        let served = Self::snapshot(
            &self.builtin,
            &self.builtin_documents,
            custom,
            documents,
            &self.version,
        );
        *self
            .served
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(served);
    }

    /// The same server, ending its watch streams when `shutdown` is triggered (clients then
    /// resume elsewhere), so that a graceful shutdown does not wait for them.
    pub fn with_shutdown(mut self, shutdown: Shutdown) -> Self {
        self.shutdown = Some(shutdown);
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

    /// The same server, enforcing `limits` instead of the defaults.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.admission = Admission::new(limits);
        self
    }

    /// The same server, recording request metrics in `metrics` and reporting the number of
    /// stored objects of each resource from `count` (given the resource's storage).
    pub fn with_metrics(
        mut self,
        metrics: ApiMetrics,
        count: impl Fn(&Arc<S>) -> Option<usize> + Clone + Send + Sync + 'static,
    ) -> Self {
        let mut seen = Vec::new();
        for resource in &self.builtin {
            let name = resource.info.group_resource().to_string();
            if seen.contains(&name) {
                continue;
            }
            let storage = resource.store.shared_storage();
            let count = count.clone();
            metrics.count_objects(name.clone(), move || count(&storage));
            seen.push(name);
        }
        self.metrics = Some(metrics);
        self
    }

    /// The served resources, built-in and custom, at this moment.
    pub fn resources(&self) -> Vec<Arc<Resource<S>>> {
        self.served().resources.clone()
    }

    /// The audit attributes of a request.
    fn audit_attributes<'a, B>(
        info: &'a RequestInfo,
        request: &'a Request<B>,
        user: &'a UserInfo,
        audit_id: &'a str,
        received_at: SystemTime,
    ) -> AuditAttributes<'a> {
        let header = |name: &str| request.headers().get(name).and_then(|v| v.to_str().ok());
        let uri = request
            .uri()
            .path_and_query()
            .map_or(request.uri().path(), |p| p.as_str());
        AuditAttributes {
            resource: info.is_resource_request.then_some(AuditResource {
                api_group: &info.api_group,
                api_version: &info.api_version,
                resource: &info.resource,
                subresource: &info.subresource,
                namespace: &info.namespace,
                name: &info.name,
            }),
            source_ips: SourceIps {
                forwarded_for: header("x-forwarded-for"),
                real_ip: header("x-real-ip"),
                remote: request.extensions().get::<RemoteAddr>().map(|r| r.0.ip()),
            },
            user_agent: header("user-agent").unwrap_or(""),
            long_running: info.verb == "watch",
            audit_id: Some(audit_id),
            received_at,
            ..AuditAttributes::new(user, &info.verb, uri)
        }
    }

    /// Authentication, then the audit record, impersonation and authorization: who makes the
    /// request and its audit record, or the answer that refuses it.
    fn admit_request<B>(
        &self,
        security: &Security,
        info: &RequestInfo,
        request: &Request<B>,
        audit_id: &str,
        received_at: SystemTime,
    ) -> Result<(UserInfo, Option<AuditRecord>), (ApiError, Option<AuditRecord>)> {
        let peer = request.extensions().get::<PeerCertificates>();
        let authenticated = match security
            .authentication
            .authenticate(request.headers(), peer)
        {
            Ok(user) => user,
            Err(error) => {
                if let Some(audit) = &self.audit {
                    let nobody = UserInfo::default();
                    let mut attempted = Vec::new();
                    if request.headers().contains_key(hyper::header::AUTHORIZATION) {
                        attempted.push("bearer");
                    }
                    if peer.is_some_and(|p| !p.chain().is_empty()) {
                        attempted.push("x509");
                    }
                    audit.failed_authentication(
                        &Self::audit_attributes(info, request, &nobody, audit_id, received_at),
                        &attempted,
                        error.code,
                    );
                }
                return Err((error, None));
            }
        };
        let record = self.audit.as_ref().and_then(|audit| {
            audit.begin(&Self::audit_attributes(
                info,
                request,
                &authenticated,
                audit_id,
                received_at,
            ))
        });
        let user = match crate::impersonation::impersonate(
            request.headers(),
            &authenticated,
            security.authorizer.as_ref(),
        ) {
            Ok(Some(impersonated)) => {
                if let Some(record) = &record {
                    record.set_impersonated_user(&impersonated);
                }
                impersonated
            }
            Ok(None) => authenticated,
            Err(error) => return Err((error, record)),
        };
        let attributes = authz::attributes(info, &user);
        let (decision, reason) = authz::decide(security.authorizer.as_ref(), &attributes);
        let allowed = decision == genplane_authorization::Decision::Allow;
        if let Some(record) = &record {
            record.annotate(
                genplane_audit::DECISION_ANNOTATION,
                if allowed {
                    genplane_audit::DECISION_ALLOW
                } else {
                    genplane_audit::DECISION_FORBID
                },
            );
            if !reason.is_empty() {
                record.annotate(genplane_audit::REASON_ANNOTATION, &reason);
            }
        }
        if !allowed {
            return Err((authz::forbidden(&attributes, &reason), record));
        }
        Ok((user, record))
    }

    /// Answers one request, with its `Audit-ID` header.
    ///
    /// The client always gets to read the answer, even when it is given before the body is
    /// read (a refused request, a body too large): on HTTP/1.1 what is left of the body is
    /// read and dropped first (up to [`DRAIN_BYTES`] within [`DRAIN_TIME`], while the client
    /// keeps sending; the connection closes after a larger one, and a request past its
    /// deadline is answered at once), because a client still sending would otherwise see its
    /// connection reset before it reads; on HTTP/2 the answer is sent first and the stream
    /// ended after it (`RST_STREAM(NO_ERROR)`, as HTTP/2 allows for an unread body). A HEAD
    /// answer carries the headers of the GET answer and no body, on every protocol.
    pub async fn handle(&self, request: Request<Incoming>) -> Response<ResponseBody> {
        let received_at = SystemTime::now();
        let audit_id = request
            .headers()
            .get(AUDIT_ID)
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
            .map_or_else(genplane_audit::new_audit_id, str::to_owned);
        let (parts, body) = request.into_parts();
        let (version, head) = (parts.version, parts.method == hyper::Method::HEAD);
        let (body, mut returned) = crate::body::Unread::new(body);
        let request = Request::from_parts(parts, body);
        let mut response = self.handle_audited(request, &audit_id, received_at).await;
        if let Ok(value) = hyper::header::HeaderValue::from_str(&audit_id) {
            response.headers_mut().insert(AUDIT_ID, value);
        }
        if let Ok(unread) = returned.try_recv() {
            if version == hyper::Version::HTTP_2 || response.status() == StatusCode::GATEWAY_TIMEOUT
            {
                // (A request past its deadline may be one whose body stalled: its answer is
                // not held up further.)
                let (parts, body) = response.into_parts();
                response = Response::from_parts(parts, body.guarded(Holding { _body: unread }));
            } else {
                drain(unread).await;
            }
        }
        if head {
            let (mut parts, body) = response.into_parts();
            if let Some(bytes) = body.bytes() {
                parts
                    .headers
                    .insert(hyper::header::CONTENT_LENGTH, bytes.len().into());
            }
            response = Response::from_parts(parts, ResponseBody::Full(None));
        }
        response
    }

    async fn handle_audited(
        &self,
        request: Request<crate::body::Unread>,
        audit_id: &str,
        received_at: SystemTime,
    ) -> Response<ResponseBody> {
        let info = request_info::parse(
            request.method().as_str(),
            request.uri().path(),
            request.uri().query(),
        );
        let admitted = match &self.security {
            Some(security) => self.admit_request(security, &info, &request, audit_id, received_at),
            None => {
                let nobody = UserInfo::default();
                let record = self.audit.as_ref().and_then(|audit| {
                    audit.begin(&Self::audit_attributes(
                        &info,
                        &request,
                        &nobody,
                        audit_id,
                        received_at,
                    ))
                });
                Ok((nobody, record))
            }
        };
        let (user, record) = match admitted {
            Ok(admitted) => admitted,
            Err((error, record)) => {
                let accept = request.headers().get(ACCEPT).and_then(|v| v.to_str().ok());
                let response = handlers::error_response_for(&error, accept);
                return finish_audit(record, &info, response);
            }
        };
        let Some(record) = record else {
            let (parts, body) = request.into_parts();
            return self
                .serve(&info, parts, RequestBody::Incoming(body), &user)
                .await;
        };
        let (parts, body) = request.into_parts();
        // A write's body is recorded when the handler reads it, within the request's limits
        // and timeout.
        let body = if matches!(info.verb.as_str(), "create" | "update" | "patch") {
            let content_type = parts
                .headers
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("application/json")
                .to_owned();
            let (record, info) = (record.clone(), info.clone());
            RequestBody::Recorded(
                body,
                Box::new(move |bytes: &[u8]| {
                    record_request_body(&record, &info, &content_type, bytes);
                }),
            )
        } else {
            RequestBody::Incoming(body)
        };
        let response = self.serve(&info, parts, body, &user).await;
        finish_audit(Some(record), &info, response)
    }

    /// Answers an admitted request made by `user`.
    async fn serve(
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
            return self.serve_api(info, parts, body, user).await;
        }
        self.serve_api(info, parts, body, user).await
    }

    /// Answers an admitted request that is not for the ops endpoints.
    async fn serve_api(
        &self,
        info: &RequestInfo,
        parts: hyper::http::request::Parts,
        body: RequestBody,
        user: &UserInfo,
    ) -> Response<ResponseBody> {
        if !info.is_resource_request {
            return self
                .non_resource(info, &parts)
                .unwrap_or_else(|e| error_response(&e));
        }
        let accept = parts.headers.get(ACCEPT).and_then(|v| v.to_str().ok());
        let started = Instant::now();
        let kind = self.metrics.as_ref().map(|_| request_kind(info, &parts));
        let long_running = info.verb == "watch";
        let mutating = is_mutating(&info.verb);
        let mut terminated = false;
        let response = if long_running {
            self.resource(info, &parts, body, user)
                .await
                .unwrap_or_else(|e| handlers::error_response_for(&e, accept))
        } else {
            match self.admission.try_acquire(mutating) {
                Err(()) => {
                    terminated = true;
                    too_many_requests()
                }
                Ok(_permit) => {
                    let _in_flight = self.metrics.as_ref().map(|m| m.in_flight(mutating));
                    match requested_timeout(parts.uri.query()) {
                        Err(e) => handlers::error_response_for(&e, accept),
                        Ok(requested) => {
                            let limit = self.admission.limits.request_timeout;
                            let deadline = requested.map_or(limit, |r| r.min(limit));
                            match tokio::time::timeout(
                                deadline,
                                self.resource(info, &parts, body, user),
                            )
                            .await
                            {
                                Ok(result) => result
                                    .unwrap_or_else(|e| handlers::error_response_for(&e, accept)),
                                Err(_) => {
                                    terminated = true;
                                    timed_out()
                                }
                            }
                        }
                    }
                }
            }
        };
        let (Some(metrics), Some(kind)) = (&self.metrics, kind) else {
            return response;
        };
        let code = response.status().as_u16();
        if terminated {
            metrics.terminated(&kind, code);
        }
        if long_running && response.status() == StatusCode::OK {
            // A watch is timed and counted as registered until its stream ends.
            let served = self.served();
            let watcher = served
                .find(info)
                .map(|r| metrics.watcher(&r.info.group, &r.info.version, &r.info.kind));
            let guard = WatchGuard {
                metrics: metrics.clone(),
                kind,
                started,
                _watcher: watcher,
            };
            let (parts, body) = response.into_parts();
            return Response::from_parts(parts, body.guarded(guard));
        }
        metrics.observe(&kind, code, started);
        response
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
        let served = self.served();
        let segments: Vec<&str> = info
            .path
            .trim_matches('/')
            .split('/')
            .filter(|s| !s.is_empty())
            .collect();
        let (document, negotiated) = match segments.as_slice() {
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
                        served.discovery.aggregated(core, version)
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

    /// Admission before a write: NamespaceLifecycle's refusal to delete the namespaces every
    /// cluster depends on (its check of creates runs in the stores, on every path that
    /// creates).
    fn admit(
        &self,
        resource: &Resource<S>,
        request: &RequestInfo,
        verb: &str,
    ) -> Result<(), ApiError> {
        if verb == "delete"
            && resource.info.group.is_empty()
            && resource.info.resource == "namespaces"
        {
            return crate::admission::namespace_may_be_deleted(&request.name);
        }
        Ok(())
    }

    /// Answers a review (created, answered, never stored).
    async fn review(
        &self,
        review: &'static ResourceInfo,
        info: &RequestInfo,
        parts: &hyper::http::request::Parts,
        body: RequestBody,
        user: &UserInfo,
    ) -> Result<Response<ResponseBody>, ApiError> {
        if info.parts.len() != 1 || !in_scope(review.namespaced, info) {
            return Err(not_found());
        }
        if info.verb != "create" {
            return Err(Status::method_not_supported(&review.group_resource(), &info.verb).into());
        }
        let Some(security) = &self.security else {
            return Err(Status::failure(
                StatusReason::MethodNotAllowed,
                "this server authorizes no requests: reviews are not available",
            )
            .into());
        };
        let negotiated = crate::reviews::negotiate(parts)?;
        let bytes = handlers::read_bytes(body).await?;
        let object = crate::reviews::read(review, parts, &bytes)?;
        let answered = crate::reviews::answer(review, security, user, &info.namespace, object)?;
        Ok(handlers::respond(
            StatusCode::CREATED,
            &answered,
            &negotiated,
            Some(&ServedKind::builtin(review)),
            &[],
        ))
    }

    /// Answers `serviceaccounts/<name>/token`: a TokenRequest for the account.
    async fn token_request(
        &self,
        info: &RequestInfo,
        parts: &hyper::http::request::Parts,
        body: RequestBody,
    ) -> Result<Response<ResponseBody>, ApiError> {
        let token_request = &genplane_api::catalog::TOKEN_REQUEST;
        if info.verb != "create" {
            return Err(Status::method_not_supported(
                &GroupResource::new("", "serviceaccounts/token"),
                &info.verb,
            )
            .into());
        }
        let Some(issuer) = self
            .security
            .as_ref()
            .and_then(|s| s.token_requests.clone())
        else {
            return Err(not_found());
        };
        let negotiated = crate::reviews::negotiate(parts)?;
        let bytes = handlers::read_bytes(body).await?;
        let object = crate::reviews::read(token_request, parts, &bytes)?;
        // The account (and a bound Secret) are read from the store, not the watch caches, so
        // that an account created just before is found; a missing one is the store's 404.
        let account = self
            .builtin
            .iter()
            .find(|r| r.info.group.is_empty() && r.info.resource == "serviceaccounts");
        let mut read = crate::authn::ReadObjects::default();
        if let Some(account) = account {
            read.service_account =
                Some(account.store.get(&info.namespace, &info.name, None).await?);
        }
        let secret = object
            .pointer("/spec/boundObjectRef")
            .filter(|r| r.get("kind").and_then(Value::as_str) == Some("Secret"))
            .and_then(|r| r.get("name").and_then(Value::as_str));
        let secrets = self
            .builtin
            .iter()
            .find(|r| r.info.group.is_empty() && r.info.resource == "secrets");
        if let (Some(name), Some(secrets)) = (secret, secrets) {
            // A missing Secret is the issuer's to report, in upstream's words.
            read.secret = secrets.store.get(&info.namespace, name, None).await.ok();
        }
        let (answer, warnings) =
            issuer.create(&info.namespace, &info.name, &object, now(), &read)?;
        Ok(handlers::respond(
            StatusCode::CREATED,
            &answer,
            &negotiated,
            Some(&ServedKind::builtin(token_request)),
            &warnings,
        ))
    }

    async fn resource(
        &self,
        info: &RequestInfo,
        parts: &hyper::http::request::Parts,
        body: RequestBody,
        user: &UserInfo,
    ) -> Result<Response<ResponseBody>, ApiError> {
        let found = |r: &ResourceInfo| {
            r.group == info.api_group
                && r.version == info.api_version
                && r.resource == info.resource
        };
        let served = self.served();
        let Some(resource) = served.find(info) else {
            return match genplane_api::catalog::reviews().iter().find(|r| found(r)) {
                Some(review) => self.review(review, info, parts, body, user).await,
                None => Err(not_found()),
            };
        };
        if !in_scope(resource.info.namespaced, info) || info.parts.len() > 3 {
            return Err(not_found());
        }
        if resource.info.group.is_empty()
            && resource.info.resource == "serviceaccounts"
            && info.subresource == "token"
            && info.parts.len() == 3
        {
            return self.token_request(info, parts, body).await;
        }
        // Subresources with rules of their own are served by their own store; others are
        // not found as any unknown one.
        let (store, verbs) = if info.subresource.is_empty() {
            (&resource.store, &resource.info.verbs)
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
                .map(|s| &s.verbs);
            match (store, verbs) {
                (Some(store), Some(verbs)) if info.parts.len() == 3 => (store, verbs),
                _ => return Err(not_found()),
            }
        };
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
        // A POST names its object in the body: only collections (and subresources) take it.
        if verb == "create" && !request.name.is_empty() && request.subresource.is_empty() {
            return Err(
                Status::method_not_supported(&resource.info.group_resource(), "create").into(),
            );
        }
        if !verbs.iter().any(|v| v == verb) {
            return Err(Status::method_not_supported(&resource.info.group_resource(), verb).into());
        }
        self.admit(resource, &request, verb)?;
        let subresource_kind = ServedKind::of_subresource(&resource.info, &request.subresource);
        let ctx = Ctx {
            info: &resource.info,
            body: subresource_kind.as_ref().unwrap_or(&resource.info),
            store,
            request: &request,
            query: Query::parse(parts.uri.query()),
            headers: &parts.headers,
            now: now(),
            shutdown: self.shutdown.as_ref(),
            metrics: self.metrics.as_ref(),
            types: &served.types,
            admit: self
                .security
                .as_ref()
                .and_then(|s| s.writes.as_ref())
                .filter(|_| request.subresource.is_empty())
                .and_then(|w| {
                    w.admit_write(
                        &resource.info.group,
                        &resource.info.resource,
                        &request.namespace,
                        user,
                    )
                }),
            admit_create: self
                .namespace_lifecycle
                .clone()
                .filter(|_| resource.info.namespaced),
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
