//! The tests of [`super::proto`]: the table against k8s-openapi's 1.33 types (every field,
//! nothing else, the zero values they always write kept) and each kind's fixture
//! (`testdata/protobuf/`) through protobuf and back.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use genplane_apimachinery::codec::protobuf;
use serde_json::{Map, Value, json};

use genplane_apimachinery::codec::schema::{Field, Struct, Type};
use genplane_apimachinery::meta::schemas::OBJECT_META;

use super::proto::*;

/// Each kind: its schema, its k8s-openapi type's schema, its decode hook and its fixture.
type Kind = (
    &'static Struct,
    fn(&mut schemars::SchemaGenerator) -> String,
    fn(
        &Value,
    ) -> Result<
        genplane_apimachinery::codec::decode::Decoded,
        genplane_apimachinery::errors::ApiError,
    >,
    &'static str,
);

fn kinds() -> Vec<Kind> {
    use genplane_api::schema::schema_of;
    use k8s_openapi::api::{apps, core, discovery};
    vec![
        (
            &POD,
            schema_of::<core::v1::Pod>,
            crate::api::pod::INFO.hooks.decode,
            include_str!("../../testdata/protobuf/pod.json"),
        ),
        (
            &NODE,
            schema_of::<core::v1::Node>,
            crate::api::node::INFO.hooks.decode,
            include_str!("../../testdata/protobuf/node.json"),
        ),
        (
            &SERVICE,
            schema_of::<core::v1::Service>,
            crate::api::service::INFO.hooks.decode,
            include_str!("../../testdata/protobuf/service.json"),
        ),
        (
            &ENDPOINTS,
            schema_of::<core::v1::Endpoints>,
            crate::api::endpoints::INFO.hooks.decode,
            include_str!("../../testdata/protobuf/endpoints.json"),
        ),
        (
            &ENDPOINT_SLICE,
            schema_of::<discovery::v1::EndpointSlice>,
            crate::api::endpointslice::INFO.hooks.decode,
            include_str!("../../testdata/protobuf/endpointslice.json"),
        ),
        (
            &DEPLOYMENT,
            schema_of::<apps::v1::Deployment>,
            crate::api::deployment::INFO.hooks.decode,
            include_str!("../../testdata/protobuf/deployment.json"),
        ),
        (
            &REPLICA_SET,
            schema_of::<apps::v1::ReplicaSet>,
            crate::api::replicaset::INFO.hooks.decode,
            include_str!("../../testdata/protobuf/replicaset.json"),
        ),
        (
            &BINDING,
            schema_of::<core::v1::Binding>,
            crate::api::binding::INFO.hooks.decode,
            include_str!("../../testdata/protobuf/binding.json"),
        ),
    ]
}

/// How the table differs from k8s-openapi's types.
#[derive(Default)]
struct Differences {
    /// Fields the types have and the table lacks.
    missing: BTreeSet<String>,
    /// Fields the table has and the types lack.
    extra: BTreeSet<String>,
    /// Scalar fields Go always writes to JSON (no `omitempty`: required in the types)
    /// whose zero value the table would leave out (not [`Field::pointer`]).
    zero_dropped: BTreeSet<String>,
}

/// The JSON schema `schema` points to, following a `$ref` (or a one-item `allOf`).
fn resolve<'a>(schema: &'a Value, defs: &'a Map<String, Value>) -> &'a Value {
    if let Some(Value::String(reference)) = schema.get("$ref") {
        let name = reference.rsplit('/').next().unwrap();
        return resolve(&defs[name], defs);
    }
    if let Some(Value::Array(all)) = schema.get("allOf")
        && all.len() == 1
    {
        return resolve(&all[0], defs);
    }
    schema
}

/// Compares `schema` with the JSON schema `openapi` below `path`.
fn compare(
    schema: &'static Struct,
    openapi: &Value,
    defs: &Map<String, Value>,
    path: &str,
    out: &mut Differences,
) {
    let object = resolve(openapi, defs);
    let properties = object["properties"].as_object().unwrap();
    let required = object.get("required").and_then(Value::as_array);
    for (name, property) in properties {
        let at = format!("{path}.{name}");
        let Some(field) = schema.field(name) else {
            out.missing.insert(at);
            continue;
        };
        let scalar = matches!(
            field.ty,
            Type::String | Type::Bool | Type::Int32 | Type::Int64
        );
        if scalar && !field.pointer && required.is_some_and(|r| r.contains(&json!(name))) {
            out.zero_dropped.insert(format!("{} {name}", schema.name));
        }
        let mut ty = field.ty;
        let mut property = resolve(property, defs);
        loop {
            match ty {
                Type::List(item) => {
                    ty = *item;
                    property = resolve(&property["items"], defs);
                }
                Type::Map(item) => {
                    ty = *item;
                    property = resolve(&property["additionalProperties"], defs);
                }
                _ => break,
            }
        }
        if let Type::Struct(inner) = ty
            && !std::ptr::eq(inner, &OBJECT_META)
        {
            compare(inner, property, defs, &at, out);
        }
    }
    for field in flat(schema) {
        if field.number != 0 && !properties.contains_key(field.name) {
            out.extra.insert(format!("{path}.{}", field.name));
        }
    }
}

