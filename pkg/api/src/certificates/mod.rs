//! certificates.k8s.io: CertificateSigningRequests ([`certificatesigningrequest`]),
//! ClusterTrustBundles ([`clustertrustbundle`], v1beta1) and what
//! the API server, its admission plugins and the signing controller share about them: the
//! signer names Kubernetes defines, the key usages, reading PEM as Go's `encoding/pem` reads it
//! ([`pem_blocks`]), a request's PKCS#10 content with its signature checked ([`parse_request`],
//! upstream's `ParseCSR` and `CheckSignature`, with their words) and the signer-name rule
//! ([`validate_signer_name`], upstream's `ValidateSignerName`).

pub mod certificatesigningrequest;
pub mod clustertrustbundle;

use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use genplane_apimachinery::validation::{
    DNS1123_LABEL_MAX_LEN, DNS1123_SUBDOMAIN_MAX_LEN, is_dns1123_label, is_dns1123_subdomain,
};
use x509_parser::prelude::FromDer as _;

/// The API group.
pub const GROUP: &str = "certificates.k8s.io";
/// The resource whose names are signer names, on which `approve`, `sign` and `attest` are
/// authorized.
pub const SIGNERS: &str = "signers";
/// The signer of client certificates the API server trusts.
pub const KUBE_APISERVER_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client";
/// The signer of kubelets' client certificates.
pub const KUBE_APISERVER_CLIENT_KUBELET_SIGNER: &str =
    "kubernetes.io/kube-apiserver-client-kubelet";
/// The signer of kubelets' serving certificates.
pub const KUBELET_SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";
/// The signer of requests made through the removed v1beta1 API without a signer name.
pub const LEGACY_UNKNOWN_SIGNER: &str = "kubernetes.io/legacy-unknown";
/// The group whose members may do anything, which no client certificate of
/// [`KUBE_APISERVER_CLIENT_SIGNER`] may name.
pub const SYSTEM_MASTERS: &str = "system:masters";

/// The condition types of a request.
pub mod conditions {
    /// Approved by someone allowed to approve for its signer.
    pub const APPROVED: &str = "Approved";
    /// Denied by someone allowed to approve for its signer.
    pub const DENIED: &str = "Denied";
    /// The signer could not or would not issue the certificate.
    pub const FAILED: &str = "Failed";
}

/// Every key usage a request may ask for, sorted as upstream's messages list them.
pub const USAGES: &[&str] = &[
    "any",
    "cert sign",
    "client auth",
    "code signing",
    "content commitment",
    "crl sign",
    "data encipherment",
    "decipher only",
    "digital signature",
    "email protection",
    "encipher only",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "key agreement",
    "key encipherment",
    "microsoft sgc",
    "netscape sgc",
    "ocsp signing",
    "s/mime",
    "server auth",
    "signing",
    "timestamping",
];

/// One PEM block, as Go's `pem.Decode` reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PemBlock {
    /// The type after `BEGIN` (`CERTIFICATE REQUEST`).
    pub label: String,
    /// Whether the block has headers (`Proc-Type: ...` lines before the data).
    pub has_headers: bool,
    /// The decoded data.
    pub contents: Vec<u8>,
}

/// The PEM blocks of `data`, in order, as repeated calls of Go's `pem.Decode` find them:
/// text around and between blocks is skipped, and so is a block that does not decode (a
/// `BEGIN` line without its `END`, data that is not base64).
pub fn pem_blocks(data: &[u8]) -> Vec<PemBlock> {
    use base64::Engine as _;
    let text = String::from_utf8_lossy(data);
    let mut blocks = Vec::new();
    let mut rest: &str = &text;
    while let Some(at) = rest.find("-----BEGIN ") {
        // A BEGIN line starts the data or a line.
        if at > 0 && !rest[..at].ends_with('\n') {
            rest = &rest[at + 11..];
            continue;
        }
        let after = &rest[at + 11..];
        let Some(line_end) = after.find('\n') else {
            break;
        };
        let line = after[..line_end].trim_end_matches('\r');
        rest = &after[line_end + 1..];
        let Some(label) = line.strip_suffix("-----") else {
            continue;
        };
        let end_marker = format!("-----END {label}-----");
        let Some(end) = rest.find(&end_marker) else {
            continue;
        };
        let body = &rest[..end];
        let mut has_headers = false;
        let mut encoded = String::new();
        let mut in_headers = true;
        for line in body.lines() {
            let line = line.trim_end();
            if in_headers && line.contains(':') {
                has_headers = true;
                continue;
            }
            in_headers = false;
            encoded.extend(line.chars().filter(|c| !c.is_whitespace()));
        }
        rest = &rest[end + end_marker.len()..];
        if let Ok(contents) = base64::engine::general_purpose::STANDARD.decode(encoded) {
            blocks.push(PemBlock {
                label: label.to_owned(),
                has_headers,
                contents,
            });
        }
    }
    blocks
}

