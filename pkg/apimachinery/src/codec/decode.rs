//! Decoding a raw JSON object against the shape of its type, as Go's JSON decoder does.
//!
//! Objects are `serde_json::Value`s everywhere in genplane. Before validation, each is checked
//! against a [`Struct`] schema: every field has the JSON type its Go field has, or the request
//! fails with a 400 BadRequest naming the field (upstream answers
//! `json: cannot unmarshal number into Go struct field ConfigMap.data of type string`).
//! Decoding also produces what upstream would store after a round trip through its Go types:
//! - a `null` struct field is dropped (Go leaves the field unset); a `null` map or list item
//!   becomes the item type's zero value; an empty map or list is dropped unless its Go field
//!   lacks `omitempty` ([`Field::keep_empty`](crate::codec::schema::Field::keep_empty));
//! - fields the type does not have are dropped, and reported in [`Decoded::unknown_fields`]
//!   (for `fieldValidation=Strict|Warn`);
//! - times are rewritten as Go writes them (`metav1.Time` in whole seconds UTC,
//!   `metav1.MicroTime` with six digits), quantities in their canonical form, bytes re-encoded
//!   in standard base64.
//!
//! The same schemas carry each field's protobuf number ([`Field`](crate::codec::schema::Field)), so that [`super::protobuf`]
//! reads and writes Kubernetes protobuf with them and produces exactly this JSON.

use std::borrow::Cow;

use base64::Engine as _;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::codec::schema::{Struct, Type};
use crate::errors::{ApiError, Status};
use crate::gofmt::Quoted;
use crate::meta::rfc3339;
use crate::quantity::Quantity;
use crate::time::{micro_time, parse_micro_time, parse_time};
use crate::validation::field::Path;

/// Why a raw object does not decode into its type. The API answers 400 BadRequest.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// A field has the wrong JSON type.
    #[error("json: cannot unmarshal {found} into field {field} of type {expected}")]
    WrongType {
        /// The field, e.g. `ConfigMap.data[key]`.
        field: String,
        /// The JSON type found: `number`, `string`, `bool`, `array`, `object`.
        found: &'static str,
        /// The type the field has.
        expected: String,
    },
    /// A field has the right JSON type but an unreadable value (a bad time, quantity, base64).
    #[error("field {field}: {message}")]
    BadValue {
        /// The field.
        field: String,
        /// What is wrong.
        message: String,
    },
}

impl DecodeError {
    /// The 400 BadRequest answer, in upstream's words:
    /// `ConfigMap in version "v1" cannot be handled as a ConfigMap: <why>`.
    pub fn to_api_error(&self, kind: &str, version: &str) -> ApiError {
        Status::bad_request(format!(
            "{kind} in version {} cannot be handled as a {kind}: {self}",
            Quoted(version)
        ))
        .into()
    }
}

/// A decoded object: the normalized JSON and the fields its type does not have.
#[derive(Clone, Debug, PartialEq)]
pub struct Decoded {
    /// The object as upstream would store it (see the module docs).
    pub object: Value,
    /// Paths of fields the type does not have, e.g. `spec.foo` (upstream's strict decoding
    /// reports `unknown field "spec.foo"`).
    pub unknown_fields: Vec<String>,
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

struct Walker {
    root: &'static str,
    unknown: Vec<String>,
}

/// Where the walker is. A field path is built from it only for an error or an unknown field:
/// building one for every field, key and item walked cost an allocation and a copy each.
#[derive(Clone, Copy)]
enum At<'a> {
    Root,
    Field(&'a At<'a>, &'a str),
    Key(&'a At<'a>, &'a str),
    Index(&'a At<'a>, usize),
}

impl At<'_> {
    fn path(&self) -> Path {
        match self {
            At::Root => Path::default(),
            At::Field(parent, name) => parent.path().child(name),
            At::Key(parent, key) => parent.path().key(key),
            At::Index(parent, index) => parent.path().index(*index),
        }
    }
}

impl Walker {
    fn field(&self, at: &At<'_>) -> String {
        let path = at.path();
        if path.as_str().is_empty() {
            self.root.to_owned()
        } else {
            format!("{}.{}", self.root, path)
        }
    }

    fn wrong(&self, path: &At<'_>, value: &Value, ty: Type) -> DecodeError {
        DecodeError::WrongType {
            field: self.field(path),
            found: json_type(value),
            expected: ty.name(),
        }
    }

    fn bad(&self, path: &At<'_>, message: impl Into<String>) -> DecodeError {
        DecodeError::BadValue {
            field: self.field(path),
            message: message.into(),
        }
    }

