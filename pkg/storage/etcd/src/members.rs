//! The connections to the etcd members: their health, the preferred member, and failover.
//!
//! tonic's balanced channel keeps routing requests to a member it cannot connect to (each such
//! request fails), so the store keeps one connection per member instead and sends every request
//! to one preferred member, as etcd's own client did before 3.4.
//!
//! **Health is checked actively.** Every member is probed every [`PROBE_INTERVAL`] with a
//! linearizable read that must answer within [`PROBE_TIMEOUT`] (kube-apiserver's etcd health
//! check reads a key the same way): a member that is frozen, cut off, or without a leader fails
//! it. A request that cannot reach a member (no connection, or the connection broke under it)
//! also marks that member unhealthy; only a probe makes it healthy again. When the preferred
//! member is unhealthy and another one is healthy, the healthy one becomes preferred, and
//! what was waiting on the old one gives up on it: reads and watches go on on the new member,
//! writes end with [`Error::Timeout`] (they may still take effect), so nothing hangs on a
//! member that stopped answering. What waits on an unhealthy member with no healthy one to go
//! to (etcd lost its quorum, or is electing a leader) gives up after [`HEALTH_WAIT`]. While no
//! member is healthy, new requests wait as long for one and then fail with
//! [`Error::Unavailable`].
//!
//! Within that, a request that never left the client is retried on another healthy member
//! whatever it is; an idempotent one (a read, opening a watch) also after any transient
//! failure; a write that may have reached etcd is never retried. Each connection
//! re-establishes itself.
//!
//! Health changes are logged once per transition, naming the member and the error: a member
//! that becomes unhealthy or healthy again, the preferred member moving, and etcd as a whole
//! becoming unavailable (no member healthy: one line with every member's error) or available.

use std::time::Duration;

use etcd_client::{
    Client, ConnectOptions, GetOptions, KvClient, MaintenanceClient, WatchClient, WatchOptions,
    WatchResponse, WatchStream,
};
use genplane_storage::{Error, Result, Revision};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::error::{Failure, classify};

/// The largest gRPC message the client accepts: lists of large values exceed tonic's 4 MiB
/// default. Like etcd's Go client, accept anything up to `i32::MAX`.
const MAX_MESSAGE_SIZE: usize = i32::MAX as usize;

/// How long after one health probe of a member the next one starts.
pub(crate) const PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// How long a member has to answer a health probe (kube-apiserver's
/// `--etcd-healthcheck-timeout` default).
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a request waits for a healthy member when there is none.
pub(crate) const HEALTH_WAIT: Duration = Duration::from_secs(2);

/// The pause before a read that failed on every healthy member is tried on them again.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// How long the connect waits for the first endpoint once another one has answered, so that
/// the first endpoint given is the preferred member when it is healthy.
const PREFER_FIRST_GRACE: Duration = Duration::from_millis(250);

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

/// What is known about the members' health.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct State {
    /// Per member: `None` when healthy, else why not.
    pub(crate) unhealthy: Vec<Option<String>>,
    /// The member requests go to.
    pub(crate) preferred: usize,
}

impl State {
    fn healthy(&self, index: usize) -> bool {
        self.unhealthy[index].is_none()
    }

    fn any_healthy(&self) -> bool {
        self.unhealthy.iter().any(Option::is_none)
    }

    /// Whether what runs on member `index` should move: it is unhealthy, and requests go
    /// elsewhere now.
    fn moved_away_from(&self, index: usize) -> bool {
        !self.healthy(index) && self.preferred != index
    }

    /// Makes a healthy member preferred when the preferred one is not.
    fn reprefer(&mut self) {
        if self.healthy(self.preferred) {
            return;
        }
        let count = self.unhealthy.len();
        if let Some(next) = (1..count)
            .map(|k| (self.preferred + k) % count)
            .find(|&i| self.healthy(i))
        {
            self.preferred = next;
        }
    }
}

/// The health of one member, for metrics and readiness.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberStatus {
    /// The member's client URL as configured.
    pub endpoint: String,
    /// Why the member is unhealthy; `None` when it is healthy.
    pub error: Option<String>,
    /// Whether requests go to this member.
    pub preferred: bool,
}

/// The connections to every member, and which one requests go to.
pub(crate) struct Members {
    members: Vec<Member>,
    state: watch::Sender<State>,
    request_timeout: Duration,
}

/// The member a request goes to, or why there is none.
enum Pick {
    Member(usize),
    /// Every healthy member was tried.
    Exhausted,
    /// No member is healthy.
    NoneHealthy(String),
}

