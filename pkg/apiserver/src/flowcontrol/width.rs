//! Work estimation: how many seats a request takes, as upstream's estimators count them.
//!
//! - A **list** (and a watch asking for its initial events with `sendInitialEvents=true`)
//!   takes a seat per 100 objects it will go through: the objects stored of its resource when
//!   answered from the watch cache; with a selector from storage, those plus the page; from
//!   storage otherwise (an exact `resourceVersion`, a continuation, a limited list at an old
//!   version), twice the page. A list naming one object (`metadata.name=`) takes one seat; a
//!   resource whose count is not known yet takes the most; one not served here (an aggregated
//!   API) the least.
//! - A **mutating** request takes, on top of its one seat while it runs, a seat per 10 open
//!   watches that may be sent its event (those of its resource in every namespace, in its
//!   namespace, and of its name, as upstream's watch tracker counts them) for 5 ms per seat
//!   afterwards (the work of sending the event), reshaped to at most the level's maximum
//!   seats held correspondingly longer; fewer than 10 such watches add nothing.
//! - Every other request takes one seat.
//!
//! No request takes more than its level's maximum: 15% of the level's nominal limit, no more
//! than its nominal limit divided by its hand size, at least 1 and at most 10.

use std::time::Duration;

use crate::request_info::RequestInfo;

/// Seats per the objects a list goes through.
const OBJECTS_PER_SEAT: f64 = 100.0;
/// Watchers per seat of a mutating request's aftermath.
const WATCHERS_PER_SEAT: f64 = 10.0;
/// The work of sending one event to watchers, per seat.
const EVENT_WORK: Duration = Duration::from_millis(5);
/// The most seats a request takes anywhere.
pub(crate) const MAXIMUM_SEATS: u32 = 10;

/// What a request is estimated to take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkEstimate {
    /// The seats it holds while it runs.
    pub initial_seats: u32,
    /// The seats it holds afterwards, for `additional_latency`.
    pub final_seats: u32,
    /// How long the final seats are held after it completes.
    pub additional_latency: Duration,
}

impl WorkEstimate {
    fn seats(seats: u32) -> Self {
        Self {
            initial_seats: seats,
            final_seats: 0,
            additional_latency: Duration::ZERO,
        }
    }

    /// The seats it occupies from dispatch to the end of its additional latency.
    pub fn max_seats(&self) -> u32 {
        self.initial_seats.max(self.final_seats)
    }
}

/// The most seats one request of a level takes: `nominal` seats, dealt hands of `hand_size`
/// queues (0 for a level without queues).
pub(crate) fn level_max_seats(nominal: u32, hand_size: u32) -> u32 {
    let share = (f64::from(nominal) * 0.15).ceil() as u32;
    let per_hand = nominal.checked_div(hand_size).unwrap_or(u32::MAX);
    share.min(per_hand).clamp(1, MAXIMUM_SEATS)
}

/// The list options the estimate reads.
#[derive(Debug, Default)]
struct ListQuery {
    limit: i64,
    selector: bool,
    resource_version: Option<String>,
    resource_version_match: Option<String>,
    continued: bool,
    send_initial_events: bool,
}

fn list_query(query: Option<&str>) -> ListQuery {
    let mut options = ListQuery::default();
    for (key, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        match &*key {
            "limit" => options.limit = value.parse().unwrap_or(0),
            "labelSelector" | "fieldSelector" if !value.is_empty() => options.selector = true,
            "resourceVersion" => options.resource_version = Some(value.into_owned()),
            "resourceVersionMatch" => options.resource_version_match = Some(value.into_owned()),
            "continue" if !value.is_empty() => options.continued = true,
            "sendInitialEvents" => options.send_initial_events = value == "true",
            _ => {}
        }
    }
    options
}

/// Whether a list is answered from storage rather than the watch cache (upstream's rule with
/// consistent lists served from the cache).
fn from_storage(options: &ListQuery) -> bool {
    match options.resource_version_match.as_deref() {
        Some("Exact") => return true,
        Some("NotOlderThan") => {}
        None | Some("") => {
            if options.limit > 0
                && options
                    .resource_version
                    .as_deref()
                    .is_some_and(|rv| !rv.is_empty() && rv != "0")
            {
                return true;
            }
        }
        Some(_) => return true,
    }
    options.continued
}

