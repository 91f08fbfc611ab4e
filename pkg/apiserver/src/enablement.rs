//! Which built-in APIs are served: `--runtime-config`, read as kube-apiserver reads it.
//!
//! The flag is a list of `key=value` entries (a missing value means `true`; later entries win):
//!
//! - `api/all`, `api/ga`, `api/beta`, `api/alpha`: every group version, or those whose version
//!   is GA (`v1`), beta (`v1beta1`) or alpha (`v1alpha1`). Applied first, in that order,
//!   whatever their place in the list; their value must be `true` or `false`.
//! - `<group>/<version>`: one group version (`events.k8s.io/v1`; the core group is `api/v1`,
//!   `api/legacy` naming it too). Applied next.
//! - `<group>/<version>/<resource>`: one resource of a group version (lowercase plural).
//!   Applied last, so that it wins over its group version.
//!
//! As upstream, a key naming a group the server does not have is ignored (it may belong to
//! another server of the cluster, or to custom resources, which the flag never affects); a
//! version the server does not have in a group it has is an error, as is a value that is not a
//! boolean. By default every built-in group version is served but those upstream serves only
//! on request, which need the flag as upstream ([`DEFAULT_OFF`]: the alpha
//! `admissionregistration.k8s.io/v1alpha1`, and `certificates.k8s.io/v1beta1`, a beta API
//! introduced after 1.24 and so off by default);
//! genplane's own alpha groups (`featuregates.genplane.io`, `networkregistry.genplane.io`) are
//! served by default.
//! A disabled API is gone from discovery, the OpenAPI documents and routing (404).

use std::collections::BTreeMap;

/// A served API, as the flag names it: group ("" for core), version and resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Api<'a> {
    /// The group ("" for core).
    pub group: &'a str,
    /// The version.
    pub version: &'a str,
    /// The plural resource name.
    pub resource: &'a str,
}

/// A `--runtime-config` that cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EnablementError {
    /// A value of `api/all` (`ga`, `beta`, `alpha`) that is neither `true` nor `false`.
    #[error("invalid value {key}={value}")]
    InvalidSelectorValue {
        /// The key.
        key: String,
        /// The value given.
        value: String,
    },
    /// A value that is not a boolean.
    #[error(
        "invalid value of {key}: {value}, err: strconv.ParseBool: parsing {value:?}: invalid syntax"
    )]
    InvalidValue {
        /// The key.
        key: String,
        /// The value given.
        value: String,
    },
    /// A key that is not `group/version` or `group/version/resource`.
    #[error("runtime-config invalid key {0}")]
    InvalidKey(String),
    /// A resource named other than in lowercase.
    #[error(
        "invalid key {key}: group/version/resource and resource is always lowercase plural, not {resource:?}"
    )]
    NotLowercase {
        /// The key.
        key: String,
        /// The resource part.
        resource: String,
    },
    /// A version the server does not have, of a group it has.
    #[error("group version {0} that has not been registered")]
    UnknownVersion(String),
}

/// Which APIs are served. The default serves every one but those of [`DEFAULT_OFF`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApiEnablement {
    /// Group versions switched by the selectors (`api/all`, ...) or by name: `(group,
    /// version) -> enabled`. Missing: enabled.
    versions: BTreeMap<(String, String), bool>,
    /// Resources switched by name: `(group, version, resource) -> enabled`.
    resources: BTreeMap<(String, String, String), bool>,
}

/// The built-in group versions served only when `--runtime-config` enables them, off by
/// default as in kube-apiserver 1.33: its alpha versions, and its beta versions introduced
/// since 1.24 (ClusterTrustBundle's).
pub const DEFAULT_OFF: &[(&str, &str)] = &[
    ("admissionregistration.k8s.io", "v1alpha1"),
    ("certificates.k8s.io", "v1beta1"),
];

/// The selectors, in the order they are applied.
const SELECTORS: &[&str] = &["api/all", "api/ga", "api/beta", "api/alpha"];

