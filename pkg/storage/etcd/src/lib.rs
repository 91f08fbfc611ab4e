//! The etcd v3 backend of the genplane storage contract.

#[cfg(feature = "test-util")]
pub mod testing;
