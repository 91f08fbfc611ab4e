//! The background compactor: keeps about [`crate::SqliteConfig::history`] of history.
//!
//! Like kube-apiserver's compactor for etcd, it notes the current revision periodically and
//! compacts to the revision it noted one history window earlier.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::SqliteStore;
use crate::writer::{Op, WriteRequest};

/// How many of the newest events the in-memory log keeps however old they are.
const EVENT_LOG_MIN_EVENTS: usize = 100;

/// Starts the compactor of `store` on `runtime`; it ends when the store is dropped.
/// At each round it also forgets the in-memory events older than `event_log_age`.
pub(crate) fn spawn(
    runtime: &tokio::runtime::Handle,
    store: &SqliteStore,
    history: Duration,
    event_log_age: Duration,
) {
    let (shared, requests) = store.weak_parts();
    let period = (history / 5).max(Duration::from_secs(1));
    runtime.spawn(async move {
        let mut seen: VecDeque<(Instant, i64)> = VecDeque::new();
        let mut ticker = tokio::time::interval(period);
        loop {
            ticker.tick().await;
            let Some(shared) = shared.upgrade() else {
                return;
            };
            let state = *shared.committed.borrow();
            if let Some(cutoff) = std::time::Instant::now().checked_sub(event_log_age)
                && !event_log_age.is_zero()
            {
                shared
                    .log
                    .forget_pushed_before(cutoff, EVENT_LOG_MIN_EVENTS);
            }
            drop(shared);
            if state.closed {
                return;
            }
            let now = Instant::now();
            seen.push_back((now, state.revision));
            let mut target = None;
            while let Some(&(at, revision)) = seen.front() {
                if now.duration_since(at) < history {
                    break;
                }
                target = Some(revision);
                seen.pop_front();
            }
            let Some(revision) = target.filter(|r| *r > state.compacted) else {
                continue;
            };
            let (reply, answer) = oneshot::channel();
            let request = WriteRequest {
                op: Op::Compact { revision },
                reply,
            };
            // Never wait for room in the queue while holding a sender: the store's drop waits
            // for every sender to go. A full queue skips this round.
            let sent = match requests.upgrade() {
                Some(requests) => requests.try_send(request),
                None => return,
            };
            match sent {
                Ok(()) => {}
                Err(tokio::sync::mpsc::error::TrySendError::Full(_)) => {
                    tracing::debug!(
                        revision,
                        "the write queue is full; compaction waits for the next round"
                    );
                    continue;
                }
                Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) => return,
            }
            match answer.await {
                Ok(Ok(_)) => tracing::debug!(revision, "compacted history"),
                Ok(Err(error)) => tracing::warn!(revision, %error, "compaction failed"),
                Err(_) => return,
            }
        }
    });
}