/// The bytes of the base64 field at `pointer` of a request (`/spec/request`,
/// `/status/certificate`); none when absent or not base64 (decoding checked it on write).
pub fn bytes_at(object: &serde_json::Value, pointer: &str) -> Vec<u8> {
    use base64::Engine as _;
    object
        .pointer(pointer)
        .and_then(serde_json::Value::as_str)
        .and_then(|encoded| {
            base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .ok()
        })
        .unwrap_or_default()
}

/// What a request asks for, read from its PKCS#10 content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// The subject's DER encoding (the certificate's subject, as requested).
    pub subject_der: Vec<u8>,
    /// The subject's common name (the user name of a client certificate).
    pub common_name: String,
    /// The subject's organizations (the groups of a client certificate).
    pub organizations: Vec<String>,
    /// The DER of the requested public key (`SubjectPublicKeyInfo`).
    pub public_key_der: Vec<u8>,
    /// The requested subject alternative names: the DER of the extension's value, if any.
    pub subject_alt_names_der: Option<Vec<u8>>,
    /// Whether any DNS name, IP address, email address or URI is requested.
    pub has_alt_names: bool,
}

/// Reads a PEM `CERTIFICATE REQUEST` and checks its signature, with the words of upstream's
/// `ParseCSR` and Go's `CheckSignature`.
pub fn parse_request(pem: &[u8]) -> Result<Request, String> {
    const WRONG_TYPE: &str = "PEM block type must be CERTIFICATE REQUEST";
    let block = pem_blocks(pem).into_iter().next().ok_or(WRONG_TYPE)?;
    if block.label != "CERTIFICATE REQUEST" {
        return Err(WRONG_TYPE.to_owned());
    }
    let (_, csr) =
        x509_parser::certification_request::X509CertificationRequest::from_der(&block.contents)
            .map_err(|e| format!("x509: malformed certificate request: {e}"))?;
    let info = &csr.certification_request_info;
    match csr.verify_signature() {
        Ok(()) => {}
        Err(x509_parser::error::X509Error::SignatureUnsupportedAlgorithm) => {
            return Err("x509: cannot verify signature: algorithm unimplemented".to_owned());
        }
        Err(_) => {
            let oid = &info.subject_pki.algorithm.algorithm;
            return Err(
                if *oid == x509_parser::oid_registry::OID_PKCS1_RSAENCRYPTION {
                    "crypto/rsa: verification error"
                } else if *oid == x509_parser::oid_registry::OID_SIG_ED25519 {
                    "x509: Ed25519 verification failure"
                } else {
                    "x509: ECDSA verification failure"
                }
                .to_owned(),
            );
        }
    }
    let subject = &info.subject;
    let common_name = subject
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .unwrap_or_default()
        .to_owned();
    let organizations = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_owned))
        .collect();
    let mut subject_alt_names_der = None;
    let mut has_alt_names = false;
    if let Some(extensions) = csr.requested_extensions() {
        for extension in extensions {
            if let x509_parser::extensions::ParsedExtension::SubjectAlternativeName(san) = extension
            {
                has_alt_names |= !san.general_names.is_empty();
            }
        }
    }
    for attribute in info.iter_attributes() {
        if let x509_parser::cri_attributes::ParsedCriAttribute::ExtensionRequest(request) =
            attribute.parsed_attribute()
        {
            for extension in &request.extensions {
                if extension.oid == x509_parser::oid_registry::OID_X509_EXT_SUBJECT_ALT_NAME {
                    subject_alt_names_der = Some(extension.value.to_vec());
                }
            }
        }
    }
    Ok(Request {
        subject_der: subject.as_raw().to_vec(),
        common_name,
        organizations,
        public_key_der: info.subject_pki.raw.to_vec(),
        subject_alt_names_der,
        has_alt_names,
    })
}

