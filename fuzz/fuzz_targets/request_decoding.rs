//! Request decoding: arbitrary bytes as a create, update or merge-patch body of any served
//! resource, in any media type and `fieldValidation` mode. See
//! `genplane_apiserver::request_body::exercise`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    genplane_apiserver::request_body::exercise(data);
});
