//! A certificate authority that signs requests as upstream's `authority.CertificateAuthority`
//! with its `PermissiveSigningPolicy`: the request's subject, public key and subject
//! alternative names; the key usages and extended key usages the CertificateSigningRequest's
//! `spec.usages` name (none of the request's own extensions); not a CA; `NotBefore` five
//! minutes back; `NotAfter` the TTL on from now, minus the backdate for certificates of eight
//! hours or more, and never past the CA's own.
//!
//! Certificates are DER-encoded here: the subject is copied byte for byte from the request
//! (rcgen's names keep one value per attribute type, and a client certificate's groups are
//! several organizations), and signed with the CA's key through
//! [`genplane_authentication::keys::SigningKey`] (RSA with SHA-256, ECDSA with SHA-256/384/512
//! by curve).

use std::path::{Path, PathBuf};

use genplane_api::certificates::{Request, pem_blocks};
use genplane_authentication::keys::{Algorithm, KeyError, SigningKey};

/// How far back `NotBefore` is set, for clocks that run behind.
pub const BACKDATE_SECONDS: i64 = 5 * 60;
/// Certificates shorter-lived than this keep the full TTL after now (no backdate taken off).
pub const SHORT_SECONDS: i64 = 8 * 3600;

/// What went wrong loading a CA or signing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The CA certificate could not be read.
    #[error("error reading CA cert file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The CA certificate file holds no certificate.
    #[error("error reading CA cert file {}: data does not contain any valid RSA or ECDSA certificates", path.display())]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// The CA's key could not be loaded.
    #[error("error reading CA key file: {0}")]
    Key(#[from] KeyError),
    /// The CA's key does not belong to its certificate.
    #[error("the CA key in {} does not match the certificate in {}", key.display(), cert.display())]
    Mismatch {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
    },
    /// The CA expired (upstream's words).
    #[error("the signer has expired: NotAfter={0}")]
    Expired(String),
    /// A usage that is not one of upstream's (validation lets none through).
    #[error("unrecognized usage: {0}")]
    Usage(String),
}

/// A CA: its certificate's subject and validity, its key identifier, and its key.
#[derive(Debug)]
pub struct Authority {
    subject_der: Vec<u8>,
    key_id: Option<Vec<u8>>,
    not_after: i64,
    certificate_pem: String,
    key: SigningKey,
}

impl Authority {
    /// The CA of the PEM certificate at `cert` and the PEM key at `key` (the flags'
    /// `--cluster-signing-cert-file` and `--cluster-signing-key-file`).
    pub fn from_files(cert: &Path, key: &Path) -> Result<Self, Error> {
        let data = std::fs::read(cert).map_err(|source| Error::Read {
            path: cert.to_owned(),
            source,
        })?;
        let no_certificate = || Error::NoCertificate {
            path: cert.to_owned(),
        };
        let block = pem_blocks(&data)
            .into_iter()
            .find(|b| b.label == "CERTIFICATE")
            .ok_or_else(no_certificate)?;
        let (_, parsed) =
            x509_parser::parse_x509_certificate(&block.contents).map_err(|_| no_certificate())?;
        let signing_key = SigningKey::from_file(key)?;
        if parsed.public_key().raw != signing_key.public_key().spki_der() {
            return Err(Error::Mismatch {
                cert: cert.to_owned(),
                key: key.to_owned(),
            });
        }
        let key_id = parsed
            .extensions()
            .iter()
            .find_map(|e| match e.parsed_extension() {
                x509_parser::extensions::ParsedExtension::SubjectKeyIdentifier(id) => {
                    Some(id.0.to_vec())
                }
                _ => None,
            });
        Ok(Self {
            subject_der: parsed.subject().as_raw().to_vec(),
            key_id,
            not_after: parsed.validity().not_after.timestamp(),
            certificate_pem: String::from_utf8_lossy(&data).into_owned(),
            key: signing_key,
        })
    }

    /// The CA certificate file's PEM.
    pub fn certificate_pem(&self) -> &str {
        &self.certificate_pem
    }

