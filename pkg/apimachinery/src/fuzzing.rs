//! Fuzzing on stable Rust, and the entry points of this crate's parsers.
//!
//! Each parser of genplane has an `exercise`-style entry point in the crate that owns it: it
//! takes arbitrary bytes, runs the parser (and what is built on its result), and panics only
//! on a bug (a panic inside, or a broken round trip). The same entry points run in two ways:
//! under cargo-fuzz from `fuzz/` (nightly, coverage-guided, unbounded), and in the test command
//! through [`drive`]: realistic seeds, then a bounded number of deterministic mutations of
//! them, so that every run tries the same inputs and a failure reproduces.
//!
//! This module's own entry points are [`selectors`] (label and field selectors) and
//! [`durations`] (Go durations).

use std::collections::BTreeMap;

use crate::{duration, fields, labels};

/// A small deterministic generator (xorshift64*), so that a failure reproduces.
#[derive(Clone, Debug)]
pub struct Rng(pub u64);

impl Rng {
    /// The next number.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        // The remainder is below `n`, which is a usize.
        (self.next_u64() % (n.max(1) as u64)) as usize
    }

    /// A byte.
    pub fn byte(&mut self) -> u8 {
        self.next_u64().to_le_bytes()[0]
    }
}

/// Bytes that parsers treat specially, spliced in by [`mutate`].
const INTERESTING: &[&[u8]] = &[
    b"\0",
    b"\xff",
    b"\xc3\xa9",
    b"\\",
    b"\"",
    b"'",
    b"/",
    b"..",
    b"%",
    b"%2F",
    b",",
    b"=",
    b"!=",
    b"==",
    b"(",
    b")",
    b"[",
    b"]",
    b"{",
    b"}",
    b":",
    b"-",
    b".",
    b"e9",
    b"999999999999",
    b"\n",
    b" ",
    b"\t",
    b"~",
    b"*",
];

/// One mutation of a seed picked from `seeds` (which must not be empty): bit flips,
/// truncations, insertions of random or interesting bytes, overwrites, splices with another
/// seed, and repeated spans.
pub fn mutate(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut input = seeds[rng.below(seeds.len())].clone();
    for _ in 0..=rng.below(3) {
        let len = input.len();
        match rng.below(7) {
            0 if len > 0 => {
                let at = rng.below(len);
                input[at] ^= 1 << rng.below(8);
            }
            1 => input.truncate(rng.below(len + 1)),
            2 => {
                let at = rng.below(len + 1);
                let bytes: Vec<u8> = (0..=rng.below(8)).map(|_| rng.byte()).collect();
                input.splice(at..at, bytes);
            }
            3 => {
                let at = rng.below(len + 1);
                let bytes = INTERESTING[rng.below(INTERESTING.len())];
                input.splice(at..at, bytes.iter().copied());
            }
            4 => {
                let other = &seeds[rng.below(seeds.len())];
                let from = rng.below(other.len() + 1);
                input.truncate(rng.below(len + 1));
                input.extend_from_slice(&other[from..]);
            }
            5 if len > 0 => {
                let at = rng.below(len);
                let end = (at + 1 + rng.below(32)).min(len);
                let span = input[at..end].to_vec();
                for _ in 0..=rng.below(4) {
                    input.splice(end..end, span.iter().copied());
                }
            }
            _ if len > 0 => {
                let at = rng.below(len);
                let end = (at + 1 + rng.below(16)).min(len);
                for byte in &mut input[at..end] {
                    *byte = rng.byte();
                }
            }
            _ => input.push(rng.byte()),
        }
    }
    input
}

/// Runs `exercise` on every seed, then on `mutations` mutations of them (from a fixed
/// starting point, so every run tries the same inputs). A panic names the input.
pub fn drive(seeds: &[Vec<u8>], mutations: usize, mut exercise: impl FnMut(&[u8])) {
    let run = |input: &[u8], exercise: &mut dyn FnMut(&[u8])| {
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| exercise(input)));
        if let Err(panic) = caught {
            eprintln!(
                "the failing input: {:?}",
                String::from_utf8_lossy(input)
                    .chars()
                    .take(2000)
                    .collect::<String>()
            );
            std::panic::resume_unwind(panic);
        }
    };
    for seed in seeds {
        run(seed, &mut exercise);
    }
    if seeds.is_empty() {
        return;
    }
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for _ in 0..mutations {
        let input = mutate(&mut rng, seeds);
        run(&input, &mut exercise);
    }
}

/// Label and field selectors: the input (read lossily as UTF-8) parsed as both. What parses
/// is matched against a few label and field sets, and its string form parses back to the
/// same selector.
///
/// # Panics
///
/// When parsing panics, or a parsed selector's string form does not parse back to it.
pub fn selectors(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let sets: [BTreeMap<String, String>; 3] = [
        BTreeMap::new(),
        [("app", "web"), ("tier", "front")]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .into(),
        [("metadata.name", "a"), ("spec.x", "")]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .into(),
    ];
    if let Ok(selector) = labels::Selector::parse(&text) {
        for set in &sets {
            selector.matches(set);
        }
        let again = labels::Selector::parse(&selector.to_string());
        assert_eq!(again.as_ref(), Ok(&selector), "{text:?} as {selector}");
    }
    if let Ok(selector) = fields::Selector::parse(&text) {
        for set in &sets {
            selector.matches(set);
        }
        let again = fields::Selector::parse(&selector.to_string());
        assert_eq!(again.as_ref(), Ok(&selector), "{text:?} as {selector}");
    }
}

/// Go durations: the input (read lossily as UTF-8) parsed with sign and without; what parses
/// is written as Go writes it and parses back to the same length.
///
/// # Panics
///
/// When parsing panics, or a duration's string form does not parse back to it.
pub fn durations(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let unsigned = duration::parse(&text);
    match duration::parse_signed(&text) {
        Ok(signed) => {
            match &unsigned {
                Ok(magnitude) => assert_eq!(*magnitude, signed.magnitude, "{text:?}"),
                Err(e) => assert!(signed.negative, "{text:?}: {e}"),
            }
            // The longest negative duration has no positive counterpart to be written as.
            if signed.magnitude.as_nanos() > i64::MAX as u128 {
                return;
            }
            let written = duration::format(signed.magnitude);
            assert_eq!(
                duration::parse(&written).map_err(|e| e.to_string()),
                Ok(signed.magnitude),
                "{text:?} written as {written:?}"
            );
        }
        Err(_) => assert!(unsigned.is_err(), "{text:?}"),
    }
}
