//! The auditor: decides per request whether to audit it, and writes its events.
//!
//! [`Auditor::begin`] evaluates the policy for a request. At [`Level::None`] it returns `None`
//! having allocated nothing. Otherwise it writes the `RequestReceived` event and returns an
//! [`AuditRecord`]: a cheap, clonable handle that the rest of the request path uses to add what
//! it learns (the impersonated user, annotations, the request and response bodies, the response
//! status) and that writes the later events:
//!
//! | stage | when |
//! |---|---|
//! | `RequestReceived` | in [`Auditor::begin`] |
//! | `ResponseStarted` | [`AuditRecord::response_started`], long-running requests only |
//! | `ResponseComplete` | [`AuditRecord::finish`], or when the last handle is dropped |
//! | `Panic` | [`AuditRecord::finish_panicked`], or a drop while the thread unwinds |
//!
//! A future that panicked is dropped by tokio *after* the panic was caught, so its record does
//! not see the unwinding: the audit layer should catch panics of the inner service itself
//! (`catch_unwind` on the future), call [`AuditRecord::finish_panicked`] with
//! [`panic_message`] of the payload, and resume unwinding.
//!
//! A record dropped without `finish` (a client that went away) completes as upstream's does
//! when no response was written: `ResponseComplete` with status 200 `Connection closed early`
//! (preceded by a `ResponseStarted` for long-running requests).
//!
//! Bodies are recorded only at the levels that record them (`Request` and above for the request,
//! `RequestResponse` for the response); at `Metadata` a request body only fills in the
//! `objectRef` (namespace, name, uid, resourceVersion), so secret data never reaches a
//! `Metadata` event.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

use genplane_authentication::UserInfo;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::attributes::RequestAttributes;
use crate::event::{Event, ObjectReference, ResponseStatus, format_micro_time};
use crate::policy::{Level, Policy, RequestAuditConfig, Stage};

/// The annotation holding the authorization decision (`allow` or `forbid`).
pub const DECISION_ANNOTATION: &str = "authorization.k8s.io/decision";
/// The annotation holding the reason of the authorization decision.
pub const REASON_ANNOTATION: &str = "authorization.k8s.io/reason";
/// The value of [`DECISION_ANNOTATION`] for allowed requests.
pub const DECISION_ALLOW: &str = "allow";
/// The value of [`DECISION_ANNOTATION`] for forbidden requests.
pub const DECISION_FORBID: &str = "forbid";
/// The request and response header carrying the audit ID.
pub const AUDIT_ID_HEADER: &str = "Audit-ID";

const MAX_USER_AGENT: usize = 1024;
const USER_AGENT_TRUNCATED: &str = "...TRUNCATED";

/// A fresh audit ID (a random UUID), for requests without an `Audit-ID` header. Upstream
/// answers every request with an `Audit-ID` header, audited or not.
pub fn new_audit_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// The text of a panic payload (`panic!("...")` gives a `&str` or a `String`), for
/// [`AuditRecord::finish_panicked`].
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    if let Some(text) = payload.downcast_ref::<&str>() {
        text
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text
    } else {
        "unknown panic"
    }
}

/// Where events go. Implementations must not block for long: the caller is on the request
/// path.
pub trait Sink: Send + Sync + fmt::Debug {
    /// Takes one event (the sink copies what it keeps); returns whether it was accepted.
    fn process(&self, event: &Event) -> bool;
}

/// A sink that keeps events in memory, for tests.
#[derive(Debug, Default)]
pub struct MemorySink {
    events: Mutex<Vec<Event>>,
}

impl MemorySink {
    /// An empty sink.
    pub fn new() -> Self {
        Self::default()
    }

