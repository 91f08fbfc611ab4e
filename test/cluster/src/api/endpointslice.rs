//! discovery.k8s.io/v1 `EndpointSlice`: a Service's endpoints with their conditions
//! (`ready`, `serving`, `terminating`), as the endpoint-slice controller writes them
//! (`kubectl get endpointslices`: `NAME ADDRESSTYPE PORTS ENDPOINTS AGE`).

use genplane_api::catalog::{self, Hooks, ResourceInfo};
use genplane_api::table::{self, ColumnDefinition};
use genplane_api::util;
use genplane_apimachinery::codec::decode::Decoded;
use genplane_apimachinery::errors::ApiError;
use genplane_apimachinery::validation::field::{Error, ErrorList, Path};
use genplane_apimachinery::validation::name_is_dns_subdomain;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::{Value, json};

use super::{items, meta_errors, meta_update_errors, shape, str_at};

/// The address types of a slice.
pub const ADDRESS_TYPES: &[&str] = &["IPv4", "IPv6", "FQDN"];
/// The most endpoints a slice holds.
pub const MAX_ENDPOINTS: usize = 1000;

fn decode(object: &Value) -> Result<Decoded, ApiError> {
    shape::decode::<EndpointSlice>(object, "EndpointSlice", "discovery.k8s.io/v1")
}

fn validate_slice(object: &Value) -> ErrorList {
    let mut errors = ErrorList::new();
    let address_type = str_at(object, "/addressType");
    if !ADDRESS_TYPES.contains(&address_type) {
        errors.push(Error::not_supported(
            &Path::new("addressType"),
            address_type,
            ADDRESS_TYPES,
        ));
    }
    let endpoints = items(object, "/endpoints");
    if endpoints.len() > MAX_ENDPOINTS {
        errors.push(Error::too_many(
            &Path::new("endpoints"),
            endpoints.len(),
            MAX_ENDPOINTS,
        ));
    }
    for (index, endpoint) in endpoints.iter().enumerate() {
        let path = Path::new("endpoints").index(index).child("addresses");
        let addresses = items(endpoint, "/addresses");
        if addresses.is_empty() || addresses.len() > 100 {
            errors.push(Error::invalid(
                &path,
                json!(addresses),
                "must contain at least 1 and at most 100 addresses",
            ));
        }
        if address_type == "IPv4" {
            for (a, address) in addresses.iter().enumerate() {
                let address = address.as_str().unwrap_or("");
                if address.parse::<std::net::Ipv4Addr>().is_err() {
                    errors.push(Error::invalid(
                        &path.index(a),
                        address,
                        "must be a valid IPv4 address",
                    ));
                }
            }
        }
    }
    errors
}

fn validate(object: &Value) -> Result<ErrorList, ApiError> {
    let mut errors = meta_errors(object, true, name_is_dns_subdomain)?;
    errors.extend(validate_slice(object));
    Ok(errors)
}

fn validate_update(new: &Value, old: &Value) -> Result<ErrorList, ApiError> {
    let mut errors = meta_update_errors(new, old)?;
    errors.extend(validate_slice(new));
    let (new_type, old_type) = (str_at(new, "/addressType"), str_at(old, "/addressType"));
    if new_type != old_type {
        errors.push(Error::invalid(
            &Path::new("addressType"),
            new_type,
            "field is immutable",
        ));
    }
    Ok(errors)
}

const COLUMNS: &[ColumnDefinition] = &[
    table::NAME,
    table::column("AddressType", "The type of addresses.", 0),
    table::column("Ports", "The ports of the slice.", 0),
    table::column("Endpoints", "The addresses of the slice.", 0),
    table::AGE,
];

fn row(slice: &Value, now: i64) -> Vec<Value> {
    let ports: Vec<String> = items(slice, "/ports")
        .iter()
        .filter_map(|p| p.get("port").and_then(Value::as_i64))
        .map(|p| p.to_string())
        .collect();
    let addresses: Vec<&str> = items(slice, "/endpoints")
        .iter()
        .flat_map(|e| items(e, "/addresses"))
        .filter_map(Value::as_str)
        .collect();
    let addresses = match addresses.len() {
        0 => "<unset>".to_owned(),
        n if n > 3 => format!("{} + {} more...", addresses[..3].join(","), n - 3),
        _ => addresses.join(","),
    };
    vec![
        util::name(slice),
        json!(str_at(slice, "/addressType")),
        json!(if ports.is_empty() {
            "<unset>".to_owned()
        } else {
            ports.join(",")
        }),
        json!(addresses),
        util::age(slice, now),
    ]
}

/// `endpointslices.discovery.k8s.io`.
pub static INFO: ResourceInfo = ResourceInfo {
    group: "discovery.k8s.io",
    version: "v1",
    kind: "EndpointSlice",
    list_kind: "EndpointSliceList",
    resource: "endpointslices",
    singular: "endpointslice",
    short_names: &[],
    namespaced: true,
    create_on_update: false,
    verbs: catalog::ALL_VERBS,
    subresources: &[],
    categories: &[],
    storage_prefix: "endpointslices",
    storage_api_version: "discovery.k8s.io/v1",
    schema: &super::proto::ENDPOINT_SLICE,
    protobuf: true,
    feature_gate: None,
    extensions: &[],
    openapi_schema: genplane_api::schema::schema_of::<EndpointSlice>,
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
