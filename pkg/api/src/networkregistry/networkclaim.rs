//! NetworkClaim (`networkregistry.genplane.io/v1alpha1`, cluster-scoped): IP ranges a component
//! claims, and what the registry allocated of them.
//!
//! - `spec.addressSpace` lists address records: `reference` (the `group` and `resource` the
//!   range is for, e.g. `{"", services}`), `prefix` (a CIDR prefix in canonical form, IPv4 or
//!   IPv6: see [`super::prefix`]) and an optional `description` of at most
//!   [`MAX_DESCRIPTION`] characters. At least one record and at most [`MAX_RECORDS`]; no prefix
//!   twice, and no two records of one claim overlapping (a claim holds each address once). The
//!   list is a map keyed by `prefix` for server-side apply.
//! - `status.addressSpace` has one entry per record (keyed by `prefix`): `status` `Allocated` or
//!   `Unavailable`, `date` (when it got that status), `reason`, `message` and, when
//!   unavailable, `holder`: the claim holding an overlapping range. `status.conditions` (keyed
//!   by `type`): `Ready` (every record allocated) and `Conflict` (some record unavailable).
//!   Only the registry controller writes the status.
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
use genplane_apimachinery::validation::{
    is_dns1123_label, is_dns1123_subdomain, name_is_dns_subdomain,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::resource;
use crate::resource::{Hooks, ResourceInfo, Subresource, SubresourceRules};
use crate::schema::{Extensions, keyed_list};
use crate::table::{self, ColumnDefinition};
use crate::util;

use super::prefix::{Prefix, PrefixError};
use super::{API_VERSION, GROUP, RESOURCE, VERSION};

/// The kind.
pub const KIND: &str = "NetworkClaim";
/// The most address records one claim may have.
pub const MAX_RECORDS: usize = 64;
/// The longest description of a record, in characters.
pub const MAX_DESCRIPTION: usize = 255;
/// A record's status when the registry allocated its range to the claim.
pub const ALLOCATED: &str = "Allocated";
/// A record's status when an earlier claim holds an overlapping range.
pub const UNAVAILABLE: &str = "Unavailable";
/// The statuses of a record.
pub const RECORD_STATUSES: &[&str] = &[ALLOCATED, UNAVAILABLE];
/// The condition saying every record is allocated.
pub const READY: &str = "Ready";
/// The condition saying some record is unavailable.
pub const CONFLICT: &str = "Conflict";
/// The statuses of a condition.
pub const CONDITION_STATUSES: &[&str] = util::CONDITION_STATUSES;
/// The finalizer the registry controller puts on every claim: a deleted claim's ranges are
/// released (and given to the next claims) only when the controller removes it.
pub const FINALIZER: &str = "networkregistry.genplane.io/registry";

/// IP ranges claimed by a component, and what the registry allocated of them.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "io.genplane.networkregistry.v1alpha1.NetworkClaim")]
#[serde(rename_all = "camelCase", default)]
pub struct NetworkClaim {
    /// APIVersion defines the versioned schema of this representation of an object.
    pub api_version: Option<String>,
    /// Kind is a string value representing the REST resource this object represents.
    pub kind: Option<String>,
    /// Standard object's metadata.
    pub metadata: ObjectMeta,
    /// The ranges claimed.
    pub spec: NetworkClaimSpec,
    /// What the registry allocated, written by the registry controller.
    pub status: Option<NetworkClaimStatus>,
}

/// The ranges a claim asks for.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "io.genplane.networkregistry.v1alpha1.NetworkClaimSpec")]
#[serde(rename_all = "camelCase", default)]
pub struct NetworkClaimSpec {
    /// The address records, keyed by prefix: at least one, at most 64, none overlapping
    /// another of the same claim.
    pub address_space: Vec<AddressRecord>,
}

/// One range claimed, and what it is for.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema, PartialEq, Eq)]
#[schemars(rename = "io.genplane.networkregistry.v1alpha1.AddressRecord")]
#[serde(rename_all = "camelCase", default)]
pub struct AddressRecord {
    /// The kind of object the range's addresses are given to (e.g. `{"group": "", "resource":
    /// "services"}` for Service IPs).
    pub reference: ResourceReference,
    /// The range, a CIDR prefix in canonical form (IPv4 `10.96.0.0/12`, IPv6 as RFC 5952
    /// writes it, `fd00:10:96::/112`; no bits set beyond the prefix length).
    pub prefix: String,
    /// What the range is used for, at most 255 characters.
    pub description: Option<String>,
}

/// A group and resource.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema, PartialEq, Eq, PartialOrd, Ord)]
#[schemars(rename = "io.genplane.networkregistry.v1alpha1.ResourceReference")]
#[serde(rename_all = "camelCase", default)]
pub struct ResourceReference {
    /// The API group ("" for the core group).
    pub group: String,
    /// The resource, plural and lower case (e.g. `services`).
    pub resource: String,
}

/// What the registry allocated of a claim.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "io.genplane.networkregistry.v1alpha1.NetworkClaimStatus")]
#[serde(rename_all = "camelCase", default)]
pub struct NetworkClaimStatus {
    /// One entry per address record of the spec, keyed by prefix.
    pub address_space: Vec<RecordStatus>,
    /// `Ready` (every record allocated) and `Conflict` (some record unavailable).
    pub conditions: Vec<Condition>,
}

/// The allocation of one address record.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[schemars(rename = "io.genplane.networkregistry.v1alpha1.RecordStatus")]
#[serde(rename_all = "camelCase", default)]
pub struct RecordStatus {
    /// The record's prefix.
    pub prefix: String,
    /// `Allocated` or `Unavailable`.
    pub status: String,
    /// When the record got this status.
    pub date: Option<Time>,
    /// A CamelCase reason: `Allocated`, or `Overlaps` when an earlier claim holds an
    /// overlapping range.
    pub reason: Option<String>,
    /// The details, in words; for an unavailable record, the holder and its range.
    pub message: Option<String>,
    /// The claim that holds an overlapping range, when the record is unavailable.
    pub holder: Option<String>,
}

static REFERENCE: Struct = Struct {
    name: "ResourceReference",
    fields: &[
        Field::new("group", 1, Type::String),
        Field::new("resource", 2, Type::String),
    ],
};

static RECORD: Struct = Struct {
    name: "AddressRecord",
    fields: &[
        Field::new("reference", 1, Type::Struct(&REFERENCE)),
        Field::new("prefix", 2, Type::String),
        Field::new("description", 3, Type::String),
    ],
};

static RECORD_STATUS: Struct = Struct {
    name: "RecordStatus",
    fields: &[
        Field::new("prefix", 1, Type::String),
        Field::new("status", 2, Type::String),
        Field::new("date", 3, Type::Time),
        Field::new("reason", 4, Type::String),
        Field::new("message", 5, Type::String),
        Field::new("holder", 6, Type::String),
    ],
};

static SPEC: Struct = Struct {
    name: "NetworkClaimSpec",
    fields: &[Field::new(
        "addressSpace",
        1,
        Type::List(&Type::Struct(&RECORD)),
    )],
};

static STATUS: Struct = Struct {
    name: "NetworkClaimStatus",
    fields: &[
        Field::new("addressSpace", 1, Type::List(&Type::Struct(&RECORD_STATUS))),
        Field::new("conditions", 2, Type::List(&Type::Struct(&CONDITION))),
    ],
};

/// The shape of a NetworkClaim. It speaks JSON and YAML only (`protobuf: false`): the field
/// numbers are unused.
pub static SCHEMA: Struct = Struct {
    name: "NetworkClaim",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("spec", 2, Type::Struct(&SPEC)),
        Field::new("status", 3, Type::Struct(&STATUS)),
    ],
};

