//! `Widget` (`sample.genplane.io/v1`, namespaced): a kind of the program's own, defined in
//! Rust and served by genplane's library like a built-in kind.
//!
//! Everything the server needs to know about it is in [`INFO`]: its names and scope, its
//! shape ([`SCHEMA`], which type-checks every body), its OpenAPI schema (derived from the Rust
//! types below, so that `kubectl explain` and server-side apply know it), its table columns,
//! and its strategy, a set of plain functions the generic store calls on every write (the
//! `prepare` ones are told the server's feature gates in a `Context`):
//!
//! - `default`: `spec.color` is `green` unless given;
//! - `prepare_for_create`: `status` is the server's (cleared) and `metadata.generation` is 1;
//! - `prepare_for_update`: `status` is kept (it changes through the `status` subresource
//!   only) and `metadata.generation` grows when `spec` changed;
//! - `validate` / `validate_update`: `spec.size` within 1..=100, `spec.color` one of
//!   red, green, blue, with field paths in the errors, as kube-apiserver reports them;
//! - the `status` subresource: a write keeps `spec` (and `metadata` but its labels and
//!   annotations) and validates `status.phase`.

use std::collections::BTreeMap;

use genplane_api::catalog::{self, Hooks, ResourceInfo, Subresource, SubresourceRules};
use genplane_api::table::{self, ColumnDefinition};
use genplane_api::util::{
    self, prepare_spec_create as prepare_for_create, prepare_spec_update as prepare_for_update,
    prepare_status_update as prepare_for_status_update,
};
use genplane_apimachinery::codec::decode::{self, Decoded};
use genplane_apimachinery::codec::schema::{Field, Struct, Type};
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::meta::schemas::OBJECT_META;
use genplane_apimachinery::meta::{validate_object_meta, validate_object_meta_update};
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use genplane_apimachinery::validation::name_is_dns_subdomain;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// The group.
pub const GROUP: &str = "sample.genplane.io";
/// The version.
pub const VERSION: &str = "v1";
/// The kind.
pub const KIND: &str = "Widget";
/// The colors a widget may have.
pub const COLORS: &[&str] = &["red", "green", "blue"];
/// The phases a widget's status may report.
pub const PHASES: &[&str] = &["Pending", "Ready"];

/// A widget, as clients read and write it (and as its OpenAPI schema describes it).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "io.genplane.sample.v1.Widget")]
#[serde(rename_all = "camelCase", default)]
pub struct Widget {
    /// APIVersion defines the versioned schema of this representation of an object.
    pub api_version: Option<String>,
    /// Kind is a string value representing the REST resource this object represents.
    pub kind: Option<String>,
    /// Standard object's metadata.
    pub metadata: ObjectMeta,
    /// What the widget should be.
    pub spec: WidgetSpec,
    /// What the widget is, as its controller last saw it.
    pub status: Option<WidgetStatus>,
}

/// What a widget should be.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "io.genplane.sample.v1.WidgetSpec")]
#[serde(rename_all = "camelCase", default)]
pub struct WidgetSpec {
    /// How big the widget is, 1 to 100.
    pub size: Option<i32>,
    /// Its color: red, green (the default) or blue.
    pub color: Option<String>,
}

/// What a widget is.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "io.genplane.sample.v1.WidgetStatus")]
#[serde(rename_all = "camelCase", default)]
pub struct WidgetStatus {
    /// Pending or Ready.
    pub phase: Option<String>,
    /// The generation of the spec the phase is about.
    pub observed_generation: Option<i64>,
}

static SPEC: Struct = Struct {
    name: "WidgetSpec",
    fields: &[
        Field::pointer("size", 1, Type::Int32),
        Field::new("color", 2, Type::String),
    ],
};

static STATUS: Struct = Struct {
    name: "WidgetStatus",
    fields: &[
        Field::new("phase", 1, Type::String),
        Field::new("observedGeneration", 2, Type::Int64),
    ],
};

