//! Feature (`featuregates.genplane.io/v1alpha1`, namespaced): one feature gate of the cluster.
//!
//! `spec` says which feature the object is about and, for a dynamic feature, which value its
//! owner asks for; `status` is written by the feature-controller and by every component
//! instance that checks the feature:
//!
//! - `spec.featureName` is required, a feature name (letters, digits, `-`, `_`, `.`), and never
//!   changes; `metadata.name` must be [`super::object_name`] of it.
//! - `spec.desired` is `On` or `Off`. It can only be set (or changed) on a feature whose
//!   `status.dynamic` is true, which only the feature-controller sets; setting it on any other
//!   feature is refused (422, `spec.desired: Forbidden`), and so on create, where no status
//!   exists yet.
//! - `status`: `stage`, `default`, `lockedToDefault` and `versions` as the announcing
//!   feature-controller's binary knows the feature; `state` (`On`, `Off`, `TurningOn`,
//!   `TurningOff`); `dynamic`; `uses`, a list map keyed by `component` and `instance`, one entry
//!   per component instance that checked the feature, each owned by that instance's field
//!   manager (server-side apply); `tasks`, the ordered tasks left of a transition; `conditions`,
//!   a list map keyed by `type` (`Agreed`: every live instance reports the value of the state).
//!
//! Writes to `/status` keep the spec (and the metadata but labels and annotations); writes to
//! the object keep the status; `metadata.generation` grows with each spec change.

use std::collections::{BTreeMap, BTreeSet};

use genplane_apimachinery::codec::decode::{self, Decoded};
use genplane_apimachinery::codec::schema::{Field, Struct, Type};
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::meta::schemas::{CONDITION, OBJECT_META};
use genplane_apimachinery::meta::{validate_object_meta, validate_object_meta_update};
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use genplane_apimachinery::validation::name_is_dns_subdomain;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::resource;
use crate::resource::{Hooks, ResourceInfo, Subresource, SubresourceRules};
use crate::schema::{Extensions, ListType, NONE, atomic_list, keyed_list};
use crate::table::{self, ColumnDefinition};
use crate::util;

use super::{API_VERSION, GROUP, VERSION, object_name};

/// The kind.
pub const KIND: &str = "Feature";
/// The values of `spec.desired` and of a use's `value`.
pub const VALUES: &[&str] = &["On", "Off"];
/// The states of a feature.
pub const STATES: &[&str] = &["On", "Off", "TurningOn", "TurningOff"];
/// The stages a feature can be announced in.
pub const STAGES: &[&str] = &["Alpha", "Beta", "GA", "Deprecated"];
/// The statuses of a condition.
pub const CONDITION_STATUSES: &[&str] = util::CONDITION_STATUSES;
/// The longest feature name accepted.
pub const MAX_FEATURE_NAME: usize = 200;

/// A feature gate of the cluster, as clients read and write it.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "io.genplane.featuregates.v1alpha1.Feature")]
#[serde(rename_all = "camelCase", default)]
pub struct Feature {
    /// APIVersion defines the versioned schema of this representation of an object.
    pub api_version: Option<String>,
    /// Kind is a string value representing the REST resource this object represents.
    pub kind: Option<String>,
    /// Standard object's metadata. The name is the feature name in lower-case kebab form
    /// (`CoordinatedLeaderElection` is `coordinated-leader-election`).
    pub metadata: ObjectMeta,
    /// Which feature this is, and the value asked for when the feature is dynamic.
    pub spec: FeatureSpec,
    /// The feature as the feature-controller and the components that check it see it.
    pub status: Option<FeatureStatus>,
}

/// Which feature an object is about, and what its owner asks for.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "io.genplane.featuregates.v1alpha1.FeatureSpec")]
#[serde(rename_all = "camelCase", default)]
pub struct FeatureSpec {
    /// The feature gate's name, as `--feature-gates` spells it (e.g.
    /// `CoordinatedLeaderElection`). Required and immutable.
    pub feature_name: String,
    /// The value asked for, `On` or `Off`. Only settable when `status.dynamic` is true;
    /// otherwise the cluster's configured value (the feature-controller's `--feature-gates`)
    /// is the desired one.
    pub desired: Option<String>,
}

