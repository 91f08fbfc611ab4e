//! Request bodies (as received, or already read for the audit log) and response bodies: whole,
//! a JSON list written as it is sent, or streamed from a channel, or from a queue bounded in
//! bytes (watches).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use genplane_registry::JsonItem;
use hyper::body::{Body, Frame, SizeHint};
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{Semaphore, mpsc};

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

    /// The body as received, to be passed on whole (the aggregator's proxy streams it to
    /// the extension server): nothing goes back when it is dropped.
    pub fn into_incoming(mut self) -> Option<hyper::body::Incoming> {
        self.back = None;
        self.body.take()
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
    /// A JSON list, written as it is sent.
    List(ListBody),
    /// Pieces held in memory, sent in order (a large document built in parts).
    Pieces(std::collections::VecDeque<Bytes>),
    /// A body held gzip-compressed: uncompressed as it is sent, unless the compression filter
    /// sends it as it is to a client that accepts gzip.
    Gzipped(Gzipped),
    /// Chunks as they are sent; the body ends when the sender is dropped.
    Stream(mpsc::Receiver<Bytes>),
    /// Chunks as they are sent through a [`QueueSender`], at most so many bytes at a time; the
    /// body ends when the sender is dropped.
    Queue(QueueReceiver),
    /// Another body, with something that lives as long as the body is being sent (a metric
    /// guard, say): it is dropped when the response ends or the client goes away.
    Guarded(Box<ResponseBody>, Box<dyn std::any::Any + Send + Sync>),
    /// An extension API server's answer, passed on as it arrives (the aggregator's proxy); a
    /// failure of its connection ends it, trailers are not passed on.
    Proxied(hyper::body::Incoming),
}

impl ResponseBody {
    /// A body of `bytes`.
    pub fn full(bytes: impl Into<Bytes>) -> Self {
        ResponseBody::Full(Some(bytes.into()))
    }

    /// A body held as one gzip stream in `pieces` (made by [`gzip`] or [`GzipPart`]s), of
    /// `len` bytes uncompressed.
    pub fn gzipped(pieces: impl IntoIterator<Item = Bytes>, len: usize) -> Self {
        ResponseBody::Gzipped(Gzipped {
            gzip: pieces.into_iter().filter(|p| !p.is_empty()).collect(),
            decoder: Some(flate2::write::GzDecoder::new(Vec::new())),
            len,
        })
    }

    /// Whether this is a body held gzip-compressed (maybe guarded).
    pub fn is_gzipped(&self) -> bool {
        match self {
            ResponseBody::Gzipped(_) => true,
            ResponseBody::Guarded(inner, _) => inner.is_gzipped(),
            _ => false,
        }
    }

    /// A body held gzip-compressed as its compressed bytes, to be sent with
    /// `Content-Encoding: gzip`; any other body as it is.
    pub fn gzip_as_is(self) -> Self {
        match self {
            ResponseBody::Gzipped(Gzipped { gzip, .. }) => ResponseBody::Pieces(gzip),
            ResponseBody::Guarded(inner, guard) => {
                ResponseBody::Guarded(Box::new(inner.gzip_as_is()), guard)
            }
            other => other,
        }
    }

    /// A body of `pieces`, sent one after another.
    pub fn pieces(pieces: impl IntoIterator<Item = Bytes>) -> Self {
        ResponseBody::Pieces(pieces.into_iter().filter(|p| !p.is_empty()).collect())
    }

    /// The length of a body held in memory (whole, in pieces, or a JSON list); `None` for a
    /// streamed one.
    pub fn held_len(&self) -> Option<usize> {
        match self {
            ResponseBody::Full(bytes) => Some(bytes.as_ref().map_or(0, Bytes::len)),
            ResponseBody::List(list) => Some(list.len()),
            ResponseBody::Pieces(pieces) => Some(pieces.iter().map(Bytes::len).sum()),
            ResponseBody::Gzipped(gzipped) => Some(gzipped.len),
            ResponseBody::Guarded(inner, _) => inner.held_len(),
            ResponseBody::Stream(_) | ResponseBody::Queue(_) | ResponseBody::Proxied(_) => None,
        }
    }

