//! A work queue as client-go's: a key is queued at most once, never handed to two workers at
//! once (a key added while it is processed is queued again when it is done), and can be added
//! after a delay or with per-key exponential backoff.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::Notify;

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

/// The queue; share it as `Arc<Queue<T>>`.
pub(crate) struct Queue<T> {
    state: Mutex<State<T>>,
    notify: Notify,
}

impl<T: Hash + Eq + Clone + Send + Sync + 'static> Queue<T> {
    /// An empty queue.
    pub(crate) fn new() -> Arc<Self> {
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
    pub(crate) fn add(&self, key: T) {
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
    pub(crate) fn add_after(self: &Arc<Self>, key: T, delay: Duration) {
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
    pub(crate) fn add_rate_limited(self: &Arc<Self>, key: T) {
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
    pub(crate) fn forget(&self, key: &T) {
        self.lock().failures.remove(key);
    }

    /// Waits for the next key; the caller must call [`Queue::done`] with it.
    pub(crate) async fn get(&self) -> T {
        loop {
            {
                let mut state = self.lock();
                if let Some(key) = state.queue.pop_front() {
                    state.dirty.remove(&key);
                    state.processing.insert(key.clone());
                    return key;
                }
            }
            self.notify.notified().await;
        }
    }

    /// Marks `key` processed; queues it again if it was added meanwhile.
    pub(crate) fn done(&self, key: &T) {
        let mut state = self.lock();
        state.processing.remove(key);
        if state.dirty.contains(key) {
            state.queue.push_back(key.clone());
            drop(state);
            self.notify.notify_one();
        }
    }

    /// How many keys wait.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().queue.len()
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
