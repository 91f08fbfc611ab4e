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
//! [`Ordered`] finds the type of a whole answer from its `apiVersion` and `kind`: a built-in
//! kind of the [`catalog`](crate::catalog) (and the subresource kinds `Scale` and
//! `TokenRequest`), a `Status`, a list of a built-in kind (`kind`, `apiVersion`, `metadata`,
//! `items`), `PartialObjectMetadata(List)` and `Table`. Anything else, custom resources and
//! their lists included, is written with sorted keys, as upstream writes unstructured objects
//! (Go's encoder sorts a map's keys).

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{Map, Value};

use crate::decode::{Field, LIST_META, OBJECT_META, STATUS, Struct, Type};

/// A value written as a `ty`: see the module docs.
#[derive(Clone, Copy, Debug)]
pub struct Typed<'a> {
    /// The value.
    pub value: &'a Value,
    /// Its type.
    pub ty: Type,
}

impl<'a> Typed<'a> {
    /// `value` as a `ty`.
    pub fn new(value: &'a Value, ty: Type) -> Self {
        Self { value, ty }
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
        match (self.ty, self.value) {
            (Type::Struct(schema), Value::Object(map)) => {
                let mut out = serializer.serialize_map(Some(map.len()))?;
                for_each_field(map, schema, &mut |key, value, ty| {
                    out.serialize_entry(key, &Typed::new(value, ty))
                })?;
                out.end()
            }
            // A raw object (a Table row's object, an embedded resource) that is itself a
            // built-in object is written as its kind.
            (Type::Any, Value::Object(_)) => Ordered(self.value).serialize(serializer),
            (Type::Map(item), Value::Object(map)) if has_struct(*item) => {
                let mut out = serializer.serialize_map(Some(map.len()))?;
                for (key, value) in map {
                    out.serialize_entry(key, &Typed::new(value, *item))?;
                }
                out.end()
            }
            (Type::List(item) | Type::Items(item), Value::Array(items)) if has_struct(*item) => {
                let mut out = serializer.serialize_seq(Some(items.len()))?;
                for value in items {
                    out.serialize_element(&Typed::new(value, *item))?;
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

/// An answer written in upstream's field order, its type found from its `apiVersion` and
/// `kind` (see the module docs).
#[derive(Clone, Copy, Debug)]
pub struct Ordered<'a>(pub &'a Value);

impl Serialize for Ordered<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match shape(self.0) {
            Some(Shape::Object(schema)) => {
                Typed::new(self.0, Type::Struct(schema)).serialize(serializer)
            }
            Some(Shape::List(map, item)) => {
                let mut out = serializer.serialize_map(Some(map.len()))?;
                for_each_field(
                    map,
                    &LIST,
                    &mut |key, value, ty| match (key.as_str(), value) {
                        ("items", Value::Array(items)) => {
                            out.serialize_entry(key, &Items { items, item })
                        }
                        _ => out.serialize_entry(key, &Typed::new(value, ty)),
                    },
                )?;
                out.end()
            }
            None => self.0.serialize(serializer),
        }
    }
}

/// A list's items, each of the item type (or of its own kind, when it says another).
struct Items<'a> {
    items: &'a [Value],
    item: &'static Struct,
}

impl Serialize for Items<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_seq(Some(self.items.len()))?;
        for value in self.items {
            let schema = object_schema(value).unwrap_or(self.item);
            out.serialize_element(&Typed::new(value, Type::Struct(schema)))?;
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

fn shape(value: &Value) -> Option<Shape<'_>> {
    let map = value.as_object()?;
    let kind = map.get("kind")?.as_str()?;
    let api_version = map.get("apiVersion")?.as_str()?;
    if let Some(schema) = schema_of(api_version, kind) {
        return Some(Shape::Object(schema));
    }
    let item = kind.strip_suffix("List")?;
    if !map.get("items").is_some_and(Value::is_array) {
        return None;
    }
    schema_of(api_version, item).map(|schema| Shape::List(map, schema))
}

/// The type of a built-in object, from its `apiVersion` and `kind`.
pub fn object_schema(value: &Value) -> Option<&'static Struct> {
    let map = value.as_object()?;
    let kind = map.get("kind")?.as_str()?;
    let api_version = map.get("apiVersion")?.as_str()?;
    schema_of(api_version, kind)
}

