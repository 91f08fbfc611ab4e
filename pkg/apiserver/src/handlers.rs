//! The resource handlers, one file per verb, and what they share: the request context, body
//! decoding, answers and errors.

mod apply;
mod create;
mod delete;
mod get;
mod list;
mod patch;
mod update;
mod watch;

use crate::body::RequestBody;
use bytes::Bytes;
use genplane_apimachinery::errors::{ApiError, Status};
use genplane_apimachinery::resource_version::ReadOptions;
use genplane_apimachinery::{fields, labels};
use genplane_registry::{ListOptions, Store, WriteOptions};
use genplane_storage::Storage;
use hyper::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use hyper::{Response, StatusCode};
use serde_json::Value;

use crate::backing::Backing;
use crate::body::ResponseBody;
use crate::encode;
use crate::kind::ServedKind;
use crate::negotiation::{self, Capabilities, Format, Negotiated};
use crate::request_info::RequestInfo;
use std::sync::Arc;

pub(crate) use create::create;
pub(crate) use delete::{delete, delete_collection};
pub(crate) use get::get;
pub(crate) use list::list;
pub(crate) use patch::patch;
pub(crate) use update::update;
pub use watch::WATCH_BUFFER_BYTES;
pub(crate) use watch::watch;

/// The largest request body accepted, as kube-apiserver's default (3 MiB).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// The query string of a request, parsed (tolerant of `?` and `?&` as kube-rs sends them).
#[derive(Debug, Default)]
pub(crate) struct Query(Vec<(String, String)>);

