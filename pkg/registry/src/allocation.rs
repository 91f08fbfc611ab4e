//! What a resource's objects hold outside themselves: a Service's ClusterIP and node ports,
//! taken from ranges every Service shares (upstream's `BeginCreate`/`BeginUpdate`
//! transactions and `AfterDelete` hook of the Service storage).
//!
//! A [`Store`](crate::Store) given [`Allocations`] (`Store::with_allocations`) asks them, once
//! a create or update has been decoded, defaulted, admitted and validated and just before it
//! is stored, to allocate what the new object needs ([`Allocations::allocate`], which may fill
//! in the object: an allocated ClusterIP is written into `spec.clusterIP`). The answer is held
//! while the write goes to storage: a stored write [`Allocated::commit`]s it (what the old
//! object held and the new one no longer does is released then); a write that fails drops it,
//! which gives back what it took, so nothing leaks. Once an object has left storage (a delete,
//! a delete of a collection, or the update that removed the last finalizer of a deleting
//! object) the store calls [`Allocations::release`] with its last state.
//!
//! What is allocated lives in the process that serves the resource: a program seeds it from
//! the stored objects before it serves (one API server per storage).

use genplane_apimachinery::errors::ApiError;
use serde_json::Value;

/// What a write took, held until it is stored: dropped without [`Allocated::commit`] (the
/// write failed), it gives everything back.
pub trait Allocated: Send {
    /// The write was stored: keep what it took, and give back what the old object held that
    /// the new one does not.
    fn commit(self: Box<Self>);
}

/// The allocations of one resource's objects.
pub trait Allocations: Send + Sync {
    /// Allocates what `new` needs (filling in what was allocated), given the stored object
    /// `old` on an update; on a dry run (`dry_run`) checks without taking anything. An error
    /// (a requested value already taken, a range full) refuses the write.
    fn allocate(
        &self,
        new: &mut Value,
        old: Option<&Value>,
        dry_run: bool,
    ) -> Result<Option<Box<dyn Allocated>>, ApiError>;

    /// The object, in its last state, has left storage: gives back what it held.
    fn release(&self, object: &Value);
}
