//! Borrowing between priority levels: how the server's concurrency limit is shared out again
//! every adjustment period, from what each level's seat demand was.
//!
//! Each limited level has a nominal limit (its share of the server's limit, by
//! `nominalConcurrencyShares`), of which it may lend `lendablePercent` and beyond which it may
//! borrow `borrowingLimitPercent` (unbounded when unset). Every period, as upstream's
//! configuration controller does:
//! - a level's demand target is the lesser of its high watermark and its average plus one
//!   standard deviation, smoothed so that it rises at once and decays slowly;
//! - its allocation is bounded below by what it may not lend, raised to its high watermark up
//!   to its nominal limit (a busy level is not squeezed below what it used), and above by its
//!   nominal limit plus what it may borrow;
//! - the allocations are the one fair proportion of the targets, each clamped to its bounds,
//!   that sums to the server's limit less what the exempt levels keep (their unlendable part);
//! - and are rounded to whole seats (at least one).

/// The weight the previous smoothed demand keeps each period (upstream's envelope).
const SMOOTHING: f64 = 0.977;

/// A level's inputs to one adjustment.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Item {
    /// The least the level gets.
    pub(crate) lower: f64,
    /// What it would get with everyone's demand met in proportion.
    pub(crate) target: f64,
    /// The most it may get.
    pub(crate) upper: f64,
}

/// The smoothed demand after a period whose target was `target`.
pub(crate) fn smooth(previous: f64, target: f64) -> f64 {
    target.max(SMOOTHING * previous + (1.0 - SMOOTHING) * target)
}

/// The bounds and target of a limited level: `nominal` seats, `lendable` of them lendable, at
/// most `borrowing` more (`None`: unbounded, up to `server`), with this period's high
/// watermark and smoothed demand.
pub(crate) fn item(
    nominal: u32,
    lendable: u32,
    borrowing: Option<u32>,
    server: u32,
    high_watermark: f64,
    smoothed: f64,
) -> Item {
    let nominal_f = f64::from(nominal);
    let min = f64::from(nominal.saturating_sub(lendable));
    let lower = min.max(high_watermark.min(nominal_f));
    let upper = match borrowing {
        Some(b) => f64::from(nominal.saturating_add(b)),
        None => f64::from(server.max(nominal)),
    }
    .max(lower);
    Item {
        lower,
        target: smoothed.max(lower),
        upper,
    }
}

fn total(items: &[Item], proportion: f64) -> f64 {
    items
        .iter()
        .map(|i| (proportion * i.target).clamp(i.lower, i.upper))
        .sum()
}

/// The allocations of `items` summing to `sum` (as closely as whole bounds allow): each the
/// same proportion of its target, clamped to its bounds.
pub(crate) fn allocate(sum: f64, items: &[Item]) -> Vec<f64> {
    let lowest: f64 = items.iter().map(|i| i.lower).sum();
    let highest: f64 = items.iter().map(|i| i.upper).sum();
    if sum <= lowest {
        return items.iter().map(|i| i.lower).collect();
    }
    if sum >= highest {
        return items.iter().map(|i| i.upper).collect();
    }
    // The total is non-decreasing in the proportion: bisect for the one that meets `sum`.
    let smallest_target = items
        .iter()
        .map(|i| i.target)
        .fold(f64::INFINITY, f64::min)
        .max(1e-3);
    let (mut low, mut high) = (0.0, highest / smallest_target);
    for _ in 0..100 {
        let middle = (low + high) / 2.0;
        if total(items, middle) < sum {
            low = middle;
        } else {
            high = middle;
        }
    }
    items
        .iter()
        .map(|i| (high * i.target.max(1e-3)).clamp(i.lower, i.upper))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_levels_lend_to_a_busy_one_within_its_borrowing_limit() {
        // Three levels of 10 seats each out of 30; two idle ones lending half.
        let idle = item(10, 5, None, 30, 0.0, 0.0);
        let busy = item(10, 5, Some(10), 30, 30.0, 30.0);
        let allocations = allocate(30.0, &[idle, idle, busy]);
        assert_eq!(allocations, vec![5.0, 5.0, 20.0]);
        // Unbounded borrowing still cannot take what the others may not lend.
        let greedy = item(10, 5, None, 30, 30.0, 30.0);
        assert_eq!(allocate(30.0, &[idle, idle, greedy]), vec![5.0, 5.0, 20.0]);
    }

    #[test]
    fn equally_busy_levels_get_their_nominal_limits() {
        let a = item(20, 10, None, 30, 20.0, 20.0);
        let b = item(10, 5, None, 30, 10.0, 10.0);
        let allocations = allocate(30.0, &[a, b]);
        assert!((allocations[0] - 20.0).abs() < 1e-6, "{allocations:?}");
        assert!((allocations[1] - 10.0).abs() < 1e-6, "{allocations:?}");
    }

    #[test]
    fn two_levels_wanting_more_than_there_is_share_it_by_demand() {
        let a = item(10, 10, None, 20, 10.0, 40.0);
        let b = item(10, 10, None, 20, 10.0, 10.0);
        // Both need their nominal (high watermarks); nothing is left to share.
        assert_eq!(allocate(20.0, &[a, b]), vec![10.0, 10.0]);
        let a = item(10, 10, None, 20, 5.0, 30.0);
        let b = item(10, 10, None, 20, 5.0, 10.0);
        let allocations = allocate(20.0, &[a, b]);
        assert!((allocations[0] - 15.0).abs() < 1e-6, "{allocations:?}");
        assert!((allocations[1] - 5.0).abs() < 1e-6, "{allocations:?}");
    }

    #[test]
    fn smoothing_rises_at_once_and_decays_slowly() {
        assert_eq!(smooth(0.0, 10.0), 10.0);
        let decayed = smooth(10.0, 0.0);
        assert!(decayed > 9.7 && decayed < 10.0, "{decayed}");
    }
}
