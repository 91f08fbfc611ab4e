//! What the storage tells operators: health checks and metrics.
//!
//! On etcd the checks are kube-apiserver's: `etcd` (on `/livez`, `/readyz` and `/healthz`) and
//! `etcd-readiness` (on `/readyz` only). Both answer from the store's health probes (every
//! member is probed every second; see `genplane-storage-etcd`), so they fail at once with
//! `[-]etcd` while no member is healthy instead of waiting for an etcd that does not answer.
//! On SQLite the one check is named `storage` (on all three endpoints) and reads the current
//! revision.
//!
//! `informer-sync` (on `/readyz` only, as upstream's) fails until every built-in resource's
//! watch cache has ended its first list, naming those that have not: until then reads wait for
//! the cache, and a load balancer should send requests elsewhere. A first list that failed
//! counts as ended (an object that cannot be decrypted, say: the cache's reflector logs it and
//! lists again, and reads go to storage meanwhile), so one bad object does not take the server
//! out of rotation.
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

use crate::{Backend, ResourceStorage};

/// Adds the backend's checks to `health`: `etcd` and `etcd-readiness`, or `storage`.
pub fn add_checks(health: &mut Health, backend: &Arc<Backend>) {
    match &**backend {
        Backend::Etcd(_) => {
            for (name, kind) in [
                ("etcd", Kind::Liveness),
                ("etcd-readiness", Kind::ReadinessOnly),
            ] {
                let probe = backend.clone();
                health.add(name, kind, move || {
                    let answer = match &*probe {
                        Backend::Etcd(store) => store.available(),
                        Backend::Sqlite(_) => Ok(()),
                    };
                    async move {
                        answer.map_err(|members| format!("etcd is unavailable: {members}"))
                    }
                });
            }
        }
        Backend::Sqlite(_) => {
            let probe = backend.clone();
            health.add("storage", Kind::Liveness, move || {
                let probe = probe.clone();
                async move {
                    probe
                        .current_revision()
                        .await
                        .map(drop)
                        .map_err(|e| e.to_string())
                }
            });
        }
    }
}

/// Adds `informer-sync` to `health`: it fails while any of `caches` (a name and a watch cache
/// each) has not ended its first list, naming them.
pub fn add_informer_sync(health: &mut Health, caches: Vec<(String, Arc<ResourceStorage>)>) {
    health.add("informer-sync", Kind::ReadinessOnly, move || {
        let waiting: Vec<&str> = caches
            .iter()
            .filter(|(_, cache)| !cache.listed_once())
            .map(|(name, _)| name.as_str())
            .collect();
        let answer = if waiting.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{} caches not synced yet: [{}]",
                waiting.len(),
                waiting.join(" ")
            ))
        };
        async move { answer }
    });
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
    async fn informer_sync_names_the_caches_until_their_first_list() {
        let mut etcd = genplane_storage_etcd::testing::EtcdServer::start()
            .await
            .unwrap();
        let backend = open_storage(&StorageConfig::Etcd(etcd.config()))
            .await
            .unwrap();
        let mut health = Health::new(&genplane_component_base::shutdown::Shutdown::new());
        add_checks(&mut health, &backend);
        // etcd stops answering before the caches are made: their first lists wait for it.
        etcd.freeze();
        let cache = |prefix: &str| {
            Arc::new(
                genplane_storage_cacher::Cacher::new(
                    genplane_storage_value::Transformed::new(backend.clone(), None),
                    prefix,
                    genplane_storage_cacher::CacherConfig::default(),
                )
                .unwrap(),
            )
        };
        add_informer_sync(
            &mut health,
            vec![
                ("configmaps".to_owned(), cache("/registry/configmaps/")),
                ("secrets".to_owned(), cache("/registry/secrets/")),
            ],
        );
        let waiting = health.answer("/readyz/informer-sync", None).await.unwrap();
        assert_eq!(
            (waiting.status, waiting.body.as_str()),
            (
                500,
                "internal server error: 2 caches not synced yet: [configmaps secrets]\n"
            )
        );
        assert_eq!(
            health
                .answer("/livez/informer-sync", None)
                .await
                .unwrap()
                .status,
            404,
            "informer-sync is a readiness check only"
        );
        etcd.thaw();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let answer = health.answer("/readyz", Some("verbose")).await.unwrap();
            if answer.status == 200 {
                assert!(
                    answer.body.contains("[+]informer-sync ok\n"),
                    "{}",
                    answer.body
                );
                assert!(
                    answer.body.contains("[+]etcd-readiness ok\n"),
                    "{}",
                    answer.body
                );
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the caches never synced: {}",
                answer.body
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

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
        let text = registry.encode().body;
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
