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
    Incoming(hyper::body::Incoming),
    /// As received; the function sees the bytes once the handler has read them.
    Recorded(hyper::body::Incoming, OnRead),
    /// Read already.
    Read(Bytes),
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
