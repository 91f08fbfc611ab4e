//! The API approval of CRDs in protected groups (`*.k8s.io`, `*.kubernetes.io`): which groups
//! need the `api-approved.kubernetes.io` annotation and what its value says. Validation refuses
//! a missing or malformed annotation; the status helpers turn the state into the
//! `KubernetesAPIApprovalPolicyConformant` condition.

use super::API_APPROVED_ANNOTATION;

/// Whether a group needs the API approval annotation (`k8s.io`, `kubernetes.io` and their
/// subdomains).
pub fn is_protected_community_group(group: &str) -> bool {
    group == "k8s.io"
        || group.ends_with(".k8s.io")
        || group == "kubernetes.io"
        || group.ends_with(".kubernetes.io")
}

/// The state of a CRD's API approval annotation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Approval {
    Missing,
    Invalid,
    Approved,
    Bypassed,
}

/// The approval state of an annotation value, with upstream's reason.
pub(crate) fn approval_of(value: Option<&str>) -> (Approval, String) {
    let Some(value) = value.filter(|v| !v.is_empty()) else {
        return (
            Approval::Missing,
            format!(
                "protected groups must have approval annotation {API_APPROVED_ANNOTATION:?}, see https://github.com/kubernetes/enhancements/pull/1111"
            ),
        );
    };
    if value.starts_with("unapproved") {
        return (
            Approval::Bypassed,
            format!(
                "not approved: {}",
                genplane_apimachinery::gofmt::Quoted(value)
            ),
        );
    }
    let looks_like_url = value.split_once("://").is_some_and(|(scheme, rest)| {
        !scheme.is_empty() && !rest.is_empty() && !rest.starts_with('/')
    });
    if !looks_like_url {
        return (
            Approval::Invalid,
            format!(
                "protected groups must have approval annotation {API_APPROVED_ANNOTATION:?} with either a URL or a reason starting with \"unapproved\", see https://github.com/kubernetes/enhancements/pull/1111"
            ),
        );
    }
    (Approval::Approved, format!("approved in {value}"))
}
