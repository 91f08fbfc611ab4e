//! Expressions compiled without a CRD: the variables of an admission policy (`object`,
//! `oldObject`, `request`, `params`, ...), dynamic or typed by a schema, evaluated with JSON.

#![allow(clippy::unwrap_used)]

use genplane_apimachinery::validation::field::Path;
use genplane_cel::{Activation, CelValue, Environment, Error, ObjectType, VarType};
use serde_json::{Value, json};

/// An admission policy's variables, all dynamic.
fn policy_env() -> Environment<'static> {
    [
        "object",
        "oldObject",
        "request",
        "params",
        "namespaceObject",
        "variables",
    ]
    .into_iter()
    .fold(Environment::new(), |env, name| {
        env.variable(name, VarType::Dyn)
    })
}

fn at() -> Path {
    Path::new("spec")
        .child("validations")
        .index(0)
        .child("expression")
}

fn pod(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"foo": "bar", "items": [1, 2, 3]}
    })
}

/// Compiles `expression` with the policy's variables and evaluates it with `object` and a
/// CREATE request.
fn eval(expression: &str, object: &Value) -> Result<CelValue, Error> {
    let request = json!({"operation": "CREATE", "userInfo": {"username": "alice"}});
    let program = policy_env().compile(expression, &at())?;
    program.evaluate(
        &Activation::new()
            .bind("object", object)
            .bind("request", &request),
    )
}

#[test]
fn untyped_expressions_evaluate_over_json_objects() {
    let object = pod("xylophone");
    for (expression, want) in [
        ("object.metadata.name.startsWith('x')", true),
        ("object.metadata.name.startsWith('y')", false),
        ("has(object.spec.foo)", true),
        ("has(object.spec.missing)", false),
        ("request.operation == 'CREATE'", true),
        ("size(object.spec.items) < 10", true),
        ("object.spec.items.all(i, i > 0)", true),
        ("object.?spec.?missing.orValue('d') == 'd'", true),
        ("object.?spec.?foo.hasValue()", true),
        ("request.userInfo.username in ['alice', 'bob']", true),
    ] {
        assert_eq!(
            eval(expression, &object).unwrap(),
            CelValue::Bool(want),
            "{expression}"
        );
    }
}

#[test]
fn a_program_runs_again_with_other_values() {
    let program = policy_env()
        .compile("object.metadata.name.startsWith('x')", &at())
        .unwrap();
    for (name, want) in [("x1", true), ("a1", false), ("x2", true)] {
        let object = pod(name);
        let got = program
            .evaluate(&Activation::new().bind("object", &object))
            .unwrap();
        assert_eq!(got, CelValue::Bool(want), "{name}");
    }
}

#[test]
fn an_undeclared_reference_is_a_compile_error_at_the_callers_path() {
    let err = policy_env()
        .compile("objec.metadata.name == 'x'", &at())
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "spec.validations[0].expression: Invalid value: \"objec.metadata.name == 'x'\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'objec' (in container '')"
    );
    let cause = err.to_field_error().unwrap();
    assert_eq!(cause.field.as_str(), "spec.validations[0].expression");
    // `authorizer` is no policy variable unless declared
    let err = policy_env()
        .compile("authorizer.group('').check('get')", &at())
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("undeclared reference to 'authorizer'"),
        "{err}"
    );
    let with_authorizer = policy_env().variable("authorizer", VarType::Dyn);
    assert!(
        with_authorizer
            .compile("authorizer.group('') != null", &at())
            .is_ok()
    );
}

#[test]
fn a_syntax_error_is_a_compile_error_with_cel_gos_position() {
    let err = policy_env()
        .compile("object.metadata.name ==", &at())
        .unwrap_err();
    let Error::Compile { message, .. } = &err else {
        panic!("not a compile error: {err:?}");
    };
    assert!(message.starts_with("ERROR: <input>:1:"), "{message}");
    assert!(
        err.to_string().contains("compilation failed: ERROR"),
        "{err}"
    );
}

#[test]
fn an_expression_over_the_limits_does_not_compile() {
    let deep = format!("{}1{}", "(".repeat(100), ")".repeat(100));
    let err = policy_env().compile(&deep, &at()).unwrap_err();
    assert!(err.to_string().contains("ERROR: <input>:-1:0:"), "{err}");
}