/// The work of `info` (with its `query`) in a level whose requests take at most `max_seats`:
/// `stored` answers how many objects its resource holds (`Err(true)`: not counted yet,
/// `Err(false)`: not a resource stored here), `watchers` how many watches may be sent its events.
pub(crate) fn estimate(
    info: &RequestInfo,
    query: Option<&str>,
    max_seats: u32,
    stored: impl FnOnce() -> Result<usize, bool>,
    watchers: impl FnOnce() -> usize,
) -> WorkEstimate {
    let max_seats = max_seats.clamp(1, MAXIMUM_SEATS);
    if !info.is_resource_request {
        return WorkEstimate::seats(1);
    }
    match info.verb.as_str() {
        "list" | "watch" => {
            if !info.name.is_empty() {
                return WorkEstimate::seats(1);
            }
            let options = list_query(query);
            if info.verb == "watch" && !options.send_initial_events {
                return WorkEstimate::seats(1);
            }
            let stored = match stored() {
                Ok(count) => count as f64,
                Err(true) => return WorkEstimate::seats(max_seats),
                Err(false) => return WorkEstimate::seats(1),
            };
            let page = if options.limit > 0 && (options.limit as f64) < stored {
                options.limit as f64
            } else {
                stored
            };
            let objects = if info.verb == "watch" || !from_storage(&options) {
                stored
            } else if options.selector {
                stored + page
            } else {
                2.0 * page
            };
            let seats = (objects / OBJECTS_PER_SEAT).ceil() as u32;
            WorkEstimate::seats(seats.clamp(1, max_seats))
        }
        "create" | "update" | "patch" | "delete" | "deletecollection" => {
            let watchers = watchers() as f64;
            if watchers < WATCHERS_PER_SEAT {
                return WorkEstimate::seats(1);
            }
            let seats = (watchers / WATCHERS_PER_SEAT).ceil();
            // The aftermath's work in seat-seconds, reshaped to at most `max_seats` wide.
            let work = seats * EVENT_WORK.as_secs_f64();
            let final_seats = seats.min(f64::from(max_seats));
            WorkEstimate {
                initial_seats: 1,
                final_seats: final_seats as u32,
                additional_latency: Duration::from_secs_f64(work / final_seats),
            }
        }
        _ => WorkEstimate::seats(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(verb: &str) -> RequestInfo {
        RequestInfo {
            is_resource_request: true,
            verb: verb.into(),
            resource: "configmaps".into(),
            ..RequestInfo::default()
        }
    }

    fn seats(info: &RequestInfo, query: &str, stored: Result<usize, bool>) -> u32 {
        estimate(info, Some(query), 10, || stored, || 0).initial_seats
    }

    #[test]
    fn lists_take_a_seat_per_hundred_objects_as_upstream_counts_them() {
        let info = list("list");
        // From the cache: every stored object.
        assert_eq!(seats(&info, "", Ok(799)), 8);
        assert_eq!(seats(&info, "limit=100", Ok(799)), 8);
        assert_eq!(seats(&info, "resourceVersion=0&limit=50", Ok(799)), 8);
        // From storage: twice the page, or all plus the page with a selector.
        assert_eq!(seats(&info, "resourceVersion=5&limit=100", Ok(799)), 2);
        assert_eq!(seats(&info, "continue=abc&limit=100", Ok(799)), 2);
        assert_eq!(
            seats(
                &info,
                "resourceVersionMatch=Exact&resourceVersion=5&limit=100&labelSelector=a%3Db",
                Ok(799)
            ),
            9
        );
        // Capped by the level's maximum; at least one.
        assert_eq!(seats(&info, "", Ok(100_000)), 10);
        assert_eq!(
            estimate(&info, None, 3, || Ok(100_000), || 0).initial_seats,
            3
        );
        assert_eq!(seats(&info, "", Ok(0)), 1);
        // Unknown counts: the most while not counted yet, the least when not stored here.
        assert_eq!(seats(&info, "", Err(true)), 10);
        assert_eq!(seats(&info, "", Err(false)), 1);
        // One named object.
        let mut named = list("list");
        named.name = "one".into();
        assert_eq!(seats(&named, "", Ok(100_000)), 1);
    }

    #[test]
    fn watches_are_estimated_only_when_they_ask_for_initial_events() {
        let info = list("watch");
        assert_eq!(seats(&info, "", Ok(5000)), 1);
        assert_eq!(
            seats(
                &info,
                "sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
                Ok(500)
            ),
            5
        );
    }

    #[test]
    fn writes_watched_by_many_hold_seats_for_their_events() {
        let mut info = list("create");
        info.namespace = "default".into();
        let quiet = estimate(&info, None, 10, || Ok(0), || 9);
        assert_eq!(quiet, WorkEstimate::seats(1));
        let watched = estimate(&info, None, 10, || Ok(0), || 95);
        assert_eq!(watched.initial_seats, 1);
        assert_eq!(watched.final_seats, 10);
        assert_eq!(watched.additional_latency, Duration::from_millis(5));
        // Wider than the level allows: narrower and longer, the same work.
        let reshaped = estimate(&info, None, 4, || Ok(0), || 200);
        assert_eq!(reshaped.final_seats, 4);
        assert_eq!(reshaped.additional_latency, Duration::from_millis(25));
    }

    #[test]
    fn a_levels_maximum_is_upstreams() {
        // Upstream's table: nominal limit and hand size to maximum seats.
        for (nominal, hand, expected) in [
            (5, 6, 1),
            (10, 6, 1),
            (15, 6, 2),
            (20, 6, 3),
            (35, 6, 5),
            (100, 6, 10),
            (10, 1, 2),
            (100, 20, 5),
        ] {
            assert_eq!(level_max_seats(nominal, hand), expected, "{nominal} {hand}");
        }
        assert_eq!(level_max_seats(600, 0), 10);
    }
}
