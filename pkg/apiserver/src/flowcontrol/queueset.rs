//! One priority level's seats and queues: who runs now, who waits, who is turned away.
//!
//! A `QueueSet` is a plain state machine, driven under its level's lock with the current time
//! passed in (so tests run it on a clock of their own):
//! - An **exempt** level dispatches every request at once; its seats are only counted.
//! - A **Reject** level dispatches a request when its seats fit under the level's current
//!   concurrency limit (or nothing runs at all), and rejects it otherwise.
//! - A **Queue** level deals each flow a hand of `handSize` queues out of `queues` by shuffle
//!   sharding (the flow's hash decoded as a hand drawn without replacement), puts the request
//!   on the hand's queue holding the fewest seats (waiting and executing), and rejects it when
//!   that queue already holds `queueLengthLimit` requests. Queues are served by fair queuing
//!   in seat-seconds: each queue carries the virtual time its next request may start at; the
//!   level's virtual clock advances, while queues are active, by the seats in use shared
//!   among the active queues; the waiting request with the earliest virtual finish (its
//!   queue's start plus its seats times 3 ms, upstream's estimate) goes next, when its seats fit;
//!   when they do not, nothing is dispatched before it (a wide request is not starved by
//!   narrower ones), and a request wider than the whole limit runs alone. What a request
//!   really took is charged to its queue when it completes.
//!
//! The level also measures its seat demand (seats executing and waiting, integrated over
//! time) for the borrowing adjustment, and counts what it dispatched and rejected.

use std::collections::VecDeque;
use std::time::Instant;

use tokio::sync::oneshot;

/// The service time fair queuing assumes of a request until it completes (upstream's
/// estimate), in seconds.
pub(crate) const ESTIMATED_SERVICE: f64 = 0.003;

/// Why a request was turned away (the `reason` label upstream gives rejections).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// Its queue already held `queueLengthLimit` requests.
    QueueFull,
    /// A Reject level had no seats for it.
    ConcurrencyLimit,
    /// It waited in its queue past the wait limit.
    TimeOut,
    /// Its client went away while it waited.
    Cancelled,
}

impl RejectReason {
    /// Every reason, in the order of [`RejectReason::index`].
    pub const ALL: [RejectReason; 4] = [
        RejectReason::QueueFull,
        RejectReason::ConcurrencyLimit,
        RejectReason::TimeOut,
        RejectReason::Cancelled,
    ];

    /// The reason's place in [`RejectReason::ALL`] (and in the counts kept by reason).
    pub fn index(self) -> usize {
        match self {
            RejectReason::QueueFull => 0,
            RejectReason::ConcurrencyLimit => 1,
            RejectReason::TimeOut => 2,
            RejectReason::Cancelled => 3,
        }
    }

    /// The name upstream's metrics give the reason.
    pub fn as_str(self) -> &'static str {
        match self {
            RejectReason::QueueFull => "queue-full",
            RejectReason::ConcurrencyLimit => "concurrency-limit",
            RejectReason::TimeOut => "time-out",
            RejectReason::Cancelled => "cancelled",
        }
    }
}

/// How a level treats requests beyond its limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Limit {
    /// Never limited.
    Exempt,
    /// Rejected at once.
    Reject,
    /// Queued: so many queues, a hand of so many per flow, so many requests per queue.
    Queue {
        queues: usize,
        hand_size: usize,
        queue_length_limit: usize,
    },
}

/// A request waiting in a queue.
#[derive(Debug)]
struct Waiter {
    id: u64,
    seats: u32,
    flow: u64,
    arrived: Instant,
    wake: oneshot::Sender<Slot>,
}

/// One queue of a Queue level.
#[derive(Debug, Default)]
struct Queue {
    waiting: VecDeque<Waiter>,
    waiting_seats: u32,
    executing: u32,
    executing_seats: u32,
    /// The virtual time its next request may start at.
    next_start: f64,
}

impl Queue {
    fn is_idle(&self) -> bool {
        self.waiting.is_empty() && self.executing == 0
    }
}

/// Where a dispatched request runs, for its completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slot {
    /// Its queue (Queue levels), or `usize::MAX`.
    pub(crate) queue: usize,
    /// The queue set's generation when it was dispatched: a completion after the queues were
    /// rebuilt charges no queue.
    pub(crate) generation: u64,
}

/// What became of an arriving request.
#[derive(Debug)]
pub(crate) enum Arrival {
    /// It runs now.
    Dispatched(Slot),
    /// It waits in `slot`: `dispatched` answers where it runs once it does.
    Queued {
        slot: Slot,
        dispatched: oneshot::Receiver<Slot>,
    },
    /// It is turned away.
    Rejected(RejectReason),
}

