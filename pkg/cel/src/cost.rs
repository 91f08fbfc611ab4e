//! The actual cost of an evaluation, counted while it runs, and the budgets that stop it.
//!
//! Upstream's cel-go counts the cost of an evaluation as it goes (one unit per node it
//! evaluates, more for calls on long strings and lists) and cancels it past the per-call limit
//! (`operation cancelled: actual cost limit exceeded`); the callers then charge what each
//! expression cost to a budget (10,000,000 for a policy binding or an object's CRD rules,
//! 2,500,000 for match conditions).
//!
//! The `cel` crate's interpreter cannot be interrupted from outside and counts nothing, and the
//! estimate charged before a program runs ([`crate::Program::evaluate`]) is only as good as the
//! sizes it knows: a comprehension over a list literal, over the result of `map` or `split`,
//! or over anything else not sized by a variable's value was counted as size 1, so nested
//! comprehensions over literal lists ran 10^7 iterations for one request. The estimate cannot be
//! made a sound upper bound without a bound on every function's result, so this module counts
//! instead, inside the evaluators:
//!
//! - Compilation puts a *tick* into the condition of every comprehension:
//!   `loop_cond` becomes `@k8s_tick(n, loop_cond)`, where `n` is the number of nodes the
//!   condition and the step evaluate in one iteration (a nested comprehension's range, start
//!   and result; its own iterations tick by themselves). The condition runs once before every
//!   iteration, in both evaluators, so every iteration is counted, whatever the range is.
//! - Each evaluation gets a [`Meter`], which starts at the number of nodes outside any
//!   comprehension's loop and adds `n` at every tick. The interpreter finds it as the variable
//!   `@k8s_meter` (not a name an expression can write) through the tick function, the direct
//!   evaluator ([`crate::Direct`]) holds it. Past the limit the tick fails, which ends the
//!   evaluation (an error that `||` or `&&` swallow still leaves the meter over the limit, and
//!   every later tick fails at once); the evaluation's answer is then
//!   [`crate::Error::CostLimitExceeded`], whatever the interpreter returned.
//! - Functions that build values far larger than their inputs count what they build before
//!   building it: `lists.range(n)` (n), `replace` (an empty pattern squares the length; the
//!   result's length), `format` (a precision `%.<n>f` of a format string; its receiver
//!   passes through `@k8s_format_guard`).
//! - The estimate on the actual values is still charged before the program runs: it is what
//!   counts the size-dependent cost of string and list functions, which ticks do not see. An
//!   evaluation's cost, for the budget, is the larger of the two.
//!
//! A [`Budget`] carries what a series of evaluations may still spend and, for evaluations
//! that run on an async runtime's worker thread, an *inline allowance*: once the series has
//! spent it, the running evaluation stops with [`crate::Error::Yielded`] and the caller runs
//! the whole series again where a long computation holds no worker (CEL has no side effects,
//! so running it again is harmless; what was spent inline is at most the allowance).
//!
//! What ticks bound is the number of iterations. The interpreter also copies values where
//! cel-go shares them (an accumulated `map`/`filter` list is copied at every iteration, a
//! selected field at every selection), work that neither cel-go's model nor this count
//! charges; the copies of an evaluation are bounded by the iterations counted times the size
//! of the values (at most a request's size each).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use kube_cel::cel::common::ast::{CallExpr, Expr, IdedExpr, LiteralValue};
use kube_cel::cel::objects::{Opaque, Value};
use kube_cel::cel::{Context, ExecutionError, FunctionContext};

/// The function every comprehension's condition is wrapped in: `@k8s_tick(n, condition)`.
pub(crate) const TICK: &str = "@k8s_tick";
/// The variable the interpreter's tick finds the evaluation's [`Meter`] in.
pub(crate) const METER: &str = "@k8s_meter";

/// Why a meter stopped an evaluation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// Past the per-call limit.
    Cancelled,
    /// Past the inline allowance: to be run again off the async runtime.
    Yield,
}

/// The count of one evaluation.
#[derive(Debug)]
pub(crate) struct Meter {
    spent: AtomicU64,
    /// Cancelled above this.
    limit: u64,
    /// Yields above this (`u64::MAX`: never).
    yield_above: u64,
}

impl PartialEq for Meter {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for Meter {}

impl Opaque for Meter {
    fn runtime_type_name(&self) -> &str {
        METER
    }
}

impl Meter {
    /// A meter that has counted `start`, cancelling above `limit` and yielding above
    /// `yield_above`.
    pub(crate) fn new(start: u64, limit: u64, yield_above: u64) -> Self {
        Meter {
            spent: AtomicU64::new(start),
            limit,
            yield_above,
        }
    }

    /// Counts `cost`; why the evaluation must stop, if it must.
    pub(crate) fn charge(&self, cost: u64) -> Result<(), Stop> {
        let spent = self
            .spent
            .fetch_add(cost, Ordering::Relaxed)
            .saturating_add(cost);
        self.check(spent)
    }

    /// What was counted.
    pub(crate) fn spent(&self) -> u64 {
        self.spent.load(Ordering::Relaxed)
    }

