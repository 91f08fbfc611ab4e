//! JSON in kube-apiserver's field order.
//!
//! Objects are `serde_json::Value`s, whose maps keep their keys sorted; kube-apiserver writes a
//! built-in kind from its Go struct, field by field in declaration order
//! (`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":…,"namespace":…,"uid":…,
//! "resourceVersion":…,"creationTimestamp":…},"data":…}`), and clients and golden files compare
//! those bytes. The [`Struct`] schemas list their fields in that order (the Go declaration
//! order, which is not always the protobuf numbers' order: `immutable` comes before a
//! ConfigMap's `data`, `kind` before `apiVersion`), so [`Typed`] writes a value of a schema's
//! type with its known fields in the schema's order, an inlined struct's fields where the
//! struct is, then any key the schema does not know, sorted. Maps are written with sorted keys,
//! as Go writes them.
//!
//! [`Ordered`] finds the type of a whole answer from its `apiVersion` and `kind` through a
//! table of kinds ([`Kinds`]: genplane-api's `order::schema_of` holds the built-in ones, the
//! meta/v1 kinds of [`crate::meta::schemas::schema_of`] among them): an object of a kind the
//! table knows, or a list of one (`kind`, `apiVersion`, `metadata`, `items`). Anything else,
//! custom resources and their lists included, is written with sorted keys, as upstream writes
//! unstructured objects (Go's encoder sorts a map's keys).

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{Map, Value};

use crate::codec::schema::{Field, Struct, Type};
use crate::meta::schemas::LIST;

/// The table of kinds a writer knows: the schema of the kind `kind` (second argument) of an
/// `apiVersion` (first argument), `None` for a kind it does not know (then written with
/// sorted keys). Lists are not kinds of their own: a `<Kind>List` is found from its item kind.
pub type Kinds = fn(&str, &str) -> Option<&'static Struct>;

/// A value written as a `ty`: see the module docs. A raw object inside ([`Type::Any`]) is
/// written as its kind when `kinds` knows it.
#[derive(Clone, Copy, Debug)]
pub struct Typed<'a> {
    /// The value.
    pub value: &'a Value,
    /// Its type.
    pub ty: Type,
    /// The kinds raw objects inside may be.
    pub kinds: Kinds,
}

impl<'a> Typed<'a> {
    /// `value` as a `ty`, raw objects inside as their kinds in `kinds`.
    pub fn new(value: &'a Value, ty: Type, kinds: Kinds) -> Self {
        Self { value, ty, kinds }
    }
}

/// Whether a value of `ty` has a struct somewhere inside (else it is written as it is).
fn has_struct(ty: Type) -> bool {
    match ty {
        Type::Struct(_) | Type::Any => true,
        Type::Map(item) | Type::List(item) | Type::Items(item) => has_struct(*item),
        _ => false,
    }
}

impl Serialize for Typed<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let kinds = self.kinds;
        match (self.ty, self.value) {
            (Type::Struct(schema), Value::Object(map)) => {
                let mut out = serializer.serialize_map(Some(map.len()))?;
                for_each_field(map, schema, &mut |key, value, ty| {
                    out.serialize_entry(key, &Typed::new(value, ty, kinds))
                })?;
                out.end()
            }
            // A raw object (a Table row's object, an embedded resource) that is itself a
            // built-in object is written as its kind.
            (Type::Any, Value::Object(_)) => Ordered::new(self.value, kinds).serialize(serializer),
            (Type::Map(item), Value::Object(map)) if has_struct(*item) => {
                let mut out = serializer.serialize_map(Some(map.len()))?;
                for (key, value) in map {
                    out.serialize_entry(key, &Typed::new(value, *item, kinds))?;
                }
                out.end()
            }
            (Type::List(item) | Type::Items(item), Value::Array(items)) if has_struct(*item) => {
                let mut out = serializer.serialize_seq(Some(items.len()))?;
                for value in items {
                    out.serialize_element(&Typed::new(value, *item, kinds))?;
                }
                out.end()
            }
            _ => self.value.serialize(serializer),
        }
    }
}

/// Calls `each` with every entry of `map`, an object of type `schema`, in the order upstream
/// writes them: the schema's fields in its order (an inlined struct's fields where it is),
/// then the keys the schema does not know, sorted (as [`Type::Any`]).
pub fn for_each_field<'v, E>(
    map: &'v Map<String, Value>,
    schema: &'static Struct,
    each: &mut impl FnMut(&'v String, &'v Value, Type) -> Result<(), E>,
) -> Result<(), E> {
    let known = known_fields(map, schema.fields, each)?;
    if known < map.len() {
        for (key, value) in map {
            if schema.field(key).is_none() {
                each(key, value, Type::Any)?;
            }
        }
    }
    Ok(())
}

