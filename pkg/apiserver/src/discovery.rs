//! Discovery: the documents that tell clients which groups, versions and resources exist.
//!
//! Both forms are served, because clients use both: the aggregated form
//! (`apidiscovery.k8s.io/v2`, one request for `/api` and one for `/apis`; kubectl uses it when
//! offered) and the legacy per-group-version form (`/api/v1`, `/apis/<group>/<version>`; kubectl
//! `auth can-i`, kube-rs `Discovery::run`, the Python dynamic client). Built once from the
//! served resources; [`Discovery`] is rebuilt when they change.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use hyper::header::{CONTENT_TYPE, ETAG, HeaderMap, HeaderValue, VARY};
use hyper::{Response, StatusCode};
use serde_json::{Value, json};

pub use genplane_api::catalog::{ResourceDescription, SubresourceDescription};

use crate::body::ResponseBody;
use crate::negotiation::Negotiated;

/// The discovery documents of a set of resources.
#[derive(Clone, Debug, Default)]
pub struct Discovery {
    resources: Vec<ResourceDescription>,
    /// The group-versions whose server cannot be reached now (an unavailable APIService's):
    /// the aggregated document marks them `Stale`, listing what they served last.
    stale: Vec<(String, String)>,
    /// The aggregated documents as answered, each built at its first request and kept while
    /// what is served stays the same (a new set of resources is a new `Discovery`).
    answers: Arc<Mutex<Vec<AggregatedAnswer>>>,
}

/// An aggregated document serialized for one form (`/api` or `/apis`, and the content type,
/// which names the version and the encoding), kept gzip-compressed (sent as it is to clients
/// that take gzip, as kubectl does), with its length and ETag.
#[derive(Debug)]
struct AggregatedAnswer {
    core: bool,
    content_type: String,
    gzip: Bytes,
    len: usize,
    etag: String,
}

fn group_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    }
}

/// Upstream's `storageVersionHash` of a resource stored as `kind` in `api_version`: the
/// first 8 bytes of the SHA-256 of `group/version/kind` (the core group empty), in base64.
/// Clients compare it to notice that a resource's storage version changed.
fn storage_version_hash(api_version: &str, kind: &str) -> String {
    use base64::Engine as _;
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let digest = aws_lc_rs::digest::digest(
        &aws_lc_rs::digest::SHA256,
        format!("{group}/{version}/{kind}").as_bytes(),
    );
    base64::engine::general_purpose::STANDARD.encode(&digest.as_ref()[..8])
}

impl Discovery {
    /// Discovery of `resources`; their order is the order clients see.
    pub fn new(resources: Vec<ResourceDescription>) -> Self {
        Self {
            resources,
            stale: Vec::new(),
            answers: Arc::default(),
        }
    }

    /// The same documents, `stale` (group, version) marked `Stale` in the aggregated form.
    pub fn with_stale(mut self, stale: Vec<(String, String)>) -> Self {
        self.stale = stale;
        self.answers = Arc::default();
        self
    }