/// The type of the built-in kind `kind` of `api_version`: a resource's of the catalog, a
/// subresource's (`Scale`, `TokenRequest`), `Status` and the `meta.k8s.io` answers
/// (`PartialObjectMetadata`, `Table`). Lists are not kinds of their own here.
pub fn schema_of(api_version: &str, kind: &str) -> Option<&'static Struct> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    match (group, version, kind) {
        ("", "v1", "Status") => return Some(&STATUS),
        ("meta.k8s.io", "v1" | "v1beta1", "PartialObjectMetadata") => {
            return Some(&PARTIAL_OBJECT_METADATA);
        }
        ("meta.k8s.io", "v1" | "v1beta1", "Table") => return Some(&TABLE),
        ("autoscaling", "v1", "Scale") => return Some(&crate::autoscaling::SCHEMA),
        ("authentication.k8s.io", "v1", "TokenRequest") => {
            return Some(&crate::authentication::TOKEN_REQUEST);
        }
        _ => {}
    }
    crate::catalog::all()
        .iter()
        .find(|r| r.kind == kind && r.version == version && r.group == group)
        .map(|r| r.schema)
}

/// `metav1.List`'s fields, the shape of every list: the items are each of the list's item
/// type.
static LIST: Struct = Struct {
    name: "List",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&LIST_META)),
        Field::new("items", 2, Type::List(&Type::Any)),
    ],
};

/// `metav1.PartialObjectMetadata`.
static PARTIAL_OBJECT_METADATA: Struct = Struct {
    name: "PartialObjectMetadata",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
    ],
};

/// `metav1.Table`.
static TABLE: Struct = Struct {
    name: "Table",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&LIST_META)),
        Field::new(
            "columnDefinitions",
            2,
            Type::List(&Type::Struct(&TABLE_COLUMN_DEFINITION)),
        )
        .keep_empty(),
        Field::new("rows", 3, Type::List(&Type::Struct(&TABLE_ROW))).keep_empty(),
    ],
};

/// `metav1.TableColumnDefinition`.
static TABLE_COLUMN_DEFINITION: Struct = Struct {
    name: "TableColumnDefinition",
    fields: &[
        Field::new("name", 1, Type::String),
        Field::new("type", 2, Type::String),
        Field::new("format", 3, Type::String),
        Field::new("description", 4, Type::String),
        Field::new("priority", 5, Type::Int32),
    ],
};

/// `metav1.TableRow`: its `object` is a raw object (written as its own kind).
static TABLE_ROW: Struct = Struct {
    name: "TableRow",
    fields: &[
        Field::new("cells", 1, Type::List(&Type::Any)),
        Field::new(
            "conditions",
            2,
            Type::List(&Type::Struct(&TABLE_ROW_CONDITION)),
        ),
        Field::new("object", 3, Type::Any),
    ],
};

/// `metav1.TableRowCondition`.
static TABLE_ROW_CONDITION: Struct = Struct {
    name: "TableRowCondition",
    fields: &[
        Field::new("type", 1, Type::String),
        Field::new("status", 2, Type::String),
        Field::new("reason", 3, Type::String),
        Field::new("message", 4, Type::String),
    ],
};

/// Appends `value`, an answer, to `out` as compact JSON in upstream's field order.
pub fn write_into(out: &mut Vec<u8>, value: &Value) {
    // Writing a Value into a Vec cannot fail.
    let _ = serde_json::to_writer(out, &Ordered(value));
}

