//! core/v1 `Pod`: what the scheduler binds and a kubelet runs.
//!
//! - defaults: upstream's for the fields a pod of the tests leaves out (restart and DNS
//!   policies, scheduler, grace period, each container's termination message and pull policy,
//!   each port's protocol);
//! - strategy: a create starts `Pending` (the status is the kubelet's), a spec write keeps the
//!   status, a `status` write keeps everything else; `spec.nodeName` is set only through
//!   `pods/binding` ([`super::binding`]);
//! - graceful deletion: a delete of a pod on a node marks it (`deletionTimestamp`,
//!   `deletionGracePeriodSeconds` from the request or `spec.terminationGracePeriodSeconds`)
//!   and its kubelet stops it and deletes it for good; a pod on no node, or finished, goes at
//!   once;
//! - validation: containers (names, images, ports), policies, and the spec's immutability on
//!   update (images, `activeDeadlineSeconds` and tolerations may change);
//! - field selectors: `spec.nodeName`, `status.phase`, `status.podIP` and upstream's others;
//! - `kubectl get pods`: `NAME READY STATUS RESTARTS AGE` and, wide, `IP NODE NOMINATED NODE
//!   READINESS GATES`.

use std::collections::BTreeMap;

use genplane_api::catalog::{self, Context, Hooks, ResourceInfo, Subresource, SubresourceRules};
use genplane_api::schema::{Extensions, keyed_list};
use genplane_api::table::{self, ColumnDefinition};
use genplane_api::util;
use genplane_apimachinery::codec::decode::Decoded;
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use genplane_apimachinery::validation::{is_dns1123_label, name_is_dns_subdomain};
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Map, Value, json};

use super::{items, meta_errors, meta_update_errors, set_generation, shape, status_write, str_at};

/// The grace period of a pod that names none (upstream's `DefaultTerminationGracePeriodSeconds`).
pub const DEFAULT_GRACE_SECONDS: i64 = 30;
/// A pod's restart policies.
pub const RESTART_POLICIES: &[&str] = &["Always", "OnFailure", "Never"];
/// A pod's DNS policies.
pub const DNS_POLICIES: &[&str] = &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"];
/// The protocols of a port.
pub const PROTOCOLS: &[&str] = &["TCP", "UDP", "SCTP"];
/// A pod's phases.
pub const PHASES: &[&str] = &["Pending", "Running", "Succeeded", "Failed", "Unknown"];

fn decode(object: &Value) -> Result<Decoded, ApiError> {
    shape::decode::<Pod>(object, "Pod", "v1")
}

fn set_default(map: &mut Map<String, Value>, key: &str, value: Value) {
    if !map.contains_key(key) {
        map.insert(key.to_owned(), value);
    }
}

/// Upstream's `SetDefaults_Pod`, `SetDefaults_PodSpec` and `SetDefaults_Container` for the
/// fields the tests' pods use, on a pod or a pod template (anything with a pod `spec`).
pub(crate) fn default(object: &mut Value) {
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    set_default(spec, "restartPolicy", json!("Always"));
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    set_default(
        spec,
        "terminationGracePeriodSeconds",
        json!(DEFAULT_GRACE_SECONDS),
    );
    set_default(spec, "securityContext", json!({}));
    set_default(spec, "enableServiceLinks", json!(true));
    for list in ["initContainers", "containers"] {
        let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for container in containers.iter_mut().filter_map(Value::as_object_mut) {
            set_default(
                container,
                "terminationMessagePath",
                json!("/dev/termination-log"),
            );
            set_default(container, "terminationMessagePolicy", json!("File"));
            set_default(container, "resources", json!({}));
            let image = container.get("image").and_then(Value::as_str).unwrap_or("");
            let tag = image.rsplit('/').next().unwrap_or("");
            let pull = if !image.contains('@') && (!tag.contains(':') || tag.ends_with(":latest")) {
                "Always"
            } else {
                "IfNotPresent"
            };
            set_default(container, "imagePullPolicy", json!(pull));
            if let Some(ports) = container.get_mut("ports").and_then(Value::as_array_mut) {
                for port in ports.iter_mut().filter_map(Value::as_object_mut) {
                    set_default(port, "protocol", json!("TCP"));
                }
            }
        }
    }
}

fn prepare_for_create(object: &mut Value, _: &Context<'_>) {
    if let Some(fields) = object.as_object_mut() {
        fields.insert(
            "status".into(),
            json!({"phase": "Pending", "qosClass": "BestEffort"}),
        );
    }
    set_generation(object, 1);
}

fn prepare_for_update(new: &mut Value, old: &Value, _: &Context<'_>) {
    util::keep_field(new, old, "status");
    super::next_generation(new, old);
}

fn prepare_for_status_update(new: &mut Value, old: &Value, _: &Context<'_>) {
    status_write(new, old);
}