impl Query {
    pub(crate) fn parse(query: Option<&str>) -> Self {
        Query(
            form_urlencoded::parse(query.unwrap_or("").as_bytes())
                .filter(|(k, _)| !k.is_empty())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    /// The first value of `name`, as Go's parameter decoding takes it (request-info, and so
    /// authorization, read the same one).
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn flag(&self, name: &str) -> bool {
        matches!(
            self.get(name),
            Some("1" | "t" | "T" | "true" | "TRUE" | "True")
        )
    }

    fn int(&self, name: &str) -> Result<Option<i64>, ApiError> {
        self.get(name)
            .filter(|v| !v.is_empty())
            .map(|v| {
                v.parse::<i64>().map_err(|_| {
                    Status::bad_request(format!(
                        "invalid value for {name}: {}",
                        genplane_apimachinery::gofmt::Quoted(v)
                    ))
                    .into()
                })
            })
            .transpose()
    }

    /// `dryRun=All` (any other value is refused, as upstream refuses it).
    pub(crate) fn dry_run(&self) -> Result<bool, ApiError> {
        match self.get("dryRun") {
            None | Some("") => Ok(false),
            Some("All") => Ok(true),
            Some(other) => Err(Status::bad_request(format!(
                "unsupported dryRun value {}: only \"All\" is supported",
                genplane_apimachinery::gofmt::Quoted(other)
            ))
            .into()),
        }
    }

    /// The list options: selectors and read options.
    pub(crate) fn list_options(&self, watch: bool) -> Result<ListOptions, ApiError> {
        let labels =
            labels::Selector::parse(self.get("labelSelector").unwrap_or("")).map_err(|e| {
                ApiError::from(Status::bad_request(format!(
                    "unable to parse requirement: {e}"
                )))
            })?;
        let fields =
            fields::Selector::parse(self.get("fieldSelector").unwrap_or("")).map_err(|e| {
                ApiError::from(Status::bad_request(format!("invalid field selector: {e}")))
            })?;
        // A watch's duration: read by the watch handler, checked here for every list and
        // watch as upstream's options decoding checks it.
        self.int("timeoutSeconds")?;
        let send_initial_events = match self.get("sendInitialEvents") {
            None | Some("") => None,
            Some(_) => Some(self.flag("sendInitialEvents")),
        };
        Ok(ListOptions {
            labels,
            fields,
            read: ReadOptions {
                resource_version: self.get("resourceVersion").map(str::to_owned),
                resource_version_match: self.get("resourceVersionMatch").map(str::to_owned),
                limit: self.int("limit")?,
                continue_token: self.get("continue").map(str::to_owned),
                watch,
                send_initial_events,
                allow_watch_bookmarks: self.flag("allowWatchBookmarks"),
            },
        })
    }
}

/// What every resource handler works with.
pub(crate) struct Ctx<'a, S: Storage> {
    pub(crate) info: &'a Arc<ServedKind>,
    /// The kind of request bodies and answers: the resource's, or its subresource's when that
    /// is another kind (a custom resource's `scale` reads and writes autoscaling/v1 Scales).
    pub(crate) body: &'a ServedKind,
    /// Where the request goes: a store, or the answer of a kind that is never stored.
    pub(crate) backing: &'a Backing<S>,
    pub(crate) request: &'a RequestInfo,
    pub(crate) query: Query,
    pub(crate) headers: &'a HeaderMap,
    pub(crate) now: i64,
    /// The server's shutdown, which ends watches.
    pub(crate) shutdown: Option<&'a genplane_component_base::shutdown::Shutdown>,
    /// The type model of the served kinds (see [`genplane_merge::Schema`]).
    pub(crate) types: &'a std::sync::Arc<genplane_merge::Schema>,
    /// The check of this request's writes against its user (escalation prevention), if any.
    pub(crate) escalation: Option<genplane_registry::EscalationCheck>,
    /// Admission of this request's writes, if it writes.
    pub(crate) admission: Option<genplane_registry::Admission>,
    /// The server's metrics, if it records them (watches count the watchers they end).
    pub(crate) metrics: Option<&'a crate::metrics::ApiMetrics>,
    /// Who asks.
    pub(crate) user: &'a genplane_authentication::UserInfo,
    /// The server's authentication and authorization, if it has them (answers use them).
    pub(crate) security: Option<&'a crate::security::Security>,
    /// The server's stored objects (answers read them).
    pub(crate) objects: &'a dyn crate::answer::StoredObjects,
}

impl<S: Storage> Ctx<'_, S> {
    /// The store of the resource; a kind that is never stored has none (its only verb is
    /// `create`, which the router checked: any other is refused as upstream refuses it).
    pub(crate) fn store(&self) -> Result<&Store<S>, ApiError> {
        self.backing.store().ok_or_else(|| {
            Status::method_not_supported(&self.info.group_resource(), &self.request.verb).into()
        })
    }

    /// The negotiated answer form; `list` for list and watch answers.
    pub(crate) fn negotiate(&self, list: bool) -> Result<Negotiated, ApiError> {
        let accept = self
            .headers
            .get(hyper::header::ACCEPT)
            .and_then(|v| v.to_str().ok());
        negotiation::negotiate(
            accept,
            Capabilities {
                transforms: true,
                tables: self.backing.store().is_some(),
                list,
                aggregated_discovery: false,
                protobuf: self.body.protobuf().is_some(),
            },
        )
    }

    /// The list options of a list or watch. A request that names an object (the deprecated
    /// `watch/.../<name>` path, or a `metadata.name` field selector, which authorization
    /// checked as that name) sees that object only, as upstream: an empty selector becomes
    /// `metadata.name=<name>`, one that does not pin the same name is refused.
    pub(crate) fn list_options(&self, watch: bool) -> Result<ListOptions, ApiError> {
        let mut options = self.query.list_options(watch)?;
        let name = &self.request.name;
        if !name.is_empty() {
            if options.fields.is_empty() {
                options.fields = fields::Selector::parse(&format!("metadata.name={name}"))
                    .map_err(|e| {
                        ApiError::from(Status::bad_request(format!("invalid field selector: {e}")))
                    })?;
            } else if options.fields.requires_exact_match("metadata.name") != Some(name) {
                return Err(Status::bad_request(
                    "fieldSelector metadata.name doesn't match requested name",
                )
                .into());
            }
        }
        Ok(options)
    }

