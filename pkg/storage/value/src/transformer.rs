//! Value transformers: how one resource's values are written to and read from the store.
//!
//! A [`Transformer`] is the ordered provider list of one `resources[]` entry of the
//! configuration. Writes use the first provider (and, for the encrypting ones, its first key);
//! reads pick the provider by the value's prefix and the key by the name that follows it, so a
//! key rotation (new key first, old key still listed) reads old values and writes new ones.
//!
//! The on-disk formats are kube-apiserver's, byte for byte:
//!
//! | provider | stored value |
//! |---|---|
//! | `identity` | the plain value |
//! | `aesgcm` | `k8s:enc:aesgcm:v1:<key>:` + 12-byte nonce + ciphertext + 16-byte tag; the storage key is the additional authenticated data |
//! | `aescbc` | `k8s:enc:aescbc:v1:<key>:` + 16-byte IV + PKCS#7-padded ciphertext |
//! | `secretbox` | `k8s:enc:secretbox:v1:<key>:` + 24-byte nonce + 16-byte Poly1305 tag + XSalsa20 ciphertext |

use std::fmt;

use aws_lc_rs::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};
use aws_lc_rs::cipher::{
    AES_128, AES_192, AES_256, DecryptingKey, DecryptionContext, EncryptingKey, EncryptionContext,
    UnboundCipherKey,
};
use aws_lc_rs::iv::FixedLength;
use crypto_secretbox::XSalsa20Poly1305;
use crypto_secretbox::aead::{AeadInPlace, KeyInit};
use genplane_storage::Bytes;

/// The prefix every encrypted value starts with; `identity` refuses to read such values.
pub const ENCRYPTED_PREFIX: &[u8] = b"k8s:enc:";

const GCM_NONCE: usize = 12;
const GCM_TAG: usize = 16;
const CBC_BLOCK: usize = 16;
const SECRETBOX_NONCE: usize = 24;
const SECRETBOX_TAG: usize = 16;

/// Why a value could not be transformed. The messages are kube-apiserver's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TransformError {
    /// The value is too short to hold what its provider puts before the ciphertext.
    #[error("the stored data was shorter than the required size")]
    TooShort,
    /// AES-GCM authentication failed: wrong key, tampered data, or data stored under another
    /// storage key.
    #[error("cipher: message authentication failed")]
    Authentication,
    /// AES-CBC data that is not whole blocks.
    #[error("the stored data is not a multiple of the block size")]
    NotBlockMultiple,
    /// AES-CBC data whose last byte is no valid padding length.
    #[error("invalid PKCS7 data (empty or not padded)")]
    InvalidPkcs7Data,
    /// AES-CBC data whose padding bytes are wrong (usually: the wrong key).
    #[error("invalid padding on input")]
    InvalidPkcs7Padding,
    /// Secretbox authentication failed (kube-apiserver's wording).
    #[error("output array was not large enough for encryption")]
    SecretboxOpen,
    /// The value names a key this provider does not have.
    #[error("no matching key was found for the provided {provider} transformer")]
    NoMatchingKey {
        /// `AES` or `Secretbox`.
        provider: &'static str,
    },
    /// No listed provider matches the value's prefix.
    #[error("no matching prefix found")]
    NoMatchingPrefix,
    /// Several providers matched the prefix and each failed.
    #[error("[{}]", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))]
    Several(Vec<TransformError>),
    /// The system's random number generator failed.
    #[error("unable to read sufficient random bytes")]
    Random,
    /// Encryption itself failed.
    #[error("encrypting the value failed")]
    Encrypt,
}

/// One key of an encrypting provider.
struct Named<K> {
    name: String,
    /// `<name>:`, what follows the provider prefix in a stored value.
    tag: Vec<u8>,
    key: K,
}

impl<K> Named<K> {
    fn new(name: &str, key: K) -> Self {
        Self {
            name: name.to_owned(),
            tag: format!("{name}:").into_bytes(),
            key,
        }
    }
}

struct CbcKey {
    bytes: Vec<u8>,
}

impl CbcKey {
    fn algorithm(&self) -> &'static aws_lc_rs::cipher::Algorithm {
        match self.bytes.len() {
            16 => &AES_128,
            24 => &AES_192,
            _ => &AES_256,
        }
    }
}

