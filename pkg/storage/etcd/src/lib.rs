//! The etcd v3 backend of the genplane storage contract: the distributed store, for several
//! apiservers and high availability.
//!
//! [`EtcdStore`] implements [`genplane_storage::Storage`] over etcd's v3 gRPC API, the way
//! kube-apiserver's `storage/etcd3` does, so the contract's revisions *are* etcd's revisions
//! (a fresh etcd is at revision 1).
//!
//! # Mapping
//!
//! | contract | etcd |
//! |---|---|
//! | `get`, `list` | `Range` (linearizable), at a revision; `list` ranges over `[start, prefix_end)` with etcd's limit, `more` and `count` |
//! | `create` | `Txn(If mod_revision(k) == 0, Then Put)` |
//! | `update` | `Txn(If mod_revision(k) == expected, Then Put + Get(keys only), Else Get)` |
//! | `delete` | `Txn(If mod_revision(k) == expected (or create_revision(k) > 0), Then Delete(prev_kv), Else Get)` |
//! | `watch` | `Watch` on the prefix range from `after + 1`, with `prev_kv` and `progress_notify` |
//! | `current_revision` | the header revision of a linearizable `Range` |
//! | `compact` | `Compact` (not physical) |
//!
//! Every key is stored under [`EtcdConfig::prefix`], so several clusters can share one etcd.
//!
//! # Members
//!
//! The store keeps one connection per endpoint and sends requests to one preferred member
//! (the first endpoint given, when it answers). tonic's balanced channel is not used because
//! it keeps routing requests to a member it cannot reach.
//!
//! Every member's health is checked actively: each is probed every second with a
//! linearizable read that must answer within 2 seconds, so a member that is frozen, cut off
//! or without a leader is found out within about 3 seconds, whether or not requests fail on
//! it. A request that cannot reach a member marks it unhealthy too; only a probe makes it
//! healthy again. When the preferred member is unhealthy, the next healthy one becomes
//! preferred and what waited on the old one gives up on it: reads and watches go on on the
//! new member, a write in flight fails with [`Error::Timeout`] (it may still take effect).
//! With no healthy member at all (etcd lost its quorum), requests wait 2 seconds for one and
//! fail with [`Error::Unavailable`], and [`EtcdStore::available`] says so at once (for
//! readiness checks). Within that, a request that never left the client fails over whatever
//! it is, a read or the opening of a watch after any transient failure, a write that may have
//! reached etcd never. HTTP/2 keep-alive (3 s, 2 s) is the backstop. Health transitions are
//! logged once each, naming the member and its error ([`EtcdStore::status`] has them too).
//!
//! gRPC failures map to the contract's errors: `Unavailable` to [`Error::Unavailable`],
//! `DeadlineExceeded` (and [`EtcdConfig::request_timeout`]) to [`Error::Timeout`], etcd's
//! "required revision has been compacted" to [`Error::Compacted`] and "required revision is a
//! future revision" to [`Error::FutureRevision`]. etcd's answer carries neither the compacted
//! nor the current revision, so the store asks for them after such a failure.
//!
//! # Watches
//!
//! Each [`Storage::watch`] opens one etcd watch stream and forwards its events from a task that
//! ends when the [`Watch`] is dropped. A `PUT` whose create revision equals its mod revision is
//! a [`genplane_storage::EventKind::Create`], any other `PUT` an update, a `DELETE` a delete
//! (its key-value has an empty value, the delete's revision as mod revision and the deleted
//! key's create revision). When the stream breaks (a lost connection, a member without a
//! leader, a restarted etcd), the task opens a new one from the last revision it delivered, so
//! the reader sees neither a gap nor a duplicate. The stream is also opened again, on another
//! member, when its member turns unhealthy, and when it goes silent: a stream without a
//! message for 5 seconds is asked for progress, which a live stream answers, and one that
//! stays silent 3 seconds more is given up.
//!
//! **Compaction.** etcd accepts a watch from revision `C` after a compaction to `C`, but the
//! contract discards the events at `C` too. So once the etcd watch is created, the store reads
//! at the revision `after` the watch starts from: if that read fails as compacted, so does the
//! watch. The check runs after the etcd watch exists, so a compaction racing with the start can
//! only make the watch fail, never lose events. When etcd cancels a running watch because it
//! fell behind a compaction, the watch delivers [`Error::Compacted`] and ends.
//!
//! **Progress.** Asked for progress, the watch reads the current revision `R` (a quorum read)
//! and answers once it knows every event up to some revision `>= R` has been delivered: after
//! an event at `R` or later, or after etcd reports the watch synced at `R` or later. etcd
//! reports that in two ways. Its periodic progress notification (every
//! `--experimental-watch-progress-notify-interval`, 10 minutes by default) goes through the
//! watch's own event queue and is only sent when the watch is synced, so it is always trusted.
//! The answer to an explicit progress request is trusted only from etcd 3.4.31 / 3.5.13 on:
//! older servers (Debian's 3.4.23 among them) send it past events still queued for the watch
//! (etcd issue 15220). Against those, progress answers wait for the periodic notification, so
//! run them with a short `--experimental-watch-progress-notify-interval` (the test launcher
//! uses 200 ms); the server version is read at [`EtcdStore::connect`].
//!
//! # Compaction
//!
//! [`Storage::compact`] compacts etcd as kube-apiserver does, not physically: reads before the
//! revision fail as soon as it returns, and etcd frees the space in the background. A revision
//! that is already compacted is a no-op. For several apiservers sharing one etcd,
//! [`EtcdStore::start_compactor`] runs kube-apiserver's coordinated compactor
//! ([`EtcdConfig::compaction_interval`] starts it at connect): it is off unless asked for,
//! because its writes move the revision. The health probes read the compaction key, so the
//! store knows of every compaction within a second, whoever made it
//! ([`Storage::compacted_revision`]); watch caches over it use that to answer old revisions
//! as etcd does.

