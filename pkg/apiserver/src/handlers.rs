//! The resource handlers, one file per verb, and what they share: the request context, body
//! decoding, answers and errors.

mod create;
mod delete;
mod get;
mod list;
mod patch;
mod update;
mod watch;

use bytes::Bytes;
use genplane_api::catalog::ResourceInfo;
use genplane_apimachinery::errors::{ApiError, Status};
use genplane_apimachinery::resource_version::ReadOptions;
use genplane_apimachinery::{fields, labels};
use genplane_registry::{ListOptions, Store};
use genplane_storage::Storage;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use hyper::{Response, StatusCode};
use serde_json::Value;

use crate::body::ResponseBody;
use crate::encode;
use crate::negotiation::{self, BodyFormat, Capabilities, Format, Negotiated};
use crate::request_info::RequestInfo;

pub(crate) use create::create;
pub(crate) use delete::{delete, delete_collection};
pub(crate) use get::get;
pub(crate) use list::list;
pub(crate) use patch::patch;
pub(crate) use update::update;
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

    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn flag(&self, name: &str) -> bool {
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
                    Status::bad_request(format!("invalid value for {name}: {v:?}")).into()
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
                "unsupported dryRun value {other:?}: only \"All\" is supported"
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
    pub(crate) info: &'static ResourceInfo,
    pub(crate) store: &'a Store<S>,
    pub(crate) request: &'a RequestInfo,
    pub(crate) query: Query,
    pub(crate) headers: &'a HeaderMap,
    pub(crate) now: i64,
}

impl<S: Storage> Ctx<'_, S> {
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
                list,
                aggregated_discovery: false,
            },
        )
    }

    /// The request body as a JSON object, checked against the resource's kind and apiVersion,
    /// which are filled in when missing; plus the warnings of `fieldValidation=Warn`.
    pub(crate) async fn object_body(
        &self,
        body: Incoming,
    ) -> Result<(Value, Vec<String>), ApiError> {
        let mut object = read_body(self.headers, body).await?;
        let map = object
            .as_object_mut()
            .ok_or_else(|| ApiError::from(Status::bad_request("the body must be a JSON object")))?;
        let expected_version = self.info.api_version();
        match map.get("apiVersion").and_then(Value::as_str) {
            None | Some("") => {
                map.insert("apiVersion".into(), Value::from(expected_version));
            }
            Some(v) if v != expected_version => {
                return Err(Status::bad_request(format!(
                    "the API version in the data ({v}) does not match the expected API version ({expected_version})"
                ))
                .into());
            }
            Some(_) => {}
        }
        match map.get("kind").and_then(Value::as_str) {
            None | Some("") => {
                map.insert("kind".into(), Value::from(self.info.kind));
            }
            Some(k) if k != self.info.kind => {
                return Err(Status::bad_request(format!(
                    "the kind in the data ({k}) does not match the expected kind ({})",
                    self.info.kind
                ))
                .into());
            }
            Some(_) => {}
        }
        let warnings = self.field_validation(&object)?;
        Ok((object, warnings))
    }

    /// Applies `fieldValidation`: Strict refuses unknown fields (400), Warn (the default)
    /// returns them as warnings, Ignore ignores them.
    pub(crate) fn field_validation(&self, object: &Value) -> Result<Vec<String>, ApiError> {
        let mode = self.query.get("fieldValidation").unwrap_or("");
        let strict = match mode {
            "Strict" => true,
            "" | "Warn" => false,
            "Ignore" => return Ok(Vec::new()),
            other => {
                return Err(Status::bad_request(format!(
                    "fieldValidation parameter unsupported: {other:?} (supported: Strict, Warn, Ignore)"
                ))
                .into());
            }
        };
        let unknown = (self.info.hooks.decode)(object)?.unknown_fields;
        let messages: Vec<String> = unknown
            .iter()
            .map(|f| format!("unknown field {f:?}"))
            .collect();
        if strict && !messages.is_empty() {
            return Err(Status::bad_request(format!(
                "strict decoding error: {}",
                messages.join(", ")
            ))
            .into());
        }
        Ok(messages)
    }
}

/// Reads a request body (at most [`MAX_BODY_BYTES`], else 413) in the format its
/// `Content-Type` names.
pub(crate) async fn read_body(headers: &HeaderMap, body: Incoming) -> Result<Value, ApiError> {
    let content_type = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok());
    let format = negotiation::body_format(content_type)?;
    let bytes = read_bytes(body).await?;
    decode_body(&bytes, format)
}

/// Reads at most [`MAX_BODY_BYTES`] of a body.
pub(crate) async fn read_bytes(body: Incoming) -> Result<Bytes, ApiError> {
    let limited = http_body_util::Limited::new(body, MAX_BODY_BYTES);
    match limited.collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            Err(Status::request_entity_too_large(MAX_BODY_BYTES).into())
        }
        Err(e) => Err(Status::bad_request(format!("reading the request body: {e}")).into()),
    }
}

/// Decodes a body in `format`.
pub(crate) fn decode_body(bytes: &[u8], format: BodyFormat) -> Result<Value, ApiError> {
    match format {
        BodyFormat::Json => serde_json::from_slice(bytes).map_err(|e| {
            Status::bad_request(format!("the request body is not valid JSON: {e}")).into()
        }),
        BodyFormat::Yaml => {
            let text = std::str::from_utf8(bytes).map_err(|e| {
                ApiError::from(Status::bad_request(format!(
                    "the request body is not UTF-8: {e}"
                )))
            })?;
            serde_saphyr::from_str(text).map_err(|e| {
                Status::bad_request(format!("the request body is not valid YAML: {e}")).into()
            })
        }
        BodyFormat::Protobuf => Err(Status::unsupported_media_type(
            "application/vnd.kubernetes.protobuf",
            &["application/json", "application/yaml"],
        )
        .into()),
    }
}

/// An answer with `value` in the negotiated form, with `Warning` headers.
pub(crate) fn respond(
    code: StatusCode,
    value: &Value,
    negotiated: &Negotiated,
    warnings: &[String],
) -> Response<ResponseBody> {
    let mut response = Response::new(ResponseBody::full(encode::serialize(
        value,
        negotiated.format,
    )));
    *response.status_mut() = code;
    if let Ok(content_type) = HeaderValue::from_str(&negotiated.content_type()) {
        response.headers_mut().insert(CONTENT_TYPE, content_type);
    }
    for warning in warnings {
        let escaped = warning.replace('\\', "\\\\").replace('"', "\\\"");
        if let Ok(value) = HeaderValue::from_str(&format!("299 - \"{escaped}\"")) {
            response.headers_mut().append("warning", value);
        }
    }
    response
}

/// An error answer: its Status as JSON, with the Status's code.
pub fn error_response(error: &ApiError) -> Response<ResponseBody> {
    let negotiated = Negotiated {
        format: Format::Json,
        target: negotiation::Target::Object,
    };
    let code = StatusCode::from_u16(error.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    respond(code, &encode::status(error), &negotiated, &[])
}