/// The shape of a Widget. Field numbers are given but unused: the kind speaks JSON and YAML
/// only (`protobuf: false` in [`INFO`]).
pub static SCHEMA: Struct = Struct {
    name: "Widget",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("spec", 2, Type::Struct(&SPEC)),
        Field::new("status", 3, Type::Struct(&STATUS)),
    ],
};

fn decode(object: &Value) -> Result<Decoded, ApiError> {
    decode::decode(object, &SCHEMA).map_err(|e| e.to_api_error(KIND, VERSION))
}

fn default(object: &mut Value) {
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut)
        && !spec.contains_key("color")
    {
        spec.insert("color".into(), json!("green"));
    }
}

fn validate_spec(widget: &Widget) -> ErrorList {
    let mut errors = ErrorList::new();
    let spec = Path::new("spec");
    match widget.spec.size {
        None => errors.push(Error::required(&spec.child("size"), "")),
        Some(size) if !(1..=100).contains(&size) => errors.push(Error::invalid(
            &spec.child("size"),
            size,
            "must be between 1 and 100, inclusive",
        )),
        Some(_) => {}
    }
    if let Some(color) = &widget.spec.color
        && !COLORS.contains(&color.as_str())
    {
        errors.push(Error::not_supported(
            &spec.child("color"),
            color.as_str(),
            COLORS,
        ));
    }
    errors
}

fn validate(object: &Value) -> Result<ErrorList, ApiError> {
    let (meta, widget) = util::decode_typed::<Widget>(object, &SCHEMA, KIND, VERSION)?;
    let mut errors =
        validate_object_meta(&meta, true, name_is_dns_subdomain, &Path::new("metadata"));
    errors.extend(validate_spec(&widget));
    Ok(errors)
}

fn validate_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let (new_meta, widget) = util::decode_typed::<Widget>(new, &SCHEMA, KIND, VERSION)?;
    let (old_meta, _) = util::decode_typed::<Widget>(old, &SCHEMA, KIND, VERSION)?;
    let mut errors = validate_object_meta_update(&new_meta, &old_meta, &Path::new("metadata"));
    errors.extend(validate_spec(&widget));
    Ok(errors)
}

fn validate_status_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let (new_meta, widget) = util::decode_typed::<Widget>(new, &SCHEMA, KIND, VERSION)?;
    let (old_meta, _) = util::decode_typed::<Widget>(old, &SCHEMA, KIND, VERSION)?;
    let mut errors = validate_object_meta_update(&new_meta, &old_meta, &Path::new("metadata"));
    if let Some(phase) = widget.status.as_ref().and_then(|s| s.phase.as_deref())
        && !PHASES.contains(&phase)
    {
        errors.push(Error::not_supported(
            &Path::new("status").child("phase"),
            phase,
            PHASES,
        ));
    }
    Ok(errors)
}

/// Widgets can be selected by `spec.color` too.
const FIELD_SELECTORS: &[&str] = &["metadata.name", "metadata.namespace", "spec.color"];

fn field_values(object: &Value) -> BTreeMap<&'static str, String> {
    let mut fields = util::meta_fields(object, true);
    fields.insert(
        "spec.color",
        util::str_at(object, &["spec", "color"]).into(),
    );
    fields
}

/// `NAME SIZE COLOR PHASE AGE`.
const COLUMNS: &[ColumnDefinition] = &[
    table::NAME,
    table::column("Size", "How big the widget is.", 0),
    table::column("Color", "The widget's color.", 0),
    table::column("Phase", "What the widget is.", 0),
    table::AGE,
];

fn row(object: &Value, now: i64) -> Vec<Value> {
    vec![
        util::name(object),
        object.pointer("/spec/size").cloned().unwrap_or(Value::Null),
        json!(util::str_at(object, &["spec", "color"])),
        json!(util::str_at(object, &["status", "phase"])),
        util::age(object, now),
    ]
}

