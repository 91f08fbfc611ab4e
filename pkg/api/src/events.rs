//! events.k8s.io/v1 Events: the same stored objects as core/v1 events, converted both ways as
//! upstream's `Convert_v1_Event_To_core_Event` and `Convert_core_Event_To_v1_Event` do.
//!
//! | events.k8s.io/v1 | core/v1 |
//! |---|---|
//! | `regarding` | `involvedObject` |
//! | `note` | `message` |
//! | `deprecatedSource` | `source` |
//! | `deprecatedFirstTimestamp`, `deprecatedLastTimestamp`, `deprecatedCount` | `firstTimestamp`, `lastTimestamp`, `count` |
//! | `reportingController` | `reportingComponent` |
//! | `metadata`, `eventTime`, `series`, `action`, `reason`, `related`, `reportingInstance`, `type` | the same |
//!
//! Values are carried over as they are; fields neither version has are dropped (as a decode into
//! Go types drops them). Validation converts to the core form and applies
//! [`crate::core::event`]'s rules for an events.k8s.io/v1 request, so field paths name the core
//! fields (`involvedObject.namespace`, `message`) where upstream's do.

use std::collections::BTreeMap;

use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::validation::field::ErrorList;
use serde_json::{Map, Value};

use crate::core::event::{self, EVENT_SERIES, EVENT_SOURCE, RequestVersion};
use crate::decode::{self, Decoded, OBJECT_META, OBJECT_REFERENCE, Struct, Type};
use crate::util;

/// The group.
pub const GROUP: &str = "events.k8s.io";
/// The served `apiVersion`.
pub const API_VERSION: &str = "events.k8s.io/v1";

/// The shape of an events.k8s.io/v1 Event.
pub static SCHEMA: Struct = Struct {
    name: "Event",
    fields: &[
        ("apiVersion", Type::String),
        ("kind", Type::String),
        ("metadata", Type::Struct(&OBJECT_META)),
        ("eventTime", Type::MicroTime),
        ("series", Type::Struct(&EVENT_SERIES)),
        ("reportingController", Type::String),
        ("reportingInstance", Type::String),
        ("action", Type::String),
        ("reason", Type::String),
        ("regarding", Type::Struct(&OBJECT_REFERENCE)),
        ("related", Type::Struct(&OBJECT_REFERENCE)),
        ("note", Type::String),
        ("type", Type::String),
        ("deprecatedSource", Type::Struct(&EVENT_SOURCE)),
        ("deprecatedFirstTimestamp", Type::Time),
        ("deprecatedLastTimestamp", Type::Time),
        ("deprecatedCount", Type::Int32),
    ],
};

/// (events.k8s.io/v1 name, core/v1 name) of every field besides `apiVersion` and `kind`.
const FIELD_MAP: &[(&str, &str)] = &[
    ("metadata", "metadata"),
    ("eventTime", "eventTime"),
    ("series", "series"),
    ("reportingController", "reportingComponent"),
    ("reportingInstance", "reportingInstance"),
    ("action", "action"),
    ("reason", "reason"),
    ("regarding", "involvedObject"),
    ("related", "related"),
    ("note", "message"),
    ("type", "type"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

fn convert(object: &Value, api_version: &str, from_events: bool) -> Value {
    let mut out = Map::new();
    out.insert("apiVersion".to_owned(), Value::from(api_version));
    out.insert("kind".to_owned(), Value::from("Event"));
    for (events_name, core_name) in FIELD_MAP {
        let (from, to) = if from_events {
            (events_name, core_name)
        } else {
            (core_name, events_name)
        };
        if let Some(value) = object.get(*from) {
            out.insert((*to).to_owned(), value.clone());
        }
    }
    Value::Object(out)
}

/// Converts an events.k8s.io/v1 Event to its core/v1 (stored) form.
pub fn to_core(object: Value) -> Value {
    convert(&object, "v1", true)
}

/// Converts a core/v1 Event to its events.k8s.io/v1 form.
pub fn from_core(object: Value) -> Value {
    convert(&object, API_VERSION, false)
}

/// Type-checks and normalizes an events.k8s.io/v1 Event.
pub fn decode(object: &Value) -> Result<Decoded, ApiError> {
    decode::decode(object, &SCHEMA).map_err(|e| e.to_api_error("Event", API_VERSION))
}

fn decode_core(
    object: &Value,
) -> Result<(genplane_apimachinery::meta::ObjectMeta, event::Event), ApiError> {
    let decoded = decode(object)?;
    let core = to_core(decoded.object);
    util::decode_typed(&core, &event::SCHEMA, "Event", API_VERSION)
}

/// Validates a new events.k8s.io/v1 Event (the strict rules; see [`crate::core::event`]).
pub fn validate(object: &Value) -> Result<ErrorList, ApiError> {
    let (meta, ev) = decode_core(object)?;
    Ok(event::validate_event(&meta, &ev, RequestVersion::EventsV1))
}

/// Validates an update of an events.k8s.io/v1 Event.
pub fn validate_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let (new_meta, new_ev) = decode_core(new)?;
    let (old_meta, old_ev) = decode_core(old)?;
    Ok(event::validate_event_update(
        &new_meta,
        &new_ev,
        &old_meta,
        &old_ev,
        RequestVersion::EventsV1,
    ))
}

/// Field-selector labels of events.k8s.io/v1 events: the core ones renamed as the fields are
/// (`regarding.*` for `involvedObject.*`, `reportingController` for `reportingComponent`).
pub const FIELD_SELECTORS: &[&str] = &[
    "regarding.kind",
    "regarding.namespace",
    "regarding.name",
    "regarding.uid",
    "regarding.apiVersion",
    "regarding.resourceVersion",
    "regarding.fieldPath",
    "reason",
    "reportingController",
    "source",
    "type",
    "metadata.namespace",
    "metadata.name",
];

/// Field-selector values of an events.k8s.io/v1 event; `source` is `deprecatedSource.component`,
/// or `reportingController` when that is empty.
pub fn field_values(object: &Value) -> BTreeMap<&'static str, String> {
    let core = event::field_values(&to_core(object.clone()));
    let rename = |label: &str| -> Option<&'static str> {
        FIELD_SELECTORS.iter().copied().find(|l| {
            *l == label
                .replace("involvedObject.", "regarding.")
                .replace("reportingComponent", "reportingController")
        })
    };
    core.into_iter()
        .filter_map(|(label, value)| rename(label).map(|l| (l, value)))
        .collect()
}

/// The table cells: the core/v1 event's (the same printer serves both versions).
pub fn row(object: &Value, now: i64) -> Vec<Value> {
    event::row(&to_core(object.clone()), now)
}