    /// A streamed body and the sender that feeds it.
    pub fn channel(buffer: usize) -> (mpsc::Sender<Bytes>, Self) {
        let (tx, rx) = mpsc::channel(buffer);
        (tx, ResponseBody::Stream(rx))
    }

    /// A streamed body fed through a queue that holds at most `limit` bytes (or one larger
    /// chunk) waiting for the client, counted in `gauge` while they wait.
    pub fn queue(limit: usize, gauge: Option<Gauge>) -> (QueueSender, Self) {
        let limit = limit.clamp(1, Semaphore::MAX_PERMITS.min(u32::MAX as usize));
        let (tx, rx) = mpsc::unbounded_channel();
        let space = Arc::new(Semaphore::new(limit));
        let sender = QueueSender {
            tx,
            space: space.clone(),
            limit,
            gauge: gauge.clone(),
        };
        let receiver = QueueReceiver {
            rx,
            space,
            limit,
            gauge,
        };
        (sender, ResponseBody::Queue(receiver))
    }

    /// The JSON list body, when this is one.
    pub fn held_list(&self) -> Option<&ListBody> {
        match self {
            ResponseBody::List(list) => Some(list),
            ResponseBody::Guarded(inner, _) => inner.held_list(),
            _ => None,
        }
    }

    /// The whole body, when it is held in memory.
    pub fn bytes(&self) -> Option<&Bytes> {
        match self {
            ResponseBody::Full(bytes) => bytes.as_ref(),
            ResponseBody::Stream(_)
            | ResponseBody::Queue(_)
            | ResponseBody::List(_)
            | ResponseBody::Pieces(_)
            | ResponseBody::Gzipped(_)
            | ResponseBody::Proxied(_) => None,
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
            ResponseBody::List(list) => Poll::Ready(list.next().map(|b| Ok(Frame::data(b)))),
            ResponseBody::Pieces(pieces) => {
                Poll::Ready(pieces.pop_front().map(|b| Ok(Frame::data(b))))
            }
            ResponseBody::Gzipped(gzipped) => {
                Poll::Ready(gzipped.uncompressed().map(|b| Ok(Frame::data(b))))
            }
            ResponseBody::Stream(rx) => rx
                .poll_recv(cx)
                .map(|chunk| chunk.map(|b| Ok(Frame::data(b)))),
            ResponseBody::Queue(queue) => queue
                .poll_recv(cx)
                .map(|chunk| chunk.map(|b| Ok(Frame::data(b)))),
            ResponseBody::Guarded(inner, _) => std::pin::Pin::new(inner.as_mut()).poll_frame(cx),
            ResponseBody::Proxied(incoming) => loop {
                match std::pin::Pin::new(&mut *incoming).poll_frame(cx) {
                    Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                        Ok(data) => return Poll::Ready(Some(Ok(Frame::data(data)))),
                        Err(_trailers) => {}
                    },
                    Poll::Ready(Some(Err(error))) => {
                        tracing::debug!(%error, "the proxied answer ended");
                        return Poll::Ready(None);
                    }
                    Poll::Ready(None) => return Poll::Ready(None),
                    Poll::Pending => return Poll::Pending,
                }
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ResponseBody::Full(bytes) => bytes.is_none(),
            ResponseBody::List(list) => list.is_empty(),
            ResponseBody::Pieces(pieces) => pieces.is_empty(),
            ResponseBody::Gzipped(gzipped) => gzipped.decoder.is_none(),
            ResponseBody::Stream(_) | ResponseBody::Queue(_) => false,
            ResponseBody::Guarded(inner, _) => inner.is_end_stream(),
            ResponseBody::Proxied(incoming) => incoming.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ResponseBody::Full(Some(bytes)) => SizeHint::with_exact(bytes.len() as u64),
            ResponseBody::Full(None) => SizeHint::with_exact(0),
            ResponseBody::List(list) => SizeHint::with_exact(list.len() as u64),
            ResponseBody::Pieces(pieces) => {
                SizeHint::with_exact(pieces.iter().map(|p| p.len() as u64).sum())
            }
            ResponseBody::Gzipped(gzipped) => match gzipped.decoder {
                Some(_) => SizeHint::with_exact(gzipped.len as u64),
                None => SizeHint::with_exact(0),
            },
            ResponseBody::Stream(_) | ResponseBody::Queue(_) => SizeHint::default(),
            ResponseBody::Guarded(inner, _) => inner.size_hint(),
            ResponseBody::Proxied(incoming) => incoming.size_hint(),
        }
    }
}

