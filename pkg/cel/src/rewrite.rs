//! Rewrites of a parsed expression before it is analysed and run: calls the `cel` crate
//! evaluates differently from cel-go become calls of functions of this crate.
//!
//! - `x.?f` becomes [`OPT_SELECT`] (see [`crate::optional`]);
//! - `-x` becomes [`NEGATE`]: the crate negates `i64::MIN` with a panic in a debug build and
//!   to itself in a release build, where cel-go reports an integer overflow;
//! - the variable of `optMap` / `optFlatMap` must be an identifier (cel-go's macro error);
//! - `authorizer.requestResource` becomes the call `authorizer.requestResource()`
//!   ([`crate::authz`]);
//! - with object types declared ([`crate::Environment::with_object_types`]): `Object{f: v}`,
//!   `Object.spec{...}` and `JSONPatch{op: ..., path: ...}` become map literals of their fields
//!   (`JSONPatch` has only `op`, `path`, `from` and `value`), `jsonpatch.escapeKey(k)` becomes
//!   [`ESCAPE_KEY`]; other constructions are left for the analysis to refuse.

use kube_cel::cel::common::ast::{
    EntryExpr, Expr, IdedEntryExpr, IdedExpr, LiteralValue, MapEntryExpr, MapExpr,
};
use kube_cel::cel::objects::Value;
use kube_cel::cel::{Context, ExecutionError};

use crate::optional::OPT_SELECT;

/// The function `-x` becomes.
pub(crate) const NEGATE: &str = "@k8s_negate";

/// The function `jsonpatch.escapeKey(k)` becomes.
pub(crate) const ESCAPE_KEY: &str = "@k8s_jsonpatch_escape_key";

/// The fields of a `JSONPatch{...}`.
const JSON_PATCH_FIELDS: &[&str] = &["op", "path", "from", "value"];

/// Adds the functions of this module to a root context.
pub(crate) fn register(ctx: &mut Context<'static>) {
    ctx.add_function(NEGATE, negate);
    ctx.add_function(ESCAPE_KEY, escape_key);
}

/// A JSON pointer token for `key`: `~` as `~0`, `/` as `~1`.
fn escape_key(key: std::sync::Arc<String>) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// `-x` for an int (checked) or a double.
fn negate(v: Value) -> Result<Value, ExecutionError> {
    match v {
        Value::Int(i) => i
            .checked_neg()
            .map(Value::Int)
            .ok_or_else(|| ExecutionError::Overflow("negate", Value::Int(i), Value::Int(-1))),
        Value::Float(f) => Ok(Value::Float(-f)),
        _ => Err(ExecutionError::NoSuchOverload),
    }
}

/// Rewrites `expr` in place (see the module docs). Returns the errors of misused macros, in cel-go's wording.
pub(crate) fn rewrite(expr: &mut IdedExpr, objects: bool) -> Vec<String> {
    let mut errors = Vec::new();
    let mut rewriter = Rewriter {
        objects,
        next_id: max_id(expr) + 1,
    };
    rewriter.walk(expr, &mut errors);
    errors
}

/// The largest node id of `expr` (new nodes get ids above it).
pub(crate) fn max_id(expr: &IdedExpr) -> u64 {
    let entries = |entries: &[IdedEntryExpr]| {
        entries
            .iter()
            .map(|e| match &e.expr {
                EntryExpr::MapEntry(me) => e.id.max(max_id(&me.key)).max(max_id(&me.value)),
                EntryExpr::StructField(f) => e.id.max(max_id(&f.value)),
            })
            .max()
            .unwrap_or(0)
    };
    let below = match &expr.expr {
        Expr::Call(c) => c
            .target
            .as_deref()
            .map_or(0, max_id)
            .max(c.args.iter().map(max_id).max().unwrap_or(0)),
        Expr::Select(s) => max_id(&s.operand),
        Expr::List(l) => l.elements.iter().map(max_id).max().unwrap_or(0),
        Expr::Map(m) => entries(&m.entries),
        Expr::Struct(s) => entries(&s.entries),
        Expr::Comprehension(c) => [
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ]
        .into_iter()
        .map(max_id)
        .max()
        .unwrap_or(0),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => 0,
    };
    expr.id.max(below)
}

/// What a rewrite knows: whether object types are declared, the next free node id.
struct Rewriter {
    objects: bool,
    next_id: u64,
}

/// Whether `name` is a construction of the object types.
fn is_object_type(name: &str) -> bool {
    name == "Object" || name == "JSONPatch" || name.starts_with("Object.")
}