    /// The events received so far.
    pub fn events(&self) -> Vec<Event> {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Sink for MemorySink {
    fn process(&self, event: &Event) -> bool {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(event.clone());
        true
    }
}

/// Audits requests by a policy into a sink. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Auditor {
    policy: Arc<Policy>,
    sink: Arc<dyn Sink>,
}

impl Auditor {
    /// An auditor of `policy` writing to `sink`.
    pub fn new(policy: Policy, sink: Arc<dyn Sink>) -> Self {
        Auditor {
            policy: Arc::new(policy),
            sink,
        }
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Evaluates the policy for a request, without writing anything.
    pub fn evaluate(&self, attrs: &RequestAttributes<'_>) -> RequestAuditConfig {
        self.policy.evaluate(attrs)
    }

    /// Starts auditing a request: `None` (and no allocation) when the policy says
    /// [`Level::None`]; otherwise writes the `RequestReceived` event (unless omitted) and
    /// returns the request's record.
    pub fn begin(&self, attrs: &RequestAttributes<'_>) -> Option<AuditRecord> {
        let config = self.policy.evaluate(attrs);
        if config.level == Level::None {
            return None;
        }
        let mut state = State {
            event: new_event(attrs, config.level),
            config,
            sink: Arc::clone(&self.sink),
            long_running: attrs.long_running,
            code_seen: false,
            done: false,
        };
        state.emit(Stage::RequestReceived);
        Some(AuditRecord {
            shared: Arc::new(Shared {
                level: config.level,
                state: Mutex::new(state),
            }),
        })
    }

    /// Audits a request whose authentication failed, as upstream's
    /// `WithFailedAuthenticationAudit`: when the policy audits it (the user is unknown, so give
    /// an empty [`UserInfo`]), one `ResponseStarted` event with the response `code` (401) and
    /// the message of [`failed_authentication_message`]. Returns whether an event was written.
    pub fn failed_authentication(
        &self,
        attrs: &RequestAttributes<'_>,
        attempted: &[&str],
        code: u16,
    ) -> bool {
        let config = self.policy.evaluate(attrs);
        if config.level == Level::None {
            return false;
        }
        let mut event = new_event(attrs, config.level);
        event.response_status = Some(ResponseStatus {
            message: failed_authentication_message(attempted),
            code: i32::from(code),
            ..ResponseStatus::default()
        });
        let mut state = State {
            event,
            config,
            sink: Arc::clone(&self.sink),
            long_running: false,
            code_seen: true,
            done: true,
        };
        state.emit(Stage::ResponseStarted) && !config.omit_stages.contains(Stage::ResponseStarted)
    }
}

/// The `responseStatus.message` of a failed authentication: the methods the client tried
/// (`basic`, `bearer`, `access_token`, `x509`, in that order), as upstream words it.
pub fn failed_authentication_message(attempted: &[&str]) -> String {
    if attempted.is_empty() {
        "Authentication failed, no credentials provided".to_owned()
    } else {
        format!("Authentication failed, attempted: {}", attempted.join(", "))
    }
}

/// The event of a request as it arrives.
fn new_event(attrs: &RequestAttributes<'_>, level: Level) -> Event {
    let audit_id = attrs.audit_id.map_or_else(new_audit_id, str::to_owned);
    let mut event = Event::new(level, audit_id, attrs.verb, attrs.request_uri);
    event.user = attrs.user.clone();
    event.source_ips = attrs
        .source_ips
        .resolve()
        .iter()
        .map(ToString::to_string)
        .collect();
    event.user_agent = truncate_user_agent(attrs.user_agent);
    event.object_ref = attrs.resource.map(|r| ObjectReference {
        resource: r.resource.to_owned(),
        namespace: r.namespace.to_owned(),
        name: r.name.to_owned(),
        api_group: r.api_group.to_owned(),
        api_version: r.api_version.to_owned(),
        subresource: r.subresource.to_owned(),
        ..ObjectReference::default()
    });
    event.request_received_timestamp = format_micro_time(attrs.received_at);
    event
}

fn truncate_user_agent(agent: &str) -> String {
    if agent.len() <= MAX_USER_AGENT {
        return agent.to_owned();
    }
    let mut end = MAX_USER_AGENT;
    while !agent.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{USER_AGENT_TRUNCATED}", &agent[..end])
}

/// The audit state of one request. Clones are handles to the same record; the last one
/// dropped completes the record if nobody did.
#[derive(Clone, Debug)]
pub struct AuditRecord {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    level: Level,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    event: Event,
    config: RequestAuditConfig,
    sink: Arc<dyn Sink>,
    long_running: bool,
    /// Whether the response code was seen (upstream's "WriteHeader was called").
    code_seen: bool,
    /// Whether the final event was written.
    done: bool,
}

impl State {
    fn emit(&mut self, stage: Stage) -> bool {
        if self.config.omit_stages.contains(stage) {
            return true;
        }
        self.event.stage = stage;
        self.event.stage_timestamp = if stage == Stage::RequestReceived {
            self.event.request_received_timestamp.clone()
        } else {
            format_micro_time(SystemTime::now())
        };
        self.sink.process(&self.event)
    }

