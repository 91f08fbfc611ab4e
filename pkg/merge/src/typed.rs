//! Objects read through the type model: which fields an object sets, and how two versions of
//! an object differ, as [`Set`]s of paths.
//!
//! Ownership follows the type: a scalar, an atomic list and an atomic map or struct are one
//! leaf; a granular map or struct is owned key by key; a set list item by item (by value); a
//! map list item by item (by its key fields). Values the model does not describe
//! ([`Type::Untyped`], undeclared fields) are leaves unless they are objects, whose keys are
//! then owned one by one.

use serde_json::{Map, Value};

use crate::fieldpath::{PathElement, Set};
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
    at: &[PathElement],
) -> Result<PathElement, TypeError> {
    match keys {
        None => Ok(PathElement::Value(item.clone())),
        Some(keys) => {
            let object = item.as_object().ok_or_else(|| TypeError {
                path: show(at),
                message: "an item of an associative list must be an object".to_owned(),
            })?;
            let fields: Vec<(String, Value)> = keys
                .iter()
                .filter_map(|k| object.get(k).map(|v| (k.clone(), v.clone())))
                .collect();
            if fields.is_empty() {
                return Err(TypeError {
                    path: show(at),
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
    at: &[PathElement],
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

/// A path given as its elements, as upstream shows it.
fn show(at: &[PathElement]) -> String {
    at.iter().map(ToString::to_string).collect()
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
    walk_set(schema, schema.resolve(ty), value, &mut Vec::new(), &mut set)?;
    Ok(set)
}

/// `path` is the path of `value`, as a stack the walk pushes to and pops from.
fn walk_set(
    schema: &Schema,
    ty: &Type,
    value: &Value,
    path: &mut Vec<PathElement>,
    set: &mut Set,
) -> Result<(), TypeError> {
    match shape(ty, Some(value)) {
        Shape::Leaf => set.insert_slice(path),
        Shape::Granular { fields, others } => {
            let Some(object) = value.as_object() else {
                if !value.is_null() {
                    set.insert_slice(path);
                }
                return Ok(());
            };
            for (key, child) in object {
                let (child_ty, declared) = key_type(schema, fields, others, key);
                path.push(PathElement::Field(key.clone()));
                let walked = walk_set(schema, child_ty, child, path, set);
                if walked.is_ok()
                    && (child.is_null()
                        || child.as_object().is_some_and(Map::is_empty)
                        || !declared)
                {
                    set.insert_slice(path);
                }
                path.pop();
                walked?;
            }
        }
        Shape::Items { items, keys } => {
            let Some(list) = value.as_array() else {
                if !value.is_null() {
                    set.insert_slice(path);
                }
                return Ok(());
            };
            let item_ty = schema.resolve(items);
            for (element, item) in index_items(keys, list, path)? {
                path.push(element);
                let walked = walk_set(schema, item_ty, item, path, set);
                set.insert_slice(path);
                path.pop();
                walked?;
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
        self.added.subtract_recursive(ignored);
        self.modified.subtract_recursive(ignored);
        self.removed.subtract_recursive(ignored);
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
/// present (possibly empty) in the versioned objects upstream compares (not so for
/// unstructured objects: [`Schema::set_unstructured`]). Upstream's typed objects omit
/// pointer-typed structs when nil, which the type model does not tell apart: such a field
/// (e.g. a Deployment's `spec.strategy.rollingUpdate`) is not marked added either.
pub fn compare(
    schema: &Schema,
    ty: &TypeRef,
    old: &Value,
    new: &Value,
) -> Result<Comparison, TypeError> {
    compare_walk(schema, ty, old, new, false)
}

/// [`compare`], leaving `metadata.managedFields` out on both sides.
pub(crate) fn compare_without_managed(
    schema: &Schema,
    ty: &TypeRef,
    old: &Value,
    new: &Value,
) -> Result<Comparison, TypeError> {
    compare_walk(schema, ty, old, new, true)
}

fn compare_walk(
    schema: &Schema,
    ty: &TypeRef,
    old: &Value,
    new: &Value,
    skip_managed: bool,
) -> Result<Comparison, TypeError> {
    let mut out = Comparison::default();
    let mut walk = Compare {
        schema,
        skip_managed,
        path: Vec::new(),
        out: &mut out,
    };
    walk.walk(schema.resolve(ty), Some(old), Some(new), false)?;
    Ok(out)
}

struct Compare<'a> {
    schema: &'a Schema,
    /// Whether `metadata.managedFields` is left out.
    skip_managed: bool,
    /// The path of the values compared.
    path: Vec<PathElement>,
    out: &'a mut Comparison,
}

impl Compare<'_> {
    fn leaf(&mut self, old: Option<&Value>, new: Option<&Value>) {
        match (old, new) {
            (None, Some(_)) => self.out.added.insert_slice(&self.path),
            (Some(_), None) => self.out.removed.insert_slice(&self.path),
            (Some(a), Some(b)) if a != b => self.out.modified.insert_slice(&self.path),
            _ => {}
        }
    }

    fn walk(
        &mut self,
        ty: &Type,
        old: Option<&Value>,
        new: Option<&Value>,
        struct_field: bool,
    ) -> Result<(), TypeError> {
        let schema = self.schema;
        let both_empty = old.is_none_or(empty_container) && new.is_none_or(empty_container);
        let shape_value = new.or(old);
        // A value whose type changed between the versions (only possible for untyped values)
        // is compared as one leaf.
        let kinds_differ = matches!((old, new), (Some(a), Some(b))
            if a.is_object() != b.is_object() || a.is_array() != b.is_array());
        match shape(ty, shape_value) {
            Shape::Leaf => {
                self.leaf(old, new);
                return Ok(());
            }
            _ if both_empty || kinds_differ => {
                self.leaf(old, new);
                return Ok(());
            }
            Shape::Granular { fields, others } => {
                let empty = Map::new();
                let (Some(a), Some(b)) = (
                    old.map_or(Some(&empty), Value::as_object),
                    new.map_or(Some(&empty), Value::as_object),
                ) else {
                    self.leaf(old, new);
                    return Ok(());
                };
                let in_metadata = self.skip_managed
                    && matches!(self.path.as_slice(), [PathElement::Field(f)] if f == "metadata");
                let only_b = b.iter().filter(|(k, _)| !a.contains_key(*k));
                let pairs = a
                    .iter()
                    .map(|(k, x)| (k, Some(x), b.get(k)))
                    .chain(only_b.map(|(k, y)| (k, None, Some(y))));
                for (key, x, y) in pairs {
                    if in_metadata && key == "managedFields" {
                        continue;
                    }
                    let (child_ty, declared) = key_type(schema, fields, others, key);
                    self.path.push(PathElement::Field(key.clone()));
                    let walked = self.walk(
                        child_ty,
                        x,
                        y,
                        declared
                            && !schema.is_unstructured()
                            && matches!(child_ty, Type::Struct(_)),
                    );
                    self.path.pop();
                    walked?;
                }
            }
            Shape::Items { items, keys } => {
                let empty = Vec::new();
                let (Some(a), Some(b)) = (
                    old.map_or(Some(&empty), Value::as_array),
                    new.map_or(Some(&empty), Value::as_array),
                ) else {
                    self.leaf(old, new);
                    return Ok(());
                };
                let item_ty = schema.resolve(items);
                let a = index_items(keys, a, &self.path)?;
                let b = index_items(keys, b, &self.path)?;
                let in_a: std::collections::BTreeSet<&PathElement> =
                    a.iter().map(|(e, _)| e).collect();
                let in_b: std::collections::BTreeMap<&PathElement, &Value> =
                    b.iter().map(|(e, v)| (e, *v)).collect();
                for (element, item) in &a {
                    let other = in_b.get(element).copied();
                    self.path.push(element.clone());
                    let walked = self.walk(item_ty, Some(item), other, false);
                    self.path.pop();
                    walked?;
                }
                for (element, item) in &b {
                    if !in_a.contains(element) {
                        self.path.push(element.clone());
                        let walked = self.walk(item_ty, None, Some(item), false);
                        self.path.pop();
                        walked?;
                    }
                }
            }
        }
        match (old, new) {
            (None, Some(_)) if !struct_field => self.out.added.insert_slice(&self.path),
            (Some(_), None) => self.out.removed.insert_slice(&self.path),
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::fieldpath::Path;
    use crate::schema::{Field, Struct};

    #[test]
    fn appearing_structs_are_added_only_in_unstructured_objects() {
        let inner = Type::Struct(Struct {
            fields: [(
                "x".to_owned(),
                Field {
                    ty: TypeRef::Inline(Box::new(Type::Scalar)),
                    patch_strategy: Vec::new(),
                    patch_merge_key: None,
                },
            )]
            .into(),
            ..Struct::default()
        });
        let root = Type::Struct(Struct {
            fields: [(
                "spec".to_owned(),
                Field {
                    ty: TypeRef::Inline(Box::new(inner)),
                    patch_strategy: Vec::new(),
                    patch_merge_key: None,
                },
            )]
            .into(),
            ..Struct::default()
        });
        let mut schema = Schema::default();
        schema.insert("R", root);
        let ty = TypeRef::Named("R".into());
        let (old, new) = (json!({}), json!({"spec": {"x": 1}}));
        let typed = compare(&schema, &ty, &old, &new).unwrap();
        assert_eq!(typed.added.paths(), vec![Path::fields(&["spec", "x"])]);
        schema.set_unstructured(true);
        let unstructured = compare(&schema, &ty, &old, &new).unwrap();
        assert_eq!(
            unstructured.added.paths(),
            vec![Path::fields(&["spec"]), Path::fields(&["spec", "x"])]
        );
    }
}