/// `bytes` gzip-compressed at level 1, as answers are.
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(
        Vec::with_capacity(bytes.len() / 4),
        flate2::Compression::fast(),
    );
    // Writing into a Vec cannot fail.
    let _ = std::io::Write::write_all(&mut encoder, bytes);
    encoder.finish().unwrap_or_default()
}

/// The bytes `gzip` (made by [`gzip`]) holds; `len` is their length, or a guess.
pub fn gunzip(gzip: &[u8], len: usize) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(len);
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(gzip), &mut out)?;
    Ok(out)
}

/// A body held gzip-compressed ([`ResponseBody::gzipped`]).
pub struct Gzipped {
    /// The compressed pieces not uncompressed yet.
    gzip: std::collections::VecDeque<Bytes>,
    /// What uncompresses them, until the end of the stream.
    decoder: Option<flate2::write::GzDecoder<Vec<u8>>>,
    /// The body's length uncompressed.
    len: usize,
}

impl std::fmt::Debug for Gzipped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gzipped")
            .field("pieces", &self.gzip.len())
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl Gzipped {
    /// The next chunk of the body uncompressed: what the next compressed piece holds, so a
    /// large body is never uncompressed whole. `None` at the end; bytes that do not
    /// uncompress (never made by this server) end the body early, and are logged.
    fn uncompressed(&mut self) -> Option<Bytes> {
        loop {
            let decoder = self.decoder.as_mut()?;
            let (fed, last) = match self.gzip.pop_front() {
                Some(piece) => (std::io::Write::write_all(decoder, &piece), false),
                None => (decoder.try_finish(), true),
            };
            let out = std::mem::take(decoder.get_mut());
            if let Err(error) = &fed {
                tracing::error!(%error, "uncompressing a body held gzip-compressed");
            }
            if fed.is_err() || last {
                self.decoder = None;
                self.gzip.clear();
            }
            if !out.is_empty() {
                return Some(Bytes::from(out));
            }
        }
    }
}

/// One part of a gzip stream written in parts ([`gzip_parts`]), compressed as it is written:
/// a large document's sections are written apart and joined in their order, without ever
/// holding the document uncompressed.
pub struct GzipPart {
    encoder: flate2::write::DeflateEncoder<Vec<u8>>,
    /// Compressed output taken from the encoder, in pieces of about [`GZIP_PIECE_BYTES`].
    done: Vec<Bytes>,
    crc: flate2::Crc,
    len: usize,
}

impl std::fmt::Debug for GzipPart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GzipPart")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

/// About how many compressed bytes each piece of a [`GzipPart`] holds.
const GZIP_PIECE_BYTES: usize = 64 * 1024;

impl Default for GzipPart {
    fn default() -> Self {
        Self {
            encoder: flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast()),
            done: Vec::new(),
            crc: flate2::Crc::new(),
            len: 0,
        }
    }
}

