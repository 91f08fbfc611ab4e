//! The resource catalog: every built-in resource with what discovery, routing and storage need
//! to know about it, and the pure hooks the generic registry runs for it. The types of an
//! entry are defined in [`crate::resource`] and re-exported here. The review kinds are
//! entries too: never stored (no `storage_prefix`), `create` their only verb, answered by the
//! server; TokenRequest is no resource of its own but the body of `serviceaccounts/token`.

pub use crate::resource::{
    ALL_VERBS, Context, FeatureGates, GatesOff, Hooks, ResourceDescription, ResourceInfo,
    STATUS_VERBS, Subresource, SubresourceDescription, SubresourceRules, no_default,
    no_field_values, no_prepare, no_prepare_update, no_row, no_update, no_validation, not_graceful,
    nothing_pending,
};
use crate::{
    admissionregistration, apiextensions, apiregistration, authentication, authorization,
    certificates, coordination, core, events, featuregates, flowcontrol, networkregistry, rbac,
};

static RESOURCES: &[ResourceInfo] = &[
    core::namespace::INFO,
    core::configmap::INFO,
    core::secret::INFO,
    core::serviceaccount::INFO,
    core::event::INFO,
    core::resourcequota::INFO,
    events::INFO,
    certificates::certificatesigningrequest::INFO,
    certificates::clustertrustbundle::INFO,
    rbac::clusterrolebinding::INFO,
    rbac::clusterrole::INFO,
    rbac::rolebinding::INFO,
    rbac::role::INFO,
    admissionregistration::validatingwebhookconfiguration::INFO,
    admissionregistration::mutatingwebhookconfiguration::INFO,
    admissionregistration::validatingadmissionpolicy::INFO,
    admissionregistration::validatingadmissionpolicybinding::INFO,
    admissionregistration::mutatingadmissionpolicy::INFO,
    admissionregistration::mutatingadmissionpolicybinding::INFO,
    coordination::lease::INFO,
    flowcontrol::flowschema::INFO,
    flowcontrol::prioritylevelconfiguration::INFO,
    apiextensions::INFO,
    apiregistration::apiservice::INFO,
    featuregates::feature::INFO,
    networkregistry::networkclaim::INFO,
    // Never stored: created and answered.
    authentication::SELF_SUBJECT_REVIEW_INFO,
    authentication::TOKEN_REVIEW_INFO,
    authorization::LOCAL_SUBJECT_ACCESS_REVIEW_INFO,
    authorization::SELF_SUBJECT_ACCESS_REVIEW_INFO,
    authorization::SELF_SUBJECT_RULES_REVIEW_INFO,
    authorization::SUBJECT_ACCESS_REVIEW_INFO,
];

/// Every built-in resource of this crate.
pub fn all() -> &'static [ResourceInfo] {
    RESOURCES
}

