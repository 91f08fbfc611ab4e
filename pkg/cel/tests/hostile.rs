//! Rules written to hurt the server (issue #21): expressions too large, too deep or too long
//! are refused when the CRD is written, with the limit in the message; expressions at the
//! limits compile, run and are dropped on a thread with a tokio worker's 2 MiB stack, in a debug
//! build. Also the unary operator runs and the optional library, as rules see them.

#![allow(clippy::unwrap_used)]

use genplane_apimachinery::validation::field::Path;
use genplane_cel::Rules;
use serde_json::{Value, json};

/// A tokio worker's stack.
const WORKER_STACK: usize = 2 * 1024 * 1024;

/// Runs `f` on a thread with a worker's stack.
fn on_worker_stack<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    std::thread::Builder::new()
        .stack_size(WORKER_STACK)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

fn root() -> Path {
    Path::new("spec")
        .child("versions")
        .index(0)
        .child("schema")
        .child("openAPIV3Schema")
}

/// A schema whose root carries one rule (and a messageExpression, if given).
fn schema(rule: &str, message_expression: Option<&str>) -> Value {
    let mut validation = json!({"rule": rule});
    if let Some(m) = message_expression {
        validation["messageExpression"] = json!(m);
    }
    json!({
        "type": "object",
        "x-kubernetes-validations": [validation],
        "properties": {
            "n": {"type": "integer"},
            "s": {"type": "string", "maxLength": 10},
            "allowed": {"type": "boolean"},
            "l": {"type": "array", "maxItems": 3, "items": {"type": "integer"}},
            "m": {"type": "object", "maxProperties": 3, "additionalProperties": {"type": "integer"}},
            "o": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        },
    })
}

fn object() -> Value {
    json!({"n": 1, "s": "abc", "allowed": true, "l": [1, 2], "m": {"k": 1}, "o": {"a": {"b": 1}}})
}

/// Compiles a one-rule schema on a worker's stack: the compile errors, rendered.
fn compile_errors(rule: String, message_expression: Option<String>) -> Vec<String> {
    on_worker_stack(move || {
        let (_, errs) = Rules::compile(&schema(&rule, message_expression.as_deref()), &root());
        errs.iter().map(ToString::to_string).collect()
    })
}

fn assert_refused(errors: &[String], field: &str, limit_message: &str) {
    assert_eq!(errors.len(), 1, "{errors:?}");
    let at = format!(
        "spec.versions[0].schema.openAPIV3Schema.x-kubernetes-validations[0].{field}: Invalid value"
    );
    assert!(errors[0].starts_with(&at), "{}", errors[0]);
    assert!(
        errors[0].contains(limit_message),
        "{}",
        &errors[0][errors[0].len().saturating_sub(300)..]
    );
}

#[test]
fn a_long_flat_rule_is_refused_with_the_limit() {
    let rule = vec!["1"; 5_000].join(" + ") + " > 0";
    assert_refused(
        &compile_errors(rule, None),
        "rule",
        "compilation failed: ERROR: <input>:-1:0: expression recursion limit exceeded: 250",
    );
    // every operator of a left-recursive chain counts
    for op in [
        "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "in", ".",
    ] {
        let rule = vec!["a"; 1_000].join(&format!(" {op} "));
        let errors = compile_errors(rule, None);
        assert!(
            errors[0].contains("expression recursion limit exceeded: 250"),
            "{op}: {errors:?}"
        );
    }
}

#[test]
fn deep_nesting_is_refused_with_the_limit() {
    for (open, close) in [
        ("[", "]"),
        ("(", ")"),
        ("{1:", "}"),
        ("f(", ")"),
        ("a[", "]"),
    ] {
        let rule = format!("{}1{} == 1", open.repeat(10_000), close.repeat(10_000));
        assert_refused(
            &compile_errors(rule, None),
            "rule",
            "expression nesting limit exceeded: 64",
        );
    }
    assert_refused(
        &compile_errors("(".repeat(100_000), None),
        "rule",
        "expression nesting limit exceeded: 64",
    );
    let conditionals = format!("{}true", "self.n > 0 ? true : ".repeat(1_000));
    assert_refused(
        &compile_errors(conditionals, None),
        "rule",
        "expression nesting limit exceeded: 64",
    );
}

#[test]
fn an_oversized_rule_is_refused_with_the_limit() {
    let rule = format!("self.s == '{}'", "x".repeat(100_000));
    assert_refused(
        &compile_errors(rule, None),
        "rule",
        "expression code point size exceeds limit: size: 100012, limit 100000",
    );
}

