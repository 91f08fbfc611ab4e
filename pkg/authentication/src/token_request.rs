//! The TokenRequest API (`POST .../namespaces/<ns>/serviceaccounts/<name>/token`), as
//! kube-apiserver 1.33's `TokenREST.Create`, minus I/O: the server decodes the body, gives the
//! account and secret lookups ([`ServiceAccountLookup`]) and writes back
//! [`TokenRequestCreated::response`] (201) or [`TokenRequestError::to_status`].
//!
//! In upstream's order:
//! 1. `metadata.name` / `metadata.namespace`, when set, must be the account's (422);
//! 2. the ServiceAccount must exist (404);
//! 3. `spec.audiences` defaults to the API audiences; `spec.expirationSeconds` (default 3600)
//!    must be at least 600 and at most 2^32 (422);
//! 4. `spec.boundObjectRef` may name a Secret of the namespace (404 when missing, 409 when its
//!    `uid` is given and differs). Pods and Nodes are never found (genplane serves neither);
//!    other kinds are a 400 `cannot bind token to object of type <group>/<version>, Kind=<kind>`;
//! 5. an expiration above `--service-account-max-token-expiration` is shortened to it, with the
//!    warning `requested expiration of N seconds shortened to M seconds`;
//! 6. the token is issued; `status.expirationTimestamp` is the issue time plus the (shortened)
//!    expiration, RFC 3339.
//!
//! Upstream's extended (`warnafter`) expiry of pod-bound tokens does not apply: there are no
//! pod-bound tokens.

use genplane_apimachinery::errors::Status;
use genplane_apimachinery::meta::rfc3339;
use genplane_apimachinery::schema::{GroupKind, GroupResource};
use genplane_apimachinery::validation::field::{Error as FieldError, ErrorList, Path};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::serviceaccount::{
    self, Claims, ObjectRef, ServiceAccountLookup, TokenIssuer, TokenSpec,
};

/// `spec.expirationSeconds` when the request does not set it.
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// The shortest expiration a request may ask for (10 minutes).
pub const MIN_EXPIRATION_SECONDS: i64 = 600;
/// The longest expiration a request may ask for (2^32 seconds).
pub const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;
/// The shortest `--service-account-max-token-expiration` (one hour).
pub const MIN_MAX_EXPIRATION_SECONDS: i64 = 3600;

/// Why a TokenRequest was refused.
#[derive(Debug, thiserror::Error)]
pub enum TokenRequestError {
    /// `--service-account-max-token-expiration` is out of range (a flag error, at start-up).
    #[error("the service-account-max-token-expiration must be between 1 hour and 2^32 seconds")]
    MaxExpirationOutOfRange,
    /// The body is not a TokenRequest (400).
    #[error("{0}")]
    Decode(String),
    /// `metadata.name` or `metadata.namespace` names another account (422).
    #[error("TokenRequest.authentication.k8s.io {} is invalid: {errors}", genplane_apimachinery::gofmt::Quoted(.name))]
    TargetMismatch {
        /// The account name from the URL.
        name: String,
        /// The field errors.
        errors: ErrorList,
    },
    /// The ServiceAccount does not exist (404).
    #[error("serviceaccounts {0:?} not found")]
    ServiceAccountNotFound(String),
    /// The spec is invalid (422).
    #[error("TokenRequest.authentication.k8s.io \"\" is invalid: {0}")]
    Invalid(ErrorList),
    /// The bound object does not exist (404); `resource` is `secrets`, `pods` or `nodes`.
    #[error("{resource} {} not found", genplane_apimachinery::gofmt::Quoted(.name))]
    BoundObjectNotFound {
        /// The resource.
        resource: &'static str,
        /// The name.
        name: String,
    },
    /// The bound object is of a kind tokens cannot be bound to (400).
    #[error("cannot bind token to object of type {0}")]
    UnsupportedBoundKind(String),
    /// The bound object's uid is not the one the request names (409).
    #[error(
        "Operation cannot be fulfilled on {kind} {}: the UID in the bound object reference ({uid}) does not match the UID in record. The object might have been deleted and then recreated",
        genplane_apimachinery::gofmt::Quoted(name)
    )]
    BoundUidMismatch {
        /// The kind (upstream names it as the resource).
        kind: String,
        /// The object's name.
        name: String,
        /// The uid in the request.
        uid: String,
    },
    /// Signing failed (500).
    #[error(transparent)]
    Issue(#[from] serviceaccount::Error),
}

