//! The compiled schema of one CRD version: built once from its `openAPIV3Schema` and walked by
//! [`object_validation`](crate::object_validation), [`defaulting`](crate::defaulting) and
//! [`pruning`](crate::pruning) for every custom resource read or written.
//!
//! [`Structural::new`] (in the private module `compile`, which reads the JSON and prunes the
//! defaults with [`pruning`](crate::pruning)) turns the JSON schema into a tree of [`Node`]s: types as a bit set,
//! `format` resolved to the checker it names (or dropped, as upstream drops formats it does
//! not support), `pattern` compiled to a regular expression, defaults pruned to what the schema
//! knows (upstream's `PruneDefaults`), and `x-kubernetes-*` extensions read into fields. No
//! request re-reads the schema JSON.
//!
//! Whether the schema is *structural* and within upstream's limits is checked when the CRD is
//! written (module `structural`); this module only needs the JSON to have the right shapes, and
//! reports a [`SchemaError`] when it does not.

use std::fmt;

use regex::Regex;
use serde_json::Value;

use crate::formats::Format;

/// Why a schema could not be compiled.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SchemaError {
    /// A schema (or sub-schema) is not a JSON object.
    #[error("{path}: must be an object")]
    NotAnObject {
        /// Where, e.g. `openAPIV3Schema.properties[spec]`.
        path: String,
    },
    /// A keyword has a value of the wrong JSON type.
    #[error("{path}: must be {expected}")]
    WrongType {
        /// The keyword's path.
        path: String,
        /// What the keyword must be, e.g. `a string`.
        expected: &'static str,
    },
    /// `type` names no JSON schema type.
    #[error("{path}: unknown type {value:?}")]
    UnknownType {
        /// The keyword's path.
        path: String,
        /// The type given.
        value: String,
    },
    /// `pattern` is not a regular expression.
    #[error("{path}: invalid pattern {pattern:?}: {message}")]
    InvalidPattern {
        /// The keyword's path.
        path: String,
        /// The pattern.
        pattern: String,
        /// What is wrong with it.
        message: String,
    },
    /// A keyword structural schemas do not allow, in a form this crate cannot evaluate
    /// (`items` as an array, `$ref`).
    #[error("{path}: {keyword} is not supported")]
    Unsupported {
        /// The keyword's path.
        path: String,
        /// The keyword.
        keyword: &'static str,
    },
}

/// JSON schema types, as a bit set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Types(u8);

impl Types {
    /// `object`.
    pub const OBJECT: Types = Types(1);
    /// `array`.
    pub const ARRAY: Types = Types(2);
    /// `string`.
    pub const STRING: Types = Types(4);
    /// `integer`.
    pub const INTEGER: Types = Types(8);
    /// `number`.
    pub const NUMBER: Types = Types(16);
    /// `boolean`.
    pub const BOOLEAN: Types = Types(32);
    /// `null`.
    pub const NULL: Types = Types(64);

    pub(crate) const NAMES: [(Types, &'static str); 7] = [
        (Types::INTEGER, "integer"),
        (Types::STRING, "string"),
        (Types::OBJECT, "object"),
        (Types::ARRAY, "array"),
        (Types::NUMBER, "number"),
        (Types::BOOLEAN, "boolean"),
        (Types::NULL, "null"),
    ];

    /// Whether no type is set.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether every type of `other` is in this set.
    pub fn contains(self, other: Types) -> bool {
        other.0 != 0 && self.0 & other.0 == other.0
    }

    pub(crate) fn from_name(name: &str) -> Option<Types> {
        Self::NAMES
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(t, _)| *t)
    }
}

impl std::ops::BitOr for Types {
    type Output = Types;
    fn bitor(self, rhs: Types) -> Types {
        Types(self.0 | rhs.0)
    }
}

/// `x-kubernetes-list-type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListType {
    /// `atomic`: the list is one value.
    Atomic,
    /// `set`: scalar items, each at most once.
    Set,
    /// `map`: object items identified by `x-kubernetes-list-map-keys`.
    Map,
}

/// `additionalProperties`.
#[derive(Clone, Debug)]
pub enum AdditionalProperties {
    /// `true` or `false`.
    Bool(bool),
    /// A schema every other property's value must follow.
    Schema(Box<Node>),
}

/// The `properties` of a schema node, by name: sorted, in one allocation of exactly their
/// size. (A `BTreeMap` allocates room for eleven entries in each of its nodes; with nodes of
/// several hundred bytes and most objects having a few properties, that room was most of a
/// compiled schema's memory.)
#[derive(Clone, Debug, Default)]
pub struct Properties(Vec<(String, Node)>);

