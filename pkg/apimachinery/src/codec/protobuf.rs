//! Kubernetes protobuf (`application/vnd.kubernetes.protobuf`), transcoded to and from the JSON
//! objects genplane works with.
//!
//! There are no generated message types here: the [`Struct`] schemas ([`super::schema`]) carry
//! each field's protobuf number, and one walker reads and writes every served type with them.
//! The wire format is upstream's (gogo-protobuf, proto2):
//!
//! - a body is the 4 bytes `k8s\0` then a `runtime.Unknown` message: `typeMeta` (1, a message of
//!   `apiVersion` = 1 and `kind` = 2), `raw` (2, the object's own message), `contentEncoding` (3)
//!   and `contentType` (4);
//! - `metav1.Time` and `MicroTime` are messages of `seconds` (1) and `nanos` (2); a zero time is
//!   an empty message; `resource.Quantity` is a message of one string (1); `RawExtension` and
//!   `FieldsV1` ([`Type::Any`]) are a message of bytes (1) holding JSON; `[]byte` is bytes;
//! - `intstr.IntOrString` is a message of `type` (1: 0 for an integer, 1 for a string),
//!   `intVal` (2) and `strVal` (3); like a struct, it is in the JSON whenever it is on the wire;
//! - a `map<string, V>` is a repeated entry message of `key` (1) and `value` (2); lists are
//!   repeated fields, not packed (packed scalars are read too);
//! - a list kind is `ListMeta metadata = 1; repeated T items = 2`;
//! - a watch stream is a sequence of frames: a 4-byte big-endian length, then a `WatchEvent`
//!   message *without* the envelope, of `type` (1) and `object` (2, a `RawExtension` whose bytes
//!   are the object's whole envelope).
//!
//! Reading produces the JSON the JSON path would have produced: `apiVersion` and `kind` from
//! `typeMeta`, and no field JSON would leave out (an empty string, map or list, a zero number or
//! `false` of a plain Go field, a zero time). A Go pointer field ([`Field::pointer`]) keeps a
//! zero value, as `immutable: false`. Unknown field numbers are skipped, as gogo skips them.
//! Malformed input — a missing prefix, a truncated varint or length, a known field with the
//! wrong wire type, invalid UTF-8, messages nested too deep — is a [`ProtobufError`], which
//! the API answers with 400 BadRequest.

use base64::Engine as _;
use serde_json::{Map, Value};

use crate::codec::schema::{Field, Struct, Type};
use crate::errors::{ApiError, Status};
use crate::meta::rfc3339;
use crate::meta::schemas::{LIST_META, STATUS};
use crate::quantity::Quantity;
use crate::time::{micro_time, parse_micro_time, parse_time};

/// The prefix of every protobuf body.
pub const MAGIC: &[u8; 4] = b"k8s\0";
/// The media type.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// The media type of a watch stream.
pub const WATCH_CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";
/// How deeply messages may nest (the served schemas need 5).
pub const MAX_DEPTH: usize = 32;

/// The earliest and latest seconds a `metav1.Time` can hold (years 0001 to 9999).
const MIN_SECONDS: i64 = -62_135_596_800;
const MAX_SECONDS: i64 = 253_402_300_799;

/// Why protobuf input does not decode, or a JSON object does not encode.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProtobufError {
    /// The body does not start with `k8s\0`.
    #[error(
        "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"
    )]
    Prefix,
    /// A varint runs past the end of its message, or past ten bytes.
    #[error("proto: {message}: truncated or overlong varint at byte {at}")]
    Varint {
        /// The message being read, e.g. `ConfigMap.metadata`.
        message: String,
        /// Where the varint starts, from the start of that message.
        at: usize,
    },
    /// A length-delimited or fixed-width value runs past the end of its message.
    #[error("proto: {field}: {length} bytes announced but only {left} left")]
    Length {
        /// The field (or message, for an unknown field).
        field: String,
        /// The announced length.
        length: u64,
        /// What was left.
        left: usize,
    },
    /// Field number 0, or a wire type protobuf does not have (or an unexpected group end).
    #[error("proto: {message}: illegal tag {tag} (field number {number}, wire type {wire_type})")]
    Tag {
        /// The message being read.
        message: String,
        /// The tag read.
        tag: u64,
        /// Its field number.
        number: u64,
        /// Its wire type.
        wire_type: u8,
    },
    /// A known field with the wrong wire type.
    #[error("proto: wrong wire type {found} for field {field} of type {ty} (expected {expected})")]
    WireType {
        /// The field, e.g. `ConfigMap.data`.
        field: String,
        /// The wire type found.
        found: u8,
        /// The wire type the field has.
        expected: u8,
        /// The field's type, e.g. `map[string]string`.
        ty: String,
    },
    /// A string that is not UTF-8.
    #[error("proto: field {field}: invalid UTF-8 in a string")]
    Utf8 {
        /// The field, e.g. `ConfigMap.data[k]`.
        field: String,
    },
    /// Messages nested deeper than [`MAX_DEPTH`].
    #[error("proto: field {field}: messages nested deeper than {MAX_DEPTH}")]
    TooDeep {
        /// Where the limit was reached.
        field: String,
    },
    /// A well-formed value that does not make sense: a time out of range, a bad quantity, bad
    /// JSON in a raw extension.
    #[error("proto: field {field}: {message}")]
    BadValue {
        /// The field.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// A JSON value that does not have the shape of its field (encoding only).
    #[error("cannot encode {field} as protobuf: expected {expected}, found {found}")]
    Encode {
        /// The field.
        field: String,
        /// The field's type.
        expected: String,
        /// The JSON found.
        found: String,
    },
}

