//! The protobuf form of an OpenAPI v2 document: gnostic's `openapi.v2.Document` message, which
//! kubectl asks `/openapi/v2` for (`Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf`,
//! with no JSON fallback) and reads with gnostic's Go bindings.
//!
//! [`encode`] writes a Swagger 2.0 document held as JSON as that message; [`document_head`],
//! [`path_entry`], [`definitions_head`] and [`definition_entry`] write it in parts, as
//! [`super::v2::protobuf`] does without holding the whole document. A message may be written in
//! parts because its length-delimited fields are written whole each, with the lengths of
//! `Paths` and `Definitions` counted from their finished entries. It is a writer for the messages
//! such a document needs, with gnostic's field numbers, and no general protobuf library:
//!
//! | message | fields written |
//! |---|---|
//! | `Document` | swagger 1, info 2, host 3, basePath 4, schemes 5, consumes 6, produces 7, paths 8, definitions 9, vendor extensions 16 |
//! | `Info` | title 1, version 2, description 3, termsOfService 4, vendor extensions 7 |
//! | `Paths` | vendor extensions 1, path 2 (`NamedPathItem`: name 1, value 2) |
//! | `PathItem` | $ref 1, get 2, put 3, post 4, delete 5, options 6, head 7, patch 8, parameters 9, vendor extensions 10 |
//! | `Operation` | tags 1, summary 2, description 3, operationId 5, produces 6, consumes 7, parameters 8, responses 9, schemes 10, deprecated 11, vendor extensions 13 |
//! | `ParametersItem` | parameter 1 or jsonReference 2 (`JsonReference`: $ref 1, description 2) |
//! | `Parameter` | bodyParameter 1 or nonBodyParameter 2 |
//! | `BodyParameter` | description 1, name 2, in 3, required 4, schema 5, vendor extensions 6 |
//! | `NonBodyParameter` | header 1, formData 2, query 3, path 4 sub-schemas |
//! | `Responses` | responseCode 1 (`NamedResponseValue`: name 1, value 2), vendor extensions 2 |
//! | `ResponseValue` | response 1 or jsonReference 2 |
//! | `Response` | description 1, schema 2 (`SchemaItem`: schema 1), vendor extensions 5 |
//! | `Definitions`, `Properties` | additionalProperties 1 (`NamedSchema`: name 1, value 2) |
//! | `Schema` | $ref 1, format 2, title 3, description 4, default 5, multipleOf 6, maximum 7, exclusiveMaximum 8, minimum 9, exclusiveMinimum 10, maxLength 11, minLength 12, pattern 13, maxItems 14, minItems 15, uniqueItems 16, maxProperties 17, minProperties 18, required 19, enum 20, additionalProperties 21, type 22, items 23, allOf 24, properties 25, discriminator 26, readOnly 27, example 30, vendor extensions 31 |
//! | `AdditionalPropertiesItem` | schema 1 or boolean 2 |
//! | `TypeItem` | value 1 (repeated) |
//! | `ItemsItem` | schema 1 (repeated) |
//! | `NamedAny` | name 1, value 2 (`Any`: yaml 2) |
//!
//! The four non-body parameter sub-schemas share one layout: `required` 1, `in` 2,
//! `description` 3, `name` 4, then (after `allowEmptyValue` 5 for query and form parameters)
//! `type`, `format`, `items`, `collectionFormat`, `default`, `maximum`, `exclusiveMaximum`,
//! `minimum`, `exclusiveMinimum`, `maxLength`, `minLength`, `pattern`, `maxItems`,
//! `minItems`, `uniqueItems`, `enum`, `multipleOf` and the vendor extensions in consecutive
//! numbers. `PrimitivesItems` (a parameter's `items`) has the same run starting at 1.
//!
//! A value of type `Any` (defaults, examples, enum members, vendor extensions) carries its
//! value as text in the `yaml` field: the JSON text, which is also YAML, as gnostic's readers
//! parse that field with a YAML parser. As in proto3, empty strings, `false` and zero numbers
//! are left out; messages are written whenever the JSON has the key, because their presence
//! matters to readers (an empty `properties` is an object with no fields).
//!
//! Keys the table does not list (security definitions, external docs, XML, response headers)
//! are not written; genplane's documents have none.

