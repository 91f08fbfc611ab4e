//! Decoding a raw JSON object against the shape of its type, as Go's JSON decoder does.
//!
//! Objects are `serde_json::Value`s everywhere in genplane. Before validation, each is checked
//! against a [`Struct`] schema: every field has the JSON type its Go field has, or the request
//! fails with a 400 BadRequest naming the field (upstream answers
//! `json: cannot unmarshal number into Go struct field ConfigMap.data of type string`).
//! Decoding also produces what upstream would store after a round trip through its Go types:
//! - a `null` struct field is dropped (Go leaves the field unset); a `null` map or list item
//!   becomes the item type's zero value; an empty map or list is dropped unless its Go field
//!   lacks `omitempty` ([`Field::keep_empty`]);
//! - fields the type does not have are dropped, and reported in [`Decoded::unknown_fields`]
//!   (for `fieldValidation=Strict|Warn`);
//! - times are rewritten as Go writes them (`metav1.Time` in whole seconds UTC,
//!   `metav1.MicroTime` with six digits), quantities in their canonical form, bytes re-encoded
//!   in standard base64.
//!
//! The same schemas carry each field's protobuf number ([`Field`]), so that [`crate::protobuf`]
//! reads and writes Kubernetes protobuf with them and produces exactly this JSON.

use std::borrow::Cow;

use base64::Engine as _;
use genplane_apimachinery::errors::{ApiError, Status};
use genplane_apimachinery::meta::rfc3339;
use genplane_apimachinery::validation::field::Path;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::quantity::Quantity;
use crate::time::{parse_micro_time, parse_time};

