//! The checks a CustomResourceDefinition version's `openAPIV3Schema` must pass when the CRD is
//! written, with upstream's field paths, error types and messages (users read them in
//! `kubectl apply` errors).
//!
//! [`validate_schema`] runs, in upstream's order (`apiextensions.k8s.io/v1`, Kubernetes 1.33):
//!
//! 1. with the status subresource enabled ([`Options::status_subresource`]): only some fields
//!    may be set at the root, and the root type must be `object`;
//! 2. `nullable` cannot be true at the root;
//! 3. the structural-schema rules (upstream's `NewStructural` and `ValidateStructural`): every
//!    specified field has a `type` (unless `x-kubernetes-int-or-string` or
//!    `x-kubernetes-preserve-unknown-fields` say otherwise), arrays have `items`, value
//!    validations (`allOf`, `anyOf`, `oneOf`, `not`) only restrict what the structure already
//!    specifies and set no `type`, `default`, `description`, `nullable`, extension or
//!    `metadata`, `metadata` at the root restricts at most `name` and `generateName`, embedded
//!    resources are objects, int-or-string is not combined with other extensions, patterns are
//!    valid regular expressions. These errors are sorted by their text, as upstream sorts them.
//!    When the schema cannot even be read as a structural one (`$ref`, `definitions`,
//!    `items` as a list, ...), upstream reports that as one error on the schema, and only when
//!    nothing else is wrong; so does this.
//! 4. the OpenAPI rules (upstream's `ValidateCustomResourceDefinitionOpenAPISchema`): types
//!    are OpenAPI types, `id`, `$ref`, `definitions`, `dependencies`, `patternProperties`,
//!    `additionalItems`, `uniqueItems: true` and `type: null` are forbidden, `properties` and
//!    `additionalProperties` exclude each other, `default` is forbidden in the top-level
//!    `apiVersion`, `kind` and `metadata` and inside `additionalProperties` of object metadata,
//!    `x-kubernetes-embedded-resource` is forbidden inside resource metadata, the list-type,
//!    list-map-keys and map-type rules (map keys must be required or defaulted and not
//!    nullable; set items must be atomic), and the static checks of `x-kubernetes-validations`
//!    entries (rule present, message without line breaks, known reason, valid field path).
//!
//! Not here: compiling the CEL rules and estimating their cost (`genplane-cel`), and checking
//! the `default` values. Upstream validates every default against its schema (after pruning it
//! and, inside object metadata, as part of a whole object) only when the schema is otherwise
//! structural; [`defaults`] lists them with what that check needs.
//!
//! The schema is read as raw JSON (the JSON form of `JSONSchemaProps`); unknown keys are
//! ignored as upstream's decoding drops them, and `null` counts as absent. A known key with a
//! value of the wrong JSON type makes upstream reject the body before validation; here it is
//! reported as an invalid value and nothing else is checked.

use std::collections::BTreeSet;

use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use serde_json::{Map, Value};

/// What upstream's validation depends on besides the schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// The version has the status subresource: only some fields may be set at the root.
    pub status_subresource: bool,
    /// Types must be OpenAPI types (`string`, `number`, `integer`, `boolean`, `array`,
    /// `object`).
    pub require_valid_property_type: bool,
    /// The schema must be structural.
    pub require_structural: bool,
    /// The items of a `x-kubernetes-list-type: set` must be atomic.
    pub require_atomic_set_type: bool,
    /// The keys of a map list must be required or defaulted and not nullable, and the items
    /// of map and set lists not nullable.
    pub require_map_list_keys_map_set_validation: bool,
}

impl Default for Options {
    /// What a create checks: everything, without the status subresource.
    fn default() -> Self {
        Self {
            status_subresource: false,
            require_valid_property_type: true,
            require_structural: true,
            require_atomic_set_type: true,
            require_map_list_keys_map_set_validation: true,
        }
    }
}

impl Options {
    /// What an update checks, given every schema of the stored CRD (all versions): upstream
    /// does not tighten a rule the stored CRD already breaks, so that it can still be updated.
    pub fn for_update<'a>(old_schemas: impl IntoIterator<Item = &'a Value>) -> Self {
        let mut options = Self::default();
        for old in old_schemas {
            let mut errors = ErrorList::new();
            let node = parse(old, &Path::default(), &mut errors);
            if !errors.is_empty() {
                continue;
            }
            if node.any(&|n| {
                let ty = n.s("type");
                !ty.is_empty() && !OPENAPI_TYPES.contains(&ty)
            }) {
                options.require_valid_property_type = false;
            }
            if convertible(&node).is_err() || !structural_errors(&node, &Path::default()).is_empty()
            {
                options.require_structural = false;
            }
            if node.any(&|n| has_non_atomic_set_items(n)) {
                options.require_atomic_set_type = false;
            }
            if node.any(&|n| !map_list_keys_map_set(n, &Path::default()).is_empty()) {
                options.require_map_list_keys_map_set_validation = false;
            }
        }
        options
    }
}

/// Checks a CRD version's `openAPIV3Schema` at `path` (e.g.
/// `spec.versions[0].schema.openAPIV3Schema`) as a create does ([`Options::default`]).
///
/// Whether a version must have a schema at all (`schemas are required`) is the CRD's
/// validation; this checks one that is there.
pub fn validate_schema(schema: &Value, path: &Path) -> ErrorList {
    validate_schema_with(schema, path, &Options::default())
}

/// [`validate_schema`] with explicit [`Options`] (status subresource, update ratcheting).
pub fn validate_schema_with(schema: &Value, path: &Path, options: &Options) -> ErrorList {
    let mut parse_errors = ErrorList::new();
    let node = parse(schema, path, &mut parse_errors);
    if !parse_errors.is_empty() {
        return parse_errors;
    }
    let mut errors = ErrorList::new();
    if options.status_subresource {
        status_root(&node, schema, path, &mut errors);
    }
    if node.b("nullable") {
        errors.push(Error::forbidden(
            &path.child("nullable"),
            "nullable cannot be true at the root",
        ));
    }
    let mut conversion_error = None;
    if options.require_structural {
        match convertible(&node) {
            Err(message) => conversion_error = Some(Error::invalid(path, "", message)),
            Ok(()) => errors.extend(structural_errors(&node, path)),
        }
    }
    let ssv = Ssv {
        forbidden_defaults: None,
        inside_resource_meta: false,
        options,
    };
    openapi_errors(&node, path, &ssv, true, &mut errors);
    if errors.is_empty()
        && let Some(error) = conversion_error
    {
        errors.push(error);
    }
    errors
}

/// Whether `schema` is a structural schema (no errors from the structural rules alone). The
/// OpenAPI documents and the type model are only built from structural schemas.
pub fn is_structural(schema: &Value) -> bool {
    let mut errors = ErrorList::new();
    let node = parse(schema, &Path::default(), &mut errors);
    errors.is_empty()
        && convertible(&node).is_ok()
        && structural_errors(&node, &Path::default()).is_empty()
}

/// Whether upstream publishes `schema` in the OpenAPI documents (and builds the type model
/// from it): it is structural and every type is an OpenAPI type.
pub(crate) fn is_publishable(schema: &Value) -> bool {
    let mut errors = ErrorList::new();
    let node = parse(schema, &Path::default(), &mut errors);
    errors.is_empty()
        && !node.any(&|n| {
            let ty = n.ty();
            !ty.is_empty() && !OPENAPI_TYPES.contains(&ty)
        })
        && convertible(&node).is_ok()
        && structural_errors(&node, &Path::default()).is_empty()
}

// ---------------------------------------------------------------------------------------------
// Reading the schema.

const OPENAPI_TYPES: &[&str] = &["array", "boolean", "integer", "number", "object", "string"];

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
struct Node<'a> {
    raw: Option<&'a Map<String, Value>>,
    items: Option<Items<'a>>,
    properties: Vec<(&'a str, Node<'a>)>,
    additional_properties: Option<SchemaOrBool<'a>>,
    all_of: Vec<Node<'a>>,
    any_of: Vec<Node<'a>>,
    one_of: Vec<Node<'a>>,
    not: Option<Box<Node<'a>>>,
    pattern_properties: Vec<(&'a str, Node<'a>)>,
    additional_items: Option<SchemaOrBool<'a>>,
    definitions: Vec<(&'a str, Node<'a>)>,
    dependencies: Vec<(&'a str, Option<Node<'a>>)>,
}