use serde_json::{Map, Value};

/// The wire types used here.
#[derive(Clone, Copy)]
enum Wire {
    Varint = 0,
    Fixed64 = 1,
    Len = 2,
}

/// Appends protobuf fields to a buffer.
#[derive(Default)]
struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    fn varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.buf.push((value as u8) | 0x80);
            value >>= 7;
        }
        self.buf.push(value as u8);
    }

    fn key(&mut self, field: u32, wire: Wire) {
        self.varint((u64::from(field) << 3) | wire as u64);
    }

    fn bytes(&mut self, field: u32, bytes: &[u8]) {
        self.key(field, Wire::Len);
        self.varint(bytes.len() as u64);
        self.buf.extend_from_slice(bytes);
    }

    /// A string field, left out when empty.
    fn string(&mut self, field: u32, value: &str) {
        if !value.is_empty() {
            self.bytes(field, value.as_bytes());
        }
    }

    /// A bool field, left out when false.
    fn bool(&mut self, field: u32, value: bool) {
        if value {
            self.key(field, Wire::Varint);
            self.varint(1);
        }
    }

    /// An int64 field, left out when zero.
    fn int64(&mut self, field: u32, value: i64) {
        if value != 0 {
            self.key(field, Wire::Varint);
            self.varint(value as u64);
        }
    }

    /// A double field, left out when zero.
    fn double(&mut self, field: u32, value: f64) {
        if value != 0.0 {
            self.key(field, Wire::Fixed64);
            self.buf.extend_from_slice(&value.to_le_bytes());
        }
    }

    /// An embedded message, always written.
    fn message(&mut self, field: u32, write: impl FnOnce(&mut Writer)) {
        let mut inner = Writer::default();
        write(&mut inner);
        self.bytes(field, &inner.buf);
    }

    // Fields read from a JSON object by key.

    fn string_of(&mut self, field: u32, object: &Map<String, Value>, key: &str) {
        if let Some(value) = object.get(key).and_then(Value::as_str) {
            self.string(field, value);
        }
    }

    /// A repeated string from a JSON array (or a single string).
    fn strings_of(&mut self, field: u32, object: &Map<String, Value>, key: &str) {
        match object.get(key) {
            Some(Value::Array(values)) => {
                for value in values.iter().filter_map(Value::as_str) {
                    self.bytes(field, value.as_bytes());
                }
            }
            Some(Value::String(value)) => self.bytes(field, value.as_bytes()),
            _ => {}
        }
    }

    fn bool_of(&mut self, field: u32, object: &Map<String, Value>, key: &str) {
        self.bool(
            field,
            object.get(key).and_then(Value::as_bool) == Some(true),
        );
    }

    fn int64_of(&mut self, field: u32, object: &Map<String, Value>, key: &str) {
        if let Some(value) = object.get(key).and_then(Value::as_i64) {
            self.int64(field, value);
        }
    }

    fn double_of(&mut self, field: u32, object: &Map<String, Value>, key: &str) {
        if let Some(value) = object.get(key).and_then(Value::as_f64) {
            self.double(field, value);
        }
    }

    /// An `Any` holding `value` as text.
    fn any(&mut self, field: u32, value: &Value) {
        self.message(field, |w| w.string(2, &value.to_string()));
    }

    fn any_of(&mut self, field: u32, object: &Map<String, Value>, key: &str) {
        if let Some(value) = object.get(key) {
            self.any(field, value);
        }
    }

    /// A repeated `Any` from a JSON array.
    fn anys_of(&mut self, field: u32, object: &Map<String, Value>, key: &str) {
        for value in object
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            self.any(field, value);
        }
    }

    /// The `x-` keys of `object`, as repeated `NamedAny`.
    fn vendor_extensions(&mut self, field: u32, object: &Map<String, Value>) {
        for (name, value) in object.iter().filter(|(k, _)| k.starts_with("x-")) {
            self.message(field, |w| {
                w.string(1, name);
                w.any(2, value);
            });
        }
    }
}

