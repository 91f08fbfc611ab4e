//! Parsing an expression: the limits first ([`crate::source`]), then the `cel` crate's parser
//! on a stack sized for the expression, with a panic of the parser caught as a last resort,
//! then the depth of the tree it built checked.

use std::panic::{AssertUnwindSafe, catch_unwind};

use kube_cel::cel::common::ast::{EntryExpr, Expr, IdedExpr};
use kube_cel::cel::parser::Parser;

use crate::source::{self, LimitError, MAX_NESTING_DEPTH, MAX_RECURSION_DEPTH};
use crate::stack;

/// The deepest syntax tree accepted, after macro expansion. The limits checked before parsing
/// ([`crate::MAX_NESTING_DEPTH`], [`crate::MAX_RECURSION_DEPTH`]) keep trees well below it;
/// this is a second line should they miss.
pub const MAX_TREE_DEPTH: usize = 2 * MAX_RECURSION_DEPTH;

/// Why an expression does not parse. Rendered as cel-go renders parse errors
/// (`ERROR: <input>:1:5: ...`; errors without a position at `-1:0`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ParseError {
    /// Over a limit checked before parsing.
    #[error("ERROR: <input>:-1:0: {0}")]
    Limit(#[from] LimitError),
    /// The parser's own errors, rendered by the `cel` crate.
    #[error("{0}")]
    Syntax(String),
    /// The tree is deeper than [`MAX_TREE_DEPTH`].
    #[error(
        "ERROR: <input>:-1:0: expression recursion limit exceeded: {limit} levels after macro expansion"
    )]
    TooDeep {
        /// The limit.
        limit: usize,
    },
    /// The parser panicked.
    #[error("ERROR: <input>:-1:0: the expression could not be parsed")]
    Panicked,
}

/// A parsed expression and the depth of its tree.
#[derive(Debug)]
pub(crate) struct Parsed {
    pub(crate) expr: IdedExpr,
    pub(crate) depth: usize,
}

/// Parses `source` with CEL's optional syntax (`self.?field`, `list[?0]`) enabled, as
/// Kubernetes enables it.
pub(crate) fn parse(source: &str) -> Result<Parsed, ParseError> {
    let prepared = source::prepare(source)?;
    let text: &str = &prepared.text;
    let parsed = stack::for_parse(prepared.nesting, prepared.recursion, || {
        catch_unwind(AssertUnwindSafe(|| {
            Parser::new()
                .enable_optional_syntax(true)
                // the crate counts nested `expr` rules; ours stop earlier, this is a backstop
                .max_recursion_depth(u16::try_from(MAX_NESTING_DEPTH + 16).unwrap_or(u16::MAX))
                .parse(text)
        }))
    });
    let expr = match parsed {
        Ok(Ok(expr)) => expr,
        Ok(Err(errors)) => return Err(ParseError::Syntax(errors.to_string())),
        Err(_) => return Err(ParseError::Panicked),
    };
    let depth = depth(&expr);
    if depth > MAX_TREE_DEPTH {
        dismantle(expr);
        return Err(ParseError::TooDeep {
            limit: MAX_TREE_DEPTH,
        });
    }
    Ok(Parsed { expr, depth })
}

/// The direct children of a node.
pub(crate) fn children(e: &IdedExpr) -> Vec<&IdedExpr> {
    match &e.expr {
        Expr::Call(c) => c.target.as_deref().into_iter().chain(&c.args).collect(),
        Expr::Comprehension(c) => vec![
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ],
        Expr::List(l) => l.elements.iter().collect(),
        Expr::Map(m) => entries(&m.entries),
        Expr::Struct(s) => entries(&s.entries),
        Expr::Select(s) => vec![&s.operand],
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Vec::new(),
    }
}

/// The direct children of a node, to change them.
pub(crate) fn children_mut(e: &mut IdedExpr) -> Vec<&mut IdedExpr> {
    fn entries(entries: &mut [kube_cel::cel::common::ast::IdedEntryExpr]) -> Vec<&mut IdedExpr> {
        entries
            .iter_mut()
            .flat_map(|e| match &mut e.expr {
                EntryExpr::MapEntry(me) => vec![&mut me.key, &mut me.value],
                EntryExpr::StructField(f) => vec![&mut f.value],
            })
            .collect()
    }
    match &mut e.expr {
        Expr::Call(c) => c
            .target
            .as_deref_mut()
            .into_iter()
            .chain(c.args.iter_mut())
            .collect(),
        Expr::Comprehension(c) => vec![
            &mut c.iter_range,
            &mut c.accu_init,
            &mut c.loop_cond,
            &mut c.loop_step,
            &mut c.result,
        ],
        Expr::List(l) => l.elements.iter_mut().collect(),
        Expr::Map(m) => entries(&mut m.entries),
        Expr::Struct(s) => entries(&mut s.entries),
        Expr::Select(s) => vec![&mut s.operand],
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Vec::new(),
    }
}

fn entries(entries: &[kube_cel::cel::common::ast::IdedEntryExpr]) -> Vec<&IdedExpr> {
    entries
        .iter()
        .flat_map(|e| match &e.expr {
            EntryExpr::MapEntry(me) => vec![&me.key, &me.value],
            EntryExpr::StructField(f) => vec![&f.value],
        })
        .collect()
}

/// The depth of a tree (a leaf is 1), without recursion.
pub(crate) fn depth(e: &IdedExpr) -> usize {
    let mut deepest = 0;
    let mut pending = vec![(e, 1usize)];
    while let Some((e, d)) = pending.pop() {
        deepest = deepest.max(d);
        pending.extend(children(e).into_iter().map(|c| (c, d + 1)));
    }
    deepest
}

/// Drops a tree of any depth without recursion (the derived drop recurses once per level).
pub(crate) fn dismantle(e: IdedExpr) {
    let mut pending = vec![e];
    while let Some(mut e) = pending.pop() {
        match &mut e.expr {
            Expr::Call(c) => {
                if let Some(t) = c.target.take() {
                    pending.push(*t);
                }
                pending.append(&mut c.args);
            }
            Expr::Comprehension(c) => {
                let c = &mut **c;
                for part in [
                    &mut c.iter_range,
                    &mut c.accu_init,
                    &mut c.loop_cond,
                    &mut c.loop_step,
                    &mut c.result,
                ] {
                    pending.push(std::mem::take(part));
                }
            }
            Expr::List(l) => pending.append(&mut l.elements),
            Expr::Map(m) => take_entries(&mut m.entries, &mut pending),
            Expr::Struct(s) => take_entries(&mut s.entries, &mut pending),
            Expr::Select(s) => pending.push(std::mem::take(&mut *s.operand)),
            Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
        }
    }
}

fn take_entries(
    entries: &mut Vec<kube_cel::cel::common::ast::IdedEntryExpr>,
    pending: &mut Vec<IdedExpr>,
) {
    for entry in entries.drain(..) {
        match entry.expr {
            EntryExpr::MapEntry(me) => {
                pending.push(me.key);
                pending.push(me.value);
            }
            EntryExpr::StructField(f) => pending.push(f.value),
        }
    }
}
