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

/// A bearer-token authenticator (static token file, service-account tokens).
pub trait TokenAuthenticator: Send + Sync + Debug {
    /// The user `token` names and the audiences it is good for, `Ok(None)` when the token is
    /// not of this authenticator's kind, `Err(reason)` when it is but must be refused.
    /// `audiences` are the audiences the token must be meant for (`None`: the API server's).
    fn authenticate(
        &self,
        token: &str,
        audiences: Option<&[String]>,
    ) -> Result<Option<(UserInfo, Vec<String>)>, String>;
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

impl Authentication {
    /// The user `token` names (for TokenReview), with the audiences it is good for.
    pub fn authenticate_token(
        &self,
        token: &str,
        audiences: Option<&[String]>,
    ) -> Result<(UserInfo, Vec<String>), String> {
        let mut errors = Vec::new();
        for authenticator in &self.tokens {
            match authenticator.authenticate(token, audiences) {
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
        if let Some(certificate) = certificate {
            if certificate.front_proxy
                && let Some(user) = self
                    .request_header
                    .as_ref()
                    .and_then(|proxies| proxies.user(headers))
            {
                return Ok(user);
            }
            if let Some(user) = &certificate.user {
                return Ok(user.clone());
            }
        }
        if let Some(token) = bearer_token(headers)? {
            return match self.authenticate_token(token, None) {
                Ok((user, _)) => Ok(user),
                Err(reason) => {
                    tracing::debug!(%reason, "bearer token refused");
                    Err(unauthorized())
                }
            };
        }
        if self.anonymous {
            Ok(UserInfo::anonymous())
        } else {
            Err(unauthorized())
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
