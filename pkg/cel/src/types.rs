//! CEL type values (`type(x) == int`) and `dyn(x)`, which the `cel` crate lacks.
//!
//! A type is represented by a string that no CEL literal in a rule is likely to equal
//! (`@type:int`); the type identifiers (`int`, `string`, ...) are root variables holding them.

use std::sync::Arc;

use kube_cel::cel::objects::Value;
use kube_cel::cel::{Context, ExecutionError};

/// The type names a rule can refer to.
const NAMES: &[&str] = &[
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
    "google.protobuf.Duration",
    "google.protobuf.Timestamp",
];

fn type_value(name: &str) -> Value {
    Value::String(Arc::new(format!("@type:{name}")))
}

/// `type(x)`: the type of a value.
fn type_of(v: Value) -> Result<Value, ExecutionError> {
    let name = match &v {
        Value::Int(_) => "int",
        Value::UInt(_) => "uint",
        Value::Float(_) => "double",
        Value::Bool(_) => "bool",
        Value::String(s) if s.starts_with("@type:") => "type",
        Value::String(_) => "string",
        Value::Bytes(_) => "bytes",
        Value::List(_) => "list",
        Value::Map(_) => "map",
        Value::Null => "null_type",
        Value::Duration(_) => "google.protobuf.Duration",
        Value::Timestamp(_) => "google.protobuf.Timestamp",
        Value::Function(..) | Value::Opaque(_) => "dyn",
    };
    Ok(type_value(name))
}

/// `dyn(x)`: `x`, with type checking relaxed (a no-op here).
fn dyn_of(v: Value) -> Result<Value, ExecutionError> {
    Ok(v)
}

/// Adds `type`, `dyn` and the type identifiers to a root context.
pub(crate) fn register(ctx: &mut Context<'static>) {
    ctx.add_function("type", type_of);
    ctx.add_function("dyn", dyn_of);
    for name in NAMES {
        if !name.contains('.') {
            ctx.add_variable_from_value(*name, type_value(name));
        }
    }
}
