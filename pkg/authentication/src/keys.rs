//! Service-account keys: the private key that signs tokens
//! (`--service-account-signing-key-file`), the public keys that verify them
//! (`--service-account-key-file`, repeatable, plus the signing key's own public half), and the
//! key generated into the data directory when no signing key is given.
//!
//! Formats are upstream's (`k8s.io/client-go/util/keyutil`):
//! - a private key file holds an RSA key (PKCS#1 `RSA PRIVATE KEY` or PKCS#8 `PRIVATE KEY`) or
//!   an ECDSA P-256/P-384/P-521 key (SEC1 `EC PRIVATE KEY` or PKCS#8); other PEM blocks (such as
//!   `EC PARAMETERS`) are skipped and the first key block that parses wins;
//! - a public key file holds any number of PEM blocks, each a PKIX public key, a certificate
//!   (its public key), or a private key (its public half); other blocks are skipped and a file
//!   with no key at all is an error.
//!
//! Every key has a key id ([`key_id`]) as upstream's `keyIDFromPublicKey`: the unpadded
//! base64url SHA-256 of the PKIX (`SubjectPublicKeyInfo`) DER of the public key. Tokens carry
//! it in their `kid` header and the JWKS document lists it.
//!
//! Signing uses RS256 for RSA keys and ES256/ES384/ES512 by curve, as upstream. A generated key
//! is ECDSA P-256 by default ([`GeneratedKeyType`]): creating it takes about 0.1 ms where
//! RSA-2048 takes 250-800 ms with aws-lc-rs on the build machine, which would blow the start-up
//! budget of a fresh data directory.

use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{self, EcdsaKeyPair, KeyPair as _, UnparsedPublicKey};
use aws_lc_rs::{digest, rsa};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde::Serialize;
use x509_parser::prelude::FromDer as _;
use x509_parser::public_key::PublicKey as ParsedPublicKey;
use x509_parser::x509::SubjectPublicKeyInfo;

/// The file name of the signing key generated into the data directory.
pub const GENERATED_KEY_FILE: &str = "sa.key";

/// What went wrong with a key.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// A key file could not be read.
    #[error("failed to read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A generated key could not be written.
    #[error("failed to write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A key file is not valid PEM.
    #[error("invalid PEM data: {0}")]
    Pem(String),
    /// No PEM block holds a usable private key (upstream's words).
    #[error("data does not contain a valid RSA or ECDSA private key")]
    NoPrivateKey,
    /// No PEM block holds a usable public key (upstream's words).
    #[error("data does not contain any valid RSA or ECDSA public keys")]
    NoPublicKeys,
    /// A key file's content was refused; the path names the file.
    #[error("{}: {source}", path.display())]
    InFile {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: Box<KeyError>,
    },
    /// A public key of a kind genplane cannot use (not RSA, not ECDSA on P-256/P-384/P-521).
    #[error("unsupported public key: {0}")]
    Unsupported(&'static str),
    /// The crypto library failed to generate a key.
    #[error("failed to generate a service-account signing key")]
    Generate,
    /// The crypto library failed to sign.
    #[error("failed to sign the token")]
    Sign,
}

/// A JWS signature algorithm (RFC 7518) genplane signs or verifies with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Algorithm {
    /// RSASSA-PKCS1-v1_5 with SHA-256: what RSA keys sign with.
    RS256,
    /// RSASSA-PKCS1-v1_5 with SHA-384.
    RS384,
    /// RSASSA-PKCS1-v1_5 with SHA-512.
    RS512,
    /// RSASSA-PSS with SHA-256.
    PS256,
    /// RSASSA-PSS with SHA-384.
    PS384,
    /// RSASSA-PSS with SHA-512.
    PS512,
    /// ECDSA P-256 with SHA-256.
    ES256,
    /// ECDSA P-384 with SHA-384.
    ES384,
    /// ECDSA P-521 with SHA-512.
    ES512,
}

