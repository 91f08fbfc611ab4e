//! The admission plugins of CertificateSigningRequests, by upstream's names, all validating
//! and on by default as upstream's:
//!
//! - `CertificateApproval`: a write through `certificatesigningrequests/approval` needs verb
//!   `approve` on `certificates.k8s.io` `signers` named after the request's signer, or its
//!   domain's wildcard `<domain>/*`;
//! - `CertificateSigning`: a write through `certificatesigningrequests/status` that changes the
//!   certificate or the conditions needs verb `sign` on the stored request's signer, likewise;
//! - `CertificateSubjectRestriction`: no request to `kubernetes.io/kube-apiserver-client` may
//!   name the group `system:masters` (an organization of its subject), so no client of that
//!   signer becomes a cluster admin;
//! - `ClusterTrustBundleAttest`: creating or updating a ClusterTrustBundle with a
//!   `spec.signerName` needs verb `attest` on that signer, likewise (a bundle's signer name
//!   never changes, so the new object's is the one checked); an update that changes only
//!   owner references, finalizers or managed fields is not checked (upstream's
//!   `IsOnlyMutatingGCFields`, so the garbage collector and storage migration need no
//!   `attest`). Upstream's plugin does nothing while the `ClusterTrustBundle` feature is off;
//!   genplane serves no ClusterTrustBundle then, but while the cluster turns the feature off
//!   it keeps checking the updates of those still stored.
//!
//! Refusals are upstream's 403 `Forbidden` with its words. The permissions are asked of the
//! request's authorizer ([`crate::Request::authorizer`]); a server without one authorizes
//! everything, and so do these plugins.

use genplane_api::certificates::{
    self, GROUP, KUBE_APISERVER_CLIENT_SIGNER, SIGNERS, SYSTEM_MASTERS, clustertrustbundle,
    parse_request,
};
use genplane_apimachinery::errors::{ApiError, Status};
use genplane_apimachinery::gofmt::quote;
use genplane_apimachinery::schema::GroupResource;
use serde_json::Value;

use crate::{Attributes, BoxFuture, Operation, ValidatingPlugin};

/// `CertificateApproval`'s name.
pub const APPROVAL: &str = "CertificateApproval";
/// `CertificateSigning`'s name.
pub const SIGNING: &str = "CertificateSigning";
/// `CertificateSubjectRestriction`'s name.
pub const SUBJECT_RESTRICTION: &str = "CertificateSubjectRestriction";
/// `ClusterTrustBundleAttest`'s name.
pub const TRUST_BUNDLE_ATTEST: &str = "ClusterTrustBundleAttest";

const RESOURCE: &str = "certificatesigningrequests";

/// Whether the write is of a certificates.k8s.io `resource` through `subresource` ("" for the
/// object itself).
fn writes(attributes: &Attributes<'_>, resource: &str, subresource: &str) -> bool {
    let written = &attributes.request.resource;
    written.group == GROUP
        && written.resource == resource
        && attributes.request.subresource == subresource
}

fn signer_of(object: Option<&Value>) -> &str {
    object
        .and_then(|o| o.pointer("/spec/signerName"))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn forbidden(attributes: &Attributes<'_>, why: &str) -> ApiError {
    forbidden_in(RESOURCE, attributes, why)
}

fn forbidden_in(resource: &str, attributes: &Attributes<'_>, why: &str) -> ApiError {
    Status::forbidden(&GroupResource::new(GROUP, resource), attributes.name, why).into()
}

/// Whether the requesting user may `verb` for `signer` (upstream's
/// `IsAuthorizedForSignerName`: the signer's name, then `<domain>/*`).
fn authorized_for_signer(attributes: &Attributes<'_>, verb: &str, signer: &str) -> bool {
    let Some(authorizer) = &attributes.request.authorizer else {
        return true;
    };
    certificates::signer_authorization_names(signer)
        .iter()
        .any(|name| {
            let asked = genplane_authorization::Attributes::resource(
                attributes.request.user.clone(),
                verb,
                GROUP,
                SIGNERS,
                "",
                name,
            );
            authorizer.authorize(&asked).0 == genplane_authorization::Decision::Allow
        })
}

/// See the module documentation.
#[derive(Clone, Copy, Debug, Default)]
pub struct CertificateApproval;

impl ValidatingPlugin for CertificateApproval {
    fn name(&self) -> &'static str {
        APPROVAL
    }

    fn validate<'a>(
        &'a self,
        attributes: Attributes<'a>,
        object: Option<&'a Value>,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            if !writes(&attributes, RESOURCE, "approval") || object.is_none() {
                return Ok(());
            }
            let signer = signer_of(object);
            if authorized_for_signer(&attributes, "approve", signer) {
                return Ok(());
            }
            Err(forbidden(
                &attributes,
                &format!(
                    "user not permitted to approve requests with signerName {}",
                    quote(signer)
                ),
            ))
        })
    }
}

