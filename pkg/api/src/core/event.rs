//! Events (`core/v1`, namespaced). The same stored objects are served as events.k8s.io/v1
//! events by [`crate::events`], which converts and then applies these rules.
//!
//! Upstream validation (`ValidateEventCreate`, `ValidateEventUpdate` and the legacy rules they
//! share), by the API version of the request:
//! - always (the "legacy" rules):
//!   - an event without `eventTime` (old style): `involvedObject.namespace` must equal the
//!     event's namespace, except that an empty one is accepted in namespace `default`;
//!   - an event with `eventTime` (new style): an empty `involvedObject.namespace` is accepted
//!     only in `default` and `kube-system`; `reportingController` (core/v1:
//!     `reportingComponent`) is required and a qualified name; `reportingInstance`, `action` and
//!     `reason` are required and at most 128 characters; the message at most 1024;
//!   - the event's namespace is a DNS-1123 subdomain (reported at `namespace`).
//! - core/v1 adds nothing else (backwards compatibility): names only have to be path segments,
//!   as for every resource, and an update checks only the metadata rules besides.
//! - events.k8s.io/v1 adds, on create: DNS-1123 subdomain names; `series.count` at least 2 and
//!   `series.lastObservedTime` required when `series` is set; `eventTime` required; `type`
//!   `Normal` or `Warning`; the deprecated fields unset. On update: the series rules when the
//!   series changed, and every field except the series and metadata immutable (with `eventTime`
//!   compared at microsecond precision).

use std::collections::BTreeMap;

use genplane_apimachinery::codec::decode::{self, Decoded};
use genplane_apimachinery::codec::schema::{Field, Struct, Type};
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::meta::schemas::OBJECT_META;
use genplane_apimachinery::meta::{ObjectMeta, validate_object_meta, validate_object_meta_update};
use genplane_apimachinery::time::{human_duration, parse_time};
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use genplane_apimachinery::validation::{
    NameValidator, is_dns1123_subdomain, is_qualified_name, name_is_dns_subdomain,
    name_is_path_segment,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::FIELD_IMMUTABLE;
use crate::core::OBJECT_REFERENCE;
use crate::table::{self, ColumnDefinition};
use crate::util;

/// The kind.
pub const KIND: &str = "Event";
/// The longest `reportingInstance`.
pub const REPORTING_INSTANCE_LENGTH_LIMIT: usize = 128;
/// The longest `action`.
pub const ACTION_LENGTH_LIMIT: usize = 128;
/// The longest `reason`.
pub const REASON_LENGTH_LIMIT: usize = 128;
/// The longest message (events.k8s.io: `note`).
pub const NOTE_LENGTH_LIMIT: usize = 1024;
/// The event type of things that are fine.
pub const TYPE_NORMAL: &str = "Normal";
/// The event type of things that may be a problem.
pub const TYPE_WARNING: &str = "Warning";

/// The API version a request came in: the rules differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestVersion {
    /// `v1` (core): the lenient, backwards-compatible rules.
    CoreV1,
    /// `events.k8s.io/v1`: the strict rules.
    EventsV1,
}

/// `core/v1.EventSource`.
pub static EVENT_SOURCE: Struct = Struct {
    name: "EventSource",
    fields: &[
        Field::new("component", 1, Type::String),
        Field::new("host", 2, Type::String),
    ],
};

/// `core/v1.EventSeries` (events.k8s.io's has the same fields).
pub static EVENT_SERIES: Struct = Struct {
    name: "EventSeries",
    fields: &[
        Field::new("count", 1, Type::Int32),
        Field::new("lastObservedTime", 2, Type::MicroTime),
    ],
};

