//! Authentication and authorization delegated to another API server, as an extension API
//! server's `--authentication-kubeconfig` and `--authorization-kubeconfig` make upstream's
//! delegating authenticator and authorizer.
//!
//! [`DelegatedAuthorizer`]: each decision the server's own authorizers leave open is a
//! `SubjectAccessReview` created on the API server the kubeconfig names (the aggregator,
//! whose RBAC then decides for both), for the user, groups, uid and extra of the request (a
//! front proxy's user as the extension believed it).
//! - `status.allowed` allows, `status.denied` denies, anything else is no opinion, with
//!   `status.reason` (and `status.evaluationError`) as the reason;
//! - answers are cached by the review's spec, allowed ones for [`ALLOWED_TTL`] and the rest
//!   for [`DENIED_TTL`], as upstream's defaults;
//! - what a user may do (`SelfSubjectRulesReview`) cannot be listed: the rules are marked
//!   incomplete, as upstream's webhook authorizer marks them.
//!
//! [`DelegatedAuthenticator`]: a bearer token the server's own token authenticators do not
//! know is a `TokenReview` on that server (with the audiences asked for, if any): an
//! authenticated answer names the user (its username, uid, groups and extra) and the audiences
//! the token is good for; an unauthenticated one refuses the token with its `status.error`.
//! Answers are cached for [`TOKEN_TTL`] by the SHA-256 of the token and the audiences (the
//! token itself is not kept).
//!
//! For both: a failed review (the server unreachable, an error answer, no answer within
//! [`REVIEW_TIMEOUT`]) decides nothing and is not cached; the kubeconfig is read at the first
//! review (so either server may start first) and again after a review fails.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use genplane_authentication::UserInfo;
use genplane_authentication::request::{PendingToken, TokenAnswer, TokenAuthenticator};
use genplane_authorization::{Attributes, Authorizer, Decision, Pending, RulesInfo};
use serde_json::{Value, json};

/// How long an allowed decision is reused (upstream's `--authorization-webhook-cache-authorized-ttl`
/// default for delegated authorization).
pub const ALLOWED_TTL: Duration = Duration::from_secs(10);
/// How long any other decision is reused.
pub const DENIED_TTL: Duration = Duration::from_secs(10);
/// How long a review may take.
pub const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);
/// The most decisions kept; past it, the expired ones are dropped, then all.
const CACHE_LIMIT: usize = 8192;

/// How long a TokenReview's answer is reused (upstream's
/// `--authentication-token-webhook-cache-ttl` default for delegated authentication).
pub const TOKEN_TTL: Duration = Duration::from_secs(10);

/// The path access reviews are created at.
const ACCESS_REVIEWS: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
/// The path token reviews are created at.
const TOKEN_REVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews";

/// The API server reviews are asked of: its kubeconfig, and the client made from it at the
/// first review, made again after a review fails (the kubeconfig may have changed: a server
/// started after this one writes it).
struct Delegate {
    kubeconfig: PathBuf,
    client: Mutex<Option<kube::Client>>,
}

impl Delegate {
    fn new(kubeconfig: PathBuf) -> Self {
        Self {
            kubeconfig,
            client: Mutex::new(None),
        }
    }

    /// The client, made from the kubeconfig if there is none.
    async fn client(&self) -> Result<kube::Client, String> {
        let made = self
            .client
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(client) = made {
            return Ok(client);
        }
        let (client, _) = genplane_controller::client::connect(Some(&self.kubeconfig))
            .await
            .map_err(|e| e.to_string())?;
        *self.client.lock().unwrap_or_else(PoisonError::into_inner) = Some(client.clone());
        Ok(client)
    }

    /// Creates the review `body` at `path` and answers its `status`.
    async fn review(&self, path: &str, body: Value) -> Result<Value, String> {
        let client = self.client().await?;
        let request = hyper::Request::post(path)
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(body.to_string().into_bytes())
            .map_err(|e| e.to_string())?;
        let answer =
            match tokio::time::timeout(REVIEW_TIMEOUT, client.request::<Value>(request)).await {
                Ok(Ok(answer)) => answer,
                failed => {
                    *self.client.lock().unwrap_or_else(PoisonError::into_inner) = None;
                    return Err(match failed {
                        Ok(Err(error)) => error.to_string(),
                        _ => format!("no answer within {REVIEW_TIMEOUT:?}"),
                    });
                }
            };
        Ok(answer.get("status").cloned().unwrap_or_default())
    }
}

