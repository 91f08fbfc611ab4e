//! The task behind each cached watch: it hands its reader the cached state first when asked
//! to, then reads the shared window from its own position, a few events at a time and only as
//! fast as the reader takes them.
//!
//! A watcher the window no longer covers is ended with [`Error::TooSlow`] when its reader fell
//! behind (the window moved on while it waited for the reader), and continues on the store's
//! own watch when the cache listed again meanwhile (not the reader's doing), until it has
//! caught up and returns to the window. A watch that starts before the window is served the
//! same way (see [`crate::Cacher`]).

use std::sync::{Arc, Weak};

use genplane_storage::{Error, Revision, Storage, Watch, WatchEvent, WatchSender};

use crate::{Entry, Shared};

/// How many events a watcher takes from the window at a time.
const READ_BATCH: usize = 32;

/// Starts a watch of `prefix` after `after`, served from the window; with `state`, the keys
/// at `after`, those first, then a progress report at `after`. The watch buffers `buffer`
/// events.
pub(crate) fn spawn<S: Storage>(
    store: Weak<S>,
    shared: Arc<Shared>,
    prefix: String,
    state: Option<Vec<Entry>>,
    after: Revision,
    buffer: usize,
) -> Watch {
    let (watch, sender) = Watch::with_capacity(buffer);
    tokio::spawn(feed(store, shared, prefix, state, after, sender));
    watch
}

/// Why serving from one source stopped.
enum Stop {
    /// The watch ended (dropped, closed, or failed and told so).
    Ended,
    /// The window does not cover the watcher's position.
    Behind,
    /// The watcher caught up with the window: return to it.
    CaughtUp,
}

async fn feed<S: Storage>(
    store: Weak<S>,
    shared: Arc<Shared>,
    prefix: String,
    state: Option<Vec<Entry>>,
    mut cursor: Revision,
    mut sender: WatchSender,
) {
    if let Some(state) = state {
        // Nothing after the state is complete until it has all been delivered.
        let mut relisted = false;
        let messages = state
            .into_iter()
            .map(WatchEvent::Event)
            .chain(std::iter::once(WatchEvent::Progress(cursor)));
        for message in messages {
            let message = if relisted {
                message
            } else {
                match deliver(&shared, &mut sender, message, cursor).await {
                    Delivery::Sent => continue,
                    Delivery::Ended => return,
                    Delivery::Behind(message) if lost_to_relist(&shared, cursor) => {
                        // The state is still whole: send the rest; what follows it comes
                        // from the store.
                        relisted = true;
                        message
                    }
                    Delivery::Behind(_) => {
                        too_slow(&mut sender, 0).await;
                        return;
                    }
                }
            };
            if sender.events.send(message).await.is_err() {
                return;
            }
        }
    }
    loop {
        match from_window(&shared, &prefix, &mut cursor, &mut sender).await {
            Stop::Ended => return,
            Stop::Behind if !lost_to_relist(&shared, cursor) => {
                too_slow(&mut sender, cursor).await;
                return;
            }
            Stop::Behind | Stop::CaughtUp => {}
        }
        if let Stop::Ended = from_store(&store, &shared, &prefix, &mut cursor, &mut sender).await {
            return;
        }
    }
}

/// Whether a watcher at `cursor` that the window no longer covers lost its place because the
/// cache listed again (rather than because newer events pushed older ones out).
fn lost_to_relist(shared: &Shared, cursor: Revision) -> bool {
    cursor < shared.ring.reset_revision()
}

/// Tells the reader that it fell behind, once it has taken what it was sent.
async fn too_slow(sender: &mut WatchSender, revision: Revision) {
    let _ = sender
        .events
        .send(WatchEvent::Error(Error::TooSlow { revision }))
        .await;
}

/// What became of a message handed to [`deliver`].
enum Delivery {
    /// The reader has it (in its buffer).
    Sent,
    /// The reader is gone.
    Ended,
    /// The window moved past what the watcher holds while it waited for room: the message,
    /// not sent.
    Behind(WatchEvent),
}

/// Hands `message` to the reader, waiting for room; gives up when, meanwhile, the window no
/// longer holds the events after `complete` (up to which the watcher holds what it still has
/// to send), so that a reader that does not read is found out without holding anything up.
async fn deliver(
    shared: &Shared,
    sender: &mut WatchSender,
    message: WatchEvent,
    complete: Revision,
) -> Delivery {
    let message = match sender.events.try_reserve() {
        Ok(permit) => {
            permit.send(message);
            return Delivery::Sent;
        }
        Err(tokio::sync::mpsc::error::TrySendError::Closed(())) => return Delivery::Ended,
        Err(tokio::sync::mpsc::error::TrySendError::Full(())) => message,
    };
    let mut head = shared.head.subscribe();
    loop {
        if shared.ring.floor() > complete {
            return Delivery::Behind(message);
        }
        tokio::select! {
            permit = sender.events.reserve() => {
                return match permit {
                    Ok(permit) => {
                        permit.send(message);
                        Delivery::Sent
                    }
                    Err(_) => Delivery::Ended,
                };
            }
            changed = head.changed() => {
                if changed.is_err() {
                    return Delivery::Ended;
                }
            }
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
        // Everything published before the line above is in the window: read it all.
        loop {
            let Some((events, reached)) = shared.ring.read(prefix, *cursor, READ_BATCH) else {
                return Stop::Behind;
            };
            let more = events.len() >= READ_BATCH;
            for event in events {
                let revision = event.revision();
                match deliver(shared, sender, WatchEvent::Event(event), reached).await {
                    Delivery::Sent => *cursor = revision,
                    Delivery::Ended => return Stop::Ended,
                    Delivery::Behind(_) => return Stop::Behind,
                }
            }
            *cursor = reached;
            if !more {
                break;
            }
        }
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
