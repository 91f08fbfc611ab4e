//! The request body's transport: every client reads the answer, even one given before its body
//! was read (a refusal, a body too large), and HEAD answers carry no body.
//!
//! The body travels down the chain as [`Unread`]; what a handler leaves unread comes back here,
//! and is read and dropped before the answer (up to [`DRAIN_BYTES`] within [`DRAIN_TIME`],
//! while the client keeps sending; a request past its deadline is answered at once), because a
//! client still sending would otherwise not read the answer. On HTTP/1.1 the connection would
//! be reset under it (and closes after a larger body). On HTTP/2 the stream would end while the
//! client uploads: `RST_STREAM(NO_ERROR)` after the answer is what HTTP/2 allows and what Go
//! sends, and Go's client reads the answer, but curl 7.88 (nghttp2 1.52) fails its upload with
//! "Stream error in the HTTP/2 framing layer" (exit 92) and shows nothing; with the body read to
//! its end the stream closes cleanly and curl shows the answer. What is left past the bounds is
//! kept until the answer is sent, and the stream then ends with `RST_STREAM(NO_ERROR)`.

use std::time::Duration;

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use tokio::sync::oneshot;

use crate::body::{ResponseBody, Unread};

/// The most of an unread HTTP/1.1 request body read (and dropped) so that its client reads the
/// answer: a little more than the largest body a request may have.
pub const DRAIN_BYTES: usize = 4 * 1024 * 1024;
/// The longest an unread HTTP/1.1 request body is read for before the answer.
pub const DRAIN_TIME: Duration = Duration::from_secs(5);
/// How long the drain of an unread body waits for more of it before it gives up.
const DRAIN_PAUSE: Duration = Duration::from_millis(500);

/// What the transport needs to know of a request once it is answered.
#[derive(Debug)]
pub(crate) struct Transport {
    version: hyper::Version,
    head: bool,
    returned: oneshot::Receiver<Incoming>,
}

/// The request with its body as [`Unread`], and its transport.
pub(crate) fn wrap(request: Request<Incoming>) -> (Request<Unread>, Transport) {
    let (parts, body) = request.into_parts();
    let (body, returned) = Unread::new(body);
    let transport = Transport {
        version: parts.version,
        head: parts.method == hyper::Method::HEAD,
        returned,
    };
    (Request::from_parts(parts, body), transport)
}

impl Transport {
    /// The answer as it goes out: after what is left of the body on HTTP/1.1, holding it on
    /// HTTP/2, without a body for HEAD.
    pub(crate) async fn finish(
        mut self,
        mut response: Response<ResponseBody>,
    ) -> Response<ResponseBody> {
        if let Ok(unread) = self.returned.try_recv() {
            // A request past its deadline may be one whose body stalled: its answer is not held
            // up further.
            let left = if response.status() == StatusCode::GATEWAY_TIMEOUT {
                Some(unread)
            } else {
                drain(unread).await
            };
            // On HTTP/2, dropping what is left ends the stream: after the answer.
            if let Some(left) = left
                && self.version == hyper::Version::HTTP_2
            {
                let (parts, body) = response.into_parts();
                response = Response::from_parts(parts, body.guarded(Holding { _body: left }));
            }
        }
        if self.head {
            let (mut parts, body) = response.into_parts();
            if let Some(bytes) = body.bytes() {
                parts
                    .headers
                    .insert(hyper::header::CONTENT_LENGTH, bytes.len().into());
            }
            response = Response::from_parts(parts, ResponseBody::Full(None));
        }
        response
    }
}

/// Reads and drops what is left of a request body, within [`DRAIN_BYTES`] and [`DRAIN_TIME`],
/// as long as the client keeps sending (a pause of [`DRAIN_PAUSE`] ends it); the body when it
/// did not end (or failed) meanwhile.
async fn drain(mut body: Incoming) -> Option<Incoming> {
    let read = async {
        let mut total = 0usize;
        while total <= DRAIN_BYTES {
            let next = http_body_util::BodyExt::frame(&mut body);
            match tokio::time::timeout(DRAIN_PAUSE, next).await {
                Ok(Some(Ok(frame))) => {
                    total += frame.data_ref().map_or(0, bytes::Bytes::len);
                }
                Ok(None) => return true,
                _ => return false,
            }
        }
        false
    };
    let ended = tokio::time::timeout(DRAIN_TIME, read)
        .await
        .unwrap_or(false);
    (!ended).then_some(body)
}

/// An unread request body kept until the answer has been sent (HTTP/2: dropping it ends the
/// stream, which must come after the answer).
struct Holding {
    _body: Incoming,
}
