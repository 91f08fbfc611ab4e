//! What the root of a schema may set when the status subresource is enabled (step 1 of
//! [`validate_schema_with`](super::validate_schema_with)).

use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use serde_json::Value;

use super::parse::{Node, is_zero};

/// Upstream's `JSONSchemaProps` fields in declaration order, by JSON name, with whether they
/// are allowed at the root when the status subresource is enabled.
const ROOT_FIELDS: &[(&str, bool)] = &[
    ("id", false),
    ("$schema", false),
    ("$ref", false),
    ("description", true),
    ("type", true),
    ("format", true),
    ("title", true),
    ("default", false),
    ("maximum", true),
    ("exclusiveMaximum", true),
    ("minimum", true),
    ("exclusiveMinimum", true),
    ("maxLength", true),
    ("minLength", true),
    ("pattern", true),
    ("maxItems", true),
    ("minItems", true),
    ("uniqueItems", true),
    ("multipleOf", true),
    ("enum", false),
    ("maxProperties", false),
    ("minProperties", false),
    ("required", true),
    ("items", true),
    ("allOf", false),
    ("oneOf", false),
    ("anyOf", false),
    ("not", false),
    ("properties", true),
    ("additionalProperties", false),
    ("patternProperties", false),
    ("dependencies", false),
    ("additionalItems", false),
    ("definitions", false),
    ("externalDocs", true),
    ("example", true),
    ("nullable", false),
    ("x-kubernetes-preserve-unknown-fields", true),
    ("x-kubernetes-embedded-resource", false),
    ("x-kubernetes-int-or-string", false),
    ("x-kubernetes-list-map-keys", false),
    ("x-kubernetes-list-type", false),
    ("x-kubernetes-map-type", false),
    ("x-kubernetes-validations", true),
];

const ROOT_FIELDS_MESSAGE: &str = "only [Description Type Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum MaxLength MinLength Pattern MaxItems MinItems UniqueItems MultipleOf Required Items Properties ExternalDocs Example XPreserveUnknownFields XValidations] fields are allowed at the root of the schema if the status subresource is enabled";

pub(super) fn status_root(node: &Node<'_>, schema: &Value, path: &Path, errors: &mut ErrorList) {
    for &(name, allowed) in ROOT_FIELDS {
        let value = node.get(name);
        // Pointers and `default`/`example` are set even when their value is zero.
        let set = match name {
            "default"
            | "example"
            | "maximum"
            | "minimum"
            | "maxLength"
            | "minLength"
            | "maxItems"
            | "minItems"
            | "multipleOf"
            | "maxProperties"
            | "minProperties"
            | "not"
            | "additionalProperties"
            | "additionalItems"
            | "items"
            | "externalDocs"
            | "$ref"
            | "x-kubernetes-preserve-unknown-fields"
            | "x-kubernetes-list-type"
            | "x-kubernetes-map-type" => value.is_some(),
            _ => !is_zero(value),
        };
        if !set {
            continue;
        }
        if name == "type" {
            if node.ty() != "object" {
                errors.push(Error::invalid(
                    &path.child("type"),
                    node.ty(),
                    "only \"object\" is allowed as the type at the root of the schema if the status subresource is enabled",
                ));
                break;
            }
            continue;
        }
        if !allowed {
            errors.push(Error::invalid(path, schema.clone(), ROOT_FIELDS_MESSAGE));
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::structural::Options;
    use crate::structural::tests::{P, errors_with};

    #[test]
    fn the_status_subresource_restricts_the_root() {
        let options = Options {
            status_subresource: true,
            ..Options::default()
        };
        assert_eq!(
            errors_with(
                json!({"type": "object", "description": "d", "required": ["spec"], "properties": {"spec": {"type": "object"}},
                    "x-kubernetes-validations": [{"rule": "true"}]}),
                &options
            ),
            Vec::<String>::new()
        );
        let found = errors_with(json!({"type": "object", "minProperties": 1}), &options);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with(&format!("{P}: Invalid value: {{")),
            "{}",
            found[0]
        );
        assert!(
            found[0].ends_with(": only [Description Type Format Title Maximum ExclusiveMaximum Minimum ExclusiveMinimum MaxLength MinLength Pattern MaxItems MinItems UniqueItems MultipleOf Required Items Properties ExternalDocs Example XPreserveUnknownFields XValidations] fields are allowed at the root of the schema if the status subresource is enabled"),
            "{}",
            found[0]
        );
        let found = errors_with(
            json!({"type": "array", "items": {"type": "string"}}),
            &options,
        );
        assert_eq!(
            found,
            [
                format!(
                    "{P}.type: Invalid value: \"array\": only \"object\" is allowed as the type at the root of the schema if the status subresource is enabled"
                ),
                format!("{P}.type: Invalid value: \"array\": must be object at the root"),
            ]
        );
    }
}
