//! What a list or watch selects: its label and field selectors applied to an object.

use std::collections::BTreeMap;

use genplane_apimachinery::errors::{ApiError, Status};
use genplane_apimachinery::{fields, labels};
use serde_json::Value;

/// Checks that a field selector only uses `supported` field names; otherwise 400
/// `field label not supported: <name>`, as upstream answers.
pub fn check_fields(selector: &fields::Selector, supported: &[&str]) -> Result<(), ApiError> {
    match selector
        .requirements()
        .iter()
        .find(|r| !supported.contains(&r.field.as_str()))
    {
        Some(unsupported) => Err(Status::bad_request(format!(
            "field label not supported: {}",
            unsupported.field
        ))
        .into()),
        None => Ok(()),
    }
}

/// A label and a field selector, borrowed from the request.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Selection<'a> {
    pub(crate) labels: &'a labels::Selector,
    pub(crate) fields: &'a fields::Selector,
}

impl Selection<'_> {
    /// Whether everything is selected.
    pub(crate) fn is_everything(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }

    /// Whether `object` is selected; `field_values` computes its fields only when a field
    /// selector needs them.
    pub(crate) fn matches(
        &self,
        object: &Value,
        field_values: impl FnOnce() -> BTreeMap<String, String>,
    ) -> bool {
        if !self.labels.is_empty() {
            let labels: BTreeMap<String, String> =
                genplane_apimachinery::meta::field(object, "labels")
                    .and_then(Value::as_object)
                    .map(|m| {
                        m.iter()
                            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                            .collect()
                    })
                    .unwrap_or_default();
            if !self.labels.matches(&labels) {
                return false;
            }
        }
        self.fields.is_empty() || self.fields.matches(&field_values())
    }
}
