//! The part of an OpenAPI v3 schema that CEL needs: types, formats, list and map semantics and
//! size bounds. The CRD rules of each node are kept beside this tree (`RuleTree` in the crate
//! root), not in it.

use serde_json::Value;

/// The `format` of a string schema, where it changes how CEL sees the value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    /// No special format: a CEL string.
    None,
    /// `date`: a CEL timestamp at midnight UTC.
    Date,
    /// `date-time`: a CEL timestamp.
    DateTime,
    /// `duration`: a CEL duration.
    Duration,
    /// `byte`: CEL bytes (base64 in JSON).
    Byte,
}

/// `x-kubernetes-list-type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ListType {
    /// The default: the list is one value.
    Atomic,
    /// Items are unique scalars; order does not matter for equality.
    Set,
    /// Items are objects keyed by `x-kubernetes-list-map-keys`; order does not matter.
    Map,
}

/// One schema node.
#[derive(Debug)]
pub(crate) struct Node {
    /// `type`, empty when unset.
    pub(crate) ty: String,
    pub(crate) format: Format,
    pub(crate) int_or_string: bool,
    pub(crate) preserve_unknown: bool,
    /// `x-kubernetes-embedded-resource` (or the resource root): apiVersion, kind and
    /// metadata.name/generateName are visible to rules.
    pub(crate) resource_root: bool,
    /// Declared properties, sorted by name.
    pub(crate) properties: Vec<(String, Node)>,
    /// `additionalProperties` as a schema (a map).
    pub(crate) additional: Option<Box<Node>>,
    /// `additionalProperties: true` without a schema.
    pub(crate) additional_any: bool,
    pub(crate) items: Option<Box<Node>>,
    pub(crate) list_type: ListType,
    pub(crate) map_keys: Vec<String>,
    pub(crate) max_length: Option<u64>,
    pub(crate) max_items: Option<u64>,
    pub(crate) max_properties: Option<u64>,
    pub(crate) min_length: u64,
    /// The key under which rules see this node as a property of its parent (escaped name),
    /// `None` when the name cannot be written in CEL or the node is not a property.
    pub(crate) cel_key: Option<std::sync::Arc<String>>,
}

impl Node {
    /// Reads the typing of a schema node and its children.
    pub(crate) fn read(schema: &Value, resource_root: bool) -> Node {
        let ty = str_field(schema, "type").unwrap_or_default().to_owned();
        let format = match str_field(schema, "format") {
            Some("date") => Format::Date,
            Some("date-time") => Format::DateTime,
            Some("duration") => Format::Duration,
            Some("byte") => Format::Byte,
            _ => Format::None,
        };
        let mut properties: Vec<(String, Node)> = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|props| {
                props
                    .iter()
                    .map(|(name, s)| {
                        let mut child = Node::read(s, embedded(s));
                        child.cel_key = escape(name).map(std::sync::Arc::new);
                        (name.clone(), child)
                    })
                    .collect()
            })
            .unwrap_or_default();
        properties.sort_by(|a, b| a.0.cmp(&b.0));
        let (additional, additional_any) = match schema.get("additionalProperties") {
            Some(s @ Value::Object(_)) => (Some(Box::new(Node::read(s, embedded(s)))), false),
            Some(Value::Bool(true)) => (None, true),
            _ => (None, false),
        };
        let items = schema
            .get("items")
            .filter(|s| s.is_object())
            .map(|s| Box::new(Node::read(s, embedded(s))));
        let list_type = match str_field(schema, "x-kubernetes-list-type") {
            Some("set") => ListType::Set,
            Some("map") => ListType::Map,
            _ => ListType::Atomic,
        };
        let map_keys = string_list(schema, "x-kubernetes-list-map-keys");
        Node {
            ty,
            format,
            int_or_string: bool_field(schema, "x-kubernetes-int-or-string"),
            preserve_unknown: bool_field(schema, "x-kubernetes-preserve-unknown-fields"),
            resource_root,
            properties,
            additional,
            additional_any,
            items,
            list_type,
            map_keys,
            max_length: schema.get("maxLength").and_then(Value::as_u64),
            max_items: schema.get("maxItems").and_then(Value::as_u64),
            max_properties: schema.get("maxProperties").and_then(Value::as_u64),
            min_length: schema.get("minLength").and_then(Value::as_u64).unwrap_or(0),
            cel_key: None,
        }
    }

    /// The declared property `name`.
    pub(crate) fn property(&self, name: &str) -> Option<&Node> {
        self.properties
            .binary_search_by(|(n, _)| n.as_str().cmp(name))
            .ok()
            .map(|i| &self.properties[i].1)
    }

    /// Whether values of this node are maps with user-chosen keys (not objects with fields).
    pub(crate) fn is_map(&self) -> bool {
        self.properties.is_empty() && (self.additional.is_some() || self.additional_any)
    }

    /// The type name upstream shows as the bad value of a failed rule.
    pub(crate) fn type_name(&self) -> &str {
        &self.ty
    }

    /// Upstream's estimate of the largest string this node can hold in one request.
    pub(crate) fn max_string_length(&self) -> u64 {
        if let Some(max) = self.max_length {
            return max;
        }
        match self.format {
            // The longest encodings of these formats, as upstream estimates them.
            Format::Duration => MAX_DURATION_SIZE_JSON,
            Format::DateTime => MAX_DATETIME_SIZE_JSON,
            Format::Date => JSON_DATE_SIZE,
            _ => MAX_REQUEST_SIZE_BYTES - 2,
        }
    }

    /// Upstream's estimate of the most items (list) or entries (map/object) this node holds.
    pub(crate) fn max_elements(&self) -> u64 {
        if self.ty == "string" {
            return self.max_string_length();
        }
        if self.ty == "array" {
            if let Some(max) = self.max_items {
                return max;
            }
            let min = self.items.as_ref().map_or(1, |i| i.min_serialized_size());
            return (MAX_REQUEST_SIZE_BYTES - 2) / (min + 1);
        }
        if self.ty == "object" {
            if let Some(max) = self.max_properties {
                return max;
            }
            if self.is_map() {
                let min = self
                    .additional
                    .as_ref()
                    .map_or(1, |a| a.min_serialized_size());
                // `"":` plus the value plus a comma
                return (MAX_REQUEST_SIZE_BYTES - 2) / (min + 4);
            }
            return self.properties.len() as u64;
        }
        0
    }

    /// The smallest JSON encoding of a value of this node (upstream's estimate).
    pub(crate) fn min_serialized_size(&self) -> u64 {
        match self.ty.as_str() {
            "string" => self.min_length + 2,
            "boolean" => 4,
            "integer" | "number" => 1,
            "array" | "object" => 2,
            _ => 1,
        }
    }
}

