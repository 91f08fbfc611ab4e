//! Whether upstream's `NewStructural` can read the schema as a structural one at all (`$ref`,
//! `definitions`, `items` as a list, ... cannot be): step 3's one error on the schema.

use serde_json::Value;

use super::parse::{Items, Node, SchemaOrBool};

/// Why upstream's `NewStructural` cannot read the schema at all, checked in its order.
/// The schemas of value validations (`allOf`, `anyOf`, `oneOf`, `not`) are read alike.
pub(super) fn convertible(node: &Node<'_>) -> Result<(), String> {
    unsupported_fields(node)?;
    convertible_value_validation(node)?;
    if node.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        return Err(
            "internal error: 'x-kubernetes-preserve-unknown-fields' must be true or undefined"
                .to_owned(),
        );
    }
    match &node.items {
        Some(Items::Many(list)) if !list.is_empty() => {
            return Err("OpenAPIV3Schema 'items' must be a schema, but is an array".to_owned());
        }
        Some(Items::One(item)) => convertible(item)?,
        _ => {}
    }
    for (_, property) in &node.properties {
        convertible(property)?;
    }
    if let Some(SchemaOrBool::Schema(values)) = &node.additional_properties {
        convertible(values)?;
    }
    Ok(())
}

fn convertible_value_validation(node: &Node<'_>) -> Result<(), String> {
    if let Some(not) = &node.not {
        convertible(not)?;
    }
    for n in node.all_of.iter().chain(&node.any_of).chain(&node.one_of) {
        convertible(n)?;
    }
    Ok(())
}

fn unsupported_fields(node: &Node<'_>) -> Result<(), String> {
    let checks: [(&str, bool); 7] = [
        ("id", !node.s("id").is_empty()),
        ("schema", !node.s("$schema").is_empty()),
        ("$ref", !node.s("$ref").is_empty()),
        ("patternProperties", !node.pattern_properties.is_empty()),
        ("dependencies", !node.dependencies.is_empty()),
        ("additionalItems", node.additional_items.is_some()),
        ("definitions", !node.definitions.is_empty()),
    ];
    match checks.iter().find(|(_, bad)| *bad) {
        Some((name, _)) => Err(format!("OpenAPIV3Schema '{name}' is not supported")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::structural::tests::expect;

    #[test]
    fn a_schema_keyword_alone_is_reported_on_the_schema() {
        expect(
            json!({"type": "object", "$schema": "http://json-schema.org/draft-04/schema#"}),
            &["$P: Invalid value: \"\": OpenAPIV3Schema 'schema' is not supported"],
        );
    }
}
