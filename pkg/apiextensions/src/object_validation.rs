//! Validation of a custom resource against its CRD version's schema, as upstream's
//! customresource strategy does it: the OpenAPI value validations (kube-openapi's validator,
//! with its field paths, error types and messages), the `metadata`, `apiVersion` and `kind` of
//! embedded resources (`x-kubernetes-embedded-resource`), and the uniqueness of
//! `x-kubernetes-list-type: set` items and `map` keys.
//!
//! The root's `apiVersion`, `kind` and `metadata` are only checked here as far as the schema
//! describes them (e.g. a `metadata.name` pattern); the registry checks them as for every
//! resource (name rules, kind and apiVersion of the URL).
//!
//! # Messages
//!
//! Errors read as upstream's, e.g.
//! `spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"`
//! (the value is the JSON type found), `spec.size: Required value`,
//! `spec.mode: Unsupported value: "x": supported values: "a", "b"`,
//! `spec.name: Too long: may not be more than 5 bytes` (maxLength counts characters, the
//! message says bytes, as upstream), `spec.items: Too many: 4: must have at most 3 items`,
//! `spec.tags[1]: Duplicate value: "a"`. Errors of `allOf`, `anyOf`, `oneOf` and `not` are,
//! as upstream, reported at the field `<nil>`:
//! `<nil>: Invalid value: "": "spec" must validate one and only one schema (oneOf). Found none valid`.
//!
//! # Ratcheting (`validate_update`)
//!
//! Upstream's CRDValidationRatcheting (beta, on in 1.33): on update, schema errors of values
//! that did not change are dropped. Old and new are correlated from the root down: object
//! fields by name (properties and `additionalProperties`), list items of
//! `x-kubernetes-list-type: map` lists by their map keys, items of lists without a list type by
//! index. Items of `set` and `atomic` lists are not correlated. A value counts as unchanged
//! when it equals the correlated old value *and* every one of its old fields or items was
//! correlated and unchanged (so a non-empty `set`/`atomic` list, or an object with a field the
//! schema does not describe, never counts as unchanged, as upstream; the root, with its
//! `apiVersion`, `kind` and `metadata` that schemas rarely describe, practically never does).
//! The errors found while validating an unchanged value (its own and those of everything below
//! it) are dropped. Ratcheted this way: type, format, enum, pattern, lengths, bounds,
//! `multipleOf`, item and property counts, `required`, `additionalProperties: false`, and the
//! `allOf`/`anyOf`/`oneOf`/`not` errors of the value.
//!
//! Not ratcheted, as upstream: the checks of embedded resources' `metadata`/`apiVersion`/`kind`;
//! list-type uniqueness is checked on update only when the old object had no list-type error.

use std::collections::HashMap;
use std::fmt::Write as _;

use genplane_apimachinery::meta::validate_object_meta;
use genplane_apimachinery::validation::field::{Error, ErrorList, ErrorType, Path};
use genplane_apimachinery::validation::name_is_path_segment;
use serde_json::{Map, Number, Value};

use crate::schema::{AdditionalProperties, ListType, Node, Structural, Types, go_float};

/// Validates a new custom resource against `schema`.
pub fn validate(schema: &Structural, object: &Value) -> ErrorList {
    let mut errors = schema_errors(schema, object, None);
    errors.extend(embedded_resource_errors(schema.root(), object));
    errors.extend(list_type_errors(schema.root(), object));
    errors
}

/// Validates an update of a custom resource from `old` to `new`, ratcheting as described in
/// the [module documentation](self).
pub fn validate_update(schema: &Structural, new: &Value, old: &Value) -> ErrorList {
    let mut errors = schema_errors(schema, new, Some(old));
    errors.extend(embedded_resource_errors(schema.root(), new));
    if list_type_errors(schema.root(), old).is_empty() {
        errors.extend(list_type_errors(schema.root(), new));
    }
    errors
}

/// Whether `errors` hold one that upstream lets block the CEL rules (`x-kubernetes-validations`):
/// an unsupported value, a required field missing, a value too long, too many items or
/// properties, or a wrong type. Upstream then does not evaluate the rules and reports
/// [`cel_skipped`] instead.
pub fn blocks_cel(errors: &ErrorList) -> bool {
    errors.iter().any(|e| {
        matches!(
            e.kind,
            ErrorType::NotSupported
                | ErrorType::Required
                | ErrorType::TooLong
                | ErrorType::TooMany
                | ErrorType::TypeInvalid
        )
    })
}

/// The error upstream reports when [`blocks_cel`] kept the CEL rules from running.
pub fn cel_skipped() -> Error {
    Error::invalid(
        &Path::new("<nil>"),
        "null",
        "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
    )
}

/// Only the OpenAPI value validations (kube-openapi's part), ratcheted against `old` if given.
pub fn schema_errors(schema: &Structural, object: &Value, old: Option<&Value>) -> ErrorList {
    let mut engine = Engine { errors: Vec::new() };
    let mut path = String::new();
    engine.child(schema.root(), object, &mut path, old);
    engine.into_error_list()
}

/// What kind of kube-openapi error, which decides the field error it becomes.
#[derive(Debug)]
enum Code {
    Required,
    Enum(Vec<String>),
    TooLong(i64),
    TooMany {
        actual: i64,
        max: i64,
    },
    InvalidType,
    Invalid,
    /// Not tied to a field: `allOf`/`anyOf`/`oneOf`/`not`.
    Composite,
}

