//! ClusterTrustBundles (`certificates.k8s.io/v1beta1`, cluster-scoped): a signer's (or
//! anyone's) X.509 trust anchors, published for the cluster to read. Served only while the
//! `ClusterTrustBundle` feature is on ([`crate::features::CLUSTER_TRUST_BUNDLE`]) and the group
//! version is enabled (`--runtime-config=certificates.k8s.io/v1beta1=true`), as upstream 1.33
//! serves it (beta, off by default).
//!
//! Upstream rules (Kubernetes 1.33, `pkg/registry/certificates/clustertrustbundle` and
//! `ValidateClusterTrustBundle` in `pkg/apis/certificates/validation`):
//!
//! - **Name**: with `spec.signerName` set, the name is the signer name with `/` replaced by `:`,
//!   a `:`, then a DNS-1123 subdomain (`example.com:foo:v1` for `example.com/foo`); without one,
//!   a DNS-1123 subdomain without `:` ([`name_problems`]).
//! - **spec.signerName**: optional; when set, well formed as a CSR's
//!   ([`super::validate_signer_name`]); never changed by an update.
//! - **spec.trustBundle**: at most [`MAX_TRUST_BUNDLE_SIZE`] bytes of PEM, every block a
//!   `CERTIFICATE` without headers that parses as an X.509 CA certificate (basic constraints
//!   with the CA bit), at least one, none twice ([`trust_bundle_problems`]). An update that
//!   leaves the bundle as stored does not parse it again.
//! - Nothing else is prepared: no status, no generation. Writes of a bundle with a signer name
//!   need `attest` on that signer (the `ClusterTrustBundleAttest` admission plugin).

use std::collections::BTreeMap;

use genplane_apimachinery::codec::decode::{self, Decoded};
use genplane_apimachinery::codec::schema::{Field, Struct, Type};
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::meta::schemas::OBJECT_META;
use genplane_apimachinery::meta::{ObjectMeta, validate_object_meta, validate_object_meta_update};
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use genplane_apimachinery::validation::name_is_dns_subdomain;
use serde::Deserialize;
use serde_json::Value;

use crate::table::{self, ColumnDefinition};
use crate::util;

/// The kind.
pub const KIND: &str = "ClusterTrustBundle";
/// The API version.
pub const API_VERSION: &str = "certificates.k8s.io/v1beta1";
/// The plural resource name.
pub const RESOURCE: &str = "clustertrustbundles";
/// The largest `spec.trustBundle` accepted, in bytes (upstream's `MaxTrustBundleSize`).
pub const MAX_TRUST_BUNDLE_SIZE: usize = 1024 * 1024;

static SPEC: Struct = Struct {
    name: "ClusterTrustBundleSpec",
    fields: &[
        Field::new("signerName", 1, Type::String),
        Field::new("trustBundle", 2, Type::String),
    ],
};

