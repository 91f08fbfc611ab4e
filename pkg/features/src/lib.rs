//! The feature gates of the `genplane` binary, with their upstream history: one place for every
//! role's features, as upstream's `pkg/features` is for Kubernetes' components.
//!
//! Each feature is a [`Feature`] constant with its history ([`FeatureSpec`]s), the tasks turning
//! it off runs ([`Task`]), and whether it may be dynamic or is central. [`registry`] holds every
//! feature of the binary (what the API servers resolve their `--feature-gates` against and what
//! the feature-controller announces); a role that knows fewer registers only its own (the
//! controller-manager: [`network_registry::register`] and [`controllers::register`]).
//!
//! This crate depends on nothing but the kinds and the feature-gate machinery, so every role
//! (and the feature-controller, which serves no API) can hold the whole registry.

#![warn(missing_docs)]

pub mod controllers;
pub mod network_registry;

use genplane_component_base::featuregate::{
    Feature, FeatureSpec, Registry, ResourceRef, Stage, Task, Version,
};

/// `APIServerIdentity` (KEP-1965): each API server publishes an identity Lease in
/// `kube-system`. Alpha in 1.20, beta and on by default since 1.26.
pub const API_SERVER_IDENTITY: Feature = Feature::new("APIServerIdentity");

/// `CoordinatedLeaderElection` (KEP-4444): Lease `spec.strategy` and `spec.preferredHolder`.
/// Alpha in 1.31, beta (still off by default) in 1.33. Turning it off clears both fields from
/// every stored Lease ([`CLEAR_LEASE_STRATEGY`]), since the strategy of a server with the
/// feature off keeps them on every update of a Lease that has them.
pub const COORDINATED_LEADER_ELECTION: Feature =
    Feature::new(genplane_api::features::COORDINATED_LEADER_ELECTION);

/// `APIResponseCompression`: large answers gzip-compressed for clients that accept it. Alpha in
/// 1.7, beta and on by default since 1.16. Stateless and consulted for each answer, so it may be
/// dynamic.
pub const API_RESPONSE_COMPRESSION: Feature = Feature::new("APIResponseCompression");

/// `NetworkRegistry` (genplane's own, the draft KANA proposal): the
/// `networkregistry.genplane.io` API is served only while it is on. Registered, for every role,
/// by [`network_registry::register`] (alpha in 1.33, off by default, central).
pub const NETWORK_REGISTRY: Feature = network_registry::FEATURE;

/// `MutatingAdmissionPolicy` (KEP-3962): the `admissionregistration.k8s.io/v1alpha1`
/// MutatingAdmissionPolicies and bindings are served (when `--runtime-config` enables the
/// group version too) and the admission plugin applies them only while it is on. Alpha since
/// 1.30, off by default.
pub const MUTATING_ADMISSION_POLICY: Feature =
    Feature::new(genplane_api::features::MUTATING_ADMISSION_POLICY);

/// `ClusterTrustBundle` (KEP-3257): the `certificates.k8s.io/v1beta1` ClusterTrustBundles are
/// served (when `--runtime-config` enables the group version too) only while it is on. Alpha
/// in 1.27, beta (still off by default) in 1.33.
pub const CLUSTER_TRUST_BUNDLE: Feature =
    Feature::new(genplane_api::features::CLUSTER_TRUST_BUNDLE);

/// The task that turning ClusterTrustBundle off runs once every API server runs with it off:
/// the ClusterTrustBundles, served only while it is on, must be gone.
pub const REMOVE_CLUSTER_TRUST_BUNDLES: Task = Task::WaitForObjectsRemoved {
    target: ResourceRef::new(
        "certificates.k8s.io",
        "v1beta1",
        "clustertrustbundles",
        "ClusterTrustBundle",
    ),
};

/// The tasks that turning MutatingAdmissionPolicy off runs once every API server runs with it
/// off: the bindings, then the policies, served only while it is on, must be gone.
pub const REMOVE_MUTATING_ADMISSION_POLICIES: [Task; 2] = [
    Task::WaitForObjectsRemoved {
        target: ResourceRef::new(
            "admissionregistration.k8s.io",
            "v1alpha1",
            "mutatingadmissionpolicybindings",
            "MutatingAdmissionPolicyBinding",
        ),
    },
    Task::WaitForObjectsRemoved {
        target: ResourceRef::new(
            "admissionregistration.k8s.io",
            "v1alpha1",
            "mutatingadmissionpolicies",
            "MutatingAdmissionPolicy",
        ),
    },
];

/// The task that turning APIServerIdentity off runs once every API server runs with it off:
/// the identity Leases the servers kept are deleted (with the feature off, nothing renews or
/// collects them).
pub const DELETE_IDENTITY_LEASES: Task = Task::DeleteObjects {
    target: ResourceRef::new("coordination.k8s.io", "v1", "leases", "Lease"),
    selector: "apiserver.kubernetes.io/identity=kube-apiserver",
};