impl ProtobufError {
    /// The 400 answer for a body of `kind` whose message does not decode, in the words the JSON
    /// path uses: `ConfigMap in version "v1" cannot be handled as a ConfigMap: <why>`.
    pub fn to_api_error(&self, kind: &str, version: &str) -> ApiError {
        Status::bad_request(format!(
            "{kind} in version {} cannot be handled as a {kind}: {self}",
            crate::gofmt::Quoted(version)
        ))
        .into()
    }

    /// The 400 answer for a body whose envelope does not decode, as upstream words it:
    /// `the object provided is unrecognized (must be of type ConfigMap): <why>`.
    pub fn to_unrecognized_error(&self, kind: &str) -> ApiError {
        Status::bad_request(format!(
            "the object provided is unrecognized (must be of type {kind}): {self}"
        ))
        .into()
    }
}

/// The `runtime.Unknown` envelope of a body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Envelope<'a> {
    /// `typeMeta.apiVersion` (may be empty).
    pub api_version: String,
    /// `typeMeta.kind` (may be empty).
    pub kind: String,
    /// The object's own message.
    pub raw: &'a [u8],
}

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const START_GROUP: u8 = 3;
const END_GROUP: u8 = 4;
const FIXED32: u8 = 5;

/// One value read from the wire.
#[derive(Clone, Copy, Debug)]
enum Raw<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    fn done(&self) -> bool {
        self.pos >= self.buf.len()
    }

    fn varint(&mut self, message: &str) -> Result<u64, ProtobufError> {
        let start = self.pos;
        let mut value = 0u64;
        for i in 0..10 {
            let Some(&byte) = self.buf.get(self.pos) else {
                break;
            };
            self.pos += 1;
            // The tenth byte may only carry the 64th bit.
            if i == 9 && byte > 1 {
                break;
            }
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte < 0x80 {
                return Ok(value);
            }
        }
        Err(ProtobufError::Varint {
            message: message.to_owned(),
            at: start,
        })
    }

    fn take(&mut self, length: u64, field: &str) -> Result<&'a [u8], ProtobufError> {
        let left = self.buf.len() - self.pos;
        match usize::try_from(length) {
            Ok(n) if n <= left => {
                let bytes = &self.buf[self.pos..self.pos + n];
                self.pos += n;
                Ok(bytes)
            }
            _ => Err(ProtobufError::Length {
                field: field.to_owned(),
                length,
                left,
            }),
        }
    }

    /// Reads a tag: (field number, wire type).
    fn tag(&mut self, message: &str) -> Result<(u64, u8), ProtobufError> {
        let tag = self.varint(message)?;
        let number = tag >> 3;
        let wire_type = (tag & 7) as u8;
        if number == 0 || number > u64::from(u32::MAX >> 3) || wire_type > FIXED32 {
            return Err(ProtobufError::Tag {
                message: message.to_owned(),
                tag,
                number,
                wire_type,
            });
        }
        Ok((number, wire_type))
    }

    /// Reads the value after a tag of `wire_type` (groups are skipped, giving `None`).
    fn value(
        &mut self,
        number: u64,
        wire_type: u8,
        message: &str,
        depth: usize,
    ) -> Result<Option<Raw<'a>>, ProtobufError> {
        match wire_type {
            VARINT => self.varint(message).map(|v| Some(Raw::Varint(v))),
            LEN => {
                let length = self.varint(message)?;
                self.take(length, message).map(|b| Some(Raw::Bytes(b)))
            }
            FIXED64 => self.take(8, message).map(|b| Some(Raw::Bytes(b))),
            FIXED32 => self.take(4, message).map(|b| Some(Raw::Bytes(b))),
            START_GROUP => {
                if depth >= MAX_DEPTH {
                    return Err(ProtobufError::TooDeep {
                        field: message.to_owned(),
                    });
                }
                loop {
                    if self.done() {
                        return Err(ProtobufError::Length {
                            field: message.to_owned(),
                            length: 1,
                            left: 0,
                        });
                    }
                    let (inner, inner_wire) = self.tag(message)?;
                    if inner_wire == END_GROUP {
                        if inner == number {
                            return Ok(None);
                        }
                        return Err(bad_group_end(message, inner));
                    }
                    self.value(inner, inner_wire, message, depth + 1)?;
                }
            }
            _ => Err(bad_group_end(message, number)),
        }
    }
}

fn bad_group_end(message: &str, number: u64) -> ProtobufError {
    ProtobufError::Tag {
        message: message.to_owned(),
        tag: (number << 3) | u64::from(END_GROUP),
        number,
        wire_type: END_GROUP,
    }
}

/// The wire type of one value of `ty`.
fn wire_type(ty: Type) -> u8 {
    match ty {
        Type::Bool | Type::Int32 | Type::Int64 => VARINT,
        _ => LEN,
    }
}

fn is_varint(ty: Type) -> bool {
    wire_type(ty) == VARINT
}

