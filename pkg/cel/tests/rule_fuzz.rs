//! The rule-compilation fuzz target (`genplane_cel::fuzzing::exercise`, also run by `fuzz/` under
//! cargo-fuzz) driven on stable Rust, on a thread with a tokio worker's 2 MiB stack: valid rules,
//! hostile ones (huge, deeply nested with every bracket, long chains of every binary operator,
//! runs of unary operators, long member and call chains, conditionals, nested macros, unicode,
//! escapes, malformed literals), at, below and above each limit, then deterministic mutations
//! of all of them. The process must survive and every input must end (a panic fails the test).

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use genplane_cel::fuzzing::exercise;
use genplane_cel::{MAX_EXPRESSION_CODE_POINTS, MAX_NESTING_DEPTH, MAX_RECURSION_DEPTH};

/// How many mutated inputs one run tries.
const MUTATIONS: usize = 1_200;

/// A small deterministic generator (xorshift64*), so that a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % (n.max(1) as u64)).unwrap()
    }
    fn byte(&mut self) -> u8 {
        self.next().to_le_bytes()[0]
    }
}

/// Rules that compile against the fuzz schema, and near misses.
const VALID: &[&str] = &[
    "self.n > 0",
    "self.s.startsWith('a') && self.s.size() < 10",
    "self.l.all(x, x > 0) && self.l.exists(x, x == 2)",
    "self.l.map(x, x * 2).filter(y, y > 2).size() >= 0",
    "self.m.all(k, self.m[k] != '')",
    "has(self.o.a) ? self.o.a.b[0] == 1 : true",
    "self.?s.orValue('') == self.s",
    "oldSelf.optMap(o, o.n == self.n).orValue(true)",
    "self == oldSelf",
    "self.set == oldSelf.set",
    "self.t < timestamp('2030-01-01T00:00:00Z') && self.d > duration('1s')",
    "self.s.matches('^[a-z]+$') && !self.s.contains('!')",
    "int(self.f) == 1 || double(self.n) > 1.0 || uint(1) == 1u",
    "type(self.q) == int || type(self.q) == string",
    "isQuantity('1Gi') && quantity('1Gi').isGreaterThan(quantity('1Mi'))",
    "self.s.split('b').join('-') != '' && self.s.lowerAscii() == self.s",
    "[1, 2, 3].exists_one(x, x == 2) && {'a': 1}.a == 1",
    "!!self.b == self.b && --self.n == self.n",
    "self.l[?0].orValue(0) >= 0 && self.m[?'k'].hasValue() || true",
    "b'abc' != b'' && r'\\d' == '\\\\d' && '''tri''' == 'tri' && \"\\u00e9\" == 'é'",
    "self.n / 0 == 1",
    "self.n % 0 == 1",
    "9223372036854775807 + 1 > 0",
    "size(self.s) < 3",
    "self.o.a.b.c.d.e == 1",
    "Foo{a: 1} == 1",
    "self.nope == 1",
    "self.n +",
    "",
    "// just a comment\ntrue",
];

/// `open`, `inner` and `close` nested `n` deep.
fn nest(open: &str, inner: &str, close: &str, n: usize) -> String {
    format!("{}{inner}{}", open.repeat(n), close.repeat(n))
}