/// What is wrong with PEM certificate data, with upstream's words (`validateCertificate`):
/// every block must be a `CERTIFICATE` without headers holding a certificate, and there must
/// be one. Empty data is fine (no certificate yet).
pub fn certificate_problem(pem: &[u8]) -> Option<String> {
    if pem.is_empty() {
        return None;
    }
    let blocks = pem_blocks(pem);
    for block in &blocks {
        if block.label != "CERTIFICATE" {
            return Some(format!(
                "only CERTIFICATE PEM blocks are allowed, found {}",
                genplane_apimachinery::gofmt::quote(&block.label)
            ));
        }
        if block.has_headers {
            return Some("no PEM block headers are permitted".to_owned());
        }
        if x509_parser::parse_x509_certificate(&block.contents).is_err() {
            return Some("x509: malformed certificate".to_owned());
        }
    }
    blocks
        .is_empty()
        .then(|| "must contain at least one CERTIFICATE PEM block".to_owned())
}

/// Upstream's `ValidateSignerName`: `<domain>/<path>`, the domain of DNS-1123 labels with at
/// least one dot, the path of DNS-1123 subdomains separated by dots, 571 characters at most.
pub fn validate_signer_name(path: &Path, signer_name: &str) -> ErrorList {
    let mut errors = ErrorList::new();
    if signer_name.is_empty() {
        errors.push(Error::required(path, ""));
        return errors;
    }
    let segments: Vec<&str> = signer_name.split('/').collect();
    let [domain, rest] = segments[..] else {
        errors.push(Error::invalid(
            path,
            signer_name,
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        ));
        return errors;
    };
    if domain.len() > DNS1123_SUBDOMAIN_MAX_LEN {
        errors.push(Error::too_long(path, "", DNS1123_SUBDOMAIN_MAX_LEN));
    }
    let labels: Vec<&str> = domain.split('.').collect();
    for label in &labels {
        let problems = is_dns1123_label(label);
        if !problems.is_empty() {
            for problem in problems {
                errors.push(Error::invalid(
                    path,
                    domain,
                    format!(
                        "validating label {}: {problem}",
                        genplane_apimachinery::gofmt::quote(label)
                    ),
                ));
            }
            break;
        }
    }
    if labels.len() < 2 {
        errors.push(Error::invalid(
            path,
            domain,
            "should be a domain with at least two segments separated by dots",
        ));
    }
    for label in rest.split('.') {
        let problems = is_dns1123_subdomain(label);
        if !problems.is_empty() {
            for problem in problems {
                errors.push(Error::invalid(
                    path,
                    rest,
                    format!(
                        "validating label {}: {problem}",
                        genplane_apimachinery::gofmt::quote(label)
                    ),
                ));
            }
            break;
        }
    }
    let max =
        DNS1123_SUBDOMAIN_MAX_LEN + (DNS1123_SUBDOMAIN_MAX_LEN + DNS1123_LABEL_MAX_LEN + 1) + 1;
    if signer_name.len() > max {
        errors.push(Error::too_long(path, "", max));
    }
    errors
}

/// Whether `signer_name` is one the Kubernetes project reserves (`kubernetes.io/...` or a
/// subdomain of it).
pub fn is_kubernetes_signer(signer_name: &str) -> bool {
    let host = signer_name.split('/').next().unwrap_or_default();
    host == "kubernetes.io" || host.ends_with(".kubernetes.io")
}

/// The names under which `verb` on [`SIGNERS`] allows acting for `signer_name`, in the order
/// upstream asks: the signer itself, then its domain's wildcard `<domain>/*`.
pub fn signer_authorization_names(signer_name: &str) -> [String; 2] {
    let domain = signer_name.split('/').next().unwrap_or_default();
    [signer_name.to_owned(), format!("{domain}/*")]
}

#[cfg(test)]
mod tests;
