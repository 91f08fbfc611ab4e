//! The connections to the etcd members, with failover.
//!
//! tonic's balanced channel keeps routing requests to a member it cannot connect to (each such
//! request fails), so the store keeps one connection per member instead and sends every request
//! to one preferred member, as etcd's own client did before 3.4. When a request cannot reach
//! that member it goes to the next one, and that one becomes the preferred member. A request
//! that never left the client is retried on the next member whatever it is; an idempotent one
//! (a read, opening a watch) also after any transient failure; a write that may have reached
//! etcd is never retried. Each connection re-establishes itself.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use etcd_client::{
    Client, ConnectOptions, KvClient, MaintenanceClient, WatchClient, WatchOptions, WatchStream,
};
use genplane_storage::{Error, Result};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::error::{Failure, classify};

/// The largest gRPC message the client accepts: lists of large values exceed tonic's 4 MiB
/// default. Like etcd's Go client, accept anything up to `i32::MAX`.
const MAX_MESSAGE_SIZE: usize = i32::MAX as usize;

/// Which failures a request may be retried on another member after.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Retry {
    /// Any transient failure: the request is idempotent.
    Idempotent,
    /// Only failures before the request was sent: it writes.
    Unsent,
}

/// One member's connection.
struct Member {
    endpoint: String,
    kv: KvClient,
    watch: WatchClient,
    maintenance: MaintenanceClient,
}

/// The connections to every member, and which one requests go to.
pub(crate) struct Members {
    members: Vec<Member>,
    preferred: AtomicUsize,
    request_timeout: Duration,
}

impl Members {
    /// Connects to every endpoint and finds one that answers within `dial_timeout`. Returns
    /// the members and that member's etcd version.
    pub(crate) async fn connect(
        endpoints: &[String],
        options: &ConnectOptions,
        dial_timeout: Duration,
        request_timeout: Duration,
    ) -> Result<(Members, String)> {
        let mut members = Vec::with_capacity(endpoints.len());
        for endpoint in endpoints {
            let client = Client::connect([endpoint], Some(options.clone()))
                .await
                .map_err(|e| classify(e).into_error())?;
            members.push(Member {
                endpoint: endpoint.clone(),
                kv: client
                    .kv_client()
                    .max_decoding_message_size(MAX_MESSAGE_SIZE),
                watch: client
                    .watch_client()
                    .max_decoding_message_size(MAX_MESSAGE_SIZE),
                maintenance: client.maintenance_client(),
            });
        }
        let mut probes = JoinSet::new();
        for (index, member) in members.iter().enumerate() {
            let mut maintenance = member.maintenance.clone();
            probes.spawn(async move { (index, maintenance.status().await) });
        }
        let deadline = Instant::now() + dial_timeout;
        let mut last_error = None;
        while let Ok(Some(probe)) = tokio::time::timeout_at(deadline, probes.join_next()).await {
            match probe {
                Ok((index, Ok(status))) => {
                    let members = Members {
                        members,
                        preferred: AtomicUsize::new(index),
                        request_timeout,
                    };
                    return Ok((members, status.version().to_owned()));
                }
                Ok((_, Err(e))) => last_error = Some(classify(e).into_error()),
                Err(e) => last_error = Some(Error::backend(e)),
            }
        }
        Err(match last_error {
            Some(e @ Error::Backend(_)) => e,
            Some(e) => Error::Unavailable(format!("no etcd member of {endpoints:?} answered: {e}")),
            None => Error::Unavailable(format!(
                "no etcd member of {endpoints:?} answered within {dial_timeout:?}"
            )),
        })
    }

    /// Runs a key-value request on the preferred member, failing over as `retry` allows, all
    /// within the request timeout.
    pub(crate) async fn kv<T, F, Fut>(&self, retry: Retry, request: F) -> Result<T, Failure>
    where
        F: Fn(KvClient) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        self.call(retry, |member| request(member.kv.clone())).await
    }

    /// Opens a watch stream on the preferred member, failing over like a read.
    pub(crate) async fn watch(
        &self,
        key: &[u8],
        options: &WatchOptions,
    ) -> Result<WatchStream, Failure> {
        self.call(Retry::Idempotent, |member| {
            let mut client = member.watch.clone();
            let options = options.clone();
            async move { client.watch(key.to_vec(), Some(options)).await }
        })
        .await
    }

    /// Runs one request within the request timeout (for the messages of a stream).
    pub(crate) async fn within_timeout<T>(
        &self,
        request: impl Future<Output = Result<T, etcd_client::Error>>,
    ) -> Result<T, Failure> {
        match tokio::time::timeout(self.request_timeout, request).await {
            Err(_) => Err(Failure::Other(Error::Timeout)),
            Ok(result) => result.map_err(classify),
        }
    }

    async fn call<'a, T, F, Fut>(&'a self, retry: Retry, request: F) -> Result<T, Failure>
    where
        F: Fn(&'a Member) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        let deadline = Instant::now() + self.request_timeout;
        let first = self.preferred.load(Ordering::Relaxed);
        let count = self.members.len();
        let mut attempt = 0;
        loop {
            let index = (first + attempt) % count;
            let failure =
                match tokio::time::timeout_at(deadline, request(&self.members[index])).await {
                    Err(_) => return Err(Failure::Other(Error::Timeout)),
                    Ok(Ok(answer)) => return Ok(answer),
                    Ok(Err(e)) => classify(e),
                };
            let may_retry = match &failure {
                Failure::Unsent(_) => true,
                Failure::Other(e) => retry == Retry::Idempotent && e.is_retryable(),
                Failure::Compacted | Failure::FutureRevision => false,
            };
            attempt += 1;
            if !may_retry || attempt == count {
                return Err(failure);
            }
            let next = (index + 1) % count;
            if self
                .preferred
                .compare_exchange(index, next, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                tracing::info!(
                    from = %self.members[index].endpoint,
                    to = %self.members[next].endpoint,
                    "etcd member unreachable; failing over"
                );
            }
        }
    }
}