impl Algorithm {
    /// The JWS name (`RS256`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RS256 => "RS256",
            Self::RS384 => "RS384",
            Self::RS512 => "RS512",
            Self::PS256 => "PS256",
            Self::PS384 => "PS384",
            Self::PS512 => "PS512",
            Self::ES256 => "ES256",
            Self::ES384 => "ES384",
            Self::ES512 => "ES512",
        }
    }

    /// The algorithm of a JWS name, or `None` for names genplane does not verify (including
    /// `none` and the HMAC algorithms).
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "RS256" => Self::RS256,
            "RS384" => Self::RS384,
            "RS512" => Self::RS512,
            "PS256" => Self::PS256,
            "PS384" => Self::PS384,
            "PS512" => Self::PS512,
            "ES256" => Self::ES256,
            "ES384" => Self::ES384,
            "ES512" => Self::ES512,
            _ => return None,
        })
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An elliptic curve genplane supports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Curve {
    /// NIST P-256.
    P256,
    /// NIST P-384.
    P384,
    /// NIST P-521.
    P521,
}

impl Curve {
    const ALL: [Curve; 3] = [Curve::P256, Curve::P384, Curve::P521];

    /// The JWK `crv` name.
    pub fn name(self) -> &'static str {
        match self {
            Self::P256 => "P-256",
            Self::P384 => "P-384",
            Self::P521 => "P-521",
        }
    }

    /// The algorithm a key on this curve signs with.
    pub fn algorithm(self) -> Algorithm {
        match self {
            Self::P256 => Algorithm::ES256,
            Self::P384 => Algorithm::ES384,
            Self::P521 => Algorithm::ES512,
        }
    }

    /// The size in bytes of one coordinate.
    fn coordinate_len(self) -> usize {
        match self {
            Self::P256 => 32,
            Self::P384 => 48,
            Self::P521 => 66,
        }
    }

    fn signing(self) -> &'static signature::EcdsaSigningAlgorithm {
        match self {
            Self::P256 => &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            Self::P384 => &signature::ECDSA_P384_SHA384_FIXED_SIGNING,
            Self::P521 => &signature::ECDSA_P521_SHA512_FIXED_SIGNING,
        }
    }

    fn verification(self) -> &'static signature::EcdsaVerificationAlgorithm {
        match self {
            Self::P256 => &signature::ECDSA_P256_SHA256_FIXED,
            Self::P384 => &signature::ECDSA_P384_SHA384_FIXED,
            Self::P521 => &signature::ECDSA_P521_SHA512_FIXED,
        }
    }

    fn from_oid(oid: &x509_parser::der_parser::oid::Oid<'_>) -> Option<Self> {
        use x509_parser::oid_registry::{OID_EC_P256, OID_NIST_EC_P384, OID_NIST_EC_P521};
        if *oid == OID_EC_P256 {
            Some(Self::P256)
        } else if *oid == OID_NIST_EC_P384 {
            Some(Self::P384)
        } else if *oid == OID_NIST_EC_P521 {
            Some(Self::P521)
        } else {
            None
        }
    }
}

/// The key id of a public key given as PKIX `SubjectPublicKeyInfo` DER: the unpadded base64url
/// SHA-256 of those bytes (upstream's `keyIDFromPublicKey`).
pub fn key_id(spki_der: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(digest::digest(&digest::SHA256, spki_der))
}

#[derive(Clone, PartialEq, Eq)]
enum PublicKind {
    /// Modulus and exponent, big-endian without leading zeros.
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// The uncompressed point `04 || X || Y`.
    Ec { curve: Curve, point: Vec<u8> },
}

/// A public key that verifies service-account tokens.
#[derive(Clone, PartialEq, Eq)]
pub struct PublicKey {
    kind: PublicKind,
    spki: Vec<u8>,
    key_id: String,
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PublicKey")
            .field("algorithm", &self.algorithm())
            .field("key_id", &self.key_id)
            .finish()
    }
}