/// The entries of `map` that are `fields`, in their order; answers how many there were.
fn known_fields<'v, E>(
    map: &'v Map<String, Value>,
    fields: &'static [Field],
    each: &mut impl FnMut(&'v String, &'v Value, Type) -> Result<(), E>,
) -> Result<usize, E> {
    let mut found = 0;
    for field in fields {
        match field.ty {
            Type::Struct(inner) if field.inline => found += known_fields(map, inner.fields, each)?,
            ty => {
                if let Some((key, value)) = map.get_key_value(field.name) {
                    each(key, value, ty)?;
                    found += 1;
                }
            }
        }
    }
    Ok(found)
}

/// An answer written in upstream's field order, its type found in `kinds` from its
/// `apiVersion` and `kind` (see the module docs).
#[derive(Clone, Copy, Debug)]
pub struct Ordered<'a> {
    /// The answer.
    pub value: &'a Value,
    /// The kinds it may be.
    pub kinds: Kinds,
}

impl<'a> Ordered<'a> {
    /// `value`, its type found in `kinds`.
    pub fn new(value: &'a Value, kinds: Kinds) -> Self {
        Self { value, kinds }
    }
}

impl Serialize for Ordered<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let kinds = self.kinds;
        match shape(self.value, kinds) {
            Some(Shape::Object(schema)) => {
                Typed::new(self.value, Type::Struct(schema), kinds).serialize(serializer)
            }
            Some(Shape::List(map, item)) => {
                let mut out = serializer.serialize_map(Some(map.len()))?;
                for_each_field(
                    map,
                    &LIST,
                    &mut |key, value, ty| match (key.as_str(), value) {
                        ("items", Value::Array(items)) => {
                            out.serialize_entry(key, &Items { items, item, kinds })
                        }
                        _ => out.serialize_entry(key, &Typed::new(value, ty, kinds)),
                    },
                )?;
                out.end()
            }
            None => self.value.serialize(serializer),
        }
    }
}

/// A list's items, each of the item type (or of its own kind, when it says another).
struct Items<'a> {
    items: &'a [Value],
    item: &'static Struct,
    kinds: Kinds,
}

impl Serialize for Items<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_seq(Some(self.items.len()))?;
        for value in self.items {
            let schema = object_schema(value, self.kinds).unwrap_or(self.item);
            out.serialize_element(&Typed::new(value, Type::Struct(schema), self.kinds))?;
        }
        out.end()
    }
}

/// What an answer is.
enum Shape<'a> {
    /// An object of a known type.
    Object(&'static Struct),
    /// A list (its map) of objects of a known type.
    List(&'a Map<String, Value>, &'static Struct),
}

fn shape(value: &Value, kinds: Kinds) -> Option<Shape<'_>> {
    let map = value.as_object()?;
    let kind = map.get("kind")?.as_str()?;
    let api_version = map.get("apiVersion")?.as_str()?;
    if let Some(schema) = kinds(api_version, kind) {
        return Some(Shape::Object(schema));
    }
    let item = kind.strip_suffix("List")?;
    if !map.get("items").is_some_and(Value::is_array) {
        return None;
    }
    kinds(api_version, item).map(|schema| Shape::List(map, schema))
}

/// The type of an object among `kinds`, from its `apiVersion` and `kind`.
pub fn object_schema(value: &Value, kinds: Kinds) -> Option<&'static Struct> {
    let map = value.as_object()?;
    let kind = map.get("kind")?.as_str()?;
    let api_version = map.get("apiVersion")?.as_str()?;
    kinds(api_version, kind)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    static INNER: Struct = Struct {
        name: "Inner",
        fields: &[
            Field::new("b", 1, Type::String),
            Field::new("a", 2, Type::String),
        ],
    };
    static OUTER: Struct = Struct {
        name: "Outer",
        fields: &[
            Field::new("z", 1, Type::String),
            Field::inline(2, &INNER),
            Field::new("y", 3, Type::List(&Type::Struct(&INNER))),
        ],
    };

    #[test]
    fn inlined_structs_are_written_where_they_are() {
        let value =
            json!({"y": [{"a": "1", "b": "2", "c": 3}], "a": "a", "b": "b", "z": "z", "c": 1});
        assert_eq!(
            serde_json::to_string(&Typed::new(
                &value,
                Type::Struct(&OUTER),
                crate::meta::schemas::schema_of
            ))
            .unwrap(),
            r#"{"z":"z","b":"b","a":"a","y":[{"b":"2","a":"1","c":3}],"c":1}"#
        );
    }
}