impl TokenRequestError {
    /// The API `Status` the server answers with.
    pub fn to_status(&self) -> Status {
        let token_request = GroupKind::new("authentication.k8s.io", "TokenRequest");
        match self {
            Self::MaxExpirationOutOfRange | Self::Issue(_) => Status::internal_error(self),
            Self::Decode(message) => Status::bad_request(message.clone()),
            Self::TargetMismatch { name, errors } => Status::invalid(&token_request, name, errors),
            Self::ServiceAccountNotFound(name) => {
                Status::not_found(&GroupResource::new("", "serviceaccounts"), name)
            }
            Self::Invalid(errors) => Status::invalid(&token_request, "", errors),
            Self::BoundObjectNotFound { resource, name } => {
                Status::not_found(&GroupResource::new("", resource), name)
            }
            Self::UnsupportedBoundKind(_) => Status::bad_request(self.to_string()),
            Self::BoundUidMismatch { kind, name, uid } => Status::conflict(
                &GroupResource::new("", kind),
                name,
                &format!(
                    "the UID in the bound object reference ({uid}) does not match the UID in record. The object might have been deleted and then recreated"
                ),
            ),
        }
    }
}

/// The server's TokenRequest settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TokenRequestOptions {
    /// The API audiences: the audiences of a request that names none.
    pub api_audiences: Vec<String>,
    /// `--service-account-max-token-expiration` in seconds (`None` or 0: no cap).
    pub max_expiration_seconds: Option<i64>,
}

impl TokenRequestOptions {
    /// Options with `api_audiences` (see
    /// [`crate::serviceaccount::default_api_audiences`]) and the
    /// `--service-account-max-token-expiration` cap, which must be between an hour and 2^32
    /// seconds when set.
    pub fn new(
        api_audiences: Vec<String>,
        max_expiration_seconds: Option<i64>,
    ) -> Result<Self, TokenRequestError> {
        let max_expiration_seconds = max_expiration_seconds.filter(|&s| s != 0);
        if max_expiration_seconds
            .is_some_and(|s| !(MIN_MAX_EXPIRATION_SECONDS..=MAX_EXPIRATION_SECONDS).contains(&s))
        {
            return Err(TokenRequestError::MaxExpirationOutOfRange);
        }
        Ok(Self {
            api_audiences,
            max_expiration_seconds,
        })
    }
}

/// A created token.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenRequestCreated {
    /// The TokenRequest to answer with (201): the request with its defaults, metadata and
    /// `status.token` / `status.expirationTimestamp`.
    pub response: Value,
    /// The token.
    pub token: String,
    /// `status.expirationTimestamp`.
    pub expiration_timestamp: String,
    /// Its claims.
    pub claims: Claims,
    /// Warnings for the `Warning` header.
    pub warnings: Vec<String>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Request {
    #[serde(default)]
    metadata: Metadata,
    #[serde(default)]
    spec: Spec,
}

