//! `metadata.managedFields`: who owns which fields of an object, and how writes change it.
//!
//! An object's managers are entries of (manager name, operation, subresource, and for `Update`
//! the API version), each with the [`Set`] of fields it owns. [`update`] records a create,
//! update or non-apply patch: the writer takes every field it added or changed, others keep what
//! it did not touch, and removed fields leave every set. [`apply`] merges an applied
//! configuration: the applier owns exactly the fields of its configuration, fields it applied
//! before and no longer applies are removed unless someone else owns them, and changing a value
//! another manager owns is a conflict unless forced.
//!
//! Entries with no fields are dropped; entries are kept sorted as upstream sorts them
//! (operation, time, manager, API version, subresource). At most [`MAX_UPDATE_MANAGERS`]
//! `Update` entries are kept, older ones merged into `ancient-changes`
//! ([`cap_update_managers`]). [`reconcile`] brings the entries in line with a changed schema,
//! and [`UpstreamFieldsOrder`] serializes an object with its FieldsV1 keys in upstream's order. Fields every object has
//! (`apiVersion`, `kind`, and the server-set metadata such as `name` and `uid`) are owned by
//! no one.

use std::fmt;

use serde_json::{Map, Value, json};

use crate::fieldpath::{Path, Set};
use crate::schema::{Schema, TypeRef};
use crate::typed::{TypeError, compare_without_managed, field_set};

/// How a manager wrote its fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    /// Server-side apply.
    Apply,
    /// Create, update or a non-apply patch.
    Update,
}

impl Operation {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// One entry of `metadata.managedFields`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The manager's name.
    pub manager: String,
    /// How it wrote.
    pub operation: Operation,
    /// The API version of the object it wrote.
    pub api_version: String,
    /// When it last changed the object (RFC 3339, seconds).
    pub time: Option<String>,
    /// The subresource it wrote through (`status`), or empty.
    pub subresource: String,
    /// The fields it owns.
    pub fields: Set,
}

impl Entry {
    /// Whether this entry is the one `writer` writes to.
    fn belongs_to(&self, writer: &Writer<'_>, operation: Operation) -> bool {
        self.manager == writer.manager
            && self.operation == operation
            && self.subresource == writer.subresource
            && (operation == Operation::Apply || self.api_version == writer.api_version)
    }

    /// The manager as conflict messages name it: `"name"`, with the subresource and, for
    /// updaters, the API version.
    pub fn describe(&self) -> String {
        let mut out = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            out.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == Operation::Update {
            out.push_str(&format!(" using {}", self.api_version));
        }
        out
    }

    fn to_json(&self) -> Value {
        let mut out = Map::new();
        if !self.manager.is_empty() {
            out.insert("manager".into(), json!(self.manager));
        }
        out.insert("operation".into(), json!(self.operation.as_str()));
        out.insert("apiVersion".into(), json!(self.api_version));
        if let Some(time) = &self.time {
            out.insert("time".into(), json!(time));
        }
        out.insert("fieldsType".into(), json!("FieldsV1"));
        out.insert("fieldsV1".into(), self.fields.to_fields_v1());
        if !self.subresource.is_empty() {
            out.insert("subresource".into(), json!(self.subresource));
        }
        Value::Object(out)
    }

    fn from_json(value: &Value, index: usize) -> Result<Entry, ManagedError> {
        let at = |field: &str| format!("metadata.managedFields[{index}].{field}");
        let object = value.as_object().ok_or_else(|| {
            ManagedError::new(
                format!("metadata.managedFields[{index}]"),
                "must be an object",
            )
        })?;
        let string = |field: &str| -> Result<String, ManagedError> {
            match object.get(field) {
                None | Some(Value::Null) => Ok(String::new()),
                Some(Value::String(s)) => Ok(s.clone()),
                Some(_) => Err(ManagedError::new(at(field), "must be a string")),
            }
        };
        let operation = match string("operation")?.as_str() {
            "Apply" => Operation::Apply,
            "Update" => Operation::Update,
            other => {
                return Err(ManagedError::new(
                    at("operation"),
                    format!(
                        "Unsupported value: {}: supported values: \"Apply\", \"Update\"",
                        genplane_apimachinery::gofmt::Quoted(other)
                    ),
                ));
            }
        };
        let fields_type = string("fieldsType")?;
        if fields_type != "FieldsV1" {
            return Err(ManagedError::new(
                at("fieldsType"),
                format!(
                    "Invalid value: {}: must be `FieldsV1`",
                    genplane_apimachinery::gofmt::Quoted(&fields_type)
                ),
            ));
        }
        let fields = match object.get("fieldsV1") {
            None | Some(Value::Null) => Set::new(),
            Some(v) => Set::from_fields_v1(v)
                .map_err(|e| ManagedError::new(at("fieldsV1"), e.to_string()))?,
        };
        let time = Some(string("time")?).filter(|t| !t.is_empty());
        Ok(Entry {
            manager: string("manager")?,
            operation,
            api_version: string("apiVersion")?,
            time,
            subresource: string("subresource")?,
            fields,
        })
    }
}