impl Properties {
    /// The properties of `entries` (names unique, as in a JSON object), sorted by name.
    pub fn new(mut entries: Vec<(String, Node)>) -> Self {
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        entries.shrink_to_fit();
        Self(entries)
    }

    /// The schema of the property `name`.
    pub fn get(&self, name: &str) -> Option<&Node> {
        self.0
            .binary_search_by(|(k, _)| k.as_str().cmp(name))
            .ok()
            .map(|i| &self.0[i].1)
    }

    /// Whether there is a property `name`.
    pub fn contains_key(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// The properties in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Node)> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    /// The properties' schemas in name order.
    pub fn values(&self) -> impl Iterator<Item = &Node> {
        self.0.iter().map(|(_, v)| v)
    }

    /// The properties' schemas in name order, to change.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut Node> {
        self.0.iter_mut().map(|(_, v)| v)
    }

    /// The properties' names in order.
    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.0.iter().map(|(k, _)| k)
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<'a> IntoIterator for &'a Properties {
    type Item = (&'a String, &'a Node);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (String, Node)>,
        fn(&'a (String, Node)) -> (&'a String, &'a Node),
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

impl std::ops::Index<&str> for Properties {
    type Output = Node;

    fn index(&self, name: &str) -> &Node {
        self.get(name)
            .unwrap_or_else(|| panic!("no property {name:?}"))
    }
}

/// The bounds and combinators of a schema node.
#[derive(Clone, Debug, Default)]
pub struct Limits {
    /// `maximum`.
    pub maximum: Option<f64>,
    /// `exclusiveMaximum`.
    pub exclusive_maximum: bool,
    /// `minimum`.
    pub minimum: Option<f64>,
    /// `exclusiveMinimum`.
    pub exclusive_minimum: bool,
    /// `multipleOf`.
    pub multiple_of: Option<f64>,
    /// `maxLength`, in characters.
    pub max_length: Option<i64>,
    /// `minLength`, in characters.
    pub min_length: Option<i64>,
    /// `maxItems`.
    pub max_items: Option<i64>,
    /// `minItems`.
    pub min_items: Option<i64>,
    /// `uniqueItems`.
    pub unique_items: bool,
    /// `maxProperties`.
    pub max_properties: Option<i64>,
    /// `minProperties`.
    pub min_properties: Option<i64>,
    /// `allOf`.
    pub all_of: Vec<Node>,
    /// `anyOf`.
    pub any_of: Vec<Node>,
    /// `oneOf`.
    pub one_of: Vec<Node>,
    /// `not`.
    pub not: Option<Box<Node>>,
}

/// The limits of a node that has none.
static NO_LIMITS: Limits = Limits {
    maximum: None,
    exclusive_maximum: false,
    minimum: None,
    exclusive_minimum: false,
    multiple_of: None,
    max_length: None,
    min_length: None,
    max_items: None,
    min_items: None,
    unique_items: false,
    max_properties: None,
    min_properties: None,
    all_of: Vec::new(),
    any_of: Vec::new(),
    one_of: Vec::new(),
    not: None,
};

impl Limits {
    /// Whether it limits nothing.
    pub fn is_empty(&self) -> bool {
        let Limits {
            maximum,
            exclusive_maximum,
            minimum,
            exclusive_minimum,
            multiple_of,
            max_length,
            min_length,
            max_items,
            min_items,
            unique_items,
            max_properties,
            min_properties,
            all_of,
            any_of,
            one_of,
            not,
        } = self;
        maximum.is_none()
            && !exclusive_maximum
            && minimum.is_none()
            && !exclusive_minimum
            && multiple_of.is_none()
            && max_length.is_none()
            && min_length.is_none()
            && max_items.is_none()
            && min_items.is_none()
            && !unique_items
            && max_properties.is_none()
            && min_properties.is_none()
            && all_of.is_empty()
            && any_of.is_empty()
            && one_of.is_empty()
            && not.is_none()
    }
}

/// One node of a compiled schema: a schema object with its keywords read.
///
/// The same type serves the structural part (properties, items, additionalProperties) and the
/// value validations nested under `allOf`, `anyOf`, `oneOf` and `not`.
#[derive(Clone, Debug, Default)]
pub struct Node {
    /// `type` (both `integer` and `string` with `x-kubernetes-int-or-string`).
    pub types: Types,
    /// The types joined by `,` as upstream names them in messages (`integer,string`).
    pub(crate) types_name: String,
    /// `nullable`.
    pub nullable: bool,
    /// `format`, when it is one upstream validates.
    pub(crate) format: Option<(String, Format)>,
    /// The bounds and combinators it has, if any (most nodes have none: kept out of line, so
    /// that a node is small).
    pub limits: Option<Box<Limits>>,
    /// `pattern`, as written and compiled.
    pub(crate) pattern: Option<(String, Regex)>,
    /// `required`.
    pub required: Vec<String>,
    /// `enum` (empty when absent).
    pub enum_values: Vec<Value>,
    /// `properties`.
    pub properties: Properties,
    /// `additionalProperties`.
    pub additional_properties: Option<AdditionalProperties>,
    /// `items`.
    pub items: Option<Box<Node>>,
    /// `default`, pruned to the fields this node knows.
    pub default: Option<Value>,
    /// `x-kubernetes-preserve-unknown-fields: true`.
    pub preserve_unknown_fields: bool,
    /// `x-kubernetes-embedded-resource: true`.
    pub embedded_resource: bool,
    /// `x-kubernetes-int-or-string: true`.
    pub int_or_string: bool,
    /// `x-kubernetes-list-type`.
    pub list_type: Option<ListType>,
    /// `x-kubernetes-list-map-keys`.
    pub list_map_keys: Vec<String>,
    /// Whether this node or one below it (through properties, additionalProperties, items) is
    /// an embedded resource: where the embedded-resource checks need to look.
    pub(crate) subtree_embedded: bool,
    /// Whether this node or one below it is a `set` or `map` list: where the list-type checks
    /// need to look.
    pub(crate) subtree_lists: bool,
}

impl Node {
    /// Its bounds and combinators (none, for most nodes).
    pub fn limits(&self) -> &Limits {
        self.limits.as_deref().unwrap_or(&NO_LIMITS)
    }

    /// The schema of `additionalProperties`, when it is a schema.
    pub fn additional_schema(&self) -> Option<&Node> {
        match &self.additional_properties {
            Some(AdditionalProperties::Schema(s)) => Some(s),
            _ => None,
        }
    }
}

/// The compiled schema of one version of a CRD.
///
/// Immutable and cheap to share (wrap it in an `Arc`): built once per CRD version by
/// [`Structural::new`], then used for every object.
#[derive(Clone, Debug)]
pub struct Structural {
    /// The root node; built by `Structural::new` (module `compile`).
    pub(crate) root: Node,
}

impl Structural {
    /// The root node.
    pub fn root(&self) -> &Node {
        &self.root
    }
}

/// Compiles a `pattern` with Go's (RE2) meaning in the places where Rust's `regex` differs by
/// default: `\d`, `\w`, `\s` and `\b` are ASCII-only in Go. Returns the error message when the
/// pattern is not a regular expression. The CRD-time checks should use this too, so that
/// every pattern a CRD was accepted with compiles here.
pub fn compile_pattern(pattern: &str) -> Result<Regex, String> {
    Regex::new(&ascii_perl_classes(pattern)).map_err(|e| e.to_string())
}

/// Rewrites the Perl classes `\d \D \w \W \s \S \b \B` to their ASCII forms.
fn ascii_perl_classes(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut chars = pattern.chars();
    let mut class_depth = 0usize;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(next) = chars.next() else {
                    out.push('\\');
                    break;
                };
                let inside = class_depth > 0;
                match (next, inside) {
                    ('d', true) => out.push_str("0-9"),
                    ('w', true) => out.push_str("0-9A-Za-z_"),
                    ('s', true) => out.push_str("\\t\\n\\x0C\\r "),
                    ('d' | 'D' | 'w' | 'W' | 's' | 'S' | 'b' | 'B', false) => {
                        out.push_str("(?-u:\\");
                        out.push(next);
                        out.push(')');
                    }
                    _ => {
                        out.push('\\');
                        out.push(next);
                    }
                }
            }
            '[' => {
                class_depth += 1;
                out.push(c);
                // `[]...]` and `[^]...]`: a leading `]` is a literal.
                let rest = chars.as_str();
                let lead = if rest.starts_with('^') { 1 } else { 0 };
                if rest[lead..].starts_with(']') {
                    for _ in 0..=lead {
                        if let Some(x) = chars.next() {
                            out.push(x);
                        }
                    }
                }
            }
            ']' if class_depth > 0 => {
                class_depth -= 1;
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

/// Formats a float as Go's `%v` does (`1e+06`, `0.5`, `100000`).
pub(crate) fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_owned();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    // Go's shortest `%g`: exponent form when the decimal exponent is below -4 or at least 6.
    let sci = format!("{f:e}");
    let (mantissa, e) = sci.split_once('e').unwrap_or((&sci, "0"));
    let e: i32 = e.parse().unwrap_or(0);
    if !(-4..6).contains(&e) {
        let sign = if e < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", e.abs())
    } else {
        format!("{f}")
    }
}

impl fmt::Display for Types {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = Types::NAMES
            .iter()
            .filter(|(t, _)| self.contains(*t))
            .map(|(_, n)| *n)
            .collect();
        f.write_str(&names.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn compiles_keywords_once() {
        let s = Structural::new(&json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["replicas"],
                    "properties": {
                        "replicas": {"type": "integer", "minimum": 0, "default": 1},
                        "name": {"type": "string", "pattern": "^[a-z]+$", "format": "date-time"},
                        "port": {"x-kubernetes-int-or-string": true},
                        "tags": {"type": "array", "items": {"type": "string"},
                                 "x-kubernetes-list-type": "set"}
                    }
                }
            }
        }))
        .expect("compiles");
        let spec = &s.root().properties["spec"];
        assert_eq!(spec.required, vec!["replicas".to_owned()]);
        assert_eq!(spec.properties["replicas"].limits().minimum, Some(0.0));
        assert_eq!(spec.properties["replicas"].default, Some(json!(1)));
        assert!(spec.properties["name"].pattern.is_some());
        assert_eq!(
            spec.properties["name"]
                .format
                .as_ref()
                .map(|f| f.0.as_str()),
            Some("date-time")
        );
        assert_eq!(spec.properties["port"].types_name, "integer,string");
        assert_eq!(spec.properties["tags"].list_type, Some(ListType::Set));
    }