/// The object at `key`, if it is one.
fn object<'a>(object: &'a Map<String, Value>, key: &str) -> Option<&'a Map<String, Value>> {
    object.get(key).and_then(Value::as_object)
}

/// `document` (a Swagger 2.0 document as JSON) as gnostic's `openapi.v2.Document` message.
/// A document that is not a JSON object encodes as the empty message.
pub fn encode(document: &Value) -> Vec<u8> {
    let mut w = Writer::default();
    if let Some(d) = document.as_object() {
        write_document(&mut w, d);
    }
    w.buf
}

fn write_document(w: &mut Writer, d: &Map<String, Value>) {
    w.string_of(1, d, "swagger");
    if let Some(info) = object(d, "info") {
        w.message(2, |w| write_info(w, info));
    }
    w.string_of(3, d, "host");
    w.string_of(4, d, "basePath");
    w.strings_of(5, d, "schemes");
    w.strings_of(6, d, "consumes");
    w.strings_of(7, d, "produces");
    if let Some(paths) = object(d, "paths") {
        w.message(8, |w| {
            for (path, item) in paths {
                path_entry(&mut w.buf, path, item);
            }
        });
    }
    if let Some(definitions) = object(d, "definitions") {
        w.message(9, |w| {
            for (name, schema) in definitions {
                definition_entry(&mut w.buf, name, schema);
            }
        });
    }
    w.vendor_extensions(16, d);
}

fn write_info(w: &mut Writer, info: &Map<String, Value>) {
    w.string_of(1, info, "title");
    w.string_of(2, info, "version");
    w.string_of(3, info, "description");
    w.string_of(4, info, "termsOfService");
    w.vendor_extensions(7, info);
}

/// The start of a `Document` of Swagger `2.0` with `title` and `version` in its `Info`, up to
/// and including the key and length of its `Paths`, whose entries (see [`path_entry`]) take
/// `paths_len` bytes. [`definitions_head`] and the definitions' entries follow them.
pub fn document_head(title: &str, version: &str, paths_len: usize) -> Vec<u8> {
    let mut w = Writer::default();
    w.string(1, "2.0");
    w.message(2, |w| {
        w.string(1, title);
        w.string(2, version);
    });
    w.key(8, Wire::Len);
    w.varint(paths_len as u64);
    w.buf
}

/// The key and length of a `Document`'s `Definitions`, whose entries (see
/// [`definition_entry`]) take `definitions_len` bytes.
pub fn definitions_head(definitions_len: usize) -> Vec<u8> {
    let mut w = Writer::default();
    w.key(9, Wire::Len);
    w.varint(definitions_len as u64);
    w.buf
}

/// Appends to `out` the entry of `Paths` for the path `name` (a `NamedPathItem`, or for an
/// `x-` key a vendor extension); an item that is not an object writes nothing.
pub fn path_entry(out: &mut Vec<u8>, name: &str, item: &Value) {
    let mut w = Writer {
        buf: std::mem::take(out),
    };
    if name.starts_with("x-") {
        w.message(1, |w| {
            w.string(1, name);
            w.any(2, item);
        });
    } else if let Some(item) = item.as_object() {
        w.message(2, |w| {
            w.string(1, name);
            w.message(2, |w| write_path_item(w, item));
        });
    }
    *out = w.buf;
}

/// Appends to `out` the entry of `Definitions` (or `Properties`) for the schema `name` (a
/// `NamedSchema`); a schema that is not an object writes nothing.
pub fn definition_entry(out: &mut Vec<u8>, name: &str, schema: &Value) {
    let Some(schema) = schema.as_object() else {
        return;
    };
    let mut w = Writer {
        buf: std::mem::take(out),
    };
    w.message(1, |w| {
        w.string(1, name);
        w.message(2, |w| write_schema(w, schema));
    });
    *out = w.buf;
}

