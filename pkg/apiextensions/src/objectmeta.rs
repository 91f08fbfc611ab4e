//! `metadata` of custom resources and their embedded resources read as upstream reads it: by
//! decoding into `ObjectMeta` and encoding it back (upstream's objectmeta `GetObjectMeta` and
//! `SetObjectMeta`). Fields ObjectMeta does not have are dropped (and reported, for strict
//! field validation); fields of the wrong type are an error, or dropped when reading from
//! storage; values are re-encoded as Go encodes them (timestamps in UTC to the second, empty
//! values left out).

use genplane_apimachinery::meta::{ObjectMeta, rfc3339};
use serde_json::{Map, Value};

/// The string fields of ObjectMeta (left out when empty).
const STRING_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
];

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Go's message for a value of the wrong type.
fn type_error(found: &Value, field: &str, go_type: &str) -> String {
    let found = match found {
        Value::Number(n) => format!("number {n}"),
        other => json_type(other).to_owned(),
    };
    format!(
        "json: cannot unmarshal {found} into Go struct field ObjectMeta.{field} of type {go_type}"
    )
}

/// A field's value re-encoded, or `None` when it is left out; `Err` when of the wrong type.
type Coerced = Result<Option<Value>, String>;

/// Reads one item of a list of structs, given its path prefix and the unknown-field paths.
type ItemReader =
    fn(&Map<String, Value>, &str, &mut Vec<String>) -> Result<Map<String, Value>, String>;

fn string_field(v: &Value, field: &str) -> Coerced {
    match v {
        Value::Null => Ok(None),
        Value::String(s) if s.is_empty() => Ok(None),
        Value::String(_) => Ok(Some(v.clone())),
        other => Err(type_error(other, field, "string")),
    }
}

fn int_field(v: &Value, field: &str, omit_zero: bool) -> Coerced {
    match v {
        Value::Null => Ok(None),
        Value::Number(n) => match n.as_i64() {
            Some(0) if omit_zero => Ok(None),
            Some(i) => Ok(Some(Value::from(i))),
            None => Err(type_error(v, field, "int64")),
        },
        other => Err(type_error(other, field, "int64")),
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Go's `time.Parse(time.RFC3339, s)`, as seconds since the epoch (fractions dropped, as
/// the re-encoding drops them).
pub(crate) fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let digits = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = b.get(r)?;
        part.iter()
            .all(u8::is_ascii_digit)
            .then(|| part.iter().fold(0i64, |a, d| a * 10 + i64::from(d - b'0')))
    };
    let (year, month, day) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
    let (hour, min, sec) = (digits(11..13)?, digits(14..16)?, digits(17..19)?);
    if !crate::formats::is_date(&s[..10]) || hour > 23 || min > 59 || sec > 59 {
        return None;
    }
    let mut rest = &s[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return None;
        }
        rest = &frac[n..];
    }
    let offset = match rest.as_bytes() {
        [b'Z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2]
            if [h1, h2, m1, m2].iter().all(|d| d.is_ascii_digit()) =>
        {
            let h = i64::from((h1 - b'0') * 10 + (h2 - b'0'));
            let m = i64::from((m1 - b'0') * 10 + (m2 - b'0'));
            if h > 23 || m > 59 {
                return None;
            }
            let o = h * 3600 + m * 60;
            if *sign == b'-' { -o } else { o }
        }
        _ => return None,
    };
    Some(days_from_civil(year, month, day) * 86_400 + hour * 3600 + min * 60 + sec - offset)
}

/// Seconds since the epoch of Go's zero time, 0001-01-01T00:00:00Z.
const ZERO_TIME: i64 = -62_135_596_800;

fn time_field(v: &Value, field: &str) -> Coerced {
    match v {
        Value::Null => Ok(None),
        Value::String(s) => match parse_rfc3339(s) {
            Some(ZERO_TIME) => Ok(None),
            Some(t) => Ok(Some(Value::String(rfc3339(t)))),
            None => Err(format!(
                "parsing time {} as \"2006-01-02T15:04:05Z07:00\": cannot parse {} as RFC 3339",
                genplane_apimachinery::gofmt::Quoted(s),
                genplane_apimachinery::gofmt::Quoted(s)
            )),
        },
        other => Err(type_error(other, field, "v1.Time")),
    }
}