#[derive(Debug)]
enum Items<'a> {
    One(Box<Node<'a>>),
    Many(Vec<Node<'a>>),
}

#[derive(Debug)]
enum SchemaOrBool<'a> {
    Schema(Box<Node<'a>>),
    Bool(bool),
}

impl<'a> Node<'a> {
    /// A key's value; `null` counts as absent.
    fn get(&self, key: &str) -> Option<&'a Value> {
        self.raw.and_then(|m| m.get(key)).filter(|v| !v.is_null())
    }

    /// A string field, empty when absent.
    fn s(&self, key: &str) -> &'a str {
        self.get(key).and_then(Value::as_str).unwrap_or("")
    }

    /// An optional string field (present even when empty).
    fn opt_s(&self, key: &str) -> Option<&'a str> {
        self.get(key).and_then(Value::as_str)
    }

    /// A boolean field, false when absent.
    fn b(&self, key: &str) -> bool {
        self.get(key).and_then(Value::as_bool).unwrap_or(false)
    }

    /// A list of strings, empty when absent.
    fn strs(&self, key: &str) -> Vec<&'a str> {
        self.get(key)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    }

    fn ty(&self) -> &'a str {
        self.s("type")
    }

    fn preserve_unknown_fields(&self) -> bool {
        self.b("x-kubernetes-preserve-unknown-fields")
    }

    fn embedded(&self) -> bool {
        self.b("x-kubernetes-embedded-resource")
    }

    fn int_or_string(&self) -> bool {
        self.b("x-kubernetes-int-or-string")
    }

    fn property(&self, name: &str) -> Option<&Node<'a>> {
        self.properties
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v)
    }

    fn item_schema(&self) -> Option<&Node<'a>> {
        match &self.items {
            Some(Items::One(item)) => Some(item),
            _ => None,
        }
    }

    fn validations(&self) -> &'a [Value] {
        self.get("x-kubernetes-validations")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// Whether `pred` holds for this schema or any schema below it (upstream's `SchemaHas`).
    fn any(&self, pred: &dyn Fn(&Node<'a>) -> bool) -> bool {
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
fn parse<'a>(value: &'a Value, path: &Path, errors: &mut ErrorList) -> Node<'a> {
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

// ---------------------------------------------------------------------------------------------
// The status subresource's restriction of the root.

/// Upstream's `JSONSchemaProps` fields in declaration order, by JSON name, with whether they
/// are allowed at the root when the status subresource is enabled.
const ROOT_FIELDS: &[(&str, bool)] = &[
    ("id", false),
    ("$schema", false),
    ("$ref", false),
    ("description", true),
    ("type", true),
    ("format", true),
    ("title", true),
    ("default", false),
    ("maximum", true),
    ("exclusiveMaximum", true),
    ("minimum", true),
    ("exclusiveMinimum", true),
    ("maxLength", true),
    ("minLength", true),
    ("pattern", true),
    ("maxItems", true),
    ("minItems", true),
    ("uniqueItems", true),
    ("multipleOf", true),
    ("enum", false),
    ("maxProperties", false),
    ("minProperties", false),
    ("required", true),
    ("items", true),
    ("allOf", false),
    ("oneOf", false),
    ("anyOf", false),
    ("not", false),
    ("properties", true),
    ("additionalProperties", false),
    ("patternProperties", false),
    ("dependencies", false),
    ("additionalItems", false),
    ("definitions", false),
    ("externalDocs", true),
    ("example", true),
    ("nullable", false),
    ("x-kubernetes-preserve-unknown-fields", true),
    ("x-kubernetes-embedded-resource", false),
    ("x-kubernetes-int-or-string", false),
    ("x-kubernetes-list-map-keys", false),
    ("x-kubernetes-list-type", false),
    ("x-kubernetes-map-type", false),
    ("x-kubernetes-validations", true),
];

const ROOT_FIELDS_MESSAGE: &str = "only [Description Type Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum MaxLength MinLength Pattern MaxItems MinItems UniqueItems MultipleOf Required Items Properties ExternalDocs Example XPreserveUnknownFields XValidations] fields are allowed at the root of the schema if the status subresource is enabled";

/// Whether a value is what Go decodes to a zero field (absent, false, empty).
fn is_zero(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) | Some(Value::Bool(false)) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Object(o)) => o.is_empty(),
        Some(Value::Number(_)) => false,
        Some(Value::Bool(true)) => false,
    }
}