/// Reads the envelope of a body: the `k8s\0` prefix and a `runtime.Unknown`.
pub fn read_envelope(body: &[u8]) -> Result<Envelope<'_>, ProtobufError> {
    let message = body.strip_prefix(MAGIC).ok_or(ProtobufError::Prefix)?;
    let mut reader = Reader::new(message);
    let mut envelope = Envelope {
        api_version: String::new(),
        kind: String::new(),
        raw: &[],
    };
    while !reader.done() {
        let (number, wire) = reader.tag("Unknown")?;
        let value = reader.value(number, wire, "Unknown", 0)?;
        let field = match number {
            1 => "Unknown.typeMeta",
            2 => "Unknown.raw",
            3 => "Unknown.contentEncoding",
            4 => "Unknown.contentType",
            _ => continue,
        };
        let Some(Raw::Bytes(bytes)) = value.filter(|_| wire == LEN) else {
            return Err(ProtobufError::WireType {
                field: field.to_owned(),
                found: wire,
                expected: LEN,
                ty: if number == 1 { "TypeMeta" } else { "string" }.to_owned(),
            });
        };
        match number {
            1 => {
                let mut meta = Reader::new(bytes);
                while !meta.done() {
                    let (n, w) = meta.tag("TypeMeta")?;
                    let value = meta.value(n, w, "TypeMeta", 1)?;
                    let (name, slot) = match n {
                        1 => ("TypeMeta.apiVersion", &mut envelope.api_version),
                        2 => ("TypeMeta.kind", &mut envelope.kind),
                        _ => continue,
                    };
                    let Some(Raw::Bytes(text)) = value.filter(|_| w == LEN) else {
                        return Err(ProtobufError::WireType {
                            field: name.to_owned(),
                            found: w,
                            expected: LEN,
                            ty: "string".to_owned(),
                        });
                    };
                    *slot = utf8(text, name)?.to_owned();
                }
            }
            2 => envelope.raw = bytes,
            // The content encoding and type are empty from every client; as upstream, they
            // are not looked at.
            _ => {}
        }
    }
    Ok(envelope)
}

fn utf8<'a>(bytes: &'a [u8], field: &str) -> Result<&'a str, ProtobufError> {
    std::str::from_utf8(bytes).map_err(|_| ProtobufError::Utf8 {
        field: field.to_owned(),
    })
}

/// Decodes `envelope.raw` as a `schema` message into the JSON object the JSON path would have
/// produced, with `apiVersion` and `kind` from the envelope when they are set.
pub fn decode_object(
    envelope: &Envelope<'_>,
    schema: &'static Struct,
) -> Result<Value, ProtobufError> {
    let mut object = Map::new();
    if !envelope.api_version.is_empty() {
        object.insert(
            "apiVersion".into(),
            Value::from(envelope.api_version.as_str()),
        );
    }
    if !envelope.kind.is_empty() {
        object.insert("kind".into(), Value::from(envelope.kind.as_str()));
    }
    object.extend(read_message(envelope.raw, schema, schema.name, 0)?);
    Ok(Value::Object(object))
}

/// Reads a whole body (envelope and message) as a `schema` object.
pub fn decode(body: &[u8], schema: &'static Struct) -> Result<Value, ProtobufError> {
    decode_object(&read_envelope(body)?, schema)
}

/// Reads a whole body as a list of `item` objects: `{"apiVersion", "kind", "metadata",
/// "items"}` (`items` is always there, as the JSON path writes it). Items carry no `apiVersion`
/// and `kind`: protobuf has none for them.
pub fn decode_list(body: &[u8], item: &'static Struct) -> Result<Value, ProtobufError> {
    let envelope = read_envelope(body)?;
    let mut object = Map::new();
    if !envelope.api_version.is_empty() {
        object.insert(
            "apiVersion".into(),
            Value::from(envelope.api_version.as_str()),
        );
    }
    if !envelope.kind.is_empty() {
        object.insert("kind".into(), Value::from(envelope.kind.as_str()));
    }
    let path = "List";
    let mut reader = Reader::new(envelope.raw);
    let mut metadata = Vec::new();
    let mut items = Vec::new();
    while !reader.done() {
        let (number, wire) = reader.tag(path)?;
        let value = reader.value(number, wire, path, 0)?;
        let (field, ty) = match number {
            1 => ("List.metadata", "ListMeta"),
            2 => ("List.items", item.name),
            _ => continue,
        };
        let Some(Raw::Bytes(bytes)) = value.filter(|_| wire == LEN) else {
            return Err(ProtobufError::WireType {
                field: field.to_owned(),
                found: wire,
                expected: LEN,
                ty: ty.to_owned(),
            });
        };
        if number == 1 {
            metadata.extend_from_slice(bytes);
        } else {
            let at = format!("List.items[{}]", items.len());
            items.push(Value::Object(read_message(bytes, item, &at, 1)?));
        }
    }
    object.insert(
        "metadata".into(),
        Value::Object(read_message(&metadata, &LIST_META, "List.metadata", 1)?),
    );
    object.insert("items".into(), Value::Array(items));
    Ok(Value::Object(object))
}

