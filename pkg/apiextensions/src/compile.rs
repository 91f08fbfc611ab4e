//! Reading a CRD version's `openAPIV3Schema` JSON into the tree of [`schema`](crate::schema):
//! [`Structural::new`]. Separate from the tree's types because building it prunes the
//! defaults, which is [`pruning`](crate::pruning)'s walk over that tree.

use genplane_apimachinery::validation::field::Path;
use serde_json::{Map, Value};

use crate::formats::Format;
use crate::pruning::prune_value;
use crate::schema::{
    AdditionalProperties, Limits, ListType, Node, Properties, SchemaError, Structural, Types,
    compile_pattern,
};

impl Structural {
    /// Compiles `openAPIV3Schema` (the JSON of `spec.versions[].schema.openAPIV3Schema`).
    pub fn new(schema: &Value) -> Result<Structural, SchemaError> {
        let path = Path::new("openAPIV3Schema");
        let mut root = compile(schema, &path)?;
        prune_defaults(&mut root);
        Ok(Structural { root })
    }
}

/// Reads an integer keyword (`maxLength` and friends); JSON numbers like `3.0` count too.
fn int_keyword(
    obj: &Map<String, Value>,
    key: &str,
    path: &Path,
) -> Result<Option<i64>, SchemaError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
            .map(Some)
            .ok_or_else(|| wrong(path, key, "an integer")),
        Some(_) => Err(wrong(path, key, "an integer")),
    }
}

fn num_keyword(
    obj: &Map<String, Value>,
    key: &str,
    path: &Path,
) -> Result<Option<f64>, SchemaError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64()),
        Some(_) => Err(wrong(path, key, "a number")),
    }
}

fn bool_keyword(obj: &Map<String, Value>, key: &str, path: &Path) -> Result<bool, SchemaError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(wrong(path, key, "a boolean")),
    }
}

fn str_keyword<'a>(
    obj: &'a Map<String, Value>,
    key: &str,
    path: &Path,
) -> Result<Option<&'a str>, SchemaError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(wrong(path, key, "a string")),
    }
}

fn strings_keyword(
    obj: &Map<String, Value>,
    key: &str,
    path: &Path,
) -> Result<Vec<String>, SchemaError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| wrong(path, key, "a list of strings"))
            })
            .collect(),
        Some(_) => Err(wrong(path, key, "a list of strings")),
    }
}

fn wrong(path: &Path, key: &str, expected: &'static str) -> SchemaError {
    SchemaError::WrongType {
        path: path.child(key).to_string(),
        expected,
    }
}

fn schema_list(obj: &Map<String, Value>, key: &str, path: &Path) -> Result<Vec<Node>, SchemaError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, s)| compile(s, &path.child(key).index(i)))
            .collect(),
        Some(_) => Err(wrong(path, key, "a list of schemas")),
    }
}

