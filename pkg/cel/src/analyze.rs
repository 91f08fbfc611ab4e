//! Static analysis of a rule: undeclared identifiers, undefined fields of `self`, an obviously
//! non-boolean result, and the cost estimate.
//!
//! The `cel` crate has no type checker and no cost model, so this module brings both, for the
//! subset of typing that the schema gives: `self`/`oldSelf` and what is selected, indexed or
//! iterated from them. The cost model follows cel-go's estimator in shape (one unit per node,
//! comprehensions multiply their body by the size of the range, string operations are charged
//! by length with cel-go's traversal factors), with sizes taken from `maxLength`, `maxItems` and
//! `maxProperties` (or, when unset, upstream's request-size based estimates). It is an
//! approximation of upstream's numbers, not a copy: values whose size cannot be derived count
//! as size 1, which errs on accepting a rule rather than rejecting one.

use kube_cel::cel::common::ast::{CallExpr, EntryExpr, Expr, IdedExpr, LiteralValue};
use serde_json::Value;

use crate::schema::{Format, Node};

/// cel-go's cost of traversing one character of a string.
const STRING_TRAVERSAL: f64 = 0.1;
/// cel-go's cost factor for regular expressions, per character of input and pattern.
const REGEX_FACTOR: f64 = 0.25;
/// cel-go's base cost of building a list literal.
const LIST_CREATE: u64 = 10;
/// cel-go's base cost of building a map literal.
const MAP_CREATE: u64 = 30;

/// What the analysis knows about an expression's value.
#[derive(Clone, Debug)]
pub(crate) enum Ty<'a> {
    /// A value of a schema node; at run time also the actual values it stands for.
    Schema(&'a Node, Option<Vec<&'a Value>>),
    /// A string of at most this many characters.
    Str(u64),
    /// A list of at most this many elements of this type.
    List(u64, Box<Ty<'a>>),
    /// A boolean.
    Bool,
    /// A dynamic value whose actual values are at hand (run time): sized by them.
    Json(Vec<&'a Value>),
    /// A dynamic value whose total size (the characters, items and entries of it and of
    /// everything in it, [`crate::value::total_size`]) is at most this, as are its fields and
    /// elements: the worst case of any actual value of that size ([`worst_cost`]).
    Bounded(u64),
    /// A number of this kind (a literal, `size()`, a conversion), sized 1.
    Num(Num),
    /// Anything else, sized 1.
    Dyn,
}

/// The kinds of CEL numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Num {
    /// `int`.
    Int,
    /// `uint`.
    Uint,
    /// `double`.
    Double,
}

/// The size that stands for any value ([`Ty::Bounded`]): above any string, list or map a
/// request can carry (a request body is at most 3 MiB).
pub(crate) const UNBOUNDED_SIZE: u64 = 8 * 1024 * 1024;

impl<'a> Ty<'a> {
    /// The largest size (characters, items or entries) a value can have.
    fn size(&self) -> u64 {
        match self {
            Ty::Schema(node, None) => node.max_elements(),
            Ty::Schema(node, Some(values)) => values
                .iter()
                .map(|v| actual_size(node, v))
                .max()
                .unwrap_or(0),
            Ty::Json(values) => values.iter().map(|v| json_size(v)).max().unwrap_or(0),
            Ty::Str(n) | Ty::List(n, _) => *n,
            Ty::Bounded(n) => *n,
            Ty::Bool | Ty::Num(_) | Ty::Dyn => 1,
        }
    }

