//! The server flow's decisions, without I/O: from a Feature object, what the binary knows of
//! the feature and the live instances, the status to write and the task to run.

use std::collections::BTreeMap;
use std::time::Duration;

use genplane_component_base::featuregate::{Stage, Task};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Map, Value, json};

use crate::identity::Instance;

/// The type of the task every transition starts with.
pub const WAIT_FOR_USES: &str = "WaitForUses";
/// The condition saying whether every live instance reports the value of the state.
pub const AGREED: &str = "Agreed";
/// The condition saying whether the cluster's emulated version is safe for the feature: set on
/// the Feature of a feature that does not exist at the announcing binary's emulated version
/// (false until it is off and its turn-off tasks removed what it stored), and kept current
/// once the feature exists again.
pub const UPGRADE_SAFE: &str = "UpgradeSafe";

/// What the binary knows of a feature, and how the cluster is configured for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Known {
    /// The feature's name.
    pub name: &'static str,
    /// Its stage at the emulated version.
    pub stage: Stage,
    /// Its default there.
    pub default: bool,
    /// Whether it is locked to its default.
    pub locked: bool,
    /// The value configured (the feature-controller's `--feature-gates`).
    pub configured: bool,
    /// Whether clients may set `spec.desired` whatever the API servers say: the
    /// feature-controller's own `--dynamic-features` (deprecated; the API servers' decide).
    pub dynamic: bool,
    /// Whether the feature can be dynamic at all: the binary consults it at every use
    /// (`Registry::allow_dynamic`), and it is neither central nor absent.
    pub may_be_dynamic: bool,
    /// Whether the API servers' flags decide the value (on only when every live API server
    /// reports it on), rather than the feature-controller's own.
    pub central: bool,
    /// The tasks turning it off runs after [`WAIT_FOR_USES`].
    pub turn_off_tasks: Vec<Task>,
    /// Whether the feature exists at the emulated version. One that does not (the emulated
    /// version moved below its first version) is never announced, but its Feature, if any, is
    /// turned off with its turn-off tasks (configured off, neither dynamic nor central).
    pub exists: bool,
}

/// The versions the announcing binary reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Versions {
    /// The binary's Kubernetes version.
    pub binary: String,
    /// The emulated version.
    pub emulated: String,
}

/// What one reconciliation decided.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The status to write (the object's own when nothing changed).
    pub status: Value,
    /// The states entered, in order, for `feature_transitions_total`.
    pub transitions: Vec<&'static str>,
    /// A task to run now (its outcome goes into the status with [`task_done`] or
    /// [`task_failed`] before the status is written).
    pub run: Option<Task>,
}

fn stage_name(stage: Stage) -> &'static str {
    match stage {
        Stage::Alpha | Stage::PreAlpha => "Alpha",
        Stage::Beta => "Beta",
        Stage::Ga => "GA",
        Stage::Deprecated => "Deprecated",
    }
}

fn time(at: Timestamp) -> Value {
    json!(genplane_apimachinery::meta::rfc3339(at.as_second()))
}

fn on_off(value: bool) -> &'static str {
    if value { "On" } else { "Off" }
}

/// The value the state stands for: what every instance should report.
fn expected(state: &str) -> &'static str {
    match state {
        "On" | "TurningOn" => "On",
        _ => "Off",
    }
}

fn task_of(type_: &str, target: Option<String>) -> Value {
    let mut task = json!({"type": type_});
    if let Some(target) = target {
        task["target"] = json!(target);
    }
    task
}

fn tasks_for(state: &str, known: &Known) -> Vec<Value> {
    let mut tasks = vec![task_of(WAIT_FOR_USES, None)];
    if state == "TurningOff" {
        tasks.extend(
            known
                .turn_off_tasks
                .iter()
                .map(|t| task_of(t.type_name(), Some(t.target()))),
        );
    }
    tasks
}

