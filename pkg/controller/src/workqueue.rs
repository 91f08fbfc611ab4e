//! The work queue every controller uses, with client-go's semantics: a key waits in the queue
//! at most once however often it is added; a key handed to a worker is never handed to another
//! until that worker calls [`Queue::done`], and a key added meanwhile is queued again then (so
//! it is processed again after, never concurrently); keys can be added after a delay or with
//! per-key exponential backoff ([`Queue::add_rate_limited`], 5 ms doubling up to 60 s, reset by
//! [`Queue::forget`]).
//!
//! Share it as `Arc<Queue<K>>`: adds come from watch handlers, [`Queue::get`] from workers.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::Notify;

use crate::spare::ReleaseSpare as _;

/// The first delay of a key that failed; doubled on each further failure.
const BASE_DELAY: Duration = Duration::from_millis(5);
/// The longest delay of a key that keeps failing.
const MAX_DELAY: Duration = Duration::from_secs(60);

struct State<T> {
    queue: VecDeque<T>,
    dirty: HashSet<T>,
    processing: HashSet<T>,
    failures: HashMap<T, u32>,
}

/// A rate-limited, deduplicating work queue of keys `T`; share it as `Arc<Queue<T>>`.
pub struct Queue<T> {
    state: Mutex<State<T>>,
    notify: Notify,
}

impl<T> std::fmt::Debug for Queue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f.debug_struct("Queue")
            .field("waiting", &state.queue.len())
            .field("processing", &state.processing.len())
            .finish_non_exhaustive()
    }
}

impl<T: Hash + Eq + Clone + Send + Sync + 'static> Queue<T> {
    /// An empty queue.
    pub fn new() -> Arc<Self> {
        Arc::new(Queue {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                dirty: HashSet::new(),
                processing: HashSet::new(),
                failures: HashMap::new(),
            }),
            notify: Notify::new(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<T>> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues `key` unless it is already waiting.
    pub fn add(&self, key: T) {
        let mut state = self.lock();
        if !state.dirty.insert(key.clone()) {
            return;
        }
        if state.processing.contains(&key) {
            return;
        }
        state.queue.push_back(key);
        drop(state);
        self.notify.notify_one();
    }

    /// Queues `key` after `delay` (if the queue still exists then).
    pub fn add_after(self: &Arc<Self>, key: T, delay: Duration) {
        if delay.is_zero() {
            self.add(key);
            return;
        }
        let queue: Weak<Self> = Arc::downgrade(self);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            if let Some(queue) = queue.upgrade() {
                queue.add(key);
            }
        });
    }

    /// Queues `key` again after a delay that doubles with each failure since its last
    /// [`Queue::forget`].
    pub fn add_rate_limited(self: &Arc<Self>, key: T) {
        let failures = {
            let mut state = self.lock();
            let n = state.failures.entry(key.clone()).or_insert(0);
            *n += 1;
            *n
        };
        let delay = BASE_DELAY
            .saturating_mul(2u32.saturating_pow(failures.saturating_sub(1).min(20)))
            .min(MAX_DELAY);
        self.add_after(key, delay);
    }

    /// Clears the failure count of `key`.
    pub fn forget(&self, key: &T) {
        let mut state = self.lock();
        state.failures.remove(key);
        state.failures.release_spare();
    }

    /// Waits for the next key; the caller must call [`Queue::done`] with it.
    pub async fn get(&self) -> T {
        loop {
            {
                let mut state = self.lock();
                if let Some(key) = state.queue.pop_front() {
                    state.queue.release_spare();
                    state.dirty.remove(&key);
                    state.dirty.release_spare();
                    state.processing.insert(key.clone());
                    return key;
                }
            }
            self.notify.notified().await;
        }
    }

    /// Marks `key` processed; queues it again if it was added meanwhile.
    pub fn done(&self, key: &T) {
        let mut state = self.lock();
        state.processing.remove(key);
        state.processing.release_spare();
        if state.dirty.contains(key) {
            state.queue.push_back(key.clone());
            drop(state);
            self.notify.notify_one();
        }
    }

    /// How many keys wait (not counting those being processed).
    pub fn len(&self) -> usize {
        self.lock().queue.len()
    }

    /// Whether no key waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_key_is_queued_once_and_requeued_when_added_while_processed() {
        let q = Queue::new();
        q.add("a");
        q.add("a");
        q.add("b");
        assert_eq!(q.len(), 2);
        let a = q.get().await;
        assert_eq!(a, "a");
        q.add("a");
        // Not handed out twice at once.
        assert_eq!(q.get().await, "b");
        assert_eq!(q.len(), 0);
        q.done(&a);
        assert_eq!(q.get().await, "a");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_key_re_added_while_processed_is_processed_again_after_never_concurrently() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let q: Arc<Queue<u32>> = Queue::new();
        let busy = Arc::new(AtomicUsize::new(0));
        let processed = Arc::new(AtomicUsize::new(0));
        let mut workers = tokio::task::JoinSet::new();
        for _ in 0..4 {
            let (q, busy, processed) = (q.clone(), busy.clone(), processed.clone());
            workers.spawn(async move {
                loop {
                    let key = q.get().await;
                    assert_eq!(
                        busy.fetch_add(1, Ordering::SeqCst),
                        0,
                        "{key} handed out twice"
                    );
                    // Added again while being processed: must come back after `done`.
                    q.add(key);
                    tokio::task::yield_now().await;
                    busy.fetch_sub(1, Ordering::SeqCst);
                    processed.fetch_add(1, Ordering::SeqCst);
                    q.done(&key);
                }
            });
        }
        q.add(7);
        while processed.load(Ordering::SeqCst) < 50 {
            tokio::task::yield_now().await;
        }
        workers.abort_all();
        while let Some(result) = workers.join_next().await {
            if let Err(error) = result
                && error.is_panic()
            {
                std::panic::resume_unwind(error.into_panic());
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn delayed_adds_arrive_after_their_delay() {
        let q = Queue::new();
        q.add_after("x", Duration::from_secs(5));
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert_eq!(q.len(), 0);
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(q.len(), 1);
        q.add_rate_limited("y");
        q.add_rate_limited("y");
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(q.len(), 2);
    }
}
