//! Audit: the request's record, begun once the user is known with the level the policy gives
//! it, holding the request body (read by the handler, within the request's limits and timeout)
//! and the answer when the level asks for them, and completed when the answer is sent (a
//! watch when its stream ends). Requests that fail authentication get their own event.

use std::time::SystemTime;

use genplane_api::catalog::ResourceInfo;
use genplane_audit::{
    AuditRecord, Auditor, RequestAttributes as AuditAttributes,
    ResourceAttributes as AuditResource, SourceIps,
};
use genplane_authentication::UserInfo;
use genplane_component_base::http::RemoteAddr;
use hyper::header::CONTENT_TYPE;
use hyper::{Request, Response};

use super::panic_recovery::Slot;
use crate::body::{RequestBody, ResponseBody, Unread};
use crate::kind::ServedKind;
use crate::request_info::RequestInfo;

/// When and under which ID a request arrived.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Arrival<'a> {
    pub(crate) audit_id: &'a str,
    pub(crate) received_at: SystemTime,
}

impl<'a> Arrival<'a> {
    /// A request arriving now under `audit_id`.
    pub(crate) fn now(audit_id: &'a str) -> Self {
        Self {
            audit_id,
            received_at: SystemTime::now(),
        }
    }
}

/// The audit attributes of a request.
fn attributes<'a, B>(
    info: &'a RequestInfo,
    request: &'a Request<B>,
    user: &'a UserInfo,
    arrival: Arrival<'a>,
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
        audit_id: Some(arrival.audit_id),
        received_at: arrival.received_at,
        ..AuditAttributes::new(user, &info.verb, uri)
    }
}

/// The record of a request made by `user`, if the policy records it, kept in `slot` for a
/// panic to complete; and the request with the record attached for the router (admission
/// plugins annotate it) and a write's body recorded as the handler reads it.
pub(crate) fn begin(
    auditor: Option<&Auditor>,
    info: &RequestInfo,
    request: Request<Unread>,
    user: &UserInfo,
    arrival: Arrival<'_>,
    slot: &Slot,
) -> (Request<RequestBody>, Option<AuditRecord>) {
    let record =
        auditor.and_then(|auditor| auditor.begin(&attributes(info, &request, user, arrival)));
    let (mut parts, body) = request.into_parts();
    let body = match &record {
        Some(record) => {
            slot.keep(record);
            parts.extensions.insert(record.clone());
            self::body(record, info, &parts, body)
        }
        None => RequestBody::Incoming(body),
    };
    (Request::from_parts(parts, body), record)
}

/// The event of a request whose credentials were refused (`code`): which kinds of credentials
/// it tried.
pub(crate) fn failed_authentication<B>(
    auditor: Option<&Auditor>,
    info: &RequestInfo,
    request: &Request<B>,
    arrival: Arrival<'_>,
    code: u16,
) {
    let Some(auditor) = auditor else {
        return;
    };
    let nobody = UserInfo::default();
    let mut attempted = Vec::new();
    if request.headers().contains_key(hyper::header::AUTHORIZATION) {
        attempted.push("bearer");
    }
    if request
        .extensions()
        .get::<genplane_component_base::http::PeerCertificates>()
        .is_some_and(|p| !p.chain().is_empty())
    {
        attempted.push("x509");
    }
    auditor.failed_authentication(
        &attributes(info, request, &nobody, arrival),
        &attempted,
        code,
    );
}

/// The body as handlers read it: a write's body is recorded when the handler reads it.
fn body(
    record: &AuditRecord,
    info: &RequestInfo,
    parts: &hyper::http::request::Parts,
    body: Unread,
) -> RequestBody {
    if !matches!(info.verb.as_str(), "create" | "update" | "patch") {
        return RequestBody::Incoming(body);
    }
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
    let resource = genplane_api::catalog::find(&info.api_group, &info.api_version, &info.resource)?;
    // A subresource of a kind of its own (`serviceaccounts/token`: TokenRequest).
    let body = resource
        .subresources
        .iter()
        .find(|s| s.name == info.subresource)
        .and_then(|s| s.body);
    Some(body.unwrap_or(resource))
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
    use genplane_apimachinery::codec::protobuf;
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
        protobuf::decode_object(&envelope, &genplane_apimachinery::meta::schemas::STATUS).ok()
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
pub(crate) fn finish(
    record: Option<AuditRecord>,
    info: &RequestInfo,
    response: Response<ResponseBody>,
) -> Response<ResponseBody> {
    let Some(record) = record else {
        return response;
    };
    record.response_started(response.status().as_u16());
    if let Some(list) = response.body().held_list() {
        if record.records_response_body() {
            let content_type = response
                .headers()
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            // Only for the audit log: the answer itself is written as it is sent.
            record_response_body(&record, info, content_type, &list.to_vec());
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