/// See the module documentation.
#[derive(Clone, Copy, Debug, Default)]
pub struct CertificateSigning;

impl ValidatingPlugin for CertificateSigning {
    fn name(&self) -> &'static str {
        SIGNING
    }

    fn validate<'a>(
        &'a self,
        attributes: Attributes<'a>,
        object: Option<&'a Value>,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            if !writes(&attributes, RESOURCE, "status") || object.is_none() {
                return Ok(());
            }
            let old = attributes.old_object;
            let status = |o: Option<&Value>, key: &str| {
                o.and_then(|o| o.get("status"))
                    .and_then(|s| s.get(key))
                    .cloned()
            };
            if old.is_some()
                && status(old, "certificate") == status(object, "certificate")
                && status(old, "conditions") == status(object, "conditions")
            {
                return Ok(());
            }
            let signer = signer_of(old.or(object));
            if authorized_for_signer(&attributes, "sign", signer) {
                return Ok(());
            }
            Err(forbidden(
                &attributes,
                &format!(
                    "user not permitted to sign requests with signerName {}",
                    quote(signer)
                ),
            ))
        })
    }
}

/// See the module documentation.
#[derive(Clone, Copy, Debug, Default)]
pub struct CertificateSubjectRestriction;

impl ValidatingPlugin for CertificateSubjectRestriction {
    fn name(&self) -> &'static str {
        SUBJECT_RESTRICTION
    }

    fn validate<'a>(
        &'a self,
        attributes: Attributes<'a>,
        object: Option<&'a Value>,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            if !writes(&attributes, RESOURCE, "") || attributes.operation != Operation::Create {
                return Ok(());
            }
            if signer_of(object) != KUBE_APISERVER_CLIENT_SIGNER {
                return Ok(());
            }
            let pem = object
                .map(|o| certificates::bytes_at(o, "/spec/request"))
                .unwrap_or_default();
            let request = parse_request(&pem)
                .map_err(|e| forbidden(&attributes, &format!("failed to parse CSR: {e}")))?;
            if request.organizations.iter().any(|o| o == SYSTEM_MASTERS) {
                return Err(forbidden(
                    &attributes,
                    &format!(
                        "use of {KUBE_APISERVER_CLIENT_SIGNER} signer with {SYSTEM_MASTERS} group is not allowed"
                    ),
                ));
            }
            Ok(())
        })
    }
}

/// See the module documentation.
#[derive(Clone, Copy, Debug, Default)]
pub struct ClusterTrustBundleAttest;

impl ValidatingPlugin for ClusterTrustBundleAttest {
    fn name(&self) -> &'static str {
        TRUST_BUNDLE_ATTEST
    }

    fn validate<'a>(
        &'a self,
        attributes: Attributes<'a>,
        object: Option<&'a Value>,
    ) -> BoxFuture<'a, Result<(), ApiError>> {
        Box::pin(async move {
            if !writes(&attributes, clustertrustbundle::RESOURCE, "")
                || !matches!(attributes.operation, Operation::Create | Operation::Update)
            {
                return Ok(());
            }
            let signer = signer_of(object);
            if signer.is_empty() {
                return Ok(());
            }
            if attributes.operation == Operation::Update
                && let (Some(old), Some(new)) = (attributes.old_object, object)
                && genplane_authorization::escalation::is_only_mutating_gc_fields(old, new)
            {
                return Ok(());
            }
            if authorized_for_signer(&attributes, "attest", signer) {
                return Ok(());
            }
            Err(forbidden_in(
                clustertrustbundle::RESOURCE,
                &attributes,
                &format!(
                    "user not permitted to attest for signerName {}",
                    quote(signer)
                ),
            ))
        })
    }
}

#[cfg(test)]
mod tests;
