//! The `authorizer` variable of admission expressions (ValidatingAdmissionPolicy,
//! MutatingAdmissionPolicy, webhook match conditions): the server's authorizer (RBAC) asked
//! about the request's user, or about a service account with `authorizer.serviceAccount(ns,
//! name)` (`system:serviceaccount:<ns>:<name>` in `system:serviceaccounts`,
//! `system:serviceaccounts:<ns>` and `system:authenticated`), through
//! [`genplane_cel::authz`].

use std::sync::Arc;

use genplane_authentication::UserInfo;
use genplane_authorization::Authorizer;
use genplane_cel::CelValue;
use genplane_cel::authz::{Answer, Check, Target};

use crate::Attributes;

/// What answers a request's checks.
#[derive(Debug)]
struct RequestAuthorizer {
    authorizer: Option<Arc<dyn Authorizer>>,
    user: UserInfo,
}

/// A service account as a user, as its tokens authenticate it.
fn service_account(namespace: &str, name: &str) -> UserInfo {
    UserInfo {
        username: format!("system:serviceaccount:{namespace}:{name}"),
        groups: vec![
            "system:serviceaccounts".to_owned(),
            format!("system:serviceaccounts:{namespace}"),
            genplane_authentication::SYSTEM_AUTHENTICATED.to_owned(),
        ],
        ..UserInfo::default()
    }
}

impl genplane_cel::authz::Checker for RequestAuthorizer {
    fn check(&self, check: &Check) -> Answer {
        let Some(authorizer) = &self.authorizer else {
            return Answer {
                allowed: false,
                reason: String::new(),
                error: Some("no authorizer is configured".to_owned()),
            };
        };
        let user = match &check.service_account {
            Some((namespace, name)) => service_account(namespace, name),
            None => self.user.clone(),
        };
        let attributes = match &check.target {
            Target::Path(path) => {
                genplane_authorization::Attributes::non_resource(user, &check.verb, path)
            }
            Target::Resource {
                group,
                resource,
                subresource,
                namespace,
                name,
            } => genplane_authorization::Attributes {
                subresource: subresource.clone(),
                ..genplane_authorization::Attributes::resource(
                    user,
                    &check.verb,
                    group,
                    resource,
                    namespace,
                    name,
                )
            },
        };
        let (decision, reason) = authorizer.authorize(&attributes);
        Answer {
            allowed: decision == genplane_authorization::Decision::Allow,
            reason,
            error: None,
        }
    }
}

/// The value of `authorizer` for the expressions of a write of `attributes`
/// (`authorizer.requestResource`: its resource, subresource, namespace and name).
pub(crate) fn value(attributes: &Attributes<'_>) -> CelValue {
    let request = attributes.request;
    let resource = Target::Resource {
        group: request.resource.group.clone(),
        resource: request.resource.resource.clone(),
        subresource: request.subresource.clone(),
        namespace: attributes.namespace.to_owned(),
        name: attributes.name.to_owned(),
    };
    genplane_cel::authz::value(
        Arc::new(RequestAuthorizer {
            authorizer: request.authorizer.clone(),
            user: request.user.clone(),
        }),
        Some(resource),
    )
}
