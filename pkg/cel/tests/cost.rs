//! The actual cost of an evaluation (issue #37, item 2): every iteration is counted, whatever
//! the comprehension ranges over, and functions that build large values count what they build,
//! so that an expression past the per-call limit is cancelled with cel-go's error, soon, on
//! every evaluation path: a program over JSON values, over prepared values, and the CRD rules.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use genplane_apimachinery::validation::field::Path;
use genplane_cel::{Activation, Environment, Rules, VarType};
use serde_json::json;

/// How long a cancelled evaluation may take here (a debug build on a shared machine): far more
/// than it takes (well under a second), far less than the uncounted evaluation took.
const SOON: Duration = Duration::from_secs(15);

/// `[1, ..., 10].all(a, [1, ..., 10].all(b, ... a + b + ... > 0))`, `levels` deep: 10^levels
/// iterations.
fn nested_literal_comprehensions(levels: usize) -> String {
    let names = ["a", "b", "c", "d", "e", "f", "g"];
    let list = "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]";
    let mut source = format!("{} > 0", names[..levels].join(" + "));
    for name in names[..levels].iter().rev() {
        source = format!("{list}.all({name}, {source})");
    }
    source
}

fn environment() -> Environment<'static> {
    Environment::new().variable("object", VarType::Dyn)
}

/// Evaluates `source` with `object` bound to `{}`, both ways the admission plugins do: the
/// error of each, and how long the slower took.
fn evaluate_both_ways(source: &str) -> (String, String, Duration) {
    let environment = environment();
    let program = environment
        .compile(source, &Path::new("expression"))
        .unwrap();
    let object = json!({});
    let started = Instant::now();
    let plain = program.evaluate(&Activation::new().bind("object", &object));
    let prepared = environment.prepare(Activation::new().bind("object", &object));
    let prepared = program.evaluate_prepared(&prepared, &[]);
    let took = started.elapsed();
    let error = |r: Result<_, genplane_cel::Error>| match r {
        Ok(value) => format!("evaluated to {value:?}"),
        Err(e) => e.to_string(),
    };
    (error(plain), error(prepared), took)
}

/// Asserts that `source` is cancelled past the limit both ways, soon.
fn assert_cancelled(source: &str) {
    let (plain, prepared, took) = evaluate_both_ways(source);
    assert_eq!(plain, CANCELLED, "{source}");
    assert_eq!(prepared, CANCELLED, "{source}");
    assert!(took < SOON, "{source}: took {took:?}");
}

/// cel-go's words for an evaluation past its limit.
const CANCELLED: &str = "operation cancelled: actual cost limit exceeded";

#[test]
fn nested_comprehensions_over_literal_lists_are_cancelled() {
    // the expression: 10^7 iterations, which ran for 16-20 s and then allowed the write
    assert_cancelled(&nested_literal_comprehensions(7));
}

#[test]
fn comprehensions_under_the_limit_still_run() {
    // 10^3 iterations of a small body: far under the limit
    let (plain, prepared, _) = evaluate_both_ways(&nested_literal_comprehensions(3));
    assert_eq!(plain, "evaluated to Bool(true)");
    assert_eq!(prepared, "evaluated to Bool(true)");
}

#[test]
fn comprehensions_over_computed_lists_are_cancelled() {
    // ranges the estimate cannot size: a generated list, the result of map
    for source in [
        "lists.range(1000).all(a, lists.range(1000).all(b, a + b >= 0))",
        "[1, 2, 3].map(x, lists.range(100)).all(l, l.all(a, lists.range(10000).exists(b, b < 0) || a >= 0))",
    ] {
        assert_cancelled(source);
    }
}

#[test]
fn functions_that_build_large_values_count_what_they_build() {
    for source in [
        // 2 * 10^7 integers
        "size(lists.range(20000000)) > 0",
        // an empty pattern matches around every character: the length grows fourfold each
        // time, to about 50 million characters
        "'abc'.replace('', 'abc').replace('', 'abc').replace('', 'abc').replace('', 'abc').replace('', 'abc').replace('', 'abc').replace('', 'abc').replace('', 'abc').replace('', 'abc').replace('', 'abc').replace('', 'abc').replace('', 'abc').size() > 0",
        // a precision of 20 million digits
        "'%.20000000f'.format([1.0]).size() > 0",
    ] {
        assert_cancelled(source);
    }
    // what stays small runs
    let (plain, _, _) = evaluate_both_ways(
        "size(lists.range(10)) == 10 && 'a-b'.replace('-', '+') == 'a+b' && 'a-b-c'.replace('-', '+', -1) == 'a+b+c' && 'a-b-c'.replace('-', '+', 1) == 'a+b-c' && '%.2f'.format([1.0]) == '1.00'",
    );
    assert_eq!(plain, "evaluated to Bool(true)");
}