/// A feature as the cluster runs it.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "io.genplane.featuregates.v1alpha1.FeatureStatus")]
#[serde(rename_all = "camelCase", default)]
pub struct FeatureStatus {
    /// The stage at the announcing binary's emulated version: Alpha, Beta, GA or Deprecated.
    pub stage: Option<String>,
    /// Whether the feature is on unless configured otherwise.
    pub default: Option<bool>,
    /// Whether the feature can only have its default value.
    pub locked_to_default: Option<bool>,
    /// The versions of the binary that announced the feature.
    pub versions: Option<FeatureVersions>,
    /// On, Off, TurningOn or TurningOff.
    pub state: Option<String>,
    /// Whether clients may set `spec.desired`.
    pub dynamic: Option<bool>,
    /// The value each component instance saw when it checked the feature, one entry per
    /// instance (keyed by component and instance), each written by that instance.
    pub uses: Vec<FeatureUse>,
    /// The tasks left before a transition completes, first one next.
    pub tasks: Vec<FeatureTask>,
    /// The latest observations of the feature's state (`Agreed`).
    pub conditions: Vec<FeatureCondition>,
}

/// An observation of a feature's state, shaped as upstream's `metav1.Condition`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "io.genplane.featuregates.v1alpha1.FeatureCondition")]
#[serde(rename_all = "camelCase", default)]
pub struct FeatureCondition {
    /// The condition's type, e.g. `Agreed`.
    #[serde(rename = "type")]
    pub type_: String,
    /// True, False or Unknown.
    pub status: String,
    /// The `metadata.generation` the condition was computed for.
    pub observed_generation: Option<i64>,
    /// When the status last changed.
    pub last_transition_time: Option<Time>,
    /// A CamelCase reason for the status.
    pub reason: Option<String>,
    /// The details, in words (e.g. which instances disagree).
    pub message: Option<String>,
}

/// The versions of the binary that announced a feature.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "io.genplane.featuregates.v1alpha1.FeatureVersions")]
#[serde(rename_all = "camelCase", default)]
pub struct FeatureVersions {
    /// The Kubernetes version the binary implements, MAJOR.MINOR.
    pub binary: Option<String>,
    /// The version it emulates (`--emulated-version`), MAJOR.MINOR.
    pub emulated: Option<String>,
}

/// One component instance's use of a feature.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "io.genplane.featuregates.v1alpha1.FeatureUse")]
#[serde(rename_all = "camelCase", default)]
pub struct FeatureUse {
    /// The component, e.g. `apiserver`.
    pub component: String,
    /// The instance: the name of its identity Lease in `kube-system`.
    pub instance: String,
    /// The value the instance saw: On or Off.
    pub value: String,
    /// The version the instance emulates, MAJOR.MINOR.
    pub version: Option<String>,
    /// When the instance first reported this value.
    pub first_report: Option<Time>,
    /// When the instance last reported.
    pub last_report: Option<Time>,
}

/// One task of a transition.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "io.genplane.featuregates.v1alpha1.FeatureTask")]
#[serde(rename_all = "camelCase", default)]
pub struct FeatureTask {
    /// What the task does: `WaitForUses`, `ClearField`, ...
    #[serde(rename = "type")]
    pub type_: String,
    /// What the task is doing or waiting for, in words.
    pub message: Option<String>,
    /// When the task was first attempted.
    pub start_time: Option<Time>,
    /// How often it was attempted.
    pub attempts: Option<i32>,
    /// The error of its last attempt, if it failed.
    pub last_error: Option<String>,
    /// What the task works on (e.g. `leases.coordination.k8s.io spec.strategy`).
    pub target: Option<String>,
}

static VERSIONS: Struct = Struct {
    name: "FeatureVersions",
    fields: &[
        Field::new("binary", 1, Type::String),
        Field::new("emulated", 2, Type::String),
    ],
};

static USE: Struct = Struct {
    name: "FeatureUse",
    fields: &[
        Field::new("component", 1, Type::String),
        Field::new("instance", 2, Type::String),
        Field::new("value", 3, Type::String),
        Field::new("version", 4, Type::String),
        Field::new("firstReport", 5, Type::Time),
        Field::new("lastReport", 6, Type::Time),
    ],
};

