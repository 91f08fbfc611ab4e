//! Applying a schema's `default`s to a custom resource, as upstream does when it decodes one
//! from a request and when it reads one from storage.
//!
//! Top-down: a missing field whose schema has a default gets a copy of it, and so does a field
//! that is `null` where the schema does not allow `null` (`nullable: false`); then every field
//! is defaulted inside, so defaults nested in a defaulted value apply too. Values of
//! `additionalProperties` and list items that are disallowed `null`s get their schema's
//! default. Defaults were pruned to what the schema knows when the schema was compiled.
//!
//! Run [`crate::pruning::normalize`] (or [`crate::pruning::prune`]) first: it removes the
//! disallowed `null`s that have no default.

use serde_json::Value;

use crate::schema::{Node, Structural};

/// Applies the defaults of `schema` to `object`.
pub fn default(schema: &Structural, object: &mut Value) {
    default_value(object, schema.root());
}

fn is_non_nullable_null(x: &Value, s: &Node) -> bool {
    x.is_null() && !s.nullable
}

fn default_value(x: &mut Value, s: &Node) {
    match x {
        Value::Object(map) => {
            for (k, prop) in &s.properties {
                let Some(default) = &prop.default else {
                    continue;
                };
                match map.get_mut(k) {
                    None => {
                        map.insert(k.clone(), default.clone());
                    }
                    Some(v) if is_non_nullable_null(v, prop) => *v = default.clone(),
                    Some(_) => {}
                }
            }
            for (k, v) in map.iter_mut() {
                if let Some(prop) = s.properties.get(k) {
                    default_value(v, prop);
                } else if let Some(a) = s.additional_schema() {
                    if is_non_nullable_null(v, a) {
                        *v = a.default.clone().unwrap_or(Value::Null);
                    }
                    default_value(v, a);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = &s.items {
                for v in items.iter_mut() {
                    if is_non_nullable_null(v, item_schema) {
                        *v = item_schema.default.clone().unwrap_or(Value::Null);
                    }
                    default_value(v, item_schema);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_apply_top_down_and_inside_defaults() {
        let s = Structural::new(&json!({"type": "object", "properties": {"spec": {
        "type": "object", "default": {},
        "properties": {
            "replicas": {"type": "integer", "default": 1},
            "strategy": {"type": "object", "default": {"type": "Rolling"},
                         "properties": {"type": {"type": "string"},
                                        "maxSurge": {"type": "integer", "default": 25}}},
            "name": {"type": "string", "default": "x"},
            "opt": {"type": "string", "nullable": true, "default": "y"}
        }}}}))
        .expect("compiles");
        let mut obj = json!({"spec": {"name": null, "opt": null}});
        default(&s, &mut obj);
        assert_eq!(
            obj,
            json!({"spec": {"replicas": 1, "name": "x", "opt": null,
                            "strategy": {"type": "Rolling", "maxSurge": 25}}})
        );
        let mut empty = json!({});
        default(&s, &mut empty);
        assert_eq!(empty["spec"]["strategy"]["maxSurge"], json!(25));
    }

    #[test]
    fn defaults_in_maps_and_lists() {
        let s = Structural::new(&json!({"type": "object", "properties": {
            "m": {"type": "object", "additionalProperties": {"type": "object",
                  "properties": {"p": {"type": "integer", "default": 7}}, "default": {}}},
            "l": {"type": "array", "items": {"type": "object", "default": {},
                  "properties": {"q": {"type": "string", "default": "d"}}}}}}))
        .expect("compiles");
        let mut obj = json!({"m": {"a": {}, "b": null}, "l": [{}, null, {"q": "set"}]});
        default(&s, &mut obj);
        assert_eq!(
            obj,
            json!({"m": {"a": {"p": 7}, "b": {"p": 7}},
                   "l": [{"q": "d"}, {"q": "d"}, {"q": "set"}]})
        );
    }
}
