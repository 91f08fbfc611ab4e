//! Field errors: which field of an object is wrong, how, and with what value.
//!
//! Validation collects every problem into an [`ErrorList`] instead of stopping at the first, and
//! the API answers them all in one `Invalid` Status (one cause per error). The rendering follows
//! Kubernetes: `metadata.name: Invalid value: "Foo": a lowercase RFC 1123 subdomain ...`.

use std::fmt;

use serde_json::Value;

/// A path to a field, rendered as Kubernetes renders it: `spec.containers[0].env[FOO]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Path(String);

impl Path {
    /// A path starting at the field `name`.
    pub fn new(name: &str) -> Self {
        Path(name.to_owned())
    }

    /// The field `name` below this one.
    #[must_use]
    pub fn child(&self, name: &str) -> Path {
        if self.0.is_empty() {
            Path(name.to_owned())
        } else {
            self.joined(&[".", name])
        }
    }

    /// Item `index` of this list.
    #[must_use]
    pub fn index(&self, index: usize) -> Path {
        self.joined(&["[", &index.to_string(), "]"])
    }

    /// Entry `key` of this map.
    #[must_use]
    pub fn key(&self, key: &str) -> Path {
        self.joined(&["[", key, "]"])
    }

    /// This path followed by `parts` (paths are made on every write: no formatting machinery).
    fn joined(&self, parts: &[&str]) -> Path {
        let length = self.0.len() + parts.iter().map(|p| p.len()).sum::<usize>();
        let mut path = String::with_capacity(length);
        path.push_str(&self.0);
        for part in parts {
            path.push_str(part);
        }
        Path(path)
    }

    /// The rendered path.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What kind of problem a field has.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorType {
    /// A value that should exist (e.g. a referenced object) does not.
    NotFound,
    /// A required value is missing.
    Required,
    /// A value that must be unique is repeated.
    Duplicate,
    /// A value is malformed or out of range.
    Invalid,
    /// A value is not one of the supported values.
    NotSupported,
    /// A value is not allowed here (e.g. a change to an immutable field).
    Forbidden,
    /// A value is longer than allowed.
    TooLong,
    /// A list has more items than allowed.
    TooMany,
    /// Validation itself failed.
    Internal,
    /// A value has the wrong type.
    TypeInvalid,
}

impl ErrorType {
    /// The `reason` of the Status cause, e.g. `FieldValueInvalid`.
    pub fn reason(self) -> &'static str {
        match self {
            ErrorType::NotFound => "FieldValueNotFound",
            ErrorType::Required => "FieldValueRequired",
            ErrorType::Duplicate => "FieldValueDuplicate",
            ErrorType::Invalid => "FieldValueInvalid",
            ErrorType::NotSupported => "FieldValueNotSupported",
            ErrorType::Forbidden => "FieldValueForbidden",
            ErrorType::TooLong => "FieldValueTooLong",
            ErrorType::TooMany => "FieldValueTooMany",
            ErrorType::Internal => "InternalError",
            ErrorType::TypeInvalid => "FieldValueTypeInvalid",
        }
    }

    /// The words that start the error's message, e.g. `Invalid value`.
    pub fn description(self) -> &'static str {
        match self {
            ErrorType::NotFound => "Not found",
            ErrorType::Required => "Required value",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::Invalid | ErrorType::TypeInvalid => "Invalid value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::Forbidden => "Forbidden",
            ErrorType::TooLong => "Too long",
            ErrorType::TooMany => "Too many",
            ErrorType::Internal => "Internal error",
        }
    }

    /// Whether the message shows the bad value.
    fn shows_value(self) -> bool {
        !matches!(
            self,
            ErrorType::Required | ErrorType::Forbidden | ErrorType::TooLong | ErrorType::Internal
        )
    }
}