    /// The type of field `field` of a dynamic value at run time.
    fn json_field(values: &[&'a Value], field: &str) -> Ty<'a> {
        Ty::Json(values.iter().filter_map(|v| v.get(field)).collect())
    }

    /// The type of the elements (list items, map keys) a comprehension iterates.
    fn element(&self) -> Ty<'a> {
        match self {
            Ty::Schema(node, values) => {
                if let Some(items) = &node.items {
                    let vals = values.as_ref().map(|vs| {
                        vs.iter()
                            .filter_map(|v| v.as_array())
                            .flatten()
                            .collect::<Vec<_>>()
                    });
                    Ty::Schema(items, vals)
                } else if node.is_map() || node.ty == "object" {
                    // map comprehensions iterate keys
                    let longest = values.as_ref().map(|vs| {
                        vs.iter()
                            .filter_map(|v| v.as_object())
                            .flat_map(|o| o.keys())
                            .map(|k| k.len() as u64)
                            .max()
                            .unwrap_or(0)
                    });
                    Ty::Str(longest.unwrap_or(crate::schema::MAX_REQUEST_SIZE_BYTES))
                } else {
                    Ty::Dyn
                }
            }
            Ty::Json(values) => {
                if values.iter().any(|v| v.is_object()) {
                    // map comprehensions iterate keys
                    let longest = values
                        .iter()
                        .filter_map(|v| v.as_object())
                        .flat_map(|o| o.keys())
                        .map(|k| k.chars().count() as u64)
                        .max()
                        .unwrap_or(0);
                    Ty::Str(longest)
                } else {
                    Ty::Json(
                        values
                            .iter()
                            .filter_map(|v| v.as_array())
                            .flatten()
                            .collect(),
                    )
                }
            }
            Ty::List(_, elem) => (**elem).clone(),
            Ty::Bounded(n) => Ty::Bounded(*n),
            Ty::Str(_) | Ty::Bool | Ty::Num(_) | Ty::Dyn => Ty::Dyn,
        }
    }

    /// Whether the value is known not to be a string.
    fn surely_not_string(&self) -> bool {
        match self {
            Ty::Schema(node, _) => {
                !node.ty.is_empty()
                    && node.ty != "string"
                    && !node.int_or_string
                    && !node.preserve_unknown
            }
            Ty::Bool | Ty::List(..) | Ty::Num(_) => true,
            Ty::Str(_) | Ty::Json(_) | Ty::Bounded(_) | Ty::Dyn => false,
        }
    }

    /// Whether the value is known not to be a boolean.
    fn surely_not_bool(&self) -> bool {
        match self {
            Ty::Schema(node, _) => {
                !node.ty.is_empty() && node.ty != "boolean" && !node.preserve_unknown
            }
            Ty::Str(_) | Ty::List(..) | Ty::Num(_) => true,
            Ty::Bool | Ty::Json(_) | Ty::Bounded(_) | Ty::Dyn => false,
        }
    }
}

impl Ty<'_> {
    /// The CEL type name of a scalar whose type is certain (`int`, `double`, `string`,
    /// `bool`), as cel-go's checker names it; `None` when it may be of another type at run
    /// time (dynamic values, int-or-string, formats read as other types, strings that may be
    /// bytes).
    fn scalar(&self) -> Option<&'static str> {
        match self {
            Ty::Num(Num::Int) => Some("int"),
            Ty::Num(Num::Uint) => Some("uint"),
            Ty::Num(Num::Double) => Some("double"),
            Ty::Bool => Some("bool"),
            Ty::Schema(node, _) if node.int_or_string || node.preserve_unknown => None,
            Ty::Schema(node, _) => match node.ty.as_str() {
                "integer" => Some("int"),
                "number" => Some("double"),
                "boolean" => Some("bool"),
                "string" if node.format == Format::None => Some("string"),
                _ => None,
            },
            _ => None,
        }
    }
}

/// Whether cel-go's checker has an overload of a comparison for operands of these scalar
/// types: the same type, or numbers of any kinds (Kubernetes enables cross-type numeric
/// comparisons).
fn comparable(a: &str, b: &str) -> bool {
    let number = |t: &str| matches!(t, "int" | "uint" | "double");
    a == b || (number(a) && number(b))
}

/// The size of one actual value: characters of a string, items of a list, entries of a map.
fn actual_size(node: &Node, value: &Value) -> u64 {
    match value {
        Value::String(s) => {
            if node.format == Format::None {
                s.chars().count() as u64
            } else {
                s.len() as u64
            }
        }
        Value::Array(a) => a.len() as u64,
        Value::Object(o) => o.len() as u64,
        _ => 1,
    }
}

/// The size of a dynamic value: characters of a string, items of a list, entries of a map.
fn json_size(value: &Value) -> u64 {
    match value {
        Value::String(s) => s.chars().count() as u64,
        Value::Array(a) => a.len() as u64,
        Value::Object(o) => o.len() as u64,
        _ => 1,
    }
}

