//! Dropping what the schema does not know, as upstream does when it decodes a custom resource
//! from a request or from storage.
//!
//! - [`prune`]: removes fields the schema does not specify (upstream's structural pruning) and
//!   `null`s the schema does not allow and has no default for. The root's `apiVersion`, `kind`
//!   and `metadata` are kept, and so are those of embedded resources
//!   (`x-kubernetes-embedded-resource`); `x-kubernetes-preserve-unknown-fields` keeps unknown
//!   fields (while the fields the schema does specify are still pruned inside).
//! - [`coerce_metadata`]: reads the root's and embedded resources' `metadata` as ObjectMeta:
//!   unknown metadata fields are dropped, wrong types are an error (or dropped when reading
//!   from storage), and `apiVersion`/`kind` must be strings.
//! - [`normalize`]: both, in upstream's order, for one object.
//!
//! The returned paths are upstream's: `spec.foo`, `spec.items[0].bar`,
//! `spec.template.metadata.foo`, sorted. With `fieldValidation=Strict` each becomes the error
//! `unknown field "spec.foo"`; with `Warn` the same text is a warning.

use genplane_apimachinery::validation::field::{Error, Path};
use serde_json::Value;

use crate::objectmeta;
use crate::schema::{AdditionalProperties, Node, Structural};

const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Where an object comes from, which decides how malformed metadata is treated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// A request body: malformed metadata is an error.
    Request,
    /// Storage: malformed metadata fields are dropped (objects written before metadata was
    /// validated must stay readable).
    Storage,
}

/// Removes unknown fields and disallowed `null`s from a custom resource; returns the paths of
/// the fields removed as unknown, sorted.
pub fn prune(schema: &Structural, object: &mut Value) -> Vec<String> {
    let mut tracker = Tracker::default();
    prune_value(object, Some(schema.root()), true, Some(&mut tracker));
    prune_nulls(object, Some(schema.root()));
    tracker.pruned.sort();
    tracker.pruned
}

/// Reads the root's and embedded resources' `metadata` as ObjectMeta (see the module
/// documentation); returns the paths of unknown metadata fields dropped
/// (`metadata.foo`, `spec.template.metadata.bar`), sorted.
pub fn coerce_metadata(
    schema: &Structural,
    object: &mut Value,
    source: Source,
) -> Result<Vec<String>, Error> {
    let drop_invalid = source == Source::Storage;
    let mut unknown = Vec::new();
    coerce_embedded(
        &Path::default(),
        object,
        schema.root(),
        true,
        drop_invalid,
        &mut unknown,
    )?;
    unknown.sort();
    Ok(unknown)
}

/// Prunes and coerces `object` as upstream's decoding does: the paths of every unknown field
/// dropped, sorted. Apply [`crate::defaulting::default`] next.
pub fn normalize(
    schema: &Structural,
    object: &mut Value,
    source: Source,
) -> Result<Vec<String>, Error> {
    let drop_invalid = source == Source::Storage;
    let mut unknown = Vec::new();
    // The root's metadata first: a malformed one fails before anything is changed.
    if let Value::Object(map) = &*object {
        for k in ["kind", "apiVersion"] {
            if let Some(v) = map.get(k)
                && !v.is_string()
                && !v.is_null()
            {
                return Err(Error::invalid(&Path::new(k), v.clone(), "must be a string"));
            }
        }
    }
    coerce_root_metadata(object, drop_invalid, &mut unknown)?;
    unknown.extend(prune(schema, object));
    coerce_embedded(
        &Path::default(),
        object,
        schema.root(),
        false,
        drop_invalid,
        &mut unknown,
    )?;
    unknown.sort();
    Ok(unknown)
}

/// Collects the paths of pruned fields.
#[derive(Default)]
pub(crate) struct Tracker {
    path: String,
    pruned: Vec<String>,
}

impl Tracker {
    fn push_key(&mut self, key: &str) -> usize {
        let len = self.path.len();
        if !self.path.is_empty() {
            self.path.push('.');
        }
        self.path.push_str(key);
        len
    }

    fn push_index(&mut self, i: usize) -> usize {
        let len = self.path.len();
        self.path.push('[');
        self.path.push_str(&i.to_string());
        self.path.push(']');
        len
    }

    fn record(&mut self, key: &str) {
        let len = self.push_key(key);
        self.pruned.push(self.path.clone());
        self.path.truncate(len);
    }
}

/// The schema the value of an unknown-to-`properties` field follows: `Some(None)` for
/// `additionalProperties: true`/`false` (no schema), `None` when there is no
/// `additionalProperties` at all.
fn additional(node: &Node) -> Option<Option<&Node>> {
    match &node.additional_properties {
        None => None,
        Some(AdditionalProperties::Bool(_)) => Some(None),
        Some(AdditionalProperties::Schema(s)) => Some(Some(s)),
    }
}