impl PublicKey {
    /// A public key from its PKIX `SubjectPublicKeyInfo` DER.
    pub fn from_spki_der(der: &[u8]) -> Result<Self, KeyError> {
        let (rest, spki) = SubjectPublicKeyInfo::from_der(der)
            .map_err(|_| KeyError::Unsupported("not a PKIX public key"))?;
        if !rest.is_empty() {
            return Err(KeyError::Unsupported("trailing data after the public key"));
        }
        let kind = match spki
            .parsed()
            .map_err(|_| KeyError::Unsupported("malformed public key"))?
        {
            ParsedPublicKey::RSA(rsa) => PublicKind::Rsa {
                n: strip_leading_zeros(rsa.modulus).to_vec(),
                e: strip_leading_zeros(rsa.exponent).to_vec(),
            },
            ParsedPublicKey::EC(point) => {
                let curve = spki
                    .algorithm
                    .parameters
                    .as_ref()
                    .and_then(|p| p.as_oid().ok())
                    .and_then(|oid| Curve::from_oid(&oid))
                    .ok_or(KeyError::Unsupported(
                        "elliptic curve must be P-256, P-384 or P-521",
                    ))?;
                let point = point.data().to_vec();
                if point.len() != 1 + 2 * curve.coordinate_len() || point[0] != 4 {
                    return Err(KeyError::Unsupported(
                        "elliptic curve point must be uncompressed",
                    ));
                }
                PublicKind::Ec { curve, point }
            }
            _ => return Err(KeyError::Unsupported("must be an RSA or ECDSA public key")),
        };
        Ok(Self {
            kind,
            key_id: key_id(der),
            spki: der.to_vec(),
        })
    }

    /// The key id (`kid`).
    pub fn key_id(&self) -> &str {
        &self.key_id
    }

    /// The PKIX `SubjectPublicKeyInfo` DER.
    pub fn spki_der(&self) -> &[u8] {
        &self.spki
    }

    /// The algorithm this key's tokens are signed with, as the JWKS document names it: RS256 for
    /// RSA keys, ES256/ES384/ES512 by curve.
    pub fn algorithm(&self) -> Algorithm {
        match &self.kind {
            PublicKind::Rsa { .. } => Algorithm::RS256,
            PublicKind::Ec { curve, .. } => curve.algorithm(),
        }
    }

    /// The key as a `PUBLIC KEY` PEM block.
    pub fn to_pem(&self) -> String {
        pem_encode("PUBLIC KEY", &self.spki)
    }

    /// The key as a JSON Web Key, as upstream's JWKS document lists it.
    pub fn to_jwk(&self) -> Jwk {
        let mut jwk = Jwk {
            use_: "sig",
            kty: "RSA",
            kid: self.key_id.clone(),
            crv: None,
            alg: self.algorithm().as_str(),
            x: None,
            y: None,
            n: None,
            e: None,
        };
        match &self.kind {
            PublicKind::Rsa { n, e } => {
                jwk.n = Some(URL_SAFE_NO_PAD.encode(n));
                jwk.e = Some(URL_SAFE_NO_PAD.encode(e));
            }
            PublicKind::Ec { curve, point } => {
                let len = curve.coordinate_len();
                jwk.kty = "EC";
                jwk.crv = Some(curve.name());
                jwk.x = Some(URL_SAFE_NO_PAD.encode(&point[1..=len]));
                jwk.y = Some(URL_SAFE_NO_PAD.encode(&point[1 + len..]));
            }
        }
        jwk
    }

    /// Whether `signature` is this key's signature of `message` with `algorithm`. An algorithm
    /// that does not fit the key (an ES256 signature checked against an RSA key, or ES384
    /// against a P-256 key) never verifies.
    pub fn verify(&self, algorithm: Algorithm, message: &[u8], signature: &[u8]) -> bool {
        let params: &'static dyn signature::VerificationAlgorithm = match (&self.kind, algorithm) {
            (PublicKind::Rsa { .. }, Algorithm::RS256) => &signature::RSA_PKCS1_2048_8192_SHA256,
            (PublicKind::Rsa { .. }, Algorithm::RS384) => &signature::RSA_PKCS1_2048_8192_SHA384,
            (PublicKind::Rsa { .. }, Algorithm::RS512) => &signature::RSA_PKCS1_2048_8192_SHA512,
            (PublicKind::Rsa { .. }, Algorithm::PS256) => &signature::RSA_PSS_2048_8192_SHA256,
            (PublicKind::Rsa { .. }, Algorithm::PS384) => &signature::RSA_PSS_2048_8192_SHA384,
            (PublicKind::Rsa { .. }, Algorithm::PS512) => &signature::RSA_PSS_2048_8192_SHA512,
            (PublicKind::Ec { curve, .. }, alg) if curve.algorithm() == alg => curve.verification(),
            _ => return false,
        };
        UnparsedPublicKey::new(params, &self.spki)
            .verify(message, signature)
            .is_ok()
    }
}

