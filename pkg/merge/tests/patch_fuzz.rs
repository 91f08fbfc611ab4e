//! Both patch engines fuzzed on stable Rust: random but shape-aware objects, strategic merge
//! patches (with directives) and applied configurations for every built-in kind, generated
//! deterministically and fed to `genplane_merge::fuzzing::exercise` (the entry the
//! cargo-fuzz target uses too). Any panic fails.

#![allow(clippy::unwrap_used)]

use genplane_apiserver::openapi::builder::{all_served, documents, type_model};
use genplane_merge::Schema;
use serde_json::{Map, Value, json};

/// How many generated inputs one run tries.
const INPUTS: usize = 6_000;

/// A small deterministic generator (xorshift64*), so that a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % (n.max(1) as u64)).unwrap()
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Keys the built-in kinds have, and the directives strategic merge patch knows.
const KEYS: &[&str] = &[
    "metadata",
    "name",
    "namespace",
    "labels",
    "annotations",
    "finalizers",
    "ownerReferences",
    "uid",
    "apiVersion",
    "kind",
    "controller",
    "data",
    "binaryData",
    "type",
    "secrets",
    "imagePullSecrets",
    "spec",
    "status",
    "hard",
    "scopes",
    "scopeSelector",
    "matchExpressions",
    "operator",
    "values",
    "scopeName",
    "holderIdentity",
    "leaseDurationSeconds",
    "conditions",
    "phase",
    "involvedObject",
    "regarding",
    "series",
    "count",
    "k",
    "a",
    "$patch",
    "$retainKeys",
    "$setElementOrder/finalizers",
    "$setElementOrder/ownerReferences",
    "$deleteFromPrimitiveList/finalizers",
    "$setElementOrder/secrets",
    "$unknown",
];

const STRINGS: &[&str] = &[
    "replace",
    "delete",
    "merge",
    "a",
    "b",
    "uid-1",
    "uid-2",
    "v1",
    "ConfigMap",
    "",
    "x",
];

fn value(rng: &mut Rng, depth: usize) -> Value {
    match rng.below(if depth > 3 { 5 } else { 8 }) {
        0 => Value::Null,
        1 => Value::Bool(rng.below(2) == 1),
        2 => json!(rng.below(100)),
        3 | 4 => json!(rng.pick(STRINGS)),
        5 => object(rng, depth + 1),
        _ => Value::Array((0..rng.below(4)).map(|_| value(rng, depth + 1)).collect()),
    }
}

fn object(rng: &mut Rng, depth: usize) -> Value {
    let mut map = Map::new();
    for _ in 0..rng.below(5) {
        map.insert((*rng.pick(KEYS)).to_owned(), value(rng, depth + 1));
    }
    Value::Object(map)
}

/// A plausible object of the kind, with random parts.
fn live(rng: &mut Rng) -> Value {
    let mut object = json!({
        "apiVersion": "v1",
        "metadata": {
            "name": "x", "namespace": "default", "labels": {"a": "b"},
            "finalizers": ["a", "b"],
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "uid-1"}],
        },
        "data": {"k": "v"},
    });
    if rng.below(2) == 1 {
        object["metadata"][*rng.pick(KEYS)] = value(rng, 2);
    }
    if rng.below(2) == 1 {
        object[*rng.pick(KEYS)] = value(rng, 1);
    }
    object
}

fn builtin() -> (Schema, Vec<genplane_merge::TypeRef>) {
    let schema = type_model(&documents(&all_served())).unwrap();
    let kinds = genplane_api::catalog::all()
        .iter()
        .map(|info| schema.kind(info.group, info.version, info.kind).unwrap())
        .collect();
    (schema, kinds)
}

#[test]
fn generated_objects_patches_and_configurations_never_panic() {
    let (schema, kinds) = builtin();
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    for _ in 0..INPUTS {
        let ty = rng.pick(&kinds).clone();
        let flags = u8::try_from(rng.below(2)).unwrap();
        let documents = [live(&mut rng), object(&mut rng, 0), {
            let mut config = live(&mut rng);
            if rng.below(3) == 0 {
                config = object(&mut rng, 0);
            }
            config
        }];
        let mut input = vec![flags];
        for (i, document) in documents.iter().enumerate() {
            if i > 0 {
                input.push(b'\n');
            }
            input.extend_from_slice(&serde_json::to_vec(document).unwrap());
        }
        genplane_merge::fuzzing::exercise(&schema, &ty, &input);
    }
}