/// Upstream's structural pruning of one value; `embedded` makes `apiVersion`, `kind` and
/// `metadata` known (the resource root, or an embedded resource).
pub(crate) fn prune_value(
    x: &mut Value,
    s: Option<&Node>,
    embedded: bool,
    mut t: Option<&mut Tracker>,
) {
    if let Some(node) = s
        && node.preserve_unknown_fields
    {
        skip_prune(x, node, embedded, t);
        return;
    }
    match x {
        Value::Object(map) => {
            let Some(node) = s else {
                if let Some(t) = t {
                    for k in map.keys() {
                        t.record(k);
                    }
                }
                map.clear();
                return;
            };
            let embedded = embedded || node.embedded_resource;
            map.retain(|k, v| {
                if embedded && META_FIELDS.contains(&k.as_str()) {
                    return true;
                }
                let child = match node.properties.get(k) {
                    Some(p) => Some(p),
                    None => match additional(node) {
                        Some(a) => a,
                        None => {
                            if let Some(t) = t.as_deref_mut() {
                                t.record(k);
                            }
                            return false;
                        }
                    },
                };
                let len = t.as_deref_mut().map(|t| t.push_key(k));
                prune_value(v, child, false, t.as_deref_mut());
                if let (Some(t), Some(len)) = (t.as_deref_mut(), len) {
                    t.path.truncate(len);
                }
                true
            });
        }
        Value::Array(items) => {
            let item_schema = s.and_then(|n| n.items.as_deref());
            for (i, v) in items.iter_mut().enumerate() {
                let len = t.as_deref_mut().map(|t| t.push_index(i));
                prune_value(v, item_schema, false, t.as_deref_mut());
                if let (Some(t), Some(len)) = (t.as_deref_mut(), len) {
                    t.path.truncate(len);
                }
            }
        }
        _ => {}
    }
}

/// Under `x-kubernetes-preserve-unknown-fields`: unknown fields stay, known ones are pruned by
/// their schemas.
fn skip_prune(x: &mut Value, node: &Node, embedded: bool, mut t: Option<&mut Tracker>) {
    let embedded = embedded || node.embedded_resource;
    match x {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                if embedded && META_FIELDS.contains(&k.as_str()) {
                    continue;
                }
                let child = match node.properties.get(k) {
                    Some(p) => Some(p),
                    None => match additional(node) {
                        Some(a) => a,
                        None => continue,
                    },
                };
                let len = t.as_deref_mut().map(|t| t.push_key(k));
                prune_value(v, child, false, t.as_deref_mut());
                if let (Some(t), Some(len)) = (t.as_deref_mut(), len) {
                    t.path.truncate(len);
                }
            }
        }
        Value::Array(items) => {
            let item_schema = node.items.as_deref();
            for (i, v) in items.iter_mut().enumerate() {
                let len = t.as_deref_mut().map(|t| t.push_index(i));
                prune_value(v, item_schema, false, t.as_deref_mut());
                if let (Some(t), Some(len)) = (t.as_deref_mut(), len) {
                    t.path.truncate(len);
                }
            }
        }
        _ => {}
    }
}

/// Upstream's `PruneNonNullableNullsWithoutDefaults`: a `null` the schema does not allow is
/// removed unless a default will replace it.
fn prune_nulls(x: &mut Value, s: Option<&Node>) {
    match x {
        Value::Object(map) => {
            map.retain(|k, v| {
                let schema = s.and_then(|n| match n.properties.get(k) {
                    Some(p) => Some(p),
                    None => n.additional_schema(),
                });
                if v.is_null() && schema.is_some_and(|n| !n.nullable && n.default.is_none()) {
                    return false;
                }
                prune_nulls(v, schema);
                true
            });
        }
        Value::Array(items) => {
            let schema = s.and_then(|n| n.items.as_deref());
            for v in items {
                prune_nulls(v, schema);
            }
        }
        _ => {}
    }
}

fn coerce_root_metadata(
    object: &mut Value,
    drop_invalid: bool,
    unknown: &mut Vec<String>,
) -> Result<(), Error> {
    let Value::Object(map) = object else {
        return Ok(());
    };
    let Some(metadata) = map.get_mut("metadata") else {
        return Ok(());
    };
    let mut found = Vec::new();
    match objectmeta::coerce(metadata, drop_invalid, &mut found) {
        Ok(coerced) => *metadata = coerced,
        Err(message) => {
            return Err(Error::invalid(
                &Path::new("metadata"),
                metadata.clone(),
                message,
            ));
        }
    }
    unknown.extend(found.into_iter().map(|f| format!("metadata.{f}")));
    Ok(())
}