/// Why `metadata.managedFields` cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ManagedError {
    /// The field path, e.g. `metadata.managedFields[0].operation`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl ManagedError {
    fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        ManagedError {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// The entries of an object's `metadata.managedFields` (`None` when it has none).
pub fn decode(object: &Value) -> Result<Option<Vec<Entry>>, ManagedError> {
    match genplane_apimachinery::meta::field(object, "managedFields") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| Entry::from_json(v, i))
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(ManagedError::new(
            "metadata.managedFields",
            "must be a list",
        )),
    }
}

/// Whether a write asks to clear the managed fields: an empty list, or a list holding one empty
/// entry (upstream resets on both; a client unaware of the field omits it instead).
pub fn is_reset(object: &Value) -> bool {
    matches!(genplane_apimachinery::meta::field(object, "managedFields"),
        Some(Value::Array(items)) if items.is_empty()
            || (items.len() == 1 && items[0].as_object().is_some_and(Map::is_empty)))
}

/// Writes `entries` (sorted, empty ones dropped) into `object`'s metadata.
pub fn encode(object: &mut Value, mut entries: Vec<Entry>) {
    entries.retain(|e| !e.fields.is_empty());
    entries.sort_by(|a, b| {
        a.operation
            .cmp(&b.operation)
            .then_with(|| a.time.cmp(&b.time))
            .then_with(|| a.manager.cmp(&b.manager))
            .then_with(|| a.api_version.cmp(&b.api_version))
            .then_with(|| a.subresource.cmp(&b.subresource))
    });
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if entries.is_empty() {
        metadata.remove("managedFields");
    } else {
        metadata.insert(
            "managedFields".into(),
            Value::Array(entries.iter().map(Entry::to_json).collect()),
        );
    }
}

/// An object that serializes (with any serde serializer, e.g. `serde_json::to_vec`) as the
/// object itself, except that the keys of every `metadata.managedFields[].fieldsV1` are written
/// in upstream's order (`.` first, then fields, keys, values and indices, each in upstream's
/// order) rather than alphabetically, so that the FieldsV1 bytes clients see are the ones
/// upstream serves.
#[derive(Debug)]
pub struct UpstreamFieldsOrder<'a>(pub &'a Value);

impl serde::Serialize for UpstreamFieldsOrder<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Ordered(self.0, Place::Root).serialize(serializer)
    }
}

/// Where a value is within an object.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    Root,
    Metadata,
    ManagedFields,
    Entry,
    Fields,
    Other,
}

struct Ordered<'a>(&'a Value, Place);

impl serde::Serialize for Ordered<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        let Ordered(value, place) = *self;
        match value {
            Value::Object(map) if place == Place::Fields => {
                let mut keys: Vec<(Option<crate::fieldpath::PathElement>, &String)> = map
                    .keys()
                    .map(|k| (crate::fieldpath::PathElement::decode(k).ok(), k))
                    .collect();
                // `.` first, then elements in their order, anything unreadable last.
                keys.sort_by(|(a, ka), (b, kb)| {
                    (ka.as_str() != ".")
                        .cmp(&(kb.as_str() != "."))
                        .then_with(|| match (a, b) {
                            (Some(a), Some(b)) => a.cmp(b),
                            (Some(_), None) => std::cmp::Ordering::Less,
                            (None, Some(_)) => std::cmp::Ordering::Greater,
                            (None, None) => ka.cmp(kb),
                        })
                });
                let mut out = serializer.serialize_map(Some(map.len()))?;
                for (_, key) in keys {
                    out.serialize_entry(key, &Ordered(&map[key], Place::Fields))?;
                }
                out.end()
            }
            Value::Object(map) if place != Place::Other => {
                let mut out = serializer.serialize_map(Some(map.len()))?;
                for (key, child) in map {
                    let inner = match (place, key.as_str()) {
                        (Place::Root, "metadata") => Place::Metadata,
                        (Place::Metadata, "managedFields") => Place::ManagedFields,
                        (Place::Entry, "fieldsV1") => Place::Fields,
                        _ => Place::Other,
                    };
                    out.serialize_entry(key, &Ordered(child, inner))?;
                }
                out.end()
            }
            Value::Array(items) if place == Place::ManagedFields => {
                let mut out = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    out.serialize_element(&Ordered(item, Place::Entry))?;
                }
                out.end()
            }
            other => other.serialize(serializer),
        }
    }
}

