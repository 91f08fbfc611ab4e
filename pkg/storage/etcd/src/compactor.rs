//! The coordinated compactor: several apiservers share one etcd, and one compaction key decides
//! which of them compacts, as kube-apiserver's `storage/etcd3/compact.go` does.
//!
//! The compaction key's *version* (how often it was written) is a logical clock shared by every
//! compactor. Each compactor remembers the version it last saw and, every interval, writes the
//! key only if the version is still that one (`Txn(If version == seen, Then Put, Else Get)`).
//! The compactor whose write succeeds compacts to the revision it observed one interval earlier;
//! the others learn the new version and try again next interval. So while one compactor is
//! alive it alone compacts, once per interval; when it dies another takes over within two
//! intervals. No compaction happens in the first round, which only establishes a revision.
//!
//! The key's value is the revision compacted to. Losers read it from their failed claim, and
//! every store reads it with each health probe, so every apiserver learns of a compaction
//! within a second, whoever made it ([`genplane_storage::Storage::compacted_revision`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use etcd_client::{Compare, CompareOp, Txn, TxnOp, TxnOpResponse};
use genplane_storage::{Error, Result, Revision, Storage};
use tokio::task::JoinHandle;

use crate::{EtcdStore, Inner};

/// The compaction key, under the store's prefix. With an empty prefix it is kube-apiserver's.
pub const COMPACT_REV_KEY: &str = "compact_rev_key";

/// kube-apiserver's default compaction interval.
pub const DEFAULT_COMPACTION_INTERVAL: Duration = Duration::from_secs(5 * 60);

/// A running coordinated compactor. Dropping it (or [`Compactor::stop`]) stops it.
#[derive(Debug)]
pub struct Compactor {
    task: JoinHandle<()>,
    compactions: Arc<AtomicU64>,
}

impl Compactor {
    /// How many compactions this compactor has done (rounds it won, the first excepted).
    pub fn compactions(&self) -> u64 {
        self.compactions.load(Ordering::Relaxed)
    }

    /// Stops the compactor.
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for Compactor {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl EtcdStore {
    /// Starts a coordinated compactor that, every `interval`, compacts history older than one
    /// interval, unless another compactor sharing this etcd and prefix did so in that interval.
    /// [`DEFAULT_COMPACTION_INTERVAL`] is kube-apiserver's choice.
    ///
    /// Its writes to [`COMPACT_REV_KEY`] move the store's revision. It logs each compaction
    /// and counts it in [`crate::EtcdStatus::compactions`]. It stops when the store's last
    /// clone is dropped. Needs a Tokio runtime.
    pub fn start_compactor(&self, interval: Duration) -> Compactor {
        let compactions = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn(run(
            Arc::downgrade(&self.inner),
            interval,
            compactions.clone(),
        ));
        Compactor { task, compactions }
    }

    /// One round: claims the next compaction time if it is still `seen`, and compacts to
    /// `revision` if the claim succeeded. Returns the compaction time now known and the
    /// revision to compact to next round.
    async fn compaction_round(
        &self,
        seen: i64,
        revision: Revision,
    ) -> Result<(i64, Revision, bool)> {
        let key = self.etcd_key(COMPACT_REV_KEY);
        let txn = Txn::new()
            .when([Compare::version(key.clone(), CompareOp::Equal, seen)])
            .and_then([TxnOp::put(key.clone(), revision.to_string(), None)])
            .or_else([TxnOp::get(key, None)]);
        let response = self.write(txn).await?;
        let now = Self::header_revision(response.header())?;
        if !response.succeeded() {
            let (version, compacted) = match response.op_responses().into_iter().next() {
                Some(TxnOpResponse::Get(get)) => get.kvs().first().map_or((0, 0), |kv| {
                    let value = std::str::from_utf8(kv.value()).ok();
                    (
                        kv.version(),
                        value.and_then(|v| v.parse().ok()).unwrap_or(0),
                    )
                }),
                _ => (0, 0),
            };
            // Another compactor won this interval and compacted to what the key says.
            self.inner.note_compacted(compacted);
            return Ok((version, now, false));
        }
        if revision == 0 {
            // The first round only establishes the revision to compact to next time.
            return Ok((seen + 1, now, false));
        }
        // The claim is won either way: a failed compaction waits for the next round.
        let compacted = self
            .compact(revision)
            .await
            .map_err(|e| log_failure(&e))
            .is_ok();
        Ok((seen + 1, now, compacted))
    }
}

async fn run(weak: Weak<Inner>, interval: Duration, compactions: Arc<AtomicU64>) {
    let mut seen = 0;
    let mut revision = 0;
    loop {
        tokio::time::sleep(interval).await;
        let Some(inner) = weak.upgrade() else {
            return;
        };
        let store = EtcdStore { inner };
        match store.compaction_round(seen, revision).await {
            Ok((next_seen, next_revision, compacted)) => {
                if compacted {
                    compactions.fetch_add(1, Ordering::Relaxed);
                    store.inner.compactions.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(revision, "compacted etcd history");
                }
                seen = next_seen;
                revision = next_revision;
            }
            Err(e) => log_failure(&e),
        }
    }
}

fn log_failure(error: &Error) {
    tracing::warn!(%error, "etcd compaction failed; retrying next interval");
}
