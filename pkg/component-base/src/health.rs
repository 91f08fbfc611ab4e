//! Health endpoints: `/healthz`, `/livez` and `/readyz`, as Kubernetes components serve them.
//!
//! A [`Health`] holds named checks. Liveness checks run on `/livez`, `/readyz` and `/healthz`;
//! readiness checks run on `/readyz` and `/healthz`. Three checks are always there, as on every
//! kube-apiserver: `ping` (always passes), `log` (fails once log lines have not got out for two
//! minutes: see [`LOG_BLOCKED_AFTER`]) and, on `/readyz` only and listed last, `shutdown`,
//! which fails once a graceful shutdown has begun so that load balancers stop sending new
//! requests while in-flight ones finish. Checks are listed in the order they were added.
//!
//! The answers follow kube-apiserver:
//! - `200 ok` when every check passes; with `?verbose`, one line per check (`[+]name ok`) and a
//!   closing `<endpoint> check passed`;
//! - `500` with the per-check lines (reasons withheld, as this endpoint is public) and
//!   `<endpoint> check failed` when a check fails;
//! - `?exclude=name` (repeatable) skips a check (`[+]name excluded: ok`), and names that match no
//!   check are reported in a `warn:` line;
//! - `/<endpoint>/<name>` runs one check: `200 ok`, or `500 internal server error: <reason>`,
//!   or `404` for an unknown name.

use std::fmt::Write as _;
use std::future::Future;
use std::io::Write as _;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Once, PoisonError, Weak};
use std::time::{Duration, Instant};

use crate::shutdown::Shutdown;

/// The name of the built-in check that fails once shutdown has begun, always listed last.
const SHUTDOWN: &str = "shutdown";

/// What a check returns: `Ok(())`, or why it failed.
pub type CheckResult = Result<(), String>;

type CheckFn = dyn Fn() -> Pin<Box<dyn Future<Output = CheckResult> + Send>> + Send + Sync;

/// Which endpoints a check runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `/livez`, `/readyz` and `/healthz`.
    Liveness,
    /// `/readyz` and `/healthz`.
    Readiness,
    /// `/readyz` only (the built-in `shutdown` check).
    ReadinessOnly,
}

#[derive(Clone)]
struct Check {
    name: String,
    kind: Kind,
    run: Arc<CheckFn>,
}

impl std::fmt::Debug for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Check")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

/// An HTTP answer of a health endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The HTTP status code.
    pub status: u16,
    /// The plain-text body.
    pub body: String,
}

/// The health endpoints of one component.
#[derive(Clone, Debug)]
pub struct Health {
    checks: Vec<Check>,
}

/// The three health endpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `/healthz` (deprecated upstream, still widely probed).
    Healthz,
    /// `/livez`.
    Livez,
    /// `/readyz`.
    Readyz,
}

impl Endpoint {
    fn name(self) -> &'static str {
        match self {
            Endpoint::Healthz => "healthz",
            Endpoint::Livez => "livez",
            Endpoint::Readyz => "readyz",
        }
    }

    fn runs(self, kind: Kind) -> bool {
        match self {
            Endpoint::Livez => kind == Kind::Liveness,
            Endpoint::Healthz => kind != Kind::ReadinessOnly,
            Endpoint::Readyz => true,
        }
    }
}

/// How often the `log` check's thread flushes standard error.
pub const LOG_FLUSH_EVERY: Duration = Duration::from_secs(60);

/// How old the last flush of standard error may be before the `log` check fails ("logging
/// blocked"): twice [`LOG_FLUSH_EVERY`], as kube-apiserver's `log` check allows its log's
/// flushes.
pub const LOG_BLOCKED_AFTER: Duration = Duration::from_secs(120);

/// The `log` check's state: when the log's writer was last flushed. A thread started at the
/// first check flushes it every `every` (taking the writer's lock, so a writer stuck on a full
/// pipe or a stalled journal holds the flush up too) and records when it got through; the
/// thread ends at its next turn once the check is gone.
struct LogFlush {
    flush: Box<dyn Fn() + Send + Sync>,
    every: Duration,
    blocked_after: Duration,
    last: Mutex<Instant>,
    started: Once,
}