    /// The answer to `GET /api` (`core`) or `/apis` for the aggregated document
    /// ([`Discovery::aggregated`]) in `negotiated`'s form: serialized at the first request for
    /// that form and kept, with upstream's ETag (the upper-case hex SHA-512 of the bytes), and
    /// 304 Not Modified when `If-None-Match` in `headers` names it. With thousands of custom
    /// resources the document is megabytes that every kubectl command asks for.
    pub(crate) fn aggregated_answer(
        &self,
        core: bool,
        version: &str,
        negotiated: &Negotiated,
        headers: &HeaderMap,
    ) -> Response<ResponseBody> {
        let content_type = negotiated.content_type();
        let found = {
            let answers = self.answers.lock().unwrap_or_else(|e| e.into_inner());
            answers
                .iter()
                .find(|a| a.core == core && a.content_type == content_type)
                .map(|a| (a.gzip.clone(), a.len, a.etag.clone()))
        };
        let (gzip, len, etag) = match found {
            Some(found) => found,
            None => {
                let document = self.aggregated(core, version);
                let Ok(bytes) = crate::encode::serialize(&document, negotiated.format, None) else {
                    // Answered with the encoding's error, as any other document.
                    return crate::handlers::respond(
                        StatusCode::OK,
                        &document,
                        negotiated,
                        None,
                        &[],
                    );
                };
                let etag = format!("\"{}\"", crate::openapi::hash(&bytes));
                let (gzip, len) = (Bytes::from(crate::body::gzip(&bytes)), bytes.len());
                let mut answers = self.answers.lock().unwrap_or_else(|e| e.into_inner());
                answers.push(AggregatedAnswer {
                    core,
                    content_type: content_type.clone(),
                    gzip: gzip.clone(),
                    len,
                    etag: etag.clone(),
                });
                (gzip, len, etag)
            }
        };
        let mut response = if crate::openapi::not_modified(headers, &etag) {
            let mut response = Response::new(ResponseBody::full(Bytes::new()));
            *response.status_mut() = StatusCode::NOT_MODIFIED;
            response
        } else {
            Response::new(ResponseBody::gzipped([gzip], len))
        };
        let h = response.headers_mut();
        if let Ok(value) = HeaderValue::from_str(&content_type) {
            h.insert(CONTENT_TYPE, value);
        }
        if let Ok(value) = HeaderValue::from_str(&etag) {
            h.insert(ETAG, value);
        }
        h.insert(VARY, HeaderValue::from_static("Accept"));
        response
    }

    /// The groups, in order of first appearance, each with its versions in order (the first is
    /// the preferred one).
    fn groups(&self, core: bool) -> Vec<(String, Vec<String>)> {
        let mut groups: Vec<(String, Vec<String>)> = Vec::new();
        for r in self.resources.iter().filter(|r| r.group.is_empty() == core) {
            match groups.iter_mut().find(|(g, _)| *g == r.group) {
                Some((_, versions)) if !versions.contains(&r.version) => {
                    versions.push(r.version.clone())
                }
                Some(_) => {}
                None => groups.push((r.group.clone(), vec![r.version.clone()])),
            }
        }
        groups
    }

