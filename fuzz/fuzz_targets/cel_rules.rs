//! CRD validation rules: arbitrary bytes as an `x-kubernetes-validations` rule (and
//! `messageExpression`) of a small schema, compiled and run against a few objects. See
//! `genplane_cel::fuzzing::exercise`.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    genplane_cel::fuzzing::exercise(data);
});
