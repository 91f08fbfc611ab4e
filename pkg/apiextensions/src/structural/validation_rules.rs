//! The static checks of `x-kubernetes-validations` entries in the OpenAPI rules (rule present,
//! message, reason, field path); compiling the rules is genplane-cel's.

use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use serde_json::Value;

use super::convert::convertible;
use super::parse::{Node, SchemaOrBool};

const VALIDATION_REASONS: &[&str] = &[
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

fn has_newlines(s: &str) -> bool {
    s.contains(['\n', '\r'])
}

/// The static checks of `x-kubernetes-validations` entries (compiling the rules is CEL's).
pub(super) fn rule_errors(s: &Node<'_>, path: &Path, errors: &mut ErrorList) {
    for (i, rule) in s.validations().iter().enumerate() {
        let at = path.child("x-kubernetes-validations").index(i);
        let text = |k: &str| rule.get(k).and_then(Value::as_str).unwrap_or("");
        let (expression, message) = (text("rule"), text("message"));
        let (trimmed_rule, trimmed_message) = (expression.trim(), message.trim());
        if trimmed_rule.is_empty() {
            errors.push(Error::required(&at.child("rule"), "rule is not specified"));
        } else if !message.is_empty() && trimmed_message.is_empty() {
            errors.push(Error::invalid(
                &at.child("message"),
                message,
                "must be non-empty if specified",
            ));
        } else if has_newlines(trimmed_message) {
            errors.push(Error::invalid(
                &at.child("message"),
                message,
                "must not contain line breaks",
            ));
        } else if has_newlines(trimmed_rule) && trimmed_message.is_empty() {
            errors.push(Error::required(
                &at.child("message"),
                "message must be specified if rule contains line breaks",
            ));
        }
        let message_expression = text("messageExpression");
        if !message_expression.is_empty() && message_expression.trim().is_empty() {
            errors.push(Error::required(
                &at.child("messageExpression"),
                "messageExpression must be non-empty if specified",
            ));
        }
        if let Some(reason) = rule.get("reason").and_then(Value::as_str)
            && !VALIDATION_REASONS.contains(&reason)
        {
            errors.push(Error::not_supported(
                &at.child("reason"),
                reason,
                VALIDATION_REASONS,
            ));
        }
        let field_path = text("fieldPath");
        if !field_path.is_empty() && field_path.trim().is_empty() {
            errors.push(Error::invalid(
                &at.child("fieldPath"),
                field_path,
                "must be non-empty if specified",
            ));
        }
        if has_newlines(field_path) {
            errors.push(Error::invalid(
                &at.child("fieldPath"),
                field_path,
                "must not contain line breaks",
            ));
        }
        if !field_path.is_empty() && !field_path_valid(s, field_path) {
            errors.push(Error::invalid(
                &at.child("fieldPath"),
                field_path,
                "must be a valid path",
            ));
        }
    }
}

/// Splits a rule's `fieldPath` into field names: `.name` and `['quoted name']` steps only
/// (upstream's `ValidFieldPath` has no list indexes).
fn field_path_steps(path: &str) -> Option<Vec<String>> {
    let mut steps = Vec::new();
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[', ']']).unwrap_or(after.len());
            if end == 0 {
                return None;
            }
            steps.push(after[..end].to_owned());
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix("['") {
            let mut name = String::new();
            let mut chars = after.char_indices();
            let close = loop {
                match chars.next()? {
                    (_, '\\') => match chars.next()? {
                        (_, c @ ('\'' | '\\')) => name.push(c),
                        (_, 'n') => name.push('\n'),
                        (_, 't') => name.push('\t'),
                        (_, 'r') => name.push('\r'),
                        _ => return None,
                    },
                    (i, '\'') => break i,
                    (_, c) => name.push(c),
                }
            };
            rest = after[close + 1..].strip_prefix(']')?;
            steps.push(name);
        } else {
            return None;
        }
    }
    Some(steps)
}

/// Whether a rule's `fieldPath` names a field the schema specifies (upstream's
/// `ValidFieldPath`): each step is a property where the schema has properties, else any key
/// of a map. Upstream only checks when the schema converts to a structural one.
fn field_path_valid(s: &Node<'_>, path: &str) -> bool {
    if convertible(s).is_err() {
        return true;
    }
    let Some(steps) = field_path_steps(path) else {
        return false;
    };
    let mut current = s;
    for step in &steps {
        let next = if !current.properties.is_empty() {
            current.property(step)
        } else {
            match &current.additional_properties {
                Some(SchemaOrBool::Schema(values)) => Some(&**values),
                _ => None,
            }
        };
        match next {
            Some(n) => current = n,
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::structural::tests::expect;

    #[test]
    fn validation_rules_are_checked_statically() {
        let rules = |rules: Value| json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}, "m": {"type": "object", "additionalProperties": {"type": "string"}}}, "x-kubernetes-validations": rules}}});
        expect(
            rules(json!([
                {"rule": "  "},
                {"rule": "self.a ==\n 'x'"},
                {"rule": "true", "message": "two\nlines"},
                {"rule": "true", "message": "   "},
                {"rule": "true", "messageExpression": " "},
                {"rule": "true", "reason": "FieldValueBad"},
                {"rule": "true", "fieldPath": ".b"},
                {"rule": "true", "fieldPath": ".a"},
                {"rule": "true", "fieldPath": ".m['any-key']"},
                {"rule": "true", "fieldPath": "['a']"},
                {"rule": "true", "fieldPath": ".m.x"},
                {"rule": "true", "fieldPath": ".a[0]"},
                {"rule": "true", "fieldPath": "a"},
            ])),
            &[
                "$P.properties[spec].x-kubernetes-validations[0].rule: Required value: rule is not specified",
                "$P.properties[spec].x-kubernetes-validations[1].message: Required value: message must be specified if rule contains line breaks",
                "$P.properties[spec].x-kubernetes-validations[2].message: Invalid value: \"two\\nlines\": must not contain line breaks",
                "$P.properties[spec].x-kubernetes-validations[3].message: Invalid value: \"   \": must be non-empty if specified",
                "$P.properties[spec].x-kubernetes-validations[4].messageExpression: Required value: messageExpression must be non-empty if specified",
                "$P.properties[spec].x-kubernetes-validations[5].reason: Unsupported value: \"FieldValueBad\": supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\"",
                "$P.properties[spec].x-kubernetes-validations[6].fieldPath: Invalid value: \".b\": must be a valid path",
                "$P.properties[spec].x-kubernetes-validations[11].fieldPath: Invalid value: \".a[0]\": must be a valid path",
                "$P.properties[spec].x-kubernetes-validations[12].fieldPath: Invalid value: \"a\": must be a valid path",
            ],
        );
    }
}
