//! Watches: the task that feeds one watch from the ring of recent events the writer publishes,
//! or from the history table when it is behind the ring.

use std::sync::Arc;

use genplane_storage::{Error, Revision, Watch, WatchEvent, WatchSender};

use crate::Shared;

/// How many events a watch reads from the history table at a time when catching up.
const CATCH_UP_BATCH: usize = 1024;

/// How many events a watch takes from the ring at a time.
const RING_BATCH: usize = 64;

/// Starts a watch of `prefix` after revision `after`.
pub(crate) fn spawn(shared: Arc<Shared>, prefix: String, after: Revision) -> Watch {
    let (watch, sender) = Watch::channel();
    tokio::spawn(feed(shared, prefix, after, sender));
    watch
}

/// Delivers every event after `cursor`, then follows new commits, until the watch is dropped
/// or the store closes.
async fn feed(shared: Arc<Shared>, prefix: String, mut cursor: Revision, mut sender: WatchSender) {
    let mut committed = shared.committed.subscribe();
    loop {
        let state = *committed.borrow_and_update();
        if state.closed {
            let _ = sender
                .events
                .send(WatchEvent::Error(Error::Unavailable(
                    "the store was closed".into(),
                )))
                .await;
            return;
        }
        while cursor < state.revision {
            let (events, reached) = match shared.log.read(&prefix, cursor, RING_BATCH) {
                Some((events, head)) => (events, head),
                None => {
                    // Behind the ring: read history up to where the ring starts.
                    let upto = shared.log.floor().min(state.revision);
                    match shared
                        .readers
                        .events(prefix.clone(), cursor, upto, CATCH_UP_BATCH)
                        .await
                    {
                        Ok(found) => found,
                        Err(error) => {
                            let _ = sender.events.send(WatchEvent::Error(error)).await;
                            return;
                        }
                    }
                }
            };
            for event in events {
                if sender.events.send(WatchEvent::Event(event)).await.is_err() {
                    return;
                }
            }
            cursor = reached;
        }
        tokio::select! {
            changed = committed.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            request = sender.progress_requests.recv() => match request {
                Some(()) => {
                    if sender.events.send(WatchEvent::Progress(cursor)).await.is_err() {
                        return;
                    }
                }
                None => return,
            },
            () = sender.events.closed() => return,
        }
    }
}