#[test]
fn runtime_errors_use_cel_gos_words() {
    let object = pod("x");
    assert_eq!(
        eval("object.spec.nothere == 'x'", &object).unwrap_err(),
        Error::Evaluation("no such key: nothere".to_owned())
    );
    assert_eq!(
        eval("object.spec.items[1] / 0 == 1", &object).unwrap_err(),
        Error::Evaluation("division by zero".to_owned())
    );
    // declared but not bound
    assert_eq!(
        eval("params.max > 1", &object).unwrap_err(),
        Error::Evaluation("undeclared reference to 'params'".to_owned())
    );
}

#[test]
fn the_cost_limit_is_charged_on_the_actual_values() {
    let expression = "object.spec.items.all(a, object.spec.items.all(b, a != b || a == b))";
    let env = policy_env().cost_limit(1_000);
    let program = env.compile(expression, &at()).unwrap();
    let small = json!({"spec": {"items": [1, 2, 3]}});
    assert_eq!(
        program
            .evaluate(&Activation::new().bind("object", &small))
            .unwrap(),
        CelValue::Bool(true)
    );
    let items: Vec<i64> = (0..100).collect();
    let large = json!({"spec": {"items": items}});
    let err = program
        .evaluate(&Activation::new().bind("object", &large))
        .unwrap_err();
    let Error::CostLimitExceeded { cost, limit } = err else {
        panic!("not over the limit: {err:?}");
    };
    assert_eq!(limit, 1_000);
    assert!(cost > 10_000, "100 x 100 iterations cost {cost}");
    assert_eq!(
        err.to_string(),
        "operation cancelled: actual cost limit exceeded"
    );
}

#[test]
fn a_typed_variable_knows_its_fields_and_bounds() {
    let schema = json!({
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {
            "replicas": {"type": "integer"},
            "names": {"type": "array", "maxItems": 4, "items": {"type": "string", "maxLength": 8}}
        }}}
    });
    let typed = ObjectType::from_schema(&schema);
    let env = Environment::new()
        .variable("object", VarType::Object(&typed))
        .variable("request", VarType::Dyn);
    // a field the schema does not declare
    let err = env.compile("object.spec.replicaz > 1", &at()).unwrap_err();
    assert!(
        err.to_string().contains("undefined field 'replicaz'"),
        "{err}"
    );
    // the resource's own fields are always there
    assert!(env.compile("object.metadata.name == 'a'", &at()).is_ok());
    // bounded by maxItems and maxLength: a nested comprehension is cheap
    let bounded = env
        .compile(
            "object.spec.names.all(a, object.spec.names.all(b, a.size() <= b.size() || true))",
            &at(),
        )
        .unwrap();
    let dynamic = Environment::new()
        .variable("object", VarType::Dyn)
        .compile(
            "object.spec.names.all(a, object.spec.names.all(b, a.size() <= b.size() || true))",
            &at(),
        )
        .unwrap();
    assert!(
        bounded.estimated_cost() < 1_000,
        "{}",
        bounded.estimated_cost()
    );
    assert!(dynamic.estimated_cost() > 0);
    let object = json!({"spec": {"replicas": 2, "names": ["a", "bb"]}});
    assert_eq!(
        env.compile("object.spec.replicas == 2", &at())
            .unwrap()
            .evaluate(&Activation::new().bind("object", &object))
            .unwrap(),
        CelValue::Bool(true)
    );
}

#[test]
fn an_unbounded_schema_gives_a_large_estimate() {
    let schema = json!({
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {
            "names": {"type": "array", "items": {"type": "string"}}
        }}}
    });
    let typed = ObjectType::from_schema(&schema);
    let program = Environment::new()
        .variable("object", VarType::Object(&typed))
        .compile(
            "object.spec.names.all(a, object.spec.names.all(b, a == b))",
            &at(),
        )
        .unwrap();
    assert!(
        program.estimated_cost() > genplane_cel::STATIC_ESTIMATED_COST_LIMIT,
        "{}",
        program.estimated_cost()
    );
}

#[test]
fn size_counts_a_strings_code_points_as_cel_defines_it() {
    let env = policy_env();
    let object = json!({"s": "héllo wörld", "b": "日本"});
    for (source, want) in [
        ("size(object.s)", 11),
        ("object.b.size()", 2),
        ("size(b'\\xff\\x00')", 2),
        ("size([1, 2])", 2),
        ("size({'a': 1})", 1),
    ] {
        let program = env.compile(source, &at()).unwrap();
        let activation = Activation::new().bind("object", &object);
        assert_eq!(
            program.evaluate(&activation).unwrap(),
            CelValue::Int(want),
            "{source}"
        );
    }
}