#[test]
fn message_expressions_have_the_same_limits() {
    let message = vec!["'a'"; 5_000].join(" + ");
    assert_refused(
        &compile_errors("true".to_owned(), Some(message)),
        "messageExpression",
        "messageExpression compilation failed: ERROR: <input>:-1:0: expression recursion limit exceeded: 250",
    );
    let message = format!("{}'a'{}", "[".repeat(10_000), "]".repeat(10_000));
    assert_refused(
        &compile_errors("true".to_owned(), Some(message)),
        "messageExpression",
        "expression nesting limit exceeded: 64",
    );
}

/// Rules exactly at the limits: each compiles, runs on an object (passing or failing, but
/// answering) and is dropped, on a worker's stack.
fn at_the_limits() -> Vec<String> {
    let nest = |open: &str, inner: &str, close: &str, n: usize| {
        format!("{}{inner}{}", open.repeat(n), close.repeat(n))
    };
    let mut rules = vec![
        // 64 brackets of each kind
        format!("size({}) == 1", nest("[", "1", "]", 63)),
        format!("{} == 1", nest("(", "self.n", ")", 64)),
        format!("size({}) == 1", nest("{1:", "1", "}", 63)),
        format!("{} > 0", nest("int(", "self.n", ")", 64)),
        format!("{}0{} > 0", "self.l[".repeat(63), "]".repeat(63)),
        // 63 conditionals (each nests the next)
        format!("{}true", "self.n > 0 ? true : ".repeat(63)),
        // chains of 250 operators
        format!("self.n{} > 0", " + 1".repeat(248)),
        format!("self.n{} > 0", " * 1".repeat(248)),
        format!(
            "self.n{} < 0 || self.n{} > 0",
            " - 1".repeat(246),
            " / 1".repeat(246)
        ),
        format!("self.o{} == 1", ".a".repeat(248)),
        format!("self.allowed{}", " == true".repeat(249)),
        format!("self.l[0]{}", " in [1]".repeat(245)),
        // long, flat, cheap chains of logical operators
        vec!["self.allowed"; 5_000].join(" && "),
        vec!["!self.allowed"; 5_000].join(" || ") + " || true",
        // macros nested 20 deep (their cost limits how far they go)
        {
            let mut r = "v0 > 0".to_owned();
            for i in (0..20).rev() {
                r = format!("[1].all(v{i}, {r})");
            }
            r
        },
        // optionals nested
        format!(
            "{}.orValue(0) == 1",
            nest("optional.of(", "self.n", ")", 60)
        ),
    ];
    // long unary runs
    rules.push(format!("{}self.allowed", "!".repeat(50_000)));
    rules.push(format!("{}self.n == self.n", "-".repeat(50_000)));
    rules
}

#[test]
fn rules_at_the_limits_compile_run_and_drop_on_a_worker_stack() {
    for rule in at_the_limits() {
        let shown: String = rule.chars().take(60).collect();
        let errors = on_worker_stack(move || {
            let (rules, errs) = Rules::compile(&schema(&rule, Some("'at the limits'")), &root());
            let errs: Vec<String> = errs.iter().map(ToString::to_string).collect();
            let ran = rules.validate(&object(), Some(&object()));
            drop(rules);
            (
                errs,
                ran.iter().map(ToString::to_string).collect::<Vec<_>>(),
            )
        });
        assert!(errors.0.is_empty(), "{shown}: {:?}", errors.0);
        for e in &errors.1 {
            assert!(!e.contains("internal error"), "{shown}: {e}");
        }
    }
}