/// A JSON Web Key (RFC 7517) of a public key, serialized with upstream's field order (go-jose's):
/// `use`, `kty`, `kid`, `crv`, `alg`, `x`, `y`, `n`, `e`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Jwk {
    /// Always `sig`.
    #[serde(rename = "use")]
    pub use_: &'static str,
    /// `RSA` or `EC`.
    pub kty: &'static str,
    /// The key id.
    pub kid: String,
    /// The curve of an EC key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crv: Option<&'static str>,
    /// The signing algorithm.
    pub alg: &'static str,
    /// The X coordinate of an EC key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub x: Option<String>,
    /// The Y coordinate of an EC key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub y: Option<String>,
    /// The modulus of an RSA key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n: Option<String>,
    /// The public exponent of an RSA key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub e: Option<String>,
}

enum PrivateKind {
    Rsa(rsa::KeyPair),
    Ec(EcdsaKeyPair, Curve),
}

/// The private key that signs service-account tokens.
pub struct SigningKey {
    kind: PrivateKind,
    public: PublicKey,
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKey")
            .field("algorithm", &self.algorithm())
            .field("key_id", &self.public.key_id)
            .finish_non_exhaustive()
    }
}

/// The kind of key genplane generates when no signing key is given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GeneratedKeyType {
    /// ECDSA P-256 (ES256): fast to generate; the default.
    #[default]
    EcdsaP256,
    /// RSA 2048 (RS256): what kubeadm generates; 250-800 ms to generate.
    Rsa2048,
}

impl SigningKey {
    /// The first private key in PEM `data`.
    pub fn from_pem(data: &[u8]) -> Result<Self, KeyError> {
        for block in pem_blocks(data)? {
            let key = match block.label.as_str() {
                "RSA PRIVATE KEY" => rsa::KeyPair::from_der(&block.contents)
                    .ok()
                    .map(PrivateKind::Rsa),
                "EC PRIVATE KEY" => ec_key_pair(&block.contents),
                "PRIVATE KEY" => rsa::KeyPair::from_pkcs8(&block.contents)
                    .ok()
                    .map(PrivateKind::Rsa)
                    .or_else(|| ec_key_pair(&block.contents)),
                _ => None,
            };
            if let Some(kind) = key {
                return Self::new(kind);
            }
        }
        Err(KeyError::NoPrivateKey)
    }

    /// The first private key in the PEM file at `path`.
    pub fn from_file(path: &Path) -> Result<Self, KeyError> {
        let data = read(path)?;
        Self::from_pem(&data).map_err(|e| in_file(path, e))
    }

    /// A new random key.
    pub fn generate(key_type: GeneratedKeyType) -> Result<Self, KeyError> {
        let kind = match key_type {
            GeneratedKeyType::EcdsaP256 => PrivateKind::Ec(
                EcdsaKeyPair::generate(Curve::P256.signing()).map_err(|_| KeyError::Generate)?,
                Curve::P256,
            ),
            GeneratedKeyType::Rsa2048 => PrivateKind::Rsa(
                rsa::KeyPair::generate(rsa::KeySize::Rsa2048).map_err(|_| KeyError::Generate)?,
            ),
        };
        Self::new(kind)
    }