/// Upstream's objectmeta `Coerce` over embedded resources (and the root if `root`).
fn coerce_embedded(
    path: &Path,
    x: &mut Value,
    node: &Node,
    root: bool,
    drop_invalid: bool,
    unknown: &mut Vec<String>,
) -> Result<(), Error> {
    if !root && !node.subtree_embedded {
        return Ok(());
    }
    match x {
        Value::Object(map) => {
            if root || node.embedded_resource {
                for k in ["apiVersion", "kind"] {
                    if let Some(v) = map.get(k)
                        && !v.is_string()
                    {
                        if drop_invalid {
                            map.remove(k);
                        } else {
                            return Err(Error::invalid(
                                &path.child(k),
                                v.clone(),
                                "must be a string",
                            ));
                        }
                    }
                }
                if let Some(metadata) = map.get_mut("metadata") {
                    let mut found = Vec::new();
                    match objectmeta::coerce(metadata, drop_invalid, &mut found) {
                        Ok(coerced) => *metadata = coerced,
                        Err(_) if drop_invalid => {}
                        Err(message) => {
                            return Err(Error::invalid(
                                &path.child("metadata"),
                                metadata.clone(),
                                message,
                            ));
                        }
                    }
                    let prefix = path.child("metadata");
                    unknown.extend(found.into_iter().map(|f| format!("{prefix}.{f}")));
                }
            }
            for (k, v) in map.iter_mut() {
                match node.properties.get(k) {
                    Some(p) if p.subtree_embedded => {
                        coerce_embedded(&path.child(k), v, p, false, drop_invalid, unknown)?;
                    }
                    Some(_) => {}
                    None => {
                        if let Some(s) = node.additional_schema().filter(|s| s.subtree_embedded) {
                            coerce_embedded(&path.key(k), v, s, false, drop_invalid, unknown)?;
                        }
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = node.items.as_deref().filter(|s| s.subtree_embedded) {
                for (i, v) in items.iter_mut().enumerate() {
                    coerce_embedded(&path.index(i), v, s, false, drop_invalid, unknown)?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(v: Value) -> Structural {
        Structural::new(&v).expect("schema compiles")
    }

    #[test]
    fn prunes_unknown_fields_and_reports_their_paths() {
        let s = schema(
            json!({"type": "object", "properties": {"spec": {"type": "object",
            "properties": {"a": {"type": "string"},
                           "list": {"type": "array", "items": {"type": "object",
                                    "properties": {"x": {"type": "integer"}}}}}}}}),
        );
        let mut obj = json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "n"},
            "spec": {"a": "1", "b": 2, "list": [{"x": 1, "y": 2}]}, "extra": true});
        let pruned = prune(&s, &mut obj);
        assert_eq!(pruned, vec!["extra", "spec.b", "spec.list[0].y"]);
        assert_eq!(
            obj,
            json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "n"},
                   "spec": {"a": "1", "list": [{"x": 1}]}})
        );
    }

    #[test]
    fn normalize_reports_unknown_metadata_too() {
        let s = schema(
            json!({"type": "object", "properties": {"spec": {"type": "object",
            "properties": {"template": {"type": "object", "x-kubernetes-embedded-resource": true,
                                        "x-kubernetes-preserve-unknown-fields": true}}}}}),
        );
        let mut obj = json!({"apiVersion": "g/v1", "kind": "K",
            "metadata": {"name": "n", "unknownMeta": 1},
            "spec": {"template": {"apiVersion": "v1", "kind": "Pod",
                                  "metadata": {"name": "p", "bad": true}, "spec": {"x": 1}}}});
        let unknown = normalize(&s, &mut obj, Source::Request).expect("normalizes");
        assert_eq!(
            unknown,
            vec!["metadata.unknownMeta", "spec.template.metadata.bad"]
        );
        assert_eq!(obj["metadata"], json!({"name": "n"}));
        assert_eq!(obj["spec"]["template"]["spec"], json!({"x": 1}));
    }

    #[test]
    fn malformed_metadata_is_an_error_from_requests_only() {
        let s = schema(json!({"type": "object"}));
        let mut obj = json!({"metadata": {"name": "n", "labels": "oops"}});
        let err = normalize(&s, &mut obj.clone(), Source::Request).expect_err("malformed");
        assert_eq!(err.field.as_str(), "metadata");
        normalize(&s, &mut obj, Source::Storage).expect("dropped");
        assert_eq!(obj["metadata"], json!({"name": "n"}));
    }
}