/// One problem with one field.
#[derive(Clone, Debug, PartialEq)]
pub struct Error {
    /// The kind of problem.
    pub kind: ErrorType,
    /// The field's path.
    pub field: Path,
    /// The offending value, when it helps to show it.
    pub bad_value: Value,
    /// How the message shows the value when it is no JSON value (Go's rendering of a byte
    /// slice, `[]byte{0x2d, ...}`); `None`: `bad_value` as [`Error::body`] renders it.
    pub shown: Option<String>,
    /// What is wrong, in words.
    pub detail: String,
}

/// Renders a value as Kubernetes shows it in messages: strings quoted, others as JSON.
fn render(value: &Value) -> String {
    match value {
        Value::String(s) => crate::gofmt::quote(s),
        other => other.to_string(),
    }
}

impl Error {
    fn new(kind: ErrorType, field: &Path, bad_value: Value, detail: impl Into<String>) -> Self {
        Self {
            kind,
            field: field.clone(),
            bad_value,
            shown: None,
            detail: detail.into(),
        }
    }

    /// A required value is missing.
    pub fn required(field: &Path, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Required, field, Value::Null, detail)
    }

    /// A value is malformed or out of range.
    pub fn invalid(field: &Path, value: impl Into<Value>, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Invalid, field, value.into(), detail)
    }

    /// A byte slice is malformed: shown as Go's `%#v` shows it (`[]byte{0x2d, 0x2d}`, or
    /// `[]byte(nil)` for none), as upstream's messages show a `[]byte` field's value.
    pub fn invalid_bytes(field: &Path, value: Option<&[u8]>, detail: impl Into<String>) -> Self {
        let shown = match value {
            None => "[]byte(nil)".to_owned(),
            Some(bytes) => {
                let items: Vec<String> = bytes.iter().map(|b| format!("{b:#x}")).collect();
                format!("[]byte{{{}}}", items.join(", "))
            }
        };
        let mut error = Self::new(ErrorType::Invalid, field, Value::Null, detail);
        error.shown = Some(shown);
        error
    }

    /// A value is not one of `supported`.
    pub fn not_supported(field: &Path, value: impl Into<Value>, supported: &[&str]) -> Self {
        let quoted: Vec<String> = supported.iter().map(|s| crate::gofmt::quote(s)).collect();
        let detail = if quoted.is_empty() {
            String::new()
        } else {
            format!("supported values: {}", quoted.join(", "))
        };
        Self::new(ErrorType::NotSupported, field, value.into(), detail)
    }

    /// A value is not allowed here.
    pub fn forbidden(field: &Path, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Forbidden, field, Value::Null, detail)
    }

    /// A value is longer than `max` bytes.
    pub fn too_long(field: &Path, value: impl Into<Value>, max: usize) -> Self {
        Self::new(
            ErrorType::TooLong,
            field,
            value.into(),
            format!("may not be more than {max} bytes"),
        )
    }

    /// A list has `actual` items where at most `max` are allowed.
    pub fn too_many(field: &Path, actual: usize, max: usize) -> Self {
        Self::new(
            ErrorType::TooMany,
            field,
            Value::from(actual),
            format!("must have at most {max} items"),
        )
    }

    /// A value that must be unique is repeated.
    pub fn duplicate(field: &Path, value: impl Into<Value>) -> Self {
        Self::new(ErrorType::Duplicate, field, value.into(), "")
    }

    /// A referenced value does not exist.
    pub fn not_found(field: &Path, value: impl Into<Value>) -> Self {
        Self::new(ErrorType::NotFound, field, value.into(), "")
    }

    /// A value has the wrong type.
    pub fn type_invalid(field: &Path, value: impl Into<Value>, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::TypeInvalid, field, value.into(), detail)
    }

    /// Validation itself failed.
    pub fn internal(field: &Path, detail: impl Into<String>) -> Self {
        Self::new(ErrorType::Internal, field, Value::Null, detail)
    }

    /// The message without the field: `Invalid value: "Foo": must be lower case`.
    pub fn body(&self) -> String {
        let mut body = self.kind.description().to_owned();
        if self.kind.shows_value() {
            body.push_str(": ");
            match &self.shown {
                Some(shown) => body.push_str(shown),
                None => body.push_str(&render(&self.bad_value)),
            }
        }
        if !self.detail.is_empty() {
            body.push_str(": ");
            body.push_str(&self.detail);
        }
        body
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

impl std::error::Error for Error {}

/// Every problem found in one object.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ErrorList(pub Vec<Error>);

impl ErrorList {
    /// No errors.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an error.
    pub fn push(&mut self, error: Error) {
        self.0.push(error);
    }

    /// Adds every error of `other`.
    pub fn extend(&mut self, other: ErrorList) {
        self.0.extend(other.0);
    }

    /// Whether there is no error.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The errors.
    pub fn iter(&self) -> impl Iterator<Item = &Error> {
        self.0.iter()
    }

    /// `Ok(())` if empty, else the list.
    pub fn into_result(self) -> Result<(), ErrorList> {
        if self.is_empty() { Ok(()) } else { Err(self) }
    }
}

impl fmt::Display for ErrorList {
    /// One error as itself; several as `[first, second]`, as Kubernetes aggregates them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_slice() {
            [] => Ok(()),
            [one] => write!(f, "{one}"),
            many => {
                let parts: Vec<String> = many.iter().map(ToString::to_string).collect();
                write!(f, "[{}]", parts.join(", "))
            }
        }
    }
}