impl LogFlush {
    fn new(
        flush: Box<dyn Fn() + Send + Sync>,
        every: Duration,
        blocked_after: Duration,
    ) -> Arc<Self> {
        Arc::new(Self {
            flush,
            every,
            blocked_after,
            last: Mutex::new(Instant::now()),
            started: Once::new(),
        })
    }

    /// Standard error, where the log goes ([`crate::logging`]).
    fn stderr() -> Arc<Self> {
        Self::new(
            Box::new(|| {
                let _ = std::io::stderr().lock().flush();
            }),
            LOG_FLUSH_EVERY,
            LOG_BLOCKED_AFTER,
        )
    }

    fn check(self: &Arc<Self>) -> CheckResult {
        self.started.call_once(|| {
            *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now();
            let weak = Arc::downgrade(self);
            let spawned = std::thread::Builder::new()
                .name("log-flush".to_owned())
                .spawn(move || Self::keep_flushing(&weak));
            if let Err(error) = spawned {
                tracing::warn!(%error, "the log check cannot start its thread");
            }
        });
        let last = *self.last.lock().unwrap_or_else(PoisonError::into_inner);
        if last.elapsed() < self.blocked_after {
            Ok(())
        } else {
            Err("logging blocked".to_owned())
        }
    }

    fn keep_flushing(weak: &Weak<Self>) {
        loop {
            let Some(state) = weak.upgrade() else { return };
            (state.flush)();
            *state.last.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now();
            let every = state.every;
            drop(state);
            std::thread::sleep(every);
        }
    }
}

impl Health {
    /// The endpoints with the built-in `ping`, `log` and `shutdown` checks.
    pub fn new(shutdown: &Shutdown) -> Self {
        Self::with_log(shutdown, LogFlush::stderr())
    }

    fn with_log(shutdown: &Shutdown, log: Arc<LogFlush>) -> Self {
        let mut health = Self { checks: Vec::new() };
        health.add("ping", Kind::Liveness, || async { Ok(()) });
        health.add("log", Kind::Liveness, move || {
            let answer = log.check();
            async move { answer }
        });
        let shutdown = shutdown.clone();
        health.add(SHUTDOWN, Kind::ReadinessOnly, move || {
            let triggered = shutdown.is_triggered();
            async move {
                if triggered {
                    Err("process is shutting down".to_owned())
                } else {
                    Ok(())
                }
            }
        });
        health
    }

    /// Adds a named check, listed after the others but before `shutdown`. A later check with
    /// the same name replaces the earlier one.
    pub fn add<F, Fut>(&mut self, name: &str, kind: Kind, check: F)
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = CheckResult> + Send + 'static,
    {
        self.checks.retain(|c| c.name != name);
        let at = self
            .checks
            .iter()
            .position(|c| c.name == SHUTDOWN)
            .unwrap_or(self.checks.len());
        self.checks.insert(
            at,
            Check {
                name: name.to_owned(),
                kind,
                run: Arc::new(move || Box::pin(check())),
            },
        );
    }

    /// Answers a request for `path` (e.g. `/readyz` or `/readyz/ping`) with the raw query string,
    /// or `None` when `path` is not a health endpoint.
    pub async fn answer(&self, path: &str, query: Option<&str>) -> Option<Answer> {
        let path = path.strip_prefix('/')?;
        let (endpoint, rest) = match path.split_once('/') {
            Some((e, rest)) => (e, Some(rest)),
            None => (path, None),
        };
        let endpoint = match endpoint {
            "healthz" => Endpoint::Healthz,
            "livez" => Endpoint::Livez,
            "readyz" => Endpoint::Readyz,
            _ => return None,
        };
        Some(match rest {
            None | Some("") => self.run_all(endpoint, query).await,
            Some(name) => self.run_one(endpoint, name).await,
        })
    }

