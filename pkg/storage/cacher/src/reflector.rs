//! The reflector: lists the prefix, then follows one watch of the store, applying every event
//! to the cached keys and the window. When the watch fails it lists again.

use std::collections::BTreeSet;
use std::sync::{Arc, PoisonError, Weak};
use std::time::Duration;

use genplane_storage::{
    Error, Event, EventKind, ListRequest, Result, Revision, Storage, WatchEvent,
};

use crate::{Keyed, Shared, Snapshot, entry};

/// Keeps the cache in sync with `store` until the store is gone.
pub(crate) async fn run<S: Storage>(
    store: Weak<S>,
    shared: Arc<Shared>,
    page: usize,
    window_age: Duration,
) {
    let mut backoff = Duration::from_millis(50);
    loop {
        match sync(&store, &shared, page, window_age).await {
            Ok(()) => return,
            Err(error) => {
                shared
                    .head
                    .send_if_modified(|h| !std::mem::replace(&mut h.listed_once, true));
                tracing::warn!(prefix = %shared.prefix, %error, ?backoff, "the watch cache lost its watch; listing again");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// One list followed by one watch. Returns `Ok` when the store is gone, and the error that
/// ended the watch otherwise.
async fn sync<S: Storage>(
    store: &Weak<S>,
    shared: &Shared,
    page: usize,
    window_age: Duration,
) -> Result<()> {
    let (objects, revision) = {
        let Some(store) = store.upgrade() else {
            return Ok(());
        };
        list(&*store, &shared.prefix, page).await?
    };
    *shared
        .snapshot
        .write()
        .unwrap_or_else(PoisonError::into_inner) = Snapshot { objects, revision };
    // Watchers behind this point continue on the store.
    shared.ring.reset(revision);
    shared.head.send_modify(|h| {
        h.revision = revision;
        h.ready = true;
        h.listed_once = true;
    });
    let mut watch = {
        let Some(store) = store.upgrade() else {
            return Ok(());
        };
        store.watch(&shared.prefix, revision).await?
    };
    // Old events leave the window a few times per `window_age`.
    let mut trim = tokio::time::interval((window_age / 5).max(Duration::from_secs(1)));
    trim.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = trim.tick(), if !window_age.is_zero() => {
                if let Some(cutoff) = std::time::Instant::now().checked_sub(window_age) {
                    shared.ring.forget_pushed_before(cutoff, crate::WINDOW_MIN_EVENTS);
                }
            }
            message = watch.next() => {
                let Some(first) = message else {
                    return Err(Error::Unavailable("the store ended the cache's watch".into()));
                };
                // Apply a burst of waiting events as one batch: one lock, one push, one wakeup
                // of the watchers.
                let mut batch = Vec::new();
                let mut pending = Some(first);
                while let Some(message) = pending.take() {
                    match message {
                        WatchEvent::Event(event) => {
                            batch.push(event);
                            if batch.len() >= MAX_BATCH {
                                apply(shared, std::mem::take(&mut batch));
                            }
                        }
                        WatchEvent::Progress(revision) => {
                            apply(shared, std::mem::take(&mut batch));
                            advance(shared, revision);
                        }
                        WatchEvent::Error(error) => {
                            apply(shared, batch);
                            return Err(error);
                        }
                    }
                    pending = watch.try_next();
                }
                apply(shared, batch);
                // What the store compacted leaves the window too.
                if let Some(store) = store.upgrade() {
                    shared.ring.forget_through(store.compacted_revision());
                }
            }
            () = shared.progress_wanted.notified() => watch.request_progress(),
        }
    }
}

async fn list<S: Storage>(
    store: &S,
    prefix: &str,
    page: usize,
) -> Result<(BTreeSet<Keyed>, Revision)> {
    let revision = store.current_revision().await?;
    // A `Keyed` orders by its storage key alone, which never changes; the memo it also
    // holds is the part that may (clippy cannot see that the order ignores it).
    #[allow(clippy::mutable_key_type)]
    let mut objects = BTreeSet::new();
    let mut start = None;
    loop {
        let request = ListRequest {
            prefix: prefix.to_owned(),
            start: start.take(),
            revision: Some(revision),
            limit: Some(page),
            count: false,
        };
        let response = store.list(request).await?;
        let next = response.items.last().map(|kv| format!("{}\0", kv.key));
        for kv in response.items {
            objects.replace(Keyed(entry(kv)));
        }
        match next {
            Some(next) if response.more => start = Some(next),
            _ => return Ok((objects, revision)),
        }
    }
}

/// The most events applied at once.
const MAX_BATCH: usize = 1024;

/// Applies events (in revision order) to the cached keys and the window.
fn apply(shared: &Shared, events: Vec<Arc<Event>>) {
    let revision = {
        let mut snapshot = shared
            .snapshot
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let mut applied = Vec::with_capacity(events.len());
        for event in events {
            let revision = event.revision();
            if revision <= snapshot.revision {
                continue;
            }
            match event.kind {
                EventKind::Create | EventKind::Update => {
                    // A create is already the key's state as a create event: share it (and
                    // its memo); an update's state is a new one, without the previous value.
                    let state = if event.prev.is_none() && event.kind == EventKind::Create {
                        event.clone()
                    } else {
                        entry(event.kv.clone())
                    };
                    snapshot.objects.replace(Keyed(state));
                }
                EventKind::Delete => {
                    snapshot.objects.remove::<str>(&event.kv.key);
                }
            }
            snapshot.revision = revision;
            applied.push(event);
        }
        if applied.is_empty() {
            return;
        }
        let revision = snapshot.revision;
        shared.ring.push(applied, revision);
        revision
    };
    shared.head.send_modify(|h| h.revision = revision);
}

fn advance(shared: &Shared, revision: Revision) {
    {
        let mut snapshot = shared
            .snapshot
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if revision <= snapshot.revision {
            return;
        }
        snapshot.revision = revision;
    }
    shared.ring.push([], revision);
    shared.head.send_modify(|h| h.revision = revision);
}
