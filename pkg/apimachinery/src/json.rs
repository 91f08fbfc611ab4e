//! Facts about JSON text that a parsed `serde_json::Value` no longer shows.
//!
//! A JSON object may repeat a key; parsing keeps the last value. Upstream's strict decoding
//! reports every repeat (`duplicate field "metadata.name"`) under `fieldValidation=Strict` and
//! `Warn`. [`parse`] finds them while it parses, in the same pass.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Parses the JSON `text` as `serde_json::from_slice` does (the same errors, the last of
/// repeated keys kept), and also answers the paths of repeated object keys, in document order,
/// written as upstream writes them: `metadata.name`, `spec.containers[0].image`. A path is
/// written only for a repeat, so clean text costs no more than the parse.
pub fn parse(text: &[u8]) -> Result<(Value, Vec<String>), serde_json::Error> {
    parse_recording(text, false)
}

/// The path of every object key of the JSON `text`, in document order, a repeated key once
/// for each time it appears (written as [`parse`] writes them). What strict decoding reports
/// is ordered by it: upstream's decoder reports problems as it meets them.
pub fn key_paths(text: &[u8]) -> Result<Vec<String>, serde_json::Error> {
    parse_recording(text, true).map(|(_, paths)| paths)
}

fn parse_recording(text: &[u8], every: bool) -> Result<(Value, Vec<String>), serde_json::Error> {
    let mut record = Paths {
        found: Vec::new(),
        every,
    };
    let mut deserializer = serde_json::Deserializer::from_slice(text);
    let value = Parse {
        at: At::Root,
        record: &mut record,
    }
    .deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok((value, record.found))
}

/// Records the paths of repeated keys (or of every key).
struct Paths {
    found: Vec<String>,
    /// Every key's path, not only repeats'.
    every: bool,
}

impl Record for Paths {
    type Key = String;

    fn name(key: &String) -> &str {
        key
    }

    fn key(&mut self, at: &At<'_>, _: &String, repeated: bool) {
        if self.every || repeated {
            self.found.push(at.to_string());
        }
    }
}

/// What a parse notes of the keys it meets, and how it reads them (a YAML key with its
/// line, say).
pub(crate) trait Record {
    /// A key as read.
    type Key: for<'de> serde::Deserialize<'de>;
    /// The key's name in the value.
    fn name(key: &Self::Key) -> &str;
    /// Called for each key at `at`; `repeated` when its mapping had it already.
    fn key(&mut self, at: &At<'_>, key: &Self::Key, repeated: bool);
}

/// Parses any self-describing text (JSON, YAML) into a JSON value, as `serde_json::Value`'s
/// own deserializer does (the last of repeated keys kept), telling `record` of every key.
pub(crate) fn parse_with<'de, D: Deserializer<'de>, R: Record>(
    deserializer: D,
    record: &mut R,
) -> Result<Value, D::Error> {
    Parse {
        at: At::Root,
        record,
    }
    .deserialize(deserializer)
}

/// Where the parse is: a path written out only when a repeat is found.
#[derive(Clone, Copy)]
pub(crate) enum At<'a> {
    Root,
    Key(&'a At<'a>, &'a str),
    Index(&'a At<'a>, usize),
}

impl fmt::Display for At<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            At::Root => Ok(()),
            At::Key(At::Root, key) => f.write_str(key),
            At::Key(parent, key) => write!(f, "{parent}.{key}"),
            At::Index(parent, index) => write!(f, "{parent}[{index}]"),
        }
    }
}

struct Parse<'a, 'f, R> {
    at: At<'a>,
    record: &'f mut R,
}

impl<'de, R: Record> DeserializeSeed<'de> for Parse<'_, '_, R> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        // serde_json refuses nesting beyond 128 levels here, as it does for `from_slice`.
        deserializer.deserialize_any(self)
    }
}

impl<'de, R: Record> Visitor<'de> for Parse<'_, '_, R> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }
    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }
    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }
    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Value, E> {
        Ok(Number::from_f64(value).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E: de::Error>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_owned()))
    }
    fn visit_string<E: de::Error>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        loop {
            let item = Parse {
                at: At::Index(&self.at, items.len()),
                record: &mut *self.record,
            };
            match seq.next_element_seed(item)? {
                Some(value) => items.push(value),
                None => return Ok(Value::Array(items)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<R::Key>()? {
            let name = R::name(&key);
            let at = At::Key(&self.at, name);
            self.record.key(&at, &key, object.contains_key(name));
            let value = map.next_value_seed(Parse {
                at,
                record: &mut *self.record,
            })?;
            object.insert(name.to_owned(), value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn duplicate_fields(text: &[u8]) -> Vec<String> {
        parse(text).unwrap().1
    }

    #[test]
    fn repeated_keys_are_found_with_upstreams_paths_in_document_order() {
        let text = br#"{"metadata":{"name":"a","name":"b"},"data":{"k":"1"},
            "items":[{"x":1},{"x":1,"x":2}],"data":{"k":"2","k":"3"}}"#;
        assert_eq!(
            duplicate_fields(text),
            ["metadata.name", "items[1].x", "data", "data.k"]
        );
        // The last of the repeats is kept, as serde_json keeps it.
        assert_eq!(
            parse(text).unwrap().0,
            serde_json::from_slice::<Value>(text).unwrap()
        );
    }

    #[test]
    fn every_key_path_is_listed_in_document_order() {
        let text = br#"{"spec":{"b":1,"a":[{"x":1}],"b":2},"metadata":{"name":"n"}}"#;
        assert_eq!(
            key_paths(text).unwrap(),
            [
                "spec",
                "spec.b",
                "spec.a",
                "spec.a[0].x",
                "spec.b",
                "metadata",
                "metadata.name"
            ]
        );
    }

    #[test]
    fn values_and_errors_are_serde_jsons() {
        for text in [
            &br#"{"a":{"b":[1,{"c":2}]},"d":null,"e":-1.5e3,"f":18446744073709551615,"g":"\u00e9\n","h":[],"i":{},"j":true}"#[..],
            b"[1, 2.0, -3]",
            b"\"s\"",
            b"  42  ",
        ] {
            let (value, duplicates) = parse(text).unwrap();
            assert_eq!(value, serde_json::from_slice::<Value>(text).unwrap());
            assert!(duplicates.is_empty());
        }
        for broken in [
            &b"not json"[..],
            br#"{"a":1,"a":2,"#,
            br#"{"a":1} trailing"#,
            b"",
            br#"{"a":01}"#,
        ] {
            assert_eq!(
                parse(broken).unwrap_err().to_string(),
                serde_json::from_slice::<Value>(broken)
                    .unwrap_err()
                    .to_string()
            );
        }
    }

    #[test]
    fn deep_nesting_is_refused_as_serde_json_refuses_it() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(
            parse(deep.as_bytes()).unwrap_err().to_string(),
            serde_json::from_slice::<Value>(deep.as_bytes())
                .unwrap_err()
                .to_string()
        );
        let fine = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert!(parse(fine.as_bytes()).is_ok());
    }
}
