//! Where a custom resource keeps what its Scale shows (a CRD version's `subresources.scale`)
//! and upstream's accessors of those simple JSON paths: read by the custom resource's strategy,
//! which checks the values on every write, and by the `scale` subresource's strategy, which
//! builds and applies Scales.

use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use serde_json::{Map, Value};

/// Where a custom resource keeps what its Scale shows: a CRD version's
/// `subresources.scale`, each path as the CRD writes it (`.spec.replicas`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScalePaths {
    /// `specReplicasPath`.
    pub spec_replicas: String,
    /// `statusReplicasPath`.
    pub status_replicas: String,
    /// `labelSelectorPath`, if set.
    pub label_selector: Option<String>,
}

impl ScalePaths {
    /// The paths of a CRD version's `subresources.scale`, if it has one.
    pub fn of_version(version: &Value) -> Option<Self> {
        let scale = version.pointer("/subresources/scale")?;
        let text = |key: &str| scale.get(key).and_then(Value::as_str).unwrap_or("");
        Some(Self {
            spec_replicas: text("specReplicasPath").to_owned(),
            status_replicas: text("statusReplicasPath").to_owned(),
            label_selector: Some(text("labelSelectorPath"))
                .filter(|p| !p.is_empty())
                .map(str::to_owned),
        })
    }
}

/// The segments of a simple JSON path (`.spec.replicas` -> `spec`, `replicas`).
fn segments(path: &str) -> Vec<&str> {
    path.trim_start_matches('.').split('.').collect()
}

/// The JSON type of a value, in Go's words, for accessor errors.
pub(crate) fn go_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// The value at `path` (`None` when it or a parent is absent); an error when a parent is not
/// an object, as upstream's accessors report it.
pub(crate) fn lookup<'a>(object: &'a Value, path: &str) -> Result<Option<&'a Value>, String> {
    let mut at = object;
    let parts = segments(path);
    for (index, part) in parts.iter().enumerate() {
        let Value::Object(map) = at else {
            let parent = format!(".{}", parts[..index].join("."));
            return Err(format!(
                "{parent} accessor error: {at} is of the type {}, expected map[string]interface{{}}",
                go_type(at)
            ));
        };
        match map.get(*part) {
            Some(next) => at = next,
            None => return Ok(None),
        }
    }
    Ok(Some(at))
}

/// The integer at `path`, if present; an error when something else is there.
pub(crate) fn integer_at(object: &Value, path: &str) -> Result<Option<i64>, String> {
    match lookup(object, path)? {
        None => Ok(None),
        Some(value) => value.as_i64().map(Some).ok_or_else(|| {
            format!(
                "{path} accessor error: {value} is of the type {}, expected int64",
                go_type(value)
            )
        }),
    }
}

