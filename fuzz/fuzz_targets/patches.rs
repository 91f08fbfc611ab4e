//! Both patch engines: arbitrary bytes as a live object, a strategic merge patch and an
//! applied configuration of a built-in kind. See `genplane_merge::fuzzing::exercise`.

#![no_main]

use std::sync::OnceLock;

use genplane_apiserver::openapi::builder::{all_served, documents, type_model};
use genplane_merge::{Schema, TypeRef};

fn builtin() -> &'static (Schema, Vec<TypeRef>) {
    static BUILTIN: OnceLock<(Schema, Vec<TypeRef>)> = OnceLock::new();
    BUILTIN.get_or_init(|| {
        let catalog = genplane_api::catalog::all();
        let schema = type_model(&documents(&all_served())).unwrap_or_default();
        let kinds = catalog
            .iter()
            .filter_map(|info| schema.kind(info.group, info.version, info.kind))
            .collect();
        (schema, kinds)
    })
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let (schema, kinds) = builtin();
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let ty = &kinds[usize::from(which) % kinds.len()];
    genplane_merge::fuzzing::exercise(schema, ty, rest);
});
