//! core/v1 `Node` (cluster-scoped): what a kubelet registers and keeps reporting on.
//!
//! - strategy: a create keeps the status the kubelet registers with; a spec write keeps the
//!   stored status, a `status` write keeps everything else;
//! - validation: the name, `spec.podCIDR(s)` (CIDRs), `spec.taints` (qualified keys, one of
//!   the three effects, no key and effect twice), `spec.providerID` not changed once set;
//! - field selectors: `spec.unschedulable` besides the name;
//! - `kubectl get nodes`: `NAME STATUS ROLES AGE VERSION` and, wide, `INTERNAL-IP
//!   EXTERNAL-IP OS-IMAGE KERNEL-VERSION CONTAINER-RUNTIME`.

use std::collections::BTreeMap;

use genplane_api::catalog::{self, Context, Hooks, ResourceInfo, Subresource, SubresourceRules};
use genplane_api::schema::{Extensions, keyed_list};
use genplane_api::table::{self, ColumnDefinition};
use genplane_api::util;
use genplane_apimachinery::codec::decode::Decoded;
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use genplane_apimachinery::validation::{is_qualified_name, name_is_dns_subdomain};
use k8s_openapi::api::core::v1::Node;
use serde_json::{Value, json};

use super::{items, meta_errors, meta_update_errors, shape, status_write, str_at};

/// The effects a taint may have.
pub const TAINT_EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];

fn decode(object: &Value) -> Result<Decoded, ApiError> {
    shape::decode::<Node>(object, "Node", "v1")
}

fn validate_spec(object: &Value) -> ErrorList {
    let mut errors = ErrorList::new();
    let spec = Path::new("spec");
    let mut cidrs: Vec<(Path, &str)> = Vec::new();
    if let Some(cidr) = object.pointer("/spec/podCIDR").and_then(Value::as_str) {
        cidrs.push((spec.child("podCIDR"), cidr));
    }
    for (index, cidr) in items(object, "/spec/podCIDRs").iter().enumerate() {
        cidrs.push((
            spec.child("podCIDRs").index(index),
            cidr.as_str().unwrap_or(""),
        ));
    }
    for (path, cidr) in cidrs {
        if crate::net::parse_cidr(cidr).is_none() {
            errors.push(Error::invalid(
                &path,
                cidr,
                "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
            ));
        }
    }
    let mut seen = Vec::new();
    for (index, taint) in items(object, "/spec/taints").iter().enumerate() {
        let path = spec.child("taints").index(index);
        let key = str_at(taint, "/key");
        for message in is_qualified_name(key) {
            errors.push(Error::invalid(&path.child("key"), key, message));
        }
        let effect = str_at(taint, "/effect");
        if effect.is_empty() {
            errors.push(Error::required(&path.child("effect"), ""));
        } else if !TAINT_EFFECTS.contains(&effect) {
            errors.push(Error::not_supported(
                &path.child("effect"),
                effect,
                TAINT_EFFECTS,
            ));
        }
        if seen.contains(&(key, effect)) {
            errors.push(Error::duplicate(
                &path,
                "taints must be unique by key and effect pair",
            ));
        }
        seen.push((key, effect));
    }
    errors
}

fn validate(object: &Value) -> Result<ErrorList, ApiError> {
    let mut errors = meta_errors(object, false, name_is_dns_subdomain)?;
    errors.extend(validate_spec(object));
    Ok(errors)
}

fn validate_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let mut errors = meta_update_errors(new, old)?;
    errors.extend(validate_spec(new));
    let (new_id, old_id) = (
        str_at(new, "/spec/providerID"),
        str_at(old, "/spec/providerID"),
    );
    if !old_id.is_empty() && new_id != old_id {
        errors.push(Error::forbidden(
            &Path::new("spec").child("providerID"),
            "node updates may not change providerID except from \"\" to valid",
        ));
    }
    for (field, new, old) in [
        (
            "podCIDR",
            new.pointer("/spec/podCIDR"),
            old.pointer("/spec/podCIDR"),
        ),
        (
            "podCIDRs",
            new.pointer("/spec/podCIDRs"),
            old.pointer("/spec/podCIDRs"),
        ),
    ] {
        if old.is_some() && new != old {
            errors.push(Error::forbidden(
                &Path::new("spec").child(field),
                "node updates may not change podCIDR except from \"\" to valid",
            ));
        }
    }
    Ok(errors)
}

fn validate_status_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    meta_update_errors(new, old)
}

fn prepare_for_update(new: &mut Value, old: &Value, _: &Context<'_>) {
    util::keep_field(new, old, "status");
}

fn prepare_for_status_update(new: &mut Value, old: &Value, _: &Context<'_>) {
    status_write(new, old);
}

