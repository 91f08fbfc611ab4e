//! Reading a schema's JSON into the [`Node`] tree the checks walk, reporting values of the wrong
//! JSON type (which upstream's decoding rejects before validation).

use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use serde_json::{Map, Value};

pub(super) const OPENAPI_TYPES: &[&str] =
    &["array", "boolean", "integer", "number", "object", "string"];

const STRING_KEYS: &[&str] = &[
    "id",
    "$schema",
    "$ref",
    "description",
    "type",
    "format",
    "title",
    "pattern",
    "x-kubernetes-list-type",
    "x-kubernetes-map-type",
];
const NUMBER_KEYS: &[&str] = &["maximum", "minimum", "multipleOf"];
const INTEGER_KEYS: &[&str] = &[
    "maxLength",
    "minLength",
    "maxItems",
    "minItems",
    "maxProperties",
    "minProperties",
];
const BOOL_KEYS: &[&str] = &[
    "exclusiveMaximum",
    "exclusiveMinimum",
    "uniqueItems",
    "nullable",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
];
const STRING_LIST_KEYS: &[&str] = &["required", "x-kubernetes-list-map-keys"];

/// A schema read from JSON: its own map plus its sub-schemas.
#[derive(Debug, Default)]
pub(super) struct Node<'a> {
    pub(super) raw: Option<&'a Map<String, Value>>,
    pub(super) items: Option<Items<'a>>,
    pub(super) properties: Vec<(&'a str, Node<'a>)>,
    pub(super) additional_properties: Option<SchemaOrBool<'a>>,
    pub(super) all_of: Vec<Node<'a>>,
    pub(super) any_of: Vec<Node<'a>>,
    pub(super) one_of: Vec<Node<'a>>,
    pub(super) not: Option<Box<Node<'a>>>,
    pub(super) pattern_properties: Vec<(&'a str, Node<'a>)>,
    pub(super) additional_items: Option<SchemaOrBool<'a>>,
    pub(super) definitions: Vec<(&'a str, Node<'a>)>,
    pub(super) dependencies: Vec<(&'a str, Option<Node<'a>>)>,
}

#[derive(Debug)]
pub(super) enum Items<'a> {
    One(Box<Node<'a>>),
    Many(Vec<Node<'a>>),
}

#[derive(Debug)]
pub(super) enum SchemaOrBool<'a> {
    Schema(Box<Node<'a>>),
    Bool(bool),
}

impl<'a> Node<'a> {
    /// A key's value; `null` counts as absent.
    pub(super) fn get(&self, key: &str) -> Option<&'a Value> {
        self.raw.and_then(|m| m.get(key)).filter(|v| !v.is_null())
    }

    /// A string field, empty when absent.
    pub(super) fn s(&self, key: &str) -> &'a str {
        self.get(key).and_then(Value::as_str).unwrap_or("")
    }

    /// An optional string field (present even when empty).
    pub(super) fn opt_s(&self, key: &str) -> Option<&'a str> {
        self.get(key).and_then(Value::as_str)
    }

    /// A boolean field, false when absent.
    pub(super) fn b(&self, key: &str) -> bool {
        self.get(key).and_then(Value::as_bool).unwrap_or(false)
    }

    /// A list of strings, empty when absent.
    pub(super) fn strs(&self, key: &str) -> Vec<&'a str> {
        self.get(key)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    }

    pub(super) fn ty(&self) -> &'a str {
        self.s("type")
    }

    pub(super) fn preserve_unknown_fields(&self) -> bool {
        self.b("x-kubernetes-preserve-unknown-fields")
    }

    pub(super) fn embedded(&self) -> bool {
        self.b("x-kubernetes-embedded-resource")
    }

    pub(super) fn int_or_string(&self) -> bool {
        self.b("x-kubernetes-int-or-string")
    }

    pub(super) fn property(&self, name: &str) -> Option<&Node<'a>> {
        self.properties
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v)
    }

    pub(super) fn item_schema(&self) -> Option<&Node<'a>> {
        match &self.items {
            Some(Items::One(item)) => Some(item),
            _ => None,
        }
    }

    pub(super) fn validations(&self) -> &'a [Value] {
        self.get("x-kubernetes-validations")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// Whether `pred` holds for this schema or any schema below it (upstream's `SchemaHas`).
    pub(super) fn any(&self, pred: &dyn Fn(&Node<'a>) -> bool) -> bool {
        if pred(self) {
            return true;
        }
        let one = |n: &Node<'a>| n.any(pred);
        let either = |s: &Option<SchemaOrBool<'a>>| match s {
            Some(SchemaOrBool::Schema(n)) => n.any(pred),
            _ => false,
        };
        match &self.items {
            Some(Items::One(n)) if one(n) => return true,
            Some(Items::Many(ns)) if ns.iter().any(one) => return true,
            _ => {}
        }
        self.all_of.iter().any(one)
            || self.any_of.iter().any(one)
            || self.one_of.iter().any(one)
            || self.not.as_deref().is_some_and(one)
            || self.properties.iter().any(|(_, n)| one(n))
            || either(&self.additional_properties)
            || self.pattern_properties.iter().any(|(_, n)| one(n))
            || either(&self.additional_items)
            || self.definitions.iter().any(|(_, n)| one(n))
            || self
                .dependencies
                .iter()
                .any(|(_, n)| n.as_ref().is_some_and(one))
    }
}

fn expect_kind(value: &Value, path: &Path, what: &str, ok: bool, errors: &mut ErrorList) -> bool {
    if !ok {
        errors.push(Error::type_invalid(
            path,
            value.clone(),
            format!("must be {what}"),
        ));
    }
    ok
}