enum Provider {
    Identity,
    AesGcm(Vec<Named<LessSafeKey>>),
    AesCbc(Vec<Named<CbcKey>>),
    Secretbox(Vec<Named<XSalsa20Poly1305>>),
}

impl Provider {
    fn prefix(&self) -> &'static [u8] {
        match self {
            Provider::Identity => b"",
            Provider::AesGcm(_) => b"k8s:enc:aesgcm:v1:",
            Provider::AesCbc(_) => b"k8s:enc:aescbc:v1:",
            Provider::Secretbox(_) => b"k8s:enc:secretbox:v1:",
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Provider::Identity => "identity",
            Provider::AesGcm(_) => "aesgcm",
            Provider::AesCbc(_) => "aescbc",
            Provider::Secretbox(_) => "secretbox",
        }
    }

    fn key_names(&self) -> Vec<&str> {
        match self {
            Provider::Identity => Vec::new(),
            Provider::AesGcm(keys) => keys.iter().map(|k| k.name.as_str()).collect(),
            Provider::AesCbc(keys) => keys.iter().map(|k| k.name.as_str()).collect(),
            Provider::Secretbox(keys) => keys.iter().map(|k| k.name.as_str()).collect(),
        }
    }
}

/// What a key-building function refuses: a key of a size its cipher does not take.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("key {name:?}: {len} bytes is not a valid {provider} key size")]
pub struct KeySizeError {
    /// The key's name.
    pub name: String,
    /// The provider.
    pub provider: &'static str,
    /// The key's length in bytes.
    pub len: usize,
}

/// The ordered providers of one resource: the first writes, every one can read.
pub struct Transformer {
    providers: Vec<Provider>,
}

impl fmt::Debug for Transformer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Key names only: the secrets never appear in logs.
        let mut list = f.debug_list();
        for p in &self.providers {
            list.entry(&format_args!("{}{:?}", p.name(), p.key_names()));
        }
        list.finish()
    }
}

impl Default for Transformer {
    fn default() -> Self {
        Self::new()
    }
}

impl Transformer {
    /// A transformer with no providers yet; add them in order with the `with_*` methods.
    pub fn new() -> Self {
        Self {
            providers: Vec::new(),
        }
    }

    /// Adds `identity`: values stored as they are.
    pub fn with_identity(mut self) -> Self {
        self.providers.push(Provider::Identity);
        self
    }

