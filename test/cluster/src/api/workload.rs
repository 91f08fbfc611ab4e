//! What apps/v1 Deployments and ReplicaSets share: a label selector, a pod template that
//! matches it, a replica count, and the `kubectl get -o wide` columns naming the template's
//! containers, images and selector. Validation follows upstream's
//! `ValidatePodTemplateSpecForReplicaSet` and `ValidateLabelSelector` for the fields the
//! tests use, with upstream's field paths and words.

use std::collections::BTreeMap;

use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::labels::{LabelSelector, Selector};
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use genplane_apimachinery::validation::{
    name_is_dns_subdomain, validate_annotations, validate_labels,
};
use serde_json::{Value, json};

use super::{items, meta_errors, meta_update_errors, pod, str_at};

/// The label a Deployment adds to its ReplicaSets' selectors and pods.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";

/// The `spec.selector` of `object`, when it is a well-formed label selector.
pub fn label_selector(object: &Value) -> Option<LabelSelector> {
    serde_json::from_value(object.pointer("/spec/selector")?.clone()).ok()
}

/// The selector of `object` as a [`Selector`], when it has a valid one.
pub fn selector(object: &Value) -> Option<Selector> {
    label_selector(object)?.to_selector().ok()
}

/// The labels at `pointer` of `object`.
pub fn labels_at(object: &Value, pointer: &str) -> BTreeMap<String, String> {
    object
        .pointer(pointer)
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// `spec.replicas`, when set.
pub fn replicas(object: &Value) -> Option<i64> {
    object.pointer("/spec/replicas").and_then(Value::as_i64)
}

/// Defaults of both kinds: one replica, and the pod template's defaults.
pub fn default(object: &mut Value) {
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    spec.entry("replicas").or_insert(json!(1));
    if let Some(template) = spec.get_mut("template") {
        pod::default(template);
    }
}

/// Each of `fields` of `section` (`spec`, `status`) that is set is not negative.
pub fn validate_non_negative(
    object: &Value,
    section: &str,
    fields: &[&str],
    errors: &mut ErrorList,
) {
    let path = Path::new(section);
    for field in fields {
        if let Some(value) = object
            .pointer(&format!("/{section}/{field}"))
            .and_then(Value::as_i64)
            .filter(|v| *v < 0)
        {
            errors.push(Error::invalid(
                &path.child(field),
                value,
                "must be greater than or equal to 0",
            ));
        }
    }
}

/// The problems of the selector, the template and the counts of a Deployment's or a
/// ReplicaSet's spec.
pub fn validate_spec(object: &Value) -> ErrorList {
    let mut errors = ErrorList::new();
    let spec = Path::new("spec");
    validate_non_negative(
        object,
        "spec",
        &["replicas", "minReadySeconds"],
        &mut errors,
    );
    let selector_path = spec.child("selector");
    let selector = match object.pointer("/spec/selector") {
        None | Some(Value::Null) => {
            errors.push(Error::required(&selector_path, ""));
            None
        }
        Some(given) => match serde_json::from_value::<LabelSelector>(given.clone()) {
            Err(error) => {
                errors.push(Error::invalid(
                    &selector_path,
                    given.clone(),
                    error.to_string(),
                ));
                None
            }
            Ok(selector) => {
                errors.extend(validate_labels(
                    &selector.match_labels,
                    &selector_path.child("matchLabels"),
                ));
                match selector.to_selector() {
                    Err(error) => {
                        errors.push(Error::invalid(
                            &selector_path,
                            given.clone(),
                            error.to_string(),
                        ));
                        None
                    }
                    Ok(parsed) if parsed.is_empty() => {
                        errors.push(Error::invalid(
                            &selector_path,
                            given.clone(),
                            "empty selector is invalid for deployment",
                        ));
                        None
                    }
                    Ok(parsed) => Some(parsed),
                }
            }
        },
    };
    let template_path = spec.child("template");
    let Some(template) = object.pointer("/spec/template") else {
        errors.push(Error::required(&template_path, ""));
        return errors;
    };
    let labels = labels_at(template, "/metadata/labels");
    let meta = template_path.child("metadata");
    errors.extend(validate_labels(&labels, &meta.child("labels")));
    errors.extend(validate_annotations(
        &labels_at(template, "/metadata/annotations"),
        &meta.child("annotations"),
    ));
    if let Some(selector) = selector
        && !selector.matches(&labels)
    {
        errors.push(Error::invalid(
            &meta.child("labels"),
            json!(labels),
            "`selector` does not match template `labels`",
        ));
    }
    errors.extend(pod::validate_spec(template, &template_path));
    let restart = str_at(template, "/spec/restartPolicy");
    if restart != "Always" {
        errors.push(Error::not_supported(
            &template_path.child("spec").child("restartPolicy"),
            restart,
            &["Always"],
        ));
    }
    if template.pointer("/spec/activeDeadlineSeconds").is_some() {
        errors.push(Error::forbidden(
            &template_path.child("spec").child("activeDeadlineSeconds"),
            "activeDeadlineSeconds in ReplicaSet is not Supported",
        ));
    }
    errors
}

/// The problems of a new Deployment or ReplicaSet: its metadata and [`validate_spec`].
pub fn validate(object: &Value) -> Result<ErrorList, ApiError> {
    let mut errors = meta_errors(object, true, name_is_dns_subdomain)?;
    errors.extend(validate_spec(object));
    Ok(errors)
}

/// The problems of an update: the metadata, [`validate_spec`], and `spec.selector`, which
/// may not change (apps/v1).
pub fn validate_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let mut errors = meta_update_errors(new, old)?;
    errors.extend(validate_spec(new));
    let selector = new.pointer("/spec/selector");
    if selector != old.pointer("/spec/selector") {
        errors.push(Error::invalid(
            &Path::new("spec").child("selector"),
            selector.cloned().unwrap_or(Value::Null),
            "field is immutable",
        ));
    }
    Ok(errors)
}

/// The problems of a status write: the metadata, and the status's `counts` not negative.
pub fn validate_status_update(
    new: &Value,
    old: &Value,
    counts: &[&str],
) -> Result<ErrorList, ApiError> {
    let mut errors = meta_update_errors(new, old)?;
    validate_non_negative(new, "status", counts, &mut errors);
    Ok(errors)
}

/// The wide columns: the template's container names, their images, and the selector.
pub fn wide_cells(object: &Value) -> [Value; 3] {
    let containers = items(object, "/spec/template/spec/containers");
    let names: Vec<&str> = containers.iter().map(|c| str_at(c, "/name")).collect();
    let images: Vec<&str> = containers.iter().map(|c| str_at(c, "/image")).collect();
    let selector = selector(object).map_or_else(|| "<none>".to_owned(), |s| s.to_string());
    [
        json!(names.join(",")),
        json!(images.join(",")),
        json!(selector),
    ]
}

/// The integer at `pointer` of `object`, 0 when absent.
pub fn count(object: &Value, pointer: &str) -> i64 {
    object.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}