    fn complete(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        if self.event.response_status.is_none() {
            self.event.response_status = Some(ResponseStatus {
                code: 200,
                status: "Success".to_owned(),
                message: "Connection closed early".to_owned(),
                ..ResponseStatus::default()
            });
            if self.long_running {
                self.emit(Stage::ResponseStarted);
            }
        }
        self.emit(Stage::ResponseComplete);
    }

    fn panicked(&mut self, message: &str) {
        if self.done {
            return;
        }
        self.done = true;
        self.event.response_status = Some(ResponseStatus {
            code: 500,
            status: "Failure".to_owned(),
            reason: "InternalError".to_owned(),
            message: format!("APIServer panic'd: {message}"),
            ..ResponseStatus::default()
        });
        self.emit(Stage::Panic);
    }

    fn fill_object_ref(&mut self, meta: &ObjectMetaFields) {
        let object_ref = self.event.object_ref.get_or_insert_with(Default::default);
        let fill = |slot: &mut String, value: &Option<String>| {
            if slot.is_empty()
                && let Some(value) = value
            {
                slot.clone_from(value);
            }
        };
        fill(&mut object_ref.namespace, &meta.namespace);
        fill(&mut object_ref.name, &meta.name);
        fill(&mut object_ref.uid, &meta.uid);
        fill(&mut object_ref.resource_version, &meta.resource_version);
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        if std::thread::panicking() {
            state.panicked("the request handler panicked");
        } else {
            state.complete();
        }
    }
}

/// The metadata fields that fill in `objectRef`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ObjectMetaFields {
    namespace: Option<String>,
    name: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct MetadataOnly {
    #[serde(default)]
    metadata: ObjectMetaFields,
}

fn is_status(object: &Value) -> bool {
    object.get("kind").and_then(Value::as_str) == Some("Status")
        && object.get("apiVersion").and_then(Value::as_str) == Some("v1")
}

/// Removes `metadata.managedFields` from an object, or from each item of a list.
fn strip_managed_fields(object: &mut Value) {
    let strip = |object: &mut Value| {
        if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("managedFields");
        }
    };
    strip(object);
    if let Some(items) = object.get_mut("items").and_then(Value::as_array_mut) {
        items.iter_mut().for_each(strip);
    }
}

fn has_managed_fields(object: &Value) -> bool {
    let has = |object: &Value| {
        object
            .get("metadata")
            .and_then(|m| m.get("managedFields"))
            .is_some()
    };
    has(object)
        || object
            .get("items")
            .and_then(Value::as_array)
            .is_some_and(|items| items.iter().any(has))
}

/// The raw JSON of an object, without managed fields when asked.
fn raw_of(object: &Value, omit_managed_fields: bool) -> Option<Box<RawValue>> {
    let raw = if omit_managed_fields && has_managed_fields(object) {
        let mut copy = object.clone();
        strip_managed_fields(&mut copy);
        serde_json::value::to_raw_value(&copy)
    } else {
        serde_json::value::to_raw_value(object)
    };
    raw.map_err(|e| tracing::warn!(error = %e, "audit: cannot encode a body"))
        .ok()
}

/// The raw JSON of JSON bytes, without managed fields when asked.
fn raw_of_json(json: &[u8], omit_managed_fields: bool) -> Option<Box<RawValue>> {
    if omit_managed_fields {
        let value: Value = serde_json::from_slice(json)
            .map_err(|e| tracing::warn!(error = %e, "audit: a body is not JSON"))
            .ok()?;
        if has_managed_fields(&value) {
            return raw_of(&value, true);
        }
    }
    let text = std::str::from_utf8(json).ok()?;
    RawValue::from_string(text.to_owned())
        .map_err(|e| tracing::warn!(error = %e, "audit: a body is not JSON"))
        .ok()
}

impl AuditRecord {
    fn state(&self) -> MutexGuard<'_, State> {
        self.shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The level the request is audited at (never [`Level::None`]).
    pub fn level(&self) -> Level {
        self.shared.level
    }

    /// The request's audit ID (for the `Audit-ID` response header).
    pub fn audit_id(&self) -> String {
        self.state().event.audit_id.clone()
    }

