//! Authorization: may the user do what the request asks (`system:masters`, then RBAC or
//! `AlwaysAllow`)? The decision and its reason are annotated on the audit record, as upstream
//! annotates `authorization.k8s.io/decision` and `/reason`; a refusal is a 403 naming the
//! attributes.

use genplane_apimachinery::errors::{ApiError, Status, StatusReason};
use genplane_apimachinery::schema::GroupResource;
use genplane_audit::AuditRecord;
use genplane_authentication::UserInfo;
use genplane_authorization::{Attributes, Authorizer, Decision};

use hyper::HeaderMap;

use super::{Refusal, audit, refused};
use crate::request_info::RequestInfo;
use crate::security::Security;

/// Lets the request through, or answers 403 (the refusal completes the audit record). A
/// server built without security lets every request through.
pub(crate) async fn allow(
    security: Option<&Security>,
    info: &RequestInfo,
    headers: &HeaderMap,
    user: &UserInfo,
    record: Option<&AuditRecord>,
) -> Result<(), Refusal> {
    let Some(security) = security else {
        return Ok(());
    };
    let attributes = attributes(info, user);
    let (decision, reason) =
        genplane_authorization::decide(security.authorizer.as_ref(), &attributes).await;
    let allowed = decision == Decision::Allow;
    if let Some(record) = record {
        record.annotate(
            genplane_audit::DECISION_ANNOTATION,
            if allowed {
                genplane_audit::DECISION_ALLOW
            } else {
                genplane_audit::DECISION_FORBID
            },
        );
        if !reason.is_empty() {
            record.annotate(genplane_audit::REASON_ANNOTATION, &reason);
        }
    }
    if allowed {
        Ok(())
    } else {
        let refusal = refused(&forbidden(&attributes, &reason), headers);
        Err(Box::new(audit::finish(record.cloned(), info, *refusal)))
    }
}

/// The authorization attributes of `request` made by `user`.
pub(crate) fn attributes(request: &RequestInfo, user: &UserInfo) -> Attributes {
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

/// Allows `attributes`, or answers 403 as upstream does.
pub(crate) async fn authorize(
    authorizer: &dyn Authorizer,
    attributes: &Attributes,
) -> Result<(), ApiError> {
    match genplane_authorization::decide(authorizer, attributes).await {
        (Decision::Allow, _) => Ok(()),
        (_, reason) => Err(forbidden(attributes, &reason)),
    }
}

/// The 403 answer to a refused request (`reason`, when the authorizer gave one, is appended).
pub(crate) fn forbidden(attributes: &Attributes, reason: &str) -> ApiError {
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

    #[tokio::test]
    async fn forbidden_answers_read_as_upstream() {
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
            let error = authorize(&Nobody, &attributes(&info, &bob))
                .await
                .unwrap_err();
            assert_eq!(error.code, 403);
            assert_eq!(error.message, message);
        }
    }

    #[tokio::test]
    async fn allowed_requests_pass() {
        let bob = UserInfo::authenticated("bob", vec![]);
        let info = request("DELETE", "/api/v1/namespaces/default");
        assert!(
            authorize(&AlwaysAllow, &attributes(&info, &bob))
                .await
                .is_ok()
        );
        let masters = genplane_authorization::PrivilegedGroups::new([SYSTEM_MASTERS]);
        let admin = UserInfo::authenticated("admin", vec![SYSTEM_MASTERS.into()]);
        assert!(
            authorize(&masters, &attributes(&info, &admin))
                .await
                .is_ok()
        );
        assert_eq!(
            authorize(&masters, &attributes(&info, &bob))
                .await
                .unwrap_err()
                .code,
            403
        );
    }
}
