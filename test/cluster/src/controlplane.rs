//! The control plane: genplane's API server with this cluster's kinds added.
//!
//! Most kinds are served as a program's own kind is, from their catalog entry alone
//! ([`CompletedConfig::add_resource`]). Two need more than an entry, and show the library's
//! hooks for it:
//!
//! - **pods**: `pods/binding` creates are answered by [`Binder`], which writes the pods'
//!   storage (`Resource::with_answer`);
//! - **services**: the store allocates ClusterIPs and node ports with a
//!   [`ServiceAllocator`] (`Store::with_allocations`), seeded from the stored Services before
//!   the server serves.

use std::sync::Arc;

use genplane_apiserver::{Backing, Resource};
use genplane_controlplane::server::{CompletedConfig, Error};
use genplane_registry::ListOptions;

use crate::api::allocator::ServiceAllocator;
use crate::api::binder::Binder;
use crate::api::{endpoints, endpointslice, node, pod, service};

/// Why the cluster's kinds could not be added.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A kind's storage could not be set up.
    #[error("serving {resource}")]
    Storage {
        /// The resource.
        resource: &'static str,
        /// Why.
        source: Error,
    },
    /// The stored Services could not be read to seed the allocator.
    #[error("reading the stored services: {0}")]
    Services(genplane_apimachinery::errors::ApiError),
}

/// Adds nodes, pods (with `binding`), services (with allocation), endpoints and endpoint
/// slices to `completed`; returns the Services' allocator.
pub async fn add_cluster_kinds(
    completed: &mut CompletedConfig,
) -> Result<ServiceAllocator, SetupError> {
    for info in [&node::INFO, &endpoints::INFO, &endpointslice::INFO] {
        completed
            .add_resource(info)
            .map_err(|source| SetupError::Storage {
                resource: info.resource,
                source,
            })?;
    }
    let gates = completed.strategy_gates();
    let storage = |info: &'static genplane_api::catalog::ResourceInfo| {
        completed
            .storage_for(info)
            .map_err(|source| SetupError::Storage {
                resource: info.resource,
                source,
            })
    };

    let pods = storage(&pod::INFO)?;
    let binder = Arc::new(Binder::new(pods.clone(), gates.clone()));
    let pods = Resource::builtin_with_gates(&pod::INFO, pods, gates.clone()).with_answer(
        "binding",
        binder,
        gates.clone(),
    );

    let mut services =
        Resource::builtin_with_gates(&service::INFO, storage(&service::INFO)?, gates);
    let allocator = ServiceAllocator::new();
    if let Some(store) = services.store().cloned() {
        let stored = store
            .list("", &ListOptions::default())
            .await
            .map_err(SetupError::Services)?;
        allocator.seed(&stored.items);
        services.backing = Backing::Stored(store.with_allocations(Arc::new(allocator.clone())));
    }
    completed.resources.push(pods);
    completed.resources.push(services);
    Ok(allocator)
}
