//! What a server is given to decide who makes requests and what they may do: the request
//! authenticator ([`genplane_authentication::request::Authentication`]), the authorizer, the
//! issuers behind the authentication APIs (TokenRequest, the OIDC discovery documents), and
//! RBAC's escalation checks of writes. The filters that use them are
//! `filters::authentication`, `filters::impersonation` and `filters::authorization`.

use std::sync::Arc;

use genplane_apimachinery::errors::ApiError;
use genplane_authentication::UserInfo;
use genplane_authentication::request::Authentication;
use genplane_authentication::serviceaccount::{LiveObject, ServiceAccountLookup};
use genplane_authorization::Authorizer;

/// Who may make requests, and what they may do.
#[derive(Clone, Debug)]
pub struct Security {
    /// The authentication chain.
    pub authentication: Authentication,
    /// The authorizer (RBAC, or AlwaysAllow).
    pub authorizer: Arc<dyn Authorizer>,
    /// The issuer of service-account tokens, when the server issues them.
    pub token_requests: Option<Arc<dyn TokenRequests>>,
    /// The issuer's discovery documents, when served.
    pub oidc: Option<OidcDocuments>,
    /// Checks of writes against who makes them (RBAC's escalation prevention), if any.
    pub escalation: Option<Arc<dyn EscalationChecks>>,
}

/// Checks of writes that depend on who writes (RBAC's escalation prevention): the check for
/// a write to `group`/`resource` in `namespace` by `user`, when the resource has one.
pub trait EscalationChecks: Send + Sync + std::fmt::Debug {
    /// The check the store runs on the final object of this write, if any.
    fn check_for(
        &self,
        group: &str,
        resource: &str,
        namespace: &str,
        user: &UserInfo,
    ) -> Option<genplane_registry::EscalationCheck>;
}

impl Security {
    /// Security with `authentication` and `authorizer`, issuing no tokens.
    pub fn new(authentication: Authentication, authorizer: Arc<dyn Authorizer>) -> Self {
        Self {
            authentication,
            authorizer,
            token_requests: None,
            oidc: None,
            escalation: None,
        }
    }
}

/// Issues service-account tokens: the `serviceaccounts/<name>/token` subresource.
pub trait TokenRequests: Send + Sync + std::fmt::Debug {
    /// Answers the TokenRequest `body` for the service account `namespace`/`name` at `now`
    /// (Unix seconds), finding the account and a bound Secret with `lookup`: the request with
    /// its `status` (token, expiration), and warnings.
    fn create(
        &self,
        namespace: &str,
        name: &str,
        body: &serde_json::Value,
        now: i64,
        lookup: &dyn ServiceAccountLookup,
    ) -> Result<(serde_json::Value, Vec<String>), ApiError>;
}

/// The objects a TokenRequest refers to, read from the store when the request came (so an
/// account created just before is found, whatever the watch caches have seen).
#[derive(Debug, Default)]
pub struct ReadObjects {
    /// The service account, when it exists.
    pub service_account: Option<serde_json::Value>,
    /// The Secret the token is to be bound to, when asked for and it exists.
    pub secret: Option<serde_json::Value>,
}

/// What token checks need of a stored object: its uid and deletion timestamp.
pub fn live_object(object: &serde_json::Value) -> Option<LiveObject> {
    let meta = |field: &str| {
        object
            .pointer(&format!("/metadata/{field}"))
            .and_then(serde_json::Value::as_str)
    };
    Some(LiveObject {
        uid: meta("uid")?.to_owned(),
        deletion_timestamp: meta("deletionTimestamp")
            .and_then(genplane_apimachinery::time::parse_time)
            .map(|t| t.seconds),
    })
}

fn live(object: Option<&serde_json::Value>, namespace: &str, name: &str) -> Option<LiveObject> {
    let object = object?;
    let meta = |field: &str| {
        object
            .pointer(&format!("/metadata/{field}"))
            .and_then(serde_json::Value::as_str)
    };
    if meta("namespace") != Some(namespace) || meta("name") != Some(name) {
        return None;
    }
    live_object(object)
}

impl ServiceAccountLookup for ReadObjects {
    fn service_account(&self, namespace: &str, name: &str) -> Option<LiveObject> {
        live(self.service_account.as_ref(), namespace, name)
    }

    fn secret(&self, namespace: &str, name: &str) -> Option<LiveObject> {
        live(self.secret.as_ref(), namespace, name)
    }
}

/// The service-account issuer's OpenID discovery documents, served at
/// `/.well-known/openid-configuration` and `/openid/v1/jwks`.
#[derive(Clone, Debug)]
pub struct OidcDocuments {
    /// The configuration document (JSON).
    pub configuration: bytes::Bytes,
    /// The key set (JWK set JSON).
    pub keys: bytes::Bytes,
}
