//! PriorityLevelConfigurations (`flowcontrol.apiserver.k8s.io/v1`, cluster-scoped): a share of
//! the server's concurrency and what happens to the requests beyond it.
//!
//! Upstream rules (`ValidatePriorityLevelConfiguration`, Kubernetes 1.33, as a v1 request):
//! - the name is a DNS-1123 subdomain; the type is `Exempt` exactly for the level named
//!   `exempt`; the mandatory levels' specs equal their fixed values (`exempt`'s but for its
//!   `spec.exempt`);
//! - `Exempt`: no `limited`; `exempt`'s shares are not negative, its lendable percentage in
//!   0..=100;
//! - `Limited`: no `exempt`, a `limited` whose shares are not negative, lendable percentage in
//!   0..=100, borrowing percentage not negative; its limit response is `Reject` (no queuing) or
//!   `Queue` with queuing: queue length and queues positive (at most 10,000,000 queues), a hand
//!   size from 1 to the queues whose shuffle sharding needs at most 60 bits of entropy;
//! - status conditions have a type, each once.
//!
//! Defaults (v1): a `limited` level's `nominalConcurrencyShares` 30 and `lendablePercent` 0;
//! `exempt`'s both 0; queuing's `queues` 64, `handSize` 8, `queueLengthLimit` 50 when 0.
//! The strategy is FlowSchema's. The table is upstream's: `NAME TYPE NOMINALCONCURRENCYSHARES
//! QUEUES HANDSIZE QUEUELENGTHLIMIT AGE`, `<none>` where the level has no such value.

use std::collections::BTreeMap;

use genplane_apimachinery::codec::decode::{self, Decoded};
use genplane_apimachinery::codec::schema::{Field, Struct, Type};
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::meta::schemas::OBJECT_META;
use genplane_apimachinery::meta::{validate_object_meta, validate_object_meta_update};
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use genplane_apimachinery::validation::name_is_dns_subdomain;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::{
    ConditionType, ExemptConfiguration, LimitResponse, LimitedConfiguration, PriorityLevelSpec,
    QueuingConfiguration, RESPONSE_QUEUE, RESPONSE_REJECT, TYPE_EXEMPT, TYPE_LIMITED,
};
use crate::resource::{self, Hooks, ResourceInfo, Subresource, SubresourceRules};
use crate::table::{self, ColumnDefinition};
use crate::util;

/// The kind.
pub const KIND: &str = "PriorityLevelConfiguration";
/// A limited level's shares when unset.
pub const DEFAULT_NOMINAL_CONCURRENCY_SHARES: i32 = 30;
/// Queues when unset.
pub const DEFAULT_QUEUES: i32 = 64;
/// Hand size when unset.
pub const DEFAULT_HAND_SIZE: i32 = 8;
/// Queue length limit when unset.
pub const DEFAULT_QUEUE_LENGTH_LIMIT: i32 = 50;
/// The most queues a level may have.
pub const MAX_QUEUES: i32 = 10_000_000;
/// The most bits of hash shuffle sharding may consume.
pub const MAX_HASH_BITS: u32 = 60;
const TYPES: &[&str] = &[TYPE_EXEMPT, TYPE_LIMITED];
const RESPONSES: &[&str] = &[RESPONSE_QUEUE, RESPONSE_REJECT];

/// The shape of a flowcontrol.apiserver.k8s.io/v1 PriorityLevelConfiguration.
pub static SCHEMA: Struct = Struct {
    name: "PriorityLevelConfiguration",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("spec", 2, Type::Struct(&super::PRIORITY_LEVEL_SPEC)),
        Field::new("status", 3, Type::Struct(&super::PRIORITY_LEVEL_STATUS)),
    ],
};

const STATUS_SCHEMA: &str = "io.k8s.api.flowcontrol.v1.PriorityLevelConfigurationStatus";