const SPEC_SCHEMA: &str = "io.genplane.networkregistry.v1alpha1.NetworkClaimSpec";
const STATUS_SCHEMA: &str = "io.genplane.networkregistry.v1alpha1.NetworkClaimStatus";

/// Both `addressSpace` lists are maps keyed by prefix (several appliers can each own their
/// records); `conditions` by type.
static EXTENSIONS: &[Extensions] = &[
    keyed_list(SPEC_SCHEMA, "addressSpace", &["prefix"]),
    keyed_list(STATUS_SCHEMA, "addressSpace", &["prefix"]),
    keyed_list(STATUS_SCHEMA, "conditions", &["type"]),
];

fn decode(object: &Value) -> Result<Decoded, ApiError> {
    decode::decode(object, &SCHEMA).map_err(|e| e.to_api_error(KIND, API_VERSION))
}

/// Reads `object` (any JSON) as a NetworkClaim, as the strategy reads it: a 400 `Status` when
/// a field has the wrong type.
pub fn read(object: &Value) -> Result<NetworkClaim, ApiError> {
    util::decode_typed::<NetworkClaim>(object, &SCHEMA, KIND, VERSION).map(|(_, claim)| claim)
}

/// Records every problem of `text` as a prefix at `path`; whether it had none.
fn check_prefix(path: &Path, text: &str, errors: &mut ErrorList) -> bool {
    let problems = Prefix::problems(text);
    for problem in &problems {
        errors.push(Error::invalid(path, text, problem.to_string()));
    }
    problems.is_empty()
}

