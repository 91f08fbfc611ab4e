//! The structural-schema rules, as `validate_schema` reports them.

use serde_json::json;

use crate::structural::is_structural;
use crate::structural::tests::{P, errors, expect, with_field};

#[test]
fn a_field_without_type_is_not_structural() {
    expect(
        with_field("spec", json!({"properties": {"a": {"type": "string"}}})),
        &[
            "$P.properties[spec].type: Required value: must not be empty for specified object fields",
        ],
    );
    assert!(!is_structural(&with_field("spec", json!({}))));
}

#[test]
fn the_root_needs_a_type() {
    expect(
        json!({"properties": {"a": {"type": "string"}}}),
        &["$P.type: Required value: must not be empty at the root"],
    );
}

#[test]
fn array_items_need_a_type() {
    expect(
        with_field("list", json!({"type": "array", "items": {}})),
        &[
            "$P.properties[list].items.type: Required value: must not be empty for specified array items",
        ],
    );
}

#[test]
fn arrays_need_items() {
    expect(
        with_field("list", json!({"type": "array"})),
        &["$P.properties[list].items: Required value: must be specified"],
    );
    expect(
        with_field("list", json!({"type": "array", "items": []})),
        &["$P.properties[list].items: Required value: must be specified"],
    );
}

#[test]
fn the_root_is_an_object() {
    expect(
        json!({"type": "string"}),
        &["$P.type: Invalid value: \"string\": must be object at the root"],
    );
}

#[test]
fn additional_properties_are_forbidden_at_the_root() {
    expect(
        json!({"type": "object", "additionalProperties": {"type": "string"}}),
        &["$P.additionalProperties: Forbidden: must not be used at the root"],
    );
}

#[test]
fn value_validations_set_no_type() {
    expect(
        with_field(
            "a",
            json!({"type": "string", "anyOf": [{"type": "string"}, {"maxLength": 3}]}),
        ),
        &["$P.properties[a].anyOf[0].type: Forbidden: must be empty to be structural"],
    );
}

#[test]
fn value_validations_set_no_generic_fields_sorted_by_text() {
    expect(
        with_field(
            "a",
            json!({"type": "string", "allOf": [{"nullable": true, "description": "d", "default": "x", "title": "t"}]}),
        ),
        &[
            "$P.properties[a].allOf[0].default: Forbidden: must be undefined to be structural",
            "$P.properties[a].allOf[0].description: Forbidden: must be empty to be structural",
            "$P.properties[a].allOf[0].nullable: Forbidden: must be false to be structural",
            "$P.properties[a].allOf[0].title: Forbidden: must be empty to be structural",
        ],
    );
}

#[test]
fn value_validations_set_no_extensions() {
    expect(
        with_field(
            "a",
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true, "oneOf": [{
                "x-kubernetes-preserve-unknown-fields": true,
                "x-kubernetes-embedded-resource": true,
                "x-kubernetes-int-or-string": true,
                "x-kubernetes-list-type": "atomic",
                "x-kubernetes-list-map-keys": ["k"],
                "x-kubernetes-map-type": "atomic",
                "x-kubernetes-validations": [{"rule": "true"}],
                "additionalProperties": {"maxLength": 1},
            }]}),
        ),
        &[
            "$P.properties[a].oneOf[0].additionalProperties: Forbidden: must be undefined to be structural",
            "$P.properties[a].oneOf[0].x-kubernetes-embedded-resource: Forbidden: must be false to be structural",
            "$P.properties[a].oneOf[0].x-kubernetes-int-or-string: Forbidden: must be false to be structural",
            "$P.properties[a].oneOf[0].x-kubernetes-list-map-keys: Forbidden: must be empty to be structural",
            "$P.properties[a].oneOf[0].x-kubernetes-list-type: Forbidden: must be undefined to be structural",
            "$P.properties[a].oneOf[0].x-kubernetes-map-type: Forbidden: must be undefined to be structural",
            "$P.properties[a].oneOf[0].x-kubernetes-preserve-unknown-fields: Forbidden: must be false to be structural",
            "$P.properties[a].oneOf[0].x-kubernetes-validations: Forbidden: must be empty to be structural",
            // The OpenAPI rules still apply to the clause itself.
            "$P.properties[a].oneOf[0].type: Required value: must be object if x-kubernetes-map-type is specified",
            "$P.properties[a].oneOf[0].type: Required value: must be array if x-kubernetes-list-type is specified",
            "$P.properties[a].oneOf[0].x-kubernetes-list-type: Invalid value: \"atomic\": must be map if x-kubernetes-list-map-keys is non-empty",
        ],
    );
}

#[test]
fn metadata_is_not_specified_in_value_validations() {
    expect(
        json!({"type": "object", "allOf": [{"properties": {"metadata": {"required": ["name"]}}}]}),
        &[
            "$P.allOf[0].properties[metadata]: Forbidden: must not be specified in a nested context",
            "$P.properties[metadata]: Required value: because it is defined in $P.allOf[0].properties[metadata]",
        ],
    );
}