/// The resource `resource` served at `group`/`version`.
pub fn find(group: &str, version: &str, resource: &str) -> Option<&'static ResourceInfo> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.resource == resource)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_scopes_match_discovery() {
        let rows: Vec<(String, &str, &str, bool, Vec<&str>)> = all()
            .iter()
            .map(|r| {
                (
                    r.api_version(),
                    r.resource,
                    r.kind,
                    r.namespaced,
                    r.short_names.to_vec(),
                )
            })
            .collect();
        assert_eq!(
            rows,
            vec![
                ("v1".into(), "namespaces", "Namespace", false, vec!["ns"]),
                ("v1".into(), "configmaps", "ConfigMap", true, vec!["cm"]),
                ("v1".into(), "secrets", "Secret", true, vec![]),
                (
                    "v1".into(),
                    "serviceaccounts",
                    "ServiceAccount",
                    true,
                    vec!["sa"]
                ),
                ("v1".into(), "events", "Event", true, vec!["ev"]),
                (
                    "v1".into(),
                    "resourcequotas",
                    "ResourceQuota",
                    true,
                    vec!["quota"]
                ),
                (
                    "events.k8s.io/v1".into(),
                    "events",
                    "Event",
                    true,
                    vec!["ev"]
                ),
                (
                    "certificates.k8s.io/v1".into(),
                    "certificatesigningrequests",
                    "CertificateSigningRequest",
                    false,
                    vec!["csr"]
                ),
                (
                    "certificates.k8s.io/v1beta1".into(),
                    "clustertrustbundles",
                    "ClusterTrustBundle",
                    false,
                    vec![]
                ),
                (
                    "rbac.authorization.k8s.io/v1".into(),
                    "clusterrolebindings",
                    "ClusterRoleBinding",
                    false,
                    vec![]
                ),
                (
                    "rbac.authorization.k8s.io/v1".into(),
                    "clusterroles",
                    "ClusterRole",
                    false,
                    vec![]
                ),
                (
                    "rbac.authorization.k8s.io/v1".into(),
                    "rolebindings",
                    "RoleBinding",
                    true,
                    vec![]
                ),
                (
                    "rbac.authorization.k8s.io/v1".into(),
                    "roles",
                    "Role",
                    true,
                    vec![]
                ),
                (
                    "admissionregistration.k8s.io/v1".into(),
                    "validatingwebhookconfigurations",
                    "ValidatingWebhookConfiguration",
                    false,
                    vec![]
                ),
                (
                    "admissionregistration.k8s.io/v1".into(),
                    "mutatingwebhookconfigurations",
                    "MutatingWebhookConfiguration",
                    false,
                    vec![]
                ),
                (
                    "admissionregistration.k8s.io/v1".into(),
                    "validatingadmissionpolicies",
                    "ValidatingAdmissionPolicy",
                    false,
                    vec![]
                ),
                (
                    "admissionregistration.k8s.io/v1".into(),
                    "validatingadmissionpolicybindings",
                    "ValidatingAdmissionPolicyBinding",
                    false,
                    vec![]
                ),
                (
                    "admissionregistration.k8s.io/v1alpha1".into(),
                    "mutatingadmissionpolicies",
                    "MutatingAdmissionPolicy",
                    false,
                    vec![]
                ),
                (
                    "admissionregistration.k8s.io/v1alpha1".into(),
                    "mutatingadmissionpolicybindings",
                    "MutatingAdmissionPolicyBinding",
                    false,
                    vec![]
                ),
                (
                    "coordination.k8s.io/v1".into(),
                    "leases",
                    "Lease",
                    true,
                    vec![]
                ),
                (
                    "flowcontrol.apiserver.k8s.io/v1".into(),
                    "flowschemas",
                    "FlowSchema",
                    false,
                    vec![]
                ),
                (
                    "flowcontrol.apiserver.k8s.io/v1".into(),
                    "prioritylevelconfigurations",
                    "PriorityLevelConfiguration",
                    false,
                    vec![]
                ),
                (
                    "apiextensions.k8s.io/v1".into(),
                    "customresourcedefinitions",
                    "CustomResourceDefinition",
                    false,
                    vec!["crd", "crds"]
                ),
                (
                    "apiregistration.k8s.io/v1".into(),
                    "apiservices",
                    "APIService",
                    false,
                    vec![]
                ),
                (
                    "featuregates.genplane.io/v1alpha1".into(),
                    "features",
                    "Feature",
                    true,
                    vec![]
                ),
                (
                    "networkregistry.genplane.io/v1alpha1".into(),
                    "networkclaims",
                    "NetworkClaim",
                    false,
                    vec!["nc"]
                ),
                (
                    "authentication.k8s.io/v1".into(),
                    "selfsubjectreviews",
                    "SelfSubjectReview",
                    false,
                    vec![]
                ),
                (
                    "authentication.k8s.io/v1".into(),
                    "tokenreviews",
                    "TokenReview",
                    false,
                    vec![]
                ),
                (
                    "authorization.k8s.io/v1".into(),
                    "localsubjectaccessreviews",
                    "LocalSubjectAccessReview",
                    true,
                    vec![]
                ),
                (
                    "authorization.k8s.io/v1".into(),
                    "selfsubjectaccessreviews",
                    "SelfSubjectAccessReview",
                    false,
                    vec![]
                ),
                (
                    "authorization.k8s.io/v1".into(),
                    "selfsubjectrulesreviews",
                    "SelfSubjectRulesReview",
                    false,
                    vec![]
                ),
                (
                    "authorization.k8s.io/v1".into(),
                    "subjectaccessreviews",
                    "SubjectAccessReview",
                    false,
                    vec![]
                ),
            ]
        );
        for r in all() {
            assert_eq!(r.list_kind, format!("{}List", r.kind));
            let plural = match r.singular.strip_suffix('y') {
                Some(stem) => format!("{stem}ies"),
                None => format!("{}s", r.singular),
            };
            assert_eq!(plural, r.resource);
            let categories: &[&str] = if r.kind == "CustomResourceDefinition"
                || r.kind == "APIService"
                || r.group == "admissionregistration.k8s.io"
            {
                &["api-extensions"]
            } else {
                &[]
            };
            assert_eq!(r.categories, categories);
        }
    }

    #[test]
    fn reviews_are_only_created_and_never_stored() {
        let stored: Vec<bool> = all().iter().map(ResourceInfo::stored).collect();
        assert_eq!(stored.iter().filter(|s| !**s).count(), 6);
        for r in all().iter().filter(|r| !r.stored()) {
            assert_eq!(r.verbs, ["create"], "{}", r.resource);
            assert!(r.subresources.is_empty());
        }
        // TokenRequest is the body of a ServiceAccount's `token`, of its own group.
        let sa = find("", "v1", "serviceaccounts").unwrap();
        let token = sa.describe().subresources.remove(0);
        assert_eq!(
            (
                token.name.as_str(),
                token.group.as_deref(),
                token.version.as_deref(),
                token.kind.as_str()
            ),
            (
                "token",
                Some("authentication.k8s.io"),
                Some("v1"),
                "TokenRequest"
            )
        );
        assert!(!sa.subresources[0].body.unwrap().stored());
    }

    #[test]
    fn storage_keys_follow_kube_apiserver() {
        let ev = find("events.k8s.io", "v1", "events").unwrap();
        let core_ev = find("", "v1", "events").unwrap();
        assert_eq!(
            ev.storage_key("default", "e1"),
            "/registry/events/default/e1"
        );
        assert_eq!(
            ev.storage_key("default", "e1"),
            core_ev.storage_key("default", "e1")
        );
        assert_eq!(ev.storage_api_version, "v1");
        let ns = find("", "v1", "namespaces").unwrap();
        assert_eq!(
            ns.storage_key("ignored", "kube-system"),
            "/registry/namespaces/kube-system"
        );
        let lease = find("coordination.k8s.io", "v1", "leases").unwrap();
        assert_eq!(
            lease.storage_key("kube-system", "l"),
            "/registry/leases/kube-system/l"
        );
        assert!(find("", "v1", "leases").is_none());
        let rbac = "rbac.authorization.k8s.io";
        let role = find(rbac, "v1", "roles").unwrap();
        assert_eq!(role.storage_key("ns", "r"), "/registry/roles/ns/r");
        let cluster_role = find(rbac, "v1", "clusterroles").unwrap();
        assert_eq!(
            cluster_role.storage_key("ignored", "view"),
            "/registry/clusterroles/view"
        );
        let binding = find(rbac, "v1", "rolebindings").unwrap();
        assert_eq!(
            binding.storage_key("ns", "b"),
            "/registry/rolebindings/ns/b"
        );
        let cluster_binding = find(rbac, "v1", "clusterrolebindings").unwrap();
        assert_eq!(
            cluster_binding.storage_key("ignored", "admin"),
            "/registry/clusterrolebindings/admin"
        );
        for r in [role, cluster_role, binding, cluster_binding] {
            assert_eq!(r.verbs, ALL_VERBS);
            assert_eq!(r.storage_api_version, "rbac.authorization.k8s.io/v1");
        }
    }

    #[test]
    fn custom_resource_definitions() {
        let crd = find("apiextensions.k8s.io", "v1", "customresourcedefinitions").unwrap();
        assert_eq!(
            crd.storage_key("ignored", "widgets.example.com"),
            "/registry/apiextensions.k8s.io/customresourcedefinitions/widgets.example.com"
        );
        assert_eq!(crd.verbs, ALL_VERBS);
        assert_eq!(crd.singular, "customresourcedefinition");
        assert_eq!(crd.subresources.len(), 1);
        assert_eq!(crd.subresources[0].name, "status");
        assert_eq!(crd.subresources[0].verbs, STATUS_VERBS);
        assert_eq!(crd.storage_api_version, "apiextensions.k8s.io/v1");
        let columns: Vec<&str> = crd.hooks.columns.iter().map(|c| c.name).collect();
        assert_eq!(columns, ["Name", "Created At"]);
    }

    #[test]
    fn subresources_and_verbs() {
        let ns = find("", "v1", "namespaces").unwrap();
        let subs: Vec<&str> = ns.subresources.iter().map(|s| s.name).collect();
        assert_eq!(subs, ["status", "finalize"]);
        assert!(!ns.verbs.contains(&"deletecollection"));
        let quota = find("", "v1", "resourcequotas").unwrap();
        assert_eq!(quota.subresources[0].verbs, ["get", "patch", "update"]);
        let cm = find("", "v1", "configmaps").unwrap();
        assert!(cm.subresources.is_empty());
        assert_eq!(cm.verbs, ALL_VERBS);
    }
}
