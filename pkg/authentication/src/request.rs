//! The authenticator of a request, as kube-apiserver's chain of request authenticators
//! (upstream's `union`): a verified client certificate names the user; else a bearer token must
//! be recognized by one of the token authenticators, asked in order (a token nobody recognizes
//! is refused, 401, even when anonymous requests are allowed); a request with no credentials at
//! all is `system:anonymous` when `--anonymous-auth` is on, and refused otherwise.
//!
//! The certificate chain is verified by the TLS layer (against the client CA and, with
//! request-header authentication, the front proxy's CA) and what it proves is derived once per
//! connection ([`Authentication::identify`]): the user it names when the client CA issued it
//! ([`crate::x509::user_of_chain`]), and whether it is a believed front proxy's, whose requests
//! name their user in headers ([`crate::requestheader`]). Those come first, as upstream's
//! request-header authenticator comes first.

use std::fmt::Debug;
use std::sync::Arc;

use genplane_apimachinery::errors::{ApiError, Status};
use http::header::{AUTHORIZATION, HeaderMap};

use crate::UserInfo;
use crate::requestheader::{ClientCertificates, RequestHeader};

/// What a token authenticator answers: the user a token names and the audiences it is good
/// for, `Ok(None)` when the token is not of the authenticator's kind, `Err(reason)` when it is
/// but must be refused.
pub type TokenAnswer = Result<Option<(UserInfo, Vec<String>)>, String>;

/// A token authenticator's answer still being made (by another server, for a delegating one).
pub type PendingToken<'a> = std::pin::Pin<Box<dyn Future<Output = TokenAnswer> + Send + 'a>>;

/// A bearer-token authenticator (static token file, service-account tokens, or another
/// server asked with a TokenReview).
///
/// Most authenticators answer at once ([`TokenAuthenticator::authenticate`]). One that asks
/// another server says so with [`TokenAuthenticator::delegates`] and answers in
/// [`TokenAuthenticator::authenticate_delegated`]; its `authenticate` answers what it knows
/// without asking (a cached answer, else `Ok(None)`).
pub trait TokenAuthenticator: Send + Sync + Debug {
    /// The user `token` names and the audiences it is good for, `Ok(None)` when the token is
    /// not of this authenticator's kind, `Err(reason)` when it is but must be refused.
    /// `audiences` are the audiences the token must be meant for (`None`: the API server's).
    fn authenticate(&self, token: &str, audiences: Option<&[String]>) -> TokenAnswer;

    /// Whether an answer may need another server
    /// ([`TokenAuthenticator::authenticate_delegated`]).
    fn delegates(&self) -> bool {
        false
    }

    /// [`TokenAuthenticator::authenticate`], asking another server when needed.
    fn authenticate_delegated<'a>(
        &'a self,
        token: &'a str,
        audiences: Option<&'a [String]>,
    ) -> PendingToken<'a> {
        Box::pin(std::future::ready(self.authenticate(token, audiences)))
    }
}

/// The answer of `authenticator`: asked of the other server it delegates to when it does, at
/// once otherwise.
async fn token_answer(
    authenticator: &dyn TokenAuthenticator,
    token: &str,
    audiences: Option<&[String]>,
) -> TokenAnswer {
    if authenticator.delegates() {
        authenticator.authenticate_delegated(token, audiences).await
    } else {
        authenticator.authenticate(token, audiences)
    }
}

/// What the credentials of a request come to before its token is checked.
enum Credentials<'a> {
    /// A user, from a front proxy's headers or the client certificate.
    User(UserInfo),
    /// A bearer token to check.
    Token(&'a str),
    /// None at all.
    None,
}

/// The authentication chain of a server.
#[derive(Clone, Debug, Default)]
pub struct Authentication {
    /// The bearer-token authenticators, asked in order.
    pub tokens: Vec<Arc<dyn TokenAuthenticator>>,
    /// Whether requests without credentials proceed as `system:anonymous` (`--anonymous-auth`).
    pub anonymous: bool,
    /// The client CA a certificate must be issued by to name a user, when the TLS layer also
    /// accepts other CAs' (the front proxy's); `None`: every certificate the TLS layer verified.
    pub client_certificates: Option<ClientCertificates>,
    /// The front proxies believed and their headers (`--requestheader-*`), if any.
    pub request_header: Option<Arc<RequestHeader>>,
}