#![warn(missing_docs)]

mod compactor;
mod error;
mod members;
#[cfg(feature = "test-util")]
pub mod testing;
mod watch;

use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use etcd_client::{
    Certificate, CompactionOptions, Compare, CompareOp, ConnectOptions, DeleteOptions, GetOptions,
    Identity, TlsOptions, Txn, TxnOp, TxnOpResponse, TxnResponse,
};
use futures::StreamExt;
use genplane_storage::{
    Bytes, DeleteRequest, Deleted, Error, KeyValue, ListRequest, ListResponse, Result, Revision,
    Storage, Watch, validate_key, validate_list,
};

pub use compactor::{COMPACT_REV_KEY, Compactor, DEFAULT_COMPACTION_INTERVAL};
pub use error::{ConfigError, WatchCanceled};
pub use members::MemberStatus;

use error::Failure;
use members::{Members, Retry};

/// HTTP/2 keep-alive on every member's connection: a connection whose peer stops answering is
/// closed after at most interval + timeout without a frame from it, and requests on it fail.
/// The health probes (see [`members`]) read from every member every second, so a live
/// connection never needs a ping (etcd refuses pings more often than every 5 seconds on a
/// connection it sends nothing on); this is the backstop behind them. (kube-apiserver uses
/// 30 s and 10 s, and notices a frozen member only after 40 s.)
const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(3);
const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(2);
/// How many deletes of one [`Storage::delete_batch`] are in flight at once.
const DELETE_CONCURRENCY: usize = 64;

/// How to reach etcd.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdConfig {
    /// Client URLs of the etcd members, e.g. `http://10.0.0.1:2379` or `https://10.0.0.1:2379`.
    /// With [`EtcdConfig::tls`] set, use `https://` URLs (or bare `host:port`). Requests go to
    /// one member and fail over to the next when it cannot be reached (see the crate
    /// documentation); connections are re-established by themselves.
    pub endpoints: Vec<String>,
    /// Prepended to every key, so that several clusters can share one etcd (e.g. `/cluster-a`).
    /// Empty by default.
    pub prefix: String,
    /// TLS to the members; plain HTTP/2 when `None`.
    pub tls: Option<EtcdTls>,
    /// How long to wait for a connection to a member, and for [`EtcdStore::connect`] to reach
    /// one.
    pub dial_timeout: Duration,
    /// How long one request may take before it fails with [`Error::Timeout`] (whether it took
    /// effect is then unknown). Watches are not bounded by it. Keep it shorter than the
    /// timeout of the API requests that wait for it, so that they can answer why they failed.
    pub request_timeout: Duration,
    /// How often the store's coordinated compactor runs ([`EtcdStore::start_compactor`]);
    /// zero (the default here) starts none. kube-apiserver's default is
    /// [`DEFAULT_COMPACTION_INTERVAL`].
    pub compaction_interval: Duration,
}