/// Everything the server needs to serve widgets.
pub static INFO: ResourceInfo = ResourceInfo {
    group: GROUP,
    version: VERSION,
    kind: KIND,
    list_kind: "WidgetList",
    resource: "widgets",
    singular: "widget",
    short_names: &["wg"],
    namespaced: true,
    create_on_update: false,
    verbs: catalog::ALL_VERBS,
    subresources: &[Subresource {
        name: "status",
        kind: KIND,
        verbs: catalog::STATUS_VERBS,
        rules: Some(SubresourceRules {
            prepare_for_update: prepare_for_status_update,
            validate_update: validate_status_update,
        }),
        body: None,
    }],
    categories: &["all"],
    storage_prefix: "sample.genplane.io/widgets",
    storage_api_version: "sample.genplane.io/v1",
    schema: &SCHEMA,
    protobuf: false,
    feature_gate: None,
    extensions: &[],
    openapi_schema: genplane_api::schema::schema_of::<Widget>,
    hooks: Hooks {
        decode,
        default,
        prepare_for_create,
        prepare_for_update,
        validate,
        validate_update,
        to_storage: None,
        from_storage: None,
        field_selectors: FIELD_SELECTORS,
        field_values,
        columns: COLUMNS,
        row,
        pending_finalization: catalog::nothing_pending,
        mark_deleting: catalog::no_default,
        grace_period: catalog::not_graceful,
    },
};

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(errors: &ErrorList) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    fn widget(spec: Value) -> Value {
        json!({"apiVersion": "sample.genplane.io/v1", "kind": "Widget",
               "metadata": {"name": "w", "namespace": "default"}, "spec": spec})
    }

    #[test]
    fn the_spec_is_checked_with_field_paths() {
        assert!(validate(&widget(json!({"size": 3}))).unwrap().is_empty());
        assert_eq!(
            messages(&validate(&widget(json!({"size": 0, "color": "pink"}))).unwrap()),
            [
                "spec.size: Invalid value: 0: must be between 1 and 100, inclusive",
                "spec.color: Unsupported value: \"pink\": supported values: \"red\", \"green\", \"blue\""
            ]
        );
        assert_eq!(
            messages(&validate(&widget(json!({}))).unwrap()),
            ["spec.size: Required value"]
        );
        let wrong_type = decode(&widget(json!({"size": "big"}))).unwrap_err();
        assert_eq!(wrong_type.code, 400, "{wrong_type}");
    }

    #[test]
    fn status_is_the_servers_and_generation_follows_the_spec() {
        let mut created = widget(json!({"size": 3}));
        created["status"] = json!({"phase": "Ready"});
        prepare_for_create(&mut created, &catalog::Context::gates_off());
        default(&mut created);
        assert_eq!(created.get("status"), None);
        assert_eq!(created["metadata"]["generation"], 1);
        assert_eq!(created["spec"]["color"], "green");

        let mut stored = created.clone();
        stored["status"] = json!({"phase": "Pending"});
        let mut relabelled = stored.clone();
        relabelled["metadata"]["labels"] = json!({"a": "b"});
        relabelled["status"] = json!({"phase": "Ready"});
        prepare_for_update(&mut relabelled, &stored, &catalog::Context::gates_off());
        assert_eq!(relabelled["status"]["phase"], "Pending");
        assert_eq!(relabelled["metadata"]["generation"], 1);
        let mut resized = stored.clone();
        resized["spec"]["size"] = json!(4);
        prepare_for_update(&mut resized, &stored, &catalog::Context::gates_off());
        assert_eq!(resized["metadata"]["generation"], 2);

        let mut status_write = stored.clone();
        status_write["spec"]["size"] = json!(99);
        status_write["status"] = json!({"phase": "Ready", "observedGeneration": 1});
        prepare_for_status_update(&mut status_write, &stored, &catalog::Context::gates_off());
        assert_eq!(status_write["spec"]["size"], 3);
        assert_eq!(status_write["status"]["phase"], "Ready");
        let mut bad = stored.clone();
        bad["status"] = json!({"phase": "Exploded"});
        assert_eq!(
            messages(&validate_status_update(&bad, &stored).unwrap()),
            [
                "status.phase: Unsupported value: \"Exploded\": supported values: \"Pending\", \"Ready\""
            ]
        );
    }
}
