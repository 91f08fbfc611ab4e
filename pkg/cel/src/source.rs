//! The text of an expression before the parser sees it: upstream's size limit, limits on how
//! deeply it nests and how long its operator chains are (both make the parser, the evaluator and
//! every walk of the syntax tree recurse), and the rewrite of unary operator runs.
//!
//! The check is one linear pass over the tokens of CEL's grammar, lexed here the way the
//! grammar's lexer does (longest match, the same fallbacks on malformed literals), so that
//! brackets inside string literals are not counted and brackets the parser will see are.
//!
//! Two measures, both over the tokens the parser will see:
//! - **nesting**: brackets (`(`, `[`, `{`, calls, indexes) and conditionals (`a ? b : c ? ...`)
//!   open at once. Each costs the parser a deep descent through the grammar's rules.
//! - **recursion**: along any path from the root, the nesting plus the operators of every
//!   enclosing operand chain (`+`, `*`, `==`, `in`, `.`, `[`, `?:`, ...): an upper bound on the
//!   depth of the syntax tree the parser builds (left-recursive chains such as `1 + 1 + ...` and
//!   `a.b.c...` nest one node per operator). `&&` and `||` are not counted: the parser builds
//!   balanced trees of them.

use std::borrow::Cow;

/// Upstream's (cel-go's) limit on the size of an expression, in code points.
pub const MAX_EXPRESSION_CODE_POINTS: usize = 100_000;
/// How many brackets and conditionals may be open at once.
pub const MAX_NESTING_DEPTH: usize = 64;
/// The limit on the recursion measure (nesting plus operator chains along a path).
pub const MAX_RECURSION_DEPTH: usize = 250;

/// Why an expression is refused before parsing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum LimitError {
    /// More code points than [`MAX_EXPRESSION_CODE_POINTS`] (upstream's wording).
    #[error("expression code point size exceeds limit: size: {size}, limit {limit}")]
    Size {
        /// The size of the expression, in code points.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// Brackets and conditionals nested deeper than [`MAX_NESTING_DEPTH`].
    #[error(
        "expression nesting limit exceeded: {limit} (brackets, calls, indexes and conditionals nested at once)"
    )]
    Nesting {
        /// The limit.
        limit: usize,
    },
    /// Nesting plus operator chains over [`MAX_RECURSION_DEPTH`] (upstream's wording).
    #[error("expression recursion limit exceeded: {limit}")]
    Recursion {
        /// The limit.
        limit: usize,
    },
}

/// An expression that passed the limits, ready for the parser.
#[derive(Debug)]
pub(crate) struct Prepared<'s> {
    /// The text for the parser: the source with runs of unary operators reduced.
    pub(crate) text: Cow<'s, str>,
    /// The deepest nesting found.
    pub(crate) nesting: usize,
    /// The recursion measure.
    pub(crate) recursion: usize,
}

/// Checks `source` against the limits and reduces runs of unary operators.
///
/// The `cel` crate's parser turns any even run of `!` or `-` into one operator (`!!x` is read
/// as `!x`); cel-go drops an even run and keeps one operator of an odd run. The runs are
/// reduced here the same way, by blanking operators (columns in error messages stay right).
pub(crate) fn prepare(source: &str) -> Result<Prepared<'_>, LimitError> {
    // A byte count bounds the code point count from above: only count when it could matter.
    if source.len() > MAX_EXPRESSION_CODE_POINTS {
        let size = source.chars().count();
        if size > MAX_EXPRESSION_CODE_POINTS {
            return Err(LimitError::Size {
                size,
                limit: MAX_EXPRESSION_CODE_POINTS,
            });
        }
    }
    let tokens = lex(source);
    let (nesting, recursion) = measure(&tokens)?;
    let blank = unary_runs(&tokens);
    let text = if blank.is_empty() {
        Cow::Borrowed(source)
    } else {
        let mut bytes = source.as_bytes().to_vec();
        for at in blank {
            bytes[at] = b' ';
        }
        // only ASCII `!` and `-` were replaced by ASCII spaces
        Cow::Owned(String::from_utf8(bytes).expect("invariant: ASCII replaced by ASCII"))
    };
    Ok(Prepared {
        text,
        nesting,
        recursion,
    })
}

/// What a token is, as far as the limits and the unary rewrite care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Something that ends an operand: an identifier, a literal, `true`, `false`, `null`.
    Operand,
    /// `in`, a relational operator spelled as a word.
    In,
    /// `(`, `[` or `{`.
    Open,
    /// `)`, `]` or `}`.
    Close,
    /// `.`
    Dot,
    /// `,`
    Comma,
    /// `?`
    Question,
    /// `!`
    Bang,
    /// `-`
    Minus,
    /// A binary operator of a left-recursive chain: `+ * / % < <= > >= == !=`.
    Binary,
    /// `&&` or `||`: the parser builds balanced trees of them.
    Logic,
    /// `:`
    Colon,
}

