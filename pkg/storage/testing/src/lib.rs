//! The one conformance suite of the storage contract.
//!
//! Every backend (SQLite, etcd) and the watch cache over each run exactly these tests, so that
//! they all honour the same contract. A backend plugs in by implementing [`Backend`] and invoking
//! [`conformance_suite!`] in one of its test files:
//!
//! ```ignore
//! genplane_storage_testing::conformance_suite!(async { my_backend::TestBackend::new().await });
//! ```
//!
//! The macro generates one `#[tokio::test]` per contract point, each with a fresh backend, so a
//! failure names the point and tests run in parallel (one process each under nextest).

#![warn(missing_docs)]
#![allow(clippy::unwrap_used, clippy::missing_panics_doc)] // a test suite: failing loudly is its job

pub mod suite;

use std::future::Future;

use genplane_storage::{Bytes, KeyValue, Revision, Storage};

/// A backend under test: it opens a store over its data, and can open it again after the
/// previous store was dropped (to prove that data survives a restart).
pub trait Backend: Send + 'static {
    /// The store type.
    type Store: Storage;

    /// Opens the store. Called again after the previous store was dropped, it must open the
    /// same data.
    fn open(&mut self) -> impl Future<Output = Self::Store> + Send;
}

/// Generates one test per contract point for the backend built by `$make`: a future (evaluated
/// afresh for each test) whose output implements [`Backend`].
#[macro_export]
macro_rules! conformance_suite {
    ($make:expr) => {
        $crate::conformance_suite!(@each $make;
            create_then_get,
            create_fails_when_the_key_exists,
            revisions_increase_by_one_per_successful_write,
            update_compares_and_swaps,
            delete_compares_and_swaps,
            delete_batch_deletes_each_key_with_its_own_revision,
            recreating_a_deleted_key_starts_a_new_life,
            get_reads_at_older_revisions,
            reads_at_future_revisions_fail,
            list_returns_the_prefix_in_key_order,
            list_reads_a_snapshot_at_a_revision,
            list_limit_more_and_count,
            pagination_is_stable_across_concurrent_writes,
            continue_tokens_expire_with_compaction,
            compaction_keeps_the_current_state,
            watch_replays_missed_events_in_order,
            watch_delivers_live_events_with_previous_values,
            watch_only_sees_its_prefix,
            watch_from_a_compacted_revision_fails,
            watch_reports_progress,
            watch_state_starts_with_the_state,
            concurrent_compare_and_swap_increments_are_exact,
            large_values_round_trip,
            hundred_thousand_keys,
            data_survives_close_and_reopen,
            invalid_keys_are_refused
        );
    };
    (@each $make:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let mut backend = $make.await;
                $crate::suite::$name(&mut backend).await;
            }
        )*
    };
}

/// Creates `key` with `value` and returns the stored key-value.
pub async fn put<S: Storage>(store: &S, key: &str, value: &str) -> KeyValue {
    store
        .create(key, Bytes::copy_from_slice(value.as_bytes()))
        .await
        .unwrap_or_else(|e| panic!("create {key}: {e}"))
}

/// The value of `kv` as text.
pub fn text(kv: &KeyValue) -> &str {
    std::str::from_utf8(&kv.value).expect("test values are UTF-8")
}

/// Reads the current revision.
pub async fn revision<S: Storage>(store: &S) -> Revision {
    store.current_revision().await.unwrap()
}
