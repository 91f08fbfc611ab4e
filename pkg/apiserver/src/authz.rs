//! Authorization at the HTTP boundary: the attributes of a request, the chain's decision
//! (members of `system:masters` may do anything, as upstream's privileged-group authorizer in
//! front of RBAC; then the configured authorizer), and upstream's `Forbidden` answer.

use std::sync::Arc;

use genplane_apimachinery::errors::{ApiError, Status, StatusReason};
use genplane_apimachinery::schema::GroupResource;
use genplane_authentication::{SYSTEM_MASTERS, UserInfo};
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
}

impl Security {
    /// Security with `authentication` and `authorizer`, issuing no tokens.
    pub fn new(authentication: Authentication, authorizer: Arc<dyn Authorizer>) -> Self {
        Self {
            authentication,
            authorizer,
            token_requests: None,
            oidc: None,
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

/// The decision of the chain on `attributes`, with its reason.
pub fn decide(authorizer: &dyn Authorizer, attributes: &Attributes) -> (Decision, String) {
    if attributes.user.in_group(SYSTEM_MASTERS) {
        return (Decision::Allow, String::new());
    }
    authorizer.authorize(attributes)
}

/// Allows `attributes`, or answers 403 as upstream does.
pub fn authorize(authorizer: &dyn Authorizer, attributes: &Attributes) -> Result<(), ApiError> {
    match decide(authorizer, attributes) {
        (Decision::Allow, _) => Ok(()),
        (_, reason) => Err(forbidden(attributes, &reason)),
    }
}

/// Upstream's message for a refused request: who cannot do what, where.
pub fn forbidden_message(attributes: &Attributes) -> String {
    let user = &attributes.user.username;
    let verb = &attributes.verb;
    if !attributes.resource_request {
        return format!("User {user:?} cannot {verb} path {:?}", attributes.path);
    }
    let mut resource = attributes.resource.clone();
    if !attributes.subresource.is_empty() {
        resource = format!("{resource}/{}", attributes.subresource);
    }
    let group = &attributes.api_group;
    if attributes.namespace.is_empty() {
        format!(
            "User {user:?} cannot {verb} resource {resource:?} in API group {group:?} at the cluster scope"
        )
    } else {
        format!(
            "User {user:?} cannot {verb} resource {resource:?} in API group {group:?} in the namespace {:?}",
            attributes.namespace
        )
    }
}

/// The 403 answer to a refused request (`reason`, when the authorizer gave one, is appended).
pub fn forbidden(attributes: &Attributes, reason: &str) -> ApiError {
    let mut why = forbidden_message(attributes);
    if !reason.is_empty() {
        why = format!("{why}: {reason}");
    }
    if !attributes.resource_request {
        return Status::failure(StatusReason::Forbidden, format!("forbidden: {why}")).into();
    }
    let resource = GroupResource::new(&attributes.api_group, &attributes.resource);
    Status::forbidden(&resource, &attributes.name, &why).into()
}

#[cfg(test)]
mod tests {
    use genplane_authorization::AlwaysAllow;

    use super::*;

    #[derive(Debug)]
    struct Nobody;

    impl Authorizer for Nobody {
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
    fn masters_may_do_anything() {
        let admin = UserInfo::authenticated("admin", vec![SYSTEM_MASTERS.into()]);
        let info = request("DELETE", "/api/v1/namespaces/default");
        assert!(authorize(&Nobody, &attributes(&info, &admin)).is_ok());
        let bob = UserInfo::authenticated("bob", vec![]);
        assert!(authorize(&AlwaysAllow, &attributes(&info, &bob)).is_ok());
    }
}