    /// Adds `aesgcm` with `keys` (name, 16, 24 or 32 secret bytes), the first one writing.
    pub fn with_aesgcm<'a>(
        mut self,
        keys: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    ) -> Result<Self, KeySizeError> {
        let mut named = Vec::new();
        for (name, secret) in keys {
            let algorithm = match secret.len() {
                16 => &aead::AES_128_GCM,
                24 => &aead::AES_192_GCM,
                32 => &aead::AES_256_GCM,
                len => return Err(key_size(name, "aesgcm", len)),
            };
            let key = UnboundKey::new(algorithm, secret)
                .map_err(|_| key_size(name, "aesgcm", secret.len()))?;
            named.push(Named::new(name, LessSafeKey::new(key)));
        }
        self.providers.push(Provider::AesGcm(named));
        Ok(self)
    }

    /// Adds `aescbc` with `keys` (name, 16, 24 or 32 secret bytes), the first one writing.
    pub fn with_aescbc<'a>(
        mut self,
        keys: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    ) -> Result<Self, KeySizeError> {
        let mut named = Vec::new();
        for (name, secret) in keys {
            if ![16, 24, 32].contains(&secret.len()) {
                return Err(key_size(name, "aescbc", secret.len()));
            }
            named.push(Named::new(
                name,
                CbcKey {
                    bytes: secret.to_vec(),
                },
            ));
        }
        self.providers.push(Provider::AesCbc(named));
        Ok(self)
    }

    /// Adds `secretbox` with `keys` (name, 32 secret bytes), the first one writing.
    pub fn with_secretbox<'a>(
        mut self,
        keys: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    ) -> Result<Self, KeySizeError> {
        let mut named = Vec::new();
        for (name, secret) in keys {
            let cipher = XSalsa20Poly1305::new_from_slice(secret)
                .map_err(|_| key_size(name, "secretbox", secret.len()))?;
            named.push(Named::new(name, cipher));
        }
        self.providers.push(Provider::Secretbox(named));
        Ok(self)
    }

    /// Whether writes store values as they are (`identity` first, or no provider at all).
    pub fn writes_plaintext(&self) -> bool {
        matches!(self.providers.first(), None | Some(Provider::Identity))
    }

    /// The value to store for `data` under the storage key `key`.
    pub fn to_storage(&self, data: &Bytes, key: &str) -> Result<Bytes, TransformError> {
        let Some(first) = self.providers.first() else {
            return Ok(data.clone());
        };
        let mut out = first.prefix().to_vec();
        match first {
            Provider::Identity => return Ok(data.clone()),
            Provider::AesGcm(keys) => {
                let named = keys.first().ok_or(TransformError::Encrypt)?;
                out.extend_from_slice(&named.tag);
                gcm_seal(&named.key, data, key.as_bytes(), &mut out)?;
            }
            Provider::AesCbc(keys) => {
                let named = keys.first().ok_or(TransformError::Encrypt)?;
                out.extend_from_slice(&named.tag);
                cbc_seal(&named.key, data, &mut out)?;
            }
            Provider::Secretbox(keys) => {
                let named = keys.first().ok_or(TransformError::Encrypt)?;
                out.extend_from_slice(&named.tag);
                secretbox_seal(&named.key, data, &mut out)?;
            }
        }
        Ok(Bytes::from(out))
    }

    /// The value stored as `data` under the storage key `key`, as it was written.
    ///
    /// Providers are tried in order: the first whose prefix matches and which can read the
    /// value wins; `identity` reads anything that is not encrypted. When every matching
    /// provider fails, their errors are returned; when none matches, [`TransformError::NoMatchingPrefix`].
    pub fn from_storage(&self, data: &Bytes, key: &str) -> Result<Bytes, TransformError> {
        let mut errors = Vec::new();
        for provider in &self.providers {
            let Some(rest) = data.strip_prefix(provider.prefix()) else {
                continue;
            };
            let result = match provider {
                Provider::Identity => {
                    if data.starts_with(ENCRYPTED_PREFIX) {
                        // As upstream: identity's refusal lets the next providers try.
                        continue;
                    }
                    return Ok(data.clone());
                }
                Provider::AesGcm(keys) => open_with(keys, rest, "AES", |k, body| {
                    gcm_open(k, body, key.as_bytes())
                }),
                Provider::AesCbc(keys) => open_with(keys, rest, "AES", cbc_open),
                Provider::Secretbox(keys) => open_with(keys, rest, "Secretbox", secretbox_open),
            };
            match result {
                Ok(plain) => return Ok(Bytes::from(plain)),
                Err(e) => errors.push(e),
            }
        }
        match errors.len() {
            0 => Err(TransformError::NoMatchingPrefix),
            1 => Err(errors.remove(0)),
            _ => Err(TransformError::Several(errors)),
        }
    }
}

fn key_size(name: &str, provider: &'static str, len: usize) -> KeySizeError {
    KeySizeError {
        name: name.to_owned(),
        provider,
        len,
    }
}

/// Tries every key whose `<name>:` starts `rest`, in order, as upstream does.
fn open_with<K>(
    keys: &[Named<K>],
    rest: &[u8],
    provider: &'static str,
    open: impl Fn(&K, &[u8]) -> Result<Vec<u8>, TransformError>,
) -> Result<Vec<u8>, TransformError> {
    let mut errors = Vec::new();
    for named in keys {
        if let Some(body) = rest.strip_prefix(named.tag.as_slice()) {
            match open(&named.key, body) {
                Ok(plain) => return Ok(plain),
                Err(e) => errors.push(e),
            }
        }
    }
    match errors.len() {
        0 => Err(TransformError::NoMatchingKey { provider }),
        1 => Err(errors.remove(0)),
        _ => Err(TransformError::Several(errors)),
    }
}

fn random<const N: usize>() -> Result<[u8; N], TransformError> {
    let mut bytes = [0u8; N];
    aws_lc_rs::rand::fill(&mut bytes).map_err(|_| TransformError::Random)?;
    Ok(bytes)
}