/// Brings the managed fields of `object` in line with its type `ty` after a schema change
/// ([`crate::reconcile::reconcile_fields`] for every entry, against the object itself).
/// Returns whether they changed. Managed fields that cannot be read are left alone.
pub fn reconcile(schema: &Schema, ty: &TypeRef, object: &mut Value) -> Result<bool, TypeError> {
    let Ok(Some(mut entries)) = decode(object) else {
        return Ok(false);
    };
    let live = without_managed(object);
    let mut changed = false;
    for entry in &mut entries {
        if let Some(fields) = crate::reconcile::reconcile_fields(schema, ty, &entry.fields, &live)?
        {
            entry.fields = fields;
            changed = true;
        }
    }
    if changed {
        encode(object, entries);
    }
    Ok(changed)
}

/// Removes `metadata.managedFields`.
pub fn remove(object: &mut Value) {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
    }
}

/// The top-level fields no one owns.
const UNOWNED_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];
/// The fields of `metadata` no one owns.
const UNOWNED_METADATA: [&str; 9] = [
    "name",
    "namespace",
    "creationTimestamp",
    "selfLink",
    "uid",
    "clusterName",
    "generation",
    "managedFields",
    "resourceVersion",
];

/// Removes the fields no one owns from `fields` (those themselves, not what lies below them).
fn remove_unowned(fields: &mut Set) {
    fields.remove_fields(&[], &UNOWNED_FIELDS);
    fields.remove_fields(&["metadata"], &UNOWNED_METADATA);
}

/// `fields` without the fields no one owns.
fn without_unowned(mut fields: Set) -> Set {
    remove_unowned(&mut fields);
    fields
}

/// The manager that owns the fields of an object without managed fields when it is first
/// applied to, as upstream names it.
pub const BEFORE_FIRST_APPLY: &str = "before-first-apply";

/// Who writes, and how objects of the written kind are typed.
#[derive(Clone, Debug)]
pub struct Writer<'a> {
    /// The type model.
    pub schema: &'a Schema,
    /// The type of the object.
    pub ty: TypeRef,
    /// The manager's name.
    pub manager: String,
    /// The API version written (`v1`, `rbac.authorization.k8s.io/v1`).
    pub api_version: String,
    /// The subresource written through, or empty.
    pub subresource: String,
    /// The time of the write (RFC 3339, seconds).
    pub time: String,
    /// Fields this write cannot change, because the strategy resets them (`status` through the
    /// main resource, `spec` through `status`): the writer does not own them, and differences
    /// in them are not conflicts.
    pub ignored: Set,
}

fn without_managed(object: &Value) -> Value {
    let mut out = object.clone();
    remove(&mut out);
    out
}

/// Records a create (`old` is `None`), update or non-apply patch in `new`'s managed fields.
///
/// The managed fields of `new` are used when it has any (a client may edit them), else those of
/// `old`; writes through a subresource always keep those of `old`. An empty list, or a list
/// holding one empty entry, clears them. An update of an object without managed fields does
/// not start tracking them (only a create or an apply does). Managed fields that cannot be
/// read are dropped, as upstream drops them, rather than failing the write. When more than
/// [`MAX_UPDATE_MANAGERS`] `Update` entries result, the oldest are merged
/// ([`cap_update_managers`]).
pub fn update(writer: &Writer<'_>, old: Option<&Value>, new: &mut Value) -> Result<(), TypeError> {
    let from_request = writer.subresource.is_empty();
    if from_request && is_reset(new) {
        remove(new);
        return Ok(());
    }
    let given = if from_request {
        decode(new).ok().flatten().filter(|e| !e.is_empty())
    } else {
        None
    };
    let mut entries = match given {
        Some(entries) => entries,
        None => match old.map(decode).transpose() {
            Ok(entries) => entries.flatten().unwrap_or_default(),
            Err(_) => {
                remove(new);
                return Ok(());
            }
        },
    };
    if old.is_some() && entries.is_empty() {
        // Ownership of an existing object is tracked from its creation or its first apply:
        // an update of an object no one is known to manage leaves it so, as upstream's
        // `skipNonAppliedManager` does.
        remove(new);
        return Ok(());
    }
    let nothing = json!({});
    let mut comparison =
        compare_without_managed(writer.schema, &writer.ty, old.unwrap_or(&nothing), new)?;
    comparison.exclude(&writer.ignored);
    let mut taken = std::mem::take(&mut comparison.added);
    taken.extend(std::mem::take(&mut comparison.modified));
    for entry in &mut entries {
        if !entry.belongs_to(writer, Operation::Update) {
            entry.fields.subtract(&taken);
            entry.fields.subtract(&comparison.removed);
        }
    }
    let mine = without_unowned(taken);
    let index = entries
        .iter()
        .position(|e| e.belongs_to(writer, Operation::Update));
    match index {
        Some(i) => {
            let entry = &mut entries[i];
            let changed = !mine.is_empty();
            entry.fields.subtract(&comparison.removed);
            entry.fields.extend(mine);
            remove_unowned(&mut entry.fields);
            if changed {
                entry.time = Some(writer.time.clone());
            }
        }
        None if !mine.is_empty() => entries.push(Entry {
            manager: writer.manager.clone(),
            operation: Operation::Update,
            api_version: writer.api_version.clone(),
            time: Some(writer.time.clone()),
            subresource: writer.subresource.clone(),
            fields: mine,
        }),
        None => {}
    }
    entries.retain(|e| !e.fields.is_empty());
    cap_update_managers(&mut entries, MAX_UPDATE_MANAGERS);
    encode(new, entries);
    Ok(())
}