/// The task that turning CoordinatedLeaderElection off runs once every component agrees.
pub const CLEAR_LEASE_STRATEGY: Task = Task::ClearField {
    target: ResourceRef::new("coordination.k8s.io", "v1", "leases", "Lease"),
    fields: &["spec.strategy", "spec.preferredHolder"],
};

/// The features `genplane apiserver` knows: its own, and those of the other roles
/// (NetworkRegistry, OrderedNamespaceDeletion), so that one `--feature-gates` reads alike in
/// every role and the feature-controller announces every feature of the binary.
pub fn registry() -> Registry {
    let mut registry = Registry::new();
    let added = registry.add(
        API_SERVER_IDENTITY,
        &[
            FeatureSpec::new(Version::new(1, 20), Stage::Alpha, false),
            FeatureSpec::new(Version::new(1, 26), Stage::Beta, true),
        ],
    );
    // The table above is static and valid; a test proves it.
    debug_assert!(added.is_ok(), "{added:?}");
    let added = registry.add_turn_off_task(API_SERVER_IDENTITY, DELETE_IDENTITY_LEASES);
    debug_assert!(added.is_ok(), "{added:?}");
    let added = registry.add(
        COORDINATED_LEADER_ELECTION,
        &[
            FeatureSpec::new(Version::new(1, 31), Stage::Alpha, false),
            FeatureSpec::new(Version::new(1, 33), Stage::Beta, false),
        ],
    );
    debug_assert!(added.is_ok(), "{added:?}");
    let added = registry.add_turn_off_task(COORDINATED_LEADER_ELECTION, CLEAR_LEASE_STRATEGY);
    debug_assert!(added.is_ok(), "{added:?}");
    // The Lease strategy reads it at every write, and it needs no other setting.
    let added = registry.allow_dynamic(COORDINATED_LEADER_ELECTION);
    debug_assert!(added.is_ok(), "{added:?}");
    // Consulted for each large answer (pkg/apiserver's compression filter): dynamic.
    let added = registry.add(
        API_RESPONSE_COMPRESSION,
        &[
            FeatureSpec::new(Version::new(1, 7), Stage::Alpha, false),
            FeatureSpec::new(Version::new(1, 16), Stage::Beta, true),
        ],
    );
    debug_assert!(added.is_ok(), "{added:?}");
    let added = registry.allow_dynamic(API_RESPONSE_COMPRESSION);
    debug_assert!(added.is_ok(), "{added:?}");
    // The API servers' flags decide it (they serve the API); every role registers it alike.
    let added = network_registry::register(&mut registry);
    debug_assert!(added.is_ok(), "{added:?}");
    // The controller-manager's namespace controller consults it; the API server's registry
    // is the binary's, so the feature-controller announces it.
    let added = controllers::register(&mut registry);
    debug_assert!(added.is_ok(), "{added:?}");
    let added = registry.add(
        MUTATING_ADMISSION_POLICY,
        &[FeatureSpec::new(Version::new(1, 30), Stage::Alpha, false)],
    );
    debug_assert!(added.is_ok(), "{added:?}");
    for task in REMOVE_MUTATING_ADMISSION_POLICIES {
        let added = registry.add_turn_off_task(MUTATING_ADMISSION_POLICY, task);
        debug_assert!(added.is_ok(), "{added:?}");
    }
    let added = registry.add(
        CLUSTER_TRUST_BUNDLE,
        &[
            FeatureSpec::new(Version::new(1, 27), Stage::Alpha, false),
            FeatureSpec::new(Version::new(1, 33), Stage::Beta, false),
        ],
    );
    debug_assert!(added.is_ok(), "{added:?}");
    let added = registry.add_turn_off_task(CLUSTER_TRUST_BUNDLE, REMOVE_CLUSTER_TRUST_BUNDLES);
    debug_assert!(added.is_ok(), "{added:?}");
    registry
}

/// What is wrong with `--dynamic-features` (`names`) for `registry`: features it does not
/// know, and features its binary reads only at start (not declared with
/// `Registry::allow_dynamic`), whose value set at run time would not take effect.
pub fn dynamic_feature_problems(registry: &Registry, names: &[String]) -> Vec<String> {
    names
        .iter()
        .filter_map(|name| {
            if registry
                .spec_at(name, genplane_component_base::version::KUBERNETES_VERSION)
                .is_none()
            {
                Some(format!("unrecognized feature gate: {name}"))
            } else if !registry.is_dynamic_capable(name) {
                Some(format!(
                    "{name} cannot be dynamic: genplane reads it only at start, so a value set \
                     at run time would not take effect"
                ))
            } else {
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use genplane_component_base::featuregate::{FeatureGateSettings, UseIdentity};

    #[test]
    fn identity_is_on_at_1_33_and_off_at_1_25() {
        let registry = registry();
        let at = |minor| {
            registry
                .resolve(
                    &FeatureGateSettings::default(),
                    Version::new(1, minor),
                    UseIdentity::new("apiserver", "test"),
                )
                .unwrap()
                .enabled(API_SERVER_IDENTITY)
        };
        assert!(at(33));
        assert!(!at(25));
    }
}
