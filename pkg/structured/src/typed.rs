//! Objects read through the type model: which fields an object sets, and how two versions of
//! an object differ, as [`Set`]s of paths.
//!
//! Ownership follows the type: a scalar, an atomic list and an atomic map or struct are one
//! leaf; a granular map or struct is owned key by key; a set list item by item (by value); a
//! map list item by item (by its key fields). Values the model does not describe
//! ([`Type::Untyped`], undeclared fields) are leaves unless they are objects, whose keys are
//! then owned one by one.

use serde_json::{Map, Value};

use crate::fieldpath::{Path, PathElement, Set};
use crate::schema::{ListType, MapType, Schema, Type, TypeRef};

/// Why an object does not fit its type.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct TypeError {
    /// Where (upstream's path notation).
    pub path: String,
    /// What is wrong.
    pub message: String,
}

static UNTYPED: Type = Type::Untyped;

/// How the nodes of a value are owned, resolved from its type.
pub(crate) enum Shape<'a> {
    /// One value.
    Leaf,
    /// Keys owned one by one: declared fields (with their types) and the type of other keys.
    Granular {
        fields: Option<&'a std::collections::BTreeMap<String, crate::schema::Field>>,
        others: Option<&'a TypeRef>,
    },
    /// A list owned item by item.
    Items {
        items: &'a TypeRef,
        keys: Option<&'a [String]>,
    },
}

/// The shape of `value` of type `ty`.
pub(crate) fn shape<'a>(ty: &'a Type, value: Option<&Value>) -> Shape<'a> {
    match ty {
        Type::Scalar => Shape::Leaf,
        Type::Untyped => match value {
            Some(Value::Object(_)) | None => Shape::Granular {
                fields: None,
                others: None,
            },
            _ => Shape::Leaf,
        },
        Type::Struct(s) if s.map_type == MapType::Atomic => Shape::Leaf,
        Type::Struct(s) => Shape::Granular {
            fields: Some(&s.fields),
            others: None,
        },
        Type::Map(m) if m.map_type == MapType::Atomic => Shape::Leaf,
        Type::Map(m) => Shape::Granular {
            fields: None,
            others: Some(&m.values),
        },
        Type::List(l) => match &l.list_type {
            ListType::Atomic => Shape::Leaf,
            ListType::Set => Shape::Items {
                items: &l.items,
                keys: None,
            },
            ListType::Map(keys) => Shape::Items {
                items: &l.items,
                keys: Some(keys),
            },
        },
    }
}

/// The type of key `key` of a granular value, and whether it is a declared field.
pub(crate) fn key_type<'a>(
    schema: &'a Schema,
    fields: Option<&'a std::collections::BTreeMap<String, crate::schema::Field>>,
    others: Option<&'a TypeRef>,
    key: &str,
) -> (&'a Type, bool) {
    if let Some(field) = fields.and_then(|f| f.get(key)) {
        return (schema.resolve(&field.ty), true);
    }
    (others.map_or(&UNTYPED, |t| schema.resolve(t)), false)
}

/// The path element of a list item: its key fields for a map list, its value for a set.
pub(crate) fn item_element(
    keys: Option<&[String]>,
    item: &Value,
    at: &Path,
) -> Result<PathElement, TypeError> {
    match keys {
        None => Ok(PathElement::Value(item.clone())),
        Some(keys) => {
            let object = item.as_object().ok_or_else(|| TypeError {
                path: at.to_string(),
                message: "an item of an associative list must be an object".to_owned(),
            })?;
            let fields: Vec<(String, Value)> = keys
                .iter()
                .filter_map(|k| object.get(k).map(|v| (k.clone(), v.clone())))
                .collect();
            if fields.is_empty() {
                return Err(TypeError {
                    path: at.to_string(),
                    message: format!(
                        "associative list with keys has an element that omits key field {:?}",
                        keys[0]
                    ),
                });
            }
            Ok(PathElement::key(fields))
        }
    }
}

/// The items of a list by path element, in order, the first of repeated elements kept.
pub(crate) fn index_items<'v>(
    keys: Option<&[String]>,
    list: &'v [Value],
    at: &Path,
) -> Result<Vec<(PathElement, &'v Value)>, TypeError> {
    let mut out: Vec<(PathElement, &Value)> = Vec::with_capacity(list.len());
    let mut seen = std::collections::BTreeSet::new();
    for item in list {
        let element = item_element(keys, item, at)?;
        if seen.insert(element.clone()) {
            out.push((element, item));
        }
    }
    Ok(out)
}