fn outcome(rule: &str, object: Value, old: Option<Value>) -> Vec<String> {
    let (rules, errs) = Rules::compile(&schema(rule, None), &root());
    assert!(errs.is_empty(), "{rule}: {errs}");
    rules
        .validate(&object, old.as_ref())
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn even_runs_of_unary_operators_cancel_out_as_in_cel_go() {
    let allowed = json!({"allowed": true, "n": 3});
    let denied = json!({"allowed": false, "n": 3});
    assert!(outcome("!!self.allowed", allowed.clone(), None).is_empty());
    assert_eq!(outcome("!!self.allowed", denied.clone(), None).len(), 1);
    assert_eq!(outcome("!!!self.allowed", allowed.clone(), None).len(), 1);
    assert!(outcome("!!!self.allowed", denied.clone(), None).is_empty());
    assert!(outcome("! !self.allowed", allowed.clone(), None).is_empty());
    assert!(outcome("--self.n == self.n", allowed.clone(), None).is_empty());
    assert!(outcome("---self.n == -self.n", allowed.clone(), None).is_empty());
    assert!(
        outcome(
            "--1 == 1 && -(-1) == 1 && 1 - -1 == 2",
            allowed.clone(),
            None
        )
        .is_empty()
    );
    assert!(outcome("self.n - --self.n == 0", allowed, None).is_empty());
}

#[test]
fn the_optional_library_works_in_rules() {
    let o = object();
    for rule in [
        // macros
        "optional.of(1).optMap(v, v + 1).value() == 2",
        "!optional.none().optMap(v, v + 1).hasValue()",
        "optional.of(1).optFlatMap(v, optional.of(v + 1)).value() == 2",
        "!optional.of(1).optFlatMap(v, optional.none()).hasValue()",
        "self.?m.optMap(m, m.k).orValue(0) == 1",
        // functions
        "optional.of(1).hasValue() && !optional.none().hasValue()",
        "optional.none().or(optional.of(2)).value() == 2",
        "optional.of(1).or(optional.of(2)).value() == 1",
        "optional.none().orValue(3) == 3",
        "!optional.ofNonZeroValue(0).hasValue() && optional.ofNonZeroValue('x').value() == 'x'",
        // or/orValue evaluate their argument only when needed, as cel-go's
        "self.?n.orValue(self.o.missing) == 1",
        "self.?n.or(self.o.missing).value() == 1",
        // selection and indexing
        "self.?n.orValue(0) == 1",
        "self.o.?zz.orValue(7) == 7",
        "self.?o.?a.?b.orValue(0) == 1",
        "self.?o.?zz.?b.orValue(5) == 5",
        "self.m[?'k'].orValue(0) == 1 && self.m[?'zz'].orValue(5) == 5",
        "self.l[?0].orValue(0) == 1 && self.l[?9].orValue(5) == 5",
        // optional entries and elements
        "{?'a': optional.of(1), ?'b': optional.none()} == {'a': 1}",
        "[?optional.of(1), ?optional.none(), 2] == [1, 2]",
        "optional.unwrap([optional.of(1), optional.none()]) == [1]",
        "[optional.none(), optional.of(3)].unwrapOpt() == [3]",
    ] {
        assert!(outcome(rule, o.clone(), None).is_empty(), "{rule}");
    }
    // a macro variable must be an identifier
    let (_, errs) = Rules::compile(
        &schema("optional.of(1).optMap(1, 2).hasValue()", None),
        &root(),
    );
    assert!(
        errs.to_string()
            .contains("optMap() variable name must be a simple identifier"),
        "{errs}"
    );
}

#[test]
fn optional_old_self_with_opt_map_on_create_and_update() {
    let schema = json!({
        "type": "object",
        "properties": {"mode": {
            "type": "string",
            "x-kubernetes-validations": [{
                "rule": "oldSelf.optMap(o, o == self).orValue(true)",
                "message": "mode is immutable",
                "optionalOldSelf": true,
            }],
        }},
    });
    let (rules, errs) = Rules::compile(&schema, &root());
    assert!(errs.is_empty(), "{errs}");
    let check = |new: Value, old: Option<Value>| -> Vec<String> {
        rules
            .validate(&new, old.as_ref())
            .iter()
            .map(ToString::to_string)
            .collect()
    };
    // create: no old value, the rule holds
    assert!(check(json!({"mode": "fast"}), None).is_empty());
    // update: unchanged holds, changed fails
    assert!(check(json!({"mode": "fast"}), Some(json!({"mode": "fast"}))).is_empty());
    assert_eq!(
        check(json!({"mode": "safe"}), Some(json!({"mode": "fast"}))),
        vec![r#"mode: Invalid value: "string": mode is immutable"#]
    );
}

#[test]
fn negating_the_smallest_int_is_an_overflow_error() {
    // found by the fuzz test: the interpreter panicked in a debug build (and wrapped in a
    // release build); cel-go reports an integer overflow
    let errors = outcome("-self.n > 0", json!({"n": i64::MIN}), None);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].contains("integer overflow"), "{}", errors[0]);
    assert!(outcome("-self.n == -1 && -(1.5) < 0.0", json!({"n": 1}), None).is_empty());
}
