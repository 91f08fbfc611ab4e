//! The APIServices served by other servers: where each is proxied, whether it is available,
//! and what it serves, as upstream's APIService registration, remote availability and
//! discovery controllers keep them.
//!
//! [`Remote::run`] follows the stored APIServices and probes again every
//! [`PROBE_INTERVAL`]. For each APIService with a `spec.service`:
//! - the service is resolved ([`ServiceResolver`]: an override, else DNS of
//!   `<name>.<namespace>.svc`); a name DNS does not know is `ServiceNotFound`;
//! - its server is asked for its discovery document, `GET /apis/<group>/<version>`, over TLS
//!   checked against `spec.caBundle` (the system's roots without one; nothing with
//!   `insecureSkipTLSVerify`) presenting the proxy's client certificate; a failure, or an answer
//!   other than a 2xx, is `FailedDiscoveryCheck`, an answer `Passed`;
//! - the `Available` condition is written when it changes (its transition time only when its
//!   status does), with upstream's reasons and messages;
//! - the availability metrics ([`AvailabilityMetrics`]) are set for every APIService (a
//!   Local one is available), and a fall from available counted;
//! - the server's proxy targets ([`ApiServer::set_aggregated`]) and the discovery of what the
//!   available ones serve are replaced as a whole; an unavailable APIService keeps its target
//!   (answered 503) and the resources it served last (discovery marks them stale).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use genplane_admission::webhook::client::{self, Identity, Trust};
use genplane_admission::webhook::resolver::{ServiceReference, ServiceResolver};
use genplane_api::apiregistration::apiservice;
use genplane_apimachinery::errors::ApiError;
use genplane_apiserver::aggregation::{self, Target};
use genplane_apiserver::discovery::{ResourceDescription, SubresourceDescription};
use genplane_apiserver::server::{Aggregated, ApiServer, ServedElsewhere};
use genplane_registry::{ListOptions, Store};
use genplane_storage::Storage;
use serde_json::{Value, json};

use super::metrics::AvailabilityMetrics;

/// How often every remote APIService is probed, besides after each change.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(10);

/// How long a probe waits for its answer (upstream's discovery check waits 5 s).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// A probed APIService: its target, what it serves, the URL of its OpenAPI v3 document and
/// the document, and the spec it was made for.
struct Probed {
    spec: Value,
    target: Arc<Target>,
    resources: Vec<ResourceDescription>,
    openapi: Option<String>,
    document: Option<Bytes>,
}

/// The remote APIServices of one API server.
pub struct Remote<S: Storage> {
    api: Arc<ApiServer<S>>,
    api_services: Store<S>,
    status: Store<S>,
    resolver: ServiceResolver,
    /// The proxy's client certificate and key (PEM), presented to every extension server.
    identity: Option<String>,
    /// What each APIService's last probe found, by name.
    probed: Mutex<BTreeMap<String, Probed>>,
    /// Held across a pass, so passes never overlap.
    pass: tokio::sync::Mutex<()>,
    metrics: AvailabilityMetrics,
}

impl<S: Storage> std::fmt::Debug for Remote<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Remote")
    }
}

/// The outcome of a probe: `Available`'s status, reason and message.
type Availability = (&'static str, &'static str, String);

fn text<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// The status of the stored APIService's `Available` condition, if it has one.
fn stored_availability(object: &Value) -> Option<&str> {
    object
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Available")?
        .get("status")?
        .as_str()
}

impl<S: Storage> Remote<S> {
    /// The controller of `api`'s remote APIServices, when it serves APIServices with their
    /// `status`; `identity` is the proxy's client certificate and key (PEM); every pass sets
    /// `metrics`.
    pub fn new(
        api: Arc<ApiServer<S>>,
        resolver: ServiceResolver,
        identity: Option<String>,
        metrics: AvailabilityMetrics,
    ) -> Option<Arc<Self>> {
        let resource = api
            .resources()
            .into_iter()
            .find(|r| r.info.is(&apiservice::INFO))?;
        let api_services = resource.store()?.clone();
        let status = resource.subresource_store("status")?.clone();
        Some(Arc::new(Self {
            api,
            api_services,
            status,
            resolver,
            identity,
            probed: Mutex::new(BTreeMap::new()),
            pass: tokio::sync::Mutex::new(()),
            metrics,
        }))
    }