/// Reads one message of `schema`.
fn read_message(
    data: &[u8],
    schema: &'static Struct,
    path: &str,
    depth: usize,
) -> Result<Map<String, Value>, ProtobufError> {
    if depth > MAX_DEPTH {
        return Err(ProtobufError::TooDeep {
            field: path.to_owned(),
        });
    }
    let mut slots: Vec<Vec<Raw<'_>>> = vec![Vec::new(); schema.fields.len()];
    let mut reader = Reader::new(data);
    while !reader.done() {
        let (number, wire) = reader.tag(path)?;
        let index = schema
            .fields
            .iter()
            .position(|f| f.number != 0 && u64::from(f.number) == number);
        let Some(index) = index else {
            reader.value(number, wire, path, depth)?;
            continue;
        };
        let field = &schema.fields[index];
        let expected = match field.ty {
            Type::List(item) => wire_type(*item),
            other => wire_type(other),
        };
        let packed = matches!(field.ty, Type::List(item) if is_varint(*item)) && wire == LEN;
        if wire != expected && !packed {
            return Err(ProtobufError::WireType {
                field: format!("{path}.{}", field.name),
                found: wire,
                expected,
                ty: field.ty.name(),
            });
        }
        let field_path = format!("{path}.{}", field.name);
        if let Some(raw) = reader.value(number, wire, &field_path, depth)? {
            slots[index].push(raw);
        }
    }
    let mut out = Map::new();
    for (field, raws) in schema.fields.iter().zip(slots) {
        if raws.is_empty() {
            continue;
        }
        let field_path = format!("{path}.{}", field.name);
        match field_value(field, &raws, &field_path, depth)? {
            // An embedded struct's fields are the parent's in JSON.
            Some(Value::Object(inner)) if field.inline => out.extend(inner),
            Some(value) => {
                out.insert(field.name.to_owned(), value);
            }
            None => {}
        }
    }
    Ok(out)
}

