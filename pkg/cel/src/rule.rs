//! One `x-kubernetes-validations` entry: its checks at CRD-write time and its compiled form.

use genplane_apimachinery::validation::field::{Error, ErrorList, ErrorType, Path};
use kube_cel::cel::{self, IdedExpr};
use serde_json::Value;

use crate::analyze::{self, Analysis, Ty};
use crate::schema::Node;
use crate::{parse, rewrite, stack};

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

/// Compiles rule `index` of `node` (at `path`), adding upstream's errors to `errs`.
///
/// `uncorrelatable` is the highest path above the node whose values cannot be correlated with
/// the old object (an atomic or set list), where `oldSelf` is not allowed.
#[allow(clippy::too_many_arguments)]
pub(crate) fn compile(
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
    let checked = match check(trimmed_rule, node) {
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
    let Checked {
        program,
        analysis,
        uses_old_self,
    } = checked;
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
        match check(trimmed_msg_expr, node) {
            Err(e) => {
                errs.push(Error::invalid(
                    &at.child("messageExpression"),
                    raw.clone(),
                    format!("messageExpression compilation failed: {e}"),
                ));
                failed = true;
            }
            Ok(m) => {
                let ma = &m.analysis;
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
                    compiled_message_expression = Some(m.program);
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

/// One compiled expression: a rule or a `messageExpression`.
#[derive(Debug)]
pub(crate) struct Program {
    /// Its syntax tree, macros expanded.
    pub(crate) expr: IdedExpr,
    /// The depth of the tree: how much stack evaluating it takes.
    pub(crate) depth: usize,
}

impl Drop for Program {
    fn drop(&mut self) {
        // the derived drop would recurse once per level, on whatever stack drops the rules
        parse::dismantle(std::mem::take(&mut self.expr));
    }
}

/// An expression parsed, expanded and analysed.
struct Checked {
    program: Program,
    analysis: Analysis,
    uses_old_self: bool,
}

/// Parses (within the limits of [`crate::source`]), rewrites ([`crate::rewrite`]) and
/// analyses `source` with `self` typed by `node`; the error is the message after
/// `compilation failed: `.
fn check(source: &str, node: &Node) -> Result<Checked, String> {
    let parsed = parse::parse(source).map_err(|e| e.to_string())?;
    let mut expr = parsed.expr;
    stack::for_tree(parsed.depth, move || {
        let errors = rewrite::rewrite(&mut expr);
        let depth = parse::depth(&expr);
        if !errors.is_empty() || depth > parse::MAX_TREE_DEPTH {
            parse::dismantle(expr);
            if errors.is_empty() {
                return Err(parse::ParseError::TooDeep {
                    limit: parse::MAX_TREE_DEPTH,
                }
                .to_string());
            }
            return Err(errors.join("\n"));
        }
        let analysis = analyze::analyze(source, &expr, Ty::Schema(node, None));
        unordered_equality(&mut expr, &analysis.unordered_eq);
        let uses_old_self = references(&expr, "oldSelf");
        Ok(Checked {
            program: Program { expr, depth },
            analysis,
            uses_old_self,
        })
    })
}

/// The function `==` becomes where its left side is a set or map list.
pub(crate) const UNORDERED_EQ: &str = "@k8s_unordered_eq";
/// The function `!=` becomes where its left side is a set or map list.
pub(crate) const UNORDERED_NE: &str = "@k8s_unordered_ne";

/// Rewrites the `==`/`!=` calls with the given ids to order-insensitive equality.
fn unordered_equality(expr: &mut IdedExpr, ids: &[u64]) {
    use cel::common::ast::{EntryExpr, Expr};
    if ids.is_empty() {
        return;
    }
    match &mut expr.expr {
        Expr::Call(c) => {
            if ids.contains(&expr.id) {
                match c.func_name.as_str() {
                    "_==_" => c.func_name = UNORDERED_EQ.to_owned(),
                    "_!=_" => c.func_name = UNORDERED_NE.to_owned(),
                    _ => {}
                }
            }
            if let Some(t) = c.target.as_deref_mut() {
                unordered_equality(t, ids);
            }
            for a in &mut c.args {
                unordered_equality(a, ids);
            }
        }
        Expr::Select(s) => unordered_equality(&mut s.operand, ids),
        Expr::List(l) => l
            .elements
            .iter_mut()
            .for_each(|e| unordered_equality(e, ids)),
        Expr::Map(m) => m.entries.iter_mut().for_each(|e| {
            if let EntryExpr::MapEntry(me) = &mut e.expr {
                unordered_equality(&mut me.key, ids);
                unordered_equality(&mut me.value, ids);
            }
        }),
        Expr::Comprehension(c) => {
            unordered_equality(&mut c.iter_range, ids);
            unordered_equality(&mut c.accu_init, ids);
            unordered_equality(&mut c.loop_cond, ids);
            unordered_equality(&mut c.loop_step, ids);
            unordered_equality(&mut c.result, ids);
        }
        Expr::Struct(_) | Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

/// Equality of two lists that ignores order (set and map lists), else plain equality.
pub(crate) fn unordered_eq(a: cel::Value, b: cel::Value) -> bool {
    match (&a, &b) {
        (cel::Value::List(x), cel::Value::List(y)) => {
            x.len() == y.len() && x.iter().all(|e| y.contains(e)) && y.iter().all(|e| x.contains(e))
        }
        _ => a == b,
    }
}

/// Inequality of two lists that ignores order.
pub(crate) fn unordered_ne(a: cel::Value, b: cel::Value) -> bool {
    !unordered_eq(a, b)
}

/// Whether `expr` refers to the variable `name` (outside comprehensions that rebind it).
fn references(expr: &IdedExpr, name: &str) -> bool {
    use cel::common::ast::{EntryExpr, Expr};
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
