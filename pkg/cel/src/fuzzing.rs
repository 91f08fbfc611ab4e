//! One entry point for fuzzers of rule compilation and evaluation: arbitrary bytes as a rule
//! (and a `messageExpression`) of a small schema, compiled as when a CRD is written and, where
//! it compiles, run against a few objects on create and on update.
//!
//! Whatever the input, compiling must answer with compiled rules or field errors at the rule,
//! and validating with field errors: never a panic, never a stack overflow (which aborts the
//! process). The cargo-fuzz target `fuzz/fuzz_targets/cel_rules.rs` and a stable test that
//! generates hostile inputs (`pkg/cel/tests/rule_fuzz.rs`) both call [`exercise`].

use genplane_apimachinery::validation::field::Path;
use serde_json::{Value, json};

use crate::Rules;

/// The schema a fuzzed rule is declared on: at `spec`, whose fields cover the types rules see.
fn schema(rule: Value) -> Value {
    json!({
        "type": "object",
        "properties": {"spec": {
            "type": "object",
            "x-kubernetes-validations": [rule],
            "properties": {
                "n": {"type": "integer"},
                "f": {"type": "number"},
                "s": {"type": "string", "maxLength": 64},
                "b": {"type": "boolean"},
                "t": {"type": "string", "format": "date-time"},
                "d": {"type": "string", "format": "duration"},
                "l": {"type": "array", "maxItems": 8, "items": {"type": "integer"}},
                "set": {"type": "array", "maxItems": 8, "x-kubernetes-list-type": "set", "items": {"type": "string", "maxLength": 8}},
                "m": {"type": "object", "maxProperties": 8, "additionalProperties": {"type": "string", "maxLength": 8}},
                "o": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "q": {"x-kubernetes-int-or-string": true},
            },
        }},
    })
}

/// The objects rules run against: each is validated as created, and as an update of the next.
fn objects() -> [Value; 3] {
    [
        json!({"spec": {}}),
        json!({"spec": {
            "n": 3, "f": 1.5, "s": "abc", "b": true, "t": "2026-01-01T00:00:00Z", "d": "1h",
            "l": [1, 2, 3], "set": ["a", "b"], "m": {"k": "v"}, "o": {"a": {"b": [1, {"c": null}]}},
            "q": "50%",
        }}),
        json!({"spec": {
            "n": -9223372036854775808_i64, "f": -0.0, "s": "ünï\u{0}", "b": false, "t": "bad",
            "d": "-1.5s", "l": [], "set": [], "m": {}, "o": {}, "q": 7,
        }}),
    ]
}

/// Compiles and runs one arbitrary input: the first byte picks options (bit 0: with
/// `optionalOldSelf`; bit 1: with `message`), the rest is the rule and, after a NUL byte, a
/// `messageExpression`. Text that is not UTF-8 is read lossily.
///
/// # Panics
///
/// When a compile error is not at the rule's own fields: that is a bug being hunted, as any
/// panic that escapes compilation or validation is.
pub fn exercise(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let (rule, message_expression) = match text.split_once('\0') {
        Some((r, m)) => (r, Some(m)),
        None => (text.as_ref(), None),
    };
    let mut validation = json!({"rule": rule});
    if let Some(m) = message_expression {
        validation["messageExpression"] = json!(m);
    }
    if flags & 1 == 1 {
        validation["optionalOldSelf"] = json!(true);
    }
    if flags & 2 == 2 {
        validation["message"] = json!("fuzzed");
    }
    let path = Path::new("spec")
        .child("versions")
        .index(0)
        .child("schema")
        .child("openAPIV3Schema");
    let (rules, errors) = Rules::compile(&schema(validation), &path);
    let at =
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].";
    for error in errors.iter() {
        assert!(
            error.field.as_str().starts_with(at),
            "a compile error outside the rule: {error}"
        );
    }
    if rules.is_empty() {
        return;
    }
    let objects = objects();
    for (i, new) in objects.iter().enumerate() {
        let _ = rules.validate_with_warnings(new, None);
        let old = &objects[(i + 1) % objects.len()];
        let _ = rules.validate_with_warnings(new, Some(old));
    }
}
