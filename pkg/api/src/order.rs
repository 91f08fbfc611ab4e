//! The built-in kinds' JSON in kube-apiserver's field order.
//!
//! The writer is [`genplane_apimachinery::codec::order`]: a value of a schema's type with its
//! fields in the Go struct's order, an answer typed by its `apiVersion` and `kind` through a
//! table of kinds. [`schema_of`] is that table for the built-in kinds: the
//! [`catalog`](crate::catalog)'s, the subresource kinds `Scale` and `TokenRequest`, and the
//! meta/v1 kinds (`Status`, `PartialObjectMetadata`, `Table`); [`ordered`], [`typed`],
//! [`to_vec`] and [`write_into`] write with it. A list of a built-in kind is written in order
//! too; anything else, custom resources and their lists included, with sorted keys, as
//! upstream writes unstructured objects.

use genplane_apimachinery::codec::order::{self, Ordered, Typed};
use genplane_apimachinery::codec::schema::{Struct, Type};
use serde_json::Value;

/// The type of the built-in kind `kind` of `api_version`: a resource's of the catalog, a
/// subresource's (`Scale`, `TokenRequest`), `Status` and the `meta.k8s.io` answers
/// (`PartialObjectMetadata`, `Table`). Lists are not kinds of their own here. The table of
/// kinds ([`order::Kinds`]) of the built-in answers.
pub fn schema_of(api_version: &str, kind: &str) -> Option<&'static Struct> {
    if let Some(schema) = genplane_apimachinery::meta::schemas::schema_of(api_version, kind) {
        return Some(schema);
    }
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    match (group, version, kind) {
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

/// The type of a built-in object, from its `apiVersion` and `kind`.
pub fn object_schema(value: &Value) -> Option<&'static Struct> {
    order::object_schema(value, schema_of)
}

/// `value`, an answer, to be written in upstream's field order (its type found by
/// [`schema_of`]).
pub fn ordered(value: &Value) -> Ordered<'_> {
    Ordered::new(value, schema_of)
}

/// `value` to be written as a `ty`, built-in objects inside as their kinds.
pub fn typed(value: &Value, ty: Type) -> Typed<'_> {
    Typed::new(value, ty, schema_of)
}

/// Appends `value`, an answer, to `out` as compact JSON in upstream's field order.
pub fn write_into(out: &mut Vec<u8>, value: &Value) {
    // Writing a Value into a Vec cannot fail.
    let _ = serde_json::to_writer(out, &ordered(value));
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
    use genplane_apimachinery::meta::schemas::STATUS;
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