/// `Definitions` or `Properties`: repeated `NamedSchema` in field 1.
fn write_named_schemas(w: &mut Writer, schemas: &Map<String, Value>) {
    for (name, schema) in schemas {
        definition_entry(&mut w.buf, name, schema);
    }
}

fn write_path_item(w: &mut Writer, item: &Map<String, Value>) {
    w.string_of(1, item, "$ref");
    for (field, method) in [
        (2, "get"),
        (3, "put"),
        (4, "post"),
        (5, "delete"),
        (6, "options"),
        (7, "head"),
        (8, "patch"),
    ] {
        if let Some(operation) = object(item, method) {
            w.message(field, |w| write_operation(w, operation));
        }
    }
    write_parameters(w, 9, item);
    w.vendor_extensions(10, item);
}

fn write_operation(w: &mut Writer, op: &Map<String, Value>) {
    w.strings_of(1, op, "tags");
    w.string_of(2, op, "summary");
    w.string_of(3, op, "description");
    w.string_of(5, op, "operationId");
    w.strings_of(6, op, "produces");
    w.strings_of(7, op, "consumes");
    write_parameters(w, 8, op);
    if let Some(responses) = object(op, "responses") {
        w.message(9, |w| {
            for (code, response) in responses.iter().filter(|(k, _)| !k.starts_with("x-")) {
                let Some(response) = response.as_object() else {
                    continue;
                };
                w.message(1, |w| {
                    w.string(1, code);
                    w.message(2, |w| {
                        if response.contains_key("$ref") {
                            w.message(2, |w| write_json_reference(w, response));
                        } else {
                            w.message(1, |w| write_response(w, response));
                        }
                    });
                });
            }
            w.vendor_extensions(2, responses);
        });
    }
    w.strings_of(10, op, "schemes");
    w.bool_of(11, op, "deprecated");
    w.vendor_extensions(13, op);
}

fn write_json_reference(w: &mut Writer, reference: &Map<String, Value>) {
    w.string_of(1, reference, "$ref");
    w.string_of(2, reference, "description");
}

fn write_response(w: &mut Writer, response: &Map<String, Value>) {
    w.string_of(1, response, "description");
    if let Some(schema) = object(response, "schema") {
        w.message(2, |w| w.message(1, |w| write_schema(w, schema)));
    }
    w.vendor_extensions(5, response);
}

/// The `parameters` of an operation or path item, as repeated `ParametersItem` in `field`.
fn write_parameters(w: &mut Writer, field: u32, owner: &Map<String, Value>) {
    let parameters = owner.get("parameters").and_then(Value::as_array);
    for parameter in parameters
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
    {
        w.message(field, |w| {
            if parameter.contains_key("$ref") {
                w.message(2, |w| write_json_reference(w, parameter));
                return;
            }
            w.message(1, |w| {
                let location = parameter.get("in").and_then(Value::as_str).unwrap_or("");
                if location == "body" {
                    w.message(1, |w| {
                        w.string_of(1, parameter, "description");
                        w.string_of(2, parameter, "name");
                        w.string_of(3, parameter, "in");
                        w.bool_of(4, parameter, "required");
                        if let Some(schema) = object(parameter, "schema") {
                            w.message(5, |w| write_schema(w, schema));
                        }
                        w.vendor_extensions(6, parameter);
                    });
                    return;
                }
                // NonBodyParameter: header 1, formData 2, query 3, path 4; query and form
                // parameters have `allowEmptyValue` (5) before the shared run.
                let (sub, first) = match location {
                    "header" => (1, 5),
                    "formData" => (2, 6),
                    "path" => (4, 5),
                    _ => (3, 6),
                };
                w.message(2, |w| {
                    w.message(sub, |w| {
                        w.bool_of(1, parameter, "required");
                        w.string_of(2, parameter, "in");
                        w.string_of(3, parameter, "description");
                        w.string_of(4, parameter, "name");
                        if first == 6 {
                            w.bool_of(5, parameter, "allowEmptyValue");
                        }
                        write_primitive(w, parameter, first);
                    });
                });
            });
        });
    }
}

