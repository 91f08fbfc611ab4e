//! Authentication: who made a request.
//!
//! The result of authenticating a request is a [`UserInfo`], as upstream's `user.Info`: a name,
//! a uid, groups and extra attributes. Every authenticated user is in
//! [`SYSTEM_AUTHENTICATED`]; the anonymous user is [`ANONYMOUS_USER`] in
//! [`SYSTEM_UNAUTHENTICATED`].
//!
//! - [`x509`]: users named by verified client certificates (CN user, O groups).
//! - [`bearer`]: where a request carries a bearer token (`Authorization`, WebSocket subprotocol).
//! - [`token_file`]: static tokens from `--token-auth-file`.
//! - [`keys`]: service-account signing and verification keys, key ids, JWKs.
//! - [`serviceaccount`]: service-account tokens (JWTs): issuing and verifying.
//! - [`token_request`]: the TokenRequest API (`serviceaccounts/<name>/token`).
//! - [`oidc`]: the OIDC discovery documents of the service-account issuer.
//! - [`requestheader`]: users named in headers by a front proxy (an aggregating API server)
//!   whose client certificate its CA issued.
//! - [`request`]: the authenticator of a request: front proxy's headers, certificate, tokens in
//!   order, anonymous.
//!
//! # Flags
//!
//! How kube-apiserver's flags map onto these pieces (all pure: files are read once at
//! start-up, lookups go through [`serviceaccount::ServiceAccountLookup`]):
//!
//! | flag | use |
//! |---|---|
//! | `--token-auth-file F` | [`token_file::TokenFile::load`]`(F)`; log its `warnings()` |
//! | `--service-account-signing-key-file F` | [`keys::SigningKey::from_file`]`(F)`; without it [`keys::SigningKey::load_or_generate`]`(<data dir>/`[`keys::GENERATED_KEY_FILE`]`, Default::default())` |
//! | `--service-account-key-file F` (repeatable) | [`keys::public_keys_from_file`]`(F)` for each, then [`keys::verification_keys`]`(all, Some(&signing_key))` |
//! | `--service-account-issuer I` (repeatable) | [`serviceaccount::TokenIssuer::new`]`(I[0], signing_key)`; [`serviceaccount::TokenAuthenticator::new`]`(I, keys, api_audiences)`; [`oidc::Discovery::new`]`(I[0], ..)` |
//! | `--api-audiences A` | [`serviceaccount::default_api_audiences`]`(A, I)`, given to the authenticator and to [`token_request::TokenRequestOptions::new`] |
//! | `--service-account-max-token-expiration D` | [`token_request::TokenRequestOptions::new`]`(api_audiences, Some(D in seconds))` |
//! | `--service-account-jwks-uri U`, `--external-hostname` and the secure port | [`oidc::Discovery::new`]`(I[0], Some(U), Some("host:port"), &keys)` |

#![warn(missing_docs)]

pub mod bearer;
pub mod keys;
pub mod oidc;
pub mod request;
pub mod requestheader;
pub mod serviceaccount;
pub mod token_file;
pub mod token_request;
pub mod x509;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The group of every authenticated user.
pub const SYSTEM_AUTHENTICATED: &str = "system:authenticated";
/// The group of the anonymous user.
pub const SYSTEM_UNAUTHENTICATED: &str = "system:unauthenticated";
/// The name of the anonymous user.
pub const ANONYMOUS_USER: &str = "system:anonymous";
/// The group whose members may do anything (RBAC's bootstrap binding of `cluster-admin`).
pub const SYSTEM_MASTERS: &str = "system:masters";

/// Who made a request, as upstream's `user.Info` (and `authentication.k8s.io/v1` `UserInfo`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserInfo {
    /// The user name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub username: String,
    /// A unique, stable identifier of the user, when the authenticator knows one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// The groups, including [`SYSTEM_AUTHENTICATED`] (or [`SYSTEM_UNAUTHENTICATED`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// Extra attributes the authenticator provides (e.g. the pod a service-account token is
    /// bound to), by key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// An authenticated user named `username` in `groups` (to which
    /// [`SYSTEM_AUTHENTICATED`] is added when missing).
    pub fn authenticated(username: impl Into<String>, groups: Vec<String>) -> Self {
        let mut groups = groups;
        if !groups.iter().any(|g| g == SYSTEM_AUTHENTICATED) {
            groups.push(SYSTEM_AUTHENTICATED.to_owned());
        }
        Self {
            username: username.into(),
            groups,
            ..Self::default()
        }
    }

    /// The anonymous user.
    pub fn anonymous() -> Self {
        Self {
            username: ANONYMOUS_USER.to_owned(),
            groups: vec![SYSTEM_UNAUTHENTICATED.to_owned()],
            ..Self::default()
        }
    }

    /// Whether this is the anonymous user.
    pub fn is_anonymous(&self) -> bool {
        self.username == ANONYMOUS_USER
    }

    /// Whether the user is in `group`.
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authenticated_users_are_in_system_authenticated_once() {
        let user = UserInfo::authenticated("alice", vec!["dev".into()]);
        assert_eq!(user.groups, ["dev", SYSTEM_AUTHENTICATED]);
        let user = UserInfo::authenticated("bob", vec![SYSTEM_AUTHENTICATED.into()]);
        assert_eq!(user.groups, [SYSTEM_AUTHENTICATED]);
        assert!(!user.is_anonymous());
        assert!(UserInfo::anonymous().is_anonymous());
        assert!(UserInfo::anonymous().in_group(SYSTEM_UNAUTHENTICATED));
    }

    #[test]
    fn serializes_as_the_review_apis_user_info() {
        let user = UserInfo::authenticated("alice", vec![]);
        assert_eq!(
            serde_json::to_value(&user).unwrap(),
            serde_json::json!({"username": "alice", "groups": ["system:authenticated"]})
        );
    }
}
