//! Authentication: who makes the request, from its client certificate, bearer token (static
//! token file, service-account JWT) or none (`system:anonymous`), by the server's
//! [`crate::authn::Authenticator`]. A token nobody recognizes is a 401, audited as such.

use genplane_apimachinery::errors::ApiError;
use genplane_audit::Auditor;
use genplane_authentication::UserInfo;
use genplane_component_base::http::PeerCertificates;
use hyper::Request;

use super::audit::{self, Arrival};
use crate::authz::Security;
use crate::request_info::RequestInfo;

/// The user a request authenticates as, or its refusal.
pub(crate) fn authenticate<B>(
    security: &Security,
    auditor: Option<&Auditor>,
    info: &RequestInfo,
    request: &Request<B>,
    arrival: Arrival<'_>,
) -> Result<UserInfo, ApiError> {
    let peer = request.extensions().get::<PeerCertificates>();
    security
        .authentication
        .authenticate(request.headers(), peer)
        .inspect_err(|error| {
            audit::failed_authentication(auditor, info, request, arrival, error.code);
        })
}