/// The shape of a certificates.k8s.io/v1beta1 ClusterTrustBundle.
pub static SCHEMA: Struct = Struct {
    name: "ClusterTrustBundle",
    fields: &[
        Field::type_meta("kind"),
        Field::type_meta("apiVersion"),
        Field::new("metadata", 1, Type::Struct(&OBJECT_META)),
        Field::new("spec", 2, Type::Struct(&SPEC)),
    ],
};

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Spec {
    signer_name: String,
    trust_bundle: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Bundle {
    spec: Spec,
}

/// Type-checks and normalizes a ClusterTrustBundle.
pub fn decode(object: &Value) -> Result<Decoded, ApiError> {
    decode::decode(object, &SCHEMA).map_err(|e| e.to_api_error(KIND, API_VERSION))
}

/// What is wrong with `name` (a `generateName` prefix when `prefix`) for a bundle of
/// `signer_name` (upstream's `ValidateClusterTrustBundleName`, with its words).
pub fn name_problems(signer_name: &str, name: &str, prefix: bool) -> Vec<String> {
    if signer_name.is_empty() {
        if name.contains(':') {
            return vec![
                "ClusterTrustBundle without signer name must not have \":\" in its name".to_owned(),
            ];
        }
        return name_is_dns_subdomain(name, prefix);
    }
    let required = format!("{}:", signer_name.replace('/', ":"));
    match name.strip_prefix(&required) {
        Some(rest) => name_is_dns_subdomain(rest, prefix),
        None => vec![format!(
            "ClusterTrustBundle for signerName {signer_name} must be named with prefix {required}"
        )],
    }
}

/// What is wrong with a PEM trust bundle, with upstream's words (`validateTrustBundle`): each
/// problem is the detail of an `Invalid` error whose value is omitted, except a bundle over
/// [`MAX_TRUST_BUNDLE_SIZE`], which is `Err` with its length (a `TooLong` error).
pub fn trust_bundle_problems(bundle: &str) -> Result<Vec<String>, usize> {
    if bundle.len() > MAX_TRUST_BUNDLE_SIZE {
        return Err(bundle.len());
    }
    let mut problems = Vec::new();
    // Each distinct certificate with the indices of the entries that hold it.
    let mut anchors: Vec<(Vec<u8>, Vec<usize>)> = Vec::new();
    for (i, block) in super::pem_blocks(bundle.as_bytes()).into_iter().enumerate() {
        if block.label != "CERTIFICATE" {
            problems.push(format!("entry {i} has bad block type: {}", block.label));
            continue;
        }
        if block.has_headers {
            problems.push(format!("entry {i} has PEM block headers"));
            continue;
        }
        let basic_constraints = match x509_parser::parse_x509_certificate(&block.contents) {
            // Go refuses data after the certificate.
            Ok(([], certificate)) => certificate
                .basic_constraints()
                .map(|e| e.map(|e| e.value.ca)),
            _ => Err(x509_parser::error::X509Error::InvalidCertificate),
        };
        match basic_constraints {
            Err(_) => problems.push(format!("entry {i} does not parse as X.509")),
            // Go reads a certificate without the extension as not a CA.
            Ok(None | Some(false)) => {
                problems.push(format!("entry {i} does not have the CA bit set"));
            }
            Ok(Some(true)) => match anchors.iter_mut().find(|(der, _)| *der == block.contents) {
                Some((_, indices)) => indices.push(i),
                None => anchors.push((block.contents, vec![i])),
            },
        }
    }
    // A malformed entry hides the problems of the whole (missing or repeated anchors).
    if !problems.is_empty() {
        return Ok(problems);
    }
    if anchors.is_empty() {
        problems.push("at least one trust anchor must be provided".to_owned());
    }
    for (_, indices) in anchors.iter().filter(|(_, indices)| indices.len() > 1) {
        let listed: Vec<String> = indices.iter().map(usize::to_string).collect();
        problems.push(format!(
            "duplicate trust anchor (indices [{}])",
            listed.join(" ")
        ));
    }
    Ok(problems)
}

fn any_name(_: &str, _: bool) -> Vec<String> {
    // The name's rule depends on the signer name: checked by `validate_bundle`.
    Vec::new()
}

/// Upstream's `ValidateClusterTrustBundle`; `parse_bundle` false skips the trust bundle's
/// checks (an update that leaves it as stored).
fn validate_bundle(meta: &ObjectMeta, bundle: &Bundle, parse_bundle: bool) -> ErrorList {
    let signer_name = bundle.spec.signer_name.as_str();
    let metadata = Path::new("metadata");
    // The name's problems first, where upstream's ValidateObjectMeta reports them.
    let mut errors = ErrorList::new();
    if !meta.generate_name.is_empty() {
        for problem in name_problems(signer_name, &meta.generate_name, true) {
            errors.push(Error::invalid(
                &metadata.child("generateName"),
                meta.generate_name.as_str(),
                problem,
            ));
        }
    }
    if !meta.name.is_empty() {
        for problem in name_problems(signer_name, &meta.name, false) {
            errors.push(Error::invalid(
                &metadata.child("name"),
                meta.name.as_str(),
                problem,
            ));
        }
    }
    errors.extend(validate_object_meta(meta, false, any_name, &metadata));
    let spec = Path::new("spec");
    if !signer_name.is_empty() {
        errors.extend(super::validate_signer_name(
            &spec.child("signerName"),
            signer_name,
        ));
    }
    if parse_bundle {
        let path = spec.child("trustBundle");
        match trust_bundle_problems(&bundle.spec.trust_bundle) {
            Err(len) => errors.push(Error::too_long(
                &path,
                format!("<value omitted, len {len}>"),
                MAX_TRUST_BUNDLE_SIZE,
            )),
            Ok(problems) => {
                for problem in problems {
                    errors.push(Error::invalid(&path, "<value omitted>", problem));
                }
            }
        }
    }
    errors
}

/// Validates a new ClusterTrustBundle.
pub fn validate(object: &Value) -> Result<ErrorList, ApiError> {
    let (meta, bundle) = util::decode_typed::<Bundle>(object, &SCHEMA, KIND, API_VERSION)?;
    Ok(validate_bundle(&meta, &bundle, true))
}

/// Validates an update: the new bundle as on create (its trust bundle parsed only when it
/// changed), the metadata update, and `spec.signerName` unchanged.
pub fn validate_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let (meta, bundle) = util::decode_typed::<Bundle>(new, &SCHEMA, KIND, API_VERSION)?;
    let (old_meta, old_bundle) = util::decode_typed::<Bundle>(old, &SCHEMA, KIND, API_VERSION)?;
    let parse_bundle = bundle.spec.trust_bundle != old_bundle.spec.trust_bundle;
    let mut errors = validate_bundle(&meta, &bundle, parse_bundle);
    errors.extend(validate_object_meta_update(
        &meta,
        &old_meta,
        &Path::new("metadata"),
    ));
    if bundle.spec.signer_name != old_bundle.spec.signer_name {
        errors.push(Error::invalid(
            &Path::new("spec").child("signerName"),
            bundle.spec.signer_name.as_str(),
            "field is immutable",
        ));
    }
    Ok(errors)
}