impl GzipPart {
    /// Compresses `bytes` onto the part.
    pub fn write(&mut self, bytes: &[u8]) {
        // Writing into a Vec cannot fail.
        let _ = std::io::Write::write_all(&mut self.encoder, bytes);
        self.crc.update(bytes);
        self.len += bytes.len();
        if self.encoder.get_ref().len() >= GZIP_PIECE_BYTES {
            self.done
                .push(Bytes::from(std::mem::take(self.encoder.get_mut())));
        }
    }

    /// How many bytes were written (uncompressed).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The compressed pieces, ending on a byte boundary with no final block (a sync flush),
    /// so that another part's deflate data can follow.
    fn finish(mut self) -> (Vec<Bytes>, flate2::Crc, usize) {
        // A sync flush into a Vec cannot fail.
        let _ = std::io::Write::flush(&mut self.encoder);
        let rest = std::mem::take(self.encoder.get_mut());
        if !rest.is_empty() {
            self.done.push(Bytes::from(rest));
        }
        (self.done, self.crc, self.len)
    }
}

/// One gzip stream of `parts` in order, as pieces, and its length uncompressed.
///
/// Each part is deflate data of its own that ends on a byte boundary and refers to nothing
/// before its start, so the parts follow one another as one deflate stream. The stream gets
/// gzip's header, an empty final block, and the trailer with the CRC-32 of all the parts
/// (combined from theirs) and their length.
pub fn gzip_parts(parts: impl IntoIterator<Item = GzipPart>) -> (Vec<Bytes>, usize) {
    // ID1 ID2 CM=deflate FLG=0 MTIME=0 XFL=0 OS=unknown.
    let mut pieces = vec![Bytes::from_static(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff])];
    let (mut crc, mut len) = (flate2::Crc::new(), 0usize);
    for part in parts {
        let (done, part_crc, part_len) = part.finish();
        pieces.extend(done);
        crc.combine(&part_crc);
        len += part_len;
    }
    let mut trailer = vec![0x03, 0x00];
    trailer.extend_from_slice(&crc.sum().to_le_bytes());
    // ISIZE is the length modulo 2^32.
    trailer.extend_from_slice(&((len & 0xffff_ffff) as u32).to_le_bytes());
    pieces.push(Bytes::from(trailer));
    (pieces, len)
}

/// How many bytes a [`ListBody`] writes at a time (or one larger object).
pub const LIST_CHUNK_BYTES: usize = 64 * 1024;

/// A JSON list written as it is sent, in chunks of about [`LIST_CHUNK_BYTES`]: the list up to
/// its items (`head`), the items separated by commas, and the rest (`tail`). The items are
/// the store's (a served-as-stored object is its stored bytes, shared with the cache), so a
/// list held for a client that reads slowly, or not at all, costs a reference per object and
/// one chunk, not a copy of the answer.
#[derive(Clone, Debug, Default)]
pub struct ListBody {
    head: Bytes,
    items: std::collections::VecDeque<JsonItem>,
    tail: Bytes,
    /// Whether an item was written (the next one follows a comma).
    wrote_item: bool,
    /// How many bytes are still to be written.
    remaining: usize,
}

impl ListBody {
    /// The list `head`, `items`, `tail`.
    pub fn new(head: Bytes, items: Vec<JsonItem>, tail: Bytes) -> Self {
        let commas = items.len().saturating_sub(1);
        let remaining =
            head.len() + tail.len() + commas + items.iter().map(JsonItem::len).sum::<usize>();
        Self {
            head,
            items: items.into(),
            tail,
            wrote_item: false,
            remaining,
        }
    }

    /// How many bytes are still to be sent.
    pub fn len(&self) -> usize {
        self.remaining
    }

    /// Whether all was sent.
    pub fn is_empty(&self) -> bool {
        self.remaining == 0
    }

    /// What is still to be sent, whole (the audit log records it).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut whole = Vec::with_capacity(self.remaining);
        for chunk in self.clone() {
            whole.extend_from_slice(&chunk);
        }
        whole
    }
}