    /// Why the evaluation must stop, if it must.
    pub(crate) fn stopped(&self) -> Option<Stop> {
        self.check(self.spent()).err()
    }

    fn check(&self, spent: u64) -> Result<(), Stop> {
        if spent > self.limit {
            Err(Stop::Cancelled)
        } else if spent > self.yield_above {
            Err(Stop::Yield)
        } else {
            Ok(())
        }
    }
}

/// What a series of evaluations may still spend (see the module docs): a total for all of
/// them, each also held to its program's per-call limit, and, for evaluations on an async
/// runtime's worker, an inline allowance past which they yield ([`crate::Error::Yielded`]).
#[derive(Clone, Debug)]
pub struct Budget {
    remaining: u64,
    inline: Option<u64>,
}

impl Budget {
    /// A budget of `total` cost units, without inline allowance.
    pub fn new(total: u64) -> Self {
        Budget {
            remaining: total,
            inline: None,
        }
    }

    /// No total: each evaluation is held to its per-call limit only.
    pub fn unlimited() -> Self {
        Budget::new(u64::MAX)
    }

    /// The same budget, whose evaluations yield once the series has spent `allowance` in all.
    pub fn inline(mut self, allowance: u64) -> Self {
        self.inline = Some(allowance);
        self
    }

    /// The same budget without inline allowance (to run the series again where it may take
    /// long).
    pub fn not_inline(mut self) -> Self {
        self.inline = None;
        self
    }

    /// What is left of the total.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// A meter for one evaluation of a program whose per-call limit is `limit` and whose nodes
    /// outside loops are `start`.
    pub(crate) fn meter(&self, start: u64, limit: u64) -> Meter {
        Meter::new(start, limit, self.inline.unwrap_or(u64::MAX))
    }

    /// Whether an evaluation estimated at `cost` must yield before it starts.
    pub(crate) fn must_yield(&self, cost: u64) -> bool {
        self.inline.is_some_and(|allowance| cost > allowance)
    }

