use serde_json::{Value, json};

use super::encode;
use crate::openapi::builder::tests::{served, v2_of};
use crate::openapi::builder::{Document, documents, v2};

/// The v2 document of `documents` as protobuf, built in pieces and joined.
fn protobuf_of(documents: &[Document]) -> Vec<u8> {
    v2_of(documents, v2::protobuf)
}

/// One decoded field: its number and its value (a varint, or the bytes of a length-delimited
/// field; no other wire type occurs in these tests).
#[derive(Debug)]
enum Field<'a> {
    Varint(#[allow(dead_code, reason = "shown in failure messages")] u64),
    Bytes(&'a [u8]),
}

fn varint(bytes: &[u8], at: &mut usize) -> u64 {
    let mut value = 0u64;
    let mut shift = 0;
    loop {
        let b = bytes[*at];
        *at += 1;
        value |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return value;
        }
        shift += 7;
    }
}

/// A minimal protobuf reader: every field of a message, in order.
fn fields(bytes: &[u8]) -> Vec<(u64, Field<'_>)> {
    let mut at = 0;
    let mut out = Vec::new();
    while at < bytes.len() {
        let key = varint(bytes, &mut at);
        let field = match key & 7 {
            0 => Field::Varint(varint(bytes, &mut at)),
            2 => {
                let len = varint(bytes, &mut at) as usize;
                let value = &bytes[at..at + len];
                at += len;
                Field::Bytes(value)
            }
            wire => panic!("unexpected wire type {wire}"),
        };
        out.push((key >> 3, field));
    }
    out
}

/// The length-delimited fields numbered `number`.
fn all(bytes: &[u8], number: u64) -> Vec<&[u8]> {
    fields(bytes)
        .into_iter()
        .filter_map(|(n, f)| match f {
            Field::Bytes(b) if n == number => Some(b),
            _ => None,
        })
        .collect()
}

/// The one length-delimited field numbered `number`.
fn one(bytes: &[u8], number: u64) -> &[u8] {
    let found = all(bytes, number);
    assert_eq!(found.len(), 1, "field {number}: {:?}", fields(bytes));
    found[0]
}

fn text(bytes: &[u8], number: u64) -> &str {
    std::str::from_utf8(one(bytes, number)).unwrap()
}

/// The value (field 2) of the `Named*` entry (name 1, value 2) in field `number` called `name`.
fn named<'a>(bytes: &'a [u8], number: u64, name: &str) -> &'a [u8] {
    all(bytes, number)
        .into_iter()
        .find(|entry| text(entry, 1) == name)
        .map(|entry| one(entry, 2))
        .unwrap_or_else(|| panic!("no {name} in field {number}"))
}

/// A length-delimited field: `key` (the field's key, written out by hand) and `payload`.
fn field(key: &[u8], payload: &[u8]) -> Vec<u8> {
    // The length as a varint of one or two bytes.
    let len = payload.len();
    assert!(len < 1 << 14);
    let mut out = key.to_vec();
    if len < 128 {
        out.push(len as u8);
    } else {
        out.extend([(len & 0x7f) as u8 | 0x80, (len >> 7) as u8]);
    }
    out.extend_from_slice(payload);
    out
}

fn concat(parts: &[Vec<u8>]) -> Vec<u8> {
    parts.concat()
}