/// One token: its kind and the byte offset where it starts.
#[derive(Clone, Copy, Debug)]
struct Token {
    kind: Kind,
    at: usize,
}

/// The tokens of `s` as CEL's lexer produces them. Text the lexer reports as an error (and
/// skips) yields no token; comments and whitespace neither.
fn lex(s: &str) -> Vec<Token> {
    let b = s.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        let push = |tokens: &mut Vec<Token>, kind| tokens.push(Token { kind, at: start });
        match c {
            b' ' | b'\t' | b'\r' | b'\n' | 0x0c => i += 1,
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'0'..=b'9' => {
                i = number(b, i);
                push(&mut tokens, Kind::Operand);
            }
            b'.' if b.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                i = number(b, i);
                push(&mut tokens, Kind::Operand);
            }
            b'A'..=b'Z' | b'a'..=b'z' | b'_' => {
                let mut end = i + 1;
                while end < b.len() && (b[end].is_ascii_alphanumeric() || b[end] == b'_') {
                    end += 1;
                }
                let word = &s[i..end];
                let quote = b.get(end).copied().filter(|q| *q == b'"' || *q == b'\'');
                let prefix = matches!(word, "r" | "R" | "b" | "B" | "br" | "bR" | "Br" | "BR");
                if let (Some(_), true) = (quote, prefix) {
                    let raw = word.contains(['r', 'R']);
                    match string(b, end, raw) {
                        Lexed::Token(next) => {
                            i = next;
                            push(&mut tokens, Kind::Operand);
                            continue;
                        }
                        // the identifier (the prefix) was the longest accepted token
                        Lexed::Error(_) => {}
                    }
                }
                i = end;
                push(
                    &mut tokens,
                    if word == "in" {
                        Kind::In
                    } else {
                        Kind::Operand
                    },
                );
            }
            b'"' | b'\'' => match string(b, i, false) {
                Lexed::Token(next) => {
                    i = next;
                    push(&mut tokens, Kind::Operand);
                }
                Lexed::Error(next) => i = next,
            },
            b'`' => {
                // ESC_IDENTIFIER: '`' [A-Za-z0-9_./ -]+ '`'
                let mut end = i + 1;
                while end < b.len()
                    && (b[end].is_ascii_alphanumeric() || b"_./- ".contains(&b[end]))
                {
                    end += 1;
                }
                if end > i + 1 && b.get(end) == Some(&b'`') {
                    i = end + 1;
                    push(&mut tokens, Kind::Operand);
                } else {
                    i = skip_failed(s, end);
                }
            }
            b'=' | b'&' | b'|' => {
                // only the doubled forms are tokens
                if b.get(i + 1) == Some(&c) {
                    i += 2;
                    push(
                        &mut tokens,
                        if c == b'=' { Kind::Binary } else { Kind::Logic },
                    );
                } else {
                    i = skip_failed(s, i + 1);
                }
            }
            b'!' | b'<' | b'>' => {
                if b.get(i + 1) == Some(&b'=') {
                    i += 2;
                    push(&mut tokens, Kind::Binary);
                } else {
                    i += 1;
                    push(
                        &mut tokens,
                        if c == b'!' { Kind::Bang } else { Kind::Binary },
                    );
                }
            }
            b'(' | b'[' | b'{' => {
                i += 1;
                push(&mut tokens, Kind::Open);
            }
            b')' | b']' | b'}' => {
                i += 1;
                push(&mut tokens, Kind::Close);
            }
            b'.' => {
                i += 1;
                push(&mut tokens, Kind::Dot);
            }
            b',' => {
                i += 1;
                push(&mut tokens, Kind::Comma);
            }
            b'?' => {
                i += 1;
                push(&mut tokens, Kind::Question);
            }
            b':' => {
                i += 1;
                push(&mut tokens, Kind::Colon);
            }
            b'-' => {
                i += 1;
                push(&mut tokens, Kind::Minus);
            }
            b'+' | b'*' | b'/' | b'%' => {
                i += 1;
                push(&mut tokens, Kind::Binary);
            }
            // no token starts with this character: the lexer reports it and skips it
            _ => i = skip_failed(s, i),
        }
    }
    tokens
}

