//! The shape of a typed JSON object: a [`Struct`] of [`Field`]s, each with its JSON name, its
//! protobuf number (from upstream's `generated.proto`) and its [`Type`].
//!
//! One schema per Go type drives every codec of [`crate::codec`]: JSON decoding
//! ([`super::decode`]), the protobuf transcoder ([`super::protobuf`]) and JSON written in
//! kube-apiserver's field order ([`super::order`]). The meta/v1 types' schemas are in
//! [`crate::meta::schemas`]; each kind's is in its own module (genplane-api).

use serde_json::{Map, Value};

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
    /// which [`super::order`] follows. It is not always the protobuf numbers' order; the
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
/// ([`super::protobuf`]) alike.
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