/// The JSON of a field from its occurrences on the wire, or `None` when JSON leaves it out.
fn field_value(
    field: &Field,
    raws: &[Raw<'_>],
    path: &str,
    depth: usize,
) -> Result<Option<Value>, ProtobufError> {
    match field.ty {
        Type::List(item) => {
            let mut items = Vec::new();
            for raw in raws {
                match raw {
                    Raw::Bytes(packed) if is_varint(*item) => {
                        let mut reader = Reader::new(packed);
                        while !reader.done() {
                            let v = reader.varint(path)?;
                            let at = format!("{path}[{}]", items.len());
                            items.push(one_value(*item, Raw::Varint(v), &at, depth)?);
                        }
                    }
                    _ => {
                        let at = format!("{path}[{}]", items.len());
                        items.push(one_value(*item, *raw, &at, depth)?);
                    }
                }
            }
            Ok((!items.is_empty()).then_some(Value::Array(items)))
        }
        Type::Map(item) => {
            let mut map = Map::new();
            for raw in raws {
                let Raw::Bytes(entry) = raw else {
                    continue;
                };
                let (key, value) = map_entry(entry, *item, path, depth + 1)?;
                map.insert(key, value);
            }
            Ok((!map.is_empty()).then_some(Value::Object(map)))
        }
        Type::IntOrString => {
            // A Go struct value: never left out, whatever it holds.
            one_value(field.ty, raws[raws.len() - 1], path, depth).map(Some)
        }
        Type::Struct(_) => {
            // Occurrences of a message field merge, which is reading their concatenation.
            let joined: Vec<u8> = raws
                .iter()
                .flat_map(|raw| match raw {
                    Raw::Bytes(b) => b.iter().copied(),
                    Raw::Varint(_) => [].iter().copied(),
                })
                .collect();
            one_value(field.ty, Raw::Bytes(&joined), path, depth).map(Some)
        }
        ty => {
            let last = raws[raws.len() - 1];
            let value = one_value(ty, last, path, depth)?;
            let zero = match &value {
                Value::Null => return Ok(None),
                Value::String(s) => s.is_empty(),
                Value::Bool(b) => !b,
                Value::Number(n) => n.as_i64() == Some(0),
                _ => false,
            };
            Ok(Some(value).filter(|_| field.pointer || !zero))
        }
    }
}

/// Reads a map entry: `key` (1) and `value` (2, the zero value when missing).
fn map_entry(
    entry: &[u8],
    item: Type,
    path: &str,
    depth: usize,
) -> Result<(String, Value), ProtobufError> {
    if depth > MAX_DEPTH {
        return Err(ProtobufError::TooDeep {
            field: path.to_owned(),
        });
    }
    let mut reader = Reader::new(entry);
    let mut key = String::new();
    let mut value = None;
    while !reader.done() {
        let (number, wire) = reader.tag(path)?;
        let (expected, ty) = match number {
            1 => (LEN, "string".to_owned()),
            2 => (wire_type(item), item.name()),
            _ => {
                reader.value(number, wire, path, depth)?;
                continue;
            }
        };
        if wire != expected {
            let part = if number == 1 { "key" } else { "value" };
            return Err(ProtobufError::WireType {
                field: format!("{path} (map {part})"),
                found: wire,
                expected,
                ty,
            });
        }
        let raw = reader.value(number, wire, path, depth)?;
        match (number, raw) {
            (1, Some(Raw::Bytes(bytes))) => {
                key = utf8(bytes, &format!("{path} (map key)"))?.to_owned()
            }
            (_, Some(raw)) => value = Some(raw),
            _ => {}
        }
    }
    let at = format!("{path}[{key}]");
    let value = match value {
        Some(raw) => one_value(item, raw, &at, depth)?,
        None => item.zero(),
    };
    Ok((key, value))
}

/// One value of `ty` (a list item, a map value or a singular field). `Null` means a zero time
/// or an empty raw extension, which JSON leaves out.
fn one_value(ty: Type, raw: Raw<'_>, path: &str, depth: usize) -> Result<Value, ProtobufError> {
    let bytes = |raw: Raw<'_>| match raw {
        Raw::Bytes(b) => b.to_vec(),
        Raw::Varint(_) => Vec::new(),
    };
    let number = match raw {
        Raw::Varint(v) => v,
        Raw::Bytes(_) => 0,
    };
    match ty {
        Type::String => {
            let b = bytes(raw);
            Ok(Value::from(utf8(&b, path)?))
        }
        Type::Bool => Ok(Value::Bool(number != 0)),
        // As Go does, an int32 keeps the low 32 bits of the varint.
        Type::Int32 => Ok(Value::from(number as u32 as i32)),
        Type::Int64 => Ok(Value::from(number as i64)),
        Type::Bytes => Ok(Value::from(
            base64::engine::general_purpose::STANDARD.encode(bytes(raw)),
        )),
        Type::Time | Type::MicroTime => {
            let b = bytes(raw);
            let (seconds, nanos) = timestamp(&b, path)?;
            if seconds == 0 && nanos == 0 {
                return Ok(Value::Null);
            }
            Ok(Value::from(if matches!(ty, Type::Time) {
                rfc3339(seconds)
            } else {
                micro_time(seconds, nanos)
            }))
        }
        Type::Quantity => {
            let b = bytes(raw);
            let text = single_field(&b, path)?;
            let text = utf8(&text, path)?;
            Quantity::parse(text.trim())
                .map(|q| Value::from(q.to_string()))
                .map_err(|e| ProtobufError::BadValue {
                    field: path.to_owned(),
                    message: e.to_string(),
                })
        }
        Type::IntOrString => {
            let b = bytes(raw);
            int_or_string(&b, path)
        }
        Type::Any => {
            let b = bytes(raw);
            let json = single_field(&b, path)?;
            if json.is_empty() {
                return Ok(Value::Null);
            }
            serde_json::from_slice(&json).map_err(|e| ProtobufError::BadValue {
                field: path.to_owned(),
                message: format!("the raw JSON does not parse: {e}"),
            })
        }
        Type::Struct(schema) => {
            let b = bytes(raw);
            read_message(&b, schema, path, depth + 1).map(Value::Object)
        }
        Type::Items(item) => {
            let b = bytes(raw);
            let mut reader = Reader::new(&b);
            let mut items = Vec::new();
            while !reader.done() {
                let (number, wire) = reader.tag(path)?;
                let value = reader.value(number, wire, path, depth)?;
                let (1, Some(raw)) = (number, value) else {
                    continue;
                };
                if wire != wire_type(*item) {
                    return Err(ProtobufError::WireType {
                        field: format!("{path}.items"),
                        found: wire,
                        expected: wire_type(*item),
                        ty: item.name(),
                    });
                }
                let at = format!("{path}.items[{}]", items.len());
                items.push(one_value(*item, raw, &at, depth + 1)?);
            }
            Ok(Value::Array(items))
        }
        Type::Map(_) | Type::List(_) => Err(ProtobufError::BadValue {
            field: path.to_owned(),
            message: format!("{} has no protobuf form", ty.name()),
        }),
    }
}

/// Reads a `Timestamp`-shaped message (`seconds` = 1, `nanos` = 2).
fn timestamp(data: &[u8], path: &str) -> Result<(i64, u32), ProtobufError> {
    let mut reader = Reader::new(data);
    let (mut seconds, mut nanos) = (0i64, 0i64);
    while !reader.done() {
        let (number, wire) = reader.tag(path)?;
        if (number == 1 || number == 2) && wire != VARINT {
            return Err(ProtobufError::WireType {
                field: format!("{path}.{}", if number == 1 { "seconds" } else { "nanos" }),
                found: wire,
                expected: VARINT,
                ty: if number == 1 { "int64" } else { "int32" }.to_owned(),
            });
        }
        match (number, reader.value(number, wire, path, 1)?) {
            (1, Some(Raw::Varint(v))) => seconds = v as i64,
            (2, Some(Raw::Varint(v))) => nanos = i64::from(v as u32 as i32),
            _ => {}
        }
    }
    if !(0..1_000_000_000).contains(&nanos) {
        return Err(ProtobufError::BadValue {
            field: path.to_owned(),
            message: format!("nanos {nanos} out of range [0, 999999999]"),
        });
    }
    if !(MIN_SECONDS..=MAX_SECONDS).contains(&seconds) {
        return Err(ProtobufError::BadValue {
            field: path.to_owned(),
            message: format!("seconds {seconds} out of range (years 0001 to 9999)"),
        });
    }
    Ok((seconds, nanos as u32))
}