fn empty_container(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// The fields an object sets: what an applied configuration claims.
///
/// Leaves are members; so are list items and the keys of maps (as opposed to declared struct
/// fields) and fields set to `null` or `{}`; a declared field holding a non-empty map or list
/// is only present through its members.
pub fn field_set(schema: &Schema, ty: &TypeRef, value: &Value) -> Result<Set, TypeError> {
    let mut set = Set::new();
    walk_set(
        schema,
        schema.resolve(ty),
        value,
        &Path::default(),
        &mut set,
    )?;
    Ok(set)
}

fn walk_set(
    schema: &Schema,
    ty: &Type,
    value: &Value,
    path: &Path,
    set: &mut Set,
) -> Result<(), TypeError> {
    match shape(ty, Some(value)) {
        Shape::Leaf => set.insert(path),
        Shape::Granular { fields, others } => {
            let Some(object) = value.as_object() else {
                if !value.is_null() {
                    set.insert(path);
                }
                return Ok(());
            };
            for (key, child) in object {
                let (child_ty, declared) = key_type(schema, fields, others, key);
                let child_path = path.child(PathElement::Field(key.clone()));
                walk_set(schema, child_ty, child, &child_path, set)?;
                if child.is_null() || child.as_object().is_some_and(Map::is_empty) || !declared {
                    set.insert(&child_path);
                }
            }
        }
        Shape::Items { items, keys } => {
            let Some(list) = value.as_array() else {
                if !value.is_null() {
                    set.insert(path);
                }
                return Ok(());
            };
            let item_ty = schema.resolve(items);
            for (element, item) in index_items(keys, list, path)? {
                let item_path = path.child(element);
                walk_set(schema, item_ty, item, &item_path, set)?;
                set.insert(&item_path);
            }
        }
    }
    Ok(())
}

/// How a new version of an object differs from the old one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Comparison {
    /// Nodes only in the new version.
    pub added: Set,
    /// Leaves with another value in the new version.
    pub modified: Set,
    /// Nodes only in the old version.
    pub removed: Set,
}

impl Comparison {
    /// Leaves out the paths in or below the members of `ignored`.
    pub fn exclude(&mut self, ignored: &Set) {
        self.added = self.added.recursive_difference(ignored);
        self.modified = self.modified.recursive_difference(ignored);
        self.removed = self.removed.recursive_difference(ignored);
    }

    /// Whether the versions are the same.
    pub fn is_same(&self) -> bool {
        self.added.is_empty() && self.modified.is_empty() && self.removed.is_empty()
    }
}

/// Compares two versions of an object of type `ty`.
///
/// Leaves are added, removed or modified. A container (granular map or struct, list owned by
/// item) that exists on one side only is added or removed itself, besides its contents; a
/// struct-typed field of a struct is the exception when added, since such a field is always
/// present (possibly empty) in the versioned objects upstream compares.
pub fn compare(
    schema: &Schema,
    ty: &TypeRef,
    old: &Value,
    new: &Value,
) -> Result<Comparison, TypeError> {
    let mut out = Comparison::default();
    walk_compare(
        schema,
        schema.resolve(ty),
        Some(old),
        Some(new),
        &Path::default(),
        false,
        &mut out,
    )?;
    Ok(out)
}

fn walk_compare(
    schema: &Schema,
    ty: &Type,
    old: Option<&Value>,
    new: Option<&Value>,
    path: &Path,
    struct_field: bool,
    out: &mut Comparison,
) -> Result<(), TypeError> {
    let leaf = |out: &mut Comparison| match (old, new) {
        (None, Some(_)) => out.added.insert(path),
        (Some(_), None) => out.removed.insert(path),
        (Some(a), Some(b)) if a != b => out.modified.insert(path),
        _ => {}
    };
    let both_empty = old.is_none_or(empty_container) && new.is_none_or(empty_container);
    let shape_value = new.or(old);
    // A value whose type changed between the versions (only possible for untyped values) is
    // compared as one leaf.
    let kinds_differ = matches!((old, new), (Some(a), Some(b))
        if a.is_object() != b.is_object() || a.is_array() != b.is_array());
    match shape(ty, shape_value) {
        Shape::Leaf => {
            leaf(out);
            return Ok(());
        }
        _ if both_empty || kinds_differ => {
            leaf(out);
            return Ok(());
        }
        Shape::Granular { fields, others } => {
            let empty = Map::new();
            let (Some(a), Some(b)) = (
                old.map_or(Some(&empty), Value::as_object),
                new.map_or(Some(&empty), Value::as_object),
            ) else {
                leaf(out);
                return Ok(());
            };
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                let (child_ty, declared) = key_type(schema, fields, others, key);
                walk_compare(
                    schema,
                    child_ty,
                    a.get(key),
                    b.get(key),
                    &path.child(PathElement::Field(key.clone())),
                    declared && matches!(child_ty, Type::Struct(_)),
                    out,
                )?;
            }
        }
        Shape::Items { items, keys } => {
            let empty = Vec::new();
            let (Some(a), Some(b)) = (
                old.map_or(Some(&empty), Value::as_array),
                new.map_or(Some(&empty), Value::as_array),
            ) else {
                leaf(out);
                return Ok(());
            };
            let item_ty = schema.resolve(items);
            let a = index_items(keys, a, path)?;
            let b = index_items(keys, b, path)?;
            let in_a: std::collections::BTreeSet<&PathElement> = a.iter().map(|(e, _)| e).collect();
            let in_b: std::collections::BTreeMap<&PathElement, &Value> =
                b.iter().map(|(e, v)| (e, *v)).collect();
            for (element, item) in &a {
                let other = in_b.get(element).copied();
                walk_compare(
                    schema,
                    item_ty,
                    Some(item),
                    other,
                    &path.child(element.clone()),
                    false,
                    out,
                )?;
            }
            for (element, item) in &b {
                if !in_a.contains(element) {
                    walk_compare(
                        schema,
                        item_ty,
                        None,
                        Some(item),
                        &path.child(element.clone()),
                        false,
                        out,
                    )?;
                }
            }
        }
    }
    match (old, new) {
        (None, Some(_)) if !struct_field => out.added.insert(path),
        (Some(_), None) => out.removed.insert(path),
        _ => {}
    }
    Ok(())
}
