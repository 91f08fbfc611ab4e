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

use genplane_apimachinery::codec::decode::{self, Decoded};
use genplane_apimachinery::codec::schema::{Field, Struct, Type};
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::meta::schemas::OBJECT_META;
use genplane_apimachinery::validation::field::ErrorList;
use serde_json::{Map, Value};

use crate::core::OBJECT_REFERENCE;
use crate::core::event::{self, EVENT_SERIES, EVENT_SOURCE, RequestVersion};
use crate::util;

/// The group.
pub const GROUP: &str = "events.k8s.io";
/// The served `apiVersion`.
pub const API_VERSION: &str = "events.k8s.io/v1";

/// The shape of an events.k8s.io/v1 Event.
pub static SCHEMA: Struct = Struct {
    name: "Event",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("eventTime", 2, Type::MicroTime),
        Field::new("series", 3, Type::Struct(&EVENT_SERIES)),
        Field::new("reportingController", 4, Type::String),
        Field::new("reportingInstance", 5, Type::String),
        Field::new("action", 6, Type::String),
        Field::new("reason", 7, Type::String),
        Field::new("regarding", 8, Type::Struct(&OBJECT_REFERENCE)),
        Field::new("related", 9, Type::Struct(&OBJECT_REFERENCE)),
        Field::new("note", 10, Type::String),
        Field::new("type", 11, Type::String),
        Field::new("deprecatedSource", 12, Type::Struct(&EVENT_SOURCE)),
        Field::new("deprecatedFirstTimestamp", 13, Type::Time),
        Field::new("deprecatedLastTimestamp", 14, Type::Time),
        Field::new("deprecatedCount", 15, Type::Int32),
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

/// This resource in the catalog: everything the server needs to serve it.
pub const INFO: crate::resource::ResourceInfo = crate::resource::ResourceInfo {
    group: "events.k8s.io",
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
    openapi_schema: crate::schema::schema_of::<k8s_openapi::api::events::v1::Event>,
    hooks: crate::resource::Hooks {
        decode,
        default: crate::resource::no_default,
        prepare_for_create: crate::resource::no_prepare,
        prepare_for_update: crate::resource::no_prepare_update,
        validate,
        validate_update,
        to_storage: Some(to_core),
        from_storage: Some(from_core),
        field_selectors: FIELD_SELECTORS,
        field_values,
        columns: crate::core::event::COLUMNS,
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

    fn event(extra: Value) -> Value {
        let mut base = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "web.17a3c", "namespace": "default"},
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "reportingController": "example.com/ctrl", "reportingInstance": "ctrl-1",
            "action": "Scale", "reason": "Scaled", "type": "Normal",
            "regarding": {"kind": "Deployment", "name": "web", "namespace": "default", "apiVersion": "apps/v1"},
            "note": "scaled up"
        });
        if let (Some(b), Value::Object(e)) = (base.as_object_mut(), extra) {
            b.extend(e);
        }
        base
    }

    #[test]
    fn conversion_renames_fields_both_ways() {
        let v1 = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "default"},
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:05.000000Z"},
            "reportingController": "c", "reportingInstance": "i", "action": "A", "reason": "R",
            "regarding": {"kind": "Pod", "name": "p"}, "related": {"kind": "Node", "name": "n"},
            "note": "N", "type": "Warning", "deprecatedSource": {"component": "kubelet", "host": "h"},
            "deprecatedFirstTimestamp": "2026-01-01T00:00:00Z", "deprecatedLastTimestamp": "2026-01-01T00:00:09Z",
            "deprecatedCount": 7
        });
        let core = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "default"},
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:05.000000Z"},
            "reportingComponent": "c", "reportingInstance": "i", "action": "A", "reason": "R",
            "involvedObject": {"kind": "Pod", "name": "p"}, "related": {"kind": "Node", "name": "n"},
            "message": "N", "type": "Warning", "source": {"component": "kubelet", "host": "h"},
            "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:09Z",
            "count": 7
        });
        assert_eq!(to_core(v1.clone()), core);
        assert_eq!(from_core(core.clone()), v1);
        assert_eq!(from_core(to_core(v1.clone())), v1);
        assert_eq!(to_core(from_core(core.clone())), core);
        let sparse = json!({"metadata": {"name": "x"}, "message": "m", "extra": true});
        assert_eq!(
            from_core(sparse),
            json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "x"}, "note": "m"}),
            "absent fields stay absent; unknown ones are dropped"
        );
    }

    #[test]
    fn strict_create_rules() {
        let cases: Vec<(&str, Value, Vec<&str>)> = vec![
            ("valid", event(json!({})), vec![]),
            ("warning", event(json!({"type": "Warning"})), vec![]),
            (
                "bad type",
                event(json!({"type": "Info"})),
                vec!["type: Invalid value: \"\": has invalid value: Info"],
            ),
            (
                "no eventTime",
                event(json!({"eventTime": null})),
                vec![
                    "reportingController: Invalid value: \"example.com/ctrl\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                ],
            ),
            (
                "missing controller",
                event(json!({"reportingController": ""})),
                vec![
                    "reportingController: Required value",
                    "reportingController: Invalid value: \"\": name part must be non-empty",
                ],
            ),
            (
                "deprecated fields set",
                event(
                    json!({"deprecatedCount": 2, "deprecatedSource": {"component": "x"}, "deprecatedFirstTimestamp": "2026-01-01T00:00:00Z", "deprecatedLastTimestamp": "2026-01-01T00:00:00Z"}),
                ),
                vec![
                    "deprecatedFirstTimestamp: Invalid value: \"\": needs to be unset",
                    "deprecatedLastTimestamp: Invalid value: \"\": needs to be unset",
                    "deprecatedCount: Invalid value: \"\": needs to be unset",
                    "deprecatedSource: Invalid value: \"\": needs to be unset",
                ],
            ),
            (
                "series too small",
                event(json!({"series": {"count": 1}})),
                vec![
                    "series.count: Invalid value: \"\": should be at least 2",
                    "series.lastObservedTime: Required value",
                ],
            ),
            (
                "series ok",
                event(
                    json!({"series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:01.000000Z"}}),
                ),
                vec![],
            ),
            (
                "names are subdomains",
                event(json!({"metadata": {"name": "Web_1", "namespace": "default"}})),
                vec![
                    "metadata.name: Invalid value: \"Web_1\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                ],
            ),
            (
                "note limit",
                event(json!({"note": "n".repeat(1025)})),
                vec!["message: Invalid value: \"\": can have at most 1024 characters"],
            ),
            (
                "regarding elsewhere",
                event(json!({"regarding": {"kind": "Pod", "name": "p", "namespace": "other"}})),
                vec![],
            ),
            (
                "cluster object outside default",
                event(
                    json!({"metadata": {"name": "e", "namespace": "team"}, "regarding": {"kind": "Node", "name": "n"}}),
                ),
                vec![
                    "involvedObject.namespace: Invalid value: \"\": does not match event.namespace",
                ],
            ),
        ];
        for (name, object, want) in cases {
            let errors = validate(&object).unwrap();
            if name == "no eventTime" {
                // Without eventTime the event is "old style": the namespace rule applies, then
                // the strict rules want an eventTime and no old fields.
                assert_eq!(summary(&errors), ["eventTime: Required value"], "{name}");
                continue;
            }
            assert_eq!(summary(&errors), want, "{name}");
        }
        let err = validate(&event(json!({"note": 5}))).unwrap_err();
        assert_eq!(err.code, 400);
        assert_eq!(
            err.message,
            "Event in version \"events.k8s.io/v1\" cannot be handled as a Event: json: cannot unmarshal number into field Event.note of type string"
        );
    }

    #[test]
    fn strict_update_rules() {
        let old = event(
            json!({"series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:01.000000Z"}}),
        );
        let series = event(
            json!({"series": {"count": 3, "lastObservedTime": "2026-01-01T00:00:09.000000Z"}}),
        );
        assert!(
            validate_update(&series, &old).unwrap().is_empty(),
            "the series may move on"
        );
        let bad_series = event(
            json!({"series": {"count": 1, "lastObservedTime": "2026-01-01T00:00:09.000000Z"}}),
        );
        assert_eq!(
            summary(&validate_update(&bad_series, &old).unwrap()),
            ["series.count: Invalid value: \"\": should be at least 2"]
        );
        let changed = event(json!({
            "series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:01.000000Z"},
            "note": "other", "reason": "Other", "action": "B", "reportingController": "example.com/other",
            "eventTime": "2026-01-01T00:00:01.000000Z", "regarding": {"kind": "Deployment", "name": "api", "namespace": "default"}
        }));
        let fields: Vec<String> = validate_update(&changed, &old)
            .unwrap()
            .iter()
            .map(|e| e.field.to_string())
            .collect();
        assert_eq!(
            fields,
            [
                "involvedObject",
                "reason",
                "message",
                "reason",
                "eventTime",
                "action",
                "reportingController"
            ]
        );
        assert!(
            validate_update(&changed, &old)
                .unwrap()
                .to_string()
                .contains("message: Invalid value: \"other\": field is immutable")
        );
        let renamed = event(
            json!({"metadata": {"name": "other", "namespace": "default"}, "series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:01.000000Z"}}),
        );
        assert_eq!(
            summary(&validate_update(&renamed, &old).unwrap()),
            ["metadata.name: Invalid value: \"other\": field is immutable"]
        );
    }

    #[test]
    fn fields_and_table() {
        let object = event(json!({"metadata": {"name": "e", "namespace": "default"}}));
        let fields = field_values(&object);
        assert_eq!(fields.keys().count(), FIELD_SELECTORS.len());
        assert_eq!(fields["regarding.kind"], "Deployment");
        assert_eq!(fields["regarding.apiVersion"], "apps/v1");
        assert_eq!(fields["reportingController"], "example.com/ctrl");
        assert_eq!(fields["source"], "example.com/ctrl");
        assert_eq!(fields["metadata.namespace"], "default");
        let now = 1_767_225_600 + 90; // 2026-01-01T00:01:30Z
        assert_eq!(
            row(&object, now),
            vec![
                json!("90s"),
                json!("Normal"),
                json!("Scaled"),
                json!("deployment/web"),
                json!(""),
                json!("example.com/ctrl, ctrl-1"),
                json!("scaled up"),
                json!("90s"),
                json!(1),
                json!("e")
            ]
        );
    }
}