/// One kube-openapi error: `name` is its (dotted) path, `message` its full text.
#[derive(Debug)]
struct Raw {
    code: Code,
    name: String,
    value: Value,
    message: String,
}

/// Which children of a correlated value were validated with a correlated old value, and
/// whether each was unchanged (upstream's ratcheting tree node).
#[derive(Default)]
struct Children {
    fields: Vec<(String, bool)>,
    items: Vec<(usize, bool)>,
}

impl Children {
    fn record_field(&mut self, key: &str, unchanged: bool) {
        match self.fields.iter_mut().find(|(k, _)| k == key) {
            Some(entry) => entry.1 = unchanged,
            None => self.fields.push((key.to_owned(), unchanged)),
        }
    }

    fn record_item(&mut self, index: usize, unchanged: bool) {
        match self.items.iter_mut().find(|(i, _)| *i == index) {
            Some(entry) => entry.1 = unchanged,
            None => self.items.push((index, unchanged)),
        }
    }

    /// Upstream's `CachedDeepEqual`.
    fn unchanged(&self, new: &Value, old: &Value) -> bool {
        match (new, old) {
            (Value::Null, Value::Null) => true,
            (Value::Null, _) | (_, Value::Null) => false,
            (Value::Array(n), Value::Array(o)) => {
                n.len() == o.len()
                    && self.items.len() == o.len()
                    && self.items.iter().all(|(_, eq)| *eq)
            }
            (Value::Object(n), Value::Object(o)) => {
                if n.len() != o.len() {
                    return false;
                }
                if o.is_empty() {
                    return true;
                }
                self.fields.len() == o.len()
                    && o.keys()
                        .all(|k| self.fields.iter().any(|(key, eq)| key == k && *eq))
            }
            (Value::Array(_), _) | (_, Value::Array(_)) => false,
            (Value::Object(_), _) | (_, Value::Object(_)) => false,
            (n, o) => n == o,
        }
    }
}

/// The ratcheting state of the value being validated: its correlated old value, the schema it
/// was reached with (which says how its list items correlate), and its children.
struct Ratchet<'a, 'c> {
    old: &'a Value,
    schema: &'a Node,
    children: &'c mut Children,
    /// For a list-map: the old items by key, built on first use.
    old_by_key: Option<HashMap<String, &'a Value>>,
}

struct Engine {
    errors: Vec<Raw>,
}

/// A JSON number as Go's JSON decoding sees it: int64 when it fits, else float64.
#[derive(Clone, Copy)]
enum Num {
    Int(i64),
    Float(f64),
}

fn num(n: &Number) -> Num {
    match n.as_i64() {
        Some(i) => Num::Int(i),
        None => Num::Float(n.as_f64().unwrap_or(f64::NAN)),
    }
}

/// Go's `json.Marshal` of a value, for enum values in messages.
fn go_json(v: &Value) -> String {
    match v {
        Value::Number(n) => match num(n) {
            Num::Int(i) => i.to_string(),
            Num::Float(f) => {
                let a = f.abs();
                if a != 0.0 && !(1e-6..1e21).contains(&a) {
                    let sci = format!("{f:e}");
                    let (m, e) = sci.split_once('e').unwrap_or((&sci, "0"));
                    if let Some(neg) = e.strip_prefix('-') {
                        format!("{m}e-{neg}")
                    } else {
                        format!("{m}e+{e}")
                    }
                } else {
                    format!("{f}")
                }
            }
        },
        other => other.to_string(),
    }
}

/// Whether a float is an integer as go-openapi's `IsFloat64AJSONInteger` decides.
fn is_json_integer(f: f64) -> bool {
    const MAX: f64 = 9_007_199_254_740_991.0;
    if !f.is_finite() || !(-MAX..=MAX).contains(&f) {
        return false;
    }
    if f.fract() == 0.0 {
        return true;
    }
    if f < 0.0 {
        return false;
    }
    let g = f.trunc();
    let diff = (f - g).abs();
    if g == 0.0 {
        return false;
    }
    diff / (f + g) < 1e-9
}

fn type_of(data: &Value) -> (&'static str, &'static str, Types) {
    match data {
        Value::Bool(_) => ("boolean", "", Types::BOOLEAN),
        Value::String(_) => ("string", "", Types::STRING),
        Value::Number(n) => match num(n) {
            Num::Int(_) => ("integer", "int64", Types::INTEGER),
            Num::Float(_) => ("number", "float64", Types::NUMBER),
        },
        Value::Array(_) => ("array", "", Types::ARRAY),
        Value::Object(_) => ("object", "", Types::OBJECT),
        Value::Null => ("null", "", Types::NULL),
    }
}

/// Enum membership as kube-openapi decides it (Go value conversions included: a float matches
/// an integer enum value by truncation, an integer a one-character string by code point).
fn enum_matches(data: &Value, candidate: &Value) -> bool {
    if data.is_null() {
        return false;
    }
    if data == candidate {
        return true;
    }
    match (data, candidate) {
        (Value::Number(d), Value::Number(c)) => match (num(d), num(c)) {
            (Num::Int(d), Num::Float(c)) => d as f64 == c,
            (Num::Float(d), Num::Int(c)) => d.trunc() as i64 == c,
            (Num::Int(d), Num::Int(c)) => d == c,
            (Num::Float(d), Num::Float(c)) => d == c,
        },
        (Value::Number(d), Value::String(c)) => match num(d) {
            Num::Int(i) => {
                let ch = u32::try_from(i)
                    .ok()
                    .and_then(char::from_u32)
                    .unwrap_or('\u{fffd}');
                c.chars().eq(std::iter::once(ch))
            }
            Num::Float(_) => false,
        },
        _ => false,
    }
}

