use std::collections::BTreeSet;
use std::time::Duration;

use super::*;

const MS: Duration = Duration::from_millis(1);

fn queued(queues: usize, hand_size: usize, queue_length_limit: usize) -> Limit {
    Limit::Queue {
        queues,
        hand_size,
        queue_length_limit,
    }
}

/// A request that arrived: where it runs (once it does) and how to learn it.
struct Pending {
    name: &'static str,
    slot: Option<Slot>,
    receiver: Option<oneshot::Receiver<Slot>>,
}

fn arrive(set: &mut QueueSet, now: Instant, name: &'static str, flow: u64, id: u64) -> Pending {
    match set.arrive(now, 1, flow, id) {
        Arrival::Dispatched(slot) => Pending {
            name,
            slot: Some(slot),
            receiver: None,
        },
        Arrival::Queued { dispatched, .. } => Pending {
            name,
            slot: None,
            receiver: Some(dispatched),
        },
        Arrival::Rejected(reason) => panic!("{name} rejected: {reason:?}"),
    }
}

/// The names of the pending requests dispatched since the last call, in no order.
fn newly_dispatched(pending: &mut [Pending]) -> Vec<&'static str> {
    let mut names = Vec::new();
    for p in pending.iter_mut() {
        if let Some(receiver) = &mut p.receiver
            && let Ok(slot) = receiver.try_recv()
        {
            p.slot = Some(slot);
            p.receiver = None;
            names.push(p.name);
        }
    }
    names
}

#[test]
fn hands_are_distinct_cards_and_spread_flows_over_the_queues() {
    let mut covered = BTreeSet::new();
    for flow in 0..2000u64 {
        let mut hand = [0usize; 6];
        let hash = flow.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        deal(hash, 128, &mut hand);
        let distinct: BTreeSet<usize> = hand.iter().copied().collect();
        assert_eq!(distinct.len(), 6, "{hand:?}");
        assert!(hand.iter().all(|c| *c < 128), "{hand:?}");
        covered.extend(hand);
    }
    assert_eq!(covered.len(), 128);
    // The hand is the hash read in mixed radix: 0 draws the first cards in order.
    let mut hand = [0usize; 3];
    deal(0, 10, &mut hand);
    assert_eq!(hand, [0, 1, 2]);
    // 1 + 10 × 0 + 90 × 0: the second card, then the first, then the third.
    deal(1, 10, &mut hand);
    assert_eq!(hand, [1, 0, 2]);
}

#[test]
fn a_flooding_flow_does_not_delay_a_light_one_behind_its_queue() {
    let now = Instant::now();
    let mut set = QueueSet::new(queued(8, 1, 100), 1, now);
    let mut pending = Vec::new();
    // Flow 0 (queue 0) sends 20 at once; the first runs, the rest wait.
    for id in 0..20 {
        pending.push(arrive(&mut set, now, "flood", 0, id));
    }
    // Flow 1 (queue 1) sends 3 just after.
    for id in 20..23 {
        pending.push(arrive(&mut set, now + MS, "light", 1, id));
    }
    assert_eq!(set.waiting, 22);
    let mut order = Vec::new();
    let mut t = now + MS;
    let mut running = pending[0].slot.unwrap();
    for _ in 0..22 {
        t += MS;
        set.complete(t, running, 1, t - MS);
        let next = newly_dispatched(&mut pending);
        assert_eq!(next.len(), 1, "{next:?}");
        order.push(next[0]);
        running = pending
            .iter()
            .find(|p| p.name == next[0] && p.slot.is_some() && p.receiver.is_none())
            .and_then(|p| p.slot)
            .unwrap();
    }
    let light: Vec<usize> = order
        .iter()
        .enumerate()
        .filter(|(_, n)| **n == "light")
        .map(|(i, _)| i)
        .collect();
    // Served alternately: the light flow's three go within the first six dispatches.
    assert_eq!(light.len(), 3, "{order:?}");
    assert!(light[2] < 6, "{order:?}");
    assert_eq!(set.waiting, 0);
}

#[test]
fn a_full_queue_rejects_and_a_reject_level_turns_away_what_does_not_fit() {
    let now = Instant::now();
    let mut set = QueueSet::new(queued(4, 1, 2), 1, now);
    let _running = arrive(&mut set, now, "a", 0, 0);
    let _w1 = arrive(&mut set, now, "b", 0, 1);
    let _w2 = arrive(&mut set, now, "c", 0, 2);
    assert!(matches!(
        set.arrive(now, 1, 0, 3),
        Arrival::Rejected(RejectReason::QueueFull)
    ));
    // Another flow's queue still has room.
    assert!(matches!(set.arrive(now, 1, 1, 4), Arrival::Queued { .. }));
    assert_eq!(set.rejected[0], 1);

    let mut set = QueueSet::new(Limit::Reject, 2, now);
    assert!(matches!(set.arrive(now, 1, 0, 0), Arrival::Dispatched(_)));
    assert!(matches!(set.arrive(now, 1, 0, 1), Arrival::Dispatched(_)));
    assert!(matches!(
        set.arrive(now, 1, 0, 2),
        Arrival::Rejected(RejectReason::ConcurrencyLimit)
    ));
    // A request wider than the whole limit runs when nothing else does.
    let mut set = QueueSet::new(Limit::Reject, 2, now);
    assert!(matches!(set.arrive(now, 5, 0, 0), Arrival::Dispatched(_)));
    assert_eq!(set.seats_in_use, 5);
}