    /// The request body as a JSON object: see [`crate::request_body::decode_object`].
    pub(crate) async fn object_body(
        &self,
        body: RequestBody,
    ) -> Result<(Value, Vec<String>), ApiError> {
        let content_type = self.headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok());
        // The media type is checked before the body is read.
        negotiation::body_format(content_type)?;
        let bytes = read_bytes(body).await?;
        crate::request_body::decode_object(
            self.body,
            content_type,
            self.query.get("fieldValidation"),
            &bytes,
        )
    }

    /// The field manager of this request: `fieldManager`, else from the User-Agent.
    pub(crate) fn field_manager(&self) -> String {
        crate::fieldmanager::manager_name(
            self.query.get("fieldManager"),
            self.headers
                .get(hyper::header::USER_AGENT)
                .and_then(|v| v.to_str().ok()),
        )
    }

    /// The warnings the admission plugins gave this request so far (taken: each is answered
    /// once).
    pub(crate) fn admission_warnings(&self) -> Vec<String> {
        self.admission
            .as_ref()
            .map(|admission| admission.request.warnings.take())
            .unwrap_or_default()
    }

    /// The options of a create, update or non-apply patch (`options_kind` names them in
    /// errors: `CreateOptions`, `UpdateOptions`, `PatchOptions`): `dryRun`, and the tracking of
    /// field ownership for this request's manager.
    pub(crate) fn write_options(&self, options_kind: &str) -> Result<WriteOptions, ApiError> {
        crate::fieldmanager::validate(options_kind, self.query.get("fieldManager"), false)?;
        if options_kind == "PatchOptions" && self.query.get("force").is_some() {
            return Err(crate::fieldmanager::force_forbidden());
        }
        Ok(WriteOptions {
            escalation: self.escalation.clone(),
            admission: self.admission.clone(),
            user: Some(std::sync::Arc::new(self.user.clone())),
            dry_run: self.query.dry_run()?,
            fields: Some(crate::fieldmanager::tracker(
                self.types,
                self.info,
                self.field_manager(),
                &self.request.subresource,
                self.now,
            )),
        })
    }

    /// Applies `fieldValidation`: see [`crate::request_body::field_validation`].
    pub(crate) fn field_validation(
        &self,
        object: &Value,
        duplicates: &[String],
    ) -> Result<Vec<String>, ApiError> {
        crate::request_body::field_validation(
            self.body,
            self.query.get("fieldValidation"),
            object,
            duplicates,
        )
    }
}

/// Reads at most [`MAX_BODY_BYTES`] of a body.
pub(crate) async fn read_bytes(body: RequestBody) -> Result<Bytes, ApiError> {
    let (mut body, on_read) = match body {
        RequestBody::Read(bytes) => return Ok(bytes),
        RequestBody::Incoming(body) => (body, None),
        RequestBody::Recorded(body, on_read) => (body, Some(on_read)),
    };
    let mut collected = bytes::BytesMut::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(|e| {
            ApiError::from(Status::bad_request(format!(
                "reading the request body: {e}"
            )))
        })?;
        if collected.len() + chunk.len() > MAX_BODY_BYTES {
            // What is left goes back to the server with `body`, which answers this.
            return Err(Status::request_entity_too_large(MAX_BODY_BYTES).into());
        }
        collected.extend_from_slice(&chunk);
    }
    let bytes = collected.freeze();
    if let Some(on_read) = on_read {
        on_read(&bytes);
    }
    Ok(bytes)
}

