//! The HTTPS client of webhooks, shared by admission webhooks and CustomResourceDefinition
//! conversion webhooks: one client per CA bundle (HTTP/1.1 only, rustls with aws-lc-rs, the
//! bundle's roots or the system's), JSON POSTs with client-go's `?timeout=` query, and errors
//! worded as client-go words them (`Post "<url>": <cause>`, a Status body's message).
//!
//! # Answers
//!
//! An answer is read into one buffer ([`read_body`]), which the caller decodes and drops:
//! at most the buffer and the decoded value are held at once (the body was copied twice before,
//! so a 512 MiB answer took about three times that). Nothing larger than [`answer_limit`] of
//! the request is read: a webhook's answer is about the objects it was sent (an admission
//! review's patch rewrites at most the object, base64 adding a third; a conversion review
//! returns the objects it was sent, converted), so 3 MiB (the largest request body the API
//! server takes) plus four times the request is more than any real answer needs. Upstream's
//! client (client-go's `rest` client) reads the whole answer without a limit; only the text of
//! a non-JSON error is cut, at 2,048 bytes, as here. A larger answer fails the call
//! (`Post "<url>": the answer is larger than <n> bytes`), which the webhook's failure policy
//! decides on.
//!
//! # Serving certificates
//!
//! With a `caBundle`, the server's certificate is verified by webpki against the bundle's
//! certificates ([`CaBundleVerifier`]), with one addition Go's verifier makes: a self-signed CA
//! certificate of the bundle may be the server's own certificate (many guides set webhooks up
//! that way; webpki refuses a CA certificate as an end entity). Its name, validity and extended
//! key usage are checked as for any server certificate.

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{ACCEPT, CONTENT_TYPE};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};
use serde_json::Value;

/// How much of a non-JSON error body goes into a message, as client-go keeps.
const MAX_ERROR_BODY: usize = 2048;

/// The part of [`answer_limit`] that does not grow with the request: the largest request body
/// the API server takes (upstream's `MaxRequestBodyBytes`).
pub const ANSWER_FLOOR: usize = 3 * 1024 * 1024;

/// How many times the request an answer may be beyond [`ANSWER_FLOOR`].
pub const ANSWER_GROWTH: usize = 4;

/// The most of a webhook's answer to a request body of `sent` bytes that is read (see the
/// module docs).
pub fn answer_limit(sent: usize) -> usize {
    ANSWER_FLOOR.saturating_add(sent.saturating_mul(ANSWER_GROWTH))
}

/// Decodes a `caBundle`: base64 (as `[]byte` fields are in JSON) of PEM certificates, each
/// usable as a root of trust.
pub fn parse_ca_bundle(bundle: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = data_encoding::BASE64
        .decode(bundle.as_bytes())
        .map_err(|error| format!("caBundle is not base64: {error}"))?;
    let certificates = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| error.to_string())?;
    if certificates.is_empty() {
        return Err("unable to parse bytes as PEM block".to_owned());
    }
    let mut store = rustls::RootCertStore::empty();
    for certificate in &certificates {
        store
            .add(certificate.clone())
            .map_err(|error| error.to_string())?;
    }
    Ok(certificates)
}

/// A client certificate and its key, read from PEM and checked usable.
pub struct Identity {
    pem: String,
    certificates: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity").finish_non_exhaustive()
    }
}

