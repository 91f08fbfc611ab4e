//! Watches: one etcd watch stream per [`Watch`], forwarded by a task, re-established when it
//! breaks. The crate documentation explains the compaction check and how progress is proven.
//!
//! A stream is also re-established, on another member, when its member turns unhealthy and
//! requests go elsewhere (see the `members` module), and when it goes silent: after
//! [`WATCH_IDLE`] without a message the forwarder asks etcd for progress, which any live
//! stream answers, and a stream that stays silent [`WATCH_PROBE_TIMEOUT`] longer is given up.

use std::sync::Arc;
use std::time::Duration;

use etcd_client::{EventType, WatchOptions, WatchResponse, WatchStream};
use genplane_storage::{
    Bytes, Error, Event, EventKind, KeyValue, Memo, Result, Revision, Storage, Watch, WatchEvent,
    WatchSender,
};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::error::Failure;
use crate::error::WatchCanceled;
use crate::members::Members;
use crate::{EtcdStore, UnexpectedAnswer, prefix_end};

/// How often an unanswered progress request is repeated on servers whose answers are trusted.
const PROGRESS_REQUEST_INTERVAL: Duration = Duration::from_millis(250);

/// The first and the longest pause between attempts to re-establish a broken watch.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// etcd's watch id for answers that belong to no single watch (progress requests).
const NO_WATCH_ID: i64 = -1;

/// How long a stream may be silent before the forwarder asks etcd for progress to prove it
/// alive.
const WATCH_IDLE: Duration = Duration::from_secs(5);

/// How long a silent stream has to answer the progress request before it is given up.
const WATCH_PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// Opens the etcd watch and spawns the task that forwards it.
pub(crate) async fn start(store: EtcdStore, prefix: &str, after: Revision) -> Result<Watch> {
    let key = store.etcd_key(prefix);
    let range_end = prefix_end(&key);
    let stream = open(&store, &key, &range_end, after).await?;
    let (watch, sender) = Watch::channel();
    let forwarder = Forwarder {
        store,
        key,
        range_end,
        delivered: after,
        sender,
        progress: Progress::Idle,
    };
    tokio::spawn(forwarder.run(stream));
    Ok(watch)
}

/// A created etcd watch.
struct EtcdWatch {
    stream: WatchStream,
    id: i64,
    /// The member it runs on.
    member: usize,
}

/// Creates an etcd watch on `[key, range_end)` for the events after `after`, then checks that
/// those events are not compacted (see the crate documentation).
async fn open(
    store: &EtcdStore,
    key: &[u8],
    range_end: &[u8],
    after: Revision,
) -> Result<EtcdWatch> {
    let options = WatchOptions::new()
        .with_range(range_end.to_vec())
        .with_start_revision(after.saturating_add(1).max(1))
        .with_prev_key()
        .with_progress_notify();
    let (stream, created, member) = store
        .inner
        .members
        .watch(key, &options)
        .await
        .map_err(Failure::into_error)?;
    if !created.created() {
        return Err(Error::backend(UnexpectedAnswer(
            "a watch answer before the watch was created",
        )));
    }
    if created.canceled() {
        return Err(Error::backend(WatchCanceled {
            reason: created.cancel_reason().to_owned(),
        }));
    }
    store.check_not_compacted(key, after).await?;
    Ok(EtcdWatch {
        id: created.watch_id(),
        stream,
        member,
    })
}

/// Where a pending progress request stands.
enum Progress {
    /// None pending.
    Idle,
    /// Reading the current revision.
    Reading(JoinHandle<Result<Revision>>),
    /// Waiting until everything up to `target` has been delivered.
    Waiting {
        target: Revision,
        /// When to ask etcd for progress (again), on servers whose answer is trusted.
        ask_at: Option<Instant>,
    },
}

/// What the progress state machine needs done next.
enum ProgressStep {
    /// The current revision was read (or could not be).
    Read(Result<Revision>),
    /// Time to send a progress request to etcd.
    Ask,
}

impl Progress {
    fn is_idle(&self) -> bool {
        matches!(self, Progress::Idle)
    }

    /// Completes when the state needs attention; pending forever when idle.
    async fn step(&mut self) -> ProgressStep {
        match self {
            Progress::Reading(read) => ProgressStep::Read(match read.await {
                Ok(result) => result,
                Err(e) => Err(Error::backend(e)),
            }),
            Progress::Waiting {
                ask_at: Some(at), ..
            } => {
                tokio::time::sleep_until(*at).await;
                ProgressStep::Ask
            }
            Progress::Idle | Progress::Waiting { ask_at: None, .. } => std::future::pending().await,
        }
    }
}

