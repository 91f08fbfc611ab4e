//! Request bodies (as received, or already read for the audit log) and response bodies: whole,
//! or streamed from a channel (watches).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::mpsc;

/// What is done with a request body once it is read (the audit log records it).
pub type OnRead = Box<dyn FnOnce(&[u8]) + Send>;

/// The body of a request: still to be read from the connection (by the handler, within the
/// request's limits and timeout), possibly with something to do once it is, or already read.
pub enum RequestBody {
    /// As received.
    Incoming(Unread),
    /// As received; the function sees the bytes once the handler has read them.
    Recorded(Unread, OnRead),
    /// Read already.
    Read(Bytes),
}

/// A request body still on the connection. If it is dropped before its end (a request refused
/// before its body was read, or one whose body is too large), what is left goes back to the
/// server through the receiver [`Unread::new`] returned: the client must still get the
/// answer, which on HTTP/1.1 means reading what it sends first (see
/// [`crate::ApiServer::handle`]).
pub struct Unread {
    body: Option<hyper::body::Incoming>,
    back: Option<tokio::sync::oneshot::Sender<hyper::body::Incoming>>,
}

impl std::fmt::Debug for Unread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Unread")
    }
}

impl Unread {
    /// `body`, and where what is left of it goes when it is dropped unread.
    pub fn new(
        body: hyper::body::Incoming,
    ) -> (Self, tokio::sync::oneshot::Receiver<hyper::body::Incoming>) {
        let (back, returned) = tokio::sync::oneshot::channel();
        (
            Self {
                body: Some(body),
                back: Some(back),
            },
            returned,
        )
    }

    /// The next chunk of data, `None` at the end (trailers are skipped).
    pub async fn data(&mut self) -> Option<Result<Bytes, hyper::Error>> {
        use http_body_util::BodyExt as _;
        loop {
            let body = self.body.as_mut()?;
            match body.frame().await {
                None => {
                    // Read to its end: nothing goes back.
                    self.body = None;
                    return None;
                }
                Some(Err(e)) => {
                    self.body = None;
                    return Some(Err(e));
                }
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        return Some(Ok(data));
                    }
                }
            }
        }
    }
}

impl Drop for Unread {
    fn drop(&mut self) {
        if let (Some(body), Some(back)) = (self.body.take(), self.back.take())
            && !hyper::body::Body::is_end_stream(&body)
        {
            let _ = back.send(body);
        }
    }
}

impl std::fmt::Debug for RequestBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RequestBody::Incoming(_) => "RequestBody::Incoming",
            RequestBody::Recorded(..) => "RequestBody::Recorded",
            RequestBody::Read(_) => "RequestBody::Read",
        })
    }
}

/// The body of a response: bytes held in memory, or chunks sent through a channel.
#[derive(Debug)]
pub enum ResponseBody {
    /// The whole body.
    Full(Option<Bytes>),
    /// Chunks as they are sent; the body ends when the sender is dropped.
    Stream(mpsc::Receiver<Bytes>),
    /// Another body, with something that lives as long as the body is being sent (a metric
    /// guard, say): it is dropped when the response ends or the client goes away.
    Guarded(Box<ResponseBody>, Box<dyn std::any::Any + Send + Sync>),
}

impl ResponseBody {
    /// A body of `bytes`.
    pub fn full(bytes: impl Into<Bytes>) -> Self {
        ResponseBody::Full(Some(bytes.into()))
    }

    /// A streamed body and the sender that feeds it.
    pub fn channel(buffer: usize) -> (mpsc::Sender<Bytes>, Self) {
        let (tx, rx) = mpsc::channel(buffer);
        (tx, ResponseBody::Stream(rx))
    }

    /// The whole body, when it is held in memory.
    pub fn bytes(&self) -> Option<&Bytes> {
        match self {
            ResponseBody::Full(bytes) => bytes.as_ref(),
            ResponseBody::Stream(_) => None,
            ResponseBody::Guarded(inner, _) => inner.bytes(),
        }
    }

    /// This body, keeping `guard` alive until it is dropped.
    pub fn guarded(self, guard: impl std::any::Any + Send + Sync) -> Self {
        ResponseBody::Guarded(Box::new(self), Box::new(guard))
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.get_mut() {
            ResponseBody::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            ResponseBody::Stream(rx) => rx
                .poll_recv(cx)
                .map(|chunk| chunk.map(|b| Ok(Frame::data(b)))),
            ResponseBody::Guarded(inner, _) => std::pin::Pin::new(inner.as_mut()).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ResponseBody::Full(bytes) => bytes.is_none(),
            ResponseBody::Stream(_) => false,
            ResponseBody::Guarded(inner, _) => inner.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ResponseBody::Full(Some(bytes)) => SizeHint::with_exact(bytes.len() as u64),
            ResponseBody::Full(None) => SizeHint::with_exact(0),
            ResponseBody::Stream(_) => SizeHint::default(),
            ResponseBody::Guarded(inner, _) => inner.size_hint(),
        }
    }
}