impl Iterator for ListBody {
    type Item = Bytes;

    /// The next chunk.
    fn next(&mut self) -> Option<Bytes> {
        if self.remaining == 0 {
            return None;
        }
        let mut chunk = Vec::with_capacity(self.remaining.min(LIST_CHUNK_BYTES + 4096));
        chunk.extend_from_slice(&std::mem::take(&mut self.head));
        while chunk.len() < LIST_CHUNK_BYTES {
            let Some(item) = self.items.pop_front() else {
                chunk.extend_from_slice(&std::mem::take(&mut self.tail));
                break;
            };
            if self.wrote_item {
                chunk.push(b',');
            }
            item.write_into(&mut chunk);
            self.wrote_item = true;
        }
        self.remaining = self.remaining.saturating_sub(chunk.len());
        Some(Bytes::from(chunk))
    }
}

/// The permits a chunk of `len` bytes takes from a queue of `limit` bytes: a chunk larger than
/// the queue takes all of them, and so waits alone.
fn permits(len: usize, limit: usize) -> u32 {
    u32::try_from(len.min(limit)).unwrap_or(u32::MAX)
}

/// The sending side of [`ResponseBody::queue`].
#[derive(Debug)]
pub struct QueueSender {
    tx: mpsc::UnboundedSender<Bytes>,
    space: Arc<Semaphore>,
    limit: usize,
    gauge: Option<Gauge>,
}

/// The client is gone: the body was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the response body was dropped")]
pub struct Closed;

impl QueueSender {
    /// Queues `chunk`, once there is room for it.
    pub async fn send(&self, chunk: Bytes) -> Result<(), Closed> {
        if chunk.is_empty() {
            return Ok(());
        }
        let (len, permits) = (chunk.len(), permits(chunk.len(), self.limit));
        tokio::select! {
            permit = self.space.acquire_many(permits) => match permit {
                Ok(permit) => permit.forget(),
                Err(_) => return Err(Closed),
            },
            () = self.tx.closed() => return Err(Closed),
        }
        if let Some(gauge) = &self.gauge {
            gauge.inc_by(i64::try_from(len).unwrap_or(i64::MAX));
        }
        self.tx.send(chunk).map_err(|_| {
            if let Some(gauge) = &self.gauge {
                gauge.dec_by(i64::try_from(len).unwrap_or(i64::MAX));
            }
            Closed
        })
    }

    /// Completes when the body was dropped.
    pub async fn closed(&self) {
        self.tx.closed().await;
    }
}

/// The receiving side of [`ResponseBody::queue`], inside the body.
#[derive(Debug)]
pub struct QueueReceiver {
    rx: mpsc::UnboundedReceiver<Bytes>,
    space: Arc<Semaphore>,
    limit: usize,
    gauge: Option<Gauge>,
}

impl QueueReceiver {
    fn taken(&self, chunk: &Bytes) {
        self.space
            .add_permits(permits(chunk.len(), self.limit) as usize);
        if let Some(gauge) = &self.gauge {
            gauge.dec_by(i64::try_from(chunk.len()).unwrap_or(i64::MAX));
        }
    }

    fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        let polled = self.rx.poll_recv(cx);
        if let Poll::Ready(Some(chunk)) = &polled {
            self.taken(chunk);
        }
        polled
    }
}