/// The list and patch semantics of the PriorityLevelConfiguration's own types.
pub static EXTENSIONS: &[crate::schema::Extensions] = &[crate::schema::keyed_list(
    STATUS_SCHEMA,
    "conditions",
    &["type"],
)];

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Status {
    conditions: Vec<ConditionType>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct PriorityLevel {
    spec: PriorityLevelSpec,
    status: Status,
}

/// Type-checks and normalizes a PriorityLevelConfiguration.
pub fn decode(object: &Value) -> Result<Decoded, ApiError> {
    decode::decode(object, &SCHEMA).map_err(|e| e.to_api_error(KIND, super::API_VERSION))
}

/// Sets `key` of `map` to `value` when it is unset (absent or null) or, with `zero_too`, 0.
fn default_int(map: &mut Map<String, Value>, key: &str, value: i32, zero_too: bool) {
    let unset = map
        .get(key)
        .is_none_or(|v| v.is_null() || (zero_too && v.as_i64() == Some(0)));
    if unset {
        map.insert(key.into(), Value::from(value));
    }
}

/// Upstream's v1 defaults (see the module's documentation).
pub fn default(object: &mut Value) {
    if let Some(limited) = object
        .pointer_mut("/spec/limited")
        .and_then(Value::as_object_mut)
    {
        default_int(
            limited,
            "nominalConcurrencyShares",
            DEFAULT_NOMINAL_CONCURRENCY_SHARES,
            false,
        );
        default_int(limited, "lendablePercent", 0, false);
        if let Some(queuing) = limited
            .get_mut("limitResponse")
            .and_then(|r| r.get_mut("queuing"))
            .and_then(Value::as_object_mut)
        {
            default_int(queuing, "queues", DEFAULT_QUEUES, true);
            default_int(queuing, "handSize", DEFAULT_HAND_SIZE, true);
            default_int(
                queuing,
                "queueLengthLimit",
                DEFAULT_QUEUE_LENGTH_LIMIT,
                true,
            );
        }
    }
    if let Some(exempt) = object
        .pointer_mut("/spec/exempt")
        .and_then(Value::as_object_mut)
    {
        default_int(exempt, "nominalConcurrencyShares", 0, false);
        default_int(exempt, "lendablePercent", 0, false);
    }
}

/// The bits of hash that dealing `hand_size` cards from `deck_size` consumes, rounded up
/// (upstream's `RequiredEntropyBits`).
pub fn required_entropy_bits(deck_size: i32, hand_size: i32) -> u32 {
    let bits = (f64::from(deck_size).log2() * f64::from(hand_size)).ceil();
    // Positive sizes up to 10^7 and 2^31: at most a few hundred bits.
    bits as u32
}

fn validate_queuing(queuing: &QueuingConfiguration, path: &Path, errors: &mut ErrorList) {
    if queuing.queue_length_limit <= 0 {
        errors.push(Error::invalid(
            &path.child("queueLengthLimit"),
            queuing.queue_length_limit,
            "must be positive",
        ));
    }
    if queuing.queues <= 0 {
        errors.push(Error::invalid(
            &path.child("queues"),
            queuing.queues,
            "must be positive",
        ));
    } else if queuing.queues > MAX_QUEUES {
        errors.push(Error::invalid(
            &path.child("queues"),
            queuing.queues,
            format!("must not be greater than {MAX_QUEUES}"),
        ));
    }
    let hand = path.child("handSize");
    if queuing.hand_size <= 0 {
        errors.push(Error::invalid(&hand, queuing.hand_size, "must be positive"));
    } else if queuing.hand_size > queuing.queues {
        errors.push(Error::invalid(
            &hand,
            queuing.hand_size,
            format!("should not be greater than queues ({})", queuing.queues),
        ));
    } else if required_entropy_bits(queuing.queues, queuing.hand_size) > MAX_HASH_BITS {
        errors.push(Error::invalid(
            &hand,
            queuing.hand_size,
            format!(
                "required entropy bits of deckSize {} and handSize {} should not be greater than {}",
                queuing.queues, queuing.hand_size, MAX_HASH_BITS
            ),
        ));
    }
}

fn validate_limit_response(response: &LimitResponse, path: &Path, errors: &mut ErrorList) {
    match response.type_.as_str() {
        RESPONSE_REJECT => {
            if response.queuing.is_some() {
                errors.push(Error::forbidden(
                    &path.child("queuing"),
                    "must be nil if limited.limitResponse.type is not Limited",
                ));
            }
        }
        RESPONSE_QUEUE => match &response.queuing {
            None => errors.push(Error::required(
                &path.child("queuing"),
                "must not be empty if limited.limitResponse.type is Limited",
            )),
            Some(queuing) => validate_queuing(queuing, &path.child("queuing"), errors),
        },
        other => errors.push(Error::not_supported(&path.child("type"), other, RESPONSES)),
    }
}

fn validate_lendable(value: Option<i32>, path: &Path, errors: &mut ErrorList) {
    if let Some(percent) = value.filter(|p| !(0..=100).contains(p)) {
        errors.push(Error::invalid(
            &path.child("lendablePercent"),
            percent,
            "must be between 0 and 100, inclusive",
        ));
    }
}

fn validate_limited(limited: &LimitedConfiguration, path: &Path, errors: &mut ErrorList) {
    if let Some(shares) = limited.nominal_concurrency_shares.filter(|s| *s < 0) {
        errors.push(Error::invalid(
            &path.child("nominalConcurrencyShares"),
            shares,
            "must be a non-negative integer",
        ));
    }
    validate_limit_response(
        &limited.limit_response,
        &path.child("limitResponse"),
        errors,
    );
    validate_lendable(limited.lendable_percent, path, errors);
    if let Some(percent) = limited.borrowing_limit_percent.filter(|p| *p < 0) {
        errors.push(Error::invalid(
            &path.child("borrowingLimitPercent"),
            percent,
            "if specified, must be a non-negative integer",
        ));
    }
}

fn validate_exempt(exempt: &ExemptConfiguration, path: &Path, errors: &mut ErrorList) {
    if let Some(shares) = exempt.nominal_concurrency_shares.filter(|s| *s < 0) {
        errors.push(Error::invalid(
            &path.child("nominalConcurrencyShares"),
            shares,
            "must be a non-negative integer",
        ));
    }
    validate_lendable(exempt.lendable_percent, path, errors);
}

/// Validates the spec of the level named `name`.
pub fn validate_spec(name: &str, spec: &PriorityLevelSpec) -> ErrorList {
    let path = Path::new("spec");
    let mut errors = ErrorList::new();
    if (name == super::EXEMPT) != (spec.type_ == TYPE_EXEMPT) {
        errors.push(Error::invalid(
            &path.child("type"),
            spec.type_.as_str(),
            "type must be 'Exempt' if and only if name is 'exempt'",
        ));
    }
    match spec.type_.as_str() {
        TYPE_EXEMPT => {
            if spec.limited.is_some() {
                errors.push(Error::forbidden(
                    &path.child("limited"),
                    "must be nil if the type is not Limited",
                ));
            }
            if let Some(exempt) = &spec.exempt {
                validate_exempt(exempt, &path.child("exempt"), &mut errors);
            }
        }
        TYPE_LIMITED => {
            if spec.exempt.is_some() {
                errors.push(Error::forbidden(
                    &path.child("exempt"),
                    "must be nil if the type is Limited",
                ));
            }
            match &spec.limited {
                None => errors.push(Error::required(
                    &path.child("limited"),
                    "must not be empty when type is Limited",
                )),
                Some(limited) => validate_limited(limited, &path.child("limited"), &mut errors),
            }
        }
        other => errors.push(Error::not_supported(&path.child("type"), other, TYPES)),
    }
    if let Some(fixed) = super::bootstrap::mandatory_priority_level_spec(name) {
        let shown = || serde_json::to_value(spec).unwrap_or(Value::Null);
        if name == super::EXEMPT {
            let mut have = spec.clone();
            have.exempt = fixed.exempt.clone();
            if have != fixed {
                errors.push(Error::invalid(
                    &path,
                    shown(),
                    format!(
                        "spec of '{name}' except the 'spec.exempt' field must equal the fixed value"
                    ),
                ));
            }
        } else if *spec != fixed {
            errors.push(Error::invalid(
                &path,
                shown(),
                format!("spec of '{name}' must equal the fixed value"),
            ));
        }
    }
    errors
}

fn validate_status(status: &Status) -> ErrorList {
    super::validate_condition_types(
        status.conditions.iter().map(|c| c.type_.as_str()),
        &Path::new("status").child("conditions"),
    )
}

/// Validates a new PriorityLevelConfiguration.
pub fn validate(object: &Value) -> Result<ErrorList, ApiError> {
    let (meta, level) =
        util::decode_typed::<PriorityLevel>(object, &SCHEMA, KIND, super::API_VERSION)?;
    let mut errors =
        validate_object_meta(&meta, false, name_is_dns_subdomain, &Path::new("metadata"));
    errors.extend(validate_spec(&meta.name, &level.spec));
    errors.extend(validate_status(&level.status));
    Ok(errors)
}

/// Validates an update: the metadata's update rules, then everything a new one must satisfy.
pub fn validate_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let (new_meta, _) =
        util::decode_typed::<PriorityLevel>(new, &SCHEMA, KIND, super::API_VERSION)?;
    let (old_meta, _) =
        util::decode_typed::<PriorityLevel>(old, &SCHEMA, KIND, super::API_VERSION)?;
    let mut errors = validate_object_meta_update(&new_meta, &old_meta, &Path::new("metadata"));
    errors.extend(validate(new)?);
    Ok(errors)
}

