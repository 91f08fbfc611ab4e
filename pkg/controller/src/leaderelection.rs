//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's semantics.
//!
//! Every candidate tries, every retry period, to acquire the Lease: it may when the Lease does
//! not exist, has no holder, or its record has not changed for a whole lease duration as this
//! candidate observed it (local clock, as upstream, so that clock skew between machines does
//! not matter). Acquiring sets `holderIdentity`, `leaseDurationSeconds`, `acquireTime`,
//! `renewTime` and increments `leaseTransitions` when the holder changes. Writes carry the
//! resourceVersion read, so two candidates never both win.
//!
//! The leader renews every retry period. If it has not renewed for the renew deadline (shorter
//! than the lease duration), or finds another candidate holding the Lease, it stops leading at
//! once: [`LeaderElector::run`] drops the work and returns [`Error::LeadershipLost`] (upstream's
//! controller-manager then exits), before any other candidate may take the Lease, so the work
//! never runs twice at once. The deadline runs from the last renewal (client-go's from the start
//! of each round of tries), so that a process frozen past it (SIGSTOP, a paused container) wakes
//! no longer leading and stops at once, rather than try again for a whole deadline while the
//! candidate that took the Lease meanwhile leads too. When the work is stopped on purpose, the
//! Lease is released (upstream's `ReleaseOnCancel`): the holder is cleared and the duration set
//! to one second, so that another candidate takes over at once.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};

/// Upstream's defaults: `--leader-elect-lease-duration`.
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
/// Upstream's default `--leader-elect-renew-deadline`.
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// Upstream's default `--leader-elect-retry-period`.
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);
/// How long past the lease's expiry the health check tolerates a leader that has not renewed
/// (upstream's controller-manager uses 20 s).
pub const HEALTH_TIMEOUT: Duration = Duration::from_secs(20);

/// Errors of leader election.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The timings are inconsistent.
    #[error("{0}")]
    InvalidConfig(&'static str),
    /// The leader could not renew its Lease within the renew deadline.
    #[error("leaderelection lost: could not renew lease {lease} within {deadline:?}")]
    LeadershipLost {
        /// `namespace/name` of the Lease.
        lease: String,
        /// The renew deadline.
        deadline: Duration,
    },
}

/// How to elect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderElectionConfig {
    /// The Lease's namespace.
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
    /// This candidate's identity (upstream: `<hostname>_<uuid>`).
    pub identity: String,
    /// How long non-leaders wait after the last observed change before taking the Lease.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it stops leading.
    pub renew_deadline: Duration,
    /// How long candidates wait between tries.
    pub retry_period: Duration,
}

impl LeaderElectionConfig {
    /// A config with upstream's default timings.
    pub fn new(namespace: &str, name: &str, identity: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            identity: identity.to_owned(),
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
        }
    }

    /// Checks the timings as client-go does.
    pub fn validate(&self) -> Result<(), Error> {
        if self.lease_duration <= self.renew_deadline {
            return Err(Error::InvalidConfig(
                "leaseDuration must be greater than renewDeadline",
            ));
        }
        // client-go: renewDeadline must exceed JitterFactor (1.2) * retryPeriod.
        if self.renew_deadline.as_secs_f64() <= 1.2 * self.retry_period.as_secs_f64() {
            return Err(Error::InvalidConfig(
                "renewDeadline must be greater than retryPeriod*JitterFactor",
            ));
        }
        if self.retry_period.is_zero() {
            return Err(Error::InvalidConfig(
                "retryPeriod must be greater than zero",
            ));
        }
        if self.identity.is_empty() {
            return Err(Error::InvalidConfig("Lock identity is empty"));
        }
        Ok(())
    }
}

/// What a candidate knows of the election, for health checks and logs.
#[derive(Clone, Debug, Default)]
struct State {
    leading: bool,
    last_renew: Option<Instant>,
    /// The record last read and when it was first seen (upstream's observedRecord/Time).
    observed: Option<(Record, Instant)>,
}

