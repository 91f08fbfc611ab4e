//! Service-account tokens: JWTs that genplane issues through the TokenRequest API and accepts
//! as bearer tokens, as kube-apiserver 1.33 does (`pkg/serviceaccount`).
//!
//! A token is a JWS in compact form whose header names the algorithm and the signing key's id
//! (`{"alg":"ES256","kid":"..."}`) and whose claims are:
//!
//! ```json
//! {"aud":["https://kubernetes.default.svc"],"exp":1795322400,"iat":1795318800,
//!  "iss":"https://kubernetes.default.svc","jti":"<uuid>",
//!  "kubernetes.io":{"namespace":"default","serviceaccount":{"name":"robot","uid":"<uid>"},
//!                   "secret":{"name":"s","uid":"<uid>"}},
//!  "nbf":1795318800,"sub":"system:serviceaccount:default:robot"}
//! ```
//!
//! [`TokenIssuer`] signs them with the `--service-account-signing-key-file` key for the first
//! `--service-account-issuer`. [`TokenAuthenticator`] verifies them in upstream's order:
//! 1. a token that is not a three-part JWS whose unverified `iss` is an accepted issuer is not a
//!    service-account token (`Ok(None)`: another authenticator may take it);
//! 2. the signature must verify under a known key, chosen by the `kid` header when there is one;
//! 3. `iss` again, now verified;
//! 4. the token's audiences (the API audiences when it has none) must meet the audiences the
//!    request is for (the API audiences unless a caller such as TokenReview names others);
//! 5. `nbf`, `exp` and `iat`, each with upstream's one-minute leeway;
//! 6. the ServiceAccount, and the Secret, Pod or Node the token is bound to, must still exist
//!    with the uid in the token and not have been deleted more than a minute ago
//!    ([`ServiceAccountLookup`]): a token of a deleted or recreated account does not
//!    authenticate.
//!
//! The user is `system:serviceaccount:<namespace>:<name>` with the account's uid, in
//! `system:serviceaccounts`, `system:serviceaccounts:<namespace>` and `system:authenticated`,
//! with the extra `authentication.kubernetes.io/credential-id` = `JTI=<jti>` (and the pod and
//! node of a pod-bound token).
//!
//! Legacy tokens of Secrets of type `kubernetes.io/service-account-token` (issuer
//! `kubernetes/serviceaccount`) are not issued or accepted: genplane has no token controller
//! that would create them.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Deserializer, Serialize};

use crate::UserInfo;
use crate::keys::{Algorithm, KeyError, PublicKey, SigningKey};

/// The prefix of every service account's user name.
pub const USERNAME_PREFIX: &str = "system:serviceaccount:";
/// The group of all service accounts.
pub const ALL_SERVICE_ACCOUNTS_GROUP: &str = "system:serviceaccounts";
/// The prefix of the group of the service accounts of one namespace.
pub const NAMESPACE_GROUP_PREFIX: &str = "system:serviceaccounts:";
/// The extra key naming the pod a token is bound to.
pub const POD_NAME_KEY: &str = "authentication.kubernetes.io/pod-name";
/// The extra key giving the uid of the pod a token is bound to.
pub const POD_UID_KEY: &str = "authentication.kubernetes.io/pod-uid";
/// The extra key naming the node a token is bound to.
pub const NODE_NAME_KEY: &str = "authentication.kubernetes.io/node-name";
/// The extra key giving the uid of the node a token is bound to.
pub const NODE_UID_KEY: &str = "authentication.kubernetes.io/node-uid";
/// The extra key identifying the credential (`JTI=<jti>`).
pub const CREDENTIAL_ID_KEY: &str = "authentication.kubernetes.io/credential-id";
/// The clock skew tolerated on `nbf`, `exp` and `iat`, and the grace given to objects being
/// deleted (go-jose's `jwt.DefaultLeeway`).
pub const LEEWAY_SECONDS: i64 = 60;