fn gcm_seal(
    key: &LessSafeKey,
    data: &[u8],
    aad: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), TransformError> {
    let nonce = random::<GCM_NONCE>()?;
    out.reserve(GCM_NONCE + data.len() + GCM_TAG);
    out.extend_from_slice(&nonce);
    let start = out.len();
    out.extend_from_slice(data);
    let tag = key
        .seal_in_place_separate_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(aad),
            &mut out[start..],
        )
        .map_err(|_| TransformError::Encrypt)?;
    out.extend_from_slice(tag.as_ref());
    Ok(())
}

fn gcm_open(key: &LessSafeKey, body: &[u8], aad: &[u8]) -> Result<Vec<u8>, TransformError> {
    if body.len() < GCM_NONCE {
        return Err(TransformError::TooShort);
    }
    let (nonce, sealed) = body.split_at(GCM_NONCE);
    let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| TransformError::TooShort)?;
    let mut buffer = sealed.to_vec();
    let plain_len = key
        .open_in_place(nonce, Aad::from(aad), &mut buffer)
        .map_err(|_| TransformError::Authentication)?
        .len();
    buffer.truncate(plain_len);
    Ok(buffer)
}

fn cbc_seal(key: &CbcKey, data: &[u8], out: &mut Vec<u8>) -> Result<(), TransformError> {
    let iv = random::<CBC_BLOCK>()?;
    let padding = CBC_BLOCK - data.len() % CBC_BLOCK;
    out.reserve(CBC_BLOCK + data.len() + padding);
    out.extend_from_slice(&iv);
    let start = out.len();
    out.extend_from_slice(data);
    out.resize(out.len() + padding, padding as u8);
    let cipher = UnboundCipherKey::new(key.algorithm(), &key.bytes)
        .and_then(EncryptingKey::cbc)
        .map_err(|_| TransformError::Encrypt)?;
    cipher
        .less_safe_encrypt(
            &mut out[start..],
            EncryptionContext::Iv128(FixedLength::from(iv)),
        )
        .map_err(|_| TransformError::Encrypt)?;
    Ok(())
}

fn cbc_open(key: &CbcKey, body: &[u8]) -> Result<Vec<u8>, TransformError> {
    if body.len() < CBC_BLOCK {
        return Err(TransformError::TooShort);
    }
    let (iv, sealed) = body.split_at(CBC_BLOCK);
    if sealed.len() % CBC_BLOCK != 0 {
        return Err(TransformError::NotBlockMultiple);
    }
    if sealed.is_empty() {
        return Err(TransformError::InvalidPkcs7Data);
    }
    let iv: [u8; CBC_BLOCK] = iv.try_into().map_err(|_| TransformError::TooShort)?;
    let cipher = UnboundCipherKey::new(key.algorithm(), &key.bytes)
        .and_then(DecryptingKey::cbc)
        .map_err(|_| TransformError::Encrypt)?;
    let mut buffer = sealed.to_vec();
    cipher
        .decrypt(&mut buffer, DecryptionContext::Iv128(FixedLength::from(iv)))
        .map_err(|_| TransformError::InvalidPkcs7Data)?;
    let padding = usize::from(*buffer.last().ok_or(TransformError::InvalidPkcs7Data)?);
    if padding == 0 || padding > buffer.len() {
        return Err(TransformError::InvalidPkcs7Data);
    }
    let size = buffer.len() - padding;
    if buffer[size..].iter().any(|&b| usize::from(b) != padding) {
        return Err(TransformError::InvalidPkcs7Padding);
    }
    buffer.truncate(size);
    Ok(buffer)
}

fn secretbox_seal(
    key: &XSalsa20Poly1305,
    data: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), TransformError> {
    let nonce = random::<SECRETBOX_NONCE>()?;
    out.reserve(SECRETBOX_NONCE + SECRETBOX_TAG + data.len());
    out.extend_from_slice(&nonce);
    let tag_at = out.len();
    out.extend_from_slice(&[0u8; SECRETBOX_TAG]);
    let start = out.len();
    out.extend_from_slice(data);
    let tag = key
        .encrypt_in_place_detached((&nonce).into(), b"", &mut out[start..])
        .map_err(|_| TransformError::Encrypt)?;
    // NaCl's layout: the tag before the ciphertext.
    out[tag_at..start].copy_from_slice(&tag);
    Ok(())
}

