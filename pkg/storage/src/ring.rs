//! A bounded window of recent events, shared by every watcher that reads it.
//!
//! The window holds *every* event with a revision in `(floor, head]` for whatever it covers (a
//! whole store, or one resource prefix in a cache), in revision order. Revisions need not be
//! contiguous: a cache of one prefix sees only that prefix's events, and its head also moves on
//! progress reports. When the window is full, the oldest events leave and the floor rises; a
//! reader whose position is below the floor must get the missing events elsewhere.

use std::collections::VecDeque;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Instant;

use crate::{Event, Revision};

/// A bounded, shared window of recent events.
#[derive(Debug)]
pub struct EventRing {
    inner: RwLock<Window>,
    max_events: usize,
    max_bytes: usize,
}

#[derive(Debug)]
struct Window {
    floor: Revision,
    head: Revision,
    /// The revision of the last [`EventRing::reset`].
    reset: Revision,
    events: VecDeque<Arc<Event>>,
    /// When each event of `events` (same positions) was pushed.
    pushed: VecDeque<Instant>,
    bytes: usize,
}

impl Window {
    fn pop_oldest(&mut self) -> Option<Arc<Event>> {
        self.pushed.pop_front();
        let old = self.events.pop_front()?;
        self.bytes -= size(&old);
        Some(old)
    }
}

/// The memory an event holds on to: key, value and previous value.
fn size(event: &Event) -> usize {
    event.kv.key.len() + event.kv.value.len() + event.prev.as_ref().map_or(0, |p| p.value.len())
}

impl EventRing {
    /// An empty window at `revision`, keeping at most `max_events` events and, beyond the
    /// newest one, at most `max_bytes` bytes of values.
    pub fn new(revision: Revision, max_events: usize, max_bytes: usize) -> Self {
        Self {
            inner: RwLock::new(Window {
                floor: revision,
                head: revision,
                reset: revision,
                events: VecDeque::new(),
                pushed: VecDeque::new(),
                bytes: 0,
            }),
            max_events: max_events.max(1),
            max_bytes,
        }
    }

    /// Appends `events` (newer than the head, in order) and moves the head to `head`.
    pub fn push(&self, events: impl IntoIterator<Item = Arc<Event>>, head: Revision) {
        let mut w = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        for event in events {
            w.bytes += size(&event);
            w.events.push_back(event);
            w.pushed.push_back(now);
        }
        w.head = w.head.max(head);
        while w.events.len() > self.max_events || (w.bytes > self.max_bytes && w.events.len() > 1) {
            if let Some(old) = w.pop_oldest() {
                w.floor = old.revision();
            }
        }
    }

    /// Forgets the events pushed before `cutoff`, keeping at least the newest `keep` events:
    /// the window holds recent history, not all the history that fits (kube-apiserver's
    /// watch cache likewise keeps about 75 seconds of events). What the forgotten events hold
    /// (values, previous values, what watchers derived from them) is freed with them.
    pub fn forget_pushed_before(&self, cutoff: Instant, keep: usize) {
        let mut w = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        while w.events.len() > keep && w.pushed.front().is_some_and(|t| *t < cutoff) {
            if let Some(old) = w.pop_oldest() {
                w.floor = old.revision();
            }
        }
        if w.events.is_empty() {
            w.events.shrink_to_fit();
            w.pushed.shrink_to_fit();
        }
    }

    /// Forgets the events at or before `revision` (a compaction of the store under the window),
    /// but never past the head: the floor rises to `revision` or the head, whichever is lower,
    /// so a reader that has everything up to the head keeps its place.
    pub fn forget_through(&self, revision: Revision) {
        let mut w = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        let through = revision.min(w.head);
        if through <= w.floor {
            return;
        }
        while w.events.front().is_some_and(|e| e.revision() <= through) {
            w.pop_oldest();
        }
        w.floor = through;
    }

    /// Empties the window and restarts it at `revision`.
    pub fn reset(&self, revision: Revision) {
        let mut w = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        w.events.clear();
        w.pushed.clear();
        w.bytes = 0;
        w.floor = revision;
        w.head = revision;
        w.reset = revision;
    }

    /// The revision the window was last restarted at ([`EventRing::reset`], or its creation).
    /// A reader behind the floor whose position is older than this lost its place to a
    /// restart, not to newer events pushing older ones out.
    pub fn reset_revision(&self) -> Revision {
        self.inner
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .reset
    }

    /// The revision up to which the window is complete.
    pub fn head(&self) -> Revision {
        self.inner
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .head
    }

    /// The revision after which the window holds every event.
    pub fn floor(&self) -> Revision {
        self.inner
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .floor
    }

    /// The first `max` events under `prefix` with revisions in `(after, head]`, and the
    /// revision up to which the answer is complete: the head, or the last event returned when
    /// more remain. `None` when the window no longer holds every event after `after`.
    ///
    /// Readers take a few events at a time, so that one that waits for its consumer holds no
    /// more than those once the window has moved on.
    pub fn read(
        &self,
        prefix: &str,
        after: Revision,
        max: usize,
    ) -> Option<(Vec<Arc<Event>>, Revision)> {
        let w = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        if after < w.floor {
            return None;
        }
        let start = w.events.partition_point(|e| e.revision() <= after);
        let mut matching = w
            .events
            .range(start..)
            .filter(|e| e.kv.key.starts_with(prefix));
        let events: Vec<Arc<Event>> = matching.by_ref().take(max.max(1)).cloned().collect();
        let reached = match (matching.next(), events.last()) {
            (Some(_), Some(last)) => last.revision(),
            _ => w.head.max(after),
        };
        Some((events, reached))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Bytes, EventKind, KeyValue, Memo};

