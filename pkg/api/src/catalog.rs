//! The resource catalog: every built-in resource with what discovery, routing and storage need
//! to know about it, and the pure hooks the generic registry runs for it. The types of an
//! entry are defined in [`crate::resource`] and re-exported here.

use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::validation::field::ErrorList;
use serde_json::Value;

use crate::decode::{Decoded, Struct};
pub use crate::resource::{
    ALL_VERBS, Context, FeatureGates, GatesOff, Hooks, ResourceDescription, ResourceInfo,
    STATUS_VERBS, Subresource, SubresourceDescription, SubresourceRules, identity, no_default,
    no_field_values, no_prepare, no_prepare_update, no_row, no_update, nothing_pending,
};
use crate::{
    admissionregistration, apiextensions, authentication, authorization, coordination, core,
    events, rbac,
};

static RESOURCES: &[ResourceInfo] = &[
    core::namespace::INFO,
    core::configmap::INFO,
    core::secret::INFO,
    core::serviceaccount::INFO,
    core::event::INFO,
    core::resourcequota::INFO,
    events::INFO,
    rbac::clusterrolebinding::INFO,
    rbac::clusterrole::INFO,
    rbac::rolebinding::INFO,
    rbac::role::INFO,
    admissionregistration::validatingwebhookconfiguration::INFO,
    admissionregistration::mutatingwebhookconfiguration::INFO,
    coordination::lease::INFO,
    apiextensions::INFO,
];

/// The hooks of a kind that is only created, never stored (a review): decoding and
/// validation on create, nothing else.
const fn create_only(
    decode: fn(&Value) -> Result<Decoded, ApiError>,
    validate: fn(&Value) -> Result<ErrorList, ApiError>,
) -> Hooks {
    Hooks {
        decode,
        default: no_default,
        prepare_for_create: no_prepare,
        prepare_for_update: no_prepare_update,
        validate,
        validate_update: no_update,
        to_storage: identity,
        from_storage: identity,
        field_selectors: &[],
        field_values: no_field_values,
        columns: &[],
        row: no_row,
        pending_finalization: nothing_pending,
        mark_deleting: no_default,
    }
}

/// A review kind: created, answered, never stored.
// One argument per name of the kind, as the table below reads best.
#[allow(clippy::too_many_arguments)]
const fn review(
    group: &'static str,
    kind: &'static str,
    list_kind: &'static str,
    resource: &'static str,
    singular: &'static str,
    schema: &'static Struct,
    openapi_schema: fn(&mut schemars::generate::SchemaGenerator) -> String,
    hooks: Hooks,
) -> ResourceInfo {
    ResourceInfo {
        group,
        version: "v1",
        kind,
        list_kind,
        resource,
        singular,
        short_names: &[],
        namespaced: false,
        create_on_update: false,
        verbs: &["create"],
        subresources: &[],
        categories: &[],
        storage_prefix: "",
        storage_api_version: "",
        schema,
        protobuf: true,
        extensions: &[],
        openapi_schema,
        hooks,
    }
}

static REVIEWS: &[ResourceInfo] = &[
    review(
        "authentication.k8s.io",
        "SelfSubjectReview",
        "SelfSubjectReviewList",
        "selfsubjectreviews",
        "selfsubjectreview",
        &authentication::SELF_SUBJECT_REVIEW,
        crate::openapi::schema_of::<k8s_openapi::api::authentication::v1::SelfSubjectReview>,
        create_only(
            authentication::decode_self_subject_review,
            authentication::validate_self_subject_review,
        ),
    ),
    review(
        "authentication.k8s.io",
        "TokenReview",
        "TokenReviewList",
        "tokenreviews",
        "tokenreview",
        &authentication::TOKEN_REVIEW,
        crate::openapi::schema_of::<k8s_openapi::api::authentication::v1::TokenReview>,
        create_only(
            authentication::decode_token_review,
            authentication::validate_token_review,
        ),
    ),
    ResourceInfo {
        namespaced: true,
        ..review(
            "authorization.k8s.io",
            "LocalSubjectAccessReview",
            "LocalSubjectAccessReviewList",
            "localsubjectaccessreviews",
            "localsubjectaccessreview",
            &authorization::LOCAL_SUBJECT_ACCESS_REVIEW,
            crate::openapi::schema_of::<
                k8s_openapi::api::authorization::v1::LocalSubjectAccessReview,
            >,
            // The namespace comes from the URL: the server validates with it.
            create_only(
                authorization::decode_local_subject_access_review,
                no_validation,
            ),
        )
    },
    review(
        "authorization.k8s.io",
        "SelfSubjectAccessReview",
        "SelfSubjectAccessReviewList",
        "selfsubjectaccessreviews",
        "selfsubjectaccessreview",
        &authorization::SELF_SUBJECT_ACCESS_REVIEW,
        crate::openapi::schema_of::<k8s_openapi::api::authorization::v1::SelfSubjectAccessReview>,
        create_only(
            authorization::decode_self_subject_access_review,
            authorization::validate_self_subject_access_review,
        ),
    ),
    review(
        "authorization.k8s.io",
        "SelfSubjectRulesReview",
        "SelfSubjectRulesReviewList",
        "selfsubjectrulesreviews",
        "selfsubjectrulesreview",
        &authorization::SELF_SUBJECT_RULES_REVIEW,
        crate::openapi::schema_of::<k8s_openapi::api::authorization::v1::SelfSubjectRulesReview>,
        create_only(
            authorization::decode_self_subject_rules_review,
            authorization::validate_self_subject_rules_review,
        ),
    ),
    review(
        "authorization.k8s.io",
        "SubjectAccessReview",
        "SubjectAccessReviewList",
        "subjectaccessreviews",
        "subjectaccessreview",
        &authorization::SUBJECT_ACCESS_REVIEW,
        crate::openapi::schema_of::<k8s_openapi::api::authorization::v1::SubjectAccessReview>,
        create_only(
            authorization::decode_subject_access_review,
            authorization::validate_subject_access_review,
        ),
    ),
];

/// The body of `serviceaccounts/<name>/token`: an authentication.k8s.io/v1 TokenRequest.
pub static TOKEN_REQUEST: ResourceInfo = ResourceInfo {
    namespaced: true,
    create_on_update: false,
    ..review(
        "authentication.k8s.io",
        "TokenRequest",
        "TokenRequestList",
        "tokenrequests",
        "tokenrequest",
        &authentication::TOKEN_REQUEST,
        crate::openapi::schema_of::<k8s_openapi::api::authentication::v1::TokenRequest>,
        create_only(authentication::decode_token_request, no_validation),
    )
};

fn no_validation(_: &Value) -> Result<ErrorList, ApiError> {
    Ok(ErrorList::new())
}

/// The review kinds (authentication.k8s.io and authorization.k8s.io): served for `create`
/// only, answered by the server, never stored.
pub fn reviews() -> &'static [ResourceInfo] {
    REVIEWS
}

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
                    "coordination.k8s.io/v1".into(),
                    "leases",
                    "Lease",
                    true,
                    vec![]
                ),
                (
                    "apiextensions.k8s.io/v1".into(),
                    "customresourcedefinitions",
                    "CustomResourceDefinition",
                    false,
                    vec!["crd", "crds"]
                ),
            ]
        );
        for r in all() {
            assert_eq!(r.list_kind, format!("{}List", r.kind));
            assert_eq!(format!("{}s", r.singular), r.resource);
            let categories: &[&str] = if r.kind == "CustomResourceDefinition"
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
