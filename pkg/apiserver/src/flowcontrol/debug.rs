//! The debug endpoints below `/debug/api_priority_and_fairness/`, in upstream's formats:
//! comma-separated columns aligned as Go's `tabwriter` aligns them (at least 8 wide, one
//! space of padding).
//!
//! - `dump_priority_levels`: per level, its active queues, whether it is idle or quiescing
//!   (removed from the configuration and still running requests), and its waiting,
//!   executing, dispatched, rejected, timed-out and cancelled requests;
//! - `dump_queues`: per queue of every level, its waiting and executing requests, seats in
//!   use, virtual start (`NextDispatchR`, in seat-seconds), and seats waiting;
//! - `dump_requests`: per waiting request, its level, FlowSchema, queue, place in the queue,
//!   flow distinguisher and arrival; with `includeRequestDetails=1`, also the user and what
//!   it asks for.

use std::fmt::Write as _;
use std::time::{Instant, SystemTime};

use super::FlowControl;
use super::queueset::RejectReason;

/// Rows of cells aligned in columns: each cell followed by `,`, padded to the widest cell of
/// its column plus one space, at least 8 wide; the last column unpadded.
fn table(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0usize; columns];
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.len() + 2);
        }
    }
    let mut out = String::new();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            let cell = format!("{cell},");
            if i + 1 == row.len() {
                out.push_str(&cell);
            } else {
                let _ = write!(out, "{cell:<width$}", width = widths[i].max(8));
            }
        }
        out.push('\n');
    }
    out
}

/// When `at` was, as `2006-01-02T15:04:05.000000000Z`.
fn arrival(at: Instant) -> String {
    let age = Instant::now().saturating_duration_since(at);
    let since = (SystemTime::now() - age)
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let time = genplane_apimachinery::meta::rfc3339(i64::try_from(since.as_secs()).unwrap_or(0));
    match time.strip_suffix('Z') {
        Some(base) => format!("{base}.{:09}Z", since.subsec_nanos()),
        None => time,
    }
}

impl FlowControl {
    /// The debug dump `what` (`dump_priority_levels`, `dump_queues`, `dump_requests`), with
    /// the request's `query`; `None` for another name.
    pub fn dump(&self, what: &str, query: Option<&str>) -> Option<String> {
        let config = self.config();
        let mut rows: Vec<Vec<String>> = Vec::new();
        match what {
            "dump_priority_levels" => {
                rows.push(
                    [
                        "PriorityLevelName",
                        "ActiveQueues",
                        "IsIdle",
                        "IsQuiescing",
                        "WaitingRequests",
                        "ExecutingRequests",
                        "DispatchedRequests",
                        "RejectedRequests",
                        "TimedoutRequests",
                        "CancelledRequests",
                    ]
                    .map(String::from)
                    .to_vec(),
                );
                for level in &config.levels {
                    let state = level.lock();
                    let set = &state.set;
                    rows.push(vec![
                        level.name.to_string(),
                        set.active_queues().to_string(),
                        (set.waiting == 0 && set.executing == 0).to_string(),
                        (!state.configured).to_string(),
                        set.waiting.to_string(),
                        set.executing.to_string(),
                        set.dispatched.to_string(),
                        (set.rejected[RejectReason::QueueFull.index()]
                            + set.rejected[RejectReason::ConcurrencyLimit.index()])
                        .to_string(),
                        set.rejected[RejectReason::TimeOut.index()].to_string(),
                        set.rejected[RejectReason::Cancelled.index()].to_string(),
                    ]);
                }
            }
            "dump_queues" => {
                rows.push(
                    [
                        "PriorityLevelName",
                        "Index",
                        "PendingRequests",
                        "ExecutingRequests",
                        "SeatsInUse",
                        "NextDispatchR",
                        "InitialSeatsSum",
                    ]
                    .map(String::from)
                    .to_vec(),
                );
                for level in &config.levels {
                    let state = level.lock();
                    for (index, queue) in state.set.queues().enumerate() {
                        rows.push(vec![
                            level.name.to_string(),
                            index.to_string(),
                            queue.waiting.to_string(),
                            queue.executing.to_string(),
                            queue.seats_in_use.to_string(),
                            format!("{:.8}ss", queue.next_start),
                            queue.waiting_seats.to_string(),
                        ]);
                    }
                }
            }
            "dump_requests" => {
                let details = query.is_some_and(|q| {
                    form_urlencoded::parse(q.as_bytes())
                        .any(|(k, v)| k == "includeRequestDetails" && v == "1")
                });
                let mut header: Vec<String> = [
                    "PriorityLevelName",
                    "FlowSchemaName",
                    "QueueIndex",
                    "RequestIndexInQueue",
                    "FlowDistingsher",
                    "ArriveTime",
                ]
                .map(String::from)
                .to_vec();
                if details {
                    header.extend(
                        [
                            "UserName",
                            "Verb",
                            "APIPath",
                            "Namespace",
                            "Name",
                            "APIVersion",
                            "Resource",
                            "SubResource",
                        ]
                        .map(String::from),
                    );
                }
                rows.push(header);
                let shown = self
                    .waiting
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone();
                for level in &config.levels {
                    let state = level.lock();
                    for (queue, index, id, arrived) in state.set.waiting_requests() {
                        let Some(request) = shown.get(&id) else {
                            continue;
                        };
                        let mut row = vec![
                            level.name.to_string(),
                            request.flow_schema.to_string(),
                            queue.to_string(),
                            index.to_string(),
                            request.distinguisher.clone(),
                            arrival(arrived),
                        ];
                        if details {
                            let info = &request.info;
                            row.extend([
                                request.user.clone(),
                                info.verb.clone(),
                                info.path.clone(),
                                info.namespace.clone(),
                                info.name.clone(),
                                info.api_version.clone(),
                                info.resource.clone(),
                                info.subresource.clone(),
                            ]);
                        }
                        rows.push(row);
                    }
                }
            }
            _ => return None,
        }
        Some(table(&rows))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_aligned_as_tabwriter_aligns_them() {
        let rows = vec![
            vec![
                "PriorityLevelName".to_owned(),
                "ActiveQueues".to_owned(),
                "IsIdle".to_owned(),
            ],
            vec!["exempt".to_owned(), "0".to_owned(), "true".to_owned()],
        ];
        assert_eq!(
            table(&rows),
            "PriorityLevelName, ActiveQueues, IsIdle,\nexempt,            0,            true,\n"
        );
    }

    #[test]
    fn the_priority_levels_dump_lists_every_level() {
        let flow_control = FlowControl::new(600, std::time::Duration::from_secs(15));
        let dump = flow_control.dump("dump_priority_levels", None).unwrap();
        let lines: Vec<&str> = dump.lines().collect();
        assert!(lines[0].starts_with("PriorityLevelName,"), "{dump}");
        assert!(lines[0].ends_with("CancelledRequests,"), "{dump}");
        assert_eq!(lines.len(), 3, "{dump}");
        assert!(lines[1].starts_with("exempt,"), "{dump}");
        assert!(lines[2].starts_with("catch-all,"), "{dump}");
        assert!(
            flow_control
                .dump("dump_queues", None)
                .unwrap()
                .starts_with("PriorityLevelName,")
        );
        assert!(flow_control.dump("elsewhere", None).is_none());
    }
}
