//! The feature gates the built-in kinds' strategies consult (through
//! [`crate::resource::Context`]) or are served under ([`crate::resource::ResourceInfo::feature_gate`]):
//! a server's gates must know each of [`GATED_FEATURES`].

/// `CoordinatedLeaderElection` (KEP-4444): a Lease's `spec.strategy` and
/// `spec.preferredHolder`.
pub const COORDINATED_LEADER_ELECTION: &str = "CoordinatedLeaderElection";

/// `NetworkRegistry` (genplane's own; the draft KANA proposal): the
/// `networkregistry.genplane.io` API (NetworkClaim) is served, and the controller-manager runs
/// the registry controller and claims its well-known ranges, only while it is on. Alpha since
/// 1.33, off by default.
pub const NETWORK_REGISTRY: &str = "NetworkRegistry";

/// `MutatingAdmissionPolicy` (KEP-3962): the `admissionregistration.k8s.io/v1alpha1`
/// MutatingAdmissionPolicies and their bindings are served (with the group version enabled by
/// `--runtime-config`), and the admission plugin of the same name applies them, only while it
/// is on. Alpha since 1.30, off by default.
pub const MUTATING_ADMISSION_POLICY: &str = "MutatingAdmissionPolicy";

/// `ClusterTrustBundle` (KEP-3257): the `certificates.k8s.io/v1beta1` ClusterTrustBundles are
/// served (with the group version enabled by `--runtime-config`) only while it is on. Alpha
/// since 1.27, beta (still off by default) since 1.33.
pub const CLUSTER_TRUST_BUNDLE: &str = "ClusterTrustBundle";

/// Every feature gate a built-in kind's hooks consult or a built-in kind is served under.
pub const GATED_FEATURES: &[&str] = &[
    COORDINATED_LEADER_ELECTION,
    NETWORK_REGISTRY,
    MUTATING_ADMISSION_POLICY,
    CLUSTER_TRUST_BUNDLE,
];
