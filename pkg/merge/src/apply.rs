//! The value side of server-side apply: merging an applied configuration into a live object by
//! the type model, and removing the fields a set names.
//!
//! Merging keeps what the live object has and sets what the configuration sets: leaves
//! (scalars, atomic lists, atomic maps and structs) are replaced, granular maps and structs are
//! merged key by key, set lists by value and map lists by their key fields. The items of a
//! merged list keep the live order unless the configuration orders shared items differently;
//! items only the configuration has come where it puts them.

use serde_json::{Map, Value};

use crate::fieldpath::{Path, PathElement, Set};
use crate::schema::{Schema, Type, TypeRef};
use crate::typed::{Shape, TypeError, index_items, key_type, shape};

/// Merges `config` into `live` (both of type `ty`).
pub fn merge(
    schema: &Schema,
    ty: &TypeRef,
    live: &Value,
    config: &Value,
) -> Result<Value, TypeError> {
    merge_into(schema, ty, live.clone(), config)
}

/// [`merge`], taking the live object by value (no copy of it is made).
pub fn merge_into(
    schema: &Schema,
    ty: &TypeRef,
    live: Value,
    config: &Value,
) -> Result<Value, TypeError> {
    merge_value(schema, schema.resolve(ty), live, config, &Path::default())
}

fn merge_value(
    schema: &Schema,
    ty: &Type,
    live: Value,
    config: &Value,
    path: &Path,
) -> Result<Value, TypeError> {
    // A null configuration merged into a granular map or struct, or into a list merged by
    // item, merges nothing into it: the live value stays (upstream merges null as an empty
    // map or list; only where both are empty, or the type is atomic, does null replace).
    let keeps_live = match (&live, config) {
        (Value::Object(l), Value::Null) => {
            !l.is_empty() && matches!(shape(ty, Some(&live)), Shape::Granular { .. })
        }
        (Value::Array(l), Value::Null) => {
            !l.is_empty() && matches!(shape(ty, Some(&live)), Shape::Items { .. })
        }
        _ => false,
    };
    if keeps_live {
        return Ok(live);
    }
    match (shape(ty, Some(config)), live, config) {
        (Shape::Granular { fields, others }, Value::Object(mut l), Value::Object(c)) => {
            for (key, value) in c {
                match l.get_mut(key) {
                    Some(slot) => {
                        let existing = std::mem::take(slot);
                        let (child_ty, _) = key_type(schema, fields, others, key);
                        *slot = merge_value(
                            schema,
                            child_ty,
                            existing,
                            value,
                            &path.child(PathElement::Field(key.clone())),
                        )?;
                    }
                    None => {
                        l.insert(key.clone(), value.clone());
                    }
                }
            }
            Ok(Value::Object(l))
        }
        (Shape::Items { items, keys }, Value::Array(l), Value::Array(c)) => {
            let l = &l;
            let item_ty = schema.resolve(items);
            let lhs = index_items(keys, l, &path.0)?;
            let rhs = index_items(keys, c, &path.0)?;
            let find = |list: &[(PathElement, &Value)], e: &PathElement| {
                list.iter().find(|(x, _)| x == e).map(|(_, v)| (*v).clone())
            };
            let mut shared: std::collections::VecDeque<&PathElement> = rhs
                .iter()
                .map(|(e, _)| e)
                .filter(|e| lhs.iter().any(|(x, _)| x == *e))
                .collect();
            let mut out = Vec::with_capacity(lhs.len().max(rhs.len()));
            let merge_item = |e: &PathElement, l: Option<Value>, c: &Value| match l {
                Some(l) => merge_value(schema, item_ty, l, c, &path.child(e.clone())),
                None => Ok(c.clone()),
            };
            let (mut li, mut ri) = (0, 0);
            while li < lhs.len() || ri < rhs.len() {
                if li < lhs.len() && ri < rhs.len() {
                    let (le, _) = &lhs[li];
                    if *le == rhs[ri].0 {
                        out.push(merge_item(le, find(&lhs, le), rhs[ri].1)?);
                        li += 1;
                        ri += 1;
                        shared.pop_front();
                        continue;
                    }
                    let in_rhs = rhs.iter().any(|(x, _)| x == le);
                    if in_rhs && shared.front().is_some_and(|s| *s != le) {
                        li += 1;
                        continue;
                    }
                }
                if li < lhs.len() {
                    let (le, lv) = &lhs[li];
                    if !rhs.iter().any(|(x, _)| x == le) {
                        out.push((*lv).clone());
                        li += 1;
                        continue;
                    }
                }
                if ri < rhs.len() {
                    let (re, rv) = &rhs[ri];
                    out.push(merge_item(re, find(&lhs, re), rv)?);
                    ri += 1;
                    if shared.front().is_some_and(|s| *s == re) {
                        shared.pop_front();
                    }
                }
            }
            Ok(Value::Array(out))
        }
        _ => Ok(config.clone()),
    }
}

