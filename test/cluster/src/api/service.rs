//! core/v1 `Service`: ClusterIP, NodePort, LoadBalancer and ExternalName services.
//!
//! - defaults (upstream's `SetDefaults_Service`): `type: ClusterIP`, `sessionAffinity:
//!   None` (a `ClientIP` affinity's timeout 10800 s), each port's `protocol: TCP` and
//!   `targetPort` (its `port`), `externalTrafficPolicy: Cluster` for NodePort and
//!   LoadBalancer, `internalTrafficPolicy: Cluster`, `allocateLoadBalancerNodePorts: true`,
//!   and IPv4 single-stack families;
//! - ClusterIPs and node ports come from [`super::allocator`] as the write is stored;
//! - strategy on update (upstream's `patchAllocatedValues` and `dropTypeDependentFields`):
//!   a write that leaves out the ClusterIP or a port's node port keeps the stored one (ports
//!   matched by name) while the type still needs it; a type change drops what the new type
//!   does not use (node ports, health-check node port, ClusterIP for ExternalName, the
//!   traffic policy) unless the write changed it itself, so that changing `type` alone works
//!   as with kube-apiserver;
//! - validation: upstream's rules for type, ports (numbers, protocols, names, node ports only
//!   where the type has them), ClusterIP (immutable once set), ExternalName, session
//!   affinity, traffic policies, health-check node port and source ranges, with upstream's
//!   field paths and words. Unlike upstream, external IPs may be loopback addresses: every
//!   address of this cluster is one;
//! - `kubectl get svc`: `NAME TYPE CLUSTER-IP EXTERNAL-IP PORT(S) AGE` and, wide, `SELECTOR`.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use genplane_api::catalog::{self, Context, Hooks, ResourceInfo, Subresource, SubresourceRules};
use genplane_api::schema::{Extensions, ListType, NONE};
use genplane_api::table::{self, ColumnDefinition};
use genplane_api::util;
use genplane_apimachinery::codec::decode::Decoded;
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use genplane_apimachinery::validation::{is_dns1035_label, is_dns1123_label, is_dns1123_subdomain};
use k8s_openapi::api::core::v1::Service;
use serde_json::{Map, Value, json};

use super::{items, meta_errors, meta_update_errors, shape, status_write, str_at};

/// The types of a Service.
pub const TYPES: &[&str] = &["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"];
/// Session affinities.
pub const AFFINITIES: &[&str] = &["ClientIP", "None"];
/// Traffic policies (external and internal).
pub const TRAFFIC_POLICIES: &[&str] = &["Cluster", "Local"];
/// The protocols of a port.
pub const PROTOCOLS: &[&str] = &["TCP", "UDP", "SCTP"];
/// The default timeout of `ClientIP` session affinity (three hours).
pub const AFFINITY_TIMEOUT_SECONDS: i64 = 10800;

fn decode(object: &Value) -> Result<Decoded, ApiError> {
    shape::decode::<Service>(object, "Service", "v1")
}

fn kind(service: &Value) -> &str {
    match str_at(service, "/spec/type") {
        "" => "ClusterIP",
        kind => kind,
    }
}

/// Every type but ExternalName has a ClusterIP (or is headless).
fn needs_cluster_ip(service: &Value) -> bool {
    kind(service) != "ExternalName"
}

fn needs_node_ports(service: &Value) -> bool {
    matches!(kind(service), "NodePort" | "LoadBalancer")
}

fn needs_health_check_port(service: &Value) -> bool {
    kind(service) == "LoadBalancer" && str_at(service, "/spec/externalTrafficPolicy") == "Local"
}

fn set_default(map: &mut Map<String, Value>, key: &str, value: Value) {
    if !map.contains_key(key) {
        map.insert(key.to_owned(), value);
    }
}