impl Members {
    /// Connects to every endpoint and finds one that answers within `dial_timeout`. Returns
    /// the members and that member's etcd version. The first endpoint given is preferred when
    /// it answers; members that do not answer start unhealthy.
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
        let mut deadline = Instant::now() + dial_timeout;
        let mut answered: Vec<(usize, String)> = Vec::new();
        let mut unhealthy: Vec<Option<String>> = vec![None; members.len()];
        let mut last_error = None;
        while let Ok(Some(probe)) = tokio::time::timeout_at(deadline, probes.join_next()).await {
            match probe {
                Ok((index, Ok(status))) => {
                    if answered.is_empty() {
                        deadline = deadline.min(Instant::now() + PREFER_FIRST_GRACE);
                    }
                    answered.push((index, status.version().to_owned()));
                    if index == 0 {
                        break;
                    }
                }
                Ok((index, Err(e))) => {
                    let failure = classify(e);
                    unhealthy[index] = Some(failure.describe());
                    last_error = Some(failure.into_error());
                    if index == 0 && !answered.is_empty() {
                        break;
                    }
                }
                Err(e) => last_error = Some(Error::backend(e)),
            }
        }
        let Some((preferred, version)) = answered.into_iter().min_by_key(|(index, _)| *index)
        else {
            return Err(match last_error {
                Some(e @ Error::Backend(_)) => e,
                Some(e) => {
                    Error::Unavailable(format!("no etcd member of {endpoints:?} answered: {e}"))
                }
                None => Error::Unavailable(format!(
                    "no etcd member of {endpoints:?} answered within {dial_timeout:?}"
                )),
            });
        };
        for (member, error) in members.iter().zip(&unhealthy) {
            if let Some(error) = error {
                tracing::warn!(member = %member.endpoint, %error, "etcd member unhealthy");
            }
        }
        let members = Members {
            members,
            state: watch::Sender::new(State {
                unhealthy,
                preferred,
            }),
            request_timeout,
        };
        Ok((members, version))
    }

    /// How many members there are.
    pub(crate) fn len(&self) -> usize {
        self.members.len()
    }

    /// A member's configured URL.
    pub(crate) fn endpoint(&self, index: usize) -> &str {
        &self.members[index].endpoint
    }

    /// Follows the members' health.
    pub(crate) fn subscribe(&self) -> watch::Receiver<State> {
        self.state.subscribe()
    }

    /// Every member's health.
    pub(crate) fn status(&self) -> Vec<MemberStatus> {
        let state = self.state.borrow();
        self.members
            .iter()
            .enumerate()
            .map(|(index, member)| MemberStatus {
                endpoint: member.endpoint.clone(),
                error: state.unhealthy[index].clone(),
                preferred: state.preferred == index,
            })
            .collect()
    }

    /// `Ok` while some member is healthy; else every member's error.
    pub(crate) fn available(&self) -> Result<(), String> {
        let state = self.state.borrow();
        if state.any_healthy() {
            Ok(())
        } else {
            Err(self.describe_unhealthy(&state))
        }
    }

    fn describe_unhealthy(&self, state: &State) -> String {
        let reasons: Vec<String> = self
            .members
            .iter()
            .zip(&state.unhealthy)
            .map(|(member, error)| {
                format!(
                    "{}: {}",
                    member.endpoint,
                    error.as_deref().unwrap_or("healthy")
                )
            })
            .collect();
        reasons.join("; ")
    }

    /// Probes member `index` once: a linearizable read of `key` within [`PROBE_TIMEOUT`].
    /// Returns the key's value as a revision (0 when absent or not a number).
    pub(crate) async fn probe(&self, index: usize, key: &[u8]) -> Result<Revision, String> {
        let mut kv = self.members[index].kv.clone();
        match tokio::time::timeout(PROBE_TIMEOUT, kv.get(key, None::<GetOptions>)).await {
            Err(_) => Err(format!("no answer within {PROBE_TIMEOUT:?}")),
            Ok(Err(e)) => Err(classify(e).describe()),
            Ok(Ok(response)) => Ok(response
                .kvs()
                .first()
                .and_then(|kv| std::str::from_utf8(kv.value()).ok())
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)),
        }
    }

    /// Records what a probe of member `index` found.
    pub(crate) fn report(&self, index: usize, result: Result<(), String>) {
        self.update(|state| state.unhealthy[index] = result.err());
    }

    /// Records that member `index` could not be reached by a request (a probe must find it
    /// healthy again).
    fn mark_unreachable(&self, index: usize, error: String) {
        self.update(|state| {
            if state.unhealthy[index].is_none() {
                state.unhealthy[index] = Some(error);
            }
        });
    }

    /// Changes the state, picks the preferred member again, and logs the transitions.
    fn update(&self, change: impl FnOnce(&mut State)) {
        let mut before = None;
        self.state.send_if_modified(|state| {
            let old = state.clone();
            change(state);
            state.reprefer();
            let modified = *state != old;
            before = Some(old);
            modified
        });
        if let Some(before) = before {
            self.log_transitions(&before, &self.state.borrow());
        }
    }

    fn log_transitions(&self, before: &State, after: &State) {
        let (was_up, is_up) = (before.any_healthy(), after.any_healthy());
        if was_up && !is_up {
            tracing::warn!(
                members = %self.describe_unhealthy(after),
                "etcd unavailable: no member is healthy"
            );
        } else if !was_up && is_up {
            let healthy: Vec<&str> = (0..self.len())
                .filter(|&i| after.healthy(i))
                .map(|i| self.endpoint(i))
                .collect();
            tracing::info!(?healthy, "etcd available again");
        } else if is_up {
            for index in 0..self.len() {
                match (before.healthy(index), after.healthy(index)) {
                    (true, false) => tracing::warn!(
                        member = %self.endpoint(index),
                        error = after.unhealthy[index].as_deref().unwrap_or_default(),
                        "etcd member unhealthy"
                    ),
                    (false, true) => {
                        tracing::info!(member = %self.endpoint(index), "etcd member healthy again");
                    }
                    _ => {}
                }
            }
        }
        if before.preferred != after.preferred {
            tracing::info!(
                from = %self.endpoint(before.preferred),
                to = %self.endpoint(after.preferred),
                "etcd requests move to another member"
            );
        }
    }

    /// Runs a key-value request on the preferred member, failing over as `retry` allows, all
    /// within the request timeout.
    pub(crate) async fn kv<T, F, Fut>(&self, retry: Retry, request: F) -> Result<T, Failure>
    where
        F: Fn(KvClient) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        self.call(retry, |member| {
            let answer = request(member.kv.clone());
            async move { answer.await.map_err(classify) }
        })
        .await
        .map(|(answer, _)| answer)
    }

    /// Opens a watch stream on the preferred member, failing over like a read, and waits for
    /// etcd's answer to its creation. Returns the stream, that answer, and the member's index.
    pub(crate) async fn watch(
        &self,
        key: &[u8],
        options: &WatchOptions,
    ) -> Result<(WatchStream, WatchResponse, usize), Failure> {
        let ((stream, created), index) = self
            .call(Retry::Idempotent, |member| {
                let mut client = member.watch.clone();
                let options = options.clone();
                async move {
                    let mut stream = client
                        .watch(key.to_vec(), Some(options))
                        .await
                        .map_err(classify)?;
                    match stream.message().await {
                        Ok(Some(created)) => Ok((stream, created)),
                        Ok(None) => Err(Failure::Broken(Error::Unavailable(
                            "the etcd watch stream closed at once".into(),
                        ))),
                        Err(e) => Err(classify(e)),
                    }
                }
            })
            .await?;
        Ok((stream, created, index))
    }

    /// Completes once what waits on member `index` should give up on it: the member is
    /// unhealthy and requests go to another one, or it has been unhealthy for [`HEALTH_WAIT`]
    /// with no other to go to (etcd as a whole is unavailable). Never completes once the state
    /// is followed no more.
    pub(crate) async fn give_up_on(state: &mut watch::Receiver<State>, index: usize) {
        loop {
            if state.wait_for(|s| !s.healthy(index)).await.is_err() {
                return std::future::pending().await;
            }
            let settled = tokio::select! {
                settled = state.wait_for(|s| s.moved_away_from(index) || s.healthy(index)) => {
                    settled.map(|s| !s.healthy(index)).ok()
                }
                () = tokio::time::sleep(HEALTH_WAIT) => Some(true),
            };
            match settled {
                Some(true) => return,
                Some(false) => {}
                None => return std::future::pending().await,
            }
        }
    }

    /// Completes when the members' health changes.
    pub(crate) async fn changed(state: &mut watch::Receiver<State>) {
        if state.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Records that the stream of a watch on member `index` failed as `failure` says.
    pub(crate) fn stream_failed(&self, index: usize, failure: &Failure) {
        if failure.unreachable() {
            self.mark_unreachable(index, failure.describe());
        }
    }

    async fn call<'a, T, F, Fut>(&'a self, retry: Retry, request: F) -> Result<(T, usize), Failure>
    where
        F: Fn(&'a Member) -> Fut,
        Fut: Future<Output = Result<T, Failure>>,
    {
        let deadline = Instant::now() + self.request_timeout;
        let mut state = self.state.subscribe();
        let mut tried = vec![false; self.members.len()];
        let mut last: Option<Failure> = None;
        let mut retry_until = None;
        loop {
            let index = match self.pick(&mut state, &tried, deadline).await {
                Pick::Member(index) => index,
                Pick::Exhausted => {
                    // Every healthy member failed a read transiently (a leader election, say):
                    // try them again for a moment.
                    let until = *retry_until
                        .get_or_insert_with(|| deadline.min(Instant::now() + HEALTH_WAIT));
                    if retry == Retry::Idempotent && Instant::now() + RETRY_PAUSE < until {
                        tokio::time::sleep(RETRY_PAUSE).await;
                        tried.iter_mut().for_each(|t| *t = false);
                        continue;
                    }
                    return Err(last.unwrap_or(Failure::Other(Error::Timeout)));
                }
                Pick::NoneHealthy(reasons) => {
                    // Not sent (again): etcd is unavailable, whatever the deadline says.
                    return Err(last.unwrap_or_else(|| {
                        Failure::Unsent(Error::Unavailable(format!(
                            "no etcd member is available ({reasons})"
                        )))
                    }));
                }
            };
            tried[index] = true;
            let member = &self.members[index];
            let outcome = tokio::select! {
                biased;
                answer = request(member) => answer,
                () = Self::give_up_on(&mut state, index) => {
                    tracing::debug!(member = %member.endpoint, "abandoning a request on an unhealthy etcd member");
                    if retry == Retry::Idempotent {
                        last = Some(Failure::Other(Error::Unavailable(format!(
                            "etcd member {} stopped answering", member.endpoint
                        ))));
                        continue;
                    }
                    // A write that may still take effect when the member answers again.
                    return Err(Failure::Other(Error::Interrupted(format!(
                        "etcd member {} stopped answering", member.endpoint
                    ))));
                }
                () = tokio::time::sleep_until(deadline) => return Err(Failure::Other(Error::Timeout)),
            };
            let failure = match outcome {
                Ok(answer) => return Ok((answer, index)),
                Err(failure) => failure,
            };
            if failure.unreachable() {
                self.mark_unreachable(index, failure.describe());
            }
            let may_retry = match &failure {
                Failure::Unsent(_) => true,
                Failure::Broken(e) | Failure::Other(e) => {
                    retry == Retry::Idempotent && e.is_retryable()
                }
                Failure::Compacted | Failure::FutureRevision => false,
            };
            if !may_retry {
                return Err(match failure {
                    // A write whose connection broke: its outcome is unknown.
                    Failure::Broken(error) if retry != Retry::Idempotent => {
                        Failure::Other(Error::Interrupted(match error {
                            Error::Unavailable(message) => message,
                            other => other.to_string(),
                        }))
                    }
                    failure => failure,
                });
            }
            tracing::debug!(member = %member.endpoint, error = %failure.describe(), "an etcd request failed; trying another member");
            last = Some(failure);
        }
    }

    /// The healthy member to try next (the preferred one first), waiting up to
    /// [`HEALTH_WAIT`] for one when none is healthy.
    async fn pick(
        &self,
        state: &mut watch::Receiver<State>,
        tried: &[bool],
        deadline: Instant,
    ) -> Pick {
        let wait_until = deadline.min(Instant::now() + HEALTH_WAIT);
        loop {
            {
                let state = state.borrow_and_update();
                let count = self.members.len();
                let mut order = (0..count).map(|k| (state.preferred + k) % count);
                if let Some(index) = order.clone().find(|&i| state.healthy(i) && !tried[i]) {
                    return Pick::Member(index);
                }
                if order.any(|i| state.healthy(i)) {
                    return Pick::Exhausted;
                }
            }
            let changed = tokio::select! {
                changed = state.changed() => changed.is_ok(),
                () = tokio::time::sleep_until(wait_until) => false,
            };
            if !changed {
                return Pick::NoneHealthy(self.describe_unhealthy(&state.borrow()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unhealthy_preferred_member_gives_way_to_the_next_healthy_one() {
        let mut state = State {
            unhealthy: vec![None, None, None],
            preferred: 0,
        };
        state.unhealthy[0] = Some("frozen".into());
        state.reprefer();
        assert_eq!(state.preferred, 1);
        assert!(state.moved_away_from(0));
        state.unhealthy[0] = None;
        state.reprefer();
        assert_eq!(
            state.preferred, 1,
            "the preferred member stays while healthy"
        );
        state.unhealthy = vec![Some("a".into()), Some("b".into()), Some("c".into())];
        state.reprefer();
        assert_eq!(state.preferred, 1, "with no healthy member nothing moves");
        assert!(!state.moved_away_from(1));
        state.unhealthy[0] = None;
        state.reprefer();
        assert_eq!(state.preferred, 0);
    }
}
