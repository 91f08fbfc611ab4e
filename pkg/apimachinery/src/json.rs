//! Facts about JSON text that a parsed `serde_json::Value` no longer shows.
//!
//! A JSON object may repeat a key; parsing keeps the last value. Upstream's strict decoding
//! reports every repeat (`duplicate field "metadata.name"`) under `fieldValidation=Strict` and
//! `Warn`, so the raw text is walked once more to find them.

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// How deep the walk goes; deeper text is not inspected further (serde_json itself refuses
/// nesting beyond 128 levels).
const MAX_DEPTH: usize = 128;

/// The paths of repeated object keys in the JSON `text`, in document order, written as
/// upstream writes them: `metadata.name`, `spec.containers[0].image`. Text that is not valid
/// JSON yields what was found before the error (the parse itself reports the error).
pub fn duplicate_fields(text: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let mut deserializer = serde_json::Deserializer::from_slice(text);
    let _ = Walk {
        path: String::new(),
        depth: 0,
        found: &mut found,
    }
    .deserialize(&mut deserializer);
    found
}

struct Walk<'a> {
    path: String,
    depth: usize,
    found: &'a mut Vec<String>,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        if self.depth >= MAX_DEPTH {
            return deserializer.deserialize_ignored_any(IgnoredAny).map(drop);
        }
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut index = 0usize;
        loop {
            let item = Walk {
                path: format!("{}[{index}]", self.path),
                depth: self.depth + 1,
                found: &mut *self.found,
            };
            if seq.next_element_seed(item)?.is_none() {
                return Ok(());
            }
            index += 1;
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = if self.path.is_empty() {
                key.clone()
            } else {
                format!("{}.{key}", self.path)
            };
            if !seen.insert(key) {
                self.found.push(path.clone());
            }
            map.next_value_seed(Walk {
                path,
                depth: self.depth + 1,
                found: &mut *self.found,
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_keys_are_found_with_upstreams_paths_in_document_order() {
        let text = br#"{"metadata":{"name":"a","name":"b"},"data":{"k":"1"},
            "items":[{"x":1},{"x":1,"x":2}],"data":{"k":"2","k":"3"}}"#;
        assert_eq!(
            duplicate_fields(text),
            ["metadata.name", "items[1].x", "data", "data.k"]
        );
    }

    #[test]
    fn clean_or_broken_text_has_none() {
        assert!(duplicate_fields(br#"{"a":{"b":[1,{"c":2}]},"d":null}"#).is_empty());
        assert!(duplicate_fields(b"not json").is_empty());
        assert_eq!(duplicate_fields(br#"{"a":1,"a":2,"#), ["a"]);
    }

    #[test]
    fn deep_nesting_is_not_a_stack_overflow() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(duplicate_fields(deep.as_bytes()).is_empty());
    }
}
