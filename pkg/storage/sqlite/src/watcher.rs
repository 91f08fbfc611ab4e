//! Watches: the ring of recent events the writer publishes, and the task that feeds one watch.

use std::collections::VecDeque;
use std::sync::{Arc, PoisonError, RwLock};

use genplane_storage::{Error, Event, Revision, Watch, WatchEvent, WatchSender};

use crate::Shared;

/// How many events a watch reads from the history table at a time when catching up.
const CATCH_UP_BATCH: usize = 1024;

/// The most recent events, with contiguous revisions, bounded in count and bytes.
#[derive(Debug)]
pub(crate) struct EventLog {
    inner: RwLock<Ring>,
    max_events: usize,
    max_bytes: usize,
}

#[derive(Debug)]
struct Ring {
    /// The revision of `events[0]`, or the next revision when empty.
    first: Revision,
    events: VecDeque<Arc<Event>>,
    bytes: usize,
}

fn size(event: &Event) -> usize {
    event.kv.key.len() + event.kv.value.len() + event.prev.as_ref().map_or(0, |p| p.value.len())
}

impl EventLog {
    /// An empty log for a store at `revision`.
    pub(crate) fn new(revision: Revision, max_events: usize, max_bytes: usize) -> Self {
        Self {
            inner: RwLock::new(Ring {
                first: revision + 1,
                events: VecDeque::new(),
                bytes: 0,
            }),
            max_events: max_events.max(1),
            max_bytes,
        }
    }

    /// Appends the events of a committed batch (their revisions follow the last one's).
    pub(crate) fn push(&self, events: Vec<Arc<Event>>) {
        if events.is_empty() {
            return;
        }
        let mut ring = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        for event in events {
            ring.bytes += size(&event);
            ring.events.push_back(event);
        }
        while ring.events.len() > self.max_events
            || (ring.bytes > self.max_bytes && ring.events.len() > 1)
        {
            if let Some(old) = ring.events.pop_front() {
                ring.bytes -= size(&old);
                ring.first += 1;
            }
        }
    }

    /// The events under `prefix` with revisions in `(after, upto]`, or `None` when the log no
    /// longer holds the event right after `after`.
    fn read(&self, prefix: &str, after: Revision, upto: Revision) -> Option<Vec<Arc<Event>>> {
        let ring = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        if after + 1 < ring.first {
            return None;
        }
        let skip = usize::try_from(after + 1 - ring.first).unwrap_or(usize::MAX);
        let take = usize::try_from(upto - after).unwrap_or(0);
        Some(
            ring.events
                .iter()
                .skip(skip)
                .take(take)
                .filter(|e| e.kv.key.starts_with(prefix))
                .cloned()
                .collect(),
        )
    }

    /// The first revision the log holds.
    fn first(&self) -> Revision {
        self.inner
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .first
    }
}

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
            let (events, reached) = match shared.log.read(&prefix, cursor, state.revision) {
                Some(events) => (events, state.revision),
                None => {
                    // Behind the ring: read history up to where the ring starts.
                    let upto = (shared.log.first() - 1).min(state.revision);
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

#[cfg(test)]
mod tests {
    use super::*;
    use genplane_storage::{Bytes, EventKind, KeyValue};

    fn event(revision: Revision, key: &str, bytes: usize) -> Arc<Event> {
        Arc::new(Event {
            kind: EventKind::Create,
            kv: KeyValue {
                key: key.into(),
                value: Bytes::from(vec![0; bytes]),
                create_revision: revision,
                mod_revision: revision,
            },
            prev: None,
        })
    }

    #[test]
    fn the_ring_serves_covered_ranges_and_forgets_the_oldest() {
        let log = EventLog::new(10, 3, usize::MAX);
        log.push(vec![event(11, "/a/1", 1), event(12, "/b/1", 1)]);
        let got = log.read("/a/", 10, 12).unwrap();
        assert_eq!(
            got.iter().map(|e| e.revision()).collect::<Vec<_>>(),
            vec![11]
        );
        assert_eq!(log.read("/", 11, 12).unwrap().len(), 1);
        log.push(vec![event(13, "/a/2", 1), event(14, "/a/3", 1)]);
        assert!(
            log.read("/", 10, 14).is_none(),
            "revision 11 fell out of the ring"
        );
        assert_eq!(log.read("/a/", 11, 14).unwrap().len(), 2);
        assert_eq!(log.first(), 12);
    }

    #[test]
    fn the_ring_is_bounded_by_bytes_but_keeps_the_newest_event() {
        let log = EventLog::new(0, 100, 10);
        log.push(vec![event(1, "/a", 4), event(2, "/a", 4)]);
        assert_eq!(log.first(), 2);
        log.push(vec![event(3, "/a", 50)]);
        assert_eq!(
            log.first(),
            3,
            "a single event larger than the bound is still kept"
        );
    }
}