/// Seat demand over the current adjustment period.
#[derive(Clone, Debug)]
pub(crate) struct Demand {
    since: Instant,
    last: Instant,
    current: f64,
    integral: f64,
    square_integral: f64,
    high_watermark: f64,
    /// The smoothed demand the borrowing adjustment keeps between periods.
    pub(crate) smoothed: f64,
}

/// The statistics of a period of seat demand.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct DemandStats {
    pub(crate) average: f64,
    pub(crate) deviation: f64,
    pub(crate) high_watermark: f64,
}

impl Demand {
    fn new(now: Instant) -> Self {
        Self {
            since: now,
            last: now,
            current: 0.0,
            integral: 0.0,
            square_integral: 0.0,
            high_watermark: 0.0,
            smoothed: 0.0,
        }
    }

    fn set(&mut self, now: Instant, demand: f64) {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.integral += self.current * elapsed;
        self.square_integral += self.current * self.current * elapsed;
        self.last = now;
        self.current = demand;
        self.high_watermark = self.high_watermark.max(demand);
    }

    /// The period's statistics; a new period starts at `now`.
    pub(crate) fn take(&mut self, now: Instant) -> DemandStats {
        let current = self.current;
        self.set(now, current);
        let period = now.saturating_duration_since(self.since).as_secs_f64();
        let stats = if period > 0.0 {
            let average = self.integral / period;
            let variance = (self.square_integral / period - average * average).max(0.0);
            DemandStats {
                average,
                deviation: variance.sqrt(),
                high_watermark: self.high_watermark,
            }
        } else {
            DemandStats {
                average: current,
                deviation: 0.0,
                high_watermark: self.high_watermark.max(current),
            }
        };
        self.since = now;
        self.integral = 0.0;
        self.square_integral = 0.0;
        self.high_watermark = current;
        stats
    }
}

/// A level's queues and seats (see the module's documentation).
#[derive(Debug)]
pub(crate) struct QueueSet {
    pub(crate) limit: Limit,
    /// The current concurrency limit, in seats.
    pub(crate) concurrency: u32,
    pub(crate) seats_in_use: u32,
    pub(crate) executing: u32,
    pub(crate) waiting: u32,
    waiting_seats: u32,
    queues: Vec<Queue>,
    generation: u64,
    virtual_time: f64,
    last: Instant,
    pub(crate) demand: Demand,
    /// Requests dispatched, and rejected by reason, since the level was made.
    pub(crate) dispatched: u64,
    pub(crate) rejected: [u64; 4],
}

/// Draws a hand of `hand.len()` distinct cards out of `deck` from `hash`: the hash read as
/// the digits of a number in the mixed radix `deck, deck - 1, …`, each digit the index of
/// the card among those not yet drawn.
pub(crate) fn deal(mut hash: u64, deck: usize, hand: &mut [usize]) {
    let mut drawn: Vec<usize> = Vec::with_capacity(hand.len());
    for (i, card) in hand.iter_mut().enumerate() {
        let left = (deck - i) as u64;
        let mut index = (hash % left) as usize;
        hash /= left;
        // The index-th card not yet drawn: step over the drawn ones at or below it, lowest first.
        for taken in &drawn {
            if *taken <= index {
                index += 1;
            }
        }
        let at = drawn.partition_point(|t| *t < index);
        drawn.insert(at, index);
        *card = index;
    }
}

impl QueueSet {
    /// A level limited by `limit`, with `concurrency` seats to start with.
    pub(crate) fn new(limit: Limit, concurrency: u32, now: Instant) -> Self {
        let mut set = Self {
            limit: Limit::Exempt,
            concurrency,
            seats_in_use: 0,
            executing: 0,
            waiting: 0,
            waiting_seats: 0,
            queues: Vec::new(),
            generation: 0,
            virtual_time: 0.0,
            last: now,
            demand: Demand::new(now),
            dispatched: 0,
            rejected: [0; 4],
        };
        set.reconfigure(limit, concurrency, now);
        set
    }

    /// Applies a changed spec: the number of queues may change (what waits is dealt again,
    /// in arrival order, into the new queues), and the limit.
    pub(crate) fn reconfigure(&mut self, limit: Limit, concurrency: u32, now: Instant) {
        self.advance(now);
        let wanted = match limit {
            Limit::Queue { queues, .. } => queues,
            _ => 0,
        };
        if wanted != self.queues.len() {
            let mut waiting: Vec<Waiter> = self
                .queues
                .iter_mut()
                .flat_map(|q| q.waiting.drain(..))
                .collect();
            waiting.sort_by_key(|w| w.id);
            self.generation += 1;
            self.queues = (0..wanted).map(|_| Queue::default()).collect();
            self.waiting = 0;
            self.waiting_seats = 0;
            self.limit = limit;
            for waiter in waiting {
                if let Limit::Queue { hand_size, .. } = limit {
                    let queue = self.choose(waiter.flow, hand_size);
                    self.push(queue, waiter);
                } else {
                    // No queues any more: it runs.
                    self.start(usize::MAX, waiter.seats);
                    let slot = self.slot(usize::MAX);
                    if waiter.wake.send(slot).is_err() {
                        self.complete(now, slot, waiter.seats, now);
                    }
                }
            }
        }
        self.limit = limit;
        self.concurrency = concurrency.max(1);
        self.dispatch_ready(now);
    }

