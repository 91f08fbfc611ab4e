//! The feature gates the built-in kinds' strategies consult (through
//! [`crate::catalog::Context`]): a server's gates must know each of [`GATED_FEATURES`].

/// `CoordinatedLeaderElection` (KEP-4444): a Lease's `spec.strategy` and
/// `spec.preferredHolder`.
pub const COORDINATED_LEADER_ELECTION: &str = "CoordinatedLeaderElection";

/// Every feature gate a built-in kind's hooks consult.
pub const GATED_FEATURES: &[&str] = &[COORDINATED_LEADER_ELECTION];