/// Answers kept until they expire, at most [`CACHE_LIMIT`] of them (past it, the expired ones
/// are dropped, then all).
struct Cache<T>(Mutex<HashMap<String, (Instant, T)>>);

impl<T: Clone> Cache<T> {
    fn new() -> Self {
        Self(Mutex::new(HashMap::new()))
    }

    fn get(&self, key: &str) -> Option<T> {
        let cache = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        cache
            .get(key)
            .filter(|(until, _)| *until > Instant::now())
            .map(|(_, answer)| answer.clone())
    }

    fn put(&self, key: String, answer: T, ttl: Duration) {
        let now = Instant::now();
        let mut cache = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if cache.len() >= CACHE_LIMIT {
            cache.retain(|_, (until, _)| *until > now);
            if cache.len() >= CACHE_LIMIT {
                cache.clear();
            }
        }
        cache.insert(key, (now + ttl, answer));
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
    }
}

/// Authorization delegated to the API server of a kubeconfig (see the module's documentation).
pub struct DelegatedAuthorizer {
    delegate: Delegate,
    cache: Cache<(Decision, String)>,
}

impl std::fmt::Debug for DelegatedAuthorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelegatedAuthorizer")
            .field("kubeconfig", &self.delegate.kubeconfig)
            .finish_non_exhaustive()
    }
}

/// The spec of the SubjectAccessReview asking about `attributes`.
fn review_spec(attributes: &Attributes) -> Value {
    let UserInfo {
        username,
        uid,
        groups,
        extra,
    } = &attributes.user;
    let mut spec = json!({"user": username, "groups": groups});
    if !uid.is_empty() {
        spec["uid"] = json!(uid);
    }
    if !extra.is_empty() {
        spec["extra"] = json!(extra);
    }
    if attributes.resource_request {
        spec["resourceAttributes"] = json!({
            "namespace": attributes.namespace,
            "verb": attributes.verb,
            "group": attributes.api_group,
            "version": attributes.api_version,
            "resource": attributes.resource,
            "subresource": attributes.subresource,
            "name": attributes.name,
        });
    } else {
        spec["nonResourceAttributes"] = json!({
            "path": attributes.path,
            "verb": attributes.verb,
        });
    }
    spec
}

/// The decision a review's `status` gives.
fn decision_of(status: &Value) -> (Decision, String) {
    let text = |key: &str| status.get(key).and_then(Value::as_str).unwrap_or("");
    let mut reason = text("reason").to_owned();
    let error = text("evaluationError");
    if !error.is_empty() {
        if !reason.is_empty() {
            reason.push_str(": ");
        }
        reason.push_str(error);
    }
    let flag = |key: &str| status.get(key).and_then(Value::as_bool).unwrap_or(false);
    let decision = if flag("allowed") {
        Decision::Allow
    } else if flag("denied") {
        Decision::Deny
    } else {
        Decision::NoOpinion
    };
    (decision, reason)
}

impl DelegatedAuthorizer {
    /// Decisions delegated to the API server `kubeconfig` names, with its credentials.
    pub fn new(kubeconfig: PathBuf) -> Self {
        Self {
            delegate: Delegate::new(kubeconfig),
            cache: Cache::new(),
        }
    }

    /// Keeps the decision of the review `key`.
    fn remember(&self, key: String, decided: &(Decision, String)) {
        let ttl = if decided.0 == Decision::Allow {
            ALLOWED_TTL
        } else {
            DENIED_TTL
        };
        self.cache.put(key, decided.clone(), ttl);
    }
}

impl Authorizer for DelegatedAuthorizer {
    fn authorize(&self, attributes: &Attributes) -> (Decision, String) {
        self.cache
            .get(&review_spec(attributes).to_string())
            .unwrap_or_else(|| {
                (
                    Decision::NoOpinion,
                    "the delegated authorizer has not decided this request yet".to_owned(),
                )
            })
    }

    fn rules_for(&self, _user: &UserInfo, _namespace: &str) -> RulesInfo {
        RulesInfo {
            incomplete: true,
            evaluation_errors: vec![
                "the delegated authorizer does not support user rule resolution".to_owned(),
            ],
            ..RulesInfo::default()
        }
    }

    fn delegates(&self) -> bool {
        true
    }

