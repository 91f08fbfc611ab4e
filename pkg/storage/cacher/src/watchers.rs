//! The task behind each cached watch: it reads the shared window from its own position, and
//! continues on the store if it ever falls behind the window.

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

async fn feed<S: Storage>(
    store: Weak<S>,
    shared: Arc<Shared>,
    prefix: String,
    mut cursor: Revision,
    mut sender: WatchSender,
) {
    let mut head = shared.head.subscribe();
    loop {
        if head.borrow_and_update().closed {
            let _ = sender
                .events
                .send(WatchEvent::Error(Error::Unavailable(
                    "the cache was closed".into(),
                )))
                .await;
            return;
        }
        match shared.ring.read(&prefix, cursor) {
            Some((events, reached)) => {
                for event in events {
                    if sender.events.send(WatchEvent::Event(event)).await.is_err() {
                        return;
                    }
                }
                cursor = reached;
            }
            None => {
                drop(head);
                return continue_on_store(store, &prefix, cursor, sender).await;
            }
        }
        tokio::select! {
            changed = head.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            request = sender.progress_requests.recv() => match request {
                Some(()) => {
                    // Answer with what this watch has delivered, and have the cache catch up
                    // so that the next answer is fresher when the prefix is quiet.
                    shared.progress_wanted.notify_one();
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

/// Forwards a watch of the store from `cursor` on, for a watcher the window no longer covers.
async fn continue_on_store<S: Storage>(
    store: Weak<S>,
    prefix: &str,
    cursor: Revision,
    mut sender: WatchSender,
) {
    let watch = match store.upgrade() {
        Some(store) => store.watch(prefix, cursor).await,
        None => Err(Error::Unavailable("the store was closed".into())),
    };
    let mut watch = match watch {
        Ok(watch) => watch,
        Err(error) => {
            let _ = sender.events.send(WatchEvent::Error(error)).await;
            return;
        }
    };
    loop {
        tokio::select! {
            message = watch.next() => match message {
                Some(message) => {
                    if sender.events.send(message).await.is_err() {
                        return;
                    }
                }
                None => return,
            },
            request = sender.progress_requests.recv() => match request {
                Some(()) => watch.request_progress(),
                None => return,
            },
        }
    }
}
