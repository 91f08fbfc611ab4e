//! Micro-measurement: what decoding and validating one small custom resource costs
//! (prune + coerce metadata, default, validate), per object.
//!
//! `cargo run -p genplane-apiextensions --example cr_throughput`
//!
//! Each figure is the fastest of several batches (the machines are shared and noisy), and
//! includes cloning the object, which is reported on its own first.

use std::time::Instant;

use genplane_apiextensions::defaulting::default;
use genplane_apiextensions::object_validation::{validate, validate_update};
use genplane_apiextensions::pruning::{Source, normalize};
use genplane_apiextensions::schema::Structural;
use serde_json::{Value, json};

const BATCHES: u32 = 15;
const PER_BATCH: u32 = 1_000;

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["image"],
                "properties": {
                    "image": {"type": "string", "pattern": "^[a-z0-9./:-]+$", "maxLength": 255},
                    "replicas": {"type": "integer", "minimum": 0, "maximum": 100, "default": 1},
                    "mode": {"type": "string", "enum": ["Fast", "Safe"], "default": "Safe"},
                    "port": {"x-kubernetes-int-or-string": true},
                    "env": {"type": "object", "additionalProperties": {"type": "string"}},
                    "ports": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "items": {"type": "object", "required": ["name"], "properties": {
                            "name": {"type": "string"},
                            "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                            "protocol": {"type": "string", "default": "TCP"}
                        }}
                    }
                }
            },
            "status": {"type": "object", "properties": {
                "phase": {"type": "string"},
                "observedGeneration": {"type": "integer"}
            }}
        }
    })
}

fn object() -> Value {
    json!({
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w-1", "namespace": "default", "labels": {"app": "web", "tier": "front"},
                     "uid": "0c3f2a6e-3d5b-4a0e-9a51-1c3a2f6d9e10", "resourceVersion": "12345",
                     "creationTimestamp": "2024-05-01T12:00:00Z", "generation": 1},
        "spec": {"image": "registry.example.com/web:1.2.3", "replicas": 3, "port": "http",
                 "env": {"A": "1", "B": "2"},
                 "ports": [{"name": "http", "port": 80}, {"name": "https", "port": 443}]},
        "status": {"phase": "Ready", "observedGeneration": 1}
    })
}

/// The fastest per-object time, in microseconds, of running `f` on a fresh clone of `start`.
fn measure(start: &Value, f: &dyn Fn(&mut Value)) -> f64 {
    (0..BATCHES)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..PER_BATCH {
                let mut obj = start.clone();
                f(&mut obj);
                std::hint::black_box(obj);
            }
            t.elapsed().as_secs_f64() * 1e6 / f64::from(PER_BATCH)
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let schema = Structural::new(&schema()).expect("schema compiles");
    let request = object();
    let mut stored = object();
    normalize(&schema, &mut stored, Source::Storage).expect("normalizes");
    default(&schema, &mut stored);
    let mut changed = object();
    changed["spec"]["replicas"] = json!(4);

    let clone = measure(&request, &|_| {});
    let create = measure(&request, &|o| {
        let unknown = normalize(&schema, o, Source::Request).expect("normalizes");
        default(&schema, o);
        let errors = validate(&schema, o);
        assert!(unknown.is_empty() && errors.is_empty());
    });
    let update = measure(&changed, &|o| {
        normalize(&schema, o, Source::Request).expect("normalizes");
        default(&schema, o);
        assert!(validate_update(&schema, o, &stored).is_empty());
    });
    let normalize_only = measure(&request, &|o| {
        normalize(&schema, o, Source::Request).expect("normalizes");
    });
    let default_only = measure(&stored, &|o| default(&schema, o));
    let validate_only = measure(&stored, &|o| {
        std::hint::black_box(validate(&schema, o));
    });

    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    println!(
        "{profile} build, {} bytes of JSON per object, fastest of {BATCHES} batches of {PER_BATCH}",
        request.to_string().len()
    );
    println!("clone only:                                {clone:7.2} us");
    println!("create (normalize + default + validate):   {create:7.2} us, clone included");
    println!("update (normalize + default + ratcheted):  {update:7.2} us, clone included");
    println!("  normalize:                               {normalize_only:7.2} us, clone included");
    println!("  default:                                 {default_only:7.2} us, clone included");
    println!("  validate:                                {validate_only:7.2} us, clone included");
}