fn list<'a>(status: &'a Map<String, Value>, key: &str) -> &'a [Value] {
    status
        .get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn describe(uses: &[&Value]) -> String {
    uses.iter()
        .map(|u| {
            format!(
                "{}/{}",
                u["component"].as_str().unwrap_or_default(),
                u["instance"].as_str().unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn parse_time(value: &Value) -> Option<Timestamp> {
    let parsed = genplane_apimachinery::time::parse_time(value.as_str()?)?;
    Timestamp::from_second(parsed.seconds).ok()
}

/// Sets the condition `type_`, keeping its transition time unless its status changes.
fn set_condition(
    status: &mut Map<String, Value>,
    type_: &str,
    value: bool,
    reason: &str,
    message: String,
    now: Timestamp,
) {
    let mut conditions: Vec<Value> = list(status, "conditions").to_vec();
    let status_value = if value { "True" } else { "False" };
    let position = conditions.iter().position(|c| c["type"] == type_);
    let transition = match position.map(|i| &conditions[i]) {
        Some(old) if old["status"] == status_value => old["lastTransitionTime"].clone(),
        _ => time(now),
    };
    let condition = json!({
        "type": type_,
        "status": status_value,
        "lastTransitionTime": transition,
        "reason": reason,
        "message": message,
    });
    match position {
        Some(i) => conditions[i] = condition,
        None => conditions.push(condition),
    }
    status.insert("conditions".into(), Value::Array(conditions));
}

/// The value of a central feature: on when every live API server reporting it runs it on,
/// off when any runs it off (a server configured off cannot serve what the feature adds). With
/// no report (uses just cleared, or no server checked the feature yet), the state's value, or
/// `configured` for a Feature without a state.
fn central_desired(status: &Map<String, Value>, configured: bool) -> bool {
    let values: Vec<&Value> = list(status, "uses")
        .iter()
        .filter(|u| u["component"] == API_SERVER)
        .map(|u| &u["value"])
        .collect();
    if values.is_empty() {
        return match status.get("state").and_then(Value::as_str) {
            Some(state) => expected(state) == "On",
            None => configured,
        };
    }
    values.iter().all(|v| *v == "On")
}

/// Whether clients may set the feature's `spec.desired`: named in the feature-controller's own
/// (deprecated) `--dynamic-features`, or by every live API server (its `--dynamic-features`, on
/// its identity Lease). With no live API server (all restarting at once), `status` keeps what
/// it says: a transition asked for is not dropped in between.
fn dynamic(known: &Known, status: &Map<String, Value>, live: &BTreeMap<String, Instance>) -> bool {
    if !known.may_be_dynamic {
        return false;
    }
    if known.dynamic {
        return true;
    }
    let mut servers = live
        .values()
        .filter(|i| i.component == API_SERVER)
        .peekable();
    if servers.peek().is_none() {
        return status.get("dynamic").and_then(Value::as_bool) == Some(true);
    }
    servers.all(|server| server.dynamic.contains(known.name))
}

/// The component name the API servers report their uses as.
pub const API_SERVER: &str = genplane_api::featuregates::API_SERVER;

/// Decides what to do with the Feature `object` at `now`, given what the binary knows of it,
/// the `live` instances and how long [`WAIT_FOR_USES`] waits after clearing the uses.
pub fn plan(
    object: &Value,
    known: &Known,
    versions: &Versions,
    live: &BTreeMap<String, Instance>,
    now: Timestamp,
    wait: Duration,
) -> Plan {
    let mut status = object
        .get("status")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut transitions = Vec::new();
    let mut run = None;

    // Announce what the binary knows (of a feature that does not exist at the emulated version,
    // only the versions: its stage and default are those of the version that had it).
    if known.exists {
        status.insert("stage".into(), json!(stage_name(known.stage)));
        status.insert("default".into(), json!(known.default));
        status.insert("lockedToDefault".into(), json!(known.locked));
    }
    status.insert(
        "versions".into(),
        json!({"binary": versions.binary, "emulated": versions.emulated}),
    );
    let dynamic = dynamic(known, &status, live);
    status.insert("dynamic".into(), json!(dynamic));

    // Forget the uses of instances that are gone.
    let uses: Vec<Value> = list(&status, "uses")
        .iter()
        .filter(|u| {
            u["instance"]
                .as_str()
                .is_some_and(|name| live.contains_key(name))
        })
        .cloned()
        .collect();
    status.insert("uses".into(), Value::Array(uses));

    let asked = object
        .pointer("/spec/desired")
        .and_then(Value::as_str)
        .filter(|_| dynamic);
    let desired = match asked {
        Some(value) => value == "On",
        None if known.central => central_desired(&status, known.configured),
        None => known.configured,
    };
    let state = status
        .get("state")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let start = match (state.as_str(), desired) {
        ("On", false) | ("TurningOn", false) => Some("TurningOff"),
        ("Off", true) | ("TurningOff", true) => Some("TurningOn"),
        ("On" | "Off" | "TurningOn" | "TurningOff", _) => None,
        // A new object (or a state this binary does not know) starts where it is configured.
        _ => {
            status.insert("state".into(), json!(on_off(desired)));
            status.insert("tasks".into(), json!([]));
            None
        }
    };
    if let Some(next) = start {
        status.insert("state".into(), json!(next));
        status.insert("tasks".into(), Value::Array(tasks_for(next, known)));
        transitions.push(next);
    }

    // Work on the transition in progress.
    let state = status["state"].as_str().unwrap_or_default().to_owned();
    if state.starts_with("Turning") {
        let old = if state == "TurningOff" { "On" } else { "Off" };
        let mut tasks: Vec<Value> = list(&status, "tasks").to_vec();
        loop {
            let Some(first) = tasks.first_mut() else {
                let done = if state == "TurningOff" { "Off" } else { "On" };
                status.insert("state".into(), json!(done));
                transitions.push(done);
                break;
            };
            if first["type"] == WAIT_FOR_USES {
                let started = first.get("startTime").and_then(parse_time);
                let Some(started) = started else {
                    // Clear the uses: every live instance reports again within the wait.
                    first["startTime"] = time(now);
                    first["attempts"] = json!(1);
                    first["message"] = json!(format!(
                        "cleared the uses; waiting {}s for every live instance to report",
                        wait.as_secs()
                    ));
                    status.insert("uses".into(), json!([]));
                    break;
                };
                let waited = now.duration_since(started);
                if waited < SignedDuration::try_from(wait).unwrap_or(SignedDuration::MAX) {
                    break;
                }
                let disagreeing: Vec<&Value> = list(&status, "uses")
                    .iter()
                    .filter(|u| u["value"] == old)
                    .collect();
                if disagreeing.is_empty() {
                    tasks.remove(0);
                    continue;
                }
                first["message"] = json!(format!(
                    "waiting for instances that still report {old}: {}",
                    describe(&disagreeing)
                ));
                break;
            }
            let position = known.turn_off_tasks.iter().find(|t| {
                t.type_name() == first["type"]
                    && Some(t.target().as_str()) == first["target"].as_str()
            });
            match position {
                Some(task) => {
                    if first.get("startTime").is_none() {
                        first["startTime"] = time(now);
                    }
                    run = Some(*task);
                }
                None => {
                    first["message"] = json!("this binary does not know the task");
                }
            }
            break;
        }
        status.insert("tasks".into(), Value::Array(tasks));
    }

    // Does every live instance report the value of the state?
    let state = status["state"].as_str().unwrap_or_default().to_owned();
    let want = expected(&state);
    let uses = list(&status, "uses");
    let disagreeing: Vec<&Value> = uses.iter().filter(|u| u["value"] != want).collect();
    let (agreed, reason, message) = if disagreeing.is_empty() {
        (
            true,
            "AllInstancesAgree",
            format!("{} live instance(s) report {want}", uses.len()),
        )
    } else {
        (
            false,
            "InstancesDisagree",
            format!(
                "expected {want}; reporting otherwise: {}",
                describe(&disagreeing)
            ),
        )
    };
    set_condition(&mut status, AGREED, agreed, reason, message, now);
    upgrade_safe(&mut status, known, versions, now);
    drop_empty_lists(&mut status);

    Plan {
        status: Value::Object(status),
        transitions,
        run,
    }
}

/// What the acting instance owes the Feature `object` at `now`, whatever its configuration
/// or version: a write it makes at its next sync, which an instance standing by can expect to
/// see (see [`crate::controller`]): `None` when nothing is owed. Only what the object itself
/// says counts (a dynamic feature's `spec.desired`, the stored tasks, the uses of instances
/// that are gone), so that instances of different versions or flags never judge each other
/// by their own.
pub fn owed(
    object: &Value,
    live: &BTreeMap<String, Instance>,
    now: Timestamp,
    wait: Duration,
) -> Option<String> {
    let status = object.get("status").and_then(Value::as_object)?;
    let state = status.get("state").and_then(Value::as_str).unwrap_or("");
    let dynamic = status.get("dynamic").and_then(Value::as_bool) == Some(true);
    if let Some(desired) = object.pointer("/spec/desired").and_then(Value::as_str)
        && dynamic
        && !state.is_empty()
        && expected(state) != desired
    {
        return Some(format!(
            "spec.desired is {desired} and the state {state}: no transition started"
        ));
    }
    let gone: Vec<&Value> = list(status, "uses")
        .iter()
        .filter(|u| u["instance"].as_str().is_none_or(|i| !live.contains_key(i)))
        .collect();
    if !gone.is_empty() {
        return Some(format!(
            "the uses of instances that are gone are kept: {}",
            describe(&gone)
        ));
    }
    if !state.starts_with("Turning") {
        return None;
    }
    let Some(first) = list(status, "tasks").first() else {
        return Some(format!("{state} with no task left, not completed"));
    };
    let task = first["type"].as_str().unwrap_or_default();
    if task != WAIT_FOR_USES {
        return Some(format!("{state}: task {task} is not run"));
    }
    let Some(started) = first.get("startTime").and_then(parse_time) else {
        return Some(format!("{state}: task {WAIT_FOR_USES} is not started"));
    };
    let old = if state == "TurningOff" { "On" } else { "Off" };
    let waited = now.duration_since(started);
    let done = waited >= SignedDuration::try_from(wait).unwrap_or(SignedDuration::MAX)
        && !list(status, "uses").iter().any(|u| u["value"] == old);
    done.then(|| format!("{state}: task {WAIT_FOR_USES} is done, not completed"))
}

/// Sets [`UPGRADE_SAFE`] in `status` (a Feature's status) from its state: called again once a
/// task completed the transition, so the condition written with the state agrees with it.
pub fn refresh_upgrade_safe(
    status: &mut Value,
    known: &Known,
    versions: &Versions,
    now: Timestamp,
) {
    if let Some(status) = status.as_object_mut() {
        upgrade_safe(status, known, versions, now);
    }
}

/// Sets [`UPGRADE_SAFE`] for a feature that does not exist at the emulated version (the
/// cluster moved below its first version: a downgrade), and keeps it current when it exists
/// again; a Feature that never saw such a move has no such condition.
fn upgrade_safe(
    status: &mut Map<String, Value>,
    known: &Known,
    versions: &Versions,
    now: Timestamp,
) {
    let at = &versions.emulated;
    let (safe, reason, message) = if known.exists {
        if !list(status, "conditions")
            .iter()
            .any(|c| c["type"] == UPGRADE_SAFE)
        {
            return;
        }
        (
            true,
            "PresentAtEmulatedVersion",
            format!("{} exists at emulated version {at}", known.name),
        )
    } else if status.get("state").and_then(Value::as_str) == Some("Off") {
        (
            true,
            "AbsentAtEmulatedVersion",
            format!(
                "{} does not exist at emulated version {at}; it is off and its turn-off tasks ran",
                known.name
            ),
        )
    } else {
        (
            false,
            "AbsentAtEmulatedVersion",
            format!(
                "{} does not exist at emulated version {at}: turning it off and running its \
                 turn-off tasks to remove what it stored",
                known.name
            ),
        )
    };
    set_condition(status, UPGRADE_SAFE, safe, reason, message, now);
}

/// Leaves out empty lists, as the server stores them (an absent list is an empty one), so that
/// an unchanged status compares equal to the stored one.
fn drop_empty_lists(status: &mut Map<String, Value>) {
    status.retain(|_, v| !v.as_array().is_some_and(Vec::is_empty));
}

/// Records that the first task of `status` succeeded with `message`: it is removed, and the
/// transition completes when it was the last. Returns the state entered, if any.
pub fn task_done(status: &mut Value, message: &str) -> Option<&'static str> {
    let tasks = status.get_mut("tasks").and_then(Value::as_array_mut)?;
    if tasks.is_empty() {
        return None;
    }
    tracing::debug!(task = %tasks[0]["type"], message, "task done");
    tasks.remove(0);
    if !tasks.is_empty() {
        return None;
    }
    if let Some(status) = status.as_object_mut() {
        status.remove("tasks");
    }
    let done = match status["state"].as_str() {
        Some("TurningOff") => "Off",
        Some("TurningOn") => "On",
        _ => return None,
    };
    status["state"] = json!(done);
    Some(done)
}

/// Records that the first task of `status` ran and has more to wait for, as `message`.
pub fn task_pending(status: &mut Value, message: &str) {
    if let Some(first) = status
        .get_mut("tasks")
        .and_then(Value::as_array_mut)
        .and_then(|t| t.first_mut())
    {
        let attempts = first["attempts"].as_i64().unwrap_or(0) + 1;
        first["attempts"] = json!(attempts);
        first["message"] = json!(message);
        if let Some(task) = first.as_object_mut() {
            task.remove("lastError");
        }
    }
}

/// Records that the first task of `status` failed with `error`.
pub fn task_failed(status: &mut Value, error: &str) {
    if let Some(first) = status
        .get_mut("tasks")
        .and_then(Value::as_array_mut)
        .and_then(|t| t.first_mut())
    {
        let attempts = first["attempts"].as_i64().unwrap_or(0) + 1;
        first["attempts"] = json!(attempts);
        first["lastError"] = json!(error);
    }
}

#[cfg(test)]
mod tests;