/// The shape of a v1 Event.
pub static SCHEMA: Struct = Struct {
    name: "Event",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("involvedObject", 2, Type::Struct(&OBJECT_REFERENCE)),
        Field::new("reason", 3, Type::String),
        Field::new("message", 4, Type::String),
        Field::new("source", 5, Type::Struct(&EVENT_SOURCE)),
        Field::new("firstTimestamp", 6, Type::Time),
        Field::new("lastTimestamp", 7, Type::Time),
        Field::new("count", 8, Type::Int32),
        Field::new("type", 9, Type::String),
        Field::new("eventTime", 10, Type::MicroTime),
        Field::new("series", 11, Type::Struct(&EVENT_SERIES)),
        Field::new("action", 12, Type::String),
        Field::new("related", 13, Type::Struct(&OBJECT_REFERENCE)),
        Field::new("reportingComponent", 14, Type::String),
        Field::new("reportingInstance", 15, Type::String),
    ],
};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct ObjectReference {
    kind: String,
    namespace: String,
    name: String,
    uid: String,
    api_version: String,
    resource_version: String,
    field_path: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct Source {
    component: String,
    host: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Series {
    count: i32,
    last_observed_time: Option<String>,
}

/// An event in its core/v1 form (decoded and normalized).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct Event {
    involved_object: ObjectReference,
    reason: String,
    message: String,
    source: Source,
    first_timestamp: Option<String>,
    last_timestamp: Option<String>,
    count: i32,
    #[serde(rename = "type")]
    type_: String,
    event_time: Option<String>,
    series: Option<Series>,
    action: String,
    related: Option<ObjectReference>,
    reporting_component: String,
    reporting_instance: String,
}

/// Whether a normalized timestamp is Go's zero time (absent, or 0001-01-01T00:00:00Z).
fn is_zero_time(t: Option<&String>) -> bool {
    t.is_none_or(|s| s.starts_with("0001-01-01T00:00:00"))
}

/// Type-checks and normalizes a core/v1 Event.
pub fn decode(object: &Value) -> Result<Decoded, ApiError> {
    decode::decode(object, &SCHEMA).map_err(|e| e.to_api_error(KIND, "v1"))
}

fn legacy(meta: &ObjectMeta, event: &Event, version: RequestVersion) -> ErrorList {
    let mut errors = ErrorList::new();
    let controller_field = match version {
        RequestVersion::CoreV1 => "reportingComponent",
        RequestVersion::EventsV1 => "reportingController",
    };
    let involved_ns = Path::new("involvedObject").child("namespace");
    let namespace = meta.namespace.as_str();
    let mismatch = || {
        Error::invalid(
            &involved_ns,
            event.involved_object.namespace.as_str(),
            "does not match event.namespace",
        )
    };
    if is_zero_time(event.event_time.as_ref()) {
        if event.involved_object.namespace.is_empty() {
            if !namespace.is_empty() && namespace != "default" {
                errors.push(mismatch());
            }
        } else if namespace != event.involved_object.namespace {
            errors.push(mismatch());
        }
    } else {
        if event.involved_object.namespace.is_empty()
            && namespace != "default"
            && namespace != "kube-system"
        {
            errors.push(mismatch());
        }
        let controller = Path::new(controller_field);
        if event.reporting_component.is_empty() {
            errors.push(Error::required(&controller, ""));
        }
        for message in is_qualified_name(&event.reporting_component) {
            errors.push(Error::invalid(
                &controller,
                event.reporting_component.as_str(),
                message,
            ));
        }
        let limits = [
            (
                "reportingInstance",
                &event.reporting_instance,
                REPORTING_INSTANCE_LENGTH_LIMIT,
            ),
            ("action", &event.action, ACTION_LENGTH_LIMIT),
            ("reason", &event.reason, REASON_LENGTH_LIMIT),
        ];
        for (field, value, limit) in limits {
            if value.is_empty() {
                errors.push(Error::required(&Path::new(field), ""));
            }
            if value.len() > limit {
                errors.push(Error::invalid(
                    &Path::new(field),
                    "",
                    format!("can have at most {limit} characters"),
                ));
            }
        }
        if event.message.len() > NOTE_LENGTH_LIMIT {
            errors.push(Error::invalid(
                &Path::new("message"),
                "",
                format!("can have at most {NOTE_LENGTH_LIMIT} characters"),
            ));
        }
    }
    for message in is_dns1123_subdomain(namespace) {
        errors.push(Error::invalid(&Path::new("namespace"), namespace, message));
    }
    errors
}

fn series_rules(event: &Event) -> ErrorList {
    let mut errors = ErrorList::new();
    if let Some(series) = &event.series {
        if series.count < 2 {
            errors.push(Error::invalid(
                &Path::new("series.count"),
                "",
                "should be at least 2",
            ));
        }
        if is_zero_time(series.last_observed_time.as_ref()) {
            errors.push(Error::required(&Path::new("series.lastObservedTime"), ""));
        }
    }
    errors
}

/// Validates a new event in its core/v1 form for a request in `version`.
pub(crate) fn validate_event(
    meta: &ObjectMeta,
    event: &Event,
    version: RequestVersion,
) -> ErrorList {
    let mut errors = legacy(meta, event, version);
    let metadata = Path::new("metadata");
    if version == RequestVersion::CoreV1 {
        // The generic store checks the metadata (names need only be path segments) only when
        // the resource's own rules passed.
        if errors.is_empty() {
            let name: NameValidator = name_is_path_segment;
            errors = validate_object_meta(meta, true, name, &metadata);
        }
        return errors;
    }
    errors.extend(validate_object_meta(
        meta,
        true,
        name_is_dns_subdomain,
        &metadata,
    ));
    errors.extend(series_rules(event));
    if is_zero_time(event.event_time.as_ref()) {
        errors.push(Error::required(&Path::new("eventTime"), ""));
    }
    if event.type_ != TYPE_NORMAL && event.type_ != TYPE_WARNING {
        errors.push(Error::invalid(
            &Path::new("type"),
            "",
            format!("has invalid value: {}", event.type_),
        ));
    }
    let unset = |errors: &mut ErrorList, field: &str, set: bool| {
        if set {
            errors.push(Error::invalid(&Path::new(field), "", "needs to be unset"));
        }
    };
    unset(
        &mut errors,
        "deprecatedFirstTimestamp",
        !is_zero_time(event.first_timestamp.as_ref()),
    );
    unset(
        &mut errors,
        "deprecatedLastTimestamp",
        !is_zero_time(event.last_timestamp.as_ref()),
    );
    unset(&mut errors, "deprecatedCount", event.count != 0);
    unset(
        &mut errors,
        "deprecatedSource",
        !event.source.component.is_empty() || !event.source.host.is_empty(),
    );
    errors
}

/// Validates an update of an event in its core/v1 form for a request in `version`.
pub(crate) fn validate_event_update(
    new_meta: &ObjectMeta,
    new: &Event,
    old_meta: &ObjectMeta,
    old: &Event,
    version: RequestVersion,
) -> ErrorList {
    let mut errors = legacy(new_meta, new, version);
    let metadata_errors = validate_object_meta_update(new_meta, old_meta, &Path::new("metadata"));
    if version == RequestVersion::CoreV1 {
        let mut all = metadata_errors;
        all.extend(errors);
        return all;
    }
    errors.extend(metadata_errors);
    if new.series != old.series {
        errors.extend(series_rules(new));
    }
    fn immutable<T: PartialEq + Serialize>(errors: &mut ErrorList, field: &str, new: &T, old: &T) {
        if new != old {
            let value = serde_json::to_value(new).unwrap_or_default();
            errors.push(Error::invalid(&Path::new(field), value, FIELD_IMMUTABLE));
        }
    }
    immutable(
        &mut errors,
        "involvedObject",
        &new.involved_object,
        &old.involved_object,
    );
    immutable(&mut errors, "reason", &new.reason, &old.reason);
    immutable(&mut errors, "message", &new.message, &old.message);
    immutable(&mut errors, "source", &new.source, &old.source);
    immutable(
        &mut errors,
        "firstTimestamp",
        &new.first_timestamp,
        &old.first_timestamp,
    );
    immutable(
        &mut errors,
        "lastTimestamp",
        &new.last_timestamp,
        &old.last_timestamp,
    );
    immutable(&mut errors, "count", &new.count, &old.count);
    // Upstream checks `reason` twice; a changed reason is reported twice.
    immutable(&mut errors, "reason", &new.reason, &old.reason);
    immutable(&mut errors, "type", &new.type_, &old.type_);
    // Decoding already truncated eventTime to microseconds.
    immutable(&mut errors, "eventTime", &new.event_time, &old.event_time);
    immutable(&mut errors, "action", &new.action, &old.action);
    immutable(&mut errors, "related", &new.related, &old.related);
    immutable(
        &mut errors,
        "reportingController",
        &new.reporting_component,
        &old.reporting_component,
    );
    immutable(
        &mut errors,
        "reportingInstance",
        &new.reporting_instance,
        &old.reporting_instance,
    );
    errors
}

/// Validates a new core/v1 Event.
pub fn validate(object: &Value) -> Result<ErrorList, ApiError> {
    let (meta, event) = util::decode_typed::<Event>(object, &SCHEMA, KIND, "v1")?;
    Ok(validate_event(&meta, &event, RequestVersion::CoreV1))
}

/// Validates an update of a core/v1 Event.
pub fn validate_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let (new_meta, new_event) = util::decode_typed::<Event>(new, &SCHEMA, KIND, "v1")?;
    let (old_meta, old_event) = util::decode_typed::<Event>(old, &SCHEMA, KIND, "v1")?;
    Ok(validate_event_update(
        &new_meta,
        &new_event,
        &old_meta,
        &old_event,
        RequestVersion::CoreV1,
    ))
}

