//! The protobuf transcoder ([`genplane_apimachinery::codec::protobuf`]) over the built-in kinds'
//! schemas: every served type round trips with every field, and hand-assembled bodies of
//! ConfigMaps, Secrets, Namespaces, Leases and quotas read as upstream's JSON.

use genplane_apimachinery::codec::decode;
use genplane_apimachinery::codec::protobuf::*;
use genplane_apimachinery::codec::schema::{Field, Struct, Type};
use genplane_apimachinery::meta::schemas::{DELETE_OPTIONS, STATUS};
use serde_json::{Map, Value, json};

use crate::catalog;

/// Whether a field of `ty` holds messages (which recursive schemas nest without end).
fn nests(ty: Type) -> bool {
    match ty {
        Type::Struct(_) => true,
        Type::Map(item) | Type::List(item) | Type::Items(item) => nests(*item),
        _ => false,
    }
}

/// A value for every field of `ty`, recursively; below `depth` 4 only the fields that
/// hold no messages (a recursive schema such as JSONSchemaProps would never end).
fn full(ty: Type, name: &str) -> Value {
    full_at(ty, name, 0)
}

fn full_at(ty: Type, name: &str, depth: usize) -> Value {
    match ty {
        Type::String => Value::from(format!("{name}-value")),
        Type::Bool => Value::Bool(true),
        Type::Int32 => Value::from(-7),
        Type::Int64 => Value::from(1_234_567_890_123_i64),
        Type::Bytes => Value::from("AP8BaGk="),
        Type::Time => Value::from("2026-11-22T03:40:00Z"),
        Type::MicroTime => Value::from("2026-11-22T03:40:00.123456Z"),
        Type::Quantity => Value::from("1500m"),
        Type::IntOrString => Value::from("25%"),
        Type::Any => json!({"f:data": {"f:a": {}}}),
        Type::Struct(schema) => {
            let mut object = Map::new();
            for f in schema.fields {
                if f.number == 0 || (depth >= 4 && nests(f.ty)) {
                    continue;
                }
                match full_at(f.ty, f.name, depth + 1) {
                    Value::Object(inner) if f.inline => object.extend(inner),
                    value => {
                        object.insert(f.name.to_owned(), value);
                    }
                }
            }
            Value::Object(object)
        }
        Type::Map(item) => {
            json!({"k1": full_at(*item, name, depth), "k2": full_at(*item, name, depth)})
        }
        Type::List(item) | Type::Items(item) => {
            json!([full_at(*item, name, depth), full_at(*item, name, depth)])
        }
    }
}

#[test]
fn every_served_type_round_trips_with_every_field() {
    for info in catalog::all() {
        let mut object = full(Type::Struct(info.schema), info.kind);
        object["apiVersion"] = Value::from(info.api_version());
        object["kind"] = Value::from(info.kind);
        let normalized = decode::decode(&object, info.schema).unwrap().object;
        assert_eq!(
            normalized, object,
            "{}: the generated object is normal",
            info.kind
        );
        let body = encode(&object, info.schema).unwrap();
        assert!(body.starts_with(MAGIC));
        let back = decode(&body, info.schema).unwrap();
        assert_eq!(back, object, "{}", info.kind);

        let list = json!({
            "apiVersion": info.api_version(), "kind": info.list_kind,
            "metadata": {"resourceVersion": "12", "continue": "c", "remainingItemCount": 0},
            "items": [object.clone(), {"metadata": {"name": "b"}}],
        });
        let back = decode_list(&encode_list(&list, info.schema).unwrap(), info.schema).unwrap();
        // Items carry no typeMeta in protobuf.
        let mut want = list.clone();
        for item in want["items"].as_array_mut().unwrap() {
            let item = item.as_object_mut().unwrap();
            item.remove("apiVersion");
            item.remove("kind");
        }
        assert_eq!(back, want, "{}", info.list_kind);
    }
    let status = json!({
        "apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
        "message": "configmaps \"x\" already exists", "reason": "AlreadyExists",
        "details": {"name": "x", "kind": "configmaps", "causes": [{"reason": "FieldValueInvalid", "message": "m", "field": "data"}], "retryAfterSeconds": 3},
        "code": 409
    });
    assert_eq!(
        decode(&encode(&status, &STATUS).unwrap(), &STATUS).unwrap(),
        status
    );
    let options = &DELETE_OPTIONS;
    let mut object = full(Type::Struct(options), "DeleteOptions");
    object["apiVersion"] = json!("v1");
    object["kind"] = json!("DeleteOptions");
    assert_eq!(
        decode(&encode(&object, options).unwrap(), options).unwrap(),
        object
    );
}

