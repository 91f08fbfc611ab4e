//! Request decoding: arbitrary bytes as a create, update or merge-patch body of any served
//! resource, in any media type and `fieldValidation` mode, CustomResourceDefinitions checked by
//! their real strategy. See `genplane_controlplane::crd::schema::exercise_bodies`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    genplane_controlplane::crd::schema::exercise_bodies(data);
});