/// How many `Update` entries an object keeps before the oldest are merged (upstream's
/// `DefaultMaxUpdateManagers`).
pub const MAX_UPDATE_MANAGERS: usize = 10;

/// The manager that `Update` entries merged by [`cap_update_managers`] are recorded under.
pub const ANCIENT_CHANGES: &str = "ancient-changes";

/// The identity of an entry as upstream keys its managers: the JSON of the entry's manager,
/// operation, API version (updates only) and subresource, written as Go writes it.
fn identifier(entry: &Entry) -> String {
    let mut out = String::from("{");
    if !entry.manager.is_empty() {
        out.push_str("\"manager\":");
        crate::fieldpath::write_go_string(&entry.manager, &mut out);
        out.push(',');
    }
    out.push_str("\"operation\":\"");
    out.push_str(entry.operation.as_str());
    out.push('"');
    if entry.operation == Operation::Update && !entry.api_version.is_empty() {
        out.push_str(",\"apiVersion\":");
        crate::fieldpath::write_go_string(&entry.api_version, &mut out);
    }
    if !entry.subresource.is_empty() {
        out.push_str(",\"subresource\":");
        crate::fieldpath::write_go_string(&entry.subresource, &mut out);
    }
    out.push('}');
    out
}

/// Keeps at most `max` `Update` entries, as upstream's `capManagersManager` does after every
/// update: the `Update` entries are taken oldest first (by time, an entry without one being the
/// oldest; then by identity), and the second and later entries of each API version are merged
/// into one entry per version named [`ANCIENT_CHANGES`] (without subresource), which the first
/// entry of that version becomes, until `max` remain. The merged entry takes the time of the
/// newest entry merged into it. An existing `ancient-changes` entry is one of the `Update`
/// entries like any other: it takes in later entries of its version when it is the oldest of
/// them. (As upstream, when an older entry of its version comes first, merging
/// `ancient-changes` into itself drops it.)
pub fn cap_update_managers(entries: &mut Vec<Entry>, max: usize) {
    let mut updaters: Vec<(Option<String>, String)> = entries
        .iter()
        .filter(|e| e.operation == Operation::Update)
        .map(|e| (e.time.clone(), identifier(e)))
        .collect();
    if updaters.len() <= max {
        return;
    }
    updaters.sort();
    let find = |entries: &[Entry], id: &str| entries.iter().position(|e| identifier(e) == id);
    let mut first_of_version: std::collections::BTreeMap<String, String> =
        std::collections::BTreeMap::new();
    let mut length = updaters.len();
    for (time, id) in updaters {
        if length <= max {
            break;
        }
        let Some(at) = find(entries, &id) else {
            continue;
        };
        let version = entries[at].api_version.clone();
        let bucket = Entry {
            manager: ANCIENT_CHANGES.to_owned(),
            operation: Operation::Update,
            api_version: version.clone(),
            time: None,
            subresource: String::new(),
            fields: Set::new(),
        };
        let bucket_id = identifier(&bucket);
        let Some(first) = first_of_version.get(&version) else {
            first_of_version.insert(version, id);
            continue;
        };
        if find(entries, &bucket_id).is_none()
            && let Some(first_at) = find(entries, first)
        {
            let moved = entries.remove(first_at);
            entries.push(Entry {
                fields: moved.fields,
                ..bucket
            });
        }
        let (Some(at), Some(bucket_at)) = (find(entries, &id), find(entries, &bucket_id)) else {
            continue;
        };
        let merged = entries[at].fields.union(&entries[bucket_at].fields);
        entries[bucket_at].fields = merged;
        entries.remove(at);
        length -= 1;
        if let Some(bucket_at) = find(entries, &bucket_id) {
            entries[bucket_at].time = time;
        }
    }
}

/// A field another manager owns with another value than the applied one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// The owner, as [`Entry::describe`] names it.
    pub manager: String,
    /// The field.
    pub path: Path,
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "conflict with {}: {}", self.manager, self.path)
    }
}

