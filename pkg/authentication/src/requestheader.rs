//! Request-header authentication, as upstream's `requestheader` authenticator: a front proxy
//! (an aggregating API server) that authenticated a user sends it on in headers
//! (`X-Remote-User`, `X-Remote-Group`, `X-Remote-Extra-<key>`), and this server believes them
//! only from a connection whose client certificate was issued by the front proxy's CA
//! (`--requestheader-client-ca-file`) to one of the allowed names
//! (`--requestheader-allowed-names`; any name when none is given).
//!
//! The connection's chain is verified against that CA separately from the client CA that makes
//! certificates users ([`ClientCertificates`]): a certificate of the front-proxy CA never names
//! a user by itself, and one of the client CA never makes headers believed.

use std::collections::BTreeMap;
use std::sync::Arc;

use http::header::HeaderMap;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::ClientCertVerifier;

use crate::UserInfo;

/// Why a CA for client certificates cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The CA file holds no certificate, or one rustls refuses.
    #[error("the CA certificates: {0}")]
    Ca(String),
}

/// Client certificates verified against one CA (bundle).
#[derive(Clone)]
pub struct ClientCertificates {
    verifier: Arc<dyn ClientCertVerifier>,
}

impl std::fmt::Debug for ClientCertificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientCertificates")
    }
}

impl ClientCertificates {
    /// Certificates issued by `roots`.
    pub fn new(roots: &[CertificateDer<'static>]) -> Result<Self, Error> {
        let mut store = rustls::RootCertStore::empty();
        for root in roots {
            store
                .add(root.clone())
                .map_err(|e| Error::Ca(e.to_string()))?;
        }
        if store.is_empty() {
            return Err(Error::Ca("no certificate".to_owned()));
        }
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(store),
            Arc::new(rustls::crypto::aws_lc_rs::default_provider()),
        )
        .build()
        .map_err(|e| Error::Ca(e.to_string()))?;
        Ok(Self { verifier })
    }

    /// Whether `chain` (DER, leaf first) was issued by these roots and is valid now.
    pub fn verifies(&self, chain: &[Vec<u8>]) -> bool {
        let Some((leaf, intermediates)) = chain.split_first() else {
            return false;
        };
        let leaf = CertificateDer::from(leaf.as_slice());
        let intermediates: Vec<CertificateDer<'_>> = intermediates
            .iter()
            .map(|c| CertificateDer::from(c.as_slice()))
            .collect();
        self.verifier
            .verify_client_cert(&leaf, &intermediates, UnixTime::now())
            .is_ok()
    }
}

/// The front proxies believed, and the headers they name the user in.
#[derive(Clone, Debug)]
pub struct RequestHeader {
    /// The front proxy's CA.
    pub proxies: ClientCertificates,
    /// The common names a front proxy's certificate may have; any when empty.
    pub allowed_names: Vec<String>,
    /// The headers naming the user, the first one set wins (lower case).
    pub username_headers: Vec<String>,
    /// The headers naming groups, every value of each (lower case).
    pub group_headers: Vec<String>,
    /// The prefixes of the headers of extra attributes (lower case): `<prefix><key>`.
    pub extra_prefixes: Vec<String>,
}

/// Upstream's usual header names, which `kube-apiserver` deployments and extension servers
/// configure: `X-Remote-User`, `X-Remote-Group`, `X-Remote-Extra-`.
pub const USERNAME_HEADER: &str = "x-remote-user";
/// See [`USERNAME_HEADER`].
pub const GROUP_HEADER: &str = "x-remote-group";
/// See [`USERNAME_HEADER`].
pub const EXTRA_PREFIX: &str = "x-remote-extra-";

/// An extra attribute's key from a header name (`X-Remote-Extra-<key>`,
/// `Impersonate-Extra-<key>`): percent-decoded, as Go's `url.PathUnescape`; a key that does not
/// decode is kept as it is, as upstream keeps it.
pub fn unescape_extra_key(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let Some(hex) = key
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            else {
                return key.to_owned();
            };
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| key.to_owned())
}

impl RequestHeader {
    /// Whether `chain` is a believed front proxy's: issued by its CA, its common name allowed.
    pub fn is_proxy(&self, chain: &[Vec<u8>]) -> bool {
        if !self.proxies.verifies(chain) {
            return false;
        }
        if self.allowed_names.is_empty() {
            return true;
        }
        let common_name = chain.first().and_then(|leaf| {
            let (_, certificate) = x509_parser::parse_x509_certificate(leaf).ok()?;
            let name = certificate
                .subject()
                .iter_common_name()
                .next()?
                .as_str()
                .ok()?
                .to_owned();
            Some(name)
        });
        common_name.is_some_and(|name| self.allowed_names.contains(&name))
    }

