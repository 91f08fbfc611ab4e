//! Pure helpers for the status the CRD controllers write (upstream's naming controller,
//! establishing controller and finalizer, Kubernetes 1.33).
//!
//! - [`accepted_names`]: the names a CRD may serve, given every CRD's accepted names, and its
//!   `NamesAccepted` condition (`NoConflicts`, or `PluralConflict`, `SingularConflict`,
//!   `ShortNamesConflict`, `KindConflict`, `ListKindConflict` with `"<name>" is already in
//!   use`);
//! - [`established_after_naming`]: the `Established` condition the naming controller writes
//!   (`NotAccepted` until the names are accepted, then `Installing`), and [`established`]: the
//!   one the establishing controller writes once the names are accepted
//!   (`InitialNamesAccepted`); a CRD stays established once it was;
//! - the `Terminating` conditions of a deletion ([`terminating_pending`],
//!   [`terminating_in_progress`], [`terminating_failed`], [`terminating_check_failed`],
//!   [`terminating_completed`]);
//! - [`set_condition`]: writes a condition, keeping `lastTransitionTime` when the status does
//!   not change (upstream's `SetCRDCondition`); [`find_condition`], [`is_condition_true`] and
//!   [`condition_equivalent`].
//!
//! Conditions are JSON objects of `type`, `status`, `lastTransitionTime`, `reason` and
//! `message`. No clock is read here: the caller passes `now` as an RFC 3339 string.

use std::collections::{BTreeSet, HashMap, HashSet};

use serde_json::{Map, Value, json};

/// The condition type: the CRD is served.
pub const ESTABLISHED: &str = "Established";
/// The condition type: the names do not conflict with another CRD's.
pub const NAMES_ACCEPTED: &str = "NamesAccepted";
/// The condition type: the CRD is being deleted.
pub const TERMINATING: &str = "Terminating";
/// The condition type of CRDs in protected groups (`*.k8s.io`, `*.kubernetes.io`).
pub const API_APPROVAL_POLICY_CONFORMANT: &str = "KubernetesAPIApprovalPolicyConformant";

pub use crate::util::{condition_equivalent, set_condition};

fn condition(kind: &str, status: &str, reason: &str, message: &str) -> Value {
    json!({"type": kind, "status": status, "reason": reason, "message": message})
}

fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

fn strings(value: &Value, key: &str) -> Vec<String> {
    value
        .get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// `"<name>" is already in use` when `requested` is neither the accepted name nor free.
fn equal_to_accepted_or_fresh(
    requested: &str,
    accepted: &str,
    used: &BTreeSet<String>,
) -> Result<(), String> {
    if requested == accepted || !used.contains(requested) {
        return Ok(());
    }
    Err(format!(
        "{} is already in use",
        genplane_apimachinery::gofmt::Quoted(requested)
    ))
}

/// The names every CRD of each group has accepted, read once: a pass over many CRDs asks
/// [`accepted_names_among`] for each of them instead of reading all the others again for
/// each ([`accepted_names`] does that for one).
#[derive(Debug, Default)]
pub struct NamesInUse {
    /// By `spec.group`.
    groups: HashMap<String, GroupNames>,
    /// The `metadata.name` of every CRD read.
    crds: HashSet<String>,
}

/// The names the CRDs of one group have accepted.
#[derive(Clone, Debug, Default)]
struct GroupNames {
    /// Plurals, singulars and short names.
    resources: BTreeSet<String>,
    /// Kinds and list kinds.
    kinds: BTreeSet<String>,
}

impl GroupNames {
    fn add(&mut self, crd: &Value) {
        let names = &crd["status"]["acceptedNames"];
        self.resources.insert(text(names, "plural").to_owned());
        self.resources.insert(text(names, "singular").to_owned());
        self.resources.extend(strings(names, "shortNames"));
        self.kinds.insert(text(names, "kind").to_owned());
        self.kinds.insert(text(names, "listKind").to_owned());
    }
}

impl NamesInUse {
    /// The names `crds` have accepted.
    pub fn of<'a>(crds: impl IntoIterator<Item = &'a Value>) -> Self {
        let mut used = Self::default();
        for crd in crds {
            used.groups
                .entry(text(&crd["spec"], "group").to_owned())
                .or_default()
                .add(crd);
            used.crds.insert(text(&crd["metadata"], "name").to_owned());
        }
        used
    }
}