impl EtcdConfig {
    /// The default dial timeout.
    pub const DEFAULT_DIAL_TIMEOUT: Duration = Duration::from_secs(5);
    /// The default request timeout.
    pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

    /// A configuration for these endpoints, with no prefix, no TLS, the default timeouts and no
    /// compactor.
    pub fn new(endpoints: impl IntoIterator<Item = impl Into<String>>) -> Self {
        EtcdConfig {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            prefix: String::new(),
            tls: None,
            dial_timeout: Self::DEFAULT_DIAL_TIMEOUT,
            request_timeout: Self::DEFAULT_REQUEST_TIMEOUT,
            compaction_interval: Duration::ZERO,
        }
    }
}

/// TLS settings for the connections to etcd, as PEM files.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EtcdTls {
    /// The CA that signed the members' serving certificates; the system's trust roots when
    /// `None`.
    pub ca_file: Option<PathBuf>,
    /// The client certificate, for mutual TLS (etcd's `--client-cert-auth`).
    pub cert_file: Option<PathBuf>,
    /// The client certificate's private key.
    pub key_file: Option<PathBuf>,
}

impl EtcdTls {
    fn options(&self) -> Result<TlsOptions, ConfigError> {
        let read = |path: &PathBuf| {
            std::fs::read(path).map_err(|source| ConfigError::ReadFile {
                path: path.clone(),
                source,
            })
        };
        let mut options = TlsOptions::new();
        options = match &self.ca_file {
            Some(ca) => options.ca_certificate(Certificate::from_pem(read(ca)?)),
            None => options.with_native_roots(),
        };
        match (&self.cert_file, &self.key_file) {
            (Some(cert), Some(key)) => {
                options = options.identity(Identity::from_pem(read(cert)?, read(key)?));
            }
            (None, None) => {}
            _ => return Err(ConfigError::IncompleteIdentity),
        }
        Ok(options)
    }
}

/// The etcd backend: a [`Storage`] over etcd v3. Cheap to clone; clones share one connection.
#[derive(Clone)]
pub struct EtcdStore {
    inner: Arc<Inner>,
}

struct Inner {
    members: Members,
    prefix: Vec<u8>,
    server_version: String,
    trusts_progress_requests: bool,
    /// The key the health probes read: the compaction key, so that they learn of every
    /// compaction, whoever made it.
    probe_key: Vec<u8>,
    /// The latest compaction known (ours, the compaction key's value, or etcd's answers).
    compacted: AtomicI64,
    /// How many compactions this store made.
    compactions: AtomicU64,
    /// The compactor [`EtcdConfig::compaction_interval`] asked for.
    compactor: OnceLock<Compactor>,
    /// How many reads of the current revision were sent.
    revision_reads: AtomicU64,
    /// One read of the current revision at a time, and the latest one's answer: its number in
    /// `revision_reads` and the revision, or why it failed. Callers queue here (see
    /// [`Storage::current_revision`]).
    revision_turn: tokio::sync::Mutex<Option<(u64, Result<Revision>)>>,
}

impl Inner {
    fn note_compacted(&self, revision: Revision) {
        self.compacted.fetch_max(revision, Ordering::Relaxed);
    }
}

/// What an [`EtcdStore`] knows about etcd, for metrics and readiness.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdStatus {
    /// Every member's health, as last probed.
    pub members: Vec<MemberStatus>,
    /// How many compactions this store made.
    pub compactions: u64,
    /// The latest compaction known (see [`Storage::compacted_revision`]).
    pub compacted_revision: Revision,
    /// How many reads of the current revision this store sent (concurrent consistent reads
    /// share one).
    pub revision_reads: u64,
}