/// The first place where `config` (of type `ty`) sets an atomic list, map or struct to a
/// non-empty value, in upstream's path notation (`.spec.list`): what a MutatingAdmissionPolicy's
/// apply configuration may not do, since it would replace the whole value.
pub fn atomic_composite(schema: &Schema, ty: &TypeRef, config: &Value) -> Option<String> {
    atomic_composite_at(schema, schema.resolve(ty), config, &Path::default())
}

fn atomic_composite_at(schema: &Schema, ty: &Type, config: &Value, path: &Path) -> Option<String> {
    match (shape(ty, Some(config)), config) {
        (Shape::Granular { fields, others }, Value::Object(c)) => {
            c.iter().find_map(|(key, value)| {
                let (child, _) = key_type(schema, fields, others, key);
                atomic_composite_at(
                    schema,
                    child,
                    value,
                    &path.child(PathElement::Field(key.clone())),
                )
            })
        }
        (Shape::Items { items, keys }, Value::Array(c)) => {
            let item_ty = schema.resolve(items);
            let indexed = index_items(keys, c, &path.0).ok()?;
            indexed.into_iter().find_map(|(element, item)| {
                atomic_composite_at(schema, item_ty, item, &path.child(element))
            })
        }
        (Shape::Leaf, Value::Object(c)) if !c.is_empty() && !matches!(ty, Type::Untyped) => {
            Some(path.to_string())
        }
        (Shape::Leaf, Value::Array(c)) if !c.is_empty() && !matches!(ty, Type::Untyped) => {
            Some(path.to_string())
        }
        _ => None,
    }
}

/// Removes from `value` (of type `ty`) every field, map key and list item whose path is a
/// member of `set`, and descends where `set` has members further down.
pub fn remove_items(schema: &Schema, ty: &TypeRef, value: &Value, set: &Set) -> Value {
    remove_value(schema, schema.resolve(ty), value, set)
}

fn remove_value(schema: &Schema, ty: &Type, value: &Value, set: &Set) -> Value {
    if set.is_empty() {
        return value.clone();
    }
    match (shape(ty, Some(value)), value) {
        (Shape::Granular { fields, others }, Value::Object(object)) => {
            let mut out = Map::new();
            for (key, child) in object {
                let element = Path(vec![PathElement::Field(key.clone())]);
                if set.has(&element) {
                    continue;
                }
                let below = set.below(&element);
                let (child_ty, _) = key_type(schema, fields, others, key);
                out.insert(key.clone(), remove_value(schema, child_ty, child, &below));
            }
            Value::Object(out)
        }
        (Shape::Items { items, keys }, Value::Array(list)) => {
            let item_ty = schema.resolve(items);
            let mut out = Vec::with_capacity(list.len());
            for item in list {
                let Ok(element) = crate::typed::item_element(keys, item, &[]) else {
                    out.push(item.clone());
                    continue;
                };
                let element = Path(vec![element]);
                if set.has(&element) {
                    continue;
                }
                out.push(remove_value(schema, item_ty, item, &set.below(&element)));
            }
            Value::Array(out)
        }
        _ => value.clone(),
    }
}

/// Adds to `set` every declared struct field that has members below it, so that removing the
/// set's items also removes such fields (upstream's "named fields are members").
pub fn named_fields_as_members(schema: &Schema, ty: &TypeRef, set: &Set) -> Set {
    let mut out = set.clone();
    walk_named(schema, schema.resolve(ty), set, &Path::default(), &mut out);
    out
}

fn walk_named(schema: &Schema, ty: &Type, set: &Set, at: &Path, out: &mut Set) {
    match ty {
        Type::Struct(s) => {
            for (name, field) in &s.fields {
                let element = Path(vec![PathElement::Field(name.clone())]);
                let below = set.below(&element);
                if below.is_empty() {
                    continue;
                }
                let child = at.child(PathElement::Field(name.clone()));
                out.insert(&child);
                walk_named(schema, schema.resolve(&field.ty), &below, &child, out);
            }
        }
        Type::Map(m) => {
            for (element, below) in set.children() {
                let child = at.child(element.clone());
                walk_named(schema, schema.resolve(&m.values), below, &child, out);
            }
        }
        Type::List(l) => {
            for (element, below) in set.children() {
                let child = at.child(element.clone());
                walk_named(schema, schema.resolve(&l.items), below, &child, out);
            }
        }
        Type::Scalar | Type::Untyped => {}
    }
}