/// Why a service-account token was not issued or not accepted. The messages are upstream's.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Signing failed.
    #[error("failed to generate token: {0}")]
    Sign(#[from] KeyError),
    /// No known key has the token's `kid`.
    #[error("invalid signature, no keys found")]
    NoKeys,
    /// No candidate key verifies the signature (or the token's algorithm is not one genplane
    /// verifies).
    #[error("go-jose/go-jose: error in cryptographic primitive")]
    InvalidSignature,
    /// The signed claims are not a JSON object of the expected shape.
    #[error("go-jose/go-jose: invalid claims: {0}")]
    MalformedClaims(String),
    /// The verified `iss` is not accepted.
    #[error("token issuer {0:?} is invalid")]
    InvalidIssuer(String),
    /// The token's audiences do not meet the audiences the request is for.
    #[error(
        "token audiences {} is invalid for the target audiences {}",
        genplane_apimachinery::gofmt::quote_list(token),
        genplane_apimachinery::gofmt::quote_list(target)
    )]
    InvalidAudience {
        /// The token's audiences.
        token: Vec<String>,
        /// The audiences the request is for.
        target: Vec<String>,
    },
    /// `exp` has passed (beyond the leeway).
    #[error("service account token has expired")]
    Expired,
    /// `nbf` has not come yet (beyond the leeway).
    #[error("service account token is not valid yet")]
    NotYetValid,
    /// `iat` is in the future (beyond the leeway).
    #[error("service account token is issued in the future")]
    IssuedInTheFuture,
    /// The ServiceAccount does not exist.
    #[error("serviceaccounts {0:?} not found")]
    ServiceAccountNotFound(String),
    /// The ServiceAccount was recreated: its uid is not the token's.
    #[error("service account UID ({actual}) does not match claim ({claimed})")]
    ServiceAccountUidMismatch {
        /// The uid of the account that exists.
        actual: String,
        /// The uid in the token.
        claimed: String,
    },
    /// The ServiceAccount has been deleted (more than the leeway ago).
    #[error("service account {namespace}/{name} has been deleted")]
    ServiceAccountDeleted {
        /// The namespace.
        namespace: String,
        /// The name.
        name: String,
    },
    /// The Secret the token is bound to was recreated.
    #[error("secret UID ({actual}) does not match service account secret ref claim ({claimed})")]
    SecretUidMismatch {
        /// The uid of the secret that exists.
        actual: String,
        /// The uid in the token.
        claimed: String,
    },
    /// The Pod the token is bound to was recreated.
    #[error("pod UID ({actual}) does not match service account pod ref claim ({claimed})")]
    PodUidMismatch {
        /// The uid of the pod that exists.
        actual: String,
        /// The uid in the token.
        claimed: String,
    },
    /// The Node the token is bound to was recreated.
    #[error("node UID ({actual}) does not match service account node ref claim ({claimed})")]
    NodeUidMismatch {
        /// The uid of the node that exists.
        actual: String,
        /// The uid in the token.
        claimed: String,
    },
    /// The object the token is bound to is gone or being deleted.
    #[error("service account token has been invalidated")]
    Invalidated,
}

/// A reference to an object by name and uid, as the token's private claims hold it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectRef {
    /// The name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The uid.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

impl ObjectRef {
    /// A reference to `name` with `uid`.
    pub fn new(name: impl Into<String>, uid: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            uid: uid.into(),
        }
    }
}

/// The private claim `kubernetes.io`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubernetesClaims {
    /// The namespace of the service account.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// The service account.
    #[serde(default)]
    pub serviceaccount: ObjectRef,
    /// The pod the token is bound to (never issued by genplane).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<ObjectRef>,
    /// The secret the token is bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<ObjectRef>,
    /// The node the token (or its pod) is bound to (never issued by genplane).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<ObjectRef>,
    /// Upstream's warn-after time of extended pod-bound tokens (never issued by genplane,
    /// accepted and ignored).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "numeric_date"
    )]
    pub warnafter: Option<i64>,
}

/// The claims of a service-account token, serialized in upstream's (sorted) key order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The audiences (`aud`; a single string is accepted when verifying).
    #[serde(default, deserialize_with = "audience")]
    pub aud: Vec<String>,
    /// Expiry, seconds since the Unix epoch.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "numeric_date"
    )]
    pub exp: Option<i64>,
    /// Issue time.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "numeric_date"
    )]
    pub iat: Option<i64>,
    /// The issuer.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub iss: String,
    /// The token id.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub jti: String,
    /// The private claims.
    #[serde(rename = "kubernetes.io", default)]
    pub kubernetes: KubernetesClaims,
    /// Not before.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "numeric_date"
    )]
    pub nbf: Option<i64>,
    /// The subject, `system:serviceaccount:<namespace>:<name>`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sub: String,
}

fn audience<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Audience {
        One(String),
        Many(Vec<String>),
    }
    Ok(match Option::<Audience>::deserialize(deserializer)? {
        None => Vec::new(),
        Some(Audience::One(a)) => vec![a],
        Some(Audience::Many(a)) => a,
    })
}

/// A JSON number of seconds; fractions are truncated as go-jose's `NumericDate` does.
fn numeric_date<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<i64>, D::Error> {
    let Some(number) = Option::<serde_json::Number>::deserialize(deserializer)? else {
        return Ok(None);
    };
    if let Some(n) = number.as_i64() {
        return Ok(Some(n));
    }
    number
        .as_f64()
        .filter(|f| f.is_finite() && f.abs() < 9.2e18)
        .map(|f| Some(f.trunc() as i64))
        .ok_or_else(|| serde::de::Error::custom("invalid numeric date"))
}

/// The user name of a service account.
pub fn username(namespace: &str, name: &str) -> String {
    format!("{USERNAME_PREFIX}{namespace}:{name}")
}

/// What a new token is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenSpec {
    /// The namespace of the service account.
    pub namespace: String,
    /// The service account (name and uid).
    pub service_account: ObjectRef,
    /// The Secret the token is bound to, if any.
    pub secret: Option<ObjectRef>,
    /// The audiences.
    pub audiences: Vec<String>,
    /// The lifetime in seconds.
    pub expiration_seconds: i64,
}

/// A signed token and its claims.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IssuedToken {
    /// The JWS compact serialization.
    pub token: String,
    /// Its claims.
    pub claims: Claims,
}

/// Issues service-account tokens (upstream's `JWTTokenGenerator` and `Claims`).
#[derive(Debug)]
pub struct TokenIssuer {
    issuer: String,
    key: SigningKey,
    header: String,
}