/// Whether `version` is matched by `selector`.
fn matches(selector: &str, version: &str) -> bool {
    let Some(rest) = version.strip_prefix('v') else {
        return false;
    };
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    if digits == 0 {
        return selector == "api/all";
    }
    let rest = &rest[digits..];
    let stage = |name: &str| {
        rest.strip_prefix(name)
            .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
    };
    match selector {
        "api/all" => true,
        "api/ga" => rest.is_empty(),
        "api/beta" => stage("beta"),
        "api/alpha" => stage("alpha"),
        _ => false,
    }
}

impl ApiEnablement {
    /// The defaults: every API served but those of [`DEFAULT_OFF`].
    pub fn all() -> Self {
        Self::default()
    }

    /// Reads the entries of `--runtime-config` (each `key=value`, or a bare `key`) against the
    /// APIs the server has, `registered`.
    pub fn parse<'a>(
        entries: &[String],
        registered: impl IntoIterator<Item = Api<'a>>,
    ) -> Result<Self, EnablementError> {
        let registered: Vec<Api<'a>> = registered.into_iter().collect();
        // Later entries win, as a map of the flag keeps the last value of a key.
        let mut overrides: Vec<(String, String)> = Vec::new();
        for entry in entries.iter().filter(|e| !e.trim().is_empty()) {
            let (key, value) = match entry.split_once('=') {
                Some((key, value)) => (key.trim(), value.trim()),
                None => (entry.trim(), ""),
            };
            // The core group's old names.
            let key = if key == "api/legacy" { "api/v1" } else { key };
            overrides.retain(|(k, _)| k != key);
            overrides.push((key.to_owned(), value.to_owned()));
        }
        let mut versions: BTreeMap<(String, String), bool> = BTreeMap::new();
        let mut group_versions: Vec<(&str, &str)> = Vec::new();
        for api in &registered {
            if !group_versions.contains(&(api.group, api.version)) {
                group_versions.push((api.group, api.version));
            }
        }
        for selector in SELECTORS {
            let Some((_, value)) = overrides.iter().find(|(k, _)| k == selector) else {
                continue;
            };
            let enabled = match value.as_str() {
                "true" => true,
                "false" => false,
                _ => {
                    return Err(EnablementError::InvalidSelectorValue {
                        key: (*selector).to_owned(),
                        value: value.clone(),
                    });
                }
            };
            for (group, version) in &group_versions {
                if matches(selector, version) {
                    versions.insert(((*group).to_owned(), (*version).to_owned()), enabled);
                }
            }
        }
        let mut resources = BTreeMap::new();
        let mut resource_preferences = Vec::new();
        for (key, value) in &overrides {
            if SELECTORS.contains(&key.as_str()) {
                continue;
            }
            let tokens: Vec<&str> = key.split('/').collect();
            if !(2..=3).contains(&tokens.len()) || tokens[..2].iter().any(|t| t.is_empty()) {
                return Err(EnablementError::InvalidKey(key.clone()));
            }
            // `api/v1` is the core group's v1.
            let group = if tokens[0] == "api" { "" } else { tokens[0] };
            let version = tokens[1];
            if !registered.iter().any(|a| a.group == group) {
                continue;
            }
            if !group_versions.contains(&(group, version)) {
                return Err(EnablementError::UnknownVersion(format!(
                    "{}/{version}",
                    tokens[0]
                )));
            }
            let enabled = parse_bool(value).ok_or_else(|| EnablementError::InvalidValue {
                key: key.clone(),
                value: value.clone(),
            })?;
            match tokens.get(2) {
                None => {
                    versions.insert((group.to_owned(), version.to_owned()), enabled);
                }
                Some(resource) => {
                    if resource.to_lowercase() != *resource {
                        return Err(EnablementError::NotLowercase {
                            key: key.clone(),
                            resource: (*resource).to_owned(),
                        });
                    }
                    resource_preferences.push((
                        (group.to_owned(), version.to_owned(), (*resource).to_owned()),
                        enabled,
                    ));
                }
            }
        }
        // Resources last: they win over their group version.
        resources.extend(resource_preferences);
        Ok(Self {
            versions,
            resources,
        })
    }

    /// Whether `api` is served.
    pub fn serves(&self, api: Api<'_>) -> bool {
        let resource = (
            api.group.to_owned(),
            api.version.to_owned(),
            api.resource.to_owned(),
        );
        if let Some(enabled) = self.resources.get(&resource) {
            return *enabled;
        }
        self.versions
            .get(&(api.group.to_owned(), api.version.to_owned()))
            .copied()
            .unwrap_or_else(|| !DEFAULT_OFF.contains(&(api.group, api.version)))
    }

    /// Whether the built-in resource `info` is served.
    pub fn serves_info(&self, info: &genplane_api::catalog::ResourceInfo) -> bool {
        self.serves(Api {
            group: info.group,
            version: info.version,
            resource: info.resource,
        })
    }

    /// Every API of the built-in catalog (the reviews included): what `--runtime-config` is
    /// read against.
    pub fn builtin_apis() -> impl Iterator<Item = Api<'static>> {
        genplane_api::catalog::all().iter().map(|info| Api {
            group: info.group,
            version: info.version,
            resource: info.resource,
        })
    }
}