    /// Charges what an evaluation cost; false when that was more than what was left (the
    /// budget is then spent).
    pub(crate) fn settle(&mut self, cost: u64) -> bool {
        if let Some(allowance) = &mut self.inline {
            *allowance = allowance.saturating_sub(cost);
        }
        match self.remaining.checked_sub(cost) {
            Some(left) => {
                self.remaining = left;
                true
            }
            None => {
                self.remaining = 0;
                false
            }
        }
    }
}

/// Adds the tick function and the metered builders to a root context (after the libraries:
/// the builders replace theirs).
pub(crate) fn register(ctx: &mut Context<'static>) {
    ctx.add_function(TICK, tick);
    ctx.add_function(FORMAT_GUARD, format_guard);
    ctx.add_function("lists.range", range);
    ctx.add_function("replace", replace);
}

/// The function the receiver of `format` is passed through: `@k8s_format_guard(s)`.
pub(crate) const FORMAT_GUARD: &str = "@k8s_format_guard";

/// Counts `cost` on the meter of the evaluation `ftx` belongs to; the cancellation past its
/// limit. Without a meter (a program run outside an evaluation: never in this crate), the cost
/// is held to the per-call limit alone.
fn charge(ftx: &FunctionContext<'_, '_>, cost: u64) -> Result<(), ExecutionError> {
    let stopped = match ftx.ptx.get_variable(METER) {
        Some(meter) => match Value::try_from(meter.as_ref()) {
            Ok(Value::Opaque(opaque)) => opaque
                .downcast_ref::<Meter>()
                .map_or(cost > crate::PER_CALL_LIMIT, |m| m.charge(cost).is_err()),
            _ => cost > crate::PER_CALL_LIMIT,
        },
        None => cost > crate::PER_CALL_LIMIT,
    };
    if stopped {
        return Err(ftx.error(CANCELLED));
    }
    Ok(())
}

/// `@k8s_tick(n, condition)`: counts `n` on the evaluation's meter, then is the condition.
fn tick(ftx: &FunctionContext<'_, '_>) -> Result<Value, ExecutionError> {
    let [cost, condition] = ftx.args else {
        return Err(ExecutionError::NoSuchOverload);
    };
    let cost = match &cost.expr {
        Expr::Literal(LiteralValue::Int(n)) => u64::try_from(*n.inner()).unwrap_or(0),
        _ => 0,
    };
    charge(ftx, cost)?;
    Value::resolve(condition, ftx.ptx)
}

/// What building a string of `len` bytes costs (cel-go's traversal factor).
fn string_cost(len: usize) -> u64 {
    (len as u64).div_ceil(10)
}

/// `lists.range(n)`: `[0, ..., n-1]`, counting one unit per element before building it.
fn range(ftx: &FunctionContext<'_, '_>, n: i64) -> Result<Value, ExecutionError> {
    let Ok(len) = u64::try_from(n) else {
        return Err(ftx.error("range argument must be non-negative"));
    };
    charge(ftx, len)?;
    Ok(Value::List(Arc::new((0..n).map(Value::Int).collect())))
}

/// `s.replace(old, new)` and `s.replace(old, new, n)` (`n` negative: every occurrence, as Go's
/// `strings.Replace`), counting the size of the result before building it: an empty `old`
/// matches around every character, so each replace can square the length.
fn replace(
    ftx: &FunctionContext<'_, '_>,
    kube_cel::cel::extractors::This(this): kube_cel::cel::extractors::This<Arc<String>>,
    kube_cel::cel::extractors::Arguments(args): kube_cel::cel::extractors::Arguments,
) -> Result<Value, ExecutionError> {
    let (from, to, limit) = match args.as_slice() {
        [Value::String(from), Value::String(to)] => (from, to, None),
        [Value::String(from), Value::String(to), Value::Int(n)] => {
            (from, to, usize::try_from(*n).ok())
        }
        _ => return Err(ftx.error("expected string arguments")),
    };
    let matches = if from.is_empty() {
        this.chars().count() + 1
    } else {
        this.matches(from.as_str()).count()
    };
    let replaced = limit.map_or(matches, |n| n.min(matches));
    let len = this
        .len()
        .saturating_add(replaced.saturating_mul(to.len()))
        .saturating_sub(replaced.saturating_mul(from.len()));
    charge(ftx, string_cost(len))?;
    let result = match limit {
        Some(n) => this.replacen(from.as_str(), to, n),
        None => this.replace(from.as_str(), to),
    };
    Ok(Value::String(Arc::new(result)))
}

/// `@k8s_format_guard(s)`: `s`, after counting the longest result a precision of its
/// (`%.<digits>f`) asks for.
fn format_guard(ftx: &FunctionContext<'_, '_>, format: Value) -> Result<Value, ExecutionError> {
    if let Value::String(s) = &format {
        let mut asked = 0usize;
        let mut rest = s.as_str();
        while let Some(at) = rest.find("%.") {
            rest = &rest[at + 2..];
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            let precision = rest[..digits].parse::<usize>().unwrap_or(usize::MAX);
            asked = asked.saturating_add(precision);
        }
        charge(ftx, string_cost(asked))?;
    }
    Ok(format)
}

/// cel-go's error for an evaluation past its cost limit.
pub(crate) const CANCELLED: &str = "operation cancelled: actual cost limit exceeded";

/// The scope of one evaluation: `scope` with the meter bound.
pub(crate) fn metered<'c>(scope: &'c Context<'_>, meter: &Arc<Meter>) -> Context<'c> {
    let mut inner = scope.new_inner_scope();
    inner.add_variable_from_value(METER, Value::Opaque(Arc::clone(meter) as Arc<dyn Opaque>));
    inner
}

/// The nodes of `expr` an evaluation visits once: all but the conditions and steps of
/// comprehensions, which are counted per iteration by their ticks.
pub(crate) fn nodes_outside_loops(expr: &IdedExpr) -> u64 {
    let mut count = 0u64;
    let mut pending = vec![expr];
    while let Some(e) = pending.pop() {
        count = count.saturating_add(1);
        match &e.expr {
            Expr::Comprehension(c) => {
                pending.extend([&c.iter_range, &c.accu_init, &c.result]);
            }
            _ => pending.extend(crate::parse::children(e)),
        }
    }
    count
}

/// Wraps the condition of every comprehension of `expr` in a tick counting one iteration
/// (its condition and step, nested loops aside), and the receiver of every `format` in
/// [`FORMAT_GUARD`]. `next_id` is the first free node id.
pub(crate) fn insert_ticks(expr: &mut IdedExpr, next_id: &mut u64) {
    if let Expr::Call(call) = &mut expr.expr
        && call.func_name == "format"
        && let Some(target) = call.target.as_deref_mut()
    {
        let receiver = std::mem::take(target);
        *target = IdedExpr {
            id: *next_id,
            expr: Expr::Call(CallExpr {
                func_name: FORMAT_GUARD.to_owned(),
                target: None,
                args: vec![receiver],
            }),
        };
        *next_id += 1;
    }
    if let Expr::Comprehension(c) = &mut expr.expr {
        for part in [
            &mut c.iter_range,
            &mut c.accu_init,
            &mut c.loop_cond,
            &mut c.loop_step,
            &mut c.result,
        ] {
            insert_ticks(part, next_id);
        }
        let per_iteration = nodes_outside_loops(&c.loop_cond)
            .saturating_add(nodes_outside_loops(&c.loop_step))
            .max(1);
        let condition = std::mem::take(&mut c.loop_cond);
        let cost = IdedExpr {
            id: *next_id,
            expr: Expr::Literal(LiteralValue::Int(
                i64::try_from(per_iteration).unwrap_or(i64::MAX).into(),
            )),
        };
        c.loop_cond = IdedExpr {
            id: *next_id + 1,
            expr: Expr::Call(CallExpr {
                func_name: TICK.to_owned(),
                target: None,
                args: vec![cost, condition],
            }),
        };
        *next_id += 2;
        return;
    }
    for child in crate::parse::children_mut(expr) {
        insert_ticks(child, next_id);
    }
}