impl Rewriter {
    fn walk(&mut self, expr: &mut IdedExpr, errors: &mut Vec<String>) {
        if self.objects {
            self.object_construction(expr, errors);
        }
        match &mut expr.expr {
            Expr::Call(c) => {
                if let Some(t) = c.target.as_deref_mut() {
                    self.walk(t, errors);
                }
                for a in &mut c.args {
                    self.walk(a, errors);
                }
                let name = c.func_name.as_str();
                if c.func_name == "_?._" && c.target.is_none() && c.args.len() == 2 {
                    c.func_name = OPT_SELECT.to_owned();
                } else if c.func_name == "-_" && c.target.is_none() && c.args.len() == 1 {
                    c.func_name = NEGATE.to_owned();
                } else if matches!(name, "optMap" | "optFlatMap")
                    && c.target.is_some()
                    && c.args.len() == 2
                    && !matches!(c.args[0].expr, Expr::Ident(_))
                {
                    errors.push(format!(
                        "ERROR: <input>:1:1: {name}() variable name must be a simple identifier"
                    ));
                }
            }
            Expr::Select(s) => {
                self.walk(&mut s.operand, errors);
                if !s.test
                    && s.field == "requestResource"
                    && matches!(&s.operand.expr, Expr::Ident(n) if n == "authorizer")
                {
                    let operand = std::mem::take(&mut s.operand);
                    expr.expr = Expr::Call(kube_cel::cel::common::ast::CallExpr {
                        func_name: "requestResource".to_owned(),
                        target: Some(operand),
                        args: Vec::new(),
                    });
                }
            }
            Expr::List(l) => l.elements.iter_mut().for_each(|e| self.walk(e, errors)),
            Expr::Map(m) => m.entries.iter_mut().for_each(|e| match &mut e.expr {
                EntryExpr::MapEntry(me) => {
                    self.walk(&mut me.key, errors);
                    self.walk(&mut me.value, errors);
                }
                EntryExpr::StructField(f) => self.walk(&mut f.value, errors),
            }),
            Expr::Struct(s) => s.entries.iter_mut().for_each(|e| match &mut e.expr {
                EntryExpr::MapEntry(me) => {
                    self.walk(&mut me.key, errors);
                    self.walk(&mut me.value, errors);
                }
                EntryExpr::StructField(f) => self.walk(&mut f.value, errors),
            }),
            Expr::Comprehension(c) => {
                self.walk(&mut c.iter_range, errors);
                self.walk(&mut c.accu_init, errors);
                self.walk(&mut c.loop_cond, errors);
                self.walk(&mut c.loop_step, errors);
                self.walk(&mut c.result, errors);
            }
            Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
        }
    }

    /// With object types declared: `Object...{f: v}` and `JSONPatch{...}` become map literals,
    /// `jsonpatch.escapeKey(k)` a call of [`ESCAPE_KEY`] (before the children are walked).
    fn object_construction(&mut self, expr: &mut IdedExpr, errors: &mut Vec<String>) {
        match &mut expr.expr {
            Expr::Call(c)
                if c.func_name == "escapeKey"
                    && c.args.len() == 1
                    && c.target
                        .as_deref()
                        .is_some_and(|t| matches!(&t.expr, Expr::Ident(n) if n == "jsonpatch")) =>
            {
                c.target = None;
                c.func_name = ESCAPE_KEY.to_owned();
            }
            Expr::Struct(s) if is_object_type(&s.type_name) => {
                let entries = std::mem::take(&mut s.entries);
                let json_patch = s.type_name == "JSONPatch";
                let mut map = Vec::with_capacity(entries.len());
                for entry in entries {
                    match entry.expr {
                        EntryExpr::StructField(field) => {
                            if json_patch && !JSON_PATCH_FIELDS.contains(&field.field.as_str()) {
                                errors.push(format!(
                                    "ERROR: <input>:1:1: undefined field '{}'",
                                    field.field
                                ));
                            }
                            let key = IdedExpr {
                                id: self.next_id,
                                expr: Expr::Literal(LiteralValue::String(field.field.into())),
                            };
                            self.next_id += 1;
                            map.push(IdedEntryExpr {
                                id: entry.id,
                                expr: EntryExpr::MapEntry(MapEntryExpr {
                                    key,
                                    value: field.value,
                                    optional: field.optional,
                                }),
                            });
                        }
                        other => map.push(IdedEntryExpr {
                            id: entry.id,
                            expr: other,
                        }),
                    }
                }
                expr.expr = Expr::Map(MapExpr { entries: map });
            }
            _ => {}
        }
    }
}