impl TokenIssuer {
    /// Tokens issued by `issuer` (the first `--service-account-issuer`) signed with `key`.
    pub fn new(issuer: impl Into<String>, key: SigningKey) -> Self {
        let header = serde_json::json!({"alg": key.algorithm().as_str(), "kid": key.key_id()});
        Self {
            issuer: issuer.into(),
            header: URL_SAFE_NO_PAD.encode(header.to_string()),
            key,
        }
    }

    /// The issuer.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The signing key.
    pub fn signing_key(&self) -> &SigningKey {
        &self.key
    }

    /// A token for `spec`, issued at `now` (seconds since the Unix epoch), with a fresh
    /// random `jti`.
    pub fn issue(&self, spec: &TokenSpec, now: i64) -> Result<IssuedToken, Error> {
        let claims = Claims {
            aud: spec.audiences.clone(),
            exp: Some(now.saturating_add(spec.expiration_seconds)),
            iat: Some(now),
            iss: self.issuer.clone(),
            jti: uuid::Uuid::new_v4().to_string(),
            kubernetes: KubernetesClaims {
                namespace: spec.namespace.clone(),
                serviceaccount: spec.service_account.clone(),
                secret: spec.secret.clone(),
                ..KubernetesClaims::default()
            },
            nbf: Some(now),
            sub: username(&spec.namespace, &spec.service_account.name),
        };
        let payload = serde_json::to_vec(&claims)
            .expect("invariant: claims serialize to JSON")
            .into_boxed_slice();
        let signing_input = format!("{}.{}", self.header, URL_SAFE_NO_PAD.encode(payload));
        let signature = self.key.sign(signing_input.as_bytes())?;
        Ok(IssuedToken {
            token: format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(signature)),
            claims,
        })
    }
}

/// An object a token refers to, as the server currently has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveObject {
    /// Its uid.
    pub uid: String,
    /// Its `metadata.deletionTimestamp`, seconds since the Unix epoch, when it is being
    /// deleted.
    pub deletion_timestamp: Option<i64>,
}

impl LiveObject {
    /// An object with `uid` that is not being deleted.
    pub fn new(uid: impl Into<String>) -> Self {
        Self {
            uid: uid.into(),
            deletion_timestamp: None,
        }
    }
}

/// How the authenticator (and TokenRequest) finds the objects a token refers to; the server
/// implements it over its store or watch cache. `None` means the object does not exist.
pub trait ServiceAccountLookup {
    /// The ServiceAccount `namespace/name`.
    fn service_account(&self, namespace: &str, name: &str) -> Option<LiveObject>;
    /// The Secret `namespace/name`.
    fn secret(&self, namespace: &str, name: &str) -> Option<LiveObject>;
    /// The Pod `namespace/name`; genplane serves no pods, so by default there is none and a
    /// pod-bound token is invalid.
    fn pod(&self, _namespace: &str, _name: &str) -> Option<LiveObject> {
        None
    }
    /// The Node `name`; genplane serves no nodes, so by default there is none.
    fn node(&self, _name: &str) -> Option<LiveObject> {
        None
    }
}

/// A token that authenticated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Authenticated {
    /// The service account's user.
    pub user: UserInfo,
    /// The audiences the token is valid for among those the request is for (what TokenReview
    /// returns in `status.audiences`).
    pub audiences: Vec<String>,
}

/// Verifies service-account tokens (upstream's `JWTTokenAuthenticator` with the bound-token
/// validator).
#[derive(Clone, Debug)]
pub struct TokenAuthenticator {
    issuers: Vec<String>,
    keys: Vec<PublicKey>,
    api_audiences: Vec<String>,
}

impl TokenAuthenticator {
    /// Accepts tokens of any of `issuers` (every `--service-account-issuer`) signed by one of
    /// `keys` ([`crate::keys::verification_keys`]) for `api_audiences` (`--api-audiences`, or
    /// the first issuer when that flag is empty — see [`default_api_audiences`]).
    pub fn new(issuers: Vec<String>, keys: Vec<PublicKey>, api_audiences: Vec<String>) -> Self {
        Self {
            issuers,
            keys,
            api_audiences,
        }
    }

    /// The API audiences.
    pub fn api_audiences(&self) -> &[String] {
        &self.api_audiences
    }

    /// The verification keys.
    pub fn keys(&self) -> &[PublicKey] {
        &self.keys
    }