    /// Signs `request` for `usages` with a lifetime of `ttl_seconds` from `now` (Unix
    /// seconds): a PEM `CERTIFICATE`.
    pub fn sign(
        &self,
        request: &Request,
        usages: &[String],
        ttl_seconds: i64,
        now: i64,
    ) -> Result<String, Error> {
        let not_before = now - BACKDATE_SECONDS;
        let mut not_after = if ttl_seconds < SHORT_SECONDS {
            now + ttl_seconds
        } else {
            now + ttl_seconds - BACKDATE_SECONDS
        };
        not_after = not_after.min(self.not_after);
        if not_before >= self.not_after || now >= self.not_after {
            return Err(Error::Expired(genplane_apimachinery::meta::rfc3339(
                self.not_after,
            )));
        }
        let (key_usage, extended) = key_usages(usages)?;
        let mut extensions = Vec::new();
        if key_usage != 0 {
            extensions.push(extension(
                oid(&[2, 5, 29, 15]),
                true,
                bit_string_of_flags(key_usage),
            ));
        }
        if !extended.is_empty() {
            let list: Vec<Vec<u8>> = extended.iter().map(|arcs| oid(arcs)).collect();
            extensions.push(extension(oid(&[2, 5, 29, 37]), false, sequence(&list)));
        }
        // Basic constraints: not a CA.
        extensions.push(extension(oid(&[2, 5, 29, 19]), true, sequence(&[])));
        if let Some(id) = &self.key_id {
            // authorityKeyIdentifier { [0] keyIdentifier }
            extensions.push(extension(
                oid(&[2, 5, 29, 35]),
                false,
                sequence(&[tlv(0x80, id)]),
            ));
        }
        if let Some(names) = &request.subject_alt_names_der {
            // Critical when the subject is empty, as Go marks it.
            let empty_subject = request.subject_der.len() <= 2;
            extensions.push(extension(
                oid(&[2, 5, 29, 17]),
                empty_subject,
                names.clone(),
            ));
        }
        let algorithm = signature_algorithm(self.key.algorithm());
        let mut serial = [0u8; 16];
        aws_lc_rs::rand::fill(&mut serial).map_err(|_| Error::Key(KeyError::Sign))?;
        serial[0] &= 0x7f;
        let tbs = sequence(&[
            tlv(0xa0, &integer(&[2])),
            integer(&serial),
            algorithm.clone(),
            self.subject_der.clone(),
            sequence(&[time(not_before), time(not_after)]),
            request.subject_der.clone(),
            request.public_key_der.clone(),
            tlv(0xa3, &sequence(&extensions)),
        ]);
        let signature = self.key.sign(&tbs)?;
        let signature = match self.key.algorithm() {
            Algorithm::ES256 | Algorithm::ES384 | Algorithm::ES512 => ecdsa_der(&signature),
            _ => signature,
        };
        let mut bits = vec![0u8];
        bits.extend_from_slice(&signature);
        let certificate = sequence(&[tbs, algorithm, tlv(0x03, &bits)]);
        Ok(genplane_authentication::keys::pem_encode(
            "CERTIFICATE",
            &certificate,
        ))
    }
}

/// The key usage bits and the extended key usages (OID arcs) of `usages`, as upstream maps
/// them.
fn key_usages(usages: &[String]) -> Result<(u16, Vec<&'static [u64]>), Error> {
    let mut bits = 0u16;
    let mut extended: Vec<&'static [u64]> = Vec::new();
    for usage in usages {
        let bit = match usage.as_str() {
            "signing" | "digital signature" => Some(0),
            "content commitment" => Some(1),
            "key encipherment" => Some(2),
            "data encipherment" => Some(3),
            "key agreement" => Some(4),
            "cert sign" => Some(5),
            "crl sign" => Some(6),
            "encipher only" => Some(7),
            "decipher only" => Some(8),
            _ => None,
        };
        if let Some(bit) = bit {
            bits |= 1 << bit;
            continue;
        }
        let arcs: &'static [u64] = match usage.as_str() {
            "any" => &[2, 5, 29, 37, 0],
            "server auth" => &[1, 3, 6, 1, 5, 5, 7, 3, 1],
            "client auth" => &[1, 3, 6, 1, 5, 5, 7, 3, 2],
            "code signing" => &[1, 3, 6, 1, 5, 5, 7, 3, 3],
            "email protection" | "s/mime" => &[1, 3, 6, 1, 5, 5, 7, 3, 4],
            "ipsec end system" => &[1, 3, 6, 1, 5, 5, 7, 3, 5],
            "ipsec tunnel" => &[1, 3, 6, 1, 5, 5, 7, 3, 6],
            "ipsec user" => &[1, 3, 6, 1, 5, 5, 7, 3, 7],
            "timestamping" => &[1, 3, 6, 1, 5, 5, 7, 3, 8],
            "ocsp signing" => &[1, 3, 6, 1, 5, 5, 7, 3, 9],
            "microsoft sgc" => &[1, 3, 6, 1, 4, 1, 311, 10, 3, 3],
            "netscape sgc" => &[2, 16, 840, 1, 113_730, 4, 1],
            other => return Err(Error::Usage(other.to_owned())),
        };
        if !extended.contains(&arcs) {
            extended.push(arcs);
        }
    }
    Ok((bits, extended))
}

