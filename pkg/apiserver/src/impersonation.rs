//! Impersonation (`Impersonate-User`, `Impersonate-Group`, `Impersonate-Uid`,
//! `Impersonate-Extra-<key>` headers), as kube-apiserver checks it: the requester needs the
//! `impersonate` verb on each thing it asks to be — `users` (or, for a service account's user
//! name, `serviceaccounts` in its namespace), `groups`, `uids.authentication.k8s.io` and
//! `userextras/<key>.authentication.k8s.io` — by name. The request then proceeds as the
//! impersonated user; a service account gets its groups, any non-anonymous user
//! `system:authenticated`.
//!
//! One difference from upstream: groups, a uid or extras without a user are a 400 BadRequest
//! here, where kube-apiserver answers 500.

use std::collections::BTreeMap;

use genplane_apimachinery::errors::{ApiError, Status};
use genplane_authentication::{SYSTEM_AUTHENTICATED, SYSTEM_UNAUTHENTICATED, UserInfo};
use genplane_authorization::{Attributes, Authorizer};
use hyper::header::HeaderMap;

use crate::authz;

/// The user header.
pub const USER_HEADER: &str = "impersonate-user";
/// The group header (repeated).
pub const GROUP_HEADER: &str = "impersonate-group";
/// The uid header.
pub const UID_HEADER: &str = "impersonate-uid";
/// The prefix of the extra headers.
pub const EXTRA_PREFIX: &str = "impersonate-extra-";

const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// Whether `headers` ask for impersonation.
pub fn requested(headers: &HeaderMap) -> bool {
    headers
        .keys()
        .any(|k| k.as_str().starts_with("impersonate-"))
}

fn values<'a>(headers: &'a HeaderMap, name: &str) -> Result<Vec<&'a str>, ApiError> {
    headers
        .get_all(name)
        .iter()
        .map(|v| {
            v.to_str().map_err(|_| {
                Status::bad_request(format!("the {name} header is not valid text")).into()
            })
        })
        .collect()
}

/// Percent-decodes an extra key, as Go's `url.PathUnescape`.
fn unescape(key: &str) -> Result<String, ApiError> {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = key
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| {
                    ApiError::from(Status::bad_request(format!(
                        "invalid escape in impersonation extra key {key:?}"
                    )))
                })?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| {
        Status::bad_request(format!("impersonation extra key {key:?} is not UTF-8")).into()
    })
}

/// The user `requester` acts as, after checking its right to each impersonated attribute,
/// or `None` when the request impersonates no one.
pub fn impersonate(
    headers: &HeaderMap,
    requester: &UserInfo,
    authorizer: &dyn Authorizer,
) -> Result<Option<UserInfo>, ApiError> {
    if !requested(headers) {
        return Ok(None);
    }
    let users = values(headers, USER_HEADER)?;
    let groups = values(headers, GROUP_HEADER)?;
    let uids = values(headers, UID_HEADER)?;
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in headers {
        if let Some(key) = name.as_str().strip_prefix(EXTRA_PREFIX) {
            let value = value.to_str().map_err(|_| {
                ApiError::from(Status::bad_request(format!(
                    "the {name} header is not valid text"
                )))
            })?;
            extra
                .entry(unescape(key)?)
                .or_default()
                .push(value.to_owned());
        }
    }
    let Some(&username) = users.first() else {
        return Err(Status::bad_request(
            "impersonation of groups, a uid or extra attributes requires impersonating a user",
        )
        .into());
    };
    if users.len() > 1 || uids.len() > 1 {
        return Err(
            Status::bad_request("only one user and one uid may be impersonated at a time").into(),
        );
    }
    let check = |group: &str, resource: &str, subresource: &str, namespace: &str, name: &str| {
        let attributes = Attributes {
            user: requester.clone(),
            verb: "impersonate".into(),
            namespace: namespace.into(),
            api_group: group.into(),
            resource: resource.into(),
            subresource: subresource.into(),
            name: name.into(),
            resource_request: true,
            ..Attributes::default()
        };
        authz::authorize(authorizer, &attributes)
    };
    let mut impersonated_groups: Vec<String> = Vec::new();
    match username
        .strip_prefix(SERVICE_ACCOUNT_PREFIX)
        .and_then(|rest| rest.split_once(':'))
    {
        Some((namespace, name)) => {
            check("", "serviceaccounts", "", namespace, name)?;
            impersonated_groups.push("system:serviceaccounts".into());
            impersonated_groups.push(format!("system:serviceaccounts:{namespace}"));
        }
        None => check("", "users", "", "", username)?,
    }
    for group in &groups {
        check("", "groups", "", "", group)?;
    }
    for uid in &uids {
        check("authentication.k8s.io", "uids", "", "", uid)?;
    }
    for (key, values) in &extra {
        for value in values {
            check("authentication.k8s.io", "userextras", key, "", value)?;
        }
    }
    for group in groups {
        if !impersonated_groups.iter().any(|g| g == group) {
            impersonated_groups.push(group.to_owned());
        }
    }
    let everyone = if username == genplane_authentication::ANONYMOUS_USER {
        SYSTEM_UNAUTHENTICATED
    } else {
        SYSTEM_AUTHENTICATED
    };
    if !impersonated_groups.iter().any(|g| g == everyone) {
        impersonated_groups.push(everyone.to_owned());
    }
    Ok(Some(UserInfo {
        username: username.to_owned(),
        uid: uids.first().map(|u| (*u).to_owned()).unwrap_or_default(),
        groups: impersonated_groups,
        extra,
    }))
}