impl Identity {
    /// Reads the certificates and the private key of `pem`.
    pub fn from_pem(pem: &str) -> Result<Self, String> {
        let certificates = CertificateDer::pem_slice_iter(pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        if certificates.is_empty() {
            return Err("no certificate in the client identity".to_owned());
        }
        let key = PrivateKeyDer::from_pem_slice(pem.as_bytes()).map_err(|e| e.to_string())?;
        provider()
            .key_provider
            .load_private_key(key.clone_key())
            .map_err(|e| e.to_string())?;
        Ok(Self {
            pem: pem.to_owned(),
            certificates,
            key,
        })
    }
}

/// The one crypto provider (aws-lc-rs).
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// One client: HTTP/1.1 only, rustls with aws-lc-rs, the system's roots or, with a `caBundle`
/// ([`parse_ca_bundle`]), its certificates through [`CaBundleVerifier`], presenting
/// `identity` (a client certificate) when one is given, and connecting to the address of
/// `overridden` for its name (a Service whose address is overridden: see
/// [`super::resolver`]), whose certificate is still checked against that name.
pub fn build_client(
    roots: Option<&[CertificateDer<'static>]>,
    identity: Option<Identity>,
    overridden: Option<(&str, std::net::SocketAddr)>,
) -> reqwest::Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder()
        .http1_only()
        .user_agent(concat!("genplane/", env!("CARGO_PKG_VERSION")));
    if let Some((name, address)) = overridden {
        builder = builder.resolve(name, address);
    }
    let builder = match (roots, identity) {
        (Some(roots), identity) => builder.tls_backend_preconfigured(tls_config(roots, identity)),
        (None, Some(identity)) => {
            builder.identity(reqwest::Identity::from_pem(identity.pem.as_bytes())?)
        }
        (None, None) => builder,
    };
    builder.build()
}

/// The TLS configuration of a client trusting `roots` (checked by [`parse_ca_bundle`]) through
/// [`CaBundleVerifier`], presenting `identity` (checked by [`Identity::from_pem`]).
fn tls_config(
    roots: &[CertificateDer<'static>],
    identity: Option<Identity>,
) -> rustls::ClientConfig {
    let provider = provider();
    let verifier = CaBundleVerifier::new(roots, provider.clone())
        .expect("invariant: parse_ca_bundle checked the roots");
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("invariant: aws-lc-rs supports the default protocol versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier));
    match identity {
        Some(identity) => builder
            .with_client_auth_cert(identity.certificates, identity.key)
            .expect("invariant: Identity::from_pem checked the key"),
        None => builder.with_no_client_auth(),
    }
}

/// What a client trusts in a server's certificate.
#[derive(Clone, Copy, Debug)]
pub enum Trust<'a> {
    /// The certificates of a `caBundle` ([`parse_ca_bundle`]), through [`CaBundleVerifier`].
    Bundle(&'a [CertificateDer<'static>]),
    /// The system's roots (the platform's verifier).
    System,
    /// Any certificate (`insecureSkipTLSVerify`): the handshake's signatures are still
    /// checked, the certificate's issuer and name are not.
    Anything,
}

/// The TLS configuration of a client of a server trusted as `trust`, presenting `identity`
/// when one is given (the aggregator's proxy to extension API servers).
pub fn server_tls(
    trust: Trust<'_>,
    identity: Option<Identity>,
) -> Result<rustls::ClientConfig, String> {
    let provider = provider();
    let verifier: Arc<dyn ServerCertVerifier> = match trust {
        Trust::Bundle(roots) => Arc::new(CaBundleVerifier::new(roots, provider.clone())?),
        Trust::System => Arc::new(
            rustls_platform_verifier::Verifier::new(provider.clone()).map_err(|e| e.to_string())?,
        ),
        Trust::Anything => Arc::new(genplane_component_base::tls::AnyCertificate::new(
            provider.clone(),
        )),
    };
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    Ok(match identity {
        Some(identity) => builder
            .with_client_auth_cert(identity.certificates, identity.key)
            .map_err(|e| e.to_string())?,
        None => builder.with_no_client_auth(),
    })
}

/// The verifier of a webhook's serving certificate against its `caBundle`: webpki's, which
/// also accepts, as Go's does, a self-signed CA certificate of the bundle as the server's own
/// certificate, when it is valid now, names the server and allows server authentication.
#[derive(Debug)]
pub struct CaBundleVerifier {
    webpki: Arc<rustls::client::WebPkiServerVerifier>,
    roots: Vec<CertificateDer<'static>>,
}

impl CaBundleVerifier {
    /// A verifier trusting `roots`, with `provider`'s signature algorithms.
    pub fn new(
        roots: &[CertificateDer<'static>],
        provider: Arc<rustls::crypto::CryptoProvider>,
    ) -> Result<Self, String> {
        let mut store = rustls::RootCertStore::empty();
        for root in roots {
            store.add(root.clone()).map_err(|e| e.to_string())?;
        }
        let webpki =
            rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(store), provider)
                .build()
                .map_err(|e| e.to_string())?;
        Ok(Self {
            webpki,
            roots: roots.to_vec(),
        })
    }