impl Engine {
    fn push(&mut self, code: Code, name: &str, value: Value, message: String) {
        self.errors.push(Raw {
            code,
            name: name.to_owned(),
            value,
            message,
        });
    }

    /// Validates `data` as a child reached through a property, `additionalProperties` or
    /// `items` (or the root): with ratcheting when it has a correlated old value. Returns the
    /// match count and, when correlated, whether it is unchanged.
    fn child(
        &mut self,
        node: &Node,
        data: &Value,
        path: &mut String,
        old: Option<&Value>,
    ) -> (u32, Option<bool>) {
        match old {
            None => (self.node(node, data, path, None), None),
            Some(old) => {
                let start = self.errors.len();
                let mut children = Children::default();
                let count = self.node(
                    node,
                    data,
                    path,
                    Some(&mut Ratchet {
                        old,
                        schema: node,
                        children: &mut children,
                        old_by_key: None,
                    }),
                );
                let unchanged = children.unchanged(data, old);
                if unchanged {
                    self.errors.truncate(start);
                }
                (count, Some(unchanged))
            }
        }
    }

    /// kube-openapi's `SchemaValidator.Validate` for one schema node; returns the match count.
    fn node(
        &mut self,
        n: &Node,
        data: &Value,
        path: &mut String,
        mut r: Option<&mut Ratchet<'_, '_>>,
    ) -> u32 {
        if data.is_null() {
            let mut count = 1;
            if !n.types.is_empty() && !n.types.contains(Types::NULL) && !n.nullable {
                count = 0;
                self.invalid_type(path, &n.types_name, "null");
            }
            self.check_enum(n, data, path);
            return count;
        }
        let mut count = 1;
        if !n.types.is_empty() || n.format.is_some() {
            count += 1 + self.check_type(n, data, path);
        }
        count += 2 + self.schema_props(n, data, path, r.as_deref_mut());
        match data {
            Value::String(s) => {
                count += 1;
                self.check_string(n, s, path);
                if let Some((name, format)) = &n.format {
                    count += 1;
                    if !format.check(s) {
                        self.push(
                            Code::InvalidType,
                            path,
                            data.clone(),
                            format!(
                                "{path} in body must be of type {name}: {}",
                                genplane_apimachinery::gofmt::quote(s)
                            ),
                        );
                    }
                }
            }
            Value::Number(x) => {
                count += 2;
                self.check_number(n, num(x), data, path);
            }
            Value::Array(items) => {
                count += 2 + self.check_array(n, items, path, r.as_deref_mut());
            }
            _ => {}
        }
        count += 1;
        self.check_enum(n, data, path);
        if let Value::Object(map) = data {
            count += 1 + self.check_object(n, map, path, r);
        }
        count
    }

    fn invalid_type(&mut self, path: &str, expected: &str, found: &str) {
        self.push(
            Code::InvalidType,
            path,
            Value::String(found.to_owned()),
            format!(
                "{path} in body must be of type {expected}: {}",
                genplane_apimachinery::gofmt::quote(found)
            ),
        );
    }

    /// kube-openapi's type validator; 1 when it passes.
    fn check_type(&mut self, n: &Node, data: &Value, path: &str) -> u32 {
        let (sch, fmt, t) = type_of(data);
        let is_float_int = matches!(data, Value::Number(x) if matches!(num(x), Num::Float(f) if is_json_integer(f)))
            && n.types.contains(Types::INTEGER);
        let is_int_float = t == Types::INTEGER && n.types.contains(Types::NUMBER);
        let stringish = matches!(data, Value::String(_) | Value::Array(_));
        if let Some((format, _)) = &n.format {
            if !(stringish || n.types.contains(t) || fmt == format || is_float_int || is_int_float)
            {
                self.invalid_type(path, format, fmt);
                return 0;
            }
            if !(n.types.contains(Types::NUMBER) || n.types.contains(Types::INTEGER)) && stringish {
                return 1;
            }
        }
        if !(n.types.contains(t) || is_float_int || is_int_float) {
            self.invalid_type(path, &n.types_name, sch);
            return 0;
        }
        1
    }

    fn check_enum(&mut self, n: &Node, data: &Value, path: &str) {
        if n.enum_values.is_empty() || n.enum_values.iter().any(|e| enum_matches(data, e)) {
            return;
        }
        let supported: Vec<String> = n
            .enum_values
            .iter()
            .map(|v| match v {
                Value::String(s) => s.clone(),
                other => go_json(other),
            })
            .collect();
        let listed: Vec<String> = n.enum_values.iter().map(go_value).collect();
        let message = format!("{path} in body should be one of [{}]", listed.join(" "));
        self.push(Code::Enum(supported), path, data.clone(), message);
    }

    fn check_string(&mut self, n: &Node, s: &str, path: &str) {
        if let Some(max) = n.limits().max_length
            && (s.chars().count() as i64) > max
        {
            self.push(
                Code::TooLong(max),
                path,
                Value::String(s.to_owned()),
                format!("{path} in body should be at most {max} chars long"),
            );
            return;
        }
        if let Some(min) = n.limits().min_length
            && (s.chars().count() as i64) < min
        {
            self.push(
                Code::Invalid,
                path,
                Value::String(s.to_owned()),
                format!("{path} in body should be at least {min} chars long"),
            );
            return;
        }
        if let Some((pattern, re)) = &n.pattern
            && !re.is_match(s)
        {
            self.push(
                Code::Invalid,
                path,
                Value::String(s.to_owned()),
                format!("{path} in body should match '{pattern}'"),
            );
        }
    }

