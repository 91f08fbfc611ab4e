//! The OpenAPI rules, as `validate_schema` reports them.

use serde_json::json;

use crate::structural::tests::{expect, with_field};

#[test]
fn properties_and_additional_properties_exclude_each_other() {
    expect(
        with_field(
            "spec",
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}}),
        ),
        &[
            "$P.properties[spec].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive",
        ],
    );
    expect(
        with_field(
            "spec",
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": false}),
        ),
        &[
            "$P.properties[spec].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive",
        ],
    );
}

#[test]
fn unique_items_is_forbidden() {
    expect(
        with_field(
            "l",
            json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true}),
        ),
        &[
            "$P.properties[l].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ],
    );
}

#[test]
fn unsupported_json_schema_keywords_are_forbidden() {
    expect(
        with_field("spec", json!({"type": "object", "$ref": "#/definitions/x"})),
        &["$P.properties[spec].$ref: Forbidden: $ref is not supported"],
    );
    expect(
        with_field(
            "spec",
            json!({"type": "object", "definitions": {"x": {"type": "string"}}}),
        ),
        &["$P.properties[spec].definitions: Forbidden: definitions is not supported"],
    );
    expect(
        with_field(
            "spec",
            json!({"type": "object", "patternProperties": {"^a": {"type": "string"}}}),
        ),
        &["$P.properties[spec].patternProperties: Forbidden: patternProperties is not supported"],
    );
    expect(
        with_field(
            "spec",
            json!({"type": "object", "dependencies": {"a": ["b"]}}),
        ),
        &["$P.properties[spec].dependencies: Forbidden: dependencies is not supported"],
    );
    expect(
        with_field(
            "l",
            json!({"type": "array", "items": {"type": "string"}, "additionalItems": false}),
        ),
        &["$P.properties[l].additionalItems: Forbidden: additionalItems is not supported"],
    );
    expect(
        with_field("spec", json!({"type": "object", "id": "x"})),
        &["$P.properties[spec].id: Forbidden: id is not supported"],
    );
}

#[test]
fn items_cannot_be_a_list() {
    expect(
        with_field("l", json!({"type": "array", "items": [{"type": "string"}]})),
        &["$P.properties[l].items: Forbidden: items must be a schema object and not an array"],
    );
}

#[test]
fn types_are_openapi_types() {
    expect(
        with_field("a", json!({"type": "null"})),
        &[
            "$P.properties[a].type: Unsupported value: \"null\": supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\"",
            "$P.properties[a].type: Forbidden: type cannot be set to null, use nullable as an alternative",
        ],
    );
    expect(
        with_field("a", json!({"type": "int"})),
        &[
            "$P.properties[a].type: Unsupported value: \"int\": supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\"",
        ],
    );
}

#[test]
fn defaults_are_forbidden_in_top_level_metadata() {
    expect(
        with_field(
            "metadata",
            json!({"type": "object", "properties": {"name": {"type": "string", "default": "x"}}}),
        ),
        &[
            "$P.properties[metadata].properties[name].default: Forbidden: must not be set in top-level metadata",
        ],
    );
    expect(
        with_field("apiVersion", json!({"type": "string", "default": "v1"})),
        &["$P.properties[apiVersion].default: Forbidden: must not be set in top-level apiVersion"],
    );
}

#[test]
fn defaults_are_forbidden_in_additional_properties_of_embedded_metadata() {
    expect(
        with_field(
            "template",
            json!({"type": "object", "x-kubernetes-embedded-resource": true, "properties": {
                "metadata": {"type": "object", "properties": {
                    "labels": {"type": "object", "additionalProperties": {"type": "string", "default": "x"}},
                    "name": {"type": "string", "default": "allowed"},
                }},
            }}),
        ),
        &[
            "$P.properties[template].properties[metadata].properties[labels].additionalProperties.default: Forbidden: must not be set inside additionalProperties applying to object metadata",
        ],
    );
}

#[test]
fn embedded_resources_cannot_sit_in_resource_metadata() {
    expect(
        with_field(
            "template",
            json!({"type": "object", "x-kubernetes-embedded-resource": true, "properties": {
                "metadata": {"type": "object", "properties": {
                    "inner": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true},
                }},
            }}),
        ),
        &[
            "$P.properties[template].properties[metadata].properties[inner].x-kubernetes-embedded-resource: Forbidden: must not be used inside of resource meta",
        ],
    );
}