impl fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdStore")
            .field("prefix", &String::from_utf8_lossy(&self.inner.prefix))
            .field("server_version", &self.inner.server_version)
            .finish_non_exhaustive()
    }
}

impl EtcdStore {
    /// Connects to etcd and checks that a member answers within [`EtcdConfig::dial_timeout`].
    /// Starts probing every member's health, and the compactor when
    /// [`EtcdConfig::compaction_interval`] asks for one; both stop with the last clone.
    ///
    /// Fails with [`Error::Unavailable`] when no member answers, and with [`Error::Backend`]
    /// holding a [`ConfigError`] when the configuration is unusable.
    pub async fn connect(config: &EtcdConfig) -> Result<EtcdStore> {
        if config.endpoints.is_empty() {
            return Err(Error::backend(ConfigError::NoEndpoints));
        }
        let mut options = ConnectOptions::new()
            .with_connect_timeout(config.dial_timeout)
            .with_keep_alive(KEEP_ALIVE_INTERVAL, KEEP_ALIVE_TIMEOUT)
            .with_require_leader(true);
        if let Some(tls) = &config.tls {
            options = options.with_tls(tls.options().map_err(Error::backend)?);
        }
        let (members, server_version) = Members::connect(
            &config.endpoints,
            &options,
            config.dial_timeout,
            config.request_timeout,
        )
        .await?;
        let prefix = config.prefix.as_bytes().to_vec();
        let mut probe_key = prefix.clone();
        probe_key.extend_from_slice(COMPACT_REV_KEY.as_bytes());
        let store = EtcdStore {
            inner: Arc::new(Inner {
                members,
                prefix,
                trusts_progress_requests: progress_requests_are_ordered(&server_version),
                server_version,
                probe_key,
                compacted: AtomicI64::new(0),
                compactions: AtomicU64::new(0),
                compactor: OnceLock::new(),
                revision_reads: AtomicU64::new(0),
                revision_turn: tokio::sync::Mutex::new(None),
            }),
        };
        for index in 0..store.inner.members.len() {
            tokio::spawn(probe(Arc::downgrade(&store.inner), index));
        }
        if !config.compaction_interval.is_zero() {
            let compactor = store.start_compactor(config.compaction_interval);
            // Set once, here, before anyone else sees the store.
            let _ = store.inner.compactor.set(compactor);
        }
        Ok(store)
    }

    /// The version of the etcd member that answered [`EtcdStore::connect`].
    pub fn server_version(&self) -> &str {
        &self.inner.server_version
    }

    /// What the store knows about etcd now: the members' health (probed every second), and
    /// compactions.
    pub fn status(&self) -> EtcdStatus {
        EtcdStatus {
            members: self.inner.members.status(),
            compactions: self.inner.compactions.load(Ordering::Relaxed),
            compacted_revision: self.inner.compacted.load(Ordering::Relaxed),
            revision_reads: self.inner.revision_reads.load(Ordering::Relaxed),
        }
    }

    /// `Ok` while some member is healthy, else why none is (every member's error), at once and
    /// without asking etcd: for readiness checks, which must answer even when etcd does not.
    pub fn available(&self) -> std::result::Result<(), String> {
        self.inner.members.available()
    }

