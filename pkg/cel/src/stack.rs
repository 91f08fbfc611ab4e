//! Enough stack for the recursive parts: the `cel` crate's parser and evaluator, and this
//! crate's walks of syntax trees, all recurse once per level of the expression.
//!
//! The limits of [`crate::source`] bound how deep an expression goes; the work on it runs on
//! the caller's stack when enough of it is left, else on a fresh segment sized for the depth
//! (`stacker`), so that a rule at the limits runs on any thread (a tokio worker has 2 MiB) and in
//! a debug build, where frames are several times larger than in a release build.

/// Stack for the parser per level of nesting (measured in a debug build: about 180 KiB).
const PARSE_PER_NESTING: usize = 256 * 1024;
/// Stack for the parser per level of the recursion measure (operator chains).
const PARSE_PER_LEVEL: usize = 16 * 1024;
/// Stack for the evaluator and the walks per level of syntax tree (measured in a debug build:
/// about 40 KiB).
const PER_LEVEL: usize = 64 * 1024;
/// Stack every piece of work may need besides its levels.
const BASE: usize = 512 * 1024;

/// Runs the parser for an expression with this nesting and recursion measure.
pub(crate) fn for_parse<R>(nesting: usize, recursion: usize, f: impl FnOnce() -> R) -> R {
    let need = BASE
        .saturating_add(nesting.saturating_mul(PARSE_PER_NESTING))
        .saturating_add(recursion.saturating_mul(PARSE_PER_LEVEL));
    stacker::maybe_grow(need, need, f)
}

/// Runs work that recurses over a syntax tree `depth` levels deep (evaluation, analysis,
/// rewrites, dropping it).
pub(crate) fn for_tree<R>(depth: usize, f: impl FnOnce() -> R) -> R {
    let need = BASE.saturating_add(depth.saturating_mul(PER_LEVEL));
    stacker::maybe_grow(need, need, f)
}
