//! One `x-kubernetes-validations` entry: its checks at CRD-write time and its compiled form.

use genplane_apimachinery::validation::field::{Error, ErrorList, ErrorType, Path};
use kube_cel::cel::IdedExpr;
use serde_json::Value;

use crate::compiler::{Environment, Program};
use crate::schema::Node;

/// Rules whose worst-case estimate is at most this are charged their estimate at run time
/// instead of being re-estimated on the data (their cost cannot grow with the data).
const FIXED_COST_MAX: u64 = 64;

/// Upstream's limit on the estimated cost of one expression (times its cardinality).
pub(crate) const STATIC_ESTIMATED_COST_LIMIT: u64 = 10_000_000;

/// The reasons a rule may declare, in upstream's (sorted) order.
const SUPPORTED_REASONS: &[&str] = &[
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

/// A rule ready to run.
#[derive(Debug)]
pub(crate) struct CompiledRule {
    /// The rule's text, trimmed.
    pub(crate) rule: String,
    /// The rule, compiled.
    pub(crate) program: Program,
    /// `message`, trimmed; `None` when unset or empty.
    pub(crate) message: Option<String>,
    /// `messageExpression`, compiled.
    pub(crate) message_expression: Option<Program>,
    pub(crate) reason: ErrorType,
    /// `fieldPath`, normalized to the rendering of a field path relative to the node.
    pub(crate) field_path: Option<String>,
    pub(crate) uses_old_self: bool,
    pub(crate) optional_old_self: bool,
    /// The estimated cost of one evaluation when it does not depend on the data's size
    /// (no comprehension, no size-dependent string or list operation): charged as is.
    pub(crate) fixed_cost: Option<u64>,
}

impl CompiledRule {
    /// The message of a failure: `message`, or `failed rule: <rule>`.
    pub(crate) fn message_or_default(&self) -> String {
        match &self.message {
            Some(m) => m.clone(),
            None => format!("failed rule: {}", self.rule),
        }
    }

    /// How errors name the rule: its message if it has one, else its text.
    pub(crate) fn error_string(&self) -> &str {
        self.message.as_deref().unwrap_or(&self.rule)
    }
}

/// The estimated costs one rule contributes to the schema's total, with where they come from.
pub(crate) type CostContribution = (Path, u64);

/// Compiles rule `index` of `node` (at `path`), adding upstream's errors to `errs`. The rule
/// compiles in an environment sharing `base`'s functions, with `self` and `oldSelf` typed by
/// `node`.
///
/// `uncorrelatable` is the highest path above the node whose values cannot be correlated with
/// the old object (an atomic or set list), where `oldSelf` is not allowed.
#[allow(clippy::too_many_arguments)]
pub(crate) fn compile(
    base: &Environment<'_>,
    raw: &Value,
    index: usize,
    node: &Node,
    path: &Path,
    uncorrelatable: Option<&Path>,
    cardinality: u64,
    errs: &mut ErrorList,
    costs: &mut Vec<CostContribution>,
) -> Option<CompiledRule> {
    let at = path.child("x-kubernetes-validations").index(index);
    let text = raw.get("rule").and_then(Value::as_str).unwrap_or("");
    let message = raw.get("message").and_then(Value::as_str).unwrap_or("");
    let message_expression = raw
        .get("messageExpression")
        .and_then(Value::as_str)
        .unwrap_or("");
    let reason = raw.get("reason").and_then(Value::as_str);
    let field_path = raw.get("fieldPath").and_then(Value::as_str).unwrap_or("");
    let optional_old_self = raw.get("optionalOldSelf").and_then(Value::as_bool);

    let trimmed_rule = text.trim();
    let trimmed_msg = message.trim();
    let before = errs.0.len();
    if trimmed_rule.is_empty() {
        errs.push(Error::required(&at.child("rule"), "rule is not specified"));
    } else if !message.is_empty() && trimmed_msg.is_empty() {
        errs.push(Error::invalid(
            &at.child("message"),
            message,
            "message must be non-empty if specified",
        ));
    } else if has_newlines(trimmed_msg) {
        errs.push(Error::invalid(
            &at.child("message"),
            message,
            "message must not contain line breaks",
        ));
    } else if has_newlines(trimmed_rule) && trimmed_msg.is_empty() {
        errs.push(Error::required(
            &at.child("message"),
            "message must be specified if rule contains line breaks",
        ));
    }
    if !message_expression.is_empty() && message_expression.trim().is_empty() {
        errs.push(Error::required(
            &at.child("messageExpression"),
            "messageExpression must be non-empty if specified",
        ));
    }
    let reason = match reason {
        None => ErrorType::Invalid,
        Some("FieldValueInvalid") => ErrorType::Invalid,
        Some("FieldValueForbidden") => ErrorType::Forbidden,
        Some("FieldValueRequired") => ErrorType::Required,
        Some("FieldValueDuplicate") => ErrorType::Duplicate,
        Some(other) => {
            errs.push(Error::not_supported(
                &at.child("reason"),
                other,
                SUPPORTED_REASONS,
            ));
            ErrorType::Invalid
        }
    };
    let mut normalized_field_path = None;
    if !field_path.is_empty() {
        if field_path.trim().is_empty() {
            errs.push(Error::invalid(
                &at.child("fieldPath"),
                field_path,
                "fieldPath must be non-empty if specified",
            ));
        }
        if has_newlines(field_path) {
            errs.push(Error::invalid(
                &at.child("fieldPath"),
                field_path,
                "fieldPath must not contain line breaks",
            ));
        }
        match valid_field_path(field_path, node) {
            Some(p) => normalized_field_path = Some(p),
            None => errs.push(Error::invalid(
                &at.child("fieldPath"),
                field_path,
                "fieldPath must be a valid path",
            )),
        }
    }
    if errs.0.len() > before || trimmed_rule.is_empty() {
        return None;
    }

    // The CEL part: upstream only gets here when the schema itself is sound.
    let env = base
        .sharing()
        .node_variable("self", node)
        .node_variable("oldSelf", node);
    let (program, analysis) = match env.check(trimmed_rule) {
        Ok(c) => c,
        Err(e) => {
            errs.push(Error::invalid(
                &at.child("rule"),
                raw.clone(),
                format!("compilation failed: {e}"),
            ));
            return None;
        }
    };
    let uses_old_self = references(&program.expr, "oldSelf");
    let cost = analysis.cost.saturating_mul(cardinality);
    if cost > STATIC_ESTIMATED_COST_LIMIT {
        errs.push(Error::forbidden(
            &at.child("rule"),
            cost_error_message("estimated rule cost", cost, STATIC_ESTIMATED_COST_LIMIT),
        ));
    }
    costs.push((at.child("rule"), cost));
    let mut failed = false;
    if !analysis.issues.is_empty() {
        let issues: Vec<String> = analysis.issues.iter().map(|i| i.message.clone()).collect();
        errs.push(Error::invalid(
            &at.child("rule"),
            raw.clone(),
            format!("compilation failed: {}", issues.join("\n")),
        ));
        failed = true;
    } else if analysis.not_bool {
        errs.push(Error::invalid(
            &at.child("rule"),
            raw.clone(),
            "cel expression must evaluate to a bool",
        ));
        failed = true;
    }

    let mut compiled_message_expression = None;
    let trimmed_msg_expr = message_expression.trim();
    if !trimmed_msg_expr.is_empty() {
        match env.check(trimmed_msg_expr) {
            Err(e) => {
                errs.push(Error::invalid(
                    &at.child("messageExpression"),
                    raw.clone(),
                    format!("messageExpression compilation failed: {e}"),
                ));
                failed = true;
            }
            Ok((message_program, ma)) => {
                if !ma.issues.is_empty() {
                    let issues: Vec<String> = ma.issues.iter().map(|i| i.message.clone()).collect();
                    errs.push(Error::invalid(
                        &at.child("messageExpression"),
                        raw.clone(),
                        format!(
                            "messageExpression compilation failed: {}",
                            issues.join("\n")
                        ),
                    ));
                    failed = true;
                } else if ma.not_string {
                    errs.push(Error::invalid(
                        &at.child("messageExpression"),
                        raw.clone(),
                        "messageExpression must evaluate to a string",
                    ));
                    failed = true;
                } else {
                    let mcost = ma.cost.saturating_mul(cardinality);
                    if mcost > STATIC_ESTIMATED_COST_LIMIT {
                        errs.push(Error::forbidden(
                            &at.child("messageExpression"),
                            cost_error_message(
                                "estimated messageExpression cost",
                                mcost,
                                STATIC_ESTIMATED_COST_LIMIT,
                            ),
                        ));
                    }
                    costs.push((at.child("messageExpression"), mcost));
                    compiled_message_expression = Some(message_program);
                }
            }
        }
    }

    if uses_old_self {
        if let Some(within) = uncorrelatable {
            errs.push(Error::invalid(
                &at.child("rule"),
                text,
                format!(
                    "oldSelf cannot be used on the uncorrelatable portion of the schema within {within}"
                ),
            ));
            failed = true;
        }
    } else if let Some(v) = optional_old_self {
        errs.push(Error::invalid(
            &at.child("optionalOldSelf"),
            v,
            "may not be set if oldSelf is not used in rule",
        ));
        failed = true;
    }
    if failed {
        return None;
    }
    Some(CompiledRule {
        rule: trimmed_rule.to_owned(),
        program,
        message: (!trimmed_msg.is_empty()).then(|| trimmed_msg.to_owned()),
        message_expression: compiled_message_expression,
        reason,
        field_path: normalized_field_path,
        uses_old_self,
        optional_old_self: optional_old_self == Some(true),
        fixed_cost: (analysis.cost <= FIXED_COST_MAX).then_some(analysis.cost),
    })
}

/// Whether `expr` refers to the variable `name` (outside comprehensions that rebind it).
fn references(expr: &IdedExpr, name: &str) -> bool {
    use kube_cel::cel::common::ast::{EntryExpr, Expr};
    match &expr.expr {
        Expr::Ident(n) => n == name,
        Expr::Select(s) => references(&s.operand, name),
        Expr::Call(c) => {
            c.target.as_deref().is_some_and(|t| references(t, name))
                || c.args.iter().any(|a| references(a, name))
        }
        Expr::List(l) => l.elements.iter().any(|e| references(e, name)),
        Expr::Map(m) => m.entries.iter().any(|e| match &e.expr {
            EntryExpr::MapEntry(me) => references(&me.key, name) || references(&me.value, name),
            EntryExpr::StructField(f) => references(&f.value, name),
        }),
        Expr::Struct(s) => s.entries.iter().any(|e| match &e.expr {
            EntryExpr::MapEntry(me) => references(&me.key, name) || references(&me.value, name),
            EntryExpr::StructField(f) => references(&f.value, name),
        }),
        Expr::Comprehension(c) => {
            references(&c.iter_range, name)
                || references(&c.accu_init, name)
                || (c.iter_var != name
                    && c.iter_var2.as_deref() != Some(name)
                    && (references(&c.loop_cond, name)
                        || references(&c.loop_step, name)
                        || references(&c.result, name)))
        }
        Expr::Literal(_) | Expr::Unspecified => false,
    }
}

/// Line breaks as the CEL grammar knows them.
pub(crate) fn has_newlines(s: &str) -> bool {
    s.contains(['\n', '\r'])
}

/// Upstream's message for an estimated cost over its limit.
pub(crate) fn cost_error_message(what: &str, cost: u64, limit: u64) -> String {
    let factor = cost as f64 / limit as f64;
    let factor = if factor > 100.0 {
        "more than 100x".to_owned()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    };
    format!(
        "{what} exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}

/// Checks a rule's `fieldPath` against the schema of its node and returns it rendered as a
/// field path (`spec.foo`, `bar[key]`), or `None` if it does not name a field.
///
/// Accepts upstream's JSON path subset: `.name` and `['name']` steps, no list indexes.
pub(crate) fn valid_field_path(json_path: &str, node: &Node) -> Option<String> {
    let mut out = Path::default();
    let mut schema = node;
    let mut rest = json_path;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[', ']']).unwrap_or(r.len());
            let name = &r[..end];
            if name.is_empty() {
                return None;
            }
            (out, schema) = field_step(&out, schema, name)?;
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix("['") {
            let mut name = String::new();
            let mut chars = r.char_indices();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => match chars.next()?.1 {
                        'a' => name.push('\u{7}'),
                        'b' => name.push('\u{8}'),
                        'f' => name.push('\u{c}'),
                        'n' => name.push('\n'),
                        'r' => name.push('\r'),
                        't' => name.push('\t'),
                        'v' => name.push('\u{b}'),
                        '\'' => name.push('\''),
                        '\\' => name.push('\\'),
                        _ => return None,
                    },
                    '\'' => {
                        end = Some(i);
                        break;
                    }
                    other => name.push(other),
                }
            }
            let end = end?;
            let after = r[end + 1..].strip_prefix(']')?;
            (out, schema) = field_step(&out, schema, &name)?;
            rest = after;
        } else {
            return None;
        }
    }
    Some(out.as_str().to_owned())
}

/// One step of a field path: a declared property, or a key of a map.
fn field_step<'a>(out: &Path, schema: &'a Node, name: &str) -> Option<(Path, &'a Node)> {
    if !schema.properties.is_empty() {
        Some((out.child(name), schema.property(name)?))
    } else {
        schema.additional.as_deref().map(|add| (out.key(name), add))
    }
}