/// Checks the address records of a spec, with field paths below `spec.addressSpace`.
pub fn validate_spec(spec: &NetworkClaimSpec, errors: &mut ErrorList) {
    let path = Path::new("spec").child("addressSpace");
    if spec.address_space.is_empty() {
        errors.push(Error::required(&path, "at least one address record"));
        return;
    }
    if spec.address_space.len() > MAX_RECORDS {
        errors.push(Error::too_many(
            &path,
            spec.address_space.len(),
            MAX_RECORDS,
        ));
        return;
    }
    let mut seen: Vec<(Prefix, usize)> = Vec::new();
    let mut texts = BTreeSet::new();
    for (i, record) in spec.address_space.iter().enumerate() {
        let at = path.index(i);
        validate_reference(&record.reference, &at.child("reference"), errors);
        if let Some(description) = &record.description
            && description.chars().count() > MAX_DESCRIPTION
        {
            errors.push(Error::too_long(
                &at.child("description"),
                description.as_str(),
                MAX_DESCRIPTION,
            ));
        }
        let prefix_path = at.child("prefix");
        if record.prefix.is_empty() {
            errors.push(Error::required(&prefix_path, ""));
            continue;
        }
        if !texts.insert(record.prefix.as_str()) {
            errors.push(Error::duplicate(&prefix_path, record.prefix.as_str()));
            continue;
        }
        if !check_prefix(&prefix_path, &record.prefix, errors) {
            continue;
        }
        let Ok(prefix) = Prefix::parse_canonical(&record.prefix) else {
            continue;
        };
        if let Some((other, j)) = seen.iter().find(|(other, _)| other.overlaps(&prefix)) {
            errors.push(Error::invalid(
                &prefix_path,
                record.prefix.as_str(),
                format!(
                    "overlaps {other} of spec.addressSpace[{j}]: a claim holds each address once"
                ),
            ));
        } else {
            seen.push((prefix, i));
        }
    }
}

fn validate_reference(reference: &ResourceReference, path: &Path, errors: &mut ErrorList) {
    if !reference.group.is_empty() {
        for message in is_dns1123_subdomain(&reference.group) {
            errors.push(Error::invalid(
                &path.child("group"),
                reference.group.as_str(),
                message,
            ));
        }
    }
    if reference.resource.is_empty() {
        errors.push(Error::required(&path.child("resource"), ""));
    } else {
        for message in is_dns1123_label(&reference.resource) {
            errors.push(Error::invalid(
                &path.child("resource"),
                reference.resource.as_str(),
                message,
            ));
        }
    }
}

fn validate(object: &Value) -> Result<ErrorList, ApiError> {
    let (meta, claim) = util::decode_typed::<NetworkClaim>(object, &SCHEMA, KIND, VERSION)?;
    let mut errors =
        validate_object_meta(&meta, false, name_is_dns_subdomain, &Path::new("metadata"));
    validate_spec(&claim.spec, &mut errors);
    Ok(errors)
}

fn validate_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let (new_meta, claim) = util::decode_typed::<NetworkClaim>(new, &SCHEMA, KIND, VERSION)?;
    let (old_meta, _) = util::decode_typed::<NetworkClaim>(old, &SCHEMA, KIND, VERSION)?;
    let mut errors = validate_object_meta_update(&new_meta, &old_meta, &Path::new("metadata"));
    validate_spec(&claim.spec, &mut errors);
    Ok(errors)
}