/// A compile-time finding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Issue {
    /// Upstream's rendering: `ERROR: <input>:1:5: undefined field 'foo'`.
    pub(crate) message: String,
}

/// The result of analysing one expression.
#[derive(Debug)]
pub(crate) struct Analysis {
    pub(crate) cost: u64,
    pub(crate) issues: Vec<Issue>,
    pub(crate) not_bool: bool,
    pub(crate) not_string: bool,
    /// Ids of `==`/`!=` calls whose left side is a `list-type: set` or `map` list: equality
    /// that ignores order, as upstream's typed lists compare.
    pub(crate) unordered_eq: Vec<u64>,
}

struct Analyzer<'s, 'a> {
    source: &'s str,
    scopes: Vec<(String, Ty<'a>)>,
    issues: Vec<Issue>,
    unordered_eq: Vec<u64>,
    /// Costing an evaluation on actual values (not estimating the worst case).
    runtime: bool,
    /// Reporting operands of comparisons whose types have no overload (type checking).
    type_check: bool,
}

/// Names that may appear as identifiers: type names and function namespaces.
const KNOWN_IDENTS: &[&str] = &[
    "int",
    "uint",
    "double",
    "bool",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
    "duration",
    "timestamp",
    "sets",
    "strings",
    "lists",
    "math",
    "base64",
    "jsonpatch",
    "optional",
    "cel",
];

/// Analyses `expr` with the variables of `scopes` (name and type).
pub(crate) fn analyze<'a>(
    source: &str,
    expr: &IdedExpr,
    scopes: Vec<(String, Ty<'a>)>,
    type_check: bool,
) -> Analysis {
    let mut a = Analyzer {
        source,
        scopes,
        issues: Vec::new(),
        unordered_eq: Vec::new(),
        runtime: false,
        type_check,
    };
    let (cost, ty) = a.expr(expr);
    Analysis {
        cost,
        issues: a.issues,
        not_bool: ty.surely_not_bool(),
        not_string: ty.surely_not_string(),
        unordered_eq: a.unordered_eq,
    }
}

/// The run-time charge of evaluating `expr` on actual values: the same model as the static
/// estimate, with the sizes of the values at hand (`bindings`: each variable's type with its
/// values) instead of the schema's bounds.
/// The cost of one evaluation of `expr` in the worst case of its variables `names` when
/// their values together have at most `size` characters, items and entries (each
/// [`Ty::Bounded`]): when it is within a limit, no such values can exceed it.
pub(crate) fn worst_cost<'a>(
    expr: &IdedExpr,
    names: impl Iterator<Item = &'a str>,
    size: u64,
) -> u64 {
    runtime_cost(
        expr,
        names.map(|n| (n.to_owned(), Ty::Bounded(size))).collect(),
    )
}

/// The total size of a program's values (as [`worst_cost`] counts it) below which no
/// evaluation can cost more than `limit`: `u64::MAX` when even [`UNBOUNDED_SIZE`] cannot,
/// else one more than a power of two, 1 when only empty values cannot, 0 when even they can
/// (a program over literals, whose cost does not depend on its values at all). The cost model
/// grows with the sizes, so a binary search over the exponents finds it in a few analyses.
pub(crate) fn free_below<'a>(
    expr: &IdedExpr,
    names: impl Iterator<Item = &'a str> + Clone,
    limit: u64,
) -> u64 {
    let within = |size: u64| worst_cost(expr, names.clone(), size) <= limit;
    if within(UNBOUNDED_SIZE) {
        return u64::MAX;
    }
    if !within(1) {
        return u64::from(within(0));
    }
    // within at 2^low, not at 2^high
    let (mut low, mut high) = (0u32, UNBOUNDED_SIZE.ilog2());
    while high - low > 1 {
        let middle = (low + high) / 2;
        if within(1 << middle) {
            low = middle;
        } else {
            high = middle;
        }
    }
    (1 << low) + 1
}

pub(crate) fn runtime_cost<'a>(expr: &IdedExpr, bindings: Vec<(String, Ty<'a>)>) -> u64 {
    let mut a = Analyzer {
        source: "",
        scopes: bindings,
        issues: Vec::new(),
        unordered_eq: Vec::new(),
        runtime: true,
        type_check: false,
    };
    a.expr(expr).0
}