fn parse_map<'a>(
    value: &'a Value,
    path: &Path,
    errors: &mut ErrorList,
) -> Vec<(&'a str, Node<'a>)> {
    match value {
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| (k.as_str(), parse(v, &path.key(k), errors)))
            .collect(),
        other => {
            expect_kind(other, path, "an object", false, errors);
            Vec::new()
        }
    }
}

fn parse_list<'a>(value: &'a Value, path: &Path, errors: &mut ErrorList) -> Vec<Node<'a>> {
    match value {
        Value::Array(list) => list
            .iter()
            .enumerate()
            .map(|(i, v)| parse(v, &path.index(i), errors))
            .collect(),
        other => {
            expect_kind(other, path, "a list", false, errors);
            Vec::new()
        }
    }
}

fn parse_schema_or_bool<'a>(
    value: &'a Value,
    path: &Path,
    errors: &mut ErrorList,
) -> SchemaOrBool<'a> {
    match value {
        Value::Bool(b) => SchemaOrBool::Bool(*b),
        other => SchemaOrBool::Schema(Box::new(parse(other, path, errors))),
    }
}

/// Reads a schema, reporting values of the wrong JSON type.
pub(super) fn parse<'a>(value: &'a Value, path: &Path, errors: &mut ErrorList) -> Node<'a> {
    let Value::Object(raw) = value else {
        expect_kind(value, path, "an object", false, errors);
        return Node::default();
    };
    let mut node = Node {
        raw: Some(raw),
        ..Node::default()
    };
    for (key, v) in raw {
        if v.is_null() {
            continue;
        }
        let at = path.child(key);
        let k = key.as_str();
        if STRING_KEYS.contains(&k) {
            expect_kind(v, &at, "a string", v.is_string(), errors);
        } else if NUMBER_KEYS.contains(&k) {
            expect_kind(v, &at, "a number", v.is_number(), errors);
        } else if INTEGER_KEYS.contains(&k) {
            expect_kind(v, &at, "an integer", v.is_i64() || v.is_u64(), errors);
        } else if BOOL_KEYS.contains(&k) {
            expect_kind(v, &at, "a boolean", v.is_boolean(), errors);
        } else if STRING_LIST_KEYS.contains(&k) {
            let ok = v.as_array().is_some_and(|a| a.iter().all(Value::is_string));
            expect_kind(v, &at, "a list of strings", ok, errors);
        } else {
            match k {
                "enum" => {
                    expect_kind(v, &at, "a list", v.is_array(), errors);
                }
                "externalDocs" => {
                    expect_kind(v, &at, "an object", v.is_object(), errors);
                }
                "x-kubernetes-validations" => parse_rules(v, &at, errors),
                "items" => {
                    node.items = Some(match v {
                        Value::Array(_) => Items::Many(parse_list(v, &at, errors)),
                        other => Items::One(Box::new(parse(other, &at, errors))),
                    });
                }
                "properties" => node.properties = parse_map(v, &at, errors),
                "patternProperties" => node.pattern_properties = parse_map(v, &at, errors),
                "definitions" => node.definitions = parse_map(v, &at, errors),
                "additionalProperties" => {
                    node.additional_properties = Some(parse_schema_or_bool(v, &at, errors));
                }
                "additionalItems" => {
                    node.additional_items = Some(parse_schema_or_bool(v, &at, errors));
                }
                "allOf" => node.all_of = parse_list(v, &at, errors),
                "anyOf" => node.any_of = parse_list(v, &at, errors),
                "oneOf" => node.one_of = parse_list(v, &at, errors),
                "not" => node.not = Some(Box::new(parse(v, &at, errors))),
                "dependencies" => match v {
                    Value::Object(map) => {
                        for (name, dep) in map {
                            let dep_at = at.key(name);
                            let parsed = match dep {
                                Value::Array(list) => {
                                    let ok = list.iter().all(Value::is_string);
                                    expect_kind(dep, &dep_at, "a list of strings", ok, errors);
                                    None
                                }
                                other => Some(parse(other, &dep_at, errors)),
                            };
                            node.dependencies.push((name.as_str(), parsed));
                        }
                    }
                    other => {
                        expect_kind(other, &at, "an object", false, errors);
                    }
                },
                _ => {}
            }
        }
    }
    node
}

fn parse_rules(value: &Value, path: &Path, errors: &mut ErrorList) {
    let Some(rules) = value.as_array() else {
        expect_kind(value, path, "a list", false, errors);
        return;
    };
    for (i, rule) in rules.iter().enumerate() {
        let at = path.index(i);
        let Some(rule) = rule.as_object() else {
            expect_kind(&rules[i], &at, "an object", false, errors);
            continue;
        };
        for (key, v) in rule {
            if v.is_null() {
                continue;
            }
            match key.as_str() {
                "rule" | "message" | "messageExpression" | "reason" | "fieldPath" => {
                    expect_kind(v, &at.child(key), "a string", v.is_string(), errors);
                }
                "optionalOldSelf" => {
                    expect_kind(v, &at.child(key), "a boolean", v.is_boolean(), errors);
                }
                _ => {}
            }
        }
    }
}

/// Whether a value is what Go decodes to a zero field (absent, false, empty).
pub(super) fn is_zero(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) | Some(Value::Bool(false)) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Object(o)) => o.is_empty(),
        Some(Value::Number(_)) => false,
        Some(Value::Bool(true)) => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::structural::tests::expect;

    #[test]
    fn values_of_the_wrong_json_type_are_reported_alone() {
        expect(
            json!({"type": "object", "properties": {"a": {"type": 5}, "b": {"type": "array", "items": "x"}}}),
            &[
                "$P.properties[a].type: Invalid value: 5: must be a string",
                "$P.properties[b].items: Invalid value: \"x\": must be an object",
            ],
        );
    }
}