    /// The key in the file at `path` when it exists; otherwise a new key of `key_type`,
    /// written there (PKCS#8 PEM, mode 0600, atomically) so that a restart reuses it. The
    /// boolean says whether the key was generated.
    pub fn load_or_generate(
        path: &Path,
        key_type: GeneratedKeyType,
    ) -> Result<(Self, bool), KeyError> {
        match std::fs::read(path) {
            Ok(data) => Ok((Self::from_pem(&data).map_err(|e| in_file(path, e))?, false)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let key = Self::generate(key_type)?;
                write_private(path, key.to_pkcs8_pem()?.as_bytes())?;
                Ok((key, true))
            }
            Err(source) => Err(KeyError::Read {
                path: path.to_owned(),
                source,
            }),
        }
    }

    fn new(kind: PrivateKind) -> Result<Self, KeyError> {
        let spki = match &kind {
            PrivateKind::Rsa(pair) => pair.public_key().as_der(),
            PrivateKind::Ec(pair, _) => pair.public_key().as_der(),
        }
        .map_err(|_| KeyError::Unsupported("public half cannot be encoded"))?;
        let public = PublicKey::from_spki_der(spki.as_ref())?;
        Ok(Self { kind, public })
    }

    /// The key as a PKCS#8 `PRIVATE KEY` PEM block.
    pub fn to_pkcs8_pem(&self) -> Result<String, KeyError> {
        let der = match &self.kind {
            PrivateKind::Rsa(pair) => AsDer::<aws_lc_rs::encoding::Pkcs8V1Der<'_>>::as_der(pair)
                .map(|d| d.as_ref().to_vec()),
            PrivateKind::Ec(pair, _) => pair.to_pkcs8v1().map(|d| d.as_ref().to_vec()),
        }
        .map_err(|_| KeyError::Generate)?;
        Ok(pem_encode("PRIVATE KEY", &der))
    }

    /// The public half.
    pub fn public_key(&self) -> &PublicKey {
        &self.public
    }

    /// The key id (`kid`) of the public half.
    pub fn key_id(&self) -> &str {
        &self.public.key_id
    }

    /// The algorithm this key signs with.
    pub fn algorithm(&self) -> Algorithm {
        match &self.kind {
            PrivateKind::Rsa(_) => Algorithm::RS256,
            PrivateKind::Ec(_, curve) => curve.algorithm(),
        }
    }

    /// The signature of `message` with [`Self::algorithm`], in JWS form (ECDSA as `r || s`).
    pub fn sign(&self, message: &[u8]) -> Result<Vec<u8>, KeyError> {
        let rng = SystemRandom::new();
        match &self.kind {
            PrivateKind::Rsa(pair) => {
                let mut signature = vec![0; pair.public_modulus_len()];
                pair.sign(&signature::RSA_PKCS1_SHA256, &rng, message, &mut signature)
                    .map_err(|_| KeyError::Sign)?;
                Ok(signature)
            }
            PrivateKind::Ec(pair, _) => pair
                .sign(&rng, message)
                .map(|s| s.as_ref().to_vec())
                .map_err(|_| KeyError::Sign),
        }
    }
}

/// The public keys in PEM `data` (upstream's `ParsePublicKeysPEM`): every block that is a PKIX
/// public key, a certificate, or a private key (its public half), in order.
pub fn public_keys_from_pem(data: &[u8]) -> Result<Vec<PublicKey>, KeyError> {
    let mut keys = Vec::new();
    for block in pem_blocks(data)? {
        if let Some(kind) = rsa::KeyPair::from_der(&block.contents)
            .or_else(|_| rsa::KeyPair::from_pkcs8(&block.contents))
            .ok()
            .map(PrivateKind::Rsa)
            .or_else(|| ec_key_pair(&block.contents))
        {
            keys.push(SigningKey::new(kind)?.public);
        } else if let Ok(key) = PublicKey::from_spki_der(&block.contents) {
            keys.push(key);
        } else if let Ok((_, cert)) = x509_parser::parse_x509_certificate(&block.contents)
            && let Ok(key) = PublicKey::from_spki_der(cert.public_key().raw)
        {
            keys.push(key);
        }
    }
    if keys.is_empty() {
        return Err(KeyError::NoPublicKeys);
    }
    Ok(keys)
}