impl State {
    /// Whether this candidate leads: it took or renewed the Lease within `renew_deadline`. One
    /// frozen past that wakes not leading, whatever it knew before.
    fn leads(&self, renew_deadline: Duration) -> bool {
        self.leading
            && self
                .last_renew
                .is_some_and(|at| at.elapsed() < renew_deadline)
    }
}

/// The parts of the Lease spec that make up the election record.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Record {
    holder: String,
    duration_seconds: i32,
    acquire_time: Option<MicroTime>,
    renew_time: Option<MicroTime>,
    transitions: i32,
}

impl Record {
    fn of(lease: &Lease) -> Self {
        let spec = lease.spec.clone().unwrap_or_default();
        Self {
            holder: spec.holder_identity.unwrap_or_default(),
            duration_seconds: spec.lease_duration_seconds.unwrap_or_default(),
            acquire_time: spec.acquire_time,
            renew_time: spec.renew_time,
            transitions: spec.lease_transitions.unwrap_or_default(),
        }
    }

    fn write(&self, spec: &mut LeaseSpec) {
        spec.holder_identity = Some(self.holder.clone());
        spec.lease_duration_seconds = Some(self.duration_seconds);
        spec.acquire_time = self.acquire_time.clone();
        spec.renew_time = self.renew_time.clone();
        spec.lease_transitions = Some(self.transitions);
    }
}

/// A health check of the election: failing when this candidate leads but has not renewed for
/// longer than the lease duration plus [`HEALTH_TIMEOUT`] (upstream's HealthzAdaptor).
#[derive(Clone, Debug)]
pub struct LeaderHealth {
    state: Arc<Mutex<State>>,
    lease_duration: Duration,
    renew_deadline: Duration,
    lease: String,
}

impl LeaderHealth {
    /// `Ok` or why the election is unhealthy.
    pub fn check(&self) -> Result<(), String> {
        let state = self
            .state
            .lock()
            .expect("invariant: the lock is never poisoned");
        if !state.leading {
            return Ok(());
        }
        match state.last_renew {
            Some(at) if at.elapsed() > self.lease_duration + HEALTH_TIMEOUT => Err(format!(
                "failed election to renew leadership on lease {}",
                self.lease
            )),
            _ => Ok(()),
        }
    }

    /// Whether this candidate currently leads: it took or renewed the Lease within the renew
    /// deadline.
    pub fn is_leader(&self) -> bool {
        self.state
            .lock()
            .expect("invariant: the lock is never poisoned")
            .leads(self.renew_deadline)
    }
}

/// A candidate in one election.
#[derive(Clone)]
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaderElectionConfig,
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Now, as a Lease time.
fn now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

impl LeaderElector {
    /// A candidate with `config` (checked with [`LeaderElectionConfig::validate`]).
    pub fn new(client: kube::Client, config: LeaderElectionConfig) -> Result<Self, Error> {
        config.validate()?;
        Ok(Self {
            api: Api::namespaced(client, &config.namespace),
            config,
            state: Arc::default(),
        })
    }

    /// The election's health check.
    pub fn health(&self) -> LeaderHealth {
        LeaderHealth {
            state: self.state.clone(),
            lease_duration: self.config.lease_duration,
            renew_deadline: self.config.renew_deadline,
            lease: self.lease_name(),
        }
    }

    fn lease_name(&self) -> String {
        format!("{}/{}", self.config.namespace, self.config.name)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .expect("invariant: the lock is never poisoned")
    }