fn validate_status(status: &NetworkClaimStatus, errors: &mut ErrorList) {
    let path = Path::new("status");
    let mut prefixes = BTreeSet::new();
    for (i, record) in status.address_space.iter().enumerate() {
        let at = path.child("addressSpace").index(i);
        if check_prefix(&at.child("prefix"), &record.prefix, errors)
            && !prefixes.insert(record.prefix.as_str())
        {
            errors.push(Error::duplicate(
                &at.child("prefix"),
                record.prefix.as_str(),
            ));
        }
        if !RECORD_STATUSES.contains(&record.status.as_str()) {
            errors.push(Error::not_supported(
                &at.child("status"),
                record.status.as_str(),
                RECORD_STATUSES,
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
    let (new_meta, claim) = util::decode_typed::<NetworkClaim>(new, &SCHEMA, KIND, VERSION)?;
    let (old_meta, _) = util::decode_typed::<NetworkClaim>(old, &SCHEMA, KIND, VERSION)?;
    let mut errors = validate_object_meta_update(&new_meta, &old_meta, &Path::new("metadata"));
    if let Some(status) = &claim.status {
        validate_status(status, &mut errors);
    }
    Ok(errors)
}

/// The longest `Prefixes` cell before it is cut with `...`.
const PREFIXES_CELL: usize = 64;

/// `NAME PREFIXES ALLOCATED AGE`, and with `-o wide` the Ready and Conflict conditions.
const COLUMNS: &[ColumnDefinition] = &[
    table::NAME,
    table::column("Prefixes", "The prefixes claimed, comma-separated.", 0),
    table::column(
        "Allocated",
        "How many of the claim's address records are allocated, of all.",
        0,
    ),
    table::AGE,
    table::column("Ready", "Whether every address record is allocated.", 1),
    table::column(
        "Conflict",
        "Whether an earlier claim holds a range overlapping one of this claim's.",
        1,
    ),
];

fn row(object: &Value, now: i64) -> Vec<Value> {
    let records = object
        .pointer("/spec/addressSpace")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut prefixes = records
        .iter()
        .filter_map(|r| r["prefix"].as_str())
        .collect::<Vec<_>>()
        .join(",");
    if prefixes.len() > PREFIXES_CELL {
        let mut cut = PREFIXES_CELL;
        while !prefixes.is_char_boundary(cut) {
            cut -= 1;
        }
        prefixes.truncate(cut);
        prefixes.push_str("...");
    }
    let allocated = object
        .pointer("/status/addressSpace")
        .and_then(Value::as_array)
        .map_or(0, |s| s.iter().filter(|r| r["status"] == ALLOCATED).count());
    vec![
        util::name(object),
        json!(prefixes),
        json!(format!("{allocated}/{}", records.len())),
        util::age(object, now),
        json!(util::condition_status(object, READY)),
        json!(util::condition_status(object, CONFLICT)),
    ]
}

fn field_values(object: &Value) -> BTreeMap<&'static str, String> {
    util::meta_fields(object, false)
}

/// Everything the server needs to serve network claims.
pub static INFO: ResourceInfo = ResourceInfo {
    group: GROUP,
    version: VERSION,
    kind: KIND,
    list_kind: "NetworkClaimList",
    resource: RESOURCE,
    singular: "networkclaim",
    short_names: &["nc"],
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
    storage_prefix: "networkregistry.genplane.io/networkclaims",
    storage_api_version: API_VERSION,
    schema: &SCHEMA,
    protobuf: false,
    feature_gate: Some(crate::features::NETWORK_REGISTRY),
    extensions: EXTENSIONS,
    openapi_schema: crate::schema::schema_of::<NetworkClaim>,
    hooks: Hooks {
        decode,
        default: resource::no_default,
        prepare_for_create: util::prepare_spec_create,
        prepare_for_update: util::prepare_spec_update,
        validate,
        validate_update,
        to_storage: None,
        from_storage: None,
        field_selectors: &["metadata.name"],
        field_values,
        columns: COLUMNS,
        row,
        pending_finalization: resource::nothing_pending,
        mark_deleting: resource::no_default,
        grace_period: resource::not_graceful,
    },
};

/// The fuzz entry point: any bytes, read as JSON (or, failing that, as the prefix of a single
/// record), go through the kind's decoding and validation. Never panics on any input.
pub fn exercise(data: &[u8]) {
    let object = match serde_json::from_slice::<Value>(data) {
        Ok(object) => object,
        Err(_) => {
            let text = String::from_utf8_lossy(data);
            json!({"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": "fuzz"},
                   "spec": {"addressSpace": [{"reference": {"resource": "services"}, "prefix": text}]}})
        }
    };
    if let Ok(decoded) = decode(&object) {
        let _ = validate(&decoded.object);
        let _ = validate_update(&decoded.object, &decoded.object);
        let _ = validate_status_update(&decoded.object, &decoded.object);
        let _ = row(&decoded.object, 0);
    }
    let text = String::from_utf8_lossy(data);
    match Prefix::parse_canonical(&text) {
        Ok(prefix) => assert_eq!(prefix.to_string(), text, "a canonical prefix reads back"),
        // The form offered keeps the bits set beyond the length, as written: that is all that
        // may still be wrong with it.
        Err(PrefixError::NotCanonical { canonical }) => assert!(
            Prefix::problems(&canonical)
                .iter()
                .all(|p| *p == PrefixError::HostBits),
            "the canonical form offered for {text:?} is canonical"
        ),
        Err(_) => {}
    }
}

#[cfg(test)]
mod tests;
