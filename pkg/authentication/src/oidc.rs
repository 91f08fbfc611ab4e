//! The OpenID Connect discovery documents of the service-account issuer, as kube-apiserver
//! serves them (`pkg/serviceaccount/openidmetadata.go`, `pkg/routes/openidmetadata.go`), so that
//! relying parties outside the cluster can verify service-account tokens:
//!
//! - the provider configuration at [`OPENID_CONFIG_PATH`]: `{"issuer":...,"jwks_uri":...,
//!   "response_types_supported":["id_token"],"subject_types_supported":["public"],
//!   "id_token_signing_alg_values_supported":[...]}`;
//! - the key set at [`JWKS_PATH`]:
//!   `{"keys":[{"use":"sig","kty":"RSA","kid":...,"alg":"RS256","n":...,"e":...}]}`.
//!
//! Both are rendered once ([`Discovery::new`]) and served as they are with
//! [`CACHE_CONTROL`]. Upstream refuses to build them (and logs the error and serves neither)
//! when the issuer is not an `https` URL without query or fragment.

use serde::Serialize;

use crate::keys::{Jwk, PublicKey};

/// The path of the provider configuration document.
pub const OPENID_CONFIG_PATH: &str = "/.well-known/openid-configuration";
/// The path of the key set.
pub const JWKS_PATH: &str = "/openid/v1/jwks";
/// The content type of the provider configuration.
pub const CONFIG_CONTENT_TYPE: &str = "application/json";
/// The content type of the key set.
pub const JWKS_CONTENT_TYPE: &str = "application/jwk-set+json";
/// The `Cache-Control` of both documents (static keys: an hour, as upstream).
pub const CACHE_CONTROL: &str = "public, max-age=3600";

/// Why the discovery documents cannot be built (upstream's words).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum DiscoveryError {
    /// No issuer.
    #[error("empty issuer URL")]
    EmptyIssuer,
    /// Neither `--service-account-jwks-uri` nor an external address.
    #[error("either the JWKS URI or the default external address, or both, must be set")]
    NoJwksLocation,
    /// The issuer is not an `https` URL.
    #[error("issuer URL must use https scheme, got: {0}")]
    IssuerNotHttps(String),
    /// The issuer has a query.
    #[error("issuer URL may not include a query, got: {0}")]
    IssuerQuery(String),
    /// The issuer has a fragment.
    #[error("issuer URL may not include a fragment, got: {0}")]
    IssuerFragment(String),
    /// The external address is not a `host[:port]`.
    #[error(
        "attempted to build jwks_uri from external address {0}, but could not construct a valid URL. Error: not a host and port"
    )]
    ExternalAddress(String),
    /// `--service-account-jwks-uri` is not an `https` URL.
    #[error("jwksURI requires https scheme, parsed as: {0}")]
    JwksNotHttps(String),
    /// No verification key.
    #[error("no keys provided for validating keyset")]
    NoKeys,
}

/// The rendered discovery documents.
#[derive(Clone, Debug)]
pub struct Discovery {
    jwks_uri: String,
    config: Vec<u8>,
    keyset: Vec<u8>,
}

