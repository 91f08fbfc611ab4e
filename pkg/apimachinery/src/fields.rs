//! Field selectors: the `fieldSelector` query parameter, with Kubernetes' syntax, matching
//! rules and messages.
//!
//! # Syntax
//!
//! A comma-separated list of terms, all of which must hold: `field=value`, `field==value` (the
//! same) or `field!=value`. There is no whitespace trimming. In values, `\`, `,` and `=` must be
//! escaped with a backslash ([`escape_value`]); other escapes, a trailing lone `\`, and an
//! unescaped `,` or `=` in a value are errors. Field names are not escaped: a term splits at its
//! first operator. Empty terms are skipped, so the empty string selects everything, and a term
//! with an empty field and an empty value (`=`, `!=`) is dropped, as upstream drops it.
//!
//! Which fields may be selected on is the resource's business: [`Selector::requirements`] and
//! [`Selector::transform`] let the API layer reject unsupported fields (upstream answers 400
//! `field label not supported: <name>`) and rename them.
//!
//! # Matching
//!
//! A selector matches a map of field name to value. As upstream's `fields.Set`, an absent field
//! reads as the empty string: `f=x` does not match an object without `f`, `f!=x` does, `f=`
//! does and `f!=` does not.
//!
//! # Canonical form
//!
//! Parsing sorts the terms; [`Selector`]'s `Display` writes `field=value` / `field!=value` with
//! escaped values, which parses back to the same selector. Upstream sorts the raw terms, so the
//! two orders differ only where `==` was written (it is written back as `=`).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::BuildHasher;
use std::str::FromStr;

/// Why a field selector could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A term has no operator.
    #[error("invalid selector: '{selector}'; can't understand '{term}'")]
    InvalidSelector {
        /// The whole selector.
        selector: String,
        /// The term without an operator.
        term: String,
    },
    /// A value has a backslash that does not escape `\`, `,` or `=` (`sequence` is the
    /// backslash and the character after it, or a lone trailing backslash).
    #[error("invalid field selector: invalid escape sequence: {0}")]
    InvalidEscapeSequence(String),
    /// A value has an unescaped `,` or `=` (shown as the character; upstream shows its code
    /// point, e.g. `61`).
    #[error("invalid field selector: unescaped character in value: {0:?}")]
    UnescapedCharacter(char),
}

/// The fields of an object a selector can be matched against.
pub trait Fields {
    /// The value of `field`, if the object has it.
    fn get(&self, field: &str) -> Option<&str>;
}

impl Fields for BTreeMap<String, String> {
    fn get(&self, field: &str) -> Option<&str> {
        BTreeMap::get(self, field).map(String::as_str)
    }
}

impl<S: BuildHasher> Fields for HashMap<String, String, S> {
    fn get(&self, field: &str) -> Option<&str> {
        HashMap::get(self, field).map(String::as_str)
    }
}

impl<F: Fields + ?Sized> Fields for &F {
    fn get(&self, field: &str) -> Option<&str> {
        (**self).get(field)
    }
}

/// How a term relates a field to its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operator {
    /// `field=value` (also written `field==value`).
    Equals,
    /// `field!=value`.
    NotEquals,
}

impl Operator {
    /// The operator as written: `=` or `!=`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Operator::Equals => "=",
            Operator::NotEquals => "!=",
        }
    }
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One term of a field selector.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Requirement {
    /// The field name, e.g. `metadata.name`.
    pub field: String,
    /// The operator.
    pub operator: Operator,
    /// The value, unescaped.
    pub value: String,
}

impl Requirement {
    /// Whether `fields` satisfy this term (an absent field reads as `""`).
    pub fn matches<F: Fields + ?Sized>(&self, fields: &F) -> bool {
        let actual = fields.get(&self.field).unwrap_or("");
        match self.operator {
            Operator::Equals => actual == self.value,
            Operator::NotEquals => actual != self.value,
        }
    }
}

impl fmt::Display for Requirement {
    /// `field=value` or `field!=value`, the value escaped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}{}{}",
            self.field,
            self.operator,
            escape_value(&self.value)
        )
    }
}

/// Escapes `\`, `,` and `=` in a literal value with a backslash, for use in a selector.
pub fn escape_value(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len());
    for c in value.chars() {
        if matches!(c, '\\' | ',' | '=') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

/// The literal value of an escaped selector value: `\\`, `\,` and `\=` become `\`, `,` and
/// `=`; any other escape, a trailing lone `\`, or an unescaped `,` or `=` is an error.
pub fn unescape_value(value: &str) -> Result<String, Error> {
    let mut literal = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(escaped @ ('\\' | ',' | '=')) => literal.push(escaped),
                Some(other) => return Err(Error::InvalidEscapeSequence(format!("\\{other}"))),
                None => return Err(Error::InvalidEscapeSequence("\\".to_owned())),
            },
            ',' | '=' => return Err(Error::UnescapedCharacter(c)),
            _ => literal.push(c),
        }
    }
    Ok(literal)
}

/// Splits a selector at the commas that are not escaped; the terms keep their escapes.
fn split_terms(selector: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (i, c) in selector.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == ',' {
            terms.push(&selector[start..i]);
            start = i + 1;
        }
    }
    terms.push(&selector[start..]);
    terms
}

