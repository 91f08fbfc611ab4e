//! Authorization at the HTTP boundary: the attributes of a request, the authorizer's
//! decision, and upstream's `Forbidden` answer.

use std::sync::Arc;

use genplane_apimachinery::errors::{ApiError, Status, StatusReason};
use genplane_apimachinery::schema::GroupResource;
use genplane_authentication::UserInfo;
use genplane_authorization::{Attributes, Authorizer, Decision};

use crate::authn::{Authentication, OidcDocuments, TokenRequests};
use crate::request_info::RequestInfo;

/// Who may make requests, and what they may do.
#[derive(Clone, Debug)]
pub struct Security {
    /// The authentication chain.
    pub authentication: Authentication,
    /// The authorizer (RBAC, or AlwaysAllow).
    pub authorizer: Arc<dyn Authorizer>,
    /// The issuer of service-account tokens, when the server issues them.
    pub token_requests: Option<Arc<dyn TokenRequests>>,
    /// The issuer's discovery documents, when served.
    pub oidc: Option<OidcDocuments>,
    /// Checks of writes against who makes them (RBAC's escalation prevention), if any.
    pub escalation: Option<Arc<dyn EscalationChecks>>,
}

/// Checks of writes that depend on who writes (RBAC's escalation prevention): the check for
/// a write to `group`/`resource` in `namespace` by `user`, when the resource has one.
pub trait EscalationChecks: Send + Sync + std::fmt::Debug {
    /// The check the store runs on the final object of this write, if any.
    fn check_for(
        &self,
        group: &str,
        resource: &str,
        namespace: &str,
        user: &UserInfo,
    ) -> Option<genplane_registry::EscalationCheck>;
}

impl Security {
    /// Security with `authentication` and `authorizer`, issuing no tokens.
    pub fn new(authentication: Authentication, authorizer: Arc<dyn Authorizer>) -> Self {
        Self {
            authentication,
            authorizer,
            token_requests: None,
            oidc: None,
            escalation: None,
        }
    }
}

/// The authorization attributes of `request` made by `user`.
pub fn attributes(request: &RequestInfo, user: &UserInfo) -> Attributes {
    Attributes {
        user: user.clone(),
        verb: request.verb.clone(),
        namespace: request.namespace.clone(),
        api_group: request.api_group.clone(),
        api_version: request.api_version.clone(),
        resource: request.resource.clone(),
        subresource: request.subresource.clone(),
        name: request.name.clone(),
        path: request.path.clone(),
        resource_request: request.is_resource_request,
    }
}

/// The decision of the authorizer on `attributes`, with its reason.
pub fn decide(authorizer: &dyn Authorizer, attributes: &Attributes) -> (Decision, String) {
    authorizer.authorize(attributes)
}

/// Allows `attributes`, or answers 403 as upstream does.
pub fn authorize(authorizer: &dyn Authorizer, attributes: &Attributes) -> Result<(), ApiError> {
    match decide(authorizer, attributes) {
        (Decision::Allow, _) => Ok(()),
        (_, reason) => Err(forbidden(attributes, &reason)),
    }
}

/// The 403 answer to a refused request (`reason`, when the authorizer gave one, is appended).
pub fn forbidden(attributes: &Attributes, reason: &str) -> ApiError {
    let why = genplane_authorization::forbidden_reason(attributes, reason);
    if !attributes.resource_request {
        return Status::failure(StatusReason::Forbidden, format!("forbidden: {why}")).into();
    }
    let resource = GroupResource::new(&attributes.api_group, &attributes.resource);
    Status::forbidden(&resource, &attributes.name, &why).into()
}

#[cfg(test)]
mod tests {
    use genplane_authentication::SYSTEM_MASTERS;
    use genplane_authorization::AlwaysAllow;

    use super::*;

    #[derive(Debug)]
    struct Nobody;

    impl Authorizer for Nobody {
        fn rules_for(&self, _: &UserInfo, _: &str) -> genplane_authorization::RulesInfo {
            genplane_authorization::RulesInfo::default()
        }

        fn authorize(&self, _: &Attributes) -> (Decision, String) {
            (Decision::NoOpinion, String::new())
        }
    }

    fn request(method: &str, path: &str) -> RequestInfo {
        crate::request_info::parse(method, path, None)
    }

    #[test]
    fn forbidden_answers_read_as_upstream() {
        let bob = UserInfo::authenticated("bob", vec![]);
        let cases = [
            (
                request("GET", "/api/v1/namespaces/default/configmaps"),
                "configmaps is forbidden: User \"bob\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\"",
            ),
            (
                request("GET", "/api/v1/namespaces/kube-system/secrets/s1"),
                "secrets \"s1\" is forbidden: User \"bob\" cannot get resource \"secrets\" in API group \"\" in the namespace \"kube-system\"",
            ),
            (
                request("PUT", "/api/v1/namespaces/n1/finalize"),
                "namespaces \"n1\" is forbidden: User \"bob\" cannot update resource \"namespaces/finalize\" in API group \"\" in the namespace \"n1\"",
            ),
            (
                request("GET", "/apis/coordination.k8s.io/v1/leases"),
                "leases.coordination.k8s.io is forbidden: User \"bob\" cannot list resource \"leases\" in API group \"coordination.k8s.io\" at the cluster scope",
            ),
            (
                request("GET", "/metrics"),
                "forbidden: User \"bob\" cannot get path \"/metrics\"",
            ),
        ];
        for (info, message) in cases {
            let error = authorize(&Nobody, &attributes(&info, &bob)).unwrap_err();
            assert_eq!(error.code, 403);
            assert_eq!(error.message, message);
        }
    }

    #[test]
    fn allowed_requests_pass() {
        let bob = UserInfo::authenticated("bob", vec![]);
        let info = request("DELETE", "/api/v1/namespaces/default");
        assert!(authorize(&AlwaysAllow, &attributes(&info, &bob)).is_ok());
        let masters = genplane_authorization::PrivilegedGroups::new([SYSTEM_MASTERS]);
        let admin = UserInfo::authenticated("admin", vec![SYSTEM_MASTERS.into()]);
        assert!(authorize(&masters, &attributes(&info, &admin)).is_ok());
        assert_eq!(
            authorize(&masters, &attributes(&info, &bob))
                .unwrap_err()
                .code,
            403
        );
    }
}
