//! Which parts of `self` (and `oldSelf`) the rules of a node can reach, so that only those are
//! converted to CEL values: a rule `self.spec.replicas > 0` at the root of a large object needs
//! one integer, not the whole object. [`Reach`] does the same for every variable of a set of
//! programs (admission policies' `object`, `params`, `request`, ...), and says which variables
//! they do not use at all.

use std::collections::BTreeMap;

use kube_cel::cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

/// The whole value, for values below a bare use.
pub(crate) static ALL: Projection = Projection::All;

/// The reachable part of a value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Projection {
    /// The whole value.
    All,
    /// Only these fields (by the name rules use, i.e. escaped), each with its own projection.
    Fields(BTreeMap<String, Projection>),
}

impl Projection {
    /// Nothing reachable yet.
    pub(crate) fn none() -> Projection {
        Projection::Fields(BTreeMap::new())
    }

    /// Widens this projection with the uses of `self`/`oldSelf` in `expr`.
    pub(crate) fn add_uses(&mut self, expr: &IdedExpr) {
        walk(expr, &mut |root, path| {
            if root == "self" || root == "oldSelf" {
                self.add_path(path);
            }
        });
    }

    fn add_path(&mut self, path: &[&str]) {
        match self {
            Projection::All => {}
            Projection::Fields(fields) => match path.split_first() {
                None => *self = Projection::All,
                Some((first, rest)) => fields
                    .entry((*first).to_owned())
                    .or_insert_with(Projection::none)
                    .add_path(rest),
            },
        }
    }

    /// The projection of field `name` (escaped), or `None` when the field is not reachable.
    pub(crate) fn field(&self, name: &str) -> Option<&Projection> {
        match self {
            Projection::All => Some(&Projection::All),
            Projection::Fields(fields) => fields.get(name),
        }
    }
}

/// The parts of each variable that a set of programs can reach ([`Reach::add`]): a variable
/// the programs never name is not reached at all, and of one they only select fields from,
/// only those fields (and below them, only the fields selected from those).
///
/// A name is counted wherever it appears as an identifier, also where a comprehension's own
/// variable of that name shadows it: that can only widen what counts as reached, never
/// narrow it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reach {
    vars: BTreeMap<String, Projection>,
}

impl Reach {
    /// Nothing reached.
    pub fn new() -> Self {
        Self::default()
    }

    /// Widens what is reached with the uses in `expr` (the caller provides a stack deep
    /// enough for it, as `Reach::add` does).
    pub(crate) fn add_uses(&mut self, expr: &IdedExpr) {
        walk(expr, &mut |root, path| {
            self.vars
                .entry(root.to_owned())
                .or_insert_with(Projection::none)
                .add_path(path);
        });
    }

    /// Whether any of the programs names the variable `name`.
    pub fn uses(&self, name: &str) -> bool {
        self.vars.contains_key(name)
    }

    /// The reachable part of the variable `name`, `None` when no program names it.
    pub(crate) fn projection(&self, name: &str) -> Option<&Projection> {
        self.vars.get(name)
    }
}

/// The variable and the chain of field selections on it that `expr` is, if it is one.
fn select_chain(expr: &IdedExpr) -> Option<(&str, Vec<&str>)> {
    match &expr.expr {
        Expr::Ident(name) => Some((name.as_str(), Vec::new())),
        Expr::Select(s) => {
            let (root, mut chain) = select_chain(&s.operand)?;
            chain.push(&s.field);
            Some((root, chain))
        }
        // `x.?f`
        Expr::Call(c) if c.func_name == crate::optional::OPT_SELECT && c.target.is_none() => {
            match c.args.as_slice() {
                [operand, field] => match &field.expr {
                    Expr::Literal(LiteralValue::String(f)) => {
                        let (root, mut chain) = select_chain(operand)?;
                        chain.push(f.inner());
                        Some((root, chain))
                    }
                    _ => None,
                },
                _ => None,
            }
        }
        _ => None,
    }
}

/// Calls `use_path` with the variable and the selections of every maximal selection chain on
/// a variable in `expr`.
fn walk<'e>(expr: &'e IdedExpr, use_path: &mut dyn FnMut(&'e str, &[&'e str])) {
    if let Some((root, chain)) = select_chain(expr) {
        use_path(root, &chain);
        return;
    }
    match &expr.expr {
        Expr::Select(s) => walk(&s.operand, use_path),
        Expr::Call(c) => {
            if let Some(t) = c.target.as_deref() {
                walk(t, use_path);
            }
            for a in &c.args {
                walk(a, use_path);
            }
        }
        Expr::List(l) => l.elements.iter().for_each(|e| walk(e, use_path)),
        Expr::Map(m) => m.entries.iter().for_each(|e| match &e.expr {
            EntryExpr::MapEntry(me) => {
                walk(&me.key, use_path);
                walk(&me.value, use_path);
            }
            EntryExpr::StructField(f) => walk(&f.value, use_path),
        }),
        Expr::Struct(s) => s.entries.iter().for_each(|e| match &e.expr {
            EntryExpr::MapEntry(me) => {
                walk(&me.key, use_path);
                walk(&me.value, use_path);
            }
            EntryExpr::StructField(f) => walk(&f.value, use_path),
        }),
        Expr::Comprehension(c) => {
            // a comprehension's own variables count as variables of that name: see `Reach`
            for e in [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ] {
                walk(e, use_path);
            }
        }
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn projection(rules: &[&str]) -> Projection {
        let mut p = Projection::none();
        for r in rules {
            let e = kube_cel::cel::parser::Parser::new()
                .parse(r)
                .expect("test rule parses");
            p.add_uses(&e);
        }
        p
    }

    #[test]
    fn selections_narrow_the_projection() {
        let p = projection(&["self.spec.replicas > 0 && has(self.spec.min)"]);
        let spec = p.field("spec").expect("spec reachable");
        assert_eq!(spec.field("replicas"), Some(&Projection::All));
        assert_eq!(spec.field("min"), Some(&Projection::All));
        assert_eq!(spec.field("max"), None);
        assert_eq!(p.field("status"), None);
    }

    #[test]
    fn bare_uses_reach_everything() {
        assert_eq!(projection(&["self == oldSelf"]), Projection::All);
        let p = projection(&["self.items.all(i, i.name != '')", "size(self.labels) < 3"]);
        assert_eq!(p.field("items"), Some(&Projection::All));
        assert_eq!(p.field("labels"), Some(&Projection::All));
    }
}