/// Field-selector labels of core/v1 events.
pub const FIELD_SELECTORS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
    "metadata.namespace",
    "metadata.name",
];

/// Field-selector values of a core/v1 event; `source` is `source.component`, or
/// `reportingComponent` when that is empty.
pub fn field_values(object: &Value) -> BTreeMap<&'static str, String> {
    let mut fields = util::meta_fields(object, true);
    let s = |path: &[&str]| util::str_at(object, path).to_owned();
    for (label, key) in [
        ("involvedObject.kind", "kind"),
        ("involvedObject.namespace", "namespace"),
        ("involvedObject.name", "name"),
        ("involvedObject.uid", "uid"),
        ("involvedObject.apiVersion", "apiVersion"),
        ("involvedObject.resourceVersion", "resourceVersion"),
        ("involvedObject.fieldPath", "fieldPath"),
    ] {
        fields.insert(label, s(&["involvedObject", key]));
    }
    fields.insert("reason", s(&["reason"]));
    fields.insert("reportingComponent", s(&["reportingComponent"]));
    let mut source = s(&["source", "component"]);
    if source.is_empty() {
        source = s(&["reportingComponent"]);
    }
    fields.insert("source", source);
    fields.insert("type", s(&["type"]));
    fields
}

/// `LAST SEEN TYPE REASON OBJECT MESSAGE`, and with `-o wide` also `SUBOBJECT SOURCE FIRST SEEN
/// COUNT NAME`.
pub const COLUMNS: &[ColumnDefinition] = &[
    table::column(
        "Last Seen",
        "The time at which the most recent occurrence of this event was recorded.",
        0,
    ),
    table::column(
        "Type",
        "Type of this event (Normal, Warning), new types could be added in the future",
        0,
    ),
    table::column(
        "Reason",
        "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
        0,
    ),
    table::column("Object", "The object that this event is about.", 0),
    table::column(
        "Subobject",
        "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement.",
        1,
    ),
    table::column(
        "Source",
        "The component reporting this event. Should be a short machine understandable string.",
        1,
    ),
    table::column(
        "Message",
        "A human-readable description of the status of this operation.",
        0,
    ),
    table::column(
        "First Seen",
        "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
        1,
    ),
    table::column("Count", "The number of times this event has occurred.", 1),
    ColumnDefinition {
        priority: 1,
        ..table::NAME
    },
];

