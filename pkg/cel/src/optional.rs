//! CEL's optional library as Kubernetes enables it (cel-go's `OptionalTypes`), where the `cel`
//! crate lacks it or differs from cel-go:
//!
//! - the `optMap` and `optFlatMap` macros (`x.optMap(v, e)`: `e` with `v` bound to the value of
//!   `x`, wrapped in an optional; `optional.none()` when `x` is empty), implemented as functions
//!   that evaluate `e` only when `x` has a value, in a scope where `v` is bound;
//! - `or` and `orValue`, which evaluate their argument only when the receiver is empty (the
//!   crate evaluates it always, so `self.?a.orValue(self.b.c)` failed on a missing `b` even
//!   when `a` was set);
//! - optional field selection (`x.?f`) on maps and objects and on optionals alike: the crate
//!   fails it with "no such key" on a map without `f`, and wraps an empty optional twice when
//!   selections are chained (`x.?a.?b`). It is rewritten to a call of [`OPT_SELECT`] (by
//!   [`crate::rewrite`]);
//! - `optional.unwrap(l)` and `l.unwrapOpt()` (the library's version 2).

use std::sync::Arc;

use kube_cel::cel::common::ast::{Expr, IdedExpr};
use kube_cel::cel::objects::{Key, OptionalValue, Value};
use kube_cel::cel::{Context, ExecutionError, FunctionContext};

/// The function `x.?f` becomes.
pub(crate) const OPT_SELECT: &str = "@k8s_opt_select";

/// Whether a call is `optMap` or `optFlatMap` with the variable it binds and its body.
pub(crate) fn macro_parts<'e>(
    name: &str,
    target: Option<&IdedExpr>,
    args: &'e [IdedExpr],
) -> Option<(&'e str, &'e IdedExpr)> {
    match (name, target, args) {
        ("optMap" | "optFlatMap", Some(_), [var, body]) => match &var.expr {
            Expr::Ident(v) => Some((v.as_str(), body)),
            _ => None,
        },
        _ => None,
    }
}

/// Adds the functions of this module to a root context (replacing the crate's `or` and
/// `orValue`).
pub(crate) fn register(ctx: &mut Context<'static>) {
    ctx.add_function(OPT_SELECT, opt_select);
    ctx.add_function("optMap", opt_map);
    ctx.add_function("optFlatMap", opt_flat_map);
    ctx.add_function("or", or);
    ctx.add_function("orValue", or_value);
    ctx.add_function("optional.unwrap", unwrap);
    ctx.add_function("unwrapOpt", unwrap);
}

/// `optional.unwrap(l)` and `l.unwrapOpt()`: the values of the non-empty optionals of a list.
///
/// The crate unwraps an optional when it copies it into a list, so an element that is not an
/// optional is the value of one and kept.
fn unwrap(ftx: &FunctionContext<'_, '_>) -> Result<Value, ExecutionError> {
    let list = match (&ftx.this, ftx.args) {
        (Some(this), []) => this.clone(),
        (None, [arg]) => Value::resolve(arg, ftx.ptx)?,
        _ => return Err(ExecutionError::NoSuchOverload),
    };
    let Value::List(items) = list else {
        return Err(ExecutionError::NoSuchOverload);
    };
    let values = items
        .iter()
        .filter_map(|item| match as_optional(item) {
            Some(inner) => inner.cloned(),
            None => Some(item.clone()),
        })
        .collect::<Vec<_>>();
    Ok(Value::List(Arc::new(values)))
}

/// The optional `v` is, if it is one: `Some(None)` for an empty optional.
fn as_optional(v: &Value) -> Option<Option<&Value>> {
    match v {
        Value::Opaque(_) => <&OptionalValue>::try_from(v).ok().map(OptionalValue::value),
        _ => None,
    }
}

/// `x.optMap(v, e)`.
fn opt_map(ftx: &FunctionContext<'_, '_>) -> Result<Value, ExecutionError> {
    bind(ftx).map(|v| match v {
        Some(v) => Value::Opaque(Arc::new(OptionalValue::of(v))),
        None => none(),
    })
}