    /// Lets every waiting request run (the level was removed from the configuration).
    pub(crate) fn release_all(&mut self, now: Instant) {
        self.concurrency = u32::MAX;
        self.dispatch_ready(now);
    }

    fn demand_now(&self) -> f64 {
        f64::from(self.seats_in_use) + f64::from(self.waiting_seats)
    }

    /// Moves the virtual clock to `now`.
    fn advance(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        if elapsed == 0.0 || self.queues.is_empty() {
            return;
        }
        let active = self.queues.iter().filter(|q| !q.is_idle()).count();
        if active > 0 {
            let busy = f64::from(self.seats_in_use.min(self.concurrency));
            self.virtual_time += elapsed * busy / active as f64;
        }
    }

    fn start(&mut self, queue: usize, seats: u32) {
        self.seats_in_use += seats;
        self.executing += 1;
        self.dispatched += 1;
        if let Some(q) = self.queues.get_mut(queue) {
            q.executing += 1;
            q.executing_seats += seats;
            q.next_start += f64::from(seats) * ESTIMATED_SERVICE;
        }
    }

    fn push(&mut self, queue: usize, waiter: Waiter) {
        let virtual_time = self.virtual_time;
        let q = &mut self.queues[queue];
        if q.is_idle() {
            q.next_start = q.next_start.max(virtual_time);
        }
        let seats = waiter.seats;
        q.waiting_seats += seats;
        q.waiting.push_back(waiter);
        self.waiting += 1;
        self.waiting_seats += seats;
    }

    fn fits(&self, seats: u32) -> bool {
        self.seats_in_use == 0 || self.seats_in_use.saturating_add(seats) <= self.concurrency
    }

    /// The queue of `flow`'s hand holding the fewest seats.
    fn choose(&self, flow: u64, hand_size: usize) -> usize {
        let mut hand = [0usize; 16];
        let hand = &mut hand[..hand_size.clamp(1, 16).min(self.queues.len())];
        deal(flow, self.queues.len(), hand);
        let mut best = hand[0];
        let mut best_seats = u32::MAX;
        for &queue in hand.iter() {
            let q = &self.queues[queue];
            let seats = q.waiting_seats + q.executing_seats;
            if seats < best_seats {
                best = queue;
                best_seats = seats;
            }
        }
        best
    }

    /// A request of `seats` seats of flow `flow` arrives at `now`; `id` identifies it while
    /// it waits.
    pub(crate) fn arrive(&mut self, now: Instant, seats: u32, flow: u64, id: u64) -> Arrival {
        self.advance(now);
        let arrival = match self.limit {
            Limit::Exempt => {
                self.start(usize::MAX, seats);
                Arrival::Dispatched(self.slot(usize::MAX))
            }
            Limit::Reject => {
                if self.fits(seats) {
                    self.start(usize::MAX, seats);
                    Arrival::Dispatched(self.slot(usize::MAX))
                } else {
                    self.reject(RejectReason::ConcurrencyLimit)
                }
            }
            Limit::Queue {
                hand_size,
                queue_length_limit,
                ..
            } => {
                let queue = self.choose(flow, hand_size);
                if self.waiting == 0 && self.fits(seats) {
                    let virtual_time = self.virtual_time;
                    let q = &mut self.queues[queue];
                    if q.is_idle() {
                        q.next_start = q.next_start.max(virtual_time);
                    }
                    self.start(queue, seats);
                    Arrival::Dispatched(self.slot(queue))
                } else if self.queues[queue].waiting.len() >= queue_length_limit {
                    self.reject(RejectReason::QueueFull)
                } else {
                    let (wake, dispatched) = oneshot::channel();
                    self.push(
                        queue,
                        Waiter {
                            id,
                            seats,
                            flow,
                            arrived: now,
                            wake,
                        },
                    );
                    self.dispatch_ready(now);
                    Arrival::Queued {
                        slot: self.slot(queue),
                        dispatched,
                    }
                }
            }
        };
        self.demand.set(now, self.demand_now());
        arrival
    }

    fn slot(&self, queue: usize) -> Slot {
        Slot {
            queue,
            generation: self.generation,
        }
    }

    fn reject(&mut self, reason: RejectReason) -> Arrival {
        self.count_rejection(reason);
        Arrival::Rejected(reason)
    }

    /// Counts a rejection decided outside (a wait that ended).
    pub(crate) fn count_rejection(&mut self, reason: RejectReason) {
        self.rejected[reason.index()] += 1;
    }