    /// Makes a first pass, then follows the APIServices, probing them again every
    /// [`PROBE_INTERVAL`], until `stop` completes.
    pub async fn run(
        self: Arc<Self>,
        stop: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<(), ApiError> {
        let api_services = self.api_services.clone();
        crate::store_follower::follow_waking(
            api_services,
            "APIServices",
            move || {
                let this = self.clone();
                async move { this.sync().await }
            },
            || async {
                tokio::time::sleep(PROBE_INTERVAL).await;
                true
            },
            stop,
        )
        .await
    }

    /// One pass: every remote APIService probed, its status written, the proxy's targets and
    /// the discovery of what they serve replaced. Answers the revision it read at.
    pub async fn sync(&self) -> Result<String, ApiError> {
        let _pass = self.pass.lock().await;
        let listed = self.api_services.list("", &ListOptions::default()).await?;
        let mut next = BTreeMap::new();
        let mut available = BTreeMap::new();
        for object in &listed.items {
            let name = text(object, "/metadata/name").to_owned();
            if apiservice::is_local(object) {
                available.insert(name, true);
                continue;
            }
            let spec = object.get("spec").cloned().unwrap_or_default();
            let (probed, availability) = self.probe(&name, &spec).await;
            self.write_availability(object, &availability).await?;
            let was = stored_availability(object) == Some("True");
            let now = availability.0 == "True";
            self.metrics.observe(&name, was, now, availability.1);
            available.insert(name.clone(), now);
            if let Some(probed) = probed {
                next.insert(name, probed);
            }
        }
        self.metrics.set_all(available);
        let mut probed = self
            .probed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let unchanged = probed.len() == next.len()
            && probed.iter().zip(&next).all(|((a, was), (b, now))| {
                a == b
                    && Arc::ptr_eq(&was.target, &now.target)
                    && was.resources == now.resources
                    && was.openapi == now.openapi
                    && was.document == now.document
            });
        if unchanged {
            *probed = next;
            return Ok(listed.resource_version);
        }
        let aggregated = Aggregated::new(next.values().map(|probed| ServedElsewhere {
            group: text(&probed.spec, "/group").to_owned(),
            version: text(&probed.spec, "/version").to_owned(),
            target: probed.target.clone(),
            resources: probed.resources.clone(),
            priority: (
                probed.spec["groupPriorityMinimum"].as_i64().unwrap_or(0) as i32,
                probed.spec["versionPriority"].as_i64().unwrap_or(0) as i32,
            ),
            openapi_url: probed.openapi.clone(),
            openapi_document: probed.document.clone(),
        }));
        self.api.set_aggregated(aggregated);
        *probed = next;
        Ok(listed.resource_version)
    }

    /// The target of an APIService (the one made before while its spec is the same), probed.
    async fn probe(&self, name: &str, spec: &Value) -> (Option<Probed>, Availability) {
        let group = text(spec, "/group");
        let version = text(spec, "/version");
        let reference: ServiceReference =
            serde_json::from_value(spec.get("service").cloned().unwrap_or_default())
                .unwrap_or_default();
        let earlier = self
            .probed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(name)
            .filter(|p| p.spec == *spec)
            .map(|p| {
                (
                    p.target.clone(),
                    p.resources.clone(),
                    p.openapi.clone(),
                    p.document.clone(),
                )
            });
        let (target, resources, openapi, document) = match earlier {
            Some(earlier) => earlier,
            None => match self.target(name, spec, &reference).await {
                Ok(target) => (Arc::new(target), Vec::new(), None, None),
                Err(availability) => return (None, availability),
            },
        };
        let path = format!("/apis/{group}/{version}");
        let url = format!("https://{}{path}", target.address);
        let failed = |message: String| {
            (
                "False",
                "FailedDiscoveryCheck",
                format!("failing or missing response from {url}: {message}"),
            )
        };
        let (availability, found) = match aggregation::get(&target, &path, PROBE_TIMEOUT).await {
            Ok((status, body)) if status.is_success() => {
                match serde_json::from_slice::<Value>(&body) {
                    Ok(list) => (
                        ("True", "Passed", "all checks passed".to_owned()),
                        Some(resources_of(group, version, &list)),
                    ),
                    Err(error) => (failed(format!("decoding the answer: {error}")), None),
                }
            }
            Ok((status, _)) => (
                failed(format!("bad status from {url}: {}", status.as_u16())),
                None,
            ),
            Err(error) => (failed(error.to_string()), None),
        };
        let available = found.is_some();
        let resources = found.unwrap_or(resources);
        // Where its OpenAPI v3 document is (kubectl explain reads it through this server);
        // kept from before when its server cannot say now.
        let (openapi, document) = if available {
            match openapi_url(&target, group, version).await {
                // The same document as before (its URL names its hash): kept.
                Some(url) if Some(&url) == openapi.as_ref() && document.is_some() => {
                    (Some(url), document)
                }
                Some(url) => {
                    let fetched = openapi_document(&target, &url).await;
                    (Some(url), fetched.or(document))
                }
                None => (openapi, document),
            }
        } else {
            (openapi, document)
        };
        let target = if available == target.unavailable.is_none() {
            target
        } else {
            // The same connection settings, answered 503 or not.
            match self.target(name, spec, &reference).await {
                Ok(fresh) => {
                    Arc::new(fresh.with_unavailable((!available).then(|| availability.2.clone())))
                }
                Err(availability) => return (None, availability),
            }
        };
        (
            Some(Probed {
                spec: spec.clone(),
                target,
                resources,
                openapi,
                document,
            }),
            availability,
        )
    }

    /// A target for `reference`: its address resolved, its TLS configured.
    async fn target(
        &self,
        name: &str,
        spec: &Value,
        reference: &ServiceReference,
    ) -> Result<Target, Availability> {
        let not_found = |message: String| ("False", "ServiceNotFound", message);
        let endpoint = self
            .resolver
            .resolve(reference)
            .map_err(|e| not_found(e.to_string()))?;
        let address = match endpoint.address {
            Some(address) => address,
            None => {
                let port = u16::try_from(reference.port()).unwrap_or(443);
                tokio::net::lookup_host((endpoint.server_name.as_str(), port))
                    .await
                    .ok()
                    .and_then(|mut found| found.next())
                    .ok_or_else(|| {
                        not_found(format!(
                            "service/{} in {:?} is not present",
                            reference.name, reference.namespace
                        ))
                    })?
            }
        };
        let bundle = text(spec, "/caBundle");
        let trust_roots;
        let trust = if spec.get("insecureSkipTLSVerify") == Some(&json!(true)) {
            Trust::Anything
        } else if bundle.is_empty() {
            Trust::System
        } else {
            trust_roots = client::parse_ca_bundle(bundle)
                .map_err(|e| ("False", "FailedDiscoveryCheck", format!("caBundle: {e}")))?;
            Trust::Bundle(&trust_roots)
        };
        let identity = self
            .identity
            .as_deref()
            .map(Identity::from_pem)
            .transpose()
            .map_err(|e| {
                (
                    "False",
                    "FailedDiscoveryCheck",
                    format!("proxy client certificate: {e}"),
                )
            })?;
        let tls = client::server_tls(trust, identity).map_err(|e| {
            (
                "False",
                "FailedDiscoveryCheck",
                format!("TLS configuration: {e}"),
            )
        })?;
        Ok(Target::new(
            name.to_owned(),
            address,
            endpoint.server_name,
            tls,
        ))
    }

    /// Writes `availability` as the APIService's `Available` condition, when it changed.
    async fn write_availability(
        &self,
        object: &Value,
        (status, reason, message): &Availability,
    ) -> Result<(), ApiError> {
        let condition = apiservice::available_condition(status, reason, message);
        crate::store_follower::write_condition(&self.status, object, condition).await
    }
}

/// The URL of the OpenAPI v3 document of `group`/`version` in `target`'s index, when it
/// serves one below `/openapi/v3/`.
async fn openapi_url(target: &Target, group: &str, version: &str) -> Option<String> {
    let (status, body) = aggregation::get(target, "/openapi/v3", PROBE_TIMEOUT)
        .await
        .ok()?;
    if !status.is_success() {
        return None;
    }
    let index: Value = serde_json::from_slice(&body).ok()?;
    let url = index["paths"][format!("apis/{group}/{version}")]["serverRelativeURL"].as_str()?;
    url.starts_with(&format!("/openapi/v3/apis/{group}/{version}"))
        .then(|| url.to_owned())
}

/// The OpenAPI v3 document at `url` on `target`'s server (the v2 document includes it), when
/// it answers one: a JSON object.
async fn openapi_document(target: &Target, url: &str) -> Option<Bytes> {
    let (status, body) = aggregation::get(target, url, PROBE_TIMEOUT).await.ok()?;
    let is_object = serde_json::from_slice::<Value>(&body).is_ok_and(|d| d.is_object());
    (status.is_success() && is_object).then_some(body)
}

/// The resources of an `APIResourceList` an extension server answered for
/// `group`/`version`, as discovery describes them (subresources under their resource).
pub fn resources_of(group: &str, version: &str, list: &Value) -> Vec<ResourceDescription> {
    let strings = |value: &Value| -> Vec<String> {
        value
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let entries = list["resources"].as_array().cloned().unwrap_or_default();
    let mut resources: Vec<ResourceDescription> = Vec::new();
    for entry in &entries {
        let name = entry["name"].as_str().unwrap_or_default();
        if name.is_empty() || name.contains('/') {
            continue;
        }
        let kind = entry["kind"].as_str().unwrap_or_default().to_owned();
        resources.push(ResourceDescription {
            group: group.to_owned(),
            version: version.to_owned(),
            list_kind: format!("{kind}List"),
            kind,
            resource: name.to_owned(),
            singular: entry["singularName"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            short_names: strings(&entry["shortNames"]),
            namespaced: entry["namespaced"].as_bool().unwrap_or(false),
            verbs: strings(&entry["verbs"]),
            categories: strings(&entry["categories"]),
            subresources: Vec::new(),
            storage_api_version: None,
        });
    }
    for entry in &entries {
        let name = entry["name"].as_str().unwrap_or_default();
        let Some((parent, sub)) = name.split_once('/') else {
            continue;
        };
        if let Some(resource) = resources.iter_mut().find(|r| r.resource == parent) {
            resource.subresources.push(SubresourceDescription {
                name: sub.to_owned(),
                kind: entry["kind"].as_str().unwrap_or_default().to_owned(),
                verbs: strings(&entry["verbs"]),
                group: entry["group"].as_str().map(str::to_owned),
                version: entry["version"].as_str().map(str::to_owned),
            });
        }
    }
    resources
}