fn since(timestamp: Option<&str>, now: i64) -> Option<String> {
    timestamp
        .and_then(parse_time)
        .filter(|t| t.seconds != ZERO_TIME_SECONDS)
        .map(|t| human_duration(now - t.seconds))
}

/// Unix seconds of Go's zero time, 0001-01-01T00:00:00Z.
const ZERO_TIME_SECONDS: i64 = -62_135_596_800;

/// The cells of a core/v1 event (the wide form, as the server prints it): last seen (the
/// series' last observation, else `lastTimestamp`, else first seen), type, reason, object
/// (`kind/name`, lower-cased kind), subobject, source (`component, host`, falling back to
/// `reportingComponent` and `reportingInstance`), message, first seen (`firstTimestamp`, else
/// `eventTime`), count (the series' count, else `count`, at least 1), name.
pub fn row(object: &Value, now: i64) -> Vec<Value> {
    let s = |path: &[&str]| util::str_at(object, path);
    let time = |key: &str| object.get(key).and_then(Value::as_str);
    let unknown = || "<unknown>".to_owned();
    let first = since(time("firstTimestamp"), now)
        .or_else(|| since(time("eventTime"), now))
        .unwrap_or_else(unknown);
    let mut last = since(time("lastTimestamp"), now).unwrap_or_else(|| first.clone());
    let mut count = object.get("count").and_then(Value::as_i64).unwrap_or(0);
    match object.get("series").filter(|s| s.is_object()) {
        Some(series) => {
            last = since(series.get("lastObservedTime").and_then(Value::as_str), now)
                .unwrap_or_else(unknown);
            count = series.get("count").and_then(Value::as_i64).unwrap_or(0);
        }
        None if count == 0 => count = 1,
        None => {}
    }
    let kind = s(&["involvedObject", "kind"]).to_lowercase();
    let name = s(&["involvedObject", "name"]);
    let target = if name.is_empty() {
        kind
    } else {
        format!("{kind}/{name}")
    };
    let first_non_empty = |a: &str, b: &str| {
        if a.is_empty() {
            b.to_owned()
        } else {
            a.to_owned()
        }
    };
    let component = first_non_empty(s(&["source", "component"]), s(&["reportingComponent"]));
    let instance = first_non_empty(s(&["source", "host"]), s(&["reportingInstance"]));
    let source = if instance.is_empty() {
        component
    } else {
        format!("{component}, {instance}")
    };
    vec![
        Value::from(last),
        Value::from(s(&["type"])),
        Value::from(s(&["reason"])),
        Value::from(target),
        Value::from(s(&["involvedObject", "fieldPath"])),
        Value::from(source),
        Value::from(s(&["message"]).trim()),
        Value::from(first),
        Value::from(count),
        util::name(object),
    ]
}

