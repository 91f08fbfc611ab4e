//! The label selector lexer and parser.
//!
//! The grammar, and the error messages, are upstream's:
//!
//! ```text
//! selector     ::= "" | requirement ("," requirement)*
//! requirement  ::= "!" KEY | KEY | KEY set-op "(" values ")" | KEY exact-op VALUE?
//! set-op       ::= "in" | "notin"
//! exact-op     ::= "=" | "==" | "!=" | ">" | "<"
//! values       ::= VALUE? ("," VALUE?)*
//! ```
//!
//! Whitespace (space, tab, CR, LF) separates tokens and is otherwise ignored. Every run of bytes
//! that is neither whitespace nor one of `=!(),<>` is an identifier; `in` and `notin` are
//! keywords only where an operator is expected, so they are valid keys and values.

use std::collections::BTreeSet;

use super::{Operator, Requirement, key_error};

/// What the lexer found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Token {
    End,
    OpenPar,
    ClosedPar,
    Comma,
    Not,
    Equals,
    DoubleEquals,
    NotEquals,
    Greater,
    Less,
    In,
    NotIn,
    Identifier,
}

fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// Splits `input` into tokens, the last one always [`Token::End`].
///
/// Operators are matched longest first (`!=` before `!`, `==` before `=`), as upstream does.
fn lex(input: &str) -> Vec<(Token, &str)> {
    let bytes = input.as_bytes();
    let mut tokens = Vec::new();
    let mut pos = 0;
    loop {
        while pos < bytes.len() && is_whitespace(bytes[pos]) {
            pos += 1;
        }
        let start = pos;
        let Some(&first) = bytes.get(pos) else {
            tokens.push((Token::End, ""));
            return tokens;
        };
        if is_special(first) {
            let rest = &input[start..];
            let (token, len) = if rest.starts_with("==") {
                (Token::DoubleEquals, 2)
            } else if rest.starts_with("!=") {
                (Token::NotEquals, 2)
            } else {
                let token = match first {
                    b'=' => Token::Equals,
                    b'!' => Token::Not,
                    b'(' => Token::OpenPar,
                    b')' => Token::ClosedPar,
                    b',' => Token::Comma,
                    b'>' => Token::Greater,
                    _ => Token::Less,
                };
                (token, 1)
            };
            pos += len;
            tokens.push((token, &input[start..pos]));
            continue;
        }
        while pos < bytes.len() && !is_whitespace(bytes[pos]) && !is_special(bytes[pos]) {
            pos += 1;
        }
        // Token boundaries are ASCII bytes, so `start..pos` is a valid char range.
        let literal = &input[start..pos];
        let token = match literal {
            "in" => Token::In,
            "notin" => Token::NotIn,
            _ => Token::Identifier,
        };
        tokens.push((token, literal));
    }
}

/// A cursor over the tokens of one selector.
struct Parser<'a> {
    tokens: Vec<(Token, &'a str)>,
    pos: usize,
}

/// Where `in` and `notin` may only be values or keys, they are identifiers.
fn as_value((token, literal): (Token, &str)) -> (Token, &str) {
    match token {
        Token::In | Token::NotIn => (Token::Identifier, literal),
        _ => (token, literal),
    }
}

impl<'a> Parser<'a> {
    fn current(&self) -> (Token, &'a str) {
        self.tokens
            .get(self.pos)
            .copied()
            .unwrap_or((Token::End, ""))
    }

    /// The next token, where a key or value is expected; not consumed.
    fn peek(&self) -> (Token, &'a str) {
        as_value(self.current())
    }

    /// Consumes the next token, where a key or value is expected.
    fn next_value(&mut self) -> (Token, &'a str) {
        let item = self.current();
        self.pos = (self.pos + 1).min(self.tokens.len());
        as_value(item)
    }

    /// Consumes the next token, where an operator is expected.
    fn next_operator(&mut self) -> (Token, &'a str) {
        let item = self.current();
        self.pos = (self.pos + 1).min(self.tokens.len());
        item
    }

    fn selector(&mut self) -> Result<Vec<Requirement>, String> {
        let mut requirements = Vec::new();
        loop {
            match self.peek() {
                (Token::Identifier | Token::Not, _) => {
                    let requirement = self
                        .requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    requirements.push(requirement);
                    match self.next_value() {
                        (Token::End, _) => return Ok(requirements),
                        (Token::Comma, _) => match self.peek() {
                            (Token::Identifier | Token::Not, _) => {}
                            (_, literal) => {
                                return Err(format!(
                                    "found '{literal}', expected: identifier after ','"
                                ));
                            }
                        },
                        (_, literal) => {
                            return Err(format!(
                                "found '{literal}', expected: ',' or 'end of string'"
                            ));
                        }
                    }
                }
                (Token::End, _) => return Ok(requirements),
                (_, literal) => {
                    return Err(format!(
                        "found '{literal}', expected: !, identifier, or 'end of string'"
                    ));
                }
            }
        }
    }