#[test]
fn value_validations_only_name_specified_fields() {
    expect(
        json!({"type": "object", "properties": {"a": {"type": "string"}},
            "anyOf": [{"properties": {"a": {"minLength": 1}}}, {"properties": {"b": {"minLength": 1}}}]}),
        &["$P.properties[b]: Required value: because it is defined in $P.anyOf[1].properties[b]"],
    );
    expect(
        json!({"type": "object", "properties": {"l": {"type": "array", "items": {"type": "object"}}},
            "not": {"properties": {"l": {"items": {"properties": {"x": {"maxLength": 1}}}}}}}),
        &[
            "$P.properties[l].items.properties[x]: Required value: because it is defined in $P.not.properties[l].items.properties[x]",
        ],
    );
}

#[test]
fn int_or_string_patterns_are_structural() {
    for schema in [
        json!({"x-kubernetes-int-or-string": true}),
        json!({"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}),
        json!({"x-kubernetes-int-or-string": true, "allOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}, {"pattern": "^[0-9]+%?$"}]}),
    ] {
        assert_eq!(
            errors(with_field("size", schema.clone())),
            Vec::<String>::new(),
            "{schema}"
        );
    }
    expect(
        with_field(
            "size",
            json!({"x-kubernetes-int-or-string": true, "anyOf": [{"type": "string"}, {"type": "integer"}]}),
        ),
        &[
            "$P.properties[size].anyOf[0].type: Forbidden: must be empty to be structural",
            "$P.properties[size].anyOf[1].type: Forbidden: must be empty to be structural",
        ],
    );
}

#[test]
fn int_or_string_excludes_other_extensions() {
    expect(
        with_field(
            "size",
            json!({"x-kubernetes-int-or-string": true, "x-kubernetes-preserve-unknown-fields": true}),
        ),
        &[
            "$P.properties[size].x-kubernetes-preserve-unknown-fields: Invalid value: true: must be false if x-kubernetes-int-or-string is true",
        ],
    );
}

#[test]
fn embedded_resources_are_objects() {
    expect(
        with_field(
            "t",
            json!({"type": "string", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}),
        ),
        &[
            "$P.properties[t].type: Invalid value: \"string\": must be object if x-kubernetes-embedded-resource is true",
        ],
    );
    expect(
        with_field(
            "t",
            json!({"x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}),
        ),
        &[
            "$P.properties[t].type: Required value: must be object if x-kubernetes-embedded-resource is true",
        ],
    );
}

#[test]
fn embedded_resources_specify_their_fields() {
    expect(
        with_field(
            "t",
            json!({"type": "object", "x-kubernetes-embedded-resource": true}),
        ),
        &[
            "$P.properties[t].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ],
    );
    expect(
        with_field(
            "t",
            json!({"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true,
                "additionalProperties": {"type": "string"}}),
        ),
        &[
            "$P.properties[t].additionalProperties: Forbidden: must not be used if x-kubernetes-embedded-resource is set",
        ],
    );
}

#[test]
fn root_metadata_restricts_only_name_and_generate_name() {
    for metadata in [
        json!({"type": "object"}),
        json!({"type": "object", "properties": {"name": {"type": "string", "pattern": "^a"}, "generateName": {"type": "string"}}}),
    ] {
        assert_eq!(
            errors(with_field("metadata", metadata.clone())),
            Vec::<String>::new(),
            "{metadata}"
        );
    }
    let forbidden = "$P.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified";
    expect(
        with_field(
            "metadata",
            json!({"type": "object", "properties": {"labels": {"type": "object"}}}),
        ),
        &[forbidden],
    );
    expect(
        with_field("metadata", json!({"type": "object", "description": "meta"})),
        &[forbidden],
    );
    expect(
        with_field("metadata", json!({"type": "object", "required": ["name"]})),
        &[forbidden],
    );
    expect(
        with_field("metadata", json!({"type": "string"})),
        &["$P.properties[metadata].type: Invalid value: \"string\": must be object"],
    );
}

#[test]
fn type_meta_fields_are_strings() {
    expect(
        with_field("kind", json!({"type": "integer"})),
        &["$P.properties[kind].type: Invalid value: \"integer\": must be string"],
    );
    // Only at the root and in embedded resources.
    expect(
        with_field(
            "spec",
            json!({"type": "object", "properties": {"kind": {"type": "integer"}}}),
        ),
        &[],
    );
}

#[test]
fn patterns_are_regular_expressions() {
    let found = errors(with_field("a", json!({"type": "string", "pattern": "[a-"})));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with(&format!(
            "{P}.properties[a].pattern: Invalid value: \"[a-\": must be a valid regular expression, but isn't: error parsing regexp: "
        )),
        "{}",
        found[0]
    );
}
