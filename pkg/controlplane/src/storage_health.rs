//! What the backend tells operators: a readiness check and metrics.
//!
//! On etcd the readiness check is named `etcd`, as kube-apiserver's, and answers from the
//! store's health probes (every member is probed every second; see `genplane-storage-etcd`),
//! so `/readyz` fails at once with `[-]etcd` while no member is healthy instead of waiting for
//! an etcd that does not answer. On SQLite it is named `storage` and reads the current
//! revision.
//!
//! Metrics, on etcd:
//! - `genplane_etcd_member_healthy{endpoint}`: 1 while the member passes its probes, else 0;
//! - `genplane_etcd_member_preferred{endpoint}`: 1 for the member requests go to;
//! - `genplane_etcd_compactions_total`: the compactions this apiserver made (the coordinated
//!   compactor lets one apiserver compact per interval);
//! - `genplane_etcd_compacted_revision`: the latest compaction known, whoever made it;
//! - `genplane_etcd_revision_reads_total`: the reads of etcd's current revision this apiserver
//!   sent for consistent reads (concurrent ones share a read).
//!
//! Metrics, on SQLite (since the store was opened, that is since the apiserver started):
//! - `genplane_sqlite_commits_total`: the write transactions committed, each with one fsync;
//! - `genplane_sqlite_writes_total`: the writes (creates, updates, deletes) those transactions
//!   carried. Writes per commit is the batching: the writer commits what is queued together,
//!   and a batch of deletes (a `deletecollection`, a namespace's deletion) is one transaction.

use std::fmt;
use std::sync::Arc;

use genplane_component_base::health::{Health, Kind};
use genplane_component_base::metrics::Registry;
use genplane_storage::Storage;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use crate::Backend;

/// Adds the backend's readiness check to `health`: `etcd` or `storage`.
pub fn add_checks(health: &mut Health, backend: &Arc<Backend>) {
    let probe = backend.clone();
    match &**backend {
        Backend::Etcd(_) => health.add("etcd", Kind::Readiness, move || {
            let answer = match &*probe {
                Backend::Etcd(store) => store.available(),
                Backend::Sqlite(_) => Ok(()),
            };
            async move { answer.map_err(|members| format!("etcd is unavailable: {members}")) }
        }),
        Backend::Sqlite(_) => health.add("storage", Kind::Readiness, move || {
            let probe = probe.clone();
            async move {
                probe
                    .current_revision()
                    .await
                    .map(drop)
                    .map_err(|e| e.to_string())
            }
        }),
    }
}

/// Registers the backend's metrics (etcd's or SQLite's, as listed above) in `registry`.
pub fn register_metrics(registry: &Registry, backend: &Arc<Backend>) {
    match &**backend {
        Backend::Etcd(_) => registry.register_collector(Box::new(EtcdMetrics {
            backend: backend.clone(),
        })),
        Backend::Sqlite(_) => registry.register_collector(Box::new(SqliteMetrics {
            backend: backend.clone(),
        })),
    }
}

/// The SQLite metrics, read from the store at scrape time.
struct SqliteMetrics {
    backend: Arc<Backend>,
}

impl fmt::Debug for SqliteMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteMetrics").finish_non_exhaustive()
    }
}

impl Collector for SqliteMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), fmt::Error> {
        let Backend::Sqlite(store) = &*self.backend else {
            return Ok(());
        };
        ConstCounter::new(store.commits()).encode(encoder.encode_descriptor(
            "genplane_sqlite_commits",
            "Write transactions committed to the SQLite database, each with one fsync",
            None,
            MetricType::Counter,
        )?)?;
        ConstCounter::new(store.writes()).encode(encoder.encode_descriptor(
            "genplane_sqlite_writes",
            "Writes (creates, updates, deletes) committed to the SQLite database; writes per commit (genplane_sqlite_commits_total) is how well they are batched",
            None,
            MetricType::Counter,
        )?)?;
        Ok(())
    }
}

/// The etcd metrics, read from the store at scrape time.
struct EtcdMetrics {
    backend: Arc<Backend>,
}

impl fmt::Debug for EtcdMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdMetrics").finish_non_exhaustive()
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct MemberLabels {
    endpoint: String,
}

impl Collector for EtcdMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), fmt::Error> {
        let Backend::Etcd(store) = &*self.backend else {
            return Ok(());
        };
        let status = store.status();
        let mut healthy = encoder.encode_descriptor(
            "genplane_etcd_member_healthy",
            "Whether the etcd member passes its health probes (1) or not (0)",
            None,
            MetricType::Gauge,
        )?;
        for member in &status.members {
            let labels = MemberLabels {
                endpoint: member.endpoint.clone(),
            };
            ConstGauge::new(i64::from(member.error.is_none()))
                .encode(healthy.encode_family(&labels)?)?;
        }
        let mut preferred = encoder.encode_descriptor(
            "genplane_etcd_member_preferred",
            "Whether requests go to this etcd member (1) or not (0)",
            None,
            MetricType::Gauge,
        )?;
        for member in &status.members {
            let labels = MemberLabels {
                endpoint: member.endpoint.clone(),
            };
            ConstGauge::new(i64::from(member.preferred))
                .encode(preferred.encode_family(&labels)?)?;
        }
        ConstCounter::new(status.compactions).encode(encoder.encode_descriptor(
            "genplane_etcd_compactions",
            "Compactions of etcd's history made by this apiserver",
            None,
            MetricType::Counter,
        )?)?;
        ConstGauge::new(status.compacted_revision).encode(encoder.encode_descriptor(
            "genplane_etcd_compacted_revision",
            "The latest compaction of etcd's history known to this apiserver, whoever made it",
            None,
            MetricType::Gauge,
        )?)?;
        ConstCounter::new(status.revision_reads).encode(encoder.encode_descriptor(
            "genplane_etcd_revision_reads",
            "Reads of etcd's current revision sent for consistent reads (concurrent ones share one)",
            None,
            MetricType::Counter,
        )?)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{StorageConfig, open_storage};
    use genplane_storage::{Bytes, DeleteRequest};

    #[tokio::test]
    async fn sqlite_metrics_count_commits_and_the_writes_they_carried() {
        let dir = tempfile::tempdir().unwrap();
        let backend = open_storage(&StorageConfig::Sqlite {
            path: dir.path().join("db"),
        })
        .await
        .unwrap();
        let registry = Registry::new();
        register_metrics(&registry, &backend);
        for key in ["/m/a", "/m/b", "/m/c"] {
            backend.create(key, Bytes::from_static(b"v")).await.unwrap();
        }
        let deletes = ["/m/a", "/m/b", "/m/c"]
            .map(|key| DeleteRequest {
                key: key.to_owned(),
                expected: None,
            })
            .to_vec();
        assert!(
            backend
                .delete_batch(deletes)
                .await
                .iter()
                .all(Result::is_ok)
        );
        let text = registry.encode(None).body;
        for line in [
            "# TYPE genplane_sqlite_commits_total counter",
            "genplane_sqlite_commits_total 4\n",
            "# TYPE genplane_sqlite_writes_total counter",
            "genplane_sqlite_writes_total 6\n",
        ] {
            assert!(text.contains(line), "missing {line:?} in:\n{text}");
        }
    }
}
