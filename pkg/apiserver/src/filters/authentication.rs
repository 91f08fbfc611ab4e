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

/// The user a request authenticates as, or the answer refusing it.
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
    // Derived once per connection: every request of it presents the same chain.
    let certificate = request
        .extensions()
        .get::<PeerCertificates>()
        .and_then(|peer| peer.derived(|chain| security.authentication.identify(chain)));
    security
        .authentication
        .authenticate(request.headers(), certificate.as_deref())
        .map_err(|error| {
            audit::failed_authentication(auditor, info, request, arrival, error.code);
            refused(&error, request.headers())
        })
}