#[cfg(test)]
mod tests {
    use genplane_authorization::Decision;
    use hyper::header::HeaderValue;

    use super::*;

    /// Allows impersonating exactly the names listed.
    #[derive(Debug)]
    struct May(Vec<&'static str>);

    impl Authorizer for May {
        fn rules_for(&self, _: &UserInfo, _: &str) -> genplane_authorization::RulesInfo {
            genplane_authorization::RulesInfo::default()
        }

        fn authorize(&self, a: &Attributes) -> (Decision, String) {
            let key = format!(
                "{}/{}/{}/{}",
                a.resource, a.subresource, a.namespace, a.name
            );
            if a.verb == "impersonate" && self.0.contains(&key.as_str()) {
                (Decision::Allow, String::new())
            } else {
                (Decision::NoOpinion, String::new())
            }
        }
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (k, v) in pairs {
            headers.append(*k, HeaderValue::from_static(v));
        }
        headers
    }

    #[test]
    fn impersonation_needs_the_right_to_each_attribute() {
        let bob = UserInfo::authenticated("bob", vec![]);
        let may = May(vec![
            "users///alice",
            "groups///devs",
            "userextras/scopes.example.com/x//read",
        ]);
        let asked = headers(&[
            ("impersonate-user", "alice"),
            ("impersonate-group", "devs"),
            ("impersonate-extra-scopes.example.com%2fx", "read"),
        ]);
        let alice = impersonate(&asked, &bob, &may).unwrap().unwrap();
        assert_eq!(alice.username, "alice");
        assert_eq!(alice.groups, ["devs", "system:authenticated"]);
        assert_eq!(alice.extra["scopes.example.com/x"], ["read"]);

        let refused = headers(&[
            ("impersonate-user", "alice"),
            ("impersonate-group", "admins"),
        ]);
        let error = impersonate(&refused, &bob, &may).unwrap_err();
        assert_eq!(error.code, 403);
        assert_eq!(
            error.message,
            "groups \"admins\" is forbidden: User \"bob\" cannot impersonate resource \"groups\" in API group \"\" at the cluster scope"
        );
        assert!(
            impersonate(&HeaderMap::new(), &bob, &may)
                .unwrap()
                .is_none()
        );
        let no_user = headers(&[("impersonate-group", "devs")]);
        assert_eq!(impersonate(&no_user, &bob, &may).unwrap_err().code, 400);
    }

    #[test]
    fn service_accounts_are_checked_in_their_namespace_and_get_their_groups() {
        let bob = UserInfo::authenticated("bob", vec![]);
        let may = May(vec!["serviceaccounts//ns1/builder"]);
        let asked = headers(&[("impersonate-user", "system:serviceaccount:ns1:builder")]);
        let sa = impersonate(&asked, &bob, &may).unwrap().unwrap();
        assert_eq!(
            sa.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:ns1",
                "system:authenticated"
            ]
        );
        let other = headers(&[("impersonate-user", "system:serviceaccount:ns2:builder")]);
        assert_eq!(impersonate(&other, &bob, &may).unwrap_err().code, 403);
    }
}