    fn check_number(&mut self, n: &Node, x: Num, data: &Value, path: &str) {
        if let Some(factor) = n.limits().multiple_of {
            let failed = match x {
                Num::Int(i) if factor.trunc() as i64 != 0 => {
                    let f = factor.trunc() as i64;
                    if f < 0 {
                        Some(format!(
                            "factor MultipleOf declared for {path} must be positive: {f}"
                        ))
                    } else if i.wrapping_div(f).wrapping_mul(f) != i {
                        Some(format!("{path} in body should be a multiple of {f}"))
                    } else {
                        None
                    }
                }
                _ => {
                    let d = match x {
                        Num::Int(i) => i as f64,
                        Num::Float(f) => f,
                    };
                    if factor < 0.0 {
                        Some(format!(
                            "factor MultipleOf declared for {path} must be positive: {}",
                            go_float(factor)
                        ))
                    } else {
                        let mult = if factor < 1.0 {
                            1.0 / factor * d
                        } else {
                            d / factor
                        };
                        (!is_json_integer(mult)).then(|| {
                            format!(
                                "{path} in body should be a multiple of {}",
                                go_float(factor)
                            )
                        })
                    }
                }
            };
            if let Some(message) = failed {
                self.push(Code::Invalid, path, data.clone(), message);
            }
        }
        if let Some(min) = n.limits().minimum {
            let excl = n.limits().exclusive_minimum;
            let (below, shown) = match x {
                Num::Int(i) => {
                    let m = min as i64;
                    ((!excl && i < m) || (excl && i <= m), m.to_string())
                }
                Num::Float(f) => ((!excl && f < min) || (excl && f <= min), go_float(min)),
            };
            if below {
                let words = if excl {
                    "greater than"
                } else {
                    "greater than or equal to"
                };
                self.push(
                    Code::Invalid,
                    path,
                    data.clone(),
                    format!("{path} in body should be {words} {shown}"),
                );
            }
        }
        if let Some(max) = n.limits().maximum {
            let excl = n.limits().exclusive_maximum;
            let (above, shown) = match x {
                Num::Int(i) => {
                    let m = max as i64;
                    ((!excl && i > m) || (excl && i >= m), m.to_string())
                }
                Num::Float(f) => ((!excl && f > max) || (excl && f >= max), go_float(max)),
            };
            if above {
                let words = if excl {
                    "less than"
                } else {
                    "less than or equal to"
                };
                self.push(
                    Code::Invalid,
                    path,
                    data.clone(),
                    format!("{path} in body should be {words} {shown}"),
                );
            }
        }
    }

