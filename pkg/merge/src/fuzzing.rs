//! One entry point for fuzzers of both patch engines: arbitrary bytes as an object, a
//! strategic merge patch and an applied configuration of one kind.
//!
//! The input is a flags byte (bit 0: `force`) and then up to three JSON documents, one per line:
//! the live object, the strategic merge patch, the applied configuration. Whatever they hold,
//! the engines must answer with a result or an error, never a panic. The cargo-fuzz target
//! `fuzz/fuzz_targets/patches.rs` and a stable test that generates structured inputs both call
//! [`exercise`].

use serde_json::Value;

use crate::managed::{self, Writer};
use crate::schema::{Schema, TypeRef};
use crate::strategic;

/// Runs the strategic merge patch engine, managed-fields tracking of an update, and
/// server-side apply (by two managers in turn) over `data`, for objects of type `ty`.
pub fn exercise(schema: &Schema, ty: &TypeRef, data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let mut documents = text
        .splitn(3, '\n')
        .map(|line| serde_json::from_str::<Value>(line).ok());
    let live = documents.next().flatten();
    let patch = documents.next().flatten();
    let config = documents.next().flatten();
    let writer = |manager: &str| Writer {
        schema,
        ty: ty.clone(),
        manager: manager.to_owned(),
        api_version: "v1".to_owned(),
        subresource: String::new(),
        time: "2026-01-01T00:00:00Z".to_owned(),
        ignored: crate::fieldpath::Set::default(),
    };
    let mut current = live.clone();
    if let (Some(live), Some(patch)) = (&live, &patch)
        && let Ok(mut patched) = strategic::apply(live, patch, schema, ty)
    {
        let _ = managed::update(&writer("patcher"), Some(live), &mut patched);
        current = Some(patched);
    }
    if let Some(config) = &config {
        let force = flags & 1 == 1;
        if let Ok((applied, _)) = managed::apply(&writer("first"), current.as_ref(), config, force)
        {
            let _ = managed::apply(&writer("second"), Some(&applied), config, !force);
            let _ = managed::apply(
                &writer("first"),
                Some(&applied),
                &Value::Object(Default::default()),
                force,
            );
        }
    }
}