/// This resource in the catalog: everything the server needs to serve it.
pub const INFO: crate::resource::ResourceInfo = crate::resource::ResourceInfo {
    group: "",
    version: "v1",
    kind: "Event",
    list_kind: "EventList",
    resource: "events",
    singular: "event",
    short_names: &["ev"],
    namespaced: true,
    create_on_update: true,
    verbs: crate::resource::ALL_VERBS,
    subresources: &[],
    categories: &[],
    storage_prefix: "events",
    storage_api_version: "v1",
    schema: &SCHEMA,
    protobuf: true,
    feature_gate: None,
    extensions: &[],
    openapi_schema: crate::schema::schema_of::<k8s_openapi::api::core::v1::Event>,
    hooks: crate::resource::Hooks {
        decode,
        default: crate::resource::no_default,
        prepare_for_create: crate::resource::no_prepare,
        prepare_for_update: crate::resource::no_prepare_update,
        validate,
        validate_update,
        to_storage: None,
        from_storage: None,
        field_selectors: FIELD_SELECTORS,
        field_values,
        columns: COLUMNS,
        row,
        pending_finalization: crate::resource::nothing_pending,
        mark_deleting: crate::resource::no_default,
        grace_period: crate::resource::not_graceful,
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn summary(errors: &ErrorList) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    fn old_style(extra: Value) -> Value {
        let mut base = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "web.17a3b", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default", "uid": "u1"},
            "reason": "Started", "message": "Started container", "type": "Normal",
            "source": {"component": "kubelet", "host": "node-1"},
            "firstTimestamp": "1970-01-01T00:00:00Z", "lastTimestamp": "1970-01-01T00:01:00Z", "count": 3
        });
        if let (Some(b), Value::Object(e)) = (base.as_object_mut(), extra) {
            b.extend(e);
        }
        base
    }

    fn new_style(extra: Value) -> Value {
        let mut base = json!({
            "metadata": {"name": "web.17a3c", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default"},
            "eventTime": "1970-01-01T00:00:00.000000Z", "reportingComponent": "example.com/ctrl",
            "reportingInstance": "ctrl-1", "action": "Scale", "reason": "Scaled", "type": "Normal"
        });
        if let (Some(b), Value::Object(e)) = (base.as_object_mut(), extra) {
            b.extend(e);
        }
        base
    }

    #[test]
    fn core_create_rules() {
        let long = "x".repeat(129);
        let cases: Vec<(&str, Value, Vec<&str>)> = vec![
            ("old style", old_style(json!({})), vec![]),
            (
                "old style, object in another namespace",
                old_style(
                    json!({"involvedObject": {"kind": "Pod", "name": "web", "namespace": "other"}}),
                ),
                vec![
                    "involvedObject.namespace: Invalid value: \"other\": does not match event.namespace",
                ],
            ),
            (
                "old style, cluster object in default",
                old_style(json!({"involvedObject": {"kind": "Node", "name": "n1"}})),
                vec![],
            ),
            (
                "old style, cluster object elsewhere",
                old_style(
                    json!({"metadata": {"name": "e", "namespace": "team"}, "involvedObject": {"kind": "Node", "name": "n1"}}),
                ),
                vec![
                    "involvedObject.namespace: Invalid value: \"\": does not match event.namespace",
                ],
            ),
            (
                "core names are path segments",
                old_style(json!({"metadata": {"name": "Web_Event:1", "namespace": "default"}})),
                vec![],
            ),
            (
                "but not slashes",
                old_style(json!({"metadata": {"name": "a/b", "namespace": "default"}})),
                vec!["metadata.name: Invalid value: \"a/b\": may not contain '/'"],
            ),
            (
                "any type in core",
                old_style(json!({"type": "Fancy"})),
                vec![],
            ),
            ("new style", new_style(json!({})), vec![]),
            (
                "new style, cluster object in kube-system",
                new_style(
                    json!({"metadata": {"name": "e", "namespace": "kube-system"}, "involvedObject": {"kind": "Node", "name": "n1"}}),
                ),
                vec![],
            ),
            (
                "new style, cluster object elsewhere",
                new_style(
                    json!({"metadata": {"name": "e", "namespace": "team"}, "involvedObject": {"kind": "Node", "name": "n1"}}),
                ),
                vec![
                    "involvedObject.namespace: Invalid value: \"\": does not match event.namespace",
                ],
            ),
            (
                "new style needs reporting fields",
                new_style(
                    json!({"reportingComponent": "", "reportingInstance": "", "action": "", "reason": ""}),
                ),
                vec![
                    "reportingComponent: Required value",
                    "reportingComponent: Invalid value: \"\": name part must be non-empty",
                    "reportingInstance: Required value",
                    "action: Required value",
                    "reason: Required value",
                ],
            ),
            (
                "new style limits",
                new_style(
                    json!({"reportingInstance": long, "action": long, "reason": long, "message": "m".repeat(1025)}),
                ),
                vec![
                    "reportingInstance: Invalid value: \"\": can have at most 128 characters",
                    "action: Invalid value: \"\": can have at most 128 characters",
                    "reason: Invalid value: \"\": can have at most 128 characters",
                    "message: Invalid value: \"\": can have at most 1024 characters",
                ],
            ),
            (
                "bad controller name",
                new_style(json!({"reportingComponent": "bad name"})),
                vec![
                    "reportingComponent: Invalid value: \"bad name\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                ],
            ),
        ];
        for (name, object, want) in cases {
            assert_eq!(summary(&validate(&object).unwrap()), want, "{name}");
        }
        let err = validate(&old_style(json!({"count": "3"}))).unwrap_err();
        assert_eq!(
            err.message,
            "Event in version \"v1\" cannot be handled as a Event: json: cannot unmarshal string into field Event.count of type int32"
        );
        let err = validate(&new_style(json!({"eventTime": "1970-01-01T00:00:00Z"}))).unwrap_err();
        assert!(
            err.message.contains("field Event.eventTime: cannot parse"),
            "{}",
            err.message
        );
    }

    #[test]
    fn core_updates_check_only_metadata_and_legacy_rules() {
        let old = old_style(json!({}));
        let new = old_style(
            json!({"count": 4, "lastTimestamp": "1970-01-01T00:02:00Z", "message": "again"}),
        );
        assert!(validate_update(&new, &old).unwrap().is_empty());
        let moved =
            old_style(json!({"involvedObject": {"kind": "Pod", "name": "web", "namespace": "x"}}));
        assert_eq!(
            summary(&validate_update(&moved, &old).unwrap()),
            ["involvedObject.namespace: Invalid value: \"x\": does not match event.namespace"]
        );
    }

    #[test]
    fn field_values_follow_upstream() {
        let fields = field_values(&old_style(json!({})));
        assert_eq!(fields.len(), FIELD_SELECTORS.len());
        for label in FIELD_SELECTORS {
            assert!(fields.contains_key(label), "{label}");
        }
        assert_eq!(fields["involvedObject.kind"], "Pod");
        assert_eq!(fields["involvedObject.uid"], "u1");
        assert_eq!(fields["source"], "kubelet");
        assert_eq!(fields["reportingComponent"], "");
        assert_eq!(fields["type"], "Normal");
        let fields = field_values(&new_style(json!({})));
        assert_eq!(
            fields["source"], "example.com/ctrl",
            "source falls back to reportingComponent"
        );
        assert_eq!(fields["reportingComponent"], "example.com/ctrl");
    }

    #[test]
    fn table_rows() {
        let names: Vec<(&str, i32)> = COLUMNS.iter().map(|c| (c.name, c.priority)).collect();
        assert_eq!(
            names,
            [
                ("Last Seen", 0),
                ("Type", 0),
                ("Reason", 0),
                ("Object", 0),
                ("Subobject", 1),
                ("Source", 1),
                ("Message", 0),
                ("First Seen", 1),
                ("Count", 1),
                ("Name", 1)
            ]
        );
        assert_eq!(
            row(
                &old_style(
                    json!({"message": " Started container \n", "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default", "fieldPath": "spec.containers{app}"}})
                ),
                600
            ),
            vec![
                json!("9m"),
                json!("Normal"),
                json!("Started"),
                json!("pod/web"),
                json!("spec.containers{app}"),
                json!("kubelet, node-1"),
                json!("Started container"),
                json!("10m"),
                json!(3),
                json!("web.17a3b")
            ]
        );
        assert_eq!(
            row(&new_style(json!({})), 30),
            vec![
                json!("30s"),
                json!("Normal"),
                json!("Scaled"),
                json!("pod/web"),
                json!(""),
                json!("example.com/ctrl, ctrl-1"),
                json!(""),
                json!("30s"),
                json!(1),
                json!("web.17a3c")
            ]
        );
        let series = new_style(
            json!({"series": {"count": 5, "lastObservedTime": "1970-01-01T00:00:20.000000Z"}, "involvedObject": {"kind": "Node"}}),
        );
        assert_eq!(
            row(&series, 30)[..4],
            [
                json!("10s"),
                json!("Normal"),
                json!("Scaled"),
                json!("node")
            ]
        );
        assert_eq!(row(&series, 30)[8], json!(5));
        let bare = json!({"metadata": {"name": "e"}, "involvedObject": {}});
        assert_eq!(row(&bare, 30)[0], json!("<unknown>"));
        assert_eq!(row(&bare, 30)[7], json!("<unknown>"));
        assert_eq!(row(&bare, 30)[8], json!(1));
    }
}