    fn resources_of<'a>(
        &'a self,
        group: &'a str,
        version: &'a str,
    ) -> impl Iterator<Item = &'a ResourceDescription> + 'a {
        self.resources
            .iter()
            .filter(move |r| r.group == group && r.version == version)
    }

    /// `/api`: the core group's versions (`APIVersions`).
    pub fn api_versions(&self, server_address: &str) -> Value {
        let versions: Vec<String> = self.groups(true).into_iter().flat_map(|(_, v)| v).collect();
        json!({
            "kind": "APIVersions",
            "versions": versions,
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
        })
    }

    fn group_document(name: &str, versions: &[String]) -> Value {
        let entries: Vec<Value> = versions
            .iter()
            .map(|v| json!({"groupVersion": group_version(name, v), "version": v}))
            .collect();
        json!({"name": name, "versions": entries, "preferredVersion": entries.first().cloned().unwrap_or(Value::Null)})
    }

    /// `/apis`: every named group (`APIGroupList`).
    pub fn api_group_list(&self) -> Value {
        let groups: Vec<Value> = self
            .groups(false)
            .iter()
            .map(|(name, versions)| Self::group_document(name, versions))
            .collect();
        json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
    }

    /// `/apis/<group>` (`APIGroup`), or `None` for an unknown group.
    pub fn api_group(&self, group: &str) -> Option<Value> {
        let (name, versions) = self.groups(false).into_iter().find(|(g, _)| g == group)?;
        let mut document = Self::group_document(&name, &versions);
        let object = document.as_object_mut()?;
        object.insert("kind".into(), json!("APIGroup"));
        object.insert("apiVersion".into(), json!("v1"));
        Some(document)
    }

    /// `/api/<version>` or `/apis/<group>/<version>` (`APIResourceList`), or `None` when the
    /// group version is not served.
    pub fn api_resource_list(&self, group: &str, version: &str) -> Option<Value> {
        let mut resources = Vec::new();
        for r in self.resources_of(group, version) {
            let mut entry = json!({
                "name": r.resource, "singularName": r.singular, "namespaced": r.namespaced,
                "kind": r.kind, "verbs": r.verbs,
            });
            if !r.short_names.is_empty() {
                entry["shortNames"] = json!(r.short_names);
            }
            if !r.categories.is_empty() {
                entry["categories"] = json!(r.categories);
            }
            if let Some(storage) = &r.storage_api_version {
                entry["storageVersionHash"] = json!(storage_version_hash(storage, &r.kind));
            }
            resources.push(entry);
            for sub in &r.subresources {
                let mut entry = json!({
                    "name": format!("{}/{}", r.resource, sub.name), "singularName": "",
                    "namespaced": r.namespaced, "kind": sub.kind, "verbs": sub.verbs,
                });
                // A kind of another group version is named, as upstream names it
                // (`deployments/scale`: autoscaling/v1 Scale).
                if let Some(group) = &sub.group {
                    entry["group"] = json!(group);
                }
                if let Some(version) = &sub.version {
                    entry["version"] = json!(version);
                }
                resources.push(entry);
            }
        }
        if resources.is_empty() {
            return None;
        }
        Some(
            json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version(group, version), "resources": resources}),
        )
    }

    /// The aggregated document for `/api` (`core`) or `/apis`, in `apidiscovery.k8s.io/<version>`.
    pub fn aggregated(&self, core: bool, version: &str) -> Value {
        let items: Vec<Value> = self
            .groups(core)
            .iter()
            .map(|(group, versions)| {
                let versions: Vec<Value> = versions
                    .iter()
                    .map(|v| {
                        let resources: Vec<Value> = self
                            .resources_of(group, v)
                            .map(|r| {
                                let response_kind = json!({"group": r.group, "version": r.version, "kind": r.kind});
                                let mut entry = json!({
                                    "resource": r.resource, "responseKind": response_kind,
                                    "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
                                    "singularResource": r.singular, "verbs": r.verbs,
                                });
                                if !r.short_names.is_empty() {
                                    entry["shortNames"] = json!(r.short_names);
                                }
                                if !r.categories.is_empty() {
                                    entry["categories"] = json!(r.categories);
                                }
                                if !r.subresources.is_empty() {
                                    let subresources: Vec<Value> = r
                                        .subresources
                                        .iter()
                                        .map(|s| {
                                            let kind = r.subresource_gvk(s);
                                            json!({
                                                "subresource": s.name,
                                                "responseKind": {"group": kind.group, "version": kind.version, "kind": kind.kind},
                                                "verbs": s.verbs,
                                            })
                                        })
                                        .collect();
                                    entry["subresources"] = json!(subresources);
                                }
                                entry
                            })
                            .collect();
                        let stale = self.stale.iter().any(|(g, sv)| g == group && sv == v);
                        let freshness = if stale { "Stale" } else { "Current" };
                        json!({"version": v, "resources": resources, "freshness": freshness})
                    })
                    .collect();
                json!({"metadata": {"name": group}, "versions": versions})
            })
            .collect();
        json!({"kind": "APIGroupDiscoveryList", "apiVersion": format!("apidiscovery.k8s.io/{version}"), "metadata": {}, "items": items})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verbs(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    fn catalog() -> Discovery {
        let all = verbs(&[
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ]);
        Discovery::new(vec![
            ResourceDescription {
                group: String::new(),
                version: "v1".into(),
                kind: "Namespace".into(),
                list_kind: format!("{}List", "Namespace"),
                resource: "namespaces".into(),
                singular: "namespace".into(),
                short_names: verbs(&["ns"]),
                namespaced: false,
                verbs: verbs(&[
                    "create", "delete", "get", "list", "patch", "update", "watch",
                ]),
                categories: vec![],
                subresources: vec![
                    SubresourceDescription {
                        name: "status".into(),
                        kind: "Namespace".into(),
                        group: None,
                        version: None,
                        verbs: verbs(&["get", "patch", "update"]),
                    },
                    SubresourceDescription {
                        name: "finalize".into(),
                        kind: "Namespace".into(),
                        group: None,
                        version: None,
                        verbs: verbs(&["update"]),
                    },
                ],
                storage_api_version: Some("v1".into()),
            },
            ResourceDescription {
                group: String::new(),
                version: "v1".into(),
                kind: "ConfigMap".into(),
                list_kind: format!("{}List", "ConfigMap"),
                resource: "configmaps".into(),
                singular: "configmap".into(),
                short_names: verbs(&["cm"]),
                namespaced: true,
                verbs: all.clone(),
                categories: vec![],
                subresources: vec![],
                storage_api_version: Some("v1".into()),
            },
            ResourceDescription {
                group: "example.com".into(),
                version: "v1".into(),
                kind: "Widget".into(),
                list_kind: "WidgetList".into(),
                resource: "widgets".into(),
                singular: "widget".into(),
                short_names: vec![],
                namespaced: true,
                verbs: all.clone(),
                categories: vec![],
                subresources: vec![SubresourceDescription {
                    name: "scale".into(),
                    kind: "Scale".into(),
                    group: Some("autoscaling".into()),
                    version: Some("v1".into()),
                    verbs: verbs(&["get", "patch", "update"]),
                }],
                storage_api_version: None,
            },
            ResourceDescription {
                group: "coordination.k8s.io".into(),
                version: "v1".into(),
                kind: "Lease".into(),
                list_kind: format!("{}List", "Lease"),
                resource: "leases".into(),
                singular: "lease".into(),
                short_names: vec![],
                namespaced: true,
                verbs: all,
                categories: vec![],
                subresources: vec![],
                storage_api_version: Some("coordination.k8s.io/v1".into()),
            },
        ])
    }

    #[test]
    fn legacy_documents() {
        let d = catalog();
        assert_eq!(
            d.api_versions("10.0.0.1:6443"),
            json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "10.0.0.1:6443"}]})
        );
        let groups = d.api_group_list();
        assert_eq!(groups["groups"][1]["name"], "coordination.k8s.io");
        assert_eq!(
            groups["groups"][1]["preferredVersion"],
            json!({"groupVersion": "coordination.k8s.io/v1", "version": "v1"})
        );
        assert_eq!(
            groups["groups"].as_array().unwrap().len(),
            2,
            "the core group is not in /apis"
        );
        assert_eq!(
            d.api_group("coordination.k8s.io").unwrap()["kind"],
            "APIGroup"
        );
        assert!(d.api_group("apps").is_none());
        let core = d.api_resource_list("", "v1").unwrap();
        let names: Vec<&str> = core["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "namespaces",
                "namespaces/status",
                "namespaces/finalize",
                "configmaps"
            ]
        );
        assert_eq!(core["resources"][3]["shortNames"], json!(["cm"]));
        // Upstream's hashes of the storage versions (as kube-apiserver publishes them); none
        // for a subresource or a kind that is never stored.
        assert_eq!(core["resources"][0]["storageVersionHash"], "Q3oi5N2YM8M=");
        assert!(core["resources"][1].get("storageVersionHash").is_none());
        assert_eq!(core["resources"][3]["storageVersionHash"], "qFsyl6wFWjQ=");
        let leases = d.api_resource_list("coordination.k8s.io", "v1").unwrap();
        assert_eq!(leases["resources"][0]["storageVersionHash"], "gqkMMb/YqFM=");
        let widgets = d.api_resource_list("example.com", "v1").unwrap();
        assert!(widgets["resources"][0].get("storageVersionHash").is_none());
        assert_eq!(core["groupVersion"], "v1");
        assert!(d.api_resource_list("", "v2").is_none());
    }

    #[test]
    fn aggregated_documents_match_what_kubectl_reads() {
        let d = catalog();
        let core = d.aggregated(true, "v2");
        assert_eq!(core["apiVersion"], "apidiscovery.k8s.io/v2");
        assert_eq!(core["items"][0]["metadata"]["name"], "");
        let namespaces = &core["items"][0]["versions"][0]["resources"][0];
        assert_eq!(namespaces["scope"], "Cluster");
        assert_eq!(
            namespaces["responseKind"],
            json!({"group": "", "version": "v1", "kind": "Namespace"})
        );
        assert_eq!(namespaces["subresources"][0]["subresource"], "status");
        assert_eq!(core["items"][0]["versions"][0]["freshness"], "Current");
        let apis = d.aggregated(false, "v2beta1");
        assert_eq!(apis["items"].as_array().unwrap().len(), 2);
        assert_eq!(
            apis["items"][0]["versions"][0]["resources"][0]["scope"],
            "Namespaced"
        );
        assert_eq!(apis["apiVersion"], "apidiscovery.k8s.io/v2beta1");
    }

    #[test]
    fn aggregated_answers_are_serialized_once_per_form_and_carry_an_etag() {
        use crate::negotiation::{Format, Target};
        let d = catalog();
        let form = |version| Negotiated {
            format: Format::Json,
            target: Target::GroupDiscoveryList(version),
        };
        let answer = |d: &Discovery, core, version, headers: &HeaderMap| {
            let (parts, body) = d
                .aggregated_answer(core, version, &form(version), headers)
                .into_parts();
            let bytes = futures::executor::block_on(http_body_util::BodyExt::collect(body))
                .unwrap()
                .to_bytes();
            (Response::from_parts(parts, ()), bytes)
        };
        let (first, bytes) = answer(&d, false, "v2", &HeaderMap::new());
        assert_eq!(first.status(), StatusCode::OK);
        assert_eq!(
            first.headers()[CONTENT_TYPE],
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        );
        let served: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(served, d.aggregated(false, "v2"));
        let etag = first.headers()[ETAG].clone();
        assert_eq!(
            etag.to_str().unwrap(),
            format!("\"{}\"", crate::openapi::hash(&bytes))
        );
        // Kept compressed: the same bytes again, not a new serialization.
        let kept = |d: &Discovery| {
            let answers = d.answers.lock().unwrap();
            answers.iter().map(|a| a.gzip.as_ptr()).collect::<Vec<_>>()
        };
        assert_eq!(kept(&d).len(), 1);
        let (_, again) = answer(&d, false, "v2", &HeaderMap::new());
        assert_eq!(again, bytes);
        assert_eq!(kept(&d).len(), 1, "{:?}", kept(&d));
        // Each form is its own: /api, and another version.
        let (_, core) = answer(&d, true, "v2", &HeaderMap::new());
        assert_ne!(core, bytes);
        let (_, beta) = answer(&d, false, "v2beta1", &HeaderMap::new());
        assert!(String::from_utf8_lossy(&beta).contains("apidiscovery.k8s.io/v2beta1"));
        // A client that has it is told so.
        let mut cached = HeaderMap::new();
        cached.insert(hyper::header::IF_NONE_MATCH, etag.clone());
        let (not_modified, empty) = answer(&d, false, "v2", &cached);
        assert_eq!(not_modified.status(), StatusCode::NOT_MODIFIED);
        assert!(empty.is_empty());
        assert_eq!(not_modified.headers()[ETAG], etag);
        // Marking a group-version stale changes the document and its ETag.
        let stale = d.with_stale(vec![("example.com".to_owned(), "v1".to_owned())]);
        let (changed, bytes) = answer(&stale, false, "v2", &cached);
        assert_eq!(changed.status(), StatusCode::OK);
        assert!(String::from_utf8_lossy(&bytes).contains("Stale"));
        assert_ne!(changed.headers()[ETAG], etag);
    }

    #[test]
    fn a_subresource_of_another_group_names_its_kind_in_both_forms() {
        let d = catalog();
        let legacy = d.api_resource_list("example.com", "v1").unwrap();
        assert_eq!(
            legacy["resources"][1],
            json!({
                "name": "widgets/scale", "singularName": "", "namespaced": true,
                "kind": "Scale", "group": "autoscaling", "version": "v1",
                "verbs": ["get", "patch", "update"],
            })
        );
        // A subresource of the resource's own kind names no group or version.
        let core = d.api_resource_list("", "v1").unwrap();
        assert!(core["resources"][1].get("group").is_none(), "{core}");
        let apis = d.aggregated(false, "v2");
        let widgets = &apis["items"][0]["versions"][0]["resources"][0];
        assert_eq!(widgets["resource"], "widgets");
        assert_eq!(
            widgets["subresources"][0]["responseKind"],
            json!({"group": "autoscaling", "version": "v1", "kind": "Scale"})
        );
        let core = d.aggregated(true, "v2");
        assert_eq!(
            core["items"][0]["versions"][0]["resources"][0]["subresources"][0]["responseKind"],
            json!({"group": "", "version": "v1", "kind": "Namespace"})
        );
    }
}
