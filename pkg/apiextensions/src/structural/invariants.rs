//! The structural-schema rules (upstream's `ValidateStructural`, pkg/apiserver/schema): the
//! invariants of the structure and of its value validations, and their completeness.

use std::collections::BTreeSet;

use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use serde_json::Value;

use super::parse::{Node, SchemaOrBool, is_zero};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Item,
    Field,
}

/// Upstream's `ValidateStructural`: invariants and completeness, sorted by text.
pub(super) fn structural_errors(node: &Node<'_>, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    invariants(node, Level::Root, path, &mut errors);
    completeness(node, node, path, path, &mut errors);
    errors.0.sort_by_cached_key(ToString::to_string);
    errors
}

/// Whether a nested schema is exactly `{type: <ty>}` (Go's deep equality of the converted
/// value validation).
fn is_only_type(node: &Node<'_>, ty: &str) -> bool {
    let Some(raw) = node.raw else {
        return false;
    };
    node.ty() == ty
        && raw.iter().all(|(k, v)| {
            k == "type"
                || (k != "x-kubernetes-preserve-unknown-fields"
                    && matches!(v, Value::Null | Value::Bool(false))
                    || matches!(v, Value::String(s) if s.is_empty()))
        })
}

fn is_int_or_string_any_of(any_of: &[Node<'_>]) -> bool {
    any_of.len() == 2 && is_only_type(&any_of[0], "integer") && is_only_type(&any_of[1], "string")
}

fn invariants(s: &Node<'_>, level: Level, path: &Path, errors: &mut ErrorList) {
    if s.ty() == "array" && s.item_schema().is_none() {
        errors.push(Error::required(&path.child("items"), "must be specified"));
    }
    if let Some(item) = s.item_schema() {
        invariants(item, Level::Item, &path.child("items"), errors);
    }
    for (name, property) in &s.properties {
        invariants(
            property,
            Level::Field,
            &path.child("properties").key(name),
            errors,
        );
    }
    if let Some(additional) = &s.additional_properties {
        if level == Level::Root {
            errors.push(Error::forbidden(
                &path.child("additionalProperties"),
                "must not be used at the root",
            ));
        }
        if let SchemaOrBool::Schema(values) = additional {
            invariants(
                values,
                Level::Field,
                &path.child("additionalProperties"),
                errors,
            );
        }
    }

    if s.int_or_string() && s.preserve_unknown_fields() {
        errors.push(Error::invalid(
            &path.child("x-kubernetes-preserve-unknown-fields"),
            true,
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if s.int_or_string() && s.embedded() {
        errors.push(Error::invalid(
            &path.child("x-kubernetes-embedded-resource"),
            true,
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }

    let skip_any_of = is_int_or_string_any_of(&s.any_of);
    let skip_first_all_of_any_of = s
        .all_of
        .first()
        .is_some_and(|first| is_int_or_string_any_of(&first.any_of));
    value_validation(
        s,
        skip_any_of,
        skip_first_all_of_any_of,
        level,
        path,
        errors,
    );

    let check_metadata = level == Level::Root || s.embedded();
    if s.embedded() && s.ty() != "object" {
        let message = "must be object if x-kubernetes-embedded-resource is true";
        if s.ty().is_empty() {
            errors.push(Error::required(&path.child("type"), message));
        } else {
            errors.push(Error::invalid(&path.child("type"), s.ty(), message));
        }
    } else if s.ty().is_empty() && !s.int_or_string() && !s.preserve_unknown_fields() {
        let message = match level {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        errors.push(Error::required(&path.child("type"), message));
    }
    if s.embedded() && s.additional_properties.is_some() {
        errors.push(Error::forbidden(
            &path.child("additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if level == Level::Root && !s.ty().is_empty() && s.ty() != "object" {
        errors.push(Error::invalid(
            &path.child("type"),
            s.ty(),
            "must be object at the root",
        ));
    }
    if check_metadata {
        for name in ["kind", "apiVersion"] {
            if let Some(property) = s.property(name)
                && property.ty() != "string"
            {
                errors.push(Error::invalid(
                    &path.child("properties").key(name).child("type"),
                    property.ty(),
                    "must be string",
                ));
            }
        }
    }
    if let Some(metadata) = s.property("metadata") {
        metadata_invariants(
            metadata,
            check_metadata,
            level,
            &path.child("properties").key("metadata"),
            errors,
        );
    }
    if s.embedded() && !s.preserve_unknown_fields() && s.properties.is_empty() {
        errors.push(Error::required(
            &path.child("properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

/// The keys of a metadata schema at the root that upstream's structural model keeps besides
/// `type`, `default` and `properties` (the rest is dropped on conversion or rejected before).
const METADATA_KEPT: &[&str] = &[
    "description",
    "title",
    "nullable",
    "additionalProperties",
    "items",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-list-type",
    "x-kubernetes-map-type",
    "x-kubernetes-validations",
    "format",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "multipleOf",
    "enum",
    "maxProperties",
    "minProperties",
    "required",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
];

fn metadata_invariants(
    s: &Node<'_>,
    check_metadata: bool,
    level: Level,
    path: &Path,
    errors: &mut ErrorList,
) {
    if check_metadata && s.ty() != "object" {
        errors.push(Error::invalid(
            &path.child("type"),
            s.ty(),
            "must be object",
        ));
    }
    if level == Level::Root {
        let names: BTreeSet<&str> = s.properties.iter().map(|(k, _)| *k).collect();
        let only_names = names.iter().all(|k| *k == "name" || *k == "generateName");
        // Fields Go decodes to pointers, or keeps as empty but set lists, count when present at
        // all; the others when they are not zero.
        let pointer_like = |k: &str| {
            matches!(
                k,
                "additionalProperties"
                    | "items"
                    | "not"
                    | "maximum"
                    | "minimum"
                    | "maxLength"
                    | "minLength"
                    | "maxItems"
                    | "minItems"
                    | "multipleOf"
                    | "maxProperties"
                    | "minProperties"
                    | "x-kubernetes-list-type"
                    | "x-kubernetes-map-type"
                    | "required"
                    | "x-kubernetes-list-map-keys"
                    | "x-kubernetes-validations"
            )
        };
        let other = METADATA_KEPT.iter().any(|k| {
            let value = s.get(k);
            if pointer_like(k) {
                value.is_some()
            } else {
                !is_zero(value)
            }
        });
        if !only_names || other {
            errors.push(Error::forbidden(
                path,
                "must not specify anything other than name and generateName, but metadata is implicitly specified",
            ));
        }
    }
}

fn value_validation(
    v: &Node<'_>,
    skip_any_of: bool,
    skip_first_all_of_any_of: bool,
    level: Level,
    path: &Path,
    errors: &mut ErrorList,
) {
    if !skip_any_of {
        for (i, n) in v.any_of.iter().enumerate() {
            nested(
                n,
                false,
                false,
                level,
                &path.child("anyOf").index(i),
                errors,
            );
        }
    }
    for (i, n) in v.all_of.iter().enumerate() {
        let skip = skip_first_all_of_any_of && i == 0;
        nested(n, skip, false, level, &path.child("allOf").index(i), errors);
    }
    for (i, n) in v.one_of.iter().enumerate() {
        nested(
            n,
            false,
            false,
            level,
            &path.child("oneOf").index(i),
            errors,
        );
    }
    if let Some(not) = &v.not {
        nested(not, false, false, level, &path.child("not"), errors);
    }
    let pattern = v.s("pattern");
    if !pattern.is_empty()
        && let Err(e) = regex::Regex::new(pattern)
    {
        errors.push(Error::invalid(
            &path.child("pattern"),
            pattern,
            format!(
                "must be a valid regular expression, but isn't: error parsing regexp: {}",
                regex_error(&e)
            ),
        ));
    }
}

/// The one-line reason of a regular expression error.
fn regex_error(error: &regex::Error) -> String {
    match error {
        regex::Error::Syntax(text) => text
            .lines()
            .rev()
            .find(|l| l.starts_with("error:"))
            .map(|l| l.trim_start_matches("error:").trim().to_owned())
            .unwrap_or_else(|| text.clone()),
        other => other.to_string(),
    }
}

fn nested(
    v: &Node<'_>,
    skip_any_of: bool,
    skip_all_of_any_of: bool,
    level: Level,
    path: &Path,
    errors: &mut ErrorList,
) {
    value_validation(v, skip_any_of, skip_all_of_any_of, level, path, errors);
    if let Some(item) = v.item_schema() {
        nested(item, false, false, level, &path.child("items"), errors);
    }
    for (name, property) in &v.properties {
        nested(
            property,
            false,
            false,
            Level::Field,
            &path.child("properties").key(name),
            errors,
        );
    }
    if !v.ty().is_empty() {
        errors.push(Error::forbidden(
            &path.child("type"),
            "must be empty to be structural",
        ));
    }
    match &v.additional_properties {
        Some(SchemaOrBool::Schema(_)) | Some(SchemaOrBool::Bool(true)) => {
            errors.push(Error::forbidden(
                &path.child("additionalProperties"),
                "must be undefined to be structural",
            ));
        }
        _ => {}
    }
    if v.get("default").is_some() {
        errors.push(Error::forbidden(
            &path.child("default"),
            "must be undefined to be structural",
        ));
    }
    for (key, what) in [("title", "empty"), ("description", "empty")] {
        if !v.s(key).is_empty() {
            errors.push(Error::forbidden(
                &path.child(key),
                format!("must be {what} to be structural"),
            ));
        }
    }
    if v.b("nullable") {
        errors.push(Error::forbidden(
            &path.child("nullable"),
            "must be false to be structural",
        ));
    }
    for key in [
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-embedded-resource",
        "x-kubernetes-int-or-string",
    ] {
        if v.b(key) {
            errors.push(Error::forbidden(
                &path.child(key),
                "must be false to be structural",
            ));
        }
    }
    if !v.strs("x-kubernetes-list-map-keys").is_empty() {
        errors.push(Error::forbidden(
            &path.child("x-kubernetes-list-map-keys"),
            "must be empty to be structural",
        ));
    }
    for key in ["x-kubernetes-list-type", "x-kubernetes-map-type"] {
        if v.opt_s(key).is_some() {
            errors.push(Error::forbidden(
                &path.child(key),
                "must be undefined to be structural",
            ));
        }
    }
    if !v.validations().is_empty() {
        errors.push(Error::forbidden(
            &path.child("x-kubernetes-validations"),
            "must be empty to be structural",
        ));
    }
    if v.property("metadata").is_some() {
        errors.push(Error::forbidden(
            &path.child("properties").key("metadata"),
            "must not be specified in a nested context",
        ));
    }
}

/// Every field a value validation names must be specified by the structure too (upstream
/// checks the value validations of the root schema).
fn completeness(v: &Node<'_>, s: &Node<'_>, s_path: &Path, v_path: &Path, errors: &mut ErrorList) {
    if let Some(not) = &v.not {
        nested_completeness(not, Some(s), s_path, &v_path.child("not"), errors);
    }
    for (i, n) in v.all_of.iter().enumerate() {
        nested_completeness(n, Some(s), s_path, &v_path.child("allOf").index(i), errors);
    }
    for (i, n) in v.any_of.iter().enumerate() {
        nested_completeness(n, Some(s), s_path, &v_path.child("anyOf").index(i), errors);
    }
    for (i, n) in v.one_of.iter().enumerate() {
        nested_completeness(n, Some(s), s_path, &v_path.child("oneOf").index(i), errors);
    }
}

fn nested_completeness(
    v: &Node<'_>,
    s: Option<&Node<'_>>,
    s_path: &Path,
    v_path: &Path,
    errors: &mut ErrorList,
) {
    let Some(s) = s else {
        errors.push(Error::required(
            s_path,
            format!("because it is defined in {v_path}"),
        ));
        return;
    };
    completeness(v, s, s_path, v_path, errors);
    if let Some(item) = v.item_schema() {
        nested_completeness(
            item,
            s.item_schema(),
            &s_path.child("items"),
            &v_path.child("items"),
            errors,
        );
    }
    for (name, property) in &v.properties {
        let v_at = v_path.child("properties").key(name);
        let s_at = s_path.child("properties").key(name);
        match s.property(name) {
            None => errors.push(Error::required(
                &s_at,
                format!("because it is defined in {v_at}"),
            )),
            Some(sp) => nested_completeness(property, Some(sp), &s_at, &v_at, errors),
        }
    }
}

#[cfg(test)]
mod tests;