#[test]
fn zero_values_follow_json() {
    let cm = &crate::core::configmap::SCHEMA;
    // A pointer keeps false; plain empty strings, zero numbers and empty maps go.
    let object = json!({"metadata": {"name": "", "generation": 0, "labels": {}}, "immutable": false, "data": {"k": ""}});
    let back = decode(&encode(&object, cm).unwrap(), cm).unwrap();
    assert_eq!(
        back,
        json!({"metadata": {}, "immutable": false, "data": {"k": ""}})
    );
}

/// A length-delimited field with a one-byte tag and length.
fn ld(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![tag, u8::try_from(body.len()).unwrap()];
    out.extend_from_slice(body);
    out
}

fn body(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let type_meta = [ld(0x0a, api_version.as_bytes()), ld(0x12, kind.as_bytes())].concat();
    let unknown = [
        ld(0x0a, &type_meta),
        ld(0x12, raw),
        ld(0x1a, b""),
        ld(0x22, b""),
    ]
    .concat();
    [b"k8s\0".as_slice(), &unknown].concat()
}

/// An ObjectMeta as gogo writes it: every plain field, empty or not.
fn meta(name: &str) -> Vec<u8> {
    [
        ld(0x0a, name.as_bytes()),                                // 1 name
        ld(0x12, b""),                                            // 2 generateName
        ld(0x1a, b"default"),                                     // 3 namespace
        ld(0x22, b""),                                            // 4 selfLink
        ld(0x2a, b""),                                            // 5 uid
        ld(0x32, b""),                                            // 6 resourceVersion
        vec![0x38, 0x00],                                         // 7 generation
        ld(0x42, b""),                                            // 8 creationTimestamp (zero)
        ld(0x5a, &[ld(0x0a, b"app"), ld(0x12, b"web")].concat()), // 11 labels
        ld(0x62, &[ld(0x0a, b"note"), ld(0x12, b"")].concat()),   // 12 annotations
    ]
    .concat()
}

#[test]
fn configmap_from_hand_assembled_bytes() {
    let raw = [
        ld(0x0a, &meta("x")),                                            // 1 metadata
        ld(0x12, &[ld(0x0a, b"a"), ld(0x12, b"b")].concat()),            // 2 data
        ld(0x12, &[ld(0x0a, b"c"), ld(0x12, b"d\ne")].concat()),         // 2 data
        ld(0x1a, &[ld(0x0a, b"bin"), ld(0x12, &[0, 0xff, 1])].concat()), // 3 binaryData
        vec![0x20, 0x01],                                                // 4 immutable
        vec![0x98, 0x06, 0x05],                                          // 99: unknown, skipped
    ]
    .concat();
    let cm = &crate::core::configmap::SCHEMA;
    assert_eq!(
        decode(&body("v1", "ConfigMap", &raw), cm).unwrap(),
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x", "namespace": "default", "labels": {"app": "web"}, "annotations": {"note": ""}},
            "data": {"a": "b", "c": "d\ne"},
            "binaryData": {"bin": "AP8B"},
            "immutable": true
        })
    );
}

#[test]
fn secret_from_hand_assembled_bytes() {
    let raw = [
        ld(0x0a, &meta("s")),                                          // 1 metadata
        ld(0x12, &[ld(0x0a, b"tls.crt"), ld(0x12, b"CERT")].concat()), // 2 data
        ld(0x12, &[ld(0x0a, b"empty")].concat()),                      // 2 data, no value
        ld(0x1a, b"kubernetes.io/tls"),                                // 3 type
        ld(0x22, &[ld(0x0a, b"user"), ld(0x12, b"me")].concat()),      // 4 stringData
        vec![0x28, 0x00],                                              // 5 immutable: false
    ]
    .concat();
    let secret = &crate::core::secret::SCHEMA;
    assert_eq!(
        decode(&body("v1", "Secret", &raw), secret).unwrap(),
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "namespace": "default", "labels": {"app": "web"}, "annotations": {"note": ""}},
            "data": {"tls.crt": "Q0VSVA==", "empty": ""},
            "type": "kubernetes.io/tls",
            "stringData": {"user": "me"},
            "immutable": false
        })
    );
}

