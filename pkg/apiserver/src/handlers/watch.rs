//! GET with `watch=true`: a chunked stream of newline-delimited JSON events, or of
//! length-prefixed protobuf frames when the client prefers protobuf
//! (`application/vnd.kubernetes.protobuf;stream=watch`).
//!
//! Every event ends with a newline (kube-rs and the Python client split on it). Bookmarks, when
//! asked for, come as upstream's watch cache sends them: every minute, and once more two
//! seconds before the watch's deadline, so that a client resumes from a recent revision
//! instead of relisting; each carries the kind and apiVersion (kube-rs requires them).
//! A failure — such as a start before the compacted revision — is an ERROR event with its Status
//! inside the 200 stream, which is what clients re-list on. The stream ends after
//! `timeoutSeconds` (30 minutes when unset).
//!
//! A metadata-only watch (`Accept: application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`,
//! what kube-rs' and client-go's metadata informers send) gets each object as a
//! `meta.k8s.io` `PartialObjectMetadata`, as upstream answers it.
//!
//! Events are written from the objects' shared encodings (JSON, or protobuf encoded once per
//! object and kind): a large object goes out as the same bytes to every watcher, between a
//! small head and tail of its own. What waits for a client is bounded
//! ([`WATCH_BUFFER_BYTES`]); the watch itself takes events only as the client reads. A watcher
//! the storage ended because it fell too far behind (its client did not read) ends its stream
//! cleanly and is counted in `apiserver_terminated_watchers_total`, as upstream counts them.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use bytes::Bytes;
use genplane_apimachinery::errors::{ApiError, Status};
use genplane_registry::{WatchItem, WatchObject};
use genplane_storage::Storage;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{Response, StatusCode};

use super::Ctx;
use crate::body::{QueueSender, ResponseBody};
use crate::encode;
use crate::kind::ServedKind;
use crate::negotiation::{Format, Target};
use genplane_apimachinery::codec::protobuf;

/// The most bytes of events that wait for one watch client (beyond that, the watch waits for
/// the client; a single larger event waits alone).
pub const WATCH_BUFFER_BYTES: usize = 1 << 20;

/// Objects up to this size are copied into their event's line (one chunk); larger ones are
/// sent as their shared bytes between the line's head and tail.
const COPY_BELOW: usize = 4096;

/// How long a watch lasts when the client does not say.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);
/// How often bookmarks come, when asked for.
const BOOKMARK_PERIOD: Duration = Duration::from_secs(60);
/// How long before the watch's deadline the last bookmark comes.
const BOOKMARK_BEFORE_DEADLINE: Duration = Duration::from_secs(2);

/// When the next bookmark is due for a watch ending at `deadline`: a period from `now`, or
/// two seconds before the deadline if that is sooner; `None` once that moment has passed
/// (upstream's `nextBookmarkTime`).
fn next_bookmark(now: Instant, deadline: Instant) -> Option<Instant> {
    let periodic = now + BOOKMARK_PERIOD;
    let at = match deadline.checked_sub(BOOKMARK_BEFORE_DEADLINE) {
        Some(before_deadline) => periodic.min(before_deadline),
        None => return None,
    };
    (at >= now).then_some(at)
}

