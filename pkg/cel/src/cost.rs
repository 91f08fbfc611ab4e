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
//! - Each evaluation gets a meter, which starts at the number of nodes outside any
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
//! cel-go shares them: an accumulated `map`/`filter` list is copied at every iteration, a
//! selected field at every selection (`object.data[k]` inside a loop over `object.data`
//! copies the whole map at every key). That work is in neither cel-go's model nor this count,
//! and a unit of it can take a thousand times longer than usual (measured in a release build:
//! 16-60 ns per unit for loops over literals and over JSON values, 1.5-4.5 µs for `filter`
//! and `map` over 2,000 items, 27 µs for a loop over a 2,000-key map that selects from the
//! map at each key). So the meter also reads the clock (every 64 charges): an evaluation
//! that has run for [`PER_CALL_TIME_LIMIT`] is cancelled as if past its limit, as are the
//! evaluations of a series that has run for the time its budget stands for at that rate (10 s
//! for a policy binding), and one past its inline allowance's time yields. The ticks and builders are where the clock is read, so
//! an evaluation overruns these times by at most one iteration's work.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

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

/// How long one evaluation may run, whatever it counted: ten times what upstream's per-call
/// limit stands for ("roughly 0.1 second"). The count leaves out the interpreter's copies
/// (see the module docs), which can make a unit cost a thousand times more than usual; this
/// is what bounds them.
pub const PER_CALL_TIME_LIMIT: Duration = Duration::from_secs(1);

/// How long a series of evaluations may run for each unit of its budget, at the rate of
/// [`PER_CALL_TIME_LIMIT`] for the per-call limit (a policy binding's 10,000,000: 10 s).
pub(crate) fn time_for(units: u64) -> Option<Instant> {
    let per_unit = PER_CALL_TIME_LIMIT.as_nanos() / u128::from(crate::PER_CALL_LIMIT);
    let nanos = u64::try_from(u128::from(units).saturating_mul(per_unit)).ok()?;
    Instant::now().checked_add(Duration::from_nanos(nanos))
}

/// The clock is read at every this many charges (a read costs about as much as a charge).
const CLOCK_EVERY: u64 = 64;

/// The count of one evaluation.
#[derive(Debug)]
pub(crate) struct Meter {
    spent: AtomicU64,
    charges: AtomicU64,
    /// Why it stopped, once it did (0: it did not; see [`Meter::stop_code`]).
    stop: AtomicU8,
    /// Cancelled above this.
    limit: u64,
    /// Cancelled after this.
    cancel_at: Instant,
    /// Yields above this (`u64::MAX`: never).
    yield_above: u64,
    /// Yields after this.
    yield_at: Option<Instant>,
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
    /// A meter that has counted `start`, cancelling above `limit` (or past
    /// [`PER_CALL_TIME_LIMIT`], or `deadline`: its series' time) and yielding above
    /// `yield_above` (or after `yield_at`).
    pub(crate) fn new(
        start: u64,
        limit: u64,
        (yield_above, yield_at): (u64, Option<Instant>),
        deadline: Option<Instant>,
    ) -> Self {
        let own = Instant::now() + PER_CALL_TIME_LIMIT;
        Meter {
            spent: AtomicU64::new(start),
            charges: AtomicU64::new(0),
            stop: AtomicU8::new(0),
            limit,
            cancel_at: deadline.map_or(own, |d| d.min(own)),
            yield_above,
            yield_at,
        }
    }

    /// Counts `cost`; why the evaluation must stop, if it must (and from then on, every time).
    pub(crate) fn charge(&self, cost: u64) -> Result<(), Stop> {
        if let Some(stop) = self.stopped() {
            return Err(stop);
        }
        let spent = self
            .spent
            .fetch_add(cost, Ordering::Relaxed)
            .saturating_add(cost);
        let stop = if spent > self.limit {
            Some(Stop::Cancelled)
        } else if spent > self.yield_above {
            Some(Stop::Yield)
        } else if self
            .charges
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(CLOCK_EVERY)
        {
            let now = Instant::now();
            if now > self.cancel_at {
                Some(Stop::Cancelled)
            } else if self.yield_at.is_some_and(|at| now > at) {
                Some(Stop::Yield)
            } else {
                None
            }
        } else {
            None
        };
        match stop {
            Some(stop) => {
                self.stop.store(Self::stop_code(stop), Ordering::Relaxed);
                Err(stop)
            }
            None => Ok(()),
        }
    }