    /// Decodes `value` as `ty`: the value itself when it is already in the decoded form (what
    /// every object a write decoded before is), a new value only where something changes.
    fn walk<'v>(
        &mut self,
        value: &'v Value,
        ty: Type,
        path: &At<'_>,
    ) -> Result<Cow<'v, Value>, DecodeError> {
        let same = Cow::Borrowed(value);
        // A normalized string: the value itself when it already reads so.
        let text = |s: &str, normal: String| {
            if s == normal {
                Cow::Borrowed(value)
            } else {
                Cow::Owned(Value::from(normal))
            }
        };
        match (ty, value) {
            (Type::Any, _)
            | (Type::String, Value::String(_))
            | (Type::Bool, Value::Bool(_))
            | (Type::IntOrString, Value::String(_)) => Ok(same),
            (Type::Int32 | Type::IntOrString, Value::Number(n)) => match n.as_i64() {
                Some(i) if i32::try_from(i).is_ok() => Ok(same),
                _ => Err(self.wrong(path, value, ty)),
            },
            (Type::Int64, Value::Number(n)) => match n.as_i64() {
                Some(_) => Ok(same),
                None => Err(self.wrong(path, value, ty)),
            },
            (Type::Bytes, Value::String(s)) => {
                let compact: String = s.chars().filter(|c| !matches!(c, '\r' | '\n')).collect();
                match base64::engine::general_purpose::STANDARD.decode(compact) {
                    Ok(bytes) => Ok(text(
                        s,
                        base64::engine::general_purpose::STANDARD.encode(bytes),
                    )),
                    Err(e) => Err(self.bad(path, base64_message(&e))),
                }
            }
            (Type::Time, Value::String(s)) => match parse_time(s) {
                Some(t) => Ok(text(s, rfc3339(t.seconds))),
                None => Err(self.bad(
                    path,
                    format!("cannot parse {} as an RFC 3339 time (2006-01-02T15:04:05Z07:00)", Quoted(s)),
                )),
            },
            (Type::MicroTime, Value::String(s)) => match parse_micro_time(s) {
                Some(t) => Ok(text(s, micro_time(t.seconds, t.nanos))),
                None => Err(self.bad(
                    path,
                    format!(
                        "cannot parse {} as a time with microseconds (2006-01-02T15:04:05.000000Z07:00)", Quoted(s)
                    ),
                )),
            },
            (Type::Quantity, Value::String(_) | Value::Number(_)) => {
                let given = match value {
                    Value::String(s) => s.trim().to_owned(),
                    other => other.to_string(),
                };
                match Quantity::parse(&given) {
                    Ok(q) => {
                        let normal = q.to_string();
                        Ok(match value {
                            Value::String(s) => text(s, normal),
                            _ => Cow::Owned(Value::from(normal)),
                        })
                    }
                    Err(e) => Err(self.bad(path, e.to_string())),
                }
            }
            (Type::Struct(schema), Value::Object(fields)) => {
                let mut out = Changed::new(fields);
                for (index, (name, item)) in fields.iter().enumerate() {
                    let child = At::Field(path, name);
                    let kept = match schema.field(name) {
                        Some(_) if item.is_null() => None,
                        Some(field) => {
                            let decoded = self.walk(item, field.ty, &child)?;
                            let empty = match (&field.ty, &*decoded) {
                                (Type::Map(_), Value::Object(map)) => map.is_empty(),
                                (Type::List(_) | Type::Items(_), Value::Array(list)) => {
                                    list.is_empty()
                                }
                                _ => false,
                            };
                            (!empty || field.keep_empty).then_some(decoded)
                        }
                        None => {
                            self.unknown.push(child.path().to_string());
                            None
                        }
                    };
                    out.put(index, name, kept);
                }
                Ok(out.finish(value))
            }
            (Type::Map(item_ty), Value::Object(entries)) => {
                let mut out = Changed::new(entries);
                for (index, (key, item)) in entries.iter().enumerate() {
                    let decoded = if item.is_null() {
                        Cow::Owned(item_ty.zero())
                    } else {
                        self.walk(item, *item_ty, &At::Key(path, key))?
                    };
                    out.put(index, key, Some(decoded));
                }
                Ok(out.finish(value))
            }
            (Type::List(item_ty) | Type::Items(item_ty), Value::Array(items)) => {
                // Items as they are until one changes; then a new list from there on.
                let mut out: Option<Vec<Value>> = None;
                for (i, item) in items.iter().enumerate() {
                    let decoded = if item.is_null() {
                        Cow::Owned(item_ty.zero())
                    } else {
                        self.walk(item, *item_ty, &At::Index(path, i))?
                    };
                    match (decoded, &mut out) {
                        (Cow::Borrowed(_), None) => {}
                        (decoded, out) => out
                            .get_or_insert_with(|| {
                                let mut list = Vec::with_capacity(items.len());
                                list.extend(items[..i].iter().cloned());
                                list
                            })
                            .push(decoded.into_owned()),
                    }
                }
                Ok(out.map_or(same, |list| Cow::Owned(Value::Array(list))))
            }
            _ => Err(self.wrong(path, value, ty)),
        }
    }
}