/// Reads the bytes of field 1 of a one-field message (`Quantity`, `RawExtension`, `FieldsV1`).
fn single_field(data: &[u8], path: &str) -> Result<Vec<u8>, ProtobufError> {
    let mut reader = Reader::new(data);
    let mut out = Vec::new();
    while !reader.done() {
        let (number, wire) = reader.tag(path)?;
        if number == 1 && wire != LEN {
            return Err(ProtobufError::WireType {
                field: format!("{path}.1"),
                found: wire,
                expected: LEN,
                ty: "bytes".to_owned(),
            });
        }
        if let (1, Some(Raw::Bytes(b))) = (number, reader.value(number, wire, path, 1)?) {
            out = b.to_vec();
        }
    }
    Ok(out)
}

/// Reads an `IntOrString` message: the string when `type` (1) is 1, else the integer.
fn int_or_string(data: &[u8], path: &str) -> Result<Value, ProtobufError> {
    let mut reader = Reader::new(data);
    let (mut kind, mut int, mut text) = (0u64, 0i32, String::new());
    while !reader.done() {
        let (number, wire) = reader.tag(path)?;
        let (expected, ty) = match number {
            1 => (VARINT, "int64"),
            2 => (VARINT, "int32"),
            3 => (LEN, "string"),
            _ => {
                reader.value(number, wire, path, 1)?;
                continue;
            }
        };
        if wire != expected {
            return Err(ProtobufError::WireType {
                field: format!(
                    "{path}.{}",
                    ["type", "intVal", "strVal"][number as usize - 1]
                ),
                found: wire,
                expected,
                ty: ty.to_owned(),
            });
        }
        match reader.value(number, wire, path, 1)? {
            Some(Raw::Varint(v)) if number == 1 => kind = v,
            // As Go does, an int32 keeps the low 32 bits of the varint.
            Some(Raw::Varint(v)) => int = v as u32 as i32,
            Some(Raw::Bytes(b)) => text = utf8(b, path)?.to_owned(),
            None => {}
        }
    }
    Ok(if kind == 1 {
        Value::from(text)
    } else {
        Value::from(int)
    })
}

// ---- writing ----

fn put_varint(buf: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        buf.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    buf.push(value as u8);
}

fn put_tag(buf: &mut Vec<u8>, number: u32, wire_type: u8) {
    put_varint(buf, (u64::from(number) << 3) | u64::from(wire_type));
}