#[derive(Default, Deserialize)]
struct Metadata {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    #[serde(default)]
    audiences: Option<Vec<String>>,
    #[serde(default)]
    expiration_seconds: Option<i64>,
    #[serde(default)]
    bound_object_ref: Option<BoundObjectRef>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct BoundObjectRef {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    uid: String,
}

/// Creates a token for the ServiceAccount `namespace/name` (from the URL) as TokenRequest
/// `body` asks, at `now` (seconds since the Unix epoch).
pub fn create(
    body: &Value,
    namespace: &str,
    name: &str,
    options: &TokenRequestOptions,
    issuer: &TokenIssuer,
    lookup: &dyn ServiceAccountLookup,
    now: i64,
) -> Result<TokenRequestCreated, TokenRequestError> {
    let request: Request = if body.is_null() {
        Request::default()
    } else {
        serde_json::from_value(body.clone())
            .map_err(|e| TokenRequestError::Decode(format!("invalid TokenRequest: {e}")))?
    };

    let mut errors = ErrorList::new();
    if !request.metadata.name.is_empty() && request.metadata.name != name {
        errors.push(FieldError::invalid(
            &Path::new("metadata").child("name"),
            request.metadata.name.clone(),
            "must match the service account name if specified",
        ));
    } else if !request.metadata.namespace.is_empty() && request.metadata.namespace != namespace {
        errors.push(FieldError::invalid(
            &Path::new("metadata").child("namespace"),
            request.metadata.namespace.clone(),
            "must match the service account namespace if specified",
        ));
    }
    if !errors.is_empty() {
        return Err(TokenRequestError::TargetMismatch {
            name: name.to_owned(),
            errors,
        });
    }

    let account = lookup
        .service_account(namespace, name)
        .ok_or_else(|| TokenRequestError::ServiceAccountNotFound(name.to_owned()))?;

    let audiences = request
        .spec
        .audiences
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| options.api_audiences.clone());
    let requested = request
        .spec
        .expiration_seconds
        .unwrap_or(DEFAULT_EXPIRATION_SECONDS);
    let expiration_path = Path::new("spec").child("expirationSeconds");
    if requested < MIN_EXPIRATION_SECONDS {
        errors.push(FieldError::invalid(
            &expiration_path,
            requested,
            "may not specify a duration less than 10 minutes",
        ));
    }
    if requested > MAX_EXPIRATION_SECONDS {
        errors.push(FieldError::invalid(
            &expiration_path,
            requested,
            "may not specify a duration larger than 2^32 seconds",
        ));
    }
    if !errors.is_empty() {
        return Err(TokenRequestError::Invalid(errors));
    }

    let secret = match &request.spec.bound_object_ref {
        None => None,
        Some(reference) => Some(bound_secret(reference, namespace, lookup)?),
    };

    let mut warnings = Vec::new();
    let mut expiration_seconds = requested;
    if let Some(max) = options.max_expiration_seconds
        && max > 0
        && requested > max
    {
        warnings.push(format!(
            "requested expiration of {requested} seconds shortened to {max} seconds"
        ));
        expiration_seconds = max;
    }

    let issued = issuer.issue(
        &TokenSpec {
            namespace: namespace.to_owned(),
            service_account: ObjectRef::new(name, account.uid),
            secret,
            audiences: audiences.clone(),
            expiration_seconds,
        },
        now,
    )?;
    let expiration_timestamp = rfc3339(now.saturating_add(expiration_seconds));

    let mut response = if body.is_object() {
        body.clone()
    } else {
        json!({})
    };
    response["apiVersion"] = json!("authentication.k8s.io/v1");
    response["kind"] = json!("TokenRequest");
    if !response["metadata"].is_object() {
        response["metadata"] = json!({});
    }
    response["metadata"]["name"] = json!(name);
    response["metadata"]["namespace"] = json!(namespace);
    response["metadata"]["creationTimestamp"] = json!(rfc3339(now));
    if !response["spec"].is_object() {
        response["spec"] = json!({});
    }
    response["spec"]["audiences"] = json!(audiences);
    response["spec"]["expirationSeconds"] = json!(expiration_seconds);
    response["status"] = json!({
        "token": issued.token,
        "expirationTimestamp": expiration_timestamp,
    });

    Ok(TokenRequestCreated {
        response,
        token: issued.token,
        expiration_timestamp,
        claims: issued.claims,
        warnings,
    })
}