    /// What was counted.
    pub(crate) fn spent(&self) -> u64 {
        self.spent.load(Ordering::Relaxed)
    }

    /// Why the evaluation stopped, if a charge stopped it.
    pub(crate) fn stopped(&self) -> Option<Stop> {
        match self.stop.load(Ordering::Relaxed) {
            1 => Some(Stop::Cancelled),
            2 => Some(Stop::Yield),
            _ => None,
        }
    }

    fn stop_code(stop: Stop) -> u8 {
        match stop {
            Stop::Cancelled => 1,
            Stop::Yield => 2,
        }
    }
}

/// How much a series of evaluations may spend on an async runtime's worker before it yields
/// ([`crate::Error::Yielded`]): cost units, and time (the count leaves out the interpreter's
/// copies).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inline {
    /// Cost units, as counted here.
    pub units: u64,
    /// Time, from when the budget is made.
    pub time: Duration,
}

/// What a series of evaluations may still spend (see the module docs): a total for all of
/// them, each also held to its program's per-call limit, and, for evaluations on an async
/// runtime's worker, an inline allowance past which they yield ([`crate::Error::Yielded`]).
#[derive(Clone, Debug)]
pub struct Budget {
    remaining: u64,
    /// The inline allowance: the units left, until when.
    inline: Option<(u64, Instant)>,
    /// When the series' time is up (its total at the rate of [`PER_CALL_TIME_LIMIT`]): its
    /// evaluations are cancelled then.
    deadline: Option<Instant>,
}

impl Budget {
    /// A budget of `total` cost units, without inline allowance; its evaluations are cancelled
    /// once the series has run for the time `total` stands for (1 µs a unit: 10 s for a
    /// policy binding's 10,000,000).
    pub fn new(total: u64) -> Self {
        Budget {
            remaining: total,
            inline: None,
            deadline: time_for(total),
        }
    }

    /// No total: each evaluation is held to its per-call limit only.
    pub fn unlimited() -> Self {
        Budget::new(u64::MAX)
    }

    /// The same budget, whose evaluations yield once the series has spent `inline` in all,
    /// from now (`None`: never; for a series run again where it may take long).
    pub fn inline(mut self, inline: Option<Inline>) -> Self {
        self.inline = inline.map(|i| (i.units, Instant::now() + i.time));
        self
    }

    /// What is left of the total.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// A meter for one evaluation of a program whose per-call limit is `limit` and whose nodes
    /// outside loops are `start`.
    pub(crate) fn meter(&self, start: u64, limit: u64) -> Meter {
        Meter::new(start, limit, yield_at(self.inline), self.deadline)
    }

    /// Whether an evaluation estimated at `cost` must yield before it starts.
    pub(crate) fn must_yield(&self, cost: u64) -> bool {
        self.inline
            .is_some_and(|(units, until)| cost > units || Instant::now() > until)
    }

    /// Charges what an evaluation cost; false when that was more than what was left (the
    /// budget is then spent).
    pub(crate) fn settle(&mut self, cost: u64) -> bool {
        if let Some((units, _)) = &mut self.inline {
            *units = units.saturating_sub(cost);
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

/// Where an evaluation yields, for an inline allowance (units left, until when): never
/// without one.
pub(crate) fn yield_at(inline: Option<(u64, Instant)>) -> (u64, Option<Instant>) {
    match inline {
        Some((units, until)) => (units, Some(until)),
        None => (u64::MAX, None),
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