    /// Authenticates `token` at `now` (seconds since the Unix epoch) for
    /// `requested_audiences` (`None` or empty: the API audiences; TokenReview passes its
    /// `spec.audiences`). `Ok(None)`: not a service-account token of an
    /// accepted issuer, so another authenticator may take it.
    pub fn authenticate(
        &self,
        token: &str,
        requested_audiences: Option<&[String]>,
        lookup: &dyn ServiceAccountLookup,
        now: i64,
    ) -> Result<Option<Authenticated>, Error> {
        if !self.has_accepted_issuer(token) {
            return Ok(None);
        }
        let Some(jws) = Jws::parse(token) else {
            return Ok(None);
        };
        let candidates: Vec<&PublicKey> = match &jws.kid {
            Some(kid) => self.keys.iter().filter(|k| k.key_id() == kid).collect(),
            None => self.keys.iter().collect(),
        };
        if candidates.is_empty() {
            return Err(Error::NoKeys);
        }
        let verified = jws.algorithm.is_some_and(|alg| {
            candidates
                .iter()
                .any(|key| key.verify(alg, jws.signing_input.as_bytes(), &jws.signature))
        });
        if !verified {
            return Err(Error::InvalidSignature);
        }
        let claims: Claims = serde_json::from_slice(&jws.payload)
            .map_err(|e| Error::MalformedClaims(e.to_string()))?;
        if !self.issuers.contains(&claims.iss) {
            return Err(Error::InvalidIssuer(claims.iss));
        }

        let token_audiences = if claims.aud.is_empty() {
            self.api_audiences.clone()
        } else {
            claims.aud.clone()
        };
        let target = requested_audiences
            .filter(|a| !a.is_empty())
            .unwrap_or(&self.api_audiences);
        let audiences: Vec<String> = token_audiences
            .iter()
            .filter(|a| target.contains(a))
            .cloned()
            .collect();
        if audiences.is_empty() && !self.api_audiences.is_empty() {
            return Err(Error::InvalidAudience {
                token: token_audiences,
                target: target.to_vec(),
            });
        }

        validate_times(&claims, now)?;
        let user = validate_objects(&claims, lookup, now)?;
        Ok(Some(Authenticated { user, audiences }))
    }

    /// Whether `token` looks like a JWS whose (unverified) `iss` is an accepted issuer
    /// (upstream's `hasCorrectIssuer`).
    fn has_accepted_issuer(&self, token: &str) -> bool {
        #[derive(Deserialize)]
        struct Issuer {
            #[serde(default)]
            iss: String,
        }
        if token.trim_start().starts_with('{') {
            return false;
        }
        let parts: Vec<&str> = token.split('.').collect();
        if parts.len() != 3 {
            return false;
        }
        URL_SAFE_NO_PAD
            .decode(parts[1])
            .ok()
            .and_then(|payload| serde_json::from_slice::<Issuer>(&payload).ok())
            .is_some_and(|claims| self.issuers.contains(&claims.iss))
    }
}

/// The API audiences when `--api-audiences` is empty: the first service-account issuer, as
/// kube-apiserver defaults them.
pub fn default_api_audiences(api_audiences: &[String], issuers: &[String]) -> Vec<String> {
    if api_audiences.is_empty() {
        // Upstream takes the first issuer only.
        issuers.iter().take(1).cloned().collect()
    } else {
        api_audiences.to_vec()
    }
}

/// A JWS in compact serialization, decoded but not verified.
struct Jws<'a> {
    signing_input: &'a str,
    payload: Vec<u8>,
    signature: Vec<u8>,
    /// `None` when the header names an algorithm genplane does not verify.
    algorithm: Option<Algorithm>,
    kid: Option<String>,
}

impl<'a> Jws<'a> {
    fn parse(token: &'a str) -> Option<Self> {
        #[derive(Deserialize)]
        struct Header {
            #[serde(default)]
            alg: String,
            #[serde(default)]
            kid: String,
        }
        let (signing_input, signature) = token.rsplit_once('.')?;
        let (header, payload) = signing_input.split_once('.')?;
        let header: Header = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).ok()?).ok()?;
        Some(Self {
            signing_input,
            payload: URL_SAFE_NO_PAD.decode(payload).ok()?,
            signature: URL_SAFE_NO_PAD.decode(signature).ok()?,
            algorithm: Algorithm::from_name(&header.alg),
            kid: Some(header.kid).filter(|k| !k.is_empty()),
        })
    }
}

/// go-jose's `Claims.ValidateWithLeeway` with the default leeway: `nbf`, then `exp`, then
/// `iat`; a missing claim is not checked.
fn validate_times(claims: &Claims, now: i64) -> Result<(), Error> {
    if claims.nbf.is_some_and(|nbf| now + LEEWAY_SECONDS < nbf) {
        return Err(Error::NotYetValid);
    }
    if claims.exp.is_some_and(|exp| now - LEEWAY_SECONDS > exp) {
        return Err(Error::Expired);
    }
    if claims.iat.is_some_and(|iat| now + LEEWAY_SECONDS < iat) {
        return Err(Error::IssuedInTheFuture);
    }
    Ok(())
}