impl Drop for QueueReceiver {
    fn drop(&mut self) {
        self.rx.close();
        while let Ok(chunk) = self.rx.try_recv() {
            self.taken(&chunk);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt as _;

    /// A list of `count` stored ConfigMaps of `size` bytes of data each, and its whole JSON.
    fn stored_list(count: usize, size: usize) -> (ListBody, Vec<u8>) {
        let mut items = Vec::new();
        let mut whole = b"{\"items\":[".to_vec();
        for i in 0..count {
            let stored = Bytes::from(format!(
                r#"{{"kind":"ConfigMap","apiVersion":"v1","metadata":{{"name":"c{i}","namespace":"n"}},"data":{{"k":"{}"}}}}"#,
                "x".repeat(size)
            ));
            let revision = 7 + i64::try_from(i).unwrap() * 1000;
            let served = genplane_registry::object::ServedJson::of(
                &stored,
                revision,
                "v1",
                "ConfigMap",
                true,
                0,
            )
            .unwrap();
            if i > 0 {
                whole.push(b',');
            }
            whole.extend_from_slice(
                format!(
                    r#"{{"kind":"ConfigMap","apiVersion":"v1","metadata":{{"name":"c{i}","namespace":"n","resourceVersion":"{revision}"}},"data":{{"k":"{}"}}}}"#,
                    "x".repeat(size)
                )
                .as_bytes(),
            );
            items.push(JsonItem::Stored(served));
        }
        whole.extend_from_slice(b"]}");
        let list = ListBody::new(
            Bytes::from_static(b"{\"items\":["),
            items,
            Bytes::from_static(b"]}"),
        );
        (list, whole)
    }

    #[tokio::test]
    async fn a_list_is_written_in_chunks_as_it_is_sent_and_announces_its_length() {
        for (count, size) in [(0, 0), (1, 10), (3, 100), (500, 1000), (2, 200_000)] {
            let (list, whole) = stored_list(count, size);
            assert_eq!(list.len(), whole.len(), "{count} x {size}");
            assert_eq!(list.to_vec(), whole, "{count} x {size}");
            let body = ResponseBody::List(list);
            assert_eq!(body.size_hint().exact(), Some(whole.len() as u64));
            let mut body = body;
            let mut sent = Vec::new();
            let mut chunks = 0;
            while let Some(frame) = body.frame().await {
                let chunk = frame.unwrap().into_data().unwrap();
                assert!(
                    chunk.len() < LIST_CHUNK_BYTES + size + 200,
                    "a chunk holds about {LIST_CHUNK_BYTES} bytes, or one larger object"
                );
                sent.extend_from_slice(&chunk);
                chunks += 1;
            }
            assert!(body.is_end_stream());
            assert_eq!(sent, whole, "{count} x {size}");
            assert_eq!(
                chunks,
                whole.len().div_ceil(LIST_CHUNK_BYTES).max(1).min(chunks)
            );
        }
    }

    #[test]
    fn a_list_that_is_not_read_holds_its_items_not_its_answer() {
        let (mut list, whole) = stored_list(2000, 1000);
        let first = list.next().unwrap();
        assert!(first.len() >= LIST_CHUNK_BYTES && first.len() < LIST_CHUNK_BYTES + 1200);
        assert_eq!(list.len(), whole.len() - first.len());
        assert!(
            list.items.iter().all(|i| matches!(i, JsonItem::Stored(_))),
            "what is not sent yet is still the stored bytes"
        );
    }

    /// `len` bytes that compress about as JSON does, different for each `seed`.
    fn text(len: usize, seed: u64) -> Vec<u8> {
        let mut state = seed.wrapping_mul(6_364_136_223_846_793_005) | 1;
        let words: [&[u8]; 6] = [
            b"\"name\":",
            b"\"type\":\"string\",",
            b"{",
            b"}",
            b"42,",
            b"x",
        ];
        let mut out = Vec::with_capacity(len + 32);
        while out.len() < len {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            out.extend_from_slice(words[(state % 6) as usize]);
            if state.is_multiple_of(5) {
                out.extend_from_slice(format!("{state}").as_bytes());
            }
        }
        out.truncate(len);
        out
    }

    #[tokio::test]
    async fn parts_compressed_apart_are_one_gzip_stream_uncompressed_piece_by_piece() {
        let cases: [&[usize]; 4] = [&[], &[0, 0], &[5, 0, 300_000, 1, 2_000_000], &[70_000]];
        for lens in cases {
            let texts: Vec<Vec<u8>> = lens
                .iter()
                .enumerate()
                .map(|(i, &len)| text(len, i as u64 + 1))
                .collect();
            let whole = texts.concat();
            let (pieces, len) = gzip_parts(texts.iter().map(|t| {
                let mut part = GzipPart::default();
                // Written in uneven slices, as entries are.
                for slice in t.chunks(7_777) {
                    part.write(slice);
                }
                assert_eq!(part.len(), t.len());
                part
            }));
            assert_eq!(len, whole.len(), "{lens:?}");
            let compressed = pieces.concat();
            assert!(
                compressed.len() < whole.len() / 2 + 64,
                "{lens:?}: compressed"
            );
            // One member: a decoder that stops after the first reads all of it.
            assert_eq!(gunzip(&compressed, len).unwrap(), whole, "{lens:?}");
            // Sent to a client that does not take gzip: a chunk per compressed piece.
            let mut body = ResponseBody::gzipped(pieces.clone(), len);
            assert_eq!(body.size_hint().exact(), Some(len as u64));
            let mut sent = Vec::new();
            let mut largest = 0;
            while let Some(frame) = body.frame().await {
                let chunk = frame.unwrap().into_data().unwrap();
                largest = largest.max(chunk.len());
                sent.extend_from_slice(&chunk);
            }
            assert!(body.is_end_stream());
            assert_eq!(sent, whole, "{lens:?}");
            if len > 1_000_000 {
                assert!(largest < len / 2, "{lens:?}: never uncompressed whole");
            }
            // And to one that does: the pieces as they are.
            let as_is = ResponseBody::gzipped(pieces, len).gzip_as_is();
            assert!(as_is.bytes().is_none());
            let sent = as_is.collect().await.unwrap().to_bytes();
            assert_eq!(sent, compressed, "{lens:?}");
        }
    }

    #[tokio::test]
    async fn a_body_held_compressed_that_does_not_uncompress_ends_early() {
        let garbage = Bytes::from(text(100_000, 3));
        let body = ResponseBody::gzipped([garbage.slice(..50_000), garbage.slice(50_000..)], 1);
        let sent = body.collect().await.unwrap().to_bytes();
        assert!(sent.is_empty(), "{} bytes", sent.len());
    }

    #[tokio::test]
    async fn a_queue_holds_at_most_its_limit_and_counts_what_waits() {
        let gauge = Gauge::default();
        let (tx, body) = ResponseBody::queue(10, Some(gauge.clone()));
        tx.send(Bytes::from_static(b"123456")).await.unwrap();
        tx.send(Bytes::from_static(b"7890")).await.unwrap();
        assert_eq!(gauge.get(), 10);
        let mut body = body;
        {
            let full = tx.send(Bytes::from_static(b"x"));
            tokio::pin!(full);
            assert!(
                futures::poll!(full.as_mut()).is_pending(),
                "no room for an 11th byte"
            );
            let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
            assert_eq!(&first[..], b"123456");
            full.await.unwrap();
        }
        assert_eq!(gauge.get(), 5);
        // A chunk larger than the queue waits until the queue is empty, then goes alone.
        let big = tokio::spawn(async move {
            tx.send(Bytes::from(vec![0u8; 25])).await.unwrap();
            tx
        });
        let mut got = 0;
        while got < 5 {
            got += body
                .frame()
                .await
                .unwrap()
                .unwrap()
                .into_data()
                .unwrap()
                .len();
        }
        let tx = big.await.unwrap();
        assert_eq!(gauge.get(), 25);
        drop(body);
        assert_eq!(
            gauge.get(),
            0,
            "what a dropped body held is no longer counted"
        );
        assert_eq!(tx.send(Bytes::from_static(b"y")).await, Err(Closed));
    }
}