/// Inputs around every limit and of every hostile shape.
fn hostile() -> Vec<String> {
    let mut out = Vec::new();
    let depths = [
        MAX_NESTING_DEPTH - 1,
        MAX_NESTING_DEPTH,
        MAX_NESTING_DEPTH + 1,
        10_000,
    ];
    for &n in &depths {
        out.push(nest("[", "1", "]", n));
        out.push(nest("(", "true", ")", n));
        out.push(nest("{1:", "1", "}", n));
        out.push(nest("{'a':", "1", "}", n) + ".a == 1");
        out.push(nest("f(", "1", ")", n));
        out.push(nest("int(", "self.n", ")", n) + " > 0");
        out.push(nest("self.l[", "0", "]", n) + " > 0");
        out.push(format!("{}true", "self.b ? true : ".repeat(n)));
        out.push(format!("{}true", "self.b ? (".repeat(n)) + &") : false".repeat(n));
        out.push(nest("optional.of(", "1", ")", n) + ".hasValue()");
        let mut all = "x > 0".to_owned();
        for _ in 0..n.min(200) {
            all = format!("self.l.all(x, {all})");
        }
        out.push(all);
        out.push("(".repeat(n));
        out.push(")".repeat(n));
        out.push("[".repeat(n) + &")".repeat(n));
    }
    out.push("(".repeat(100_000));
    let chains = [
        MAX_RECURSION_DEPTH - 1,
        MAX_RECURSION_DEPTH,
        MAX_RECURSION_DEPTH + 1,
        5_000,
    ];
    for &n in &chains {
        for op in [
            "+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "in", "&&", "||",
        ] {
            out.push(vec!["1"; n].join(&format!(" {op} ")));
        }
        out.push(format!("self.o{} == 1", ".a".repeat(n)));
        out.push(format!("self.o{} == 1", ".?a".repeat(n)));
        out.push(format!("self.o{} == 1", "['a']".repeat(n)));
        out.push(format!("self.s{}.size() > 0", ".lowerAscii()".repeat(n)));
        out.push(format!("self.n{}", " > 0 == true".repeat(n / 2)));
    }
    for n in [1, 2, 3, 1_000, 49_999, 50_000] {
        out.push(format!("{}self.b", "!".repeat(n)));
        out.push(format!("{}self.n > 0", "-".repeat(n)));
        out.push(format!("self.n {}1 > 0", "- ".repeat(n)));
    }
    // sizes around the code point limit (the parser takes some 50 µs per non-ASCII character in
    // a debug build: wide characters up to the limit only where the limit refuses them)
    for n in [
        MAX_EXPRESSION_CODE_POINTS - 12,
        MAX_EXPRESSION_CODE_POINTS - 11,
        MAX_EXPRESSION_CODE_POINTS,
    ] {
        out.push(format!("self.s == '{}'", "x".repeat(n)));
    }
    out.push(format!(
        "self.s == '{}'",
        "é".repeat(MAX_EXPRESSION_CODE_POINTS - 11)
    ));
    out.push(format!("self.s == '{}'", "é".repeat(2_000)));
    out.push(vec!["self.b"; 2_000].join(" && "));
    out.push(format!(
        "'{}' == ''",
        "\\x41\\u00e9\\U0001F600\\101\\n".repeat(2_000)
    ));
    // malformed literals that hide or reveal brackets
    for s in [
        "'(((",
        "'''(((",
        "\"\\q(((\" + (((1)))",
        "r'(((\n(((1)))",
        "b'''\\z''' + [[[",
        "`a.b-c/d e` == 1",
        "`((((`",
        "=(((1)))",
        "&(|[1]|)",
        "1e-5 - -1.5e+3 == 0x1Fu",
        "'\\u12' + '\\U0001F60' + '\\x4g' + '\\08'",
        "\u{feff}self.n\u{a0}> 0 // ((((((\n",
        "self.?\u{1F600} == 1",
        "self.s == 'ünïcödé ✓ 😀' && self.s.charAt(0) == 'ü'",
        "{?'a': optional.none(), ?'b': self.?s}.size() >= 0 && [?self.?n, ?optional.none()] != []",
    ] {
        out.push(s.to_owned());
    }
    out
}

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    const TOKENS: &[&str] = &[
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        ".",
        ",",
        "?",
        ":",
        "!",
        "-",
        "+",
        "*",
        "/",
        "%",
        "==",
        "!=",
        "<",
        "<=",
        "&&",
        "||",
        " in ",
        "'",
        "\"",
        "'''",
        "r'",
        "b'",
        "\\",
        "`",
        "//",
        "\n",
        "\0",
        "self",
        "oldSelf",
        ".all(x, ",
        ".optMap(o, ",
        ".?",
        "[?",
        "{?",
        "é",
        "😀",
        "0x",
        "1e",
        "u",
    ];
    let mut input = seeds[rng.below(seeds.len())].clone();
    for _ in 0..=rng.below(4) {
        let len = input.len();
        match rng.below(6) {
            0 if len > 1 => {
                let at = 1 + rng.below(len - 1);
                input[at] ^= 1 << rng.below(8);
            }
            1 => input.truncate(1 + rng.below(len.max(1))),
            2 => {
                let at = 1 + rng
                    .below(len.saturating_sub(1) + 1)
                    .min(len.saturating_sub(1));
                let token = TOKENS[rng.below(TOKENS.len())].as_bytes();
                let times = 1 + rng.below(4);
                let at = at.min(input.len());
                input.splice(at..at, token.repeat(times));
            }
            3 => {
                let other = &seeds[rng.below(seeds.len())];
                let from = 1 + rng.below(other.len().saturating_sub(1));
                let at = 1 + rng.below(len.saturating_sub(1));
                input.truncate(at.min(input.len()));
                input.extend_from_slice(&other[from.min(other.len())..]);
            }
            4 if len > 2 => {
                let at = 1 + rng.below(len - 1);
                let end = (at + 1 + rng.below(24)).min(len);
                let span = input[at..end].to_vec();
                for _ in 0..=rng.below(8) {
                    input.splice(end..end, span.iter().copied());
                }
            }
            _ => input[0] = rng.byte(),
        }
    }
    input
}

#[test]
fn arbitrary_rules_compile_or_fail_cleanly_on_a_worker_stack() {
    let started = Instant::now();
    let worker = std::thread::Builder::new()
        .stack_size(2 * 1024 * 1024)
        .spawn(|| {
            let t0 = Instant::now();
            let mut seeds: Vec<Vec<u8>> = Vec::new();
            let valid = VALID.iter().map(|s| ((*s).to_owned(), [0u8, 3].as_slice()));
            let hostile = hostile().into_iter().map(|s| (s, [1u8].as_slice()));
            for (rule, options) in valid.chain(hostile) {
                for &flags in options {
                    let mut seed = vec![flags];
                    seed.extend_from_slice(rule.as_bytes());
                    seeds.push(seed);
                }
                // the same text as a messageExpression
                let mut seed = vec![2u8];
                seed.extend_from_slice(b"true\0");
                seed.extend_from_slice(rule.as_bytes());
                seeds.push(seed);
            }
            let mut slowest = (Duration::ZERO, 0);
            for (i, seed) in seeds.iter().enumerate() {
                let t = Instant::now();
                exercise(seed);
                slowest = slowest.max((t.elapsed(), i));
            }
            let seeded = t0.elapsed();
            let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
            // mutations of the small seeds (mutating the huge ones only repeats their cost)
            let small: Vec<Vec<u8>> = seeds.iter().filter(|s| s.len() < 4_096).cloned().collect();
            for _ in 0..MUTATIONS {
                exercise(&mutate(&mut rng, &small));
            }
            (seeds.len(), seeded, slowest)
        })
        .unwrap();
    let (seeds, seeded, slowest) = worker.join().expect("the fuzzed rules ran to the end");
    eprintln!(
        "{seeds} seeds in {seeded:?} (slowest: #{} in {:?}), {MUTATIONS} mutations in {:?}",
        slowest.1,
        slowest.0,
        started.elapsed().saturating_sub(seeded),
    );
}