/// Where lexing goes on after a token failed at byte `fail`: the lexer consumes the character
/// it failed on (none at the end).
fn skip_failed(s: &str, fail: usize) -> usize {
    match s.get(fail..).and_then(|rest| rest.chars().next()) {
        Some(c) => fail + c.len_utf8(),
        None => s.len(),
    }
}

/// The end of the number literal starting at `i` (longest match of NUM_FLOAT, NUM_INT,
/// NUM_UINT; an incomplete fraction or exponent is not part of it).
fn number(b: &[u8], i: usize) -> usize {
    let digits = |mut j: usize| {
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        j
    };
    let exponent = |j: usize| -> usize {
        if j < b.len() && (b[j] == b'e' || b[j] == b'E') {
            let mut k = j + 1;
            if k < b.len() && (b[k] == b'+' || b[k] == b'-') {
                k += 1;
            }
            let end = digits(k);
            if end > k {
                return end;
            }
        }
        j
    };
    if b[i] == b'.' {
        return exponent(digits(i + 1));
    }
    if b[i] == b'0'
        && b.get(i + 1) == Some(&b'x')
        && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
    {
        let mut j = i + 2;
        while j < b.len() && b[j].is_ascii_hexdigit() {
            j += 1;
        }
        if j < b.len() && (b[j] == b'u' || b[j] == b'U') {
            j += 1;
        }
        return j;
    }
    let j = digits(i);
    if b.get(j) == Some(&b'.') && b.get(j + 1).is_some_and(u8::is_ascii_digit) {
        return exponent(digits(j + 1));
    }
    let e = exponent(j);
    if e > j {
        return e;
    }
    if j < b.len() && (b[j] == b'u' || b[j] == b'U') {
        return j + 1;
    }
    j
}

/// The outcome of lexing a string literal.
enum Lexed {
    /// A literal ending before this byte.
    Token(usize),
    /// No literal: lexing goes on at this byte (after the failed text).
    Error(usize),
}

/// Lexes the string literal whose opening quote is at `q` (after any `r`/`b` prefix).
///
/// A triple-quoted literal that does not close falls back to the empty literal of its first
/// two quotes (the longest token the lexer had accepted); otherwise a literal that does not
/// close, or holds an invalid escape, is an error up to and including the character it failed
/// on.
fn string(b: &[u8], q: usize, raw: bool) -> Lexed {
    let quote = b[q];
    let triple = b.get(q + 1) == Some(&quote) && b.get(q + 2) == Some(&quote);
    if triple {
        let mut j = q + 3;
        loop {
            if j + 2 < b.len() && b[j] == quote && b[j + 1] == quote && b[j + 2] == quote {
                return Lexed::Token(j + 3);
            }
            if j >= b.len() {
                break;
            }
            if !raw && b[j] == b'\\' {
                match escape(b, j) {
                    Ok(next) => j = next,
                    Err(_) => break,
                }
            } else {
                j += 1;
            }
        }
        // `''` was accepted on the way: the lexer falls back to it
        return Lexed::Token(q + 2);
    }
    let mut j = q + 1;
    loop {
        let Some(&c) = b.get(j) else {
            return Lexed::Error(b.len());
        };
        if c == quote {
            return Lexed::Token(j + 1);
        }
        if c == b'\n' || c == b'\r' {
            return Lexed::Error(j + 1);
        }
        if !raw && c == b'\\' {
            match escape(b, j) {
                Ok(next) => j = next,
                Err(fail) => return Lexed::Error(fail_next(b, fail)),
            }
        } else {
            j += 1;
        }
    }
}

/// The byte after the character at `fail` (the lexer consumes the character it failed on).
fn fail_next(b: &[u8], fail: usize) -> usize {
    if fail >= b.len() {
        return b.len();
    }
    // step over a whole UTF-8 sequence
    let mut j = fail + 1;
    while j < b.len() && (b[j] & 0xC0) == 0x80 {
        j += 1;
    }
    j
}

/// Checks the escape sequence at `j` (a backslash): the byte after it, or the byte it fails on.
fn escape(b: &[u8], j: usize) -> Result<usize, usize> {
    let hex = |from: usize, n: usize| -> Result<usize, usize> {
        for k in from..from + n {
            if !b.get(k).is_some_and(u8::is_ascii_hexdigit) {
                return Err(k);
            }
        }
        Ok(from + n)
    };
    match b.get(j + 1) {
        Some(
            b'a' | b'b' | b'f' | b'n' | b'r' | b't' | b'v' | b'"' | b'\'' | b'\\' | b'?' | b'`',
        ) => Ok(j + 2),
        Some(b'x' | b'X') => hex(j + 2, 2),
        Some(b'u') => hex(j + 2, 4),
        Some(b'U') => hex(j + 2, 8),
        Some(b'0'..=b'3') => {
            for k in j + 2..j + 4 {
                if !b.get(k).is_some_and(|c| (b'0'..=b'7').contains(c)) {
                    return Err(k);
                }
            }
            Ok(j + 4)
        }
        _ => Err(j + 1),
    }
}

