//! A driver for profiling server-side apply against an update of the same object, in process:
//! the 50-field ConfigMap of `hack/bench/apply.sh`, applied again and again by one manager with
//! `force` (one value changing each time), and replaced by an update. Ignored by default; run
//! with `cargo test --release -p genplane-merge --test apply_profile -- --ignored
//! --nocapture` (or under `valgrind --tool=callgrind`).

#![allow(clippy::unwrap_used)]

use std::time::Instant;

use genplane_apiserver::openapi::builder::{all_served, documents, type_model};
use genplane_merge::fieldpath::Set;
use genplane_merge::managed::{self, Writer};
use serde_json::{Map, Value, json};

fn configmap(n: usize) -> Value {
    let mut data = Map::new();
    for i in 0..50 {
        data.insert(format!("key-{i:02}"), format!("value-{i:02}").into());
    }
    data.insert("key-00".into(), n.to_string().into());
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "ns"}, "data": data})
}

fn stored(mut object: Value, n: usize) -> Value {
    let metadata = object["metadata"].as_object_mut().unwrap();
    metadata.insert("uid".into(), json!("0d9a4f6c-0000-0000-0000-000000000000"));
    metadata.insert("resourceVersion".into(), json!(n.to_string()));
    metadata.insert("creationTimestamp".into(), json!("2026-01-01T00:00:00Z"));
    object
}

#[test]
#[ignore = "a profiling driver, not a test"]
fn apply_against_update() {
    let rounds: usize = 500;
    let schema = type_model(&documents(&all_served())).unwrap();
    let writer = |manager: &str| Writer {
        schema: &schema,
        ty: schema.kind("", "v1", "ConfigMap").unwrap(),
        manager: manager.to_owned(),
        api_version: "v1".into(),
        subresource: String::new(),
        time: "2026-01-01T00:00:00Z".into(),
        ignored: Set::new(),
    };
    let creator = writer("creator");
    let mut created = stored(configmap(0), 1);
    managed::update(&creator, None, &mut created).unwrap();

    let updater = writer("updater");
    let mut live = created.clone();
    let start = Instant::now();
    for n in 1..=rounds {
        let mut new = stored(configmap(n), n);
        managed::update(&updater, Some(&live), &mut new).unwrap();
        live = new;
    }
    let update = start.elapsed() / rounds as u32;

    let applier = writer("bench");
    let mut live = created;
    let start = Instant::now();
    for n in 1..=rounds {
        let (applied, _) = managed::apply(&applier, Some(&live), &configmap(n), true).unwrap();
        live = stored(applied, n);
    }
    let apply = start.elapsed() / rounds as u32;
    println!(
        "update {update:?}/op, apply {apply:?}/op, ratio {:.2}",
        apply.as_secs_f64() / update.as_secs_f64()
    );
}
