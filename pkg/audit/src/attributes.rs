//! What the audit layer knows about a request when it arrives: borrowed, so that deciding
//! that a request is not audited allocates nothing.

use std::net::IpAddr;
use std::time::SystemTime;

use genplane_authentication::UserInfo;

/// A request, as the policy sees it and as its events record it.
#[derive(Clone, Copy, Debug)]
pub struct RequestAttributes<'a> {
    /// The authenticated user (before impersonation).
    pub user: &'a UserInfo,
    /// The verb: the request-info verb for resource requests (`get`, `list`, `watch`, `create`,
    /// `update`, `patch`, `delete`, `deletecollection`), the lower-case HTTP method otherwise.
    pub verb: &'a str,
    /// The path and query, as sent (`/api/v1/namespaces/default/pods?limit=500`).
    pub request_uri: &'a str,
    /// The resource addressed, for resource requests; `None` for non-resource requests.
    pub resource: Option<ResourceAttributes<'a>>,
    /// Where the request came from.
    pub source_ips: SourceIps<'a>,
    /// The `User-Agent` header (truncated to 1024 bytes in events, as upstream).
    pub user_agent: &'a str,
    /// Whether the request is long-running (watch, exec, proxy...): only those get a
    /// `ResponseStarted` event.
    pub long_running: bool,
    /// The request's audit ID (the `Audit-ID` request header, or one the server made); a
    /// random UUID is made when `None`.
    pub audit_id: Option<&'a str>,
    /// When the request was received.
    pub received_at: SystemTime,
}

impl<'a> RequestAttributes<'a> {
    /// A non-resource request received now, from nowhere in particular; set the other fields
    /// with struct update syntax.
    pub fn new(user: &'a UserInfo, verb: &'a str, request_uri: &'a str) -> Self {
        RequestAttributes {
            user,
            verb,
            request_uri,
            resource: None,
            source_ips: SourceIps::default(),
            user_agent: "",
            long_running: false,
            audit_id: None,
            received_at: SystemTime::now(),
        }
    }

    /// The path: the request URI without its query.
    pub fn path(&self) -> &'a str {
        self.request_uri
            .split_once('?')
            .map_or(self.request_uri, |(path, _)| path)
    }
}

/// The resource a resource request addresses (from the request info).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResourceAttributes<'a> {
    /// The API group; empty for the core group.
    pub api_group: &'a str,
    /// The API version.
    pub api_version: &'a str,
    /// The resource (`pods`).
    pub resource: &'a str,
    /// The subresource (`status`), or empty.
    pub subresource: &'a str,
    /// The namespace, or empty for cluster-scoped resources and all-namespace lists.
    pub namespace: &'a str,
    /// The object's name, or empty (lists, creates without a name in the path).
    pub name: &'a str,
}

/// The headers and peer address that upstream's `SourceIPs` reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SourceIps<'a> {
    /// The `X-Forwarded-For` header.
    pub forwarded_for: Option<&'a str>,
    /// The `X-Real-Ip` header.
    pub real_ip: Option<&'a str>,
    /// The peer address of the connection.
    pub remote: Option<IpAddr>,
}

impl SourceIps<'_> {
    /// The client's addresses as upstream lists them: every valid address of
    /// `X-Forwarded-For`, then `X-Real-Ip` unless already listed, then the peer unless it is the
    /// last one listed.
    pub fn resolve(&self) -> Vec<IpAddr> {
        let mut ips: Vec<IpAddr> = Vec::new();
        if let Some(forwarded) = self.forwarded_for {
            ips.extend(
                forwarded
                    .split(',')
                    .filter_map(|part| part.trim().parse::<IpAddr>().ok())
                    .map(|ip| ip.to_canonical()),
            );
        }
        if let Some(real) = self
            .real_ip
            .and_then(|r| r.trim().parse::<IpAddr>().ok())
            .map(|ip| ip.to_canonical())
            && !ips.contains(&real)
        {
            ips.push(real);
        }
        if let Some(remote) = self.remote.map(|ip| ip.to_canonical())
            && ips.last() != Some(&remote)
        {
            ips.push(remote);
        }
        ips
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_ips_follow_upstream_order_and_deduplication() {
        let ips = |forwarded_for, real_ip, remote: &str| {
            SourceIps {
                forwarded_for,
                real_ip,
                remote: remote.parse().ok(),
            }
            .resolve()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
        };
        assert_eq!(ips(None, None, "10.0.0.1"), ["10.0.0.1"]);
        assert_eq!(
            ips(Some("1.1.1.1, junk, 2.2.2.2"), Some("3.3.3.3"), "10.0.0.1"),
            ["1.1.1.1", "2.2.2.2", "3.3.3.3", "10.0.0.1"]
        );
        assert_eq!(
            ips(Some("1.1.1.1"), Some("1.1.1.1"), "1.1.1.1"),
            ["1.1.1.1"]
        );
        assert_eq!(ips(None, None, "::ffff:10.0.0.2"), ["10.0.0.2"]);
    }

    #[test]
    fn path_drops_the_query() {
        let user = UserInfo::default();
        assert_eq!(
            RequestAttributes::new(&user, "get", "/api/v1/pods?watch=1").path(),
            "/api/v1/pods"
        );
        assert_eq!(
            RequestAttributes::new(&user, "get", "/healthz").path(),
            "/healthz"
        );
    }
}
