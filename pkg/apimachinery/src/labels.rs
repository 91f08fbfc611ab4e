//! Label selectors: the `labelSelector` query parameter and the `LabelSelector` fields of
//! objects, with Kubernetes' syntax, matching rules and messages.
//!
//! # Syntax
//!
//! A selector is a comma-separated list of requirements, all of which must hold:
//!
//! | requirement | matches when |
//! |---|---|
//! | `key=value`, `key==value` | the label is present and equal to `value` |
//! | `key!=value` | the label is absent or not equal to `value` |
//! | `key in (v1,v2)` | the label is present and one of the values |
//! | `key notin (v1,v2)` | the label is absent or none of the values |
//! | `key` | the label is present |
//! | `!key` | the label is absent |
//! | `key>N`, `key<N` | the label is present, is an integer, and is greater (less) than `N` |
//!
//! Whitespace around tokens is ignored. Values may be empty: `key=` requires the label to be
//! present and empty, and an empty item in a set (`()`, `(a,)`, `(a,,b)`) is the empty value, as
//! upstream parses it, so `key in ()` means `key` is present with the empty value. Keys must be
//! qualified names and values label values ([`crate::validation`]); `in` and `notin` are valid
//! keys and values. The empty string selects everything.
//!
//! Parsing sorts the requirements by key; [`Selector`]'s `Display` writes that canonical form
//! (values sorted too), which parses back to the same selector.
//!
//! Two deliberate differences from upstream: its lexer stops at a NUL byte and ignores the rest
//! of the input, where here NUL is an ordinary character (so the key or value fails
//! validation); and an invalid key found while parsing is reported at the path `key` (upstream
//! writes `<nil>`, a Go artifact), e.g. `unable to parse requirement: key: Invalid value:
//! "k@y": name part must consist of ...`.

mod parser;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::BuildHasher;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::validation::field::{self, ErrorList, Path};
use crate::validation::{is_qualified_name, is_valid_label_value};

/// Why a selector could not be parsed or built.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Error {
    /// The selector string is malformed, or one of its requirements is invalid; the message is
    /// upstream's, e.g. `unable to parse requirement: found '', expected: identifier`.
    #[error("{0}")]
    Parse(String),
    /// A requirement built in code (or from a [`LabelSelector`]) has an invalid key, values
    /// that do not fit its operator, or invalid values.
    #[error("{0}")]
    InvalidRequirement(ErrorList),
    /// A [`LabelSelectorRequirement`] has an operator other than `In`, `NotIn`, `Exists` and
    /// `DoesNotExist`.
    #[error("{0:?} is not a valid label selector operator")]
    InvalidOperator(String),
}

/// A set of labels a selector can be matched against.
pub trait Labels {
    /// The value of label `key`, if present.
    fn get(&self, key: &str) -> Option<&str>;
}

impl Labels for BTreeMap<String, String> {
    fn get(&self, key: &str) -> Option<&str> {
        BTreeMap::get(self, key).map(String::as_str)
    }
}

impl<S: BuildHasher> Labels for HashMap<String, String, S> {
    fn get(&self, key: &str) -> Option<&str> {
        HashMap::get(self, key).map(String::as_str)
    }
}

impl<L: Labels + ?Sized> Labels for &L {
    fn get(&self, key: &str) -> Option<&str> {
        (**self).get(key)
    }
}

/// How a requirement relates a label to its values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operator {
    /// `!key`: the label is absent.
    DoesNotExist,
    /// `key=value`.
    Equals,
    /// `key==value`, the same as [`Operator::Equals`].
    DoubleEquals,
    /// `key in (a,b)`.
    In,
    /// `key!=value`.
    NotEquals,
    /// `key notin (a,b)`.
    NotIn,
    /// `key`: the label is present.
    Exists,
    /// `key>N`.
    GreaterThan,
    /// `key<N`.
    LessThan,
}

impl Operator {
    /// Upstream's name of the operator (`selection.Operator`): `!`, `=`, `==`, `in`, `!=`,
    /// `notin`, `exists`, `gt`, `lt`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Operator::DoesNotExist => "!",
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::In => "in",
            Operator::NotEquals => "!=",
            Operator::NotIn => "notin",
            Operator::Exists => "exists",
            Operator::GreaterThan => "gt",
            Operator::LessThan => "lt",
        }
    }
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error for an invalid label key at `key`, with every problem joined by `; `.
fn key_error(key: &str) -> Option<field::Error> {
    let problems = is_qualified_name(key);
    (!problems.is_empty())
        .then(|| field::Error::invalid(&Path::new("key"), key, problems.join("; ")))
}

/// One requirement of a selector: a key, an operator and values.
///
/// Values are kept sorted and without duplicates: they are a set.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Requirement {
    key: String,
    operator: Operator,
    values: Vec<String>,
}