    fn authorize_delegated<'a>(&'a self, attributes: &'a Attributes) -> Pending<'a> {
        Box::pin(async move {
            let spec = review_spec(attributes);
            let key = spec.to_string();
            if let Some(cached) = self.cache.get(&key) {
                return cached;
            }
            let body = json!({
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": spec,
            });
            match self.delegate.review(ACCESS_REVIEWS, body).await {
                Ok(status) => {
                    let decided = decision_of(&status);
                    self.remember(key, &decided);
                    decided
                }
                Err(error) => {
                    tracing::warn!(
                        %error,
                        kubeconfig = %self.delegate.kubeconfig.display(),
                        "delegated authorization failed"
                    );
                    (
                        Decision::NoOpinion,
                        format!("delegated authorization failed: {error}"),
                    )
                }
            }
        })
    }
}

/// Authentication of bearer tokens delegated to the API server of a kubeconfig (see the
/// module's documentation).
pub struct DelegatedAuthenticator {
    delegate: Delegate,
    cache: Cache<TokenAnswer>,
}

impl std::fmt::Debug for DelegatedAuthenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelegatedAuthenticator")
            .field("kubeconfig", &self.delegate.kubeconfig)
            .finish_non_exhaustive()
    }
}

/// The cache key of `token` asked for `audiences`: their SHA-256, hex.
fn token_key(token: &str, audiences: Option<&[String]>) -> String {
    let mut context = aws_lc_rs::digest::Context::new(&aws_lc_rs::digest::SHA256);
    context.update(token.as_bytes());
    for audience in audiences.unwrap_or_default() {
        context.update(b"\0");
        context.update(audience.as_bytes());
    }
    context
        .finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The answer a TokenReview's `status` gives.
fn token_answer_of(status: &Value) -> TokenAnswer {
    if status.get("authenticated").and_then(Value::as_bool) != Some(true) {
        let error = status.get("error").and_then(Value::as_str).unwrap_or("");
        return if error.is_empty() {
            Ok(None)
        } else {
            Err(error.to_owned())
        };
    }
    let user: UserInfo = serde_json::from_value(status.get("user").cloned().unwrap_or_default())
        .map_err(|e| format!("reading the reviewed user: {e}"))?;
    if user.username.is_empty() {
        return Err("the reviewed token names no user".to_owned());
    }
    let audiences = status
        .get("audiences")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    Ok(Some((user, audiences)))
}

impl DelegatedAuthenticator {
    /// Tokens reviewed by the API server `kubeconfig` names, with its credentials.
    pub fn new(kubeconfig: PathBuf) -> Self {
        Self {
            delegate: Delegate::new(kubeconfig),
            cache: Cache::new(),
        }
    }
}

impl TokenAuthenticator for DelegatedAuthenticator {
    fn authenticate(&self, token: &str, audiences: Option<&[String]>) -> TokenAnswer {
        self.cache
            .get(&token_key(token, audiences))
            .unwrap_or(Ok(None))
    }

    fn delegates(&self) -> bool {
        true
    }

    fn authenticate_delegated<'a>(
        &'a self,
        token: &'a str,
        audiences: Option<&'a [String]>,
    ) -> PendingToken<'a> {
        Box::pin(async move {
            let key = token_key(token, audiences);
            if let Some(cached) = self.cache.get(&key) {
                return cached;
            }
            let mut spec = json!({"token": token});
            if let Some(audiences) = audiences {
                spec["audiences"] = json!(audiences);
            }
            let body = json!({
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenReview",
                "spec": spec,
            });
            match self.delegate.review(TOKEN_REVIEWS, body).await {
                Ok(status) => {
                    let answer = token_answer_of(&status);
                    self.cache.put(key, answer.clone(), TOKEN_TTL);
                    answer
                }
                Err(error) => {
                    tracing::warn!(
                        %error,
                        kubeconfig = %self.delegate.kubeconfig.display(),
                        "delegated authentication failed"
                    );
                    Err(format!("delegated authentication failed: {error}"))
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alice() -> UserInfo {
        UserInfo {
            username: "alice".into(),
            uid: "u-1".into(),
            groups: vec!["devs".into(), "system:authenticated".into()],
            extra: [("scopes".to_owned(), vec!["a".to_owned()])].into(),
        }
    }

    #[test]
    fn reviews_ask_about_the_user_and_the_request_as_upstream_asks() {
        let get = Attributes {
            user: alice(),
            verb: "get".into(),
            namespace: "default".into(),
            api_group: "wardle.example.com".into(),
            api_version: "v1alpha1".into(),
            resource: "flunders".into(),
            name: "f".into(),
            resource_request: true,
            ..Attributes::default()
        };
        assert_eq!(
            review_spec(&get),
            json!({"user": "alice", "uid": "u-1", "groups": ["devs", "system:authenticated"],
                "extra": {"scopes": ["a"]},
                "resourceAttributes": {"namespace": "default", "verb": "get",
                    "group": "wardle.example.com", "version": "v1alpha1", "resource": "flunders",
                    "subresource": "", "name": "f"}})
        );
        let path = Attributes {
            user: UserInfo::authenticated("bob", vec![]),
            verb: "get".into(),
            path: "/healthz".into(),
            ..Attributes::default()
        };
        assert_eq!(
            review_spec(&path)["nonResourceAttributes"],
            json!({"path": "/healthz", "verb": "get"})
        );
    }

    #[test]
    fn the_status_decides() {
        assert_eq!(
            decision_of(&json!({"allowed": true, "reason": "RBAC: allowed"})),
            (Decision::Allow, "RBAC: allowed".to_owned())
        );
        assert_eq!(
            decision_of(&json!({"allowed": false, "denied": true})).0,
            Decision::Deny
        );
        assert_eq!(
            decision_of(&json!({"allowed": false, "reason": "no", "evaluationError": "bad"})),
            (Decision::NoOpinion, "no: bad".to_owned())
        );
        assert_eq!(decision_of(&json!({})).0, Decision::NoOpinion);
    }

    #[tokio::test]
    async fn an_unreachable_server_has_no_opinion_and_nothing_is_cached() {
        let authorizer = DelegatedAuthorizer::new(PathBuf::from("/nonexistent/kubeconfig"));
        assert!(authorizer.delegates());
        let attributes = Attributes {
            user: alice(),
            verb: "list".into(),
            resource: "configmaps".into(),
            resource_request: true,
            ..Attributes::default()
        };
        let (decision, reason) = authorizer.authorize_delegated(&attributes).await;
        assert_eq!(decision, Decision::NoOpinion);
        assert!(
            reason.starts_with("delegated authorization failed"),
            "{reason}"
        );
        assert_eq!(authorizer.authorize(&attributes).0, Decision::NoOpinion);
        assert!(authorizer.cache.is_empty());
        // A decision remembered is answered at once, also without asking.
        authorizer.remember(
            review_spec(&attributes).to_string(),
            &(Decision::Allow, String::new()),
        );
        assert_eq!(authorizer.authorize(&attributes).0, Decision::Allow);
        assert_eq!(
            authorizer.authorize_delegated(&attributes).await.0,
            Decision::Allow
        );
        assert!(authorizer.rules_for(&alice(), "").incomplete);
    }

    #[test]
    fn token_reviews_name_the_user_or_refuse_the_token() {
        let found = token_answer_of(&json!({"authenticated": true,
            "user": {"username": "alice", "uid": "u-1", "groups": ["devs"],
                "extra": {"scopes": ["a"]}},
            "audiences": ["api"]}))
        .unwrap()
        .unwrap();
        assert_eq!(found.0, alice_with_groups(&["devs"]));
        assert_eq!(found.1, ["api"]);
        assert_eq!(
            token_answer_of(&json!({"authenticated": false, "error": "token expired"})),
            Err("token expired".to_owned())
        );
        assert_eq!(token_answer_of(&json!({})), Ok(None));
        assert!(token_answer_of(&json!({"authenticated": true, "user": {}})).is_err());
        // The token is kept only as a digest, and audiences tell keys apart.
        let key = token_key("secret-token", None);
        assert_eq!(key.len(), 64);
        assert!(!key.contains("secret"));
        assert_ne!(key, token_key("secret-token", Some(&["api".to_owned()])));
    }

    fn alice_with_groups(groups: &[&str]) -> UserInfo {
        UserInfo {
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            ..alice()
        }
    }

    #[tokio::test]
    async fn an_unreachable_server_authenticates_no_one() {
        let authenticator = DelegatedAuthenticator::new(PathBuf::from("/nonexistent/kubeconfig"));
        assert!(authenticator.delegates());
        let answer = authenticator.authenticate_delegated("t", None).await;
        assert!(
            answer
                .as_ref()
                .is_err_and(|e| e.starts_with("delegated authentication failed")),
            "{answer:?}"
        );
        assert_eq!(authenticator.authenticate("t", None), Ok(None));
        assert!(authenticator.cache.is_empty());
    }
}