    /// The user the headers name, or `None` when no username header is set.
    pub fn user(&self, headers: &HeaderMap) -> Option<UserInfo> {
        let username = self.username_headers.iter().find_map(|name| {
            headers
                .get(name.as_str())
                .and_then(|v| v.to_str().ok())
                .filter(|v| !v.is_empty())
        })?;
        let mut groups = Vec::new();
        for name in &self.group_headers {
            for value in headers.get_all(name.as_str()) {
                if let Ok(value) = value.to_str() {
                    groups.push(value.to_owned());
                }
            }
        }
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, value) in headers {
            let name = name.as_str();
            let Some(key) = self
                .extra_prefixes
                .iter()
                .find_map(|prefix| name.strip_prefix(prefix.as_str()))
            else {
                continue;
            };
            if let Ok(value) = value.to_str() {
                extra
                    .entry(unescape_extra_key(key).to_lowercase())
                    .or_default()
                    .push(value.to_owned());
            }
        }
        let mut user = UserInfo::authenticated(username, groups);
        user.extra = extra;
        Some(user)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::HeaderValue;

    fn ca(
        name: &str,
    ) -> (
        rcgen::Issuer<'static, rcgen::KeyPair>,
        CertificateDer<'static>,
    ) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let cert = params.self_signed(&key).unwrap();
        (rcgen::Issuer::new(params, key), cert.der().clone())
    }

    fn client(issuer: &rcgen::Issuer<'static, rcgen::KeyPair>, name: &str) -> Vec<Vec<u8>> {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        vec![params.signed_by(&key, issuer).unwrap().der().to_vec()]
    }

    fn config(root: CertificateDer<'static>, allowed: &[&str]) -> RequestHeader {
        RequestHeader {
            proxies: ClientCertificates::new(&[root]).unwrap(),
            allowed_names: allowed.iter().map(|s| (*s).to_owned()).collect(),
            username_headers: vec![USERNAME_HEADER.to_owned()],
            group_headers: vec![GROUP_HEADER.to_owned()],
            extra_prefixes: vec![EXTRA_PREFIX.to_owned()],
        }
    }

    #[test]
    fn only_an_allowed_proxy_of_the_ca_is_believed() {
        let (proxy_ca, proxy_root) = ca("front-proxy-ca");
        let (client_ca, _) = ca("client-ca");
        let config = config(proxy_root.clone(), &["front-proxy-client"]);
        assert!(config.is_proxy(&client(&proxy_ca, "front-proxy-client")));
        assert!(!config.is_proxy(&client(&proxy_ca, "someone-else")));
        assert!(!config.is_proxy(&client(&client_ca, "front-proxy-client")));
        assert!(!config.is_proxy(&[]));
        let any = self::config(proxy_root, &[]);
        assert!(any.is_proxy(&client(&proxy_ca, "someone-else")));
    }

    #[test]
    fn the_user_is_read_from_the_headers() {
        let (_, root) = ca("front-proxy-ca");
        let config = config(root, &[]);
        let mut headers = HeaderMap::new();
        assert!(config.user(&headers).is_none());
        headers.insert("x-remote-user", HeaderValue::from_static("alice"));
        headers.append("x-remote-group", HeaderValue::from_static("devs"));
        headers.append("x-remote-group", HeaderValue::from_static("ops"));
        headers.append(
            "x-remote-extra-authentication.kubernetes.io%2fpod-name",
            HeaderValue::from_static("web-0"),
        );
        headers.append("x-remote-extra-scopes", HeaderValue::from_static("a"));
        headers.append("x-remote-extra-scopes", HeaderValue::from_static("b"));
        let user = config.user(&headers).unwrap();
        assert_eq!(user.username, "alice");
        assert_eq!(user.groups, ["devs", "ops", "system:authenticated"]);
        assert_eq!(
            user.extra,
            BTreeMap::from([
                (
                    "authentication.kubernetes.io/pod-name".to_owned(),
                    vec!["web-0".to_owned()]
                ),
                ("scopes".to_owned(), vec!["a".to_owned(), "b".to_owned()]),
            ])
        );
    }
}