fn validate_containers(object: &Value, root: &Path, errors: &mut ErrorList) {
    let spec = root.child("spec");
    let containers = items(object, "/spec/containers");
    if containers.is_empty() {
        errors.push(Error::required(&spec.child("containers"), ""));
    }
    let mut names = Vec::new();
    for list in ["initContainers", "containers"] {
        for (index, container) in items(object, &format!("/spec/{list}")).iter().enumerate() {
            let path = spec.child(list).index(index);
            let name = str_at(container, "/name");
            if name.is_empty() {
                errors.push(Error::required(&path.child("name"), ""));
            } else {
                for message in is_dns1123_label(name) {
                    errors.push(Error::invalid(&path.child("name"), name, message));
                }
                if names.contains(&name) {
                    errors.push(Error::duplicate(&path.child("name"), name));
                }
                names.push(name);
            }
            if str_at(container, "/image").trim().is_empty() {
                errors.push(Error::required(&path.child("image"), ""));
            }
            for (p, port) in items(container, "/ports").iter().enumerate() {
                let path = path.child("ports").index(p);
                let number = port
                    .pointer("/containerPort")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                if !(1..=65535).contains(&number) {
                    errors.push(Error::invalid(
                        &path.child("containerPort"),
                        number,
                        "must be between 1 and 65535, inclusive",
                    ));
                }
                let protocol = str_at(port, "/protocol");
                if !PROTOCOLS.contains(&protocol) {
                    errors.push(Error::not_supported(
                        &path.child("protocol"),
                        protocol,
                        PROTOCOLS,
                    ));
                }
            }
        }
    }
}

/// The problems of the pod `spec` of `object` (a pod, or a pod template at `root`).
pub(crate) fn validate_spec(object: &Value, root: &Path) -> ErrorList {
    let mut errors = ErrorList::new();
    validate_containers(object, root, &mut errors);
    let spec = root.child("spec");
    for (field, supported) in [
        ("restartPolicy", RESTART_POLICIES),
        ("dnsPolicy", DNS_POLICIES),
    ] {
        let value = str_at(object, &format!("/spec/{field}"));
        if !supported.contains(&value) {
            errors.push(Error::not_supported(&spec.child(field), value, supported));
        }
    }
    if let Some(grace) = object
        .pointer("/spec/terminationGracePeriodSeconds")
        .and_then(Value::as_i64)
        .filter(|g| *g < 0)
    {
        errors.push(Error::invalid(
            &spec.child("terminationGracePeriodSeconds"),
            grace,
            "must be greater than or equal to 0",
        ));
    }
    errors
}

fn validate(object: &Value) -> Result<ErrorList, ApiError> {
    let mut errors = meta_errors(object, true, name_is_dns_subdomain)?;
    errors.extend(validate_spec(object, &Path::default()));
    Ok(errors)
}

/// The spec with what an update may change taken out.
fn fixed_part(spec: Option<&Value>) -> Value {
    let mut spec = spec.cloned().unwrap_or(Value::Null);
    if let Some(fields) = spec.as_object_mut() {
        fields.remove("activeDeadlineSeconds");
        fields.remove("tolerations");
        for list in ["initContainers", "containers"] {
            if let Some(containers) = fields.get_mut(list).and_then(Value::as_array_mut) {
                for container in containers.iter_mut().filter_map(Value::as_object_mut) {
                    container.remove("image");
                }
            }
        }
    }
    spec
}

fn validate_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let mut errors = meta_update_errors(new, old)?;
    errors.extend(validate_spec(new, &Path::default()));
    if fixed_part(new.get("spec")) != fixed_part(old.get("spec")) {
        errors.push(Error::forbidden(
            &Path::new("spec"),
            "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
        ));
    }
    Ok(errors)
}

fn validate_status_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let mut errors = meta_update_errors(new, old)?;
    let phase = str_at(new, "/status/phase");
    if !phase.is_empty() && !PHASES.contains(&phase) {
        errors.push(Error::not_supported(
            &Path::new("status").child("phase"),
            phase,
            PHASES,
        ));
    }
    Ok(errors)
}

/// Upstream's `CheckGracefulDelete`: the request's period, else the pod's; 0 for a pod on no
/// node or one that has finished.
fn grace_period(pod: &Value, requested: Option<i64>) -> Option<i64> {
    if str_at(pod, "/spec/nodeName").is_empty()
        || matches!(str_at(pod, "/status/phase"), "Succeeded" | "Failed")
    {
        return Some(0);
    }
    let grace = requested.unwrap_or_else(|| {
        pod.pointer("/spec/terminationGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(DEFAULT_GRACE_SECONDS)
    });
    Some(grace.max(0))
}

const FIELD_SELECTORS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
];

fn field_values(pod: &Value) -> BTreeMap<&'static str, String> {
    let mut fields = util::meta_fields(pod, true);
    for (label, pointer) in [
        ("spec.nodeName", "/spec/nodeName"),
        ("spec.restartPolicy", "/spec/restartPolicy"),
        ("spec.schedulerName", "/spec/schedulerName"),
        ("spec.serviceAccountName", "/spec/serviceAccountName"),
        ("status.phase", "/status/phase"),
        ("status.podIP", "/status/podIP"),
        ("status.nominatedNodeName", "/status/nominatedNodeName"),
    ] {
        fields.insert(label, str_at(pod, pointer).to_owned());
    }
    let host_network = pod
        .pointer("/spec/hostNetwork")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    fields.insert("spec.hostNetwork", host_network.to_string());
    fields
}

