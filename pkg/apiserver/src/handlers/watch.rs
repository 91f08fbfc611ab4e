//! GET with `watch=true`: a chunked stream of newline-delimited JSON events, or of
//! length-prefixed protobuf frames when the client prefers protobuf
//! (`application/vnd.kubernetes.protobuf;stream=watch`).
//!
//! Every event ends with a newline (kube-rs and the Python client split on it). Bookmarks, when
//! asked for, come every minute and carry the kind and apiVersion (kube-rs requires them).
//! A failure — such as a start before the compacted revision — is an ERROR event with its Status
//! inside the 200 stream, which is what clients re-list on. The stream ends after
//! `timeoutSeconds` (30 minutes when unset).
//!
//! A metadata-only watch (`Accept: application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`,
//! what kube-rs' and client-go's metadata informers send) gets each object as a
//! `meta.k8s.io` `PartialObjectMetadata`, as upstream answers it.

use std::time::Duration;

use genplane_apimachinery::errors::ApiError;
use genplane_registry::WatchItem;
use genplane_storage::Storage;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{Response, StatusCode};

use super::Ctx;
use crate::body::ResponseBody;
use crate::encode;
use crate::kind::ServedKind;
use crate::negotiation::{Format, Target};

/// How long a watch lasts when the client does not say.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);
/// How often bookmarks come, when asked for.
const BOOKMARK_PERIOD: Duration = Duration::from_secs(60);

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
    let mut stream = ctx.store.watch(&ctx.request.namespace, &options).await?;
    let (tx, body) = ResponseBody::channel(16);
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
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut tick = tokio::time::interval(BOOKMARK_PERIOD);
        tick.tick().await;
        let mut headers = true;
        loop {
            let line = tokio::select! {
                item = stream.next() => match item {
                    Some(WatchItem::Event(kind, object)) => match (table, metadata_only) {
                        (Some(version), _) => {
                            let t = encode::table(info, std::slice::from_ref(object.value()), None, version, headers, now);
                            headers = false;
                            encode::watch_event(kind.as_str(), t, format, info)
                        }
                        (None, Some(version)) => {
                            let partial = encode::partial_metadata(object.value(), version);
                            encode::watch_event(kind.as_str(), partial, format, info)
                        }
                        // JSON: the object's encoding is shared by every watcher.
                        (None, None) if format != Format::Protobuf => encode::watch_line(kind.as_str(), object.json()),
                        (None, None) => encode::watch_event(kind.as_str(), object.value().clone(), format, info),
                    },
                    Some(WatchItem::Bookmark { resource_version, initial_events_end }) => {
                        if !bookmarks {
                            continue;
                        }
                        encode::watch_event("BOOKMARK", encode::bookmark(info, &resource_version, initial_events_end), format, info)
                    }
                    Some(WatchItem::Error(error)) => {
                        let line = encode::watch_event("ERROR", encode::status(&error), format, info);
                        let _ = tx.send(line.into()).await;
                        return;
                    }
                    None => return,
                },
                () = &mut deadline => return,
                () = &mut closing => return,
                _ = tick.tick(), if bookmarks => {
                    stream.request_bookmark();
                    continue;
                }
                () = tx.closed() => return,
            };
            if tx.send(line.into()).await.is_err() {
                return;
            }
        }
    });
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::OK;
    let content_type = if table.is_some() || metadata_only.is_some() {
        negotiated.content_type()
    } else if format == Format::Protobuf {
        genplane_api::protobuf::WATCH_CONTENT_TYPE.to_owned()
    } else {
        "application/json".to_owned()
    };
    if let Ok(value) = HeaderValue::from_str(&content_type) {
        response.headers_mut().insert(CONTENT_TYPE, value);
    }
    Ok(response)
}