    /// The items old ones correlate to (upstream's `correlateOldValueForChildAtNewIndex`).
    fn correlate_item<'a>(
        r: &mut Ratchet<'a, '_>,
        items: &[Value],
        index: usize,
    ) -> Option<&'a Value> {
        let Value::Array(old_items) = r.old else {
            return None;
        };
        match r.schema.list_type {
            Some(ListType::Map) => {
                let Value::Object(new_item) = items.get(index)? else {
                    return None;
                };
                let keys = &r.schema.list_map_keys;
                let key = map_key(new_item, keys)?;
                let by_key = r.old_by_key.get_or_insert_with(|| {
                    old_items
                        .iter()
                        .filter_map(|o| match o {
                            Value::Object(m) => {
                                map_key(m, keys).map(|k| (Value::Array(k).to_string(), o))
                            }
                            _ => None,
                        })
                        .collect()
                });
                by_key.get(&Value::Array(key).to_string()).copied()
            }
            Some(ListType::Set) | Some(ListType::Atomic) => None,
            None => old_items.get(index),
        }
    }

    /// kube-openapi's slice validator; returns the match count of the items.
    fn check_array(
        &mut self,
        n: &Node,
        items: &[Value],
        path: &mut String,
        mut r: Option<&mut Ratchet<'_, '_>>,
    ) -> u32 {
        let mut count = 0;
        if let Some(item_schema) = &n.items {
            for (i, item) in items.iter().enumerate() {
                let old = r
                    .as_deref_mut()
                    .and_then(|r| Self::correlate_item(r, items, i));
                let len = path.len();
                let _ = write!(path, "[{i}]");
                let (c, unchanged) = self.child(item_schema, item, path, old);
                path.truncate(len);
                count += c;
                if let (Some(r), Some(eq)) = (r.as_deref_mut(), unchanged) {
                    r.children.record_item(i, eq);
                }
            }
        }
        let size = items.len() as i64;
        if let Some(min) = n.limits().min_items
            && size < min
        {
            self.push(
                Code::Invalid,
                path,
                Value::from(size),
                format!("{path} in body should have at least {min} items"),
            );
        }
        if let Some(max) = n.limits().max_items
            && size > max
        {
            self.push(
                Code::TooMany { actual: size, max },
                path,
                Value::from(size),
                format!("{path} in body should have at most {max} items"),
            );
        }
        if n.limits().unique_items {
            let duplicate = items
                .iter()
                .enumerate()
                .any(|(i, a)| items[..i].iter().any(|b| a == b));
            if duplicate {
                self.push(
                    Code::Invalid,
                    path,
                    Value::String(String::new()),
                    format!("{path} in body shouldn't contain duplicates"),
                );
            }
        }
        count
    }

    /// kube-openapi's object validator; returns the match count of the fields.
    fn check_object(
        &mut self,
        n: &Node,
        map: &Map<String, Value>,
        path: &mut String,
        mut r: Option<&mut Ratchet<'_, '_>>,
    ) -> u32 {
        let size = map.len() as i64;
        if let Some(min) = n.limits().min_properties
            && size < min
        {
            self.push(
                Code::Invalid,
                path,
                Value::from(size),
                format!("{path} in body should have at least {min} properties"),
            );
        }
        if let Some(max) = n.limits().max_properties
            && size > max
        {
            self.push(
                Code::TooMany { actual: size, max },
                path,
                Value::from(size),
                format!("{path} in body should have at most {max} properties"),
            );
        }
        let mut count = 0;
        match &n.additional_properties {
            Some(AdditionalProperties::Bool(false)) => {
                for key in map.keys() {
                    if !n.properties.contains_key(key) {
                        self.push(
                            Code::Invalid,
                            path,
                            Value::String(key.clone()),
                            format!("{path}.{key} in body is a forbidden property"),
                        );
                    }
                }
            }
            Some(AdditionalProperties::Schema(schema)) => {
                for (key, value) in map {
                    if n.properties.contains_key(key) {
                        continue;
                    }
                    let len = path.len();
                    path.push('.');
                    path.push_str(key);
                    count += self.field(schema, key, value, path, r.as_deref_mut());
                    path.truncate(len);
                }
            }
            _ => {}
        }
        for (name, schema) in &n.properties {
            if let Some(value) = map.get(name) {
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(name);
                count += self.field(schema, name, value, path, r.as_deref_mut());
                path.truncate(len);
            }
        }
        for name in &n.required {
            if !map.contains_key(name) {
                self.push(
                    Code::Required,
                    &format!("{path}.{name}"),
                    Value::Null,
                    format!("{path}.{name} in body is required"),
                );
            }
        }
        count
    }

    /// Validates the field `key` of the current object, correlated by name.
    fn field(
        &mut self,
        schema: &Node,
        key: &str,
        value: &Value,
        path: &mut String,
        r: Option<&mut Ratchet<'_, '_>>,
    ) -> u32 {
        let old = r.as_deref().and_then(|r| match r.old {
            Value::Object(o) => o.get(key),
            _ => None,
        });
        let (count, unchanged) = self.child(schema, value, path, old);
        if let (Some(r), Some(eq)) = (r, unchanged) {
            r.children.record_field(key, eq);
        }
        count
    }

    /// One alternative of `allOf`/`anyOf`/`oneOf`/`not`, validated on its own: its errors and
    /// match count. It shares the ratcheting state of the value.
    fn alternative(
        &mut self,
        n: &Node,
        data: &Value,
        path: &mut String,
        r: Option<&mut Ratchet<'_, '_>>,
    ) -> (Vec<Raw>, u32) {
        let start = self.errors.len();
        let count = self.node(n, data, path, r);
        (self.errors.split_off(start), count)
    }

    /// kube-openapi's schema-props validator (`allOf`, `anyOf`, `oneOf`, `not`); returns the
    /// match count merged.
    fn schema_props(
        &mut self,
        n: &Node,
        data: &Value,
        path: &mut String,
        mut r: Option<&mut Ratchet<'_, '_>>,
    ) -> u32 {
        let mut count = 0;
        if !n.limits().any_of.is_empty() {
            let mut best: Option<(Vec<Raw>, u32)> = None;
            let mut success: Option<u32> = None;
            for alt in &n.limits().any_of {
                let (errs, c) = self.alternative(alt, data, path, r.as_deref_mut());
                if errs.is_empty() {
                    best = None;
                    success = Some(c);
                    break;
                }
                if best.as_ref().is_none_or(|(_, bc)| c > *bc) {
                    best = Some((errs, c));
                }
            }
            if success.is_none() {
                self.push(
                    Code::Composite,
                    "",
                    Value::String(String::new()),
                    format!(
                        "{} must validate at least one schema (anyOf)",
                        genplane_apimachinery::gofmt::quote(path)
                    ),
                );
            }
            if let Some((errs, c)) = best {
                self.errors.extend(errs);
                count += c;
            } else if let Some(c) = success {
                count += c;
            }
        }
        if !n.limits().one_of.is_empty() {
            let mut best: Option<(Vec<Raw>, u32)> = None;
            let mut first_success: Option<u32> = None;
            let mut valid = 0;
            for alt in &n.limits().one_of {
                let (errs, c) = self.alternative(alt, data, path, r.as_deref_mut());
                if errs.is_empty() {
                    valid += 1;
                    best = None;
                    first_success.get_or_insert(c);
                    continue;
                }
                if valid == 0 && best.as_ref().is_none_or(|(_, bc)| c > *bc) {
                    best = Some((errs, c));
                }
            }
            if valid != 1 {
                let more = if valid == 0 {
                    "Found none valid".to_owned()
                } else {
                    format!("Found {valid} valid alternatives")
                };
                self.push(
                    Code::Composite,
                    "",
                    Value::String(String::new()),
                    format!(
                        "{} must validate one and only one schema (oneOf). {more}",
                        genplane_apimachinery::gofmt::quote(path)
                    ),
                );
                if let Some((errs, c)) = best {
                    self.errors.extend(errs);
                    count += c;
                }
            } else if let Some(c) = first_success {
                count += c;
            }
        }
        if !n.limits().all_of.is_empty() {
            let mut valid = 0;
            let mut merged = Vec::new();
            for alt in &n.limits().all_of {
                let (errs, c) = self.alternative(alt, data, path, r.as_deref_mut());
                if errs.is_empty() {
                    valid += 1;
                }
                merged.extend(errs);
                count += c;
            }
            self.errors.extend(merged);
            if valid != n.limits().all_of.len() {
                let more = if valid == 0 { ". None validated" } else { "" };
                self.push(
                    Code::Composite,
                    "",
                    Value::String(String::new()),
                    format!(
                        "{} must validate all the schemas (allOf){more}",
                        genplane_apimachinery::gofmt::quote(path)
                    ),
                );
            }
        }
        if let Some(not) = &n.limits().not {
            let (errs, _) = self.alternative(not, data, path, r);
            if errs.is_empty() {
                self.push(
                    Code::Composite,
                    "",
                    Value::String(String::new()),
                    format!(
                        "{} must not validate the schema (not)",
                        genplane_apimachinery::gofmt::quote(path)
                    ),
                );
            }
        }
        count
    }

    /// Turns kube-openapi errors into field errors as upstream's
    /// `kubeOpenAPIResultToFieldErrors` does; identical messages are reported once.
    fn into_error_list(self) -> ErrorList {
        let mut seen: Vec<&str> = Vec::new();
        let mut list = ErrorList::new();
        for raw in &self.errors {
            if seen.contains(&raw.message.as_str()) {
                continue;
            }
            seen.push(&raw.message);
            let field =
                if raw.name.is_empty() || raw.name == "." || matches!(raw.code, Code::Composite) {
                    Path::new("<nil>")
                } else {
                    Path::new(raw.name.strip_prefix('.').unwrap_or(&raw.name))
                };
            let value = if raw.value.is_null() {
                Value::String(String::new())
            } else {
                raw.value.clone()
            };
            let error = match &raw.code {
                Code::Required => Error::required(&field, ""),
                Code::Enum(supported) => {
                    let refs: Vec<&str> = supported.iter().map(String::as_str).collect();
                    let value = if raw.value.is_null() {
                        Value::String("null".to_owned())
                    } else {
                        raw.value.clone()
                    };
                    Error::not_supported(&field, value, &refs)
                }
                Code::TooLong(max) => Error {
                    kind: ErrorType::TooLong,
                    field,
                    bad_value: value,
                    shown: None,
                    detail: format!(
                        "may not be more than {max} {}",
                        if *max == 1 { "byte" } else { "bytes" }
                    ),
                },
                Code::TooMany { actual, max } => Error {
                    kind: ErrorType::TooMany,
                    field,
                    bad_value: Value::from(*actual),
                    shown: None,
                    detail: format!(
                        "must have at most {max} {}",
                        if *max == 1 { "item" } else { "items" }
                    ),
                },
                Code::InvalidType => Error::type_invalid(&field, value, raw.message.clone()),
                Code::Invalid | Code::Composite => {
                    Error::invalid(&field, value, raw.message.clone())
                }
            };
            list.push(error);
        }
        list
    }
}