/// A boolean as Go's `strconv.ParseBool` reads it; an empty value is `true` (a bare key).
fn parse_bool(value: &str) -> Option<bool> {
    if value.is_empty() {
        return Some(true);
    }
    genplane_component_base::strconv::parse_bool(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registered() -> Vec<Api<'static>> {
        let api = |group, version, resource| Api {
            group,
            version,
            resource,
        };
        vec![
            api("", "v1", "configmaps"),
            api("", "v1", "events"),
            api("events.k8s.io", "v1", "events"),
            api("coordination.k8s.io", "v1", "leases"),
            api("coordination.k8s.io", "v1beta1", "leasecandidates"),
            api("example.io", "v1alpha1", "widgets"),
        ]
    }

    fn parse(entries: &[&str]) -> Result<ApiEnablement, EnablementError> {
        let entries: Vec<String> = entries.iter().map(|e| (*e).to_owned()).collect();
        ApiEnablement::parse(&entries, registered())
    }

    fn served(enablement: &ApiEnablement) -> Vec<String> {
        registered()
            .into_iter()
            .filter(|a| enablement.serves(*a))
            .map(|a| format!("{}/{}/{}", a.group, a.version, a.resource))
            .collect()
    }

    #[test]
    fn a_group_version_is_disabled_and_the_core_group_keeps_its_own() {
        let enablement = parse(&["events.k8s.io/v1=false"]).unwrap();
        assert_eq!(
            served(&enablement),
            [
                "/v1/configmaps",
                "/v1/events",
                "coordination.k8s.io/v1/leases",
                "coordination.k8s.io/v1beta1/leasecandidates",
                "example.io/v1alpha1/widgets"
            ]
        );
    }

    #[test]
    fn selectors_apply_first_then_versions_then_resources() {
        // Written in the opposite order: the order of application is fixed.
        let enablement = parse(&[
            "coordination.k8s.io/v1/leases=true",
            "api/v1",
            "api/all=false",
        ])
        .unwrap();
        assert_eq!(
            served(&enablement),
            [
                "/v1/configmaps",
                "/v1/events",
                "coordination.k8s.io/v1/leases"
            ]
        );
        let enablement = parse(&["api/beta=false", "api/alpha=false"]).unwrap();
        assert_eq!(
            served(&enablement),
            [
                "/v1/configmaps",
                "/v1/events",
                "events.k8s.io/v1/events",
                "coordination.k8s.io/v1/leases"
            ]
        );
        let enablement = parse(&["api/ga=false", "api/legacy=true"]).unwrap();
        assert_eq!(
            served(&enablement),
            [
                "/v1/configmaps",
                "/v1/events",
                "coordination.k8s.io/v1beta1/leasecandidates",
                "example.io/v1alpha1/widgets"
            ]
        );
        // The last entry of a key wins; a bare key is true.
        let enablement = parse(&["v1/x", "events.k8s.io/v1=false", "events.k8s.io/v1"]).unwrap();
        assert_eq!(served(&enablement).len(), registered().len());
        // A resource disabled alone.
        let enablement = parse(&["api/v1/events=false"]).unwrap();
        assert!(!served(&enablement).contains(&"/v1/events".to_owned()));
        assert!(served(&enablement).contains(&"/v1/configmaps".to_owned()));
    }

    #[test]
    fn upstreams_off_by_default_apis_are_served_only_when_enabled() {
        let map = Api {
            group: "admissionregistration.k8s.io",
            version: "v1alpha1",
            resource: "mutatingadmissionpolicies",
        };
        let registered = [map];
        let with = |entries: &[&str]| {
            let entries: Vec<String> = entries.iter().map(|e| (*e).to_owned()).collect();
            ApiEnablement::parse(&entries, registered)
                .unwrap()
                .serves(map)
        };
        assert!(!ApiEnablement::all().serves(map));
        assert!(!with(&[]));
        assert!(with(&["admissionregistration.k8s.io/v1alpha1=true"]));
        assert!(with(&["admissionregistration.k8s.io/v1alpha1"]));
        assert!(with(&["api/alpha=true"]));
        assert!(with(&["api/all=true"]));
        assert!(!with(&[
            "api/all=true",
            "admissionregistration.k8s.io/v1alpha1=false"
        ]));
        assert!(with(&[
            "admissionregistration.k8s.io/v1alpha1/mutatingadmissionpolicies=true"
        ]));
        // ClusterTrustBundles' beta version too, as upstream's beta APIs since 1.24.
        let ctb = Api {
            group: "certificates.k8s.io",
            version: "v1beta1",
            resource: "clustertrustbundles",
        };
        let csr = Api {
            group: "certificates.k8s.io",
            version: "v1",
            resource: "certificatesigningrequests",
        };
        let serves = |entries: &[&str], api: Api<'static>| {
            let entries: Vec<String> = entries.iter().map(|e| (*e).to_owned()).collect();
            ApiEnablement::parse(&entries, [ctb, csr])
                .unwrap()
                .serves(api)
        };
        assert!(!ApiEnablement::all().serves(ctb));
        assert!(ApiEnablement::all().serves(csr));
        assert!(serves(&["certificates.k8s.io/v1beta1=true"], ctb));
        assert!(serves(&["api/beta=true"], ctb));
        assert!(!serves(&["certificates.k8s.io/v1=true"], ctb));
        // genplane's own alpha groups stay served by default
        assert!(ApiEnablement::all().serves(Api {
            group: "networkregistry.genplane.io",
            version: "v1alpha1",
            resource: "networkclaims",
        }));
    }

    #[test]
    fn unknown_groups_are_ignored_and_bad_entries_refused() {
        assert_eq!(
            parse(&["apps/v1=false", "batch/v1/jobs=false"]).unwrap(),
            ApiEnablement::all()
        );
        let errors = [
            ("api/all=no", "invalid value api/all=no"),
            (
                "events.k8s.io/v1=maybe",
                "invalid value of events.k8s.io/v1: maybe, err: strconv.ParseBool: parsing \"maybe\": invalid syntax",
            ),
            (
                "events.k8s.io/v2=false",
                "group version events.k8s.io/v2 that has not been registered",
            ),
            ("events.k8s.io", "runtime-config invalid key events.k8s.io"),
            ("a/b/c/d=true", "runtime-config invalid key a/b/c/d"),
            (
                "events.k8s.io/v1/Events=false",
                "invalid key events.k8s.io/v1/Events: group/version/resource and resource is always lowercase plural, not \"Events\"",
            ),
        ];
        for (entry, message) in errors {
            assert_eq!(parse(&[entry]).unwrap_err().to_string(), message, "{entry}");
        }
    }
}