fn put_bytes(buf: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    put_tag(buf, number, LEN);
    put_varint(buf, bytes.len() as u64);
    buf.extend_from_slice(bytes);
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

fn mismatch(path: &str, ty: Type, value: &Value) -> ProtobufError {
    ProtobufError::Encode {
        field: path.to_owned(),
        expected: ty.name(),
        found: json_type(value).to_owned(),
    }
}

/// Writes `object` as a `schema` message (fields in number order; `null`s and fields the
/// schema does not have are left out).
fn write_message(
    buf: &mut Vec<u8>,
    object: &Value,
    schema: &'static Struct,
    path: &str,
) -> Result<(), ProtobufError> {
    let Value::Object(map) = object else {
        return Err(mismatch(path, Type::Struct(schema), object));
    };
    let mut fields: Vec<&Field> = schema.fields.iter().filter(|f| f.number != 0).collect();
    fields.sort_by_key(|f| f.number);
    for field in fields {
        if let (true, Type::Struct(inner)) = (field.inline, field.ty) {
            // An embedded struct: its fields, taken from the parent's JSON, as a message.
            let own: Map<String, Value> = map
                .iter()
                .filter(|(name, _)| inner.field(name).is_some())
                .map(|(name, value)| (name.clone(), value.clone()))
                .collect();
            write_value(buf, field.number, field.ty, &Value::Object(own), path)?;
            continue;
        }
        let Some(value) = map.get(field.name).filter(|v| !v.is_null()) else {
            continue;
        };
        let field_path = format!("{path}.{}", field.name);
        match field.ty {
            Type::List(item) => {
                let items = value
                    .as_array()
                    .ok_or_else(|| mismatch(&field_path, field.ty, value))?;
                for (i, v) in items.iter().enumerate() {
                    write_value(buf, field.number, *item, v, &format!("{field_path}[{i}]"))?;
                }
            }
            Type::Map(item) => {
                let entries = value
                    .as_object()
                    .ok_or_else(|| mismatch(&field_path, field.ty, value))?;
                let mut keys: Vec<&String> = entries.keys().collect();
                keys.sort();
                for key in keys {
                    let mut entry = Vec::new();
                    put_bytes(&mut entry, 1, key.as_bytes());
                    let v = &entries[key.as_str()];
                    if !v.is_null() {
                        write_value(&mut entry, 2, *item, v, &format!("{field_path}[{key}]"))?;
                    }
                    put_bytes(buf, field.number, &entry);
                }
            }
            ty => write_value(buf, field.number, ty, value, &field_path)?,
        }
    }
    Ok(())
}

/// Writes one value of `ty` as field `number`.
fn write_value(
    buf: &mut Vec<u8>,
    number: u32,
    ty: Type,
    value: &Value,
    path: &str,
) -> Result<(), ProtobufError> {
    let bad = |message: String| ProtobufError::BadValue {
        field: path.to_owned(),
        message,
    };
    match (ty, value) {
        (Type::String, Value::String(s)) => put_bytes(buf, number, s.as_bytes()),
        (Type::Bool, Value::Bool(b)) => {
            put_tag(buf, number, VARINT);
            put_varint(buf, u64::from(*b));
        }
        (Type::Int32 | Type::Int64, Value::Number(n)) => {
            let i = n.as_i64().ok_or_else(|| mismatch(path, ty, value))?;
            if matches!(ty, Type::Int32) && i32::try_from(i).is_err() {
                return Err(mismatch(path, ty, value));
            }
            put_tag(buf, number, VARINT);
            // Negative numbers are ten-byte two's complement varints, as in Go.
            put_varint(buf, i as u64);
        }
        (Type::Items(item), Value::Array(items)) => {
            let mut message = Vec::new();
            for (i, v) in items.iter().enumerate() {
                write_value(&mut message, 1, *item, v, &format!("{path}.items[{i}]"))?;
            }
            put_bytes(buf, number, &message);
        }
        (Type::Bytes, Value::String(s)) => {
            let compact: String = s.chars().filter(|c| !matches!(c, '\r' | '\n')).collect();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(compact)
                .map_err(|e| bad(format!("not base64: {e}")))?;
            put_bytes(buf, number, &bytes);
        }
        (Type::Time | Type::MicroTime, Value::String(s)) => {
            let parsed = if matches!(ty, Type::Time) {
                parse_time(s)
            } else {
                parse_micro_time(s)
            };
            let t = parsed.ok_or_else(|| {
                bad(format!(
                    "cannot parse {} as a time",
                    crate::gofmt::Quoted(s)
                ))
            })?;
            let mut message = Vec::new();
            if t.seconds != 0 {
                put_tag(&mut message, 1, VARINT);
                put_varint(&mut message, t.seconds as u64);
            }
            if t.nanos != 0 {
                put_tag(&mut message, 2, VARINT);
                put_varint(&mut message, u64::from(t.nanos));
            }
            put_bytes(buf, number, &message);
        }
        (Type::Quantity, Value::String(_) | Value::Number(_)) => {
            let text = match value {
                Value::String(s) => s.trim().to_owned(),
                other => other.to_string(),
            };
            let q = Quantity::parse(&text).map_err(|e| bad(e.to_string()))?;
            let mut message = Vec::new();
            put_bytes(&mut message, 1, q.to_string().as_bytes());
            put_bytes(buf, number, &message);
        }
        (Type::IntOrString, Value::Number(_) | Value::String(_)) => {
            // All three fields, as gogo writes a struct value.
            let mut message = Vec::new();
            let (kind, int, text) = match value {
                Value::String(s) => (1, 0, s.as_str()),
                _ => {
                    let i = value.as_i64().and_then(|i| i32::try_from(i).ok());
                    (0, i.ok_or_else(|| mismatch(path, ty, value))?, "")
                }
            };
            put_tag(&mut message, 1, VARINT);
            put_varint(&mut message, kind);
            put_tag(&mut message, 2, VARINT);
            put_varint(&mut message, i64::from(int) as u64);
            put_bytes(&mut message, 3, text.as_bytes());
            put_bytes(buf, number, &message);
        }
        (Type::Any, v) => {
            let json = serde_json::to_vec(v).map_err(|e| bad(e.to_string()))?;
            let mut message = Vec::new();
            put_bytes(&mut message, 1, &json);
            put_bytes(buf, number, &message);
        }
        (Type::Struct(schema), Value::Object(_)) => {
            let mut message = Vec::new();
            write_message(&mut message, value, schema, path)?;
            put_bytes(buf, number, &message);
        }
        _ => return Err(mismatch(path, ty, value)),
    }
    Ok(())
}

/// The envelope of `raw`: `k8s\0` and a `runtime.Unknown`.
pub fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut type_meta = Vec::new();
    put_bytes(&mut type_meta, 1, api_version.as_bytes());
    put_bytes(&mut type_meta, 2, kind.as_bytes());
    let mut out = MAGIC.to_vec();
    put_bytes(&mut out, 1, &type_meta);
    put_bytes(&mut out, 2, raw);
    put_bytes(&mut out, 3, b"");
    put_bytes(&mut out, 4, b"");
    out
}

fn type_meta(object: &Value) -> (&str, &str) {
    let text = |name: &str| object.get(name).and_then(Value::as_str).unwrap_or("");
    (text("apiVersion"), text("kind"))
}

/// Encodes a `schema` object as a whole body (envelope from its `apiVersion` and `kind`).
pub fn encode(object: &Value, schema: &'static Struct) -> Result<Vec<u8>, ProtobufError> {
    let mut raw = Vec::new();
    write_message(&mut raw, object, schema, schema.name)?;
    let (api_version, kind) = type_meta(object);
    Ok(envelope(api_version, kind, &raw))
}

/// Encodes a list of `item` objects (`{"apiVersion", "kind", "metadata", "items"}`) as a whole
/// body.
pub fn encode_list(list: &Value, item: &'static Struct) -> Result<Vec<u8>, ProtobufError> {
    let mut raw = Vec::new();
    if let Some(metadata) = list.get("metadata").filter(|m| !m.is_null()) {
        let mut message = Vec::new();
        write_message(&mut message, metadata, &LIST_META, "List.metadata")?;
        put_bytes(&mut raw, 1, &message);
    }
    let empty = Vec::new();
    let items = match list.get("items") {
        None | Some(Value::Null) => &empty,
        Some(Value::Array(items)) => items,
        Some(other) => {
            return Err(ProtobufError::Encode {
                field: "List.items".into(),
                expected: format!("[]{}", item.name),
                found: json_type(other).into(),
            });
        }
    };
    for (i, object) in items.iter().enumerate() {
        let mut message = Vec::new();
        write_message(&mut message, object, item, &format!("List.items[{i}]"))?;
        put_bytes(&mut raw, 2, &message);
    }
    let (api_version, kind) = type_meta(list);
    Ok(envelope(api_version, kind, &raw))
}