#[derive(Serialize)]
struct ProviderMetadata<'a> {
    issuer: &'a str,
    jwks_uri: &'a str,
    response_types_supported: [&'static str; 1],
    subject_types_supported: [&'static str; 1],
    id_token_signing_alg_values_supported: Vec<&'static str>,
}

#[derive(Serialize)]
struct KeySet {
    keys: Vec<Jwk>,
}

impl Discovery {
    /// The documents of `issuer` (the first `--service-account-issuer`) listing `keys` (the
    /// verification keys). The key set's URL is `jwks_uri` (`--service-account-jwks-uri`) when
    /// given, else `https://<external_address>/openid/v1/jwks`, where the external address is
    /// the `host:port` clients reach the server at (`--external-hostname`, or the advertise
    /// address, with the secure port).
    pub fn new(
        issuer: &str,
        jwks_uri: Option<&str>,
        external_address: Option<&str>,
        keys: &[PublicKey],
    ) -> Result<Self, DiscoveryError> {
        let jwks_uri = jwks_uri.filter(|u| !u.is_empty());
        let external_address = external_address.filter(|a| !a.is_empty());
        if issuer.is_empty() {
            return Err(DiscoveryError::EmptyIssuer);
        }
        if jwks_uri.is_none() && external_address.is_none() {
            return Err(DiscoveryError::NoJwksLocation);
        }
        let parts = UrlParts::of(issuer);
        if parts.scheme.as_deref() != Some("https") {
            return Err(DiscoveryError::IssuerNotHttps(issuer.to_owned()));
        }
        if !parts.query.is_empty() {
            return Err(DiscoveryError::IssuerQuery(issuer.to_owned()));
        }
        if !parts.fragment.is_empty() {
            return Err(DiscoveryError::IssuerFragment(issuer.to_owned()));
        }
        let jwks_uri = match (jwks_uri, external_address) {
            (Some(uri), _) => {
                if UrlParts::of(uri).scheme.as_deref() != Some("https") {
                    return Err(DiscoveryError::JwksNotHttps(uri.to_owned()));
                }
                uri.to_owned()
            }
            (None, Some(address)) => {
                if address
                    .chars()
                    .any(|c| matches!(c, '/' | '?' | '#' | '@' | '\\') || c.is_whitespace())
                {
                    return Err(DiscoveryError::ExternalAddress(address.to_owned()));
                }
                format!("https://{address}{JWKS_PATH}")
            }
            (None, None) => return Err(DiscoveryError::NoJwksLocation),
        };
        if keys.is_empty() {
            return Err(DiscoveryError::NoKeys);
        }

        let mut algorithms: Vec<&'static str> =
            keys.iter().map(|k| k.algorithm().as_str()).collect();
        algorithms.sort_unstable();
        algorithms.dedup();
        let config = serde_json::to_vec(&ProviderMetadata {
            issuer,
            jwks_uri: &jwks_uri,
            response_types_supported: ["id_token"],
            subject_types_supported: ["public"],
            id_token_signing_alg_values_supported: algorithms,
        })
        .expect("invariant: provider metadata serializes");
        let keyset = serde_json::to_vec(&KeySet {
            keys: keys.iter().map(PublicKey::to_jwk).collect(),
        })
        .expect("invariant: a key set serializes");
        Ok(Self {
            jwks_uri,
            config,
            keyset,
        })
    }

    /// The URL of the key set the configuration names.
    pub fn jwks_uri(&self) -> &str {
        &self.jwks_uri
    }

    /// The body of [`OPENID_CONFIG_PATH`].
    pub fn config_json(&self) -> &[u8] {
        &self.config
    }

    /// The body of [`JWKS_PATH`].
    pub fn keyset_json(&self) -> &[u8] {
        &self.keyset
    }
}

/// The parts of a URL the checks need, as Go's `url.Parse` splits them: a lowercased scheme
/// (when the text before the first `:` is one), the query after `?` and the fragment after `#`.
struct UrlParts<'a> {
    scheme: Option<String>,
    query: &'a str,
    fragment: &'a str,
}