fn default(object: &mut Value) {
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    set_default(spec, "type", json!("ClusterIP"));
    set_default(spec, "sessionAffinity", json!("None"));
    let service_kind = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    if spec.get("sessionAffinity").and_then(Value::as_str) == Some("ClientIP") {
        let config = spec
            .entry("sessionAffinityConfig")
            .or_insert_with(|| json!({}));
        if let Some(config) = config.as_object_mut() {
            let client_ip = config.entry("clientIP").or_insert_with(|| json!({}));
            if let Some(client_ip) = client_ip.as_object_mut() {
                set_default(client_ip, "timeoutSeconds", json!(AFFINITY_TIMEOUT_SECONDS));
            }
        }
    }
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for port in ports.iter_mut().filter_map(Value::as_object_mut) {
            set_default(port, "protocol", json!("TCP"));
            let unset = match port.get("targetPort") {
                None | Some(Value::Null) => true,
                Some(Value::Number(n)) => n.as_i64() == Some(0),
                Some(Value::String(s)) => s.is_empty(),
                Some(_) => false,
            };
            if unset && let Some(number) = port.get("port").cloned() {
                port.insert("targetPort".into(), number);
            }
        }
    }
    if matches!(service_kind.as_str(), "NodePort" | "LoadBalancer") {
        set_default(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if service_kind == "LoadBalancer" {
        set_default(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
    if service_kind != "ExternalName" {
        set_default(spec, "internalTrafficPolicy", json!("Cluster"));
        set_default(spec, "ipFamilies", json!(["IPv4"]));
        set_default(spec, "ipFamilyPolicy", json!("SingleStack"));
    }
}

fn prepare_for_create(object: &mut Value, _: &Context<'_>) {
    if let Some(fields) = object.as_object_mut() {
        fields.insert("status".into(), json!({"loadBalancer": {}}));
    }
}

fn spec_mut(service: &mut Value) -> Option<&mut Map<String, Value>> {
    service.get_mut("spec").and_then(Value::as_object_mut)
}

/// What a write leaves out that the stored Service was allocated, kept while the type still
/// needs it (upstream's `patchAllocatedValues`).
fn keep_allocated(new: &mut Value, old: &Value) {
    if needs_cluster_ip(old)
        && needs_cluster_ip(new)
        && str_at(new, "/spec/clusterIP").is_empty()
        && let Some(spec) = spec_mut(new)
    {
        for field in ["clusterIP", "clusterIPs"] {
            if let Some(value) = old.pointer(&format!("/spec/{field}")) {
                spec.insert(field.into(), value.clone());
            }
        }
    }
    if needs_node_ports(old) && needs_node_ports(new) {
        let by_name: BTreeMap<&str, Value> = items(old, "/spec/ports")
            .iter()
            .filter_map(|p| Some((str_at(p, "/name"), p.get("nodePort")?.clone())))
            .collect();
        let used: Vec<Value> = items(new, "/spec/ports")
            .iter()
            .filter_map(|p| p.get("nodePort").cloned())
            .collect();
        if let Some(ports) = new.pointer_mut("/spec/ports").and_then(Value::as_array_mut) {
            for port in ports.iter_mut() {
                let name = str_at(port, "/name").to_owned();
                if port.get("nodePort").and_then(Value::as_i64).unwrap_or(0) == 0
                    && let Some(old) = by_name.get(name.as_str())
                    && !used.contains(old)
                    && let Some(port) = port.as_object_mut()
                {
                    port.insert("nodePort".into(), old.clone());
                }
            }
        }
    }
    if needs_health_check_port(old)
        && needs_health_check_port(new)
        && new.pointer("/spec/healthCheckNodePort").is_none()
        && let Some(port) = old.pointer("/spec/healthCheckNodePort").cloned()
        && let Some(spec) = spec_mut(new)
    {
        spec.insert("healthCheckNodePort".into(), port);
    }
}

/// Removes `fields` of the spec when the write left them as stored.
fn drop_unchanged(new: &mut Value, old: &Value, fields: &[&str]) {
    let unchanged: Vec<&str> = fields
        .iter()
        .copied()
        .filter(|f| new.pointer(&format!("/spec/{f}")) == old.pointer(&format!("/spec/{f}")))
        .collect();
    if let Some(spec) = spec_mut(new) {
        for field in unchanged {
            spec.remove(field);
        }
    }
}

/// What the new type does not use, dropped unless the write set it itself (upstream's
/// `dropTypeDependentFields`).
fn drop_type_dependent(new: &mut Value, old: &Value) {
    if needs_cluster_ip(old) && !needs_cluster_ip(new) {
        drop_unchanged(
            new,
            old,
            &["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"],
        );
        drop_unchanged(new, old, &["internalTrafficPolicy"]);
    }
    let node_ports = |s: &Value| -> Vec<Option<i64>> {
        items(s, "/spec/ports")
            .iter()
            .map(|p| p.get("nodePort").and_then(Value::as_i64))
            .collect()
    };
    if needs_node_ports(old)
        && !needs_node_ports(new)
        && node_ports(new) == node_ports(old)
        && let Some(ports) = new.pointer_mut("/spec/ports").and_then(Value::as_array_mut)
    {
        for port in ports.iter_mut().filter_map(Value::as_object_mut) {
            port.remove("nodePort");
        }
    }
    if needs_health_check_port(old) && !needs_health_check_port(new) {
        drop_unchanged(new, old, &["healthCheckNodePort"]);
    }
    if kind(old) == "LoadBalancer" && kind(new) != "LoadBalancer" {
        drop_unchanged(
            new,
            old,
            &["allocateLoadBalancerNodePorts", "loadBalancerClass"],
        );
    }
    if !needs_node_ports(new) {
        drop_unchanged(new, old, &["externalTrafficPolicy"]);
    }
}

fn prepare_for_update(new: &mut Value, old: &Value, _: &Context<'_>) {
    util::keep_field(new, old, "status");
    keep_allocated(new, old);
    drop_type_dependent(new, old);
    // What the new type uses and the write left out gets its default (upstream defaults
    // before the strategy; here the type is only known now).
    default(new);
}

fn prepare_for_status_update(new: &mut Value, old: &Value, _: &Context<'_>) {
    status_write(new, old);
}

fn service_name(name: &str, prefix: bool) -> Vec<String> {
    let name = if prefix {
        name.strip_suffix('-').unwrap_or(name)
    } else {
        name
    };
    is_dns1035_label(name)
}

fn validate_ports(service: &Value, errors: &mut ErrorList) {
    let spec = Path::new("spec");
    let service_kind = kind(service);
    let ports = items(service, "/spec/ports");
    let headless = str_at(service, "/spec/clusterIP") == "None";
    if ports.is_empty() && service_kind != "ExternalName" && !headless {
        errors.push(Error::required(&spec.child("ports"), ""));
    }
    let mut names = Vec::new();
    let mut pairs = Vec::new();
    let mut node_ports = Vec::new();
    for (index, port) in ports.iter().enumerate() {
        let path = spec.child("ports").index(index);
        let name = str_at(port, "/name");
        if ports.len() > 1 && name.is_empty() {
            errors.push(Error::required(&path.child("name"), ""));
        } else if !name.is_empty() {
            for message in is_dns1123_label(name) {
                errors.push(Error::invalid(&path.child("name"), name, message));
            }
            if names.contains(&name) {
                errors.push(Error::duplicate(&path.child("name"), name));
            }
            names.push(name);
        }
        let number = port.get("port").and_then(Value::as_i64).unwrap_or(0);
        if !(1..=65535).contains(&number) {
            errors.push(Error::invalid(
                &path.child("port"),
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
        if pairs.contains(&(number, protocol)) {
            errors.push(Error::duplicate(&path, format!("{number}/{protocol}")));
        }
        pairs.push((number, protocol));
        match port.get("targetPort") {
            Some(Value::Number(n)) if !(1..=65535).contains(&n.as_i64().unwrap_or(0)) => {
                errors.push(Error::invalid(
                    &path.child("targetPort"),
                    n.clone(),
                    "must be between 1 and 65535, inclusive",
                ));
            }
            Some(Value::String(s)) if s.len() > 15 || s.is_empty() => {
                errors.push(Error::invalid(
                    &path.child("targetPort"),
                    s.as_str(),
                    "must be no more than 15 characters",
                ));
            }
            _ => {}
        }
        if let Some(node_port) = port
            .get("nodePort")
            .and_then(Value::as_i64)
            .filter(|p| *p != 0)
        {
            if !needs_node_ports(service) {
                errors.push(Error::forbidden(
                    &path.child("nodePort"),
                    format!("may not be used when `type` is '{service_kind}'"),
                ));
            }
            if node_ports.contains(&(node_port, protocol)) {
                errors.push(Error::duplicate(
                    &path.child("nodePort"),
                    format!("{node_port}/{protocol}"),
                ));
            }
            node_ports.push((node_port, protocol));
        }
    }
}

fn validate_spec(service: &Value) -> ErrorList {
    let mut errors = ErrorList::new();
    let spec = Path::new("spec");
    let service_kind = kind(service);
    if !TYPES.contains(&service_kind) {
        errors.push(Error::not_supported(
            &spec.child("type"),
            service_kind,
            TYPES,
        ));
    }
    validate_ports(service, &mut errors);
    let cluster_ip = str_at(service, "/spec/clusterIP");
    if service_kind == "ExternalName" {
        if !cluster_ip.is_empty() {
            errors.push(Error::forbidden(
                &spec.child("clusterIP"),
                "may not be set for ExternalName services",
            ));
        }
        let name = str_at(service, "/spec/externalName");
        if name.is_empty() {
            errors.push(Error::required(&spec.child("externalName"), ""));
        } else {
            for message in is_dns1123_subdomain(name.trim_end_matches('.')) {
                errors.push(Error::invalid(&spec.child("externalName"), name, message));
            }
        }
    } else if !cluster_ip.is_empty()
        && cluster_ip != "None"
        && cluster_ip.parse::<Ipv4Addr>().is_err()
    {
        errors.push(Error::invalid(
            &spec.child("clusterIPs").index(0),
            cluster_ip,
            "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
        ));
    }
    let affinity = str_at(service, "/spec/sessionAffinity");
    if !AFFINITIES.contains(&affinity) {
        errors.push(Error::not_supported(
            &spec.child("sessionAffinity"),
            affinity,
            AFFINITIES,
        ));
    }
    if let Some(timeout) = service
        .pointer("/spec/sessionAffinityConfig/clientIP/timeoutSeconds")
        .and_then(Value::as_i64)
        .filter(|t| !(1..=86400).contains(t))
    {
        errors.push(Error::invalid(
            &spec
                .child("sessionAffinityConfig")
                .child("clientIP")
                .child("timeoutSeconds"),
            timeout,
            "must be greater than 0 and less than 86400",
        ));
    }
    let external = str_at(service, "/spec/externalTrafficPolicy");
    if !external.is_empty() {
        if !needs_node_ports(service) {
            errors.push(Error::invalid(
                &spec.child("externalTrafficPolicy"),
                external,
                "may only be set when `type` is 'NodePort' or 'LoadBalancer'",
            ));
        } else if !TRAFFIC_POLICIES.contains(&external) {
            errors.push(Error::not_supported(
                &spec.child("externalTrafficPolicy"),
                external,
                TRAFFIC_POLICIES,
            ));
        }
    }
    let internal = str_at(service, "/spec/internalTrafficPolicy");
    if !internal.is_empty() && !TRAFFIC_POLICIES.contains(&internal) {
        errors.push(Error::not_supported(
            &spec.child("internalTrafficPolicy"),
            internal,
            TRAFFIC_POLICIES,
        ));
    }
    if let Some(port) = service
        .pointer("/spec/healthCheckNodePort")
        .and_then(Value::as_i64)
        .filter(|p| *p != 0)
        && !needs_health_check_port(service)
    {
        errors.push(Error::invalid(
            &spec.child("healthCheckNodePort"),
            port,
            "may only be set when `type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'",
        ));
    }
    if service
        .pointer("/spec/allocateLoadBalancerNodePorts")
        .is_some()
        && service_kind != "LoadBalancer"
    {
        errors.push(Error::forbidden(
            &spec.child("allocateLoadBalancerNodePorts"),
            "may only be used when `type` is 'LoadBalancer'",
        ));
    }
    for (index, range) in items(service, "/spec/loadBalancerSourceRanges")
        .iter()
        .enumerate()
    {
        let range = range.as_str().unwrap_or("");
        if crate::net::parse_cidr(range.trim()).is_none() {
            errors.push(Error::invalid(
                &spec.child("loadBalancerSourceRanges").index(index),
                range,
                "must be a list of IP ranges. For example, 10.240.0.0/24,10.250.0.0/24 ",
            ));
        }
    }
    for (index, ip) in items(service, "/spec/externalIPs").iter().enumerate() {
        let ip = ip.as_str().unwrap_or("");
        if ip.parse::<Ipv4Addr>().is_err() {
            errors.push(Error::invalid(
                &spec.child("externalIPs").index(index),
                ip,
                "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            ));
        }
    }
    errors
}

fn validate(object: &Value) -> Result<ErrorList, ApiError> {
    let mut errors = meta_errors(object, true, service_name)?;
    errors.extend(validate_spec(object));
    Ok(errors)
}

fn validate_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let mut errors = meta_update_errors(new, old)?;
    errors.extend(validate_spec(new));
    let (new_ip, old_ip) = (
        str_at(new, "/spec/clusterIP"),
        str_at(old, "/spec/clusterIP"),
    );
    if needs_cluster_ip(new) && needs_cluster_ip(old) && !old_ip.is_empty() && new_ip != old_ip {
        errors.push(Error::invalid(
            &Path::new("spec").child("clusterIP"),
            new_ip,
            "field is immutable",
        ));
    }
    Ok(errors)
}

fn validate_status_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let mut errors = meta_update_errors(new, old)?;
    let path = Path::new("status").child("loadBalancer").child("ingress");
    for (index, ingress) in items(new, "/status/loadBalancer/ingress")
        .iter()
        .enumerate()
    {
        let ip = str_at(ingress, "/ip");
        if !ip.is_empty() && ip.parse::<Ipv4Addr>().is_err() {
            errors.push(Error::invalid(
                &path.index(index).child("ip"),
                ip,
                "must be a valid IP address",
            ));
        }
        if ingress.get("ipMode").is_some() && ip.is_empty() {
            errors.push(Error::required(
                &path.index(index).child("ipMode"),
                "must be specified when `ip` is set",
            ));
        }
    }
    Ok(errors)
}

const FIELD_SELECTORS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "spec.clusterIP",
    "spec.type",
];

fn field_values(service: &Value) -> BTreeMap<&'static str, String> {
    let mut fields = util::meta_fields(service, true);
    fields.insert(
        "spec.clusterIP",
        str_at(service, "/spec/clusterIP").to_owned(),
    );
    fields.insert("spec.type", kind(service).to_owned());
    fields
}

const COLUMNS: &[ColumnDefinition] = &[
    table::NAME,
    table::column("Type", "The type of the service.", 0),
    table::column("Cluster-IP", "The cluster IP of the service.", 0),
    table::column("External-IP", "The external IP of the service.", 0),
    table::column("Port(s)", "The ports of the service.", 0),
    table::AGE,
    table::column("Selector", "The label selector of the service.", 1),
];

fn external_ip(service: &Value) -> String {
    let mut external: Vec<String> = items(service, "/spec/externalIPs")
        .iter()
        .filter_map(|ip| ip.as_str().map(str::to_owned))
        .collect();
    match kind(service) {
        "ExternalName" => return str_at(service, "/spec/externalName").to_owned(),
        "LoadBalancer" => {
            let ingress: Vec<String> = items(service, "/status/loadBalancer/ingress")
                .iter()
                .map(|i| match str_at(i, "/ip") {
                    "" => str_at(i, "/hostname").to_owned(),
                    ip => ip.to_owned(),
                })
                .collect();
            if ingress.is_empty() && external.is_empty() {
                return "<pending>".to_owned();
            }
            external.splice(0..0, ingress);
        }
        _ => {}
    }
    if external.is_empty() {
        "<none>".to_owned()
    } else {
        external.join(",")
    }
}

fn ports(service: &Value) -> String {
    let ports: Vec<String> = items(service, "/spec/ports")
        .iter()
        .map(|p| {
            let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
            let protocol = str_at(p, "/protocol");
            match p.get("nodePort").and_then(Value::as_i64) {
                Some(node) if node != 0 => format!("{port}:{node}/{protocol}"),
                _ => format!("{port}/{protocol}"),
            }
        })
        .collect();
    if ports.is_empty() {
        "<none>".to_owned()
    } else {
        ports.join(",")
    }
}

fn selector(service: &Value) -> String {
    match service.pointer("/spec/selector").and_then(Value::as_object) {
        Some(selector) if !selector.is_empty() => selector
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
            .collect::<Vec<_>>()
            .join(","),
        _ => "<none>".to_owned(),
    }
}

fn row(service: &Value, now: i64) -> Vec<Value> {
    let cluster_ip = match str_at(service, "/spec/clusterIP") {
        "" => "<none>",
        ip => ip,
    };
    vec![
        util::name(service),
        json!(kind(service)),
        json!(cluster_ip),
        json!(external_ip(service)),
        json!(ports(service)),
        util::age(service, now),
        json!(selector(service)),
    ]
}

const SERVICE_SPEC: &str = "io.k8s.api.core.v1.ServiceSpec";

static EXTENSIONS: &[Extensions] = &[
    Extensions {
        schema: SERVICE_SPEC,
        property: "ports",
        list_type: Some(ListType::Map),
        list_map_keys: &["port", "protocol"],
        patch_strategy: Some("merge"),
        patch_merge_key: Some("port"),
        ..NONE
    },
    genplane_api::schema::atomic_list(SERVICE_SPEC, "externalIPs"),
    genplane_api::schema::atomic_list(SERVICE_SPEC, "clusterIPs"),
];

/// `services` and `services/status`.
pub static INFO: ResourceInfo = ResourceInfo {
    group: "",
    version: "v1",
    kind: "Service",
    list_kind: "ServiceList",
    resource: "services",
    singular: "service",
    short_names: &["svc"],
    namespaced: true,
    create_on_update: false,
    verbs: catalog::ALL_VERBS,
    subresources: &[Subresource {
        name: "status",
        kind: "Service",
        verbs: catalog::STATUS_VERBS,
        rules: Some(SubresourceRules {
            prepare_for_update: prepare_for_status_update,
            validate_update: validate_status_update,
        }),
        body: None,
    }],
    categories: &["all"],
    storage_prefix: "services/specs",
    storage_api_version: "v1",
    schema: &super::proto::SERVICE,
    protobuf: true,
    feature_gate: None,
    extensions: EXTENSIONS,
    openapi_schema: genplane_api::schema::schema_of::<Service>,
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
        grace_period: catalog::not_graceful,
    },
};