/// An object being decoded entry by entry: nothing is copied until an entry changes or is
/// dropped; from then on the entries go into a new object.
struct Changed<'v> {
    given: &'v Map<String, Value>,
    out: Option<Map<String, Value>>,
}

impl<'v> Changed<'v> {
    fn new(given: &'v Map<String, Value>) -> Self {
        Self { given, out: None }
    }

    /// Entry `index` of the given object, `key`, decoded as `kept` (`None`: dropped).
    fn put(&mut self, index: usize, key: &str, kept: Option<Cow<'v, Value>>) {
        if self.out.is_none() && matches!(kept, Some(Cow::Borrowed(_))) {
            return;
        }
        let given = self.given;
        let out = self.out.get_or_insert_with(|| {
            given
                .iter()
                .take(index)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        });
        if let Some(kept) = kept {
            out.insert(key.to_owned(), kept.into_owned());
        }
    }

    fn finish(self, value: &'v Value) -> Cow<'v, Value> {
        match self.out {
            None => Cow::Borrowed(value),
            Some(out) => Cow::Owned(Value::Object(out)),
        }
    }
}

/// Go's wording for bad base64: the offset of the first bad byte.
fn base64_message(error: &base64::DecodeError) -> String {
    let at = match error {
        base64::DecodeError::InvalidByte(at, _) | base64::DecodeError::InvalidLastSymbol(at, _) => {
            *at
        }
        base64::DecodeError::InvalidLength(len) => *len,
        base64::DecodeError::InvalidPadding => 0,
    };
    format!("illegal base64 data at input byte {at}")
}

/// Decodes `object` as a `schema`: checks every known field's type and normalizes the object
/// (see the module docs).
pub fn decode(object: &Value, schema: &'static Struct) -> Result<Decoded, DecodeError> {
    let mut walker = Walker {
        root: schema.name,
        unknown: Vec::new(),
    };
    let decoded = walker.walk(object, Type::Struct(schema), &At::Root)?;
    Ok(Decoded {
        object: decoded.into_owned(),
        unknown_fields: walker.unknown,
    })
}

/// Decodes `object` as a `schema` like [`decode`], borrowing it when it is already in the
/// decoded form (an object a write decoded before), so that nothing is copied.
pub fn decode_borrowed<'v>(
    object: &'v Value,
    schema: &'static Struct,
) -> Result<Cow<'v, Value>, DecodeError> {
    let mut walker = Walker {
        root: schema.name,
        unknown: Vec::new(),
    };
    walker.walk(object, Type::Struct(schema), &At::Root)
}

