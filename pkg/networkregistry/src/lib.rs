//! KANA for genplane: the network registry's prefix index, its first-come-first-served
//! allocation, and a client library for components and third parties.
//!
//! Components claim IP ranges with `networkregistry.genplane.io/v1alpha1` NetworkClaims
//! (cluster-scoped; served while the `NetworkRegistry` feature gate is on). The registry
//! controller of `genplane controller-manager` (`--controllers` name `networkclaim`) decides
//! on every record with [`allocate()`]: claims in the order of their creation time and then
//! name, each record `Allocated` unless an allocated range of an earlier claim overlaps it
//! (then `Unavailable`, naming that claim). Overlaps are found in a prefix trie
//! ([`PrefixIndex`]) in both directions, in O(W) steps whatever the number of ranges.
//!
//! [`Registry`] is the client side: a watch-backed index of what the registry allocated, and
//! [`Registry::claim`] to claim ranges and wait for the verdict. [`well_known`] keeps the
//! claims components make from their flags (`kube-apiserver`, `kube-controller-manager`);
//! [`report`] is what `genplane networkregistry` prints.
//!
//! # A CNI plugin checks its pod range against the service ranges
//!
//! ```no_run
//! # async fn example(client: kube::Client) -> Result<(), genplane_networkregistry::Error> {
//! use std::time::Duration;
//! use genplane_api::networkregistry::networkclaim::{AddressRecord, ResourceReference};
//! use genplane_networkregistry::Registry;
//!
//! let registry = Registry::start(client).await?;
//! let pods = AddressRecord {
//!     reference: ResourceReference { group: String::new(), resource: "pods".into() },
//!     prefix: "10.244.0.0/16".into(),
//!     description: Some("pod network of my-cni".into()),
//! };
//! match registry.claim("my-cni", "my-cni", &[pods], Duration::from_secs(30)).await {
//!     Ok(_) => println!("10.244.0.0/16 is ours"),
//!     Err(genplane_networkregistry::Error::Unavailable { holder, message, .. }) => {
//!         eprintln!("the pod range collides with {holder}: {message}");
//!     }
//!     Err(other) => return Err(other),
//! }
//! # Ok(()) }
//! ```
//!
//! # A proxy reads the service ranges
//!
//! ```no_run
//! # async fn example(client: kube::Client) -> Result<(), genplane_networkregistry::Error> {
//! let registry = genplane_networkregistry::Registry::start(client).await?;
//! for range in registry.ranges_for("", "services") {
//!     println!("service range {} (claimed by {})", range.prefix, range.claim);
//! }
//! if let Some(owner) = registry.owner_of("10.96.0.10".parse().expect("an address")) {
//!     println!("10.96.0.10 belongs to {} for {}", owner.claim, owner.reference.resource);
//! }
//! # Ok(()) }
//! ```
//!
//! # Several clusters share one registry
//!
//! Point every cluster's components at one genplane API server that serves the registry (a
//! kubeconfig of their own), and let each cluster claim its ranges under its own names
//! (`cluster-a-pods`, `cluster-b-pods`): the first claim of a range wins, a second cluster's
//! overlapping claim is `Unavailable` naming the first, and any of them can ask
//! [`Registry::overlaps`] before choosing a range:
//!
//! ```no_run
//! # async fn example(shared: kube::Client) -> Result<(), genplane_networkregistry::Error> {
//! use genplane_api::networkregistry::Prefix;
//! let registry = genplane_networkregistry::Registry::start(shared).await?;
//! let wanted = Prefix::parse_canonical("10.8.0.0/16").expect("canonical");
//! for taken in registry.overlaps(&wanted) {
//!     println!("{} is taken by {} ({})", taken.prefix, taken.claim, taken.reference.resource);
//! }
//! # Ok(()) }
//! ```

pub mod allocate;
pub mod client;
pub mod index;
pub mod report;
pub mod well_known;

pub use allocate::{Allocation, Candidate, Verdict, allocate};
pub use client::{Error, Registry, network_claim_resource, read_claim};
pub use index::{Holding, PrefixIndex};
pub use well_known::WellKnown;

#[cfg(test)]
mod tests;
