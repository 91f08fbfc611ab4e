//! The OpenAPI rules (upstream's `ValidateCustomResourceDefinitionOpenAPISchema`, step 4): the
//! walk, and what each schema may set where it is; the extensions and the validation rules of
//! each schema are checked by `extensions.rs` and `validation_rules.rs`.

use genplane_apimachinery::validation::field::{Error, ErrorList, Path};

use super::Options;
use super::extensions::extension_errors;
use super::parse::{Items, Node, OPENAPI_TYPES, SchemaOrBool};
use super::validation_rules::rule_errors;

pub(super) const META_FIELDS: &[&str] = &["metadata", "kind", "apiVersion"];

/// Upstream's `specStandardValidatorV3`: what is allowed where the walk is.
#[derive(Clone)]
pub(super) struct Ssv<'o> {
    /// Why `default` is forbidden here, when it is.
    pub(super) forbidden_defaults: Option<String>,
    /// Inside the `apiVersion`, `kind` or `metadata` of a resource (the root or embedded).
    pub(super) inside_resource_meta: bool,
    pub(super) options: &'o Options,
}

impl Ssv<'_> {
    fn with_forbidden_defaults(&self, reason: String) -> Self {
        Self {
            forbidden_defaults: Some(reason),
            ..self.clone()
        }
    }

    fn validate(&self, s: &Node<'_>, path: &Path, errors: &mut ErrorList) {
        let ty = s.ty();
        if self.options.require_valid_property_type
            && !ty.is_empty()
            && !OPENAPI_TYPES.contains(&ty)
        {
            errors.push(Error::not_supported(&path.child("type"), ty, OPENAPI_TYPES));
        }
        if s.get("default").is_some()
            && let Some(reason) = &self.forbidden_defaults
        {
            errors.push(Error::forbidden(
                &path.child("default"),
                format!("must not be set {reason}"),
            ));
        }
        if !s.s("id").is_empty() {
            errors.push(Error::forbidden(&path.child("id"), "id is not supported"));
        }
        if s.additional_items.is_some() {
            errors.push(Error::forbidden(
                &path.child("additionalItems"),
                "additionalItems is not supported",
            ));
        }
        if !s.pattern_properties.is_empty() {
            errors.push(Error::forbidden(
                &path.child("patternProperties"),
                "patternProperties is not supported",
            ));
        }
        if !s.definitions.is_empty() {
            errors.push(Error::forbidden(
                &path.child("definitions"),
                "definitions is not supported",
            ));
        }
        if s.get("dependencies").is_some() {
            errors.push(Error::forbidden(
                &path.child("dependencies"),
                "dependencies is not supported",
            ));
        }
        if s.get("$ref").is_some() {
            errors.push(Error::forbidden(
                &path.child("$ref"),
                "$ref is not supported",
            ));
        }
        if ty == "null" {
            errors.push(Error::forbidden(
                &path.child("type"),
                "type cannot be set to null, use nullable as an alternative",
            ));
        }
        if matches!(&s.items, Some(Items::Many(list)) if !list.is_empty()) {
            errors.push(Error::forbidden(
                &path.child("items"),
                "items must be a schema object and not an array",
            ));
        }
        if self.inside_resource_meta && s.embedded() {
            errors.push(Error::forbidden(
                &path.child("x-kubernetes-embedded-resource"),
                "must not be used inside of resource meta",
            ));
        }
    }
}

pub(super) fn openapi_errors(
    s: &Node<'_>,
    path: &Path,
    ssv: &Ssv<'_>,
    is_root: bool,
    errors: &mut ErrorList,
) {
    ssv.validate(s, path, errors);

    if s.b("uniqueItems") {
        errors.push(Error::forbidden(
            &path.child("uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }

    if let Some(additional) = &s.additional_properties {
        let allows_or_schema = match additional {
            SchemaOrBool::Bool(allows) => !*allows,
            SchemaOrBool::Schema(_) => true,
        };
        if !s.properties.is_empty() && allows_or_schema {
            errors.push(Error::forbidden(
                &path.child("additionalProperties"),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        if let SchemaOrBool::Schema(values) = additional {
            let sub = if ssv.inside_resource_meta {
                ssv.with_forbidden_defaults(
                    "inside additionalProperties applying to object metadata".to_owned(),
                )
            } else {
                ssv.clone()
            };
            openapi_errors(
                values,
                &path.child("additionalProperties"),
                &sub,
                false,
                errors,
            );
        }
    }

    for (name, property) in &s.properties {
        let mut sub = ssv.clone();
        if (is_root || s.embedded()) && META_FIELDS.contains(name) {
            sub.inside_resource_meta = true;
            if is_root {
                sub = sub.with_forbidden_defaults(format!("in top-level {name}"));
            }
        }
        openapi_errors(
            property,
            &path.child("properties").key(name),
            &sub,
            false,
            errors,
        );
    }

    if let Some(not) = &s.not {
        openapi_errors(not, &path.child("not"), ssv, false, errors);
    }
    for (i, n) in s.all_of.iter().enumerate() {
        openapi_errors(n, &path.child("allOf").index(i), ssv, false, errors);
    }
    for (i, n) in s.one_of.iter().enumerate() {
        openapi_errors(n, &path.child("oneOf").index(i), ssv, false, errors);
    }
    for (i, n) in s.any_of.iter().enumerate() {
        openapi_errors(n, &path.child("anyOf").index(i), ssv, false, errors);
    }
    for (name, n) in &s.definitions {
        openapi_errors(n, &path.child("definitions").key(name), ssv, false, errors);
    }
    match &s.items {
        Some(Items::One(item)) => openapi_errors(item, &path.child("items"), ssv, false, errors),
        Some(Items::Many(list)) => {
            for (i, item) in list.iter().enumerate() {
                openapi_errors(item, &path.child("items").index(i), ssv, false, errors);
            }
        }
        None => {}
    }
    for (name, dep) in &s.dependencies {
        if let Some(dep) = dep {
            openapi_errors(
                dep,
                &path.child("dependencies").key(name),
                ssv,
                false,
                errors,
            );
        }
    }

    extension_errors(s, path, ssv.options, errors);
    rule_errors(s, path, errors);
}

#[cfg(test)]
mod tests;