/// `value`, an answer, as compact JSON in upstream's field order.
pub fn to_vec(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    write_into(&mut out, value);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text(value: &Value) -> String {
        String::from_utf8(to_vec(value)).unwrap()
    }

    #[test]
    fn built_in_kinds_are_written_in_go_order() {
        let config_map = json!({
            "apiVersion": "v1", "kind": "ConfigMap", "data": {"b": "2", "a": "1"},
            "immutable": true, "zz": 1, "aa": 2,
            "metadata": {"uid": "u", "resourceVersion": "5", "name": "n", "namespace": "d",
                "labels": {"y": "1", "x": "2"}, "creationTimestamp": "2026-01-01T00:00:00Z",
                "ownerReferences": [{"uid": "o", "name": "p", "kind": "K", "apiVersion": "v1"}]},
        });
        assert_eq!(
            text(&config_map),
            r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"n","namespace":"d","uid":"u","resourceVersion":"5","creationTimestamp":"2026-01-01T00:00:00Z","labels":{"x":"2","y":"1"},"ownerReferences":[{"apiVersion":"v1","kind":"K","name":"p","uid":"o"}]},"immutable":true,"data":{"a":"1","b":"2"},"aa":2,"zz":1}"#
        );
    }

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
            serde_json::to_string(&Typed::new(&value, Type::Struct(&OUTER))).unwrap(),
            r#"{"z":"z","b":"b","a":"a","y":[{"b":"2","a":"1","c":3}],"c":1}"#
        );
    }

    #[test]
    fn statuses_lists_and_meta_answers() {
        let status = json!({"apiVersion": "v1", "kind": "Status", "code": 404, "details": {},
            "message": "m", "metadata": {}, "reason": "NotFound", "status": "Failure"});
        assert_eq!(
            text(&status),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"m","reason":"NotFound","details":{},"code":404}"#
        );
        let list = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleList",
            "items": [{"rules": [], "metadata": {"name": "r"}, "kind": "Role",
                "apiVersion": "rbac.authorization.k8s.io/v1"}, {"metadata": {"name": "s"}, "rules": []}],
            "metadata": {"resourceVersion": "7", "continue": "c"}});
        assert_eq!(
            text(&list),
            r#"{"kind":"RoleList","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"resourceVersion":"7","continue":"c"},"items":[{"kind":"Role","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"name":"r"},"rules":[]},{"metadata":{"name":"s"},"rules":[]}]}"#
        );
        let table = json!({"apiVersion": "meta.k8s.io/v1", "kind": "Table", "metadata": {},
            "rows": [{"object": {"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
                "metadata": {"namespace": "d", "name": "n"}}, "cells": ["n"]}],
            "columnDefinitions": [{"type": "string", "name": "Name", "priority": 0,
                "format": "name", "description": "d"}]});
        assert_eq!(
            text(&table),
            r#"{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{},"columnDefinitions":[{"name":"Name","type":"string","format":"name","description":"d","priority":0}],"rows":[{"cells":["n"],"object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"n","namespace":"d"}}}]}"#
        );
    }

    #[test]
    fn every_kind_starts_with_its_type_meta_and_metadata() {
        let subresources = [
            &crate::autoscaling::SCHEMA,
            &crate::authentication::TOKEN_REQUEST,
        ];
        let kinds = crate::catalog::all().iter().map(|r| r.schema);
        for schema in kinds.chain(subresources).chain([&STATUS]) {
            let names: Vec<&str> = schema.fields.iter().take(3).map(|f| f.name).collect();
            assert_eq!(names, ["kind", "apiVersion", "metadata"], "{}", schema.name);
        }
        for r in crate::catalog::all() {
            assert_eq!(
                schema_of(&r.api_version(), r.kind).map(|s| s.name),
                Some(r.schema.name)
            );
        }
    }

    #[test]
    fn custom_resources_keep_sorted_keys() {
        let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "spec": {"b": 1, "a": 2}, "metadata": {"uid": "u", "name": "n"}});
        assert_eq!(text(&widget), serde_json::to_string(&widget).unwrap());
        let list = json!({"apiVersion": "example.com/v1", "kind": "WidgetList",
            "items": [widget], "metadata": {"resourceVersion": "1"}});
        assert_eq!(text(&list), serde_json::to_string(&list).unwrap());
    }
}