/// Upstream's request size limit, the bound of every unbounded estimate.
pub(crate) const MAX_REQUEST_SIZE_BYTES: u64 = 3 * 1024 * 1024;
const MAX_DURATION_SIZE_JSON: u64 = 32;
const MAX_DATETIME_SIZE_JSON: u64 = 34;
const JSON_DATE_SIZE: u64 = 12;

fn embedded(schema: &Value) -> bool {
    bool_field(schema, "x-kubernetes-embedded-resource")
}

fn str_field<'a>(schema: &'a Value, name: &str) -> Option<&'a str> {
    schema.get(name).and_then(Value::as_str)
}

fn bool_field(schema: &Value, name: &str) -> bool {
    schema.get(name).and_then(Value::as_bool) == Some(true)
}

fn string_list(schema: &Value, name: &str) -> Vec<String> {
    schema
        .get(name)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// CEL's reserved words: a property with one of these names is `__name__` in rules.
const RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// The name under which rules see the property `name`, or `None` when it cannot be named.
///
/// Follows upstream: reserved words become `__word__`; `__`, `.`, `-` and `/` become
/// `__underscores__`, `__dot__`, `__dash__` and `__slash__`; other characters make the
/// property invisible to rules.
pub(crate) fn escape(name: &str) -> Option<String> {
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut chars = name.chars();
    let first = chars.next()?;
    if !(first.is_ascii_alphabetic() || first == '_') {
        return None;
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/'))
    {
        return None;
    }
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("__") {
            out.push_str("__underscores__");
            rest = r;
            continue;
        }
        let c = rest.chars().next().expect("invariant: rest is not empty");
        match c {
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            other => out.push(other),
        }
        rest = &rest[c.len_utf8()..];
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn property_names_escape_like_upstream() {
        assert_eq!(escape("foo").as_deref(), Some("foo"));
        assert_eq!(escape("namespace").as_deref(), Some("__namespace__"));
        assert_eq!(escape("a.b").as_deref(), Some("a__dot__b"));
        assert_eq!(escape("x-y/z").as_deref(), Some("x__dash__y__slash__z"));
        assert_eq!(escape("a__b").as_deref(), Some("a__underscores__b"));
        assert_eq!(escape("1a"), None);
        assert_eq!(escape("a b"), None);
    }
}