    /// Whether the request body is recorded (level `Request` and above). At `Metadata`,
    /// [`set_request_object`](Self::set_request_object) is still worth calling: it fills in
    /// `objectRef` from the body's metadata.
    pub fn records_request_body(&self) -> bool {
        self.shared.level >= Level::Request
    }

    /// Whether the response body is recorded (level `RequestResponse`).
    pub fn records_response_body(&self) -> bool {
        self.shared.level >= Level::RequestResponse
    }

    /// A copy of the event as it stands (stage and stage timestamp are those of the last event
    /// written).
    pub fn event(&self) -> Event {
        self.state().event.clone()
    }

    /// Records the user the request is made as (the impersonation filter).
    pub fn set_impersonated_user(&self, user: &UserInfo) {
        self.state().event.impersonated_user = Some(user.clone());
    }

    /// Adds an annotation. As upstream, the first value set for a key stays; a different later
    /// value is ignored with a warning.
    pub fn annotate(&self, key: &str, value: &str) {
        let mut state = self.state();
        match state.event.annotations.get(key) {
            Some(existing) if existing != value => tracing::warn!(
                key,
                value,
                existing = existing.as_str(),
                audit_id = state.event.audit_id.as_str(),
                "audit annotation already set; keeping the first value"
            ),
            Some(_) => {}
            None => {
                state
                    .event
                    .annotations
                    .insert(key.to_owned(), value.to_owned());
            }
        }
    }

    /// Records the decoded request body: fills in `objectRef` from its metadata, and at level
    /// `Request` and above records the body itself (without managed fields when the policy
    /// says so).
    pub fn set_request_object(&self, object: &Value) {
        let meta = object
            .get("metadata")
            .and_then(|m| ObjectMetaFields::deserialize(m).ok())
            .unwrap_or_default();
        let mut state = self.state();
        state.fill_object_ref(&meta);
        if self.shared.level >= Level::Request {
            let omit = state.config.omit_managed_fields;
            state.event.request_object = raw_of(object, omit);
        }
    }

    /// [`set_request_object`](Self::set_request_object) for a body already encoded as JSON.
    pub fn set_request_object_json(&self, json: &[u8]) {
        let meta = serde_json::from_slice::<MetadataOnly>(json)
            .map(|m| m.metadata)
            .unwrap_or_default();
        let mut state = self.state();
        state.fill_object_ref(&meta);
        if self.shared.level >= Level::Request {
            let omit = state.config.omit_managed_fields;
            state.event.request_object = raw_of_json(json, omit);
        }
    }

    /// Records a patch request's body as sent (JSON, or YAML for apply patches), at level
    /// `Request` and above.
    pub fn set_request_patch(&self, patch: &[u8]) {
        if self.shared.level < Level::Request {
            return;
        }
        let raw = match raw_of_json(patch, false) {
            Some(raw) => Some(raw),
            None => std::str::from_utf8(patch)
                .ok()
                .and_then(|text| genplane_apimachinery::yaml::from_str(text).ok())
                .and_then(|value| raw_of(&value, false)),
        };
        self.state().event.request_object = raw;
    }

    /// Records the response body: a `Status` sets `responseStatus` (status, message, reason,
    /// details, code); at level `RequestResponse` the body itself is recorded (without managed
    /// fields when the policy says so).
    pub fn set_response_object(&self, object: &Value) {
        let mut state = self.state();
        if is_status(object) {
            set_status(&mut state, ResponseStatus::from_status(object));
        }
        if self.shared.level >= Level::RequestResponse {
            let omit = state.config.omit_managed_fields;
            state.event.response_object = raw_of(object, omit);
        }
    }

    /// [`set_response_object`](Self::set_response_object) for a body already encoded as JSON
    /// (the bytes are recorded as they are unless managed fields must go).
    pub fn set_response_object_json(&self, json: &[u8]) {
        // Only a body mentioning "Status" can be one: others are not parsed at all.
        let maybe_status = json.windows(8).any(|w| w == b"\"Status\"");
        let value = if maybe_status {
            serde_json::from_slice::<Value>(json).ok()
        } else {
            None
        };
        let mut state = self.state();
        if let Some(value) = &value
            && is_status(value)
        {
            set_status(&mut state, ResponseStatus::from_status(value));
        }
        if self.shared.level >= Level::RequestResponse {
            let omit = state.config.omit_managed_fields;
            state.event.response_object = raw_of_json(json, omit);
        }
    }

