//! The schemas kube-apiserver publishes in `/openapi/v3` for a custom resource kind of one
//! version (upstream's `pkg/controller/openapi/builder` with the OpenAPI v3 options), ready to
//! go into the `components.schemas` of the group-version document under [`component_name`]:
//!
//! - [`kind_schema`]: the version's structural schema as published: only the fields upstream's
//!   structural model keeps (`example`, `externalDocs`, `$schema` and unknown keys are dropped;
//!   `false` flags and empty lists are left out), `x-kubernetes-int-or-string` unfolded into
//!   `anyOf: [{type: integer}, {type: string}]`, `apiVersion`, `kind` and `metadata` (a
//!   reference to `ObjectMeta`) set at the root and in every embedded resource, and
//!   `x-kubernetes-group-version-kind`. A schema that is not structural is published as a bare
//!   `type: object`, as upstream does.
//! - [`list_schema`]: the list kind.
//! - [`with_selectable_fields`]: `x-kubernetes-selectable-fields`, which upstream adds to both.
//!
//! The document also needs the metadata components these refer to (`ObjectMeta`, `ListMeta`
//! and what they use) and the paths of the resource; those come from the document builder.

use serde_json::{Map, Value, json};

use crate::structural;

/// The prefix of component references.
const COMPONENTS: &str = "#/components/schemas/";
const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";

const API_VERSION_DOC: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND_DOC: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const EMBEDDED_API_VERSION_DOC: &str = "apiVersion defines the versioned schema of this representation of an object. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const EMBEDDED_KIND_DOC: &str = "kind is a string value representing the type of this object. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const METADATA_DOC: &str = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const LIST_METADATA_DOC: &str = "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";

/// The component name of a kind: the group reversed, then version and kind, e.g.
/// `com.example.stable.v1.CronTab` for `stable.example.com/v1, Kind=CronTab`.
pub fn component_name(group: &str, version: &str, kind: &str) -> String {
    let reversed: Vec<&str> = group.split('.').rev().collect();
    format!("{}.{version}.{kind}", reversed.join("."))
}

/// The `$ref` value pointing at a kind's component.
pub fn component_ref(group: &str, version: &str, kind: &str) -> String {
    format!("{COMPONENTS}{}", component_name(group, version, kind))
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!([{"group": group, "version": version, "kind": kind}])
}

fn reference(name: &str, description: &str) -> Value {
    json!({"allOf": [{"$ref": format!("{COMPONENTS}{name}")}], "description": description})
}

fn string_property(description: &str) -> Value {
    json!({"description": description, "type": "string"})
}

/// The published schema of `kind` in `group`/`version`, from the version's `openAPIV3Schema`
/// (`Value::Null` when the version has none).
pub fn kind_schema(schema: &Value, group: &str, version: &str, kind: &str) -> Value {
    let mut out = if !schema.is_null() && structural::is_publishable(schema) {
        let mut published = publish(schema, true);
        if let Some(map) = published.as_object_mut() {
            let properties = map
                .entry("properties")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Some(properties) = properties.as_object_mut() {
                properties.insert("metadata".into(), reference(OBJECT_META, METADATA_DOC));
                properties.insert("apiVersion".into(), string_property(API_VERSION_DOC));
                properties.insert("kind".into(), string_property(KIND_DOC));
            }
        }
        add_embedded_properties(&mut published);
        published
    } else {
        json!({"type": "object"})
    };
    if let Some(map) = out.as_object_mut() {
        map.insert(
            "x-kubernetes-group-version-kind".into(),
            gvk(group, version, kind),
        );
    }
    out
}

/// The published schema of the list kind `list_kind` of `kind` (`plural` is the resource).
pub fn list_schema(group: &str, version: &str, kind: &str, list_kind: &str, plural: &str) -> Value {
    json!({
        "description": format!("{list_kind} is a list of {kind}"),
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": string_property(API_VERSION_DOC),
            "kind": string_property(KIND_DOC),
            "items": {
                "description": format!("List of {plural}. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md"),
                "type": "array",
                "items": {"$ref": component_ref(group, version, kind)},
            },
            "metadata": reference(LIST_META, LIST_METADATA_DOC),
        },
        "x-kubernetes-group-version-kind": gvk(group, version, list_kind),
    })
}