/// The names a CRD may serve and its `NamesAccepted` condition (without
/// `lastTransitionTime`), as upstream's naming controller computes them.
///
/// `others` are the CRDs the controller knows (this one may be among them; its own accepted
/// names always count, as upstream's lister includes it). Only CRDs of the same
/// `spec.group` matter. A name that conflicts keeps its previously accepted value in the
/// answer, and the condition is `False` with the reason of the last conflict found.
pub fn accepted_names(crd: &Value, others: &[Value]) -> (Value, Value) {
    accepted_names_among(crd, &NamesInUse::of(others))
}

/// [`accepted_names`] with the names the other CRDs accepted read beforehand.
pub fn accepted_names_among(crd: &Value, used: &NamesInUse) -> (Value, Value) {
    let group = text(&crd["spec"], "group");
    let name = text(&crd["metadata"], "name");
    let known = used.groups.get(group);
    // Its own accepted names count even when it was not among those read.
    let with_own;
    let in_use = match known {
        Some(names) if !name.is_empty() && used.crds.contains(name) => names,
        _ => {
            let mut names = known.cloned().unwrap_or_default();
            names.add(crd);
            with_own = names;
            &with_own
        }
    };
    let (resources, kinds) = (&in_use.resources, &in_use.kinds);

    let requested = &crd["spec"]["names"];
    let accepted = &crd["status"]["acceptedNames"];
    let mut new_names: Map<String, Value> = accepted.as_object().cloned().unwrap_or_default();
    let mut failure: Option<(&str, String)> = None;
    let mut record = |result: Result<(), String>, reason: &'static str| {
        if let Err(message) = result {
            failure = Some((reason, message));
        }
    };
    record(
        accept("plural", requested, accepted, resources, &mut new_names),
        "PluralConflict",
    );
    record(
        accept("singular", requested, accepted, resources, &mut new_names),
        "SingularConflict",
    );
    record(
        accept_short_names(requested, accepted, resources, &mut new_names),
        "ShortNamesConflict",
    );
    record(
        accept("kind", requested, accepted, kinds, &mut new_names),
        "KindConflict",
    );
    record(
        accept("listKind", requested, accepted, kinds, &mut new_names),
        "ListKindConflict",
    );
    match requested.get("categories") {
        Some(v) => new_names.insert("categories".into(), v.clone()),
        None => new_names.remove("categories"),
    };
    ensure_names_shape(&mut new_names);
    let condition = match failure {
        Some((reason, message)) => condition(NAMES_ACCEPTED, "False", reason, &message),
        None => condition(NAMES_ACCEPTED, "True", "NoConflicts", "no conflicts found"),
    };
    (Value::Object(new_names), condition)
}

/// Takes the requested `key` into `names` unless it conflicts.
fn accept(
    key: &str,
    requested: &Value,
    accepted: &Value,
    used: &BTreeSet<String>,
    names: &mut Map<String, Value>,
) -> Result<(), String> {
    equal_to_accepted_or_fresh(text(requested, key), text(accepted, key), used)?;
    match requested.get(key) {
        Some(v) => names.insert(key.to_owned(), v.clone()),
        None => names.remove(key),
    };
    Ok(())
}