/// The fields of `schema` as JSON has them: an embedded struct's in its place.
fn flat(schema: &'static Struct) -> Vec<&'static Field> {
    schema
        .fields
        .iter()
        .flat_map(|field| match field.ty {
            Type::Struct(inner) if field.inline => flat(inner),
            _ => vec![field],
        })
        .collect()
}

#[test]
fn the_table_has_every_field_of_the_upstream_types() {
    let mut generator = schemars::SchemaGenerator::default();
    let mut found = Differences::default();
    for (schema, openapi, _, _) in kinds() {
        let name = openapi(&mut generator);
        let defs = generator.definitions().clone();
        compare(schema, &defs[&name], &defs, schema.name, &mut found);
    }
    assert!(found.missing.is_empty(), "missing: {:#?}", found.missing);
    assert!(found.extra.is_empty(), "not upstream's: {:#?}", found.extra);
    assert!(
        found.zero_dropped.is_empty(),
        "zero values left out: {:#?}",
        found.zero_dropped
    );
}

/// Every struct reachable from `schema`, once.
fn structs(schema: &'static Struct, out: &mut Vec<&'static Struct>) {
    if out.iter().any(|s| std::ptr::eq(*s, schema)) {
        return;
    }
    out.push(schema);
    for field in schema.fields {
        let mut ty = field.ty;
        while let Type::List(item) | Type::Map(item) = ty {
            ty = *item;
        }
        if let Type::Struct(inner) = ty {
            structs(inner, out);
        }
    }
}

#[test]
fn no_message_repeats_a_field_number() {
    let mut all = Vec::new();
    for (schema, ..) in kinds() {
        structs(schema, &mut all);
    }
    for schema in all {
        let mut seen = BTreeSet::new();
        for field in schema.fields.iter().filter(|f| f.number != 0) {
            assert!(
                seen.insert(field.number),
                "{}: {} twice",
                schema.name,
                field.number
            );
        }
    }
}

/// The first place where `a` and `b` differ, with both values.
fn difference(a: &Value, b: &Value, path: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            x.keys()
                .chain(y.keys())
                .find_map(|k| match (x.get(k), y.get(k)) {
                    (Some(v), Some(w)) => difference(v, w, &format!("{path}.{k}")),
                    (v, w) => Some(format!("{path}.{k}: {v:?} / {w:?}")),
                })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (v, w))| difference(v, w, &format!("{path}[{i}]"))),
        _ => (a != b).then(|| format!("{path}: {a} / {b}")),
    }
}

#[test]
fn each_fixture_comes_back_from_protobuf_unchanged() {
    for (schema, _, decode, fixture) in kinds() {
        let given: Value = serde_json::from_str(fixture).unwrap();
        // The fixture as the JSON path stores it (and so as a client reads it).
        let decoded = decode(&given).unwrap();
        assert_eq!(
            decoded.unknown_fields,
            Vec::<String>::new(),
            "{}",
            schema.name
        );
        let object = decoded.object;
        let body = protobuf::encode(&object, schema).unwrap();
        let read = protobuf::decode(&body, schema).unwrap();
        assert_eq!(
            difference(&read, &object, schema.name),
            None,
            "protobuf (left) and JSON differ"
        );
        // A second trip writes the same bytes.
        assert_eq!(
            protobuf::encode(&read, schema).unwrap(),
            body,
            "{}",
            schema.name
        );
    }
}

#[test]
fn a_zero_pointer_field_is_kept_and_a_plain_one_left_out() {
    let service = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "s"},
        "spec": {"type": "LoadBalancer", "allocateLoadBalancerNodePorts": false,
                 "publishNotReadyAddresses": false,
                 "ports": [{"port": 80, "targetPort": 8080, "nodePort": 0}]}});
    let body = protobuf::encode(&service, &SERVICE).unwrap();
    let read = protobuf::decode(&body, &SERVICE).unwrap();
    assert_eq!(read["spec"]["allocateLoadBalancerNodePorts"], json!(false));
    assert!(
        read["spec"].get("publishNotReadyAddresses").is_none(),
        "{read}"
    );
    assert_eq!(
        read["spec"]["ports"],
        json!([{"port": 80, "targetPort": 8080}])
    );
}
