//! Authentication: who makes the request, from its client certificate, bearer token (static
//! token file, service-account JWT) or none (`system:anonymous`), by the server's
//! [`Authentication`](genplane_authentication::request::Authentication). A token nobody
//! recognizes is a 401, audited as such. A server built without security lets everyone in as
//! nobody.

use genplane_audit::Auditor;
use genplane_authentication::UserInfo;
use genplane_component_base::http::PeerCertificates;
use hyper::Request;

use super::audit::{self, Arrival};
use super::{Refusal, refused};
use crate::request_info::RequestInfo;
use crate::security::Security;

/// The user a request authenticates as, or the answer refusing it, from the authenticators
/// that answer at once (see [`delegating`] for the others).
pub(crate) fn authenticate<B>(
    security: Option<&Security>,
    auditor: Option<&Auditor>,
    info: &RequestInfo,
    request: &Request<B>,
    arrival: Arrival<'_>,
) -> Result<UserInfo, Refusal> {
    let Some(security) = security else {
        return Ok(UserInfo::default());
    };
    let certificate = certificate(security, request);
    let answer = security
        .authentication
        .authenticate(request.headers(), certificate.as_deref());
    settle(answer, auditor, info, request, arrival)
}

/// The security of a server whose token authenticators ask another server (a TokenReview),
/// when it is one: its requests are authenticated with
/// [`Authentication::authenticate_delegated`](genplane_authentication::request::Authentication::authenticate_delegated)
/// and [`settle`]d.
pub(crate) fn delegating(security: Option<&Security>) -> Option<&Security> {
    security.filter(|s| s.authentication.delegates())
}

/// What the client certificate of `request`'s connection proves, derived once per connection
/// (every request of it presents the same chain).
pub(crate) fn certificate<B>(
    security: &Security,
    request: &Request<B>,
) -> Option<std::sync::Arc<genplane_authentication::request::CertificateIdentity>> {
    request
        .extensions()
        .get::<PeerCertificates>()
        .and_then(|peer| peer.derived(|chain| security.authentication.identify(chain)))
}

/// The user `answer` names, or the answer refusing the request (audited).
pub(crate) fn settle<B>(
    answer: Result<UserInfo, genplane_apimachinery::errors::ApiError>,
    auditor: Option<&Auditor>,
    info: &RequestInfo,
    request: &Request<B>,
    arrival: Arrival<'_>,
) -> Result<UserInfo, Refusal> {
    answer.map_err(|error| {
        audit::failed_authentication(auditor, info, request, arrival, error.code);
        refused(&error, request.headers())
    })
}