/// Sets `value` at `path`, making the objects on the way (a non-object on the way is replaced).
pub(crate) fn set_at(object: &mut Value, path: &str, value: Value) {
    let mut at = object;
    let parts = segments(path);
    let Some((last, parents)) = parts.split_last() else {
        return;
    };
    for part in parents {
        if !at.is_object() {
            *at = Value::Object(Map::new());
        }
        at = at
            .as_object_mut()
            .expect("invariant: made an object above")
            .entry((*part).to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    if !at.is_object() {
        *at = Value::Object(Map::new());
    }
    at.as_object_mut()
        .expect("invariant: made an object above")
        .insert((*last).to_owned(), value);
}

/// The replicas at `path`, when present, are a non-negative int32.
fn validate_replicas(object: &Value, path: &str, errors: &mut ErrorList) {
    let field = Path::new(path);
    match integer_at(object, path) {
        Err(message) => errors.push(Error::invalid(&field, 0, message)),
        Ok(Some(n)) if n < 0 => {
            errors.push(Error::invalid(
                &field,
                n,
                "should be a non-negative integer",
            ));
        }
        Ok(Some(n)) if n > i64::from(i32::MAX) => errors.push(Error::invalid(
            &field,
            n,
            format!("should be less than or equal to {}", i32::MAX),
        )),
        Ok(_) => {}
    }
}

/// Upstream's checks of a custom resource with the scale subresource, on every write: the
/// values at `specReplicasPath` and `statusReplicasPath`, when present, are non-negative
/// int32s, and the value at `labelSelectorPath`, when present, is a string.
pub(crate) fn validate_scale_paths(object: &Value, paths: &ScalePaths) -> ErrorList {
    let mut errors = ErrorList::new();
    validate_replicas(object, &paths.spec_replicas, &mut errors);
    validate_replicas(object, &paths.status_replicas, &mut errors);
    if let Some(path) = &paths.label_selector {
        let field = Path::new(path);
        match lookup(object, path) {
            Err(message) => errors.push(Error::invalid(&field, "", message)),
            Ok(None | Some(Value::Null | Value::String(_))) => {}
            Ok(Some(other)) => errors.push(Error::invalid(
                &field,
                "",
                format!(
                    "{path} accessor error: {other} is of the type {}, expected string",
                    go_type(other)
                ),
            )),
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn paths(selector: Option<&str>) -> ScalePaths {
        ScalePaths {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: ".status.replicas".into(),
            label_selector: selector.map(str::to_owned),
        }
    }

    #[test]
    fn paths_are_read_from_a_crd_version() {
        let version = json!({"name": "v1", "subresources": {"scale": {
            "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector"}}});
        assert_eq!(
            ScalePaths::of_version(&version),
            Some(paths(Some(".status.selector")))
        );
        let no_selector = json!({"subresources": {"scale": {
            "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}}});
        assert_eq!(ScalePaths::of_version(&no_selector), Some(paths(None)));
        assert_eq!(
            ScalePaths::of_version(&json!({"subresources": {"status": {}}})),
            None
        );
    }

    #[test]
    fn integers_are_read_as_upstream_accessors_read_them() {
        let object = json!({"spec": {"replicas": 3, "ratio": 1.5, "name": "x"}, "status": 4});
        assert_eq!(integer_at(&object, ".spec.replicas"), Ok(Some(3)));
        assert_eq!(integer_at(&object, ".spec.missing"), Ok(None));
        assert_eq!(integer_at(&object, ".nothing.below"), Ok(None));
        assert_eq!(
            integer_at(&object, ".spec.ratio").unwrap_err(),
            ".spec.ratio accessor error: 1.5 is of the type float64, expected int64"
        );
        assert_eq!(
            integer_at(&object, ".status.replicas").unwrap_err(),
            ".status accessor error: 4 is of the type int64, expected map[string]interface{}"
        );
    }

    #[test]
    fn set_at_makes_the_objects_on_the_way() {
        let mut object = json!({"spec": {"image": "x"}});
        set_at(&mut object, ".spec.scaling.replicas", json!(2));
        assert_eq!(
            object,
            json!({"spec": {"image": "x", "scaling": {"replicas": 2}}})
        );
    }

    #[test]
    fn replicas_must_be_a_non_negative_int32() {
        let p = paths(Some(".status.selector"));
        assert!(validate_scale_paths(&json!({"spec": {"replicas": 0}}), &p).is_empty());
        assert!(validate_scale_paths(&json!({"spec": {}}), &p).is_empty());
        let messages = |object: Value| -> Vec<String> {
            validate_scale_paths(&object, &p)
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        assert_eq!(
            messages(json!({"spec": {"replicas": -1}})),
            [".spec.replicas: Invalid value: -1: should be a non-negative integer"]
        );
        assert_eq!(
            messages(json!({"spec": {"replicas": 2_147_483_648_i64}})),
            [
                ".spec.replicas: Invalid value: 2147483648: should be less than or equal to 2147483647"
            ]
        );
        assert_eq!(
            messages(json!({"status": {"replicas": -3, "selector": 7}})),
            [
                ".status.replicas: Invalid value: -3: should be a non-negative integer",
                ".status.selector: Invalid value: \"\": .status.selector accessor error: 7 is of the type int64, expected string",
            ]
        );
        assert!(
            validate_scale_paths(&json!({"status": {"replicas": 2, "selector": "app=x"}}), &p)
                .is_empty()
        );
    }
}
