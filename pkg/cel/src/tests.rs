//! Upstream-like cases: rules on objects, lists, maps and strings, transition rules, messages,
//! reasons, field paths, compile errors and cost limits.

use serde_json::{Value, json};

use super::*;

fn root() -> Path {
    Path::new("spec")
        .child("versions")
        .index(0)
        .child("schema")
        .child("openAPIV3Schema")
}

/// A resource schema whose `spec` is `spec_schema`.
fn crd(spec_schema: Value) -> Value {
    json!({"type": "object", "properties": {"spec": spec_schema}})
}

fn compile_ok(schema: Value) -> Rules {
    let (rules, errs) = Rules::compile(&schema, &root());
    assert!(errs.is_empty(), "unexpected compile errors: {errs}");
    rules
}

fn compile_errs(schema: Value) -> Vec<String> {
    let (_, errs) = Rules::compile(&schema, &root());
    errs.iter().map(ToString::to_string).collect()
}

fn check(rules: &Rules, new: Value, old: Option<Value>) -> Vec<String> {
    rules
        .validate(&new, old.as_ref())
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn obj_rule(rule: &str) -> Value {
    crd(json!({
        "type": "object",
        "x-kubernetes-validations": [{"rule": rule}],
        "properties": {
            "replicas": {"type": "integer"},
            "min": {"type": "integer"},
            "max": {"type": "integer"},
            "name": {"type": "string", "maxLength": 63},
        },
    }))
}

#[test]
fn rules_are_shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Rules>();
}

#[test]
fn schema_without_rules_is_empty_and_validates_nothing() {
    let rules = compile_ok(crd(
        json!({"type": "object", "properties": {"a": {"type": "string"}}}),
    ));
    assert!(rules.is_empty());
    assert!(
        rules
            .validate(&json!({"spec": {"a": "x"}}), None)
            .is_empty()
    );
}

