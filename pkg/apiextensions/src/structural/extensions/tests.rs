//! The rules of the `x-kubernetes-*` extensions, as `validate_schema` reports them.

use serde_json::{Value, json};

use crate::structural::tests::{errors, expect, with_field};

#[test]
fn list_types_are_for_arrays() {
    expect(
        with_field(
            "l",
            json!({"type": "object", "x-kubernetes-list-type": "set"}),
        ),
        &[
            "$P.properties[l].type: Invalid value: \"object\": must be array if x-kubernetes-list-type is specified",
        ],
    );
    expect(
        with_field(
            "l",
            json!({"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "bag"}),
        ),
        &[
            "$P.properties[l].x-kubernetes-list-type: Unsupported value: \"bag\": supported values: \"atomic\", \"set\", \"map\"",
        ],
    );
}

#[test]
fn map_types_are_for_objects() {
    expect(
        with_field(
            "m",
            json!({"type": "string", "x-kubernetes-map-type": "atomic"}),
        ),
        &[
            "$P.properties[m].type: Invalid value: \"string\": must be object if x-kubernetes-map-type is specified",
        ],
    );
    expect(
        with_field(
            "m",
            json!({"type": "object", "x-kubernetes-map-type": "fine"}),
        ),
        &[
            "$P.properties[m].x-kubernetes-map-type: Unsupported value: \"fine\": supported values: \"atomic\", \"granular\"",
        ],
    );
}

fn map_list(keys: Value, item: Value) -> Value {
    with_field(
        "l",
        json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": keys, "items": item}),
    )
}

#[test]
fn list_map_keys_need_a_map_list() {
    expect(
        with_field(
            "l",
            json!({"type": "array", "x-kubernetes-list-map-keys": ["a"], "items": {"type": "object", "properties": {"a": {"type": "string"}}}}),
        ),
        &[
            "$P.properties[l].x-kubernetes-list-type: Required value: must be map if x-kubernetes-list-map-keys is non-empty",
        ],
    );
    expect(
        with_field(
            "l",
            json!({"type": "array", "items": {"type": "object"}, "x-kubernetes-list-type": "map"}),
        ),
        &[
            "$P.properties[l].x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map",
        ],
    );
}

#[test]
fn map_list_items_are_objects_keyed_by_scalar_properties() {
    expect(
        map_list(json!(["name"]), json!({"type": "string"})),
        &[
            "$P.properties[l].items.type: Invalid value: \"string\": must be object if parent array's x-kubernetes-list-type is map",
        ],
    );
    expect(
        map_list(
            json!(["missing"]),
            json!({"type": "object", "properties": {"name": {"type": "string"}}}),
        ),
        &[
            "$P.properties[l].x-kubernetes-list-map-keys: Invalid value: [\"missing\"]: entries must all be names of item properties",
        ],
    );
    expect(
        map_list(
            json!(["name"]),
            json!({"type": "object", "required": ["name"], "properties": {"name": {"type": "object"}}}),
        ),
        &[
            "$P.properties[l].items.properties[name].type: Invalid value: \"object\": must be a scalar type if parent array's x-kubernetes-list-type is map",
        ],
    );
    expect(
        map_list(
            json!(["name", "name"]),
            json!({"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}),
        ),
        &[
            "$P.properties[l].x-kubernetes-list-map-keys: Invalid value: [\"name\",\"name\"]: must not contain duplicate entries",
        ],
    );
}

#[test]
fn map_list_keys_are_required_or_defaulted_and_not_nullable() {
    expect(
        map_list(
            json!(["name"]),
            json!({"type": "object", "properties": {"name": {"type": "string"}}}),
        ),
        &[
            "$P.properties[l].items.properties[name].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
        ],
    );
    expect(
        map_list(
            json!(["name"]),
            json!({"type": "object", "nullable": true, "required": ["name"], "properties": {"name": {"type": "string", "nullable": true}}}),
        ),
        &[
            "$P.properties[l].items.nullable: Forbidden: cannot be nullable when x-kubernetes-list-type is map",
            "$P.properties[l].items.properties[name].nullable: Forbidden: this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
        ],
    );
}

#[test]
fn set_items_are_atomic_and_not_nullable() {
    expect(
        with_field(
            "s",
            json!({"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string", "nullable": true}}),
        ),
        &[
            "$P.properties[s].items.nullable: Forbidden: cannot be nullable when x-kubernetes-list-type is set",
        ],
    );
    expect(
        with_field(
            "s",
            json!({"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "object", "properties": {"a": {"type": "string"}}}}),
        ),
        &[
            "$P.properties[s].items.x-kubernetes-map-type: Invalid value: null: must be atomic as item of a list with x-kubernetes-list-type=set",
        ],
    );
    expect(
        with_field(
            "s",
            json!({"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}}),
        ),
        &[
            "$P.properties[s].items.x-kubernetes-list-type: Invalid value: \"set\": must be atomic as item of a list with x-kubernetes-list-type=set",
        ],
    );
    assert_eq!(
        errors(with_field(
            "s",
            json!({"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "object", "x-kubernetes-map-type": "atomic"}}),
        )),
        Vec::<String>::new()
    );
}

#[test]
fn preserve_unknown_fields_is_true_or_absent() {
    expect(
        with_field(
            "a",
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": false}),
        ),
        &[
            "$P.properties[a].x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or undefined",
        ],
    );
}