/// Compiles one schema object.
fn compile(schema: &Value, path: &Path) -> Result<Node, SchemaError> {
    let Value::Object(obj) = schema else {
        return Err(SchemaError::NotAnObject {
            path: path.to_string(),
        });
    };
    if obj.contains_key("$ref") {
        return Err(SchemaError::Unsupported {
            path: path.to_string(),
            keyword: "$ref",
        });
    }
    let mut node = Node::default();
    if let Some(t) = str_keyword(obj, "type", path)?
        && !t.is_empty()
    {
        node.types = Types::from_name(t).ok_or_else(|| SchemaError::UnknownType {
            path: path.child("type").to_string(),
            value: t.to_owned(),
        })?;
    }
    node.int_or_string = bool_keyword(obj, "x-kubernetes-int-or-string", path)?;
    if node.int_or_string {
        node.types = Types::INTEGER | Types::STRING;
    }
    node.types_name = Types::NAMES
        .iter()
        .filter(|(t, _)| node.types.contains(*t))
        .map(|(_, n)| *n)
        .collect::<Vec<_>>()
        .join(",");
    node.nullable = bool_keyword(obj, "nullable", path)?;
    if let Some(f) = str_keyword(obj, "format", path)? {
        node.format = Format::supported(f).map(|format| (f.to_owned(), format));
    }
    let mut limits = Limits {
        maximum: num_keyword(obj, "maximum", path)?,
        exclusive_maximum: bool_keyword(obj, "exclusiveMaximum", path)?,
        minimum: num_keyword(obj, "minimum", path)?,
        exclusive_minimum: bool_keyword(obj, "exclusiveMinimum", path)?,
        multiple_of: num_keyword(obj, "multipleOf", path)?,
        max_length: int_keyword(obj, "maxLength", path)?,
        min_length: int_keyword(obj, "minLength", path)?,
        ..Limits::default()
    };
    if let Some(p) = str_keyword(obj, "pattern", path)?
        && !p.is_empty()
    {
        let re = compile_pattern(p).map_err(|message| SchemaError::InvalidPattern {
            path: path.child("pattern").to_string(),
            pattern: p.to_owned(),
            message,
        })?;
        node.pattern = Some((p.to_owned(), re));
    }
    limits.max_items = int_keyword(obj, "maxItems", path)?;
    limits.min_items = int_keyword(obj, "minItems", path)?;
    limits.unique_items = bool_keyword(obj, "uniqueItems", path)?;
    limits.max_properties = int_keyword(obj, "maxProperties", path)?;
    limits.min_properties = int_keyword(obj, "minProperties", path)?;
    node.required = strings_keyword(obj, "required", path)?;
    node.enum_values = match obj.get("enum") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(values)) => values.clone(),
        Some(_) => return Err(wrong(path, "enum", "a list")),
    };
    limits.all_of = schema_list(obj, "allOf", path)?;
    limits.any_of = schema_list(obj, "anyOf", path)?;
    limits.one_of = schema_list(obj, "oneOf", path)?;
    if let Some(not) = obj.get("not").filter(|v| !v.is_null()) {
        limits.not = Some(Box::new(compile(not, &path.child("not"))?));
    }
    node.limits = (!limits.is_empty()).then(|| Box::new(limits));
    match obj.get("properties") {
        None | Some(Value::Null) => {}
        Some(Value::Object(props)) => {
            let base = path.child("properties");
            let mut entries = Vec::with_capacity(props.len());
            for (name, s) in props {
                entries.push((name.clone(), compile(s, &base.key(name))?));
            }
            node.properties = Properties::new(entries);
        }
        Some(_) => return Err(wrong(path, "properties", "an object")),
    }
    node.additional_properties = match obj.get("additionalProperties") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(b)) => Some(AdditionalProperties::Bool(*b)),
        Some(s @ Value::Object(_)) => Some(AdditionalProperties::Schema(Box::new(compile(
            s,
            &path.child("additionalProperties"),
        )?))),
        Some(_) => return Err(wrong(path, "additionalProperties", "a boolean or a schema")),
    };
    match obj.get("items") {
        None | Some(Value::Null) => {}
        Some(s @ Value::Object(_)) => {
            node.items = Some(Box::new(compile(s, &path.child("items"))?));
        }
        Some(Value::Array(_)) => {
            return Err(SchemaError::Unsupported {
                path: path.child("items").to_string(),
                keyword: "items as a list of schemas",
            });
        }
        Some(_) => return Err(wrong(path, "items", "a schema")),
    }
    node.default = obj.get("default").filter(|v| !v.is_null()).cloned();
    node.preserve_unknown_fields = bool_keyword(obj, "x-kubernetes-preserve-unknown-fields", path)?;
    node.embedded_resource = bool_keyword(obj, "x-kubernetes-embedded-resource", path)?;
    node.list_type = match str_keyword(obj, "x-kubernetes-list-type", path)? {
        None => None,
        Some("atomic") => Some(ListType::Atomic),
        Some("set") => Some(ListType::Set),
        Some("map") => Some(ListType::Map),
        Some(_) => {
            return Err(wrong(
                path,
                "x-kubernetes-list-type",
                "one of atomic, set, map",
            ));
        }
    };
    node.list_map_keys = strings_keyword(obj, "x-kubernetes-list-map-keys", path)?;
    let (embedded_below, lists_below) = node
        .properties
        .values()
        .chain(node.additional_schema())
        .chain(node.items.as_deref())
        .fold((false, false), |(e, l), c| {
            (e || c.subtree_embedded, l || c.subtree_lists)
        });
    node.subtree_embedded = embedded_below;
    node.subtree_lists = lists_below;
    node.subtree_embedded |= node.embedded_resource;
    node.subtree_lists |= matches!(node.list_type, Some(ListType::Set | ListType::Map));
    Ok(node)
}

/// Upstream's `PruneDefaults`: every default keeps only the fields its schema knows (an
/// embedded resource keeps its `apiVersion`, `kind` and `metadata`).
fn prune_defaults(node: &mut Node) {
    if let Some(mut default) = node.default.take() {
        prune_value(&mut default, Some(node), node.embedded_resource, None);
        node.default = Some(default);
    }
    for child in node.properties.values_mut() {
        prune_defaults(child);
    }
    if let Some(AdditionalProperties::Schema(s)) = &mut node.additional_properties {
        prune_defaults(s);
    }
    if let Some(items) = &mut node.items {
        prune_defaults(items);
    }
}