impl std::error::Error for ErrorList {}

impl FromIterator<Error> for ErrorList {
    fn from_iter<I: IntoIterator<Item = Error>>(iter: I) -> Self {
        ErrorList(iter.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_render_like_kubernetes() {
        let path = Path::new("spec")
            .child("containers")
            .index(0)
            .child("env")
            .key("FOO");
        assert_eq!(path.as_str(), "spec.containers[0].env[FOO]");
        assert_eq!(Path::default().child("metadata").as_str(), "metadata");
    }

    #[test]
    fn messages_render_like_kubernetes() {
        let name = Path::new("metadata").child("name");
        assert_eq!(
            Error::required(&name, "name or generateName is required").to_string(),
            "metadata.name: Required value: name or generateName is required"
        );
        assert_eq!(
            Error::invalid(&name, "Foo", "must be lower case").to_string(),
            "metadata.name: Invalid value: \"Foo\": must be lower case"
        );
        assert_eq!(
            Error::not_supported(&Path::new("type"), "x", &["a", "b"]).to_string(),
            "type: Unsupported value: \"x\": supported values: \"a\", \"b\""
        );
        assert_eq!(
            Error::too_long(&name, "x", 253).to_string(),
            "metadata.name: Too long: may not be more than 253 bytes"
        );
        assert_eq!(
            Error::forbidden(&name, "field is immutable").to_string(),
            "metadata.name: Forbidden: field is immutable"
        );
        assert_eq!(
            Error::invalid(&Path::new("n"), 5, "too big").body(),
            "Invalid value: 5: too big"
        );
        assert_eq!(
            Error::duplicate(&Path::new("keys").index(1), "a").to_string(),
            "keys[1]: Duplicate value: \"a\""
        );
        let request = Path::new("spec").child("request");
        assert_eq!(
            Error::invalid_bytes(&request, Some(b"-\n"), "bad").to_string(),
            "spec.request: Invalid value: []byte{0x2d, 0xa}: bad"
        );
        assert_eq!(
            Error::invalid_bytes(&request, None, "bad").body(),
            "Invalid value: []byte(nil): bad"
        );
    }

    #[test]
    fn lists_aggregate_like_kubernetes() {
        let one: ErrorList = [Error::required(&Path::new("a"), "")].into_iter().collect();
        assert_eq!(one.to_string(), "a: Required value");
        let two: ErrorList = [
            Error::required(&Path::new("a"), ""),
            Error::forbidden(&Path::new("b"), "no"),
        ]
        .into_iter()
        .collect();
        assert_eq!(two.to_string(), "[a: Required value, b: Forbidden: no]");
        assert!(ErrorList::new().into_result().is_ok());
    }
}
