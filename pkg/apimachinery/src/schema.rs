//! Names of API groups, versions, kinds and resources.

use std::fmt;

/// An API group and version, e.g. `apps/v1`, or `v1` for the core group.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupVersion {
    /// The group; empty for the core (legacy) group.
    pub group: String,
    /// The version.
    pub version: String,
}

impl GroupVersion {
    /// `group/version`.
    pub fn new(group: &str, version: &str) -> Self {
        Self {
            group: group.to_owned(),
            version: version.to_owned(),
        }
    }

    /// Parses an `apiVersion`: `v1` (core) or `group/version`. `None` when it is malformed.
    pub fn parse(api_version: &str) -> Option<Self> {
        match api_version.split_once('/') {
            None if !api_version.is_empty() => Some(Self::new("", api_version)),
            Some((group, version))
                if !group.is_empty() && !version.is_empty() && !version.contains('/') =>
            {
                Some(Self::new(group, version))
            }
            _ => None,
        }
    }

    /// The `apiVersion` string: `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

impl fmt::Display for GroupVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.api_version())
    }
}

/// A kind in a group and version, e.g. `v1, Kind=ConfigMap`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupVersionKind {
    /// The group.
    pub group: String,
    /// The version.
    pub version: String,
    /// The kind, e.g. `ConfigMap`.
    pub kind: String,
}

impl GroupVersionKind {
    /// The kind `kind` in `group`/`version`.
    pub fn new(group: &str, version: &str, kind: &str) -> Self {
        Self {
            group: group.to_owned(),
            version: version.to_owned(),
            kind: kind.to_owned(),
        }
    }

    /// The group and version.
    pub fn group_version(&self) -> GroupVersion {
        GroupVersion::new(&self.group, &self.version)
    }

    /// The group and kind.
    pub fn group_kind(&self) -> GroupKind {
        GroupKind::new(&self.group, &self.kind)
    }
}

/// A resource in a group and version, e.g. `configmaps` in `v1`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupVersionResource {
    /// The group.
    pub group: String,
    /// The version.
    pub version: String,
    /// The resource (plural, lower case), e.g. `configmaps`.
    pub resource: String,
}

impl GroupVersionResource {
    /// The resource `resource` in `group`/`version`.
    pub fn new(group: &str, version: &str, resource: &str) -> Self {
        Self {
            group: group.to_owned(),
            version: version.to_owned(),
            resource: resource.to_owned(),
        }
    }

    /// The group and resource.
    pub fn group_resource(&self) -> GroupResource {
        GroupResource::new(&self.group, &self.resource)
    }
}

/// A resource in a group, as errors name it: `configmaps`, or `deployments.apps`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupResource {
    /// The group.
    pub group: String,
    /// The resource.
    pub resource: String,
}

impl GroupResource {
    /// The resource `resource` in `group`.
    pub fn new(group: &str, resource: &str) -> Self {
        Self {
            group: group.to_owned(),
            resource: resource.to_owned(),
        }
    }
}

impl fmt::Display for GroupResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

/// A kind in a group, as errors name it: `ConfigMap`, or `Deployment.apps`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupKind {
    /// The group.
    pub group: String,
    /// The kind.
    pub kind: String,
}

impl GroupKind {
    /// The kind `kind` in `group`.
    pub fn new(group: &str, kind: &str) -> Self {
        Self {
            group: group.to_owned(),
            kind: kind.to_owned(),
        }
    }
}

impl fmt::Display for GroupKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.kind)
        } else {
            write!(f, "{}.{}", self.kind, self.group)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_versions_parse_and_render() {
        assert_eq!(GroupVersion::parse("v1"), Some(GroupVersion::new("", "v1")));
        assert_eq!(
            GroupVersion::parse("apps/v1"),
            Some(GroupVersion::new("apps", "v1"))
        );
        for bad in ["", "/v1", "apps/", "a/b/c"] {
            assert_eq!(GroupVersion::parse(bad), None, "{bad}");
        }
        assert_eq!(GroupVersion::new("apps", "v1").to_string(), "apps/v1");
        assert_eq!(GroupVersion::new("", "v1").to_string(), "v1");
    }

    #[test]
    fn qualified_names_render_like_kubernetes() {
        assert_eq!(
            GroupResource::new("", "configmaps").to_string(),
            "configmaps"
        );
        assert_eq!(
            GroupResource::new("coordination.k8s.io", "leases").to_string(),
            "leases.coordination.k8s.io"
        );
        assert_eq!(GroupKind::new("", "ConfigMap").to_string(), "ConfigMap");
        assert_eq!(
            GroupKind::new("apps", "Deployment").to_string(),
            "Deployment.apps"
        );
    }
}