impl Requirement {
    /// Builds a requirement, checking it as upstream's `NewRequirement` does: the key is a
    /// qualified name; `In` and `NotIn` have at least one value; `=`, `==` and `!=` exactly
    /// one; `Exists` and `DoesNotExist` none; `>` and `<` exactly one, an integer; and every
    /// value is a valid label value. Every problem is reported, at the paths `key`, `values`,
    /// `values[i]` and `values[i][key]`.
    pub fn new<I, V>(key: impl Into<String>, operator: Operator, values: I) -> Result<Self, Error>
    where
        I: IntoIterator<Item = V>,
        V: Into<String>,
    {
        let key = key.into();
        let mut values: Vec<String> = values.into_iter().map(Into::into).collect();
        let mut errors = ErrorList::new();
        errors.0.extend(key_error(&key));
        let values_path = Path::new("values");
        let all_values = || Value::from(values.clone());
        match operator {
            Operator::In | Operator::NotIn => {
                if values.is_empty() {
                    errors.push(field::Error::invalid(
                        &values_path,
                        all_values(),
                        "for 'in', 'notin' operators, values set can't be empty",
                    ));
                }
            }
            Operator::Equals | Operator::DoubleEquals | Operator::NotEquals => {
                if values.len() != 1 {
                    errors.push(field::Error::invalid(
                        &values_path,
                        all_values(),
                        "exact-match compatibility requires one single value",
                    ));
                }
            }
            Operator::Exists | Operator::DoesNotExist => {
                if !values.is_empty() {
                    errors.push(field::Error::invalid(
                        &values_path,
                        all_values(),
                        "values set must be empty for exists and does not exist",
                    ));
                }
            }
            Operator::GreaterThan | Operator::LessThan => {
                if values.len() != 1 {
                    errors.push(field::Error::invalid(
                        &values_path,
                        all_values(),
                        "for 'Gt', 'Lt' operators, exactly one value is required",
                    ));
                }
                for (i, value) in values.iter().enumerate() {
                    if value.parse::<i64>().is_err() {
                        errors.push(field::Error::invalid(
                            &values_path.index(i),
                            value.as_str(),
                            "for 'Gt', 'Lt' operators, the value must be an integer",
                        ));
                    }
                }
            }
        }
        for (i, value) in values.iter().enumerate() {
            let problems = is_valid_label_value(value);
            if !problems.is_empty() {
                errors.push(field::Error::invalid(
                    &values_path.index(i).key(&key),
                    value.as_str(),
                    problems.join("; "),
                ));
            }
        }
        errors.into_result().map_err(Error::InvalidRequirement)?;
        values.sort();
        values.dedup();
        Ok(Self {
            key,
            operator,
            values,
        })
    }

    /// The label key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The operator.
    pub fn operator(&self) -> Operator {
        self.operator
    }

    /// The values, sorted (empty for `Exists` and `DoesNotExist`).
    pub fn values(&self) -> &[String] {
        &self.values
    }

    fn has_value(&self, value: &str) -> bool {
        self.values.iter().any(|v| v == value)
    }

    /// Whether `labels` satisfy this requirement. `!=` and `notin` match when the label is
    /// absent; `=`, `==` and `in` need it present; `>` and `<` need it present and an integer
    /// (a non-integer label never matches).
    pub fn matches<L: Labels + ?Sized>(&self, labels: &L) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => {
                value.is_some_and(|v| self.has_value(v))
            }
            Operator::NotIn | Operator::NotEquals => value.is_none_or(|v| !self.has_value(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let Some(Ok(actual)) = value.map(str::parse::<i64>) else {
                    return false;
                };
                let [bound] = self.values.as_slice() else {
                    return false;
                };
                let Ok(bound) = bound.parse::<i64>() else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    actual > bound
                } else {
                    actual < bound
                }
            }
        }
    }
}

impl fmt::Display for Requirement {
    /// `key=v`, `key==v`, `key!=v`, `key in (a,b)`, `key notin (a,b)`, `key`, `!key`, `key>1`,
    /// `key<1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (before, after) = match self.operator {
            Operator::Exists => return f.write_str(&self.key),
            Operator::DoesNotExist => return write!(f, "!{}", self.key),
            Operator::Equals => ("=", ""),
            Operator::DoubleEquals => ("==", ""),
            Operator::NotEquals => ("!=", ""),
            Operator::In => (" in (", ")"),
            Operator::NotIn => (" notin (", ")"),
            Operator::GreaterThan => (">", ""),
            Operator::LessThan => ("<", ""),
        };
        write!(f, "{}{before}{}{after}", self.key, self.values.join(","))
    }
}

/// A label selector: requirements that must all hold, or the selector that matches nothing.
///
/// The default is [`Selector::everything`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Selector {
    requirements: Vec<Requirement>,
    nothing: bool,
}

impl Selector {
    /// The selector that matches every set of labels (no requirements).
    pub fn everything() -> Self {
        Self::default()
    }

    /// The selector that matches no set of labels: what an absent `LabelSelector` means (see
    /// [`label_selector_as_selector`]). It has no string form: it displays as `""`, like
    /// upstream's, which parses back to [`Selector::everything`].
    pub fn nothing() -> Self {
        Self {
            requirements: Vec::new(),
            nothing: true,
        }
    }

