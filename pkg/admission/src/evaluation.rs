//! Where the CEL of admission runs: on the request's task while it is cheap, off the runtime's
//! worker threads once it is not, so that no evaluation holds a worker other requests need.
//!
//! An evaluation is bounded (upstream's per-call limit and budgets, counted as
//! [`genplane_cel::cost`] counts them, and a second of time per expression), but bounded is
//! not short: a handful of tenants' writes, each running expensive policies on a worker, would
//! hold every worker and stall every other request. Most evaluations cost a few hundred units
//! and microseconds, far less than moving work to another thread, so each series of
//! evaluations (a policy binding's expressions for one param, a webhook's match conditions, an
//! object's CRD rules) runs inline with the allowance [`INLINE`]; past it the series stops
//! ([`genplane_cel::Error::Yielded`]) and runs again from the start in
//! [`tokio::task::block_in_place`], which hands the worker's other tasks to another thread while
//! this one computes. CEL has no side effects, so running it again only costs what was spent
//! inline.
//!
//! The allowance: tokio's guidance is at most 10 to 100 µs between awaits. A cost unit takes
//! 16 to 60 ns in a release build for loops over literals and JSON values (measured with
//! `measure_time_per_cost_unit` in `pkg/cel/tests/cost.rs`), so 2,000 units are 30 to 120 µs;
//! the interpreter's copies can make a unit cost microseconds, which the 100 µs of time bound.
//! Moving off the worker costs about 20 µs (`off_worker_costs` below: 29.5 µs a call against
//! 10.6 µs for a task alone, on a busy 2-core machine), so an evaluation that stays inline
//! costs at most a few times what moving it would. The expressions of common policies
//! (selections, comparisons, a loop over a few dozen items) cost tens to hundreds of units and
//! stay inline.

use genplane_cel::Inline;

/// What a series of evaluations may spend on a runtime worker before it moves off (see the
/// module docs for the measurement).
pub const INLINE: Inline = Inline {
    units: 2_000,
    time: std::time::Duration::from_micros(100),
};

/// Upstream's budget for the match conditions of one webhook, or of one policy binding and
/// param (`RuntimeCELCostBudgetMatchConditions`).
pub const MATCH_CONDITIONS_BUDGET: u64 = 2_500_000;

/// Upstream's budget for the other expressions of one policy binding and param
/// (`RuntimeCELCostBudget`).
pub const POLICY_BUDGET: u64 = 10_000_000;

/// Runs `evaluate`, a series of evaluations that puts the inline allowance it is given into
/// its budgets ([`genplane_cel::Budget::inline`]) and answers `None` when one of them yielded:
/// first here with [`INLINE`], then, if it yielded, again without allowance where it may take
/// long ([`off_worker`]).
pub fn run<T>(mut evaluate: impl FnMut(Option<Inline>) -> Option<T>) -> T {
    if let Some(done) = evaluate(Some(INLINE)) {
        return done;
    }
    off_worker(|| evaluate(None))
        .expect("invariant: evaluations without inline allowance never yield")
}

/// Why a series of evaluations stopped before its end.
pub(crate) enum Halt {
    /// An evaluation yielded: the series runs again off the runtime's workers.
    Yield,
    /// The budget is spent: the series fails with this message (upstream's).
    OutOfBudget(String),
}

/// `Err` for an evaluation error that stops its series (a yield, a spent budget); `Ok` for
/// the others, which are the expression's own.
pub(crate) fn halt(error: &genplane_cel::Error) -> Result<(), Halt> {
    match error {
        genplane_cel::Error::Yielded => Err(Halt::Yield),
        genplane_cel::Error::OutOfBudget => Err(Halt::OutOfBudget(error.to_string())),
        _ => Ok(()),
    }
}

/// Runs `work` where a long computation holds no worker of the runtime: in
/// [`tokio::task::block_in_place`] on a multi-threaded runtime's worker (its other tasks move
/// to a new worker meanwhile), else on this thread (a current-thread runtime, which has no
/// other worker to hand them to, or no runtime at all).
pub fn off_worker<R>(work: impl FnOnce() -> R) -> R {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}

#[cfg(test)]
mod tests {
    /// What moving an evaluation off the worker costs (the other side of the inline
    /// allowance). Run in a release build:
    /// `cargo test --release -p genplane-admission off_worker_costs -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement, not a test: run by hand in a release build"]
    fn off_worker_costs() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            let runs = 20_000u32;
            // each from a task of its own, as requests are
            let started = std::time::Instant::now();
            for _ in 0..runs {
                tokio::spawn(async { super::off_worker(|| std::hint::black_box(1)) })
                    .await
                    .expect("the task");
            }
            let moved = started.elapsed();
            let started = std::time::Instant::now();
            for _ in 0..runs {
                tokio::spawn(async { std::hint::black_box(1) })
                    .await
                    .expect("the task");
            }
            let inline = started.elapsed();
            eprintln!(
                "off_worker: {:.1} us per call ({:.1} us with a task alone)",
                moved.as_secs_f64() * 1e6 / f64::from(runs),
                inline.as_secs_f64() * 1e6 / f64::from(runs)
            );
        });
    }
}