/// The message of a conflict answer, as upstream words it.
pub fn conflicts_message(conflicts: &[Conflict]) -> String {
    if let [only] = conflicts {
        return format!("Apply failed with 1 conflict: {only}");
    }
    let mut managers: Vec<&str> = conflicts.iter().map(|c| c.manager.as_str()).collect();
    managers.sort_unstable();
    managers.dedup();
    let mut lines = Vec::new();
    for manager in managers {
        lines.push(format!("conflicts with {manager}:"));
        for conflict in conflicts.iter().filter(|c| c.manager == manager) {
            lines.push(format!("- {}", conflict.path));
        }
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

/// Why an apply fails.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// A value does not fit the type model.
    #[error(transparent)]
    Type(#[from] TypeError),
    /// Other managers own fields the configuration changes (and the apply was not forced).
    #[error("{}", conflicts_message(.0))]
    Conflicts(Vec<Conflict>),
    /// The configuration itself is not acceptable (a 400).
    #[error("{0}")]
    BadRequest(String),
}

/// Applies `config` to `live` (`None`: the object does not exist; the result is created from
/// the configuration). Returns the new object with its managed fields, and whether it differs
/// from the live one.
///
/// A server-side apply by `kubectl` over fields client-side `kubectl apply` set is not a
/// conflict where the live values are still those of the last-applied-configuration
/// annotation (upstream's `lastAppliedManager`): such conflicts are taken over as if forced.
pub fn apply(
    writer: &Writer<'_>,
    live: Option<&Value>,
    config: &Value,
    force: bool,
) -> Result<(Value, bool), ApplyError> {
    let first = apply_once(writer, live, config, force);
    let (Err(ApplyError::Conflicts(conflicts)), Some(live)) = (&first, live) else {
        return first;
    };
    if writer.manager != KUBECTL {
        return first;
    }
    let Some(allowed) = allowed_by_last_applied(writer, live) else {
        return first;
    };
    let remaining: Vec<Conflict> = conflicts
        .iter()
        .filter(|c| !allowed.has(&c.path))
        .cloned()
        .collect();
    if remaining.is_empty() {
        apply_once(writer, Some(live), config, true)
    } else {
        Err(ApplyError::Conflicts(remaining))
    }
}

/// The fields of the live object's last-applied-configuration annotation whose values are
/// still the live ones: what client-side apply set and nobody changed since. `None` when
/// there is no usable annotation (absent, unreadable, another API version, not of the type).
fn allowed_by_last_applied(writer: &Writer<'_>, live: &Value) -> Option<Set> {
    let text = genplane_apimachinery::meta::field(live, "annotations")?
        .get(LAST_APPLIED)?
        .as_str()
        .filter(|t| !t.is_empty())?;
    let last: Value = serde_json::from_str(text).ok()?;
    if last.get("apiVersion").and_then(Value::as_str) != Some(writer.api_version.as_str()) {
        return None;
    }
    let fields = field_set(writer.schema, &writer.ty, &last).ok()?;
    let comparison = compare_without_managed(writer.schema, &writer.ty, &last, live).ok()?;
    Some(
        fields
            .difference(&comparison.modified)
            .difference(&comparison.added)
            .difference(&comparison.removed),
    )
}

fn apply_once(
    writer: &Writer<'_>,
    live: Option<&Value>,
    config: &Value,
    force: bool,
) -> Result<(Value, bool), ApplyError> {
    if genplane_apimachinery::meta::field(config, "managedFields").is_some_and(|v| !v.is_null()) {
        return Err(ApplyError::BadRequest(
            "metadata.managedFields must be nil".to_owned(),
        ));
    }
    let schema = writer.schema;
    let ty = &writer.ty;
    let mut entries = match live.map(decode).transpose() {
        Ok(entries) => entries.flatten().unwrap_or_default(),
        Err(e) => {
            return Err(ApplyError::BadRequest(format!(
                "failed to decode managed fields: {e}"
            )));
        }
    };
    let nothing = json!({});
    let live_value = live.unwrap_or(&nothing);
    if let (Some(_), true) = (live, entries.is_empty()) {
        // An object no one is known to manage (written before ownership was tracked, or
        // cleared) is owned as a whole by a stand-in updater, so that a first apply that
        // changes its values conflicts rather than silently overwrites them.
        let fields = without_unowned(field_set(schema, ty, &without_managed(live_value))?);
        entries.push(Entry {
            manager: BEFORE_FIRST_APPLY.to_owned(),
            operation: Operation::Update,
            api_version: writer.api_version.clone(),
            time: Some(writer.time.clone()),
            subresource: String::new(),
            fields,
        });
    }
    let mut merged = crate::apply::merge_into(schema, ty, live_value.clone(), config)?;
    remove(&mut merged);
    let index = entries
        .iter()
        .position(|e| e.belongs_to(writer, Operation::Apply));
    let last = index.map(|i| entries[i].fields.clone()).unwrap_or_default();
    let applied = field_set(schema, ty, config)?.recursive_difference(&writer.ignored);

    // Prune what this manager applied last time, no longer applies, and no one else owns.
    // When it applies everything it applied last time, nothing can go (everything pruned would
    // be added back as owned by it), and the work is skipped.
    let result = if last.difference(&applied).is_empty() {
        merged
    } else {
        use crate::apply::{named_fields_as_members, remove_items};
        let named = |s: &Set| named_fields_as_members(schema, ty, s);
        let pruned = remove_items(schema, ty, &merged, &named(&last));
        let mut owned = applied.clone();
        for (i, entry) in entries.iter().enumerate() {
            if Some(i) != index {
                owned = owned.union(&entry.fields);
            }
        }
        let merged_set = named(&field_set(schema, ty, &merged)?);
        let pruned_set = named(&field_set(schema, ty, &pruned)?);
        let added_back = remove_items(
            schema,
            ty,
            &merged,
            &merged_set.difference(&pruned_set.union(&named(&owned))),
        );
        let kept_set = named(&field_set(schema, ty, &added_back)?);
        remove_items(
            schema,
            ty,
            &merged,
            &merged_set.difference(&kept_set).intersection(&named(&last)),
        )
    };

    let mut comparison = compare_without_managed(schema, ty, live_value, &result)?;
    comparison.exclude(&writer.ignored);
    let taken = comparison.modified.union(&comparison.added);
    let mut conflicts = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        if Some(i) == index {
            continue;
        }
        for path in entry.fields.intersection(&taken).paths() {
            conflicts.push(Conflict {
                manager: entry.describe(),
                path,
            });
        }
    }
    if !force && !conflicts.is_empty() {
        conflicts.sort_by(|a, b| a.manager.cmp(&b.manager).then_with(|| a.path.cmp(&b.path)));
        return Err(ApplyError::Conflicts(conflicts));
    }
    for (i, entry) in entries.iter_mut().enumerate() {
        if Some(i) != index {
            entry.fields.subtract(&taken);
            entry.fields.subtract(&comparison.removed);
        }
    }
    let changed = !comparison.is_same();
    let mine = without_unowned(applied);
    match index {
        Some(i) => {
            let entry = &mut entries[i];
            entry.fields = mine;
            entry.api_version = writer.api_version.clone();
            if changed {
                entry.time = Some(writer.time.clone());
            }
        }
        None => entries.push(Entry {
            manager: writer.manager.clone(),
            operation: Operation::Apply,
            api_version: writer.api_version.clone(),
            time: Some(writer.time.clone()),
            subresource: writer.subresource.clone(),
            fields: mine,
        }),
    }
    let mut out = result;
    if writer.manager == KUBECTL {
        sync_last_applied(&mut out, config);
    }
    encode(&mut out, entries);
    Ok((out, changed))
}

/// The manager name `kubectl apply --server-side` uses by default.
const KUBECTL: &str = "kubectl";

/// The annotation client-side `kubectl apply` keeps its last configuration in.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Keeps client-side apply's annotation in step with a server-side apply by `kubectl`, as
/// upstream's `lastAppliedUpdater` does: when the result carries a non-empty annotation, it
/// becomes the applied configuration (without the annotation itself) as Go's JSON encoder
/// writes it (keys sorted, a newline at the end). Other managers opt out.
fn sync_last_applied(object: &mut Value, config: &Value) {
    let present = genplane_apimachinery::meta::field(object, "annotations")
        .and_then(|a| a.get(LAST_APPLIED))
        .and_then(Value::as_str)
        .is_some_and(|v| !v.is_empty());
    if !present {
        return;
    }
    let mut applied = config.clone();
    if let Some(annotations) = applied
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.remove(LAST_APPLIED);
    }
    let mut text = String::new();
    crate::fieldpath::write_go_value(&applied, &mut text);
    text.push('\n');
    if let Some(annotations) = object
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.insert(LAST_APPLIED.to_owned(), Value::String(text));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> Set {
        Set::from_paths(&names.iter().map(|n| Path::fields(&[n])).collect::<Vec<_>>())
    }

    fn entry(manager: &str, version: &str, minute: u32, fields: &[&str]) -> Entry {
        Entry {
            manager: manager.to_owned(),
            operation: Operation::Update,
            api_version: version.to_owned(),
            time: Some(format!("2026-03-01T10:{minute:02}:00Z")),
            subresource: String::new(),
            fields: set(fields),
        }
    }

    fn capped(
        mut entries: Vec<Entry>,
        max: usize,
    ) -> Vec<(String, String, Option<String>, Vec<Path>)> {
        cap_update_managers(&mut entries, max);
        let mut object = json!({"metadata": {}});
        encode(&mut object, entries);
        decode(&object)
            .unwrap()
            .unwrap_or_default()
            .into_iter()
            .map(|e| (e.manager, e.api_version, e.time, e.fields.paths()))
            .collect()
    }

    fn expect(
        manager: &str,
        version: &str,
        minute: u32,
        fields: &[&str],
    ) -> (String, String, Option<String>, Vec<Path>) {
        let e = entry(manager, version, minute, fields);
        (e.manager, e.api_version, e.time, e.fields.paths())
    }

    #[test]
    fn cap_merges_the_oldest_updaters_per_version() {
        // Under the cap: nothing happens.
        let few = vec![entry("u1", "v1", 1, &["a"]), entry("u2", "v1", 2, &["b"])];
        assert_eq!(
            capped(few, 3),
            [expect("u1", "v1", 1, &["a"]), expect("u2", "v1", 2, &["b"])]
        );
        // Four of one version, at most three: the two oldest become ancient-changes, with the
        // time of the newer of them.
        let four = vec![
            entry("u4", "v1", 4, &["d"]),
            entry("u1", "v1", 1, &["a"]),
            entry("u3", "v1", 3, &["c"]),
            entry("u2", "v1", 2, &["b"]),
        ];
        assert_eq!(
            capped(four, 3),
            [
                expect(ANCIENT_CHANGES, "v1", 2, &["a", "b"]),
                expect("u3", "v1", 3, &["c"]),
                expect("u4", "v1", 4, &["d"]),
            ]
        );
        // An existing ancient-changes that is the oldest takes in the next one.
        let again = vec![
            entry(ANCIENT_CHANGES, "v1", 2, &["a", "b"]),
            entry("u3", "v1", 3, &["c"]),
            entry("u4", "v1", 4, &["d"]),
            entry("u5", "v1", 5, &["e"]),
        ];
        assert_eq!(
            capped(again, 3),
            [
                expect(ANCIENT_CHANGES, "v1", 3, &["a", "b", "c"]),
                expect("u4", "v1", 4, &["d"]),
                expect("u5", "v1", 5, &["e"]),
            ]
        );
        // Versions are merged separately; a version seen once is left alone.
        let versions = vec![
            entry("u1", "v1", 1, &["a"]),
            entry("u2", "v2", 2, &["b"]),
            entry("u3", "v1", 3, &["c"]),
            entry("u4", "v1", 4, &["d"]),
            entry("u5", "v1", 5, &["e"]),
        ];
        assert_eq!(
            capped(versions, 3),
            [
                expect("u2", "v2", 2, &["b"]),
                expect(ANCIENT_CHANGES, "v1", 4, &["a", "c", "d"]),
                expect("u5", "v1", 5, &["e"]),
            ]
        );
        // Each version once: nothing can be merged, the cap is exceeded.
        let distinct = vec![
            entry(ANCIENT_CHANGES, "v1", 5, &["a"]),
            entry("u6", "v3", 6, &["f"]),
            entry(ANCIENT_CHANGES, "v2", 7, &["b"]),
            entry("u8", "v4", 8, &["h"]),
        ];
        assert_eq!(capped(distinct, 3).len(), 4);
        // A bucket per version.
        let buckets = vec![
            entry(ANCIENT_CHANGES, "v1", 5, &["a"]),
            entry("u6", "v3", 6, &["f"]),
            entry(ANCIENT_CHANGES, "v2", 7, &["b"]),
            entry("u8", "v3", 8, &["h"]),
        ];
        assert_eq!(
            capped(buckets, 3),
            [
                expect(ANCIENT_CHANGES, "v1", 5, &["a"]),
                expect(ANCIENT_CHANGES, "v2", 7, &["b"]),
                expect(ANCIENT_CHANGES, "v3", 8, &["f", "h"]),
            ]
        );
    }

    #[test]
    fn cap_counts_updaters_only_and_orders_ties_by_identity() {
        let mut applier = entry("applier", "v1", 0, &["z"]);
        applier.operation = Operation::Apply;
        let mut no_time = entry("late", "v1", 0, &["n"]);
        no_time.time = None;
        let entries = vec![
            applier,
            entry("b", "v1", 1, &["b"]),
            entry("a", "v1", 1, &["a"]),
            no_time,
        ];
        // Three updaters at most two: the one without a time is the oldest, then "a" before
        // "b" at the same time.
        let out = capped(entries, 2);
        let names: Vec<&str> = out.iter().map(|e| e.0.as_str()).collect();
        assert_eq!(names, ["applier", ANCIENT_CHANGES, "b"]);
        assert_eq!(out[1].3, set(&["a", "n"]).paths());
        assert_eq!(out[1].2.as_deref(), Some("2026-03-01T10:01:00Z"));
    }

    #[test]
    fn cap_drops_ancient_changes_merged_into_itself_as_upstream_does() {
        // "aa" is as old as the bucket and sorts before it, so it is the first of v1; the
        // bucket then comes second and is merged into itself, which removes it.
        let entries = vec![
            entry("aa", "v1", 1, &["x"]),
            entry(ANCIENT_CHANGES, "v1", 1, &["a"]),
            entry("u2", "v1", 2, &["b"]),
            entry("u3", "v1", 3, &["c"]),
        ];
        let names: Vec<String> = capped(entries, 3).into_iter().map(|e| e.0).collect();
        assert_eq!(names, ["aa", "u2", "u3"]);
    }

    #[test]
    fn identifiers_are_go_json() {
        let mut e = entry("a<b", "v1", 1, &[]);
        e.subresource = "status".into();
        assert_eq!(
            identifier(&e),
            r#"{"manager":"a\u003cb","operation":"Update","apiVersion":"v1","subresource":"status"}"#
        );
        e.operation = Operation::Apply;
        e.manager.clear();
        e.subresource.clear();
        assert_eq!(identifier(&e), r#"{"operation":"Apply"}"#);
    }

    #[test]
    fn served_fields_v1_keys_are_in_upstream_order() {
        let object = json!({
            "apiVersion": "v1",
            "metadata": {"name": "x", "managedFields": [{
                "manager": "m",
                "fieldsV1": {"f:s": {"v:10": {}, "i:0": {}, "v:9": {}, "k:{\"a\":1}": {"f:b": {}, ".": {}}, "f:z": {}}}
            }]},
            "data": {"v:10": {}, "v:9": {}}
        });
        let text = serde_json::to_string(&UpstreamFieldsOrder(&object)).unwrap();
        assert_eq!(
            text,
            r#"{"apiVersion":"v1","data":{"v:10":{},"v:9":{}},"metadata":{"managedFields":[{"fieldsV1":{"f:s":{"f:z":{},"k:{\"a\":1}":{".":{},"f:b":{}},"v:9":{},"v:10":{},"i:0":{}}},"manager":"m"}],"name":"x"}}"#
        );
    }

    #[test]
    fn reconcile_rewrites_changed_entries() {
        use crate::schema::{ListOf, ListType, Struct, Type};
        let mut schema = Schema::default();
        let tags = |list_type| {
            let mut fields = std::collections::BTreeMap::new();
            fields.insert(
                "tags".to_owned(),
                crate::schema::Field {
                    ty: TypeRef::Inline(Box::new(Type::List(ListOf {
                        items: TypeRef::Inline(Box::new(Type::Scalar)),
                        list_type,
                    }))),
                    patch_strategy: Vec::new(),
                    patch_merge_key: None,
                },
            );
            Type::Struct(Struct {
                fields,
                ..Struct::default()
            })
        };
        schema.insert("T", tags(ListType::Atomic));
        let ty = TypeRef::Named("T".into());
        let mut object = json!({"metadata": {"managedFields": [{
            "manager": "m", "operation": "Apply", "apiVersion": "v1", "time": "2026-01-01T00:00:00Z",
            "fieldsType": "FieldsV1", "fieldsV1": {"f:tags": {"v:\"a\"": {}}}
        }]}, "tags": ["a"]});
        assert!(reconcile(&schema, &ty, &mut object).unwrap());
        assert_eq!(
            object["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:tags": {}})
        );
        assert!(!reconcile(&schema, &ty, &mut object).unwrap());
        schema.insert("T", tags(ListType::Set));
        assert!(reconcile(&schema, &ty, &mut object).unwrap());
        assert_eq!(
            object["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:tags": {".": {}, "v:\"a\"": {}}})
        );
    }

    #[test]
    fn kubectl_server_side_apply_keeps_the_last_applied_annotation_in_step() {
        use crate::schema::Type;
        let schema = Schema::default();
        let writer = |manager: &str| Writer {
            schema: &schema,
            ty: TypeRef::Inline(Box::new(Type::Untyped)),
            manager: manager.to_owned(),
            api_version: "v1".into(),
            subresource: String::new(),
            time: "2026-01-01T00:00:00Z".into(),
            ignored: Set::new(),
        };
        let live = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "annotations": {LAST_APPLIED: "{\"old\":1}\n"}},
            "data": {"a": "1"}});
        let config = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "annotations": {LAST_APPLIED: "stale", "x": "<&>"}},
            "data": {"b": "2"}});
        let (out, _) = apply(&writer("kubectl"), Some(&live), &config, true).unwrap();
        assert_eq!(
            out["metadata"]["annotations"][LAST_APPLIED],
            "{\"apiVersion\":\"v1\",\"data\":{\"b\":\"2\"},\"kind\":\"ConfigMap\",\"metadata\":{\"annotations\":{\"x\":\"\\u003c\\u0026\\u003e\"},\"name\":\"c\"}}\n"
        );
        // Another manager leaves it as the merge made it; without the annotation none is added.
        let (other, _) = apply(&writer("other"), Some(&live), &config, true).unwrap();
        assert_eq!(other["metadata"]["annotations"][LAST_APPLIED], "stale");
        let bare = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        let (out, _) = apply(&writer("kubectl"), Some(&bare), &bare, true).unwrap();
        assert!(out["metadata"].get("annotations").is_none());
    }

    #[test]
    fn empty_list_resets() {
        assert!(is_reset(&json!({"metadata": {"managedFields": []}})));
        assert!(is_reset(&json!({"metadata": {"managedFields": [{}]}})));
        assert!(!is_reset(&json!({"metadata": {}})));
        assert!(!is_reset(&json!({"metadata": {"managedFields": [{}, {}]}})));
    }
}