fn mul_factor(size: u64, factor: f64) -> u64 {
    (size as f64 * factor).ceil() as u64
}

impl<'a> Analyzer<'_, 'a> {
    fn lookup(&self, name: &str) -> Option<Ty<'a>> {
        self.scopes
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.clone())
    }

    /// The 1-based column of the first occurrence of `needle` in the source, for messages.
    fn column(&self, needle: &str) -> usize {
        self.source.find(needle).map_or(1, |i| i + 1)
    }

    fn expr(&mut self, e: &IdedExpr) -> (u64, Ty<'a>) {
        match &e.expr {
            Expr::Unspecified => (0, Ty::Dyn),
            Expr::Literal(lit) => (
                0,
                match lit {
                    LiteralValue::String(s) => Ty::Str(s.inner().chars().count() as u64),
                    LiteralValue::Boolean(_) => Ty::Bool,
                    LiteralValue::Int(_) => Ty::Num(Num::Int),
                    LiteralValue::UInt(_) => Ty::Num(Num::Uint),
                    LiteralValue::Double(_) => Ty::Num(Num::Double),
                    LiteralValue::Bytes(b) => Ty::Str(b.inner().len() as u64),
                    _ => Ty::Dyn,
                },
            ),
            Expr::Ident(name) => match self.lookup(name) {
                Some(ty) => (1, ty),
                None => {
                    if !KNOWN_IDENTS.contains(&name.as_str()) && !name.starts_with('@') {
                        let col = self.column(name);
                        self.issues.push(Issue {
                            message: format!(
                                "ERROR: <input>:1:{col}: undeclared reference to '{name}' (in container '')"
                            ),
                        });
                    }
                    (1, Ty::Dyn)
                }
            },
            Expr::Select(sel) => {
                let (cost, ty) = self.expr(&sel.operand);
                let field_ty = self.select(&ty, &sel.field);
                (
                    cost.saturating_add(1),
                    if sel.test { Ty::Bool } else { field_ty },
                )
            }
            Expr::List(list) => {
                let mut cost = LIST_CREATE;
                let mut elem: Option<Ty<'a>> = None;
                for el in &list.elements {
                    let (c, t) = self.expr(el);
                    cost = cost.saturating_add(c);
                    // the elements' type is the largest element's
                    if elem.as_ref().is_none_or(|e| t.size() > e.size()) {
                        elem = Some(t);
                    }
                }
                let elem = elem.unwrap_or(Ty::Dyn);
                (cost, Ty::List(list.elements.len() as u64, Box::new(elem)))
            }
            Expr::Map(map) => {
                let mut cost = MAP_CREATE;
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(me) = &entry.expr {
                        cost = cost
                            .saturating_add(self.expr(&me.key).0)
                            .saturating_add(self.expr(&me.value).0);
                    }
                }
                (cost, Ty::Dyn)
            }
            Expr::Struct(st) => {
                // no message types are declared (and the interpreter cannot build one)
                let col = self.column(&st.type_name);
                self.issues.push(Issue {
                    message: format!(
                        "ERROR: <input>:1:{col}: undeclared reference to '{}' (in container '')",
                        st.type_name
                    ),
                });
                let mut cost: u64 = 40;
                for entry in &st.entries {
                    if let EntryExpr::StructField(f) = &entry.expr {
                        cost = cost.saturating_add(self.expr(&f.value).0);
                    }
                }
                (cost, Ty::Dyn)
            }
            Expr::Comprehension(c) => {
                let (range_cost, range_ty) = self.expr(&c.iter_range);
                let (init_cost, init_ty) = self.expr(&c.accu_init);
                let size = range_ty.size();
                self.scopes.push((c.iter_var.clone(), range_ty.element()));
                if let Some(v2) = &c.iter_var2 {
                    self.scopes.push((v2.clone(), Ty::Dyn));
                }
                self.scopes.push((c.accu_var.clone(), Ty::Dyn));
                let (cond_cost, _) = self.expr(&c.loop_cond);
                let (step_cost, _) = self.expr(&c.loop_step);
                let (result_cost, result_ty) = self.expr(&c.result);
                self.scopes.pop();
                if c.iter_var2.is_some() {
                    self.scopes.pop();
                }
                self.scopes.pop();
                let body = size.saturating_mul(cond_cost.saturating_add(step_cost));
                let ty = match (&init_ty, result_ty) {
                    // all/exists/exists_one accumulate a boolean
                    (Ty::Bool, _) | (_, Ty::Bool) => Ty::Bool,
                    // map/filter build lists as large as the range
                    (Ty::List(..), _) => Ty::List(size, Box::new(Ty::Dyn)),
                    _ => Ty::Dyn,
                };
                (
                    range_cost
                        .saturating_add(init_cost)
                        .saturating_add(body)
                        .saturating_add(result_cost),
                    ty,
                )
            }
            Expr::Call(call) => self.call(e.id, call),
        }
    }

    fn select(&mut self, ty: &Ty<'a>, field: &str) -> Ty<'a> {
        match ty {
            Ty::Schema(node, values) => {
                if node.is_map() {
                    let vals = values
                        .as_ref()
                        .map(|vs| vs.iter().filter_map(|v| v.get(field)).collect::<Vec<_>>());
                    return match &node.additional {
                        Some(add) => Ty::Schema(add, vals),
                        None => Ty::Dyn,
                    };
                }
                if node.ty != "object" {
                    return Ty::Dyn;
                }
                let found = node
                    .properties
                    .iter()
                    .find(|(name, _)| crate::schema::escape(name).as_deref() == Some(field));
                match found {
                    Some((name, child)) => {
                        let vals = values.as_ref().map(|vs| {
                            vs.iter()
                                .filter_map(|v| v.get(name.as_str()))
                                .collect::<Vec<_>>()
                        });
                        Ty::Schema(child, vals)
                    }
                    None => {
                        let meta = node.resource_root
                            && matches!(field, "apiVersion" | "kind" | "metadata");
                        if !meta && !node.preserve_unknown && values.is_none() {
                            let col = self.column(&format!(".{field}"));
                            self.issues.push(Issue {
                                message: format!(
                                    "ERROR: <input>:1:{col}: undefined field '{field}'"
                                ),
                            });
                        }
                        Ty::Dyn
                    }
                }
            }
            Ty::Json(values) => Ty::json_field(values, field),
            Ty::Bounded(n) => Ty::Bounded(*n),
            _ => Ty::Dyn,
        }
    }

    fn call(&mut self, id: u64, call: &CallExpr) -> (u64, Ty<'a>) {
        if call.func_name == crate::cost::TICK
            && let [_, condition] = call.args.as_slice()
        {
            // the count of an iteration (crate::cost) costs nothing of its own
            return self.expr(condition);
        }
        if call.func_name == crate::cost::FORMAT_GUARD
            && let [format] = call.args.as_slice()
        {
            // nor does the count of what a format string asks for
            return self.expr(format);
        }
        if let Some((var, body)) =
            crate::optional::macro_parts(&call.func_name, call.target.as_deref(), &call.args)
        {
            // `x.optMap(v, e)`: `e` with `v` bound to the value of `x` (optionals are typed as
            // their values here)
            let (target_cost, target_ty) = match &call.target {
                Some(t) => self.expr(t),
                None => (0, Ty::Dyn),
            };
            self.scopes.push((var.to_owned(), target_ty));
            let (body_cost, body_ty) = self.expr(body);
            self.scopes.pop();
            return (
                target_cost.saturating_add(body_cost).saturating_add(1),
                body_ty,
            );
        }
        let (target_cost, target_ty) = match &call.target {
            Some(t) => {
                let (c, ty) = self.expr(t);
                (c, Some(ty))
            }
            None => (0, None),
        };
        let mut args_cost = 0u64;
        let mut arg_costs = Vec::with_capacity(call.args.len());
        let mut arg_tys = Vec::with_capacity(call.args.len());
        for a in &call.args {
            let (c, t) = self.expr(a);
            args_cost = args_cost.saturating_add(c);
            arg_costs.push(c);
            arg_tys.push(t);
        }
        let base = target_cost.saturating_add(args_cost);
        let name = call.func_name.as_str();
        // the receiver of a method, or the first argument of a global function
        let subject = target_ty.as_ref().or(arg_tys.first());
        let subject_size = subject.map_or(1, Ty::size);
        let arg_size = |i: usize| -> u64 {
            let offset = usize::from(target_ty.is_none());
            arg_tys.get(i + offset).map_or(1, Ty::size)
        };
        let (own, ty) = match name {
            "_&&_" | "_||_" | "!_" | "hasValue" => (0, Ty::Bool),
            // optionals are typed as their values
            "value"
            | "orValue"
            | "or"
            | "of"
            | "optional.of"
            | "ofNonZeroValue"
            | "optional.ofNonZeroValue" => {
                let inner = match (name, &target_ty) {
                    ("of" | "ofNonZeroValue", Some(Ty::Dyn)) => arg_tys.first(),
                    _ => subject,
                };
                (1, inner.cloned().unwrap_or(Ty::Dyn))
            }
            crate::optional::OPT_SELECT | "_?._" => {
                let field = match call.args.get(1).map(|a| &a.expr) {
                    Some(Expr::Literal(LiteralValue::String(s))) => Some(s.inner().to_string()),
                    _ => None,
                };
                let ty = match (arg_tys.first(), field) {
                    (Some(t), Some(f)) => self.select(t, &f),
                    _ => Ty::Dyn,
                };
                (1, ty)
            }
            "_?_:_" if arg_costs.len() == 3 => {
                // only the taken branch is evaluated: charge the dearer one
                let cost = arg_costs[0].saturating_add(arg_costs[1].max(arg_costs[2]));
                return (cost, arg_tys[1].clone());
            }
            "_==_" | "_!=_" | "_<_" | "_<=_" | "_>_" | "_>=_" => {
                if self.type_check {
                    // A string literal is a string; other strings may be bytes.
                    let scalar = |i: usize| match call.args.get(i).map(|a| &a.expr) {
                        Some(Expr::Literal(LiteralValue::String(_))) => Some("string"),
                        _ => arg_tys.get(i).and_then(Ty::scalar),
                    };
                    if let (Some(a), Some(b)) = (scalar(0), scalar(1))
                        && !comparable(a, b)
                    {
                        let operator = name.trim_matches('_');
                        let col = self.column(operator);
                        self.issues.push(Issue {
                            message: format!(
                                "ERROR: <input>:1:{col}: found no matching overload for '{name}' applied to '({a}, {b})'"
                            ),
                        });
                    }
                }
                if matches!(name, "_==_" | "_!=_")
                    && matches!(arg_tys.first(), Some(Ty::Schema(n, _))
                        if n.ty == "array" && n.list_type != crate::schema::ListType::Atomic)
                {
                    self.unordered_eq.push(id);
                }
                // as cel-go: a traversal of the shorter operand (1 for scalars)
                let a = arg_tys.first().map_or(1, Ty::size);
                let b = arg_tys.get(1).map_or(1, Ty::size);
                (mul_factor(a.min(b), STRING_TRAVERSAL).max(1), Ty::Bool)
            }
            "@in" => {
                let container = arg_tys.get(1);
                let is_list = matches!(container, Some(Ty::List(..)))
                    || matches!(container, Some(Ty::Schema(n, _)) if n.ty == "array")
                    || matches!(container, Some(Ty::Json(vs)) if vs.iter().any(|v| v.is_array()))
                    || matches!(container, Some(Ty::Bounded(_)));
                (
                    if is_list {
                        container.map_or(1, Ty::size)
                    } else {
                        1
                    },
                    Ty::Bool,
                )
            }
            "_[_]" => (1, subject.map_or(Ty::Dyn, Ty::element)),
            "_+_" => {
                let total = arg_tys.iter().map(Ty::size).fold(0u64, u64::saturating_add);
                let ty = match arg_tys.first() {
                    Some(Ty::Str(_)) => Ty::Str(total),
                    Some(Ty::Schema(n, _)) if n.ty == "string" => Ty::Str(total),
                    Some(Ty::List(..)) => Ty::List(total, Box::new(Ty::Dyn)),
                    Some(Ty::Schema(n, _)) if n.ty == "array" => Ty::List(total, Box::new(Ty::Dyn)),
                    _ => Ty::Dyn,
                };
                let own = if matches!(ty, Ty::List(..)) {
                    1
                } else {
                    mul_factor(total, STRING_TRAVERSAL).max(1)
                };
                (own, ty)
            }
            "size" | "int" => (1, Ty::Num(Num::Int)),
            "uint" => (1, Ty::Num(Num::Uint)),
            "double" => (1, Ty::Num(Num::Double)),
            "bool" | "type" | "has" | "duration" | "timestamp" | "getSeconds" | "getMinutes"
            | "getHours" => (1, Ty::Dyn),
            // cel-go has no size for a converted string: its estimate is unbounded, which is
            // why upstream rejects e.g. `'x' + string(self.n)` as a messageExpression
            // when it runs, the converted value is at hand: at most its size, or the 20
            // characters of a number
            "string" | "bytes" if self.runtime => {
                (1, Ty::Str(arg_tys.first().map_or(20, |t| t.size().max(20))))
            }
            "string" | "bytes" => (1, Ty::Str(u64::MAX)),
            "contains" => (
                mul_factor(subject_size, STRING_TRAVERSAL)
                    .saturating_mul(mul_factor(arg_size(0), STRING_TRAVERSAL)),
                Ty::Bool,
            ),
            "startsWith" | "endsWith" => (mul_factor(arg_size(0), STRING_TRAVERSAL), Ty::Bool),
            "matches" | "find" | "findAll" => {
                // one more than the length, so that an empty string still costs the regex
                let str_cost = mul_factor(subject_size.saturating_add(1), STRING_TRAVERSAL);
                let re_cost = mul_factor(arg_size(0), REGEX_FACTOR);
                let ty = match name {
                    "matches" => Ty::Bool,
                    "find" => Ty::Str(subject_size),
                    _ => Ty::List(subject_size, Box::new(Ty::Str(subject_size))),
                };
                (str_cost.saturating_mul(re_cost), ty)
            }
            "split" => (
                1u64.saturating_add(subject_size),
                Ty::List(subject_size, Box::new(Ty::Str(subject_size))),
            ),
            "lowerAscii" | "upperAscii" | "trim" | "substring" | "replace" | "reverse"
            | "charAt" | "format" | "quote" => (
                1u64.saturating_add(mul_factor(subject_size, STRING_TRAVERSAL)),
                Ty::Str(subject_size),
            ),
            "join" => (1u64.saturating_add(subject_size), Ty::Str(subject_size)),
            "indexOf" | "lastIndexOf" => (1u64.saturating_add(subject_size), Ty::Dyn),
            "isSorted" | "sum" | "min" | "max" | "distinct" | "flatten" | "sort" | "slice" => {
                let ty = subject.cloned().unwrap_or(Ty::Dyn);
                (1u64.saturating_add(subject_size), ty)
            }
            "sets.contains" | "sets.equivalent" | "sets.intersects" => {
                let a = arg_tys.first().map_or(1, Ty::size);
                let b = arg_tys.get(1).map_or(1, Ty::size);
                (1u64.saturating_add(a.saturating_mul(b)), Ty::Bool)
            }
            _ => {
                // the Kubernetes library functions (url, ip, cidr, quantity, semver, ...) parse
                // their string argument: charge a traversal of it
                let n = subject.map_or(1, traverse);
                (
                    1u64.saturating_add(mul_factor(n, STRING_TRAVERSAL)),
                    Ty::Dyn,
                )
            }
        };
        (base.saturating_add(own), ty)
    }
}

/// The cost of looking at every element of a value once (characters of a string; elements
/// times their own traversal for lists).
fn traverse(ty: &Ty<'_>) -> u64 {
    match ty {
        Ty::Schema(node, _) if node.ty == "array" => {
            ty.size().saturating_mul(traverse(&ty.element()).max(1))
        }
        Ty::Json(values) if values.iter().any(|v| v.is_array()) => {
            ty.size().saturating_mul(traverse(&ty.element()).max(1))
        }
        // lists of lists of ...: as large as it gets
        Ty::Bounded(n) => n.saturating_mul(*n),
        other => other.size(),
    }
}
