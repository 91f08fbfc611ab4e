//! What the webhook client configurations of CRD conversion and admission share.

use genplane_apimachinery::validation::field::{Error, ErrorList, Path};

/// The problems of a webhook's `clientConfig.url`, as upstream's `ValidateWebhookURL` with
/// `https` required finds them: the scheme, a host, no user information, fragment or query.
///
/// One difference, on purpose: upstream echoes user information as given, a password
/// included; here a password shows as `xxxxx`, so that it is not copied into the answer, the
/// events and the audit log.
pub fn validate_url(path: &Path, url: &str) -> ErrorList {
    const FORM: &str = "; desired format: https://host[/path]";
    let mut errors = ErrorList::new();
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest))
            if !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')) =>
        {
            (scheme, rest)
        }
        _ => ("", url),
    };
    let (before_fragment, fragment) = match rest.split_once('#') {
        Some((a, b)) => (a, b),
        None => (rest, ""),
    };
    let (before_query, query) = match before_fragment.split_once('?') {
        Some((a, b)) => (a, b),
        None => (before_fragment, ""),
    };
    let (authority, _) = if scheme.is_empty() {
        ("", before_query)
    } else {
        match before_query.find('/') {
            Some(i) => (&before_query[..i], &before_query[i..]),
            None => (before_query, ""),
        }
    };
    let (user, host) = match authority.rsplit_once('@') {
        Some((user, host)) => (Some(user), host),
        None => (None, authority),
    };
    if scheme != "https" {
        errors.push(Error::invalid(
            path,
            scheme,
            format!("'https' is the only allowed URL scheme{FORM}"),
        ));
    }
    if host.is_empty() {
        errors.push(Error::invalid(
            path,
            host,
            format!("host must be specified{FORM}"),
        ));
    }
    if let Some(user) = user {
        let shown = match user.split_once(':') {
            Some((name, _)) => format!("{name}:xxxxx"),
            None => user.to_owned(),
        };
        errors.push(Error::invalid(
            path,
            shown,
            "user information is not permitted in the URL",
        ));
    }
    if !fragment.is_empty() {
        errors.push(Error::invalid(
            path,
            fragment,
            "fragments are not permitted in the URL",
        ));
    }
    if !query.is_empty() {
        errors.push(Error::invalid(
            path,
            query,
            "query parameters are not permitted in the URL",
        ));
    }
    errors
}