fn secretbox_open(key: &XSalsa20Poly1305, body: &[u8]) -> Result<Vec<u8>, TransformError> {
    if body.len() < SECRETBOX_NONCE + SECRETBOX_TAG {
        return Err(TransformError::TooShort);
    }
    let (nonce, rest) = body.split_at(SECRETBOX_NONCE);
    let (tag, sealed) = rest.split_at(SECRETBOX_TAG);
    let nonce: [u8; SECRETBOX_NONCE] = nonce.try_into().map_err(|_| TransformError::TooShort)?;
    let tag: [u8; SECRETBOX_TAG] = tag.try_into().map_err(|_| TransformError::TooShort)?;
    let mut buffer = sealed.to_vec();
    key.decrypt_in_place_detached((&nonce).into(), b"", &mut buffer, (&tag).into())
        .map_err(|_| TransformError::SecretboxOpen)?;
    Ok(buffer)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "/registry/secrets/default/s1";
    const PLAIN: &str = r#"{"kind":"Secret","data":{"password":"aHVudGVyMg=="}}"#;
    const K16: &[u8] = b"0123456789abcdef";
    const K24: &[u8] = b"0123456789abcdef01234567";
    const K32: &[u8] = b"0123456789abcdef0123456789abcdef";
    const OTHER32: &[u8] = b"fedcba9876543210fedcba9876543210";

    fn plain() -> Bytes {
        Bytes::from_static(PLAIN.as_bytes())
    }

    fn gcm(keys: &[(&'static str, &'static [u8])]) -> Transformer {
        Transformer::new()
            .with_aesgcm(keys.iter().copied())
            .unwrap()
    }

    fn cbc(keys: &[(&'static str, &'static [u8])]) -> Transformer {
        Transformer::new()
            .with_aescbc(keys.iter().copied())
            .unwrap()
    }

    fn secretbox(keys: &[(&'static str, &'static [u8])]) -> Transformer {
        Transformer::new()
            .with_secretbox(keys.iter().copied())
            .unwrap()
    }

    fn contains(haystack: &[u8], needle: &[u8]) -> bool {
        haystack.windows(needle.len()).any(|w| w == needle)
    }

    #[test]
    fn aesgcm_round_trips_with_every_key_size_in_upstreams_format() {
        for key in [K16, K24, K32] {
            let t = gcm(&[("key1", key)]);
            let stored = t.to_storage(&plain(), KEY).unwrap();
            let body = stored
                .strip_prefix(b"k8s:enc:aesgcm:v1:key1:".as_slice())
                .unwrap();
            assert_eq!(body.len(), GCM_NONCE + PLAIN.len() + GCM_TAG);
            assert!(!contains(&stored, b"Secret"));
            assert_eq!(t.from_storage(&stored, KEY).unwrap(), plain());
        }
    }

    #[test]
    fn aesgcm_uses_a_fresh_nonce_per_write() {
        let t = gcm(&[("key1", K32)]);
        assert_ne!(
            t.to_storage(&plain(), KEY).unwrap(),
            t.to_storage(&plain(), KEY).unwrap()
        );
    }

    #[test]
    fn aesgcm_binds_the_value_to_its_storage_key() {
        let t = gcm(&[("key1", K32)]);
        let stored = t.to_storage(&plain(), KEY).unwrap();
        assert_eq!(
            t.from_storage(&stored, "/registry/secrets/default/other"),
            Err(TransformError::Authentication),
            "a value copied to another key must not read"
        );
    }

    #[test]
    fn aesgcm_opens_a_value_sealed_independently_with_the_key_as_aad() {
        // Built by hand from the format: prefix, nonce, AES-GCM(plain, aad = storage key).
        let nonce = [7u8; GCM_NONCE];
        let key = LessSafeKey::new(UnboundKey::new(&aead::AES_256_GCM, K32).unwrap());
        let mut sealed = PLAIN.as_bytes().to_vec();
        key.seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(KEY.as_bytes()),
            &mut sealed,
        )
        .unwrap();
        let mut stored = b"k8s:enc:aesgcm:v1:key1:".to_vec();
        stored.extend_from_slice(&nonce);
        stored.extend_from_slice(&sealed);
        let t = gcm(&[("key1", K32)]);
        assert_eq!(t.from_storage(&Bytes::from(stored), KEY).unwrap(), plain());
    }

    #[test]
    fn a_wrong_key_under_the_same_name_fails_authentication() {
        let stored = gcm(&[("key1", K32)]).to_storage(&plain(), KEY).unwrap();
        let wrong = gcm(&[("key1", OTHER32)]);
        assert_eq!(
            wrong.from_storage(&stored, KEY),
            Err(TransformError::Authentication)
        );
        let stored = secretbox(&[("key1", K32)])
            .to_storage(&plain(), KEY)
            .unwrap();
        assert_eq!(
            secretbox(&[("key1", OTHER32)]).from_storage(&stored, KEY),
            Err(TransformError::SecretboxOpen)
        );
        // AES-CBC authenticates nothing: a wrong key decrypts to noise, refused when its
        // padding is malformed (255 times in 256, so not always) and never the stored value.
        let stored = cbc(&[("key1", K32)]).to_storage(&plain(), KEY).unwrap();
        assert_ne!(
            cbc(&[("key1", OTHER32)]).from_storage(&stored, KEY).ok(),
            Some(plain())
        );
    }

    #[test]
    fn a_missing_key_name_is_reported() {
        let stored = gcm(&[("key1", K32)]).to_storage(&plain(), KEY).unwrap();
        let err = gcm(&[("key2", K32)])
            .from_storage(&stored, KEY)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "no matching key was found for the provided AES transformer"
        );
    }

    #[test]
    fn aescbc_round_trips_with_an_iv_and_pkcs7_padding() {
        for key in [K16, K24, K32] {
            let t = cbc(&[("k", key)]);
            for len in [0usize, 1, 15, 16, 17, 32] {
                let data = Bytes::from(vec![b'x'; len]);
                let stored = t.to_storage(&data, KEY).unwrap();
                let body = stored
                    .strip_prefix(b"k8s:enc:aescbc:v1:k:".as_slice())
                    .unwrap();
                // IV + whole blocks, always at least one block of padding.
                assert_eq!(body.len(), CBC_BLOCK + (len / CBC_BLOCK + 1) * CBC_BLOCK);
                assert_eq!(t.from_storage(&stored, KEY).unwrap(), data);
            }
        }
    }

    #[test]
    fn aescbc_decrypts_a_value_encrypted_independently() {
        // CBC's first block is E(P1 xor IV): check against a raw single-block encryption.
        let iv = [3u8; 16];
        let mut block = [16u8; 16]; // an empty value is one block of padding 16
        for (b, v) in block.iter_mut().zip(iv) {
            *b ^= v;
        }
        let ecb = EncryptingKey::ecb(UnboundCipherKey::new(&AES_256, K32).unwrap()).unwrap();
        ecb.less_safe_encrypt(&mut block, EncryptionContext::None)
            .unwrap();
        let mut stored = b"k8s:enc:aescbc:v1:k:".to_vec();
        stored.extend_from_slice(&iv);
        stored.extend_from_slice(&block);
        let t = cbc(&[("k", K32)]);
        assert_eq!(t.from_storage(&Bytes::from(stored), KEY).unwrap(), "");
    }

    #[test]
    fn aescbc_rejects_malformed_data() {
        let t = cbc(&[("k", K32)]);
        let with = |body: &[u8]| {
            let mut v = b"k8s:enc:aescbc:v1:k:".to_vec();
            v.extend_from_slice(body);
            t.from_storage(&Bytes::from(v), KEY)
        };
        assert_eq!(with(&[0; 5]), Err(TransformError::TooShort));
        assert_eq!(with(&[0; 20]), Err(TransformError::NotBlockMultiple));
    }

    #[test]
    fn secretbox_round_trips_in_nacl_layout() {
        let t = secretbox(&[("sb", K32)]);
        let stored = t.to_storage(&plain(), KEY).unwrap();
        let body = stored
            .strip_prefix(b"k8s:enc:secretbox:v1:sb:".as_slice())
            .unwrap();
        assert_eq!(body.len(), SECRETBOX_NONCE + SECRETBOX_TAG + PLAIN.len());
        assert!(!contains(&stored, b"Secret"));
        assert_eq!(t.from_storage(&stored, KEY).unwrap(), plain());
        // Not bound to the key: secretbox has no associated data.
        assert_eq!(t.from_storage(&stored, "/elsewhere").unwrap(), plain());
        // Tamper with the tag (NaCl puts it right after the nonce).
        let mut tampered = stored.to_vec();
        let tag_at = stored.len() - body.len() + SECRETBOX_NONCE;
        tampered[tag_at] ^= 1;
        assert_eq!(
            t.from_storage(&Bytes::from(tampered), KEY),
            Err(TransformError::SecretboxOpen)
        );
    }

    #[test]
    fn key_sizes_are_checked() {
        assert!(
            Transformer::new()
                .with_aesgcm([("k", &b"short"[..])])
                .is_err()
        );
        assert!(
            Transformer::new()
                .with_aescbc([("k", &b"short"[..])])
                .is_err()
        );
        assert!(Transformer::new().with_secretbox([("k", K16)]).is_err());
    }

    #[test]
    fn rotation_reads_the_old_key_and_writes_the_new_one() {
        let old = gcm(&[("key1", K32)]);
        let stored_old = old.to_storage(&plain(), KEY).unwrap();
        let rotated = gcm(&[("key2", OTHER32), ("key1", K32)]);
        assert_eq!(rotated.from_storage(&stored_old, KEY).unwrap(), plain());
        let stored_new = rotated.to_storage(&plain(), KEY).unwrap();
        assert!(stored_new.starts_with(b"k8s:enc:aesgcm:v1:key2:"));
        // Rotation across providers: secretbox first, aesgcm still listed.
        let across = secretbox(&[("sb", K32)])
            .with_aesgcm([("key1", K32)])
            .unwrap();
        assert_eq!(across.from_storage(&stored_old, KEY).unwrap(), plain());
        assert!(
            across
                .to_storage(&plain(), KEY)
                .unwrap()
                .starts_with(b"k8s:enc:secretbox:v1:sb:")
        );
        // And the same provider listed twice, the new key first (upstream tries both).
        let twice = gcm(&[("key1", OTHER32)])
            .with_aesgcm([("key1", K32)])
            .unwrap();
        assert_eq!(twice.from_storage(&stored_old, KEY).unwrap(), plain());
    }

    #[test]
    fn identity_reads_plain_values_and_refuses_encrypted_ones() {
        let identity = Transformer::new().with_identity();
        assert!(identity.writes_plaintext());
        let stored = identity.to_storage(&plain(), KEY).unwrap();
        assert_eq!(stored, plain());
        assert_eq!(
            stored.as_ptr(),
            plain().as_ptr(),
            "identity does not copy the value"
        );
        let encrypted = gcm(&[("key1", K32)]).to_storage(&plain(), KEY).unwrap();
        assert_eq!(
            identity.from_storage(&encrypted, KEY),
            Err(TransformError::NoMatchingPrefix)
        );
        // Identity first, aesgcm second: writes plain, still reads the encrypted values.
        let migrating = Transformer::new()
            .with_identity()
            .with_aesgcm([("key1", K32)])
            .unwrap();
        assert_eq!(migrating.from_storage(&encrypted, KEY).unwrap(), plain());
        assert_eq!(migrating.from_storage(&plain(), KEY).unwrap(), plain());
    }

    #[test]
    fn unprefixed_data_needs_identity_and_unknown_prefixes_fail() {
        let only_gcm = gcm(&[("key1", K32)]);
        assert_eq!(
            only_gcm.from_storage(&plain(), KEY),
            Err(TransformError::NoMatchingPrefix)
        );
        let with_identity = gcm(&[("key1", K32)]).with_identity();
        assert_eq!(with_identity.from_storage(&plain(), KEY).unwrap(), plain());
        let unknown = Bytes::from_static(b"k8s:enc:kms:v2:plugin:abc");
        assert_eq!(
            with_identity.from_storage(&unknown, KEY),
            Err(TransformError::NoMatchingPrefix)
        );
    }

    #[test]
    fn debug_shows_key_names_not_secrets() {
        let t = gcm(&[("key1", K32)]).with_identity();
        let shown = format!("{t:?}");
        assert!(shown.contains("aesgcm[\"key1\"]"), "{shown}");
        assert!(!shown.contains("0123456789"), "{shown}");
    }
}