#[test]
fn a_wide_request_waits_for_its_seats_and_once_next_nothing_passes_it() {
    let now = Instant::now();
    let mut set = QueueSet::new(queued(4, 1, 10), 4, now);
    let Arrival::Dispatched(first) = set.arrive(now, 3, 0, 0) else {
        panic!("the first runs")
    };
    // 4 seats wide, 1 free: it waits, and so does the narrow one of its flow behind it.
    let Arrival::Queued {
        dispatched: mut wide,
        ..
    } = set.arrive(now, 4, 1, 1)
    else {
        panic!("the wide one waits")
    };
    let Arrival::Queued {
        dispatched: mut behind,
        ..
    } = set.arrive(now, 1, 1, 2)
    else {
        panic!("the narrow one behind it waits")
    };
    // Another flow's narrow request finishes earlier in virtual time, and fits: it runs.
    let Arrival::Queued {
        dispatched: mut other,
        ..
    } = set.arrive(now, 1, 2, 3)
    else {
        panic!("it queues behind the waiting ones, then runs")
    };
    let other = other.try_recv().expect("dispatched at once");
    assert!(wide.try_recv().is_err() && behind.try_recv().is_err());
    // The first completes: the wide one is next but 1 seat is in use; nothing passes it.
    set.complete(now + MS, first, 3, now);
    assert!(wide.try_recv().is_err() && behind.try_recv().is_err());
    assert_eq!(set.seats_in_use, 1);
    set.complete(now + 2 * MS, other, 1, now);
    assert!(wide.try_recv().is_ok());
    assert!(behind.try_recv().is_err());
    assert_eq!(set.seats_in_use, 4);
}

#[test]
fn a_cancelled_request_leaves_its_queue_and_exempt_levels_never_wait() {
    let now = Instant::now();
    let mut set = QueueSet::new(queued(4, 1, 10), 1, now);
    let Arrival::Dispatched(first) = set.arrive(now, 1, 0, 0) else {
        panic!()
    };
    let Arrival::Queued { slot, .. } = set.arrive(now, 1, 0, 1) else {
        panic!()
    };
    assert!(set.cancel(now, 1, slot));
    assert_eq!(set.waiting, 0);
    assert!(!set.cancel(now, 1, slot), "not there any more");
    set.complete(now, first, 1, now);
    assert_eq!(set.seats_in_use, 0);

    let mut exempt = QueueSet::new(Limit::Exempt, 1, now);
    for id in 0..100 {
        assert!(matches!(
            exempt.arrive(now, 1, id, id),
            Arrival::Dispatched(_)
        ));
    }
    assert_eq!(exempt.seats_in_use, 100);
}

#[test]
fn fewer_queues_deal_what_waits_again_and_no_queues_let_it_run() {
    let now = Instant::now();
    let mut set = QueueSet::new(queued(8, 2, 10), 1, now);
    let Arrival::Dispatched(first) = set.arrive(now, 1, 0, 0) else {
        panic!()
    };
    let mut receivers = Vec::new();
    for id in 1..5 {
        let Arrival::Queued { dispatched, .. } = set.arrive(now, 1, id * 7919, id) else {
            panic!()
        };
        receivers.push(dispatched);
    }
    set.reconfigure(queued(2, 1, 10), 1, now);
    assert_eq!(set.waiting, 4);
    // The old slot completes without charging a rebuilt queue; the next one runs.
    set.complete(now + MS, first, 1, now);
    assert_eq!(
        receivers
            .iter_mut()
            .map(|r| r.try_recv())
            .filter(Result::is_ok)
            .count(),
        1
    );
    set.reconfigure(Limit::Reject, 1, now + MS);
    assert_eq!(set.waiting, 0);
    assert_eq!(
        receivers
            .iter_mut()
            .map(|r| r.try_recv())
            .filter(Result::is_ok)
            .count(),
        3
    );
}

#[test]
fn demand_statistics_integrate_seats_over_the_period() {
    let now = Instant::now();
    let mut set = QueueSet::new(Limit::Reject, 10, now);
    let Arrival::Dispatched(a) = set.arrive(now, 4, 0, 0) else {
        panic!()
    };
    // 4 seats for 1 s, then none for 1 s.
    set.complete(now + Duration::from_secs(1), a, 4, now);
    let stats = set.demand.take(now + Duration::from_secs(2));
    assert!((stats.average - 2.0).abs() < 1e-9, "{stats:?}");
    assert!((stats.deviation - 2.0).abs() < 1e-9, "{stats:?}");
    assert_eq!(stats.high_watermark, 4.0);
}