#[test]
fn evaluations_the_count_underrates_are_cancelled_after_a_second() {
    // the interpreter copies the whole map at every key: quadratic work that neither the
    // estimate nor the count sees (a few thousand units), minutes in a debug build
    let data: serde_json::Map<String, serde_json::Value> = (0..8000)
        .map(|i| (format!("key-{i}"), json!(format!("value-{i}"))))
        .collect();
    let object = json!({"data": data});
    let environment = environment();
    let program = environment
        .compile(
            "object.data.all(k, object.data[k].startsWith('value-'))",
            &Path::new("expression"),
        )
        .unwrap();
    let started = Instant::now();
    let answer = program.evaluate(&Activation::new().bind("object", &object));
    let took = started.elapsed();
    assert_eq!(answer.map_err(|e| e.to_string()), Err(CANCELLED.to_owned()));
    assert!(took < SOON, "took {took:?}");
}

#[test]
fn crd_rules_past_the_limit_are_cancelled_when_they_run() {
    // the estimate cannot size a generated range, so the CRD is accepted; the rule is
    // cancelled when it runs
    let schema = json!({
        "type": "object",
        "properties": {"spec": {
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "x-kubernetes-validations": [{
                "rule": "lists.range(1000).all(a, lists.range(1000).all(b, a + b + self.n >= 0))",
                "message": "never negative",
            }],
        }},
    });
    let (rules, errors) = Rules::compile(&schema, &Path::new("openAPIV3Schema"));
    assert!(errors.is_empty(), "{errors:?}");
    let started = Instant::now();
    let errors = rules.validate(&json!({"spec": {"n": 1}}), None);
    let took = started.elapsed();
    let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        errors,
        [
            "spec: Invalid value: \"object\": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: never negative"
        ]
    );
    assert!(took < SOON, "took {took:?}");
}

/// How long a cost unit takes, for the inline allowance of the admission plugins (how much an
/// evaluation may spend on a runtime worker before it moves off). Run in a release build:
/// `cargo test --release -p genplane-cel --test cost -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement, not a test: run by hand in a release build"]
fn measure_time_per_cost_unit() {
    let environment = environment();
    let items: Vec<i64> = (0..2000).collect();
    let names: serde_json::Map<String, serde_json::Value> = (0..2000)
        .map(|i| (format!("key-{i}"), json!(format!("value-{i}"))))
        .collect();
    let small: Vec<i64> = (0..100).collect();
    let object = json!({"items": items, "small": small, "data": names, "name": "x".repeat(100)});
    for source in [
        nested_literal_comprehensions(3),
        nested_literal_comprehensions(4),
        "object.items.all(i, i >= 0)".to_owned(),
        "object.small.exists(i, object.small.exists(j, i + j > 5000))".to_owned(),
        "object.data.all(k, object.data[k].startsWith('value-'))".to_owned(),
        "object.items.map(i, i * 2).size() > 0".to_owned(),
        "object.items.filter(i, i % 2 == 0).size() > 0".to_owned(),
        "lists.range(300).all(a, lists.range(300).all(b, a + b >= 0))".to_owned(),
        "object.name.matches('^x+$') && object.name.size() > 10".to_owned(),
    ] {
        let program = environment
            .compile(&source, &Path::new("expression"))
            .unwrap();
        let activation = Activation::new().bind("object", &object);
        let prepared = environment.prepare(activation.clone());
        // direct evaluation where it answers, else the interpreter over prepared values
        let mut runs = 0u32;
        let mut spent = 0u64;
        let started = Instant::now();
        while started.elapsed() < Duration::from_millis(500) {
            let mut budget = genplane_cel::Budget::unlimited();
            let vars = genplane_cel::DirectVars::new().bind("object", &object);
            match program.evaluate_direct(&vars, &mut budget) {
                Some(answer) => {
                    answer.unwrap();
                }
                None => {
                    program
                        .evaluate_prepared_within(&prepared, &[], &mut budget)
                        .unwrap();
                }
            }
            spent += u64::MAX - budget.remaining();
            runs += 1;
        }
        let took = started.elapsed();
        eprintln!(
            "{:>8.1} ns/unit  {:>9} units/run  {:>9.1} us/run  {}",
            took.as_nanos() as f64 / spent.max(1) as f64,
            spent / u64::from(runs),
            took.as_micros() as f64 / f64::from(runs),
            source.chars().take(70).collect::<String>(),
        );
    }
}
