//! What a request asks for, parsed from its method, path and query string, as
//! kube-apiserver's request-info factory parses it (authorization, audit, metrics and routing all
//! use the result).
//!
//! Resource paths:
//! - `/api/v1/<resource>[/<name>[/<subresource>]]` (the core group),
//! - `/apis/<group>/<version>/<resource>...`,
//! - with `namespaces/<namespace>/` before the resource for namespaced resources, except that
//!   `/api/v1/namespaces/<name>[/status|/finalize]` is the Namespace itself,
//! - and the deprecated `watch/` before the resource.
//!
//! Everything else (`/api`, `/apis/<group>`, `/version`, `/healthz`, ...) is a non-resource
//! request, whose verb is the lower-cased HTTP method.

/// A parsed request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestInfo {
    /// Whether the path names an API resource (not discovery, health or another path).
    pub is_resource_request: bool,
    /// The path, as given.
    pub path: String,
    /// The verb: get, list, watch, create, update, patch, delete, deletecollection; for
    /// non-resource requests the lower-cased method.
    pub verb: String,
    /// `api` or `apis` for resource requests.
    pub api_prefix: String,
    /// The API group ("" for the core group).
    pub api_group: String,
    /// The API version.
    pub api_version: String,
    /// The namespace ("" for cluster-scoped requests and collections across namespaces).
    pub namespace: String,
    /// The resource, e.g. `configmaps`.
    pub resource: String,
    /// The subresource, e.g. `status`.
    pub subresource: String,
    /// The object's name; for lists and watches, the name pinned by a `metadata.name` field
    /// selector (so that authorization can check it).
    pub name: String,
    /// The path segments from the resource on.
    pub parts: Vec<String>,
    /// Whether the path named a namespace before the resource (`.../namespaces/<ns>/<resource>`).
    /// A Namespace's own path (`/api/v1/namespaces/<name>`) does not: its `namespace` is its name.
    /// Routing serves cluster-scoped resources only without this prefix, and namespaced objects
    /// only with it.
    pub namespaced_path: bool,
}

/// Subresources of a namespace that are not resources inside it.
const NAMESPACE_SUBRESOURCES: &[&str] = &["status", "finalize"];

fn verb_for_method(method: &str) -> String {
    match method {
        "POST" => "create",
        "GET" | "HEAD" => "get",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        other => return other.to_lowercase(),
    }
    .to_owned()
}

/// Whether the query asks for a watch (`watch=true` or `watch=1`, as Go's ParseBool reads it).
fn query_watch(query: &str) -> bool {
    form_urlencoded::parse(query.as_bytes()).any(|(k, v)| {
        k == "watch" && genplane_component_base::strconv::parse_bool(&v) == Some(true)
    })
}

/// The name a `metadata.name=<name>` field selector pins, if it does.
fn field_selector_name(query: &str) -> Option<String> {
    let (_, selector) =
        form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == "fieldSelector")?;
    let selector = genplane_apimachinery::fields::Selector::parse(&selector).ok()?;
    selector
        .requires_exact_match("metadata.name")
        .map(str::to_owned)
}

/// What `request` asks for (see [`parse`]).
pub fn of<B>(request: &hyper::Request<B>) -> RequestInfo {
    parse(
        request.method().as_str(),
        request.uri().path(),
        request.uri().query(),
    )
}

/// Parses a request.
pub fn parse(method: &str, path: &str, query: Option<&str>) -> RequestInfo {
    let query = query.unwrap_or("");
    let mut info = RequestInfo {
        path: path.to_owned(),
        verb: method.to_lowercase(),
        ..RequestInfo::default()
    };
    let parts: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|p| !p.is_empty())
        .collect();
    let (prefix, rest) = match parts.split_first() {
        Some((&prefix, rest)) if prefix == "api" || prefix == "apis" => (prefix, rest),
        _ => return info,
    };
    let (group, version, rest) = match (prefix, rest) {
        ("api", [version, rest @ ..]) if !rest.is_empty() => ("", *version, rest),
        ("apis", [group, version, rest @ ..]) if !rest.is_empty() => (*group, *version, rest),
        _ => return info,
    };
    info.is_resource_request = true;
    info.api_prefix = prefix.to_owned();
    info.api_group = group.to_owned();
    info.api_version = version.to_owned();
    info.verb = verb_for_method(method);
    let mut current: &[&str] = rest;
    if current.first() == Some(&"watch") {
        info.verb = "watch".to_owned();
        current = &current[1..];
    }
    if current.first() == Some(&"namespaces") && current.len() > 1 {
        info.namespace = current[1].to_owned();
        if current.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&current[2]) {
            current = &current[2..];
            info.namespaced_path = true;
        }
    }
    info.parts = current.iter().map(|p| (*p).to_owned()).collect();
    if let Some(resource) = current.first() {
        info.resource = (*resource).to_owned();
    }
    if let Some(name) = current.get(1) {
        info.name = (*name).to_owned();
    }
    if let Some(subresource) = current.get(2) {
        info.subresource = (*subresource).to_owned();
    }
    if info.name.is_empty() && info.verb == "get" {
        info.verb = if query_watch(query) { "watch" } else { "list" }.to_owned();
    }
    if info.name.is_empty()
        && matches!(info.verb.as_str(), "list" | "watch")
        && let Some(name) = field_selector_name(query)
    {
        info.name = name;
    }
    if info.name.is_empty() && info.verb == "delete" {
        info.verb = "deletecollection".to_owned();
    }
    info
}