/// What a connection's verified client certificate chain proves ([`Authentication::identify`]).
#[derive(Clone, Debug, Default)]
pub struct CertificateIdentity {
    /// The user it names, when the client CA issued it.
    pub user: Option<UserInfo>,
    /// Whether it is a believed front proxy's.
    pub front_proxy: bool,
}

/// The answer to a request whose credentials are refused.
pub fn unauthorized() -> ApiError {
    Status::unauthorized("Unauthorized").into()
}

/// The bearer token of an `Authorization` header, as upstream reads it
/// ([`crate::bearer::token_from_authorization`]); `Err` for a header that
/// is not text (refused, 401, as upstream refuses it).
pub fn bearer_token(headers: &HeaderMap) -> Result<Option<&str>, ApiError> {
    let Some(value) = headers.get(AUTHORIZATION) else {
        return Ok(None);
    };
    let value = value.to_str().map_err(|_| unauthorized())?;
    Ok(crate::bearer::token_from_authorization(value))
}

/// The answer of a chain of token authenticators, from each one's in order: the first user
/// found, else every reason given, else "invalid bearer token".
fn chained(
    answers: impl IntoIterator<Item = TokenAnswer>,
) -> Result<(UserInfo, Vec<String>), String> {
    let mut errors = Vec::new();
    for answer in answers {
        match answer {
            Ok(Some(found)) => return Ok(found),
            Ok(None) => {}
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Err("invalid bearer token".to_owned())
    } else {
        Err(errors.join(", "))
    }
}

impl Authentication {
    /// The user `token` names (for TokenReview), with the audiences it is good for, from the
    /// authenticators that answer at once (a delegating one answers only what it knows; see
    /// [`Authentication::authenticate_token_delegated`]).
    pub fn authenticate_token(
        &self,
        token: &str,
        audiences: Option<&[String]>,
    ) -> Result<(UserInfo, Vec<String>), String> {
        chained(
            self.tokens
                .iter()
                .map(|authenticator| authenticator.authenticate(token, audiences)),
        )
    }

    /// Whether a token authenticator asks another server.
    pub fn delegates(&self) -> bool {
        self.tokens.iter().any(|t| t.delegates())
    }

    /// [`Authentication::authenticate_token`], asking the servers delegating authenticators
    /// delegate to (stopping at the first user found).
    pub async fn authenticate_token_delegated(
        &self,
        token: &str,
        audiences: Option<&[String]>,
    ) -> Result<(UserInfo, Vec<String>), String> {
        let mut answers = Vec::new();
        for authenticator in &self.tokens {
            let answer = token_answer(authenticator.as_ref(), token, audiences).await;
            let found = matches!(answer, Ok(Some(_)));
            answers.push(answer);
            if found {
                break;
            }
        }
        chained(answers)
    }

    /// What the credentials of a request with `headers` over a connection proving
    /// `certificate` come to before a token is checked.
    fn credentials<'h>(
        &self,
        headers: &'h HeaderMap,
        certificate: Option<&CertificateIdentity>,
    ) -> Result<Credentials<'h>, ApiError> {
        if let Some(certificate) = certificate {
            if certificate.front_proxy
                && let Some(user) = self
                    .request_header
                    .as_ref()
                    .and_then(|proxies| proxies.user(headers))
            {
                return Ok(Credentials::User(user));
            }
            if let Some(user) = &certificate.user {
                return Ok(Credentials::User(user.clone()));
            }
        }
        Ok(match bearer_token(headers)? {
            Some(token) => Credentials::Token(token),
            None => Credentials::None,
        })
    }

    /// The user of a request whose token was checked (`checked`), or of one without
    /// credentials.
    fn finish(
        &self,
        checked: Option<Result<(UserInfo, Vec<String>), String>>,
    ) -> Result<UserInfo, ApiError> {
        match checked {
            Some(Ok((user, _))) => Ok(user),
            Some(Err(reason)) => {
                tracing::debug!(%reason, "bearer token refused");
                Err(unauthorized())
            }
            None if self.anonymous => Ok(UserInfo::anonymous()),
            None => Err(unauthorized()),
        }
    }

    /// [`Authentication::authenticate`], asking the servers delegating token authenticators
    /// delegate to.
    pub async fn authenticate_delegated(
        &self,
        headers: &HeaderMap,
        certificate: Option<&CertificateIdentity>,
    ) -> Result<UserInfo, ApiError> {
        match self.credentials(headers, certificate)? {
            Credentials::User(user) => Ok(user),
            Credentials::Token(token) => {
                self.finish(Some(self.authenticate_token_delegated(token, None).await))
            }
            Credentials::None => self.finish(None),
        }
    }

    /// What the verified client certificate `chain` (DER, leaf first) proves.
    pub fn identify(&self, chain: &[Vec<u8>]) -> CertificateIdentity {
        let front_proxy = self
            .request_header
            .as_ref()
            .is_some_and(|proxies| proxies.is_proxy(chain));
        let user = match &self.client_certificates {
            Some(clients) if !clients.verifies(chain) => None,
            _ => crate::x509::user_of_chain(chain),
        };
        CertificateIdentity { user, front_proxy }
    }

    /// Who made a request with `headers` over a connection whose client certificate proves
    /// `certificate` (`None`: no certificate): the user a front proxy names in the headers,
    /// the certificate's user, a bearer token's, or the anonymous user.
    pub fn authenticate(
        &self,
        headers: &HeaderMap,
        certificate: Option<&CertificateIdentity>,
    ) -> Result<UserInfo, ApiError> {
        match self.credentials(headers, certificate)? {
            Credentials::User(user) => Ok(user),
            Credentials::Token(token) => self.finish(Some(self.authenticate_token(token, None))),
            Credentials::None => self.finish(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use http::header::HeaderValue;

    use super::*;

    #[derive(Debug)]
    struct Fixed;

    impl TokenAuthenticator for Fixed {
        fn authenticate(
            &self,
            token: &str,
            _: Option<&[String]>,
        ) -> Result<Option<(UserInfo, Vec<String>)>, String> {
            match token {
                "good" => Ok(Some((UserInfo::authenticated("alice", vec![]), vec![]))),
                "expired" => Err("token has expired".into()),
                _ => Ok(None),
            }
        }
    }

    fn headers(authorization: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, HeaderValue::from_str(authorization).unwrap());
        headers
    }

    #[test]
    fn tokens_authenticate_and_unknown_tokens_are_refused_even_with_anonymous_on() {
        let chain = Authentication {
            tokens: vec![Arc::new(Fixed)],
            anonymous: true,
            ..Authentication::default()
        };
        let user = chain.authenticate(&headers("Bearer good"), None).unwrap();
        assert_eq!(user.username, "alice");
        assert_eq!(
            chain.authenticate(&headers("bearer good"), None).unwrap(),
            user
        );
        for refused in ["Bearer expired", "Bearer other"] {
            assert_eq!(
                chain
                    .authenticate(&headers(refused), None)
                    .unwrap_err()
                    .code,
                401
            );
        }
        // A client certificate's user comes first, whatever the token.
        let carol = UserInfo::authenticated("carol", vec![]);
        assert_eq!(
            chain
                .authenticate(
                    &headers("Bearer other"),
                    Some(&CertificateIdentity {
                        user: Some(carol.clone()),
                        front_proxy: false,
                    })
                )
                .unwrap(),
            carol
        );
        let anonymous = chain.authenticate(&HeaderMap::new(), None).unwrap();
        assert!(anonymous.is_anonymous());
        // A header that is not a bearer token is no credential.
        assert!(
            chain
                .authenticate(&headers("Basic abc"), None)
                .unwrap()
                .is_anonymous()
        );
        let closed = Authentication {
            anonymous: false,
            ..chain
        };
        assert_eq!(
            closed
                .authenticate(&HeaderMap::new(), None)
                .unwrap_err()
                .code,
            401
        );
    }

    #[test]
    fn bearer_tokens_are_read_as_upstream_reads_them() {
        assert_eq!(bearer_token(&headers("Bearer abc")).unwrap(), Some("abc"));
        assert_eq!(bearer_token(&headers("Bearer a b")).unwrap(), Some("a"));
        assert_eq!(bearer_token(&headers("Bearer  abc")).unwrap(), None);
        assert_eq!(bearer_token(&headers("Bearer ")).unwrap(), None);
        assert_eq!(bearer_token(&headers("Bearerabc")).unwrap(), None);
        assert_eq!(bearer_token(&HeaderMap::new()).unwrap(), None);
        let mut binary = HeaderMap::new();
        binary.insert(
            AUTHORIZATION,
            HeaderValue::from_bytes(b"Bearer \xff").unwrap(),
        );
        assert_eq!(bearer_token(&binary).unwrap_err().code, 401);
        let chain = Authentication {
            tokens: Vec::new(),
            anonymous: true,
            ..Authentication::default()
        };
        assert_eq!(chain.authenticate(&binary, None).unwrap_err().code, 401);
    }
}