/// Whether a token ends an operand (so that a following `-` is binary, `?` a conditional, `[`
/// an index and `(` a call).
fn ends_operand(t: Option<&Token>) -> bool {
    t.is_some_and(|t| matches!(t.kind, Kind::Operand | Kind::Close))
}

/// One open bracket (or the whole expression) while measuring.
///
/// Between commas, a bracket holds one element: a chain of conditionals (`c ? a : b`, each
/// nesting the next) over balanced trees of `&&` and `||` over terms, each term a chain of
/// operators over operands, some of them bracketed groups.
#[derive(Default)]
struct Group {
    /// Chain operators in the current term.
    ops: usize,
    /// The deepest measure of the groups closed in the current term.
    inner: usize,
    /// The deepest measure of the finished terms of the current element.
    terms: usize,
    /// `&&` and `||` in the current element.
    logic: usize,
    /// Conditionals in the current element.
    conditionals: usize,
    /// The deepest measure of the finished elements.
    best: usize,
}

impl Group {
    fn finish_term(&mut self) {
        self.terms = self.terms.max(self.ops + self.inner);
        self.ops = 0;
        self.inner = 0;
    }

    fn finish_element(&mut self) {
        self.finish_term();
        // a balanced tree of n logical operators is about log2(n) deep; `&&` trees under
        // `||` trees at most twice that
        let logic = 2 * (usize::BITS - self.logic.leading_zeros()) as usize;
        self.best = self.best.max(self.conditionals + logic + self.terms);
        *self = Group {
            best: self.best,
            ..Group::default()
        };
    }

    /// The measure of the group once closed.
    fn close(mut self) -> usize {
        self.finish_element();
        1 + self.best
    }
}

/// The deepest nesting and the recursion measure of `tokens`, or the limit they exceed.
fn measure(tokens: &[Token]) -> Result<(usize, usize), LimitError> {
    let mut stack = vec![Group::default()];
    // brackets open plus conditionals of every open element
    let mut nesting = 0usize;
    let mut deepest = 0usize;
    for (i, t) in tokens.iter().enumerate() {
        let prev = i.checked_sub(1).and_then(|p| tokens.get(p));
        let top = stack.last_mut().expect("invariant: the root group stays");
        match t.kind {
            Kind::Open => {
                // an index or a call on an operand is also a link of its chain
                if ends_operand(prev) {
                    top.ops += 1;
                }
                stack.push(Group::default());
                nesting += 1;
            }
            Kind::Close => {
                if stack.len() > 1 {
                    let group = stack.pop().expect("invariant: checked above");
                    nesting -= 1 + group.conditionals;
                    let measure = group.close();
                    let parent = stack.last_mut().expect("invariant: the root group stays");
                    parent.inner = parent.inner.max(measure);
                }
            }
            Kind::Comma => {
                nesting -= top.conditionals;
                top.finish_element();
            }
            Kind::Question => {
                // after an operand a conditional; else the `?` of optional syntax
                if ends_operand(prev) {
                    top.finish_term();
                    top.conditionals += 1;
                    nesting += 1;
                }
            }
            Kind::Colon => top.finish_term(),
            Kind::Logic => {
                top.finish_term();
                top.logic += 1;
            }
            Kind::Dot | Kind::Binary | Kind::In => top.ops += 1,
            Kind::Minus => {
                if ends_operand(prev) {
                    top.ops += 1;
                }
            }
            Kind::Operand | Kind::Bang => {}
        }
        deepest = deepest.max(nesting);
        if deepest > MAX_NESTING_DEPTH {
            return Err(LimitError::Nesting {
                limit: MAX_NESTING_DEPTH,
            });
        }
    }
    // close what is left open, as the parser would have nested it
    while stack.len() > 1 {
        let group = stack.pop().expect("invariant: checked above");
        let measure = group.close();
        let parent = stack.last_mut().expect("invariant: the root group stays");
        parent.inner = parent.inner.max(measure);
    }
    let mut root = stack.pop().expect("invariant: the root group stays");
    root.finish_element();
    if root.best > MAX_RECURSION_DEPTH {
        return Err(LimitError::Recursion {
            limit: MAX_RECURSION_DEPTH,
        });
    }
    Ok((deepest, root.best))
}