    /// Waits until this candidate leads, then runs `work` while it keeps leading.
    ///
    /// Returns `Ok(Some(output))` when `work` finishes, `Ok(None)` when `stop` completes first
    /// (in both cases the Lease is released), and [`Error::LeadershipLost`] when the Lease
    /// could not be renewed in time: `work` has then been dropped.
    pub async fn run<W: Future>(
        &self,
        work: W,
        stop: impl Future<Output = ()>,
    ) -> Result<Option<W::Output>, Error> {
        tokio::pin!(stop);
        tracing::info!(lease = %self.lease_name(), identity = %self.config.identity, "attempting to acquire leader lease");
        loop {
            // A try never takes longer than the renew deadline, so that a hung request does
            // not hold up the next one.
            let acquired =
                tokio::time::timeout(self.config.renew_deadline, self.try_acquire_or_renew())
                    .await
                    .unwrap_or(false);
            if acquired {
                break;
            }
            tokio::select! {
                () = &mut stop => return Ok(None),
                () = tokio::time::sleep(jitter(self.config.retry_period)) => {}
            }
        }
        tracing::info!(lease = %self.lease_name(), identity = %self.config.identity, "successfully acquired lease");
        tokio::pin!(work);
        let outcome = tokio::select! {
            output = &mut work => Ok(Some(output)),
            () = &mut stop => Ok(None),
            error = self.renew_loop() => Err(error),
        };
        if outcome.is_ok() {
            self.release().await;
        } else {
            self.state().leading = false;
        }
        outcome
    }

    /// Renews every retry period; returns when there was no renewal for the renew deadline,
    /// or another candidate holds the Lease.
    async fn renew_loop(&self) -> Error {
        loop {
            tokio::time::sleep(self.config.retry_period).await;
            // From the last renewal: a process frozen past the deadline stops as it wakes.
            let last_renew = self.state().last_renew.unwrap_or_else(Instant::now);
            let deadline = last_renew + self.config.renew_deadline;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                let renewed = !left.is_zero()
                    && tokio::time::timeout(left, self.try_acquire_or_renew())
                        .await
                        .unwrap_or(false);
                if renewed {
                    break;
                }
                let taken = self.state().observed.as_ref().is_some_and(|(record, _)| {
                    !record.holder.is_empty() && record.holder != self.config.identity
                });
                if taken || Instant::now() + self.config.retry_period >= deadline {
                    // Another candidate holds it, or no time for another try: stop leading now.
                    self.state().leading = false;
                    tracing::error!(lease = %self.lease_name(), "failed to renew lease: leaderelection lost");
                    return Error::LeadershipLost {
                        lease: self.lease_name(),
                        deadline: self.config.renew_deadline,
                    };
                }
                tokio::time::sleep(self.config.retry_period).await;
            }
        }
    }

    /// One try: creates the Lease, takes it over once expired, or renews it when held. Returns
    /// whether this candidate holds it afterwards.
    async fn try_acquire_or_renew(&self) -> bool {
        let duration_seconds =
            i32::try_from(self.config.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX);
        let me = &self.config.identity;
        let current = match self.api.get_opt(&self.config.name).await {
            Ok(lease) => lease,
            Err(error) => {
                tracing::warn!(%error, lease = %self.lease_name(), "error retrieving resource lock");
                return false;
            }
        };
        let Some(mut lease) = current else {
            let time = now();
            let record = Record {
                holder: me.clone(),
                duration_seconds,
                acquire_time: Some(time.clone()),
                renew_time: Some(time),
                transitions: 0,
            };
            let mut spec = LeaseSpec::default();
            record.write(&mut spec);
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(spec),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => {
                    self.observe(record, true);
                    true
                }
                Err(error) => {
                    tracing::warn!(%error, lease = %self.lease_name(), "error initially creating lease lock");
                    false
                }
            };
        };
        let old = Record::of(&lease);
        let observed_at = {
            let mut state = self.state();
            match &state.observed {
                Some((record, at)) if *record == old => *at,
                _ => {
                    let at = Instant::now();
                    state.observed = Some((old.clone(), at));
                    at
                }
            }
        };
        let leading = self.state().leading && old.holder == *me;
        let valid = observed_at.elapsed()
            < Duration::from_secs(u64::try_from(old.duration_seconds.max(0)).unwrap_or(0));
        if !old.holder.is_empty() && old.holder != *me && valid {
            tracing::debug!(holder = %old.holder, "lock is held and has not yet expired");
            return false;
        }
        let time = now();
        let record = if leading || old.holder == *me {
            Record {
                holder: me.clone(),
                duration_seconds,
                acquire_time: old.acquire_time.clone().or_else(|| Some(time.clone())),
                renew_time: Some(time),
                transitions: old.transitions,
            }
        } else {
            Record {
                holder: me.clone(),
                duration_seconds,
                acquire_time: Some(time.clone()),
                renew_time: Some(time),
                transitions: old.transitions + 1,
            }
        };
        record.write(lease.spec.get_or_insert_with(LeaseSpec::default));
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => {
                self.observe(record, true);
                true
            }
            Err(error) => {
                tracing::warn!(%error, lease = %self.lease_name(), "failed to update lock");
                false
            }
        }
    }

    fn observe(&self, record: Record, leading: bool) {
        let now = Instant::now();
        let mut state = self.state();
        state.observed = Some((record, now));
        state.leading = leading;
        if leading {
            state.last_renew = Some(now);
        }
    }

    /// Gives the Lease up if this candidate holds it: no holder, a one-second duration.
    async fn release(&self) {
        let was_leading = std::mem::replace(&mut self.state().leading, false);
        if !was_leading {
            return;
        }
        let Ok(Some(mut lease)) = self.api.get_opt(&self.config.name).await else {
            return;
        };
        let old = Record::of(&lease);
        if old.holder != self.config.identity {
            return;
        }
        let time = now();
        let record = Record {
            holder: String::new(),
            duration_seconds: 1,
            acquire_time: Some(time.clone()),
            renew_time: Some(time),
            transitions: old.transitions,
        };
        record.write(lease.spec.get_or_insert_with(LeaseSpec::default));
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => tracing::info!(lease = %self.lease_name(), "released the leader lease"),
            Err(error) => {
                tracing::warn!(%error, lease = %self.lease_name(), "failed to release lock")
            }
        }
    }
}