fn signature_algorithm(algorithm: Algorithm) -> Vec<u8> {
    match algorithm {
        Algorithm::ES256 => sequence(&[oid(&[1, 2, 840, 10045, 4, 3, 2])]),
        Algorithm::ES384 => sequence(&[oid(&[1, 2, 840, 10045, 4, 3, 3])]),
        Algorithm::ES512 => sequence(&[oid(&[1, 2, 840, 10045, 4, 3, 4])]),
        // SigningKey signs RSA keys with PKCS#1 v1.5 and SHA-256.
        _ => sequence(&[oid(&[1, 2, 840, 113_549, 1, 1, 11]), vec![0x05, 0x00]]),
    }
}

/// A DER tag-length-value.
fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = content.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes: Vec<u8> = len
            .to_be_bytes()
            .into_iter()
            .skip_while(|b| *b == 0)
            .collect();
        out.push(0x80 | bytes.len() as u8);
        out.extend_from_slice(&bytes);
    }
    out.extend_from_slice(content);
    out
}

fn sequence(items: &[Vec<u8>]) -> Vec<u8> {
    tlv(0x30, &items.concat())
}

/// A non-negative INTEGER from big-endian bytes.
fn integer(bytes: &[u8]) -> Vec<u8> {
    let trimmed: Vec<u8> = bytes.iter().copied().skip_while(|b| *b == 0).collect();
    let mut content = Vec::new();
    if trimmed.first().is_none_or(|b| b & 0x80 != 0) {
        content.push(0);
    }
    content.extend_from_slice(&trimmed);
    tlv(0x02, &content)
}

fn oid(arcs: &[u64]) -> Vec<u8> {
    let mut content = Vec::new();
    let mut push = |mut value: u64| {
        let mut chunk = vec![(value & 0x7f) as u8];
        value >>= 7;
        while value > 0 {
            chunk.push(0x80 | (value & 0x7f) as u8);
            value >>= 7;
        }
        chunk.reverse();
        content.extend_from_slice(&chunk);
    };
    push(arcs[0] * 40 + arcs[1]);
    for arc in &arcs[2..] {
        push(*arc);
    }
    tlv(0x06, &content)
}

fn extension(id: Vec<u8>, critical: bool, value: Vec<u8>) -> Vec<u8> {
    let mut parts = vec![id];
    if critical {
        parts.push(vec![0x01, 0x01, 0xff]);
    }
    parts.push(tlv(0x04, &value));
    sequence(&parts)
}

/// A BIT STRING of named bits (bit 0 the most significant of the first byte), trailing zero
/// bits left out as DER wants.
fn bit_string_of_flags(flags: u16) -> Vec<u8> {
    let bytes = if flags >> 8 == 0 {
        vec![flags.reverse_bits().to_be_bytes()[0]]
    } else {
        flags.reverse_bits().to_be_bytes().to_vec()
    };
    let last = *bytes.last().unwrap_or(&0);
    let unused = if last == 0 {
        0
    } else {
        last.trailing_zeros() as u8
    };
    let mut content = vec![unused];
    content.extend_from_slice(&bytes);
    tlv(0x03, &content)
}

/// UTCTime until 2049, GeneralizedTime after, as RFC 5280 says.
fn time(unix_seconds: i64) -> Vec<u8> {
    // "YYYY-MM-DDTHH:MM:SSZ"
    let text = genplane_apimachinery::meta::rfc3339(unix_seconds);
    let digits: String = text.chars().filter(char::is_ascii_digit).collect();
    let year: i64 = digits[..4].parse().unwrap_or(0);
    if (1950..2050).contains(&year) {
        tlv(0x17, format!("{}Z", &digits[2..]).as_bytes())
    } else {
        tlv(0x18, format!("{digits}Z").as_bytes())
    }
}

/// An ECDSA signature `r || s` (JWS form) as X.509 wants it: `SEQUENCE { r, s }`.
fn ecdsa_der(fixed: &[u8]) -> Vec<u8> {
    let (r, s) = fixed.split_at(fixed.len() / 2);
    sequence(&[integer(r), integer(s)])
}

#[cfg(test)]
mod tests;