#[test]
fn object_rule_passes_and_fails_with_default_message() {
    let rules = compile_ok(obj_rule("self.min <= self.max"));
    assert!(!rules.is_empty());
    assert!(check(&rules, json!({"spec": {"min": 1, "max": 2}}), None).is_empty());
    assert_eq!(
        check(&rules, json!({"spec": {"min": 3, "max": 2}}), None),
        vec![r#"spec: Invalid value: "object": failed rule: self.min <= self.max"#]
    );
}

#[test]
fn static_message_replaces_the_default() {
    let schema = crd(json!({
        "type": "object",
        "x-kubernetes-validations": [{"rule": "self.replicas >= 0", "message": " replicas must be non-negative "}],
        "properties": {"replicas": {"type": "integer"}},
    }));
    let rules = compile_ok(schema);
    assert_eq!(
        check(&rules, json!({"spec": {"replicas": -1}}), None),
        vec![r#"spec: Invalid value: "object": replicas must be non-negative"#]
    );
}

#[test]
fn has_checks_optional_fields() {
    let rules = compile_ok(obj_rule("!has(self.min) || has(self.max)"));
    assert!(check(&rules, json!({"spec": {}}), None).is_empty());
    assert!(check(&rules, json!({"spec": {"min": 1, "max": 1}}), None).is_empty());
    assert_eq!(check(&rules, json!({"spec": {"min": 1}}), None).len(), 1);
}

#[test]
fn optional_field_syntax() {
    let rules = compile_ok(obj_rule("self.?min.orValue(0) <= self.max"));
    assert_eq!(
        check(&rules, json!({"spec": {"max": 1}}), None),
        Vec::<String>::new()
    );
    assert_eq!(check(&rules, json!({"spec": {"max": -1}}), None).len(), 1);
    assert_eq!(
        check(&rules, json!({"spec": {"min": 2, "max": 1}}), None).len(),
        1
    );
    assert!(check(&rules, json!({"spec": {"min": 1, "max": 1}}), None).is_empty());
}

#[test]
fn missing_field_is_a_runtime_error_like_upstream() {
    let rules = compile_ok(obj_rule("self.replicas > 0"));
    assert_eq!(
        check(&rules, json!({"spec": {}}), None),
        vec![
            r#"spec: Invalid value: "object": no such key: replicas evaluating rule: self.replicas > 0"#
        ]
    );
}

#[test]
fn scalar_rule_reports_its_own_path_and_type() {
    let schema = crd(json!({
        "type": "object",
        "properties": {"replicas": {"type": "integer", "x-kubernetes-validations": [{"rule": "self < 10"}]}},
    }));
    let rules = compile_ok(schema);
    assert_eq!(
        check(&rules, json!({"spec": {"replicas": 12}}), None),
        vec![r#"spec.replicas: Invalid value: "integer": failed rule: self < 10"#]
    );
}

#[test]
fn string_size_and_matches() {
    let schema = crd(json!({
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 64, "x-kubernetes-validations": [
            {"rule": "size(self) <= 10", "message": "too long"},
            {"rule": "self.matches('^[a-z]+$')", "message": "lower case only"},
        ]}},
    }));
    let rules = compile_ok(schema);
    assert!(check(&rules, json!({"spec": {"name": "abc"}}), None).is_empty());
    assert_eq!(
        check(&rules, json!({"spec": {"name": "ABCDEFGHIJKL"}}), None),
        vec![
            r#"spec.name: Invalid value: "string": too long"#,
            r#"spec.name: Invalid value: "string": lower case only"#
        ]
    );
}

#[test]
fn string_library_functions_come_from_kube_cel() {
    let schema = crd(json!({
        "type": "string", "maxLength": 64,
        "x-kubernetes-validations": [{"rule": "self.lowerAscii() == 'abc' && self.split('B').size() == 2"}],
    }));
    let rules = compile_ok(schema);
    assert!(check(&rules, json!({"spec": "aBc"}), None).is_empty());
    assert_eq!(check(&rules, json!({"spec": "xyz"}), None).len(), 1);
}

#[test]
fn date_time_strings_are_timestamps() {
    let schema = crd(json!({
        "type": "object",
        "x-kubernetes-validations": [{"rule": "self.start < self.end", "message": "start must be before end"}],
        "properties": {
            "start": {"type": "string", "format": "date-time"},
            "end": {"type": "string", "format": "date-time"},
        },
    }));
    let rules = compile_ok(schema);
    assert!(
        check(
            &rules,
            json!({"spec": {"start": "2024-01-01T00:00:00Z", "end": "2024-01-02T00:00:00Z"}}),
            None
        )
        .is_empty()
    );
    // as strings "2024-01-10..." < "2024-01-9..." would be true; as timestamps it is false
    assert_eq!(
        check(
            &rules,
            json!({"spec": {"start": "2024-01-10T00:00:00Z", "end": "2024-01-09T23:00:00+00:00"}}),
            None
        )
        .len(),
        1
    );
}

#[test]
fn duration_strings_are_durations() {
    let schema = crd(json!({
        "type": "string", "format": "duration",
        "x-kubernetes-validations": [{"rule": "self <= duration('1h')", "message": "at most an hour"}],
    }));
    let rules = compile_ok(schema);
    assert!(check(&rules, json!({"spec": "59m"}), None).is_empty());
    assert_eq!(
        check(&rules, json!({"spec": "2h"}), None),
        vec![r#"spec: Invalid value: "string": at most an hour"#]
    );
}

#[test]
fn int_or_string_sees_either() {
    let schema = crd(json!({
        "x-kubernetes-int-or-string": true,
        "x-kubernetes-validations": [{"rule": "self == 3 || self == '50%'"}],
    }));
    let rules = compile_ok(schema);
    assert_eq!(
        check(&rules, json!({"spec": 3}), None),
        Vec::<String>::new()
    );
    assert!(check(&rules, json!({"spec": "50%"}), None).is_empty());
    assert_eq!(check(&rules, json!({"spec": "50"}), None).len(), 1);
    assert_eq!(check(&rules, json!({"spec": -1}), None).len(), 1);
}

#[test]
fn type_of_int_or_string() {
    let schema = crd(json!({
        "x-kubernetes-int-or-string": true,
        "x-kubernetes-validations": [{"rule": "type(self) == int ? self >= 0 : self.endsWith('%')"}],
    }));
    let rules = compile_ok(schema);
    assert!(check(&rules, json!({"spec": 3}), None).is_empty());
    assert!(check(&rules, json!({"spec": "50%"}), None).is_empty());
    assert_eq!(check(&rules, json!({"spec": "50"}), None).len(), 1);
    assert_eq!(check(&rules, json!({"spec": -1}), None).len(), 1);
    let rules = compile_ok(crd(json!({"type": "string", "maxLength": 5,
        "x-kubernetes-validations": [{"rule": "type(self) == string && type(self) != 'string' && dyn(self) == self"}]})));
    assert!(check(&rules, json!({"spec": "x"}), None).is_empty());
}

#[test]
fn list_rules_and_item_rules() {
    let schema = crd(json!({
        "type": "array", "maxItems": 10,
        "x-kubernetes-validations": [{"rule": "self.all(x, x.startsWith('a'))", "message": "all must start with a"}],
        "items": {"type": "string", "maxLength": 10,
                  "x-kubernetes-validations": [{"rule": "self != 'abad'"}]},
    }));
    let rules = compile_ok(schema);
    assert!(check(&rules, json!({"spec": ["ab", "ac"]}), None).is_empty());
    assert_eq!(
        check(&rules, json!({"spec": ["ab", "b", "abad"]}), None),
        vec![
            r#"spec: Invalid value: "array": all must start with a"#,
            r#"spec[2]: Invalid value: "string": failed rule: self != 'abad'"#
        ]
    );
}

#[test]
fn list_macros_exists_one_map_filter() {
    let schema = crd(json!({
        "type": "array", "maxItems": 10, "items": {"type": "integer"},
        "x-kubernetes-validations": [
            {"rule": "self.exists_one(x, x == 0)"},
            {"rule": "self.filter(x, x > 5).size() == 0"},
            {"rule": "self.map(x, x * 2).all(y, y < 100)"},
        ],
    }));
    let rules = compile_ok(schema);
    assert!(check(&rules, json!({"spec": [0, 1, 2]}), None).is_empty());
    assert_eq!(check(&rules, json!({"spec": [0, 0, 7]}), None).len(), 2);
}

#[test]
fn map_rules_see_user_keys() {
    let schema = crd(json!({
        "type": "object", "maxProperties": 10,
        "additionalProperties": {"type": "string", "maxLength": 10,
            "x-kubernetes-validations": [{"rule": "self != ''", "message": "must not be empty"}]},
        "x-kubernetes-validations": [{"rule": "'app.kubernetes.io/name' in self", "message": "needs a name label"}],
    }));
    let rules = compile_ok(schema);
    assert!(
        check(
            &rules,
            json!({"spec": {"app.kubernetes.io/name": "x"}}),
            None
        )
        .is_empty()
    );
    assert_eq!(
        check(&rules, json!({"spec": {"other": ""}}), None),
        vec![
            r#"spec: Invalid value: "object": needs a name label"#,
            r#"spec[other]: Invalid value: "string": must not be empty"#
        ]
    );
}

#[test]
fn escaped_property_names() {
    let schema = crd(json!({
        "type": "object",
        "x-kubernetes-validations": [{"rule": "self.__namespace__ == self.x__dash__y"}],
        "properties": {"namespace": {"type": "string"}, "x-y": {"type": "string"}},
    }));
    let rules = compile_ok(schema);
    assert!(
        check(
            &rules,
            json!({"spec": {"namespace": "a", "x-y": "a"}}),
            None
        )
        .is_empty()
    );
    assert_eq!(
        check(
            &rules,
            json!({"spec": {"namespace": "a", "x-y": "b"}}),
            None
        )
        .len(),
        1
    );
}

#[test]
fn resource_root_sees_only_name_of_metadata() {
    let schema = json!({
        "type": "object",
        "x-kubernetes-validations": [{"rule": "self.metadata.name.startsWith('x') && !has(self.metadata.labels)"}],
        "properties": {"spec": {"type": "object"}},
    });
    let rules = compile_ok(schema);
    assert!(check(&rules, json!({"apiVersion": "a/v1", "kind": "K", "metadata": {"name": "xy", "labels": {"a": "b"}}}), None).is_empty());
    assert_eq!(
        check(&rules, json!({"metadata": {"name": "y"}}), None).len(),
        1
    );
}

#[test]
fn quantity_library() {
    let schema = crd(json!({
        "type": "string", "maxLength": 20,
        "x-kubernetes-validations": [{"rule": "quantity(self).isLessThan(quantity('1Gi'))", "message": "under 1Gi"}],
    }));
    let rules = compile_ok(schema);
    assert!(check(&rules, json!({"spec": "500Mi"}), None).is_empty());
    assert_eq!(
        check(&rules, json!({"spec": "2Gi"}), None),
        vec![r#"spec: Invalid value: "string": under 1Gi"#]
    );
}

#[test]
fn transition_rule_immutability() {
    let schema = crd(json!({
        "type": "string",
        "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "Value is immutable"}],
    }));
    let rules = compile_ok(schema);
    // create: no old value, the transition rule does not run
    assert!(check(&rules, json!({"spec": "a"}), None).is_empty());
    assert!(check(&rules, json!({"spec": "a"}), Some(json!({"spec": "a"}))).is_empty());
    assert_eq!(
        check(&rules, json!({"spec": "b"}), Some(json!({"spec": "a"}))),
        vec![r#"spec: Invalid value: "string": Value is immutable"#]
    );
    // the field did not exist before: nothing to compare with
    assert!(check(&rules, json!({"spec": "b"}), Some(json!({}))).is_empty());
}

#[test]
fn set_and_map_lists_compare_without_order() {
    let schema = crd(json!({
        "type": "object",
        "properties": {
            "set": {"type": "array", "x-kubernetes-list-type": "set", "maxItems": 10,
                "items": {"type": "string", "maxLength": 10},
                "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "set is immutable"}]},
            "atomic": {"type": "array", "maxItems": 10,
                "items": {"type": "string", "maxLength": 10},
                "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "list is immutable"}]},
            "map": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"], "maxItems": 10,
                "items": {"type": "object", "properties": {"k": {"type": "string", "maxLength": 5}, "v": {"type": "integer"}}},
                "x-kubernetes-validations": [{"rule": "!(self != oldSelf)", "message": "map is immutable"}]},
        },
    }));
    let rules = compile_ok(schema);
    let old = json!({"spec": {"set": ["a", "b"], "atomic": ["a", "b"], "map": [{"k": "x", "v": 1}, {"k": "y", "v": 2}]}});
    let reordered = json!({"spec": {"set": ["b", "a"], "atomic": ["b", "a"], "map": [{"k": "y", "v": 2}, {"k": "x", "v": 1}]}});
    assert_eq!(
        check(&rules, reordered, Some(old.clone())),
        vec![r#"spec.atomic: Invalid value: "array": list is immutable"#]
    );
    let changed = json!({"spec": {"set": ["a", "c"], "atomic": ["a", "b"], "map": [{"k": "x", "v": 1}, {"k": "y", "v": 3}]}});
    assert_eq!(
        check(&rules, changed, Some(old)),
        vec![
            r#"spec.map: Invalid value: "array": map is immutable"#,
            r#"spec.set: Invalid value: "array": set is immutable"#
        ]
    );
}

#[test]
fn transition_rule_on_map_list_items_correlates_by_key() {
    let schema = crd(json!({
        "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"], "maxItems": 10,
        "items": {"type": "object", "required": ["name"],
            "properties": {"name": {"type": "string", "maxLength": 10}, "value": {"type": "integer"}},
            "x-kubernetes-validations": [{"rule": "self.value >= oldSelf.value", "message": "may not decrease"}]},
    }));
    let rules = compile_ok(schema);
    let old = json!({"spec": [{"name": "a", "value": 1}, {"name": "b", "value": 5}]});
    // reordered, b decreased, c is new
    let new = json!({"spec": [{"name": "c", "value": 0}, {"name": "b", "value": 4}, {"name": "a", "value": 2}]});
    assert_eq!(
        check(&rules, new, Some(old)),
        vec![r#"spec[1]: Invalid value: "object": may not decrease"#]
    );
}

#[test]
fn transition_rule_on_map_values_correlates_by_key() {
    let schema = crd(json!({
        "type": "object", "maxProperties": 10,
        "additionalProperties": {"type": "integer",
            "x-kubernetes-validations": [{"rule": "self >= oldSelf", "message": "may not decrease"}]},
    }));
    let rules = compile_ok(schema);
    assert_eq!(
        check(
            &rules,
            json!({"spec": {"a": 1, "b": 9, "c": 0}}),
            Some(json!({"spec": {"a": 2, "b": 3}}))
        ),
        vec![r#"spec[a]: Invalid value: "integer": may not decrease"#]
    );
}

#[test]
fn embedded_resources_see_their_own_metadata() {
    let schema = crd(json!({
        "type": "object",
        "properties": {"template": {
            "type": "object", "x-kubernetes-embedded-resource": true,
            "x-kubernetes-validations": [{"rule": "self.kind == 'Pod' && self.metadata.name != ''"}],
            "properties": {"spec": {"type": "object"}},
        }},
    }));
    let rules = compile_ok(schema);
    assert!(check(&rules, json!({"spec": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}}}), None).is_empty());
    assert_eq!(
        check(
            &rules,
            json!({"spec": {"template": {"apiVersion": "v1", "kind": "Job", "metadata": {"name": "p"}}}}),
            None
        ),
        vec![
            r#"spec.template: Invalid value: "object": failed rule: self.kind == 'Pod' && self.metadata.name != ''"#
        ]
    );
}

#[test]
fn transition_rule_on_atomic_list_items_is_rejected() {
    let schema = crd(json!({
        "type": "array", "maxItems": 10,
        "items": {"type": "string", "maxLength": 10, "x-kubernetes-validations": [{"rule": "self == oldSelf"}]},
    }));
    assert_eq!(
        compile_errs(schema),
        vec![
            r#"spec.versions[0].schema.openAPIV3Schema.properties[spec].items.x-kubernetes-validations[0].rule: Invalid value: "self == oldSelf": oldSelf cannot be used on the uncorrelatable portion of the schema within spec.versions[0].schema.openAPIV3Schema.properties[spec]"#
        ]
    );
}

#[test]
fn optional_old_self_runs_on_create() {
    let schema = crd(json!({
        "type": "integer",
        "x-kubernetes-validations": [{
            "rule": "oldSelf.hasValue() ? self >= oldSelf.value() : self == 0",
            "optionalOldSelf": true,
            "message": "starts at 0 and only grows"}],
    }));
    let rules = compile_ok(schema);
    assert!(check(&rules, json!({"spec": 0}), None).is_empty());
    assert_eq!(check(&rules, json!({"spec": 1}), None).len(), 1);
    assert!(check(&rules, json!({"spec": 3}), Some(json!({"spec": 2}))).is_empty());
    assert_eq!(
        check(&rules, json!({"spec": 1}), Some(json!({"spec": 2}))).len(),
        1
    );
}

#[test]
fn optional_old_self_without_old_self_is_rejected() {
    let schema = crd(json!({"type": "integer",
        "x-kubernetes-validations": [{"rule": "self > 0", "optionalOldSelf": true}]}));
    assert_eq!(
        compile_errs(schema),
        vec![
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule"
        ]
    );
}

#[test]
fn ratcheting_tolerates_unchanged_invalid_values() {
    let rules = compile_ok(obj_rule("self.min <= self.max"));
    let bad = json!({"spec": {"min": 3, "max": 2}});
    // already invalid and unchanged: allowed
    assert!(check(&rules, bad.clone(), Some(bad.clone())).is_empty());
    // changed and still invalid: rejected
    assert_eq!(
        check(&rules, json!({"spec": {"min": 4, "max": 2}}), Some(bad)).len(),
        1
    );
}

#[test]
fn ratcheting_does_not_apply_to_transition_rules() {
    let schema = crd(json!({
        "type": "object",
        "x-kubernetes-validations": [{"rule": "self.a == oldSelf.a || false"}],
        "properties": {"a": {"type": "integer"}},
    }));
    let rules = compile_ok(schema);
    let same = json!({"spec": {"a": 1}});
    assert!(check(&rules, same.clone(), Some(same)).is_empty());
    assert_eq!(
        check(
            &rules,
            json!({"spec": {"a": 2}}),
            Some(json!({"spec": {"a": 1}}))
        )
        .len(),
        1
    );
}

#[test]
fn message_expression_builds_the_message() {
    let schema = crd(json!({
        "type": "object",
        "x-kubernetes-validations": [{
            "rule": "self.name.size() <= 5",
            "message": "static",
            "messageExpression": "'name ' + self.name + ' is longer than 5'"}],
        "properties": {"name": {"type": "string", "maxLength": 20}},
    }));
    let rules = compile_ok(schema);
    assert_eq!(
        check(&rules, json!({"spec": {"name": "abcdefg"}}), None),
        vec![r#"spec: Invalid value: "object": name abcdefg is longer than 5"#]
    );
}

#[test]
fn message_expression_with_converted_string_is_too_expensive_like_upstream() {
    // upstream cannot size string(int) and rejects the concatenation
    let schema = crd(json!({
        "type": "object",
        "x-kubernetes-validations": [{
            "rule": "self.min <= self.max",
            "messageExpression": "'min (' + string(self.min) + ') exceeds max'"}],
        "properties": {"min": {"type": "integer"}, "max": {"type": "integer"}},
    }));
    let p = "spec.versions[0].schema.openAPIV3Schema";
    let suffix = "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)";
    assert_eq!(
        compile_errs(schema),
        vec![
            format!(
                "{p}.properties[spec].x-kubernetes-validations[0].messageExpression: Forbidden: estimated messageExpression cost exceeds budget by factor of more than 100x {suffix}"
            ),
            format!(
                "{p}.properties[spec].x-kubernetes-validations[0].messageExpression: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"
            ),
            format!(
                "{p}: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x {suffix}"
            ),
        ]
    );
}

#[test]
fn message_expression_failure_falls_back_to_message() {
    let schema = crd(json!({
        "type": "object",
        "x-kubernetes-validations": [{"rule": "self.a > 0", "message": "static", "messageExpression": "self.missing"}],
        "properties": {"a": {"type": "integer"}},
    }));
    // self.missing is an undefined field: upstream rejects it at compile time
    let errs = compile_errs(schema.clone());
    assert_eq!(errs.len(), 1);
    assert!(
        errs[0].contains("x-kubernetes-validations[0].messageExpression: Invalid value:"),
        "{}",
        errs[0]
    );
    assert!(
        errs[0].contains(
            "messageExpression compilation failed: ERROR: <input>:1:5: undefined field 'missing'"
        ),
        "{}",
        errs[0]
    );

    let schema = crd(json!({
        "type": "object",
        "x-kubernetes-validations": [{"rule": "self.a > 0", "message": "static", "messageExpression": "''"}],
        "properties": {"a": {"type": "integer"}},
    }));
    let rules = compile_ok(schema);
    assert_eq!(
        check(&rules, json!({"spec": {"a": 0}}), None),
        vec![r#"spec: Invalid value: "object": static"#]
    );
}

#[test]
fn reason_selects_the_error_type() {
    let schema = crd(json!({
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.a > 0", "message": "a must be positive", "reason": "FieldValueForbidden"},
            {"rule": "self.a > 1", "message": "a needed", "reason": "FieldValueRequired"},
            {"rule": "self.a > 2", "reason": "FieldValueDuplicate"},
        ],
        "properties": {"a": {"type": "integer"}},
    }));
    let rules = compile_ok(schema);
    assert_eq!(
        check(&rules, json!({"spec": {"a": 0}}), None),
        vec![
            "spec: Forbidden: a must be positive",
            "spec: Required value: a needed",
            r#"spec: Duplicate value: "object""#
        ]
    );
}

#[test]
fn unsupported_reason_is_rejected() {
    let schema = crd(json!({"type": "integer",
        "x-kubernetes-validations": [{"rule": "self > 0", "reason": "Nope"}]}));
    assert_eq!(
        compile_errs(schema),
        vec![
            r#"spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].reason: Unsupported value: "Nope": supported values: "FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired""#
        ]
    );
}

#[test]
fn field_path_moves_the_error() {
    let schema = crd(json!({
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.min <= self.max", "message": "max below min", "fieldPath": ".max"},
            {"rule": "'k' in self.labels", "message": "needs k", "fieldPath": ".labels['k']"},
        ],
        "properties": {
            "min": {"type": "integer"}, "max": {"type": "integer"},
            "labels": {"type": "object", "maxProperties": 5, "additionalProperties": {"type": "string", "maxLength": 5}},
        },
    }));
    let rules = compile_ok(schema);
    assert_eq!(
        check(
            &rules,
            json!({"spec": {"min": 2, "max": 1, "labels": {}}}),
            None
        ),
        vec![
            r#"spec.max: Invalid value: "object": max below min"#,
            r#"spec.labels[k]: Invalid value: "object": needs k"#
        ]
    );
}

#[test]
fn invalid_field_path_is_rejected() {
    let schema = crd(json!({
        "type": "object",
        "x-kubernetes-validations": [{"rule": "true", "fieldPath": ".nope"}],
        "properties": {"a": {"type": "integer"}},
    }));
    assert_eq!(
        compile_errs(schema),
        vec![
            r#"spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].fieldPath: Invalid value: ".nope": fieldPath must be a valid path"#
        ]
    );
}

#[test]
fn syntax_error_is_reported_like_cel_go() {
    let errs = compile_errs(obj_rule("self.min <"));
    assert_eq!(errs.len(), 1);
    assert!(
        errs[0].starts_with("spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: "),
        "{}",
        errs[0]
    );
    assert!(
        errs[0].contains(": compilation failed: ERROR: <input>:1:"),
        "{}",
        errs[0]
    );
}

#[test]
fn undeclared_reference_and_undefined_field_are_compile_errors() {
    let errs = compile_errs(obj_rule("foo > 1"));
    assert!(errs[0].ends_with("compilation failed: ERROR: <input>:1:1: undeclared reference to 'foo' (in container '')"), "{}", errs[0]);
    let errs = compile_errs(obj_rule("self.nope > 1"));
    assert!(
        errs[0].ends_with("compilation failed: ERROR: <input>:1:5: undefined field 'nope'"),
        "{}",
        errs[0]
    );
}

#[test]
fn non_boolean_rule_is_a_compile_error() {
    let errs = compile_errs(obj_rule("self.name"));
    assert_eq!(errs.len(), 1);
    assert!(
        errs[0].ends_with(": cel expression must evaluate to a bool"),
        "{}",
        errs[0]
    );
}

#[test]
fn message_expression_must_be_a_string() {
    let errs = compile_errs(crd(json!({"type": "object",
        "properties": {"n": {"type": "integer"}},
        "x-kubernetes-validations": [{"rule": "self.n > 0", "messageExpression": "self.n"}]})));
    assert_eq!(errs.len(), 1);
    assert!(
        errs[0].ends_with(": messageExpression must evaluate to a string"),
        "{}",
        errs[0]
    );
}

#[test]
fn empty_rule_and_bad_messages_are_rejected() {
    let schema = crd(json!({"type": "integer", "x-kubernetes-validations": [
        {"rule": "  "},
        {"rule": "self > 0", "message": "a\nb"},
        {"rule": "self > 0", "messageExpression": " "},
    ]}));
    let p = "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations";
    assert_eq!(
        compile_errs(schema),
        vec![
            format!("{p}[0].rule: Required value: rule is not specified"),
            format!(
                "{p}[1].message: Invalid value: \"a\\nb\": message must not contain line breaks"
            ),
            format!(
                "{p}[2].messageExpression: Required value: messageExpression must be non-empty if specified"
            ),
        ]
    );
}

#[test]
fn unbounded_nested_comprehension_exceeds_the_rule_cost_limit() {
    let schema = crd(json!({
        "type": "array",
        "items": {"type": "string"},
        "x-kubernetes-validations": [{"rule": "self.all(x, self.all(y, x == y))"}],
    }));
    let errs = compile_errs(schema);
    assert!(errs.contains(&"spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)".to_owned()), "{errs:?}");
}

#[test]
fn bounds_bring_the_cost_under_the_limit() {
    let schema = crd(json!({
        "type": "array", "maxItems": 20,
        "items": {"type": "string", "maxLength": 20},
        "x-kubernetes-validations": [{"rule": "self.all(x, self.all(y, x == y))"}],
    }));
    compile_ok(schema);
}

#[test]
fn rules_under_unbounded_lists_add_up_to_the_crd_limit() {
    // each rule is cheap, but it runs once per item of an unbounded list of unbounded strings
    let schema = crd(json!({
        "type": "array",
        "items": {"type": "string", "x-kubernetes-validations": [
            {"rule": "self.startsWith('a')"},
            {"rule": "self.endsWith('a')"},
            {"rule": "self.contains('a')"},
        ]},
    }));
    let errs = compile_errs(schema);
    assert!(
        errs.iter().any(|e| e.starts_with("spec.versions[0].schema.openAPIV3Schema: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of")),
        "{errs:?}"
    );
    assert!(errs.iter().any(|e| e.ends_with("Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema")), "{errs:?}");
}

#[test]
fn cost_messages_format_the_factor_like_upstream() {
    assert!(
        rule::cost_error_message("x", 12_000_000, 10_000_000).contains("by factor of 1.200000x")
    );
    assert!(rule::cost_error_message("x", 25_000_000, 10_000_000).contains("by factor of 2.5x"));
    assert!(
        rule::cost_error_message("x", u64::MAX, 10_000_000).contains("by factor of more than 100x")
    );
}

#[test]
fn runtime_cost_limit_stops_expensive_evaluations() {
    // statically fine (maxItems bounds it), but the actual list is far larger than declared,
    // as happens for data written before a bound was added
    let schema = crd(json!({
        "type": "array", "maxItems": 10, "items": {"type": "integer"},
        "x-kubernetes-validations": [{"rule": "self.all(x, self.all(y, x <= y || x > y))", "message": "m"}],
    }));
    let rules = compile_ok(schema);
    let big: Vec<i64> = (0..3000).collect();
    let errs = check(&rules, json!({"spec": big}), None);
    assert_eq!(
        errs,
        vec![
            r#"spec: Invalid value: "array": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: m"#
        ]
    );
}

#[test]
fn rules_inside_all_of_run_on_the_same_value() {
    let schema = crd(json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "allOf": [
            {"x-kubernetes-validations": [{"rule": "self.a > 0", "message": "positive"}]},
            {"properties": {"a": {"x-kubernetes-validations": [{"rule": "self < 10", "message": "small"}]}}},
        ],
    }));
    let rules = compile_ok(schema);
    assert!(check(&rules, json!({"spec": {"a": 5}}), None).is_empty());
    assert_eq!(
        check(&rules, json!({"spec": {"a": 0}}), None),
        vec![r#"spec: Invalid value: "object": positive"#]
    );
    assert_eq!(
        check(&rules, json!({"spec": {"a": 11}}), None),
        vec![r#"spec.a: Invalid value: "integer": small"#]
    );
}

#[test]
fn null_values_are_not_validated() {
    let schema = crd(json!({"type": "string", "nullable": true,
        "x-kubernetes-validations": [{"rule": "self.size() > 100"}]}));
    let rules = compile_ok(schema);
    assert!(check(&rules, json!({"spec": null}), None).is_empty());
}

/// What `hack/bench/cel.sh` times (a rule reading two fields of a small object, and a root
/// rule on an object of 500 items that reads only two fields), checked here for correctness.
#[test]
fn rules_of_the_benchmark_pass_on_its_objects() {
    let rules = compile_ok(obj_rule("self.min <= self.max"));
    let obj = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a"}, "spec": {"min": 1, "max": 2, "name": "n"}});
    assert!(rules.validate(&obj, None).is_empty());
    let schema = json!({
        "type": "object",
        "x-kubernetes-validations": [{"rule": "self.spec.min <= self.spec.max"}],
        "properties": {"spec": {"type": "object", "properties": {
            "min": {"type": "integer"}, "max": {"type": "integer"},
            "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
        }}},
    });
    let rules = compile_ok(schema);
    let items: Vec<Value> = (0..500)
        .map(|i| json!({"name": format!("item-{i}")}))
        .collect();
    let big = json!({"metadata": {"name": "a"}, "spec": {"min": 1, "max": 2, "items": items}});
    assert!(rules.validate(&big, None).is_empty());
    let swapped = json!({"metadata": {"name": "a"}, "spec": {"min": 3, "max": 2, "items": []}});
    assert_eq!(rules.validate(&swapped, None).iter().count(), 1);
}

#[test]
fn ratcheted_failures_are_warnings() {
    let rules = compile_ok(obj_rule("self.min <= self.max"));
    let bad = json!({"spec": {"min": 3, "max": 2}});
    let (errs, warnings) = rules.validate_with_warnings(&bad, Some(&bad));
    assert!(errs.is_empty());
    assert_eq!(
        warnings,
        vec![r#"spec: Invalid value: "object": failed rule: self.min <= self.max"#]
    );
    // on create there is nothing to ratchet against
    let (errs, warnings) = rules.validate_with_warnings(&bad, None);
    assert_eq!(errs.0.len(), 1);
    assert!(warnings.is_empty());
}

#[test]
fn ratcheting_keeps_evaluation_errors() {
    let rules = compile_ok(obj_rule("self.replicas > 0"));
    let obj = json!({"spec": {"min": 1}});
    assert_eq!(
        check(&rules, obj.clone(), Some(obj)),
        vec![
            r#"spec: Invalid value: "object": no such key: replicas evaluating rule: self.replicas > 0"#
        ]
    );
}

#[test]
fn ratcheting_items_of_an_unchanged_atomic_list() {
    let schema = crd(json!({
        "type": "object",
        "properties": {
            "list": {"type": "array", "maxItems": 5, "items": {"type": "integer",
                "x-kubernetes-validations": [{"rule": "self < 10"}]}},
            "other": {"type": "integer"},
        },
    }));
    let rules = compile_ok(schema);
    let old = json!({"spec": {"list": [1, 20], "other": 1}});
    // the list did not change (only `other` did): its invalid item is tolerated
    assert!(
        check(
            &rules,
            json!({"spec": {"list": [1, 20], "other": 2}}),
            Some(old.clone())
        )
        .is_empty()
    );
    // the list changed: its items are validated again
    assert_eq!(
        check(
            &rules,
            json!({"spec": {"list": [2, 20], "other": 1}}),
            Some(old)
        ),
        vec![r#"spec.list[1]: Invalid value: "integer": failed rule: self < 10"#]
    );
}

#[test]
fn converted_strings_and_bound_cel_values_cost_their_actual_size_when_run() {
    let env = Environment::new()
        .variable("params", VarType::Dyn)
        .variable("variables", VarType::Dyn);
    let program = env
        .compile(
            "'at most ' + params.max + ', not ' + string(variables.keys)",
            &Path::new("messageExpression"),
        )
        .unwrap();
    let params = json!({"max": "1"});
    let activation = Activation::new().bind("params", &params).bind_value(
        "variables",
        map_value([("keys".to_owned(), CelValue::Int(2))]),
    );
    assert_eq!(
        program.evaluate(&activation).unwrap(),
        CelValue::String(std::sync::Arc::new("at most 1, not 2".to_owned()))
    );
}

#[test]
fn prepared_inputs_serve_every_program_of_their_environment() {
    let env = Environment::new()
        .variable("object", VarType::Dyn)
        .variable("variables", VarType::Dyn);
    let other = Environment::new()
        .variable("object", VarType::Dyn)
        .variable("variables", VarType::Dyn);
    let path = Path::new("expression");
    let programs = [
        env.compile("object.n + variables.k", &path).unwrap(),
        other.compile("object.n * variables.k", &path).unwrap(),
    ];
    let object = json!({"n": 3});
    let prepared = env.prepare(Activation::new().bind("object", &object));
    let extra = [("variables", map_value([("k".to_owned(), CelValue::Int(2))]))];
    assert_eq!(
        programs[0].evaluate_prepared(&prepared, &extra).unwrap(),
        CelValue::Int(5)
    );
    // a program of another environment gets the same values
    assert_eq!(
        programs[1].evaluate_prepared(&prepared, &extra).unwrap(),
        CelValue::Int(6)
    );
    // the cost is still charged on the actual values
    let limited = Environment::new()
        .variable("object", VarType::Dyn)
        .cost_limit(5);
    let costly = limited
        .compile("object.s.matches('a+') && object.s.matches('b+')", &path)
        .unwrap();
    let long = json!({"s": "a".repeat(1000)});
    let prepared = limited.prepare(Activation::new().bind("object", &long));
    assert!(matches!(
        costly.evaluate_prepared(&prepared, &[]),
        Err(Error::CostLimitExceeded { .. })
    ));
}

#[test]
fn object_and_json_patch_constructions_are_maps_only_where_declared() {
    let object = json!({"metadata": {"name": "a/b~c", "labels": {"x": "1"}}});
    let run = |env: &Environment<'_>, expression: &str| {
        let program = env.compile(expression, &root())?;
        let value = program.evaluate(&Activation::new().bind("object", &object))?;
        crate::to_json(&value)
    };
    let plain = Environment::new().variable("object", VarType::Dyn);
    let err = run(
        &plain,
        "Object{metadata: Object.metadata{labels: {'a': 'b'}}}",
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("undeclared reference to 'Object'"),
        "{err}"
    );
    let mutating = Environment::new()
        .variable("object", VarType::Dyn)
        .with_object_types();
    assert_eq!(
        run(
            &mutating,
            "Object{metadata: Object.metadata{labels: {'a': object.metadata.labels.x + '2'}}}"
        )
        .unwrap(),
        json!({"metadata": {"labels": {"a": "12"}}})
    );
    assert_eq!(
        run(
            &mutating,
            "[JSONPatch{op: 'add', path: '/metadata/labels/' + jsonpatch.escapeKey(object.metadata.name), value: 'v'}]"
        )
        .unwrap(),
        json!([{"op": "add", "path": "/metadata/labels/a~1b~0c", "value": "v"}])
    );
    let err = run(&mutating, "[JSONPatch{op: 'add', paht: '/x'}]").unwrap_err();
    assert!(err.to_string().contains("undefined field 'paht'"), "{err}");
    // other message types stay undeclared
    let err = run(&mutating, "Foo{a: 1}").unwrap_err();
    assert!(
        err.to_string().contains("undeclared reference to 'Foo'"),
        "{err}"
    );
    // optional fields are left out when empty
    assert_eq!(
        run(&mutating, "Object{?spec: optional.none(), kind: 'K'}").unwrap(),
        json!({"kind": "K"})
    );
}

#[test]
fn programs_prepared_with_their_reach_evaluate_as_with_everything() {
    let env = Environment::new()
        .variable("object", VarType::Dyn)
        .variable("params", VarType::Dyn)
        .variable("request", VarType::Dyn);
    let path = Path::new("expression");
    let sources = [
        "has(object.data) ? size(object.data) : 0",
        "object.?spec.?replicas.orValue(1) + int(params.data.max)",
        "object.metadata.labels.all(k, k != 'x')",
        "params.data.exists(k, k == 'max') ? 1 : 0",
        "object.metadata.name.size() + (has(object.status) ? 1 : 0)",
    ];
    let programs: Vec<Program> = sources
        .iter()
        .map(|s| env.compile(s, &path).unwrap())
        .collect();
    let mut reach = Reach::new();
    for p in &programs {
        reach.add(p);
    }
    assert!(reach.uses("object") && reach.uses("params"));
    assert!(!reach.uses("request"), "no program names request");
    let object = json!({
        "metadata": {"name": "abc", "labels": {"a": "1"}, "managedFields": [{"manager": "m"}]},
        "data": {"a": "1", "b": "2"},
        "spec": {"replicas": 3},
        "status": {"phase": "x"},
    });
    let params = json!({"data": {"max": "7"}, "metadata": {"name": "p"}});
    let request = json!({"operation": "CREATE"});
    let activation = || {
        Activation::new()
            .bind("object", &object)
            .bind("params", &params)
            .bind("request", &request)
    };
    let all = env.prepare(activation());
    let reached = env.prepare_reaching(activation(), &reach);
    for (source, program) in sources.iter().zip(&programs) {
        assert_eq!(
            program.evaluate_prepared(&reached, &[]).unwrap(),
            program.evaluate_prepared(&all, &[]).unwrap(),
            "{source}"
        );
    }
    // what the programs do not reach is not there for another program
    let other = env.compile("has(object.spec.paused)", &path).unwrap();
    assert_eq!(
        other.evaluate_prepared(&reached, &[]).unwrap(),
        CelValue::Bool(false)
    );
    let request_use = env.compile("request.operation == 'CREATE'", &path).unwrap();
    assert!(request_use.evaluate_prepared(&reached, &[]).is_err());
    assert_eq!(
        request_use.evaluate_prepared(&all, &[]).unwrap(),
        CelValue::Bool(true)
    );
}

#[test]
fn only_programs_whose_cost_grows_with_their_inputs_are_charged() {
    let env = Environment::new()
        .variable("object", VarType::Dyn)
        .variable("variables", VarType::Dyn);
    let path = Path::new("expression");
    for (source, charged) in [
        ("size(object.data) <= 3", false),
        ("has(object.data) ? object.data : {}", false),
        // equality traverses the shorter side
        ("object.metadata.name == 'x'", false),
        ("object.metadata.name == object.spec.name", false),
        ("object.items.exists(i, i == object.name)", true),
        ("object.items.all(i, i > 0)", true),
        ("object.s.matches('a+')", false),
        ("object.s.matches('a+') && object.t.matches('b+')", true),
        ("'at most ' + variables.max + ' keys'", true),
        ("size(variables.data) <= int(object.max)", false),
    ] {
        let program = env.compile(source, &path).unwrap();
        assert_eq!(program.charged(), charged, "{source}");
    }
    // what is not charged cannot exceed the limit: checked on large values
    let program = env
        .compile("size(object.data) <= 3 && has(object.spec)", &path)
        .unwrap();
    let data: serde_json::Map<String, Value> = (0..10_000)
        .map(|i| (format!("k{i}"), json!("v".repeat(100))))
        .collect();
    let large = json!({"data": data, "spec": {}});
    let bindings = vec![("object".to_owned(), analyze::Ty::Json(vec![&large]))];
    let cost = stack::for_tree(program.depth, || {
        analyze::runtime_cost(&program.expr, bindings)
    });
    assert!(cost <= crate::PER_CALL_LIMIT, "{cost}");
}

#[test]
fn charged_programs_skip_the_charge_only_on_values_too_small_to_exceed_the_limit() {
    let env = Environment::new()
        .variable("object", VarType::Dyn)
        .cost_limit(1_000);
    let path = Path::new("expression");
    for source in [
        "object.items.all(i, i > 0)",
        "object.items.exists(i, object.items.all(j, j <= i))",
        "object.items.map(i, string(i)).join(',').size() > 0",
    ] {
        let program = env.compile(source, &path).unwrap();
        assert!(program.charged(), "{source}");
        assert!(program.free_below < u64::MAX, "{source}");
        let free = program.free_below - 1;
        // {"items": [1, ...]}: total size 6 + 2n; the largest such value still free
        assert!(free >= 8, "{source}: {free}");
        let items = |n: u64| json!({"items": vec![1; usize::try_from(n).unwrap()]});
        let small = items((free - 6) / 2);
        let total =
            crate::value::total_size(&crate::value::to_cel(&small, None, &crate::projection::ALL));
        assert!(
            total <= free && total + 2 > free,
            "{source}: {total}, {free}"
        );
        // what is not charged is within the limit on the actual values too
        let bindings = vec![("object".to_owned(), analyze::Ty::Json(vec![&small]))];
        let cost = stack::for_tree(program.depth, || {
            analyze::runtime_cost(&program.expr, bindings)
        });
        assert!(
            cost <= 1_000,
            "{source}: {cost} on a value of total size {total}"
        );
        program
            .evaluate(&Activation::new().bind("object", &small))
            .unwrap();
        // much larger values are charged, and refused
        let large = items(free.max(1) * 64);
        assert!(
            matches!(
                program.evaluate(&Activation::new().bind("object", &large)),
                Err(Error::CostLimitExceeded { .. })
            ),
            "{source}"
        );
    }
}

#[test]
fn an_extended_preparation_adds_variables_for_every_program() {
    let env = Environment::new()
        .variable("object", VarType::Dyn)
        .variable("variables", VarType::Dyn);
    let path = Path::new("expression");
    let object = json!({"n": 3});
    let prepared = env.prepare(Activation::new().bind("object", &object));
    let extended =
        prepared.extend(&[("variables", map_value([("k".to_owned(), CelValue::Int(2))]))]);
    for (source, want) in [("object.n + variables.k", 5), ("variables.k * 10", 20)] {
        let program = env.compile(source, &path).unwrap();
        assert_eq!(
            program.evaluate_prepared(&extended, &[]).unwrap(),
            CelValue::Int(want)
        );
    }
}

#[test]
fn direct_evaluation_answers_as_the_interpreter_or_not_at_all() {
    let env = Environment::new()
        .variable("object", VarType::Dyn)
        .variable("oldObject", VarType::Dyn)
        .variable("params", VarType::Dyn)
        .variable("variables", VarType::Dyn);
    let objects = [
        json!({"metadata": {"name": "a", "labels": {"team": "x", "n": "3"}},
               "data": {"k": "v", "long": "é".repeat(40), "n": "12", "neg": "-4", "bad": "+4"},
               "spec": {"replicas": 3, "ratio": 0.5, "items": [1, 2, 3], "names": ["a", "b"],
                        "mixed": [1, "a"], "none": null, "empty": {}, "flag": true}}),
        json!({"metadata": {"name": "b"}, "data": {}, "spec": {"replicas": -2, "items": []}}),
        json!({"metadata": {"name": "c"}, "spec": "text"}),
        json!(null),
    ];
    let params = json!({"data": {"maxKeys": "2", "max": "9223372036854775807", "name": "a"}});
    let expressions = [
        "object.metadata.name == 'a'",
        "object.metadata.name != params.data.name",
        "has(object.data) ? object.data : {}",
        "size(has(object.data) ? object.data : {}) <= int(params.data.maxKeys)",
        "object.data.all(k, size(object.data[k]) <= 10)",
        "object.data.exists(k, k == 'n' && int(object.data[k]) > 10)",
        "object.spec.items.all(i, i > 0)",
        "object.spec.items.exists(i, i == 2)",
        "object.spec.names.all(n, n.size() == 1)",
        "2 in object.spec.items",
        "'a' in object.spec.names",
        "'a' in object.spec.mixed",
        "'team' in object.metadata.labels",
        "object.spec.replicas + 1 > 3",
        "object.spec.replicas - 10 < 0",
        "object.spec.replicas + 9223372036854775807 > 0",
        "object.spec.ratio < 1.0",
        "object.spec.ratio == 0.5",
        "int(params.data.max) > 0",
        "int(object.data.neg) < 0",
        "int(object.data.bad) == 4",
        "object.data.missing == 'x'",
        "has(object.spec.none) && object.spec.none == null",
        "!object.spec.flag || object.spec.replicas > 1",
        "object.spec.items[1] == 2",
        "object.spec.items[7] == 2",
        "object.metadata.labels['team'] + '-' + object.metadata.name",
        "size(object.data.long)",
        "object.spec.empty == {}",
        "object.spec == 'text'",
        "size(object.spec)",
        "variables.count > 1",
        "variables.data.all(k, size(variables.data[k]) < 100)",
        "object.metadata.name.startsWith('a')",
        "object.spec.items.map(i, i * 2).size() == 3",
    ];
    let path = Path::new("expression");
    let mut direct_answers = 0;
    for object in &objects {
        let count = object
            .get("data")
            .and_then(Value::as_object)
            .map_or(0, |d| d.len() as i64);
        let data = object.get("data").cloned().unwrap_or(json!({}));
        for source in expressions {
            let program = env.compile(source, &path).unwrap();
            let mut vars = DirectVars::new()
                .bind("object", object)
                .bind("oldObject", &Value::Null)
                .bind("params", &params);
            vars.push_variable("count".to_owned(), Direct::Int(count));
            vars.push_variable("data".to_owned(), Direct::Json(&data));
            let interpreted = program.evaluate(
                &Activation::new()
                    .bind("object", object)
                    .bind("oldObject", &Value::Null)
                    .bind("params", &params)
                    .bind_value(
                        "variables",
                        map_value([
                            ("count".to_owned(), CelValue::Int(count)),
                            (
                                "data".to_owned(),
                                crate::value::to_cel(&data, None, &crate::projection::ALL),
                            ),
                        ]),
                    ),
            );
            if let Some(direct) = program.evaluate_direct(&vars, &mut Budget::unlimited()) {
                direct_answers += 1;
                assert_eq!(
                    direct.map(|d| d.to_cel()).map_err(|e| e.to_string()),
                    interpreted.map_err(|e| e.to_string()),
                    "{source} on {object}"
                );
            }
        }
    }
    // the common shapes are answered directly
    assert!(direct_answers > 40, "{direct_answers}");
    let object = &objects[0];
    // (not: a mixed list, an overflow: the interpreter says what those are)
    for source in expressions[..16]
        .iter()
        .filter(|s| !s.contains("mixed") && !s.contains("9223372036854775807"))
    {
        let program = env.compile(source, &path).unwrap();
        let vars = DirectVars::new()
            .bind("object", object)
            .bind("params", &params);
        assert!(
            program
                .evaluate_direct(&vars, &mut Budget::unlimited())
                .is_some(),
            "{source}"
        );
    }
}