    /// Parses the selector syntax (see the module docs). The empty string is
    /// [`Selector::everything`].
    pub fn parse(selector: &str) -> Result<Self, Error> {
        Ok(Self {
            requirements: parser::parse(selector).map_err(Error::Parse)?,
            nothing: false,
        })
    }

    /// A selector of `requirements`, sorted by key.
    pub fn from_requirements(requirements: impl IntoIterator<Item = Requirement>) -> Self {
        Self::everything().with_requirements(requirements)
    }

    /// The selector requiring every label of `set` with its value (`key=value,...`); an empty
    /// set gives [`Selector::everything`]. Keys and values are validated.
    pub fn from_set(set: &BTreeMap<String, String>) -> Result<Self, Error> {
        let requirements = set
            .iter()
            .map(|(key, value)| Requirement::new(key.as_str(), Operator::Equals, [value.as_str()]))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self::from_requirements(requirements))
    }

    /// This selector with `requirements` added, sorted by key (requirements on one key keep
    /// their order). The nothing selector stays nothing.
    #[must_use]
    pub fn with_requirements(
        mut self,
        requirements: impl IntoIterator<Item = Requirement>,
    ) -> Self {
        if self.nothing {
            return self;
        }
        self.requirements.extend(requirements);
        self.requirements.sort_by(|a, b| a.key.cmp(&b.key));
        self
    }

    /// Whether the selector does not restrict anything (has no requirements). The nothing
    /// selector is not empty.
    pub fn is_empty(&self) -> bool {
        !self.nothing && self.requirements.is_empty()
    }

    /// Whether this is [`Selector::nothing`].
    pub fn is_nothing(&self) -> bool {
        self.nothing
    }

    /// The requirements, sorted by key (none for the nothing selector).
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches<L: Labels + ?Sized>(&self, labels: &L) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches(labels))
    }

    /// The one value the selector requires label `key` to have, if it pins one: the first
    /// requirement on `key` is `=`, `==`, or `in` with a single value (upstream's
    /// `RequiresExactMatch`).
    pub fn requires_exact_match(&self, key: &str) -> Option<&str> {
        let requirement = self.requirements.iter().find(|r| r.key == key)?;
        match (requirement.operator, requirement.values.as_slice()) {
            (Operator::Equals | Operator::DoubleEquals | Operator::In, [value]) => Some(value),
            _ => None,
        }
    }
}

impl fmt::Display for Selector {
    /// The canonical form: requirements in order, joined by `,`.
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

/// A label selector as objects carry it (`metav1.LabelSelector`): `matchLabels` and
/// `matchExpressions`, all ANDed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    /// Labels that must be present with these values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    /// Set-based requirements.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

/// One entry of `matchExpressions`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabelSelectorRequirement {
    /// The label key.
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist` (kept as text so that other words are
    /// reported, not rejected by deserialization).
    pub operator: String,
    /// The values: at least one for `In` and `NotIn`, none for `Exists` and `DoesNotExist`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

impl LabelSelectorRequirement {
    /// The `In` operator.
    pub const IN: &'static str = "In";
    /// The `NotIn` operator.
    pub const NOT_IN: &'static str = "NotIn";
    /// The `Exists` operator.
    pub const EXISTS: &'static str = "Exists";
    /// The `DoesNotExist` operator.
    pub const DOES_NOT_EXIST: &'static str = "DoesNotExist";
}

impl LabelSelector {
    /// The selector this describes (upstream's `LabelSelectorAsSelector` for a present
    /// selector): no labels and no expressions select everything; `matchLabels` become `=`
    /// requirements; expressions with an unknown operator, or values that do not fit their
    /// operator, are errors.
    pub fn to_selector(&self) -> Result<Selector, Error> {
        let mut requirements = Vec::new();
        for (key, value) in &self.match_labels {
            requirements.push(Requirement::new(
                key.as_str(),
                Operator::Equals,
                [value.as_str()],
            )?);
        }
        for expression in &self.match_expressions {
            let operator = match expression.operator.as_str() {
                LabelSelectorRequirement::IN => Operator::In,
                LabelSelectorRequirement::NOT_IN => Operator::NotIn,
                LabelSelectorRequirement::EXISTS => Operator::Exists,
                LabelSelectorRequirement::DOES_NOT_EXIST => Operator::DoesNotExist,
                other => return Err(Error::InvalidOperator(other.to_owned())),
            };
            requirements.push(Requirement::new(
                expression.key.as_str(),
                operator,
                expression.values.iter().map(String::as_str),
            )?);
        }
        Ok(Selector::from_requirements(requirements))
    }
}

impl TryFrom<&LabelSelector> for Selector {
    type Error = Error;

    fn try_from(selector: &LabelSelector) -> Result<Self, Error> {
        selector.to_selector()
    }
}

/// Upstream's `LabelSelectorAsSelector`: an absent selector matches nothing, an empty one
/// everything.
pub fn label_selector_as_selector(selector: Option<&LabelSelector>) -> Result<Selector, Error> {
    selector.map_or_else(|| Ok(Selector::nothing()), LabelSelector::to_selector)
}

#[cfg(test)]
mod tests;