    async fn run_one(&self, endpoint: Endpoint, name: &str) -> Answer {
        let check = self
            .checks
            .iter()
            .find(|c| c.name == name && endpoint.runs(c.kind));
        match check {
            None => Answer {
                status: 404,
                body: format!("no {} check named {name:?}\n", endpoint.name()),
            },
            Some(check) => match (check.run)().await {
                Ok(()) => Answer {
                    status: 200,
                    body: "ok".to_owned(),
                },
                Err(reason) => Answer {
                    status: 500,
                    body: format!("internal server error: {reason}\n"),
                },
            },
        }
    }

    async fn run_all(&self, endpoint: Endpoint, query: Option<&str>) -> Answer {
        let mut verbose = false;
        let mut excluded: Vec<String> = Vec::new();
        for (key, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            match &*key {
                "verbose" => verbose = true,
                "exclude" => excluded.push(value.into_owned()),
                _ => {}
            }
        }
        let mut lines = String::new();
        let mut failed = false;
        for check in self.checks.iter().filter(|c| endpoint.runs(c.kind)) {
            if let Some(i) = excluded.iter().position(|e| *e == check.name) {
                excluded.swap_remove(i);
                let _ = writeln!(lines, "[+]{} excluded: ok", check.name);
                continue;
            }
            match (check.run)().await {
                Ok(()) => {
                    let _ = writeln!(lines, "[+]{} ok", check.name);
                }
                Err(_) => {
                    failed = true;
                    let _ = writeln!(lines, "[-]{} failed: reason withheld", check.name);
                }
            }
        }
        if !excluded.is_empty() {
            excluded.sort();
            let quoted: Vec<String> = excluded.iter().map(|e| format!("{e:?}")).collect();
            let _ = writeln!(
                lines,
                "warn: some health checks cannot be excluded: no matches for {}",
                quoted.join(",")
            );
        }
        let name = endpoint.name();
        if failed {
            Answer {
                status: 500,
                body: format!("{lines}{name} check failed\n"),
            }
        } else if verbose {
            Answer {
                status: 200,
                body: format!("{lines}{name} check passed\n"),
            }
        } else {
            Answer {
                status: 200,
                body: "ok".to_owned(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn health_with_flaky_db() -> (Health, Arc<AtomicBool>, Shutdown) {
        let shutdown = Shutdown::new();
        let mut health = Health::new(&shutdown);
        let db_ok = Arc::new(AtomicBool::new(true));
        let flag = db_ok.clone();
        health.add("db", Kind::Readiness, move || {
            let ok = flag.load(Ordering::SeqCst);
            async move {
                if ok {
                    Ok(())
                } else {
                    Err("db unreachable".into())
                }
            }
        });
        (health, db_ok, shutdown)
    }

    #[tokio::test]
    async fn passing_checks_answer_ok_and_verbose_lists_them() {
        let (health, _, _) = health_with_flaky_db();
        let plain = health.answer("/readyz", None).await.unwrap();
        assert_eq!(
            plain,
            Answer {
                status: 200,
                body: "ok".into()
            }
        );
        let verbose = health.answer("/readyz", Some("verbose")).await.unwrap();
        assert_eq!(
            verbose.body,
            "[+]ping ok\n[+]log ok\n[+]db ok\n[+]shutdown ok\nreadyz check passed\n"
        );
        let live = health.answer("/livez", Some("verbose=1")).await.unwrap();
        assert_eq!(
            live.body, "[+]ping ok\n[+]log ok\nlivez check passed\n",
            "readiness checks are not liveness checks"
        );
        let healthz = health.answer("/healthz", Some("verbose")).await.unwrap();
        assert_eq!(
            healthz.body,
            "[+]ping ok\n[+]log ok\n[+]db ok\nhealthz check passed\n"
        );
        assert!(health.answer("/metrics", None).await.is_none());
    }

    #[tokio::test]
    async fn a_failing_check_fails_the_endpoint_but_can_be_excluded() {
        let (health, db_ok, _) = health_with_flaky_db();
        db_ok.store(false, Ordering::SeqCst);
        let failed = health.answer("/readyz", None).await.unwrap();
        assert_eq!(failed.status, 500);
        assert_eq!(
            failed.body,
            "[+]ping ok\n[+]log ok\n[-]db failed: reason withheld\n[+]shutdown ok\nreadyz check failed\n"
        );
        let excluded = health
            .answer("/readyz", Some("verbose&exclude=db&exclude=nope"))
            .await
            .unwrap();
        assert_eq!(excluded.status, 200);
        assert_eq!(
            excluded.body,
            "[+]ping ok\n[+]log ok\n[+]db excluded: ok\n[+]shutdown ok\nwarn: some health checks cannot be excluded: no matches for \"nope\"\nreadyz check passed\n"
        );
        assert_eq!(health.answer("/livez", None).await.unwrap().status, 200);
    }

    #[tokio::test]
    async fn single_checks_answer_on_their_own_path() {
        let (health, db_ok, _) = health_with_flaky_db();
        assert_eq!(
            health.answer("/readyz/db", None).await.unwrap(),
            Answer {
                status: 200,
                body: "ok".into()
            }
        );
        db_ok.store(false, Ordering::SeqCst);
        let failed = health.answer("/readyz/db", None).await.unwrap();
        assert_eq!(
            failed,
            Answer {
                status: 500,
                body: "internal server error: db unreachable\n".into()
            }
        );
        assert_eq!(
            health.answer("/readyz/nope", None).await.unwrap().status,
            404
        );
        assert_eq!(
            health.answer("/livez/db", None).await.unwrap().status,
            404,
            "db is not a liveness check"
        );
    }

    #[tokio::test]
    async fn readyz_fails_once_shutdown_begins_while_livez_passes() {
        let (health, _, shutdown) = health_with_flaky_db();
        shutdown.trigger();
        let ready = health.answer("/readyz", None).await.unwrap();
        assert_eq!(ready.status, 500);
        assert!(ready.body.contains("[-]shutdown failed: reason withheld"));
        assert_eq!(health.answer("/livez", None).await.unwrap().status, 200);
        assert_eq!(health.answer("/healthz", None).await.unwrap().status, 200);
    }

    #[tokio::test]
    #[allow(
        clippy::await_holding_lock,
        reason = "the guard stands for a stuck writer; only the flushing thread waits on it"
    )]
    async fn the_log_check_fails_while_the_log_writer_is_held_up() {
        // The writer's lock, held by the test as a writer stuck on a full pipe would hold it.
        let writer = Arc::new(Mutex::new(()));
        let held = writer.clone();
        let log = LogFlush::new(
            Box::new(move || drop(held.lock().unwrap_or_else(PoisonError::into_inner))),
            Duration::from_millis(20),
            Duration::from_millis(300),
        );
        let health = Health::with_log(&Shutdown::new(), log.clone());
        assert_eq!(health.answer("/livez/log", None).await.unwrap().status, 200);
        let stuck = writer.lock().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let failed = loop {
            let answer = health.answer("/livez/log", None).await.unwrap();
            if answer.status != 200 || Instant::now() > deadline {
                break answer;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(
            failed,
            Answer {
                status: 500,
                body: "internal server error: logging blocked\n".into()
            }
        );
        assert_eq!(health.answer("/livez", None).await.unwrap().status, 500);
        drop(stuck);
        let deadline = Instant::now() + Duration::from_secs(10);
        while health.answer("/livez/log", None).await.unwrap().status != 200 {
            assert!(
                Instant::now() < deadline,
                "the log check never passed again"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // The flushing thread lets go of the state (and ends) once the check is gone.
        let weak = Arc::downgrade(&log);
        drop((health, log));
        let deadline = Instant::now() + Duration::from_secs(10);
        while weak.strong_count() > 0 {
            assert!(
                Instant::now() < deadline,
                "the flushing thread kept the state"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
