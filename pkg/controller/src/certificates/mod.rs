//! The CertificateSigningRequest controllers, by upstream's names:
//!
//! - `csrsigning` ([`signer`]): issues the certificates of approved requests for
//!   `kubernetes.io/kube-apiserver-client` and `kubernetes.io/legacy-unknown` with a CA of
//!   the controller-manager's flags ([`SigningConfig`]), or marks a request it refuses
//!   `Failed`;
//! - `csrcleaner` ([`cleaner`]): deletes requests past upstream's retention.
//!
//! [`authority`] builds and signs the certificates.

pub mod authority;
pub mod cleaner;
pub mod signer;

use std::path::PathBuf;
use std::time::Duration;

/// The default lifetime of issued certificates (`--cluster-signing-duration`, one year).
pub const DEFAULT_SIGNING_DURATION: Duration = Duration::from_secs(8760 * 3600);

/// A CA certificate and its key, as PEM files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaFiles {
    /// The certificate.
    pub cert: PathBuf,
    /// Its key.
    pub key: PathBuf,
}

/// What `csrsigning` signs with: the CA of each signer it serves, from
/// `--cluster-signing-cert-file`/`--cluster-signing-key-file` or the per-signer flags, and
/// the longest lifetime it issues.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SigningConfig {
    /// The CA of `kubernetes.io/kube-apiserver-client`, if it has one.
    pub kube_apiserver_client: Option<CaFiles>,
    /// The CA of `kubernetes.io/legacy-unknown`, if it has one.
    pub legacy_unknown: Option<CaFiles>,
    /// `--cluster-signing-duration`.
    pub duration: Duration,
}

impl Default for SigningConfig {
    fn default() -> Self {
        Self {
            kube_apiserver_client: None,
            legacy_unknown: None,
            duration: DEFAULT_SIGNING_DURATION,
        }
    }
}