/// Upstream's validator: the account and the bound objects still exist with the token's uids.
fn validate_objects(
    claims: &Claims,
    lookup: &dyn ServiceAccountLookup,
    now: i64,
) -> Result<UserInfo, Error> {
    let deleted = |object: &LiveObject| {
        object
            .deletion_timestamp
            .is_some_and(|t| t < now - LEEWAY_SECONDS)
    };
    let k = &claims.kubernetes;
    let account = &k.serviceaccount;
    let live = lookup
        .service_account(&k.namespace, &account.name)
        .ok_or_else(|| Error::ServiceAccountNotFound(account.name.clone()))?;
    if live.uid != account.uid {
        return Err(Error::ServiceAccountUidMismatch {
            actual: live.uid,
            claimed: account.uid.clone(),
        });
    }
    if deleted(&live) {
        return Err(Error::ServiceAccountDeleted {
            namespace: k.namespace.clone(),
            name: account.name.clone(),
        });
    }

    if let Some(secret) = &k.secret {
        let live = lookup
            .secret(&k.namespace, &secret.name)
            .ok_or(Error::Invalidated)?;
        if live.uid != secret.uid {
            return Err(Error::SecretUidMismatch {
                actual: live.uid,
                claimed: secret.uid.clone(),
            });
        }
        if deleted(&live) {
            return Err(Error::Invalidated);
        }
    }

    let mut extra = BTreeMap::new();
    if let Some(pod) = &k.pod {
        let live = lookup
            .pod(&k.namespace, &pod.name)
            .ok_or(Error::Invalidated)?;
        if live.uid != pod.uid {
            return Err(Error::PodUidMismatch {
                actual: live.uid,
                claimed: pod.uid.clone(),
            });
        }
        if deleted(&live) {
            return Err(Error::Invalidated);
        }
        if !pod.name.is_empty() && !pod.uid.is_empty() {
            extra.insert(POD_NAME_KEY.to_owned(), vec![pod.name.clone()]);
            extra.insert(POD_UID_KEY.to_owned(), vec![pod.uid.clone()]);
        }
    }
    if let Some(node) = &k.node {
        if k.pod.is_none() {
            let live = lookup.node(&node.name).ok_or(Error::Invalidated)?;
            if live.uid != node.uid {
                return Err(Error::NodeUidMismatch {
                    actual: live.uid,
                    claimed: node.uid.clone(),
                });
            }
            if deleted(&live) {
                return Err(Error::Invalidated);
            }
        }
        if !node.name.is_empty() {
            extra.insert(NODE_NAME_KEY.to_owned(), vec![node.name.clone()]);
            if !node.uid.is_empty() {
                extra.insert(NODE_UID_KEY.to_owned(), vec![node.uid.clone()]);
            }
        }
    }
    if !claims.jti.is_empty() {
        extra.insert(
            CREDENTIAL_ID_KEY.to_owned(),
            vec![format!("JTI={}", claims.jti)],
        );
    }

    let mut user = UserInfo::authenticated(
        username(&k.namespace, &account.name),
        vec![
            ALL_SERVICE_ACCOUNTS_GROUP.to_owned(),
            format!("{NAMESPACE_GROUP_PREFIX}{}", k.namespace),
        ],
    );
    user.uid = account.uid.clone();
    user.extra = extra;
    Ok(user)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::keys::{GeneratedKeyType, verification_keys};

    const ISSUER: &str = "https://kubernetes.default.svc";
    const NOW: i64 = 1_795_318_800;
    const RSA_PKCS1: &str = include_str!("../testdata/rsa2048-pkcs1.pem");
    const OPENSSL_TOKEN: &str = include_str!("../testdata/openssl-rs256.jwt");

    #[derive(Default)]
    struct Objects {
        accounts: HashMap<(String, String), LiveObject>,
        secrets: HashMap<(String, String), LiveObject>,
        pods: HashMap<(String, String), LiveObject>,
    }

    impl Objects {
        fn with_account(mut self, ns: &str, name: &str, object: LiveObject) -> Self {
            self.accounts.insert((ns.into(), name.into()), object);
            self
        }
        fn with_secret(mut self, ns: &str, name: &str, object: LiveObject) -> Self {
            self.secrets.insert((ns.into(), name.into()), object);
            self
        }
    }

    impl ServiceAccountLookup for Objects {
        fn service_account(&self, namespace: &str, name: &str) -> Option<LiveObject> {
            self.accounts.get(&(namespace.into(), name.into())).cloned()
        }
        fn secret(&self, namespace: &str, name: &str) -> Option<LiveObject> {
            self.secrets.get(&(namespace.into(), name.into())).cloned()
        }
        fn pod(&self, namespace: &str, name: &str) -> Option<LiveObject> {
            self.pods.get(&(namespace.into(), name.into())).cloned()
        }
    }

    fn issuer() -> TokenIssuer {
        TokenIssuer::new(
            ISSUER,
            SigningKey::generate(GeneratedKeyType::EcdsaP256).unwrap(),
        )
    }

    fn authenticator(issuer: &TokenIssuer) -> TokenAuthenticator {
        TokenAuthenticator::new(
            vec![ISSUER.into()],
            verification_keys(Vec::new(), Some(issuer.signing_key())),
            vec![ISSUER.into()],
        )
    }

    fn spec() -> TokenSpec {
        TokenSpec {
            namespace: "default".into(),
            service_account: ObjectRef::new("robot", "uid-robot"),
            secret: None,
            audiences: vec![ISSUER.into()],
            expiration_seconds: 3600,
        }
    }

    fn objects() -> Objects {
        Objects::default().with_account("default", "robot", LiveObject::new("uid-robot"))
    }

    #[test]
    fn issued_tokens_authenticate_as_the_service_account() {
        let issuer = issuer();
        let issued = issuer.issue(&spec(), NOW).unwrap();
        let claims = &issued.claims;
        assert_eq!(claims.iss, ISSUER);
        assert_eq!(claims.sub, "system:serviceaccount:default:robot");
        assert_eq!(
            (claims.iat, claims.nbf, claims.exp),
            (Some(NOW), Some(NOW), Some(NOW + 3600))
        );
        assert!(uuid::Uuid::parse_str(&claims.jti).is_ok());

        let found = authenticator(&issuer)
            .authenticate(&issued.token, None, &objects(), NOW + 10)
            .unwrap()
            .unwrap();
        assert_eq!(found.audiences, [ISSUER]);
        let user = found.user;
        assert_eq!(user.username, "system:serviceaccount:default:robot");
        assert_eq!(user.uid, "uid-robot");
        assert_eq!(
            user.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:default",
                "system:authenticated"
            ]
        );
        assert_eq!(
            user.extra,
            BTreeMap::from([(
                CREDENTIAL_ID_KEY.to_owned(),
                vec![format!("JTI={}", claims.jti)]
            )])
        );
    }

    #[test]
    fn tokens_have_upstreams_wire_shape() {
        let issuer = issuer();
        let mut spec = spec();
        spec.secret = Some(ObjectRef::new("s", "uid-s"));
        let issued = issuer.issue(&spec, NOW).unwrap();
        let parts: Vec<&str> = issued.token.split('.').collect();
        assert_eq!(parts.len(), 3);
        let header: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[0]).unwrap()).unwrap();
        assert_eq!(
            header,
            serde_json::json!({"alg": "ES256", "kid": issuer.signing_key().key_id()})
        );
        let payload = String::from_utf8(URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
        let jti = &issued.claims.jti;
        assert_eq!(
            payload,
            format!(
                concat!(
                    r#"{{"aud":["{iss}"],"exp":{exp},"iat":{now},"iss":"{iss}","jti":"{jti}","#,
                    r#""kubernetes.io":{{"namespace":"default","serviceaccount":{{"name":"robot","uid":"uid-robot"}},"#,
                    r#""secret":{{"name":"s","uid":"uid-s"}}}},"nbf":{now},"sub":"system:serviceaccount:default:robot"}}"#
                ),
                iss = ISSUER,
                exp = NOW + 3600,
                now = NOW,
                jti = jti
            )
        );
        // ES256 signatures are r || s, 64 bytes.
        assert_eq!(URL_SAFE_NO_PAD.decode(parts[2]).unwrap().len(), 64);
    }

    #[test]
    fn tokens_signed_by_openssl_verify() {
        let key = SigningKey::from_pem(RSA_PKCS1.as_bytes()).unwrap();
        let authenticator = TokenAuthenticator::new(
            vec![ISSUER.into()],
            vec![key.public_key().clone()],
            vec![ISSUER.into()],
        );
        let objects = Objects::default().with_account(
            "default",
            "robot",
            LiveObject::new("11111111-2222-3333-4444-555555555555"),
        );
        let found = authenticator
            .authenticate(OPENSSL_TOKEN.trim(), None, &objects, NOW)
            .unwrap()
            .unwrap();
        assert_eq!(found.user.username, "system:serviceaccount:default:robot");
        assert_eq!(
            found.user.extra[CREDENTIAL_ID_KEY],
            ["JTI=7f2c8a3e-1111-4222-8333-944455556666"]
        );
        // And an RS256 token genplane signs has the 256-byte signature of a 2048-bit key.
        let issued = TokenIssuer::new(ISSUER, key).issue(&spec(), NOW).unwrap();
        let signature = issued.token.rsplit('.').next().unwrap();
        assert_eq!(URL_SAFE_NO_PAD.decode(signature).unwrap().len(), 256);
    }

    #[test]
    fn tokens_of_other_issuers_or_not_jwts_are_left_to_other_authenticators() {
        let issuer = issuer();
        let authenticator = authenticator(&issuer);
        let other = TokenIssuer::new(
            "https://elsewhere",
            SigningKey::generate(GeneratedKeyType::EcdsaP256).unwrap(),
        );
        let foreign = other.issue(&spec(), NOW).unwrap().token;
        for token in [
            foreign.as_str(),
            "static-token",
            "a.b",
            "a.b.c.d",
            "{\"iss\":\"x\"}.e30.e30",
        ] {
            assert!(
                authenticator
                    .authenticate(token, None, &objects(), NOW)
                    .unwrap()
                    .is_none(),
                "{token}"
            );
        }
    }

    fn refusal(
        authenticator: &TokenAuthenticator,
        token: &str,
        audiences: Option<&[String]>,
        objects: &Objects,
        now: i64,
    ) -> Error {
        authenticator
            .authenticate(token, audiences, objects, now)
            .unwrap_err()
    }

    #[test]
    fn bad_tokens_are_refused_with_distinct_errors() {
        let issuer = issuer();
        let authenticator = authenticator(&issuer);
        let token = issuer.issue(&spec(), NOW).unwrap().token;
        let objects = objects();

        // Expired: one hour later, beyond the minute of leeway.
        let err = refusal(&authenticator, &token, None, &objects, NOW + 3600 + 61);
        assert!(matches!(err, Error::Expired), "{err}");
        assert_eq!(err.to_string(), "service account token has expired");
        assert!(
            authenticator
                .authenticate(&token, None, &objects, NOW + 3600 + 60)
                .is_ok()
        );

        // Not yet valid: nbf beyond the leeway.
        let err = refusal(&authenticator, &token, None, &objects, NOW - 61);
        assert!(matches!(err, Error::NotYetValid), "{err}");
        assert!(
            authenticator
                .authenticate(&token, None, &objects, NOW - 60)
                .is_ok()
        );

        // Wrong audience.
        let mut other_audience = spec();
        other_audience.audiences = vec!["vault".into()];
        let vault = issuer.issue(&other_audience, NOW).unwrap().token;
        let err = refusal(&authenticator, &vault, None, &objects, NOW);
        assert_eq!(
            err.to_string(),
            r#"token audiences ["vault"] is invalid for the target audiences ["https://kubernetes.default.svc"]"#
        );
        // ... which a TokenReview for that audience accepts.
        let found = authenticator
            .authenticate(&vault, Some(&["vault".to_owned()]), &objects, NOW)
            .unwrap()
            .unwrap();
        assert_eq!(found.audiences, ["vault"]);
        // A review naming no audience is for the API audiences.
        let err = refusal(&authenticator, &vault, Some(&[]), &objects, NOW);
        assert!(matches!(err, Error::InvalidAudience { .. }), "{err}");

        // Tampered payload: same signature, other claims.
        let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
        let mut claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(&parts[1]).unwrap()).unwrap();
        claims["kubernetes.io"]["serviceaccount"]["name"] = "admin".into();
        parts[1] = URL_SAFE_NO_PAD.encode(claims.to_string());
        let err = refusal(&authenticator, &parts.join("."), None, &objects, NOW);
        assert!(matches!(err, Error::InvalidSignature), "{err}");

        // Signed by another key with the same kid header: the signature does not verify.
        let stranger = TokenIssuer::new(
            ISSUER,
            SigningKey::generate(GeneratedKeyType::EcdsaP256).unwrap(),
        );
        let forged = stranger.issue(&spec(), NOW).unwrap().token;
        let forged_parts: Vec<&str> = forged.split('.').collect();
        let spoofed = format!(
            "{}.{}.{}",
            token.split('.').next().unwrap(),
            forged_parts[1],
            forged_parts[2]
        );
        let err = refusal(&authenticator, &spoofed, None, &objects, NOW);
        assert!(matches!(err, Error::InvalidSignature), "{err}");
        // ... and with its own kid, no key is found.
        let err = refusal(&authenticator, &forged, None, &objects, NOW);
        assert!(matches!(err, Error::NoKeys), "{err}");
        assert_eq!(err.to_string(), "invalid signature, no keys found");

        // A header without an algorithm never verifies.
        let no_alg = format!(
            "{}.{}",
            URL_SAFE_NO_PAD
                .encode(serde_json::json!({"kid": issuer.signing_key().key_id()}).to_string()),
            token.split_once('.').unwrap().1
        );
        let err = refusal(&authenticator, &no_alg, None, &objects, NOW);
        assert!(matches!(err, Error::InvalidSignature), "{err}");

        // Algorithm "none" never verifies.
        let none = format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#),
            token.split('.').nth(1).unwrap()
        );
        let err = refusal(&authenticator, &none, None, &objects, NOW);
        assert!(matches!(err, Error::InvalidSignature), "{err}");
    }

    #[test]
    fn tokens_of_deleted_or_recreated_accounts_are_refused() {
        let issuer = issuer();
        let authenticator = authenticator(&issuer);
        let token = issuer.issue(&spec(), NOW).unwrap().token;

        let err = refusal(&authenticator, &token, None, &Objects::default(), NOW);
        assert_eq!(err.to_string(), r#"serviceaccounts "robot" not found"#);

        let recreated =
            Objects::default().with_account("default", "robot", LiveObject::new("uid-new"));
        let err = refusal(&authenticator, &token, None, &recreated, NOW);
        assert_eq!(
            err.to_string(),
            "service account UID (uid-new) does not match claim (uid-robot)"
        );

        let deleting = |at: i64| {
            Objects::default().with_account(
                "default",
                "robot",
                LiveObject {
                    uid: "uid-robot".into(),
                    deletion_timestamp: Some(at),
                },
            )
        };
        let err = refusal(&authenticator, &token, None, &deleting(NOW - 61), NOW);
        assert_eq!(
            err.to_string(),
            "service account default/robot has been deleted"
        );
        // Deleted within the last minute: still accepted, as upstream.
        assert!(
            authenticator
                .authenticate(&token, None, &deleting(NOW - 30), NOW)
                .unwrap()
                .is_some()
        );
    }

    #[test]
    fn secret_bound_tokens_need_the_same_secret() {
        let issuer = issuer();
        let authenticator = authenticator(&issuer);
        let mut spec = spec();
        spec.secret = Some(ObjectRef::new("s", "uid-s"));
        let token = issuer.issue(&spec, NOW).unwrap().token;

        let with_secret = objects().with_secret("default", "s", LiveObject::new("uid-s"));
        assert!(
            authenticator
                .authenticate(&token, None, &with_secret, NOW)
                .unwrap()
                .is_some()
        );
        let err = refusal(&authenticator, &token, None, &objects(), NOW);
        assert!(matches!(err, Error::Invalidated), "{err}");
        assert_eq!(
            err.to_string(),
            "service account token has been invalidated"
        );
        let recreated = objects().with_secret("default", "s", LiveObject::new("uid-other"));
        let err = refusal(&authenticator, &token, None, &recreated, NOW);
        assert_eq!(
            err.to_string(),
            "secret UID (uid-other) does not match service account secret ref claim (uid-s)"
        );
    }

    #[test]
    fn pod_bound_tokens_carry_pod_and_node_extras() {
        // Tokens genplane never issues but may be handed (another issuer sharing the key).
        let key = SigningKey::generate(GeneratedKeyType::EcdsaP256).unwrap();
        let header = URL_SAFE_NO_PAD
            .encode(serde_json::json!({"alg": "ES256", "kid": key.key_id()}).to_string());
        let claims = serde_json::json!({
            "aud": ISSUER, "exp": NOW + 600, "iat": NOW, "nbf": NOW, "iss": ISSUER,
            "sub": "system:serviceaccount:default:robot",
            "kubernetes.io": {"namespace": "default",
                "serviceaccount": {"name": "robot", "uid": "uid-robot"},
                "pod": {"name": "p", "uid": "uid-p"}, "node": {"name": "n1", "uid": "uid-n1"},
                "warnafter": NOW + 60}
        });
        let input = format!("{header}.{}", URL_SAFE_NO_PAD.encode(claims.to_string()));
        let token = format!(
            "{input}.{}",
            URL_SAFE_NO_PAD.encode(key.sign(input.as_bytes()).unwrap())
        );
        let authenticator = TokenAuthenticator::new(
            vec![ISSUER.into()],
            vec![key.public_key().clone()],
            vec![ISSUER.into()],
        );
        // genplane has no pods: invalidated.
        let err = refusal(&authenticator, &token, None, &objects(), NOW);
        assert!(matches!(err, Error::Invalidated), "{err}");
        let mut with_pod = objects();
        with_pod
            .pods
            .insert(("default".into(), "p".into()), LiveObject::new("uid-p"));
        let user = authenticator
            .authenticate(&token, None, &with_pod, NOW)
            .unwrap()
            .unwrap()
            .user;
        let extra: Vec<(&str, &str)> = user
            .extra
            .iter()
            .map(|(k, v)| (k.as_str(), v[0].as_str()))
            .collect();
        assert_eq!(
            extra,
            [
                (NODE_NAME_KEY, "n1"),
                (NODE_UID_KEY, "uid-n1"),
                (POD_NAME_KEY, "p"),
                (POD_UID_KEY, "uid-p"),
            ]
        );
    }

    #[test]
    fn issuers_must_be_accepted_after_verification_too() {
        let key = SigningKey::generate(GeneratedKeyType::EcdsaP256).unwrap();
        let header = URL_SAFE_NO_PAD
            .encode(serde_json::json!({"alg": "ES256", "kid": key.key_id()}).to_string());
        // A payload whose first "iss" key is accepted by the unverified peek but whose
        // duplicate key wins in the verified parse.
        let payload = format!(r#"{{"iss":"{ISSUER}","iss":"https://evil"}}"#);
        let input = format!("{header}.{}", URL_SAFE_NO_PAD.encode(&payload));
        let token = format!(
            "{input}.{}",
            URL_SAFE_NO_PAD.encode(key.sign(input.as_bytes()).unwrap())
        );
        let authenticator = TokenAuthenticator::new(
            vec![ISSUER.into()],
            vec![key.public_key().clone()],
            vec![ISSUER.into()],
        );
        match authenticator.authenticate(&token, None, &objects(), NOW) {
            Ok(None) => {}
            Err(Error::InvalidIssuer(iss)) => assert_eq!(iss, "https://evil"),
            Err(Error::MalformedClaims(_)) => {}
            other => panic!("accepted a token of another issuer: {other:?}"),
        }
    }

    #[test]
    fn mangled_tokens_are_refused_without_panicking() {
        let issuer = issuer();
        let authenticator = authenticator(&issuer);
        let token = issuer.issue(&spec(), NOW).unwrap().token;
        let objects = objects();
        for cut in 0..token.len() {
            let truncated = &token[..cut];
            assert!(
                !matches!(
                    authenticator.authenticate(truncated, None, &objects, NOW),
                    Ok(Some(_))
                ),
                "{truncated}"
            );
            let mut bytes = token.clone().into_bytes();
            bytes[cut] = if bytes[cut] == b'A' { b'B' } else { b'A' };
            let flipped = String::from_utf8(bytes).unwrap();
            assert!(
                !matches!(
                    authenticator.authenticate(&flipped, None, &objects, NOW),
                    Ok(Some(_))
                ),
                "{flipped}"
            );
        }
    }

    #[test]
    fn api_audiences_default_to_the_issuers() {
        let issuers = vec!["https://a".to_owned(), "https://b".to_owned()];
        assert_eq!(default_api_audiences(&[], &issuers), issuers[..1]);
        assert_eq!(
            default_api_audiences(&["api".to_owned()], &issuers),
            ["api"]
        );
    }
}