/// Adds `x-kubernetes-selectable-fields` (the version's `selectableFields` JSON paths, without
/// the leading dot) to a kind or list schema, as upstream does when there are any.
pub fn with_selectable_fields(schema: &mut Value, json_paths: &[&str]) {
    if json_paths.is_empty() {
        return;
    }
    let fields: Vec<Value> = json_paths
        .iter()
        .map(|p| json!({"fieldPath": p.strip_prefix('.').unwrap_or(p)}))
        .collect();
    if let Some(map) = schema.as_object_mut() {
        map.insert(
            "x-kubernetes-selectable-fields".into(),
            Value::Array(fields),
        );
    }
}

/// Keys copied as they are when set.
const PLAIN_KEYS: &[&str] = &[
    "type",
    "description",
    "title",
    "default",
    "format",
    "maximum",
    "minimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "multipleOf",
    "maxProperties",
    "minProperties",
    "x-kubernetes-list-type",
    "x-kubernetes-map-type",
];
/// Flags copied only when true.
const FLAG_KEYS: &[&str] = &[
    "nullable",
    "exclusiveMaximum",
    "exclusiveMinimum",
    "uniqueItems",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
];
/// Lists copied only when not empty.
const LIST_KEYS: &[&str] = &[
    "enum",
    "required",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-validations",
];

/// A schema as upstream's structural model keeps it; `structure` is false below value
/// validations (where `x-kubernetes-int-or-string` is not unfolded).
fn publish(schema: &Value, structure: bool) -> Value {
    let Some(raw) = schema.as_object() else {
        return schema.clone();
    };
    let mut out = Map::new();
    for &key in PLAIN_KEYS {
        if let Some(v) = raw.get(key).filter(|v| !v.is_null()) {
            if v.as_str() == Some("") {
                continue;
            }
            out.insert(key.to_owned(), v.clone());
        }
    }
    for &key in FLAG_KEYS {
        if raw.get(key) == Some(&Value::Bool(true)) {
            out.insert(key.to_owned(), Value::Bool(true));
        }
    }
    for &key in LIST_KEYS {
        if let Some(v) = raw
            .get(key)
            .filter(|v| v.as_array().is_some_and(|a| !a.is_empty()))
        {
            out.insert(key.to_owned(), v.clone());
        }
    }
    if let Some(Value::Array(rules)) = out.get_mut("x-kubernetes-validations") {
        for rule in rules {
            normalize_rule(rule);
        }
    }
    if let Some(items) = raw.get("items").filter(|v| v.is_object()) {
        out.insert("items".into(), publish(items, structure));
    }
    if let Some(properties) = raw.get("properties").and_then(Value::as_object)
        && !properties.is_empty()
    {
        let published = properties
            .iter()
            .map(|(k, v)| (k.clone(), publish(v, structure)))
            .collect();
        out.insert("properties".into(), Value::Object(published));
    }
    if structure {
        match raw.get("additionalProperties") {
            Some(Value::Bool(b)) => {
                out.insert("additionalProperties".into(), Value::Bool(*b));
            }
            Some(v @ Value::Object(_)) => {
                out.insert("additionalProperties".into(), publish(v, true));
            }
            _ => {}
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(list) = raw.get(key).and_then(Value::as_array)
            && !list.is_empty()
        {
            let published = list.iter().map(|v| publish(v, false)).collect();
            out.insert(key.to_owned(), Value::Array(published));
        }
    }
    if let Some(not) = raw.get("not").filter(|v| v.is_object()) {
        out.insert("not".into(), publish(not, false));
    }
    if structure && raw.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
        unfold_int_or_string(&mut out);
    }
    Value::Object(out)
}

/// A validation rule as upstream serializes it: `rule` always, the other fields when set.
fn normalize_rule(rule: &mut Value) {
    let Some(map) = rule.as_object() else {
        return;
    };
    let mut out = Map::new();
    let text = map.get("rule").filter(|v| v.is_string()).cloned();
    out.insert("rule".into(), text.unwrap_or_else(|| Value::from("")));
    for key in ["message", "messageExpression", "reason", "fieldPath"] {
        if let Some(v) = map
            .get(key)
            .filter(|v| v.as_str().is_some_and(|s| !s.is_empty()))
        {
            out.insert(key.to_owned(), v.clone());
        }
    }
    if let Some(v) = map.get("optionalOldSelf").filter(|v| v.is_boolean()) {
        out.insert("optionalOldSelf".into(), v.clone());
    }
    *rule = Value::Object(out);
}

fn int_or_string_any_of() -> Value {
    json!([{"type": "integer"}, {"type": "string"}])
}

fn is_int_or_string_any_of(value: Option<&Value>) -> bool {
    value == Some(&int_or_string_any_of())
}

