//! Direct evaluation: a small evaluator for the common shape of admission policy expressions
//! (selections, indexes, `has()`, comparisons, `&&`/`||`/`!`, conditionals, `size()`,
//! `int()`, `in`, integer and string `+`, and `all`/`exists`-style comprehensions) that reads
//! the JSON inputs where they are, without converting them to CEL values first.
//!
//! It answers only when it is sure to give the interpreter's answer: any other construct,
//! function, type combination or error makes it give up ([`None`]), and the caller evaluates
//! the program with the interpreter, which has the full semantics and upstream's error
//! messages. CEL has no side effects, so evaluating twice is harmless.
//!
//! Every iteration is counted as the interpreter counts it ([`crate::cost`]): a comprehension's
//! condition carries the tick, which this evaluator charges to the evaluation's meter.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use kube_cel::cel::common::ast::{CallExpr, ComprehensionExpr, Expr, IdedExpr, LiteralValue};
use kube_cel::cel::objects::{Map, Value as Cel};
use serde_json::Value;

use crate::cost::{Meter, TICK};
use crate::projection::ALL;

/// A value of a direct evaluation, borrowed from the inputs where it can be.
#[derive(Clone, Debug)]
pub enum Direct<'v> {
    /// `null`.
    Null,
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A double (a JSON number that is not an integer).
    Double(f64),
    /// A string.
    Str(Cow<'v, str>),
    /// A JSON object (a CEL map) or array (a CEL list) of the inputs.
    Json(&'v Value),
    /// The empty map literal `{}`.
    EmptyMap,
    /// A value of the interpreter (an earlier expression's result it computed): direct
    /// evaluation gives up on it.
    Cel(Cel),
}

impl<'v> Direct<'v> {
    /// The value of a JSON value of the inputs, as the conversion to CEL types it.
    pub(crate) fn of_json(value: &'v Value) -> Direct<'v> {
        match value {
            Value::Null => Direct::Null,
            Value::Bool(b) => Direct::Bool(*b),
            Value::Number(n) => match n.as_i64() {
                Some(i) => Direct::Int(i),
                None => Direct::Double(n.as_f64().unwrap_or(f64::NAN)),
            },
            Value::String(s) => Direct::Str(Cow::Borrowed(s)),
            Value::Array(_) | Value::Object(_) => Direct::Json(value),
        }
    }

    /// The same value as the interpreter's.
    pub fn to_cel(&self) -> Cel {
        match self {
            Direct::Null => Cel::Null,
            Direct::Bool(b) => Cel::Bool(*b),
            Direct::Int(i) => Cel::Int(*i),
            Direct::Double(f) => Cel::Float(*f),
            Direct::Str(s) => Cel::String(Arc::new(s.as_ref().to_owned())),
            Direct::Json(v) => crate::value::to_cel(v, None, &ALL),
            Direct::EmptyMap => Cel::Map(Map::from(HashMap::<String, Cel>::new())),
            Direct::Cel(c) => c.clone(),
        }
    }

    /// Its total size as [`crate::value::total_size`] counts it.
    pub(crate) fn total_size(&self) -> u64 {
        match self {
            Direct::Str(s) => s.len() as u64,
            Direct::Json(v) => json_total_size(v),
            Direct::EmptyMap => 0,
            Direct::Cel(c) => crate::value::total_size(c),
            Direct::Null | Direct::Bool(_) | Direct::Int(_) | Direct::Double(_) => 1,
        }
    }
}

/// [`crate::value::total_size`] of a JSON value's conversion, without converting it.
fn json_total_size(value: &Value) -> u64 {
    match value {
        Value::String(s) => s.len() as u64,
        Value::Array(items) => items.iter().fold(items.len() as u64, |n, v| {
            n.saturating_add(json_total_size(v))
        }),
        Value::Object(fields) => fields.iter().fold(fields.len() as u64, |n, (k, v)| {
            n.saturating_add(k.len() as u64)
                .saturating_add(json_total_size(v))
        }),
        _ => 1,
    }
}

/// The variables of a direct evaluation: JSON inputs by name, and the results of earlier
/// expressions reachable as `variables.<name>`.
#[derive(Debug, Default)]
pub struct DirectVars<'v> {
    json: Vec<(&'static str, &'v Value)>,
    variables: Vec<(String, Direct<'v>)>,
    /// Their total size, once counted.
    size: std::sync::OnceLock<u64>,
}

impl<'v> DirectVars<'v> {
    /// No variables yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Binds `name` to a JSON input.
    pub fn bind(mut self, name: &'static str, value: &'v Value) -> Self {
        self.json.push((name, value));
        self.size = std::sync::OnceLock::new();
        self
    }

    /// Adds `variables.<name>`.
    pub fn push_variable(&mut self, name: String, value: Direct<'v>) {
        self.variables.push((name, value));
        self.size = std::sync::OnceLock::new();
    }

    /// The values of `variables`, in order.
    pub fn variables(&self) -> &[(String, Direct<'v>)] {
        &self.variables
    }

    /// The total size of every value bound ([`crate::value::total_size`]).
    pub(crate) fn total_size(&self) -> u64 {
        *self.size.get_or_init(|| {
            let json = self
                .json
                .iter()
                .fold(0u64, |n, (_, v)| n.saturating_add(json_total_size(v)));
            self.variables
                .iter()
                .fold(json, |n, (_, v)| n.saturating_add(v.total_size()))
        })
    }
}

/// Evaluates `expr`, counting its iterations on `meter` ([`crate::cost`]), or gives up (also
/// when the meter stops it: the caller asks the meter why).
pub(crate) fn evaluate<'v>(
    expr: &'v IdedExpr,
    vars: &DirectVars<'v>,
    meter: &Meter,
) -> Option<Direct<'v>> {
    Evaluator {
        vars,
        locals: Vec::new(),
        meter,
    }
    .expr(expr)
}

struct Evaluator<'a, 'v> {
    vars: &'a DirectVars<'v>,
    /// Comprehension variables, innermost last.
    locals: Vec<(&'v str, Direct<'v>)>,
    /// Where iterations are counted.
    meter: &'a Meter,
}

impl<'v> Evaluator<'_, 'v> {
    fn expr(&mut self, e: &'v IdedExpr) -> Option<Direct<'v>> {
        match &e.expr {
            Expr::Literal(literal) => match literal {
                LiteralValue::Boolean(b) => Some(Direct::Bool(*b.inner())),
                LiteralValue::Int(i) => Some(Direct::Int(*i.inner())),
                LiteralValue::Null => Some(Direct::Null),
                LiteralValue::String(s) => Some(Direct::Str(Cow::Borrowed(s.inner()))),
                _ => None,
            },
            Expr::Ident(name) => self.ident(name),
            Expr::Select(select) => {
                if let Expr::Ident(root) = &select.operand.expr
                    && root == "variables"
                    && !self.locals.iter().any(|(n, _)| *n == "variables")
                {
                    if select.test {
                        return None;
                    }
                    return self
                        .vars
                        .variables
                        .iter()
                        .find(|(n, _)| *n == select.field)
                        .map(|(_, v)| v.clone())
                        .filter(|v| !matches!(v, Direct::Cel(_)));
                }
                match self.expr(&select.operand)? {
                    Direct::Json(Value::Object(fields)) => {
                        if select.test {
                            Some(Direct::Bool(fields.contains_key(&select.field)))
                        } else {
                            fields.get(&select.field).map(Direct::of_json)
                        }
                    }
                    Direct::EmptyMap if select.test => Some(Direct::Bool(false)),
                    _ => None,
                }
            }
            Expr::Map(map) if map.entries.is_empty() => Some(Direct::EmptyMap),
            Expr::Call(call) => self.call(call),
            Expr::Comprehension(comprehension) => self.comprehension(comprehension),
            _ => None,
        }
    }

    fn ident(&self, name: &str) -> Option<Direct<'v>> {
        if let Some((_, v)) = self.locals.iter().rev().find(|(n, _)| *n == name) {
            return Some(v.clone());
        }
        self.vars
            .json
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| Direct::of_json(v))
    }

    fn bool(&mut self, e: &'v IdedExpr) -> Option<bool> {
        match self.expr(e)? {
            Direct::Bool(b) => Some(b),
            _ => None,
        }
    }

    fn call(&mut self, call: &'v CallExpr) -> Option<Direct<'v>> {
        let args = &call.args;
        // functions called as `f(x)` or `x.f()`
        let receiver = || -> Option<&'v IdedExpr> {
            match (&call.target, args.as_slice()) {
                (Some(target), []) => Some(target),
                (None, [arg]) => Some(arg),
                _ => None,
            }
        };
        if call.target.is_some() && !matches!(call.func_name.as_str(), "size" | "int") {
            return None;
        }
        match call.func_name.as_str() {
            TICK => {
                let [cost, condition] = args.as_slice() else {
                    return None;
                };
                let Expr::Literal(LiteralValue::Int(cost)) = &cost.expr else {
                    return None;
                };
                self.meter
                    .charge(u64::try_from(*cost.inner()).unwrap_or(0))
                    .ok()?;
                self.expr(condition)
            }
            "_&&_" | "_||_" => {
                let [left, right] = args.as_slice() else {
                    return None;
                };
                let decisive = call.func_name == "_||_";
                let left = self.bool(left)?;
                if left == decisive {
                    return Some(Direct::Bool(left));
                }
                self.bool(right).map(Direct::Bool)
            }
            "!_" => {
                let [operand] = args.as_slice() else {
                    return None;
                };
                self.bool(operand).map(|b| Direct::Bool(!b))
            }
            "@not_strictly_false" => {
                let [operand] = args.as_slice() else {
                    return None;
                };
                self.bool(operand).map(Direct::Bool)
            }
            "_?_:_" => {
                let [condition, then, otherwise] = args.as_slice() else {
                    return None;
                };
                if self.bool(condition)? {
                    self.expr(then)
                } else {
                    self.expr(otherwise)
                }
            }
            "_==_" | "_!=_" => {
                let [left, right] = args.as_slice() else {
                    return None;
                };
                let equal = scalar_equal(&self.expr(left)?, &self.expr(right)?)?;
                Some(Direct::Bool(equal == (call.func_name == "_==_")))
            }
            "_<_" | "_<=_" | "_>_" | "_>=_" => {
                let [left, right] = args.as_slice() else {
                    return None;
                };
                let ordering = match (self.expr(left)?, self.expr(right)?) {
                    (Direct::Int(a), Direct::Int(b)) => a.cmp(&b),
                    (Direct::Str(a), Direct::Str(b)) => a.cmp(&b),
                    (Direct::Double(a), Direct::Double(b)) => a.partial_cmp(&b)?,
                    _ => return None,
                };
                Some(Direct::Bool(match call.func_name.as_str() {
                    "_<_" => ordering.is_lt(),
                    "_<=_" => ordering.is_le(),
                    "_>_" => ordering.is_gt(),
                    _ => ordering.is_ge(),
                }))
            }
            "_+_" => {
                let [left, right] = args.as_slice() else {
                    return None;
                };
                match (self.expr(left)?, self.expr(right)?) {
                    (Direct::Int(a), Direct::Int(b)) => a.checked_add(b).map(Direct::Int),
                    (Direct::Str(a), Direct::Str(b)) => {
                        Some(Direct::Str(Cow::Owned(format!("{a}{b}"))))
                    }
                    _ => None,
                }
            }
            "_-_" => {
                let [left, right] = args.as_slice() else {
                    return None;
                };
                match (self.expr(left)?, self.expr(right)?) {
                    (Direct::Int(a), Direct::Int(b)) => a.checked_sub(b).map(Direct::Int),
                    _ => None,
                }
            }
            "size" => {
                let size = match self.expr(receiver()?)? {
                    Direct::Str(s) => s.chars().count(),
                    Direct::Json(Value::Array(items)) => items.len(),
                    Direct::Json(Value::Object(fields)) => fields.len(),
                    Direct::EmptyMap => 0,
                    _ => return None,
                };
                i64::try_from(size).ok().map(Direct::Int)
            }
            "int" => match self.expr(receiver()?)? {
                Direct::Int(i) => Some(Direct::Int(i)),
                Direct::Str(s) => plain_int(&s).map(Direct::Int),
                _ => None,
            },
            "_[_]" => {
                let [container, index] = args.as_slice() else {
                    return None;
                };
                match (self.expr(container)?, self.expr(index)?) {
                    (Direct::Json(Value::Object(fields)), Direct::Str(key)) => {
                        fields.get(key.as_ref()).map(Direct::of_json)
                    }
                    (Direct::Json(Value::Array(items)), Direct::Int(i)) => usize::try_from(i)
                        .ok()
                        .and_then(|i| items.get(i))
                        .map(Direct::of_json),
                    _ => None,
                }
            }
            "@in" => {
                let [needle, container] = args.as_slice() else {
                    return None;
                };
                match (self.expr(needle)?, self.expr(container)?) {
                    (Direct::Str(key), Direct::Json(Value::Object(fields))) => {
                        Some(Direct::Bool(fields.contains_key(key.as_ref())))
                    }
                    (Direct::Str(_), Direct::EmptyMap) => Some(Direct::Bool(false)),
                    (needle, Direct::Json(Value::Array(items))) => {
                        let mut found = false;
                        for item in items {
                            found |= scalar_equal(&needle, &Direct::of_json(item))?;
                        }
                        Some(Direct::Bool(found))
                    }
                    _ => None,
                }
            }
            _ => None,
        }
    }

    fn comprehension(&mut self, c: &'v ComprehensionExpr) -> Option<Direct<'v>> {
        if c.iter_var2.is_some() {
            return None;
        }
        let accu = self.expr(&c.accu_init)?;
        let items: Vec<Direct<'v>> = match self.expr(&c.iter_range)? {
            Direct::Json(Value::Array(items)) => items.iter().map(Direct::of_json).collect(),
            Direct::Json(Value::Object(fields)) => fields
                .keys()
                .map(|k| Direct::Str(Cow::Borrowed(k.as_str())))
                .collect(),
            Direct::EmptyMap => Vec::new(),
            _ => return None,
        };
        let depth = self.locals.len();
        self.locals.push((&c.accu_var, accu));
        let result = self.iterate(c, items);
        self.locals.truncate(depth);
        result
    }

    /// The loop of a comprehension whose accumulator is the last local.
    fn iterate(&mut self, c: &'v ComprehensionExpr, items: Vec<Direct<'v>>) -> Option<Direct<'v>> {
        let accu_at = self.locals.len() - 1;
        for item in items {
            if !self.bool(&c.loop_cond)? {
                break;
            }
            self.locals.push((&c.iter_var, item));
            let accu = self.expr(&c.loop_step);
            self.locals.pop();
            self.locals[accu_at].1 = accu?;
        }
        self.expr(&c.result)
    }
}

/// Whether two scalars of one type are equal; `None` for anything else (the interpreter
/// decides).
fn scalar_equal(a: &Direct<'_>, b: &Direct<'_>) -> Option<bool> {
    Some(match (a, b) {
        (Direct::Int(a), Direct::Int(b)) => a == b,
        (Direct::Str(a), Direct::Str(b)) => a == b,
        (Direct::Bool(a), Direct::Bool(b)) => a == b,
        (Direct::Null, Direct::Null) => true,
        _ => return None,
    })
}

/// A decimal integer without sign or spaces other than a leading `-`, as `int()` reads it.
fn plain_int(s: &str) -> Option<i64> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty() || digits.len() > 18 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}