fn string_map_field(v: &Value, field: &str) -> Coerced {
    match v {
        Value::Null => Ok(None),
        Value::Object(map) if map.is_empty() => Ok(None),
        Value::Object(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                let s = match v {
                    Value::Null => String::new(),
                    Value::String(s) => s.clone(),
                    other => return Err(type_error(other, field, "string")),
                };
                out.insert(k.clone(), Value::String(s));
            }
            Ok(Some(Value::Object(out)))
        }
        other => Err(type_error(other, field, "map[string]string")),
    }
}

fn string_list_field(v: &Value, field: &str) -> Coerced {
    match v {
        Value::Null => Ok(None),
        Value::Array(items) if items.is_empty() => Ok(None),
        Value::Array(items) => items
            .iter()
            .map(|v| match v {
                Value::Null => Ok(Value::String(String::new())),
                Value::String(_) => Ok(v.clone()),
                other => Err(type_error(other, field, "string")),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|v| Some(Value::Array(v))),
        other => Err(type_error(other, field, "[]string")),
    }
}

/// A list of structs: each item is read by `item`, which gets its path for unknown fields.
fn struct_list_field(
    v: &Value,
    field: &str,
    go_type: &str,
    unknown: &mut Vec<String>,
    item: ItemReader,
) -> Coerced {
    match v {
        Value::Null => Ok(None),
        Value::Array(items) if items.is_empty() => Ok(None),
        Value::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, it) in items.iter().enumerate() {
                let prefix = format!("{field}[{i}]");
                let empty = Map::new();
                let map = match it {
                    Value::Null => &empty,
                    Value::Object(m) => m,
                    other => return Err(type_error(other, field, go_type)),
                };
                out.push(Value::Object(item(map, &prefix, unknown)?));
            }
            Ok(Some(Value::Array(out)))
        }
        other => Err(type_error(other, field, &format!("[]{go_type}"))),
    }
}

fn owner_reference(
    map: &Map<String, Value>,
    prefix: &str,
    unknown: &mut Vec<String>,
) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    for k in ["apiVersion", "kind", "name", "uid"] {
        let s = match map.get(k) {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => {
                return Err(type_error(other, &format!("ownerReferences.{k}"), "string"));
            }
        };
        out.insert(k.to_owned(), Value::String(s));
    }
    for (k, v) in map {
        match k.as_str() {
            "apiVersion" | "kind" | "name" | "uid" => {}
            "controller" | "blockOwnerDeletion" => match v {
                Value::Null => {}
                Value::Bool(_) => {
                    out.insert(k.clone(), v.clone());
                }
                other => return Err(type_error(other, &format!("ownerReferences.{k}"), "bool")),
            },
            _ => unknown.push(format!("{prefix}.{k}")),
        }
    }
    Ok(out)
}

fn managed_fields_entry(
    map: &Map<String, Value>,
    prefix: &str,
    unknown: &mut Vec<String>,
) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    for (k, v) in map {
        let field = format!("managedFields.{k}");
        let coerced = match k.as_str() {
            "manager" | "operation" | "apiVersion" | "fieldsType" | "subresource" => {
                string_field(v, &field)?
            }
            "time" => time_field(v, &field)?,
            "fieldsV1" => (!v.is_null()).then(|| v.clone()),
            _ => {
                unknown.push(format!("{prefix}.{k}"));
                None
            }
        };
        if let Some(c) = coerced {
            out.insert(k.clone(), c);
        }
    }
    Ok(out)
}

/// One field of ObjectMeta re-encoded; `None` inside `Ok` when it is left out, and `Err(None)`
/// when ObjectMeta has no such field.
fn coerce_field(
    k: &str,
    v: &Value,
    unknown: &mut Vec<String>,
) -> Result<Option<Value>, Option<String>> {
    let r = match k {
        _ if STRING_FIELDS.contains(&k) => string_field(v, k),
        "generation" => int_field(v, k, true),
        "deletionGracePeriodSeconds" => int_field(v, k, false),
        "creationTimestamp" | "deletionTimestamp" => time_field(v, k),
        "labels" | "annotations" => string_map_field(v, k),
        "finalizers" => string_list_field(v, k),
        "ownerReferences" => struct_list_field(v, k, "v1.OwnerReference", unknown, owner_reference),
        "managedFields" => {
            struct_list_field(v, k, "v1.ManagedFieldsEntry", unknown, managed_fields_entry)
        }
        _ => return Err(None),
    };
    r.map_err(Some)
}