/// Go's `%v` of a JSON value, for the enum list in kube-openapi's message.
fn go_value(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::String(s) => s.clone(),
        Value::Number(n) => match num(n) {
            Num::Int(i) => i.to_string(),
            Num::Float(f) => go_float(f),
        },
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(go_value).collect::<Vec<_>>().join(" ")
        ),
        Value::Object(map) => format!(
            "map[{}]",
            map.iter()
                .map(|(k, v)| format!("{k}:{}", go_value(v)))
                .collect::<Vec<_>>()
                .join(" ")
        ),
    }
}

/// The key of a list-map item: its key fields' values (all present and scalar), else none.
fn map_key(item: &Map<String, Value>, keys: &[String]) -> Option<Vec<Value>> {
    keys.iter()
        .map(|k| match item.get(k) {
            Some(v @ (Value::Bool(_) | Value::Number(_) | Value::String(_))) => Some(v.clone()),
            _ => None,
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Embedded resources (upstream's objectmeta.Validate).

/// Checks `apiVersion`, `kind` and `metadata` of every embedded resource in `object` (not of
/// the root).
pub fn embedded_resource_errors(root: &Node, object: &Value) -> ErrorList {
    let mut errors = ErrorList::new();
    embedded_walk(&mut errors, &Path::default(), object, root, false);
    errors
}

fn embedded_walk(
    errors: &mut ErrorList,
    path: &Path,
    value: &Value,
    node: &Node,
    check_self: bool,
) {
    match value {
        Value::Object(map) => {
            if check_self && node.embedded_resource {
                check_embedded(errors, path, map);
            }
            for (k, v) in map {
                match node.properties.get(k) {
                    Some(p) if p.subtree_embedded => {
                        embedded_walk(errors, &path.child(k), v, p, true)
                    }
                    Some(_) => {}
                    None => {
                        if let Some(s) = node.additional_schema().filter(|s| s.subtree_embedded) {
                            embedded_walk(errors, &path.key(k), v, s, true);
                        }
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = node.items.as_deref().filter(|s| s.subtree_embedded) {
                for (i, v) in items.iter().enumerate() {
                    embedded_walk(errors, &path.index(i), v, s, true);
                }
            }
        }
        _ => {}
    }
}

/// DNS-1035 label problems (`[a-z]([-a-z0-9]*[a-z0-9])?`, at most 63 characters).
fn dns1035_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_owned());
    }
    let b = value.as_bytes();
    let ok = !b.is_empty()
        && b[0].is_ascii_lowercase()
        && (b[b.len() - 1].is_ascii_lowercase() || b[b.len() - 1].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-');
    if !ok {
        errs.push("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')".to_owned());
    }
    errs
}

fn check_embedded(errors: &mut ErrorList, path: &Path, map: &Map<String, Value>) {
    for required in ["apiVersion", "kind"] {
        if !map.contains_key(required) {
            errors.push(Error::required(&path.child(required), ""));
        }
    }
    for (k, v) in map {
        match k.as_str() {
            "apiVersion" => {
                let p = path.child("apiVersion");
                match v {
                    Value::String(s) if s.is_empty() => {
                        errors.push(Error::invalid(&p, "", "must not be empty"));
                    }
                    Value::String(s) if s.split('/').count() > 2 => {
                        errors.push(Error::invalid(
                            &p,
                            s.as_str(),
                            format!("unexpected GroupVersion string: {s}"),
                        ));
                    }
                    Value::String(_) => {}
                    other => errors.push(Error::invalid(&p, other.clone(), "must be a string")),
                }
            }
            "kind" => {
                let p = path.child("kind");
                match v {
                    Value::String(s) if s.is_empty() => {
                        errors.push(Error::invalid(&p, "", "must not be empty"));
                    }
                    Value::String(s) => {
                        let errs = dns1035_label(&s.to_lowercase());
                        if !errs.is_empty() {
                            errors.push(Error::invalid(
                                &p,
                                s.as_str(),
                                format!(
                                    "may have mixed case, but should otherwise match: {}",
                                    errs.join(",")
                                ),
                            ));
                        }
                    }
                    other => errors.push(Error::invalid(&p, other.clone(), "must be a string")),
                }
            }
            "metadata" => {
                let p = path.child("metadata");
                match crate::objectmeta::read(v) {
                    Err(message) => errors.push(Error::invalid(&p, v.clone(), message)),
                    Ok(mut meta) => {
                        if meta.name.is_empty() {
                            meta.name = "fakename".to_owned();
                        }
                        let namespaced = !meta.namespace.is_empty();
                        errors.extend(validate_object_meta(
                            &meta,
                            namespaced,
                            name_is_path_segment,
                            &p,
                        ));
                    }
                }
            }
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------------------------
// List types (upstream's listtype.ValidateListSetsAndMaps).

/// Checks that `set` lists have unique items and `map` lists unique keys.
pub fn list_type_errors(root: &Node, object: &Value) -> ErrorList {
    let mut errors = ErrorList::new();
    if let Value::Object(map) = object
        && root.subtree_lists
    {
        list_walk_object(&mut errors, &Path::default(), root, map);
    }
    errors
}

fn list_walk_object(errors: &mut ErrorList, path: &Path, node: &Node, map: &Map<String, Value>) {
    if let Some(s) = node.additional_schema().filter(|s| s.subtree_lists) {
        for (k, v) in map {
            list_walk(errors, &path.key(k), s, v);
        }
    }
    for (k, v) in map {
        if let Some(p) = node.properties.get(k).filter(|p| p.subtree_lists) {
            list_walk(errors, &path.child(k), p, v);
        }
    }
}

fn list_walk(errors: &mut ErrorList, path: &Path, node: &Node, value: &Value) {
    if !node.subtree_lists {
        return;
    }
    match value {
        Value::Object(map) => list_walk_object(errors, path, node, map),
        Value::Array(items) => {
            match node.list_type {
                Some(ListType::Set) => {
                    for i in first_repeats(items.iter()) {
                        errors.push(Error::duplicate(&path.index(i), items[i].clone()));
                    }
                }
                Some(ListType::Map) => check_list_map(errors, path, node, items),
                _ => {}
            }
            if let Some(s) = node.items.as_deref().filter(|s| s.subtree_lists) {
                for (i, v) in items.iter().enumerate() {
                    list_walk(errors, &path.index(i), s, v);
                }
            }
        }
        _ => {}
    }
}

/// The indices of the second occurrence of every value that occurs more than once. Values are
/// compared by their JSON text (so `1` and `1.0` differ, as Go's int64 and float64 do).
fn first_repeats<'a>(values: impl Iterator<Item = &'a Value>) -> Vec<usize> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut repeats = Vec::new();
    for (i, v) in values.enumerate() {
        let count = seen.entry(v.to_string()).or_insert(0);
        *count += 1;
        if *count == 2 {
            repeats.push(i);
        }
    }
    repeats
}

fn check_list_map(errors: &mut ErrorList, path: &Path, node: &Node, items: &[Value]) {
    for (i, item) in items.iter().enumerate() {
        if !matches!(item, Value::Object(_) | Value::Null) {
            errors.push(Error::invalid(
                &path.index(i),
                item.clone(),
                "must be an object for an array of list-type map",
            ));
            return;
        }
    }
    if items.len() <= 1 {
        return;
    }
    // The key of each item: the key fields it has (a missing field is "unspecified", which
    // is a value of its own).
    let keys: Vec<Value> = items
        .iter()
        .map(|item| {
            let mut key = Map::new();
            if let Value::Object(map) = item {
                for k in &node.list_map_keys {
                    if let Some(v) = map.get(k) {
                        key.insert(k.clone(), v.clone());
                    }
                }
            }
            Value::Object(key)
        })
        .collect();
    for i in first_repeats(keys.iter()) {
        errors.push(Error::duplicate(&path.index(i), keys[i].clone()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(v: Value) -> Structural {
        Structural::new(&v).expect("schema compiles")
    }

    fn messages(errors: &ErrorList) -> Vec<String> {
        errors.iter().map(ToString::to_string).collect()
    }

    fn spec_schema(spec: Value) -> Structural {
        schema(json!({"type": "object", "properties": {"spec": spec}}))
    }

    #[test]
    fn type_errors_read_like_upstream() {
        let s =
            spec_schema(json!({"type": "object", "properties": {"replicas": {"type": "integer"}}}));
        let errs = validate(&s, &json!({"spec": {"replicas": "three"}}));
        assert_eq!(
            messages(&errs),
            vec![
                r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#
            ]
        );
        assert_eq!(errs.0[0].kind, ErrorType::TypeInvalid);
    }

    #[test]
    fn integral_floats_are_integers_and_integers_are_numbers() {
        let s = spec_schema(json!({"type": "object", "properties": {
            "i": {"type": "integer"}, "n": {"type": "number"}}}));
        assert!(validate(&s, &json!({"spec": {"i": 3.0, "n": 3}})).is_empty());
        let errs = validate(&s, &json!({"spec": {"i": 3.5}}));
        assert_eq!(
            messages(&errs),
            vec![
                r#"spec.i: Invalid value: "number": spec.i in body must be of type integer: "number""#
            ]
        );
    }

    #[test]
    fn null_needs_nullable() {
        let s = spec_schema(json!({"type": "object", "properties": {
            "a": {"type": "string"}, "b": {"type": "string", "nullable": true}}}));
        let errs = validate(&s, &json!({"spec": {"a": null, "b": null}}));
        assert_eq!(
            messages(&errs),
            vec![r#"spec.a: Invalid value: "null": spec.a in body must be of type string: "null""#]
        );
    }

    #[test]
    fn required_and_root_paths() {
        let s = schema(
            json!({"type": "object", "required": ["spec"], "properties": {
            "spec": {"type": "object", "required": ["size"]}}}),
        );
        assert_eq!(
            messages(&validate(&s, &json!({}))),
            vec!["spec: Required value"]
        );
        assert_eq!(
            messages(&validate(&s, &json!({"spec": {}}))),
            vec!["spec.size: Required value"]
        );
        assert_eq!(
            messages(&validate(&s, &json!("x"))),
            vec![r#"<nil>: Invalid value: "string":  in body must be of type object: "string""#]
        );
    }

    #[test]
    fn one_of_reports_at_nil_like_upstream() {
        let s = spec_schema(json!({"type": "object",
            "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
            "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}));
        assert!(validate(&s, &json!({"spec": {"a": "x"}})).is_empty());
        assert_eq!(
            messages(&validate(&s, &json!({"spec": {}}))),
            vec![
                r#"<nil>: Invalid value: "": "spec" must validate one and only one schema (oneOf). Found none valid"#,
                "spec.a: Required value"
            ]
        );
        assert_eq!(
            messages(&validate(&s, &json!({"spec": {"a": "x", "b": "y"}}))),
            vec![
                r#"<nil>: Invalid value: "": "spec" must validate one and only one schema (oneOf). Found 2 valid alternatives"#
            ]
        );
    }

    #[test]
    fn ratcheting_drops_errors_of_unchanged_fields_only() {
        let s = spec_schema(json!({"type": "object", "properties": {
            "a": {"type": "string", "maxLength": 3},
            "b": {"type": "string", "maxLength": 3}}}));
        let old = json!({"spec": {"a": "toolong", "b": "ok"}});
        let new = json!({"spec": {"a": "toolong", "b": "okay"}});
        assert_eq!(validate(&s, &new).0.len(), 2);
        assert_eq!(
            messages(&validate_update(&s, &new, &old)),
            vec!["spec.b: Too long: may not be more than 3 bytes"]
        );
        assert!(validate_update(&s, &old, &old).is_empty());
    }

    #[test]
    fn type_errors_block_cel_rules() {
        let s = spec_schema(json!({"type": "object", "properties": {
            "n": {"type": "integer", "minimum": 5}}}));
        let below = validate(&s, &json!({"spec": {"n": 1}}));
        assert!(!below.is_empty() && !blocks_cel(&below));
        let wrong = validate(&s, &json!({"spec": {"n": "x"}}));
        assert!(blocks_cel(&wrong));
        assert_eq!(
            cel_skipped().to_string(),
            "<nil>: Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"
        );
    }

    #[test]
    fn enum_quirks_follow_go_conversions() {
        assert!(enum_matches(&json!(1.0), &json!(1)));
        assert!(
            enum_matches(&json!(1.5), &json!(1)),
            "Go converts the float to int64"
        );
        assert!(
            enum_matches(&json!(65), &json!("A")),
            "Go converts an int to a rune"
        );
        assert!(!enum_matches(&json!(null), &json!(null)));
        assert!(!enum_matches(&json!("1"), &json!(1)));
    }

    #[test]
    fn float_integers_as_go_decides() {
        assert!(is_json_integer(3.0));
        assert!(!is_json_integer(3.5));
        assert!(!is_json_integer(f64::NAN));
        assert!(!is_json_integer(1e300));
    }
}