/// Validates a write through `status`: the metadata's update rules and the conditions.
pub fn validate_status_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let (new_meta, level) =
        util::decode_typed::<PriorityLevel>(new, &SCHEMA, KIND, super::API_VERSION)?;
    let (old_meta, _) =
        util::decode_typed::<PriorityLevel>(old, &SCHEMA, KIND, super::API_VERSION)?;
    let mut errors = validate_object_meta_update(&new_meta, &old_meta, &Path::new("metadata"));
    errors.extend(validate_status(&level.status));
    Ok(errors)
}

/// Field-selector labels: only the metadata ones.
pub const FIELD_SELECTORS: &[&str] = &["metadata.name"];

/// Field-selector values.
pub fn field_values(object: &Value) -> BTreeMap<&'static str, String> {
    util::meta_fields(object, false)
}

/// `NAME TYPE NOMINALCONCURRENCYSHARES QUEUES HANDSIZE QUEUELENGTHLIMIT AGE`.
pub const COLUMNS: &[ColumnDefinition] = &[
    table::NAME,
    table::column("Type", "Whether the level's requests are limited.", 0),
    table::column(
        "NominalConcurrencyShares",
        "The level's share of the server's concurrency.",
        0,
    ),
    table::column("Queues", "The number of queues of the level.", 0),
    table::column(
        "HandSize",
        "The number of queues shuffle sharding deals to each flow.",
        0,
    ),
    table::column(
        "QueueLengthLimit",
        "The number of requests a queue holds.",
        0,
    ),
    table::AGE,
];