/// The byte offsets of the unary operators to blank: all of an even run, all but the first of
/// an odd run (a run of `-` starts where `-` cannot be binary).
fn unary_runs(tokens: &[Token]) -> Vec<usize> {
    let mut blank = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let kind = tokens[i].kind;
        let unary = match kind {
            Kind::Bang => true,
            Kind::Minus => !ends_operand(i.checked_sub(1).and_then(|p| tokens.get(p))),
            _ => false,
        };
        if !unary {
            i += 1;
            continue;
        }
        let mut end = i + 1;
        while end < tokens.len() && tokens[end].kind == kind {
            end += 1;
        }
        let keep_first = (end - i) % 2 == 1;
        let from = if keep_first { i + 1 } else { i };
        blank.extend(tokens[from..end].iter().map(|t| t.at));
        i = end;
    }
    blank
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(s: &str) -> Result<(usize, usize), LimitError> {
        prepare(s).map(|p| (p.nesting, p.recursion))
    }

    #[test]
    fn brackets_inside_literals_and_comments_are_not_counted() {
        assert_eq!(measured("'((((' + \"[[[[\" // ((((\n").unwrap(), (0, 1));
        assert_eq!(measured("r'\\(' + b'''(((''' + '\\'(('").unwrap(), (0, 2));
        assert_eq!(measured("f(a, g(b))").unwrap().0, 2);
    }

    #[test]
    fn malformed_literals_fall_back_like_the_lexer() {
        // an unterminated triple quote is the empty string `''` and then a quote that swallows
        // the rest of the line
        assert_eq!(measured("'''((( \n (").unwrap().0, 1);
        // an invalid escape ends the failed text at the bad character; what follows is code
        assert_eq!(measured("'\\q((").unwrap().0, 2);
        // a prefix whose string fails is an identifier
        assert_eq!(measured("r'(\n(").unwrap().0, 1);
    }

    #[test]
    fn chains_count_towards_recursion() {
        assert_eq!(measured("1 + 2 * 3").unwrap().1, 2);
        assert_eq!(measured("a.b.c[0]").unwrap().1, 4);
        assert_eq!(measured("a || b && c").unwrap().1, 4);
        let many = vec!["self.a == 1"; 5_000].join(" || ");
        assert_eq!(measured(&many).unwrap().1, 2 + 2 * 13);
        assert_eq!(measured("(1 + 1) + 1").unwrap().1, 3);
        assert_eq!(measured("1e-5 - -1").unwrap().1, 1);
        assert_eq!(measured("a ? b : c ? d : e").unwrap(), (2, 2));
        assert_eq!(measured("[a ? b : c, d ? e : f]").unwrap(), (2, 2));
        assert_eq!(measured("self.?a.orValue(1)").unwrap().0, 1);
    }

    #[test]
    fn limits_are_enforced() {
        let deep = format!("{}1{}", "[".repeat(65), "]".repeat(65));
        assert_eq!(
            measured(&deep),
            Err(LimitError::Nesting {
                limit: MAX_NESTING_DEPTH
            })
        );
        let ok = format!("{}1{}", "[".repeat(64), "]".repeat(64));
        assert_eq!(measured(&ok).unwrap().0, 64);
        let chain = vec!["1"; 252].join("+");
        assert_eq!(
            measured(&chain),
            Err(LimitError::Recursion {
                limit: MAX_RECURSION_DEPTH
            })
        );
        let big = "1".repeat(MAX_EXPRESSION_CODE_POINTS + 1);
        assert_eq!(
            measured(&big),
            Err(LimitError::Size {
                size: MAX_EXPRESSION_CODE_POINTS + 1,
                limit: MAX_EXPRESSION_CODE_POINTS
            })
        );
        // code points, not bytes
        let wide = format!("'{}'", "é".repeat(MAX_EXPRESSION_CODE_POINTS - 2));
        assert!(measured(&wide).is_ok());
    }

    #[test]
    fn unary_runs_are_reduced_like_cel_go() {
        let text = |s: &str| prepare(s).unwrap().text.into_owned();
        assert_eq!(text("!!x"), "  x");
        assert_eq!(text("!!!x"), "!  x");
        assert_eq!(text("! !x"), "   x");
        assert_eq!(text("--1"), "  1");
        assert_eq!(text("a - -1"), "a - -1");
        assert_eq!(text("a - --1"), "a -   1");
        assert_eq!(text("x != y"), "x != y");
        assert_eq!(text("'!!'"), "'!!'");
        assert_eq!(text("1e-5"), "1e-5");
    }
}