static TASK: Struct = Struct {
    name: "FeatureTask",
    fields: &[
        Field::new("type", 1, Type::String),
        Field::new("message", 2, Type::String),
        Field::new("startTime", 3, Type::Time),
        Field::pointer("attempts", 4, Type::Int32),
        Field::new("lastError", 5, Type::String),
        Field::new("target", 6, Type::String),
    ],
};

static SPEC: Struct = Struct {
    name: "FeatureSpec",
    fields: &[
        Field::new("featureName", 1, Type::String),
        Field::pointer("desired", 2, Type::String),
    ],
};

static STATUS: Struct = Struct {
    name: "FeatureStatus",
    fields: &[
        Field::new("stage", 1, Type::String),
        Field::pointer("default", 2, Type::Bool),
        Field::pointer("lockedToDefault", 3, Type::Bool),
        Field::new("versions", 4, Type::Struct(&VERSIONS)),
        Field::new("state", 5, Type::String),
        Field::pointer("dynamic", 6, Type::Bool),
        Field::new("uses", 7, Type::List(&Type::Struct(&USE))),
        Field::new("tasks", 8, Type::List(&Type::Struct(&TASK))),
        Field::new("conditions", 9, Type::List(&Type::Struct(&CONDITION))),
    ],
};

/// The shape of a Feature. It speaks JSON and YAML only (`protobuf: false`): the field numbers
/// are unused.
pub static SCHEMA: Struct = Struct {
    name: "Feature",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("spec", 2, Type::Struct(&SPEC)),
        Field::new("status", 3, Type::Struct(&STATUS)),
    ],
};

const STATUS_SCHEMA: &str = "io.genplane.featuregates.v1alpha1.FeatureStatus";

/// `uses` is a list map keyed by component and instance (each instance applies its own
/// entry); `conditions` by type; `tasks` is one ordered value the feature-controller writes.
static EXTENSIONS: &[Extensions] = &[
    Extensions {
        schema: STATUS_SCHEMA,
        property: "uses",
        list_type: Some(ListType::Map),
        list_map_keys: &["component", "instance"],
        ..NONE
    },
    keyed_list(STATUS_SCHEMA, "conditions", &["type"]),
    atomic_list(STATUS_SCHEMA, "tasks"),
];

fn decode(object: &Value) -> Result<Decoded, ApiError> {
    decode::decode(object, &SCHEMA).map_err(|e| e.to_api_error(KIND, API_VERSION))
}

/// Whether `name` can name a feature gate (as `--feature-gates` accepts it).
fn is_feature_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

fn validate_spec(
    meta: &genplane_apimachinery::meta::ObjectMeta,
    spec: &FeatureSpec,
    errors: &mut ErrorList,
) {
    let path = Path::new("spec");
    let name_path = path.child("featureName");
    let feature = spec.feature_name.as_str();
    if feature.is_empty() {
        errors.push(Error::required(&name_path, ""));
    } else if feature.len() > MAX_FEATURE_NAME {
        errors.push(Error::too_long(&name_path, feature, MAX_FEATURE_NAME));
    } else if !is_feature_name(feature) {
        errors.push(Error::invalid(
            &name_path,
            feature,
            "a feature name consists of letters, digits, '-', '_' and '.'",
        ));
    } else {
        let expected = object_name(feature);
        let name = meta.name.as_str();
        if !name.is_empty() && name != expected {
            errors.push(Error::invalid(
                &Path::new("metadata").child("name"),
                name,
                format!("must be {expected:?}, the object name of feature {feature}"),
            ));
        }
    }
    if let Some(desired) = &spec.desired
        && !VALUES.contains(&desired.as_str())
    {
        errors.push(Error::not_supported(
            &path.child("desired"),
            desired.as_str(),
            VALUES,
        ));
    }
}

fn desired_forbidden(feature: &str) -> Error {
    Error::forbidden(
        &Path::new("spec").child("desired"),
        format!(
            "feature {feature} is not dynamic: its value is the cluster's configuration \
             (--feature-gates); only features whose status.dynamic is true can be set here"
        ),
    )
}