/// The public keys in the PEM file at `path` (one `--service-account-key-file`).
pub fn public_keys_from_file(path: &Path) -> Result<Vec<PublicKey>, KeyError> {
    let data = read(path)?;
    public_keys_from_pem(&data).map_err(|e| in_file(path, e))
}

/// The keys that verify tokens: those of every `--service-account-key-file` followed by the
/// signing key's public half, each once (by PKIX DER).
pub fn verification_keys(
    key_files: impl IntoIterator<Item = PublicKey>,
    signing_key: Option<&SigningKey>,
) -> Vec<PublicKey> {
    let mut keys: Vec<PublicKey> = Vec::new();
    for key in key_files
        .into_iter()
        .chain(signing_key.map(|k| k.public.clone()))
    {
        if !keys.iter().any(|k| k.spki == key.spki) {
            keys.push(key);
        }
    }
    keys
}

fn ec_key_pair(der: &[u8]) -> Option<PrivateKind> {
    Curve::ALL.into_iter().find_map(|curve| {
        EcdsaKeyPair::from_private_key_der(curve.signing(), der)
            .ok()
            .map(|pair| PrivateKind::Ec(pair, curve))
    })
}

fn strip_leading_zeros(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|&b| b != 0)
        .unwrap_or(bytes.len().saturating_sub(1));
    &bytes[start..]
}

fn pem_blocks(data: &[u8]) -> Result<Vec<x509_parser::pem::Pem>, KeyError> {
    x509_parser::pem::Pem::iter_from_buffer(data)
        .map(|block| block.map_err(|e| KeyError::Pem(e.to_string())))
        .collect()
}

/// `der` as a PEM block labelled `label` (64 base64 characters a line).
pub fn pem_encode(label: &str, der: &[u8]) -> String {
    let body = STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in body.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).expect("invariant: base64 is ASCII"));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

fn read(path: &Path) -> Result<Vec<u8>, KeyError> {
    std::fs::read(path).map_err(|source| KeyError::Read {
        path: path.to_owned(),
        source,
    })
}

fn in_file(path: &Path, error: KeyError) -> KeyError {
    KeyError::InFile {
        path: path.to_owned(),
        source: Box::new(error),
    }
}