/// An answer with `value` in the negotiated form, with `Warning` headers; `info` gives the
/// schema of a protobuf answer.
pub(crate) fn respond(
    code: StatusCode,
    value: &Value,
    negotiated: &Negotiated,
    info: Option<&ServedKind>,
    warnings: &[String],
) -> Response<ResponseBody> {
    let (code, bytes, content_type) = match encode::serialize(value, negotiated.format, info) {
        Ok(bytes) => (code, bytes, negotiated.content_type()),
        Err(error) => {
            let status = encode::status(&error);
            let code =
                StatusCode::from_u16(error.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let bytes = encode::serialize(&status, Format::Json, None).unwrap_or_default();
            (code, bytes, Format::Json.content_type().to_owned())
        }
    };
    let mut response = Response::new(ResponseBody::full(bytes));
    *response.status_mut() = code;
    if let Ok(content_type) = HeaderValue::from_str(&content_type) {
        response.headers_mut().insert(CONTENT_TYPE, content_type);
    }
    add_warnings(&mut response, warnings);
    response
}

/// Adds `warnings` to `response` as `Warning: 299 - "..."` headers.
fn add_warnings(response: &mut Response<ResponseBody>, warnings: &[String]) {
    for warning in warnings {
        let escaped = warning.replace('\\', "\\\\").replace('"', "\\\"");
        if let Ok(value) = HeaderValue::from_str(&format!("299 - \"{escaped}\"")) {
            response.headers_mut().append("warning", value);
        }
    }
}

/// The answer to a write (`code`, with `warnings`) as the bytes it stored, as a GET answers
/// with them (see [`Store::written_json`]), when the client asked for a plain JSON object and
/// the resource serves its objects as stored; `None` when the object has to be encoded.
pub(crate) fn respond_stored<S: Storage>(
    store: &Store<S>,
    written: &genplane_registry::Written,
    code: StatusCode,
    negotiated: &Negotiated,
    warnings: &[String],
) -> Option<Response<ResponseBody>> {
    if !negotiated.is_json_objects() {
        return None;
    }
    let json = store.written_json(written)?;
    let mut response = respond_json(code, ResponseBody::full(json), negotiated);
    add_warnings(&mut response, warnings);
    Some(response)
}

/// An answer whose JSON body is already written, with the negotiated content type.
pub(crate) fn respond_json(
    code: StatusCode,
    body: ResponseBody,
    negotiated: &Negotiated,
) -> Response<ResponseBody> {
    let mut response = Response::new(body);
    *response.status_mut() = code;
    if let Ok(value) = HeaderValue::from_str(&negotiated.content_type()) {
        response.headers_mut().insert(CONTENT_TYPE, value);
    }
    response
}

/// An error answer: its Status as JSON, with the Status's code.
pub fn error_response(error: &ApiError) -> Response<ResponseBody> {
    error_response_for(error, None)
}

/// An error answer to a resource request: its Status in protobuf when the `Accept` header
/// prefers it (as kube-apiserver answers errors in the negotiated form), else JSON.
pub(crate) fn error_response_for(error: &ApiError, accept: Option<&str>) -> Response<ResponseBody> {
    let capabilities = Capabilities {
        protobuf: true,
        ..Capabilities::default()
    };
    let format = match accept.map(|a| negotiation::negotiate(Some(a), capabilities)) {
        Some(Ok(n)) if n.format == Format::Protobuf => Format::Protobuf,
        _ => Format::Json,
    };
    let negotiated = Negotiated {
        format,
        target: negotiation::Target::Object,
    };
    let code = StatusCode::from_u16(error.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = respond(code, &encode::status(error), &negotiated, None, &[]);
    set_retry_after(&mut response, error);
    response
}

/// Sets `Retry-After` on a 429 or 5xx answer whose Status says when to retry, as upstream's
/// response writers do (clients such as client-go wait that long before retrying).
pub(crate) fn set_retry_after(response: &mut Response<ResponseBody>, error: &ApiError) {
    let code = response.status();
    if code != StatusCode::TOO_MANY_REQUESTS && !code.is_server_error() {
        return;
    }
    if let Some(seconds) = error
        .details
        .as_ref()
        .and_then(|d| d.retry_after_seconds)
        .filter(|s| *s > 0)
    {
        response
            .headers_mut()
            .insert(hyper::header::RETRY_AFTER, HeaderValue::from(seconds));
    }
}