/// The Secret a token is bound to, checked against the request's reference.
fn bound_secret(
    reference: &BoundObjectRef,
    namespace: &str,
    lookup: &dyn ServiceAccountLookup,
) -> Result<ObjectRef, TokenRequestError> {
    // Go's schema.FromAPIVersionAndKind: an unparsable apiVersion gives an empty group and
    // version.
    let (group, version) = match reference.api_version.split_once('/') {
        None => ("", reference.api_version.as_str()),
        Some((group, version)) if !version.contains('/') => (group, version),
        Some(_) => ("", ""),
    };
    let not_found = |resource| TokenRequestError::BoundObjectNotFound {
        resource,
        name: reference.name.clone(),
    };
    match (group, reference.kind.as_str()) {
        ("", "Secret") => {
            let live = lookup
                .secret(namespace, &reference.name)
                .ok_or_else(|| not_found("secrets"))?;
            if !reference.uid.is_empty() && reference.uid != live.uid {
                return Err(TokenRequestError::BoundUidMismatch {
                    kind: reference.kind.clone(),
                    name: reference.name.clone(),
                    uid: reference.uid.clone(),
                });
            }
            Ok(ObjectRef::new(reference.name.clone(), live.uid))
        }
        ("", "Pod") => Err(not_found("pods")),
        ("", "Node") => Err(not_found("nodes")),
        (group, kind) => Err(TokenRequestError::UnsupportedBoundKind(format!(
            "{group}/{version}, Kind={kind}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::keys::{GeneratedKeyType, SigningKey, verification_keys};
    use crate::serviceaccount::{LiveObject, TokenAuthenticator};

    const ISSUER: &str = "https://kubernetes.default.svc";
    const NOW: i64 = 1_795_318_800;

    #[derive(Default)]
    struct Objects {
        accounts: HashMap<(String, String), LiveObject>,
        secrets: HashMap<(String, String), LiveObject>,
    }

    impl ServiceAccountLookup for Objects {
        fn service_account(&self, namespace: &str, name: &str) -> Option<LiveObject> {
            self.accounts.get(&(namespace.into(), name.into())).cloned()
        }
        fn secret(&self, namespace: &str, name: &str) -> Option<LiveObject> {
            self.secrets.get(&(namespace.into(), name.into())).cloned()
        }
    }

    fn objects() -> Objects {
        let mut objects = Objects::default();
        objects.accounts.insert(
            ("default".into(), "robot".into()),
            LiveObject::new("uid-robot"),
        );
        objects
            .secrets
            .insert(("default".into(), "s".into()), LiveObject::new("uid-s"));
        objects
    }

    fn issuer() -> TokenIssuer {
        TokenIssuer::new(
            ISSUER,
            SigningKey::generate(GeneratedKeyType::EcdsaP256).unwrap(),
        )
    }

    fn options() -> TokenRequestOptions {
        TokenRequestOptions::new(vec![ISSUER.into()], None).unwrap()
    }

    fn create_with(
        body: Value,
        options: &TokenRequestOptions,
    ) -> Result<TokenRequestCreated, TokenRequestError> {
        create(
            &body,
            "default",
            "robot",
            options,
            &issuer(),
            &objects(),
            NOW,
        )
    }

    #[test]
    fn an_empty_request_gets_an_hour_long_token_for_the_api_audiences() {
        let issuer = issuer();
        let created = create(
            &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest"}),
            "default",
            "robot",
            &options(),
            &issuer,
            &objects(),
            NOW,
        )
        .unwrap();
        assert_eq!(created.expiration_timestamp, "2026-11-22T04:40:00Z");
        assert!(created.warnings.is_empty());
        assert_eq!(
            created.response,
            json!({
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "metadata": {"name": "robot", "namespace": "default",
                             "creationTimestamp": "2026-11-22T03:40:00Z"},
                "spec": {"audiences": [ISSUER], "expirationSeconds": 3600},
                "status": {"token": created.token, "expirationTimestamp": "2026-11-22T04:40:00Z"},
            })
        );
        assert_eq!(created.claims.exp, Some(NOW + 3600));
        assert_eq!(created.claims.kubernetes.serviceaccount.uid, "uid-robot");

        // The token authenticates as the account.
        let authenticator = TokenAuthenticator::new(
            vec![ISSUER.into()],
            verification_keys(Vec::new(), Some(issuer.signing_key())),
            vec![ISSUER.into()],
        );
        let user = authenticator
            .authenticate(&created.token, None, &objects(), NOW)
            .unwrap()
            .unwrap()
            .user;
        assert_eq!(user.username, "system:serviceaccount:default:robot");
    }

    #[test]
    fn audiences_expiry_and_secret_binding_are_taken_from_the_spec() {
        let created = create_with(
            json!({"metadata": {"name": "robot", "namespace": "default"},
                   "spec": {"audiences": ["vault"], "expirationSeconds": 600,
                            "boundObjectRef": {"kind": "Secret", "apiVersion": "v1",
                                               "name": "s", "uid": "uid-s"}}}),
            &options(),
        )
        .unwrap();
        assert_eq!(created.claims.aud, ["vault"]);
        assert_eq!(created.claims.exp, Some(NOW + 600));
        assert_eq!(
            created.claims.kubernetes.secret,
            Some(ObjectRef::new("s", "uid-s"))
        );
        assert_eq!(
            created.response["spec"]["boundObjectRef"]["name"],
            json!("s")
        );
        // Without a uid in the reference, the secret's own uid is bound.
        let created = create_with(
            json!({"spec": {"boundObjectRef": {"kind": "Secret", "apiVersion": "v1", "name": "s"}}}),
            &options(),
        )
        .unwrap();
        assert_eq!(created.claims.kubernetes.secret.unwrap().uid, "uid-s");
    }

    #[test]
    fn long_expirations_are_capped_with_a_warning() {
        let options = TokenRequestOptions::new(vec![ISSUER.into()], Some(7200)).unwrap();
        let created = create_with(json!({"spec": {"expirationSeconds": 86400}}), &options).unwrap();
        assert_eq!(
            created.warnings,
            ["requested expiration of 86400 seconds shortened to 7200 seconds"]
        );
        assert_eq!(created.claims.exp, Some(NOW + 7200));
        assert_eq!(created.response["spec"]["expirationSeconds"], json!(7200));
        assert_eq!(created.expiration_timestamp, rfc3339(NOW + 7200));

        for bad in [59 * 60, (1 << 32) + 1] {
            assert_eq!(
                TokenRequestOptions::new(Vec::new(), Some(bad))
                    .unwrap_err()
                    .to_string(),
                "the service-account-max-token-expiration must be between 1 hour and 2^32 seconds"
            );
        }
        assert!(TokenRequestOptions::new(Vec::new(), Some(0)).is_ok());
    }

    #[test]
    fn bad_requests_are_refused_as_upstream() {
        let status = |body: Value| {
            let err = create_with(body, &options()).unwrap_err();
            let status = serde_json::to_value(err.to_status()).unwrap();
            (
                status["code"].as_u64().unwrap(),
                status["message"].as_str().unwrap().to_owned(),
            )
        };
        assert_eq!(
            status(json!({"spec": {"expirationSeconds": 60}})),
            (
                422,
                "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes".to_owned()
            )
        );
        assert_eq!(
            status(json!({"spec": {"expirationSeconds": 4_294_967_297_i64}})).1,
            "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 4294967297: may not specify a duration larger than 2^32 seconds"
        );
        assert_eq!(
            status(json!({"metadata": {"name": "other"}})),
            (
                422,
                "TokenRequest.authentication.k8s.io \"robot\" is invalid: metadata.name: Invalid value: \"other\": must match the service account name if specified".to_owned()
            )
        );
        assert_eq!(
            status(json!({"metadata": {"namespace": "kube-system"}})).1,
            "TokenRequest.authentication.k8s.io \"robot\" is invalid: metadata.namespace: Invalid value: \"kube-system\": must match the service account namespace if specified"
        );
        let bound = |kind: &str, api_version: &str, name: &str, uid: &str| json!({"spec": {"boundObjectRef": {"kind": kind, "apiVersion": api_version, "name": name, "uid": uid}}});
        assert_eq!(
            status(bound("Secret", "v1", "missing", "")),
            (404, "secrets \"missing\" not found".to_owned())
        );
        assert_eq!(
            status(bound("Secret", "v1", "s", "uid-old")),
            (
                409,
                "Operation cannot be fulfilled on Secret \"s\": the UID in the bound object reference (uid-old) does not match the UID in record. The object might have been deleted and then recreated".to_owned()
            )
        );
        assert_eq!(
            status(bound("Pod", "v1", "p", "")),
            (404, "pods \"p\" not found".to_owned())
        );
        assert_eq!(
            status(bound("Node", "v1", "n", "")).1,
            "nodes \"n\" not found"
        );
        assert_eq!(
            status(bound("ConfigMap", "v1", "c", "")),
            (
                400,
                "cannot bind token to object of type /v1, Kind=ConfigMap".to_owned()
            )
        );
        assert_eq!(
            status(bound("Deployment", "apps/v1", "d", "")).1,
            "cannot bind token to object of type apps/v1, Kind=Deployment"
        );
        assert_eq!(status(json!({"spec": {"audiences": "x"}})).0, 400);
    }

    #[test]
    fn tokens_for_missing_accounts_are_not_found() {
        let err = create(
            &json!({}),
            "default",
            "ghost",
            &options(),
            &issuer(),
            &objects(),
            NOW,
        )
        .unwrap_err();
        let status = err.to_status();
        assert_eq!(status.to_string(), "serviceaccounts \"ghost\" not found");
    }
}
