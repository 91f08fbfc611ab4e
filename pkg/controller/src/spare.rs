//! Room given back after a burst. Rust's `HashMap`, `HashSet` and `VecDeque` keep the room of
//! the most entries they ever held, so a controller that followed 20,000 objects that came and
//! went kept their tables for good: of the 40.6 MiB of heap a controller-manager still held
//! afterwards (1.8 MiB idle), 39 MiB were the garbage collector's maps and graph, the informers'
//! stores and the work queues (heaptrack, with `hack/bench/controllers.sh --objects 20000`).

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{BuildHasher, Hash};

/// Collections with less room than this keep it: shrinking them saves little.
const KEEP: usize = 1024;

/// Whether a collection of `len` entries with room for `room` is worth shrinking: it has
/// more than [`KEEP`] room and fills less than a quarter of it. Shrinking to twice the length
/// costs the length, and comes only after at least as many removals (or inserts back up to the
/// room), so the cost per removal stays constant.
pub(crate) fn worth_shrinking(len: usize, room: usize) -> bool {
    room > KEEP && len < room / 4
}

/// A collection that can give back the room it no longer needs.
pub(crate) trait ReleaseSpare {
    /// Shrinks the collection to twice its length when [`worth_shrinking`] says so; call it
    /// after removing entries.
    fn release_spare(&mut self);
}

impl<K: Eq + Hash, V, S: BuildHasher> ReleaseSpare for HashMap<K, V, S> {
    fn release_spare(&mut self) {
        if worth_shrinking(self.len(), self.capacity()) {
            self.shrink_to(self.len() * 2);
        }
    }
}

impl<T: Eq + Hash, S: BuildHasher> ReleaseSpare for HashSet<T, S> {
    fn release_spare(&mut self) {
        if worth_shrinking(self.len(), self.capacity()) {
            self.shrink_to(self.len() * 2);
        }
    }
}

impl<T> ReleaseSpare for VecDeque<T> {
    fn release_spare(&mut self) {
        if worth_shrinking(self.len(), self.capacity()) {
            self.shrink_to(self.len() * 2);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emptied_collections_give_back_their_room_and_small_ones_keep_it() {
        let mut map: HashMap<u32, u32> = (0..20_000).map(|i| (i, i)).collect();
        let mut set: HashSet<u32> = (0..20_000).collect();
        let mut queue: VecDeque<u32> = (0..20_000).collect();
        for i in 0..19_990 {
            map.remove(&i);
            map.release_spare();
            set.remove(&i);
            set.release_spare();
            queue.pop_front();
            queue.release_spare();
        }
        assert_eq!(map.len(), 10);
        assert!(map.capacity() <= KEEP, "{}", map.capacity());
        assert!(set.capacity() <= KEEP, "{}", set.capacity());
        assert!(queue.capacity() <= KEEP, "{}", queue.capacity());
        assert_eq!(map.get(&19_995), Some(&19_995));
        assert!(set.contains(&19_995));
        assert_eq!(queue.front(), Some(&19_990));

        let mut small: HashMap<u32, u32> = (0..500).map(|i| (i, i)).collect();
        assert!(small.capacity() <= KEEP, "{}", small.capacity());
        small.retain(|k, _| *k < 2);
        let room = small.capacity();
        small.release_spare();
        assert_eq!(small.capacity(), room);
    }

    #[test]
    fn shrinking_waits_for_three_quarters_of_the_room_to_be_free() {
        assert!(!worth_shrinking(0, KEEP));
        assert!(!worth_shrinking(1_000, 4_000));
        assert!(worth_shrinking(999, 4_000));
        assert!(worth_shrinking(0, 4_000));
    }
}