    /// The etcd key of a storage key.
    fn etcd_key(&self, key: &str) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.inner.prefix.len() + key.len());
        k.extend_from_slice(&self.inner.prefix);
        k.extend_from_slice(key.as_bytes());
        k
    }

    /// The storage key-value of an etcd key-value read under the prefix.
    fn key_value(&self, kv: etcd_client::KeyValue) -> Result<KeyValue> {
        let create_revision = kv.create_revision();
        let mod_revision = kv.mod_revision();
        let (key, value) = kv.into_key_value();
        Ok(KeyValue {
            key: self.storage_key(key)?,
            value: Bytes::from(value),
            create_revision,
            mod_revision,
            hint: 0,
        })
    }

    fn storage_key(&self, key: Vec<u8>) -> Result<String> {
        let Some(rest) = key.strip_prefix(self.inner.prefix.as_slice()) else {
            return Err(Error::backend(UnexpectedKey(key)));
        };
        String::from_utf8(rest.to_vec()).map_err(|e| Error::backend(UnexpectedKey(e.into_bytes())))
    }

    /// The contract error of a failed read at `requested`, with the compacted or current
    /// revision that etcd's answer leaves out.
    async fn explain(&self, failure: Failure, requested: Revision) -> Error {
        match failure {
            Failure::Unsent(e) | Failure::Broken(e) | Failure::Other(e) => e,
            Failure::Compacted => {
                // If etcd does not tell, the oldest revision that may still be readable.
                let compacted = self
                    .ask_compacted_revision()
                    .await
                    .unwrap_or(requested.saturating_add(1));
                self.inner.note_compacted(compacted);
                Error::Compacted {
                    requested,
                    compacted,
                }
            }
            Failure::FutureRevision => match self.current_revision().await {
                Ok(current) => Error::FutureRevision { requested, current },
                Err(e) => e,
            },
        }
    }

    /// The revision of etcd's last compaction, which etcd only tells a watch: one from revision
    /// 1 is canceled at once with the compaction revision. `None` if etcd does not say so in a
    /// second (when nothing is compacted it never does).
    async fn ask_compacted_revision(&self) -> Option<Revision> {
        let probe = async {
            let options = etcd_client::WatchOptions::new().with_start_revision(1);
            let (mut stream, created, _) = self
                .inner
                .members
                .watch(&self.etcd_key(COMPACT_PROBE_KEY), &options)
                .await
                .ok()?;
            let mut response = created;
            loop {
                if response.compact_revision() > 0 {
                    return Some(response.compact_revision());
                }
                if response.canceled() {
                    return None;
                }
                response = stream.message().await.ok()??;
            }
        };
        tokio::time::timeout(Duration::from_secs(1), probe)
            .await
            .ok()
            .flatten()
    }

    /// Fails with [`Error::Compacted`] if reading at revision `after` fails as compacted: then
    /// a watch after it misses compacted events.
    async fn check_not_compacted(&self, key: &[u8], after: Revision) -> Result<()> {
        let options = GetOptions::new()
            .with_revision(after.max(1))
            .with_count_only();
        let answer = self
            .inner
            .members
            .kv(Retry::Idempotent, |mut kv| {
                let options = options.clone();
                async move { kv.get(key, Some(options)).await }
            })
            .await;
        match answer {
            Ok(_) | Err(Failure::FutureRevision) => Ok(()),
            Err(failure) => Err(self.explain(failure, after).await),
        }
    }

    /// One quorum read of etcd's current revision (a count-only range).
    async fn read_current_revision(&self) -> Result<Revision> {
        let key = self.etcd_key("/");
        let response = self
            .inner
            .members
            .kv(Retry::Idempotent, |mut kv| {
                let key = key.clone();
                async move { kv.get(key, Some(GetOptions::new().with_count_only())).await }
            })
            .await
            .map_err(Failure::into_error)?;
        Self::header_revision(response.header())
    }

    fn header_revision(header: Option<&etcd_client::ResponseHeader>) -> Result<Revision> {
        header
            .map(etcd_client::ResponseHeader::revision)
            .ok_or_else(|| Error::backend(MissingHeader))
    }
}

/// Where the compaction probe watches; any key would do, this one is never written.
const COMPACT_PROBE_KEY: &str = "compact_probe_key";

/// Whether etcd at `version` answers progress requests in order with the watch's events: fixed
/// in 3.4.31 and 3.5.13 (etcd PRs 15237 and 17557 with their backports).
fn progress_requests_are_ordered(version: &str) -> bool {
    let mut parts = version
        .split(['.', '-', '+'])
        .map(|p| p.parse::<u64>().unwrap_or(0));
    let (major, minor, patch) = (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    );
    match (major, minor) {
        (3, 4) => patch >= 31,
        (3, 5) => patch >= 13,
        (3, m) => m > 5,
        (m, _) => m > 3,
    }
}

