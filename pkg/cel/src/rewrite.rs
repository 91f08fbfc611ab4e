//! Rewrites of a parsed expression before it is analysed and run: calls the `cel` crate
//! evaluates differently from cel-go become calls of functions of this crate.
//!
//! - `x.?f` becomes [`OPT_SELECT`] (see [`crate::optional`]);
//! - `-x` becomes [`NEGATE`]: the crate negates `i64::MIN` with a panic in a debug build and
//!   to itself in a release build, where cel-go reports an integer overflow;
//! - the variable of `optMap` / `optFlatMap` must be an identifier (cel-go's macro error).

use kube_cel::cel::common::ast::{EntryExpr, Expr, IdedExpr};
use kube_cel::cel::objects::Value;
use kube_cel::cel::{Context, ExecutionError};

use crate::optional::OPT_SELECT;

/// The function `-x` becomes.
pub(crate) const NEGATE: &str = "@k8s_negate";

/// Adds the functions of this module to a root context.
pub(crate) fn register(ctx: &mut Context<'static>) {
    ctx.add_function(NEGATE, negate);
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
pub(crate) fn rewrite(expr: &mut IdedExpr) -> Vec<String> {
    let mut errors = Vec::new();
    walk(expr, &mut errors);
    errors
}

fn walk(expr: &mut IdedExpr, errors: &mut Vec<String>) {
    match &mut expr.expr {
        Expr::Call(c) => {
            if let Some(t) = c.target.as_deref_mut() {
                walk(t, errors);
            }
            for a in &mut c.args {
                walk(a, errors);
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
        Expr::Select(s) => walk(&mut s.operand, errors),
        Expr::List(l) => l.elements.iter_mut().for_each(|e| walk(e, errors)),
        Expr::Map(m) => m.entries.iter_mut().for_each(|e| match &mut e.expr {
            EntryExpr::MapEntry(me) => {
                walk(&mut me.key, errors);
                walk(&mut me.value, errors);
            }
            EntryExpr::StructField(f) => walk(&mut f.value, errors),
        }),
        Expr::Struct(s) => s.entries.iter_mut().for_each(|e| match &mut e.expr {
            EntryExpr::MapEntry(me) => {
                walk(&mut me.key, errors);
                walk(&mut me.value, errors);
            }
            EntryExpr::StructField(f) => walk(&mut f.value, errors),
        }),
        Expr::Comprehension(c) => {
            walk(&mut c.iter_range, errors);
            walk(&mut c.accu_init, errors);
            walk(&mut c.loop_cond, errors);
            walk(&mut c.loop_step, errors);
            walk(&mut c.result, errors);
        }
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}
