//! The task behind each cached watch: it reads the shared window from its own position. A
//! watcher the window no longer covers (it started before the window, fell behind it, or the
//! cache relisted) continues on the store's own watch until it has caught up, then returns to
//! the window, so that the cache keeps serving its watchers after a burst or a relist.

use std::sync::{Arc, Weak};

use genplane_storage::{Error, Revision, Storage, Watch, WatchEvent, WatchSender};

use crate::Shared;

/// Starts a watch of `prefix` after `after`, served from the window.
pub(crate) fn spawn<S: Storage>(
    store: Weak<S>,
    shared: Arc<Shared>,
    prefix: String,
    after: Revision,
) -> Watch {
    let (watch, sender) = Watch::channel();
    tokio::spawn(feed(store, shared, prefix, after, sender));
    watch
}

/// Why serving from one source stopped.
enum Stop {
    /// The watch ended (dropped, closed, or failed and told so).
    Ended,
    /// The window does not cover the watcher's position: continue on the store.
    Behind,
    /// The watcher caught up with the window: return to it.
    CaughtUp,
}

async fn feed<S: Storage>(
    store: Weak<S>,
    shared: Arc<Shared>,
    prefix: String,
    mut cursor: Revision,
    mut sender: WatchSender,
) {
    loop {
        if let Stop::Ended = from_window(&shared, &prefix, &mut cursor, &mut sender).await {
            return;
        }
        if let Stop::Ended = from_store(&store, &shared, &prefix, &mut cursor, &mut sender).await {
            return;
        }
    }
}

/// Serves from the shared window until the watch ends or falls behind the window.
async fn from_window(
    shared: &Shared,
    prefix: &str,
    cursor: &mut Revision,
    sender: &mut WatchSender,
) -> Stop {
    let mut head = shared.head.subscribe();
    loop {
        if head.borrow_and_update().closed {
            let _ = sender
                .events
                .send(WatchEvent::Error(Error::Unavailable(
                    "the cache was closed".into(),
                )))
                .await;
            return Stop::Ended;
        }
        let Some((events, reached)) = shared.ring.read(prefix, *cursor) else {
            return Stop::Behind;
        };
        for event in events {
            if sender.events.send(WatchEvent::Event(event)).await.is_err() {
                return Stop::Ended;
            }
        }
        *cursor = reached;
        tokio::select! {
            changed = head.changed() => {
                if changed.is_err() {
                    return Stop::Ended;
                }
            }
            request = sender.progress_requests.recv() => match request {
                Some(()) => {
                    // Answer with what this watch has delivered, and have the cache catch up
                    // so that the next answer is fresher when the prefix is quiet.
                    shared.progress_wanted.notify_one();
                    if sender.events.send(WatchEvent::Progress(*cursor)).await.is_err() {
                        return Stop::Ended;
                    }
                }
                None => return Stop::Ended,
            },
            () = sender.events.closed() => return Stop::Ended,
        }
    }
}

/// Serves from a watch of the store from `cursor` until the window covers the watcher again.
async fn from_store<S: Storage>(
    store: &Weak<S>,
    shared: &Shared,
    prefix: &str,
    cursor: &mut Revision,
    sender: &mut WatchSender,
) -> Stop {
    let watch = match store.upgrade() {
        Some(store) => store.watch(prefix, *cursor).await,
        None => Err(Error::Unavailable("the store was closed".into())),
    };
    let mut watch = match watch {
        Ok(watch) => watch,
        Err(error) => {
            let _ = sender.events.send(WatchEvent::Error(error)).await;
            return Stop::Ended;
        }
    };
    let mut head = shared.head.subscribe();
    loop {
        if shared.ring.floor() <= *cursor {
            return Stop::CaughtUp;
        }
        tokio::select! {
            message = watch.next() => match message {
                Some(WatchEvent::Event(event)) => {
                    *cursor = event.revision();
                    if sender.events.send(WatchEvent::Event(event)).await.is_err() {
                        return Stop::Ended;
                    }
                }
                Some(WatchEvent::Progress(revision)) => *cursor = (*cursor).max(revision),
                Some(error @ WatchEvent::Error(_)) => {
                    let _ = sender.events.send(error).await;
                    return Stop::Ended;
                }
                None => return Stop::Ended,
            },
            // The window moved: ask the store watch how far it is, to return when it can.
            changed = head.changed() => {
                if changed.is_err() {
                    return Stop::Ended;
                }
                watch.request_progress();
            }
            request = sender.progress_requests.recv() => match request {
                Some(()) => {
                    if sender.events.send(WatchEvent::Progress(*cursor)).await.is_err() {
                        return Stop::Ended;
                    }
                }
                None => return Stop::Ended,
            },
        }
    }
}