/// Starts a watch and answers with its stream.
pub(crate) async fn watch<S: Storage>(
    ctx: &Ctx<'_, S>,
) -> Result<Response<ResponseBody>, ApiError> {
    // Each event holds one object: the single-object transforms apply (as upstream, a watch
    // takes `as=PartialObjectMetadata`, not the list form).
    let negotiated = ctx.negotiate(false)?;
    let options = ctx.list_options(true)?;
    let bookmarks = options.read.allow_watch_bookmarks;
    let timeout = match ctx
        .query
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
    {
        Some(seconds) if seconds > 0 => Duration::from_secs(seconds),
        _ => DEFAULT_TIMEOUT,
    };
    let mut stream = ctx.store()?.watch(&ctx.request.namespace, &options).await?;
    let metrics = ctx.metrics.cloned();
    let (group, resource) = (ctx.info.group.clone(), ctx.info.resource.clone());
    let gauge = metrics
        .as_ref()
        .map(|m| m.watch_buffered_bytes(&group, &resource));
    let (tx, body) = ResponseBody::queue(WATCH_BUFFER_BYTES, gauge);
    let kind_info = ctx.info.clone();
    let now = ctx.now;
    let format = negotiated.format;
    let table = match negotiated.target {
        Target::Table(version) => Some(version),
        _ => None,
    };
    let metadata_only = match negotiated.target {
        Target::PartialObjectMetadata(version) => Some(version),
        _ => None,
    };
    let shutdown = ctx.shutdown.cloned();
    tokio::spawn(async move {
        let info: &ServedKind = &kind_info;
        let closing = async {
            match &shutdown {
                Some(shutdown) => shutdown.triggered().await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(closing);
        let ends_at = Instant::now() + timeout;
        let deadline = tokio::time::sleep_until(ends_at);
        tokio::pin!(deadline);
        let mut bookmark_at = next_bookmark(Instant::now(), ends_at);
        let mut headers = true;
        loop {
            let chunks: Vec<Bytes> = tokio::select! {
                item = stream.next() => match item {
                    Some(WatchItem::Event(kind, object)) => match (table, metadata_only) {
                        (Some(version), _) => {
                            let t = encode::table(info, std::slice::from_ref(object.value()), None, version, headers, now);
                            headers = false;
                            vec![encode::watch_event(kind.as_str(), t, format, info).into()]
                        }
                        (None, Some(version)) => {
                            let partial = encode::partial_metadata(object.value(), version);
                            vec![encode::watch_event(kind.as_str(), partial, format, info).into()]
                        }
                        // The object's encoding is shared by every watcher.
                        (None, None) => shared_event(kind.as_str(), &object, format, &kind_info),
                    },
                    Some(WatchItem::Bookmark { resource_version, initial_events_end }) => {
                        if !bookmarks {
                            continue;
                        }
                        // In the form the watch asked for: a Table of one row, or partial
                        // metadata, whose metadata carries the revision (and the end of the
                        // initial events), as upstream.
                        let bookmark = encode::bookmark(info, &resource_version, initial_events_end);
                        let bookmark = match (table, metadata_only) {
                            (Some(version), _) => {
                                let t = encode::table(info, std::slice::from_ref(&bookmark), None, version, headers, now);
                                headers = false;
                                t
                            }
                            (None, Some(version)) => encode::partial_metadata(&bookmark, version),
                            (None, None) => bookmark,
                        };
                        vec![encode::watch_event("BOOKMARK", bookmark, format, info).into()]
                    }
                    Some(WatchItem::Error(error)) => {
                        let line = encode::watch_event("ERROR", encode::status(&error), format, info);
                        let _ = tx.send(line.into()).await;
                        return;
                    }
                    Some(WatchItem::Terminated) => {
                        tracing::debug!(%group, %resource, "a watcher fell behind and was ended");
                        if let Some(metrics) = &metrics {
                            metrics.terminated_watcher(&group, &resource);
                        }
                        return;
                    }
                    None => return,
                },
                () = &mut deadline => return,
                () = &mut closing => return,
                () = sleep_until_some(bookmark_at), if bookmarks => {
                    stream.request_bookmark();
                    // The next one is due a period after this one, or just before the end.
                    let now = Instant::now();
                    bookmark_at = next_bookmark(now, ends_at).filter(|at| *at > now);
                    continue;
                }
                () = tx.closed() => return,
            };
            if send_all(&tx, chunks).await.is_err() {
                return;
            }
        }
    });
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::OK;
    let content_type = if table.is_some() || metadata_only.is_some() {
        negotiated.content_type()
    } else if format == Format::Protobuf {
        genplane_apimachinery::codec::protobuf::WATCH_CONTENT_TYPE.to_owned()
    } else {
        "application/json".to_owned()
    };
    if let Ok(value) = HeaderValue::from_str(&content_type) {
        response.headers_mut().insert(CONTENT_TYPE, value);
    }
    Ok(response)
}

/// Sleeps until `at`; forever when `None`.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Queues an event's chunks in order.
async fn send_all(tx: &QueueSender, chunks: Vec<Bytes>) -> Result<(), crate::body::Closed> {
    for chunk in chunks {
        tx.send(chunk).await?;
    }
    Ok(())
}

/// An event of a plain object in `format`, from the object's shared encoding: a JSON line, or
/// a protobuf frame whose object is encoded once per object and kind.
fn shared_event(
    kind: &str,
    object: &WatchObject,
    format: Format,
    info: &Arc<ServedKind>,
) -> Vec<Bytes> {
    if format == Format::Protobuf {
        // One encoding per object and served kind (the schema comes from the kind), from a
        // decoding of its JSON that is not kept: only the encodings are.
        let owner = Arc::as_ptr(info) as usize;
        let body = object.derived(owner, || {
            let value: serde_json::Value = serde_json::from_slice(object.json())
                .map_err(|e| ApiError::from(Status::internal_error(e)))?;
            encode::serialize(&value, format, Some(info)).map(Bytes::from)
        });
        return match &*body {
            Ok(body) => vec![
                protobuf::watch_frame_head(kind, body.len()).into(),
                body.clone(),
            ],
            Err(_) => vec![encode::watch_event(kind, object.value().clone(), format, info).into()],
        };
    }
    let json = object.json_bytes();
    if json.len() < COPY_BELOW {
        return vec![encode::watch_line(kind, &json).into()];
    }
    let head = match kind {
        "ADDED" => Bytes::from_static(b"{\"type\":\"ADDED\",\"object\":"),
        "MODIFIED" => Bytes::from_static(b"{\"type\":\"MODIFIED\",\"object\":"),
        "DELETED" => Bytes::from_static(b"{\"type\":\"DELETED\",\"object\":"),
        other => Bytes::from(format!("{{\"type\":\"{other}\",\"object\":")),
    };
    vec![head, json, Bytes::from_static(b"}\n")]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bookmarks_come_every_minute_and_two_seconds_before_the_deadline() {
        let now = Instant::now();
        let long = now + Duration::from_secs(1800);
        assert_eq!(next_bookmark(now, long), Some(now + BOOKMARK_PERIOD));
        let short = now + Duration::from_secs(10);
        assert_eq!(
            next_bookmark(now, short),
            Some(now + Duration::from_secs(8)),
            "a watch of 10 s gets its bookmark at 8 s"
        );
        let nearly_over = now + Duration::from_secs(1);
        assert_eq!(next_bookmark(now, nearly_over), None, "too late for one");
        let just_in_time = now + BOOKMARK_BEFORE_DEADLINE;
        assert_eq!(next_bookmark(now, just_in_time), Some(now));
    }
}
