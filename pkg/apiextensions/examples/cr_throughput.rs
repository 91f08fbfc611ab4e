//! Micro-measurement: what decoding and validating one small custom resource costs
//! (prune + coerce metadata, default, validate), per object.
//!
//! `cargo run -p genplane-apiextensions --example cr_throughput`

use std::time::Instant;

use genplane_apiextensions::defaulting::default;
use genplane_apiextensions::pruning::{Source, normalize};
use genplane_apiextensions::schema::Structural;
use genplane_apiextensions::validation::{validate, validate_update};
use serde_json::{Value, json};

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

fn main() {
    let iterations: u32 = 20_000;
    let schema = Structural::new(&schema()).expect("schema compiles");
    let template = object();

    let start = Instant::now();
    for _ in 0..iterations {
        std::hint::black_box(template.clone());
    }
    let clone = start.elapsed().as_secs_f64() / f64::from(iterations);

    let start = Instant::now();
    for _ in 0..iterations {
        let mut obj = template.clone();
        let unknown = normalize(&schema, &mut obj, Source::Request).expect("normalizes");
        default(&schema, &mut obj);
        let errors = validate(&schema, &obj);
        assert!(unknown.is_empty() && errors.is_empty());
        std::hint::black_box(obj);
    }
    let create = start.elapsed().as_secs_f64() / f64::from(iterations);

    let old = {
        let mut o = template.clone();
        normalize(&schema, &mut o, Source::Storage).expect("normalizes");
        default(&schema, &mut o);
        o
    };
    let start = Instant::now();
    for _ in 0..iterations {
        let mut obj = template.clone();
        obj["spec"]["replicas"] = json!(4);
        normalize(&schema, &mut obj, Source::Request).expect("normalizes");
        default(&schema, &mut obj);
        let errors = validate_update(&schema, &obj, &old);
        assert!(errors.is_empty());
        std::hint::black_box(obj);
    }
    let update = start.elapsed().as_secs_f64() / f64::from(iterations);

    // Each stage alone, on an object already normalized and defaulted.
    let ready = old.clone();
    let stage = |f: &dyn Fn(&mut Value)| {
        let start = Instant::now();
        for _ in 0..iterations {
            let mut obj = ready.clone();
            f(&mut obj);
            std::hint::black_box(obj);
        }
        (start.elapsed().as_secs_f64() / f64::from(iterations) - clone) * 1e6
    };
    let t_normalize = stage(&|o| {
        normalize(&schema, o, Source::Request).expect("normalizes");
    });
    let t_default = stage(&|o| default(&schema, o));
    let t_validate = stage(&|o| {
        std::hint::black_box(validate(&schema, o));
    });
    let t_update = stage(&|o| {
        std::hint::black_box(validate_update(&schema, o, &old));
    });

    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    println!(
        "{profile} build, {iterations} iterations, {} bytes of JSON per object",
        template.to_string().len()
    );
    println!(
        "clone of the object:                        {:7.2} us",
        clone * 1e6
    );
    println!(
        "create: normalize + default + validate:     {:7.2} us (clone included)",
        create * 1e6
    );
    println!(
        "update: normalize + default + ratcheted:    {:7.2} us (clone included)",
        update * 1e6
    );
    println!("  normalize (prune + metadata):             {t_normalize:7.2} us");
    println!("  default:                                  {t_default:7.2} us");
    println!("  validate:                                 {t_validate:7.2} us");
    println!("  validate_update (unchanged object):       {t_update:7.2} us");
}