    /// Go's acceptance of a self-signed CA certificate of the bundle as the server's own.
    fn trusted_ca_as_server(
        &self,
        end_entity: &CertificateDer<'_>,
        server_name: &ServerName<'_>,
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        use x509_parser::prelude::FromDer as _;
        let invalid = |e: CertificateError| rustls::Error::InvalidCertificate(e);
        let (_, certificate) = x509_parser::certificate::X509Certificate::from_der(end_entity)
            .map_err(|_| invalid(CertificateError::BadEncoding))?;
        let at = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
        let at = x509_parser::time::ASN1Time::from_timestamp(at)
            .map_err(|_| invalid(CertificateError::Expired))?;
        if !certificate.validity().is_valid_at(at) {
            return Err(invalid(CertificateError::Expired));
        }
        if let Ok(Some(usage)) = certificate.extended_key_usage()
            && !usage.value.any
            && !usage.value.server_auth
        {
            return Err(invalid(CertificateError::InvalidPurpose));
        }
        let parsed = rustls::server::ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_name(&parsed, server_name)?;
        Ok(ServerCertVerified::assertion())
    }
}

impl ServerCertVerifier for CaBundleVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let verified = self.webpki.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        );
        match verified {
            Err(rustls::Error::InvalidCertificate(CertificateError::Other(other)))
                if matches!(
                    other.0.downcast_ref::<webpki::Error>(),
                    Some(webpki::Error::CaUsedAsEndEntity)
                ) && self
                    .roots
                    .iter()
                    .any(|root| root.as_ref() == end_entity.as_ref()) =>
            {
                self.trusted_ca_as_server(end_entity, server_name, now)
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// `base` with `?timeout=<timeout>`, as client-go tells the server how long it waits.
pub fn url_with_timeout(base: &reqwest::Url, timeout: Duration) -> reqwest::Url {
    let mut url = base.clone();
    url.set_query(Some(&format!(
        "timeout={}",
        genplane_apimachinery::duration::format(timeout)
    )));
    url
}

/// POSTs the JSON `body` (a review) to `url`, with the `Authorization` header `authorization`
/// when given; the response body (at most [`answer_limit`] of the request, [`read_body`]) on a
/// 2xx answer, else the error as client-go words it.
pub async fn post_json(
    client: &reqwest::Client,
    url: &reqwest::Url,
    body: Vec<u8>,
    timeout: Duration,
    authorization: Option<&str>,
) -> Result<Vec<u8>, String> {
    let limit = answer_limit(body.len());
    let describe = |error: reqwest::Error| describe_transport_error(url, &error);
    let mut request = client
        .post(url.clone())
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "application/json, */*");
    if let Some(authorization) = authorization {
        request = request.header(reqwest::header::AUTHORIZATION, authorization);
    }
    let response = request
        .timeout(timeout)
        .body(body)
        .send()
        .await
        .map_err(describe)?;
    let status = response.status();
    let text_plain = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/plain"));
    let body = read_body(response, limit)
        .await
        .map_err(|error| match error {
            BodyError::Read(error) => describe(error),
            too_large => format!("Post {:?}: {too_large}", url.as_str()),
        })?;
    if status.is_success() {
        Ok(body)
    } else {
        Err(status_error_message(status.as_u16(), &body, text_plain))
    }
}

/// Why an answer's body was not read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// It is larger than what may be read of it.
    #[error("the answer is larger than {0} bytes")]
    TooLarge(usize),
    /// Reading it failed.
    #[error(transparent)]
    Read(#[from] reqwest::Error),
}

/// Reads `response`'s body into one buffer, refusing one larger than `limit` bytes (by its
/// `Content-Length` before reading anything, else once more has come).
pub async fn read_body(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, BodyError> {
    let declared = response
        .content_length()
        .and_then(|n| usize::try_from(n).ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(BodyError::TooLarge(limit));
    }
    let mut body = Vec::with_capacity(declared.unwrap_or(0));
    while let Some(chunk) = response.chunk().await? {
        if body.len().saturating_add(chunk.len()) > limit {
            return Err(BodyError::TooLarge(limit));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// `Post "<url>": <cause>`, close to what Go's HTTP client says.
fn describe_transport_error(url: &reqwest::Url, error: &reqwest::Error) -> String {
    let cause = if error.is_timeout() {
        "context deadline exceeded (Client.Timeout exceeded while awaiting headers)".to_owned()
    } else {
        let mut causes: Vec<String> = Vec::new();
        let mut source = std::error::Error::source(error);
        while let Some(inner) = source {
            let text = inner.to_string();
            // hyper-util's "client error (Connect)" only wraps the cause that follows.
            if causes.last() != Some(&text) && !text.starts_with("client error (") {
                causes.push(text);
            }
            source = inner.source();
        }
        if causes.is_empty() {
            error.to_string()
        } else {
            causes.join(": ")
        }
    };
    format!("Post {:?}: {cause}", url.as_str())
}

/// The message client-go gives a non-2xx answer: a `Status` body's message, else a phrase per
/// status code.
fn status_error_message(code: u16, body: &[u8], text_plain: bool) -> String {
    if let Ok(status) = serde_json::from_slice::<Value>(body)
        && status.get("kind").and_then(Value::as_str) == Some("Status")
        && let Some(message) = status.get("message").and_then(Value::as_str)
        && !message.is_empty()
    {
        return message.to_owned();
    }
    let server_message = if text_plain {
        let text = String::from_utf8_lossy(body);
        let text = text.trim();
        if text.len() > MAX_ERROR_BODY {
            let mut end = MAX_ERROR_BODY;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            format!("{}...", &text[..end])
        } else {
            text.to_owned()
        }
    } else {
        "unknown".to_owned()
    };
    match code {
        409 => "the server reported a conflict".to_owned(),
        404 => "the server could not find the requested resource".to_owned(),
        400 => "the server rejected our request for an unknown reason".to_owned(),
        401 => "the server has asked for the client to provide credentials".to_owned(),
        403 | 415 => server_message,
        406 if server_message.is_empty() || server_message == "unknown" => {
            "the server was unable to respond with a content type that the client supports"
                .to_owned()
        }
        406 => server_message,
        405 => "the server does not allow this method on the requested resource".to_owned(),
        422 => "the server rejected our request due to an error in our request".to_owned(),
        503 => "the server is currently unable to handle the request".to_owned(),
        504 => "the server was unable to return a response in the time allotted, but may still be processing the request".to_owned(),
        429 => "the server has received too many requests and has asked us to try again later"
            .to_owned(),
        code if code >= 500 => format!(
            "an error on the server ({}) has prevented the request from succeeding", genplane_apimachinery::gofmt::Quoted(&server_message)
        ),
        code => format!(
            "the server responded with the status code {code} but did not return more information"
        ),
    }
}