    /// Takes waiting request `id` out of its queue; `false` when it is no longer waiting
    /// (it was dispatched: its seats are taken and must be given back by [`QueueSet::complete`]).
    pub(crate) fn cancel(&mut self, now: Instant, id: u64, slot: Slot) -> bool {
        if slot.generation != self.generation {
            // The queues were rebuilt since: look everywhere.
            for queue in 0..self.queues.len() {
                if self.remove(now, queue, id) {
                    return true;
                }
            }
            return false;
        }
        self.remove(now, slot.queue, id)
    }

    fn remove(&mut self, now: Instant, queue: usize, id: u64) -> bool {
        let Some(q) = self.queues.get_mut(queue) else {
            return false;
        };
        let Some(at) = q.waiting.iter().position(|w| w.id == id) else {
            return false;
        };
        self.advance(now);
        let q = &mut self.queues[queue];
        let waiter = q.waiting.remove(at).expect("the position was found");
        q.waiting_seats -= waiter.seats;
        self.waiting -= 1;
        self.waiting_seats -= waiter.seats;
        // A request that left may have been what blocked the others.
        self.dispatch_ready(now);
        self.demand.set(now, self.demand_now());
        true
    }

    /// A request of `seats` that ran in `slot` since `started` completes at `now`.
    pub(crate) fn complete(&mut self, now: Instant, slot: Slot, seats: u32, started: Instant) {
        self.advance(now);
        self.seats_in_use = self.seats_in_use.saturating_sub(seats);
        self.executing = self.executing.saturating_sub(1);
        if slot.generation == self.generation
            && let Some(q) = self.queues.get_mut(slot.queue)
        {
            q.executing = q.executing.saturating_sub(1);
            q.executing_seats = q.executing_seats.saturating_sub(seats);
            // Charge what it really took instead of the estimate.
            let took = now.saturating_duration_since(started).as_secs_f64();
            q.next_start += f64::from(seats) * (took - ESTIMATED_SERVICE);
        }
        self.dispatch_ready(now);
        self.demand.set(now, self.demand_now());
    }

    /// Dispatches waiting requests, earliest virtual finish first, while their seats fit.
    fn dispatch_ready(&mut self, now: Instant) {
        while self.waiting > 0 {
            let mut best: Option<(usize, f64)> = None;
            for (index, q) in self.queues.iter().enumerate() {
                if let Some(head) = q.waiting.front() {
                    let finish = q.next_start + f64::from(head.seats) * ESTIMATED_SERVICE;
                    if best.is_none_or(|(_, f)| finish < f) {
                        best = Some((index, finish));
                    }
                }
            }
            let Some((queue, _)) = best else { break };
            let seats = self.queues[queue].waiting.front().map_or(1, |w| w.seats);
            if !self.fits(seats) {
                break;
            }
            let q = &mut self.queues[queue];
            let waiter = q.waiting.pop_front().expect("the queue has a head");
            q.waiting_seats -= waiter.seats;
            self.waiting -= 1;
            self.waiting_seats -= waiter.seats;
            self.start(queue, waiter.seats);
            let slot = self.slot(queue);
            if waiter.wake.send(slot).is_err() {
                // Its waiter is gone (and did not find it in the queue): give the seats back.
                self.dispatched -= 1;
                self.complete(now, slot, waiter.seats, now);
                return;
            }
        }
    }

    /// The queues that hold requests (waiting or executing).
    pub(crate) fn active_queues(&self) -> usize {
        self.queues.iter().filter(|q| !q.is_idle()).count()
    }

    /// Each queue, for the debug dump: waiting requests, executing requests, seats in use,
    /// its virtual start, and the seats waiting.
    pub(crate) fn queues(&self) -> impl Iterator<Item = QueueView> + '_ {
        self.queues.iter().map(|q| QueueView {
            waiting: q.waiting.len(),
            executing: q.executing,
            seats_in_use: q.executing_seats,
            next_start: q.next_start,
            waiting_seats: q.waiting_seats,
        })
    }

    /// The waiting requests, for the debug dump: queue, position, and when each arrived.
    pub(crate) fn waiting_requests(
        &self,
    ) -> impl Iterator<Item = (usize, usize, u64, Instant)> + '_ {
        self.queues.iter().enumerate().flat_map(|(queue, q)| {
            q.waiting
                .iter()
                .enumerate()
                .map(move |(index, w)| (queue, index, w.id, w.arrived))
        })
    }
}

/// One queue as the debug dump shows it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct QueueView {
    pub(crate) waiting: usize,
    pub(crate) executing: u32,
    pub(crate) seats_in_use: u32,
    pub(crate) next_start: f64,
    pub(crate) waiting_seats: u32,
}

#[cfg(test)]
mod tests;