/// The end of the range of keys starting with `prefix`: the prefix with its last byte
/// incremented (etcd's `GetPrefixRangeEnd`).
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // Only 0xff bytes (never a UTF-8 key): the range runs to the end of the key space.
    vec![0]
}

/// etcd returned a key outside the store's prefix or not UTF-8.
#[derive(Debug, thiserror::Error)]
#[error("etcd returned an unexpected key {}", String::from_utf8_lossy(.0))]
struct UnexpectedKey(Vec<u8>);

/// etcd's answer lacked its header.
#[derive(Debug, thiserror::Error)]
#[error("etcd answered without a response header")]
struct MissingHeader;

/// etcd's answer did not have the expected shape.
#[derive(Debug, thiserror::Error)]
#[error("unexpected answer from etcd: {0}")]
struct UnexpectedAnswer(&'static str);

impl Storage for EtcdStore {
    async fn get(&self, key: &str, revision: Option<Revision>) -> Result<Option<KeyValue>> {
        validate_key(key)?;
        let mut options = GetOptions::new();
        if let Some(revision) = revision {
            options = options.with_revision(revision);
        }
        let etcd_key = self.etcd_key(key);
        let answer = self
            .inner
            .members
            .kv(Retry::Idempotent, |mut kv| {
                let (key, options) = (etcd_key.clone(), options.clone());
                async move { kv.get(key, Some(options)).await }
            })
            .await;
        let mut response = match answer {
            Ok(response) => response,
            Err(failure) => return Err(self.explain(failure, revision.unwrap_or(0)).await),
        };
        response
            .take_kvs()
            .into_iter()
            .next()
            .map(|kv| self.key_value(kv))
            .transpose()
    }

    async fn list(&self, request: ListRequest) -> Result<ListResponse> {
        validate_list(&request)?;
        let start = self.etcd_key(request.start.as_deref().unwrap_or(&request.prefix));
        let mut options = GetOptions::new().with_range(prefix_end(&self.etcd_key(&request.prefix)));
        if let Some(limit) = request.limit.filter(|&l| l > 0) {
            options = options.with_limit(i64::try_from(limit).unwrap_or(i64::MAX));
        }
        let revision = request.revision.filter(|&r| r > 0);
        if let Some(revision) = revision {
            options = options.with_revision(revision);
        }
        let answer = self
            .inner
            .members
            .kv(Retry::Idempotent, |mut kv| {
                let (start, options) = (start.clone(), options.clone());
                async move { kv.get(start, Some(options)).await }
            })
            .await;
        let mut response = match answer {
            Ok(response) => response,
            Err(failure) => return Err(self.explain(failure, revision.unwrap_or(0)).await),
        };
        let read_at = match revision {
            Some(revision) => revision,
            None => Self::header_revision(response.header())?,
        };
        let items = response
            .take_kvs()
            .into_iter()
            .map(|kv| self.key_value(kv))
            .collect::<Result<Vec<_>>>()?;
        Ok(ListResponse {
            items,
            revision: read_at,
            more: response.more(),
            count: request.count.then(|| response.count()),
        })
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<KeyValue> {
        validate_key(key)?;
        let etcd_key = self.etcd_key(key);
        let txn = Txn::new()
            .when([Compare::mod_revision(etcd_key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(etcd_key, value.to_vec(), None)]);
        let response = self.write(txn).await?;
        if !response.succeeded() {
            return Err(Error::AlreadyExists {
                key: key.to_owned(),
            });
        }
        let revision = Self::header_revision(response.header())?;
        Ok(KeyValue {
            key: key.to_owned(),
            value,
            create_revision: revision,
            mod_revision: revision,
            hint: 0,
        })
    }

    async fn update(&self, key: &str, value: Bytes, expected: Revision) -> Result<KeyValue> {
        validate_key(key)?;
        let etcd_key = self.etcd_key(key);
        let mut compares = vec![Compare::mod_revision(
            etcd_key.clone(),
            CompareOp::Equal,
            expected,
        )];
        if expected <= 0 {
            // mod_revision 0 means "absent" to etcd; an update never creates.
            compares.push(Compare::create_revision(
                etcd_key.clone(),
                CompareOp::Greater,
                0,
            ));
        }
        let txn = Txn::new()
            .when(compares)
            .and_then([
                TxnOp::put(etcd_key.clone(), value.to_vec(), None),
                TxnOp::get(etcd_key.clone(), Some(GetOptions::new().with_keys_only())),
            ])
            .or_else([TxnOp::get(etcd_key, None)]);
        let response = self.write(txn).await?;
        let revision = Self::header_revision(response.header())?;
        let mut ops = response.op_responses().into_iter();
        if !response.succeeded() {
            return Err(self.conflict_or_not_found(key, expected, ops.next()));
        }
        let written = match ops.nth(1) {
            Some(TxnOpResponse::Get(mut get)) => get.take_kvs().into_iter().next(),
            _ => None,
        }
        .ok_or_else(|| Error::backend(UnexpectedAnswer("no key after a successful update")))?;
        Ok(KeyValue {
            key: key.to_owned(),
            value,
            create_revision: written.create_revision(),
            mod_revision: revision,
            hint: 0,
        })
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<Deleted> {
        validate_key(key)?;
        let etcd_key = self.etcd_key(key);
        let mut compares = Vec::with_capacity(2);
        if let Some(expected) = expected {
            compares.push(Compare::mod_revision(
                etcd_key.clone(),
                CompareOp::Equal,
                expected,
            ));
        }
        if expected.is_none_or(|e| e <= 0) {
            compares.push(Compare::create_revision(
                etcd_key.clone(),
                CompareOp::Greater,
                0,
            ));
        }
        let txn = Txn::new()
            .when(compares)
            .and_then([TxnOp::delete(
                etcd_key.clone(),
                Some(DeleteOptions::new().with_prev_key()),
            )])
            .or_else([TxnOp::get(etcd_key, None)]);
        let response = self.write(txn).await?;
        let revision = Self::header_revision(response.header())?;
        let mut ops = response.op_responses().into_iter();
        if !response.succeeded() {
            return Err(self.conflict_or_not_found(key, expected.unwrap_or(0), ops.next()));
        }
        let prev = match ops.next() {
            Some(TxnOpResponse::Delete(mut delete)) => delete.take_prev_kvs().into_iter().next(),
            _ => None,
        }
        .ok_or_else(|| Error::backend(UnexpectedAnswer("no previous value of a deleted key")))?;
        Ok(Deleted {
            revision,
            prev: self.key_value(prev)?,
        })
    }

    async fn delete_batch(&self, deletes: Vec<DeleteRequest>) -> Vec<Result<Deleted>> {
        // One transaction per key, all in flight at once: etcd gives every key of a
        // transaction the same revision, which watchers resuming after a revision cannot
        // handle; concurrent transactions get revisions of their own and are committed
        // together by etcd's raft log.
        futures::stream::iter(deletes)
            .map(|d| async move { self.delete(&d.key, d.expected).await })
            .buffered(DELETE_CONCURRENCY)
            .collect()
            .await
    }

    async fn watch(&self, prefix: &str, after: Revision) -> Result<Watch> {
        validate_key(prefix)?;
        watch::start(self.clone(), prefix, after).await
    }

    /// Concurrent callers share reads, as etcd batches its read index: a read answers every
    /// caller that arrived before it was sent, so each still gets a revision at least as new as
    /// every write acknowledged before it asked. One read is in flight at a time; the callers
    /// that arrive meanwhile share the next. Under load that is one round trip per batch, not
    /// per consistent list. A failed read fails its whole batch, so that while etcd does not
    /// answer the callers do not wait for one failed read after another.
    async fn current_revision(&self) -> Result<Revision> {
        let inner = &self.inner;
        let arrived = inner.revision_reads.load(Ordering::SeqCst);
        let mut latest = inner.revision_turn.lock().await;
        if let Some((read, answer)) = &*latest
            && *read > arrived
        {
            // Sent after this caller arrived.
            return answer.clone();
        }
        let read = inner.revision_reads.fetch_add(1, Ordering::SeqCst) + 1;
        let answer = self.read_current_revision().await;
        *latest = Some((read, answer.clone()));
        answer
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        if revision < 1 {
            return Ok(());
        }
        let answer = self
            .inner
            .members
            .kv(Retry::Idempotent, |mut kv| async move {
                // Not physical, as kube-apiserver compacts: etcd records the compaction at once
                // (older reads fail from then on) and removes the history in the background,
                // instead of holding the request until a large database is rewritten.
                kv.compact(revision, None::<CompactionOptions>).await
            })
            .await;
        match answer {
            // Compacting to a revision at or before the last compaction changes nothing.
            Ok(_) | Err(Failure::Compacted) => {
                self.inner.note_compacted(revision);
                Ok(())
            }
            Err(failure) => Err(self.explain(failure, revision).await),
        }
    }

    fn compacted_revision(&self) -> Revision {
        self.inner.compacted.load(Ordering::Relaxed)
    }

    fn watch_proves_progress(&self) -> bool {
        self.inner.trusts_progress_requests
    }
}

/// Probes member `index` of the store every [`members::PROBE_INTERVAL`] until the store is
/// gone, noting the compactions the probes read of.
async fn probe(store: Weak<Inner>, index: usize) {
    loop {
        tokio::time::sleep(members::PROBE_INTERVAL).await;
        let Some(inner) = store.upgrade() else {
            return;
        };
        let result = inner.members.probe(index, &inner.probe_key).await;
        if let Ok(compacted) = &result {
            inner.note_compacted(*compacted);
        }
        inner.members.report(index, result.map(drop));
    }
}

impl EtcdStore {
    /// Runs a write transaction.
    async fn write(&self, txn: Txn) -> Result<TxnResponse> {
        self.inner
            .members
            .kv(Retry::Unsent, |mut kv| {
                let txn = txn.clone();
                async move { kv.txn(txn).await }
            })
            .await
            .map_err(Failure::into_error)
    }

    /// The error of a failed compare-and-swap, from the `Get` of its `Else` branch.
    fn conflict_or_not_found(
        &self,
        key: &str,
        expected: Revision,
        current: Option<TxnOpResponse>,
    ) -> Error {
        let current = match current {
            Some(TxnOpResponse::Get(mut get)) => get.take_kvs().into_iter().next(),
            _ => None,
        };
        match current.map(|kv| self.key_value(kv)) {
            None => Error::NotFound {
                key: key.to_owned(),
            },
            Some(Ok(current)) => Error::Conflict {
                key: key.to_owned(),
                expected,
                current: Box::new(current),
            },
            Some(Err(e)) => e,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_ranges_end_after_the_prefix() {
        assert_eq!(prefix_end(b"/t/"), b"/t0");
        assert_eq!(prefix_end(b"a\xff\xff"), b"b");
        assert_eq!(prefix_end(b"\xff"), b"\0");
    }

    #[test]
    fn progress_requests_are_trusted_from_fixed_versions_on() {
        for old in ["3.4.23", "3.4.30", "3.5.12", "3.3.27", "garbage"] {
            assert!(!progress_requests_are_ordered(old), "{old}");
        }
        for fixed in [
            "3.4.31",
            "3.5.13",
            "3.5.21",
            "3.6.0",
            "3.7.2",
            "4.0.0-alpha",
        ] {
            assert!(progress_requests_are_ordered(fixed), "{fixed}");
        }
    }

    #[test]
    fn tls_needs_a_whole_identity() {
        let tls = EtcdTls {
            ca_file: None,
            cert_file: Some("/nonexistent/cert.pem".into()),
            key_file: None,
        };
        assert!(matches!(
            tls.options(),
            Err(ConfigError::IncompleteIdentity)
        ));
        let unreadable = EtcdTls {
            ca_file: Some("/nonexistent/ca.pem".into()),
            ..EtcdTls::default()
        };
        assert!(matches!(
            unreadable.options(),
            Err(ConfigError::ReadFile { .. })
        ));
    }
}
