//! Impersonation (`Impersonate-User`, `Impersonate-Group`, `Impersonate-Uid`,
//! `Impersonate-Extra-<key>` headers), as kube-apiserver checks it: the requester needs the
//! `impersonate` verb on each thing it asks to be — `users` (or, for a service account's user
//! name, `serviceaccounts` in its namespace), `groups`, `uids.authentication.k8s.io` and
//! `userextras/<key>.authentication.k8s.io` — by name. The request then proceeds as the
//! impersonated user; a service account gets its groups, any non-anonymous user
//! `system:authenticated`.
//!
//! As upstream, the first of repeated user or uid headers counts, other `Impersonate-*`
//! headers are ignored, and a service account gets its groups only when no group is asked for.
//! One difference: groups, a uid or extras without a user are a 400 BadRequest here, where
//! kube-apiserver answers 500.

use genplane_authentication::requestheader::unescape_extra_key;
use std::collections::BTreeMap;

use genplane_apimachinery::errors::{ApiError, Status};
use genplane_audit::AuditRecord;
use genplane_authentication::{SYSTEM_AUTHENTICATED, SYSTEM_UNAUTHENTICATED, UserInfo};
use genplane_authorization::{Attributes, Authorizer};
use hyper::header::HeaderMap;

use super::{Refusal, audit, authorization, refused};
use crate::request_info::RequestInfo;
use crate::security::Security;

/// The user header.
pub(crate) const USER_HEADER: &str = "impersonate-user";
/// The group header (repeated).
pub(crate) const GROUP_HEADER: &str = "impersonate-group";
/// The uid header.
pub(crate) const UID_HEADER: &str = "impersonate-uid";
/// The prefix of the extra headers.
pub(crate) const EXTRA_PREFIX: &str = "impersonate-extra-";