fn validate(object: &Value) -> Result<ErrorList, ApiError> {
    let (meta, feature) = util::decode_typed::<Feature>(object, &SCHEMA, KIND, VERSION)?;
    let mut errors =
        validate_object_meta(&meta, true, name_is_dns_subdomain, &Path::new("metadata"));
    validate_spec(&meta, &feature.spec, &mut errors);
    // No status exists on create, so no feature is dynamic yet.
    if feature.spec.desired.is_some() {
        errors.push(desired_forbidden(&feature.spec.feature_name));
    }
    Ok(errors)
}

fn validate_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let (new_meta, feature) = util::decode_typed::<Feature>(new, &SCHEMA, KIND, VERSION)?;
    let (old_meta, old_feature) = util::decode_typed::<Feature>(old, &SCHEMA, KIND, VERSION)?;
    let mut errors = validate_object_meta_update(&new_meta, &old_meta, &Path::new("metadata"));
    validate_spec(&new_meta, &feature.spec, &mut errors);
    if feature.spec.feature_name != old_feature.spec.feature_name {
        errors.push(Error::invalid(
            &Path::new("spec").child("featureName"),
            feature.spec.feature_name.as_str(),
            "field is immutable",
        ));
    }
    let dynamic = old_feature
        .status
        .as_ref()
        .and_then(|s| s.dynamic)
        .unwrap_or(false);
    // Clearing the value is always allowed; setting or changing it only on a dynamic feature.
    if feature.spec.desired.is_some()
        && feature.spec.desired != old_feature.spec.desired
        && !dynamic
    {
        errors.push(desired_forbidden(&old_feature.spec.feature_name));
    }
    Ok(errors)
}

fn one_of(errors: &mut ErrorList, path: &Path, value: Option<&str>, allowed: &[&str]) {
    if let Some(value) = value
        && !allowed.contains(&value)
    {
        errors.push(Error::not_supported(path, value, allowed));
    }
}

fn validate_status(status: &FeatureStatus, errors: &mut ErrorList) {
    let path = Path::new("status");
    one_of(
        errors,
        &path.child("stage"),
        status.stage.as_deref(),
        STAGES,
    );
    one_of(
        errors,
        &path.child("state"),
        status.state.as_deref(),
        STATES,
    );
    let mut keys = BTreeSet::new();
    for (i, entry) in status.uses.iter().enumerate() {
        let at = path.child("uses").index(i);
        if entry.component.is_empty() {
            errors.push(Error::required(&at.child("component"), ""));
        }
        if entry.instance.is_empty() {
            errors.push(Error::required(&at.child("instance"), ""));
        }
        if entry.value.is_empty() {
            errors.push(Error::required(&at.child("value"), ""));
        }
        one_of(
            errors,
            &at.child("value"),
            Some(entry.value.as_str()).filter(|v| !v.is_empty()),
            VALUES,
        );
        if !keys.insert((entry.component.as_str(), entry.instance.as_str())) {
            errors.push(Error::duplicate(
                &at,
                json!({"component": entry.component, "instance": entry.instance}),
            ));
        }
    }
    for (i, task) in status.tasks.iter().enumerate() {
        let at = path.child("tasks").index(i);
        if task.type_.is_empty() {
            errors.push(Error::required(&at.child("type"), ""));
        }
        if task.attempts.is_some_and(|a| a < 0) {
            errors.push(Error::invalid(
                &at.child("attempts"),
                task.attempts.unwrap_or_default(),
                "must be greater than or equal to 0",
            ));
        }
    }
    util::validate_conditions(
        status
            .conditions
            .iter()
            .map(|c| (c.type_.as_str(), c.status.as_str())),
        &path.child("conditions"),
        errors,
    );
}

fn validate_status_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let (new_meta, feature) = util::decode_typed::<Feature>(new, &SCHEMA, KIND, VERSION)?;
    let (old_meta, _) = util::decode_typed::<Feature>(old, &SCHEMA, KIND, VERSION)?;
    let mut errors = validate_object_meta_update(&new_meta, &old_meta, &Path::new("metadata"));
    if let Some(status) = &feature.status {
        validate_status(status, &mut errors);
    }
    Ok(errors)
}