/// Field-selector labels: the metadata ones and `spec.signerName`, as a
/// CertificateSigningRequest's.
pub const FIELD_SELECTORS: &[&str] = super::certificatesigningrequest::FIELD_SELECTORS;

/// Field-selector values.
pub fn field_values(object: &Value) -> BTreeMap<&'static str, String> {
    super::certificatesigningrequest::field_values(object)
}

/// `NAME SIGNERNAME`, as kube-apiserver prints them (no age column).
pub const COLUMNS: &[ColumnDefinition] = &[
    table::NAME,
    table::column(
        "SignerName",
        "signerName indicates the associated signer, if any.",
        0,
    ),
];

/// The cells: the name and the signer name (`<none>` without one).
pub fn row(object: &Value, _now: i64) -> Vec<Value> {
    let signer = match util::str_at(object, &["spec", "signerName"]) {
        "" => "<none>",
        signer => signer,
    };
    vec![util::name(object), Value::from(signer)]
}

/// This resource in the catalog: everything the server needs to serve it.
pub const INFO: crate::resource::ResourceInfo = crate::resource::ResourceInfo {
    group: super::GROUP,
    version: "v1beta1",
    kind: KIND,
    list_kind: "ClusterTrustBundleList",
    resource: RESOURCE,
    singular: "clustertrustbundle",
    short_names: &[],
    namespaced: false,
    create_on_update: false,
    verbs: crate::resource::ALL_VERBS,
    subresources: &[],
    categories: &[],
    storage_prefix: RESOURCE,
    storage_api_version: API_VERSION,
    schema: &SCHEMA,
    protobuf: true,
    feature_gate: Some(crate::features::CLUSTER_TRUST_BUNDLE),
    extensions: &[],
    openapi_schema: crate::schema::schema_of::<
        k8s_openapi::api::certificates::v1beta1::ClusterTrustBundle,
    >,
    hooks: crate::resource::Hooks {
        decode,
        default: crate::resource::no_default,
        prepare_for_create: crate::resource::no_prepare,
        prepare_for_update: crate::resource::no_prepare_update,
        validate,
        validate_update,
        to_storage: None,
        from_storage: None,
        field_selectors: FIELD_SELECTORS,
        field_values,
        columns: COLUMNS,
        row,
        pending_finalization: crate::resource::nothing_pending,
        mark_deleting: crate::resource::no_default,
        grace_period: crate::resource::not_graceful,
    },
};

#[cfg(test)]
mod tests;