/// Writes `data` to `path` readable by the owner only, through a temporary file renamed into
/// place so that a crash never leaves a half-written key.
fn write_private(path: &Path, data: &[u8]) -> Result<(), KeyError> {
    let error = |source| KeyError::Write {
        path: path.to_owned(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(error)?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&tmp).map_err(error)?;
    file.write_all(data).map_err(error)?;
    file.sync_all().map_err(error)?;
    drop(file);
    std::fs::rename(&tmp, path).map_err(error)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
        && let Ok(dir) = std::fs::File::open(dir)
    {
        // Best effort: make the rename durable.
        let _ = dir.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const RSA_PKCS1: &str = include_str!("../testdata/rsa2048-pkcs1.pem");
    const RSA_PKCS8: &str = include_str!("../testdata/rsa2048-pkcs8.pem");
    const RSA_PUBLIC: &str = include_str!("../testdata/rsa2048-public.pem");
    const P256_SEC1: &str = include_str!("../testdata/p256-sec1.pem");
    const P256_WITH_PARAMS: &str = include_str!("../testdata/p256-with-params.pem");
    const P384_PKCS8: &str = include_str!("../testdata/p384-pkcs8.pem");
    const P521_SEC1: &str = include_str!("../testdata/p521-sec1.pem");

    /// Key ids computed independently with
    /// `openssl pkey -pubout -outform DER | openssl dgst -sha256 -binary | basenc --base64url`.
    const RSA_KID: &str = "0ma_0Yeh4HCNvTnWRGPm4fBhbJLHqCDfvsHv5_qKgaE";
    const P256_KID: &str = "zQJbkfBAgdECK4v3c31QB-Nz99sC4pW0QQCCkjPJSNo";
    const P384_KID: &str = "eJYcnf0S_t4D6y5hqQdeNyxU02jOK6dl_dN_9TFXLCY";
    const P521_KID: &str = "zq8yoKeah1RyWcZt7D9PvOlxEi52WHVQegoPhIGo_UQ";

    #[test]
    fn private_keys_load_in_every_upstream_format_with_openssls_key_ids() {
        for (pem, kid, alg) in [
            (RSA_PKCS1, RSA_KID, Algorithm::RS256),
            (RSA_PKCS8, RSA_KID, Algorithm::RS256),
            (P256_SEC1, P256_KID, Algorithm::ES256),
            (P384_PKCS8, P384_KID, Algorithm::ES384),
            (P521_SEC1, P521_KID, Algorithm::ES512),
        ] {
            let key = SigningKey::from_pem(pem.as_bytes()).unwrap();
            assert_eq!(key.key_id(), kid);
            assert_eq!(key.algorithm(), alg);
            assert_eq!(key.public_key().algorithm(), alg);
            let signature = key.sign(b"message").unwrap();
            assert!(key.public_key().verify(alg, b"message", &signature));
            assert!(!key.public_key().verify(alg, b"massage", &signature));
        }
        // `openssl ecparam -genkey` writes an EC PARAMETERS block first: skipped.
        let key = SigningKey::from_pem(P256_WITH_PARAMS.as_bytes()).unwrap();
        assert_eq!(key.algorithm(), Algorithm::ES256);
    }

    #[test]
    fn files_without_a_private_key_are_refused_with_upstreams_words() {
        for data in [RSA_PUBLIC, "", "not pem at all\n"] {
            let err = SigningKey::from_pem(data.as_bytes()).unwrap_err();
            assert_eq!(
                err.to_string(),
                "data does not contain a valid RSA or ECDSA private key"
            );
        }
        let broken = "-----BEGIN PRIVATE KEY-----\n!!!\n-----END PRIVATE KEY-----\n";
        assert!(matches!(
            SigningKey::from_pem(broken.as_bytes()),
            Err(KeyError::Pem(_))
        ));
    }

    #[test]
    fn public_key_files_take_public_keys_certificates_and_private_keys() {
        let cert_key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["x".to_owned()])
            .unwrap()
            .self_signed(&cert_key)
            .unwrap();
        let bundle = format!("{RSA_PUBLIC}{P256_WITH_PARAMS}{}{P384_PKCS8}", cert.pem());
        let keys = public_keys_from_pem(bundle.as_bytes()).unwrap();
        let kids: Vec<&str> = keys.iter().map(PublicKey::key_id).collect();
        let cert_kid = key_id(&rcgen::PublicKeyData::subject_public_key_info(&cert_key));
        assert_eq!(kids.len(), 4);
        assert_eq!(kids[0], RSA_KID);
        assert_eq!(kids[2], cert_kid);
        assert_eq!(kids[3], P384_KID);
        let err = public_keys_from_pem(b"nothing here").unwrap_err();
        assert_eq!(
            err.to_string(),
            "data does not contain any valid RSA or ECDSA public keys"
        );
    }

    #[test]
    fn verification_keys_hold_each_key_once() {
        let signing = SigningKey::from_pem(RSA_PKCS1.as_bytes()).unwrap();
        let files = public_keys_from_pem(format!("{RSA_PUBLIC}{P256_SEC1}").as_bytes()).unwrap();
        let keys = verification_keys(files, Some(&signing));
        let kids: Vec<&str> = keys.iter().map(PublicKey::key_id).collect();
        assert_eq!(kids, [RSA_KID, P256_KID]);
        let keys = verification_keys(Vec::new(), Some(&signing));
        assert_eq!(keys.len(), 1);
    }

    #[test]
    fn signatures_do_not_verify_under_other_keys_or_algorithms() {
        let rsa = SigningKey::from_pem(RSA_PKCS1.as_bytes()).unwrap();
        let p256 = SigningKey::from_pem(P256_SEC1.as_bytes()).unwrap();
        let signature = p256.sign(b"m").unwrap();
        assert!(p256.public_key().verify(Algorithm::ES256, b"m", &signature));
        assert!(!p256.public_key().verify(Algorithm::ES384, b"m", &signature));
        assert!(!rsa.public_key().verify(Algorithm::ES256, b"m", &signature));
        let signature = rsa.sign(b"m").unwrap();
        assert!(!rsa.public_key().verify(Algorithm::RS384, b"m", &signature));
        assert!(!p256.public_key().verify(Algorithm::RS256, b"m", &signature));
    }

    #[test]
    fn jwks_entries_have_upstreams_shape() {
        let rsa = SigningKey::from_pem(RSA_PKCS1.as_bytes()).unwrap();
        let json = serde_json::to_string(&rsa.public_key().to_jwk()).unwrap();
        assert!(
            json.starts_with(&format!(
                r#"{{"use":"sig","kty":"RSA","kid":"{RSA_KID}","alg":"RS256","n":""#
            )),
            "{json}"
        );
        assert!(json.ends_with(r#","e":"AQAB"}"#), "{json}");
        let n = serde_json::from_str::<serde_json::Value>(&json).unwrap()["n"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(URL_SAFE_NO_PAD.decode(n).unwrap().len(), 256);

        let p521 = SigningKey::from_pem(P521_SEC1.as_bytes()).unwrap();
        let jwk = serde_json::to_value(p521.public_key().to_jwk()).unwrap();
        let keys: Vec<&str> = jwk
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys.len(), 7);
        assert_eq!(jwk["kty"], "EC");
        assert_eq!(jwk["crv"], "P-521");
        assert_eq!(jwk["alg"], "ES512");
        for coordinate in ["x", "y"] {
            let bytes = URL_SAFE_NO_PAD
                .decode(jwk[coordinate].as_str().unwrap())
                .unwrap();
            assert_eq!(bytes.len(), 66, "{coordinate} is padded to the curve size");
        }
    }

    #[test]
    fn generated_keys_are_written_once_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pki").join(GENERATED_KEY_FILE);
        let (first, generated) =
            SigningKey::load_or_generate(&path, GeneratedKeyType::default()).unwrap();
        assert!(generated);
        assert_eq!(first.algorithm(), Algorithm::ES256);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let (second, generated) =
            SigningKey::load_or_generate(&path, GeneratedKeyType::default()).unwrap();
        assert!(!generated);
        assert_eq!(second.key_id(), first.key_id());
        // A key written by genplane is readable as a --service-account-key-file too.
        let public = public_keys_from_file(&path).unwrap();
        assert_eq!(public[0].key_id(), first.key_id());
        // An independent computation of the key id over the PEM genplane wrote.
        assert_eq!(
            key_id(public[0].spki_der()),
            key_id(&pem_der(&first.public_key().to_pem()))
        );
    }

    #[test]
    fn rsa_keys_can_be_generated_and_round_trip_through_pkcs8() {
        let key = SigningKey::generate(GeneratedKeyType::Rsa2048).unwrap();
        let again = SigningKey::from_pem(key.to_pkcs8_pem().unwrap().as_bytes()).unwrap();
        assert_eq!(again.key_id(), key.key_id());
        assert_eq!(again.algorithm(), Algorithm::RS256);
    }

    #[test]
    fn unreadable_and_unparsable_files_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.key");
        let err = SigningKey::from_file(&missing).unwrap_err();
        assert!(matches!(err, KeyError::Read { .. }));
        assert!(err.to_string().contains("missing.key"), "{err}");
        let garbage = dir.path().join("garbage.key");
        std::fs::write(&garbage, "hello").unwrap();
        let err = SigningKey::load_or_generate(&garbage, GeneratedKeyType::default()).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "{}: data does not contain a valid RSA or ECDSA private key",
                garbage.display()
            )
        );
    }

    fn pem_der(pem: &str) -> Vec<u8> {
        let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        STANDARD.decode(body).unwrap()
    }
}