#[test]
fn times_quantities_and_raw_json() {
    // creationTimestamp {seconds: 1795405200, nanos: 5} in a Namespace; a lease's
    // MicroTime; a quota's quantity; a managed fields entry's raw JSON.
    let time = [vec![0x08], varint(1_795_405_200), vec![0x10, 0x05]].concat();
    let ns_meta = [ld(0x0a, b"n"), ld(0x42, &time)].concat();
    let ns = decode(
        &body("v1", "Namespace", &ld(0x0a, &ns_meta)),
        &crate::core::namespace::SCHEMA,
    )
    .unwrap();
    assert_eq!(ns["metadata"]["creationTimestamp"], "2026-11-23T03:40:00Z");
    let spec = ld(0x1a, &time); // 3 acquireTime
    let lease = decode(
        &body("coordination.k8s.io/v1", "Lease", &ld(0x12, &spec)),
        &crate::coordination::lease::SCHEMA,
    )
    .unwrap();
    assert_eq!(lease["spec"]["acquireTime"], "2026-11-23T03:40:00.000000Z");
    let hard = ld(
        0x0a,
        &[ld(0x0a, b"pods"), ld(0x12, &ld(0x0a, b"1000m"))].concat(),
    );
    let quota = decode(
        &body("v1", "ResourceQuota", &ld(0x12, &hard)),
        &crate::core::resourcequota::SCHEMA,
    )
    .unwrap();
    assert_eq!(quota["spec"]["hard"]["pods"], "1");
    let entry = [
        ld(0x0a, b"kubectl"),
        ld(0x3a, &ld(0x0a, br#"{"f:data":{}}"#)),
    ]
    .concat();
    // Field 17 (managedFields) has a two-byte tag: 0x8a 0x01.
    let managed = [vec![0x8a, 0x01, u8::try_from(entry.len()).unwrap()], entry].concat();
    let cm = decode(
        &body("v1", "ConfigMap", &ld(0x0a, &managed)),
        &crate::core::configmap::SCHEMA,
    );
    assert_eq!(
        cm.unwrap()["metadata"]["managedFields"],
        json!([{"manager": "kubectl", "fieldsV1": {"f:data": {}}}])
    );
}

#[test]
fn int_or_string_is_its_message_of_three_fields() {
    static PORT: Struct = Struct {
        name: "Port",
        fields: &[
            Field::type_meta("kind"),
            Field::type_meta("apiVersion"),
            Field::new("targetPort", 4, Type::IntOrString),
        ],
    };
    // targetPort {type: 0, intVal: 8080, strVal: ""}, as gogo writes it.
    let number = [vec![0x08, 0x00, 0x10], varint(8080), vec![0x1a, 0x00]].concat();
    // targetPort {type: 1, intVal: 0, strVal: "http"}.
    let name = [vec![0x08, 0x01, 0x10, 0x00], ld(0x1a, b"http")].concat();
    for (raw, json) in [(number, json!(8080)), (name, json!("http"))] {
        let object = decode(&body("v1", "Port", &ld(0x22, &raw)), &PORT).unwrap();
        assert_eq!(object["targetPort"], json);
        let again = encode(&object, &PORT).unwrap();
        assert_eq!(again, body("v1", "Port", &ld(0x22, &raw)));
    }
    // A zero integer is kept, as Go keeps a struct value.
    let zero = decode(&body("v1", "Port", &ld(0x22, &[])), &PORT).unwrap();
    assert_eq!(zero["targetPort"], json!(0));
    let wrong = decode(&body("v1", "Port", &ld(0x22, &ld(0x12, b"x"))), &PORT);
    assert!(
        matches!(wrong, Err(ProtobufError::WireType { ref field, .. }) if field == "Port.targetPort.intVal"),
        "{wrong:?}"
    );
}

#[test]
fn a_watch_frame_is_its_head_and_the_object() {
    for size in [0, 5, 127, 128, 300, 70_000] {
        let object = vec![7u8; size];
        let mut framed = watch_frame_head("MODIFIED", size);
        framed.extend_from_slice(&object);
        assert_eq!(framed, watch_frame("MODIFIED", &object), "{size} bytes");
    }
}

/// `v` as a protobuf varint: seven bits a byte, low bits first.
fn varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    while v >= 0x80 {
        out.push((v & 0x7f) as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
    out
}

static NODE: Struct = Struct {
    name: "Node",
    fields: &[Field::new("child", 1, Type::Struct(&NODE))],
};

#[test]
fn malformed_input_is_a_precise_bad_request() {
    let cm = &crate::core::configmap::SCHEMA;
    let err = |body: &[u8]| -> (u16, String) {
        let e = match read_envelope(body) {
            Err(e) => e.to_unrecognized_error("ConfigMap"),
            Ok(env) => decode_object(&env, cm)
                .unwrap_err()
                .to_api_error("ConfigMap", "v1"),
        };
        (e.code, e.message.clone())
    };
    let prefix = "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: ";
    let cases: Vec<(Vec<u8>, String)> = vec![
        (
            b"{\"kind\":\"ConfigMap\"}".to_vec(),
            "the object provided is unrecognized (must be of type ConfigMap): provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]".into(),
        ),
        (
            b"k8s\0\x0a\x80".to_vec(),
            "the object provided is unrecognized (must be of type ConfigMap): proto: Unknown: truncated or overlong varint at byte 1".into(),
        ),
        (
            body("v1", "ConfigMap", &[0x12, 0x05, b'a']),
            format!("{prefix}proto: ConfigMap.data: 5 bytes announced but only 1 left"),
        ),
        (
            body("v1", "ConfigMap", &[0x0a, 0x02, 0x0a]),
            format!("{prefix}proto: ConfigMap.metadata: 2 bytes announced but only 1 left"),
        ),
        (
            body("v1", "ConfigMap", &[0x10, 0x01]),
            format!("{prefix}proto: wrong wire type 0 for field ConfigMap.data of type map[string]string (expected 2)"),
        ),
        (
            body("v1", "ConfigMap", &[0x22, 0x00]),
            format!("{prefix}proto: wrong wire type 2 for field ConfigMap.immutable of type bool (expected 0)"),
        ),
        (
            body("v1", "ConfigMap", &ld(0x12, &[ld(0x0a, b"k"), ld(0x12, &[0xff, 0xfe])].concat())),
            format!("{prefix}proto: field ConfigMap.data[k]: invalid UTF-8 in a string"),
        ),
        (
            body("v1", "ConfigMap", &[0x00, 0x01]),
            format!("{prefix}proto: ConfigMap: illegal tag 0 (field number 0, wire type 0)"),
        ),
        (
            body("v1", "ConfigMap", &[0x0f]),
            format!("{prefix}proto: ConfigMap: illegal tag 15 (field number 1, wire type 7)"),
        ),
        (
            body("v1", "ConfigMap", &[0x7c]),
            format!("{prefix}proto: ConfigMap: illegal tag 124 (field number 15, wire type 4)"),
        ),
        (
            body("v1", "ConfigMap", &ld(0x0a, &ld(0x42, &[0x10, 0xff, 0xff, 0xff, 0xff, 0x0f]))),
            format!("{prefix}proto: field ConfigMap.metadata.creationTimestamp: nanos -1 out of range [0, 999999999]"),
        ),
        (
            body("v1", "ConfigMap", &ld(0x0a, &[0x8a, 0x01, 0x06, 0x3a, 0x04, 0x0a, 0x02, b'{', b'x'])),
            format!("{prefix}proto: field ConfigMap.metadata.managedFields[0].fieldsV1: the raw JSON does not parse: key must be a string at line 1 column 2"),
        ),
    ];
    for (input, want) in cases {
        assert_eq!(err(&input), (400, want), "{input:?}");
    }
    // Nesting: a message inside itself 40 times.
    let mut nested = Vec::new();
    for _ in 0..40 {
        nested = ld(0x0a, &nested);
    }
    let node = body("v1", "Node", &nested);
    let env = read_envelope(&node).unwrap();
    assert_eq!(
        decode_object(&env, &NODE).unwrap_err().to_string(),
        format!(
            "proto: field Node{}: messages nested deeper than 32",
            ".child".repeat(33)
        )
    );
    // Deep groups in an unknown field (15) are refused too.
    let groups = [vec![0x7b; 40], vec![0x7c; 40]].concat();
    assert!(matches!(
        decode_object(
            &read_envelope(&body("v1", "ConfigMap", &groups)).unwrap(),
            cm
        ),
        Err(ProtobufError::TooDeep { .. })
    ));
    // A well-formed group in an unknown field is skipped.
    let group = body("v1", "ConfigMap", &[0xdb, 0x06, 0x08, 0x01, 0xdc, 0x06]);
    let env = read_envelope(&group).unwrap();
    assert_eq!(
        decode_object(&env, cm).unwrap(),
        json!({"apiVersion": "v1", "kind": "ConfigMap"})
    );
}

#[test]
fn watch_frames() {
    let object = encode(
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}),
        &crate::core::configmap::SCHEMA,
    )
    .unwrap();
    let mut stream = watch_frame("ADDED", &object);
    stream.extend(watch_frame("DELETED", &object));
    let length = u32::from_be_bytes(stream[..4].try_into().unwrap()) as usize;
    // type = 1 "ADDED", object = 2 {raw = 1 <envelope>}.
    assert_eq!(&stream[4..11], b"\x0a\x05ADDED");
    assert_eq!(stream[11], 0x12);
    let first = read_watch_frame(&stream).unwrap().unwrap();
    assert_eq!(
        (first.event_type.as_str(), first.object),
        ("ADDED", object.as_slice())
    );
    assert_eq!(first.rest.len(), stream.len() - 4 - length);
    let second = read_watch_frame(first.rest).unwrap().unwrap();
    assert_eq!(
        (second.event_type.as_str(), second.rest.len()),
        ("DELETED", 0)
    );
    assert_eq!(read_watch_frame(&stream[..10]).unwrap(), None);
}
