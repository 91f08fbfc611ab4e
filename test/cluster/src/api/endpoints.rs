//! core/v1 `Endpoints`: the addresses behind a Service, as the endpoints controller writes
//! them (`kubectl get endpoints`: `NAME ENDPOINTS AGE`).

use genplane_api::catalog::{self, Hooks, ResourceInfo};
use genplane_api::table::{self, ColumnDefinition};
use genplane_api::util;
use genplane_apimachinery::codec::decode::Decoded;
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use genplane_apimachinery::validation::name_is_dns_subdomain;
use k8s_openapi::api::core::v1::Endpoints;
use serde_json::{Value, json};

use super::{items, meta_errors, meta_update_errors, shape, str_at};

fn decode(object: &Value) -> Result<Decoded, ApiError> {
    shape::decode::<Endpoints>(object, "Endpoints", "v1")
}

fn validate_subsets(object: &Value) -> ErrorList {
    let mut errors = ErrorList::new();
    for (s, subset) in items(object, "/subsets").iter().enumerate() {
        let path = Path::new("subsets").index(s);
        for list in ["addresses", "notReadyAddresses"] {
            for (a, address) in items(subset, &format!("/{list}")).iter().enumerate() {
                let ip = str_at(address, "/ip");
                if ip.parse::<std::net::IpAddr>().is_err() {
                    errors.push(Error::invalid(
                        &path.child(list).index(a).child("ip"),
                        ip,
                        "must be a valid IP address",
                    ));
                }
            }
        }
        for (p, port) in items(subset, "/ports").iter().enumerate() {
            let number = port.get("port").and_then(Value::as_i64).unwrap_or(0);
            if !(1..=65535).contains(&number) {
                errors.push(Error::invalid(
                    &path.child("ports").index(p).child("port"),
                    number,
                    "must be between 1 and 65535, inclusive",
                ));
            }
        }
    }
    errors
}

fn validate(object: &Value) -> Result<ErrorList, ApiError> {
    let mut errors = meta_errors(object, true, name_is_dns_subdomain)?;
    errors.extend(validate_subsets(object));
    Ok(errors)
}

fn validate_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let mut errors = meta_update_errors(new, old)?;
    errors.extend(validate_subsets(new));
    Ok(errors)
}

const COLUMNS: &[ColumnDefinition] = &[
    table::NAME,
    table::column("Endpoints", "Endpoints of the service.", 0),
    table::AGE,
];

/// `ip:port` of the ready addresses, at most three then `+ N more...`, as kubectl prints.
fn endpoints(object: &Value) -> String {
    let mut all = Vec::new();
    for subset in items(object, "/subsets") {
        for address in items(subset, "/addresses") {
            let ip = str_at(address, "/ip");
            let ports = items(subset, "/ports");
            if ports.is_empty() {
                all.push(ip.to_owned());
            }
            for port in ports {
                let number = port.get("port").and_then(Value::as_i64).unwrap_or(0);
                all.push(format!("{ip}:{number}"));
            }
        }
    }
    match all.len() {
        0 => "<none>".to_owned(),
        n if n > 3 => format!("{} + {} more...", all[..3].join(","), n - 3),
        _ => all.join(","),
    }
}

fn row(object: &Value, now: i64) -> Vec<Value> {
    vec![
        util::name(object),
        json!(endpoints(object)),
        util::age(object, now),
    ]
}

/// `endpoints`.
pub static INFO: ResourceInfo = ResourceInfo {
    group: "",
    version: "v1",
    kind: "Endpoints",
    list_kind: "EndpointsList",
    resource: "endpoints",
    singular: "endpoints",
    short_names: &["ep"],
    namespaced: true,
    create_on_update: false,
    verbs: catalog::ALL_VERBS,
    subresources: &[],
    categories: &["all"],
    storage_prefix: "services/endpoints",
    storage_api_version: "v1",
    schema: &super::proto::ENDPOINTS,
    protobuf: true,
    feature_gate: None,
    extensions: &[],
    openapi_schema: genplane_api::schema::schema_of::<Endpoints>,
    hooks: Hooks {
        decode,
        default: catalog::no_default,
        prepare_for_create: catalog::no_prepare,
        prepare_for_update: catalog::no_prepare_update,
        validate,
        validate_update,
        to_storage: None,
        from_storage: None,
        field_selectors: &["metadata.name", "metadata.namespace"],
        field_values: |object| util::meta_fields(object, true),
        columns: COLUMNS,
        row,
        pending_finalization: catalog::nothing_pending,
        mark_deleting: catalog::no_default,
        grace_period: catalog::not_graceful,
    },
};