/// The run of fields non-body parameters and `PrimitivesItems` share, numbered from `first`
/// (`type`) to `first + 17` (the vendor extensions).
fn write_primitive(w: &mut Writer, p: &Map<String, Value>, first: u32) {
    w.string_of(first, p, "type");
    w.string_of(first + 1, p, "format");
    if let Some(items) = object(p, "items") {
        w.message(first + 2, |w| write_primitive(w, items, 1));
    }
    w.string_of(first + 3, p, "collectionFormat");
    w.any_of(first + 4, p, "default");
    w.double_of(first + 5, p, "maximum");
    w.bool_of(first + 6, p, "exclusiveMaximum");
    w.double_of(first + 7, p, "minimum");
    w.bool_of(first + 8, p, "exclusiveMinimum");
    w.int64_of(first + 9, p, "maxLength");
    w.int64_of(first + 10, p, "minLength");
    w.string_of(first + 11, p, "pattern");
    w.int64_of(first + 12, p, "maxItems");
    w.int64_of(first + 13, p, "minItems");
    w.bool_of(first + 14, p, "uniqueItems");
    w.anys_of(first + 15, p, "enum");
    w.double_of(first + 16, p, "multipleOf");
    w.vendor_extensions(first + 17, p);
}

fn write_schema(w: &mut Writer, s: &Map<String, Value>) {
    w.string_of(1, s, "$ref");
    w.string_of(2, s, "format");
    w.string_of(3, s, "title");
    w.string_of(4, s, "description");
    w.any_of(5, s, "default");
    w.double_of(6, s, "multipleOf");
    w.double_of(7, s, "maximum");
    w.bool_of(8, s, "exclusiveMaximum");
    w.double_of(9, s, "minimum");
    w.bool_of(10, s, "exclusiveMinimum");
    w.int64_of(11, s, "maxLength");
    w.int64_of(12, s, "minLength");
    w.string_of(13, s, "pattern");
    w.int64_of(14, s, "maxItems");
    w.int64_of(15, s, "minItems");
    w.bool_of(16, s, "uniqueItems");
    w.int64_of(17, s, "maxProperties");
    w.int64_of(18, s, "minProperties");
    w.strings_of(19, s, "required");
    w.anys_of(20, s, "enum");
    match s.get("additionalProperties") {
        Some(Value::Object(schema)) => w.message(21, |w| w.message(1, |w| write_schema(w, schema))),
        Some(Value::Bool(allowed)) => w.message(21, |w| {
            // A oneof member is written even when it is false.
            w.key(2, Wire::Varint);
            w.varint(u64::from(*allowed));
        }),
        _ => {}
    }
    if s.contains_key("type") {
        w.message(22, |w| w.strings_of(1, s, "type"));
    }
    match s.get("items") {
        Some(Value::Object(item)) => w.message(23, |w| w.message(1, |w| write_schema(w, item))),
        Some(Value::Array(items)) => w.message(23, |w| {
            for item in items.iter().filter_map(Value::as_object) {
                w.message(1, |w| write_schema(w, item));
            }
        }),
        _ => {}
    }
    for item in s
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(item) = item.as_object() {
            w.message(24, |w| write_schema(w, item));
        }
    }
    if let Some(properties) = object(s, "properties") {
        w.message(25, |w| write_named_schemas(w, properties));
    }
    w.string_of(26, s, "discriminator");
    w.bool_of(27, s, "readOnly");
    w.any_of(30, s, "example");
    w.vendor_extensions(31, s);
}

#[cfg(test)]
mod tests;
