//! Watches: the task that feeds one watch from the ring of recent events the writer publishes,
//! or from the history table when it is behind the ring.

use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;

use genplane_storage::{Error, Revision, Watch, WatchEvent, WatchSender};

use crate::Shared;

/// How many events a watch reads from the history table at a time when catching up.
const CATCH_UP_BATCH: usize = 1024;

/// How many events a watch takes from the ring at a time.
const RING_BATCH: usize = 64;

/// The watches of a store, each with the prefix it follows. The writer wakes a watch only for
/// commits that touched its prefix (and when the store closes): with a watch per cached
/// resource, waking every watch for every commit cost more than the commit's own SQLite work.
#[derive(Debug, Default)]
pub(crate) struct Wakers {
    entries: Mutex<Vec<Arc<Waker>>>,
}

/// One watch's wake-up: a permit stays stored when the watch is busy, so none is lost.
#[derive(Debug)]
pub(crate) struct Waker {
    prefix: String,
    notify: Notify,
}

impl Wakers {
    fn register(&self, prefix: &str) -> Arc<Waker> {
        let waker = Arc::new(Waker {
            prefix: prefix.to_owned(),
            notify: Notify::new(),
        });
        self.lock().push(waker.clone());
        waker
    }

    fn unregister(&self, waker: &Arc<Waker>) {
        self.lock().retain(|w| !Arc::ptr_eq(w, waker));
    }

    /// The watches of a prefix one of `keys` is in, to wake once the commit is published.
    pub(crate) fn following<'k>(
        &self,
        keys: impl Iterator<Item = &'k str> + Clone,
    ) -> Vec<Arc<Waker>> {
        self.lock()
            .iter()
            .filter(|w| keys.clone().any(|key| key.starts_with(&w.prefix)))
            .cloned()
            .collect()
    }

    /// Wakes every watch (the store closed).
    pub(crate) fn wake_all(&self) {
        for waker in self.lock().iter() {
            waker.wake();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Waker>>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Waker {
    /// Wakes the watch.
    pub(crate) fn wake(&self) {
        self.notify.notify_one();
    }
}

/// Takes a watch's wake-up out of the store's list when the watch ends, however it ends.
struct Registered<'a> {
    wakers: &'a Wakers,
    waker: Arc<Waker>,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.wakers.unregister(&self.waker);
    }
}

/// Starts a watch of `prefix` after revision `after`.
pub(crate) fn spawn(shared: Arc<Shared>, prefix: String, after: Revision) -> Watch {
    let (watch, sender) = Watch::channel();
    tokio::spawn(feed(shared, prefix, after, sender));
    watch
}

/// Delivers every event after `cursor`, then follows the commits that touch `prefix`, until the
/// watch is dropped or the store closes. A progress request is answered once the watch has
/// caught up with the current revision, so it reports every event up to it delivered.
async fn feed(shared: Arc<Shared>, prefix: String, mut cursor: Revision, mut sender: WatchSender) {
    let registered = Registered {
        wakers: &shared.wakers,
        waker: shared.wakers.register(&prefix),
    };
    let mut progress_wanted = false;
    loop {
        let state = *shared.committed.borrow();
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
        if std::mem::take(&mut progress_wanted)
            && sender
                .events
                .send(WatchEvent::Progress(cursor))
                .await
                .is_err()
        {
            return;
        }
        tokio::select! {
            () = registered.waker.notify.notified() => {}
            request = sender.progress_requests.recv() => match request {
                // Caught up with the revision current now first, at the top of the loop.
                Some(()) => progress_wanted = true,
                None => return,
            },
            () = sender.events.closed() => return,
        }
    }
}