const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// Whether `headers` ask for impersonation (an empty user header does not).
pub(crate) fn requested(headers: &HeaderMap) -> bool {
    headers.keys().any(|k| {
        let k = k.as_str();
        k == GROUP_HEADER || k == UID_HEADER || k.starts_with(EXTRA_PREFIX)
    }) || headers
        .get(USER_HEADER)
        .is_some_and(|v| !v.as_bytes().is_empty())
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

/// The namespace and name of a service account's user name
/// (`system:serviceaccount:<namespace>:<name>`, both non-empty, no further colon), as
/// upstream's `SplitUsername`.
fn service_account(username: &str) -> Option<(&str, &str)> {
    let rest = username.strip_prefix(SERVICE_ACCOUNT_PREFIX)?;
    let (namespace, name) = rest.split_once(':')?;
    (!namespace.is_empty() && !name.is_empty() && !name.contains(':')).then_some((namespace, name))
}

/// The user `requester` acts as, after checking its right to each impersonated attribute,
/// or `None` when the request impersonates no one.
pub(crate) async fn impersonate(
    headers: &HeaderMap,
    requester: &UserInfo,
    authorizer: &dyn Authorizer,
) -> Result<Option<UserInfo>, ApiError> {
    if !requested(headers) {
        return Ok(None);
    }
    let users = values(headers, USER_HEADER)?;
    let groups = values(headers, GROUP_HEADER)?;
    // As Go's Header.Get: the first user and uid count.
    let uid = values(headers, UID_HEADER)?.first().copied();
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in headers {
        if let Some(key) = name.as_str().strip_prefix(EXTRA_PREFIX) {
            let value = value.to_str().map_err(|_| {
                ApiError::from(Status::bad_request(format!(
                    "the {name} header is not valid text"
                )))
            })?;
            extra
                .entry(unescape_extra_key(key))
                .or_default()
                .push(value.to_owned());
        }
    }
    let Some(&username) = users.first().filter(|u| !u.is_empty()) else {
        return Err(Status::bad_request(
            "impersonation of groups, a uid or extra attributes requires impersonating a user",
        )
        .into());
    };
    // What the requester must be allowed to impersonate, in the order it is checked.
    let check =
        |group: &str, resource: &str, subresource: &str, namespace: &str, name: &str| Attributes {
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
    let mut checks = Vec::new();
    let mut impersonated_groups: Vec<String> = Vec::new();
    match service_account(username) {
        Some((namespace, name)) => {
            checks.push(check("", "serviceaccounts", "", namespace, name));
            // A service account's groups, unless the request names the groups itself.
            if groups.is_empty() {
                impersonated_groups.push("system:serviceaccounts".into());
                impersonated_groups.push(format!("system:serviceaccounts:{namespace}"));
            }
        }
        None => checks.push(check("", "users", "", "", username)),
    }
    for group in &groups {
        checks.push(check("", "groups", "", "", group));
    }
    if let Some(uid) = uid {
        checks.push(check("authentication.k8s.io", "uids", "", "", uid));
    }
    for (key, values) in &extra {
        for value in values {
            checks.push(check("authentication.k8s.io", "userextras", key, "", value));
        }
    }
    for attributes in &checks {
        authorization::authorize(authorizer, attributes).await?;
    }
    for group in groups {
        if !impersonated_groups.iter().any(|g| g == group) {
            impersonated_groups.push(group.to_owned());
        }
    }
    // Everyone is authenticated or not: added unless one of the two is asked for already.
    let has = |g: &str| impersonated_groups.iter().any(|x| x == g);
    if !has(SYSTEM_AUTHENTICATED) && !has(SYSTEM_UNAUTHENTICATED) {
        let everyone = if username == genplane_authentication::ANONYMOUS_USER {
            SYSTEM_UNAUTHENTICATED
        } else {
            SYSTEM_AUTHENTICATED
        };
        impersonated_groups.push(everyone.to_owned());
    }
    Ok(Some(UserInfo {
        username: username.to_owned(),
        uid: uid.unwrap_or_default().to_owned(),
        groups: impersonated_groups,
        extra,
    }))
}

/// The user the request acts as: the impersonated one, or `user` itself; or the answer
/// refusing it (the refusal completes the audit record). A server built without security
/// lets no one impersonate anyone: the request proceeds as `user`.
pub(crate) async fn act_as(
    security: Option<&Security>,
    info: &RequestInfo,
    headers: &HeaderMap,
    user: UserInfo,
    record: Option<&AuditRecord>,
) -> Result<UserInfo, Refusal> {
    let Some(security) = security else {
        return Ok(user);
    };
    match impersonate(headers, &user, security.authorizer.as_ref()).await {
        Ok(Some(impersonated)) => {
            if let Some(record) = record {
                record.set_impersonated_user(&impersonated);
            }
            Ok(impersonated)
        }
        Ok(None) => Ok(user),
        Err(error) => {
            let refusal = refused(&error, headers);
            Err(Box::new(audit::finish(record.cloned(), info, *refusal)))
        }
    }
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

    #[tokio::test]
    async fn impersonation_needs_the_right_to_each_attribute() {
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
        let alice = impersonate(&asked, &bob, &may).await.unwrap().unwrap();
        assert_eq!(alice.username, "alice");
        assert_eq!(alice.groups, ["devs", "system:authenticated"]);
        assert_eq!(alice.extra["scopes.example.com/x"], ["read"]);

        let refused = headers(&[
            ("impersonate-user", "alice"),
            ("impersonate-group", "admins"),
        ]);
        let error = impersonate(&refused, &bob, &may).await.unwrap_err();
        assert_eq!(error.code, 403);
        assert_eq!(
            error.message,
            "groups \"admins\" is forbidden: User \"bob\" cannot impersonate resource \"groups\" in API group \"\" at the cluster scope"
        );
        assert!(
            impersonate(&HeaderMap::new(), &bob, &may)
                .await
                .unwrap()
                .is_none()
        );
        let no_user = headers(&[("impersonate-group", "devs")]);
        assert_eq!(
            impersonate(&no_user, &bob, &may).await.unwrap_err().code,
            400
        );
    }

    #[tokio::test]
    async fn service_accounts_are_checked_in_their_namespace_and_get_their_groups() {
        let bob = UserInfo::authenticated("bob", vec![]);
        let may = May(vec!["serviceaccounts//ns1/builder"]);
        let asked = headers(&[("impersonate-user", "system:serviceaccount:ns1:builder")]);
        let sa = impersonate(&asked, &bob, &may).await.unwrap().unwrap();
        assert_eq!(
            sa.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:ns1",
                "system:authenticated"
            ]
        );
        let other = headers(&[("impersonate-user", "system:serviceaccount:ns2:builder")]);
        assert_eq!(impersonate(&other, &bob, &may).await.unwrap_err().code, 403);
        // Asked-for groups replace the account's groups (and need their own right).
        let may = May(vec!["serviceaccounts//ns1/builder", "groups///devs"]);
        let asked = headers(&[
            ("impersonate-user", "system:serviceaccount:ns1:builder"),
            ("impersonate-group", "devs"),
        ]);
        let sa = impersonate(&asked, &bob, &may).await.unwrap().unwrap();
        assert_eq!(sa.groups, ["devs", "system:authenticated"]);
        // A name with more parts is a user, not a service account.
        let may = May(vec!["users///system:serviceaccount:ns1:a:b"]);
        let asked = headers(&[("impersonate-user", "system:serviceaccount:ns1:a:b")]);
        assert!(impersonate(&asked, &bob, &may).await.unwrap().is_some());
    }

    #[tokio::test]
    async fn headers_are_read_as_upstream_reads_them() {
        let bob = UserInfo::authenticated("bob", vec![]);
        let may = May(vec!["users///alice", "groups///system:unauthenticated"]);
        // Unknown impersonate-* headers and an empty user header are no impersonation.
        let none = headers(&[("impersonate-other", "x"), ("impersonate-user", "")]);
        assert!(impersonate(&none, &bob, &may).await.unwrap().is_none());
        // The first user counts; system:unauthenticated asked for is not joined by
        // system:authenticated.
        let asked = headers(&[
            ("impersonate-user", "alice"),
            ("impersonate-user", "mallory"),
            ("impersonate-group", "system:unauthenticated"),
        ]);
        let alice = impersonate(&asked, &bob, &may).await.unwrap().unwrap();
        assert_eq!(alice.username, "alice");
        assert_eq!(alice.groups, ["system:unauthenticated"]);
        // A key that does not unescape is kept as it is.
        assert_eq!(unescape_extra_key("a%zz"), "a%zz");
        assert_eq!(unescape_extra_key("a%2fb"), "a/b");
    }
}
