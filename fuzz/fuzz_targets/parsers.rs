//! Every other parser: the first byte picks one, the rest is its input. The same entry points
//! run on stable in the test command (`pkg/controlplane/tests/fuzz.rs`).

#![no_main]

type Entry = fn(&[u8]);

const PARSERS: &[Entry] = &[
    genplane_controlplane::crd::schema::exercise_schema,
    genplane_apimachinery::fuzzing::selectors,
    genplane_apimachinery::fuzzing::durations,
    genplane_storage::continue_token::exercise,
    genplane_apiserver::request_info::exercise,
    genplane_api::core::configmap::exercise_watch_stream,
    genplane_controlplane::conversion::exercise,
    genplane_audit::policy::exercise,
    genplane_storage_value::config::exercise,
    genplane_authentication::token_file::exercise,
    genplane_api::networkregistry::networkclaim::exercise,
];

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Some((&which, input)) = data.split_first() {
        PARSERS[usize::from(which) % PARSERS.len()](input);
    }
});
