//! The OpenAPI rules of the `x-kubernetes-*` extensions: preserve-unknown-fields, map and list
//! types, list map keys (item properties, required or defaulted, not nullable), set items.

use std::collections::BTreeSet;

use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use serde_json::Value;

use super::Options;
use super::parse::{Items, Node};

pub(super) fn extension_errors(
    s: &Node<'_>,
    path: &Path,
    options: &Options,
    errors: &mut ErrorList,
) {
    let ty = s.ty();
    if s.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        errors.push(Error::invalid(
            &path.child("x-kubernetes-preserve-unknown-fields"),
            false,
            "must be true or undefined",
        ));
    }

    let map_type = s.opt_s("x-kubernetes-map-type");
    if map_type.is_some() && ty != "object" {
        let message = "must be object if x-kubernetes-map-type is specified";
        if ty.is_empty() {
            errors.push(Error::required(&path.child("type"), message));
        } else {
            errors.push(Error::invalid(&path.child("type"), ty, message));
        }
    }
    if let Some(map_type) = map_type
        && map_type != "atomic"
        && map_type != "granular"
    {
        errors.push(Error::not_supported(
            &path.child("x-kubernetes-map-type"),
            map_type,
            &["atomic", "granular"],
        ));
    }

    let list_type = s.opt_s("x-kubernetes-list-type");
    if list_type.is_some() && ty != "array" {
        let message = "must be array if x-kubernetes-list-type is specified";
        if ty.is_empty() {
            errors.push(Error::required(&path.child("type"), message));
        } else {
            errors.push(Error::invalid(&path.child("type"), ty, message));
        }
    } else if options.require_atomic_set_type
        && list_type == Some("set")
        && let Some(item) = s.item_schema()
    {
        let message = "must be atomic as item of a list with x-kubernetes-list-type=set";
        let item_list_type = item.opt_s("x-kubernetes-list-type");
        match item.ty() {
            "array" if item_list_type.is_some_and(|t| t != "atomic") => {
                errors.push(Error::invalid(
                    &path.child("items").child("x-kubernetes-list-type"),
                    item_list_type.unwrap_or_default(),
                    message,
                ));
            }
            "object" if item.opt_s("x-kubernetes-map-type") != Some("atomic") => {
                // Upstream shows the item's list type here, which is normally unset.
                errors.push(Error::invalid(
                    &path.child("items").child("x-kubernetes-map-type"),
                    item_list_type.map(Value::from).unwrap_or(Value::Null),
                    message,
                ));
            }
            _ => {}
        }
    }
    if let Some(list_type) = list_type
        && !matches!(list_type, "atomic" | "set" | "map")
    {
        errors.push(Error::not_supported(
            &path.child("x-kubernetes-list-type"),
            list_type,
            &["atomic", "set", "map"],
        ));
    }

    let keys = s.strs("x-kubernetes-list-map-keys");
    let keys_value = || Value::from(keys.clone());
    if !keys.is_empty() {
        let message = "must be map if x-kubernetes-list-map-keys is non-empty";
        match list_type {
            None => errors.push(Error::required(
                &path.child("x-kubernetes-list-type"),
                message,
            )),
            Some("map") => {}
            Some(other) => {
                errors.push(Error::invalid(
                    &path.child("x-kubernetes-list-type"),
                    other,
                    message,
                ));
            }
        }
    }
    if list_type == Some("map") {
        if keys.is_empty() {
            errors.push(Error::required(
                &path.child("x-kubernetes-list-map-keys"),
                "must not be empty if x-kubernetes-list-type is map",
            ));
        }
        match &s.items {
            None => errors.push(Error::required(
                &path.child("items"),
                "must have a schema if x-kubernetes-list-type is map",
            )),
            Some(Items::Many(_)) => errors.push(Error::invalid(
                &path.child("items"),
                s.get("items").cloned().unwrap_or(Value::Null),
                "must only have a single schema if x-kubernetes-list-type is map",
            )),
            Some(Items::One(item)) if item.ty() != "object" => errors.push(Error::invalid(
                &path.child("items").child("type"),
                item.ty(),
                "must be object if parent array's x-kubernetes-list-type is map",
            )),
            Some(Items::One(item)) => {
                let mut seen = BTreeSet::new();
                for key in &keys {
                    match item.property(key) {
                        Some(p) if p.ty() == "array" || p.ty() == "object" => {
                            // Upstream shows the item's type here.
                            errors.push(Error::invalid(
                                &path.child("items").child("properties").key(key).child("type"),
                                item.ty(),
                                "must be a scalar type if parent array's x-kubernetes-list-type is map",
                            ));
                        }
                        Some(_) => {}
                        None => errors.push(Error::invalid(
                            &path.child("x-kubernetes-list-map-keys"),
                            keys_value(),
                            "entries must all be names of item properties",
                        )),
                    }
                    if !seen.insert(*key) {
                        errors.push(Error::invalid(
                            &path.child("x-kubernetes-list-map-keys"),
                            keys_value(),
                            "must not contain duplicate entries",
                        ));
                    }
                }
            }
        }
    }

    if options.require_map_list_keys_map_set_validation {
        errors.extend(map_list_keys_map_set(s, path));
    }
}

/// Map and set items are not nullable; map keys are required or defaulted, and not nullable.
pub(super) fn map_list_keys_map_set(s: &Node<'_>, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    let Some(item) = s.item_schema() else {
        return errors;
    };
    let Some(list_type) = s.opt_s("x-kubernetes-list-type") else {
        return errors;
    };
    if list_type != "set" && list_type != "map" {
        return errors;
    }
    if item.b("nullable") {
        errors.push(Error::forbidden(
            &path.child("items").child("nullable"),
            format!("cannot be nullable when x-kubernetes-list-type is {list_type}"),
        ));
    }
    if list_type == "map" {
        let required = item.strs("required");
        for key in s.strs("x-kubernetes-list-map-keys") {
            let Some(property) = item.property(key) else {
                continue;
            };
            let at = path.child("items").child("properties").key(key);
            if !required.contains(&key) && property.get("default").is_none() {
                errors.push(Error::required(
                    &at.child("default"),
                    "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
                ));
            }
            if property.b("nullable") {
                errors.push(Error::forbidden(
                    &at.child("nullable"),
                    "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
                ));
            }
        }
    }
    errors
}

pub(super) fn has_non_atomic_set_items(s: &Node<'_>) -> bool {
    if s.opt_s("x-kubernetes-list-type") != Some("set") {
        return false;
    }
    match s.item_schema() {
        Some(item) if item.ty() == "array" => item
            .opt_s("x-kubernetes-list-type")
            .is_some_and(|t| t != "atomic"),
        Some(item) if item.ty() == "object" => {
            item.opt_s("x-kubernetes-map-type") != Some("atomic")
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests;
