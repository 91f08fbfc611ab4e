//! Micro-measurement: what validating one object against compiled CEL rules costs, per
//! object: one rule reading two fields of a small object, no rules at all, and one root rule
//! on an object of 500 items that reads only two fields (only what a rule reads is converted).
//!
//! `hack/bench/cel.sh` (or `cargo run --release -p genplane-cel --example validate_throughput`)
//!
//! Each figure is the fastest of several batches: the machines are shared and noisy.

use std::time::{Duration, Instant};

use genplane_apimachinery::validation::field::Path;
use genplane_cel::Rules;
use serde_json::{Value, json};

const BATCHES: u32 = 15;
const PER_BATCH: u32 = 2_000;

fn compile(schema: &Value) -> Rules {
    let (rules, errors) = Rules::compile(schema, &Path::new("openAPIV3Schema"));
    assert!(errors.is_empty(), "{errors}");
    rules
}

/// The fastest per-object time of `BATCHES` batches validating `object`.
fn per_object(rules: &Rules, object: &Value) -> Duration {
    (0..BATCHES)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..PER_BATCH {
                assert!(std::hint::black_box(rules.validate(object, None)).is_empty());
            }
            start.elapsed() / PER_BATCH
        })
        .min()
        .unwrap_or_default()
}

fn main() {
    let spec = |validations: Value| {
        json!({"type": "object", "properties": {"spec": {
            "type": "object",
            "x-kubernetes-validations": validations,
            "properties": {
                "min": {"type": "integer"}, "max": {"type": "integer"},
                "name": {"type": "string", "maxLength": 63},
            },
        }}})
    };
    let small = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a"}, "spec": {"min": 1, "max": 2, "name": "n"}});
    let one_rule = compile(&spec(json!([{"rule": "self.min <= self.max"}])));
    let no_rules = compile(&spec(json!([])));
    println!(
        "validate, one rule: {:?} per object",
        per_object(&one_rule, &small)
    );
    println!(
        "validate, no rules: {:?} per object",
        per_object(&no_rules, &small)
    );

    let root = compile(&json!({
        "type": "object",
        "x-kubernetes-validations": [{"rule": "self.spec.min <= self.spec.max"}],
        "properties": {"spec": {"type": "object", "properties": {
            "min": {"type": "integer"}, "max": {"type": "integer"},
            "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
        }}},
    }));
    let items: Vec<Value> = (0..500)
        .map(|i| json!({"name": format!("item-{i}")}))
        .collect();
    let big = json!({"metadata": {"name": "a"}, "spec": {"min": 1, "max": 2, "items": items}});
    println!(
        "validate, one root rule, 500-item object: {:?} per object",
        per_object(&root, &big)
    );
}