/// Spells out `x-kubernetes-int-or-string` as `anyOf`, as upstream's `Unfold` does.
fn unfold_int_or_string(out: &mut Map<String, Value>) {
    let first_all_of_any_of = out
        .get("allOf")
        .and_then(Value::as_array)
        .and_then(|all| all.first())
        .and_then(|first| first.get("anyOf"));
    if is_int_or_string_any_of(out.get("anyOf")) || is_int_or_string_any_of(first_all_of_any_of) {
        return;
    }
    if !out.contains_key("anyOf") {
        out.insert("anyOf".into(), int_or_string_any_of());
    } else {
        let mut all_of = vec![json!({"anyOf": int_or_string_any_of()})];
        if let Some(Value::Array(rest)) = out.remove("allOf") {
            all_of.extend(rest);
        }
        out.insert("allOf".into(), Value::Array(all_of));
    }
}

/// Gives every embedded resource its `apiVersion`, `kind` and `metadata`, and requires the
/// first two, as upstream does.
fn add_embedded_properties(schema: &mut Value) {
    let Some(map) = schema.as_object_mut() else {
        return;
    };
    if let Some(Value::Object(properties)) = map.get_mut("properties") {
        for property in properties.values_mut() {
            add_embedded_properties(property);
        }
    }
    if let Some(items) = map.get_mut("items") {
        add_embedded_properties(items);
    }
    if let Some(values) = map.get_mut("additionalProperties") {
        add_embedded_properties(values);
    }
    if map.get("x-kubernetes-embedded-resource") != Some(&Value::Bool(true)) {
        return;
    }
    let properties = map
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(properties) = properties.as_object_mut() {
        properties.insert(
            "apiVersion".into(),
            string_property(EMBEDDED_API_VERSION_DOC),
        );
        properties.insert("kind".into(), string_property(EMBEDDED_KIND_DOC));
        properties.insert("metadata".into(), reference(OBJECT_META, METADATA_DOC));
    }
    let required = map
        .entry("required")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Some(required) = required.as_array_mut() {
        for name in ["kind", "apiVersion"] {
            if !required.iter().any(|r| r == name) {
                required.push(Value::from(name));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn component_names_reverse_the_group() {
        assert_eq!(
            component_name("stable.example.com", "v1", "CronTab"),
            "com.example.stable.v1.CronTab"
        );
        assert_eq!(
            component_ref("example.com", "v1beta1", "Foo"),
            "#/components/schemas/com.example.v1beta1.Foo"
        );
    }

    #[test]
    fn kind_schema_publishes_the_structural_schema_with_type_and_object_meta() {
        let schema = json!({
            "type": "object",
            "description": "A CronTab.",
            "example": {"spec": {}},
            "externalDocs": {"url": "https://example.com"},
            "x-kubernetes-validations": [{"rule": "has(self.spec)", "message": "", "reason": null, "extra": 1}],
            "properties": {
                "apiVersion": {"type": "string", "description": "mine"},
                "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}}},
                "spec": {
                    "type": "object",
                    "nullable": false,
                    "required": [],
                    "x-kubernetes-validations": [],
                    "properties": {
                        "size": {"x-kubernetes-int-or-string": true, "description": "replicas or percent"},
                        "ports": {
                            "type": "array",
                            "x-kubernetes-list-type": "map",
                            "x-kubernetes-list-map-keys": ["name"],
                            "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}},
                        },
                        "template": {
                            "type": "object",
                            "x-kubernetes-embedded-resource": true,
                            "x-kubernetes-preserve-unknown-fields": true,
                            "required": ["spec"],
                        },
                        "mode": {"type": "string", "enum": ["a", "b"], "default": "a", "anyOf": [{"maxLength": 1}]},
                    },
                },
            },
        });
        let published = kind_schema(&schema, "stable.example.com", "v1", "CronTab");
        assert_eq!(
            published,
            json!({
                "type": "object",
                "description": "A CronTab.",
                "x-kubernetes-validations": [{"rule": "has(self.spec)"}],
                "properties": {
                    "apiVersion": {"type": "string", "description": API_VERSION_DOC},
                    "kind": {"type": "string", "description": KIND_DOC},
                    "metadata": {
                        "allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}],
                        "description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
                    },
                    "spec": {
                        "type": "object",
                        "properties": {
                            "size": {
                                "x-kubernetes-int-or-string": true,
                                "description": "replicas or percent",
                                "anyOf": [{"type": "integer"}, {"type": "string"}],
                            },
                            "ports": {
                                "type": "array",
                                "x-kubernetes-list-type": "map",
                                "x-kubernetes-list-map-keys": ["name"],
                                "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}},
                            },
                            "template": {
                                "type": "object",
                                "x-kubernetes-embedded-resource": true,
                                "x-kubernetes-preserve-unknown-fields": true,
                                "required": ["spec", "kind", "apiVersion"],
                                "properties": {
                                    "apiVersion": {"type": "string", "description": EMBEDDED_API_VERSION_DOC},
                                    "kind": {"type": "string", "description": EMBEDDED_KIND_DOC},
                                    "metadata": {
                                        "allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}],
                                        "description": METADATA_DOC,
                                    },
                                },
                            },
                            "mode": {"type": "string", "enum": ["a", "b"], "default": "a", "anyOf": [{"maxLength": 1}]},
                        },
                    },
                },
                "x-kubernetes-group-version-kind": [{"group": "stable.example.com", "version": "v1", "kind": "CronTab"}],
            })
        );
    }

    #[test]
    fn int_or_string_with_its_own_any_of_moves_into_all_of() {
        let schema = json!({"type": "object", "properties": {
            "a": {"x-kubernetes-int-or-string": true, "anyOf": [{"maxLength": 3}], "allOf": [{"pattern": "^x"}]},
            "b": {"x-kubernetes-int-or-string": true, "allOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}]},
        }});
        let published = kind_schema(&schema, "example.com", "v1", "Foo");
        assert_eq!(
            published["properties"]["a"],
            json!({
                "x-kubernetes-int-or-string": true,
                "anyOf": [{"maxLength": 3}],
                "allOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}, {"pattern": "^x"}],
            })
        );
        assert_eq!(published["properties"]["b"], schema["properties"]["b"]);
    }

    #[test]
    fn a_missing_or_non_structural_schema_is_published_as_a_bare_object() {
        let bare = json!({
            "type": "object",
            "x-kubernetes-group-version-kind": [{"group": "example.com", "version": "v1", "kind": "Foo"}],
        });
        assert_eq!(kind_schema(&Value::Null, "example.com", "v1", "Foo"), bare);
        let not_structural =
            json!({"type": "object", "properties": {"spec": {"description": "no type"}}});
        assert_eq!(
            kind_schema(&not_structural, "example.com", "v1", "Foo"),
            bare
        );
        let bad_type = json!({"type": "object", "properties": {"spec": {"type": "map"}}});
        assert_eq!(kind_schema(&bad_type, "example.com", "v1", "Foo"), bare);
    }

    #[test]
    fn list_schema_refers_to_the_kind() {
        assert_eq!(
            list_schema(
                "stable.example.com",
                "v1",
                "CronTab",
                "CronTabList",
                "crontabs"
            ),
            json!({
                "description": "CronTabList is a list of CronTab",
                "type": "object",
                "required": ["items"],
                "properties": {
                    "apiVersion": {"type": "string", "description": API_VERSION_DOC},
                    "kind": {"type": "string", "description": KIND_DOC},
                    "items": {
                        "description": "List of crontabs. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md",
                        "type": "array",
                        "items": {"$ref": "#/components/schemas/com.example.stable.v1.CronTab"},
                    },
                    "metadata": {
                        "allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"}],
                        "description": "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
                    },
                },
                "x-kubernetes-group-version-kind": [{"group": "stable.example.com", "version": "v1", "kind": "CronTabList"}],
            })
        );
    }

    #[test]
    fn selectable_fields_are_listed_without_the_leading_dot() {
        let mut schema = list_schema("example.com", "v1", "Foo", "FooList", "foos");
        with_selectable_fields(&mut schema, &[".spec.color", ".spec.size"]);
        assert_eq!(
            schema["x-kubernetes-selectable-fields"],
            json!([{"fieldPath": "spec.color"}, {"fieldPath": "spec.size"}])
        );
        let mut untouched = json!({"type": "object"});
        with_selectable_fields(&mut untouched, &[]);
        assert_eq!(untouched, json!({"type": "object"}));
    }

    #[test]
    fn published_schemas_feed_the_type_model_reader() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        }}}});
        let name = component_name("example.com", "v1", "Foo");
        let document = json!({"components": {"schemas": {
            name.clone(): kind_schema(&schema, "example.com", "v1", "Foo"),
            component_name("example.com", "v1", "FooList"): list_schema("example.com", "v1", "Foo", "FooList", "foos"),
        }}});
        let model = genplane_merge::Schema::from_openapi_v3(&document).expect("the model builds");
        assert_eq!(
            model.kind("example.com", "v1", "FooList"),
            Some(genplane_merge::TypeRef::Named(component_name(
                "example.com",
                "v1",
                "FooList"
            )))
        );
        assert!(model.get(&name).is_some());
    }
}