    fn requirement(&mut self) -> Result<Requirement, String> {
        let mut negated = false;
        let (mut token, mut key) = self.next_value();
        if token == Token::Not {
            negated = true;
            (token, key) = self.next_value();
        }
        if token != Token::Identifier {
            return Err(format!("found '{key}', expected: identifier"));
        }
        if let Some(error) = key_error(key) {
            return Err(error.to_string());
        }
        let unary = matches!(self.peek().0, Token::End | Token::Comma);
        if negated || unary {
            // `!key` followed by anything but `,` or the end is caught by the caller.
            let operator = if negated {
                Operator::DoesNotExist
            } else {
                Operator::Exists
            };
            return Requirement::new(key, operator, Vec::<String>::new())
                .map_err(|e| e.to_string());
        }
        let operator = self.operator()?;
        let values = match operator {
            Operator::In | Operator::NotIn => self.value_set()?,
            _ => vec![self.exact_value()?],
        };
        Requirement::new(key, operator, values).map_err(|e| e.to_string())
    }

    fn operator(&mut self) -> Result<Operator, String> {
        Ok(match self.next_operator() {
            (Token::In, _) => Operator::In,
            (Token::NotIn, _) => Operator::NotIn,
            (Token::Equals, _) => Operator::Equals,
            (Token::DoubleEquals, _) => Operator::DoubleEquals,
            (Token::NotEquals, _) => Operator::NotEquals,
            (Token::Greater, _) => Operator::GreaterThan,
            (Token::Less, _) => Operator::LessThan,
            (_, literal) => {
                return Err(format!(
                    "found '{literal}', expected: in, notin, =, ==, !=, gt, lt"
                ));
            }
        })
    }

    /// `( a, b, ... )`; an empty item (`()`, `(a,)`, `(,a)`, `(a,,b)`) is the empty value.
    fn value_set(&mut self) -> Result<Vec<String>, String> {
        let (token, literal) = self.next_value();
        if token != Token::OpenPar {
            return Err(format!("found '{literal}' expected: '('"));
        }
        let mut values = BTreeSet::new();
        match self.peek() {
            (Token::ClosedPar, _) => {
                self.next_value();
                values.insert(String::new());
                return Ok(values.into_iter().collect());
            }
            (Token::Identifier | Token::Comma, _) => {}
            (_, literal) => {
                return Err(format!(
                    "found '{literal}', expected: ',', ')' or identifier"
                ));
            }
        }
        loop {
            match self.next_value() {
                (Token::Identifier, value) => {
                    values.insert(value.to_owned());
                    match self.peek() {
                        (Token::Comma, _) => {}
                        (Token::ClosedPar, _) => break,
                        (_, literal) => {
                            return Err(format!("found '{literal}', expected: ',' or ')'"));
                        }
                    }
                }
                (Token::Comma, _) => {
                    if values.is_empty() {
                        values.insert(String::new());
                    }
                    match self.peek().0 {
                        Token::ClosedPar => {
                            values.insert(String::new());
                            break;
                        }
                        Token::Comma => {
                            self.next_value();
                            values.insert(String::new());
                        }
                        _ => {}
                    }
                }
                (_, literal) => {
                    return Err(format!("found '{literal}', expected: ',', or identifier"));
                }
            }
        }
        // The loop stops only before a ')'.
        self.next_value();
        Ok(values.into_iter().collect())
    }

    /// The value after `=`, `==`, `!=`, `>` or `<`; nothing before `,` or the end is `""`.
    fn exact_value(&mut self) -> Result<String, String> {
        if matches!(self.peek().0, Token::End | Token::Comma) {
            return Ok(String::new());
        }
        match self.next_value() {
            (Token::Identifier, value) => Ok(value.to_owned()),
            (_, literal) => Err(format!("found '{literal}', expected: identifier")),
        }
    }
}

/// Parses `input` into requirements sorted by key (stably: requirements on one key keep their
/// order).
pub(super) fn parse(input: &str) -> Result<Vec<Requirement>, String> {
    let mut parser = Parser {
        tokens: lex(input),
        pos: 0,
    };
    let mut requirements = parser.selector()?;
    requirements.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(requirements)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexer_finds_the_longest_token() {
        let cases: &[(&str, &[(Token, &str)])] = &[
            ("", &[]),
            (",", &[(Token::Comma, ",")]),
            ("notin", &[(Token::NotIn, "notin")]),
            ("in", &[(Token::In, "in")]),
            ("=", &[(Token::Equals, "=")]),
            ("==", &[(Token::DoubleEquals, "==")]),
            (">", &[(Token::Greater, ">")]),
            ("<", &[(Token::Less, "<")]),
            ("!", &[(Token::Not, "!")]),
            ("!=", &[(Token::NotEquals, "!=")]),
            ("(", &[(Token::OpenPar, "(")]),
            (")", &[(Token::ClosedPar, ")")]),
            ("~", &[(Token::Identifier, "~")]),
            ("||", &[(Token::Identifier, "||")]),
            ("===", &[(Token::DoubleEquals, "=="), (Token::Equals, "=")]),
            ("=!", &[(Token::Equals, "="), (Token::Not, "!")]),
            (
                " x\tin\n(a)",
                &[
                    (Token::Identifier, "x"),
                    (Token::In, "in"),
                    (Token::OpenPar, "("),
                    (Token::Identifier, "a"),
                    (Token::ClosedPar, ")"),
                ],
            ),
            (
                "key!=välue",
                &[
                    (Token::Identifier, "key"),
                    (Token::NotEquals, "!="),
                    (Token::Identifier, "välue"),
                ],
            ),
        ];
        for (input, expected) in cases {
            let mut tokens = lex(input);
            assert_eq!(tokens.pop(), Some((Token::End, "")), "{input:?}");
            assert_eq!(&tokens, expected, "{input:?}");
        }
    }
}
