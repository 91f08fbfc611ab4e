//! What the webhook client configurations of CRD conversion and admission share.

use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use genplane_apimachinery::validation::is_dns1123_subdomain;
use serde::Deserialize;

/// A webhook's `clientConfig.service`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServiceReference {
    /// The Service's namespace.
    pub namespace: String,
    /// The Service's name.
    pub name: String,
    /// The URL path called.
    pub path: Option<String>,
    /// The port (443 when none).
    pub port: Option<i64>,
}

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

/// The problems of a webhook's `clientConfig.service`, as upstream's `ValidateWebhookService`
/// finds them: a name and namespace, a port in 1..=65535 (443 when none), and a path of
/// DNS-1123 subdomain segments.
pub fn validate_service(path: &Path, service: &ServiceReference) -> ErrorList {
    let mut errors = ErrorList::new();
    if service.name.is_empty() {
        errors.push(Error::required(&path.child("name"), ""));
    }
    if service.namespace.is_empty() {
        errors.push(Error::required(&path.child("namespace"), ""));
    }
    let port = service.port.unwrap_or(443);
    if !(1..=65535).contains(&port) {
        errors.push(Error::invalid(
            &path.child("port"),
            port,
            "port is not valid: must be between 1 and 65535, inclusive",
        ));
    }
    let Some(url_path) = service.path.as_deref() else {
        return errors;
    };
    if url_path.is_empty() || url_path == "/" {
        return errors;
    }
    let at = path.child("path");
    if url_path == "//" {
        errors.push(Error::invalid(&at, url_path, "segment[0] may not be empty"));
        return errors;
    }
    if !url_path.starts_with('/') {
        errors.push(Error::invalid(&at, url_path, "must start with a '/'"));
    }
    let mut to_check = url_path.get(1..).unwrap_or("");
    to_check = to_check.strip_suffix('/').unwrap_or(to_check);
    for (i, step) in to_check.split('/').enumerate() {
        if step.is_empty() {
            errors.push(Error::invalid(
                &at,
                url_path,
                format!("segment[{i}] may not be empty"),
            ));
            continue;
        }
        for failure in is_dns1123_subdomain(step) {
            errors.push(Error::invalid(
                &at,
                url_path,
                format!("segment[{i}]: {failure}"),
            ));
        }
    }
    errors
}