/// Takes the requested short names unless one of the new ones is in use (one message, or
/// several as `[a, b]`, as Go's error aggregate prints them).
fn accept_short_names(
    requested: &Value,
    accepted: &Value,
    used: &BTreeSet<String>,
    names: &mut Map<String, Value>,
) -> Result<(), String> {
    let requested_short = strings(requested, "shortNames");
    let accepted_short = strings(accepted, "shortNames");
    if requested_short == accepted_short {
        return Ok(());
    }
    let mut messages: Vec<String> = Vec::new();
    for short in requested_short
        .iter()
        .filter(|s| !accepted_short.contains(s))
    {
        if let Err(message) = equal_to_accepted_or_fresh(short, "", used)
            && !messages.contains(&message)
        {
            messages.push(message);
        }
    }
    match messages.len() {
        0 => {
            match requested.get("shortNames") {
                Some(v) => names.insert("shortNames".into(), v.clone()),
                None => names.remove("shortNames"),
            };
            Ok(())
        }
        1 => Err(messages.remove(0)),
        _ => Err(format!("[{}]", messages.join(", "))),
    }
}

/// What the naming controller writes for `crd`: `None` when its accepted names and
/// `NamesAccepted` condition are already right, else the new `status.acceptedNames`, the
/// `NamesAccepted` condition and the `Established` condition (both without
/// `lastTransitionTime`: write them with [`set_condition`]). After a write, upstream requeues
/// the other CRDs of the group, whose names may have been freed. `used` holds the names the
/// CRDs the controller knows have accepted (see [`accepted_names`]).
pub fn naming_update(crd: &Value, used: &NamesInUse) -> Option<(Value, Value, Value)> {
    let (names, names_accepted) = accepted_names_among(crd, used);
    let current_names = &crd["status"]["acceptedNames"];
    let mut current = current_names.as_object().cloned().unwrap_or_default();
    ensure_names_shape(&mut current);
    if Value::Object(current) == names
        && condition_equivalent(Some(&names_accepted), find_condition(crd, NAMES_ACCEPTED))
    {
        return None;
    }
    let established = established_after_naming(crd, &names_accepted);
    Some((names, names_accepted, established))
}

/// Go always writes `plural` and `kind` of a CustomResourceDefinitionNames.
fn ensure_names_shape(names: &mut Map<String, Value>) {
    for key in ["plural", "kind"] {
        if !names.contains_key(key) {
            names.insert(key.to_owned(), Value::from(""));
        }
    }
    for key in ["singular", "listKind"] {
        if names.get(key).and_then(Value::as_str) == Some("") {
            names.remove(key);
        }
    }
}

/// The `Established` condition the naming controller writes along with `names_accepted`: the
/// CRD's current one if it is already established; `False`/`Installing` ("the initial names
/// have been accepted") once the names are accepted (the establishing controller then sets it
/// true); else `False`/`NotAccepted` ("not all names are accepted") or the current one.
pub fn established_after_naming(crd: &Value, names_accepted: &Value) -> Value {
    let current = find_condition(crd, ESTABLISHED).map(|c| {
        let mut c = c.clone();
        if let Some(map) = c.as_object_mut() {
            map.remove("lastTransitionTime");
        }
        c
    });
    let established = current.unwrap_or_else(|| {
        condition(
            ESTABLISHED,
            "False",
            "NotAccepted",
            "not all names are accepted",
        )
    });
    if text(&established, "status") != "True" && text(names_accepted, "status") == "True" {
        return condition(
            ESTABLISHED,
            "False",
            "Installing",
            "the initial names have been accepted",
        );
    }
    established
}

/// The `Established` condition the establishing controller writes: `True`,
/// `InitialNamesAccepted`. It writes it only when `NamesAccepted` is true and the CRD is not
/// established yet ([`should_establish`]).
pub fn established() -> Value {
    condition(
        ESTABLISHED,
        "True",
        "InitialNamesAccepted",
        "the initial names have been accepted",
    )
}