const COLUMNS: &[ColumnDefinition] = &[
    table::NAME,
    table::column(
        "Ready",
        "The aggregate readiness state of this pod for accepting traffic.",
        0,
    ),
    table::column(
        "Status",
        "The aggregate status of the containers in this pod.",
        0,
    ),
    table::column(
        "Restarts",
        "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
        0,
    ),
    table::AGE,
    table::column("IP", "The IP address assigned to the pod.", 1),
    table::column("Node", "The name of the node the pod is assigned to.", 1),
    table::column(
        "Nominated Node",
        "The name of the node nominated for the pod to run on once preemption completes.",
        1,
    ),
    table::column("Readiness Gates", "The readiness gates of the pod.", 1),
];

/// The status kubectl prints for a pod: its phase (or reason), a container's waiting or
/// terminated reason, `Terminating` while it is being deleted.
pub fn status_text(pod: &Value) -> String {
    let mut reason = match str_at(pod, "/status/reason") {
        "" => str_at(pod, "/status/phase").to_owned(),
        reason => reason.to_owned(),
    };
    for container in items(pod, "/status/containerStatuses") {
        let waiting = str_at(container, "/state/waiting/reason");
        let terminated = str_at(container, "/state/terminated/reason");
        if !waiting.is_empty() {
            reason = waiting.to_owned();
        } else if !terminated.is_empty() {
            reason = terminated.to_owned();
        }
    }
    if !str_at(pod, "/metadata/deletionTimestamp").is_empty() {
        reason = "Terminating".to_owned();
    }
    reason
}

fn or_none(value: &str) -> String {
    if value.is_empty() { "<none>" } else { value }.to_owned()
}

fn row(pod: &Value, now: i64) -> Vec<Value> {
    let statuses = items(pod, "/status/containerStatuses");
    let ready = statuses
        .iter()
        .filter(|s| s.get("ready").and_then(Value::as_bool).unwrap_or(false))
        .count();
    let restarts: i64 = statuses
        .iter()
        .filter_map(|s| s.get("restartCount").and_then(Value::as_i64))
        .sum();
    vec![
        util::name(pod),
        json!(format!("{ready}/{}", items(pod, "/spec/containers").len())),
        json!(status_text(pod)),
        json!(restarts.to_string()),
        util::age(pod, now),
        json!(or_none(str_at(pod, "/status/podIP"))),
        json!(or_none(str_at(pod, "/spec/nodeName"))),
        json!(or_none(str_at(pod, "/status/nominatedNodeName"))),
        json!("<none>"),
    ]
}

const POD_SPEC: &str = "io.k8s.api.core.v1.PodSpec";
const POD_STATUS: &str = "io.k8s.api.core.v1.PodStatus";
const CONTAINER: &str = "io.k8s.api.core.v1.Container";

static EXTENSIONS: &[Extensions] = &[
    keyed_list(POD_SPEC, "containers", &["name"]),
    keyed_list(POD_SPEC, "initContainers", &["name"]),
    keyed_list(CONTAINER, "env", &["name"]),
    keyed_list(CONTAINER, "ports", &["containerPort"]),
    keyed_list(POD_STATUS, "conditions", &["type"]),
];

/// `pods`, `pods/status` and `pods/binding`.
pub static INFO: ResourceInfo = ResourceInfo {
    group: "",
    version: "v1",
    kind: "Pod",
    list_kind: "PodList",
    resource: "pods",
    singular: "pod",
    short_names: &["po"],
    namespaced: true,
    create_on_update: false,
    verbs: catalog::ALL_VERBS,
    subresources: &[
        Subresource {
            name: "status",
            kind: "Pod",
            verbs: catalog::STATUS_VERBS,
            rules: Some(SubresourceRules {
                prepare_for_update: prepare_for_status_update,
                validate_update: validate_status_update,
            }),
            body: None,
        },
        Subresource {
            name: "binding",
            kind: "Binding",
            verbs: &["create"],
            rules: None,
            body: Some(&super::binding::INFO),
        },
    ],
    categories: &["all"],
    storage_prefix: "pods",
    storage_api_version: "v1",
    schema: &super::proto::POD,
    protobuf: true,
    feature_gate: None,
    extensions: EXTENSIONS,
    openapi_schema: genplane_api::schema::schema_of::<Pod>,
    hooks: Hooks {
        decode,
        default,
        prepare_for_create,
        prepare_for_update,
        validate,
        validate_update,
        to_storage: None,
        from_storage: None,
        field_selectors: FIELD_SELECTORS,
        field_values,
        columns: COLUMNS,
        row,
        pending_finalization: catalog::nothing_pending,
        mark_deleting: catalog::no_default,
        grace_period,
    },
};