#[test]
fn a_minimal_document_has_gnostics_field_numbers() {
    let document = json!({
        "swagger": "2.0",
        "info": {"title": "T", "version": "v"},
        "paths": {"/p": {"patch": {
            "operationId": "o",
            "parameters": [
                {"name": "fieldValidation", "in": "query", "type": "string", "uniqueItems": true},
                {"name": "body", "in": "body", "required": true, "schema": {"$ref": "#/definitions/D"}},
            ],
            "responses": {"200": {"description": "OK", "schema": {"$ref": "#/definitions/D"}}},
            "x-k": {"kind": "K"},
        }}},
        "definitions": {"D": {
            "type": "object",
            "required": ["a"],
            "properties": {"a": {"type": "string"}},
            "additionalProperties": false,
        }},
    });
    // Keys by hand: (field << 3) | wire type, as varints.
    let reference = field(&[0x0a], b"#/definitions/D"); // Schema.$ref = 1
    let query = concat(&[
        field(&[0x12], b"query"),           // QueryParameterSubSchema.in = 2
        field(&[0x22], b"fieldValidation"), // .name = 4
        field(&[0x32], b"string"),          // .type = 6
        vec![0xa0, 0x01, 0x01],             // .uniqueItems = 20 (varint)
    ]);
    let query_item = field(
        &[0x0a], // ParametersItem.parameter = 1
        &field(
            &[0x12],                 // Parameter.nonBodyParameter = 2
            &field(&[0x1a], &query), // NonBodyParameter.queryParameterSubSchema = 3
        ),
    );
    let body = concat(&[
        field(&[0x12], b"body"),    // BodyParameter.name = 2
        field(&[0x1a], b"body"),    // .in = 3
        vec![0x20, 0x01],           // .required = 4
        field(&[0x2a], &reference), // .schema = 5
    ]);
    let body_item = field(&[0x0a], &field(&[0x0a], &body)); // parameter 1 / bodyParameter 1
    let response = concat(&[
        field(&[0x0a], b"OK"),                       // Response.description = 1
        field(&[0x12], &field(&[0x0a], &reference)), // .schema = 2 (SchemaItem.schema = 1)
    ]);
    let responses = field(
        &[0x0a], // Responses.responseCode = 1 (NamedResponseValue)
        &concat(&[
            field(&[0x0a], b"200"),                     // name = 1
            field(&[0x12], &field(&[0x0a], &response)), // value = 2 (ResponseValue.response = 1)
        ]),
    );
    let extension = field(
        &[0x6a], // Operation.vendorExtension = 13 (NamedAny)
        &concat(&[
            field(&[0x0a], b"x-k"),                              // name = 1
            field(&[0x12], &field(&[0x12], br#"{"kind":"K"}"#)), // value = 2 (Any.yaml = 2)
        ]),
    );
    let operation = concat(&[
        field(&[0x2a], b"o"),        // Operation.operationId = 5
        field(&[0x42], &query_item), // .parameters = 8
        field(&[0x42], &body_item),
        field(&[0x4a], &responses), // .responses = 9
        extension,
    ]);
    let paths = field(
        &[0x12], // Paths.path = 2 (NamedPathItem)
        &concat(&[
            field(&[0x0a], b"/p"),                       // name = 1
            field(&[0x12], &field(&[0x42], &operation)), // value = 2 (PathItem.patch = 8)
        ]),
    );
    let property = concat(&[
        field(&[0x0a], b"a"), // NamedSchema.name = 1
        field(&[0x12], &field(&[0xb2, 0x01], &field(&[0x0a], b"string"))), // value: type 22 (TypeItem.value 1)
    ]);
    let schema = concat(&[
        field(&[0x9a, 0x01], b"a"),                       // Schema.required = 19
        field(&[0xaa, 0x01], &[0x10, 0x00]), // .additionalProperties = 21 (boolean = 2, false)
        field(&[0xb2, 0x01], &field(&[0x0a], b"object")), // .type = 22
        field(&[0xca, 0x01], &field(&[0x0a], &property)), // .properties = 25 (Properties.additionalProperties = 1)
    ]);
    let definitions = field(
        &[0x0a], // Definitions.additionalProperties = 1 (NamedSchema)
        &concat(&[field(&[0x0a], b"D"), field(&[0x12], &schema)]),
    );
    let expected = concat(&[
        field(&[0x0a], b"2.0"), // Document.swagger = 1
        field(
            &[0x12],
            &concat(&[field(&[0x0a], b"T"), field(&[0x12], b"v")]),
        ), // .info = 2
        field(&[0x42], &paths), // .paths = 8
        field(&[0x4a], &definitions), // .definitions = 9
    ]);
    assert_eq!(encode(&document), expected);
}

#[test]
fn the_served_document_reads_as_kubectl_reads_it() {
    let bytes = protobuf_of(&documents(&served()));
    assert_eq!(text(&bytes, 1), "2.0");
    assert_eq!(text(one(&bytes, 2), 1), "Kubernetes");

    // kubectl's check for server-side field validation: the PATCH operation of the path whose
    // group-version-kind extension names the kind declares a `fieldValidation` query parameter.
    let item = named(
        one(&bytes, 8),
        2,
        "/api/v1/namespaces/{namespace}/configmaps/{name}",
    );
    let patch = one(item, 8);
    let gvk = named(patch, 13, "x-kubernetes-group-version-kind");
    let gvk: Value = serde_json::from_str(text(gvk, 2)).unwrap();
    assert_eq!(
        gvk,
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    let names: Vec<&str> = all(patch, 8)
        .into_iter()
        .filter_map(|item| {
            let non_body = all(one(item, 1), 2);
            non_body.first().map(|p| text(one(p, 3), 4))
        })
        .collect();
    assert!(names.contains(&"fieldValidation"), "{names:?}");

    // explain: ConfigMap.data is a map of strings, with upstream's description.
    let config_map = named(one(&bytes, 9), 1, "io.k8s.api.core.v1.ConfigMap");
    let kinds = named(config_map, 31, "x-kubernetes-group-version-kind");
    let kinds: Value = serde_json::from_str(text(kinds, 2)).unwrap();
    assert_eq!(
        kinds,
        json!([{"group": "", "version": "v1", "kind": "ConfigMap"}])
    );
    let data = named(one(config_map, 25), 1, "data");
    assert_eq!(text(one(data, 22), 1), "object");
    assert!(text(data, 4).starts_with("Data contains the configuration data"));
    let values = one(one(data, 21), 1);
    assert_eq!(text(one(values, 22), 1), "string");

    // A reference with a description: Lease.spec.
    let lease = named(one(&bytes, 9), 1, "io.k8s.api.coordination.v1.Lease");
    let spec = named(one(lease, 25), 1, "spec");
    assert_eq!(
        text(spec, 1),
        "#/definitions/io.k8s.api.coordination.v1.LeaseSpec"
    );
    assert!(all(spec, 22).is_empty(), "a reference has no type");
}

#[test]
fn the_document_built_in_pieces_is_the_document_encoded_whole() {
    // One source: its paths and schemas come in the same (sorted) order either way.
    let served = documents(&served());
    let core = served.iter().find(|d| d.path == "api/v1").unwrap();
    let json = crate::openapi::builder::tests::swagger_of(std::slice::from_ref(core));
    assert_eq!(protobuf_of(std::slice::from_ref(core)), encode(&json));

    // Every source: the same paths and definitions, each once, as the JSON holds.
    let json = crate::openapi::builder::tests::swagger_of(&served);
    let bytes = protobuf_of(&served);
    let paths: Vec<&str> = all(one(&bytes, 8), 2)
        .into_iter()
        .map(|entry| text(entry, 1))
        .collect();
    let definitions: Vec<&str> = all(one(&bytes, 9), 1)
        .into_iter()
        .map(|entry| text(entry, 1))
        .collect();
    let unique = |names: &[&str]| {
        names
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    };
    assert_eq!(paths.len(), json["paths"].as_object().unwrap().len());
    assert_eq!(unique(&paths), paths.len());
    assert_eq!(
        definitions.len(),
        json["definitions"].as_object().unwrap().len()
    );
    assert_eq!(unique(&definitions), definitions.len());
}