/// The JSON shape of a field.
#[derive(Clone, Copy, Debug)]
pub enum Type {
    /// A string.
    String,
    /// `true` or `false`.
    Bool,
    /// An integer that fits in 32 bits.
    Int32,
    /// An integer that fits in 64 bits.
    Int64,
    /// Bytes, as a standard base64 string.
    Bytes,
    /// A `metav1.Time`: an RFC 3339 string.
    Time,
    /// A `metav1.MicroTime`: an RFC 3339 string with six fractional digits.
    MicroTime,
    /// A `resource.Quantity`: a string or a number.
    Quantity,
    /// An `intstr.IntOrString`: a 32-bit integer or a string (a port number or name, a
    /// count or a percentage).
    IntOrString,
    /// Anything (kept as it is).
    Any,
    /// An object with known fields.
    Struct(&'static Struct),
    /// An object with arbitrary keys, every value of one type.
    Map(&'static Type),
    /// A list of items of one type.
    List(&'static Type),
    /// A list that protobuf wraps in a message of its own, `repeated T items = 1` (Go's named
    /// slice types such as `ExtraValue`); in JSON a plain list.
    Items(&'static Type),
}

impl Type {
    /// The type's name in messages, e.g. `map[string]string`.
    pub fn name(self) -> String {
        match self {
            Type::String => "string".to_owned(),
            Type::Bool => "bool".to_owned(),
            Type::Int32 => "int32".to_owned(),
            Type::Int64 => "int64".to_owned(),
            Type::Bytes => "[]byte (base64 string)".to_owned(),
            Type::Time => "Time (RFC 3339 string)".to_owned(),
            Type::MicroTime => "MicroTime (RFC 3339 string with microseconds)".to_owned(),
            Type::Quantity => "Quantity".to_owned(),
            Type::IntOrString => "IntOrString".to_owned(),
            Type::Any => "any".to_owned(),
            Type::Struct(s) => s.name.to_owned(),
            Type::Map(t) => format!("map[string]{}", t.name()),
            Type::List(t) | Type::Items(t) => format!("[]{}", t.name()),
        }
    }

    /// The value a `null` map or list item decodes to.
    pub fn zero(self) -> Value {
        match self {
            Type::String | Type::Bytes => Value::from(""),
            Type::Bool => Value::Bool(false),
            Type::Int32 | Type::Int64 | Type::IntOrString => Value::from(0),
            Type::Quantity => Value::from("0"),
            Type::Struct(_) => Value::Object(Map::new()),
            Type::Time
            | Type::MicroTime
            | Type::Any
            | Type::Map(_)
            | Type::List(_)
            | Type::Items(_) => Value::Null,
        }
    }
}

/// An object type: its Go name (for messages) and its fields.
#[derive(Debug)]
pub struct Struct {
    /// The type's name, e.g. `ConfigMap`.
    pub name: &'static str,
    /// The fields, in the Go struct's declaration order (`kind` before `apiVersion`, a
    /// ConfigMap's `immutable` before its `data`): the order kube-apiserver writes them in JSON,
    /// which [`crate::order`] follows. It is not always the protobuf numbers' order; the
    /// protobuf writer sorts by number itself.
    pub fields: &'static [Field],
}

impl Struct {
    /// The field of JSON name `name`, also among the fields of an [inlined](Field::inline)
    /// struct.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find_map(|f| match f.ty {
            Type::Struct(inner) if f.inline => inner.field(name),
            _ => (f.name == name).then_some(f),
        })
    }
}

/// One field of a [`Struct`]: its JSON name, its protobuf field number (from upstream's
/// `generated.proto`) and its shape, which drive JSON decoding and the protobuf transcoder
/// ([`crate::protobuf`]) alike.
#[derive(Clone, Copy, Debug)]
pub struct Field {
    /// The JSON name, e.g. `binaryData`.
    pub name: &'static str,
    /// The protobuf field number; 0 for `apiVersion` and `kind`, which protobuf carries in the
    /// envelope's `typeMeta` rather than in the message.
    pub number: u32,
    /// The shape.
    pub ty: Type,
    /// Whether the Go field is a pointer (`*bool`, `*int64`, `*string`): a zero value sent on
    /// the wire is then kept in JSON (`immutable: false`), where for a plain Go field it is
    /// left out, as `omitempty` leaves it out.
    pub pointer: bool,
    /// Whether the Go field lacks `omitempty` (`rules`, `verbs`, `versions`): an empty map or
    /// list is then kept. Every other empty map or list is left out, as a round trip through
    /// the Go type leaves it out (`labels: {}`, `finalizers: []`, `data: {}`).
    pub keep_empty: bool,
    /// Whether the Go field is an embedded struct (`json:",inline"`, e.g. `Rule` in
    /// `RuleWithOperations`): its fields are the parent's in JSON, and a message of its own
    /// (field `number`) in protobuf. Its `name` is empty.
    pub inline: bool,
}

impl Field {
    /// A plain field: zero values read from protobuf are left out of the JSON.
    pub const fn new(name: &'static str, number: u32, ty: Type) -> Self {
        Field {
            name,
            number,
            ty,
            pointer: false,
            keep_empty: false,
            inline: false,
        }
    }

    /// An embedded struct (`json:",inline"`): its fields appear in the parent's JSON, and in
    /// protobuf as message field `number`.
    pub const fn inline(number: u32, schema: &'static Struct) -> Self {
        Field {
            name: "",
            number,
            ty: Type::Struct(schema),
            pointer: false,
            keep_empty: false,
            inline: true,
        }
    }

    /// The same field, whose Go tag has no `omitempty`: an empty map or list is kept.
    pub const fn keep_empty(self) -> Self {
        Field {
            keep_empty: true,
            ..self
        }
    }

    /// A Go pointer field: any value read from protobuf, zero or not, is kept.
    pub const fn pointer(name: &'static str, number: u32, ty: Type) -> Self {
        Field {
            name,
            number,
            ty,
            pointer: true,
            keep_empty: true,
            inline: false,
        }
    }