    fn event(revision: Revision, key: &str, bytes: usize) -> Arc<Event> {
        Arc::new(Event {
            kind: EventKind::Create,
            kv: KeyValue {
                key: key.into(),
                value: Bytes::from(vec![0; bytes]),
                create_revision: revision,
                mod_revision: revision,
                hint: 0,
            },
            prev: None,
            memo: Memo::default(),
        })
    }

    fn revisions(events: &[Arc<Event>]) -> Vec<Revision> {
        events.iter().map(|e| e.revision()).collect()
    }

    #[test]
    fn serves_what_it_covers_and_forgets_the_oldest() {
        let ring = EventRing::new(10, 3, usize::MAX);
        ring.push([event(11, "/a/1", 1), event(12, "/b/1", 1)], 12);
        let (got, head) = ring.read("/a/", 10, 100).unwrap();
        assert_eq!((revisions(&got), head), (vec![11], 12));
        assert_eq!(revisions(&ring.read("/", 11, 100).unwrap().0), vec![12]);
        ring.push([event(13, "/a/2", 1), event(14, "/a/3", 1)], 14);
        assert!(
            ring.read("/", 10, 100).is_none(),
            "revision 11 left the window"
        );
        assert_eq!(ring.floor(), 11);
        assert_eq!(
            revisions(&ring.read("/a/", 11, 100).unwrap().0),
            vec![13, 14]
        );
    }

    #[test]
    fn forgets_old_events_but_keeps_the_newest() {
        let ring = EventRing::new(10, 100, usize::MAX);
        ring.push((11..=15).map(|r| event(r, "/a", 1)), 15);
        let later = Instant::now() + std::time::Duration::from_secs(1);
        ring.forget_pushed_before(Instant::now() - std::time::Duration::from_secs(60), 0);
        assert_eq!(ring.floor(), 10, "nothing is old yet");
        ring.forget_pushed_before(later, 2);
        assert_eq!(ring.floor(), 13);
        assert_eq!(revisions(&ring.read("/", 13, 100).unwrap().0), vec![14, 15]);
        assert!(ring.read("/", 12, 100).is_none());
        ring.forget_pushed_before(later, 0);
        assert_eq!((ring.floor(), ring.head()), (15, 15));
        assert_eq!(
            ring.read("/", 15, 100).unwrap().0.len(),
            0,
            "readers at the head keep their place"
        );
    }

    #[test]
    fn revisions_may_have_gaps_and_the_head_may_move_alone() {
        let ring = EventRing::new(100, 10, usize::MAX);
        ring.push([event(105, "/a", 1), event(230, "/a", 1)], 231);
        assert_eq!(revisions(&ring.read("/", 150, 100).unwrap().0), vec![230]);
        ring.push([], 300);
        assert_eq!(ring.read("/", 231, 100).unwrap(), (vec![], 300));
        ring.reset(500);
        assert!(ring.read("/", 300, 100).is_none());
        assert_eq!(ring.read("/", 500, 100).unwrap().1, 500);
        assert_eq!(ring.reset_revision(), 500);
    }

    #[test]
    fn reads_a_few_events_at_a_time() {
        let ring = EventRing::new(0, 100, usize::MAX);
        ring.push(
            [
                event(1, "/a/1", 1),
                event(2, "/b/1", 1),
                event(3, "/a/2", 1),
                event(4, "/a/3", 1),
            ],
            6,
        );
        let (got, reached) = ring.read("/a/", 0, 2).unwrap();
        assert_eq!((revisions(&got), reached), (vec![1, 3], 3));
        let (got, reached) = ring.read("/a/", reached, 2).unwrap();
        assert_eq!(
            (revisions(&got), reached),
            (vec![4], 6),
            "complete up to the head"
        );
    }

    #[test]
    fn forgets_compacted_events_but_not_past_the_head() {
        let ring = EventRing::new(0, 100, usize::MAX);
        ring.push([event(1, "/a", 1), event(2, "/a", 1), event(3, "/a", 1)], 3);
        ring.forget_through(2);
        assert_eq!(ring.floor(), 2);
        assert!(ring.read("/", 1, 100).is_none(), "revision 2 is forgotten");
        assert_eq!(revisions(&ring.read("/", 2, 100).unwrap().0), vec![3]);
        ring.forget_through(1);
        assert_eq!(ring.floor(), 2, "the floor never falls");
        ring.forget_through(50);
        assert_eq!(
            (ring.floor(), ring.head()),
            (3, 3),
            "a compaction past the head leaves readers at the head their place"
        );
        assert_eq!(ring.read("/", 3, 100).unwrap(), (vec![], 3));
    }

    #[test]
    fn is_bounded_by_bytes_but_keeps_the_newest_event() {
        let ring = EventRing::new(0, 100, 10);
        ring.push([event(1, "/a", 4), event(2, "/a", 4)], 2);
        assert_eq!(ring.floor(), 1);
        ring.push([event(3, "/a", 50)], 3);
        assert_eq!(
            ring.floor(),
            2,
            "a single event larger than the bound is still kept"
        );
    }
}