/// One frame of a protobuf watch stream: the 4-byte big-endian length, then a `WatchEvent` of
/// `event_type` whose object is `object` (an object's whole body, envelope included).
pub fn watch_frame(event_type: &str, object: &[u8]) -> Vec<u8> {
    let mut raw_extension = Vec::new();
    put_bytes(&mut raw_extension, 1, object);
    let mut event = Vec::new();
    put_bytes(&mut event, 1, event_type.as_bytes());
    put_bytes(&mut event, 2, &raw_extension);
    let length = u32::try_from(event.len()).unwrap_or(u32::MAX);
    let mut frame = length.to_be_bytes().to_vec();
    frame.extend_from_slice(&event);
    frame
}

/// The start of [`watch_frame`]`(event_type, object)` for an object of `object_len` bytes:
/// followed by the object's bytes, it is the whole frame, so that an object encoded once can
/// be sent to every watcher as it is.
pub fn watch_frame_head(event_type: &str, object_len: usize) -> Vec<u8> {
    let mut raw_extension_head = Vec::new();
    put_tag(&mut raw_extension_head, 1, LEN);
    put_varint(&mut raw_extension_head, object_len as u64);
    let raw_extension_len = raw_extension_head.len() + object_len;
    let mut event_head = Vec::new();
    put_bytes(&mut event_head, 1, event_type.as_bytes());
    put_tag(&mut event_head, 2, LEN);
    put_varint(&mut event_head, raw_extension_len as u64);
    event_head.extend_from_slice(&raw_extension_head);
    let length = u32::try_from(event_head.len() + object_len).unwrap_or(u32::MAX);
    let mut head = length.to_be_bytes().to_vec();
    head.extend_from_slice(&event_head);
    head
}

/// The first frame of a protobuf watch stream, read by [`read_watch_frame`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatchFrame<'a> {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR`.
    pub event_type: String,
    /// The object's whole body (envelope included).
    pub object: &'a [u8],
    /// The stream after this frame.
    pub rest: &'a [u8],
}

/// Splits the first frame off a protobuf watch stream; `Ok(None)` when `stream` does not hold
/// a whole frame yet.
pub fn read_watch_frame(stream: &[u8]) -> Result<Option<WatchFrame<'_>>, ProtobufError> {
    let Some((head, rest)) = stream.split_first_chunk::<4>() else {
        return Ok(None);
    };
    let length = u32::from_be_bytes(*head) as usize;
    if rest.len() < length {
        return Ok(None);
    }
    let (event, rest) = rest.split_at(length);
    let mut reader = Reader::new(event);
    let mut event_type = String::new();
    let mut object: &[u8] = &[];
    while !reader.done() {
        let (number, wire) = reader.tag("WatchEvent")?;
        let value = reader.value(number, wire, "WatchEvent", 0)?;
        let field = match number {
            1 => "WatchEvent.type",
            2 => "WatchEvent.object",
            _ => continue,
        };
        let Some(Raw::Bytes(bytes)) = value.filter(|_| wire == LEN) else {
            return Err(ProtobufError::WireType {
                field: field.to_owned(),
                found: wire,
                expected: LEN,
                ty: if number == 1 {
                    "string"
                } else {
                    "RawExtension"
                }
                .to_owned(),
            });
        };
        if number == 1 {
            event_type = utf8(bytes, field)?.to_owned();
        } else {
            let mut inner = Reader::new(bytes);
            while !inner.done() {
                let (n, w) = inner.tag("RawExtension")?;
                if let (1, Some(Raw::Bytes(raw))) = (n, inner.value(n, w, "RawExtension", 1)?) {
                    object = raw;
                }
            }
        }
    }
    Ok(Some(WatchFrame {
        event_type,
        object,
        rest,
    }))
}

/// The fuzz entry point of [`read_watch_frame`]: the input as a protobuf watch stream of
/// `item`s, read frame by frame as a client reads it, each object decoded with the `item`
/// schema (or, for an `ERROR` event, as a Status). What decodes encodes again. genplane-api's
/// `core::configmap::exercise_watch_stream` runs it on ConfigMaps.
///
/// # Panics
///
/// When reading or decoding panics, or a decoded object does not encode.
pub fn exercise_watch_stream(data: &[u8], item: &'static Struct) {
    let mut stream = data;
    while let Ok(Some(frame)) = read_watch_frame(stream) {
        assert!(frame.rest.len() < stream.len(), "a frame consumes input");
        let schema = if frame.event_type == "ERROR" {
            &STATUS
        } else {
            item
        };
        if let Ok(object) = decode(frame.object, schema)
            && let Err(e) = encode(&object, schema)
        {
            panic!("a decoded {} does not encode: {e}", schema.name);
        }
        stream = frame.rest;
    }
}