/// Features can be selected by `spec.featureName` and `status.state` too.
const FIELD_SELECTORS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "spec.featureName",
    "status.state",
];

fn field_values(object: &Value) -> BTreeMap<&'static str, String> {
    let mut fields = util::meta_fields(object, true);
    fields.insert(
        "spec.featureName",
        util::str_at(object, &["spec", "featureName"]).into(),
    );
    fields.insert(
        "status.state",
        util::str_at(object, &["status", "state"]).into(),
    );
    fields
}

/// `NAME STATE DESIRED STAGE DEFAULT AGREED TASK AGE`, and with `-o wide` the feature's name,
/// how many instances report it, and whether it is dynamic.
const COLUMNS: &[ColumnDefinition] = &[
    table::NAME,
    table::column(
        "State",
        "On, Off, or TurningOn/TurningOff while a transition's tasks run.",
        0,
    ),
    table::column(
        "Desired",
        "The value asked for in spec.desired (dynamic features only).",
        0,
    ),
    table::column("Stage", "Alpha, Beta, GA or Deprecated.", 0),
    table::column("Default", "The value unless configured otherwise.", 0),
    table::column(
        "Agreed",
        "Whether every live component instance reports the value of the state.",
        0,
    ),
    table::column("Task", "The next task of the transition in progress.", 0),
    table::AGE,
    table::column("Feature", "The feature gate's name.", 1),
    table::column("Uses", "How many component instances reported a check.", 1),
    table::column("Dynamic", "Whether clients may set spec.desired.", 1),
];

fn bool_cell(object: &Value, pointer: &str) -> Value {
    match object.pointer(pointer).and_then(Value::as_bool) {
        Some(value) => json!(value.to_string()),
        None => json!(""),
    }
}

fn row(object: &Value, now: i64) -> Vec<Value> {
    let uses = object
        .pointer("/status/uses")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    vec![
        util::name(object),
        json!(util::str_at(object, &["status", "state"])),
        json!(util::str_at(object, &["spec", "desired"])),
        json!(util::str_at(object, &["status", "stage"])),
        bool_cell(object, "/status/default"),
        json!(util::condition_status(object, "Agreed")),
        json!(
            object
                .pointer("/status/tasks/0/type")
                .and_then(Value::as_str)
                .unwrap_or("")
        ),
        util::age(object, now),
        json!(util::str_at(object, &["spec", "featureName"])),
        json!(uses),
        bool_cell(object, "/status/dynamic"),
    ]
}

/// Everything the server needs to serve features.
pub static INFO: ResourceInfo = ResourceInfo {
    group: GROUP,
    version: VERSION,
    kind: KIND,
    list_kind: "FeatureList",
    resource: "features",
    singular: "feature",
    short_names: &[],
    namespaced: true,
    create_on_update: false,
    verbs: resource::ALL_VERBS,
    subresources: &[Subresource {
        name: "status",
        kind: KIND,
        verbs: resource::STATUS_VERBS,
        rules: Some(SubresourceRules {
            prepare_for_update: util::prepare_status_update,
            validate_update: validate_status_update,
        }),
        body: None,
    }],
    categories: &[],
    storage_prefix: "featuregates.genplane.io/features",
    storage_api_version: API_VERSION,
    schema: &SCHEMA,
    protobuf: false,
    feature_gate: None,
    extensions: EXTENSIONS,
    openapi_schema: crate::schema::schema_of::<Feature>,
    hooks: Hooks {
        decode,
        default: resource::no_default,
        prepare_for_create: util::prepare_spec_create,
        prepare_for_update: util::prepare_spec_update,
        validate,
        validate_update,
        to_storage: None,
        from_storage: None,
        field_selectors: FIELD_SELECTORS,
        field_values,
        columns: COLUMNS,
        row,
        pending_finalization: resource::nothing_pending,
        mark_deleting: resource::no_default,
        grace_period: resource::not_graceful,
    },
};

#[cfg(test)]
mod tests;