/// Why forwarding from one etcd stream stopped.
enum Stop {
    /// The reader is gone, or the watch ended with an error it was told about.
    End,
    /// The stream broke; open a new one after what was delivered.
    Reconnect(String),
}

/// The task behind one [`Watch`].
struct Forwarder {
    store: EtcdStore,
    key: Vec<u8>,
    range_end: Vec<u8>,
    /// Every event up to this revision has been delivered.
    delivered: Revision,
    sender: WatchSender,
    progress: Progress,
}

impl Forwarder {
    async fn run(mut self, mut stream: EtcdWatch) {
        loop {
            match self.forward(&mut stream).await {
                Stop::End => return,
                Stop::Reconnect(reason) => {
                    tracing::debug!(%reason, after = self.delivered, "re-establishing an etcd watch");
                    match self.reconnect().await {
                        Some(next) => stream = next,
                        None => return,
                    }
                }
            }
        }
    }

    /// Opens a new etcd watch after the last delivered revision, retrying transient failures
    /// with backoff. `None` when the watch ends instead.
    async fn reconnect(&mut self) -> Option<EtcdWatch> {
        let mut backoff = FIRST_BACKOFF;
        let mut health = self.store.inner.members.subscribe();
        loop {
            tokio::select! {
                () = self.sender.events.closed() => return None,
                () = tokio::time::sleep(backoff) => {}
                // A member that became healthy (or one that did not) is worth a try at once.
                () = Members::changed(&mut health) => {}
            }
            match open(&self.store, &self.key, &self.range_end, self.delivered).await {
                Ok(stream) => {
                    if let Progress::Waiting { ask_at, .. } = &mut self.progress
                        && self.store.inner.trusts_progress_requests
                    {
                        *ask_at = Some(Instant::now());
                    }
                    return Some(stream);
                }
                Err(e) if e.is_retryable() => {
                    tracing::debug!(error = %e, "an etcd watch could not be re-established yet");
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
                Err(e) => {
                    let _ = self.sender.events.send(WatchEvent::Error(e)).await;
                    return None;
                }
            }
        }
    }

    /// Forwards one etcd stream until it breaks or the watch ends.
    async fn forward(&mut self, stream: &mut EtcdWatch) -> Stop {
        let store = self.store.clone();
        let members = &store.inner.members;
        let mut health = members.subscribe();
        let mut heard_at = Instant::now();
        let mut probed = false;
        loop {
            let idle = self.progress.is_idle();
            let check_at = heard_at
                + if probed {
                    WATCH_IDLE + WATCH_PROBE_TIMEOUT
                } else {
                    WATCH_IDLE
                };
            tokio::select! {
                biased;
                () = self.sender.events.closed() => return Stop::End,
                message = stream.stream.message() => {
                    let response = match message {
                        Ok(Some(response)) => response,
                        Ok(None) => return Stop::Reconnect("the stream ended".into()),
                        Err(e) => {
                            let failure = crate::error::classify(e);
                            members.stream_failed(stream.member, &failure);
                            return Stop::Reconnect(failure.describe());
                        }
                    };
                    heard_at = Instant::now();
                    probed = false;
                    if let Some(stop) = self.handle(stream.id, response).await {
                        return stop;
                    }
                }
                () = Members::give_up_on(&mut health, stream.member) => {
                    return Stop::Reconnect(format!(
                        "etcd member {} is unhealthy", members.endpoint(stream.member)
                    ));
                }
                () = tokio::time::sleep_until(check_at) => {
                    if probed {
                        return Stop::Reconnect(format!(
                            "the watch stream on etcd member {} went silent",
                            members.endpoint(stream.member)
                        ));
                    }
                    probed = true;
                    // Any answer proves the stream alive; a stream that cannot even take
                    // the request is given up at the next check.
                    let _ = tokio::time::timeout(WATCH_PROBE_TIMEOUT, stream.stream.request_progress()).await;
                }
                Some(()) = self.sender.progress_requests.recv(), if idle => {
                    let store = self.store.clone();
                    self.progress = Progress::Reading(tokio::spawn(async move {
                        store.current_revision().await
                    }));
                }
                step = self.progress.step() => match step {
                    ProgressStep::Read(Ok(target)) => {
                        let ask_at = self.store.inner.trusts_progress_requests.then(Instant::now);
                        self.progress = Progress::Waiting { target, ask_at };
                        if !self.answer_progress().await {
                            return Stop::End;
                        }
                    }
                    ProgressStep::Read(Err(e)) => {
                        // Unanswerable for now; the reader asks again.
                        tracing::debug!(error = %e, "reading the revision for a progress report failed");
                        self.progress = Progress::Idle;
                    }
                    ProgressStep::Ask => {
                        if let Progress::Waiting { ask_at, .. } = &mut self.progress {
                            *ask_at = Some(Instant::now() + PROGRESS_REQUEST_INTERVAL);
                        }
                        match tokio::time::timeout(WATCH_PROBE_TIMEOUT, stream.stream.request_progress()).await {
                            Ok(Ok(())) => {}
                            Ok(Err(e)) => return Stop::Reconnect(e.to_string()),
                            Err(_) => return Stop::Reconnect("etcd took no progress request".into()),
                        }
                    }
                },
            }
        }
    }

    /// Handles one etcd answer; `Some` when forwarding from this stream must stop.
    async fn handle(&mut self, id: i64, response: WatchResponse) -> Option<Stop> {
        if response.canceled() {
            let compacted = response.compact_revision();
            let error = if compacted > 0 {
                Error::Compacted {
                    requested: self.delivered,
                    compacted,
                }
            } else if response.cancel_reason().contains("no leader") {
                return Some(Stop::Reconnect(response.cancel_reason().to_owned()));
            } else {
                Error::backend(WatchCanceled {
                    reason: response.cancel_reason().to_owned(),
                })
            };
            let _ = self.sender.events.send(WatchEvent::Error(error)).await;
            return Some(Stop::End);
        }
        let events = response.events();
        if events.is_empty() {
            // A periodic progress notification for this watch is queued behind its events and
            // only sent when it is synced, so it is always trusted; the answer to a progress
            // request only from servers that order it with the events.
            let trusted = (response.watch_id() == id && !response.created())
                || (response.watch_id() == NO_WATCH_ID
                    && self.store.inner.trusts_progress_requests);
            if trusted && let Some(header) = response.header() {
                self.delivered = self.delivered.max(header.revision());
            }
        } else {
            for event in events {
                let event = match self.event(event) {
                    Ok(event) => event,
                    Err(e) => {
                        let _ = self.sender.events.send(WatchEvent::Error(e)).await;
                        return Some(Stop::End);
                    }
                };
                let revision = event.revision();
                if self
                    .sender
                    .events
                    .send(WatchEvent::Event(Arc::new(event)))
                    .await
                    .is_err()
                {
                    return Some(Stop::End);
                }
                self.delivered = self.delivered.max(revision);
            }
        }
        if self.answer_progress().await {
            None
        } else {
            Some(Stop::End)
        }
    }

    /// Reports progress if the pending request's target has been reached. `false` when the
    /// reader is gone.
    async fn answer_progress(&mut self) -> bool {
        match self.progress {
            Progress::Waiting { target, .. } if self.delivered >= target => {
                self.progress = Progress::Idle;
                self.sender
                    .events
                    .send(WatchEvent::Progress(self.delivered))
                    .await
                    .is_ok()
            }
            _ => true,
        }
    }

    /// The contract's event for an etcd event.
    fn event(&self, event: &etcd_client::Event) -> Result<Event> {
        let kv = event
            .kv()
            .ok_or_else(|| Error::backend(UnexpectedAnswer("a watch event without its key")))?;
        let prev = event
            .prev_kv()
            .map(|prev| self.copy_key_value(prev))
            .transpose()?;
        Ok(match event.event_type() {
            EventType::Put => Event {
                kind: if kv.create_revision() == kv.mod_revision() {
                    EventKind::Create
                } else {
                    EventKind::Update
                },
                kv: self.copy_key_value(kv)?,
                prev,
                memo: Memo::default(),
            },
            EventType::Delete => Event {
                kind: EventKind::Delete,
                kv: KeyValue {
                    key: self.store.storage_key(kv.key().to_vec())?,
                    value: Bytes::new(),
                    create_revision: prev.as_ref().map_or(0, |p| p.create_revision),
                    mod_revision: kv.mod_revision(),
                    hint: 0,
                },
                prev,
                memo: Memo::default(),
            },
        })
    }

    fn copy_key_value(&self, kv: &etcd_client::KeyValue) -> Result<KeyValue> {
        Ok(KeyValue {
            key: self.store.storage_key(kv.key().to_vec())?,
            value: Bytes::copy_from_slice(kv.value()),
            create_revision: kv.create_revision(),
            mod_revision: kv.mod_revision(),
            hint: 0,
        })
    }
}