/// Re-encodes `metadata` as ObjectMeta. Unknown fields are dropped and their paths (relative
/// to `metadata`, e.g. `foo`, `ownerReferences[0].bar`) added to `unknown`. A field of the
/// wrong type is an error, unless `drop_invalid`, which drops it instead. `metadata` that is
/// not an object is an error either way.
pub(crate) fn coerce(
    metadata: &Value,
    drop_invalid: bool,
    unknown: &mut Vec<String>,
) -> Result<Value, String> {
    let map = match metadata {
        Value::Null => return Ok(Value::Object(Map::new())),
        Value::Object(m) => m,
        other if drop_invalid => {
            return Err(format!(
                "invalid metadata: expected object, got {}",
                match other {
                    Value::Bool(_) => "bool",
                    Value::Number(_) => "float64",
                    Value::String(_) => "string",
                    _ => "[]interface {}",
                }
            ));
        }
        other => {
            return Err(format!(
                "json: cannot unmarshal {} into Go value of type v1.ObjectMeta",
                json_type(other)
            ));
        }
    };
    let mut out = Map::new();
    let mut found_unknown = Vec::new();
    for (k, v) in map {
        let mut nested_unknown = Vec::new();
        match coerce_field(k, v, &mut nested_unknown) {
            Ok(Some(c)) => {
                out.insert(k.clone(), c);
                found_unknown.extend(nested_unknown);
            }
            Ok(None) => found_unknown.extend(nested_unknown),
            Err(None) => found_unknown.push(k.clone()),
            Err(Some(message)) if !drop_invalid => return Err(message),
            Err(Some(_)) => {}
        }
    }
    unknown.extend(found_unknown);
    Ok(Value::Object(out))
}

/// Reads `metadata` into the typed ObjectMeta, with Go's type errors.
pub(crate) fn read(metadata: &Value) -> Result<ObjectMeta, String> {
    let mut ignored = Vec::new();
    let coerced = coerce(metadata, false, &mut ignored)?;
    serde_json::from_value(coerced).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_fields_are_dropped_and_reported() {
        let mut unknown = Vec::new();
        let out = coerce(
            &json!({"name": "a", "foo": 1, "labels": {"x": "y"}, "generation": 0,
                    "ownerReferences": [{"apiVersion": "v1", "kind": "K", "name": "n", "uid": "u", "bar": 1}]}),
            false,
            &mut unknown,
        )
        .expect("coerces");
        assert_eq!(
            out,
            json!({"name": "a", "labels": {"x": "y"},
                   "ownerReferences": [{"apiVersion": "v1", "kind": "K", "name": "n", "uid": "u"}]})
        );
        unknown.sort();
        assert_eq!(unknown, vec!["foo", "ownerReferences[0].bar"]);
    }

    #[test]
    fn wrong_types_are_errors_or_dropped() {
        let mut unknown = Vec::new();
        let err = coerce(&json!({"name": 5}), false, &mut unknown).expect_err("wrong type");
        assert_eq!(
            err,
            "json: cannot unmarshal number 5 into Go struct field ObjectMeta.name of type string"
        );
        let out =
            coerce(&json!({"name": 5, "namespace": "ns"}), true, &mut unknown).expect("drops");
        assert_eq!(out, json!({"namespace": "ns"}));
        assert!(coerce(&json!("x"), true, &mut unknown).is_err());
    }

    #[test]
    fn timestamps_are_normalized_to_utc_seconds() {
        let mut unknown = Vec::new();
        let out = coerce(
            &json!({"creationTimestamp": "2024-01-01T10:00:00.5+02:00"}),
            false,
            &mut unknown,
        )
        .expect("coerces");
        assert_eq!(out, json!({"creationTimestamp": "2024-01-01T08:00:00Z"}));
        assert!(
            coerce(
                &json!({"creationTimestamp": "yesterday"}),
                false,
                &mut unknown
            )
            .is_err()
        );
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339("0001-01-01T00:00:00Z"), Some(ZERO_TIME));
    }
}