const FIELD_SELECTORS: &[&str] = &["metadata.name", "spec.unschedulable"];

fn field_values(object: &Value) -> BTreeMap<&'static str, String> {
    let mut fields = util::meta_fields(object, false);
    let unschedulable = object
        .pointer("/spec/unschedulable")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    fields.insert("spec.unschedulable", unschedulable.to_string());
    fields
}

const COLUMNS: &[ColumnDefinition] = &[
    table::NAME,
    table::column("Status", "The status of the node", 0),
    table::column("Roles", "The roles of the node", 0),
    table::AGE,
    table::column("Version", "Kubelet Version reported by the node.", 0),
    table::column("Internal-IP", "List of internal IPs for the node.", 1),
    table::column("External-IP", "List of external IPs for this node.", 1),
    table::column(
        "OS-Image",
        "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
        1,
    ),
    table::column(
        "Kernel-Version",
        "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
        1,
    ),
    table::column(
        "Container-Runtime",
        "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
        1,
    ),
];

/// `Ready`, `NotReady` or `Unknown`, then `SchedulingDisabled` when cordoned, as kubectl
/// prints a node's status.
pub fn status_text(node: &Value) -> String {
    let ready = items(node, "/status/conditions")
        .iter()
        .find(|c| str_at(c, "/type") == "Ready")
        .map_or("Unknown", |c| match str_at(c, "/status") {
            "True" => "Ready",
            "False" => "NotReady",
            _ => "Unknown",
        });
    let mut text = ready.to_owned();
    if node
        .pointer("/spec/unschedulable")
        .and_then(Value::as_bool)
        .unwrap_or(false)
    {
        text.push_str(",SchedulingDisabled");
    }
    text
}

fn addresses(node: &Value, kind: &str) -> String {
    let found: Vec<&str> = items(node, "/status/addresses")
        .iter()
        .filter(|a| str_at(a, "/type") == kind)
        .map(|a| str_at(a, "/address"))
        .collect();
    if found.is_empty() {
        "<none>".to_owned()
    } else {
        found.join(",")
    }
}

fn roles(node: &Value) -> String {
    let mut roles: Vec<&str> = node
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .keys()
                .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/"))
                .filter(|r| !r.is_empty())
                .collect()
        })
        .unwrap_or_default();
    roles.sort_unstable();
    if roles.is_empty() {
        "<none>".to_owned()
    } else {
        roles.join(",")
    }
}

fn row(node: &Value, now: i64) -> Vec<Value> {
    let info = |field: &str| {
        let value = str_at(node, &format!("/status/nodeInfo/{field}"));
        if value.is_empty() { "<unknown>" } else { value }.to_owned()
    };
    vec![
        util::name(node),
        json!(status_text(node)),
        json!(roles(node)),
        util::age(node, now),
        json!(str_at(node, "/status/nodeInfo/kubeletVersion")),
        json!(addresses(node, "InternalIP")),
        json!(addresses(node, "ExternalIP")),
        json!(info("osImage")),
        json!(info("kernelVersion")),
        json!(info("containerRuntimeVersion")),
    ]
}

const NODE_SPEC: &str = "io.k8s.api.core.v1.NodeSpec";
const NODE_STATUS: &str = "io.k8s.api.core.v1.NodeStatus";

static EXTENSIONS: &[Extensions] = &[
    keyed_list(NODE_STATUS, "conditions", &["type"]),
    keyed_list(NODE_STATUS, "addresses", &["type"]),
    keyed_list(NODE_SPEC, "taints", &["key"]),
];

/// `nodes` and `nodes/status`.
pub static INFO: ResourceInfo = ResourceInfo {
    group: "",
    version: "v1",
    kind: "Node",
    list_kind: "NodeList",
    resource: "nodes",
    singular: "node",
    short_names: &["no"],
    namespaced: false,
    create_on_update: false,
    verbs: catalog::ALL_VERBS,
    subresources: &[Subresource {
        name: "status",
        kind: "Node",
        verbs: catalog::STATUS_VERBS,
        rules: Some(SubresourceRules {
            prepare_for_update: prepare_for_status_update,
            validate_update: validate_status_update,
        }),
        body: None,
    }],
    categories: &[],
    storage_prefix: "minions",
    storage_api_version: "v1",
    schema: &super::proto::NODE,
    protobuf: true,
    feature_gate: None,
    extensions: EXTENSIONS,
    openapi_schema: genplane_api::schema::schema_of::<Node>,
    hooks: Hooks {
        decode,
        default: catalog::no_default,
        prepare_for_create: catalog::no_prepare,
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
        grace_period: catalog::not_graceful,
    },
};
