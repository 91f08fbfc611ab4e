//! `featuregates.genplane.io/v1alpha1`: genplane's Feature API (KEP-3920, stage 1).
//!
//! One [`feature`] object per feature gate, in the namespace of its owner (`kube-system` for
//! the features genplane knows; third parties use their own namespace). The object's name is
//! derived from the feature's name by [`object_name`], so that every component finds the object
//! of a feature without listing:
//!
//! - a `-` goes before an upper-case letter that follows a lower-case letter or a digit, and
//!   before the last upper-case letter of a run followed by a lower-case one (an acronym ends);
//! - `_` becomes `-`; everything is lower-cased.
//!
//! `CoordinatedLeaderElection` is `coordinated-leader-election`, `APIServerIdentity` is
//! `api-server-identity`, `WatchList` is `watch-list`. The strategy refuses an object whose
//! name is not its feature's.

pub mod feature;

/// The API group.
pub const GROUP: &str = "featuregates.genplane.io";
/// The served version.
pub const VERSION: &str = "v1alpha1";
/// The `apiVersion` of the group's objects.
pub const API_VERSION: &str = "featuregates.genplane.io/v1alpha1";
/// The namespace of the features genplane's own components know.
pub const SYSTEM_NAMESPACE: &str = "kube-system";

/// The label of the identity Lease (in `kube-system`) of every component instance that reports
/// feature uses or runs the feature-controller; its value is the component.
pub const IDENTITY_LABEL: &str = "featuregates.genplane.io/identity";
/// The component name of the feature-controller: its identity Leases' label value, and the one
/// component that writes a Feature's state.
pub const FEATURE_CONTROLLER: &str = "feature-controller";
/// The component name the API servers report their uses as.
pub const API_SERVER: &str = "apiserver";
/// The annotation of an API server's identity Lease naming, comma-separated, the features it
/// lets clients set (its `--dynamic-features`): a feature is dynamic while every live API server
/// names it.
pub const DYNAMIC_FEATURES_ANNOTATION: &str = "featuregates.genplane.io/dynamic-features";
/// The resource of the `report` permission: `components/<component>` of this group (it has no
/// objects; RBAC rules name components in `resourceNames`). Taking part as a component (its
/// identity Leases, its entries of a Feature's `status.uses`, and for the feature-controller
/// the rest of the status) needs verb [`REPORT`] on it.
pub const COMPONENTS: &str = "components";
/// The verb of taking part as a component (see [`COMPONENTS`]).
pub const REPORT: &str = "report";
/// The longest a feature-controller identity Lease may last (`spec.leaseDurationSeconds`), and
/// the longest the feature-controllers count one as live after its renewal: a Lease lasting
/// longer would keep a dead (or silent) instance the acting one for that long.
pub const MAX_CONTROLLER_LEASE_SECONDS: i32 = 300;

/// Whether a feature in the Feature state `state` (`status.state`) may have objects of its kinds
/// stored: it is on, or turning on or off. A role whose gate is off still serves or runs what
/// removes those objects until the state is `Off` (or the Feature does not exist).
pub fn may_hold_objects(state: Option<&str>) -> bool {
    matches!(state, Some("On" | "TurningOn" | "TurningOff"))
}

/// The object name of the Feature for `feature` (see the module documentation).
pub fn object_name(feature: &str) -> String {
    let chars: Vec<char> = feature.chars().collect();
    let mut name = String::with_capacity(feature.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if c == '_' {
            name.push('-');
            continue;
        }
        if c.is_ascii_uppercase() && i > 0 {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(char::is_ascii_lowercase);
            let boundary = prev.is_ascii_lowercase()
                || prev.is_ascii_digit()
                || (prev.is_ascii_uppercase() && next_lower);
            if boundary && !name.ends_with('-') {
                name.push('-');
            }
        }
        name.push(c.to_ascii_lowercase());
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_names_are_kebab_case_with_acronyms_kept_together() {
        for (feature, name) in [
            ("CoordinatedLeaderElection", "coordinated-leader-election"),
            ("APIServerIdentity", "api-server-identity"),
            ("WatchList", "watch-list"),
            ("OpenAPIV3", "open-apiv3"),
            ("HPAScaleToZero", "hpa-scale-to-zero"),
            ("Feature_With_Underscores", "feature-with-underscores"),
            ("SizeMemoryBackedVolumes2", "size-memory-backed-volumes2"),
            ("a", "a"),
        ] {
            assert_eq!(object_name(feature), name, "{feature}");
        }
    }
}