/// `period` plus up to 1.2 times `period` more (client-go's JitterFactor), so that candidates
/// do not try in lockstep.
fn jitter(period: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let fraction = f64::from(nanos % 1000) / 1000.0;
    period + period.mul_f64(1.2 * fraction)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timings_are_checked_as_client_go_does() {
        let mut config = LeaderElectionConfig::new("kube-system", "x", "me");
        assert!(config.validate().is_ok());
        config.renew_deadline = config.lease_duration;
        assert_eq!(
            config.validate().unwrap_err().to_string(),
            "leaseDuration must be greater than renewDeadline"
        );
        config.renew_deadline = Duration::from_secs(2);
        assert_eq!(
            config.validate().unwrap_err().to_string(),
            "renewDeadline must be greater than retryPeriod*JitterFactor"
        );
        config = LeaderElectionConfig::new("kube-system", "x", "");
        assert!(config.validate().is_err());
    }

    #[test]
    fn a_leader_leads_only_within_the_renew_deadline_of_its_last_renewal() {
        let deadline = Duration::from_secs(10);
        let mut state = State {
            leading: true,
            last_renew: Some(Instant::now()),
            observed: None,
        };
        assert!(state.leads(deadline));
        // Frozen past the deadline: what it knew before no longer counts.
        state.last_renew = Instant::now().checked_sub(deadline);
        assert!(!state.leads(deadline));
        state.last_renew = Some(Instant::now());
        state.leading = false;
        assert!(!state.leads(deadline));
    }

    #[test]
    fn jitter_stays_within_client_go_bounds() {
        for _ in 0..100 {
            let d = jitter(Duration::from_secs(2));
            assert!(d >= Duration::from_secs(2) && d <= Duration::from_millis(4400));
        }
    }

    #[test]
    fn a_record_round_trips_through_the_lease_spec() {
        let record = Record {
            holder: "a_1".into(),
            duration_seconds: 15,
            acquire_time: Some(now()),
            renew_time: Some(now()),
            transitions: 3,
        };
        let mut spec = LeaseSpec::default();
        record.write(&mut spec);
        let lease = Lease {
            metadata: ObjectMeta::default(),
            spec: Some(spec),
        };
        assert_eq!(Record::of(&lease), record);
    }
}