    /// Records the response code when the response headers are written (upstream's
    /// `WriteHeader`); for long-running requests this writes the `ResponseStarted` event.
    /// Only the first call counts.
    pub fn response_started(&self, code: u16) {
        let mut state = self.state();
        if state.code_seen || state.done {
            return;
        }
        state.code_seen = true;
        state
            .event
            .response_status
            .get_or_insert_with(ResponseStatus::default)
            .code = i32::from(code);
        if state.long_running {
            state.emit(Stage::ResponseStarted);
        }
    }

    /// Writes the `ResponseComplete` event (once; later calls and drops do nothing).
    pub fn finish(&self) {
        self.state().complete();
    }

    /// Writes the `Panic` event with status 500 `APIServer panic'd: <message>` (once).
    pub fn finish_panicked(&self, message: &str) {
        self.state().panicked(message);
    }
}

fn set_status(state: &mut State, mut status: ResponseStatus) {
    if let Some(existing) = &state.event.response_status
        && state.code_seen
    {
        // The code written on the wire wins over the one in the body.
        status.code = existing.code;
    }
    state.event.response_status = Some(status);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::attributes::ResourceAttributes;
    use crate::policy::{PolicyRule, StageSet};

    fn alice() -> UserInfo {
        UserInfo::authenticated("alice", vec!["dev".into()])
    }

    fn auditor(level: Level, omit: &[Stage], omit_managed: bool) -> (Auditor, Arc<MemorySink>) {
        let sink = Arc::new(MemorySink::new());
        let policy = Policy {
            rules: vec![PolicyRule {
                omit_stages: omit.iter().copied().collect(),
                ..PolicyRule::at(level)
            }],
            omit_stages: StageSet::EMPTY,
            omit_managed_fields: omit_managed,
        };
        (Auditor::new(policy, sink.clone()), sink)
    }

    fn create_secret<'a>(user: &'a UserInfo) -> RequestAttributes<'a> {
        RequestAttributes {
            resource: Some(ResourceAttributes {
                api_group: "",
                api_version: "v1",
                resource: "secrets",
                subresource: "",
                namespace: "default",
                name: "",
            }),
            user_agent: "kubectl/v1.33.0 (linux/amd64) kubernetes/abcdef",
            source_ips: crate::SourceIps {
                remote: Some("127.0.0.1".parse().expect("ip")),
                ..Default::default()
            },
            audit_id: Some("0b7c1d55-4a4f-4a6c-9d0f-3b0e5e2bd0c1"),
            ..RequestAttributes::new(user, "create", "/api/v1/namespaces/default/secrets")
        }
    }

    fn secret() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "db", "namespace": "default",
                         "managedFields": [{"manager": "kubectl"}]},
            "data": {"password": "aHVudGVyMg=="}
        })
    }

    fn lines(sink: &MemorySink) -> Vec<Value> {
        sink.events()
            .iter()
            .map(|e| serde_json::to_value(e).expect("json"))
            .collect()
    }

    fn run_create(auditor: &Auditor, user: &UserInfo) {
        let record = auditor.begin(&create_secret(user)).expect("audited");
        record.annotate(DECISION_ANNOTATION, DECISION_ALLOW);
        record.annotate(REASON_ANNOTATION, "");
        record.set_request_object(&secret());
        let mut created = secret();
        created["metadata"]["uid"] = json!("u-1");
        created["metadata"]["resourceVersion"] = json!("7");
        record.set_response_object(&created);
        record.response_started(201);
        record.finish();
    }

    #[test]
    fn metadata_events_have_no_bodies_and_no_secret_data() {
        let (auditor, sink) = auditor(Level::Metadata, &[], false);
        let user = alice();
        run_create(&auditor, &user);
        let events = sink.events();
        assert_eq!(
            events.iter().map(|e| e.stage).collect::<Vec<_>>(),
            [Stage::RequestReceived, Stage::ResponseComplete]
        );
        let complete = serde_json::to_string(&events[1]).expect("json");
        assert!(!complete.contains("aHVudGVyMg=="), "{complete}");
        assert!(!complete.contains("requestObject"));
        assert!(!complete.contains("responseObject"));
        let v: Value = serde_json::from_str(&complete).expect("json");
        assert_eq!(
            v["objectRef"],
            json!({"resource": "secrets", "namespace": "default", "name": "db", "apiVersion": "v1"})
        );
        assert_eq!(v["responseStatus"], json!({"metadata": {}, "code": 201}));
        assert_eq!(
            v["annotations"],
            json!({"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": ""})
        );
    }

    #[test]
    fn event_json_has_upstreams_field_order() {
        let (auditor, sink) = auditor(Level::RequestResponse, &[], false);
        let user = alice();
        run_create(&auditor, &user);
        let text = serde_json::to_string(&sink.events()[1]).expect("json");
        let keys = [
            "\"kind\":\"Event\"",
            "\"apiVersion\":\"audit.k8s.io/v1\"",
            "\"level\":\"RequestResponse\"",
            "\"auditID\":\"0b7c1d55-4a4f-4a6c-9d0f-3b0e5e2bd0c1\"",
            "\"stage\":\"ResponseComplete\"",
            "\"requestURI\":\"/api/v1/namespaces/default/secrets\"",
            "\"verb\":\"create\"",
            "\"user\":{\"username\":\"alice\",\"groups\":[\"dev\",\"system:authenticated\"]}",
            "\"sourceIPs\":[\"127.0.0.1\"]",
            "\"userAgent\":\"kubectl/v1.33.0 (linux/amd64) kubernetes/abcdef\"",
            "\"objectRef\":{",
            "\"responseStatus\":{",
            "\"requestObject\":{",
            "\"responseObject\":{",
            "\"requestReceivedTimestamp\":\"",
            "\"stageTimestamp\":\"",
            "\"annotations\":{",
        ];
        let mut at = 0;
        for key in keys {
            let found = text[at..]
                .find(key)
                .unwrap_or_else(|| panic!("{key} missing or out of order in {text}"));
            at += found + key.len();
        }
    }

    #[test]
    fn request_level_records_the_request_body_only() {
        let (auditor, sink) = auditor(Level::Request, &[], false);
        let user = alice();
        run_create(&auditor, &user);
        let v = &lines(&sink)[1];
        assert_eq!(v["requestObject"], secret());
        assert!(v.get("responseObject").is_none());
        // The RequestReceived event comes before the body is read.
        assert!(lines(&sink)[0].get("requestObject").is_none());
    }

    #[test]
    fn request_response_level_records_both_bodies() {
        let (auditor, sink) = auditor(Level::RequestResponse, &[], false);
        let user = alice();
        run_create(&auditor, &user);
        let v = &lines(&sink)[1];
        assert_eq!(v["requestObject"], secret());
        assert_eq!(v["responseObject"]["metadata"]["uid"], "u-1");
        assert_eq!(
            v["responseObject"]["metadata"]["managedFields"],
            json!([{"manager": "kubectl"}])
        );
    }

    #[test]
    fn omit_managed_fields_drops_them_from_bodies_and_list_items() {
        let (auditor, sink) = auditor(Level::RequestResponse, &[], true);
        let user = alice();
        run_create(&auditor, &user);
        let v = &lines(&sink)[1];
        assert_eq!(
            v["requestObject"]["metadata"],
            json!({"name": "db", "namespace": "default"})
        );
        assert!(
            v["responseObject"]["metadata"]
                .get("managedFields")
                .is_none()
        );

        let record = auditor
            .begin(&RequestAttributes::new(&user, "list", "/api/v1/secrets"))
            .expect("audited");
        let list = json!({"kind": "SecretList", "apiVersion": "v1", "metadata": {},
            "items": [{"metadata": {"name": "a", "managedFields": [{}]}}]});
        record.set_response_object_json(list.to_string().as_bytes());
        record.finish();
        let v = lines(&sink).pop().expect("event");
        assert_eq!(
            v["responseObject"]["items"][0]["metadata"],
            json!({"name": "a"})
        );
    }

    #[test]
    fn level_none_returns_no_record_and_writes_nothing() {
        let (auditor, sink) = auditor(Level::None, &[], false);
        let user = alice();
        assert!(auditor.begin(&create_secret(&user)).is_none());
        assert!(sink.events().is_empty());
    }

    #[test]
    fn omitted_stages_are_not_written() {
        let (auditor, sink) = auditor(Level::Metadata, &[Stage::RequestReceived], false);
        let user = alice();
        run_create(&auditor, &user);
        assert_eq!(
            sink.events().iter().map(|e| e.stage).collect::<Vec<_>>(),
            [Stage::ResponseComplete]
        );
    }

    #[test]
    fn long_running_requests_get_response_started() {
        let (auditor, sink) = auditor(Level::Metadata, &[], false);
        let user = alice();
        let attrs = RequestAttributes {
            long_running: true,
            ..RequestAttributes::new(&user, "watch", "/api/v1/pods?watch=true")
        };
        let record = auditor.begin(&attrs).expect("audited");
        let body_handle = record.clone();
        record.response_started(200);
        drop(record);
        // The stream is still open: only two events so far.
        assert_eq!(sink.events().len(), 2);
        drop(body_handle);
        let events = sink.events();
        assert_eq!(
            events.iter().map(|e| e.stage).collect::<Vec<_>>(),
            [
                Stage::RequestReceived,
                Stage::ResponseStarted,
                Stage::ResponseComplete
            ]
        );
        let code = |e: &Event| e.response_status.as_ref().map(|s| s.code);
        assert_eq!(code(&events[1]), Some(200));
        assert_eq!(code(&events[2]), Some(200));
        assert_eq!(
            events[0].stage_timestamp,
            events[0].request_received_timestamp
        );
        assert!(events[0].response_status.is_none());
    }

    #[test]
    fn short_requests_never_get_response_started() {
        let (auditor, sink) = auditor(Level::Metadata, &[], false);
        let user = alice();
        let record = auditor
            .begin(&RequestAttributes::new(
                &user,
                "get",
                "/api/v1/namespaces/a/pods/b",
            ))
            .expect("audited");
        record.set_response_object(&json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "pods \"b\" not found", "reason": "NotFound",
            "details": {"name": "b", "kind": "pods"}, "code": 404}));
        record.response_started(404);
        record.finish();
        record.finish();
        let events = sink.events();
        assert_eq!(
            events.iter().map(|e| e.stage).collect::<Vec<_>>(),
            [Stage::RequestReceived, Stage::ResponseComplete]
        );
        assert_eq!(
            serde_json::to_value(&events[1].response_status).expect("json"),
            json!({"metadata": {}, "status": "Failure", "message": "pods \"b\" not found",
                   "reason": "NotFound", "details": {"name": "b", "kind": "pods"}, "code": 404})
        );
    }

    #[test]
    fn status_bodies_given_as_json_set_the_response_status() {
        let (auditor, sink) = auditor(Level::Metadata, &[], false);
        let user = alice();
        let record = auditor
            .begin(&RequestAttributes::new(
                &user,
                "delete",
                "/api/v1/namespaces/a",
            ))
            .expect("audited");
        record.response_started(403);
        record.set_response_object_json(
            br#"{"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "forbidden", "reason": "Forbidden", "code": 403}"#,
        );
        record.finish();
        let v = lines(&sink).pop().expect("event");
        assert_eq!(
            v["responseStatus"],
            json!({"metadata": {}, "status": "Failure", "message": "forbidden",
                   "reason": "Forbidden", "code": 403})
        );
        assert!(v.get("responseObject").is_none());
    }

    #[test]
    fn dropped_records_complete_as_connection_closed_early() {
        let (auditor, sink) = auditor(Level::Metadata, &[], false);
        let user = alice();
        let attrs = RequestAttributes {
            long_running: true,
            ..RequestAttributes::new(&user, "watch", "/api/v1/pods?watch=true")
        };
        drop(auditor.begin(&attrs));
        let events = sink.events();
        assert_eq!(
            events.iter().map(|e| e.stage).collect::<Vec<_>>(),
            [
                Stage::RequestReceived,
                Stage::ResponseStarted,
                Stage::ResponseComplete
            ]
        );
        assert_eq!(
            serde_json::to_value(&events[2].response_status).expect("json"),
            json!({"metadata": {}, "status": "Success", "message": "Connection closed early",
                   "code": 200})
        );
    }

    #[test]
    fn panics_are_recorded() {
        let (auditor, sink) = auditor(Level::Metadata, &[], false);
        let user = alice();
        let record = auditor
            .begin(&RequestAttributes::new(&user, "get", "/boom"))
            .expect("audited");
        record.finish_panicked("index out of range");
        drop(record);
        let events = sink.events();
        assert_eq!(events.len(), 2);
        assert_eq!(events[1].stage, Stage::Panic);
        assert_eq!(
            serde_json::to_value(&events[1].response_status).expect("json"),
            json!({"metadata": {}, "status": "Failure",
                   "message": "APIServer panic'd: index out of range",
                   "reason": "InternalError", "code": 500})
        );

        let unwinding = auditor
            .begin(&RequestAttributes::new(&user, "get", "/boom"))
            .expect("audited");
        let caught = auditor
            .begin(&RequestAttributes::new(&user, "get", "/boom"))
            .expect("audited");
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            let _held = unwinding;
            panic!("handler bug {}", 7);
        }));
        let payload = result.expect_err("it panicked");
        assert_eq!(sink.events().last().map(|e| e.stage), Some(Stage::Panic));
        caught.finish_panicked(panic_message(payload.as_ref()));
        let last = sink.events().pop().expect("event");
        assert_eq!(
            last.response_status.map(|s| s.message),
            Some("APIServer panic'd: handler bug 7".to_owned())
        );
    }

    #[test]
    fn annotations_keep_the_first_value_and_impersonation_is_recorded() {
        let (auditor, sink) = auditor(Level::Metadata, &[], false);
        let user = alice();
        let record = auditor
            .begin(&RequestAttributes::new(&user, "get", "/api"))
            .expect("audited");
        record.annotate("a", "1");
        record.annotate("a", "2");
        record.set_impersonated_user(&UserInfo::authenticated("bob", vec![]));
        record.finish();
        let v = lines(&sink).pop().expect("event");
        assert_eq!(v["annotations"], json!({"a": "1"}));
        assert_eq!(
            v["impersonatedUser"],
            json!({"username": "bob", "groups": ["system:authenticated"]})
        );
        assert!(v.get("objectRef").is_none());
    }

    #[test]
    fn patches_are_recorded_as_sent() {
        let (auditor, sink) = auditor(Level::Request, &[], false);
        let user = alice();
        let record = auditor
            .begin(&RequestAttributes::new(
                &user,
                "patch",
                "/api/v1/namespaces/a/configmaps/b",
            ))
            .expect("audited");
        record.set_request_patch(br#"{"data":{"k":"v"}}"#);
        record.finish();
        assert_eq!(
            lines(&sink)[1]["requestObject"],
            json!({"data": {"k": "v"}})
        );
        let record = auditor
            .begin(&RequestAttributes::new(
                &user,
                "patch",
                "/api/v1/namespaces/a/configmaps/b",
            ))
            .expect("audited");
        record.set_request_patch(b"data:\n  k: v\n");
        record.finish();
        assert_eq!(
            lines(&sink)[3]["requestObject"],
            json!({"data": {"k": "v"}})
        );
    }

    #[test]
    fn failed_authentication_writes_one_response_started_event() {
        let (audit, sink) = auditor(Level::Metadata, &[], false);
        let nobody = UserInfo::default();
        let attrs = RequestAttributes::new(&nobody, "get", "/api/v1/namespaces");
        assert!(audit.failed_authentication(&attrs, &["bearer"], 401));
        assert!(audit.failed_authentication(&attrs, &[], 401));
        let events = lines(&sink);
        assert_eq!(events.len(), 2);
        assert_eq!(events[0]["stage"], "ResponseStarted");
        assert_eq!(events[0]["user"], json!({}));
        assert_eq!(
            events[0]["responseStatus"],
            json!({"metadata": {}, "message": "Authentication failed, attempted: bearer",
                   "code": 401})
        );
        assert_eq!(
            events[1]["responseStatus"]["message"],
            "Authentication failed, no credentials provided"
        );

        let (quiet, sink) = auditor(Level::Metadata, &[Stage::ResponseStarted], false);
        assert!(!quiet.failed_authentication(&attrs, &["x509"], 401));
        assert!(sink.events().is_empty());
    }

    #[test]
    fn records_can_live_in_request_extensions() {
        fn extension<T: Clone + Send + Sync + 'static>() {}
        extension::<AuditRecord>();
        extension::<Auditor>();
    }

    #[test]
    fn long_user_agents_are_truncated() {
        let agent = "é".repeat(600);
        let truncated = truncate_user_agent(&agent);
        assert!(truncated.ends_with("...TRUNCATED"));
        assert_eq!(truncated.len(), 1024 + "...TRUNCATED".len());
        assert_eq!(truncate_user_agent("kubectl"), "kubectl");
    }
}
