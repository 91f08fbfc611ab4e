//! Tests of the entry points, and the helpers the tests of each rule use.

use genplane_apimachinery::validation::field::Path;
use serde_json::{Value, json};

use super::{Options, is_structural, validate_schema_with};

pub(super) const P: &str = "spec.versions[0].schema.openAPIV3Schema";

pub(super) fn path() -> Path {
    Path::new("spec")
        .child("versions")
        .index(0)
        .child("schema")
        .child("openAPIV3Schema")
}

pub(super) fn errors_with(schema: Value, options: &Options) -> Vec<String> {
    validate_schema_with(&schema, &path(), options)
        .iter()
        .map(ToString::to_string)
        .collect()
}

pub(super) fn errors(schema: Value) -> Vec<String> {
    errors_with(schema, &Options::default())
}

/// A root object with one property `name` of schema `property`.
pub(super) fn with_field(name: &str, property: Value) -> Value {
    json!({"type": "object", "properties": {name: property}})
}

pub(super) fn expect(schema: Value, expected: &[&str]) {
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
fn nullable_is_forbidden_at_the_root() {
    expect(
        json!({"type": "object", "nullable": true}),
        &["$P.nullable: Forbidden: nullable cannot be true at the root"],
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
