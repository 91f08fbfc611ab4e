//! How rules see a JSON value: typed by its schema node, as upstream's `UnstructuredToVal`.

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine as _;
use chrono::{DateTime, FixedOffset, NaiveDate, TimeZone as _};
use kube_cel::cel::objects::{Key, Map, Value as Cel};
use serde_json::Value;

use crate::projection::{ALL, Projection};
use crate::schema::{Format, Node};

/// Converts `value` for rules on `node` (`None`: no schema, e.g. unknown fields), leaving out
/// the fields that `proj` says no rule can reach.
pub(crate) fn to_cel(value: &Value, node: Option<&Node>, proj: &Projection) -> Cel {
    match value {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => {
            let as_float = node.is_some_and(|n| n.ty == "number");
            match n.as_i64() {
                Some(i) if !as_float => Cel::Int(i),
                _ => Cel::Float(n.as_f64().unwrap_or(f64::NAN)),
            }
        }
        Value::String(s) => string(s, node),
        Value::Array(items) => {
            let item_node = node.and_then(|n| n.items.as_deref());
            Cel::List(Arc::new(
                items.iter().map(|v| to_cel(v, item_node, &ALL)).collect(),
            ))
        }
        Value::Object(fields) => {
            let mut map: HashMap<Key, Cel> = HashMap::with_capacity(fields.len());
            match node {
                Some(n) if !n.properties.is_empty() || n.resource_root => {
                    for (name, child) in &n.properties {
                        let (Some(v), Some(key)) = (fields.get(name), &child.cel_key) else {
                            continue;
                        };
                        if let Some(p) = proj.field(key) {
                            map.insert(Key::String(key.clone()), to_cel(v, Some(child), p));
                        }
                    }
                    if n.resource_root {
                        for meta in ["apiVersion", "kind"] {
                            if let Some(v @ Value::String(_)) = fields.get(meta) {
                                map.insert(
                                    Key::String(Arc::new(meta.to_owned())),
                                    to_cel(v, None, &ALL),
                                );
                            }
                        }
                        if let Some(Value::Object(m)) = fields.get("metadata") {
                            // only name and generateName of metadata are visible to rules
                            let mut meta: HashMap<Key, Cel> = HashMap::new();
                            for f in ["name", "generateName"] {
                                if let Some(v @ Value::String(_)) = m.get(f) {
                                    meta.insert(
                                        Key::String(Arc::new(f.to_owned())),
                                        to_cel(v, None, &ALL),
                                    );
                                }
                            }
                            map.insert(
                                Key::String(Arc::new("metadata".to_owned())),
                                Cel::Map(Map::from(meta)),
                            );
                        }
                    }
                }
                Some(n) if n.additional.is_some() => {
                    let add = n.additional.as_deref();
                    for (k, v) in fields {
                        if let Some(p) = proj.field(k) {
                            map.insert(Key::String(Arc::new(k.clone())), to_cel(v, add, p));
                        }
                    }
                }
                _ => {
                    for (k, v) in fields {
                        if let Some(p) = proj.field(k) {
                            map.insert(Key::String(Arc::new(k.clone())), to_cel(v, None, p));
                        }
                    }
                }
            }
            Cel::Map(Map::from(map))
        }
    }
}

/// The total size of a value as the cost model counts sizes, with bytes for characters (never
/// fewer): the characters of a string, the items of a list and the entries of a map with the
/// total sizes of everything in them; 1 for any other value. It bounds the size of the value
/// and of each part of it, and what one traversal of it visits.
pub(crate) fn total_size(value: &Cel) -> u64 {
    match value {
        Cel::String(s) => s.len() as u64,
        Cel::Bytes(b) => b.len() as u64,
        Cel::List(items) => items
            .iter()
            .fold(items.len() as u64, |n, v| n.saturating_add(total_size(v))),
        Cel::Map(map) => map.map.iter().fold(map.map.len() as u64, |n, (k, v)| {
            let key = match k {
                Key::String(s) => s.len() as u64,
                _ => 1,
            };
            n.saturating_add(key).saturating_add(total_size(v))
        }),
        Cel::Opaque(o) => o
            .downcast_ref::<kube_cel::cel::objects::OptionalValue>()
            .and_then(|o| o.value())
            .map_or(1, total_size),
        _ => 1,
    }
}

fn string(s: &str, node: Option<&Node>) -> Cel {
    let format = node.map_or(Format::None, |n| n.format);
    let plain = || Cel::String(Arc::new(s.to_owned()));
    if node.is_some_and(|n| n.int_or_string || n.ty != "string") {
        return plain();
    }
    match format {
        Format::None => plain(),
        Format::DateTime => {
            DateTime::parse_from_rfc3339(s).map_or_else(|_| plain(), Cel::Timestamp)
        }
        Format::Date => NaiveDate::parse_from_str(s, "%Y-%m-%d")
            .ok()
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .and_then(|dt| utc().from_local_datetime(&dt).single())
            .map_or_else(plain, Cel::Timestamp),
        Format::Duration => parse_duration(s).map_or_else(plain, Cel::Duration),
        Format::Byte => base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_or_else(|_| plain(), |b| Cel::Bytes(Arc::new(b))),
    }
}

fn utc() -> FixedOffset {
    FixedOffset::east_opt(0).expect("invariant: zero offset is valid")
}

/// Parses a Go duration (`1h30m`, `-1.5s`, `300ms`, `0`) with the one Go duration parser.
pub(crate) fn parse_duration(s: &str) -> Option<chrono::Duration> {
    let signed = genplane_apimachinery::duration::parse_signed(s).ok()?;
    let magnitude = chrono::Duration::from_std(signed.magnitude).ok()?;
    Some(if signed.negative {
        -magnitude
    } else {
        magnitude
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse() {
        assert_eq!(parse_duration("1h30m"), Some(chrono::Duration::minutes(90)));
        assert_eq!(
            parse_duration("-1.5s"),
            Some(chrono::Duration::milliseconds(-1500))
        );
        assert_eq!(parse_duration("0"), Some(chrono::Duration::zero()));
        assert_eq!(parse_duration("5x"), None);
        assert_eq!(parse_duration(""), None);
    }
}