/// Splits a term at its first operator (`!=`, then `==`, then `=` at each position) into the
/// field, the operator and the raw value.
fn split_term(term: &str) -> Option<(&str, Operator, &str)> {
    const OPERATORS: [(&str, Operator); 3] = [
        ("!=", Operator::NotEquals),
        ("==", Operator::Equals),
        ("=", Operator::Equals),
    ];
    term.char_indices().find_map(|(i, _)| {
        let rest = &term[i..];
        OPERATORS.iter().find_map(|(text, operator)| {
            rest.strip_prefix(text)
                .map(|value| (&term[..i], *operator, value))
        })
    })
}

/// A field selector: terms that must all hold.
///
/// The default is [`Selector::everything`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

impl Selector {
    /// The selector that matches everything (no terms).
    pub fn everything() -> Self {
        Self::default()
    }

    /// Parses a field selector (see the module docs).
    pub fn parse(selector: &str) -> Result<Self, Error> {
        Self::parse_and_transform(selector, |field, value| {
            Ok::<_, Error>((field.to_owned(), value.to_owned()))
        })
    }

    /// Parses a field selector, then [transforms](Selector::transform) it with `f` (upstream's
    /// `ParseAndTransformSelector`).
    pub fn parse_and_transform<F, E>(selector: &str, f: F) -> Result<Self, E>
    where
        F: FnMut(&str, &str) -> Result<(String, String), E>,
        E: From<Error>,
    {
        let mut terms = split_terms(selector);
        // Sort the raw terms first, as upstream does, so that the first error reported for a
        // selector with several bad terms is upstream's.
        terms.sort_unstable();
        let mut requirements = Vec::new();
        for term in terms.into_iter().filter(|t| !t.is_empty()) {
            let (field, operator, value) =
                split_term(term).ok_or_else(|| Error::InvalidSelector {
                    selector: selector.to_owned(),
                    term: term.to_owned(),
                })?;
            requirements.push(Requirement {
                field: field.to_owned(),
                operator,
                value: unescape_value(value)?,
            });
        }
        requirements.sort_by_cached_key(ToString::to_string);
        Self { requirements }.transform(f)
    }

    /// The selector `field=value`.
    pub fn one_term_equal(field: impl Into<String>, value: impl Into<String>) -> Self {
        Self::one_term(field.into(), Operator::Equals, value.into())
    }

    /// The selector `field!=value`.
    pub fn one_term_not_equal(field: impl Into<String>, value: impl Into<String>) -> Self {
        Self::one_term(field.into(), Operator::NotEquals, value.into())
    }

    fn one_term(field: String, operator: Operator, value: String) -> Self {
        Self {
            requirements: vec![Requirement {
                field,
                operator,
                value,
            }],
        }
    }

    /// The selector requiring every field of `set` to have its value, in field order.
    pub fn from_set(set: &BTreeMap<String, String>) -> Self {
        Self {
            requirements: set
                .iter()
                .map(|(field, value)| Requirement {
                    field: field.clone(),
                    operator: Operator::Equals,
                    value: value.clone(),
                })
                .collect(),
        }
    }

    /// The selector requiring every term of every one of `selectors`, in order (upstream's
    /// `AndSelectors`).
    pub fn and(selectors: impl IntoIterator<Item = Selector>) -> Self {
        Self {
            requirements: selectors.into_iter().flat_map(|s| s.requirements).collect(),
        }
    }

    /// Whether the selector has no terms (matches everything).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The terms, in order.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// Whether `fields` satisfy every term.
    pub fn matches<F: Fields + ?Sized>(&self, fields: &F) -> bool {
        self.requirements.iter().all(|r| r.matches(fields))
    }

    /// The value the selector pins `field` to: that of the first `field=value` term (upstream's
    /// `RequiresExactMatch`). A `metadata.name=x` selector lets a list become a get.
    pub fn requires_exact_match(&self, field: &str) -> Option<&str> {
        self.requirements
            .iter()
            .find(|r| r.operator == Operator::Equals && r.field == field)
            .map(|r| r.value.as_str())
    }

    /// This selector with every term's field and value replaced by what `f` returns for them
    /// (upstream's `Transform`): the API layer renames fields (or normalizes values) and
    /// rejects unsupported ones by returning an error. A term transformed to an empty field and
    /// an empty value is dropped. The terms keep their order.
    pub fn transform<F, E>(&self, mut f: F) -> Result<Self, E>
    where
        F: FnMut(&str, &str) -> Result<(String, String), E>,
    {
        let mut requirements = Vec::with_capacity(self.requirements.len());
        for requirement in &self.requirements {
            let (field, value) = f(&requirement.field, &requirement.value)?;
            if field.is_empty() && value.is_empty() {
                continue;
            }
            requirements.push(Requirement {
                field,
                operator: requirement.operator,
                value,
            });
        }
        Ok(Self { requirements })
    }
}

impl fmt::Display for Selector {
    /// The terms in order, joined by `,`, values escaped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, requirement) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{requirement}")?;
        }
        Ok(())
    }
}

impl FromStr for Selector {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        Selector::parse(s)
    }
}

#[cfg(test)]
mod tests;