/// `x.optFlatMap(v, e)`: `e` must be an optional.
fn opt_flat_map(ftx: &FunctionContext<'_, '_>) -> Result<Value, ExecutionError> {
    match bind(ftx)? {
        None => Ok(none()),
        Some(v) if as_optional(&v).is_some() => Ok(v),
        Some(_) => Err(ExecutionError::NoSuchOverload),
    }
}

/// The body of `optMap`/`optFlatMap` evaluated with its variable bound to the receiver's value,
/// or `None` for an empty receiver.
fn bind(ftx: &FunctionContext<'_, '_>) -> Result<Option<Value>, ExecutionError> {
    let this = ftx.this.as_ref().ok_or(ExecutionError::NoSuchOverload)?;
    let Some(inner) = as_optional(this) else {
        return Err(ExecutionError::NoSuchOverload);
    };
    let Some(value) = inner else {
        return Ok(None);
    };
    let (Some(var), Some(body)) = (ftx.args.first(), ftx.args.get(1)) else {
        return Err(ExecutionError::NoSuchOverload);
    };
    let Expr::Ident(name) = &var.expr else {
        return Err(ftx.error("variable name must be a simple identifier"));
    };
    let mut scope = ftx.ptx.new_inner_scope();
    scope.add_variable_from_value(name.as_str(), value.clone());
    Value::resolve(body, &scope).map(Some)
}

/// `x.or(y)`: `x` when it has a value, else `y` (evaluated only then).
fn or(ftx: &FunctionContext<'_, '_>) -> Result<Value, ExecutionError> {
    let this = ftx.this.as_ref().ok_or(ExecutionError::NoSuchOverload)?;
    match as_optional(this) {
        Some(Some(_)) => Ok(this.clone()),
        Some(None) => other(ftx),
        None => Err(ExecutionError::NoSuchOverload),
    }
}

/// `x.orValue(y)`: the value of `x` when it has one, else `y` (evaluated only then).
fn or_value(ftx: &FunctionContext<'_, '_>) -> Result<Value, ExecutionError> {
    let this = ftx.this.as_ref().ok_or(ExecutionError::NoSuchOverload)?;
    match as_optional(this) {
        Some(Some(v)) => Ok(v.clone()),
        Some(None) => other(ftx),
        None => Err(ExecutionError::NoSuchOverload),
    }
}

/// The single argument of `or`/`orValue`, evaluated.
fn other(ftx: &FunctionContext<'_, '_>) -> Result<Value, ExecutionError> {
    match ftx.args {
        [arg] => Value::resolve(arg, ftx.ptx),
        _ => Err(ExecutionError::NoSuchOverload),
    }
}

/// `x.?f`: `optional.of(x.f)` when `x` (or the value of an optional `x`) has the field `f`,
/// `optional.none()` when it does not or `x` is an empty optional.
fn opt_select(operand: Value, field: Value) -> Result<Value, ExecutionError> {
    let Value::String(field) = field else {
        return Err(ExecutionError::function_error(
            "_?._",
            "field must be string",
        ));
    };
    let inner = match &operand {
        Value::Opaque(_) => match <&OptionalValue>::try_from(&operand) {
            Ok(opt) => match opt.value() {
                Some(v) => v.clone(),
                None => return Ok(none()),
            },
            Err(_) => return Err(ExecutionError::NoSuchOverload),
        },
        other => other.clone(),
    };
    match inner {
        Value::Map(map) => Ok(match map.get(&Key::String(Arc::clone(&field))) {
            Some(v) => Value::Opaque(Arc::new(OptionalValue::of(v.clone()))),
            None => none(),
        }),
        _ => Err(ExecutionError::NoSuchOverload),
    }
}

fn none() -> Value {
    Value::Opaque(Arc::new(OptionalValue::none()))
}
