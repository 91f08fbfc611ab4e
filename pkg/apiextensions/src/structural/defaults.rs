//! Every `default` in a schema that upstream checks, with what that check needs (the caller
//! checks them against the compiled schema).

use genplane_apimachinery::validation::field::Path;
use serde_json::Value;

use super::openapi_rules::META_FIELDS;

/// A step from a resource to a default's position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// The property of that name.
    Field(String),
    /// Any item of a list.
    Item,
}

/// A `default` in the schema, with what upstream's check of it needs.
///
/// Upstream (`ValidateDefaults`, run only when the schema is otherwise structural) checks each
/// default with the sub-schema it is set on:
/// - outside object metadata ([`DefaultSite::in_resource_meta`] false): the default must
///   survive pruning by `schema` unchanged (treating it as an embedded resource when `schema`
///   has `x-kubernetes-embedded-resource`), else `Invalid value: <default>: must not have
///   unknown fields` at [`DefaultSite::path`]; then its metadata (if it is an embedded
///   resource) must be valid; then it must validate against `schema`, errors reported below
///   [`DefaultSite::path`];
/// - inside the `apiVersion`, `kind` or `metadata` of the root or an embedded resource: the
///   default is placed at [`DefaultSite::location`] in an otherwise empty object of the
///   enclosing resource (`apiVersion: validation/v1`, `kind: Validation`), and that object's
///   metadata must be valid (`Invalid value: <default>: must result in valid metadata: ...`),
///   then the default must validate against `schema`.
#[derive(Clone, Debug, PartialEq)]
pub struct DefaultSite {
    /// The path of the `default` field, e.g.
    /// `spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[replicas].default`.
    pub path: Path,
    /// The default value.
    pub value: Value,
    /// The schema the default is set on.
    pub schema: Value,
    /// Whether the default is inside the `apiVersion`, `kind` or `metadata` of a resource.
    pub in_resource_meta: bool,
    /// The schema of the enclosing resource (the root, or the nearest embedded resource).
    pub resource_schema: Value,
    /// Where the default sits in that resource.
    pub location: Vec<Location>,
}

/// Every `default` in `schema` (at `path`, as for [`validate_schema`]) that upstream checks:
/// those on the structure (properties and items, not value validations or
/// `additionalProperties`, where they are forbidden or not checked), in a stable order.
///
/// [`validate_schema`]: super::validate_schema
pub fn defaults(schema: &Value, path: &Path) -> Vec<DefaultSite> {
    let mut out = Vec::new();
    collect_defaults(schema, path, None, Vec::new(), false, &mut out);
    out
}

/// Walks `s`; `resource` is the enclosing resource's schema (`None` at the root, which is
/// always treated as a resource).
fn collect_defaults<'a>(
    s: &'a Value,
    path: &Path,
    resource: Option<&'a Value>,
    location: Vec<Location>,
    in_meta: bool,
    out: &mut Vec<DefaultSite>,
) {
    let Some(map) = s.as_object() else {
        return;
    };
    let embedded = map.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true));
    let (resource, location, in_meta, is_resource) = match resource {
        Some(r) if !embedded => (r, location, in_meta, false),
        _ => (s, Vec::new(), false, true),
    };
    if let Some(default) = map.get("default").filter(|v| !v.is_null()) {
        out.push(DefaultSite {
            path: path.child("default"),
            value: default.clone(),
            schema: s.clone(),
            in_resource_meta: in_meta,
            resource_schema: resource.clone(),
            location: location.clone(),
        });
    }
    if let Some(item) = map.get("items").filter(|v| v.is_object()) {
        let mut at = location.clone();
        at.push(Location::Item);
        collect_defaults(item, &path.child("items"), Some(resource), at, in_meta, out);
    }
    if let Some(properties) = map.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            let sub_meta = in_meta || (is_resource && META_FIELDS.contains(&name.as_str()));
            let mut at = location.clone();
            at.push(Location::Field(name.clone()));
            let sub_path = path.child("properties").key(name);
            collect_defaults(property, &sub_path, Some(resource), at, sub_meta, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::structural::tests::{P, path};

    #[test]
    fn defaults_are_listed_with_their_resource() {
        let schema = json!({
            "type": "object",
            "properties": {
                "metadata": {"type": "object", "properties": {"name": {"type": "string", "default": "n"}}},
                "spec": {
                    "type": "object",
                    "default": {},
                    "anyOf": [{"properties": {"replicas": {"default": 5}}}],
                    "properties": {
                        "replicas": {"type": "integer", "default": 1},
                        "ports": {"type": "array", "items": {"type": "object", "properties": {"protocol": {"type": "string", "default": "TCP"}}}},
                        "labels": {"type": "object", "additionalProperties": {"type": "string", "default": "x"}},
                        "template": {
                            "type": "object",
                            "x-kubernetes-embedded-resource": true,
                            "properties": {
                                "kind": {"type": "string", "default": "Pod"},
                                "spec": {"type": "object", "properties": {"x": {"type": "string", "default": "y"}}},
                            },
                        },
                    },
                },
            },
        });
        let found = defaults(&schema, &path());
        let summary: Vec<(String, Value, bool, Vec<Location>)> = found
            .iter()
            .map(|d| {
                (
                    d.path.to_string().replace(P, "$P"),
                    d.value.clone(),
                    d.in_resource_meta,
                    d.location.clone(),
                )
            })
            .collect();
        let field = |s: &str| Location::Field(s.to_owned());
        assert_eq!(
            summary,
            vec![
                ("$P.properties[metadata].properties[name].default".to_owned(), json!("n"), true, vec![field("metadata"), field("name")]),
                ("$P.properties[spec].default".to_owned(), json!({}), false, vec![field("spec")]),
                ("$P.properties[spec].properties[ports].items.properties[protocol].default".to_owned(), json!("TCP"), false,
                    vec![field("spec"), field("ports"), Location::Item, field("protocol")]),
                ("$P.properties[spec].properties[replicas].default".to_owned(), json!(1), false, vec![field("spec"), field("replicas")]),
                ("$P.properties[spec].properties[template].properties[kind].default".to_owned(), json!("Pod"), true, vec![field("kind")]),
                ("$P.properties[spec].properties[template].properties[spec].properties[x].default".to_owned(), json!("y"), false,
                    vec![field("spec"), field("x")]),
            ]
        );
        assert_eq!(found[0].resource_schema, schema);
        assert_eq!(
            found[4].resource_schema,
            schema["properties"]["spec"]["properties"]["template"]
        );
        assert_eq!(found[3].schema, json!({"type": "integer", "default": 1}));
    }
}