impl<'a> UrlParts<'a> {
    fn of(url: &'a str) -> Self {
        let (rest, fragment) = url.split_once('#').unwrap_or((url, ""));
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let scheme = rest.split_once(':').map(|(s, _)| s).filter(|s| {
            s.starts_with(|c: char| c.is_ascii_alphabetic())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        });
        Self {
            scheme: scheme.map(str::to_ascii_lowercase),
            query,
            fragment,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::{GeneratedKeyType, SigningKey, public_keys_from_pem};

    const RSA_PUBLIC: &str = include_str!("../testdata/rsa2048-public.pem");
    const P384_PKCS8: &str = include_str!("../testdata/p384-pkcs8.pem");
    const ISSUER: &str = "https://kubernetes.default.svc";

    fn keys() -> Vec<PublicKey> {
        public_keys_from_pem(format!("{RSA_PUBLIC}{P384_PKCS8}").as_bytes()).unwrap()
    }

    #[test]
    fn the_configuration_names_the_issuer_key_set_and_algorithms() {
        let discovery = Discovery::new(ISSUER, None, Some("10.0.0.1:6443"), &keys()).unwrap();
        assert_eq!(
            std::str::from_utf8(discovery.config_json()).unwrap(),
            concat!(
                r#"{"issuer":"https://kubernetes.default.svc","#,
                r#""jwks_uri":"https://10.0.0.1:6443/openid/v1/jwks","#,
                r#""response_types_supported":["id_token"],"subject_types_supported":["public"],"#,
                r#""id_token_signing_alg_values_supported":["ES384","RS256"]}"#
            )
        );
        let explicit = Discovery::new(
            ISSUER,
            Some("https://issuer.example/keys"),
            Some("ignored:6443"),
            &keys(),
        )
        .unwrap();
        assert_eq!(explicit.jwks_uri(), "https://issuer.example/keys");
    }

    #[test]
    fn the_key_set_lists_every_key_as_a_jwk() {
        let keys = keys();
        let discovery = Discovery::new(ISSUER, None, Some("localhost:6443"), &keys).unwrap();
        let set: serde_json::Value = serde_json::from_slice(discovery.keyset_json()).unwrap();
        let listed = set["keys"].as_array().unwrap();
        assert_eq!(listed.len(), 2);
        assert_eq!(listed[0]["kty"], "RSA");
        assert_eq!(listed[0]["kid"], keys[0].key_id());
        assert_eq!(listed[0]["e"], "AQAB");
        assert_eq!(listed[1]["kty"], "EC");
        assert_eq!(listed[1]["crv"], "P-384");
        assert_eq!(listed[1]["use"], "sig");
        let text = std::str::from_utf8(discovery.keyset_json()).unwrap();
        assert!(
            text.starts_with(r#"{"keys":[{"use":"sig","kty":"RSA","kid":""#),
            "{text}"
        );
    }

    #[test]
    fn a_generated_key_verifies_through_its_published_jwk() {
        use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED, UnparsedPublicKey};
        use base64::Engine as _;
        let key = SigningKey::generate(GeneratedKeyType::EcdsaP256).unwrap();
        let discovery =
            Discovery::new(ISSUER, None, Some("h:1"), &[key.public_key().clone()]).unwrap();
        let set: serde_json::Value = serde_json::from_slice(discovery.keyset_json()).unwrap();
        let decode = |field: &str| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(set["keys"][0][field].as_str().unwrap())
                .unwrap()
        };
        // What a relying party does: rebuild the point from x and y.
        let mut point = vec![4];
        point.extend(decode("x"));
        point.extend(decode("y"));
        let signature = key.sign(b"payload").unwrap();
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &point)
            .verify(b"payload", &signature)
            .unwrap();
    }

    #[test]
    fn bad_issuers_and_locations_are_refused_with_upstreams_words() {
        let keys = keys();
        let refuse = |issuer: &str, jwks: Option<&str>, address: Option<&str>| {
            Discovery::new(issuer, jwks, address, &keys)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(refuse("", None, Some("h:1")), "empty issuer URL");
        assert_eq!(
            refuse(ISSUER, None, None),
            "either the JWKS URI or the default external address, or both, must be set"
        );
        assert_eq!(
            refuse("http://kubernetes.default.svc", None, Some("h:1")),
            "issuer URL must use https scheme, got: http://kubernetes.default.svc"
        );
        assert_eq!(
            refuse("kubernetes/serviceaccount", None, Some("h:1")),
            "issuer URL must use https scheme, got: kubernetes/serviceaccount"
        );
        assert_eq!(
            refuse("https://a?x=1", None, Some("h:1")),
            "issuer URL may not include a query, got: https://a?x=1"
        );
        assert_eq!(
            refuse("https://a#frag", None, Some("h:1")),
            "issuer URL may not include a fragment, got: https://a#frag"
        );
        assert!(
            refuse(ISSUER, None, Some("https://h:1"))
                .starts_with("attempted to build jwks_uri from external address https://h:1")
        );
        assert_eq!(
            refuse(ISSUER, Some("http://h/keys"), None),
            "jwksURI requires https scheme, parsed as: http://h/keys"
        );
        assert_eq!(
            Discovery::new(ISSUER, None, Some("h:1"), &[]).unwrap_err(),
            DiscoveryError::NoKeys
        );
        // Upper-case schemes are schemes too.
        assert!(Discovery::new("HTTPS://a", None, Some("h:1"), &keys).is_ok());
    }
}
