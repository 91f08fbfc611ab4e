//! Discovery of every served resource, as the controllers need it (the namespace controller
//! and the garbage collector): the preferred version of each group (what they act on) and every version's kinds
//! (how an `ownerReference`'s `apiVersion`/`kind` is resolved), with the groups that failed.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;
use kube::Client;
use kube::core::ApiResource;

/// One resource of one group version.
#[derive(Clone, Debug)]
pub struct Resource {
    /// Group, version, kind and plural.
    pub api: ApiResource,
    /// Whether its objects live in namespaces.
    pub namespaced: bool,
    /// The verbs discovery lists for it.
    pub verbs: Vec<String>,
}

impl Resource {
    /// Whether every verb in `verbs` is supported.
    pub fn supports(&self, verbs: &[&str]) -> bool {
        verbs
            .iter()
            .all(|v| self.verbs.iter().any(|have| have == v))
    }

    /// `resource.group` (`configmaps.` for the core group), as upstream prints a group
    /// resource in namespace conditions.
    pub fn group_resource(&self) -> String {
        format!("{}.{}", self.api.plural, self.api.group)
    }
}

/// What one discovery round found.
#[derive(Debug, Default)]
pub struct Discovered {
    /// The resources (no subresources) of each group's preferred version.
    pub preferred: Vec<Resource>,
    /// Every version's resources by `(apiVersion, kind)`.
    pub by_kind: HashMap<(String, String), Resource>,
    /// The group versions whose resources could not be listed, with the error.
    pub failed: BTreeMap<String, String>,
    /// The group versions the server listed that do not parse.
    pub unparsable: Vec<String>,
}

impl Discovered {
    /// Resolves an `apiVersion` and `kind` (an owner reference's) to its resource.
    pub fn resolve(&self, api_version: &str, kind: &str) -> Option<&Resource> {
        self.by_kind.get(&(api_version.to_owned(), kind.to_owned()))
    }

    /// Upstream's text for partial discovery failures.
    pub fn failure_message(&self) -> Option<String> {
        if self.failed.is_empty() {
            return None;
        }
        let groups: Vec<String> = self
            .failed
            .iter()
            .map(|(gv, e)| format!("{gv}: {e}"))
            .collect();
        Some(format!(
            "Discovery failed for some groups, {} failing: unable to retrieve the complete list of server APIs: {}",
            self.failed.len(),
            groups.join(", ")
        ))
    }

    fn add(&mut self, group_version: &str, list: APIResourceList, preferred: bool) {
        let (group, version) = match group_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", group_version),
        };
        for r in list.resources {
            if r.name.contains('/') {
                continue;
            }
            let api = ApiResource {
                group: group.to_owned(),
                version: version.to_owned(),
                api_version: group_version.to_owned(),
                kind: r.kind.clone(),
                plural: r.name.clone(),
            };
            let resource = Resource {
                api,
                namespaced: r.namespaced,
                verbs: r.verbs.clone(),
            };
            self.by_kind
                .entry((group_version.to_owned(), r.kind.clone()))
                .or_insert_with(|| resource.clone());
            if preferred {
                self.preferred.push(resource);
            }
        }
    }
}

/// Whether a group version string parses (`v1`, `group/v1`).
fn parses(group_version: &str) -> bool {
    !group_version.is_empty() && group_version.split('/').count() <= 2
}

/// Runs discovery: fails only when the list of groups itself cannot be read; a group version
/// that fails is recorded in [`Discovered::failed`].
pub async fn discover(client: &Client) -> Result<Discovered, kube::Error> {
    let mut found = Discovered::default();
    let core = client.list_core_api_versions().await?;
    for version in &core.versions {
        let preferred = Some(version) == core.versions.first();
        match client.list_core_api_resources(version).await {
            Ok(list) => found.add(version, list, preferred),
            Err(e) => {
                found.failed.insert(version.clone(), e.to_string());
            }
        }
    }
    let groups = client.list_api_groups().await?;
    for group in groups.groups {
        let preferred = group
            .preferred_version
            .as_ref()
            .map(|p| p.group_version.clone())
            .or_else(|| group.versions.first().map(|v| v.group_version.clone()));
        for version in &group.versions {
            let gv = &version.group_version;
            if !parses(gv) {
                found
                    .unparsable
                    .push(format!("unexpected GroupVersion string: {gv}"));
                continue;
            }
            match client.list_api_group_resources(gv).await {
                Ok(list) => found.add(gv, list, Some(gv) == preferred.as_ref()),
                Err(e) => {
                    found.failed.insert(gv.clone(), e.to_string());
                }
            }
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResource;

    fn list(gv: &str, resources: &[(&str, &str, bool)]) -> APIResourceList {
        APIResourceList {
            group_version: gv.to_owned(),
            resources: resources
                .iter()
                .map(|(name, kind, namespaced)| APIResource {
                    name: (*name).to_owned(),
                    kind: (*kind).to_owned(),
                    namespaced: *namespaced,
                    verbs: vec!["list".into(), "delete".into()],
                    ..APIResource::default()
                })
                .collect(),
        }
    }

    #[test]
    fn preferred_resources_skip_subresources_and_every_version_resolves() {
        let mut d = Discovered::default();
        d.add(
            "v1",
            list(
                "v1",
                &[
                    ("configmaps", "ConfigMap", true),
                    ("namespaces/status", "Namespace", false),
                ],
            ),
            true,
        );
        d.add(
            "example.com/v1",
            list("example.com/v1", &[("widgets", "Widget", true)]),
            true,
        );
        d.add(
            "example.com/v1beta1",
            list("example.com/v1beta1", &[("widgets", "Widget", true)]),
            false,
        );
        let names: Vec<String> = d.preferred.iter().map(Resource::group_resource).collect();
        assert_eq!(names, ["configmaps.", "widgets.example.com"]);
        assert_eq!(
            d.resolve("example.com/v1beta1", "Widget")
                .map(|r| r.api.version.as_str()),
            Some("v1beta1")
        );
        assert!(d.resolve("v1", "Namespace").is_none());
        assert!(d.preferred[0].supports(&["list", "delete"]));
        assert!(!d.preferred[0].supports(&["watch"]));
    }

    #[test]
    fn failure_message_names_each_group_version() {
        let mut d = Discovered::default();
        assert!(d.failure_message().is_none());
        d.failed.insert("example.com/v1".into(), "boom".into());
        assert_eq!(
            d.failure_message().as_deref(),
            Some(
                "Discovery failed for some groups, 1 failing: unable to retrieve the complete list of server APIs: example.com/v1: boom"
            )
        );
        assert!(parses("v1") && parses("a/v1") && !parses("a/b/c"));
    }
}