/// The cells: name, type, shares, queues, hand size, queue length limit (each `<none>` when
/// the level has none), age.
pub fn row(object: &Value, now: i64) -> Vec<Value> {
    let none = || Value::from("<none>");
    let at = |pointer: &str| object.pointer(pointer).cloned().unwrap_or_else(none);
    let limited = object
        .pointer("/spec/limited")
        .is_some_and(Value::is_object);
    let queuing = object
        .pointer("/spec/limited/limitResponse/queuing")
        .is_some_and(Value::is_object);
    let queue_cell = |field: &str| {
        if queuing {
            at(&format!("/spec/limited/limitResponse/queuing/{field}"))
        } else {
            none()
        }
    };
    vec![
        util::name(object),
        Value::from(util::str_at(object, &["spec", "type"])),
        if limited {
            at("/spec/limited/nominalConcurrencyShares")
        } else {
            none()
        },
        queue_cell("queues"),
        queue_cell("handSize"),
        queue_cell("queueLengthLimit"),
        util::age(object, now),
    ]
}

/// This resource in the catalog: everything the server needs to serve it.
pub static INFO: ResourceInfo = ResourceInfo {
    group: super::GROUP,
    version: "v1",
    kind: KIND,
    list_kind: "PriorityLevelConfigurationList",
    resource: "prioritylevelconfigurations",
    singular: "prioritylevelconfiguration",
    short_names: &[],
    namespaced: false,
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
    storage_prefix: "prioritylevelconfigurations",
    storage_api_version: super::API_VERSION,
    schema: &SCHEMA,
    protobuf: true,
    feature_gate: None,
    extensions: EXTENSIONS,
    openapi_schema: crate::schema::schema_of::<
        k8s_openapi::api::flowcontrol::v1::PriorityLevelConfiguration,
    >,
    hooks: Hooks {
        decode,
        default,
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
