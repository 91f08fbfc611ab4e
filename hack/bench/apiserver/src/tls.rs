//! TLS for the benchmark's client and for the bare server: the admin kubeconfig's CA and client
//! certificate, the apiserver's serving certificate, and a verifier that accepts any server
//! (only for timing `/readyz` while the server is still generating its CA).

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use base64::Engine as _;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// What the admin kubeconfig holds: the server's URL and the client's TLS configuration.
#[derive(Debug)]
pub(crate) struct Kubeconfig {
    /// The server, e.g. `https://127.0.0.1:6443`.
    pub(crate) server: String,
    /// Trusts the kubeconfig's CA, authenticates with its client certificate, offers h2 only.
    pub(crate) tls: Arc<rustls::ClientConfig>,
    /// Trusts the kubeconfig's CA, offers no client certificate, h2 only: for clients that
    /// authenticate with a bearer token.
    pub(crate) tls_without_certificate: Arc<rustls::ClientConfig>,
}

/// Reads a kubeconfig with embedded certificate data, as `genplane apiserver` writes it.
pub(crate) fn kubeconfig(path: &Path) -> anyhow::Result<Kubeconfig> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let config: serde_json::Value =
        serde_saphyr::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let field = |value: &serde_json::Value, name: &str| -> anyhow::Result<Vec<u8>> {
        let encoded = value[name]
            .as_str()
            .with_context(|| format!("{} has no {name}", path.display()))?;
        Ok(base64::engine::general_purpose::STANDARD.decode(encoded)?)
    };
    let cluster = &config["clusters"][0]["cluster"];
    let user = &config["users"][0]["user"];
    let server = cluster["server"]
        .as_str()
        .context("the kubeconfig has no server")?
        .to_owned();
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(&field(cluster, "certificate-authority-data")?) {
        roots.add(ca?)?;
    }
    let chain = CertificateDer::pem_slice_iter(&field(user, "client-certificate-data")?)
        .collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_slice(&field(user, "client-key-data")?)?;
    let roots = Arc::new(roots);
    let mut tls = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots.clone())
        .with_client_auth_cert(chain, key)?;
    tls.alpn_protocols = vec![b"h2".to_vec()];
    let mut without = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    without.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Kubeconfig {
        server,
        tls: Arc::new(tls),
        tls_without_certificate: Arc::new(without),
    })
}

/// A server configuration like the apiserver's: its serving certificate, client certificates
/// verified against `client_ca` but not required, h2 only.
pub(crate) fn server(
    cert: &Path,
    key: &Path,
    client_ca: &Path,
) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let chain = CertificateDer::pem_file_iter(cert)?.collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_file(key)?;
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_file_iter(client_ca)? {
        roots.add(ca?)?;
    }
    let verifier =
        rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
            .allow_unauthenticated()
            .build()?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

/// A client configuration that accepts any server certificate (signatures are still checked),
/// without a client certificate: for `/readyz`, which answers anonymous clients, while the
/// server's CA does not exist yet.
pub(crate) fn insecure() -> anyhow::Result<Arc<rustls::ClientConfig>> {
    let provider = provider();
    let verifier = AnyServer(provider.signature_verification_algorithms);
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(tls))
}

#[derive(Debug)]
struct AnyServer(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for AnyServer {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_schemes()
    }
}