    #[test]
    fn unsupported_formats_are_dropped_as_upstream_does() {
        let s = Structural::new(&json!({"type": "string", "format": "k8s-short-name"}))
            .expect("compiles");
        assert!(s.root().format.is_none());
        let s = Structural::new(&json!({"type": "integer", "format": "int32"})).expect("compiles");
        assert!(s.root().format.is_none());
    }

    #[test]
    fn bad_schemas_are_errors() {
        assert!(matches!(
            Structural::new(&json!({"type": "strnig"})),
            Err(SchemaError::UnknownType { .. })
        ));
        let err = Structural::new(&json!({"properties": {"a": {"pattern": "("}}}))
            .expect_err("bad pattern");
        assert!(matches!(err, SchemaError::InvalidPattern { .. }));
        assert!(
            err.to_string()
                .starts_with("openAPIV3Schema.properties[a].pattern:")
        );
        assert!(matches!(
            Structural::new(&json!({"maxLength": "3"})),
            Err(SchemaError::WrongType { .. })
        ));
        assert!(matches!(
            Structural::new(&json!({"items": [{}]})),
            Err(SchemaError::Unsupported { .. })
        ));
    }

    #[test]
    fn defaults_are_pruned_to_the_schema() {
        let s = Structural::new(&json!({
            "type": "object",
            "properties": {"a": {"type": "object", "properties": {"b": {"type": "string"}},
                                  "default": {"b": "x", "c": "dropped"}}}
        }))
        .expect("compiles");
        assert_eq!(s.root().properties["a"].default, Some(json!({"b": "x"})));
    }

    #[test]
    fn patterns_have_go_meaning() {
        let re = compile_pattern(r"^\d+$").expect("compiles");
        assert!(re.is_match("123"));
        assert!(!re.is_match("١٢٣"), "Go's \\d is ASCII only");
        let re = compile_pattern(r"^[\w-]+$").expect("compiles");
        assert!(re.is_match("a_b-c"));
        assert!(!re.is_match("é"));
        assert!(compile_pattern(r"[]a]").expect("compiles").is_match("]"));
    }

    #[test]
    fn floats_render_like_go() {
        assert_eq!(go_float(5.0), "5");
        assert_eq!(go_float(0.5), "0.5");
        assert_eq!(go_float(1e6), "1e+06");
        assert_eq!(go_float(1.5e6), "1.5e+06");
        assert_eq!(go_float(123456.0), "123456");
        assert_eq!(go_float(0.0001), "0.0001");
        assert_eq!(go_float(0.00001), "1e-05");
    }
}