/// Reads an already decoded value into a typed struct (the kinds' validation reads its fields
/// this way); `root` names it in the error.
pub fn typed<T: DeserializeOwned>(decoded: &Value, root: &str) -> Result<T, DecodeError> {
    // read from the value where it is: fields the type does not have are skipped, not copied
    T::deserialize(decoded).map_err(|e| DecodeError::BadValue {
        field: root.to_owned(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::schema::Field;
    use crate::meta::schemas::OBJECT_META;
    use serde_json::json;

    /// An item of a list (core/v1's `LocalObjectReference` is one such).
    static ITEM: Struct = Struct {
        name: "Item",
        fields: &[Field::new("name", 1, Type::String)],
    };

    static THING: Struct = Struct {
        name: "Thing",
        fields: &[
            Field::type_meta("kind"),
            Field::type_meta("apiVersion"),
            Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
            Field::new("data", 2, Type::Map(&Type::String)),
            Field::new("bytes", 3, Type::Map(&Type::Bytes)),
            Field::new("count", 4, Type::Int32),
            Field::new("flag", 5, Type::Bool),
            Field::new("when", 6, Type::Time),
            Field::new("at", 7, Type::MicroTime),
            Field::new("size", 8, Type::Quantity),
            Field::new("items", 9, Type::List(&Type::Struct(&ITEM))),
        ],
    };

    #[test]
    fn wrong_types_name_the_field() {
        let cases = [
            (
                json!({"data": {"k": 5}}),
                "json: cannot unmarshal number into field Thing.data[k] of type string",
            ),
            (
                json!({"data": "x"}),
                "json: cannot unmarshal string into field Thing.data of type map[string]string",
            ),
            (
                json!({"count": 1.5}),
                "json: cannot unmarshal number into field Thing.count of type int32",
            ),
            (
                json!({"count": 4_294_967_296u64}),
                "json: cannot unmarshal number into field Thing.count of type int32",
            ),
            (
                json!({"flag": "true"}),
                "json: cannot unmarshal string into field Thing.flag of type bool",
            ),
            (
                json!({"metadata": {"labels": {"a": true}}}),
                "json: cannot unmarshal bool into field Thing.metadata.labels[a] of type string",
            ),
            (
                json!({"items": [{"name": 1}]}),
                "json: cannot unmarshal number into field Thing.items[0].name of type string",
            ),
            (
                json!([1]),
                "json: cannot unmarshal array into field Thing of type Thing",
            ),
            (
                json!({"bytes": {"k": "not base64!"}}),
                "field Thing.bytes[k]: illegal base64 data at input byte 3",
            ),
            (
                json!({"when": "yesterday"}),
                "field Thing.when: cannot parse \"yesterday\" as an RFC 3339 time (2006-01-02T15:04:05Z07:00)",
            ),
            (
                json!({"size": "1x"}),
                "field Thing.size: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            ),
        ];
        for (input, want) in cases {
            let err = decode(&input, &THING).unwrap_err();
            assert_eq!(err.to_string(), want, "{input}");
        }
        let status = DecodeError::WrongType {
            field: "ConfigMap.data[k]".into(),
            found: "number",
            expected: "string".into(),
        }
        .to_api_error("ConfigMap", "v1");
        assert_eq!(status.code, 400);
        assert_eq!(status.reason, "BadRequest");
        assert_eq!(
            status.message,
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot unmarshal number into field ConfigMap.data[k] of type string"
        );
    }

    #[test]
    fn normalizes_like_a_go_round_trip() {
        let input = json!({
            "kind": "Thing", "metadata": {"name": "a", "labels": null, "creationTimestamp": "2026-11-22T04:40:00.5+01:00", "bogus": {}},
            "data": {"k": null, "v": "x"}, "flag": null, "count": 3,
            "at": "2026-11-22T03:40:00.123456+00:00", "size": 1.5, "bytes": {"k": "aGk=\n"},
            "items": [null, {"name": "s", "extra": 2}], "extra": 1, "spec": {"x": 1}
        });
        let decoded = decode(&input, &THING).unwrap();
        assert_eq!(
            decoded.object,
            json!({
                "kind": "Thing", "metadata": {"name": "a", "creationTimestamp": "2026-11-22T03:40:00Z"},
                "data": {"k": "", "v": "x"}, "count": 3,
                "at": "2026-11-22T03:40:00.123456Z", "size": "1500m", "bytes": {"k": "aGk="},
                "items": [{}, {"name": "s"}]
            })
        );
        let mut unknown = decoded.unknown_fields;
        unknown.sort();
        assert_eq!(
            unknown,
            ["extra", "items[1].extra", "metadata.bogus", "spec"]
        );
    }

    #[test]
    fn a_decoded_object_is_decoded_again_without_a_copy() {
        let input = json!({
            "kind": "Thing", "metadata": {"name": "a", "labels": null, "creationTimestamp": "2026-11-22T04:40:00.5+01:00"},
            "data": {"k": null, "v": "x"}, "count": 3, "size": 1.5, "bytes": {"k": "aGk=\n"},
            "items": [{"name": "s"}, null, {"name": "t", "extra": 2}], "extra": 1
        });
        let once = decode(&input, &THING).unwrap().object;
        // The first decode changed things: borrowed decoding gives the same new object.
        let changed = decode_borrowed(&input, &THING).unwrap();
        assert!(matches!(changed, Cow::Owned(_)));
        assert_eq!(*changed, once);
        // Decoding the result again changes nothing, and borrows it whole.
        let again = decode_borrowed(&once, &THING).unwrap();
        assert!(matches!(again, Cow::Borrowed(_)), "{again:?}");
        assert_eq!(decode(&once, &THING).unwrap().object, once);
        // A change deep inside copies the object around it, and keeps the rest as it was.
        let mut late = once.clone();
        late["items"][1]["name"] = Value::Null;
        late["metadata"]["annotations"] = json!({});
        let decoded = decode_borrowed(&late, &THING).unwrap();
        let mut expected = once.clone();
        expected["items"][1] = json!({});
        assert_eq!(*decoded, expected);
        // Errors are found in borrowed decoding as in the other.
        let mut wrong = once;
        wrong["data"]["v"] = json!(1);
        assert_eq!(
            decode_borrowed(&wrong, &THING).unwrap_err().to_string(),
            decode(&wrong, &THING).unwrap_err().to_string()
        );
    }
}
