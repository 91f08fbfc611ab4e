//! core/v1 resources.

pub mod configmap;
pub mod event;
pub mod namespace;
pub mod resourcequota;
pub mod secret;
pub mod serviceaccount;

/// The most data a ConfigMap or Secret may hold, in bytes (upstream's `MaxSecretSize`, 1 MiB).
pub const MAX_DATA_SIZE: usize = 1024 * 1024;

/// The message of a field that may not change (upstream's `ValidateImmutableField`).
pub(crate) const FIELD_IMMUTABLE: &str = "field is immutable";