/// The fuzz entry point of [`parse`]: the first byte picks the method, the rest is the path
/// and, after a `?`, the query (read lossily as UTF-8). A resource request's parts come from
/// its path.
///
/// # Panics
///
/// When parsing panics, or the result contradicts the path.
pub fn exercise(data: &[u8]) {
    const METHODS: [&str; 8] = [
        "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "CONNECT",
    ];
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let method = METHODS[usize::from(which) % METHODS.len()];
    let text = String::from_utf8_lossy(rest);
    let (path, query) = match text.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (&*text, None),
    };
    let info = parse(method, path, query);
    assert_eq!(info.path, path);
    if info.is_resource_request {
        assert!(
            info.parts.iter().all(|part| path.contains(part.as_str())),
            "{text:?}: {info:?}"
        );
        assert!(matches!(info.api_prefix.as_str(), "api" | "apis"));
    } else {
        assert_eq!(info.verb, method.to_lowercase(), "{text:?}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(
        method: &str,
        path: &str,
        query: Option<&str>,
    ) -> (bool, String, String, String, String, String, String, String) {
        let i = parse(method, path, query);
        (
            i.is_resource_request,
            i.verb,
            i.api_group,
            i.api_version,
            i.namespace,
            i.resource,
            i.name,
            i.subresource,
        )
    }

    fn r(
        verb: &str,
        group: &str,
        version: &str,
        ns: &str,
        resource: &str,
        name: &str,
        sub: &str,
    ) -> (bool, String, String, String, String, String, String, String) {
        (
            true,
            verb.into(),
            group.into(),
            version.into(),
            ns.into(),
            resource.into(),
            name.into(),
            sub.into(),
        )
    }

    #[test]
    fn resource_requests_parse_as_upstream() {
        let cases = [
            (
                ("GET", "/api/v1/namespaces", None),
                r("list", "", "v1", "", "namespaces", "", ""),
            ),
            (
                ("GET", "/api/v1/namespaces/default", None),
                r("get", "", "v1", "default", "namespaces", "default", ""),
            ),
            (
                ("PUT", "/api/v1/namespaces/default/status", None),
                r(
                    "update",
                    "",
                    "v1",
                    "default",
                    "namespaces",
                    "default",
                    "status",
                ),
            ),
            (
                ("PUT", "/api/v1/namespaces/default/finalize", None),
                r(
                    "update",
                    "",
                    "v1",
                    "default",
                    "namespaces",
                    "default",
                    "finalize",
                ),
            ),
            (
                ("GET", "/api/v1/namespaces/default/configmaps", None),
                r("list", "", "v1", "default", "configmaps", "", ""),
            ),
            (
                (
                    "GET",
                    "/api/v1/namespaces/default/configmaps",
                    Some("watch=true"),
                ),
                r("watch", "", "v1", "default", "configmaps", "", ""),
            ),
            (
                (
                    "GET",
                    "/api/v1/namespaces/default/configmaps",
                    Some("watch=1&resourceVersion=5"),
                ),
                r("watch", "", "v1", "default", "configmaps", "", ""),
            ),
            (
                (
                    "GET",
                    "/api/v1/namespaces/default/configmaps",
                    Some("watch=false"),
                ),
                r("list", "", "v1", "default", "configmaps", "", ""),
            ),
            (
                ("GET", "/api/v1/configmaps", None),
                r("list", "", "v1", "", "configmaps", "", ""),
            ),
            (
                ("POST", "/api/v1/namespaces/default/configmaps", None),
                r("create", "", "v1", "default", "configmaps", "", ""),
            ),
            (
                ("GET", "/api/v1/namespaces/default/configmaps/cm", None),
                r("get", "", "v1", "default", "configmaps", "cm", ""),
            ),
            (
                ("HEAD", "/api/v1/namespaces/default/configmaps/cm", None),
                r("get", "", "v1", "default", "configmaps", "cm", ""),
            ),
            (
                ("PATCH", "/api/v1/namespaces/default/configmaps/cm", None),
                r("patch", "", "v1", "default", "configmaps", "cm", ""),
            ),
            (
                ("DELETE", "/api/v1/namespaces/default/configmaps/cm", None),
                r("delete", "", "v1", "default", "configmaps", "cm", ""),
            ),
            (
                ("DELETE", "/api/v1/namespaces/default/configmaps", None),
                r(
                    "deletecollection",
                    "",
                    "v1",
                    "default",
                    "configmaps",
                    "",
                    "",
                ),
            ),
            (
                (
                    "POST",
                    "/api/v1/namespaces/default/serviceaccounts/sa/token",
                    None,
                ),
                r(
                    "create",
                    "",
                    "v1",
                    "default",
                    "serviceaccounts",
                    "sa",
                    "token",
                ),
            ),
            (
                (
                    "GET",
                    "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l",
                    None,
                ),
                r(
                    "get",
                    "coordination.k8s.io",
                    "v1",
                    "kube-system",
                    "leases",
                    "l",
                    "",
                ),
            ),
            (
                ("GET", "/apis/events.k8s.io/v1/events", None),
                r("list", "events.k8s.io", "v1", "", "events", "", ""),
            ),
            (
                ("GET", "/api/v1/watch/namespaces/default/configmaps", None),
                r("watch", "", "v1", "default", "configmaps", "", ""),
            ),
            (
                (
                    "GET",
                    "/api/v1/watch/namespaces/default/configmaps/cm",
                    None,
                ),
                r("watch", "", "v1", "default", "configmaps", "cm", ""),
            ),
            (
                (
                    "GET",
                    "/api/v1/namespaces/default/configmaps",
                    Some("fieldSelector=metadata.name%3Dcm"),
                ),
                r("list", "", "v1", "default", "configmaps", "cm", ""),
            ),
            (
                (
                    "GET",
                    "/api/v1/namespaces/default/configmaps",
                    Some("watch=true&fieldSelector=metadata.name=cm"),
                ),
                r("watch", "", "v1", "default", "configmaps", "cm", ""),
            ),
            (
                ("GET", "/api/v1/namespaces/default/configmaps/cm/", None),
                r("get", "", "v1", "default", "configmaps", "cm", ""),
            ),
        ];
        for ((method, path, query), expected) in cases {
            assert_eq!(
                summary(method, path, query),
                expected,
                "{method} {path} {query:?}"
            );
        }
        assert_eq!(
            parse("GET", "/api/v1/namespaces/default/configmaps/cm", None).parts,
            ["configmaps", "cm"]
        );
    }

    #[test]
    fn a_namespace_prefix_is_told_apart_from_a_namespace_path() {
        for (path, prefixed) in [
            ("/api/v1/namespaces", false),
            ("/api/v1/namespaces/a", false),
            ("/api/v1/namespaces/a/status", false),
            ("/api/v1/namespaces/a/finalize", false),
            ("/api/v1/namespaces/a/namespaces", true),
            ("/api/v1/namespaces/a/namespaces/a", true),
            ("/api/v1/namespaces/a/namespaces/kube-system/finalize", true),
            ("/api/v1/watch/namespaces/a/namespaces", true),
            ("/api/v1/namespaces/a/configmaps/c", true),
            ("/api/v1/configmaps", false),
            (
                "/apis/rbac.authorization.k8s.io/v1/namespaces/a/clusterroles",
                true,
            ),
        ] {
            assert_eq!(parse("GET", path, None).namespaced_path, prefixed, "{path}");
        }
    }

    #[test]
    fn other_paths_are_non_resource_requests() {
        for (method, path) in [
            ("GET", "/api"),
            ("GET", "/api/v1"),
            ("GET", "/apis"),
            ("GET", "/apis/apps"),
            ("GET", "/apis/apps/v1"),
            ("GET", "/version"),
            ("GET", "/healthz"),
            ("POST", "/"),
            ("GET", "/openapi/v3"),
            ("GET", "/openapi/v2"),
        ] {
            let info = parse(method, path, None);
            assert!(!info.is_resource_request, "{path}");
            assert_eq!(info.verb, method.to_lowercase());
            assert_eq!(info.path, path);
        }
    }
}
