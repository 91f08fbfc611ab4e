//! Validation of names, label keys and values, annotations and data keys, with Kubernetes'
//! rules and messages.
//!
//! The `is_*` functions return the list of problems with a value (empty when it is valid), as
//! Kubernetes' `IsDNS1123Subdomain` and friends do; the `validate_*` functions turn them into
//! [`field::ErrorList`]s at a field path.

pub mod field;

use std::collections::BTreeMap;

use field::{Error, ErrorList, Path};

/// The longest DNS-1123 label (and label value, and name part of a qualified name).
pub const DNS1123_LABEL_MAX_LEN: usize = 63;
/// The longest DNS-1123 subdomain.
pub const DNS1123_SUBDOMAIN_MAX_LEN: usize = 253;
/// The longest label value.
pub const LABEL_VALUE_MAX_LEN: usize = 63;
/// The largest total size of an object's annotations (keys and values), in bytes.
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;
/// The longest ConfigMap or Secret data key.
pub const CONFIG_MAP_KEY_MAX_LEN: usize = 253;

const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const QUALIFIED_NAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const CONFIG_MAP_KEY_MSG: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

fn max_len_message(max: usize) -> String {
    format!("must be no more than {max} characters")
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
fn is_label_shape(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty() && edge(b[0]) && edge(b[b.len() - 1]) && b.iter().all(|&c| edge(c) || c == b'-')
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn is_qualified_shape(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// Problems with `value` as a DNS-1123 label (e.g. a namespace name).
pub fn is_dns1123_label(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LEN {
        errors.push(max_len_message(DNS1123_LABEL_MAX_LEN));
    }
    if !is_label_shape(value) {
        errors.push(DNS1123_LABEL_MSG.to_owned());
    }
    errors
}

/// Problems with `value` as a DNS-1035 label: like a DNS-1123 label, but starting with a
/// letter (e.g. an `AdmissionReview` version).
pub fn is_dns1035_label(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LEN {
        errors.push(max_len_message(DNS1123_LABEL_MAX_LEN));
    }
    if !is_label_shape(value) || !value.as_bytes()[0].is_ascii_lowercase() {
        errors.push(DNS1035_LABEL_MSG.to_owned());
    }
    errors
}

/// Problems with `value` as a DNS-1123 subdomain (most object names).
pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LEN {
        errors.push(max_len_message(DNS1123_SUBDOMAIN_MAX_LEN));
    }
    if !value.split('.').all(is_label_shape) {
        errors.push(DNS1123_SUBDOMAIN_MSG.to_owned());
    }
    errors
}

/// Problems with `value` as a qualified name: an optional DNS-1123 subdomain prefix and `/`,
/// then a name of at most 63 characters (label keys, annotation keys, finalizers).
pub fn is_qualified_name(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let mut parts = value.split('/');
    let (prefix, name) = match (parts.next(), parts.next(), parts.next()) {
        (Some(name), None, _) => (None, name),
        (Some(prefix), Some(name), None) => (Some(prefix), name),
        _ => {
            errors.push(
                "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
                    .to_owned(),
            );
            return errors;
        }
    };
    match prefix {
        Some("") => errors.push("prefix part must be non-empty".to_owned()),
        Some(prefix) => {
            errors.extend(
                is_dns1123_subdomain(prefix)
                    .into_iter()
                    .map(|m| format!("prefix part {m}")),
            );
        }
        None => {}
    }
    if name.is_empty() {
        errors.push("name part must be non-empty".to_owned());
    } else {
        if name.len() > DNS1123_LABEL_MAX_LEN {
            errors.push(format!(
                "name part {}",
                max_len_message(DNS1123_LABEL_MAX_LEN)
            ));
        }
        if !is_qualified_shape(name) {
            errors.push(QUALIFIED_NAME_MSG.to_owned());
        }
    }
    errors
}

/// Problems with `value` as a label value (empty is valid).
pub fn is_valid_label_value(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > LABEL_VALUE_MAX_LEN {
        errors.push(max_len_message(LABEL_VALUE_MAX_LEN));
    }
    if !value.is_empty() && !is_qualified_shape(value) {
        errors.push(LABEL_VALUE_MSG.to_owned());
    }
    errors
}

/// Problems with `value` as a ConfigMap or Secret data key.
pub fn is_config_map_key(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > CONFIG_MAP_KEY_MAX_LEN {
        errors.push(max_len_message(CONFIG_MAP_KEY_MAX_LEN));
    }
    let shaped = !value.is_empty()
        && value
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'));
    if !shaped {
        errors.push(CONFIG_MAP_KEY_MSG.to_owned());
    }
    match value {
        "." => errors.push("must not be '.'".to_owned()),
        ".." => errors.push("must not be '..'".to_owned()),
        v if v.starts_with("..") => errors.push("must not start with '..'".to_owned()),
        _ => {}
    }
    errors
}

/// Problems with `name` as one segment of a URL path (every object name must be one).
pub fn is_valid_path_segment_name(name: &str) -> Vec<String> {
    let mut errors = Vec::new();
    match name {
        "." => errors.push("may not be '.'".to_owned()),
        ".." => errors.push("may not be '..'".to_owned()),
        _ => {}
    }
    for c in ['/', '%'] {
        if name.contains(c) {
            errors.push(format!("may not contain '{c}'"));
        }
    }
    errors
}

/// Checks an object name, or with `prefix` a `generateName` prefix (whose trailing `-` is
/// allowed, since a random suffix follows it).
pub type NameValidator = fn(name: &str, prefix: bool) -> Vec<String>;

/// `generateName` prefixes may end with `-`: validate them as if a character followed.
fn mask_trailing_dash(name: &str, prefix: bool) -> String {
    if prefix && name.len() > 1 && name.ends_with('-') {
        format!("{}a", &name[..name.len() - 1])
    } else {
        name.to_owned()
    }
}

/// Names that must be DNS-1123 subdomains (ConfigMaps, Secrets, Leases, most resources).
pub fn name_is_dns_subdomain(name: &str, prefix: bool) -> Vec<String> {
    is_dns1123_subdomain(&mask_trailing_dash(name, prefix))
}

/// Names that must be DNS-1123 labels (Namespaces).
pub fn name_is_dns_label(name: &str, prefix: bool) -> Vec<String> {
    is_dns1123_label(&mask_trailing_dash(name, prefix))
}

/// Names that only have to be valid path segments (RBAC roles, for example).
pub fn name_is_path_segment(name: &str, prefix: bool) -> Vec<String> {
    if prefix {
        // A prefix is only part of a segment; '.' and '..' are fine as prefixes.
        return ['/', '%']
            .into_iter()
            .filter(|c| name.contains(*c))
            .map(|c| format!("may not contain '{c}'"))
            .collect();
    }
    is_valid_path_segment_name(name)
}

/// Validates label keys and values.
pub fn validate_labels(labels: &BTreeMap<String, String>, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    for (key, value) in labels {
        for message in is_qualified_name(key) {
            errors.push(Error::invalid(path, key.as_str(), message));
        }
        for message in is_valid_label_value(value) {
            errors.push(Error::invalid(&path.key(key), value.as_str(), message));
        }
    }
    errors
}

/// Validates annotation keys and the total size of the annotations.
pub fn validate_annotations(annotations: &BTreeMap<String, String>, path: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    let mut total = 0usize;
    for (key, value) in annotations {
        for message in is_qualified_name(&key.to_lowercase()) {
            errors.push(Error::invalid(path, key.as_str(), message));
        }
        total += key.len() + value.len();
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        errors.push(Error::too_long(path, "", TOTAL_ANNOTATION_SIZE_LIMIT));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_labels_and_subdomains() {
        for ok in ["a", "my-name", "123-abc", &"a".repeat(63)] {
            assert!(is_dns1123_label(ok).is_empty(), "{ok}");
        }
        for bad in ["", "A", "-a", "a-", "a.b", "a_b", &"a".repeat(64)] {
            assert!(!is_dns1123_label(bad).is_empty(), "{bad}");
        }
        assert_eq!(
            is_dns1123_label(&"a".repeat(64)),
            vec!["must be no more than 63 characters".to_owned()]
        );
        for ok in ["example.com", "a", "a.b-c.d", "kube-root-ca.crt"] {
            assert!(is_dns1123_subdomain(ok).is_empty(), "{ok}");
        }
        for bad in ["", "Example.com", "a..b", ".a", "a.", "a_b", "a/b"] {
            assert!(!is_dns1123_subdomain(bad).is_empty(), "{bad}");
        }
        assert_eq!(
            is_dns1123_subdomain(&"a".repeat(254)).len(),
            1,
            "only the length is wrong"
        );
    }

    #[test]
    fn qualified_names() {
        for ok in [
            "app",
            "MyName",
            "my.name",
            "example.com/my-key",
            "kubernetes.io/metadata.name",
            "a_b",
        ] {
            assert!(
                is_qualified_name(ok).is_empty(),
                "{ok}: {:?}",
                is_qualified_name(ok)
            );
        }
        assert_eq!(
            is_qualified_name("/a"),
            vec!["prefix part must be non-empty".to_owned()]
        );
        assert_eq!(
            is_qualified_name("a/"),
            vec!["name part must be non-empty".to_owned()]
        );
        assert!(
            is_qualified_name("Example.com/a")[0]
                .starts_with("prefix part a lowercase RFC 1123 subdomain")
        );
        assert_eq!(is_qualified_name("a/b/c").len(), 1);
        assert!(!is_qualified_name("-a").is_empty());
        assert!(
            is_qualified_name(&"a".repeat(64))[0].starts_with("name part must be no more than 63")
        );
    }

    #[test]
    fn label_values_and_data_keys() {
        for ok in ["", "v1", "my_value", "12345", "a.b-c"] {
            assert!(is_valid_label_value(ok).is_empty(), "{ok}");
        }
        for bad in ["-a", "a b", "a/b", &"a".repeat(64)] {
            assert!(!is_valid_label_value(bad).is_empty(), "{bad}");
        }
        for ok in ["key.name", "KEY_NAME", "key-name", ".hidden", "a..b"] {
            assert!(is_config_map_key(ok).is_empty(), "{ok}");
        }
        for bad in ["", "a b", "a/b", ".", "..", "..a"] {
            assert!(!is_config_map_key(bad).is_empty(), "{bad}");
        }
    }

    #[test]
    fn name_validators_allow_a_trailing_dash_in_prefixes() {
        assert!(name_is_dns_subdomain("web-", true).is_empty());
        assert!(!name_is_dns_subdomain("web-", false).is_empty());
        assert!(name_is_dns_label("ns-", true).is_empty());
        assert!(!name_is_path_segment("a/b", false).is_empty());
        assert!(!name_is_path_segment("..", false).is_empty());
        assert!(name_is_path_segment("..", true).is_empty());
        assert!(name_is_path_segment("system:controller:x", false).is_empty());
    }

    #[test]
    fn labels_and_annotations() {
        let path = Path::new("metadata").child("labels");
        let labels: BTreeMap<String, String> = [
            ("app".into(), "web".into()),
            ("bad key".into(), "ok".into()),
            ("k".into(), "bad value".into()),
        ]
        .into();
        let errors = validate_labels(&labels, &path);
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["metadata.labels", "metadata.labels[k]"]);
        assert!(
            errors.0[0]
                .to_string()
                .starts_with("metadata.labels: Invalid value: \"bad key\": name part must consist")
        );
        let huge: BTreeMap<String, String> =
            [("a".into(), "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT))].into();
        let errors = validate_annotations(&huge, &Path::new("metadata").child("annotations"));
        assert_eq!(
            errors.to_string(),
            "metadata.annotations: Too long: may not be more than 262144 bytes"
        );
        let upper: BTreeMap<String, String> = [("Example.COM/Key".into(), "v".into())].into();
        assert!(
            validate_annotations(&upper, &Path::new("a")).is_empty(),
            "annotation keys are checked lower-cased"
        );
    }
}