/// Whether the establishing controller must set [`established`]: names accepted, not yet
/// established.
pub fn should_establish(crd: &Value) -> bool {
    is_condition_true(crd, NAMES_ACCEPTED) && !is_condition_true(crd, ESTABLISHED)
}

/// `Terminating` on the first DELETE: `True`, `InstanceDeletionPending`.
pub fn terminating_pending() -> Value {
    condition(
        TERMINATING,
        "True",
        "InstanceDeletionPending",
        "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
    )
}

/// `Terminating` while the finalizer deletes the custom resources: `True`,
/// `InstanceDeletionInProgress`.
pub fn terminating_in_progress() -> Value {
    condition(
        TERMINATING,
        "True",
        "InstanceDeletionInProgress",
        "CustomResource deletion is in progress",
    )
}

/// `Terminating` when deleting the custom resources failed: `True`, `InstanceDeletionFailed`,
/// `could not <what>: <error>` (upstream: `could not list instances: ...`,
/// `could not issue all deletes: ...`).
pub fn terminating_failed(message: &str) -> Value {
    condition(TERMINATING, "True", "InstanceDeletionFailed", message)
}

/// `Terminating` when instances remain after the deletes: `True`, `InstanceDeletionCheck`,
/// `could not confirm zero CustomResources remaining: <error>`.
pub fn terminating_check_failed(error: &str) -> Value {
    condition(
        TERMINATING,
        "True",
        "InstanceDeletionCheck",
        &format!("could not confirm zero CustomResources remaining: {error}"),
    )
}

/// `Terminating` once every custom resource is gone: `False`, `InstanceDeletionCompleted`,
/// `removed all instances`; the finalizer is removed with it.
pub fn terminating_completed() -> Value {
    condition(
        TERMINATING,
        "False",
        "InstanceDeletionCompleted",
        "removed all instances",
    )
}

/// The `KubernetesAPIApprovalPolicyConformant` condition upstream's API approval controller
/// writes for a CRD of a protected group (`*.k8s.io`, `*.kubernetes.io`; `None` for others):
/// `True`/`ApprovedAnnotation` with a URL in `api-approved.kubernetes.io`, else `False` with
/// `MissingAnnotation`, `UnapprovedAnnotation` (a value starting with `unapproved`) or
/// `InvalidAnnotation`.
pub fn api_approval_condition(crd: &Value) -> Option<Value> {
    if !super::approval::is_protected_community_group(text(&crd["spec"], "group")) {
        return None;
    }
    let annotation = crd
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(super::API_APPROVED_ANNOTATION))
        .and_then(Value::as_str);
    let (state, reason) = super::approval::approval_of(annotation);
    use super::approval::Approval;
    let (status, why) = match state {
        Approval::Approved => ("True", "ApprovedAnnotation"),
        Approval::Missing => ("False", "MissingAnnotation"),
        Approval::Bypassed => ("False", "UnapprovedAnnotation"),
        Approval::Invalid => ("False", "InvalidAnnotation"),
    };
    Some(condition(
        API_APPROVAL_POLICY_CONFORMANT,
        status,
        why,
        &reason,
    ))
}

/// The condition of type `kind` in `crd.status.conditions`.
pub fn find_condition<'a>(crd: &'a Value, kind: &str) -> Option<&'a Value> {
    crd.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| text(c, "type") == kind)
}

/// Whether the condition `kind` is `True`.
pub fn is_condition_true(crd: &Value, kind: &str) -> bool {
    is_status_condition_true(&crd["status"], kind)
}

/// Whether the condition `kind` of a CRD's `status` (not the whole CRD) is `True`.
pub fn is_status_condition_true(status: &Value, kind: &str) -> bool {
    status
        .get("conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| text(c, "type") == kind && text(c, "status") == "True")
}

/// Removes the condition `kind`.
pub fn remove_condition(crd: &mut Value, kind: &str) {
    if let Some(list) = crd
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    {
        list.retain(|c| text(c, "type") != kind);
    }
}