fn status_root(node: &Node<'_>, schema: &Value, path: &Path, errors: &mut ErrorList) {
    for &(name, allowed) in ROOT_FIELDS {
        let value = node.get(name);
        // Pointers and `default`/`example` are set even when their value is zero.
        let set = match name {
            "default"
            | "example"
            | "maximum"
            | "minimum"
            | "maxLength"
            | "minLength"
            | "maxItems"
            | "minItems"
            | "multipleOf"
            | "maxProperties"
            | "minProperties"
            | "not"
            | "additionalProperties"
            | "additionalItems"
            | "items"
            | "externalDocs"
            | "$ref"
            | "x-kubernetes-preserve-unknown-fields"
            | "x-kubernetes-list-type"
            | "x-kubernetes-map-type" => value.is_some(),
            _ => !is_zero(value),
        };
        if !set {
            continue;
        }
        if name == "type" {
            if node.ty() != "object" {
                errors.push(Error::invalid(
                    &path.child("type"),
                    node.ty(),
                    "only \"object\" is allowed as the type at the root of the schema if the status subresource is enabled",
                ));
                break;
            }
            continue;
        }
        if !allowed {
            errors.push(Error::invalid(path, schema.clone(), ROOT_FIELDS_MESSAGE));
            break;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Structural schemas (upstream's pkg/apiserver/schema).

/// Why upstream's `NewStructural` cannot read the schema at all, checked in its order.
fn convertible(node: &Node<'_>) -> Result<(), String> {
    unsupported_fields(node)?;
    convertible_value_validation(node)?;
    if node.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        return Err(
            "internal error: 'x-kubernetes-preserve-unknown-fields' must be true or undefined"
                .to_owned(),
        );
    }
    match &node.items {
        Some(Items::Many(list)) if !list.is_empty() => {
            return Err("OpenAPIV3Schema 'items' must be a schema, but is an array".to_owned());
        }
        Some(Items::One(item)) => convertible(item)?,
        _ => {}
    }
    for (_, property) in &node.properties {
        convertible(property)?;
    }
    if let Some(SchemaOrBool::Schema(values)) = &node.additional_properties {
        convertible(values)?;
    }
    Ok(())
}

fn convertible_value_validation(node: &Node<'_>) -> Result<(), String> {
    if let Some(not) = &node.not {
        convertible_nested(not)?;
    }
    for n in node.all_of.iter().chain(&node.any_of).chain(&node.one_of) {
        convertible_nested(n)?;
    }
    Ok(())
}

fn convertible_nested(node: &Node<'_>) -> Result<(), String> {
    unsupported_fields(node)?;
    convertible_value_validation(node)?;
    if node.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        return Err(
            "internal error: 'x-kubernetes-preserve-unknown-fields' must be true or undefined"
                .to_owned(),
        );
    }
    match &node.items {
        Some(Items::Many(list)) if !list.is_empty() => {
            return Err("OpenAPIV3Schema 'items' must be a schema, but is an array".to_owned());
        }
        Some(Items::One(item)) => convertible_nested(item)?,
        _ => {}
    }
    for (_, property) in &node.properties {
        convertible_nested(property)?;
    }
    if let Some(SchemaOrBool::Schema(values)) = &node.additional_properties {
        convertible_nested(values)?;
    }
    Ok(())
}

fn unsupported_fields(node: &Node<'_>) -> Result<(), String> {
    let checks: [(&str, bool); 7] = [
        ("id", !node.s("id").is_empty()),
        ("schema", !node.s("$schema").is_empty()),
        ("$ref", !node.s("$ref").is_empty()),
        ("patternProperties", !node.pattern_properties.is_empty()),
        ("dependencies", !node.dependencies.is_empty()),
        ("additionalItems", node.additional_items.is_some()),
        ("definitions", !node.definitions.is_empty()),
    ];
    match checks.iter().find(|(_, bad)| *bad) {
        Some((name, _)) => Err(format!("OpenAPIV3Schema '{name}' is not supported")),
        None => Ok(()),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Item,
    Field,
}

/// Upstream's `ValidateStructural`: invariants and completeness, sorted by text.
fn structural_errors(node: &Node<'_>, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    invariants(node, Level::Root, path, &mut errors);
    completeness(node, node, path, path, &mut errors);
    errors.0.sort_by_cached_key(ToString::to_string);
    errors
}

/// Whether a nested schema is exactly `{type: <ty>}` (Go's deep equality of the converted
/// value validation).
fn is_only_type(node: &Node<'_>, ty: &str) -> bool {
    let Some(raw) = node.raw else {
        return false;
    };
    node.ty() == ty
        && raw.iter().all(|(k, v)| {
            k == "type"
                || (k != "x-kubernetes-preserve-unknown-fields"
                    && matches!(v, Value::Null | Value::Bool(false))
                    || matches!(v, Value::String(s) if s.is_empty()))
        })
}

fn is_int_or_string_any_of(any_of: &[Node<'_>]) -> bool {
    any_of.len() == 2 && is_only_type(&any_of[0], "integer") && is_only_type(&any_of[1], "string")
}

fn invariants(s: &Node<'_>, level: Level, path: &Path, errors: &mut ErrorList) {
    if s.ty() == "array" && s.item_schema().is_none() {
        errors.push(Error::required(&path.child("items"), "must be specified"));
    }
    if let Some(item) = s.item_schema() {
        invariants(item, Level::Item, &path.child("items"), errors);
    }
    for (name, property) in &s.properties {
        invariants(
            property,
            Level::Field,
            &path.child("properties").key(name),
            errors,
        );
    }
    if let Some(additional) = &s.additional_properties {
        if level == Level::Root {
            errors.push(Error::forbidden(
                &path.child("additionalProperties"),
                "must not be used at the root",
            ));
        }
        if let SchemaOrBool::Schema(values) = additional {
            invariants(
                values,
                Level::Field,
                &path.child("additionalProperties"),
                errors,
            );
        }
    }

    if s.int_or_string() && s.preserve_unknown_fields() {
        errors.push(Error::invalid(
            &path.child("x-kubernetes-preserve-unknown-fields"),
            true,
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if s.int_or_string() && s.embedded() {
        errors.push(Error::invalid(
            &path.child("x-kubernetes-embedded-resource"),
            true,
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }

    let skip_any_of = is_int_or_string_any_of(&s.any_of);
    let skip_first_all_of_any_of = s
        .all_of
        .first()
        .is_some_and(|first| is_int_or_string_any_of(&first.any_of));
    value_validation(
        s,
        skip_any_of,
        skip_first_all_of_any_of,
        level,
        path,
        errors,
    );

    let check_metadata = level == Level::Root || s.embedded();
    if s.embedded() && s.ty() != "object" {
        let message = "must be object if x-kubernetes-embedded-resource is true";
        if s.ty().is_empty() {
            errors.push(Error::required(&path.child("type"), message));
        } else {
            errors.push(Error::invalid(&path.child("type"), s.ty(), message));
        }
    } else if s.ty().is_empty() && !s.int_or_string() && !s.preserve_unknown_fields() {
        let message = match level {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        errors.push(Error::required(&path.child("type"), message));
    }
    if s.embedded() && s.additional_properties.is_some() {
        errors.push(Error::forbidden(
            &path.child("additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if level == Level::Root && !s.ty().is_empty() && s.ty() != "object" {
        errors.push(Error::invalid(
            &path.child("type"),
            s.ty(),
            "must be object at the root",
        ));
    }
    if check_metadata {
        for name in ["kind", "apiVersion"] {
            if let Some(property) = s.property(name)
                && property.ty() != "string"
            {
                errors.push(Error::invalid(
                    &path.child("properties").key(name).child("type"),
                    property.ty(),
                    "must be string",
                ));
            }
        }
    }
    if let Some(metadata) = s.property("metadata") {
        metadata_invariants(
            metadata,
            check_metadata,
            level,
            &path.child("properties").key("metadata"),
            errors,
        );
    }
    if s.embedded() && !s.preserve_unknown_fields() && s.properties.is_empty() {
        errors.push(Error::required(
            &path.child("properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

/// The keys of a metadata schema at the root that upstream's structural model keeps besides
/// `type`, `default` and `properties` (the rest is dropped on conversion or rejected before).
const METADATA_KEPT: &[&str] = &[
    "description",
    "title",
    "nullable",
    "additionalProperties",
    "items",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-list-type",
    "x-kubernetes-map-type",
    "x-kubernetes-validations",
    "format",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "multipleOf",
    "enum",
    "maxProperties",
    "minProperties",
    "required",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
];

fn metadata_invariants(
    s: &Node<'_>,
    check_metadata: bool,
    level: Level,
    path: &Path,
    errors: &mut ErrorList,
) {
    if check_metadata && s.ty() != "object" {
        errors.push(Error::invalid(
            &path.child("type"),
            s.ty(),
            "must be object",
        ));
    }
    if level == Level::Root {
        let names: BTreeSet<&str> = s.properties.iter().map(|(k, _)| *k).collect();
        let only_names = names.iter().all(|k| *k == "name" || *k == "generateName");
        // Fields Go decodes to pointers, or keeps as empty but set lists, count when present at
        // all; the others when they are not zero.
        let pointer_like = |k: &str| {
            matches!(
                k,
                "additionalProperties"
                    | "items"
                    | "not"
                    | "maximum"
                    | "minimum"
                    | "maxLength"
                    | "minLength"
                    | "maxItems"
                    | "minItems"
                    | "multipleOf"
                    | "maxProperties"
                    | "minProperties"
                    | "x-kubernetes-list-type"
                    | "x-kubernetes-map-type"
                    | "required"
                    | "x-kubernetes-list-map-keys"
                    | "x-kubernetes-validations"
            )
        };
        let other = METADATA_KEPT.iter().any(|k| {
            let value = s.get(k);
            if pointer_like(k) {
                value.is_some()
            } else {
                !is_zero(value)
            }
        });
        if !only_names || other {
            errors.push(Error::forbidden(
                path,
                "must not specify anything other than name and generateName, but metadata is implicitly specified",
            ));
        }
    }
}

fn value_validation(
    v: &Node<'_>,
    skip_any_of: bool,
    skip_first_all_of_any_of: bool,
    level: Level,
    path: &Path,
    errors: &mut ErrorList,
) {
    if !skip_any_of {
        for (i, n) in v.any_of.iter().enumerate() {
            nested(
                n,
                false,
                false,
                level,
                &path.child("anyOf").index(i),
                errors,
            );
        }
    }
    for (i, n) in v.all_of.iter().enumerate() {
        let skip = skip_first_all_of_any_of && i == 0;
        nested(n, skip, false, level, &path.child("allOf").index(i), errors);
    }
    for (i, n) in v.one_of.iter().enumerate() {
        nested(
            n,
            false,
            false,
            level,
            &path.child("oneOf").index(i),
            errors,
        );
    }
    if let Some(not) = &v.not {
        nested(not, false, false, level, &path.child("not"), errors);
    }
    let pattern = v.s("pattern");
    if !pattern.is_empty()
        && let Err(e) = regex::Regex::new(pattern)
    {
        errors.push(Error::invalid(
            &path.child("pattern"),
            pattern,
            format!(
                "must be a valid regular expression, but isn't: error parsing regexp: {}",
                regex_error(&e)
            ),
        ));
    }
}

/// The one-line reason of a regular expression error.
fn regex_error(error: &regex::Error) -> String {
    match error {
        regex::Error::Syntax(text) => text
            .lines()
            .rev()
            .find(|l| l.starts_with("error:"))
            .map(|l| l.trim_start_matches("error:").trim().to_owned())
            .unwrap_or_else(|| text.clone()),
        other => other.to_string(),
    }
}

fn nested(
    v: &Node<'_>,
    skip_any_of: bool,
    skip_all_of_any_of: bool,
    level: Level,
    path: &Path,
    errors: &mut ErrorList,
) {
    value_validation(v, skip_any_of, skip_all_of_any_of, level, path, errors);
    if let Some(item) = v.item_schema() {
        nested(item, false, false, level, &path.child("items"), errors);
    }
    for (name, property) in &v.properties {
        nested(
            property,
            false,
            false,
            Level::Field,
            &path.child("properties").key(name),
            errors,
        );
    }
    if !v.ty().is_empty() {
        errors.push(Error::forbidden(
            &path.child("type"),
            "must be empty to be structural",
        ));
    }
    match &v.additional_properties {
        Some(SchemaOrBool::Schema(_)) | Some(SchemaOrBool::Bool(true)) => {
            errors.push(Error::forbidden(
                &path.child("additionalProperties"),
                "must be undefined to be structural",
            ));
        }
        _ => {}
    }
    if v.get("default").is_some() {
        errors.push(Error::forbidden(
            &path.child("default"),
            "must be undefined to be structural",
        ));
    }
    for (key, what) in [("title", "empty"), ("description", "empty")] {
        if !v.s(key).is_empty() {
            errors.push(Error::forbidden(
                &path.child(key),
                format!("must be {what} to be structural"),
            ));
        }
    }
    if v.b("nullable") {
        errors.push(Error::forbidden(
            &path.child("nullable"),
            "must be false to be structural",
        ));
    }
    for key in [
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-embedded-resource",
        "x-kubernetes-int-or-string",
    ] {
        if v.b(key) {
            errors.push(Error::forbidden(
                &path.child(key),
                "must be false to be structural",
            ));
        }
    }
    if !v.strs("x-kubernetes-list-map-keys").is_empty() {
        errors.push(Error::forbidden(
            &path.child("x-kubernetes-list-map-keys"),
            "must be empty to be structural",
        ));
    }
    for key in ["x-kubernetes-list-type", "x-kubernetes-map-type"] {
        if v.opt_s(key).is_some() {
            errors.push(Error::forbidden(
                &path.child(key),
                "must be undefined to be structural",
            ));
        }
    }
    if !v.validations().is_empty() {
        errors.push(Error::forbidden(
            &path.child("x-kubernetes-validations"),
            "must be empty to be structural",
        ));
    }
    if v.property("metadata").is_some() {
        errors.push(Error::forbidden(
            &path.child("properties").key("metadata"),
            "must not be specified in a nested context",
        ));
    }
}

/// Every field a value validation names must be specified by the structure too (upstream
/// checks the value validations of the root schema).
fn completeness(v: &Node<'_>, s: &Node<'_>, s_path: &Path, v_path: &Path, errors: &mut ErrorList) {
    if let Some(not) = &v.not {
        nested_completeness(not, Some(s), s_path, &v_path.child("not"), errors);
    }
    for (i, n) in v.all_of.iter().enumerate() {
        nested_completeness(n, Some(s), s_path, &v_path.child("allOf").index(i), errors);
    }
    for (i, n) in v.any_of.iter().enumerate() {
        nested_completeness(n, Some(s), s_path, &v_path.child("anyOf").index(i), errors);
    }
    for (i, n) in v.one_of.iter().enumerate() {
        nested_completeness(n, Some(s), s_path, &v_path.child("oneOf").index(i), errors);
    }
}

fn nested_completeness(
    v: &Node<'_>,
    s: Option<&Node<'_>>,
    s_path: &Path,
    v_path: &Path,
    errors: &mut ErrorList,
) {
    let Some(s) = s else {
        errors.push(Error::required(
            s_path,
            format!("because it is defined in {v_path}"),
        ));
        return;
    };
    completeness(v, s, s_path, v_path, errors);
    if let Some(item) = v.item_schema() {
        nested_completeness(
            item,
            s.item_schema(),
            &s_path.child("items"),
            &v_path.child("items"),
            errors,
        );
    }
    for (name, property) in &v.properties {
        let v_at = v_path.child("properties").key(name);
        let s_at = s_path.child("properties").key(name);
        match s.property(name) {
            None => errors.push(Error::required(
                &s_at,
                format!("because it is defined in {v_at}"),
            )),
            Some(sp) => nested_completeness(property, Some(sp), &s_at, &v_at, errors),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The OpenAPI rules (upstream's ValidateCustomResourceDefinitionOpenAPISchema).

const META_FIELDS: &[&str] = &["metadata", "kind", "apiVersion"];

const VALIDATION_REASONS: &[&str] = &[
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

/// Upstream's `specStandardValidatorV3`: what is allowed where the walk is.
#[derive(Clone)]
struct Ssv<'o> {
    /// Why `default` is forbidden here, when it is.
    forbidden_defaults: Option<String>,
    /// Inside the `apiVersion`, `kind` or `metadata` of a resource (the root or embedded).
    inside_resource_meta: bool,
    options: &'o Options,
}

impl Ssv<'_> {
    fn with_forbidden_defaults(&self, reason: String) -> Self {
        Self {
            forbidden_defaults: Some(reason),
            ..self.clone()
        }
    }

    fn validate(&self, s: &Node<'_>, path: &Path, errors: &mut ErrorList) {
        let ty = s.ty();
        if self.options.require_valid_property_type
            && !ty.is_empty()
            && !OPENAPI_TYPES.contains(&ty)
        {
            errors.push(Error::not_supported(&path.child("type"), ty, OPENAPI_TYPES));
        }
        if s.get("default").is_some()
            && let Some(reason) = &self.forbidden_defaults
        {
            errors.push(Error::forbidden(
                &path.child("default"),
                format!("must not be set {reason}"),
            ));
        }
        if !s.s("id").is_empty() {
            errors.push(Error::forbidden(&path.child("id"), "id is not supported"));
        }
        if s.additional_items.is_some() {
            errors.push(Error::forbidden(
                &path.child("additionalItems"),
                "additionalItems is not supported",
            ));
        }
        if !s.pattern_properties.is_empty() {
            errors.push(Error::forbidden(
                &path.child("patternProperties"),
                "patternProperties is not supported",
            ));
        }
        if !s.definitions.is_empty() {
            errors.push(Error::forbidden(
                &path.child("definitions"),
                "definitions is not supported",
            ));
        }
        if s.get("dependencies").is_some() {
            errors.push(Error::forbidden(
                &path.child("dependencies"),
                "dependencies is not supported",
            ));
        }
        if s.get("$ref").is_some() {
            errors.push(Error::forbidden(
                &path.child("$ref"),
                "$ref is not supported",
            ));
        }
        if ty == "null" {
            errors.push(Error::forbidden(
                &path.child("type"),
                "type cannot be set to null, use nullable as an alternative",
            ));
        }
        if matches!(&s.items, Some(Items::Many(list)) if !list.is_empty()) {
            errors.push(Error::forbidden(
                &path.child("items"),
                "items must be a schema object and not an array",
            ));
        }
        if self.inside_resource_meta && s.embedded() {
            errors.push(Error::forbidden(
                &path.child("x-kubernetes-embedded-resource"),
                "must not be used inside of resource meta",
            ));
        }
    }
}

fn openapi_errors(s: &Node<'_>, path: &Path, ssv: &Ssv<'_>, is_root: bool, errors: &mut ErrorList) {
    ssv.validate(s, path, errors);

    if s.b("uniqueItems") {
        errors.push(Error::forbidden(
            &path.child("uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }

    if let Some(additional) = &s.additional_properties {
        let allows_or_schema = match additional {
            SchemaOrBool::Bool(allows) => !*allows,
            SchemaOrBool::Schema(_) => true,
        };
        if !s.properties.is_empty() && allows_or_schema {
            errors.push(Error::forbidden(
                &path.child("additionalProperties"),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        if let SchemaOrBool::Schema(values) = additional {
            let sub = if ssv.inside_resource_meta {
                ssv.with_forbidden_defaults(
                    "inside additionalProperties applying to object metadata".to_owned(),
                )
            } else {
                ssv.clone()
            };
            openapi_errors(
                values,
                &path.child("additionalProperties"),
                &sub,
                false,
                errors,
            );
        }
    }

    for (name, property) in &s.properties {
        let mut sub = ssv.clone();
        if (is_root || s.embedded()) && META_FIELDS.contains(name) {
            sub.inside_resource_meta = true;
            if is_root {
                sub = sub.with_forbidden_defaults(format!("in top-level {name}"));
            }
        }
        openapi_errors(
            property,
            &path.child("properties").key(name),
            &sub,
            false,
            errors,
        );
    }

    if let Some(not) = &s.not {
        openapi_errors(not, &path.child("not"), ssv, false, errors);
    }
    for (i, n) in s.all_of.iter().enumerate() {
        openapi_errors(n, &path.child("allOf").index(i), ssv, false, errors);
    }
    for (i, n) in s.one_of.iter().enumerate() {
        openapi_errors(n, &path.child("oneOf").index(i), ssv, false, errors);
    }
    for (i, n) in s.any_of.iter().enumerate() {
        openapi_errors(n, &path.child("anyOf").index(i), ssv, false, errors);
    }
    for (name, n) in &s.definitions {
        openapi_errors(n, &path.child("definitions").key(name), ssv, false, errors);
    }
    match &s.items {
        Some(Items::One(item)) => openapi_errors(item, &path.child("items"), ssv, false, errors),
        Some(Items::Many(list)) => {
            for (i, item) in list.iter().enumerate() {
                openapi_errors(item, &path.child("items").index(i), ssv, false, errors);
            }
        }
        None => {}
    }
    for (name, dep) in &s.dependencies {
        if let Some(dep) = dep {
            openapi_errors(
                dep,
                &path.child("dependencies").key(name),
                ssv,
                false,
                errors,
            );
        }
    }

    extension_errors(s, path, ssv.options, errors);
    rule_errors(s, path, errors);
}

fn extension_errors(s: &Node<'_>, path: &Path, options: &Options, errors: &mut ErrorList) {
    let ty = s.ty();
    if s.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        errors.push(Error::invalid(
            &path.child("x-kubernetes-preserve-unknown-fields"),
            false,
            "must be true or undefined",
        ));
    }

    let map_type = s.opt_s("x-kubernetes-map-type");
    if map_type.is_some() && ty != "object" {
        let message = "must be object if x-kubernetes-map-type is specified";
        if ty.is_empty() {
            errors.push(Error::required(&path.child("type"), message));
        } else {
            errors.push(Error::invalid(&path.child("type"), ty, message));
        }
    }
    if let Some(map_type) = map_type
        && map_type != "atomic"
        && map_type != "granular"
    {
        errors.push(Error::not_supported(
            &path.child("x-kubernetes-map-type"),
            map_type,
            &["atomic", "granular"],
        ));
    }

    let list_type = s.opt_s("x-kubernetes-list-type");
    if list_type.is_some() && ty != "array" {
        let message = "must be array if x-kubernetes-list-type is specified";
        if ty.is_empty() {
            errors.push(Error::required(&path.child("type"), message));
        } else {
            errors.push(Error::invalid(&path.child("type"), ty, message));
        }
    } else if options.require_atomic_set_type
        && list_type == Some("set")
        && let Some(item) = s.item_schema()
    {
        let message = "must be atomic as item of a list with x-kubernetes-list-type=set";
        let item_list_type = item.opt_s("x-kubernetes-list-type");
        match item.ty() {
            "array" if item_list_type.is_some_and(|t| t != "atomic") => {
                errors.push(Error::invalid(
                    &path.child("items").child("x-kubernetes-list-type"),
                    item_list_type.unwrap_or_default(),
                    message,
                ));
            }
            "object" if item.opt_s("x-kubernetes-map-type") != Some("atomic") => {
                // Upstream shows the item's list type here, which is normally unset.
                errors.push(Error::invalid(
                    &path.child("items").child("x-kubernetes-map-type"),
                    item_list_type.map(Value::from).unwrap_or(Value::Null),
                    message,
                ));
            }
            _ => {}
        }
    }
    if let Some(list_type) = list_type
        && !matches!(list_type, "atomic" | "set" | "map")
    {
        errors.push(Error::not_supported(
            &path.child("x-kubernetes-list-type"),
            list_type,
            &["atomic", "set", "map"],
        ));
    }

    let keys = s.strs("x-kubernetes-list-map-keys");
    let keys_value = || Value::from(keys.clone());
    if !keys.is_empty() {
        let message = "must be map if x-kubernetes-list-map-keys is non-empty";
        match list_type {
            None => errors.push(Error::required(
                &path.child("x-kubernetes-list-type"),
                message,
            )),
            Some("map") => {}
            Some(other) => {
                errors.push(Error::invalid(
                    &path.child("x-kubernetes-list-type"),
                    other,
                    message,
                ));
            }
        }
    }
    if list_type == Some("map") {
        if keys.is_empty() {
            errors.push(Error::required(
                &path.child("x-kubernetes-list-map-keys"),
                "must not be empty if x-kubernetes-list-type is map",
            ));
        }
        match &s.items {
            None => errors.push(Error::required(
                &path.child("items"),
                "must have a schema if x-kubernetes-list-type is map",
            )),
            Some(Items::Many(_)) => errors.push(Error::invalid(
                &path.child("items"),
                s.get("items").cloned().unwrap_or(Value::Null),
                "must only have a single schema if x-kubernetes-list-type is map",
            )),
            Some(Items::One(item)) if item.ty() != "object" => errors.push(Error::invalid(
                &path.child("items").child("type"),
                item.ty(),
                "must be object if parent array's x-kubernetes-list-type is map",
            )),
            Some(Items::One(item)) => {
                let mut seen = BTreeSet::new();
                for key in &keys {
                    match item.property(key) {
                        Some(p) if p.ty() == "array" || p.ty() == "object" => {
                            // Upstream shows the item's type here.
                            errors.push(Error::invalid(
                                &path.child("items").child("properties").key(key).child("type"),
                                item.ty(),
                                "must be a scalar type if parent array's x-kubernetes-list-type is map",
                            ));
                        }
                        Some(_) => {}
                        None => errors.push(Error::invalid(
                            &path.child("x-kubernetes-list-map-keys"),
                            keys_value(),
                            "entries must all be names of item properties",
                        )),
                    }
                    if !seen.insert(*key) {
                        errors.push(Error::invalid(
                            &path.child("x-kubernetes-list-map-keys"),
                            keys_value(),
                            "must not contain duplicate entries",
                        ));
                    }
                }
            }
        }
    }

    if options.require_map_list_keys_map_set_validation {
        errors.extend(map_list_keys_map_set(s, path));
    }
}

/// Map and set items are not nullable; map keys are required or defaulted, and not nullable.
fn map_list_keys_map_set(s: &Node<'_>, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    let Some(item) = s.item_schema() else {
        return errors;
    };
    let Some(list_type) = s.opt_s("x-kubernetes-list-type") else {
        return errors;
    };
    if list_type != "set" && list_type != "map" {
        return errors;
    }
    if item.b("nullable") {
        errors.push(Error::forbidden(
            &path.child("items").child("nullable"),
            format!("cannot be nullable when x-kubernetes-list-type is {list_type}"),
        ));
    }
    if list_type == "map" {
        let required = item.strs("required");
        for key in s.strs("x-kubernetes-list-map-keys") {
            let Some(property) = item.property(key) else {
                continue;
            };
            let at = path.child("items").child("properties").key(key);
            if !required.contains(&key) && property.get("default").is_none() {
                errors.push(Error::required(
                    &at.child("default"),
                    "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
                ));
            }
            if property.b("nullable") {
                errors.push(Error::forbidden(
                    &at.child("nullable"),
                    "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
                ));
            }
        }
    }
    errors
}

fn has_non_atomic_set_items(s: &Node<'_>) -> bool {
    if s.opt_s("x-kubernetes-list-type") != Some("set") {
        return false;
    }
    match s.item_schema() {
        Some(item) if item.ty() == "array" => item
            .opt_s("x-kubernetes-list-type")
            .is_some_and(|t| t != "atomic"),
        Some(item) if item.ty() == "object" => {
            item.opt_s("x-kubernetes-map-type") != Some("atomic")
        }
        _ => false,
    }
}

fn has_newlines(s: &str) -> bool {
    s.contains(['\n', '\r'])
}

/// The static checks of `x-kubernetes-validations` entries (compiling the rules is CEL's).
fn rule_errors(s: &Node<'_>, path: &Path, errors: &mut ErrorList) {
    for (i, rule) in s.validations().iter().enumerate() {
        let at = path.child("x-kubernetes-validations").index(i);
        let text = |k: &str| rule.get(k).and_then(Value::as_str).unwrap_or("");
        let (expression, message) = (text("rule"), text("message"));
        let (trimmed_rule, trimmed_message) = (expression.trim(), message.trim());
        if trimmed_rule.is_empty() {
            errors.push(Error::required(&at.child("rule"), "rule is not specified"));
        } else if !message.is_empty() && trimmed_message.is_empty() {
            errors.push(Error::invalid(
                &at.child("message"),
                message,
                "must be non-empty if specified",
            ));
        } else if has_newlines(trimmed_message) {
            errors.push(Error::invalid(
                &at.child("message"),
                message,
                "must not contain line breaks",
            ));
        } else if has_newlines(trimmed_rule) && trimmed_message.is_empty() {
            errors.push(Error::required(
                &at.child("message"),
                "message must be specified if rule contains line breaks",
            ));
        }
        let message_expression = text("messageExpression");
        if !message_expression.is_empty() && message_expression.trim().is_empty() {
            errors.push(Error::required(
                &at.child("messageExpression"),
                "messageExpression must be non-empty if specified",
            ));
        }
        if let Some(reason) = rule.get("reason").and_then(Value::as_str)
            && !VALIDATION_REASONS.contains(&reason)
        {
            errors.push(Error::not_supported(
                &at.child("reason"),
                reason,
                VALIDATION_REASONS,
            ));
        }
        let field_path = text("fieldPath");
        if !field_path.is_empty() && field_path.trim().is_empty() {
            errors.push(Error::invalid(
                &at.child("fieldPath"),
                field_path,
                "must be non-empty if specified",
            ));
        }
        if has_newlines(field_path) {
            errors.push(Error::invalid(
                &at.child("fieldPath"),
                field_path,
                "must not contain line breaks",
            ));
        }
        if !field_path.is_empty() && !field_path_valid(s, field_path) {
            errors.push(Error::invalid(
                &at.child("fieldPath"),
                field_path,
                "must be a valid path",
            ));
        }
    }
}

/// Splits a rule's `fieldPath` into field names: `.name` and `['quoted name']` steps only
/// (upstream's `ValidFieldPath` has no list indexes).
fn field_path_steps(path: &str) -> Option<Vec<String>> {
    let mut steps = Vec::new();
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[', ']']).unwrap_or(after.len());
            if end == 0 {
                return None;
            }
            steps.push(after[..end].to_owned());
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix("['") {
            let mut name = String::new();
            let mut chars = after.char_indices();
            let close = loop {
                match chars.next()? {
                    (_, '\\') => match chars.next()? {
                        (_, c @ ('\'' | '\\')) => name.push(c),
                        (_, 'n') => name.push('\n'),
                        (_, 't') => name.push('\t'),
                        (_, 'r') => name.push('\r'),
                        _ => return None,
                    },
                    (i, '\'') => break i,
                    (_, c) => name.push(c),
                }
            };
            rest = after[close + 1..].strip_prefix(']')?;
            steps.push(name);
        } else {
            return None;
        }
    }
    Some(steps)
}

/// Whether a rule's `fieldPath` names a field the schema specifies (upstream's
/// `ValidFieldPath`): each step is a property where the schema has properties, else any key
/// of a map. Upstream only checks when the schema converts to a structural one.
fn field_path_valid(s: &Node<'_>, path: &str) -> bool {
    if convertible(s).is_err() {
        return true;
    }
    let Some(steps) = field_path_steps(path) else {
        return false;
    };
    let mut current = s;
    for step in &steps {
        let next = if !current.properties.is_empty() {
            current.property(step)
        } else {
            match &current.additional_properties {
                Some(SchemaOrBool::Schema(values)) => Some(&**values),
                _ => None,
            }
        };
        match next {
            Some(n) => current = n,
            None => return false,
        }
    }
    true
}

// ---------------------------------------------------------------------------------------------
// Defaults.

/// A step from a resource to a default's position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// The property of that name.
    Field(String),
    /// Any item of a list.
    Item,
}

/// A `default` in the schema, with what upstream's check of it needs.
///
/// Upstream (`ValidateDefaults`, run only when the schema is otherwise structural) checks each
/// default with the sub-schema it is set on:
/// - outside object metadata ([`DefaultSite::in_resource_meta`] false): the default must
///   survive pruning by `schema` unchanged (treating it as an embedded resource when `schema`
///   has `x-kubernetes-embedded-resource`), else `Invalid value: <default>: must not have
///   unknown fields` at [`DefaultSite::path`]; then its metadata (if it is an embedded
///   resource) must be valid; then it must validate against `schema`, errors reported below
///   [`DefaultSite::path`];
/// - inside the `apiVersion`, `kind` or `metadata` of the root or an embedded resource: the
///   default is placed at [`DefaultSite::location`] in an otherwise empty object of the
///   enclosing resource (`apiVersion: validation/v1`, `kind: Validation`), and that object's
///   metadata must be valid (`Invalid value: <default>: must result in valid metadata: ...`),
///   then the default must validate against `schema`.
#[derive(Clone, Debug, PartialEq)]
pub struct DefaultSite {
    /// The path of the `default` field, e.g.
    /// `spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[replicas].default`.
    pub path: Path,
    /// The default value.
    pub value: Value,
    /// The schema the default is set on.
    pub schema: Value,
    /// Whether the default is inside the `apiVersion`, `kind` or `metadata` of a resource.
    pub in_resource_meta: bool,
    /// The schema of the enclosing resource (the root, or the nearest embedded resource).
    pub resource_schema: Value,
    /// Where the default sits in that resource.
    pub location: Vec<Location>,
}

/// Every `default` in `schema` (at `path`, as for [`validate_schema`]) that upstream checks:
/// those on the structure (properties and items, not value validations or
/// `additionalProperties`, where they are forbidden or not checked), in a stable order.
pub fn defaults(schema: &Value, path: &Path) -> Vec<DefaultSite> {
    let mut out = Vec::new();
    collect_defaults(schema, path, None, Vec::new(), false, &mut out);
    out
}

/// Walks `s`; `resource` is the enclosing resource's schema (`None` at the root, which is
/// always treated as a resource).
fn collect_defaults<'a>(
    s: &'a Value,
    path: &Path,
    resource: Option<&'a Value>,
    location: Vec<Location>,
    in_meta: bool,
    out: &mut Vec<DefaultSite>,
) {
    let Some(map) = s.as_object() else {
        return;
    };
    let embedded = map.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true));
    let (resource, location, in_meta, is_resource) = match resource {
        Some(r) if !embedded => (r, location, in_meta, false),
        _ => (s, Vec::new(), false, true),
    };
    if let Some(default) = map.get("default").filter(|v| !v.is_null()) {
        out.push(DefaultSite {
            path: path.child("default"),
            value: default.clone(),
            schema: s.clone(),
            in_resource_meta: in_meta,
            resource_schema: resource.clone(),
            location: location.clone(),
        });
    }
    if let Some(item) = map.get("items").filter(|v| v.is_object()) {
        let mut at = location.clone();
        at.push(Location::Item);
        collect_defaults(item, &path.child("items"), Some(resource), at, in_meta, out);
    }
    if let Some(properties) = map.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            let sub_meta = in_meta || (is_resource && META_FIELDS.contains(&name.as_str()));
            let mut at = location.clone();
            at.push(Location::Field(name.clone()));
            let sub_path = path.child("properties").key(name);
            collect_defaults(property, &sub_path, Some(resource), at, sub_meta, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const P: &str = "spec.versions[0].schema.openAPIV3Schema";

    fn path() -> Path {
        Path::new("spec")
            .child("versions")
            .index(0)
            .child("schema")
            .child("openAPIV3Schema")
    }

    fn errors_with(schema: Value, options: &Options) -> Vec<String> {
        validate_schema_with(&schema, &path(), options)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn errors(schema: Value) -> Vec<String> {
        errors_with(schema, &Options::default())
    }

    /// A root object with one property `name` of schema `property`.
    fn with_field(name: &str, property: Value) -> Value {
        json!({"type": "object", "properties": {name: property}})
    }

    fn expect(schema: Value, expected: &[&str]) {
        let expected: Vec<String> = expected.iter().map(|e| e.replace("$P", P)).collect();
        assert_eq!(errors(schema), expected);
    }

    #[test]
    fn a_rich_structural_schema_is_accepted() {
        let schema = json!({
            "type": "object",
            "description": "A CronTab.",
            "x-kubernetes-validations": [{"rule": "self.spec.replicas >= 0", "message": "no negative replicas"}],
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {
                    "type": "object",
                    "properties": {"name": {"type": "string", "maxLength": 20}},
                },
                "spec": {
                    "type": "object",
                    "required": ["cronSpec"],
                    "anyOf": [{"required": ["image"]}, {"properties": {"replicas": {"minimum": 1}}}],
                    "properties": {
                        "cronSpec": {"type": "string", "pattern": "^(\\d+|\\*)(/\\d+)?(\\s+(\\d+|\\*)(/\\d+)?){4}$"},
                        "image": {"type": "string", "format": "hostname"},
                        "replicas": {"type": "integer", "default": 1, "minimum": 0, "nullable": true},
                        "size": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                        "other": {"x-kubernetes-int-or-string": true},
                        "ports": {
                            "type": "array",
                            "x-kubernetes-list-type": "map",
                            "x-kubernetes-list-map-keys": ["name", "protocol"],
                            "items": {
                                "type": "object",
                                "required": ["name"],
                                "properties": {
                                    "name": {"type": "string"},
                                    "protocol": {"type": "string", "default": "TCP"},
                                },
                            },
                        },
                        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}, "x-kubernetes-map-type": "atomic"},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "loose": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": true},
                        "template": {
                            "type": "object",
                            "x-kubernetes-embedded-resource": true,
                            "x-kubernetes-preserve-unknown-fields": true,
                            "properties": {
                                "metadata": {"type": "object", "properties": {"labels": {"type": "object", "additionalProperties": {"type": "string"}}}},
                            },
                        },
                    },
                },
                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            },
        });
        assert_eq!(errors(schema.clone()), Vec::<String>::new());
        assert!(is_structural(&schema));
    }

    #[test]
    fn a_field_without_type_is_not_structural() {
        expect(
            with_field("spec", json!({"properties": {"a": {"type": "string"}}})),
            &[
                "$P.properties[spec].type: Required value: must not be empty for specified object fields",
            ],
        );
        assert!(!is_structural(&with_field("spec", json!({}))));
    }

    #[test]
    fn the_root_needs_a_type() {
        expect(
            json!({"properties": {"a": {"type": "string"}}}),
            &["$P.type: Required value: must not be empty at the root"],
        );
    }

    #[test]
    fn array_items_need_a_type() {
        expect(
            with_field("list", json!({"type": "array", "items": {}})),
            &[
                "$P.properties[list].items.type: Required value: must not be empty for specified array items",
            ],
        );
    }

    #[test]
    fn arrays_need_items() {
        expect(
            with_field("list", json!({"type": "array"})),
            &["$P.properties[list].items: Required value: must be specified"],
        );
        expect(
            with_field("list", json!({"type": "array", "items": []})),
            &["$P.properties[list].items: Required value: must be specified"],
        );
    }

    #[test]
    fn the_root_is_an_object() {
        expect(
            json!({"type": "string"}),
            &["$P.type: Invalid value: \"string\": must be object at the root"],
        );
    }

    #[test]
    fn additional_properties_are_forbidden_at_the_root() {
        expect(
            json!({"type": "object", "additionalProperties": {"type": "string"}}),
            &["$P.additionalProperties: Forbidden: must not be used at the root"],
        );
    }

    #[test]
    fn properties_and_additional_properties_exclude_each_other() {
        expect(
            with_field(
                "spec",
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}}),
            ),
            &[
                "$P.properties[spec].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive",
            ],
        );
        expect(
            with_field(
                "spec",
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": false}),
            ),
            &[
                "$P.properties[spec].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive",
            ],
        );
    }

    #[test]
    fn unique_items_is_forbidden() {
        expect(
            with_field(
                "l",
                json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true}),
            ),
            &[
                "$P.properties[l].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
            ],
        );
    }

    #[test]
    fn unsupported_json_schema_keywords_are_forbidden() {
        expect(
            with_field("spec", json!({"type": "object", "$ref": "#/definitions/x"})),
            &["$P.properties[spec].$ref: Forbidden: $ref is not supported"],
        );
        expect(
            with_field(
                "spec",
                json!({"type": "object", "definitions": {"x": {"type": "string"}}}),
            ),
            &["$P.properties[spec].definitions: Forbidden: definitions is not supported"],
        );
        expect(
            with_field(
                "spec",
                json!({"type": "object", "patternProperties": {"^a": {"type": "string"}}}),
            ),
            &[
                "$P.properties[spec].patternProperties: Forbidden: patternProperties is not supported",
            ],
        );
        expect(
            with_field(
                "spec",
                json!({"type": "object", "dependencies": {"a": ["b"]}}),
            ),
            &["$P.properties[spec].dependencies: Forbidden: dependencies is not supported"],
        );
        expect(
            with_field(
                "l",
                json!({"type": "array", "items": {"type": "string"}, "additionalItems": false}),
            ),
            &["$P.properties[l].additionalItems: Forbidden: additionalItems is not supported"],
        );
        expect(
            with_field("spec", json!({"type": "object", "id": "x"})),
            &["$P.properties[spec].id: Forbidden: id is not supported"],
        );
    }

    #[test]
    fn a_schema_keyword_alone_is_reported_on_the_schema() {
        expect(
            json!({"type": "object", "$schema": "http://json-schema.org/draft-04/schema#"}),
            &["$P: Invalid value: \"\": OpenAPIV3Schema 'schema' is not supported"],
        );
    }

    #[test]
    fn items_cannot_be_a_list() {
        expect(
            with_field("l", json!({"type": "array", "items": [{"type": "string"}]})),
            &["$P.properties[l].items: Forbidden: items must be a schema object and not an array"],
        );
    }

    #[test]
    fn types_are_openapi_types() {
        expect(
            with_field("a", json!({"type": "null"})),
            &[
                "$P.properties[a].type: Unsupported value: \"null\": supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\"",
                "$P.properties[a].type: Forbidden: type cannot be set to null, use nullable as an alternative",
            ],
        );
        expect(
            with_field("a", json!({"type": "int"})),
            &[
                "$P.properties[a].type: Unsupported value: \"int\": supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\"",
            ],
        );
    }

    #[test]
    fn an_update_does_not_tighten_rules_the_stored_crd_breaks() {
        let old = with_field("a", json!({"type": "int"}));
        let options = Options::for_update([&old]);
        assert!(!options.require_valid_property_type);
        assert!(options.require_structural);
        assert_eq!(errors_with(old.clone(), &options), Vec::<String>::new());

        let old = with_field("a", json!({"description": "no type"}));
        let options = Options::for_update([&old]);
        assert!(!options.require_structural);
        assert_eq!(errors_with(old, &options), Vec::<String>::new());

        let old = with_field(
            "s",
            json!({"type": "array", "x-kubernetes-list-type": "set",
            "items": {"type": "object", "properties": {"a": {"type": "string"}}}}),
        );
        let options = Options::for_update([&old]);
        assert!(!options.require_atomic_set_type);
        assert_eq!(errors_with(old.clone(), &options), Vec::<String>::new());
        assert_eq!(errors(old).len(), 1);

        let unreadable = with_field("a", json!({"type": "object", "$ref": "#/x"}));
        assert!(!Options::for_update([&unreadable]).require_structural);

        let clean = Options::for_update([&json!({"type": "object"})]);
        assert_eq!(clean, Options::default());
    }

    #[test]
    fn nullable_is_forbidden_at_the_root() {
        expect(
            json!({"type": "object", "nullable": true}),
            &["$P.nullable: Forbidden: nullable cannot be true at the root"],
        );
    }

    #[test]
    fn value_validations_set_no_type() {
        expect(
            with_field(
                "a",
                json!({"type": "string", "anyOf": [{"type": "string"}, {"maxLength": 3}]}),
            ),
            &["$P.properties[a].anyOf[0].type: Forbidden: must be empty to be structural"],
        );
    }

    #[test]
    fn value_validations_set_no_generic_fields_sorted_by_text() {
        expect(
            with_field(
                "a",
                json!({"type": "string", "allOf": [{"nullable": true, "description": "d", "default": "x", "title": "t"}]}),
            ),
            &[
                "$P.properties[a].allOf[0].default: Forbidden: must be undefined to be structural",
                "$P.properties[a].allOf[0].description: Forbidden: must be empty to be structural",
                "$P.properties[a].allOf[0].nullable: Forbidden: must be false to be structural",
                "$P.properties[a].allOf[0].title: Forbidden: must be empty to be structural",
            ],
        );
    }

    #[test]
    fn value_validations_set_no_extensions() {
        expect(
            with_field(
                "a",
                json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true, "oneOf": [{
                    "x-kubernetes-preserve-unknown-fields": true,
                    "x-kubernetes-embedded-resource": true,
                    "x-kubernetes-int-or-string": true,
                    "x-kubernetes-list-type": "atomic",
                    "x-kubernetes-list-map-keys": ["k"],
                    "x-kubernetes-map-type": "atomic",
                    "x-kubernetes-validations": [{"rule": "true"}],
                    "additionalProperties": {"maxLength": 1},
                }]}),
            ),
            &[
                "$P.properties[a].oneOf[0].additionalProperties: Forbidden: must be undefined to be structural",
                "$P.properties[a].oneOf[0].x-kubernetes-embedded-resource: Forbidden: must be false to be structural",
                "$P.properties[a].oneOf[0].x-kubernetes-int-or-string: Forbidden: must be false to be structural",
                "$P.properties[a].oneOf[0].x-kubernetes-list-map-keys: Forbidden: must be empty to be structural",
                "$P.properties[a].oneOf[0].x-kubernetes-list-type: Forbidden: must be undefined to be structural",
                "$P.properties[a].oneOf[0].x-kubernetes-map-type: Forbidden: must be undefined to be structural",
                "$P.properties[a].oneOf[0].x-kubernetes-preserve-unknown-fields: Forbidden: must be false to be structural",
                "$P.properties[a].oneOf[0].x-kubernetes-validations: Forbidden: must be empty to be structural",
                // The OpenAPI rules still apply to the clause itself.
                "$P.properties[a].oneOf[0].type: Required value: must be object if x-kubernetes-map-type is specified",
                "$P.properties[a].oneOf[0].type: Required value: must be array if x-kubernetes-list-type is specified",
                "$P.properties[a].oneOf[0].x-kubernetes-list-type: Invalid value: \"atomic\": must be map if x-kubernetes-list-map-keys is non-empty",
            ],
        );
    }

    #[test]
    fn metadata_is_not_specified_in_value_validations() {
        expect(
            json!({"type": "object", "allOf": [{"properties": {"metadata": {"required": ["name"]}}}]}),
            &[
                "$P.allOf[0].properties[metadata]: Forbidden: must not be specified in a nested context",
                "$P.properties[metadata]: Required value: because it is defined in $P.allOf[0].properties[metadata]",
            ],
        );
    }

    #[test]
    fn value_validations_only_name_specified_fields() {
        expect(
            json!({"type": "object", "properties": {"a": {"type": "string"}},
                "anyOf": [{"properties": {"a": {"minLength": 1}}}, {"properties": {"b": {"minLength": 1}}}]}),
            &[
                "$P.properties[b]: Required value: because it is defined in $P.anyOf[1].properties[b]",
            ],
        );
        expect(
            json!({"type": "object", "properties": {"l": {"type": "array", "items": {"type": "object"}}},
                "not": {"properties": {"l": {"items": {"properties": {"x": {"maxLength": 1}}}}}}}),
            &[
                "$P.properties[l].items.properties[x]: Required value: because it is defined in $P.not.properties[l].items.properties[x]",
            ],
        );
    }

    #[test]
    fn int_or_string_patterns_are_structural() {
        for schema in [
            json!({"x-kubernetes-int-or-string": true}),
            json!({"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}),
            json!({"x-kubernetes-int-or-string": true, "allOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}, {"pattern": "^[0-9]+%?$"}]}),
        ] {
            assert_eq!(
                errors(with_field("size", schema.clone())),
                Vec::<String>::new(),
                "{schema}"
            );
        }
        expect(
            with_field(
                "size",
                json!({"x-kubernetes-int-or-string": true, "anyOf": [{"type": "string"}, {"type": "integer"}]}),
            ),
            &[
                "$P.properties[size].anyOf[0].type: Forbidden: must be empty to be structural",
                "$P.properties[size].anyOf[1].type: Forbidden: must be empty to be structural",
            ],
        );
    }

    #[test]
    fn int_or_string_excludes_other_extensions() {
        expect(
            with_field(
                "size",
                json!({"x-kubernetes-int-or-string": true, "x-kubernetes-preserve-unknown-fields": true}),
            ),
            &[
                "$P.properties[size].x-kubernetes-preserve-unknown-fields: Invalid value: true: must be false if x-kubernetes-int-or-string is true",
            ],
        );
    }

    #[test]
    fn embedded_resources_are_objects() {
        expect(
            with_field(
                "t",
                json!({"type": "string", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}),
            ),
            &[
                "$P.properties[t].type: Invalid value: \"string\": must be object if x-kubernetes-embedded-resource is true",
            ],
        );
        expect(
            with_field(
                "t",
                json!({"x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}),
            ),
            &[
                "$P.properties[t].type: Required value: must be object if x-kubernetes-embedded-resource is true",
            ],
        );
    }

    #[test]
    fn embedded_resources_specify_their_fields() {
        expect(
            with_field(
                "t",
                json!({"type": "object", "x-kubernetes-embedded-resource": true}),
            ),
            &[
                "$P.properties[t].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
            ],
        );
        expect(
            with_field(
                "t",
                json!({"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true,
                    "additionalProperties": {"type": "string"}}),
            ),
            &[
                "$P.properties[t].additionalProperties: Forbidden: must not be used if x-kubernetes-embedded-resource is set",
            ],
        );
    }

    #[test]
    fn root_metadata_restricts_only_name_and_generate_name() {
        for metadata in [
            json!({"type": "object"}),
            json!({"type": "object", "properties": {"name": {"type": "string", "pattern": "^a"}, "generateName": {"type": "string"}}}),
        ] {
            assert_eq!(
                errors(with_field("metadata", metadata.clone())),
                Vec::<String>::new(),
                "{metadata}"
            );
        }
        let forbidden = "$P.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified";
        expect(
            with_field(
                "metadata",
                json!({"type": "object", "properties": {"labels": {"type": "object"}}}),
            ),
            &[forbidden],
        );
        expect(
            with_field("metadata", json!({"type": "object", "description": "meta"})),
            &[forbidden],
        );
        expect(
            with_field("metadata", json!({"type": "object", "required": ["name"]})),
            &[forbidden],
        );
        expect(
            with_field("metadata", json!({"type": "string"})),
            &["$P.properties[metadata].type: Invalid value: \"string\": must be object"],
        );
    }

    #[test]
    fn type_meta_fields_are_strings() {
        expect(
            with_field("kind", json!({"type": "integer"})),
            &["$P.properties[kind].type: Invalid value: \"integer\": must be string"],
        );
        // Only at the root and in embedded resources.
        expect(
            with_field(
                "spec",
                json!({"type": "object", "properties": {"kind": {"type": "integer"}}}),
            ),
            &[],
        );
    }

    #[test]
    fn defaults_are_forbidden_in_top_level_metadata() {
        expect(
            with_field(
                "metadata",
                json!({"type": "object", "properties": {"name": {"type": "string", "default": "x"}}}),
            ),
            &[
                "$P.properties[metadata].properties[name].default: Forbidden: must not be set in top-level metadata",
            ],
        );
        expect(
            with_field("apiVersion", json!({"type": "string", "default": "v1"})),
            &[
                "$P.properties[apiVersion].default: Forbidden: must not be set in top-level apiVersion",
            ],
        );
    }

    #[test]
    fn defaults_are_forbidden_in_additional_properties_of_embedded_metadata() {
        expect(
            with_field(
                "template",
                json!({"type": "object", "x-kubernetes-embedded-resource": true, "properties": {
                    "metadata": {"type": "object", "properties": {
                        "labels": {"type": "object", "additionalProperties": {"type": "string", "default": "x"}},
                        "name": {"type": "string", "default": "allowed"},
                    }},
                }}),
            ),
            &[
                "$P.properties[template].properties[metadata].properties[labels].additionalProperties.default: Forbidden: must not be set inside additionalProperties applying to object metadata",
            ],
        );
    }

    #[test]
    fn embedded_resources_cannot_sit_in_resource_metadata() {
        expect(
            with_field(
                "template",
                json!({"type": "object", "x-kubernetes-embedded-resource": true, "properties": {
                    "metadata": {"type": "object", "properties": {
                        "inner": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true},
                    }},
                }}),
            ),
            &[
                "$P.properties[template].properties[metadata].properties[inner].x-kubernetes-embedded-resource: Forbidden: must not be used inside of resource meta",
            ],
        );
    }

    #[test]
    fn list_types_are_for_arrays() {
        expect(
            with_field(
                "l",
                json!({"type": "object", "x-kubernetes-list-type": "set"}),
            ),
            &[
                "$P.properties[l].type: Invalid value: \"object\": must be array if x-kubernetes-list-type is specified",
            ],
        );
        expect(
            with_field(
                "l",
                json!({"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "bag"}),
            ),
            &[
                "$P.properties[l].x-kubernetes-list-type: Unsupported value: \"bag\": supported values: \"atomic\", \"set\", \"map\"",
            ],
        );
    }

    #[test]
    fn map_types_are_for_objects() {
        expect(
            with_field(
                "m",
                json!({"type": "string", "x-kubernetes-map-type": "atomic"}),
            ),
            &[
                "$P.properties[m].type: Invalid value: \"string\": must be object if x-kubernetes-map-type is specified",
            ],
        );
        expect(
            with_field(
                "m",
                json!({"type": "object", "x-kubernetes-map-type": "fine"}),
            ),
            &[
                "$P.properties[m].x-kubernetes-map-type: Unsupported value: \"fine\": supported values: \"atomic\", \"granular\"",
            ],
        );
    }

    fn map_list(keys: Value, item: Value) -> Value {
        with_field(
            "l",
            json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": keys, "items": item}),
        )
    }

    #[test]
    fn list_map_keys_need_a_map_list() {
        expect(
            with_field(
                "l",
                json!({"type": "array", "x-kubernetes-list-map-keys": ["a"], "items": {"type": "object", "properties": {"a": {"type": "string"}}}}),
            ),
            &[
                "$P.properties[l].x-kubernetes-list-type: Required value: must be map if x-kubernetes-list-map-keys is non-empty",
            ],
        );
        expect(
            with_field(
                "l",
                json!({"type": "array", "items": {"type": "object"}, "x-kubernetes-list-type": "map"}),
            ),
            &[
                "$P.properties[l].x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map",
            ],
        );
    }

    #[test]
    fn map_list_items_are_objects_keyed_by_scalar_properties() {
        expect(
            map_list(json!(["name"]), json!({"type": "string"})),
            &[
                "$P.properties[l].items.type: Invalid value: \"string\": must be object if parent array's x-kubernetes-list-type is map",
            ],
        );
        expect(
            map_list(
                json!(["missing"]),
                json!({"type": "object", "properties": {"name": {"type": "string"}}}),
            ),
            &[
                "$P.properties[l].x-kubernetes-list-map-keys: Invalid value: [\"missing\"]: entries must all be names of item properties",
            ],
        );
        expect(
            map_list(
                json!(["name"]),
                json!({"type": "object", "required": ["name"], "properties": {"name": {"type": "object"}}}),
            ),
            &[
                "$P.properties[l].items.properties[name].type: Invalid value: \"object\": must be a scalar type if parent array's x-kubernetes-list-type is map",
            ],
        );
        expect(
            map_list(
                json!(["name", "name"]),
                json!({"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}),
            ),
            &[
                "$P.properties[l].x-kubernetes-list-map-keys: Invalid value: [\"name\",\"name\"]: must not contain duplicate entries",
            ],
        );
    }

    #[test]
    fn map_list_keys_are_required_or_defaulted_and_not_nullable() {
        expect(
            map_list(
                json!(["name"]),
                json!({"type": "object", "properties": {"name": {"type": "string"}}}),
            ),
            &[
                "$P.properties[l].items.properties[name].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
            ],
        );
        expect(
            map_list(
                json!(["name"]),
                json!({"type": "object", "nullable": true, "required": ["name"], "properties": {"name": {"type": "string", "nullable": true}}}),
            ),
            &[
                "$P.properties[l].items.nullable: Forbidden: cannot be nullable when x-kubernetes-list-type is map",
                "$P.properties[l].items.properties[name].nullable: Forbidden: this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
            ],
        );
    }

    #[test]
    fn set_items_are_atomic_and_not_nullable() {
        expect(
            with_field(
                "s",
                json!({"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string", "nullable": true}}),
            ),
            &[
                "$P.properties[s].items.nullable: Forbidden: cannot be nullable when x-kubernetes-list-type is set",
            ],
        );
        expect(
            with_field(
                "s",
                json!({"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "object", "properties": {"a": {"type": "string"}}}}),
            ),
            &[
                "$P.properties[s].items.x-kubernetes-map-type: Invalid value: null: must be atomic as item of a list with x-kubernetes-list-type=set",
            ],
        );
        expect(
            with_field(
                "s",
                json!({"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}}),
            ),
            &[
                "$P.properties[s].items.x-kubernetes-list-type: Invalid value: \"set\": must be atomic as item of a list with x-kubernetes-list-type=set",
            ],
        );
        assert_eq!(
            errors(with_field(
                "s",
                json!({"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "object", "x-kubernetes-map-type": "atomic"}}),
            )),
            Vec::<String>::new()
        );
    }

    #[test]
    fn preserve_unknown_fields_is_true_or_absent() {
        expect(
            with_field(
                "a",
                json!({"type": "object", "x-kubernetes-preserve-unknown-fields": false}),
            ),
            &[
                "$P.properties[a].x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or undefined",
            ],
        );
    }

    #[test]
    fn patterns_are_regular_expressions() {
        let found = errors(with_field("a", json!({"type": "string", "pattern": "[a-"})));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with(&format!(
                "{P}.properties[a].pattern: Invalid value: \"[a-\": must be a valid regular expression, but isn't: error parsing regexp: "
            )),
            "{}",
            found[0]
        );
    }

    #[test]
    fn validation_rules_are_checked_statically() {
        let rules = |rules: Value| json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}, "m": {"type": "object", "additionalProperties": {"type": "string"}}}, "x-kubernetes-validations": rules}}});
        expect(
            rules(json!([
                {"rule": "  "},
                {"rule": "self.a ==\n 'x'"},
                {"rule": "true", "message": "two\nlines"},
                {"rule": "true", "message": "   "},
                {"rule": "true", "messageExpression": " "},
                {"rule": "true", "reason": "FieldValueBad"},
                {"rule": "true", "fieldPath": ".b"},
                {"rule": "true", "fieldPath": ".a"},
                {"rule": "true", "fieldPath": ".m['any-key']"},
                {"rule": "true", "fieldPath": "['a']"},
                {"rule": "true", "fieldPath": ".m.x"},
                {"rule": "true", "fieldPath": ".a[0]"},
                {"rule": "true", "fieldPath": "a"},
            ])),
            &[
                "$P.properties[spec].x-kubernetes-validations[0].rule: Required value: rule is not specified",
                "$P.properties[spec].x-kubernetes-validations[1].message: Required value: message must be specified if rule contains line breaks",
                "$P.properties[spec].x-kubernetes-validations[2].message: Invalid value: \"two\\nlines\": must not contain line breaks",
                "$P.properties[spec].x-kubernetes-validations[3].message: Invalid value: \"   \": must be non-empty if specified",
                "$P.properties[spec].x-kubernetes-validations[4].messageExpression: Required value: messageExpression must be non-empty if specified",
                "$P.properties[spec].x-kubernetes-validations[5].reason: Unsupported value: \"FieldValueBad\": supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\"",
                "$P.properties[spec].x-kubernetes-validations[6].fieldPath: Invalid value: \".b\": must be a valid path",
                "$P.properties[spec].x-kubernetes-validations[11].fieldPath: Invalid value: \".a[0]\": must be a valid path",
                "$P.properties[spec].x-kubernetes-validations[12].fieldPath: Invalid value: \"a\": must be a valid path",
            ],
        );
    }

    #[test]
    fn the_status_subresource_restricts_the_root() {
        let options = Options {
            status_subresource: true,
            ..Options::default()
        };
        assert_eq!(
            errors_with(
                json!({"type": "object", "description": "d", "required": ["spec"], "properties": {"spec": {"type": "object"}},
                    "x-kubernetes-validations": [{"rule": "true"}]}),
                &options
            ),
            Vec::<String>::new()
        );
        let found = errors_with(json!({"type": "object", "minProperties": 1}), &options);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with(&format!("{P}: Invalid value: {{")),
            "{}",
            found[0]
        );
        assert!(
            found[0].ends_with(": only [Description Type Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum MaxLength MinLength Pattern MaxItems MinItems UniqueItems MultipleOf Required Items Properties ExternalDocs Example XPreserveUnknownFields XValidations] fields are allowed at the root of the schema if the status subresource is enabled"),
            "{}",
            found[0]
        );
        let found = errors_with(
            json!({"type": "array", "items": {"type": "string"}}),
            &options,
        );
        assert_eq!(
            found,
            [
                format!(
                    "{P}.type: Invalid value: \"array\": only \"object\" is allowed as the type at the root of the schema if the status subresource is enabled"
                ),
                format!("{P}.type: Invalid value: \"array\": must be object at the root"),
            ]
        );
    }

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

    #[test]
    fn defaults_are_listed_with_their_resource() {
        let schema = json!({
            "type": "object",
            "properties": {
                "metadata": {"type": "object", "properties": {"name": {"type": "string", "default": "n"}}},
                "spec": {
                    "type": "object",
                    "default": {},
                    "anyOf": [{"properties": {"replicas": {"default": 5}}}],
                    "properties": {
                        "replicas": {"type": "integer", "default": 1},
                        "ports": {"type": "array", "items": {"type": "object", "properties": {"protocol": {"type": "string", "default": "TCP"}}}},
                        "labels": {"type": "object", "additionalProperties": {"type": "string", "default": "x"}},
                        "template": {
                            "type": "object",
                            "x-kubernetes-embedded-resource": true,
                            "properties": {
                                "kind": {"type": "string", "default": "Pod"},
                                "spec": {"type": "object", "properties": {"x": {"type": "string", "default": "y"}}},
                            },
                        },
                    },
                },
            },
        });
        let found = defaults(&schema, &path());
        let summary: Vec<(String, Value, bool, Vec<Location>)> = found
            .iter()
            .map(|d| {
                (
                    d.path.to_string().replace(P, "$P"),
                    d.value.clone(),
                    d.in_resource_meta,
                    d.location.clone(),
                )
            })
            .collect();
        let field = |s: &str| Location::Field(s.to_owned());
        assert_eq!(
            summary,
            vec![
                ("$P.properties[metadata].properties[name].default".to_owned(), json!("n"), true, vec![field("metadata"), field("name")]),
                ("$P.properties[spec].default".to_owned(), json!({}), false, vec![field("spec")]),
                ("$P.properties[spec].properties[ports].items.properties[protocol].default".to_owned(), json!("TCP"), false,
                    vec![field("spec"), field("ports"), Location::Item, field("protocol")]),
                ("$P.properties[spec].properties[replicas].default".to_owned(), json!(1), false, vec![field("spec"), field("replicas")]),
                ("$P.properties[spec].properties[template].properties[kind].default".to_owned(), json!("Pod"), true, vec![field("kind")]),
                ("$P.properties[spec].properties[template].properties[spec].properties[x].default".to_owned(), json!("y"), false,
                    vec![field("spec"), field("x")]),
            ]
        );
        assert_eq!(found[0].resource_schema, schema);
        assert_eq!(
            found[4].resource_schema,
            schema["properties"]["spec"]["properties"]["template"]
        );
        assert_eq!(found[3].schema, json!({"type": "integer", "default": 1}));
    }
}