    /// `apiVersion` or `kind`: a JSON string that protobuf carries in the envelope.
    pub const fn type_meta(name: &'static str) -> Self {
        Field {
            name,
            number: 0,
            ty: Type::String,
            pointer: false,
            keep_empty: false,
            inline: false,
        }
    }
}

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
            genplane_apimachinery::gofmt::Quoted(version)
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
                    format!("cannot parse {} as an RFC 3339 time (2006-01-02T15:04:05Z07:00)", genplane_apimachinery::gofmt::Quoted(s)),
                )),
            },
            (Type::MicroTime, Value::String(s)) => match parse_micro_time(s) {
                Some(t) => Ok(text(s, micro_time(t.seconds, t.nanos))),
                None => Err(self.bad(
                    path,
                    format!(
                        "cannot parse {} as a time with microseconds (2006-01-02T15:04:05.000000Z07:00)", genplane_apimachinery::gofmt::Quoted(s)
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

/// A MicroTime as Go writes it: UTC, six fractional digits.
pub fn micro_time(seconds: i64, nanos: u32) -> String {
    let whole = rfc3339(seconds);
    let stem = whole.trim_end_matches('Z');
    format!("{stem}.{:06}Z", nanos / 1000)
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

/// Reads an already decoded value into a typed struct (used only for validation).
pub(crate) fn typed<T: DeserializeOwned>(decoded: &Value, root: &str) -> Result<T, DecodeError> {
    // read from the value where it is: fields the type does not have are skipped, not copied
    T::deserialize(decoded).map_err(|e| DecodeError::BadValue {
        field: root.to_owned(),
        message: e.to_string(),
    })
}

/// `metav1.LabelSelectorRequirement`. Go writes `key` and `operator` even when empty (no
/// `omitempty`), so a value read from protobuf is kept, zero or not.
pub static LABEL_SELECTOR_REQUIREMENT: Struct = Struct {
    name: "LabelSelectorRequirement",
    fields: &[
        Field::pointer("key", 1, Type::String),
        Field::pointer("operator", 2, Type::String),
        Field::new("values", 3, Type::List(&Type::String)),
    ],
};

/// `metav1.LabelSelector`.
pub static LABEL_SELECTOR: Struct = Struct {
    name: "LabelSelector",
    fields: &[
        Field::new("matchLabels", 1, Type::Map(&Type::String)),
        Field::new(
            "matchExpressions",
            2,
            Type::List(&Type::Struct(&LABEL_SELECTOR_REQUIREMENT)),
        ),
    ],
};

/// `metav1.ObjectMeta`.
pub static OBJECT_META: Struct = Struct {
    name: "ObjectMeta",
    fields: &[
        Field::new("name", 1, Type::String),
        Field::new("generateName", 2, Type::String),
        Field::new("namespace", 3, Type::String),
        Field::new("selfLink", 4, Type::String),
        Field::new("uid", 5, Type::String),
        Field::new("resourceVersion", 6, Type::String),
        Field::new("generation", 7, Type::Int64),
        Field::new("creationTimestamp", 8, Type::Time),
        Field::new("deletionTimestamp", 9, Type::Time),
        Field::pointer("deletionGracePeriodSeconds", 10, Type::Int64),
        Field::new("labels", 11, Type::Map(&Type::String)),
        Field::new("annotations", 12, Type::Map(&Type::String)),
        Field::new(
            "ownerReferences",
            13,
            Type::List(&Type::Struct(&OWNER_REFERENCE)),
        ),
        Field::new("finalizers", 14, Type::List(&Type::String)),
        // An empty list is kept for the field manager to read: it resets the managed fields
        // (upstream's `isResetManagedFields`), which are then left out.
        Field::new(
            "managedFields",
            17,
            Type::List(&Type::Struct(&MANAGED_FIELDS_ENTRY)),
        )
        .keep_empty(),
    ],
};

/// `metav1.Condition`.
pub static CONDITION: Struct = Struct {
    name: "Condition",
    fields: &[
        Field::new("type", 1, Type::String),
        Field::new("status", 2, Type::String),
        Field::new("observedGeneration", 3, Type::Int64),
        Field::new("lastTransitionTime", 4, Type::Time),
        Field::new("reason", 5, Type::String),
        Field::new("message", 6, Type::String),
    ],
};

/// `metav1.OwnerReference`.
pub static OWNER_REFERENCE: Struct = Struct {
    name: "OwnerReference",
    fields: &[
        Field::new("apiVersion", 5, Type::String),
        Field::new("kind", 1, Type::String),
        Field::new("name", 3, Type::String),
        Field::new("uid", 4, Type::String),
        Field::pointer("controller", 6, Type::Bool),
        Field::pointer("blockOwnerDeletion", 7, Type::Bool),
    ],
};

/// `metav1.ManagedFieldsEntry`.
pub static MANAGED_FIELDS_ENTRY: Struct = Struct {
    name: "ManagedFieldsEntry",
    fields: &[
        Field::new("manager", 1, Type::String),
        Field::new("operation", 2, Type::String),
        Field::new("apiVersion", 3, Type::String),
        Field::new("time", 4, Type::Time),
        Field::new("fieldsType", 6, Type::String),
        Field::new("fieldsV1", 7, Type::Any),
        Field::new("subresource", 8, Type::String),
    ],
};

/// `core/v1.ObjectReference`.
pub static OBJECT_REFERENCE: Struct = Struct {
    name: "ObjectReference",
    fields: &[
        Field::new("kind", 1, Type::String),
        Field::new("namespace", 2, Type::String),
        Field::new("name", 3, Type::String),
        Field::new("uid", 4, Type::String),
        Field::new("apiVersion", 5, Type::String),
        Field::new("resourceVersion", 6, Type::String),
        Field::new("fieldPath", 7, Type::String),
    ],
};

/// `core/v1.LocalObjectReference`.
pub static LOCAL_OBJECT_REFERENCE: Struct = Struct {
    name: "LocalObjectReference",
    fields: &[Field::new("name", 1, Type::String)],
};

/// `metav1.ListMeta`, the `metadata` of lists and of a Status.
pub static LIST_META: Struct = Struct {
    name: "ListMeta",
    fields: &[
        Field::new("selfLink", 1, Type::String),
        Field::new("resourceVersion", 2, Type::String),
        Field::new("continue", 3, Type::String),
        Field::pointer("remainingItemCount", 4, Type::Int64),
    ],
};

/// `metav1.Status`, the body of every error answer.
pub static STATUS: Struct = Struct {
    name: "Status",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&LIST_META)),
        Field::new("status", 2, Type::String),
        Field::new("message", 3, Type::String),
        Field::new("reason", 4, Type::String),
        Field::pointer("details", 5, Type::Struct(&STATUS_DETAILS)),
        Field::new("code", 6, Type::Int32),
    ],
};

/// `metav1.StatusDetails`.
pub static STATUS_DETAILS: Struct = Struct {
    name: "StatusDetails",
    fields: &[
        Field::new("name", 1, Type::String),
        Field::new("group", 2, Type::String),
        Field::new("kind", 3, Type::String),
        Field::new("uid", 6, Type::String),
        Field::new("causes", 4, Type::List(&Type::Struct(&STATUS_CAUSE))),
        Field::new("retryAfterSeconds", 5, Type::Int32),
    ],
};

/// `metav1.StatusCause` (its Go field `Type` is `reason` in JSON and protobuf).
pub static STATUS_CAUSE: Struct = Struct {
    name: "StatusCause",
    fields: &[
        Field::new("reason", 1, Type::String),
        Field::new("message", 2, Type::String),
        Field::new("field", 3, Type::String),
    ],
};

/// `metav1.DeleteOptions`, the optional body of a DELETE.
pub static DELETE_OPTIONS: Struct = Struct {
    name: "DeleteOptions",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::pointer("gracePeriodSeconds", 1, Type::Int64),
        Field::pointer("preconditions", 2, Type::Struct(&PRECONDITIONS)),
        Field::pointer("orphanDependents", 3, Type::Bool),
        Field::pointer("propagationPolicy", 4, Type::String),
        Field::new("dryRun", 5, Type::List(&Type::String)),
    ],
};

/// `metav1.Preconditions`.
pub static PRECONDITIONS: Struct = Struct {
    name: "Preconditions",
    fields: &[
        Field::pointer("uid", 1, Type::String),
        Field::pointer("resourceVersion", 2, Type::String),
    ],
};

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
            Field::new(
                "items",
                9,
                Type::List(&Type::Struct(&LOCAL_OBJECT_REFERENCE)),
            ),
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
